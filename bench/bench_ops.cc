// SPDX-License-Identifier: MIT
//
// bench_ops - element-wise operators, copies, casts and sums against PyTorch's C++ library,
// beside the machine's STREAM bandwidth, all in one run.
//
// For each case and size N (float32 unless named; N = 1e3, 1e5, 1e7) it times libtensor and,
// when the build found libtorch (Debian's libtorch-dev), the same operation through ATen's C++
// API, so no interpreter time is counted; both use the same thread count (TN_NUM_THREADS /
// at::set_num_threads, default 2). Each figure is the median of repeated runs. GB/s counts
// the bytes an operation must move (inputs read, output written). It prints one line per case
//   bench CASE N libtensor_GBps=X peer_GBps=Y ratio=R stream_frac=F
// (ratio = peer time / libtensor time: > 1 means libtensor is faster; stream_frac = libtensor's
// GB/s over STREAM's for the same kind of traffic) and writes the same as JSON to
// bench_ops.json (or the file named by $BENCH_JSON). The two libraries are timed alternately
// run by run. $BENCH_ONLY=case,case runs only the named cases.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#ifdef TN_HAVE_LIBTORCH
#include <torch/torch.h>
#endif

extern "C" {
#include <tensor.h>
}

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_of(const std::function<void()> &fn, int reps)
{
	std::vector<double> t;
	fn(); // warm: first-use registration, page faults, caches
	for (int r = 0; r < reps; r++) {
		auto t0 = clock_type::now();
		fn();
		t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
	}
	std::sort(t.begin(), t.end());
	return t[t.size() / 2];
}

// Medians of @a and @b timed alternately, so that a burst of load from other processes on a
// shared machine falls on both sides of a ratio rather than on one.
std::pair<double, double> paired_seconds(const std::function<void()> &a,
					 const std::function<void()> &b, int reps)
{
	std::vector<double> ta, tb;
	a();
	b();
	for (int r = 0; r < reps; r++) {
		auto t0 = clock_type::now();
		a();
		auto t1 = clock_type::now();
		b();
		auto t2 = clock_type::now();
		ta.push_back(std::chrono::duration<double>(t1 - t0).count());
		tb.push_back(std::chrono::duration<double>(t2 - t1).count());
	}
	std::sort(ta.begin(), ta.end());
	std::sort(tb.begin(), tb.end());
	return { ta[ta.size() / 2], tb[tb.size() / 2] };
}

// $BENCH_ONLY: a comma-separated list of case names to run (default: all).
bool selected(const char *name)
{
	const char *only = std::getenv("BENCH_ONLY");
	if (!only || !*only)
		return true;
	std::string list = std::string(",") + only + ",";
	return list.find(std::string(",") + name + ",") != std::string::npos;
}

int reps_for(int64_t n)
{
	// BENCH_REPS overrides, for a quick run that only checks the program works.
	if (const char *e = std::getenv("BENCH_REPS"))
		return std::max(1, std::atoi(e));
	return n >= 10000000 ? 11 : n >= 100000 ? 51 : 2001;
}

void check(int rc, const char *what)
{
	if (rc < 0) {
		std::fprintf(stderr, "bench_ops: %s: %s\n", what, tn_last_error());
		std::exit(1);
	}
}

tn_tensor *tn_rand(int n, const int64_t *sizes, enum tn_dtype dt)
{
	tn_tensor *t;
	check(tn_empty(n, sizes, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), "empty");
	int64_t numel = tn_tensor_numel(t);
	if (dt == TN_FLOAT32) {
		float *p = (float *)tn_tensor_data(t);
		for (int64_t i = 0; i < numel; i++)
			p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
	} else if (dt == TN_INT32) {
		int32_t *p = (int32_t *)tn_tensor_data(t);
		for (int64_t i = 0; i < numel; i++)
			p[i] = (int32_t)((i * 2654435761u) % 1000);
	} else {
		check(tn_fill_(t, tn_scalar_int(1)), "fill");
	}
	return t;
}

// STREAM copy and add with the same thread count, on N = 2e7 floats (80 MB per array).
struct stream_figures {
	double copy_gbps, add_gbps;
};

stream_figures measure_stream(int threads)
{
	const int64_t n = 20000000;
	std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
	float *A = a.data(), *B = b.data(), *C = c.data();
	double tc = seconds_of([&] {
#pragma omp parallel for num_threads(threads) schedule(static)
		for (int64_t i = 0; i < n; i++)
			C[i] = A[i];
	}, 11);
	double ta = seconds_of([&] {
#pragma omp parallel for num_threads(threads) schedule(static)
		for (int64_t i = 0; i < n; i++)
			C[i] = A[i] + B[i];
	}, 11);
	return { 2.0 * 4 * n / tc / 1e9, 3.0 * 4 * n / ta / 1e9 };
}

