/* SPDX-License-Identifier: MIT */
/*
 * More unary operators, clamp, where and to(dtype): the goldens from PyTorch (every operator
 * over dtypes, special values, transposed, stepped, expanded and channels-last operands and
 * broadcasting), their out= and in-place forms, every error message, work past the grain size,
 * and every unary, predicate, clamp and where kernel under each CPU capability against the
 * DEFAULT variant, including the 22 older unary functions.
 */
#include <math.h>

#include "testutil.h"
#include "iter.h"
#include "stub.h"
#include "golden/unary_ext_golden.h"
#include "golden/parity_golden.h"
#include "golden/unary_parity_golden.h"
#include "golden/difftest_golden.h"

/* ---- building operands ---- */

/* A tensor of @dtype with @values (logical order) laid out as @layout (enum ux_layout): made
 * in float64 and copy_'d into the layout, as the generator does with PyTorch. */
static tn_tensor *make_operand(const struct ux_operand *o)
{
	enum tn_dtype dt = (enum tn_dtype)o->dtype;
	int n = o->ndim;
	const int64_t *sz = o->sizes;
	int64_t numel = 1;
	tn_tensor *f64, *base, *view;

	for (int d = 0; d < n; d++)
		numel *= sz[d];
	ck_assert_tn_ok(tn_empty(n, sz, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f64));
	memcpy(tn_tensor_data(f64), o->v, (size_t)numel * sizeof(double));
	switch (o->layout) {
	case UX_TRANSPOSED: {
		int64_t rs[2] = { sz[1], sz[0] };
		ck_assert_tn_ok(tn_empty(2, rs, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_transpose(base, 0, 1, &view));
		ck_assert_tn_ok(tn_copy_(view, f64, false));
		break;
	}
	case UX_STEPPED: {
		int64_t ws[4];
		memcpy(ws, sz, sizeof(ws));
		ws[n - 1] *= 2;
		ck_assert_tn_ok(tn_empty(n, ws, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_slice(base, n - 1, 0, INT64_MAX, 2, &view));
		ck_assert_tn_ok(tn_copy_(view, f64, false));
		break;
	}
	case UX_EXPANDED: {
		int64_t rs[4], one = 1;
		memcpy(rs, sz, sizeof(rs));
		rs[0] = 1;
		tn_tensor *row;
		ck_assert_tn_ok(tn_empty(n, rs, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_narrow(f64, 0, 0, one, &row));
		ck_assert_tn_ok(tn_copy_(base, row, false));
		tn_tensor_unref(row);
		ck_assert_tn_ok(tn_expand(base, n, sz, &view));
		break;
	}
	case UX_CHANNELS_LAST:
		ck_assert_tn_ok(tn_empty(n, sz, dt, TN_CPU, TN_CHANNELS_LAST, &base));
		ck_assert_tn_ok(tn_copy_(base, f64, false));
		view = tn_tensor_ref(base);
		break;
	default:
		ck_assert_tn_ok(tn_empty(n, sz, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_copy_(base, f64, false));
		view = tn_tensor_ref(base);
		break;
	}
	tn_tensor_unref(base);
	tn_tensor_unref(f64);
	return view;
}

static tn_scalar to_scalar(const struct ux_scalar *s)
{
	return s->kind == 0 ? tn_scalar_bool(s->v != 0)
	       : s->kind == 1 ? tn_scalar_int((int64_t)s->v)
			      : tn_scalar_double(s->v);
}

/* A contiguous float64 copy of @t's elements, to compare (the caller frees it). */
static double *values_of(const tn_tensor *t)
{
	tn_tensor *f64;
	int64_t n = tn_tensor_numel(t);
	ck_assert_tn_ok(tn_empty(tn_tensor_ndim(t), tn_tensor_sizes(t), TN_FLOAT64, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &f64));
	ck_assert_tn_ok(tn_copy_(f64, t, false));
	double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
	memcpy(v, tn_tensor_data(f64), (size_t)n * sizeof(double));
	tn_tensor_unref(f64);
	return v;
}

/* Units in the last place of @dt between two values (NaN matches NaN; +0 matches -0). */
static double ulps(double got, double want, enum tn_dtype dt)
{
	if (got != got || want != want)
		return (got != got) == (want != want) ? 0 : 1e9;
	if (got == want)
		return 0;
	if (isinf(got) || isinf(want) || !tn_dtype_is_floating(dt))
		return 1e9;
	double eps = dt == TN_FLOAT64 ? 0x1p-52 : dt == TN_FLOAT32 ? 0x1p-23
					       : dt == TN_FLOAT16 ? 0x1p-10
								  : 0x1p-7;
	double mag = fmax(fabs(want), dt == TN_FLOAT64 ? 0x1p-1022 : 0x1p-126);
	return fabs(got - want) / (eps * exp2(floor(log2(mag))));
}

/* gelu's tolerance: its tail cancels (1 + erf), so the error is bounded relative to the
 * input, not the result: a few ulps of max(|x|, 1). */
static bool gelu_close(double got, double want, double x, enum tn_dtype dt)
{
	if (got != got || want != want)
		return (got != got) == (want != want);
	if (isinf(got) || isinf(want))
		return got == want;
	double eps = dt == TN_FLOAT64 ? 0x1p-52 : dt == TN_FLOAT32 ? 0x1p-23
					       : dt == TN_FLOAT16 ? 0x1p-10
								  : 0x1p-7;
	return fabs(got - want) <= 4 * eps * fmax(fabs(x), 1.0);
}

/* ---- calling a golden case ---- */

/* Run case @c functionally (@out NULL) or into @out; the result in *ret (functional). */
static int call_case(const struct ux_case *c, tn_tensor *const *in, tn_tensor *out,
		     tn_tensor **ret)
{
	tn_scalar s0 = to_scalar(&c->s[0]), s1 = to_scalar(&c->s[1]);
	const tn_scalar *p0 = c->s[0].kind >= 0 ? &s0 : NULL, *p1 = c->s[1].kind >= 0 ? &s1 : NULL;
	const tn_tensor *tmin = NULL, *tmax = NULL;
	switch (c->op) {
	case UX_GELU:
		return out ? tn_gelu_out(in[0], c->text, out) : tn_gelu(in[0], c->text, ret);
	case UX_LOGICAL_NOT:
		return out ? tn_logical_not_out(in[0], out) : tn_logical_not(in[0], ret);
	case UX_BITWISE_NOT:
		return out ? tn_bitwise_not_out(in[0], out) : tn_bitwise_not(in[0], ret);
	case UX_ISNAN:
		return out ? tn_isnan_out(in[0], out) : tn_isnan(in[0], ret);
	case UX_ISINF:
		return out ? tn_isinf_out(in[0], out) : tn_isinf(in[0], ret);
	case UX_ISFINITE:
		return out ? -1 : tn_isfinite(in[0], ret);
	case UX_CLAMP:
		return out ? tn_clamp_out(in[0], p0, p1, out) : tn_clamp(in[0], p0, p1, ret);
	case UX_CLAMP_MIN:
		return out ? tn_clamp_min_out(in[0], s0, out) : tn_clamp_min(in[0], s0, ret);
	case UX_CLAMP_MAX:
		return out ? tn_clamp_max_out(in[0], s0, out) : tn_clamp_max(in[0], s0, ret);
	case UX_CLAMP_TENSOR: {
		int k = 1;
		if (c->s[0].kind == 0 && c->s[0].v != 0)
			tmin = in[k++];
		if (c->s[1].kind == 0 && c->s[1].v != 0)
			tmax = in[k];
		return out ? tn_clamp_tensor_out(in[0], tmin, tmax, out)
			   : tn_clamp_tensor(in[0], tmin, tmax, ret);
	}
	case UX_CLAMP_MIN_TENSOR:
		return out ? tn_clamp_min_tensor_out(in[0], in[1], out)
			   : tn_clamp_min_tensor(in[0], in[1], ret);
	case UX_CLAMP_MAX_TENSOR:
		return out ? tn_clamp_max_tensor_out(in[0], in[1], out)
			   : tn_clamp_max_tensor(in[0], in[1], ret);
	case UX_WHERE:
		return out ? tn_where_out(in[0], in[1], in[2], out) : tn_where(in[0], in[1], in[2], ret);
	case UX_WHERE_SCALAR_SELF:
		return out ? -1 : tn_where_scalar_self(in[0], s0, in[1], ret);
	case UX_WHERE_SCALAR_OTHER:
		return out ? -1 : tn_where_scalar_other(in[0], in[1], s1, ret);
	case UX_WHERE_SCALAR:
		return out ? -1 : tn_where_scalar(in[0], s0, s1, ret);
	default:
		return out ? -1 : tn_to(in[0], (enum tn_dtype)c->to, false, false, NULL, ret);
	}
}

/* Whether @c's operator has an in-place form that writes self (in[0]). */
static int call_inplace(const struct ux_case *c, tn_tensor *const *in)
{
	tn_scalar s0 = to_scalar(&c->s[0]), s1 = to_scalar(&c->s[1]);
	const tn_scalar *p0 = c->s[0].kind >= 0 ? &s0 : NULL, *p1 = c->s[1].kind >= 0 ? &s1 : NULL;
	switch (c->op) {
	case UX_GELU:
		return tn_gelu_(in[0], c->text);
	case UX_LOGICAL_NOT:
		return tn_logical_not_(in[0]);
	case UX_BITWISE_NOT:
		return tn_bitwise_not_(in[0]);
	case UX_CLAMP:
		return tn_clamp_(in[0], p0, p1);
	case UX_CLAMP_MIN:
		return tn_clamp_min_(in[0], s0);
	case UX_CLAMP_MAX:
		return tn_clamp_max_(in[0], s0);
	case UX_CLAMP_MIN_TENSOR:
		return tn_clamp_min_tensor_(in[0], in[1]);
	case UX_CLAMP_MAX_TENSOR:
		return tn_clamp_max_tensor_(in[0], in[1]);
	default:
		return 1; /* none */
	}
}

/* libtensor names dtypes in its overflow message ("int8"), PyTorch names C++ types ("int8_t",
 * "at::Half"): the rest of the message must agree. */
static void assert_error(const struct ux_case *c, int rc)
{
	static const char overflow[] = "value cannot be converted to type ";
	if (strncmp(c->error, overflow, sizeof(overflow) - 1) == 0) {
		ck_assert_msg(rc == TN_EOVERFLOW, "%s: returned %d (%s)", c->name, rc, tn_last_error());
		ck_assert_msg(strncmp(tn_last_error(), overflow, sizeof(overflow) - 1) == 0, "%s: %s",
			      c->name, tn_last_error());
		return;
	}
	ck_assert_msg(rc == TN_EINVAL, "%s: PyTorch refuses (%s), libtensor returned %d", c->name,
		      c->error, rc);
	ck_assert_msg(strcmp(tn_last_error(), c->error) == 0, "%s: message '%s', PyTorch '%s'",
		      c->name, tn_last_error(), c->error);
}

static void assert_values(const struct ux_case *c, const tn_tensor *r, const char *form,
			  const double *x)
{
	enum tn_dtype rd = tn_tensor_dtype(r);
	int64_t n = tn_tensor_numel(r);
	double *got = values_of(r);
	for (int64_t i = 0; i < n; i++) {
		bool ok = c->op == UX_GELU ? gelu_close(got[i], c->v[i], x[i], rd)
					   : ulps(got[i], c->v[i], rd) == 0;
		ck_assert_msg(ok, "%s (%s): element %lld is %.17g, PyTorch %.17g", c->name, form,
			      (long long)i, got[i], c->v[i]);
	}
	free(got);
}

static void run_golden(const struct ux_case *c)
{
	tn_tensor *in[3] = { NULL, NULL, NULL }, *r = NULL;
	for (int k = 0; k < c->nin; k++)
		in[k] = make_operand(&c->in[k]);
	/* gelu's tolerance is relative to the input, which is broadcast like the result. */
	const double *x = c->in[0].v;
	tn_clear_error();
	int rc = call_case(c, in, NULL, &r);
	if (!c->ok) {
		assert_error(c, rc);
		goto done;
	}
	ck_assert_msg(rc == 0, "%s failed: %s", c->name, tn_last_error());
	ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)c->rdtype, "%s: dtype %s, PyTorch %s",
		      c->name, tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(c->rdtype));
	ck_assert_int_eq(tn_tensor_ndim(r), c->ndim);
	for (int d = 0; d < c->ndim; d++) {
		ck_assert_int_eq(tn_tensor_sizes(r)[d], c->sizes[d]);
		/* The layout PyTorch gives the result (size-1 dimensions' strides are free). */
		if (c->sizes[d] > 1)
			ck_assert_msg(tn_tensor_strides(r)[d] == c->strides[d],
				      "%s: stride %d is %lld, PyTorch %lld", c->name, d,
				      (long long)tn_tensor_strides(r)[d], (long long)c->strides[d]);
	}
	assert_values(c, r, "functional", x);

	/* out=: a contiguous tensor of the result dtype receives the same values. */
	tn_tensor *out;
	ck_assert_tn_ok(tn_empty(c->ndim, c->sizes, (enum tn_dtype)c->rdtype, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &out));
	rc = call_case(c, in, out, NULL);
	if (rc != -1) {
		ck_assert_msg(rc == 0, "%s out=: %s", c->name, tn_last_error());
		assert_values(c, out, "out=", x);
	}
	tn_tensor_unref(out);

	/* In place, where self can hold the result: the same values in self. */
	bool writable = c->in[0].layout != UX_EXPANDED && c->rdtype == c->in[0].dtype &&
			c->ndim == c->in[0].ndim && c->op != UX_CLAMP_TENSOR;
	for (int d = 0; writable && d < c->ndim; d++)
		writable = c->sizes[d] == c->in[0].sizes[d];
	if (writable) {
		rc = call_inplace(c, in);
		if (rc != 1) {
			ck_assert_msg(rc == 0, "%s in place: %s", c->name, tn_last_error());
			assert_values(c, in[0], "in place", x);
		}
	}
done:
	tn_tensor_unref(r);
	for (int k = 0; k < 3; k++)
		tn_tensor_unref(in[k]);
}

START_TEST(test_goldens)
{
	struct tn_baseline b = tn_test_baseline();
	/* A slice of the goldens per loop index keeps each forked test short. */
	size_t per = (UX_NGOLDEN + 7) / 8;
	for (size_t g = (size_t)_i * per; g < UX_NGOLDEN && g < (size_t)(_i + 1) * per; g++)
		run_golden(&ux_golden[g]);
	ck_assert_no_leak(b);
}
END_TEST

/* ---- errors and forms the goldens do not reach ---- */

static tn_tensor *filled(int n, const int64_t *sizes, enum tn_dtype dt, double v)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_full(n, sizes, tn_scalar_double(v), &dt, TN_CPU, &t));
	return t;
}

