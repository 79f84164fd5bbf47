/* SPDX-License-Identifier: MIT */
/*
 * Pinned (page-locked) host memory: ranges registered with cudaHostRegister, the arenas'
 * mappings among them, and the deferred release of host storages that an asynchronous DMA
 * still reads or writes (PyTorch's CachingHostAllocator_recordEvent, for memory libtensor
 * did not allocate).
 *
 * libtensor keeps its own table of the ranges it registered, sorted and disjoint, so that
 * "is this copy's host side pinned?" is a binary search under a read lock and never a CUDA
 * call: it is asked on every host<->device copy. A range is put in the table marked busy
 * before CUDA is asked to register it (so a concurrent overlapping registration fails at
 * once) and unmarked when CUDA has done it; unregistering marks it busy again first, so that
 * copies stop treating it as pinned before CUDA forgets it.
 *
 * A non_blocking copy between the device and pinned host memory is left running. The host
 * storage is then kept alive by a reference held in a list with an event recorded after the
 * copy; the list is reaped (events queried, references dropped) at the next copy, at
 * tn_cuda_synchronize and tn_cuda_stream_synchronize, and when it grows; the copies still
 * using a range are waited for before the range is unregistered.
 *
 * In the child of a fork() nothing of this holds (page locks are not inherited and CUDA is
 * not usable): the child starts with an empty table and list.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/shm.h"
#include "cuda_internal.h"
#include "pinned.h"

/* A range registered by tn_cuda_arena_register: only tn_cuda_arena_unregister (or the
 * handle's end) unregisters it. */
#define PINNED_ARENA 0x40000000u

/* ---- the table (pure bookkeeping) ---- */

/* realloc, failing when fault injection says so, as tn__malloc does. */
static void *grow(void *p, size_t bytes)
{
	return tn__fault_fires() ? NULL : realloc(p, bytes);
}

/* The first range whose start is > @p. */
static size_t upper_bound(const struct tn__pinned_table *t, uintptr_t p)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->r[mid].start <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int tn__pinned_insert(struct tn__pinned_table *t, uintptr_t start, size_t len, unsigned flags,
		      const char *who)
{
	if (len == 0 || start + len < start)
		return tn__error(TN_EINVAL, "%s: %s range of %zu bytes at %#jx", who,
				 len ? "wrapping" : "empty", len, (uintmax_t)start);
	size_t i = upper_bound(t, start); /* ranges [0, i) start at or before start */
	const struct tn__pinned_range *prev = i > 0 ? &t->r[i - 1] : NULL;
	const struct tn__pinned_range *next = i < t->n ? &t->r[i] : NULL;
	const struct tn__pinned_range *hit = NULL;
	if (prev && prev->start + prev->len > start)
		hit = prev;
	else if (next && next->start < start + len)
		hit = next;
	if (hit)
		return tn__error(TN_EEXIST, "%s: [%#jx, %#jx) overlaps the registered range "
				 "[%#jx, %#jx)", who, (uintmax_t)start, (uintmax_t)(start + len),
				 (uintmax_t)hit->start, (uintmax_t)(hit->start + hit->len));
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		struct tn__pinned_range *r = grow(t->r, cap * sizeof(*r));
		if (!r)
			return tn__error(TN_ENOMEM, "%s: out of memory", who);
		t->r = r;
		t->cap = cap;
	}
	memmove(&t->r[i + 1], &t->r[i], (t->n - i) * sizeof(*t->r));
	t->r[i] = (struct tn__pinned_range){ start, len, flags };
	t->n++;
	return 0;
}

ptrdiff_t tn__pinned_index(const struct tn__pinned_table *t, uintptr_t start)
{
	size_t i = upper_bound(t, start);
	return i > 0 && t->r[i - 1].start == start ? (ptrdiff_t)(i - 1) : -1;
}

void tn__pinned_remove_at(struct tn__pinned_table *t, size_t i)
{
	memmove(&t->r[i], &t->r[i + 1], (t->n - i - 1) * sizeof(*t->r));
	t->n--;
}

const struct tn__pinned_range *tn__pinned_find(const struct tn__pinned_table *t, uintptr_t p,
					       size_t len)
{
	if (len == 0)
		len = 1;
	if (p + len < p)
		return NULL;
	size_t i = upper_bound(t, p);
	if (i == 0)
		return NULL;
	const struct tn__pinned_range *r = &t->r[i - 1];
	if (r->flags & TN__PINNED_BUSY)
		return NULL;
	return p + len <= r->start + r->len ? r : NULL;
}

