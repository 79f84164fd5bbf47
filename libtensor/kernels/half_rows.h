/* SPDX-License-Identifier: MIT */
/*
 * 16-bit float rows through float32 vectors, for the kernels (compiled once per CPU
 * capability, see stub.h). GCC vectorises the scalar bfloat16 conversions of half.h but not
 * the float16 ones (it emits one vcvtph2ps per element, and float16 arithmetic ran at a third
 * of float32's speed per byte), so these loops convert whole vectors with vmath.h's
 * tn_vload_f16 / tn_vstore_f16 / tn_vload_bf16 / tn_vstore_bf16, which are bit for bit the
 * scalar conversions: a kernel gives the same bits through them as element by element, under
 * every capability (the DEFAULT one converts lane by lane).
 *
 * - H16_ROW: out[i] = EXPR(x = a[i], y = b[i]) over a row whose output is contiguous and whose
 *   inputs are contiguous or broadcast scalars (stride 0, not both), TN_VLF elements at a time
 *   on tn_vf vectors (VEXPR), the tail on floats (SEXPR, the same formula);
 * - H16_STREAM_ROW: the same with the output written by non-temporal stores from its first
 *   aligned element, for outputs past the caches;
 * - tn__h16_to_f32 / tn__f32_to_h16 and the bfloat16 pair: blocks of elements widened into
 *   float32 arrays and rounded back; tn__h16_to_f32_256 / tn__bf16_to_f32_256 widen with
 *   256-bit vectors under the AVX2 and AVX-512 capabilities.
 */
#ifndef TN_KERNELS_HALF_ROWS_H
#define TN_KERNELS_HALF_ROWS_H

#include <math.h>

#include "vmath.h"

/* A vector of bfloat16 values (low 16 bits of each lane zero, or the default NaN 0x7fc00000)
 * stored without rounding: the same bits as tn_vstore_bf16, for results that are one of the
 * inputs (maximum, minimum). */
static inline void tn__vstore_bf16_exact(tn_bfloat16 *p, tn_vf v)
{
#if defined(__AVX512F__)
	_mm256_storeu_si256((__m256i *)(void *)p,
			    _mm512_cvtepi32_epi16(_mm512_srli_epi32((__m512i)v, 16)));
#elif defined(__AVX2__)
	const __m256i t = _mm256_srli_epi32((__m256i)v, 16);
	const __m256i w = _mm256_packus_epi32(t, t);
	_mm_storeu_si128((__m128i *)(void *)p,
			 _mm256_castsi256_si128(_mm256_permute4x64_epi64(w, 0x08)));
#else
	const tn_vh h = __builtin_convertvector((tn_vu)v >> 16, tn_vh);
	memcpy(p, &h, sizeof(h));
#endif
}

/* A vector rounded to the 16-bit type and back (c10::Half or BFloat16 arithmetic's rounding of
 * an intermediate result). */
static inline tn_vf tn__vround_f16(tn_vf v)
{
	tn_half t[TN_VLF];
	tn_vstore_f16(t, v);
	return tn_vload_f16(t);
}

/* a * b + c rounded once, lane by lane as fmaf. */
static inline tn_vf tn__vfmaf(tn_vf a, tn_vf b, tn_vf c)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__) && defined(__AVX2__)
	return (tn_vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
	tn_vf r;
	for (int k = 0; k < (int)TN_VLF; k++)
		r[k] = fmaf(a[k], b[k], c[k]);
	return r;
#endif
}

/* NaN if either lane is NaN, else x86's maxps/minps (between equal values the second input),
 * as binary2_kernel.c's scalar MAXF and MINF. */
static inline tn_vf tn__vmaxf_nan(tn_vf x, tn_vf y)
{
	return tn_vf_msel(tn_vf_unord(x, y), tn_vf_splat(NAN), tn_vmaxf(x, y));
}

static inline tn_vf tn__vminf_nan(tn_vf x, tn_vf y)
{
	return tn_vf_msel(tn_vf_unord(x, y), tn_vf_splat(NAN), tn_vminf(x, y));
}