START_TEST(test_errors)
{
	struct tn_baseline b = tn_test_baseline();
	int64_t s3[] = { 3 }, s2[] = { 2 };
	tn_tensor *f = filled(1, s3, TN_FLOAT32, 1.5), *d = filled(1, s3, TN_FLOAT64, 1),
		  *i = filled(1, s3, TN_INT64, 2), *i32 = filled(1, s3, TN_INT32, 2),
		  *bo = filled(1, s3, TN_BOOL, 1), *f2 = filled(1, s2, TN_FLOAT32, 0), *r = NULL;
	tn_scalar half = tn_scalar_double(0.5), one = tn_scalar_int(1), t = tn_scalar_bool(true);

	/* gelu */
	ck_assert_tn_error(tn_gelu(f, "Tanh", &r), TN_EINVAL,
			   "approximate argument must be either none or tanh.");
	ck_assert_tn_error(tn_gelu(f, NULL, &r), TN_EINVAL,
			   "approximate argument must be either none or tanh.");
	ck_assert_tn_error(tn_gelu_(f, "x"), TN_EINVAL,
			   "approximate argument must be either none or tanh.");
	ck_assert_tn_error(tn_gelu(i, "none", &r), TN_EINVAL,
			   "\"GeluKernelImpl\" not implemented for 'Long'");
	ck_assert_tn_error(tn_gelu(bo, "tanh", &r), TN_EINVAL,
			   "\"GeluKernelImpl\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_gelu_out(f, "none", d), TN_EINVAL,
			   "Found dtype Double but expected Float");
	/* The output's dtype is checked before the string, as PyTorch's meta function runs
	 * first. */
	ck_assert_tn_error(tn_gelu_out(f, "x", d), TN_EINVAL, "Found dtype Double but expected Float");
	ck_assert_tn_error(tn_gelu(f, "none", NULL), TN_EINVAL, "gelu: NULL ret_tensor");
	/* bitwise_not */
	ck_assert_tn_error(tn_bitwise_not(f, &r), TN_EINVAL,
			   "\"bitwise_not_cpu\" not implemented for 'Float'");
	ck_assert_tn_error(tn_bitwise_not_(d), TN_EINVAL,
			   "\"bitwise_not_cpu\" not implemented for 'Double'");
	ck_assert_tn_error(tn_bitwise_not_out(i, i32), TN_EINVAL, "Found dtype Int but expected Long");
	ck_assert_tn_error(tn_bitwise_not_out(bo, i32), TN_EINVAL, "Found dtype Int but expected Bool");
	/* predicates: any out dtype, but the shape must match and may not share elements */
	ck_assert_tn_error_has(tn_isnan_out(f, f2), TN_EINVAL,
			       "output with shape [2] doesn't match the broadcast shape [3]");
	tn_tensor *one_elem = filled(1, (int64_t[]){ 1 }, TN_FLOAT32, 0), *e;
	ck_assert_tn_ok(tn_expand(one_elem, 1, s3, &e));
	ck_assert_tn_error(tn_logical_not_out(f, e), TN_EINVAL,
			   "unsupported operation: more than one element of the written-to tensor "
			   "refers to a single memory location. Please clone() the tensor before "
			   "performing the operation.");
	ck_assert_tn_error(tn_logical_not_(e), TN_EINVAL,
			   "unsupported operation: more than one element of the written-to tensor "
			   "refers to a single memory location. Please clone() the tensor before "
			   "performing the operation.");
	tn_tensor_unref(e);
	tn_tensor_unref(one_elem);
	/* clamp */
	ck_assert_tn_error(tn_clamp(f, NULL, NULL, &r), TN_EINVAL,
			   "torch.clamp: At least one of 'min' or 'max' must not be None");
	ck_assert_tn_error(tn_clamp_(f, NULL, NULL), TN_EINVAL,
			   "torch.clamp: At least one of 'min' or 'max' must not be None");
	ck_assert_tn_error(tn_clamp_tensor(f, NULL, NULL, &r), TN_EINVAL,
			   "torch.clamp: At least one of 'min' or 'max' must not be None");
	ck_assert_tn_error(tn_clamp_(i, &half, NULL), TN_EINVAL,
			   "result type Float can't be cast to the desired output type long int");
	ck_assert_tn_error(tn_clamp_(i32, NULL, &half), TN_EINVAL,
			   "result type Float can't be cast to the desired output type int");
	ck_assert_tn_error(tn_clamp_(bo, &one, NULL), TN_EINVAL,
			   "result type Long can't be cast to the desired output type bool");
	ck_assert_tn_error(tn_clamp_min_(i, half), TN_EINVAL,
			   "result type Float can't be cast to the desired output type long int");
	ck_assert_tn_error(tn_clamp_out(i, &half, NULL, i), TN_EINVAL,
			   "result type Float can't be cast to the desired output type long int");
	tn_tensor *i2 = filled(1, s3, TN_INT64, 0);
	ck_assert_tn_error(tn_clamp_out(i, &half, NULL, i2), TN_EINVAL,
			   "Found dtype Long but expected Float");
	tn_tensor_unref(i2);
	ck_assert_tn_error(tn_clamp_out(f, &half, NULL, d), TN_EINVAL,
			   "Found dtype Double but expected Float");
	ck_assert_tn_error(tn_clamp(bo, &t, &t, &r), TN_EINVAL,
			   "\"clamp_scalar_cpu\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_clamp(bo, &t, NULL, &r), TN_EINVAL,
			   "\"clamp_min_cpu\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_clamp_max(bo, t, &r), TN_EINVAL,
			   "\"clamp_max_scalar_cpu\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_clamp_tensor(bo, bo, bo, &r), TN_EINVAL,
			   "\"clamp_cpu\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_clamp_tensor_(i, f, NULL), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_clamp_min_tensor_(i, f), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_clamp_tensor(f, f2, NULL, &r), TN_EINVAL,
			   "The size of tensor a (3) must match the size of tensor b (2) at "
			   "non-singleton dimension 0");
	tn_scalar bad = { .kind = (enum tn_scalar_kind)7 };
	ck_assert_tn_error_has(tn_clamp(f, &bad, NULL, &r), TN_EINVAL, "invalid scalar kind");
	ck_assert_tn_error_has(tn_where_scalar(bo, bad, one, &r), TN_EINVAL, "invalid scalar kind");
	/* A bound that does not fit the result dtype; where's Python numbers likewise. */
	tn_scalar big = tn_scalar_int(1000);
	tn_tensor *i8 = filled(1, s3, TN_INT8, 1);
	ck_assert_tn_error(tn_clamp(i8, &big, NULL, &r), TN_EOVERFLOW,
			   "value cannot be converted to type int8_t without overflow");
	ck_assert_tn_error(tn_where_scalar_other(bo, i8, big, &r), TN_EOVERFLOW,
			   "value cannot be converted to type int8_t without overflow");
	tn_tensor_unref(i8);
	/* where */
	ck_assert_tn_error(tn_where(i, f, f, &r), TN_EINVAL,
			   "where expected condition to be a boolean tensor, but got a tensor with "
			   "dtype Long");
	ck_assert_tn_error(tn_where_scalar(f, one, one, &r), TN_EINVAL,
			   "where expected condition to be a boolean tensor, but got a tensor with "
			   "dtype Float");
	ck_assert_tn_error(tn_where_out(bo, f, f, d), TN_EINVAL,
			   "Expected out tensor to have dtype Float, but got Double instead");
	ck_assert_tn_error(tn_where(bo, f, f2, &r), TN_EINVAL,
			   "The size of tensor a (3) must match the size of tensor b (2) at "
			   "non-singleton dimension 0");
	ck_assert_tn_error(tn_where(bo, f, f, NULL), TN_EINVAL, "where: NULL ret_tensor");
	/* to */
	enum tn_memory_format cl = TN_CHANNELS_LAST;
	ck_assert_tn_error_has(tn_to(f, TN_FLOAT64, false, false, &cl, &r), TN_EINVAL,
			       "required rank 4 tensor to use channels_last format");
	ck_assert_tn_error(tn_to(f, (enum tn_dtype)42, false, false, NULL, &r), TN_EINVAL,
			   "to: invalid dtype 42");
	ck_assert_ptr_null(r);
	tn_tensor *list[] = { f, d, i, i32, bo, f2 };
	for (size_t k = 0; k < 6; k++)
		tn_tensor_unref(list[k]);
	ck_assert_no_leak(b);
}
END_TEST

