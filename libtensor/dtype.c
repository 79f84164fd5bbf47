/* SPDX-License-Identifier: MIT */
/*
 * The dtype table, the 16-bit float conversions and scalar <-> element conversions.
 *
 * Everything here is generated from TN_DTYPE_LIST so adding a dtype touches one line of the
 * header plus the conversion switch cases the compiler then points at (-Wswitch).
 */
#include <math.h>
#include <string.h>

#include "internal.h"

struct dtype_info {
	const char *name;
	size_t size;
	enum tn_dtype_category category;
	bool is_signed;
};

static const struct dtype_info dtype_table[TN_NUM_DTYPES] = {
#define TN_X_(e, ctype, name, size, cat, sgn) [e] = { name, size, cat, sgn },
	TN_DTYPE_LIST(TN_X_)
#undef TN_X_
};

/* The size column of the table must agree with the C type; checked at compile time. */
#define TN_X_(e, ctype, name, size, cat, sgn) \
	_Static_assert(sizeof(ctype) == (size), "size column of " name " is wrong");
TN_DTYPE_LIST(TN_X_)
#undef TN_X_

TN_EXPORT bool tn_dtype_is_valid(enum tn_dtype dtype)
{
	return (unsigned)dtype < TN_NUM_DTYPES;
}

TN_EXPORT const char *tn_dtype_name(enum tn_dtype dtype)
{
	return tn_dtype_is_valid(dtype) ? dtype_table[dtype].name : NULL;
}

TN_EXPORT size_t tn_dtype_size(enum tn_dtype dtype)
{
	return tn_dtype_is_valid(dtype) ? dtype_table[dtype].size : 0;
}

TN_EXPORT enum tn_dtype_category tn_dtype_category(enum tn_dtype dtype)
{
	return tn_dtype_is_valid(dtype) ? dtype_table[dtype].category : TN_CATEGORY_BOOL;
}

TN_EXPORT bool tn_dtype_is_floating(enum tn_dtype dtype)
{
	return tn_dtype_is_valid(dtype) && dtype_table[dtype].category == TN_CATEGORY_FLOATING;
}

TN_EXPORT bool tn_dtype_is_integral(enum tn_dtype dtype)
{
	return tn_dtype_is_valid(dtype) && dtype_table[dtype].category == TN_CATEGORY_INTEGRAL;
}

TN_EXPORT bool tn_dtype_is_signed(enum tn_dtype dtype)
{
	return tn_dtype_is_valid(dtype) && dtype_table[dtype].is_signed;
}

static const struct {
	const char *alias;
	enum tn_dtype dtype;
} dtype_aliases[] = {
	{ "float", TN_FLOAT32 },  { "double", TN_FLOAT64 }, { "half", TN_FLOAT16 },
	{ "long", TN_INT64 },	  { "int", TN_INT32 },	    { "short", TN_INT16 },
	{ "byte", TN_UINT8 },	  { "char", TN_INT8 },
};

TN_EXPORT int tn_dtype_from_name(const char *name, enum tn_dtype *ret_dtype)
{
	if (!name || !ret_dtype)
		return tn__error(TN_EINVAL, "tn_dtype_from_name: NULL argument");
	const char *bare = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
	for (int d = 0; d < TN_NUM_DTYPES; d++) {
		if (strcmp(bare, dtype_table[d].name) == 0) {
			*ret_dtype = (enum tn_dtype)d;
			return 0;
		}
	}
	for (size_t i = 0; i < TN_ARRAY_SIZE(dtype_aliases); i++) {
		if (strcmp(bare, dtype_aliases[i].alias) == 0) {
			*ret_dtype = dtype_aliases[i].dtype;
			return 0;
		}
	}
	return tn__error(TN_EINVAL, "unknown dtype '%.64s'", name);
}

/* ---- float16 / bfloat16 ------------------------------------------------------------------ */

static uint32_t float_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Integer-only binary32 -> binary16 with round-to-nearest-even, so the result does not depend
 * on the FPU's rounding mode or on excess precision. */
