/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory arenas: storages that several processes map zero-copy, named typed tensors,
 * sealing, and lifetimes that survive any process being killed (libtensor-arena(7)).
 *
 * An arena is one file on tmpfs or hugetlbfs. Each process that attaches maps it once and
 * takes a slot in the arena's client table. A block of the arena's heap records, as a bit
 * mask of slots, which processes hold it, and how many names pin it; the last holder to let
 * go frees it. A process that dies keeps its bits until somebody reclaims its slot
 * (tn_arena_reclaim, done by tensord in production), which frees what nobody else holds.
 * Every change to the arena's metadata is made under a process-shared robust mutex and
 * through an undo log, so a process killed at any instruction leaves a state that the next
 * one to take the lock rolls back. Allocation, free, publish and lookup make no system call
 * when the lock is not contended.
 *
 * Handles (tn_arena) are per process and reference counted: storages allocated in or looked
 * up from an arena keep it attached until they are gone.
 */
#ifndef TENSOR_ARENA_H
#define TENSOR_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/alloc.h>
#include <tensor/dtype.h>
#include <tensor/macros.h>
#include <tensor/numa.h>
#include <tensor/tensor.h>

TN_BEGIN_DECLS

typedef struct tn_arena tn_arena;

#define TN_ARENA_NAME_MAX 255    /* bytes in a tensor name, without the terminating NUL */
#define TN_ARENA_FILE_NAME_MAX 200 /* bytes in an arena's own name */
#define TN_ARENA_MAX_CLIENTS 256 /* processes attached at once */
#define TN_ARENA_MAX_DIMS 16     /* dims of a published tensor */
#define TN_ARENA_ALIGNMENT 64    /* every block's data is aligned to this */

/* Flags of tn_arena_options.flags. */
#define TN_ARENA_HUGEPAGES (1u << 0)         /* back the arena with 2 MiB pages if possible */
#define TN_ARENA_REQUIRE_HUGEPAGES (1u << 1) /* ... and fail (TN_ENOTSUP) rather than fall back */
#define TN_ARENA_RESERVE_HUGEPAGES (1u << 2) /* as root, raise vm.nr_hugepages for what is missing */

/* What backs an arena's pages (tn_arena_stats.backing). */
enum tn_arena_backing {
	TN_ARENA_BACKING_TMPFS = 0,      /* tmpfs, 4 KiB pages */
	TN_ARENA_BACKING_TMPFS_HUGE = 1, /* tmpfs mounted with huge=always or within_size */
	TN_ARENA_BACKING_HUGETLBFS = 2,  /* hugetlbfs, 2 MiB pages reserved at creation */
	TN_ARENA_BACKING_FILE = 3,       /* another file system (tn_arena_options.dir) */
};

typedef struct tn_arena_options {
	uint64_t size;      /* bytes of the whole file; rounded up to the page size */
	uint32_t flags;     /* TN_ARENA_* above */
	uint32_t max_names; /* capacity of the named directory; 0 picks one from the size */
	enum tn_numa_policy numa_policy; /* placement of the whole arena, before first touch */
	uint64_t numa_nodes; /* node mask for TN_NUMA_BIND, _INTERLEAVE and _PREFERRED */
	const char *dir;    /* directory of the file; NULL: a hugetlbfs or huge tmpfs mount when
			       TN_ARENA_HUGEPAGES asks for one, else /dev/shm */
	unsigned mode;      /* permission bits of the file; 0 means 0600 */
} tn_arena_options;

/*
 * tn_arena_options_init - fill *opts with the defaults: 64 MiB, no flags, default directory
 * capacity and placement, mode 0600.
 */
TN_EXPORT void tn_arena_options_init(tn_arena_options *opts);

