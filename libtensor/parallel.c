/* SPDX-License-Identifier: MIT */
/*
 * The parallel runtime: the loops' thread count, tn__parallel_for, and the binding of the
 * OpenMP workers of the loops to CPUs (tn_workers_pin), with TN_PIN_NODE, which does it from
 * the environment at the first parallel loop. Binding uses the topology of numa/ (below).
 *
 * libgomp keeps a pool of threads for each thread that opens parallel regions, and without
 * OMP_PROC_BIND hands worker i of every team the same pool thread. So binding each thread of
 * one region of n threads binds the workers of every later region of up to n threads opened
 * by the same thread, which is what libtensor's loops open from then on (tn__num_threads).
 * With OMP_PROC_BIND set, libgomp binds and orders its threads itself; we leave it alone.
 *
 * The regions here read and write only atomics: ThreadSanitizer does not see libgomp's own
 * synchronisation, and a region that captures no variable gives it nothing to misjudge. A
 * TSan build's loops run on pthreads instead (tn__parallel_for), which pin_worker binds.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "internal.h"
#include "parallel.h"

/* CPUs a mask covers: sched_setaffinity(2) accepts masks larger than the kernel's. */
#define MASK_BITS 8192
#define LONG_BITS (8 * sizeof(unsigned long))
#define MASK_LONGS (MASK_BITS / LONG_BITS)

/* Serialises pin and unpin, and guards what they alone read. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
/* The calling thread's mask before the first pin, restored by unpin (under pin_lock; atomic
 * words because the workers of the restoring region read them). */
static _Atomic unsigned long original[MASK_LONGS];
static bool have_original;

/*
 * The binding: how many workers are pinned (0: none) and to which CPUs. Written under
 * pin_lock, read without it by the loops: relaxed is enough, since a loop that starts while
 * another thread changes the binding may use the old count or the new one, and both work.
 */
static _Atomic int pinned;
static _Atomic int pinned_cpu[TN_WORKERS_MAX];

/* A region's orders (a CPU, or -1 for the original mask) and outcome, under pin_lock. */
static _Atomic int want_cpu[TN_WORKERS_MAX];
static _Atomic int region_error;
static _Atomic int region_threads;

/* TN_PIN_NODE: 0 until the first parallel loop has looked at it. */
static _Atomic int autopin_done;

static bool in_original(int cpu)
{
	if (cpu < 0 || cpu >= MASK_BITS)
		return false;
	unsigned long word = atomic_load_explicit(&original[(unsigned)cpu / LONG_BITS],
						  memory_order_relaxed);
	return word >> ((unsigned)cpu % LONG_BITS) & 1;
}

static void set_mask_cpu(unsigned long *mask, int cpu)
{
	memset(mask, 0, MASK_LONGS * sizeof(unsigned long));
	mask[(unsigned)cpu / LONG_BITS] = 1ul << ((unsigned)cpu % LONG_BITS);
}

/* Bind the calling thread to @cpu, or give it the original mask for -1. */
static int bind_self(int cpu)
{
	unsigned long mask[MASK_LONGS];
	int saved = errno, r = 0;

	if (cpu >= 0) {
		set_mask_cpu(mask, cpu);
	} else {
		for (size_t i = 0; i < MASK_LONGS; i++)
			mask[i] = atomic_load_explicit(&original[i], memory_order_relaxed);
	}
	if (sched_setaffinity(0, sizeof(mask), (cpu_set_t *)mask) != 0)
		r = errno ? -errno : -EIO;
	errno = saved;
	return r;
}

static void region_body(int t)
{
	int r = bind_self(atomic_load_explicit(&want_cpu[t], memory_order_relaxed));
	int expected = 0;
	if (r < 0)
		atomic_compare_exchange_strong(&region_error, &expected, r);
}

/* Run want_cpu[0 .. threads) on a team of @threads; return the team's size. The region's
 * end is a barrier, so every worker has bound itself when this returns. */
static int run_region(int threads)
{
	atomic_store(&region_error, 0);
	atomic_store(&region_threads, 1);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
	{
		region_body(omp_get_thread_num());
		if (omp_get_thread_num() == 0)
			atomic_store(&region_threads, omp_get_num_threads());
	}
#else
	(void)threads;
	region_body(0);
#endif
	return atomic_load(&region_threads);
}

static int check_context(const char *fn)
{
#ifdef _OPENMP
	if (omp_in_parallel())
		return tn__error(TN_EBUSY, "%s: called inside an OpenMP parallel region", fn);
	if (omp_get_proc_bind() != omp_proc_bind_false)
		return tn__error(TN_EBUSY,
				 "%s: OpenMP binds its threads itself (OMP_PROC_BIND or OMP_PLACES "
				 "is set)",
				 fn);
#endif
	(void)fn;
	return 0;
}