TN_EXPORT tn_half tn_half_from_float(float value)
{
	uint32_t x = float_bits(value);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t ax = x & 0x7fffffffu;
	tn_half h;

	if (ax >= 0x7f800000u) {
		/* Infinity keeps its sign; NaN is quietened and keeps its top payload bits. */
		h.bits = sign | (ax > 0x7f800000u ? (uint16_t)(0x7e00u | ((ax >> 13) & 0x3ffu))
						  : 0x7c00u);
		return h;
	}
	if (ax >= 0x477ff000u) { /* >= 65520 rounds to infinity */
		h.bits = sign | 0x7c00u;
		return h;
	}
	if (ax < 0x38800000u) { /* below the smallest normal half, 2^-14 */
		uint32_t e = ax >> 23;
		if (e == 0) { /* float subnormals are far below half's range */
			h.bits = sign;
			return h;
		}
		uint32_t m = (ax & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - e; /* >= 14 */
		if (shift >= 25) {
			h.bits = sign;
			return h;
		}
		uint32_t r = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (r & 1u)))
			r++;
		h.bits = sign | (uint16_t)r;
		return h;
	}
	uint32_t r = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
	uint32_t rem = ax & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
		r++; /* a carry into the exponent is the correct result */
	h.bits = sign | (uint16_t)r;
	return h;
}

TN_EXPORT float tn_half_to_float(tn_half value)
{
	uint32_t sign = (uint32_t)(value.bits & 0x8000u) << 16;
	uint32_t exp = (value.bits >> 10) & 0x1fu;
	uint32_t man = value.bits & 0x3ffu;

	/* Infinity; NaN quietened (as F16C's vcvtph2ps, which the kernels use, does). */
	if (exp == 0x1f)
		return bits_float(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
	if (exp == 0) {
		if (man == 0)
			return bits_float(sign);
		/* Subnormal: normalise the mantissa. */
		exp = 113;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		man &= 0x3ffu;
		return bits_float(sign | (exp << 23) | (man << 13));
	}
	return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

TN_EXPORT tn_bfloat16 tn_bfloat16_from_float(float value)
{
	uint32_t x = float_bits(value);
	tn_bfloat16 b;

	if ((x & 0x7fffffffu) > 0x7f800000u) {
		b.bits = (uint16_t)((x >> 16) | 0x0040u);
		return b;
	}
	/* Round to nearest even; overflow past the largest finite value carries into infinity. */
	x += 0x7fffu + ((x >> 16) & 1u);
	b.bits = (uint16_t)(x >> 16);
	return b;
}

TN_EXPORT float tn_bfloat16_to_float(tn_bfloat16 value)
{
	return bits_float((uint32_t)value.bits << 16);
}

/* ---- scalars ------------------------------------------------------------------------------ */

TN_EXPORT int tn_scalar_to_double(tn_scalar s, double *ret_value)
{
	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_scalar_to_double: NULL ret_value");
	switch (s.kind) {
	case TN_SCALAR_BOOL:
		*ret_value = s.v.b ? 1.0 : 0.0;
		return 0;
	case TN_SCALAR_INT:
		*ret_value = (double)s.v.i;
		return 0;
	case TN_SCALAR_DOUBLE:
		*ret_value = s.v.d;
		return 0;
	}
	return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)s.kind);
}

static int overflow_error(enum tn_dtype dtype);

/* 2^63 as a double: the first value past int64's range. */
#define TWO_POW_63 9223372036854775808.0

TN_EXPORT int tn_scalar_to_int(tn_scalar s, int64_t *ret_value)
{
	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_scalar_to_int: NULL ret_value");
	switch (s.kind) {
	case TN_SCALAR_BOOL:
		*ret_value = s.v.b;
		return 0;
	case TN_SCALAR_INT:
		*ret_value = s.v.i;
		return 0;
	case TN_SCALAR_DOUBLE: {
		double t = trunc(s.v.d);
		if (!(t >= -TWO_POW_63 && t < TWO_POW_63))
			return overflow_error(TN_INT64);
		*ret_value = (int64_t)t;
		return 0;
	}
	}
	return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)s.kind);
}

