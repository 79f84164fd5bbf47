/* SPDX-License-Identifier: MIT */
/*
 * The copy/cast kernel of copy_ (and so of clone, contiguous, reshape's copies), compiled
 * once per CPU capability (see stub.h): one row of @n elements from @src (dtype @sdt, byte
 * stride @ss) to @dst (dtype @ddt, byte stride @ds), converting as PyTorch's static_cast
 * does. Every (destination, source) pair has its own loop, written by the X-macros below, so
 * each conversion is one C cast (no double rounding through an intermediate type, except
 * where PyTorch has it too: 16-bit floats convert through float). Contiguous rows of the same
 * dtype are one memcpy; contiguous rows to or from float16 go through float32 blocks with
 * vector conversions (the compiler vectorises the other pairs' loops, not float16's).
 */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "stub.h"
#include "half.h"
#include "half_rows.h"

/* Load one element as its natural C type, and store a C value as a dtype, by short tags in
 * TN_DTYPE_LIST order. The 16-bit floats go through float, as c10::Half and c10::BFloat16 do. */
#define LOAD_b(p) (*(const bool *)(p))
#define LOAD_u8(p) (*(const uint8_t *)(p))
#define LOAD_i8(p) (*(const int8_t *)(p))
#define LOAD_i16(p) (*(const int16_t *)(p))
#define LOAD_i32(p) (*(const int32_t *)(p))
#define LOAD_i64(p) (*(const int64_t *)(p))
#define LOAD_f16(p) tn__h2f(*(const tn_half *)(p))
#define LOAD_bf16(p) tn__bf2f(*(const tn_bfloat16 *)(p))
#define LOAD_f32(p) (*(const float *)(p))
#define LOAD_f64(p) (*(const double *)(p))

/*
 * A floating value converts to an integer as PyTorch's static_cast compiles on x86: the
 * truncating conversion to int64 (cvttsd2si) for int64 and uint8, to int32 (cvttss2si) for
 * int32, int16 and int8; NaN and values outside that range give the "integer indefinite"
 * INT64_MIN or INT32_MIN, and the narrow types keep the low bits (-2.5 -> uint8 254, 70000.7 ->
 * int16 4464, 3e9 -> int32 INT32_MIN, int16 0). Written with a range check so that no C
 * conversion is undefined, and so that every CPU capability gives the same bits (vector
 * conversions would saturate). Integer sources wrap as C's conversions do.
 */
static inline int64_t f64_to_i64(double v)
{
	return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}

static inline int64_t f32_to_i64(float v)
{
	return v >= -0x1p63f && v < 0x1p63f ? (int64_t)v : INT64_MIN;
}

static inline int32_t f64_to_i32(double v)
{
	return v > -0x1p31 - 1.0 && v < 0x1p31 ? (int32_t)v : INT32_MIN;
}

static inline int32_t f32_to_i32(float v)
{
	return v >= -0x1p31f && v < 0x1p31f ? (int32_t)v : INT32_MIN;
}

static inline int64_t int_to_i64(int64_t v)
{
	return v;
}

#define TO_I64(v) _Generic((v), double: f64_to_i64, float: f32_to_i64, default: int_to_i64)(v)
#define TO_I32(v) _Generic((v), double: f64_to_i32, float: f32_to_i32, default: int_to_i64)(v)

#define STORE_b(p, v) (*(bool *)(p) = ((v) != 0))
#define STORE_u8(p, v) (*(uint8_t *)(p) = (uint8_t)TO_I64(v))
#define STORE_i8(p, v) (*(int8_t *)(p) = (int8_t)TO_I32(v))
#define STORE_i16(p, v) (*(int16_t *)(p) = (int16_t)TO_I32(v))
#define STORE_i32(p, v) (*(int32_t *)(p) = (int32_t)TO_I32(v))
#define STORE_i64(p, v) (*(int64_t *)(p) = TO_I64(v))
#define STORE_f16(p, v) (*(tn_half *)(p) = tn__f2h((float)(v)))
#define STORE_bf16(p, v) (*(tn_bfloat16 *)(p) = tn__f2bf((float)(v)))
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

