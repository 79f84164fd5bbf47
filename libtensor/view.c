/* SPDX-License-Identifier: MIT */
/*
 * Views: new tensors over the same storage with other sizes, strides or offset.
 *
 * Each function computes the new geometry with PyTorch's rules and error wording and hands it
 * to tn__tensor_make, which checks it against the storage once more, so a view can never reach
 * outside the bytes it shares.
 */
#include <string.h>

#include "internal.h"
#include "ops_kernels.h"

#define SHAPE_BUF 256

/* a * b, or @fallback when that overflows (used for strides of size-1 dims, never read). */
static int64_t mul_or(int64_t a, int64_t b, int64_t fallback)
{
	int64_t r;
	return __builtin_mul_overflow(a, b, &r) ? fallback : r;
}

#define check_in tn__check_tensor_args

static int make_view(const tn_tensor *t, int64_t offset, int ndim, const int64_t *sizes,
		     const int64_t *strides, tn_tensor **ret)
{
	return tn__tensor_make(t->storage, offset, ndim, sizes, strides, t->dtype, ret);
}

/* The legacy type name PyTorch prints a tensor's type with ("torch.FloatTensor"). */
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

static int check_shape_arg(int ndim, const int64_t *shape, const char *who)
{
	if (ndim < 0 || ndim > TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "%s: number of dimensions %d is outside [0, %d]", who,
				 ndim, TN_MAX_DIMS);
	if (ndim && !shape)
		return tn__error(TN_EINVAL, "%s: NULL shape for %d dimensions", who, ndim);
	return 0;
}

/* PyTorch's infer_size: resolve one -1 entry against @numel. */
static int infer_size(int ndim, const int64_t *shape, int64_t numel, int64_t *out)
{
	char buf[SHAPE_BUF];
	int64_t newsize = 1;
	int infer = -1;
	bool overflow = false;

	for (int d = 0; d < ndim; d++) {
		out[d] = shape[d];
		if (shape[d] == -1) {
			if (infer >= 0)
				return tn__error(TN_EINVAL, "only one dimension can be inferred");
			infer = d;
		} else if (shape[d] >= 0) {
			overflow |= __builtin_mul_overflow(newsize, shape[d], &newsize);
		} else {
			return tn__error(TN_EINVAL, "invalid shape dimension %lld", (long long)shape[d]);
		}
	}
	if (!overflow && (numel == newsize || (infer >= 0 && newsize > 0 && numel % newsize == 0))) {
		if (infer >= 0) {
			if (newsize == 0) {
				tn__format_shape(buf, sizeof(buf), ndim, shape);
				return tn__error(TN_EINVAL,
						 "cannot reshape tensor of 0 elements into shape %s "
						 "because the unspecified dimension size -1 can be any "
						 "value and is ambiguous",
						 buf);
			}
			out[infer] = numel / newsize;
		}
		return 0;
	}
	tn__format_shape(buf, sizeof(buf), ndim, shape);
	return tn__error(TN_EINVAL, "shape '%s' is invalid for input of size %lld", buf,
			 (long long)numel);
}

/* PyTorch's computeStride (TensorUtils.cpp): strides that express @newshape over the memory of
 * (@oldshape, @oldstride), or false when a dimension would span two non-contiguous chunks. */
static bool compute_stride(int oldn, const int64_t *oldshape, const int64_t *oldstride,
			   int64_t numel, int newn, const int64_t *newshape, int64_t *newstride)
{
	if (oldn == 0) {
		for (int d = 0; d < newn; d++)
			newstride[d] = 1;
		return true;
	}
	if (numel == 0) {
		if (oldn == newn && memcmp(oldshape, newshape, (size_t)oldn * sizeof(int64_t)) == 0) {
			memcpy(newstride, oldstride, (size_t)oldn * sizeof(int64_t));
			return true;
		}
		for (int d = newn - 1; d >= 0; d--) {
			if (d == newn - 1)
				newstride[d] = 1;
			else
				newstride[d] = (newshape[d + 1] > 1 ? newshape[d + 1] : 1) *
					       newstride[d + 1];
		}
		return true;
	}
	int view_d = newn - 1;
	int64_t chunk_base_stride = oldstride[oldn - 1];
	int64_t tensor_numel = 1, view_numel = 1;
	for (int tensor_d = oldn - 1; tensor_d >= 0; tensor_d--) {
		int64_t span;
		tensor_numel *= oldshape[tensor_d]; /* a partial product of numel: no overflow */
		/* An overflowing product cannot equal a real stride: the chunk ends there. */
		bool span_overflow = __builtin_mul_overflow(tensor_numel, chunk_base_stride, &span);
		if (tensor_d == 0 || (oldshape[tensor_d - 1] != 1 &&
				      (span_overflow || oldstride[tensor_d - 1] != span))) {
			while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
				if (__builtin_mul_overflow(view_numel, chunk_base_stride,
							   &newstride[view_d]))
					return false;
				view_numel *= newshape[view_d];
				view_d--;
			}
			if (view_numel != tensor_numel)
				return false;
			if (tensor_d > 0) {
				chunk_base_stride = oldstride[tensor_d - 1];
				tensor_numel = 1;
				view_numel = 1;
			}
		}
	}
	return view_d == -1;
}

