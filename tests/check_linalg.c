/* SPDX-License-Identifier: MIT */
/*
 * The matmul family against PyTorch: every golden case of tests/golden/linalg_golden.h (each
 * operator on each dtype, transposed, sliced and broadcast operands, matmul's and linear's
 * rank rules, beta and alpha, empty products, large products on the threaded paths, errors)
 * in its functional, out= and in-place forms and on Meta, under each CPU capability and with
 * 1, 2 and 4 threads; beta 0 ignoring NaN; out= errors; allocation failures.
 */
#include <math.h>

#include "testutil.h"
#include "golden/linalg_golden.h"

#define LA_NCASES (sizeof(la_cases) / sizeof(la_cases[0]))

enum { OP_MM, OP_BMM, OP_ADDMM, OP_BADDBMM, OP_MV, OP_ADDMV, OP_DOT, OP_OUTER, OP_MATMUL, OP_LINEAR };

/* The formula the generator uses for operands it does not store. */
static double formula(enum tn_dtype dt, int64_t i)
{
	if (dt == TN_UINT8)
		return (double)((i * 7919) % 10);
	if (dt != TN_FLOAT16 && dt != TN_BFLOAT16 && dt != TN_FLOAT32 && dt != TN_FLOAT64)
		return (double)((i * 7919) % 11 - 5);
	return (double)((i * 7919) % 17 - 8) / 4;
}

/* The golden operand in its layout (see la_layout in the generator), on @dev. */
static tn_tensor *make_operand(const struct la_operand *o, tn_device dev)
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
		v[i] = o->v ? o->v[i] : formula(dt, i);
	vals = tn_test_from_values(v, n, o->shape, dt);
	free(v);
	memcpy(mem, o->shape, sizeof(mem));
	switch (o->layout) {
	case 1: /* the last two dims transposed in memory */
		mem[n - 1] = o->shape[n - 2];
		mem[n - 2] = o->shape[n - 1];
		ck_assert_tn_ok(tn_empty(n, mem, dt, dev, TN_CONTIGUOUS_FORMAT, &base));
		ck_assert_tn_ok(tn_transpose(base, -1, -2, &t));
		break;
	case 2: /* every other element of a twice longer last dim */
		mem[n - 1] *= 2;
		ck_assert_tn_ok(tn_zeros(n, mem, dt, dev, &base));
		ck_assert_tn_ok(tn_slice(base, n - 1, 0, INT64_MAX, 2, &t));
		break;
	case 3: { /* expanded from size 1 along dim 0 */
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

static tn_scalar case_scalar(const struct la_case *c, double v)
{
	return c->scalar_int ? tn_scalar_int((int64_t)v) : tn_scalar_double(v);
}

enum form { FUNCTIONAL, OUT, INPLACE };

/* Call case @c's operator in @form (@out: the out= tensor, or self for INPLACE). */
static int call(const struct la_case *c, tn_tensor *const *t, enum form form, tn_tensor *out,
		tn_tensor **ret)
{
	tn_scalar beta = case_scalar(c, c->beta), alpha = case_scalar(c, c->alpha);
	switch (c->op) {
	case OP_MM:
		return form == OUT ? tn_mm_out(t[0], t[1], out) : tn_mm(t[0], t[1], ret);
	case OP_BMM:
		return form == OUT ? tn_bmm_out(t[0], t[1], out) : tn_bmm(t[0], t[1], ret);
	case OP_ADDMM:
		return form == OUT     ? tn_addmm_out(t[0], t[1], t[2], beta, alpha, out)
		       : form == INPLACE ? tn_addmm_(out, t[1], t[2], beta, alpha)
					 : tn_addmm(t[0], t[1], t[2], beta, alpha, ret);
	case OP_BADDBMM:
		return form == OUT     ? tn_baddbmm_out(t[0], t[1], t[2], beta, alpha, out)
		       : form == INPLACE ? tn_baddbmm_(out, t[1], t[2], beta, alpha)
					 : tn_baddbmm(t[0], t[1], t[2], beta, alpha, ret);
	case OP_MV:
		return form == OUT ? tn_mv_out(t[0], t[1], out) : tn_mv(t[0], t[1], ret);
	case OP_ADDMV:
		return form == OUT     ? tn_addmv_out(t[0], t[1], t[2], beta, alpha, out)
		       : form == INPLACE ? tn_addmv_(out, t[1], t[2], beta, alpha)
					 : tn_addmv(t[0], t[1], t[2], beta, alpha, ret);
	case OP_DOT:
		return form == OUT ? tn_dot_out(t[0], t[1], out) : tn_dot(t[0], t[1], ret);
	case OP_OUTER:
		return form == OUT ? tn_outer_out(t[0], t[1], out) : tn_outer(t[0], t[1], ret);
	case OP_MATMUL:
		return form == OUT ? tn_matmul_out(t[0], t[1], out) : tn_matmul(t[0], t[1], ret);
	default: {
		const tn_tensor *bias = c->has_bias ? t[2] : NULL;
		return form == OUT ? tn_linear_out(t[0], t[1], bias, out)
				   : tn_linear(t[0], t[1], bias, ret);
	}
	}
}

static void expect_values(size_t k, const struct la_case *c, const tn_tensor *r, const char *form)
{
	int64_t idx[4] = { 0 }, i = 0;
	const int n = c->ndim;
	ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)c->dtype, "case %zu %s: dtype %s", k, form,
		      tn_dtype_name(tn_tensor_dtype(r)));
	ck_assert_int_eq(tn_tensor_ndim(r), n);
	for (int d = 0; d < n; d++)
		ck_assert_msg(tn_tensor_sizes(r)[d] == c->shape[d], "case %zu %s: size %d", k, form, d);
	if (tn_tensor_numel(r) == 0)
		return;
	for (;;) {
		tn_scalar s;
		ck_assert_tn_ok(tn_tensor_get(r, n, idx, &s));
		double got = s.kind == TN_SCALAR_DOUBLE ? s.v.d : s.kind == TN_SCALAR_INT ? (double)s.v.i
											  : s.v.b;
		double want = c->r[i];
		bool ok = c->tol > 0 ? fabs(got - want) <= c->tol : (got == want || (got != got && want != want));
		ck_assert_msg(ok, "case %zu (%d) %s: element %lld is %.17g, PyTorch's %.17g", k, c->op,
			      form, (long long)i, got, want);
		i++;
		int d = n - 1;
		while (d >= 0 && ++idx[d] == c->shape[d])
			idx[d--] = 0;
		if (d < 0)
			return;
	}
}

