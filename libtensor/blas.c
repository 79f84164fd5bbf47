/* SPDX-License-Identifier: MIT */
/*
 * The BLAS behind the matmul family (see blas.h).
 *
 * BLIS was chosen by measurement on the machines we target (libtensor-linalg(7)): its typed
 * expert API takes a row and a column stride for every operand, so transposed, sliced and
 * broadcast (stride 0) operands go in as they are, without the copies a column-major CBLAS
 * needs for anything but a transpose, and a thread count per call (rntm_t), so that our calls
 * share the OpenMP pool instead of oversubscribing it: a call made outside a parallel region
 * uses the loops' thread count, one made inside uses one thread.
 *
 * Batches: BLIS threads within one product. When the products are small and many (attention
 * heads, a batch of small matrices) the batch is split over our threads instead, one
 * single-threaded product each, as ATen's bmm does for small matrices.
 *
 * Vector cases (n == 1 or m == 1: mv, linear at batch 1) go to BLIS's gemv, which is
 * single-threaded in BLIS 0.9, so we split its rows over the threads ourselves: it reads the
 * matrix once and is bound by memory bandwidth, which one core cannot saturate.
 */
#include <blis.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "blas.h"
#include "parallel.h"
#include "stub.h"

/* Products of at most this many multiply-adds are run one per thread across a batch. */
#define SMALL_GEMM_FLOPS ((int64_t)1 << 18)
/* A gemv of at least this many elements is split over the threads. */
#define GEMV_SPLIT_MIN ((int64_t)1 << 15)

/* The threads one BLIS call may use. */
static int blas_threads(void)
{
#if defined(TN_TSAN) || defined(__SANITIZE_ADDRESS__)
	/* BLIS's OpenMP threads synchronise through libgomp, which TSan cannot see; and
	 * LeakSanitizer's exit-time scan crashes on the thread team BLIS leaves behind (its
	 * tracer faults on their stacks). The sanitizer builds run each product on one thread
	 * (our own loops still run on several). */
	return 1;
#else
#ifdef _OPENMP
	if (omp_in_parallel())
		return 1;
#endif
	return tn__num_threads();
#endif
}

/*
 * BLIS is loaded on first use, with dlopen(RTLD_LOCAL), never linked: libblis.so exports the
 * reference BLAS names (sgemm_, dgemv_, cblas_*) too, and a libblis in a process's global
 * scope would take over the BLAS calls of every other library there (NumPy's or libtorch's
 * OpenBLAS would find BLIS's single-threaded sgemm_ first). Only the typed expert API is
 * looked up; the rntm_t helpers are inline in blis.h.
 */
#ifndef TN_BLIS_SONAME
#define TN_BLIS_SONAME "libblis.so.4"
#endif

static struct {
	__typeof__(bli_sgemm_ex) *sgemm;
	__typeof__(bli_dgemm_ex) *dgemm;
	__typeof__(bli_sgemv_ex) *sgemv;
	__typeof__(bli_dgemv_ex) *dgemv;
	__typeof__(bli_info_get_version_str) *version;
	__typeof__(bli_arch_query_id) *arch_id;
	__typeof__(bli_arch_string) *arch_string;
	__typeof__(bli_info_get_enable_openmp) *openmp;
	__typeof__(bli_info_get_enable_pthreads) *pthreads;
	bool ok;
	char name[128];  /* "BLIS 0.9.0 (zen3, OpenMP)" */
	char why[256];   /* the loader's error */
} blis;

static void blis_load(void)
{
	void *h = dlopen(TN_BLIS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(blis.why, sizeof(blis.why), "%s (install Debian's libblis4-openmp)",
			 e ? e : TN_BLIS_SONAME);
		return;
	}
#define SYM(field, name)                                                                \
	if (!(*(void **)&blis.field = dlsym(h, name))) {                               \
		snprintf(blis.why, sizeof(blis.why), "%s has no %s", TN_BLIS_SONAME, name); \
		return;                                                                \
	}
	SYM(sgemm, "bli_sgemm_ex")
	SYM(dgemm, "bli_dgemm_ex")
	SYM(sgemv, "bli_sgemv_ex")
	SYM(dgemv, "bli_dgemv_ex")
	SYM(version, "bli_info_get_version_str")
	SYM(arch_id, "bli_arch_query_id")
	SYM(arch_string, "bli_arch_string")
	SYM(openmp, "bli_info_get_enable_openmp")
	SYM(pthreads, "bli_info_get_enable_pthreads")
#undef SYM
	snprintf(blis.name, sizeof(blis.name), "BLIS %s (%s, %s)", blis.version(),
		 blis.arch_string(blis.arch_id()),
		 blis.openmp() ? "OpenMP" : blis.pthreads() ? "pthreads" : "single-threaded");
	blis.ok = true;
}

