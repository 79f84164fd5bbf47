/* SPDX-License-Identifier: MIT */
/*
 * Arenas: creating, attaching and detaching, the robust lock and its undo log, and the heap.
 *
 * Crash safety rests on two things. The lock is a process-shared robust mutex: when its holder
 * dies, the next process to lock it is told so (EOWNERDEAD). And every word of metadata a
 * change writes goes through tn__tx_set, which first appends the word's old value to the
 * undo log in the header; tn__tx_commit empties the log. A process killed at any instruction
 * inside a change leaves the log describing exactly what it overwrote, and the next lock
 * holder writes the old values back in reverse order before it goes on, so every change is
 * all or nothing. Rolling back is idempotent, so a process killed while rolling back is no
 * problem either.
 *
 * The heap is a two-level segregated fit allocator (TLSF: Masmano et al., 2004) over blocks
 * with boundary tags: constant-time search through two bitmap levels, immediate coalescing,
 * so no two free blocks are ever adjacent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif
#include <assert.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <mntent.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "arena_internal.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

static uint64_t round_up(uint64_t x, uint64_t to)
{
	return (x + to - 1) / to * to;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the lock and the undo log --------------------------------------------------------------- */

/* Crash testing: when non-zero, counts down at the two points of every logged write (just
 * before and just after the word changes) and kills the process at zero. */
int tn__arena_crash_countdown;

static void rollback(tn_arena *a)
{
	struct arena_header *h = a->hdr;
	uint64_t n = atomic_load_explicit(&h->undo_count, memory_order_acquire);

	if (n > UNDO_MAX)
		n = UNDO_MAX; /* a damaged count: undo what the log can hold */
	for (uint64_t i = n; i-- > 0;) {
		uint64_t off = h->undo[i].off;
		/* Only words of the header's mutable part or of the data region: anything else is
		 * damage, and writing there would spread it. */
		bool in_header = off >= offsetof(struct arena_header, fl_bitmap) &&
				 off <= offsetof(struct arena_header, undo_count) - 8;
		bool in_rest = off >= a->clients_off && off <= a->size - 8;
		if (off % 8 || !(in_header || in_rest))
			continue;
		*(uint64_t *)(a->base + off) = h->undo[i].old;
	}
	atomic_store_explicit(&h->undo_count, 0, memory_order_release);
}

/* Milliseconds this thread waits for an arena's lock before giving up with TN_EBUSY; 0 waits
 * for ever. tensord's loop sets it: a client that holds the lock (stopped, or hostile) must
 * not freeze the daemon for every other arena. */
_Thread_local unsigned tn__arena_lock_timeout_ms;

