/* SPDX-License-Identifier: MIT */
/*
 * softmax, log_softmax and layer_norm, as ATen's SoftMax.cpp and layer_norm.cpp, and
 * scaled_dot_product_attention (PyTorch 2.x's, an extension over 1.13) composed of them.
 *
 * The work is row by row (kernels/softmax_kernel.c, one variant per CPU capability): the
 * input is brought to a contiguous tensor of the compute dtype (a no-op for the usual
 * contiguous float32 input), the reduced dimension made the last one (a transpose copy when
 * it is not), the rows split over the threads, and the result written contiguous, as
 * PyTorch's. float16 and bfloat16 compute in float32 and round once (PyTorch 1.13 refuses
 * float16 on the CPU; libtensor runs it, see libtensor-linalg(7)).
 */
#include <math.h>
#include <string.h>

#include "iter.h"
#include "ops_kernels.h"
#include "parallel.h"
#include "stub.h"

/* Rows of at least this many elements in all are split over the threads. */
#define GRAIN ((int64_t)1 << 15)

static int64_t prod(const int64_t *v, int n)
{
	int64_t p = 1;
	for (int i = 0; i < n; i++)
		p *= v[i];
	return p;
}

/* @t as a contiguous tensor of @dt (a new reference: @t itself when it already is one). */
static int contiguous_as(const tn_tensor *t, enum tn_dtype dt, tn_tensor **ret, const char *who)
{
	int rc;
	if (t->dtype == dt && t->contiguous) {
		*ret = tn_tensor_ref((tn_tensor *)t);
		return 0;
	}
	if ((rc = tn__empty_like_device(t->storage->device, dt, t->ndim, t->sizes, NULL, ret, who)) < 0)
		return rc;
	if ((rc = tn__copy(*ret, t, TN_KEY_CPU, who)) < 0) {
		tn_tensor_unref(*ret);
		*ret = NULL;
	}
	return rc;
}

static enum tn_dtype compute_dtype(enum tn_dtype dt)
{
	return dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? TN_FLOAT32 : dt;
}

/* ---- softmax and log_softmax ---- */

struct rows_ctx {
	bool log;
	enum tn_dtype dt;
	enum tn_dtype dt16; /* float16/bfloat16 rows converted per row; TN_FLOAT32 otherwise */
	const char *in;
	char *out;
	int64_t n;
	/* layer_norm */
	const char *w, *b;
	double eps;
};

/* Rows of 16-bit floats up to this long are converted a row at a time on the stack. */
#define ROW16_MAX 4096

static void softmax_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	const struct rows_ctx *c = ctx;
	(void)tid;
	if (c->dt16 != TN_FLOAT32) {
		/* A 16-bit row: into float32 on the stack, the float32 kernel in place, back. */
		float row[ROW16_MAX];
		const int64_t w = (int64_t)tn__itemsize(c->dt16);
		tn__cast_fn cast = (tn__cast_fn)tn__stub_get(&tn__cast_stub);
		tn__softmax_f32_fn fn = (tn__softmax_f32_fn)tn__stub_get(&tn__softmax_f32_stub);
		for (int64_t r = begin; r < end; r++) {
			cast((char *)row, TN_FLOAT32, 4, c->in + r * c->n * w, c->dt16, w, c->n);
			fn(c->log, row, c->n, row, c->n, 1, c->n);
			cast(c->out + r * c->n * w, c->dt16, w, (const char *)row, TN_FLOAT32, 4, c->n);
		}
		return;
	}
	if (c->dt == TN_FLOAT32)
		((tn__softmax_f32_fn)tn__stub_get(&tn__softmax_f32_stub))(
			c->log, (const float *)c->in + begin * c->n, c->n,
			(float *)c->out + begin * c->n, c->n, end - begin, c->n);
	else
		((tn__softmax_f64_fn)tn__stub_get(&tn__softmax_f64_stub))(
			c->log, (const double *)c->in + begin * c->n, c->n,
			(double *)c->out + begin * c->n, c->n, end - begin, c->n);
}

