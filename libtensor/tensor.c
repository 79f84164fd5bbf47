/* SPDX-License-Identifier: MIT */
/*
 * Tensors: construction with full validation, factories, accessors and element access.
 *
 * tn__tensor_make is the one door every tensor comes through (factories and views alike), so
 * the invariant "no element lies outside the storage" is checked in one place.
 */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "ops_kernels.h"

#define SHAPE_BUF 256

static bool tensor_ok(const tn_tensor *t)
{
	return tn__handle_is(t, TN_MAGIC_TENSOR);
}

int tn__bad_tensor(const char *who)
{
	return tn__error(TN_EBADF, "%s: not a live tensor handle (NULL, freed or foreign)", who);
}

int tn__check_tensor_args(const tn_tensor *t, const void *ret, const char *who)
{
	if (!tensor_ok(t))
		return tn__bad_tensor(who);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
	return 0;
}

int tn__wrap_dim(int64_t dim, int ndim)
{
	int64_t n = ndim > 0 ? ndim : 1; /* a 0-dim tensor wraps like a 1-dim one */
	int64_t lo = -n, hi = n - 1;
	if (dim < lo || dim > hi)
		return tn__error(TN_ERANGE,
				 "Dimension out of range (expected to be in range of [%lld, %lld], "
				 "but got %lld)",
				 (long long)lo, (long long)hi, (long long)dim);
	return (int)(dim < 0 ? dim + n : dim);
}

int tn__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides)
{
	char shape[256];
	int64_t acc = 1;
	for (int d = ndim - 1; d >= 0; d--) {
		strides[d] = acc;
		/* PyTorch keeps strides meaningful for size-0 dims by multiplying by max(size, 1),
		 * so strides can overflow even when there are no elements. */
		if (d > 0 && __builtin_mul_overflow(acc, sizes[d] > 1 ? sizes[d] : 1, &acc)) {
			tn__format_shape(shape, sizeof(shape), ndim, sizes);
			return tn__error(TN_EOVERFLOW,
					 "contiguous strides overflow int64 for sizes=%s", shape);
		}
	}
	return 0;
}

bool tn__compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides,
			       int64_t numel)
{
	int64_t expected = 1;
	if (numel == 0)
		return true;
	for (int d = ndim - 1; d >= 0; d--) {
		if (sizes[d] == 1)
			continue;
		if (strides[d] != expected)
			return false;
		expected *= sizes[d];
	}
	return true;
}

/* PyTorch's compute_channels_last_contiguous_2d/3d: the dims in NHWC (NDHWC) order. */
bool tn__compute_channels_last(int ndim, const int64_t *sizes, const int64_t *strides)
{
	static const int order4[] = { 1, 3, 2, 0 };
	static const int order5[] = { 1, 4, 3, 2, 0 };
	const int *order = ndim == 4 ? order4 : ndim == 5 ? order5 : NULL;
	int64_t expected = 1;

	if (!order)
		return false;
	for (int i = 0; i < ndim; i++) {
		int d = order[i];
		if (sizes[d] == 1)
			continue;
		if (strides[d] != expected)
			return false;
		expected *= sizes[d];
	}
	return true;
}

