/* SPDX-License-Identifier: MIT */
/*
 * dtypes: the table, names, categories, the float16/bfloat16 conversions (against goldens
 * from NumPy and PyTorch, tests/golden/gen_golden.py) and scalar conversions.
 */
#include <float.h>
#include <math.h>

#include "testutil.h"
#include "golden/half_golden.h"

static uint32_t fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bitsf(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

START_TEST(test_table)
{
	static const struct {
		enum tn_dtype d;
		const char *name;
		size_t size;
		enum tn_dtype_category cat;
		bool is_signed;
	} expect[] = {
		{ TN_BOOL, "bool", 1, TN_CATEGORY_BOOL, false },
		{ TN_UINT8, "uint8", 1, TN_CATEGORY_INTEGRAL, false },
		{ TN_INT8, "int8", 1, TN_CATEGORY_INTEGRAL, true },
		{ TN_INT16, "int16", 2, TN_CATEGORY_INTEGRAL, true },
		{ TN_INT32, "int32", 4, TN_CATEGORY_INTEGRAL, true },
		{ TN_INT64, "int64", 8, TN_CATEGORY_INTEGRAL, true },
		{ TN_FLOAT16, "float16", 2, TN_CATEGORY_FLOATING, true },
		{ TN_BFLOAT16, "bfloat16", 2, TN_CATEGORY_FLOATING, true },
		{ TN_FLOAT32, "float32", 4, TN_CATEGORY_FLOATING, true },
		{ TN_FLOAT64, "float64", 8, TN_CATEGORY_FLOATING, true },
	};
	ck_assert_int_eq(TN_NUM_DTYPES, 10);
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		enum tn_dtype parsed;
		ck_assert(tn_dtype_is_valid(expect[i].d));
		ck_assert_str_eq(tn_dtype_name(expect[i].d), expect[i].name);
		ck_assert_uint_eq(tn_dtype_size(expect[i].d), expect[i].size);
		ck_assert_int_eq(tn_dtype_category(expect[i].d), expect[i].cat);
		ck_assert_int_eq(tn_dtype_is_signed(expect[i].d), expect[i].is_signed);
		ck_assert_int_eq(tn_dtype_is_floating(expect[i].d), expect[i].cat == TN_CATEGORY_FLOATING);
		ck_assert_int_eq(tn_dtype_is_integral(expect[i].d), expect[i].cat == TN_CATEGORY_INTEGRAL);
		ck_assert_int_eq(tn_dtype_from_name(expect[i].name, &parsed), 0);
		ck_assert_int_eq(parsed, expect[i].d);
	}
	/* Invalid dtypes are refused everywhere, not indexed out of the table. */
	enum tn_dtype bad = (enum tn_dtype)10, neg = (enum tn_dtype)-1;
	ck_assert(!tn_dtype_is_valid(bad));
	ck_assert(!tn_dtype_is_valid(neg));
	ck_assert_ptr_null(tn_dtype_name(bad));
	ck_assert_ptr_null(tn_dtype_name(neg));
	ck_assert_uint_eq(tn_dtype_size(bad), 0);
	ck_assert(!tn_dtype_is_floating(neg));
	ck_assert(!tn_dtype_is_signed(bad));
}
END_TEST

START_TEST(test_names_and_aliases)
{
	static const struct {
		const char *name;
		enum tn_dtype d;
	} ok[] = {
		{ "torch.float32", TN_FLOAT32 }, { "float", TN_FLOAT32 },    { "double", TN_FLOAT64 },
		{ "torch.half", TN_FLOAT16 },    { "long", TN_INT64 },       { "int", TN_INT32 },
		{ "short", TN_INT16 },           { "byte", TN_UINT8 },       { "char", TN_INT8 },
		{ "torch.bfloat16", TN_BFLOAT16 }, { "torch.bool", TN_BOOL },
	};
	enum tn_dtype d = TN_BOOL;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert_int_eq(tn_dtype_from_name(ok[i].name, &d), 0);
		ck_assert_int_eq(d, ok[i].d);
	}
	d = TN_INT8;
	ck_assert_tn_error(tn_dtype_from_name("Float32", &d), TN_EINVAL, "unknown dtype 'Float32'");
	ck_assert_tn_error(tn_dtype_from_name("", &d), TN_EINVAL, "unknown dtype ''");
	ck_assert_tn_error(tn_dtype_from_name("torch.", &d), TN_EINVAL, "unknown dtype 'torch.'");
	ck_assert_tn_error(tn_dtype_from_name(NULL, &d), TN_EINVAL,
			   "tn_dtype_from_name: NULL argument");
	ck_assert_tn_error(tn_dtype_from_name("int", NULL), TN_EINVAL,
			   "tn_dtype_from_name: NULL argument");
	ck_assert_int_eq(d, TN_INT8); /* untouched on failure */
	ck_assert_str_eq(tn_device_type_name(TN_DEVICE_CPU), "cpu");
	ck_assert_str_eq(tn_device_type_name(TN_DEVICE_CUDA), "cuda");
	ck_assert_str_eq(tn_device_type_name(TN_DEVICE_META), "meta");
	ck_assert_ptr_null(tn_device_type_name(TN_NUM_DEVICE_TYPES));
}
END_TEST

