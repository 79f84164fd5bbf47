/* SPDX-License-Identifier: MIT */
/*
 * Element types (dtypes), scalars and the 16-bit float conversions.
 *
 * One X-macro list, TN_DTYPE_LIST, drives the enum, the names, the sizes, the categories and
 * every switch over dtypes inside the library (the reference notes' AT_DISPATCH_ALL_TYPES).
 */
#ifndef TENSOR_DTYPE_H
#define TENSOR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/macros.h>

TN_BEGIN_DECLS

/* IEEE 754 binary16 and bfloat16 values are stored as their raw bit patterns. */
typedef struct tn_half {
	uint16_t bits;
} tn_half;

typedef struct tn_bfloat16 {
	uint16_t bits;
} tn_bfloat16;

enum tn_dtype_category {
	TN_CATEGORY_BOOL,
	TN_CATEGORY_INTEGRAL,
	TN_CATEGORY_FLOATING,
};

/*
 * X(ENUM, ctype, name, size, category, is_signed)
 * Enum values are part of the ABI and never renumbered; new dtypes go at the end.
 */
#define TN_DTYPE_LIST(X)                                                         \
	X(TN_BOOL, bool, "bool", 1, TN_CATEGORY_BOOL, false)                     \
	X(TN_UINT8, uint8_t, "uint8", 1, TN_CATEGORY_INTEGRAL, false)            \
	X(TN_INT8, int8_t, "int8", 1, TN_CATEGORY_INTEGRAL, true)                \
	X(TN_INT16, int16_t, "int16", 2, TN_CATEGORY_INTEGRAL, true)             \
	X(TN_INT32, int32_t, "int32", 4, TN_CATEGORY_INTEGRAL, true)             \
	X(TN_INT64, int64_t, "int64", 8, TN_CATEGORY_INTEGRAL, true)             \
	X(TN_FLOAT16, tn_half, "float16", 2, TN_CATEGORY_FLOATING, true)         \
	X(TN_BFLOAT16, tn_bfloat16, "bfloat16", 2, TN_CATEGORY_FLOATING, true)   \
	X(TN_FLOAT32, float, "float32", 4, TN_CATEGORY_FLOATING, true)           \
	X(TN_FLOAT64, double, "float64", 8, TN_CATEGORY_FLOATING, true)

enum tn_dtype {
#define TN_X_(e, ctype, name, size, cat, sgn) e,
	TN_DTYPE_LIST(TN_X_)
#undef TN_X_
	TN_NUM_DTYPES
};

/*
 * tn_dtype_name - the dtype's name ("float32", ...), or NULL when @dtype is not a dtype.
 */
TN_EXPORT const char *tn_dtype_name(enum tn_dtype dtype);

/*
 * tn_dtype_from_name - parse a dtype name.
 * Accepts the names above and PyTorch's aliases ("float", "double", "half", "long", "int",
 * "short", "byte", "char", with or without a "torch." prefix). Writes *ret_dtype on success.
 * Returns 0, or TN_EINVAL for an unknown name or a NULL argument.
 */
TN_EXPORT int tn_dtype_from_name(const char *name, enum tn_dtype *ret_dtype);

/*
 * tn_dtype_size - bytes per element, or 0 when @dtype is not a dtype.
 */
TN_EXPORT size_t tn_dtype_size(enum tn_dtype dtype);

/*
 * tn_dtype_category - TN_CATEGORY_BOOL, _INTEGRAL or _FLOATING. @dtype must be valid
 * (tn_dtype_is_valid); an invalid one gives TN_CATEGORY_BOOL.
 */
TN_EXPORT enum tn_dtype_category tn_dtype_category(enum tn_dtype dtype);

/* Predicates over the table; all return false for an invalid dtype. */
TN_EXPORT bool tn_dtype_is_valid(enum tn_dtype dtype);
TN_EXPORT bool tn_dtype_is_floating(enum tn_dtype dtype);
TN_EXPORT bool tn_dtype_is_integral(enum tn_dtype dtype); /* bool excluded, as in PyTorch */
TN_EXPORT bool tn_dtype_is_signed(enum tn_dtype dtype);

/*
 * 16-bit float conversions. Narrowing rounds to nearest, ties to even; values too large become
 * infinity of the same sign; infinities stay infinities; NaN stays NaN (quietened, sign and the
 * top payload bits kept). Widening is exact.
 */
TN_EXPORT tn_half tn_half_from_float(float value);
TN_EXPORT float tn_half_to_float(tn_half value);
TN_EXPORT tn_bfloat16 tn_bfloat16_from_float(float value);
TN_EXPORT float tn_bfloat16_to_float(tn_bfloat16 value);

/*
 * A scalar: the fill value of tn_full(), the bounds of tn_arange(), an element read with
 * tn_tensor_get(). Like PyTorch's c10::Scalar it keeps its kind, so int64 values are exact.
 */
enum tn_scalar_kind {
	TN_SCALAR_BOOL,
	TN_SCALAR_INT,
	TN_SCALAR_DOUBLE,
};

typedef struct tn_scalar {
	enum tn_scalar_kind kind;
	union {
		bool b;
		int64_t i;
		double d;
	} v;
} tn_scalar;

/* Scalar constructors; they cannot fail. */
static inline tn_scalar tn_scalar_bool(bool value)
{
	tn_scalar s;
	s.kind = TN_SCALAR_BOOL;
	s.v.b = value;
	return s;
}

static inline tn_scalar tn_scalar_int(int64_t value)
{
	tn_scalar s;
	s.kind = TN_SCALAR_INT;
	s.v.i = value;
	return s;
}

static inline tn_scalar tn_scalar_double(double value)
{
	tn_scalar s;
	s.kind = TN_SCALAR_DOUBLE;
	s.v.d = value;
	return s;
}

/*
 * tn_scalar_to_double / tn_scalar_to_int - read a scalar as a double or an int64.
 * to_double is exact for bool and double scalars and rounds large ints. to_int truncates
 * toward zero; it returns TN_EOVERFLOW for NaN, infinity or a double outside int64's range,
 * and TN_EINVAL for a NULL argument or a bad kind. Output written on success only.
 */
TN_EXPORT int tn_scalar_to_double(tn_scalar s, double *ret_value);
TN_EXPORT int tn_scalar_to_int(tn_scalar s, int64_t *ret_value);

TN_END_DECLS

#endif /* TENSOR_DTYPE_H */
