/* SPDX-License-Identifier: MIT */
/*
 * The layout of an arena file and the process-local state of an attached arena.
 *
 * Everything in the file is addressed by byte offsets from its start, in fixed-width fields,
 * because each process maps the file at its own address and any of them may have died half
 * way through writing it. Every field is validated before it is trusted.
 *
 *   [0, 64 KiB)          header: identity, geometry, the robust lock, the heap's bins, the
 *                        counters and the undo log
 *   clients_off          TN_ARENA_MAX_CLIENTS client records of 64 bytes
 *   dir_off              dir_slots directory entries of 576 bytes (open addressing)
 *   data_off (2 MiB)     the heap: blocks with 64-byte headers tiling [data_off, size)
 */
#ifndef TN_SHM_ARENA_INTERNAL_H
#define TN_SHM_ARENA_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>

#include <tensor/arena.h>

#include "../base/base.h"
#include "../numa/numa_internal.h"
#include "arena_remote.h"
#include "shm.h"

#define ARENA_MAGIC UINT64_C(0x31414e4552414e54) /* "TNARENA1", little endian */
#define ARENA_VERSION 1u
#define ARENA_HEADER_BYTES ((uint64_t)64 << 10)
#define ARENA_DATA_ALIGN ((uint64_t)2 << 20)
#define ARENA_MIN_SIZE ((uint64_t)4 << 20)

#define BLOCK_MAGIC_USED 0x4b4c4255u /* "UBLK" */
#define BLOCK_MAGIC_FREE 0x4b4c4246u /* "FBLK" */
#define BLOCK_HDR 64u
#define BLOCK_MIN 128u /* a header and room for the free-list links */
#define HOLD_WORDS (TN_ARENA_MAX_CLIENTS / 64)

/* TLSF bins: first level log2(size), second level 16 linear sub-bins. */
#define SL_LOG 4
#define SL_COUNT (1u << SL_LOG)
#define FL_COUNT 48

#define UNDO_MAX 192

enum { ARENA_STATE_FORMATTING = 0, ARENA_STATE_READY = 0x52454459 };
enum { CLIENT_FREE = 0, CLIENT_ATTACHED = 1 };
enum { ENTRY_EMPTY = 0, ENTRY_USED = 1, ENTRY_TOMBSTONE = 2 };

struct undo_rec {
	uint64_t off;
	uint64_t old;
};

struct arena_header {
	/* Identity and geometry: written once at creation, read-only afterwards. */
	uint64_t magic;
	uint32_t version;
	uint32_t header_bytes;
	uint8_t uuid[16];
	uint64_t size;
	uint64_t page_size;
	uint32_t flags;
	uint32_t backing;
	uint32_t numa_policy;
	uint32_t state; /* ARENA_STATE_READY once formatted, written last */
	uint64_t numa_nodes;
	uint64_t clients_off;
	uint32_t max_clients;
	uint32_t client_bytes;
	uint64_t dir_off;
	uint32_t dir_slots; /* a power of two */
	uint32_t entry_bytes;
	uint64_t max_names;
	uint64_t data_off;
	uint64_t data_size;
	uint64_t create_ns;
	/* Damage found by a lock holder (a free list, a block header or a link that fails its
	 * checks, which only a writer outside the rules leaves): DAMAGE_* and where. Set
	 * without the undo log and persistent: every change is refused until fsck --repair
	 * mends the metadata and clears it, so nobody follows the bad word again. */
	uint64_t damage;
	uint64_t damage_off;
	/* Waiting lookups (wait.c), outside the lock and the undo log: a futex word that every
	 * publish and seal advances, and a bit per client slot that waits for it. A publisher
	 * wakes the futex only when a bit is set; a slot's bit goes with its reclamation. In
	 * zeroed words of the reserved area, so older files read as "nobody waits". */
	_Atomic uint32_t publish_seq;
	uint32_t pad0;
	_Atomic uint64_t waiters[HOLD_WORDS];
	/* Eviction (evict.c), written under the lock through the undo log: the watermarks of
	 * used bytes (0 in a file formatted before them: the defaults, 90% and 80% of the heap)
	 * and what was evicted since creation. */
	uint64_t high_water;
	uint64_t low_water;
	uint64_t evictions;
	uint64_t evicted_bytes;
	uint64_t reserved[5];

	/* The lock. glibc's pthread_mutex_t is 40 bytes on every 64-bit ABI it supports. */
	alignas(64) pthread_mutex_t lock;