/*
 * Widening rows that stream to memory, on AVX-512: 256-bit vectors. A conversion that writes
 * more bytes than it reads runs about 20% faster out of the caches with 256-bit loads,
 * conversions and stores than with 512-bit ones on the Xeons measured (f32->f64 of 1e7
 * elements on one thread: 12.1 ms against 14.0 ms; f16->f32: 6.2 against 7.7 ms; a plain copy
 * is the same at both widths), while in the caches the 512-bit loop is the faster one. So a
 * contiguous row that writes at least WIDE_STREAM_BYTES takes these: the rows into 8-byte
 * dtypes compiled a second time for 256-bit vectors, and float16/bfloat16 to float32 through
 * half_rows.h's 256-bit blocks. The same bits either way: each element is the same C cast or
 * the same F16C/shift conversion.
 */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define TN_WIDE_ROWS 1
#define WIDE_STREAM_BYTES ((int64_t)1 << 20)

#define WIDE_ROW(DT, ST)                                                                     \
	__attribute__((target("prefer-vector-width=256"))) static void row256_##DT##_##ST(   \
		char *d, const char *s, int64_t n)                                           \
	{                                                                                    \
		CT_##DT *D = (CT_##DT *)d;                                                   \
		const CT_##ST *S = (const CT_##ST *)s;                                       \
		for (int64_t i = 0; i < n; i++)                                              \
			STORE_##DT(&D[i], LOAD_##ST(&S[i]));                                 \
	}
#define WIDE_ROWS_FOR_DST(DT) TAGS_INNER(WIDE_ROW, DT)
WIDE_ROWS_FOR_DST(f64)
WIDE_ROWS_FOR_DST(i64)

typedef void (*row256_fn)(char *, const char *, int64_t);
#define WIDE_ENTRY(DT, ST) row256_##DT##_##ST,
static const row256_fn rows256_f64[TN_NUM_DTYPES] = { TAGS_INNER(WIDE_ENTRY, f64) };
static const row256_fn rows256_i64[TN_NUM_DTYPES] = { TAGS_INNER(WIDE_ENTRY, i64) };

static void widen_h16_f64(double *d, const tn_half *s, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 f = tn_v8load_f16(s + i);
		_mm256_storeu_pd(d + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
		_mm256_storeu_pd(d + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
	}
	for (; i < n; i++)
		d[i] = (double)tn__h2f(s[i]);
}

/* The streaming widening row of a contiguous pair, or false for the ordinary path. */
static bool wide_row(char *dst, enum tn_dtype ddt, const char *src, enum tn_dtype sdt, int64_t n)
{
	if (n * (int64_t)tn_dtype_size(ddt) < WIDE_STREAM_BYTES ||
	    tn_dtype_size(ddt) <= tn_dtype_size(sdt))
		return false;
	if (ddt == TN_FLOAT64) {
		if (sdt == TN_FLOAT16)
			widen_h16_f64((double *)(void *)dst, (const tn_half *)(const void *)src, n);
		else
			rows256_f64[sdt](dst, src, n);
	} else if (ddt == TN_INT64) {
		if (sdt == TN_FLOAT16)
			return false;
		rows256_i64[sdt](dst, src, n);
	} else if (ddt == TN_FLOAT32 && sdt == TN_FLOAT16) {
		tn__h16_to_f32_256((float *)(void *)dst, (const tn_half *)(const void *)src, n);
	} else if (ddt == TN_FLOAT32 && sdt == TN_BFLOAT16) {
		tn__bf16_to_f32_256((float *)(void *)dst, (const tn_bfloat16 *)(const void *)src, n);
	} else {
		return false;
	}
	return true;
}
#endif

/*
 * A contiguous row with float16 on one side and another dtype on the other, through blocks of
 * float32: the float16 side converted a vector at a time (half_rows.h), the other side by its
 * row to or from float32. Every conversion of a 16-bit float goes through float (LOAD_f16 and
 * STORE_f16), so the two steps are the pair's own row element for element: the same bits.
 */
#define F32_BLOCK 512

static void via_f32(char *dst, enum tn_dtype ddt, const char *src, enum tn_dtype sdt, int64_t n)
{
	const int64_t dw = (int64_t)tn_dtype_size(ddt), sw = (int64_t)tn_dtype_size(sdt);
	_Alignas(64) float buf[F32_BLOCK];
	for (int64_t i = 0; i < n; i += F32_BLOCK) {
		const int64_t m = n - i < F32_BLOCK ? n - i : F32_BLOCK;
		const char *s = src + i * sw;
		char *d = dst + i * dw;
		/* Widened straight into a float32 destination, read in place from a float32
		 * source. */
		float *f = ddt == TN_FLOAT32 ? (float *)(void *)d : buf;
		const float *g = f;
		if (sdt == TN_FLOAT16)
			tn__h16_to_f32(f, (const tn_half *)(const void *)s, m);
		else if (sdt == TN_BFLOAT16)
			tn__bf16_to_f32(f, (const tn_bfloat16 *)(const void *)s, m);
		else if (sdt == TN_FLOAT32)
			g = (const float *)(const void *)s;
		else
			rows[TN_FLOAT32][sdt]((char *)f, 4, s, sw, m);
		if (ddt == TN_FLOAT16)
			tn__f32_to_h16((tn_half *)(void *)d, g, m);
		else if (ddt == TN_BFLOAT16)
			tn__f32_to_bf16((tn_bfloat16 *)(void *)d, g, m);
		else if (ddt != TN_FLOAT32)
			rows[ddt][TN_FLOAT32](d, dw, (const char *)g, 4, m);
	}
}

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
#ifdef TN_WIDE_ROWS
	if (ds == (int64_t)isz && ss == (int64_t)tn_dtype_size(sdt) &&
	    wide_row(dst, ddt, src, sdt, n))
		return;
#endif
	if ((ddt == TN_FLOAT16 || sdt == TN_FLOAT16) && ds == (int64_t)isz &&
	    ss == (int64_t)tn_dtype_size(sdt)) {
		via_f32(dst, ddt, src, sdt, n);
		return;
	}
	rows[ddt][sdt](dst, ds, src, ss, n);
}