/*
 * tn_arena_create - create the arena @name (letters, digits, '.', '_', '-'; not starting with
 * '.'), format it and attach to it. The file's bytes are allocated with fallocate, so a full
 * tmpfs or too few huge pages fail here with TN_ENOSPC, never later with SIGBUS.
 * *ret_arena gets a new reference. Errors: TN_EINVAL (bad name or options), TN_EEXIST (the
 * arena exists), TN_ENOSPC, TN_ENOTSUP (TN_ARENA_REQUIRE_HUGEPAGES and no huge pages),
 * TN_EPERM, TN_ENOMEM, TN_EIO.
 */
TN_EXPORT int tn_arena_create(const char *name, const tn_arena_options *opts,
			      tn_arena **ret_arena);

/*
 * tn_arena_open - attach to the existing arena @name in @dir (NULL: look in the mounted
 * hugetlbfs and huge tmpfs file systems, then /dev/shm). The file is validated (magic,
 * version, sizes and every offset) before use. Errors: TN_ENOENT, TN_EINVAL (not an arena,
 * or a damaged header), TN_EBUSY (all client slots taken), TN_EPERM, TN_ENOMEM.
 */
TN_EXPORT int tn_arena_open(const char *name, const char *dir, tn_arena **ret_arena);

/*
 * tn_arena_attach_fd - attach to the arena behind the open file descriptor @fd (as tensord
 * passes it). The descriptor is duplicated; the caller keeps its own. Errors as tn_arena_open.
 */
TN_EXPORT int tn_arena_attach_fd(int fd, tn_arena **ret_arena);

/*
 * tn_arena_ref - add a reference; returns @arena. tn_arena_unref - drop one (NULL accepted;
 * returns NULL). When the last reference goes (the caller's and those of storages still
 * allocated in or looked up from the arena), the process's holds are dropped, its client slot
 * is released and the file is unmapped. The arena itself stays until tn_arena_destroy.
 */
TN_EXPORT tn_arena *tn_arena_ref(tn_arena *arena);
TN_EXPORT tn_arena *tn_arena_unref(tn_arena *arena);

/* Flags of tn_arena_destroy. */
#define TN_ARENA_FORCE (1u << 0) /* destroy even when other processes are attached */

/*
 * tn_arena_destroy - remove the arena file @name from @dir (NULL: as tn_arena_open). Mapped
 * copies stay usable until unmapped; the memory returns to the system after the last one.
 * Refuses with TN_EBUSY while a live process other than the caller is attached, unless
 * TN_ARENA_FORCE. Errors: TN_ENOENT, TN_EINVAL, TN_EBUSY, TN_EPERM.
 */
TN_EXPORT int tn_arena_destroy(const char *name, const char *dir, unsigned flags);

/*
 * tn_arena_path - the arena file's path (borrowed, lives as long as the handle).
 * tn_arena_fd - the handle's file descriptor (borrowed, for passing to another process).
 * tn_arena_slot - this process's slot in the client table.
 */
TN_EXPORT const char *tn_arena_path(const tn_arena *arena);
TN_EXPORT int tn_arena_fd(const tn_arena *arena);
TN_EXPORT int tn_arena_slot(const tn_arena *arena);

/*
 * tn_arena_alloc - a raw block of at least @nbytes bytes (1 or more), aligned to
 * TN_ARENA_ALIGNMENT (4 KiB from 64 KiB up, 2 MiB from 2 MiB up), held by this process. Raw
 * blocks are private to the process (they cannot be named; share storages from
 * tn_arena_allocator instead) and do not keep the handle alive: its last unref frees them.
 * tn_arena_free - free the raw block at @ptr (as returned by tn_arena_alloc, from any thread).
 * Blocks of 4 KiB or less go to the calling thread's cache and come back on its next
 * allocation of the same size class without taking any lock.
 * Neither makes a system call unless the arena's lock is contended.
 * Errors: TN_EINVAL, TN_ENOMEM (no free block is large enough; the message gives the free
 * bytes and the largest free block), TN_EBADF (a bad handle, or @ptr not a raw block this
 * process holds, or freed already).
 */
