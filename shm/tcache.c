/* SPDX-License-Identifier: MIT */
/*
 * Raw blocks and the per-thread cache.
 *
 * tn_arena_alloc's blocks carry BLOCK_FLAG_RAW and this process's hold bit, and nothing else
 * about them is recorded: they cannot be named, so no other process ever holds them, and
 * tn_arena_free checks the header itself. A thread keeps the small raw blocks it frees
 * (BLOCK_FLAG_CACHED, still allocated and held by the slot) for its next allocations of the
 * same size class, so that the pair costs no lock at all. A crash or the handle's last unref
 * frees them with the slot's other holds; tn_arena_trim and thread exit give them back.
 */
#include <string.h>

#include "arena_internal.h"

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
void tn__tcache_forget(tn_arena *a)
{
	pthread_mutex_lock(&tcache_lock);
	for (struct tcache *tc = tcache_list; tc; tc = tc->next)
		if (atomic_load_explicit(&tc->arena, memory_order_relaxed) == a)
			atomic_store_explicit(&tc->arena, NULL, memory_order_release);
	pthread_mutex_unlock(&tcache_lock);
}

/* tn_arena_alloc past the thread's cache: the checks' errors, and the heap under the lock. Out
 * of line, so that the cache's path sets up no frame for it. */
static __attribute__((noinline)) int alloc_slow(tn_arena *a, size_t nbytes, void **ret_ptr)
{
	static const char fn[] = "tn_arena_alloc";
	uint64_t need = 0, align = 0, off = 0;
	int r;

	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (!ret_ptr || !nbytes)
		return tn__error(TN_EINVAL, "%s: %s", fn, ret_ptr ? "0 bytes" : "NULL ret_ptr");
	struct tcache *tc = tls_tcache;
	/* Here, not before the fast path: a read-only handle never has a thread cache. */
	if (a->read_only)
		return tn__read_only_error(a, fn);
	if ((r = tn__block_request(a, nbytes, &need, &align, fn)))
		return r;
	uint64_t deadline = 0;
	for (;;) {
		uint32_t seq = tn__arena_freed_seq(a);
		tn__alloc_spill_wait = false;
		if ((r = tn__arena_lock(a)))
			return r;
		r = tn__heap_alloc_locked(a, nbytes, need, align, BLOCK_FLAG_RAW, &off, fn);
		tn__arena_unlock(a);
		/* A spilling arena: room comes when tensord has written entries out. */
		if (r != TN_ENOMEM || !tn__alloc_spill_wait ||
		    !tn__arena_spill_wait(a, seq, &deadline))
			break;
	}
	if (r == TN_ENOMEM && tc &&
	    atomic_load_explicit(&tc->arena, memory_order_relaxed) == a) {
		/* The blocks this thread keeps may be what is missing. */
		tcache_release(tc);
		if ((r = tn__arena_lock(a)))
			return r;
		r = tn__heap_alloc_locked(a, nbytes, need, align, BLOCK_FLAG_RAW, &off, fn);
		tn__arena_unlock(a);
	}
	if (r)
		return r;
	*ret_ptr = a->base + off + BLOCK_HDR;
	return 0;
}

TN_EXPORT int tn_arena_alloc(tn_arena *a, size_t nbytes, void **ret_ptr)
{
	struct tcache *tc = tls_tcache;
	if (TN_LIKELY(tc && ret_ptr && nbytes && nbytes <= TC_MAX_BLOCK - BLOCK_HDR &&
		      atomic_load_explicit(&tc->arena, memory_order_relaxed) == a && tn__arena_ok(a))) {
		uint64_t need = tn__round_up(nbytes, TN_ARENA_ALIGNMENT) + BLOCK_HDR;
		unsigned c = (unsigned)((need < BLOCK_MIN ? BLOCK_MIN : need) / TN_ARENA_ALIGNMENT);
		if (tc->n[c]) {
			/* A block of this class the thread freed: no lock, no system call. */
			uint64_t off = tc->off[c][--tc->n[c]];
			struct block *b = tn__block_at(a, off);
			b->magic_flags = BLOCK_MAGIC_USED | (uint64_t)BLOCK_FLAG_RAW << 32;
			*ret_ptr = a->base + off + BLOCK_HDR;
			return 0;
		}
	}
	return alloc_slow(a, nbytes, ret_ptr);
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
	int r = tn__arena_check(a, true, "tn_arena_trim");
	if (r)
		return r;
	struct tcache *tc = tls_tcache;
	if (!tc || atomic_load_explicit(&tc->arena, memory_order_relaxed) != a)
		return 0;
	return (int64_t)tcache_release(tc);
}

/* In the child of a fork(): the thread's cache holds blocks of the parent's slot. */
void tn__tcache_fork_child(void)
{
	struct tcache *tc = tls_tcache;
	if (tc) {
		atomic_store_explicit(&tc->arena, NULL, memory_order_relaxed);
		memset(tc->n, 0, sizeof(tc->n));
	}
}