struct result {
	std::string name;
	int64_t n;
	double tn_gbps, peer_gbps, ratio, stream_frac;
};

} // namespace

int main()
{
	int threads = 2;
	if (const char *e = std::getenv("TN_NUM_THREADS"))
		threads = std::max(1, std::atoi(e));
	else
		setenv("TN_NUM_THREADS", "2", 1);
#ifdef TN_HAVE_LIBTORCH
	at::set_num_threads(threads);
	const bool have_peer = true;
#else
	const bool have_peer = false;
#endif
	stream_figures st = measure_stream(threads);
	std::printf("STREAM (%d threads, same run): copy %.1f GB/s, add %.1f GB/s\n", threads,
		    st.copy_gbps, st.add_gbps);
	std::printf("libtensor CPU capability: %s; peer: %s\n",
		    tn_cpu_capability_name(tn_cpu_capability()),
		    have_peer ? "libtorch (ATen C++ API)" : "none (libtorch not found)");

	std::vector<result> results;
	const int64_t sizes[] = { 1000, 100000, 10000000 };
	for (int64_t n : sizes) {
		int reps = reps_for(n);
		int64_t flat[] = { n };
		int64_t cols = n >= 1000 ? 1000 : n, rows = n / cols;
		int64_t mat[] = { rows, cols };
		int64_t side = (int64_t)std::llround(std::sqrt((double)n));
		int64_t sq[] = { side, side };
		int64_t hw = (int64_t)std::llround(std::sqrt((double)n / 16)), nhwc[] = { 1, hw, hw, 16 };
		int64_t perm[] = { 0, 3, 1, 2 };
		int64_t row[] = { cols };

		tn_tensor *a = tn_rand(1, flat, TN_FLOAT32), *b = tn_rand(1, flat, TN_FLOAT32);
		tn_tensor *ai = tn_rand(1, flat, TN_INT32), *out = tn_rand(1, flat, TN_FLOAT32);
		tn_tensor *am = tn_rand(2, mat, TN_FLOAT32), *r = tn_rand(1, row, TN_FLOAT32);
		tn_tensor *asq = tn_rand(2, sq, TN_FLOAT32), *anhwc = tn_rand(4, nhwc, TN_FLOAT32);
#ifdef TN_HAVE_LIBTORCH
		auto A = torch::rand({ n }), B = torch::rand({ n }), OUT = torch::empty({ n });
		auto AI = torch::randint(0, 1000, { n }, torch::kInt32);
		auto AM = torch::rand({ rows, cols }), R = torch::rand({ cols });
		auto ASQ = torch::rand({ side, side }), ANHWC = torch::rand({ 1, hw, hw, 16 });
#endif
		struct bench_case {
			const char *name;
			double bytes;
			double stream; // the STREAM figure of the same traffic
			std::function<void()> tn, peer;
		};
		std::vector<bench_case> cases = {
			{ "add", 12.0 * n, st.add_gbps,
			  [&] {
				  tn_tensor *c;
				  check(tn_add(a, b, tn_scalar_int(1), &c), "add");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = A + B; }
#else
			  nullptr
#endif
			},
			{ "add_out", 12.0 * n, st.add_gbps,
			  [&] { check(tn_add_out(a, b, tn_scalar_int(1), out), "add_out"); },
#ifdef TN_HAVE_LIBTORCH
			  [&] { at::add_out(OUT, A, B); }
#else
			  nullptr
#endif
			},
			{ "add_broadcast_row", 8.0 * n + 4.0 * cols, st.add_gbps,
			  [&] {
				  tn_tensor *c;
				  check(tn_add(am, r, tn_scalar_int(1), &c), "add row");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = AM + R; }
#else
			  nullptr
#endif
			},
			{ "transpose_contiguous", 8.0 * side * side, st.copy_gbps,
			  [&] {
				  tn_tensor *t, *c;
				  check(tn_transpose(asq, 0, 1, &t), "t");
				  check(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c), "contiguous");
				  tn_tensor_unref(c);
				  tn_tensor_unref(t);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = ASQ.t().contiguous(); }
#else
			  nullptr
#endif
			},
			{ "nhwc_to_nchw", 8.0 * hw * hw * 16, st.copy_gbps,
			  [&] {
				  tn_tensor *t, *c;
				  check(tn_permute(anhwc, 4, perm, &t), "permute");
				  check(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c), "contiguous");
				  tn_tensor_unref(c);
				  tn_tensor_unref(t);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = ANHWC.permute({ 0, 3, 1, 2 }).contiguous(); }
#else
			  nullptr
#endif
			},
			{ "cast_f32_f64", 12.0 * n, st.copy_gbps * 1.0,
			  [&] {
				  tn_tensor *c;
				  check(tn_empty(1, flat, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &c), "empty");
				  check(tn_copy_(c, a, false), "copy_");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = A.to(torch::kFloat64); }
#else
			  nullptr
#endif
			},
			{ "cast_i32_f32", 8.0 * n, st.copy_gbps,
			  [&] {
				  tn_tensor *c;
				  check(tn_empty(1, flat, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &c), "empty");
				  check(tn_copy_(c, ai, false), "copy_");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = AI.to(torch::kFloat32); }
#else
			  nullptr
#endif
			},
			{ "add_i32_f32", 12.0 * n, st.add_gbps,
			  [&] {
				  tn_tensor *c;
				  check(tn_add(ai, b, tn_scalar_int(1), &c), "mixed add");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = AI + B; }
#else
			  nullptr
#endif
			},
			{ "sum", 4.0 * n, st.copy_gbps,
			  [&] {
				  tn_tensor *c;
				  check(tn_sum(a, NULL, &c), "sum");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = at::sum(A); }
#else
			  nullptr
#endif
			},
			{ "sum_columns", 4.0 * n + 4.0 * cols, st.copy_gbps,
			  [&] {
				  tn_tensor *c;
				  int64_t d0 = 0;
				  check(tn_sum_dim(am, 1, &d0, false, NULL, &c), "sum columns");
				  tn_tensor_unref(c);
			  },
#ifdef TN_HAVE_LIBTORCH
			  [&] { auto c = at::sum(AM, { 0 }); }
#else
			  nullptr
#endif
			},
		};
		for (auto &c : cases) {
			if (!selected(c.name))
				continue;
			double t, p = 0;
			if (c.peer)
				std::tie(t, p) = paired_seconds(c.tn, c.peer, reps);
			else
				t = seconds_of(c.tn, reps);
			result res{ c.name, n, c.bytes / t / 1e9, p > 0 ? c.bytes / p / 1e9 : 0,
				    p > 0 ? p / t : 0, c.bytes / t / 1e9 / c.stream };
			results.push_back(res);
		}
		tn_tensor *list[] = { a, b, ai, out, am, r, asq, anhwc };
		for (tn_tensor *t : list)
			tn_tensor_unref(t);
	}

	// Per-call cost of add out= on one element.
	if (selected("add_out_1elem_ns")) {
		int64_t one[] = { 1 };
		tn_tensor *a = tn_rand(1, one, TN_FLOAT32), *b = tn_rand(1, one, TN_FLOAT32);
		tn_tensor *c = tn_rand(1, one, TN_FLOAT32);
		const int calls = 100000;
		auto tn_calls = [&] {
			for (int i = 0; i < calls; i++)
				tn_add_out(a, b, tn_scalar_int(1), c);
		};
		double t, p = 0;
#ifdef TN_HAVE_LIBTORCH
		auto A = torch::rand({ 1 }), B = torch::rand({ 1 }), C = torch::empty({ 1 });
		std::tie(t, p) = paired_seconds(tn_calls, [&] {
			for (int i = 0; i < calls; i++)
				at::add_out(C, A, B);
		}, 11);
		p /= calls;
#else
		t = seconds_of(tn_calls, 11);
#endif
		t /= calls;
		std::printf("add_out on 1 element: libtensor %.1f ns/call, peer %.1f ns/call (target < 50 ns)\n",
			    t * 1e9, p * 1e9);
		results.push_back({ "add_out_1elem_ns", 1, t * 1e9, p * 1e9, p > 0 ? p / t : 0, 0 });
		tn_tensor_unref(a);
		tn_tensor_unref(b);
		tn_tensor_unref(c);
	}

	const char *json_path = std::getenv("BENCH_JSON") ? std::getenv("BENCH_JSON") : "bench_ops.json";
	FILE *json = std::fopen(json_path, "w");
	if (json)
		std::fprintf(json, "{\"stream_copy_GBps\": %.3f, \"stream_add_GBps\": %.3f, \"threads\": %d, \"cases\": [\n",
			     st.copy_gbps, st.add_gbps, threads);
	for (size_t i = 0; i < results.size(); i++) {
		const result &r = results[i];
		if (r.name != "add_out_1elem_ns")
			std::printf("bench %s %lld libtensor_GBps=%.2f peer_GBps=%.2f ratio=%.2f stream_frac=%.2f\n",
				    r.name.c_str(), (long long)r.n, r.tn_gbps, r.peer_gbps, r.ratio, r.stream_frac);
		if (json)
			std::fprintf(json,
				     "  {\"case\": \"%s\", \"n\": %lld, \"libtensor\": %.4f, \"peer\": %.4f, \"ratio\": %.3f, \"stream_frac\": %.3f}%s\n",
				     r.name.c_str(), (long long)r.n, r.tn_gbps, r.peer_gbps, r.ratio, r.stream_frac,
				     i + 1 < results.size() ? "," : "");
	}
	if (json) {
		std::fprintf(json, "]}\n");
		std::fclose(json);
	}
	return 0;
}
