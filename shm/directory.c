/* SPDX-License-Identifier: MIT */
/*
 * The named directory of an arena: name -> block, dtype, sizes, strides and offset, as plain
 * descriptors (struct tn__arena_desc); the layer above makes tensors of them. Publishing needs
 * a block this process holds, and holding a name's block counts one more use of it in the
 * process's holds table.
 *
 * An open-addressing hash table (linear probing, FNV-1a) of fixed 576-byte entries in the
 * arena file. Each entry has a generation that every publish bumps, so a handle (index,
 * generation) taken before an unpublish or a replace is refused. A publish into an empty or
 * deleted slot writes the entry's body directly, since nothing reads a slot in that state,
 * and then flips its state word through the undo log; only an entry that is replaced in place
 * has its body logged word by word.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "arena_internal.h"

struct dir_entry *tn__entry_at(const tn_arena *a, uint32_t index)
{
	return (struct dir_entry *)(a->base + a->dir_off +
				    (uint64_t)index * sizeof(struct dir_entry));
}

uint64_t tn__name_hash(const char *s, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
	return h;
}

static int check_name(const char *name, const char *fn, size_t *ret_len)
{
	if (!name)
		return tn__error(TN_EINVAL, "%s: NULL tensor name", fn);
	size_t n = strnlen(name, TN_ARENA_NAME_MAX + 1);
	if (!n || n > TN_ARENA_NAME_MAX)
		return tn__error(TN_EINVAL, "%s: a tensor name has 1 to %d bytes, not %s", fn,
				 TN_ARENA_NAME_MAX, n ? "more" : "0");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c == 0x7f)
			return tn__error(TN_EINVAL, "%s: tensor name '%.60s' has control character "
					 "0x%02x at byte %zu", fn, name, c, i);
		if (c == '/' && (i == 0 || i == n - 1 || name[i + 1] == '/'))
			return tn__error(TN_EINVAL, "%s: tensor name '%.60s' has an empty part "
					 "('/' at the start, the end or twice)", fn, name);
	}
	*ret_len = n;
	return 0;
}

static uint32_t entry_state(const struct dir_entry *e)
{
	return (uint32_t)e->state_gen;
}

static uint32_t entry_gen(const struct dir_entry *e)
{
	return (uint32_t)(e->state_gen >> 32);
}

/* Find @name: its index, or -1 with *ret_free set to the first slot an insert may use (-1
 * when the table is full). Under the lock. */
static int64_t probe(const tn_arena *a, const char *name, size_t len, uint64_t hash,
		     int64_t *ret_free)
{
	uint32_t mask = a->dir_slots - 1;
	int64_t first_free = -1;
	for (uint32_t k = 0, i = (uint32_t)hash & mask; k <= mask; k++, i = (i + 1) & mask) {
		const struct dir_entry *e = tn__entry_at(a, i);
		uint32_t st = entry_state(e);
		if (st == ENTRY_EMPTY) {
			if (first_free < 0)
				first_free = i;
			break;
		}
		if (st == ENTRY_TOMBSTONE) {
			if (first_free < 0)
				first_free = i;
			continue;
		}
		if (e->hash == hash && e->name_len == len && !memcmp(e->name, name, len))
			return i;
	}
	if (ret_free)
		*ret_free = first_free;
	return -1;
}

/* Element sizes by dtype, from the public list: an entry's extent is checked here without
 * calling up into the core, and a dtype past the list's end is no dtype. */
static const uint8_t dtype_sizes[] = {
#define TN_X_(e, ctype, name, size, cat, sgn) size,
	TN_DTYPE_LIST(TN_X_)
#undef TN_X_
};

uint64_t tn__dtype_bytes(uint32_t dtype)
{
	return dtype < TN_ARRAY_SIZE(dtype_sizes) ? dtype_sizes[dtype] : 0;
}

/* What is wrong with an entry's metadata, checked against its block (another process wrote
 * it), or NULL. */
const char *tn__extent_problem(uint32_t dtype, uint32_t ndim, const int64_t *sizes,
			       const int64_t *strides, int64_t storage_offset, uint64_t payload)
{
	if (dtype >= TN_ARRAY_SIZE(dtype_sizes))
		return "dtype";
	if (ndim > TN_ARENA_MAX_DIMS)
		return "ndim";
	if (storage_offset < 0)
		return "offset";
	/* The furthest element must lie inside the block. */
	int64_t end = storage_offset, step;
	bool empty = false;
	for (uint32_t d = 0; d < ndim; d++) {
		if (sizes[d] < 0 || strides[d] < 0)
			return "sizes or strides";
		if (sizes[d] == 0)
			empty = true;
		else if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) ||
			 __builtin_add_overflow(end, step, &end))
			return "extent overflows";
	}
	uint64_t bytes;
	if (!empty && (__builtin_mul_overflow((uint64_t)end + 1, (uint64_t)dtype_sizes[dtype],
					      &bytes) || bytes > payload))
		return "extent past the block";
	return NULL;
}

