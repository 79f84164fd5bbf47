/* SPDX-License-Identifier: MIT */
/*
 * Tensors: typed, strided views over a storage.
 *
 * A tensor is a storage plus a storage offset (in elements), a dtype, sizes and strides (in
 * elements, never negative), with the element count and contiguity flags cached. Tensors are
 * reference counted; views (tn_view, tn_permute, tn_slice, ...) are new tensors that share the
 * storage and never copy. Every tensor, however it was made, is bounds-checked against its
 * storage when it is made: no element can lie outside the storage's bytes, and sizes whose
 * element count or byte size overflows are refused.
 *
 * Conventions for every function here: the input handle is borrowed; *ret_tensor receives a
 * new reference that the caller drops with tn_tensor_unref(); outputs are written on success
 * only; failures return a negative TN_E* code and leave a message in tn_last_error().
 * Dimensions may be negative and wrap as in PyTorch (-1 is the last dimension).
 */
#ifndef TENSOR_TENSOR_H
#define TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tensor/device.h>
#include <tensor/dtype.h>
#include <tensor/macros.h>
#include <tensor/storage.h>

TN_BEGIN_DECLS

typedef struct tn_tensor tn_tensor;

enum tn_memory_format {
	TN_CONTIGUOUS_FORMAT, /* row-major */
	TN_CHANNELS_LAST,     /* 4-d NCHW sizes laid out as NHWC */
	TN_CHANNELS_LAST_3D,  /* 5-d NCDHW sizes laid out as NDHWC */
};

/* ---- Factories (CPU) ---------------------------------------------------------------- */

/*
 * tn_empty - an uninitialised contiguous tensor of @ndim sizes (0 <= ndim <= TN_MAX_DIMS;
 * @sizes may be NULL when ndim is 0). Errors: TN_EINVAL (negative size, bad dtype, NULL
 * ret_tensor), TN_EOVERFLOW (element count or byte size overflows), TN_ENOMEM.
 */
TN_EXPORT int tn_empty(int ndim, const int64_t *sizes, enum tn_dtype dtype,
		       tn_tensor **ret_tensor);

/*
 * tn_empty_strided - an uninitialised tensor with the given strides; the storage is just large
 * enough for the furthest element. Negative strides are refused (TN_EINVAL).
 */
TN_EXPORT int tn_empty_strided(int ndim, const int64_t *sizes, const int64_t *strides,
			       enum tn_dtype dtype, tn_tensor **ret_tensor);

/* tn_zeros, tn_ones - contiguous tensors filled with 0 or 1. */
TN_EXPORT int tn_zeros(int ndim, const int64_t *sizes, enum tn_dtype dtype,
		       tn_tensor **ret_tensor);
TN_EXPORT int tn_ones(int ndim, const int64_t *sizes, enum tn_dtype dtype,
		      tn_tensor **ret_tensor);

/*
 * tn_full - a contiguous tensor filled with @value converted to @dtype. A value the dtype
 * cannot hold fails with TN_EOVERFLOW ("value cannot be converted to type uint8 without
 * overflow"); infinities and NaN are allowed for floating dtypes.
 */
TN_EXPORT int tn_full(int ndim, const int64_t *sizes, tn_scalar value, enum tn_dtype dtype,
		      tn_tensor **ret_tensor);

/*
 * tn_arange - the 1-d tensor start, start+step, ... up to but excluding @end, as PyTorch's
 * torch.arange: ceil((end-start)/step) elements, computed in double when any argument is a
 * double, in int64 otherwise. Errors: TN_EINVAL ("step must be nonzero", "upper bound and
 * larger bound inconsistent with step sign", non-finite bounds), TN_EOVERFLOW.
 */
TN_EXPORT int tn_arange(tn_scalar start, tn_scalar end, tn_scalar step, enum tn_dtype dtype,
			tn_tensor **ret_tensor);

/*
 * tn_from_blob - a CPU tensor over caller-owned memory at @data. @strides may be NULL for
 * contiguous. The storage covers exactly the bytes the view reaches; @deleter(data, ctx) runs
 * when the storage dies (not on failure). @data must be aligned for the dtype.
 */
TN_EXPORT int tn_from_blob(void *data, int ndim, const int64_t *sizes, const int64_t *strides,
			   enum tn_dtype dtype, tn_deleter deleter, void *ctx,
			   tn_tensor **ret_tensor);

