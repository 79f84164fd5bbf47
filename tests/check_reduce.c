/* SPDX-License-Identifier: MIT */
/*
 * Reductions against PyTorch: every golden case of tests/golden/reduce_golden.h (each op on
 * each dtype, dim lists and keepdim, transposed, strided, expanded and channels-last inputs,
 * NaN and infinities, empty and 0-dim inputs, inputs past the grain size) in its functional
 * and out= forms and on Meta, under each CPU capability and with 1, 2 and 4 threads; the
 * accuracy of float32 sums over 2^25 elements against a float64 reference; and the errors of
 * the out= forms.
 */
#include <math.h>

#include "testutil.h"
#include "golden/reduce_golden.h"
#include "golden/parity_golden.h"
#include "golden/reduce_parity_golden.h"

enum {
	OP_SUM, OP_SUM_DIM, OP_MEAN, OP_MEAN_DIM, OP_PROD, OP_PROD_DIM, OP_AMAX, OP_AMIN, OP_MAX,
	OP_MIN, OP_MAX_DIM, OP_MIN_DIM, OP_ARGMAX, OP_ARGMIN, OP_ALL, OP_ALL_DIM, OP_ANY,
	OP_ANY_DIM
};

/* A contiguous float64 tensor of @n dims holding @v (NULL: the formula the generator uses for
 * large inputs, ((i * 7919) % 17) - 8). */
static tn_tensor *f64_values(int n, const int64_t *shape, const double *v)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_empty(n, shape, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	double *p = tn_tensor_data(t);
	for (int64_t i = 0; i < tn_tensor_numel(t); i++)
		p[i] = v ? v[i] : (double)((i * 7919) % 17 - 8);
	return t;
}

