/* SPDX-License-Identifier: MIT */
/*
 * The chunked-cast loop the element-wise operators share: an operator supplies a row function
 * that reads and writes every operand in a compute dtype of its choosing, and the loop walks
 * the iterator's 2-D steps, handing it whole rows when every operand already has its compute
 * dtype, else 256-element chunks converted into buffers on the stack (and outputs converted
 * back), so mixed dtypes cost bounded memory and no full-size temporaries.
 */
#ifndef TN_LOOPS_H
#define TN_LOOPS_H

#include "iter.h"
#include "stub.h"

/* The most operands a chunked loop converts (out, self and two more: where, clamp). */
#define TN_CHUNKED_MAX_OPERANDS 4

/* One row of @n elements: data[k] and strides[k] (bytes) per operand, each operand in the
 * compute dtype given to tn__chunked_for_each. */
typedef void (*tn__row_fn)(const void *ctx, char *const *data, const int64_t *strides,
			   int64_t n);

/* Run @row over every element of @it (OpenMP threads past the grain size); operand k is
 * converted to and from @compute[k] where its dtype differs. */
void tn__chunked_for_each(const struct tn_iter *it, const enum tn_dtype *compute, tn__row_fn row,
			  const void *ctx);

/* tn__chunked_for_each for operators whose output may be past the caches: an output (operand
 * 0) of TN_STREAM_BYTES or more, when no operand is converted, is written with streaming stores,
 * by @row_stream when not NULL (a kernel that streams its own stores), else computed in blocks
 * in L1 that are streamed out. */
void tn__chunked_for_each_streamed(const struct tn_iter *it, const enum tn_dtype *compute,
				   tn__row_fn row, tn__row_fn row_stream, const void *ctx);

#endif /* TN_LOOPS_H */
