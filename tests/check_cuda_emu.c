/* SPDX-License-Identifier: MIT */
/*
 * The CUDA kernels' per-thread code, emulated on the host (cuda/emulate.h), against the CPU
 * operators: real iterators built as the operators build them (libtensor/binary.c, unary.c,
 * where.c, copy.c, reduce.c), converted by tn__cuda_plan_from_iter, run through the same
 * bodies and grids as the device kernels, and compared element by element with tn_add etc.
 * on the same inputs: every dtype pair, contiguous, transposed, stepped, expanded (stride 0),
 * misaligned (offset views: no vector path) and zero-dim (scalar) operands, sizes around the
 * vector and unroll boundaries. Also the fast divider against '/', and the 32-bit split of a
 * fake large plan (coverage of every index, exactly once, without touching memory).
 *
 * Exactness: integer results, casts, comparisons, where, fill and the arithmetic operators
 * are bit-identical to the CPU. The transcendental unary and binary functions are compared
 * within a few ulp: on the host the emulation calls glibc as the CPU kernels do, but on a GPU
 * the same code calls CUDA's libdevice, whose documented error bounds are 1 to 4 ulp (expf 2,
 * logf 1, sinf 2, tanhf 2, erff 2, powf 4, atan2f 3...). Float sums and products differ from
 * the CPU's in the order of additions (a tree over threads and blocks against the CPU's
 * cascade), so they are compared with a relative tolerance.
 */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "backend.h"

extern const struct tn__device_ops tn__cuda_device_ops;

#include "../cuda/emulate.h"
#include "binary_internal.h"
#include "iter.h"

static const enum tn_dtype all_dtypes[] = { TN_BOOL,    TN_UINT8,    TN_INT8,    TN_INT16,
					    TN_INT32,   TN_INT64,    TN_FLOAT16, TN_BFLOAT16,
					    TN_FLOAT32, TN_FLOAT64 };
#define NDT 10

static bool is_float(enum tn_dtype dt)
{
	return dt >= TN_FLOAT16;
}

/* Deterministic values for @dtype: small integers, negatives, fractions and, for floats,
 * NaN, infinities and -0 now and then (@special). */
static bool g_nonzero; /* no zeros (integer divisors) */

static double value_at(int64_t i, int seed, enum tn_dtype dt, bool special)
{
	uint64_t h = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)seed * 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 32;
	if (dt == TN_BOOL)
		return (double)(h & 1);
	if (!is_float(dt)) {
		int64_t v = (int64_t)(h % 200) - 100;
		if (dt == TN_UINT8)
			v = (int64_t)(h % 256);
		if (dt == TN_INT64 && h % 17 == 0)
			v = (int64_t)(h >> 4) - (int64_t)(1ll << 58);
		if (g_nonzero && v == 0)
			v = 3;
		return (double)v;
	}
	if (special) {
		switch (h % 41) {
		case 0:
			return NAN;
		case 1:
			return INFINITY;
		case 2:
			return -INFINITY;
		case 3:
			return -0.0;
		default:
			break;
		}
	}
	return ((double)(int64_t)(h % 20001) - 10000.0) / 997.0;
}

/* A contiguous tensor of @dtype with @n dims of @sizes. */
static tn_tensor *make(enum tn_dtype dt, int n, const int64_t *sizes, int seed, bool special)
{
	int64_t numel = 1;
	for (int i = 0; i < n; i++)
		numel *= sizes[i];
	double *v = malloc((size_t)(numel ? numel : 1) * sizeof(double));
	for (int64_t i = 0; i < numel; i++)
		v[i] = value_at(i, seed, dt, special);
	tn_tensor *t = tn_test_from_values(v, n, sizes, dt);
	free(v);
	return t;
}

/* Layouts of the operands of a test: the logical shape is [rows, cols] (or [cols] when
 * rows is 0). */
enum layout { L_CONTIG, L_TRANSPOSED, L_STEPPED, L_EXPANDED, L_OFFSET, L_SCALAR, L_NLAYOUTS };

static tn_tensor *make_layout(enum tn_dtype dt, enum layout l, int64_t rows, int64_t cols,
			      int seed, bool special)
{
	tn_tensor *base, *t;
	int64_t s2[2] = { rows, cols }, s1[1] = { cols };
	switch (l) {
	case L_CONTIG:
		return rows ? make(dt, 2, s2, seed, special) : make(dt, 1, s1, seed, special);
	case L_TRANSPOSED: {
		if (!rows)
			return make(dt, 1, s1, seed, special);
		int64_t st[2] = { cols, rows };
		base = make(dt, 2, st, seed, special);
		ck_assert_tn_ok(tn_transpose(base, 0, 1, &t));
		break;
	}
	case L_STEPPED: {
		int64_t ss[2] = { rows, 2 * cols }, s1s[1] = { 2 * cols };
		base = rows ? make(dt, 2, ss, seed, special) : make(dt, 1, s1s, seed, special);
		ck_assert_tn_ok(tn_slice(base, rows ? 1 : 0, 0, 2 * cols, 2, &t));
		break;
	}
	case L_EXPANDED: {
		if (!rows)
			return make(dt, 1, s1, seed, special);
		int64_t se[2] = { 1, cols };
		base = make(dt, 2, se, seed, special);
		ck_assert_tn_ok(tn_expand(base, 2, s2, &t));
		break;
	}
	case L_OFFSET: {
		int64_t so[2] = { rows, cols + 1 }, s1o[1] = { cols + 1 };
		base = rows ? make(dt, 2, so, seed, special) : make(dt, 1, s1o, seed, special);
		ck_assert_tn_ok(tn_narrow(base, rows ? 1 : 0, 1, cols, &t));
		break;
	}
	default:
		return make(dt, 0, NULL, seed, special);
	}
	tn_tensor_unref(base);
	return t;
}

