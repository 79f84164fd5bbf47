// SPDX-License-Identifier: MIT
//
// bench_ops - every operator family of libtensor against PyTorch's C++ library (ATen, when the
// build found Debian's libtorch-dev), beside the machine's STREAM bandwidth, all in one run.
//
// It first measures STREAM (bench_machine.h: vectorised copy, read, add and triad over three
// arrays of 512 MiB, far beyond the last-level cache, with ordinary and with non-temporal
// stores; 1.5 GiB of memory for a few seconds) on the benchmark's thread count, and prints it. Then, for each size N (1e3, 1e5, 1e7) and each
// dtype (float32, float16, bfloat16), on contiguous 1-d inputs of N elements unless said:
//
//   binary       add sub mul div maximum pow (tensor ^ tensor) atan2, and add_broadcast_row
//                ([N/1000, 1000] + [1000]);
//   comparison   eq lt (bool out);
//   unary        exp expm1 log log1p log2 sin cos tan tanh sigmoid erf gelu (approximate
//                "none") gelu_tanh sqrt rsqrt reciprocal abs neg silu relu;
//   predicates   isnan isfinite (bool out);
//   clamp        scalar bounds [-1, 1]; where (bool condition, two tensors);
//   reductions   sum mean prod amax argmax: NAME_all over all N elements, NAME_dim1 along the
//                last dim of an [N/1000, 1000] matrix, NAME_dim0 along its first dim;
//                max_dim1 (max.dim, values and indices) along the last dim;
//   model ops    softmax log_softmax layer_norm along the last dim of [N/1000, 1000] (one row
//                at N = 1e3), layer_norm with a weight and a bias;
//   layouts      transpose_contiguous (a square matrix's transpose made contiguous) and
//                nhwc_to_nchw (a [1, H, W, 16] tensor permuted to NCHW and made contiguous);
//   float32 only add_alloc (the functional add, allocation included), add_i32_f32 (int32 +
//                float32 -> float32);
//
// and, per size, "cast": the copy of an N-element tensor into one of another dtype, for every
// ordered pair of float16, bfloat16, float32, float64 and int32 (its dtype column names the
// pair). Last, add_out_1elem_ns: add_out on one element, the cost of a call in ns (its row's
// times are those of 100000 calls).
//
// Inputs are deterministic (a hash of the index) and the same values for both libraries, in
// each function's domain: [-3, 3] for most, (0.1, 10] for log, log1p, log2, sqrt, rsqrt,
// reciprocal and div's divisor, bases in [0.5, 2] and exponents in [-2, 2] for pow, [-1.4, 1.4]
// for tan, the cycle 0.5, 2, -1, 1 for prod (products stay near 1 at every size), [-1000, 1000]
// for casts. Both libraries write into outputs allocated before the timing (the out= forms)
// except where one of them has none: isfinite, layer_norm and the layout cases are timed in
// their functional forms on both sides, as are add_alloc and add_i32_f32 on purpose.
//
// Timing: both libraries use the same thread count (TN_NUM_THREADS, default 2; torch through
// at::set_num_threads); each is called twice to warm, then they are timed alternately, call by
// call, so a burst of load from elsewhere on a shared machine falls on both sides of a ratio;
// each figure is the median. Repetitions: 2001 at N < 1e5, 51 below 1e7, 11 from 1e7, fewer
// (at least 5) when a case's warm calls say that would take more than half a second.
//
// Output, one line per case:
//   case dtype N libtensor torch ratio bytes_frac
// with the medians' times, ratio = torch time / libtensor time (> 1: libtensor is faster), and
// bytes_frac = (the bytes the operation must move / the STREAM bandwidth of the same kind of
// traffic) / libtensor's time, the fraction of the machine's memory limit it reaches. The bytes
// are each input read once and each output written once; the kind of traffic is STREAM's read
// for reductions, its copy for one input and one output, its add for more inputs, each with the
// better of ordinary and non-temporal stores. At 1e3 and 1e5 the data sits in the caches and
// bytes_frac can pass 1. A case that either library refuses (torch 1.13 lacks some float16 CPU
// kernels) prints "n/a (libtensor: reason)" or "n/a (torch: reason)" in place of its figure,
// and the other library's figure when it has one. The summary at the end lists the cases below
// 1.0x at 1e5 and 1e7, grouped by name, and the targets: exp, log, sigmoid, tanh, gelu
// and gelu_tanh float32 at 1e7 within 1.5x of their bytes' time at the STREAM bandwidth, and
// float16 and bfloat16 add, sub, mul and div at 1e7 within 1.3x of float32's time per byte.
// Beside the first target each function's compute floor is printed: its time per element on
// 8192 elements that stay in the caches, on one thread, scaled to 1e7 elements on the
// benchmark's threads and divided by the bytes' time (a floor above 1.5x means the kernel
// alone, with no memory traffic, misses the target), and that time per element counted in
// FMA slots at one core's FMA peak, measured then (bench_machine.h).
// Everything is also written as JSON to bench_ops.json (or the file named by $BENCH_JSON).
//
// Environment, for shorter runs:
//   BENCH_ONLY    comma-separated case names; an entry ending in '*' matches every name that
//                 starts with the rest (BENCH_ONLY='sum_*,exp,cast' runs the sums, exp and the
//                 casts); default all;
//   BENCH_SIZES   comma-separated N (BENCH_SIZES=1e5 or 1000,100000); default 1e3,1e5,1e7;
//   BENCH_DTYPES  comma-separated dtypes among float32, float16, bfloat16, float64, int32: the
//                 element-wise and reduction cases run for the first three listed, a cast for
//                 a pair with either end listed; default all;
//   BENCH_REPS    the number of timed runs of every case (BENCH_REPS=1 checks it all works).
//
// Built without libtorch, it prints libtensor's figures alone.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#ifdef TN_HAVE_LIBTORCH
#include <torch/torch.h>
#endif

#include "bench_machine.h"

extern "C" {
#include <tensor.h>
}

