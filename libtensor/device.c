/* SPDX-License-Identifier: MIT */
/*
 * Device types and their names.
 */
#include <stdio.h>

#include "internal.h"

static const char *const device_names[TN_NUM_DEVICE_TYPES] = {
#define TN_X_(e, name) [e] = name,
	TN_DEVICE_TYPE_LIST(TN_X_)
#undef TN_X_
};

TN_EXPORT const char *tn_device_type_name(enum tn_device_type type)
{
	return (unsigned)type < TN_NUM_DEVICE_TYPES ? device_names[type] : NULL;
}

#ifndef TN_HAVE_CUDA
#include <tensor/cuda.h>

TN_EXPORT int tn_cuda_device_count(void)
{
	return 0;
}

/* The caching device allocator of a build without CUDA (cuda/allocator_cuda.c otherwise). */
static int no_cuda(void)
{
	return tn__error(TN_ENODEV, "libtensor was built without CUDA");
}

TN_EXPORT int tn_cuda_memory_stats(int device, struct tn_cuda_memory_stats *ret)
{
	(void)device;
	(void)ret;
	return no_cuda();
}

TN_EXPORT int tn_cuda_reset_peak_memory_stats(int device)
{
	(void)device;
	return no_cuda();
}

TN_EXPORT int64_t tn_cuda_empty_cache(void)
{
	return 0;
}

TN_EXPORT int tn_cuda_set_memory_limit(int device, uint64_t bytes)
{
	(void)device;
	(void)bytes;
	return no_cuda();
}

TN_EXPORT int tn_cuda_record_stream(const tn_storage *storage, tn_cuda_stream stream)
{
	(void)storage;
	(void)stream;
	return no_cuda();
}

TN_EXPORT const tn_allocator *tn_cuda_caching_allocator(void)
{
	return NULL;
}
#endif

void tn__format_device(char *buf, size_t size, tn_device device)
{
	const char *name = tn_device_type_name(device.type);
	if (!name)
		name = "unknown";
	/* PyTorch names an indexed device with its index ("cuda:0"); the CPU and Meta have none. */
	if (device.type == TN_DEVICE_CUDA)
		snprintf(buf, size, "%s:%d", name, (int)device.index);
	else
		snprintf(buf, size, "%s", name);
}
