/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend's public surface: devices, streams, events and the caching device
 * allocator, in the image of c10::cuda (CUDAStream, CUDAEvent, CUDACachingAllocator).
 *
 * Every function is present in every build. A libtensor built without CUDA answers
 * TN_ENODEV ("libtensor was built without CUDA") from the ones that need a device, and
 * tn_cuda_device_count() answers 0. CUDA's own errors come back as libtensor codes with CUDA's
 * message in tn_last_error(): cudaErrorMemoryAllocation is TN_ENOMEM, an invalid device
 * ordinal TN_ENODEV, an invalid value TN_EINVAL, cudaErrorNotReady is not an error (queries
 * answer 0), and anything else (launch failures, a lost device) is TN_EIO.
 */
#ifndef TENSOR_CUDA_H
#define TENSOR_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/arena.h>
#include <tensor/macros.h>
#include <tensor/storage.h>
#include <tensor/tensor.h>

TN_BEGIN_DECLS

/* ---- devices ---- */

typedef struct tn_cuda_device_properties {
	char name[256];
	int major; /* compute capability */
	int minor;
	int multiprocessor_count;
	int warp_size;
	int max_threads_per_block;
	int max_threads_per_multiprocessor;
	int l2_cache_bytes;
	int memory_bus_width; /* bits */
	int pci_bus_id;
	int pci_device_id;
	uint64_t total_memory; /* bytes */
	bool integrated;
	bool can_map_host_memory;
	bool concurrent_managed_access;
} tn_cuda_device_properties;

/*
 * tn_cuda_get_device_properties - what device @device is (cudaGetDeviceProperties).
 * Returns 0, TN_EINVAL (NULL ret), TN_ENODEV (no such device, or no CUDA).
 */
TN_EXPORT int tn_cuda_get_device_properties(int device, tn_cuda_device_properties *ret);

/*
 * tn_cuda_set_device - make @device the calling thread's current device.
 * tn_cuda_current_device - the calling thread's current device.
 */
TN_EXPORT int tn_cuda_set_device(int device);
TN_EXPORT int tn_cuda_current_device(int *ret_device);

/*
 * tn_cuda_synchronize - wait for all work queued on @device (-1: the current one).
 */
TN_EXPORT int tn_cuda_synchronize(int device);

/*
 * tn_cuda_mem_get_info - free and total bytes of @device (-1: the current one), as the driver
 * sees them (other processes' memory included).
 */
TN_EXPORT int tn_cuda_mem_get_info(int device, size_t *ret_free, size_t *ret_total);

/* ---- streams ---- */

/*
 * A stream, as c10::cuda::CUDAStream: a value naming a device and a slot. Slot 0 is the
 * device's default (legacy NULL) stream; slots 1..32 are a pool of low-priority streams and
 * 33..64 of high-priority ones, created on first use, non-blocking, living as long as the
 * process. Pool streams are handed out round-robin, so many callers share 32 streams, as in
 * PyTorch; a value may be copied freely and never needs destroying.
 */
typedef struct tn_cuda_stream {
	int32_t device;
	int32_t slot;
} tn_cuda_stream;

#define TN_CUDA_STREAMS_PER_POOL 32

/* tn_cuda_default_stream - the default stream of @device (-1: the current device); never
 * fails. */
TN_EXPORT tn_cuda_stream tn_cuda_default_stream(int device);

/*
 * tn_cuda_stream_from_pool - the next stream of @device's pool of the given priority
 * (-1 device: the current one).
 */
TN_EXPORT int tn_cuda_stream_from_pool(int device, bool high_priority, tn_cuda_stream *ret);

/*
 * tn_cuda_current_stream - the calling thread's current stream on @device (-1: the current
 * device); the default stream until tn_cuda_set_current_stream changes it. Kernels, copies and
 * the caching allocator work on the current stream of the device of their tensors.
 */
TN_EXPORT int tn_cuda_current_stream(int device, tn_cuda_stream *ret);

/* tn_cuda_set_current_stream - make @stream the calling thread's current stream on its device. */
TN_EXPORT int tn_cuda_set_current_stream(tn_cuda_stream stream);

/* tn_cuda_stream_synchronize - wait for all work queued on @stream. */
TN_EXPORT int tn_cuda_stream_synchronize(tn_cuda_stream stream);

/* tn_cuda_stream_query - 1 when all work queued on @stream is done, 0 when some is not, or an
 * error. */
TN_EXPORT int tn_cuda_stream_query(tn_cuda_stream stream);

/* tn_cuda_stream_handle - the cudaStream_t of @stream (NULL for a default stream), to pass to
 * one's own kernels; @stream must name a valid device and slot (*ret_handle unchanged on
 * error). */
TN_EXPORT int tn_cuda_stream_handle(tn_cuda_stream stream, void **ret_handle);

/* ---- events ---- */

typedef struct tn_cuda_event tn_cuda_event;

