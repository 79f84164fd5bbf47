/* SPDX-License-Identifier: MIT */
/*
 * The error strings and the host emulation entry of the CUDA kernels (emulate.h).
 */
#include <cuda_runtime.h>

#include "emulate.h"
#include "launch.cuh"

using namespace tn_cuda;

extern "C" const char *tn__cuda_error_string(int err)
{
	return cudaGetErrorString((cudaError_t)err);
}

extern "C" int tn__cuda_emulate(const struct tn__cuda_plan *p, int family, int op,
				const void *arg, double divisor)
{
	switch (family) {
	case TN_CUDA_BINARY:
		return binary_run(p, op, (const tn__alpha *)arg, Mode::emulate);
	case TN_CUDA_COMPARE:
		return compare_run(p, op, Mode::emulate);
	case TN_CUDA_WHERE:
		return where_run(p, Mode::emulate);
	case TN_CUDA_COPY:
		return copy_run(p, Mode::emulate);
	case TN_CUDA_FILL:
		return fill_run(p, arg, Mode::emulate);
	case TN_CUDA_UNARY:
		return unary_run(p, op, Mode::emulate);
	case TN_CUDA_PRED:
		return pred_run(p, op, Mode::emulate);
	case TN_CUDA_BINARY2:
		return binary2_run(p, op, Mode::emulate);
	case TN_CUDA_REDUCE:
		return reduce_run(p, op, divisor, Mode::emulate);
	default:
		(void)divisor;
		return (int)cudaErrorNotSupported;
	}
}

extern "C" uint32_t tn__cuda_emulate_div(uint32_t n, uint32_t d)
{
	return IntDivider(d).div(n);
}
