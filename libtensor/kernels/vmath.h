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
 *   +-0, overflow to inf); tests/check_vmath.c measures the error of every function over dense
 *   sweeps of the float32 and float64 ranges.
 */
#ifndef TN_KERNELS_VMATH_H
#define TN_KERNELS_VMATH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <sleef.h>

#include <tensor/dtype.h>

#include "half.h"

#if defined(__AVX512F__)
#define TN_VBYTES 64
typedef __m512 tn__nvf;
typedef __m512d tn__nvd;
#define TN_SLEEF_F(fn) Sleef_##fn##f16_u10avx512f
#define TN_SLEEF_D(fn) Sleef_##fn##d8_u10avx512f
#elif defined(__AVX2__)
#define TN_VBYTES 32
typedef __m256 tn__nvf;
typedef __m256d tn__nvd;
#define TN_SLEEF_F(fn) Sleef_##fn##f8_u10avx2
#define TN_SLEEF_D(fn) Sleef_##fn##d4_u10avx2
#elif defined(__SSE2__)
#define TN_VBYTES 16
typedef __m128 tn__nvf;
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
static inline tn_vf tn_vf_splat(float x)
{
	tn_vf v;
	for (int i = 0; i < (int)TN_VLF; i++)
		v[i] = x;
	return v;
}

static inline tn_vd tn_vd_splat(double x)
{
	tn_vd v;
	for (int i = 0; i < (int)TN_VLD; i++)
		v[i] = x;
	return v;
}

/* Lanes of @a where @m is set (all ones), of @b elsewhere. */
static inline tn_vf tn_vf_sel(tn_vi m, tn_vf a, tn_vf b)
{
	return (tn_vf)((m & (tn_vi)a) | (~m & (tn_vi)b));
}

static inline tn_vd tn_vd_sel(tn_vl m, tn_vd a, tn_vd b)
{
	return (tn_vd)((m & (tn_vl)a) | (~m & (tn_vl)b));
}

/* ---- loads and stores: float32 vectors from and to float32, float16, bfloat16 ---- */

