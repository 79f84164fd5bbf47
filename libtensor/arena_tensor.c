/* SPDX-License-Identifier: MIT */
/*
 * Tensors over arenas: publishing and looking up tensors by name, the allocator that puts CPU
 * storages in an arena, and the thread's current arena. shm/ keeps the directory of plain
 * descriptors and this process's holds on blocks (shm/shm.h); this file turns a tensor into a
 * descriptor, and a descriptor back into a tensor over the block.
 *
 * A process has one storage per block and mapping however often it publishes or looks the
 * block up: the read-write one (allocated here, or looked up unsealed) and the read-only one of
 * sealed tensors. A table keyed by arena handle and block keeps weak references to them, so
 * that a second lookup finds the live one. Every storage over a block counts one use of it in
 * shm's holds table; its deleter (the allocator's free, for an allocated one) forgets it here
 * before giving that use back, so no entry outlives the storages it names, nor the handle that
 * their uses keep alive and whose address is half its key.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "../shm/shm.h"

/* ---- this process's storages over arena blocks ----------------------------------------------- */

/* Weak references to the storages over one block of one arena handle. */
struct kept {
	const tn_arena *arena; /* NULL: an empty slot */
	uint64_t block;
	tn_storage *rw; /* over the read-write mapping */
	tn_storage *ro; /* over the read-only mapping (sealed tensors) */
};

/* Guards the table, and the readonly flags set through it. Never held while calling into shm,
 * whose calls take the arena's locks and may wait for another process. */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept; /* open addressing, linear probing, kept_cap a power of two */
static size_t kept_cap, kept_count;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

/* A fork() while another thread holds the lock must not leave it held in the child, which may
 * go on to use arenas of its own: the forking thread takes it first and both sides let go. */
static void kept_prepare(void)
{
	pthread_mutex_lock(&kept_lock);
}

static void kept_release(void)
{
	pthread_mutex_unlock(&kept_lock);
}

static void kept_init(void)
{
	pthread_atfork(kept_prepare, kept_release, kept_release);
}

static void kept_lock_take(void)
{
	pthread_once(&kept_once, kept_init);
	pthread_mutex_lock(&kept_lock);
}

static size_t kept_hash(const tn_arena *a, uint64_t block, size_t cap)
{
	uint64_t key = (uint64_t)(uintptr_t)a >> 4 ^ block >> 6;
	return (size_t)(key * UINT64_C(0x9e3779b97f4a7c15) >> 32) & (cap - 1);
}

static struct kept *kept_find(const tn_arena *a, uint64_t block)
{
	if (!kept_cap)
		return NULL;
	for (size_t i = kept_hash(a, block, kept_cap);; i = (i + 1) & (kept_cap - 1)) {
		if (kept[i].arena == a && kept[i].block == block)
			return &kept[i];
		if (!kept[i].arena)
			return NULL;
	}
}

/* Make room for one more entry (moves the entries); false when out of memory. */
static bool kept_room(void)
{
	if ((kept_count + 1) * 4 <= kept_cap * 3)
		return true;
	size_t cap = kept_cap ? 2 * kept_cap : 64;
	struct kept *t = tn__calloc(cap, sizeof(*t));
	if (!t)
		return false;
	for (size_t i = 0; i < kept_cap; i++) {
		if (!kept[i].arena)
			continue;
		size_t j = kept_hash(kept[i].arena, kept[i].block, cap);
		while (t[j].arena)
			j = (j + 1) & (cap - 1);
		t[j] = kept[i];
	}
	tn__free(kept);
	kept = t;
	kept_cap = cap;
	return true;
}

/* A new entry; kept_room made room for it. */
static struct kept *kept_insert(const tn_arena *a, uint64_t block)
{
	size_t i = kept_hash(a, block, kept_cap);
	while (kept[i].arena)
		i = (i + 1) & (kept_cap - 1);
	kept[i] = (struct kept){ .arena = a, .block = block };
	kept_count++;
	return &kept[i];
}

