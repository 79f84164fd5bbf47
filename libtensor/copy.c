/* SPDX-License-Identifier: MIT */
/*
 * Copies between tensors of the same dtype (contiguous(), clone(), reshape's fallback) and
 * fills. The TensorIterator will take these over with dtype conversion, broadcasting and
 * threads; until then this is a plain strided walk whose innermost dimension is one memcpy
 * when both sides are dense there.
 */
#include <string.h>

#include "internal.h"

void tn__fill_elements(void *dst, const void *elem, size_t itemsize, int64_t count)
{
	unsigned char *d = dst;
	size_t total = (size_t)count * itemsize, filled;
	bool same = true;

	if (count <= 0)
		return;
	for (size_t i = 1; i < itemsize; i++)
		same &= ((const unsigned char *)elem)[i] == ((const unsigned char *)elem)[0];
	if (same) { /* zero, one-byte and byte-repeating patterns */
		memset(d, ((const unsigned char *)elem)[0], total);
		return;
	}
	/* Write one element, then double the filled prefix with memcpy: the copies run at memory
	 * bandwidth and the pattern stays aligned to the element size. */
	memcpy(d, elem, itemsize);
	filled = itemsize;
	while (filled < total) {
		size_t n = filled < total - filled ? filled : total - filled;
		/* Cap the chunk so the source stays cache-resident. */
		if (n > ((size_t)1 << 16))
			n = (size_t)1 << 16;
		memcpy(d + filled, d, n);
		filled += n;
	}
}

/* Copy one row of @n elements between strided positions (strides in bytes). */
static void copy_row(unsigned char *dst, int64_t dstride, const unsigned char *src,
		     int64_t sstride, int64_t n, size_t itemsize)
{
	if (dstride == (int64_t)itemsize && sstride == (int64_t)itemsize) {
		memcpy(dst, src, (size_t)n * itemsize);
		return;
	}
	switch (itemsize) {
#define ROW(T)                                                                   \
	for (int64_t i = 0; i < n; i++)                                          \
		memcpy(dst + i * dstride, src + i * sstride, sizeof(T));         \
	return;
	case 1:
		ROW(uint8_t)
	case 2:
		ROW(uint16_t)
	case 4:
		ROW(uint32_t)
	case 8:
		ROW(uint64_t)
#undef ROW
	default:
		for (int64_t i = 0; i < n; i++)
			memcpy(dst + i * dstride, src + i * sstride, itemsize);
	}
}

void tn__copy_same_dtype(tn_tensor *dst, const tn_tensor *src)
{
	size_t isz = tn_dtype_size(src->dtype);
	int n = src->ndim;
	int64_t counter[TN_MAX_DIMS] = { 0 };

	if (src->numel == 0)
		return;
	unsigned char *d = tn_tensor_data(dst);
	const unsigned char *s = tn_tensor_data(src);
	if (n == 0 || (src->contiguous && dst->contiguous)) {
		memcpy(d, s, (size_t)src->numel * isz);
		return;
	}
	int64_t inner = src->sizes[n - 1];
	int64_t ds = dst->strides[n - 1] * (int64_t)isz, ss = src->strides[n - 1] * (int64_t)isz;
	/* Odometer over the outer dimensions (the reference notes' DimCounter, 1-D steps). */
	for (;;) {
		int64_t doff = 0, soff = 0;
		for (int k = 0; k < n - 1; k++) {
			doff += counter[k] * dst->strides[k];
			soff += counter[k] * src->strides[k];
		}
		copy_row(d + doff * (int64_t)isz, ds, s + soff * (int64_t)isz, ss, inner, isz);
		int k = n - 2;
		while (k >= 0 && ++counter[k] == src->sizes[k])
			counter[k--] = 0;
		if (k < 0)
			return;
	}
}

static int check_cpu_tensor(const tn_tensor *t, void *ret, const char *who)
{
	int r = tn__check_tensor_args(t, ret, who);
	if (r)
		return r;
	if (t->storage->device.type != TN_DEVICE_CPU)
		return tn__error(TN_ENOTSUP, "%s: only CPU tensors can be copied yet", who);
	return 0;
}

TN_EXPORT int tn_clone(const tn_tensor *tensor, tn_tensor **ret_tensor)
{
	tn_tensor *out;
	int r;

	if ((r = check_cpu_tensor(tensor, ret_tensor, "clone")))
		return r;
	if ((r = tn_empty(tensor->ndim, tensor->sizes, tensor->dtype, &out)))
		return r;
	tn__copy_same_dtype(out, tensor);
	*ret_tensor = out;
	return 0;
}

TN_EXPORT int tn_contiguous(const tn_tensor *tensor, tn_tensor **ret_tensor)
{
	int r;

	if ((r = check_cpu_tensor(tensor, ret_tensor, "contiguous")))
		return r;
	if (tensor->contiguous) {
		*ret_tensor = tn_tensor_ref((tn_tensor *)tensor);
		return 0;
	}
	return tn_clone(tensor, ret_tensor);
}
