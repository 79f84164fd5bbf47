/* SPDX-License-Identifier: MIT */
/* The printer against PyTorch's repr() for 131 tensors (tests/golden/gen_golden.py). */
#include <math.h>
#include <stdio.h>

#include "testutil.h"
#include "golden/repr_golden.h"

static tn_tensor *build(const struct repr_case *c)
{
	enum tn_dtype dt;
	tn_tensor *t;
	int64_t numel = 1;

	ck_assert_tn_ok(tn_dtype_from_name(c->dtype, &dt));
	ck_assert_tn_ok(tn_empty(c->ndim, c->sizes, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	for (int d = 0; d < c->ndim; d++)
		numel *= c->sizes[d];
	/* Values go in through a float64 tensor converted element-wise as torch's .to() would:
	 * double -> dtype (16-bit floats via float, as PyTorch does). */
	unsigned char *p = tn_tensor_data(t);
	for (int64_t i = 0; i < numel; i++) {
		double v = c->gen ? (double)i * c->scale + c->bias : c->values[i];
		unsigned char *dst = p + i * (int64_t)tn_dtype_size(dt);
		if (tn_dtype_is_integral(dt)) {
			/* Out-of-range values wrap, as torch's float64 -> uint8 cast does. */
			uint64_t w = (uint64_t)(int64_t)v;
			for (size_t b = 0; b < tn_dtype_size(dt); b++)
				dst[b] = (unsigned char)(w >> (8 * b)); /* little-endian */
			continue;
		}
		/* Floats: double -> float -> 16-bit, rounding as torch's .to() does, and values
		 * past the range become infinity (tn_full would refuse them). */
		switch (dt) {
		case TN_BOOL: dst[0] = v != 0; break;
		case TN_FLOAT64: memcpy(dst, &v, 8); break;
		case TN_FLOAT32: { float f = (float)v; memcpy(dst, &f, 4); break; }
		case TN_FLOAT16: { tn_half h = tn_half_from_float((float)v); memcpy(dst, &h, 2); break; }
		case TN_BFLOAT16: { tn_bfloat16 h = tn_bfloat16_from_float((float)v); memcpy(dst, &h, 2); break; }
		default: ck_abort_msg("unexpected dtype %s", c->dtype);
		}
	}
	return t;
}

START_TEST(test_repr_golden)
{
	size_t n = sizeof(repr_golden) / sizeof(repr_golden[0]);
	ck_assert_uint_ge(n, 100);
	for (size_t k = 0; k < n; k++) {
		const struct repr_case *c = &repr_golden[k];
		tn_tensor *t = build(c);
		char *s;
		ck_assert_tn_ok(tn_tensor_repr(t, &s));
		ck_assert_msg(strcmp(s, c->expected) == 0, "%s:\n got: %s\nwant: %s", c->name, s,
			      c->expected);
		free(s);
		tn_tensor_unref(t);
	}
}
END_TEST

START_TEST(test_strided_views_print_like_copies)
{
	/* The printer walks strides: a transposed or sliced view prints as its contiguous copy. */
	size_t n = sizeof(repr_golden) / sizeof(repr_golden[0]);
	int checked = 0;
	for (size_t k = 0; k < n; k++) {
		const struct repr_case *c = &repr_golden[k];
		if (c->ndim < 2)
			continue;
		tn_tensor *t = build(c), *v, *copy;
		char *a, *b;
		ck_assert_tn_ok(tn_transpose(t, 0, -1, &v));
		ck_assert_tn_ok(tn_clone(v, TN_CONTIGUOUS_FORMAT, &copy));
		ck_assert_tn_ok(tn_tensor_repr(v, &a));
		ck_assert_tn_ok(tn_tensor_repr(copy, &b));
		ck_assert_str_eq(a, b);
		free(a);
		free(b);
		tn_tensor_unref(copy);
		tn_tensor_unref(v);
		tn_tensor_unref(t);
		checked++;
	}
	ck_assert_int_gt(checked, 20);
}
END_TEST

START_TEST(test_fprint)
{
	tn_tensor *t;
	char buf[256] = { 0 };
	int64_t s[] = { 2, 2 };
	ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(4), tn_scalar_int(1), &(enum tn_dtype){ TN_INT64 }, TN_CPU, &t));
	tn_tensor *v;
	ck_assert_tn_ok(tn_view(t, 2, s, &v));
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	ck_assert_tn_ok(tn_tensor_fprint(f, v));
	fclose(f);
	ck_assert_str_eq(buf, "tensor([[0, 1],\n        [2, 3]])\n");
	ck_assert_tn_error(tn_tensor_fprint(NULL, v), TN_EINVAL, "tn_tensor_fprint: NULL stream");
	ck_assert_tn_error(tn_tensor_repr(v, NULL), TN_EINVAL, "tn_tensor_repr: NULL ret_string");
	tn_tensor_unref(v);
	tn_tensor_unref(t);
}
END_TEST

static Suite *print_suite(void)
{
	Suite *s = suite_create("print");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_repr_golden);
	tcase_add_test(tc, test_strided_views_print_like_copies);
	tcase_add_test(tc, test_fprint);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(print_suite)
