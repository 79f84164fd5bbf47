/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory arenas with real processes: creation and validation, the heap, the named
 * directory, sealing (a write from another process faults), crash safety (a process killed
 * at every write point of every kind of change, a lock holder killed, hundreds of random
 * kills of concurrent workers), fsck, the syscall-free data path (a seccomp filter),
 * and the arena as the allocator of factories and operators.
 *
 * Each test runs in its own directory on /dev/shm (tmpfs). Workers are this program
 * re-executed with "--worker" (fork + exec), or forked children.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../shm/arena_internal.h"
#include "arena_testutil.h"

static const char *self_exe;

static tn_tensor *arena_tensor(tn_arena *a, int n, const int64_t *sizes, enum tn_dtype dt)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t numel = 1;
	for (int i = 0; i < n; i++)
		numel *= sizes[i];
	ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)numel * tn_dtype_size(dt),
						      tn_arena_allocator(a), &s));
	ck_assert_tn_ok(tn_tensor_new(s, 0, n, sizes, NULL, dt, &t));
	tn_storage_unref(s);
	return t;
}

/* ---- creation and validation ------------------------------------------------------------------ */

START_TEST(test_create_open_destroy)
{
	tn_arena *a = make("one", 8 << 20), *b;
	tn_arena_stats s = stats(a);
	ck_assert_uint_eq(s.size, 8u << 20);
	ck_assert_uint_eq(s.backing, TN_ARENA_BACKING_TMPFS);
	ck_assert_uint_eq(s.page_size, 4096);
	ck_assert_uint_eq(s.clients, 1);
	ck_assert_uint_eq(s.used_bytes, 0);
	ck_assert_uint_eq(s.free_bytes, s.heap_bytes);
	ck_assert_uint_eq(s.heap_bytes % (2 << 20), 0);
	ck_assert_uint_eq(s.largest_free, s.heap_bytes - 64);
	ck_assert_int_ne(s.uuid[6] & 0xf0, 0);
	assert_clean(a);

	/* A second attach in the same process gets its own slot. */
	ck_assert_tn_ok(tn_arena_open("one", dir, &b));
	ck_assert_int_ne(tn_arena_slot(a), tn_arena_slot(b));
	ck_assert_uint_eq(stats(b).clients, 2);
	ck_assert_ptr_null(tn_arena_unref(b));
	ck_assert_uint_eq(stats(a).clients, 1);

	char path[128];
	snprintf(path, sizeof(path), "%s/one", dir);
	ck_assert_str_eq(tn_arena_path(a), path);
	ck_assert_tn_error_has(tn_arena_create("one", &(tn_arena_options){ .size = 8 << 20,
									   .dir = dir },
					       &b),
			       TN_EEXIST, "File exists");
	ck_assert_tn_ok(tn_arena_destroy("one", dir, 0));
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_tn_error_has(tn_arena_open("one", dir, &b), TN_ENOENT, "No such file");
	ck_assert_ptr_null(tn_arena_unref(a));
}
END_TEST

START_TEST(test_bad_names_and_options)
{
	tn_arena *a = NULL;
	tn_arena_options o;
	tn_arena_options_init(&o);
	o.dir = dir;
	ck_assert_tn_error_has(tn_arena_create("", &o, &a), TN_EINVAL, "1 to 200 characters");
	ck_assert_tn_error_has(tn_arena_create(".hidden", &o, &a), TN_EINVAL, "not start with '.'");
	ck_assert_tn_error_has(tn_arena_create("a/b", &o, &a), TN_EINVAL, "character 0x2f");
	ck_assert_tn_error_has(tn_arena_create(NULL, &o, &a), TN_EINVAL, "NULL arena name");
	o.size = 1 << 20;
	ck_assert_tn_error_has(tn_arena_create("small", &o, &a), TN_EINVAL, "outside [4 MiB");
	o.size = 8 << 20;
	o.flags = 1u << 9;
	ck_assert_tn_error_has(tn_arena_create("x", &o, &a), TN_EINVAL, "unknown flags");
	o.flags = 0;
	o.numa_policy = TN_NUMA_BIND;
	ck_assert_tn_error_has(tn_arena_create("x", &o, &a), TN_EINVAL, "needs a node mask");
	o.numa_nodes = UINT64_C(1) << 40;
	ck_assert_tn_error_has(tn_arena_create("x", &o, &a), TN_ERANGE, "lacks");
	o.numa_policy = TN_NUMA_DEFAULT;
	o.max_names = 60000; /* 60000 entries leave no heap in 8 MiB */
	ck_assert_tn_error_has(tn_arena_create("x", &o, &a), TN_EINVAL, "no room for a heap");
	ck_assert_ptr_null(a);
	/* Nothing was left behind by the failures. */
	char path[128];
	snprintf(path, sizeof(path), "%s/x", dir);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(tn_arena_alloc(NULL, 64, (void **)&a), TN_EBADF);
}
END_TEST

/* Files that are not arenas, or damaged ones, are refused with a reason, never trusted. */
START_TEST(test_open_validates)
{
	char path[128];
	tn_arena *a = NULL;
	snprintf(path, sizeof(path), "%s/junk", dir);
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8 << 20), 0);
	unsigned char buf[4096];
	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rand();
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_tn_error_has(tn_arena_open("junk", dir, &a), TN_EINVAL, "not a libtensor arena");
	ck_assert_tn_error_has(tn_arena_attach_fd(fd, &a), TN_EINVAL, "not a libtensor arena");
	close(fd);

	/* A real arena with one field damaged at a time. */
	tn_arena *good = make("good", 8 << 20);
	int gfd = tn_arena_fd(good);
	struct {
		size_t off;
		uint64_t value;
		const char *msg;
	} cases[] = {
		{ offsetof(struct arena_header, version), 99, "layout version 99" },
		{ offsetof(struct arena_header, size), 1 << 30, "damaged header (size)" },
		{ offsetof(struct arena_header, dir_slots), 1000, "damaged header (directory)" },
		{ offsetof(struct arena_header, data_off), 4096, "damaged header (data region)" },
		{ offsetof(struct arena_header, numa_policy), 77, "damaged header (placement)" },
	};
	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++) {
		uint64_t old = 0;
		size_t w = cases[i].off == offsetof(struct arena_header, version) ||
					   cases[i].off == offsetof(struct arena_header, dir_slots) ||
					   cases[i].off == offsetof(struct arena_header, numa_policy)
				   ? 4
				   : 8;
		ck_assert_int_eq(pread(gfd, &old, w, (off_t)cases[i].off), (ssize_t)w);
		ck_assert_int_eq(pwrite(gfd, &cases[i].value, w, (off_t)cases[i].off), (ssize_t)w);
		ck_assert_tn_error_has(tn_arena_open("good", dir, &a), cases[i].off ==
					       offsetof(struct arena_header, version) ? TN_EINVAL : TN_EINVAL,
				       cases[i].msg);
		ck_assert_int_eq(pwrite(gfd, &old, w, (off_t)cases[i].off), (ssize_t)w);
	}
	ck_assert_tn_ok(tn_arena_open("good", dir, &a));
	tn_arena_unref(a);
	tn_arena_unref(good);
}
END_TEST

/* A full tmpfs is ENOSPC at creation and the file is gone: never a SIGBUS later. */
START_TEST(test_full_tmpfs)
{
	char small[128];
	tn_arena *a = NULL;
	snprintf(small, sizeof(small), "%s/small", dir);
	ck_assert_int_eq(mkdir(small, 0700), 0);
	tn_arena_options o;
	tn_arena_options_init(&o);
	o.size = 16 << 20;
	o.dir = small;
	if (mount("tn-check", small, "tmpfs", 0, "size=8m") == 0) {
		ck_assert_tn_error_has(tn_arena_create("big", &o, &a), TN_ENOSPC,
				       "No space left on device");
		o.size = 4 << 20;
		ck_assert_tn_ok(tn_arena_create("fits", &o, &a));
		tn_arena_unref(a);
		umount2(small, MNT_DETACH);
	} else {
		/* Not root: a file size limit plays the full file system. */
		struct rlimit rl = { 12 << 20, 12 << 20 };
		signal(SIGXFSZ, SIG_IGN);
		ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
		ck_assert_tn_error_has(tn_arena_create("big", &o, &a), TN_ENOSPC, "File too large");
	}
	char path[160];
	snprintf(path, sizeof(path), "%s/big", small);
	ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

/* ---- the heap ---------------------------------------------------------------------------------- */

/* A free block large enough but in the request's own sub-bin is found (the good fit rounds the
 * request up to the next sub-bin and misses it): the heap is filled but for one block of
 * 16 KiB + 700 bytes, and a request of 16 KiB + 100 bytes gets it. */
START_TEST(test_alloc_own_sub_bin)
{
	tn_arena *a = make("subbin", 16 << 20);
	void *x, *p;
	ck_assert_tn_ok(tn_arena_alloc(a, 16384 + 700, &x));
	static const size_t fill[] = { 1 << 20, 64 << 10, 8 << 10 };
	int n = 0;
	for (size_t i = 0; i < TN_ARRAY_SIZE(fill); i++)
		while (tn_arena_alloc(a, fill[i], &p) == 0)
			n++;
	ck_assert_int_gt(n, 10);
	ck_assert_uint_lt(stats(a).largest_free, 16384);
	ck_assert_tn_ok(tn_arena_free(a, x));
	ck_assert_uint_ge(stats(a).largest_free, 16384 + 700);
	ck_assert_tn_ok(tn_arena_alloc(a, 16384 + 100, &p));
	ck_assert_ptr_eq(p, x);
	assert_clean(a);
	/* Larger than the largest free block (x and the alignment gap after it, merged): refused. */
	ck_assert_tn_ok(tn_arena_free(a, p));
	uint64_t largest = stats(a).largest_free;
	ck_assert_tn_ok(tn_arena_alloc(a, largest, &p));
	ck_assert_ptr_eq(p, x);
	ck_assert_tn_ok(tn_arena_free(a, p));
	ck_assert_int_eq(tn_arena_alloc(a, largest + 64, &p), TN_ENOMEM);
	assert_clean(a);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_arena_destroy("subbin", dir, 0));
}
END_TEST

START_TEST(test_alloc_free)
{
	tn_arena *a = make("heap", 16 << 20);
	tn_arena_stats s0 = stats(a);
	void *p[64];
	size_t sizes[] = { 1, 64, 65, 1000, 4096, 65536, 100000, 2 << 20, 3 << 20 };
	for (size_t i = 0; i < TN_ARRAY_SIZE(sizes); i++) {
		ck_assert_tn_ok(tn_arena_alloc(a, sizes[i], &p[i]));
		uintptr_t align = sizes[i] >= (2 << 20) ? 2 << 20 : sizes[i] >= 65536 ? 4096 : 64;
		ck_assert_uint_eq((uintptr_t)p[i] % align, 0);
		memset(p[i], (int)i + 1, sizes[i]);
	}
	for (size_t i = 0; i < TN_ARRAY_SIZE(sizes); i++)
		for (size_t j = 0; j < sizes[i]; j += 97)
			ck_assert_int_eq(((unsigned char *)p[i])[j], (int)i + 1);
	tn_arena_stats s1 = stats(a);
	ck_assert_uint_eq(s1.blocks, TN_ARRAY_SIZE(sizes));
	ck_assert_uint_eq(s1.used_bytes + s1.free_bytes, s0.free_bytes);
	assert_clean(a);
	/* Free in an order that exercises merging with both neighbours. */
	for (size_t i = 0; i < TN_ARRAY_SIZE(sizes); i += 2)
		ck_assert_tn_ok(tn_arena_free(a, p[i]));
	assert_clean(a);
	for (size_t i = 1; i < TN_ARRAY_SIZE(sizes); i += 2)
		ck_assert_tn_ok(tn_arena_free(a, p[i]));
	/* The blocks of 4 KiB or less wait in the thread's cache, still allocated: sizes 1, 64
	 * (128-byte blocks), 65 and 1000 (192 and 1088), 4096 (4160). */
	ck_assert_uint_eq(stats(a).blocks, 5);
	assert_clean(a);
	ck_assert_int_eq(tn_arena_trim(a), 128 + 128 + 192 + 1088 + 4160);
	ck_assert_int_eq(tn_arena_trim(a), 0);
	tn_arena_stats s2 = stats(a);
	ck_assert_uint_eq(s2.free_bytes, s0.free_bytes);
	ck_assert_uint_eq(s2.free_blocks, 1);
	ck_assert_uint_eq(s2.blocks, 0);
	ck_assert_uint_eq(s2.num_allocs, TN_ARRAY_SIZE(sizes));
	ck_assert_uint_eq(s2.num_frees, TN_ARRAY_SIZE(sizes));
	assert_clean(a);
	/* A small block comes back from the thread's cache: the same one, no lock taken. */
	ck_assert_tn_ok(tn_arena_alloc(a, 100, &p[0]));
	ck_assert_tn_ok(tn_arena_free(a, p[0]));
	uint64_t allocs = stats(a).num_allocs;
	ck_assert_tn_ok(tn_arena_alloc(a, 128, &p[1]));
	ck_assert_ptr_eq(p[1], p[0]);
	ck_assert_uint_eq(stats(a).num_allocs, allocs);
	ck_assert_tn_ok(tn_arena_free(a, p[1]));
	/* Errors: a pointer that is no block, a double free (cached or not), a storage's block,
	 * too large. */
	int x;
	ck_assert_tn_error_has(tn_arena_free(a, &x), TN_EBADF, "not a block this process holds");
	ck_assert_tn_error_has(tn_arena_free(a, (char *)p[1] + 64), TN_EBADF,
			       "not a block this process holds");
	ck_assert_tn_error_has(tn_arena_free(a, p[0]), TN_EBADF, "freed already");
	ck_assert_tn_ok(tn_arena_alloc(a, 1 << 20, &p[0]));
	ck_assert_tn_ok(tn_arena_free(a, p[0]));
	ck_assert_tn_error_has(tn_arena_free(a, p[0]), TN_EBADF, "not a block this process holds");
	int64_t one[] = { 4 };
	tn_tensor *t = arena_tensor(a, 1, one, TN_FLOAT32);
	ck_assert_tn_error_has(tn_arena_free(a, tn_tensor_data(t)), TN_EBADF, "storage's block");
	tn_tensor_unref(t);
	ck_assert_int_gt(tn_arena_trim(a), 0);
	ck_assert_tn_error_has(tn_arena_alloc(a, 64u << 20, &p[0]), TN_ENOMEM, "exceed");
	ck_assert_tn_error_has(tn_arena_alloc(a, s0.largest_free + 1, &p[0]), TN_ENOMEM,
			       "no free block of");
	ck_assert_tn_error(tn_arena_alloc(a, 0, &p[0]), TN_EINVAL, "tn_arena_alloc: 0 bytes");
	ck_assert_tn_ok(tn_arena_alloc(a, s0.largest_free, &p[0]));
	ck_assert_tn_ok(tn_arena_free(a, p[0]));
	tn_arena_unref(a);
}
END_TEST

