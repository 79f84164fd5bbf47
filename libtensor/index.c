/* SPDX-License-Identifier: MIT */
/*
 * Indexing by tensors, as ATen's TensorAdvancedIndexing.cpp, Embedding.cpp and the nonzero of
 * TensorCompare.cpp: index_select and gather (functional and out=), embedding (index_select of
 * weight's rows, reshaped), nonzero (functional and out=) and where(condition) (nonzero's
 * columns).
 *
 * Every index is read and checked against its dimension before any element is copied, so an
 * index out of range fails with PyTorch's message (TN_ERANGE) and never reads outside the
 * storage. Rows of the result are split over threads (tn__parallel_for) when there are many;
 * a contiguous row moves with one memcpy. The elements move as bytes: these operators never
 * convert a dtype.
 *
 * nonzero has no Meta kernel: the size of its result depends on the data (PyTorch 1.13 has
 * none either, and says so with the same message).
 */
#include <string.h>

#include "iter.h"
#include "ops_kernels.h"
#include "parallel.h"

#define SHAPE_BUF 256
/* Below this many bytes copied, one thread. */
#define PARALLEL_BYTES (1 << 16)

/* The index tensor's values as int64, in its logical (row-major) order, in a new array. */
static int read_indices(const tn_tensor *index, int64_t **ret, const char *who)
{
	int64_t n = index->numel, idx[TN_MAX_DIMS] = { 0 };
	int64_t *v = tn__malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
	if (!v)
		return tn__error(TN_ENOMEM, "%s: out of memory", who);
	const char *base = tn__data(index);
	for (int64_t i = 0; i < n; i++) {
		int64_t off = 0;
		for (int d = 0; d < index->ndim; d++)
			off += idx[d] * index->strides[d];
		v[i] = index->dtype == TN_INT64 ? ((const int64_t *)base)[off]
						: ((const int32_t *)base)[off];
		for (int d = index->ndim - 1; d >= 0; d--) {
			if (++idx[d] < index->sizes[d])
				break;
			idx[d] = 0;
		}
	}
	*ret = v;
	return 0;
}

/* The element offset of flat position @pos of the first @n dims of @sizes with @strides. */
static int64_t unravel(int64_t pos, int n, const int64_t *sizes, const int64_t *strides)
{
	int64_t off = 0;
	for (int d = n - 1; d >= 0; d--) {
		off += (pos % sizes[d]) * strides[d];
		pos /= sizes[d];
	}
	return off;
}

/* Copy a block of @n dims (@sizes) between strided layouts, element by element or, when both
 * are dense row-major, with one memcpy. */
static void copy_block(char *dst, const int64_t *ds, const char *src, const int64_t *ss, int n,
		       const int64_t *sizes, int64_t count, size_t isz, bool dense)
{
	if (dense) {
		memcpy(dst, src, (size_t)count * isz);
		return;
	}
	for (int64_t e = 0; e < count; e++) {
		int64_t so = unravel(e, n, sizes, ss), dof = unravel(e, n, sizes, ds);
		memcpy(dst + dof * (int64_t)isz, src + so * (int64_t)isz, isz);
	}
}

/* Whether dims [@from, ndim) of @t are row-major dense. */
static bool dense_from(const tn_tensor *t, int from)
{
	int64_t expect = 1;
	for (int d = t->ndim - 1; d >= from; d--) {
		if (t->sizes[d] != 1 && t->strides[d] != expect)
			return false;
		expect *= t->sizes[d];
	}
	return true;
}

/* ---- index_select ---- */

struct isel_ctx {
	const tn_tensor *self, *dst;
	const int64_t *idx;
	int64_t n, inner;
	int d;
	size_t isz;
	bool dense;
};

static void isel_range(void *vctx, int64_t begin, int64_t end, int tid)
{
	const struct isel_ctx *c = vctx;
	const tn_tensor *s = c->self, *o = c->dst;
	const int d = c->d;
	(void)tid;
	for (int64_t r = begin; r < end; r++) {
		int64_t outer = r / c->n, i = r % c->n;
		int64_t so = unravel(outer, d, s->sizes, s->strides) + c->idx[i] * s->strides[d];
		int64_t dof = unravel(outer, d, o->sizes, o->strides) + i * o->strides[d];
		copy_block(tn__data(o) + dof * (int64_t)c->isz, o->strides + d + 1,
			   tn__data(s) + so * (int64_t)c->isz, s->strides + d + 1, s->ndim - d - 1,
			   s->sizes + d + 1, c->inner, c->isz, c->dense);
	}
}