TN_EXPORT int tn_arena_alloc(tn_arena *arena, size_t nbytes, void **ret_ptr);
TN_EXPORT int tn_arena_free(tn_arena *arena, void *ptr);

/*
 * tn_arena_trim - give back to the heap the small raw blocks the calling thread freed and
 * keeps for its next allocations; they count as used, held by this process, until then.
 * Allocation trims by itself before failing with TN_ENOMEM; thread exit and the handle's last
 * unref free them too. Returns the bytes given back, or TN_EBADF.
 */
TN_EXPORT int64_t tn_arena_trim(tn_arena *arena);

/*
 * tn_arena_allocator - an allocator (borrowed, valid while the arena handle lives) that
 * allocates CPU storages in @arena; each storage keeps the arena attached.
 * tn_arena_use - make the calling thread's CPU storages, and so the outputs of factories and
 * operators, come from @arena (NULL: back to the device's registered allocator). The thread
 * holds a reference to @arena until it switches away. Returns 0, or TN_EBADF.
 * tn_arena_current - the calling thread's arena (borrowed), or NULL.
 */
TN_EXPORT const tn_allocator *tn_arena_allocator(tn_arena *arena);
TN_EXPORT int tn_arena_use(tn_arena *arena);
TN_EXPORT tn_arena *tn_arena_current(void);

/*
 * tn_arena_place - put the pages of the block at @ptr (from tn_arena_alloc or an arena
 * storage's data) on the NUMA nodes of @policy and @nodes, for every process: the arena's pages
 * were placed at creation by its own policy, so this migrates them (mbind with MPOL_MF_MOVE,
 * a system call; meant for blocks that outlive the call by far). The block must cover whole
 * pages: blocks of 64 KiB or more are page aligned. Errors: TN_EBADF (not a block), TN_EINVAL
 * (a block that shares pages with others, a bad policy or an empty mask), TN_ERANGE (nodes this
 * machine lacks), TN_EIO (the kernel refused).
 * tn_arena_residency - count the arena's data pages per NUMA node into @ret_pages[0..nnodes-1]
 * (move_pages; a node beyond @nnodes is counted in no entry). Returns the pages counted, or
 * TN_EBADF/TN_EINVAL/TN_EIO.
 */
TN_EXPORT int tn_arena_place(tn_arena *arena, void *ptr, enum tn_numa_policy policy,
			     uint64_t nodes);
TN_EXPORT int64_t tn_arena_residency(tn_arena *arena, uint64_t *ret_pages, int nnodes);

/* ---- the named directory -------------------------------------------------------------------- */

/* A name's slot and generation: refused (TN_ESTALE) once the name is unpublished or replaced. */
typedef struct tn_arena_handle {
	uint32_t index;
	uint32_t generation;
} tn_arena_handle;

/* Flags of tn_arena_publish. */
#define TN_ARENA_SEAL (1u << 0)    /* seal at once (see tn_arena_seal) */
#define TN_ARENA_REPLACE (1u << 1) /* replace an existing, unsealed entry of the same name */
#define TN_ARENA_EVICTABLE (1u << 2) /* a cache entry: TN_ARENA_CACHE (tn_arena_set_retention) */

/*
 * tn_arena_publish - give @tensor, whose storage must live in @arena, the name @name (1 to
 * TN_ARENA_NAME_MAX bytes, '/'-separated parts, none empty, no control characters), with its
 * dtype, sizes, strides and offset. The name pins the storage's block until unpublished.
 * *ret_handle (may be NULL) gets the entry's handle. Errors: TN_EINVAL (bad name, more than
 * TN_ARENA_MAX_DIMS dims, a tensor not in @arena), TN_EEXIST (the name exists and no
 * TN_ARENA_REPLACE, or it is sealed), TN_ENOSPC (the directory is full).
 */
TN_EXPORT int tn_arena_publish(tn_arena *arena, const char *name, const tn_tensor *tensor,
			       unsigned flags, tn_arena_handle *ret_handle);

