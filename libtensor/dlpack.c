// SPDX-License-Identifier: MIT
/*
 * DLPack export and import (tensor/dlpack.h), in both ABIs: the legacy DLManagedTensor and the
 * versioned DLManagedTensorVersioned of DLPack 1.x.
 *
 * Export: one allocation holds the managed tensor, its shape and strides, and a reference to
 * the tensor, which keeps the storage (and an arena block's hold) alive until the consumer
 * calls the deleter. Import: a from_blob storage over the producer's bytes whose deleter calls
 * the producer's; a managed tensor libtensor made is recognised by its deleter and answered by
 * a tensor over the same storage, as PyTorch answers its own capsules.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/dlpack.h>

#include "internal.h"

/* ---- types and devices ---- */

static const DLDataType dl_types[TN_NUM_DTYPES] = {
	[TN_BOOL] = { kDLBool, 8, 1 },	    [TN_UINT8] = { kDLUInt, 8, 1 },
	[TN_INT8] = { kDLInt, 8, 1 },	    [TN_INT16] = { kDLInt, 16, 1 },
	[TN_INT32] = { kDLInt, 32, 1 },	    [TN_INT64] = { kDLInt, 64, 1 },
	[TN_FLOAT16] = { kDLFloat, 16, 1 }, [TN_BFLOAT16] = { kDLBfloat, 16, 1 },
	[TN_FLOAT32] = { kDLFloat, 32, 1 }, [TN_FLOAT64] = { kDLFloat, 64, 1 },
};

static int dtype_of(DLDataType t, enum tn_dtype *ret, const char *fn)
{
	if (t.lanes != 1)
		return tn__error(TN_ENOTSUP, "%s: DLPack type of %u lanes (libtensor takes one)", fn,
				 (unsigned)t.lanes);
	for (int d = 0; d < TN_NUM_DTYPES; d++)
		if (dl_types[d].code == t.code && dl_types[d].bits == t.bits) {
			*ret = (enum tn_dtype)d;
			return 0;
		}
	static const char *const codes[] = { "int", "uint", "float", "opaque handle", "bfloat",
					     "complex", "bool" };
	return tn__error(TN_ENOTSUP, "%s: DLPack type %s%u is not one of libtensor's dtypes", fn,
			 t.code < sizeof(codes) / sizeof(codes[0]) ? codes[t.code] : "code ",
			 t.code < sizeof(codes) / sizeof(codes[0]) ? (unsigned)t.bits
								    : (unsigned)t.code);
}

static int device_of(DLDevice d, tn_device *ret, const char *fn)
{
	switch (d.device_type) {
	case kDLCPU:
	case kDLCUDAHost: /* pinned host memory: the CPU reads it */
		*ret = TN_CPU;
		return 0;
	case kDLCUDA:
		if (d.device_id < 0)
			return tn__error(TN_EINVAL, "%s: CUDA device index %d", fn, (int)d.device_id);
		*ret = (tn_device){ TN_DEVICE_CUDA, d.device_id };
		return 0;
	default:
		return tn__error(TN_ENOTSUP, "%s: DLPack device type %d is neither the CPU nor CUDA",
				 fn, (int)d.device_type);
	}
}

/* ---- export ---- */

struct export_ctx {
	union {
		DLManagedTensor legacy;
		DLManagedTensorVersioned versioned;
	} m;
	tn_tensor *tensor;
	int64_t dims[]; /* shape, then strides */
};

static void free_export(struct export_ctx *c)
{
	tn_tensor_unref(c->tensor);
	free(c);
}

static void legacy_deleter(DLManagedTensor *self)
{
	if (self)
		free_export(self->manager_ctx);
}

static void versioned_deleter(DLManagedTensorVersioned *self)
{
	if (self)
		free_export(self->manager_ctx);
}

