/* SPDX-License-Identifier: MIT */
/*
 * Vector math for the kernels, compiled once per CPU capability (see stub.h) at the width of
 * its instruction set: 16 float32 lanes for AVX-512, 8 for AVX2, 4 for the DEFAULT build's
 * SSE2 (GCC vector extensions, so the arithmetic reads as C).
 *
 * - tn_vf / tn_vd: float32 / float64 vectors; tn_vmath_*: loads and stores of float32 vectors
 *   from and to float32, float16 and bfloat16 arrays (float16 through F16C's vcvtph2ps and
 *   vcvtps2ph where the capability has them, bfloat16 through 16-bit shifts with
 *   round-to-nearest-even), bit for bit the scalar conversions of dtype.c: NaN keeps its sign
 *   and top payload bits and is quietened, overflow rounds to infinity.
 * - The transcendental functions are SLEEF's (Debian's libsleef, what PyTorch's CPU kernels
 *   call): the 1.0-ulp ("u10") variant of each function built for the capability's ISA
 *   (avx512f, avx2, sse2). Each is within 1 ulp of the correctly rounded result over its whole
 *   domain, subnormal arguments and results included, with C99's special values (NaN, +-inf,
 *   +-0, overflow to inf). float32's erf and tanh are our own (polynomials fitted by
 *   gen_vmath.py, within 1.5 ulp, three to seven times SLEEF's speed), float32's gelu uses
 *   ATen's erf approximation (bounded relative to its input), and an inline Cephes exp serves
 *   softmax, erf, tanh and both forms of gelu; their quotients go through the reciprocal
 *   estimate (tn_vdivf_fast) and their selects through mask registers (tn_vf_msel). tests/check_vmath.c measures the error of every
 *   function over dense sweeps of the float32 and float64 ranges.
 */
#ifndef TN_KERNELS_VMATH_H
#define TN_KERNELS_VMATH_H

#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <sleef.h>

#include <tensor/dtype.h>

#include "half.h"
#include "vmath_poly.h"

/* The vector functions are inlined into their loops, so that consecutive vectors overlap. */
#define TN_VINLINE __attribute__((always_inline))

#if defined(__AVX512F__)
#define TN_VBYTES 64
typedef __m512 tn__nvf;
#define TN__PS(op) _mm512_##op##_ps
typedef __m512d tn__nvd;
#define TN_SLEEF_F(fn) Sleef_##fn##f16_u10avx512f
#define TN_SLEEF_D(fn) Sleef_##fn##d8_u10avx512f
#elif defined(__AVX2__)
#define TN_VBYTES 32
typedef __m256 tn__nvf;
#define TN__PS(op) _mm256_##op##_ps
typedef __m256d tn__nvd;
#define TN_SLEEF_F(fn) Sleef_##fn##f8_u10avx2
#define TN_SLEEF_D(fn) Sleef_##fn##d4_u10avx2
#elif defined(__SSE2__)
#define TN_VBYTES 16
typedef __m128 tn__nvf;
#define TN__PS(op) _mm_##op##_ps
typedef __m128d tn__nvd;
#define TN_SLEEF_F(fn) Sleef_##fn##f4_u10sse2
#define TN_SLEEF_D(fn) Sleef_##fn##d2_u10sse2
#else
#error "vmath.h: SLEEF's vector functions need x86-64 (SSE2 at least)"
#endif

/* Lanes per vector. */
#define TN_VLF ((int64_t)(TN_VBYTES / 4))
#define TN_VLD ((int64_t)(TN_VBYTES / 8))

typedef float tn_vf __attribute__((vector_size(TN_VBYTES)));
typedef double tn_vd __attribute__((vector_size(TN_VBYTES)));
typedef int32_t tn_vi __attribute__((vector_size(TN_VBYTES)));
typedef uint32_t tn_vu __attribute__((vector_size(TN_VBYTES)));
typedef int64_t tn_vl __attribute__((vector_size(TN_VBYTES)));
typedef uint16_t tn_vh __attribute__((vector_size(TN_VBYTES / 2)));