/*
 * A transposing copy of 4-byte elements: dst[j * dld + i] = src[i * sld + j] for i < @n0,
 * j < @n1 (leading dimensions in elements; both sides contiguous along their own fast
 * dimension). Element by element, every load touches a new source line and the loop runs at
 * one element per several cycles; here 8 x 8 blocks (4 x 4 without AVX) are loaded as rows and
 * transposed in registers, so both sides move whole vectors. Edges go element by element.
 */
static void transpose_edges(uint32_t *d, int64_t dld, const uint32_t *s, int64_t sld, int64_t n0,
			    int64_t n1, int64_t i0, int64_t j0)
{
	/* The right strip (columns i >= i0) and the bottom strip (rows j >= j0). */
	for (int64_t j = 0; j < n1; j++)
		for (int64_t i = j < j0 ? i0 : 0; i < n0; i++)
			d[j * dld + i] = s[i * sld + j];
}

#if defined(__AVX2__)
static inline void transpose8(uint32_t *d, int64_t dld, const uint32_t *s, int64_t sld)
{
	__m256 r0 = _mm256_loadu_ps((const float *)(s + 0 * sld));
	__m256 r1 = _mm256_loadu_ps((const float *)(s + 1 * sld));
	__m256 r2 = _mm256_loadu_ps((const float *)(s + 2 * sld));
	__m256 r3 = _mm256_loadu_ps((const float *)(s + 3 * sld));
	__m256 r4 = _mm256_loadu_ps((const float *)(s + 4 * sld));
	__m256 r5 = _mm256_loadu_ps((const float *)(s + 5 * sld));
	__m256 r6 = _mm256_loadu_ps((const float *)(s + 6 * sld));
	__m256 r7 = _mm256_loadu_ps((const float *)(s + 7 * sld));
	__m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
	__m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
	__m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
	__m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
	__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
	__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
	__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
	_mm256_storeu_ps((float *)(d + 0 * dld), _mm256_permute2f128_ps(u0, u4, 0x20));
	_mm256_storeu_ps((float *)(d + 1 * dld), _mm256_permute2f128_ps(u1, u5, 0x20));
	_mm256_storeu_ps((float *)(d + 2 * dld), _mm256_permute2f128_ps(u2, u6, 0x20));
	_mm256_storeu_ps((float *)(d + 3 * dld), _mm256_permute2f128_ps(u3, u7, 0x20));
	_mm256_storeu_ps((float *)(d + 4 * dld), _mm256_permute2f128_ps(u0, u4, 0x31));
	_mm256_storeu_ps((float *)(d + 5 * dld), _mm256_permute2f128_ps(u1, u5, 0x31));
	_mm256_storeu_ps((float *)(d + 6 * dld), _mm256_permute2f128_ps(u2, u6, 0x31));
	_mm256_storeu_ps((float *)(d + 7 * dld), _mm256_permute2f128_ps(u3, u7, 0x31));
}
#define BLOCK 8
#elif defined(__SSE2__)
static inline void transpose4(uint32_t *d, int64_t dld, const uint32_t *s, int64_t sld)
{
	__m128 r0 = _mm_loadu_ps((const float *)(s + 0 * sld));
	__m128 r1 = _mm_loadu_ps((const float *)(s + 1 * sld));
	__m128 r2 = _mm_loadu_ps((const float *)(s + 2 * sld));
	__m128 r3 = _mm_loadu_ps((const float *)(s + 3 * sld));
	_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
	_mm_storeu_ps((float *)(d + 0 * dld), r0);
	_mm_storeu_ps((float *)(d + 1 * dld), r1);
	_mm_storeu_ps((float *)(d + 2 * dld), r2);
	_mm_storeu_ps((float *)(d + 3 * dld), r3);
}
#define BLOCK 4
#endif

