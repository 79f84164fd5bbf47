/* SPDX-License-Identifier: MIT */
/*
 * Pinned host memory's bookkeeping (cuda/pinned.c), on the host: the sorted table of
 * registered ranges (overlaps refused, adjacency allowed, containment queries at the edges,
 * removal, many ranges against a brute-force model), the process-wide table under threads
 * and across fork(), and, without a GPU, the clean refusals of the registering calls. With a
 * GPU it also registers a read-only arena handle (which needs the internal attach call).
 *
 * No case here calls CUDA except through the public functions; it runs wherever libtensor
 * was built with CUDA. The copies from pinned memory are tested on a GPU by check_cuda.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arena_testutil.h"
#include "backend.h"

extern const struct tn__device_ops tn__cuda_device_ops;

#include "../shm/arena_remote.h"
#include "pinned.h"

/* ---- the table ---- */

static void assert_sorted_disjoint(const struct tn__pinned_table *t)
{
	for (size_t i = 1; i < t->n; i++)
		ck_assert_uint_le(t->r[i - 1].start + t->r[i - 1].len, t->r[i].start);
}

START_TEST(test_table_overlaps)
{
	struct tn__pinned_table t = { 0 };

	ck_assert_tn_ok(tn__pinned_insert(&t, 1000, 100, 0, "t"));
	/* Every way of overlapping [1000, 1100) is refused, with both ranges named. */
	ck_assert_tn_error(tn__pinned_insert(&t, 1050, 100, 0, "t"), TN_EEXIST,
			   "t: [0x41a, 0x47e) overlaps the registered range [0x3e8, 0x44c)");
	ck_assert_int_eq(tn__pinned_insert(&t, 900, 101, 0, "t"), TN_EEXIST);
	ck_assert_int_eq(tn__pinned_insert(&t, 900, 300, 0, "t"), TN_EEXIST);
	ck_assert_int_eq(tn__pinned_insert(&t, 1010, 10, 0, "t"), TN_EEXIST);
	ck_assert_int_eq(tn__pinned_insert(&t, 1000, 100, 0, "t"), TN_EEXIST);
	ck_assert_int_eq(tn__pinned_insert(&t, 1099, 1, 0, "t"), TN_EEXIST);
	ck_assert_uint_eq(t.n, 1);
	/* Adjacent on both sides is fine. */
	ck_assert_tn_ok(tn__pinned_insert(&t, 1100, 50, 0, "t"));
	ck_assert_tn_ok(tn__pinned_insert(&t, 900, 100, 0, "t"));
	/* A range in the gap of two, touching both. */
	ck_assert_tn_ok(tn__pinned_insert(&t, 2000, 10, 0, "t"));
	ck_assert_tn_ok(tn__pinned_insert(&t, 1150, 850, 0, "t"));
	ck_assert_int_eq(tn__pinned_insert(&t, 1999, 2, 0, "t"), TN_EEXIST);
	ck_assert_uint_eq(t.n, 5);
	assert_sorted_disjoint(&t);
	ck_assert_uint_eq(t.r[0].start, 900);
	ck_assert_uint_eq(t.r[4].start, 2000);
	/* Empty and wrapping ranges are invalid. */
	ck_assert_tn_error_has(tn__pinned_insert(&t, 5000, 0, 0, "t"), TN_EINVAL, "empty range");
	ck_assert_tn_error_has(tn__pinned_insert(&t, UINTPTR_MAX - 10, 20, 0, "t"), TN_EINVAL,
			       "wrapping range");
	/* The very top of the address space, ending exactly at the wrap, is a range. */
	ck_assert_tn_ok(tn__pinned_insert(&t, UINTPTR_MAX - 9, 9, 0, "t"));
	ck_assert_uint_eq(t.n, 6);
	tn__pinned_clear(&t);
	ck_assert_uint_eq(t.n, 0);
	ck_assert_ptr_null(t.r);
}
END_TEST

