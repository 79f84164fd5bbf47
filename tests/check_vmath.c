/* SPDX-License-Identifier: MIT */
/*
 * check_vmath - the accuracy of the vectorised floating functions (kernels/vmath.h: SLEEF's
 * 1-ulp functions, IEEE arithmetic around them) and of the kernels' 16-bit conversions, under
 * each CPU capability, through the public operators.
 *
 * - float32: a dense sweep of the whole float32 range (every TN_VMATH_STRIDE-th bit pattern,
 *   default 16381, 262,000 arguments, plus the special values), against the function in
 *   long double; the error is in ulps of the float32 result.
 * - float64: as many pseudo-random arguments (half with every exponent equally likely, half
 *   in [-30, 30]) plus the special values, against long double.
 * - float16 and bfloat16: every one of the 65,536 values, against long double: the result must
 *   be the correctly rounded one to within 2^-12 of an ulp (the float32 result, within 1 ulp,
 *   is rounded once).
 * - pow and atan2: as many pseudo-random pairs each, float32 and float64.
 * - Conversions: float32 -> float16 and bfloat16 (the sweep, every rounding boundary) and
 *   back (all 65,536 values), bit for bit the exported scalar conversions.
 *
 * Special values are exact: NaN where the function is NaN, +-inf and +-0 with their signs, an
 * overflow to inf. Each test prints its table (function, dtype, capability, largest error,
 * where) to the log; the bounds asserted are the documented ones of libtensor-math(7).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "testutil.h"

/* ---- inputs ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static float f32_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static double f64_of(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

static const double specials[] = {
	0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-8, -1e-8,
	88.72283935546875, 88.7228317260742, -87.3365478515625, -103.97207641601562, -104.0,
	709.78, -745.2, 1e30, 3e38, -3e38, 1e300, 65504.0, 65520.0, 11.09, -17.33, 1.5707963267948966,
	3.141592653589793, 1e10, -1e10, 0.6931471805599453, -0.9999999, -1.0000001,
};
#define NSPECIAL ((int64_t)(sizeof(specials) / sizeof(specials[0])))

static int64_t sweep_stride(void)
{
	const char *e = getenv("TN_VMATH_STRIDE");
	long long s = e ? atoll(e) : 16381;
	return s < 1 ? 1 : s;
}

/* The float32 sweep and the special values (also float32's extremes). */
static float *f32_inputs(int64_t *n)
{
	const int64_t stride = sweep_stride();
	const int64_t m = ((int64_t)1 << 32) / stride + 1;
	float *x = malloc((size_t)(m + NSPECIAL + 6) * sizeof(float));
	ck_assert_ptr_nonnull(x);
	int64_t k = 0;
	for (int64_t u = 0; u < ((int64_t)1 << 32); u += stride)
		x[k++] = f32_of((uint32_t)u);
	for (int64_t i = 0; i < NSPECIAL; i++)
		x[k++] = (float)specials[i];
	const float extra[] = { FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f };
	for (int i = 0; i < 6; i++)
		x[k++] = extra[i];
	*n = k;
	return x;
}

static double *f64_inputs(int64_t *n)
{
	const int64_t m = ((int64_t)1 << 32) / sweep_stride();
	double *x = malloc((size_t)(m + NSPECIAL + 6) * sizeof(double));
	ck_assert_ptr_nonnull(x);
	int64_t k = 0;
	for (int64_t i = 0; i < m; i++) {
		/* Half the arguments uniform in bit pattern, half in a modest range where every
		 * function is finite and away from its overflow. */
		uint64_t r = next_u64();
		x[k++] = i & 1 ? f64_of(r) : ((double)(r >> 11) * 0x1p-53 - 0.5) * 60.0;
	}
	for (int64_t i = 0; i < NSPECIAL; i++)
		x[k++] = specials[i];
	const double extra[] = { DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN, 0x1p-1074, -0x1p-1074 };
	for (int i = 0; i < 6; i++)
		x[k++] = extra[i];
	*n = k;
	return x;
}

/* ---- the functions and their references ---- */

typedef int (*out_fn)(const tn_tensor *, tn_tensor *);

static int gelu_none_out(const tn_tensor *a, tn_tensor *o)
{
	return tn_gelu_out(a, "none", o);
}

