/* SPDX-License-Identifier: MIT */
/*
 * The caching device allocator's core, in the image of PyTorch's CUDACachingAllocator, with
 * CUDA behind a table of function pointers so the bookkeeping can be tested without a GPU
 * (tests/check_cuda_alloc.c drives it over host memory). allocator_cuda.c supplies the real
 * backend over cudart and the public tn_cuda_* functions over one global instance.
 *
 * Policy (PyTorch's constants):
 *   - request sizes are rounded up to 512 bytes;
 *   - requests of 1 MiB or less come from the small pool, carved out of 2 MiB segments;
 *     larger ones from the large pool, out of 20 MiB segments for requests under 10 MiB, else
 *     out of a segment of the request rounded up to 2 MiB;
 *   - free blocks are cached per (device, pool) in a tree ordered by (stream, size, address):
 *     an allocation takes the smallest free block of its stream that fits (best fit), never
 *     a block of another stream;
 *   - a block is split when the remainder is at least 512 bytes (small pool) or more than
 *     1 MiB (large pool); a freed block merges with free neighbours of its segment;
 *   - blocks of max_split bytes or more (TN__CCA_MAX_SPLIT_DEFAULT) are never split, serve
 *     only requests of max_split bytes or more, and only when they exceed the request by
 *     less than 20 MiB (PyTorch's max_split_size_mb, with a finite default);
 *   - a block freed after tn__cca_record_stream is not reused until an event recorded on
 *     each of those streams at free time has completed; pending events are polled at each
 *     allocation and waited for by empty_cache and by an out-of-memory retry;
 *   - when the backend (or the byte limit) refuses a segment, the pool's cached unused
 *     segments are released and the allocation tried again, then every device's cache after
 *     waiting for pending events, then it fails with TN_ENOMEM and PyTorch's message.
 * Every device has its own mutex; the pointer-to-block map has one of its own (taken after a
 * device's mutex, never before it).
 */
#ifndef TN_CUDA_ALLOCATOR_H
#define TN_CUDA_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "../libtensor/internal.h"
#include <tensor/cuda.h>

#define TN__CCA_MIN_BLOCK ((size_t)512)               /* rounding of every request */
#define TN__CCA_SMALL_SIZE ((size_t)1 << 20)          /* largest request of the small pool */
#define TN__CCA_SMALL_BUFFER ((size_t)2 << 20)        /* segment size of the small pool */
#define TN__CCA_LARGE_BUFFER ((size_t)20 << 20)       /* segment for requests under 10 MiB */
#define TN__CCA_MIN_LARGE_ALLOC ((size_t)10 << 20)    /* from here segments are per request */
#define TN__CCA_ROUND_LARGE ((size_t)2 << 20)         /* ... rounded up to this */
#define TN__CCA_MAX_SPLIT_DEFAULT ((size_t)256 << 20) /* blocks this large are not split */

/*
 * What the core needs from CUDA. Every function returns 0 or a libtensor error code with the
 * message set (malloc: TN_ENOMEM when the device is out of memory, which the core answers by
 * releasing its cache and trying again; anything else is passed on at once). Streams and
 * events are opaque: a cudaStream_t (NULL is the default stream) and a cudaEvent_t.
 */
struct tn__cuda_backend {
	void *ctx;
	int (*malloc)(void *ctx, int device, size_t bytes, void **ret_ptr);
	int (*free)(void *ctx, int device, void *ptr);
	int (*mem_info)(void *ctx, int device, size_t *ret_free, size_t *ret_total);
	int (*event_create)(void *ctx, int device, void **ret_event);
	int (*event_record)(void *ctx, void *event, void *stream);
	int (*event_query)(void *ctx, void *event); /* 1 done, 0 pending, <0 error */
	int (*event_synchronize)(void *ctx, void *event);
	void (*event_destroy)(void *ctx, void *event);
};

struct tn__cca;

/* A new allocator over @backend (copied) for devices 0..@ndevices-1. */
int tn__cca_create(const struct tn__cuda_backend *backend, int ndevices, struct tn__cca **ret);

/* Wait for pending events, give every segment back to the backend (live blocks included: the
 * caller says none is in use) and free the instance. NULL is accepted. */
void tn__cca_destroy(struct tn__cca *cca);

/* A block of at least @size bytes on @device for work on @stream, 512-byte aligned within a
 * segment the backend returned. @size 0 gives NULL. TN_ENOMEM with PyTorch's message when
 * the device (or the limit) has no room even after the cache was released. */
int tn__cca_malloc(struct tn__cca *cca, int device, size_t size, void *stream, void **ret_ptr);

/* Give back a block of tn__cca_malloc (NULL: nothing). TN_EINVAL for a pointer the allocator
 * did not hand out (or already got back). */
int tn__cca_free(struct tn__cca *cca, void *ptr);

/* The live block at @ptr is used by work on @stream (see the policy above); its own stream
 * needs no recording. TN_EINVAL for an unknown pointer. */
int tn__cca_record_stream(struct tn__cca *cca, void *ptr, void *stream);

/* Wait for every pending event, then release every cached segment no block of which is in
 * use, on every device. Returns the bytes released, or an error (after releasing what it
 * could). */
int64_t tn__cca_empty_cache(struct tn__cca *cca);

int tn__cca_stats(struct tn__cca *cca, int device, tn_cuda_memory_stats *ret);
int tn__cca_reset_peak(struct tn__cca *cca, int device);
/* The most bytes @device may reserve, 0 for no limit. Lowering it releases nothing. */
int tn__cca_set_limit(struct tn__cca *cca, int device, uint64_t bytes);
/* Blocks of @bytes or more are not split (SIZE_MAX: every block may be, as PyTorch's default);
 * at least TN__CCA_LARGE_BUFFER + 1 (PyTorch's bound). For all devices. */
int tn__cca_set_max_split(struct tn__cca *cca, size_t bytes);
int tn__cca_ndevices(const struct tn__cca *cca);

/* The size of the live block at @ptr (rounded), its requested size and the device. */
int tn__cca_block_info(struct tn__cca *cca, const void *ptr, size_t *ret_size,
		       size_t *ret_requested, int *ret_device);

/* The segment (the backend's allocation) that holds the live block at @ptr: what a CUDA IPC
 * handle names, since cudaIpcGetMemHandle works on whole allocations. */
int tn__cca_segment_of(struct tn__cca *cca, const void *ptr, void **ret_base, size_t *ret_size);
/*
 * Verify every invariant of the bookkeeping and recompute the statistics from the blocks:
 * blocks of a segment tile it, neighbours link both ways, no two adjacent free blocks, the
 * trees hold exactly the free blocks in order, the pointer map exactly the live ones, and
 * the counters match. 0, or TN_EIO with the first broken invariant as the message. For tests.
 */
int tn__cca_check(struct tn__cca *cca);

/* Format @bytes as PyTorch's format_size does ("512 bytes", "1.50 KiB", "2.00 MiB"). */
void tn__cca_format_size(char *buf, size_t len, uint64_t bytes);

#endif /* TN_CUDA_ALLOCATOR_H */
