/* SPDX-License-Identifier: MIT */
/*
 * A check and benchmark of the kernels on a real GPU, standalone (not part of the build):
 * every family run on the device and in the host emulation on the same inputs, compared bit
 * for bit (NaNs as NaN; the transcendental functions within a few ulp), then the bandwidth of
 * float32 add, copy, cast and sum at 1e8 elements against a device-to-device cudaMemcpy.
 *
 *   F="-std=c++17 -O3 -fmad=false -arch=sm_90 -include config.h -I libtensor/include \
 *      -I libtensor -I cuda -Xcompiler -fno-threadsafe-statics"
 *   for f in bench_kernels elementwise unary reduce kernels; do nvcc $F -c cuda/$f.cu; done
 *   gcc -O2 -include config.h -I libtensor/include -I libtensor -c cuda/plan.c
 *   nvcc -arch=sm_90 *.o -o bench_kernels && ./bench_kernels
 *
 * (plan.c's library calls are stubbed below; the binary needs only libc and the driver.)
 * Not yet run on a GPU: the session that wrote it had none.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "emulate.h"
#include "launch.cuh"

extern "C" void *tn__malloc(size_t n)
{
	return malloc(n);
}
extern "C" void tn__free(void *p)
{
	free(p);
}
extern "C" int tn__error(int code, const char *fmt, ...)
{
	(void)fmt;
	return code;
}

#define CK(x)                                                                                \
	do {                                                                                 \
		cudaError_t e_ = (x);                                                        \
		if (e_ != cudaSuccess) {                                                     \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

static size_t dsize(int dt)
{
	static const size_t s[] = { 1, 1, 1, 2, 4, 8, 2, 2, 4, 8 };
	return s[dt];
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next()
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random contents of @dt. */
static void fill_random(char *p, int dt, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		double v = ((double)(int64_t)(next() % 20001) - 10000.0) / 997.0;
		if (next() % 53 == 0)
			v = NAN;
		char *q = p + i * dsize(dt);
		if (dt <= TN_INT64)
			v = (double)((int64_t)(next() % 200) - 100 + (dt == TN_UINT8 ? 100 : 0));
		if (dt == TN_BOOL)
			v = (double)(next() & 1);
		tn_cuda::store_as<double>(q, dt, v);
	}
}

struct buf {
	char *h, *d, *h2;
	size_t bytes;
};

static buf make_buf(size_t bytes)
{
	buf b;
	b.bytes = bytes;
	b.h = (char *)calloc(bytes + 64, 1);
	b.h2 = (char *)calloc(bytes + 64, 1);
	CK(cudaMalloc((void **)&b.d, bytes + 64));
	return b;
}

static void free_buf(buf &b)
{
	free(b.h);
	free(b.h2);
	cudaFree(b.d);
}

static int failures;

/* Operand k of @p on host (emulation) or device pointers. */
static void point(tn__cuda_plan *p, buf *bufs, int64_t *offs, bool dev)
{
	for (int k = 0; k < p->ntensors; k++)
		if (!p->ops[k].is_scalar)
			p->ops[k].data = (dev ? bufs[k].d : bufs[k].h) + offs[k];
}

/* Run @family on the device and emulated and compare output 0 bytes (tolerance @ulps for
 * floats). */
