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
