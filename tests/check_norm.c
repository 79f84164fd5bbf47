/* SPDX-License-Identifier: MIT */
/*
 * softmax, log_softmax, layer_norm, silu and scaled_dot_product_attention against PyTorch:
 * every case of tests/golden/norm_golden.h (dims, dtypes and dtype=, transposed, sliced and
 * expanded inputs, -inf/inf/NaN rows, empty and 0-d inputs, large inputs on the threaded
 * path, normalized shapes with and without weight and bias, attention with causal, boolean
 * and additive masks, errors) in functional and out= forms and on Meta, under each CPU
 * capability and with 1, 2 and 4 threads; the float32 exp over a dense sweep; allocation
 * failures.
 */
#include <math.h>

#include "testutil.h"
#include "golden/norm_golden.h"

#define NM_NCASES (sizeof(nm_cases) / sizeof(nm_cases[0]))

enum { OP_SOFTMAX, OP_LOG_SOFTMAX, OP_LAYER_NORM, OP_SILU, OP_SDPA };

static bool absent(const struct nm_operand *o)
{
	return !o->v && o->ndim == 0;
}

/* The operand in its layout (la_layout in the generator); formula values when not stored. */
static tn_tensor *make_operand(const struct nm_operand *o, tn_device dev)
{
	const int n = o->ndim;
	enum tn_dtype dt = (enum tn_dtype)o->dtype;
	int64_t numel = 1, mem[4];
	tn_tensor *vals, *base, *t;

	for (int d = 0; d < n; d++)
		numel *= o->shape[d];
	if (dev.type == TN_DEVICE_META) {
		ck_assert_tn_ok(tn_empty(n, o->shape, dt, dev, TN_CONTIGUOUS_FORMAT, &t));
		return t;
	}
	double *v = malloc((size_t)(numel ? numel : 1) * sizeof(double));
	ck_assert_ptr_nonnull(v);
	for (int64_t i = 0; i < numel; i++)
		v[i] = o->v ? o->v[i] : (double)((i * 7919) % 17 - 8) / 4;
	vals = tn_test_from_values(v, n, o->shape, dt);
	free(v);
	memcpy(mem, o->shape, sizeof(mem));
	switch (o->layout) {
	case 1:
		mem[n - 1] = o->shape[n - 2];
		mem[n - 2] = o->shape[n - 1];
		ck_assert_tn_ok(tn_empty(n, mem, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_transpose(base, -1, -2, &t));
		break;
	case 2:
		mem[n - 1] *= 2;
		ck_assert_tn_ok(tn_zeros(n, mem, dt, dev, &base));
		ck_assert_tn_ok(tn_slice(base, n - 1, 0, INT64_MAX, 2, &t));
		break;
	case 3: {
		tn_tensor *first;
		mem[0] = 1;
		ck_assert_tn_ok(tn_empty(n, mem, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_narrow(vals, 0, 0, 1, &first));
		ck_assert_tn_ok(tn_copy_(base, first, false));
		tn_tensor_unref(first);
		ck_assert_tn_ok(tn_expand(base, n, o->shape, &t));
		tn_tensor_unref(base);
		tn_tensor_unref(vals);
		return t;
	}
	default:
		ck_assert_tn_ok(tn_empty(n, o->shape, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		t = tn_tensor_ref(base);
		break;
	}
	ck_assert_tn_ok(tn_copy_(t, vals, false));
	tn_tensor_unref(base);
	tn_tensor_unref(vals);
	return t;
}

static int call(const struct nm_case *c, tn_tensor *const *t, tn_tensor *out, tn_tensor **ret)
{
	enum tn_dtype da = (enum tn_dtype)c->dtype_arg;
	const enum tn_dtype *dtype = c->dtype_arg >= 0 ? &da : NULL;
	switch (c->op) {
	case OP_SOFTMAX:
		return out ? tn_softmax_out(t[0], c->dim, dtype, out) : tn_softmax(t[0], c->dim, dtype, ret);
	case OP_LOG_SOFTMAX:
		return out ? tn_log_softmax_out(t[0], c->dim, dtype, out)
			   : tn_log_softmax(t[0], c->dim, dtype, ret);
	case OP_LAYER_NORM:
		return tn_layer_norm(t[0], c->nshape, c->nshape_v, t[1], t[2], c->eps, true, ret);
	case OP_SILU:
		return out ? tn_silu_out(t[0], out) : tn_silu(t[0], ret);
	default:
		return tn_scaled_dot_product_attention(t[0], t[1], t[2], c->has_mask ? t[3] : NULL,
						       c->error && strstr(c->error, "dropout") ? 1.5 : 0.0,
						       c->causal, c->has_scale ? &c->scale : NULL, ret);
	}
}

/*
 * Close enough for the dtype: our exp is within 1 ulp and sums run in another order; a
 * bfloat16 result within one bfloat16 ulp (both round once from float32, but the float32
 * values may differ in their last bits). bfloat16 layer_norm within 2^-4 absolute: libtensor
 * computes it in float32 and rounds once, PyTorch 1.13 accumulates its mean and variance in
 * bfloat16 arithmetic (its accumulator type for bfloat16 is bfloat16), off by up to 0.006 in
 * the mean here (a deliberate difference, in tn_layer_norm(3)).
 */
static bool close(int op, double got, double want, enum tn_dtype dt)
{
	if (got != got || want != want)
		return got != got && want != want;
	if (got == want)
		return true;
	double rtol = dt == TN_FLOAT64	 ? 1e-12
		      : dt == TN_FLOAT32 ? 2e-5
		      : dt == TN_FLOAT16 ? 2e-3
					 : 0x1p-7;
	/* bfloat16 log_softmax: PyTorch rounds max + log(sum) to bfloat16 before the
	 * subtraction, an absolute error of up to half a bfloat16 ulp of the row's scale. */
	double atol = dt == TN_FLOAT64	 ? 1e-13
		      : dt == TN_FLOAT32 ? 2e-6
		      : dt == TN_BFLOAT16 && op == OP_LOG_SOFTMAX ? 0x1p-6
		      : dt == TN_BFLOAT16 && op == OP_LAYER_NORM  ? 0x1p-4
								   : 2e-3;
	return fabs(got - want) <= rtol * fabs(want) + atol;
}

static void expect_values(size_t k, const struct nm_case *c, const tn_tensor *r, const char *form)
{
	int64_t idx[4] = { 0 }, i = 0;
	const int n = c->ndim;
	ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)c->dtype, "case %zu %s: dtype %s", k,
		      form, tn_dtype_name(tn_tensor_dtype(r)));
	ck_assert_int_eq(tn_tensor_ndim(r), n);
	for (int d = 0; d < n; d++)
		ck_assert_msg(tn_tensor_sizes(r)[d] == c->shape[d], "case %zu %s: size %d", k, form, d);
	if (tn_tensor_numel(r) == 0)
		return;
	for (;;) {
		if (i % c->rstep == 0) {
			double got = tn_test_get_double(r, idx), want = c->r[i / c->rstep];
			ck_assert_msg(close(c->op, got, want, (enum tn_dtype)c->dtype),
				      "case %zu (op %d) %s: element %lld is %.17g, PyTorch's %.17g", k,
				      c->op, form, (long long)i, got, want);
		}
		i++;
		int d = n - 1;
		while (d >= 0 && ++idx[d] == c->shape[d])
			idx[d--] = 0;
		if (d < 0)
			return;
	}
}

static void run_case(size_t k, tn_device dev)
{
	const struct nm_case *c = &nm_cases[k];
	bool meta = dev.type == TN_DEVICE_META;
	tn_tensor *t[4] = { NULL, NULL, NULL, NULL }, *r = NULL;
	for (int i = 0; i < 4; i++)
		if (!absent(&c->ops[i]))
			t[i] = make_operand(&c->ops[i], dev);

	tn_clear_error();
	int rc = call(c, t, NULL, &r);
	if (c->error) {
		/* Meta does not refuse dtypes without a CPU kernel (PyTorch's meta does not). */
		bool meta_dtype = meta && strstr(c->error, "not implemented for");
		ck_assert_msg(rc < 0 || meta_dtype, "case %zu (op %d): succeeded, PyTorch says '%s'",
			      k, c->op, c->error);
		ck_assert_msg(rc == 0 || strcmp(tn_last_error(), c->error) == 0,
			      "case %zu (op %d): '%s', PyTorch '%s'", k, c->op, tn_last_error(),
			      c->error);
		goto done;
	}
	ck_assert_msg(rc == 0, "case %zu (op %d): %s", k, c->op, tn_last_error());
	/* Results are contiguous, as PyTorch's. */
	ck_assert_msg(tn_tensor_is_contiguous(r), "case %zu: result not contiguous", k);
	if (meta) {
		ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
		ck_assert_int_eq(tn_tensor_dtype(r), c->dtype);
		goto done;
	}
	expect_values(k, c, r, "functional");
	if (c->op == OP_SOFTMAX || c->op == OP_LOG_SOFTMAX || c->op == OP_SILU) {
		/* out=: a transposed out for 2-d results, else a contiguous one. */
		tn_tensor *o, *out;
		int64_t sz[4];
		memcpy(sz, c->shape, sizeof(sz));
		bool tr = c->ndim == 2;
		if (tr) {
			sz[0] = c->shape[1];
			sz[1] = c->shape[0];
		}
		ck_assert_tn_ok(tn_full(c->ndim, sz, tn_scalar_int(7), &(enum tn_dtype){ c->dtype },
					TN_CPU, &o));
		if (tr)
			ck_assert_tn_ok(tn_transpose(o, 0, 1, &out));
		else
			out = tn_tensor_ref(o);
		tn_tensor_unref(o);
		ck_assert_msg(call(c, t, out, NULL) == 0, "case %zu out=: %s", k, tn_last_error());
		expect_values(k, c, out, "out=");
		tn_tensor_unref(out);
	}
done:
	tn_tensor_unref(r);
	for (int i = 0; i < 4; i++)
		tn_tensor_unref(t[i]);
}

START_TEST(test_goldens_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	struct tn_baseline b = tn_test_baseline();
	for (size_t k = 0; k < NM_NCASES; k++) {
		run_case(k, TN_CPU);
		if (want == 0)
			run_case(k, TN_META);
	}
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_goldens_with_threads)
{
	static const char *const counts[] = { "1", "2", "4" };
	setenv("TN_NUM_THREADS", counts[_i], 1);
	for (size_t k = 0; k < NM_NCASES; k++)
		if (nm_cases[k].rstep > 1)
			run_case(k, TN_CPU);
}
END_TEST

/*
 * The float32 exp inside softmax, over a dense sweep of its arguments: softmax([f, 0])[0] is
 * exp(f) / (exp(f) + 1), checked within 4 ulp (exp's error, the sum's and the division's)
 * of the same computed in double, for every 64th float32 from -0 down to -87.3 (about 17
 * million arguments; below, float32's exp is subnormal, which libtensor flushes to 0).
 */
START_TEST(test_exp_sweep)
{
	const int64_t per = 1 << 16;
	int64_t s2[2] = { per, 2 };
	tn_tensor *x, *y;
	uint32_t hi;
	memcpy(&hi, &(float){ -87.3f }, 4);
	ck_assert_tn_ok(tn_empty(2, s2, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &x));
	float *px = tn_tensor_data(x);
	for (uint64_t base = 0x80000000u; base <= hi; base += (uint64_t)per * 64) {
		for (int64_t i = 0; i < per; i++) {
			uint64_t u = base + (uint64_t)i * 64;
			uint32_t b = (uint32_t)(u <= hi ? u : hi);
			memcpy(&px[2 * i], &b, 4);
			px[2 * i + 1] = 0.0f;
		}
		ck_assert_tn_ok(tn_softmax(x, 1, NULL, &y));
		const float *py = tn_tensor_data(y);
		for (int64_t i = 0; i < per; i++) {
			double e = exp((double)px[2 * i]), want = e / (e + 1);
			ck_assert_msg(fabs(py[2 * i] - want) <= 4 * 0x1p-24 * want,
				      "softmax([%a, 0])[0] = %a, want %a", (double)px[2 * i],
				      (double)py[2 * i], want);
		}
		tn_tensor_unref(y);
	}
	tn_tensor_unref(x);
}
END_TEST

/* Errors the goldens do not reach: out= of another dtype or shape, dead handles, NULL. */
START_TEST(test_errors)
{
	int64_t s23[] = { 2, 3 };
	tn_tensor *a, *o;
	ck_assert_tn_ok(tn_ones(2, s23, TN_FLOAT32, TN_CPU, &a));
	ck_assert_tn_ok(tn_ones(2, s23, TN_FLOAT64, TN_CPU, &o));
	ck_assert_int_eq(tn_softmax_out(a, 1, NULL, o), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "Expected out tensor to have dtype float, but got double instead");
	ck_assert_tn_ok(tn_softmax_out(a, 1, &(enum tn_dtype){ TN_FLOAT64 }, o));
	ck_assert_double_eq_tol(tn_test_get_double(o, (int64_t[]){ 1, 2 }), 1.0 / 3, 1e-15);
	tn_tensor_unref(o);
	ck_assert_tn_ok(tn_ones(2, (int64_t[]){ 3, 3 }, TN_FLOAT32, TN_CPU, &o));
	ck_assert_int_eq(tn_log_softmax_out(a, 1, NULL, o), TN_EINVAL);
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "libtensor does not resize out= tensors"));
	tn_tensor_unref(o);
	ck_assert_int_eq(tn_softmax(a, 1, NULL, NULL), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "softmax: NULL ret_tensor");
	ck_assert_int_eq(tn_layer_norm(a, 1, (int64_t[]){ 3 }, NULL, NULL, 1e-5, true, NULL), TN_EINVAL);
	tn_tensor_unref(a);
}
END_TEST