/* Raw element @i (row-major over the logical shape) of @t. */
static const unsigned char *elem(const tn_tensor *t, int64_t i)
{
	int n = tn_tensor_ndim(t);
	const int64_t *sz = tn_tensor_sizes(t), *st = tn_tensor_strides(t);
	int64_t off = 0;
	for (int d = n - 1; d >= 0; d--) {
		off += (i % sz[d]) * st[d];
		i /= sz[d];
	}
	return (const unsigned char *)tn_tensor_data(t) + off * (int64_t)tn_tensor_itemsize(t);
}

static double as_double(const unsigned char *p, enum tn_dtype dt)
{
	switch (dt) {
	case TN_BOOL:
		return *(const bool *)p;
	case TN_UINT8:
		return *p;
	case TN_INT8:
		return *(const int8_t *)p;
	case TN_INT16:
		return *(const int16_t *)p;
	case TN_INT32:
		return *(const int32_t *)p;
	case TN_INT64:
		return (double)*(const int64_t *)p;
	case TN_FLOAT16:
		return tn_half_to_float(*(const tn_half *)p);
	case TN_BFLOAT16:
		return tn_bfloat16_to_float(*(const tn_bfloat16 *)p);
	case TN_FLOAT32:
		return *(const float *)p;
	default:
		return *(const double *)p;
	}
}

/*
 * @got against @want: same shape and dtype; bit-identical elements (any NaN matching any NaN
 * when @ulps >= 0), or within @ulps units in the last place, or (@rel > 0) within a relative
 * tolerance. Returns the number of mismatches, printing the first.
 */
static int64_t compare_tensors_tol(const tn_tensor *got, const tn_tensor *want, double ulps,
				   double rel, double atol, const char *what)
{
	ck_assert_int_eq(tn_tensor_dtype(got), tn_tensor_dtype(want));
	ck_assert_int_eq(tn_tensor_numel(got), tn_tensor_numel(want));
	enum tn_dtype dt = tn_tensor_dtype(got);
	size_t isz = tn_tensor_itemsize(got);
	int64_t bad = 0;
	for (int64_t i = 0; i < tn_tensor_numel(got); i++) {
		const unsigned char *g = elem(got, i), *w = elem(want, i);
		if (memcmp(g, w, isz) == 0)
			continue;
		double gd = as_double(g, dt), wd = as_double(w, dt);
		if (is_float(dt)) {
			if (gd != gd && wd != wd)
				continue;
			if (ulps > 0 && tn_test_ulps(gd, wd, dt) <= ulps)
				continue;
			if ((rel > 0 || atol > 0) && fabs(gd - wd) <= atol + rel * fabs(wd))
				continue;
		}
		if (!bad)
			fprintf(stderr, "%s: element %lld: got %.17g, want %.17g (dtype %s)\n", what,
				(long long)i, gd, wd, tn_dtype_name(dt));
		bad++;
	}
	return bad;
}

static int64_t compare_tensors(const tn_tensor *got, const tn_tensor *want, double ulps,
			       double rel, const char *what)
{
	return compare_tensors_tol(got, want, ulps, rel, 0, what);
}

/* Build the iterator of @cfg, run family @fam on its plan in emulation, return output 0. */
static tn_tensor *emulate(struct tn_iter_config *cfg, int fam, int op, const void *arg,
			  double divisor)
{
	struct tn_iter it;
	struct tn__cuda_plan p;
	ck_assert_tn_ok(tn__iter_build(&it, cfg, "emu"));
	ck_assert_tn_ok(tn__cuda_plan_from_iter(&it, &p));
	ck_assert_int_eq(tn__cuda_emulate(&p, fam, op, arg, divisor), 0);
	tn_tensor *out = tn__iter_output(&it, 0);
	tn__iter_release(&it);
	return out;
}

static const int64_t sizes_1d[] = { 0, 1, 3, 4, 5, 127, 128, 129, 1031, 4099 };
#define NSIZES (sizeof(sizes_1d) / sizeof(sizes_1d[0]))

/* ---- IntDivider ---- */

START_TEST(test_divider)
{
	static const uint32_t ds[] = { 1,	  2,	     3,		 5,	     7,
				       10,	  127,	     128,	 1000,	     65535,
				       65536,	  65537,     1000003,	 0x7fffffffu, 0x80000000u,
				       0x80000001u, 0xfffffffeu, 0xffffffffu };
	uint64_t h = 1;
	for (size_t k = 0; k < sizeof(ds) / sizeof(ds[0]); k++) {
		uint32_t d = ds[k];
		for (int j = 0; j < 20000; j++) {
			h = h * 6364136223846793005ull + 1442695040888963407ull;
			uint32_t n = j < 8 ? (uint32_t)(0xffffffffu - j) : (uint32_t)(h >> 32);
			if (j >= 8 && j < 16)
				n = d * (uint32_t)(j - 8) - (j & 1);
			ck_assert_uint_eq(tn__cuda_emulate_div(n, d), n / d);
		}
	}
}
END_TEST

/* ---- the 32-bit split ---- */

struct cover {
	const struct tn__cuda_plan *whole;
	unsigned char *seen; /* one byte per element of the whole plan */
	int calls, accumulated;
};

/* Mark the linear indices (in the whole plan) a sub-plan covers: every operand's offset from
 * the whole plan's base is decoded back into an index with operand 1's strides. */
static int cover_fn(void *ctx, const struct tn__cuda_plan *sub, bool accumulate)
{
	struct cover *c = ctx;
	const struct tn__cuda_plan *w = c->whole;
	ck_assert(tn__cuda_plan_fits_32bit(sub));
	c->calls++;
	c->accumulated += accumulate;
	int64_t idx[TN_MAX_DIMS] = { 0 };
	/* The sub-plan's start, per dim, from operand 1's pointer offset (strides increase). */
	int64_t off = sub->ops[1].data - w->ops[1].data, start[TN_MAX_DIMS];
	for (int d = w->ndim - 1; d >= 0; d--) {
		start[d] = off / w->ops[1].strides[d];
		off -= start[d] * w->ops[1].strides[d];
	}
	ck_assert_int_eq(off, 0);
	for (int64_t n = 0; n < sub->numel; n++) {
		int64_t lin = 0, mul = 1;
		for (int d = 0; d < w->ndim; d++) {
			ck_assert_int_lt(start[d] + idx[d], w->shape[d]);
			lin += (start[d] + idx[d]) * mul;
			mul *= w->shape[d];
		}
		/* operand 0 must point where the whole plan's element is */
		int64_t o0 = sub->ops[0].data - w->ops[0].data, e0 = 0;
		for (int d = 0; d < w->ndim; d++)
			e0 += (start[d]) * w->ops[0].strides[d];
		ck_assert_int_eq(o0, e0);
		ck_assert_int_eq(c->seen[lin], 0);
		c->seen[lin] = 1;
		for (int d = 0; d < sub->ndim; d++) {
			if (++idx[d] < sub->shape[d])
				break;
			idx[d] = 0;
		}
	}
	return 0;
}