/* The golden input in its layout (see RED_LAYOUTS in the generator), on @dev. */
static tn_tensor *make_input(const struct red_input *in, tn_device dev)
{
	const int n = in->ndim;
	enum tn_dtype dt = (enum tn_dtype)in->dtype;
	int64_t mem[4];
	tn_tensor *vals, *base, *t;

	if (dev.type == TN_DEVICE_META) {
		ck_assert_tn_ok(tn_empty(n, in->shape, dt, dev, TN_CONTIGUOUS_FORMAT, &t));
		return t;
	}
	vals = f64_values(n, in->shape, in->v);
	memcpy(mem, in->shape, sizeof(mem));
	switch (in->layout) {
	case 1: /* the last two dims transposed in memory */
		mem[n - 1] = in->shape[n - 2];
		mem[n - 2] = in->shape[n - 1];
		ck_assert_tn_ok(tn_empty(n, mem, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_transpose(base, -1, -2, &t));
		break;
	case 2: /* every other element of a twice longer last dim */
		mem[n - 1] *= 2;
		ck_assert_tn_ok(tn_zeros(n, mem, dt, dev, &base));
		ck_assert_tn_ok(tn_slice(base, n - 1, 0, INT64_MAX, 2, &t));
		break;
	case 3: { /* expanded from size 1 along dim 0: the values of the first slice */
		tn_tensor *first;
		mem[0] = 1;
		ck_assert_tn_ok(tn_empty(n, mem, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_narrow(vals, 0, 0, 1, &first));
		ck_assert_tn_ok(tn_copy_(base, first, false));
		tn_tensor_unref(first);
		ck_assert_tn_ok(tn_expand(base, n, in->shape, &t));
		tn_tensor_unref(base);
		tn_tensor_unref(vals);
		return t;
	}
	case 4:
		ck_assert_tn_ok(tn_empty(n, in->shape, dt, dev, TN_CHANNELS_LAST, &base));
		t = tn_tensor_ref(base);
		break;
	default:
		ck_assert_tn_ok(tn_empty(n, in->shape, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		t = tn_tensor_ref(base);
		break;
	}
	tn_tensor_unref(base);
	ck_assert_tn_ok(tn_copy_(t, vals, false));
	tn_tensor_unref(vals);
	return t;
}

/* Call the case's operator: functional (@out NULL; results in *r, *r2) or out= (@out, @out2). */
static int call_op(const struct red_case *c, const tn_tensor *x, tn_tensor *out, tn_tensor *out2,
		   tn_tensor **r, tn_tensor **r2)
{
	enum tn_dtype dt = (enum tn_dtype)c->dtype;
	const enum tn_dtype *dtp = c->dtype >= 0 ? &dt : NULL;
	int nd = c->ndims < 0 ? 0 : c->ndims;
	const int64_t *dims = c->ndims < 0 ? NULL : c->dims, *dim1 = c->ndims < 0 ? NULL : c->dims;
	bool kd = c->keepdim;
	int64_t d = c->dims[0];

	switch (c->op) {
	case OP_SUM:
		return out ? tn_sum_out(x, dtp, out) : tn_sum(x, dtp, r);
	case OP_SUM_DIM:
		return out ? tn_sum_dim_out(x, nd, dims, kd, dtp, out)
			   : tn_sum_dim(x, nd, dims, kd, dtp, r);
	case OP_MEAN:
		return out ? tn_mean_dim_out(x, 0, NULL, false, dtp, out) : tn_mean(x, dtp, r);
	case OP_MEAN_DIM:
		return out ? tn_mean_dim_out(x, nd, dims, kd, dtp, out)
			   : tn_mean_dim(x, nd, dims, kd, dtp, r);
	case OP_PROD:
		return out ? tn_prod_out(x, dtp, out) : tn_prod(x, dtp, r);
	case OP_PROD_DIM:
		return out ? tn_prod_dim_out(x, d, kd, dtp, out) : tn_prod_dim(x, d, kd, dtp, r);
	case OP_AMAX:
		return out ? tn_amax_out(x, nd, dims, kd, out) : tn_amax(x, nd, dims, kd, r);
	case OP_AMIN:
		return out ? tn_amin_out(x, nd, dims, kd, out) : tn_amin(x, nd, dims, kd, r);
	case OP_MAX:
		return out ? tn_amax_out(x, 0, NULL, false, out) : tn_max(x, r);
	case OP_MIN:
		return out ? tn_amin_out(x, 0, NULL, false, out) : tn_min(x, r);
	case OP_MAX_DIM:
		return out ? tn_max_dim_out(x, d, kd, out, out2) : tn_max_dim(x, d, kd, r, r2);
	case OP_MIN_DIM:
		return out ? tn_min_dim_out(x, d, kd, out, out2) : tn_min_dim(x, d, kd, r, r2);
	case OP_ARGMAX:
		return out ? tn_argmax_out(x, dim1, kd, out) : tn_argmax(x, dim1, kd, r);
	case OP_ARGMIN:
		return out ? tn_argmin_out(x, dim1, kd, out) : tn_argmin(x, dim1, kd, r);
	case OP_ALL:
		return out ? tn_all_out(x, out) : tn_all(x, r);
	case OP_ALL_DIM:
		return out ? tn_all_dim_out(x, d, kd, out) : tn_all_dim(x, d, kd, r);
	case OP_ANY:
		return out ? tn_any_out(x, out) : tn_any(x, r);
	default:
		return out ? tn_any_dim_out(x, d, kd, out) : tn_any_dim(x, d, kd, r);
	}
}

/* Sums, means and products of floating results may differ from PyTorch's in rounding; more
 * for 16-bit floats, which PyTorch rounds after each partial sum where libtensor rounds once
 * from its float32 accumulator. */
static double tolerance(const struct red_case *c)
{
	bool acc = c->op <= OP_PROD_DIM;
	switch (c->rdtype) {
	case TN_FLOAT64:
		return acc ? 1e-12 : 0;
	case TN_FLOAT32:
		return acc ? 2e-5 : 0;
	case TN_FLOAT16:
		return acc ? 1e-2 : 0;
	case TN_BFLOAT16:
		return acc ? 3e-2 : 0;
	default:
		return 0;
	}
}

static bool close_to(double got, double want, double tol)
{
	if (want != want)
		return got != got;
	if (isinf(want) || tol == 0)
		return got == want;
	return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* @t's elements in row-major order as doubles (a new contiguous float64 tensor). */
static tn_tensor *as_f64(const tn_tensor *t)
{
	tn_tensor *f;
	ck_assert_tn_ok(tn_empty(tn_tensor_ndim(t), tn_tensor_sizes(t), TN_FLOAT64, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &f));
	ck_assert_tn_ok(tn_copy_(f, t, false));
	return f;
}

static void check_result(const struct red_case *c, size_t k, const tn_tensor *r,
			 const tn_tensor *ri, bool data, const char *form)
{
	const char *op = red_op_names[c->op];
	ck_assert_msg((int)tn_tensor_dtype(r) == c->rdtype, "case %zu %s (%s): dtype %s, PyTorch %s", k,
		      op, form, tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(c->rdtype));
	ck_assert_msg(tn_tensor_ndim(r) == c->rndim, "case %zu %s (%s): ndim %d, PyTorch %d", k, op,
		      form, tn_tensor_ndim(r), c->rndim);
	for (int d = 0; d < c->rndim; d++)
		ck_assert_msg(tn_tensor_sizes(r)[d] == c->rshape[d], "case %zu %s (%s): size %d", k,
			      op, form, d);
	if (ri) {
		ck_assert_int_eq(tn_tensor_dtype(ri), TN_INT64);
		ck_assert_int_eq(tn_tensor_ndim(ri), c->rndim);
	}
	if (!data)
		return;
	tn_tensor *f = as_f64(r);
	const double *got = tn_tensor_data(f);
	double tol = tolerance(c), total = 0;
	for (int64_t i = 0, j = 0; i < c->n; i += c->step, j++)
		ck_assert_msg(close_to(got[i], c->v[j], tol),
			      "case %zu %s (%s): element %lld is %.17g, PyTorch %.17g", k, op, form,
			      (long long)i, got[i], c->v[j]);
	if (tol == 0) {
		for (int64_t i = 0; i < c->n; i++)
			total += got[i];
		ck_assert_msg(close_to(total, c->total, 0) || c->rdtype >= (int)TN_FLOAT16,
			      "case %zu %s (%s): total %.17g, PyTorch %.17g", k, op, form, total,
			      c->total);
	}
	tn_tensor_unref(f);
	if (ri && c->idx) {
		const int64_t *ix = tn_tensor_data(ri);
		ck_assert(tn_tensor_is_contiguous(ri));
		for (int64_t i = 0, j = 0; i < c->n; i += c->step, j++)
			ck_assert_msg(ix[i] == c->idx[j], "case %zu %s (%s): index %lld is %lld, "
				      "PyTorch %lld", k, op, form, (long long)i, (long long)ix[i],
				      (long long)c->idx[j]);
	}
}

static bool has_indices(int op)
{
	return op == OP_MAX_DIM || op == OP_MIN_DIM;
}

/* One golden case @c of input @in: functional, out= (into tensors filled with 7 first) and
 * Meta. */
static void run_golden(const struct red_case *c, const struct red_input *in, size_t k, bool meta)
{
	tn_tensor *x = make_input(in, TN_CPU), *r = NULL, *r2 = NULL;
	const char *op = red_op_names[c->op];

	tn_clear_error();
	int rc = call_op(c, x, NULL, NULL, &r, &r2);
	if (!c->ok) {
		ck_assert_msg(rc == c->code, "case %zu %s: returned %d (%s), PyTorch %d (%s)", k, op,
			      rc, tn_last_error(), c->code, c->msg);
		ck_assert_str_eq(tn_last_error(), c->msg);
	} else {
		ck_assert_msg(rc == 0, "case %zu %s failed: %s", k, op, tn_last_error());
		check_result(c, k, r, r2, true, "functional");
		tn_tensor *o, *o2 = NULL;
		ck_assert_tn_ok(tn_full(c->rndim, c->rshape, tn_scalar_int(7),
					&(enum tn_dtype){ (enum tn_dtype)c->rdtype }, TN_CPU, &o));
		if (has_indices(c->op))
			ck_assert_tn_ok(tn_full(c->rndim, c->rshape, tn_scalar_int(7),
						&(enum tn_dtype){ TN_INT64 }, TN_CPU, &o2));
		ck_assert_msg(call_op(c, x, o, o2, NULL, NULL) == 0, "case %zu %s out= failed: %s", k,
			      op, tn_last_error());
		check_result(c, k, o, o2, true, "out=");
		tn_tensor_unref(o);
		tn_tensor_unref(o2);
		tn_tensor_unref(r);
		tn_tensor_unref(r2);
	}
	tn_tensor_unref(x);
	if (!meta)
		return;
	/* Meta: the same result geometry and dtype, or the same error, without data. */
	x = make_input(in, TN_META);
	r = r2 = NULL;
	tn_clear_error();
	rc = call_op(c, x, NULL, NULL, &r, &r2);
	if (!c->ok) {
		ck_assert_msg(rc == c->code, "case %zu %s on Meta: returned %d (%s)", k, op, rc,
			      tn_last_error());
		ck_assert_str_eq(tn_last_error(), c->msg);
	} else {
		ck_assert_msg(rc == 0, "case %zu %s on Meta failed: %s", k, op, tn_last_error());
		ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
		check_result(c, k, r, r2, false, "Meta");
	}
	tn_tensor_unref(r);
	tn_tensor_unref(r2);
	tn_tensor_unref(x);
}

static void run_case(size_t k, bool meta)
{
	run_golden(&red_cases[k], &red_inputs[red_cases[k].input], k, meta);
}

/* Every golden case, in the kernel variant of each CPU capability. */
START_TEST(test_goldens_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	struct tn_baseline b = tn_test_baseline();
	for (size_t k = 0; k < RED_NCASES; k++)
		run_case(k, want == 0);
	ck_assert_no_leak(b);
}
END_TEST

/* The inputs past the grain size (the parallel paths: split outputs, two passes) with 1, 2 and
 * 4 threads: the same results as PyTorch each time (integers exactly). */
START_TEST(test_goldens_with_threads)
{
	static const char *const counts[] = { "1", "2", "4" };
	setenv("TN_NUM_THREADS", counts[_i], 1);
	for (size_t k = 0; k < RED_NCASES; k++)
		if (red_inputs[red_cases[k].input].formula)
			run_case(k, false);
}
END_TEST

/* A float32 sum of 2^25 elements (past float32's 2^24 integers, where naive accumulation stops
 * growing) within 1e-6 of the float64 reference: whole, and by columns. */
START_TEST(test_float32_sum_accuracy)
{
	static const char *const counts[] = { "1", "2" };
	setenv("TN_NUM_THREADS", counts[_i], 1);
	const int64_t n = (int64_t)1 << 25, cols[] = { (int64_t)1 << 19, 64 };
	tn_tensor *ones, *u, *r;
	ck_assert_tn_ok(tn_ones(1, &n, TN_FLOAT32, TN_CPU, &ones));
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &u));
	float *p = tn_tensor_data(u);
	uint64_t s = 88172645463325252ull;
	double ref = 0, colref[64] = { 0 };
	for (int64_t i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
		p[i] = (float)(s >> 40) / (float)(1 << 24);
		ref += p[i];
		colref[i % 64] += p[i];
	}
	ck_assert_tn_ok(tn_sum(ones, NULL, &r));
	ck_assert_msg(fabs(*(float *)tn_tensor_data(r) - (double)n) <= 1e-6 * (double)n,
		      "sum of ones: %.9g", *(float *)tn_tensor_data(r));
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_mean(ones, NULL, &r));
	ck_assert_msg(fabs(*(float *)tn_tensor_data(r) - 1.0) <= 1e-6, "mean of ones");
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_sum(u, NULL, &r));
	ck_assert_msg(fabs(*(float *)tn_tensor_data(r) - ref) <= 1e-6 * ref, "sum %.9g, ref %.9g",
		      *(float *)tn_tensor_data(r), ref);
	tn_tensor_unref(r);
	/* The column sums of a [2^19, 64] view: the vectorised outer reduction. */
	tn_tensor *v;
	int64_t d0 = 0;
	ck_assert_tn_ok(tn_view(u, 2, cols, &v));
	ck_assert_tn_ok(tn_sum_dim(v, 1, &d0, false, NULL, &r));
	const float *cs = tn_tensor_data(r);
	for (int j = 0; j < 64; j++)
		ck_assert_msg(fabs(cs[j] - colref[j]) <= 1e-6 * colref[j], "column %d: %.9g vs %.9g", j,
			      cs[j], colref[j]);
	tn_tensor_unref(r);
	tn_tensor_unref(v);
	tn_tensor_unref(u);
	tn_tensor_unref(ones);
}
END_TEST

static tn_tensor *arange23(enum tn_dtype dt)
{
	int64_t s[] = { 2, 3 };
	tn_tensor *f, *t;
	ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(6), tn_scalar_int(1), &dt, TN_CPU,
				  &f));
	ck_assert_tn_ok(tn_view(f, 2, s, &t));
	tn_tensor_unref(f);
	return t;
}

