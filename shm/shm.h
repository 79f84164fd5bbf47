/* SPDX-License-Identifier: MIT */
/*
 * What the shared-memory floor offers the layers above it beyond the public <tensor/arena.h>:
 * a handle's mappings, observers told before an arena handle's mappings go (a backend that
 * pinned them for DMA registers one, so shm/ never names the backend), and the directory of
 * plain descriptors with the process's holds on blocks, over which the layer above publishes
 * and looks up tensors.
 */
#ifndef TN_SHM_H
#define TN_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/arena.h>

/* The mappings of an arena handle of this process. */
struct tn__arena_mapping {
	void *base;     /* the read-write mapping; read-only for a read-only handle */
	void *ro;       /* the read-only mapping of the same file; NULL for a read-only handle */
	size_t size;    /* bytes of each */
	bool read_only; /* attached read-only: base is a PROT_READ mapping */
	size_t page_size; /* of the file's pages (2 MiB on hugetlbfs) */
};

/* The mappings of @arena; TN_EINVAL when it is not a live arena handle of this process (a
 * handle inherited across fork() is not). */
int tn__arena_mapping(const tn_arena *arena, struct tn__arena_mapping *ret);

/*
 * An observer of arena handles: unmapping(@self, @arena, @map) is called in the process that
 * made @arena, once, when its last reference goes and before its mappings @map are unmapped
 * (never in a fork child for its parent's handles). It must not call back into @arena.
 */
struct tn__arena_observer {
	void (*unmapping)(struct tn__arena_observer *self, tn_arena *arena,
			  const struct tn__arena_mapping *map);
	struct tn__arena_observer *next; /* the list's link, set by tn__arena_observe */
};

/* Add @observer (static storage; observers are never removed). */
void tn__arena_observe(struct tn__arena_observer *observer);

/* ---- for the layer above: handles, descriptors and holds ---------------------------------------
 *
 * The layer above makes tensors over blocks and remembers which storages it made of which
 * block; shm records what a name means as a plain descriptor and counts this process's uses of
 * each block it holds (one hold bit per block in the file, however many uses). Nothing here
 * knows a tensor or a storage.
 */

/* Whether @arena is a live arena handle of this process (not one inherited across fork()). */
bool tn__arena_live(const tn_arena *arena);

/* The entry check of a public arena function named @fn: TN_EBADF when @arena is not a live
 * handle of this process, TN_EPERM when @write and the handle is read-only; 0 otherwise. */
int tn__arena_check(const tn_arena *arena, bool write, const char *fn);

/* The arena's used bytes and watermarks, read under its lock (a thread of the process may be
 * allocating in it); 0, or the lock's error (TN_EIO for a damaged arena, TN_EBUSY). */
int tn__arena_water(tn_arena *arena, uint64_t *ret_used, uint64_t *ret_high, uint64_t *ret_low);

/* Whether @name is a valid tensor name (tn_arena_publish(3)); 0 or TN_EINVAL naming @fn. */
int tn__arena_check_name(const char *name, const char *fn);

/* The block whose data a pointer @ptr into either mapping of @arena falls at (the offset of its
 * header in the file), or 0 when @ptr is in neither mapping or not where a block's data can
 * start. *ret_ro (may be NULL) tells whether @ptr is in the read-only mapping. */
uint64_t tn__arena_block_of(const tn_arena *arena, const void *ptr, bool *ret_ro);

/* What is wrong with a tensor's geometry (dtype, ndim up to TN_ARENA_MAX_DIMS, sizes, strides,
 * storage offset) against @payload bytes of storage, or NULL. The dtype's facts come from
 * <tensor/dtype.h>'s TN_DTYPE_LIST. Also checks the views of shared CUDA storages (tensord). */
const char *tn__extent_problem(uint32_t dtype, uint32_t ndim, const int64_t *sizes,
			       const int64_t *strides, int64_t storage_offset, uint64_t payload);

/* What the directory records under a name, besides the name: the block and the geometry of
 * the elements in it. */
struct tn__arena_desc {
	uint64_t block;         /* offset of the block's header in the file */
	uint32_t dtype;         /* an enum tn_dtype value */
	uint32_t ndim;          /* at most TN_ARENA_MAX_DIMS */
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t strides[TN_ARENA_MAX_DIMS];
	int64_t storage_offset; /* elements */
	uint32_t flags;         /* TN_ARENA_ENTRY_SEALED: see the functions below */
};

/*
 * tn__arena_publish_desc - name @desc as @name: the body of tn_arena_publish(3) once the tensor
 * is read, with its errors (messages name @fn). The process must hold @desc->block (a block from
 * tn__arena_alloc_held, or held through tn__arena_hold). @flags are TN_ARENA_SEAL and
 * TN_ARENA_REPLACE; TN_ARENA_ENTRY_SEALED in @desc->flags seals too (the bytes of a read-only
 * storage). *ret_handle and *ret_flags (each may be NULL) get the entry's handle and flags
 * (TN_ARENA_ENTRY_SEALED when the entry is sealed, also because its block was).
 */
