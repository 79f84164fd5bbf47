/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of remote attachments (arena_remote.h): assigning client slots to other
 * processes, holding and releasing blocks for them, and reclaiming exactly the attachment it
 * assigned. Every change goes under the lock and through the undo log like any other, so a
 * daemon killed half way through one leaves nothing for the next lock holder but a rollback.
 * (The daemon's lookup for a slot, tn__arena_hold_for, lives with the directory.)
 */
#include <string.h>

#include "arena_internal.h"

static int slot_range(const tn_arena *a, int slot, const char *fn)
{
	if (slot < 0 || slot >= (int)a->max_clients)
		return tn__error(TN_ERANGE, "%s: slot %d outside [0, %u)", fn, slot, a->max_clients);
	return 0;
}

int tn__arena_assign_slot(tn_arena *a, int32_t pid, uint64_t start_time, int *ret_slot,
			  uint64_t *ret_state)
{
	static const char fn[] = "tn__arena_assign_slot";
	int r = tn__arena_check(a, true, fn);
	if (r)
		return r;
	if (pid <= 0 || !ret_slot || !ret_state)
		return tn__error(TN_EINVAL, "%s: %s", fn, pid <= 0 ? "bad pid" : "NULL ret");
	int slot;
	uint64_t state;
	if ((r = tn__claim_slot(a, pid, start_time, &slot, &state)))
		return r;
	*ret_slot = slot;
	*ret_state = state;
	return 0;
}

int tn__arena_slot_info(tn_arena *a, int slot, bool *ret_attached, int32_t *ret_pid,
			uint64_t *ret_start_time, uint64_t *ret_state)
{
	static const char fn[] = "tn__arena_slot_info";
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	int r = slot_range(a, slot, fn);
	if (r)
		return r;
	/* One record of four words: under the lock they agree; a read-only handle reads them
	 * as they are. */
	if (!a->read_only && (r = tn__arena_lock_any(a)))
		return r;
	const volatile struct client_rec *c = tn__client_at(a, slot);
	uint64_t state = c->state_gen, start = c->start_time;
	int64_t pid = c->pid;
	if (!a->read_only)
		tn__arena_unlock(a);
	if (ret_attached)
		*ret_attached = (uint32_t)state == CLIENT_ATTACHED;
	if (ret_pid)
		*ret_pid = (int32_t)pid;
	if (ret_start_time)
		*ret_start_time = start;
	if (ret_state)
		*ret_state = state;
	return 0;
}

int tn__arena_reclaim_if(tn_arena *a, int slot, uint64_t state, uint64_t *ret_freed)
{
	static const char fn[] = "tn__arena_reclaim_if";
	int r = tn__arena_check(a, true, fn);
	if (r || (r = slot_range(a, slot, fn)))
		return r;
	if (slot == a->slot)
		return tn__error(TN_EINVAL, "%s: slot %d is the caller's own", fn, slot);
	if ((r = tn__arena_lock(a)))
		return r;
	struct client_rec *c = tn__client_at(a, slot);
	uint64_t before = a->hdr->free_bytes;
	int done = 0;
	/* The same state word: the same attachment (a slot given to another process since
	 * carries a new generation). */
	if ((uint32_t)state == CLIENT_ATTACHED && c->state_gen == state) {
		r = tn__reclaim_locked(a, slot);
		done = r >= 0;
	}
	uint64_t after = a->hdr->free_bytes;
	tn__arena_unlock(a);
	if (r < 0)
		return r;
	if (ret_freed)
		*ret_freed = after - before;
	return done;
}

int tn__arena_release_for(tn_arena *a, int slot, uint64_t block)
{
	static const char fn[] = "tn__arena_release_for";
	int r = tn__arena_check(a, true, fn);
	if (r || (r = slot_range(a, slot, fn)))
		return r;
	if ((r = tn__arena_lock(a)))
		return r;
	struct block *b = tn__block_at(a, block);
	/* Only blocks a lookup can have held: allocated, never raw (raw blocks have no name). */
	if (!tn__block_sane(a, block) || tn__block_magic(b) != BLOCK_MAGIC_USED ||
	    (b->magic_flags >> 32 & BLOCK_FLAG_RAW) || !tn__hold_has(b, slot)) {
		tn__arena_unlock(a);
		return tn__error(TN_EINVAL, "%s: offset %" PRIu64 " is not a block slot %d holds "
				 "in arena %s", fn, block, slot, a->path);
	}
	tn__hold_set(a, b, slot, false);
	if (tn__holds_none(b) && !(b->gen_pins >> 32))
		r = tn__heap_free_block(a, block);
	tn__tx_commit(a);
	tn__arena_unlock(a);
	return r;
}

bool tn__arena_read_only(const tn_arena *a)
{
	return tn__arena_ok(a) && a->read_only;
}

void tn__arena_uuid(const tn_arena *a, uint8_t ret_uuid[16])
{
	if (tn__handle_is(a, TN_MAGIC_ARENA))
		memcpy(ret_uuid, a->uuid, 16);
	else
		memset(ret_uuid, 0, 16);
}

void tn__arena_mappings(const tn_arena *a, void **ret_rw, void **ret_ro, size_t *ret_len,
			size_t *ret_page)
{
	bool ok = tn__handle_is(a, TN_MAGIC_ARENA);
	*ret_rw = ok ? a->base : NULL;
	*ret_ro = ok ? a->ro : NULL;
	*ret_len = ok ? (size_t)a->size : 0;
	*ret_page = ok ? (size_t)a->page_size : 0;
}

int tn__arena_slot_restore(tn_arena *a, int slot, uint64_t state, int32_t pid,
			   uint64_t start_time)
{
	static const char fn[] = "tn__arena_slot_restore";
	int r = tn__arena_check(a, true, fn);
	if (r || (r = slot_range(a, slot, fn)))
		return r;
	if ((r = tn__arena_lock(a)))
		return r;
	struct client_rec *c = tn__client_at(a, slot);
	int done = 0;
	if ((uint32_t)state == CLIENT_ATTACHED && c->state_gen == state &&
	    (c->pid != pid || c->start_time != start_time)) {
		tn__tx_set(a, (uint64_t *)&c->pid, (uint64_t)(int64_t)pid);
		tn__tx_set(a, &c->start_time, start_time);
		tn__tx_commit(a);
		done = 1;
	}
	tn__arena_unlock(a);
	return done;
}
