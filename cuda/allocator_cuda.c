/* SPDX-License-Identifier: MIT */
/*
 * The caching device allocator over cudart: the backend the core (allocator.c) calls, the
 * process-wide instance behind the public tn_cuda_* allocator functions, and the tn_allocator
 * CUDA storages use. The instance is made on first use for every device cudaGetDeviceCount
 * reports; with none, the functions answer TN_ENODEV (tn_cuda_empty_cache: 0 bytes).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "allocator.h"
#include "cuda_internal.h"

/* ---- the backend ---- */

/* Make @device current for a call that works on the current device; *prev gets the old one. */
static int device_enter(int device, int *prev)
{
	int r = tn__cuda_error(cudaGetDevice(prev), "cudaGetDevice");
	if (!r && *prev != device)
		r = tn__cuda_error(cudaSetDevice(device), "cudaSetDevice");
	return r;
}

static void device_leave(int device, int prev)
{
	if (prev != device)
		(void)tn__cuda_error(cudaSetDevice(prev), "cudaSetDevice");
}

static int be_malloc(void *ctx, int device, size_t bytes, void **ret_ptr)
{
	(void)ctx;
	int prev;
	int r = device_enter(device, &prev);
	if (r)
		return r;
	void *p = NULL;
	r = tn__cuda_error(cudaMalloc(&p, bytes), "cudaMalloc");
	device_leave(device, prev);
	if (!r)
		*ret_ptr = p;
	return r;
}

static int be_free(void *ctx, int device, void *ptr)
{
	(void)ctx;
	int prev;
	int r = device_enter(device, &prev);
	if (r)
		return r;
	r = tn__cuda_error(cudaFree(ptr), "cudaFree");
	device_leave(device, prev);
	return r;
}

static int be_mem_info(void *ctx, int device, size_t *ret_free, size_t *ret_total)
{
	(void)ctx;
	int prev;
	int r = device_enter(device, &prev);
	if (r)
		return r;
	r = tn__cuda_error(cudaMemGetInfo(ret_free, ret_total), "cudaMemGetInfo");
	device_leave(device, prev);
	return r;
}

static int be_event_create(void *ctx, int device, void **ret_event)
{
	(void)ctx;
	int prev;
	int r = device_enter(device, &prev);
	if (r)
		return r;
	cudaEvent_t ev;
	/* No timing: recording and querying such an event is cheaper, as in PyTorch. */
	r = tn__cuda_error(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
			   "cudaEventCreateWithFlags");
	device_leave(device, prev);
	if (!r)
		*ret_event = ev;
	return r;
}

static int be_event_record(void *ctx, void *event, void *stream)
{
	(void)ctx;
	return tn__cuda_error(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream),
			      "cudaEventRecord");
}