const char *tn__entry_problem(const tn_arena *a, const struct dir_entry *e, uint64_t *ret_bytes)
{
	/* A spilled entry has no block: its elements lie contiguous in its spill file. */
	uint64_t bgf = *(const volatile uint64_t *)&e->block_gen_flags;
	if (bgf >> 32 & TN_ARENA_ENTRY_SPILLED) {
		if (!e->name_len || e->name_len > TN_ARENA_NAME_MAX)
			return "name";
		if (ret_bytes)
			*ret_bytes = 0;
		return tn__extent_problem((uint32_t)e->dtype_ndim, (uint32_t)(e->dtype_ndim >> 32),
					  e->sizes, e->strides, e->storage_offset, UINT64_MAX);
	}
	/* The block offset is read once: a reader without the lock (a read-only handle) may
	 * pass the live entry, whose words can change between two reads. */
	uint64_t block = *(const volatile uint64_t *)&e->block;
	if (!tn__block_sane(a, block))
		return "block offset or header";
	const struct block *b = tn__block_at(a, block);
	if ((uint32_t)b->magic_flags != BLOCK_MAGIC_USED)
		return "block is not allocated";
	if ((uint32_t)b->gen_pins != (uint32_t)e->block_gen_flags)
		return "block generation";
	if (!e->name_len || e->name_len > TN_ARENA_NAME_MAX)
		return "name";
	/* Read once more: it may have changed since it was found sane. The caller reports the
	 * payload the extent was checked against, never a later reading of it. */
	uint64_t size = *(const volatile uint64_t *)&b->size;
	uint64_t bytes = size >= BLOCK_HDR ? size - BLOCK_HDR : 0;
	if (ret_bytes)
		*ret_bytes = bytes;
	return tn__extent_problem((uint32_t)e->dtype_ndim, (uint32_t)(e->dtype_ndim >> 32),
				  e->sizes, e->strides, e->storage_offset, bytes);
}

static int entry_check(const tn_arena *a, const struct dir_entry *e, const char *fn,
		       uint64_t *ret_bytes)
{
	const char *bad = tn__entry_problem(a, e, ret_bytes);
	if (bad)
		return tn__error(TN_EIO, "%s: directory entry '%.*s' of arena %s is damaged (%s); "
				 "run fsck", fn, (int)(e->name_len <= TN_ARENA_NAME_MAX ? e->name_len : 0),
				 e->name, a->path, bad);
	return 0;
}

/* @block_bytes is the payload that entry_check() checked the extent against. */
static void entry_to_public(uint32_t index, const struct dir_entry *e, uint64_t block_bytes,
			    tn_arena_entry *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->name, e->name, e->name_len);
	out->dtype = (enum tn_dtype)(uint32_t)e->dtype_ndim;
	out->ndim = (int)(e->dtype_ndim >> 32);
	memcpy(out->sizes, e->sizes, sizeof(out->sizes));
	memcpy(out->strides, e->strides, sizeof(out->strides));
	out->storage_offset = e->storage_offset;
	out->block_bytes = block_bytes;
	out->flags = (uint32_t)(e->block_gen_flags >> 32);
	out->handle = (tn_arena_handle){ index, entry_gen(e) };
	if (out->flags & TN_ARENA_ENTRY_SOFT_PINNED)
		out->pin_until = e->pin_until;
	out->last_use_ns = e->last_use;
}

void tn__pins_add(tn_arena *a, struct block *b, int delta)
{
	uint64_t pins = (b->gen_pins >> 32) + (uint64_t)(int64_t)delta;
	tn__tx_set(a, &b->gen_pins, (uint32_t)b->gen_pins | pins << 32);
}

/* Drop one pin of the block under @e; free it when nobody holds or names it. */
int tn__entry_unpin(tn_arena *a, const struct dir_entry *e)
{
	/* A spilled entry names a file, not a block: tensord removes the file it no longer
	 * finds named. */
	if (tn__entry_spilled(e)) {
		tn__spilled_uncount(a, e);
		return 0;
	}
	/* A damaged entry points at nothing it may change: another name's block, or bytes
	 * that are no block. Its removal leaves the heap to fsck. */
	if (tn__entry_problem(a, e, NULL))
		return 0;
	struct block *b = tn__block_at(a, e->block);
	if ((uint32_t)b->magic_flags != BLOCK_MAGIC_USED || !(b->gen_pins >> 32))
		return 0;
	tn__pins_add(a, b, -1);
	if (!(b->gen_pins >> 32) && tn__holds_none(b))
		return tn__heap_free_block(a, e->block);
	return 0;
}

/* Mark @index deleted. A deleted slot followed by an empty one can itself be empty, and so
 * can the deleted slots just before it: that keeps probe runs short after many removals. */
void tn__entry_delete(tn_arena *a, uint32_t index)
{
	struct arena_header *h = a->hdr;
	uint32_t mask = a->dir_slots - 1;
	struct dir_entry *e = tn__entry_at(a, index);
	uint64_t gen = e->state_gen >> 32 << 32;
	if (entry_state(tn__entry_at(a, (index + 1) & mask)) != ENTRY_EMPTY) {
		tn__tx_set(a, &e->state_gen, gen | ENTRY_TOMBSTONE);
		tn__tx_set(a, &h->tombstones, h->tombstones + 1);
	} else {
		tn__tx_set(a, &e->state_gen, gen | ENTRY_EMPTY);
		/* Bounded so one removal stays within the undo log. */
		for (uint32_t k = 0, i = (index - 1) & mask; k < 32; k++, i = (i - 1) & mask) {
			struct dir_entry *p = tn__entry_at(a, i);
			if (entry_state(p) != ENTRY_TOMBSTONE)
				break;
			tn__tx_set(a, &p->state_gen, (p->state_gen >> 32 << 32) | ENTRY_EMPTY);
			tn__tx_set(a, &h->tombstones, h->tombstones - 1);
		}
	}
	tn__tx_set(a, &h->names, h->names - 1);
}

int tn__arena_check_name(const char *name, const char *fn)
{
	size_t len;
	return check_name(name, fn, &len);
}

