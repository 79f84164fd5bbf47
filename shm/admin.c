/* SPDX-License-Identifier: MIT */
/*
 * Looking after an arena: statistics, the client table, reclaiming what dead processes held,
 * and fsck, which checks every invariant and mends what it can.
 *
 * Reclaiming walks the heap block by block, committing after each block, so it needs no
 * more undo log than one free does; a reclaimer killed half way leaves a consistent arena
 * with the slot still attached, and the next reclaim finishes the job.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena_internal.h"

static uint64_t data_end(const tn_arena *a)
{
	return a->data_off + a->data_size;
}

/* The offset to visit after @off once @off may have been freed and merged with its next. */
static uint64_t next_visit(const tn_arena *a, uint64_t off)
{
	uint64_t n = off + tn__block_at(a, off)->size;
	if (n < data_end(a) && tn__block_sane(a, n) &&
	    tn__block_magic(tn__block_at(a, n)) == BLOCK_MAGIC_FREE)
		n += tn__block_at(a, n)->size;
	return n;
}


int tn__reclaim_locked(tn_arena *a, int slot)
{
	struct arena_header *h = a->hdr;
	int freed = 0;
	for (uint64_t off = a->data_off; off < data_end(a);) {
		if (!tn__block_sane(a, off))
			return tn__arena_damaged(a, DAMAGE_BLOCK, off);
		struct block *b = tn__block_at(a, off);
		uint64_t next = next_visit(a, off);
		if (tn__block_magic(b) == BLOCK_MAGIC_USED && tn__hold_has(b, slot)) {
			tn__hold_set(a, b, slot, false);
			if (tn__holds_none(b) && !(b->gen_pins >> 32)) {
				int r = tn__heap_free_block(a, off);
				if (r)
					return r;
				freed++;
			}
			tn__tx_commit(a);
		}
		off = next;
	}
	struct client_rec *c = tn__client_at(a, slot);
	if ((uint32_t)c->state_gen == CLIENT_ATTACHED) {
		tn__tx_set(a, &c->state_gen, c->state_gen >> 32 << 32 | CLIENT_FREE);
		tn__tx_set(a, &h->clients, h->clients - 1);
		if (slot != a->slot)
			tn__tx_set(a, &h->reclaimed_slots, h->reclaimed_slots + 1);
		tn__tx_commit(a);
	}
	tn__arena_waiter_clear(a, slot);
	return freed;
}

TN_EXPORT int tn_arena_reclaim(tn_arena *a, int slot)
{
	int r = tn__arena_check(a, true, "tn_arena_reclaim");
	if (r)
		return r;
	if (slot < 0 || slot >= (int)a->max_clients)
		return tn__error(TN_EINVAL, "tn_arena_reclaim: slot %d outside [0, %u)", slot,
				 a->max_clients);
	if (slot == a->slot)
		return tn__error(TN_EINVAL, "tn_arena_reclaim: slot %d is the caller's own", slot);
	if ((r = tn__arena_lock(a)))
		return r;
	struct client_rec *c = tn__client_at(a, slot);
	if (tn__client_alive(c)) {
		tn__arena_unlock(a);
		return tn__error(TN_EBUSY, "tn_arena_reclaim: slot %d belongs to process %lld, "
				 "which is alive", slot, (long long)c->pid);
	}
	r = tn__reclaim_locked(a, slot);
	tn__arena_unlock(a);
	return r;
}

TN_EXPORT int tn_arena_reclaim_dead(tn_arena *a)
{
	int r = tn__arena_check(a, true, "tn_arena_reclaim_dead"), n = 0;
	if (r || (r = tn__arena_lock(a)))
		return r;
	for (int i = 0; i < (int)a->max_clients; i++) {
		struct client_rec *c = tn__client_at(a, i);
		if (i == a->slot || (uint32_t)c->state_gen != CLIENT_ATTACHED || tn__client_alive(c))
			continue;
		if ((r = tn__reclaim_locked(a, i)) < 0)
			break;
		n++;
	}
	tn__arena_unlock(a);
	return r < 0 ? r : n;
}

