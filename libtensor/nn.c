/* SPDX-License-Identifier: MIT */
/*
 * The layers of a convolutional network, as ATen's Convolution.cpp, DilatedMaxPool2d.cpp,
 * AveragePool2d.cpp, AdaptiveAveragePooling.cpp and Normalization.cpp compute them: conv1d and
 * conv2d (and their padding="valid"/"same" forms), max_pool2d, avg_pool2d, adaptive_avg_pool2d
 * and batch_norm, each with PyTorch 1.13's checks, messages and result layouts.
 *
 * Convolution is im2col and one batched GEMM per image (tn__gemm, blas.h): the groups are the
 * GEMM's batch. An image's columns are laid out as its memory is: [C][KH][KW] x [OH*OW] for an
 * NCHW input, [OH*OW] x [KH][KW][C] for a channels-last one (so the copies are runs of
 * channels), and the weight is arranged to match. A 1x1 convolution with stride 1 and no
 * padding reads the input itself as the GEMM's operand. The result is written through its
 * own strides (NCHW or NHWC), pre-filled with the bias so that a 16-bit result is rounded
 * once. Images are split over the threads when there are enough of them; otherwise the GEMM
 * itself is threaded.
 *
 * Pooling and batch normalisation loop over the (image, channel) planes, split over the
 * threads, reading and writing through strides. float32 and float64 run natively; float16
 * and bfloat16 are computed in float32 and rounded once, as PyTorch's CPU kernels accumulate.
 *
 * Deliberate differences from PyTorch 1.13 (tn_conv2d(3), tn_max_pool2d(3)): float16 runs
 * (PyTorch's CPU kernels refuse it); out= tensors are never resized; an empty batch with a
 * channels-last input gives an empty result (PyTorch 1.13 fails in a view).
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "blas.h"
#include "iter.h"
#include "ops_kernels.h"
#include "parallel.h"

#define MAXSP 3

/* ---- helpers ---- */

static int wrong_type(const char *kernel, enum tn_dtype dt)
{
	return tn__error(TN_EINVAL, "\"%s\" not implemented for '%s'", kernel,
			 tn__scalar_type_name(dt));
}

static bool is_float(enum tn_dtype dt)
{
	return dt == TN_FLOAT32 || dt == TN_FLOAT64 || dt == TN_FLOAT16 || dt == TN_BFLOAT16;
}

/* A new result of @t's dtype and device in memory format @fmt. */
static int new_result(const tn_tensor *t, int ndim, const int64_t *sizes, enum tn_memory_format fmt,
		      tn_tensor **ret, const char *who)
{
	int64_t strides[TN_MAX_DIMS];
	int rc = tn__format_strides(ndim, sizes, fmt, strides, who);
	if (rc < 0)
		return rc;
	return tn__empty_like(t, ndim, sizes, strides, ret, who);
}

/* @t as float32 (a new reference; the tensor itself when it already is). */
static int as_float(const tn_tensor *t, tn_tensor **ret)
{
	if (t->dtype == TN_FLOAT32 || t->dtype == TN_FLOAT64)
		return *ret = tn_tensor_ref((tn_tensor *)t), 0;
	return tn_to(t, TN_FLOAT32, false, false, NULL, ret);
}

/* Copies @src (float32) into @dst (a 16-bit float), rounding once. */
static int store_back(tn_tensor *dst, const tn_tensor *src)
{
	return dst == src ? 0 : tn__copy(dst, src, TN_KEY_CPU, "nn");
}

/* A work buffer for a 16-bit @t: a float32 tensor of its geometry, or @t itself. */
static int work_like(tn_tensor *t, tn_tensor **ret, const char *who)
{
	if (t->dtype == TN_FLOAT32 || t->dtype == TN_FLOAT64) {
		*ret = tn_tensor_ref(t);
		return 0;
	}
	return tn__empty_like_device(tn_tensor_device(t), TN_FLOAT32, t->ndim, t->sizes, t->strides,
				     ret, who);
}

/* ---- convolution ---- */

struct conv_params {
	int nsp; /* spatial dims */
	int64_t stride[MAXSP], pad_l[MAXSP], pad_r[MAXSP], dil[MAXSP];
	int64_t groups;
};

/* expand_param_if_needed: one value for every spatial dim, or exactly @dim of them. */
static int expand_param(int n, const int64_t *v, const char *name, int dim, int64_t *out)
{
	char buf[128];
	if (n == 1) {
		for (int i = 0; i < dim; i++)
			out[i] = v[0];
		return 0;
	}
	if (n != dim || dim > MAXSP) {
		tn__format_shape(buf, sizeof(buf), n, v);
		return tn__error(TN_EINVAL, "expected %s to be a single integer value or a list of %d "
				 "values to match the convolution dimensions, but got %s=%s", name, dim,
				 name, buf);
	}
	memcpy(out, v, sizeof(int64_t) * (size_t)n);
	return 0;
}

/* check_shape_forward for @x (batched) and @w, with PyTorch's messages and order. */
static int check_conv_shape(const tn_tensor *x, const tn_tensor *w, const tn_tensor *bias,
			    const struct conv_params *p)
{
	char ws[128], xs[128], bs[128];
	const int k = x->ndim, dim = w->ndim - 2;
	for (int i = 0; i < dim; i++)
		if (p->pad_l[i] < 0 || p->pad_r[i] < 0)
			return tn__error(TN_EINVAL, "negative padding is not supported");
	for (int i = 0; i < dim; i++)
		if (p->stride[i] <= 0)
			return tn__error(TN_EINVAL, "non-positive stride is not supported");
	tn__format_shape(ws, sizeof(ws), w->ndim, w->sizes);
	tn__format_shape(xs, sizeof(xs), x->ndim, x->sizes);
	if (w->ndim != k)
		return tn__error(TN_EINVAL, "Expected %d-dimensional input for %d-dimensional weight "
				 "%s, but got %d-dimensional input of size %s instead", w->ndim, w->ndim,
				 ws, k, xs);
	if (w->sizes[0] < p->groups)
		return tn__error(TN_EINVAL, "Given groups=%lld, expected weight to be at least %lld at "
				 "dimension 0, but got weight of size %s instead", (long long)p->groups,
				 (long long)p->groups, ws);
	if (w->sizes[0] % p->groups)
		return tn__error(TN_EINVAL, "Given groups=%lld, expected weight to be divisible by %lld "
				 "at dimension 0, but got weight of size [%s] instead",
				 (long long)p->groups, (long long)p->groups, ws);
	if (x->sizes[1] != w->sizes[1] * p->groups)
		return tn__error(TN_EINVAL, "Given groups=%lld, weight of size %s, expected input%s to "
				 "have %lld channels, but got %lld channels instead",
				 (long long)p->groups, ws, xs, (long long)(w->sizes[1] * p->groups),
				 (long long)x->sizes[1]);
	if (bias && (bias->ndim != 1 || bias->sizes[0] != w->sizes[0])) {
		tn__format_shape(bs, sizeof(bs), bias->ndim, bias->sizes);
		return tn__error(TN_EINVAL, "Given weight of size %s, expected bias to be 1-dimensional "
				 "with %lld elements, but got bias of size %s instead", ws,
				 (long long)w->sizes[0], bs);
	}
	bool ok = true;
	char in[96] = "", ker[96] = "";
	size_t li = 0, lk = 0;
	for (int i = 2; i < k; i++) {
		int64_t is = x->sizes[i] + p->pad_l[i - 2] + p->pad_r[i - 2];
		int64_t ks = p->dil[i - 2] * (w->sizes[i] - 1) + 1;
		if (is < ks)
			ok = false;
		li += (size_t)snprintf(in + li, sizeof(in) - li, "%s%lld", i > 2 ? " x " : "", (long long)is);
		lk += (size_t)snprintf(ker + lk, sizeof(ker) - lk, "%s%lld", i > 2 ? " x " : "", (long long)ks);
	}
	if (!ok)
		return tn__error(TN_EINVAL, "Calculated padded input size per channel: (%s). Kernel "
				 "size: (%s). Kernel size can't be greater than actual input size", in, ker);
	return 0;
}