static bool has_inplace(int op)
{
	return op == OP_ADDMM || op == OP_BADDBMM || op == OP_ADDMV;
}

static void run_case(size_t k, tn_device dev)
{
	const struct la_case *c = &la_cases[k];
	bool meta = dev.type == TN_DEVICE_META;
	tn_tensor *t[3] = { NULL, NULL, NULL }, *r = NULL, *out = NULL;
	for (int i = 0; i < c->nops; i++)
		t[i] = make_operand(&c->ops[i], dev);

	tn_clear_error();
	int rc = call(c, t, FUNCTIONAL, NULL, &r);
	if (c->error) {
		bool meta_bool = meta && strstr(c->error, "not implemented for 'Bool'");
		ck_assert_msg(rc < 0 || meta_bool, "case %zu (%d): succeeded, PyTorch says '%s'", k,
			      c->op, c->error);
		/* Meta does not refuse bool (PyTorch's meta functions do not either). */
		ck_assert_msg(strcmp(tn_last_error(), c->error) == 0 || meta_bool,
			      "case %zu (%d): '%s', PyTorch '%s'", k, c->op, tn_last_error(), c->error);
		if (meta && rc == 0)
			tn_tensor_unref(r);
		goto done;
	}
	ck_assert_msg(rc == 0, "case %zu (%d): %s", k, c->op, tn_last_error());
	/* The result's layout is PyTorch's. */
	for (int d = 0; d < c->ndim; d++)
		ck_assert_msg(c->shape[d] <= 1 || tn_tensor_strides(r)[d] == c->strides[d],
			      "case %zu: stride %d is %lld, PyTorch's %lld", k, d,
			      (long long)tn_tensor_strides(r)[d], (long long)c->strides[d]);
	if (meta) {
		ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
		ck_assert_int_eq(tn_tensor_dtype(r), c->dtype);
		goto done;
	}
	expect_values(k, c, r, "functional");

	/* out=: into a tensor of the result's shape, filled first with garbage; and a
	 * transposed one for 2-d results (the BLAS writes with out's strides). */
	for (int tr = 0; tr < 2; tr++) {
		if (tr && c->ndim != 2)
			break;
		int64_t sz[4];
		memcpy(sz, c->shape, sizeof(sz));
		if (tr) {
			sz[0] = c->shape[1];
			sz[1] = c->shape[0];
		}
		tn_tensor *o;
		ck_assert_tn_ok(tn_full(c->ndim, sz, tn_scalar_int(77), &(enum tn_dtype){ c->dtype },
					TN_CPU, &o));
		if (tr) {
			ck_assert_tn_ok(tn_transpose(o, 0, 1, &out));
			tn_tensor_unref(o);
		} else {
			out = o;
		}
		ck_assert_msg(call(c, t, OUT, out, NULL) == 0, "case %zu out=: %s", k, tn_last_error());
		expect_values(k, c, out, tr ? "out= (transposed)" : "out=");
		tn_tensor_unref(out);
		out = NULL;
	}

	/* In place: when self has the result's shape and dtype. */
	if (has_inplace(c->op) && tn_tensor_ndim(t[0]) == c->ndim &&
	    tn_tensor_dtype(t[0]) == (enum tn_dtype)c->dtype &&
	    !memcmp(tn_tensor_sizes(t[0]), c->shape, sizeof(int64_t) * (size_t)c->ndim) &&
	    c->ops[0].layout != 3) {
		ck_assert_msg(call(c, t, INPLACE, t[0], NULL) == 0, "case %zu in place: %s", k,
			      tn_last_error());
		expect_values(k, c, t[0], "in place");
	}
done:
	tn_tensor_unref(r);
	for (int i = 0; i < 3; i++)
		tn_tensor_unref(t[i]);
}

