/* SPDX-License-Identifier: MIT */
/*
 * Host side of the kernel plan (plan.h): the conversion of a built TensorIterator into a plan,
 * and the split of a plan into sub-plans whose byte offsets fit the kernels' 32-bit index
 * arithmetic (ATen's TensorIterator::with_32bit_indexing and SplitUntil32Bit).
 */
#include <stdlib.h>
#include <string.h>

#include "../libtensor/iter.h" /* internal.h: tn__malloc, tn__error */
#include "plan.h"

int tn__cuda_plan_from_iter(const struct tn_iter *it, struct tn__cuda_plan *p)
{
	if (it->ntensors > TN_CUDA_PLAN_MAX_OPERANDS)
		return tn__error(TN_EINVAL, "CUDA kernel plan: %d operands (at most %d)",
				 it->ntensors, TN_CUDA_PLAN_MAX_OPERANDS);
	memset(p, 0, sizeof(*p));
	p->ndim = it->ndim;
	memcpy(p->shape, it->shape, (size_t)it->ndim * sizeof(int64_t));
	p->numel = it->numel;
	p->noutputs = it->noutputs;
	p->ntensors = it->ntensors;
	p->common_dtype = it->common_dtype;
	p->device = 0;
	p->stream = NULL;
	for (int k = 0; k < it->ntensors; k++) {
		const struct tn_iter_operand *op = &it->ops[k];
		struct tn__cuda_operand *q = &p->ops[k];
		const tn_tensor *t = op->tensor;
		q->dtype = op->dtype;
		memcpy(q->strides, op->strides, (size_t)it->ndim * sizeof(int64_t));
		if (k >= it->noutputs && t && t->ndim == 0 &&
		    t->storage->device.type == TN_DEVICE_CPU) {
			/* A CPU zero-dim input (a Python number): passed by value. */
			q->is_scalar = true;
			memcpy(q->scalar.bytes, op->data, tn__itemsize(op->dtype));
			q->data = NULL;
			memset(q->strides, 0, sizeof(q->strides));
		} else {
			q->data = op->data;
		}
	}
	if (it->ntensors > 0 && it->ops[0].tensor &&
	    it->ops[0].tensor->storage->device.type != TN_DEVICE_CPU)
		p->device = it->ops[0].tensor->storage->device.index;
	return 0;
}

/* The largest byte offset (in magnitude) operand @k reaches. */
static uint64_t extent(const struct tn__cuda_plan *p, int k)
{
	uint64_t e = 0;
	for (int d = 0; d < p->ndim; d++) {
		int64_t s = p->ops[k].strides[d];
		uint64_t a = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
		e += (uint64_t)(p->shape[d] - 1) * a;
	}
	return e;
}

bool tn__cuda_plan_fits_32bit(const struct tn__cuda_plan *p)
{
	if (p->numel > INT32_MAX)
		return false;
	for (int k = 0; k < p->ntensors; k++)
		if (!p->ops[k].is_scalar && extent(p, k) > INT32_MAX)
			return false;
	return true;
}

static int split(const struct tn__cuda_plan *p, tn__cuda_plan_fn fn, void *ctx, bool accumulate)
{
	if (p->numel == 0)
		return 0;
	if (tn__cuda_plan_fits_32bit(p))
		return fn(ctx, p, accumulate);
	/* ATen's get_dim_to_split: the dimension of the largest byte extent over the operands
	 * (the element count counts as one more operand of itemsize 1). */
	int dim = -1;
	uint64_t best = 0;
	for (int d = 0; d < p->ndim; d++) {
		if (p->shape[d] < 2)
			continue;
		uint64_t e = (uint64_t)p->shape[d];
		for (int k = 0; k < p->ntensors; k++) {
			int64_t s = p->ops[k].strides[d];
			uint64_t a = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
			uint64_t x = (uint64_t)p->shape[d] * a;
			e = x > e ? x : e;
		}
		if (dim < 0 || e > best) {
			dim = d;
			best = e;
		}
	}
	if (dim < 0)
		return fn(ctx, p, accumulate); /* one element: cannot be too large */
	/* Reduced along @dim: both halves write the same outputs. */
	bool reduced = p->noutputs > 0 && p->ops[0].strides[dim] == 0;
	struct tn__cuda_plan *sub = tn__malloc(sizeof(*sub));
	if (!sub)
		return 2; /* cudaErrorMemoryAllocation */
	const int64_t n = p->shape[dim], h = n / 2;
	*sub = *p;
	sub->shape[dim] = h;
	sub->numel = p->numel / n * h;
	int rc = split(sub, fn, ctx, accumulate);
	if (rc == 0) {
		*sub = *p;
		sub->shape[dim] = n - h;
		sub->numel = p->numel / n * (n - h);
		for (int k = 0; k < p->ntensors; k++)
			if (!sub->ops[k].is_scalar)
				sub->ops[k].data += h * p->ops[k].strides[dim];
		rc = split(sub, fn, ctx, accumulate || reduced);
	}
	tn__free(sub);
	return rc;
}

int tn__cuda_plan_split(const struct tn__cuda_plan *p, tn__cuda_plan_fn fn, void *ctx)
{
	return split(p, fn, ctx, false);
}