/* The out= forms' dtype and shape errors, with PyTorch's messages; nothing is written. */
/*
 * Issue 17, item 1: results of one element keep the size-1 dims that are not reduced
 * (sum(ones(1, 3), [1]) has shape [1]), in every functional, out= and Meta form.
 */
START_TEST(test_one_element_results)
{
	for (size_t k = 0; k < RP_NCASES; k++)
		run_golden(&rp_cases[k], &rp_inputs[rp_cases[k].input], k, true);
}
END_TEST

/*
 * Issue 17, item 2: sum.out and prod.out reduce in the input's dtype (or dtype=) and convert
 * into out, of any dtype; all and any into a uint8 out convert the input to uint8 first.
 */
START_TEST(test_out_converts)
{
	for (size_t k = 0; k < RP_NOUTCASES; k++) {
		const struct rp_out_case *c = &rp_out_cases[k];
		tn_tensor *x = make_input(&rp_oinputs[c->input], TN_CPU), *o;
		enum tn_dtype dt = (enum tn_dtype)c->dtype;
		const enum tn_dtype *dtp = c->dtype >= 0 ? &dt : NULL;
		const char *op = red_op_names[c->op];
		int64_t osz[2] = { 0, 0 };
		int ond = c->op == OP_ALL_DIM || c->op == OP_ANY_DIM ? tn_tensor_ndim(x) - 1 : 0;
		for (int d = 0, j = 0; d < tn_tensor_ndim(x); d++)
			if (ond && d != (c->dim + tn_tensor_ndim(x)) % tn_tensor_ndim(x))
				osz[j++] = tn_tensor_sizes(x)[d];
		ck_assert_tn_ok(tn_zeros(ond, osz, (enum tn_dtype)c->odtype, TN_CPU, &o));
		int rc;
		tn_clear_error();
		switch (c->op) {
		case OP_SUM:
			rc = tn_sum_out(x, dtp, o);
			break;
		case OP_PROD:
			rc = tn_prod_out(x, dtp, o);
			break;
		case OP_ALL:
			rc = tn_all_out(x, o);
			break;
		case OP_ANY:
			rc = tn_any_out(x, o);
			break;
		case OP_ALL_DIM:
			rc = tn_all_dim_out(x, c->dim, false, o);
			break;
		default:
			rc = tn_any_dim_out(x, c->dim, false, o);
			break;
		}
		if (!c->ok) {
			ck_assert_msg(rc == c->code, "case %zu %s: returned %d (%s), PyTorch %s", k, op,
				      rc, tn_last_error(), c->msg);
			ck_assert_str_eq(tn_last_error(), c->msg);
		} else {
			ck_assert_msg(rc == 0, "case %zu %s failed: %s", k, op, tn_last_error());
			ck_assert_int_eq(tn_tensor_ndim(o), c->rndim);
			tn_tensor *f = as_f64(o);
			const double *got = tn_tensor_data(f);
			for (int64_t i = 0; i < tn_tensor_numel(o); i++)
				ck_assert_msg(got[i] == c->v[i],
					      "case %zu %s into %s: element %lld is %.17g, PyTorch %.17g",
					      k, op, tn_dtype_name(c->odtype), (long long)i, got[i],
					      c->v[i]);
			tn_tensor_unref(f);
		}
		tn_tensor_unref(o);
		tn_tensor_unref(x);
	}
}
END_TEST

