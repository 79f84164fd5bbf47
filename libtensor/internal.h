/* SPDX-License-Identifier: MIT */
/*
 * Declarations shared between libtensor's own source files; never installed.
 *
 * Internal non-static functions are named tn__*. Everything here may change at any time.
 */
#ifndef TN_INTERNAL_H
#define TN_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TN_BUILDING_LIBRARY 1
#include <tensor.h>

#include "../base/base.h"
#include "../numa/numa_internal.h"

/* The calling thread's allocator for CPU storages, ahead of the registry (tn_arena_use). */
void tn__allocator_set_thread(const tn_allocator *allocator);

/* ---- storages and tensors ---- */

struct tn_storage {
	uint32_t magic;
	bool resizable;
	/* A sealed arena tensor's bytes: operators refuse to write them (tn__check_writable). */
	bool readonly;
	_Atomic int64_t refcount;
	/* Weak references, plus one held collectively by the strong references. */
	_Atomic int64_t weakcount;
	/* Tensors over this storage: shrinking is refused while any exists, since a view could
	 * then reach past the new end. */
	_Atomic int64_t tensors;
	void *data;
	size_t nbytes;
	const tn_allocator *allocator; /* NULL for blobs and meta storages */
	tn_deleter deleter;
	void *deleter_ctx;
	tn_device device;
};

#define TN_INLINE_DIMS 5

struct tn_tensor {
	uint32_t magic;
	int ndim;
	_Atomic int64_t refcount;
	tn_storage *storage;
	int64_t offset; /* elements */
	int64_t numel;
	enum tn_dtype dtype;
	bool contiguous;
	bool channels_last;
	bool channels_last_3d;
	int64_t *sizes;   /* inline_dims or a heap array of 2 * ndim entries */
	int64_t *strides; /* sizes + ndim */
	int64_t inline_dims[2 * TN_INLINE_DIMS];
};

/* Element size of a valid dtype, without the call (hot paths; the public one checks). */
static inline size_t tn__itemsize(enum tn_dtype dtype)
{
	static const unsigned char sizes[] = {
#define TN_X_(e, ctype, name, size, cat, sgn) size,
		TN_DTYPE_LIST(TN_X_)
#undef TN_X_
	};
	return sizes[dtype];
}

static inline bool tn__is_floating(enum tn_dtype dtype)
{
	return dtype >= TN_FLOAT16 && dtype <= TN_FLOAT64;
}

/* The address of element [0, ..., 0] of a live tensor (NULL for Meta). */
static inline char *tn__data(const tn_tensor *t)
{
	char *base = (char *)t->storage->data;
	return base ? base + t->offset * (int64_t)tn__itemsize(t->dtype) : NULL;
}

/* What a kernel reached through dispatch key @key does: Meta kernels check and allocate only;
 * CPU kernels run the CPU loops; the kernels of any other key run on its backend
 * (tn__device_run, backend.h). The dispatcher chose the key once, from the arguments. */
static inline bool tn__key_runs(enum tn_dispatch_key key)
{
	return key != TN_KEY_META;
}
static inline bool tn__key_on_backend(enum tn_dispatch_key key)
{
	return key != TN_KEY_CPU && key != TN_KEY_META;
}

/* A kernel family's definitions for every dispatch key: KERNELS_KEY(NAME, OP, SUFFIX, KEY)
 * defines the tn__<NAME>..._<SUFFIX> kernels of the op table for key KEY. */
#define TN_FOR_EACH_KEY(KERNELS_KEY, NAME, OP)      \
	KERNELS_KEY(NAME, OP, cpu, TN_KEY_CPU)      \
	KERNELS_KEY(NAME, OP, cuda, TN_KEY_CUDA)    \
	KERNELS_KEY(NAME, OP, meta, TN_KEY_META)

/* Whether a live tensor's bytes are in this process's memory (a CPU or Meta storage), not on
 * a backend's device. */
static inline bool tn__on_host(const tn_tensor *t)
{
	return t->storage->device.type == TN_DEVICE_CPU || t->storage->device.type == TN_DEVICE_META;
}

/* Make a tensor over @storage (a new reference is taken) after checking every argument and the
 * bounds; strides NULL means contiguous. @who names the caller in messages ("view", ...). */
int tn__tensor_make(tn_storage *storage, int64_t offset, int ndim, const int64_t *sizes,
		    const int64_t *strides, enum tn_dtype dtype, tn_tensor **ret);

/* TN_EBADF with the one message for a dead tensor handle, naming @who. */
int tn__bad_tensor(const char *who);

/* The handle check alone (in-place and out= arguments): 0 or tn__bad_tensor(@who). */
static inline int tn__check_live(const tn_tensor *t, const char *who)
{
	return tn__handle_is(t, TN_MAGIC_TENSOR) ? 0 : tn__bad_tensor(who);
}

/* The entry check of every function taking a tensor and returning one: a live handle and a
 * non-NULL output, else TN_EBADF / TN_EINVAL with @who in the message. */
int tn__check_tensor_args(const tn_tensor *t, const void *ret, const char *who);

/* Wrap @dim for a tensor of @ndim dims as PyTorch's maybe_wrap_dim (0-dim tensors accept
 * -1 and 0). Returns the wrapped dim or TN_ERANGE with PyTorch's message. */
int tn__wrap_dim(int64_t dim, int ndim);

/* Contiguous strides for @sizes; returns TN_EOVERFLOW when a stride overflows. */
int tn__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);