/* Usable bytes of the largest free block: the highest non-empty bin holds it. */
uint64_t tn__largest_free(const tn_arena *a)
{
	const struct arena_header *h = a->hdr;
	if (!h->fl_bitmap)
		return 0;
	unsigned fl = 63u - (unsigned)__builtin_clzll(h->fl_bitmap);
	if (fl >= FL_COUNT || !h->sl_bitmap[fl])
		return 0;
	unsigned sl = 63u - (unsigned)__builtin_clzll(h->sl_bitmap[fl]);
	uint64_t best = 0;
	uint64_t n = 0, most = h->free_blocks;
	/* No list is longer than the heap has room for blocks, whatever the counter says (a
	 * reader without the lock may see a torn one). */
	if (most > a->data_size / BLOCK_MIN)
		most = a->data_size / BLOCK_MIN;
	for (uint64_t off = h->bins[fl][sl % SL_COUNT]; off && n++ < most;) {
		if (!tn__block_sane(a, off))
			break;
		uint64_t s = tn__block_at(a, off)->size;
		if (s > best)
			best = s;
		off = ((const struct free_links *)(a->base + off + BLOCK_HDR))->next;
	}
	return best ? best - BLOCK_HDR : 0;
}

/* The figures as they are now (under the lock, or one try of stat_unlocked). */
static void stat_read(const tn_arena *a, tn_arena_stats *ret)
{
	const struct arena_header *h = a->hdr;
	tn_arena_stats s = {
		.size = h->size,
		.page_size = a->page_size,
		.backing = (enum tn_arena_backing)h->backing,
		.numa_policy = (enum tn_numa_policy)h->numa_policy,
		.numa_nodes = h->numa_nodes,
		.heap_bytes = a->data_size,
		.used_bytes = h->used_bytes,
		.free_bytes = h->free_bytes,
		.largest_free = tn__largest_free(a),
		.blocks = h->blocks,
		.free_blocks = h->free_blocks,
		.names = h->names,
		.max_names = a->max_names,
		.clients = h->clients,
		.num_allocs = h->num_allocs,
		.num_frees = h->num_frees,
		.lock_repairs = h->lock_repairs,
		.reclaimed_slots = h->reclaimed_slots,
		.evictions = h->evictions,
		.evicted_bytes = h->evicted_bytes,
		.spill = h->spill_mode != 0,
		.spilled_names = h->spilled_names,
		.spilled_bytes = h->spilled_bytes,
		.spills = h->spills,
		.spilled_total = h->spilled_total,
		.restores = h->restores,
		.restore_failures = h->restore_failures,
		.held_bytes = UINT64_MAX,
		.pinned_bytes = UINT64_MAX,
		.evictable_bytes = UINT64_MAX,
	};
	tn__arena_watermarks(a, &s.high_water, &s.low_water);
	for (int i = 0; i < HOLD_WORDS; i++)
		s.waiters += (uint64_t)__builtin_popcountll(atomic_load(&h->waiters[i]));
	memcpy(s.uuid, a->uuid, sizeof(s.uuid));
	*ret = s;
}

/*
 * A read-only handle never takes the lock: it reads while no change is under way (the undo
 * log is empty) and believes a reading only when no allocation or free happened across it
 * (both counters change inside every one, and the log was empty before and after), so that
 * used_bytes and free_bytes belong together. TN_EBUSY when the heap changed under each of
 * 1000 tries.
 */
static int stat_unlocked(const tn_arena *a, tn_arena_stats *ret)
{
	const struct arena_header *h = a->hdr;
	tn_arena_stats s;
	for (int i = 0; i < 1000; i++) {
		if (tn__quiet_undo(a) == 0) {
			uint64_t na = *(const volatile uint64_t *)&h->num_allocs;
			uint64_t nf = *(const volatile uint64_t *)&h->num_frees;
			atomic_thread_fence(memory_order_acquire);
			stat_read(a, &s);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(&h->undo_count, memory_order_acquire) == 0 &&
			    *(const volatile uint64_t *)&h->num_allocs == na &&
			    *(const volatile uint64_t *)&h->num_frees == nf &&
			    s.num_allocs == na && s.num_frees == nf) {
				*ret = s;
				return 0;
			}
		}
		sched_yield();
	}
	return tn__error(TN_EBUSY, "tn_arena_stat: arena %s changed under each of 1000 readings "
			 "(a read-only handle reads without the lock)", a->path);
}

