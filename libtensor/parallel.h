/* SPDX-License-Identifier: MIT */
/*
 * The parallel runtime of the loops: how many threads they use (TN_NUM_THREADS, OpenMP's
 * setting, or the workers tn_workers_pin bound) and tn__parallel_for, which splits a range
 * over OpenMP threads (over pthreads in a ThreadSanitizer build, whose joins TSan sees).
 */
#ifndef TN_PARALLEL_H
#define TN_PARALLEL_H

#include <stdint.h>

/* The number of threads for_each uses: the pinned workers' (tn_workers_pin), else
 * tn__default_threads(). The first call outside a parallel region reads TN_PIN_NODE and pins
 * the calling thread's workers when it is set. */
int tn__num_threads(void);
/* TN_NUM_THREADS, else OpenMP's setting. */
int tn__default_threads(void);

/* A range of a parallel loop: [begin, end) on thread @tid (0 <= tid < the threads asked). */
typedef void (*tn_range_fn)(void *ctx, int64_t begin, int64_t end, int tid);

/*
 * Run @fn over [0, @n) split into one contiguous range per thread, on at most @threads OpenMP
 * threads (serially inside a parallel region). The loops' driver: for_each splits the
 * iteration space, the reductions their outputs, or the input of one output with per-thread
 * partial results. Returns the threads used.
 */
int tn__parallel_for(int64_t n, int threads, tn_range_fn fn, void *ctx);

#endif /* TN_PARALLEL_H */