static void check(const char *what, tn__cuda_plan p, buf *bufs, int64_t *offs, int family, int op,
		  const void *arg, double divisor, int ulps)
{
	for (int k = 0; k < p.ntensors; k++) {
		if (k > 0 || family == TN_CUDA_REDUCE)
			fill_random(bufs[k].h, p.ops[k].dtype, (int64_t)(bufs[k].bytes / dsize(p.ops[k].dtype)));
		CK(cudaMemcpy(bufs[k].d, bufs[k].h, bufs[k].bytes, cudaMemcpyHostToDevice));
	}
	point(&p, bufs, offs, false);
	int rc = tn__cuda_emulate(&p, family, op, arg, divisor);
	point(&p, bufs, offs, true);
	int rd;
	switch (family) {
	case TN_CUDA_BINARY:
		rd = tn__cuda_binary(&p, op, (const tn__alpha *)arg);
		break;
	case TN_CUDA_COMPARE:
		rd = tn__cuda_compare(&p, op);
		break;
	case TN_CUDA_UNARY:
		rd = tn__cuda_unary(&p, op);
		break;
	case TN_CUDA_PRED:
		rd = tn__cuda_pred(&p, op);
		break;
	case TN_CUDA_BINARY2:
		rd = tn__cuda_binary2(&p, op);
		break;
	case TN_CUDA_WHERE:
		rd = tn__cuda_where(&p);
		break;
	case TN_CUDA_COPY:
		rd = tn__cuda_copy(&p);
		break;
	case TN_CUDA_FILL:
		rd = tn__cuda_fill(&p, arg);
		break;
	default:
		rd = tn__cuda_reduce(&p, op, divisor);
		break;
	}
	CK(cudaDeviceSynchronize());
	if (rc || rd) {
		printf("FAIL %s: rc %d rd %d\n", what, rc, rd);
		failures++;
		return;
	}
	CK(cudaMemcpy(bufs[0].h2, bufs[0].d, bufs[0].bytes, cudaMemcpyDeviceToHost));
	int dt = p.ops[0].dtype;
	size_t n = bufs[0].bytes / dsize(dt), bad = 0;
	for (size_t i = 0; i < n; i++) {
		const char *a = bufs[0].h + i * dsize(dt), *b = bufs[0].h2 + i * dsize(dt);
		if (memcmp(a, b, dsize(dt)) == 0)
			continue;
		double x = tn_cuda::load_as<double>(a, dt), y = tn_cuda::load_as<double>(b, dt);
		if (x != x && y != y)
			continue;
		if (ulps && dt >= TN_FLOAT16) {
			double tol = dt == TN_FLOAT64 ? 1e-15 : dt == TN_FLOAT32 ? 1.2e-7 : dt == TN_FLOAT16 ? 1e-3 : 8e-3;
			if (fabs(x - y) <= ulps * tol * fabs(x) || (isinf(x) && x == y))
				continue;
		}
		if (!bad)
			printf("  %s: element %zu: emulated %.9g, device %.9g\n", what, i, x, y);
		bad++;
	}
	if (bad) {
		printf("FAIL %s: %zu of %zu differ\n", what, bad, n);
		failures++;
	} else {
		printf("ok   %s (%zu elements)\n", what, n);
	}
}

static tn__cuda_plan plan1(int64_t n, int nt, const int *dts, const int64_t *strides)
{
	tn__cuda_plan p;
	memset(&p, 0, sizeof(p));
	p.ndim = 1;
	p.shape[0] = n;
	p.numel = n;
	p.noutputs = 1;
	p.ntensors = nt;
	for (int k = 0; k < nt; k++) {
		p.ops[k].dtype = (tn_dtype)dts[k];
		p.ops[k].strides[0] = strides[k];
	}
	p.common_dtype = (tn_dtype)dts[nt > 1 ? 1 : 0];
	return p;
}