static void check_split(int ndim, const int64_t *shape, const int64_t *s0, const int64_t *s1,
			int min_calls)
{
	struct tn__cuda_plan p;
	memset(&p, 0, sizeof(p));
	p.ndim = ndim;
	p.numel = 1;
	p.ntensors = 2;
	p.noutputs = 1;
	for (int d = 0; d < ndim; d++) {
		p.shape[d] = shape[d];
		p.numel *= shape[d];
		p.ops[0].strides[d] = s0[d];
		p.ops[1].strides[d] = s1[d];
	}
	/* Fake pointers: never dereferenced. */
	p.ops[0].data = (char *)(uintptr_t)0x100000000000ull;
	p.ops[1].data = (char *)(uintptr_t)0x200000000000ull;
	struct cover c = { &p, calloc((size_t)p.numel, 1), 0, 0 };
	ck_assert_ptr_nonnull(c.seen);
	ck_assert(!tn__cuda_plan_fits_32bit(&p));
	ck_assert_int_eq(tn__cuda_plan_split(&p, cover_fn, &c), 0);
	for (int64_t i = 0; i < p.numel; i++)
		ck_assert_int_eq(c.seen[i], 1);
	ck_assert_int_ge(c.calls, min_calls);
	free(c.seen);
}

START_TEST(test_split)
{
	/* A column of 5 elements 1 GiB apart, operand 0 small: offsets past 2^31. */
	{
		int64_t shape[2] = { 3, 5 }, s0[2] = { 4, 12 }, s1[2] = { 4, (int64_t)1 << 30 };
		check_split(2, shape, s0, s1, 3);
	}
	/* Elements far apart along the fast dim, and a wide slow dim of float64. */
	{
		int64_t shape[3] = { 7, 6, 9 }, s0[3] = { (int64_t)3 << 29, 8, 48 },
			s1[3] = { 8, 56, 336 };
		check_split(3, shape, s0, s1, 4);
	}
	/* An operand of stride 0 along the split dim (a reduction's output): accumulate. */
	{
		struct tn__cuda_plan p;
		memset(&p, 0, sizeof(p));
		p.ndim = 1;
		p.shape[0] = 9;
		p.numel = 9;
		p.ntensors = 2;
		p.noutputs = 1;
		p.ops[0].strides[0] = 0;
		p.ops[1].strides[0] = (int64_t)1 << 29;
		p.ops[0].data = (char *)(uintptr_t)0x100000000000ull;
		p.ops[1].data = (char *)(uintptr_t)0x200000000000ull;
		struct cover c = { &p, calloc(9, 1), 0, 0 };
		ck_assert_int_eq(tn__cuda_plan_split(&p, cover_fn, &c), 0);
		for (int i = 0; i < 9; i++)
			ck_assert_int_eq(c.seen[i], 1);
		ck_assert_int_ge(c.calls, 3);
		ck_assert_int_eq(c.accumulated, c.calls - 1);
		free(c.seen);
	}
	/* numel itself past INT32_MAX with small strides splits too (fits checks numel). */
	{
		struct tn__cuda_plan p;
		memset(&p, 0, sizeof(p));
		p.ndim = 2;
		p.shape[0] = 65536;
		p.shape[1] = 65536;
		p.numel = (int64_t)1 << 32;
		p.ntensors = 1;
		p.noutputs = 1;
		p.ops[0].strides[0] = 0;
		p.ops[0].strides[1] = 0;
		ck_assert(!tn__cuda_plan_fits_32bit(&p));
		p.shape[1] = 32767;
		p.numel = 65536ll * 32767;
		ck_assert(tn__cuda_plan_fits_32bit(&p));
	}
}
END_TEST

/* ---- copy (cast) ---- */

static void check_copy(enum tn_dtype dd, enum tn_dtype sd, enum layout ls, enum layout ld,
		       int64_t rows, int64_t cols)
{
	tn_tensor *src = make_layout(sd, ls, rows, cols, 1, true);
	tn_tensor *d1 = make_layout(dd, ld, rows, cols, 2, false);
	tn_tensor *d2 = make_layout(dd, ld, rows, cols, 2, false);
	if (ls == L_SCALAR) { /* a 0-dim source fills */
		tn_tensor_unref(src);
		src = make(sd, 0, NULL, 1, true);
	}
	ck_assert_tn_ok(tn_copy_(d1, src, false));
	struct tn_iter_config cfg;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = d2;
	cfg.tensors[1] = src;
	cfg.resize_outputs = false;
	cfg.check_all_same_dtype = false;
	tn_tensor *o = emulate(&cfg, TN_CUDA_COPY, 0, NULL, 1);
	tn_tensor_unref(o);
	char what[128];
	snprintf(what, sizeof(what), "copy %s <- %s layouts %d <- %d [%lld, %lld]",
		 tn_dtype_name(dd), tn_dtype_name(sd), ld, ls, (long long)rows, (long long)cols);
	ck_assert_int_eq(compare_tensors(d2, d1, 0, 0, what), 0);
	tn_tensor_unref(src);
	tn_tensor_unref(d1);
	tn_tensor_unref(d2);
}

