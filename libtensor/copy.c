/* SPDX-License-Identifier: MIT */
/*
 * Copies and fills: copy_ (any dtypes, any strides, a broadcast source) runs on the
 * TensorIterator with the per-capability cast kernel on the CPU, and through the backend's
 * copy when a device tensor is involved (the CUDA key's kernel). clone, contiguous and to are
 * composites, as ATen's _to_copy: a new tensor, then copy_ through the dispatcher, which
 * picks the device. fill_ and zero_ use the per-capability fill kernel on each dense run, or
 * the backend's fill.
 */
#include <string.h>

#include "backend.h"
#include "ops_kernels.h"
#include "stub.h"
#include "iter.h"

void tn__fill_elements(void *dst, const void *elem, size_t itemsize, int64_t count)
{
	if (count <= 0)
		return;
	/* The per-capability kernel (AVX-512, AVX2 or baseline stores). */
	((tn__fill_fn)tn__stub_get(&tn__fill_stub))(dst, elem, itemsize, count);
}

struct cast_ctx {
	tn__cast_fn fn;
	tn__transpose32_fn transpose32;
	tn__transpose16_fn transpose16;
	enum tn_dtype ddt, sdt;
};

/* Side of the square tiles of a transposing copy: each source cache line fetched is used for
 * as many rows as the tile has (up to 16 floats per line) before it is evicted. Measured on
 * the development machine (3162 x 3162 float32, one thread): 32 -> 3.3 GB/s, 128 -> 7,
 * 256 -> 9; the tile's 256 source lines stay in L2. */
#define TILE 256

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

static void cast_loop(void *vctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	const struct cast_ctx *c = vctx;
	int64_t ds0 = strides[0], ss0 = strides[1], ds1 = strides[2], ss1 = strides[3];

	/* A transposing copy (the source walks the fast dimension with a larger stride than
	 * the rows): row by row it would touch a new source cache line per element and use
	 * one element of each. In tiles, every line fetched is used TILE times. */
	if (n0 >= 16 && n1 >= 2 && ss0 != 0 && ss1 != 0 && abs64(ss1) < abs64(ss0) &&
	    abs64(ds0) <= abs64(ds1)) {
		/* 4- or 2-byte elements, each side contiguous along its own fast dimension:
		 * whole vectors, transposed in registers. */
		const int64_t w = (int64_t)tn__itemsize(c->ddt);
		bool regs = c->ddt == c->sdt && (w == 4 || w == 2) && ds0 == w && ss1 == w &&
			    ds1 > 0 && ss0 > 0 && ds1 % w == 0 && ss0 % w == 0;
		for (int64_t jb = 0; jb < n1; jb += TILE) {
			int64_t jm = n1 - jb < TILE ? n1 - jb : TILE;
			for (int64_t ib = 0; ib < n0; ib += TILE) {
				int64_t im = n0 - ib < TILE ? n0 - ib : TILE;
				if (regs) {
					(w == 4 ? c->transpose32 : c->transpose16)(
						data[0] + jb * ds1 + ib * ds0, ds1 / w,
						data[1] + ib * ss0 + jb * ss1, ss0 / w, im, jm);
					continue;
				}
				for (int64_t j = jb; j < jb + jm; j++)
					c->fn(data[0] + j * ds1 + ib * ds0, c->ddt, ds0,
					      data[1] + j * ss1 + ib * ss0, c->sdt, ss0, im);
			}
		}
		return;
	}
	for (int64_t j = 0; j < n1; j++)
		c->fn(data[0] + j * strides[2], c->ddt, strides[0], data[1] + j * strides[3], c->sdt,
		      strides[1], n0);
}

void tn__copy_config(struct tn_iter_config *cfg, const tn_tensor *dst, const tn_tensor *src)
{
	tn__iter_config_init(cfg);
	cfg->noutputs = 1;
	cfg->ninputs = 1;
	cfg->tensors[0] = dst;
	cfg->tensors[1] = src;
	cfg->resize_outputs = false;
	cfg->check_all_same_dtype = false;
}

