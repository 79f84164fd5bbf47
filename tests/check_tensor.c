/* SPDX-License-Identifier: MIT */
/*
 * Tensor factories, accessors and element access, arange against PyTorch goldens, and the
 * fault-injection loop: every constructor is run with allocation N failing for N = 1, 2, ...
 * until it succeeds, and must fail cleanly with nothing leaked each time.
 */
#include <float.h>
#include <math.h>

#include "testutil.h"
#include "golden/arange_golden.h"
#include "golden/parity_golden.h"

START_TEST(test_empty_geometry)
{
	struct tn_baseline b = tn_test_baseline();
	int64_t sizes[] = { 2, 3, 4 };
	tn_tensor *t;

	ck_assert_tn_ok(tn_empty(3, sizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_int_eq(tn_tensor_ndim(t), 3);
	ck_assert_int_eq(tn_tensor_numel(t), 24);
	ck_assert_int_eq(tn_tensor_strides(t)[0], 12);
	ck_assert_int_eq(tn_tensor_strides(t)[1], 4);
	ck_assert_int_eq(tn_tensor_strides(t)[2], 1);
	ck_assert_int_eq(tn_tensor_storage_offset(t), 0);
	ck_assert_int_eq(tn_tensor_dtype(t), TN_FLOAT32);
	ck_assert_uint_eq(tn_tensor_itemsize(t), 4);
	ck_assert_uint_eq(tn_tensor_nbytes(t), 96);
	ck_assert_uint_eq(tn_storage_nbytes(tn_tensor_storage(t)), 96);
	ck_assert_int_eq(tn_tensor_device(t).type, TN_DEVICE_CPU);
	ck_assert(tn_tensor_is_contiguous(t));
	ck_assert_ptr_eq(tn_tensor_data(t), tn_storage_data(tn_tensor_storage(t)));
	int64_t v;
	ck_assert_tn_ok(tn_tensor_size(t, -1, &v));
	ck_assert_int_eq(v, 4);
	ck_assert_tn_ok(tn_tensor_stride(t, -3, &v));
	ck_assert_int_eq(v, 12);
	ck_assert_tn_error(tn_tensor_size(t, 3, &v), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
	ck_assert_tn_error(tn_tensor_stride(t, -4, &v), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-3, 2], but got -4)");
	tn_tensor_unref(t);

	/* 0-dim: one element, no sizes. */
	ck_assert_tn_ok(tn_empty(0, NULL, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_int_eq(tn_tensor_numel(t), 1);
	ck_assert_tn_error(tn_tensor_size(t, 0, &v), TN_ERANGE,
			   "dimension specified as 0 but tensor has no dimensions");
	tn_tensor_unref(t);

	/* Size-0 dims: no bytes, still valid and contiguous; strides as PyTorch's. */
	int64_t z[] = { 2, 0, 3 };
	ck_assert_tn_ok(tn_empty(3, z, TN_INT16, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_int_eq(tn_tensor_numel(t), 0);
	ck_assert_uint_eq(tn_storage_nbytes(tn_tensor_storage(t)), 0);
	ck_assert_int_eq(tn_tensor_strides(t)[0], 3);
	ck_assert_int_eq(tn_tensor_strides(t)[1], 3);
	ck_assert(tn_tensor_is_contiguous(t));
	tn_tensor_unref(t);
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_many_dims)
{
	int64_t sizes[TN_MAX_DIMS + 1];
	tn_tensor *t;
	for (int i = 0; i <= TN_MAX_DIMS; i++)
		sizes[i] = (i % 3) ? 1 : 2;
	ck_assert_tn_ok(tn_zeros(TN_MAX_DIMS, sizes, TN_UINT8, TN_CPU, &t));
	ck_assert_int_eq(tn_tensor_ndim(t), TN_MAX_DIMS);
	ck_assert_int_eq(tn_tensor_numel(t), 1LL << 22);
	ck_assert_int_eq(tn_tensor_strides(t)[TN_MAX_DIMS - 1], 1);
	tn_tensor_unref(t);
	ck_assert_tn_error(tn_empty(TN_MAX_DIMS + 1, sizes, TN_UINT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EINVAL,
			   "number of dimensions 65 is outside [0, 64]");
	ck_assert_tn_error(tn_empty(-1, sizes, TN_UINT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EINVAL,
			   "number of dimensions -1 is outside [0, 64]");
}
END_TEST

START_TEST(test_bad_factory_arguments)
{
	tn_tensor *t = NULL;
	int64_t huge[] = { INT64_C(1) << 32, INT64_C(1) << 32 };
	int64_t big[] = { INT64_C(1) << 62 };
	int64_t sizes[] = { 2, 2 };

	ck_assert_tn_error(tn_empty(2, huge, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EOVERFLOW,
			   "Storage size calculation overflowed with sizes=[4294967296, 4294967296]");
	ck_assert_tn_error(tn_empty(1, big, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EOVERFLOW,
			   "Storage size calculation overflowed with sizes=[4611686018427387904]");
	ck_assert_tn_error(tn_empty(2, NULL, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EINVAL,
			   "NULL sizes for 2 dimensions");
	ck_assert_tn_error(tn_empty(2, sizes, (enum tn_dtype)42, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EINVAL, "empty: invalid dtype 42");
	ck_assert_tn_error(tn_empty(2, sizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, NULL), TN_EINVAL, "empty: NULL ret_tensor");
	int64_t neg_stride[] = { 1, -1 };
	ck_assert_tn_error(tn_empty_strided(2, sizes, 2, neg_stride, TN_FLOAT32, TN_CPU, &t), TN_EOVERFLOW,
			   "Storage size calculation overflowed with sizes=[2, 2] and strides=[1, -1]");
	ck_assert_tn_error(tn_empty_strided(2, sizes, 2, NULL, TN_FLOAT32, TN_CPU, &t), TN_EINVAL,
			   "empty_strided: NULL strides");
	int64_t wide[] = { 0, INT64_MAX, INT64_MAX };
	ck_assert_tn_error(tn_empty(3, wide, TN_INT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EOVERFLOW,
			   "contiguous strides overflow int64 for sizes=[0, 9223372036854775807, "
			   "9223372036854775807]");
	ck_assert_ptr_null(t); /* never written on failure */
	/* An allocation the machine cannot satisfy fails with ENOMEM, not a crash. */
	int64_t too_much[] = { INT64_C(1) << 59 };
	ck_assert_int_eq(tn_empty(1, too_much, TN_INT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_ENOMEM);
}
END_TEST

START_TEST(test_empty_strided_storage_size)
{
	int64_t sizes[] = { 2, 3 }, strides[] = { 1, 2 };
	tn_tensor *t;
	ck_assert_tn_ok(tn_empty_strided(2, sizes, 2, strides, TN_FLOAT64, TN_CPU, &t));
	/* Furthest element (1, 2) is at 1 + 4 = 5: storage of 6 elements. */
	ck_assert_uint_eq(tn_storage_nbytes(tn_tensor_storage(t)), 48);
	ck_assert(!tn_tensor_is_contiguous(t));
	tn_tensor_unref(t);
	int64_t cl_sizes[] = { 2, 3, 4, 5 }, cl_strides[] = { 60, 1, 15, 3 };
	ck_assert_tn_ok(tn_empty_strided(4, cl_sizes, 4, cl_strides, TN_FLOAT32, TN_CPU, &t));
	ck_assert(tn_tensor_is_contiguous_as(t, TN_CHANNELS_LAST));
	ck_assert(!tn_tensor_is_contiguous_as(t, TN_CONTIGUOUS_FORMAT));
	ck_assert(!tn_tensor_is_contiguous_as(t, TN_CHANNELS_LAST_3D));
	tn_tensor_unref(t);
	int64_t cl3_sizes[] = { 2, 3, 4, 5, 6 }, cl3_strides[] = { 360, 1, 90, 18, 3 };
	ck_assert_tn_ok(tn_empty_strided(5, cl3_sizes, 5, cl3_strides, TN_FLOAT32, TN_CPU, &t));
	ck_assert(tn_tensor_is_contiguous_as(t, TN_CHANNELS_LAST_3D));
	ck_assert(!tn_tensor_is_contiguous_as(t, TN_CHANNELS_LAST));
	tn_tensor_unref(t);
}
END_TEST

START_TEST(test_full_every_dtype)
{
	int64_t sizes[] = { 3, 5 };
	for (int d = 0; d < TN_NUM_DTYPES; d++) {
		tn_tensor *t;
		ck_assert_tn_ok(tn_full(2, sizes, tn_scalar_int(1), &(enum tn_dtype){ (enum tn_dtype)d }, TN_CPU, &t));
		for (int64_t i = 0; i < 3; i++) {
			for (int64_t j = 0; j < 5; j++) {
				int64_t idx[] = { i, j };
				tn_scalar s;
				double v;
				ck_assert_tn_ok(tn_tensor_get(t, 2, idx, &s));
				ck_assert_tn_ok(tn_scalar_to_double(s, &v));
				ck_assert_double_eq(v, 1.0);
			}
		}
		tn_tensor_unref(t);
		ck_assert_tn_ok(tn_zeros(2, sizes, (enum tn_dtype)d, TN_CPU, &t));
		const unsigned char *p = tn_tensor_data(t);
		for (size_t i = 0; i < tn_tensor_nbytes(t); i++)
			ck_assert_int_eq(p[i], 0);
		tn_tensor_unref(t);
	}
	tn_tensor *t;
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(-2.75), &(enum tn_dtype){ TN_BFLOAT16 }, TN_CPU, &t));
	int64_t i2[] = { 2 };
	ck_assert_double_eq(tn_test_get_double(t, i2), -2.75);
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_int(INT64_MIN), &(enum tn_dtype){ TN_INT64 }, TN_CPU, &t));
	ck_assert_int_eq(tn_test_get_int(t, i2), INT64_MIN);
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(2.9), &(enum tn_dtype){ TN_INT8 }, TN_CPU, &t));
	ck_assert_int_eq(tn_test_get_int(t, i2), 2);
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(-INFINITY), &(enum tn_dtype){ TN_FLOAT16 }, TN_CPU, &t));
	ck_assert(isinf(tn_test_get_double(t, i2)));
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(0.5), &(enum tn_dtype){ TN_BOOL }, TN_CPU, &t));
	tn_scalar s;
	ck_assert_tn_ok(tn_tensor_get(t, 1, i2, &s));
	ck_assert_int_eq(s.kind, TN_SCALAR_BOOL);
	ck_assert(s.v.b);
	tn_tensor_unref(t);
}
END_TEST

START_TEST(test_full_overflow)
{
	int64_t sizes[] = { 2 };
	tn_tensor *t = NULL;
	struct tn_baseline b = tn_test_baseline();
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_int(256), &(enum tn_dtype){ TN_UINT8 }, TN_CPU, &t), TN_EOVERFLOW,
			   "value cannot be converted to type uint8_t without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_int(-256), &(enum tn_dtype){ TN_UINT8 }, TN_CPU, &t), TN_EOVERFLOW,
			   "value cannot be converted to type uint8_t without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_int(-129), &(enum tn_dtype){ TN_INT8 }, TN_CPU, &t), TN_EOVERFLOW,
			   "value cannot be converted to type int8_t without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_double(2147483648.0), &(enum tn_dtype){ TN_INT32 }, TN_CPU, &t),
			   TN_EOVERFLOW, "value cannot be converted to type int without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_double(NAN), &(enum tn_dtype){ TN_INT64 }, TN_CPU, &t), TN_EOVERFLOW,
			   "value cannot be converted to type int64_t without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_double(65505.0), &(enum tn_dtype){ TN_FLOAT16 }, TN_CPU, &t),
			   TN_EOVERFLOW, "value cannot be converted to type at::Half without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_double(1e39), &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &t), TN_EOVERFLOW,
			   "value cannot be converted to type float without overflow");
	ck_assert_tn_error(tn_full(1, sizes, tn_scalar_double(-1e39), &(enum tn_dtype){ TN_BFLOAT16 }, TN_CPU, &t),
			   TN_EOVERFLOW, "value cannot be converted to type at::BFloat16 without overflow");
	ck_assert_ptr_null(t);
	ck_assert_no_leak(b);
	/* Edges that fit. */
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(-2147483648.0), &(enum tn_dtype){ TN_INT32 }, TN_CPU, &t));
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(65504.0), &(enum tn_dtype){ TN_FLOAT16 }, TN_CPU, &t));
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(NAN), &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &t));
	tn_tensor_unref(t);
}
END_TEST