/* The dtype checks of the CPU backends (the slow path's and oneDNN's messages). */
static int check_conv_types(const tn_tensor *x, const tn_tensor *w, const tn_tensor *bias)
{
	if (w->dtype != x->dtype)
		return tn__error(TN_EINVAL, "expected scalar type %s but found %s",
				 tn__scalar_type_name(x->dtype), tn__scalar_type_name(w->dtype));
	if (bias && bias->dtype != x->dtype)
		return tn__error(TN_EINVAL, "Input type (%s) and bias type (%s) should be the same",
				 tn__typemeta_name(x->dtype), tn__typemeta_name(bias->dtype));
	if (x->dtype == TN_BOOL)
		return wrong_type("slow_conv2d_cpu", x->dtype);
	return 0;
}

struct conv_ctx {
	size_t isz;
	enum tn_dtype dt;
	const char *x;
	int64_t xs[4];
	int64_t C, H, W, O, KH, KW, OH, OW, G, Cg, Og, K, P;
	int64_t sh, sw, ph, pw, dh, dw;
	bool direct, nhwc;
	struct tn__mat a; /* the weight, per group */
	char *y;
	int64_t ys[4];
	const char *bias;
	char *col;
	int64_t col_elems;
	int im2col_threads; /* > 1: each image's columns are made by that many threads */
	atomic_int rc;
};

/* Copy one element of @isz bytes. */
#define COPY_ELEM(isz, d, s)                                                                  \
	do {                                                                                  \
		switch (isz) {                                                                \
		case 1: *(uint8_t *)(d) = *(const uint8_t *)(s); break;                        \
		case 2: *(uint16_t *)(d) = *(const uint16_t *)(s); break;                      \
		case 4: *(uint32_t *)(d) = *(const uint32_t *)(s); break;                      \
		default: *(uint64_t *)(d) = *(const uint64_t *)(s); break;                     \
		}                                                                             \
	} while (0)

/*
 * im2col of channels [c0, c1) of image @x into @col, [C][KH][KW] x [P] (the NCHW order). Each
 * row of a kernel offset is a run of OW outputs: the columns whose input lies in the image
 * are found once, so the padding is filled apart and the inside is a copy (a memcpy for a
 * stride-1 row).
 */
#define IM2COL_NCHW(T)                                                                        \
	static void im2col_nchw_##T(const struct conv_ctx *g, const char *xb, T *col, int64_t c0, \
				    int64_t c1)                                               \
	{                                                                                     \
		const T *x = (const T *)xb;                                                   \
		for (int64_t c = c0; c < c1; c++)                                             \
			for (int64_t kh = 0; kh < g->KH; kh++)                                \
				for (int64_t kw = 0; kw < g->KW; kw++) {                      \
					T *row = col + ((c * g->KH + kh) * g->KW + kw) * g->P; \
					int64_t iw0 = kw * g->dw - g->pw;                      \
					/* ow in [lo, hi): 0 <= iw0 + ow * sw < W */            \
					int64_t lo = iw0 >= 0 ? 0 : (-iw0 + g->sw - 1) / g->sw; \
					int64_t hi = g->W - iw0 <= 0 ? 0 : (g->W - iw0 + g->sw - 1) / g->sw; \
					if (hi > g->OW)                                        \
						hi = g->OW;                                    \
					if (lo > hi)                                           \
						lo = hi;                                       \
					for (int64_t oh = 0; oh < g->OH; oh++) {              \
						int64_t ih = oh * g->sh - g->ph + kh * g->dh;  \
						T *r = row + oh * g->OW;                       \
						if (ih < 0 || ih >= g->H) {                    \
							memset(r, 0, sizeof(T) * (size_t)g->OW); \
							continue;                              \
						}                                              \
						const T *s = x + c * g->xs[1] + ih * g->xs[2]; \
						memset(r, 0, sizeof(T) * (size_t)lo);          \
						if (g->sw == 1 && g->xs[3] == 1) {             \
							memcpy(r + lo, s + iw0 + lo,            \
							       sizeof(T) * (size_t)(hi - lo));  \
						} else {                                       \
							const int64_t step = g->sw * g->xs[3];   \
							const T *q = s + (iw0 + lo * g->sw) * g->xs[3]; \
							for (int64_t ow = lo; ow < hi; ow++, q += step) \
								r[ow] = *q;                     \
						}                                              \
						memset(r + hi, 0, sizeof(T) * (size_t)(g->OW - hi)); \
					}                                                     \
				}                                                             \
	}
IM2COL_NCHW(uint8_t)
IM2COL_NCHW(uint16_t)
IM2COL_NCHW(uint32_t)
IM2COL_NCHW(uint64_t)

/* im2col of output rows [oh0, oh1) into [G][P][KH][KW][Cg] (channels innermost: the NHWC
 * order). */
#define IM2COL_NHWC(T)                                                                        \
	static void im2col_nhwc_##T(const struct conv_ctx *g, const char *xb, T *col, int64_t oh0, \
				    int64_t oh1)                                              \
	{                                                                                     \
		const T *x = (const T *)xb;                                                   \
		for (int64_t oh = oh0; oh < oh1; oh++)                                        \
			for (int64_t ow = 0; ow < g->OW; ow++) {                              \
				int64_t p = oh * g->OW + ow;                                  \
				for (int64_t kh = 0; kh < g->KH; kh++) {                      \
					int64_t ih = oh * g->sh - g->ph + kh * g->dh;          \
					for (int64_t kw = 0; kw < g->KW; kw++) {               \
						int64_t iw = ow * g->sw - g->pw + kw * g->dw;  \
						bool in = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W; \
						const T *s = x + ih * g->xs[2] + iw * g->xs[3]; \
						for (int64_t gi = 0; gi < g->G; gi++) {        \
							T *d = col + (gi * g->P + p) * g->K +   \
							       (kh * g->KW + kw) * g->Cg;       \
							if (!in) {                              \
								memset(d, 0, sizeof(T) * (size_t)g->Cg); \
								continue;                       \
							}                                       \
							const T *sc = s + gi * g->Cg * g->xs[1]; \
							if (g->xs[1] == 1) {                    \
								memcpy(d, sc, sizeof(T) * (size_t)g->Cg); \
								continue;                       \
							}                                       \
							for (int64_t c = 0; c < g->Cg; c++)     \
								d[c] = sc[c * g->xs[1]];        \
						}                                              \
					}                                                     \
				}                                                             \
			}                                                                     \
	}
IM2COL_NHWC(uint8_t)
IM2COL_NHWC(uint16_t)
IM2COL_NHWC(uint32_t)
IM2COL_NHWC(uint64_t)

/* im2col of rows [lo, hi): channels for NCHW columns, output rows for NHWC ones. */
static void im2col(const struct conv_ctx *g, const char *x, char *col, int64_t lo, int64_t hi)
{
#define CASE(T)                                                                               \
	if (g->nhwc)                                                                          \
		im2col_nhwc_##T(g, x, (T *)col, lo, hi);                                      \
	else                                                                                  \
		im2col_nchw_##T(g, x, (T *)col, lo, hi);                                      \
	break;
	switch (g->isz) {
	case 1: CASE(uint8_t)
	case 2: CASE(uint16_t)
	case 4: CASE(uint32_t)
	default: CASE(uint64_t)
	}
#undef CASE
}

/* One image's im2col split over the threads (a batch of one image, whose GEMM is threaded
 * but whose columns would otherwise be made by one thread). */
struct im2col_job {
	const struct conv_ctx *g;
	const char *x;
	char *col;
};

static void im2col_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	const struct im2col_job *j = ctx;
	(void)tid;
	im2col(j->g, j->x, j->col, begin, end);
}