static int export_tensor(const tn_tensor *t, bool versioned, struct export_ctx **ret,
			 const char *fn)
{
	if (!tn__handle_is(t, TN_MAGIC_TENSOR))
		return tn__error(TN_EBADF, "%s: not a tensor handle", fn);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_managed", fn);
	tn_device dev = t->storage->device;
	if (dev.type == TN_DEVICE_META)
		return tn__error(TN_EINVAL, "%s: a Meta tensor has no data to export", fn);
	struct export_ctx *c = calloc(1, sizeof(*c) + 2 * (size_t)t->ndim * sizeof(int64_t));
	if (!c)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	c->tensor = tn_tensor_ref((tn_tensor *)t);
	memcpy(c->dims, t->sizes, (size_t)t->ndim * sizeof(int64_t));
	memcpy(c->dims + t->ndim, t->strides, (size_t)t->ndim * sizeof(int64_t));
	DLTensor *d = versioned ? &c->m.versioned.dl_tensor : &c->m.legacy.dl_tensor;
	d->data = tn__data(t);
	d->device = dev.type == TN_DEVICE_CUDA ? (DLDevice){ kDLCUDA, dev.index }
					       : (DLDevice){ kDLCPU, 0 };
	d->ndim = t->ndim;
	d->dtype = dl_types[t->dtype];
	d->shape = c->dims;
	d->strides = c->dims + t->ndim;
	d->byte_offset = 0;
	if (versioned) {
		c->m.versioned.version = (DLPackVersion){ 1, 0 };
		c->m.versioned.manager_ctx = c;
		c->m.versioned.deleter = versioned_deleter;
		c->m.versioned.flags = t->storage->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
	} else {
		c->m.legacy.manager_ctx = c;
		c->m.legacy.deleter = legacy_deleter;
	}
	*ret = c;
	return 0;
}

TN_EXPORT int tn_to_dlpack(const tn_tensor *tensor, DLManagedTensor **ret_managed)
{
	struct export_ctx *c;
	int r = export_tensor(tensor, false, &c, "tn_to_dlpack");
	if (r == 0)
		*ret_managed = &c->m.legacy;
	return r;
}

TN_EXPORT int tn_to_dlpack_versioned(const tn_tensor *tensor,
				     DLManagedTensorVersioned **ret_managed)
{
	struct export_ctx *c;
	int r = export_tensor(tensor, true, &c, "tn_to_dlpack_versioned");
	if (r == 0)
		*ret_managed = &c->m.versioned;
	return r;
}

/* ---- import ---- */

/* The storage's deleter context: the producer's managed tensor, whose deleter runs when the
 * storage dies (armed once the import succeeded, so that a failure leaves it to the caller). */
struct import_ctx {
	DLManagedTensor *legacy;
	DLManagedTensorVersioned *versioned;
	bool armed;
};

static void import_release(void *data, void *ctx)
{
	(void)data;
	struct import_ctx *c = ctx;
	if (c->armed) {
		if (c->legacy && c->legacy->deleter)
			c->legacy->deleter(c->legacy);
		else if (c->versioned && c->versioned->deleter)
			c->versioned->deleter(c->versioned);
	}
	free(c);
}

/* A tensor over a managed tensor libtensor exported: the same storage and view. */
static int import_own(const struct export_ctx *c, tn_tensor **ret)
{
	const tn_tensor *t = c->tensor;
	return tn_tensor_new(t->storage, t->offset, t->ndim, t->sizes, t->strides, t->dtype, ret);
}

static int check_tensor(const DLTensor *d, enum tn_dtype *ret_dt, tn_device *ret_dev,
			int64_t *strides, uint64_t *ret_nbytes, const char *fn)
{
	enum tn_dtype dt = TN_UINT8;
	tn_device dev = TN_CPU;
	int r;
	if (d->ndim < 0 || d->ndim > TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "%s: ndim %d outside [0, %d]", fn, (int)d->ndim,
				 TN_MAX_DIMS);
	if (d->ndim > 0 && !d->shape)
		return tn__error(TN_EINVAL, "%s: NULL shape for %d dims", fn, (int)d->ndim);
	if ((r = dtype_of(d->dtype, &dt, fn)) || (r = device_of(d->device, &dev, fn)))
		return r;
	const int n = d->ndim;
	uint64_t numel = 1, extent = 0; /* elements: the largest offset reached, plus one */
	bool empty = false;
	for (int i = n - 1; i >= 0; i--) {
		int64_t s = d->shape[i];
		if (s < 0)
			return tn__error(TN_EINVAL, "%s: negative size %lld in dim %d", fn,
					 (long long)s, i);
		empty |= s == 0;
		strides[i] = d->strides ? d->strides[i] : (int64_t)numel;
		if (strides[i] < 0)
			return tn__error(TN_EINVAL, "%s: negative stride %lld in dim %d (libtensor, "
					 "as PyTorch, takes none)", fn, (long long)strides[i], i);
		if (s && __builtin_mul_overflow(numel, (uint64_t)s, &numel))
			return tn__error(TN_EINVAL, "%s: the shape's element count overflows", fn);
	}
	if (!empty) {
		extent = 1;
		for (int i = 0; i < n; i++) {
			uint64_t reach;
			if (__builtin_mul_overflow((uint64_t)(d->shape[i] - 1), (uint64_t)strides[i],
						   &reach) ||
			    __builtin_add_overflow(extent, reach, &extent))
				return tn__error(TN_EINVAL, "%s: the strides reach past 2^64 elements",
						 fn);
		}
	}
	uint64_t nbytes;
	if (__builtin_mul_overflow(extent, (uint64_t)tn__itemsize(dt), &nbytes) ||
	    nbytes > (uint64_t)INT64_MAX)
		return tn__error(TN_EINVAL, "%s: the tensor's bytes overflow", fn);
	if (nbytes && !d->data)
		return tn__error(TN_EINVAL, "%s: NULL data for %llu bytes", fn,
				 (unsigned long long)nbytes);
	*ret_dt = dt;
	*ret_dev = dev;
	*ret_nbytes = nbytes;
	return 0;
}