/* The C++ type name of @dtype as c10's messages write it ("int16_t", "int", "at::Half"). */
const char *tn__dtype_cpp_name(enum tn_dtype dtype);
/* The C++ type name PyTorch's out= dtype checks print (TypeMeta's: "float", "long int",
 * "c10::Half"). */
const char *tn__typemeta_name(enum tn_dtype dtype);
/* Convert a scalar to one element of @dtype at @out, with PyTorch's overflow check. */
int tn__scalar_to_element(tn_scalar value, enum tn_dtype dtype, void *out);
/* Read one element of @dtype at @in. */
tn_scalar tn__element_to_scalar(enum tn_dtype dtype, const void *in);
/* Read one element as a double (floating and integral types). */
double tn__element_to_double(enum tn_dtype dtype, const void *in);

/* Fill @count elements of @itemsize (1, 2, 4 or 8) bytes at @dst with the element at @elem,
 * through the fill kernel of the process's CPU capability. */
void tn__fill_elements(void *dst, const void *elem, size_t itemsize, int64_t count);

/* PyTorch's compute_contiguous and compute_channels_last_contiguous_2d/3d over @sizes and
 * @strides (NHWC order for 4 dims, NDHWC for 5; false for other ranks): the tensor's flags, and
 * the iterator's fast setup over layouts it infers. */
bool tn__compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides, int64_t numel);
bool tn__compute_channels_last(int ndim, const int64_t *sizes, const int64_t *strides);

/* Strides of a dense tensor of @sizes in memory format @fmt (not preserve). */
int tn__format_strides(int ndim, const int64_t *sizes, enum tn_memory_format fmt,
		       int64_t *strides, const char *who);

/* An uninitialised tensor with @t's dtype and device and the given geometry. */
int tn__empty_like(const tn_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
		   tn_tensor **ret, const char *who);

/* An uninitialised tensor of @dtype on @device with the given geometry (strides NULL:
 * contiguous). */
int tn__empty_like_device(tn_device device, enum tn_dtype dtype, int ndim, const int64_t *sizes,
			  const int64_t *strides, tn_tensor **ret, const char *who);

/* copy_: @src into @dst (broadcast, any dtypes and strides) by the kernels of dispatch key
 * @key: the CPU's through the TensorIterator on OpenMP threads, a backend's copy, or for
 * Meta only the checks. */
int tn__copy(tn_tensor *dst, const tn_tensor *src, enum tn_dispatch_key key, const char *who);
/* An out= form that PyTorch 1.13 generates from the functional one (relu.out, the
 * Scalar_Tensor_out overloads): the result @r converted into @out, which must have its shape
 * (PyTorch resizes @out; libtensor does not). */
/* 0 when @out has the shape @ndim/@sizes, else TN_EINVAL with TensorIterator's message (and
 * that libtensor does not resize out= tensors). */
int tn__check_out_shape(const tn_tensor *out, int ndim, const int64_t *sizes);
int tn__copy_result_into(tn_tensor *out, const tn_tensor *r, enum tn_dispatch_key key,
			 const char *who);
/* fill_ by the kernels of dispatch key @key (operators that fill a result they made). */
int tn__fill_key(tn_tensor *t, tn_scalar value, enum tn_dispatch_key key);
/* tn__copy on the CPU (both tensors in host memory), for backends staging a copy. */
int tn__copy_host(tn_tensor *dst, const tn_tensor *src);

/* The dtype PyTorch gives a Scalar operand's wrapped-number tensor: bool, int64 or float64. */
static inline enum tn_dtype tn__wrapped_scalar_dtype(tn_scalar v)
{
	return v.kind == TN_SCALAR_BOOL ? TN_BOOL : v.kind == TN_SCALAR_INT ? TN_INT64 : TN_FLOAT64;
}

/* A device as PyTorch prints it: "cpu", "meta", "cuda:0". */
void tn__format_device(char *buf, size_t size, tn_device device);

/* PyTorch's infer_dense_strides: dense strides in the order of @t's strides (the layout
 * .to() and clone give a tensor that is not non-overlapping and dense). */
void tn__infer_dense_strides(const tn_tensor *t, int64_t *strides);
/* The strides preserve_format gives a copy of @t (empty_like): @t's own when it is
 * non-overlapping and dense, else tn__infer_dense_strides. */
void tn__preserve_strides(const tn_tensor *t, int64_t *strides);
/* TN_EOVERFLOW with ATen's computeStorageNbytes message for @sizes and @strides (a negative
 * size or stride, which its uint64 arithmetic overflows on). */
int tn__storage_overflow_error(int ndim, const int64_t *sizes, const int64_t *strides);
/* PyTorch's suggest_memory_format: channels-last (3d) when @t's strides are ordered so (its
 * is_channels_last_strides_2d_s4 / _3d_s5, with their tie-breaks), else contiguous. */
enum tn_memory_format tn__suggest_memory_format(const tn_tensor *t);
/* PyTorch's is_non_overlapping_and_dense: some permutation of the dims is contiguous. */
bool tn__is_non_overlapping_and_dense(const tn_tensor *t);

/* PyTorch's assert_no_overlap: TN_EINVAL with its message when an out= tensor @out shares
 * bytes with an input @in (NULL, empty or another storage: 0). */
int tn__check_no_overlap(const tn_tensor *out, const tn_tensor *in);
/* PyTorch's assert_no_internal_overlap: TN_EINVAL when two elements of @out are one location
 * (a stride-0 dimension of size > 1). */
int tn__check_internal_overlap(const tn_tensor *out);
#endif /* TN_INTERNAL_H */