/* Check sizes, strides and offset against @storage_nbytes; on success writes numel. */
static int check_geometry(int64_t offset, int ndim, const int64_t *sizes, const int64_t *strides,
			  size_t itemsize, size_t storage_nbytes, int64_t *ret_numel)
{
	char shape[SHAPE_BUF], stride_buf[SHAPE_BUF];
	int64_t numel = 1, max_off = offset, need;

	for (int d = 0; d < ndim; d++) {
		if (sizes[d] < 0) {
			tn__format_shape(shape, sizeof(shape), ndim, sizes);
			return tn__error(TN_EINVAL,
					 "Trying to create tensor with negative dimension %lld: %s",
					 (long long)sizes[d], shape);
		}
		if (strides[d] < 0) {
			tn__format_shape(stride_buf, sizeof(stride_buf), ndim, strides);
			return tn__error(TN_EINVAL,
					 "Negative strides are not supported, got strides: %s",
					 stride_buf);
		}
		if (__builtin_mul_overflow(numel, sizes[d], &numel)) {
			tn__format_shape(shape, sizeof(shape), ndim, sizes);
			return tn__error(TN_EOVERFLOW,
					 "numel: integer multiplication overflow for sizes %s",
					 shape);
		}
	}
	if (offset < 0)
		return tn__error(TN_EINVAL, "Tensor: invalid storage offset %lld", (long long)offset);
	if (numel == 0) {
		/* Reaches no byte; PyTorch accepts any offset here, and so do we (slicing a
		 * size-0 dimension at the end must keep working). */
		*ret_numel = 0;
		return 0;
	}
	bool overflow = false;
	for (int d = 0; d < ndim && !overflow; d++) {
		int64_t span;
		overflow = __builtin_mul_overflow(sizes[d] - 1, strides[d], &span) ||
			   __builtin_add_overflow(max_off, span, &max_off);
	}
	if (overflow || __builtin_add_overflow(max_off, 1, &need) ||
	    __builtin_mul_overflow(need, (int64_t)itemsize, &need)) {
		tn__format_shape(shape, sizeof(shape), ndim, sizes);
		tn__format_shape(stride_buf, sizeof(stride_buf), ndim, strides);
		return tn__error(TN_EOVERFLOW,
				 "Storage size calculation overflowed with sizes=%s and strides=%s "
				 "(storage offset %lld)",
				 shape, stride_buf, (long long)offset);
	}
	if ((uint64_t)need > storage_nbytes) {
		tn__format_shape(shape, sizeof(shape), ndim, sizes);
		tn__format_shape(stride_buf, sizeof(stride_buf), ndim, strides);
		return tn__error(TN_ERANGE,
				 "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize "
				 "%zu requiring a storage size of %lld are out of bounds for storage "
				 "of size %zu",
				 shape, stride_buf, (long long)offset, itemsize, (long long)need,
				 storage_nbytes);
	}
	*ret_numel = numel;
	return 0;
}

int tn__tensor_make(tn_storage *storage, int64_t offset, int ndim, const int64_t *sizes,
		    const int64_t *strides, enum tn_dtype dtype, tn_tensor **ret)
{
	int64_t contig[TN_MAX_DIMS], numel = 0;
	int r;

	if (!ret)
		return tn__error(TN_EINVAL, "NULL ret_tensor");
	if (!tn__handle_is(storage, TN_MAGIC_STORAGE) ||
	    atomic_load_explicit(&storage->refcount, memory_order_relaxed) == 0)
		return tn__error(TN_EBADF, "not a live storage handle (NULL, freed or foreign)");
	if (!tn_dtype_is_valid(dtype))
		return tn__error(TN_EINVAL, "invalid dtype %d", (int)dtype);
	if (ndim < 0 || ndim > TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "number of dimensions %d is outside [0, %d]", ndim,
				 TN_MAX_DIMS);
	if (ndim && !sizes)
		return tn__error(TN_EINVAL, "NULL sizes for %d dimensions", ndim);
	if (!strides) {
		int64_t clamped[TN_MAX_DIMS];
		for (int d = 0; d < ndim; d++) {
			/* Negative sizes are reported by check_geometry with PyTorch's wording. */
			clamped[d] = sizes[d] < 0 ? 1 : sizes[d];
		}
		if ((r = tn__contiguous_strides(ndim, clamped, contig)))
			return r;
		strides = contig;
	}
	r = check_geometry(offset, ndim, sizes, strides, tn__itemsize(dtype), storage->nbytes,
			   &numel);
	if (r)
		return r;

	tn_tensor *t = tn__handle_alloc(sizeof(*t), TN_MAGIC_TENSOR);
	if (!t)
		return tn__error(TN_ENOMEM, "out of memory allocating a tensor");
	if (ndim <= TN_INLINE_DIMS) {
		t->sizes = t->inline_dims;
	} else {
		t->sizes = tn__malloc(2 * (size_t)ndim * sizeof(int64_t));
		if (!t->sizes) {
			tn__handle_free(t);
			return tn__error(TN_ENOMEM, "out of memory allocating a tensor");
		}
	}
	t->strides = t->sizes + ndim;
	if (ndim) {
		memcpy(t->sizes, sizes, (size_t)ndim * sizeof(int64_t));
		memcpy(t->strides, strides, (size_t)ndim * sizeof(int64_t));
	}
	t->ndim = ndim;
	t->offset = offset;
	t->numel = numel;
	t->dtype = dtype;
	t->contiguous = tn__compute_contiguous(ndim, t->sizes, t->strides, numel);
	t->channels_last = ndim == 4 && tn__compute_channels_last(ndim, t->sizes, t->strides);
	t->channels_last_3d = ndim == 5 && tn__compute_channels_last(ndim, t->sizes, t->strides);
	t->storage = tn_storage_ref(storage);
	atomic_fetch_add_explicit(&storage->tensors, 1, memory_order_relaxed);
	atomic_init(&t->refcount, 1);
	*ret = t;
	return 0;
}

