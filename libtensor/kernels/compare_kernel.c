/* SPDX-License-Identifier: MIT */
/*
 * Comparison kernels (eq, ne, lt, le, gt, ge), compiled once per CPU capability (see
 * stub.h): out[i] = a[i] OP b[i] as bool, with a and b in one dtype (the iterator's common
 * dtype). Contiguous, broadcast-scalar and strided paths, as the arithmetic kernels; NaN
 * compares as IEEE says (unequal to everything), as in PyTorch; 16-bit floats compare as
 * float, their contiguous and broadcast rows through float32 vectors (half_rows.h; the
 * compiler does not vectorise float16's scalar conversion).
 */
#include "stub.h"
#include "half.h"
#include "half_rows.h"

#define CMP_LOOP(T, LOAD, EXPR)                                                            \
	do {                                                                               \
		bool *O = (bool *)o;                                                       \
		const T *A = (const T *)a, *B = (const T *)b;                              \
		const int64_t w = (int64_t)sizeof(T);                                      \
		if (so == 1 && sa == w && sb == w) {                                       \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(A[i])) x = LOAD(A[i]), y = LOAD(B[i]); \
				O[i] = (EXPR);                                             \
			}                                                                  \
		} else if (so == 1 && sa == w && sb == 0) {                                \
			const __typeof__(LOAD(B[0])) y = LOAD(B[0]);                       \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(A[i])) x = LOAD(A[i]);               \
				O[i] = (EXPR);                                             \
			}                                                                  \
		} else {                                                                   \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(A[0])) x = LOAD(*(const T *)(a + i * sa)), \
							     y = LOAD(*(const T *)(b + i * sb)); \
				*(bool *)(o + i * so) = (EXPR);                            \
			}                                                                  \
		}                                                                          \
	} while (0)

#define ID(v) (v)
#define HALF(v) tn__h2f(v)
#define BF16(v) tn__bf2f(v)

#define CMP_OPS(T, LOAD)                                                                   \
	switch (op) {                                                                      \
	case TN_CMP_EQ:                                                                    \
		CMP_LOOP(T, LOAD, x == y);                                                 \
		return;                                                                    \
	case TN_CMP_NE:                                                                    \
		CMP_LOOP(T, LOAD, x != y);                                                 \
		return;                                                                    \
	case TN_CMP_LT:                                                                    \
		CMP_LOOP(T, LOAD, x < y);                                                  \
		return;                                                                    \
	case TN_CMP_LE:                                                                    \
		CMP_LOOP(T, LOAD, x <= y);                                                 \
		return;                                                                    \
	case TN_CMP_GT:                                                                    \
		CMP_LOOP(T, LOAD, x > y);                                                  \
		return;                                                                    \
	default:                                                                           \
		CMP_LOOP(T, LOAD, x >= y);                                                 \
		return;                                                                    \
	}

/* A 16-bit row into contiguous bools, inputs contiguous or broadcast (not both). */
#define H16_CMP(T, VLOAD, SLOAD)                                                            \
	do {                                                                                \
		switch (op) {                                                               \
		case TN_CMP_EQ:                                                             \
			H16_CMP_ROW(T, VLOAD, SLOAD, x == y);                               \
			return true;                                                        \
		case TN_CMP_NE:                                                             \
			H16_CMP_ROW(T, VLOAD, SLOAD, x != y);                               \
			return true;                                                        \
		case TN_CMP_LT:                                                             \
			H16_CMP_ROW(T, VLOAD, SLOAD, x < y);                                \
			return true;                                                        \
		case TN_CMP_LE:                                                             \
			H16_CMP_ROW(T, VLOAD, SLOAD, x <= y);                               \
			return true;                                                        \
		case TN_CMP_GT:                                                             \
			H16_CMP_ROW(T, VLOAD, SLOAD, x > y);                                \
			return true;                                                        \
		default:                                                                    \
			H16_CMP_ROW(T, VLOAD, SLOAD, x >= y);                               \
			return true;                                                        \
		}                                                                           \
	} while (0)
#define H16_CMP_ROW(T, VLOAD, SLOAD, EXPR)                                                  \
	H16_ROW(bool, T, o, a, sa, b, sb, n, VLOAD, SLOAD, tn__vstore_mask, ST_BOOL, EXPR, EXPR)
#define ST_BOOL(dst, v) ((dst) = (v))

static bool h16_row(int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		    const char *b, int64_t sb, int64_t n)
{
	if (so != 1 || (sa != 2 && sa != 0) || (sb != 2 && sb != 0) || (sa | sb) == 0)
		return false;
	if (dt == TN_FLOAT16)
		H16_CMP(tn_half, tn_vload_f16, tn__h2f);
	else if (dt == TN_BFLOAT16)
		H16_CMP(tn_bfloat16, tn_vload_bf16, tn__bf2f);
	return false;
}

void TN_KERNEL_FN(tn__compare_kernel)(int op, enum tn_dtype dt, char *o, int64_t so,
					const char *a, int64_t sa, const char *b, int64_t sb,
					int64_t n)
{
	if ((dt == TN_FLOAT16 || dt == TN_BFLOAT16) && h16_row(op, dt, o, so, a, sa, b, sb, n))
		return;
	switch (dt) {
	case TN_BOOL:
		CMP_OPS(bool, ID)
	case TN_UINT8:
		CMP_OPS(uint8_t, ID)
	case TN_INT8:
		CMP_OPS(int8_t, ID)
	case TN_INT16:
		CMP_OPS(int16_t, ID)
	case TN_INT32:
		CMP_OPS(int32_t, ID)
	case TN_INT64:
		CMP_OPS(int64_t, ID)
	case TN_FLOAT16:
		CMP_OPS(tn_half, HALF)
	case TN_BFLOAT16:
		CMP_OPS(tn_bfloat16, BF16)
	case TN_FLOAT32:
		CMP_OPS(float, ID)
	case TN_FLOAT64:
		CMP_OPS(double, ID)
	default:
		return;
	}
}