/*
 * tn_arena_lookup - a tensor over the bytes published as @name, with its dtype, sizes, strides
 * and offset; the block is held for this process until the tensor and its views are gone. The
 * same block is mapped once and held once however often it is looked up. A sealed tensor is
 * read-only: its data lies in a read-only mapping (a write through a pointer faults) and
 * operators refuse to write to it. *ret_handle (may be NULL) gets the entry's handle.
 * Errors: TN_ENOENT, TN_EINVAL (bad name; a damaged entry is reported, never trusted).
 * tn_arena_lookup_handle - the same by handle; TN_ESTALE when the entry changed since.
 */
TN_EXPORT int tn_arena_lookup(tn_arena *arena, const char *name, tn_tensor **ret_tensor,
			      tn_arena_handle *ret_handle);
TN_EXPORT int tn_arena_lookup_handle(tn_arena *arena, tn_arena_handle handle,
				     tn_tensor **ret_tensor);

/* Flags of tn_arena_lookup_options.flags. */
#define TN_ARENA_LOOKUP_SEALED (1u << 0) /* wait until the name is published and sealed */

typedef struct tn_arena_lookup_options {
	int64_t timeout_ns; /* how long to wait: 0 not at all (as tn_arena_lookup), < 0 without
			       limit */
	uint32_t flags;     /* TN_ARENA_LOOKUP_* */
	uint32_t reserved;  /* 0 */
} tn_arena_lookup_options;

/*
 * tn_arena_lookup_wait - tn_arena_lookup, waiting up to @opts->timeout_ns for @name to be
 * published (and sealed, with TN_ARENA_LOOKUP_SEALED) by any process. The thread sleeps on a
 * futex word of the arena that every publish and seal advances: no polling, and no request to
 * tensord for a read-write handle (a read-only one asks tensord to mark it waiting). A publish
 * makes a system call only while somebody waits. @opts NULL: no wait. Errors: those of
 * tn_arena_lookup, and TN_ETIMEDOUT when the time ran out (the message names what was missing).
 */
TN_EXPORT int tn_arena_lookup_wait(tn_arena *arena, const char *name,
				   const tn_arena_lookup_options *opts, tn_tensor **ret_tensor,
				   tn_arena_handle *ret_handle);

/*
 * tn_arena_generation - the arena's directory generation: a 32-bit counter (it wraps) that
 * every publish, replace and seal by any process advances. 0 for a bad handle.
 * tn_arena_wait_change - sleep until the generation differs from @generation (read before the
 * caller last looked at the directory), or @timeout_ns passes (< 0: no limit; 0: do not
 * sleep). Returns 0 when it differs (look again), TN_ETIMEDOUT, TN_EBADF. The sleep is the
 * futex of tn_arena_lookup_wait; waiting for a name, or for any name under a prefix, is a loop
 * of generation, look, wait_change.
 */
TN_EXPORT uint32_t tn_arena_generation(tn_arena *arena);
TN_EXPORT int tn_arena_wait_change(tn_arena *arena, uint32_t generation, int64_t timeout_ns);

/*
 * tn_arena_cow - a writable, private, copy-on-write view of @tensor, a tensor over an arena
 * block (looked up, sealed or not, or allocated in the arena): the same sizes, strides and
 * bytes, mapped again MAP_PRIVATE from the arena file, so that the pages the process writes
 * become its own copies and every other process, and the arena, keep the shared bytes. No byte
 * is copied until written. The block stays held until the view is gone. For consumers that
 * cannot be told a tensor is read-only (DLPack 0.x: PyTorch). Errors: TN_EBADF (not a
 * tensor), TN_EINVAL (not in an arena of this process), TN_ENOMEM (the mapping failed).
 */
TN_EXPORT int tn_arena_cow(const tn_tensor *tensor, tn_tensor **ret_tensor);

/*
 * tn_arena_unpublish - remove the name; its block is freed when nobody holds it.
 * Errors: TN_ENOENT, TN_EINVAL.
 */