/* Random allocations and frees against a model: contents intact, fsck clean throughout. */
START_TEST(test_alloc_random)
{
	tn_arena *a = make("rand", 32 << 20);
	uint64_t start = stats(a).free_bytes;
	enum { N = 300 };
	void *p[N] = { 0 };
	size_t len[N] = { 0 };
	unsigned seed = 12345;
	for (int step = 0; step < 6000; step++) {
		int i = (int)(rand_r(&seed) % N);
		if (p[i]) {
			unsigned char *q = p[i];
			ck_assert_int_eq(q[0], i & 0xff);
			ck_assert_int_eq(q[len[i] - 1], i & 0xff);
			ck_assert_tn_ok(tn_arena_free(a, p[i]));
			p[i] = NULL;
		} else {
			unsigned r = rand_r(&seed);
			len[i] = r % 8 == 0 ? 1 + r % (600 << 10) : 1 + r % 3000;
			if (tn_arena_alloc(a, len[i], &p[i]) == 0)
				memset(p[i], i & 0xff, len[i]);
			else
				p[i] = NULL;
		}
		if (step % 1000 == 0)
			assert_clean(a);
	}
	for (int i = 0; i < N; i++)
		if (p[i])
			ck_assert_tn_ok(tn_arena_free(a, p[i]));
	assert_clean(a);
	ck_assert_int_gt(tn_arena_trim(a), 0);
	ck_assert_uint_eq(stats(a).free_bytes, start);
	ck_assert_uint_eq(stats(a).free_blocks, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* Each thread caches the small raw blocks it frees: allocation runs out only after the
 * caches were given back, a thread's blocks return when it exits, and the handle's last
 * reference frees what other threads still keep. */
static void *cache_thread(void *arg)
{
	tn_arena *a = arg;
	void *p[16];
	for (int i = 0; i < 16; i++)
		if (tn_arena_alloc(a, 1000, &p[i]))
			return (void *)1;
	for (int i = 0; i < 16; i++)
		if (tn_arena_free(a, p[i]))
			return (void *)2;
	return NULL;
}

START_TEST(test_thread_cache)
{
	tn_arena *a = make("tcache", 8 << 20);
	uint64_t start = stats(a).free_bytes;
	pthread_t th;
	void *ret;
	ck_assert_int_eq(pthread_create(&th, NULL, cache_thread, a), 0);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_null(ret);
	/* The thread's exit gave its cached blocks back. */
	ck_assert_uint_eq(stats(a).free_bytes, start);
	ck_assert_uint_eq(stats(a).blocks, 0);

	/* Fill the heap with small blocks, free them all into the cache (as far as it takes
	 * them), then ask for everything: the cache is given back first. */
	enum { N = 4096 };
	void **p = calloc(N, sizeof(*p));
	int n = 0;
	while (n < N && tn_arena_alloc(a, 4096, &p[n]) == 0)
		n++;
	ck_assert_int_gt(n, 100);
	for (int i = 0; i < n; i++)
		ck_assert_tn_ok(tn_arena_free(a, p[i]));
	ck_assert_uint_gt(stats(a).blocks, 0);
	ck_assert_uint_lt(stats(a).blocks, 10);
	void *big;
	ck_assert_tn_ok(tn_arena_alloc(a, stats(a).heap_bytes - 4096, &big));
	ck_assert_tn_ok(tn_arena_free(a, big));
	ck_assert_uint_eq(stats(a).free_bytes, start);
	free(p);

	/* Blocks cached by this thread go with the handle's last reference. */
	tn_arena *b;
	ck_assert_tn_ok(tn_arena_open("tcache", dir, &b));
	ck_assert_tn_ok(tn_arena_alloc(b, 64, &big));
	ck_assert_tn_ok(tn_arena_free(b, big));
	ck_assert_uint_eq(stats(a).blocks, 1);
	tn_arena_unref(b);
	ck_assert_uint_eq(stats(a).blocks, 0);
	ck_assert_uint_eq(stats(a).free_bytes, start);
	/* ... and a cache bound to a handle that is gone is simply rebound. */
	ck_assert_tn_ok(tn_arena_alloc(a, 64, &big));
	ck_assert_tn_ok(tn_arena_free(a, big));
	ck_assert_int_eq(tn_arena_trim(a), 128);
	assert_clean(a);
	ck_assert_tn_error(tn_arena_trim(NULL), TN_EBADF, "tn_arena_trim: not an arena handle of this process");
	tn_arena_unref(a);
}
END_TEST

/* A child of fork() does not inherit the parent's attachment: the parent's handles are
 * refused, letting go of inherited storages leaves the parent's holds alone, and the child
 * opens the arena for itself (a slot, holds and a thread cache of its own). */
START_TEST(test_fork)
{
	tn_arena *a = make("fork", 8 << 20);
	void *p, *q;
	int64_t sz[] = { 64 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT32);
	int32_t *d = tn_tensor_data(t);
	for (int i = 0; i < 64; i++)
		d[i] = i;
	ck_assert_tn_ok(tn_arena_alloc(a, 64, &p));
	ck_assert_tn_ok(tn_arena_free(a, p)); /* now in this thread's cache */
	uint64_t blocks = stats(a).blocks;
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		void *c;
		if (tn_arena_alloc(a, 64, &c) != TN_EBADF || !strstr(tn_last_error(), "this process"))
			_exit(10);
		tn_tensor_unref(t); /* the parent's hold stays */
		tn_arena_unref(a);
		if (tn_arena_open("fork", dir, &b) || tn_arena_slot(b) == tn_arena_slot(a))
			_exit(11);
		if (tn_arena_alloc(b, 64, &c) || c == p)
			_exit(12);
		memset(c, 0x5a, 64);
		if (tn_arena_free(b, c))
			_exit(13);
		tn_arena_unref(b);
		_exit(0);
	}
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
	ck_assert_uint_eq(stats(a).blocks, blocks);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(d[i], i);
	ck_assert_tn_ok(tn_arena_alloc(a, 64, &q));
	ck_assert_ptr_eq(q, p); /* the cache survived the child */
	ck_assert_tn_ok(tn_arena_free(a, q));
	tn_tensor_unref(t);
	tn_arena_trim(a);
	ck_assert_uint_eq(stats(a).blocks, 0);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* ---- the directory --------------------------------------------------------------------------- */

START_TEST(test_publish_lookup)
{
	tn_arena *a = make("dir", 16 << 20);
	int64_t sizes[] = { 3, 4 };
	tn_tensor *t = arena_tensor(a, 2, sizes, TN_FLOAT32);
	float *d = tn_tensor_data(t);
	for (int i = 0; i < 12; i++)
		d[i] = (float)i * 1.5f;
	tn_tensor *tt;
	ck_assert_tn_ok(tn_transpose(t, 0, 1, &tt));
	tn_arena_handle h;
	ck_assert_tn_ok(tn_arena_publish(a, "model/layer0/weight", t, 0, &h));
	ck_assert_tn_ok(tn_arena_publish(a, "model/layer0/weight_t", tt, 0, NULL));
	ck_assert_tn_error_has(tn_arena_publish(a, "model/layer0/weight", t, 0, NULL), TN_EEXIST,
			       "already published");
	ck_assert_uint_eq(stats(a).names, 2);

	/* Lookup in another process: the same bytes, dtype, sizes and strides. */
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *x, *y;
		if (tn_arena_open("dir", dir, &b) || tn_arena_lookup(b, "model/layer0/weight_t", &y, NULL) ||
		    tn_arena_lookup(b, "model/layer0/weight", &x, NULL))
			_exit(10);
		if (tn_tensor_ndim(y) != 2 || tn_tensor_sizes(y)[0] != 4 || tn_tensor_strides(y)[0] != 1 ||
		    tn_tensor_dtype(y) != TN_FLOAT32)
			_exit(11);
		const float *v = tn_tensor_data(x);
		for (int i = 0; i < 12; i++)
			if (v[i] != (float)i * 1.5f)
				_exit(12);
		/* Write through the (unsealed) tensor: the parent sees it. */
		((float *)tn_tensor_data(x))[5] = -1;
		tn_tensor_unref(x);
		tn_tensor_unref(y);
		tn_arena_unref(b);
		_exit(0);
	}
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	ck_assert_float_eq(d[5], -1.0f);

	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "model/layer0/weight_t", &e));
	ck_assert_int_eq(e.ndim, 2);
	ck_assert_int_eq(e.sizes[0], 4);
	ck_assert_int_eq(e.strides[0], 1);
	ck_assert_int_eq(e.strides[1], 4);
	ck_assert_int_eq(e.dtype, TN_FLOAT32);
	ck_assert_uint_ge(e.block_bytes, 48);

	/* Stale handles. */
	tn_tensor *x;
	ck_assert_tn_ok(tn_arena_lookup_handle(a, h, &x));
	tn_tensor_unref(x);
	ck_assert_tn_ok(tn_arena_publish(a, "model/layer0/weight", tt, TN_ARENA_REPLACE, NULL));
	ck_assert_tn_error_has(tn_arena_lookup_handle(a, h, &x), TN_ESTALE, "stale");
	ck_assert_tn_ok(tn_arena_unpublish(a, "model/layer0/weight"));
	ck_assert_tn_error_has(tn_arena_lookup(a, "model/layer0/weight", &x, NULL), TN_ENOENT,
			       "no tensor 'model/layer0/weight'");
	ck_assert_tn_error_has(tn_arena_unpublish(a, "model/layer0/weight"), TN_ENOENT, "no tensor");

	/* Names. */
	ck_assert_tn_error_has(tn_arena_publish(a, "/abs", t, 0, NULL), TN_EINVAL, "empty part");
	ck_assert_tn_error_has(tn_arena_publish(a, "a//b", t, 0, NULL), TN_EINVAL, "empty part");
	ck_assert_tn_error_has(tn_arena_publish(a, "dir/", t, 0, NULL), TN_EINVAL, "empty part");
	ck_assert_tn_error_has(tn_arena_publish(a, "tab\there", t, 0, NULL), TN_EINVAL,
			       "control character 0x09");
	ck_assert_tn_error_has(tn_arena_publish(a, "", t, 0, NULL), TN_EINVAL, "1 to 255 bytes");
	char longname[300];
	memset(longname, 'n', sizeof(longname));
	longname[255] = 0;
	ck_assert_tn_ok(tn_arena_publish(a, longname, t, 0, NULL));
	longname[255] = 'n';
	longname[256] = 0;
	ck_assert_tn_error_has(tn_arena_publish(a, longname, t, 0, NULL), TN_EINVAL, "1 to 255");
	/* A tensor that is not in the arena. */
	tn_tensor *heap;
	ck_assert_tn_ok(tn_zeros(2, sizes, TN_FLOAT32, TN_CPU, &heap));
	ck_assert_tn_error_has(tn_arena_publish(a, "heap", heap, 0, NULL), TN_EINVAL,
			       "is not a block of arena");
	tn_tensor_unref(heap);
	assert_clean(a);
	tn_tensor_unref(t);
	tn_tensor_unref(tt);
	ck_assert_uint_eq(stats(a).blocks, 1); /* pinned by the two remaining names */
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_list)
{
	tn_arena *a = make("list", 16 << 20);
	int64_t sz[] = { 2 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT64);
	const char *names[] = { "b/2", "a/1", "b/1", "c", "b/10" };
	for (int i = 0; i < 5; i++)
		ck_assert_tn_ok(tn_arena_publish(a, names[i], t, 0, NULL));
	tn_arena_entry *e;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, "b/", &e, &n));
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(e[0].name, "b/1");
	ck_assert_str_eq(e[1].name, "b/10");
	ck_assert_str_eq(e[2].name, "b/2");
	ck_assert_int_eq(e[0].dtype, TN_INT64);
	free(e);
	ck_assert_tn_ok(tn_arena_list(a, NULL, &e, &n));
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(e[0].name, "a/1");
	free(e);
	ck_assert_tn_ok(tn_arena_list(a, "zzz", &e, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(e);
	tn_tensor_unref(t);
	tn_arena_unref(a);
}
END_TEST

/* Fill the directory, empty it, fill it again: deleted slots are reused, probes stay
 * correct, and the capacity is enforced. */
START_TEST(test_directory_churn)
{
	tn_arena_options o;
	tn_arena *a;
	tn_arena_options_init(&o);
	o.size = 8 << 20;
	o.dir = dir;
	o.max_names = 500;
	ck_assert_tn_ok(tn_arena_create("churn", &o, &a));
	int64_t sz[] = { 1 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT32);
	char name[32];
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 500; i++) {
			snprintf(name, sizeof(name), "r%d/t%d", round, i);
			ck_assert_tn_ok(tn_arena_publish(a, name, t, 0, NULL));
		}
		ck_assert_tn_error_has(tn_arena_publish(a, "one/too/many", t, 0, NULL), TN_ENOSPC,
				       "directory of arena");
		for (int i = 0; i < 500; i += 1 + round) {
			snprintf(name, sizeof(name), "r%d/t%d", round, i);
			tn_tensor *x;
			ck_assert_tn_ok(tn_arena_lookup(a, name, &x, NULL));
			tn_tensor_unref(x);
		}
		for (int i = 0; i < 500; i++) {
			snprintf(name, sizeof(name), "r%d/t%d", round, i);
			ck_assert_tn_ok(tn_arena_unpublish(a, name));
		}
		ck_assert_uint_eq(stats(a).names, 0);
		assert_clean(a);
	}
	tn_tensor_unref(t);
	tn_arena_unref(a);
}
END_TEST

/* Looking up the same tensor twice, plus a view: one storage, one hold, no new mapping. */
static int count_mappings(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int n = 0;
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, path))
			n++;
	fclose(f);
	return n;
}