int tn__arena_lock(tn_arena *a)
{
	int r;
	if (TN_LIKELY(!tn__arena_lock_timeout_ms)) {
		r = pthread_mutex_lock(&a->hdr->lock);
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += tn__arena_lock_timeout_ms / 1000;
		ts.tv_nsec += (long)(tn__arena_lock_timeout_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		r = pthread_mutex_timedlock(&a->hdr->lock, &ts);
#ifdef __SANITIZE_THREAD__
		/* ThreadSanitizer's pthread_mutex_timedlock records the lock only when it returns
		 * 0 (its lock and trylock also take EOWNERDEAD): tell it, or it reports our unlock
		 * of a lock it never saw taken. */
		if (r == EOWNERDEAD)
			__tsan_mutex_post_lock(&a->hdr->lock, __tsan_mutex_try_lock, 0);
#endif
		if (r == ETIMEDOUT)
			return tn__error(TN_EBUSY, "arena %s: its lock has been held for over %u ms "
					 "(by a stopped or stuck process?)", a->path,
					 tn__arena_lock_timeout_ms);
	}

	if (TN_LIKELY(r == 0))
		return 0;
	if (r == EOWNERDEAD) {
		/* The previous holder died inside a change: undo it, then the state is as it was
		 * before that change began. */
		rollback(a);
		if (a->hdr->lists_dirty)
			tn__rebuild_free_lists(a);
		tn__tx_set(a, &a->hdr->lock_repairs, a->hdr->lock_repairs + 1);
		tn__tx_commit(a);
		pthread_mutex_consistent(&a->hdr->lock);
		return 0;
	}
	return tn__error(TN_EIO, "arena %s: its lock is unusable (%s)", a->path, strerror(r));
}

void tn__arena_unlock(tn_arena *a)
{
	pthread_mutex_unlock(&a->hdr->lock);
}

void tn__tx_set(tn_arena *a, uint64_t *word, uint64_t value)
{
	struct arena_header *h = a->hdr;
	uint64_t n = atomic_load_explicit(&h->undo_count, memory_order_relaxed);

	if (TN_UNLIKELY(n >= UNDO_MAX)) {
		/* Only a process writing the header behind the lock's back gets here: start the
		 * log again rather than write past it (the change is then not undoable; fsck
		 * will find what it left). */
		n = 0;
	}
	h->undo[n].off = (uint64_t)((uint8_t *)word - a->base);
	h->undo[n].old = *word;
	/* The record must be in memory before the count that makes it part of the log, and the
	 * count before the word changes: a process killed between two of these stores leaves
	 * either no record (and the word unchanged) or a record of the value the word had.
	 * Release ordering on the count and a release fence after it give both orders. */
	atomic_store_explicit(&h->undo_count, n + 1, memory_order_release);
	atomic_thread_fence(memory_order_release);
	if (TN_UNLIKELY(tn__arena_crash_countdown) && --tn__arena_crash_countdown == 0)
		raise(SIGKILL);
	*(volatile uint64_t *)word = value;
	if (TN_UNLIKELY(tn__arena_crash_countdown) && --tn__arena_crash_countdown == 0)
		raise(SIGKILL);
}

void tn__tx_commit(tn_arena *a)
{
	/* Release: every write of the change is in memory before the log is emptied. */
	atomic_store_explicit(&a->hdr->undo_count, 0, memory_order_release);
}

/* Abandon the current change (on damage found half way): put back what it wrote. */
static void tx_abort(tn_arena *a)
{
	rollback(a);
}

/* ---- blocks and free lists ------------------------------------------------------------------- */

static uint64_t data_end(const tn_arena *a)
{
	return a->data_off + a->data_size;
}

bool tn__block_ok(const tn_arena *a, uint64_t off)
{
	return off >= a->data_off && off % TN_ARENA_ALIGNMENT == 0 &&
	       off <= data_end(a) - BLOCK_MIN;
}

/* A block header whose fields agree with the heap's geometry. */
bool tn__block_sane(const tn_arena *a, uint64_t off)
{
	if (!tn__block_ok(a, off))
		return false;
	const struct block *b = tn__block_at(a, off);
	uint32_t m = tn__block_magic(b);
	return (m == BLOCK_MAGIC_USED || m == BLOCK_MAGIC_FREE) && b->size >= BLOCK_MIN &&
	       b->size % TN_ARENA_ALIGNMENT == 0 && b->size <= data_end(a) - off &&
	       b->prev_size <= off - a->data_off;
}

static struct free_links *links_at(tn_arena *a, uint64_t off)
{
	return (struct free_links *)(a->base + off + BLOCK_HDR);
}

static void mapping(uint64_t size, unsigned *fl, unsigned *sl)
{
	unsigned f = 63u - (unsigned)__builtin_clzll(size | 1);
	if (f >= FL_COUNT)
		f = FL_COUNT - 1; /* no sane block is this large (arenas stop at 64 TiB) */
	*fl = f;
	*sl = (unsigned)(size >> (f - SL_LOG)) & (SL_COUNT - 1);
}

static void bitmap_set(tn_arena *a, unsigned fl, unsigned sl)
{
	struct arena_header *h = a->hdr;
	if (!(h->sl_bitmap[fl] >> sl & 1))
		tn__tx_set(a, &h->sl_bitmap[fl], h->sl_bitmap[fl] | UINT64_C(1) << sl);
	if (!(h->fl_bitmap >> fl & 1))
		tn__tx_set(a, &h->fl_bitmap, h->fl_bitmap | UINT64_C(1) << fl);
}

static void insert_free(tn_arena *a, uint64_t off)
{
	struct arena_header *h = a->hdr;
	unsigned fl, sl;
	mapping(tn__block_at(a, off)->size, &fl, &sl);
	uint64_t head = h->bins[fl][sl];
	struct free_links *l = links_at(a, off);
	tn__tx_set(a, &l->next, head);
	tn__tx_set(a, &l->prev, 0);
	if (head)
		tn__tx_set(a, &links_at(a, head)->prev, off);
	tn__tx_set(a, &h->bins[fl][sl], off);
	bitmap_set(a, fl, sl);
}

void tn__insert_free(tn_arena *a, uint64_t off)
{
	insert_free(a, off);
}

void tn__rebuild_free_lists(tn_arena *a)
{
	struct arena_header *h = a->hdr;
	/* Too many words for the undo log: the dirty flag makes a lock taker whose predecessor
	 * died during the rebuild do it again. The block headers, the source of truth, are
	 * only read. */
	h->lists_dirty = 1;
	atomic_thread_fence(memory_order_seq_cst);
	h->fl_bitmap = 0;
	memset(h->sl_bitmap, 0, sizeof(h->sl_bitmap));
	memset(h->bins, 0, sizeof(h->bins));
	for (uint64_t off = a->data_off; off < data_end(a);) {
		if (!tn__block_sane(a, off))
			break;
		struct block *b = tn__block_at(a, off);
		if (tn__block_magic(b) == BLOCK_MAGIC_FREE) {
			unsigned fl, sl;
			mapping(b->size, &fl, &sl);
			struct free_links *l = links_at(a, off);
			l->next = h->bins[fl][sl];
			l->prev = 0;
			if (l->next)
				links_at(a, l->next)->prev = off;
			h->bins[fl][sl] = off;
			h->sl_bitmap[fl] |= UINT64_C(1) << sl;
			h->fl_bitmap |= UINT64_C(1) << fl;
		}
		off += b->size;
	}
	atomic_thread_fence(memory_order_seq_cst);
	h->lists_dirty = 0;
}

/* Unlink a free block; false when its links are damaged (nothing written then). */
static bool remove_free(tn_arena *a, uint64_t off)
{
	struct arena_header *h = a->hdr;
	unsigned fl, sl;
	mapping(tn__block_at(a, off)->size, &fl, &sl);
	struct free_links *l = links_at(a, off);
	uint64_t next = l->next, prev = l->prev;
	/* The neighbours must link back to us: a damaged link is refused, never followed into
	 * another block's payload. */
	if ((next && (!tn__block_ok(a, next) || links_at(a, next)->prev != off)) ||
	    (prev && (!tn__block_ok(a, prev) || links_at(a, prev)->next != off)) ||
	    (!prev && h->bins[fl][sl] != off))
		return false;
	if (prev)
		tn__tx_set(a, &links_at(a, prev)->next, next);
	else
		tn__tx_set(a, &h->bins[fl][sl], next);
	if (next)
		tn__tx_set(a, &links_at(a, next)->prev, prev);
	if (!h->bins[fl][sl]) {
		tn__tx_set(a, &h->sl_bitmap[fl], h->sl_bitmap[fl] & ~(UINT64_C(1) << sl));
		if (!h->sl_bitmap[fl])
			tn__tx_set(a, &h->fl_bitmap, h->fl_bitmap & ~(UINT64_C(1) << fl));
	}
	return true;
}

/* The first free block of a bin whose every block has at least @size bytes, or 0. */
static uint64_t find_free(tn_arena *a, uint64_t size)
{
	struct arena_header *h = a->hdr;
	unsigned fl, sl;

	mapping(size, &fl, &sl);
	/* Round up to the next sub-bin unless @size starts one, so any block found fits. */
	uint64_t step = UINT64_C(1) << (fl - SL_LOG);
	if (size & (step - 1)) {
		size += step;
		if (63u - (unsigned)__builtin_clzll(size) >= FL_COUNT)
			return 0;
		mapping(size, &fl, &sl);
	}
	if (fl >= FL_COUNT)
		return 0;
	uint64_t sl_map = h->sl_bitmap[fl] & (~UINT64_C(0) << sl) & ((UINT64_C(1) << SL_COUNT) - 1);
	if (!sl_map) {
		uint64_t fl_map = fl + 1 < 64 ? h->fl_bitmap & (~UINT64_C(0) << (fl + 1)) : 0;
		if (!fl_map)
			return 0;
		fl = (unsigned)__builtin_ctzll(fl_map);
		if (fl >= FL_COUNT)
			return 0;
		sl_map = h->sl_bitmap[fl] & ((UINT64_C(1) << SL_COUNT) - 1);
		if (!sl_map)
			return 0;
	}
	sl = (unsigned)__builtin_ctzll(sl_map);
	return h->bins[fl][sl];
}

static void write_header(tn_arena *a, uint64_t off, uint32_t magic, uint32_t flags, uint64_t size,
			 uint64_t prev_size)
{
	struct block *b = tn__block_at(a, off);
	tn__tx_set(a, &b->magic_flags, magic | (uint64_t)flags << 32);
	tn__tx_set(a, &b->size, size);
	tn__tx_set(a, &b->prev_size, prev_size);
}

static void set_next_prev_size(tn_arena *a, uint64_t off, uint64_t size)
{
	if (off + size < data_end(a))
		tn__tx_set(a, &tn__block_at(a, off + size)->prev_size, size);
}

static void counter_add(tn_arena *a, uint64_t *c, int64_t delta)
{
	tn__tx_set(a, c, *c + (uint64_t)delta);
}

bool tn__hold_has(const struct block *b, int slot)
{
	return b->holders[slot / 64] >> (slot % 64) & 1;
}

bool tn__held_by_others(const tn_arena *a, const struct block *b)
{
	for (int i = 0; i < HOLD_WORDS; i++) {
		uint64_t mine = i == a->slot / 64 ? UINT64_C(1) << (a->slot % 64) : 0;
		if (b->holders[i] & ~mine)
			return true;
	}
	return false;
}

bool tn__holds_none(const struct block *b)
{
	for (int i = 0; i < HOLD_WORDS; i++)
		if (b->holders[i])
			return false;
	return true;
}

void tn__hold_set(tn_arena *a, struct block *b, int slot, bool on)
{
	uint64_t bit = UINT64_C(1) << (slot % 64), w = b->holders[slot / 64];
	uint64_t nw = on ? w | bit : w & ~bit;
	if (nw != w)
		tn__tx_set(a, &b->holders[slot / 64], nw);
}

int tn__heap_free_block(tn_arena *a, uint64_t off)
{
	struct arena_header *h = a->hdr;
	struct block *b = tn__block_at(a, off);
	uint64_t size = b->size, start = off, total = size;
	int64_t merged = 0;

	if (b->prev_size) {
		uint64_t p = off - b->prev_size;
		if (!tn__block_sane(a, p) || tn__block_at(a, p)->size != b->prev_size)
			goto damaged;
		if (tn__block_magic(tn__block_at(a, p)) == BLOCK_MAGIC_FREE) {
			if (!remove_free(a, p))
				goto damaged;
			start = p;
			total += tn__block_at(a, p)->size;
			merged++;
		}
	}
	uint64_t n = off + size;
	if (n < data_end(a)) {
		if (!tn__block_sane(a, n))
			goto damaged;
		if (tn__block_magic(tn__block_at(a, n)) == BLOCK_MAGIC_FREE) {
			if (!remove_free(a, n))
				goto damaged;
			total += tn__block_at(a, n)->size;
			merged++;
		}
	}
	struct block *s = tn__block_at(a, start);
	write_header(a, start, BLOCK_MAGIC_FREE, 0, total, s->prev_size);
	set_next_prev_size(a, start, total);
	insert_free(a, start);
	counter_add(a, &h->used_bytes, -(int64_t)size);
	counter_add(a, &h->free_bytes, (int64_t)size);
	counter_add(a, &h->blocks, -1);
	counter_add(a, &h->free_blocks, 1 - merged);
	counter_add(a, &h->num_frees, 1);
	return 0;
damaged:
	tx_abort(a);
	return tn__error(TN_EIO, "arena %s: heap damaged near offset %" PRIu64 "; run fsck", a->path,
			 off);
}

/* Carve a block for @need bytes (header included) at @align; 0 with ENOMEM. Under the lock;
 * commits nothing. */
static int heap_alloc(tn_arena *a, uint64_t need, uint64_t align, uint64_t *ret_off)
{
	struct arena_header *h = a->hdr;
	uint64_t search = need + (align > TN_ARENA_ALIGNMENT ? align + BLOCK_MIN : 0);
	uint64_t off = find_free(a, search);

	if (!off)
		return TN_ENOMEM;
	if (!tn__block_sane(a, off) || tn__block_magic(tn__block_at(a, off)) != BLOCK_MAGIC_FREE ||
	    tn__block_at(a, off)->size < search || !remove_free(a, off)) {
		tx_abort(a);
		return tn__error(TN_EIO, "arena %s: free list damaged at offset %" PRIu64
				 "; run fsck", a->path, off);
	}
	uint64_t size = tn__block_at(a, off)->size, prev_size = tn__block_at(a, off)->prev_size;
	int64_t free_delta = -1;
	uint64_t free_bytes_delta = size;

	if (align > TN_ARENA_ALIGNMENT) {
		uint64_t p = round_up(off + BLOCK_HDR, align);
		while (p - BLOCK_HDR - off && p - BLOCK_HDR - off < BLOCK_MIN)
			p += align;
		uint64_t gap = p - BLOCK_HDR - off;
		if (gap) {
			write_header(a, off, BLOCK_MAGIC_FREE, 0, gap, prev_size);
			insert_free(a, off);
			free_delta++;
			free_bytes_delta -= gap;
			prev_size = gap;
			off += gap;
			size -= gap;
		}
	}
	if (size - need >= BLOCK_MIN) {
		uint64_t t = off + need;
		write_header(a, t, BLOCK_MAGIC_FREE, 0, size - need, need);
		set_next_prev_size(a, t, size - need);
		insert_free(a, t);
		free_delta++;
		free_bytes_delta -= size - need;
		size = need;
	}
	write_header(a, off, BLOCK_MAGIC_USED, 0, size, prev_size);
	set_next_prev_size(a, off, size);
	struct block *b = tn__block_at(a, off);
	tn__tx_set(a, &h->block_gen, h->block_gen + 1);
	tn__tx_set(a, &b->gen_pins, (uint32_t)h->block_gen);
	for (int i = 0; i < HOLD_WORDS; i++)
		if (b->holders[i] != (i == a->slot / 64 ? UINT64_C(1) << (a->slot % 64) : 0))
			tn__tx_set(a, &b->holders[i],
				   i == a->slot / 64 ? UINT64_C(1) << (a->slot % 64) : 0);
	counter_add(a, &h->used_bytes, (int64_t)size);
	counter_add(a, &h->free_bytes, -(int64_t)free_bytes_delta);
	counter_add(a, &h->blocks, 1);
	counter_add(a, &h->free_blocks, free_delta);
	counter_add(a, &h->num_allocs, 1);
	*ret_off = off;
	return 0;
}

/* ---- the process's holds ----------------------------------------------------------------------- */

static size_t hold_hash(uint64_t block, size_t cap)
{
	return (size_t)((block >> 6) * UINT64_C(0x9e3779b97f4a7c15) >> 20) & (cap - 1);
}

struct local_hold *tn__local_find(tn_arena *a, uint64_t block)
{
	if (!a->holds_cap)
		return NULL;
	for (size_t i = hold_hash(block, a->holds_cap);; i = (i + 1) & (a->holds_cap - 1)) {
		if (a->holds[i].block == block)
			return &a->holds[i];
		if (!a->holds[i].block)
			return NULL;
	}
}

static bool local_grow(tn_arena *a)
{
	size_t cap = a->holds_cap ? 2 * a->holds_cap : 64;
	struct local_hold *t = tn__calloc(cap, sizeof(*t));
	if (!t)
		return false;
	for (size_t i = 0; i < a->holds_cap; i++) {
		if (!a->holds[i].block)
			continue;
		size_t j = hold_hash(a->holds[i].block, cap);
		while (t[j].block)
			j = (j + 1) & (cap - 1);
		t[j] = a->holds[i];
	}
	tn__free(a->holds);
	a->holds = t;
	a->holds_cap = cap;
	return true;
}

int tn__local_reserve(tn_arena *a)
{
	if ((a->holds_count + 1) * 4 > a->holds_cap * 3 && !local_grow(a))
		return tn__error(TN_ENOMEM, "arena %s: out of memory for this process's holds",
				 a->path);
	return 0;
}

struct local_hold *tn__local_insert(tn_arena *a, uint64_t block)
{
	if ((a->holds_count + 1) * 4 > a->holds_cap * 3 && !local_grow(a))
		return NULL;
	size_t i = hold_hash(block, a->holds_cap);
	while (a->holds[i].block)
		i = (i + 1) & (a->holds_cap - 1);
	a->holds[i] = (struct local_hold){ .block = block };
	a->holds_count++;
	return &a->holds[i];
}

/* Remove a record, shifting later ones of its probe run back (no tombstones). */
static void local_remove(tn_arena *a, struct local_hold *rec)
{
	size_t i = (size_t)(rec - a->holds), mask = a->holds_cap - 1;
	a->holds[i].block = 0;
	for (size_t j = (i + 1) & mask; a->holds[j].block; j = (j + 1) & mask) {
		size_t home = hold_hash(a->holds[j].block, a->holds_cap);
		/* Move j back to i when i lies cyclically in [home, j). */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			a->holds[i] = a->holds[j];
			a->holds[j].block = 0;
			i = j;
		}
	}
	a->holds_count--;
}

