/* SPDX-License-Identifier: MIT */
/*
 * The plan a CUDA kernel runs: a TensorIterator (libtensor/iter.h) flattened into plain data
 * that C (cuda/ops.c, which builds it from the iterator) and C++ (the .cu kernels) both read.
 *
 * The iterator has already broadcast, promoted, reordered (dimension 0 is the fastest) and
 * coalesced the operands: the plan keeps its shape and, per operand, a device pointer, byte
 * strides in the same order and the operand's dtype. Outputs come first. The kernels compute
 * in @common_dtype (the iterator's common dtype, or the accumulator of a reduction), loading
 * each input with a conversion from its own dtype when it differs and storing with one to the
 * output's dtype, as ATen's dynamic-casting loads and stores; the results equal the CPU
 * kernels' (libtensor/kernels/) for the same inputs.
 *
 * An input that is a CPU zero-dim tensor (a Python number, or a tensor PyTorch lets a CUDA
 * operator read from the host) has is_scalar set: its value travels in @scalar.bytes, in its
 * own dtype, and @data is NULL.
 *
 * Launch functions return 0 or a cudaError_t value (never negative); cuda/ops.c maps them to
 * libtensor codes with CUDA's message. They queue work on @stream and do not wait for it.
 */
#ifndef TN_CUDA_PLAN_H
#define TN_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/dtype.h>
#include <tensor/macros.h>

#include "../libtensor/op_enums.h"

TN_BEGIN_DECLS

#define TN_CUDA_PLAN_MAX_OPERANDS 4

struct tn__cuda_operand {
	char *data; /* device pointer of element [0, ...] */
	int64_t strides[TN_MAX_DIMS]; /* bytes, fastest dimension first */
	enum tn_dtype dtype;
	bool is_scalar;
	union {
		unsigned char bytes[8];
		uint64_t align;
	} scalar; /* the value of a scalar input, in its own dtype */
};

struct tn__cuda_plan {
	int ndim; /* 0 for one element */
	int64_t shape[TN_MAX_DIMS];
	int64_t numel;
	int noutputs;
	int ntensors;
	enum tn_dtype common_dtype;
	struct tn__cuda_operand ops[TN_CUDA_PLAN_MAX_OPERANDS];
	int device;
	void *stream; /* cudaStream_t */
	/* Scratch memory for the kernels that need it (multi-block reductions): allocated for
	 * @stream and given back right after the launch, which is safe with a stream-ordered
	 * allocator. NULL: cudaMallocAsync and cudaFreeAsync. They return 0 or a cudaError_t. */
	int (*ws_alloc)(int device, size_t bytes, void *stream, void **ret_ptr);
	void (*ws_free)(void *ptr);
};

/* out = a OP b (TN_BINOP_*; add and sub: a OP alpha * b). ops: out, a, b. */
int tn__cuda_binary(const struct tn__cuda_plan *p, int op, const struct tn__alpha *alpha);
/* out = a OP b for the comparisons (TN_CMP_*), compared in common_dtype. ops: out, a, b. */
int tn__cuda_compare(const struct tn__cuda_plan *p, int op);
/* out = f(a) (TN_UN_*), in common_dtype. ops: out, a. */
int tn__cuda_unary(const struct tn__cuda_plan *p, int op);
/* out = p(a) (TN_PRED_*), a in common_dtype. ops: out, a. */
int tn__cuda_pred(const struct tn__cuda_plan *p, int op);
/* out = a OP b (TN_BIN2_*). ops: out, a, b. */
int tn__cuda_binary2(const struct tn__cuda_plan *p, int op);
/* out = c ? a : b; c bool or uint8. ops: out, c, a, b (a and b in common_dtype). */
int tn__cuda_where(const struct tn__cuda_plan *p);
/* out = a converted to out's dtype (copy_ and casts). ops: out, a. */
int tn__cuda_copy(const struct tn__cuda_plan *p);
/* Every element of out = the element at @elem (out's dtype). ops: out. */
int tn__cuda_fill(const struct tn__cuda_plan *p, const void *elem);

/*
 * A reduction: ops[0] is the output, with stride 0 along the reduced dimensions, ops[1] the
 * input (TN_RED_*). Accumulates in common_dtype (float32 for float16 and bfloat16 sums, as the
 * CPU), writes out converted to its dtype after dividing by @divisor when it is not 1 (mean).
 * The output need not be initialised.
 */
int tn__cuda_reduce(const struct tn__cuda_plan *p, int op, double divisor);

/* ---- host helpers (cuda/plan.c) ---- */

struct tn_iter;

/*
 * Fill @p from a built iterator: shape, operands (data, byte strides, own dtype) and the
 * common dtype; device from the first output, stream NULL (the caller sets both as it needs).
 * An input that is a zero-dim CPU tensor becomes a scalar (is_scalar, its value copied into
 * scalar.bytes, data NULL). Returns 0, or TN_EINVAL when the iterator has more operands than
 * a plan holds.
 */
int tn__cuda_plan_from_iter(const struct tn_iter *it, struct tn__cuda_plan *p);

/* True when the plan's element count and every operand's byte offsets fit in int32 (the
 * kernels' index arithmetic). */
bool tn__cuda_plan_fits_32bit(const struct tn__cuda_plan *p);

/* Called with each sub-plan of a split; @accumulate is true when an earlier sub-plan already
 * wrote the same outputs (a reduction split along a reduced dimension). Nonzero stops. */
typedef int (*tn__cuda_plan_fn)(void *ctx, const struct tn__cuda_plan *sub, bool accumulate);

/*
 * ATen's with_32bit_indexing: call @fn with sub-plans that each fit in 32-bit indexing and
 * together cover every element of @p once, splitting the dimension of largest byte extent in
 * halves recursively (data pointers of the second half advanced). Returns @fn's first nonzero
 * result, or 0.
 */
int tn__cuda_plan_split(const struct tn__cuda_plan *p, tn__cuda_plan_fn fn, void *ctx);

/* A cudaError_t's name and message ("cudaErrorInvalidValue: invalid argument"). */
const char *tn__cuda_error_string(int err);

TN_END_DECLS

#endif /* TN_CUDA_PLAN_H */
