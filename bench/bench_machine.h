// SPDX-License-Identifier: MIT
//
// bench_machine.h - what the C++ benchmarks (bench_linalg, bench_models, bench_ops) share: the
// clock, medians of repeated runs in alternating blocks, the thread count, and the machine's
// limits measured in the same run: the FMA peak and STREAM's copy, read, add and triad
// bandwidths.
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <immintrin.h>
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

// STREAM: the machine's memory bandwidth on @nt threads, over three arrays of 512 MiB each
// (16 times the 32 MiB L3 of the machine this was written on, so no cache holds a pass), in
// vectors of the widest width the CPU has (AVX-512, AVX2 or SSE2, chosen at run time: the
// program is built for any x86-64), each thread on one contiguous share. GB/s count the bytes
// the kernel names (STREAM's convention): copy c = a (read and write), read s += a (a sum in
// four independent vector accumulators per thread, as a reduction or a GEMV over a large
// weight reads), add c = a + b and triad c = a + 3 b (two reads, one write). The kernels with a
// write are run twice, with ordinary stores (the CPU then also reads each line of c before it
// writes it: 1.5 times the counted traffic for copy) and with non-temporal stores, which skip
// that read; *_best is the larger, the honest limit an operator with the same traffic can
// reach. Each figure is the median of 5 passes after a warm one.
struct stream_figures {
	double copy, copy_nt, read, add, add_nt, triad, triad_nt;
	const char *isa;
	size_t array_bytes;
	double copy_best() const { return std::max(copy, copy_nt); }
	double add_best() const { return std::max(add, add_nt); }
	double triad_best() const { return std::max(triad, triad_nt); }
};

enum stream_kernel { STREAM_COPY, STREAM_READ, STREAM_ADD, STREAM_TRIAD };

// One thread's share, vectors [lo, hi) of WIDTH floats, of @kernel; returns the read's sum.
// The loops are written on GCC vector types, so they are vectorised whatever the optimisation
// level, and "no-tree-loop-distribute-patterns" keeps GCC from turning the copy into a call to
// memcpy, which would choose the kind of stores itself.
#define BENCH_STREAM_PASS(name, target_, WIDTH, NT_STORE)                                      \
	__attribute__((target(target_), optimize("no-tree-loop-distribute-patterns"))) inline   \
	float name(stream_kernel kernel, bool nt, float *c, const float *a, const float *b,     \
		   size_t lo, size_t hi)                                                         \
	{                                                                                       \
		typedef float vec __attribute__((vector_size(WIDTH * 4)));                      \
		vec *vc = reinterpret_cast<vec *>(c);                                           \
		const vec *va = reinterpret_cast<const vec *>(a);                               \
		const vec *vb = reinterpret_cast<const vec *>(b);                               \
		const vec three = vec{} + 3.0f;                                                 \
		switch (kernel) {                                                               \
		case STREAM_COPY:                                                               \
			if (nt)                                                                 \
				for (size_t i = lo; i < hi; i++)                                \
					NT_STORE(c + i * WIDTH, va[i]);                         \
			else                                                                    \
				for (size_t i = lo; i < hi; i++)                                \
					vc[i] = va[i];                                          \
			break;                                                                  \
		case STREAM_ADD:                                                                \
			if (nt)                                                                 \
				for (size_t i = lo; i < hi; i++)                                \
					NT_STORE(c + i * WIDTH, va[i] + vb[i]);                 \
			else                                                                    \
				for (size_t i = lo; i < hi; i++)                                \
					vc[i] = va[i] + vb[i];                                  \
			break;                                                                  \
		case STREAM_TRIAD:                                                              \
			if (nt)                                                                 \
				for (size_t i = lo; i < hi; i++)                                \
					NT_STORE(c + i * WIDTH, va[i] + three * vb[i]);         \
			else                                                                    \
				for (size_t i = lo; i < hi; i++)                                \
					vc[i] = va[i] + three * vb[i];                          \
			break;                                                                  \
		case STREAM_READ: {                                                             \
			vec s0 = {}, s1 = {}, s2 = {}, s3 = {};                                 \
			size_t i = lo;                                                          \
			for (; i + 4 <= hi; i += 4) {                                           \
				s0 += va[i];                                                    \
				s1 += va[i + 1];                                                \
				s2 += va[i + 2];                                                \
				s3 += va[i + 3];                                                \
			}                                                                       \
			for (; i < hi; i++)                                                     \
				s0 += va[i];                                                    \
			vec t = s0 + s1 + s2 + s3;                                              \
			float total = 0;                                                        \
			for (int k = 0; k < WIDTH; k++)                                         \
				total += t[k];                                                  \
			return total;                                                           \
		}                                                                               \
		}                                                                               \
		/* Non-temporal stores are weakly ordered: fence them before the join. */       \
		if (nt)                                                                         \
			_mm_sfence();                                                           \
		return 0;                                                                       \
	}