START_TEST(test_arange_golden)
{
	size_t n = sizeof(arange_golden) / sizeof(arange_golden[0]);
	for (size_t k = 0; k < n; k++) {
		const struct arange_case *c = &arange_golden[k];
		enum tn_dtype dt;
		tn_tensor *t;
		ck_assert_tn_ok(tn_dtype_from_name(c->result_dtype, &dt));
		tn_scalar a = c->start_is_double ? tn_scalar_double(c->start) : tn_scalar_int(c->istart);
		tn_scalar e = c->end_is_double ? tn_scalar_double(c->end) : tn_scalar_int(c->iend);
		tn_scalar s = c->step_is_double ? tn_scalar_double(c->step) : tn_scalar_int(c->istep);
		int r = tn_arange(a, e, s, &(enum tn_dtype){ dt }, TN_CPU, &t);
		if (c->error) {
			ck_assert_msg(r < 0, "%s: expected error '%s'", c->name, c->error);
			ck_assert_msg(strcmp(tn_last_error(), c->error) == 0, "%s: '%s' vs torch '%s'",
				      c->name, tn_last_error(), c->error);
			continue;
		}
		ck_assert_msg(r == 0, "%s: %s", c->name, tn_last_error());
		ck_assert_msg(tn_tensor_numel(t) == c->numel, "%s: numel %lld, torch %lld", c->name,
			      (long long)tn_tensor_numel(t), (long long)c->numel);
		double eps = dt == TN_FLOAT32 ? FLT_EPSILON : dt == TN_FLOAT16 ? 0x1p-10
			   : dt == TN_BFLOAT16 ? 0x1p-7 : DBL_EPSILON;
		for (int64_t i = 0; i < c->numel; i++) {
			if (c->ivalues) {
				ck_assert_msg(tn_test_get_int(t, &i) == c->ivalues[i], "%s[%lld]", c->name,
					      (long long)i);
				continue;
			}
			double got = tn_test_get_double(t, &i);
			if (c->approx) {
				/* torch's vectorised kernel rounds differently (golden header). */
				double tol = eps * (fabs(c->start) + fabs((double)i * c->step));
				ck_assert_msg(fabs(got - c->values[i]) <= tol, "%s[%lld]: %.17g vs %.17g",
					      c->name, (long long)i, got, c->values[i]);
			} else {
				ck_assert_msg(got == c->values[i], "%s[%lld]: %.17g vs torch %.17g",
					      c->name, (long long)i, got, c->values[i]);
			}
		}
		tn_tensor_unref(t);
	}
}
END_TEST