int tn__arena_publish_desc(tn_arena *a, const char *name, const struct tn__arena_desc *desc,
			   unsigned flags, tn_arena_handle *ret_handle, uint32_t *ret_flags,
			   const char *fn)
{
	size_t len;
	int r;

	if ((r = tn__arena_check(a, true, fn)) || (r = check_name(name, fn, &len)))
		return r;
	if (flags & ~(TN_ARENA_SEAL | TN_ARENA_REPLACE | TN_ARENA_EVICTABLE))
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (desc->ndim > TN_ARENA_MAX_DIMS)
		return tn__error(TN_EINVAL, "%s: '%s' has %u dims; a published tensor has at most %d",
				 fn, name, desc->ndim, TN_ARENA_MAX_DIMS);
	uint64_t block = desc->block;

	/* The entry's body, built before taking the lock. */
	struct dir_entry body;
	memset(&body, 0, sizeof(body));
	body.block = block;
	body.hash = tn__name_hash(name, len);
	body.storage_offset = desc->storage_offset;
	body.dtype_ndim = desc->dtype | (uint64_t)desc->ndim << 32;
	body.name_len = (uint32_t)len;
	body.last_use = tn__coarse_now_ns();
	memcpy(body.sizes, desc->sizes, desc->ndim * sizeof(int64_t));
	memcpy(body.strides, desc->strides, desc->ndim * sizeof(int64_t));
	memcpy(body.name, name, len);

	pthread_mutex_lock(&a->local_lock);
	struct local_hold *rec = tn__local_find(a, block);
	if (!rec || rec->holds <= 0) {
		pthread_mutex_unlock(&a->local_lock);
		return tn__error(TN_EINVAL, "%s: this process does not hold the block of '%s'", fn,
				 name);
	}
	if ((r = tn__arena_lock(a))) {
		pthread_mutex_unlock(&a->local_lock);
		return r;
	}
	struct arena_header *h = a->hdr;
	struct block *b = tn__block_at(a, block);
	if ((uint32_t)b->magic_flags != BLOCK_MAGIC_USED || !tn__hold_has(b, a->slot)) {
		r = tn__error(TN_EIO, "%s: block of '%s' is not held in arena %s; run fsck", fn,
			      name, a->path);
		goto out;
	}
	int64_t free_slot;
	int64_t found = probe(a, name, len, body.hash, &free_slot);
	uint32_t index;
	/* A sealed block stays sealed under every name; so do the bytes the caller asks to keep
	 * sealed (a read-only storage: a sealed tensor this process looked up). */
	uint32_t eflags = (flags & TN_ARENA_SEAL) || (b->magic_flags >> 32 & BLOCK_FLAG_SEALED) ||
					  (desc->flags & TN_ARENA_ENTRY_SEALED)
				  ? TN_ARENA_ENTRY_SEALED
				  : 0;
	if (eflags && !(b->magic_flags >> 32 & BLOCK_FLAG_SEALED) && tn__held_by_others(a, b)) {
		r = tn__error(TN_EBUSY, "%s: cannot seal '%s': other processes hold its block and "
			      "may write to it (seal before sharing)", fn, name);
		goto out;
	}
	uint32_t class_flags = flags & TN_ARENA_EVICTABLE ? TN_ARENA_ENTRY_CACHE : 0;
	body.block_gen_flags = (uint32_t)b->gen_pins | (uint64_t)(eflags | class_flags) << 32;
	if (found >= 0) {
		struct dir_entry *e = tn__entry_at(a, (uint32_t)found);
		if (!(flags & TN_ARENA_REPLACE) || (e->block_gen_flags >> 32 & TN_ARENA_ENTRY_SEALED)) {
			r = tn__error(TN_EEXIST, "%s: '%s' is already published in arena %s%s", fn,
				      name, a->path,
				      e->block_gen_flags >> 32 & TN_ARENA_ENTRY_SEALED
					      ? " and sealed"
					      : " (TN_ARENA_REPLACE replaces it)");
			goto out;
		}
		index = (uint32_t)found;
		/* Pin the new block before unpinning the old, which may be the same one. */
		tn__pins_add(a, b, 1);
		if ((r = tn__entry_unpin(a, e)))
			goto out;
		body.state_gen = ENTRY_USED | (uint64_t)(entry_gen(e) + 1) << 32;
		const uint64_t *src = (const uint64_t *)&body;
		uint64_t *dst = (uint64_t *)e;
		/* Logged word by word: the entry is live. Words past the name are unchanged. */
		size_t words = (offsetof(struct dir_entry, name) + len + 8) / 8;
		for (size_t i = 1; i < words; i++)
			if (dst[i] != src[i])
				tn__tx_set(a, &dst[i], src[i]);
		tn__tx_set(a, &e->state_gen, body.state_gen);
	} else {
		if (free_slot < 0 || h->names >= a->max_names) {
			r = tn__error(TN_ENOSPC, "%s: the directory of arena %s is full (%" PRIu64
				      " names)", fn, a->path, a->max_names);
			goto out;
		}
		index = (uint32_t)free_slot;
		struct dir_entry *e = tn__entry_at(a, index);
		bool was_tomb = entry_state(e) == ENTRY_TOMBSTONE;
		body.state_gen = ENTRY_USED | (uint64_t)(entry_gen(e) + 1) << 32;
		/* Nobody reads a free slot's body: write it directly, then publish the state. */
		memcpy((char *)e + 8, (const char *)&body + 8, sizeof(body) - 8);
		atomic_thread_fence(memory_order_release);
		tn__tx_set(a, &e->state_gen, body.state_gen);
		tn__pins_add(a, b, 1);
		tn__tx_set(a, &h->names, h->names + 1);
		if (was_tomb)
			tn__tx_set(a, &h->tombstones, h->tombstones - 1);
	}
	if (eflags)
		tn__tx_set(a, &b->magic_flags, b->magic_flags | (uint64_t)BLOCK_FLAG_SEALED << 32);
	tn__tx_commit(a);
	if (ret_handle)
		*ret_handle = (tn_arena_handle){ index, (uint32_t)(body.state_gen >> 32) };
	if (ret_flags)
		*ret_flags = eflags;
out:
	tn__arena_unlock(a);
	pthread_mutex_unlock(&a->local_lock);
	/* After the lock is released: a waiter woken looks at once and would find it taken. */
	if (r == 0)
		tn__arena_notify(a, body.hash);
	return r;
}