/* 0 once BLIS is loaded, else TN_ENODEV with the loader's reason. */
static int blis_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, blis_load);
	if (blis.ok)
		return 0;
	return tn__error(TN_ENODEV, "the BLAS could not be loaded: %s", blis.why);
}

const char *tn__blas_name(void)
{
	return blis_ready() == 0 ? blis.name : blis.why;
}

/* ---- float32 and float64: BLIS ---- */

struct real_ctx {
	enum tn_dtype dt;
	int64_t m, n, k;
	double alpha, beta;
	struct tn__mat a, b, c;
	int nt;
};

static void real_gemm_one(const struct real_ctx *g, int64_t i, int nt)
{
	rntm_t rntm = BLIS_RNTM_INITIALIZER;
	bli_rntm_set_num_threads(nt, &rntm);
	size_t isz = tn__itemsize(g->dt);
	char *a = g->a.data + i * g->a.bs * (int64_t)isz;
	char *b = g->b.data + i * g->b.bs * (int64_t)isz;
	char *c = g->c.data + i * g->c.bs * (int64_t)isz;
	if (g->dt == TN_FLOAT32) {
		float al = (float)g->alpha, be = (float)g->beta;
		blis.sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, g->m, g->n, g->k, &al,
			     (float *)a, g->a.rs, g->a.cs, (float *)b, g->b.rs, g->b.cs, &be,
			     (float *)c, g->c.rs, g->c.cs, NULL, &rntm);
	} else {
		double al = g->alpha, be = g->beta;
		blis.dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, g->m, g->n, g->k, &al,
			     (double *)a, g->a.rs, g->a.cs, (double *)b, g->b.rs, g->b.cs, &be,
			     (double *)c, g->c.rs, g->c.cs, NULL, &rntm);
	}
}

static void real_batch_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	(void)tid;
	for (int64_t i = begin; i < end; i++)
		real_gemm_one(ctx, i, 1);
}

/*
 * y = beta * y + alpha * A x for rows [r0, r1) of A (rows x cols, strides rs, cs), x with
 * stride incx, y with stride incy: one BLIS gemv.
 */
static void real_gemv_rows(enum tn_dtype dt, int64_t r0, int64_t r1, int64_t cols, double alpha,
			   const char *a, int64_t rs, int64_t cs, const char *x, int64_t incx,
			   double beta, char *y, int64_t incy)
{
	rntm_t rntm = BLIS_RNTM_INITIALIZER;
	bli_rntm_set_num_threads(1, &rntm);
	size_t isz = tn__itemsize(dt);
	a += r0 * rs * (int64_t)isz;
	y += r0 * incy * (int64_t)isz;
	if (dt == TN_FLOAT32) {
		float al = (float)alpha, be = (float)beta;
		blis.sgemv(BLIS_NO_TRANSPOSE, BLIS_NO_CONJUGATE, r1 - r0, cols, &al, (float *)a,
			     rs, cs, (float *)x, incx, &be, (float *)y, incy, NULL, &rntm);
	} else {
		blis.dgemv(BLIS_NO_TRANSPOSE, BLIS_NO_CONJUGATE, r1 - r0, cols, &alpha,
			     (double *)a, rs, cs, (double *)x, incx, &beta, (double *)y, incy,
			     NULL, &rntm);
	}
}

struct gemv_ctx {
	enum tn_dtype dt;
	int64_t cols;
	double alpha, beta;
	const char *a, *x;
	int64_t rs, cs, incx, incy;
	char *y;
};