START_TEST(test_arange_errors)
{
	tn_tensor *t;
	ck_assert_tn_error(tn_arange(tn_scalar_double(0), tn_scalar_double(INFINITY), tn_scalar_double(1), &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &t),
			   TN_EINVAL, "unsupported range: 0 -> inf");
	ck_assert_tn_error(tn_arange(tn_scalar_int(0), tn_scalar_int(4), tn_scalar_int(1), &(enum tn_dtype){ TN_BOOL }, TN_CPU, &t),
			   TN_ENOTSUP, "\"arange_cpu\" not implemented for 'bool'");
	ck_assert_tn_error(tn_arange(tn_scalar_double(0), tn_scalar_double(1e300), tn_scalar_double(1e-300), &(enum tn_dtype){ TN_FLOAT64 }, TN_CPU, &t),
			   TN_EOVERFLOW, "invalid size, possible overflow?");
}
END_TEST

START_TEST(test_tensor_new_bounds)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t sizes[] = { 2, 3 }, strides[] = { 3, 1 };

	ck_assert_tn_ok(tn_storage_new((tn_device){ TN_DEVICE_CPU, 0 }, 20, &s));
	ck_assert_tn_error(tn_tensor_new(s, 0, 2, sizes, strides, TN_FLOAT32, &t), TN_ERANGE,
			   "setStorage: sizes [2, 3], strides [3, 1], storage offset 0, and itemsize 4 "
			   "requiring a storage size of 24 are out of bounds for storage of size 20");
	int64_t ok_sizes[] = { 5 };
	ck_assert_tn_ok(tn_tensor_new(s, 0, 1, ok_sizes, NULL, TN_FLOAT32, &t));
	tn_tensor_unref(t);
	ck_assert_tn_error(tn_tensor_new(s, 1, 1, ok_sizes, NULL, TN_FLOAT32, &t), TN_ERANGE,
			   "setStorage: sizes [5], strides [1], storage offset 1, and itemsize 4 "
			   "requiring a storage size of 24 are out of bounds for storage of size 20");
	ck_assert_tn_error(tn_tensor_new(s, -1, 1, ok_sizes, NULL, TN_INT8, &t), TN_EINVAL,
			   "Tensor: invalid storage offset -1");
	int64_t wrap[] = { 2 }, wrap_stride[] = { INT64_MAX };
	ck_assert_tn_error(tn_tensor_new(s, 0, 1, wrap, wrap_stride, TN_INT8, &t), TN_EOVERFLOW,
			   "Storage size calculation overflowed with sizes=[2] and strides="
			   "[9223372036854775807] (storage offset 0)");
	ck_assert_tn_error(tn_tensor_new(s, INT64_MAX, 1, ok_sizes, NULL, TN_INT8, &t), TN_EOVERFLOW,
			   "Storage size calculation overflowed with sizes=[5] and strides=[1] "
			   "(storage offset 9223372036854775807)");
	/* Zero elements reach no byte: any offset is accepted, as in PyTorch. */
	int64_t empty[] = { 0 };
	ck_assert_tn_ok(tn_tensor_new(s, 1000, 1, empty, NULL, TN_FLOAT32, &t));
	tn_tensor_unref(t);
	/* Stride 0 makes many elements share one byte. */
	int64_t bc[] = { 1000000 }, bc_stride[] = { 0 };
	ck_assert_tn_ok(tn_tensor_new(s, 4, 1, bc, bc_stride, TN_FLOAT32, &t));
	ck_assert_int_eq(tn_tensor_numel(t), 1000000);
	tn_tensor_unref(t);
	tn_storage_unref(s);
}
END_TEST

