/* SPDX-License-Identifier: MIT */
/*
 * What the binary operator families (binary.c, binary_ext.c) share: the iterator loop that
 * converts operands of another dtype than the compute dtype in 256-element chunks on the
 * stack, and the wrapping of a Scalar argument as PyTorch's wrapped-number tensor.
 */
#ifndef TN_BINARY_INTERNAL_H
#define TN_BINARY_INTERNAL_H

#include "iter.h"
#include "stub.h"

struct tn__bin_loop;

/* Compute one row whose inputs are in the compute dtype and whose output is in out_ct. */
typedef void (*tn__bin_row_fn)(const struct tn__bin_loop *c, char *o, int64_t so, const char *a,
			       int64_t sa, const char *b, int64_t sb, int64_t n);

/* The loop's context; an operator family embeds it first in its own. */
struct tn__bin_loop {
	tn__bin_row_fn row;
	tn__cast_fn cast;
	enum tn_dtype ct;     /* the inputs' compute dtype */
	enum tn_dtype out_ct; /* the dtype the row writes: ct, or bool for comparisons */
	enum tn_dtype dt[3];  /* the operands' own dtypes (output, a, b) */
	bool cast_any;        /* some operand needs converting */
	/* Not NULL for outputs over TN_STREAM_BYTES: contiguous output rows are computed in
	 * blocks and written with it (streaming stores)... */
	tn__stream_copy_fn stream;
	/* ...unless the family has a row that streams its own stores (set before the run). */
	tn__bin_row_fn row_stream;
};

/* The iterator config of out = a OP b (@out NULL: allocated) with the inputs promoted to a
 * common dtype, ATen's defaults otherwise; @a_wrapped and @b_wrapped mark Scalar operands. */
void tn__bin_config(struct tn_iter_config *cfg, const tn_tensor *out, const tn_tensor *a,
		    bool a_wrapped, const tn_tensor *b, bool b_wrapped);

/* Fill in @c's dtypes from the built iterator @it, pick the cast kernel, and run @row over
 * every element (tn__binary_loop under tn__iter_for_each); @row writes dtype @out_ct. */
void tn__bin_loop_run(struct tn__bin_loop *c, tn__bin_row_fn row, const struct tn_iter *it,
		      enum tn_dtype out_ct);

/* The tn_loop2d_fn for tn__iter_for_each, with a struct tn__bin_loop (or an embedding) as ctx. */
void tn__binary_loop(void *ctx, char **data, const int64_t *strides, int64_t n0, int64_t n1);

/* A Scalar operand as PyTorch wraps it: a 0-dim tensor of bool, int64 or float64 on @like's
 * device (the CPU when @like is not a live tensor). A new reference in *@ret. */
int tn__wrap_scalar(tn_scalar v, const tn_tensor *like, tn_tensor **ret);

#endif /* TN_BINARY_INTERNAL_H */