START_TEST(test_copy_pairs)
{
	for (int i = 0; i < NDT; i++)
		for (int j = 0; j < NDT; j++) {
			check_copy(all_dtypes[i], all_dtypes[j], L_CONTIG, L_CONTIG, 0, 1031);
			check_copy(all_dtypes[i], all_dtypes[j], L_TRANSPOSED, L_CONTIG, 13, 37);
			check_copy(all_dtypes[i], all_dtypes[j], L_SCALAR, L_CONTIG, 0, 129);
		}
}
END_TEST

START_TEST(test_copy_layouts)
{
	static const enum tn_dtype dts[] = { TN_FLOAT32, TN_FLOAT16, TN_UINT8, TN_FLOAT64 };
	for (size_t a = 0; a < 4; a++)
		for (size_t b = 0; b < 4; b++)
			for (int ls = 0; ls < L_SCALAR; ls++)
				for (int ld = 0; ld < L_SCALAR; ld++) {
					if (ld == L_EXPANDED)
						continue; /* not writable */
					for (size_t s = 0; s < NSIZES; s++)
						check_copy(dts[a], dts[b], ls, ld, 0, sizes_1d[s]);
					check_copy(dts[a], dts[b], ls, ld, 5, 67);
				}
}
END_TEST

/* ---- binary and compare ---- */

/* A contiguous copy of @t converted to @dt. */
static tn_tensor *to_dtype(const tn_tensor *t, enum tn_dtype dt)
{
	tn_tensor *r;
	ck_assert_tn_ok(tn_empty(tn_tensor_ndim(t), tn_tensor_sizes(t), dt, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &r));
	ck_assert_tn_ok(tn_copy_(r, t, false));
	return r;
}

typedef int (*bin_fn)(const tn_tensor *, const tn_tensor *, tn_tensor **);

static int cpu_add(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_add(a, b, tn_scalar_int(1), r);
}
static int cpu_add3(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_add(a, b, tn_scalar_int(3), r);
}
static int cpu_addf(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_add(a, b, tn_scalar_double(-0.375), r);
}
static int cpu_sub(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_sub(a, b, tn_scalar_int(2), r);
}

static const struct {
	int op;
	bin_fn fn;
	struct tn__alpha alpha;
	bool float_alpha; /* only for floating results */
} binops[] = {
	{ TN_BINOP_ADD, cpu_add, { 1.0, 1, true }, false },
	{ TN_BINOP_ADD, cpu_add3, { 3.0, 3, true }, false },
	{ TN_BINOP_ADD, cpu_addf, { -0.375, 0, true }, true },
	{ TN_BINOP_SUB, cpu_sub, { 2.0, 2, true }, false },
	{ TN_BINOP_MUL, tn_mul, { 1.0, 1, true }, false },
	{ TN_BINOP_DIV, tn_div, { 1.0, 1, true }, false },
};
#define NBINOPS (sizeof(binops) / sizeof(binops[0]))

static const bin_fn cmpfns[] = { tn_eq, tn_ne, tn_lt, tn_le, tn_gt, tn_ge };

/* @fam: TN_CUDA_BINARY with binops[@k], or TN_CUDA_COMPARE with TN_CMP @k. */
static void check_binary(int fam, int k, enum tn_dtype da, enum tn_dtype db, enum layout la,
			 enum layout lb, int64_t rows, int64_t cols)
{
	tn_tensor *a = make_layout(da, la, rows, cols, 3, true);
	tn_tensor *b = make_layout(db, lb, rows, cols, 4, true);
	tn_tensor *want;
	bool cmp = fam == TN_CUDA_COMPARE;
	int rc = cmp ? cmpfns[k](a, b, &want) : binops[k].fn(a, b, &want);
	if (rc < 0) { /* refused by the CPU operator (bool subtraction, float alpha): skip */
		tn_tensor_unref(a);
		tn_tensor_unref(b);
		return;
	}
	enum tn_dtype rt = tn_tensor_dtype(want);
	double al = cmp ? 1.0 : binops[k].alpha.d;
	if (!cmp && (rt == TN_FLOAT16 || rt == TN_BFLOAT16) && al != 1.0 && al != -1.0) {
		/*
		 * PyTorch's CUDA add and sub compute a + alpha * b in float (opmath) and round
		 * once; its CPU kernels round alpha * b to the 16-bit dtype first (float16 always,
		 * bfloat16 on strided rows), so the two devices differ in the last bit. The CUDA
		 * reference is the float32 operator on the inputs converted to the result dtype,
		 * rounded to it.
		 */
		tn_tensor *ah = to_dtype(a, rt), *bh = to_dtype(b, rt);
		tn_tensor *a32 = to_dtype(ah, TN_FLOAT32), *b32 = to_dtype(bh, TN_FLOAT32), *w32;
		tn_tensor_unref(ah);
		tn_tensor_unref(bh);
		ck_assert_tn_ok(binops[k].fn(a32, b32, &w32));
		tn_tensor_unref(want);
		want = to_dtype(w32, rt);
		tn_tensor_unref(w32);
		tn_tensor_unref(a32);
		tn_tensor_unref(b32);
	}
	struct tn_iter_config cfg;
	tn__bin_config(&cfg, NULL, a, false, b, false);
	if (cmp) {
		cfg.check_all_same_dtype = false;
		cfg.has_output_dtype = true;
		cfg.output_dtype = TN_BOOL;
	} else {
		cfg.cast_common_dtype_to_outputs = true;
		cfg.enforce_safe_casting_to_output = true;
		cfg.promote_integer_inputs_to_float = binops[k].op == TN_BINOP_DIV;
	}
	tn_tensor *got = emulate(&cfg, fam, cmp ? k : binops[k].op, cmp ? NULL : &binops[k].alpha, 1);
	char what[160];
	snprintf(what, sizeof(what), "%s %d: %s, %s layouts %d, %d [%lld, %lld]",
		 cmp ? "compare" : "binary", k, tn_dtype_name(da), tn_dtype_name(db), la, lb,
		 (long long)rows, (long long)cols);
	ck_assert_int_eq(compare_tensors(got, want, 0, 0, what), 0);
	tn_tensor_unref(got);
	tn_tensor_unref(want);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}