START_TEST(test_get_set_item)
{
	tn_tensor *t;
	int64_t sizes[] = { 2, 3 };
	ck_assert_tn_ok(tn_zeros(2, sizes, TN_INT16, TN_CPU, &t));
	int64_t idx[] = { 1, -1 };
	ck_assert_tn_ok(tn_tensor_set(t, 2, idx, tn_scalar_int(-300)));
	int64_t same[] = { 1, 2 };
	ck_assert_int_eq(tn_test_get_int(t, same), -300);
	ck_assert_int_eq(((int16_t *)tn_tensor_data(t))[5], -300);
	int64_t bad[] = { 2, 0 };
	ck_assert_tn_error(tn_tensor_set(t, 2, bad, tn_scalar_int(1)), TN_ERANGE,
			   "index 2 is out of bounds for dimension 0 with size 2");
	int64_t bad2[] = { 0, -4 };
	ck_assert_tn_error(tn_tensor_get(t, 2, bad2, &(tn_scalar){ 0 }), TN_ERANGE,
			   "index -4 is out of bounds for dimension 1 with size 3");
	ck_assert_tn_error(tn_tensor_set(t, 2, idx, tn_scalar_int(40000)), TN_EOVERFLOW,
			   "value cannot be converted to type int16_t without overflow");
	ck_assert_int_eq(tn_test_get_int(t, same), -300); /* unchanged */
	ck_assert_tn_error(tn_tensor_get(t, 2, NULL, &(tn_scalar){ 0 }), TN_EINVAL,
			   "tn_tensor_get: NULL index");
	ck_assert_tn_error(tn_tensor_get(t, 1, idx, &(tn_scalar){ 0 }), TN_EINVAL,
			   "tn_tensor_get: 1 indices for a tensor of 2 dimensions");
	ck_assert_tn_error(tn_tensor_set(t, 3, idx, tn_scalar_int(0)), TN_EINVAL,
			   "tn_tensor_set: 3 indices for a tensor of 2 dimensions");
	ck_assert_tn_error(tn_tensor_item(t, &(tn_scalar){ 0 }), TN_EINVAL,
			   "a Tensor with 6 elements cannot be converted to Scalar");
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_double(1.5), &(enum tn_dtype){ TN_FLOAT64 }, TN_CPU, &t));
	tn_scalar s;
	ck_assert_tn_ok(tn_tensor_item(t, &s));
	ck_assert_int_eq(s.kind, TN_SCALAR_DOUBLE);
	ck_assert_double_eq(s.v.d, 1.5);
	tn_tensor_unref(t);
}
END_TEST