START_TEST(test_lookup_once)
{
	tn_arena *a = make("once", 16 << 20);
	int64_t sz[] = { 1024 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT64);
	ck_assert_tn_ok(tn_arena_publish(a, "x", t, 0, NULL));
	tn_tensor_unref(t);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *x1, *x2, *v;
		tn_arena_client c[4];
		if (tn_arena_open("once", dir, &b))
			_exit(10);
		int maps = count_mappings(tn_arena_path(b));
		if (tn_arena_lookup(b, "x", &x1, NULL) || tn_arena_lookup(b, "x", &x2, NULL) ||
		    tn_narrow(x1, 0, 10, 5, &v))
			_exit(11);
		if (tn_tensor_storage(x1) != tn_tensor_storage(x2) ||
		    tn_tensor_storage(v) != tn_tensor_storage(x1))
			_exit(12);
		if (count_mappings(tn_arena_path(b)) != maps || maps < 2)
			_exit(13);
		int n = tn_arena_clients(b, c, 4);
		for (int i = 0; i < n; i++)
			if (c[i].slot == tn_arena_slot(b) && (c[i].held_blocks != 1 ||
							      c[i].lookups != 2))
				_exit(14); /* held once, looked up twice */
		tn_tensor_unref(x1);
		tn_tensor_unref(x2);
		n = tn_arena_clients(b, c, 4);
		for (int i = 0; i < n; i++)
			if (c[i].slot == tn_arena_slot(b) && c[i].held_blocks != 1)
				_exit(15); /* the view still holds it */
		tn_tensor_unref(v);
		n = tn_arena_clients(b, c, 4);
		for (int i = 0; i < n; i++)
			if (c[i].slot == tn_arena_slot(b) && c[i].held_blocks != 0)
				_exit(16);
		tn_arena_unref(b);
		_exit(0);
	}
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	ck_assert_uint_eq(stats(a).clients, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* One process, one block: a lookup of a name the process published gets the publishing storage
 * back and a second lookup the first one's, a sealed lookup gets one read-only storage over the
 * read-only mapping, each handle of the arena has storages of its own, and storages keep their
 * handle attached after the caller's reference to it is gone. */
START_TEST(test_storages_in_process)
{
	tn_arena *a = make("mine", 16 << 20), *b;
	int64_t sz[] = { 64 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT64), *v, *x, *y, *r1, *r2, *bx, *by;
	tn_arena_handle hv;
	ck_assert_ptr_eq(tn_arena_allocator(a), tn_arena_allocator(a));
	ck_assert_ptr_null(tn_arena_allocator(NULL));
	for (int i = 0; i < 64; i++)
		((int64_t *)tn_tensor_data(t))[i] = i;
	ck_assert_tn_ok(tn_narrow(t, 0, 8, 16, &v));
	ck_assert_tn_ok(tn_arena_publish(a, "t", t, 0, NULL));
	ck_assert_tn_ok(tn_arena_publish(a, "v", v, 0, &hv));
	ck_assert_tn_ok(tn_arena_lookup(a, "t", &x, NULL));
	ck_assert_tn_ok(tn_arena_lookup_handle(a, hv, &y));
	ck_assert_ptr_eq(tn_tensor_storage(x), tn_tensor_storage(t));
	ck_assert_ptr_eq(tn_tensor_storage(y), tn_tensor_storage(t));
	ck_assert_int_eq(((int64_t *)tn_tensor_data(y))[0], 8);

	/* A second handle of the arena in this process: its own mapping and storage. */
	ck_assert_tn_ok(tn_arena_open("mine", dir, &b));
	ck_assert_tn_ok(tn_arena_lookup(b, "t", &bx, NULL));
	ck_assert_tn_ok(tn_arena_lookup(b, "v", &by, NULL));
	ck_assert_ptr_ne(tn_tensor_storage(bx), tn_tensor_storage(t));
	ck_assert_ptr_eq(tn_tensor_storage(by), tn_tensor_storage(bx));
	ck_assert_ptr_ne(tn_tensor_data(bx), tn_tensor_data(t));
	ck_assert_int_eq(((int64_t *)tn_tensor_data(bx))[63], 63);
	tn_tensor_unref(bx);
	tn_tensor_unref(by);

	/* The publishing storage gone, the names stay: the next lookup makes a storage, the one
	 * after reuses it. */
	tn_tensor_unref(t);
	tn_tensor_unref(v);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	ck_assert_uint_eq(stats(a).blocks, 1);
	ck_assert_tn_ok(tn_arena_lookup(a, "t", &x, NULL));
	ck_assert_tn_ok(tn_arena_lookup(a, "v", &y, NULL));
	ck_assert_ptr_eq(tn_tensor_storage(x), tn_tensor_storage(y));
	ck_assert_int_eq(((int64_t *)tn_tensor_data(y))[0], 8);

	/* Sealing turns that storage read-only; sealed lookups (also of the other name over the
	 * block) share one storage over the read-only mapping. */
	ck_assert_tn_ok(tn_arena_seal(a, "t"));
	ck_assert_tn_error_has(tn_fill_(y, tn_scalar_int(1)), TN_EPERM, "sealed");
	ck_assert_tn_ok(tn_arena_lookup(a, "t", &r1, NULL));
	ck_assert_tn_ok(tn_arena_lookup(a, "v", &r2, NULL));
	ck_assert_ptr_eq(tn_tensor_storage(r1), tn_tensor_storage(r2));
	ck_assert_ptr_ne(tn_tensor_storage(r1), tn_tensor_storage(x));
	ck_assert_ptr_ne(tn_tensor_data(r1), tn_tensor_data(x));
	ck_assert_int_eq(((int64_t *)tn_tensor_data(r1))[5], 5);
	ck_assert_tn_ok(tn_arena_lookup(b, "t", &bx, NULL));
	ck_assert_ptr_ne(tn_tensor_storage(bx), tn_tensor_storage(r1));
	tn_tensor_unref(x);
	tn_tensor_unref(y);

	/* The caller lets go of @a: its storages keep it attached, until the last goes. */
	tn_arena_unref(a);
	ck_assert_uint_eq(stats(b).clients, 2);
	ck_assert_int_eq(((int64_t *)tn_tensor_data(r2))[0], 8);
	tn_tensor_unref(r1);
	ck_assert_uint_eq(stats(b).clients, 2);
	tn_tensor_unref(r2);
	ck_assert_uint_eq(stats(b).clients, 1);
	ck_assert_tn_ok(tn_arena_unpublish(b, "t"));
	ck_assert_tn_ok(tn_arena_unpublish(b, "v"));
	ck_assert_uint_eq(stats(b).blocks, 1); /* held by bx */
	tn_tensor_unref(bx);
	ck_assert_uint_eq(stats(b).blocks, 0);
	assert_clean(b);
	tn_arena_unref(b);
}
END_TEST

/* ---- sealing ----------------------------------------------------------------------------------- */

START_TEST(test_seal)
{
	tn_arena *a = make("seal", 16 << 20);
	int64_t sz[] = { 256 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT32);
	int32_t *d = tn_tensor_data(t);
	for (int i = 0; i < 256; i++)
		d[i] = i * 7;
	ck_assert_tn_ok(tn_arena_publish(a, "frozen", t, 0, NULL));
	ck_assert_tn_ok(tn_arena_seal(a, "frozen"));
	ck_assert_tn_ok(tn_arena_seal(a, "frozen")); /* again: a no-op */
	/* This process's own tensor is now read-only for operators. */
	ck_assert_tn_error_has(tn_fill_(t, tn_scalar_int(1)), TN_EPERM, "sealed");
	ck_assert_tn_error_has(tn_tensor_set(t, 1, (int64_t[]){ 0 }, tn_scalar_int(1)), TN_EPERM,
			       "sealed");
	ck_assert_tn_error_has(tn_arena_publish(a, "frozen", t, TN_ARENA_REPLACE, NULL), TN_EEXIST,
			       "and sealed");
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "frozen", &e));
	ck_assert_uint_eq(e.flags & TN_ARENA_ENTRY_SEALED, TN_ARENA_ENTRY_SEALED);

	for (int mode = 0; mode < 3; mode++) {
		pid_t pid = fork();
		if (pid == 0) {
			tn_arena *b;
			tn_tensor *x, *y;
			if (tn_arena_open("seal", dir, &b) || tn_arena_lookup(b, "frozen", &x, NULL))
				_exit(10);
			const int32_t *v = tn_tensor_data(x);
			for (int i = 0; i < 256; i++)
				if (v[i] != i * 7)
					_exit(11);
			if (mode == 0) {
				/* Operators refuse, out= too. */
				if (tn_fill_(x, tn_scalar_int(3)) != TN_EPERM ||
				    !strstr(tn_last_error(), "sealed"))
					_exit(12);
				if (tn_abs(x, &y) || tn_add_out(y, y, tn_scalar_int(1), x) != TN_EPERM)
					_exit(13);
				tn_tensor_unref(y);
				_exit(0);
			}
			/* A raw write faults (mode 1), also through a fresh pointer (mode 2). The
			 * default action, not a sanitizer's handler, must take the fault. */
			signal(SIGSEGV, SIG_DFL);
			((volatile int32_t *)tn_tensor_data(x))[mode] = -5;
			_exit(14);
		}
		int st = wait_status(pid);
		if (mode == 0)
			ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
		else
			ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "status %d", st);
	}
	for (int i = 0; i < 256; i++)
		ck_assert_int_eq(d[i], i * 7);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 3);
	ck_assert_tn_ok(tn_arena_unpublish(a, "frozen"));
	tn_tensor_unref(t);
	ck_assert_uint_eq(stats(a).blocks, 0);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* ---- libtensor integration -------------------------------------------------------------------- */

START_TEST(test_factories_in_arena)
{
	tn_arena *a = make("ops", 32 << 20);
	ck_assert_ptr_null(tn_arena_current());
	ck_assert_tn_ok(tn_arena_use(a));
	ck_assert_ptr_eq(tn_arena_current(), a);
	int64_t sz[] = { 100, 30 };
	tn_tensor *x, *y, *z, *s;
	ck_assert_tn_ok(tn_ones(2, sz, TN_FLOAT32, TN_CPU, &x));
	ck_assert_tn_ok(tn_full(2, sz, tn_scalar_double(2.5), NULL, TN_CPU, &y));
	ck_assert_tn_ok(tn_add(x, y, tn_scalar_int(2), &z));
	ck_assert_tn_ok(tn_sum(z, NULL, &s));
	ck_assert_tn_ok(tn_arena_use(NULL));
	ck_assert_ptr_null(tn_arena_current());
	/* All of them live in the arena, so they can be published. */
	ck_assert_tn_ok(tn_arena_publish(a, "z", z, 0, NULL));
	ck_assert_tn_ok(tn_arena_publish(a, "sum", s, 0, NULL));
	ck_assert_uint_eq(stats(a).blocks, 4);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *zz, *ss, *r;
		tn_scalar v;
		if (tn_arena_open("ops", dir, &b) || tn_arena_lookup(b, "z", &zz, NULL) ||
		    tn_arena_lookup(b, "sum", &ss, NULL))
			_exit(10);
		if (tn_tensor_item(ss, &v) || v.v.d != 3000 * 6.0)
			_exit(11);
		/* Operators on arena tensors, results on the heap by default. */
		if (tn_mul(zz, zz, &r) || tn_tensor_get(r, 2, (int64_t[]){ 99, 29 }, &v) ||
		    v.v.d != 36.0)
			_exit(12);
		tn_tensor_unref(r);
		tn_tensor_unref(zz);
		tn_tensor_unref(ss);
		tn_arena_unref(b);
		_exit(0);
	}
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	ck_assert_uint_eq(stats(a).blocks, 2);
	tn_tensor_unref(z);
	tn_tensor_unref(s);
	ck_assert_tn_ok(tn_arena_unpublish(a, "z"));
	ck_assert_tn_ok(tn_arena_unpublish(a, "sum"));
	ck_assert_uint_eq(stats(a).blocks, 0);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* A seal cannot be side-stepped: another name over the same bytes is sealed too, and a tensor
 * that other processes may already write through cannot be sealed. */
START_TEST(test_seal_rules)
{
	tn_arena *a = make("sealrules", 16 << 20);
	int64_t sz[] = { 16 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT32), *u = arena_tensor(a, 1, sz, TN_INT32);
	ck_assert_tn_ok(tn_fill_(t, tn_scalar_int(7)));
	ck_assert_tn_ok(tn_arena_publish(a, "w", t, TN_ARENA_SEAL, NULL));
	ck_assert_tn_ok(tn_arena_publish(a, "alias", t, 0, NULL));
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "alias", &e));
	ck_assert_uint_eq(e.flags & TN_ARENA_ENTRY_SEALED, TN_ARENA_ENTRY_SEALED);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *x;
		if (tn_arena_open("sealrules", dir, &b) || tn_arena_lookup(b, "alias", &x, NULL))
			_exit(10);
		signal(SIGSEGV, SIG_DFL);
		((volatile int32_t *)tn_tensor_data(x))[0] = 42;
		_exit(11);
	}
	int st = wait_status(pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "status 0x%x", st);
	ck_assert_int_eq(((int32_t *)tn_tensor_data(t))[0], 7);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);

	/* "u" is looked up (writable) by a live child: sealing it now is refused. */
	ck_assert_tn_ok(tn_arena_publish(a, "u", u, 0, NULL));
	int go[2], done[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid = fork();
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *x;
		char c;
		if (tn_arena_open("sealrules", dir, &b) || tn_arena_lookup(b, "u", &x, NULL))
			_exit(10);
		if (write(go[1], "x", 1) != 1 || read(done[0], &c, 1) != 1)
			_exit(11);
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	ck_assert_tn_error_has(tn_arena_seal(a, "u"), TN_EBUSY, "other processes hold");
	ck_assert_tn_error_has(tn_arena_publish(a, "u2", u, TN_ARENA_SEAL, NULL), TN_EBUSY,
			       "seal before sharing");
	ck_assert_int_eq(write(done[1], "x", 1), 1);
	st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
	ck_assert_tn_ok(tn_arena_seal(a, "u"));
	for (int i = 0; i < 2; i++) {
		close(go[i]);
		close(done[i]);
	}
	tn_tensor_unref(t);
	tn_tensor_unref(u);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* ---- no system call on the data path --------------------------------------------------------- */

/* A lookup makes tensor and storage handles with malloc. glibc's malloc reuses freed memory
 * without system calls once warm, but the sanitizers' allocators map memory of their own
 * (ASan's quarantine, TSan's shadow): under them the filtered loop leaves lookups out and
 * checks allocation, free, publish, info and unpublish only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static const bool lookups_in_seccomp = false;
#else
static const bool lookups_in_seccomp = true;
#endif

static int deny_syscalls(void)
{
	static const int allowed[] = {
		__NR_read, __NR_write, __NR_exit, __NR_exit_group, __NR_rt_sigreturn,
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
		__NR_sigaltstack, /* the sanitizer runtime's own, from its prctl interceptor */
#endif
	};
	enum { N = sizeof(allowed) / sizeof(allowed[0]) };
	struct sock_filter filter[N + 6];
	int k = 0;
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						   offsetof(struct seccomp_data, arch));
	filter[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						   offsetof(struct seccomp_data, nr));
	for (int i = 0; i < N; i++) /* a match jumps to ALLOW, the last instruction */
		filter[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
							   (unsigned)allowed[i],
							   (unsigned char)(N - i), 0);
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { (unsigned short)k, filter };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