START_TEST(test_table_find_edges)
{
	struct tn__pinned_table t = { 0 };
	ck_assert_ptr_null(tn__pinned_find(&t, 1000, 1)); /* empty table */
	ck_assert_tn_ok(tn__pinned_insert(&t, 1000, 100, 1, "t"));
	ck_assert_tn_ok(tn__pinned_insert(&t, 1100, 100, 0, "t"));
	ck_assert_tn_ok(tn__pinned_insert(&t, 4000, 10, 0, "t"));

	const struct tn__pinned_range *r = tn__pinned_find(&t, 1000, 100);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->start, 1000);
	ck_assert_uint_eq(r->flags, 1);
	ck_assert_ptr_eq(tn__pinned_find(&t, 1099, 1), r);
	ck_assert_ptr_eq(tn__pinned_find(&t, 1050, 0), r); /* 0 bytes: the byte at p */
	ck_assert_ptr_null(tn__pinned_find(&t, 999, 1));
	ck_assert_ptr_null(tn__pinned_find(&t, 999, 2));
	/* Across two adjacent ranges is not within one. */
	ck_assert_ptr_null(tn__pinned_find(&t, 1000, 101));
	ck_assert_ptr_null(tn__pinned_find(&t, 1099, 2));
	r = tn__pinned_find(&t, 1100, 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->start, 1100);
	ck_assert_ptr_eq(tn__pinned_find(&t, 1100, 100), r);
	ck_assert_ptr_null(tn__pinned_find(&t, 1200, 1)); /* one past the end */
	ck_assert_ptr_null(tn__pinned_find(&t, 1199, 2));
	ck_assert_ptr_null(tn__pinned_find(&t, 3000, 10)); /* in a gap */
	ck_assert_ptr_null(tn__pinned_find(&t, 3990, 20)); /* over a gap's end */
	ck_assert_ptr_nonnull(tn__pinned_find(&t, 4009, 1));
	ck_assert_ptr_null(tn__pinned_find(&t, 4010, 0));
	ck_assert_ptr_null(tn__pinned_find(&t, 0, 1));
	ck_assert_ptr_null(tn__pinned_find(&t, UINTPTR_MAX, 2)); /* wraps */
	/* A busy range (being registered or unregistered) is not pinned for lookups. */
	t.r[0].flags |= TN__PINNED_BUSY;
	ck_assert_ptr_null(tn__pinned_find(&t, 1000, 1));
	ck_assert_ptr_nonnull(tn__pinned_find(&t, 1100, 1));
	tn__pinned_clear(&t);
}
END_TEST

START_TEST(test_table_remove)
{
	struct tn__pinned_table t = { 0 };
	for (uintptr_t s = 100; s <= 500; s += 100)
		ck_assert_tn_ok(tn__pinned_insert(&t, s, 50, 0, "t"));
	/* Only a range's exact start names it. */
	ck_assert_int_eq(tn__pinned_index(&t, 101), -1);
	ck_assert_int_eq(tn__pinned_index(&t, 99), -1);
	ck_assert_int_eq(tn__pinned_index(&t, 150), -1);
	ck_assert_int_eq(tn__pinned_index(&t, 600), -1);
	ptrdiff_t i = tn__pinned_index(&t, 300);
	ck_assert_int_eq(i, 2);
	tn__pinned_remove_at(&t, (size_t)i);
	ck_assert_uint_eq(t.n, 4);
	ck_assert_ptr_null(tn__pinned_find(&t, 300, 1));
	ck_assert_ptr_nonnull(tn__pinned_find(&t, 200, 1));
	ck_assert_ptr_nonnull(tn__pinned_find(&t, 400, 1));
	assert_sorted_disjoint(&t);
	/* The freed place takes a larger range now. */
	ck_assert_tn_ok(tn__pinned_insert(&t, 250, 150, 0, "t"));
	tn__pinned_remove_at(&t, 0); /* first */
	tn__pinned_remove_at(&t, t.n - 1); /* last */
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.r[0].start, 200);
	ck_assert_uint_eq(t.r[2].start, 400);
	tn__pinned_clear(&t);
}
END_TEST