int tn__arena_release(tn_arena *a, uint64_t block)
{
	int r = 0;
	bool last = false;

	if (!tn__arena_ok(a))
		return TN_EBADF; /* a storage inherited across fork(): the parent's hold */

	pthread_mutex_lock(&a->local_lock);
	struct local_hold *rec = tn__local_find(a, block);
	if (!rec) {
		pthread_mutex_unlock(&a->local_lock);
		return tn__error(TN_EBADF, "arena %s: offset %" PRIu64
				 " is not a block this process holds", a->path, block);
	}
	if (--rec->holds > 0) {
		pthread_mutex_unlock(&a->local_lock);
		return 0;
	}
	local_remove(a, rec);
	last = true;
	if (a->read_only) {
		/* The daemon holds the block for our slot: it drops the hold. Under local_lock,
		 * so that a lookup of the same block cannot have its new hold dropped here. */
		a->remote.release(a->remote.ctx, block);
	} else if ((r = tn__arena_lock(a)) == 0) {
		struct block *b = tn__block_at(a, block);
		if (tn__block_sane(a, block) && tn__block_magic(b) == BLOCK_MAGIC_USED) {
			tn__hold_set(a, b, a->slot, false);
			if (tn__holds_none(b) && !(b->gen_pins >> 32))
				r = tn__heap_free_block(a, block);
		} else {
			r = tn__error(TN_EIO, "arena %s: block at %" PRIu64 " damaged; run fsck",
				      a->path, block);
		}
		tn__tx_commit(a);
		tn__arena_unlock(a);
	}
	pthread_mutex_unlock(&a->local_lock);
	if (last)
		tn_arena_unref(a);
	return r;
}

/* ---- clients ----------------------------------------------------------------------------------- */

struct client_rec *tn__client_at(const tn_arena *a, int slot)
{
	return (struct client_rec *)(a->base + a->clients_off +
				     (uint64_t)slot * sizeof(struct client_rec));
}

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks after boot. With the
 * pid it names one process for good, where the pid alone is reused. 0 when the process is
 * gone (ENOENT/ESRCH), UINT64_MAX when it cannot be told (any other failure). */
uint64_t tn__proc_start_time(int64_t pid)
{
	char path[64], buf[1024];
	int saved = errno;
	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		errno = saved;
		return e == ENOENT || e == ESRCH ? 0 : UINT64_MAX;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	errno = saved;
	if (n < 0)
		return e == ESRCH ? 0 : UINT64_MAX; /* a zombie's stat reads fine; ESRCH: reaped */
	if (n == 0)
		return UINT64_MAX;
	buf[n] = 0;
	/* The command name may hold spaces and parentheses: count fields after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || !p[1] || !p[2])
		return UINT64_MAX;
	if (p[2] == 'Z' || p[2] == 'X')
		return 0; /* dead, not yet reaped by its parent */
	int field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return strtoull(p, NULL, 10);
}

bool tn__client_alive(const struct client_rec *c)
{
	if ((uint32_t)c->state_gen != CLIENT_ATTACHED || c->pid <= 0)
		return false;
	uint64_t st = tn__proc_start_time(c->pid);
	/* Unknown (no /proc, hidepid, out of descriptors...): alive, never reclaimed on doubt. */
	return st == UINT64_MAX || (st && st == c->start_time);
}

int tn__read_only_error(const tn_arena *a, const char *fn)
{
	return tn__error(TN_EPERM, "%s: arena %s is attached read-only", fn, a->path);
}

uint64_t tn__quiet_undo(const tn_arena *a)
{
	uint64_t n = 0;
	for (int i = 0; i < 64; i++) {
		n = atomic_load_explicit(&a->hdr->undo_count, memory_order_acquire);
		if (!n)
			break;
		sched_yield();
	}
	return n;
}

int tn__claim_slot(tn_arena *a, int64_t pid, uint64_t start_time, int *ret_slot,
		   uint64_t *ret_state)
{
	struct arena_header *h = a->hdr;
	int r = tn__arena_lock(a);
	if (r)
		return r;
	int slot = -1;
	for (int pass = 0; pass < 2 && slot < 0; pass++) {
		for (int i = 0; i < (int)a->max_clients; i++) {
			struct client_rec *c = tn__client_at(a, i);
			if ((uint32_t)c->state_gen == CLIENT_FREE) {
				slot = i;
				break;
			}
		}
		/* All taken: reclaim the slots of processes that are gone, then look again. */
		if (slot < 0 && pass == 0)
			for (int i = 0; i < (int)a->max_clients; i++)
				if (!tn__client_alive(tn__client_at(a, i)))
					tn__reclaim_locked(a, i);
	}
	if (slot < 0) {
		tn__arena_unlock(a);
		return tn__error(TN_EBUSY, "arena %s: all %u client slots are taken", a->path,
				 a->max_clients);
	}
	struct client_rec *c = tn__client_at(a, slot);
	tn__tx_set(a, &h->client_gen, h->client_gen + 1);
	tn__tx_set(a, (uint64_t *)&c->pid, (uint64_t)pid);
	tn__tx_set(a, &c->start_time, start_time);
	tn__tx_set(a, &c->attach_ns, now_ns());
	tn__tx_set(a, &c->state_gen, CLIENT_ATTACHED | h->client_gen << 32);
	counter_add(a, &h->clients, 1);
	uint64_t state = c->state_gen;
	tn__tx_commit(a);
	tn__arena_unlock(a);
	*ret_slot = slot;
	if (ret_state)
		*ret_state = state;
	return 0;
}

static int take_slot(tn_arena *a)
{
	return tn__claim_slot(a, getpid(), tn__proc_start_time(getpid()), &a->slot, NULL);
}

/* ---- allocation ------------------------------------------------------------------------------ */

/* The block size (header included) for a request of @nbytes, and the alignment it gets. */
static int block_request(tn_arena *a, size_t nbytes, uint64_t *ret_need, uint64_t *ret_align,
			 const char *fn)
{
	if (nbytes > a->data_size)
		return tn__error(TN_ENOMEM, "%s: %zu bytes exceed the arena's heap of %" PRIu64
				 " bytes", fn, nbytes, a->data_size);
	*ret_align = nbytes >= ARENA_DATA_ALIGN		? ARENA_DATA_ALIGN
		     : nbytes >= ((uint64_t)64 << 10) ? 4096
						       : TN_ARENA_ALIGNMENT;
	uint64_t need = round_up(nbytes, TN_ARENA_ALIGNMENT) + BLOCK_HDR;
	*ret_need = need < BLOCK_MIN ? BLOCK_MIN : need;
	return 0;
}

/* Allocate a block held by this process's slot, under the arena lock; @flags go into its
 * header in the same change. */
