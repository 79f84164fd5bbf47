/* SPDX-License-Identifier: MIT */
/*
 * Retention and eviction: which published tensors may leave a full arena, in which order, and
 * the figures that say why an allocation failed.
 *
 * Every directory entry has a retention class in its flags (pinned, soft-pinned until a time,
 * cache) and a last-use clock that its publish and every lookup set from the coarse clock (the
 * vDSO's, no system call). An entry is evictable when it is a cache entry, or a soft pin past
 * its time, whose block no process holds and no other name shares: evicting it is its
 * unpublish, and frees the block. Evictions go least recently used first, each in a change of
 * its own, all under one taking of the lock (the candidates, gathered once, cannot change
 * meanwhile). Who evicts: tensord, when the arena's use passes its high watermark, down to the
 * low one; and an allocation that finds no free block, before it fails.
 */
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena_internal.h"

#define WATER_HIGH_PERCENT 90u
#define WATER_LOW_PERCENT 80u

void tn__arena_watermarks(const tn_arena *a, uint64_t *ret_high, uint64_t *ret_low)
{
	const struct arena_header *h = a->hdr;
	uint64_t high = h->high_water, low = h->low_water;
	if (!high || high > a->data_size)
		high = a->data_size / 100 * WATER_HIGH_PERCENT;
	if (!low || low > high)
		low = a->data_size / 100 * WATER_LOW_PERCENT;
	if (low > high)
		low = high;
	*ret_high = high;
	*ret_low = low;
}

int tn__arena_water(tn_arena *a, uint64_t *ret_used, uint64_t *ret_high, uint64_t *ret_low)
{
	int r = tn__arena_lock(a);
	if (r)
		return r;
	tn__arena_watermarks(a, ret_high, ret_low);
	*ret_used = a->hdr->used_bytes;
	tn__arena_unlock(a);
	return 0;
}

/* Whether the entry's class lets it go now (@now_s: seconds since the epoch). */
static bool class_evictable(const struct dir_entry *e, uint64_t now_s)
{
	uint32_t flags = (uint32_t)(e->block_gen_flags >> 32);
	if (flags & TN_ARENA_ENTRY_CACHE)
		return true;
	return (flags & TN_ARENA_ENTRY_SOFT_PINNED) && e->pin_until <= now_s;
}

/* Whether used entry @e may be evicted: its class allows it, its block is sound, nobody holds
 * it and no other name pins it. Sets *ret_size to the block's bytes. */
static bool evictable(const tn_arena *a, const struct dir_entry *e, uint64_t now_s,
		      uint64_t *ret_size)
{
	if ((uint32_t)e->state_gen != ENTRY_USED || tn__entry_spilled(e) ||
	    !class_evictable(e, now_s) || tn__entry_problem(a, e, NULL))
		return false;
	const struct block *b = tn__block_at(a, e->block);
	if (!tn__holds_none(b) || b->gen_pins >> 32 != 1)
		return false;
	*ret_size = b->size;
	return true;
}

struct candidate {
	uint64_t last_use;
	uint32_t index;
};

static int by_last_use(const void *x, const void *y)
{
	const struct candidate *p = x, *q = y;
	if (p->last_use != q->last_use)
		return p->last_use < q->last_use ? -1 : 1;
	return p->index < q->index ? -1 : p->index > q->index;
}

/* The evictable entries, least recently used first, in a new array (NULL and 0 for none).
 * TN_ENOMEM when the array cannot be had. */
static int gather(tn_arena *a, struct candidate **ret, size_t *ret_n)
{
	uint64_t now_s = tn__coarse_now_ns() / 1000000000u;
	size_t n = 0, cap = 0;
	struct candidate *v = NULL;
	for (uint32_t i = 0; i < a->dir_slots; i++) {
		const struct dir_entry *e = tn__entry_at(a, i);
		uint64_t size;
		if (!evictable(a, e, now_s, &size))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct candidate *nv = realloc(v, ncap * sizeof(*v));
			if (!nv) {
				free(v);
				return tn__error(TN_ENOMEM, "eviction: out of memory for %zu "
						 "candidates", ncap);
			}
			v = nv;
			cap = ncap;
		}
		v[n++] = (struct candidate){ e->last_use, i };
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), by_last_use);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Evict entry @index (checked evictable), in a change of its own. Returns the bytes freed. */
static uint64_t evict_entry(tn_arena *a, uint32_t index)
{
	struct arena_header *h = a->hdr;
	struct dir_entry *e = tn__entry_at(a, index);
	uint64_t size = tn__block_at(a, e->block)->size;
	uint64_t used = h->used_bytes;
	tn__entry_delete(a, index);
	if (tn__entry_unpin(a, e)) /* damage found: the change was undone and the arena marked */
		return 0;
	tn__counter_add(a, &h->evictions, 1);
	tn__counter_add(a, &h->evicted_bytes, (int64_t)size);
	tn__tx_commit(a);
	return used - h->used_bytes;
}