/* Remove an entry, shifting later ones of its probe run back (no tombstones). */
static void kept_remove(struct kept *k)
{
	size_t i = (size_t)(k - kept), mask = kept_cap - 1;
	kept[i].arena = NULL;
	for (size_t j = (i + 1) & mask; kept[j].arena; j = (j + 1) & mask) {
		size_t home = kept_hash(kept[j].arena, kept[j].block, kept_cap);
		/* Move j back to i when i lies cyclically in [home, j). */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			kept[i] = kept[j];
			kept[j].arena = NULL;
			i = j;
		}
	}
	kept_count--;
}

static bool storage_dead(const tn_storage *s)
{
	return s && atomic_load_explicit(&s->refcount, memory_order_acquire) == 0;
}

/* Drop the weak references of @k whose storages are gone; whether none is left. */
static bool kept_prune(struct kept *k)
{
	if (storage_dead(k->rw))
		k->rw = tn_storage_weak_unref(k->rw);
	if (storage_dead(k->ro))
		k->ro = tn_storage_weak_unref(k->ro);
	return !k->rw && !k->ro;
}

/* A storage whose bytes are the block's data at @data is gone: forget it, then give back the
 * use of the block it counted. */
static void give_back(tn_arena *a, const void *data)
{
	/* A storage inherited across fork(): its use and the table's entry are the parent's. */
	if (!tn__arena_live(a))
		return;
	uint64_t block = tn__arena_block_of(a, data, NULL);
	kept_lock_take();
	struct kept *k = kept_find(a, block);
	if (k && kept_prune(k))
		kept_remove(k);
	pthread_mutex_unlock(&kept_lock);
	tn__arena_release(a, block);
}

static void lookup_deleter(void *data, void *ctx)
{
	give_back(ctx, data);
}

/* tn__arena_hold's reuse hook: this process's live storage over @block in the mapping @sealed
 * names, in *(tn_storage **)@ctx with a new reference. */
static bool reuse_storage(void *ctx, tn_arena *a, uint64_t block, bool sealed)
{
	tn_storage *s = NULL;
	kept_lock_take();
	struct kept *k = kept_find(a, block);
	if (k) {
		kept_prune(k);
		s = tn_storage_weak_lock(sealed ? k->ro : k->rw);
	}
	pthread_mutex_unlock(&kept_lock);
	*(tn_storage **)ctx = s;
	return s != NULL;
}

/* A new storage over the block @h names, for a lookup that counted one use of it, which the
 * storage keeps until its deleter runs; remembered for the process's later lookups. */
static int new_storage(tn_arena *a, const struct tn__arena_held *h, const char *fn,
		       tn_storage **ret)
{
	bool sealed = h->desc.flags & TN_ARENA_ENTRY_SEALED;
	uint64_t block = h->desc.block;
	tn_storage *s = NULL;
	int r = 0;

	kept_lock_take();
	struct kept *k = kept_find(a, block);
	if (k) {
		kept_prune(k);
		/* Another thread's lookup made one since our hook looked. */
		s = tn_storage_weak_lock(sealed ? k->ro : k->rw);
	}
	if (s) {
		pthread_mutex_unlock(&kept_lock);
		tn__arena_release(a, block);
		*ret = s;
		return 0;
	}
	if (!k && !kept_room())
		r = tn__error(TN_ENOMEM, "%s: out of memory", fn);
	else
		r = tn_storage_from_blob((tn_device){ TN_DEVICE_CPU, 0 }, h->data, h->bytes,
					 lookup_deleter, a, &s);
	if (r) {
		if (k && !k->rw && !k->ro)
			kept_remove(k);
		pthread_mutex_unlock(&kept_lock);
		tn__arena_release(a, block);
		return r;
	}
	if (!k)
		k = kept_insert(a, block);
	s->readonly = sealed;
	tn_storage **weak = sealed ? &k->ro : &k->rw;
	tn_storage_weak_unref(*weak); /* one that died since the prune */
	*weak = tn_storage_weak_ref(s);
	pthread_mutex_unlock(&kept_lock);
	*ret = s;
	return 0;
}

/* ---- the directory, in tensors --------------------------------------------------------------- */