/* The C++ type names c10's Scalar accessors put in their messages (AT_FORALL_SCALAR_TYPES). */
const char *tn__dtype_cpp_name(enum tn_dtype dtype)
{
	static const char *const names[TN_NUM_DTYPES] = {
		[TN_BOOL] = "bool",	   [TN_UINT8] = "uint8_t",	 [TN_INT8] = "int8_t",
		[TN_INT16] = "int16_t",	   [TN_INT32] = "int",		 [TN_INT64] = "int64_t",
		[TN_FLOAT16] = "at::Half", [TN_BFLOAT16] = "at::BFloat16", [TN_FLOAT32] = "float",
		[TN_FLOAT64] = "double",
	};
	return (unsigned)dtype < TN_NUM_DTYPES ? names[dtype] : "?";
}

static int overflow_error(enum tn_dtype dtype)
{
	return tn__error(TN_EOVERFLOW, "value cannot be converted to type %s without overflow",
			 tn__dtype_cpp_name(dtype));
}

/*
 * Integer targets, as c10's checked_convert: [lo, hi] is the dtype's range.
 * - An int may also be negative down to -hi for uint8, and wraps (fill_(-7) gives 249:
 *   c10 lets "a - b" be computed as "a + 255 * b").
 * - A double is compared before truncation (-0.5 and 255.5 do not fit uint8), NaN and the
 *   infinities never fit, and what fits converts as static_cast does on x86: hi + 1 for
 *   int64 (2^63, which equals (double)INT64_MAX and so passes c10's check) gives INT64_MIN.
 */
static int scalar_to_integer(tn_scalar v, int64_t lo, int64_t hi, enum tn_dtype dtype,
			     int64_t *out)
{
	switch (v.kind) {
	case TN_SCALAR_BOOL:
		*out = v.v.b;
		return 0;
	case TN_SCALAR_INT:
		if (v.v.i > hi || (lo == 0 ? v.v.i < -hi : v.v.i < lo))
			return overflow_error(dtype);
		*out = v.v.i;
		return 0;
	case TN_SCALAR_DOUBLE: {
		double d = v.v.d;
		/* (double)hi rounds up to 2^63 for int64, as C++'s comparison converts it. */
		if (!(d >= (double)lo && d <= (double)hi))
			return overflow_error(dtype);
		*out = d < 0x1p63 ? (int64_t)d : INT64_MIN;
		return 0;
	}
	}
	return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)v.kind);
}

/* Floating targets: finite values beyond the dtype's largest are an error, as in PyTorch's
 * checked_convert; infinities and NaN pass. */
static int scalar_to_floating(tn_scalar v, double max, enum tn_dtype dtype, double *out)
{
	double d;
	switch (v.kind) {
	case TN_SCALAR_BOOL:
		d = v.v.b;
		break;
	case TN_SCALAR_INT:
		d = (double)v.v.i;
		break;
	case TN_SCALAR_DOUBLE:
		d = v.v.d;
		break;
	default:
		return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)v.kind);
	}
	if (isfinite(d) && (d > max || d < -max))
		return overflow_error(dtype);
	*out = d;
	return 0;
}

int tn__scalar_to_element(tn_scalar value, enum tn_dtype dtype, void *out)
{
	int64_t i = 0;
	double d = 0;
	int r = 0;

	switch (dtype) {
	case TN_BOOL: {
		bool b;
		if (value.kind == TN_SCALAR_BOOL)
			b = value.v.b;
		else if (value.kind == TN_SCALAR_INT)
			b = value.v.i != 0;
		else if (value.kind == TN_SCALAR_DOUBLE)
			b = value.v.d != 0; /* NaN is true, as in C++ */
		else
			return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)value.kind);
		*(bool *)out = b;
		return 0;
	}