	/* Mutable metadata: written only under the lock and through the undo log (u64 words). */
	alignas(64) uint64_t fl_bitmap;
	uint64_t sl_bitmap[FL_COUNT];
	uint64_t bins[FL_COUNT][SL_COUNT]; /* offset of the first free block, 0 for none */
	uint64_t used_bytes;
	uint64_t free_bytes;
	uint64_t blocks;
	uint64_t free_blocks;
	uint64_t names;
	uint64_t tombstones;
	uint64_t clients;
	uint64_t num_allocs;
	uint64_t num_frees;
	uint64_t lock_repairs;
	uint64_t reclaimed_slots;
	uint64_t client_gen;
	uint64_t block_gen; /* generation of the last block allocated */
	uint64_t lists_dirty; /* fsck is rebuilding the free lists (not logged) */

	/* The undo log: undo_count records of the old values of the words the current change
	 * has overwritten, in order. Zero outside a change. */
	alignas(64) _Atomic uint64_t undo_count;
	struct undo_rec undo[UNDO_MAX];

	/* Waiting lookups (wait.c): a futex word per bucket of names (the name's directory hash
	 * modulo TN__ARENA_WAIT_BUCKETS), advanced with publish_seq by every publish and seal of a
	 * name of the bucket, so that a wait for one name wakes only for its bucket. Outside the
	 * lock and the undo log; zero in a file formatted before them. */
	alignas(64) _Atomic uint32_t name_seq[TN__ARENA_WAIT_BUCKETS];

	/* Spilling (spill.c), in zeroed words past the older header (a file formatted before
	 * them reads as "drop evicted entries, nothing spilled"). Under the lock, through the
	 * undo log: */
	alignas(64) uint64_t spill_mode;   /* 1: tensord writes evicted entries to disk */
	uint64_t spill_next_id;            /* the last spill file's number */
	uint64_t spills;                   /* entries spilled since creation */
	uint64_t spilled_total;            /* ... and their bytes */
	uint64_t restores;                 /* entries brought back since creation */
	uint64_t restore_failures;
	uint64_t spilled_names;            /* entries on disk now */
	uint64_t spilled_bytes;            /* ... and their bytes */
	/* Outside the lock: a futex word every request for a restore advances and wakes
	 * (tensord's watcher sleeps on it). */
	alignas(64) _Atomic uint32_t restore_seq;
	/* ... and one every spill advances and wakes once it freed a block (allocations that
	 * found no room wait on it, tn__arena_spill_wait). */
	_Atomic uint32_t freed_seq;
};

_Static_assert(sizeof(pthread_mutex_t) <= 64, "the lock fits its slot");
_Static_assert(sizeof(struct arena_header) <= ARENA_HEADER_BYTES, "the header fits");

/* A block header: eight words, each written whole through the undo log. */
struct block {
	uint64_t magic_flags; /* magic | flags << 32 */
	uint64_t size;        /* the whole block, header included; a multiple of 64 */
	uint64_t prev_size;   /* the physically previous block's size, 0 for the first */
	uint64_t gen_pins;    /* generation | pins << 32 */
	uint64_t holders[HOLD_WORDS];
};
_Static_assert(sizeof(struct block) == BLOCK_HDR, "a block header is 64 bytes");

#define BLOCK_FLAG_SEALED 1u
#define BLOCK_FLAG_RAW 2u    /* from tn_arena_alloc: no holds-table record, never named */
#define BLOCK_FLAG_CACHED 4u /* a raw block freed into its thread's cache (still held) */

/* A free block's payload starts with its free-list links. */
struct free_links {
	uint64_t next;
	uint64_t prev;
};

struct client_rec {
	uint64_t state_gen; /* CLIENT_* | generation << 32 */
	int64_t pid;
	uint64_t start_time;
	uint64_t attach_ns;
	/* Lookups under this slot since it was claimed: added to under the lock, outside the
	 * undo log (a change rolled back may leave one counted). */
	uint64_t lookups;
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct client_rec) == 64, "a client record is 64 bytes");