/*
 * tn_tensor_new - a tensor over an existing @storage (borrowed; the tensor takes its own
 * reference) at element offset @storage_offset. @strides may be NULL for contiguous. Fails
 * with TN_ERANGE when an element would lie outside the storage ("setStorage: sizes [2, 3],
 * strides [3, 1], storage offset 0, and itemsize 4 requiring a storage size of 24 are out of
 * bounds for storage of size 20").
 */
TN_EXPORT int tn_tensor_new(tn_storage *storage, int64_t storage_offset, int ndim,
			    const int64_t *sizes, const int64_t *strides, enum tn_dtype dtype,
			    tn_tensor **ret_tensor);

/* ---- References and accessors --------------------------------------------------------- */

/* tn_tensor_ref returns @tensor (NULL for a bad handle); tn_tensor_unref accepts NULL. */
TN_EXPORT tn_tensor *tn_tensor_ref(tn_tensor *tensor);
TN_EXPORT tn_tensor *tn_tensor_unref(tn_tensor *tensor);

/*
 * Getters. They cannot fail on a live tensor; on a bad handle they return -1, NULL, 0 or
 * false. Pointers returned are borrowed and live as long as the tensor.
 */
TN_EXPORT int tn_tensor_ndim(const tn_tensor *tensor);
TN_EXPORT const int64_t *tn_tensor_sizes(const tn_tensor *tensor);
TN_EXPORT const int64_t *tn_tensor_strides(const tn_tensor *tensor);
TN_EXPORT int64_t tn_tensor_numel(const tn_tensor *tensor);
TN_EXPORT int64_t tn_tensor_storage_offset(const tn_tensor *tensor);
TN_EXPORT enum tn_dtype tn_tensor_dtype(const tn_tensor *tensor);
TN_EXPORT size_t tn_tensor_itemsize(const tn_tensor *tensor);
TN_EXPORT size_t tn_tensor_nbytes(const tn_tensor *tensor);
TN_EXPORT tn_device tn_tensor_device(const tn_tensor *tensor);
TN_EXPORT tn_storage *tn_tensor_storage(const tn_tensor *tensor);
TN_EXPORT void *tn_tensor_data(const tn_tensor *tensor); /* address of element [0, ..., 0] */
TN_EXPORT bool tn_tensor_is_contiguous(const tn_tensor *tensor);
TN_EXPORT bool tn_tensor_is_contiguous_as(const tn_tensor *tensor, enum tn_memory_format fmt);

/*
 * tn_tensor_size / tn_tensor_stride - one dimension's size or stride, @dim wrapped.
 * Errors: TN_EBADF, TN_ERANGE ("Dimension out of range (expected to be in range of [-2, 1],
 * but got 2)"), TN_EINVAL (NULL output).
 */
TN_EXPORT int tn_tensor_size(const tn_tensor *tensor, int dim, int64_t *ret_size);
TN_EXPORT int tn_tensor_stride(const tn_tensor *tensor, int dim, int64_t *ret_stride);

/*
 * tn_tensor_get / tn_tensor_set - read or write the element at @index, an array of @nindex
 * entries that must equal tn_tensor_ndim() (each wrapped like a Python index; @index may be
 * NULL for a 0-dim tensor). get returns a bool, int or double scalar by
 * the dtype's category; set converts with the same overflow check as tn_full. tn_tensor_item
 * reads the only element of a one-element tensor ("a Tensor with 6 elements cannot be
 * converted to Scalar"). Floating values written to an integer dtype truncate toward zero and
 * any non-zero value becomes true for bool, as in PyTorch. Errors: TN_EBADF, TN_EINVAL (NULL
 * output, a count that is not the tensor's ndim, more than one element for item), TN_ERANGE ("index 5 is out of bounds for
 * dimension 0 with size 3"), TN_EOVERFLOW, TN_ENOTSUP (not a CPU tensor).
 */
TN_EXPORT int tn_tensor_get(const tn_tensor *tensor, int nindex, const int64_t *index,
			    tn_scalar *ret_value);
TN_EXPORT int tn_tensor_set(tn_tensor *tensor, int nindex, const int64_t *index, tn_scalar value);
TN_EXPORT int tn_tensor_item(const tn_tensor *tensor, tn_scalar *ret_value);

/* ---- Views: they share the storage and never copy ------------------------------------- */

/*
 * tn_view - the same elements with sizes @shape (one entry may be -1, inferred). Fails with
 * TN_EINVAL when the strides cannot express it: "view size is not compatible with input
 * tensor's size and stride (at least one dimension spans across two contiguous subspaces).
 * Use .reshape(...) instead.", or when the element counts differ: "shape '[2, -1]' is invalid
 * for input of size 7".
 */