TN_EXPORT int tn_arena_unpublish(tn_arena *arena, const char *name);

/*
 * tn_arena_seal - make the named tensor read-only for every process, for good: later lookups
 * map it read-only, this process's own storage of it is marked read-only, and it can no
 * longer be replaced (it can still be unpublished). Sealing a sealed tensor is a no-op.
 * Errors: TN_ENOENT, TN_EINVAL.
 */
TN_EXPORT int tn_arena_seal(tn_arena *arena, const char *name);

#define TN_ARENA_ENTRY_SEALED (1u << 0)
#define TN_ARENA_ENTRY_CACHE (1u << 1)      /* retention TN_ARENA_CACHE */
#define TN_ARENA_ENTRY_SOFT_PINNED (1u << 2) /* retention TN_ARENA_SOFT_PINNED */
#define TN_ARENA_ENTRY_SPILLED (1u << 3)     /* on disk (tensord spilled it); no block */
#define TN_ARENA_ENTRY_RESTORING (1u << 4)   /* spilled, and a lookup asked for it back */
#define TN_ARENA_ENTRY_RESTORE_FAILED (1u << 5) /* spilled, and its last restore failed */

/* A directory entry, as tn_arena_list and tn_arena_info report it. */
typedef struct tn_arena_entry {
	char name[TN_ARENA_NAME_MAX + 1];
	enum tn_dtype dtype;
	int ndim;
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t strides[TN_ARENA_MAX_DIMS];
	int64_t storage_offset; /* elements */
	uint64_t block_bytes;   /* usable bytes of the block under it */
	uint32_t flags;         /* TN_ARENA_ENTRY_* */
	tn_arena_handle handle;
	int64_t pin_until;      /* TN_ARENA_ENTRY_SOFT_PINNED: the pin's end, seconds since the
				   epoch */
	uint64_t last_use_ns;   /* the publish or the last lookup under this name, ns since the
				   epoch (a coarse clock: a few ms) */
} tn_arena_entry;

/* ---- retention and eviction ----------------------------------------------------------------- */

/* What may happen to a published tensor when the arena fills up. */
enum tn_arena_retention {
	TN_ARENA_PINNED = 0,      /* never evicted (the default) */
	TN_ARENA_SOFT_PINNED = 1, /* not evicted before its time limit, then as TN_ARENA_CACHE */
	TN_ARENA_CACHE = 2,       /* evicted, least recently used first, when nobody holds it */
};

/*
 * tn_arena_set_retention - give the entry @name the retention class @retention; a soft pin
 * lasts @pin_seconds (1 or more) from now, and the argument is 0 for the other classes. An
 * entry is evicted (unpublished, its block freed) only while no process holds its block (none
 * has it looked up) and no other name shares the block. Sealed entries may be cache entries too.
 * Errors: TN_ENOENT, TN_EINVAL (bad name, class or time), TN_EPERM (read-only handle).
 */
TN_EXPORT int tn_arena_set_retention(tn_arena *arena, const char *name,
				     enum tn_arena_retention retention, int64_t pin_seconds);

/*
 * tn_arena_set_watermarks - eviction's thresholds of used bytes (headers included): when an
 * arena's use passes @high_water, tensord evicts evictable entries, least recently used
 * first, until it is at or below @low_water (0 < low_water <= high_water <= the heap's bytes).
 * New arenas start at 90% and 80% of the heap. Errors: TN_EINVAL, TN_EPERM, TN_EBADF.
 */
TN_EXPORT int tn_arena_set_watermarks(tn_arena *arena, uint64_t high_water, uint64_t low_water);

/* What tn_arena_evict did. */
typedef struct tn_arena_evict_report {
	uint64_t evicted;       /* entries */
	uint64_t evicted_bytes; /* bytes of the blocks freed, headers included */
	uint64_t used_bytes;    /* the arena's use afterwards */
} tn_arena_evict_report;