struct dir_entry {
	uint64_t state_gen; /* ENTRY_* | generation << 32 */
	uint64_t block;     /* offset of the block header */
	uint64_t block_gen_flags; /* the block's generation when published | TN_ARENA_ENTRY_* << 32 */
	uint64_t hash;
	int64_t storage_offset;
	uint64_t dtype_ndim; /* dtype | ndim << 32 */
	union {
		struct {
			uint32_t name_len;
			/* A soft pin's time limit (TN_ARENA_ENTRY_SOFT_PINNED), in seconds
			 * since the epoch. */
			uint32_t pin_until;
		};
		uint64_t len_pin; /* both, as the one word the undo log writes */
	};
	/* When a lookup last held the block under this name (or the publish), in ns since the
	 * epoch from the coarse clock: the least recently used cache entries go first. */
	uint64_t last_use;
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t strides[TN_ARENA_MAX_DIMS];
	char name[TN_ARENA_NAME_MAX + 1];
};
_Static_assert(sizeof(struct dir_entry) == 576, "a directory entry is 576 bytes");

/* The process's view of one block it holds: how many uses the layer above counted on it
 * (tn__arena_alloc_held, tn__arena_hold). The first takes the block's hold bit for this
 * process's slot and an arena reference; the last gives both back. */
struct local_hold {
	uint64_t block; /* 0: empty slot */
	int64_t holds;
};

#define TN_MAGIC_ARENA 0x4152454eu /* "AREN" */

struct tn_arena {
	uint32_t magic;
	_Atomic int64_t refcount;
	unsigned fork_gen; /* tn__arena_fork_gen when made */
	int fd;
	int slot;
	/* Attached with TN__ATTACH_READ_ONLY: base is a PROT_READ mapping (ro is NULL), the
	 * handle never takes the lock nor writes a word of the file, and holds go through
	 * remote. */
	bool read_only;
	bool has_remote;
	struct tn__arena_remote remote;
	uint8_t uuid[16];
	uint8_t *base;     /* read-write mapping (read-only for a read-only handle) */
	uint8_t *ro;       /* read-only mapping of the same file (NULL for a read-only handle) */
	uint64_t size;
	/* The header's geometry, copied once validated: never read again from the shared
	 * file, where another process (or damage) could change it under us. */
	uint64_t clients_off, dir_off, data_off, data_size, page_size, max_names;
	uint32_t max_clients, dir_slots;
	struct arena_header *hdr;
	/* The layer above's bytes (tn__arena_upper): its allocator adapter. */
	alignas(16) unsigned char upper[TN__ARENA_UPPER_BYTES];
	pthread_mutex_t local_lock; /* guards the holds table and waiting */
	int waiting;                /* threads of this process in a waiting lookup (local_lock) */
	bool wait_polled;           /* ... whose slot could not be marked (wait.c) */
	struct local_hold *holds;
	size_t holds_cap, holds_count;
	char path[4096];
};

static inline struct block *tn__block_at(const tn_arena *a, uint64_t off)
{
	return (struct block *)(a->base + off);
}
static inline uint32_t tn__block_magic(const struct block *b)
{
	return (uint32_t)b->magic_flags;
}
static inline uint64_t tn__round_up(uint64_t x, uint64_t to)
{
	return (x + to - 1) / to * to;
}
static inline uint64_t tn__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* The coarse clock (the last timer tick, a few ms old): read from the vDSO, no system call. */
static inline uint64_t tn__coarse_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- txn.c: the lock and the undo log ---- */
extern int tn__arena_crash_countdown;
/* Take the lock; TN_EIO (the lock released) when the arena is marked damaged. */
int tn__arena_lock(tn_arena *a);
/* Take the lock whatever the damage mark says (fsck, which mends the damage). */
int tn__arena_lock_any(tn_arena *a);

/* What a lock holder found damaged (struct arena_header's damage word). */
enum { DAMAGE_NONE = 0, DAMAGE_FREE_LIST = 1, DAMAGE_BLOCK = 2 };
/* Mark the arena damaged (under the lock): the current change is undone, the mark set, and
 * the error for the caller returned (TN_EIO). */
int tn__arena_damaged(tn_arena *a, unsigned what, uint64_t off);
/* The error an arena's damage mark gives its users (TN_EIO). */
int tn__arena_damage_error(const tn_arena *a);
void tn__arena_unlock(tn_arena *a);
/* Write @value to @word (in the file) inside the current change, logging its old value. */
void tn__tx_set(tn_arena *a, uint64_t *word, uint64_t value);
void tn__tx_commit(tn_arena *a);
/* Abandon the current change (on damage found half way): put back what it wrote. */
void tn__tx_abort(tn_arena *a);
/* Spin briefly until no change is under way (the undo log is empty), for readers without the
 * lock; returns the log's count seen last (0: quiet). */
uint64_t tn__quiet_undo(const tn_arena *a);