static void gemv_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	const struct gemv_ctx *g = ctx;
	(void)tid;
	real_gemv_rows(g->dt, begin, end, g->cols, g->alpha, g->a, g->rs, g->cs, g->x, g->incx,
		       g->beta, g->y, g->incy);
}

static void real_gemm(const struct real_ctx *g, int64_t batch)
{
	int nt = blas_threads();
	if (g->m == 1 || g->n == 1) {
		/* A vector result: y = op(M) v as a gemv over the rows of M. For n == 1, M is A
		 * and v B's column; for m == 1, M is B transposed (n x k) and v A's row. */
		struct gemv_ctx v = { .dt = g->dt, .cols = g->k, .alpha = g->alpha,
				      .beta = g->beta };
		int64_t rows;
		size_t isz = tn__itemsize(g->dt);
		if (g->n == 1) {
			rows = g->m;
			v.rs = g->a.rs, v.cs = g->a.cs, v.incx = g->b.rs, v.incy = g->c.rs;
		} else {
			rows = g->n;
			v.rs = g->b.cs, v.cs = g->b.rs, v.incx = g->a.cs, v.incy = g->c.cs;
		}
		for (int64_t i = 0; i < batch; i++) {
			const char *a = g->a.data + i * g->a.bs * (int64_t)isz;
			const char *b = g->b.data + i * g->b.bs * (int64_t)isz;
			v.a = g->n == 1 ? a : b;
			v.x = g->n == 1 ? b : a;
			v.y = g->c.data + i * g->c.bs * (int64_t)isz;
			int threads = rows * g->k >= GEMV_SPLIT_MIN ? nt : 1;
			tn__parallel_for(rows, threads, gemv_range, &v);
		}
		return;
	}
	if (batch > 1 && nt > 1 && g->m * g->n * g->k <= SMALL_GEMM_FLOPS) {
		tn__parallel_for(batch, nt, real_batch_range, (void *)g);
		return;
	}
	for (int64_t i = 0; i < batch; i++)
		real_gemm_one(g, i, nt);
}

/* ---- integers: our kernel, rows split over the threads ---- */

struct int_ctx {
	tn__gemm_int_fn fn;
	enum tn_dtype dt;
	int64_t m, n, k;
	uint64_t alpha, beta;
	struct tn__mat a, b, c;
};

static void int_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	const struct int_ctx *g = ctx;
	size_t isz = tn__itemsize(g->dt);
	(void)tid;
	/* [begin, end) counts rows over the whole batch. */
	for (int64_t r = begin; r < end;) {
		int64_t i = r / g->m, r0 = r % g->m;
		int64_t r1 = end - r < g->m - r0 ? r0 + (end - r) : g->m;
		g->fn(g->dt, r0, r1, g->n, g->k, g->alpha,
		      g->a.data + i * g->a.bs * (int64_t)isz, g->a.rs, g->a.cs,
		      g->b.data + i * g->b.bs * (int64_t)isz, g->b.rs, g->b.cs, g->beta,
		      g->c.data + i * g->c.bs * (int64_t)isz, g->c.rs, g->c.cs);
		r += r1 - r0;
	}
}

static uint64_t int_scalar(tn_scalar s, enum tn_dtype dt)
{
	int64_t v = 0;
	/* PyTorch converts alpha and beta with scalar_t's conversion: a float truncates. */
	if (s.kind == TN_SCALAR_DOUBLE) {
		double d = s.v.d;
		v = d != d ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
	} else if (s.kind == TN_SCALAR_BOOL) {
		v = s.v.b;
	} else {
		v = s.v.i;
	}
	switch (dt) {
	case TN_UINT8:
		return (uint64_t)(uint8_t)v;
	case TN_INT8:
		return (uint64_t)(int64_t)(int8_t)v;
	case TN_INT16:
		return (uint64_t)(int64_t)(int16_t)v;
	case TN_INT32:
		return (uint64_t)(int64_t)(int32_t)v;
	default:
		return (uint64_t)v;
	}
}

/* ---- float16 and bfloat16: widened to float32 ---- */

/* Copy the batch of m x n matrices @src (dtype @sdt, element strides) into the contiguous
 * @dst (@ddt), converting, row by row. */
