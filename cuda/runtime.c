/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime seen from libtensor. Built only when configure found the CUDA toolkit;
 * libtensor/device.c answers for builds without it. The caching device allocator and the
 * kernels land with the CUDA backend (DESIGN.md section 9).
 */
#include <cuda_runtime_api.h>

#include "../libtensor/internal.h"

TN_EXPORT int tn_cuda_device_count(void)
{
	int n = 0;
	/* No driver, no device or a driver older than the runtime: all mean "no CUDA here". */
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError(); /* clear the sticky error for later callers */
		return 0;
	}
	return n;
}