/* to(dtype): the tensor itself when nothing changes, else a copy in the layout PyTorch keeps. */
START_TEST(test_to_aliases_and_copies)
{
	struct tn_baseline b = tn_test_baseline();
	int64_t s[] = { 2, 3, 4, 5 }, s2[] = { 4, 6 };
	tn_tensor *cl, *m, *t, *r;
	enum tn_memory_format contig = TN_CONTIGUOUS_FORMAT, chl = TN_CHANNELS_LAST,
			      pres = TN_PRESERVE_FORMAT;
	ck_assert_tn_ok(tn_empty(4, s, TN_FLOAT32, TN_CPU, TN_CHANNELS_LAST, &cl));
	ck_assert_tn_ok(tn_to(cl, TN_FLOAT32, false, false, NULL, &r));
	ck_assert_ptr_eq(r, cl);
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_to(cl, TN_FLOAT32, true, false, &chl, &r));
	ck_assert_ptr_eq(r, cl);
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_to(cl, TN_FLOAT32, false, false, &pres, &r));
	ck_assert_ptr_eq(r, cl);
	tn_tensor_unref(r);
	/* Another format, copy=true or another dtype: a copy with its own storage. */
	ck_assert_tn_ok(tn_to(cl, TN_FLOAT32, false, false, &contig, &r));
	ck_assert_ptr_ne(r, cl);
	ck_assert(tn_tensor_is_contiguous(r));
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_to(cl, TN_FLOAT32, false, true, NULL, &r));
	ck_assert_ptr_ne(tn_tensor_data(r), tn_tensor_data(cl));
	ck_assert_int_eq(tn_tensor_strides(r)[1], 1); /* preserve: channels-last kept */
	tn_tensor_unref(r);
	/* A transposed 2-d tensor suggests the contiguous format: asking for it aliases. */
	ck_assert_tn_ok(tn_empty(2, s2, TN_INT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &m));
	ck_assert_tn_ok(tn_transpose(m, 0, 1, &t));
	ck_assert_tn_ok(tn_to(t, TN_INT16, false, false, &contig, &r));
	ck_assert_ptr_eq(r, t);
	tn_tensor_unref(r);
	/* On Meta: the same decisions, no data. */
	tn_tensor *meta;
	ck_assert_tn_ok(tn_empty(2, s2, TN_FLOAT32, TN_META, TN_CONTIGUOUS_FORMAT, &meta));
	ck_assert_tn_ok(tn_to(meta, TN_FLOAT16, false, false, NULL, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT16);
	ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
	ck_assert_ptr_null(tn_tensor_data(r));
	tn_tensor_unref(r);
	tn_tensor *list[] = { cl, m, t, meta };
	for (size_t k = 0; k < 4; k++)
		tn_tensor_unref(list[k]);
	ck_assert_no_leak(b);
}
END_TEST