static int heap_alloc_locked(tn_arena *a, size_t nbytes, uint64_t need, uint64_t align,
			     uint32_t flags, uint64_t *ret_off, const char *fn)
{
	int r = heap_alloc(a, need, align, ret_off);
	/* Alignment beyond 64 bytes is for speed (huge pages, page-granular placement): when
	 * the padding it needs does not fit, take the block at 64 bytes rather than fail. */
	if (r == TN_ENOMEM && align > TN_ARENA_ALIGNMENT)
		r = heap_alloc(a, need, TN_ARENA_ALIGNMENT, ret_off);
	if (r == TN_ENOMEM)
		return tn__error(TN_ENOMEM, "%s: no free block of %zu bytes in arena %s (%" PRIu64
				 " bytes free, the largest block %" PRIu64 ")", fn, nbytes, a->path,
				 a->hdr->free_bytes, tn__largest_free(a));
	if (r == 0 && flags) {
		struct block *b = tn__block_at(a, *ret_off);
		tn__tx_set(a, &b->magic_flags, b->magic_flags | (uint64_t)flags << 32);
	}
	tn__tx_commit(a);
	return r;
}

/* A block for the layer above's storage: counted as one use in the process's holds table (so
 * that holds of it, once published, share its hold bit) and keeping the handle alive. */
int tn__arena_alloc_held(tn_arena *a, size_t nbytes, void **ret_ptr)
{
	static const char fn[] = "tn_arena_allocator";
	uint64_t need = 0, align = 0, off = 0;
	int r;

	if (a->read_only)
		return tn__read_only_error(a, fn);
	if (!nbytes)
		nbytes = 1;
	if ((r = block_request(a, nbytes, &need, &align, fn)))
		return r;
	pthread_mutex_lock(&a->local_lock);
	/* Room for the local record first, so nothing needs undoing after the heap commits. */
	if ((r = tn__local_reserve(a)) == 0 && (r = tn__arena_lock(a)) == 0) {
		r = heap_alloc_locked(a, nbytes, need, align, 0, &off, fn);
		tn__arena_unlock(a);
		if (r == 0)
			tn__local_insert(a, off)->holds = 1;
	}
	pthread_mutex_unlock(&a->local_lock);
	if (r)
		return r;
	tn_arena_ref(a);
	*ret_ptr = a->base + off + BLOCK_HDR;
	return 0;
}

uint64_t tn__arena_block_of(const tn_arena *a, const void *ptr, bool *ret_ro)
{
	const uint8_t *p = ptr;
	uint64_t off;
	bool ro = false;
	if (p >= a->base && p < a->base + a->size) {
		off = (uint64_t)(p - a->base);
	} else if (a->ro && p >= a->ro && p < a->ro + a->size) {
		off = (uint64_t)(p - a->ro);
		ro = true;
	} else {
		return 0;
	}
	if (off < a->data_off + BLOCK_HDR || off % TN_ARENA_ALIGNMENT)
		return 0;
	if (ret_ro)
		*ret_ro = ro;
	return off - BLOCK_HDR;
}

/* ---- raw blocks and the per-thread cache -------------------------------------------------------
 *
 * tn_arena_alloc's blocks carry BLOCK_FLAG_RAW and this process's hold bit, and nothing else
 * about them is recorded: they cannot be named, so no other process ever holds them, and
 * tn_arena_free checks the header itself. A thread keeps the small raw blocks it frees
 * (BLOCK_FLAG_CACHED, still allocated and held by the slot) for its next allocations of the
 * same size class, so that the pair costs no lock at all. A crash or the handle's last unref
 * frees them with the slot's other holds; tn_arena_trim and thread exit give them back.
 */
#define TC_MAX_BLOCK (4096u + BLOCK_HDR) /* blocks with up to 4 KiB of data */
#define TC_CLASSES (TC_MAX_BLOCK / TN_ARENA_ALIGNMENT + 1)
#define TC_DEPTH 64
#define TC_CLASS_BYTES (32u << 10) /* at most this much cached per class */

struct tcache {
	_Atomic(tn_arena *) arena; /* the handle the cached blocks belong to, or NULL */
	struct tcache *next, **pprev; /* the process's list of caches */
	uint8_t n[TC_CLASSES];
	uint64_t off[TC_CLASSES][TC_DEPTH];
};

/* Initial-exec: the fast paths read it without a call to __tls_get_addr. */
static _Thread_local struct tcache *tls_tcache __attribute__((tls_model("initial-exec")));
static pthread_mutex_t tcache_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the list */
static struct tcache *tcache_list;
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

/* A reference to @a unless its last one is already gone (the handle is being destroyed). */
static bool ref_if_alive(tn_arena *a)
{
	int64_t n = atomic_load_explicit(&a->refcount, memory_order_relaxed);
	while (n > 0)
		if (atomic_compare_exchange_weak_explicit(&a->refcount, &n, n + 1,
							  memory_order_acquire, memory_order_relaxed))
			return true;
	return false;
}

/* Free a raw block under the lock. */
static int raw_free_locked(tn_arena *a, uint64_t off)
{
	struct block *b = tn__block_at(a, off);
	uint32_t flags = (uint32_t)(b->magic_flags >> 32);
	if (!tn__block_sane(a, off) || tn__block_magic(b) != BLOCK_MAGIC_USED ||
	    !(flags & BLOCK_FLAG_RAW) || !tn__hold_has(b, a->slot))
		return TN_EBADF;
	tn__hold_set(a, b, a->slot, false);
	int r = 0;
	if (tn__holds_none(b) && !(b->gen_pins >> 32))
		r = tn__heap_free_block(a, off);
	tn__tx_commit(a);
	return r;
}

/* Give the blocks of @tc back to its arena (the caller holds a reference to it). */
static uint64_t tcache_drain(struct tcache *tc, tn_arena *a)
{
	uint64_t bytes = 0;
	bool locked = tn__arena_lock(a) == 0;
	for (unsigned c = 0; c < TC_CLASSES; c++) {
		for (; tc->n[c]; tc->n[c]--) {
			uint64_t off = tc->off[c][tc->n[c] - 1];
			bytes += (uint64_t)c * TN_ARENA_ALIGNMENT;
			if (locked)
				raw_free_locked(a, off); /* a damaged one stays for fsck */
		}
	}
	if (locked)
		tn__arena_unlock(a);
	return bytes;
}

/* Unbind @tc from its arena, giving the blocks back while the handle lives. */
static uint64_t tcache_release(struct tcache *tc)
{
	uint64_t bytes = 0;
	pthread_mutex_lock(&tcache_lock);
	tn_arena *old = atomic_load_explicit(&tc->arena, memory_order_relaxed);
	bool alive = old && ref_if_alive(old);
	atomic_store_explicit(&tc->arena, NULL, memory_order_relaxed);
	pthread_mutex_unlock(&tcache_lock);
	if (alive) {
		bytes = tcache_drain(tc, old);
		tn_arena_unref(old);
	}
	memset(tc->n, 0, sizeof(tc->n));
	return bytes;
}

static void tcache_dtor(void *p)
{
	struct tcache *tc = p;
	tcache_release(tc);
	pthread_mutex_lock(&tcache_lock);
	*tc->pprev = tc->next;
	if (tc->next)
		tc->next->pprev = tc->pprev;
	pthread_mutex_unlock(&tcache_lock);
	tls_tcache = NULL;
	tn__free(tc);
}

static void tcache_key_init(void)
{
	pthread_key_create(&tcache_key, tcache_dtor);
}

/* The calling thread's cache, bound to @a (NULL when none can be had: the caller takes the
 * slow path). */
static struct tcache *tcache_for(tn_arena *a)
{
	struct tcache *tc = tls_tcache;
	if (tc && atomic_load_explicit(&tc->arena, memory_order_acquire) == a)
		return tc;
	if (!tc) {
		pthread_once(&tcache_once, tcache_key_init);
		if (!(tc = tn__malloc(sizeof(*tc))))
			return NULL;
		memset(tc, 0, sizeof(*tc));
		if (pthread_setspecific(tcache_key, tc)) {
			tn__free(tc);
			return NULL;
		}
		pthread_mutex_lock(&tcache_lock);
		tc->next = tcache_list;
		if (tcache_list)
			tcache_list->pprev = &tc->next;
		tc->pprev = &tcache_list;
		tcache_list = tc;
		pthread_mutex_unlock(&tcache_lock);
		tls_tcache = tc;
	} else {
		tcache_release(tc); /* bound to another arena (or to a handle now gone) */
	}
	atomic_store_explicit(&tc->arena, a, memory_order_release);
	return tc;
}

/* The handle is going: forget every thread's blocks of it (its slot's holds are dropped). */
static void tcache_forget(tn_arena *a)
{
	pthread_mutex_lock(&tcache_lock);
	for (struct tcache *tc = tcache_list; tc; tc = tc->next)
		if (atomic_load_explicit(&tc->arena, memory_order_relaxed) == a)
			atomic_store_explicit(&tc->arena, NULL, memory_order_release);
	pthread_mutex_unlock(&tcache_lock);
}