enum tn_cuda_event_flags {
	TN_CUDA_EVENT_TIMING = 1,       /* record times (elapsed_ms); off by default, as PyTorch */
	TN_CUDA_EVENT_BLOCKING = 2,     /* synchronize sleeps instead of spinning */
	TN_CUDA_EVENT_INTERPROCESS = 4, /* shareable with another process (no timing) */
};

/*
 * tn_cuda_event_create - a new event; it takes the device of the stream it first records
 * (c10::cuda::CUDAEvent). Destroy with tn_cuda_event_destroy. Not thread-safe per event.
 */
TN_EXPORT int tn_cuda_event_create(unsigned flags, tn_cuda_event **ret_event);
TN_EXPORT void tn_cuda_event_destroy(tn_cuda_event *event);

/* tn_cuda_event_record - capture the work queued on @stream so far. */
TN_EXPORT int tn_cuda_event_record(tn_cuda_event *event, tn_cuda_stream stream);

/* tn_cuda_event_query - 1 when the captured work is done (or nothing was recorded), 0 when not. */
TN_EXPORT int tn_cuda_event_query(tn_cuda_event *event);

/* tn_cuda_event_synchronize - wait for the captured work. */
TN_EXPORT int tn_cuda_event_synchronize(tn_cuda_event *event);

/* tn_cuda_stream_wait_event - make later work on @stream wait for @event (no host wait). */
TN_EXPORT int tn_cuda_stream_wait_event(tn_cuda_stream stream, tn_cuda_event *event);

/* tn_cuda_event_elapsed_ms - milliseconds from @start to @end, both recorded with
 * TN_CUDA_EVENT_TIMING and complete. */
TN_EXPORT int tn_cuda_event_elapsed_ms(tn_cuda_event *start, tn_cuda_event *end, float *ret_ms);

/* ---- the caching device allocator ---- */

/*
 * Counters of one device's caching allocator, as torch.cuda.memory_stats() (the "all" pool):
 * allocated = handed to storages, reserved = obtained from cudaMalloc and kept, active =
 * allocated plus blocks freed but still in use by a stream (record_stream).
 */
typedef struct tn_cuda_memory_stats {
	uint64_t allocated_bytes;
	uint64_t allocated_peak;
	uint64_t reserved_bytes;
	uint64_t reserved_peak;
	uint64_t active_bytes;
	uint64_t requested_bytes; /* as asked, before rounding */
	uint64_t inactive_split_bytes; /* free pieces of split segments */
	uint64_t allocated_blocks;
	uint64_t segments;
	uint64_t small_pool_reserved; /* segments of 2 MiB for requests of 1 MiB or less */
	uint64_t large_pool_reserved;
	uint64_t num_allocs;
	uint64_t num_frees;
	uint64_t num_device_mallocs; /* cudaMalloc calls that succeeded */
	uint64_t num_device_frees;   /* cudaFree calls */
	uint64_t num_alloc_retries;  /* cache flushed and cudaMalloc tried again */
	uint64_t num_ooms;
	uint64_t memory_limit; /* 0 when none (tn_cuda_set_memory_limit) */
} tn_cuda_memory_stats;

/* tn_cuda_allocator_stats - copy @device's counters (-1: the current device) into *ret. */
TN_EXPORT int tn_cuda_allocator_stats(int device, tn_cuda_memory_stats *ret);

/* tn_cuda_reset_peak_memory_stats - peaks set to the current values. */
TN_EXPORT int tn_cuda_reset_peak_memory_stats(int device);

/*
 * tn_cuda_empty_cache - give every cached block that no storage and no stream uses back to
 * CUDA (cudaFree), on every device, after waiting for the streams recorded on freed blocks.
 * Returns the bytes released, or an error.
 */
TN_EXPORT int64_t tn_cuda_empty_cache(void);

/*
 * tn_cuda_set_memory_limit - the most bytes @device's allocator may reserve (0: no limit, the
 * default), as torch.cuda.set_per_process_memory_fraction in bytes. An allocation past it
 * fails with TN_ENOMEM and the figures, as a real out-of-memory would.
 */
TN_EXPORT int tn_cuda_set_memory_limit(int device, uint64_t bytes);

/*
 * tn_cuda_record_stream - @storage (a CUDA storage of the caching allocator) is used by work
 * on @stream: when the storage is freed, its block is not reused until the work queued on
 * @stream up to now has finished (Tensor.record_stream). Returns 0, TN_EINVAL for a storage
 * of another device type or allocator.
 */
TN_EXPORT int tn_cuda_record_stream(const tn_storage *storage, tn_cuda_stream stream);

/* tn_cuda_caching_allocator - the allocator CUDA storages use (borrowed, static); NULL in a
 * build without CUDA. */
TN_EXPORT const tn_allocator *tn_cuda_caching_allocator(void);

/* ---- sharing device storages between processes (CUDA IPC through tensord) ---- */

typedef struct tn_tensor tn_tensor;
typedef struct tn_tensord tn_tensord;