/* A comparison's lanes (all ones or zero) as TN_VLF bools. */
static inline void tn__vstore_mask(bool *p, tn_vi m)
{
	typedef int8_t tn__vb __attribute__((vector_size(TN_VLF)));
	const tn__vb b = __builtin_convertvector(m, tn__vb) & 1;
	memcpy(p, &b, sizeof(b));
}

/* The vector loop of a row for one combination of input strides: X and Y are the vector
 * operands' expressions at element i_. */
#define H16_VLOOP_(X, Y, VSTORE, VEXPR)                                                    \
	for (; i_ + TN_VLF <= n_; i_ += TN_VLF) {                                          \
		const tn_vf x = (X), y = (Y);                                              \
		VSTORE(O_ + i_, VEXPR);                                                    \
	}

/*
 * One row of @n elements: TO out[] at @o, T inputs at @a and @b with byte strides @sa and @sb,
 * each the element size or 0 (not both 0). VLOAD(const T *) and SLOAD(T) widen, VSTORE(TO *,
 * vector) and SSTORE(TO lvalue, float) store VEXPR and SEXPR, which name x and y.
 */
#define H16_ROW(TO, T, o, a, sa, b, sb, n, VLOAD, SLOAD, VSTORE, SSTORE, VEXPR, SEXPR)       \
	do {                                                                               \
		TO *O_ = (TO *)(o);                                                        \
		const T *A_ = (const T *)(a), *B_ = (const T *)(b);                        \
		const int64_t n_ = (n);                                                    \
		int64_t i_ = 0;                                                            \
		if ((sa) && (sb)) {                                                        \
			H16_VLOOP_(VLOAD(A_ + i_), VLOAD(B_ + i_), VSTORE, VEXPR)          \
		} else if (sa) {                                                           \
			const tn_vf ys_ = tn_vf_splat(SLOAD(B_[0]));                       \
			H16_VLOOP_(VLOAD(A_ + i_), ys_, VSTORE, VEXPR)                     \
		} else {                                                                   \
			const tn_vf xs_ = tn_vf_splat(SLOAD(A_[0]));                       \
			H16_VLOOP_(xs_, VLOAD(B_ + i_), VSTORE, VEXPR)                     \
		}                                                                          \
		for (; i_ < n_; i_++) {                                                    \
			const float x = SLOAD(A_[(sa) ? i_ : 0]), y = SLOAD(B_[(sb) ? i_ : 0]); \
			SSTORE(O_[i_], SEXPR);                                             \
		}                                                                          \
	} while (0)

/*
 * Non-temporal stores of one vector's worth of 16-bit outputs (TN_VLF elements, TN_VBYTES / 2
 * bytes, as many aligned at @p) from @t. Ordered before later stores by the caller's fence
 * (tn__store_fence), as every streamed row.
 */
#define H16_SALIGN (TN_VBYTES / 2)
static inline void tn__stream_h16(void *p, const void *t)
{
#if defined(__AVX512F__)
	__m256i v;
	memcpy(&v, t, sizeof(v));
	_mm256_stream_si256((__m256i *)p, v);
#elif defined(__AVX2__)
	__m128i v;
	memcpy(&v, t, sizeof(v));
	_mm_stream_si128((__m128i *)p, v);
#else
	long long v;
	memcpy(&v, t, sizeof(v));
	_mm_stream_si64((long long *)p, v);
#endif
}

#define H16_SLOOP_(T, X, Y, VSTORE, VEXPR)                                                 \
	for (; i_ + TN_VLF <= n_; i_ += TN_VLF) {                                          \
		const tn_vf x = (X), y = (Y);                                              \
		T t_[TN_VLF];                                                              \
		VSTORE(t_, VEXPR);                                                         \
		tn__stream_h16(O_ + i_, t_);                                               \
	}

/* H16_ROW for a 16-bit output of the inputs' type T, written with streaming stores from its
 * first element aligned to a vector of outputs (the head and the tail through SEXPR). */
