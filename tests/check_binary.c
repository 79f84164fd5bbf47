/* SPDX-License-Identifier: MIT */
/*
 * The other binary operators (binary_ext.c) against PyTorch: division with rounding modes,
 * remainder, fmod, pow, maximum, minimum, atan2, the logical, bitwise and shift operators,
 * for every dtype pair, with Python numbers on either side, floating special values, integer
 * edge values and shift counts past the width; contiguous, transposed, stepped and expanded
 * operands, out= and in-place forms; every error PyTorch raises, with nothing written; and,
 * under each CPU capability, large (parallel, chunk-converted, strided and broadcast) runs of
 * every new kernel and of the comparison kernels.
 */
#include <math.h>

#include "testutil.h"
#include "golden/binary_golden.h"
#include "golden/parity_golden.h"
#include "golden/binary_parity_golden.h"

typedef int (*tt_fn)(const tn_tensor *, const tn_tensor *, tn_tensor **);
typedef int (*tt_out_fn)(const tn_tensor *, const tn_tensor *, tn_tensor *);
typedef int (*tt_inplace_fn)(tn_tensor *, const tn_tensor *);
typedef int (*ts_fn)(const tn_tensor *, tn_scalar, tn_tensor **);
typedef int (*st_fn)(tn_scalar, const tn_tensor *, tn_tensor **);

static int div_trunc(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_div_mode(a, b, "trunc", r);
}
static int div_floor(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_div_mode(a, b, "floor", r);
}
static int div_none(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_div_mode(a, b, NULL, r);
}
static int div_trunc_out(const tn_tensor *a, const tn_tensor *b, tn_tensor *o)
{
	return tn_div_out_mode(a, b, "trunc", o);
}
static int div_floor_out(const tn_tensor *a, const tn_tensor *b, tn_tensor *o)
{
	return tn_div_out_mode(a, b, "floor", o);
}
static int div_none_out(const tn_tensor *a, const tn_tensor *b, tn_tensor *o)
{
	return tn_div_out_mode(a, b, NULL, o);
}
static int div_trunc_(tn_tensor *a, const tn_tensor *b)
{
	return tn_div_mode_(a, b, "trunc");
}
static int div_floor_(tn_tensor *a, const tn_tensor *b)
{
	return tn_div_mode_(a, b, "floor");
}
static int div_none_(tn_tensor *a, const tn_tensor *b)
{
	return tn_div_mode_(a, b, NULL);
}
static int div_trunc_s(const tn_tensor *a, tn_scalar b, tn_tensor **r)
{
	return tn_div_scalar_mode(a, b, "trunc", r);
}
static int div_floor_s(const tn_tensor *a, tn_scalar b, tn_tensor **r)
{
	return tn_div_scalar_mode(a, b, "floor", r);
}
static int div_none_s(const tn_tensor *a, tn_scalar b, tn_tensor **r)
{
	return tn_div_scalar_mode(a, b, NULL, r);
}

/* Per operator of binary_golden.h: the forms libtensor has (NULL where PyTorch has none). */
static const struct {
	tt_fn fn;
	tt_out_fn out;
	tt_inplace_fn inplace;
	ts_fn scalar;        /* tensor OP number */
	st_fn scalar_tensor; /* number OP tensor */
	int exact;           /* 1: the same bits as PyTorch for float32 and float64 */
} ops[BIN_NOPS] = {
	{ div_trunc, div_trunc_out, div_trunc_, div_trunc_s, NULL, 1 },
	{ div_floor, div_floor_out, div_floor_, div_floor_s, NULL, 1 },
	{ div_none, div_none_out, div_none_, div_none_s, NULL, 1 },
	{ tn_remainder, tn_remainder_out, tn_remainder_, tn_remainder_scalar,
	  tn_remainder_scalar_tensor, 1 },
	{ tn_fmod, tn_fmod_out, tn_fmod_, tn_fmod_scalar, NULL, 1 },
	{ tn_pow, tn_pow_out, tn_pow_, tn_pow_scalar, tn_pow_scalar_tensor, 0 },
	{ tn_maximum, tn_maximum_out, NULL, NULL, NULL, 1 },
	{ tn_minimum, tn_minimum_out, NULL, NULL, NULL, 1 },
	{ tn_atan2, tn_atan2_out, tn_atan2_, NULL, NULL, 0 },
	{ tn_logical_and, tn_logical_and_out, tn_logical_and_, NULL, NULL, 1 },
	{ tn_logical_or, tn_logical_or_out, tn_logical_or_, NULL, NULL, 1 },
	{ tn_logical_xor, tn_logical_xor_out, tn_logical_xor_, NULL, NULL, 1 },
	{ tn_bitwise_and, tn_bitwise_and_out, tn_bitwise_and_, tn_bitwise_and_scalar,
	  tn_bitwise_and_scalar_tensor, 1 },
	{ tn_bitwise_or, tn_bitwise_or_out, tn_bitwise_or_, tn_bitwise_or_scalar,
	  tn_bitwise_or_scalar_tensor, 1 },
	{ tn_bitwise_xor, tn_bitwise_xor_out, tn_bitwise_xor_, tn_bitwise_xor_scalar,
	  tn_bitwise_xor_scalar_tensor, 1 },
	{ tn_bitwise_left_shift, tn_bitwise_left_shift_out, tn_bitwise_left_shift_,
	  tn_bitwise_left_shift_scalar, tn_bitwise_left_shift_scalar_tensor, 1 },
	{ tn_bitwise_right_shift, tn_bitwise_right_shift_out, tn_bitwise_right_shift_,
	  tn_bitwise_right_shift_scalar, tn_bitwise_right_shift_scalar_tensor, 1 },
};
static const char *const op_names[BIN_NOPS] = {
	"div_trunc", "div_floor",   "div_none",	   "remainder",	  "fmod",
	"pow",	     "maximum",	    "minimum",	   "atan2",	  "logical_and",
	"logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
	"bitwise_left_shift", "bitwise_right_shift",
};

/* The ulps a result may be off PyTorch's: none for the exact operators in float32/64 (the
 * formulas are PyTorch's); pow and atan2 may differ from PyTorch's vectorised (SLEEF) code in
 * the last bits; 16-bit results round twice on one side or the other. */
static double tolerance(int op, enum tn_dtype rd)
{
	if (!tn_dtype_is_floating(rd))
		return 0;
	if (rd == TN_FLOAT16 || rd == TN_BFLOAT16)
		return 1;
	return ops[op].exact ? 0 : rd == TN_FLOAT32 ? 4 : 2;
}

/* @t holds @want (n values, read in @t's index order), within @tol ulps. */
static void assert_close(const tn_tensor *t, const double *want, int64_t n, double tol,
			 const char *what)
{
	tn_tensor *f64, *c;
	ck_assert_int_eq(tn_tensor_numel(t), n);
	ck_assert_tn_ok(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c));
	ck_assert_tn_ok(tn_empty(tn_tensor_ndim(c), tn_tensor_sizes(c), TN_FLOAT64, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &f64));
	ck_assert_tn_ok(tn_copy_(f64, c, false));
	const double *got = tn_tensor_data(f64);
	for (int64_t i = 0; i < n; i++) {
		double d = tn_dtype_is_floating(tn_tensor_dtype(t))
				   ? tn_test_ulps(got[i], want[i], tn_tensor_dtype(t))
				   : (got[i] == want[i] ? 0 : 1e9);
		ck_assert_msg(d <= tol, "%s: element %lld is %.17g, PyTorch %.17g (%g ulps)", what,
			      (long long)i, got[i], want[i], d);
	}
	tn_tensor_unref(f64);
	tn_tensor_unref(c);
}

/* The [2, 3] bin_a operand in three layouts: transposed in memory (*ret_t, with its memory
 * in *ret_mem_t) and every other column of a [2, 6] tensor (*ret_s, memory in *ret_mem_s). */
static void strided_a(enum tn_dtype dt, tn_tensor **ret_mem_t, tn_tensor **ret_t,
		      tn_tensor **ret_mem_s, tn_tensor **ret_s)
{
	double at[6], wide[12];
	int64_t s32[] = { 3, 2 }, s26[] = { 2, 6 }, s23[] = { 2, 3 }, st[] = { 6, 2 }, off = 0;
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++) {
			at[j * 2 + i] = bin_a[i * 3 + j];
			wide[i * 6 + 2 * j] = bin_a[i * 3 + j];
			wide[i * 6 + 2 * j + 1] = 99;
		}
	*ret_mem_t = tn_test_from_values(at, 2, s32, dt);
	ck_assert_tn_ok(tn_transpose(*ret_mem_t, 0, 1, ret_t));
	*ret_mem_s = tn_test_from_values(wide, 2, s26, dt);
	ck_assert_tn_ok(tn_as_strided(*ret_mem_s, 2, s23, 2, st, &off, ret_s));
}