/* Run @fn over @rows rows of @n elements, on the threads when there is enough work. */
static void run_rows(tn_range_fn fn, struct rows_ctx *c, int64_t rows)
{
	int threads = rows * c->n >= GRAIN ? tn__num_threads() : 1;
	tn__parallel_for(rows, threads, fn, c);
}

static int softmax_impl(bool log, const tn_tensor *self, int64_t dim, const enum tn_dtype *dtype,
			tn_tensor *out, enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = log ? "log_softmax" : "softmax";
	tn_tensor *x = NULL, *moved = NULL, *y = NULL, *dst = NULL;
	int rc, d;

	if (out ? (rc = tn__check_live(out, who)) < 0 : (rc = tn__check_tensor_args(self, ret, who)) < 0)
		return rc;
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	enum tn_dtype rt = dtype ? *dtype : self->dtype;
	bool last = self->ndim == 0 || d == self->ndim - 1;
	if (out && out->dtype != rt)
		return tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s instead",
				 tn__typemeta_name(rt), tn__typemeta_name(out->dtype));
	/* An empty input never reaches PyTorch's kernel, whatever its dtype. */
	if (key == TN_KEY_CPU && !tn__is_floating(rt) && self->numel > 0)
		/* PyTorch names log_softmax's kernel only on the last dim. */
		return tn__error(TN_EINVAL, "\"%s%s_kernel_impl\" not implemented for '%s'",
				 log && last ? "log_softmax" : "softmax", last ? "_lastdim" : "",
				 tn__scalar_type_name(rt));
	if (out) {
		if ((rc = tn__check_out_shape(out, self->ndim, self->sizes)) < 0)
			return rc;
		dst = tn_tensor_ref(out);
	} else if ((rc = tn__empty_like_device(self->storage->device, rt, self->ndim, self->sizes,
					       NULL, &dst, who)) < 0) {
		return rc;
	}
	if (!tn__key_runs(key) || self->numel == 0)
		goto done;

	/* [outer, n, inner] with the reduced dim moved last when inner > 1. */
	int64_t n = self->ndim ? self->sizes[d] : 1;
	int64_t inner = self->ndim ? prod(self->sizes + d + 1, self->ndim - d - 1) : 1;
	enum tn_dtype ct = compute_dtype(rt);
	const tn_tensor *src = self;
	/* Contiguous 16-bit rows into a contiguous output of their dtype: converted a row at a
	 * time, with no float32 copy of the whole input and output. */
	if (ct != rt && inner == 1 && self->dtype == rt && self->contiguous && dst->contiguous &&
	    n <= ROW16_MAX) {
		struct rows_ctx c = { .log = log, .dt = ct, .dt16 = rt, .in = tn__data(self),
				      .out = tn__data(dst), .n = n };
		run_rows(softmax_range, &c, self->numel / n);
		goto done;
	}
	if (inner > 1) {
		if ((rc = tn_transpose(self, d, -1, &moved)) < 0)
			goto done;
		src = moved;
	}
	if ((rc = contiguous_as(src, ct, &x, who)) < 0)
		goto done;
	/* The output rows: dst itself when it is contiguous, of the compute dtype and not
	 * transposed; a scratch tensor otherwise. */
	if (inner == 1 && dst->contiguous && dst->dtype == ct) {
		y = tn_tensor_ref(dst);
	} else if ((rc = tn__empty_like_device(x->storage->device, ct, x->ndim, x->sizes, NULL, &y,
					       who)) < 0) {
		goto done;
	}
	struct rows_ctx c = { .log = log, .dt = ct, .dt16 = TN_FLOAT32, .in = tn__data(x),
			      .out = tn__data(y), .n = n };
	run_rows(softmax_range, &c, self->numel / n);
	if (y != dst) {
		tn_tensor *back = NULL;
		if (inner > 1 && (rc = tn_transpose(y, d, -1, &back)) < 0)
			goto done;
		rc = tn__copy(dst, back ? back : y, TN_KEY_CPU, who);
		tn_tensor_unref(back);
	}