START_TEST(test_binary_pairs)
{
	for (size_t k = 0; k < NBINOPS; k++)
		for (int i = 0; i < NDT; i++)
			for (int j = 0; j < NDT; j++) {
				check_binary(TN_CUDA_BINARY, (int)k, all_dtypes[i], all_dtypes[j],
					     L_CONTIG, L_CONTIG, 0, 133);
				check_binary(TN_CUDA_BINARY, (int)k, all_dtypes[i], all_dtypes[j],
					     L_TRANSPOSED, L_SCALAR, 3, 11);
			}
}
END_TEST

START_TEST(test_compare_pairs)
{
	for (int k = 0; k < 6; k++)
		for (int i = 0; i < NDT; i++)
			for (int j = 0; j < NDT; j++) {
				check_binary(TN_CUDA_COMPARE, k, all_dtypes[i], all_dtypes[j],
					     L_CONTIG, L_CONTIG, 0, 133);
				check_binary(TN_CUDA_COMPARE, k, all_dtypes[i], all_dtypes[j],
					     L_STEPPED, L_EXPANDED, 4, 9);
			}
}
END_TEST

START_TEST(test_binary_layouts)
{
	static const enum tn_dtype dts[] = { TN_FLOAT32, TN_FLOAT16, TN_INT64, TN_UINT8 };
	for (size_t d = 0; d < 4; d++)
		for (int la = 0; la < L_NLAYOUTS; la++)
			for (int lb = 0; lb < L_NLAYOUTS; lb++) {
				for (size_t s = 0; s < NSIZES; s++)
					check_binary(TN_CUDA_BINARY, 0, dts[d], dts[d], la, lb, 0,
						     sizes_1d[s]);
				check_binary(TN_CUDA_BINARY, 4, dts[d], dts[d], la, lb, 7, 129);
				check_binary(TN_CUDA_COMPARE, 2, dts[d], dts[d], la, lb, 0, 1031);
			}
}
END_TEST

/* ---- where ---- */

static void check_where(enum tn_dtype dc, enum tn_dtype da, enum tn_dtype db, enum layout lc,
			enum layout la, int64_t rows, int64_t cols)
{
	tn_tensor *c = make_layout(dc, lc, rows, cols, 5, false);
	tn_tensor *a = make_layout(da, la, rows, cols, 6, true);
	tn_tensor *b = make_layout(db, L_CONTIG, rows, cols, 7, true);
	tn_tensor *want;
	ck_assert_tn_ok(tn_where(c, a, b, &want));
	enum tn_dtype dts[2] = { da, db };
	enum tn__prio prio[2] = { tn_tensor_ndim(a) ? TN_PRIO_DIM : TN_PRIO_ZERO, TN_PRIO_DIM };
	struct tn_iter_config cfg;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 3;
	cfg.tensors[0] = NULL;
	cfg.tensors[1] = c;
	cfg.tensors[2] = a;
	cfg.tensors[3] = b;
	cfg.check_all_same_dtype = false;
	cfg.has_static_dtype = true;
	cfg.static_dtype = tn__result_type(2, dts, prio);
	tn_tensor *got = emulate(&cfg, TN_CUDA_WHERE, 0, NULL, 1);
	char what[160];
	snprintf(what, sizeof(what), "where %s ? %s : %s layouts %d %d [%lld, %lld]",
		 tn_dtype_name(dc), tn_dtype_name(da), tn_dtype_name(db), lc, la,
		 (long long)rows, (long long)cols);
	ck_assert_int_eq(compare_tensors(got, want, 0, 0, what), 0);
	tn_tensor_unref(got);
	tn_tensor_unref(want);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
	tn_tensor_unref(c);
}

START_TEST(test_where)
{
	for (int i = 0; i < NDT; i++)
		for (int j = 0; j < NDT; j++) {
			check_where(TN_BOOL, all_dtypes[i], all_dtypes[j], L_CONTIG, L_CONTIG, 0, 131);
			check_where(TN_UINT8, all_dtypes[i], all_dtypes[j], L_EXPANDED, L_SCALAR, 3,
				    17);
		}
	for (int lc = 0; lc < L_SCALAR; lc++)
		for (int la = 0; la < L_NLAYOUTS; la++)
			for (size_t s = 0; s < NSIZES; s++)
				check_where(TN_BOOL, TN_FLOAT32, TN_FLOAT32, lc, la, 0, sizes_1d[s]);
}
END_TEST

/* ---- fill ---- */

START_TEST(test_fill)
{
	for (int i = 0; i < NDT; i++)
		for (int l = 0; l < L_SCALAR; l++) {
			if (l == L_EXPANDED)
				continue;
			for (size_t s = 0; s < NSIZES; s++) {
				tn_tensor *want = make_layout(all_dtypes[i], l, 0, sizes_1d[s], 8, false);
				tn_tensor *got = make_layout(all_dtypes[i], l, 0, sizes_1d[s], 8, false);
				tn_scalar v = is_float(all_dtypes[i]) ? tn_scalar_double(-2.75)
					      : all_dtypes[i] == TN_BOOL ? tn_scalar_bool(true)
									 : tn_scalar_int(93);
				ck_assert_tn_ok(tn_fill_(want, v));
				_Alignas(8) unsigned char e[8];
				ck_assert_tn_ok(tn__scalar_to_element(v, all_dtypes[i], e));
				struct tn_iter_config cfg;
				tn__iter_config_init(&cfg);
				cfg.noutputs = 1;
				cfg.ninputs = 0;
				cfg.tensors[0] = got;
				cfg.resize_outputs = false;
				tn_tensor *o = emulate(&cfg, TN_CUDA_FILL, 0, e, 1);
				tn_tensor_unref(o);
				ck_assert_int_eq(compare_tensors(got, want, 0, 0, "fill"), 0);
				tn_tensor_unref(want);
				tn_tensor_unref(got);
			}
		}
}
END_TEST