/* Every lane @x (-0.0 included, which 0 + x would lose). */
static inline TN_VINLINE tn_vf tn_vf_splat(float x)
{
	tn_vf v;
	for (int i = 0; i < (int)TN_VLF; i++)
		v[i] = x;
	return v;
}

static inline TN_VINLINE tn_vd tn_vd_splat(double x)
{
	tn_vd v;
	for (int i = 0; i < (int)TN_VLD; i++)
		v[i] = x;
	return v;
}

/* Lanes of @a where @m is set (all ones), of @b elsewhere. */
/* Lanes of @a where @m is set (all ones), of @b elsewhere. */
static inline TN_VINLINE tn_vf tn_vf_sel(tn_vi m, tn_vf a, tn_vf b)
{
	return (tn_vf)((m & (tn_vi)a) | (~m & (tn_vi)b));
}

static inline TN_VINLINE tn_vd tn_vd_sel(tn_vl m, tn_vd a, tn_vd b)
{
	return (tn_vd)((m & (tn_vl)a) | (~m & (tn_vl)b));
}

/*
 * Lane masks of float32 comparisons, for the functions' hot paths: AVX-512's mask registers
 * (a comparison into k and one masked blend; GCC's vector comparisons above turn into a mask,
 * back into a vector and a two-instruction select), vectors of all-ones lanes elsewhere.
 */
#if defined(__AVX512F__)
typedef __mmask16 tn_vfm;
#define TN__VF_CMP(a, b, pred) _mm512_cmp_ps_mask((__m512)(a), (__m512)(b), pred)
static inline TN_VINLINE tn_vf tn_vf_msel(tn_vfm m, tn_vf a, tn_vf b)
{
	return (tn_vf)_mm512_mask_blend_ps(m, (__m512)b, (__m512)a);
}
#else
typedef tn_vi tn_vfm;
#if defined(__AVX2__)
#define TN__VF_CMP(a, b, pred) ((tn_vi)_mm256_cmp_ps((__m256)(a), (__m256)(b), pred))
#endif
static inline TN_VINLINE tn_vf tn_vf_msel(tn_vfm m, tn_vf a, tn_vf b)
{
	return tn_vf_sel(m, a, b);
}
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#define tn_vf_lt(a, b) TN__VF_CMP(a, b, _CMP_LT_OQ)
#define tn_vf_gt(a, b) TN__VF_CMP(a, b, _CMP_GT_OQ)
#define tn_vf_le(a, b) TN__VF_CMP(a, b, _CMP_LE_OQ)
#define tn_vf_ge(a, b) TN__VF_CMP(a, b, _CMP_GE_OQ)
#define tn_vf_isnan(a) TN__VF_CMP(a, a, _CMP_UNORD_Q)
#define tn_vf_unord(a, b) TN__VF_CMP(a, b, _CMP_UNORD_Q)
#else
#define tn_vf_lt(a, b) ((tn_vi)((a) < (b)))
#define tn_vf_gt(a, b) ((tn_vi)((a) > (b)))
#define tn_vf_le(a, b) ((tn_vi)((a) <= (b)))
#define tn_vf_ge(a, b) ((tn_vi)((a) >= (b)))
#define tn_vf_isnan(a) ((tn_vi)((a) != (a)))
#define tn_vf_unord(a, b) ((tn_vi)(((a) != (a)) | ((b) != (b))))
#endif

/* min(a, b) and max(a, b) as the x86 instructions: b where either is NaN, so
 * tn_vminf(hi, x) clamps x from above and keeps a NaN x. One instruction. */
static inline TN_VINLINE tn_vf tn_vminf(tn_vf a, tn_vf b)
{
	return (tn_vf)TN__PS(min)((tn__nvf)a, (tn__nvf)b);
}

static inline TN_VINLINE tn_vf tn_vmaxf(tn_vf a, tn_vf b)
{
	return (tn_vf)TN__PS(max)((tn__nvf)a, (tn__nvf)b);
}

