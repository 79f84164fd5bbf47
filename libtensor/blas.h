/* SPDX-License-Identifier: MIT */
/*
 * The seam between the matmul family (linalg.c) and the BLAS: one batched, strided GEMM and
 * GEMV for every dtype the operators take. float32 and float64 go to BLIS (its typed expert
 * API: general row and column strides, a thread count per call); float16 and bfloat16 are
 * widened to float32, multiplied by BLIS and rounded once; integer dtypes run a kernel of our
 * own (kernels/gemm_kernel.c) in wrapping arithmetic. Nothing here checks shapes or dtypes:
 * the operators have done it.
 */
#ifndef TN_BLAS_H
#define TN_BLAS_H

#include "internal.h"

/* One operand: element pointer and element strides (batch, row, column). */
struct tn__mat {
	char *data;
	int64_t bs, rs, cs;
};

/*
 * C[i] = beta * C[i] + alpha * A[i] @ B[i] for i < @batch, with A[i] m x k, B[i] k x n and
 * C[i] m x n, all of @dtype; strides may be anything non-negative (0 broadcasts) except that
 * C's elements must be distinct. beta 0 means C is not read (NaN there does not propagate), as
 * in BLAS. alpha and beta are converted to @dtype (integers truncate, as PyTorch's
 * scalar_t conversion). Returns 0, or TN_ENOMEM when the 16-bit staging buffers cannot be
 * allocated (C is then untouched).
 */
int tn__gemm(enum tn_dtype dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
	     tn_scalar alpha, const struct tn__mat *a, const struct tn__mat *b, tn_scalar beta,
	     const struct tn__mat *c);

/* What the BLAS is, for benchmarks and tensorctl: "BLIS 0.9.0 (zen3, OpenMP)". */
const char *tn__blas_name(void);

#endif /* TN_BLAS_H */