/* Under the lock: evict in LRU order while @more(a, ctx) says so (asked before each). */
static int evict_while(tn_arena *a, bool (*more)(tn_arena *, void *), void *ctx,
		       uint64_t *ret_n, uint64_t *ret_bytes)
{
	struct candidate *v = NULL;
	size_t n = 0;
	int r = gather(a, &v, &n);
	if (r)
		return r;
	uint64_t count = 0, bytes = 0;
	uint64_t now_s = tn__coarse_now_ns() / 1000000000u;
	for (size_t i = 0; i < n && more(a, ctx); i++) {
		uint64_t size;
		/* Each eviction changes only its own entry and block: the rest still hold. */
		if (!evictable(a, tn__entry_at(a, v[i].index), now_s, &size))
			continue;
		uint64_t freed = evict_entry(a, v[i].index);
		if (a->hdr->damage) {
			r = tn__arena_damage_error(a);
			break;
		}
		count++;
		bytes += freed;
	}
	free(v);
	if (ret_n)
		*ret_n = count;
	if (ret_bytes)
		*ret_bytes = bytes;
	return r;
}

static bool above(tn_arena *a, void *ctx)
{
	return a->hdr->used_bytes > *(const uint64_t *)ctx;
}

TN_EXPORT int tn_arena_evict(tn_arena *a, uint64_t target_used, tn_arena_evict_report *ret)
{
	static const char fn[] = "tn_arena_evict";
	int r;
	if ((r = tn__arena_check(a, true, fn)) || (r = tn__arena_lock(a)))
		return r;
	uint64_t n = 0, bytes = 0;
	if (a->hdr->spill_mode)
		r = tn__error(TN_ENOTSUP, "%s: arena %s spills its evicted tensors to disk: only "
			      "tensord evicts it (at its watermarks)", fn, a->path);
	else if (a->hdr->used_bytes > target_used)
		r = evict_while(a, above, &target_used, &n, &bytes);
	uint64_t used = a->hdr->used_bytes;
	tn__arena_unlock(a);
	if (ret)
		*ret = (tn_arena_evict_report){ .evicted = n, .evicted_bytes = bytes,
						.used_bytes = used };
	return r;
}

TN_EXPORT int tn_arena_set_watermarks(tn_arena *a, uint64_t high, uint64_t low)
{
	static const char fn[] = "tn_arena_set_watermarks";
	int r;
	if ((r = tn__arena_check(a, true, fn)))
		return r;
	if (!low || low > high || high > a->data_size)
		return tn__error(TN_EINVAL, "%s: the watermarks must be 0 < low (%" PRIu64 ") <= "
				 "high (%" PRIu64 ") <= the heap's %" PRIu64 " bytes", fn, low,
				 high, a->data_size);
	if ((r = tn__arena_lock(a)))
		return r;
	tn__tx_set(a, &a->hdr->high_water, high);
	tn__tx_set(a, &a->hdr->low_water, low);
	tn__tx_commit(a);
	tn__arena_unlock(a);
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
	return p < q ? -1 : p > q;
}

int tn__arena_figures_locked(tn_arena *a, uint64_t *ret_pinned, uint64_t *ret_held,
			     uint64_t *ret_evictable)
{
	uint64_t now_s = tn__coarse_now_ns() / 1000000000u;
	uint64_t evict_bytes = 0, pinned = 0;
	/* The blocks under kept names, once each however many names share them. */
	size_t n = 0, cap = a->hdr->names < a->dir_slots ? a->hdr->names : a->dir_slots;
	uint64_t *kept = cap ? malloc(cap * sizeof(*kept)) : NULL;
	if (cap && !kept)
		return tn__error(TN_ENOMEM, "tn_arena_stat: out of memory for %zu names", cap);
	for (uint32_t i = 0; i < a->dir_slots; i++) {
		const struct dir_entry *e = tn__entry_at(a, i);
		uint64_t size;
		if ((uint32_t)e->state_gen != ENTRY_USED || tn__entry_spilled(e) ||
		    tn__entry_problem(a, e, NULL))
			continue;
		if (evictable(a, e, now_s, &size))
			evict_bytes += size;
		else if (tn__holds_none(tn__block_at(a, e->block)) && n < cap)
			kept[n++] = e->block;
	}
	if (n > 1)
		qsort(kept, n, sizeof(*kept), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || kept[i] != kept[i - 1])
			pinned += tn__block_at(a, kept[i])->size;
	free(kept);
	uint64_t used = a->hdr->used_bytes;
	*ret_evictable = evict_bytes;
	*ret_pinned = pinned;
	*ret_held = used >= pinned + evict_bytes ? used - pinned - evict_bytes : 0;
	return 0;
}

/* What an allocation that failed needs, for its retries between evictions. */
struct alloc_retry {
	uint64_t need, align, off;
	int (*alloc)(tn_arena *, uint64_t, uint64_t, uint64_t *);
	bool done;
};

static bool still_missing(tn_arena *a, void *ctx)
{
	struct alloc_retry *t = ctx;
	if (t->alloc(a, t->need, t->align, &t->off) == 0)
		t->done = true;
	return !t->done;
}

