/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime seen from libtensor. Built only when configure found the CUDA toolkit;
 * libtensor/device.c answers for builds without it. The caching device allocator and the
 * kernels land with the CUDA backend (DESIGN.md section 9).
 */
#include <cuda_runtime_api.h>

#include "cuda_internal.h"

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

int tn__cuda_error(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return 0;
	(void)cudaGetLastError(); /* clear the sticky copy for the next caller */
	int code;
	switch (err) {
	case cudaErrorMemoryAllocation:
		code = TN_ENOMEM;
		break;
	case cudaErrorInvalidDevice:
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
		code = TN_ENODEV;
		break;
	case cudaErrorInvalidValue:
		code = TN_EINVAL;
		break;
	default:
		code = TN_EIO;
		break;
	}
	return tn__error(code, "%s: CUDA error: %s: %s", what, cudaGetErrorName(err),
			 cudaGetErrorString(err));
}

/*
 * Minimal device and stream lookups for the caching allocator, until the runtime's device and
 * stream code lands (issue 7, item 2): that code replaces these three.
 */
int tn__cuda_resolve_device(int device, int *ret)
{
	int n = tn_cuda_device_count();
	if (device == -1) {
		int r = tn__cuda_error(cudaGetDevice(&device), "cudaGetDevice");
		if (r)
			return r;
	}
	if (device < 0 || device >= n)
		return tn__error(TN_ENODEV, "CUDA device %d does not exist (%d device%s)", device,
				 n, n == 1 ? "" : "s");
	*ret = device;
	return 0;
}

tn_cuda_stream tn__cuda_current_stream(int device)
{
	return (tn_cuda_stream){ .device = device, .slot = 0 };
}

int tn__cuda_stream_get(tn_cuda_stream stream, cudaStream_t *ret)
{
	int d;
	int r = tn__cuda_resolve_device(stream.device, &d);
	if (r)
		return r;
	if (stream.slot != 0)
		return tn__error(TN_EINVAL, "CUDA stream slot %d: only the default stream (slot 0) "
					    "exists in this build",
				 (int)stream.slot);
	*ret = NULL;
	return 0;
}