TN_EXPORT int tn_arena_alloc(tn_arena *a, size_t nbytes, void **ret_ptr)
{
	static const char fn[] = "tn_arena_alloc";
	uint64_t need = 0, align = 0, off = 0;
	int r;

	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (!ret_ptr || !nbytes)
		return tn__error(TN_EINVAL, "%s: %s", fn, ret_ptr ? "0 bytes" : "NULL ret_ptr");
	struct tcache *tc = tls_tcache;
	if (nbytes <= TC_MAX_BLOCK - BLOCK_HDR && tc &&
	    atomic_load_explicit(&tc->arena, memory_order_relaxed) == a) {
		need = round_up(nbytes, TN_ARENA_ALIGNMENT) + BLOCK_HDR;
		need = need < BLOCK_MIN ? BLOCK_MIN : need;
	}
	unsigned c = (unsigned)(need / TN_ARENA_ALIGNMENT);
	if (need && tc->n[c]) {
		/* A block of this class the thread freed: no lock, no system call. */
		off = tc->off[c][--tc->n[c]];
		struct block *b = tn__block_at(a, off);
		b->magic_flags = BLOCK_MAGIC_USED | (uint64_t)BLOCK_FLAG_RAW << 32;
		*ret_ptr = a->base + off + BLOCK_HDR;
		return 0;
	}
	/* Here, not before the fast path: a read-only handle never has a thread cache. */
	if (a->read_only)
		return tn__read_only_error(a, fn);
	if ((r = block_request(a, nbytes, &need, &align, fn)))
		return r;
	if ((r = tn__arena_lock(a)))
		return r;
	r = heap_alloc_locked(a, nbytes, need, align, BLOCK_FLAG_RAW, &off, fn);
	tn__arena_unlock(a);
	if (r == TN_ENOMEM && tc &&
	    atomic_load_explicit(&tc->arena, memory_order_relaxed) == a) {
		/* The blocks this thread keeps may be what is missing. */
		tcache_release(tc);
		if ((r = tn__arena_lock(a)))
			return r;
		r = heap_alloc_locked(a, nbytes, need, align, BLOCK_FLAG_RAW, &off, fn);
		tn__arena_unlock(a);
	}
	if (r)
		return r;
	*ret_ptr = a->base + off + BLOCK_HDR;
	return 0;
}

/* Whether the thread's cache takes the raw block @b at @off: a whole, unflagged raw block of
 * a cached class, held by this process, and room in its class. */
static inline bool tcache_put(tn_arena *a, struct tcache *tc, uint64_t off, struct block *b)
{
	uint64_t size = b->size;
	unsigned c = (unsigned)(size / TN_ARENA_ALIGNMENT);
	if (b->magic_flags != (BLOCK_MAGIC_USED | (uint64_t)BLOCK_FLAG_RAW << 32) ||
	    size > TC_MAX_BLOCK || size < BLOCK_MIN || size % TN_ARENA_ALIGNMENT ||
	    size > a->size - off || !tn__hold_has(b, a->slot) || tc->n[c] >= TC_DEPTH ||
	    (uint64_t)tc->n[c] * size >= TC_CLASS_BYTES)
		return false;
	b->magic_flags |= (uint64_t)BLOCK_FLAG_CACHED << 32;
	tc->off[c][tc->n[c]++] = off;
	return true;
}

TN_EXPORT int tn_arena_free(tn_arena *a, void *ptr)
{
	static const char fn[] = "tn_arena_free";
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	/* The fast path: a small raw block into the thread's cache. */
	uint64_t off = (uint64_t)((const uint8_t *)ptr - a->base) - BLOCK_HDR;
	struct tcache *tc = tls_tcache;
	if (off >= a->data_off && off < a->size - BLOCK_MIN && off % TN_ARENA_ALIGNMENT == 0 &&
	    tc && atomic_load_explicit(&tc->arena, memory_order_relaxed) == a &&
	    tcache_put(a, tc, off, tn__block_at(a, off)))
		return 0;

	if (a->read_only)
		return tn__read_only_error(a, fn);
	off = tn__arena_block_of(a, ptr, NULL);
	struct block *b = tn__block_at(a, off);
	if (!off || (const uint8_t *)ptr != a->base + off + BLOCK_HDR || !tn__block_sane(a, off) ||
	    tn__block_magic(b) != BLOCK_MAGIC_USED || !tn__hold_has(b, a->slot))
		return tn__error(TN_EBADF, "%s: %p is not a block this process holds in arena %s",
				 fn, ptr, a->path);
	uint32_t flags = (uint32_t)(b->magic_flags >> 32);
	if (!(flags & BLOCK_FLAG_RAW))
		return tn__error(TN_EBADF, "%s: %p is a storage's block (it goes with the storage)",
				 fn, ptr);
	if (flags & BLOCK_FLAG_CACHED)
		return tn__error(TN_EBADF, "%s: %p was freed already", fn, ptr);
	if (b->size <= TC_MAX_BLOCK && (tc = tcache_for(a)) && tcache_put(a, tc, off, b))
		return 0;
	int r = tn__arena_lock(a);
	if (r)
		return r;
	r = raw_free_locked(a, off);
	tn__arena_unlock(a);
	if (r == TN_EBADF)
		return tn__error(TN_EBADF, "%s: %p is not a block this process holds in arena %s",
				 fn, ptr, a->path);
	return r;
}

TN_EXPORT int64_t tn_arena_trim(tn_arena *a)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "tn_arena_trim: not an arena handle of this process");
	if (a->read_only)
		return tn__read_only_error(a, "tn_arena_trim");
	struct tcache *tc = tls_tcache;
	if (!tc || atomic_load_explicit(&tc->arena, memory_order_relaxed) != a)
		return 0;
	return (int64_t)tcache_release(tc);
}

/* ---- creating, attaching, detaching ------------------------------------------------------------ */

static int check_file_name(const char *name, const char *fn)
{
	if (!name)
		return tn__error(TN_EINVAL, "%s: NULL arena name", fn);
	size_t n = strlen(name);
	if (!n || n > TN_ARENA_FILE_NAME_MAX || name[0] == '.')
		return tn__error(TN_EINVAL, "%s: arena name '%.40s' must have 1 to %d characters "
				 "and not start with '.'", fn, name, TN_ARENA_FILE_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return tn__error(TN_EINVAL, "%s: arena name '%.40s' has character 0x%02x "
					 "(letters, digits, '.', '_' and '-' only)", fn, name,
					 (unsigned char)c);
	}
	return 0;
}

/* Mount points of huge-page file systems, in /proc/mounts order: hugetlbfs (2 MiB pages)
 * first, then tmpfs mounted with huge=always or huge=within_size. */
static int find_huge_dir(char *buf, size_t len, enum tn_arena_backing *ret_backing)
{
	FILE *f = setmntent("/proc/mounts", "re");
	int found = 0;
	if (!f)
		return 0;
	for (int pass = 0; pass < 2 && !found; pass++) {
		rewind(f);
		struct mntent *m;
		while ((m = getmntent(f))) {
			bool hit = pass == 0 ? !strcmp(m->mnt_type, "hugetlbfs") &&
						       (!hasmntopt(m, "pagesize") ||
							strstr(m->mnt_opts, "pagesize=2M"))
					     : !strcmp(m->mnt_type, "tmpfs") &&
						       (strstr(m->mnt_opts, "huge=always") ||
							strstr(m->mnt_opts, "huge=within_size"));
			if (hit && access(m->mnt_dir, W_OK) == 0 &&
			    strlen(m->mnt_dir) < len) {
				strcpy(buf, m->mnt_dir);
				*ret_backing = pass == 0 ? TN_ARENA_BACKING_HUGETLBFS
							 : TN_ARENA_BACKING_TMPFS_HUGE;
				found = 1;
				break;
			}
		}
	}
	endmntent(f);
	return found;
}

static int make_path(char *buf, size_t len, const char *dir, const char *name, const char *fn)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
		return tn__error(TN_EINVAL, "%s: path %s/%s too long", fn, dir, name);
	return 0;
}

/* The backing of an open arena file, from its file system. */
static enum tn_arena_backing backing_of(int fd, const char *path, uint64_t *ret_page)
{
	struct statfs sf;
	*ret_page = 4096;
	if (fstatfs(fd, &sf) != 0)
		return TN_ARENA_BACKING_FILE;
	if ((uint64_t)sf.f_type == HUGETLBFS_MAGIC) {
		*ret_page = (uint64_t)sf.f_bsize;
		return TN_ARENA_BACKING_HUGETLBFS;
	}
	if ((uint64_t)sf.f_type != TMPFS_MAGIC)
		return TN_ARENA_BACKING_FILE;
	/* A tmpfs mounted with huge=: find its mount options. */
	enum tn_arena_backing b = TN_ARENA_BACKING_TMPFS;
	FILE *f = setmntent("/proc/mounts", "re");
	if (f) {
		struct mntent *m;
		size_t best = 0;
		while ((m = getmntent(f))) {
			size_t n = strlen(m->mnt_dir);
			if (strcmp(m->mnt_type, "tmpfs") || strncmp(path, m->mnt_dir, n) ||
			    (path[n] != '/' && n > 1) || n < best)
				continue;
			best = n;
			b = strstr(m->mnt_opts, "huge=always") || strstr(m->mnt_opts, "huge=within_size")
				    ? TN_ARENA_BACKING_TMPFS_HUGE
				    : TN_ARENA_BACKING_TMPFS;
		}
		endmntent(f);
	}
	if (b == TN_ARENA_BACKING_TMPFS_HUGE)
		*ret_page = ARENA_DATA_ALIGN;
	return b;
}

/* A figure of /proc/meminfo ("HugePages_Free"), or 0. */
static unsigned long long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long v = 0;
	size_t n = strlen(key);
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtoull(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* As root, raise vm.nr_hugepages by what is missing for @pages more huge pages. */
static void reserve_hugepages(uint64_t pages)
{
	int saved = errno;
	unsigned long long avail = meminfo("HugePages_Free") - meminfo("HugePages_Rsvd");
	if (avail >= pages) {
		errno = saved;
		return;
	}
	unsigned long long total = meminfo("HugePages_Total");
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "we");
	if (f) {
		fprintf(f, "%llu\n", total + (pages - avail));
		fclose(f);
	}
	errno = saved;
}

static void fill_uuid(uint8_t uuid[16])
{
	int saved = errno;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, uuid, 16) : -1;
	if (fd >= 0)
		close(fd);
	if (n != 16) {
		uint64_t x = now_ns() ^ (uint64_t)getpid() << 32;
		for (int i = 0; i < 16; i++, x = x * 6364136223846793005u + 1442695040888963407u)
			uuid[i] = (uint8_t)(x >> 56);
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
	errno = saved;
}