static void unref_all(tn_tensor **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tn_tensor_unref(list[i]);
}

/* Every operator and dtype pair: functional on contiguous, transposed and stepped left
 * operands with a broadcast or expanded right one; out= of the result dtype; in place when
 * the result fits self; PyTorch's refusals with its messages. */
START_TEST(test_pairs_match_pytorch)
{
	int64_t s23[] = { 2, 3 }, s3[] = { 3 };
	for (int g = 0; g < BIN_PAIR_NGOLDEN; g++) {
		const struct bin_golden *G = &bin_pair_golden[g];
		char what[128];
		snprintf(what, sizeof(what), "%s(%s, %s)", op_names[G->op], tn_dtype_name(G->a),
			 tn_dtype_name(G->b));
		tn_tensor *a = tn_test_from_values(bin_a, 2, s23, G->a);
		tn_tensor *b = tn_test_from_values(bin_b, 1, s3, G->b), *r = NULL;
		if (!G->ok) {
			tn_clear_error();
			int rc = ops[G->op].fn(a, b, &r);
			ck_assert_msg(rc == TN_EINVAL, "%s: PyTorch refuses, libtensor gave %d", what,
				      rc);
			ck_assert_str_eq(tn_last_error(), G->err);
			tn_tensor_unref(a);
			tn_tensor_unref(b);
			continue;
		}
		enum tn_dtype rd = (enum tn_dtype)G->dtype;
		double tol = tolerance(G->op, rd);
		ck_assert_msg(ops[G->op].fn(a, b, &r) == 0, "%s: %s", what, tn_last_error());
		ck_assert_msg(tn_tensor_dtype(r) == rd, "%s: dtype %s, PyTorch %s", what,
			      tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(rd));
		assert_close(r, G->v, 6, tol, what);
		tn_tensor_unref(r);

		tn_tensor *mt, *at, *ms, *as, *be, *o;
		strided_a((enum tn_dtype)G->a, &mt, &at, &ms, &as);
		ck_assert_tn_ok(tn_expand(b, 2, s23, &be));
		ck_assert_tn_ok(ops[G->op].fn(at, b, &r));
		assert_close(r, G->v, 6, tol, what);
		tn_tensor_unref(r);
		ck_assert_tn_ok(ops[G->op].fn(as, be, &r));
		assert_close(r, G->v, 6, tol, what);
		tn_tensor_unref(r);
		ck_assert_tn_ok(tn_zeros(2, s23, rd, TN_CPU, &o));
		ck_assert_msg(ops[G->op].out(as, b, o) == 0, "%s out=: %s", what, tn_last_error());
		assert_close(o, G->v, 6, tol, what);
		tn_tensor_unref(o);
		/* In place: the logical operators write 0/1 into any dtype; the others need the
		 * result dtype to be self's. */
		bool logical = G->op >= 9 && G->op <= 11;
		if (ops[G->op].inplace && (rd == (enum tn_dtype)G->a || logical)) {
			ck_assert_msg(ops[G->op].inplace(at, b) == 0, "%s in place: %s", what,
				      tn_last_error());
			assert_close(at, G->v, 6, logical ? 0 : tol, what);
		}
		tn_tensor *list[] = { a, b, mt, at, ms, as, be };
		unref_all(list, 7);
	}
}
END_TEST

/* A Python number on the right (the Scalar forms) or on the left (Scalar_Tensor). */
START_TEST(test_scalars_match_pytorch)
{
	int64_t s23[] = { 2, 3 };
	for (int g = 0; g < BIN_SCALAR_NGOLDEN; g++) {
		const struct bin_scalar_golden *G = &bin_scalar_golden[g];
		tn_scalar num = G->k == 0   ? tn_scalar_bool(true)
				: G->k == 1 ? tn_scalar_int(3)
					    : tn_scalar_double(-2.5);
		char what[128];
		snprintf(what, sizeof(what), "%s(%s, number %d, side %d)", op_names[G->op],
			 tn_dtype_name(G->a), G->k, G->side);
		tn_tensor *a = tn_test_from_values(bin_a, 2, s23, G->a), *r = NULL;
		tn_clear_error();
		int rc = G->side == 0 ? ops[G->op].scalar(a, num, &r)
				      : ops[G->op].scalar_tensor(num, a, &r);
		if (!G->ok) {
			ck_assert_msg(rc == TN_EINVAL, "%s: PyTorch refuses, libtensor gave %d", what,
				      rc);
			ck_assert_str_eq(tn_last_error(), G->err);
		} else {
			ck_assert_msg(rc == 0, "%s: %s", what, tn_last_error());
			ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)G->dtype,
				      "%s: dtype %s, PyTorch %s", what,
				      tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(G->dtype));
			assert_close(r, G->v, 6, tolerance(G->op, tn_tensor_dtype(r)), what);
			tn_tensor_unref(r);
		}
		tn_tensor_unref(a);
	}
}
END_TEST

/* Floating special values pairwise: NaN, infinities, signed zeros, zero divisors. */
START_TEST(test_float_specials_match_pytorch)
{
	int64_t n = BIN_FNVALS;
	for (int g = 0; g < BIN_FLOAT_NGOLDEN; g++) {
		const struct bin_float_golden *G = &bin_float_golden[g];
		enum tn_dtype dt = (enum tn_dtype)G->dtype;
		char what[128];
		snprintf(what, sizeof(what), "%s(%s specials)", op_names[G->op], tn_dtype_name(dt));
		tn_tensor *x = tn_test_from_values(bin_fx, 1, &n, dt);
		tn_tensor *y = tn_test_from_values(bin_fy, 1, &n, dt), *r;
		ck_assert_msg(ops[G->op].fn(x, y, &r) == 0, "%s: %s", what, tn_last_error());
		assert_close(r, G->v, n, tolerance(G->op, tn_tensor_dtype(r)), what);
		tn_tensor_unref(r);
		tn_tensor_unref(x);
		tn_tensor_unref(y);
	}
}
END_TEST

/* An int64 pool slice as a tensor of @dt. */
static tn_tensor *from_ints(const int64_t *v, int64_t n, enum tn_dtype dt)
{
	tn_tensor *i64, *t;
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &i64));
	memcpy(tn_tensor_data(i64), v, (size_t)n * sizeof(int64_t));
	ck_assert_tn_ok(tn_empty(1, &n, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_tn_ok(tn_copy_(t, i64, false));
	tn_tensor_unref(i64);
	return t;
}

static void assert_ints(const tn_tensor *t, const int64_t *want, int64_t n, const char *what)
{
	tn_tensor *i64, *c;
	ck_assert_tn_ok(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c));
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &i64));
	ck_assert_tn_ok(tn_copy_(i64, c, false));
	const int64_t *got = tn_tensor_data(i64);
	for (int64_t i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "%s: element %lld is %lld, PyTorch %lld", what,
			      (long long)i, (long long)got[i], (long long)want[i]);
	tn_tensor_unref(i64);
	tn_tensor_unref(c);
}

/* Integer edge values pairwise: extremes, negative operands, shift counts past the width. */
START_TEST(test_int_edges_match_pytorch)
{
	for (int g = 0; g < BIN_INT_NGOLDEN; g++) {
		const struct bin_int_golden *G = &bin_int_golden[g];
		enum tn_dtype dt = (enum tn_dtype)G->dtype;
		char what[128];
		snprintf(what, sizeof(what), "%s(%s edges)", op_names[G->op], tn_dtype_name(dt));
		tn_tensor *x = from_ints(bin_ix + G->off, G->n, dt), *r;
		tn_tensor *y = from_ints(bin_iy + G->off, G->n, dt);
		ck_assert_msg(ops[G->op].fn(x, y, &r) == 0, "%s: %s", what, tn_last_error());
		ck_assert_int_eq(tn_tensor_dtype(r), G->rdtype);
		assert_ints(r, bin_ir + G->off, G->n, what);
		tn_tensor_unref(r);
		tn_tensor_unref(x);
		tn_tensor_unref(y);
	}
}
END_TEST

