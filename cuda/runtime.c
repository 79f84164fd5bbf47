/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime seen from libtensor: devices, the per-thread current device and stream,
 * the stream pools and events, as c10::cuda's CUDAFunctions, CUDAStream and CUDAEvent.
 * Built only when configure found the CUDA toolkit; libtensor/device.c answers for builds
 * without it.
 *
 * Streams are values (device, slot). Slot 0 is the legacy default stream; the pools of each
 * device (32 low-priority, 32 high-priority streams, non-blocking) are created on the first
 * request for one of its streams and live as long as the process, so a stream value never
 * dangles, as in PyTorch. The current stream is per thread and per device.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

/* Devices a process may have; PyTorch's C10_COMPILE_TIME_MAX_GPUS is 16, servers reach 16. */
#define MAX_DEVICES 64
#define POOL TN_CUDA_STREAMS_PER_POOL

int tn__cuda_error(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return 0;
	(void)cudaGetLastError(); /* clear a sticky error so it is not reported twice */
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
	case cudaErrorInvalidResourceHandle:
		code = TN_EINVAL;
		break;
	default:
		code = TN_EIO;
	}
	return tn__error(code, "%s: CUDA error: %s: %s", what, cudaGetErrorName(err),
			 cudaGetErrorString(err));
}

/* ---- devices ---- */

static int device_count(void)
{
	int n = tn__cuda_api_device_count();
	return n > MAX_DEVICES ? MAX_DEVICES : n;
}

int tn__cuda_resolve_device(int device, int *ret)
{
	int n = device_count();
	if (n == 0)
		return tn__error(TN_ENODEV, "no CUDA GPUs are available");
	if (device == -1) {
		cudaError_t err = cudaGetDevice(&device);
		if (err != cudaSuccess)
			return tn__cuda_error(err, "cudaGetDevice");
	}
	if (device < 0 || device >= n)
		return tn__error(TN_ENODEV, "CUDA error: invalid device ordinal %d (%d device%s)",
				 device, n, n == 1 ? "" : "s");
	*ret = device;
	return 0;
}

int tn__cuda_api_device_count(void)
{
	int n = 0;
	/* No driver, no device or a driver older than the runtime: all mean "no CUDA here". */
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError(); /* clear the sticky error for later callers */
		return 0;
	}
	return n;
}