START_TEST(test_no_syscalls)
{
	tn_arena *a = make("nosys", 64 << 20);
	int64_t sz[] = { 16 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT32);
	ck_assert_tn_ok(tn_arena_publish(a, "pub", t, 0, NULL));
	tn_tensor_unref(t);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		void *p[64];
		tn_tensor *x, *mine;
		tn_arena_entry e;
		if (tn_arena_open("nosys", dir, &b))
			_exit(10);
		mine = arena_tensor(b, 1, sz, TN_FLOAT32);
		size_t sizes[] = { 64, 4096, 1 << 20, 16 << 20 };
		/* Warm up: the process's hold table, and malloc's heap under the tensor and
		 * storage handles a lookup makes (freed handles wait in a per-thread quarantine
		 * of 1024 before malloc gets them back, so the heap grows until it is full). */
		for (int i = 0; i < 64; i++)
			if (tn_arena_alloc(b, 64 + 1000 * (size_t)i, &p[i]))
				_exit(11);
		for (int i = 0; i < 64; i++)
			tn_arena_free(b, p[i]);
		for (int round = 0; round < 3000; round++) {
			for (int i = 0; i < 4; i++)
				if (tn_arena_alloc(b, sizes[i], &p[i]))
					_exit(11);
			for (int i = 0; i < 4; i++)
				tn_arena_free(b, p[i]);
			if (tn_arena_lookup(b, "pub", &x, NULL))
				_exit(12);
			tn_tensor_unref(x);
			if (tn_arena_publish(b, "mine", mine, TN_ARENA_REPLACE, NULL) ||
			    tn_arena_info(b, "pub", &e) || tn_arena_unpublish(b, "mine"))
				_exit(14);
		}
		/* From here, any system call of this thread but read, write, exit, exit_group and
		 * rt_sigreturn kills the process (SIGSYS). A filter rather than strict mode, so that
		 * a runtime's own threads (TSan's) are left alone and the process can exit whole. */
		if (deny_syscalls() != 0)
			_exit(13);
		for (int round = 0; round < 2000; round++) {
			for (int i = 0; i < 4; i++)
				if (tn_arena_alloc(b, sizes[i], &p[i]))
					_exit(20);
			for (int i = 0; i < 4; i++)
				if (tn_arena_free(b, p[i]))
					_exit(21);
			if (tn_arena_publish(b, "mine", mine, TN_ARENA_REPLACE, NULL) ||
			    tn_arena_info(b, "pub", &e) || tn_arena_unpublish(b, "mine"))
				_exit(23);
			if (!lookups_in_seccomp)
				continue;
			if (tn_arena_lookup(b, "pub", &x, NULL))
				_exit(22);
			tn_tensor_unref(x);
		}
		_exit(0);
	}
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d (signal %d)", st,
		      WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
	ck_assert_uint_eq(stats(a).blocks, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* ---- crash safety ------------------------------------------------------------------------------ */

/* A process killed at every write point of every kind of change: afterwards the arena checks
 * clean, and the killed change either happened entirely or not at all. */
static void crash_op(tn_arena *b, int op)
{
	void *p;
	tn_tensor *x;
	switch (op) {
	case 0: /* allocate with splits on both sides (2 MiB alignment) */
		tn_arena_alloc(b, 2 << 20, &p);
		break;
	case 1: /* free, merging with both neighbours */
		tn_arena_lookup(b, "mid", &x, NULL);
		tn_arena_unpublish(b, "mid");
		tn_tensor_unref(x);
		break;
	case 2: /* publish */
		tn_arena_lookup(b, "mid", &x, NULL);
		tn_arena_publish(b, "again", x, TN_ARENA_SEAL, NULL);
		break;
	case 3: /* replace */
		tn_arena_lookup(b, "left", &x, NULL);
		tn_arena_publish(b, "mid", x, TN_ARENA_REPLACE, NULL);
		break;
	case 4: /* attach */
		break;
	case 5: /* evict "mid" and "right" (cache entries) */
		tn_arena_evict(b, 0, NULL);
		break;
	case 6: /* spill "mid" and "right": tensord's change once their files are written */
	{
		struct tn__spill_item *v;
		size_t n;
		uint64_t id;
		if (tn__arena_spill_candidates(b, 0, &v, &n))
			break;
		for (size_t i = 0; i < n; i++)
			if (tn__arena_spill_next_id(b, &id) == 0)
				tn__arena_spill_commit(b, &v[i], id);
		free(v);
		break;
	}
	case 7: /* ask for spilled "mid", and restore it into a new block */
	{
		struct tn__spill_item *v;
		size_t n;
		tn__arena_restore_wait_ns = 0;
		if (tn_arena_lookup(b, "mid", &x, NULL) != TN_EAGAIN ||
		    tn__arena_spilled(b, true, &v, &n) || n != 1)
			break;
		int64_t sz[] = { 1000 };
		tn_tensor *t = arena_tensor(b, 1, sz, TN_FLOAT32);
		struct tn__arena_desc d = { .dtype = TN_FLOAT32, .ndim = 1, .sizes = { 1000 },
					    .strides = { 1 } };
		d.block = tn__arena_block_of(b, tn_storage_data(tn_tensor_storage(t)), NULL);
		tn__arena_restore_commit(b, &v[0], &d);
		tn_tensor_unref(t);
		free(v);
		break;
	}
	}
}

/* Spill "mid" from @a (a cache entry): the change tensord makes once the file is written. */
static void spill_mid(tn_arena *a)
{
	struct tn__spill_item *v;
	size_t n;
	uint64_t id;
	ck_assert_tn_ok(tn_arena_set_retention(a, "mid", TN_ARENA_CACHE, 0));
	ck_assert_tn_ok(tn__arena_spill_candidates(a, 0, &v, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].name, "mid");
	ck_assert_tn_ok(tn__arena_spill_next_id(a, &id));
	ck_assert_tn_ok(tn__arena_spill_commit(a, &v[0], id));
	free(v);
}

START_TEST(test_crash_every_point)
{
	int op = _i;
	int points_done = 0;
	for (int point = 1; point < 400; point++) {
		char name[32];
		snprintf(name, sizeof(name), "c%d", point);
		tn_arena *a = make(name, 16 << 20);
		/* Three published blocks, "left" "mid" "right", with free space between. */
		const char *names[] = { "left", "mid", "right" };
		void *gap[3];
		tn_tensor *t[3];
		for (int i = 0; i < 3; i++) {
			int64_t sz[] = { 1000 };
			t[i] = arena_tensor(a, 1, sz, TN_FLOAT32);
			ck_assert_tn_ok(tn_arena_alloc(a, 5000, &gap[i]));
			ck_assert_tn_ok(tn_arena_publish(a, names[i], t[i], 0, NULL));
		}
		for (int i = 0; i < 3; i++) {
			tn_tensor_unref(t[i]);
			ck_assert_tn_ok(tn_arena_free(a, gap[i]));
		}
		if (op == 5 || op == 6) {
			ck_assert_tn_ok(tn_arena_set_retention(a, "mid", TN_ARENA_CACHE, 0));
			ck_assert_tn_ok(tn_arena_set_retention(a, "right", TN_ARENA_CACHE, 0));
		}
		if (op == 7)
			spill_mid(a);
		tn_arena_stats before = stats(a);
		pid_t pid = fork();
		if (pid == 0) {
			tn_arena *b;
			if (op == 4)
				tn__arena_crash_countdown = point;
			if (tn_arena_open(name, dir, &b))
				_exit(10);
			tn__arena_crash_countdown = point;
			crash_op(b, op);
			_exit(0);
		}
		int st = wait_status(pid);
		bool finished = WIFEXITED(st);
		ck_assert_msg(finished || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL), "status %d",
			      st);
		/* Take the lock (rolling back), then reclaim the dead child. */
		tn_arena_reclaim_dead(a);
		assert_clean(a);
		tn_arena_stats after = stats(a);
		/* The counters moved with the changes that committed, and with no other. */
		if (op == 5)
			ck_assert_uint_eq(after.evictions, 3 - after.names);
		if (op == 6) {
			ck_assert_uint_eq(after.names, 3);
			ck_assert_uint_eq(after.evictions, after.spilled_names);
			ck_assert_uint_eq(after.spills, after.spilled_names);
			ck_assert_uint_eq(after.spilled_bytes, after.spilled_names * 4000);
		}
		if (op == 7)
			ck_assert_uint_eq(after.restores + after.spilled_names, 1);
		if (!finished) {
			ck_assert_uint_le(after.lock_repairs, 1);
			/* Whatever the child did is gone with it (it held everything it
			 * touched) or committed: names are then the only difference. */
			ck_assert_uint_eq(after.clients, 1);
		}
		/* Unpublishing everything returns every byte. */
		tn_arena_entry *e;
		size_t n;
		ck_assert_tn_ok(tn_arena_list(a, NULL, &e, &n));
		for (size_t i = 0; i < n; i++)
			ck_assert_tn_ok(tn_arena_unpublish(a, e[i].name));
		free(e);
		ck_assert_uint_eq(stats(a).free_bytes, before.free_bytes + before.used_bytes);
		ck_assert_uint_eq(stats(a).blocks, 0);
		assert_clean(a);
		tn_arena_unref(a);
		tn_arena_destroy(name, dir, 0); /* refused while damaged: the teardown removes it */
		points_done++;
		if (finished)
			break; /* the change completed before the countdown ran out */
	}
	ck_assert_int_gt(points_done, 4);
}
END_TEST

/* A process dies holding the lock: the next one goes on at once. */
START_TEST(test_lock_holder_dies)
{
	tn_arena *a = make("lock", 16 << 20);
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		if (tn_arena_open("lock", dir, &b) || tn__arena_lock(b))
			_exit(10);
		/* Half a change: a counter bumped through the log, then stuck. */
		tn__tx_set(b, &b->hdr->num_allocs, 12345);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(11);
		pause();
		_exit(12);
	}
	char c;
	ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
	ck_assert_uint_eq(a->hdr->num_allocs, 12345);
	kill(pid, SIGKILL);
	wait_status(pid);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	void *p;
	ck_assert_tn_ok(tn_arena_alloc(a, 1000, &p));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	ck_assert_double_lt(secs, 1.0);
	tn_arena_stats s = stats(a);
	ck_assert_uint_eq(s.lock_repairs, 1);
	ck_assert_uint_eq(s.num_allocs, 1); /* the dead change was rolled back */
	ck_assert_tn_ok(tn_arena_free(a, p));
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* The worker of the chaos test, run as "check_arena --worker DIR ARENA ID". */
static int worker(const char *wdir, const char *name, int id)
{
	tn_arena *a;
	char key[64];
	unsigned seed = (unsigned)id * 7919u + (unsigned)getpid();
	if (tn_arena_open(name, wdir, &a))
		return 10;
	for (long step = 0;; step++) {
		int64_t sz[] = { 1 + rand_r(&seed) % 5000 };
		tn_storage *s;
		tn_tensor *t, *x;
		if (tn_storage_new_with_allocator(TN_CPU, (size_t)sz[0] * 4, tn_arena_allocator(a),
						  &s) == 0) {
			tn_tensor_new(s, 0, 1, sz, NULL, TN_INT32, &t);
			tn_storage_unref(s);
			int32_t *d = tn_tensor_data(t);
			for (int64_t i = 0; i < sz[0]; i++)
				d[i] = (int32_t)(id * 1000003 + i);
			snprintf(key, sizeof(key), "w%d/%ld", id, step % 8);
			tn_arena_publish(a, key, t, TN_ARENA_REPLACE, NULL);
			tn_tensor_unref(t);
		}
		/* Read another worker's tensor and check its contents. */
		snprintf(key, sizeof(key), "w%d/%d", rand_r(&seed) % 4, rand_r(&seed) % 8);
		if (tn_arena_lookup(a, key, &x, NULL) == 0) {
			const int32_t *d = tn_tensor_data(x);
			int64_t n = tn_tensor_numel(x);
			int owner = key[1] - '0';
			for (int64_t i = 0; i < n; i += 61)
				if (d[i] != (int32_t)(owner * 1000003 + i))
					return 20;
			tn_tensor_unref(x);
		}
		if (rand_r(&seed) % 4 == 0) {
			snprintf(key, sizeof(key), "w%d/%d", id, rand_r(&seed) % 8);
			tn_arena_unpublish(a, key);
		}
	}
}

/* Wait (up to 20 s) until the processes @pids have all attached to @a. */
static void wait_attached(tn_arena *a, const pid_t *pids, int n)
{
	tn_arena_client c[TN_ARENA_MAX_CLIENTS];
	for (int tries = 0; tries < 200000; tries++) {
		int found = 0, count = tn_arena_clients(a, c, TN_ARENA_MAX_CLIENTS);
		ck_assert_int_ge(count, 0);
		for (int i = 0; i < n; i++)
			for (int j = 0; j < count && j < TN_ARENA_MAX_CLIENTS; j++)
				if (c[j].pid == pids[i] && c[j].alive) {
					found++;
					break;
				}
		if (found == n)
			return;
		usleep(100);
	}
	ck_abort_msg("workers did not attach within 20 s");
}

START_TEST(test_kill_chaos)
{
	tn_arena *a = make("chaos", 64 << 20);
	uint64_t start = stats(a).free_bytes;
	unsigned seed = 99;
	int kills = 0;
	pid_t w[4] = { 0 };
	struct timespec ts = { 0, 0 };
	for (int round = 0; round < 300; round++) {
		for (int i = 0; i < 4; i++) {
			if (w[i])
				continue;
			w[i] = fork();
			ck_assert_int_ge(w[i], 0);
			if (w[i] == 0) {
				char id[8];
				snprintf(id, sizeof(id), "%d", i);
				execl(self_exe, self_exe, "--worker", dir, "chaos", id, (char *)NULL);
				_exit(127);
			}
		}
		/* Every worker has attached (exec takes longer under the sanitizers), so each kill
		 * lands in the middle of its loop. */
		wait_attached(a, w, 4);
		ts.tv_nsec = (long)(rand_r(&seed) % 8000000);
		nanosleep(&ts, NULL);
		int victim = (int)(rand_r(&seed) % 4);
		ck_assert_int_gt(w[victim], 0);
		kill(w[victim], SIGKILL);
		int st = wait_status(w[victim]);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
			      "worker exited with %d before being killed", WEXITSTATUS(st));
		w[victim] = 0;
		kills++;
		if (round % 50 == 0) {
			tn_arena_reclaim_dead(a);
			tn_arena_fsck_report rep;
			ck_assert_msg(tn_arena_fsck(a, 0, &rep) == 0, "round %d: %s", round,
				      rep.first_problem);
		}
	}
	for (int i = 0; i < 4; i++) {
		if (w[i] <= 0)
			continue;
		kill(w[i], SIGKILL);
		wait_status(w[i]);
		kills++;
	}
	ck_assert_int_ge(kills, 300);
	ck_assert_int_ge(tn_arena_reclaim_dead(a), 0);
	assert_clean(a);
	tn_arena_stats s = stats(a);
	ck_assert_uint_eq(s.clients, 1);
	/* What is left is pinned by names; unpublishing them frees every byte. */
	tn_arena_entry *e;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, NULL, &e, &n));
	ck_assert_uint_eq(n, s.names);
	for (size_t i = 0; i < n; i++)
		ck_assert_tn_ok(tn_arena_unpublish(a, e[i].name));
	free(e);
	s = stats(a);
	ck_assert_uint_eq(s.free_bytes, start);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_uint_eq(s.names, 0);
	ck_assert_uint_eq(s.reclaimed_slots, (uint64_t)kills); /* every one was attached */
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* The worker of the stress test ("check_arena --worker DIR ARENA ID stress"): publishes
 * tensors whose every element encodes (worker, step, index), reads the others' tensors in
 * full through lookups and a view, and churns raw blocks, for STRESS_STEPS steps; exits 0
 * after letting go of everything but its names. */
enum { STRESS_WORKERS = 8, STRESS_STEPS = 400, STRESS_NAMES = 6 };

static int32_t stress_value(int id, int step, int64_t i)
{
	return (int32_t)(id * 1000003 + step * 7919 + i);
}

static int stress_worker(const char *wdir, const char *name, int id)
{
	tn_arena *a;
	char key[64];
	unsigned seed = (unsigned)id * 104729u + 17u;
	int64_t checked = 0;
	if (tn_arena_open(name, wdir, &a))
		return 10;
	for (int step = 0; step < STRESS_STEPS; step++) {
		/* Publish: an int32 tensor whose element 0 is the step. */
		int64_t n = 16 + rand_r(&seed) % 4000;
		tn_storage *s;
		tn_tensor *t;
		if (tn_storage_new_with_allocator(TN_CPU, (size_t)n * 4, tn_arena_allocator(a), &s))
			return 11;
		if (tn_tensor_new(s, 0, 1, &n, NULL, TN_INT32, &t))
			return 12;
		tn_storage_unref(s);
		int32_t *d = tn_tensor_data(t);
		d[0] = step;
		for (int64_t i = 1; i < n; i++)
			d[i] = stress_value(id, step, i);
		snprintf(key, sizeof(key), "stress/%d/%d", id, step % STRESS_NAMES);
		int r = tn_arena_publish(a, key, t,
					 TN_ARENA_REPLACE | (step % 5 == 0 ? TN_ARENA_SEAL : 0), NULL);
		if (r && r != TN_EEXIST)
			return 13; /* a sealed entry cannot be replaced: EEXIST is expected */
		tn_tensor_unref(t);
		/* Read another worker's tensor in full, once directly and once through a view. */
		snprintf(key, sizeof(key), "stress/%d/%d", (int)(rand_r(&seed) % STRESS_WORKERS),
			 (int)(rand_r(&seed) % STRESS_NAMES));
		tn_tensor *x, *v;
		if ((r = tn_arena_lookup(a, key, &x, NULL)) == 0) {
			int owner = atoi(key + 7);
			const int32_t *e = tn_tensor_data(x);
			int64_t m = tn_tensor_numel(x);
			for (int64_t i = 1; i < m; i++)
				if (e[i] != stress_value(owner, e[0], i))
					return 20;
			int64_t len = m - 1;
			if (tn_narrow(x, 0, 1, len, &v))
				return 21;
			const int32_t *ve = tn_tensor_data(v);
			if (ve != e + 1 || ve[len - 1] != stress_value(owner, e[0], m - 1))
				return 22;
			checked += m;
			tn_tensor_unref(v);
			tn_tensor_unref(x);
		} else if (r != TN_ENOENT) {
			return 23;
		}
		/* Raw blocks of every size class the cache keeps, and some it does not. */
		void *p[8];
		for (int i = 0; i < 8; i++)
			if (tn_arena_alloc(a, 1 + rand_r(&seed) % (i < 6 ? 4096 : 200000), &p[i]))
				return 24;
		for (int i = 0; i < 8; i++)
			if (tn_arena_free(a, p[i]))
				return 25;
		if (step % 50 == 49)
			tn_arena_unpublish(a, key); /* somebody else's name, perhaps in use */
	}
	tn_arena_unref(a);
	return checked > 0 ? 0 : 26;
}