/* pow with a Python exponent (its special cases and checks) and with a Python base. */
START_TEST(test_pow_numbers_match_pytorch)
{
	int64_t n = BIN_PNVALS;
	for (int g = 0; g < BIN_POW_NGOLDEN; g++) {
		const struct bin_pow_golden *G = &bin_pow_golden[g];
		enum tn_dtype dt = (enum tn_dtype)G->dtype;
		double ev = bin_pow_exps[G->k].v;
		tn_scalar e = bin_pow_exps[G->k].kind == 0   ? tn_scalar_bool(ev != 0)
			      : bin_pow_exps[G->k].kind == 1 ? tn_scalar_int((int64_t)ev)
							     : tn_scalar_double(ev);
		char what[128];
		snprintf(what, sizeof(what), "pow(%s, exponent %d, side %d)", tn_dtype_name(dt), G->k,
			 G->side);
		tn_tensor *t = tn_test_from_values(tn_dtype_is_floating(dt) ? bin_pow_fvals
									     : bin_pow_ivals,
						   1, &n, dt),
			  *r = NULL;
		tn_clear_error();
		int rc = G->side == 0 ? tn_pow_scalar(t, e, &r) : tn_pow_scalar_tensor(e, t, &r);
		if (!G->ok) {
			ck_assert_msg(rc < 0, "%s: PyTorch refuses, libtensor gave %d", what, rc);
			ck_assert_int_eq(rc, strstr(G->err, "overflow") ? TN_EOVERFLOW : TN_EINVAL);
			ck_assert_str_eq(tn_last_error(), G->err);
			tn_tensor_unref(t);
			continue;
		}
		ck_assert_msg(rc == 0, "%s: %s", what, tn_last_error());
		enum tn_dtype rd = (enum tn_dtype)G->rdtype;
		ck_assert_msg(tn_tensor_dtype(r) == rd, "%s: dtype %s, PyTorch %s", what,
			      tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(rd));
		double tol = tolerance(5, rd);
		assert_close(r, G->v, n, tol, what);
		tn_tensor_unref(r);
		/* out= of the result dtype and, where it is self's, in place. */
		tn_tensor *o;
		ck_assert_tn_ok(tn_zeros(1, &n, rd, TN_CPU, &o));
		rc = G->side == 0 ? tn_pow_scalar_out(t, e, o) : tn_pow_scalar_tensor_out(e, t, o);
		ck_assert_msg(rc == 0, "%s out=: %s", what, tn_last_error());
		assert_close(o, G->v, n, tol, what);
		tn_tensor_unref(o);
		if (G->side == 0 && rd == dt) {
			ck_assert_tn_ok(tn_pow_scalar_(t, e));
			assert_close(t, G->v, n, tol, what);
		}
		tn_tensor_unref(t);
	}
}
END_TEST

/* A [4] int64 tensor of 7s, the sentinel an error must leave alone. */
static tn_tensor *sevens(enum tn_dtype dt)
{
	int64_t n = 4;
	tn_tensor *t;
	ck_assert_tn_ok(tn_full(1, &n, tn_scalar_int(7), &dt, TN_CPU, &t));
	return t;
}

static void assert_sevens(const tn_tensor *t)
{
	for (int64_t i = 0; i < 4; i++)
		ck_assert_int_eq(tn_test_get_int(t, &i), 7);
}

/* Integer division by zero: PyTorch's ZeroDivisionError, from every form, and nothing
 * written (PyTorch may have written the elements before the zero). */
START_TEST(test_zero_division)
{
	int64_t n = 4;
	double vals[] = { 5, -5, 9, 1 }, divs[] = { 2, 3, 0, 1 };
	tn_tensor *a = tn_test_from_values(vals, 1, &n, TN_INT32);
	tn_tensor *b = tn_test_from_values(divs, 1, &n, TN_INT64), *o = sevens(TN_INT64), *r = NULL;
	static const int divops[] = { 0, 1, 3, 4 };
	for (int k = 0; k < 4; k++) {
		int op = divops[k];
		ck_assert_tn_error(ops[op].fn(a, b, &r), TN_EINVAL, "ZeroDivisionError");
		ck_assert_tn_error(ops[op].out(a, b, o), TN_EINVAL, "ZeroDivisionError");
		assert_sevens(o);
		ck_assert_tn_error(ops[op].scalar(a, tn_scalar_int(0), &r), TN_EINVAL,
				   "ZeroDivisionError");
		ck_assert_tn_error(ops[op].scalar(a, tn_scalar_bool(false), &r), TN_EINVAL,
				   "ZeroDivisionError");
		tn_tensor *s = sevens(TN_INT32);
		ck_assert_tn_error(ops[op].inplace(s, b), TN_EINVAL, "ZeroDivisionError");
		assert_sevens(s);
		tn_tensor_unref(s);
	}
	ck_assert_tn_error(tn_remainder_scalar_tensor(tn_scalar_int(2), b, &r), TN_EINVAL,
			   "ZeroDivisionError");
	/* The divisor converted to the result dtype: 256 is 0 in int8. */
	tn_tensor *i8 = sevens(TN_INT8);
	ck_assert_tn_error(tn_remainder_scalar(i8, tn_scalar_int(256), &r), TN_EINVAL,
			   "ZeroDivisionError");
	/* A zero deep in a large broadcast divisor, found by the parallel scan. */
	int64_t big[] = { 300, 200 };
	tn_tensor *ones, *ob;
	enum tn_dtype i16 = TN_INT16;
	ck_assert_tn_ok(tn_full(2, big, tn_scalar_int(3), &i16, TN_CPU, &ones));
	ck_assert_tn_ok(tn_full(2, big, tn_scalar_int(9), &i16, TN_CPU, &ob));
	int64_t idx[] = { 299, 150 };
	ck_assert_tn_ok(tn_tensor_set(ones, 2, idx, tn_scalar_int(0)));
	ck_assert_tn_error(tn_fmod_(ob, ones), TN_EINVAL, "ZeroDivisionError");
	idx[0] = 0;
	ck_assert_int_eq(tn_test_get_int(ob, idx), 9);
	/* Floating division by zero is IEEE's, and Meta tensors are never read. */
	tn_tensor *f = tn_test_from_values(divs, 1, &n, TN_FLOAT32), *m;
	ck_assert_tn_ok(tn_remainder(a, f, &r));
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT64, TN_META, TN_CONTIGUOUS_FORMAT, &m));
	ck_assert_tn_ok(tn_fmod(m, m, &r));
	ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
	tn_tensor_unref(r);
	tn_tensor *list[] = { a, b, o, i8, ones, ob, f, m };
	unref_all(list, 8);
}
END_TEST

