/* SPDX-License-Identifier: MIT */
/*
 * The network layers against PyTorch: every golden case of tests/golden/nn_golden.h (conv1d
 * and conv2d with every option and layout, the padding strings, max/avg/adaptive pooling,
 * batch_norm in evaluation and training, every error message) functionally, into out= where
 * the operator has one, and on Meta, under each CPU capability and with 1, 2 and 4 threads;
 * out= errors; allocation failures.
 */
#include <math.h>

#include "testutil.h"
#include "golden/nn_golden.h"

#define NN_NCASES (sizeof(nn_cases) / sizeof(nn_cases[0]))

enum { OP_CONV1D, OP_CONV2D, OP_CONV1D_PAD, OP_CONV2D_PAD, OP_MAX, OP_AVG, OP_ADAPTIVE, OP_BN };

static tn_tensor *make_tensor(const struct nn_tensor *o, tn_device dev)
{
	const int n = o->ndim;
	enum tn_dtype dt = (enum tn_dtype)o->dtype;
	int64_t numel = 1, mem[4];
	tn_tensor *vals, *base, *t;
	for (int d = 0; d < n; d++)
		numel *= o->shape[d];
	if (dev.type == TN_DEVICE_META) {
		ck_assert_tn_ok(tn_empty(n, o->shape, dt, dev,
					 o->layout == 1 ? TN_CHANNELS_LAST : TN_CONTIGUOUS_FORMAT, &t));
		return t;
	}
	vals = tn_test_from_values(o->v, n, o->shape, dt);
	(void)numel;
	if (o->layout == 2) {
		memcpy(mem, o->shape, sizeof(mem));
		mem[n - 1] *= 2;
		ck_assert_tn_ok(tn_zeros(n, mem, dt, dev, &base));
		ck_assert_tn_ok(tn_slice(base, n - 1, 0, INT64_MAX, 2, &t));
		tn_tensor_unref(base);
		ck_assert_tn_ok(tn_copy_(t, vals, false));
		tn_tensor_unref(vals);
		return t;
	}
	if (o->layout == 1) {
		ck_assert_tn_ok(tn_contiguous(vals, TN_CHANNELS_LAST, &t));
		tn_tensor_unref(vals);
		return t;
	}
	return vals;
}

/* Call case @c (@out: the out= tensor for avg_pool2d and adaptive_avg_pool2d). */
static int call(const struct nn_case *c, tn_tensor *const *t, tn_tensor *out, tn_tensor **ret)
{
	const tn_tensor *opt[5];
	for (int i = 0; i < 5; i++)
		opt[i] = c->present & (1 << i) ? t[i] : NULL;
	switch (c->op) {
	case OP_CONV1D:
		return tn_conv1d(t[0], t[1], opt[2], c->nstride, c->stride, c->npad, c->pad, c->ndil,
				 c->dil, c->groups, ret);
	case OP_CONV2D:
		return tn_conv2d(t[0], t[1], opt[2], c->nstride, c->stride, c->npad, c->pad, c->ndil,
				 c->dil, c->groups, ret);
	case OP_CONV1D_PAD:
		return tn_conv1d_padding(t[0], t[1], opt[2], c->nstride, c->stride, c->padstr,
					 c->ndil, c->dil, c->groups, ret);
	case OP_CONV2D_PAD:
		return tn_conv2d_padding(t[0], t[1], opt[2], c->nstride, c->stride, c->padstr,
					 c->ndil, c->dil, c->groups, ret);
	case OP_MAX:
		return tn_max_pool2d(t[0], c->nk, c->k, c->nstride == 1 && c->stride[0] == 1 &&
					 c->npad == 1 && c->pad[0] == 0 && c->ndil == 1 && false ? 0 : c->nstride,
				     c->stride, c->npad, c->pad, c->ndil, c->dil, c->ceil_mode, ret);
	case OP_AVG:
		return out ? tn_avg_pool2d_out(t[0], c->nk, c->k, c->nstride, c->stride, c->npad,
					       c->pad, c->ceil_mode, c->count_include_pad,
					       c->has_divisor ? &c->divisor : NULL, out)
			   : tn_avg_pool2d(t[0], c->nk, c->k, c->nstride, c->stride, c->npad, c->pad,
					   c->ceil_mode, c->count_include_pad,
					   c->has_divisor ? &c->divisor : NULL, ret);
	case OP_ADAPTIVE:
		return out ? tn_adaptive_avg_pool2d_out(t[0], c->nk, c->k, out)
			   : tn_adaptive_avg_pool2d(t[0], c->nk, c->k, ret);
	default:
		return tn_batch_norm(t[0], opt[1], opt[2], opt[3], opt[4], c->training, c->momentum,
				     c->eps, false, ret);
	}
}