/* ---- many ranges against a brute-force model ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define SPACE 20000 /* the model's address space, in units */
#define UNIT 16

START_TEST(test_table_many_vs_model)
{
	static int owner[SPACE]; /* range id + 1 of each unit, 0: free */
	static uintptr_t starts[SPACE];
	static size_t lens[SPACE];
	struct tn__pinned_table t = { 0 };
	int live = 0, nid = 0;

	memset(owner, 0, sizeof(owner));
	for (int step = 0; step < 20000; step++) {
		uint64_t op = next_rand() % 10;
		if (op < 6) { /* insert */
			size_t u = next_rand() % SPACE, n = 1 + next_rand() % 40;
			if (u + n > SPACE)
				n = SPACE - u;
			bool free = true;
			for (size_t k = u; k < u + n; k++)
				free = free && !owner[k];
			int rc = tn__pinned_insert(&t, (u + 1) * UNIT, n * UNIT, (unsigned)nid, "t");
			ck_assert_int_eq(rc, free ? 0 : TN_EEXIST);
			if (free) {
				for (size_t k = u; k < u + n; k++)
					owner[k] = nid + 1;
				starts[nid] = (u + 1) * UNIT;
				lens[nid] = n * UNIT;
				nid++;
				live++;
			}
		} else if (op < 8 && live > 0) { /* remove a random live range */
			size_t u = next_rand() % SPACE;
			while (!owner[u])
				u = (u + 1) % SPACE;
			int id = owner[u] - 1;
			ptrdiff_t i = tn__pinned_index(&t, starts[id]);
			ck_assert_int_ge(i, 0);
			ck_assert_uint_eq(t.r[i].flags, (unsigned)id);
			tn__pinned_remove_at(&t, (size_t)i);
			for (size_t k = 0; k < lens[id] / UNIT; k++)
				owner[starts[id] / UNIT - 1 + k] = 0;
			live--;
		} else { /* a containment query of unaligned bytes */
			uintptr_t p = UNIT + next_rand() % (SPACE * UNIT);
			size_t n = next_rand() % (3 * UNIT);
			size_t last = n ? n - 1 : 0;
			int id = -1;
			if (p + last < (SPACE + 1) * UNIT) {
				int a = owner[p / UNIT - 1], b = owner[(p + last) / UNIT - 1];
				if (a && a == b)
					id = a - 1;
			}
			const struct tn__pinned_range *r = tn__pinned_find(&t, p, n);
			if (id < 0) {
				ck_assert_ptr_null(r);
			} else {
				ck_assert_ptr_nonnull(r);
				ck_assert_uint_eq(r->start, starts[id]);
			}
		}
		ck_assert_uint_eq(t.n, (size_t)live);
	}
	assert_sorted_disjoint(&t);
	ck_assert_uint_gt(nid, 1000); /* the model really got many ranges */
	tn__pinned_clear(&t);
}
END_TEST

/* Insertion fails cleanly when the array cannot grow. */
START_TEST(test_table_enomem)
{
	struct tn__pinned_table t = { 0 };
	/* Fill the first array (16 ranges), then ask for growth with allocations failing. */
	for (int i = 0; i < 16; i++)
		ck_assert_tn_ok(tn__pinned_insert(&t, 100 + 10 * (uintptr_t)i, 10, 0, "t"));
	ck_assert_uint_eq(t.cap, 16);
	tn_alloc_fail_nth(1); /* the next allocation */
	ck_assert_tn_error(tn__pinned_insert(&t, 1000, 10, 0, "t"), TN_ENOMEM, "t: out of memory");
	tn_alloc_fail_nth(0);
	ck_assert_uint_eq(t.n, 16);
	ck_assert_ptr_null(tn__pinned_find(&t, 1000, 1));
	ck_assert_tn_ok(tn__pinned_insert(&t, 1000, 10, 0, "t"));
	ck_assert_uint_eq(t.n, 17);
	tn__pinned_clear(&t);
}
END_TEST

/* ---- the process-wide table ---- */

