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

/* ---- CUDA (cuda/runtime.c; device.c without CUDA) ---- */

/* Make CUDA device @index the calling thread's current one, saving the previous in *saved;
 * tn__cuda_device_exit puts it back. TN_ENODEV when there is no such device. */
int tn__cuda_device_enter(int index, int *saved);
void tn__cuda_device_exit(int saved);
struct tn_arena;
/* An arena handle's mappings are about to be unmapped: unregister those it pinned
 * (tn_cuda_arena_register). Defined in cuda/pinned.c; a no-op without CUDA. */
void tn__cuda_arena_unmapping(struct tn_arena *a);

/* The kernel families of the CUDA backend (cuda/plan.h). */
enum tn__cuda_kernel {
	TN_CUDA_K_BINARY,  /* op: TN_BINOP_*, arg: const struct tn__alpha * */
	TN_CUDA_K_COMPARE, /* op: TN_CMP_* */
	TN_CUDA_K_UNARY,   /* op: TN_UN_* */
	TN_CUDA_K_PRED,    /* op: TN_PRED_* */
	TN_CUDA_K_BINARY2, /* op: TN_BIN2_* */
	TN_CUDA_K_WHERE,
	TN_CUDA_K_COPY,
	TN_CUDA_K_REDUCE, /* op: TN_RED_*, divisor: mean's element count (1 otherwise) */
};
struct tn_iter;
/* Run a built iterator's plan on the CUDA device of its first output, on the calling thread's
 * current stream, computing in @compute (what the CPU loop computes in). */
int tn__cuda_run(const struct tn_iter *it, enum tn__cuda_kernel kernel, int op, const void *arg,
		 enum tn_dtype compute, double divisor);
/* Every element of CUDA tensor @t set to the element at @elem (t's dtype). */
int tn__cuda_fill_tensor(tn_tensor *t, const void *elem);
/* copy_ with a CUDA tensor on either side (host<->device, device<->device, any dtypes). */
int tn__cuda_copy_tensor(tn_tensor *dst, const tn_tensor *src, bool non_blocking);
/* One element of CUDA tensor @t at device address @addr, read into / written from host memory. */
int tn__cuda_element_read(const tn_tensor *t, const void *addr, void *out);
int tn__cuda_element_write(tn_tensor *t, void *addr, const void *in);

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

/* Whether a live tensor's bytes are on a CUDA device. */static inline bool tn__is_cuda(const tn_tensor *t)
{
	return t->storage->device.type == TN_DEVICE_CUDA;
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


/* Convert a scalar to one element of @dtype at @out, with PyTorch's overflow check. */
int tn__scalar_to_element(tn_scalar value, enum tn_dtype dtype, void *out);
/* Read one element of @dtype at @in. */
tn_scalar tn__element_to_scalar(enum tn_dtype dtype, const void *in);
/* Read one element as a double (floating and integral types). */
double tn__element_to_double(enum tn_dtype dtype, const void *in);

/* Fill @count elements of @itemsize (1, 2, 4 or 8) bytes at @dst with the element at @elem,
 * through the fill kernel of the process's CPU capability. */
void tn__fill_elements(void *dst, const void *elem, size_t itemsize, int64_t count);

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

/* copy_: @src into @dst (broadcast, any dtypes and strides), through the TensorIterator on
 * OpenMP threads; @run false only checks (the Meta kernel). */
int tn__copy(tn_tensor *dst, const tn_tensor *src, bool run, const char *who);

/* The dtype PyTorch gives a Scalar operand's wrapped-number tensor: bool, int64 or float64. */
static inline enum tn_dtype tn__wrapped_scalar_dtype(tn_scalar v)
{
	return v.kind == TN_SCALAR_BOOL ? TN_BOOL : v.kind == TN_SCALAR_INT ? TN_INT64 : TN_FLOAT64;
}

/* A device as PyTorch prints it: "cpu", "meta", "cuda:0". */
void tn__format_device(char *buf, size_t size, tn_device device);

/* PyTorch's is_non_overlapping_and_dense: some permutation of the dims is contiguous. */
bool tn__is_non_overlapping_and_dense(const tn_tensor *t);

/* What is wrong with a tensor's geometry (dtype, ndim up to TN_ARENA_MAX_DIMS, sizes, strides,
 * storage offset) against @payload bytes of storage, or NULL (shm/directory.c; also checks
 * the views of shared CUDA storages). */
const char *tn__extent_problem(uint32_t dtype, uint32_t ndim, const int64_t *sizes,
			       const int64_t *strides, int64_t storage_offset, uint64_t payload);

#endif /* TN_INTERNAL_H */
