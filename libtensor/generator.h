/* SPDX-License-Identifier: MIT */
/*
 * The random-number core: PyTorch 1.13's CPU generator (mt19937 with its seeding, the
 * normal-sample caches) and the CPU transformations of torch.rand/randn/randint/bernoulli/
 * randperm, bit for bit, writing plain C arrays.
 *
 * This is an internal layer below the op table: no tensors, no locking, no generator
 * objects. The caller owns a struct tn__mt19937, serialises the calls on it (torch holds
 * CPUGeneratorImpl::mutex_ around each fill) and turns the arguments of the ops into the
 * plain values taken here. Apart from the three standard headers below this file includes
 * nothing, so that it can be wrapped later.
 *
 * Every fill function writes n contiguous elements in order, as torch does for a contiguous
 * output (cpu_serial_kernel visits a contiguous tensor in memory order). Some results depend
 * on the CPU capability torch chose (ATEN_CPU_CAPABILITY, "CPU capability usage" in
 * torch.__config__.show()): torch compiles the kernels once per capability, the AVX2 and
 * AVX512 variants with -mfma, where GCC fuses a*b+c into one FMA, and float32 normal_ of 16 or
 * more elements takes a vectorised AVX2 path. Those functions take an enum tn__rng_isa, whose
 * values are those of enum tn_cpu_capability.
 *
 * Functions that take arguments torch validates return 0 or -EINVAL (TN_EINVAL) and write
 * nothing (and draw nothing) on an error.
 */
#ifndef LIBTENSOR_GENERATOR_H
#define LIBTENSOR_GENERATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN__MT_N 624
/* c10/core/GeneratorImpl.h: default_rng_seed_val, the seed of a fresh torch.Generator(). */
#define TN__MT_DEFAULT_SEED UINT64_C(67280421310721)

/* The CPU capability whose kernels to mirror; the values are those of enum tn_cpu_capability. */
enum tn__rng_isa {
	TN__RNG_ISA_DEFAULT = 0,
	TN__RNG_ISA_AVX2 = 1,
	TN__RNG_ISA_AVX512 = 2,
};

/*
 * The state of ATen's CPUGeneratorImpl: ATen/core/MT19937RNGEngine.h's mt19937_data_pod
 * (seed_, left_, next_, state_; seeded_ is implied) plus the two cached Box-Muller samples,
 * next_float_normal_sample_ and next_double_normal_sample_ (c10::optional in torch).
 * Plain data: copying the struct forks the stream.
 */
struct tn__mt19937 {
	uint64_t seed;
	int left;
	uint32_t next;
	uint32_t state[TN__MT_N];
	bool has_next_float_normal;
	float next_float_normal;
	bool has_next_double_normal;
	double next_double_normal;
};

/*
 * tn__mt_seed - torch.manual_seed(seed) / Generator.manual_seed(seed):
 * CPUGeneratorImpl::set_current_seed. Keeps the whole 64-bit seed (initial_seed() returns it)
 * but seeds mt19937 with its low 32 bits (mt19937::init_with_uint32), and drops both cached
 * normal samples. A Python seed below zero is taken modulo 2^64 by torch before it gets here.
 */
void tn__mt_seed(struct tn__mt19937 *gen, uint64_t seed);

/* tn__mt_init - the state of a new torch.Generator(): tn__mt_seed(gen, TN__MT_DEFAULT_SEED). */
void tn__mt_init(struct tn__mt19937 *gen);

/* tn__mt_initial_seed - the seed last given (torch.initial_seed()). */
uint64_t tn__mt_initial_seed(const struct tn__mt19937 *gen);

/* tn__mt_next32 - CPUGeneratorImpl::random(): one tempered mt19937 output. */
uint32_t tn__mt_next32(struct tn__mt19937 *gen);

/*
 * tn__mt_next64 - CPUGeneratorImpl::random64(): two draws, the first one the high half
 * (detail::make64BitsFrom32Bits(hi = first, lo = second)).
 */