/*
 * tn_cuda_ipc_export - share CUDA tensor @tensor under @name through tensord: the IPC handle
 * of the caching allocator's allocation that holds its storage, the view, and an event
 * recorded on the current stream (importers wait for the writes queued before it). The
 * storage stays allocated while exported. @mode: 0 (the owner's uid only), or 040 (the
 * owner's group) and 004 (everyone) may import. TN_EEXIST when the name is exported.
 */
TN_EXPORT int tn_cuda_ipc_export(tn_tensord *conn, const char *name, const tn_tensor *tensor,
				 unsigned mode);
/*
 * tn_cuda_ipc_unexport - withdraw the export @name this process made through @conn: no new
 * imports. Its storage is let go at once when nobody holds it, else by a later
 * tn_cuda_ipc_collect once every importer has released it or exited.
 */
TN_EXPORT int tn_cuda_ipc_unexport(tn_tensord *conn, const char *name);
/*
 * tn_cuda_ipc_collect - let go of the storages of withdrawn exports that nobody holds any
 * more (torch.cuda.ipc_collect). Returns how many were let go, or an error.
 */
TN_EXPORT int64_t tn_cuda_ipc_collect(void);
/*
 * tn_cuda_ipc_import - a tensor over the device memory exported as @name by another process,
 * on the local device with the exporter's GPU UUID; this thread's current stream on it waits
 * for the exporter's event. The hold ends when the tensor's storage dies (after the device
 * finishes its queued work). TN_ENOENT (no such export, or the caller may not import it),
 * TN_ENODEV (that GPU is not visible here).
 */
TN_EXPORT int tn_cuda_ipc_import(tn_tensord *conn, const char *name, tn_tensor **ret_tensor);
/* ---- pinned (page-locked) host memory ---- */

/*
 * Host memory registered with CUDA (cudaHostRegister) is page-locked: the GPU reaches it by
 * DMA, so a copy between it and a device runs asynchronously (tn_copy_ with non_blocking)
 * and at the link's full speed. libtensor keeps a table of the ranges registered through it;
 * the queries below read that table and never call CUDA.
 */
enum tn_cuda_host_flags {
	TN_CUDA_HOST_READ_ONLY = 1, /* the device only reads it (cudaHostRegisterReadOnly);
				     * required for a PROT_READ mapping */
};

/*
 * tn_cuda_host_register - page-lock [ptr, ptr+nbytes) for DMA (cudaHostRegister, portable to
 * every device). Ranges may not overlap a registered one (TN_EEXIST), including memory
 * registered with CUDA directly. The memory must stay mapped until tn_cuda_host_unregister.
 * Returns 0, TN_EINVAL (NULL ptr, nbytes 0, unknown flags), TN_EEXIST, TN_ENODEV (no GPU, or
 * no CUDA), or CUDA's error (TN_EINVAL for memory CUDA refuses, TN_ENOMEM).
 */
TN_EXPORT int tn_cuda_host_register(void *ptr, size_t nbytes, unsigned flags);

/*
 * tn_cuda_host_unregister - undo it; @ptr is the start given to register (TN_ENOENT if not).
 * Waits for the non_blocking copies still using the range. TN_EINVAL for an arena's mapping
 * (use tn_cuda_arena_unregister), TN_EBUSY while another thread registers or unregisters it.
 */
TN_EXPORT int tn_cuda_host_unregister(void *ptr);

/*
 * tn_cuda_is_pinned - whether all of [ptr, ptr+nbytes) lies in one registered range (ranges
 * registered through libtensor; never a CUDA call). nbytes 0 asks about the byte at @ptr.
 */
TN_EXPORT bool tn_cuda_is_pinned(const void *ptr, size_t nbytes);

/*
 * tn_cuda_arena_register - pin the arena handle's mappings (the read-write one and the
 * read-only one used for sealed tensors; a read-only handle's one mapping READ_ONLY), once per
 * mapping: a second call is a no-op returning 0. The whole file is faulted in and locked.
 * The registration ends with tn_cuda_arena_unregister or when the handle's last reference is
 * dropped (before the mappings are unmapped). Returns 0, TN_EINVAL (not a live handle of this
 * process), TN_ENODEV, TN_EEXIST, or CUDA's error; on error nothing stays registered.
 *
 * tn_cuda_arena_unregister - unregister what tn_cuda_arena_register registered (0 when
 * nothing was); waits for the non_blocking copies still using the mappings.
 */
TN_EXPORT int tn_cuda_arena_register(tn_arena *arena);
TN_EXPORT int tn_cuda_arena_unregister(tn_arena *arena);

/*
 * tn_tensor_is_pinned - whether a CPU tensor's bytes (its storage's) are pinned
 * (Tensor.is_pinned()); false for other devices and invalid handles.
 */
TN_EXPORT bool tn_tensor_is_pinned(const tn_tensor *t);

TN_END_DECLS

#endif /* TENSOR_CUDA_H */
