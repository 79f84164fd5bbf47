// SPDX-License-Identifier: MIT
//
// bench_machine.h - what the C++ benchmarks (bench_linalg, bench_models) share: the clock,
// medians of repeated runs in alternating blocks, the thread count, and the machine's limits
// measured in the same run: the FMA peak and STREAM's copy and read bandwidths.
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <omp.h>

namespace bench {

inline double now()
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

// The median of @reps timed runs of @fn after one warm run.
inline double median_seconds(const std::function<void()> &fn, int reps)
{
	std::vector<double> t;
	fn();
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		fn();
		t.push_back(now() - t0);
	}
	std::sort(t.begin(), t.end());
	return t[t.size() / 2];
}

// Medians over three alternating blocks per contender: each library is timed in a block of
// its own (thread pools spin after a call and would steal the other's cores if interleaved).
inline std::vector<double> blocks(const std::vector<std::function<void()>> &fns, int reps)
{
	std::vector<std::vector<double>> all(fns.size());
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < fns.size(); i++)
			all[i].push_back(median_seconds(fns[i], reps));
	std::vector<double> med;
	for (auto &v : all) {
		std::sort(v.begin(), v.end());
		med.push_back(v[1]);
	}
	return med;
}

// TN_NUM_THREADS, default 2 (this machine's cores).
inline int threads()
{
	const char *e = std::getenv("TN_NUM_THREADS");
	return e && std::atoi(e) > 0 ? std::atoi(e) : 2;
}

// The FMA peak: each thread runs 12 independent chains of fused multiply-adds on vectors of
// WIDTH floats in registers (8: AVX2, 16: AVX-512); GFLOP/s counts 2 per lane per FMA.
#define BENCH_FMA_PEAK(name, target_, WIDTH)                                                    \
	__attribute__((target(target_))) inline double name(int nt)                             \
	{                                                                                       \
		const long iters = 20000000;                                                    \
		double best = 0;                                                                \
		for (int rep = 0; rep < 5; rep++) {                                             \
			double t0 = now();                                                      \
			_Pragma("omp parallel num_threads(nt)")                                 \
			{                                                                       \
				typedef float vec __attribute__((vector_size(WIDTH * 4)));      \
				vec a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, \
				    a7 = {}, a8 = {}, a9 = {}, a10 = {}, a11 = {};              \
				vec x = vec{} + 1.0000001f, y = vec{} + 0.9999999f;             \
				for (long i = 0; i < iters; i++) {                              \
					__asm__("vfmadd231ps %[x], %[y], %[a0]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a1]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a2]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a3]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a4]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a5]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a6]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a7]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a8]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a9]\n\t"               \
						"vfmadd231ps %[x], %[y], %[a10]\n\t"              \
						"vfmadd231ps %[x], %[y], %[a11]"                  \
						: [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2),      \
						  [a3] "+x"(a3), [a4] "+x"(a4), [a5] "+x"(a5),      \
						  [a6] "+x"(a6), [a7] "+x"(a7), [a8] "+x"(a8),      \
						  [a9] "+x"(a9), [a10] "+x"(a10), [a11] "+x"(a11)   \
						: [x] "x"(x), [y] "x"(y));                        \
				}                                                               \
				vec s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11; \
				if (s[0] == 42.0f)                                              \
					std::printf(" ");                                       \
			}                                                                       \
			double g = 12.0 * WIDTH * 2 * iters * nt / (now() - t0) / 1e9;          \
			best = std::max(best, g);                                               \
		}                                                                               \
		return best;                                                                    \
	}
BENCH_FMA_PEAK(fma_peak_avx512, "avx512f", 16)
BENCH_FMA_PEAK(fma_peak_avx2, "avx2,fma", 8)
#undef BENCH_FMA_PEAK

inline bool has_avx512() { return __builtin_cpu_supports("avx512f"); }

// The FMA peak of the widest vectors the machine has, on @nt threads.
inline double fma_peak(int nt) { return has_avx512() ? fma_peak_avx512(nt) : fma_peak_avx2(nt); }

// STREAM over arrays of 256 MiB (8x the 32 MiB L3), vectorised by the compiler, on @nt threads,
// GB/s: copy counts the bytes read and written; read sums one array (what a GEMV over a large
// weight does).
inline void stream_bandwidth(int nt, double *copy, double *read)
{
	const size_t n = (size_t)64 << 20;
	float *a = static_cast<float *>(std::aligned_alloc(64, n * 4));
	float *b = static_cast<float *>(std::aligned_alloc(64, n * 4));
#pragma omp parallel for num_threads(nt)
	for (size_t i = 0; i < n; i++) {
		a[i] = 1.0f;
		b[i] = 0.0f;
	}
	double s = median_seconds([&] {
#pragma omp parallel for num_threads(nt)
		for (size_t i = 0; i < n; i++)
			b[i] = a[i];
	}, 7);
	*copy = 2.0 * n * 4 / s / 1e9;
	// The sum in four independent vector accumulators per thread: a scalar float sum is a
	// chain of dependent adds that the compiler may not reorder, and measures add latency.
	volatile float sink = 0;
	s = median_seconds([&] {
		typedef float v16 __attribute__((vector_size(64)));
		const v16 *va = reinterpret_cast<const v16 *>(a);
		const size_t nv = n / 16;
		float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
		{
			v16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
#pragma omp for schedule(static)
			for (size_t i = 0; i < nv; i += 4) {
				s0 += va[i];
				s1 += va[i + 1];
				s2 += va[i + 2];
				s3 += va[i + 3];
			}
			v16 t = s0 + s1 + s2 + s3;
			for (int k = 0; k < 16; k++)
				total += t[k];
		}
		sink = total;
	}, 7);
	(void)sink;
	*read = 1.0 * n * 4 / s / 1e9;
	std::free(a);
	std::free(b);
}

} // namespace bench

#endif // BENCH_MACHINE_H