/* Add @delta to the counter @c of the header, inside a change. */
static inline void tn__counter_add(tn_arena *a, uint64_t *c, int64_t delta)
{
	tn__tx_set(a, c, *c + (uint64_t)delta);
}

/* ---- heap.c: blocks and free lists ---- */
bool tn__block_ok(const tn_arena *a, uint64_t off);
bool tn__block_sane(const tn_arena *a, uint64_t off);
/* Rebuild the free lists and bitmaps from the block headers (under the lock). */
void tn__rebuild_free_lists(tn_arena *a);
/* Write a fresh heap's one free block (the file is new; nothing is logged). */
void tn__heap_format(tn_arena *a);
/* Free a used block that nobody holds or names (under the lock, inside a change). */
int tn__heap_free_block(tn_arena *a, uint64_t off);
/* The block size (header included) for a request of @nbytes, and the alignment it gets. */
int tn__block_request(tn_arena *a, size_t nbytes, uint64_t *ret_need, uint64_t *ret_align,
		      const char *fn);
/* Allocate a block held by this process's slot, under the arena lock, and commit; @flags go
 * into its header in the same change. */
int tn__heap_alloc_locked(tn_arena *a, size_t nbytes, uint64_t need, uint64_t align,
			  uint32_t flags, uint64_t *ret_off, const char *fn);

/* ---- holds.c: hold bits, this process's holds, client slots ---- */
/* Set or clear @slot's bit in the block's holders (under the lock, inside a change). */
void tn__hold_set(tn_arena *a, struct block *b, int slot, bool on);
/* Inline: the thread cache's free path asks on every call. */
static inline bool tn__hold_has(const struct block *b, int slot)
{
	return b->holders[slot / 64] >> (slot % 64) & 1;
}
static inline bool tn__holds_none(const struct block *b)
{
	for (int i = 0; i < HOLD_WORDS; i++)
		if (b->holders[i])
			return false;
	return true;
}
/* Whether a slot other than this process's holds @b. */
bool tn__held_by_others(const tn_arena *a, const struct block *b);
/* The process's record of @block, or NULL; a new record (no uses yet), or NULL on ENOMEM;
 * room for one more record, or TN_ENOMEM with the message set. Called with local_lock held. */
struct local_hold *tn__local_find(tn_arena *a, uint64_t block);
struct local_hold *tn__local_insert(tn_arena *a, uint64_t block);
int tn__local_reserve(tn_arena *a);
struct client_rec *tn__client_at(const tn_arena *a, int slot);
bool tn__client_alive(const struct client_rec *c);
uint64_t tn__proc_start_time(int64_t pid);
/* Take a free client slot for process @pid (started at @start_time), reclaiming the slots of
 * dead processes first when none is free; takes the lock. */
int tn__claim_slot(tn_arena *a, int64_t pid, uint64_t start_time, int *ret_slot,
		   uint64_t *ret_state);

/* ---- tcache.c: raw blocks and the per-thread cache ---- */
/* The handle is going: forget every thread's cached blocks of it. */
void tn__tcache_forget(tn_arena *a);
/* In the child of a fork(): forget the thread's cache (blocks of the parent's slot). */
void tn__tcache_fork_child(void);

/* ---- arena.c: files, mappings, handles ---- */
/* Validate a mapped header; nothing past it is read before this passes. */
int tn__arena_validate(const tn_arena *a, const char *fn);
/* Bumped in the child of every fork(): handles made before belong to the parent, whose
 * slot their holds carry, and are refused in the child. */
extern _Atomic unsigned tn__arena_fork_gen;
/* TN_EPERM for an operation that writes the arena, called on a read-only handle. */
int tn__read_only_error(const tn_arena *a, const char *fn);

/* Whether @a is a live arena handle of this process (not one inherited across fork()). */
static inline bool tn__arena_ok(const tn_arena *a)
{
	return tn__handle_is(a, TN_MAGIC_ARENA) &&
	       a->fork_gen == atomic_load_explicit(&tn__arena_fork_gen, memory_order_relaxed);
}

/* ---- directory.c ---- */
struct dir_entry *tn__entry_at(const tn_arena *a, uint32_t index);
const char *tn__entry_problem(const tn_arena *a, const struct dir_entry *e, uint64_t *ret_bytes);
/* Copy entry @index without the lock (a read-only handle), while no change is under way if
 * it can (returns whether it could): the copy is to be validated like a damaged entry. */