int tn__check_out_shape(const tn_tensor *out, int ndim, const int64_t *sizes)
{
	if (out->ndim == ndim && memcmp(out->sizes, sizes, (size_t)ndim * sizeof(int64_t)) == 0)
		return 0;
	char a[256], b[256];
	tn__format_shape(a, sizeof(a), out->ndim, out->sizes);
	tn__format_shape(b, sizeof(b), ndim, sizes);
	return tn__error(TN_EINVAL,
			 "output with shape %s doesn't match the broadcast shape %s "
			 "(libtensor does not resize out= tensors)",
			 a, b);
}

int tn__copy_result_into(tn_tensor *out, const tn_tensor *r, enum tn_dispatch_key key,
			 const char *who)
{
	int rc = tn__check_out_shape(out, r->ndim, r->sizes);
	return rc ? rc : tn__copy(out, r, key, who);
}

int tn__copy(tn_tensor *dst, const tn_tensor *src, enum tn_dispatch_key key, const char *who)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	if ((rc = tn__check_tensor_args(dst, dst, who)) || (rc = tn__check_tensor_args(src, src, who)))
		return rc;
	if (dst == src)
		return 0;
	if (tn__key_on_backend(key)) {
		const struct tn__device_ops *dev;
		if ((rc = tn__device_get((enum tn_device_type)key, &dev, who)) < 0)
			return rc;
		return dev->copy(dst, src, false);
	}
	/* Small contiguous tensors of one shape in separate storages: one kernel call. */
	const tn_tensor *shape;
	if (key == TN_KEY_CPU && dst->storage != src->storage &&
	    tn__iter_trivial(dst, dst->dtype, src, NULL, &shape) >= 0) {
		if (src->numel == 0) /* empty tensors have no data pointer */
			return 0;
		((tn__cast_fn)tn__stub_get(&tn__cast_stub))(
			tn__data(dst), dst->dtype, (int64_t)tn__itemsize(dst->dtype), tn__data(src),
			src->dtype, (int64_t)tn__itemsize(src->dtype), src->numel);
		return 0;
	}
	tn__copy_config(&cfg, dst, src);
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	if (key == TN_KEY_CPU && it.numel > 0) {
		struct cast_ctx c = { (tn__cast_fn)tn__stub_get(&tn__cast_stub),
				      (tn__transpose32_fn)tn__stub_get(&tn__transpose32_stub),
				      (tn__transpose16_fn)tn__stub_get(&tn__transpose16_stub),
				      dst->dtype, src->dtype };
		tn__iter_for_each(&it, cast_loop, &c, TN_GRAIN_SIZE);
	}
	tn__iter_release(&it);
	return 0;
}

int tn__copy_host(tn_tensor *dst, const tn_tensor *src)
{
	return tn__copy(dst, src, TN_KEY_CPU, "copy_");
}

int tn__copy_cpu(tn_tensor *self, const tn_tensor *src, bool non_blocking)
{
	(void)non_blocking;
	return tn__copy(self, src, TN_KEY_CPU, "copy_");
}

/* copy_ with a CUDA tensor on either side: non_blocking lets a plain host<->device copy
 * return before the DMA ends (wait on the stream before reusing the host memory). */
int tn__copy_cuda(tn_tensor *self, const tn_tensor *src, bool non_blocking)
{
	const struct tn__device_ops *dev;
	int rc;
	if ((rc = tn__check_tensor_args(self, self, "copy_")) ||
	    (rc = tn__check_tensor_args(src, src, "copy_")))
		return rc;
	if (self == src)
		return 0;
	if ((rc = tn__device_get(TN_DEVICE_CUDA, &dev, "copy_")) < 0)
		return rc;
	return dev->copy(self, src, non_blocking);
}

int tn__copy_meta(tn_tensor *self, const tn_tensor *src, bool non_blocking)
{
	(void)non_blocking;
	return tn__copy(self, src, TN_KEY_META, "copy_");
}

/* PyTorch's infer_dense_strides: dense strides in the order of @t's strides (smallest
 * first; zero strides and size-1 dimensions do not decide the order). */
