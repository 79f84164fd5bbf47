/* SPDX-License-Identifier: MIT */
/*
 * The random-number core: PyTorch 1.13's CPU generator and its CPU transformations, bit for
 * bit (see generator.h for the contract of each function).
 *
 * Sources mirrored (torch v1.13.1):
 *   c10/core/GeneratorImpl.h, aten/src/ATen/CPUGeneratorImpl.cpp   seed, random(), random64()
 *   aten/src/ATen/core/MT19937RNGEngine.h                           mt19937
 *   aten/src/ATen/core/TransformationHelper.h                       uniform_real, uniform_int*,
 *                                                                   normal, bernoulli
 *   aten/src/ATen/core/DistributionsHelper.h                        the *_distribution structs
 *   aten/src/ATen/native/cpu/DistributionTemplates.h                the CPU kernels, normal_fill,
 *                                                                   normal_fill_AVX2
 *   aten/src/ATen/native/cpu/DistributionKernels.cpp                stub registration (no AVX512
 *                                                                   normal kernel; no MKL)
 *   aten/src/ATen/native/cpu/avx_mathfun.h                          log256_ps, sincos256_ps
 *   aten/src/ATen/native/TensorFactories.cpp                        randperm_cpu
 *
 * Floating point: each operation below is one IEEE operation in the type written, with a fused
 * multiply-add only where the code calls fma()/fmaf() by name. That is what torch's binaries
 * do: GCC compiles C++ with -ffp-contract=fast, so the AVX2 and AVX512 kernel variants (built
 * with -mfma) fuse a product feeding an addition, and the DEFAULT variant cannot. Our own
 * compiler must not fuse anything else, hence the pragmas (they matter only when this file is
 * built with -mfma or -march=native). clang's -ffp-contract=fast overrides its pragma: do not
 * build this file with it (GCC's -ffp-contract=fast, its default, is fine).
 */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <errno.h>
#include <math.h>
#include <string.h>

#include "generator.h"

/* ---------------------------------------------------------------------------------------- */
/* mt19937: ATen/core/MT19937RNGEngine.h                                                     */
/* ---------------------------------------------------------------------------------------- */

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UMASK 0x80000000u
#define MT_LMASK 0x7fffffffu

static inline uint32_t mt_mixbits(uint32_t u, uint32_t v)
{
	return (u & MT_UMASK) | (v & MT_LMASK);
}

static inline uint32_t mt_twist(uint32_t u, uint32_t v)
{
	return (mt_mixbits(u, v) >> 1) ^ ((v & 1u) ? MT_MATRIX_A : 0u);
}

void tn__mt_seed(struct tn__mt19937 *gen, uint64_t seed)
{
	/*
	 * CPUGeneratorImpl::set_current_seed resets both normal caches and replaces the engine
	 * with mt19937(seed); mt19937::init_with_uint32 keeps the 64-bit seed_ but starts the
	 * state from seed & 0xffffffff, so seeds equal modulo 2^32 give the same stream.
	 */
	gen->seed = seed;
	gen->state[0] = (uint32_t)(seed & 0xffffffffu);
	for (uint32_t j = 1; j < TN__MT_N; j++) {
		uint32_t prev = gen->state[j - 1];
		gen->state[j] = 1812433253u * (prev ^ (prev >> 30)) + j;
	}
	gen->left = 1;
	gen->next = 0;
	gen->has_next_float_normal = false;
	gen->next_float_normal = 0.0f;
	gen->has_next_double_normal = false;
	gen->next_double_normal = 0.0;
}

void tn__mt_init(struct tn__mt19937 *gen)
{
	tn__mt_seed(gen, TN__MT_DEFAULT_SEED);
}

uint64_t tn__mt_initial_seed(const struct tn__mt19937 *gen)
{
	return gen->seed;
}