namespace {

using bench::now;

// The peer's tensor type, and PEER(code): the code when built with libtorch, else nullptr
// (tables then hold no peer function and cases time libtensor alone).
#ifdef TN_HAVE_LIBTORCH
using peer_tensor = at::Tensor;
#define PEER(...) __VA_ARGS__
#else
struct peer_tensor {
};
#define PEER(...) nullptr
#endif

[[noreturn]] void die(const char *what)
{
	std::fprintf(stderr, "bench_ops: %s: %s\n", what, tn_last_error());
	std::exit(1);
}

// ---- What to run -------------------------------------------------------------------------

std::vector<std::string> split(const char *list)
{
	std::vector<std::string> out;
	std::string s = list ? list : "";
	size_t start = 0;
	while (start <= s.size()) {
		size_t end = s.find(',', start);
		if (end == std::string::npos)
			end = s.size();
		if (end > start)
			out.push_back(s.substr(start, end - start));
		start = end + 1;
	}
	return out;
}

// $BENCH_ONLY: exact names, or prefixes with a trailing '*'.
bool selected(const std::string &name)
{
	static const std::vector<std::string> only = split(std::getenv("BENCH_ONLY"));
	if (only.empty())
		return true;
	for (const std::string &e : only) {
		if (e == name)
			return true;
		size_t k = e.size() - 1;
		if (!e.empty() && e[k] == '*' && name.compare(0, k, e, 0, k) == 0)
			return true;
	}
	return false;
}

struct dtype_info {
	enum tn_dtype tn;
	const char *name;
	int size;
};

const dtype_info all_dtypes[] = {
	{ TN_FLOAT32, "float32", 4 },   { TN_FLOAT16, "float16", 2 }, { TN_BFLOAT16, "bfloat16", 2 },
	{ TN_FLOAT64, "float64", 8 },   { TN_INT32, "int32", 4 },
};

// $BENCH_DTYPES, default all.
bool dtype_selected(const char *name)
{
	static const std::vector<std::string> only = split(std::getenv("BENCH_DTYPES"));
	return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

int reps_for(int64_t n)
{
	if (const char *e = std::getenv("BENCH_REPS"))
		return std::max(1, std::atoi(e));
	return n >= 10000000 ? 11 : n >= 100000 ? 51 : 2001;
}

#ifdef TN_HAVE_LIBTORCH
at::ScalarType peer_dtype(enum tn_dtype dt)
{
	switch (dt) {
	case TN_BOOL:
		return at::kBool;
	case TN_INT32:
		return at::kInt;
	case TN_INT64:
		return at::kLong;
	case TN_FLOAT16:
		return at::kHalf;
	case TN_BFLOAT16:
		return at::kBFloat16;
	case TN_FLOAT32:
		return at::kFloat;
	case TN_FLOAT64:
		return at::kDouble;
	default:
		std::fprintf(stderr, "bench_ops: no torch dtype for %d\n", (int)dt);
		std::exit(1);
	}
}
#endif

// ---- Inputs and outputs ------------------------------------------------------------------

enum domain { SYM3, POS, POW_BASE, POW_EXP, TAN, PROD, CAST, COND };

// Element @i of an input of @dom: a hash of the index and the seed, mapped into the domain.
float value(domain dom, uint64_t i, uint64_t seed)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD1B54A32D192ED03ull;
	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	float u = (float)(x >> 40) * (1.0f / 16777216.0f); // [0, 1)
	switch (dom) {
	case SYM3:
		return -3.0f + 6.0f * u;
	case POS:
		return 10.0f - 9.9f * u;
	case POW_BASE:
		return 0.5f + 1.5f * u;
	case POW_EXP:
		return -2.0f + 4.0f * u;
	case TAN:
		return -1.4f + 2.8f * u;
	case PROD: {
		static const float cycle[] = { 0.5f, 2.0f, -1.0f, 1.0f };
		return cycle[i % 4];
	}
	case CAST:
		return -1000.0f + 2000.0f * u;
	case COND:
		return u < 0.5f ? 1.0f : 0.0f;
	}
	return 0;
}

struct input {
	tn_tensor *tn;
	peer_tensor peer;
};

// The inputs of one size and dtype, made once and shared by the cases.
class input_set {
public:
	~input_set() { clear(); }

	const input &get(domain dom, int seed, const std::vector<int64_t> &shape, enum tn_dtype dt)
	{
		std::string key = std::to_string(dom) + "/" + std::to_string(seed) + "/" +
				   std::to_string((int)dt);
		for (int64_t s : shape)
			key += "x" + std::to_string(s);
		auto it = cache_.find(key);
		if (it != cache_.end())
			return it->second;
		int64_t numel = 1;
		for (int64_t s : shape)
			numel *= s;
		std::vector<float> v((size_t)numel);
		for (int64_t i = 0; i < numel; i++)
			v[(size_t)i] = value(dom, (uint64_t)i, (uint64_t)seed);
		tn_tensor *f, *t;
		const int nd = (int)shape.size();
		if (tn_empty(nd, shape.data(), TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &f) < 0)
			die("empty");
		std::memcpy(tn_tensor_data(f), v.data(), v.size() * sizeof(float));
		if (tn_to(f, dt, false, true, NULL, &t) < 0)
			die("to");
		tn_tensor_unref(f);
		input in{ t, {} };
#ifdef TN_HAVE_LIBTORCH
		in.peer = torch::from_blob(v.data(), shape, at::kFloat)
				  .to(peer_dtype(dt), /*non_blocking=*/false, /*copy=*/true);
#endif
		return cache_.emplace(key, in).first->second;
	}

	void clear()
	{
		for (auto &kv : cache_)
			tn_tensor_unref(kv.second.tn);
		cache_.clear();
	}

private:
	std::map<std::string, input> cache_;
};

// An output of both libraries, allocated before the timing and released after it.
struct output {
	tn_tensor *tn = nullptr;
	peer_tensor peer;