static int format(tn_arena *a, const tn_arena_options *o, enum tn_arena_backing backing,
		  uint64_t page)
{
	struct arena_header *h = a->hdr;
	uint64_t max_names = o->max_names;
	if (!max_names) {
		max_names = a->size / (64 << 10);
		max_names = max_names < 1024 ? 1024 : max_names > 65536 ? 65536 : max_names;
	}
	uint64_t slots = 16;
	while (slots < max_names + max_names / 3)
		slots *= 2;
	h->magic = 0;
	h->version = ARENA_VERSION;
	h->header_bytes = (uint32_t)ARENA_HEADER_BYTES;
	fill_uuid(h->uuid);
	h->size = a->size;
	h->page_size = page;
	h->flags = o->flags;
	h->backing = backing;
	h->numa_policy = (uint32_t)o->numa_policy;
	h->numa_nodes = o->numa_nodes;
	h->clients_off = ARENA_HEADER_BYTES;
	h->max_clients = TN_ARENA_MAX_CLIENTS;
	h->client_bytes = sizeof(struct client_rec);
	h->dir_off = h->clients_off + (uint64_t)TN_ARENA_MAX_CLIENTS * sizeof(struct client_rec);
	h->dir_slots = (uint32_t)slots;
	h->entry_bytes = sizeof(struct dir_entry);
	h->max_names = max_names;
	h->data_off = round_up(h->dir_off + slots * sizeof(struct dir_entry), ARENA_DATA_ALIGN);
	if (h->data_off + ((uint64_t)1 << 20) > a->size)
		return tn__error(TN_EINVAL, "tn_arena_create: %" PRIu64 " bytes leave no room for "
				 "a heap after %" PRIu64 " bytes of metadata (%" PRIu64
				 " names); make it larger or lower max_names", a->size, h->data_off,
				 max_names);
	h->data_size = a->size - h->data_off;
	h->create_ns = now_ns();

	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	int r = pthread_mutex_init(&h->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (r)
		return tn__error(TN_EIO, "tn_arena_create: cannot make the lock: %s", strerror(r));

	/* One free block spans the heap. The file is fresh (zero), so only it needs writing. */
	uint64_t off = h->data_off;
	struct block *b = tn__block_at(a, off);
	b->magic_flags = BLOCK_MAGIC_FREE;
	b->size = h->data_size;
	b->prev_size = 0;
	unsigned fl, sl;
	mapping(b->size, &fl, &sl);
	h->bins[fl][sl] = off;
	h->sl_bitmap[fl] = UINT64_C(1) << sl;
	h->fl_bitmap = UINT64_C(1) << fl;
	h->free_bytes = h->data_size;
	h->free_blocks = 1;
	h->magic = ARENA_MAGIC;
	/* Openers wait for READY: it is stored last, with release order. */
	atomic_store_explicit((_Atomic uint32_t *)&h->state, ARENA_STATE_READY,
			      memory_order_release);
	return 0;
}

/* Validate a mapped header; nothing past it is read before this passes. */
int tn__arena_validate(const tn_arena *a, const char *fn)
{
	const struct arena_header *h = a->hdr;
	uint32_t state = atomic_load_explicit((_Atomic uint32_t *)&h->state, memory_order_acquire);
	if (a->size < ARENA_MIN_SIZE || h->magic != ARENA_MAGIC)
		return tn__error(TN_EINVAL, "%s: %s is not a libtensor arena", fn, a->path);
	if (h->version != ARENA_VERSION)
		return tn__error(TN_EINVAL, "%s: %s has layout version %u; this library reads %u",
				 fn, a->path, h->version, ARENA_VERSION);
	if (state != ARENA_STATE_READY)
		return tn__error(TN_EBUSY, "%s: %s is still being created", fn, a->path);
	const char *bad = NULL;
	if (h->size != a->size)
		bad = "size";
	else if (h->header_bytes != ARENA_HEADER_BYTES || h->clients_off != ARENA_HEADER_BYTES)
		bad = "header size";
	else if (h->max_clients != TN_ARENA_MAX_CLIENTS || h->client_bytes != sizeof(struct client_rec))
		bad = "client table";
	else if (h->entry_bytes != sizeof(struct dir_entry) || !h->dir_slots ||
		 (h->dir_slots & (h->dir_slots - 1)) || h->max_names > h->dir_slots ||
		 h->dir_off != h->clients_off + (uint64_t)h->max_clients * h->client_bytes)
		bad = "directory";
	else if (h->data_off % ARENA_DATA_ALIGN ||
		 h->data_off < h->dir_off + (uint64_t)h->dir_slots * h->entry_bytes ||
		 h->data_off >= h->size || h->data_size != h->size - h->data_off)
		bad = "data region";
	else if (h->numa_policy > TN_NUMA_LOCAL || h->backing > TN_ARENA_BACKING_FILE)
		bad = "placement";
	else if (h->page_size < 4096 || h->page_size > ((uint64_t)1 << 30) ||
		 (h->page_size & (h->page_size - 1)) || h->data_off % h->page_size)
		bad = "page size";
	if (bad)
		return tn__error(TN_EINVAL, "%s: %s has a damaged header (%s)", fn, a->path, bad);
	return 0;
}

/* Map the file at a 2 MiB-aligned address, so that offsets aligned in the file are aligned
 * in memory too (huge pages, and the 2 MiB alignment of large blocks). */
static void *map_aligned(int fd, uint64_t size, int prot)
{
	size_t span = size + ARENA_DATA_ALIGN;
	uint8_t *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *at = (uint8_t *)round_up((uintptr_t)r, ARENA_DATA_ALIGN);
	void *p = mmap(at, size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	int saved = errno;
	if (p == MAP_FAILED) {
		munmap(r, span);
		errno = saved;
		return MAP_FAILED;
	}
	/* Give back the parts of the reservation around the mapping. */
	if (at > r)
		munmap(r, (size_t)(at - r));
	if (r + span > at + size)
		munmap(at + size, (size_t)(r + span - (at + size)));
	errno = saved;
	return p;
}

/* Observers, newest first; pushed with release stores, walked after an acquire load. */
static _Atomic(struct tn__arena_observer *) observers;

void tn__arena_observe(struct tn__arena_observer *observer)
{
	struct tn__arena_observer *head = atomic_load_explicit(&observers, memory_order_relaxed);
	do
		observer->next = head;
	while (!atomic_compare_exchange_weak_explicit(&observers, &head, observer,
						      memory_order_release, memory_order_relaxed));
}

int tn__arena_mapping(const tn_arena *a, struct tn__arena_mapping *ret)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EINVAL, "not an arena handle of this process");
	*ret = (struct tn__arena_mapping){ a->base, a->ro, (size_t)a->size, a->read_only };
	return 0;
}

bool tn__arena_live(const tn_arena *a)
{
	return tn__arena_ok(a);
}

int tn__arena_check(const tn_arena *a, bool write, const char *fn)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (write && a->read_only)
		return tn__read_only_error(a, fn);
	return 0;
}

void *tn__arena_upper(tn_arena *a)
{
	return a->upper;
}

static void destroy_handle(tn_arena *a)
{
	tcache_forget(a);
	/* An observer that pinned the pages (a backend, for DMA) must forget them before they are
	 * unmapped. A fork child's inherited handle is never destroyed (tn_arena_unref refuses
	 * it), so observers hear only of handles this process made. */
	struct tn__arena_mapping map = { a->base, a->ro, (size_t)a->size, a->read_only };
	for (struct tn__arena_observer *o = atomic_load_explicit(&observers, memory_order_acquire);
	     o; o = o->next)
		o->unmapping(o, a, &map);
	if (a->ro)
		munmap(a->ro, a->size);
	if (a->base)
		munmap(a->base, a->size);
	if (a->fd >= 0)
		close(a->fd);
	pthread_mutex_destroy(&a->local_lock);
	tn__free(a->holds);
	tn__handle_free(a);
}