void TN_KERNEL_FN(tn__transpose32_kernel)(void *dst, int64_t dld, const void *src, int64_t sld,
					    int64_t n0, int64_t n1)
{
	uint32_t *d = dst;
	const uint32_t *s = src;
	int64_t i0 = 0, j0 = 0;
#ifdef BLOCK
	/* Blocks: BLOCK source rows i (contiguous along j) become BLOCK destination rows j. */
	i0 = n0 - n0 % BLOCK;
	j0 = n1 - n1 % BLOCK;
	for (int64_t i = 0; i < i0; i += BLOCK)
		for (int64_t j = 0; j < j0; j += BLOCK)
#if BLOCK == 8
			transpose8(d + j * dld + i, dld, s + i * sld + j, sld);
#else
			transpose4(d + j * dld + i, dld, s + i * sld + j, sld);
#endif
#endif
	transpose_edges(d, dld, s, sld, n0, n1, i0, j0);
}


/*
 * The same for 2-byte elements (float16, bfloat16, int16: a channels-last 16-bit image made
 * contiguous): 8 x 8 blocks, eight 16-byte rows interleaved in three rounds (16-, 32- and 64-bit
 * halves) into eight columns, SSE2 in every capability; edges element by element.
 */
static void transpose16_edges(uint16_t *d, int64_t dld, const uint16_t *s, int64_t sld,
			      int64_t n0, int64_t n1, int64_t i0, int64_t j0)
{
	for (int64_t j = 0; j < n1; j++)
		for (int64_t i = j < j0 ? i0 : 0; i < n0; i++)
			d[j * dld + i] = s[i * sld + j];
}

#if defined(__SSE2__)
static inline void transpose8x8_16(uint16_t *d, int64_t dld, const uint16_t *s, int64_t sld)
{
	__m128i r[8], t[8], u[8];
	for (int k = 0; k < 8; k++)
		r[k] = _mm_loadu_si128((const __m128i *)(const void *)(s + k * sld));
	for (int k = 0; k < 4; k++) { /* rows 2k and 2k + 1, columns 0-3 and 4-7 */
		t[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
		t[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
	}
	for (int k = 0; k < 2; k++) { /* rows 4k to 4k + 3, columns in pairs */
		u[4 * k] = _mm_unpacklo_epi32(t[4 * k], t[4 * k + 2]);
		u[4 * k + 1] = _mm_unpackhi_epi32(t[4 * k], t[4 * k + 2]);
		u[4 * k + 2] = _mm_unpacklo_epi32(t[4 * k + 1], t[4 * k + 3]);
		u[4 * k + 3] = _mm_unpackhi_epi32(t[4 * k + 1], t[4 * k + 3]);
	}
	for (int k = 0; k < 4; k++) { /* columns 2k and 2k + 1, all eight rows */
		_mm_storeu_si128((__m128i *)(void *)(d + 2 * k * dld),
				 _mm_unpacklo_epi64(u[k], u[k + 4]));
		_mm_storeu_si128((__m128i *)(void *)(d + (2 * k + 1) * dld),
				 _mm_unpackhi_epi64(u[k], u[k + 4]));
	}
}
#endif

void TN_KERNEL_FN(tn__transpose16_kernel)(void *dst, int64_t dld, const void *src, int64_t sld,
					    int64_t n0, int64_t n1)
{
	uint16_t *d = dst;
	const uint16_t *s = src;
	int64_t i0 = 0, j0 = 0;
#if defined(__SSE2__)
	i0 = n0 - n0 % 8;
	j0 = n1 - n1 % 8;
	for (int64_t i = 0; i < i0; i += 8)
		for (int64_t j = 0; j < j0; j += 8)
			transpose8x8_16(d + j * dld + i, dld, s + i * sld + j, sld);
#endif
	transpose16_edges(d, dld, s, sld, n0, n1, i0, j0);
}
