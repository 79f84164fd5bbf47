/* SPDX-License-Identifier: MIT */
/*
 * An arena's heap: blocks with 64-byte headers and boundary tags tiling the data region, their
 * free lists, and allocating and freeing blocks inside a change of the undo log (txn.c).
 *
 * The heap is a two-level segregated fit allocator (TLSF: Masmano et al., 2004) over blocks
 * with boundary tags: constant-time search through two bitmap levels, immediate coalescing,
 * so no two free blocks are ever adjacent.
 */
#include <string.h>

#include "arena_internal.h"

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

/* Push a free block onto its list; false when the list's head is damaged (not a free block
 * of that bin at the front of its list), which is then neither followed nor written. */
static bool insert_free(tn_arena *a, uint64_t off)
{
	struct arena_header *h = a->hdr;
	unsigned fl, sl, hfl, hsl;
	mapping(tn__block_at(a, off)->size, &fl, &sl);
	uint64_t head = h->bins[fl][sl];
	if (head) {
		if (!tn__block_sane(a, head) ||
		    tn__block_magic(tn__block_at(a, head)) != BLOCK_MAGIC_FREE ||
		    links_at(a, head)->prev != 0)
			return false;
		mapping(tn__block_at(a, head)->size, &hfl, &hsl);
		if (hfl != fl || hsl != sl)
			return false;
	}
	struct free_links *l = links_at(a, off);
	tn__tx_set(a, &l->next, head);
	tn__tx_set(a, &l->prev, 0);
	if (head)
		tn__tx_set(a, &links_at(a, head)->prev, off);
	tn__tx_set(a, &h->bins[fl][sl], off);
	bitmap_set(a, fl, sl);
	return true;
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
static uint64_t find_good_fit(tn_arena *a, uint64_t size)
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

/*
 * A free block of at least @size bytes, or 0. The good fit rounds the request up to the next
 * sub-bin, so that any block it finds fits at once; it misses a block of the request's own
 * sub-bin that is large enough (a request of 1 GiB and 2 MiB and the only free block of 1 GiB
 * and 44 MiB: both in the sub-bin from 1 GiB to 1 GiB and 64 MiB). Before failing, that list
 * is walked (at most 256 blocks, each checked before its links are followed).
 */
static uint64_t find_free(tn_arena *a, uint64_t size)
{
	uint64_t off = find_good_fit(a, size);
	if (off)
		return off;
	unsigned fl, sl;
	if (63u - (unsigned)__builtin_clzll(size) >= FL_COUNT)
		return 0;
	mapping(size, &fl, &sl);
	if (fl >= FL_COUNT)
		return 0;
	off = a->hdr->bins[fl][sl];
	for (int n = 0; off && n < 256; n++) {
		if (!tn__block_ok(a, off))
			return 0;
		if (tn__block_at(a, off)->size >= size)
			return off;
		off = links_at(a, off)->next;
	}
	return 0;
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

/* A fresh heap (tn_arena_create's format): one free block spans it. The file is new (zero),
 * so only that block and the bins need writing, and nothing is logged. */
void tn__heap_format(tn_arena *a)
{
	struct arena_header *h = a->hdr;
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
}

int tn__heap_free_block(tn_arena *a, uint64_t off)
{
	struct arena_header *h = a->hdr;
	if (!tn__block_sane(a, off) || tn__block_magic(tn__block_at(a, off)) != BLOCK_MAGIC_USED)
		return tn__arena_damaged(a, DAMAGE_BLOCK, off);
	struct block *b = tn__block_at(a, off);
	uint64_t size = b->size, start = off, total = size;
	int64_t merged = 0;

	if (b->prev_size) {
		uint64_t p = off - b->prev_size;
		if (!tn__block_sane(a, p) || tn__block_at(a, p)->size != b->prev_size)
			goto damaged;
		if (tn__block_magic(tn__block_at(a, p)) == BLOCK_MAGIC_FREE) {
			if (!remove_free(a, p))
				return tn__arena_damaged(a, DAMAGE_FREE_LIST, p);
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
				return tn__arena_damaged(a, DAMAGE_FREE_LIST, n);
			total += tn__block_at(a, n)->size;
			merged++;
		}
	}
	struct block *s = tn__block_at(a, start);
	write_header(a, start, BLOCK_MAGIC_FREE, 0, total, s->prev_size);
	set_next_prev_size(a, start, total);
	if (!insert_free(a, start))
		return tn__arena_damaged(a, DAMAGE_FREE_LIST, start);
	tn__counter_add(a, &h->used_bytes, -(int64_t)size);
	tn__counter_add(a, &h->free_bytes, (int64_t)size);
	tn__counter_add(a, &h->blocks, -1);
	tn__counter_add(a, &h->free_blocks, 1 - merged);
	tn__counter_add(a, &h->num_frees, 1);
	return 0;
damaged:
	return tn__arena_damaged(a, DAMAGE_BLOCK, off);
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
	    tn__block_at(a, off)->size < search || !remove_free(a, off))
		return tn__arena_damaged(a, DAMAGE_FREE_LIST, off);
	uint64_t size = tn__block_at(a, off)->size, prev_size = tn__block_at(a, off)->prev_size;
	int64_t free_delta = -1;
	uint64_t free_bytes_delta = size;

	if (align > TN_ARENA_ALIGNMENT) {
		uint64_t p = tn__round_up(off + BLOCK_HDR, align);
		while (p - BLOCK_HDR - off && p - BLOCK_HDR - off < BLOCK_MIN)
			p += align;
		uint64_t gap = p - BLOCK_HDR - off;
		if (gap) {
			write_header(a, off, BLOCK_MAGIC_FREE, 0, gap, prev_size);
			if (!insert_free(a, off))
				return tn__arena_damaged(a, DAMAGE_FREE_LIST, off);
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
		if (!insert_free(a, t))
			return tn__arena_damaged(a, DAMAGE_FREE_LIST, t);
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
	tn__counter_add(a, &h->used_bytes, (int64_t)size);
	tn__counter_add(a, &h->free_bytes, -(int64_t)free_bytes_delta);
	tn__counter_add(a, &h->blocks, 1);
	tn__counter_add(a, &h->free_blocks, free_delta);
	tn__counter_add(a, &h->num_allocs, 1);
	*ret_off = off;
	return 0;
}

/* The block size (header included) for a request of @nbytes, and the alignment it gets. */
int tn__block_request(tn_arena *a, size_t nbytes, uint64_t *ret_need, uint64_t *ret_align,
		      const char *fn)
{
	if (nbytes > a->data_size)
		return tn__error(TN_ENOMEM, "%s: %zu bytes exceed the arena's heap of %" PRIu64
				 " bytes", fn, nbytes, a->data_size);
	*ret_align = nbytes >= ARENA_DATA_ALIGN		? ARENA_DATA_ALIGN
		     : nbytes >= ((uint64_t)64 << 10) ? 4096
						       : TN_ARENA_ALIGNMENT;
	uint64_t need = tn__round_up(nbytes, TN_ARENA_ALIGNMENT) + BLOCK_HDR;
	*ret_need = need < BLOCK_MIN ? BLOCK_MIN : need;
	return 0;
}

/* heap_alloc, and at 64 bytes when the alignment asked for does not fit: alignment beyond 64
 * bytes is for speed (huge pages, page-granular placement), not worth a failure. */
static int heap_alloc_aligned(tn_arena *a, uint64_t need, uint64_t align, uint64_t *ret_off)
{
	int r = heap_alloc(a, need, align, ret_off);
	if (r == TN_ENOMEM && align > TN_ARENA_ALIGNMENT)
		r = heap_alloc(a, need, TN_ARENA_ALIGNMENT, ret_off);
	return r;
}

/* Allocate a block held by this process's slot, under the arena lock; @flags go into its
 * header in the same change. */
int tn__heap_alloc_locked(tn_arena *a, size_t nbytes, uint64_t need, uint64_t align,
			  uint32_t flags, uint64_t *ret_off, const char *fn)
{
	int r = heap_alloc_aligned(a, need, align, ret_off);
	/* No room: the least recently used cache entries nobody holds make some. */
	if (r == TN_ENOMEM && !a->hdr->damage)
		r = tn__evict_for_alloc_locked(a, need, align, heap_alloc_aligned, ret_off);
	tn__alloc_spill_wait = false;
	if (r == TN_ENOMEM) {
		uint64_t pinned = 0, held = 0, evictable = 0;
		if (tn__arena_figures_locked(a, &pinned, &held, &evictable))
			pinned = held = evictable = 0;
		/* A spilling arena's evictable bytes are tensord's to write out: the caller may
		 * wait for that (tn__arena_spill_wait). */
		tn__alloc_spill_wait = a->hdr->spill_mode && evictable;
		return tn__error(TN_ENOMEM, "%s: no free block of %zu bytes in arena %s (%" PRIu64
				 " bytes free, the largest block %" PRIu64 "; of %" PRIu64
				 " bytes used, %" PRIu64 " held by processes, %" PRIu64
				 " pinned, %" PRIu64 " evictable%s)", fn, nbytes, a->path,
				 a->hdr->free_bytes, tn__largest_free(a), a->hdr->used_bytes, held,
				 pinned, evictable,
				 a->hdr->spill_mode && evictable
					 ? ", which tensord did not spill to disk in time"
					 : "");
	}
	if (r == 0 && flags) {
		struct block *b = tn__block_at(a, *ret_off);
		tn__tx_set(a, &b->magic_flags, b->magic_flags | (uint64_t)flags << 32);
	}
	tn__tx_commit(a);
	return r;
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
