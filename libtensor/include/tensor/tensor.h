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
 * Conventions for every function here and every operator of <tensor/ops.h>: the input handle
 * is borrowed; *ret_tensor receives a new reference that the caller drops with
 * tn_tensor_unref(); outputs are written on success only; failures return a negative TN_E*
 * code and leave a message in tn_last_error(). Dimensions may be negative and wrap as in
 * PyTorch (-1 is the last dimension).
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
	TN_PRESERVE_FORMAT,   /* keep the input's layout (clone, contiguous of a copy) */
};

/* The layout of a tensor's elements; libtensor has strided tensors only. */
enum tn_layout {
	TN_STRIDED,
};

/*
 * The factories (tn_empty, tn_zeros, tn_ones, tn_full, tn_arange, tn_empty_strided), the views
 * (tn_view, tn_reshape, tn_permute, tn_transpose, tn_slice, tn_narrow, tn_select, tn_unbind,
 * tn_expand, tn_squeeze, tn_squeeze_dim, tn_unsqueeze, tn_as_strided, tn_alias), the copies
 * (tn_contiguous, tn_clone) and fills (tn_fill_, tn_zero_) are operators of the op table:
 * their declarations are generated into <tensor/ops.h>; see libtensor-ops(7).
 */

/* ---- Tensors over existing memory ------------------------------------------------------ */

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
/* Whether operators refuse to write the tensor's bytes: a sealed arena tensor, or a tensor of a
 * read-only arena handle or DLPack export (tn_tensor_is_readonly(3)). */
TN_EXPORT bool tn_tensor_is_readonly(const tn_tensor *tensor);

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
