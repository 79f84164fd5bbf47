/* SPDX-License-Identifier: MIT */
/*
 * The copy/cast kernel of copy_ (and so of clone, contiguous, reshape's copies), compiled
 * once per CPU capability (see stub.h): one row of @n elements from @src (dtype @sdt, byte
 * stride @ss) to @dst (dtype @ddt, byte stride @ds), converting as PyTorch's static_cast
 * does. Every (destination, source) pair has its own loop, written by the X-macros below, so
 * each conversion is one C cast (no double rounding through an intermediate type, except
 * where PyTorch has it too: 16-bit floats convert through float). Contiguous rows of the same
 * dtype are one memcpy.
 */
#include <string.h>

#include "stub.h"

/* Load one element as its natural C type, and store a C value as a dtype, by short tags in
 * TN_DTYPE_LIST order. The 16-bit floats go through float, as c10::Half and c10::BFloat16 do. */
#define LOAD_b(p) (*(const bool *)(p))
#define LOAD_u8(p) (*(const uint8_t *)(p))
#define LOAD_i8(p) (*(const int8_t *)(p))
#define LOAD_i16(p) (*(const int16_t *)(p))
#define LOAD_i32(p) (*(const int32_t *)(p))
#define LOAD_i64(p) (*(const int64_t *)(p))
#define LOAD_f16(p) tn_half_to_float(*(const tn_half *)(p))
#define LOAD_bf16(p) tn_bfloat16_to_float(*(const tn_bfloat16 *)(p))
#define LOAD_f32(p) (*(const float *)(p))
#define LOAD_f64(p) (*(const double *)(p))

/* A float converts to a narrow integer through int64 (truncation toward zero, then a
 * two's-complement wrap): what PyTorch's static_cast gives on x86 (-2.5 -> uint8 254), where
 * a direct float-to-uint8 conversion is undefined in C and vectorised code may saturate. */
#define STORE_b(p, v) (*(bool *)(p) = ((v) != 0))
#define STORE_u8(p, v) (*(uint8_t *)(p) = (uint8_t)(int64_t)(v))
#define STORE_i8(p, v) (*(int8_t *)(p) = (int8_t)(int64_t)(v))
#define STORE_i16(p, v) (*(int16_t *)(p) = (int16_t)(int64_t)(v))
#define STORE_i32(p, v) (*(int32_t *)(p) = (int32_t)(int64_t)(v))
#define STORE_i64(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define STORE_f16(p, v) (*(tn_half *)(p) = tn_half_from_float((float)(v)))
#define STORE_bf16(p, v) (*(tn_bfloat16 *)(p) = tn_bfloat16_from_float((float)(v)))
#define STORE_f32(p, v) (*(float *)(p) = (float)(v))
#define STORE_f64(p, v) (*(double *)(p) = (double)(v))

/* The C type of each tag, for the contiguous fast path's element sizes. */
#define CT_b bool
#define CT_u8 uint8_t
#define CT_i8 int8_t
#define CT_i16 int16_t
#define CT_i32 int32_t
#define CT_i64 int64_t
#define CT_f16 tn_half
#define CT_bf16 tn_bfloat16
#define CT_f32 float
#define CT_f64 double

/* One conversion row; both sides contiguous is a separate loop over indices, which the
 * compiler vectorises (the strided one it cannot). */
#define ROW(DT, ST)                                                                          \
	static void row_##DT##_##ST(char *d, int64_t ds, const char *s, int64_t ss, int64_t n) \
	{                                                                                    \
		if (ds == (int64_t)sizeof(CT_##DT) && ss == (int64_t)sizeof(CT_##ST)) {      \
			CT_##DT *D = (CT_##DT *)d;                                           \
			const CT_##ST *S = (const CT_##ST *)s;                               \
			for (int64_t i = 0; i < n; i++)                                      \
				STORE_##DT(&D[i], LOAD_##ST(&S[i]));                         \
			return;                                                              \
		}                                                                            \
		for (int64_t i = 0; i < n; i++)                                              \
			STORE_##DT(d + i * ds, LOAD_##ST(s + i * ss));                       \
	}

/* Two copies of the tag list, since a macro cannot expand inside its own expansion. */
#define TAGS_OUTER(X) X(b) X(u8) X(i8) X(i16) X(i32) X(i64) X(f16) X(bf16) X(f32) X(f64)
#define TAGS_INNER(X, DT)                                                                  \
	X(DT, b) X(DT, u8) X(DT, i8) X(DT, i16) X(DT, i32) X(DT, i64) X(DT, f16) X(DT, bf16) \
		X(DT, f32) X(DT, f64)

#define ROWS_FOR_DST(DT) TAGS_INNER(ROW, DT)
TAGS_OUTER(ROWS_FOR_DST)

typedef void (*row_fn)(char *, int64_t, const char *, int64_t, int64_t);

#define ENTRY(DT, ST) row_##DT##_##ST,
#define ENTRIES_FOR_DST(DT) { TAGS_INNER(ENTRY, DT) },
static const row_fn rows[TN_NUM_DTYPES][TN_NUM_DTYPES] = { TAGS_OUTER(ENTRIES_FOR_DST) };

void TN_KERNEL_FN(tn__cast_kernel)(char *dst, enum tn_dtype ddt, int64_t ds, const char *src,
				     enum tn_dtype sdt, int64_t ss, int64_t n)
{
	size_t isz = tn_dtype_size(ddt);
	if (ddt == sdt) {
		if (ds == (int64_t)isz && ss == (int64_t)isz) {
			memcpy(dst, src, (size_t)n * isz);
			return;
		}
		if (ss == 0) { /* a broadcast source: fill */
			for (int64_t i = 0; i < n; i++)
				memcpy(dst + i * ds, src, isz);
			return;
		}
		switch (isz) {
		case 1:
			for (int64_t i = 0; i < n; i++)
				dst[i * ds] = src[i * ss];
			return;
		case 2:
			for (int64_t i = 0; i < n; i++)
				memcpy(dst + i * ds, src + i * ss, 2);
			return;
		case 4:
			for (int64_t i = 0; i < n; i++)
				memcpy(dst + i * ds, src + i * ss, 4);
			return;
		default:
			for (int64_t i = 0; i < n; i++)
				memcpy(dst + i * ds, src + i * ss, 8);
			return;
		}
	}
	rows[ddt][sdt](dst, ds, src, ss, n);
}