START_TEST(test_out_errors)
{
	tn_tensor *x = arange23(TN_FLOAT32), *xi = arange23(TN_INT64), *o3l, *o3f, *o3d, *o3i,
		  *o13, *z, *zb;
	int64_t three = 3, s13[] = { 1, 3 }, d0 = 0, d01[] = { 0, 1 };
	enum tn_dtype i32 = TN_INT32, f64 = TN_FLOAT64, i64 = TN_INT64;
	ck_assert_tn_ok(tn_full(1, &three, tn_scalar_int(7), &(enum tn_dtype){ TN_INT64 }, TN_CPU,
				&o3l));
	ck_assert_tn_ok(tn_full(1, &three, tn_scalar_double(7), NULL, TN_CPU, &o3f));
	ck_assert_tn_ok(tn_full(1, &three, tn_scalar_int(7), &f64, TN_CPU, &o3d));
	ck_assert_tn_ok(tn_full(1, &three, tn_scalar_int(7), &i32, TN_CPU, &o3i));
	ck_assert_tn_ok(tn_full(2, s13, tn_scalar_double(7), NULL, TN_CPU, &o13));
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_double(7), NULL, TN_CPU, &z));
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_bool(true), NULL, TN_CPU, &zb));

	ck_assert_tn_error(tn_sum_dim_out(xi, 1, &d0, false, &i32, o3l), TN_EINVAL,
			   "Expected out tensor to have dtype int, but got long int instead");
	ck_assert_tn_error(tn_mean_dim_out(x, 1, &d0, false, NULL, o3l), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_mean_dim_out(xi, 1, &d0, false, NULL, o3f), TN_EINVAL,
			   "mean(): could not infer output dtype. Input dtype must be either a "
			   "floating point or complex dtype. Got: Long");
	ck_assert_tn_error(tn_mean_dim_out(x, 1, &d0, false, &f64, o3f), TN_EINVAL,
			   "Expected out tensor to have dtype double, but got float instead");
	ck_assert_tn_error(tn_mean(x, &i64, &z), TN_EINVAL,
			   "mean(): could not infer output dtype. Optional dtype must be either a "
			   "floating point or complex dtype. Got: Long");
	ck_assert_tn_error(tn_amax_out(x, 1, &d0, false, o3d), TN_EINVAL,
			   "Expected the dtype for input and out to match, but got Float for "
			   "input's dtype and Double for out's dtype.");
	ck_assert_tn_error(tn_max_dim_out(x, 0, false, o3d, o3l), TN_EINVAL,
			   "Expected out tensor to have dtype float, but got double instead");
	ck_assert_tn_error(tn_max_dim_out(x, 0, false, o3f, o3i), TN_EINVAL,
			   "Expected out tensor to have dtype long int, but got int instead");
	ck_assert_tn_error(tn_argmax_out(x, &d0, false, o3f), TN_EINVAL,
			   "Expected out tensor to have dtype long int, but got float instead");
	ck_assert_tn_error(tn_all_dim_out(x, 0, false, o3f), TN_EINVAL,
			   "all only supports bool tensor for result, got: Float");
	ck_assert_tn_error(tn_any_out(x, z), TN_EINVAL,
			   "any only supports bool tensor for result, got: Float");
	/* PyTorch resizes a wrongly shaped out= tensor; libtensor refuses it. */
	ck_assert_tn_error(tn_sum_dim_out(x, 1, &d0, false, NULL, o13), TN_EINVAL,
			   "sum: output with shape [1, 3] doesn't match the result shape [3] "
			   "(libtensor does not resize out= tensors)");
	ck_assert_tn_error(tn_sum_dim_out(x, 2, d01, true, NULL, o3f), TN_EINVAL,
			   "sum: output with shape [3] doesn't match the result shape [1, 1] "
			   "(libtensor does not resize out= tensors)");
	/* Nothing was written by the failed calls. */
	const float *pf = tn_tensor_data(o3f);
	const int64_t *pl = tn_tensor_data(o3l);
	for (int i = 0; i < 3; i++) {
		ck_assert(pf[i] == 7.0f);
		ck_assert_int_eq(pl[i], 7);
	}
	/* An out= tensor overlapping the input in part. */
	tn_tensor *row;
	ck_assert_tn_ok(tn_select(x, 0, 1, &row));
	ck_assert_tn_error(tn_sum_dim_out(x, 1, &d0, false, NULL, row), TN_EINVAL,
			   "unsupported operation: some elements of the input tensor and the "
			   "written-to tensor refer to a single memory location. Please clone() "
			   "the tensor before performing the operation.");
	/* An out= whose elements overlap one another (stride 0) is refused by every reduction,
	 * a deliberate difference (tn_sum(3), tn_amax(3), tn_all(3)): PyTorch 1.13 writes it
	 * from sum, prod, amax, amin, argmax, argmin, all and any, the rows' reductions running
	 * into one another. Nothing is written. */
	{
		static const char overlap[] =
			"unsupported operation: more than one element of the written-to tensor "
			"refers to a single memory location. Please clone() the tensor before "
			"performing the operation.";
		int64_t one = 1;
		static const enum tn_dtype odt[] = { TN_FLOAT32, TN_INT64, TN_BOOL };
		tn_tensor *o1[3], *oe[3];
		for (int k = 0; k < 3; k++) {
			ck_assert_tn_ok(tn_zeros(1, &one, odt[k], TN_CPU, &o1[k]));
			ck_assert_tn_ok(tn_expand(o1[k], 1, &three, &oe[k]));
		}
		ck_assert_tn_error(tn_sum_dim_out(x, 1, &d0, false, NULL, oe[0]), TN_EINVAL,
				   overlap);
		ck_assert_tn_error(tn_prod_dim_out(x, 0, false, NULL, oe[0]), TN_EINVAL, overlap);
		ck_assert_tn_error(tn_mean_dim_out(x, 1, &d0, false, NULL, oe[0]), TN_EINVAL,
				   overlap);
		ck_assert_tn_error(tn_amin_out(x, 1, &d0, false, oe[0]), TN_EINVAL, overlap);
		ck_assert_tn_error(tn_amax_out(x, 1, &d0, false, oe[0]), TN_EINVAL, overlap);
		ck_assert_tn_error(tn_argmax_out(x, &d0, false, oe[1]), TN_EINVAL, overlap);
		ck_assert_tn_error(tn_argmin_out(x, &d0, false, oe[1]), TN_EINVAL, overlap);
		ck_assert_tn_error(tn_all_dim_out(x, 0, false, oe[2]), TN_EINVAL, overlap);
		ck_assert_tn_error(tn_any_dim_out(x, 0, false, oe[2]), TN_EINVAL, overlap);
		ck_assert(*(const float *)tn_tensor_data(o1[0]) == 0.0f);
		ck_assert(*(const int64_t *)tn_tensor_data(o1[1]) == 0);
		ck_assert(*(const bool *)tn_tensor_data(o1[2]) == false);
		for (int k = 0; k < 3; k++) {
			tn_tensor_unref(oe[k]);
			tn_tensor_unref(o1[k]);
		}
	}
	/* A uint8 out= tensor takes all and any of any dtype; keepdim shapes work too. */
	tn_tensor *u8;
	ck_assert_tn_ok(tn_zeros(2, s13, TN_UINT8, TN_CPU, &u8));
	ck_assert_tn_ok(tn_all_dim_out(x, 0, true, u8));
	const uint8_t *pu = tn_tensor_data(u8);
	ck_assert(pu[0] == 0 && pu[1] == 1 && pu[2] == 1);
	ck_assert_tn_ok(tn_all_out(x, zb));
	ck_assert(*(bool *)tn_tensor_data(zb) == false);
	/* A dead handle. */
	tn_tensor *dead = arange23(TN_FLOAT32), *r;
	tn_tensor_unref(dead);
	ck_assert_int_eq(tn_sum(dead, NULL, &r), TN_EBADF);
	tn_tensor *list[] = { x, xi, o3l, o3f, o3d, o3i, o13, z, zb, row, u8 };
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* Each reduction's allocations failing one at a time (the result, the float32 accumulator of
 * a mean, the per-thread partial sums, the flattened copy of argmax): a clean TN_ENOMEM, no
 * leak, nothing written to out=; and the right result once nothing fails. */