/* The comparison itself finds a wrong result (so that the tests above can fail). */
START_TEST(test_detects_mismatch)
{
	int64_t n[1] = { 129 };
	tn_tensor *a = make(TN_FLOAT32, 1, n, 3, false), *b = make(TN_FLOAT32, 1, n, 4, false);
	tn_tensor *want;
	ck_assert_tn_ok(tn_sub(a, b, tn_scalar_int(1), &want));
	struct tn_iter_config cfg;
	tn__bin_config(&cfg, NULL, a, false, b, false);
	struct tn__alpha al = { 1.0, 1, true };
	tn_tensor *got = emulate(&cfg, TN_CUDA_BINARY, TN_BINOP_ADD, &al, 1);
	ck_assert_int_gt(compare_tensors(got, want, 0, 0, "expected mismatch"), 100);
	tn_tensor_unref(got);
	tn_tensor_unref(want);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}
END_TEST

/* ---- unary and predicates ---- */

typedef int (*un_fn)(const tn_tensor *, tn_tensor **);
static int gelu_none(const tn_tensor *a, tn_tensor **r)
{
	return tn_gelu(a, "none", r);
}
static int gelu_tanh(const tn_tensor *a, tn_tensor **r)
{
	return tn_gelu(a, "tanh", r);
}

static const struct {
	un_fn fn;
	bool floating, same_dtype, transcendental;
} unfns[TN_NUM_UNOPS] = {
	[TN_UN_NEG] = { tn_neg, false, false, false },
	[TN_UN_ABS] = { tn_abs, false, false, false },
	[TN_UN_SIGN] = { tn_sign, false, false, false },
	[TN_UN_EXP] = { tn_exp, true, false, true },
	[TN_UN_EXPM1] = { tn_expm1, true, false, true },
	[TN_UN_LOG] = { tn_log, true, false, true },
	[TN_UN_LOG1P] = { tn_log1p, true, false, true },
	[TN_UN_LOG2] = { tn_log2, true, false, true },
	[TN_UN_SQRT] = { tn_sqrt, true, false, false },
	[TN_UN_RSQRT] = { tn_rsqrt, true, false, false },
	[TN_UN_SIN] = { tn_sin, true, false, true },
	[TN_UN_COS] = { tn_cos, true, false, true },
	[TN_UN_TAN] = { tn_tan, true, false, true },
	[TN_UN_TANH] = { tn_tanh, true, false, true },
	[TN_UN_SIGMOID] = { tn_sigmoid, true, false, true },
	[TN_UN_RELU] = { tn_relu, false, false, false },
	[TN_UN_ERF] = { tn_erf, true, false, true },
	[TN_UN_FLOOR] = { tn_floor, false, false, false },
	[TN_UN_CEIL] = { tn_ceil, false, false, false },
	[TN_UN_ROUND] = { tn_round, false, false, false },
	[TN_UN_TRUNC] = { tn_trunc, false, false, false },
	[TN_UN_RECIPROCAL] = { tn_reciprocal, true, false, false },
	[TN_UN_GELU] = { gelu_none, false, true, true },
	[TN_UN_GELU_TANH] = { gelu_tanh, false, true, true },
	[TN_UN_BITWISE_NOT] = { tn_bitwise_not, false, true, false },
	[TN_UN_SILU] = { tn_silu, false, true, true },
};

static void check_unary(int op, enum tn_dtype dt, enum layout l, int64_t rows, int64_t cols)
{
	tn_tensor *a = make_layout(dt, l, rows, cols, 9, true), *want;
	if (unfns[op].fn(a, &want) < 0) { /* refused for this dtype */
		tn_tensor_unref(a);
		return;
	}
	if (op == TN_UN_GELU_TANH && dt == TN_BFLOAT16) {
		/*
		 * PyTorch's CPU gelu(approximate='tanh') of bfloat16 rounds each operation to
		 * bfloat16 (tn_gelu(3)); its CUDA kernel computes in float (opmath) and rounds
		 * once. The CUDA reference is the float32 operator, rounded to bfloat16.
		 */
		tn_tensor *a32 = to_dtype(a, TN_FLOAT32), *w32;
		ck_assert_tn_ok(unfns[op].fn(a32, &w32));
		tn_tensor_unref(want);
		want = to_dtype(w32, TN_BFLOAT16);
		tn_tensor_unref(w32);
		tn_tensor_unref(a32);
	}
	struct tn_iter_config cfg;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = NULL;
	cfg.tensors[1] = a;
	if (!unfns[op].same_dtype) {
		cfg.promote_inputs_to_common_dtype = true;
		cfg.promote_integer_inputs_to_float = unfns[op].floating;
		cfg.cast_common_dtype_to_outputs = true;
		cfg.enforce_safe_casting_to_output = true;
	}
	tn_tensor *got = emulate(&cfg, TN_CUDA_UNARY, op, NULL, 1);
	char what[128];
	snprintf(what, sizeof(what), "unary %d %s layout %d [%lld, %lld]", op, tn_dtype_name(dt),
		 l, (long long)rows, (long long)cols);
	/*
	 * 4 ulp allowed for the transcendental functions: the emulation calls glibc, the CPU
	 * kernels SLEEF's 1-ulp functions and their own (libtensor-math(7)), a GPU libdevice.
	 * gelu cancels (1 + erf) in its negative tail and the CPU's float32 gelu takes ATen's erf
	 * approximation: its error is bounded relative to the input (|x| < 16 here), not the
	 * result.
	 */
	double atol = 0;
	if (op == TN_UN_GELU || op == TN_UN_GELU_TANH)
		atol = 4 * 16 * (dt == TN_FLOAT64 ? 0x1p-52 : 0x1p-23);
	ck_assert_int_eq(compare_tensors_tol(got, want, unfns[op].transcendental ? 4 : 0, 0, atol,
					     what),
			 0);
	tn_tensor_unref(got);
	tn_tensor_unref(want);
	tn_tensor_unref(a);
}