int tn__arena_wait_bucket(const char *name)
{
	return (int)(tn__name_hash(name, strlen(name)) % TN__ARENA_WAIT_BUCKETS);
}

/* The entry of @name (NULL: of @handle), checked, under the lock: its index and its block's
 * payload bytes, or TN_ENOENT, TN_ESTALE, TN_EIO. */
static int find_entry_locked(tn_arena *a, const char *name, size_t len,
			     const tn_arena_handle *handle, const char *fn, uint32_t *ret_index,
			     uint64_t *ret_bytes)
{
	uint32_t index;
	struct dir_entry *e;
	if (name) {
		int64_t i = probe(a, name, len, tn__name_hash(name, len), NULL);
		if (i < 0)
			return tn__error(TN_ENOENT, "%s: no tensor '%s' in arena %s", fn, name,
					 a->path);
		index = (uint32_t)i;
		e = tn__entry_at(a, index);
	} else {
		index = handle->index;
		e = index < a->dir_slots ? tn__entry_at(a, index) : NULL;
		if (!e || entry_state(e) != ENTRY_USED || entry_gen(e) != handle->generation)
			return tn__error(TN_ESTALE, "%s: handle {%u, %u} of arena %s is stale: the "
					 "name was unpublished or replaced since", fn,
					 handle->index, handle->generation, a->path);
	}
	int r = entry_check(a, e, fn, ret_bytes);
	if (r)
		return r;
	*ret_index = index;
	return 0;
}

/* find_entry_locked for a lookup: a spilled entry is asked back from tensord (TN_EAGAIN, and
 * *ret_wake set when its watcher is to be woken once the lock is released). */
static int find_resident_locked(tn_arena *a, const char *name, size_t len,
				const tn_arena_handle *handle, const char *fn, uint32_t *ret_index,
				uint64_t *ret_bytes, bool *ret_wake)
{
	int r = find_entry_locked(a, name, len, handle, fn, ret_index, ret_bytes);
	if (r == 0 && tn__entry_spilled(tn__entry_at(a, *ret_index)))
		r = tn__entry_restore_request(a, *ret_index, fn, ret_wake);
	return r;
}

/* A lookup's refresh of the entry's last-use clock (under the lock, inside the change): the
 * coarse clock, from the vDSO, and one logged word only when its value moved. */
bool tn__arena_lookup_clock = true;

void tn__entry_touch(tn_arena *a, struct dir_entry *e)
{
	uint64_t now = tn__coarse_now_ns();
	if (e->last_use != now)
		tn__tx_set(a, &e->last_use, now);
}

/* Count one more use of @block, which this process's slot holds now: the first takes an arena
 * reference. Called with local_lock held and room for a record reserved; unlocks local_lock. */
static void count_use(tn_arena *a, uint64_t block)
{
	struct local_hold *rec = tn__local_find(a, block);
	if (!rec)
		rec = tn__local_insert(a, block); /* cannot fail: room was reserved */
	if (rec->holds++ == 0)
		tn_arena_ref(a);
	pthread_mutex_unlock(&a->local_lock);
}

/* What is wrong with the daemon's answer for a read-only handle, or NULL: the daemon is
 * trusted, but a mistake of its must not make us read outside the mapping. */
static const char *remote_entry_problem(const tn_arena *a, const struct tn__arena_remote_entry *re)
{
	const tn_arena_entry *e = &re->entry;
	if (!tn__block_sane(a, re->block))
		return "block offset or header";
	const struct block *b = tn__block_at(a, re->block);
	uint64_t size = b->size; /* read once */
	if ((uint32_t)b->magic_flags != BLOCK_MAGIC_USED)
		return "block is not allocated";
	if (size < BLOCK_MIN || e->block_bytes > size - BLOCK_HDR || e->ndim < 0)
		return "block size";
	return tn__extent_problem((uint32_t)e->dtype, (uint32_t)e->ndim, e->sizes, e->strides,
				  e->storage_offset, e->block_bytes);
}

/* A use of @block for the layer above, under local_lock (which this releases): none when its
 * @reuse hook says it has a storage over the block already, which counts its own use. Returns
 * 1 when the hook reused, 0 when a use was counted. */
static int count_or_reuse(tn_arena *a, uint64_t block, bool sealed, tn__arena_reuse_fn reuse,
			  void *reuse_ctx)
{
	if (reuse && reuse(reuse_ctx, a, block, sealed)) {
		pthread_mutex_unlock(&a->local_lock);
		return 1;
	}
	count_use(a, block);
	return 0;
}

/* A read-only handle's hold: the daemon resolves the name and holds the block for our slot;
 * every tensor is read-only. Returns as count_or_reuse. */
