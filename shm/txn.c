/* SPDX-License-Identifier: MIT */
/*
 * An arena's robust lock and its undo log: every change to an arena's metadata is all or
 * nothing, whatever instruction the process making it is killed at.
 *
 * Crash safety rests on two things. The lock is a process-shared robust mutex: when its holder
 * dies, the next process to lock it is told so (EOWNERDEAD). And every word of metadata a
 * change writes goes through tn__tx_set, which first appends the word's old value to the
 * undo log in the header; tn__tx_commit empties the log. A process killed at any instruction
 * inside a change leaves the log describing exactly what it overwrote, and the next lock
 * holder writes the old values back in reverse order before it goes on, so every change is
 * all or nothing. Rolling back is idempotent, so a process killed while rolling back is no
 * problem either. Readers without the lock (read-only handles) wait for an empty log.
 */
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif
#include <sched.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "arena_internal.h"

/* Crash testing: when non-zero, counts down at the two points of every logged write (just
 * before and just after the word changes) and kills the process at zero. */
int tn__arena_crash_countdown;

static void rollback(tn_arena *a)
{
	struct arena_header *h = a->hdr;
	uint64_t n = atomic_load_explicit(&h->undo_count, memory_order_acquire);

	if (n > UNDO_MAX)
		n = UNDO_MAX; /* a damaged count: undo what the log can hold */
	for (uint64_t i = n; i-- > 0;) {
		uint64_t off = h->undo[i].off;
		/* Only words of the header's mutable part or of the data region: anything else is
		 * damage, and writing there would spread it. */
		bool in_header = (off >= offsetof(struct arena_header, fl_bitmap) &&
				  off <= offsetof(struct arena_header, undo_count) - 8) ||
				 (off >= offsetof(struct arena_header, high_water) &&
				  off <= offsetof(struct arena_header, evicted_bytes)) ||
				 (off >= offsetof(struct arena_header, spill_mode) &&
				  off <= offsetof(struct arena_header, spilled_bytes));
		bool in_rest = off >= a->clients_off && off <= a->size - 8;
		if (off % 8 || !(in_header || in_rest))
			continue;
		*(uint64_t *)(a->base + off) = h->undo[i].old;
	}
	atomic_store_explicit(&h->undo_count, 0, memory_order_release);
}

/* Milliseconds this thread waits for an arena's lock before giving up with TN_EBUSY; 0 waits
 * for ever. tensord's loop sets it: a client that holds the lock (stopped, or hostile) must
 * not freeze the daemon for every other arena. */
_Thread_local unsigned tn__arena_lock_timeout_ms;

/* The bound on a wait for the lock where the thread sets none: TN_ARENA_LOCK_TIMEOUT_MS, or
 * 10 s. No change holds the lock for more than milliseconds; a holder that keeps it longer is
 * stopped or hostile (a grantee can write a live thread's ID into the lock word), and waiting
 * for it for ever would hang every honest process of the arena with it. */
unsigned tn__arena_lock_default_ms(void)
{
	/* Read at each busy wait (never on the uncontended path), so a change of the
	 * environment takes effect. */
	const char *e = secure_getenv("TN_ARENA_LOCK_TIMEOUT_MS");
	char *end;
	unsigned long v = e ? strtoul(e, &end, 10) : 0;
	return e && *e && !*end && v >= 1 && v <= 3600000 ? (unsigned)v : 10000;
}

int tn__arena_lock_any(tn_arena *a)
{
	int r;
	unsigned timeout_ms = tn__arena_lock_timeout_ms;
	/* The uncontended case costs what pthread_mutex_lock does: the clock is read only
	 * when the lock is busy. */
	r = pthread_mutex_trylock(&a->hdr->lock);
	if (TN_LIKELY(r == 0) || r == EOWNERDEAD) {
		/* taken (or taken from a dead holder: repaired below) */
	} else if (r != EBUSY) {
		/* EINVAL and friends: a lock word no pthread_mutex_lock could use either. */
	} else {
		if (!timeout_ms)
			timeout_ms = tn__arena_lock_default_ms();
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		r = pthread_mutex_timedlock(&a->hdr->lock, &ts);
#ifdef __SANITIZE_THREAD__
		/* ThreadSanitizer's pthread_mutex_timedlock records the lock only when it returns
		 * 0 (its lock and trylock also take EOWNERDEAD): tell it, or it reports our unlock
		 * of a lock it never saw taken. post_lock ends what pre_lock begins (TSan ignores
		 * the accesses between them); called alone it fails TSan's own CHECK and kills
		 * the process. */
		if (r == EOWNERDEAD) {
			__tsan_mutex_pre_lock(&a->hdr->lock, __tsan_mutex_try_lock);
			__tsan_mutex_post_lock(&a->hdr->lock, __tsan_mutex_try_lock, 0);
		}
#endif
		if (r == ETIMEDOUT) {
			/* glibc keeps the owner's thread ID in the word (robust mutexes: the
			 * kernel's futex protocol); the message names it for the operator. */
			unsigned owner = (unsigned)a->hdr->lock.__data.__lock & 0x3fffffffu;
			return tn__error(TN_EBUSY, "arena %s: its lock has been held for over %u ms "
					 "by thread %u (a stopped, stuck or hostile process)",
					 a->path, timeout_ms, owner);
		}
	}

	if (TN_LIKELY(r == 0))
		return 0;
	if (r == EOWNERDEAD) {
		/* The previous holder died inside a change: undo it, then the state is as it was
		 * before that change began. */
		rollback(a);
		if (a->hdr->lists_dirty)
			tn__rebuild_free_lists(a);
		tn__tx_set(a, &a->hdr->lock_repairs, a->hdr->lock_repairs + 1);
		tn__tx_commit(a);
		pthread_mutex_consistent(&a->hdr->lock);
		return 0;
	}
	return tn__error(TN_EIO, "arena %s: its lock is unusable (%s)", a->path, strerror(r));
}