static void expect_values(size_t k, const struct nn_case *c, const tn_tensor *r, const double *want_v,
			  const char *form)
{
	int64_t idx[4] = { 0 }, i = 0;
	const int n = tn_tensor_ndim(r);
	if (tn_tensor_numel(r) == 0)
		return;
	for (;;) {
		tn_scalar sv;
		ck_assert_tn_ok(tn_tensor_get(r, n, idx, &sv));
		double got = sv.kind == TN_SCALAR_DOUBLE ? sv.v.d : sv.kind == TN_SCALAR_INT ? (double)sv.v.i
											 : sv.v.b;
		double want = want_v[i];
		bool ok = c->tol > 0 ? fabs(got - want) <= c->tol * (1 + fabs(want))
				     : (got == want || (got != got && want != want));
		ck_assert_msg(ok, "case %zu (op %d) %s: element %lld is %.17g, PyTorch's %.17g", k,
			      c->op, form, (long long)i, got, want);
		i++;
		int d = n - 1;
		while (d >= 0 && ++idx[d] == tn_tensor_sizes(r)[d])
			idx[d--] = 0;
		if (d < 0)
			return;
	}
}

/* Only batch_norm in training writes its arguments: it gets fresh copies per form. */
static void run_case(size_t k, tn_device dev)
{
	const struct nn_case *c = &nn_cases[k];
	bool meta = dev.type == TN_DEVICE_META;
	tn_tensor *t[5] = { NULL }, *r = NULL;
	for (int i = 0; i < c->ntensors; i++)
		t[i] = make_tensor(&c->t[i], dev);
	/* The pools' stride=[] is given as []: the golden stores the list as PyTorch got it. */
	tn_clear_error();
	int rc = call(c, t, NULL, &r);
	if (c->error) {
		bool cpu_only = strstr(c->error, "not implemented for") != NULL;
		if (meta && cpu_only) {
			if (rc == 0)
				tn_tensor_unref(r);
			goto done;
		}
		ck_assert_msg(rc < 0, "case %zu (op %d): succeeded, PyTorch says '%s'", k, c->op, c->error);
		ck_assert_msg(strcmp(tn_last_error(), c->error) == 0, "case %zu (op %d): '%s', PyTorch '%s'",
			      k, c->op, tn_last_error(), c->error);
		goto done;
	}
	ck_assert_msg(rc == 0, "case %zu (op %d): %s", k, c->op, tn_last_error());
	ck_assert_int_eq(tn_tensor_ndim(r), c->ndim);
	ck_assert_int_eq(tn_tensor_dtype(r), c->dtype);
	for (int d = 0; d < c->ndim; d++) {
		ck_assert_msg(tn_tensor_sizes(r)[d] == c->shape[d], "case %zu: size %d", k, d);
		ck_assert_msg(c->shape[d] <= 1 || tn_tensor_strides(r)[d] == c->strides[d],
			      "case %zu (op %d): stride %d is %lld, PyTorch's %lld", k, c->op, d,
			      (long long)tn_tensor_strides(r)[d], (long long)c->strides[d]);
	}
	if (meta) {
		ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
		goto done;
	}
	expect_values(k, c, r, c->r, "functional");
	if (c->rm_after) {
		expect_values(k, c, t[3], c->rm_after, "running_mean");
		expect_values(k, c, t[4], c->rv_after, "running_var");
	}
	if (c->op == OP_AVG || (c->op == OP_ADAPTIVE && !(c->k[0] == 1 && c->k[1] == 1))) {
		tn_tensor *o;
		ck_assert_tn_ok(tn_full(c->ndim, c->shape, tn_scalar_int(77),
					&(enum tn_dtype){ c->dtype }, TN_CPU, &o));
		ck_assert_msg(call(c, t, o, NULL) == 0, "case %zu out=: %s", k, tn_last_error());
		expect_values(k, c, o, c->r, "out=");
		tn_tensor_unref(o);
	}
done:
	tn_tensor_unref(r);
	for (int i = 0; i < 5; i++)
		tn_tensor_unref(t[i]);
}

START_TEST(test_goldens_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	struct tn_baseline b = tn_test_baseline();
	for (size_t k = 0; k < NN_NCASES; k++) {
		run_case(k, TN_CPU);
		if (want == 0)
			run_case(k, TN_META);
	}
	ck_assert_no_leak(b);
}
END_TEST