TN_EXPORT int tn_view(const tn_tensor *tensor, int ndim, const int64_t *shape,
		      tn_tensor **ret_tensor);

/*
 * tn_reshape - as tn_view when the strides allow it, else a contiguous copy.
 */
TN_EXPORT int tn_reshape(const tn_tensor *tensor, int ndim, const int64_t *shape,
			 tn_tensor **ret_tensor);

/* tn_permute - reorder dimensions: result dim i is input dim dims[i]; @ndim must match. */
TN_EXPORT int tn_permute(const tn_tensor *tensor, int ndim, const int64_t *dims,
			 tn_tensor **ret_tensor);

/* tn_transpose - swap two dimensions. */
TN_EXPORT int tn_transpose(const tn_tensor *tensor, int dim0, int dim1, tn_tensor **ret_tensor);

/*
 * tn_slice - elements start, start+step, ... before end along @dim, as Python's t[start:end:step]:
 * negative start/end count from the end, both are clamped to [0, size], INT64_MAX means "to
 * the end". @step must be positive ("slice step must be positive").
 */
TN_EXPORT int tn_slice(const tn_tensor *tensor, int dim, int64_t start, int64_t end, int64_t step,
		       tn_tensor **ret_tensor);

/* tn_narrow - @length elements from @start (which may be negative) along @dim; no clamping. */
TN_EXPORT int tn_narrow(const tn_tensor *tensor, int dim, int64_t start, int64_t length,
			tn_tensor **ret_tensor);

/* tn_select - index @index (negative wraps) of @dim, which is removed. */
TN_EXPORT int tn_select(const tn_tensor *tensor, int dim, int64_t index, tn_tensor **ret_tensor);

/*
 * tn_expand - broadcast to @sizes (ndim >= tensor's ndim; new dims are prepended; -1 keeps a
 * size); expanded dimensions get stride 0. Only size-1 dimensions can grow.
 */
TN_EXPORT int tn_expand(const tn_tensor *tensor, int ndim, const int64_t *sizes,
			tn_tensor **ret_tensor);

/* tn_squeeze - drop every size-1 dimension; tn_squeeze_dim - drop @dim if its size is 1. */
TN_EXPORT int tn_squeeze(const tn_tensor *tensor, tn_tensor **ret_tensor);
TN_EXPORT int tn_squeeze_dim(const tn_tensor *tensor, int dim, tn_tensor **ret_tensor);

/* tn_unsqueeze - insert a size-1 dimension at @dim (range [-ndim-1, ndim]). */
TN_EXPORT int tn_unsqueeze(const tn_tensor *tensor, int dim, tn_tensor **ret_tensor);

/*
 * tn_as_strided - any sizes, strides and offset over the same storage, bounds-checked.
 * @storage_offset -1 keeps the tensor's own offset. Negative strides are refused.
 */
TN_EXPORT int tn_as_strided(const tn_tensor *tensor, int ndim, const int64_t *sizes,
			    const int64_t *strides, int64_t storage_offset,
			    tn_tensor **ret_tensor);

/* ---- Copies ------------------------------------------------------------------------- */

/*
 * tn_contiguous - the tensor itself (a new reference) when already contiguous, else a
 * contiguous copy. tn_clone - always a contiguous copy with its own storage.
 */
TN_EXPORT int tn_contiguous(const tn_tensor *tensor, tn_tensor **ret_tensor);
TN_EXPORT int tn_clone(const tn_tensor *tensor, tn_tensor **ret_tensor);

/* ---- Printing ----------------------------------------------------------------------- */

/*
 * tn_tensor_repr - format the tensor as PyTorch's repr does ("tensor([[0., 1.],\n        [2., 3.]])",
 * summarised with "..." past 1000 elements, dtype suffix when not float32/int64/bool).
 * *ret_string gets a NUL-terminated string the caller frees with free(3).
 * tn_tensor_fprint writes the same text and a newline to @stream.
 * Errors: TN_EBADF, TN_EINVAL, TN_ENOMEM, TN_ENOTSUP (not a CPU tensor); fprint also
 * returns TN_EIO when writing to the stream fails.
 */
TN_EXPORT int tn_tensor_repr(const tn_tensor *tensor, char **ret_string);
TN_EXPORT int tn_tensor_fprint(FILE *stream, const tn_tensor *tensor);

TN_END_DECLS

#endif /* TENSOR_TENSOR_H */