static int gelu_tanh_out(const tn_tensor *a, tn_tensor *o)
{
	return tn_gelu_out(a, "tanh", o);
}

static long double r_rsqrt(long double x)
{
	return 1.0L / sqrtl(x);
}

static long double r_recip(long double x)
{
	return 1.0L / x;
}

static long double r_sigmoid(long double x)
{
	return 1.0L / (1.0L + expl(-x));
}

static long double r_silu(long double x)
{
	return x / (1.0L + expl(-x));
}

static long double r_gelu(long double x)
{
	return 0.5L * x * erfcl(-x / sqrtl(2.0L));
}

static long double r_gelu_tanh(long double x)
{
	const long double beta = sqrtl(2.0L) * (2.0L / sqrtl(3.14159265358979323846264338327950288L)) * 0.5L;
	return 0.5L * x * (1.0L + tanhl(beta * (x + 0.044715L * x * x * x)));
}

enum err_kind {
	ERR_ULP,   /* ulps of the result */
	ERR_INPUT, /* ulps of max(|x|, 1): where the formula cancels (gelu) */
};

struct fn {
	const char *name;
	out_fn op;
	long double (*ref)(long double);
	enum err_kind kind;
	double bound32, bound64; /* the largest error allowed, float32 and float64 */
};

/*
 * The bounds: SLEEF's u10 functions are within 1.0 ulp, float32's own erf and tanh (vmath.h)
 * within 1.5; sqrt and reciprocal are IEEE
 * operations (0.5 ulp); rsqrt rounds twice (1 / sqrt(x), as ATen: 1.5 ulps); sigmoid and silu add a rounding of 1 + exp(-x) and
 * of the division to exp's error. gelu is bounded relative to its input, where 1 + erf and
 * 1 + tanh cancel. float64's gelu (tanh form) carries the cancellation of the cube's
 * argument too.
 */
static const struct fn fns[] = {
	{ "exp", tn_exp_out, expl, ERR_ULP, 1.0, 1.0 },
	{ "expm1", tn_expm1_out, expm1l, ERR_ULP, 1.0, 1.0 },
	{ "log", tn_log_out, logl, ERR_ULP, 1.0, 1.0 },
	{ "log1p", tn_log1p_out, log1pl, ERR_ULP, 1.0, 1.0 },
	{ "log2", tn_log2_out, log2l, ERR_ULP, 1.0, 1.0 },
	{ "sin", tn_sin_out, sinl, ERR_ULP, 1.0, 1.0 },
	{ "cos", tn_cos_out, cosl, ERR_ULP, 1.0, 1.0 },
	{ "tan", tn_tan_out, tanl, ERR_ULP, 1.0, 1.0 },
	{ "tanh", tn_tanh_out, tanhl, ERR_ULP, 1.5, 1.0 },
	{ "erf", tn_erf_out, erfl, ERR_ULP, 1.5, 1.0 },
	{ "sqrt", tn_sqrt_out, sqrtl, ERR_ULP, 0.5, 0.5 },
	{ "rsqrt", tn_rsqrt_out, r_rsqrt, ERR_ULP, 1.5, 1.5 },
	{ "reciprocal", tn_reciprocal_out, r_recip, ERR_ULP, 0.5, 0.5 },
	{ "sigmoid", tn_sigmoid_out, r_sigmoid, ERR_ULP, 2.5, 2.5 },
	{ "silu", tn_silu_out, r_silu, ERR_ULP, 2.5, 2.5 },
	{ "gelu", gelu_none_out, r_gelu, ERR_INPUT, 4.0, 4.0 },
	{ "gelu_tanh", gelu_tanh_out, r_gelu_tanh, ERR_INPUT, 4.0, 4.0 },
};
#define NFNS ((int)(sizeof(fns) / sizeof(fns[0])))

/* ---- measuring ---- */

struct fmt {
	const char *name;
	int mant;    /* explicit mantissa bits */
	int emin;    /* exponent of the smallest normal */
	double maxv; /* the largest finite value */
};

static const struct fmt fmt_f32 = { "float32", 23, -126, FLT_MAX };
static const struct fmt fmt_f64 = { "float64", 52, -1022, DBL_MAX };
static const struct fmt fmt_f16 = { "float16", 10, -14, 65504.0 };
static const struct fmt fmt_bf16 = { "bfloat16", 7, -126, 0x1.fep127 };