/* Every golden case, in the kernel variant of each CPU capability, and on Meta. */
START_TEST(test_goldens_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	struct tn_baseline b = tn_test_baseline();
	for (size_t k = 0; k < LA_NCASES; k++) {
		run_case(k, TN_CPU);
		if (want == 0)
			run_case(k, TN_META);
	}
	ck_assert_no_leak(b);
}
END_TEST

/* The large products (the threaded paths: BLIS threads, batches split over threads, gemv
 * split over rows, the integer kernel's row split) with 1, 2 and 4 threads. */
START_TEST(test_goldens_with_threads)
{
	static const char *const counts[] = { "1", "2", "4" };
	setenv("TN_NUM_THREADS", counts[_i], 1);
	for (size_t k = 0; k < LA_NCASES; k++)
		if (la_cases[k].nops && !la_cases[k].ops[0].v)
			run_case(k, TN_CPU);
}
END_TEST

/* beta 0: self's values are ignored, NaN and infinity included (PyTorch's documented rule);
 * k 0: the product is zero and the result beta * self. */
START_TEST(test_beta_zero_ignores_nan)
{
	int64_t s35[] = { 3, 5 }, s34[] = { 3, 4 }, s45[] = { 4, 5 }, s30[] = { 3, 0 }, s05[] = { 0, 5 };
	tn_tensor *self, *a, *b, *r, *z0, *z1;
	ck_assert_tn_ok(tn_full(2, s35, tn_scalar_double(NAN), NULL, TN_CPU, &self));
	ck_assert_tn_ok(tn_ones(2, s34, TN_FLOAT32, TN_CPU, &a));
	ck_assert_tn_ok(tn_ones(2, s45, TN_FLOAT32, TN_CPU, &b));
	ck_assert_tn_ok(tn_addmm(self, a, b, tn_scalar_int(0), tn_scalar_int(1), &r));
	for (int64_t i = 0; i < 3; i++)
		for (int64_t j = 0; j < 5; j++)
			ck_assert_double_eq(tn_test_get_double(r, (int64_t[]){ i, j }), 4.0);
	tn_tensor_unref(r);
	/* In place too: self is the output and is not read. */
	ck_assert_tn_ok(tn_addmm_(self, a, b, tn_scalar_double(0.0), tn_scalar_int(2)));
	ck_assert_double_eq(tn_test_get_double(self, (int64_t[]){ 2, 4 }), 8.0);
	ck_assert_tn_ok(tn_empty(2, s30, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &z0));
	ck_assert_tn_ok(tn_empty(2, s05, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &z1));
	ck_assert_tn_ok(tn_addmm(self, z0, z1, tn_scalar_int(3), tn_scalar_int(1), &r));
	ck_assert_double_eq(tn_test_get_double(r, (int64_t[]){ 1, 1 }), 24.0);
	tn_tensor_unref(r);
	tn_tensor_unref(z0);
	tn_tensor_unref(z1);
	tn_tensor_unref(self);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}