TN_EXPORT int tn_tensor_new(tn_storage *storage, int64_t storage_offset, int ndim,
			    const int64_t *sizes, const int64_t *strides, enum tn_dtype dtype,
			    tn_tensor **ret_tensor)
{
	return tn__tensor_make(storage, storage_offset, ndim, sizes, strides, dtype, ret_tensor);
}

/* ---- references ------------------------------------------------------------------------------ */

TN_EXPORT tn_tensor *tn_tensor_ref(tn_tensor *tensor)
{
	if (!tensor_ok(tensor))
		return NULL;
	atomic_fetch_add_explicit(&tensor->refcount, 1, memory_order_relaxed);
	return tensor;
}

TN_EXPORT tn_tensor *tn_tensor_unref(tn_tensor *tensor)
{
	if (!tensor_ok(tensor))
		return NULL;
	if (atomic_fetch_sub_explicit(&tensor->refcount, 1, memory_order_acq_rel) == 1) {
		atomic_fetch_sub_explicit(&tensor->storage->tensors, 1, memory_order_relaxed);
		tn_storage_unref(tensor->storage);
		if (tensor->sizes != tensor->inline_dims)
			tn__free(tensor->sizes);
		tn__handle_free(tensor);
	}
	return NULL;
}

/* ---- factories ------------------------------------------------------------------------------- */

int tn__storage_overflow_error(int ndim, const int64_t *sizes, const int64_t *strides)
{
	char sa[SHAPE_BUF], sb[SHAPE_BUF];
	tn__format_shape(sa, sizeof(sa), ndim, sizes);
	tn__format_shape(sb, sizeof(sb), ndim, strides);
	return tn__error(TN_EOVERFLOW,
			 "Storage size calculation overflowed with sizes=%s and strides=%s", sa, sb);
}

/* Storage bytes for a (non-negative, validated later) geometry: the furthest element + 1. */
static int storage_bytes_for(int ndim, const int64_t *sizes, const int64_t *strides,
			     size_t itemsize, size_t *ret)
{
	char shape[SHAPE_BUF];
	int64_t max_off = 0, n;

	if (ndim < 0 || ndim > TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "number of dimensions %d is outside [0, %d]", ndim,
				 TN_MAX_DIMS);
	if (ndim && !sizes)
		return tn__error(TN_EINVAL, "NULL sizes for %d dimensions", ndim);
	for (int d = 0; d < ndim; d++) {
		if (sizes[d] < 0) {
			tn__format_shape(shape, sizeof(shape), ndim, sizes);
			return tn__error(TN_EINVAL,
					 "Trying to create tensor with negative dimension %lld: %s",
					 (long long)sizes[d], shape);
		}
		if (strides && strides[d] < 0) /* ATen's computeStorageNbytes (uint64) */
			return tn__storage_overflow_error(ndim, sizes, strides);
	}
	for (int d = 0; d < ndim; d++) {
		if (sizes[d] == 0) {
			*ret = 0;
			return 0;
		}
	}
	for (int d = 0; d < ndim; d++) {
		int64_t span;
		if (strides) {
			if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &span) ||
			    __builtin_add_overflow(max_off, span, &max_off))
				goto overflow;
		} else if (__builtin_mul_overflow(max_off ? max_off + 1 : 1, sizes[d], &n)) {
			goto overflow;
		} else {
			max_off = n - 1;
		}
	}
	if (__builtin_add_overflow(max_off, 1, &n) ||
	    __builtin_mul_overflow(n, (int64_t)itemsize, &n))
		goto overflow;
	*ret = (size_t)n;
	return 0;
overflow:
	tn__format_shape(shape, sizeof(shape), ndim, sizes);
	return tn__error(TN_EOVERFLOW, "Storage size calculation overflowed with sizes=%s", shape);
}

/* Strides of a dense tensor laid out in @fmt (contiguous, channels-last 2d/3d), as
 * PyTorch's get_channels_last_strides_2d/3d: sizes of 0 count as 1. */
