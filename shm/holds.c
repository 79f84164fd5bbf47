/* SPDX-License-Identifier: MIT */
/*
 * Who holds what. A block's header has one hold bit per client slot; this process counts, in
 * a table of its own, the uses it has of each block it holds, and keeps the bit (and an arena
 * reference) while any is left. And the client slots themselves: claiming one, and telling
 * whether the process a slot records still lives.
 *
 * A slot names a process by pid and start time, so that a pid reused after a crash is never
 * taken for the process that died: its holds are reclaimed instead (admin.c, remote.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena_internal.h"

/* ---- hold bits ------------------------------------------------------------------------------- */

bool tn__held_by_others(const tn_arena *a, const struct block *b)
{
	for (int i = 0; i < HOLD_WORDS; i++) {
		uint64_t mine = i == a->slot / 64 ? UINT64_C(1) << (a->slot % 64) : 0;
		if (b->holders[i] & ~mine)
			return true;
	}
	return false;
}

void tn__hold_set(tn_arena *a, struct block *b, int slot, bool on)
{
	uint64_t bit = UINT64_C(1) << (slot % 64), w = b->holders[slot / 64];
	uint64_t nw = on ? w | bit : w & ~bit;
	if (nw != w)
		tn__tx_set(a, &b->holders[slot / 64], nw);
}

/* ---- this process's holds -------------------------------------------------------------------- */

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
	if ((r = tn__block_request(a, nbytes, &need, &align, fn)))
		return r;
	uint64_t deadline = 0;
	for (;;) {
		uint32_t seq = tn__arena_freed_seq(a);
		tn__alloc_spill_wait = false;
		pthread_mutex_lock(&a->local_lock);
		/* Room for the local record first, so nothing needs undoing after the heap
		 * commits. */
		if ((r = tn__local_reserve(a)) == 0 && (r = tn__arena_lock(a)) == 0) {
			r = tn__heap_alloc_locked(a, nbytes, need, align, 0, &off, fn);
			tn__arena_unlock(a);
			if (r == 0)
				tn__local_insert(a, off)->holds = 1;
		}
		pthread_mutex_unlock(&a->local_lock);
		/* A spilling arena: room comes when tensord has written entries out. */
		if (r != TN_ENOMEM || !tn__alloc_spill_wait ||
		    !tn__arena_spill_wait(a, seq, &deadline))
			break;
	}
	if (r)
		return r;
	tn_arena_ref(a);
	*ret_ptr = a->base + off + BLOCK_HDR;
	return 0;
}

/* ---- clients --------------------------------------------------------------------------------- */

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

int tn__claim_slot(tn_arena *a, int64_t pid, uint64_t start_time, int *ret_slot,
		   uint64_t *ret_state)
{
	struct arena_header *h = a->hdr;
	/* A damaged arena can be attached (its fsck needs a handle; tensord recovers it): the
	 * client table follows no offset of the heap, and every later change is refused. */
	int r = tn__arena_lock_any(a);
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
			for (int i = 0; i < (int)a->max_clients && !h->damage; i++)
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
	tn__tx_set(a, &c->attach_ns, tn__now_ns());
	tn__tx_set(a, &c->lookups, 0);
	tn__tx_set(a, &c->state_gen, CLIENT_ATTACHED | h->client_gen << 32);
	tn__counter_add(a, &h->clients, 1);
	uint64_t state = c->state_gen;
	tn__tx_commit(a);
	tn__arena_waiter_clear(a, slot); /* a bit a killed waiter left on the free slot */
	tn__arena_unlock(a);
	*ret_slot = slot;
	if (ret_state)
		*ret_state = state;
	return 0;
}