END_TEST

/* out= errors: wrong dtype (PyTorch's message), wrong shape (libtensor does not resize), an
 * out whose elements alias one another, an out overlapping an operand; out is untouched. */
START_TEST(test_out_errors)
{
	int64_t s23[] = { 2, 3 }, s33[] = { 3, 3 }, s22[] = { 2, 2 };
	tn_tensor *a, *b, *o, *sq, *e;
	ck_assert_tn_ok(tn_ones(2, s23, TN_FLOAT32, TN_CPU, &a));
	ck_assert_tn_ok(tn_ones(2, (int64_t[]){ 3, 2 }, TN_FLOAT32, TN_CPU, &b));
	ck_assert_tn_ok(tn_full(2, s22, tn_scalar_int(5), &(enum tn_dtype){ TN_FLOAT64 }, TN_CPU, &o));
	ck_assert_int_eq(tn_mm_out(a, b, o), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "Expected out tensor to have dtype float, but got double instead");
	ck_assert_double_eq(tn_test_get_double(o, (int64_t[]){ 0, 0 }), 5.0);
	ck_assert_int_eq(tn_matmul_out(a, b, o), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "Expected out tensor to have dtype float, but got double instead");
	tn_tensor_unref(o);
	ck_assert_tn_ok(tn_full(2, s33, tn_scalar_double(5), NULL, TN_CPU, &o));
	ck_assert_int_eq(tn_mm_out(a, b, o), TN_EINVAL);
	ck_assert_msg(strstr(tn_last_error(), "libtensor does not resize out= tensors"), "%s",
		      tn_last_error());
	ck_assert_double_eq(tn_test_get_double(o, (int64_t[]){ 0, 0 }), 5.0);
	tn_tensor_unref(o);
	ck_assert_tn_ok(tn_full(2, (int64_t[]){ 1, 2 }, tn_scalar_double(5), NULL, TN_CPU, &sq));
	ck_assert_tn_ok(tn_expand(sq, 2, s22, &e));
	ck_assert_int_eq(tn_mm_out(a, b, e), TN_EINVAL);
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "more than one element of the written-to tensor"));
	tn_tensor_unref(e);
	tn_tensor_unref(sq);
	/* mm(x, x, out=x) would read x while writing it. */
	ck_assert_tn_ok(tn_ones(2, s33, TN_FLOAT32, TN_CPU, &sq));
	ck_assert_int_eq(tn_mm_out(sq, sq, sq), TN_EINVAL);
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "some elements of the input tensor and the written-to"));
	ck_assert_double_eq(tn_test_get_double(sq, (int64_t[]){ 0, 0 }), 1.0);
	/* addmm_ reads self as the added term: allowed; mat1 overlapping self is not. */
	ck_assert_int_eq(tn_addmm_(sq, sq, sq, tn_scalar_int(1), tn_scalar_int(1)), TN_EINVAL);
	ck_assert_double_eq(tn_test_get_double(sq, (int64_t[]){ 0, 0 }), 1.0);
	tn_tensor_unref(sq);
	ck_assert_tn_ok(tn_ones(2, s22, TN_FLOAT32, TN_CPU, &sq));
	ck_assert_tn_ok(tn_addmm_(sq, a, b, tn_scalar_int(1), tn_scalar_int(1)));
	ck_assert_double_eq(tn_test_get_double(sq, (int64_t[]){ 1, 1 }), 4.0);
	tn_tensor_unref(sq);
	/* In place, self must already have the product's dtype (PyTorch's message). */
	ck_assert_tn_ok(tn_ones(2, s22, TN_FLOAT64, TN_CPU, &o));
	ck_assert_int_eq(tn_addmm_(o, a, b, tn_scalar_int(1), tn_scalar_int(1)), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "self and mat2 must have the same dtype");
	tn_tensor_unref(o);
	ck_assert_tn_ok(tn_ones(3, (int64_t[]){ 1, 2, 2 }, TN_FLOAT64, TN_CPU, &o));
	ck_assert_tn_ok(tn_unsqueeze(a, 0, &e));
	ck_assert_tn_ok(tn_unsqueeze(b, 0, &sq));
	ck_assert_int_eq(tn_baddbmm_(o, e, sq, tn_scalar_int(1), tn_scalar_int(1)), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "Bad in-place call: input tensor dtype double and output "
					  "tensor dtype float should match");
	tn_tensor_unref(e);
	tn_tensor_unref(o);
	tn_tensor_unref(sq);
	/* A NULL result pointer is refused, not a result thrown away. */
	ck_assert_int_eq(tn_mm(a, b, NULL), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "mm: NULL ret_tensor");
	ck_assert_int_eq(tn_matmul(a, b, NULL), TN_EINVAL);
	ck_assert_int_eq(tn_linear(a, a, NULL, NULL), TN_EINVAL);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}