/* Bool predicates write 0 and 1 into any dtype; logical_not_ keeps self's dtype. */
START_TEST(test_predicates_into_any_dtype)
{
	int64_t n = 4;
	double v[] = { 0.0, NAN, -INFINITY, 2.0 };
	struct ux_operand o = { TN_FLOAT64, UX_CONTIG, 1, { 4 }, v };
	tn_tensor *x = make_operand(&o), *out;
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &out));
	ck_assert_tn_ok(tn_isinf_out(x, out));
	const int32_t *p = tn_tensor_data(out);
	ck_assert(p[0] == 0 && p[1] == 0 && p[2] == 1 && p[3] == 0);
	ck_assert_tn_ok(tn_isnan_out(x, out));
	ck_assert(p[0] == 0 && p[1] == 1 && p[2] == 0 && p[3] == 0);
	ck_assert_tn_ok(tn_logical_not_(x));
	const double *q = tn_tensor_data(x);
	ck_assert(q[0] == 1.0 && q[1] == 0.0 && q[2] == 0.0 && q[3] == 0.0);
	ck_assert_int_eq(tn_tensor_dtype(x), TN_FLOAT64);
	/* Meta: bool result, no data. */
	tn_tensor *meta, *r;
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT64, TN_META, TN_CONTIGUOUS_FORMAT, &meta));
	ck_assert_tn_ok(tn_isfinite(meta, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_BOOL);
	ck_assert_ptr_null(tn_tensor_data(r));
	tn_tensor_unref(r);
	tn_tensor *cond;
	ck_assert_tn_ok(tn_empty(1, &n, TN_BOOL, TN_META, TN_CONTIGUOUS_FORMAT, &cond));
	ck_assert_tn_ok(tn_where_scalar(cond, tn_scalar_int(1), tn_scalar_double(0.5), &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT32);
	ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_clamp_tensor(meta, meta, NULL, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_INT64);
	tn_tensor_unref(r);
	tn_tensor_unref(cond);
	tn_tensor_unref(meta);
	tn_tensor_unref(out);
	tn_tensor_unref(x);
}
END_TEST

/* ---- past the grain size, and every kernel under each CPU capability ---- */

#define BIG 40037 /* past TN_GRAIN_SIZE (32768): OpenMP threads */

/* BIG values of @dt in f64 (deterministic; special values among them for floating types). */
static tn_tensor *big_input(enum tn_dtype dt, int salt)
{
	int64_t n = BIG;
	tn_tensor *f64, *t;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f64));
	double *v = tn_tensor_data(f64);
	for (int64_t k = 0; k < n; k++) {
		int64_t h = (k * 7919 + salt * 104729) % 2003;
		if (dt == TN_BOOL)
			v[k] = h % 3 == 0;
		else if (!tn_dtype_is_floating(dt))
			v[k] = (double)(h % 251 - (dt == TN_UINT8 ? 0 : 125));
		else
			v[k] = h == 7 ? NAN : h == 11 ? INFINITY : h == 13 ? -INFINITY
						 : (double)(h - 1000) / 37.0;
	}
	ck_assert_tn_ok(tn_empty(1, &n, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_tn_ok(tn_copy_(t, f64, false));
	tn_tensor_unref(f64);
	return t;
}

/* The same elements as @t seen through a stride of 2 (a column of a [BIG, 2] tensor). */
static tn_tensor *strided_copy(const tn_tensor *t)
{
	int64_t s[] = { BIG, 2 };
	tn_tensor *wide, *col, *sq;
	ck_assert_tn_ok(tn_empty(2, s, tn_tensor_dtype(t), TN_CPU, TN_CONTIGUOUS_FORMAT, &wide));
	ck_assert_tn_ok(tn_select(wide, 1, 1, &col));
	ck_assert_tn_ok(tn_copy_(col, t, false));
	sq = col;
	tn_tensor_unref(wide);
	return sq;
}

/* @got (a tensor of @dt) against @want (BIG elements of @dt in memory): exact, or within
 * the unary goldens' ulps for the transcendental functions (gelu's relative to its input
 * @x, where 1 + erf cancels: the DEFAULT capability's SLEEF functions have no FMA, so they
 * may differ from AVX2's and AVX-512's, which agree, in the last bit). */
static void assert_matches_x(const tn_tensor *got, const void *want, enum tn_dtype dt,
			     bool exact, const tn_tensor *x, const char *what)
{
	int64_t n = BIG;
	tn_tensor *w, *wv;
	ck_assert_tn_ok(tn_empty(1, &n, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &w));
	memcpy(tn_tensor_data(w), want, (size_t)BIG * tn_dtype_size(dt));
	double *g = values_of(got);
	wv = w;
	double *e = values_of(wv);
	double *xv = x ? values_of(x) : NULL;
	double tol = exact || !tn_dtype_is_floating(dt) ? 0
		     : dt == TN_FLOAT32			  ? 4
		     : dt == TN_FLOAT64			  ? 2
							  : 1;
	for (int64_t k = 0; k < n; k++) {
		bool ok = exact || !tn_dtype_is_floating(dt)
				  ? memcmp(&g[k], &e[k], sizeof(double)) == 0 || (g[k] != g[k] && e[k] != e[k])
			  : xv ? gelu_close(g[k], e[k], xv[k], dt)
				  : ulps(g[k], e[k], dt) <= tol;
		ck_assert_msg(ok, "%s (%s): element %lld is %.17g, DEFAULT kernel %.17g", what,
			      tn_dtype_name(dt), (long long)k, g[k], e[k]);
	}
	free(xv);
	free(g);
	free(e);
	tn_tensor_unref(w);
}

static void assert_matches(const tn_tensor *got, const void *want, enum tn_dtype dt, bool exact,
			   const char *what)
{
	assert_matches_x(got, want, dt, exact, NULL, what);
}

static int gelu_none(const tn_tensor *a, tn_tensor **r)
{
	return tn_gelu(a, "none", r);
}

static int gelu_tanh(const tn_tensor *a, tn_tensor **r)
{
	return tn_gelu(a, "tanh", r);
}

typedef int (*unary_fn)(const tn_tensor *, tn_tensor **);

static const unary_fn unary_fns[TN_NUM_UNOPS] = {
	[TN_UN_NEG] = tn_neg,	  [TN_UN_ABS] = tn_abs,		  [TN_UN_SIGN] = tn_sign,
	[TN_UN_EXP] = tn_exp,	  [TN_UN_EXPM1] = tn_expm1,	  [TN_UN_LOG] = tn_log,
	[TN_UN_LOG1P] = tn_log1p, [TN_UN_LOG2] = tn_log2,	  [TN_UN_SQRT] = tn_sqrt,
	[TN_UN_RSQRT] = tn_rsqrt, [TN_UN_SIN] = tn_sin,		  [TN_UN_COS] = tn_cos,
	[TN_UN_TAN] = tn_tan,	  [TN_UN_TANH] = tn_tanh,	  [TN_UN_SIGMOID] = tn_sigmoid,
	[TN_UN_RELU] = tn_relu,	  [TN_UN_ERF] = tn_erf,		  [TN_UN_FLOOR] = tn_floor,
	[TN_UN_CEIL] = tn_ceil,	  [TN_UN_ROUND] = tn_round,	  [TN_UN_TRUNC] = tn_trunc,
	[TN_UN_RECIPROCAL] = tn_reciprocal, [TN_UN_GELU] = gelu_none, [TN_UN_GELU_TANH] = gelu_tanh,
	[TN_UN_BITWISE_NOT] = tn_bitwise_not, [TN_UN_SILU] = tn_silu,
};

static bool transcendental(int op)
{
	switch (op) {
	case TN_UN_EXP: case TN_UN_EXPM1: case TN_UN_LOG: case TN_UN_LOG1P: case TN_UN_LOG2:
	case TN_UN_SIN: case TN_UN_COS: case TN_UN_TAN: case TN_UN_TANH: case TN_UN_SIGMOID:
	case TN_UN_ERF: case TN_UN_GELU: case TN_UN_GELU_TANH: case TN_UN_SILU:
		return true;
	default:
		return false;
	}
}

/* Every unary function whose result keeps the input's dtype (so the DEFAULT kernel runs on
 * the same bits), contiguous and strided, against the DEFAULT variant. */
static void check_unary_kernels(enum tn_dtype dt)
{
	tn_tensor *x = big_input(dt, 1), *xs = strided_copy(x);
	void *ref = malloc((size_t)BIG * tn_dtype_size(dt));
	int64_t w = (int64_t)tn_dtype_size(dt);
	for (int op = 0; op < TN_NUM_UNOPS; op++) {
		tn_tensor *r = NULL, *rs = NULL;
		tn_clear_error();
		if (unary_fns[op](x, &r) < 0)
			continue; /* refused for this dtype (checked by the goldens) */
		if (tn_tensor_dtype(r) != dt) {
			tn_tensor_unref(r);
			continue; /* integers into float32: a cast first, covered below */
		}
		ck_assert_tn_ok(unary_fns[op](xs, &rs));
		tn__unary_kernel_DEFAULT(op, dt, ref, w, tn_tensor_data(x), w, BIG);
		char what[32];
		snprintf(what, sizeof(what), "unary op %d", op);
		const tn_tensor *gx = op == TN_UN_GELU || op == TN_UN_GELU_TANH ? x : NULL;
		assert_matches_x(r, ref, dt, !transcendental(op), gx, what);
		assert_matches_x(rs, ref, dt, !transcendental(op), gx, what);
		tn_tensor_unref(r);
		tn_tensor_unref(rs);
	}
	free(ref);
	tn_tensor_unref(xs);
	tn_tensor_unref(x);
}

static void check_pred_kernels(enum tn_dtype dt)
{
	static const unary_fn fns[] = { tn_logical_not, tn_isnan, tn_isinf, tn_isfinite };
	tn_tensor *x = big_input(dt, 2), *xs = strided_copy(x);
	bool *ref = malloc(BIG);
	for (int op = 0; op < 4; op++) {
		tn_tensor *r, *rs;
		ck_assert_tn_ok(fns[op](x, &r));
		ck_assert_tn_ok(fns[op](xs, &rs));
		tn__pred_kernel_DEFAULT(op, dt, (char *)ref, 1, tn_tensor_data(x),
					(int64_t)tn_dtype_size(dt), BIG);
		assert_matches(r, ref, TN_BOOL, true, "predicate");
		assert_matches(rs, ref, TN_BOOL, true, "predicate");
		tn_tensor_unref(r);
		tn_tensor_unref(rs);
	}
	free(ref);
	tn_tensor_unref(xs);
	tn_tensor_unref(x);
}

/* clamp with Scalar bounds (one or two) and with Tensor bounds (NaN-propagating modes). */
static void check_clamp_kernels(enum tn_dtype dt)
{
	if (dt == TN_BOOL)
		return; /* refused with two bounds; one bound is max/min, checked by the goldens */
	tn_tensor *x = big_input(dt, 3), *xs = strided_copy(x), *lo = big_input(dt, 4),
		  *hi = big_input(dt, 5);
	int64_t w = (int64_t)tn_dtype_size(dt);
	unsigned char *ref = malloc((size_t)BIG * (size_t)w), l[8], h[8];
	tn_scalar sl = tn_scalar_int(dt == TN_UINT8 ? 3 : -3), sh = tn_scalar_int(50);
	ck_assert_tn_ok(tn__scalar_to_element(sl, dt, l));
	ck_assert_tn_ok(tn__scalar_to_element(sh, dt, h));
	for (int mode = 1; mode <= 3; mode++) {
		const tn_scalar *pl = mode & 1 ? &sl : NULL, *ph = mode & 2 ? &sh : NULL;
		tn_tensor *r, *rs, *rt;
		ck_assert_tn_ok(tn_clamp(x, pl, ph, &r));
		ck_assert_tn_ok(tn_clamp(xs, pl, ph, &rs));
		tn__clamp_kernel_DEFAULT(mode, dt, (char *)ref, w, tn_tensor_data(x), w,
					 mode & 1 ? (char *)l : NULL, 0, mode & 2 ? (char *)h : NULL,
					 0, BIG);
		assert_matches(r, ref, dt, true, "clamp scalar");
		assert_matches(rs, ref, dt, true, "clamp scalar");
		ck_assert_tn_ok(tn_clamp_tensor(xs, mode & 1 ? lo : NULL, mode & 2 ? hi : NULL, &rt));
		tn__clamp_kernel_DEFAULT(mode | TN_CLAMP_NAN, dt, (char *)ref, w, tn_tensor_data(x),
					 w, tn_tensor_data(lo), w, tn_tensor_data(hi), w, BIG);
		assert_matches(rt, ref, dt, true, "clamp tensor");
		tn_tensor_unref(r);
		tn_tensor_unref(rs);
		tn_tensor_unref(rt);
	}
	free(ref);
	tn_tensor *list[] = { x, xs, lo, hi };
	for (size_t k = 0; k < 4; k++)
		tn_tensor_unref(list[k]);
}

static void check_where_kernel(enum tn_dtype dt)
{
	tn_tensor *c = big_input(TN_BOOL, 6), *a = big_input(dt, 7), *b = big_input(dt, 8),
		  *as = strided_copy(a), *r, *rs;
	int64_t w = (int64_t)tn_dtype_size(dt);
	char *ref = malloc((size_t)BIG * (size_t)w);
	ck_assert_tn_ok(tn_where(c, a, b, &r));
	ck_assert_tn_ok(tn_where(c, as, b, &rs));
	tn__where_kernel_DEFAULT((size_t)w, ref, w, tn_tensor_data(c), 1, tn_tensor_data(a), w,
				 tn_tensor_data(b), w, BIG);
	assert_matches(r, ref, dt, true, "where");
	assert_matches(rs, ref, dt, true, "where");
	free(ref);
	tn_tensor *list[] = { c, a, b, as, r, rs };
	for (size_t k = 0; k < 6; k++)
		tn_tensor_unref(list[k]);
}

START_TEST(test_kernels_under_each_capability)
{
	tn_test_force_capability(_i);
	for (int d = 0; d < TN_NUM_DTYPES; d++) {
		check_unary_kernels((enum tn_dtype)d);
		check_pred_kernels((enum tn_dtype)d);
		check_clamp_kernels((enum tn_dtype)d);
		check_where_kernel((enum tn_dtype)d);
	}
}
END_TEST

/* Mixed dtypes past the grain size: the chunked casts of the shared loop, broadcast bounds,
 * and an out= of another dtype, under each capability. */
START_TEST(test_mixed_dtypes_under_each_capability)
{
	tn_test_force_capability(_i);
	int64_t n = BIG;
	tn_tensor *i = big_input(TN_INT32, 9), *f = big_input(TN_FLOAT64, 10),
		  *c = big_input(TN_BOOL, 11), *r, *out;
	tn_scalar half = tn_scalar_double(0.5);
	/* clamp(int32, 0.5): float32, each element max(x, 0.5) */
	ck_assert_tn_ok(tn_clamp(i, &half, NULL, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT32);
	const int32_t *pi = tn_tensor_data(i);
	const float *pr = tn_tensor_data(r);
	for (int64_t k = 0; k < n; k++)
		ck_assert_float_eq(pr[k], (float)pi[k] < 0.5f ? 0.5f : (float)pi[k]);
	tn_tensor_unref(r);
	/* where(c, int32, float64) into float64, and into an int64 out= refused */
	ck_assert_tn_ok(tn_where(c, i, f, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT64);
	const double *pf = tn_tensor_data(f), *pw = tn_tensor_data(r);
	const bool *pc = tn_tensor_data(c);
	for (int64_t k = 0; k < n; k++) {
		double want_v = pc[k] ? (double)pi[k] : pf[k];
		ck_assert(pw[k] == want_v || (pw[k] != pw[k] && want_v != want_v));
	}
	tn_tensor_unref(r);
	/* isnan(float64) into an int16 out=: 0/1 converted back chunk by chunk */
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &out));
	ck_assert_tn_ok(tn_isnan_out(f, out));
	const int16_t *po = tn_tensor_data(out);
	for (int64_t k = 0; k < n; k++)
		ck_assert_int_eq(po[k], pf[k] != pf[k]);
	tn_tensor_unref(out);
	/* to(float16) of a float64 tensor matches copy_ */
	tn_tensor *h, *h2;
	ck_assert_tn_ok(tn_to(f, TN_FLOAT16, false, false, NULL, &h));
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &h2));
	ck_assert_tn_ok(tn_copy_(h2, f, false));
	ck_assert_int_eq(memcmp(tn_tensor_data(h), tn_tensor_data(h2), (size_t)n * 2), 0);
	tn_tensor *list[] = { i, f, c, h, h2 };
	for (size_t k = 0; k < 5; k++)
		tn_tensor_unref(list[k]);
}
END_TEST

