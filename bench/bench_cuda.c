/* SPDX-License-Identifier: MIT */
/*
 * bench_cuda: the CUDA backend against the device's own copy bandwidth and against PyTorch on
 * the same GPU. Four tables, each figure the median of REPS runs timed with CUDA events on
 * the current (default) stream:
 *   1. device-to-device copy of 1e8 float32, through libtensor's copy and through
 *      cudaMemcpyAsync on the same stream: the reference bandwidth;
 *   2. element-wise operators at 1e8 float32 (add, a strided copy that runs the copy kernel,
 *      casts to float16 and float64), in GB/s of bytes read and written, and as a fraction of
 *      the reference (the target is 85%);
 *   3. PyTorch timing the same operators in a Python child, when a python3 imports torch with
 *      a GPU;
 *   4. host-to-device copy of 256 MiB from a pinned arena tensor and from pageable memory
 *      (the target is twice as fast).
 * Without CUDA, or without a device, it prints one "skipped" line and exits 0, so that
 * `make bench` goes on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor.h>

#ifdef TN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bench_util.h"

#define REPS 15
#define WARMUP 3
#define N 100000000LL /* elements of the element-wise operands */
#define SIDE 10000LL  /* N as SIDE x SIDE, for the transposed copy */

#define CHECK(call)                                                                       \
	do {                                                                              \
		int rc_ = (call);                                                         \
		if (rc_ < 0) {                                                            \
			fprintf(stderr, "bench_cuda: %s: %s\n", #call, tn_last_error());  \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

#ifdef TN_HAVE_CUDA
typedef void (*op_fn)(void *ctx);

/* The median milliseconds of @fn over REPS runs, timed by events on the default stream. */
static double time_ms(op_fn fn, void *ctx)
{
	tn_cuda_stream s = tn_cuda_default_stream(0);
	tn_cuda_event *e0, *e1;
	double v[REPS];
	CHECK(tn_cuda_event_create(TN_CUDA_EVENT_TIMING, &e0));
	CHECK(tn_cuda_event_create(TN_CUDA_EVENT_TIMING, &e1));
	for (int i = 0; i < WARMUP; i++)
		fn(ctx);
	CHECK(tn_cuda_synchronize(0));
	for (int i = 0; i < REPS; i++) {
		float ms = 0;
		CHECK(tn_cuda_event_record(e0, s));
		fn(ctx);
		CHECK(tn_cuda_event_record(e1, s));
		CHECK(tn_cuda_event_synchronize(e1));
		CHECK(tn_cuda_event_elapsed_ms(e0, e1, &ms));
		v[i] = ms;
	}
	tn_cuda_event_destroy(e0);
	tn_cuda_event_destroy(e1);
	return bench_median(v, REPS);
}

static double gbps(double bytes, double ms)
{
	return bytes / (ms * 1e-3) / 1e9;
}

struct pair {
	tn_tensor *dst;
	const tn_tensor *src;
};

static void run_copy(void *ctx)
{
	struct pair *p = ctx;
	CHECK(tn_copy_(p->dst, p->src, false));
}

struct binop {
	const tn_tensor *a, *b;
	tn_tensor *out;
};

static void run_add(void *ctx)
{
	struct binop *o = ctx;
	CHECK(tn_add_out(o->a, o->b, tn_scalar_int(1), o->out));
}

struct raw {
	void *dst;
	const void *src;
	size_t n;
	cudaStream_t stream;
};

static void run_memcpy(void *ctx)
{
	struct raw *r = ctx;
	cudaError_t err = cudaMemcpyAsync(r->dst, r->src, r->n, cudaMemcpyDeviceToDevice, r->stream);
	if (err != cudaSuccess) {
		fprintf(stderr, "bench_cuda: cudaMemcpyAsync: %s\n", cudaGetErrorString(err));
		exit(1);
	}
}

static tn_tensor *dev_tensor(int ndim, const int64_t *sizes, enum tn_dtype dt)
{
	tn_tensor *t;
	CHECK(tn_empty(ndim, sizes, dt, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &t));
	return t;
}

/* ---- PyTorch in a child ---- */

/* The same operators, timed the same way; prints "name ms" lines. */
static const char torch_script[] =
	"import torch\n"
	"n, side, reps, warm = 100000000, 10000, 15, 3\n"
	"a = torch.rand(n, device='cuda'); b = torch.rand(n, device='cuda')\n"
	"c = torch.empty_like(a); h = torch.empty(n, dtype=torch.float16, device='cuda')\n"
	"d = torch.empty(n, dtype=torch.float64, device='cuda')\n"
	"a2 = a.view(side, side); c2 = c.view(side, side)\n"
	"def t(fn):\n"
	"    for _ in range(warm): fn()\n"
	"    torch.cuda.synchronize(); v = []\n"
	"    for _ in range(reps):\n"
	"        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)\n"
	"        s.record(); fn(); e.record(); e.synchronize(); v.append(s.elapsed_time(e))\n"
	"    v.sort(); return (v[reps // 2] if reps % 2 else (v[reps // 2 - 1] + v[reps // 2]) / 2)\n"
	"print('copy', t(lambda: c.copy_(a)))\n"
	"print('add', t(lambda: torch.add(a, b, out=c)))\n"
	"print('strided', t(lambda: c2.copy_(a2.t())))\n"
	"print('f16', t(lambda: h.copy_(a)))\n"
	"print('f64', t(lambda: d.copy_(a)))\n";

/* A python3 that imports torch with a GPU, or NULL. */
static const char *find_torch_python(void)
{
	static const char *const cands[] = { "/usr/bin/python3", "python3" };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd),
			 "%s -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' "
			 ">/dev/null 2>&1", cands[i]);
		if (system(cmd) == 0)
			return cands[i];
	}
	return NULL;
}