START_TEST(test_half_golden)
{
	size_t n = sizeof(half_golden) / sizeof(half_golden[0]);
	ck_assert_uint_gt(n, 2000);
	for (size_t i = 0; i < n; i++) {
		uint32_t in = half_golden[i].f32;
		uint16_t h = tn_half_from_float(bitsf(in)).bits;
		uint16_t b = tn_bfloat16_from_float(bitsf(in)).bits;
		if (HALF_GOLDEN_IS_NAN32(in)) {
			/* NaN stays NaN with its sign (see the golden header on payloads). */
			ck_assert_msg((h & 0x7c00) == 0x7c00 && (h & 0x3ff), "f16 of NaN %08x: %04x", in, h);
			ck_assert_uint_eq(h & 0x8000, (in >> 16) & 0x8000);
			ck_assert_msg((b & 0x7f80) == 0x7f80 && (b & 0x7f), "bf16 of NaN %08x: %04x", in, b);
			ck_assert_uint_eq(b & 0x8000, (in >> 16) & 0x8000);
			continue;
		}
		ck_assert_msg(h == half_golden[i].f16, "f16(%08x) = %04x, numpy says %04x", in, h,
			      half_golden[i].f16);
		ck_assert_msg(b == half_golden[i].bf16, "bf16(%08x) = %04x, torch says %04x", in, b,
			      half_golden[i].bf16);
	}
}
END_TEST

START_TEST(test_widen_golden)
{
	size_t n = sizeof(half_widen_golden) / sizeof(half_widen_golden[0]);
	ck_assert_uint_gt(n, 9000);
	for (size_t i = 0; i < n; i++) {
		uint16_t bits = half_widen_golden[i].bits;
		uint32_t f = fbits(tn_half_to_float((tn_half){ bits }));
		uint32_t g = fbits(tn_bfloat16_to_float((tn_bfloat16){ bits }));
		if (HALF_GOLDEN_IS_NAN32(half_widen_golden[i].f16_to_f32))
			ck_assert(HALF_GOLDEN_IS_NAN32(f) && (f >> 31) == (uint32_t)(bits >> 15));
		else
			ck_assert_msg(f == half_widen_golden[i].f16_to_f32, "f16 %04x -> %08x", bits, f);
		if (HALF_GOLDEN_IS_NAN32(half_widen_golden[i].bf16_to_f32))
			ck_assert(HALF_GOLDEN_IS_NAN32(g));
		else
			ck_assert_msg(g == half_widen_golden[i].bf16_to_f32, "bf16 %04x -> %08x", bits, g);
	}
}
END_TEST

START_TEST(test_half_round_trip_exhaustive)
{
	/* Every non-NaN 16-bit pattern survives widening and narrowing unchanged, for both
	 * formats; NaNs stay NaNs of the same sign. */
	for (uint32_t i = 0; i < 65536; i++) {
		uint16_t bits = (uint16_t)i;
		tn_half h = tn_half_from_float(tn_half_to_float((tn_half){ bits }));
		tn_bfloat16 b = tn_bfloat16_from_float(tn_bfloat16_to_float((tn_bfloat16){ bits }));
		bool hnan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff);
		bool bnan = (bits & 0x7f80) == 0x7f80 && (bits & 0x7f);
		if (hnan)
			ck_assert(isnan(tn_half_to_float(h)) && (h.bits & 0x8000) == (bits & 0x8000));
		else
			ck_assert_uint_eq(h.bits, bits);
		if (bnan)
			ck_assert(isnan(tn_bfloat16_to_float(b)) && (b.bits & 0x8000) == (bits & 0x8000));
		else
			ck_assert_uint_eq(b.bits, bits);
	}
}
END_TEST