int tn__cuda_api_get_device_properties(int device, tn_cuda_device_properties *ret)
{
	struct cudaDeviceProp p;
	int rc;

	if (!ret)
		return tn__error(TN_EINVAL, "tn_cuda_get_device_properties: NULL ret");
	if ((rc = tn__cuda_resolve_device(device, &device)) < 0)
		return rc;
	if ((rc = tn__cuda_error(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties")))
		return rc;
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", p.name);
	ret->major = p.major;
	ret->minor = p.minor;
	ret->multiprocessor_count = p.multiProcessorCount;
	ret->warp_size = p.warpSize;
	ret->max_threads_per_block = p.maxThreadsPerBlock;
	ret->max_threads_per_multiprocessor = p.maxThreadsPerMultiProcessor;
	ret->l2_cache_bytes = p.l2CacheSize;
	ret->memory_bus_width = p.memoryBusWidth;
	ret->pci_bus_id = p.pciBusID;
	ret->pci_device_id = p.pciDeviceID;
	ret->total_memory = p.totalGlobalMem;
	ret->integrated = p.integrated != 0;
	ret->can_map_host_memory = p.canMapHostMemory != 0;
	ret->concurrent_managed_access = p.concurrentManagedAccess != 0;
	return 0;
}

int tn__cuda_api_set_device(int device)
{
	int rc = tn__cuda_resolve_device(device, &device);
	return rc < 0 ? rc : tn__cuda_error(cudaSetDevice(device), "cudaSetDevice");
}

int tn__cuda_api_current_device(int *ret_device)
{
	if (!ret_device)
		return tn__error(TN_EINVAL, "tn_cuda_current_device: NULL ret_device");
	return tn__cuda_resolve_device(-1, ret_device);
}

/* Run with @device current, then restore the caller's (c10::cuda::CUDAGuard). */
struct guard {
	int prev;
	bool switched;
};

static int guard_enter(struct guard *g, int device)
{
	cudaError_t err = cudaGetDevice(&g->prev);
	if (err != cudaSuccess)
		return tn__cuda_error(err, "cudaGetDevice");
	g->switched = g->prev != device;
	if (g->switched && (err = cudaSetDevice(device)) != cudaSuccess)
		return tn__cuda_error(err, "cudaSetDevice");
	return 0;
}

static void guard_exit(struct guard *g)
{
	if (g->switched)
		(void)cudaSetDevice(g->prev);
}

int tn__cuda_device_enter(int index, int *saved)
{
	struct guard g;
	int rc = tn__cuda_resolve_device(index, &index);
	if (rc < 0 || (rc = guard_enter(&g, index)) < 0)
		return rc;
	*saved = g.switched ? g.prev : -1;
	return 0;
}

void tn__cuda_device_exit(int saved)
{
	if (saved >= 0)
		(void)cudaSetDevice(saved);
}

int tn__cuda_api_synchronize(int device)
{
	struct guard g;
	int rc;
	if ((rc = tn__cuda_resolve_device(device, &device)) < 0 || (rc = guard_enter(&g, device)))
		return rc;
	rc = tn__cuda_error(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	guard_exit(&g);
	if (rc == 0) /* the copies on it are done: their host storages can go */
		tn__cuda_deferred_reap();
	return rc;
}

int tn__cuda_api_mem_get_info(int device, size_t *ret_free, size_t *ret_total)
{
	struct guard g;
	size_t f = 0, t = 0;
	int rc;
	if (!ret_free || !ret_total)
		return tn__error(TN_EINVAL, "tn_cuda_mem_get_info: NULL ret_free or ret_total");
	if ((rc = tn__cuda_resolve_device(device, &device)) < 0 || (rc = guard_enter(&g, device)))
		return rc;
	rc = tn__cuda_error(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
	guard_exit(&g);
	if (rc == 0) {
		*ret_free = f;
		*ret_total = t;
	}
	return rc;
}

/* ---- streams ---- */

struct pools {
	cudaStream_t streams[MAX_DEVICES][2 * POOL];
	_Atomic uint32_t next[MAX_DEVICES][2];
};

static struct pools pools;
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int32_t current_slot[MAX_DEVICES];

static int create_pool(int device)
{
	struct guard g;
	int least = 0, greatest = 0, rc;
	cudaError_t err;

	if ((rc = guard_enter(&g, device)))
		return rc;
	err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
	if (err != cudaSuccess) {
		guard_exit(&g);
		return tn__cuda_error(err, "cudaDeviceGetStreamPriorityRange");
	}
	int made = 0;
	while (made < 2 * POOL && err == cudaSuccess) {
		err = cudaStreamCreateWithPriority(&pools.streams[device][made], cudaStreamNonBlocking,
						   made < POOL ? least : greatest);
		made += err == cudaSuccess;
	}
	if (err != cudaSuccess) /* all or none: a later call tries again from scratch */
		while (made > 0)
			(void)cudaStreamDestroy(pools.streams[device][--made]);
	guard_exit(&g);
	return tn__cuda_error(err, "cudaStreamCreateWithPriority");
}

/* The pool of @device exists after this (created by the first caller), or an error. */
static int pool_ready(int device)
{
	/* A mutex rather than pthread_once: the creation can fail and must report why. */
	static _Atomic bool ready[MAX_DEVICES];
	if (atomic_load_explicit(&ready[device], memory_order_acquire))
		return 0;
	pthread_mutex_lock(&pools_lock);
	int rc = 0;
	if (!atomic_load_explicit(&ready[device], memory_order_relaxed)) {
		rc = create_pool(device);
		if (rc == 0)
			atomic_store_explicit(&ready[device], true, memory_order_release);
	}
	pthread_mutex_unlock(&pools_lock);
	return rc;
}

static int check_stream(tn_cuda_stream s)
{
	int n = device_count();
	if (s.device < 0 || s.device >= n)
		return tn__error(TN_ENODEV, "stream of device %d: no such CUDA device (%d device%s)",
				 (int)s.device, n, n == 1 ? "" : "s");
	if (s.slot < 0 || s.slot > 2 * POOL)
		return tn__error(TN_EINVAL, "stream slot %d: not 0 (default) or 1..%d (pools)",
				 (int)s.slot, 2 * POOL);
	return 0;
}

int tn__cuda_stream_get(tn_cuda_stream s, cudaStream_t *ret)
{
	int rc = check_stream(s);
	if (rc < 0)
		return rc;
	if (s.slot == 0) {
		*ret = NULL;
		return 0;
	}
	if ((rc = pool_ready(s.device)) < 0)
		return rc;
	*ret = pools.streams[s.device][s.slot - 1];
	return 0;
}

tn_cuda_stream tn__cuda_api_default_stream(int device)
{
	if (device == -1 && cudaGetDevice(&device) != cudaSuccess) {
		(void)cudaGetLastError();
		device = 0;
	}
	return (tn_cuda_stream){ device, 0 };
}

int tn__cuda_api_stream_from_pool(int device, bool high_priority, tn_cuda_stream *ret)
{
	int rc;
	if (!ret)
		return tn__error(TN_EINVAL, "tn_cuda_stream_from_pool: NULL ret");
	if ((rc = tn__cuda_resolve_device(device, &device)) < 0 || (rc = pool_ready(device)) < 0)
		return rc;
	uint32_t i = atomic_fetch_add_explicit(&pools.next[device][high_priority], 1,
					       memory_order_relaxed);
	*ret = (tn_cuda_stream){ device, (int32_t)(1 + (high_priority ? POOL : 0) + i % POOL) };
	return 0;
}

tn_cuda_stream tn__cuda_current_stream(int device)
{
	/* A device past the table (a blob's unchecked index) has only its default stream; the
	 * call the value goes to refuses the device. */
	if (device < 0 || device >= MAX_DEVICES)
		return (tn_cuda_stream){ device, 0 };
	return (tn_cuda_stream){ device, current_slot[device] };
}

int tn__cuda_api_current_stream(int device, tn_cuda_stream *ret)
{
	int rc;
	if (!ret)
		return tn__error(TN_EINVAL, "tn_cuda_current_stream: NULL ret");
	if ((rc = tn__cuda_resolve_device(device, &device)) < 0)
		return rc;
	*ret = tn__cuda_current_stream(device);
	return 0;
}

int tn__cuda_api_set_current_stream(tn_cuda_stream stream)
{
	cudaStream_t h;
	int rc = tn__cuda_stream_get(stream, &h); /* a pool stream must exist to be current */
	if (rc < 0)
		return rc;
	current_slot[stream.device] = stream.slot;
	return 0;
}

int tn__cuda_api_stream_synchronize(tn_cuda_stream stream)
{
	cudaStream_t h;
	struct guard g;
	int rc;
	if ((rc = tn__cuda_stream_get(stream, &h)) < 0 || (rc = guard_enter(&g, stream.device)))
		return rc;
	rc = tn__cuda_error(cudaStreamSynchronize(h), "cudaStreamSynchronize");
	guard_exit(&g);
	if (rc == 0)
		tn__cuda_deferred_reap();
	return rc;
}

int tn__cuda_api_stream_query(tn_cuda_stream stream)
{
	cudaStream_t h;
	struct guard g;
	int rc;
	if ((rc = tn__cuda_stream_get(stream, &h)) < 0 || (rc = guard_enter(&g, stream.device)))
		return rc;
	cudaError_t err = cudaStreamQuery(h);
	guard_exit(&g);
	if (err == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return err == cudaSuccess ? 1 : tn__cuda_error(err, "cudaStreamQuery");
}

int tn__cuda_api_stream_handle(tn_cuda_stream stream, void **ret_handle)
{
	cudaStream_t h;
	int rc;
	if (!ret_handle)
		return tn__error(TN_EINVAL, "tn_cuda_stream_handle: NULL ret_handle");
	if ((rc = tn__cuda_stream_get(stream, &h)) < 0)
		return rc;
	*ret_handle = (void *)h;
	return 0;
}

/* ---- events ---- */

/* As c10::cuda::CUDAEvent: the CUDA event is created on the first record, on the device of
 * the stream it records; an event never recorded is complete. */
struct tn_cuda_event {
	cudaEvent_t event;
	int device;
	unsigned flags;
	bool created;
};

int tn__cuda_api_event_create(unsigned flags, tn_cuda_event **ret_event)
{
	const unsigned all = TN_CUDA_EVENT_TIMING | TN_CUDA_EVENT_BLOCKING |
			     TN_CUDA_EVENT_INTERPROCESS;
	if (!ret_event)
		return tn__error(TN_EINVAL, "tn_cuda_event_create: NULL ret_event");
	if (flags & ~all)
		return tn__error(TN_EINVAL, "tn_cuda_event_create: unknown flags %#x", flags & ~all);
	if ((flags & TN_CUDA_EVENT_TIMING) && (flags & TN_CUDA_EVENT_INTERPROCESS))
		return tn__error(TN_EINVAL, "tn_cuda_event_create: an interprocess event cannot "
					    "record timing (CUDA requires cudaEventDisableTiming)");
	tn_cuda_event *e = tn__calloc(1, sizeof(*e));
	if (!e)
		return tn__error(TN_ENOMEM, "tn_cuda_event_create: out of memory");
	e->flags = flags;
	e->device = -1;
	*ret_event = e;
	return 0;
}

void tn__cuda_api_event_destroy(tn_cuda_event *event)
{
	if (!event)
		return;
	if (event->created) {
		struct guard g;
		if (guard_enter(&g, event->device) == 0) {
			(void)cudaEventDestroy(event->event);
			guard_exit(&g);
		}
	}
	tn__free(event);
}

int tn__cuda_api_event_record(tn_cuda_event *event, tn_cuda_stream stream)
{
	cudaStream_t h;
	struct guard g;
	int rc;
	if (!event)
		return tn__error(TN_EINVAL, "tn_cuda_event_record: NULL event");
	if ((rc = tn__cuda_stream_get(stream, &h)) < 0)
		return rc;
	if (event->created && event->device != stream.device)
		return tn__error(TN_EINVAL, "Event device %d does not match recording stream's "
					    "device %d.", event->device, (int)stream.device);
	if ((rc = guard_enter(&g, stream.device)))
		return rc;
	if (!event->created) {
		unsigned f = 0;
		if (!(event->flags & TN_CUDA_EVENT_TIMING))
			f |= cudaEventDisableTiming;
		if (event->flags & TN_CUDA_EVENT_BLOCKING)
			f |= cudaEventBlockingSync;
		if (event->flags & TN_CUDA_EVENT_INTERPROCESS)
			f |= cudaEventInterprocess;
		rc = tn__cuda_error(cudaEventCreateWithFlags(&event->event, f),
				    "cudaEventCreateWithFlags");
		if (rc == 0) {
			event->created = true;
			event->device = stream.device;
		}
	}
	if (rc == 0)
		rc = tn__cuda_error(cudaEventRecord(event->event, h), "cudaEventRecord");
	guard_exit(&g);
	return rc;
}

int tn__cuda_api_event_query(tn_cuda_event *event)
{
	if (!event)
		return tn__error(TN_EINVAL, "tn_cuda_event_query: NULL event");
	if (!event->created)
		return 1;
	cudaError_t err = cudaEventQuery(event->event);
	if (err == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return err == cudaSuccess ? 1 : tn__cuda_error(err, "cudaEventQuery");
}

int tn__cuda_api_event_synchronize(tn_cuda_event *event)
{
	if (!event)
		return tn__error(TN_EINVAL, "tn_cuda_event_synchronize: NULL event");
	if (!event->created)
		return 0;
	return tn__cuda_error(cudaEventSynchronize(event->event), "cudaEventSynchronize");
}

int tn__cuda_api_stream_wait_event(tn_cuda_stream stream, tn_cuda_event *event)
{
	cudaStream_t h;
	struct guard g;
	int rc;
	if (!event)
		return tn__error(TN_EINVAL, "tn_cuda_stream_wait_event: NULL event");
	if ((rc = tn__cuda_stream_get(stream, &h)) < 0)
		return rc;
	if (!event->created) /* nothing recorded: nothing to wait for */
		return 0;
	if ((rc = guard_enter(&g, stream.device)))
		return rc;
	rc = tn__cuda_error(cudaStreamWaitEvent(h, event->event, 0), "cudaStreamWaitEvent");
	guard_exit(&g);
	return rc;
}

int tn__cuda_api_event_elapsed_ms(tn_cuda_event *start, tn_cuda_event *end, float *ret_ms)
{
	if (!start || !end || !ret_ms)
		return tn__error(TN_EINVAL, "tn_cuda_event_elapsed_ms: NULL argument");
	if (!(start->flags & TN_CUDA_EVENT_TIMING) || !(end->flags & TN_CUDA_EVENT_TIMING))
		return tn__error(TN_EINVAL, "Both events must be created with argument "
					    "'enable_timing=True'.");
	if (!start->created || !end->created)
		return tn__error(TN_EINVAL, "Both events must be recorded before calculating "
					    "elapsed time.");
	float ms = 0;
	cudaError_t err = cudaEventElapsedTime(&ms, start->event, end->event);
	if (err == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return tn__error(TN_EBUSY, "Both events must be completed before calculating "
					   "elapsed time.");
	}
	if (err == cudaSuccess)
		*ret_ms = ms;
	return tn__cuda_error(err, "cudaEventElapsedTime");
}