START_TEST(test_allocation_failures)
{
	setenv("TN_NUM_THREADS", "2", 1);
	int64_t n = 50001, s2[] = { 3, 40000 }, d1 = 1;
	tn_tensor *x, *h, *m, *mt, *out, *r = NULL, *r2 = NULL;
	ck_assert_tn_ok(tn_ones(1, &n, TN_FLOAT32, TN_CPU, &x));
	ck_assert_tn_ok(tn_ones(1, &n, TN_FLOAT16, TN_CPU, &h));
	ck_assert_tn_ok(tn_ones(2, s2, TN_INT32, TN_CPU, &m));
	ck_assert_tn_ok(tn_transpose(m, 0, 1, &mt));
	ck_assert_tn_ok(tn_full(1, &s2[1], tn_scalar_double(7), NULL, TN_CPU, &out));
	for (int which = 0; which < 6; which++) {
		struct tn_baseline b = tn_test_baseline();
		for (uint64_t nth = 1;; nth++) {
			int rc;
			tn_alloc_fail_nth(nth);
			switch (which) {
			case 0: rc = tn_sum(x, NULL, &r); break;
			case 1: rc = tn_mean(x, NULL, &r); break;
			case 2: rc = tn_sum(h, NULL, &r); break;
			case 3: rc = tn_max_dim(m, 0, false, &r, &r2); break;
			case 4: rc = tn_argmax(mt, NULL, false, &r); break;
			default:
				rc = tn_sum_dim_out(mt, 1, &d1, false, &(enum tn_dtype){ TN_FLOAT32 },
						    out);
			}
			uint64_t tried = tn_alloc_fail_nth(0);
			if (tried < nth) { /* nothing failed: the result */
				ck_assert_msg(rc == 0, "case %d: %s", which, tn_last_error());
				/* 50001 rounds to 50016 in float16. */
				static const double want[] = { 50001, 1, 50016, 1, 0, 3 };
				tn_tensor *f = as_f64(which == 5 ? out : r);
				ck_assert_msg(*(double *)tn_tensor_data(f) == want[which], "case %d: %g", which,
					      *(double *)tn_tensor_data(f));
				tn_tensor_unref(f);
				tn_tensor_unref(r);
				tn_tensor_unref(r2);
				r = r2 = NULL;
				break;
			}
			ck_assert_msg(rc == TN_ENOMEM, "case %d, allocation %llu: %d %s", which,
				      (unsigned long long)nth, rc, tn_last_error());
			if (which == 5)
				ck_assert(*(float *)tn_tensor_data(out) == 7.0f);
			ck_assert_no_leak(b);
		}
	}
	tn_tensor *list[] = { x, h, m, mt, out };
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* argmax and argmin of a bool tensor along a dimension of size 1 are zeros (ATen fills before
 * looking for a kernel); anything else is PyTorch's "not implemented for 'Bool'". */
START_TEST(test_argmax_bool_size_one_dim)
{
	for (size_t k = 0; k < sizeof(par_argbool_cases) / sizeof(par_argbool_cases[0]); k++) {
		const struct par_argbool_case *c = &par_argbool_cases[k];
		tn_tensor *t, *r = NULL;
		ck_assert_tn_ok(tn_ones(c->ndim, c->sizes, TN_BOOL, TN_CPU, &t));
		tn_clear_error();
		int rc = (c->is_min ? tn_argmin : tn_argmax)(t, c->has_dim ? &c->dim : NULL,
							     c->keepdim, &r);
		if (!c->ok) {
			ck_assert_msg(rc < 0, "case %zu: succeeded, PyTorch '%s'", k, c->msg);
			ck_assert_str_eq(tn_last_error(), c->msg);
		} else {
			ck_assert_msg(rc == 0, "case %zu: %s", k, tn_last_error());
			ck_assert_int_eq(tn_tensor_ndim(r), c->out_ndim);
			for (int d = 0; d < c->out_ndim; d++)
				ck_assert_int_eq(tn_tensor_sizes(r)[d], c->out_sizes[d]);
			const int64_t *p = tn_tensor_data(r);
			for (int64_t i = 0; i < tn_tensor_numel(r); i++)
				ck_assert_int_eq(p[i], 0);
		}
		tn_tensor_unref(r);
		tn_tensor_unref(t);
	}
}
END_TEST

/*
 * float16 and bfloat16 sums, products, amax and amin over the rows (the kernel's row path),
 * the columns (its column blocks, wider than one block of 2048 too) and everything, with row
 * lengths that are not multiples of the vector widths, under each CPU capability on one
 * thread: the 16-bit kernels widen their inputs to float32 vectors and accumulate in float32,
 * so each result is bit for bit the float32 kernel's on the widened input, rounded once (NaN
 * as NaN).
 */
START_TEST(test_16bit_as_float32_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	setenv("TN_NUM_THREADS", "1", 1);
	static const int64_t shapes[][2] = { { 1, 37 },	 { 3, 5 },     { 17, 33 },  { 100, 1000 },
					     { 9, 2053 }, { 300, 16 },  { 40, 1 },   { 7, 129 } };
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16 };
	for (int d = 0; d < 2; d++) {
		for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
			const int64_t n = shapes[k][0] * shapes[k][1];
			double *v = malloc((size_t)n * sizeof(double));
			ck_assert_ptr_nonnull(v);
			uint64_t st = 0x9e3779b97f4a7c15ull + (uint64_t)k;
			for (int64_t i = 0; i < n; i++) {
				st ^= st << 13, st ^= st >> 7, st ^= st << 17;
				/* Near 1 for products that stay finite; a NaN in the last shape. */
				v[i] = 0.75 + (double)(st >> 40) / (double)(1 << 24) * 0.5;
				if (k == 7 && i == n / 2)
					v[i] = NAN;
			}
			tn_tensor *x = tn_test_from_values(v, 2, shapes[k], dts[d]), *x32;
			free(v);
			ck_assert_tn_ok(tn_to(x, TN_FLOAT32, false, false, NULL, &x32));
			for (int dim = -1; dim < 2; dim++) {
				for (int op = 0; op < 4; op++) {
					const int64_t dl[] = { dim };
					const int nd = dim < 0 ? 0 : 1;
					tn_tensor *r16 = NULL, *r32 = NULL, *w = NULL;
					for (int f = 0; f < 2; f++) {
						const tn_tensor *in = f ? x32 : x;
						tn_tensor **r = f ? &r32 : &r16;
						if (op == 0)
							ck_assert_tn_ok(tn_sum_dim(in, nd, dl, false, NULL, r));
						else if (op == 1 && dim < 0)
							ck_assert_tn_ok(tn_prod(in, NULL, r));
						else if (op == 1)
							ck_assert_tn_ok(tn_prod_dim(in, dim, false, NULL, r));
						else if (op == 2)
							ck_assert_tn_ok(tn_amax(in, nd, dl, false, r));
						else
							ck_assert_tn_ok(tn_amin(in, nd, dl, false, r));
					}
					ck_assert_tn_ok(tn_to(r32, dts[d], false, false, NULL, &w));
					ck_assert_int_eq(tn_tensor_dtype(r16), dts[d]);
					const int64_t m = tn_tensor_numel(w);
					ck_assert_int_eq(tn_tensor_numel(r16), m);
					const uint16_t *g = tn_tensor_data(r16), *e = tn_tensor_data(w);
					const uint16_t nanb = dts[d] == TN_FLOAT16 ? 0x7c00 : 0x7f80;
					for (int64_t i = 0; i < m; i++)
						ck_assert_msg(g[i] == e[i] || ((g[i] & 0x7fff) > nanb &&
									       (e[i] & 0x7fff) > nanb),
							      "%s op %d dim %d of [%lld, %lld] under %s: "
							      "element %lld is 0x%04x, float32's 0x%04x",
							      tn_dtype_name(dts[d]), op, dim,
							      (long long)shapes[k][0],
							      (long long)shapes[k][1],
							      tn_cpu_capability_name(want), (long long)i,
							      g[i], e[i]);
					tn_tensor_unref(r16);
					tn_tensor_unref(r32);
					tn_tensor_unref(w);
				}
			}
			tn_tensor_unref(x);
			tn_tensor_unref(x32);
		}
	}
}
END_TEST