/* One ulp of the format at magnitude @v (subnormals: the smallest). */
static long double ulp_at(long double v, const struct fmt *f)
{
	int e;
	v = fabsl(v);
	if (v == 0 || !isfinite(v))
		e = f->emin;
	else {
		frexpl(v, &e);
		e -= 1;
		if (e < f->emin)
			e = f->emin;
	}
	return ldexpl(1.0L, e - f->mant);
}

/*
 * The error of @got against @want (exact) for argument @x, in the units of @kind; special
 * values must match exactly (a return of INFINITY says they do not). A result beyond the
 * format's range stands for 2^(emax + 1), so an inf where the correctly rounded result is the
 * largest finite value costs about an ulp, not an infinity.
 */
static double error_of(long double got, long double want, long double x, enum err_kind kind,
		       const struct fmt *f)
{
	if (isnan(want) || isnan(got))
		return isnan(want) && isnan(got) ? 0 : INFINITY;
	if (got == 0 && want == 0)
		return signbit(got) == signbit(want) ? 0 : INFINITY;
	const long double top = ldexpl(1.0L, (int)ceill(log2l(f->maxv)));
	if (isinf(want) && isinf(got))
		return signbit(got) == signbit(want) ? 0 : INFINITY;
	if (isinf(got))
		got = copysignl(top, got);
	if (isinf(want))
		want = copysignl(top, want);
	long double unit = kind == ERR_INPUT ? ulp_at(fmaxl(fabsl(x), 1.0L), f)
					     : ulp_at(want, f);
	return (double)(fabsl(got - want) / unit);
}

struct worst {
	double err;
	long double x, got, want;
};

static void note(struct worst *w, double err, long double x, long double got, long double want)
{
	if (err > w->err || (w->err == 0 && err == 0 && w->x == 0)) {
		w->err = err;
		w->x = x;
		w->got = got;
		w->want = want;
	}
}

static void report(const char *fn, const struct fmt *f, const char *unit, const struct worst *w,
		   int64_t n, double bound)
{
	printf("vmath: %-10s %-8s %-7s max %8.4f %s (bound %.4g) at x=%.9Lg: %.17Lg, exact %.17Lg (%lld arguments)\n",
	       fn, f->name, tn_cpu_capability_name(tn_cpu_capability()), w->err, unit, bound, w->x,
	       w->got, w->want, (long long)n);
	ck_assert_msg(w->err <= bound, "%s %s under %s: %.4f %s at x=%.9Lg (got %.17Lg, exact %.17Lg)",
		      fn, f->name, tn_cpu_capability_name(tn_cpu_capability()), w->err, unit, w->x,
		      w->got, w->want);
}

/* sigmoid and silu follow ATen's formula: where exp(-x) overflows (x below -88.72 in float32,
 * -709.78 in float64) 1 / (1 + inf) is 0 (silu: -0), below the smallest normal value. */
static bool formula_underflow(const struct fn *fn, long double x, long double got,
			      const struct fmt *f)
{
	if (strcmp(fn->name, "sigmoid") != 0 && strcmp(fn->name, "silu") != 0)
		return false;
	const long double lim = f == &fmt_f64 ? -709.78L : -88.72L;
	long double y = strcmp(fn->name, "silu") == 0 ? got / x : got;
	return x < lim && fabsl(y) == 0;
}

static tn_tensor *blob(void *p, int64_t n, enum tn_dtype dt)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_from_blob(p, 1, &n, NULL, dt, NULL, NULL, &t));
	return t;
}

/* ---- the tests ---- */