START_TEST(test_many_processes)
{
	tn_arena *a = make("stress", 96 << 20);
	uint64_t start = stats(a).free_bytes;
	pid_t w[STRESS_WORKERS];
	for (int i = 0; i < STRESS_WORKERS; i++) {
		w[i] = fork();
		ck_assert_int_ge(w[i], 0);
		if (w[i] == 0) {
			char id[8];
			snprintf(id, sizeof(id), "%d", i);
			execl(self_exe, self_exe, "--worker", dir, "stress", id, "stress", (char *)NULL);
			_exit(127);
		}
	}
	for (int i = 0; i < STRESS_WORKERS; i++) {
		int st = wait_status(w[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status 0x%x", i, st);
	}
	/* They all detached: no slot to reclaim, only names pin blocks. */
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 0);
	assert_clean(a);
	tn_arena_stats s = stats(a);
	ck_assert_uint_eq(s.clients, 1);
	ck_assert_uint_eq(s.blocks, s.names);
	ck_assert_uint_ge(s.num_allocs, STRESS_WORKERS * STRESS_STEPS);
	tn_arena_entry *e;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, "stress/", &e, &n));
	ck_assert_uint_eq(n, s.names);
	for (size_t i = 0; i < n; i++) {
		/* Every surviving tensor still holds exactly what its writer wrote. */
		tn_tensor *x;
		ck_assert_tn_ok(tn_arena_lookup(a, e[i].name, &x, NULL));
		const int32_t *d = tn_tensor_data(x);
		int owner = atoi(e[i].name + 7);
		for (int64_t j = 1; j < tn_tensor_numel(x); j++)
			ck_assert_int_eq(d[j], stress_value(owner, d[0], j));
		tn_tensor_unref(x);
		ck_assert_tn_ok(tn_arena_unpublish(a, e[i].name));
	}
	free(e);
	s = stats(a);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_uint_eq(s.free_bytes, start);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* Damage that another process (or a bug) wrote into the shared file: the library refuses it
 * with an error, never crashes, never writes out of bounds, never spreads it. One case each
 * for the paths a reviewer found trusting the file. */
/* Issue 17 C1: a client writes a wild offset into every free-list head and exits holding three
 * blocks. Reclaiming its slot used to follow the head (SIGSEGV, in tensord as in any client);
 * now the arena is marked damaged: every user gets TN_EIO naming fsck, fsck reports it, and
 * fsck --repair rebuilds the lists from the block headers and lifts the mark. */
START_TEST(test_poisoned_free_lists)
{
	tn_arena *a = make("poison", 16 << 20);
	void *mine;
	ck_assert_tn_ok(tn_arena_alloc(a, 100, &mine));
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		void *p;
		if (tn_arena_open("poison", dir, &b))
			_exit(10);
		for (int i = 0; i < 3; i++)
			if (tn_arena_alloc(b, 100 + 64 * (size_t)i, &p))
				_exit(11);
		for (unsigned fl = 0; fl < FL_COUNT; fl++)
			for (unsigned sl = 0; sl < SL_COUNT; sl++)
				b->hdr->bins[fl][sl] = UINT64_C(0x4141414141414000);
		_exit(0);
	}
	ck_assert_int_eq(WEXITSTATUS(wait_status(pid)), 0);
	ck_assert_tn_error_has(tn_arena_reclaim_dead(a), TN_EIO, "is damaged");
	ck_assert_uint_ne(a->hdr->damage, 0);
	/* Every writer is refused now, the honest process's free included, and nothing crashes. */
	void *p;
	ck_assert_tn_error_has(tn_arena_alloc(a, 100, &p), TN_EIO, "run tensorctl fsck");
	/* A free may go to the thread's cache without the lock; either way no crash. */
	int freed = tn_arena_free(a, mine);
	ck_assert(freed == 0 || freed == TN_EIO);
	tn_arena_fsck_report rep;
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_uint_ge(rep.problems, 1);
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(a->hdr->damage, 0);
	ck_assert_uint_eq(stats(a).clients, 1); /* the dead slot was reclaimed by the repair */
	if (freed)
		ck_assert_tn_ok(tn_arena_free(a, mine));
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* Issue 17 C7: a grantee writes a live thread's ID into the lock word. Every other process
 * used to wait for ever (and stayed hung after the word was put back, asleep on the futex);
 * a wait is bounded now (TN_ARENA_LOCK_TIMEOUT_MS, 10 s by default) and ends in TN_EBUSY
 * naming the thread, and the arena works again once the word is restored. */
/* A process with a writable descriptor punches holes out of the arena's file (in a tensor's
 * block and in the free heap): fsck reports the missing pages, a repair allocates them again
 * (so no later write can raise SIGBUS on a full file system), and nothing is missing after. */
START_TEST(test_punched_holes)
{
	tn_arena *a = make("holes", 16 << 20);
	void *p;
	ck_assert_tn_ok(tn_arena_alloc(a, 1 << 20, &p));
	memset(p, 0x5a, 1 << 20);
	const off_t size = (off_t)a->size;
	struct stat st;
	ck_assert_int_eq(fstat(a->fd, &st), 0);
	ck_assert_int_ge(st.st_blocks * 512, size); /* fallocated: every page */
	tn_arena_fsck_report rep;
	ck_assert_tn_ok(tn_arena_fsck(a, 0, &rep));
	/* The block's middle page and the file's last page (free heap). */
	off_t in_block = ((const char *)p - (const char *)a->base) + (256 << 10);
	in_block &= ~(off_t)4095;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(arena_file, O_RDWR);
		if (fd < 0 ||
		    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, in_block, 8192) ||
		    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size - 4096, 4096))
			_exit(1);
		_exit(0);
	}
	ck_assert_int_eq(WEXITSTATUS(wait_status(pid)), 0);
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_uint_eq(rep.problems, 1);
	ck_assert_uint_eq(rep.repaired, 0);
	ck_assert_msg(strstr(rep.first_problem, "12288 bytes of the file's pages are missing"),
		      "%s", rep.first_problem);
	/* The data is gone (and reading the page through the shared mapping allocated it
	 * again: a read can fault on a full file system too). */
	ck_assert_int_eq(((const unsigned char *)a->base)[in_block], 0);
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(rep.repaired, 1);
	ck_assert_int_eq(fstat(a->fd, &st), 0);
	ck_assert_int_ge(st.st_blocks * 512, size);
	ck_assert_tn_ok(tn_arena_fsck(a, 0, &rep));
	ck_assert_uint_eq(rep.problems, 0);
	ck_assert_tn_ok(tn_arena_free(a, p));
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_lock_word_forged)
{
	setenv("TN_ARENA_LOCK_TIMEOUT_MS", "300", 1);
	tn_arena *a = make("lockword", 8 << 20);
	pid_t sleeper = fork();
	if (sleeper == 0) {
		pause();
		_exit(0);
	}
	void *p;
	a->hdr->lock.__data.__lock = (int)sleeper;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char want[64];
	snprintf(want, sizeof(want), "by thread %d", (int)sleeper);
	ck_assert_tn_error_has(tn_arena_alloc(a, 100, &p), TN_EBUSY, want);
	ck_assert_tn_error_has(tn_arena_reclaim_dead(a), TN_EBUSY, "held for over 300 ms");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	ck_assert_double_lt(secs, 3.0);
	ck_assert_double_ge(secs, 0.55);
	a->hdr->lock.__data.__lock = 0;
	ck_assert_tn_ok(tn_arena_alloc(a, 100, &p));
	ck_assert_tn_ok(tn_arena_free(a, p));
	kill(sleeper, SIGKILL);
	wait_status(sleeper);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_hostile_metadata)
{
	tn_arena *a = make("hostile", 16 << 20);
	tn_arena *b;
	tn_tensor *t1 = arena_tensor(a, 1, (int64_t[]){ 4 }, TN_FLOAT32);
	tn_tensor *t2 = arena_tensor(a, 1, (int64_t[]){ 4 }, TN_FLOAT32);
	tn_tensor *x;
	tn_arena_entry e1, e2;
	ck_assert_tn_ok(tn_arena_publish(a, "A", t1, 0, NULL));
	ck_assert_tn_ok(tn_arena_publish(a, "B", t2, 0, NULL));
	ck_assert_tn_ok(tn_arena_info(a, "A", &e1));
	ck_assert_tn_ok(tn_arena_info(a, "B", &e2));
	struct dir_entry *da = tn__entry_at(a, e1.handle.index);

	/* The header's geometry changes after attach: nothing re-reads it. */
	uint32_t slots = a->hdr->dir_slots;
	a->hdr->dir_slots = 1u << 31;
	ck_assert_tn_error_has(tn_arena_lookup(a, "zzzz", &x, NULL), TN_ENOENT, "no tensor 'zzzz'");
	a->hdr->dir_slots = slots;

	/* An entry whose dims overflow int64 arithmetic is damaged, for info and fsck alike. */
	struct dir_entry saved = *da;
	da->dtype_ndim = (uint32_t)TN_FLOAT32 | (uint64_t)3 << 32;
	for (int d = 0; d < 3; d++)
		da->sizes[d] = da->strides[d] = INT64_MAX;
	ck_assert_tn_error_has(tn_arena_info(a, "A", &e1), TN_EIO, "extent overflows");
	tn_arena_fsck_report rep;
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_uint_ge(rep.bad_names, 1);
	*da = saved;

	/* A block whose size is damaged: a lookup refuses it rather than map 1 TiB. */
	struct block *bb = tn__block_at(a, da->block);
	uint64_t size = bb->size;
	bb->size = UINT64_C(1) << 40;
	ck_assert_tn_error_has(tn_arena_lookup(a, "A", &x, NULL), TN_EIO, "block offset or header");
	bb->size = size;

	/* A stray word points A's entry at B's block: unpublishing A leaves B alone. */
	da->block = tn__entry_at(a, e2.handle.index)->block;
	ck_assert_tn_ok(tn_arena_unpublish(a, "A"));
	ck_assert_tn_ok(tn_arena_lookup(a, "B", &x, NULL));
	tn_tensor_unref(x);
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep)); /* A's block, orphaned */
	assert_clean(a);

	/* A dead lock holder left an undo record pointing before the mapping: the next lock
	 * taker skips it. */
	pid_t pid = fork();
	if (pid == 0) {
		if (tn_arena_open("hostile", dir, &b) || tn__arena_lock(b))
			_exit(10);
		b->hdr->undo[0] = (struct undo_rec){ UINT64_MAX - 7, 0 };
		atomic_store(&b->hdr->undo_count, 1);
		_exit(0);
	}
	int st = wait_status(pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_tn_ok(tn_arena_stat(a, &(tn_arena_stats){ 0 }));
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
	assert_clean(a);

	/* A live process is never taken for dead because /proc cannot be read (EMFILE). */
	pid = fork();
	if (pid == 0) {
		if (tn_arena_open("hostile", dir, &b))
			_exit(10);
		while (dup(0) >= 0)
			;
		_exit(tn_arena_reclaim_dead(b) == 0 ? 0 : 11);
	}
	st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);

	/* A damaged free-list link: fsck reports it (and repairs it) without following it. */
	uint64_t free_off = 0;
	for (uint64_t off = a->data_off; off < a->size; off += tn__block_at(a, off)->size)
		if (tn__block_magic(tn__block_at(a, off)) == BLOCK_MAGIC_FREE)
			free_off = off;
	ck_assert_uint_ne(free_off, 0);
	struct free_links *l = (struct free_links *)(a->base + free_off + BLOCK_HDR);
	uint64_t next = l->next;
	l->next = UINT64_C(1) << 50;
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_ptr_nonnull(strstr(rep.first_problem, "free lists"));
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep));
	(void)next;
	assert_clean(a);

	/* A page size that is no page size is refused at attach. */
	uint64_t page = a->hdr->page_size;
	a->hdr->page_size = 0;
	ck_assert_tn_error_has(tn_arena_open("hostile", dir, &b), TN_EINVAL, "page size");
	a->hdr->page_size = page;

	tn_tensor_unref(t1);
	tn_tensor_unref(t2);
	tn_arena_unref(a);
}
END_TEST

/* fsck finds what a dead process or a bug left, and repairs it. */
START_TEST(test_fsck_repairs)
{
	tn_arena *a = make("fsck", 16 << 20);
	void *p, *q;
	ck_assert_tn_ok(tn_arena_alloc(a, 1000, &p));
	ck_assert_tn_ok(tn_arena_alloc(a, 1000, &q));
	struct block *bp = (struct block *)((char *)p - 64), *bq = (struct block *)((char *)q - 64);
	/* A hold by an unattached slot, an orphan, a bad counter, a broken free list. */
	bp->holders[3] |= 1;
	bq->holders[0] = 0;
	a->hdr->names = 5;
	uint64_t bins_fl = a->hdr->fl_bitmap;
	a->hdr->fl_bitmap = 0;
	tn_arena_fsck_report rep;
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_uint_ge(rep.problems, 4);
	ck_assert_uint_eq(rep.repaired, 0);
	ck_assert_uint_eq(rep.dead_holds, 1);
	ck_assert_uint_eq(rep.orphan_blocks, 1);
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "problems"));
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(rep.repaired, rep.problems);
	ck_assert_uint_ne(a->hdr->fl_bitmap, 0);
	(void)bins_fl;
	assert_clean(a);
	ck_assert_uint_eq(stats(a).blocks, 1);
	ck_assert_uint_eq(stats(a).names, 0);
	ck_assert_tn_ok(tn_arena_free(a, p));
	ck_assert_int_eq(tn_arena_trim(a), 1088);
	ck_assert_uint_eq(stats(a).blocks, 0);
	assert_clean(a);
	/* A name whose tensor no longer fits its block is removed, and the block with it. */
	int64_t sz[] = { 100 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT32);
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_publish(a, "bad", t, 0, NULL));
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_arena_info(a, "bad", &e));
	tn__entry_at(a, e.handle.index)->sizes[0] = 1 << 20;
	ck_assert_tn_error_has(tn_arena_lookup(a, "bad", &t, NULL), TN_EIO, "extent past the block");
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_uint_eq(rep.bad_names, 1);
	char want[128];
	snprintf(want, sizeof(want), "directory entry %u ('bad') is damaged (extent past the block)",
		 e.handle.index);
	ck_assert_str_eq(rep.first_problem, want);
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(stats(a).names, 0);
	ck_assert_uint_eq(stats(a).blocks, 0);
	assert_clean(a);
	/* A dead client is found and reclaimed by repair. */
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		void *r;
		if (tn_arena_open("fsck", dir, &b) || tn_arena_alloc(b, 5000, &r))
			_exit(10);
		_exit(0); /* exits holding a block and its slot */
	}
	int st = wait_status(pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	ck_assert_uint_eq(rep.dead_clients, 1);
	ck_assert_tn_ok(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(stats(a).blocks, 0);
	ck_assert_uint_eq(stats(a).clients, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_reclaim_rules)
{
	tn_arena *a = make("rec", 16 << 20);
	ck_assert_tn_error_has(tn_arena_reclaim(a, tn_arena_slot(a)), TN_EINVAL, "caller's own");
	ck_assert_tn_error_has(tn_arena_reclaim(a, 9999), TN_EINVAL, "outside");
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		void *r;
		char slot = 0;
		if (tn_arena_open("rec", dir, &b) || tn_arena_alloc(b, 5000, &r))
			_exit(10);
		slot = (char)tn_arena_slot(b);
		if (write(pipefd[1], &slot, 1) != 1)
			_exit(11);
		pause();
		_exit(0);
	}
	char slot;
	ck_assert_int_eq(read(pipefd[0], &slot, 1), 1);
	ck_assert_tn_error_has(tn_arena_reclaim(a, slot), TN_EBUSY, "which is alive");
	ck_assert_tn_error_has(tn_arena_destroy("rec", dir, 0), TN_EBUSY, "other processes");
	tn_arena_client c[8];
	ck_assert_int_eq(tn_arena_clients(a, c, 8), 2);
	kill(pid, SIGKILL);
	wait_status(pid);
	ck_assert_int_eq(tn_arena_clients(a, c, 8), 2);
	ck_assert(!c[0].alive || !c[1].alive);
	ck_assert_int_eq(tn_arena_reclaim(a, slot), 1);
	ck_assert_int_eq(tn_arena_clients(a, c, 8), 1);
	ck_assert_uint_eq(stats(a).blocks, 0);
	ck_assert_tn_ok(tn_arena_destroy("rec", dir, 0));
	tn_arena_unref(a);
}
END_TEST

/* Huge pages: a hugetlbfs mount with pages reserved for the arena (as root). */
START_TEST(test_hugepages)
{
	char hdir[128];
	snprintf(hdir, sizeof(hdir), "%s/huge", dir);
	ck_assert_int_eq(mkdir(hdir, 0700), 0);
	tn_arena_options o;
	tn_arena *a = NULL;
	tn_arena_options_init(&o);
	o.size = 8 << 20;
	o.dir = dir;
	o.flags = TN_ARENA_REQUIRE_HUGEPAGES;
	/* /dev/shm here has huge pages off: required huge pages are refused, not faked. */
	ck_assert_tn_error_has(tn_arena_create("nohuge", &o, &a), TN_ENOTSUP, "no huge pages");
	if (mount("tn-check", hdir, "hugetlbfs", 0, "pagesize=2M") != 0) {
		fprintf(stderr, "test_hugepages: cannot mount hugetlbfs (not root?): only the "
				"refusal was checked\n");
		return;
	}
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "r");
	unsigned long before = 0;
	ck_assert_int_eq(fscanf(f, "%lu", &before), 1);
	fclose(f);
	o.dir = hdir;
	o.flags = TN_ARENA_HUGEPAGES | TN_ARENA_RESERVE_HUGEPAGES;
	int r = tn_arena_create("huge", &o, &a);
	if (r == 0) {
		tn_arena_stats s = stats(a);
		ck_assert_uint_eq(s.backing, TN_ARENA_BACKING_HUGETLBFS);
		ck_assert_uint_eq(s.page_size, 2 << 20);
		void *p;
		ck_assert_tn_ok(tn_arena_alloc(a, 2 << 20, &p));
		ck_assert_uint_eq((uintptr_t)p % (2 << 20), 0);
		memset(p, 1, 2 << 20);
		ck_assert_tn_ok(tn_arena_free(a, p));
		assert_clean(a);
		tn_arena_unref(a);
		ck_assert_tn_ok(tn_arena_destroy("huge", hdir, 0));
	} else {
		ck_assert_int_eq(r, TN_ENOSPC);
	}
	umount2(hdir, MNT_DETACH);
	f = fopen("/proc/sys/vm/nr_hugepages", "w");
	if (f) {
		fprintf(f, "%lu\n", before);
		fclose(f);
	}
}
END_TEST