int tn__format_strides(int ndim, const int64_t *sizes, enum tn_memory_format fmt,
		       int64_t *strides, const char *who)
{
	static const int order2d[] = { 1, 3, 2, 0 };    /* C, W, H, N: fastest first */
	static const int order3d[] = { 1, 4, 3, 2, 0 }; /* C, W, H, D, N */
	const int *order;
	int64_t acc = 1;

	switch (fmt) {
	case TN_CONTIGUOUS_FORMAT:
		return tn__contiguous_strides(ndim, sizes, strides);
	case TN_CHANNELS_LAST:
		if (ndim != 4)
			return tn__error(TN_EINVAL,
					 "required rank 4 tensor to use channels_last format");
		order = order2d;
		break;
	case TN_CHANNELS_LAST_3D:
		if (ndim != 5)
			return tn__error(TN_EINVAL,
					 "required rank 5 tensor to use channels_last_3d format");
		order = order3d;
		break;
	case TN_PRESERVE_FORMAT:
		/* empty's words in PyTorch; contiguous answers before it gets here. */
		return tn__error(TN_EINVAL, "unsupported memory format Preserve");
	default:
		return tn__error(TN_EINVAL, "%s: %d is not a memory format", who, (int)fmt);
	}
	/* c10's get_channels_last_strides_2d/3d: the plain running product, a size of 0
	 * included (sizes [2, 2, 0, 0] get strides [0, 1, 0, 2]), unlike contiguous strides. */
	for (int i = 0; i < ndim; i++) {
		strides[order[i]] = acc;
		if (__builtin_mul_overflow(acc, sizes[order[i]], &acc))
			return tn__error(TN_EOVERFLOW, "%s: strides overflow int64", who);
	}
	return 0;
}

/* The CPU and Meta have one device, index 0; a backend's devices are checked by its guard
 * when the storage is made (a negative index is refused there too). */
static int factory_device(tn_device device, const char *who)
{
	if ((device.type == TN_DEVICE_CPU || device.type == TN_DEVICE_META) && device.index != 0)
		return tn__error(TN_EINVAL, "%s: device index %d of %s: only index 0 exists", who,
				 device.index, tn_device_type_name(device.type));
	return 0;
}

/* The one allocation path of the factories: a tensor of @dtype on @device with the given
 * geometry (strides NULL: contiguous) over a storage just large enough. */
static int empty_impl(int ndim, const int64_t *sizes, const int64_t *strides, enum tn_dtype dtype,
		      tn_device device, tn_tensor **ret, const char *who)
{
	tn_storage *s;
	size_t nbytes;
	int r;

	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
	if ((unsigned)dtype >= TN_NUM_DTYPES)
		return tn__error(TN_EINVAL, "%s: invalid dtype %d", who, (int)dtype);
	if ((r = factory_device(device, who)))
		return r;
	if ((r = storage_bytes_for(ndim, sizes, strides, tn__itemsize(dtype), &nbytes)))
		return r;
	if ((r = tn_storage_new(device, nbytes, &s)))
		return r;
	r = tn__tensor_make(s, 0, ndim, sizes, strides, dtype, ret);
	tn_storage_unref(s);
	return r;
}

int tn__empty_like_device(tn_device device, enum tn_dtype dtype, int ndim, const int64_t *sizes,
			  const int64_t *strides, tn_tensor **ret, const char *who)
{
	return empty_impl(ndim, sizes, strides, dtype, device, ret, who);
}

int tn__empty_like(const tn_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
		   tn_tensor **ret, const char *who)
{
	return empty_impl(ndim, sizes, strides, t->dtype, t->storage->device, ret, who);
}

int tn__empty(int nsize, const int64_t *size, enum tn_dtype dtype, tn_device device,
	      enum tn_memory_format memory_format, tn_tensor **ret_tensor)
{
	int64_t strides[TN_MAX_DIMS];
	int r;

	if (memory_format == TN_CONTIGUOUS_FORMAT)
		return empty_impl(nsize, size, NULL, dtype, device, ret_tensor, "empty");
	if ((r = storage_bytes_for(nsize, size, NULL, 1, &(size_t){ 0 })))
		return r; /* validates the sizes before they are read */
	if ((r = tn__format_strides(nsize, size, memory_format, strides, "empty")))
		return r;
	return empty_impl(nsize, size, strides, dtype, device, ret_tensor, "empty");
}

int tn__empty_strided(int nsize, const int64_t *size, int nstride, const int64_t *stride,
		      enum tn_dtype dtype, tn_device device, tn_tensor **ret_tensor)
{
	if (nstride != nsize)
		return tn__error(TN_EINVAL,
				 "dimensionality of sizes (%d) must match dimensionality of strides "
				 "(%d)",
				 nsize, nstride);
	if (nsize > 0 && !stride)
		return tn__error(TN_EINVAL, "empty_strided: NULL strides");
	return empty_impl(nsize, size, stride, dtype, device, ret_tensor, "empty_strided");
}