START_TEST(test_bad_tensor_handles)
{
	tn_tensor *t, *v;
	int64_t one = 1;
	ck_assert_int_eq(tn_tensor_ndim(NULL), -1);
	ck_assert_ptr_null(tn_tensor_sizes(NULL));
	ck_assert_ptr_null(tn_tensor_ref(NULL));
	ck_assert_ptr_null(tn_tensor_unref(NULL));
	ck_assert_int_eq(tn_tensor_dtype(NULL), TN_NUM_DTYPES);
	ck_assert_tn_error(tn_view(NULL, 1, &one, &v), TN_EBADF,
			   "view: not a live tensor handle (NULL, freed or foreign)");
	/* Foreign: a storage passed as a tensor. */
	tn_storage *s;
	ck_assert_tn_ok(tn_storage_new((tn_device){ TN_DEVICE_CPU, 0 }, 8, &s));
	ck_assert_int_eq(tn_tensor_ndim((tn_tensor *)s), -1);
	ck_assert_int_eq(tn_transpose((tn_tensor *)s, 0, 0, &v), TN_EBADF);
	ck_assert_ptr_null(tn_tensor_unref((tn_tensor *)s));
	ck_assert_int_eq(tn_storage_use_count(s), 1);
	tn_storage_unref(s);
	/* Freed. */
	ck_assert_tn_ok(tn_empty(1, &one, TN_INT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	tn_tensor_unref(t);
	ck_assert_int_eq(tn_tensor_numel(t), -1);
	ck_assert_int_eq(tn_select(t, 0, 0, &v), TN_EBADF);
	ck_assert_int_eq(tn_tensor_repr(t, &(char *){ NULL }), TN_EBADF);
	ck_assert_ptr_null(tn_tensor_unref(t)); /* no double free */
}
END_TEST

/* ---- fault injection ---------------------------------------------------------------------- */

static tn_tensor *fixture;

typedef int (*ctor_fn)(tn_tensor **ret);

static int c_empty(tn_tensor **r) { int64_t s[] = { 3, 4 }; return tn_empty(2, s, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, r); }
static int c_many_dims(tn_tensor **r)
{
	int64_t s[8] = { 1, 2, 1, 2, 1, 2, 1, 2 };
	return tn_zeros(8, s, TN_INT32, TN_CPU, r);
}
static int c_full(tn_tensor **r) { int64_t s[] = { 5 }; return tn_full(1, s, tn_scalar_double(2), &(enum tn_dtype){ TN_FLOAT16 }, TN_CPU, r); }
static int c_large(tn_tensor **r) { int64_t s[] = { 1 << 19 }; return tn_ones(1, s, TN_FLOAT32, TN_CPU, r); }
static int c_arange(tn_tensor **r) { return tn_arange(tn_scalar_int(0), tn_scalar_int(9), tn_scalar_int(2), &(enum tn_dtype){ TN_INT64 }, TN_CPU, r); }
static int c_strided(tn_tensor **r) { int64_t s[] = { 2, 2 }, st[] = { 1, 2 }; return tn_empty_strided(2, s, 2, st, TN_INT8, TN_CPU, r); }
static double blob[6];
static int c_blob(tn_tensor **r) { int64_t s[] = { 2, 3 }; return tn_from_blob(blob, 2, s, NULL, TN_FLOAT64, NULL, NULL, r); }
static int c_view(tn_tensor **r) { int64_t s[] = { 2, -1 }; return tn_view(fixture, 2, s, r); }
static int c_permute(tn_tensor **r) { int64_t d[] = { 1, 0, 2 }; return tn_permute(fixture, 3, d, r); }
static int c_slice(tn_tensor **r) { return tn_slice(fixture, 2, 1, INT64_MAX, 2, r); }
static int c_select(tn_tensor **r) { return tn_select(fixture, 1, -1, r); }
static int c_expand(tn_tensor **r) { int64_t s[] = { 2, 2, 3, 4 }; return tn_expand(fixture, 4, s, r); }
static int c_unsqueeze(tn_tensor **r) { return tn_unsqueeze(fixture, 0, r); }
static int c_clone(tn_tensor **r) { return tn_clone(fixture, TN_CONTIGUOUS_FORMAT, r); }
static int c_reshape_copy(tn_tensor **r)
{
	tn_tensor *tr;
	int64_t s[] = { 24 };
	int ret = tn_transpose(fixture, 0, 2, &tr);
	if (ret)
		return ret;
	ret = tn_reshape(tr, 1, s, r);
	tn_tensor_unref(tr);
	return ret;
}
static int c_repr(tn_tensor **r)
{
	char *s;
	int ret = tn_tensor_repr(fixture, &s);
	if (ret)
		return ret;
	free(s);
	*r = tn_tensor_ref(fixture);
	return 0;
}

START_TEST(test_fault_injection_every_constructor)
{
	static const struct {
		const char *name;
		ctor_fn fn;
	} ctors[] = {
		{ "empty", c_empty },	  { "zeros(8 dims)", c_many_dims },  { "full", c_full },
		{ "ones(large)", c_large }, { "arange", c_arange },	      { "empty_strided", c_strided },
		{ "from_blob", c_blob },  { "view", c_view },		      { "permute", c_permute },
		{ "slice", c_slice },	  { "select", c_select },	      { "expand", c_expand },
		{ "unsqueeze", c_unsqueeze }, { "clone", c_clone },	      { "reshape(copy)", c_reshape_copy },
		{ "repr", c_repr },
	};
	int64_t s[] = { 2, 3, 4 };
	ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(24), tn_scalar_int(1), &(enum tn_dtype){ TN_INT32 }, TN_CPU, &fixture));
	tn_tensor *f3;
	ck_assert_tn_ok(tn_view(fixture, 3, s, &f3));
	tn_tensor_unref(fixture);
	fixture = f3;

	for (size_t k = 0; k < sizeof(ctors) / sizeof(ctors[0]); k++) {
		struct tn_baseline b = tn_test_baseline();
		int failures = 0;
		for (uint64_t n = 1;; n++) {
			tn_tensor *t = NULL;
			tn_alloc_fail_nth(n);
			tn_clear_error();
			int r = ctors[k].fn(&t);
			tn_alloc_fail_nth(0);
			if (r == 0) {
				ck_assert_ptr_nonnull(t);
				tn_tensor_unref(t);
				ck_assert_no_leak(b);
				break;
			}
			ck_assert_msg(r == TN_ENOMEM, "%s with allocation %llu failing: %d %s",
				      ctors[k].name, (unsigned long long)n, r, tn_last_error());
			ck_assert_msg(strstr(tn_last_error(), "out of memory") != NULL, "%s: '%s'",
				      ctors[k].name, tn_last_error());
			ck_assert_ptr_null(t);
			ck_assert_no_leak(b);
			failures++;
			ck_assert_msg(n < 100, "%s never succeeds", ctors[k].name);
		}
		/* Each constructor allocates at least once, so the loop saw a failure. */
		ck_assert_msg(failures >= 1, "%s: no allocation was ever failed", ctors[k].name);
	}
	tn_tensor_unref(fixture);
}
END_TEST