/* NUMA: bind the arena to node 0 of this machine; its pages are all there. */
START_TEST(test_numa_bind)
{
	tn_arena_options o;
	tn_arena *a;
	tn_arena_options_init(&o);
	o.size = 16 << 20;
	o.dir = dir;
	o.numa_policy = TN_NUMA_BIND;
	o.numa_nodes = 1;
	ck_assert_tn_ok(tn_arena_create("numa", &o, &a));
	tn_arena_stats s = stats(a);
	ck_assert_int_eq(s.numa_policy, TN_NUMA_BIND);
	ck_assert_uint_eq(s.numa_nodes, 1);
	void *p;
	ck_assert_tn_ok(tn_arena_alloc(a, 4 << 20, &p));
	memset(p, 1, 4 << 20);
	uint64_t pages[4];
	int64_t n = tn__numa_residency(p, 4 << 20, 4096, pages, 4);
	ck_assert_int_eq(n, 1024);
	ck_assert_uint_eq(pages[0], 1024);
	/* The whole data region: fallocate made every page resident, on node 0. */
	int64_t all = tn_arena_residency(a, pages, 4);
	ck_assert_int_eq(all, (int64_t)(s.heap_bytes / 4096));
	ck_assert_uint_eq(pages[0], (uint64_t)all);
	/* Per block: migrate (to the same node here) and read back. */
	ck_assert_tn_ok(tn_arena_place(a, p, TN_NUMA_PREFERRED, 1));
	ck_assert_tn_ok(tn_arena_place(a, p, TN_NUMA_INTERLEAVE, 1));
	ck_assert_tn_ok(tn_arena_place(a, p, TN_NUMA_LOCAL, 0));
	n = tn__numa_residency(p, 4 << 20, 4096, pages, 4);
	ck_assert_uint_eq(pages[0], 1024);
	ck_assert_tn_error_has(tn_arena_place(a, p, TN_NUMA_BIND, 0), TN_EINVAL, "non-empty");
	ck_assert_tn_error_has(tn_arena_place(a, p, TN_NUMA_BIND, 1ull << 40), TN_ERANGE, "lacks");
	void *small;
	ck_assert_tn_ok(tn_arena_alloc(a, 100, &small));
	ck_assert_tn_error_has(tn_arena_place(a, small, TN_NUMA_BIND, 1), TN_EINVAL, "shares pages");
	ck_assert_tn_error_has(tn_arena_place(a, &n, TN_NUMA_BIND, 1), TN_EBADF, "not an allocated");
	ck_assert_tn_ok(tn_arena_free(a, small));
	ck_assert_tn_ok(tn_arena_free(a, p));
	tn_arena_unref(a);
}
END_TEST

/* ---- the arena-metadata fuzzer (issue 17 C1) ---------------------------------------------- */

/* A value worth writing into an offset or size word: wild, zero, near the geometry, or a real
 * offset of the heap a little off. */
static uint64_t fuzz_value(tn_arena *a, unsigned *seed, const uint64_t *blocks, int nblocks)
{
	uint64_t r = (uint64_t)rand_r(seed) << 32 | (uint64_t)rand_r(seed);
	switch (rand_r(seed) % 9) {
	case 0: return UINT64_C(0x4141414141414000);
	case 1: return 0;
	case 2: return r;
	case 3: return a->data_off + r % a->data_size / 64 * 64;
	case 4: return a->data_off + a->data_size - 64 * (r % 4);
	case 5: return nblocks ? blocks[r % (unsigned)nblocks] : a->data_off;
	case 6: return nblocks ? blocks[r % (unsigned)nblocks] + 64 * (r % 3) - 64 : r;
	case 7: return UINT64_MAX - r % 128;
	default: return r % 4096;
	}
}

/* Apply @n seeded mutations to @a's metadata, each aimed at one kind of structure. */
static void fuzz_mutate(tn_arena *a, unsigned *seed, int n)
{
	struct arena_header *h = a->hdr;
	uint64_t blocks[512];
	int nb = 0;
	for (uint64_t off = a->data_off; off < a->data_off + a->data_size && nb < 512;) {
		if (!tn__block_sane(a, off))
			break;
		blocks[nb++] = off;
		off += tn__block_at(a, off)->size;
	}
	for (int k = 0; k < n; k++) {
		uint64_t v = fuzz_value(a, seed, blocks, nb);
		switch (rand_r(seed) % 10) {
		case 0: { /* a free-list head: one in use, every one, or any */
			unsigned pick = (unsigned)rand_r(seed) % 4, used = 0;
			for (unsigned i = 0; i < FL_COUNT * SL_COUNT; i++)
				if (pick == 0 || (pick == 1 && h->bins[i / SL_COUNT][i % SL_COUNT] &&
						  used++ % 2 == 0))
					h->bins[i / SL_COUNT][i % SL_COUNT] = v;
			if (pick >= 2)
				h->bins[rand_r(seed) % FL_COUNT][rand_r(seed) % SL_COUNT] = v;
			break;
		}
		case 1: /* a bitmap */
			if (rand_r(seed) % 2)
				h->fl_bitmap ^= UINT64_C(1) << (rand_r(seed) % 64);
			else
				h->sl_bitmap[rand_r(seed) % FL_COUNT] = v;
			break;
		case 2: /* a word of a block header */
		case 3:
			if (nb)
				((uint64_t *)tn__block_at(a, blocks[rand_r(seed) % nb]))[rand_r(seed) % 8] =
					rand_r(seed) % 2 ? v : v ^ (UINT64_C(1) << (rand_r(seed) % 64));
			break;
		case 4: /* a free block's links */
			if (nb) {
				uint64_t *l = (uint64_t *)(a->base + blocks[rand_r(seed) % nb] + BLOCK_HDR);
				l[rand_r(seed) % 2] = v;
			}
			break;
		case 5: { /* a client record */
			uint64_t *c = (uint64_t *)tn__client_at(a, rand_r(seed) % (int)a->max_clients);
			c[rand_r(seed) % 4] = rand_r(seed) % 2 ? v : (uint64_t)rand_r(seed) % 3;
			break;
		}
		case 6: { /* the undo log, as a holder killed in a change (or a liar) leaves it */
			unsigned cnt = (unsigned)rand_r(seed) % (UNDO_MAX + 20);
			for (unsigned i = 0; i < cnt && i < UNDO_MAX; i++)
				if (rand_r(seed) % 4 == 0)
					h->undo[i] = (struct undo_rec){ rand_r(seed) % 2 ? v :
						(uint64_t)((uint8_t *)&h->bins[0][0] - a->base) +
						8 * (uint64_t)(rand_r(seed) % 64), fuzz_value(a, seed, blocks, nb) };
			atomic_store(&h->undo_count, cnt);
			break;
		}
		case 7: { /* a directory entry's word */
			uint64_t *e = (uint64_t *)tn__entry_at(a, (uint32_t)rand_r(seed) % a->dir_slots);
			e[rand_r(seed) % 8] = rand_r(seed) % 2 ? v : (uint64_t)rand_r(seed) % 3;
			break;
		}
		case 8: /* a counter */
			(&h->used_bytes)[rand_r(seed) % 12] = v;
			break;
		default: { /* a random bit anywhere in the mutable metadata */
			uint64_t lo = offsetof(struct arena_header, fl_bitmap), hi = a->data_off;
			uint64_t o = lo + ((uint64_t)rand_r(seed) << 16 ^ (uint64_t)rand_r(seed)) % (hi - lo);
			if (o >= a->clients_off || o < ARENA_HEADER_BYTES)
				a->base[o] ^= (uint8_t)(1u << rand_r(seed) % 8);
			break;
		}
		}
	}
}

/* What the daemon and a client do with an arena, over the fuzzed file: a fresh open (the
 * daemon's recovery), reclaiming dead slots, fsck, alloc, free, publish and lookup, repair,
 * and the same again. Any result is fine but a signal; run in a child. */
static void fuzz_drive(const char *name, unsigned seed)
{
	tn_arena *b;
	alarm(30);
	if (tn_arena_open(name, dir, &b))
		_exit(0);
	for (int round = 0; round < 2; round++) {
		tn_arena_fsck_report rep;
		tn_arena_stats st;
		tn_tensor *x;
		void *p[8] = { 0 };
		tn_arena_reclaim_dead(b);
		tn_arena_fsck(b, 0, &rep);
		tn_arena_stat(b, &st);
		for (int i = 0; i < 8; i++)
			tn_arena_alloc(b, 64 + (size_t)(rand_r(&seed) % 70000), &p[i]);
		for (int i = 0; i < 8; i += 2)
			if (p[i])
				tn_arena_free(b, p[i]);
		for (int i = 0; i < 4; i++) {
			char key[8] = { 'n', (char)('0' + i), 0 };
			if (tn_arena_lookup(b, key, &x, NULL) == 0) {
				volatile float sink = *(const float *)tn_tensor_data(x);
				(void)sink;
				tn_arena_unpublish(b, key);
				tn_tensor_unref(x);
			}
		}
		tn_arena_entry *list = NULL;
		size_t nlist = 0;
		if (tn_arena_list(b, NULL, &list, &nlist) == 0)
			free(list);
		tn_arena_fsck(b, TN_ARENA_FSCK_REPAIR, &rep);
		for (int i = 1; i < 8; i += 2)
			if (p[i])
				tn_arena_free(b, p[i]);
	}
	tn_arena_unref(b);
	_exit(0);
}

/* Seeded mutations of an arena with blocks, holds (of a dead client and of live ones) and
 * published tensors, then the daemon's and a client's operations in a child: none may die of
 * a signal. TN_ARENA_FUZZ_ROUNDS sets the budget (default 40), TN_ARENA_FUZZ_SEED the seed. */