#define H16_STREAM_ROW(T, o, a, sa, b, sb, n, VLOAD, SLOAD, VSTORE, SSTORE, VEXPR, SEXPR)    \
	do {                                                                               \
		T *O_ = (T *)(o);                                                          \
		const T *A_ = (const T *)(a), *B_ = (const T *)(b);                        \
		const int64_t n_ = (n);                                                    \
		int64_t i_ = 0;                                                            \
		for (; i_ < n_ && (uintptr_t)(O_ + i_) % H16_SALIGN != 0; i_++) {          \
			const float x = SLOAD(A_[(sa) ? i_ : 0]), y = SLOAD(B_[(sb) ? i_ : 0]); \
			SSTORE(O_[i_], SEXPR);                                             \
		}                                                                          \
		if ((sa) && (sb)) {                                                        \
			H16_SLOOP_(T, VLOAD(A_ + i_), VLOAD(B_ + i_), VSTORE, VEXPR)       \
		} else if (sa) {                                                           \
			const tn_vf ys_ = tn_vf_splat(SLOAD(B_[0]));                       \
			H16_SLOOP_(T, VLOAD(A_ + i_), ys_, VSTORE, VEXPR)                  \
		} else {                                                                   \
			const tn_vf xs_ = tn_vf_splat(SLOAD(A_[0]));                       \
			H16_SLOOP_(T, xs_, VLOAD(B_ + i_), VSTORE, VEXPR)                  \
		}                                                                          \
		for (; i_ < n_; i_++) {                                                    \
			const float x = SLOAD(A_[(sa) ? i_ : 0]), y = SLOAD(B_[(sb) ? i_ : 0]); \
			SSTORE(O_[i_], SEXPR);                                             \
		}                                                                          \
	} while (0)

/* ---- blocks: @n 16-bit elements to float32 and back ---- */

/* VOP on each whole vector of W elements, SOP on each element of the tail. */
#define H16_BLOCK_(W, VOP, SOP)                                                             \
	do {                                                                                \
		const int64_t nv_ = n - n % (W);                                            \
		for (int64_t i = 0; i < nv_; i += (W))                                      \
			VOP;                                                                \
		for (int64_t i = nv_; i < n; i++)                                           \
			SOP;                                                                \
	} while (0)

static inline void tn__h16_to_f32(float *d, const tn_half *s, int64_t n)
{
	H16_BLOCK_(TN_VLF, tn_vstore_f32(d + i, tn_vload_f16(s + i)), d[i] = tn__h2f(s[i]));
}

static inline void tn__f32_to_h16(tn_half *d, const float *s, int64_t n)
{
	H16_BLOCK_(TN_VLF, tn_vstore_f16(d + i, tn_vload_f32(s + i)), d[i] = tn__f2h(s[i]));
}

static inline void tn__bf16_to_f32(float *d, const tn_bfloat16 *s, int64_t n)
{
	H16_BLOCK_(TN_VLF, tn_vstore_f32(d + i, tn_vload_bf16(s + i)), d[i] = tn__bf2f(s[i]));
}

static inline void tn__f32_to_bf16(tn_bfloat16 *d, const float *s, int64_t n)
{
	H16_BLOCK_(TN_VLF, tn_vstore_bf16(d + i, tn_vload_f32(s + i)), d[i] = tn__f2bf(s[i]));
}

#if defined(__AVX2__)
/* The widening blocks at 256 bits, whatever the capability's width: on AVX-512 a widening row
 * that streams to memory runs about 20% faster with 256-bit vectors (copy_kernel.c). */
static inline void tn__h16_to_f32_256(float *d, const tn_half *s, int64_t n)
{
	H16_BLOCK_(8, _mm256_storeu_ps(d + i, tn_v8load_f16(s + i)), d[i] = tn__h2f(s[i]));
}

static inline void tn__bf16_to_f32_256(float *d, const tn_bfloat16 *s, int64_t n)
{
	H16_BLOCK_(8, _mm256_storeu_ps(d + i, tn_v8load_bf16(s + i)), d[i] = tn__bf2f(s[i]));
}
#endif

#endif /* TN_KERNELS_HALF_ROWS_H */