_Atomic unsigned tn__arena_fork_gen;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* In the child of a fork(): the parent's handles are refused from now on, and the thread
 * cache (blocks held by the parent's slot) is forgotten. */
static void atfork_child(void)
{
	atomic_fetch_add_explicit(&tn__arena_fork_gen, 1, memory_order_relaxed);
	struct tcache *tc = tls_tcache;
	if (tc) {
		atomic_store_explicit(&tc->arena, NULL, memory_order_relaxed);
		memset(tc->n, 0, sizeof(tc->n));
	}
}

static void atfork_init(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static tn_arena *new_handle(void)
{
	pthread_once(&atfork_once, atfork_init);
	tn_arena *a = tn__handle_alloc(sizeof(*a), TN_MAGIC_ARENA);
	if (!a)
		return NULL;
	a->fork_gen = atomic_load_explicit(&tn__arena_fork_gen, memory_order_relaxed);
	a->fd = -1;
	a->slot = -1;
	atomic_init(&a->refcount, 1);
	pthread_mutex_init(&a->local_lock, NULL);
	return a;
}

/* Map the file (read-write and read-only) and validate it. */
static int map_file(tn_arena *a, const char *fn, bool fresh)
{
	struct stat st;
	int saved = errno;
	if (fstat(a->fd, &st) != 0)
		return tn__error(TN_EIO, "%s: %s: %s", fn, a->path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)ARENA_MIN_SIZE)
		return tn__error(TN_EINVAL, "%s: %s is not a libtensor arena (%lld bytes)", fn,
				 a->path, (long long)st.st_size);
	a->size = (uint64_t)st.st_size;
	/* A read-only handle's fd may be O_RDONLY, where PROT_WRITE would fail: never ask. */
	void *p = map_aligned(a->fd, a->size, a->read_only ? PROT_READ : PROT_READ | PROT_WRITE);
	if (p == MAP_FAILED) {
		int e = errno;
		errno = saved;
		return tn__error(e == ENOMEM ? TN_ENOMEM : e == EACCES ? TN_EPERM : TN_EIO,
				 "%s: cannot map %s: %s", fn, a->path, strerror(e));
	}
	a->base = p;
	a->hdr = p;
	if (!fresh) {
		int r = tn__arena_validate(a, fn);
		if (r)
			return r;
	}
	const struct arena_header *h = a->hdr; /* validated */
	a->clients_off = h->clients_off;
	a->dir_off = h->dir_off;
	a->data_off = h->data_off;
	a->data_size = h->data_size;
	a->page_size = h->page_size;
	a->max_names = h->max_names;
	a->max_clients = h->max_clients;
	a->dir_slots = h->dir_slots;
	memcpy(a->uuid, h->uuid, sizeof(a->uuid));
	if (a->read_only)
		return 0; /* the one mapping is read-only already */
	p = map_aligned(a->fd, a->size, PROT_READ);
	if (p == MAP_FAILED) {
		errno = saved;
		return tn__error(TN_ENOMEM, "%s: cannot map %s read-only", fn, a->path);
	}
	a->ro = p;
	return 0;
}

TN_EXPORT void tn_arena_options_init(tn_arena_options *o)
{
	if (o)
		*o = (tn_arena_options){ .size = (uint64_t)64 << 20 };
}

TN_EXPORT int tn_arena_create(const char *name, const tn_arena_options *opts, tn_arena **ret)
{
	static const char fn[] = "tn_arena_create";
	tn_arena_options o;
	char dir[4096];
	enum tn_arena_backing want = TN_ARENA_BACKING_TMPFS;
	int r, saved = errno;

	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_arena", fn);
	if ((r = check_file_name(name, fn)))
		return r;
	if (opts)
		o = *opts;
	else
		tn_arena_options_init(&o);
	if (o.flags & ~(TN_ARENA_HUGEPAGES | TN_ARENA_REQUIRE_HUGEPAGES | TN_ARENA_RESERVE_HUGEPAGES))
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, o.flags);
	if (o.flags & (TN_ARENA_REQUIRE_HUGEPAGES | TN_ARENA_RESERVE_HUGEPAGES))
		o.flags |= TN_ARENA_HUGEPAGES;
	if ((unsigned)o.numa_policy > TN_NUMA_LOCAL)
		return tn__error(TN_EINVAL, "%s: unknown NUMA policy %d", fn, (int)o.numa_policy);
	bool masked = o.numa_policy == TN_NUMA_BIND || o.numa_policy == TN_NUMA_INTERLEAVE ||
		      o.numa_policy == TN_NUMA_PREFERRED;
	if (masked && !o.numa_nodes)
		return tn__error(TN_EINVAL, "%s: NUMA policy %d needs a node mask", fn,
				 (int)o.numa_policy);
	int nodes = tn__numa_node_count();
	if (masked && nodes < 64 && o.numa_nodes >> nodes)
		return tn__error(TN_ERANGE, "%s: node mask 0x%" PRIx64 " names nodes this machine "
				 "lacks (it has %d)", fn, o.numa_nodes, nodes);
	if (o.size < ARENA_MIN_SIZE || o.size > ((uint64_t)1 << 46))
		return tn__error(TN_EINVAL, "%s: size %" PRIu64 " outside [4 MiB, 64 TiB]", fn,
				 o.size);
	if (o.max_names > (1u << 24))
		return tn__error(TN_EINVAL, "%s: max_names %u above %u", fn, o.max_names, 1u << 24);
	if (o.dir) {
		if (strlen(o.dir) >= sizeof(dir))
			return tn__error(TN_EINVAL, "%s: directory name too long", fn);
		strcpy(dir, o.dir);
	} else if (!(o.flags & TN_ARENA_HUGEPAGES) || !find_huge_dir(dir, sizeof(dir), &want)) {
		strcpy(dir, "/dev/shm");
	}

	tn_arena *a = new_handle();
	if (!a)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	if ((r = make_path(a->path, sizeof(a->path), dir, name, fn)))
		goto fail;
	a->fd = open(a->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, o.mode ? o.mode : 0600);
	if (a->fd < 0) {
		int e = errno;
		r = tn__error(e == EEXIST ? TN_EEXIST : e == EACCES ? TN_EPERM
						       : e == ENOENT ? TN_ENOENT
								     : TN_EIO,
			      "%s: cannot create %s: %s", fn, a->path, strerror(e));
		goto fail;
	}
	uint64_t page;
	enum tn_arena_backing backing = backing_of(a->fd, a->path, &page);
	if ((o.flags & TN_ARENA_REQUIRE_HUGEPAGES) && backing != TN_ARENA_BACKING_HUGETLBFS &&
	    backing != TN_ARENA_BACKING_TMPFS_HUGE) {
		r = tn__error(TN_ENOTSUP, "%s: no huge pages for %s (no hugetlbfs or huge tmpfs "
			      "mount, and shared memory's transparent huge pages are off)", fn,
			      a->path);
		goto fail_unlink;
	}
	a->size = round_up(o.size, page > ARENA_DATA_ALIGN ? page : ARENA_DATA_ALIGN);
	if (ftruncate(a->fd, (off_t)a->size) != 0) {
		int e = errno;
		r = tn__error(e == EFBIG || e == ENOSPC ? TN_ENOSPC : TN_EIO,
			      "%s: cannot size %s to %" PRIu64 " bytes: %s", fn, a->path, a->size,
			      strerror(e));
		goto fail_unlink;
	}
	/* hugetlbfs reserves a shared mapping's pages when it is made: raise the pool first. */
	if (backing == TN_ARENA_BACKING_HUGETLBFS && (o.flags & TN_ARENA_RESERVE_HUGEPAGES) &&
	    geteuid() == 0)
		reserve_hugepages(a->size / page);
	void *p = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		r = backing == TN_ARENA_BACKING_HUGETLBFS && e == ENOMEM
			    ? tn__error(TN_ENOSPC, "%s: not enough free huge pages for %" PRIu64
					" bytes in %s (vm.nr_hugepages; TN_ARENA_RESERVE_HUGEPAGES "
					"raises it as root)", fn, a->size, a->path)
			    : tn__error(TN_ENOMEM, "%s: cannot map %s: %s", fn, a->path, strerror(e));
		goto fail_unlink;
	}
	a->base = p;
	a->hdr = p;
	/* Placement is a property of the shared file's pages: set it on the mapping before
	 * fallocate allocates them. */
	if (o.numa_policy != TN_NUMA_DEFAULT &&
	    (r = tn__numa_apply(p, a->size, (int)o.numa_policy, o.numa_nodes, false)) < 0) {
		r = tn__error(r == -EINVAL ? TN_EINVAL : TN_EIO, "%s: NUMA placement failed: %s",
			      fn, strerror(-r));
		goto fail_unlink;
	}
	/* Allocate every page now, so that a full file system is an error here and not a
	 * SIGBUS at the first touch of some page later. */
	int fr = fallocate(a->fd, 0, 0, (off_t)a->size) ? errno : 0;
	if (fr == EOPNOTSUPP) {
		/* Without fallocate nothing guarantees the pages exist, and a later first touch
		 * could raise SIGBUS: refuse. */
		r = tn__error(TN_ENOTSUP, "%s: %s cannot preallocate (no fallocate)", fn, a->path);
		goto fail_unlink;
	}
	if (fr) {
		r = tn__error(fr == ENOSPC ? TN_ENOSPC : TN_EIO,
			      "%s: cannot allocate %" PRIu64 " bytes for %s: %s%s", fn, a->size,
			      a->path, strerror(fr),
			      backing == TN_ARENA_BACKING_HUGETLBFS ? " (not enough huge pages)" : "");
		goto fail_unlink;
	}
	if ((r = format(a, &o, backing, page)))
		goto fail_unlink;
	munmap(a->base, a->size);
	a->base = NULL;
	if ((r = map_file(a, fn, false)) || (r = take_slot(a)))
		goto fail_unlink;
	errno = saved;
	*ret = a;
	return 0;
fail_unlink:
	unlink(a->path);
fail:
	destroy_handle(a);
	errno = saved;
	return r;
}

static int attach(tn_arena *a, const char *fn, tn_arena **ret)
{
	int r;
	if ((r = map_file(a, fn, false)) || (r = take_slot(a))) {
		destroy_handle(a);
		return r;
	}
	*ret = a;
	return 0;
}

static int resolve(const char *name, const char *dir, char *path, size_t len, const char *fn)
{
	int r;
	if ((r = check_file_name(name, fn)))
		return r;
	if (dir)
		return make_path(path, len, dir, name, fn);
	char hd[4096];
	enum tn_arena_backing b;
	if (find_huge_dir(hd, sizeof(hd), &b) && !make_path(path, len, hd, name, fn) &&
	    access(path, F_OK) == 0)
		return 0;
	return make_path(path, len, "/dev/shm", name, fn);
}

TN_EXPORT int tn_arena_open(const char *name, const char *dir, tn_arena **ret)
{
	static const char fn[] = "tn_arena_open";
	int r, saved = errno;
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_arena", fn);
	tn_arena *a = new_handle();
	if (!a)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	if ((r = resolve(name, dir, a->path, sizeof(a->path), fn))) {
		destroy_handle(a);
		return r;
	}
	a->fd = open(a->path, O_RDWR | O_CLOEXEC);
	if (a->fd < 0) {
		int e = errno;
		errno = saved;
		r = tn__error(e == ENOENT ? TN_ENOENT : e == EACCES ? TN_EPERM : TN_EIO,
			      "%s: cannot open %s: %s", fn, a->path, strerror(e));
		destroy_handle(a);
		return r;
	}
	r = attach(a, fn, ret);
	errno = saved;
	return r;
}