#define BENCH_NT_STORE_512(p, v) _mm512_stream_ps((p), (__m512)(v))
#define BENCH_NT_STORE_256(p, v) _mm256_stream_ps((p), (__m256)(v))
#define BENCH_NT_STORE_128(p, v) _mm_stream_ps((p), (__m128)(v))
BENCH_STREAM_PASS(stream_pass_avx512, "avx512f", 16, BENCH_NT_STORE_512)
BENCH_STREAM_PASS(stream_pass_avx2, "avx2", 8, BENCH_NT_STORE_256)
BENCH_STREAM_PASS(stream_pass_sse2, "sse2", 4, BENCH_NT_STORE_128)
#undef BENCH_STREAM_PASS
#undef BENCH_NT_STORE_512
#undef BENCH_NT_STORE_256
#undef BENCH_NT_STORE_128

inline stream_figures measure_stream(int nt)
{
	typedef float (*pass_fn)(stream_kernel, bool, float *, const float *, const float *,
				 size_t, size_t);
	stream_figures f = {};
	pass_fn pass;
	size_t width;
	if (has_avx512()) {
		pass = stream_pass_avx512, width = 16, f.isa = "AVX-512";
	} else if (__builtin_cpu_supports("avx2")) {
		pass = stream_pass_avx2, width = 8, f.isa = "AVX2";
	} else {
		pass = stream_pass_sse2, width = 4, f.isa = "SSE2";
	}
	const size_t n = (size_t)128 << 20, nv = n / width;
	f.array_bytes = n * 4;
	float *a = static_cast<float *>(std::aligned_alloc(64, n * 4));
	float *b = static_cast<float *>(std::aligned_alloc(64, n * 4));
	float *c = static_cast<float *>(std::aligned_alloc(64, n * 4));
	if (!a || !b || !c) {
		std::fprintf(stderr, "STREAM: cannot allocate 3 x %zu MiB\n", n * 4 >> 20);
		std::exit(1);
	}
	volatile float sink = 0;
	// Each thread takes the same share in every pass, so the pages it first touches here
	// are the ones it reads later (on a NUMA machine, its own node's).
	auto run = [&](stream_kernel kernel, bool ntst) {
		float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
		{
			size_t k = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
			total += pass(kernel, ntst, c, a, b, nv * t / k, nv * (t + 1) / k);
		}
		sink = total;
	};
#pragma omp parallel num_threads(nt)
	{
		size_t k = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
		for (size_t i = n * t / k; i < n * (t + 1) / k; i++) {
			a[i] = 1.0f;
			b[i] = 2.0f;
			c[i] = 0.0f;
		}
	}
	auto gbps = [&](stream_kernel kernel, bool ntst, double arrays) {
		return arrays * n * 4 / median_seconds([&] { run(kernel, ntst); }, 5) / 1e9;
	};
	f.copy = gbps(STREAM_COPY, false, 2);
	f.copy_nt = gbps(STREAM_COPY, true, 2);
	f.read = gbps(STREAM_READ, false, 1);
	f.add = gbps(STREAM_ADD, false, 3);
	f.add_nt = gbps(STREAM_ADD, true, 3);
	f.triad = gbps(STREAM_TRIAD, false, 3);
	f.triad_nt = gbps(STREAM_TRIAD, true, 3);
	(void)sink;
	std::free(a);
	std::free(b);
	std::free(c);
	return f;
}

// STREAM's copy (the better of ordinary and non-temporal stores) and read bandwidths, GB/s,
// on @nt threads: what bench_linalg compares its products and softmaxes with.
inline void stream_bandwidth(int nt, double *copy, double *read)
{
	stream_figures f = measure_stream(nt);
	*copy = f.copy_best();
	*read = f.read;
}

} // namespace bench

#endif // BENCH_MACHINE_H