START_TEST(test_unary)
{
	for (int op = 0; op < TN_NUM_UNOPS; op++)
		for (int i = 0; i < NDT; i++) {
			check_unary(op, all_dtypes[i], L_CONTIG, 0, 1031);
			check_unary(op, all_dtypes[i], L_TRANSPOSED, 9, 13);
			check_unary(op, all_dtypes[i], L_OFFSET, 0, 129);
		}
}
END_TEST

static const un_fn predfns[] = { tn_logical_not, tn_isnan, tn_isinf, tn_isfinite };

START_TEST(test_pred)
{
	for (int op = 0; op < 4; op++)
		for (int i = 0; i < NDT; i++)
			for (int l = 0; l < L_SCALAR; l++) {
				tn_tensor *a = make_layout(all_dtypes[i], l, 5, 131, 10, true), *want;
				ck_assert_tn_ok(predfns[op](a, &want));
				struct tn_iter_config cfg;
				tn__iter_config_init(&cfg);
				cfg.noutputs = 1;
				cfg.ninputs = 1;
				cfg.tensors[1] = a;
				cfg.check_all_same_dtype = false;
				cfg.has_output_dtype = true;
				cfg.output_dtype = TN_BOOL;
				tn_tensor *got = emulate(&cfg, TN_CUDA_PRED, op, NULL, 1);
				ck_assert_int_eq(compare_tensors(got, want, 0, 0, "pred"), 0);
				tn_tensor_unref(got);
				tn_tensor_unref(want);
				tn_tensor_unref(a);
			}
}
END_TEST

/* ---- the other binary operators ---- */

static int cpu_div_trunc(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_div_mode(a, b, "trunc", r);
}
static int cpu_div_floor(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_div_mode(a, b, "floor", r);
}

enum { B2_BINARY, B2_FLOAT, B2_LOGICAL };
static const struct {
	int op;
	bin_fn fn;
	int kind;
	bool transcendental;
} bin2fns[] = {
	{ TN_BIN2_DIV_TRUNC, cpu_div_trunc, B2_BINARY, false },
	{ TN_BIN2_DIV_FLOOR, cpu_div_floor, B2_BINARY, false },
	{ TN_BIN2_REMAINDER, tn_remainder, B2_BINARY, false },
	{ TN_BIN2_FMOD, tn_fmod, B2_BINARY, false },
	{ TN_BIN2_POW, tn_pow, B2_BINARY, true },
	{ TN_BIN2_MAXIMUM, tn_maximum, B2_BINARY, false },
	{ TN_BIN2_MINIMUM, tn_minimum, B2_BINARY, false },
	{ TN_BIN2_ATAN2, tn_atan2, B2_FLOAT, true },
	{ TN_BIN2_BITWISE_AND, tn_bitwise_and, B2_BINARY, false },
	{ TN_BIN2_BITWISE_OR, tn_bitwise_or, B2_BINARY, false },
	{ TN_BIN2_BITWISE_XOR, tn_bitwise_xor, B2_BINARY, false },
	{ TN_BIN2_LSHIFT, tn_bitwise_left_shift, B2_BINARY, false },
	{ TN_BIN2_RSHIFT, tn_bitwise_right_shift, B2_BINARY, false },
	{ TN_BIN2_LOGICAL_AND, tn_logical_and, B2_LOGICAL, false },
	{ TN_BIN2_LOGICAL_OR, tn_logical_or, B2_LOGICAL, false },
	{ TN_BIN2_LOGICAL_XOR, tn_logical_xor, B2_LOGICAL, false },
};
#define NBIN2 (sizeof(bin2fns) / sizeof(bin2fns[0]))

static void check_bin2(size_t k, enum tn_dtype da, enum tn_dtype db, enum layout la,
		       enum layout lb, int64_t rows, int64_t cols)
{
	tn_tensor *a = make_layout(da, la, rows, cols, 11, true);
	g_nonzero = true;
	tn_tensor *b = make_layout(db, lb, rows, cols, 12, true);
	g_nonzero = false;
	tn_tensor *want;
	if (bin2fns[k].fn(a, b, &want) < 0) {
		tn_tensor_unref(a);
		tn_tensor_unref(b);
		return;
	}
	struct tn_iter_config cfg;
	tn__bin_config(&cfg, NULL, a, false, b, false);
	if (bin2fns[k].kind == B2_LOGICAL) {
		cfg.check_all_same_dtype = false;
		cfg.has_output_dtype = true;
		cfg.output_dtype = TN_BOOL;
	} else {
		cfg.promote_integer_inputs_to_float = bin2fns[k].kind == B2_FLOAT;
		cfg.cast_common_dtype_to_outputs = true;
		cfg.enforce_safe_casting_to_output = true;
	}
	tn_tensor *got = emulate(&cfg, TN_CUDA_BINARY2, bin2fns[k].op, NULL, 1);
	char what[160];
	snprintf(what, sizeof(what), "binary2 %d: %s, %s layouts %d, %d", bin2fns[k].op,
		 tn_dtype_name(da), tn_dtype_name(db), la, lb);
	ck_assert_int_eq(compare_tensors(got, want, bin2fns[k].transcendental ? 4 : 0, 0, what),
			 0);
	tn_tensor_unref(got);
	tn_tensor_unref(want);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}

START_TEST(test_binary2)
{
	for (size_t k = 0; k < NBIN2; k++)
		for (int i = 0; i < NDT; i++)
			for (int j = 0; j < NDT; j += (i == j ? 1 : 3)) {
				check_bin2(k, all_dtypes[i], all_dtypes[j], L_CONTIG, L_CONTIG, 0,
					   261);
				check_bin2(k, all_dtypes[i], all_dtypes[j], L_TRANSPOSED, L_SCALAR,
					   7, 9);
			}
}
END_TEST

/* ---- reductions ---- */

enum red_kind { R_SUM, R_MEAN, R_PROD, R_AMAX, R_AMIN, R_ALL, R_ANY };