int tn__view(const tn_tensor *tensor, int ndim, const int64_t *shape, tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	int r;

	if ((r = check_in(tensor, ret_tensor, "view")) || (r = check_shape_arg(ndim, shape, "view")))
		return r;
	if ((r = infer_size(ndim, shape, tensor->numel, sizes)))
		return r;
	if (!compute_stride(tensor->ndim, tensor->sizes, tensor->strides, tensor->numel, ndim,
			    sizes, strides))
		return tn__error(TN_EINVAL,
				 "view size is not compatible with input tensor's size and stride "
				 "(at least one dimension spans across two contiguous subspaces). "
				 "Use .reshape(...) instead.");
	return make_view(tensor, tensor->offset, ndim, sizes, strides, ret_tensor);
}

static int reshape_impl(const tn_tensor *tensor, int ndim, const int64_t *shape, bool copy_data,
			tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	tn_tensor *copy;
	int r;

	if ((r = check_in(tensor, ret_tensor, "reshape")) ||
	    (r = check_shape_arg(ndim, shape, "reshape")))
		return r;
	if ((r = infer_size(ndim, shape, tensor->numel, sizes)))
		return r;
	if (compute_stride(tensor->ndim, tensor->sizes, tensor->strides, tensor->numel, ndim, sizes,
			   strides))
		return make_view(tensor, tensor->offset, ndim, sizes, strides, ret_tensor);
	/* The strides cannot express the shape: copy into contiguous memory, as PyTorch does
	 * (a Meta tensor gets the same geometry without data). */
	if ((r = copy_data ? tn__clone(tensor, TN_CONTIGUOUS_FORMAT, &copy)
			   : tn__clone_meta(tensor, TN_CONTIGUOUS_FORMAT, &copy)))
		return r;
	r = tn__view(copy, ndim, sizes, ret_tensor);
	tn_tensor_unref(copy);
	return r;
}

int tn__reshape(const tn_tensor *self, int nshape, const int64_t *shape, tn_tensor **ret_tensor)
{
	return reshape_impl(self, nshape, shape, true, ret_tensor);
}

int tn__reshape_meta(const tn_tensor *self, int nshape, const int64_t *shape,
		     tn_tensor **ret_tensor)
{
	return reshape_impl(self, nshape, shape, false, ret_tensor);
}

int tn__alias(const tn_tensor *self, tn_tensor **ret_tensor)
{
	int r;
	if ((r = check_in(self, ret_tensor, "alias")))
		return r;
	return make_view(self, self->offset, self->ndim, self->sizes, self->strides, ret_tensor);
}

int tn__permute(const tn_tensor *tensor, int ndim, const int64_t *dims, tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	bool seen[TN_MAX_DIMS] = { false };
	int r;

	if ((r = check_in(tensor, ret_tensor, "permute")))
		return r;
	if (ndim != tensor->ndim)
		return tn__error(TN_EINVAL,
				 /* 1.13's words, "sparse_coo" included (its dense permute shares the
				  * sparse one's message). */
				 "permute(sparse_coo): number of dimensions in the tensor input does not match "
				 "the length of the desired ordering of dimensions i.e. input.dim() = "
				 "%d is not equal to len(dims) = %d",
				 tensor->ndim, ndim);
	if (ndim && !dims)
		return tn__error(TN_EINVAL, "permute(): NULL dims");
	for (int i = 0; i < ndim; i++) {
		int d = tn__wrap_dim(dims[i], ndim);
		if (d < 0)
			return d;
		if (seen[d])
			return tn__error(TN_EINVAL, "permute(): duplicate dims are not allowed.");
		seen[d] = true;
		sizes[i] = tensor->sizes[d];
		strides[i] = tensor->strides[d];
	}
	return make_view(tensor, tensor->offset, ndim, sizes, strides, ret_tensor);
}