TN_EXPORT int tn_arena_publish(tn_arena *a, const char *name, const tn_tensor *t, unsigned flags,
			       tn_arena_handle *ret_handle)
{
	static const char fn[] = "tn_arena_publish";
	int r;

	if ((r = tn__arena_check(a, true, fn)) || (r = tn__arena_check_name(name, fn)))
		return r;
	if (flags & ~(TN_ARENA_SEAL | TN_ARENA_REPLACE | TN_ARENA_EVICTABLE))
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	tn_storage *s = tn_tensor_storage(t);
	if (!s)
		return tn__error(TN_EBADF, "%s: not a tensor handle", fn);
	int ndim = tn_tensor_ndim(t);
	if (ndim > TN_ARENA_MAX_DIMS)
		return tn__error(TN_EINVAL, "%s: '%s' has %d dims; a published tensor has at most %d",
				 fn, name, ndim, TN_ARENA_MAX_DIMS);
	bool in_ro = false;
	uint64_t block = s->data ? tn__arena_block_of(a, s->data, &in_ro) : 0;
	if (!block)
		return tn__error(TN_EINVAL, "%s: the storage of '%s' is not a block of arena %s "
				 "(allocate it with tn_arena_allocator or under tn_arena_use)", fn,
				 name, tn_arena_path(a));
	struct tn__arena_desc desc = {
		.block = block,
		.dtype = (uint32_t)tn_tensor_dtype(t),
		.ndim = (uint32_t)ndim,
		.storage_offset = tn_tensor_storage_offset(t),
	};
	memcpy(desc.sizes, tn_tensor_sizes(t), (size_t)ndim * sizeof(int64_t));
	memcpy(desc.strides, tn_tensor_strides(t), (size_t)ndim * sizeof(int64_t));

	/* Remember the storage before the name exists, so that this process's own lookups reuse
	 * it as soon as they can find the name: the read-write mapping's storage of the block, if
	 * the process has none yet. */
	kept_lock_take();
	/* The bytes of a read-only storage (a sealed tensor looked up) stay sealed. */
	if (s->readonly)
		desc.flags = TN_ARENA_ENTRY_SEALED;
	struct kept *k = kept_find(a, block);
	if (!k && !kept_room()) {
		pthread_mutex_unlock(&kept_lock);
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	}
	if (!k)
		k = kept_insert(a, block);
	kept_prune(k);
	bool added = !in_ro && !k->rw;
	if (added)
		k->rw = tn_storage_weak_ref(s);
	else if (!k->rw && !k->ro)
		kept_remove(k);
	pthread_mutex_unlock(&kept_lock);

	tn_arena_handle handle;
	uint32_t eflags = 0;
	r = tn__arena_publish_desc(a, name, &desc, flags, &handle, &eflags, fn);

	/* Undo the remembering of a failed publish; a sealed publish seals the storage. */
	if ((r && added) || (!r && eflags)) {
		kept_lock_take();
		if (r && added && (k = kept_find(a, block)) && k->rw == s) {
			k->rw = tn_storage_weak_unref(s);
			if (!k->ro)
				kept_remove(k);
		}
		if (!r && eflags)
			s->readonly = true;
		pthread_mutex_unlock(&kept_lock);
	}
	if (r)
		return r;
	if (eflags)
		tn__arena_sealed_note(a, name);
	if (ret_handle)
		*ret_handle = handle;
	return 0;
}

/* Look up by name (@name non-NULL) or by handle. */
static int lookup(tn_arena *a, const char *name, const tn_arena_handle *handle,
		  tn_tensor **ret_tensor, tn_arena_handle *ret_handle, bool *ret_sealed,
		  const char *fn)
{
	struct tn__arena_held h;
	tn_storage *s;
	int r;

	if ((r = tn__arena_check(a, false, fn)))
		return r;
	if (!ret_tensor)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", fn);
	/* A block this process has a storage over (the common case of a second lookup) is
	 * answered by that storage, with no use counted and given back. */
	s = NULL;
	if ((r = tn__arena_hold(a, name, handle, reuse_storage, &s, &h, fn)) < 0)
		return r;
	if (r == 0 && (r = new_storage(a, &h, fn, &s)))
		return r;
	r = tn_tensor_new(s, h.desc.storage_offset, (int)h.desc.ndim, h.desc.sizes, h.desc.strides,
			  (enum tn_dtype)h.desc.dtype, ret_tensor);
	tn_storage_unref(s);
	if (r == TN_ENOMEM)
		return r;
	if (r) {
		/* Copied first: the message is formatted into the buffer it is read from. */
		char why[256];
		snprintf(why, sizeof(why), "%s", tn_last_error());
		return tn__error(TN_EIO, "%s: entry '%s' of arena %s does not fit its block: %s", fn,
				 h.name, tn_arena_path(a), why);
	}
	if (ret_handle)
		*ret_handle = h.handle;
	if (ret_sealed)
		*ret_sealed = h.sealed;
	return 0;
}