/*
 * where over contiguous operands (the kernel's blend loop, and with a one-element condition
 * the copy of the operand it selects, also into that operand): each element is the selected
 * operand's bits, for every element width (uint8, float16, float32, float64), random
 * conditions, rows off the vector widths, under each CPU capability.
 */
START_TEST(test_where_contiguous_under_each_capability)
{
	tn_test_force_capability(_i);
	static const enum tn_dtype dts[] = { TN_UINT8, TN_FLOAT16, TN_FLOAT32, TN_FLOAT64 };
	static const int64_t lens[] = { 1, 7, 64, 1003 };
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		const size_t es = tn_dtype_size(dts[d]);
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			const int64_t n = lens[k], one = 1;
			tn_tensor *c, *a, *b, *r;
			ck_assert_tn_ok(tn_empty(1, &n, TN_BOOL, TN_CPU, TN_CONTIGUOUS_FORMAT, &c));
			ck_assert_tn_ok(tn_empty(1, &n, dts[d], TN_CPU, TN_CONTIGUOUS_FORMAT, &a));
			ck_assert_tn_ok(tn_empty(1, &n, dts[d], TN_CPU, TN_CONTIGUOUS_FORMAT, &b));
			unsigned char *pc = tn_tensor_data(c), *pa = tn_tensor_data(a),
				      *pb = tn_tensor_data(b);
			uint64_t st = 0x2545f4914f6cdd1dull + k * 4 + d;
			for (int64_t i = 0; i < n; i++) {
				st ^= st << 13, st ^= st >> 7, st ^= st << 17;
				pc[i] = (unsigned char)(st & 1);
				memcpy(pa + (size_t)i * es, &st, es);
				uint64_t u = ~st;
				memcpy(pb + (size_t)i * es, &u, es);
			}
			ck_assert_tn_ok(tn_where(c, a, b, &r));
			const unsigned char *pr = tn_tensor_data(r);
			for (int64_t i = 0; i < n; i++)
				ck_assert_msg(!memcmp(pr + (size_t)i * es,
						      (pc[i] ? pa : pb) + (size_t)i * es, es),
					      "where %s of %lld: element %lld is not the selected "
					      "operand's", tn_dtype_name(dts[d]), (long long)n,
					      (long long)i);
			tn_tensor_unref(r);
			for (int v = 0; v < 2; v++) {
				tn_tensor *c1;
				ck_assert_tn_ok(tn_empty(1, &one, TN_BOOL, TN_CPU, TN_CONTIGUOUS_FORMAT,
							 &c1));
				*(unsigned char *)tn_tensor_data(c1) = (unsigned char)v;
				ck_assert_tn_ok(tn_where(c1, a, b, &r));
				ck_assert_int_eq(tn_tensor_numel(r), n);
				ck_assert_msg(!memcmp(tn_tensor_data(r), v ? pa : pb, (size_t)n * es),
					      "where %s of %lld with the one condition %d",
					      tn_dtype_name(dts[d]), (long long)n, v);
				tn_tensor_unref(r);
				/* Into the operand it selects: that operand, unchanged. */
				tn_tensor *keep;
				ck_assert_tn_ok(tn_clone(v ? a : b, TN_CONTIGUOUS_FORMAT, &keep));
				ck_assert_tn_ok(tn_where_out(c1, a, b, v ? a : b));
				ck_assert_msg(!memcmp(tn_tensor_data(v ? a : b), tn_tensor_data(keep),
						      (size_t)n * es),
					      "where %s of %lld into its operand %d",
					      tn_dtype_name(dts[d]), (long long)n, v);
				tn_tensor_unref(keep);
				tn_tensor_unref(c1);
			}
			tn_tensor_unref(c);
			tn_tensor_unref(a);
			tn_tensor_unref(b);
		}
	}
}
END_TEST