START_TEST(test_float32_sweep)
{
	tn_test_force_capability(_i);
	int64_t n;
	float *x = f32_inputs(&n), *y = malloc((size_t)n * sizeof(float));
	ck_assert_ptr_nonnull(y);
	tn_tensor *tx = blob(x, n, TN_FLOAT32), *ty = blob(y, n, TN_FLOAT32);
	for (int k = 0; k < NFNS; k++) {
		const struct fn *fn = &fns[k];
		ck_assert_tn_ok(fn->op(tx, ty));
		struct worst w = { 0 };
		for (int64_t i = 0; i < n; i++) {
			long double want = (float)fn->ref(x[i]);
			/* The exact value for the error, its float32 rounding for the specials. */
			long double exact = fn->ref(x[i]);
			if (!isfinite(want) || want == 0)
				exact = want;
			if (formula_underflow(fn, x[i], y[i], &fmt_f32))
				continue;
			note(&w, error_of(y[i], exact, x[i], fn->kind, &fmt_f32), x[i], y[i], exact);
		}
		report(fn->name, &fmt_f32, fn->kind == ERR_INPUT ? "ulp(max(|x|,1))" : "ulp", &w, n,
		       fn->bound32);
	}
	tn_tensor_unref(tx);
	tn_tensor_unref(ty);
	free(x);
	free(y);
}
END_TEST

START_TEST(test_float64_sweep)
{
	tn_test_force_capability(_i);
	int64_t n;
	double *x = f64_inputs(&n), *y = malloc((size_t)n * sizeof(double));
	ck_assert_ptr_nonnull(y);
	tn_tensor *tx = blob(x, n, TN_FLOAT64), *ty = blob(y, n, TN_FLOAT64);
	for (int k = 0; k < NFNS; k++) {
		const struct fn *fn = &fns[k];
		ck_assert_tn_ok(fn->op(tx, ty));
		struct worst w = { 0 };
		for (int64_t i = 0; i < n; i++) {
			long double exact = fn->ref(x[i]);
			double want = (double)exact;
			if (!isfinite(want) || want == 0)
				exact = want;
			if (formula_underflow(fn, x[i], y[i], &fmt_f64))
				continue;
			note(&w, error_of(y[i], exact, x[i], fn->kind, &fmt_f64), x[i], y[i], exact);
		}
		report(fn->name, &fmt_f64, fn->kind == ERR_INPUT ? "ulp(max(|x|,1))" : "ulp", &w, n,
		       fn->bound64);
	}
	tn_tensor_unref(tx);
	tn_tensor_unref(ty);
	free(x);
	free(y);
}
END_TEST

/* Every 16-bit value through every function: the correctly rounded result, to within the
 * float32 result's error (2^-12 of an ulp for float16, 2^-15 for bfloat16, times the float32
 * bound). */
static void sweep16(enum tn_dtype dt, const struct fmt *f)
{
	const int64_t n = 65536;
	uint16_t *x = malloc(n * 2), *y = malloc(n * 2);
	ck_assert_ptr_nonnull(x);
	ck_assert_ptr_nonnull(y);
	for (int64_t i = 0; i < n; i++)
		x[i] = (uint16_t)i;
	tn_tensor *tx = blob(x, n, dt), *ty = blob(y, n, dt);
	for (int k = 0; k < NFNS; k++) {
		const struct fn *fn = &fns[k];
		/* bfloat16's gelu (tanh form) rounds every step to bfloat16, as ATen's: it is
		 * checked against ATen's goldens by check_unary, not against the exact value. */
		if (dt == TN_BFLOAT16 && fn->op == gelu_tanh_out)
			continue;
		ck_assert_tn_ok(fn->op(tx, ty));
		struct worst w = { 0 };
		for (int64_t i = 0; i < n; i++) {
			float xf = dt == TN_FLOAT16 ? tn_half_to_float((tn_half){ x[i] })
						    : tn_bfloat16_to_float((tn_bfloat16){ x[i] });
			float yf = dt == TN_FLOAT16 ? tn_half_to_float((tn_half){ y[i] })
						    : tn_bfloat16_to_float((tn_bfloat16){ y[i] });
			long double exact = fn->ref(xf);
			/* The correctly rounded 16-bit value decides the specials (overflow to
			 * inf, underflow to zero). */
			float r = (float)exact;
			float want16 = dt == TN_FLOAT16 ? tn_half_to_float(tn_half_from_float(r))
							: tn_bfloat16_to_float(tn_bfloat16_from_float(r));
			if (!isfinite(want16) || want16 == 0)
				exact = want16;
			if (formula_underflow(fn, xf, yf, f))
				continue;
			note(&w, error_of(yf, exact, xf, fn->kind, f), xf, yf, exact);
		}
		const double sub = dt == TN_FLOAT16 ? 0x1p-13 : 0x1p-16;
		const double bound = fn->kind == ERR_INPUT ? fn->bound32 : 0.5 + fn->bound32 * sub;
		report(fn->name, f, fn->kind == ERR_INPUT ? "ulp(max(|x|,1))" : "ulp", &w, n, bound);
	}
	tn_tensor_unref(tx);
	tn_tensor_unref(ty);
	free(x);
	free(y);
}