/* Image @n: bias, im2col, one GEMM over the groups. */
static void conv_image(struct conv_ctx *g, int64_t n, int tid)
{
	const int64_t isz = (int64_t)g->isz;
	char *y = g->y + n * g->ys[0] * isz;
	const char *x = g->x + n * g->xs[0] * isz;
	struct tn__mat b, c = { y, g->Og * g->ys[1], g->ys[1], g->ys[3] };
	if (g->bias)
		for (int64_t o = 0; o < g->O; o++)
			for (int64_t oh = 0; oh < g->OH; oh++)
				for (int64_t ow = 0; ow < g->OW; ow++)
					COPY_ELEM(g->isz, y + (o * g->ys[1] + oh * g->ys[2] +
							       ow * g->ys[3]) * isz,
						  g->bias + o * isz);
	if (g->direct) {
		b = (struct tn__mat){ (char *)x, g->Cg * g->xs[1], g->xs[1], g->xs[3] };
	} else {
		char *col = g->col + (int64_t)tid * g->col_elems * isz;
		int64_t rows = g->nhwc ? g->OH : g->C;
		if (g->im2col_threads > 1) {
			struct im2col_job j = { g, x, col };
			tn__parallel_for(rows, g->im2col_threads, im2col_range, &j);
		} else {
			im2col(g, x, col, 0, rows);
		}
		if (g->nhwc)
			b = (struct tn__mat){ col, g->P * g->K, 1, g->K };
		else
			b = (struct tn__mat){ col, g->K * g->P, g->P, 1 };
	}
	int rc = tn__gemm(g->dt, g->G, g->Og, g->P, g->K, tn_scalar_int(1), &g->a, &b,
			  tn_scalar_int(g->bias ? 1 : 0), &c);
	if (rc < 0)
		atomic_store_explicit(&g->rc, rc, memory_order_relaxed); /* read after the join */
}

static void conv_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	for (int64_t n = begin; n < end; n++)
		conv_image(ctx, n, tid);
}

/* The convolution of 4-d @x by @w into @y (NCHW or NHWC), on the CPU. */
static int conv2d_run(const tn_tensor *x, const tn_tensor *w, const tn_tensor *bias, tn_tensor *y,
		      const struct conv_params *p)
{
	tn_tensor *wk = NULL, *wp = NULL, *bc = NULL;
	int rc = 0;
	struct conv_ctx g = {
		.isz = tn__itemsize(x->dtype), .dt = x->dtype, .x = tn__data(x),
		.C = x->sizes[1], .H = x->sizes[2], .W = x->sizes[3], .O = w->sizes[0],
		.KH = w->sizes[2], .KW = w->sizes[3], .OH = y->sizes[2], .OW = y->sizes[3],
		.G = p->groups, .sh = p->stride[0], .sw = p->stride[1], .ph = p->pad_l[0],
		.pw = p->pad_l[1], .dh = p->dil[0], .dw = p->dil[1], .y = tn__data(y),
	};
	const int64_t N = x->sizes[0];
	memcpy(g.xs, x->strides, sizeof(g.xs));
	memcpy(g.ys, y->strides, sizeof(g.ys));
	g.Cg = g.C / g.G;
	g.Og = g.O / g.G;
	g.K = g.Cg * g.KH * g.KW;
	g.P = g.OH * g.OW;
	atomic_init(&g.rc, 0);
	if (y->numel == 0)
		return 0;
	/* A size-1 dim's stride is free: give the GEMM a consistent one. */
	if (g.OH == 1)
		g.ys[2] = g.OW * g.ys[3];
	if (g.OW == 1)
		g.ys[3] = g.OH > 1 ? g.ys[2] : 1;
	if (g.K == 0) { /* no input channels: the result is the bias, or zero */
		if (bias) {
			tn_tensor *bv;
			if ((rc = tn_view(bias, 4, (int64_t[]){ 1, g.O, 1, 1 }, &bv)) < 0)
				return rc;
			rc = tn__copy(y, bv, TN_KEY_CPU, "conv2d");
			tn_tensor_unref(bv);
			return rc;
		}
		return tn__fill_key(y, tn_scalar_int(0), TN_KEY_CPU);
	}
	if (bias && (rc = tn_contiguous(bias, TN_CONTIGUOUS_FORMAT, &bc)) < 0)
		return rc;
	g.bias = bc ? tn__data(bc) : NULL;
	g.direct = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
		   (g.H == 1 || g.xs[2] == g.W * g.xs[3] || g.W == 1);
	if (g.direct && g.W == 1)
		g.xs[3] = g.H > 1 ? g.xs[2] : 1;
	if (g.direct && g.H == 1)
		g.xs[2] = g.W * g.xs[3];
	g.nhwc = !g.direct && x->strides[1] == 1 && g.C > 1;
	if (g.direct) {
		g.a = (struct tn__mat){ tn__data(w), g.Og * w->strides[0], w->strides[0], w->strides[1] };
	} else {
		/* The weight as [O][K] in the columns' order. */
		if (g.nhwc) {
			if ((rc = tn_permute(w, 4, (int64_t[]){ 0, 2, 3, 1 }, &wp)) < 0 ||
			    (rc = tn_contiguous(wp, TN_CONTIGUOUS_FORMAT, &wk)) < 0)
				goto out;
		} else if ((rc = tn_contiguous(w, TN_CONTIGUOUS_FORMAT, &wk)) < 0) {
			goto out;
		}
		g.a = (struct tn__mat){ tn__data(wk), g.Og * g.K, g.K, 1 };
	}
	int nt = tn__num_threads();
	int threads = N >= 2 && nt > 1 ? (N < nt ? (int)N : nt) : 1;
	if (!g.direct) {
		g.col_elems = g.C * g.KH * g.KW * g.P;
		g.col = tn__malloc((size_t)(g.col_elems * threads) * g.isz);
		if (!g.col) {
			rc = tn__error(TN_ENOMEM, "out of memory (the columns of a convolution)");
			goto out;
		}
	}
	/* A lone image: its columns in parallel too, when there are enough of them. */
	if (threads == 1 && nt > 1 && !g.direct && g.col_elems >= 32768)
		g.im2col_threads = nt;
	if (threads > 1)
		tn__parallel_for(N, threads, conv_range, &g);
	else
		conv_range(&g, 0, N, 0);
	rc = atomic_load_explicit(&g.rc, memory_order_relaxed);
	if (rc < 0)
		rc = tn__error(rc, "out of memory (the float32 copies of a %s convolution)",
			       tn_dtype_name(g.dt));
	tn__free(g.col);
out:
	tn_tensor_unref(wk);
	tn_tensor_unref(wp);
	tn_tensor_unref(bc);
	return rc;
}

/*
 * conv1d and conv2d (@nsp spatial dims): @pad_mode NULL for the int[] padding, else the
 * padding string ("valid" or "same").
 */
