/* SPDX-License-Identifier: MIT */
/*
 * What the binary operator families (binary.c, binary_ext.c) share: the iterator config of
 * out = a OP b and the wrapping of a Scalar argument as PyTorch's wrapped-number tensor. Their
 * loop is the chunked-cast loop of every element-wise operator (loops.h), with streaming
 * stores for large outputs.
 */
#ifndef TN_BINARY_INTERNAL_H
#define TN_BINARY_INTERNAL_H

#include "iter.h"
#include "loops.h"
#include "stub.h"

/* The iterator config of out = a OP b (@out NULL: allocated) with the inputs promoted to a
 * common dtype, ATen's defaults otherwise; @a_wrapped and @b_wrapped mark Scalar operands. */
void tn__bin_config(struct tn_iter_config *cfg, const tn_tensor *out, const tn_tensor *a,
		    bool a_wrapped, const tn_tensor *b, bool b_wrapped);

/* A Scalar operand as PyTorch wraps it: a 0-dim tensor of bool, int64 or float64 on @like's
 * device (the CPU when @like is not a live tensor). A new reference in *@ret. */
int tn__wrap_scalar(tn_scalar v, const tn_tensor *like, tn_tensor **ret);

#endif /* TN_BINARY_INTERNAL_H */