int tn__transpose(const tn_tensor *tensor, int64_t dim0, int64_t dim1, tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS], tmp;
	int r, d0, d1;

	if ((r = check_in(tensor, ret_tensor, "transpose")))
		return r;
	if ((d0 = tn__wrap_dim(dim0, tensor->ndim)) < 0)
		return d0;
	if ((d1 = tn__wrap_dim(dim1, tensor->ndim)) < 0)
		return d1;
	int n = tensor->ndim;
	memcpy(sizes, tensor->sizes, (size_t)n * sizeof(int64_t));
	memcpy(strides, tensor->strides, (size_t)n * sizeof(int64_t));
	if (n) {
		tmp = sizes[d0], sizes[d0] = sizes[d1], sizes[d1] = tmp;
		tmp = strides[d0], strides[d0] = strides[d1], strides[d1] = tmp;
	}
	return make_view(tensor, tensor->offset, n, sizes, strides, ret_tensor);
}

int tn__slice(const tn_tensor *tensor, int64_t dim, int64_t start, int64_t end, int64_t step,
	      tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS], offset;
	int r, d;

	if ((r = check_in(tensor, ret_tensor, "slice")))
		return r;
	if (tensor->ndim == 0)
		return tn__error(TN_EINVAL, "slice() cannot be applied to a 0-dim tensor.");
	if ((d = tn__wrap_dim(dim, tensor->ndim)) < 0)
		return d;
	if (step <= 0)
		return tn__error(TN_EINVAL, "slice step must be positive");
	int n = tensor->ndim;
	int64_t size = tensor->sizes[d];
	if (start < 0)
		start += size;
	if (end < 0)
		end += size;
	if (start < 0)
		start = 0;
	else if (start >= size)
		start = size;
	if (end < start)
		end = start;
	else if (end >= size)
		end = size;
	memcpy(sizes, tensor->sizes, (size_t)n * sizeof(int64_t));
	memcpy(strides, tensor->strides, (size_t)n * sizeof(int64_t));
	int64_t len = end - start;
	sizes[d] = len == 0 ? 0 : (len - 1) / step + 1;
	/* The stride is stride * step whatever the size, as PyTorch's (a slice left with one
	 * element keeps it too, and DLPack consumers see it). It only matters when the
	 * dimension has two or more elements: with fewer, an overflow wraps as it does in
	 * PyTorch rather than failing. */
	if (__builtin_mul_overflow(strides[d], step, &strides[d])) {
		if (sizes[d] > 1)
			return tn__error(TN_EOVERFLOW, "slice: stride %lld times step %lld overflows",
					 (long long)tensor->strides[d], (long long)step);
		strides[d] = (int64_t)((uint64_t)tensor->strides[d] * (uint64_t)step);
	}
	if (__builtin_mul_overflow(start, tensor->strides[d], &offset) ||
	    __builtin_add_overflow(offset, tensor->offset, &offset))
		return tn__error(TN_EOVERFLOW, "slice: storage offset overflows");
	return make_view(tensor, offset, n, sizes, strides, ret_tensor);
}

int tn__narrow(const tn_tensor *tensor, int64_t dim, int64_t start, int64_t length,
	       tn_tensor **ret_tensor)
{
	int r, d;

	if ((r = check_in(tensor, ret_tensor, "narrow")))
		return r;
	if (tensor->ndim == 0)
		return tn__error(TN_EINVAL, "narrow() cannot be applied to a 0-dim tensor.");
	if ((d = tn__wrap_dim(dim, tensor->ndim)) < 0)
		return d;
	/* PyTorch 1.13's order and words: start wraps as a dimension index would (over the
	 * size, a size of 0 counting as 1), except that start == size is valid; then one check
	 * of length and start together. */
	int64_t cur = tensor->sizes[d];
	if (start != cur) {
		int64_t n = cur > 0 ? cur : 1;
		if (start < -n || start > n - 1)
			return tn__error(TN_ERANGE,
					 "Dimension out of range (expected to be in range of [%lld, "
					 "%lld], but got %lld)",
					 (long long)-n, (long long)(n - 1), (long long)start);
		if (start < 0)
			start += n;
	}
	if (!(length >= 0 && start <= cur - length))
		return tn__error(TN_ERANGE, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
				 (long long)start, (long long)length, (long long)cur);
	return tn__slice(tensor, d, start, start + length, 1, ret_tensor);
}