static int be_event_query(void *ctx, void *event)
{
	(void)ctx;
	cudaError_t e = cudaEventQuery((cudaEvent_t)event);
	if (e == cudaSuccess)
		return 1;
	if (e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return tn__cuda_error(e, "cudaEventQuery");
}

static int be_event_synchronize(void *ctx, void *event)
{
	(void)ctx;
	return tn__cuda_error(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize");
}

static void be_event_destroy(void *ctx, void *event)
{
	(void)ctx;
	(void)tn__cuda_error(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
}

static const struct tn__cuda_backend cuda_backend = {
	.malloc = be_malloc,
	.free = be_free,
	.mem_info = be_mem_info,
	.event_create = be_event_create,
	.event_record = be_event_record,
	.event_query = be_event_query,
	.event_synchronize = be_event_synchronize,
	.event_destroy = be_event_destroy,
};

/* ---- the process-wide instance ---- */

/* Published once with release order, so a thread that loads it non-NULL (acquire) sees the
 * instance fully built; made under init_lock so two first callers do not both make one. */
static _Atomic(struct tn__cca *) global;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static int get_cca(struct tn__cca **ret)
{
	struct tn__cca *cca = atomic_load_explicit(&global, memory_order_acquire);
	if (TN_LIKELY(cca)) {
		*ret = cca;
		return 0;
	}
	int r = 0;
	pthread_mutex_lock(&init_lock);
	cca = atomic_load_explicit(&global, memory_order_relaxed);
	if (!cca) {
		int n = tn__cuda_api_device_count();
		if (n <= 0)
			r = tn__error(TN_ENODEV, "no CUDA device (cudaGetDeviceCount found none)");
		else
			r = tn__cca_create(&cuda_backend, n, &cca);
		if (!r)
			atomic_store_explicit(&global, cca, memory_order_release);
	}
	pthread_mutex_unlock(&init_lock);
	if (!r)
		*ret = cca;
	return r;
}

static int get_cca_device(int device, struct tn__cca **ret_cca, int *ret_device)
{
	int r = get_cca(ret_cca);
	if (!r)
		r = tn__cuda_resolve_device(device, ret_device);
	return r;
}

int tn__cuda_api_allocator_stats(int device, tn_cuda_memory_stats *ret)
{
	if (!ret)
		return tn__error(TN_EINVAL, "tn_cuda_memory_stats: NULL ret");
	struct tn__cca *cca;
	int d;
	int r = get_cca_device(device, &cca, &d);
	return r ? r : tn__cca_stats(cca, d, ret);
}

int tn__cuda_api_reset_peak_memory_stats(int device)
{
	struct tn__cca *cca;
	int d;
	int r = get_cca_device(device, &cca, &d);
	return r ? r : tn__cca_reset_peak(cca, d);
}

int tn__cuda_api_set_memory_limit(int device, uint64_t bytes)
{
	struct tn__cca *cca;
	int d;
	int r = get_cca_device(device, &cca, &d);
	return r ? r : tn__cca_set_limit(cca, d, bytes);
}

int64_t tn__cuda_api_empty_cache(void)
{
	/* Before the first allocation nothing is cached: no need to make the instance. */
	struct tn__cca *cca = atomic_load_explicit(&global, memory_order_acquire);
	return cca ? tn__cca_empty_cache(cca) : 0;
}

/* ---- the tn_allocator of CUDA storages ---- */

static void *caching_alloc(void *ctx, size_t nbytes)
{
	(void)ctx;
	struct tn__cca *cca;
	int d;
	cudaStream_t stream;
	void *p = NULL;
	if (get_cca_device(-1, &cca, &d) ||
	    tn__cuda_stream_get(tn__cuda_current_stream(d), &stream) ||
	    tn__cca_malloc(cca, d, nbytes, stream, &p))
		return NULL;
	return p;
}

static void caching_free(void *ctx, void *ptr, size_t nbytes)
{
	(void)ctx;
	(void)nbytes;
	struct tn__cca *cca = atomic_load_explicit(&global, memory_order_acquire);
	/* Only blocks of the instance come here; a foreign pointer is refused by the map. */
	if (cca)
		(void)tn__cca_free(cca, ptr);
}

static const tn_allocator caching_allocator = {
	.name = "cuda_caching",
	.ctx = NULL,
	.alloc = caching_alloc,
	.free = caching_free,
};

const tn_allocator *tn__cuda_api_caching_allocator(void)
{
	return &caching_allocator;
}

int tn__cuda_workspace_alloc(int device, size_t bytes, void *stream, void **ret_ptr)
{
	struct tn__cca *cca;
	if (get_cca(&cca) || tn__cca_malloc(cca, device, bytes, stream, ret_ptr))
		return (int)cudaErrorMemoryAllocation;
	return 0;
}

void tn__cuda_workspace_free(void *ptr)
{
	struct tn__cca *cca = atomic_load_explicit(&global, memory_order_acquire);
	if (cca)
		(void)tn__cca_free(cca, ptr);
}

int tn__cuda_storage_segment(const tn_storage *storage, void **ret_base, size_t *ret_size)
{
	if (storage->device.type != TN_DEVICE_CUDA || storage->allocator != &caching_allocator ||
	    !storage->data)
		return tn__error(TN_EINVAL, "the storage is not a CUDA storage of the caching "
					    "allocator");
	struct tn__cca *cca;
	int r = get_cca(&cca);
	return r ? r : tn__cca_segment_of(cca, storage->data, ret_base, ret_size);
}

int tn__cuda_api_record_stream(const tn_storage *storage, tn_cuda_stream stream)
{
	if (!tn__handle_is(storage, TN_MAGIC_STORAGE))
		return tn__error(TN_EBADF, "tn_cuda_record_stream: not a live storage");
	if (storage->device.type != TN_DEVICE_CUDA || storage->allocator != &caching_allocator)
		return tn__error(TN_EINVAL, "record_stream: the storage is not a CUDA storage of "
					    "the caching allocator");
	if (stream.device != storage->device.index)
		return tn__error(TN_EINVAL, "record_stream: a stream of cuda:%d for a storage on "
					    "cuda:%d",
				 (int)stream.device, (int)storage->device.index);
	if (!storage->data)
		return 0; /* an empty storage has no block */
	struct tn__cca *cca;
	cudaStream_t handle;
	int r = get_cca(&cca);
	if (!r)
		r = tn__cuda_stream_get(stream, &handle);
	return r ? r : tn__cca_record_stream(cca, storage->data, handle);
}