static int convolution(int nsp, const tn_tensor *input, const tn_tensor *weight,
		       const tn_tensor *bias, int nstride, const int64_t *stride, int npad,
		       const int64_t *pad, const char *pad_mode, int ndil, const int64_t *dil,
		       int64_t groups, enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = nsp == 1 ? "conv1d" : "conv2d";
	char buf[128];
	struct conv_params p = { .nsp = nsp, .groups = groups };
	tn_tensor *x = NULL, *y = NULL, *x4 = NULL, *w4 = NULL, *y4 = NULL;
	int rc = tn__check_tensor_args(input, ret, who);
	if (rc < 0)
		return rc;
	if ((rc = tn__check_live(weight, who)) < 0 || (bias && (rc = tn__check_live(bias, who)) < 0))
		return rc;
	if (input->ndim != nsp + 1 && input->ndim != nsp + 2) {
		tn__format_shape(buf, sizeof(buf), input->ndim, input->sizes);
		return tn__error(TN_EINVAL, "Expected %dD (unbatched) or %dD (batched) input to %s, but "
				 "got input of size: %s", nsp + 1, nsp + 2, who, buf);
	}
	const bool batched = input->ndim == nsp + 2;
	const int dim = weight->ndim - 2;
	if (pad_mode && strcmp(pad_mode, "same") == 0) {
		if (dim <= 0)
			return tn__error(TN_EINVAL, "weight should have at least three dimensions");
		if (weight->ndim != nsp + 2) {
			char ws[128];
			int64_t bs[MAXSP + 2];
			bs[0] = 1;
			memcpy(bs + !batched, input->sizes, sizeof(int64_t) * (size_t)input->ndim);
			tn__format_shape(ws, sizeof(ws), weight->ndim, weight->sizes);
			tn__format_shape(buf, sizeof(buf), nsp + 2, bs);
			return tn__error(TN_EINVAL, "Expected %d-dimensional input for %d-dimensional "
					 "weight%s, but got %d-dimensional input of size %s instead",
					 weight->ndim, weight->ndim, ws, nsp + 2, buf);
		}
		if (nstride != dim && nstride != 1)
			return tn__error(TN_EINVAL, "stride cannot broadcast to %d dimensions", dim);
		if (ndil != dim && ndil != 1)
			return tn__error(TN_EINVAL, "dilation cannot broadcast to %d dimensions", dim);
		for (int i = 0; i < nstride; i++)
			if (stride[i] != 1)
				return tn__error(TN_EINVAL, "padding='same' is not supported for strided "
						 "convolutions");
		for (int i = 0; i < dim; i++) {
			int64_t d = dil[ndil == 1 ? 0 : i];
			int64_t total = d * (weight->sizes[i + 2] - 1);
			p.pad_l[i] = total / 2;
			p.pad_r[i] = total - total / 2;
		}
	} else if (pad_mode && strcmp(pad_mode, "valid") != 0) {
		return tn__error(TN_EINVAL, "Invalid padding string: '%s'", pad_mode);
	}
	if (dim <= 0)
		return tn__error(TN_EINVAL, "weight should have at least three dimensions");
	if (groups <= 0)
		return tn__error(TN_EINVAL, "non-positive groups is not supported");
	if ((rc = expand_param(nstride, stride, "stride", dim, p.stride)) < 0)
		return rc;
	if (!pad_mode) {
		if ((rc = expand_param(npad, pad, "padding", dim, p.pad_l)) < 0)
			return rc;
		memcpy(p.pad_r, p.pad_l, sizeof(p.pad_l));
	}
	if ((rc = expand_param(ndil, dil, "dilation", dim, p.dil)) < 0)
		return rc;
	/* conv2d passes output_padding [0, 0], which a 1-d weight cannot take. */
	int64_t op[MAXSP];
	if (nsp == 2 && (rc = expand_param(2, (int64_t[]){ 0, 0 }, "output_padding", dim, op)) < 0)
		return rc;
	if (batched)
		x = tn_tensor_ref((tn_tensor *)input);
	else if ((rc = tn_unsqueeze(input, 0, &x)) < 0)
		return rc;
	if ((rc = check_conv_shape(x, weight, bias, &p)) < 0 ||
	    (rc = check_conv_types(x, weight, bias)) < 0)
		goto out;
	int64_t sizes[MAXSP + 2] = { x->sizes[0], weight->sizes[0] };
	for (int i = 0; i < dim; i++)
		sizes[i + 2] = (x->sizes[i + 2] + p.pad_l[i] + p.pad_r[i] -
				p.dil[i] * (weight->sizes[i + 2] - 1) - 1) / p.stride[i] + 1;
	/* The backends' layout rule: channels-last when the input's or the weight's strides
	 * suggest it (2-d only; conv1d makes its input contiguous). */
	enum tn_memory_format fmt = TN_CONTIGUOUS_FORMAT;
	if (nsp == 2 && x->sizes[0] > 0 &&
	    (tn__suggest_memory_format(x) == TN_CHANNELS_LAST ||
	     tn__suggest_memory_format(weight) == TN_CHANNELS_LAST))
		fmt = TN_CHANNELS_LAST;
	if ((rc = new_result(x, nsp + 2, sizes, fmt, &y, who)) < 0)
		goto out;
	if (tn__key_runs(key)) {
		if (nsp == 1) {
			struct conv_params p2 = { .nsp = 2, .groups = groups,
						  .stride = { 1, p.stride[0] }, .pad_l = { 0, p.pad_l[0] },
						  .pad_r = { 0, p.pad_r[0] }, .dil = { 1, p.dil[0] } };
			if ((rc = tn_unsqueeze(x, 2, &x4)) < 0 || (rc = tn_unsqueeze(weight, 2, &w4)) < 0 ||
			    (rc = tn_unsqueeze(y, 2, &y4)) < 0 ||
			    (rc = conv2d_run(x4, w4, bias, y4, &p2)) < 0)
				goto out;
		} else if ((rc = conv2d_run(x, weight, bias, y, &p)) < 0) {
			goto out;
		}
	}
	if (batched) {
		*ret = tn_tensor_ref(y);
	} else if ((rc = tn_squeeze_dim(y, 0, ret)) < 0) {
		goto out;
	}
out:
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	tn_tensor_unref(x4);
	tn_tensor_unref(w4);
	tn_tensor_unref(y4);
	return rc;
}

#define CONV_KERNELS(SUFFIX, KEY)                                                             \
	int tn__conv1d_##SUFFIX(const tn_tensor *input, const tn_tensor *weight,              \
				const tn_tensor *bias, int nstride, const int64_t *stride,    \
				int npadding, const int64_t *padding, int ndilation,          \
				const int64_t *dilation, int64_t groups, tn_tensor **ret)     \
	{                                                                                     \
		return convolution(1, input, weight, bias, nstride, stride, npadding, padding, \
				   NULL, ndilation, dilation, groups, KEY, ret);              \
	}                                                                                     \
	int tn__conv2d_##SUFFIX(const tn_tensor *input, const tn_tensor *weight,              \
				const tn_tensor *bias, int nstride, const int64_t *stride,    \
				int npadding, const int64_t *padding, int ndilation,          \
				const int64_t *dilation, int64_t groups, tn_tensor **ret)     \
	{                                                                                     \
		return convolution(2, input, weight, bias, nstride, stride, npadding, padding, \
				   NULL, ndilation, dilation, groups, KEY, ret);              \
	}                                                                                     \
	int tn__conv1d_padding_##SUFFIX(const tn_tensor *input, const tn_tensor *weight,      \
					const tn_tensor *bias, int nstride, const int64_t *stride, \
					const char *padding, int ndilation,                   \
					const int64_t *dilation, int64_t groups, tn_tensor **ret) \
	{                                                                                     \
		return convolution(1, input, weight, bias, nstride, stride, 0, NULL,          \
				   padding ? padding : "", ndilation, dilation, groups, KEY, ret); \
	}                                                                                     \
	int tn__conv2d_padding_##SUFFIX(const tn_tensor *input, const tn_tensor *weight,      \
					const tn_tensor *bias, int nstride, const int64_t *stride, \
					const char *padding, int ndilation,                   \
					const int64_t *dilation, int64_t groups, tn_tensor **ret) \
	{                                                                                     \
		return convolution(2, input, weight, bias, nstride, stride, 0, NULL,          \
				   padding ? padding : "", ndilation, dilation, groups, KEY, ret); \
	}

CONV_KERNELS(cpu, TN_KEY_CPU)
CONV_KERNELS(meta, TN_KEY_META)

/* ---- pooling ---- */

struct pool {
	int64_t kH, kW, dH, dW, padH, padW, dilH, dilW;
	int64_t N, C, H, W, OH, OW;
	bool ceil_mode, count_include_pad;
	const int64_t *divisor;
};

/* pooling_output_shape: the output size of one dim, with its checks. */
static int pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode,
			 int64_t *ret)
{
	if (s == 0)
		return tn__error(TN_EINVAL, "stride should not be zero");
	if (pad < 0)
		return tn__error(TN_EINVAL, "pad must be non-negative, but got pad: %lld", (long long)pad);
	if (pad > k / 2)
		return tn__error(TN_EINVAL, "pad should be at most half of kernel size, but got pad=%lld "
				 "and kernel_size=%lld", (long long)pad, (long long)k);
	int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
	int64_t q = num / s;
	if ((num % s != 0) && ((num < 0) != (s < 0)))
		q--; /* div_rtn */
	int64_t o = q + 1;
	if (ceil_mode && (o - 1) * s >= in + pad)
		o--;
	*ret = o;
	return 0;
}