END_TEST

/* The constructors the allocation-failure loop drives. */
static int c_mm(tn_tensor **r, tn_tensor *const *t) { return tn_mm(t[0], t[1], r); }
static int c_bmm(tn_tensor **r, tn_tensor *const *t) { return tn_bmm(t[2], t[3], r); }
static int c_matmul(tn_tensor **r, tn_tensor *const *t) { return tn_matmul(t[2], t[1], r); }
static int c_matmul_b(tn_tensor **r, tn_tensor *const *t) { return tn_matmul(t[0], t[3], r); }
static int c_linear(tn_tensor **r, tn_tensor *const *t) { return tn_linear(t[2], t[4], t[5], r); }
static int c_addmm(tn_tensor **r, tn_tensor *const *t)
{
	return tn_addmm(t[5], t[0], t[1], tn_scalar_int(1), tn_scalar_int(1), r);
}
static int c_half(tn_tensor **r, tn_tensor *const *t) { return tn_mm(t[6], t[7], r); }
static int c_outer(tn_tensor **r, tn_tensor *const *t) { return tn_outer(t[5], t[5], r); }

/* Every constructor of the family under allocation failure: TN_ENOMEM with the message,
 * nothing leaked, until it succeeds. */
START_TEST(test_allocation_failures)
{
	static const struct {
		const char *name;
		int (*fn)(tn_tensor **, tn_tensor *const *);
	} ctors[] = { { "mm", c_mm },	      { "bmm", c_bmm },	    { "matmul (fold)", c_matmul },
		      { "matmul (batched)", c_matmul_b }, { "linear", c_linear },
		      { "addmm", c_addmm },   { "mm float16", c_half }, { "outer", c_outer } };
	int64_t s34[] = { 3, 4 }, s45[] = { 4, 5 }, s234[] = { 2, 3, 4 }, s245[] = { 2, 4, 5 },
		s54[] = { 5, 4 }, s5[] = { 5 };
	tn_tensor *t[8];
	ck_assert_tn_ok(tn_ones(2, s34, TN_FLOAT32, TN_CPU, &t[0]));
	ck_assert_tn_ok(tn_ones(2, s45, TN_FLOAT32, TN_CPU, &t[1]));
	ck_assert_tn_ok(tn_ones(3, s234, TN_FLOAT32, TN_CPU, &t[2]));
	ck_assert_tn_ok(tn_ones(3, s245, TN_FLOAT32, TN_CPU, &t[3]));
	ck_assert_tn_ok(tn_ones(2, s54, TN_FLOAT32, TN_CPU, &t[4]));
	ck_assert_tn_ok(tn_ones(1, s5, TN_FLOAT32, TN_CPU, &t[5]));
	ck_assert_tn_ok(tn_ones(2, s34, TN_FLOAT16, TN_CPU, &t[6]));
	ck_assert_tn_ok(tn_ones(2, s45, TN_FLOAT16, TN_CPU, &t[7]));
	for (size_t k = 0; k < sizeof(ctors) / sizeof(ctors[0]); k++)
		tn_test_alloc_failures(ctors[k].name, ctors[k].fn, t);
	for (int i = 0; i < 8; i++)
		tn_tensor_unref(t[i]);
}
END_TEST

static Suite *linalg_suite(void)
{
	Suite *s = suite_create("linalg");
	TCase *tc = tcase_create("linalg");
	tcase_add_loop_test(tc, test_goldens_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_goldens_with_threads, 0, 3);
	tcase_add_test(tc, test_beta_zero_ignores_nan);
	tcase_add_test(tc, test_out_errors);
	tcase_add_test(tc, test_allocation_failures);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(linalg_suite)