#define INT_CASE(E, T, LO, HI)                                                   \
	case E:                                                                  \
		r = scalar_to_integer(value, LO, HI, dtype, &i);                 \
		if (!r) {                                                        \
			T x = (T)i;                                              \
			memcpy(out, &x, sizeof(x));                              \
		}                                                                \
		return r;
	INT_CASE(TN_UINT8, uint8_t, 0, UINT8_MAX)
	INT_CASE(TN_INT8, int8_t, INT8_MIN, INT8_MAX)
	INT_CASE(TN_INT16, int16_t, INT16_MIN, INT16_MAX)
	INT_CASE(TN_INT32, int32_t, INT32_MIN, INT32_MAX)
	INT_CASE(TN_INT64, int64_t, INT64_MIN, INT64_MAX)
#undef INT_CASE
	case TN_FLOAT16:
		r = scalar_to_floating(value, 65504.0, dtype, &d);
		if (!r) {
			/* Integers convert to float first, as c10::Half(float) does. */
			tn_half h = tn_half_from_float(value.kind == TN_SCALAR_INT ? (float)value.v.i
										: (float)d);
			memcpy(out, &h, sizeof(h));
		}
		return r;
	case TN_BFLOAT16:
		r = scalar_to_floating(value, 3.3895313892515355e+38, dtype, &d);
		if (!r) {
			tn_bfloat16 b = tn_bfloat16_from_float(
				value.kind == TN_SCALAR_INT ? (float)value.v.i : (float)d);
			memcpy(out, &b, sizeof(b));
		}
		return r;
	case TN_FLOAT32:
		r = scalar_to_floating(value, 3.4028234663852886e+38, dtype, &d);
		if (!r) {
			/* int64 -> float directly: one rounding, not two through double. */
			float f = value.kind == TN_SCALAR_INT ? (float)value.v.i : (float)d;
			memcpy(out, &f, sizeof(f));
		}
		return r;
	case TN_FLOAT64:
		r = scalar_to_floating(value, INFINITY, dtype, &d);
		if (!r)
			memcpy(out, &d, sizeof(d));
		return r;
	case TN_NUM_DTYPES:
		break;
	}
	return tn__error(TN_EINVAL, "invalid dtype %d", (int)dtype);
}

tn_scalar tn__element_to_scalar(enum tn_dtype dtype, const void *in)
{
	switch (dtype) {
	case TN_BOOL:
		return tn_scalar_bool(*(const bool *)in);
#define INT_CASE(E, T)                               \
	case E: {                                    \
		T x;                                 \
		memcpy(&x, in, sizeof(x));           \
		return tn_scalar_int((int64_t)x);    \
	}
	INT_CASE(TN_UINT8, uint8_t)
	INT_CASE(TN_INT8, int8_t)
	INT_CASE(TN_INT16, int16_t)
	INT_CASE(TN_INT32, int32_t)
	INT_CASE(TN_INT64, int64_t)
#undef INT_CASE
	case TN_FLOAT16:
	case TN_BFLOAT16:
	case TN_FLOAT32:
	case TN_FLOAT64:
		return tn_scalar_double(tn__element_to_double(dtype, in));
	case TN_NUM_DTYPES:
		break;
	}
	return tn_scalar_int(0);
}

double tn__element_to_double(enum tn_dtype dtype, const void *in)
{
	switch (dtype) {
	case TN_FLOAT16: {
		tn_half h;
		memcpy(&h, in, sizeof(h));
		return tn_half_to_float(h);
	}
	case TN_BFLOAT16: {
		tn_bfloat16 b;
		memcpy(&b, in, sizeof(b));
		return tn_bfloat16_to_float(b);
	}
	case TN_FLOAT32: {
		float f;
		memcpy(&f, in, sizeof(f));
		return f;
	}
	case TN_FLOAT64: {
		double d;
		memcpy(&d, in, sizeof(d));
		return d;
	}
	default: {
		tn_scalar s = tn__element_to_scalar(dtype, in);
		return s.kind == TN_SCALAR_BOOL ? (double)s.v.b : (double)s.v.i;
	}
	}
}