static void correctness()
{
	const int64_t n = 100003;
	buf bufs[4];
	for (int k = 0; k < 4; k++)
		bufs[k] = make_buf((size_t)n * 8 * 3);
	int64_t zero[4] = { 0, 0, 0, 0 }, odd[4] = { 4, 4, 8, 8 };
	char what[128];
	tn__alpha al = { 1.0, 1, true }, al3 = { -0.375, 3, true };
	for (int dt = 0; dt < TN_NUM_DTYPES; dt++) {
		int s = (int)dsize(dt);
		int dts[3] = { dt, dt, dt };
		int64_t st[3] = { s, s, s }, st2[3] = { s, 3 * s, 2 * s };
		for (int op = 0; op < 4; op++) {
			tn__cuda_plan p = plan1(n, 3, dts, st);
			snprintf(what, sizeof(what), "binary %d dtype %d contiguous", op, dt);
			check(what, p, bufs, zero, TN_CUDA_BINARY, op, op & 1 ? &al3 : &al, 1, 0);
			p = plan1(n, 3, dts, st2);
			snprintf(what, sizeof(what), "binary %d dtype %d strided", op, dt);
			check(what, p, bufs, odd, TN_CUDA_BINARY, op, &al, 1, 0);
		}
		for (int op = 0; op < 6; op++) {
			int cd[3] = { TN_BOOL, dt, dt };
			int64_t cs[3] = { 1, s, s };
			tn__cuda_plan p = plan1(n, 3, cd, cs);
			snprintf(what, sizeof(what), "compare %d dtype %d", op, dt);
			check(what, p, bufs, zero, TN_CUDA_COMPARE, op, NULL, 1, 0);
		}
		for (int op = 0; op < TN_NUM_UNOPS; op++) {
			tn__cuda_plan p = plan1(n, 2, dts, st);
			snprintf(what, sizeof(what), "unary %d dtype %d", op, dt);
			check(what, p, bufs, zero, TN_CUDA_UNARY, op, NULL, 1, 4);
		}
		for (int op = 0; op < TN_NUM_BIN2OPS; op++) {
			tn__cuda_plan p = plan1(n, 3, dts, st);
			if (op >= TN_BIN2_LOGICAL_AND && op <= TN_BIN2_LOGICAL_XOR) {
				p.ops[0].dtype = TN_BOOL;
				p.ops[0].strides[0] = 1;
			}
			snprintf(what, sizeof(what), "binary2 %d dtype %d", op, dt);
			check(what, p, bufs, zero, TN_CUDA_BINARY2, op, NULL, 1, 4);
		}
		for (int src = 0; src < TN_NUM_DTYPES; src++) {
			int cd[2] = { dt, src };
			int64_t cs[2] = { s, (int64_t)dsize(src) };
			tn__cuda_plan p = plan1(n, 2, cd, cs);
			snprintf(what, sizeof(what), "copy %d <- %d", dt, src);
			check(what, p, bufs, zero, TN_CUDA_COPY, 0, NULL, 1, 0);
		}
		{
			int wd[4] = { dt, TN_BOOL, dt, dt };
			int64_t ws[4] = { s, 1, s, s };
			tn__cuda_plan p = plan1(n, 4, wd, ws);
			p.common_dtype = (tn_dtype)dt;
			snprintf(what, sizeof(what), "where dtype %d", dt);
			check(what, p, bufs, zero, TN_CUDA_WHERE, 0, NULL, 1, 0);
		}
		for (int op = 0; op < 6; op++) {
			/* [rows 1000, cols n/1000]: sum over everything, rows and columns */
			for (int shape = 0; shape < 3; shape++) {
				int acc = op >= TN_RED_ALL ? TN_BOOL
					  : (op <= TN_RED_PROD && dt < TN_FLOAT16) ? TN_INT64
					  : (dt == TN_FLOAT16 || dt == TN_BFLOAT16) && op <= TN_RED_PROD ? TN_FLOAT32
													     : dt;
				int od = op >= TN_RED_ALL ? TN_BOOL : op <= TN_RED_PROD ? acc : dt;
				tn__cuda_plan p;
				memset(&p, 0, sizeof(p));
				p.ndim = 2;
				p.shape[0] = 100;
				p.shape[1] = 1000;
				p.numel = 100000;
				p.noutputs = 1;
				p.ntensors = 2;
				p.common_dtype = (tn_dtype)acc;
				p.ops[0].dtype = (tn_dtype)od;
				p.ops[1].dtype = (tn_dtype)dt;
				p.ops[1].strides[0] = s;
				p.ops[1].strides[1] = 100 * s;
				int64_t os = (int64_t)dsize(od);
				if (shape == 1)
					p.ops[0].strides[1] = os; /* row reductions */
				if (shape == 2)
					p.ops[0].strides[0] = os; /* column reductions */
				snprintf(what, sizeof(what), "reduce %d dtype %d shape %d", op, dt, shape);
				check(what, p, bufs, zero, TN_CUDA_REDUCE, op, NULL,
				      op == TN_RED_SUM && dt >= TN_FLOAT16 ? 100.0 : 1.0, 0);
			}
		}
	}
	for (int k = 0; k < 4; k++)
		free_buf(bufs[k]);
}

static float time_ms(int reps, void (*fn)(void *), void *ctx)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	fn(ctx); /* warm-up */
	CK(cudaEventRecord(a));
	for (int i = 0; i < reps; i++)
		fn(ctx);
	CK(cudaEventRecord(b));
	CK(cudaEventSynchronize(b));
	float ms;
	CK(cudaEventElapsedTime(&ms, a, b));
	return ms / reps;
}