/* A new handle over a duplicate of @fd, named by the file's path. */
static int handle_for_fd(int fd, const char *fn, tn_arena **ret)
{
	int saved = errno;
	tn_arena *a = new_handle();
	if (!a)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	snprintf(a->path, sizeof(a->path), "fd:%d", fd);
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, a->path, sizeof(a->path) - 1);
	if (n > 0)
		a->path[n] = 0;
	a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (a->fd < 0) {
		int e = errno;
		errno = saved;
		destroy_handle(a);
		return tn__error(e == EBADF ? TN_EBADF : TN_EIO, "%s: fd %d: %s", fn, fd,
				 strerror(e));
	}
	errno = saved;
	*ret = a;
	return 0;
}

TN_EXPORT int tn_arena_attach_fd(int fd, tn_arena **ret)
{
	static const char fn[] = "tn_arena_attach_fd";
	int saved = errno;
	if (!ret || fd < 0)
		return tn__error(TN_EINVAL, "%s: %s", fn, ret ? "negative fd" : "NULL ret_arena");
	tn_arena *a;
	int r = handle_for_fd(fd, fn, &a);
	if (r)
		return r;
	r = attach(a, fn, ret);
	errno = saved;
	return r;
}

int tn__arena_attach_slot(int fd, int slot, unsigned flags, const struct tn__arena_remote *remote,
			  tn_arena **ret)
{
	static const char fn[] = "tn__arena_attach_slot";
	bool ro = flags & TN__ATTACH_READ_ONLY;
	int saved = errno;
	if (!ret || fd < 0)
		return tn__error(TN_EINVAL, "%s: %s", fn, ret ? "negative fd" : "NULL ret_arena");
	if (flags & ~TN__ATTACH_READ_ONLY)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (slot < 0 || slot >= TN_ARENA_MAX_CLIENTS)
		return tn__error(TN_EINVAL, "%s: slot %d outside [0, %d)", fn, slot,
				 TN_ARENA_MAX_CLIENTS);
	if (ro && (!remote || !remote->hold || !remote->release))
		return tn__error(TN_EINVAL, "%s: a read-only attachment needs remote hold and "
				 "release", fn);
	tn_arena *a;
	int r = handle_for_fd(fd, fn, &a);
	if (r)
		return r;
	a->read_only = ro;
	if ((r = map_file(a, fn, false)))
		goto fail;
	/* The daemon wrote the record before it passed us the fd. Read once: another process
	 * may write it. */
	const volatile struct client_rec *c = tn__client_at(a, slot);
	uint64_t state = c->state_gen, start = c->start_time;
	int64_t pid = c->pid;
	if ((uint32_t)state != CLIENT_ATTACHED || pid != getpid() ||
	    start != tn__proc_start_time(getpid())) {
		r = tn__error(TN_EPERM, "%s: slot %d of arena %s is not assigned to this process "
			      "(pid %d)", fn, slot, a->path, (int)getpid());
		goto fail;
	}
	a->slot = slot;
	/* Only now: a failed attachment never calls the caller's detach. */
	if (remote) {
		a->remote = *remote;
		a->has_remote = true;
	}
	errno = saved;
	*ret = a;
	return 0;
fail:
	destroy_handle(a);
	errno = saved;
	return r;
}

TN_EXPORT tn_arena *tn_arena_ref(tn_arena *a)
{
	if (!tn__arena_ok(a))
		return NULL;
	atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
	return a;
}

TN_EXPORT tn_arena *tn_arena_unref(tn_arena *a)
{
	if (!tn__arena_ok(a))
		return NULL;
	if (atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) != 1)
		return NULL;
	if (a->read_only) {
		/* Every local hold keeps a reference, so none is left unless a storage was
		 * leaked past its arena; give back whatever the daemon still holds for us. */
		for (size_t i = 0; i < a->holds_cap; i++)
			if (a->holds[i].block)
				a->remote.release(a->remote.ctx, a->holds[i].block);
	} else if (a->slot >= 0 && tn__arena_lock(a) == 0) {
		/* No storage of ours is left, so no hold: release the slot (dropping any hold
		 * bit a raw allocation that was never freed still has). */
		tn__reclaim_locked(a, a->slot);
		tn__arena_unlock(a);
	}
	struct tn__arena_remote remote = a->remote;
	bool has_remote = a->has_remote;
	int slot = a->slot;
	destroy_handle(a);
	if (has_remote && remote.detach)
		remote.detach(remote.ctx, slot);
	return NULL;
}

TN_EXPORT int tn_arena_destroy(const char *name, const char *dir, unsigned flags)
{
	static const char fn[] = "tn_arena_destroy";
	char path[4096];
	int r;
	if (flags & ~TN_ARENA_FORCE)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if ((r = resolve(name, dir, path, sizeof(path), fn)))
		return r;
	if (!(flags & TN_ARENA_FORCE)) {
		tn_arena *a;
		/* Attach to count the live clients; a file that is not an arena may go. */
		r = tn_arena_open(name, dir, &a);
		/* Only an arena known to be idle, or a file that is no arena, goes: a full client
		 * table (TN_EBUSY) or a broken lock says nothing about who still uses it. */
		if (r && r != TN_EINVAL)
			return r;
		if (r == 0) {
			int busy = 0, pid = getpid();
			if ((r = tn__arena_lock(a))) {
				tn_arena_unref(a);
				return r;
			}
			for (int i = 0; i < (int)a->max_clients; i++) {
				struct client_rec *c = tn__client_at(a, i);
				if (i != a->slot && c->pid != pid && tn__client_alive(c))
					busy++;
			}
			tn__arena_unlock(a);
			tn_arena_unref(a);
			if (busy)
				return tn__error(TN_EBUSY, "%s: %d other processes are attached to "
						 "%s (TN_ARENA_FORCE destroys it anyway)", fn, busy,
						 path);
		}
	}
	int saved = errno;
	if (unlink(path) != 0) {
		int e = errno;
		errno = saved;
		return tn__error(e == ENOENT ? TN_ENOENT : e == EACCES ? TN_EPERM : TN_EIO,
				 "%s: cannot remove %s: %s", fn, path, strerror(e));
	}
	return 0;
}

TN_EXPORT const char *tn_arena_path(const tn_arena *a)
{
	return tn__arena_ok(a) ? a->path : NULL;
}

TN_EXPORT int tn_arena_fd(const tn_arena *a)
{
	return tn__arena_ok(a) ? a->fd : TN_EBADF;
}

TN_EXPORT int tn_arena_slot(const tn_arena *a)
{
	return tn__arena_ok(a) ? a->slot : TN_EBADF;
}

TN_EXPORT int tn_arena_place(tn_arena *a, void *ptr, enum tn_numa_policy policy, uint64_t nodes)
{
	static const char fn[] = "tn_arena_place";
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (a->read_only)
		return tn__read_only_error(a, fn);
	uint64_t off = tn__arena_block_of(a, ptr, NULL);
	if (!off || !tn__block_sane(a, off) ||
	    tn__block_magic(tn__block_at(a, off)) != BLOCK_MAGIC_USED)
		return tn__error(TN_EBADF, "%s: %p is not an allocated block of arena %s", fn, ptr,
				 a->path);
	if ((unsigned)policy > TN_NUMA_LOCAL)
		return tn__error(TN_EINVAL, "%s: unknown NUMA policy %d", fn, (int)policy);
	int count = tn__numa_node_count();
	if (count < 64 && nodes >> count)
		return tn__error(TN_ERANGE, "%s: node mask 0x%" PRIx64 " names nodes this machine "
				 "lacks (it has %d)", fn, nodes, count);
	uint64_t start = off + BLOCK_HDR, len = tn__block_at(a, off)->size - BLOCK_HDR;
	uint64_t page = a->page_size;
	if (start % page || len % page)
		return tn__error(TN_EINVAL, "%s: the block at %p (%" PRIu64 " bytes) shares pages "
				 "with other blocks; blocks of 64 KiB or more can be placed", fn, ptr,
				 len);
	int r = tn__numa_apply(a->base + start, len, (int)policy, nodes, true);
	if (r == -EINVAL)
		return tn__error(TN_EINVAL, "%s: policy %d needs a non-empty node mask", fn,
				 (int)policy);
	if (r)
		return tn__error(TN_EIO, "%s: mbind: %s", fn, strerror(-r));
	return 0;
}

TN_EXPORT int64_t tn_arena_residency(tn_arena *a, uint64_t *ret_pages, int nnodes)
{
	static const char fn[] = "tn_arena_residency";
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (nnodes < 0 || (nnodes && !ret_pages))
		return tn__error(TN_EINVAL, "%s: %d nodes, ret_pages %p", fn, nnodes,
				 (void *)ret_pages);
	/* move_pages sees only pages mapped into this process: map them all first (the file's
	 * pages all exist since fallocate, so this allocates nothing). */
	uint8_t *data = a->base + a->data_off;
	int saved = errno;
#ifdef MADV_POPULATE_READ
	if (madvise(data, a->data_size, MADV_POPULATE_READ) != 0)
#endif
		for (uint64_t i = 0; i < a->data_size; i += a->page_size)
			(void)*(volatile uint8_t *)(data + i);
	errno = saved;
	int64_t n = tn__numa_residency(data, a->data_size, a->page_size, ret_pages,
				       nnodes);
	if (n < 0)
		return tn__error(TN_EIO, "%s: move_pages: %s", fn, strerror((int)-n));
	return n;
}