/* Every other message: rounding modes, pow's checks, refused dtypes, casts to out=, shapes. */
START_TEST(test_errors)
{
	int64_t n = 4, n3 = 3;
	double vals[] = { 5, -5, 9, 1 };
	tn_tensor *i = tn_test_from_values(vals, 1, &n, TN_INT64);
	tn_tensor *f = tn_test_from_values(vals, 1, &n, TN_FLOAT32), *r = NULL;
	tn_tensor *o = sevens(TN_INT64), *b, *i8 = sevens(TN_INT8), *t3;
	ck_assert_tn_ok(tn_zeros(1, &n, TN_BOOL, TN_CPU, &b));
	ck_assert_tn_ok(tn_zeros(1, &n3, TN_FLOAT32, TN_CPU, &t3));

	ck_assert_tn_error(tn_div_mode(i, i, "round", &r), TN_EINVAL,
			   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
			   "found 'round'");
	ck_assert_tn_error(tn_div_scalar_mode_(o, tn_scalar_int(2), ""), TN_EINVAL,
			   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
			   "found ''");
	/* The mode is checked before the shapes, as in PyTorch. */
	ck_assert_tn_error(tn_div_out_mode(i, t3, "bad", o), TN_EINVAL,
			   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
			   "found 'bad'");
	ck_assert_tn_error(tn_div_mode(f, t3, "floor", &r), TN_EINVAL,
			   "The size of tensor a (4) must match the size of tensor b (3) at "
			   "non-singleton dimension 0");
	ck_assert_tn_error(tn_div_mode_(o, f, "trunc"), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_div_mode_(o, i, NULL), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_div_mode(b, b, "floor", &r), TN_EINVAL,
			   "\"div_floor_cpu\" not implemented for 'Bool'");

	ck_assert_tn_error(tn_pow_scalar(i, tn_scalar_int(-1), &r), TN_EINVAL,
			   "Integers to negative integer powers are not allowed.");
	ck_assert_tn_error(tn_pow_scalar(b, tn_scalar_int(-2), &r), TN_EINVAL,
			   "Integers to negative integer powers are not allowed.");
	ck_assert_tn_error(tn_pow_scalar_out(f, tn_scalar_int(2), o), TN_EINVAL,
			   "Found dtype Long but expected Float");
	ck_assert_tn_error(tn_pow_scalar_(o, tn_scalar_double(0.5)), TN_EINVAL,
			   "Found dtype Long but expected Float");
	ck_assert_tn_error(tn_pow_scalar(i8, tn_scalar_int(300), &r), TN_EOVERFLOW,
			   "value cannot be converted to type int8_t without overflow");
	ck_assert_tn_error(tn_pow(b, b, &r), TN_EINVAL, "\"pow\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_pow_(o, f), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_pow_scalar_tensor_out(tn_scalar_int(2), f, o), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	assert_sevens(o);
	/* A base of 1 fills out, whatever its dtype, as PyTorch does once its meta function
	 * resized out to the exponent's shape: an out of another shape is refused, as for every
	 * out= (it used to be filled whole). */
	ck_assert_tn_error(tn_pow_scalar_tensor_out(tn_scalar_int(1), t3, b), TN_EINVAL,
			   "output with shape [4] doesn't match the broadcast shape [3] (libtensor "
			   "does not resize out= tensors)");
	tn_tensor *b3;
	ck_assert_tn_ok(tn_zeros(1, &n3, TN_BOOL, TN_CPU, &b3));
	ck_assert_tn_ok(tn_pow_scalar_tensor_out(tn_scalar_int(1), t3, b3));
	assert_close(b3, (const double[]){ 1, 1, 1 }, 3, 0, "pow(1, t, out=bool)");
	tn_tensor_unref(b3);

	ck_assert_tn_error(tn_bitwise_and(f, f, &r), TN_EINVAL,
			   "\"bitwise_and_cpu\" not implemented for 'Float'");
	ck_assert_tn_error(tn_bitwise_xor_scalar(i, tn_scalar_double(1.5), &r), TN_EINVAL,
			   "\"bitwise_xor_cpu\" not implemented for 'Float'");
	ck_assert_tn_error(tn_bitwise_left_shift(b, b, &r), TN_EINVAL,
			   "\"lshift_cpu\" not implemented for 'Bool'");
	ck_assert_tn_error(tn_bitwise_right_shift_scalar_tensor(tn_scalar_double(2.0), i, &r),
			   TN_EINVAL, "\"rshift_cpu\" not implemented for 'Float'");
	ck_assert_tn_error(tn_bitwise_and_out(i8, b, b), TN_EINVAL,
			   "result type Char can't be cast to the desired output type Bool");
	ck_assert_tn_error(tn_atan2_(o, i), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_maximum_out(f, i, o), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	ck_assert_tn_error(tn_remainder_out(f, i, t3), TN_EINVAL,
			   "output with shape [3] doesn't match the broadcast shape [4] (libtensor "
			   "does not resize out= tensors)");
	ck_assert_tn_error(tn_logical_and(f, t3, &r), TN_EINVAL,
			   "The size of tensor a (4) must match the size of tensor b (3) at "
			   "non-singleton dimension 0");
	ck_assert_tn_error(tn_maximum(f, i, NULL), TN_EINVAL, "maximum: NULL ret_tensor");
	assert_sevens(o);
	assert_sevens(i8);

	/* Meta kernels compute shapes and dtypes only: PyTorch's kernel-time refusals do not
	 * apply, its meta-time ones do. */
	tn_tensor *mf;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_META, TN_CONTIGUOUS_FORMAT, &mf));
	ck_assert_tn_ok(tn_bitwise_and(mf, mf, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT32);
	tn_tensor_unref(r);
	tn_tensor *mi;
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT64, TN_META, TN_CONTIGUOUS_FORMAT, &mi));
	ck_assert_tn_error(tn_pow_scalar(mi, tn_scalar_int(-2), &r), TN_EINVAL,
			   "Integers to negative integer powers are not allowed.");
	ck_assert_tn_ok(tn_atan2(mi, mi, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT32);
	tn_tensor_unref(r);

	tn_tensor *list[] = { i, f, o, b, i8, t3, mf, mi };
	unref_all(list, 8);
}
END_TEST

/* The logical operators write 0 and 1 into an out= of any dtype, and in place into self's. */
START_TEST(test_logical_outputs)
{
	int64_t n = 4;
	double x[] = { 0, NAN, -0.0, 2 }, y[] = { 1, 1, 1, 0 };
	tn_tensor *a = tn_test_from_values(x, 1, &n, TN_FLOAT32);
	tn_tensor *b = tn_test_from_values(y, 1, &n, TN_BOOL), *o, *r;
	ck_assert_tn_ok(tn_logical_and(a, b, &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_BOOL);
	assert_close(r, (const double[]){ 0, 1, 0, 0 }, 4, 0, "logical_and");
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_zeros(1, &n, TN_FLOAT16, TN_CPU, &o));
	ck_assert_tn_ok(tn_logical_or_out(a, b, o));
	assert_close(o, (const double[]){ 1, 1, 1, 1 }, 4, 0, "logical_or");
	tn_tensor_unref(o);
	ck_assert_tn_ok(tn_zeros(1, &n, TN_INT32, TN_CPU, &o));
	ck_assert_tn_ok(tn_logical_xor_out(b, b, o)); /* bool inputs, int32 out */
	assert_close(o, (const double[]){ 0, 0, 0, 0 }, 4, 0, "logical_xor");
	ck_assert_tn_ok(tn_logical_xor_(a, b));
	assert_close(a, (const double[]){ 1, 0, 1, 1 }, 4, 0, "logical_xor_");
	tn_tensor *list[] = { a, b, o };
	unref_all(list, 3);
}
END_TEST

/*
 * Ties of -0.0 and 0.0, a deliberate difference (tn_maximum(3), tn_clamp(3)): maximum and
 * minimum give other, as PyTorch 1.13's vector loop does; clamp with Tensor bounds keeps
 * self, as its scalar std::max and std::min do. PyTorch takes one or the other by the
 * element's place in its vectorised loop (the first 32 float32 elements of 37 on AVX-512,
 * the last 5 scalar); libtensor the same for all, at every length.
 */
START_TEST(test_signed_zero_ties)
{
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16, TN_FLOAT32, TN_FLOAT64 };
	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		for (int64_t n = 1; n <= 37; n += 36) {
			double *vm = malloc((size_t)n * sizeof(double));
			double *vp = malloc((size_t)n * sizeof(double));
			ck_assert(vm && vp);
			for (int64_t i = 0; i < n; i++)
				vm[i] = -0.0, vp[i] = 0.0;
			tn_tensor *m = tn_test_from_values(vm, 1, &n, dts[d]);
			tn_tensor *p = tn_test_from_values(vp, 1, &n, dts[d]);
			tn_tensor *r[6];
			ck_assert_tn_ok(tn_maximum(m, p, &r[0]));
			ck_assert_tn_ok(tn_maximum(p, m, &r[1]));
			ck_assert_tn_ok(tn_minimum(m, p, &r[2]));
			ck_assert_tn_ok(tn_minimum(p, m, &r[3]));
			ck_assert_tn_ok(tn_clamp_tensor(m, p, NULL, &r[4]));
			ck_assert_tn_ok(tn_clamp_tensor(m, NULL, p, &r[5]));
			/* The sign of each result: other's, other's, ..., self's, self's. */
			static const bool neg[6] = { false, true, false, true, true, true };
			for (int k = 0; k < 6; k++) {
				for (int64_t i = 0; i < n; i++) {
					double v = tn_test_get_double(r[k], &i);
					ck_assert_msg(v == 0.0 && !!signbit(v) == neg[k],
						      "dtype %d n %lld result %d element %lld: %g",
						      (int)dts[d], (long long)n, k, (long long)i, v);
				}
				tn_tensor_unref(r[k]);
			}
			tn_tensor_unref(m);
			tn_tensor_unref(p);
			free(vm);
			free(vp);
		}
	}
}
END_TEST

/* ---- under each CPU capability ---- */

#define TILE 400 /* BIN_FNVALS * TILE elements: past the grain size */

/* An [TILE, n] tensor of @dt whose every row holds @v, laid out transposed in memory when
 * @transposed (its memory, to unref, in *ret_mem). */
static tn_tensor *tiled(const double *v, int64_t n, enum tn_dtype dt, bool transposed,
			tn_tensor **ret_mem)
{
	int64_t s[] = { TILE, n }, st[] = { n, TILE };
	double *buf = malloc((size_t)(TILE * n) * sizeof(double));
	ck_assert_ptr_nonnull(buf);
	for (int64_t i = 0; i < TILE; i++)
		for (int64_t j = 0; j < n; j++)
			buf[transposed ? j * TILE + i : i * n + j] = v[j];
	tn_tensor *mem = tn_test_from_values(buf, 2, transposed ? st : s, dt), *t;
	free(buf);
	if (!transposed) {
		*ret_mem = NULL;
		return mem;
	}
	ck_assert_tn_ok(tn_transpose(mem, 0, 1, &t));
	*ret_mem = mem;
	return t;
}