/* pool2d_shape_check, after the output sizes. */
static int pool_shape_check(const tn_tensor *x, const struct pool *p, enum tn_memory_format fmt)
{
	char buf[128];
	if (p->kW <= 0 || p->kH <= 0)
		return tn__error(TN_EINVAL, "kernel size should be greater than zero, but got kH: %d kW: %d",
				 (int)p->kH, (int)p->kW);
	if (p->dW <= 0 || p->dH <= 0)
		return tn__error(TN_EINVAL, "stride should be greater than zero, but got dH: %d dW: %d",
				 (int)p->dH, (int)p->dW);
	if (p->dilH <= 0 || p->dilW <= 0)
		return tn__error(TN_EINVAL, "dilation should be greater than zero, but got dilationH: %d "
				 "dilationW: %d", (int)p->dilH, (int)p->dilW);
	const int nd = x->ndim;
	bool valid = x->sizes[1] != 0 && x->sizes[2] != 0;
	tn__format_shape(buf, sizeof(buf), nd, x->sizes);
	if (fmt == TN_CHANNELS_LAST) {
		if (!(nd == 4 && valid && x->sizes[3] != 0))
			return tn__error(TN_EINVAL, "Expected 4D (batch mode) tensor expected for input with "
					 "channels_last layout with optional 0 dim batch size for input, "
					 "but got: %s", buf);
	} else if (!((nd == 3 && x->sizes[0] != 0 && valid) || (nd == 4 && valid && x->sizes[3] != 0))) {
		return tn__error(TN_EINVAL, "Expected 3D or 4D (batch mode) tensor with optional 0 dim "
				 "batch size for input, but got:%s", buf);
	}
	if (p->kW / 2 < p->padW || p->kH / 2 < p->padH)
		return tn__error(TN_EINVAL, "pad should be smaller than or equal to half of kernel size, "
				 "but got padW = %d, padH = %d, kW = %d, kH = %d", (int)p->padW,
				 (int)p->padH, (int)p->kW, (int)p->kH);
	if (p->OW < 1 || p->OH < 1)
		return tn__error(TN_EINVAL, "Given input size: (%lldx%lldx%lld). Calculated output size: "
				 "(%lldx%lldx%lld). Output size is too small", (long long)p->C,
				 (long long)p->H, (long long)p->W, (long long)p->C, (long long)p->OH,
				 (long long)p->OW);
	return 0;
}

/* The argument checks and output geometry of max_pool2d (@max) and avg_pool2d. */
static int pool_setup(bool max, const tn_tensor *x, int nk, const int64_t *k, int ns,
		      const int64_t *s, int np, const int64_t *pad, int nd, const int64_t *dil,
		      bool ceil_mode, struct pool *p, enum tn_memory_format *fmt)
{
	const char *who = max ? "max_pool2d" : "avg_pool2d";
	int rc;
	if (nk != 1 && nk != 2)
		return tn__error(TN_EINVAL, "%s: kernel_size must either be a single int, or a tuple of "
				 "two ints", who);
	p->kH = k[0];
	p->kW = nk == 1 ? k[0] : k[1];
	if (ns != 0 && ns != 1 && ns != 2)
		return tn__error(TN_EINVAL, "%s: stride must either be omitted, a single int, or a tuple "
				 "of two ints", who);
	p->dH = ns == 0 ? p->kH : s[0];
	p->dW = ns == 0 ? p->kW : ns == 1 ? p->dH : s[1];
	if (np != 1 && np != 2)
		return tn__error(TN_EINVAL, max ? "max_pool2d: padding must be either be a single int, or "
						  "a tuple of two ints"
						: "avg_pool2d: padding must either be a single int, or a "
						  "tuple of two ints");
	p->padH = pad[0];
	p->padW = np == 1 ? pad[0] : pad[1];
	p->dilH = p->dilW = 1;
	if (max) {
		if (nd != 1 && nd != 2)
			return tn__error(TN_EINVAL, "max_pool2d: dilation must be either a single int, or "
					 "a tuple of two ints");
		p->dilH = dil[0];
		p->dilW = nd == 1 ? dil[0] : dil[1];
	}
	p->ceil_mode = ceil_mode;
	*fmt = tn__suggest_memory_format(x);
	if (max) {
		if (*fmt == TN_CHANNELS_LAST && x->ndim != 4)
			return tn__error(TN_EINVAL, "non-empty 4D (batch mode) tensor expected for input "
					 "with channels_last layout");
		if (*fmt == TN_CONTIGUOUS_FORMAT && x->ndim != 3 && x->ndim != 4)
			return tn__error(TN_EINVAL, "non-empty 3D or 4D (batch mode) tensor expected for "
					 "input");
	} else {
		if (!max && p->divisor && *p->divisor == 0)
			return tn__error(TN_EINVAL, "divisor must be not zero");
		if ((rc = tn__wrap_dim(-3, x->ndim)) < 0)
			return rc;
	}
	p->N = x->ndim == 4 ? x->sizes[0] : 1;
	p->C = x->sizes[x->ndim - 3];
	p->H = x->sizes[x->ndim - 2];
	p->W = x->sizes[x->ndim - 1];
	if ((rc = pool_out_size(p->H, p->kH, p->padH, p->dH, p->dilH, ceil_mode, &p->OH)) < 0 ||
	    (rc = pool_out_size(p->W, p->kW, p->padW, p->dW, p->dilW, ceil_mode, &p->OW)) < 0)
		return rc;
	return pool_shape_check(x, p, *fmt);
}

enum pool_kind { POOL_MAX, POOL_AVG, POOL_ADAPTIVE };

struct plane_ctx {
	enum pool_kind kind;
	const struct pool *p;
	const char *x;
	char *y;
	int64_t xs[4], ys[4];
	int64_t C;
};

static inline int64_t start_index(int64_t a, int64_t b, int64_t c)
{
	return (a * c) / b;
}

static inline int64_t end_index(int64_t a, int64_t b, int64_t c)
{
	return ((a + 1) * c + b - 1) / b;
}

#define POOL_PLANES(T)                                                                        \
	static void pool_planes_##T(void *ctx, int64_t begin, int64_t end, int tid)            \
	{                                                                                     \
		const struct plane_ctx *g = ctx;                                              \
		const struct pool *p = g->p;                                                  \
		(void)tid;                                                                    \
		for (int64_t q = begin; q < end; q++) {                                       \
			int64_t n = q / g->C, c = q % g->C;                                   \
			const T *x = (const T *)g->x + n * g->xs[0] + c * g->xs[1];           \
			T *y = (T *)g->y + n * g->ys[0] + c * g->ys[1];                       \
			for (int64_t oh = 0; oh < p->OH; oh++)                                \
				for (int64_t ow = 0; ow < p->OW; ow++) {                      \
					T *o = y + oh * g->ys[2] + ow * g->ys[3];              \
					if (g->kind == POOL_MAX) {                            \
						int64_t h0 = oh * p->dH - p->padH;             \
						int64_t h1 = h0 + (p->kH - 1) * p->dilH + 1;   \
						int64_t w0 = ow * p->dW - p->padW;             \
						int64_t w1 = w0 + (p->kW - 1) * p->dilW + 1;   \
						h1 = h1 < p->H ? h1 : p->H;                    \
						w1 = w1 < p->W ? w1 : p->W;                    \
						while (h0 < 0)                                 \
							h0 += p->dilH;                         \
						while (w0 < 0)                                 \
							w0 += p->dilW;                         \
						T m = -(T)INFINITY;                            \
						for (int64_t ih = h0; ih < h1; ih += p->dilH)  \
							for (int64_t iw = w0; iw < w1; iw += p->dilW) { \
								T v = x[ih * g->xs[2] + iw * g->xs[3]]; \
								if (v > m || v != v)           \
									m = v;                 \
							}                                      \
						*o = m;                                        \
					} else if (g->kind == POOL_AVG) {                     \
						int64_t h0 = oh * p->dH - p->padH;             \
						int64_t w0 = ow * p->dW - p->padW;             \
						int64_t h1 = h0 + p->kH, w1 = w0 + p->kW;      \
						h1 = h1 < p->H + p->padH ? h1 : p->H + p->padH; \
						w1 = w1 < p->W + p->padW ? w1 : p->W + p->padW; \
						int64_t pool_size = (h1 - h0) * (w1 - w0);     \
						h0 = h0 > 0 ? h0 : 0;                          \
						w0 = w0 > 0 ? w0 : 0;                          \
						h1 = h1 < p->H ? h1 : p->H;                    \
						w1 = w1 < p->W ? w1 : p->W;                    \
						if (h0 >= h1 || w0 >= w1) {                    \
							*o = 0;                                \
							continue;                              \
						}                                              \
						int64_t div = p->divisor ? *p->divisor        \
							      : p->count_include_pad ? pool_size \
							      : (h1 - h0) * (w1 - w0);        \
						T sum = 0;                                     \
						for (int64_t ih = h0; ih < h1; ih++)           \
							for (int64_t iw = w0; iw < w1; iw++)   \
								sum += x[ih * g->xs[2] + iw * g->xs[3]]; \
						*o = sum / (T)div;                             \
					} else {                                              \
						int64_t h0 = start_index(oh, p->OH, p->H);     \
						int64_t h1 = end_index(oh, p->OH, p->H);       \
						int64_t w0 = start_index(ow, p->OW, p->W);     \
						int64_t w1 = end_index(ow, p->OW, p->W);       \
						T sum = 0;                                     \
						for (int64_t ih = h0; ih < h1; ih++)           \
							for (int64_t iw = w0; iw < w1; iw++)   \
								sum += x[ih * g->xs[2] + iw * g->xs[3]]; \
						*o = sum / (T)(h1 - h0) / (T)(w1 - w0);        \
					}                                                     \
				}                                                             \
		}                                                                             \
	}