/* clamp with a NaN bound fills NaN without converting the other bound (1e300 does not fit
 * float32, and is no error then); PyTorch's values and messages. */
START_TEST(test_clamp_nan_bound_matches_pytorch)
{
	int64_t three = 3;
	for (size_t k = 0; k < sizeof(par_clamp_cases) / sizeof(par_clamp_cases[0]); k++) {
		const struct par_clamp_case *c = &par_clamp_cases[k];
		tn_tensor *t, *r = NULL;
		tn_scalar lo = tn_scalar_double(c->min), hi = tn_scalar_double(c->max);
		ck_assert_tn_ok(tn_full(1, &three, tn_scalar_double(2.0), &c->dtype, TN_CPU, &t));
		tn_clear_error();
		int rc = tn_clamp(t, c->has_min ? &lo : NULL, c->has_max ? &hi : NULL, &r);
		if (!c->ok) {
			ck_assert_msg(rc < 0, "case %zu: succeeded, PyTorch '%s'", k, c->msg);
			ck_assert_str_eq(tn_last_error(), c->msg);
		} else {
			ck_assert_msg(rc == 0, "case %zu (%s): %s", k, tn_dtype_name(c->dtype),
				      tn_last_error());
			for (int64_t i = 0; i < 3; i++) {
				double g = tn_test_get_double(r, &i);
				ck_assert_msg(g == c->value || (isnan(g) && isnan(c->value)),
					      "case %zu: %g, PyTorch %g", k, g, c->value);
			}
		}
		tn_tensor_unref(r);
		tn_tensor_unref(t);
	}
}
END_TEST

