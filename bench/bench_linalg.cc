// SPDX-License-Identifier: MIT
//
// bench_linalg - the matmul family against the BLAS called directly, PyTorch's C++ library and
// the machine's limits (its FMA peak and its STREAM bandwidth), all measured in this run.
//
//   mm     square float32 products, n = 64 .. 4096: GFLOP/s of libtensor's tn_mm, of BLIS's
//          bli_sgemm_ex called directly (the BLAS libtensor uses), of torch::mm (Debian's
//          libtorch reaches the BLAS through the libblas.so.3 alternative: the line says
//          which), and the fraction of the FMA peak;
//   bmm    batches of 64 x 64 and 256 x 256 products;
//   linear at batch 1 (a GEMV over a 4096 x 4096 weight): GB/s of the weight read against
//          STREAM's read bandwidth (a vectorised sum over 512 MiB);
//   softmax, log_softmax and layer_norm over the last dim of float32 [rows, n] tensors: GB/s
//          (one read and one write of the tensor) against torch's and STREAM's.
// Every figure is the median of repeated runs; each library is timed in a block of its own
// (their thread pools spin after a call and would steal the other's cores if interleaved),
// blocks alternating three times. Threads: TN_NUM_THREADS for libtensor and BLIS,
// at::set_num_threads for torch, default 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <blis.h>
#include <dlfcn.h>
#include <omp.h>

#ifdef TN_HAVE_LIBTORCH
#include <torch/torch.h>
#endif

#include "bench_machine.h"

extern "C" {
#include <tensor.h>
}

namespace {

using bench::blocks;
using bench::median_seconds;
using bench::now;
using bench::threads;

tn_tensor *ones2(int64_t r, int64_t c)
{
	tn_tensor *t;
	int64_t s[2] = { r, c };
	if (tn_ones(2, s, TN_FLOAT32, TN_CPU, &t) < 0)
		std::abort();
	return t;
}

// BLIS called directly, loaded as libtensor loads it (dlopen, RTLD_LOCAL): linked, its
// reference BLAS names would take over libtorch's sgemm_ calls in this process.
__typeof__(bli_sgemm_ex) *blis_sgemm;
__typeof__(bli_info_get_version_str) *blis_version;
__typeof__(bli_info_get_enable_openmp) *blis_openmp;

void load_blis()
{
	void *h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		std::fprintf(stderr, "bench_linalg: %s\n", dlerror());
		std::exit(1);
	}
	*(void **)&blis_sgemm = dlsym(h, "bli_sgemm_ex");
	*(void **)&blis_version = dlsym(h, "bli_info_get_version_str");
	*(void **)&blis_openmp = dlsym(h, "bli_info_get_enable_openmp");
	if (!blis_sgemm || !blis_version || !blis_openmp)
		std::exit(1);
}

} // namespace

