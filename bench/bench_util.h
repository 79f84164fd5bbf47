/* SPDX-License-Identifier: MIT */
/*
 * What every benchmark program needs: a monotonic clock, the minor page faults so far, and the
 * median of a set of samples. Header-only; each program includes it once.
 */
#ifndef TN_BENCH_UTIL_H
#define TN_BENCH_UTIL_H

#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* CLOCK_MONOTONIC, in nanoseconds. */
static inline double bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Minor page faults of RUSAGE_SELF or RUSAGE_THREAD so far. */
static inline long bench_minflt(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return ru.ru_minflt;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of @v[0..n-1], which it sorts. */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* TN_BENCH_UTIL_H */