static int index_select_impl(const tn_tensor *self, int64_t dim, const tn_tensor *index,
			     tn_tensor *out, enum tn_dispatch_key key, tn_tensor **ret)
{
	int64_t sizes[TN_MAX_DIMS], *idx = NULL;
	tn_tensor *dst = NULL;
	int rc, d;

	if (out && (rc = tn__check_live(out, "index_select")) < 0)
		return rc;
	if ((rc = tn__check_tensor_args(self, out ? (void *)out : (void *)ret, "index_select")) < 0 ||
	    (rc = tn__check_live(index, "index_select")) < 0)
		return rc;
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	const int64_t numel = index->numel;
	if (index->ndim > 1)
		return tn__error(TN_ERANGE, "index_select(): Index is supposed to be a vector");
	if (index->dtype != TN_INT64 && index->dtype != TN_INT32)
		return tn__error(TN_EINVAL, "index_select(): Expected dtype int32 or int64 for index");
	if (out) {
		if (out->dtype != self->dtype)
			return tn__error(TN_EINVAL,
					 "index_select(): self and result must have the same scalar type");
		if ((rc = tn__check_internal_overlap(out)) < 0 ||
		    (rc = tn__check_no_overlap(out, self)) < 0 ||
		    (rc = tn__check_no_overlap(out, index)) < 0)
			return rc;
	}
	memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
	if (self->ndim > 0)
		sizes[d] = numel;
	if (out) {
		if ((rc = tn__check_out_shape(out, self->ndim, sizes)) < 0)
			return rc;
		dst = tn_tensor_ref(out);
	} else if ((rc = tn__empty_like(self, self->ndim, sizes, NULL, &dst, "index_select")) < 0) {
		return rc;
	}
	if (!tn__key_runs(key) || numel == 0)
		goto done;
	if ((rc = read_indices(index, &idx, "index_select")) < 0)
		goto fail;
	/* PyTorch's bounds: the size of dim, or for 0-d and 1-d self its element count. */
	int64_t bound = self->ndim > 1 ? self->sizes[d] : self->numel;
	if (self->ndim > 1 && self->numel == 0 && self->sizes[d] == 0) {
		rc = tn__error(TN_ERANGE, "index_select(): self indexing axis dim should be positive");
		goto fail;
	}
	for (int64_t i = 0; i < numel; i++) {
		if (idx[i] < 0 || idx[i] >= bound) {
			rc = tn__error(TN_ERANGE, "index out of range in self");
			goto fail;
		}
	}
	if (dst->numel > 0) {
		struct isel_ctx c = { self, dst, idx, numel, 1, self->ndim ? d : 0,
				      tn__itemsize(self->dtype), false };
		if (self->ndim == 0) {
			memcpy(tn__data(dst), tn__data(self), c.isz);
			goto done;
		}
		for (int k = d + 1; k < self->ndim; k++)
			c.inner *= self->sizes[k];
		c.dense = dense_from(self, d + 1) && dense_from(dst, d + 1);
		int64_t rows = dst->numel / c.inner;
		int threads = dst->numel * (int64_t)c.isz >= PARALLEL_BYTES ? tn__num_threads() : 1;
		tn__parallel_for(rows, threads, isel_range, &c);
	}
done:
	tn__free(idx);
	if (ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return 0;
fail:
	tn__free(idx);
	tn_tensor_unref(dst);
	return rc;
}

/* ---- gather ---- */

struct gather_ctx {
	const tn_tensor *self, *index, *dst;
	int d, n;
	int64_t last; /* the size of the index's last dim (1 for 0-d) */
	size_t isz;
};

static void gather_range(void *vctx, int64_t begin, int64_t end, int tid)
{
	const struct gather_ctx *c = vctx;
	const tn_tensor *s = c->self, *ix = c->index, *o = c->dst;
	const int n = c->n;
	(void)tid;
	for (int64_t r = begin; r < end; r++) {
		int64_t coord[TN_MAX_DIMS], pos = r;
		for (int k = n - 2; k >= 0; k--) {
			coord[k] = pos % ix->sizes[k];
			pos /= ix->sizes[k];
		}
		for (int64_t j = 0; j < c->last; j++) {
			int64_t io = 0, so = 0, dof = 0;
			if (n > 0)
				coord[n - 1] = j;
			for (int k = 0; k < n; k++) {
				io += coord[k] * ix->strides[k];
				dof += coord[k] * o->strides[k];
				if (k != c->d)
					so += coord[k] * s->strides[k];
			}
			int64_t v = ((const int64_t *)tn__data(ix))[io];
			if (s->ndim > 0)
				so += v * s->strides[c->d];
			memcpy(tn__data(o) + dof * (int64_t)c->isz, tn__data(s) + so * (int64_t)c->isz,
			       c->isz);
		}
	}
}

static int gather_impl(const tn_tensor *self, int64_t dim, const tn_tensor *index,
		       tn_tensor *out, enum tn_dispatch_key key, tn_tensor **ret)
{
	char a[SHAPE_BUF], b[SHAPE_BUF];
	int64_t *idx = NULL;
	tn_tensor *dst = NULL;
	int rc, d;

	if (out && (rc = tn__check_live(out, "gather")) < 0)
		return rc;
	if ((rc = tn__check_tensor_args(self, out ? (void *)out : (void *)ret, "gather")) < 0 ||
	    (rc = tn__check_live(index, "gather")) < 0)
		return rc;
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	if (out && ((rc = tn__check_internal_overlap(out)) < 0 ||
		    (rc = tn__check_no_overlap(out, self)) < 0 ||
		    (rc = tn__check_no_overlap(out, index)) < 0))
		return rc;
	if (index->numel != 0 && index->dtype != TN_INT64)
		return tn__error(TN_EINVAL, "gather(): Expected dtype int64 for index");
	if (out) {
		if (out->dtype != self->dtype)
			return tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s "
					 "instead", tn__typemeta_name(self->dtype),
					 tn__typemeta_name(out->dtype));
		if ((rc = tn__check_out_shape(out, index->ndim, index->sizes)) < 0)
			return rc;
	}
	if (index->numel != 0) {
		int sd = self->ndim ? self->ndim : 1, id = index->ndim ? index->ndim : 1;
		if (sd != id)
			return tn__error(TN_EINVAL, "Index tensor must have the same number of "
					 "dimensions as input tensor");
		for (int k = 0; k < self->ndim; k++) {
			if (k == d || index->sizes[k] <= self->sizes[k])
				continue;
			tn__format_shape(a, sizeof(a), index->ndim, index->sizes);
			tn__format_shape(b, sizeof(b), self->ndim, self->sizes);
			return tn__error(TN_EINVAL,
					 "Size does not match at dimension %d expected index %s to be "
					 "smaller than self %s apart from dimension %d", k, a, b, d);
		}
	}
	if (out)
		dst = tn_tensor_ref(out);
	else if ((rc = tn__empty_like(self, index->ndim, index->sizes, NULL, &dst, "gather")) < 0)
		return rc;
	if (!tn__key_runs(key) || index->numel == 0)
		goto done;
	if ((rc = read_indices(index, &idx, "gather")) < 0)
		goto fail;
	int64_t bound = self->ndim ? self->sizes[d] : 1;
	for (int64_t i = 0; i < index->numel; i++) {
		if (idx[i] < 0 || idx[i] >= bound) {
			rc = tn__error(TN_ERANGE, "index %lld is out of bounds for dimension %d with "
				       "size %lld", (long long)idx[i], d, (long long)bound);
			goto fail;
		}
	}
	{
		struct gather_ctx c = { self, index, dst, d, index->ndim,
					index->ndim ? index->sizes[index->ndim - 1] : 1,
					tn__itemsize(self->dtype) };
		int64_t rows = index->numel / c.last;
		int threads = index->numel >= 32768 ? tn__num_threads() : 1;
		tn__parallel_for(rows, threads, gather_range, &c);
	}
done:
	tn__free(idx);
	if (ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return 0;
fail:
	tn__free(idx);
	tn_tensor_unref(dst);
	return rc;
}

#define INDEX_KERNELS(SUFFIX, KEY)                                                            \
	int tn__index_select_##SUFFIX(const tn_tensor *self, int64_t dim, const tn_tensor *index, \
				      tn_tensor **ret_tensor)                                 \
	{                                                                                     \
		return index_select_impl(self, dim, index, NULL, KEY, ret_tensor);            \
	}                                                                                     \
	int tn__index_select_out_##SUFFIX(const tn_tensor *self, int64_t dim,                 \
					  const tn_tensor *index, tn_tensor *out)             \
	{                                                                                     \
		return index_select_impl(self, dim, index, out, KEY, NULL);                   \
	}                                                                                     \
	int tn__gather_##SUFFIX(const tn_tensor *self, int64_t dim, const tn_tensor *index,   \
				bool sparse_grad, tn_tensor **ret_tensor)                     \
	{                                                                                     \
		(void)sparse_grad;                                                            \
		return gather_impl(self, dim, index, NULL, KEY, ret_tensor);                  \
	}                                                                                     \
	int tn__gather_out_##SUFFIX(const tn_tensor *self, int64_t dim, const tn_tensor *index, \
				    bool sparse_grad, tn_tensor *out)                         \
	{                                                                                     \
		(void)sparse_grad;                                                            \
		return gather_impl(self, dim, index, out, KEY, NULL);                         \
	}