/* mt19937::next_state: regenerate all 624 words at once. */
static void mt_next_state(struct tn__mt19937 *gen)
{
	uint32_t *p = gen->state;
	int j;

	gen->left = TN__MT_N;
	gen->next = 0;
	for (j = TN__MT_N - MT_M + 1; --j; p++)
		*p = p[MT_M] ^ mt_twist(p[0], p[1]);
	for (j = MT_M; --j; p++)
		*p = p[MT_M - TN__MT_N] ^ mt_twist(p[0], p[1]);
	*p = p[MT_M - TN__MT_N] ^ mt_twist(p[0], gen->state[0]);
}

uint32_t tn__mt_next32(struct tn__mt19937 *gen)
{
	if (--gen->left <= 0)
		mt_next_state(gen);
	uint32_t y = gen->state[gen->next++];
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	y ^= y >> 18;
	return y;
}

uint64_t tn__mt_next64(struct tn__mt19937 *gen)
{
	/* CPUGeneratorImpl::random64: random1 is the high half (make64BitsFrom32Bits(hi, lo)). */
	uint32_t hi = tn__mt_next32(gen);
	uint32_t lo = tn__mt_next32(gen);
	return ((uint64_t)hi << 32) | lo;
}

/* ---------------------------------------------------------------------------------------- */
/* uniform_real: TransformationHelper.h, DistributionsHelper.h                               */
/* ---------------------------------------------------------------------------------------- */

static inline bool isa_fuses(enum tn__rng_isa isa)
{
	return isa == TN__RNG_ISA_AVX2 || isa == TN__RNG_ISA_AVX512;
}

/*
 * uniform_real_distribution<float>: the low 24 bits of random(), times 2^-24, then
 * x * (to - from) + from in float (dist_acctype<float> is float).
 */
static inline float uniform_f32(struct tn__mt19937 *gen, float from, float to, bool fused)
{
	float x = (float)(tn__mt_next32(gen) & 0xffffffu) * (1.0f / 16777216.0f);
	float range = to - from;
	return fused ? fmaf(x, range, from) : x * range + from;
}

/* uniform_real_distribution<double>: the low 53 bits of random64(), times 2^-53. */
static inline double uniform_f64(struct tn__mt19937 *gen, double from, double to, bool fused)
{
	double x = (double)(tn__mt_next64(gen) & ((UINT64_C(1) << 53) - 1)) *
		   (1.0 / 9007199254740992.0);
	double range = to - from;
	return fused ? fma(x, range, from) : x * range + from;
}

/* uniform_real_distribution<T>(0, 1): x * 1 + 0 is x under any rounding, fused or not. */
static inline float uniform01_f32(struct tn__mt19937 *gen)
{
	return (float)(tn__mt_next32(gen) & 0xffffffu) * (1.0f / 16777216.0f);
}

static inline double uniform01_f64(struct tn__mt19937 *gen)
{
	return (double)(tn__mt_next64(gen) & ((UINT64_C(1) << 53) - 1)) *
	       (1.0 / 9007199254740992.0);
}

int tn__rand_fill_f32(struct tn__mt19937 *gen, float *out, size_t n, double from, double to,
		      enum tn__rng_isa isa)
{
	/* uniform_kernel: static_cast<scalar_t>(from_), static_cast<scalar_t>(to_). */
	float f = (float)from, t = (float)to;
	/* The constructor's checks: from <= to and to - from <= max (finite). */
	if (!(f <= t) || !(t - f <= 3.40282346638528859812e+38f))
		return -EINVAL;
	bool fused = isa_fuses(isa);
	for (size_t i = 0; i < n; i++)
		out[i] = uniform_f32(gen, f, t, fused);
	return 0;
}