	output(const std::vector<int64_t> &shape, enum tn_dtype dt)
	{
		const int nd = (int)shape.size();
		if (tn_empty(nd, shape.data(), dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &tn) < 0)
			die("empty");
#ifdef TN_HAVE_LIBTORCH
		peer = at::empty(shape, at::TensorOptions().dtype(peer_dtype(dt)));
#endif
	}
	~output() { tn_tensor_unref(tn); }
	output(const output &) = delete;
	output &operator=(const output &) = delete;
};

// ---- Timing and results ------------------------------------------------------------------

// The STREAM kernel whose traffic a case resembles.
enum traffic { READ, COPY, ADD };
const char *traffic_names[] = { "read", "copy", "add" };

struct row {
	std::string name, dtype;
	int64_t n;
	double bytes;
	traffic kind;
	double ref_gbps;
	double tn_s = 0, peer_s = 0; // medians; 0 when that side has no figure
	std::string tn_error, peer_error;
	int reps = 0;

	double ratio() const { return tn_s > 0 && peer_s > 0 ? peer_s / tn_s : 0; }
	double bytes_frac() const { return tn_s > 0 ? bytes / (ref_gbps * 1e9) / tn_s : 0; }
};

struct context {
	bench::stream_figures stream;
	bool have_peer;
	std::vector<row> rows;