INDEX_KERNELS(cpu, TN_KEY_CPU)
INDEX_KERNELS(meta, TN_KEY_META)

/* ---- embedding (device-generic: index_select of weight's rows) ---- */

static const char *legacy_type_name(enum tn_dtype dtype)
{
	static const char *const names[TN_NUM_DTYPES] = {
		[TN_BOOL] = "torch.BoolTensor",	    [TN_UINT8] = "torch.ByteTensor",
		[TN_INT8] = "torch.CharTensor",	    [TN_INT16] = "torch.ShortTensor",
		[TN_INT32] = "torch.IntTensor",	    [TN_INT64] = "torch.LongTensor",
		[TN_FLOAT16] = "torch.HalfTensor",  [TN_BFLOAT16] = "torch.BFloat16Tensor",
		[TN_FLOAT32] = "torch.FloatTensor", [TN_FLOAT64] = "torch.DoubleTensor",
	};
	return (unsigned)dtype < TN_NUM_DTYPES ? names[dtype] : "?";
}

int tn__embedding(const tn_tensor *weight, const tn_tensor *indices, int64_t padding_idx,
		  bool scale_grad_by_freq, bool sparse, tn_tensor **ret_tensor)
{
	int64_t size[TN_MAX_DIMS + 1];
	tn_tensor *flat = NULL, *r = NULL;
	int rc;
	(void)padding_idx, (void)scale_grad_by_freq, (void)sparse; /* gradient-only */
	if ((rc = tn__check_tensor_args(weight, ret_tensor, "embedding")) < 0 ||
	    (rc = tn__check_live(indices, "embedding")) < 0)
		return rc;
	if (weight->ndim != 2)
		return tn__error(TN_EINVAL, "'weight' must be 2-D");
	if (indices->dtype != TN_INT64 && indices->dtype != TN_INT32)
		return tn__error(TN_EINVAL,
				 "Expected tensor for argument #1 'indices' to have one of the "
				 "following scalar types: Long, Int; but got %s instead (while checking "
				 "arguments for embedding)", legacy_type_name(indices->dtype));
	if (indices->ndim == 1)
		return tn_index_select(weight, 0, indices, ret_tensor);
	if (indices->ndim + 1 > TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "embedding: the result would have more than %d "
				 "dimensions", TN_MAX_DIMS);
	memcpy(size, indices->sizes, sizeof(int64_t) * (size_t)indices->ndim);
	size[indices->ndim] = weight->sizes[1];
	if ((rc = tn_reshape(indices, 1, (int64_t[]){ -1 }, &flat)) == 0 &&
	    (rc = tn_index_select(weight, 0, flat, &r)) == 0)
		rc = tn_view(r, indices->ndim + 1, size, ret_tensor);
	tn_tensor_unref(flat);
	tn_tensor_unref(r);
	return rc;
}

