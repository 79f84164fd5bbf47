/* SPDX-License-Identifier: MIT */
/*
 * Allocation benchmark: the make-touch-drop loop of a large tensor, libtensor's CPU allocator
 * against glibc malloc measured in the same run, with the machine's memset bandwidth as the
 * ceiling. Prints medians over repetitions and their ratios; the machine is shared and noisy,
 * so only medians and ratios mean anything.
 *
 * Usage: bench_alloc [MiB] [iterations]   (default 64 MiB, 41 iterations)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tensor.h>

#include "bench_util.h"

struct result {
	double ms;     /* median milliseconds per make-touch-drop */
	double faults; /* median minor page faults per iteration */
};

enum which { GLIBC, LIBTENSOR_STORAGE, LIBTENSOR_TENSOR };

static struct result run(enum which w, size_t bytes, int iters)
{
	double *t = calloc((size_t)iters, sizeof(double));
	double *f = calloc((size_t)iters, sizeof(double));
	int64_t n = (int64_t)(bytes / 4);
	struct result r;

	for (int i = 0; i < iters; i++) {
		long f0 = bench_minflt(RUSAGE_SELF);
		double t0 = bench_now_ns();
		if (w == GLIBC) {
			void *p = malloc(bytes);
			memset(p, 1, bytes);
			/* Keep the compiler from eliding the malloc/memset/free triple. */
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
		} else if (w == LIBTENSOR_STORAGE) {
			tn_storage *s;
			if (tn_storage_new((tn_device){ TN_DEVICE_CPU, 0 }, bytes, &s)) {
				fprintf(stderr, "bench: %s\n", tn_last_error());
				exit(1);
			}
			memset(tn_storage_data(s), 1, bytes);
			tn_storage_unref(s);
		} else {
			tn_tensor *x;
			if (tn_full(1, &n, tn_scalar_double(1.0), &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &x)) {
				fprintf(stderr, "bench: %s\n", tn_last_error());
				exit(1);
			}
			tn_tensor_unref(x);
		}
		t[i] = (bench_now_ns() - t0) * 1e-6;
		f[i] = (double)(bench_minflt(RUSAGE_SELF) - f0);
	}
	r.ms = bench_median(t, iters);
	r.faults = bench_median(f, iters);
	free(t);
	free(f);
	return r;
}

/* memset bandwidth over an already-faulted buffer: the ceiling for "touch every byte". */
static double memset_gbps(size_t bytes, int iters)
{
	char *p = malloc(bytes);
	double *t = calloc((size_t)iters, sizeof(double));
	memset(p, 0, bytes);
	for (int i = 0; i < iters; i++) {
		double t0 = bench_now_ns();
		memset(p, i & 0xff, bytes);
		t[i] = (bench_now_ns() - t0) * 1e-9;
	}
	double gbps = (double)bytes / bench_median(t, iters) / 1e9;
	free(p);
	free(t);
	return gbps;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	int iters = argc > 2 ? atoi(argv[2]) : 41;
	size_t bytes = mib << 20;

	if (mib == 0 || iters < 3) {
		fprintf(stderr, "usage: bench_alloc [MiB > 0] [iterations >= 3]\n");
		return 2;
	}
	double bw = memset_gbps(bytes, iters);
	struct result g = run(GLIBC, bytes, iters);
	struct result s = run(LIBTENSOR_STORAGE, bytes, iters);
	struct result x = run(LIBTENSOR_TENSOR, bytes, iters);
	double ideal_ms = (double)bytes / (bw * 1e9) * 1e3;

	printf("bench_alloc: make, touch and drop a %zu MiB block, median of %d iterations\n", mib,
	       iters);
	printf("  memset bandwidth (warm buffer, same run): %.2f GB/s -> %.2f ms per block\n", bw,
	       ideal_ms);
	printf("  %-34s %10s %12s %14s %12s\n", "", "ms/iter", "faults/iter", "vs glibc", "vs memset");
	printf("  %-34s %10.2f %12.0f %14s %11.2fx\n", "glibc malloc+memset+free", g.ms, g.faults,
	       "1.00x", g.ms / ideal_ms);
	printf("  %-34s %10.2f %12.0f %13.2fx %11.2fx\n", "tn_storage_new+memset+unref", s.ms,
	       s.faults, g.ms / s.ms, s.ms / ideal_ms);
	printf("  %-34s %10.2f %12.0f %13.2fx %11.2fx\n", "tn_full(float32)+unref", x.ms, x.faults,
	       g.ms / x.ms, x.ms / ideal_ms);
	printf("  (\"vs glibc\" > 1 means libtensor is faster; \"vs memset\" is the cost over the "
	       "bandwidth ceiling)\n");
	return 0;
}