START_TEST(test_metadata_fuzz)
{
	const char *e = getenv("TN_ARENA_FUZZ_ROUNDS"), *es = getenv("TN_ARENA_FUZZ_SEED");
	int rounds = e ? atoi(e) : 40;
	unsigned base_seed = es ? (unsigned)strtoul(es, NULL, 0) : 17u;
	for (int round = 0; round < rounds; round++) {
		unsigned seed = base_seed * 1000003u + (unsigned)round;
		char name[32];
		snprintf(name, sizeof(name), "fz%d", round);
		tn_arena *a = make(name, 8 << 20);
		for (int i = 0; i < 4; i++) {
			char key[8] = { 'n', (char)('0' + i), 0 };
			tn_tensor *t = arena_tensor(a, 1, (int64_t[]){ 16 + 100 * i }, TN_FLOAT32);
			ck_assert_tn_ok(tn_arena_publish(a, key, t, 0, NULL));
			tn_tensor_unref(t);
		}
		pid_t pid = fork();
		if (pid == 0) { /* a client that dies holding blocks */
			tn_arena *b;
			void *p;
			if (tn_arena_open(name, dir, &b))
				_exit(10);
			for (int i = 0; i < 6; i++)
				if (tn_arena_alloc(b, 100 + 1000 * (size_t)i, &p))
					_exit(11);
			_exit(0);
		}
		ck_assert_int_eq(WEXITSTATUS(wait_status(pid)), 0);
		void *mine[3];
		for (int i = 0; i < 3; i++)
			ck_assert_tn_ok(tn_arena_alloc(a, 200 + 5000 * (size_t)i, &mine[i]));
		ck_assert_tn_ok(tn_arena_free(a, mine[1]));
		fuzz_mutate(a, &seed, 1 + rand_r(&seed) % 6);
		pid = fork();
		if (pid == 0)
			fuzz_drive(name, seed);
		int st = wait_status(pid);
		ck_assert_msg(!WIFSIGNALED(st), "round %d (TN_ARENA_FUZZ_SEED=%u): the client died of "
			      "signal %d", round, base_seed, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		/* This process, the arena's creator, goes on using it too. */
		tn_arena_free(a, mine[0]);
		tn_arena_free(a, mine[2]);
		tn_arena_reclaim_dead(a);
		tn_arena_unref(a);
		tn_arena_destroy(name, dir, 0); /* refused while damaged: the teardown removes it */
	}
}
END_TEST

/* ---- retention and eviction ------------------------------------------------------------------- */

/* A 1 MiB float32 tensor in @a filled with @v, published as @name with @flags; not kept. */
static void publish_mib(tn_arena *a, const char *name, unsigned flags, float v)
{
	int64_t sz[] = { 1 << 18 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT32);
	ck_assert_tn_ok(tn_fill_(t, tn_scalar_double(v)));
	ck_assert_tn_ok(tn_arena_publish(a, name, t, flags, NULL));
	tn_tensor_unref(t);
}

static bool has_name(tn_arena *a, const char *name)
{
	tn_arena_entry e;
	return tn_arena_info(a, name, &e) == 0;
}

/* Sleep past a tick of the coarse clock (4 ms at HZ=250), so that two uses are ordered. */
static void next_tick(void)
{
	usleep(20000);
}

START_TEST(test_eviction_order)
{
	tn_arena *a = make("evict", 16 << 20);
	tn_arena_stats s = stats(a);
	ck_assert_uint_eq(s.high_water, s.heap_bytes / 100 * 90);
	ck_assert_uint_eq(s.low_water, s.heap_bytes / 100 * 80);
	ck_assert_uint_eq(s.held_bytes + s.pinned_bytes + s.evictable_bytes, 0);

	/* "w" pinned (the default), "soft" soft-pinned for an hour, c0..c3 cache entries. */
	publish_mib(a, "w", 0, 1);
	publish_mib(a, "soft", TN_ARENA_EVICTABLE, 2);
	ck_assert_tn_ok(tn_arena_set_retention(a, "soft", TN_ARENA_SOFT_PINNED, 3600));
	char name[8];
	for (int i = 0; i < 4; i++) {
		next_tick();
		snprintf(name, sizeof(name), "c%d", i);
		publish_mib(a, name, TN_ARENA_EVICTABLE, (float)(10 + i));
	}
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "soft", &e));
	ck_assert_uint_eq(e.flags, TN_ARENA_ENTRY_SOFT_PINNED);
	ck_assert_int_ge(e.pin_until, (int64_t)time(NULL) + 3599);
	ck_assert_tn_ok(tn_arena_info(a, "c1", &e));
	ck_assert_uint_eq(e.flags, TN_ARENA_ENTRY_CACHE);
	ck_assert_int_eq(e.pin_until, 0);
	uint64_t block = e.block_bytes + 64; /* the block's bytes, its header included */
	uint64_t published_c1 = e.last_use_ns;

	s = stats(a);
	ck_assert_uint_eq(s.evictable_bytes, 4 * block);
	ck_assert_uint_eq(s.pinned_bytes, 2 * block);
	ck_assert_uint_eq(s.held_bytes, 0);
	ck_assert_uint_eq(s.used_bytes, 6 * block);

	/* Lookups refresh the clock: c0 then c2 become the most recently used. c2 stays held. */
	tn_tensor *x, *held;
	next_tick();
	ck_assert_tn_ok(tn_arena_lookup(a, "c0", &x, NULL));
	tn_tensor_unref(x);
	next_tick();
	ck_assert_tn_ok(tn_arena_lookup(a, "c2", &held, NULL));
	ck_assert_tn_ok(tn_arena_info(a, "c1", &e));
	ck_assert_uint_eq(e.last_use_ns, published_c1);
	ck_assert_tn_ok(tn_arena_info(a, "c2", &e));
	ck_assert_uint_gt(e.last_use_ns, published_c1);
	s = stats(a);
	ck_assert_uint_eq(s.evictable_bytes, 3 * block);
	ck_assert_uint_eq(s.held_bytes, block);

	/* One block above the target: the least recently used, c1, goes alone. */
	tn_arena_evict_report rep;
	ck_assert_tn_ok(tn_arena_evict(a, s.used_bytes - 1, &rep));
	ck_assert_uint_eq(rep.evicted, 1);
	ck_assert_uint_eq(rep.evicted_bytes, block);
	ck_assert_uint_eq(rep.used_bytes, 5 * block);
	ck_assert(!has_name(a, "c1") && has_name(a, "c3") && has_name(a, "c0"));
	/* Down to nothing: c3, then c0; c2 is held, "w" and "soft" pinned. */
	ck_assert_tn_ok(tn_arena_evict(a, 0, &rep));
	ck_assert_uint_eq(rep.evicted, 2);
	ck_assert(!has_name(a, "c3") && !has_name(a, "c0"));
	ck_assert(has_name(a, "c2") && has_name(a, "w") && has_name(a, "soft"));
	s = stats(a);
	ck_assert_uint_eq(s.evictions, 3);
	ck_assert_uint_eq(s.evicted_bytes, 3 * block);
	ck_assert_uint_eq(s.evictable_bytes, 0);
	/* The held tensor's bytes are intact and it can still be used. */
	ck_assert_float_eq(((const float *)tn_tensor_data(held))[12345], 12.0f);
	tn_tensor_unref(held);
	ck_assert_uint_eq(stats(a).evictable_bytes, block);

	/* An allocation that cannot be served evicts what it can, then fails with the figures. */
	void *p;
	ck_assert_tn_error_has(tn_arena_alloc(a, s.heap_bytes - block, &p), TN_ENOMEM,
			       "held by processes, ");
	ck_assert_msg(strstr(tn_last_error(), " pinned, 0 evictable)"), "%s", tn_last_error());
	ck_assert(!has_name(a, "c2"));
	ck_assert_uint_eq(stats(a).evictions, 4);

	/* A pin's class changes; a soft pin past its time is evictable. */
	ck_assert_tn_ok(tn_arena_set_retention(a, "w", TN_ARENA_SOFT_PINNED, 1));
	ck_assert_tn_ok(tn_arena_evict(a, 0, &rep));
	ck_assert_uint_eq(rep.evicted, 0);
	ck_assert_tn_ok(tn_arena_info(a, "w", &e));
	while (time(NULL) < e.pin_until)
		usleep(50000);
	ck_assert_tn_ok(tn_arena_evict(a, 0, &rep));
	ck_assert_uint_eq(rep.evicted, 1);
	ck_assert(!has_name(a, "w") && has_name(a, "soft"));
	ck_assert_tn_ok(tn_arena_set_retention(a, "soft", TN_ARENA_PINNED, 0));
	ck_assert_tn_ok(tn_arena_info(a, "soft", &e));
	ck_assert_uint_eq(e.flags, 0);
	ck_assert_uint_eq(stats(a).pinned_bytes, block);

	/* Bad arguments. */
	ck_assert_tn_error_has(tn_arena_set_retention(a, "soft", TN_ARENA_SOFT_PINNED, 0),
			       TN_EINVAL, "a soft pin lasts 1 s");
	ck_assert_tn_error_has(tn_arena_set_retention(a, "soft", TN_ARENA_CACHE, 5), TN_EINVAL,
			       "pin_seconds is for TN_ARENA_SOFT_PINNED");
	ck_assert_tn_error_has(tn_arena_set_retention(a, "soft", (enum tn_arena_retention)7, 0),
			       TN_EINVAL, "retention 7");
	ck_assert_tn_error_has(tn_arena_set_retention(a, "nope", TN_ARENA_CACHE, 0), TN_ENOENT,
			       "no tensor 'nope'");
	ck_assert_tn_error_has(tn_arena_set_watermarks(a, 1000, 2000), TN_EINVAL, "0 < low");
	ck_assert_tn_error_has(tn_arena_set_watermarks(a, s.heap_bytes + 1, 10), TN_EINVAL,
			       "the heap's");
	ck_assert_tn_ok(tn_arena_set_watermarks(a, 8 << 20, 4 << 20));
	s = stats(a);
	ck_assert_uint_eq(s.high_water, 8 << 20);
	ck_assert_uint_eq(s.low_water, 4 << 20);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* An allocation makes room by evicting the least recently used cache entries, and only as many
 * as it needs; entries another process holds stay until it dies. */
/* The arena's side of spilling, without tensord: what the spill and restore changes leave,
 * what lookups of a spilled name do, the failure path, and spill mode's rules. */
START_TEST(test_spill_entries)
{
	tn_arena *a = make("spill", 16 << 20);
	tn__arena_restore_wait_ns = 0; /* lookups do not wait: no tensord here */
	publish_mib(a, "w", 0, 1);
	publish_mib(a, "mid", TN_ARENA_EVICTABLE, 7);
	uint64_t used0 = stats(a).used_bytes;
	ck_assert_tn_ok(tn_arena_set_spill(a, true));
	ck_assert(stats(a).spill);
	/* Spill mode: nobody but tensord evicts. */
	ck_assert_tn_error_has(tn_arena_evict(a, 0, NULL), TN_ENOTSUP, "only tensord evicts");
	void *p;
	ck_assert_int_eq(tn_arena_alloc(a, 15 << 20, &p), TN_ENOMEM);
	ck_assert(has_name(a, "mid"));

	struct tn__spill_item *v;
	size_t n;
	uint64_t id;
	ck_assert_tn_ok(tn__arena_spill_candidates(a, 0, &v, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].name, "mid");
	ck_assert_uint_eq(v[0].bytes, 4u << 18);
	/* Looked up meanwhile: the spill is refused, the entry stays. */
	tn_tensor *x;
	ck_assert_tn_ok(tn_arena_lookup(a, "mid", &x, NULL));
	ck_assert_tn_ok(tn__arena_spill_next_id(a, &id));
	ck_assert_tn_error_has(tn__arena_spill_commit(a, &v[0], id), TN_EBUSY, "looked up");
	tn_tensor_unref(x);
	ck_assert_tn_ok(tn__arena_spill_next_id(a, &id));
	ck_assert_tn_ok(tn__arena_spill_commit(a, &v[0], id));
	free(v);
	tn_arena_stats s = stats(a);
	ck_assert_uint_eq(s.spilled_names, 1);
	ck_assert_uint_eq(s.spilled_bytes, 4u << 18);
	ck_assert_uint_eq(s.spills, 1);
	ck_assert_uint_eq(s.names, 2);
	ck_assert_uint_lt(s.used_bytes, used0);
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "mid", &e));
	ck_assert_uint_eq(e.flags, TN_ARENA_ENTRY_CACHE | TN_ARENA_ENTRY_SPILLED);
	ck_assert_uint_eq(e.block_bytes, 0);
	ck_assert_int_eq(e.sizes[0], 1 << 18);
	assert_clean(a);

	/* A lookup asks for it back, by name or handle, and is told it is coming. */
	ck_assert_tn_error_has(tn_arena_lookup(a, "mid", &x, NULL), TN_EAGAIN, "spilled to disk");
	ck_assert_tn_error_has(tn_arena_lookup_handle(a, e.handle, &x), TN_EAGAIN, "reading it");
	ck_assert_tn_ok(tn_arena_info(a, "mid", &e));
	ck_assert(e.flags & TN_ARENA_ENTRY_RESTORING);
	ck_assert_tn_ok(tn__arena_spilled(a, true, &v, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(v[0].id, id);
	/* A failed restore is reported to the lookup, which asks again. */
	ck_assert_tn_ok(tn__arena_restore_fail(a, &v[0], TN_ENOMEM));
	ck_assert_tn_ok(tn_arena_info(a, "mid", &e));
	ck_assert_uint_eq(e.flags & (TN_ARENA_ENTRY_RESTORING | TN_ARENA_ENTRY_RESTORE_FAILED),
			  TN_ARENA_ENTRY_RESTORE_FAILED);
	ck_assert_tn_error_has(tn_arena_lookup(a, "mid", &x, NULL), TN_ENOMEM, "could not read");
	ck_assert_tn_ok(tn_arena_info(a, "mid", &e));
	ck_assert(e.flags & TN_ARENA_ENTRY_RESTORING);
	ck_assert_uint_eq(stats(a).restore_failures, 1);
	/* Sealed while on disk: the block it comes back in is sealed. */
	ck_assert_tn_ok(tn_arena_seal(a, "mid"));

	/* The restore: a block of ours with the bytes, named under the entry. */
	int64_t sz[] = { 1 << 18 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT32);
	ck_assert_tn_ok(tn_fill_(t, tn_scalar_double(7)));
	struct tn__arena_desc d = { .dtype = TN_FLOAT32, .ndim = 1, .sizes = { 1 << 18 },
				    .strides = { 1 } };
	d.block = tn__arena_block_of(a, tn_storage_data(tn_tensor_storage(t)), NULL);
	struct tn__arena_desc bad = d;
	bad.sizes[0] = 5;
	ck_assert_tn_error_has(tn__arena_restore_commit(a, &v[0], &bad), TN_EINVAL, "geometry");
	ck_assert_tn_ok(tn__arena_restore_commit(a, &v[0], &d));
	/* Once only: the entry is no longer the spilled one. */
	ck_assert_tn_error_has(tn__arena_restore_commit(a, &v[0], &d), TN_ESTALE, "unpublished");
	tn_tensor_unref(t);
	free(v);
	s = stats(a);
	ck_assert_uint_eq(s.spilled_names, 0);
	ck_assert_uint_eq(s.spilled_bytes, 0);
	ck_assert_uint_eq(s.restores, 1);
	ck_assert_tn_ok(tn_arena_info(a, "mid", &e));
	ck_assert_uint_eq(e.flags, TN_ARENA_ENTRY_CACHE | TN_ARENA_ENTRY_SEALED);
	ck_assert_tn_ok(tn_arena_lookup(a, "mid", &x, NULL));
	ck_assert_float_eq(((const float *)tn_tensor_data(x))[12345], 7);
	ck_assert_int_ne(tn_fill_(x, tn_scalar_double(1)), 0); /* sealed: read-only */
	tn_tensor_unref(x);
	assert_clean(a);

	/* Unpublishing a spilled name returns its count; every byte comes back. */
	ck_assert_tn_ok(tn__arena_spill_candidates(a, 0, &v, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_tn_ok(tn__arena_spill_next_id(a, &id));
	ck_assert_tn_ok(tn__arena_spill_commit(a, &v[0], id));
	free(v);
	ck_assert_uint_eq(stats(a).spilled_names, 1);
	ck_assert_tn_ok(tn_arena_unpublish(a, "mid"));
	ck_assert_tn_ok(tn_arena_unpublish(a, "w"));
	s = stats(a);
	ck_assert_uint_eq(s.spilled_names, 0);
	ck_assert_uint_eq(s.spilled_bytes, 0);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_tn_ok(tn_arena_set_spill(a, false));
	ck_assert(!stats(a).spill);
	assert_clean(a);
	tn__arena_restore_wait_ns = TN__ARENA_RESTORE_WAIT_NS;
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_eviction_by_allocation)
{
	tn_arena *a = make("evalloc", 16 << 20);
	uint64_t heap = stats(a).heap_bytes;
	char name[16];
	int n = 0;
	/* Publish 1 MiB cache entries, none kept, until an allocation has had to evict: the
	 * oldest go first (one or two: the heap's bins find a block only in a class whose every
	 * block fits, so a hole of exactly the size asked may not serve). */
	for (; stats(a).evictions == 0; n++) {
		ck_assert_int_lt(n, 64);
		snprintf(name, sizeof(name), "kv/%d", n);
		publish_mib(a, name, TN_ARENA_EVICTABLE, (float)n);
		next_tick();
	}
	ck_assert_int_ge(n, 10);
	int gone = (int)stats(a).evictions;
	ck_assert_int_le(gone, 2);
	char oldest[16], second[16], third[16];
	snprintf(oldest, sizeof(oldest), "kv/%d", gone);
	snprintf(second, sizeof(second), "kv/%d", gone + 1);
	snprintf(third, sizeof(third), "kv/%d", gone + 2);
	ck_assert(!has_name(a, "kv/0") && has_name(a, oldest));
	ck_assert_uint_le(stats(a).used_bytes, heap);

	/* Another process holds the oldest; then the second oldest is used again here. */
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *x;
		if (tn_arena_open("evalloc", dir, &b) || tn_arena_lookup(b, oldest, &x, NULL))
			_exit(10);
		if (write(ready[1], "x", 1) != 1)
			_exit(11);
		pause();
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	tn_tensor *x;
	ck_assert_tn_ok(tn_arena_lookup(a, second, &x, NULL));
	tn_tensor_unref(x);

	/* 2.5 MiB: room taken from the least recently used entries not held, the third on. */
	void *p;
	ck_assert_tn_ok(tn_arena_alloc(a, (5 << 20) / 2, &p));
	tn_arena_stats s = stats(a);
	ck_assert_uint_ge(s.evictions, (uint64_t)gone + 1);
	ck_assert_uint_le(s.evictions, (uint64_t)gone + 4);
	ck_assert(has_name(a, oldest) && has_name(a, second) && !has_name(a, third));
	snprintf(name, sizeof(name), "kv/%d", n - 1);
	ck_assert(has_name(a, name));
	ck_assert_tn_ok(tn_arena_free(a, p));

	/* The holder dies: its hold goes with its slot, and the oldest can leave too. */
	kill(pid, SIGKILL);
	wait_status(pid);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
	tn_arena_evict_report rep;
	ck_assert_tn_ok(tn_arena_evict(a, 0, &rep));
	ck_assert(!has_name(a, oldest) && !has_name(a, second));
	ck_assert_uint_eq(stats(a).names, 0);
	ck_assert_uint_eq(stats(a).used_bytes, 0);
	close(ready[0]);
	close(ready[1]);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* ---- waiting lookups and private views -------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A child that opens arena @name, sleeps @delay_ms, publishes "late" (16 int32 of 5), and with
 * @seal seals it @delay_ms later still. */
static pid_t late_publisher(const char *name, int delay_ms, bool seal)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	tn_arena *b;
	if (tn_arena_open(name, dir, &b))
		_exit(10);
	usleep((useconds_t)delay_ms * 1000);
	int64_t sz[] = { 16 };
	tn_tensor *t = arena_tensor(b, 1, sz, TN_INT32);
	if (tn_fill_(t, tn_scalar_int(5)) || tn_arena_publish(b, "late", t, 0, NULL))
		_exit(11);
	if (seal) {
		usleep((useconds_t)delay_ms * 1000);
		if (tn_arena_seal(b, "late"))
			_exit(12);
	}
	tn_tensor_unref(t);
	tn_arena_unref(b);
	_exit(0);
}

START_TEST(test_lookup_wait)
{
	tn_arena *a = make("wait", 16 << 20);
	tn_tensor *t = NULL;
	tn_arena_handle h;
	tn_arena_lookup_options o = { .timeout_ns = 50000000 }; /* 50 ms */

	/* Bad arguments are refused before any wait. */
	ck_assert_tn_error_has(tn_arena_lookup_wait(a, "a//b", &o, &t, NULL), TN_EINVAL, "name");
	o.flags = 0x80;
	ck_assert_tn_error_has(tn_arena_lookup_wait(a, "x", &o, &t, NULL), TN_EINVAL, "flags");
	o.flags = 0;
	ck_assert_tn_error_has(tn_arena_lookup_wait(a, "x", &o, NULL, NULL), TN_EINVAL, "NULL");
	ck_assert_tn_error_has(tn_arena_lookup_wait(NULL, "x", &o, &t, NULL), TN_EBADF, "handle");
	/* No options, or a zero timeout: tn_arena_lookup. */
	ck_assert_tn_error_has(tn_arena_lookup_wait(a, "x", NULL, &t, NULL), TN_ENOENT, "x");

	/* Nothing comes: TN_ETIMEDOUT after the timeout, not long after. */
	uint64_t t0 = now_ms();
	ck_assert_tn_error_has(tn_arena_lookup_wait(a, "never", &o, &t, NULL), TN_ETIMEDOUT,
			       "'never' was not published");
	uint64_t took = now_ms() - t0;
	ck_assert_msg(took >= 50 && took < 2000, "a 50 ms wait took %llu ms",
		      (unsigned long long)took);
	ck_assert_uint_eq(stats(a).waiters, 0);

	/* Another process publishes after 200 ms: the wait (10 s allowed) wakes for it. */
	pid_t pid = late_publisher("wait", 200, false);
	o.timeout_ns = 10000000000;
	t0 = now_ms();
	ck_assert_tn_ok(tn_arena_lookup_wait(a, "late", &o, &t, &h));
	took = now_ms() - t0;
	ck_assert_msg(took < 5000, "woken after %llu ms", (unsigned long long)took);
	ck_assert_int_eq(((int32_t *)tn_tensor_data(t))[15], 5);
	ck_assert(!tn_tensor_is_readonly(t));
	tn_tensor_unref(t);
	ck_assert_uint_eq(stats(a).waiters, 0);
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "publisher status %d", st);

	/* A name that is there: no wait, nothing announced. */
	ck_assert_tn_ok(tn_arena_lookup_wait(a, "late", &o, &t, NULL));
	tn_tensor_unref(t);

	/* Waiting for the seal: published now, sealed 300 ms later. */
	ck_assert_tn_ok(tn_arena_unpublish(a, "late"));
	pid = late_publisher("wait", 150, true);
	o.flags = TN_ARENA_LOOKUP_SEALED;
	ck_assert_tn_ok(tn_arena_lookup_wait(a, "late", &o, &t, NULL));
	ck_assert(tn_tensor_is_readonly(t));
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "late", &e));
	ck_assert_uint_eq(e.flags & TN_ARENA_ENTRY_SEALED, TN_ARENA_ENTRY_SEALED);
	tn_tensor_unref(t);
	st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "publisher status %d", st);
	/* An unsealed name with the flag and no wait: timed out at once. */
	int64_t sz[] = { 4 };
	tn_tensor *u = arena_tensor(a, 1, sz, TN_INT32);
	ck_assert_tn_ok(tn_arena_publish(a, "open", u, 0, NULL));
	o.timeout_ns = 0;
	ck_assert_tn_error_has(tn_arena_lookup_wait(a, "open", &o, &t, NULL), TN_ETIMEDOUT,
			       "published sealed");
	tn_tensor_unref(u);
	ck_assert_uint_eq(stats(a).waiters, 0);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* Several threads of one process wait for different names; each wakes for its own. */