/*
 * Attention dropout, PyTorch 2.x's math path: softmax(q k^T * scale), then dropout(p, train)
 * from the default generator, then times v. Checked against that composition with the
 * generator seeded alike (torch 1.13 has no scaled_dot_product_attention to compare with).
 */
START_TEST(test_attention_dropout)
{
	tn_tensor *q, *k, *v, *kt, *s, *sc, *w, *dw, *want, *got, *none;
	int64_t qs[] = { 2, 5, 8 }, vs[] = { 2, 6, 4 };
	tn_generator *g;
	ck_assert_tn_ok(tn_generator_new(&g));
	ck_assert_tn_ok(tn_randn(3, qs, g, TN_FLOAT32, TN_CPU, &q));
	ck_assert_tn_ok(tn_randn(3, (int64_t[]){ 2, 6, 8 }, g, TN_FLOAT32, TN_CPU, &k));
	ck_assert_tn_ok(tn_randn(3, vs, g, TN_FLOAT32, TN_CPU, &v));
	ck_assert_tn_ok(tn_transpose(k, -2, -1, &kt));
	ck_assert_tn_ok(tn_matmul(q, kt, &s));
	ck_assert_tn_ok(tn_mul_scalar(s, tn_scalar_double(1.0 / sqrt(8.0)), &sc));
	ck_assert_tn_ok(tn_softmax(sc, -1, NULL, &w));
	ck_assert_tn_ok(tn_manual_seed(77));
	ck_assert_tn_ok(tn_dropout(w, 0.4, true, &dw));
	ck_assert_tn_ok(tn_matmul(dw, v, &want));
	ck_assert_tn_ok(tn_manual_seed(77));
	ck_assert_tn_ok(tn_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, NULL, &got));
	ck_assert_int_eq(memcmp(tn_tensor_data(want), tn_tensor_data(got), 2 * 5 * 4 * sizeof(float)), 0);
	/* Some weights were dropped: the result is not the plain one. */
	ck_assert_tn_ok(tn_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, NULL, &none));
	ck_assert_int_ne(memcmp(tn_tensor_data(none), tn_tensor_data(got), 2 * 5 * 4 * sizeof(float)), 0);
	ck_assert_int_eq(tn_scaled_dot_product_attention(q, k, v, NULL, 1.5, false, NULL, &none), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "dropout probability has to be between 0 and 1, but got 1.5");
	tn_tensor *all[] = { q, k, v, kt, s, sc, w, dw, want, got, none };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		tn_tensor_unref(all[i]);
	tn_generator_unref(g);
}
END_TEST