START_TEST(test_float16_all)
{
	tn_test_force_capability(_i);
	sweep16(TN_FLOAT16, &fmt_f16);
}
END_TEST

START_TEST(test_bfloat16_all)
{
	tn_test_force_capability(_i);
	sweep16(TN_BFLOAT16, &fmt_bf16);
}
END_TEST

/* pow and atan2 on as many pairs as the float32 sweep has arguments: bases over the whole range and exponents in [-64, 64] for
 * pow (and integral exponents for negative bases), arguments over the whole range for atan2. */
START_TEST(test_pow_atan2)
{
	tn_test_force_capability(_i);
	const int64_t n = ((int64_t)1 << 32) / sweep_stride();
	for (int d = 0; d < 2; d++) {
		const bool f64 = d == 1;
		const struct fmt *f = f64 ? &fmt_f64 : &fmt_f32;
		const enum tn_dtype dt = f64 ? TN_FLOAT64 : TN_FLOAT32;
		const size_t w = f64 ? 8 : 4;
		char *a = malloc(n * w), *b = malloc(n * w), *y = malloc(n * w);
		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(b);
		ck_assert_ptr_nonnull(y);
		tn_tensor *ta = blob(a, n, dt), *tb = blob(b, n, dt), *ty = blob(y, n, dt);
		for (int op = 0; op < 2; op++) {
			for (int64_t i = 0; i < n; i++) {
				uint64_t r = next_u64(), s = next_u64();
				long double av, bv;
				if (op == 0) {
					/* |base| with a uniform exponent, the exponent uniform in
					 * [-64, 64] (integral for a negative base). */
					av = f64 ? fabs(f64_of(r)) : fabsf(f32_of((uint32_t)r));
					bv = ((long double)(s >> 11) * 0x1p-53L - 0.5L) * 128.0L;
					if (i % 4 == 0) {
						av = -av;
						bv = roundl(bv);
					}
				} else {
					av = f64 ? f64_of(r) : f32_of((uint32_t)r);
					bv = f64 ? f64_of(s) : f32_of((uint32_t)s);
				}
				if (f64) {
					((double *)(void *)a)[i] = (double)av;
					((double *)(void *)b)[i] = (double)bv;
				} else {
					((float *)(void *)a)[i] = (float)av;
					((float *)(void *)b)[i] = (float)bv;
				}
			}
			ck_assert_tn_ok(op == 0 ? tn_pow_out(ta, tb, ty) : tn_atan2_out(ta, tb, ty));
			struct worst wst = { 0 }, sub = { 0 };
			for (int64_t i = 0; i < n; i++) {
				long double av = f64 ? ((double *)(void *)a)[i] : ((float *)(void *)a)[i];
				long double bv = f64 ? ((double *)(void *)b)[i] : ((float *)(void *)b)[i];
				long double yv = f64 ? ((double *)(void *)y)[i] : ((float *)(void *)y)[i];
				long double exact = op == 0 ? powl(av, bv) : atan2l(av, bv);
				long double rounded = f64 ? (long double)(double)exact
							  : (long double)(float)exact;
				if (!isfinite(rounded) || rounded == 0)
					exact = rounded;
				/* atan2 of the DEFAULT capability (SLEEF without FMA) loses up
				 * to 2 ulps where the result is near or below the smallest
				 * normal value: counted apart. */
				double e = error_of(yv, exact, av, ERR_ULP, f);
				if (op == 1 && fabsl(exact) < (f64 ? 0x1p-1000L : 0x1p-120L))
					note(&sub, e, av, yv, exact);
				else
					note(&wst, e, av, yv, exact);
			}
			report(op == 0 ? "pow" : "atan2", f, "ulp", &wst, n, 1.0);
			if (op == 1)
				report("atan2 (results below 2^-120 | 2^-1000)", f, "ulp", &sub, n, 2.0);
		}
		tn_tensor_unref(ta);
		tn_tensor_unref(tb);
		tn_tensor_unref(ty);
		free(a);
		free(b);
		free(y);
	}
}
END_TEST

