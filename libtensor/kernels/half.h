/* SPDX-License-Identifier: MIT */
/*
 * The 16-bit float conversions inlined into the kernels, bit for bit dtype.c's exported
 * tn_half_to_float, tn_half_from_float, tn_bfloat16_to_float and tn_bfloat16_from_float:
 * float16 through F16C's vcvtph2ps / vcvtps2ph where the capability has them (AVX2, AVX-512;
 * round to nearest even, NaN quietened with its sign and top payload bits), bfloat16 through
 * 16-bit shifts, which the compiler vectorises. The DEFAULT capability's float16 calls
 * dtype.c's integer code.
 */
#ifndef TN_KERNELS_HALF_H
#define TN_KERNELS_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <tensor/dtype.h>

static inline float tn__h2f(tn_half h)
{
#if defined(__F16C__)
	return _cvtsh_ss(h.bits);
#else
	return tn_half_to_float(h);
#endif
}

static inline tn_half tn__f2h(float x)
{
#if defined(__F16C__)
	return (tn_half){ (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT) };
#else
	return tn_half_from_float(x);
#endif
}

static inline float tn__bf2f(tn_bfloat16 b)
{
	uint32_t u = (uint32_t)b.bits << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Round to nearest even; NaN keeps its sign and top payload bits, quietened. */
static inline tn_bfloat16 tn__f2bf(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	if ((u & 0x7fffffffu) > 0x7f800000u)
		r = (u >> 16) | 0x40u;
	return (tn_bfloat16){ (uint16_t)r };
}

#endif /* TN_KERNELS_HALF_H */