done:
	tn_tensor_unref(moved);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	if (rc == 0 && ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return rc;
}

#define SOFTMAX_KERNELS(SUFFIX, KEY)                                                          \
	int tn__softmax_##SUFFIX(const tn_tensor *self, int64_t dim, const enum tn_dtype *dtype, \
				 tn_tensor **ret)                                             \
	{                                                                                     \
		return softmax_impl(false, self, dim, dtype, NULL, KEY, ret);                 \
	}                                                                                     \
	int tn__softmax_out_##SUFFIX(const tn_tensor *self, int64_t dim,                      \
				     const enum tn_dtype *dtype, tn_tensor *out)              \
	{                                                                                     \
		return softmax_impl(false, self, dim, dtype, out, KEY, NULL);                 \
	}                                                                                     \
	int tn__log_softmax_##SUFFIX(const tn_tensor *self, int64_t dim,                      \
				     const enum tn_dtype *dtype, tn_tensor **ret)             \
	{                                                                                     \
		return softmax_impl(true, self, dim, dtype, NULL, KEY, ret);                  \
	}                                                                                     \
	int tn__log_softmax_out_##SUFFIX(const tn_tensor *self, int64_t dim,                  \
					 const enum tn_dtype *dtype, tn_tensor *out)          \
	{                                                                                     \
		return softmax_impl(true, self, dim, dtype, out, KEY, NULL);                  \
	}

SOFTMAX_KERNELS(cpu, TN_KEY_CPU)
SOFTMAX_KERNELS(meta, TN_KEY_META)

/* ---- layer_norm ---- */

static void layer_norm_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	const struct rows_ctx *c = ctx;
	(void)tid;
	if (c->dt == TN_FLOAT32)
		((tn__layer_norm_f32_fn)tn__stub_get(&tn__layer_norm_f32_stub))(
			(const float *)c->in + begin * c->n, c->n, (float *)c->out + begin * c->n,
			c->n, end - begin, c->n, (const float *)c->w, (const float *)c->b,
			(float)c->eps);
	else
		((tn__layer_norm_f64_fn)tn__stub_get(&tn__layer_norm_f64_stub))(
			(const double *)c->in + begin * c->n, c->n, (double *)c->out + begin * c->n,
			c->n, end - begin, c->n, (const double *)c->w, (const double *)c->b,
			c->eps);
}

static int affine_check(const char *what, const tn_tensor *t, int nshape, const int64_t *shape)
{
	char a[256], b[256];
	if (!t || (t->ndim == nshape && !memcmp(t->sizes, shape, sizeof(int64_t) * (size_t)nshape)))
		return 0;
	tn__format_shape(a, sizeof(a), t->ndim, t->sizes);
	tn__format_shape(b, sizeof(b), nshape, shape);
	return tn__error(TN_EINVAL, "Expected %s to be of same shape as normalized_shape, but got %s "
			 "of shape %s and normalized_shape = %s", what, what, a, b);
}

