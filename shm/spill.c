/* SPDX-License-Identifier: MIT */
/*
 * Spilled entries: names whose bytes tensord wrote to disk and whose block it freed, and the
 * way back (shm.h's spilling section; tensord/spill.c does the file side).
 *
 * A spilled entry keeps its name, dtype, sizes, strides and offset, its class and its seal;
 * TN_ARENA_ENTRY_SPILLED is set in its flags, its block word holds the number of its spill
 * file and its block generation is 0 (or, with TN_ARENA_ENTRY_RESTORE_FAILED, the error of
 * the last restore). It pins no block, counts in the header's spilled_names and spilled_bytes,
 * and is never evictable. Each step is one change through the undo log: a process killed at
 * any instruction leaves the entry either resident or spilled, never between, and the file
 * whose number no entry holds is tensord's to remove.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena_internal.h"

_Atomic int64_t tn__arena_restore_wait_ns = TN__ARENA_RESTORE_WAIT_NS;

uint64_t tn__spilled_bytes(const struct dir_entry *e)
{
	uint32_t ndim = (uint32_t)(e->dtype_ndim >> 32);
	uint64_t n = tn__dtype_bytes((uint32_t)e->dtype_ndim);
	for (uint32_t d = 0; d < ndim && d < TN_ARENA_MAX_DIMS; d++)
		if (e->sizes[d] < 0 || __builtin_mul_overflow(n, (uint64_t)e->sizes[d], &n))
			return 0;
	return n;
}

void tn__spilled_uncount(tn_arena *a, const struct dir_entry *e)
{
	struct arena_header *h = a->hdr;
	uint64_t bytes = tn__spilled_bytes(e);
	if (h->spilled_names)
		tn__counter_add(a, &h->spilled_names, -1);
	tn__tx_set(a, &h->spilled_bytes, h->spilled_bytes > bytes ? h->spilled_bytes - bytes : 0);
}

_Atomic uint32_t *tn__arena_restore_word(tn_arena *a)
{
	return &a->hdr->restore_seq;
}

void tn__arena_restore_wake(tn_arena *a)
{
	_Atomic uint32_t *w = &a->hdr->restore_seq;
	atomic_fetch_add(w, 1);
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

_Thread_local bool tn__alloc_spill_wait;

uint32_t tn__arena_freed_seq(const tn_arena *a)
{
	return atomic_load(&a->hdr->freed_seq);
}

bool tn__arena_spill_wait(tn_arena *a, uint32_t seq, uint64_t *deadline)
{
	if (!atomic_load_explicit(&tn__arena_restore_wait_ns, memory_order_relaxed))
		return false;
	uint64_t now = tn__mono_ns();
	if (!*deadline)
		*deadline = now + TN__ARENA_SPILL_WAIT_NS;
	if (now >= *deadline)
		return false;
	tn__arena_restore_wake(a);
	uint64_t left = *deadline - now < 100000000u ? *deadline - now : 100000000u;
	struct timespec ts = { 0, (long)left };
	int saved = errno;
	syscall(SYS_futex, (uint32_t *)&a->hdr->freed_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
	errno = saved;
	return true;
}

static void entry_name(const struct dir_entry *e, char *out)
{
	size_t len = e->name_len <= TN_ARENA_NAME_MAX ? e->name_len : 0;
	memcpy(out, e->name, len);
	out[len] = '\0';
}

int tn__entry_restore_request(tn_arena *a, uint32_t index, const char *fn, bool *ret_wake)
{
	struct dir_entry *e = tn__entry_at(a, index);
	uint32_t flags = (uint32_t)(e->block_gen_flags >> 32);
	char name[TN_ARENA_NAME_MAX + 1];
	entry_name(e, name);
	uint32_t want = (flags & ~(uint32_t)TN_ARENA_ENTRY_RESTORE_FAILED) | TN_ARENA_ENTRY_RESTORING;
	int failed = flags & TN_ARENA_ENTRY_RESTORE_FAILED ? (int32_t)(uint32_t)e->block_gen_flags : 0;
	if (want != flags) {
		tn__tx_set(a, &e->block_gen_flags, (uint64_t)want << 32);
		tn__tx_commit(a);
		*ret_wake = true;
	}
	if (flags & TN_ARENA_ENTRY_RESTORE_FAILED)
		return tn__error(failed < 0 ? failed : TN_EIO, "%s: '%s' of arena %s is spilled to "
				 "disk and tensord could not read it back (%s; its log says why); "
				 "asked again", fn, name, a->path,
				 tn_strerror(failed < 0 ? failed : TN_EIO));
	return tn__error(TN_EAGAIN, "%s: '%s' of arena %s is spilled to disk: tensord is reading "
			 "it back", fn, name, a->path);
}

TN_EXPORT int tn_arena_set_spill(tn_arena *a, bool spill)
{
	static const char fn[] = "tn_arena_set_spill";
	int r;
	if ((r = tn__arena_check(a, true, fn)) || (r = tn__arena_lock(a)))
		return r;
	if (a->hdr->spill_mode != (uint64_t)spill) {
		tn__tx_set(a, &a->hdr->spill_mode, spill);
		tn__tx_commit(a);
	}
	tn__arena_unlock(a);
	/* tensord looks at the arena again now. */
	tn__arena_restore_wake(a);
	return 0;
}