/* The cases with enough images or planes to split over threads, with 1, 2 and 4 threads. */
START_TEST(test_goldens_with_threads)
{
	static const char *const counts[] = { "1", "2", "4" };
	setenv("TN_NUM_THREADS", counts[_i], 1);
	for (size_t k = 0; k < NN_NCASES; k++)
		if (!nn_cases[k].error && nn_cases[k].t[0].shape[0] >= 3)
			run_case(k, TN_CPU);
}
END_TEST

/* Errors of the CPU kernels that the goldens cannot build (mixed dtypes), and of out=. */
START_TEST(test_type_and_out_errors)
{
	tn_tensor *x, *w, *wd, *b, *o, *r = NULL;
	int64_t one = 1, zero = 0, two[2] = { 2, 2 };
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 1, 4, 8, 8 }, TN_FLOAT32, TN_CPU, &x));
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 8, 4, 3, 3 }, TN_FLOAT32, TN_CPU, &w));
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 8, 4, 3, 3 }, TN_FLOAT64, TN_CPU, &wd));
	ck_assert_tn_ok(tn_ones(1, (int64_t[]){ 8 }, TN_FLOAT64, TN_CPU, &b));
	ck_assert_int_eq(tn_conv2d(x, wd, NULL, 1, &one, 1, &zero, 1, &one, 1, &r), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "expected scalar type Float but found Double");
	ck_assert_int_eq(tn_conv2d(x, w, b, 1, &one, 1, &zero, 1, &one, 1, &r), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "Input type (float) and bias type (double) should be the same");
	tn_tensor_unref(b);
	ck_assert_tn_ok(tn_ones(1, (int64_t[]){ 4 }, TN_FLOAT64, TN_CPU, &b));
	tn_tensor *rm;
	ck_assert_tn_ok(tn_zeros(1, (int64_t[]){ 4 }, TN_FLOAT32, TN_CPU, &rm));
	ck_assert_int_eq(tn_batch_norm(x, b, NULL, rm, rm, false, 0.1, 1e-5, false, &r), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "mixed dtype (CPU): expect parameter to have scalar type of Float");
	/* out=: dtype and shape are checked, out is not resized. */
	ck_assert_tn_ok(tn_zeros(4, (int64_t[]){ 1, 4, 4, 4 }, TN_FLOAT64, TN_CPU, &o));
	ck_assert_int_eq(tn_avg_pool2d_out(x, 1, two, 0, NULL, 1, &zero, false, true, NULL, o), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "Expected out tensor to have dtype float, but got double instead");
	ck_assert_int_eq(tn_adaptive_avg_pool2d_out(x, 2, two, o), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "expected dtype float for `output` but got dtype double");
	tn_tensor_unref(o);
	ck_assert_tn_ok(tn_zeros(4, (int64_t[]){ 1, 4, 3, 3 }, TN_FLOAT32, TN_CPU, &o));
	ck_assert_int_eq(tn_avg_pool2d_out(x, 1, two, 0, NULL, 1, &zero, false, true, NULL, o), TN_EINVAL);
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "libtensor does not resize out= tensors"));
	ck_assert_int_eq(tn_conv2d(x, w, NULL, 1, &one, 1, &zero, 1, &one, 1, NULL), TN_EINVAL);
	tn_tensor_unref(o);
	tn_tensor_unref(rm);
	tn_tensor_unref(b);
	tn_tensor_unref(x);
	tn_tensor_unref(w);
	tn_tensor_unref(wd);
}
END_TEST

/* Element @i (in row-major order) of @t's index space into @idx. */
static void unravel(const tn_tensor *t, int64_t i, int64_t *idx)
{
	for (int d = tn_tensor_ndim(t) - 1; d >= 0; d--) {
		idx[d] = i % tn_tensor_sizes(t)[d];
		i /= tn_tensor_sizes(t)[d];
	}
}

/*
 * batch_norm in evaluation over layouts the goldens lack: 5-d (the dims between 1 and the
 * last two walked by index), the last dim strided (transposed, sliced), channels-last, and the
 * same values as 3-d. Each result is the formula's, and equals, bit for bit, the result for a
 * contiguous copy of the input.
 */