static void stage(char *dst, enum tn_dtype ddt, const struct tn__mat *src, enum tn_dtype sdt,
		  int64_t batch, int64_t m, int64_t n, bool to_src)
{
	tn__cast_fn cast = (tn__cast_fn)tn__stub_get(&tn__cast_stub);
	int64_t ds = (int64_t)tn__itemsize(ddt), ss = (int64_t)tn__itemsize(sdt);
	for (int64_t i = 0; i < batch; i++)
		for (int64_t r = 0; r < m; r++) {
			char *d = dst + ((i * m + r) * n) * ds;
			char *s = src->data + (i * src->bs + r * src->rs) * ss;
			if (to_src)
				cast(s, sdt, src->cs * ss, d, ddt, ds, n);
			else
				cast(d, ddt, ds, s, sdt, src->cs * ss, n);
		}
}

static int half_gemm(enum tn_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t k,
		     double alpha, const struct tn__mat *a, const struct tn__mat *b, double beta,
		     const struct tn__mat *c)
{
	int64_t na = batch * m * k, nb = batch * k * n, nc = batch * m * n;
	float *buf = tn__malloc((size_t)(na + nb + nc) * sizeof(float));
	if (!buf)
		return tn__error(TN_ENOMEM, "out of memory (the float32 copies of a %s matmul)",
				 tn_dtype_name(dt));
	float *fa = buf, *fb = buf + na, *fc = buf + na + nb;
	stage((char *)fa, TN_FLOAT32, a, dt, batch, m, k, false);
	stage((char *)fb, TN_FLOAT32, b, dt, batch, k, n, false);
	if (beta != 0)
		stage((char *)fc, TN_FLOAT32, c, dt, batch, m, n, false);
	struct real_ctx g = {
		.dt = TN_FLOAT32, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
		.a = { (char *)fa, m * k, k, 1 }, .b = { (char *)fb, k * n, n, 1 },
		.c = { (char *)fc, m * n, n, 1 },
	};
	real_gemm(&g, batch);
	stage((char *)fc, TN_FLOAT32, c, dt, batch, m, n, true);
	tn__free(buf);
	return 0;
}

static double real_scalar(tn_scalar s)
{
	return s.kind == TN_SCALAR_DOUBLE ? s.v.d : s.kind == TN_SCALAR_BOOL ? s.v.b : (double)s.v.i;
}

int tn__gemm(enum tn_dtype dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
	     tn_scalar alpha, const struct tn__mat *a, const struct tn__mat *b, tn_scalar beta,
	     const struct tn__mat *c)
{
	int rc;
	if (batch == 0 || m == 0 || n == 0)
		return 0;
	if ((dtype == TN_FLOAT32 || dtype == TN_FLOAT64 || dtype == TN_FLOAT16 ||
	     dtype == TN_BFLOAT16) && (rc = blis_ready()) < 0)
		return rc;
	switch (dtype) {
	case TN_FLOAT32:
	case TN_FLOAT64: {
		struct real_ctx g = { .dt = dtype, .m = m, .n = n, .k = k,
				      .alpha = real_scalar(alpha), .beta = real_scalar(beta),
				      .a = *a, .b = *b, .c = *c };
		if (dtype == TN_FLOAT32) { /* the BLAS gets the scalars in float */
			g.alpha = (float)g.alpha;
			g.beta = (float)g.beta;
		}
		real_gemm(&g, batch);
		return 0;
	}
	case TN_FLOAT16:
	case TN_BFLOAT16:
		return half_gemm(dtype, batch, m, n, k, (float)real_scalar(alpha),
				 a, b, (float)real_scalar(beta), c);
	default: {
		struct int_ctx g = { (tn__gemm_int_fn)tn__stub_get(&tn__gemm_int_stub), dtype, m, n,
				     k, int_scalar(alpha, dtype), int_scalar(beta, dtype),
				     *a, *b, *c };
		int64_t rows = batch * m;
		int threads = rows * n * k >= SMALL_GEMM_FLOPS ? tn__num_threads() : 1;
		tn__parallel_for(rows, threads, int_range, &g);
		return 0;
	}
	}
}