/* Row i of @t (a [TILE, n] result) against @want for rows 0, 7, 133 and the last. */
static void assert_tiled(const tn_tensor *t, const double *want, int64_t n, double tol,
			 const char *what)
{
	static const int64_t rows[] = { 0, 7, 133, TILE - 1 };
	for (int k = 0; k < 4; k++) {
		tn_tensor *row;
		int64_t s[] = { n }, st[] = { tn_tensor_strides(t)[1] };
		int64_t off = tn_tensor_storage_offset(t) + rows[k] * tn_tensor_strides(t)[0];
		ck_assert_tn_ok(tn_as_strided(t, 1, s, 1, st, &off, &row));
		assert_close(row, want, n, tol, what);
		tn_tensor_unref(row);
	}
}

/*
 * Every floating special-value golden, tiled to 40000 elements: float32 with a transposed
 * left operand and a float16 right one (strided kernel rows, chunked conversion) into a
 * float64 out= (converted back), the others contiguous (vector paths); every integer edge
 * golden tiled likewise with a right operand of a wider dtype (cast in chunks) and a
 * broadcast column (the scalar path); and the comparisons eq..ge on special values.
 */
START_TEST(test_kernels_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	const int64_t n = BIN_FNVALS;
	for (int g = 0; g < BIN_FLOAT_NGOLDEN; g++) {
		const struct bin_float_golden *G = &bin_float_golden[g];
		enum tn_dtype dt = (enum tn_dtype)G->dtype;
		bool f32 = dt == TN_FLOAT32;
		char what[128];
		snprintf(what, sizeof(what), "%s(%s specials) under %s", op_names[G->op],
			 tn_dtype_name(dt), tn_cpu_capability_name(want));
		tn_tensor *mx, *my, *r;
		tn_tensor *x = tiled(bin_fx, n, dt, f32, &mx);
		tn_tensor *y = tiled(bin_fy, n, f32 ? TN_FLOAT16 : dt, false, &my);
		ck_assert_msg(ops[G->op].fn(x, y, &r) == 0, "%s: %s", what, tn_last_error());
		ck_assert_int_eq(tn_tensor_dtype(r), G->op >= 9 && G->op <= 11 ? TN_BOOL : dt);
		double tol = tolerance(G->op, tn_tensor_dtype(r));
		assert_tiled(r, G->v, n, tol, what);
		if (f32 && G->op != 9 && G->op != 10 && G->op != 11) {
			tn_tensor *o;
			int64_t s[] = { TILE, n };
			ck_assert_tn_ok(tn_empty(2, s, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &o));
			ck_assert_tn_ok(ops[G->op].out(x, y, o));
			/* Back in float32, where the tolerance is counted. */
			tn_tensor *o32;
			ck_assert_tn_ok(tn_empty(2, s, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &o32));
			ck_assert_tn_ok(tn_copy_(o32, o, false));
			assert_tiled(o32, G->v, n, tol, what);
			tn_tensor_unref(o32);
			tn_tensor_unref(o);
		}
		tn_tensor *list[] = { x, y, mx, my, r };
		unref_all(list, 5);
	}
	for (int g = 0; g < BIN_INT_NGOLDEN; g++) {
		const struct bin_int_golden *G = &bin_int_golden[g];
		enum tn_dtype dt = (enum tn_dtype)G->dtype;
		char what[128];
		snprintf(what, sizeof(what), "%s(%s edges) under %s", op_names[G->op],
			 tn_dtype_name(dt), tn_cpu_capability_name(want));
		/* Tile the pool slice to past the grain size. */
		int64_t reps = 32768 / G->n + 2, total = reps * G->n;
		int64_t *xs = malloc((size_t)total * sizeof(int64_t)),
			*ys = malloc((size_t)total * sizeof(int64_t)),
			*rs = malloc((size_t)total * sizeof(int64_t));
		ck_assert(xs && ys && rs);
		for (int64_t k = 0; k < total; k++) {
			xs[k] = bin_ix[G->off + k % G->n];
			ys[k] = bin_iy[G->off + k % G->n];
			rs[k] = bin_ir[G->off + k % G->n];
		}
		tn_tensor *x = from_ints(xs, total, dt), *y = from_ints(ys, total, dt), *r;
		ck_assert_msg(ops[G->op].fn(x, y, &r) == 0, "%s: %s", what, tn_last_error());
		assert_ints(r, rs, total, what);
		tn_tensor_unref(r);
		/* y[j] broadcast down a column of x: the scalar-broadcast rows. */
		int64_t j = G->n / 2, s[] = { total, 1 }, col[] = { total };
		tn_tensor *yj = from_ints(&bin_iy[G->off + j], 1, dt), *xc;
		ck_assert_tn_ok(tn_view(x, 2, s, &xc));
		ck_assert_tn_ok(ops[G->op].fn(xc, yj, &r));
		tn_tensor *rc;
		ck_assert_tn_ok(tn_view(r, 1, col, &rc));
		for (int64_t k = j; k < total; k += G->n * 37) {
			/* Row k of x holds x[k % n]: its result with y[j] is the golden's only
			 * where k % n == j, so compare those. */
			tn_scalar v;
			ck_assert_tn_ok(tn_tensor_get(rc, 1, &k, &v));
			ck_assert_int_eq(v.kind == TN_SCALAR_BOOL ? v.v.b : v.v.i, rs[k]);
		}
		tn_tensor *list[] = { x, y, r, yj, xc, rc };
		unref_all(list, 6);
		free(xs);
		free(ys);
		free(rs);
	}
	/* The comparison kernels on the special values, float32 transposed against float16,
	 * float64 and int32 contiguous; C's comparisons are the reference (NaN unordered). */
	typedef int (*cmp_fn)(const tn_tensor *, const tn_tensor *, tn_tensor **);
	static const cmp_fn cmps[] = { tn_eq, tn_ne, tn_lt, tn_le, tn_gt, tn_ge };
	static const enum tn_dtype cdt[] = { TN_FLOAT32, TN_FLOAT64, TN_INT32, TN_BFLOAT16 };
	double ix[BIN_FNVALS], iy[BIN_FNVALS];
	for (int64_t k = 0; k < n; k++) {
		ix[k] = isfinite(bin_fx[k]) ? trunc(bin_fx[k] * 2) : 5;
		iy[k] = isfinite(bin_fy[k]) ? trunc(bin_fy[k] * 2) : -5;
	}
	for (int c = 0; c < 6; c++) {
		for (int d = 0; d < 4; d++) {
			bool ints = cdt[d] == TN_INT32;
			const double *xv = ints ? ix : bin_fx, *yv = ints ? iy : bin_fy;
			double expect[BIN_FNVALS];
			for (int64_t k = 0; k < n; k++) {
				double p = xv[k], q = yv[k];
				expect[k] = c == 0 ? p == q : c == 1 ? p != q : c == 2 ? p < q
					  : c == 3 ? p <= q : c == 4 ? p > q : p >= q;
			}
			tn_tensor *mx, *my, *r;
			tn_tensor *x = tiled(xv, n, cdt[d], d == 0, &mx);
			tn_tensor *y = tiled(yv, n, d == 0 ? TN_FLOAT16 : cdt[d], false, &my);
			ck_assert_tn_ok(cmps[c](x, y, &r));
			assert_tiled(r, expect, n, 0, "comparison");
			tn_tensor *list[] = { x, y, mx, my, r };
			unref_all(list, 5);
		}
	}
}
END_TEST

/*
 * Outputs past TN_STREAM_BYTES (8 MiB) are written with streaming stores: by the kernel itself
 * (add), or computed in blocks and streamed out (comparisons into bool, remainder), with a
 * broadcast row; a mixed-dtype operation of the same size takes the converting path. Every
 * element is checked.
 */