static int hold_remote(tn_arena *a, const char *name, const tn_arena_handle *handle,
		       tn__arena_reuse_fn reuse, void *reuse_ctx,
		       struct tn__arena_remote_entry *re, const char *fn)
{
	int r;
	pthread_mutex_lock(&a->local_lock);
	if ((r = tn__local_reserve(a))) {
		pthread_mutex_unlock(&a->local_lock);
		return r;
	}
	/* Under local_lock: a hold taken for a block whose last local use is being released
	 * in another thread must not be dropped by that release. A second hold of a block this
	 * process holds already is one bit set again, nothing to undo. */
	memset(re, 0, sizeof(*re));
	tn_clear_error();
	r = a->remote.hold(a->remote.ctx, name, handle, re);
	if (r) {
		pthread_mutex_unlock(&a->local_lock);
		if (r > 0 || !tn_last_error()[0])
			return tn__error(r < 0 ? r : TN_EIO, "%s: tensord refused '%s' of arena %s "
					 "(%d)", fn, name ? name : "(handle)", a->path, r);
		return r;
	}
	re->entry.name[TN_ARENA_NAME_MAX] = 0;
	const char *bad = remote_entry_problem(a, re);
	if (bad) {
		if (!tn__local_find(a, re->block))
			a->remote.release(a->remote.ctx, re->block);
		pthread_mutex_unlock(&a->local_lock);
		return tn__error(TN_EIO, "%s: tensord's entry for '%s' of arena %s does not fit the "
				 "arena (%s)", fn, name ? name : re->entry.name, a->path, bad);
	}
	return count_or_reuse(a, re->block, true, reuse, reuse_ctx);
}

/* One mapping per kind of use: sealed bytes in the read-only one, where a write faults (a
 * read-only handle has only that). */
static void *data_of(const tn_arena *a, uint64_t block, bool sealed)
{
	return (sealed && a->ro ? a->ro : a->base) + block + BLOCK_HDR;
}

int tn__arena_hold(tn_arena *a, const char *name, const tn_arena_handle *handle,
		   tn__arena_reuse_fn reuse, void *reuse_ctx, struct tn__arena_held *ret,
		   const char *fn)
{
	size_t len = 0;
	int r;

	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (name && (r = check_name(name, fn, &len)))
		return r;

	if (a->read_only) {
		struct tn__arena_remote_entry re;
		const tn_arena_entry *info = &re.entry;
		if ((r = hold_remote(a, name, handle, reuse, reuse_ctx, &re, fn)) < 0)
			return r;
		ret->desc = (struct tn__arena_desc){
			.block = re.block,
			.dtype = (uint32_t)info->dtype,
			.ndim = (uint32_t)info->ndim,
			.storage_offset = info->storage_offset,
			.flags = TN_ARENA_ENTRY_SEALED,
		};
		memcpy(ret->desc.sizes, info->sizes, (size_t)info->ndim * sizeof(int64_t));
		memcpy(ret->desc.strides, info->strides, (size_t)info->ndim * sizeof(int64_t));
		ret->handle = info->handle;
		ret->bytes = info->block_bytes;
		ret->sealed = info->flags & TN_ARENA_ENTRY_SEALED;
		ret->data = data_of(a, re.block, true);
		memcpy(ret->name, info->name, sizeof(ret->name));
		return r;
	}

	pthread_mutex_lock(&a->local_lock);
	/* Room for a new local record before the shared hold is taken. */
	if ((r = tn__local_reserve(a))) {
		pthread_mutex_unlock(&a->local_lock);
		return r;
	}
	if ((r = tn__arena_lock(a))) {
		pthread_mutex_unlock(&a->local_lock);
		return r;
	}
	uint32_t index;
	uint64_t bytes;
	bool wake = false;
	if ((r = find_resident_locked(a, name, len, handle, fn, &index, &bytes, &wake))) {
		tn__arena_unlock(a);
		pthread_mutex_unlock(&a->local_lock);
		if (wake)
			tn__arena_restore_wake(a);
		return r;
	}
	/* The entry was checked by find_entry_locked; read what the layer above needs of it
	 * (its dims only) while the lock keeps it from changing. */
	const struct dir_entry *e = tn__entry_at(a, index);
	const uint64_t block = e->block;
	struct block *b = tn__block_at(a, block);
	const uint32_t ndim = (uint32_t)(e->dtype_ndim >> 32);
	const uint32_t eflags = (uint32_t)(e->block_gen_flags >> 32);
	/* Sealed by this name or by another one over the same block. */
	const bool sealed = (eflags & TN_ARENA_ENTRY_SEALED) ||
			    (b->magic_flags >> 32 & BLOCK_FLAG_SEALED);
	ret->desc = (struct tn__arena_desc){
		.block = block,
		.dtype = (uint32_t)e->dtype_ndim,
		.ndim = ndim,
		.storage_offset = e->storage_offset,
		.flags = sealed ? TN_ARENA_ENTRY_SEALED : 0,
	};
	memcpy(ret->desc.sizes, e->sizes, (size_t)ndim * sizeof(int64_t));
	memcpy(ret->desc.strides, e->strides, (size_t)ndim * sizeof(int64_t));
	ret->handle = (tn_arena_handle){ index, entry_gen(e) };
	ret->bytes = bytes;
	ret->sealed = sealed;
	memcpy(ret->name, e->name, e->name_len);
	ret->name[e->name_len] = '\0';
	tn__hold_set(a, b, a->slot, true);
	if (TN_LIKELY(tn__arena_lookup_clock))
		tn__entry_touch(a, tn__entry_at(a, index));
	tn__client_at(a, a->slot)->lookups++;
	tn__tx_commit(a);
	tn__arena_unlock(a);
	ret->data = data_of(a, block, sealed);
	return count_or_reuse(a, block, sealed, reuse, reuse_ctx);
}