/* dtype None of full(): bool, int64 or float32 by the value's kind, as torch.full. */
static enum tn_dtype dtype_of_scalar(tn_scalar v)
{
	return v.kind == TN_SCALAR_BOOL ? TN_BOOL : v.kind == TN_SCALAR_INT ? TN_INT64 : TN_FLOAT32;
}

/* A tensor of @value on @device, filled by the kernels of dispatch key @key (none: Meta). */
static int full_impl(int nsize, const int64_t *size, tn_scalar value, enum tn_dtype dtype,
		     tn_device device, enum tn_dispatch_key key, tn_tensor **ret_tensor,
		     const char *who)
{
	unsigned char elem[8];
	tn_tensor *t;
	int r;

	if (!ret_tensor)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
	if (!tn_dtype_is_valid(dtype))
		return tn__error(TN_EINVAL, "%s: invalid dtype %d", who, (int)dtype);
	/* Convert first: a bad fill value should not cost an allocation. */
	if ((r = tn__scalar_to_element(value, dtype, elem)))
		return r;
	if ((r = empty_impl(nsize, size, NULL, dtype, device, &t, who)))
		return r;
	if (key == TN_KEY_CPU) {
		tn__fill_elements(tn_tensor_data(t), elem, tn_dtype_size(dtype), t->numel);
	} else if (tn__key_on_backend(key) && (r = tn__fill_key(t, value, key)) < 0) {
		tn_tensor_unref(t);
		return r;
	}
	*ret_tensor = t;
	return 0;
}

/* full, zeros and ones for each dispatch key (the device argument's). */
#define FULL_KERNELS(NAME, OP, SUFFIX, KEY)                                                      \
	int tn__full_##SUFFIX(int nsize, const int64_t *size, tn_scalar fill_value,                 \
			      const enum tn_dtype *dtype, tn_device device, tn_tensor **ret_tensor) \
	{                                                                                        \
		return full_impl(nsize, size, fill_value,                                        \
				 dtype ? *dtype : dtype_of_scalar(fill_value), device, KEY,       \
				 ret_tensor, "full");                                            \
	}                                                                                        \
	int tn__zeros_##SUFFIX(int nsize, const int64_t *size, enum tn_dtype dtype,                 \
			       tn_device device, tn_tensor **ret_tensor)                            \
	{                                                                                        \
		return full_impl(nsize, size, tn_scalar_int(0), dtype, device, KEY, ret_tensor,   \
				 "zeros");                                                       \
	}                                                                                        \
	int tn__ones_##SUFFIX(int nsize, const int64_t *size, enum tn_dtype dtype,                  \
			      tn_device device, tn_tensor **ret_tensor)                             \
	{                                                                                        \
		return full_impl(nsize, size, tn_scalar_int(1), dtype, device, KEY, ret_tensor,   \
				 "ones");                                                        \
	}
TN_FOR_EACH_KEY(FULL_KERNELS, full, 0)

TN_EXPORT int tn_from_blob(void *data, int ndim, const int64_t *sizes, const int64_t *strides,
			   enum tn_dtype dtype, tn_deleter deleter, void *ctx,
			   tn_tensor **ret_tensor)
{
	tn_device cpu = { TN_DEVICE_CPU, 0 };
	tn_storage *s;
	size_t nbytes;
	int r;

	if (!ret_tensor)
		return tn__error(TN_EINVAL, "tn_from_blob: NULL ret_tensor");
	if (!tn_dtype_is_valid(dtype))
		return tn__error(TN_EINVAL, "invalid dtype %d", (int)dtype);
	if ((r = storage_bytes_for(ndim, sizes, strides, tn_dtype_size(dtype), &nbytes)))
		return r;
	if (data && ((uintptr_t)data % tn_dtype_size(dtype)))
		return tn__error(TN_EINVAL, "tn_from_blob: data %p is not aligned for %s", data,
				 tn_dtype_name(dtype));
	/* The deleter runs only once the tensor exists: on failure the caller keeps the blob. */
	if ((r = tn_storage_from_blob(cpu, data, nbytes, NULL, NULL, &s)))
		return r;
	r = tn__tensor_make(s, 0, ndim, sizes, strides, dtype, ret_tensor);
	if (!r) {
		s->deleter = deleter;
		s->deleter_ctx = ctx;
	}
	tn_storage_unref(s);
	return r;
}

/* Number of arange elements, following PyTorch's RangeFactories.cpp: int64 results use an
 * integer formula, every other dtype ceil((end - start) / step) in double. */