START_TEST(test_streamed_outputs)
{
	const int64_t rows = 1024, cols = 3072; /* 3 Mi elements: 12 MiB of float32 */
	int64_t sizes[] = { rows, cols }, rsizes[] = { 1, cols };
	tn_tensor *a = NULL, *r = NULL, *sum = NULL, *eq = NULL, *rem = NULL, *d = NULL, *mix = NULL;
	ck_assert_tn_ok(tn_empty(2, sizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &a));
	ck_assert_tn_ok(tn_empty(2, rsizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &r));
	float *pa = tn_tensor_data(a), *pr = tn_tensor_data(r);
	for (int64_t i = 0; i < rows * cols; i++)
		pa[i] = (float)(i % 1000) - 500.0f;
	for (int64_t j = 0; j < cols; j++)
		pr[j] = (float)(j % 7) + 1.0f;
	ck_assert_tn_ok(tn_add(a, r, tn_scalar_int(2), &sum));
	ck_assert_tn_ok(tn_remainder(a, r, &rem));
	ck_assert_tn_ok(tn_to(a, TN_FLOAT64, false, false, NULL, &d));
	ck_assert_tn_ok(tn_mul(d, r, &mix)); /* float64 result: r converted per chunk */
	const float *ps = tn_tensor_data(sum), *pm = tn_tensor_data(rem);
	const double *px = tn_tensor_data(mix);
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++) {
			int64_t k = i * cols + j;
			float want_rem = fmodf(pa[k], pr[j]);
			if (want_rem != 0 && (want_rem < 0) != (pr[j] < 0))
				want_rem += pr[j];
			if (ps[k] != pa[k] + 2 * pr[j] || pm[k] != want_rem ||
			    px[k] != (double)pa[k] * (double)pr[j])
				ck_abort_msg("element %lld: %g %g %g", (long long)k, ps[k], pm[k], px[k]);
		}
	/* 9 Mi bools, 9 MiB: the comparison's output is streamed too. */
	int64_t bsizes[] = { 3 * rows, cols };
	tn_tensor *big = NULL, *bigr = NULL;
	ck_assert_tn_ok(tn_empty(2, bsizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &big));
	float *pb = tn_tensor_data(big);
	for (int64_t i = 0; i < 3 * rows * cols; i++)
		pb[i] = (float)(i % 5);
	ck_assert_tn_ok(tn_view(r, 1, &cols, &bigr));
	ck_assert_tn_ok(tn_eq(big, bigr, &eq));
	const bool *pe = tn_tensor_data(eq);
	for (int64_t k = 0; k < 3 * rows * cols; k++)
		if (pe[k] != (pb[k] == pr[k % cols]))
			ck_abort_msg("eq element %lld", (long long)k);
	tn_tensor_unref(big);
	tn_tensor_unref(bigr);
	tn_tensor_unref(a);
	tn_tensor_unref(r);
	tn_tensor_unref(sum);
	tn_tensor_unref(eq);
	tn_tensor_unref(rem);
	tn_tensor_unref(d);
	tn_tensor_unref(mix);
}
END_TEST

static tn_tensor *half_from_bits(const uint16_t *bits, int64_t n)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	memcpy(tn_tensor_data(t), bits, (size_t)n * sizeof(uint16_t));
	return t;
}

static void assert_half_bits(const tn_tensor *t, const uint16_t *want, int64_t n, const char *what)
{
	ck_assert_int_eq(tn_tensor_numel(t), n);
	for (int64_t i = 0; i < n; i++) {
		int64_t idx = i;
		tn_scalar v;
		ck_assert_tn_ok(tn_tensor_get(t, 1, &idx, &v));
		uint16_t got = tn_half_from_float((float)v.v.d).bits;
		ck_assert_msg(got == want[i], "%s [%lld]: 0x%04x, PyTorch 0x%04x", what, (long long)i,
			      got, want[i]);
	}
}

/* float16 floor division as PyTorch's CPU loops compute it: the vector code (blocks of 32 of
 * a contiguous row, or with a broadcast scalar) rounds every step to Half, the scalar code
 * (the rest of a row, strided rows) keeps fmod and the quotient in float; under each
 * capability. */
START_TEST(test_half_floor_division_matches_pytorch)
{
	tn_test_force_capability(_i);
	const int64_t n = PAR_HFD_N, ns = (PAR_HFD_N + 1) / 2;
	tn_tensor *a = half_from_bits(par_hfd_a, n), *b = half_from_bits(par_hfd_b, n), *r, *as, *bs,
		  *seven;
	ck_assert_tn_ok(tn_div_mode(a, b, "floor", &r));
	assert_half_bits(r, par_hfd_contig, n, "contiguous");
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_slice(a, 0, 0, INT64_MAX, 2, &as));
	ck_assert_tn_ok(tn_slice(b, 0, 0, INT64_MAX, 2, &bs));
	ck_assert_tn_ok(tn_div_mode(as, bs, "floor", &r));
	assert_half_bits(r, par_hfd_strided, ns, "strided");
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_double(7.0), &(enum tn_dtype){ TN_FLOAT16 }, TN_CPU,
				&seven));
	ck_assert_tn_ok(tn_div_mode(a, seven, "floor", &r));
	assert_half_bits(r, par_hfd_seven, n, "by a 0-dim 7");
	tn_tensor_unref(r);
	tn_tensor *list[] = { a, b, as, bs, seven };
	for (int k = 0; k < 5; k++)
		tn_tensor_unref(list[k]);
}
END_TEST

/* @n values @v as a 1-d tensor of @dt, contiguous or (@stepped) every other element of a
 * twice longer one. */
static tn_tensor *values_1d(const double *v, int64_t n, enum tn_dtype dt, bool stepped)
{
	tn_tensor *f, *mem, *t;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f));
	memcpy(tn_tensor_data(f), v, (size_t)n * sizeof(double));
	int64_t m = stepped ? 2 * n : n;
	ck_assert_tn_ok(tn_zeros(1, &m, dt, TN_CPU, &mem));
	if (stepped)
		ck_assert_tn_ok(tn_slice(mem, 0, 0, INT64_MAX, 2, &t));
	else
		t = tn_tensor_ref(mem);
	ck_assert_tn_ok(tn_copy_(t, f, false));
	tn_tensor_unref(mem);
	tn_tensor_unref(f);
	return t;
}

/*
 * Issue 17, item 3: add and sub with alpha, bit for bit as PyTorch 1.13's CPU kernels (alpha
 * converted to the compute dtype first, with its overflow error; float32 and float64 rounded
 * once; 16-bit floats as ATen rounds them), functional and out=, in each CPU capability.
 */
START_TEST(test_alpha_matches_pytorch)
{
	tn_test_force_capability(_i);
	for (size_t k = 0; k < BP_NCASES; k++) {
		const struct bp_case *c = &bp_cases[k];
		const enum tn_dtype dt = (enum tn_dtype)c->dtype;
		const int64_t na = c->layout == 3 ? 1 : c->n, nb = c->layout == 2 ? 1 : c->n;
		tn_tensor *a = values_1d(c->a, na, dt, c->layout == 1);
		tn_tensor *b = values_1d(c->b, nb, dt, c->layout == 1), *r = NULL, *o;
		tn_scalar al = c->alpha_int ? tn_scalar_int(c->ialpha) : tn_scalar_double(c->alpha);
		const char *op = c->op ? "sub" : "add";
		int64_t n = c->n;
		tn_clear_error();
		int rc = c->op ? tn_sub(a, b, al, &r) : tn_add(a, b, al, &r);
		ck_assert_tn_ok(tn_zeros(1, &n, dt, TN_CPU, &o));
		if (!c->want) {
			ck_assert_msg(rc == c->code, "case %zu %s %s alpha %g: returned %d (%s)", k, op,
				      tn_dtype_name(dt), c->alpha, rc, tn_last_error());
			ck_assert_str_eq(tn_last_error(), c->msg);
			rc = c->op ? tn_sub_out(a, b, al, o) : tn_add_out(a, b, al, o);
			ck_assert_int_eq(rc, c->code);
			ck_assert_str_eq(tn_last_error(), c->msg);
		} else {
			ck_assert_msg(rc == 0, "case %zu %s: %s", k, op, tn_last_error());
			ck_assert_tn_ok(c->op ? tn_sub_out(a, b, al, o) : tn_add_out(a, b, al, o));
			tn_tensor *res[2] = { r, o };
			for (int f = 0; f < 2; f++) {
				tn_tensor *d;
				ck_assert_int_eq(tn_tensor_dtype(res[f]), dt);
				ck_assert_int_eq(tn_tensor_numel(res[f]), c->n);
				ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT,
							 &d));
				ck_assert_tn_ok(tn_copy_(d, res[f], false));
				const double *got = tn_tensor_data(d);
				for (int64_t i = 0; i < n; i++)
					ck_assert_msg(got[i] == c->want[i] ||
							      (got[i] != got[i] && c->want[i] != c->want[i]),
						      "case %zu %s %s layout %d alpha %g (%s): element %lld is "
						      "%.17g, PyTorch %.17g",
						      k, op, tn_dtype_name(dt), c->layout, c->alpha,
						      f ? "out=" : "functional", (long long)i, got[i],
						      c->want[i]);
				tn_tensor_unref(d);
			}
		}
		tn_tensor_unref(o);
		tn_tensor_unref(r);
		tn_tensor_unref(a);
		tn_tensor_unref(b);
	}
}
END_TEST

