/* SPDX-License-Identifier: MIT */
/*
 * The host emulation of the CUDA kernels, for tests on machines without a GPU: the same
 * per-thread bodies the kernels run, called serially for every (block, thread) of the grid
 * the device launch would use, on host memory (the plan's pointers are host pointers). The
 * results are the kernels' bits except where the device's math library differs from the
 * host's (exp, log, sin, ..., see check_cuda_emu.c).
 */
#ifndef TN_CUDA_EMULATE_H
#define TN_CUDA_EMULATE_H

#include "plan.h"

TN_BEGIN_DECLS

enum tn__cuda_family {
	TN_CUDA_BINARY,  /* op: TN_BINOP_*, arg: const struct tn__alpha * */
	TN_CUDA_COMPARE, /* op: TN_CMP_* */
	TN_CUDA_UNARY,   /* op: TN_UN_* */
	TN_CUDA_PRED,    /* op: TN_PRED_* */
	TN_CUDA_BINARY2, /* op: TN_BIN2_* */
	TN_CUDA_WHERE,
	TN_CUDA_COPY,
	TN_CUDA_FILL,   /* arg: the element */
	TN_CUDA_REDUCE, /* op: TN_RED_*, divisor */
};

/* Run the kernel of @family on @p on the host; returns what the launcher would (0 or a
 * cudaError_t value). */
int tn__cuda_emulate(const struct tn__cuda_plan *p, int family, int op, const void *arg,
		     double divisor);

/* n / d by the kernels' IntDivider (magic multiply and shift), for the tests. */
uint32_t tn__cuda_emulate_div(uint32_t n, uint32_t d);

TN_END_DECLS

#endif /* TN_CUDA_EMULATE_H */