static int arange_impl(tn_scalar start, tn_scalar end, tn_scalar step,
		       const enum tn_dtype *dtype_opt, tn_device device, bool compute,
		       tn_tensor **ret_tensor)
{
	double ds, de, dst, size_d;
	tn_tensor *t;
	int r;
	/* dtype None: int64 when every bound is an integer (bools count), else float32. */
	enum tn_dtype dtype = dtype_opt ? *dtype_opt
		: (start.kind != TN_SCALAR_DOUBLE && end.kind != TN_SCALAR_DOUBLE &&
		   step.kind != TN_SCALAR_DOUBLE) ? TN_INT64 : TN_FLOAT32;

	if (!ret_tensor)
		return tn__error(TN_EINVAL, "arange: NULL ret_tensor");
	if (!tn_dtype_is_valid(dtype) || dtype == TN_BOOL)
		return tn__error(TN_ENOTSUP, "\"arange_cpu\" not implemented for '%s'",
				 tn_dtype_name(dtype) ? tn_dtype_name(dtype) : "?");
	if ((r = tn_scalar_to_double(start, &ds)) || (r = tn_scalar_to_double(end, &de)) ||
	    (r = tn_scalar_to_double(step, &dst)))
		return r;
	if (!isfinite(ds) || !isfinite(de))
		return tn__error(TN_EINVAL, "unsupported range: %g -> %g", ds, de);

	if (tn_dtype_is_integral(dtype)) {
		/* Integer dtypes accumulate in int64: the bounds are truncated first. */
		int64_t is, ie, ist;
		if ((r = tn_scalar_to_int(start, &is)) || (r = tn_scalar_to_int(end, &ie)) ||
		    (r = tn_scalar_to_int(step, &ist)))
			return r;
		if (ist == 0)
			return tn__error(TN_EINVAL, "step must be nonzero");
		if (!((ist > 0 && ie >= is) || (ist < 0 && ie <= is)))
			return tn__error(TN_EINVAL,
					 "upper bound and larger bound inconsistent with step sign");
		if (dtype == TN_INT64) {
			__int128 sgn = ist > 0 ? 1 : -1;
			__int128 num = (__int128)ie - is + ist - sgn;
			size_d = (double)(num / ist); /* exact: same signs, truncation = ceil */
		} else {
			/* PyTorch sizes the other integer dtypes from the untruncated bounds. */
			size_d = ceil((de - ds) / dst);
		}
		if (!(size_d >= 0 && size_d <= 9.2233720368547748e18))
			return tn__error(TN_EOVERFLOW, "invalid size, possible overflow?");
		int64_t n = (int64_t)size_d;
		if ((r = empty_impl(1, &n, NULL, dtype, device, &t, "arange")))
			return r;
		if (!compute) {
			*ret_tensor = t;
			return 0;
		}
		unsigned char *out = tn_tensor_data(t);
		size_t isz = tn_dtype_size(dtype);
		for (int64_t i = 0; i < n; i++) {
			/* PyTorch accumulates in int64 and casts to the dtype, wrapping (an
			 * arange past 255 in uint8 wraps around, as static_cast does). */
			uint64_t v = (uint64_t)is + (uint64_t)i * (uint64_t)ist;
			unsigned char *p = out + (size_t)i * isz;
			switch (isz) {
			case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
			case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
			case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
			default: memcpy(p, &v, 8); break;
			}
		}
		*ret_tensor = t;
		return 0;
	}

	if (dst == 0 || isnan(dst))
		return tn__error(TN_EINVAL, "step must be nonzero");
	if (!((dst > 0 && de >= ds) || (dst < 0 && de <= ds)))
		return tn__error(TN_EINVAL, "upper bound and larger bound inconsistent with step sign");
	size_d = ceil((de - ds) / dst);
	if (!(size_d >= 0 && size_d <= 9.2233720368547748e18))
		return tn__error(TN_EOVERFLOW, "invalid size, possible overflow?");
	int64_t n = (int64_t)size_d;
	if ((r = empty_impl(1, &n, NULL, dtype, device, &t, "arange")))
		return r;
	if (!compute) {
		*ret_tensor = t;
		return 0;
	}
	unsigned char *out = tn_tensor_data(t);
	size_t isz = tn_dtype_size(dtype);
	bool narrow = dtype == TN_FLOAT16 || dtype == TN_BFLOAT16;
	for (int64_t i = 0; i < n; i++) {
		/* The accumulate type is float for 16-bit floats and double otherwise. */
		double v = narrow ? (double)((float)ds + (float)i * (float)dst) : ds + (double)i * dst;
		if ((r = tn__scalar_to_element(tn_scalar_double(v), dtype, out + (size_t)i * isz))) {
			tn_tensor_unref(t);
			return r;
		}
	}
	*ret_tensor = t;
	return 0;
}