/* ---- 16-bit float rows through float32 vectors ---- */

/* The operators whose 16-bit rows run through float32 vectors (half_rows.h), with alpha 1 and
 * another alpha for add and sub (bfloat16's fused rows). */
enum { H_ADD, H_ADD_ALPHA, H_SUB, H_SUB_ALPHA, H_MUL, H_DIV, H_MAX, H_MIN, H_EQ, H_NE, H_LT,
       H_LE, H_GT, H_GE, H_NOPS };
static const char *const h_names[H_NOPS] = { "add",     "add(alpha=2.5)", "sub", "sub(alpha=3)",
					     "mul",     "div",            "maximum", "minimum",
					     "eq",      "ne",             "lt",  "le",
					     "gt",      "ge" };

static int h_run(int op, const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	switch (op) {
	case H_ADD:
		return tn_add(a, b, tn_scalar_int(1), r);
	case H_ADD_ALPHA:
		return tn_add(a, b, tn_scalar_double(2.5), r);
	case H_SUB:
		return tn_sub(a, b, tn_scalar_int(1), r);
	case H_SUB_ALPHA:
		return tn_sub(a, b, tn_scalar_int(3), r);
	case H_MUL:
		return tn_mul(a, b, r);
	case H_DIV:
		return tn_div(a, b, r);
	case H_MAX:
		return tn_maximum(a, b, r);
	case H_MIN:
		return tn_minimum(a, b, r);
	case H_EQ:
		return tn_eq(a, b, r);
	case H_NE:
		return tn_ne(a, b, r);
	case H_LT:
		return tn_lt(a, b, r);
	case H_LE:
		return tn_le(a, b, r);
	case H_GT:
		return tn_gt(a, b, r);
	default:
		return tn_ge(a, b, r);
	}
}

static float h_val(enum tn_dtype dt, uint16_t bits)
{
	return dt == TN_FLOAT16 ? tn_half_to_float((tn_half){ bits })
				: tn_bfloat16_to_float((tn_bfloat16){ bits });
}

static uint16_t h_bits(enum tn_dtype dt, float v)
{
	return dt == TN_FLOAT16 ? tn_half_from_float(v).bits : tn_bfloat16_from_float(v).bits;
}

static bool h_nan(enum tn_dtype dt, uint16_t bits)
{
	return (bits & 0x7fff) > (dt == TN_FLOAT16 ? 0x7c00 : 0x7f80);
}

/*
 * The kernels' formulas, element by element: float arithmetic rounded once; with alpha,
 * float16 rounds alpha * y first (c10::Half), bfloat16 rounds once in the whole blocks of 32
 * of a contiguous or broadcast row (@fused, ATen's Vectorized<BFloat16> fmadd) and as float16
 * elsewhere; maximum and minimum give NaN for a NaN input, else the larger (smaller) or, between
 * equals, the second; comparisons 0 or 1.
 */
static uint16_t h_ref(int op, enum tn_dtype dt, uint16_t xb, uint16_t yb, bool fused)
{
	const float x = h_val(dt, xb), y = h_val(dt, yb);
	const float al = op == H_ADD_ALPHA ? 2.5f : -3.0f;
	switch (op) {
	case H_ADD:
		return h_bits(dt, x + y);
	case H_SUB:
		return h_bits(dt, x - y);
	case H_ADD_ALPHA:
	case H_SUB_ALPHA:
		return h_bits(dt, fused ? fmaf(al, y, x) : x + h_val(dt, h_bits(dt, al * y)));
	case H_MUL:
		return h_bits(dt, x * y);
	case H_DIV:
		return h_bits(dt, x / y);
	case H_MAX:
		return h_bits(dt, x != x || y != y ? NAN : x > y ? x : y);
	case H_MIN:
		return h_bits(dt, x != x || y != y ? NAN : x < y ? x : y);
	case H_EQ:
		return x == y;
	case H_NE:
		return x != y;
	case H_LT:
		return x < y;
	case H_LE:
		return x <= y;
	case H_GT:
		return x > y;
	default:
		return x >= y;
	}
}

/* @n elements of @dt with bits @bits[i * step % 65536 + off], contiguous or (@stepped) every
 * other element of a twice longer tensor. */
static tn_tensor *h_tensor(enum tn_dtype dt, int64_t n, int64_t step, int64_t off, bool stepped)
{
	tn_tensor *mem, *t;
	int64_t m = stepped ? 2 * n : n;
	ck_assert_tn_ok(tn_zeros(1, &m, dt, TN_CPU, &mem));
	uint16_t *p = tn_tensor_data(mem);
	for (int64_t i = 0; i < n; i++)
		p[stepped ? 2 * i : i] = (uint16_t)((i * step + off) & 0xffff);
	if (!stepped)
		return mem;
	ck_assert_tn_ok(tn_slice(mem, 0, 0, INT64_MAX, 2, &t));
	tn_tensor_unref(mem);
	return t;
}

/* The bits of element @i of 1-d @t (16-bit or bool), contiguous. */
static uint16_t h_get(const tn_tensor *t, int64_t i)
{
	const char *p = tn_tensor_data(t);
	if (tn_tensor_dtype(t) == TN_BOOL)
		return ((const bool *)p)[i];
	return ((const uint16_t *)p)[i];
}

/*
 * Every operator above on float16 and bfloat16, bit for bit against h_ref (NaN results as NaN),
 * in each CPU capability: rows of every length up to 70 and a few long ones (past the vector
 * widths, with tails of every length; 65,536 x every bit pattern, past the grain size), with
 * both inputs contiguous (every pattern against a permutation of them), either one a broadcast
 * scalar (zeros of both signs, 1.5, infinity, a NaN with payload, the smallest subnormal), or
 * both every other element (the strided rows).
 */
START_TEST(test_16bit_rows_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	static const int64_t lens[] = { 100, 255, 1000, 4099, 32768, 65536 + 7 };
	const int nlen = 70 + (int)(sizeof(lens) / sizeof(lens[0]));
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16 };
	static const uint16_t scal[2][6] = { { 0x0000, 0x8000, 0x3e00, 0x7c00, 0xfe01, 0x0001 },
					     { 0x0000, 0x8000, 0x3fc0, 0x7f80, 0xffc1, 0x0001 } };
	for (int d = 0; d < 2; d++) {
		const enum tn_dtype dt = dts[d];
		for (int li = 0; li < nlen; li++) {
			const int64_t n = li < 70 ? li + 1 : lens[li - 70];
			/* Past the grain size the rows are split between threads, and where a
			 * bfloat16 row's blocks of 32 start depends on the split. */
			const bool one_call = n <= 32768;
			for (int layout = 0; layout < 4; layout++) {
				/* 0 contiguous, 1 b broadcast, 2 a broadcast, 3 strided */
				const int nsc = layout == 1 || layout == 2 ? (n > 4099 ? 1 : 6) : 1;
				for (int sc = 0; sc < nsc; sc++) {
					const int64_t one = 1;
					tn_tensor *a, *b;
					if (layout == 2) {
						ck_assert_tn_ok(tn_empty(1, &one, dt, TN_CPU,
									 TN_CONTIGUOUS_FORMAT, &a));
						*(uint16_t *)tn_tensor_data(a) = scal[d][sc];
					} else {
						a = h_tensor(dt, n, 40503, 0, layout == 3);
					}
					if (layout == 1) {
						ck_assert_tn_ok(tn_empty(1, &one, dt, TN_CPU,
									 TN_CONTIGUOUS_FORMAT, &b));
						*(uint16_t *)tn_tensor_data(b) = scal[d][sc];
					} else {
						b = h_tensor(dt, n, 7919, 12345, layout == 3);
					}
					const uint16_t *pa = tn_tensor_data(a), *pb = tn_tensor_data(b);
					const int64_t sa = layout == 2 ? 0 : layout == 3 ? 2 : 1;
					const int64_t sb = layout == 1 ? 0 : layout == 3 ? 2 : 1;
					for (int op = 0; op < H_NOPS; op++) {
						const bool alpha = op == H_ADD_ALPHA || op == H_SUB_ALPHA;
						if (alpha && dt == TN_BFLOAT16 && !one_call)
							continue;
						tn_tensor *r;
						ck_assert_msg(h_run(op, a, b, &r) == 0, "%s: %s", h_names[op],
							      tn_last_error());
						const bool cmp = op >= H_EQ;
						for (int64_t i = 0; i < n; i++) {
							const uint16_t x = pa[i * sa], y = pb[i * sb];
							const bool fused = alpha && dt == TN_BFLOAT16 &&
									   layout != 3 && i < n / 32 * 32;
							const uint16_t w = h_ref(op, dt, x, y, fused);
							const uint16_t g = h_get(r, i);
							ck_assert_msg(g == w || (!cmp && h_nan(dt, g) &&
										 h_nan(dt, w)),
								      "%s %s(0x%04x, 0x%04x) under %s, layout "
								      "%d, n %lld, element %lld: 0x%04x, "
								      "expected 0x%04x",
								      h_names[op], tn_dtype_name(dt), x, y,
								      tn_cpu_capability_name(want), layout,
								      (long long)n, (long long)i, g, w);
						}
						tn_tensor_unref(r);
					}
					tn_tensor_unref(a);
					tn_tensor_unref(b);
				}
			}
		}
	}
}
END_TEST

