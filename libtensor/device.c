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
/* A build without CUDA: no devices, and every call that needs one says why. */
static int no_cuda(const char *who)
{
	return tn__error(TN_ENODEV, "%s: libtensor was built without CUDA", who);
}

TN_EXPORT int tn_cuda_device_count(void)
{
	return 0;
}

int tn__cuda_device_enter(int index, int *saved)
{
	(void)index, (void)saved;
	return no_cuda("cuda");
}

void tn__cuda_device_exit(int saved)
{
	(void)saved;
}

/* No CUDA tensor exists in a build without CUDA; these only keep the callers linkable. */
int tn__cuda_run(const struct tn_iter *it, enum tn__cuda_kernel kernel, int op, const void *arg,
		 enum tn_dtype compute, double divisor)
{
	(void)it, (void)kernel, (void)op, (void)arg, (void)compute, (void)divisor;
	return no_cuda("cuda");
}

int tn__cuda_fill_tensor(tn_tensor *t, const void *elem)
{
	(void)t, (void)elem;
	return no_cuda("fill_");
}

int tn__cuda_copy_tensor(tn_tensor *dst, const tn_tensor *src, bool non_blocking)
{
	(void)dst, (void)src, (void)non_blocking;
	return no_cuda("copy_");
}

int tn__cuda_element_read(const tn_tensor *t, const void *addr, void *out)
{
	(void)t, (void)addr, (void)out;
	return no_cuda("tn_tensor_get");
}

int tn__cuda_element_write(tn_tensor *t, void *addr, const void *in)
{
	(void)t, (void)addr, (void)in;
	return no_cuda("tn_tensor_set");
}

TN_EXPORT int tn_cuda_get_device_properties(int device, tn_cuda_device_properties *ret)
{
	(void)device, (void)ret;
	return no_cuda("tn_cuda_get_device_properties");
}

TN_EXPORT int tn_cuda_set_device(int device)
{
	(void)device;
	return no_cuda("tn_cuda_set_device");
}

TN_EXPORT int tn_cuda_current_device(int *ret_device)
{
	(void)ret_device;
	return no_cuda("tn_cuda_current_device");
}

TN_EXPORT int tn_cuda_synchronize(int device)
{
	(void)device;
	return no_cuda("tn_cuda_synchronize");
}

TN_EXPORT int tn_cuda_mem_get_info(int device, size_t *ret_free, size_t *ret_total)
{
	(void)device, (void)ret_free, (void)ret_total;
	return no_cuda("tn_cuda_mem_get_info");
}

TN_EXPORT tn_cuda_stream tn_cuda_default_stream(int device)
{
	return (tn_cuda_stream){ device, 0 };
}

TN_EXPORT int tn_cuda_stream_from_pool(int device, bool high_priority, tn_cuda_stream *ret)
{
	(void)device, (void)high_priority, (void)ret;
	return no_cuda("tn_cuda_stream_from_pool");
}

TN_EXPORT int tn_cuda_current_stream(int device, tn_cuda_stream *ret)
{
	(void)device, (void)ret;
	return no_cuda("tn_cuda_current_stream");
}

TN_EXPORT int tn_cuda_set_current_stream(tn_cuda_stream stream)
{
	(void)stream;
	return no_cuda("tn_cuda_set_current_stream");
}

TN_EXPORT int tn_cuda_stream_synchronize(tn_cuda_stream stream)
{
	(void)stream;
	return no_cuda("tn_cuda_stream_synchronize");
}

TN_EXPORT int tn_cuda_stream_query(tn_cuda_stream stream)
{
	(void)stream;
	return no_cuda("tn_cuda_stream_query");
}

TN_EXPORT int tn_cuda_stream_handle(tn_cuda_stream stream, void **ret_handle)
{
	(void)stream, (void)ret_handle;
	return no_cuda("tn_cuda_stream_handle");
}

TN_EXPORT int tn_cuda_event_create(unsigned flags, tn_cuda_event **ret_event)
{
	(void)flags, (void)ret_event;
	return no_cuda("tn_cuda_event_create");
}