static int c_softmax(tn_tensor **r, tn_tensor *const *t) { return tn_softmax(t[0], 0, NULL, r); }
static int c_softmax16(tn_tensor **r, tn_tensor *const *t) { return tn_softmax(t[1], -1, NULL, r); }
static int c_layer_norm(tn_tensor **r, tn_tensor *const *t)
{
	return tn_layer_norm(t[1], 1, (int64_t[]){ 5 }, t[2], t[2], 1e-5, true, r);
}
static int c_sdpa(tn_tensor **r, tn_tensor *const *t)
{
	return tn_scaled_dot_product_attention(t[0], t[0], t[0], NULL, 0.0, true, NULL, r);
}

START_TEST(test_allocation_failures)
{
	static const struct {
		const char *name;
		int (*fn)(tn_tensor **, tn_tensor *const *);
	} ctors[] = { { "softmax dim 0", c_softmax },
		      { "softmax bfloat16", c_softmax16 },
		      { "layer_norm bfloat16", c_layer_norm },
		      { "attention", c_sdpa } };
	tn_tensor *t[3];
	ck_assert_tn_ok(tn_ones(3, (int64_t[]){ 2, 4, 5 }, TN_FLOAT32, TN_CPU, &t[0]));
	ck_assert_tn_ok(tn_ones(2, (int64_t[]){ 4, 5 }, TN_BFLOAT16, TN_CPU, &t[1]));
	ck_assert_tn_ok(tn_ones(1, (int64_t[]){ 5 }, TN_BFLOAT16, TN_CPU, &t[2]));
	for (size_t k = 0; k < sizeof(ctors) / sizeof(ctors[0]); k++)
		tn_test_alloc_failures(ctors[k].name, ctors[k].fn, t);
	for (int i = 0; i < 3; i++)
		tn_tensor_unref(t[i]);
}
END_TEST

static Suite *norm_suite(void)
{
	Suite *s = suite_create("norm");
	TCase *tc = tcase_create("norm");
	tcase_add_loop_test(tc, test_goldens_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_goldens_with_threads, 0, 3);
	tcase_add_loop_test(tc, test_exp_sweep, 0, 1);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_attention_dropout);
	tcase_add_test(tc, test_allocation_failures);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(norm_suite)
