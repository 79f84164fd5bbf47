/* SPDX-License-Identifier: MIT */
/*
 * TensorIterator: the plan every element-wise operator, copy and cast runs on, as ATen's
 * TensorIteratorBase.
 *
 * A config lists the operands (outputs first, then inputs) and the policies (overlap checks,
 * dtype rules, resizing). tn__iter_build then follows the reference notes' order:
 * populate operands, mark outputs (an output that is also an input is read-write), check
 * memory overlap, broadcast the shapes, mark outputs to resize, compute the common dtype and
 * check casts, compute byte strides, reorder the dimensions fastest-first, allocate the
 * outputs in the inputs' layout, and coalesce dimensions. The result is a shape and, per
 * operand, a data pointer and byte strides in the same (fastest-first) order; loops walk it
 * with tn__iter_for_each.
 */
#ifndef TN_ITER_H
#define TN_ITER_H

#include <string.h>

#include "internal.h"
#include "parallel.h"

#define TN_ITER_MAX_OPERANDS 8
/* for_each runs serially below this many elements (ATen's GRAIN_SIZE). */
#define TN_GRAIN_SIZE 32768

struct tn_iter_config {
	int noutputs;
	int ninputs;
	/* Outputs first, then inputs. An output may be NULL: the iterator allocates it. */
	const tn_tensor *tensors[TN_ITER_MAX_OPERANDS];
	/* Inputs that stand for a Python number (a Scalar argument): lowest promotion priority,
	 * and a floating one counts as float32. */
	bool wrapped[TN_ITER_MAX_OPERANDS];
	/* Inputs (0-dim) that carry a Scalar argument ATen's kernel takes by value, not as an
	 * operand of its iterator (pow(Tensor, Scalar) builds a unary op): they take no part
	 * in the layout decisions (fast setup, reorder), so the result is laid out as ATen's. */
	bool by_value[TN_ITER_MAX_OPERANDS];
	bool check_mem_overlap;              /* default true */
	bool check_all_same_dtype;           /* default true */
	bool promote_inputs_to_common_dtype; /* default false */
	bool promote_integer_inputs_to_float;
	bool cast_common_dtype_to_outputs;
	bool enforce_safe_casting_to_output;
	bool resize_outputs; /* default true */
	bool is_reduction;
	bool has_static_dtype; /* the common dtype, whatever the inputs */
	enum tn_dtype static_dtype;
	/* The dtype of outputs the iterator allocates, when it is not the common dtype
	 * (comparisons: bool), as ATen's declare_static_dtype for undefined outputs. */
	bool has_output_dtype;
	enum tn_dtype output_dtype;
	bool has_static_shape;
	int static_ndim;
	const int64_t *static_shape;
};

/* ATen's defaults. */
void tn__iter_config_init(struct tn_iter_config *cfg);

struct tn_iter_operand {
	tn_tensor *tensor; /* borrowed from the caller, or allocated and owned (see owned) */
	bool owned;
	enum tn_dtype dtype;        /* the tensor's dtype */
	enum tn_dtype target_dtype; /* the dtype the loop computes in (the common dtype when
				     * promoting), converted chunk by chunk when they differ */
	char *data;
	int64_t strides[TN_MAX_DIMS]; /* bytes, in iterator order */
	bool is_output;
	bool is_read_write;
	bool will_resize;
	bool wrapped;
};

struct tn_iter {
	int ndim; /* after coalescing; dimension 0 is the fastest */
	int64_t shape[TN_MAX_DIMS];
	int64_t numel;
	int noutputs;
	int ntensors;
	struct tn_iter_operand ops[TN_ITER_MAX_OPERANDS];
	enum tn_dtype common_dtype;
	/* The broadcast shape in the tensors' own dimension order, before reordering. */
	int out_ndim;
	int64_t out_shape[TN_MAX_DIMS];
	/* perm[i]: the tensor dimension of iterator dimension i (before coalescing). */
	int perm[TN_MAX_DIMS];
	bool is_reduction;
};

/* copy_'s iterator: @src broadcast into @dst, any dtypes, dst never resized (CPU and CUDA). */
void tn__copy_config(struct tn_iter_config *cfg, const tn_tensor *dst, const tn_tensor *src);

/* Build @it from @cfg; @who names the operator in messages. On failure @it holds nothing. */
int tn__iter_build(struct tn_iter *it, const struct tn_iter_config *cfg, const char *who);
/* Drop the iterator's tensor references. */
void tn__iter_release(struct tn_iter *it);
/* The output @i (a new reference). */
tn_tensor *tn__iter_output(const struct tn_iter *it, int i);

/*
 * A 2-D loop: @size0 elements along the fast dimension, @size1 rows. data[k] points at
 * operand k's first element; strides[k] is its fast byte stride and strides[ntensors + k]
 * its row stride.
 */
typedef void (*tn_loop2d_fn)(void *ctx, char **data, const int64_t *strides, int64_t size0,
			     int64_t size1);

/* Run @loop over the elements [begin, end) in linear (fastest-first) order. */
void tn__iter_serial_for_each(const struct tn_iter *it, tn_loop2d_fn loop, void *ctx,
			      int64_t begin, int64_t end);