POOL_PLANES(float)
POOL_PLANES(double)

/* Run a pool of @kind from @x (3-d or 4-d) into @y of the same rank, on the CPU: in float32
 * (float64 for float64 and integers) and converted into y. */
static int pool_run(enum pool_kind kind, const tn_tensor *x, tn_tensor *y, const struct pool *p)
{
	tn_tensor *xw = NULL, *yw = NULL, *x4 = NULL, *y4 = NULL;
	enum tn_dtype wdt = x->dtype == TN_FLOAT32 || x->dtype == TN_FLOAT16 ||
					    x->dtype == TN_BFLOAT16
				    ? TN_FLOAT32
				    : TN_FLOAT64;
	int rc;
	if (y->numel == 0)
		return 0;
	if (x->dtype == wdt)
		xw = tn_tensor_ref((tn_tensor *)x);
	else if ((rc = tn_to(x, wdt, false, false, NULL, &xw)) < 0)
		return rc;
	if (y->dtype == wdt)
		yw = tn_tensor_ref(y);
	else if ((rc = tn__empty_like_device(tn_tensor_device(y), wdt, y->ndim, y->sizes, y->strides,
					     &yw, "pool")) < 0)
		goto out;
	if (x->ndim == 3) {
		if ((rc = tn_unsqueeze(xw, 0, &x4)) < 0 || (rc = tn_unsqueeze(yw, 0, &y4)) < 0)
			goto out;
	} else {
		x4 = tn_tensor_ref(xw);
		y4 = tn_tensor_ref(yw);
	}
	struct plane_ctx g = { .kind = kind, .p = p, .x = tn__data(x4), .y = tn__data(y4), .C = p->C };
	memcpy(g.xs, x4->strides, sizeof(g.xs));
	memcpy(g.ys, y4->strides, sizeof(g.ys));
	int64_t planes = p->N * p->C, work = planes * p->OH * p->OW * p->kH * p->kW;
	int threads = work >= 32768 ? tn__num_threads() : 1;
	tn__parallel_for(planes, threads, wdt == TN_FLOAT32 ? pool_planes_float : pool_planes_double,
			 &g);
	rc = yw == y ? 0 : tn__copy(y, yw, TN_KEY_CPU, "pool");
out:
	tn_tensor_unref(xw);
	tn_tensor_unref(yw);
	tn_tensor_unref(x4);
	tn_tensor_unref(y4);
	return rc;
}

/* Checks @out (dtype, shape) for an out= form. */
static int check_out(const tn_tensor *out, const tn_tensor *x, int ndim, const int64_t *sizes)
{
	if (out->dtype != x->dtype)
		return tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s instead",
				 tn__typemeta_name(x->dtype), tn__typemeta_name(out->dtype));
	return tn__check_out_shape(out, ndim, sizes);
}

static int pool2d(bool max, const tn_tensor *self, int nk, const int64_t *k, int ns,
		  const int64_t *s, int np, const int64_t *pad, int nd, const int64_t *dil,
		  bool ceil_mode, bool count_include_pad, const int64_t *divisor, tn_tensor *out,
		  enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = max ? "max_pool2d" : "avg_pool2d";
	struct pool p = { .count_include_pad = count_include_pad, .divisor = divisor };
	enum tn_memory_format fmt = TN_CONTIGUOUS_FORMAT;
	tn_tensor *y = NULL;
	int rc = out ? tn__check_live(out, who) : tn__check_tensor_args(self, ret, who);
	if (rc < 0 || (rc = pool_setup(max, self, nk, k, ns, s, np, pad, nd, dil, ceil_mode, &p,
				       &fmt)) < 0)
		return rc;
	if (key == TN_KEY_CPU && !is_float(self->dtype) && (max || self->dtype != TN_INT64))
		return wrong_type(who, self->dtype);
	int64_t sizes[4] = { p.N, p.C, p.OH, p.OW };
	const int nd_out = self->ndim;
	const int64_t *sz = nd_out == 4 ? sizes : sizes + 1;
	if (out) {
		if ((rc = check_out(out, self, nd_out, sz)) < 0)
			return rc;
		y = tn_tensor_ref(out);
	} else if ((rc = new_result(self, nd_out, sz, nd_out == 4 ? fmt : TN_CONTIGUOUS_FORMAT, &y,
				    who)) < 0) {
		return rc;
	}
	if (tn__key_runs(key) && (rc = pool_run(max ? POOL_MAX : POOL_AVG, self, y, &p)) < 0) {
		tn_tensor_unref(y);
		return rc;
	}
	if (ret)
		*ret = y;
	else
		tn_tensor_unref(y);
	return 0;
}