struct waiter_arg {
	tn_arena *a;
	char name[16];
	int result;
};

static void *waiter_thread(void *p)
{
	struct waiter_arg *w = p;
	tn_arena_lookup_options o = { .timeout_ns = 20000000000 };
	tn_tensor *t = NULL;
	w->result = tn_arena_lookup_wait(w->a, w->name, &o, &t, NULL);
	tn_tensor_unref(t);
	return NULL;
}

START_TEST(test_lookup_wait_threads_and_kill)
{
	tn_arena *a = make("waitk", 16 << 20);
	struct waiter_arg w[3];
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		w[i] = (struct waiter_arg){ .a = a, .result = 1 };
		snprintf(w[i].name, sizeof(w[i].name), "n%d", i);
		ck_assert_int_eq(pthread_create(&th[i], NULL, waiter_thread, &w[i]), 0);
	}
	/* One process, one waiting bit, whatever its threads. */
	for (int i = 0; i < 200 && stats(a).waiters == 0; i++)
		usleep(5000);
	ck_assert_uint_eq(stats(a).waiters, 1);
	int64_t sz[] = { 8 };
	for (int i = 0; i < 3; i++) {
		tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT32);
		char name[16];
		snprintf(name, sizeof(name), "n%d", 2 - i);
		ck_assert_tn_ok(tn_arena_publish(a, name, t, 0, NULL));
		tn_tensor_unref(t);
		usleep(20000);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].result, 0);
	}
	ck_assert_uint_eq(stats(a).waiters, 0);

	/* A waiter killed in its sleep leaves its bit only until its slot is reclaimed. */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_arena *b;
		tn_tensor *t;
		tn_arena_lookup_options o = { .timeout_ns = -1 };
		if (tn_arena_open("waitk", dir, &b))
			_exit(10);
		tn_arena_lookup_wait(b, "forever", &o, &t, NULL);
		_exit(11);
	}
	for (int i = 0; i < 400 && stats(a).waiters == 0; i++)
		usleep(5000);
	ck_assert_uint_eq(stats(a).waiters, 1);
	kill(pid, SIGKILL);
	int st = wait_status(pid);
	ck_assert(WIFSIGNALED(st));
	/* Publishing meanwhile is harmless (one needless wake). */
	tn_tensor *t = arena_tensor(a, 1, sz, TN_FLOAT32);
	ck_assert_tn_ok(tn_arena_publish(a, "other", t, 0, NULL));
	tn_tensor_unref(t);
	ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
	ck_assert_uint_eq(stats(a).waiters, 0);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* A waiter for one name sleeps on its bucket's word: publishes of names in other buckets do
 * not wake it (its thread's voluntary context switches barely move), one in its bucket does. */
struct bucket_waiter {
	tn_arena *a;
	_Atomic pid_t tid;
	int result;
};

static void *bucket_waiter_thread(void *p)
{
	struct bucket_waiter *w = p;
	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	tn_arena_lookup_options o = { .timeout_ns = 30000000000 };
	tn_tensor *t = NULL;
	w->result = tn_arena_lookup_wait(w->a, "target", &o, &t, NULL);
	tn_tensor_unref(t);
	return NULL;
}

static long voluntary_switches(pid_t tid)
{
	char path[64], line[128];
	long v = -1;
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

START_TEST(test_lookup_wait_buckets)
{
	tn_arena *a = make("waitb", 16 << 20);
	struct bucket_waiter w = { .a = a, .result = 1 };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, bucket_waiter_thread, &w), 0);
	for (int i = 0; i < 400 && (atomic_load(&w.tid) == 0 || stats(a).waiters == 0); i++)
		usleep(5000);
	ck_assert_uint_eq(stats(a).waiters, 1);
	usleep(20000); /* asleep by now */
	int mine = tn__arena_wait_bucket("target");
	int64_t sz[] = { 4 };
	tn_tensor *t = arena_tensor(a, 1, sz, TN_INT32);
	long before = voluntary_switches(atomic_load(&w.tid));
	int others = 0;
	for (int i = 0; others < 300; i++) {
		char name[32];
		snprintf(name, sizeof(name), "other/%d", i);
		if (tn__arena_wait_bucket(name) == mine)
			continue;
		ck_assert_tn_ok(tn_arena_publish(a, name, t, 0, NULL));
		ck_assert_tn_ok(tn_arena_unpublish(a, name));
		others++;
		usleep(300); /* a waiter woken by it would be asleep again before the next */
	}
	long after = voluntary_switches(atomic_load(&w.tid));
	ck_assert_msg(before >= 0 && after - before < 30,
		      "the waiter was woken %ld times by 300 publishes of other buckets",
		      after - before);
	ck_assert_int_eq(w.result, 1); /* still waiting */
	ck_assert_tn_ok(tn_arena_publish(a, "target", t, 0, NULL));
	pthread_join(th, NULL);
	ck_assert_int_eq(w.result, 0);
	tn_tensor_unref(t);
	ck_assert_uint_eq(stats(a).waiters, 0);
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_cow)
{
	tn_arena *a = make("cow", 16 << 20);
	/* A small block (its data shares a page with others) and a large one (page aligned). */
	int64_t small[] = { 3, 5 }, large[] = { 256, 300 };
	const char *names[] = { "small", "large" };
	for (int k = 0; k < 2; k++) {
		tn_tensor *t = arena_tensor(a, 2, k ? large : small, TN_FLOAT32);
		float *d = tn_tensor_data(t);
		int64_t n = tn_tensor_numel(t);
		for (int64_t i = 0; i < n; i++)
			d[i] = (float)i;
		ck_assert_tn_ok(tn_arena_publish(a, names[k], t, TN_ARENA_SEAL, NULL));
		tn_tensor_unref(t);
	}
	for (int k = 0; k < 2; k++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			tn_arena *b;
			tn_tensor *x, *v, *c, *again;
			if (tn_arena_open("cow", dir, &b) || tn_arena_lookup(b, names[k], &x, NULL))
				_exit(10);
			if (!tn_tensor_is_readonly(x))
				_exit(11);
			/* A transposed view: the private view keeps its strides. */
			if (tn_transpose(x, 0, 1, &v) || tn_arena_cow(v, &c))
				_exit(12);
			if (tn_tensor_is_readonly(c) || tn_tensor_strides(c)[0] != 1 ||
			    tn_tensor_sizes(c)[0] != tn_tensor_sizes(x)[1])
				_exit(13);
			/* The same bytes, at another address. */
			if (tn_tensor_data(c) == tn_tensor_data(v) ||
			    memcmp(tn_tensor_data(c), tn_tensor_data(v), tn_tensor_nbytes(x)))
				_exit(14);
			/* Operators write it; the shared bytes do not change. */
			if (tn_fill_(c, tn_scalar_double(-1.0)))
				_exit(15);
			if (((float *)tn_tensor_data(c))[1] != -1.0f ||
			    ((const float *)tn_tensor_data(x))[1] != 1.0f)
				_exit(16);
			tn_tensor_unref(x);
			tn_tensor_unref(v);
			if (tn_arena_lookup(b, names[k], &again, NULL) ||
			    ((const float *)tn_tensor_data(again))[1] != 1.0f)
				_exit(17);
			tn_tensor_unref(again);
			/* The view keeps the block held after every other tensor is gone. */
			tn_arena_unref(b);
			if (((float *)tn_tensor_data(c))[2] != -1.0f)
				_exit(18);
			tn_tensor_unref(c);
			_exit(0);
		}
		int st = wait_status(pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status %d", names[k],
			      st);
	}
	/* The writer's process saw its own copy; the arena's bytes are untouched. */
	tn_tensor *x;
	ck_assert_tn_ok(tn_arena_lookup(a, "large", &x, NULL));
	const float *v = tn_tensor_data(x);
	for (int i = 0; i < 256 * 300; i++)
		ck_assert_msg(v[i] == (float)i, "element %d is %g", i, v[i]);
	tn_tensor_unref(x);

	/* Not an arena tensor. */
	tn_tensor *plain, *c;
	ck_assert_tn_ok(tn_zeros(2, small, TN_FLOAT32, TN_CPU, &plain));
	ck_assert_tn_error_has(tn_arena_cow(plain, &c), TN_EINVAL, "not a block of an arena");
	tn_tensor_unref(plain);
	ck_assert_tn_error_has(tn_arena_cow(NULL, &c), TN_EBADF, "not a tensor");
	ck_assert_uint_eq(stats(a).clients, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

static Suite *arena_suite(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("arena");
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_open_destroy);
	tcase_add_test(tc, test_bad_names_and_options);
	tcase_add_test(tc, test_open_validates);
	tcase_add_test(tc, test_full_tmpfs);
	tcase_add_test(tc, test_alloc_free);
	tcase_add_test(tc, test_alloc_own_sub_bin);
	tcase_add_test(tc, test_alloc_random);
	tcase_add_test(tc, test_thread_cache);
	tcase_add_test(tc, test_fork);
	tcase_add_test(tc, test_publish_lookup);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_directory_churn);
	tcase_add_test(tc, test_lookup_once);
	tcase_add_test(tc, test_storages_in_process);
	tcase_add_test(tc, test_seal);
	tcase_add_test(tc, test_seal_rules);
	tcase_add_test(tc, test_lookup_wait);
	tcase_add_test(tc, test_lookup_wait_threads_and_kill);
	tcase_add_test(tc, test_lookup_wait_buckets);
	tcase_add_test(tc, test_cow);
	tcase_add_test(tc, test_eviction_order);
	tcase_add_test(tc, test_eviction_by_allocation);
	tcase_add_test(tc, test_spill_entries);
	tcase_add_test(tc, test_factories_in_arena);
	tcase_add_test(tc, test_no_syscalls);
	tcase_add_loop_test(tc, test_crash_every_point, 0, 8);
	tcase_add_test(tc, test_lock_holder_dies);
	tcase_add_test(tc, test_kill_chaos);
	tcase_add_test(tc, test_many_processes);
	tcase_add_test(tc, test_fsck_repairs);
	tcase_add_test(tc, test_hostile_metadata);
	tcase_add_test(tc, test_poisoned_free_lists);
	tcase_add_test(tc, test_metadata_fuzz);
	tcase_add_test(tc, test_punched_holes);
	tcase_add_test(tc, test_lock_word_forged);
	tcase_add_test(tc, test_reclaim_rules);
	tcase_add_test(tc, test_hugepages);
	tcase_add_test(tc, test_numa_bind);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	self_exe = argv[0];
	if (argc == 5 && !strcmp(argv[1], "--worker"))
		return worker(argv[2], argv[3], atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "--worker") && !strcmp(argv[5], "stress"))
		return stress_worker(argv[2], argv[3], atoi(argv[4]));
	SRunner *sr = srunner_create(arena_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