/*
 * tn_arena_evict - evict evictable entries (TN_ARENA_CACHE, and TN_ARENA_SOFT_PINNED past its
 * time limit), least recently used first, until the arena uses at most @target_used bytes or
 * nothing evictable is left. Each eviction is a change of its own: a process killed meanwhile
 * leaves the others done and the arena consistent. *ret_report (may be NULL) says what went.
 * An allocation that finds no room evicts the same way before it fails. Errors: TN_EPERM
 * (read-only handle), TN_EBADF, TN_EIO (damaged arena).
 */
TN_EXPORT int tn_arena_evict(tn_arena *arena, uint64_t target_used,
			     tn_arena_evict_report *ret_report);

/*
 * tn_arena_set_spill - whether the tensors evicted from @arena are written to disk rather than
 * dropped (kept in the arena file; new arenas drop). With spilling on, only tensord evicts, at
 * the arena's watermarks: it writes each entry to a safetensors file in its spill directory
 * (tensord.conf(5) spill_dir) and frees the block; the name stays, flagged
 * TN_ARENA_ENTRY_SPILLED, and a lookup of it waits while tensord reads it back (bit-exact,
 * same dtype, sizes, strides and offset; a non-contiguous view comes back as its contiguous
 * copy). Allocations and tn_arena_evict of other processes no longer drop entries. Errors:
 * TN_EPERM (read-only handle), TN_EBADF, TN_EIO.
 */
TN_EXPORT int tn_arena_set_spill(tn_arena *arena, bool spill);

/*
 * tn_arena_info - the entry of @name, without holding its block. Errors: TN_ENOENT, TN_EINVAL,
 * TN_EIO (damaged), TN_EBUSY (read-only handle: replaced at every look).
 */
TN_EXPORT int tn_arena_info(tn_arena *arena, const char *name, tn_arena_entry *ret_entry);

/*
 * tn_arena_list - the entries whose name starts with @prefix (NULL or "" for all), sorted by
 * name, in a new array the caller frees with free(). *ret_count gets their number; with none,
 * *ret_entries is NULL. Errors: TN_EINVAL, TN_ENOMEM.
 */
TN_EXPORT int tn_arena_list(tn_arena *arena, const char *prefix, tn_arena_entry **ret_entries,
			    size_t *ret_count);

/* ---- statistics, clients, repair ------------------------------------------------------------ */

typedef struct tn_arena_stats {
	uint8_t uuid[16];
	uint64_t size;          /* bytes of the file */
	uint64_t page_size;     /* 4096, or 2 MiB for huge pages */
	enum tn_arena_backing backing;
	enum tn_numa_policy numa_policy;
	uint64_t numa_nodes;
	uint64_t heap_bytes;    /* bytes of the data region */
	uint64_t used_bytes;    /* bytes in allocated blocks, headers included */
	uint64_t free_bytes;    /* bytes in free blocks, headers included */
	uint64_t largest_free;  /* usable bytes of the largest free block */
	uint64_t blocks;        /* allocated blocks */
	uint64_t free_blocks;
	uint64_t names;         /* published names */
	uint64_t max_names;
	uint64_t clients;       /* attached processes (dead ones not yet reclaimed included) */
	uint64_t num_allocs;    /* since creation, by all processes */
	uint64_t num_frees;
	uint64_t lock_repairs;  /* times a dead lock holder's half-done change was rolled back */
	uint64_t reclaimed_slots;
	uint64_t waiters;       /* processes with a thread in tn_arena_lookup_wait (not reported
				   by tn_tensord_arena_stat) */
	uint64_t high_water;    /* eviction's thresholds (tn_arena_set_watermarks) */
	uint64_t low_water;
	/* used_bytes split by what may happen to it (UINT64_MAX for a read-only handle, which
	 * cannot walk the directory under the lock): */
	uint64_t held_bytes;      /* blocks a process holds (looked up or allocated) */
	uint64_t pinned_bytes;    /* blocks nobody holds, named by a pinned entry */
	uint64_t evictable_bytes; /* blocks nobody holds, named only by evictable entries */
	uint64_t evictions;       /* entries evicted since creation (dropped or spilled) */
	uint64_t evicted_bytes;
	/* Spilling (tn_arena_set_spill): */
	bool spill;               /* tensord writes this arena's evicted entries to disk */
	uint64_t spilled_names;   /* entries on disk now */
	uint64_t spilled_bytes;   /* ... their elements' bytes */
	uint64_t spills;          /* entries written to disk since creation */
	uint64_t spilled_total;   /* ... their bytes */
	uint64_t restores;        /* entries brought back since creation */
	uint64_t restore_failures;
} tn_arena_stats;