static tn_scalar par_scalar(int kind, int64_t i, double d)
{
	return kind == 0 ? tn_scalar_int(i) : kind == 1 ? tn_scalar_double(d) : tn_scalar_bool(i != 0);
}

/* fill_, full and where's Python numbers convert as c10's checked_convert: a negative int
 * wraps into uint8 (down to -255), a double is compared before it truncates (-0.5 does not
 * fit uint8), 2^63 passes for int64 and gives INT64_MIN; the type names are C++'s. */
START_TEST(test_scalar_conversions_match_pytorch)
{
	int64_t one = 1;
	for (size_t k = 0; k < sizeof(par_scalar_cases) / sizeof(par_scalar_cases[0]); k++) {
		const struct par_scalar_case *c = &par_scalar_cases[k];
		tn_scalar v = par_scalar(c->kind, c->i, c->d);
		tn_tensor *t, *f = NULL;
		ck_assert_tn_ok(tn_zeros(1, &one, c->dtype, TN_CPU, &t));
		tn_clear_error();
		int r = tn_fill_(t, v), rf = tn_full(1, &one, v, &c->dtype, TN_CPU, &f);
		if (!c->ok) {
			ck_assert_msg(r == TN_EOVERFLOW && rf == TN_EOVERFLOW,
				      "case %zu (%s): fill_ %d, full %d, PyTorch '%s'", k,
				      tn_dtype_name(c->dtype), r, rf, c->msg);
			ck_assert_str_eq(tn_last_error(), c->msg);
		} else {
			ck_assert_msg(r == 0 && rf == 0, "case %zu (%s): %s", k, tn_dtype_name(c->dtype),
				      tn_last_error());
			tn_scalar got, gotf;
			int64_t idx = 0;
			ck_assert_tn_ok(tn_tensor_get(t, 1, &idx, &got));
			ck_assert_tn_ok(tn_tensor_get(f, 1, &idx, &gotf));
			double g = got.kind == TN_SCALAR_DOUBLE ? got.v.d
				   : got.kind == TN_SCALAR_INT	 ? (double)got.v.i
								 : got.v.b;
			double gf = gotf.kind == TN_SCALAR_DOUBLE ? gotf.v.d
				    : gotf.kind == TN_SCALAR_INT  ? (double)gotf.v.i
								  : gotf.v.b;
			ck_assert_msg((g == c->value || (isnan(g) && isnan(c->value))) &&
					      (gf == c->value || (isnan(gf) && isnan(c->value))),
				      "case %zu (%s): %.17g / %.17g, PyTorch %.17g", k,
				      tn_dtype_name(c->dtype), g, gf, c->value);
		}
		tn_tensor_unref(t);
		tn_tensor_unref(f);
	}
	/* where with a Python int and a uint8 tensor: uint8, the int wrapped. */
	int64_t two = 2;
	tn_tensor *cond, *u, *w;
	ck_assert_tn_ok(tn_empty(1, &two, TN_BOOL, TN_CPU, TN_CONTIGUOUS_FORMAT, &cond));
	((bool *)tn_tensor_data(cond))[0] = true;
	((bool *)tn_tensor_data(cond))[1] = false;
	ck_assert_tn_ok(tn_empty(1, &two, TN_UINT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &u));
	((uint8_t *)tn_tensor_data(u))[0] = 3;
	((uint8_t *)tn_tensor_data(u))[1] = 4;
	ck_assert_tn_ok(tn_where_scalar_other(cond, u, tn_scalar_int(-7), &w));
	ck_assert_int_eq(tn_tensor_dtype(w), TN_UINT8);
	for (int64_t i = 0; i < 2; i++)
		ck_assert_int_eq(tn_test_get_int(w, &i), par_where_u8_other[i]);
	tn_tensor_unref(w);
	ck_assert_tn_ok(tn_where_scalar_self(cond, tn_scalar_int(-7), u, &w));
	for (int64_t i = 0; i < 2; i++)
		ck_assert_int_eq(tn_test_get_int(w, &i), par_where_u8_self[i]);
	tn_tensor_unref(w);
	ck_assert_tn_error(tn_where_scalar_other(cond, u, tn_scalar_int(300), &w), TN_EOVERFLOW,
			   par_where_u8_300_msg);
	tn_tensor_unref(cond);
	tn_tensor_unref(u);
}
END_TEST