START_TEST(test_global_mark_and_del)
{
	char buf[256];
	uintptr_t p = (uintptr_t)buf;

	ck_assert_uint_eq(tn__pinned_count(), 0);
	ck_assert(!tn_cuda_is_pinned(buf, 1));
	ck_assert_tn_ok(tn__pinned_add(p, 128, TN__PINNED_BUSY, "t"));
	ck_assert_uint_eq(tn__pinned_count(), 1);
	ck_assert(!tn_cuda_is_pinned(buf, 1)); /* still being registered */
	ck_assert_int_eq(tn__pinned_mark(p, TN__PINNED_BUSY, 0, NULL, "t"), TN_EBUSY);
	struct tn__pinned_range r;
	ck_assert_tn_ok(tn__pinned_mark(p, 0, TN__PINNED_BUSY, &r, "t"));
	ck_assert_uint_eq(r.start, p);
	ck_assert_uint_eq(r.len, 128);
	ck_assert_uint_eq(r.flags, 0);
	ck_assert(tn_cuda_is_pinned(buf, 128));
	ck_assert(tn_cuda_is_pinned(buf + 127, 0));
	ck_assert(!tn_cuda_is_pinned(buf, 129));
	ck_assert(!tn_cuda_is_pinned(buf + 128, 1));
	ck_assert(!tn_cuda_is_pinned(NULL, 1));
	ck_assert_int_eq(tn__pinned_add(p + 64, 128, 0, "t"), TN_EEXIST);
	ck_assert_tn_error_has(tn__pinned_mark(p + 1, TN__PINNED_BUSY, 0, NULL, "t"), TN_ENOENT,
			       "t: no range registered with libtensor starts at");
	ck_assert_tn_ok(tn__pinned_del(p, "t"));
	ck_assert_int_eq(tn__pinned_del(p, "t"), TN_ENOENT);
	ck_assert_uint_eq(tn__pinned_count(), 0);
	ck_assert(!tn_cuda_is_pinned(buf, 1));
}
END_TEST

#define NTHREADS 8
#define PER_THREAD 500

static char space[NTHREADS][PER_THREAD][64];
static pthread_barrier_t barrier;
static _Atomic int contested_wins;

static void *churn(void *arg)
{
	const int me = (int)(intptr_t)arg;
	int bad = 0;
	pthread_barrier_wait(&barrier);
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < PER_THREAD; i++)
			bad += tn__pinned_add((uintptr_t)space[me][i], 64, 0, "t") != 0;
		/* Our ranges are visible to us whatever the others do; the next thread's come
		 * and go (the answer may be either, the call must not crash or tear). */
		for (int i = 0; i < PER_THREAD; i++) {
			bad += !tn_cuda_is_pinned(space[me][i], 64);
			bad += tn_cuda_is_pinned(space[me][i], 65); /* runs into a neighbour */
			(void)tn_cuda_is_pinned(space[(me + 1) % NTHREADS][i], 8);
		}
		for (int i = 0; i < PER_THREAD; i++)
			bad += tn__pinned_del((uintptr_t)space[me][i], "t") != 0;
	}
	/* All threads race for one range: exactly one wins. */
	static char shared[4096];
	pthread_barrier_wait(&barrier);
	int rc = tn__pinned_add((uintptr_t)shared + (uintptr_t)me, 4096 - NTHREADS, 0, "t");
	if (rc == 0)
		atomic_fetch_add(&contested_wins, 1);
	else
		bad += rc != TN_EEXIST;
	return (void *)(intptr_t)bad;
}

START_TEST(test_global_threads)
{
	pthread_t th[NTHREADS];
	pthread_barrier_init(&barrier, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i), 0);
	for (int i = 0; i < NTHREADS; i++) {
		void *bad;
		ck_assert_int_eq(pthread_join(th[i], &bad), 0);
		ck_assert_int_eq((int)(intptr_t)bad, 0);
	}
	pthread_barrier_destroy(&barrier);
	ck_assert_int_eq(atomic_load(&contested_wins), 1);
	ck_assert_uint_eq(tn__pinned_count(), 1);
}
END_TEST

