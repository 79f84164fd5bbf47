/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend's tables: the device table libtensor's registry hands the core
 * (libtensor/backend.h) and the table behind libtensor's public tn_cuda_* functions.
 */
#include <stdio.h>

#include "cuda_internal.h"

static const struct tn__cuda_api cuda_api = {
#define TN_X_(ret, name, params, args, fallback) .name = tn__cuda_api_##name,
	TN_CUDA_API_LIST(TN_X_)
#undef TN_X_
	.event_destroy = tn__cuda_api_event_destroy,
	.tensor_is_pinned = tn__cuda_api_tensor_is_pinned,
};

/* "libtensor-cuda 0.1.0 (CUDA runtime 13.0)", from the version of the runtime linked. */
#define TN_STR_(x) #x
#define TN_STR(x) TN_STR_(x)

const struct tn__device_ops tn__cuda_device_ops = {
	.abi = TN_BACKEND_ABI,
	.name = "libtensor-cuda " PACKAGE_VERSION " (CUDA runtime " TN_STR(CUDART_VERSION) ")",
	.type = TN_DEVICE_CUDA,
	.device_count = tn__cuda_api_device_count,
	.enter = tn__cuda_device_enter,
	.leave = tn__cuda_device_exit,
	.allocator = tn__cuda_api_caching_allocator,
	.run = tn__cuda_run,
	.fill = tn__cuda_fill_tensor,
	.copy = tn__cuda_copy_tensor,
	.element_read = tn__cuda_element_read,
	.element_write = tn__cuda_element_write,
	.api = &cuda_api,
};
