/* SPDX-License-Identifier: MIT */
/*
 * Waiting lookups: a futex word in the arena header that every publish and seal advances, and
 * a bit per client slot in the header's waiting mask while a thread of that process waits.
 *
 * A publisher, after its change is committed, adds one to the word and reads the mask; only
 * when some bit is set does it make the FUTEX_WAKE system call, so publishing stays free of
 * system calls while nobody waits. A waiter sets its bit, then reads the word, then looks for
 * the name, then sleeps in FUTEX_WAIT only while the word still holds the value it read. The
 * bit is set before the look and the word advanced after the publish, both sequentially
 * consistent: either the publisher sees the bit and wakes, or the waiter's look comes after
 * the publish and finds the name. (The futex is a shared one, keyed by the file's page: every
 * process maps the arena at its own address.)
 *
 * Beside the arena's word, each bucket of names (the directory hash modulo
 * TN__ARENA_WAIT_BUCKETS) has a word that moves only for the publishes and seals of its names:
 * a waiter for one name sleeps on its bucket's, so that busy publishing of other names wakes
 * it once in TN__ARENA_WAIT_BUCKETS on average instead of every time.
 *
 * A read-only handle cannot write the mask: tensord sets and clears its slot's bit for it
 * (struct tn__arena_remote.waiting). A waiter killed in its sleep leaves only its bit, which
 * the reclamation of its slot clears (tn__reclaim_locked, and a claim of a free slot); until
 * then publishers make one needless wake call.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena_internal.h"

uint64_t tn__mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tn__arena_deadline(uint64_t start, int64_t timeout_ns)
{
	if (timeout_ns < 0)
		return 0;
	return (uint64_t)timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + (uint64_t)timeout_ns;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

static bool anyone_waits(const struct arena_header *h)
{
	for (int i = 0; i < HOLD_WORDS; i++)
		if (atomic_load(&h->waiters[i]))
			return true;
	return false;
}

void tn__arena_notify(tn_arena *a, uint64_t name_hash)
{
	struct arena_header *h = a->hdr;
	_Atomic uint32_t *bucket = &h->name_seq[name_hash % TN__ARENA_WAIT_BUCKETS];
	atomic_fetch_add(bucket, 1);
	atomic_fetch_add(&h->publish_seq, 1);
	if (anyone_waits(h)) {
		futex(bucket, FUTEX_WAKE, INT_MAX, NULL);
		futex(&h->publish_seq, FUTEX_WAKE, INT_MAX, NULL);
	}
}

static _Atomic uint32_t *word_of(const tn_arena *a, int bucket)
{
	struct arena_header *h = a->hdr;
	return bucket < 0 ? &h->publish_seq : &h->name_seq[bucket % TN__ARENA_WAIT_BUCKETS];
}

static void mark(struct arena_header *h, int slot, bool on)
{
	uint64_t bit = UINT64_C(1) << (slot % 64);
	if (on)
		atomic_fetch_or(&h->waiters[slot / 64], bit);
	else
		atomic_fetch_and(&h->waiters[slot / 64], ~bit);
}

void tn__arena_waiter_clear(tn_arena *a, int slot)
{
	if (slot >= 0 && slot < TN_ARENA_MAX_CLIENTS)
		mark(a->hdr, slot, false);
}

int tn__arena_waiting_for(tn_arena *a, int slot, bool on)
{
	static const char fn[] = "tn__arena_waiting_for";
	int r = tn__arena_check(a, true, fn);
	if (r)
		return r;
	if (slot < 0 || slot >= (int)a->max_clients)
		return tn__error(TN_ERANGE, "%s: slot %d outside the client table", fn, slot);
	if (on && (uint32_t)tn__client_at(a, slot)->state_gen != CLIENT_ATTACHED)
		return tn__error(TN_ERANGE, "%s: slot %d is not attached", fn, slot);
	mark(a->hdr, slot, on);
	return 0;
}

int tn__arena_wait_begin(tn_arena *a)
{
	int r = tn__arena_check(a, false, "tn_arena_lookup_wait");
	if (r)
		return r;
	pthread_mutex_lock(&a->local_lock);
	if (a->waiting == 0) {
		a->wait_polled = false;
		if (!a->read_only) {
			mark(a->hdr, a->slot, true);
		} else if (a->has_remote && a->remote.waiting) {
			struct tn__saved_error keep;
			tn__error_save(&keep);
			r = a->remote.waiting(a->remote.ctx, true);
			if (r == TN_ENOTSUP) {
				tn__error_restore(&keep);
				a->wait_polled = true;
			} else if (r < 0) {
				pthread_mutex_unlock(&a->local_lock);
				return r;
			}
		} else {
			a->wait_polled = true;
		}
	}
	/* Each begin is counted, so that the last end clears the bit. */
	a->waiting++;
	r = a->wait_polled;
	pthread_mutex_unlock(&a->local_lock);
	return r;
}