START_TEST(test_global_fork)
{
	static char buf[4096];
	ck_assert_tn_ok(tn__pinned_add((uintptr_t)buf, sizeof(buf), 0, "t"));
	ck_assert(tn_cuda_is_pinned(buf, sizeof(buf)));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Page locks are not inherited: the child's table starts empty, and works. */
		int ok = tn__pinned_count() == 0 && !tn_cuda_is_pinned(buf, 1) &&
			 tn__pinned_add((uintptr_t)buf, 16, 0, "t") == 0 &&
			 tn_cuda_is_pinned(buf, 16);
		_exit(ok ? 0 : 1);
	}
	int st = wait_status(pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert(tn_cuda_is_pinned(buf, sizeof(buf))); /* the parent's is untouched */
	ck_assert_uint_eq(tn__pinned_count(), 1);
}
END_TEST

/* ---- the public calls without a GPU ---- */

/* Attach @a's file again read-only, as tensord's clients do, in this process. */
static int r_hold(void *ctx, const char *name, const tn_arena_handle *handle,
		  struct tn__arena_remote_entry *ret)
{
	(void)ctx, (void)name, (void)handle, (void)ret;
	return TN_ENOTSUP; /* no daemon in this test */
}
static void r_release(void *ctx, uint64_t block)
{
	(void)ctx, (void)block;
}
static void r_detach(void *ctx, int slot)
{
	(void)ctx, (void)slot;
}
static const struct tn__arena_remote no_daemon = { r_hold, r_release, r_detach, NULL };