static int layer_norm_impl(const tn_tensor *input, int nshape, const int64_t *shape,
			   const tn_tensor *weight, const tn_tensor *bias, double eps,
			   enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = "layer_norm";
	char a[256], b[256];
	tn_tensor *x = NULL, *y = NULL, *w = NULL, *bb = NULL, *dst = NULL;
	int rc;

	if ((rc = tn__check_tensor_args(input, ret, who)) < 0)
		return rc;
	if (nshape < 1)
		return tn__error(TN_EINVAL, "Expected normalized_shape to be at least 1-dimensional, "
				 "i.e., containing at least one element, but got normalized_shape = []");
	if ((rc = affine_check("weight", weight, nshape, shape)) < 0 ||
	    (rc = affine_check("bias", bias, nshape, shape)) < 0)
		return rc;
	if (input->ndim < nshape ||
	    memcmp(input->sizes + input->ndim - nshape, shape, sizeof(int64_t) * (size_t)nshape)) {
		/* "[*, 5]": the normalized shape after a star. */
		int pos = snprintf(a, sizeof(a), "[*");
		for (int i = 0; i < nshape && pos < (int)sizeof(a); i++)
			pos += snprintf(a + pos, sizeof(a) - (size_t)pos, ", %lld", (long long)shape[i]);
		if (pos < (int)sizeof(a))
			snprintf(a + pos, sizeof(a) - (size_t)pos, "]");
		char s[256];
		tn__format_shape(s, sizeof(s), nshape, shape);
		tn__format_shape(b, sizeof(b), input->ndim, input->sizes);
		return tn__error(TN_EINVAL, "Given normalized_shape=%s, expected input with shape %s, "
				 "but got input of size%s", s, a, b);
	}
	const tn_tensor *affine[2] = { weight, bias };
	for (int i = 0; i < 2; i++)
		if (affine[i] && affine[i]->dtype != input->dtype)
			return tn__error(TN_EINVAL, "expected scalar type %s but found %s",
					 tn__scalar_type_name(input->dtype),
					 tn__scalar_type_name(affine[i]->dtype));
	if (key == TN_KEY_CPU && !tn__is_floating(input->dtype))
		return tn__error(TN_EINVAL, "\"LayerNormKernelImpl\" not implemented for '%s'",
				 tn__scalar_type_name(input->dtype));
	if ((rc = tn__empty_like_device(input->storage->device, input->dtype, input->ndim,
					input->sizes, NULL, &dst, who)) < 0)
		return rc;
	if (!tn__key_runs(key) || input->numel == 0)
		goto done;
	enum tn_dtype ct = compute_dtype(input->dtype);
	int64_t n = prod(shape, nshape);
	if ((rc = contiguous_as(input, ct, &x, who)) < 0 ||
	    (weight && (rc = contiguous_as(weight, ct, &w, who)) < 0) ||
	    (bias && (rc = contiguous_as(bias, ct, &bb, who)) < 0))
		goto done;
	if (dst->dtype == ct)
		y = tn_tensor_ref(dst);
	else if ((rc = tn__empty_like_device(x->storage->device, ct, x->ndim, x->sizes, NULL, &y,
					     who)) < 0)
		goto done;
	struct rows_ctx c = { .dt = ct, .in = tn__data(x), .out = tn__data(y), .n = n,
			      .w = w ? tn__data(w) : NULL, .b = bb ? tn__data(bb) : NULL,
			      .eps = eps };
	run_rows(layer_norm_range, &c, input->numel / n);
	if (y != dst)
		rc = tn__copy(dst, y, TN_KEY_CPU, who);
done:
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	tn_tensor_unref(w);
	tn_tensor_unref(bb);
	if (rc == 0)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return rc;
}

int tn__layer_norm_cpu(const tn_tensor *input, int nshape, const int64_t *normalized_shape,
		       const tn_tensor *weight, const tn_tensor *bias, double eps,
		       bool cudnn_enable, tn_tensor **ret)
{
	(void)cudnn_enable;
	return layer_norm_impl(input, nshape, normalized_shape, weight, bias, eps, TN_KEY_CPU, ret);
}

int tn__layer_norm_meta(const tn_tensor *input, int nshape, const int64_t *normalized_shape,
			const tn_tensor *weight, const tn_tensor *bias, double eps,
			bool cudnn_enable, tn_tensor **ret)
{
	(void)cudnn_enable;
	return layer_norm_impl(input, nshape, normalized_shape, weight, bias, eps, TN_KEY_META, ret);
}

/* ---- scaled_dot_product_attention (PyTorch 2.x, composed as its math reference) ---- */

/* -inf above the diagonal of each trailing [L, S] matrix of the contiguous @t (top-left
 * aligned: key j is masked for query i when j > i, as PyTorch 2.x's is_causal). */