int tn__arange_cpu(tn_scalar start, tn_scalar end, tn_scalar step, const enum tn_dtype *dtype,
		   tn_device device, tn_tensor **ret_tensor)
{
	return arange_impl(start, end, step, dtype, device, true, ret_tensor);
}

int tn__arange_meta(tn_scalar start, tn_scalar end, tn_scalar step, const enum tn_dtype *dtype,
		    tn_device device, tn_tensor **ret_tensor)
{
	return arange_impl(start, end, step, dtype, device, false, ret_tensor);
}

/* ---- accessors -------------------------------------------------------------------------------- */

TN_EXPORT int tn_tensor_ndim(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->ndim : -1;
}

TN_EXPORT const int64_t *tn_tensor_sizes(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->sizes : NULL;
}

TN_EXPORT const int64_t *tn_tensor_strides(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->strides : NULL;
}

TN_EXPORT int64_t tn_tensor_numel(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->numel : -1;
}

TN_EXPORT int64_t tn_tensor_storage_offset(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->offset : -1;
}

TN_EXPORT enum tn_dtype tn_tensor_dtype(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->dtype : TN_NUM_DTYPES;
}

TN_EXPORT size_t tn_tensor_itemsize(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tn_dtype_size(tensor->dtype) : 0;
}

TN_EXPORT size_t tn_tensor_nbytes(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? (size_t)tensor->numel * tn_dtype_size(tensor->dtype) : 0;
}

TN_EXPORT tn_device tn_tensor_device(const tn_tensor *tensor)
{
	return tn_storage_device(tensor_ok(tensor) ? tensor->storage : NULL);
}

TN_EXPORT tn_storage *tn_tensor_storage(const tn_tensor *tensor)
{
	return tensor_ok(tensor) ? tensor->storage : NULL;
}

TN_EXPORT void *tn_tensor_data(const tn_tensor *tensor)
{
	if (!tensor_ok(tensor) || !tensor->storage->data)
		return NULL;
	/* In bounds for every tensor with elements; an empty one may sit at the end. */
	return (char *)tensor->storage->data + tensor->offset * (int64_t)tn_dtype_size(tensor->dtype);
}

TN_EXPORT bool tn_tensor_is_contiguous(const tn_tensor *tensor)
{
	return tensor_ok(tensor) && tensor->contiguous;
}

TN_EXPORT bool tn_tensor_is_readonly(const tn_tensor *tensor)
{
	return tensor_ok(tensor) && tensor->storage->readonly;
}

TN_EXPORT bool tn_tensor_is_contiguous_as(const tn_tensor *tensor, enum tn_memory_format fmt)
{
	if (!tensor_ok(tensor))
		return false;
	switch (fmt) {
	case TN_CONTIGUOUS_FORMAT:
		return tensor->contiguous;
	case TN_CHANNELS_LAST:
		return tensor->channels_last;
	case TN_CHANNELS_LAST_3D:
		return tensor->channels_last_3d;
	case TN_PRESERVE_FORMAT:
		break;
	}
	return false;
}

/* One dimension's size or stride, for tn_tensor_size and tn_tensor_stride. */
static int dim_entry(const tn_tensor *tensor, int dim, bool stride, int64_t *ret, const char *who)
{
	int d;
	if (!tensor_ok(tensor))
		return tn__bad_tensor(who);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL output", who);
	if (tensor->ndim == 0)
		return tn__error(TN_ERANGE, "dimension specified as %d but tensor has no dimensions",
				 dim);
	if ((d = tn__wrap_dim(dim, tensor->ndim)) < 0)
		return d;
	*ret = stride ? tensor->strides[d] : tensor->sizes[d];
	return 0;
}

TN_EXPORT int tn_tensor_size(const tn_tensor *tensor, int dim, int64_t *ret_size)
{
	return dim_entry(tensor, dim, false, ret_size, "tn_tensor_size");
}

TN_EXPORT int tn_tensor_stride(const tn_tensor *tensor, int dim, int64_t *ret_stride)
{
	return dim_entry(tensor, dim, true, ret_stride, "tn_tensor_stride");
}

/* ---- element access --------------------------------------------------------------------------- */