START_TEST(test_half_ties_and_limits)
{
	/* 2049 lies halfway between 2048 and 2050: ties to even gives 2048; 2051 gives 2052. */
	ck_assert_float_eq(tn_half_to_float(tn_half_from_float(2049.0f)), 2048.0f);
	ck_assert_float_eq(tn_half_to_float(tn_half_from_float(2051.0f)), 2052.0f);
	ck_assert_uint_eq(tn_half_from_float(65504.0f).bits, 0x7bff);
	ck_assert_uint_eq(tn_half_from_float(65519.99f).bits, 0x7bff);
	ck_assert_uint_eq(tn_half_from_float(65520.0f).bits, 0x7c00);
	ck_assert_uint_eq(tn_half_from_float(-1e10f).bits, 0xfc00);
	ck_assert_uint_eq(tn_half_from_float(INFINITY).bits, 0x7c00);
	ck_assert_uint_eq(tn_half_from_float(-INFINITY).bits, 0xfc00);
	ck_assert_uint_eq(tn_half_from_float(0x1p-24f).bits, 0x0001); /* smallest subnormal */
	ck_assert_uint_eq(tn_half_from_float(0x1p-25f).bits, 0x0000); /* tie to even: 0 */
	ck_assert_uint_eq(tn_half_from_float(0x1.8p-25f).bits, 0x0001);
	ck_assert_uint_eq(tn_half_from_float(-0.0f).bits, 0x8000);
	/* bfloat16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7; even is 1. */
	ck_assert_uint_eq(tn_bfloat16_from_float(1.0f + 0x1p-8f).bits, 0x3f80);
	ck_assert_uint_eq(tn_bfloat16_from_float(1.0f + 0x1p-7f + 0x1p-8f).bits, 0x3f82);
	ck_assert_uint_eq(tn_bfloat16_from_float(FLT_MAX).bits, 0x7f80); /* rounds up to inf */
	ck_assert_uint_eq(tn_bfloat16_from_float(-INFINITY).bits, 0xff80);
	ck_assert(isnan(tn_bfloat16_to_float(tn_bfloat16_from_float(NAN))));
}
END_TEST

START_TEST(test_scalar_conversions)
{
	double d;
	int64_t i;

	ck_assert_int_eq(tn_scalar_to_double(tn_scalar_int(-7), &d), 0);
	ck_assert_double_eq(d, -7.0);
	ck_assert_int_eq(tn_scalar_to_double(tn_scalar_bool(true), &d), 0);
	ck_assert_double_eq(d, 1.0);
	ck_assert_int_eq(tn_scalar_to_int(tn_scalar_double(-2.9), &i), 0);
	ck_assert_int_eq(i, -2);
	ck_assert_int_eq(tn_scalar_to_int(tn_scalar_int(INT64_MIN), &i), 0);
	ck_assert_int_eq(i, INT64_MIN);
	ck_assert_int_eq(tn_scalar_to_int(tn_scalar_double(-0x1p63), &i), 0);
	ck_assert_int_eq(i, INT64_MIN);
	i = 5;
	ck_assert_tn_error(tn_scalar_to_int(tn_scalar_double(0x1p63), &i), TN_EOVERFLOW,
			   "value cannot be converted to type int64_t without overflow");
	ck_assert_tn_error(tn_scalar_to_int(tn_scalar_double(NAN), &i), TN_EOVERFLOW,
			   "value cannot be converted to type int64_t without overflow");
	ck_assert_int_eq(i, 5);
	ck_assert_tn_error(tn_scalar_to_int(tn_scalar_int(1), NULL), TN_EINVAL,
			   "tn_scalar_to_int: NULL ret_value");
	tn_scalar bad = { .kind = (enum tn_scalar_kind)9 };
	ck_assert_tn_error(tn_scalar_to_double(bad, &d), TN_EINVAL, "invalid scalar kind 9");
}
END_TEST

static Suite *dtype_suite(void)
{
	Suite *s = suite_create("dtype");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_table);
	tcase_add_test(tc, test_names_and_aliases);
	tcase_add_test(tc, test_half_golden);
	tcase_add_test(tc, test_widen_golden);
	tcase_add_test(tc, test_half_round_trip_exhaustive);
	tcase_add_test(tc, test_half_ties_and_limits);
	tcase_add_test(tc, test_scalar_conversions);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(dtype_suite)