#define NOPS 5
static const char *const op_names[NOPS] = { "copy", "add", "strided", "f16", "f64" };

/* Run the script; torch_ms[i] gets op_names[i]'s median ms (0 when missing). */
static bool run_torch(const char *python, double torch_ms[NOPS])
{
	char path[] = "/tmp/bench_cuda_torch_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return false;
	bool ok = write(fd, torch_script, sizeof(torch_script) - 1) ==
		  (ssize_t)(sizeof(torch_script) - 1);
	close(fd);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", python, path);
	FILE *f = ok ? popen(cmd, "r") : NULL;
	char line[256];
	memset(torch_ms, 0, NOPS * sizeof(double));
	while (f && fgets(line, sizeof(line), f)) {
		char name[32];
		double ms;
		if (sscanf(line, "%31s %lf", name, &ms) != 2)
			continue;
		for (int i = 0; i < NOPS; i++)
			if (strcmp(name, op_names[i]) == 0)
				torch_ms[i] = ms;
	}
	ok = f && pclose(f) == 0;
	unlink(path);
	return ok;
}

/* ---- host to device ---- */

static void run_h2d(void *ctx)
{
	run_copy(ctx);
}

static void bench_h2d(void)
{
	const int64_t n[] = { (int64_t)(256 << 20) / 4 }; /* 256 MiB of float32 */
	const double bytes = 256.0 * (1 << 20);
	char dir[] = "/dev/shm/bench_cuda_XXXXXX";
	tn_arena_options o;
	tn_arena *a;
	tn_tensor *pinned, *pageable, *g;

	printf("\n  host -> device, 256 MiB float32 (tn_copy_, waited for)\n");
	if (!mkdtemp(dir)) {
		printf("  skipped: cannot make a directory on /dev/shm\n");
		return;
	}
	tn_arena_options_init(&o);
	o.size = (uint64_t)320 << 20;
	o.dir = dir;
	CHECK(tn_arena_create("h2d", &o, &a));
	int rc = tn_cuda_arena_register(a);
	if (rc < 0) {
		printf("  skipped: tn_cuda_arena_register: %s\n", tn_last_error());
		goto out_arena;
	}
	CHECK(tn_arena_use(a));
	CHECK(tn_ones(1, n, TN_FLOAT32, TN_CPU, &pinned));
	CHECK(tn_arena_use(NULL));
	CHECK(tn_ones(1, n, TN_FLOAT32, TN_CPU, &pageable));
	g = dev_tensor(1, n, TN_FLOAT32);
	if (!tn_tensor_is_pinned(pinned) || tn_tensor_is_pinned(pageable)) {
		fprintf(stderr, "bench_cuda: the arena tensor should be pinned, malloc's not\n");
		exit(1);
	}
	struct pair pp = { g, pinned }, pg = { g, pageable };
	double ms_pinned = time_ms(run_h2d, &pp), ms_pageable = time_ms(run_h2d, &pg);
	printf("  %-34s %10s %10s %10s\n", "", "ms", "GB/s", "vs pageable");
	printf("  %-34s %10.2f %10.2f %9.2fx\n", "pinned arena tensor", ms_pinned,
	       gbps(bytes, ms_pinned), ms_pageable / ms_pinned);
	printf("  %-34s %10.2f %10.2f %9.2fx\n", "pageable (malloc) tensor", ms_pageable,
	       gbps(bytes, ms_pageable), 1.0);
	printf("  (target: pinned >= 2x pageable)\n");
	tn_tensor_unref(g);
	tn_tensor_unref(pageable);
	tn_tensor_unref(pinned);
	CHECK(tn_cuda_synchronize(0));
out_arena:
	tn_arena_unref(a);
	(void)tn_arena_destroy("h2d", dir, 0);
	(void)rmdir(dir);
}