/*
 * 16-bit outputs past TN_STREAM_BYTES, written with streaming stores from their first aligned
 * element: add, sub, mul and div of float16 and bfloat16 into an out= tensor starting off the
 * vector alignment, with the right operand contiguous or broadcast; every element against
 * h_ref, in each CPU capability.
 */
START_TEST(test_16bit_streamed_outputs)
{
	tn_test_force_capability(_i);
	static const int hops[] = { H_ADD, H_SUB, H_MUL, H_DIV };
	int64_t n = ((int64_t)8 << 20) / 2 + 37, n1 = n + 1, one = 1;
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16 };
	for (int d = 0; d < 2; d++) {
		const enum tn_dtype dt = dts[d];
		tn_tensor *a = h_tensor(dt, n, 40503, 0, false), *b = h_tensor(dt, n, 7919, 1, false);
		tn_tensor *y, *big, *out;
		ck_assert_tn_ok(tn_empty(1, &one, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &y));
		*(uint16_t *)tn_tensor_data(y) = dt == TN_FLOAT16 ? 0x3e00 : 0x3fc0; /* 1.5 */
		ck_assert_tn_ok(tn_zeros(1, &n1, dt, TN_CPU, &big));
		ck_assert_tn_ok(tn_slice(big, 0, 1, n1, 1, &out)); /* 2 bytes past an alignment */
		const uint16_t *pa = tn_tensor_data(a), *pb = tn_tensor_data(b),
			       *po = tn_tensor_data(out);
		for (int k = 0; k < 4; k++) {
			for (int bc = 0; bc < 2; bc++) {
				const tn_tensor *rhs = bc ? y : b;
				const int op = hops[k];
				const tn_scalar al = tn_scalar_int(1);
				int rc = op == H_ADD   ? tn_add_out(a, rhs, al, out)
					 : op == H_SUB ? tn_sub_out(a, rhs, al, out)
					 : op == H_MUL ? tn_mul_out(a, rhs, out)
						       : tn_div_out(a, rhs, out);
				ck_assert_tn_ok(rc);
				const uint16_t yb = *(const uint16_t *)tn_tensor_data(y);
				for (int64_t i = 0; i < n; i++) {
					const uint16_t w = h_ref(op, dt, pa[i], bc ? yb : pb[i], false);
					if (po[i] != w && !(h_nan(dt, po[i]) && h_nan(dt, w)))
						ck_abort_msg("%s %s, broadcast %d, element %lld: 0x%04x, "
							     "expected 0x%04x",
							     h_names[op], tn_dtype_name(dt), bc,
							     (long long)i, po[i], w);
				}
			}
		}
		tn_tensor *list[] = { a, b, y, big, out };
		unref_all(list, 5);
	}
}
END_TEST

/*
 * pow and atan2 of float16 and bfloat16 rows, every bit pattern against a permutation of them,
 * in each CPU capability: bfloat16's contiguous and broadcast rows run SLEEF in whole blocks of
 * 32 (within one bfloat16 ulp of powf's and atan2f's rounding; sign, infinities and NaN exact)
 * and the scalar code (powf, atan2f, rounded: bit for bit) on the last n % 32 elements and
 * strided rows; float16 atan2 is SLEEF's on every contiguous or broadcast element (as
 * float32's rows), float16 pow powf's everywhere (bit for bit).
 */
START_TEST(test_16bit_pow_atan2_under_each_capability)
{
	enum tn_cpu_capability want = tn_test_force_capability(_i);
	static const int64_t lens[] = { 1, 5, 16, 31, 32, 33, 63, 95, 100, 1000, 32768 };
	static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16 };
	static const uint16_t scal[2] = { 0x3e00, 0x3fc0 }; /* 1.5 */
	for (int d = 0; d < 2; d++) {
		const enum tn_dtype dt = dts[d];
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			const int64_t n = lens[li], one = 1;
			for (int layout = 0; layout < 4; layout++) {
				tn_tensor *a, *b;
				if (layout == 2) {
					ck_assert_tn_ok(tn_empty(1, &one, dt, TN_CPU, TN_CONTIGUOUS_FORMAT,
								 &a));
					*(uint16_t *)tn_tensor_data(a) = scal[d];
				} else {
					a = h_tensor(dt, n, 40503, 0, layout == 3);
				}
				if (layout == 1) {
					ck_assert_tn_ok(tn_empty(1, &one, dt, TN_CPU, TN_CONTIGUOUS_FORMAT,
								 &b));
					*(uint16_t *)tn_tensor_data(b) = scal[d];
				} else {
					b = h_tensor(dt, n, 7919, 12345, layout == 3);
				}
				const uint16_t *pa = tn_tensor_data(a), *pb = tn_tensor_data(b);
				const int64_t sa = layout == 2 ? 0 : layout == 3 ? 2 : 1;
				const int64_t sb = layout == 1 ? 0 : layout == 3 ? 2 : 1;
				for (int atan = 0; atan < 2; atan++) {
					tn_tensor *r;
					ck_assert_tn_ok(atan ? tn_atan2(a, b, &r) : tn_pow(a, b, &r));
					const uint16_t *pr = tn_tensor_data(r);
					for (int64_t i = 0; i < n; i++) {
						const uint16_t x = pa[i * sa], y = pb[i * sb];
						const float fx = h_val(dt, x), fy = h_val(dt, y);
						const uint16_t w = h_bits(dt, atan ? atan2f(fx, fy)
										   : powf(fx, fy));
						const bool sleef =
							layout != 3 &&
							(dt == TN_BFLOAT16 ? i < n / 32 * 32 : atan);
						const bool ok = pr[i] == w ||
								(h_nan(dt, pr[i]) && h_nan(dt, w)) ||
								(sleef && !h_nan(dt, w) &&
								 (pr[i] ^ w) < 0x8000 &&
								 abs((int)pr[i] - (int)w) <= 1);
						ck_assert_msg(ok,
							      "%s %s(0x%04x, 0x%04x) under %s, layout %d, "
							      "n %lld, element %lld: 0x%04x, expected "
							      "0x%04x%s",
							      atan ? "atan2" : "pow", tn_dtype_name(dt), x,
							      y, tn_cpu_capability_name(want), layout,
							      (long long)n, (long long)i, pr[i], w,
							      sleef ? " within 1 ulp" : "");
					}
					tn_tensor_unref(r);
				}
				tn_tensor_unref(a);
				tn_tensor_unref(b);
			}
		}
	}
}
END_TEST

static Suite *binary_suite(void)
{
	Suite *s = suite_create("binary");
	TCase *tc = tcase_create("ops");
	tcase_add_test(tc, test_pairs_match_pytorch);
	tcase_add_test(tc, test_scalars_match_pytorch);
	tcase_add_test(tc, test_float_specials_match_pytorch);
	tcase_add_test(tc, test_int_edges_match_pytorch);
	tcase_add_test(tc, test_pow_numbers_match_pytorch);
	tcase_add_test(tc, test_zero_division);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_logical_outputs);
	tcase_add_test(tc, test_signed_zero_ties);
	tcase_add_test(tc, test_streamed_outputs);
	tcase_add_loop_test(tc, test_kernels_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_half_floor_division_matches_pytorch, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_alpha_matches_pytorch, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_16bit_rows_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_16bit_streamed_outputs, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_16bit_pow_atan2_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(binary_suite)