int tn__select(const tn_tensor *tensor, int64_t dim, int64_t index, tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS], offset;
	char buf[SHAPE_BUF];
	int r, d;

	if ((r = check_in(tensor, ret_tensor, "select")))
		return r;
	if (tensor->ndim == 0)
		return tn__error(TN_ERANGE, "select() cannot be applied to a 0-dim tensor.");
	if ((d = tn__wrap_dim(dim, tensor->ndim)) < 0)
		return d;
	int64_t size = tensor->sizes[d];
	if (index < -size || index >= size) {
		tn__format_shape(buf, sizeof(buf), tensor->ndim, tensor->sizes);
		return tn__error(TN_ERANGE,
				 "select(): index %lld out of range for tensor of size %s at "
				 "dimension %d",
				 (long long)index, buf, d);
	}
	if (index < 0)
		index += size;
	int n = 0;
	for (int i = 0; i < tensor->ndim; i++) {
		if (i == d)
			continue;
		sizes[n] = tensor->sizes[i];
		strides[n++] = tensor->strides[i];
	}
	/* In bounds: the element at index lies inside the storage, so this cannot overflow. */
	offset = tensor->offset + index * tensor->strides[d];
	return make_view(tensor, offset, n, sizes, strides, ret_tensor);
}

int tn__expand(const tn_tensor *tensor, int ndim, const int64_t *sizes, tn_tensor **ret_tensor)
{
	int64_t out_sizes[TN_MAX_DIMS], out_strides[TN_MAX_DIMS];
	char want[SHAPE_BUF], have[SHAPE_BUF];
	int r;

	if ((r = check_in(tensor, ret_tensor, "expand")) ||
	    (r = check_shape_arg(ndim, sizes, "expand")))
		return r;
	int tdim = tensor->ndim;
	if (ndim < tdim) {
		tn__format_shape(want, sizeof(want), ndim, sizes);
		tn__format_shape(have, sizeof(have), tdim, tensor->sizes);
		return tn__error(TN_EINVAL,
				 "expand(%s{%s}, size=%s): the number of sizes provided (%d) must be "
				 "greater or equal to the number of dimensions in the tensor (%d)",
				 legacy_type_name(tensor->dtype), have, want, ndim, tdim);
	}
	for (int i = ndim - 1; i >= 0; i--) {
		int offset = ndim - 1 - i;
		int dim = tdim - 1 - offset;
		int64_t size = dim >= 0 ? tensor->sizes[dim] : 1;
		int64_t stride = dim >= 0 ? tensor->strides[dim]
			       : i == ndim - 1 ? 0 /* a 0-dim tensor: every stride is 0 */
					       : mul_or(out_sizes[i + 1], out_strides[i + 1], 0);
		int64_t target = sizes[i];
		if (target == -1) {
			if (dim < 0)
				return tn__error(TN_EINVAL,
						 "The expanded size of the tensor (-1) isn't allowed in "
						 "a leading, non-existing dimension %d",
						 i);
			target = size;
		}
		if (size != target) {
			if (size != 1) {
				tn__format_shape(want, sizeof(want), ndim, sizes);
				tn__format_shape(have, sizeof(have), tdim, tensor->sizes);
				return tn__error(TN_EINVAL,
						 "The expanded size of the tensor (%lld) must match the "
						 "existing size (%lld) at non-singleton dimension %d.  "
						 "Target sizes: %s.  Tensor sizes: %s",
						 (long long)target, (long long)size, i, want, have);
			}
			size = target;
			stride = 0;
		}
		out_sizes[i] = size;
		out_strides[i] = stride;
	}
	/* A negative size that took a size-1 or new dimension: ATen's numel overflows (it
	 * multiplies the sizes as uint64). */
	for (int i = 0; i < ndim; i++)
		if (out_sizes[i] < 0)
			return tn__error(TN_EOVERFLOW, "numel: integer multiplication overflow");
	return make_view(tensor, tensor->offset, ndim, out_sizes, out_strides, ret_tensor);
}

static int squeeze_impl(const tn_tensor *tensor, int only, tn_tensor **ret)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	int n = 0;

	for (int i = 0; i < tensor->ndim; i++) {
		if (tensor->sizes[i] == 1 && (only < 0 || only == i))
			continue;
		sizes[n] = tensor->sizes[i];
		strides[n++] = tensor->strides[i];
	}
	return make_view(tensor, tensor->offset, n, sizes, strides, ret);
}

int tn__squeeze(const tn_tensor *tensor, tn_tensor **ret_tensor)
{
	int r;
	if ((r = check_in(tensor, ret_tensor, "squeeze")))
		return r;
	return squeeze_impl(tensor, -1, ret_tensor);
}

int tn__squeeze_dim(const tn_tensor *tensor, int64_t dim, tn_tensor **ret_tensor)
{
	int r, d;
	if ((r = check_in(tensor, ret_tensor, "squeeze")))
		return r;
	if ((d = tn__wrap_dim(dim, tensor->ndim)) < 0)
		return d;
	/* On a 0-dim tensor the wrapped dim is 0, which matches nothing: the result is a view
	 * of the same scalar. */
	return squeeze_impl(tensor, tensor->ndim ? d : TN_MAX_DIMS, ret_tensor);
}

