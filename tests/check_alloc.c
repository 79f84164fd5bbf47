/* SPDX-License-Identifier: MIT */
/*
 * The allocator registry and the CPU allocator: alignment, fill modes, the large-block cache
 * with its limit and trim, the per-thread small-block cache, statistics, NUMA node selection and fault injection.
 *
 * Tests run in Check's fork mode, so each starts with a fresh allocator state.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static const tn_device cpu = { TN_DEVICE_CPU, 0 };

START_TEST(test_alignment_every_size)
{
	const tn_allocator *a = tn_cpu_allocator();
	size_t sizes[] = { 1, 3, 63, 64, 65, 100, 4095, 4097, 65536, TN_CPU_LARGE_BLOCK - 1,
			   TN_CPU_LARGE_BLOCK, TN_CPU_LARGE_BLOCK + 1, (size_t)5 << 20 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p = a->alloc(a->ctx, sizes[i]);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % TN_CPU_ALIGNMENT, 0);
		if (sizes[i] >= TN_CPU_LARGE_BLOCK) /* large blocks start on a huge page */
			ck_assert_uint_eq((uintptr_t)p % (2u << 20), 0);
		memset(p, 0xab, sizes[i]); /* the whole block is writable */
		a->free(a->ctx, p, sizes[i]);
	}
}
END_TEST

START_TEST(test_registry)
{
	ck_assert_ptr_eq(tn_allocator_get(TN_DEVICE_CPU), tn_cpu_allocator());
	/* CUDA's is the caching allocator in a build with CUDA, none without. */
	ck_assert_ptr_eq(tn_allocator_get(TN_DEVICE_CUDA), tn_cuda_caching_allocator());
	ck_assert_ptr_null(tn_allocator_get(TN_DEVICE_META));
	ck_assert_ptr_null(tn_allocator_get(TN_NUM_DEVICE_TYPES));
	ck_assert_str_eq(tn_cpu_allocator()->name, "cpu");

	tn_allocator broken = { "broken", NULL, NULL, NULL };
	ck_assert_tn_error(tn_allocator_set(TN_DEVICE_CPU, &broken), TN_EINVAL,
			   "tn_allocator_set: allocator 'broken' lacks alloc or free");
	ck_assert_tn_error(tn_allocator_set(TN_DEVICE_META, tn_cpu_allocator()), TN_EINVAL,
			   "tn_allocator_set: meta tensors have no memory");
	ck_assert_tn_error(tn_allocator_set((enum tn_device_type)7, NULL), TN_EINVAL,
			   "tn_allocator_set: invalid device type 7");
	ck_assert_ptr_eq(tn_allocator_get(TN_DEVICE_CPU), tn_cpu_allocator());
}
END_TEST

struct counting {
	int allocs, frees;
	size_t last_size;
};

static void *counting_alloc(void *ctx, size_t n)
{
	struct counting *c = ctx;
	c->allocs++;
	c->last_size = n;
	return malloc(n);
}

static void counting_free(void *ctx, void *p, size_t n)
{
	struct counting *c = ctx;
	ck_assert_uint_eq(n, c->last_size);
	c->frees++;
	free(p);
}

START_TEST(test_custom_allocator_is_used_and_kept)
{
	struct counting c = { 0 };
	tn_allocator mine = { "counting", &c, counting_alloc, counting_free };
	tn_tensor *t, *u;
	int64_t sizes[] = { 4, 8 };

	ck_assert_tn_ok(tn_allocator_set(TN_DEVICE_CPU, &mine));
	ck_assert_ptr_eq(tn_allocator_get(TN_DEVICE_CPU), &mine);
	ck_assert_tn_ok(tn_zeros(2, sizes, TN_INT32, TN_CPU, &t));
	ck_assert_int_eq(c.allocs, 1);
	ck_assert_uint_eq(c.last_size, 4 * 8 * 4);
	/* Restoring the default does not move existing storages off their allocator. */
	ck_assert_tn_ok(tn_allocator_set(TN_DEVICE_CPU, NULL));
	ck_assert_ptr_eq(tn_allocator_get(TN_DEVICE_CPU), tn_cpu_allocator());
	ck_assert_tn_ok(tn_zeros(2, sizes, TN_INT32, TN_CPU, &u));
	ck_assert_int_eq(c.allocs, 1);
	tn_tensor_unref(t);
	ck_assert_int_eq(c.frees, 1);
	tn_tensor_unref(u);
	ck_assert_int_eq(c.frees, 1);
}
END_TEST

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