/* A tensor over @d's bytes; takes @ic, which the storage's deleter frees (or this function,
 * when it fails before there is a storage). */
static int import_tensor(const DLTensor *d, struct import_ctx *ic, bool readonly,
			 tn_tensor **ret, const char *fn)
{
	enum tn_dtype dt = TN_UINT8;
	tn_device dev = TN_CPU;
	int64_t strides[TN_MAX_DIMS];
	uint64_t nbytes = 0;
	tn_storage *s;
	int r = check_tensor(d, &dt, &dev, strides, &nbytes, fn);
	if (r == 0) {
		char *data = nbytes ? (char *)d->data + d->byte_offset : NULL;
		r = tn_storage_from_blob(dev, data, (size_t)nbytes, import_release, ic, &s);
	}
	if (r) {
		free(ic);
		return r;
	}
	s->readonly = readonly;
	const int n = d->ndim;
	r = tn_tensor_new(s, 0, n, n ? d->shape : NULL, n ? strides : NULL, dt, ret);
	if (r == 0)
		ic->armed = true;
	tn_storage_unref(s); /* the tensor's reference now; on failure, frees ic unarmed */
	return r;
}

/* Either form (the other NULL): libtensor's own export, or a foreign producer's. */
static int import_managed(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
			  tn_tensor **ret, const char *fn)
{
	void *ctx = legacy ? legacy->manager_ctx : versioned->manager_ctx;
	if (legacy ? legacy->deleter == legacy_deleter : versioned->deleter == versioned_deleter) {
		int r = import_own(ctx, ret);
		if (r == 0 && legacy)
			legacy->deleter(legacy);
		else if (r == 0)
			versioned->deleter(versioned);
		return r;
	}
	struct import_ctx *ic = calloc(1, sizeof(*ic));
	if (!ic)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	ic->legacy = legacy;
	ic->versioned = versioned;
	return import_tensor(legacy ? &legacy->dl_tensor : &versioned->dl_tensor, ic,
			     versioned && (versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY), ret,
			     fn);
}

TN_EXPORT int tn_from_dlpack(DLManagedTensor *m, tn_tensor **ret_tensor)
{
	static const char fn[] = "tn_from_dlpack";
	if (!m || !ret_tensor)
		return tn__error(TN_EINVAL, "%s: NULL %s", fn, m ? "ret_tensor" : "managed");
	return import_managed(m, NULL, ret_tensor, fn);
}

TN_EXPORT int tn_from_dlpack_versioned(DLManagedTensorVersioned *m, tn_tensor **ret_tensor)
{
	static const char fn[] = "tn_from_dlpack_versioned";
	if (!m || !ret_tensor)
		return tn__error(TN_EINVAL, "%s: NULL %s", fn, m ? "ret_tensor" : "managed");
	if (m->version.major != 1)
		return tn__error(TN_ENOTSUP, "%s: DLPack version %u.%u (libtensor takes 1.x)", fn,
				 (unsigned)m->version.major, (unsigned)m->version.minor);
	return import_managed(NULL, m, ret_tensor, fn);
}