TN_EXPORT void tn_cuda_event_destroy(tn_cuda_event *event)
{
	(void)event;
}

TN_EXPORT int tn_cuda_event_record(tn_cuda_event *event, tn_cuda_stream stream)
{
	(void)event, (void)stream;
	return no_cuda("tn_cuda_event_record");
}

TN_EXPORT int tn_cuda_event_query(tn_cuda_event *event)
{
	(void)event;
	return no_cuda("tn_cuda_event_query");
}

TN_EXPORT int tn_cuda_event_synchronize(tn_cuda_event *event)
{
	(void)event;
	return no_cuda("tn_cuda_event_synchronize");
}

TN_EXPORT int tn_cuda_stream_wait_event(tn_cuda_stream stream, tn_cuda_event *event)
{
	(void)stream, (void)event;
	return no_cuda("tn_cuda_stream_wait_event");
}

TN_EXPORT int tn_cuda_event_elapsed_ms(tn_cuda_event *start, tn_cuda_event *end, float *ret_ms)
{
	(void)start, (void)end, (void)ret_ms;
	return no_cuda("tn_cuda_event_elapsed_ms");
}

TN_EXPORT int tn_cuda_allocator_stats(int device, tn_cuda_memory_stats *ret)
{
	(void)device, (void)ret;
	return no_cuda("tn_cuda_allocator_stats");
}

TN_EXPORT int tn_cuda_reset_peak_memory_stats(int device)
{
	(void)device;
	return no_cuda("tn_cuda_reset_peak_memory_stats");
}

TN_EXPORT int64_t tn_cuda_empty_cache(void)
{
	return 0;
}

TN_EXPORT int tn_cuda_set_memory_limit(int device, uint64_t bytes)
{
	(void)device, (void)bytes;
	return no_cuda("tn_cuda_set_memory_limit");
}

TN_EXPORT int tn_cuda_record_stream(const tn_storage *storage, tn_cuda_stream stream)
{
	(void)storage, (void)stream;
	return no_cuda("tn_cuda_record_stream");
}

TN_EXPORT const tn_allocator *tn_cuda_caching_allocator(void)
{
	return NULL;
}

TN_EXPORT int tn_cuda_ipc_export(tn_tensord *conn, const char *name, const tn_tensor *tensor,
				 unsigned mode)
{
	(void)conn, (void)name, (void)tensor, (void)mode;
	return no_cuda("tn_cuda_ipc_export");
}

TN_EXPORT int tn_cuda_ipc_unexport(tn_tensord *conn, const char *name)
{
	(void)conn, (void)name;
	return no_cuda("tn_cuda_ipc_unexport");
}

TN_EXPORT int64_t tn_cuda_ipc_collect(void)
{
	return 0; /* nothing was exported */
}

TN_EXPORT int tn_cuda_ipc_import(tn_tensord *conn, const char *name, tn_tensor **ret_tensor)
{
	(void)conn, (void)name, (void)ret_tensor;
	return no_cuda("tn_cuda_ipc_import");
}

TN_EXPORT int tn_cuda_host_register(void *ptr, size_t nbytes, unsigned flags)
{
	(void)ptr, (void)nbytes, (void)flags;
	return no_cuda("tn_cuda_host_register");
}

TN_EXPORT int tn_cuda_host_unregister(void *ptr)
{
	(void)ptr;
	return no_cuda("tn_cuda_host_unregister");
}

TN_EXPORT bool tn_cuda_is_pinned(const void *ptr, size_t nbytes)
{
	(void)ptr, (void)nbytes;
	return false;
}

TN_EXPORT int tn_cuda_arena_register(tn_arena *arena)
{
	(void)arena;
	return no_cuda("tn_cuda_arena_register");
}

TN_EXPORT int tn_cuda_arena_unregister(tn_arena *arena)
{
	(void)arena;
	return no_cuda("tn_cuda_arena_unregister");
}

TN_EXPORT bool tn_tensor_is_pinned(const tn_tensor *t)
{
	(void)t;
	return false;
}

/* Nothing was registered: nothing to undo. */
void tn__cuda_arena_unmapping(struct tn_arena *a)
{
	(void)a;
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
