/* SPDX-License-Identifier: MIT */
/*
 * clamp kernels (clamp, clamp_min, clamp_max and their Tensor forms), compiled once per CPU
 * capability (see stub.h): out[i] = a[i] bounded by lo and/or hi, every operand in one dtype.
 * A bound of stride 0 is one value loaded once, the path the Scalar forms take.
 *
 * The comparisons are strict, so a value equal to a bound is kept (ATen's scalar std::max and
 * std::min, which keep their first argument), NaN in a stays NaN, and lo > hi gives hi, as
 * torch.clamp does. With TN_CLAMP_NAN a NaN bound gives NaN (the Tensor forms, where ATen
 * uses its NaN-propagating maximum, minimum and clamp); without it a NaN bound compares false
 * and leaves a (the Scalar forms; the callers fill NaN themselves where PyTorch does).
 * 16-bit floats compare in float: the bounds are already of the dtype, so nothing rounds.
 */
#include <math.h>

#include "stub.h"
#include "half.h"

#define CLAMP_LOOP(T, LOAD, STORE, EXPR)                                                   \
	do {                                                                               \
		const int64_t w = (int64_t)sizeof(T);                                      \
		if (so == w && sa == w && slo == 0 && shi == 0) {                          \
			T *O = (T *)o;                                                     \
			const T *A = (const T *)a;                                         \
			const __typeof__(LOAD(A[0])) l = lo ? LOAD(*(const T *)lo) : 0,    \
						     h = hi ? LOAD(*(const T *)hi) : 0;    \
			(void)l;                                                           \
			(void)h;                                                           \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(A[0])) x = LOAD(A[i]);               \
				O[i] = STORE(EXPR);                                        \
			}                                                                  \
		} else {                                                                   \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(*(const T *)a)) x =                  \
					LOAD(*(const T *)(a + i * sa));                    \
				const __typeof__(x) l = lo ? LOAD(*(const T *)(lo + i * slo)) : 0, \
						    h = hi ? LOAD(*(const T *)(hi + i * shi)) : 0; \
				(void)l;                                                   \
				(void)h;                                                   \
				*(T *)(o + i * so) = STORE(EXPR);                          \
			}                                                                  \
		}                                                                          \
	} while (0)

#define MAXV(x, l) ((x) < (l) ? (l) : (x))
#define MINV(x, h) ((x) > (h) ? (h) : (x))

/* Every mode for one type; ISNAN is isnan for floating types and 0 for the others. */
#define CLAMP_MODES(T, LOAD, STORE, ISNAN)                                                 \
	switch (mode) {                                                                    \
	case TN_CLAMP_LO:                                                                  \
		CLAMP_LOOP(T, LOAD, STORE, MAXV(x, l));                                    \
		return;                                                                    \
	case TN_CLAMP_HI:                                                                  \
		CLAMP_LOOP(T, LOAD, STORE, MINV(x, h));                                    \
		return;                                                                    \
	case TN_CLAMP_LO | TN_CLAMP_HI:                                                    \
		CLAMP_LOOP(T, LOAD, STORE, MINV(MAXV(x, l), h));                           \
		return;                                                                    \
	case TN_CLAMP_LO | TN_CLAMP_NAN:                                                   \
		CLAMP_LOOP(T, LOAD, STORE, ISNAN(l) ? l : MAXV(x, l));                     \
		return;                                                                    \
	case TN_CLAMP_HI | TN_CLAMP_NAN:                                                   \
		CLAMP_LOOP(T, LOAD, STORE, ISNAN(h) ? h : MINV(x, h));                     \
		return;                                                                    \
	case TN_CLAMP_LO | TN_CLAMP_HI | TN_CLAMP_NAN:                                     \
		CLAMP_LOOP(T, LOAD, STORE,                                                 \
			   ISNAN(l) ? l : ISNAN(h) ? h : MINV(MAXV(x, l), h));             \
		return;                                                                    \
	default:                                                                           \
		return;                                                                    \
	}

#define ID(v) (v)
#define NONAN(v) 0
#define HLOAD(v) tn__h2f(v)
#define HSTORE(v) tn__f2h(v)
#define BLOAD(v) tn__bf2f(v)
#define BSTORE(v) tn__f2bf(v)

void TN_KERNEL_FN(tn__clamp_kernel)(int mode, enum tn_dtype dt, char *o, int64_t so,
				      const char *a, int64_t sa, const char *lo, int64_t slo,
				      const char *hi, int64_t shi, int64_t n)
{
	switch (dt) {
	case TN_BOOL:
		CLAMP_MODES(bool, ID, ID, NONAN)
	case TN_UINT8:
		CLAMP_MODES(uint8_t, ID, ID, NONAN)
	case TN_INT8:
		CLAMP_MODES(int8_t, ID, ID, NONAN)
	case TN_INT16:
		CLAMP_MODES(int16_t, ID, ID, NONAN)
	case TN_INT32:
		CLAMP_MODES(int32_t, ID, ID, NONAN)
	case TN_INT64:
		CLAMP_MODES(int64_t, ID, ID, NONAN)
	case TN_FLOAT16:
		CLAMP_MODES(tn_half, HLOAD, HSTORE, isnan)
	case TN_BFLOAT16:
		CLAMP_MODES(tn_bfloat16, BLOAD, BSTORE, isnan)
	case TN_FLOAT32:
		CLAMP_MODES(float, ID, ID, isnan)
	case TN_FLOAT64:
		CLAMP_MODES(double, ID, ID, isnan)
	default:
		return;
	}
}