static tn_arena *attach_read_only(tn_arena *a)
{
	int slot;
	uint64_t state;
	ck_assert_tn_ok(tn__arena_assign_slot(a, getpid(), tn__proc_start_time(getpid()), &slot,
					      &state));
	int fd = open(arena_file, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	tn_arena *b = NULL;
	ck_assert_tn_ok(tn__arena_attach_slot(fd, slot, TN__ATTACH_READ_ONLY, &no_daemon, &b));
	close(fd);
	ck_assert(tn__arena_read_only(b));
	return b;
}

START_TEST(test_no_device)
{
	if (tn_cuda_device_count() > 0)
		return; /* the GPU cases below cover this machine */
	char buf[4096];
	tn_arena *a = make("nodev", 8 << 20);
	ck_assert_tn_error(tn_cuda_host_register(buf, sizeof(buf), 0), TN_ENODEV,
			   "tn_cuda_host_register: no CUDA GPUs are available");
	ck_assert_tn_error(tn_cuda_arena_register(a), TN_ENODEV,
			   "tn_cuda_arena_register: no CUDA GPUs are available");
	tn_arena *b = attach_read_only(a);
	ck_assert_int_eq(tn_cuda_arena_register(b), TN_ENODEV);
	/* Nothing is left registered, and nothing is there to unregister. */
	ck_assert_uint_eq(tn__pinned_count(), 0);
	ck_assert(!tn_cuda_is_pinned(buf, 1));
	ck_assert_int_eq(tn_cuda_host_unregister(buf), TN_ENOENT);
	ck_assert_tn_ok(tn_cuda_arena_unregister(a));
	/* The arena works as before. */
	void *p = NULL;
	ck_assert_tn_ok(tn_arena_alloc(a, 1 << 20, &p));
	memset(p, 7, 1 << 20);
	ck_assert(!tn_cuda_is_pinned(p, 1));
	ck_assert_tn_ok(tn_arena_free(a, p));
	tn_arena_unref(b);
	tn_arena_unref(a);
}
END_TEST

/* Argument errors come before the device check, so they are the same everywhere. */
START_TEST(test_bad_arguments)
{
	char buf[64];
	ck_assert_tn_error(tn_cuda_host_register(NULL, 64, 0), TN_EINVAL,
			   "tn_cuda_host_register: NULL ptr");
	ck_assert_tn_error(tn_cuda_host_register(buf, 0, 0), TN_EINVAL,
			   "tn_cuda_host_register: nbytes is 0");
	ck_assert_tn_error(tn_cuda_host_register(buf, 64, 6), TN_EINVAL,
			   "tn_cuda_host_register: unknown flags 0x6");
	ck_assert_tn_error(tn_cuda_host_unregister(NULL), TN_EINVAL,
			   "tn_cuda_host_unregister: NULL ptr");
	ck_assert_tn_error(tn_cuda_arena_register(NULL), TN_EINVAL,
			   "tn_cuda_arena_register: not an arena handle of this process");
	ck_assert_int_eq(tn_cuda_arena_unregister((tn_arena *)buf), TN_EINVAL);
	ck_assert(!tn_tensor_is_pinned(NULL));
}
END_TEST

/* ---- with a GPU: a read-only handle's one mapping ---- */

START_TEST(test_read_only_handle_gpu)
{
	if (tn_cuda_device_count() == 0)
		return;
	tn_arena *a = make("ro", 8 << 20);
	tn_arena *b = attach_read_only(a);
	void *rw, *ro;
	size_t len, page;
	tn__arena_mappings(b, &rw, &ro, &len, &page);
	ck_assert_ptr_null(ro);
	ck_assert_tn_ok(tn_cuda_arena_register(b));
	ck_assert_tn_ok(tn_cuda_arena_register(b)); /* once per mapping */
	ck_assert(tn_cuda_is_pinned(rw, len));
	ck_assert_uint_eq(tn__pinned_count(), 1);
	ck_assert_int_eq(tn_cuda_host_unregister(rw), TN_EINVAL); /* the arena's */
	/* Its pages are pinned read-only for CUDA: a device read of them works. */
	tn_tensor *g;
	int64_t n[] = { 1024 };
	ck_assert_tn_ok(tn_empty(1, n, TN_UINT8, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &g));
	tn_tensor *h;
	ck_assert_tn_ok(tn_from_blob(rw, 1, n, NULL, TN_UINT8, NULL, NULL, &h));
	ck_assert(tn_tensor_is_pinned(h)); /* its bytes are pinned, whoever owns them */
	ck_assert_tn_ok(tn_copy_(g, h, true)); /* asynchronous DMA from a read-only mapping */
	tn_tensor_unref(h); /* kept alive by the copy until it is done */
	ck_assert_tn_ok(tn_cuda_synchronize(0));
	tn_tensor *back;
	ck_assert_tn_ok(tn_to_device(g, TN_CPU, TN_UINT8, false, false, NULL, &back));
	ck_assert_int_eq(memcmp(tn_tensor_data(back), rw, 1024), 0); /* the arena's header */
	tn_tensor_unref(back);
	tn_tensor_unref(g);
	tn_arena_unref(b); /* unregisters before unmapping */
	ck_assert(!tn_cuda_is_pinned(rw, 1));
	ck_assert_uint_eq(tn__pinned_count(), 0);
	tn_arena_unref(a);
}
END_TEST

static Suite *cuda_pinned_suite(void)
{
	/* The backend's sources are linked into this program with the library's internal copy:
	 * they serve CUDA here, rather than a libtensor-cuda.so loaded beside them. */
	if (tn__device_register(&tn__cuda_device_ops) < 0)
		ck_abort_msg("%s", tn_last_error());
	Suite *s = suite_create("cuda_pinned");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, test_table_overlaps);
	tcase_add_test(tc, test_table_find_edges);
	tcase_add_test(tc, test_table_remove);
	tcase_add_test(tc, test_table_many_vs_model);
	tcase_add_test(tc, test_table_enomem);
	suite_add_tcase(s, tc);
	tc = tcase_create("process");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_global_mark_and_del);
	tcase_add_test(tc, test_global_threads);
	tcase_add_test(tc, test_global_fork);
	suite_add_tcase(s, tc);
	tc = tcase_create("public");
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_no_device);
	tcase_add_test(tc, test_bad_arguments);
	tcase_add_test(tc, test_read_only_handle_gpu);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(cuda_pinned_suite)
