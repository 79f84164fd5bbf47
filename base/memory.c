/* SPDX-License-Identifier: MIT */
/*
 * The library's own memory (metadata, handles, buffers) and fault injection.
 *
 * Every allocation libtensor makes for itself goes through tn__malloc and tn__calloc, and every
 * allocator counts its attempts through tn__fault_fires, so a test can make the Nth attempt
 * fail (tn_alloc_fail_nth) and loop N over a whole operation, as SQLite's tests do.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include <tensor/alloc.h> /* tn_alloc_fail_nth */

#include "base.h"

/* Relaxed is enough: the counters order nothing else, and a test that injects faults drives
 * allocation from one thread. */
static _Atomic uint64_t fault_attempts;
static _Atomic uint64_t fault_nth;

TN_EXPORT uint64_t tn_alloc_fail_nth(uint64_t nth)
{
	uint64_t attempts = atomic_exchange_explicit(&fault_attempts, 0, memory_order_relaxed);
	atomic_store_explicit(&fault_nth, nth, memory_order_relaxed);
	return attempts;
}

bool tn__fault_fires(void)
{
	uint64_t n = atomic_fetch_add_explicit(&fault_attempts, 1, memory_order_relaxed) + 1;
	uint64_t nth = atomic_load_explicit(&fault_nth, memory_order_relaxed);
	if (TN_LIKELY(nth == 0) || n != nth)
		return false;
	atomic_store_explicit(&fault_nth, 0, memory_order_relaxed);
	return true;
}

void *tn__malloc(size_t size)
{
	return tn__fault_fires() ? NULL : malloc(size ? size : 1);
}

void *tn__calloc(size_t n, size_t size)
{
	return tn__fault_fires() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void tn__free(void *ptr)
{
	free(ptr);
}