/* ---- nonzero, where(condition) ---- */

static bool elem_nonzero(enum tn_dtype dt, const char *p)
{
	switch (dt) {
	case TN_BOOL:
	case TN_UINT8:
	case TN_INT8:
		return *(const uint8_t *)p != 0;
	case TN_INT16:
		return *(const int16_t *)p != 0;
	case TN_INT32:
		return *(const int32_t *)p != 0;
	case TN_INT64:
		return *(const int64_t *)p != 0;
	default:
		/* Floating: -0.0 is zero, NaN is not. */
		return tn__element_to_double(dt, p) != 0;
	}
}

static int nonzero_impl(const tn_tensor *self, tn_tensor *out, tn_tensor **ret)
{
	int64_t idx[TN_MAX_DIMS] = { 0 }, count = 0;
	const int nd = self->ndim;
	tn_tensor *dst = NULL;
	int rc;

	if (out && (rc = tn__check_live(out, "nonzero")) < 0)
		return rc;
	if ((rc = tn__check_tensor_args(self, out ? (void *)out : (void *)ret, "nonzero")) < 0)
		return rc;
	if (out) {
		if (out->dtype != TN_INT64)
			return tn__error(TN_EINVAL, "nonzero: Expected out tensor to have scalar type "
					 "Long but got scalar type%s", tn__scalar_type_name(out->dtype));
		if ((rc = tn__check_internal_overlap(out)) < 0 ||
		    (rc = tn__check_no_overlap(out, self)) < 0)
			return rc;
	}
	const size_t isz = tn__itemsize(self->dtype);
	const char *base = tn__data(self);
	for (int64_t i = 0; i < self->numel; i++) {
		int64_t off = 0;
		for (int d = 0; d < nd; d++)
			off += idx[d] * self->strides[d];
		count += elem_nonzero(self->dtype, base + off * (int64_t)isz);
		for (int d = nd - 1; d >= 0; d--) {
			if (++idx[d] < self->sizes[d])
				break;
			idx[d] = 0;
		}
	}
	int64_t sizes[2] = { count, nd };
	if (out) {
		if ((rc = tn__check_out_shape(out, 2, sizes)) < 0)
			return rc;
		dst = tn_tensor_ref(out);
	} else {
		/* PyTorch's layout: column-major, strides (1, count). */
		int64_t strides[2] = { 1, count };
		if ((rc = tn__empty_like_device(self->storage->device, TN_INT64, 2, sizes, strides,
						&dst, "nonzero")) < 0)
			return rc;
	}
	int64_t *o = (int64_t *)tn__data(dst), row = 0;
	memset(idx, 0, sizeof(idx));
	for (int64_t i = 0; i < self->numel && count; i++) {
		int64_t off = 0;
		for (int d = 0; d < nd; d++)
			off += idx[d] * self->strides[d];
		if (elem_nonzero(self->dtype, base + off * (int64_t)isz)) {
			for (int d = 0; d < nd; d++)
				o[row * dst->strides[0] + d * dst->strides[1]] = idx[d];
			row++;
		}
		for (int d = nd - 1; d >= 0; d--) {
			if (++idx[d] < self->sizes[d])
				break;
			idx[d] = 0;
		}
	}
	if (ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return 0;
}

int tn__nonzero_cpu(const tn_tensor *self, tn_tensor **ret_tensor)
{
	return nonzero_impl(self, NULL, ret_tensor);
}

int tn__nonzero_out_cpu(const tn_tensor *self, tn_tensor *out)
{
	return nonzero_impl(self, out, NULL);
}

int tn__where_condition(const tn_tensor *condition, int *ret_n, tn_tensor ***ret_tensors)
{
	tn_tensor *nz = NULL;
	int rc;
	if (!ret_n || !ret_tensors)
		return tn__error(TN_EINVAL, "where: NULL %s", ret_n ? "ret_tensors" : "ret_n");
	if ((rc = tn__check_tensor_args(condition, ret_tensors, "where")) < 0)
		return rc;
	/* PyTorch's nonzero_numpy: a 0-dim condition as a 1-element vector (numpy's rule). */
	if (condition->ndim == 0) {
		tn_tensor *u = NULL;
		if ((rc = tn_unsqueeze(condition, 0, &u)) == 0)
			rc = tn_nonzero(u, &nz);
		tn_tensor_unref(u);
	} else {
		rc = tn_nonzero(condition, &nz);
	}
	if (rc < 0)
		return rc;
	rc = tn_unbind(nz, 1, ret_n, ret_tensors);
	tn_tensor_unref(nz);
	return rc;
}