START_TEST(test_fill_modes)
{
	const tn_allocator *a = tn_cpu_allocator();
	size_t sizes[] = { 1000, (size_t)3 << 20 };

	for (int k = 0; k < 2; k++) {
		size_t n = sizes[k];
		ck_assert_tn_ok(tn_cpu_allocator_set_fill(TN_FILL_JUNK));
		unsigned char *p = a->alloc(a->ctx, n);
		uint32_t w;
		memcpy(&w, p, 4);
		ck_assert_uint_eq(w, 0x7fedcba9u);
		memcpy(&w, p + (n / 4 - 1) * 4, 4);
		ck_assert_uint_eq(w, 0x7fedcba9u);
		float f;
		memcpy(&f, p, 4);
		ck_assert(f != f); /* the junk word is a NaN as float32 */
		memset(p, 0x11, n);
		a->free(a->ctx, p, n);

		/* Zero mode zeroes a recycled block too: fill it with junk first. */
		ck_assert_tn_ok(tn_cpu_allocator_set_fill(TN_FILL_ZERO));
		p = a->alloc(a->ctx, n);
		ck_assert(all_bytes(p, n, 0));
		a->free(a->ctx, p, n);
	}
	ck_assert_tn_error(tn_cpu_allocator_set_fill((enum tn_alloc_fill)3), TN_EINVAL,
			   "tn_cpu_allocator_set_fill: invalid fill mode 3");
}
END_TEST

/* Run @fn in a child with TN_ALLOC_FILL set before the first allocation, as a user would. */
static int run_with_env(const char *var, const char *value, int (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		setenv(var, value, 1);
		_exit(fn());
	}
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static int junk_from_env(void)
{
	const tn_allocator *a = tn_cpu_allocator();
	unsigned char *p = a->alloc(a->ctx, 4096);
	uint32_t w;
	memcpy(&w, p + 64, 4);
	a->free(a->ctx, p, 4096);
	return w == 0x7fedcba9u ? 0 : 1;
}

static int limit_from_env(void)
{
	tn_alloc_stats s;
	tn_cpu_allocator_stats(&s);
	return s.cache_limit == ((uint64_t)3 << 20) ? 0 : 1;
}

START_TEST(test_environment)
{
	ck_assert_int_eq(run_with_env("TN_ALLOC_FILL", "junk", junk_from_env), 0);
	ck_assert_int_eq(run_with_env("TN_ALLOC_FILL", "none", junk_from_env), 1);
	ck_assert_int_eq(run_with_env("TN_CPU_CACHE_LIMIT", "3M", limit_from_env), 0);
	ck_assert_int_eq(run_with_env("TN_CPU_CACHE_LIMIT", "3x", limit_from_env), 1);
}
END_TEST

START_TEST(test_large_block_cache)
{
	const size_t n = (size_t)64 << 20;
	tn_alloc_stats s0, s;
	tn_storage *st;

	tn_cpu_allocator_trim();
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s0));
	ck_assert_tn_ok(tn_storage_new(cpu, n, &st));
	void *first = tn_storage_data(st);
	memset(first, 1, n);
	tn_storage_unref(st);
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.cached_bytes, n);
	ck_assert_uint_eq(s.cached_blocks, 1);
	ck_assert_uint_eq(s.cache_misses, s0.cache_misses + 1);

	/* The next allocation of the same rounded size gets the same pages back. */
	ck_assert_tn_ok(tn_storage_new(cpu, n - 100, &st));
	ck_assert_ptr_eq(tn_storage_data(st), first);
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.cache_hits, s0.cache_hits + 1);
	ck_assert_uint_eq(s.cached_bytes, 0);
	ck_assert_uint_eq(s.allocated_bytes, s0.allocated_bytes + n - 100);
	ck_assert_uint_ge(s.huge_bytes, n);
	tn_storage_unref(st);

	/* Trim releases everything cached and reports how much. */
	ck_assert_uint_eq(tn_cpu_allocator_trim(), n);
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.cached_bytes, 0);
	ck_assert_uint_eq(tn_cpu_allocator_trim(), 0);
}
END_TEST

/* Small blocks: a freed block is reused by the next allocation of its size class on the same
 * thread, trim hands the thread's cached blocks back, and a thread's cache goes with it.
 * (ASan builds cache nothing, so that every use after free is caught.) */
static void *small_churn(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++) {
		tn_storage *st;
		if (tn_storage_new(cpu, (size_t)(i % 50) * 64 + 1, &st) < 0)
			return (void *)1;
		tn_storage_unref(st);
	}
	return NULL;
}

START_TEST(test_small_block_cache)
{
	tn_alloc_stats s0, s;
	tn_storage *st;
	void *ret;
	pthread_t th;

	tn_cpu_allocator_trim();
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s0));
	ck_assert_tn_ok(tn_storage_new(cpu, 100, &st));
	void *first = tn_storage_data(st);
	tn_storage_unref(st);
	ck_assert_tn_ok(tn_storage_new(cpu, 128, &st)); /* same class: 65..128 bytes */
#if defined(__SANITIZE_ADDRESS__)
	(void)first;
#else
	ck_assert_ptr_eq(tn_storage_data(st), first);
#endif
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.allocated_bytes, s0.allocated_bytes + 128);
	ck_assert_uint_eq(s.allocated_blocks, s0.allocated_blocks + 1);
	tn_storage_unref(st);
#if defined(__SANITIZE_ADDRESS__)
	ck_assert_uint_eq(tn_cpu_allocator_trim(), 0);
#else
	ck_assert_uint_eq(tn_cpu_allocator_trim(), 128);