TN_EXPORT int tn_arena_stat(tn_arena *a, tn_arena_stats *ret)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "tn_arena_stat: not an arena handle of this process");
	if (!ret)
		return tn__error(TN_EINVAL, "tn_arena_stat: NULL ret_stats");
	if (a->read_only)
		return stat_unlocked(a, ret);
	/* Counters and bitmaps only: a damaged arena's figures are shown too. */
	int r = tn__arena_lock_any(a);
	if (r)
		return r;
	stat_read(a, ret);
	/* The directory's figures are a walk of it: a damaged arena reports none. */
	if (!a->hdr->damage &&
	    (r = tn__arena_figures_locked(a, &ret->pinned_bytes, &ret->held_bytes,
					  &ret->evictable_bytes))) {
		tn__arena_unlock(a);
		return r;
	}
	tn__arena_unlock(a);
	return 0;
}

TN_EXPORT int tn_arena_clients(tn_arena *a, tn_arena_client *ret, size_t capacity)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "tn_arena_clients: not an arena handle of this process");
	if (!ret && capacity)
		return tn__error(TN_EINVAL, "tn_arena_clients: NULL ret_clients");
	uint64_t blocks[TN_ARENA_MAX_CLIENTS] = { 0 }, bytes[TN_ARENA_MAX_CLIENTS] = { 0 };
	/* Reads validated headers only: a damaged arena's clients are listed too. */
	int r = a->read_only ? (tn__quiet_undo(a), 0) : tn__arena_lock_any(a), n = 0;
	if (r)
		return r;
	for (uint64_t off = a->data_off; off < data_end(a);) {
		if (!tn__block_sane(a, off))
			break;
		const struct block *b = tn__block_at(a, off);
		/* Read once: without the lock (a read-only handle) it may change under us. */
		uint64_t size = *(const volatile uint64_t *)&b->size;
		if (size < BLOCK_MIN)
			break;
		if (tn__block_magic(b) == BLOCK_MAGIC_USED)
			for (int s = 0; s < TN_ARENA_MAX_CLIENTS; s++)
				if (tn__hold_has(b, s)) {
					blocks[s]++;
					bytes[s] += size - BLOCK_HDR;
				}
		off += size;
	}
	for (int i = 0; i < (int)a->max_clients; i++) {
		const struct client_rec *c = tn__client_at(a, i);
		if ((uint32_t)c->state_gen != CLIENT_ATTACHED)
			continue;
		if ((size_t)n < capacity)
			ret[n] = (tn_arena_client){ .slot = i,
						    .pid = (int32_t)c->pid,
						    .alive = tn__client_alive(c),
						    .start_time = c->start_time,
						    .held_blocks = blocks[i],
						    .held_bytes = bytes[i],
						    .lookups = c->lookups };
		n++;
	}
	if (!a->read_only)
		tn__arena_unlock(a);
	return n;
}

/* ---- fsck -------------------------------------------------------------------------------------- */

struct fsck {
	tn_arena *a;
	tn_arena_fsck_report rep;
	bool repair;
};