struct bctx {
	tn__cuda_plan p;
	char *x, *y;
	size_t bytes;
	int which;
};

static void run_bench(void *v)
{
	bctx *c = (bctx *)v;
	static const tn__alpha al = { 1.0, 1, true };
	int rc = 0;
	switch (c->which) {
	case 0:
		CK(cudaMemcpyAsync(c->x, c->y, c->bytes, cudaMemcpyDeviceToDevice));
		return;
	case 1:
		rc = tn__cuda_binary(&c->p, TN_BINOP_ADD, &al);
		break;
	case 2:
	case 3:
		rc = tn__cuda_copy(&c->p);
		break;
	default:
		rc = tn__cuda_reduce(&c->p, TN_RED_SUM, 1.0);
		break;
	}
	if (rc) {
		fprintf(stderr, "launch: %s\n", cudaGetErrorString((cudaError_t)rc));
		exit(1);
	}
}

static void bench()
{
	const int64_t n = 100000000;
	char *a, *b, *c;
	CK(cudaMalloc((void **)&a, n * 4));
	CK(cudaMalloc((void **)&b, n * 4));
	CK(cudaMalloc((void **)&c, n * 4));
	CK(cudaMemset(a, 0, n * 4));
	CK(cudaMemset(b, 0, n * 4));
	bctx x;
	x.x = a;
	x.y = b;
	x.bytes = n * 4;
	x.which = 0;
	float t = time_ms(20, run_bench, &x);
	double copy_bw = 2.0 * n * 4 / (t * 1e-3) / 1e9;
	printf("cudaMemcpy D2D 400 MB: %.3f ms, %.0f GB/s (read + write)\n", t, copy_bw);

	int d3[3] = { TN_FLOAT32, TN_FLOAT32, TN_FLOAT32 };
	int64_t s3[3] = { 4, 4, 4 };
	x.p = plan1(n, 3, d3, s3);
	x.p.ops[0].data = c;
	x.p.ops[1].data = a;
	x.p.ops[2].data = b;
	x.which = 1;
	t = time_ms(20, run_bench, &x);
	double bw = 3.0 * n * 4 / (t * 1e-3) / 1e9;
	printf("add f32 1e8: %.3f ms, %.0f GB/s, %.0f%% of copy\n", t, bw, 100 * bw / copy_bw);

	x.p = plan1(n, 2, d3, s3);
	x.p.ops[0].data = c;
	x.p.ops[1].data = a;
	x.which = 2;
	t = time_ms(20, run_bench, &x);
	bw = 2.0 * n * 4 / (t * 1e-3) / 1e9;
	printf("copy f32 1e8: %.3f ms, %.0f GB/s, %.0f%% of copy\n", t, bw, 100 * bw / copy_bw);

	int dh[2] = { TN_FLOAT16, TN_FLOAT32 };
	int64_t sh[2] = { 2, 4 };
	x.p = plan1(n, 2, dh, sh);
	x.p.ops[0].data = c;
	x.p.ops[1].data = a;
	x.which = 3;
	t = time_ms(20, run_bench, &x);
	bw = 6.0 * n / (t * 1e-3) / 1e9;
	printf("cast f32->f16 1e8: %.3f ms, %.0f GB/s, %.0f%% of copy\n", t, bw, 100 * bw / copy_bw);

	int dr[2] = { TN_FLOAT32, TN_FLOAT32 };
	int64_t sr[2] = { 0, 4 };
	x.p = plan1(n, 2, dr, sr);
	x.p.ops[0].data = c;
	x.p.ops[1].data = a;
	x.which = 4;
	t = time_ms(20, run_bench, &x);
	bw = 4.0 * n / (t * 1e-3) / 1e9;
	printf("sum f32 1e8 -> 1: %.3f ms, %.0f GB/s, %.0f%% of copy\n", t, bw, 100 * bw / copy_bw);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
}

int main(int argc, char **argv)
{
	(void)argv;
	correctness();
	printf("%d failures\n", failures);
	if (argc < 2)
		bench();
	return failures ? 1 : 0;
}