static int adaptive_avg_pool2d(const tn_tensor *self, int nsize, const int64_t *size,
			       tn_tensor *out, enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = "adaptive_avg_pool2d";
	char buf[128];
	tn_tensor *y = NULL;
	int rc = out ? tn__check_live(out, who) : tn__check_tensor_args(self, ret, who);
	if (rc < 0)
		return rc;
	if (nsize != 2)
		return tn__error(TN_EINVAL, "adaptive_avg_pool2d: output_size must be 2");
	if (!out && (size[0] < 0 || size[1] < 0))
		return tn__error(TN_EINVAL, "adaptive_avg_pool2d: elements of output_size must be greater "
				 "than or equal to 0 but received {%lld, %lld}", (long long)size[0],
				 (long long)size[1]);
	if (!out && size[0] == 1 && size[1] == 1) {
		/* PyTorch computes it as a mean over the last two dims, and gives a channels-last
		 * input a channels-last result. */
		tn_tensor *m = NULL;
		if ((rc = tn_mean_dim(self, 2, (int64_t[]){ -1, -2 }, true, NULL, &m)) < 0)
			return rc;
		if (tn__suggest_memory_format(self) == TN_CHANNELS_LAST) {
			int64_t c = self->sizes[1];
			rc = tn_as_strided(m, 4, (int64_t[]){ self->sizes[0], c, 1, 1 }, 4,
					   (int64_t[]){ c, 1, c, c }, NULL, ret);
			tn_tensor_unref(m);
			return rc;
		}
		*ret = m;
		return 0;
	}
	tn__format_shape(buf, sizeof(buf), self->ndim, self->sizes);
	if (self->ndim != 3 && self->ndim != 4)
		return tn__error(TN_EINVAL, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s",
				 buf);
	for (int i = -2; i <= -1; i++)
		if (self->sizes[self->ndim + i] <= 0)
			return tn__error(TN_EINVAL, "adaptive_avg_pool2d(): Expected input to have non-zero "
					 "size for non-batch dimensions, but input has sizes %s with "
					 "dimension %d being empty", buf, self->ndim + i);
	if (out && out->dtype != self->dtype)
		return tn__error(TN_EINVAL, "expected dtype %s for `output` but got dtype %s",
				 tn__typemeta_name(self->dtype), tn__typemeta_name(out->dtype));
	struct pool p = { .N = self->ndim == 4 ? self->sizes[0] : 1, .C = self->sizes[self->ndim - 3],
			  .H = self->sizes[self->ndim - 2], .W = self->sizes[self->ndim - 1],
			  .OH = size[0], .OW = size[1], .kH = 1, .kW = 1 };
	int64_t sizes[4] = { p.N, p.C, p.OH, p.OW };
	const int64_t *sz = self->ndim == 4 ? sizes : sizes + 1;
	if (out) {
		if ((rc = tn__check_out_shape(out, self->ndim, sz)) < 0)
			return rc;
		y = tn_tensor_ref(out);
	} else if ((rc = new_result(self, self->ndim, sz,
				    self->ndim == 4 ? tn__suggest_memory_format(self)
						    : TN_CONTIGUOUS_FORMAT,
				    &y, who)) < 0) {
		return rc;
	}
	if (key == TN_KEY_CPU && y->numel > 0 && !is_float(self->dtype)) {
		tn_tensor_unref(y);
		return wrong_type(who, self->dtype);
	}
	if (tn__key_runs(key) && (rc = pool_run(POOL_ADAPTIVE, self, y, &p)) < 0) {
		tn_tensor_unref(y);
		return rc;
	}
	if (ret)
		*ret = y;
	else
		tn_tensor_unref(y);
	return 0;
}

#define POOL_KERNELS(SUFFIX, KEY)                                                             \
	int tn__max_pool2d_##SUFFIX(const tn_tensor *self, int nk, const int64_t *k, int ns,  \
				    const int64_t *s, int np, const int64_t *pad, int nd,     \
				    const int64_t *dil, bool ceil_mode, tn_tensor **ret)      \
	{                                                                                     \
		return pool2d(true, self, nk, k, ns, s, np, pad, nd, dil, ceil_mode, false, NULL, \
			      NULL, KEY, ret);                                                \
	}                                                                                     \
	int tn__avg_pool2d_##SUFFIX(const tn_tensor *self, int nk, const int64_t *k, int ns,  \
				    const int64_t *s, int np, const int64_t *pad, bool ceil_mode, \
				    bool count_include_pad, const int64_t *divisor,           \
				    tn_tensor **ret)                                          \
	{                                                                                     \
		return pool2d(false, self, nk, k, ns, s, np, pad, 0, NULL, ceil_mode,          \
			      count_include_pad, divisor, NULL, KEY, ret);                    \
	}                                                                                     \
	int tn__avg_pool2d_out_##SUFFIX(const tn_tensor *self, int nk, const int64_t *k, int ns, \
					const int64_t *s, int np, const int64_t *pad,         \
					bool ceil_mode, bool count_include_pad,               \
					const int64_t *divisor, tn_tensor *out)               \
	{                                                                                     \
		return pool2d(false, self, nk, k, ns, s, np, pad, 0, NULL, ceil_mode,          \
			      count_include_pad, divisor, out, KEY, NULL);                    \
	}                                                                                     \
	int tn__adaptive_avg_pool2d_##SUFFIX(const tn_tensor *self, int nsize,                \
					     const int64_t *size, tn_tensor **ret)            \
	{                                                                                     \
		return adaptive_avg_pool2d(self, nsize, size, NULL, KEY, ret);                \
	}                                                                                     \
	int tn__adaptive_avg_pool2d_out_##SUFFIX(const tn_tensor *self, int nsize,            \
						 const int64_t *size, tn_tensor *out)         \
	{                                                                                     \
		return adaptive_avg_pool2d(self, nsize, size, out, KEY, NULL);                \
	}

POOL_KERNELS(cpu, TN_KEY_CPU)
POOL_KERNELS(meta, TN_KEY_META)

/* ---- batch normalisation ---- */

struct bn_ctx {
	const char *x;
	char *y;
	int64_t xs[TN_MAX_DIMS], ys[TN_MAX_DIMS];
	int ndim;
	int64_t N, C, S; /* S: the elements of a plane (the dims after 1) */
	int64_t sizes[TN_MAX_DIMS];
	const void *alpha, *beta; /* per channel, in the work dtype */
};

/* Offset of element @i of plane (n, c) over the dims after 1, through @strides. */
static inline int64_t bn_offset(const struct bn_ctx *g, const int64_t *strides, int64_t i)
{
	int64_t off = 0;
	for (int d = g->ndim - 1; d >= 2; d--) {
		off += (i % g->sizes[d]) * strides[d];
		i /= g->sizes[d];
	}
	return off;
}

/* PyTorch's build contracts x * alpha + beta into one fused multiply-add for float64 (its
 * float32 kernel multiplies and adds). */
static inline float fma_float(float x, float a, float b)
{
	return x * a + b;
}

static inline double fma_double(double x, double a, double b)
{
	return fma(x, a, b);
}

/*
 * Planes (n, c) in [begin, end): the last two dims by their strides, any dims between them and
 * dim 1 (5-d and up) through bn_offset. An index division per element made this loop most of
 * an evaluation-mode batch norm's time, and a quarter of a ResNet's.
 */
#define BN_PLANES(T)                                                                          \
	static void bn_planes_##T(void *ctx, int64_t begin, int64_t end, int tid)              \
	{                                                                                     \
		const struct bn_ctx *g = ctx;                                                 \
		const int nd = g->ndim;                                                       \
		const int64_t H = nd > 3 ? g->sizes[nd - 2] : 1;                              \
		const int64_t W = nd > 2 ? g->sizes[nd - 1] : 1;                              \
		const int64_t xh = nd > 3 ? g->xs[nd - 2] : 0, xw = nd > 2 ? g->xs[nd - 1] : 0; \
		const int64_t yh = nd > 3 ? g->ys[nd - 2] : 0, yw = nd > 2 ? g->ys[nd - 1] : 0; \
		const bool unit = xw == 1 && yw == 1;                                         \
		(void)tid;                                                                    \
		for (int64_t q = begin; q < end; q++) {                                       \
			int64_t n = q / g->C, c = q % g->C;                                   \
			T a = ((const T *)g->alpha)[c], b = ((const T *)g->beta)[c];          \
			for (int64_t i = 0; i < g->S; i += H * W) {                           \
				const T *x = (const T *)g->x + n * g->xs[0] + c * g->xs[1] +  \
					     bn_offset(g, g->xs, i);                          \
				T *y = (T *)g->y + n * g->ys[0] + c * g->ys[1] +              \
				       bn_offset(g, g->ys, i);                                \
				for (int64_t h = 0; h < H; h++, x += xh, y += yh) {           \
					if (unit) {                                           \
						for (int64_t w = 0; w < W; w++)               \
							y[w] = fma_##T(x[w], a, b);            \
					} else {                                              \
						for (int64_t w = 0; w < W; w++)               \
							y[w * yw] = fma_##T(x[w * xw], a, b);  \
					}                                                     \
				}                                                             \
			}                                                                     \
		}                                                                             \
	}
BN_PLANES(float)
BN_PLANES(double)

/* Reads element @c of the 1-d @t as a double (NULL: @dflt). */
static double param_at(const tn_tensor *t, int64_t c, double dflt)
{
	if (!t)
		return dflt;
	return tn__element_to_double(t->dtype, tn__data(t) + c * t->strides[0] *
							  (int64_t)tn__itemsize(t->dtype));
}