/*
 * Floating amax and amin along contiguous rows (the kernel's row path: a max of the values
 * that are not NaN beside each lane's first NaN) and over everything, for float16, bfloat16
 * and float32, row lengths around the vector widths and longer, under each CPU capability on
 * one thread: a row with a NaN anywhere (its first element, the middle, the scalar tail)
 * gives NaN, any other row its largest (smallest) value, with infinities and zeros of both
 * signs among the values.
 */
START_TEST(test_float_max_min_rows_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	setenv("TN_NUM_THREADS", "1", 1);
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16, TN_FLOAT32 };
	static const int64_t lens[] = { 1, 31, 32, 33, 69, 1000, 4099 };
	const int64_t R = 6; /* row 0 plain, 1 to 3 a NaN, 4 zeros only, 5 an infinity */
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			const int64_t L = lens[k], sz[] = { R, L }, n = R * L;
			double *v = malloc((size_t)n * sizeof(double));
			ck_assert_ptr_nonnull(v);
			uint64_t st = 0x2545f4914f6cdd1dull + k;
			for (int64_t i = 0; i < n; i++) {
				st ^= st << 13, st ^= st >> 7, st ^= st << 17;
				/* multiples of 1/2 in [-64, 64): exact in every dtype */
				v[i] = (double)(int64_t)(st % 256) / 2.0 - 64.0;
			}
			v[1 * L] = NAN;
			v[2 * L + L / 2] = NAN;
			v[3 * L + L - 1] = NAN;
			for (int64_t j = 0; j < L; j++)
				v[4 * L + j] = j % 3 ? 0.0 : -0.0;
			v[5 * L + L / 3] = k % 2 ? INFINITY : -INFINITY;
			tn_tensor *x = tn_test_from_values(v, 2, sz, dts[d]);
			for (int op = 0; op < 2; op++) {
				for (int all = 0; all < 2; all++) {
					const int64_t d1 = 1;
					tn_tensor *r, *r32;
					if (op == 0)
						ck_assert_tn_ok(tn_amax(x, all ? 0 : 1, &d1, false, &r));
					else
						ck_assert_tn_ok(tn_amin(x, all ? 0 : 1, &d1, false, &r));
					ck_assert_tn_ok(tn_to(r, TN_FLOAT32, false, false, NULL, &r32));
					const float *g = tn_tensor_data(r32);
					for (int64_t row = 0; row < (all ? 1 : R); row++) {
						const int64_t b = all ? 0 : row * L, e = all ? n : b + L;
						double want_v = op ? INFINITY : -INFINITY;
						bool nan = false;
						for (int64_t i = b; i < e; i++) {
							nan |= isnan(v[i]);
							if (op ? v[i] < want_v : v[i] > want_v)
								want_v = v[i];
						}
						ck_assert_msg(nan ? isnan(g[row]) : (double)g[row] == want_v,
							      "%s %s of rows of %lld under %s: row %lld is "
							      "%g, expected %g",
							      tn_dtype_name(dts[d]), op ? "amin" : "amax",
							      (long long)L, tn_cpu_capability_name(want),
							      (long long)(all ? -1 : row), (double)g[row],
							      nan ? NAN : want_v);
					}
					tn_tensor_unref(r);
					tn_tensor_unref(r32);
				}
			}
			free(v);
			tn_tensor_unref(x);
		}
	}
}
END_TEST

