/* SPDX-License-Identifier: MIT */
/*
 * Handles and per-thread state.
 *
 * A handle is a struct whose first word is a magic (storages, tensors, topologies). A freed
 * handle is marked dead and kept in a per-thread quarantine until QUARANTINE later handles
 * have been freed, so a stale pointer passed back to the library is recognised and refused
 * with TN_EBADF instead of being read after free.
 *
 * Per-thread state (the quarantine here, the CPU allocator's small-block cache) is made on
 * first use and released when the thread exits, through tn__thread_state.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define QUARANTINE 1024

void *tn__thread_state_slow(struct tn__thread_key *k, void **tls)
{
	void *state;

	pthread_once(&k->once, k->init);
	if (!k->key_ok || !(state = calloc(1, k->size)))
		return NULL;
	if (pthread_setspecific(k->key, state) != 0) {
		free(state);
		return NULL;
	}
	*tls = state;
	return state;
}

static _Atomic uint64_t live_handles;

/* Per thread so that making and dropping a small tensor takes no lock (a process-wide ring
 * behind a mutex cost ~25 ns of a ~100 ns operator). */
struct quarantine {
	void *slot[QUARANTINE];
	unsigned next;
};

static void quarantine_destroy(void *arg)
{
	struct quarantine *q = arg;
	for (unsigned i = 0; i < QUARANTINE; i++)
		free(q->slot[i]);
	free(q);
}

TN_THREAD_KEY(quarantine_key, struct quarantine, quarantine_destroy);
static _Thread_local struct quarantine *tls_quarantine;

void *tn__handle_alloc(size_t size, uint32_t magic)
{
	/* malloc and memset, not calloc: glibc's calloc bypasses its per-thread cache. */
	uint32_t *h = tn__malloc(size);
	if (!h)
		return NULL;
	memset(h, 0, size);
	*h = magic;
	atomic_fetch_add_explicit(&live_handles, 1, memory_order_relaxed);
	return h;
}

void tn__handle_free(void *handle)
{
	struct quarantine *q;

	if (!handle)
		return;
	*(volatile uint32_t *)handle = TN_MAGIC_DEAD;
	atomic_fetch_sub_explicit(&live_handles, 1, memory_order_relaxed);
	/* The freed handle's memory stays allocated (and marked dead) until QUARANTINE later
	 * handles have been freed on this thread. Without a quarantine (out of memory) the
	 * handle goes back at once. */
	if (!(q = tn__thread_state(&quarantine_key, &tls_quarantine))) {
		free(handle);
		return;
	}
	void *old = q->slot[q->next];
	q->slot[q->next] = handle;
	q->next = (q->next + 1) % QUARANTINE;
	free(old);
}

uint64_t tn__live_handles(void)
{
	return atomic_load_explicit(&live_handles, memory_order_relaxed);
}