void tn__infer_dense_strides(const tn_tensor *t, int64_t *strides)
{
	int n = t->ndim, perm[TN_MAX_DIMS];
	for (int i = 0; i < n; i++)
		perm[i] = n - 1 - i;
	for (int i = 1; i < n; i++) {
		int d1 = i;
		for (int d0 = i - 1; d0 >= 0; d0--) {
			int a = perm[d0], b = perm[d1], c = 0;
			int64_t sa = t->strides[a], sb = t->strides[b];
			if (sa != 0 && sb != 0)
				c = sa < sb ? -1 : sa > sb ? 1 : t->sizes[a] > t->sizes[b] ? 1 : 0;
			if (c > 0) {
				perm[d0] = b;
				perm[d1] = a;
				d1 = d0;
			} else if (c < 0) {
				break;
			}
		}
	}
	int64_t acc = 1;
	for (int i = 0; i < n; i++) {
		strides[perm[i]] = acc;
		if (t->sizes[perm[i]] > 1)
			acc *= t->sizes[perm[i]];
	}
}

void tn__preserve_strides(const tn_tensor *t, int64_t *strides)
{
	if (tn__is_non_overlapping_and_dense(t))
		memcpy(strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
	else
		tn__infer_dense_strides(t, strides);
}

/* The layout a copy of @t takes for @fmt: PyTorch's preserve_format keeps the strides of a
 * non-overlapping, dense tensor and otherwise makes dense strides in the same order. */
static int copy_strides(const tn_tensor *t, enum tn_memory_format fmt, int64_t *strides,
			bool *ret_use_strides, const char *who)
{
	*ret_use_strides = true;
	if (fmt == TN_PRESERVE_FORMAT) {
		tn__preserve_strides(t, strides);
		return 0;
	}
	if (fmt == TN_CONTIGUOUS_FORMAT) {
		*ret_use_strides = false;
		return 0;
	}
	return tn__format_strides(t->ndim, t->sizes, fmt, strides, who);
}

/* A copy of @t converted to @dtype, laid out for @fmt (clone, contiguous, to). */
static int copy_to(const tn_tensor *t, tn_device device, enum tn_memory_format fmt,
		   enum tn_dtype dtype, bool copy_data, bool non_blocking, tn_tensor **ret,
		   const char *who);

static int copy_as(const tn_tensor *t, enum tn_memory_format fmt, enum tn_dtype dtype,
		   bool copy_data, tn_tensor **ret, const char *who)
{
	return copy_to(t, t->storage->device, fmt, dtype, copy_data, false, ret, who);
}

/* A copy of @t on @device with @dtype, laid out as clone lays out for @fmt. */
static int copy_to(const tn_tensor *t, tn_device device, enum tn_memory_format fmt,
		   enum tn_dtype dtype, bool copy_data, bool non_blocking, tn_tensor **ret,
		   const char *who)
{
	int64_t strides[TN_MAX_DIMS];
	bool use_strides;
	tn_tensor *out;
	int r;

	if ((r = copy_strides(t, fmt, strides, &use_strides, who)))
		return r;
	if ((r = tn__empty_like_device(device, dtype, t->ndim, t->sizes,
				       use_strides ? strides : NULL, &out, who)))
		return r;
	/* copy_ through the dispatcher, which picks the device from both tensors (ATen's
	 * _to_copy does r.copy_(self)). */
	if (copy_data)
		r = tn_copy_(out, t, non_blocking);
	if (r < 0) {
		tn_tensor_unref(out);
		return r;
	}
	*ret = out;
	return 0;
}

static int clone_impl(const tn_tensor *t, enum tn_memory_format fmt, bool copy_data,
		      tn_tensor **ret, const char *who)
{
	int r = tn__check_tensor_args(t, ret, who);
	return r ? r : copy_as(t, fmt, t->dtype, copy_data, ret, who);
}

int tn__clone(const tn_tensor *self, enum tn_memory_format memory_format, tn_tensor **ret_tensor)
{
	return clone_impl(self, memory_format, true, ret_tensor, "clone");
}

int tn__clone_meta(const tn_tensor *self, enum tn_memory_format memory_format,
		   tn_tensor **ret_tensor)
{
	return clone_impl(self, memory_format, false, ret_tensor, "clone");
}

static int contiguous_impl(const tn_tensor *t, enum tn_memory_format fmt, bool copy_data,
			   tn_tensor **ret)
{
	int r;

	if ((r = tn__check_tensor_args(t, ret, "contiguous")))
		return r;
	/* ATen asks is_contiguous(memory_format) first, which for Preserve is plain
	 * contiguity: an already contiguous tensor comes back as it is. */
	if (fmt == TN_PRESERVE_FORMAT ? tn_tensor_is_contiguous(t)
				      : tn_tensor_is_contiguous_as(t, fmt)) {
		*ret = tn_tensor_ref((tn_tensor *)t);
		return 0;
	}
	if (fmt == TN_PRESERVE_FORMAT)
		return tn__error(TN_EINVAL,
				 "preserve memory format is unsupported by the contiguous operator");
	return clone_impl(t, fmt, copy_data, ret, "contiguous");
}

int tn__contiguous(const tn_tensor *self, enum tn_memory_format memory_format,
		   tn_tensor **ret_tensor)
{
	return contiguous_impl(self, memory_format, true, ret_tensor);
}

int tn__contiguous_meta(const tn_tensor *self, enum tn_memory_format memory_format,
			tn_tensor **ret_tensor)
{
	return contiguous_impl(self, memory_format, false, ret_tensor);
}

/* fill_ on any strides, by the kernels of dispatch key @key: the contiguous CPU kernel per
 * run of elements, or the backend's fill; Meta only checks. */
static int fill_impl(tn_tensor *t, tn_scalar value, enum tn_dispatch_key key, const char *who)
{
	unsigned char elem[8];
	int r;

	if ((r = tn__check_tensor_args(t, t, who)))
		return r;
	if ((r = tn__scalar_to_element(value, t->dtype, elem)))
		return r;
	if (!tn__key_runs(key) || t->numel == 0)
		return 0;
	if (tn__key_on_backend(key)) {
		const struct tn__device_ops *dev;
		if ((r = tn__device_get((enum tn_device_type)key, &dev, who)) < 0)
			return r;
		return dev->fill(t, elem);
	}
	size_t isz = tn_dtype_size(t->dtype);
	unsigned char *base = tn_tensor_data(t);
	if (t->contiguous || tn__is_non_overlapping_and_dense(t)) {
		tn__fill_elements(base, elem, isz, t->numel);
		return 0;
	}
	int n = t->ndim;
	int64_t counter[TN_MAX_DIMS] = { 0 };
	int64_t inner = t->sizes[n - 1], istride = t->strides[n - 1];
	for (;;) {
		int64_t off = 0;
		for (int k = 0; k < n - 1; k++)
			off += counter[k] * t->strides[k];
		unsigned char *row = base + off * (int64_t)isz;
		if (istride == 1) {
			tn__fill_elements(row, elem, isz, inner);
		} else {
			for (int64_t i = 0; i < inner; i++)
				memcpy(row + i * istride * (int64_t)isz, elem, isz);
		}
		int k = n - 2;
		while (k >= 0 && ++counter[k] == t->sizes[k])
			counter[k--] = 0;
		if (k < 0)
			return 0;
	}
}

int tn__fill_key(tn_tensor *t, tn_scalar value, enum tn_dispatch_key key)
{
	return fill_impl(t, value, key, "fill_");
}

#define FILL_KERNELS(NAME, OP, SUFFIX, KEY)                                    \
	int tn__fill_##SUFFIX(tn_tensor *self, tn_scalar value)                 \
	{                                                                      \
		return fill_impl(self, value, KEY, "fill_");                   \
	}                                                                      \
	int tn__zero_##SUFFIX(tn_tensor *self)                                  \
	{                                                                      \
		return fill_impl(self, tn_scalar_int(0), KEY, "zero_");        \
	}
TN_FOR_EACH_KEY(FILL_KERNELS, fill, 0)

/* PyTorch's is_channels_last_strides_2d_s4 and _3d_s5: strides ordered as NHWC (NDHWC), with
 * its tie-breaks towards NCHW for ambiguous size-1 dimensions. */
static bool strides_like_channels_last(const tn_tensor *t)
{
	static const int order4[] = { 1, 3, 2, 0 }, order5[] = { 1, 4, 3, 2, 0 };
	const int *order = t->ndim == 4 ? order4 : order5;
	int64_t min = 0;

	if ((t->ndim != 4 && t->ndim != 5) || t->strides[1] == 0)
		return false;
	for (int k = 0; k < t->ndim; k++) {
		int d = order[k];
		if (t->sizes[d] == 0 || t->strides[d] < min)
			return false;
		if (d == 0 && min == t->strides[1])
			return false;
		min = t->strides[d];
		if (t->sizes[d] > 1)
			min *= t->sizes[d];
	}
	return true;
}

enum tn_memory_format tn__suggest_memory_format(const tn_tensor *t)
{
	if (!strides_like_channels_last(t))
		return TN_CONTIGUOUS_FORMAT;
	return t->ndim == 4 ? TN_CHANNELS_LAST : TN_CHANNELS_LAST_3D;
}

/*
 * to.dtype, as ATen's to_impl: self itself (a new reference) when the dtype is the same, no
 * copy is asked for and the memory format is preserve or the one self already suggests;
 * otherwise _to_copy, a converted copy laid out as clone lays out (preserve keeps a dense
 * tensor's strides).
 */
static int to_impl(const tn_tensor *self, enum tn_dtype dtype, bool copy,
		   const enum tn_memory_format *memory_format, bool copy_data, tn_tensor **ret)
{
	enum tn_memory_format fmt = memory_format ? *memory_format : TN_PRESERVE_FORMAT;
	int r;

	if ((r = tn__check_tensor_args(self, ret, "to")))
		return r;
	if (!tn_dtype_is_valid(dtype))
		return tn__error(TN_EINVAL, "to: invalid dtype %d", (int)dtype);
	if (self->dtype == dtype && !copy &&
	    (fmt == TN_PRESERVE_FORMAT || tn__suggest_memory_format(self) == fmt)) {
		*ret = tn_tensor_ref((tn_tensor *)self);
		return 0;
	}
	return copy_as(self, fmt, dtype, copy_data, ret, "to");
}

int tn__to_dtype(const tn_tensor *self, enum tn_dtype dtype, bool non_blocking, bool copy,
		 const enum tn_memory_format *memory_format, tn_tensor **ret_tensor)
{
	(void)non_blocking; /* a copy on one device is ordered on its stream */
	return to_impl(self, dtype, copy, memory_format, true, ret_tensor);
}

int tn__to_dtype_meta(const tn_tensor *self, enum tn_dtype dtype, bool non_blocking, bool copy,
		      const enum tn_memory_format *memory_format, tn_tensor **ret_tensor)
{
	(void)non_blocking;
	return to_impl(self, dtype, copy, memory_format, false, ret_tensor);
}

/*
 * to.device, as ATen's to(device, dtype): self itself when device and dtype already match and
 * no copy is asked for (to.dtype's rule); otherwise a copy on @device converted to @dtype, laid
 * out as clone lays out. non_blocking lets a plain host<->device copy return before its DMA
 * ends.
 */
static int to_device_impl(const tn_tensor *self, tn_device device, enum tn_dtype dtype,
			  bool non_blocking, bool copy, const enum tn_memory_format *memory_format,
			  bool run, tn_tensor **ret_tensor)
{
	enum tn_memory_format fmt = memory_format ? *memory_format : TN_PRESERVE_FORMAT;
	int r;

	if ((r = tn__check_tensor_args(self, ret_tensor, "to")))
		return r;
	if (!tn_dtype_is_valid(dtype))
		return tn__error(TN_EINVAL, "to: invalid dtype %d", (int)dtype);
	if ((unsigned)device.type >= TN_NUM_DEVICE_TYPES)
		return tn__error(TN_EINVAL, "to: invalid device type %d", (int)device.type);
	if (!run) /* Meta: the result's geometry only */
		return to_impl(self, dtype, copy, memory_format, false, ret_tensor);
	if (self->storage->device.type == device.type && self->storage->device.index == device.index)
		return to_impl(self, dtype, copy, memory_format, true, ret_tensor);
	if (device.type == TN_DEVICE_META)
		return copy_to(self, device, fmt, dtype, false, false, ret_tensor, "to");
	return copy_to(self, device, fmt, dtype, true, non_blocking, ret_tensor, "to");
}

int tn__to_device(const tn_tensor *self, tn_device device, enum tn_dtype dtype,
		  bool non_blocking, bool copy, const enum tn_memory_format *memory_format,
		  tn_tensor **ret_tensor)
{
	return to_device_impl(self, device, dtype, non_blocking, copy, memory_format, true,
			      ret_tensor);
}

int tn__to_device_meta(const tn_tensor *self, tn_device device, enum tn_dtype dtype,
		       bool non_blocking, bool copy, const enum tn_memory_format *memory_format,
		       tn_tensor **ret_tensor)
{
	return to_device_impl(self, device, dtype, non_blocking, copy, memory_format, false,
			      ret_tensor);
}