	double ref(traffic kind) const
	{
		return kind == READ ? stream.read
		       : kind == COPY ? stream.copy_best()
				      : stream.add_best();
	}
};

std::string size_name(int64_t n)
{
	int64_t p = 1000;
	for (int e = 3; e <= 18; e++, p *= 10)
		if (n == p)
			return "1e" + std::to_string(e);
	return std::to_string(n);
}

std::string time_name(double s)
{
	char buf[32];
	if (s <= 0)
		return "-";
	if (s < 1e-3)
		std::snprintf(buf, sizeof(buf), "%.2f us", s * 1e6);
	else if (s < 1)
		std::snprintf(buf, sizeof(buf), "%.3f ms", s * 1e3);
	else
		std::snprintf(buf, sizeof(buf), "%.3f s", s);
	return buf;
}

// The first line of an error message, at most 100 characters.
std::string short_error(const std::string &msg)
{
	std::string s = msg.substr(0, msg.find('\n'));
	return s.size() > 100 ? s.substr(0, 97) + "..." : s;
}

void print_header()
{
	std::printf("%-22s %-18s %5s %11s %11s %7s %10s\n", "case", "dtype", "N", "libtensor",
		    "torch", "ratio", "bytes_frac");
}

void print_row(const row &r)
{
	std::string lt = r.tn_error.empty() ? time_name(r.tn_s) : "n/a";
	std::string pt = r.peer_error.empty() ? time_name(r.peer_s) : "n/a";
	char ratio[16] = "-", frac[16] = "-";
	if (r.ratio() > 0)
		std::snprintf(ratio, sizeof(ratio), "%.2fx", r.ratio());
	if (r.tn_s > 0 && r.bytes > 0)
		std::snprintf(frac, sizeof(frac), "%.2f", r.bytes_frac());
	std::printf("%-22s %-18s %5s %11s %11s %7s %10s", r.name.c_str(), r.dtype.c_str(),
		    size_name(r.n).c_str(), lt.c_str(), pt.c_str(), ratio, frac);
	if (!r.tn_error.empty())
		std::printf("  n/a (libtensor: %s)", r.tn_error.c_str());
	if (!r.peer_error.empty())
		std::printf("  n/a (torch: %s)", r.peer_error.c_str());
	std::printf("\n");
	std::fflush(stdout);
}

// Calls @peer; returns the error message it threw, or "".
std::string call_peer(const std::function<void()> &peer)
{
#ifdef TN_HAVE_LIBTORCH
	try {
		peer();
	} catch (const c10::Error &e) {
		return short_error(e.what_without_backtrace());
	} catch (const std::exception &e) {
		return short_error(e.what());
	}
#else
	(void)peer;
#endif
	return "";
}

// Times one case: @tn returns libtensor's return code, @peer throws when torch refuses. Both
// are called twice to warm (the first call also faults in the outputs' pages), then timed
// alternately; the row is printed and kept.
void run_case(context &ctx, const std::string &name, const std::string &dtype, int64_t n,
	      double bytes, traffic kind, const std::function<int()> &tn,
	      const std::function<void()> &peer)
{
	row r;
	r.name = name, r.dtype = dtype, r.n = n, r.bytes = bytes, r.kind = kind;
	r.ref_gbps = ctx.ref(kind);
	bool have_peer = ctx.have_peer && peer;
	double t_tn = 0, t_peer = 0;
	for (int warm = 0; warm < 2; warm++) {
		if (r.tn_error.empty()) {
			double t0 = now();
			if (tn() < 0)
				r.tn_error = short_error(tn_last_error());
			t_tn = now() - t0;
		}
		if (have_peer && r.peer_error.empty()) {
			double t0 = now();
			r.peer_error = call_peer(peer);
			t_peer = now() - t0;
		}
	}
	if (!have_peer && ctx.have_peer)
		r.peer_error = "no such operation";
	bool tn_ok = r.tn_error.empty(), peer_ok = have_peer && r.peer_error.empty();
	int reps = reps_for(n);
	if (!std::getenv("BENCH_REPS")) {
		// Half a second of timed calls per case at most, but never fewer than 5.
		double per_rep = (tn_ok ? t_tn : 0) + (peer_ok ? t_peer : 0);
		if (per_rep > 0)
			reps = std::min(reps, std::max(5, (int)(0.5 / per_rep)));
	}
	std::vector<double> ta, tb;
	for (int i = 0; i < reps && (tn_ok || peer_ok); i++) {
		if (tn_ok) {
			double t0 = now();
			int rc = tn();
			ta.push_back(now() - t0);
			if (rc < 0) {
				r.tn_error = short_error(tn_last_error());
				tn_ok = false;
			}
		}
		if (peer_ok) {
			double t0 = now();
			std::string err = call_peer(peer);
			tb.push_back(now() - t0);
			if (!err.empty()) {
				r.peer_error = err;
				peer_ok = false;
			}
		}
	}
	auto median = [](std::vector<double> &v) {
		std::sort(v.begin(), v.end());
		return v.empty() ? 0.0 : v[v.size() / 2];
	};
	r.tn_s = tn_ok ? median(ta) : 0;
	r.peer_s = peer_ok ? median(tb) : 0;
	r.reps = reps;
	print_row(r);
	ctx.rows.push_back(r);
}

// ---- The cases ---------------------------------------------------------------------------

typedef int (*tn_unary_fn)(const tn_tensor *, tn_tensor *);
typedef int (*tn_binary_fn)(const tn_tensor *, const tn_tensor *, tn_tensor *);
typedef void (*peer_unary_fn)(peer_tensor &, const peer_tensor &);
typedef void (*peer_binary_fn)(peer_tensor &, const peer_tensor &, const peer_tensor &);

struct unary_op {
	const char *name;
	domain dom;
	tn_unary_fn tn;
	peer_unary_fn peer;
};

#define UNARY(op, dom)                                                                          \
	{                                                                                       \
		#op, dom, [](const tn_tensor *x, tn_tensor *o) { return tn_##op##_out(x, o); }, \
			PEER([](peer_tensor &o, const peer_tensor &x) { at::op##_out(o, x); })  \
	}

const unary_op unary_ops[] = {
	UNARY(exp, SYM3),
	UNARY(expm1, SYM3),
	UNARY(log, POS),
	UNARY(log1p, POS),
	UNARY(log2, POS),
	UNARY(sin, SYM3),
	UNARY(cos, SYM3),
	UNARY(tan, TAN),
	UNARY(tanh, SYM3),
	UNARY(sigmoid, SYM3),
	UNARY(erf, SYM3),
	{ "gelu", SYM3, [](const tn_tensor *x, tn_tensor *o) { return tn_gelu_out(x, "none", o); },
	  PEER([](peer_tensor &o, const peer_tensor &x) { at::gelu_out(o, x, "none"); }) },
	{ "gelu_tanh", SYM3,
	  [](const tn_tensor *x, tn_tensor *o) { return tn_gelu_out(x, "tanh", o); },
	  PEER([](peer_tensor &o, const peer_tensor &x) { at::gelu_out(o, x, "tanh"); }) },
	UNARY(sqrt, POS),
	UNARY(rsqrt, POS),
	UNARY(reciprocal, POS),
	UNARY(abs, SYM3),
	UNARY(neg, SYM3),
	UNARY(silu, SYM3),
	UNARY(relu, SYM3),
};
#undef UNARY

struct binary_op {
	const char *name;
	domain dom_a, dom_b;
	bool bool_out;
	tn_binary_fn tn;
	peer_binary_fn peer;
};

#define BINARY(op, dom_a, dom_b, bool_out)                                                      \
	{                                                                                       \
		#op, dom_a, dom_b, bool_out,                                                    \
			[](const tn_tensor *a, const tn_tensor *b, tn_tensor *o) {              \
				return tn_##op##_out(a, b, o);                                  \
			},                                                                      \
			PEER([](peer_tensor &o, const peer_tensor &a, const peer_tensor &b) {   \
				at::op##_out(o, a, b);                                          \
			})                                                                      \
	}

const binary_op binary_ops[] = {
	{ "add", SYM3, SYM3, false,
	  [](const tn_tensor *a, const tn_tensor *b, tn_tensor *o) {
		  return tn_add_out(a, b, tn_scalar_int(1), o);
	  },
	  PEER([](peer_tensor &o, const peer_tensor &a, const peer_tensor &b) {
		  at::add_out(o, a, b);
	  }) },
	{ "sub", SYM3, SYM3, false,
	  [](const tn_tensor *a, const tn_tensor *b, tn_tensor *o) {
		  return tn_sub_out(a, b, tn_scalar_int(1), o);
	  },
	  PEER([](peer_tensor &o, const peer_tensor &a, const peer_tensor &b) {
		  at::sub_out(o, a, b);
	  }) },
	BINARY(mul, SYM3, SYM3, false),
	BINARY(div, SYM3, POS, false),
	BINARY(maximum, SYM3, SYM3, false),
	BINARY(pow, POW_BASE, POW_EXP, false),
	BINARY(atan2, SYM3, SYM3, false),
	BINARY(eq, SYM3, SYM3, true),
	BINARY(lt, SYM3, SYM3, true),
};
#undef BINARY

// The reductions over all elements (_all), the last dim (_dim1) and the first dim (_dim0) of
// [rows, cols]; @d is the dim, -1 for all.
struct reduction {
	const char *name;
	domain dom;
	bool index_out; // int64 result
	bool has_dim0;
	std::function<int(const tn_tensor *, int64_t, tn_tensor *)> tn;
	std::function<void(peer_tensor &, const peer_tensor &, int64_t)> peer;
};

const std::vector<reduction> &reductions()
{
	static const std::vector<reduction> list = {
		{ "sum", SYM3, false, true,
		  [](const tn_tensor *x, int64_t d, tn_tensor *o) {
			  return d < 0 ? tn_sum_out(x, NULL, o)
				       : tn_sum_dim_out(x, 1, &d, false, NULL, o);
		  },
		  PEER([](peer_tensor &o, const peer_tensor &x, int64_t d) {
			  if (d < 0)
				  at::sum_out(o, x);
			  else
				  at::sum_out(o, x, at::IntArrayRef(&d, 1), false);
		  }) },
		{ "mean", SYM3, false, true,
		  [](const tn_tensor *x, int64_t d, tn_tensor *o) {
			  return d < 0 ? tn_mean_dim_out(x, 0, NULL, false, NULL, o)
				       : tn_mean_dim_out(x, 1, &d, false, NULL, o);
		  },
		  PEER([](peer_tensor &o, const peer_tensor &x, int64_t d) {
			  if (d < 0)
				  at::mean_out(o, x, at::IntArrayRef(), false);
			  else
				  at::mean_out(o, x, at::IntArrayRef(&d, 1), false);
		  }) },
		{ "prod", PROD, false, true,
		  [](const tn_tensor *x, int64_t d, tn_tensor *o) {
			  return d < 0 ? tn_prod_out(x, NULL, o)
				       : tn_prod_dim_out(x, d, false, NULL, o);
		  },
		  PEER([](peer_tensor &o, const peer_tensor &x, int64_t d) {
			  if (d < 0)
				  at::prod_out(o, x);
			  else
				  at::prod_out(o, x, d, false);
		  }) },
		{ "amax", SYM3, false, true,
		  [](const tn_tensor *x, int64_t d, tn_tensor *o) {
			  return d < 0 ? tn_amax_out(x, 0, NULL, false, o)
				       : tn_amax_out(x, 1, &d, false, o);
		  },
		  PEER([](peer_tensor &o, const peer_tensor &x, int64_t d) {
			  if (d < 0)
				  at::amax_out(o, x, at::IntArrayRef(), false);
			  else
				  at::amax_out(o, x, at::IntArrayRef(&d, 1), false);
		  }) },
		{ "argmax", SYM3, true, true,
		  [](const tn_tensor *x, int64_t d, tn_tensor *o) {
			  return d < 0 ? tn_argmax_out(x, NULL, false, o)
				       : tn_argmax_out(x, &d, false, o);
		  },
		  PEER([](peer_tensor &o, const peer_tensor &x, int64_t d) {
			  if (d < 0)
				  at::argmax_out(o, x, c10::nullopt, false);
			  else
				  at::argmax_out(o, x, d, false);
		  }) },
	};
	return list;
}

// The cases of one size and one of float32, float16 and bfloat16.
void run_dtype(context &ctx, int64_t n, const dtype_info &dti)
{
	const enum tn_dtype dt = dti.tn;
	const std::string dname = dti.name;
	const double es = dti.size;
	const int64_t cols = std::min<int64_t>(n, 1000), rows = n / cols;
	const std::vector<int64_t> flat = { n }, mat = { rows, cols }, row_shape = { cols };
	const double nm = (double)rows * cols;
	input_set in;

	for (const binary_op &op : binary_ops) {
		if (!selected(op.name))
			continue;
		const input &a = in.get(op.dom_a, 0, flat, dt), &b = in.get(op.dom_b, 1, flat, dt);
		output o(flat, op.bool_out ? TN_BOOL : dt);
		run_case(ctx, op.name, dname, n, n * (2 * es + (op.bool_out ? 1 : es)), ADD,
			 [&] { return op.tn(a.tn, b.tn, o.tn); },
			 PEER([&] { op.peer(o.peer, a.peer, b.peer); }));
	}
	if (selected("add_broadcast_row")) {
		const input &a = in.get(SYM3, 0, mat, dt), &r = in.get(SYM3, 1, row_shape, dt);
		output o(mat, dt);
		run_case(ctx, "add_broadcast_row", dname, n, 2 * es * nm + es * cols, COPY,
			 [&] { return tn_add_out(a.tn, r.tn, tn_scalar_int(1), o.tn); },
			 PEER([&] { at::add_out(o.peer, a.peer, r.peer); }));
	}
	for (const unary_op &op : unary_ops) {
		if (!selected(op.name))
			continue;
		const input &x = in.get(op.dom, 0, flat, dt);
		output o(flat, dt);
		run_case(ctx, op.name, dname, n, 2 * es * n, COPY, [&] { return op.tn(x.tn, o.tn); },
			 PEER([&] { op.peer(o.peer, x.peer); }));
	}
	if (selected("isnan")) {
		const input &x = in.get(SYM3, 0, flat, dt);
		output o(flat, TN_BOOL);
		run_case(ctx, "isnan", dname, n, (es + 1) * n, COPY,
			 [&] { return tn_isnan_out(x.tn, o.tn); },
			 PEER([&] { at::isnan_out(o.peer, x.peer); }));
	}
	if (selected("isfinite")) {
		// Neither library has an out= form: both are timed with their allocation.
		const input &x = in.get(SYM3, 0, flat, dt);
		run_case(ctx, "isfinite", dname, n, (es + 1) * n, COPY,
			 [&] {
				 tn_tensor *r;
				 int rc = tn_isfinite(x.tn, &r);
				 tn_tensor_unref(rc < 0 ? NULL : r);
				 return rc;
			 },
			 PEER([&] { auto r = at::isfinite(x.peer); }));
	}
	if (selected("clamp")) {
		const input &x = in.get(SYM3, 0, flat, dt);
		output o(flat, dt);
		const tn_scalar lo = tn_scalar_double(-1.0), hi = tn_scalar_double(1.0);
		run_case(ctx, "clamp", dname, n, 2 * es * n, COPY,
			 [&] { return tn_clamp_out(x.tn, &lo, &hi, o.tn); },
			 PEER([&] {
				 at::clamp_out(o.peer, x.peer, c10::optional<at::Scalar>(-1.0),
					       c10::optional<at::Scalar>(1.0));
			 }));
	}
	if (selected("where")) {
		const input &c = in.get(COND, 2, flat, TN_BOOL);
		const input &a = in.get(SYM3, 0, flat, dt), &b = in.get(SYM3, 1, flat, dt);
		output o(flat, dt);
		run_case(ctx, "where", dname, n, (1 + 3 * es) * n, ADD,
			 [&] { return tn_where_out(c.tn, a.tn, b.tn, o.tn); },
			 PEER([&] { at::where_out(o.peer, c.peer, a.peer, b.peer); }));
	}

	for (const reduction &red : reductions()) {
		const enum tn_dtype odt = red.index_out ? TN_INT64 : dt;
		const double oes = red.index_out ? 8 : es;
		struct {
			const char *suffix;
			int64_t dim;
		} modes[] = { { "_all", -1 }, { "_dim1", 1 }, { "_dim0", 0 } };
		for (auto &m : modes) {
			std::string name = std::string(red.name) + m.suffix;
			if (!selected(name))
				continue;
			const input &x = in.get(red.dom, 0, m.dim < 0 ? flat : mat, dt);
			std::vector<int64_t> oshape;
			if (m.dim == 1)
				oshape = { rows };
			else if (m.dim == 0)
				oshape = { cols };
			output o(oshape, odt);
			double outs = m.dim < 0 ? 1 : m.dim == 1 ? rows : cols;
			int64_t d = m.dim;
			run_case(ctx, name, dname, n, es * (m.dim < 0 ? n : nm) + oes * outs, READ,
				 [&] { return red.tn(x.tn, d, o.tn); },
				 PEER([&] { red.peer(o.peer, x.peer, d); }));
		}
	}
	if (selected("max_dim1")) {
		const input &x = in.get(SYM3, 0, mat, dt);
		output v({ rows }, dt), i({ rows }, TN_INT64);
		run_case(ctx, "max_dim1", dname, n, es * nm + (es + 8) * rows, READ,
			 [&] { return tn_max_dim_out(x.tn, 1, false, v.tn, i.tn); },
			 PEER([&] { at::max_out(v.peer, i.peer, x.peer, 1, false); }));
	}

	if (selected("softmax")) {
		const input &x = in.get(SYM3, 0, mat, dt);
		output o(mat, dt);
		run_case(ctx, "softmax", dname, n, 2 * es * nm, COPY,
			 [&] { return tn_softmax_out(x.tn, 1, NULL, o.tn); },
			 PEER([&] { at::softmax_out(o.peer, x.peer, 1); }));
	}
	if (selected("log_softmax")) {
		const input &x = in.get(SYM3, 0, mat, dt);
		output o(mat, dt);
		run_case(ctx, "log_softmax", dname, n, 2 * es * nm, COPY,
			 [&] { return tn_log_softmax_out(x.tn, 1, NULL, o.tn); },
			 PEER([&] { at::log_softmax_out(o.peer, x.peer, 1); }));
	}
	if (selected("layer_norm")) {
		// Neither library has an out= form of layer_norm: both allocate.
		const input &x = in.get(SYM3, 0, mat, dt);
		const input &w = in.get(POW_BASE, 3, row_shape, dt);
		const input &b = in.get(SYM3, 4, row_shape, dt);
		run_case(ctx, "layer_norm", dname, n, 2 * es * nm + 2 * es * cols, COPY,
			 [&] {
				 tn_tensor *r;
				 int rc = tn_layer_norm(x.tn, 1, &cols, w.tn, b.tn, 1e-5, true, &r);
				 tn_tensor_unref(rc < 0 ? NULL : r);
				 return rc;
			 },
			 PEER([&] {
				 auto r = at::layer_norm(x.peer, cols, w.peer, b.peer, 1e-5, true);
			 }));
	}

	// Layout changes, functional on both sides (as before this file covered every family).
	if (selected("transpose_contiguous")) {
		const int64_t side = (int64_t)std::llround(std::sqrt((double)n));
		const input &x = in.get(SYM3, 0, { side, side }, dt);
		run_case(ctx, "transpose_contiguous", dname, n, 2 * es * side * side, COPY,
			 [&] {
				 tn_tensor *t, *c;
				 int rc = tn_transpose(x.tn, 0, 1, &t);
				 if (rc < 0)
					 return rc;
				 rc = tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c);
				 tn_tensor_unref(t);
				 tn_tensor_unref(rc < 0 ? NULL : c);
				 return rc;
			 },
			 PEER([&] { auto c = x.peer.t().contiguous(); }));
	}
	if (selected("nhwc_to_nchw")) {
		const int64_t hw = (int64_t)std::llround(std::sqrt((double)n / 16));
		const int64_t perm[] = { 0, 3, 1, 2 };
		const input &x = in.get(SYM3, 0, { 1, hw, hw, 16 }, dt);
		run_case(ctx, "nhwc_to_nchw", dname, n, 2 * es * hw * hw * 16, COPY,
			 [&] {
				 tn_tensor *t, *c;
				 int rc = tn_permute(x.tn, 4, perm, &t);
				 if (rc < 0)
					 return rc;
				 rc = tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c);
				 tn_tensor_unref(t);
				 tn_tensor_unref(rc < 0 ? NULL : c);
				 return rc;
			 },
			 PEER([&] { auto c = x.peer.permute({ 0, 3, 1, 2 }).contiguous(); }));
	}

	if (dt != TN_FLOAT32)
		return;
	if (selected("add_alloc")) {
		const input &a = in.get(SYM3, 0, flat, dt), &b = in.get(SYM3, 1, flat, dt);
		run_case(ctx, "add_alloc", dname, n, 3 * es * n, ADD,
			 [&] {
				 tn_tensor *c;
				 int rc = tn_add(a.tn, b.tn, tn_scalar_int(1), &c);
				 tn_tensor_unref(rc < 0 ? NULL : c);
				 return rc;
			 },
			 PEER([&] { auto c = a.peer + b.peer; }));
	}
	if (selected("add_i32_f32")) {
		const input &a = in.get(CAST, 0, flat, TN_INT32), &b = in.get(SYM3, 1, flat, dt);
		run_case(ctx, "add_i32_f32", "int32+float32", n, 12.0 * n, ADD,
			 [&] {
				 tn_tensor *c;
				 int rc = tn_add(a.tn, b.tn, tn_scalar_int(1), &c);
				 tn_tensor_unref(rc < 0 ? NULL : c);
				 return rc;
			 },
			 PEER([&] { auto c = a.peer + b.peer; }));
	}
}

// Copies into another dtype, every ordered pair, with either end in $BENCH_DTYPES.
void run_casts(context &ctx, int64_t n)
{
	if (!selected("cast"))
		return;
	const std::vector<int64_t> flat = { n };
	for (const dtype_info &src : all_dtypes) {
		input_set in;
		for (const dtype_info &dst : all_dtypes) {
			bool listed = dtype_selected(src.name) || dtype_selected(dst.name);
			if (src.tn == dst.tn || !listed)
				continue;
			const input &x = in.get(CAST, 0, flat, src.tn);
			output o(flat, dst.tn);
			run_case(ctx, "cast", std::string(src.name) + "->" + dst.name, n,
				 (double)n * (src.size + dst.size), COPY,
				 [&] { return tn_copy_(o.tn, x.tn, false); },
				 PEER([&] { o.peer.copy_(x.peer); }));
		}
	}
}

// The cost of one call: add_out on one element, 100000 calls per timed run (its row's times
// are those of the 100000 calls).
void run_one_element(context &ctx)
{
	if (!selected("add_out_1elem_ns") || !dtype_selected("float32"))
		return;
	const std::vector<int64_t> one = { 1 };
	input_set in;
	const input &a = in.get(SYM3, 0, one, TN_FLOAT32), &b = in.get(SYM3, 1, one, TN_FLOAT32);
	output o(one, TN_FLOAT32);
	const int calls = 100000;
	run_case(ctx, "add_out_1elem_ns", "float32", 1, 0, ADD,
		 [&] {
			 int rc = 0;
			 for (int i = 0; i < calls && rc >= 0; i++)
				 rc = tn_add_out(a.tn, b.tn, tn_scalar_int(1), o.tn);
			 return rc;
		 },
		 PEER([&] {
			 for (int i = 0; i < calls; i++)
				 at::add_out(o.peer, a.peer, b.peer);
		 }));
	const row &r = ctx.rows.back();
	std::printf("add_out on 1 element: libtensor %.1f ns/call, torch %.1f ns/call "
		    "(target < 50 ns)\n",
		    r.tn_s / calls * 1e9, r.peer_s / calls * 1e9);
}

// ---- Summary and JSON --------------------------------------------------------------------

struct target {
	std::string what;
	double value, limit;
};

// The compute floor of a float32 unary function: its median time per element over FLOOR_N
// elements of the benchmark's inputs, which stay in the L1 and L2 caches between calls, on
// one thread (FLOOR_N is below the grain size that would split it), so memory plays no part.
constexpr int64_t FLOOR_N = 8192;

double compute_floor(const char *name)
{
	for (const unary_op &op : unary_ops) {
		if (std::strcmp(op.name, name) != 0)
			continue;
		std::vector<float> v((size_t)FLOOR_N);
		for (int64_t i = 0; i < FLOOR_N; i++)
			v[(size_t)i] = value(op.dom, (uint64_t)i, 0);
		tn_tensor *x, *o;
		if (tn_empty(1, &FLOOR_N, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &x) ||
		    tn_empty(1, &FLOOR_N, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &o))
			die("compute floor");
		std::memcpy(tn_tensor_data(x), v.data(), v.size() * sizeof(float));
		for (int i = 0; i < 100; i++)
			if (op.tn(x, o))
				die(name);
		std::vector<double> t;
		for (int rep = 0; rep < 501; rep++) {
			double t0 = now();
			for (int i = 0; i < 10; i++)
				op.tn(x, o);
			t.push_back((now() - t0) / 10);
		}
		std::sort(t.begin(), t.end());
		tn_tensor_unref(x);
		tn_tensor_unref(o);
		return t[t.size() / 2] / (double)FLOOR_N;
	}
	return 0;
}

std::vector<target> summary(const context &ctx)
{
	std::vector<target> targets;
	std::printf("\nsummary: ratio = torch time / libtensor time; "
		    "target >= 1.00x at 1e5 and 1e7\n");
	for (int64_t n : { (int64_t)100000, (int64_t)10000000 }) {
		std::map<std::string, std::string> below;
		std::vector<std::string> order;
		int count = 0, total = 0;
		for (const row &r : ctx.rows) {
			if (r.n != n || r.ratio() <= 0)
				continue;
			total++;
			if (r.ratio() >= 1.0)
				continue;
			count++;
			char buf[64];
			bool first = !below.count(r.name);
			std::snprintf(buf, sizeof(buf), "%s%s %.2fx", first ? "" : ", ",
				      r.dtype.c_str(), r.ratio());
			if (first)
				order.push_back(r.name);
			below[r.name] += buf;
		}
		if (!total)
			continue;
		std::printf("below 1.0x at N=%s: %d of %d cases\n", size_name(n).c_str(), count,
			    total);
		for (const std::string &name : order)
			std::printf("  %-22s %s\n", name.c_str(), below[name].c_str());
	}

	auto find = [&](const char *name, const char *dtype, int64_t n) -> const row * {
		for (const row &r : ctx.rows)
			if (r.name == name && r.dtype == dtype && r.n == n && r.tn_s > 0)
				return &r;
		return nullptr;
	};
	bool header = false;
	double fma_lanes = 0; // one core's fused multiply-adds per second, lanes counted
	for (const char *name : { "exp", "log", "sigmoid", "tanh", "gelu", "gelu_tanh" }) {
		const row *r = find(name, "float32", 10000000);
		if (!r)
			continue;
		if (!header) {
			fma_lanes = bench::fma_peak(1) * 1e9 / 2;
			std::printf("float32 at 1e7, time over the bytes' time at STREAM's %.1f GB/s "
				    "(target <= 1.5x), beside the compute floor: the same function on "
				    "%d in-cache elements on one thread, scaled to 1e7 on %d threads, "
				    "over the bytes' time; the in-cache time per element also in FMA "
				    "slots at one core's measured peak of %.1f G lane-FMA/s:\n",
				    ctx.ref(COPY), (int)FLOOR_N, bench::threads(), fma_lanes / 1e9);
		}
		header = true;
		double v = 1 / r->bytes_frac();
		double per_elem = compute_floor(name), bytes_s = r->tn_s * r->bytes_frac();
		double floor = per_elem * 1e7 / bench::threads() / bytes_s;
		std::printf("  %-22s %.2fx %-6s  compute floor %.2fx (%.2f ns, %.1f FMA slots per "
			    "element)\n",
			    name, v, v <= 1.5 ? "ok" : "MISSED", floor, per_elem * 1e9,
			    per_elem * fma_lanes);
		targets.push_back({ std::string(name) + " float32 1e7 time/byte-time", v, 1.5 });
	}
	header = false;
	for (const char *name : { "add", "sub", "mul", "div" }) {
		const row *f32 = find(name, "float32", 10000000);
		for (const char *dtype : { "float16", "bfloat16" }) {
			const row *r = find(name, dtype, 10000000);
			if (!f32 || !r)
				continue;
			if (!header)
				std::printf("16-bit arithmetic at 1e7, time per byte over float32's "
					    "(target <= 1.3x):\n");
			header = true;
			double v = (r->tn_s / r->bytes) / (f32->tn_s / f32->bytes);
			std::printf("  %-22s %-9s %.2fx %s\n", name, dtype, v,
				    v <= 1.3 ? "ok" : "MISSED");
			targets.push_back({ std::string(name) + " " + dtype +
						    " 1e7 time-per-byte/float32's",
					    v, 1.3 });
		}
	}
	return targets;
}

std::string json_string(const std::string &s)
{
	std::string out = "\"";
	for (char c : s) {
		if (c == '"' || c == '\\')
			out += '\\', out += c;
		else if ((unsigned char)c < 0x20)
			out += ' ';
		else
			out += c;
	}
	return out + "\"";
}

void write_json(const context &ctx, int threads, const std::vector<target> &targets)
{
	const char *path = std::getenv("BENCH_JSON") ? std::getenv("BENCH_JSON") : "bench_ops.json";
	FILE *f = std::fopen(path, "w");
	if (!f) {
		std::fprintf(stderr, "bench_ops: cannot write %s\n", path);
		return;
	}
	const bench::stream_figures &s = ctx.stream;
	std::fprintf(f, "{\"threads\": %d, \"peer\": %s,\n", threads,
		     ctx.have_peer ? "\"libtorch\"" : "null");
	std::fprintf(f,
		     " \"stream\": {\"isa\": \"%s\", \"array_MiB\": %zu, \"copy_GBps\": %.3f, "
		     "\"copy_nt_GBps\": %.3f, \"read_GBps\": %.3f, \"add_GBps\": %.3f, "
		     "\"add_nt_GBps\": %.3f, \"triad_GBps\": %.3f, \"triad_nt_GBps\": %.3f},\n",
		     s.isa, s.array_bytes >> 20, s.copy, s.copy_nt, s.read, s.add, s.add_nt, s.triad,
		     s.triad_nt);
	std::fprintf(f, " \"cases\": [\n");
	for (size_t i = 0; i < ctx.rows.size(); i++) {
		const row &r = ctx.rows[i];
		std::fprintf(f, "  {\"case\": %s, \"dtype\": %s, \"n\": %lld, \"reps\": %d, ",
			     json_string(r.name).c_str(), json_string(r.dtype).c_str(), (long long)r.n,
			     r.reps);
		std::fprintf(f,
			     "\"libtensor_s\": %.9g, \"peer_s\": %.9g, \"ratio\": %.4f, \"bytes\": %.0f, "
			     "\"traffic\": \"%s\", \"stream_GBps\": %.3f, \"bytes_frac\": %.4f, ",
			     r.tn_s, r.peer_s, r.ratio(), r.bytes, traffic_names[r.kind], r.ref_gbps,
			     r.bytes_frac());
		std::fprintf(f,
			     "\"libtensor_GBps\": %.4f, \"peer_GBps\": %.4f, \"libtensor_error\": %s, "
			     "\"peer_error\": %s}%s\n",
			     r.tn_s > 0 ? r.bytes / r.tn_s / 1e9 : 0,
			     r.peer_s > 0 ? r.bytes / r.peer_s / 1e9 : 0,
			     r.tn_error.empty() ? "null" : json_string(r.tn_error).c_str(),
			     r.peer_error.empty() ? "null" : json_string(r.peer_error).c_str(),
			     i + 1 < ctx.rows.size() ? "," : "");
	}
	std::fprintf(f, " ],\n \"targets\": [\n");
	for (size_t i = 0; i < targets.size(); i++)
		std::fprintf(f, "  {\"what\": %s, \"value\": %.4f, \"limit\": %.2f}%s\n",
			     json_string(targets[i].what).c_str(), targets[i].value, targets[i].limit,
			     i + 1 < targets.size() ? "," : "");
	std::fprintf(f, " ]}\n");
	std::fclose(f);
}

} // namespace