static int causal_fill(tn_tensor *t)
{
	unsigned char minf[8];
	int rc = tn__scalar_to_element(tn_scalar_double(-INFINITY), t->dtype, minf);
	if (rc < 0)
		return rc;
	size_t isz = tn__itemsize(t->dtype);
	int64_t L = t->sizes[t->ndim - 2], S = t->sizes[t->ndim - 1];
	if (L == 0 || S == 0)
		return 0;
	int64_t mats = t->numel / (L * S);
	char *p = tn__data(t);
	for (int64_t m = 0; m < mats; m++)
		for (int64_t i = 0; i < L; i++)
			for (int64_t j = i + 1; j < S; j++)
				memcpy(p + ((m * L + i) * S + j) * (int64_t)isz, minf, isz);
	return 0;
}

int tn__scaled_dot_product_attention(const tn_tensor *query, const tn_tensor *key,
				     const tn_tensor *value, const tn_tensor *attn_mask,
				     double dropout_p, bool is_causal, const double *scale,
				     tn_tensor **ret)
{
	const char *who = "scaled_dot_product_attention";
	tn_tensor *kt = NULL, *raw = NULL, *scores = NULL, *masked = NULL, *attn = NULL;
	tn_tensor *dropped = NULL;
	int rc;

	if ((rc = tn__check_tensor_args(query, ret, who)) < 0)
		return rc;
	if (query->ndim < 2 || key->ndim < 2 || value->ndim < 2)
		return tn__error(TN_EINVAL, "scaled_dot_product_attention: query, key and value "
				 "must have at least 2 dimensions, got %dD, %dD and %dD",
				 query->ndim, key->ndim, value->ndim);
	if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
		return tn__error(TN_EINVAL, "dropout probability has to be between 0 and 1, but got %g",
				 dropout_p);
	if (is_causal && attn_mask)
		return tn__error(TN_EINVAL, "_scaled_dot_product_attention: Explicit attn_mask "
				 "should not be set when is_causal=True");
	if (key->sizes[key->ndim - 1] != query->sizes[query->ndim - 1] ||
	    key->sizes[key->ndim - 2] != value->sizes[value->ndim - 2])
		return tn__error(TN_EINVAL, "scaled_dot_product_attention: expected key of size "
				 "[..., S, %lld] and value of size [..., S, Ev] for query of size "
				 "[..., L, %lld], got key [..., %lld, %lld] and value [..., %lld, %lld]",
				 (long long)query->sizes[query->ndim - 1],
				 (long long)query->sizes[query->ndim - 1],
				 (long long)key->sizes[key->ndim - 2],
				 (long long)key->sizes[key->ndim - 1],
				 (long long)value->sizes[value->ndim - 2],
				 (long long)value->sizes[value->ndim - 1]);
	double s = scale ? *scale : 1.0 / sqrt((double)query->sizes[query->ndim - 1]);
	if ((rc = tn_transpose(key, -2, -1, &kt)) < 0 || (rc = tn_matmul(query, kt, &raw)) < 0 ||
	    (rc = tn_mul_scalar(raw, tn_scalar_double(s), &scores)) < 0)
		goto out;
	/* scores is a new contiguous tensor; on Meta it has no data to mask. */
	if (is_causal && scores->storage->data && (rc = causal_fill(scores)) < 0)
		goto out;
	if (attn_mask) {
		if (attn_mask->dtype == TN_BOOL)
			rc = tn_where_scalar_other(attn_mask, scores, tn_scalar_double(-INFINITY), &masked);
		else
			rc = tn_add(scores, attn_mask, tn_scalar_int(1), &masked);
		if (rc < 0)
			goto out;
	}
	if ((rc = tn_softmax(masked ? masked : scores, -1, NULL, &attn)) < 0)
		goto out;
	/* PyTorch 2.x's math path: torch.dropout(attn, dropout_p, train=True), the default
	 * generator's mask, when dropout_p > 0. */
	if (dropout_p > 0.0 && (rc = tn_dropout(attn, dropout_p, true, &dropped)) < 0)
		goto out;
	rc = tn_matmul(dropped ? dropped : attn, value, ret);
out:
	tn_tensor_unref(kt);
	tn_tensor_unref(raw);
	tn_tensor_unref(scores);
	tn_tensor_unref(masked);
	tn_tensor_unref(attn);
	tn_tensor_unref(dropped);
	return rc;
}