/* Run @loop over every element, on OpenMP threads when there are more than @grain. */
void tn__iter_for_each(const struct tn_iter *it, tn_loop2d_fn loop, void *ctx, int64_t grain);

/* True when @t has the sizes of @ref, after dropping leading size-1 dimensions of either. */
static inline bool tn__same_shape_but_leading_ones(const tn_tensor *t, const tn_tensor *ref)
{
	const tn_tensor *lo = t->ndim <= ref->ndim ? t : ref, *hi = lo == t ? ref : t;
	int extra = hi->ndim - lo->ndim;
	for (int d = 0; d < extra; d++)
		if (hi->sizes[d] != 1)
			return false;
	return memcmp(hi->sizes + extra, lo->sizes, (size_t)lo->ndim * sizeof(int64_t)) == 0;
}

/*
 * True when @t (contiguous) has elements and the strides empty() gives its sizes, size-1
 * dimensions included: ATen's reorder_dimensions then keeps the inverted order whatever the
 * other operands (a wrapped scalar, a tensor broadcast along leading dimensions), and the
 * result it allocates is contiguous. A contiguous tensor whose size-1 dimensions have other
 * strides, or one with no elements, can be permuted (a result of strides [3, 1, 6] for sizes
 * [2, 3, 1] in PyTorch 1.13).
 */
static inline bool tn__standard_contiguous(const tn_tensor *t)
{
	int64_t acc = 1;
	if (t->numel == 0)
		return false;
	for (int d = t->ndim - 1; d >= 0; d--) {
		if (t->strides[d] != acc)
			return false;
		acc *= t->sizes[d];
	}
	return true;
}

/*
 * The trivial element-wise case, decided without building an iterator: @a (and @b when not
 * NULL) valid CPU tensors, contiguous, of one dtype and one shape (up to leading size-1
 * dimensions: [1, n] + [n]), with at most TN_GRAIN_SIZE elements (one serial run); @out NULL,
 * or a contiguous CPU tensor of the result's shape and of dtype @out_dtype that either shares
 * no storage with the inputs or is one of them exactly (in place). Every check the build
 * would make then passes trivially, so an operator may call its kernel on the flat arrays.
 * Returns the element count and sets *@ret_shape to the operand whose sizes the result has,
 * or returns -1 when the general build is needed (which also reports any error).
 */
static inline int64_t tn__iter_trivial(const tn_tensor *out, enum tn_dtype out_dtype,
				       const tn_tensor *a, const tn_tensor *b,
				       const tn_tensor **ret_shape)
{
	if (!tn__handle_is(a, TN_MAGIC_TENSOR) || !a->contiguous || a->numel > TN_GRAIN_SIZE ||
	    a->storage->device.type != TN_DEVICE_CPU)
		return -1;
	const tn_tensor *shape = a;
	if (b) {
		if (!tn__handle_is(b, TN_MAGIC_TENSOR) || !b->contiguous || b->dtype != a->dtype ||
		    b->storage->device.type != TN_DEVICE_CPU)
			return -1;
		if (b->ndim != a->ndim || memcmp(b->sizes, a->sizes,
						 (size_t)a->ndim * sizeof(int64_t)) != 0) {
			if (!tn__same_shape_but_leading_ones(b, a))
				return -1;
			shape = b->ndim > a->ndim ? b : a;
		}
	}
	if (out) {
		if (!tn__handle_is(out, TN_MAGIC_TENSOR) || !out->contiguous ||
		    out->dtype != out_dtype || out->ndim != shape->ndim ||
		    out->storage->device.type != TN_DEVICE_CPU ||
		    memcmp(out->sizes, shape->sizes, (size_t)shape->ndim * sizeof(int64_t)) != 0)
			return -1;
		/* Same storage: only an exact alias (same first element, same dtype) is the
		 * in-place case; anything else goes through the build's overlap checks. */
		if (out->storage == a->storage && (out->offset != a->offset || out->dtype != a->dtype))
			return -1;
		if (b && out->storage == b->storage &&
		    (out->offset != b->offset || out->dtype != b->dtype))
			return -1;
	}
	*ret_shape = shape;
	return a->numel;
}

/* PyTorch's type promotion of two dtypes (promoteTypes). */
enum tn_dtype tn__promote_types(enum tn_dtype a, enum tn_dtype b);
/* The priority classes of PyTorch's result_type: dimensioned tensors over zero-dim tensors
 * over wrapped numbers (Scalar arguments). */
enum tn__prio { TN_PRIO_DIM, TN_PRIO_ZERO, TN_PRIO_WRAPPED };
/* PyTorch's result_type over @n > 0 operands (dtype and priority class each), as the
 * iterator's promotion computes it; for operators that promote only some of their inputs
 * (where: not the condition; clamp: self with Scalar bounds). */
enum tn_dtype tn__result_type(int n, const enum tn_dtype *dtypes, const enum tn__prio *prio);
/* PyTorch's canCast: float to integral and non-bool to bool are unsafe. */
bool tn__can_cast(enum tn_dtype from, enum tn_dtype to);
/* PyTorch's ScalarType name ("Float", "Long", ...). */
const char *tn__scalar_type_name(enum tn_dtype dtype);

#endif /* TN_ITER_H */