int main()
{
	// libtensor reads TN_NUM_THREADS at its first parallel loop: set the default before it.
	const int threads = bench::threads();
	setenv("TN_NUM_THREADS", std::to_string(threads).c_str(), 1);
	context ctx;
#ifdef TN_HAVE_LIBTORCH
	at::set_num_threads(threads);
	ctx.have_peer = true;
#else
	ctx.have_peer = false;
#endif
	ctx.stream = bench::measure_stream(threads);
	const bench::stream_figures &s = ctx.stream;
	std::printf("STREAM (%d threads, %s vectors, 3 arrays of %zu MiB), GB/s, ordinary / "
		    "non-temporal stores: copy %.1f / %.1f, read %.1f, add %.1f / %.1f, "
		    "triad %.1f / %.1f\n",
		    threads, s.isa, s.array_bytes >> 20, s.copy, s.copy_nt, s.read, s.add, s.add_nt,
		    s.triad, s.triad_nt);
	std::printf("bytes_frac references: read %.1f GB/s, copy %.1f GB/s, add %.1f GB/s\n",
		    ctx.ref(READ), ctx.ref(COPY), ctx.ref(ADD));
	std::printf("libtensor CPU capability: %s; peer: %s\n",
		    tn_cpu_capability_name(tn_cpu_capability()),
		    ctx.have_peer ? "libtorch (ATen C++ API)" : "none (libtorch not found)");

	std::vector<int64_t> sizes;
	for (const std::string &e : split(std::getenv("BENCH_SIZES")))
		if (std::atof(e.c_str()) >= 1)
			sizes.push_back((int64_t)std::llround(std::atof(e.c_str())));
	if (sizes.empty())
		sizes = { 1000, 100000, 10000000 };

	print_header();
	for (int64_t n : sizes) {
		for (const dtype_info &d : all_dtypes)
			if ((d.tn == TN_FLOAT32 || d.tn == TN_FLOAT16 || d.tn == TN_BFLOAT16) &&
			    dtype_selected(d.name))
				run_dtype(ctx, n, d);
		run_casts(ctx, n);
	}
	run_one_element(ctx);

	std::vector<target> targets = summary(ctx);
	write_json(ctx, threads, targets);
	return 0;
}