/* ---- loads and stores: float32 vectors from and to float32, float16, bfloat16 ---- */

static inline TN_VINLINE tn_vf tn_vload_f32(const float *p)
{
	tn_vf v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline TN_VINLINE void tn_vstore_f32(float *p, tn_vf v)
{
	memcpy(p, &v, sizeof(v));
}

static inline TN_VINLINE tn_vd tn_vload_f64(const double *p)
{
	tn_vd v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline TN_VINLINE void tn_vstore_f64(double *p, tn_vd v)
{
	memcpy(p, &v, sizeof(v));
}

/* @v rounded to bfloat16 and back, as tn_vstore_bf16 then tn_vload_bf16. */
static inline TN_VINLINE tn_vf tn_vround_bf16(tn_vf v)
{
	tn_vu u = (tn_vu)v;
	tn_vu r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	tn_vu nan = (tn_vu)((u & 0x7fffffffu) > 0x7f800000u);
	return (tn_vf)((nan & ((u & 0xffff0000u) | 0x400000u)) | (~nan & r));
}

#if defined(__AVX2__)
/* Eight bfloat16 / float16 values widened to a 256-bit float32 vector: the AVX2 capability's
 * loads, and AVX-512's for the rows that stream to memory (half_rows.h's 256-bit blocks). The
 * AVX2 capability requires F16C (cpu_capability.c checks it). */
static inline TN_VINLINE __m256 tn_v8load_bf16(const tn_bfloat16 *p)
{
	return (__m256)_mm256_slli_epi32(
		_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16);
}

static inline TN_VINLINE __m256 tn_v8load_f16(const tn_half *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
#endif

static inline TN_VINLINE tn_vf tn_vload_bf16(const tn_bfloat16 *p)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_slli_epi32(
		_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16);
#elif defined(__AVX2__)
	return (tn_vf)tn_v8load_bf16(p);
#else
	tn_vh h;
	memcpy(&h, p, sizeof(h));
	return (tn_vf)(__builtin_convertvector(h, tn_vu) << 16);
#endif
}

/* Round to nearest even, as tn_bfloat16_from_float: NaN keeps its sign and top payload bits
 * with the quiet bit set; a carry out of the largest finite value is infinity. The widening
 * and the narrowing are one instruction each where the capability has them (GCC splits
 * __builtin_convertvector between 16 and 32 bits into halves and shuffles). */
static inline TN_VINLINE void tn_vstore_bf16(tn_bfloat16 *p, tn_vf v)
{
#if defined(__AVX512F__)
	/* t = u + 0x7fff + (bit 16 of u), or u with the quiet bit for NaN; its top half. */
	const __m512i u = (__m512i)v;
	__m512i t = _mm512_add_epi32(
		_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
		_mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
	const __mmask16 nan = _mm512_cmpgt_epu32_mask(
		_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
	t = _mm512_mask_mov_epi32(t, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
	_mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(_mm512_srli_epi32(t, 16)));
#elif defined(__AVX2__)
	const __m256i u = (__m256i)v;
	__m256i t = _mm256_add_epi32(
		_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
		_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)));
	/* Both sides non-negative as int32: the signed comparison is the unsigned one. */
	const __m256i nan = _mm256_cmpgt_epi32(
		_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
	t = _mm256_blendv_epi8(t, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
	t = _mm256_srli_epi32(t, 16);
	/* Every lane fits 16 bits: the unsigned saturation keeps it; the packing works within
	 * 128-bit halves, so the quarters are put back in order. */
	const __m256i w = _mm256_packus_epi32(t, t);
	_mm_storeu_si128((__m128i *)(void *)p,
			 _mm256_castsi256_si128(_mm256_permute4x64_epi64(w, 0x08)));
#else
	tn_vu u = (tn_vu)v;
	tn_vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	tn_vu nan = (tn_vu)((u & 0x7fffffffu) > 0x7f800000u);
	r = (nan & ((u >> 16) | 0x40u)) | (~nan & r);
	tn_vh h = __builtin_convertvector(r, tn_vh);
	memcpy(p, &h, sizeof(h));
#endif
}

static inline TN_VINLINE tn_vf tn_vload_f16(const tn_half *p)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
#elif defined(__AVX2__)
	return (tn_vf)tn_v8load_f16(p);
#else
	tn_vf v;
	for (int i = 0; i < (int)TN_VLF; i++)
		v[i] = tn__h2f(p[i]);
	return v;
#endif
}

static inline TN_VINLINE void tn_vstore_f16(tn_half *p, tn_vf v)
{
#if defined(__AVX512F__)
	_mm256_storeu_si256((__m256i *)(void *)p,
			    _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__) || defined(__AVX2__)
	_mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
#else
	for (int i = 0; i < (int)TN_VLF; i++)
		p[i] = tn__f2h(v[i]);
#endif
}

/* ---- SLEEF's functions on our vector types ---- */

#define TN_VMATH_F1(name, fn)                                           \
	static inline TN_VINLINE tn_vf name(tn_vf x)                    \
	{                                                               \
		return (tn_vf)TN_SLEEF_F(fn)((tn__nvf)x);               \
	}
#define TN_VMATH_D1(name, fn)                                           \
	static inline TN_VINLINE tn_vd name(tn_vd x)                               \
	{                                                               \
		return (tn_vd)TN_SLEEF_D(fn)((tn__nvd)x);               \
	}
#define TN_VMATH_F2(name, fn)                                           \
	static inline TN_VINLINE tn_vf name(tn_vf x, tn_vf y)                      \
	{                                                               \
		return (tn_vf)TN_SLEEF_F(fn)((tn__nvf)x, (tn__nvf)y);   \
	}
#define TN_VMATH_D2(name, fn)                                           \
	static inline TN_VINLINE tn_vd name(tn_vd x, tn_vd y)                      \
	{                                                               \
		return (tn_vd)TN_SLEEF_D(fn)((tn__nvd)x, (tn__nvd)y);   \
	}

#define TN_VMATH_ALL(F1, D1, F2, D2)                                                       \
	F1(tn_vexpf, exp) F1(tn_vexpm1f, expm1) F1(tn_vlogf, log) F1(tn__vlog1pf, log1p)    \
	F1(tn_vlog2f, log2) F1(tn_vsinf, sin) F1(tn_vcosf, cos) F1(tn_vtanf, tan)           \
	D1(tn_vexp, exp) D1(tn_vexpm1, expm1) D1(tn_vlog, log) D1(tn__vlog1p, log1p)         \
	D1(tn_vlog2, log2) D1(tn_vsin, sin) D1(tn_vcos, cos) D1(tn_vtan, tan)               \
	D1(tn__vtanh, tanh) D1(tn__verf, erf)                                                 \
	F1(tn_vtanhf_sleef, tanh)                                                           \
	F2(tn_vpowf, pow) F2(tn_vatan2f, atan2) D2(tn_vpow, pow) D2(tn_vatan2, atan2)
TN_VMATH_ALL(TN_VMATH_F1, TN_VMATH_D1, TN_VMATH_F2, TN_VMATH_D2)

static inline TN_VINLINE bool tn_vi_any(tn_vi m)
{
	int32_t r = 0;
	for (int i = 0; i < (int)TN_VLF; i++)
		r |= m[i];
	return r != 0;
}

static inline TN_VINLINE bool tn_vl_any(tn_vl m)
{
	int64_t r = 0;
	for (int i = 0; i < (int)TN_VLD; i++)
		r |= m[i];
	return r != 0;
}

/* ---- float32 functions of our own: exp (Cephes), erf, tanh, gelu (ATen's) ---- */

/* a * b + c, fused where the capability has FMA. */
static inline TN_VINLINE tn_vf tn_vfmaf(tn_vf a, tn_vf b, tn_vf c)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
	return (tn_vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
	return a * b + c;
#endif
}

/* p[0] + u (p[1] + u (... + u p[n - 1])). */
static inline TN_VINLINE tn_vf tn__vpolyf(tn_vf u, const float *p, int n)
{
	tn_vf r = tn_vf_splat(p[n - 1]);
#pragma GCC unroll 16
	for (int k = n - 2; k >= 0; k--)
		r = tn_vfmaf(r, u, tn_vf_splat(p[k]));
	return r;
}

/*
 * n / d for finite, normal d, without the divider: the capability's reciprocal estimate
 * (AVX-512's 14 bits, AVX2's 12), one Newton step (23 bits or more), the quotient and one
 * correction by its residual n - q d (exact in an FMA), within 1 ulp of the true quotient and
 * usually the correctly rounded one, with the quotient's sign (a zero quotient keeps it). A
 * zmm division occupies the divider for ~10 cycles; this is seven instructions that pipeline.
 * Without FMA (SSE2) it is the division.
 */
static inline TN_VINLINE tn_vf tn_vdivf_fast(tn_vf n, tn_vf d)
{
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
	const tn_vf one = tn_vf_splat(1.0f);
#if defined(__AVX512F__)
	tn_vf r = (tn_vf)_mm512_rcp14_ps((__m512)d);
#else
	tn_vf r = (tn_vf)_mm256_rcp_ps((__m256)d);
#endif
	r = tn_vfmaf(r, tn_vfmaf(-d, r, one), r);
	tn_vf q = n * r;
	tn_vf c = tn_vfmaf(tn_vfmaf(-d, q, n), r, q);
	/* The quotient's sign, which the correction loses on a zero quotient (-0 + +0 rounds
	 * to +0); elsewhere the correction is far below q and keeps its sign. */
	return (tn_vf)(((tn_vu)c & 0x7fffffffu) | ((tn_vu)q & 0x80000000u));
#else
	return n / d;
#endif
}

/*
 * Cephes' expf: the reduction x = n ln 2 + r by ln 2 in two parts (n rounded to nearest even by
 * the 1.5 * 2^23 trick) and e^r by a degree-6 polynomial, with FMA where the capability has
 * it. Returns e^r; n in *@n.
 */
static inline TN_VINLINE tn_vf tn__vexpf_reduced(tn_vf x, tn_vf *n)
{
	const tn_vf magic = tn_vf_splat(12582912.0f);
	tn_vf k = tn_vfmaf(x, tn_vf_splat(1.44269504088896341f), magic) - magic;
	tn_vf r = tn_vfmaf(k, tn_vf_splat(-0.693359375f), x);
	r = tn_vfmaf(k, tn_vf_splat(2.12194440e-4f), r);
	/* The polynomial in Estrin's form: three independent pairs, then two steps in r^2
	 * (Horner's six dependent steps left the loops waiting on latency, not on the FMA
	 * units: the scheduler holds about two elements' chains at a time). */
	tn_vf r2 = r * r;
	tn_vf a = tn_vfmaf(tn_vf_splat(1.9875691500e-4f), r, tn_vf_splat(1.3981999507e-3f));
	tn_vf b = tn_vfmaf(tn_vf_splat(8.3334519073e-3f), r, tn_vf_splat(4.1665795894e-2f));
	tn_vf c = tn_vfmaf(tn_vf_splat(1.6666665459e-1f), r, tn_vf_splat(5.0000001201e-1f));
	tn_vf p = tn_vfmaf(tn_vfmaf(a, r2, b), r2, c);
	*n = k;
	return tn_vfmaf(p, r2, r) + tn_vf_splat(1.0f);
}

/* 2^n for integral n in [-126, 127]: n + 127 in the exponent field. */
static inline TN_VINLINE tn_vf tn__vexp2if(tn_vf n)
{
	return (tn_vf)((__builtin_convertvector(n, tn_vi) + 127) << 23);
}

/*
 * exp(x) for x in [-87.3, 88.3] (a normal result; nothing else is checked). The callers whose
 * arguments are clamped (tanh, gelu, erf) take it without tn_vexpf_cephes's special-value
 * selects, a third of that function's instructions.
 */
static inline TN_VINLINE tn_vf tn__vexpf_core(tn_vf x)
{
	tn_vf n;
	tn_vf p = tn__vexpf_reduced(x, &n);
	return p * tn__vexp2if(n);
}

/*
 * exp(x), float32, inline: within 1 ulp of the correctly rounded result where the result is
 * normal. Below -87.34 (a subnormal result) it returns 0, where SLEEF's exp gives the
 * subnormal: the callers (softmax, gelu's tanh form) only meet such arguments where the
 * difference is below their own error. NaN stays NaN (the clamps keep it, and every step
 * after them propagates it).
 */
static inline TN_VINLINE tn_vf tn_vexpf_cephes(tn_vf x)
{
	const tn_vf hi = tn_vf_splat(88.7228391117f), lo = tn_vf_splat(-88.3762626647949f);
	tn_vf n, xc = tn_vmaxf(lo, tn_vminf(hi, x));
	tn_vf p = tn__vexpf_reduced(xc, &n);
	/* n reaches 128 just below float32's largest value: 2^n formed as 2^127 * 2 there. */
	tn_vfm top = tn_vf_gt(n, tn_vf_splat(127.0f));
	tn_vf y = p * tn__vexp2if(tn_vf_msel(top, tn_vf_splat(127.0f), n));
	y = tn_vf_msel(top, y + y, y);
	/* Below float32's normal range: 0 (n < -126 only there); above it: inf. */
	y = tn_vf_msel(tn_vf_lt(x, tn_vf_splat(-87.3365447506f)), tn_vf_splat(0.0f), y);
	return tn_vf_msel(tn_vf_gt(x, hi), tn_vf_splat(INFINITY), y);
}

/* erf(x) for |x| < 1: x + x Q(x^2) (vmath_poly.h). */
static inline TN_VINLINE tn_vf tn__verf_smallf(tn_vf x)
{
	return tn_vfmaf(x, tn__vpolyf(x * x, tn__erf_q, 8), x);
}

/* erfc(a) for 1 <= a < 3.9375 (a outside is clamped): exp(G(a - 2.45) - a^2). */
static inline TN_VINLINE tn_vf tn__verfc_midf(tn_vf a)
{
	tn_vf ac = tn_vminf(tn_vf_splat(TN_ERF_ONE), tn_vmaxf(tn_vf_splat(TN_ERF_SPLIT), a));
	tn_vf g = tn__vpolyf(ac - tn_vf_splat(TN_ERF_CENTRE), tn__erfc_g, 9);
	return tn__vexpf_core(g - ac * ac);
}

/*
 * erf, float32: x + x Q(x^2) below |x| = 1, 1 - erfc(|x|) with erfc = exp(G - x^2) up to
 * 3.9375, and +-1 beyond, where erfc is below half an ulp of 1. Polynomials fitted by
 * gen_vmath.py; within 1.5 ulp (check_vmath measures it), about four times SLEEF's speed.
 */
static inline TN_VINLINE tn_vf tn_verff(tn_vf x)
{
	tn_vu sign = (tn_vu)x & 0x80000000u;
	tn_vf a = (tn_vf)((tn_vu)x ^ sign);
	/* Beyond 3.9375 erfc is clamped there, 1.6e-8, and 1 - erfc rounds to 1; NaN goes
	 * through the clamps and the arithmetic unchanged. */
	tn_vf rb = tn_vf_splat(1.0f) - tn__verfc_midf(a);
	return tn_vf_msel(tn_vf_lt(a, tn_vf_splat(TN_ERF_SPLIT)), tn__verf_smallf(x),
			  (tn_vf)((tn_vu)rb ^ sign));
}

/*
 * gelu, float32: x * 0.5 * (1 + erf(x / sqrt 2)) in ATen's order, with the erf of ATen's
 * Vectorized<float>::erf: Abramowitz and Stegun's 7.1.26, erf(a) = 1 - t (p1 + t (p2 + ... +
 * t p5)) exp(-a^2), t = 1 / (1 + 0.3275911 a), absolute error below 1.5e-7, with ATen's fused
 * multiply-adds, on the inline exp and tn_vdivf_fast's reciprocal (neither the divider nor a
 * call). gelu needs erf to an absolute, not a relative, accuracy: the
 * result is within about 2 ulp of max(|x|, 1) (check_vmath), twice as fast as through
 * tn_verff. (PyTorch 1.13 computes a contiguous float32 gelu with oneDNN's gelu_erf.)
 */
static inline TN_VINLINE tn_vf tn_vgeluf(tn_vf x)
{
	const tn_vf one = tn_vf_splat(1.0f);
	tn_vf z = x * tn_vf_splat((float)M_SQRT1_2);
	tn_vu sign = (tn_vu)z & 0x80000000u;
	tn_vf a = (tn_vf)((tn_vu)z ^ sign);
	/* erf is 1 from a = 4 on; a is clamped (at 16) so that the reciprocal's operand is
	 * finite: a = inf gave inf * 0 = NaN in the Newton step. NaN stays NaN. */
	tn_vf ac = tn_vminf(tn_vf_splat(16.0f), a);
	tn_vf t = tn_vdivf_fast(one, tn_vfmaf(tn_vf_splat(0.3275911f), ac, one));
	tn_vf r = tn_vfmaf(tn_vf_splat(1.061405429f), t, tn_vf_splat(-1.453152027f));
	r = tn_vfmaf(r, t, tn_vf_splat(1.421413741f));
	r = tn_vfmaf(r, t, tn_vf_splat(-0.284496736f));
	r = tn_vfmaf(r, t, tn_vf_splat(0.254829592f));
	tn_vf e = tn__vexpf_core(-tn_vminf(tn_vf_splat(87.0f), z * z));
	tn_vf erf = tn_vfmaf(-e * t, r, one);
	erf = (tn_vf)((tn_vu)erf ^ sign);
	return x * tn_vf_splat(0.5f) * (one + erf);
}

/*
 * tanh, float32: x + x t R(t), t = x^2, below |x| = 0.75, 1 - 2 / (exp(2|x|) + 1) above, the
 * quotient by tn_vdivf_fast. Within 1.5 ulp, about four times SLEEF's speed.
 */
static inline TN_VINLINE tn_vf tn_vtanhf(tn_vf x)
{
	const tn_vf one = tn_vf_splat(1.0f);
	tn_vu sign = (tn_vu)x & 0x80000000u;
	tn_vf a = (tn_vf)((tn_vu)x ^ sign);
	tn_vf t = x * x;
	/* Both branches for |x|, x's sign put back at the end (tanh(-0) = -0). */
	tn_vf rs = tn_vfmaf(a, t * tn__vpolyf(t, tn__tanh_r, 6), a);
	/* tanh rounds to 1 from 9.02 on; a is clamped at 20 so that e + 1 stays finite for
	 * the reciprocal. NaN goes through the clamp and the arithmetic unchanged. */
	tn_vf ac = tn_vminf(tn_vf_splat(20.0f), a);
	tn_vf e = tn__vexpf_core(ac + ac);
	tn_vf rb = one - tn_vdivf_fast(tn_vf_splat(2.0f), e + one);
	return (tn_vf)((tn_vu)tn_vf_msel(tn_vf_lt(a, tn_vf_splat(TN_TANH_SPLIT)), rs, rb) ^ sign);
}

/*
 * gelu with approximate='tanh', float32: 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u =
 * sqrt(2/pi) (x + 0.044715 x^3) computed as ATen computes it; the second form does not
 * cancel where u is negative.
 */
static inline TN_VINLINE tn_vf tn_vgelu_tanhf(tn_vf x)
{
	const tn_vf beta = tn_vf_splat((float)(M_SQRT2 * M_2_SQRTPI * 0.5)),
		    kappa = tn_vf_splat(0.044715f);
	tn_vf inner = beta * (x + kappa * (x * x * x));
	/* The quotient through tn_vdivf_fast, with exp(-2u) clamped to the inline exp's normal
	 * range; outside it the result is the divider's: x where 1 + exp(-2u) rounds to 1
	 * (infinite x included, which the reciprocal's residual would make NaN), and x's
	 * signed zero where exp(-2u) overflows. NaN goes through the clamps (maxps/minps
	 * return their second operand on NaN) and the arithmetic. */
	tn_vf v = tn_vf_splat(-2.0f) * inner;
	tn_vf m = tn_vmaxf(tn_vf_splat(-87.0f), tn_vminf(tn_vf_splat(88.0f), v));
	tn_vf q = tn_vdivf_fast(x, tn_vf_splat(1.0f) + tn__vexpf_core(m));
	q = tn_vf_msel(tn_vf_lt(v, tn_vf_splat(-87.0f)), x, q);
	return tn_vf_msel(tn_vf_gt(v, tn_vf_splat(88.0f)), x * tn_vf_splat(0.0f), q);
}

/* SLEEF's float64 tanh is 1 ulp off for tiny arguments, where tanh(x) rounds to x (x^3 / 3 is
 * below half an ulp of x for |x| < 2^-27). */
static inline TN_VINLINE tn_vd tn_vtanh(tn_vd x)
{
	tn_vl tiny = ((tn_vl)x & 0x7fffffffffffffffll) < 0x3e40000000000000ll; /* 2^-27 */
	return tn_vd_sel(tiny, x, tn__vtanh(x));
}

/* SLEEF's float64 erf loses up to 2 ulps near the subnormal range; for |x| below 2^-27 erf(x)
 * rounds as x + x * (2 / sqrt(pi) - 1) does (the x^3 term is below half an ulp; x is exact and
 * the product's rounding is a sixteenth of an ulp). */
static inline TN_VINLINE tn_vd tn_verf(tn_vd x)
{
	tn_vl tiny = ((tn_vl)x & 0x7fffffffffffffffll) < 0x3e40000000000000ll; /* 2^-27 */
	tn_vd small = x + x * tn_vd_splat(0.12837916709551257390);
	return tn_vl_any(tiny) ? tn_vd_sel(tiny, small, tn__verf(x)) : tn__verf(x);
}

/* SLEEF 3.5's log1p answers inf above 1e38 (float32) and 1e307 (float64), where log1p(x) is
 * finite; there log1p(x) rounds as log(x) does (1/x is far below half an ulp of log(x)), so
 * those lanes take log. */
static inline TN_VINLINE tn_vf tn_vlog1pf(tn_vf x)
{
	tn_vf r = tn__vlog1pf(x);
	tn_vi big = x > tn_vf_splat(1e30f);
	return tn_vi_any(big) ? tn_vf_sel(big, tn_vlogf(x), r) : r;
}

static inline TN_VINLINE tn_vd tn_vlog1p(tn_vd x)
{
	tn_vd r = tn__vlog1p(x);
	tn_vl big = x > tn_vd_splat(1e300);
	return tn_vl_any(big) ? tn_vd_sel(big, tn_vlog(x), r) : r;
}

static inline TN_VINLINE tn_vf tn_vsqrtf(tn_vf x)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_sqrt_ps((__m512)x);
#elif defined(__AVX2__)
	return (tn_vf)_mm256_sqrt_ps((__m256)x);
#else
	return (tn_vf)_mm_sqrt_ps((__m128)x);
#endif
}

static inline TN_VINLINE tn_vd tn_vsqrt(tn_vd x)
{
#if defined(__AVX512F__)
	return (tn_vd)_mm512_sqrt_pd((__m512d)x);
#elif defined(__AVX2__)
	return (tn_vd)_mm256_sqrt_pd((__m256d)x);
#else
	return (tn_vd)_mm_sqrt_pd((__m128d)x);
#endif
}

#endif /* TN_KERNELS_VMATH_H */