static void bench(void)
{
	tn_cuda_device_properties p;
	CHECK(tn_cuda_get_device_properties(0, &p));
	printf("bench_cuda: %s (sm_%d%d, %d SMs, %.1f GiB), median of %d runs timed by CUDA "
	       "events\n", p.name, p.major, p.minor, p.multiprocessor_count,
	       (double)p.total_memory / (1 << 30), REPS);

	const int64_t n1[] = { N }, n2[] = { SIDE, SIDE };
	tn_tensor *a = dev_tensor(1, n1, TN_FLOAT32), *b = dev_tensor(1, n1, TN_FLOAT32);
	tn_tensor *c = dev_tensor(1, n1, TN_FLOAT32), *h = dev_tensor(1, n1, TN_FLOAT16);
	tn_tensor *d = dev_tensor(1, n1, TN_FLOAT64);
	CHECK(tn_fill_(a, tn_scalar_double(1.5)));
	CHECK(tn_fill_(b, tn_scalar_double(2.5)));
	tn_tensor *a2, *at, *c2;
	CHECK(tn_view(a, 2, n2, &a2));
	CHECK(tn_view(c, 2, n2, &c2));
	CHECK(tn_transpose(a2, 0, 1, &at));

	/* 1. The reference: the device's copy bandwidth. */
	const double f4 = 4.0 * (double)N;
	void *handle = NULL;
	CHECK(tn_cuda_stream_handle(tn_cuda_default_stream(0), &handle));
	struct raw r = { tn_tensor_data(c), tn_tensor_data(a), (size_t)f4, (cudaStream_t)handle };
	struct pair plain = { c, a };
	double ms_memcpy = time_ms(run_memcpy, &r), ms_plain = time_ms(run_copy, &plain);
	double ref = gbps(2 * f4, ms_memcpy);
	printf("\n  device copy bandwidth, 1e8 float32 (bytes read + written)\n");
	printf("  %-34s %10s %10s %10s\n", "", "ms", "GB/s", "vs memcpy");
	printf("  %-34s %10.3f %10.1f %9.1f%%\n", "cudaMemcpyAsync D2D", ms_memcpy, ref, 100.0);
	printf("  %-34s %10.3f %10.1f %9.1f%%\n", "tn_copy_ (contiguous, same dtype)", ms_plain,
	       gbps(2 * f4, ms_plain), 100.0 * gbps(2 * f4, ms_plain) / ref);

	/* 2. Element-wise operators. */
	struct binop add = { a, b, c };
	struct pair strided = { c2, at }, to16 = { h, a }, to64 = { d, a };
	double ms[NOPS];
	const double bytes[NOPS] = { 2 * f4, 3 * f4, 2 * f4, f4 + 2.0 * (double)N,
				     f4 + 8.0 * (double)N };
	const char *const label[NOPS] = { "copy (contiguous)", "add a+b->c", "copy a.t() -> contig",
					  "cast float32->float16", "cast float32->float64" };
	ms[0] = ms_plain;
	ms[1] = time_ms(run_add, &add);
	ms[2] = time_ms(run_copy, &strided);
	ms[3] = time_ms(run_copy, &to16);
	ms[4] = time_ms(run_copy, &to64);
	printf("\n  element-wise, 1e8 float32 inputs (target: >= 85%% of the memcpy bandwidth)\n");
	printf("  %-34s %10s %10s %10s\n", "", "ms", "GB/s", "vs memcpy");
	for (int i = 0; i < NOPS; i++)
		printf("  %-34s %10.3f %10.1f %9.1f%%\n", label[i], ms[i], gbps(bytes[i], ms[i]),
		       100.0 * gbps(bytes[i], ms[i]) / ref);

	/* 3. PyTorch on the same GPU. */
	const char *py = find_torch_python();
	double tms[NOPS];
	printf("\n  PyTorch on the same GPU\n");
	if (!py) {
		printf("  unavailable: no python3 here imports torch with a CUDA device\n");
	} else if (!run_torch(py, tms)) {
		printf("  unavailable: the PyTorch script failed (%s)\n", py);
	} else {
		printf("  %-34s %10s %10s %14s\n", "", "torch ms", "torch GB/s", "libtensor/torch");
		for (int i = 0; i < NOPS; i++) {
			if (tms[i] <= 0) {
				printf("  %-34s %10s\n", label[i], "missing");
				continue;
			}
			/* > 1: libtensor is faster. */
			printf("  %-34s %10.3f %10.1f %13.2fx\n", label[i], tms[i],
			       gbps(bytes[i], tms[i]), tms[i] / ms[i]);
		}
		printf("  (libtensor/torch > 1 means libtensor is faster)\n");
	}
	tn_tensor_unref(at);
	tn_tensor_unref(c2);
	tn_tensor_unref(a2);
	tn_tensor_unref(d);
	tn_tensor_unref(h);
	tn_tensor_unref(c);
	tn_tensor_unref(b);
	tn_tensor_unref(a);
	(void)tn_cuda_empty_cache();

	/* 4. Host to device from pinned and pageable memory. */
	bench_h2d();
}
#endif /* TN_HAVE_CUDA */

int main(void)
{
#ifndef TN_HAVE_CUDA
	printf("bench_cuda: skipped: libtensor was built without CUDA\n");
	return 0;
#else
	if (tn_cuda_device_count() == 0) {
		int n = 0;
		cudaError_t err = cudaGetDeviceCount(&n);
		printf("bench_cuda: skipped: no CUDA device (%s)\n",
		       err == cudaSuccess ? "none found" : cudaGetErrorString(err));
		return 0;
	}
	bench();
	return 0;
#endif
}
