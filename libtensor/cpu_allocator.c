/* SPDX-License-Identifier: MIT */
/*
 * The CPU allocator: 64-byte aligned blocks, a per-thread cache of small blocks, and a cache
 * of large blocks on huge pages, with statistics, a fill mode for debugging and a NUMA node.
 *
 * Why a cache: glibc (like jemalloc and mimalloc) returns a freed 64 MiB block to the kernel,
 * so a loop that makes and drops a tensor of that size pays a page fault for every 4 KiB page
 * on every iteration. Large blocks are therefore mapped here directly, 2 MiB aligned and
 * advised for transparent huge pages, and kept on free (up to a byte limit) for the next
 * allocation of the same rounded size.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define CACHE_SLOTS 256
#define DEFAULT_CACHE_LIMIT ((size_t)1 << 30)

/*
 * Small blocks are cached per thread so that making and dropping a small tensor takes no lock.
 * A thread's cache is released when the thread exits.
 */
#define SMALL_CLASSES 11 /* 64 B, 128 B, ... 64 KiB */
#define SMALL_MIN_SHIFT 6
#define SMALL_MAX ((size_t)64 << 10)
#define SMALL_DEPTH 8
/* ASan finds use-after-free only in memory that really goes back to malloc. */
#if defined(__SANITIZE_ADDRESS__)
#define SMALL_CACHE 0
#else
#define SMALL_CACHE 1
#endif

struct small_cache {
	unsigned count[SMALL_CLASSES];
	void *block[SMALL_CLASSES][SMALL_DEPTH];
};

static void small_release(struct small_cache *sc)
{
	for (unsigned c = 0; c < SMALL_CLASSES; c++) {
		while (sc->count[c])
			free(sc->block[c][--sc->count[c]]);
	}
}

static void small_cache_destroy(void *arg)
{
	small_release(arg);
	free(arg);
}

TN_THREAD_KEY(small_key, struct small_cache, small_cache_destroy);
static _Thread_local struct small_cache *tls_small;

struct cache_entry {
	void *ptr;
	size_t len;
	int node;
};

static struct {
	pthread_mutex_t lock; /* guards the cache, the limit and the node */
	struct cache_entry cache[CACHE_SLOTS];
	unsigned ncached;
	size_t cached_bytes;
	size_t cache_limit;
	int node;
	_Atomic int fill;
	/* Counters are atomics so the small-block path takes no lock. */
	_Atomic uint64_t allocated_bytes, peak_bytes, huge_bytes;
	_Atomic uint64_t num_allocs, num_frees, cache_hits, cache_misses;
} cpu = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cache_limit = DEFAULT_CACHE_LIMIT,
	.node = -1,
};

static pthread_once_t cpu_env_once = PTHREAD_ONCE_INIT;
static bool fill_set_by_api;

static bool parse_size(const char *s, size_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return false;
	*ret = (size_t)(v << shift);
	return true;
}

static void cpu_read_env(void)
{
	int saved = errno;
	const char *fill = getenv("TN_ALLOC_FILL");
	const char *limit = getenv("TN_CPU_CACHE_LIMIT");
	size_t bytes;

	if (fill && !fill_set_by_api) {
		if (strcmp(fill, "zero") == 0)
			atomic_store(&cpu.fill, TN_FILL_ZERO);
		else if (strcmp(fill, "junk") == 0)
			atomic_store(&cpu.fill, TN_FILL_JUNK);
	}
	if (parse_size(limit, &bytes)) {
		pthread_mutex_lock(&cpu.lock);
		cpu.cache_limit = bytes;
		pthread_mutex_unlock(&cpu.lock);
	}
	errno = saved; /* getenv/strtoull must not leak errno to the caller */
}

static void cpu_init(void)
{
	pthread_once(&cpu_env_once, cpu_read_env);
}

/* PyTorch's junk pattern: 0x7fedcba9 is a NaN as float32 and an unlikely integer. */
static void fill_junk(void *p, size_t n)
{
	static const uint32_t word = 0x7fedcba9u;
	unsigned char *b = p;
	size_t i = 0;
	for (; i + 4 <= n; i += 4)
		memcpy(b + i, &word, 4);
	for (; i < n; i++)
		b[i] = ((const unsigned char *)&word)[i & 3];
}