START_TEST(test_batch_norm_layouts)
{
	const enum tn_dtype dts[2] = { TN_FLOAT32, TN_FLOAT64 };
	const int64_t C = 3;
	for (int k = 0; k < 2; k++) {
		const enum tn_dtype dt = dts[k];
		tn_tensor *x, *p[4], *v[5];
		ck_assert_tn_ok(tn_empty(5, (int64_t[]){ 2, C, 4, 6, 10 }, dt, TN_CPU,
					 TN_CONTIGUOUS_FORMAT, &x));
		for (int64_t i = 0; i < tn_tensor_numel(x); i++) {
			double e = (double)((i * 37) % 101) / 25 - 2;
			if (dt == TN_FLOAT32)
				((float *)tn_tensor_data(x))[i] = (float)e;
			else
				((double *)tn_tensor_data(x))[i] = e;
		}
		/* weight, bias, running mean, running var */
		static const double pv[4][3] = { { 1.5, -0.5, 0.75 },
						 { 0.25, 0, -1 },
						 { 0.1, -0.3, 0.2 },
						 { 0.5, 2, 1.25 } };
		for (int j = 0; j < 4; j++)
			p[j] = tn_test_from_values(pv[j], 1, (int64_t[]){ C }, dt);
		tn_tensor *r4;
		ck_assert_tn_ok(tn_permute(x, 5, (int64_t[]){ 0, 1, 2, 4, 3 }, &v[0]));
		ck_assert_tn_ok(tn_slice(x, 4, 1, 10, 2, &v[1]));
		ck_assert_tn_ok(tn_reshape(x, 4, (int64_t[]){ 2, C, 24, 10 }, &r4));
		ck_assert_tn_ok(tn_contiguous(r4, TN_CHANNELS_LAST, &v[2]));
		ck_assert_tn_ok(tn_reshape(x, 3, (int64_t[]){ 2, C, 240 }, &v[3]));
		v[4] = tn_tensor_ref(x);
		tn_tensor_unref(r4);
		for (int j = 0; j < 5; j++) {
			tn_tensor *y, *xc, *yc;
			ck_assert_tn_ok(tn_batch_norm(v[j], p[0], p[1], p[2], p[3], false, 0.1,
						      1e-5, false, &y));
			ck_assert_tn_ok(tn_contiguous(v[j], TN_CONTIGUOUS_FORMAT, &xc));
			ck_assert_tn_ok(tn_batch_norm(xc, p[0], p[1], p[2], p[3], false, 0.1, 1e-5,
						      false, &yc));
			int64_t idx[5];
			for (int64_t i = 0; i < tn_tensor_numel(y); i++) {
				unravel(y, i, idx);
				const int64_t c = idx[1];
				double xv = tn_test_get_double(v[j], idx),
				       got = tn_test_get_double(y, idx);
				double want = (xv - pv[2][c]) / sqrt(pv[3][c] + 1e-5) * pv[0][c] +
					      pv[1][c];
				ck_assert_msg(fabs(got - want) <=
						      (dt == TN_FLOAT32 ? 2e-6 : 1e-14) *
							      fmax(1, fabs(want)),
					      "%s view %d element %lld: %.17g, expected %.17g",
					      tn_dtype_name(dt), j, (long long)i, got, want);
				ck_assert(got == tn_test_get_double(yc, idx));
			}
			tn_tensor_unref(y);
			tn_tensor_unref(yc);
			tn_tensor_unref(xc);
			tn_tensor_unref(v[j]);
		}
		for (int j = 0; j < 4; j++)
			tn_tensor_unref(p[j]);
		tn_tensor_unref(x);
	}
}
END_TEST

/* float16 runs (PyTorch's CPU kernels refuse it) and agrees with float32 rounded once. */
START_TEST(test_float16_matches_float32)
{
	tn_tensor *x, *w, *xh, *wh, *r, *rh, *rr;
	int64_t one = 1;
	ck_assert_tn_ok(tn_full(4, (int64_t[]){ 2, 3, 6, 6 }, tn_scalar_double(0.25), NULL, TN_CPU, &x));
	ck_assert_tn_ok(tn_full(4, (int64_t[]){ 4, 3, 3, 3 }, tn_scalar_double(-0.5), NULL, TN_CPU, &w));
	ck_assert_tn_ok(tn_to(x, TN_FLOAT16, false, false, NULL, &xh));
	ck_assert_tn_ok(tn_to(w, TN_FLOAT16, false, false, NULL, &wh));
	ck_assert_tn_ok(tn_conv2d(x, w, NULL, 1, &one, 1, &one, 1, &one, 1, &r));
	ck_assert_tn_ok(tn_conv2d(xh, wh, NULL, 1, &one, 1, &one, 1, &one, 1, &rh));
	ck_assert_tn_ok(tn_to(r, TN_FLOAT16, false, false, NULL, &rr));
	for (int64_t i = 0; i < 6; i++)
		ck_assert_double_eq(tn_test_get_double(rh, (int64_t[]){ 1, 2, i, 5 - i }),
				    tn_test_get_double(rr, (int64_t[]){ 1, 2, i, 5 - i }));
	tn_tensor_unref(x), tn_tensor_unref(w), tn_tensor_unref(xh), tn_tensor_unref(wh);
	tn_tensor_unref(r), tn_tensor_unref(rh), tn_tensor_unref(rr);
}
END_TEST