/* A [sz[0], sz[1]] tensor of @dt: int32 uniform in [-1000, 1000], floats in [0.75, 1.25)
 * (products stay finite), from @seed. */
static tn_tensor *random_matrix(enum tn_dtype dt, const int64_t sz[2], uint64_t seed)
{
	const int64_t n = sz[0] * sz[1];
	double *v = malloc((size_t)n * sizeof(double));
	ck_assert_ptr_nonnull(v);
	uint64_t st = seed;
	for (int64_t i = 0; i < n; i++) {
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		v[i] = dt == TN_INT32 ? (double)(int64_t)(st % 2001) - 1000
				      : 0.75 + (double)(st >> 40) / (double)(1 << 25);
	}
	tn_tensor *x = tn_test_from_values(v, 2, sz, dt);
	free(v);
	return x;
}

/* Reduction @op (0 sum, 1 prod, 2 amax, 3 amin) of @in along @dim. */
static tn_tensor *reduce_along(int op, const tn_tensor *in, int64_t dim)
{
	tn_tensor *r = NULL;
	if (op == 0)
		ck_assert_tn_ok(tn_sum_dim(in, 1, &dim, false, NULL, &r));
	else if (op == 1)
		ck_assert_tn_ok(tn_prod_dim(in, dim, false, NULL, &r));
	else if (op == 2)
		ck_assert_tn_ok(tn_amax(in, 1, &dim, false, &r));
	else
		ck_assert_tn_ok(tn_amin(in, 1, &dim, false, &r));
	return r;
}