int tn__unsqueeze(const tn_tensor *tensor, int64_t dim, tn_tensor **ret_tensor)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	int r, d;

	if ((r = check_in(tensor, ret_tensor, "unsqueeze")))
		return r;
	int n = tensor->ndim;
	if (n == TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "unsqueeze: a tensor may have at most %d dimensions",
				 TN_MAX_DIMS);
	if ((d = tn__wrap_dim(dim, n + 1)) < 0)
		return d;
	for (int i = 0, j = 0; i <= n; i++) {
		if (i == d) {
			sizes[i] = 1;
			/* PyTorch's choice, so that strides stay meaningful for the new dim. */
			strides[i] = d >= n ? 1 : mul_or(tensor->sizes[d], tensor->strides[d], 1);
			continue;
		}
		sizes[i] = tensor->sizes[j];
		strides[i] = tensor->strides[j++];
	}
	return make_view(tensor, tensor->offset, n + 1, sizes, strides, ret_tensor);
}

int tn__as_strided(const tn_tensor *tensor, int ndim, const int64_t *sizes, int nstride,
		   const int64_t *strides, const int64_t *storage_offset, tn_tensor **ret_tensor)
{
	char buf[SHAPE_BUF];
	int r;

	if ((r = check_in(tensor, ret_tensor, "as_strided")) ||
	    (r = check_shape_arg(ndim, sizes, "as_strided")))
		return r;
	if (nstride != ndim)
		return tn__error(TN_EINVAL, "mismatch in length of strides and shape");
	if (ndim && !strides)
		return tn__error(TN_EINVAL, "as_strided: NULL strides");
	for (int d = 0; d < ndim; d++) {
		if (strides[d] < 0) {
			tn__format_shape(buf, sizeof(buf), ndim, strides);
			return tn__error(TN_EINVAL,
					 "as_strided: Negative strides are not supported at the moment, "
					 "got strides: %s",
					 buf);
		}
	}
	/* A negative size overflows ATen's computeStorageNbytes (in uint64), which stops at
	 * the first size of 0. */
	for (int d = 0; d < ndim && sizes[d] != 0; d++) {
		if (sizes[d] < 0)
			return tn__storage_overflow_error(ndim, sizes, strides);
	}
	return make_view(tensor, storage_offset ? *storage_offset : tensor->offset, ndim, sizes,
			 strides, ret_tensor);
}

int tn__unbind(const tn_tensor *self, int64_t dim, int *ret_n, tn_tensor ***ret_tensors)
{
	tn_tensor **out;
	int r, d;

	if (!ret_n || !ret_tensors)
		return tn__error(TN_EINVAL, "unbind: NULL %s", ret_n ? "ret_tensors" : "ret_n");
	if ((r = check_in(self, ret_tensors, "unbind")))
		return r;
	/* The dimension is checked first (a 0-dim tensor wraps like a 1-dim one), as in
	 * PyTorch: dim 1 is out of range, dim 0 or -1 has no dimension to unbind. */
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	if (self->ndim == 0)
		return tn__error(TN_ERANGE, "Dimension specified as 0 but tensor has no dimensions");
	int64_t n = self->sizes[d];
	if (n > INT32_MAX)
		return tn__error(TN_EOVERFLOW, "unbind: %lld tensors do not fit an int count",
				 (long long)n);
	/* The caller frees the array with free(3), so it comes from malloc (tn__malloc is
	 * malloc with fault injection). */
	if (!(out = tn__malloc((size_t)(n ? n : 1) * sizeof(*out))))
		return tn__error(TN_ENOMEM, "unbind: out of memory");
	for (int64_t i = 0; i < n; i++) {
		if ((r = tn__select(self, d, i, &out[i]))) {
			while (i--)
				tn_tensor_unref(out[i]);
			tn__free(out);
			return r;
		}
	}
	*ret_n = (int)n;
	*ret_tensors = out;
	return 0;
}

int tn__is_same_size(const tn_tensor *self, const tn_tensor *other, bool *ret_value)
{
	int r;
	if (!ret_value)
		return tn__error(TN_EINVAL, "is_same_size: NULL ret_value");
	if ((r = check_in(self, ret_value, "is_same_size")) ||
	    (r = check_in(other, ret_value, "is_same_size")))
		return r;
	*ret_value = self->ndim == other->ndim &&
		     memcmp(self->sizes, other->sizes, (size_t)self->ndim * sizeof(int64_t)) == 0;
	return 0;
}