/* The CPU result of @k over @dims (keepdim), and the kernel's op and accumulator dtype. */
static int cpu_reduce(enum red_kind k, const tn_tensor *a, int nd, const int64_t *dims,
		      tn_tensor **ret, int *op, enum tn_dtype *acc)
{
	enum tn_dtype dt = tn_tensor_dtype(a);
	bool fl = is_float(dt);
	switch (k) {
	case R_SUM:
		*op = TN_RED_SUM;
		*acc = fl ? (dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32) : TN_INT64;
		return tn_sum_dim(a, nd, dims, true, NULL, ret);
	case R_MEAN:
		*op = TN_RED_SUM;
		*acc = dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
		return tn_mean_dim(a, nd, dims, true, NULL, ret);
	case R_PROD:
		*op = TN_RED_PROD;
		*acc = fl ? (dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32) : TN_INT64;
		return tn_prod_dim(a, dims[0], true, NULL, ret);
	case R_AMAX:
		*op = TN_RED_MAX;
		*acc = dt;
		return tn_amax(a, nd, dims, true, ret);
	case R_AMIN:
		*op = TN_RED_MIN;
		*acc = dt;
		return tn_amin(a, nd, dims, true, ret);
	case R_ALL:
		*op = TN_RED_ALL;
		*acc = TN_BOOL;
		return tn_all_dim(a, dims[0], true, ret);
	default:
		*op = TN_RED_ANY;
		*acc = TN_BOOL;
		return tn_any_dim(a, dims[0], true, ret);
	}
}

static void check_reduce(enum red_kind k, enum tn_dtype dt, enum layout l, int64_t rows,
			 int64_t cols, int nd, const int64_t *dims)
{
	tn_tensor *a = make_layout(dt, l, rows, cols, 13, k != R_PROD), *want;
	int op;
	enum tn_dtype acc;
	if (cpu_reduce(k, a, nd, dims, &want, &op, &acc) < 0) {
		tn_tensor_unref(a);
		return;
	}
	tn_tensor *got;
	ck_assert_tn_ok(tn_empty(tn_tensor_ndim(want), tn_tensor_sizes(want), tn_tensor_dtype(want),
				 TN_CPU, TN_CONTIGUOUS_FORMAT, &got));
	struct tn_iter_config cfg;
	struct tn_iter it;
	struct tn__cuda_plan p;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = got;
	cfg.tensors[1] = a;
	cfg.check_all_same_dtype = false;
	cfg.resize_outputs = false;
	cfg.is_reduction = true;
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "emu"));
	ck_assert_tn_ok(tn__cuda_plan_from_iter(&it, &p));
	p.common_dtype = acc;
	int64_t nred = tn_tensor_numel(a) / (tn_tensor_numel(want) ? tn_tensor_numel(want) : 1);
	ck_assert_int_eq(tn__cuda_emulate(&p, TN_CUDA_REDUCE, op, NULL,
					  k == R_MEAN ? (double)nred : 1.0),
			 0);
	tn__iter_release(&it);
	char what[160];
	snprintf(what, sizeof(what), "reduce %d %s layout %d [%lld, %lld] over %d dims (%lld)", k,
		 tn_dtype_name(dt), l, (long long)rows, (long long)cols, nd, (long long)dims[0]);
	/* Floating sums and products: another order of additions. */
	double rel = 0, atol = 0;
	if ((k == R_SUM || k == R_MEAN || k == R_PROD) && is_float(dt)) {
		rel = dt == TN_FLOAT16 ? 2e-3 : dt == TN_BFLOAT16 ? 1.6e-2 : dt == TN_FLOAT32 ? 1e-5 : 1e-12;
		atol = (dt == TN_FLOAT64 ? 1e-15 : 1e-6) * 10 * (double)nred /
		       (k == R_MEAN ? (double)(nred ? nred : 1) : 1);
	}
	ck_assert_int_eq(compare_tensors_tol(got, want, 0, rel, atol, what), 0);
	tn_tensor_unref(got);
	tn_tensor_unref(want);
	tn_tensor_unref(a);
}

START_TEST(test_reduce)
{
	static const int64_t d0[1] = { 0 }, d1[1] = { 1 };
	for (int k = R_SUM; k <= R_ANY; k++)
		for (int i = 0; i < NDT; i++) {
			enum tn_dtype dt = all_dtypes[i];
			for (size_t s = 0; s < NSIZES; s++)
				check_reduce(k, dt, L_CONTIG, 0, k == R_PROD ? sizes_1d[s] % 20 : sizes_1d[s], 1, d0);
			for (int l = 0; l < L_SCALAR; l++) {
				check_reduce(k, dt, l, 37, k == R_PROD ? 13 : 301, 1, d1); /* rows */
				check_reduce(k, dt, l, k == R_PROD ? 13 : 301, 37, 1, d0); /* columns */
			}
			check_reduce(k, dt, L_CONTIG, 3, k == R_PROD ? 7 : 100003, 1, d1);
			check_reduce(k, dt, L_CONTIG, 0, k == R_PROD ? 7 : 100003, 1, d0);
			check_reduce(k, dt, L_CONTIG, 0, 0, 1, d0);
			check_reduce(k, dt, L_CONTIG, 4, 0, 1, d1);
		}
}
END_TEST

static Suite *cuda_emu_suite(void)
{
	/* The backend's sources are linked into this program with the library's internal copy:
	 * they serve CUDA here, rather than a libtensor-cuda.so loaded beside them. */
	if (tn__device_register(&tn__cuda_device_ops) < 0)
		ck_abort_msg("%s", tn_last_error());
	Suite *s = suite_create("cuda_emu");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_divider);
	tcase_add_test(tc, test_split);
	tcase_add_test(tc, test_copy_pairs);
	tcase_add_test(tc, test_copy_layouts);
	tcase_add_test(tc, test_binary_pairs);
	tcase_add_test(tc, test_compare_pairs);
	tcase_add_test(tc, test_binary_layouts);
	tcase_add_test(tc, test_where);
	tcase_add_test(tc, test_fill);
	tcase_add_test(tc, test_detects_mismatch);
	tcase_add_test(tc, test_unary);
	tcase_add_test(tc, test_pred);
	tcase_add_test(tc, test_binary2);
	tcase_add_test(tc, test_reduce);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(cuda_emu_suite)