static void stats_add(size_t nbytes)
{
	uint64_t now = atomic_fetch_add_explicit(&cpu.allocated_bytes, nbytes,
						 memory_order_relaxed) + nbytes;
	uint64_t peak = atomic_load_explicit(&cpu.peak_bytes, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak_explicit(&cpu.peak_bytes, &peak, now,
								     memory_order_relaxed,
								     memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&cpu.num_allocs, 1, memory_order_relaxed);
}

static size_t large_len(size_t nbytes)
{
	return (nbytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

/* Map @len bytes (a multiple of 2 MiB) at a 2 MiB boundary, advised for huge pages and bound
 * to @node before anything touches them. */
static void *map_large(size_t len, int node)
{
	size_t span = len + HUGE_PAGE;
	char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	uintptr_t start = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	size_t head = start - (uintptr_t)raw;
	if (head)
		munmap(raw, head);
	if (span - head - len)
		munmap((char *)start + len, span - head - len);
	/* Both are advice: a kernel without THP or without NUMA still gives working memory. */
	madvise((void *)start, len, MADV_HUGEPAGE);
	if (node >= 0)
		tn__numa_bind((void *)start, len, node);
	return (void *)start;
}

/* The size class of a small block: 64 B << class. */
static unsigned small_class(size_t nbytes)
{
	if (nbytes <= ((size_t)1 << SMALL_MIN_SHIFT))
		return 0;
	unsigned long n = (unsigned long)((nbytes - 1) >> SMALL_MIN_SHIFT); /* >= 1 */
	return (unsigned)(sizeof(unsigned long) * CHAR_BIT) - (unsigned)__builtin_clzl(n);
}

/* Small blocks: malloc's (posix_memalign splits and coalesces chunks on every call, ~60 ns),
 * rounded up to their class and kept on free in a per-thread cache, SMALL_DEPTH per class. */
static void *small_alloc(size_t nbytes)
{
	unsigned c = small_class(nbytes);
	struct small_cache *sc = SMALL_CACHE ? tn__thread_state(&small_key, &tls_small) : NULL;
	void *p;

	if (sc && sc->count[c])
		return sc->block[c][--sc->count[c]];
	if (posix_memalign(&p, TN_CPU_ALIGNMENT, SMALL_CACHE ? (size_t)1 << (SMALL_MIN_SHIFT + c)
							    : nbytes))
		return NULL;
	return p;
}

static void small_free(void *ptr, size_t nbytes)
{
	unsigned c = small_class(nbytes);
	struct small_cache *sc = SMALL_CACHE ? tn__thread_state(&small_key, &tls_small) : NULL;

	if (sc && sc->count[c] < SMALL_DEPTH) {
		sc->block[c][sc->count[c]++] = ptr;
		return;
	}
	free(ptr);
}

static void *cpu_alloc(void *ctx, size_t nbytes)
{
	int fill;
	void *p = NULL;
	bool fresh = true;

	(void)ctx;
	cpu_init();
	if (tn__fault_fires())
		return NULL;
	fill = atomic_load_explicit(&cpu.fill, memory_order_relaxed);
	if (nbytes <= SMALL_MAX) {
		if (!(p = small_alloc(nbytes ? nbytes : 1)))
			return NULL;
		fresh = false; /* malloc'd memory may be recycled */
	} else if (nbytes < TN_CPU_LARGE_BLOCK) {
		if (posix_memalign(&p, TN_CPU_ALIGNMENT, nbytes))
			return NULL;
		fresh = false;
	} else {
		if (nbytes > SIZE_MAX - 2 * HUGE_PAGE)
			return NULL;
		size_t len = large_len(nbytes);
		int node;
		pthread_mutex_lock(&cpu.lock);
		node = cpu.node;
		/* Most recently freed first: its pages are the likeliest to be warm in cache. */
		for (unsigned i = cpu.ncached; i-- > 0;) {
			if (cpu.cache[i].len == len && cpu.cache[i].node == node) {
				p = cpu.cache[i].ptr;
				cpu.cache[i] = cpu.cache[--cpu.ncached];
				cpu.cached_bytes -= len;
				break;
			}
		}
		pthread_mutex_unlock(&cpu.lock);
		if (p) {
			fresh = false;
			atomic_fetch_add_explicit(&cpu.cache_hits, 1, memory_order_relaxed);
		} else {
			p = map_large(len, node);
			if (!p)
				return NULL;
			atomic_fetch_add_explicit(&cpu.cache_misses, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&cpu.huge_bytes, len, memory_order_relaxed);
		}
	}
	if (fill == TN_FILL_ZERO && !fresh)
		memset(p, 0, nbytes);
	else if (fill == TN_FILL_JUNK)
		fill_junk(p, nbytes);
	stats_add(nbytes);
	return p;
}

/* Unmap cached blocks until at most @keep bytes are cached; returns the bytes released.
 * Called with cpu.lock held; the munmaps happen after it is dropped. */
static size_t cache_shrink_locked(size_t keep, struct cache_entry *victims, unsigned *nvictims)
{
	size_t released = 0;
	*nvictims = 0;
	/* Oldest first: entries are appended, so index 0 is the coldest. */
	while (cpu.cached_bytes > keep && cpu.ncached) {
		struct cache_entry e = cpu.cache[0];
		memmove(&cpu.cache[0], &cpu.cache[1], (cpu.ncached - 1) * sizeof(cpu.cache[0]));
		cpu.ncached--;
		cpu.cached_bytes -= e.len;
		victims[(*nvictims)++] = e;
		released += e.len;
	}
	return released;
}

static void unmap_victims(const struct cache_entry *victims, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		munmap(victims[i].ptr, victims[i].len);
		atomic_fetch_sub_explicit(&cpu.huge_bytes, victims[i].len, memory_order_relaxed);
	}
}

static void cpu_free(void *ctx, void *ptr, size_t nbytes)
{
	(void)ctx;
	if (!ptr)
		return;
	cpu_init();
	atomic_fetch_sub_explicit(&cpu.allocated_bytes, nbytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&cpu.num_frees, 1, memory_order_relaxed);
	if (atomic_load_explicit(&cpu.fill, memory_order_relaxed) == TN_FILL_JUNK)
		fill_junk(ptr, nbytes);
	if (nbytes <= SMALL_MAX) {
		small_free(ptr, nbytes ? nbytes : 1);
		return;
	}
	if (nbytes < TN_CPU_LARGE_BLOCK) {
		free(ptr);
		return;
	}
	size_t len = large_len(nbytes);
	bool kept = false;
	pthread_mutex_lock(&cpu.lock);
	if (cpu.ncached < CACHE_SLOTS && len <= cpu.cache_limit &&
	    cpu.cached_bytes + len <= cpu.cache_limit) {
		cpu.cache[cpu.ncached++] = (struct cache_entry){ ptr, len, cpu.node };
		cpu.cached_bytes += len;
		kept = true;
	}
	pthread_mutex_unlock(&cpu.lock);
	if (!kept) {
		munmap(ptr, len);
		atomic_fetch_sub_explicit(&cpu.huge_bytes, len, memory_order_relaxed);
	}
}

static const tn_allocator cpu_allocator_struct = {
	.name = "cpu",
	.ctx = NULL,
	.alloc = cpu_alloc,
	.free = cpu_free,
};

TN_EXPORT const tn_allocator *tn_cpu_allocator(void)
{
	return &cpu_allocator_struct;
}

TN_EXPORT int tn_cpu_allocator_set_fill(enum tn_alloc_fill fill)
{
	if ((unsigned)fill > TN_FILL_JUNK)
		return tn__error(TN_EINVAL, "tn_cpu_allocator_set_fill: invalid fill mode %d",
				 (int)fill);
	fill_set_by_api = true;
	cpu_init();
	atomic_store_explicit(&cpu.fill, (int)fill, memory_order_relaxed);
	return 0;
}

TN_EXPORT int tn_cpu_allocator_set_cache_limit(size_t bytes)
{
	struct cache_entry victims[CACHE_SLOTS];
	unsigned n;

	cpu_init();
	pthread_mutex_lock(&cpu.lock);
	cpu.cache_limit = bytes;
	cache_shrink_locked(bytes, victims, &n);
	pthread_mutex_unlock(&cpu.lock);
	unmap_victims(victims, n);
	return 0;
}

TN_EXPORT size_t tn_cpu_allocator_trim(void)
{
	struct cache_entry victims[CACHE_SLOTS];
	unsigned n;
	size_t released;

	cpu_init();
	pthread_mutex_lock(&cpu.lock);
	released = cache_shrink_locked(0, victims, &n);
	pthread_mutex_unlock(&cpu.lock);
	unmap_victims(victims, n);
	if (tls_small) {
		for (unsigned c = 0; c < SMALL_CLASSES; c++)
			released += (size_t)tls_small->count[c] << (SMALL_MIN_SHIFT + c);
		small_release(tls_small);
	}
	return released;
}

TN_EXPORT int tn_cpu_allocator_set_numa_node(int node)
{
	int count = tn__numa_node_count();
	if (node < -1 || node >= count)
		return tn__error(TN_ERANGE,
				 "NUMA node %d does not exist (this machine has nodes 0 to %d)",
				 node, count - 1);
	pthread_mutex_lock(&cpu.lock);
	cpu.node = node;
	pthread_mutex_unlock(&cpu.lock);
	return 0;
}

TN_EXPORT int tn_cpu_allocator_stats(tn_alloc_stats *ret_stats)
{
	tn_alloc_stats s;

	if (!ret_stats)
		return tn__error(TN_EINVAL, "tn_cpu_allocator_stats: NULL ret_stats");
	cpu_init();
	memset(&s, 0, sizeof(s));
	pthread_mutex_lock(&cpu.lock);
	s.cached_bytes = cpu.cached_bytes;
	s.cached_blocks = cpu.ncached;
	s.cache_limit = cpu.cache_limit;
	pthread_mutex_unlock(&cpu.lock);
	s.allocated_bytes = atomic_load(&cpu.allocated_bytes);
	s.num_frees = atomic_load(&cpu.num_frees);
	s.num_allocs = atomic_load(&cpu.num_allocs);
	/* Frees first: allocations only grow, so the difference cannot go negative. */
	s.allocated_blocks = s.num_allocs - s.num_frees;
	s.peak_bytes = atomic_load(&cpu.peak_bytes);
	s.huge_bytes = atomic_load(&cpu.huge_bytes);
	s.cache_hits = atomic_load(&cpu.cache_hits);
	s.cache_misses = atomic_load(&cpu.cache_misses);
	s.live_objects = tn__live_handles();
	*ret_stats = s;
	return 0;
}

TN_EXPORT void tn_cpu_allocator_reset_peak(void)
{
	atomic_store(&cpu.peak_bytes, atomic_load(&cpu.allocated_bytes));
}