/* The kernels' 16-bit conversions (F16C, vector shifts) against the exported scalar ones, bit
 * for bit: float32 -> 16-bit over the sweep and every halfway point, 16-bit -> float32 over
 * all values. */
START_TEST(test_conversions)
{
	tn_test_force_capability(_i);
	int64_t ns;
	float *sw = f32_inputs(&ns);
	/* Halfway and neighbouring points of both formats, over every exponent and sign. */
	const int64_t nh = 2 * 256 * 64 * 3;
	int64_t n = ns + nh;
	float *x = malloc((size_t)n * sizeof(float));
	ck_assert_ptr_nonnull(x);
	memcpy(x, sw, (size_t)ns * sizeof(float));
	int64_t k = ns;
	for (uint32_t sgn = 0; sgn < 2; sgn++)
		for (uint32_t e = 0; e < 256; e++)
			for (uint32_t m = 0; m < 64; m++)
				for (int j = -1; j <= 1; j++) {
					/* m's low bit picks float16's halfway (bit 12) or
					 * bfloat16's (bit 15). */
					uint32_t half = m & 1 ? 0x1000u : 0x8000u;
					uint32_t u = sgn << 31 | e << 23 | (m << 17) | half;
					x[k++] = f32_of(u + (uint32_t)j);
				}
	ck_assert_int_eq(k, n);
	uint16_t *h = malloc((size_t)n * 2), *b = malloc((size_t)n * 2);
	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(b);
	tn_tensor *tx = blob(x, n, TN_FLOAT32), *th = blob(h, n, TN_FLOAT16),
		  *tb = blob(b, n, TN_BFLOAT16);
	ck_assert_tn_ok(tn_copy_(th, tx, false));
	ck_assert_tn_ok(tn_copy_(tb, tx, false));
	for (int64_t i = 0; i < n; i++) {
		ck_assert_msg(h[i] == tn_half_from_float(x[i]).bits,
			      "float16 of %a: 0x%04x, scalar 0x%04x", x[i], h[i],
			      tn_half_from_float(x[i]).bits);
		ck_assert_msg(b[i] == tn_bfloat16_from_float(x[i]).bits,
			      "bfloat16 of %a: 0x%04x, scalar 0x%04x", x[i], b[i],
			      tn_bfloat16_from_float(x[i]).bits);
	}
	tn_tensor_unref(tx);
	tn_tensor_unref(th);
	tn_tensor_unref(tb);
	free(h);
	free(b);
	free(x);
	free(sw);

	/* All 16-bit values to float32. */
	const int64_t m = 65536;
	uint16_t *src = malloc(m * 2);
	float *dst = malloc(m * sizeof(float));
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	for (int64_t i = 0; i < m; i++)
		src[i] = (uint16_t)i;
	for (int d = 0; d < 2; d++) {
		enum tn_dtype dt = d ? TN_BFLOAT16 : TN_FLOAT16;
		tn_tensor *ts = blob(src, m, dt), *td = blob(dst, m, TN_FLOAT32);
		ck_assert_tn_ok(tn_copy_(td, ts, false));
		for (int64_t i = 0; i < m; i++) {
			float want = d ? tn_bfloat16_to_float((tn_bfloat16){ src[i] })
				       : tn_half_to_float((tn_half){ src[i] });
			ck_assert_msg(memcmp(&dst[i], &want, 4) == 0, "%s 0x%04x: %a, scalar %a",
				      tn_dtype_name(dt), src[i], dst[i], want);
		}
		tn_tensor_unref(ts);
		tn_tensor_unref(td);
	}
	free(src);
	free(dst);
}
END_TEST

static Suite *vmath_suite(void)
{
	Suite *s = suite_create("vmath");
	TCase *tc = tcase_create("vmath");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_float32_sweep, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_float64_sweep, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_float16_all, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_bfloat16_all, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_pow_atan2, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_conversions, 0, TN_NUM_CPU_CAPABILITIES);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(vmath_suite)
