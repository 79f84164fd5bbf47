/* SPDX-License-Identifier: MIT */
/*
 * CUDA kernels launched from the iterator's plan (plan.h). Placeholder while the kernels land.
 */
#include <cuda_runtime.h>

#include "plan.h"

extern "C" const char *tn__cuda_error_string(int err)
{
	return cudaGetErrorString((cudaError_t)err);
}

/* TEMPORARY until the kernels land: every launch answers "not supported". */
extern "C" {
int tn__cuda_binary(const struct tn__cuda_plan *, int, const struct tn__alpha *) { return (int)cudaErrorNotSupported; }
int tn__cuda_compare(const struct tn__cuda_plan *, int) { return (int)cudaErrorNotSupported; }
int tn__cuda_unary(const struct tn__cuda_plan *, int) { return (int)cudaErrorNotSupported; }
int tn__cuda_pred(const struct tn__cuda_plan *, int) { return (int)cudaErrorNotSupported; }
int tn__cuda_binary2(const struct tn__cuda_plan *, int) { return (int)cudaErrorNotSupported; }
int tn__cuda_where(const struct tn__cuda_plan *) { return (int)cudaErrorNotSupported; }
int tn__cuda_copy(const struct tn__cuda_plan *) { return (int)cudaErrorNotSupported; }
int tn__cuda_fill(const struct tn__cuda_plan *, const void *) { return (int)cudaErrorNotSupported; }
int tn__cuda_reduce(const struct tn__cuda_plan *, int, double) { return (int)cudaErrorNotSupported; }
}