/* contiguous(preserve_format) returns a contiguous tensor as it is, and refuses any other
 * with PyTorch's words. */
START_TEST(test_contiguous_preserve_format)
{
	int64_t s[] = { 2, 3 };
	tn_tensor *t, *r = NULL, *tt;
	ck_assert_tn_ok(tn_zeros(2, s, TN_FLOAT32, TN_CPU, &t));
	ck_assert_tn_ok(tn_contiguous(t, TN_PRESERVE_FORMAT, &r));
	ck_assert_ptr_eq(r, t);
	tn_tensor_unref(r);
	ck_assert_tn_ok(tn_transpose(t, 0, 1, &tt));
	ck_assert_tn_error(tn_contiguous(tt, TN_PRESERVE_FORMAT, &r), TN_EINVAL,
			   par_contiguous_preserve_msg);
	tn_tensor_unref(tt);
	tn_tensor_unref(t);
}
END_TEST

static Suite *tensor_suite(void)
{
	Suite *s = suite_create("tensor");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_empty_geometry);
	tcase_add_test(tc, test_many_dims);
	tcase_add_test(tc, test_bad_factory_arguments);
	tcase_add_test(tc, test_empty_strided_storage_size);
	tcase_add_test(tc, test_full_every_dtype);
	tcase_add_test(tc, test_full_overflow);
	tcase_add_test(tc, test_arange_golden);
	tcase_add_test(tc, test_arange_errors);
	tcase_add_test(tc, test_tensor_new_bounds);
	tcase_add_test(tc, test_get_set_item);
	tcase_add_test(tc, test_bad_tensor_handles);
	tcase_add_test(tc, test_fault_injection_every_constructor);
	tcase_add_test(tc, test_scalar_conversions_match_pytorch);
	tcase_add_test(tc, test_contiguous_preserve_format);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(tensor_suite)