int main()
{
	load_blis();
	const int nt = threads();
	char env[16];
	std::snprintf(env, sizeof env, "%d", nt);
	setenv("TN_NUM_THREADS", env, 1);
	bool avx512 = bench::has_avx512();
	double peak = bench::fma_peak(nt), stream, stream_read;
	bench::stream_bandwidth(nt, &stream, &stream_read);
	std::printf("bench_linalg: %d threads; FMA peak %.0f GFLOP/s (%s, measured); STREAM copy "
		    "%.1f GB/s, read %.1f GB/s\n",
		    nt, peak, avx512 ? "AVX-512" : "AVX2", stream, stream_read);
	std::printf("bench_linalg: libtensor and BLIS: %s %s, %s threading\n", "BLIS",
		    blis_version(), blis_openmp() ? "OpenMP" : "other");
#ifdef TN_HAVE_LIBTORCH
	at::set_num_threads(nt);
	std::printf("bench_linalg: torch %s through libblas.so.3 -> ", TORCH_VERSION);
	std::fflush(stdout);
	if (std::system("readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3") != 0)
		std::printf("(unknown)\n");
#endif
	std::printf("%-6s %5s %10s %10s %10s %9s %9s %9s\n", "case", "n", "libtensor", "BLIS",
		    "torch", "lt/BLIS", "lt/torch", "lt/peak");
	for (int64_t n : { 64, 128, 256, 512, 1024, 2048, 4096 }) {
		tn_tensor *a = ones2(n, n), *b = ones2(n, n), *c = ones2(n, n);
		float *pa = static_cast<float *>(tn_tensor_data(a));
		float *pb = static_cast<float *>(tn_tensor_data(b));
		float *pc = static_cast<float *>(tn_tensor_data(c));
		double flop = 2.0 * n * n * n;
		int reps = std::max(3, std::min(200, (int)(4e9 / flop)));
		std::vector<std::function<void()>> fns = {
			[&] {
				tn_tensor *r;
				if (tn_mm(a, b, &r) < 0)
					std::abort();
				tn_tensor_unref(r);
			},
			[&] {
				rntm_t rntm = BLIS_RNTM_INITIALIZER;
				bli_rntm_set_num_threads(nt, &rntm);
				float one = 1, zero = 0;
				blis_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &one, pa, n, 1,
					     pb, n, 1, &zero, pc, n, 1, NULL, &rntm);
			},
		};
#ifdef TN_HAVE_LIBTORCH
		torch::Tensor ta = torch::ones({ n, n }), tb = torch::ones({ n, n });
		fns.push_back([&] { (void)torch::mm(ta, tb); });
#endif
		std::vector<double> s = blocks(fns, reps);
		double lt = flop / s[0] / 1e9, bl = flop / s[1] / 1e9;
		double th = s.size() > 2 ? flop / s[2] / 1e9 : 0;
		std::printf("%-6s %5lld %10.1f %10.1f %10.1f %9.2f %9.2f %9.2f\n", "mm", (long long)n, lt,
			    bl, th, lt / bl, th > 0 ? lt / th : 0, lt / peak);
		tn_tensor_unref(a);
		tn_tensor_unref(b);
		tn_tensor_unref(c);
	}
	for (int64_t n : { 64, 256 }) {
		int64_t batch = n == 64 ? 256 : 16, s3[3] = { batch, n, n };
		tn_tensor *a, *b;
		tn_ones(3, s3, TN_FLOAT32, TN_CPU, &a);
		tn_ones(3, s3, TN_FLOAT32, TN_CPU, &b);
		double flop = 2.0 * batch * n * n * n;
		std::vector<std::function<void()>> fns = { [&] {
			tn_tensor *r;
			if (tn_bmm(a, b, &r) < 0)
				std::abort();
			tn_tensor_unref(r);
		} };
#ifdef TN_HAVE_LIBTORCH
		torch::Tensor ta = torch::ones({ batch, n, n }), tb = torch::ones({ batch, n, n });
		fns.push_back([&] { (void)torch::bmm(ta, tb); });
#endif
		std::vector<double> s = blocks(fns, 20);
		double lt = flop / s[0] / 1e9, th = s.size() > 1 ? flop / s[1] / 1e9 : 0;
		std::printf("%-6s %5lld %10.1f %10s %10.1f %9s %9.2f %9.2f   (batch %lld)\n", "bmm",
			    (long long)n, lt, "-", th, "-", th > 0 ? lt / th : 0, lt / peak,
			    (long long)batch);
		tn_tensor_unref(a);
		tn_tensor_unref(b);
	}
	{
		const int64_t n = 4096;
		tn_tensor *x = ones2(1, n), *w = ones2(n, n);
		std::vector<std::function<void()>> fns = { [&] {
			tn_tensor *r;
			if (tn_linear(x, w, NULL, &r) < 0)
				std::abort();
			tn_tensor_unref(r);
		} };
#ifdef TN_HAVE_LIBTORCH
		torch::Tensor tx = torch::ones({ 1, n }), tw = torch::ones({ n, n });
		fns.push_back([&] { (void)torch::nn::functional::linear(tx, tw); });
#endif
		std::vector<double> s = blocks(fns, 50);
		double bytes = 4.0 * n * n;
		double lt = bytes / s[0] / 1e9, th = s.size() > 1 ? bytes / s[1] / 1e9 : 0;
		std::printf("%-6s %5lld %8.1fGB/s %10s %8.1fGB/s %9s %9.2f %9s   (lt/STREAM read %.2f)\n",
			    "linear", (long long)n, lt, "-", th, "-", th > 0 ? lt / th : 0, "-",
			    lt / stream_read);
		tn_tensor_unref(x);
		tn_tensor_unref(w);
	}
	// softmax, log_softmax and layer_norm over rows: GB/s counting one read and one write.
	std::printf("%-12s %12s %12s %12s %9s %9s\n", "case", "shape", "libtensor", "torch", "lt/torch",
		    "lt/STREAM");
	struct norm_shape {
		int64_t rows, n;
	};
	for (norm_shape sh : { norm_shape{ 10000, 1000 }, norm_shape{ 1000, 10000 },
			       norm_shape{ 100000, 100 }, norm_shape{ 64, 1024 } }) {
		int64_t s2[2] = { sh.rows, sh.n };
		tn_tensor *x, *w, *b;
		tn_ones(2, s2, TN_FLOAT32, TN_CPU, &x);
		tn_ones(1, &sh.n, TN_FLOAT32, TN_CPU, &w);
		tn_ones(1, &sh.n, TN_FLOAT32, TN_CPU, &b);
		float *px = static_cast<float *>(tn_tensor_data(x));
		for (int64_t i = 0; i < sh.rows * sh.n; i++)
			px[i] = (float)((i * 7919) % 17 - 8) / 4;
		double bytes = 8.0 * sh.rows * sh.n;
		int reps = sh.rows * sh.n >= 1000000 ? 15 : 500;
		for (int which = 0; which < 3; which++) {
			const char *name = which == 0 ? "softmax" : which == 1 ? "log_softmax" : "layer_norm";
			std::vector<std::function<void()>> fns = { [&] {
				tn_tensor *r;
				int rc = which == 0   ? tn_softmax(x, -1, NULL, &r)
					 : which == 1 ? tn_log_softmax(x, -1, NULL, &r)
						      : tn_layer_norm(x, 1, &sh.n, w, b, 1e-5, true, &r);
				if (rc < 0)
					std::abort();
				tn_tensor_unref(r);
			} };
#ifdef TN_HAVE_LIBTORCH
			torch::Tensor tx = torch::from_blob(px, { sh.rows, sh.n }).clone();
			torch::Tensor tw = torch::ones({ sh.n }), tb = torch::ones({ sh.n });
			fns.push_back([&] {
				if (which == 0)
					(void)torch::softmax(tx, -1);
				else if (which == 1)
					(void)torch::log_softmax(tx, -1);
				else
					(void)torch::layer_norm(tx, { sh.n }, tw, tb, 1e-5);
			});
#endif
			std::vector<double> t = blocks(fns, reps);
			double lt = bytes / t[0] / 1e9, th = t.size() > 1 ? bytes / t[1] / 1e9 : 0;
			char shape[32];
			std::snprintf(shape, sizeof shape, "%lldx%lld", (long long)sh.rows, (long long)sh.n);
			std::printf("%-12s %12s %10.1fGB/s %10.1fGB/s %9.2f %9.2f\n", name, shape, lt, th,
				    th > 0 ? lt / th : 0, lt / stream);
		}
		tn_tensor_unref(x);
		tn_tensor_unref(w);
		tn_tensor_unref(b);
	}
	return 0;
}
