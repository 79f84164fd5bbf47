// SPDX-License-Identifier: MIT
/*
 * tensord's SIGBUS guard (daemon.h).
 *
 * A read-write client holds a writable descriptor of the arena file (it needs one to map the
 * arena writable), and any writable descriptor can ftruncate the file. Past the new end, the
 * daemon's own mappings of the file raise SIGBUS. tensord checks an arena's size before it
 * serves it (tnd_arena_intact in arenas.c), but a shrink can land between that check and an
 * access, and a LOAD or SAVE works on an arena for seconds. The guard makes such an access
 * harmless:
 *
 *  - every mapping the daemon holds of an arena file is registered (its read-write mapping and
 *    its read-only alias);
 *  - the SIGBUS handler finds the registered mapping the faulting address lies in, replaces
 *    the mapping from the faulting page to its end with private, zero-filled anonymous memory
 *    (MAP_FIXED: one system call, safe in a signal handler), marks the region and returns;
 *  - the faulting instruction runs again and reads zeros, or writes where nobody else looks;
 *  - the daemon sees the mark at its next check of the arena and from then on treats it as
 *    damaged: it serves only its forced destruction, and never lets go of the mapping.
 *
 * A SIGBUS outside every registered mapping is a bug of the daemon: the handler puts the
 * default action back, and the access, run again, kills the daemon with the right signal and
 * a core.
 *
 * The table is written by the event loop only (registering, forgetting) and read by the
 * handler in any thread: an entry's bounds are written before its start is published with
 * release order, and its start is cleared before the entry is reused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../shm/arena_remote.h"
#include "daemon.h"

#define GUARD_MAX (2 * 65536 + 2) /* two mappings per arena, for max_arenas' upper bound */

struct guard {
	_Atomic uintptr_t lo; /* 0: unused */
	uintptr_t hi, page;
	int prot;
	_Atomic bool hit;
};

static struct guard *guards;
static _Atomic size_t guard_top; /* entries [0, guard_top) have been used */
static _Atomic uint64_t guard_faults;

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	(void)sig;
	(void)uctx;
	int saved = errno;
	uintptr_t addr = (uintptr_t)si->si_addr;
	size_t top = atomic_load_explicit(&guard_top, memory_order_acquire);
	for (size_t i = 0; i < top; i++) {
		struct guard *g = &guards[i];
		uintptr_t lo = atomic_load_explicit(&g->lo, memory_order_acquire);
		if (!lo || addr < lo || addr >= g->hi)
			continue;
		uintptr_t start = lo + (addr - lo) / g->page * g->page;
		void *p = mmap((void *)start, g->hi - start, g->prot,
			       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			break;
		atomic_store_explicit(&g->hit, true, memory_order_release);
		atomic_fetch_add_explicit(&guard_faults, 1, memory_order_relaxed);
		errno = saved;
		return;
	}
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGBUS, &dfl, NULL);
	errno = saved;
}

int tnd_guard_init(void)
{
	guards = calloc(GUARD_MAX, sizeof(*guards));
	if (!guards)
		return -ENOMEM;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) != 0)
		return -errno;
	return 0;
}

static int guard_add(void *base, size_t len, size_t page, int prot)
{
	size_t top = atomic_load_explicit(&guard_top, memory_order_relaxed), i;
	for (i = 0; i < top; i++)
		if (!atomic_load_explicit(&guards[i].lo, memory_order_relaxed))
			break;
	if (i == GUARD_MAX)
		return -1;
	struct guard *g = &guards[i];
	g->hi = (uintptr_t)base + len;
	g->page = page;
	g->prot = prot;
	atomic_store_explicit(&g->hit, false, memory_order_relaxed);
	atomic_store_explicit(&g->lo, (uintptr_t)base, memory_order_release);
	if (i == top)
		atomic_store_explicit(&guard_top, top + 1, memory_order_release);
	return (int)i;
}

static void guard_forget(int i)
{
	if (i >= 0)
		atomic_store_explicit(&guards[i].lo, 0, memory_order_release);
}

int tnd_guard_add(tn_arena *a, struct tnd_guard *ret)
{
	void *rw, *ro;
	size_t len, page;
	tn__arena_mappings(a, &rw, &ro, &len, &page);
	ret->rw = ret->ro = -1;
	if (!guards || !rw || !len || !page)
		return -EINVAL;
	ret->rw = guard_add(rw, len, page, PROT_READ | (tn__arena_read_only(a) ? 0 : PROT_WRITE));
	if (ro)
		ret->ro = guard_add(ro, len, page, PROT_READ);
	if (ret->rw < 0 || (ro && ret->ro < 0)) {
		tnd_guard_forget(ret);
		return -ENOSPC;
	}
	return 0;
}

void tnd_guard_forget(struct tnd_guard *g)
{
	guard_forget(g->rw);
	guard_forget(g->ro);
	g->rw = g->ro = -1;
}

bool tnd_guard_hit(const struct tnd_guard *g)
{
	return (g->rw >= 0 && atomic_load_explicit(&guards[g->rw].hit, memory_order_acquire)) ||
	       (g->ro >= 0 && atomic_load_explicit(&guards[g->ro].hit, memory_order_acquire));
}

uint64_t tnd_guard_faults(void)
{
	return atomic_load_explicit(&guard_faults, memory_order_relaxed);
}