TN_EXPORT int tn_workers_pin(const int *cpus, int threads)
{
	const char *fn = "tn_workers_pin";
	unsigned long mask[MASK_LONGS];
	int saved = errno, r;

	if (!cpus || threads < 1 || threads > TN_WORKERS_MAX)
		return tn__error(TN_EINVAL, "%s: %s", fn,
				 !cpus ? "NULL cpus" : "threads must be between 1 and 1024");
	if ((r = check_context(fn)) < 0)
		return r;
	pthread_mutex_lock(&pin_lock);
	if (!have_original) {
		if (sched_getaffinity(0, sizeof(mask), (cpu_set_t *)mask) != 0) {
			r = tn__error(TN_EIO, "%s: sched_getaffinity: %s", fn, strerror(errno));
			goto out;
		}
		for (size_t i = 0; i < MASK_LONGS; i++)
			atomic_store_explicit(&original[i], mask[i], memory_order_relaxed);
		have_original = true;
	}
	for (int i = 0; i < threads; i++) {
		if (!in_original(cpus[i])) {
			r = tn__error(TN_EINVAL, "%s: CPU %d (worker %d) is not in this process's "
						 "CPU mask",
				      fn, cpus[i], i);
			goto out;
		}
	}
	/* Workers of an earlier, larger binding that this one does not use get the original
	 * mask back rather than stay on CPUs that are no longer theirs. */
	int before = atomic_load_explicit(&pinned, memory_order_relaxed);
	int team = threads > before ? threads : before;
	for (int i = 0; i < team; i++) {
		int cpu = i < threads ? cpus[i] : -1;
		atomic_store_explicit(&want_cpu[i], cpu, memory_order_relaxed);
	}
	int got = run_region(team);
	int err = atomic_load(&region_error);
	if (err < 0) {
		/* Put every worker back as it was. */
		for (int i = 0; i < team; i++) {
			int old = -1;
			if (i < before)
				old = atomic_load_explicit(&pinned_cpu[i], memory_order_relaxed);
			atomic_store_explicit(&want_cpu[i], old, memory_order_relaxed);
		}
		run_region(team);
		r = tn__error(TN_EIO, "%s: sched_setaffinity: %s", fn, strerror(-err));
		goto out;
	}
	if (got > threads)
		got = threads;
	for (int i = 0; i < got; i++)
		atomic_store_explicit(&pinned_cpu[i], cpus[i], memory_order_relaxed);
	atomic_store_explicit(&pinned, got, memory_order_relaxed);
	r = got;
out:
	pthread_mutex_unlock(&pin_lock);
	errno = saved;
	return r;
}

TN_EXPORT int tn_workers_unpin(void)
{
	const char *fn = "tn_workers_unpin";
	int saved = errno, r = 0;

#ifdef _OPENMP
	if (omp_in_parallel())
		return tn__error(TN_EBUSY, "%s: called inside an OpenMP parallel region", fn);
#endif
	pthread_mutex_lock(&pin_lock);
	int n = atomic_load_explicit(&pinned, memory_order_relaxed);
	if (n > 0) {
		for (int i = 0; i < n; i++)
			atomic_store_explicit(&want_cpu[i], -1, memory_order_relaxed);
		run_region(n);
		int err = atomic_load(&region_error);
		if (err < 0) {
			r = tn__error(TN_EIO, "%s: sched_setaffinity: %s", fn, strerror(-err));
		} else {
			atomic_store_explicit(&pinned, 0, memory_order_relaxed);
			have_original = false;
		}
	}
	pthread_mutex_unlock(&pin_lock);
	errno = saved;
	return r;
}

TN_EXPORT int tn_workers_pinned(int *ret_cpus, int max)
{
	if (max < 0 || (max > 0 && !ret_cpus))
		return tn__error(TN_EINVAL, "tn_workers_pinned: %s",
				 max < 0 ? "negative max" : "NULL ret_cpus");
	pthread_mutex_lock(&pin_lock);
	int n = atomic_load_explicit(&pinned, memory_order_relaxed);
	for (int i = 0; i < n && i < max; i++)
		ret_cpus[i] = atomic_load_explicit(&pinned_cpu[i], memory_order_relaxed);
	pthread_mutex_unlock(&pin_lock);
	return n;
}

/* A pthread worker @tid of a TSan build's loops binds itself to its pinned CPU. */
static TN_UNUSED void pin_worker(int tid)
{
	if (tid > 0 && tid < atomic_load_explicit(&pinned, memory_order_relaxed))
		bind_self(atomic_load_explicit(&pinned_cpu[tid], memory_order_relaxed));
}

/* "all", or a list of nodes and ranges such as "0", "1,3" or "0-3"; 0 when malformed. */
static uint64_t parse_nodes(const char *s, uint64_t all)
{
	uint64_t mask = 0;

	if (!strcmp(s, "all"))
		return all;
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s || a < 0 || a >= TN_NUMA_MAX_NODES)
			return 0;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a || b >= TN_NUMA_MAX_NODES)
				return 0;
		}
		for (long n = a; n <= b; n++)
			mask |= UINT64_C(1) << n;
		if (*end == ',' && end[1])
			end++;
		else if (*end)
			return 0;
		s = end;
	}
	return mask;
}

