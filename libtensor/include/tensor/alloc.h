/* SPDX-License-Identifier: MIT */
/*
 * Allocators: one per device type, looked up by storages when they allocate (the reference
 * notes' SetAllocator/GetAllocator), plus the CPU allocator's controls and statistics and the
 * fault-injection hook used by the tests.
 *
 * The CPU allocator returns 64-byte aligned memory. Blocks of TN_CPU_LARGE_BLOCK bytes or more
 * are mapped directly, 2 MiB aligned, advised for transparent huge pages (MADV_HUGEPAGE), and
 * on free kept in a cache for reuse by the next allocation of the same rounded size (glibc
 * would hand them back to the kernel, and the next tensor of that size would pay one page
 * fault per 4 KiB page). A byte limit and tn_cpu_allocator_trim() bound what the cache keeps.
 */
#ifndef TENSOR_ALLOC_H
#define TENSOR_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/device.h>
#include <tensor/macros.h>

TN_BEGIN_DECLS

/* Blocks at least this large go to the mapped, huge-page, cached path. */
#define TN_CPU_LARGE_BLOCK ((size_t)1 << 20)

/* Every CPU allocation is aligned to this many bytes. */
#define TN_CPU_ALIGNMENT 64

/*
 * An allocator. @alloc returns memory for @nbytes bytes (never called with 0: empty storages
 * have a NULL data pointer) aligned to at least TN_CPU_ALIGNMENT for host memory, or NULL when
 * out of memory; @free gets back the same pointer and the same @nbytes. Both may be called
 * from any thread. The struct is borrowed: it must outlive every storage allocated through it.
 */
typedef struct tn_allocator {
	const char *name;
	void *ctx;
	void *(*alloc)(void *ctx, size_t nbytes);
	void (*free)(void *ctx, void *ptr, size_t nbytes);
} tn_allocator;

/*
 * tn_allocator_set - install @allocator for @type; NULL restores the built-in default.
 * Storages that already exist keep the allocator they were made with.
 * Returns 0, or TN_EINVAL for a bad device type or an allocator missing a callback.
 */
TN_EXPORT int tn_allocator_set(enum tn_device_type type, const tn_allocator *allocator);

/*
 * tn_allocator_get - the allocator storages of @type use now (borrowed), or NULL when the
 * device type has none (CUDA before the CUDA backend registers one; Meta never allocates).
 */
TN_EXPORT const tn_allocator *tn_allocator_get(enum tn_device_type type);

/*
 * tn_cpu_allocator - the built-in CPU allocator (borrowed, static).
 */
TN_EXPORT const tn_allocator *tn_cpu_allocator(void);

/* What the CPU allocator writes into fresh memory. TN_ALLOC_FILL=zero|junk|none sets it. */
enum tn_alloc_fill {
	TN_FILL_NONE, /* leave as is (fresh pages are zero, reused blocks are not) */
	TN_FILL_ZERO, /* memset to 0 */
	TN_FILL_JUNK, /* fill with 0x7fedcba9 words (NaN as float32) on alloc and on free */
};

/*
 * tn_cpu_allocator_set_fill - change the fill mode. The first allocation reads TN_ALLOC_FILL
 * from the environment unless this was called before. Returns 0, or TN_EINVAL.
 */
TN_EXPORT int tn_cpu_allocator_set_fill(enum tn_alloc_fill fill);

/*
 * tn_cpu_allocator_set_cache_limit - the most bytes the large-block cache may keep; blocks
 * beyond it are unmapped on free. Lowering the limit trims at once. The default is 1 GiB, or
 * TN_CPU_CACHE_LIMIT (bytes, suffix K/M/G allowed) from the environment. Returns 0.
 */
TN_EXPORT int tn_cpu_allocator_set_cache_limit(size_t bytes);

/*
 * tn_cpu_allocator_trim - unmap every cached block, and free the small blocks (64 KiB or less)
 * the calling thread keeps for reuse. Returns the number of bytes released.
 */
TN_EXPORT size_t tn_cpu_allocator_trim(void);

/*
 * tn_cpu_allocator_set_numa_node - place large blocks mapped from now on on NUMA node @node
 * (mbind before first touch), or anywhere when @node is -1. Cached blocks of another
 * placement are not reused for the new one. Returns 0, or TN_ERANGE when the node does not
 * exist on this machine.
 */
TN_EXPORT int tn_cpu_allocator_set_numa_node(int node);

typedef struct tn_alloc_stats {
	uint64_t allocated_bytes;  /* bytes in live blocks, as requested */
	uint64_t allocated_blocks; /* live blocks */
	uint64_t peak_bytes;       /* high-water mark of allocated_bytes since the last reset */
	uint64_t cached_bytes;     /* bytes of large blocks kept for reuse */
	uint64_t cached_blocks;
	uint64_t cache_limit;      /* current limit on cached_bytes */
	uint64_t huge_bytes;       /* mapped bytes advised for huge pages (live and cached) */
	uint64_t num_allocs;       /* successful allocations since start */
	uint64_t num_frees;
	uint64_t cache_hits;       /* large allocations served from the cache */
	uint64_t cache_misses;     /* large allocations that had to map */
	uint64_t live_objects;     /* live tensor and storage handles (all devices) */
} tn_alloc_stats;

/*
 * tn_cpu_allocator_stats - copy the CPU allocator's counters into *ret_stats.
 * Returns 0, or TN_EINVAL for NULL.
 */
TN_EXPORT int tn_cpu_allocator_stats(tn_alloc_stats *ret_stats);

/*
 * tn_cpu_allocator_reset_peak - set peak_bytes to the current allocated_bytes.
 */
TN_EXPORT void tn_cpu_allocator_reset_peak(void);

/*
 * tn_alloc_fail_nth - fault injection. Make the @nth allocation the library attempts from now
 * on (counting data blocks and the library's own metadata, on any thread) fail as if out of
 * memory, once; 0 disables. Returns the number of allocations attempted since the previous
 * call, so a test can loop N = 1, 2, ... until a constructor succeeds.
 */
TN_EXPORT uint64_t tn_alloc_fail_nth(uint64_t nth);

TN_END_DECLS

#endif /* TENSOR_ALLOC_H */