#endif
	ck_assert_uint_eq(tn_cpu_allocator_trim(), 0);

	ck_assert_int_eq(pthread_create(&th, NULL, small_churn, NULL), 0);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_null(ret);
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.allocated_bytes, s0.allocated_bytes);
	ck_assert_uint_eq(s.allocated_blocks, s0.allocated_blocks);
}
END_TEST

START_TEST(test_cache_limit)
{
	const size_t n = (size_t)4 << 20;
	tn_storage *a, *b, *c;
	tn_alloc_stats s;

	ck_assert_tn_ok(tn_cpu_allocator_set_cache_limit(2 * n));
	ck_assert_tn_ok(tn_storage_new(cpu, n, &a));
	ck_assert_tn_ok(tn_storage_new(cpu, n, &b));
	ck_assert_tn_ok(tn_storage_new(cpu, n, &c));
	tn_storage_unref(a);
	tn_storage_unref(b);
	tn_storage_unref(c); /* over the limit: unmapped, not cached */
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.cached_bytes, 2 * n);
	ck_assert_uint_eq(s.cache_limit, 2 * n);
	/* Lowering the limit trims at once. */
	ck_assert_tn_ok(tn_cpu_allocator_set_cache_limit(n));
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.cached_bytes, n);
	ck_assert_uint_eq(s.cached_blocks, 1);
	ck_assert_tn_ok(tn_cpu_allocator_set_cache_limit(0));
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.cached_bytes, 0);
	ck_assert_uint_eq(s.huge_bytes, 0);
}
END_TEST

START_TEST(test_stats_and_peak)
{
	tn_alloc_stats s0, s;
	tn_tensor *t;
	int64_t sizes[] = { 1000 };

	ck_assert_tn_error(tn_cpu_allocator_stats(NULL), TN_EINVAL,
			   "tn_cpu_allocator_stats: NULL ret_stats");
	tn_cpu_allocator_reset_peak();
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s0));
	ck_assert_uint_eq(s0.peak_bytes, s0.allocated_bytes);
	ck_assert_tn_ok(tn_empty(1, sizes, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.allocated_bytes, s0.allocated_bytes + 8000);
	ck_assert_uint_eq(s.allocated_blocks, s0.allocated_blocks + 1);
	ck_assert_uint_eq(s.live_objects, s0.live_objects + 2); /* tensor + storage */
	ck_assert_uint_eq(s.num_allocs, s0.num_allocs + 1);
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.allocated_bytes, s0.allocated_bytes);
	ck_assert_uint_eq(s.peak_bytes, s0.allocated_bytes + 8000);
	ck_assert_uint_eq(s.num_frees, s0.num_frees + 1);
	ck_assert_uint_eq(s.live_objects, s0.live_objects);
	tn_cpu_allocator_reset_peak();
	ck_assert_tn_ok(tn_cpu_allocator_stats(&s));
	ck_assert_uint_eq(s.peak_bytes, s0.allocated_bytes);
}
END_TEST

START_TEST(test_numa_node)
{
	tn_storage *st;
	ck_assert_tn_ok(tn_cpu_allocator_set_numa_node(0));
	ck_assert_tn_ok(tn_storage_new(cpu, (size_t)4 << 20, &st));
	memset(tn_storage_data(st), 7, (size_t)4 << 20);
	tn_storage_unref(st);
	ck_assert_tn_ok(tn_cpu_allocator_set_numa_node(-1));
	ck_assert_tn_error_has(tn_cpu_allocator_set_numa_node(4096), TN_ERANGE,
			       "NUMA node 4096 does not exist");
	ck_assert_tn_error_has(tn_cpu_allocator_set_numa_node(-2), TN_ERANGE,
			       "NUMA node -2 does not exist");
}
END_TEST

START_TEST(test_fault_injection_hook)
{
	tn_storage *st = NULL;

	tn_alloc_fail_nth(0);
	/* storage_new makes two allocations: the handle, then the bytes. */
	ck_assert_tn_ok(tn_storage_new(cpu, 100, &st));
	ck_assert_uint_eq(tn_alloc_fail_nth(1), 2);
	tn_storage_unref(st);
	ck_assert_tn_error(tn_storage_new(cpu, 100, &st), TN_ENOMEM, "tn_storage_new: out of memory");
	tn_alloc_fail_nth(2);
	ck_assert_tn_error(tn_storage_new(cpu, 100, &st), TN_ENOMEM,
			   "cpu: out of memory: tried to allocate 100 bytes");
	/* The fault fires once, then allocation works again. */
	ck_assert_tn_ok(tn_storage_new(cpu, 100, &st));
	tn_storage_unref(st);
	tn_alloc_fail_nth(0);
}
END_TEST

static Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_alignment_every_size);
	tcase_add_test(tc, test_registry);
	tcase_add_test(tc, test_custom_allocator_is_used_and_kept);
	tcase_add_test(tc, test_fill_modes);
	tcase_add_test(tc, test_environment);
	tcase_add_test(tc, test_large_block_cache);
	tcase_add_test(tc, test_small_block_cache);
	tcase_add_test(tc, test_cache_limit);
	tcase_add_test(tc, test_stats_and_peak);
	tcase_add_test(tc, test_numa_node);
	tcase_add_test(tc, test_fault_injection_hook);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(alloc_suite)