uint64_t tn__mt_next64(struct tn__mt19937 *gen);

/*
 * tn__rand_fill_f32/f64 - Tensor.uniform_(from, to) (torch.rand is uniform_(0, 1)):
 * templates::cpu::uniform_kernel with at::uniform_real_distribution<T> and
 * transformation::uniform_real. from and to are first rounded to T as torch does.
 * float32 uses the low 24 bits of one 32-bit draw, float64 the low 53 bits of one 64-bit draw:
 * x = (bits & (2^d - 1)) * 2^-d; out = x * (to - from) + from, evaluated in T (fused into one
 * FMA under AVX2/AVX512). Errors: -EINVAL when !(from <= to) or to - from overflows T.
 */
int tn__rand_fill_f32(struct tn__mt19937 *gen, float *out, size_t n, double from, double to,
		      enum tn__rng_isa isa);
int tn__rand_fill_f64(struct tn__mt19937 *gen, double *out, size_t n, double from, double to,
		      enum tn__rng_isa isa);

/*
 * tn__randn_fill_f32/f64 - Tensor.normal_(mean, std) (torch.randn is normal_(0, 1)) for a
 * contiguous output of n elements: templates::cpu::normal_kernel.
 * n >= 16: normal_fill (float64; float32 under DEFAULT) or normal_fill_AVX2 (float32 under
 * AVX2 and AVX512, as torch registers no AVX512 normal kernel): n uniforms in [0, 1), then
 * Box-Muller on each block of 16 (u1 = 1 - x[j], u2 = x[j + 8], j < 8); when n % 16 != 0 the
 * last 16 elements are redrawn and transformed again. The normal caches are left alone.
 * n < 16: one at::normal_distribution<double> per element, which uses and refills the cached
 * double sample, then rounds to the output type.
 * Errors: -EINVAL when std < 0 (or NaN).
 */
int tn__randn_fill_f32(struct tn__mt19937 *gen, float *out, size_t n, double mean, double std,
		       enum tn__rng_isa isa);
int tn__randn_fill_f64(struct tn__mt19937 *gen, double *out, size_t n, double mean, double std,
		       enum tn__rng_isa isa);

/*
 * tn__randint_fill_* - Tensor.random_(low, high) and torch.randint(low, high):
 * templates::cpu::random_from_to_kernel with at::uniform_int_from_to_distribution<T>.
 * For float32 and float64 outputs low and high first go through update_from/update_to
 * (native/DistributionTemplates.h random_from_to), which move bounds beyond 2^24 (2^53) to
 * values the type can tell from their neighbours. Then range = high - low (as uint64);
 * int64, float32 and float64 outputs with range >= 2^32 take a 64-bit draw, everything else a
 * 32-bit one; out = (T)(int64)(draw % range + low).
 * The caller has checked low and high against the dtype as torch does
 * (check_from_to_in_range, and its warnings for floats); this needs only low < high.
 * Errors: -EINVAL when low >= high (before or after the update).
 */
int tn__randint_fill_i64(struct tn__mt19937 *gen, int64_t *out, size_t n, int64_t low,
			 int64_t high);
int tn__randint_fill_i32(struct tn__mt19937 *gen, int32_t *out, size_t n, int64_t low,
			 int64_t high);
int tn__randint_fill_i16(struct tn__mt19937 *gen, int16_t *out, size_t n, int64_t low,
			 int64_t high);
int tn__randint_fill_i8(struct tn__mt19937 *gen, int8_t *out, size_t n, int64_t low, int64_t high);
int tn__randint_fill_u8(struct tn__mt19937 *gen, uint8_t *out, size_t n, int64_t low, int64_t high);
int tn__randint_fill_f32(struct tn__mt19937 *gen, float *out, size_t n, int64_t low, int64_t high);
int tn__randint_fill_f64(struct tn__mt19937 *gen, double *out, size_t n, int64_t low, int64_t high);

/*
 * tn__random_full_fill_* - Tensor.random_(-2**63, None) on int64/float32/float64:
 * random_full_64_bits_range_kernel, (T)(int64)random64().
 */