void tn__pinned_clear(struct tn__pinned_table *t)
{
	tn__free(t->r);
	*t = (struct tn__pinned_table){ 0 };
}

/* ---- the process-wide table ---- */

static struct tn__pinned_table table;
static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
/* table.n, readable without the lock: no range at all is the common case (no pinned memory),
 * and then a copy's lookup takes no lock. Relaxed: a stale count only sends a lookup to the
 * locked path, or misses a range registered concurrently with the copy, which no ordering
 * could promise anyway. */
static _Atomic size_t table_count;

static void deferred_forget(void);

static void atfork_child(void)
{
	/* Whatever another thread was doing at the fork, the child's copy is dropped (leaked:
	 * it may be half-written) and the locks made anew. */
	table = (struct tn__pinned_table){ 0 };
	atomic_store_explicit(&table_count, 0, memory_order_relaxed);
	pthread_rwlock_init(&table_lock, NULL);
	deferred_forget();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_init(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

int tn__pinned_add(uintptr_t start, size_t len, unsigned flags, const char *who)
{
	pthread_once(&atfork_once, atfork_init);
	pthread_rwlock_wrlock(&table_lock);
	int rc = tn__pinned_insert(&table, start, len, flags, who);
	atomic_store_explicit(&table_count, table.n, memory_order_relaxed);
	pthread_rwlock_unlock(&table_lock);
	return rc;
}

static int no_range(uintptr_t start, const char *who)
{
	return tn__error(TN_ENOENT, "%s: no range registered with libtensor starts at %#jx", who,
			 (uintmax_t)start);
}

int tn__pinned_mark(uintptr_t start, unsigned set, unsigned clear, struct tn__pinned_range *ret,
		    const char *who)
{
	int rc = 0;
	pthread_rwlock_wrlock(&table_lock);
	ptrdiff_t i = tn__pinned_index(&table, start);
	if (i < 0) {
		rc = no_range(start, who);
	} else if (set & table.r[i].flags & TN__PINNED_BUSY) {
		rc = tn__error(TN_EBUSY, "%s: the range at %#jx is being registered or "
				 "unregistered by another thread", who, (uintmax_t)start);
	} else {
		table.r[i].flags = (table.r[i].flags | set) & ~clear;
		if (ret)
			*ret = table.r[i];
	}
	pthread_rwlock_unlock(&table_lock);
	return rc;
}

int tn__pinned_del(uintptr_t start, const char *who)
{
	int rc = 0;
	pthread_rwlock_wrlock(&table_lock);
	ptrdiff_t i = tn__pinned_index(&table, start);
	if (i < 0)
		rc = no_range(start, who);
	else
		tn__pinned_remove_at(&table, (size_t)i);
	atomic_store_explicit(&table_count, table.n, memory_order_relaxed);
	pthread_rwlock_unlock(&table_lock);
	return rc;
}

size_t tn__pinned_count(void)
{
	return atomic_load_explicit(&table_count, memory_order_relaxed);
}

bool tn__cuda_api_is_pinned(const void *ptr, size_t nbytes)
{
	if (!ptr || atomic_load_explicit(&table_count, memory_order_relaxed) == 0)
		return false;
	pthread_rwlock_rdlock(&table_lock);
	bool hit = tn__pinned_find(&table, (uintptr_t)ptr, nbytes) != NULL;
	pthread_rwlock_unlock(&table_lock);
	return hit;
}

bool tn__cuda_api_tensor_is_pinned(const tn_tensor *t)
{
	if (!tn__handle_is(t, TN_MAGIC_TENSOR))
		return false;
	const tn_storage *s = t->storage;
	return s->device.type == TN_DEVICE_CPU && s->data && tn__cuda_api_is_pinned(s->data, s->nbytes);
}

/* ---- deferred release of host storages under asynchronous copies ---- */

struct deferred {
	cudaEvent_t event; /* recorded after the copy, on the copy's stream */
	int device;        /* the event's */
	tn_storage *storage; /* a strong reference */
};

struct spare {
	cudaEvent_t event;
	int device;
};

/* Past SOFT pending copies, each new one reaps; past HARD, it also waits for the oldest. */
#define DEFERRED_SOFT 64
#define DEFERRED_HARD 1024
#define SPARE_MAX 64

static struct {
	pthread_mutex_t lock;
	struct deferred *v; /* oldest first */
	size_t n, cap;
	struct spare spare[SPARE_MAX]; /* completed events to record again */
	size_t nspare;
	_Atomic size_t count; /* n, readable without the lock (relaxed: only a hint to reap) */
} dq = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void deferred_forget(void)
{
	/* fork child: the events are the parent's CUDA objects; the references are leaked. */
	dq.v = NULL;
	dq.n = dq.cap = dq.nspare = 0;
	atomic_store_explicit(&dq.count, 0, memory_order_relaxed);
	pthread_mutex_init(&dq.lock, NULL);
}

/* Give a completed event back to the spares (under the lock). */
static void spare_put(cudaEvent_t e, int device)
{
	if (dq.nspare < SPARE_MAX)
		dq.spare[dq.nspare++] = (struct spare){ e, device };
	else
		(void)cudaEventDestroy(e);
}

/* Whether the copy before @d's event is done: an error (a broken context) counts as done,
 * since no DMA is running then; the error is left for the caller's next CUDA call. */
static bool deferred_done(const struct deferred *d)
{
	cudaError_t err = cudaEventQuery(d->event);
	if (err == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return false;
	}
	return true;
}

/*
 * Drop the references whose copies are done; with @hard, first wait for the oldest copies
 * until at most DEFERRED_HARD are pending. The storages are unreffed outside the lock: the
 * last reference of an arena storage ends the arena's handle, which unregisters its mappings
 * through this file.
 */
static void reap(bool hard)
{
	for (;;) {
		tn_storage *done[32];
		size_t nd = 0;
		pthread_mutex_lock(&dq.lock);
		size_t keep = 0;
		for (size_t i = 0; i < dq.n; i++) {
			struct deferred *d = &dq.v[i];
			/* The oldest, while too many are pending. */
			bool wait = hard && dq.n - nd > DEFERRED_HARD;
			if (wait)
				(void)cudaEventSynchronize(d->event);
			if (nd < sizeof(done) / sizeof(done[0]) && (wait || deferred_done(d))) {
				done[nd++] = d->storage;
				spare_put(d->event, d->device);
			} else {
				dq.v[keep++] = *d;
			}
		}
		dq.n = keep;
		atomic_store_explicit(&dq.count, keep, memory_order_relaxed);
		pthread_mutex_unlock(&dq.lock);
		for (size_t i = 0; i < nd; i++)
			tn_storage_unref(done[i]);
		if (nd < sizeof(done) / sizeof(done[0]))
			return;
	}
}

/*
 * Wait for the pending copies whose storages overlap [start, start + len), before the range
 * is unregistered. Their references stay in the list for a later reap: dropping one here
 * could end an arena handle, whose unregistration takes arena_lock, which the callers may
 * hold.
 */
static void wait_range(uintptr_t start, size_t len)
{
	pthread_mutex_lock(&dq.lock);
	for (size_t i = 0; i < dq.n; i++) {
		uintptr_t s = (uintptr_t)dq.v[i].storage->data;
		if (s < start + len && start < s + dq.v[i].storage->nbytes)
			(void)cudaEventSynchronize(dq.v[i].event);
	}
	pthread_mutex_unlock(&dq.lock);
}

void tn__cuda_deferred_reap(void)
{
	if (atomic_load_explicit(&dq.count, memory_order_relaxed))
		reap(false);
}

int tn__cuda_defer_release(int device, cudaStream_t stream, tn_storage *storage)
{
	cudaEvent_t e = NULL;
	int rc;

	pthread_mutex_lock(&dq.lock);
	for (size_t i = dq.nspare; i-- > 0;) {
		if (dq.spare[i].device == device) {
			e = dq.spare[i].event;
			dq.spare[i] = dq.spare[--dq.nspare];
			break;
		}
	}
	pthread_mutex_unlock(&dq.lock);
	/* The caller made @device current: a new event belongs to it. */
	if (!e && (rc = tn__cuda_error(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
				       "cudaEventCreateWithFlags")))
		return rc;
	if ((rc = tn__cuda_error(cudaEventRecord(e, stream), "cudaEventRecord"))) {
		(void)cudaEventDestroy(e);
		return rc;
	}
	pthread_mutex_lock(&dq.lock);
	if (dq.n == dq.cap) {
		size_t cap = dq.cap ? 2 * dq.cap : 64;
		struct deferred *v = grow(dq.v, cap * sizeof(*v));
		if (!v) {
			/* No room to defer: wait now, which needs no memory. */
			(void)cudaEventSynchronize(e);
			spare_put(e, device);
			pthread_mutex_unlock(&dq.lock);
			return 0;
		}
		dq.v = v;
		dq.cap = cap;
	}
	dq.v[dq.n++] = (struct deferred){ e, device, tn_storage_ref(storage) };
	size_t n = dq.n;
	atomic_store_explicit(&dq.count, n, memory_order_relaxed);
	pthread_mutex_unlock(&dq.lock);
	if (n > DEFERRED_SOFT)
		reap(n > DEFERRED_HARD);
	return 0;
}

/* ---- registration ---- */

static int need_device(const char *fn)
{
	if (tn__cuda_api_device_count() == 0)
		return tn__error(TN_ENODEV, "%s: no CUDA GPUs are available", fn);
	return 0;
}

static int host_register(void *ptr, size_t nbytes, unsigned flags, const char *fn)
{
	const uintptr_t p = (uintptr_t)ptr;
	int rc;

	if ((rc = tn__pinned_add(p, nbytes, flags | TN__PINNED_BUSY, fn)))
		return rc;
	unsigned cf = cudaHostRegisterPortable;
	if (flags & TN_CUDA_HOST_READ_ONLY)
		cf |= cudaHostRegisterReadOnly;
	cudaError_t err = cudaHostRegister(ptr, nbytes, cf);
	if (err != cudaSuccess) {
		(void)tn__pinned_del(p, fn);
		if (err == cudaErrorHostMemoryAlreadyRegistered) {
			(void)cudaGetLastError();
			return tn__error(TN_EEXIST, "%s: [%p, +%zu) overlaps memory registered with "
					 "CUDA outside libtensor", fn, ptr, nbytes);
		}
		return tn__cuda_error(err, "cudaHostRegister");
	}
	(void)tn__pinned_mark(p, 0, TN__PINNED_BUSY, NULL, fn);
	return 0;
}

/* Unregister the range starting at @ptr; @arena: it is one of an arena's mappings. */
static int host_unregister(void *ptr, bool arena, const char *fn)
{
	const uintptr_t p = (uintptr_t)ptr;
	struct tn__pinned_range r;
	int rc;

	if ((rc = tn__pinned_mark(p, TN__PINNED_BUSY, 0, &r, fn)))
		return rc;
	if (!arena && (r.flags & PINNED_ARENA)) {
		(void)tn__pinned_mark(p, 0, TN__PINNED_BUSY, NULL, fn);
		return tn__error(TN_EINVAL, "%s: %p is an arena's mapping, registered by "
				 "tn_cuda_arena_register: use tn_cuda_arena_unregister", fn, ptr);
	}
	/* Copies that started before the mark may still be using the memory: let them end. */
	wait_range(r.start, r.len);
	if ((rc = tn__cuda_error(cudaHostUnregister(ptr), "cudaHostUnregister"))) {
		(void)tn__pinned_mark(p, 0, TN__PINNED_BUSY, NULL, fn);
		return rc;
	}
	return tn__pinned_del(p, fn);
}

int tn__cuda_api_host_register(void *ptr, size_t nbytes, unsigned flags)
{
	static const char fn[] = "tn_cuda_host_register";
	int rc;
	if (!ptr || nbytes == 0)
		return tn__error(TN_EINVAL, "%s: %s", fn, ptr ? "nbytes is 0" : "NULL ptr");
	if (flags & ~(unsigned)TN_CUDA_HOST_READ_ONLY)
		return tn__error(TN_EINVAL, "%s: unknown flags %#x", fn,
				 flags & ~(unsigned)TN_CUDA_HOST_READ_ONLY);
	if ((rc = need_device(fn)))
		return rc;
	return host_register(ptr, nbytes, flags, fn);
}

int tn__cuda_api_host_unregister(void *ptr)
{
	static const char fn[] = "tn_cuda_host_unregister";
	if (!ptr)
		return tn__error(TN_EINVAL, "%s: NULL ptr", fn);
	return host_unregister(ptr, false, fn);
}

/* Serializes registering and unregistering arenas' mappings. */
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether the table holds an arena mapping that starts at @p (what this process pinned with
 * tn_cuda_arena_register): the table is the record, the arena handle keeps none. */
static bool arena_pinned(const void *p)
{
	pthread_rwlock_rdlock(&table_lock);
	ptrdiff_t i = p ? tn__pinned_index(&table, (uintptr_t)p) : -1;
	bool pinned = i >= 0 && (table.r[i].flags & PINNED_ARENA);
	pthread_rwlock_unlock(&table_lock);
	return pinned;
}

/* Unregister @map's registered mappings (under arena_lock); the first error is returned. */
static int arena_unpin(const struct tn__arena_mapping *map, const char *fn)
{
	int rc = 0, r;
	if (arena_pinned(map->ro) && (r = host_unregister(map->ro, true, fn)) && !rc)
		rc = r;
	if (arena_pinned(map->base) && (r = host_unregister(map->base, true, fn)) && !rc)
		rc = r;
	return rc;
}

/* An arena handle's mappings are about to go: CUDA must forget the pages pinned in them.
 * Only this process's handles are reported (a fork child never ends an inherited one), and
 * the child's table starts empty. The caller's last error is kept: the unref succeeds. */
static void arena_unmapping(struct tn__arena_observer *self, tn_arena *arena,
			    const struct tn__arena_mapping *map)
{
	struct tn__saved_error keep;
	(void)self, (void)arena;
	if (!arena_pinned(map->base) && !arena_pinned(map->ro))
		return;
	tn__error_save(&keep);
	pthread_mutex_lock(&arena_lock);
	(void)arena_unpin(map, "tn_arena_unref");
	pthread_mutex_unlock(&arena_lock);
	tn__error_restore(&keep);
}

static struct tn__arena_observer arena_observer = { arena_unmapping, NULL };
static pthread_once_t observer_once = PTHREAD_ONCE_INIT;

static void observe_arenas(void)
{
	tn__arena_observe(&arena_observer);
}

int tn__cuda_api_arena_register(tn_arena *arena)
{
	static const char fn[] = "tn_cuda_arena_register";
	struct tn__arena_mapping map;
	int rc;

	if (tn__arena_mapping(arena, &map) < 0)
		return tn__error(TN_EINVAL, "%s: not an arena handle of this process", fn);
	/* Before the first registration: the handle's end must unregister what it pinned. */
	pthread_once(&observer_once, observe_arenas);
	pthread_mutex_lock(&arena_lock);
	const bool base_done = arena_pinned(map.base);
	const bool ro_done = !map.ro || arena_pinned(map.ro);
	if (base_done && ro_done) {
		rc = 0; /* once per mapping */
		goto out;
	}
	if ((rc = need_device(fn)))
		goto out;
	/* The read-write mapping (the one mapping of a read-only handle, PROT_READ there). */
	if (!base_done) {
		rc = host_register(map.base, map.size,
				   PINNED_ARENA | (map.read_only ? TN_CUDA_HOST_READ_ONLY : 0), fn);
		if (rc)
			goto out;
	}
	/* The read-only mapping of sealed tensors: all or nothing with the first. */
	if (!ro_done) {
		rc = host_register(map.ro, map.size, PINNED_ARENA | TN_CUDA_HOST_READ_ONLY, fn);
		if (rc) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", tn_last_error());
			(void)arena_unpin(&map, fn);
			rc = tn__error(rc, "%s", msg);
			goto out;
		}
	}
out:
	pthread_mutex_unlock(&arena_lock);
	return rc;
}

int tn__cuda_api_arena_unregister(tn_arena *arena)
{
	static const char fn[] = "tn_cuda_arena_unregister";
	struct tn__arena_mapping map;
	if (tn__arena_mapping(arena, &map) < 0)
		return tn__error(TN_EINVAL, "%s: not an arena handle of this process", fn);
	pthread_mutex_lock(&arena_lock);
	int rc = arena_unpin(&map, fn);
	pthread_mutex_unlock(&arena_lock);
	return rc;
}