/* log1p near FLT_MAX is finite (88.6), where PyTorch 1.13's vectorised log1p gives inf: a
 * deliberate difference (tn_exp(3)); float32 and bfloat16, one element and 40. */
/* float16 where PyTorch 1.13's CPU has no kernel (libtensor(7), NOTES): the float32
 * operator's result rounded once, over every eighth float16 in [-12, 12] and the specials. */
START_TEST(test_half_where_pytorch_has_no_kernel)
{
	static int (*const fns[])(const tn_tensor *, tn_tensor **) = {
		tn_exp, tn_log, tn_log2, tn_log1p, tn_expm1, tn_sin, tn_cos, tn_tan, tn_tanh,
		tn_sigmoid, tn_erf, tn_sqrt, tn_rsqrt, tn_floor, tn_ceil, tn_round, tn_trunc, tn_relu,
	};
	int64_t n = 0;
	uint16_t bits[8192];
	for (uint32_t b = 0; b < 0x10000 && n < 8000; b++) {
		float f = tn_half_to_float((tn_half){ (uint16_t)b });
		if ((fabsf(f) <= 12 && (b & 7) == 0) || isinf(f) || (isnan(f) && b == 0x7e00))
			bits[n++] = (uint16_t)b;
	}
	tn_tensor *h, *f32;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &h));
	memcpy(tn_tensor_data(h), bits, (size_t)n * 2);
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &f32));
	ck_assert_tn_ok(tn_copy_(f32, h, false));
	for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++) {
		tn_tensor *rh, *r32, *want;
		ck_assert_tn_ok(fns[k](h, &rh));
		ck_assert_tn_ok(fns[k](f32, &r32));
		ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &want));
		ck_assert_tn_ok(tn_copy_(want, r32, false));
		const uint16_t *g = tn_tensor_data(rh), *w = tn_tensor_data(want);
		for (int64_t i = 0; i < n; i++) {
			float gf = tn_half_to_float((tn_half){ g[i] });
			ck_assert_msg(g[i] == w[i] || (isnan(gf) && isnan(tn_half_to_float((tn_half){ w[i] }))),
				      "function %zu at 0x%04x: 0x%04x, float32 rounded 0x%04x", k,
				      bits[i], g[i], w[i]);
		}
		tn_tensor_unref(rh);
		tn_tensor_unref(r32);
		tn_tensor_unref(want);
	}
	tn_tensor_unref(h);
	tn_tensor_unref(f32);
}
END_TEST

START_TEST(test_log1p_near_flt_max)
{
	static const enum tn_dtype dts[] = { TN_FLOAT32, TN_BFLOAT16 };
	for (size_t d = 0; d < 2; d++) {
		for (int64_t n = 1; n <= 40; n += 39) {
			tn_tensor *x, *r;
			ck_assert_tn_ok(tn_full(1, &n, tn_scalar_double(3e38), &dts[d], TN_CPU, &x));
			ck_assert_tn_ok(tn_log1p(x, &r));
			for (int64_t i = 0; i < n; i++) {
				double v = tn_test_get_double(r, &i);
				ck_assert_msg(isfinite(v) && fabs(v - 88.59) < 0.5,
					      "log1p(3e38) of dtype %d: %g", (int)dts[d], v);
			}
			tn_tensor_unref(r);
			tn_tensor_unref(x);
		}
	}
}
END_TEST

/*
 * Issue 17, item 4: the out= dtype rules of PyTorch 1.13, operator by operator, over every
 * pair of input and out dtypes: neg, abs, sign, floor, ceil, round and trunc require out to
 * have the input's dtype ("Found dtype Char but expected Short"); relu.out and the
 * Scalar_Tensor_out overloads of remainder, the bitwise operators and the shifts compute,
 * then convert into out of any dtype; the others as before. Called boxed, by name.
 */