int tn__arena_hold_for(tn_arena *a, int slot, const char *name, const tn_arena_handle *handle,
		       struct tn__arena_remote_entry *ret)
{
	static const char fn[] = "tn__arena_hold_for";
	size_t len = 0;
	int r;
	if ((r = tn__arena_check(a, true, fn)))
		return r;
	if (!ret || (!name && !handle))
		return tn__error(TN_EINVAL, "%s: NULL %s", fn, ret ? "name and handle" : "ret");
	if (slot < 0 || slot >= (int)a->max_clients)
		return tn__error(TN_ERANGE, "%s: slot %d outside [0, %u)", fn, slot, a->max_clients);
	if (name && (r = check_name(name, fn, &len)))
		return r;
	if ((r = tn__arena_lock(a)))
		return r;
	uint32_t index;
	uint64_t bytes;
	bool wake = false;
	if ((uint32_t)tn__client_at(a, slot)->state_gen != CLIENT_ATTACHED) {
		r = tn__error(TN_ERANGE, "%s: slot %d of arena %s is not attached", fn, slot,
			      a->path);
	} else if ((r = find_resident_locked(a, name, len, handle, fn, &index, &bytes,
					     &wake)) == 0) {
		struct dir_entry *e = tn__entry_at(a, index);
		struct tn__arena_remote_entry out;
		entry_to_public(index, e, bytes, &out.entry);
		out.block = e->block;
		tn__hold_set(a, tn__block_at(a, e->block), slot, true);
		tn__entry_touch(a, e);
		tn__client_at(a, slot)->lookups++;
		tn__tx_commit(a);
		*ret = out;
	}
	tn__arena_unlock(a);
	if (wake)
		tn__arena_restore_wake(a);
	return r;
}

/* Find @name under the lock; on success the lock stays held. */
static int find_locked(tn_arena *a, const char *name, const char *fn, uint32_t *ret_index)
{
	size_t len;
	int r;
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if ((r = check_name(name, fn, &len)) || (r = tn__arena_lock(a)))
		return r;
	int64_t i = probe(a, name, len, tn__name_hash(name, len), NULL);
	if (i < 0) {
		tn__arena_unlock(a);
		return tn__error(TN_ENOENT, "%s: no tensor '%s' in arena %s", fn, name, a->path);
	}
	*ret_index = (uint32_t)i;
	return 0;
}

TN_EXPORT int tn_arena_unpublish(tn_arena *a, const char *name)
{
	uint32_t index;
	if (tn__arena_ok(a) && a->read_only)
		return tn__read_only_error(a, "tn_arena_unpublish");
	int r = find_locked(a, name, "tn_arena_unpublish", &index);
	if (r)
		return r;
	struct dir_entry *e = tn__entry_at(a, index);
	/* Lookups waiting for a spilled entry's restore look again, and find it gone. */
	bool waited = tn__entry_spilled(e) &&
		      (e->block_gen_flags >> 32 & TN_ARENA_ENTRY_RESTORING);
	uint64_t hash = e->hash;
	tn__entry_delete(a, index);
	r = tn__entry_unpin(a, e);
	tn__tx_commit(a);
	tn__arena_unlock(a);
	if (waited)
		tn__arena_notify(a, hash);
	return r;
}

TN_EXPORT int tn_arena_set_retention(tn_arena *a, const char *name,
				     enum tn_arena_retention retention, int64_t pin_seconds)
{
	static const char fn[] = "tn_arena_set_retention";
	uint32_t index;
	if (tn__arena_ok(a) && a->read_only)
		return tn__read_only_error(a, fn);
	if ((unsigned)retention > TN_ARENA_CACHE)
		return tn__error(TN_EINVAL, "%s: retention %d is none of TN_ARENA_PINNED, "
				 "TN_ARENA_SOFT_PINNED and TN_ARENA_CACHE", fn, (int)retention);
	uint64_t until = 0;
	if (retention == TN_ARENA_SOFT_PINNED) {
		until = tn__coarse_now_ns() / 1000000000u + (uint64_t)pin_seconds;
		if (pin_seconds < 1 || until > UINT32_MAX)
			return tn__error(TN_EINVAL, "%s: a soft pin lasts 1 s to the year 2106, not "
					 "%" PRId64 " s", fn, pin_seconds);
	} else if (pin_seconds) {
		return tn__error(TN_EINVAL, "%s: pin_seconds is for TN_ARENA_SOFT_PINNED (0 here, "
				 "not %" PRId64 ")", fn, pin_seconds);
	}
	int r = find_locked(a, name, fn, &index);
	if (r)
		return r;
	struct dir_entry *e = tn__entry_at(a, index);
	if ((r = entry_check(a, e, fn, NULL)) == 0) {
		uint64_t cls = retention == TN_ARENA_CACHE	  ? TN_ARENA_ENTRY_CACHE
			       : retention == TN_ARENA_SOFT_PINNED ? TN_ARENA_ENTRY_SOFT_PINNED
								   : 0;
		uint64_t w = e->block_gen_flags &
			     ~((uint64_t)(TN_ARENA_ENTRY_CACHE | TN_ARENA_ENTRY_SOFT_PINNED) << 32);
		tn__tx_set(a, &e->block_gen_flags, w | cls << 32);
		tn__tx_set(a, &e->len_pin, (uint64_t)e->name_len | until << 32);
		tn__tx_commit(a);
	}
	tn__arena_unlock(a);
	return r;
}