/* ---- waiting lookups ------------------------------------------------------------------------- */

/* One look: 0 with *ret_tensor when the name is there (and sealed if asked), TN_ENOENT when it
 * is not yet, TN_EAGAIN while it is spilled to disk (tensord was asked to read it back), or
 * another error. */
static int look(tn_arena *a, const char *name, const tn_arena_handle *handle, bool want_sealed,
		tn_tensor **ret_tensor, tn_arena_handle *ret_handle, const char *fn)
{
	bool sealed = false;
	tn_tensor *t = NULL;
	int r = lookup(a, name, handle, &t, ret_handle, &sealed, fn);
	if (r == 0 && want_sealed && !sealed) {
		tn_tensor_unref(t);
		return TN_ENOENT;
	}
	if (r == 0)
		*ret_tensor = t;
	return r;
}

/* Look until the name is there (or, unless @wait_missing, until it is no longer spilled), up to
 * @timeout ns: sleeping on the futex word of the name's bucket (of the whole arena for a
 * handle), which every publish, seal and restore of the name advances. */
static int look_until(tn_arena *a, const char *name, const tn_arena_handle *handle,
		      bool want_sealed, bool wait_missing, int64_t timeout, tn_tensor **ret_tensor,
		      tn_arena_handle *ret_handle, const char *fn)
{
	uint64_t start = tn__mono_ns(), deadline = tn__arena_deadline(start, timeout);
	int announced = tn__arena_wait_begin(a);
	if (announced < 0)
		return announced;
	/* The word of the name's bucket: publishes of names in other buckets leave it alone. */
	int bucket = name ? tn__arena_wait_bucket(name) : -1;
	int r;
	for (;;) {
		/* Read the word after the announcement and before the look: a publish after the
		 * look moves it, and the sleep returns at once. */
		uint32_t seq = tn__arena_wait_seq(a, bucket);
		r = look(a, name, handle, want_sealed, ret_tensor, ret_handle, fn);
		if (r != TN_EAGAIN && (r != TN_ENOENT || !wait_missing))
			break;
		if (tn__arena_wait(a, bucket, seq, deadline, announced) == TN_ETIMEDOUT) {
			double s = (double)(tn__mono_ns() - start) / 1e9;
			if (r == TN_EAGAIN)
				r = tn__error(TN_ETIMEDOUT, "%s: '%s' of arena %s is spilled to disk and "
					      "tensord did not read it back within %.3f s", fn,
					      name ? name : "(handle)", tn_arena_path(a), s);
			else
				r = tn__error(TN_ETIMEDOUT, "%s: '%s' was not %s in arena %s within "
					      "%.3f s", fn, name, want_sealed ? "published sealed"
					      : "published", tn_arena_path(a), s);
			break;
		}
	}
	tn__arena_wait_end(a);
	return r;
}

/* How long a lookup not told otherwise waits for a restore; 0 in tensord. */
static int64_t restore_wait(void)
{
	return atomic_load_explicit(&tn__arena_restore_wait_ns, memory_order_relaxed);
}

TN_EXPORT int tn_arena_lookup(tn_arena *a, const char *name, tn_tensor **ret_tensor,
			      tn_arena_handle *ret_handle)
{
	static const char fn[] = "tn_arena_lookup";
	int r = lookup(a, name, NULL, ret_tensor, ret_handle, NULL, fn);
	if (r == TN_EAGAIN && restore_wait())
		r = look_until(a, name, NULL, false, false, restore_wait(), ret_tensor, ret_handle,
			       fn);
	return r;
}