bool tn__entry_snapshot(const tn_arena *a, uint32_t index, struct dir_entry *out);

/* ---- wait.c ---- */
/* After a publish or a seal of the name whose directory hash is @name_hash is committed and the
 * lock released: advance the arena's futex word and the name's bucket's, and wake their
 * waiters, with system calls only when a slot waits. */
void tn__arena_notify(tn_arena *a, uint64_t name_hash);
/* Forget @slot's waiting bit (its reclamation, or a new claim of the slot). */
void tn__arena_waiter_clear(tn_arena *a, int slot);

uint64_t tn__name_hash(const char *s, size_t n);
/* An element's bytes, 0 for no dtype. */
uint64_t tn__dtype_bytes(uint32_t dtype);
/* Add @delta to the block's pins (under the lock, inside a change). */
void tn__pins_add(tn_arena *a, struct block *b, int delta);
/* Set the entry's last use to now (under the lock, inside a change). */
void tn__entry_touch(tn_arena *a, struct dir_entry *e);

/* Drop one pin of the block under @e, freeing it when nobody holds or names it; mark @index
 * deleted. Both under the lock, inside a change. */
int tn__entry_unpin(tn_arena *a, const struct dir_entry *e);
void tn__entry_delete(tn_arena *a, uint32_t index);

/* ---- evict.c ---- */
/* The watermarks in force (the defaults for a file formatted before them). */
void tn__arena_watermarks(const tn_arena *a, uint64_t *ret_high, uint64_t *ret_low);
/* Under the lock, for an allocation that found no block: evict in LRU order, trying @alloc
 * after each eviction, until it succeeds (0, *ret_off set, its change not yet committed) or
 * nothing evictable is left (TN_ENOMEM, no message set). Each eviction is committed. */
int tn__evict_for_alloc_locked(tn_arena *a, uint64_t need, uint64_t align,
			       int (*alloc)(tn_arena *, uint64_t, uint64_t, uint64_t *),
			       uint64_t *ret_off);
/* Under the lock: the bytes of used blocks that are held, pinned and evictable (see
 * tn_arena_stats), from a walk of the directory. TN_ENOMEM when the walk's memory is missing. */
int tn__arena_figures_locked(tn_arena *a, uint64_t *ret_pinned, uint64_t *ret_held,
			     uint64_t *ret_evictable);

/* ---- spill.c ---- */
/* The bytes of a spilled entry (its elements, contiguous); take it out of the header's
 * spilled counts (under the lock, inside a change: it is unpublished or restored). */
uint64_t tn__spilled_bytes(const struct dir_entry *e);
void tn__spilled_uncount(tn_arena *a, const struct dir_entry *e);
/* Whether @e is a spilled entry (its block word is a spill file's number). */
static inline bool tn__entry_spilled(const struct dir_entry *e)
{
	return e->block_gen_flags >> 32 & TN_ARENA_ENTRY_SPILLED;
}
/* A lookup found the spilled entry @index (under the lock): ask tensord to restore it (in a
 * committed change) and return TN_EAGAIN, or the error of a restore that failed (asking
 * again). *ret_wake is set when tensord's watcher is to be woken (tn__arena_restore_wake,
 * after the lock is released). */
int tn__entry_restore_request(tn_arena *a, uint32_t index, const char *fn, bool *ret_wake);
void tn__arena_restore_wake(tn_arena *a);
/* An allocation in a spilling arena that found no room while evictable entries remain (the
 * heap sets tn__alloc_spill_wait for its caller): wake tensord, and sleep until a spill freed a
 * block since @seq (tn__arena_freed_seq, read before the attempt) or 100 ms, within
 * TN__ARENA_SPILL_WAIT_NS of the first call (*deadline, 0 at first). Returns whether to try
 * again. Never waits in tensord (tn__arena_restore_wait_ns 0). */
#define TN__ARENA_SPILL_WAIT_NS ((uint64_t)10 * 1000000000)
extern _Thread_local bool tn__alloc_spill_wait;
uint32_t tn__arena_freed_seq(const tn_arena *a);
bool tn__arena_spill_wait(tn_arena *a, uint32_t seq, uint64_t *deadline);

/* ---- admin.c ---- */
uint64_t tn__largest_free(const tn_arena *a);
/* Drop @slot's holds everywhere and release it (under the lock). Returns blocks freed. */
int tn__reclaim_locked(tn_arena *a, int slot);

#endif /* TN_SHM_ARENA_INTERNAL_H */