void tn__arena_wait_end(tn_arena *a)
{
	if (!tn__arena_ok(a))
		return;
	pthread_mutex_lock(&a->local_lock);
	if (--a->waiting == 0) {
		if (!a->read_only) {
			mark(a->hdr, a->slot, false);
		} else if (!a->wait_polled && a->has_remote && a->remote.waiting) {
			struct tn__saved_error keep;
			tn__error_save(&keep);
			/* A failure (the daemon is gone) leaves the bit to the slot's reclamation. */
			(void)a->remote.waiting(a->remote.ctx, false);
			tn__error_restore(&keep);
		}
	}
	pthread_mutex_unlock(&a->local_lock);
}

uint32_t tn__arena_wait_seq(const tn_arena *a, int bucket)
{
	return atomic_load(word_of(a, bucket));
}

int tn__arena_wait(tn_arena *a, int bucket, uint32_t seq, uint64_t deadline_ns, int announced)
{
	uint64_t now = tn__mono_ns(), until = deadline_ns;
	if (deadline_ns && now >= deadline_ns)
		return tn__error(TN_ETIMEDOUT, "tn_arena_lookup_wait: timed out");
	if (announced == 1 && (!until || until > now + TN__ARENA_WAIT_POLL_NS))
		until = now + TN__ARENA_WAIT_POLL_NS;
	struct timespec ts = { .tv_sec = (time_t)(until / 1000000000u),
			       .tv_nsec = (long)(until % 1000000000u) };
	int saved = errno;
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
	long r = futex(word_of(a, bucket), FUTEX_WAIT_BITSET, seq, until ? &ts : NULL);
	bool timed_out = r < 0 && errno == ETIMEDOUT && until == deadline_ns;
	errno = saved;
	if (timed_out)
		return tn__error(TN_ETIMEDOUT, "tn_arena_lookup_wait: timed out");
	return 0; /* woken, the word moved (EAGAIN), a signal (EINTR), or a poll interval */
}

/* ---- the public generation and its wait ------------------------------------------------------ */

TN_EXPORT uint32_t tn_arena_generation(tn_arena *a)
{
	return tn__arena_ok(a) ? tn__arena_wait_seq(a, -1) : 0;
}

TN_EXPORT int tn_arena_wait_change(tn_arena *a, uint32_t generation, int64_t timeout_ns)
{
	static const char fn[] = "tn_arena_wait_change";
	int r = tn__arena_check(a, false, fn);
	if (r)
		return r;
	if (tn__arena_wait_seq(a, -1) != generation)
		return 0;
	if (timeout_ns == 0)
		return tn__error(TN_ETIMEDOUT, "%s: arena %s did not change", fn, a->path);
	uint64_t start = tn__mono_ns(), deadline = tn__arena_deadline(start, timeout_ns);
	int announced = tn__arena_wait_begin(a);
	if (announced < 0)
		return announced;
	/* Announced first, then the word compared by the kernel: a change before the
	 * announcement is seen as a word that moved. Polled handles look again at intervals. */
	while (tn__arena_wait_seq(a, -1) == generation) {
		if (tn__arena_wait(a, -1, generation, deadline, announced) == TN_ETIMEDOUT) {
			r = tn__error(TN_ETIMEDOUT, "%s: arena %s did not change within %.3f s", fn,
				      a->path, (double)(tn__mono_ns() - start) / 1e9);
			break;
		}
	}
	tn__arena_wait_end(a);
	return r;
}