int tn__evict_for_alloc_locked(tn_arena *a, uint64_t need, uint64_t align,
			       int (*alloc)(tn_arena *, uint64_t, uint64_t, uint64_t *),
			       uint64_t *ret_off)
{
	struct alloc_retry t = { .need = need, .align = align, .alloc = alloc };
	/* A spilling arena's evictions are tensord's: the caller wakes it, once the lock is
	 * released (tn__arena_spill_wait). */
	if (a->hdr->spill_mode)
		return TN_ENOMEM;
	int r = evict_while(a, still_missing, &t, NULL, NULL);
	if (r == 0 && !t.done)
		still_missing(a, &t); /* after the last eviction */
	if (r == 0 && !t.done)
		r = TN_ENOMEM;
	if (r == 0)
		*ret_off = t.off;
	return r;
}

/* ---- spilling's side of eviction (tensord's) ------------------------------------------------ */

int tn__arena_spill_candidates(tn_arena *a, uint64_t target_used, struct tn__spill_item **ret,
			       size_t *ret_n)
{
	static const char fn[] = "tn__arena_spill_candidates";
	int r;
	if ((r = tn__arena_check(a, true, fn)) || (r = tn__arena_lock(a)))
		return r;
	struct candidate *v = NULL;
	size_t n = 0, k = 0;
	struct tn__spill_item *out = NULL;
	uint64_t used = a->hdr->used_bytes;
	if (used > target_used && (r = gather(a, &v, &n)) == 0 && n) {
		out = malloc(n * sizeof(*out));
		if (!out)
			r = tn__error(TN_ENOMEM, "%s: out of memory for %zu entries", fn, n);
	}
	for (size_t i = 0; !r && i < n && used > target_used; i++) {
		const struct dir_entry *e = tn__entry_at(a, v[i].index);
		const struct block *b = tn__block_at(a, e->block);
		struct tn__spill_item *it = &out[k++];
		memset(it, 0, sizeof(*it));
		it->handle = (tn_arena_handle){ v[i].index, (uint32_t)(e->state_gen >> 32) };
		it->block = e->block;
		it->bytes = tn__spilled_bytes(e);
		it->block_size = b->size;
		it->flags = (uint32_t)(e->block_gen_flags >> 32);
		memcpy(it->name, e->name, e->name_len);
		used = used > b->size ? used - b->size : 0;
	}
	tn__arena_unlock(a);
	free(v);
	if (r) {
		free(out);
		return r;
	}
	if (!k) {
		free(out);
		out = NULL;
	}
	*ret = out;
	*ret_n = k;
	return 0;
}

int tn__arena_spill_commit(tn_arena *a, const struct tn__spill_item *it, uint64_t id)
{
	static const char fn[] = "tn__arena_spill_commit";
	int r;
	if ((r = tn__arena_check(a, true, fn)))
		return r;
	if (!id || it->handle.index >= a->dir_slots)
		return tn__error(TN_EINVAL, "%s: bad item", fn);
	if ((r = tn__arena_lock(a)))
		return r;
	struct arena_header *h = a->hdr;
	struct dir_entry *e = tn__entry_at(a, it->handle.index);
	uint64_t size;
	if ((uint32_t)(e->state_gen >> 32) != it->handle.generation || e->block != it->block ||
	    !evictable(a, e, tn__coarse_now_ns() / 1000000000u, &size)) {
		tn__arena_unlock(a);
		return tn__error(TN_EBUSY, "%s: '%s' was looked up, replaced or unpublished while it "
				 "was written out", fn, it->name);
	}
	uint64_t bytes = tn__spilled_bytes(e);
	uint32_t flags = (uint32_t)(e->block_gen_flags >> 32);
	flags = (flags & ~(uint32_t)(TN_ARENA_ENTRY_RESTORING | TN_ARENA_ENTRY_RESTORE_FAILED)) |
		TN_ARENA_ENTRY_SPILLED;
	if ((r = tn__entry_unpin(a, e)) == 0 && !h->damage) {
		tn__tx_set(a, &e->block, id);
		tn__tx_set(a, &e->block_gen_flags, (uint64_t)flags << 32);
		tn__counter_add(a, &h->evictions, 1);
		tn__counter_add(a, &h->evicted_bytes, (int64_t)size);
		tn__counter_add(a, &h->spills, 1);
		tn__counter_add(a, &h->spilled_total, (int64_t)bytes);
		tn__counter_add(a, &h->spilled_names, 1);
		tn__counter_add(a, &h->spilled_bytes, (int64_t)bytes);
		tn__tx_commit(a);
	} else if (!r) {
		r = tn__arena_damage_error(a);
	}
	tn__arena_unlock(a);
	if (r == 0) {
		/* Allocations waiting for room try again. */
		atomic_fetch_add(&h->freed_seq, 1);
		syscall(SYS_futex, (uint32_t *)&h->freed_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
	return r;
}