int tn__arena_seal_name(tn_arena *a, const char *name, uint64_t *ret_block)
{
	uint32_t index;
	if (tn__arena_ok(a) && a->read_only)
		return tn__read_only_error(a, "tn_arena_seal");
	int r = find_locked(a, name, "tn_arena_seal", &index);
	if (r)
		return r;
	struct dir_entry *e = tn__entry_at(a, index);
	if ((r = entry_check(a, e, "tn_arena_seal", NULL))) {
		tn__arena_unlock(a);
		return r;
	}
	if (tn__entry_spilled(e)) {
		/* Nobody holds a spilled entry's bytes: the restore seals its new block. */
		tn__tx_set(a, &e->block_gen_flags,
			   e->block_gen_flags | (uint64_t)TN_ARENA_ENTRY_SEALED << 32);
		tn__tx_commit(a);
		tn__arena_unlock(a);
		tn__arena_notify(a, tn__name_hash(name, strlen(name)));
		*ret_block = 0;
		return 0;
	}
	uint64_t block = e->block;
	struct block *b = tn__block_at(a, block);
	if (!(b->magic_flags >> 32 & BLOCK_FLAG_SEALED) && tn__held_by_others(a, b)) {
		tn__arena_unlock(a);
		return tn__error(TN_EBUSY, "tn_arena_seal: cannot seal '%s': other processes hold "
				 "its block and may write to it (seal before sharing)", name);
	}
	tn__tx_set(a, &e->block_gen_flags, e->block_gen_flags | (uint64_t)TN_ARENA_ENTRY_SEALED << 32);
	tn__tx_set(a, &b->magic_flags, b->magic_flags | (uint64_t)BLOCK_FLAG_SEALED << 32);
	tn__tx_commit(a);
	tn__arena_unlock(a);
	tn__arena_notify(a, tn__name_hash(name, strlen(name)));
	*ret_block = block;
	return 0;
}

void tn__arena_sealed_note(tn_arena *a, const char *name)
{
	if (!tn__arena_ok(a) || !a->has_remote || !a->remote.sealed)
		return;
	struct tn__saved_error keep;
	tn__error_save(&keep);
	a->remote.sealed(a->remote.ctx, name);
	tn__error_restore(&keep);
}

int tn__arena_reseal(tn_arena *a, tn_arena_handle handle)
{
	static const char fn[] = "tn__arena_reseal";
	int r = tn__arena_check(a, true, fn);
	if (r)
		return r;
	if (handle.index >= a->dir_slots)
		return tn__error(TN_ESTALE, "%s: no entry %u in arena %s", fn, handle.index,
				 a->path);
	if ((r = tn__arena_lock(a)))
		return r;
	struct dir_entry *e = tn__entry_at(a, handle.index);
	if (entry_state(e) != ENTRY_USED || entry_gen(e) != handle.generation) {
		tn__arena_unlock(a);
		return tn__error(TN_ESTALE, "%s: entry %u of arena %s was unpublished or replaced",
				 fn, handle.index, a->path);
	}
	if ((r = entry_check(a, e, fn, NULL))) {
		tn__arena_unlock(a);
		return r;
	}
	if (tn__entry_spilled(e)) {
		tn__arena_unlock(a);
		return tn__error(TN_ESTALE, "%s: entry %u of arena %s was spilled to disk", fn,
				 handle.index, a->path);
	}
	struct block *b = tn__block_at(a, e->block);
	int done = 0;
	if (!(e->block_gen_flags >> 32 & TN_ARENA_ENTRY_SEALED)) {
		tn__tx_set(a, &e->block_gen_flags,
			   e->block_gen_flags | (uint64_t)TN_ARENA_ENTRY_SEALED << 32);
		done = 1;
	}
	if (!(b->magic_flags >> 32 & BLOCK_FLAG_SEALED)) {
		tn__tx_set(a, &b->magic_flags, b->magic_flags | (uint64_t)BLOCK_FLAG_SEALED << 32);
		done = 1;
	}
	/* The name as checked by entry_check, read under the lock. */
	uint64_t hash = tn__name_hash(e->name, e->name_len <= TN_ARENA_NAME_MAX ? e->name_len : 0);
	if (done)
		tn__tx_commit(a);
	tn__arena_unlock(a);
	if (done)
		tn__arena_notify(a, hash);
	return done;
}

/* ---- readers without the lock (read-only handles) ----------------------------------------------
 *
 * A read-only handle cannot take the lock, so it reads the directory while others change it.
 * It copies an entry and works on the copy, taken while the undo log was empty before and
 * after and the entry's state word did not move: no change was under way (a change that began
 * and ended in between can still give a stale answer). Every field of the copy is validated as
 * for a damaged entry, so a torn copy gives a wrong answer at worst, never a read outside the
 * mapping.
 */