static void param_set(tn_tensor *t, int64_t c, double v)
{
	tn__scalar_to_element(tn_scalar_double(v), t->dtype,
			      tn__data(t) + c * t->strides[0] * (int64_t)tn__itemsize(t->dtype));
}

static int check_features(const char *name, int64_t expected, const tn_tensor *t)
{
	if (t && t->numel != expected)
		return tn__error(TN_EINVAL, "%s should contain %lld elements not %lld", name,
				 (long long)expected, (long long)t->numel);
	return 0;
}

static int batch_norm(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
		      const tn_tensor *rmean, const tn_tensor *rvar, bool training, double momentum,
		      double eps, enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = "batch_norm";
	tn_tensor *y = NULL, *xw = NULL, *yw = NULL, *ab = NULL;
	int rc = tn__check_tensor_args(input, ret, who);
	if (rc < 0 || (rc = tn__wrap_dim(1, input->ndim)) < 0)
		return rc;
	const int64_t C = input->sizes[1];
	if (input->numel == 0) {
		/* PyTorch: input.clone(), times weight[0], plus bias[0]. */
		tn_tensor *out = NULL, *e = NULL, *t = NULL;
		if ((rc = tn_clone(input, TN_PRESERVE_FORMAT, &out)) < 0)
			return rc;
		const tn_tensor *ps[2] = { weight, bias };
		for (int i = 0; i < 2 && rc == 0; i++) {
			if (!ps[i])
				continue;
			if ((rc = tn_select(ps[i], 0, 0, &e)) == 0 &&
			    (rc = i == 0 ? tn_mul(out, e, &t) : tn_add(out, e, tn_scalar_int(1), &t)) == 0) {
				tn_tensor_unref(out);
				out = t;
			}
			tn_tensor_unref(e);
			e = NULL;
		}
		if (rc < 0) {
			tn_tensor_unref(out);
			return rc;
		}
		*ret = out;
		return 0;
	}
	if ((rc = check_features("running_mean", C, rmean)) < 0)
		return rc;
	if (!rmean && !training)
		return tn__error(TN_EINVAL, "running_mean must be defined in evaluation mode");
	if ((rc = check_features("running_var", C, rvar)) < 0)
		return rc;
	if (!rvar && !training)
		return tn__error(TN_EINVAL, "running_var must be defined in evaluation mode");
	if ((rc = check_features("weight", C, weight)) < 0 || (rc = check_features("bias", C, bias)) < 0)
		return rc;
	if (key == TN_KEY_CPU) {
		if (!is_float(input->dtype))
			return wrong_type(who, input->dtype);
		const tn_tensor *ps[] = { weight, bias, rmean, rvar };
		for (int i = 0; i < 4; i++)
			if (ps[i] && ps[i]->dtype != input->dtype)
				return tn__error(TN_EINVAL, "mixed dtype (CPU): expect parameter to have "
						 "scalar type of %s", tn__scalar_type_name(input->dtype));
	}
	int64_t strides[TN_MAX_DIMS];
	if ((rc = tn__format_strides(input->ndim, input->sizes,
				     input->ndim == 4 ? tn__suggest_memory_format(input)
						      : TN_CONTIGUOUS_FORMAT,
				     strides, who)) < 0 ||
	    (rc = tn__empty_like(input, input->ndim, input->sizes, strides, &y, who)) < 0)
		return rc;
	if (!tn__key_runs(key))
		goto done;
	const bool dbl = input->dtype == TN_FLOAT64;
	const size_t ws = dbl ? sizeof(double) : sizeof(float);
	if ((rc = as_float(input, &xw)) < 0 || (rc = work_like(y, &yw, who)) < 0)
		goto fail;
	char *coef = tn__malloc(2 * (size_t)C * ws);
	if (!coef) {
		rc = tn__error(TN_ENOMEM, "out of memory (batch_norm's coefficients)");
		goto fail;
	}
	const int64_t N = input->sizes[0], S = input->numel / (N * C), cnt = N * S;
	struct bn_ctx g = { .x = tn__data(xw), .y = tn__data(yw), .ndim = input->ndim, .N = N,
			    .C = C, .S = S, .alpha = coef, .beta = coef + (size_t)C * ws };
	memcpy(g.xs, xw->strides, sizeof(int64_t) * (size_t)input->ndim);
	memcpy(g.ys, yw->strides, sizeof(int64_t) * (size_t)input->ndim);
	memcpy(g.sizes, input->sizes, sizeof(int64_t) * (size_t)input->ndim);
	for (int64_t c = 0; c < C; c++) {
		double mean, invstd;
		if (training) {
			/* PyTorch's CPU statistics: sums in double, the mean rounded to the
			 * input's type, the biased variance for the normalisation and the
			 * unbiased one for the running variance. */
			double sum = 0, vs = 0;
			for (int64_t n = 0; n < N; n++)
				for (int64_t i = 0; i < S; i++)
					sum += tn__element_to_double(xw->dtype, g.x + (n * g.xs[0] + c * g.xs[1] +
										 bn_offset(&g, g.xs, i)) * (int64_t)ws);
			mean = dbl ? sum / (double)cnt : (double)(float)(sum / (double)cnt);
			for (int64_t n = 0; n < N; n++)
				for (int64_t i = 0; i < S; i++) {
					double v = tn__element_to_double(xw->dtype, g.x + (n * g.xs[0] + c * g.xs[1] +
										     bn_offset(&g, g.xs, i)) * (int64_t)ws);
					double d = dbl ? v - mean : (double)((float)v - (float)mean);
					vs += dbl ? d * d : (double)((float)d * (float)d);
				}
			invstd = 1 / sqrt(vs / (double)cnt + eps);
			if (!dbl)
				invstd = (float)invstd;
			if (rmean) {
				double m = dbl ? momentum : (float)momentum;
				double r = param_at(rmean, c, 0);
				param_set((tn_tensor *)rmean, c, dbl ? m * mean + (1 - m) * r
								     : (double)((float)m * (float)mean +
										(1 - (float)m) * (float)r));
			}
			if (rvar) {
				double m = dbl ? momentum : (float)momentum;
				double r = param_at(rvar, c, 0), unb = vs / (double)(cnt - 1);
				param_set((tn_tensor *)rvar, c, dbl ? m * unb + (1 - m) * r
								    : m * unb + (double)((1 - (float)m) * (float)r));
			}
		} else {
			mean = param_at(rmean, c, 0);
			double var = param_at(rvar, c, 0);
			invstd = dbl ? 1 / sqrt(var + eps) : (double)(1 / sqrtf((float)var + (float)eps));
		}
		double w = param_at(weight, c, 1), b = param_at(bias, c, 0);
		if (dbl) {
			double a = invstd * w;
			((double *)coef)[c] = a;
			((double *)coef)[C + c] = b - mean * a;
		} else {
			float a = (float)invstd * (float)w;
			((float *)coef)[c] = a;
			((float *)coef)[C + c] = (float)b - (float)mean * a;
		}
	}
	int64_t work = N * C * S;
	tn__parallel_for(N * C, work >= 32768 ? tn__num_threads() : 1,
			 dbl ? bn_planes_double : bn_planes_float, &g);
	tn__free(coef);
	if ((rc = store_back(y, yw)) < 0)
		goto fail;
done:
	tn_tensor_unref(xw);
	tn_tensor_unref(yw);
	tn_tensor_unref(ab);
	*ret = y;
	return 0;
fail:
	tn_tensor_unref(xw);
	tn_tensor_unref(yw);
	tn_tensor_unref(y);
	return rc;
}

int tn__batch_norm_cpu(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
		       const tn_tensor *running_mean, const tn_tensor *running_var, bool training,
		       double momentum, double eps, bool cudnn_enabled, tn_tensor **ret)
{
	(void)cudnn_enabled;
	return batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
			  TN_KEY_CPU, ret);
}

int tn__batch_norm_meta(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
			const tn_tensor *running_mean, const tn_tensor *running_var, bool training,
			double momentum, double eps, bool cudnn_enabled, tn_tensor **ret)
{
	(void)cudnn_enabled;
	return batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
			  TN_KEY_META, ret);
}