int tn__rand_fill_f64(struct tn__mt19937 *gen, double *out, size_t n, double from, double to,
		      enum tn__rng_isa isa)
{
	if (!(from <= to) || !(to - from <= 1.7976931348623157e+308))
		return -EINVAL;
	bool fused = isa_fuses(isa);
	for (size_t i = 0; i < n; i++)
		out[i] = uniform_f64(gen, from, to, fused);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* normal                                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* c10::pi<double> and the constants Box-Muller derives from it. */
#define TN_PI 3.14159265358979323846
#define TN_TWO_PI (2.0 * TN_PI)

/*
 * at::normal_distribution<double>::operator() (DistributionsHelper.h) with
 * transformation::normal: a cached sample if there is one, else two uniform doubles
 * u1, u2, r = sqrt(-2 log(1 - u2)), theta = 2 pi u1; r sin(theta) is cached and r cos(theta)
 * returned, as val * std + mean.
 */
static double normal_sample_f64(struct tn__mt19937 *gen, double mean, double std, bool fused)
{
	double ret;

	if (gen->has_next_double_normal) {
		ret = gen->next_double_normal;
		gen->has_next_double_normal = false;
	} else {
		double u1 = uniform01_f64(gen);
		double u2 = uniform01_f64(gen);
		double r = sqrt(-2.0 * log(1.0 - u2));
		double theta = TN_TWO_PI * u1;
		gen->next_double_normal = r * sin(theta);
		gen->has_next_double_normal = true;
		ret = r * cos(theta);
	}
	return fused ? fma(ret, std, mean) : ret * std + mean;
}

/* normal_fill_16<double>: Box-Muller on x[j] and x[j + 8], j < 8, with the libm functions. */
static void normal_fill_16_f64(double *data, double mean, double std, bool fused)
{
	for (int j = 0; j < 8; j++) {
		double u1 = 1.0 - data[j];
		double u2 = data[j + 8];
		double radius = sqrt(-2.0 * log(u1));
		double theta = TN_TWO_PI * u2;
		double c = radius * cos(theta), s = radius * sin(theta);
		data[j] = fused ? fma(c, std, mean) : c * std + mean;
		data[j + 8] = fused ? fma(s, std, mean) : s * std + mean;
	}
}

/*
 * normal_fill_16<float> (the DEFAULT variant, no fusing): float libm functions; theta is
 * computed in double (2.0f * c10::pi<double> * u2) and rounded to float.
 */
static void normal_fill_16_f32(float *data, float mean, float std)
{
	for (int j = 0; j < 8; j++) {
		float u1 = 1.0f - data[j];
		float u2 = data[j + 8];
		float radius = sqrtf(-2.0f * logf(u1));
		float theta = (float)(TN_TWO_PI * (double)u2);
		data[j] = radius * cosf(theta) * std + mean;
		data[j + 8] = radius * sinf(theta) * std + mean;
	}
}

/*
 * avx_mathfun.h's log256_ps and sincos256_ps, rewritten one lane at a time (an altered
 * version; the constants and the order of operations are the original's). Its notice:
 *
 *   AVX implementation of sin, cos, sincos, exp and log
 *   Based on "sse_mathfun.h", by Julien Pommier, http://gruntthepeon.free.fr/ssemath/
 *   Copyright (C) 2012 Giovanni Garberoglio, Interdisciplinary Laboratory for Computational
 *   Science (LISC), Fondazione Bruno Kessler and University of Trento
 *
 *   This software is provided 'as-is', without any express or implied warranty. In no event
 *   will the authors be held liable for any damages arising from the use of this software.
 *   Permission is granted to anyone to use this software for any purpose, including
 *   commercial applications, and to alter it and redistribute it freely, subject to the
 *   following restrictions:
 *   1. The origin of this software must not be misrepresented; you must not claim that you
 *      wrote the original software. If you use this software in a product, an acknowledgment
 *      in the product documentation would be appreciated but is not required.
 *   2. Altered source versions must be plainly marked as such, and must not be misrepresented
 *      as being the original software.
 *   3. This notice may not be removed or altered from any source distribution.
 *   (this is the zlib license)
 *
 * The rewrite reproduces torch's compiled code, which fuses some of the multiply-adds: in
 * GCC, _mm256_mul_ps/_mm256_add_ps/_mm256_sub_ps are plain vector operators, so with -mfma
 * each product whose only use is an addition or subtraction became one FMA (the first one in
 * program order where two products meet in one addition). The and/or/xor masks are builtins
 * and are done here on the bits.
 */
static inline uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* log256_ps for x > 0 (the callers pass 1 - u with u in [0, 1), so x is in (0, 1]). */
static float avx_logf(float x)
{
	/* x = max(x, min_norm_pos); the exponent; the mantissa with exponent -1. */
	if (!(x > u2f(0x00800000u)))
		x = u2f(0x00800000u);
	int32_t imm0 = (int32_t)(f2u(x) >> 23);
	x = u2f((f2u(x) & ~0x7f800000u) | f2u(0.5f));
	imm0 -= 0x7f;
	float e = (float)imm0;
	e = e + 1.0f;

	/* if (x < SQRTHF) { e -= 1; x = x + x - 1; } else { x = x - 1; } */
	bool mask = x < 0.707106781186547524f;
	float tmp = mask ? x : 0.0f;
	x = x - 1.0f;
	e = e - (mask ? 1.0f : 0.0f);
	x = x + tmp;

	float z = x * x;
	float y = 7.0376836292E-2f;
	y = fmaf(y, x, -1.1514610310E-1f);
	y = fmaf(y, x, 1.1676998740E-1f);
	y = fmaf(y, x, -1.2420140846E-1f);
	y = fmaf(y, x, +1.4249322787E-1f);
	y = fmaf(y, x, -1.6668057665E-1f);
	y = fmaf(y, x, +2.0000714765E-1f);
	y = fmaf(y, x, -2.4999993993E-1f);
	y = fmaf(y, x, +3.3333331174E-1f);
	y = y * x;
	/* y = y * z + e * q1: the first product in program order is the one fused. */
	y = fmaf(y, z, e * -2.12194440e-4f);
	/* y = y - z * 0.5 */
	y = fmaf(-z, 0.5f, y);
	/* x = (x + y) + e * q2 */
	x = x + y;
	x = fmaf(e, 0.693359375f, x);
	return x;
}

/* sincos256_ps, for 0 <= x < 8192 (the callers pass 2 pi u with u in [0, 1)). */
static void avx_sincosf(float x, float *s, float *c)
{
	uint32_t sign_bit_sin = f2u(x) & 0x80000000u;
	x = u2f(f2u(x) & 0x7fffffffu);

	/* Scale by 4/pi, j = (j + 1) & ~1. */
	float y = x * 1.27323954473516f;
	int32_t imm2 = (int32_t)y;
	imm2 = (imm2 + 1) & ~1;
	y = (float)imm2;
	int32_t imm4 = imm2;

	uint32_t swap_sign_bit_sin = (uint32_t)(imm2 & 4) << 29;
	bool poly_mask = (imm2 & 2) == 0;

	/* x = ((x - y * DP1) - y * DP2) - y * DP3, each step one FMA. */
	x = fmaf(y, -0.78515625f, x);
	x = fmaf(y, -2.4187564849853515625e-4f, x);
	x = fmaf(y, -3.77489497744594108e-8f, x);

	imm4 = imm4 - 2;
	uint32_t sign_bit_cos = (uint32_t)(~imm4 & 4) << 29;
	sign_bit_sin ^= swap_sign_bit_sin;

	/* The cosine polynomial (0 <= x <= pi/4). */
	float z = x * x;
	float yc = 2.443315711809948E-005f;
	yc = fmaf(yc, z, -1.388731625493765E-003f);
	yc = fmaf(yc, z, 4.166664568298827E-002f);
	yc = yc * z;
	/* yc = yc * z - z * 0.5: the first product is fused. */
	yc = fmaf(yc, z, -(z * 0.5f));
	yc = yc + 1.0f;

	/* The sine polynomial. */
	float ys = -1.9515295891E-4f;
	ys = fmaf(ys, z, 8.3321608736E-3f);
	ys = fmaf(ys, z, -1.6666654611E-1f);
	ys = ys * z;
	ys = fmaf(ys, x, x);

	/*
	 * The selection, done with the same additions of masked values as the vector code
	 * (adding a masked +0 turns a -0 into +0).
	 */
	float ysin2 = poly_mask ? ys : 0.0f;
	float ysin1 = poly_mask ? 0.0f : yc;
	ys = ys - ysin2;
	yc = yc - ysin1;
	float xmm1 = ysin1 + ysin2;
	float xmm2 = yc + ys;
	*s = u2f(f2u(xmm1) ^ sign_bit_sin);
	*c = u2f(f2u(xmm2) ^ sign_bit_cos);
}

/* normal_fill_16_AVX2: the same Box-Muller in float with avx_mathfun and a final FMA. */
static void normal_fill_16_avx2(float *data, float mean, float std)
{
	const float two_pi = (float)TN_TWO_PI;
	for (int j = 0; j < 8; j++) {
		float u1 = 1.0f - data[j];
		float u2 = data[j + 8];
		float radius = sqrtf(-2.0f * avx_logf(u1));
		float theta = two_pi * u2;
		float st, ct;
		avx_sincosf(theta, &st, &ct);
		float n1 = radius * ct;
		float n2 = radius * st;
		data[j] = fmaf(n1, std, mean);
		data[j + 8] = fmaf(n2, std, mean);
	}
}

int tn__randn_fill_f32(struct tn__mt19937 *gen, float *out, size_t n, double mean, double std,
		       enum tn__rng_isa isa)
{
	if (!(std >= 0.0))
		return -EINVAL;
	if (n < 16) {
		/* normal_kernel's serial path: normal_distribution<double>, then a cast. */
		bool fused = isa_fuses(isa);
		for (size_t i = 0; i < n; i++)
			out[i] = (float)normal_sample_f64(gen, mean, std, fused);
		return 0;
	}
	/*
	 * normal_fill / normal_fill_AVX2: n uniforms, blocks of 16, and the last 16 redrawn
	 * and transformed again when n is not a multiple of 16.
	 */
	bool avx2 = isa_fuses(isa);
	float m = (float)mean, s = (float)std;
	for (size_t i = 0; i < n; i++)
		out[i] = uniform01_f32(gen);
	for (size_t i = 0; i + 16 <= n; i += 16) {
		if (avx2)
			normal_fill_16_avx2(out + i, m, s);
		else
			normal_fill_16_f32(out + i, m, s);
	}
	if (n % 16 != 0) {
		float *data = out + n - 16;
		for (int i = 0; i < 16; i++)
			data[i] = uniform01_f32(gen);
		if (avx2)
			normal_fill_16_avx2(data, m, s);
		else
			normal_fill_16_f32(data, m, s);
	}
	return 0;
}

int tn__randn_fill_f64(struct tn__mt19937 *gen, double *out, size_t n, double mean, double std,
		       enum tn__rng_isa isa)
{
	if (!(std >= 0.0))
		return -EINVAL;
	bool fused = isa_fuses(isa);
	if (n < 16) {
		for (size_t i = 0; i < n; i++)
			out[i] = normal_sample_f64(gen, mean, std, fused);
		return 0;
	}
	/* normal_fill<double>, in the AVX2 variant of normal_kernel under AVX2 and AVX512. */
	for (size_t i = 0; i < n; i++)
		out[i] = uniform01_f64(gen);
	for (size_t i = 0; i + 16 <= n; i += 16)
		normal_fill_16_f64(out + i, mean, std, fused);
	if (n % 16 != 0) {
		double *data = out + n - 16;
		for (int i = 0; i < 16; i++)
			data[i] = uniform01_f64(gen);
		normal_fill_16_f64(data, mean, std, fused);
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* random_(from, to), random_(), random_(-2**63, None)                                       */
/* ---------------------------------------------------------------------------------------- */

/*
 * uniform_int_from_to_distribution<T> with transformation::uniform_int_from_to: a 64-bit draw
 * only for T in {int64, double, float, bfloat16} and range >= 2^32.
 */
static inline int64_t from_to_draw(struct tn__mt19937 *gen, uint64_t range, int64_t base,
				   bool wide_type)
{
	uint64_t v;
	if (wide_type && range >= (UINT64_C(1) << 32))
		v = tn__mt_next64(gen);
	else
		v = tn__mt_next32(gen);
	return (int64_t)(v % range + (uint64_t)base);
}

/*
 * static_cast<int64_t> of a float or double as torch's x86-64 build does it (cvttss2si,
 * cvttsd2si): out-of-range values and NaN give INT64_MIN, where C leaves it undefined.
 */
static inline int64_t trunc_to_i64(double x)
{
	if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)x;
}

/*
 * update_from<T> and update_to<T> (aten/src/ATen/native/DistributionTemplates.h), which
 * random_from_to applies to floating outputs before it computes the range: when from + 1
 * (to - 1) rounds in T to below from (to or above to), from moves up (to moves down) to a
 * value whose neighbours T can tell apart. digits is 24 for float, 53 for double.
 */
static int64_t update_from(int64_t from, int digits)
{
	int64_t from_plus_1 =
		digits == 24 ? trunc_to_i64((float)(from + 1)) : trunc_to_i64((double)(from + 1));
	if (from_plus_1 < from) {
		int64_t from_ = from + 1 < 0 ? -(from + 1) : from + 1;
		int k = 0;
		while (from_ >>= 1)
			++k;
		from = from_plus_1 + (INT64_C(1) << (k - digits + 1));
	}
	return from;
}

static int64_t update_to(int64_t to, int digits)
{
	int64_t to_minus_1 =
		digits == 24 ? trunc_to_i64((float)(to - 1)) : trunc_to_i64((double)(to - 1));
	if (to_minus_1 >= to) {
		int64_t to_ = to - 1 < 0 ? -(to - 1) : to - 1;
		int k = 0;
		while (to_ >>= 1)
			++k;
		to = to_minus_1 - (INT64_C(1) << (k - digits + 1));
	}
	return to;
}

/*
 * The integer outputs take low and high as given; float32 and float64 first pass them through
 * update_from/update_to as random_from_to does (a no-op while |low|, |high - 1| <= 2^digits).
 * digits is 0 for the integer types.
 */
#define RANDINT_FILL(suffix, type, wide, digits)                                                 \
	int tn__randint_fill_##suffix(struct tn__mt19937 *gen, type *out, size_t n, int64_t low, \
				      int64_t high)                                              \
	{                                                                                        \
		if (low >= high)                                                                 \
			return -EINVAL;                                                          \
		if (digits) {                                                                    \
			low = update_from(low, digits);                                          \
			high = update_to(high, digits);                                          \
			if (low >= high)                                                         \
				return -EINVAL;                                                  \
		}                                                                                \
		uint64_t range = (uint64_t)high - (uint64_t)low;                                 \
		for (size_t i = 0; i < n; i++)                                                   \
			out[i] = (type)from_to_draw(gen, range, low, wide);                      \
		return 0;                                                                        \
	}

/* clang-format off */
RANDINT_FILL(i64, int64_t, true, 0)
RANDINT_FILL(i32, int32_t, false, 0)
RANDINT_FILL(i16, int16_t, false, 0)
RANDINT_FILL(i8, int8_t, false, 0)
RANDINT_FILL(u8, uint8_t, false, 0)
RANDINT_FILL(f32, float, true, 24)
RANDINT_FILL(f64, double, true, 53)
/* clang-format on */

/* uniform_int_full_range_distribution: static_cast<T>(static_cast<int64_t>(random64())). */
void tn__random_full_fill_i64(struct tn__mt19937 *gen, int64_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (int64_t)tn__mt_next64(gen);
}

void tn__random_full_fill_f32(struct tn__mt19937 *gen, float *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (float)(int64_t)tn__mt_next64(gen);
}

void tn__random_full_fill_f64(struct tn__mt19937 *gen, double *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (double)(int64_t)tn__mt_next64(gen);
}

/* uniform_int_distribution<T> with transformation::uniform_int. */
void tn__random_fill_i64(struct tn__mt19937 *gen, int64_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (int64_t)(tn__mt_next64(gen) % (UINT64_C(1) << 63));
}

void tn__random_fill_i32(struct tn__mt19937 *gen, int32_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (int32_t)(tn__mt_next32(gen) % (UINT32_C(1) << 31));
}

void tn__random_fill_f32(struct tn__mt19937 *gen, float *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (float)(tn__mt_next32(gen) % ((UINT64_C(1) << 24) + 1));
}

void tn__random_fill_f64(struct tn__mt19937 *gen, double *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (double)(tn__mt_next64(gen) % ((UINT64_C(1) << 53) + 1));
}

void tn__random_fill_bool(struct tn__mt19937 *gen, bool *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = tn__mt_next32(gen) & 1u;
}

/* ---------------------------------------------------------------------------------------- */
/* bernoulli                                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* bernoulli_distribution<double>(p): uniform_real_distribution<double>(0, 1)(gen) < p. */
#define BERNOULLI_FILL(suffix, type)                                                            \
	int tn__bernoulli_fill_##suffix(struct tn__mt19937 *gen, type *out, size_t n, double p) \
	{                                                                                       \
		if (!(p >= 0.0 && p <= 1.0))                                                    \
			return -EINVAL;                                                         \
		for (size_t i = 0; i < n; i++)                                                  \
			out[i] = (type)(uniform01_f64(gen) < p);                                \
		return 0;                                                                       \
	}

/* clang-format off */
BERNOULLI_FILL(f32, float)
BERNOULLI_FILL(f64, double)
BERNOULLI_FILL(i64, int64_t)
BERNOULLI_FILL(u8, uint8_t)
BERNOULLI_FILL(bool, bool)
/* clang-format on */

void tn__bernoulli_tensor_fill_f32(struct tn__mt19937 *gen, float *out, const float *p, size_t n)
{
	/* bernoulli_distribution<float>(p_val): a float uniform from one 32-bit draw. */
	for (size_t i = 0; i < n; i++)
		out[i] = (float)(uniform01_f32(gen) < p[i]);
}

void tn__bernoulli_tensor_fill_f64(struct tn__mt19937 *gen, double *out, const double *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (double)(uniform01_f64(gen) < p[i]);
}

/* ---------------------------------------------------------------------------------------- */
/* randperm: TensorFactories.cpp randperm_cpu                                                */
/* ---------------------------------------------------------------------------------------- */

#define RANDPERM(suffix, type)                                                                 \
	void tn__randperm_##suffix(struct tn__mt19937 *gen, type *out, size_t n)               \
	{                                                                                      \
		for (size_t i = 0; i < n; i++)                                                 \
			out[i] = (type)i;                                                      \
		for (size_t i = 0; i + 1 < n; i++) {                                           \
			size_t z = (size_t)((uint64_t)tn__mt_next32(gen) % (uint64_t)(n - i)); \
			type save = out[i];                                                    \
			out[i] = out[z + i];                                                   \
			out[z + i] = save;                                                     \
		}                                                                              \
	}

/* clang-format off */
RANDPERM(i64, int64_t)
RANDPERM(i32, int32_t)
RANDPERM(f32, float)
RANDPERM(f64, double)
/* clang-format on */