static int element_address(const tn_tensor *t, int nindex, const int64_t *index, const char *who,
			   unsigned char **ret)
{
	int64_t off = t->offset;

	if (t->storage->device.type == TN_DEVICE_META)
		return tn__error(TN_ENOTSUP, "%s: a meta tensor has no elements to read or write",
				 who);
	if (nindex != t->ndim)
		return tn__error(TN_EINVAL, "%s: %d indices for a tensor of %d dimensions", who,
				 nindex, t->ndim);
	if (t->ndim && !index)
		return tn__error(TN_EINVAL, "%s: NULL index", who);
	for (int d = 0; d < t->ndim; d++) {
		int64_t i = index[d], n = t->sizes[d];
		if (i < -n || i >= n)
			return tn__error(TN_ERANGE,
					 "index %lld is out of bounds for dimension %d with size %lld",
					 (long long)i, d, (long long)n);
		off += (i < 0 ? i + n : i) * t->strides[d];
	}
	*ret = (unsigned char *)t->storage->data + off * (int64_t)tn_dtype_size(t->dtype);
	return 0;
}

TN_EXPORT int tn_tensor_get(const tn_tensor *tensor, int nindex, const int64_t *index,
			    tn_scalar *ret_value)
{
	unsigned char *p;
	int r;

	if (!tensor_ok(tensor))
		return tn__bad_tensor("tn_tensor_get");
	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_tensor_get: NULL ret_value");
	if ((r = element_address(tensor, nindex, index, "tn_tensor_get", &p)))
		return r;
	if (!tn__on_host(tensor)) { /* one element to the host, after the device's work */
		_Alignas(8) unsigned char elem[8];
		const struct tn__device_ops *dev;
		if ((r = tn__device_of(tensor, &dev, "tn_tensor_get")) < 0 ||
		    (r = dev->element_read(tensor, p, elem)) < 0)
			return r;
		*ret_value = tn__element_to_scalar(tensor->dtype, elem);
		return 0;
	}
	*ret_value = tn__element_to_scalar(tensor->dtype, p);
	return 0;
}

TN_EXPORT int tn_tensor_set(tn_tensor *tensor, int nindex, const int64_t *index, tn_scalar value)
{
	unsigned char *p;
	int r;

	if (!tensor_ok(tensor))
		return tn__bad_tensor("tn_tensor_set");
	if (tensor->storage->readonly)
		return tn__error(TN_EPERM, "tn_tensor_set: the tensor is sealed, which is read-only");
	if ((r = element_address(tensor, nindex, index, "tn_tensor_set", &p)))
		return r;
	if (!tn__on_host(tensor)) {
		_Alignas(8) unsigned char elem[8];
		const struct tn__device_ops *dev;
		if ((r = tn__scalar_to_element(value, tensor->dtype, elem)) < 0 ||
		    (r = tn__device_of(tensor, &dev, "tn_tensor_set")) < 0)
			return r;
		return dev->element_write(tensor, p, elem);
	}
	return tn__scalar_to_element(value, tensor->dtype, p);
}

TN_EXPORT int tn_tensor_item(const tn_tensor *tensor, tn_scalar *ret_value)
{
	int64_t zeros[TN_MAX_DIMS] = { 0 };

	if (!tensor_ok(tensor))
		return tn__bad_tensor("tn_tensor_item");
	if (tensor->numel != 1)
		return tn__error(TN_EINVAL, "a Tensor with %lld elements cannot be converted to Scalar",
				 (long long)tensor->numel);
	return tn_tensor_get(tensor, tensor->ndim, zeros, ret_value);
}

bool tn__is_non_overlapping_and_dense(const tn_tensor *t)
{
	int perm[TN_MAX_DIMS];
	int n = t->ndim;
	int64_t require = 1;

	if (t->contiguous)
		return true;
	/* Order the dims by stride, size-0/1 dims last (their strides do not matter). */
	for (int i = 0; i < n; i++)
		perm[i] = i;
	for (int i = 1; i < n; i++) {
		int p = perm[i], j = i;
		while (j > 0) {
			int q = perm[j - 1];
			bool p_first = t->sizes[q] < 2 ? t->sizes[p] >= 2
						       : t->sizes[p] >= 2 && t->strides[p] < t->strides[q];
			if (!p_first)
				break;
			perm[j] = q;
			j--;
		}
		perm[j] = p;
	}
	for (int i = 0; i < n; i++) {
		int64_t size = t->sizes[perm[i]];
		if (size < 2)
			return true;
		if (t->strides[perm[i]] != require)
			return false;
		require *= size;
	}
	return true;
}