int tn__arena_spill_state(tn_arena *a, struct tn__spill_state *ret)
{
	int r = tn__arena_lock(a);
	if (r)
		return r;
	const struct arena_header *h = a->hdr;
	ret->spill = h->spill_mode != 0;
	ret->used = h->used_bytes;
	ret->spilled_names = h->spilled_names;
	ret->spilled_bytes = h->spilled_bytes;
	tn__arena_watermarks(a, &ret->high, &ret->low);
	tn__arena_unlock(a);
	return 0;
}

int tn__arena_spill_next_id(tn_arena *a, uint64_t *ret_id)
{
	int r;
	if ((r = tn__arena_check(a, true, "tn__arena_spill_next_id")) || (r = tn__arena_lock(a)))
		return r;
	uint64_t id = a->hdr->spill_next_id + 1;
	tn__tx_set(a, &a->hdr->spill_next_id, id);
	tn__tx_commit(a);
	tn__arena_unlock(a);
	*ret_id = id;
	return 0;
}

int tn__arena_spilled(tn_arena *a, bool wanted, struct tn__spill_item **ret, size_t *ret_n)
{
	static const char fn[] = "tn__arena_spilled";
	int r;
	if ((r = tn__arena_check(a, true, fn)) || (r = tn__arena_lock(a)))
		return r;
	size_t n = 0, cap = 0;
	struct tn__spill_item *out = NULL;
	for (uint32_t i = 0; i < a->dir_slots; i++) {
		const struct dir_entry *e = tn__entry_at(a, i);
		if ((uint32_t)e->state_gen != ENTRY_USED || !tn__entry_spilled(e) ||
		    tn__entry_problem(a, e, NULL))
			continue;
		uint32_t flags = (uint32_t)(e->block_gen_flags >> 32);
		if (wanted && !(flags & TN_ARENA_ENTRY_RESTORING))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			struct tn__spill_item *t = realloc(out, ncap * sizeof(*out));
			if (!t) {
				tn__arena_unlock(a);
				free(out);
				return tn__error(TN_ENOMEM, "%s: out of memory for %zu entries", fn,
						 ncap);
			}
			out = t;
			cap = ncap;
		}
		struct tn__spill_item *it = &out[n++];
		memset(it, 0, sizeof(*it));
		it->handle = (tn_arena_handle){ i, (uint32_t)(e->state_gen >> 32) };
		it->id = e->block;
		it->bytes = tn__spilled_bytes(e);
		it->flags = flags;
		entry_name(e, it->name);
	}
	tn__arena_unlock(a);
	if (!n) {
		free(out);
		out = NULL;
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

/* The spilled entry @it names, under the lock, or NULL when it is gone or changed. */
static struct dir_entry *spilled_entry(tn_arena *a, const struct tn__spill_item *it)
{
	if (it->handle.index >= a->dir_slots)
		return NULL;
	struct dir_entry *e = tn__entry_at(a, it->handle.index);
	if ((uint32_t)e->state_gen != ENTRY_USED ||
	    (uint32_t)(e->state_gen >> 32) != it->handle.generation || !tn__entry_spilled(e) ||
	    e->block != it->id)
		return NULL;
	return e;
}

int tn__arena_restore_commit(tn_arena *a, const struct tn__spill_item *it,
			     const struct tn__arena_desc *desc)
{
	static const char fn[] = "tn__arena_restore_commit";
	int r;
	if ((r = tn__arena_check(a, true, fn)))
		return r;
	if (desc->ndim > TN_ARENA_MAX_DIMS)
		return tn__error(TN_EINVAL, "%s: ndim %u", fn, desc->ndim);
	if ((r = tn__arena_lock(a)))
		return r;
	struct arena_header *h = a->hdr;
	struct dir_entry *e = spilled_entry(a, it);
	if (!e) {
		tn__arena_unlock(a);
		return tn__error(TN_ESTALE, "%s: '%s' was unpublished or replaced while it was read "
				 "back", fn, it->name);
	}
	struct block *b = tn__block_at(a, desc->block);
	uint32_t ndim = (uint32_t)(e->dtype_ndim >> 32);
	const char *bad = NULL;
	if (!tn__block_sane(a, desc->block) || tn__block_magic(b) != BLOCK_MAGIC_USED ||
	    !tn__hold_has(b, a->slot))
		bad = "the block is not held by this process";
	else if (desc->dtype != (uint32_t)e->dtype_ndim || desc->ndim != ndim ||
		 memcmp(desc->sizes, e->sizes, ndim * sizeof(int64_t)))
		bad = "the geometry differs from the entry's";
	else
		bad = tn__extent_problem(desc->dtype, desc->ndim, desc->sizes, desc->strides,
					 desc->storage_offset, b->size - BLOCK_HDR);
	if (bad) {
		tn__arena_unlock(a);
		return tn__error(TN_EINVAL, "%s: '%s': %s", fn, it->name, bad);
	}
	uint32_t flags = (uint32_t)(e->block_gen_flags >> 32) &
			 ~(uint32_t)(TN_ARENA_ENTRY_SPILLED | TN_ARENA_ENTRY_RESTORING |
				     TN_ARENA_ENTRY_RESTORE_FAILED);
	tn__spilled_uncount(a, e);
	tn__tx_set(a, &e->block, desc->block);
	tn__tx_set(a, &e->block_gen_flags, (uint32_t)b->gen_pins | (uint64_t)flags << 32);
	if (e->storage_offset != desc->storage_offset)
		tn__tx_set(a, (uint64_t *)&e->storage_offset, (uint64_t)desc->storage_offset);
	for (uint32_t d = 0; d < ndim; d++)
		if (e->strides[d] != desc->strides[d])
			tn__tx_set(a, (uint64_t *)&e->strides[d], (uint64_t)desc->strides[d]);
	tn__entry_touch(a, e);
	tn__pins_add(a, b, 1);
	if (flags & TN_ARENA_ENTRY_SEALED)
		tn__tx_set(a, &b->magic_flags, b->magic_flags | (uint64_t)BLOCK_FLAG_SEALED << 32);
	tn__counter_add(a, &h->restores, 1);
	tn__tx_commit(a);
	uint64_t hash = e->hash;
	tn__arena_unlock(a);
	tn__arena_notify(a, hash);
	return 0;
}

int tn__arena_restore_fail(tn_arena *a, const struct tn__spill_item *it, int code)
{
	static const char fn[] = "tn__arena_restore_fail";
	int r;
	if ((r = tn__arena_check(a, true, fn)) || (r = tn__arena_lock(a)))
		return r;
	struct dir_entry *e = spilled_entry(a, it);
	uint64_t hash = 0;
	if (e) {
		uint32_t flags = (uint32_t)(e->block_gen_flags >> 32);
		flags = (flags & ~(uint32_t)TN_ARENA_ENTRY_RESTORING) | TN_ARENA_ENTRY_RESTORE_FAILED;
		tn__tx_set(a, &e->block_gen_flags,
			   (uint32_t)(code < 0 ? code : TN_EIO) | (uint64_t)flags << 32);
		tn__counter_add(a, &a->hdr->restore_failures, 1);
		tn__tx_commit(a);
		hash = e->hash;
	}
	tn__arena_unlock(a);
	/* Waiters look again and find the failure. */
	if (e)
		tn__arena_notify(a, hash);
	return 0;
}