int tn__arena_publish_desc(tn_arena *arena, const char *name, const struct tn__arena_desc *desc,
			   unsigned flags, tn_arena_handle *ret_handle, uint32_t *ret_flags,
			   const char *fn);

/* What tn__arena_hold found. */
struct tn__arena_held {
	struct tn__arena_desc desc; /* flags: TN_ARENA_ENTRY_SEALED when this name or another over
				       the same block sealed it */
	tn_arena_handle handle;     /* the entry's */
	uint64_t bytes;             /* usable bytes of the block */
	bool sealed;                /* the entry or its block is sealed (desc.flags says which
				       mapping: every tensor of a read-only handle is in its
				       read-only one) */
	void *data;                 /* the block's data, in the read-only mapping when sealed */
	char name[TN_ARENA_NAME_MAX + 1]; /* the entry's name */
};

/*
 * The layer above's answer, asked by tn__arena_hold under this process's holds lock once the
 * block is held (no arena lock is held): whether it has a live storage over @block in the
 * mapping that @sealed names and took a reference to it (kept in its @ctx). Such a storage
 * counts its own use, so none is counted for the lookup.
 */
typedef bool (*tn__arena_reuse_fn)(void *ctx, tn_arena *arena, uint64_t block, bool sealed);

/*
 * tn__arena_hold - resolve @name (NULL: @handle) and hold its block for this process. Returns 0
 * when it counted one more use of the block, which tn__arena_release gives back (a block's uses
 * keep the arena handle alive), or 1 when @reuse (may be NULL) answered that the caller has a
 * storage over it already: then nothing is to be given back. A read-only handle asks tensord
 * through its remote operations. The errors of tn_arena_lookup(3), with messages naming @fn:
 * TN_EBADF, TN_EINVAL, TN_ENOENT, TN_ESTALE, TN_EIO, TN_ENOMEM.
 */
int tn__arena_hold(tn_arena *arena, const char *name, const tn_arena_handle *handle,
		   tn__arena_reuse_fn reuse, void *reuse_ctx, struct tn__arena_held *ret,
		   const char *fn);

/*
 * tn__arena_alloc_held - a block of at least @nbytes bytes (0 counts as 1) for a storage: held
 * by this process and counted as one use, as tn__arena_hold counts one, so that it can be
 * published and given back with tn__arena_release. Errors as tn_arena_allocator's: TN_EPERM (a
 * read-only handle), TN_ENOMEM, lock errors.
 */
int tn__arena_alloc_held(tn_arena *arena, size_t nbytes, void **ret_ptr);

/*
 * tn__arena_release - give back one use of @block: the last drops this process's hold (freeing
 * the block when nothing else holds or names it) and the arena reference the uses kept.
 * Returns 0, TN_EBADF (not a block this process holds; silently for a handle inherited across
 * fork(), whose holds are the parent's) or an error of the arena's lock or heap.
 */
int tn__arena_release(tn_arena *arena, uint64_t block);

/*
 * tn__arena_seal_name - the body of tn_arena_seal(3) in the arena file: seal the entry @name and
 * its block. *ret_block gets the block, whose writable storage in this process the caller
 * marks read-only. Errors as tn_arena_seal(3).
 */
int tn__arena_seal_name(tn_arena *arena, const char *name, uint64_t *ret_block);

/*
 * tn__arena_sealed_note - after a seal of @name by this handle (tn_arena_seal, a sealed
 * publish): a handle attached through tensord tells the daemon, which keeps its own record of
 * the seal where read-write grantees cannot clear it. Nothing for other handles. Leaves the
 * thread's last error as it was: the daemon's sweep finds a seal it was not told of.
 */
void tn__arena_sealed_note(tn_arena *arena, const char *name);

/*
 * Waiting lookups (tn_arena_lookup_wait(3)). A waiter announces itself once
 * (tn__arena_wait_begin), then, until what it waits for is there: reads a futex word
 * (tn__arena_wait_seq), looks, and sleeps while the word still has the value read
 * (tn__arena_wait); tn__arena_wait_end ends the announcement. A publish or a seal committed
 * after the word was read changes it, so no wake is lost. The word is the arena's (@bucket -1:
 * every publish and seal moves it) or a bucket of names' (tn__arena_wait_bucket(name): only
 * those of names in the bucket move it).
 *
 * tn__arena_wait_begin returns 0 when the process's slot is marked waiting (publishers wake
 * it), 1 when it could not be (a read-only handle whose tensord predates the WAITING request:
 * its sleeps then end at intervals of TN__ARENA_WAIT_POLL_NS), or an error (TN_EBADF, or the
 * daemon's). Each 0 or 1 is given back by one tn__arena_wait_end.
 * tn__arena_deadline - the CLOCK_MONOTONIC time (ns) @timeout_ns after @start (tn__mono_ns), for
 * tn__arena_wait: 0 (none) for a negative timeout, @start itself for 0.
 * tn__arena_wait returns 0 when woken (or spuriously, or by a signal: look again), TN_ETIMEDOUT
 * when @deadline_ns (CLOCK_MONOTONIC; 0 for none) passed.
 */