START_TEST(test_out_dtype_rules)
{
	for (size_t k = 0; k < UP_NCASES; k++) {
		const struct up_case *c = &up_cases[k];
		const enum tn_dtype sd = (enum tn_dtype)c->sdtype, od = (enum tn_dtype)c->odtype;
		double vals[3] = { 1.5, -2.0, 3.0 };
		int64_t n = 3;
		if (sd == TN_UINT8)
			memcpy(vals, (double[]){ 1, 2, 3 }, sizeof(vals));
		else if (sd == TN_BOOL)
			memcpy(vals, (double[]){ 1, 0, 1 }, sizeof(vals));
		else if (!tn_dtype_is_floating(sd))
			memcpy(vals, (double[]){ 1, -2, 3 }, sizeof(vals));
		tn_tensor *f, *x, *o;
		ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f));
		memcpy(tn_tensor_data(f), vals, sizeof(vals));
		ck_assert_tn_ok(tn_empty(1, &n, sd, TN_CPU, TN_CONTIGUOUS_FORMAT, &x));
		ck_assert_tn_ok(tn_copy_(x, f, false));
		ck_assert_tn_ok(tn_zeros(1, &n, od, TN_CPU, &o));
		tn_stack st = TN_STACK_INIT;
		if (c->scalar)
			ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_scalar(c->scalar == 1
									     ? tn_scalar_int(3)
									     : tn_scalar_double(2.5))));
		ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
		ck_assert_tn_ok(tn_stack_push_tensor(&st, o));
		tn_clear_error();
		int rc = tn_call_boxed(c->name, &st);
		if (!c->ok) {
			ck_assert_msg(rc == c->code, "case %zu %s %s into %s: returned %d (%s), PyTorch %s",
				      k, c->name, tn_dtype_name(sd), tn_dtype_name(od), rc,
				      tn_last_error(), c->msg);
			ck_assert_str_eq(tn_last_error(), c->msg);
		} else {
			ck_assert_msg(rc == 0, "case %zu %s %s into %s: %s", k, c->name,
				      tn_dtype_name(sd), tn_dtype_name(od), tn_last_error());
			tn_tensor *g;
			ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &g));
			ck_assert_tn_ok(tn_copy_(g, o, false));
			const double *got = tn_tensor_data(g);
			/* The operators' own accuracy is tested elsewhere: a few ulps here. */
			double tol = od == TN_FLOAT16 || od == TN_BFLOAT16 ? 1e-2
				     : tn_dtype_is_floating(od)		   ? 1e-6
									   : 0;
			for (int i = 0; i < 3; i++)
				ck_assert_msg(got[i] == c->v[i] || (isnan(got[i]) && isnan(c->v[i])) ||
						      fabs(got[i] - c->v[i]) <= tol * fmax(1, fabs(c->v[i])),
					      "case %zu %s %s into %s: element %d is %.17g, PyTorch %.17g",
					      k, c->name, tn_dtype_name(sd), tn_dtype_name(od), i, got[i],
					      c->v[i]);
			tn_tensor_unref(g);
		}
		tn_stack_destroy(&st);
		tn_tensor_unref(o);
		tn_tensor_unref(x);
		tn_tensor_unref(f);
	}
}
END_TEST

/* gelu(bfloat16, approximate='tanh') bit for bit with PyTorch, which rounds each operation to
 * bfloat16 (found by tests/difftest: -0.0 at x = -5.59375, not -1.03e-05), contiguous (the
 * goldens' layout) and every other element, in place and into out=, under each capability. */
START_TEST(test_gelu_tanh_bfloat16_under_each_capability)
{
	tn_test_force_capability(_i);
	int64_t n = GELU_BF16_N, n2 = 2 * GELU_BF16_N, st = 2;
	tn_tensor *x, *base, *xs, *r, *out;
	ck_assert_tn_ok(tn_empty(1, &n, TN_BFLOAT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &x));
	memcpy(tn_tensor_data(x), gelu_bf16_x, sizeof gelu_bf16_x);
	ck_assert_tn_ok(tn_zeros(1, &n2, TN_BFLOAT16, TN_CPU, &base));
	uint16_t *pb = tn_tensor_data(base);
	for (int64_t i = 0; i < n; i++)
		pb[2 * i] = gelu_bf16_x[i];
	ck_assert_tn_ok(tn_as_strided(base, 1, &n, 1, &st, NULL, &xs));
	ck_assert_tn_ok(tn_empty(1, &n, TN_BFLOAT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &out));
	ck_assert_tn_ok(tn_gelu(x, "tanh", &r));
	ck_assert_tn_ok(tn_gelu_out(xs, "tanh", out));
	ck_assert_tn_ok(tn_gelu_(xs, "tanh"));
	const uint16_t *pr = tn_tensor_data(r), *po = tn_tensor_data(out);
	/* The same bits, or both NaN (of any sign and payload). */
#define SAME_BF16(a, b) ((a) == (b) || (((a)&0x7fff) > 0x7f80 && ((b)&0x7fff) > 0x7f80))
	for (int64_t i = 0; i < n; i++) {
		uint16_t w = gelu_bf16_r[i];
		ck_assert_msg(SAME_BF16(pr[i], w) && SAME_BF16(po[i], w) && SAME_BF16(pb[2 * i], w),
			      "gelu(0x%04x): 0x%04x, out= 0x%04x, in place 0x%04x, PyTorch 0x%04x",
			      gelu_bf16_x[i], pr[i], po[i], pb[2 * i], gelu_bf16_r[i]);
	}
#undef SAME_BF16
	tn_tensor *list[] = { x, base, xs, r, out };
	for (size_t k = 0; k < 5; k++)
		tn_tensor_unref(list[k]);
}
END_TEST

/* pow(float32, Scalar) as PyTorch 1.13 computes it (found by tests/difftest: 321^3.08 is
 * 52485036 in torch, whose scalar loop computes in double with the exponent as given, and was
 * 52485012, the exponent rounded to float): every element of a strided row and the tail of a
 * contiguous one bit for bit; the contiguous row's blocks of 16, where torch's vector loop
 * takes Sleef's powf of the exponent rounded to float, within 1 ulp (the C library's powf
 * here). Functional, out= and in place. */
static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

START_TEST(test_pow_float32_scalar_matches_pytorch)
{
	for (int k = 0; k < POW_F32_NCASES; k++) {
		const struct pow_f32_case *c = &pow_f32_cases[k];
		int64_t n = c->n, n2 = 2 * c->n, st = c->layout ? 2 : 1;
		tn_tensor *base, *x, *r, *out;
		ck_assert_tn_ok(tn_zeros(1, c->layout ? &n2 : &n, TN_FLOAT32, TN_CPU, &base));
		float *pb = tn_tensor_data(base);
		for (int64_t i = 0; i < n; i++)
			memcpy(&pb[i * st], &c->a[i], 4);
		ck_assert_tn_ok(tn_as_strided(base, 1, &n, 1, &st, NULL, &x));
		ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &out));
		ck_assert_tn_ok(tn_pow_scalar(x, tn_scalar_double(c->e), &r));
		ck_assert_tn_ok(tn_pow_scalar_out(x, tn_scalar_double(c->e), out));
		ck_assert_tn_ok(tn_pow_scalar_(x, tn_scalar_double(c->e)));
		const float *pr = tn_tensor_data(r), *po = tn_tensor_data(out);
		int64_t vec = c->layout ? 0 : n / 16 * 16;
		for (int64_t i = 0; i < n; i++) {
			const float got[3] = { pr[i], po[i], pb[i * st] };
			for (int j = 0; j < 3; j++) {
				int64_t d = (int64_t)f32_bits(got[j]) - (int64_t)c->want[i];
				ck_assert_msg(i < vec ? d >= -1 && d <= 1 : d == 0,
					      "pow(0x%08x, %g) [%s, layout %d, element %lld]: 0x%08x, "
					      "PyTorch 0x%08x",
					      c->a[i], c->e, j == 0 ? "functional" : j == 1 ? "out=" : "in place",
					      c->layout, (long long)i, f32_bits(got[j]), c->want[i]);
			}
		}
		tn_tensor *list[] = { base, x, r, out };
		for (size_t m = 0; m < 4; m++)
			tn_tensor_unref(list[m]);
	}
}
END_TEST

static Suite *unary_suite(void)
{
	Suite *s = suite_create("unary");
	TCase *tc = tcase_create("ops");
	tcase_add_loop_test(tc, test_goldens, 0, 8);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_to_aliases_and_copies);
	tcase_add_test(tc, test_predicates_into_any_dtype);
	tcase_add_test(tc, test_out_dtype_rules);
	tcase_add_loop_test(tc, test_kernels_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_mixed_dtypes_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_where_contiguous_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(tc, test_clamp_nan_bound_matches_pytorch);
	tcase_add_test(tc, test_half_where_pytorch_has_no_kernel);
	tcase_add_test(tc, test_log1p_near_flt_max);
	tcase_add_test(tc, test_pow_float32_scalar_matches_pytorch);
	tcase_add_loop_test(tc, test_gelu_tanh_bfloat16_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(unary_suite)