static void problem(struct fsck *f, bool mended, const char *fmt, ...) TN_PRINTF(3, 4);
static void problem(struct fsck *f, bool mended, const char *fmt, ...)
{
	if (!f->rep.problems++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(f->rep.first_problem, sizeof(f->rep.first_problem), fmt, ap);
		va_end(ap);
	}
	if (mended)
		f->rep.repaired++;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Directory entries: each must point at an allocated block of the generation it recorded
 * and fit in it. Collects the blocks of good entries (sorted) for the pin check. */
static int fsck_directory(struct fsck *f, uint64_t **ret_blocks, size_t *ret_n)
{
	tn_arena *a = f->a;
	struct arena_header *h = a->hdr;
	uint64_t *blocks = malloc(((size_t)a->dir_slots + 1) * sizeof(*blocks));
	size_t n = 0;
	uint64_t names = 0, tombs = 0, spilled = 0, spilled_bytes = 0;
	if (!blocks)
		return tn__error(TN_ENOMEM, "tn_arena_fsck: out of memory");
	for (uint32_t i = 0; i < a->dir_slots; i++) {
		struct dir_entry copy, *e = tn__entry_at(a, i);
		if (a->read_only) {
			/* Without the lock: checked on a copy (the repairs below need the lock). */
			tn__entry_snapshot(a, i, &copy);
			e = &copy;
		}
		uint32_t st = (uint32_t)e->state_gen;
		if (st == ENTRY_TOMBSTONE)
			tombs++;
		if (st != ENTRY_USED)
			continue;
		const char *why = tn__entry_problem(a, e, NULL);
		bool ok = !why;
		if (ok && tn__entry_spilled(e)) {
			/* Its bytes are in a file: no block to check. */
			spilled++;
			spilled_bytes += tn__spilled_bytes(e);
			names++;
			continue;
		}
		if (ok) {
			blocks[n++] = e->block;
			names++;
			continue;
		}
		f->rep.bad_names++;
		problem(f, f->repair, "directory entry %u ('%.*s') is damaged (%s)", i,
			(int)(e->name_len <= TN_ARENA_NAME_MAX ? e->name_len : 0), e->name, why);
		if (f->repair) {
			tn__tx_set(a, &e->state_gen, e->state_gen >> 32 << 32 | ENTRY_TOMBSTONE);
			tn__tx_commit(a);
			tombs++;
		}
	}
	if (names != h->names || tombs != h->tombstones) {
		problem(f, f->repair, "directory counts %" PRIu64 " names, %" PRIu64
			" deleted; the header says %" PRIu64 ", %" PRIu64, names, tombs, h->names,
			h->tombstones);
		if (f->repair) {
			tn__tx_set(a, &h->names, names);
			tn__tx_set(a, &h->tombstones, tombs);
			tn__tx_commit(a);
		}
	}
	if (spilled != h->spilled_names || spilled_bytes != h->spilled_bytes) {
		problem(f, f->repair, "directory has %" PRIu64 " spilled names of %" PRIu64
			" bytes; the header says %" PRIu64 ", %" PRIu64, spilled, spilled_bytes,
			h->spilled_names, h->spilled_bytes);
		if (f->repair) {
			tn__tx_set(a, &h->spilled_names, spilled);
			tn__tx_set(a, &h->spilled_bytes, spilled_bytes);
			tn__tx_commit(a);
		}
	}
	qsort(blocks, n, sizeof(*blocks), cmp_u64);
	*ret_blocks = blocks;
	*ret_n = n;
	return 0;
}

static uint64_t count_in(const uint64_t *v, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t c = 0;
	while (lo < n && v[lo++] == key)
		c++;
	return c;
}

/* Blocks: holds of attached slots only, pins matching the directory, no orphans. */
static int fsck_blocks(struct fsck *f, const uint64_t *named, size_t nnamed)
{
	tn_arena *a = f->a;
	uint64_t attached[HOLD_WORDS] = { 0 };
	for (int s = 0; s < (int)a->max_clients; s++)
		if ((uint32_t)tn__client_at(a, s)->state_gen == CLIENT_ATTACHED)
			attached[s / 64] |= UINT64_C(1) << (s % 64);
	for (uint64_t off = a->data_off; off < data_end(a);) {
		if (!tn__block_sane(a, off)) {
			problem(f, false, "block at offset %" PRIu64 " has a bad header", off);
			return TN_EIO;
		}
		struct block *b = tn__block_at(a, off);
		uint64_t next = next_visit(a, off);
		if (tn__block_magic(b) != BLOCK_MAGIC_USED) {
			off = next;
			continue;
		}
		for (int w = 0; w < HOLD_WORDS; w++) {
			uint64_t dead = b->holders[w] & ~attached[w];
			if (!dead)
				continue;
			f->rep.dead_holds += (uint64_t)__builtin_popcountll(dead);
			problem(f, f->repair, "block at %" PRIu64 " is held by unattached slots",
				off);
			if (f->repair)
				tn__tx_set(a, &b->holders[w], b->holders[w] & attached[w]);
		}
		uint64_t pins = count_in(named, nnamed, off);
		if ((b->gen_pins >> 32) != pins) {
			problem(f, f->repair, "block at %" PRIu64 " has %" PRIu64
				" pins for %" PRIu64 " names", off, b->gen_pins >> 32, pins);
			if (f->repair)
				tn__tx_set(a, &b->gen_pins, (uint32_t)b->gen_pins | pins << 32);
		}
		if (tn__holds_none(b) && !(b->gen_pins >> 32) && !pins) {
			f->rep.orphan_blocks++;
			problem(f, f->repair, "block at %" PRIu64 " is held and named by nobody",
				off);
			if (f->repair) {
				int r = tn__heap_free_block(a, off);
				if (r)
					return r;
			}
		}
		if (f->repair)
			tn__tx_commit(a);
		off = next;
	}
	return 0;
}

/* The tiling, the boundary tags, the free lists, the bitmaps and the counters. */
static int fsck_heap(struct fsck *f)
{
	tn_arena *a = f->a;
	struct arena_header *h = a->hdr;
	uint64_t used = 0, freeb = 0, blocks = 0, free_blocks = 0, prev_size = 0;
	bool prev_free = false, lists_bad = false;

	f->rep.blocks = f->rep.free_blocks = 0;
	for (uint64_t off = a->data_off; off < data_end(a);) {
		if (!tn__block_sane(a, off)) {
			problem(f, false, "block at offset %" PRIu64 " has a bad header", off);
			return TN_EIO;
		}
		struct block *b = tn__block_at(a, off);
		bool is_free = tn__block_magic(b) == BLOCK_MAGIC_FREE;
		/* Read once: without the lock (a read-only handle) it may change under us. */
		uint64_t size = *(const volatile uint64_t *)&b->size;
		if (size < BLOCK_MIN) {
			problem(f, false, "block at offset %" PRIu64 " has a bad header", off);
			return TN_EIO;
		}
		if (b->prev_size != prev_size) {
			problem(f, f->repair, "block at %" PRIu64 " records a previous size of %" PRIu64
				", not %" PRIu64, off, b->prev_size, prev_size);
			if (f->repair) {
				tn__tx_set(a, &b->prev_size, prev_size);
				tn__tx_commit(a);
			}
		}
		if (is_free && prev_free)
			problem(f, false, "free blocks adjacent at %" PRIu64, off);
		if (is_free) {
			freeb += size;
			free_blocks++;
		} else {
			used += size;
			blocks++;
		}
		prev_free = is_free;
		prev_size = size;
		off += size;
	}
	f->rep.blocks = blocks + free_blocks;
	f->rep.free_blocks = free_blocks;

	/* Every listed block is free, in the right bin, linked both ways, and all are listed. */
	uint64_t listed = 0;
	for (unsigned fl = 0; fl < FL_COUNT && !lists_bad; fl++) {
		for (unsigned sl = 0; sl < SL_COUNT && !lists_bad; sl++) {
			uint64_t prev = 0, off = h->bins[fl][sl];
			bool bit = h->sl_bitmap[fl] >> sl & 1;
			if (bit != (off != 0) || (off && !(h->fl_bitmap >> fl & 1)))
				lists_bad = true;
			while (off && !lists_bad) {
				/* Nothing of a block is read before it is known to be one, and the
				 * walk stops at the first bad link or past the free-block count. */
				if (!tn__block_sane(a, off)) {
					lists_bad = true;
					break;
				}
				struct block *b = tn__block_at(a, off);
				const struct free_links *l = (const struct free_links *)(a->base + off +
											   BLOCK_HDR);
				/* Read once: it may change under a reader without the lock. */
				uint64_t bsize = *(const volatile uint64_t *)&b->size;
				unsigned bfl = 63u - (unsigned)__builtin_clzll(bsize | BLOCK_MIN);
				if (tn__block_magic(b) != BLOCK_MAGIC_FREE || bfl != fl ||
				    ((bsize >> (bfl - SL_LOG)) & (SL_COUNT - 1)) != sl ||
				    l->prev != prev || ++listed > free_blocks) {
					lists_bad = true;
					break;
				}
				prev = off;
				off = l->next;
			}
		}
	}
	if (!lists_bad && listed != free_blocks)
		lists_bad = true;
	if (lists_bad) {
		problem(f, f->repair, "the free lists do not match the free blocks");
		if (f->repair)
			tn__rebuild_free_lists(a);
	}
	if (used != h->used_bytes || freeb != h->free_bytes || blocks != h->blocks ||
	    free_blocks != h->free_blocks) {
		problem(f, f->repair, "heap counters (%" PRIu64 " used bytes in %" PRIu64
			" blocks) differ from the blocks (%" PRIu64 " in %" PRIu64 ")",
			h->used_bytes, h->blocks, used, blocks);
		if (f->repair) {
			tn__tx_set(a, &h->used_bytes, used);
			tn__tx_set(a, &h->free_bytes, freeb);
			tn__tx_set(a, &h->blocks, blocks);
			tn__tx_set(a, &h->free_blocks, free_blocks);
			tn__tx_commit(a);
		}
	}
	return 0;
}

/* One pass of every check (and repair); under the lock, or without it and repairing nothing
 * for a read-only handle. */
static int fsck_pass(struct fsck *f)
{
	tn_arena *a = f->a;
	int r;
	/* Outside a change the undo log is empty (taking the lock rolled back a dead holder's).
	 * Without the lock, a change may well be under way. */
	uint64_t pending = atomic_load_explicit(&a->hdr->undo_count, memory_order_acquire);
	if (pending && !a->read_only) {
		problem(f, f->repair, "the undo log holds %" PRIu64 " records outside a change",
			pending);
		if (f->repair)
			atomic_store_explicit(&a->hdr->undo_count, 0, memory_order_release);
	}
	uint64_t damage = *(volatile uint64_t *)&a->hdr->damage;
	if (damage) {
		/* Counted as mended at the end, once everything else is. */
		problem(f, false, "the arena is marked damaged (%s at offset %" PRIu64 ")",
			damage == DAMAGE_FREE_LIST ? "a free list"
			: damage == DAMAGE_BLOCK   ? "a block header"
						   : "its metadata",
			a->hdr->damage_off);
	}
	/* The heap first: reclaiming dead clients' blocks below follows the free lists. */
	if ((r = fsck_heap(f)))
		return r;
	/* Clients whose process is gone. */
	uint64_t clients = 0;
	for (int i = 0; i < (int)a->max_clients; i++) {
		struct client_rec *c = tn__client_at(a, i);
		if ((uint32_t)c->state_gen != CLIENT_ATTACHED)
			continue;
		if (i != a->slot && !tn__client_alive(c)) {
			f->rep.dead_clients++;
			problem(f, f->repair, "slot %d belongs to process %lld, which is gone", i,
				(long long)c->pid);
			if (f->repair && tn__reclaim_locked(a, i) >= 0)
				continue; /* reclaimed: no longer attached */
		}
		clients++;
	}
	if (clients != a->hdr->clients) {
		problem(f, f->repair, "%" PRIu64 " clients attached; the header says %" PRIu64,
			clients, a->hdr->clients);
		if (f->repair) {
			tn__tx_set(a, &a->hdr->clients, clients);
			tn__tx_commit(a);
		}
	}
	uint64_t *named = NULL;
	size_t nnamed = 0;
	if (!(r = fsck_directory(f, &named, &nnamed)) && !(r = fsck_blocks(f, named, nnamed)) &&
	    f->repair)
		r = fsck_heap(f); /* the counts after the repairs above */
	free(named);
	/* Everything found is mended: the damage mark goes. */
	if (!r && damage && f->repair && f->rep.problems == f->rep.repaired + 1) {
		a->hdr->damage_off = 0;
		*(volatile uint64_t *)&a->hdr->damage = DAMAGE_NONE;
		f->rep.repaired++;
	}
	return r;
}

/*
 * Pages missing from the arena's file. Every page is allocated when the arena is made
 * (fallocate), so fewer allocated bytes than the file's size mean that a process with a
 * writable descriptor punched a hole (FALLOC_FL_PUNCH_HOLE): the range reads as zeros, and
 * the next write to it allocates a page again, which raises SIGBUS in the writer when the
 * file system is full. The allocated size is the file's block count (tmpfs counts the pages
 * fallocate reserved, which lseek's SEEK_HOLE does not tell from holes); a file system that
 * counts no blocks is not judged. A repair allocates the whole file again, which allocates
 * only what is missing (its contents stay zeros: the checks that follow judge any metadata
 * there).
 */
static void fsck_holes(struct fsck *f)
{
	tn_arena *a = f->a;
	struct stat st;
	if (fstat(a->fd, &st) || st.st_blocks <= 0)
		return;
	uint64_t have = (uint64_t)st.st_blocks * 512u;
	if (have >= a->size)
		return;
	bool mended = f->repair && fallocate(a->fd, 0, 0, (off_t)a->size) == 0;
	problem(f, mended,
		"%" PRIu64 " bytes of the file's pages are missing (a hole punched by a process "
		"with a writable descriptor: they read as zeros, and a write there can raise "
		"SIGBUS when the file system is full)%s",
		a->size - have, f->repair && !mended ? "; allocating them again failed" : "");
}

TN_EXPORT int tn_arena_fsck(tn_arena *a, unsigned flags, tn_arena_fsck_report *ret_report)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "tn_arena_fsck: not an arena handle of this process");
	if (flags & ~TN_ARENA_FSCK_REPAIR)
		return tn__error(TN_EINVAL, "tn_arena_fsck: unknown flags 0x%x", flags);
	struct fsck f = { .a = a, .repair = flags & TN_ARENA_FSCK_REPAIR };
	if (f.repair && a->read_only)
		return tn__read_only_error(a, "tn_arena_fsck");
	/* A repair rewrites what every process of the arena relies on: where tensord serves the
	 * arena, that is for its owner and root, whom the daemon tells from the socket's
	 * credentials; a read-write grantee may check, not repair. */
	if (f.repair && a->has_remote)
		return tn__error(TN_EPERM, "tn_arena_fsck: arena %s is served by tensord: its owner "
				 "or root repairs it (tensorctl fsck NAME --repair)", a->path);
	int r = tn__arena_validate(a, "tn_arena_fsck");
	if (r)
		return r;
	struct fsck holes = f;
	fsck_holes(&holes);
	if (a->read_only) {
		/* Without the lock, a change under way looks like damage: check again a few
		 * times before reporting any. */
		for (int tries = 0; tries < 4; tries++) {
			f.rep = (tn_arena_fsck_report){ 0 };
			tn__quiet_undo(a);
			r = fsck_pass(&f);
			if (!r && !f.rep.problems)
				break;
		}
	} else {
		if ((r = tn__arena_lock_any(a)))
			return r;
		r = fsck_pass(&f);
		tn__arena_unlock(a);
	}
	if (holes.rep.problems) { /* first in the report: they came first */
		if (f.rep.problems == 0 || holes.rep.first_problem[0])
			memcpy(f.rep.first_problem, holes.rep.first_problem,
			       sizeof(f.rep.first_problem));
		f.rep.problems += holes.rep.problems;
		f.rep.repaired += holes.rep.repaired;
	}
	if (ret_report)
		*ret_report = f.rep;
	if (r && r != TN_EIO)
		return r;
	if (r || f.rep.problems > f.rep.repaired)
		return tn__error(TN_EIO, "tn_arena_fsck: arena %s: %" PRIu64 " problems, %" PRIu64
				 " mended; first: %s", a->path, f.rep.problems, f.rep.repaired,
				 f.rep.first_problem);
	tn_clear_error();
	return 0;
}