#define TN__ARENA_WAIT_POLL_NS 100000000 /* 100 ms */
#define TN__ARENA_WAIT_BUCKETS 64
int tn__arena_wait_bucket(const char *name);
int tn__arena_wait_begin(tn_arena *arena);
void tn__arena_wait_end(tn_arena *arena);
uint32_t tn__arena_wait_seq(const tn_arena *arena, int bucket);
int tn__arena_wait(tn_arena *arena, int bucket, uint32_t seq, uint64_t deadline_ns,
		   int announced);
uint64_t tn__mono_ns(void);
uint64_t tn__arena_deadline(uint64_t start, int64_t timeout_ns);

/*
 * Spilling (spill.c), for tensord: with the arena's spill mode on (tn_arena_set_spill), tensord
 * evicts by writing an entry's elements to a file and then, in one change, freeing its block
 * and flagging the entry TN_ARENA_ENTRY_SPILLED with the file's number in place of the block. A
 * lookup of a spilled entry flags it TN_ARENA_ENTRY_RESTORING, advances the arena's restore
 * word (tn__arena_restore_word) and wakes it, and fails with TN_EAGAIN; the public lookups wait
 * for the restore (arena_tensor.c). tensord reads the file into a block it allocated and
 * names it under the entry (tn__arena_restore_commit), or records the failure.
 *
 * tn__arena_spill_candidates - the evictable entries, least recently used first, until their
 * blocks add up to what brings the arena's use to @target_used (all of them when it cannot).
 * tn__arena_spill_next_id - a new spill file number. tn__arena_spill_commit - @it's entry, now
 * written to file @id: free its block and record it spilled, when it is still the entry it was
 * and still evictable; TN_EBUSY when it was looked up, replaced or unpublished meanwhile (the
 * file is then the caller's to remove). tn__arena_spilled - the spilled entries (only those a
 * lookup asked back when @wanted). tn__arena_restore_commit - name the block of @desc (held by
 * this process, its geometry that of the entry) under @it's entry, when it still is the spilled
 * entry @it->id; TN_ESTALE otherwise. tn__arena_restore_fail - record that @it's restore failed
 * with @code (a lookup then reports it, and asks again). The arrays are the caller's to free().
 */
struct tn__spill_item {
	tn_arena_handle handle;
	uint64_t block;      /* resident: its block; spilled: 0 */
	uint64_t id;         /* spilled: its file's number */
	uint64_t bytes;      /* the elements' bytes */
	uint64_t block_size; /* resident: the block's bytes, header included */
	uint32_t flags;      /* TN_ARENA_ENTRY_* */
	char name[TN_ARENA_NAME_MAX + 1];
};
int tn__arena_spill_candidates(tn_arena *arena, uint64_t target_used,
			       struct tn__spill_item **ret, size_t *ret_n);
int tn__arena_spill_next_id(tn_arena *arena, uint64_t *ret_id);
int tn__arena_spill_commit(tn_arena *arena, const struct tn__spill_item *it, uint64_t id);
int tn__arena_spilled(tn_arena *arena, bool wanted, struct tn__spill_item **ret, size_t *ret_n);
int tn__arena_restore_commit(tn_arena *arena, const struct tn__spill_item *it,
			     const struct tn__arena_desc *desc);
int tn__arena_restore_fail(tn_arena *arena, const struct tn__spill_item *it, int code);
_Atomic uint32_t *tn__arena_restore_word(tn_arena *arena);
/* What tensord's check reads, under the lock: the spill mode, the use and the watermarks, and
 * the entries on disk and their bytes. */
struct tn__spill_state {
	bool spill;
	uint64_t used, high, low, spilled_names, spilled_bytes;
};
/* The directory capacity an arena of @size bytes gets when its options leave it 0, and that of
 * @arena. */
uint64_t tn__arena_default_max_names(uint64_t size);
uint64_t tn__arena_max_names(const tn_arena *arena);
int tn__arena_spill_state(tn_arena *arena, struct tn__spill_state *ret);
/* How long the public lookups wait for a spilled entry's restore when they were not told
 * (TN__ARENA_RESTORE_WAIT_NS); tensord sets 0 for itself: its own lookups never wait. */
#define TN__ARENA_RESTORE_WAIT_NS ((int64_t)60 * 1000000000)
extern _Atomic int64_t tn__arena_restore_wait_ns;

/* Whether this process's lookups set the entries' last-use clock (always, but for bench_spill,
 * which measures what the clock costs a lookup). */
extern bool tn__arena_lookup_clock;

/* Bytes each arena handle keeps for the layer above (for its allocator adapter, which must
 * live as long as the handle): zero when the handle is made, never read or written by shm,
 * gone with the handle. */
#define TN__ARENA_UPPER_BYTES 64
void *tn__arena_upper(tn_arena *arena);

#endif /* TN_SHM_H */