bool tn__entry_snapshot(const tn_arena *a, uint32_t index, struct dir_entry *out)
{
	const struct dir_entry *e = tn__entry_at(a, index);
	const _Atomic uint64_t *undo = &a->hdr->undo_count;
	for (int tries = 0; tries < 8; tries++) {
		uint64_t u0 = atomic_load_explicit(undo, memory_order_acquire);
		uint64_t s0 = *(const volatile uint64_t *)&e->state_gen;
		memcpy(out, e, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		uint64_t s1 = *(const volatile uint64_t *)&e->state_gen;
		uint64_t u1 = atomic_load_explicit(undo, memory_order_relaxed);
		out->state_gen = s0;
		if (!u0 && !u1 && s0 == s1)
			return true;
		sched_yield();
	}
	return false;
}

/* Find @name without the lock: a checked copy of its entry and the payload bytes its extent
 * was checked against, or TN_ENOENT/TN_EIO. An answer is believed when nothing changed while
 * it was found: no change under way before and after a miss, or a clean copy of the entry
 * whose state word is the same after the check. Otherwise look again; after a few tries, a
 * copy that passed the check is the (perhaps stale, never inconsistent) answer. */
static int find_unlocked(tn_arena *a, const char *name, const char *fn, uint32_t *ret_index,
			 struct dir_entry *ret_copy, uint64_t *ret_bytes)
{
	const _Atomic uint64_t *undo = &a->hdr->undo_count;
	struct dir_entry copy;
	bool have = false;
	size_t len;
	int r;
	if ((r = check_name(name, fn, &len)))
		return r;
	uint64_t hash = tn__name_hash(name, len);
	for (int tries = 0; tries < 64; tries++, r = 0) {
		if (tries)
			sched_yield();
		uint64_t u0 = tn__quiet_undo(a);
		int64_t i = probe(a, name, len, hash, NULL);
		if (i < 0) {
			if (!u0 && !atomic_load_explicit(undo, memory_order_acquire))
				break;
			continue;
		}
		const struct dir_entry *live = tn__entry_at(a, (uint32_t)i);
		bool clean = tn__entry_snapshot(a, (uint32_t)i, &copy);
		/* The slot may have changed hands between the probe and the copy. */
		if (entry_state(&copy) != ENTRY_USED || copy.name_len != len ||
		    memcmp(copy.name, name, len))
			continue;
		uint64_t bytes;
		r = entry_check(a, &copy, fn, &bytes);
		atomic_thread_fence(memory_order_acquire);
		bool stable = clean && *(const volatile uint64_t *)&live->state_gen == copy.state_gen &&
			      !atomic_load_explicit(undo, memory_order_acquire);
		if (!r && (stable || !have)) {
			memcpy(ret_copy, &copy, sizeof(copy));
			*ret_index = (uint32_t)i;
			*ret_bytes = bytes;
			have = true;
		}
		if (stable)
			return r;
		/* A copy that failed the check while the entry changed shows nothing damaged. */
		r = TN_EBUSY;
	}
	if (have) {
		tn_clear_error();
		return 0;
	}
	if (r)
		return tn__error(TN_EBUSY, "%s: '%s' of arena %s changed at every look; try again",
				 fn, name, a->path);
	return tn__error(TN_ENOENT, "%s: no tensor '%s' in arena %s", fn, name, a->path);
}

TN_EXPORT int tn_arena_info(tn_arena *a, const char *name, tn_arena_entry *ret_entry)
{
	uint32_t index = 0;
	if (!ret_entry)
		return tn__error(TN_EINVAL, "tn_arena_info: NULL ret_entry");
	if (tn__arena_ok(a) && a->read_only) {
		struct dir_entry copy;
		uint64_t bytes = 0;
		int r = find_unlocked(a, name, "tn_arena_info", &index, &copy, &bytes);
		if (!r)
			entry_to_public(index, &copy, bytes, ret_entry);
		return r;
	}
	int r = find_locked(a, name, "tn_arena_info", &index);
	if (r)
		return r;
	struct dir_entry *e = tn__entry_at(a, index);
	uint64_t bytes;
	if (!(r = entry_check(a, e, "tn_arena_info", &bytes)))
		entry_to_public(index, e, bytes, ret_entry);
	tn__arena_unlock(a);
	return r;
}

static int entry_cmp(const void *x, const void *y)
{
	return strcmp(((const tn_arena_entry *)x)->name, ((const tn_arena_entry *)y)->name);
}

TN_EXPORT int tn_arena_list(tn_arena *a, const char *prefix, tn_arena_entry **ret_entries,
			    size_t *ret_count)
{
	static const char fn[] = "tn_arena_list";
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (!ret_entries || !ret_count)
		return tn__error(TN_EINVAL, "%s: NULL ret_entries or ret_count", fn);
	size_t plen = prefix ? strlen(prefix) : 0;
	bool ro = a->read_only;
	int r = ro ? 0 : tn__arena_lock(a);
	if (r)
		return r;
	/* Under the lock the count is exact; without it, a guess that grows as needed. */
	uint64_t names = a->hdr->names;
	size_t cap = names < a->max_names ? (size_t)names : a->max_names;
	if (ro)
		cap = cap + 16 < a->max_names ? cap + 16 : a->max_names;
	tn_arena_entry *out = cap ? malloc(cap * sizeof(*out)) : NULL;
	size_t n = 0;
	if (cap && !out)
		goto nomem;
	for (uint32_t i = 0; i < a->dir_slots && (ro || n < cap); i++) {
		struct dir_entry copy, *e = tn__entry_at(a, i);
		uint64_t bytes;
		if (entry_state(e) != ENTRY_USED)
			continue;
		if (ro) {
			tn__entry_snapshot(a, i, &copy);
			e = &copy;
			if (entry_state(e) != ENTRY_USED)
				continue;
		}
		if (e->name_len < plen || (plen && memcmp(e->name, prefix, plen)) ||
		    entry_check(a, e, fn, &bytes))
			continue;
		if (n == cap) {
			if (cap >= a->max_names)
				break;
			size_t ncap = 2 * cap < a->max_names ? 2 * cap : a->max_names;
			tn_arena_entry *t = realloc(out, ncap * sizeof(*out));
			if (!t)
				goto nomem;
			out = t;
			cap = ncap;
		}
		entry_to_public(i, e, bytes, &out[n++]);
	}
	if (!ro)
		tn__arena_unlock(a);
	tn_clear_error();
	if (!n) {
		free(out);
		out = NULL;
	}
	if (n)
		qsort(out, n, sizeof(*out), entry_cmp);
	*ret_entries = out;
	*ret_count = n;
	return 0;
nomem:
	if (!ro)
		tn__arena_unlock(a);
	free(out);
	return tn__error(TN_ENOMEM, "%s: out of memory for %zu entries", fn, cap);
}