TN_EXPORT int tn_arena_lookup_handle(tn_arena *a, tn_arena_handle handle, tn_tensor **ret_tensor)
{
	static const char fn[] = "tn_arena_lookup_handle";
	int r = lookup(a, NULL, &handle, ret_tensor, NULL, NULL, fn);
	if (r == TN_EAGAIN && restore_wait())
		r = look_until(a, NULL, &handle, false, false, restore_wait(), ret_tensor, NULL, fn);
	return r;
}

TN_EXPORT int tn_arena_lookup_wait(tn_arena *a, const char *name,
				   const tn_arena_lookup_options *opts, tn_tensor **ret_tensor,
				   tn_arena_handle *ret_handle)
{
	static const char fn[] = "tn_arena_lookup_wait";
	int64_t timeout = opts ? opts->timeout_ns : 0;
	uint32_t flags = opts ? opts->flags : 0;
	int r;

	if ((r = tn__arena_check(a, false, fn)) || (r = tn__arena_check_name(name, fn)))
		return r;
	if (!ret_tensor)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", fn);
	if (opts && (flags & ~TN_ARENA_LOOKUP_SEALED || opts->reserved))
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	bool want_sealed = flags & TN_ARENA_LOOKUP_SEALED;
	bool wait_missing = timeout != 0 || want_sealed;
	/* The first look costs what tn_arena_lookup costs: nothing is announced before it. */
	r = look(a, name, NULL, want_sealed, ret_tensor, ret_handle, fn);
	if (r == TN_EAGAIN) {
		/* Spilled: waited for as tn_arena_lookup waits, unless told how long. */
		if (timeout == 0 && !(timeout = restore_wait()))
			return r;
	} else if (r != TN_ENOENT || !wait_missing) {
		return r;
	}
	return look_until(a, name, NULL, want_sealed, wait_missing, timeout, ret_tensor,
			  ret_handle, fn);
}

/* ---- private copy-on-write views ------------------------------------------------------------- */

static void *allocator_alloc(void *ctx, size_t nbytes);

/* The arena handle whose block a CPU storage lies in, or NULL. */
static tn_arena *arena_of(const tn_storage *s)
{
	if (s->deleter == lookup_deleter)
		return s->deleter_ctx;
	if (s->allocator && s->allocator->alloc == allocator_alloc)
		return s->allocator->ctx;
	return NULL;
}

struct cow {
	void *map;
	size_t len;
	tn_storage *src; /* keeps the block held while its pages are mapped */
};

static void cow_deleter(void *data, void *ctx)
{
	(void)data;
	struct cow *c = ctx;
	munmap(c->map, c->len);
	tn_storage_unref(c->src);
	tn__free(c);
}

TN_EXPORT int tn_arena_cow(const tn_tensor *t, tn_tensor **ret)
{
	static const char fn[] = "tn_arena_cow";
	tn_storage *s = tn_tensor_storage(t);
	if (!s)
		return tn__error(TN_EBADF, "%s: not a tensor handle", fn);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", fn);
	tn_arena *a = arena_of(s);
	struct tn__arena_mapping map;
	if (!a || !s->data || tn__arena_mapping(a, &map))
		return tn__error(TN_EINVAL, "%s: the tensor's storage is not a block of an arena "
				 "this process has attached", fn);
	const uint8_t *p = s->data;
	uint64_t off;
	if (p >= (const uint8_t *)map.base && p < (const uint8_t *)map.base + map.size)
		off = (uint64_t)(p - (const uint8_t *)map.base);
	else if (map.ro && p >= (const uint8_t *)map.ro && p < (const uint8_t *)map.ro + map.size)
		off = (uint64_t)(p - (const uint8_t *)map.ro);
	else
		return tn__error(TN_EINVAL, "%s: the tensor's bytes lie outside its arena's mapping",
				 fn);
	uint64_t page = map.page_size, start = off / page * page;
	uint64_t end = (off + (s->nbytes ? s->nbytes : 1) + page - 1) / page * page;
	struct cow *c = tn__calloc(1, sizeof(*c));
	if (!c)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	c->len = (size_t)(end - start);
	c->map = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, tn_arena_fd(a),
		      (off_t)start);
	if (c->map == MAP_FAILED) {
		int e = errno;
		tn__free(c);
		return tn__error(TN_ENOMEM, "%s: cannot map %zu bytes of arena %s privately: %s", fn,
				 (size_t)(end - start), tn_arena_path(a), strerror(e));
	}
	c->src = tn_storage_ref(s);
	tn_storage *ns = NULL;
	int r = tn_storage_from_blob(s->device, (uint8_t *)c->map + (off - start), s->nbytes,
				     cow_deleter, c, &ns);
	if (r) {
		cow_deleter(NULL, c);
		return r;
	}
	r = tn_tensor_new(ns, tn_tensor_storage_offset(t), tn_tensor_ndim(t), tn_tensor_sizes(t),
			  tn_tensor_strides(t), tn_tensor_dtype(t), ret);
	tn_storage_unref(ns);
	return r;
}