int tn__arena_damage_error(const tn_arena *a)
{
	/* Read once: a writer outside the rules may change it under us. */
	uint64_t what = *(const volatile uint64_t *)&a->hdr->damage;
	uint64_t off = *(const volatile uint64_t *)&a->hdr->damage_off;
	const char *name = what == DAMAGE_FREE_LIST ? "a free list"
			   : what == DAMAGE_BLOCK   ? "a block header"
						    : "its metadata";
	return tn__error(TN_EIO, "arena %s is damaged (%s at offset %" PRIu64 "): run tensorctl "
			 "fsck --repair", a->path, name, off);
}

int tn__arena_lock(tn_arena *a)
{
	int r = tn__arena_lock_any(a);
	/* Damage a lock holder found stays until fsck mends it: nobody follows the bad words
	 * again (which could crash or spread it). One load of a header word per lock. */
	if (TN_LIKELY(!r) && TN_UNLIKELY(*(volatile uint64_t *)&a->hdr->damage)) {
		tn__arena_unlock(a);
		return tn__arena_damage_error(a);
	}
	return r;
}

int tn__arena_damaged(tn_arena *a, unsigned what, uint64_t off)
{
	tn__tx_abort(a);
	a->hdr->damage_off = off;
	atomic_thread_fence(memory_order_release);
	*(volatile uint64_t *)&a->hdr->damage = what;
	return tn__arena_damage_error(a);
}

void tn__arena_unlock(tn_arena *a)
{
	pthread_mutex_unlock(&a->hdr->lock);
}

void tn__tx_set(tn_arena *a, uint64_t *word, uint64_t value)
{
	struct arena_header *h = a->hdr;
	uint64_t n = atomic_load_explicit(&h->undo_count, memory_order_relaxed);

	if (TN_UNLIKELY(n >= UNDO_MAX)) {
		/* Only a process writing the header behind the lock's back gets here: start the
		 * log again rather than write past it (the change is then not undoable; fsck
		 * will find what it left). */
		n = 0;
	}
	h->undo[n].off = (uint64_t)((uint8_t *)word - a->base);
	h->undo[n].old = *word;
	/* The record must be in memory before the count that makes it part of the log, and the
	 * count before the word changes: a process killed between two of these stores leaves
	 * either no record (and the word unchanged) or a record of the value the word had.
	 * Release ordering on the count and a release fence after it give both orders. */
	atomic_store_explicit(&h->undo_count, n + 1, memory_order_release);
	atomic_thread_fence(memory_order_release);
	if (TN_UNLIKELY(tn__arena_crash_countdown) && --tn__arena_crash_countdown == 0)
		raise(SIGKILL);
	*(volatile uint64_t *)word = value;
	if (TN_UNLIKELY(tn__arena_crash_countdown) && --tn__arena_crash_countdown == 0)
		raise(SIGKILL);
}

void tn__tx_commit(tn_arena *a)
{
	/* Release: every write of the change is in memory before the log is emptied. */
	atomic_store_explicit(&a->hdr->undo_count, 0, memory_order_release);
}

/* Abandon the current change (on damage found half way): put back what it wrote. */
void tn__tx_abort(tn_arena *a)
{
	rollback(a);
}

uint64_t tn__quiet_undo(const tn_arena *a)
{
	uint64_t n = 0;
	for (int i = 0; i < 64; i++) {
		n = atomic_load_explicit(&a->hdr->undo_count, memory_order_acquire);
		if (!n)
			break;
		sched_yield();
	}
	return n;
}