static int c_conv(tn_tensor **r, tn_tensor *const *t)
{
	int64_t one = 1;
	return tn_conv2d(t[0], t[1], t[2], 1, &one, 1, &one, 1, &one, 1, r);
}
static int c_conv_cl(tn_tensor **r, tn_tensor *const *t)
{
	int64_t one = 1, two = 2;
	return tn_conv2d(t[3], t[1], NULL, 1, &two, 1, &one, 1, &one, 1, r);
}
static int c_conv_half(tn_tensor **r, tn_tensor *const *t)
{
	int64_t one = 1;
	return tn_conv2d(t[4], t[5], NULL, 1, &one, 1, &one, 1, &one, 1, r);
}
static int c_conv1d(tn_tensor **r, tn_tensor *const *t)
{
	int64_t one = 1;
	return tn_conv1d(t[6], t[7], NULL, 1, &one, 1, &one, 1, &one, 1, r);
}
static int c_max(tn_tensor **r, tn_tensor *const *t)
{
	int64_t k = 2, z = 0, one = 1;
	return tn_max_pool2d(t[0], 1, &k, 0, NULL, 1, &z, 1, &one, false, r);
}
static int c_avg_half(tn_tensor **r, tn_tensor *const *t)
{
	int64_t k = 2, z = 0;
	return tn_avg_pool2d(t[4], 1, &k, 0, NULL, 1, &z, false, true, NULL, r);
}
static int c_adaptive(tn_tensor **r, tn_tensor *const *t)
{
	int64_t s[2] = { 3, 2 };
	return tn_adaptive_avg_pool2d(t[3], 2, s, r);
}
static int c_bn(tn_tensor **r, tn_tensor *const *t)
{
	return tn_batch_norm(t[0], t[2], NULL, t[2], t[2], false, 0.1, 1e-5, false, r);
}

START_TEST(test_allocation_failures)
{
	static const struct {
		const char *name;
		int (*fn)(tn_tensor **, tn_tensor *const *);
	} ctors[] = { { "conv2d", c_conv },	{ "conv2d channels-last", c_conv_cl },
		      { "conv2d bfloat16", c_conv_half }, { "conv1d", c_conv1d },
		      { "max_pool2d", c_max },	{ "avg_pool2d bfloat16", c_avg_half },
		      { "adaptive_avg_pool2d", c_adaptive }, { "batch_norm", c_bn } };
	tn_tensor *t[8], *x;
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 2, 4, 6, 6 }, TN_FLOAT32, TN_CPU, &t[0]));
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 4, 4, 3, 3 }, TN_FLOAT32, TN_CPU, &t[1]));
	ck_assert_tn_ok(tn_ones(1, (int64_t[]){ 4 }, TN_FLOAT32, TN_CPU, &t[2]));
	ck_assert_tn_ok(tn_contiguous(t[0], TN_CHANNELS_LAST, &t[3]));
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 2, 4, 6, 6 }, TN_BFLOAT16, TN_CPU, &t[4]));
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 4, 4, 3, 3 }, TN_BFLOAT16, TN_CPU, &t[5]));
	ck_assert_tn_ok(tn_ones(3, (int64_t[]){ 2, 4, 9 }, TN_FLOAT32, TN_CPU, &t[6]));
	ck_assert_tn_ok(tn_ones(3, (int64_t[]){ 4, 4, 3 }, TN_FLOAT32, TN_CPU, &t[7]));
	(void)x;
	for (size_t k = 0; k < sizeof(ctors) / sizeof(ctors[0]); k++)
		tn_test_alloc_failures(ctors[k].name, ctors[k].fn, t);
	for (int i = 0; i < 8; i++)
		tn_tensor_unref(t[i]);
}
END_TEST

static Suite *nn_suite(void)
{
	Suite *s = suite_create("nn");
	TCase *tc = tcase_create("nn");
	tcase_add_loop_test(tc, test_goldens_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_goldens_with_threads, 0, 3);
	tcase_add_test(tc, test_type_and_out_errors);
	tcase_add_test(tc, test_float16_matches_float32);
	tcase_add_test(tc, test_batch_norm_layouts);
	tcase_add_test(tc, test_allocation_failures);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(nn_suite)