/* TN_PIN_NODE=nodes: pin as many workers as the nodes have CPUs, or as TN_NUM_THREADS (else
 * OpenMP) allows if fewer, with the plan of tn_topology_pin_plan. Nothing it does may show:
 * on any failure the loops run unpinned and the thread's last error is what it was. */
static void autopin(void)
{
	const char *env = getenv("TN_PIN_NODE");
	char last[1024];
	tn_topology *topo = NULL;
	int cpus[TN_WORKERS_MAX];
	uint64_t all, nodes;
	int saved = errno;

	if (!env || !*env)
		return;
	snprintf(last, sizeof(last), "%s", tn_last_error());
	if (tn_topology_load(&topo) < 0 || tn_topology_nodes(topo, &all) < 0)
		goto out;
	if (!(nodes = parse_nodes(env, all)))
		goto out;
	int threads = 0;
	for (int n = 0; n < TN_NUMA_MAX_NODES; n++) {
		tn_numa_node_info info;
		if ((nodes >> n & 1) && tn_topology_node_info(topo, n, &info) == 0)
			threads += info.cpus;
	}
	int limit = tn__default_threads();
	if (threads > limit)
		threads = limit;
	if (threads > TN_WORKERS_MAX)
		threads = TN_WORKERS_MAX;
	if (threads >= 1 && tn_topology_pin_plan(topo, nodes, threads, cpus) == 0)
		tn_workers_pin(cpus, threads);
out:
	tn_topology_unref(topo);
	tn__error(0, "%s", last);
	errno = saved;
}

/* The number of workers tn_workers_pin bound (the loops then use that many), 0 when none. */
static int pinned_threads(void)
{
	if (TN_UNLIKELY(!atomic_load_explicit(&autopin_done, memory_order_acquire))) {
#ifdef _OPENMP
		/* Inside a region the loop runs serially; the next top-level one will look. */
		if (omp_in_parallel())
			return atomic_load_explicit(&pinned, memory_order_relaxed);
#endif
		/* One thread looks at TN_PIN_NODE; the others' loops meanwhile run as usual. */
		if (!atomic_exchange(&autopin_done, 1))
			autopin();
	}
	return atomic_load_explicit(&pinned, memory_order_relaxed);
}

/* ---- the loops' threads ---- */

static int num_threads_env = -1;

int tn__num_threads(void)
{
	int n = pinned_threads();
	return n > 0 ? n : tn__default_threads();
}

int tn__default_threads(void)
{
	int n = __atomic_load_n(&num_threads_env, __ATOMIC_RELAXED);
	if (n < 0) {
		const char *env = getenv("TN_NUM_THREADS");
		char *end;
		long v = env ? strtol(env, &end, 10) : 0;
		n = (env && *env && !*end && v > 0 && v <= 1024) ? (int)v : 0;
		__atomic_store_n(&num_threads_env, n, __ATOMIC_RELAXED);
	}
#ifdef _OPENMP
	return n > 0 ? n : omp_get_max_threads();
#else
	return 1;
#endif
}


#ifdef TN_TSAN
struct range_chunk {
	tn_range_fn fn;
	void *ctx;
	int64_t begin, end;
	int tid;
};

static void *run_range(void *arg)
{
	struct range_chunk *c = arg;
	pin_worker(c->tid);
	c->fn(c->ctx, c->begin, c->end, c->tid);
	return NULL;
}
#endif

int tn__parallel_for(int64_t n, int threads, tn_range_fn fn, void *ctx)
{
	if (threads > n)
		threads = n > 0 ? (int)n : 1;
#ifdef _OPENMP
	if (threads > 1 && !omp_in_parallel()) {
#ifdef TN_TSAN
		/* ThreadSanitizer does not see libgomp's barriers, so a TSan build runs the
		 * same ranges on pthreads, whose joins it understands: the kernels' accesses
		 * stay checked. A thread that cannot be started runs its range on the caller. */
		struct range_chunk c[64];
		pthread_t th[64];
		bool started[64] = { false };
		if (threads > 64)
			threads = 64;
		int64_t per = (n + threads - 1) / threads;
		for (int t = 0; t < threads; t++) {
			int64_t b = t * per < n ? t * per : n, e = b + per < n ? b + per : n;
			c[t] = (struct range_chunk){ fn, ctx, b, e, t };
			if (t > 0)
				started[t] = pthread_create(&th[t], NULL, run_range, &c[t]) == 0;
		}
		run_range(&c[0]);
		for (int t = 1; t < threads; t++) {
			if (started[t])
				pthread_join(th[t], NULL);
			else
				run_range(&c[t]);
		}
		return threads;
#else
		int used = 1;
#pragma omp parallel num_threads(threads)
		{
			int t = omp_get_thread_num(), nt = omp_get_num_threads();
			int64_t per = (n + nt - 1) / nt;
			int64_t b = (int64_t)t * per < n ? (int64_t)t * per : n;
			int64_t e = b + per < n ? b + per : n;
			if (t == 0)
				used = nt;
			if (b < e)
				fn(ctx, b, e, t);
		}
		return used;
#endif
	}
#endif
	(void)threads;
	fn(ctx, 0, n, 0);
	return 1;
}