/*
 * tn_arena_stat - a consistent snapshot of the arena's figures (taken under its lock).
 * Errors: TN_EINVAL, TN_EBADF.
 */
TN_EXPORT int tn_arena_stat(tn_arena *arena, tn_arena_stats *ret_stats);

typedef struct tn_arena_client {
	int slot;
	int32_t pid;
	bool alive;           /* the process still runs (same pid and start time) */
	uint64_t start_time;  /* the process's start time, in clock ticks after boot */
	uint64_t held_blocks; /* blocks whose hold mask has this slot's bit */
	uint64_t held_bytes;
	uint64_t lookups;     /* lookups under this slot since it was claimed (by name or
				 handle, waiting ones counted at each look that found the name) */
} tn_arena_client;

/*
 * tn_arena_clients - the attached processes, into @ret_clients (room for @capacity); returns
 * their number (which may exceed @capacity), or TN_EINVAL/TN_EBADF.
 */
TN_EXPORT int tn_arena_clients(tn_arena *arena, tn_arena_client *ret_clients, size_t capacity);

/*
 * tn_arena_reclaim - drop every hold of client @slot, free what nobody else holds or names,
 * and release the slot. Meant for a process that died (tensord calls it when a client's
 * socket closes); refused with TN_EBUSY for a slot whose process is alive, and TN_EINVAL for
 * the caller's own slot. Returns the number of blocks freed.
 * tn_arena_reclaim_dead - the same for every slot whose process is gone; returns the number
 * of slots reclaimed.
 */
TN_EXPORT int tn_arena_reclaim(tn_arena *arena, int slot);
TN_EXPORT int tn_arena_reclaim_dead(tn_arena *arena);

#define TN_ARENA_FSCK_REPAIR (1u << 0) /* mend what can be mended */

typedef struct tn_arena_fsck_report {
	uint64_t problems;       /* inconsistencies found */
	uint64_t repaired;       /* of which mended */
	uint64_t blocks;         /* blocks walked */
	uint64_t free_blocks;
	uint64_t orphan_blocks;  /* allocated, held by nobody and named by nothing */
	uint64_t dead_holds;     /* hold bits of slots that are not attached */
	uint64_t dead_clients;   /* attached slots whose process is gone */
	uint64_t bad_names;      /* entries that point at no live block, or do not fit in it */
	char first_problem[256]; /* the first inconsistency, in words ("" when clean) */
} tn_arena_fsck_report;

/*
 * tn_arena_fsck - check every invariant of the arena: the header, the tiling of the heap by
 * blocks, the free lists and their bitmaps, hold bits only of attached slots, directory
 * entries that point at allocated blocks and fit in them, the counters. With
 * TN_ARENA_FSCK_REPAIR, also reclaim dead clients, drop hold bits of unattached slots, free
 * orphan blocks, remove bad names and rebuild the free lists. *ret_report (may be NULL) gets
 * the findings. Returns 0 when the arena is (now) clean, TN_EIO when problems remain.
 */
TN_EXPORT int tn_arena_fsck(tn_arena *arena, unsigned flags, tn_arena_fsck_report *ret_report);

TN_END_DECLS

#endif /* TENSOR_ARENA_H */
