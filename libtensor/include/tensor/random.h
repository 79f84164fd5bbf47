/* SPDX-License-Identifier: MIT */
/*
 * Random generators: PyTorch 1.13's CPU generator (CPUGeneratorImpl: mt19937 with torch's
 * seeding and its cached normal samples), as explicit objects and as one default generator
 * per process.
 *
 * The random operators of <tensor/ops.h> (tn_rand, tn_randn, tn_randint, tn_randperm,
 * tn_uniform_, tn_normal_, tn_random_, tn_bernoulli, tn_dropout, ...) take a tn_generator *
 * argument; NULL means the default generator. For the same seed they give the numbers torch
 * gives for float32 and float64 outputs (see libtensor-random(7) for the exact scope). A
 * generator's state can be saved and restored in the byte layout of torch's get_state(), so a
 * stream can move between a torch process and a libtensor one.
 *
 * Generators are reference counted and thread safe: each holds a mutex that every draw takes,
 * as CPUGeneratorImpl::mutex_. Functions return 0 or a negative TN_E* code with a message in
 * tn_last_error(), like the rest of libtensor.
 */
#ifndef TENSOR_RANDOM_H
#define TENSOR_RANDOM_H

#include <stdint.h>

#include <tensor/macros.h>
#include <tensor/tensor.h>

TN_BEGIN_DECLS

typedef struct tn_generator tn_generator;

/* The seed of a new generator: c10's default_rng_seed_val, what torch.Generator() starts with. */
#define TN_DEFAULT_RNG_SEED UINT64_C(67280421310721)

/* The byte size of a state from tn_generator_get_state(): sizeof(CPUGeneratorImplState). */
#define TN_GENERATOR_STATE_SIZE 5056

/*
 * tn_generator_new - a new generator seeded with TN_DEFAULT_RNG_SEED (torch.Generator()).
 * tn_generator_ref adds a reference and returns @gen (NULL for a bad handle);
 * tn_generator_unref drops one (NULL is accepted), frees the generator with the last, and
 * returns NULL (`g = tn_generator_unref(g);`). The default generator ignores both.
 * Errors: TN_EINVAL (NULL ret), TN_ENOMEM.
 */
TN_EXPORT int tn_generator_new(tn_generator **ret_gen);
TN_EXPORT tn_generator *tn_generator_ref(tn_generator *gen);
TN_EXPORT tn_generator *tn_generator_unref(tn_generator *gen);

/*
 * tn_generator_manual_seed - Generator.manual_seed(seed): the whole 64-bit seed is kept (and
 * read back by tn_generator_initial_seed), mt19937 is seeded with its low 32 bits, and the
 * cached normal samples are dropped. A negative Python seed is taken modulo 2^64, as torch.
 * tn_generator_seed - Generator.seed(): a fresh seed from the kernel's random source, set and
 * returned in *ret_seed.
 * Errors: TN_EBADF (a bad handle), TN_EINVAL (NULL ret_seed), TN_EIO (no random source).
 */
TN_EXPORT int tn_generator_manual_seed(tn_generator *gen, uint64_t seed);
TN_EXPORT int tn_generator_seed(tn_generator *gen, uint64_t *ret_seed);
TN_EXPORT int tn_generator_initial_seed(tn_generator *gen, uint64_t *ret_seed);

/*
 * tn_generator_get_state - the generator's state as a new 1-d uint8 tensor of
 * TN_GENERATOR_STATE_SIZE bytes, laid out as torch 1.13's CPUGeneratorImpl::get_state() on
 * x86-64 Linux (torch.Generator.get_state() / torch.get_rng_state()).
 * tn_generator_set_state - restore a state of that layout, or of torch's older
 * 5048-byte THGeneratorState, as CPUGeneratorImpl::set_state does: a cached float64 normal
 * sample comes back from normal_y in the current layout, and is rebuilt as
 * normal_rho * sin(2 pi normal_x) from the legacy one. The state must be a contiguous CPU
 * uint8 tensor.
 * Errors: TN_EBADF, TN_EINVAL ("RNG state must be a torch.ByteTensor", a wrong size, "Invalid
 * mt19937 state"), TN_ENOMEM. On an error the generator is unchanged.
 */
TN_EXPORT int tn_generator_get_state(tn_generator *gen, tn_tensor **ret_state);
TN_EXPORT int tn_generator_set_state(tn_generator *gen, const tn_tensor *state);

/*
 * tn_default_generator - the process's default generator (torch.default_generator), made on
 * first use and seeded, as torch's, from the kernel's random source: its initial seed differs
 * from process to process until tn_manual_seed sets one. The pointer is borrowed, lives
 * until exit and is never NULL (the generator is static storage).
 * tn_manual_seed / tn_seed / tn_initial_seed - torch.manual_seed, torch.seed and
 * torch.initial_seed on it.
 */
TN_EXPORT tn_generator *tn_default_generator(void);
TN_EXPORT int tn_manual_seed(uint64_t seed);
TN_EXPORT int tn_seed(uint64_t *ret_seed);
TN_EXPORT int tn_initial_seed(uint64_t *ret_seed);

TN_END_DECLS

#endif /* TENSOR_RANDOM_H */