TN_EXPORT int tn_arena_seal(tn_arena *a, const char *name)
{
	uint64_t block;
	int r = tn__arena_seal_name(a, name, &block);
	if (r)
		return r;
	/* This process's writable storage of the block becomes read-only too. */
	kept_lock_take();
	struct kept *k = kept_find(a, block);
	if (k && k->rw && atomic_load(&k->rw->refcount) > 0)
		k->rw->readonly = true;
	pthread_mutex_unlock(&kept_lock);
	tn__arena_sealed_note(a, name);
	return 0;
}

/* ---- the allocator adapter and the thread's arena -------------------------------------------- */

/* The adapter lives in the bytes each arena handle keeps for this layer, so that it lasts as
 * long as the handle, which every storage it allocated keeps alive. */
struct adapter {
	tn_allocator allocator;
	_Atomic bool ready;
};
_Static_assert(sizeof(struct adapter) <= TN__ARENA_UPPER_BYTES, "the adapter fits its room");

static void *allocator_alloc(void *ctx, size_t nbytes)
{
	void *p = NULL;
	return tn__arena_alloc_held(ctx, nbytes, &p) ? NULL : p;
}

static void allocator_free(void *ctx, void *ptr, size_t nbytes)
{
	(void)nbytes;
	give_back(ctx, ptr);
}

static const tn_allocator *adapter_of(tn_arena *a)
{
	struct adapter *ad = tn__arena_upper(a);
	/* Filled on first use. Acquire, paired with the release below: a thread that sees it
	 * ready sees the fields. */
	if (!atomic_load_explicit(&ad->ready, memory_order_acquire)) {
		kept_lock_take();
		if (!atomic_load_explicit(&ad->ready, memory_order_relaxed)) {
			ad->allocator = (tn_allocator){ .name = "arena", .ctx = a,
							.alloc = allocator_alloc,
							.free = allocator_free };
			atomic_store_explicit(&ad->ready, true, memory_order_release);
		}
		pthread_mutex_unlock(&kept_lock);
	}
	return &ad->allocator;
}

TN_EXPORT const tn_allocator *tn_arena_allocator(tn_arena *a)
{
	return tn__arena_live(a) ? adapter_of(a) : NULL;
}

/* The thread's current arena; the key's destructor drops the reference at thread exit. */
static pthread_key_t current_key;
static pthread_once_t current_once = PTHREAD_ONCE_INIT;

static void current_dtor(void *p)
{
	tn_arena_unref(p);
}

static void current_init(void)
{
	pthread_key_create(&current_key, current_dtor);
}

TN_EXPORT int tn_arena_use(tn_arena *a)
{
	int r;
	if (a && (r = tn__arena_check(a, true, "tn_arena_use")))
		return r;
	pthread_once(&current_once, current_init);
	tn_arena *old = pthread_getspecific(current_key);
	if (old == a)
		return 0;
	if (pthread_setspecific(current_key, a ? tn_arena_ref(a) : NULL)) {
		tn_arena_unref(a);
		return tn__error(TN_ENOMEM, "tn_arena_use: out of memory");
	}
	tn__allocator_set_thread(a ? adapter_of(a) : NULL);
	tn_arena_unref(old);
	return 0;
}

TN_EXPORT tn_arena *tn_arena_current(void)
{
	pthread_once(&current_once, current_init);
	return pthread_getspecific(current_key);
}