/*
 * Contiguous rows are reduced two at a time, side by side: each row's result is the bits of
 * the same reduction of that row alone (a 1-D view, one row at a time), for sums, products,
 * amax and amin of every floating dtype and int32, odd and even row counts, under each CPU
 * capability on one thread.
 */
START_TEST(test_row_pairs_as_single_rows_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	setenv("TN_NUM_THREADS", "1", 1);
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16, TN_FLOAT32, TN_FLOAT64,
					     TN_INT32 };
	static const int64_t shapes[][2] = { { 2, 32 }, { 3, 100 }, { 5, 1000 }, { 4, 4099 } };
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
			const int64_t R = shapes[k][0], L = shapes[k][1];
			tn_tensor *x =
				random_matrix(dts[d], shapes[k], 0x9e3779b97f4a7c15ull + k * 7 + d);
			for (int op = 0; op < 4; op++) {
				tn_tensor *r = reduce_along(op, x, 1);
				const size_t os = tn_dtype_size(tn_tensor_dtype(r));
				for (int64_t row = 0; row < R; row++) {
					tn_tensor *xr;
					ck_assert_tn_ok(tn_select(x, 0, row, &xr));
					tn_tensor *rr = reduce_along(op, xr, 0);
					ck_assert_int_eq(tn_tensor_dtype(rr), tn_tensor_dtype(r));
					ck_assert_msg(!memcmp((const char *)tn_tensor_data(r) + row * os,
							      tn_tensor_data(rr), os),
						      "%s op %d of [%lld, %lld] under %s: row %lld "
						      "differs from the row alone",
						      tn_dtype_name(dts[d]), op, (long long)R, (long long)L,
						      tn_cpu_capability_name(want), (long long)row);
					tn_tensor_unref(xr);
					tn_tensor_unref(rr);
				}
				tn_tensor_unref(r);
			}
			tn_tensor_unref(x);
		}
	}
}
END_TEST

/*
 * Column reductions read whole rows one at a time, and parts of rows (a column slice, one
 * thread's columns, a block of a row wider than 2048) four rows at a time: the same operations
 * in the same order, so a slice of a wider tensor reduces to the bits of its contiguous copy,
 * for every floating dtype and int32, row counts off the multiples of 4 and of the cascade's
 * 16, under each CPU capability on one thread.
 */
START_TEST(test_column_slices_as_contiguous_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	setenv("TN_NUM_THREADS", "1", 1);
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16, TN_FLOAT32, TN_FLOAT64,
					     TN_INT32 };
	static const int64_t rows[] = { 3, 37, 100, 1001 };
	const int64_t C = 45, W = C + 7;
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
			const int64_t sz[] = { rows[k], W };
			tn_tensor *x = random_matrix(dts[d], sz, 0x853c49e6748fea9bull + k), *xs, *xc;
			ck_assert_tn_ok(tn_slice(x, 1, 3, 3 + C, 1, &xs));
			ck_assert_tn_ok(tn_contiguous(xs, TN_CONTIGUOUS_FORMAT, &xc));
			for (int op = 0; op < 4; op++) {
				tn_tensor *r[2] = { reduce_along(op, xs, 0), reduce_along(op, xc, 0) };
				const size_t bytes = (size_t)C * tn_dtype_size(tn_tensor_dtype(r[0]));
				ck_assert_int_eq(tn_tensor_dtype(r[0]), tn_tensor_dtype(r[1]));
				ck_assert_msg(!memcmp(tn_tensor_data(r[0]), tn_tensor_data(r[1]), bytes),
					      "%s op %d over %lld rows under %s: the slice's result "
					      "differs from its contiguous copy's",
					      tn_dtype_name(dts[d]), op, (long long)rows[k],
					      tn_cpu_capability_name(want));
				tn_tensor_unref(r[0]);
				tn_tensor_unref(r[1]);
			}
			tn_tensor_unref(x);
			tn_tensor_unref(xs);
			tn_tensor_unref(xc);
		}
	}
}
END_TEST

static Suite *reduce_suite(void)
{
	Suite *s = suite_create("reduce");
	TCase *tc = tcase_create("reduce");
	tcase_add_loop_test(tc, test_goldens_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_goldens_with_threads, 0, 3);
	tcase_add_loop_test(tc, test_float32_sum_accuracy, 0, 2);
	tcase_add_test(tc, test_one_element_results);
	tcase_add_test(tc, test_out_converts);
	tcase_add_test(tc, test_out_errors);
	tcase_add_test(tc, test_allocation_failures);
	tcase_add_test(tc, test_argmax_bool_size_one_dim);
	tcase_add_loop_test(tc, test_16bit_as_float32_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_float_max_min_rows_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_row_pairs_as_single_rows_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_column_slices_as_contiguous_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(reduce_suite)