static inline tn_vf tn_vload_f32(const float *p)
{
	tn_vf v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void tn_vstore_f32(float *p, tn_vf v)
{
	memcpy(p, &v, sizeof(v));
}

static inline tn_vd tn_vload_f64(const double *p)
{
	tn_vd v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void tn_vstore_f64(double *p, tn_vd v)
{
	memcpy(p, &v, sizeof(v));
}

static inline tn_vf tn_vload_bf16(const tn_bfloat16 *p)
{
	tn_vh h;
	memcpy(&h, p, sizeof(h));
	return (tn_vf)(__builtin_convertvector(h, tn_vu) << 16);
}

/* Round to nearest even, as tn_bfloat16_from_float: NaN keeps its sign and top payload bits
 * with the quiet bit set; a carry out of the largest finite value is infinity. */
static inline void tn_vstore_bf16(tn_bfloat16 *p, tn_vf v)
{
	tn_vu u = (tn_vu)v;
	tn_vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	tn_vu nan = (tn_vu)((u & 0x7fffffffu) > 0x7f800000u);
	r = (nan & ((u >> 16) | 0x40u)) | (~nan & r);
	tn_vh h = __builtin_convertvector(r, tn_vh);
	memcpy(p, &h, sizeof(h));
}

static inline tn_vf tn_vload_f16(const tn_half *p)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
#elif defined(__F16C__) || defined(__AVX2__)
	/* The AVX2 capability requires F16C (cpu_capability.c checks it). */
	return (tn_vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#else
	tn_vf v;
	for (int i = 0; i < (int)TN_VLF; i++)
		v[i] = tn__h2f(p[i]);
	return v;
#endif
}

static inline void tn_vstore_f16(tn_half *p, tn_vf v)
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
	static inline tn_vf name(tn_vf x)                               \
	{                                                               \
		return (tn_vf)TN_SLEEF_F(fn)((tn__nvf)x);               \
	}
#define TN_VMATH_D1(name, fn)                                           \
	static inline tn_vd name(tn_vd x)                               \
	{                                                               \
		return (tn_vd)TN_SLEEF_D(fn)((tn__nvd)x);               \
	}
#define TN_VMATH_F2(name, fn)                                           \
	static inline tn_vf name(tn_vf x, tn_vf y)                      \
	{                                                               \
		return (tn_vf)TN_SLEEF_F(fn)((tn__nvf)x, (tn__nvf)y);   \
	}
#define TN_VMATH_D2(name, fn)                                           \
	static inline tn_vd name(tn_vd x, tn_vd y)                      \
	{                                                               \
		return (tn_vd)TN_SLEEF_D(fn)((tn__nvd)x, (tn__nvd)y);   \
	}

#define TN_VMATH_ALL(F1, D1, F2, D2)                                                       \
	F1(tn_vexpf, exp) F1(tn_vexpm1f, expm1) F1(tn_vlogf, log) F1(tn__vlog1pf, log1p)    \
	F1(tn_vlog2f, log2) F1(tn_vsinf, sin) F1(tn_vcosf, cos) F1(tn_vtanf, tan)           \
	F1(tn__vtanhf, tanh) F1(tn__verff, erf)                                               \
	D1(tn_vexp, exp) D1(tn_vexpm1, expm1) D1(tn_vlog, log) D1(tn__vlog1p, log1p)         \
	D1(tn_vlog2, log2) D1(tn_vsin, sin) D1(tn_vcos, cos) D1(tn_vtan, tan)               \
	D1(tn__vtanh, tanh) D1(tn__verf, erf)                                                 \
	F2(tn_vpowf, pow) F2(tn_vatan2f, atan2) D2(tn_vpow, pow) D2(tn_vatan2, atan2)
TN_VMATH_ALL(TN_VMATH_F1, TN_VMATH_D1, TN_VMATH_F2, TN_VMATH_D2)

static inline bool tn_vi_any(tn_vi m)
{
	int32_t r = 0;
	for (int i = 0; i < (int)TN_VLF; i++)
		r |= m[i];
	return r != 0;
}

static inline bool tn_vl_any(tn_vl m)
{
	int64_t r = 0;
	for (int i = 0; i < (int)TN_VLD; i++)
		r |= m[i];
	return r != 0;
}

/* SLEEF's tanh is 1 ulp off for tiny arguments, where tanh(x) rounds to x (x^3 / 3 is below
 * half an ulp of x for |x| < 2^-12 in float32, 2^-27 in float64). */
static inline tn_vf tn_vtanhf(tn_vf x)
{
	tn_vi tiny = (tn_vi)((tn_vu)x & 0x7fffffffu) < 0x39800000; /* 2^-12 */
	return tn_vf_sel(tiny, x, tn__vtanhf(x));
}

static inline tn_vd tn_vtanh(tn_vd x)
{
	tn_vl tiny = ((tn_vl)x & 0x7fffffffffffffffll) < 0x3e40000000000000ll; /* 2^-27 */
	return tn_vd_sel(tiny, x, tn__vtanh(x));
}

/* SLEEF's erf loses up to 2 ulps near the subnormal range; for |x| below 2^-12 (2^-27 in
 * float64) erf(x) rounds as x + x * (2 / sqrt(pi) - 1) does (the x^3 term is below half an
 * ulp; x is exact and the product's rounding is a sixteenth of an ulp). */
static inline tn_vf tn_verff(tn_vf x)
{
	tn_vi tiny = (tn_vi)((tn_vu)x & 0x7fffffffu) < 0x39800000; /* 2^-12 */
	tn_vf small = x + x * tn_vf_splat(0.12837916709551257390f);
	return tn_vi_any(tiny) ? tn_vf_sel(tiny, small, tn__verff(x)) : tn__verff(x);
}

static inline tn_vd tn_verf(tn_vd x)
{
	tn_vl tiny = ((tn_vl)x & 0x7fffffffffffffffll) < 0x3e40000000000000ll; /* 2^-27 */
	tn_vd small = x + x * tn_vd_splat(0.12837916709551257390);
	return tn_vl_any(tiny) ? tn_vd_sel(tiny, small, tn__verf(x)) : tn__verf(x);
}

/* SLEEF 3.5's log1p answers inf above 1e38 (float32) and 1e307 (float64), where log1p(x) is
 * finite; there log1p(x) rounds as log(x) does (1/x is far below half an ulp of log(x)), so
 * those lanes take log. */
static inline tn_vf tn_vlog1pf(tn_vf x)
{
	tn_vf r = tn__vlog1pf(x);
	tn_vi big = x > tn_vf_splat(1e30f);
	return tn_vi_any(big) ? tn_vf_sel(big, tn_vlogf(x), r) : r;
}

static inline tn_vd tn_vlog1p(tn_vd x)
{
	tn_vd r = tn__vlog1p(x);
	tn_vl big = x > tn_vd_splat(1e300);
	return tn_vl_any(big) ? tn_vd_sel(big, tn_vlog(x), r) : r;
}

static inline tn_vf tn_vsqrtf(tn_vf x)
{
#if defined(__AVX512F__)
	return (tn_vf)_mm512_sqrt_ps((__m512)x);
#elif defined(__AVX2__)
	return (tn_vf)_mm256_sqrt_ps((__m256)x);
#else
	return (tn_vf)_mm_sqrt_ps((__m128)x);
#endif
}

static inline tn_vd tn_vsqrt(tn_vd x)
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