void tn__random_full_fill_i64(struct tn__mt19937 *gen, int64_t *out, size_t n);
void tn__random_full_fill_f32(struct tn__mt19937 *gen, float *out, size_t n);
void tn__random_full_fill_f64(struct tn__mt19937 *gen, double *out, size_t n);

/*
 * tn__random_fill_* - Tensor.random_() with no bounds: random_kernel with
 * at::uniform_int_distribution<T>. int64 and float64 take a 64-bit draw, the others a 32-bit
 * one; integers keep draw % (max(T) + 1), floating types draw % (2^digits + 1), bool draw & 1.
 */
void tn__random_fill_i64(struct tn__mt19937 *gen, int64_t *out, size_t n);
void tn__random_fill_i32(struct tn__mt19937 *gen, int32_t *out, size_t n);
void tn__random_fill_f32(struct tn__mt19937 *gen, float *out, size_t n);
void tn__random_fill_f64(struct tn__mt19937 *gen, double *out, size_t n);
void tn__random_fill_bool(struct tn__mt19937 *gen, bool *out, size_t n);

/*
 * tn__bernoulli_fill_* - Tensor.bernoulli_(p) with a scalar p:
 * bernoulli_scalar_kernel_default (torch built without MKL, or with MKL on a non-Intel CPU),
 * templates::cpu::bernoulli_kernel(self, double p) with at::bernoulli_distribution<double>:
 * per element one 64-bit draw, u = uniform double in [0, 1), out = u < p.
 * Errors: -EINVAL unless 0 <= p <= 1.
 */
int tn__bernoulli_fill_f32(struct tn__mt19937 *gen, float *out, size_t n, double p);
int tn__bernoulli_fill_f64(struct tn__mt19937 *gen, double *out, size_t n, double p);
int tn__bernoulli_fill_i64(struct tn__mt19937 *gen, int64_t *out, size_t n, double p);
int tn__bernoulli_fill_u8(struct tn__mt19937 *gen, uint8_t *out, size_t n, double p);
int tn__bernoulli_fill_bool(struct tn__mt19937 *gen, bool *out, size_t n, double p);

/*
 * tn__bernoulli_tensor_fill_f32 - torch.bernoulli(p) / Tensor.bernoulli_(p) with a float32
 * probability tensor p of n elements (already expanded to the output):
 * templates::cpu::bernoulli_kernel(self, const Tensor& p) with
 * at::bernoulli_distribution<float>: one 32-bit draw, u = uniform float, out = u < p[i].
 * A float64 p tensor takes bernoulli_distribution<double> instead: the _f64 variant.
 * Outputs are written as 0/1 in float32 (f32) or float64 (f64). No checks (torch checks
 * 0 <= p <= 1 only in debug builds).
 */
void tn__bernoulli_tensor_fill_f32(struct tn__mt19937 *gen, float *out, const float *p, size_t n);
void tn__bernoulli_tensor_fill_f64(struct tn__mt19937 *gen, double *out, const double *p, size_t n);

/*
 * tn__randperm_i64/i32/f32/f64 - torch.randperm(n): randperm_cpu in
 * aten/src/ATen/native/TensorFactories.cpp: out[i] = i, then for i in [0, n - 1) swap out[i]
 * with out[i + random() % (n - i)] (one 32-bit draw each, none when n < 2).
 * torch 1.13 has this one path for every n (checked at n = 214748365, beyond the
 * n < UINT32_MAX / 20 bound where later versions switch to random64()).
 * The caller checks n against the dtype as torch does (check_supported_max_int_with_precision).
 */
void tn__randperm_i64(struct tn__mt19937 *gen, int64_t *out, size_t n);
void tn__randperm_i32(struct tn__mt19937 *gen, int32_t *out, size_t n);
void tn__randperm_f32(struct tn__mt19937 *gen, float *out, size_t n);
void tn__randperm_f64(struct tn__mt19937 *gen, double *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* LIBTENSOR_GENERATOR_H */
