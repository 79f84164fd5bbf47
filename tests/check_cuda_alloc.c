/* SPDX-License-Identifier: MIT */
/*
 * The CUDA caching allocator's bookkeeping (cuda/allocator.c), driven over a HOST backend:
 * "device memory" is malloc'd, events complete when a test says so, a capacity makes the
 * device run out, and every backend call is counted. This is a unit test of the core's
 * policy and accounting (rounding, pools, splitting and merging, per-stream caching,
 * record_stream, the out-of-memory path, statistics, threads), not of CUDA: the GPU tests
 * (tests/check_cuda.c) exercise the real backend. It runs without a GPU, wherever the
 * library was built with CUDA.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "testutil.h"
#include "backend.h"

extern const struct tn__device_ops tn__cuda_device_ops;

#include "allocator.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- the host backend ---- */

struct hevent {
	bool done;
	bool recorded;
	void *stream;
	struct hevent *next; /* all events, for "complete the stream" */
};

struct hseg {
	char *ptr;
	size_t size;
};

struct host {
	pthread_mutex_t lock;
	size_t capacity; /* the "device" memory; malloc past it is TN_ENOMEM */
	size_t used;
	int fail_malloc; /* a code the next malloc returns (0: none) */
	int fail_event_create;
	bool auto_complete; /* events are done as soon as recorded */
	struct hseg segs[4096];
	int nsegs;
	struct hevent *events;
	int nmalloc, nfree, nmeminfo, ncreate, nrecord, nquery, nsync, ndestroy;
	size_t last_malloc;
};

static int h_malloc(void *ctx, int device, size_t bytes, void **ret)
{
	struct host *h = ctx;
	ck_assert_int_ge(device, 0);
	pthread_mutex_lock(&h->lock);
	int r = 0;
	if (h->fail_malloc) {
		r = tn__error(h->fail_malloc, "cudaMalloc: CUDA error: injected");
		h->fail_malloc = 0;
	} else if (h->used + bytes > h->capacity || h->nsegs == (int)TN_ARRAY_SIZE(h->segs)) {
		r = tn__error(TN_ENOMEM, "cudaMalloc: CUDA error: cudaErrorMemoryAllocation");
	} else {
		/* Never touched: pages are only reserved, so large "segments" cost nothing. */
		char *p = aligned_alloc(4096, bytes);
		ck_assert_ptr_nonnull(p);
		h->segs[h->nsegs++] = (struct hseg){ p, bytes };
		h->used += bytes;
		h->nmalloc++;
		h->last_malloc = bytes;
		*ret = p;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int h_free(void *ctx, int device, void *ptr)
{
	struct host *h = ctx;
	(void)device;
	pthread_mutex_lock(&h->lock);
	int i = 0;
	while (i < h->nsegs && h->segs[i].ptr != ptr)
		i++;
	ck_assert_msg(i < h->nsegs, "backend free of %p: not a segment", ptr);
	h->used -= h->segs[i].size;
	h->segs[i] = h->segs[--h->nsegs];
	h->nfree++;
	pthread_mutex_unlock(&h->lock);
	free(ptr);
	return 0;
}

static int h_mem_info(void *ctx, int device, size_t *ret_free, size_t *ret_total)
{
	struct host *h = ctx;
	(void)device;
	pthread_mutex_lock(&h->lock);
	h->nmeminfo++;
	*ret_free = h->capacity - h->used;
	*ret_total = h->capacity;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static int h_event_create(void *ctx, int device, void **ret)
{
	struct host *h = ctx;
	(void)device;
	pthread_mutex_lock(&h->lock);
	int r = 0;
	if (h->fail_event_create) {
		r = tn__error(h->fail_event_create, "cudaEventCreateWithFlags: injected");
	} else {
		struct hevent *e = calloc(1, sizeof(*e));
		ck_assert_ptr_nonnull(e);
		e->next = h->events;
		h->events = e;
		h->ncreate++;
		*ret = e;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int h_event_record(void *ctx, void *event, void *stream)
{
	struct host *h = ctx;
	struct hevent *e = event;
	pthread_mutex_lock(&h->lock);
	e->recorded = true;
	e->stream = stream;
	e->done = h->auto_complete;
	h->nrecord++;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static int h_event_query(void *ctx, void *event)
{
	struct host *h = ctx;
	struct hevent *e = event;
	pthread_mutex_lock(&h->lock);
	h->nquery++;
	int r = e->done;
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int h_event_synchronize(void *ctx, void *event)
{
	struct host *h = ctx;
	struct hevent *e = event;
	pthread_mutex_lock(&h->lock);
	h->nsync++;
	e->done = true; /* "waited until the stream got there" */
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static void h_event_destroy(void *ctx, void *event)
{
	struct host *h = ctx;
	pthread_mutex_lock(&h->lock);
	struct hevent **pe = &h->events;
	while (*pe && *pe != event)
		pe = &(*pe)->next;
	ck_assert_ptr_nonnull(*pe);
	*pe = ((struct hevent *)event)->next;
	h->ndestroy++;
	pthread_mutex_unlock(&h->lock);
	free(event);
}

/* The work queued on @stream so far is done: every event recorded on it completes. */
static void complete_stream(struct host *h, void *stream)
{
	pthread_mutex_lock(&h->lock);
	for (struct hevent *e = h->events; e; e = e->next)
		if (e->recorded && e->stream == stream)
			e->done = true;
	pthread_mutex_unlock(&h->lock);
}

static struct host host;
static struct tn__cca *cca;

#define S1 ((void *)0x1000)
#define S2 ((void *)0x2000)
#define S3 ((void *)0x3000)

static void setup_devices(int ndevices)
{
	memset(&host, 0, sizeof(host));
	pthread_mutex_init(&host.lock, NULL);
	host.capacity = (size_t)1 << 40;
	struct tn__cuda_backend be = {
		.ctx = &host,
		.malloc = h_malloc,
		.free = h_free,
		.mem_info = h_mem_info,
		.event_create = h_event_create,
		.event_record = h_event_record,
		.event_query = h_event_query,
		.event_synchronize = h_event_synchronize,
		.event_destroy = h_event_destroy,
	};
	ck_assert_tn_ok(tn__cca_create(&be, ndevices, &cca));
}

static void setup(void)
{
	setup_devices(1);
}

/* Everything consistent; destroy gives every segment and event back. */
static void teardown(void)
{
	ck_assert_tn_ok(tn__cca_check(cca));
	tn__cca_destroy(cca);
	cca = NULL;
	ck_assert_int_eq(host.nsegs, 0);
	ck_assert_uint_eq(host.used, 0);
	ck_assert_ptr_null(host.events);
	ck_assert_int_eq(host.ncreate, host.ndestroy);
}

static tn_cuda_memory_stats stats(int device)
{
	tn_cuda_memory_stats s;
	ck_assert_tn_ok(tn__cca_stats(cca, device, &s));
	return s;
}

static void *alloc_on(int device, size_t size, void *stream)
{
	void *p = NULL;
	ck_assert_tn_ok(tn__cca_malloc(cca, device, size, stream, &p));
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % 512, 0);
	ck_assert_tn_ok(tn__cca_check(cca));
	return p;
}

static void *alloc(size_t size, void *stream)
{
	return alloc_on(0, size, stream);
}

static void release(void *p)
{
	ck_assert_tn_ok(tn__cca_free(cca, p));
	ck_assert_tn_ok(tn__cca_check(cca));
}

static size_t block_size(void *p)
{
	size_t size;
	ck_assert_tn_ok(tn__cca_block_info(cca, p, &size, NULL, NULL));
	return size;
}

/* ---- rounding and pools ---- */

START_TEST(test_rounding)
{
	static const struct {
		size_t ask, got;
	} cases[] = {
		{ 1, 512 },	{ 511, 512 },	 { 512, 512 },	     { 513, 1024 },
		{ 1000, 1024 }, { 4096, 4096 },	 { 4097, 4608 },     { MiB - 1, MiB },
		{ MiB, MiB },	{ MiB + 1, MiB + 512 }, { 5 * MiB + 3, 5 * MiB + 512 },
	};
	uint64_t requested = 0, allocated = 0;
	void *ptrs[TN_ARRAY_SIZE(cases)];
	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++) {
		ptrs[i] = alloc(cases[i].ask, S1);
		size_t size, req;
		int dev;
		ck_assert_tn_ok(tn__cca_block_info(cca, ptrs[i], &size, &req, &dev));
		ck_assert_uint_eq(size, cases[i].got);
		ck_assert_uint_eq(req, cases[i].ask);
		ck_assert_int_eq(dev, 0);
		requested += cases[i].ask;
		allocated += cases[i].got;
	}
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.requested_bytes, requested);
	ck_assert_uint_eq(s.allocated_bytes, allocated);
	ck_assert_uint_eq(s.allocated_blocks, TN_ARRAY_SIZE(cases));
	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++)
		release(ptrs[i]);
	s = stats(0);
	ck_assert_uint_eq(s.requested_bytes, 0);
	ck_assert_uint_eq(s.allocated_bytes, 0);
	ck_assert_uint_eq(s.active_bytes, 0);

	/* Size 0 is NULL, freeing NULL nothing. */
	void *p = (void *)1;
	ck_assert_tn_ok(tn__cca_malloc(cca, 0, 0, S1, &p));
	ck_assert_ptr_null(p);
	ck_assert_tn_ok(tn__cca_free(cca, NULL));
}
END_TEST

START_TEST(test_segment_sizes)
{
	static const struct {
		size_t ask, segment;
		bool small;
	} cases[] = {
		{ 1, 2 * MiB, true },
		{ MiB, 2 * MiB, true },
		{ MiB + 1, 20 * MiB, false },
		{ 10 * MiB - 512, 20 * MiB, false },
		{ 10 * MiB, 10 * MiB, false },
		{ 11 * MiB + 1, 12 * MiB, false },
		{ 100 * MiB + 5, 102 * MiB, false },
	};
	uint64_t small = 0, large = 0;
	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++) {
		/* A stream of its own each, so no request is served from an earlier segment. */
		void *stream = (void *)(uintptr_t)(0x10000 * (i + 1));
		int before = host.nmalloc;
		alloc(cases[i].ask, stream);
		ck_assert_int_eq(host.nmalloc, before + 1);
		ck_assert_uint_eq(host.last_malloc, cases[i].segment);
		*(cases[i].small ? &small : &large) += cases[i].segment;
		tn_cuda_memory_stats s = stats(0);
		ck_assert_uint_eq(s.small_pool_reserved, small);
		ck_assert_uint_eq(s.large_pool_reserved, large);
		ck_assert_uint_eq(s.reserved_bytes, small + large);
		ck_assert_uint_eq(s.segments, i + 1);
		ck_assert_uint_eq(s.num_device_mallocs, i + 1);
	}
	/* Blocks are live: empty_cache gives nothing back; destroy frees them all. */
	ck_assert_int_eq(tn__cca_empty_cache(cca), 0);
	ck_assert_int_eq(host.nfree, 0);
}
END_TEST

/* ---- reuse, splitting, merging ---- */

START_TEST(test_reuse)
{
	void *a = alloc(1000, S1);
	release(a);
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.allocated_bytes, 0);
	ck_assert_uint_eq(s.reserved_bytes, 2 * MiB);
	/* The freed block merged back into the whole segment: inactive_split is 0. */
	ck_assert_uint_eq(s.inactive_split_bytes, 0);
	void *b = alloc(1000, S1);
	ck_assert_ptr_eq(a, b);
	void *c = alloc(3 * MiB, S1);
	release(c);
	void *d = alloc(5 * MiB, S1); /* the cached 20 MiB segment again */
	ck_assert_ptr_eq(c, d);
	ck_assert_int_eq(host.nmalloc, 2);
	s = stats(0);
	ck_assert_uint_eq(s.num_device_mallocs, 2);
	ck_assert_uint_eq(s.num_allocs, 4);
	ck_assert_uint_eq(s.num_frees, 2);
	release(b);
	release(d);
}
END_TEST

START_TEST(test_split_and_merge_small)
{
	/* Four quarters tile a 2 MiB segment; the last takes the exact remainder. */
	char *q[4];
	for (int i = 0; i < 4; i++)
		q[i] = alloc(512 * KiB, S1);
	for (int i = 1; i < 4; i++)
		ck_assert_ptr_eq(q[i], q[0] + (size_t)i * 512 * KiB);
	ck_assert_int_eq(host.nmalloc, 1);
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.inactive_split_bytes, 0);
	ck_assert_uint_eq(s.allocated_bytes, 2 * MiB);

	release(q[1]);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 512 * KiB);
	release(q[2]); /* merges with q[1] */
	ck_assert_uint_eq(stats(0).inactive_split_bytes, MiB);
	/* Best fit: the merged 1 MiB hole, at q[1]. */
	char *m = alloc(MiB, S1);
	ck_assert_ptr_eq(m, q[1]);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 0);
	release(m);

	/* Free the ends, then the middle: one block again, no longer split. */
	release(q[0]);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 1536 * KiB);
	release(q[3]);
	s = stats(0);
	ck_assert_uint_eq(s.inactive_split_bytes, 0);
	ck_assert_uint_eq(s.allocated_bytes, 0);
	ck_assert_uint_eq(s.reserved_bytes, 2 * MiB);
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(2 * MiB));
	ck_assert_int_eq(host.nfree, 1);

	/* A remainder of exactly 512 bytes is split off in the small pool. */
	char *a = alloc(MiB, S1), *b = alloc(MiB - 512, S1), *c = alloc(512, S1);
	ck_assert_ptr_eq(b, a + MiB);
	ck_assert_ptr_eq(c, a + 2 * MiB - 512);
	ck_assert_int_eq(host.nmalloc, 2);
	/* Free in the order middle, first, last. */
	release(b);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, MiB - 512);
	release(a);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 2 * MiB - 512);
	release(c);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 0);
}
END_TEST

START_TEST(test_split_large)
{
	/* 19 MiB of a 20 MiB segment: the 1 MiB remainder is not more than 1 MiB, so the whole
	 * segment is the block. */
	void *a = alloc(19 * MiB, S1);
	ck_assert_uint_eq(block_size(a), 20 * MiB);
	ck_assert_uint_eq(stats(0).allocated_bytes, 20 * MiB);
	ck_assert_uint_eq(stats(0).requested_bytes, 19 * MiB);
	release(a);
	/* 2 MiB: split, 18 MiB left over and cached as an inactive split. */
	char *b = alloc(2 * MiB, S1);
	ck_assert_ptr_eq(b, a);
	ck_assert_uint_eq(block_size(b), 2 * MiB);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 18 * MiB);
	char *c = alloc(3 * MiB, S1);
	ck_assert_ptr_eq(c, b + 2 * MiB);
	char *d = alloc(15 * MiB - 512, S1); /* leaves 512 bytes: not split off */
	ck_assert_ptr_eq(d, c + 3 * MiB);
	ck_assert_uint_eq(block_size(d), 15 * MiB);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 0);
	ck_assert_int_eq(host.nmalloc, 1);
	release(c);
	release(b);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 5 * MiB);
	release(d);
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.inactive_split_bytes, 0);
	ck_assert_uint_eq(s.reserved_bytes, 20 * MiB);
	ck_assert_uint_eq(s.segments, 1);
}
END_TEST

START_TEST(test_max_split)
{
	/* Default (256 MiB): a 300 MiB cached block is not split for a 100 MiB request. */
	void *big = alloc(300 * MiB, S1);
	release(big);
	void *p = alloc(100 * MiB, S1);
	ck_assert_ptr_ne(p, big);
	ck_assert_int_eq(host.nmalloc, 2);
	/* ... but serves a 290 MiB one whole (less than 20 MiB more than asked). */
	void *q = alloc(290 * MiB, S1);
	ck_assert_ptr_eq(q, big);
	ck_assert_uint_eq(block_size(q), 300 * MiB);
	release(q);
	/* ... and not a 270 MiB one (30 MiB more). */
	void *r = alloc(270 * MiB, S1);
	ck_assert_ptr_ne(r, big);
	ck_assert_int_eq(host.nmalloc, 3);
	release(r);
	release(p);

	/* A 100 MiB block may be split for a 30 MiB request by default (not oversize) ... */
	void *s = alloc(30 * MiB, S1);
	ck_assert_ptr_eq(s, p);
	ck_assert_uint_eq(block_size(s), 30 * MiB);
	release(s);
	/* ... not once max_split is 64 MiB. */
	ck_assert_tn_error_has(tn__cca_set_max_split(cca, 20 * MiB), TN_EINVAL, "max_split");
	ck_assert_tn_ok(tn__cca_set_max_split(cca, 64 * MiB));
	int before = host.nmalloc;
	void *t = alloc(30 * MiB, S1);
	ck_assert_ptr_ne(t, p);
	ck_assert_int_eq(host.nmalloc, before + 1);
	/* An oversize request is never split off a bigger block: 90 MiB takes the 100 MiB
	 * block whole. */
	void *u = alloc(90 * MiB, S1);
	ck_assert_ptr_eq(u, p);
	ck_assert_uint_eq(block_size(u), 100 * MiB);
	release(u);
	release(t);
}
END_TEST

/* ---- streams ---- */

START_TEST(test_per_stream_cache)
{
	void *a = alloc(4096, S1);
	release(a);
	/* Cached for S1: S2 gets a segment of its own. */
	void *b = alloc(4096, S2);
	ck_assert_int_eq(host.nmalloc, 2);
	ck_assert_ptr_ne(b, a);
	void *c = alloc(4096, S1);
	ck_assert_ptr_eq(c, a);
	ck_assert_int_eq(host.nmalloc, 2);
	/* Large pool too. */
	void *d = alloc(5 * MiB, S2);
	release(d);
	void *e = alloc(5 * MiB, S3);
	ck_assert_ptr_ne(e, d);
	ck_assert_int_eq(host.nmalloc, 4);
	release(b);
	release(c);
	release(e);
	ck_assert_uint_eq(stats(0).segments, 4);
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(2 * 2 * MiB + 2 * 20 * MiB));
	ck_assert_uint_eq(stats(0).segments, 0);
}
END_TEST

START_TEST(test_record_stream)
{
	char *a = alloc(1000, S1);
	ck_assert_tn_ok(tn__cca_record_stream(cca, a, S2));
	ck_assert_tn_ok(tn__cca_record_stream(cca, a, S2)); /* once per stream */
	ck_assert_tn_ok(tn__cca_record_stream(cca, a, S1)); /* its own: nothing to wait for */
	release(a);
	ck_assert_int_eq(host.ncreate, 1);
	ck_assert_int_eq(host.nrecord, 1);
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.allocated_bytes, 0);
	ck_assert_uint_eq(s.active_bytes, 1024);
	ck_assert_uint_eq(s.requested_bytes, 1000);

	/* Not reused while S2 may still use it. */
	char *b = alloc(1000, S1);
	ck_assert_ptr_eq(b, a + 1024);
	ck_assert_int_ge(host.nquery, 1);
	complete_stream(&host, S2);
	/* Polled at the next allocation: a is free again and the best fit. */
	char *c = alloc(1000, S1);
	ck_assert_ptr_eq(c, a);
	s = stats(0);
	ck_assert_uint_eq(s.active_bytes, 2048);
	ck_assert_uint_eq(s.allocated_bytes, 2048);

	/* The event is reused; empty_cache waits for pending ones (event_synchronize). */
	ck_assert_tn_ok(tn__cca_record_stream(cca, c, S3));
	release(c);
	ck_assert_int_eq(host.ncreate, 1);
	ck_assert_int_eq(host.nrecord, 2);
	release(b);
	ck_assert_uint_eq(stats(0).active_bytes, 1024);
	int syncs = host.nsync;
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(2 * MiB));
	ck_assert_int_eq(host.nsync, syncs + 1);
	s = stats(0);
	ck_assert_uint_eq(s.active_bytes, 0);
	ck_assert_uint_eq(s.reserved_bytes, 0);

	/* Events on one stream complete in order: after a pending one, later ones of that
	 * stream are not queried. */
	char *x = alloc(512, S1), *y = alloc(512, S1), *z = alloc(512, S1);
	ck_assert_tn_ok(tn__cca_record_stream(cca, x, S2));
	ck_assert_tn_ok(tn__cca_record_stream(cca, y, S2));
	ck_assert_tn_ok(tn__cca_record_stream(cca, z, S3));
	release(x);
	release(y);
	release(z);
	int queries = host.nquery;
	void *w = alloc(512, S1);
	ck_assert_int_eq(host.nquery, queries + 2); /* x's (S2) and z's (S3), not y's */
	ck_assert_ptr_ne(w, x);
	ck_assert_ptr_ne(w, y);
	ck_assert_ptr_ne(w, z);
	release(w);
}
END_TEST

START_TEST(test_event_failure)
{
	/* One spare event in the pool, so the first recording below succeeds. */
	void *x = alloc(1000, S1);
	ck_assert_tn_ok(tn__cca_record_stream(cca, x, S2));
	release(x);
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(2 * MiB));
	void *a = alloc(1000, S1);
	ck_assert_tn_ok(tn__cca_record_stream(cca, a, S2));
	ck_assert_tn_ok(tn__cca_record_stream(cca, a, S3));
	host.fail_event_create = TN_EIO;
	/* No event: the block is kept out of reuse, the error reported. */
	ck_assert_tn_error_has(tn__cca_free(cca, a), TN_EIO, "injected");
	ck_assert_tn_ok(tn__cca_check(cca));
	host.fail_event_create = 0;
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.allocated_bytes, 0);
	ck_assert_uint_eq(s.active_bytes, 1024);
	/* The event on S2 completes; still no event for S3: never reused. */
	complete_stream(&host, S2);
	void *b = alloc(1000, S1);
	ck_assert_ptr_ne(b, a);
	release(b);
	ck_assert_uint_eq(stats(0).active_bytes, 1024);
	/* The segment is in use: empty_cache keeps it; destroy frees it (teardown checks). */
	ck_assert_int_eq(tn__cca_empty_cache(cca), 0);
	ck_assert_int_eq(host.nsegs, 1);
}
END_TEST

/* ---- out of memory ---- */

START_TEST(test_oom_limit)
{
	host.capacity = 100 * MiB;
	ck_assert_tn_ok(tn__cca_set_limit(cca, 0, 50 * MiB));
	ck_assert_uint_eq(stats(0).memory_limit, 50 * MiB);
	void *a = alloc(30 * MiB, S1);
	void *small = alloc(1000, S1);
	release(small);
	release(a);
	/* 40 MiB: 30 MiB + 2 MiB cached, a 40 MiB segment would pass the limit. The large pool's
	 * cache goes, and the retry fits (42 MiB). */
	char *b = alloc(40 * MiB, S1);
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.num_alloc_retries, 1);
	ck_assert_uint_eq(s.num_ooms, 0);
	ck_assert_uint_eq(s.num_device_frees, 1);
	ck_assert_uint_eq(s.reserved_bytes, 42 * MiB);
	ck_assert_uint_eq(s.small_pool_reserved, 2 * MiB);

	/* 20 MiB more: the large pool has nothing cached, the small one 2 MiB: released, still
	 * 62 MiB > 50 MiB: out of memory, with the figures. */
	void *p = (void *)1;
	ck_assert_tn_error(tn__cca_malloc(cca, 0, 20 * MiB, S1, &p), TN_ENOMEM,
			   "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
			   "capacity of 100.00 MiB of which 60.00 MiB is free. 50.00 MiB allowed; "
			   "Of the allocated memory 40.00 MiB is allocated by libtensor, and "
			   "0 bytes is reserved by libtensor but unallocated.");
	ck_assert_ptr_eq(p, (void *)1);
	ck_assert_tn_ok(tn__cca_check(cca));
	s = stats(0);
	ck_assert_uint_eq(s.num_ooms, 1);
	ck_assert_uint_eq(s.num_alloc_retries, 2);
	ck_assert_uint_eq(s.reserved_bytes, 40 * MiB);
	ck_assert_uint_eq(s.small_pool_reserved, 0);
	ck_assert_uint_eq(host.used, 40 * MiB);

	/* Still usable: from the cached 40 MiB block once freed. */
	release(b);
	char *c = alloc(20 * MiB, S1);
	ck_assert_ptr_eq(c, b);
	ck_assert_uint_eq(stats(0).inactive_split_bytes, 20 * MiB);
	release(c);
	/* No limit: 45 MiB more fits on the device. */
	ck_assert_tn_ok(tn__cca_set_limit(cca, 0, 0));
	void *d = alloc(45 * MiB, S1);
	ck_assert_uint_eq(stats(0).reserved_bytes, 86 * MiB);
	release(d);
}
END_TEST

START_TEST(test_oom_device)
{
	host.capacity = 100 * MiB;
	void *a = alloc(60 * MiB, S1);
	void *s1 = alloc(1000, S2);
	release(s1); /* a cached small segment of another stream */
	char *b = alloc(3 * MiB, S1);
	/* The device has 18 MiB left: 50 MiB fails after releasing everything unused (the small
	 * segment; the large one is partly in use). */
	void *p = NULL;
	ck_assert_tn_error(tn__cca_malloc(cca, 0, 50 * MiB, S1, &p), TN_ENOMEM,
			   "CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total "
			   "capacity of 100.00 MiB of which 20.00 MiB is free. Of the allocated "
			   "memory 63.00 MiB is allocated by libtensor, and 17.00 MiB is reserved "
			   "by libtensor but unallocated.");
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.num_ooms, 1);
	ck_assert_uint_eq(s.reserved_bytes, 80 * MiB);
	ck_assert_uint_eq(s.segments, 2);
	ck_assert_uint_eq(host.used, 80 * MiB);
	ck_assert_uint_eq(host.nmalloc, host.nfree + 2);
	/* A pending block counts as releasable once its event is waited for. */
	ck_assert_tn_ok(tn__cca_record_stream(cca, b, S3));
	release(b);
	void *c = alloc(30 * MiB, S1); /* 20 MiB segment released after the wait, 30 fits */
	s = stats(0);
	ck_assert_uint_eq(s.num_ooms, 1);
	ck_assert_uint_eq(s.reserved_bytes, 90 * MiB);
	ck_assert_uint_eq(s.active_bytes, 90 * MiB);

	/* A backend error other than out-of-memory is passed on at once, no retry. */
	host.fail_malloc = TN_EIO;
	uint64_t retries = s.num_alloc_retries;
	ck_assert_tn_error_has(tn__cca_malloc(cca, 0, 1000, S3, &p), TN_EIO, "injected");
	s = stats(0);
	ck_assert_uint_eq(s.num_alloc_retries, retries);
	ck_assert_uint_eq(s.num_ooms, 1);
	/* An impossible size is an out-of-memory error too, never an overflow. */
	ck_assert_tn_error_has(tn__cca_malloc(cca, 0, SIZE_MAX - 100, S1, &p), TN_ENOMEM,
			       "CUDA out of memory. Tried to allocate ");
	ck_assert_uint_eq(stats(0).num_ooms, 2);
	release(a);
	release(c);
}
END_TEST

START_TEST(test_host_fault_injection)
{
	/* Every host allocation of the core failing in turn: a clean TN_ENOMEM or success (the
	 * remainder record of a split may be skipped: the whole block is handed out), and the
	 * bookkeeping consistent. */
	bool done = false;
	for (uint64_t n = 1; n < 40 && !done; n++) {
		tn_alloc_fail_nth(n);
		void *p[4] = { NULL };
		int r = 0;
		for (int i = 0; i < 4 && !r; i++) {
			r = tn__cca_malloc(cca, 0, (size_t)(i + 1) * 3000, S1, &p[i]);
			ck_assert_int_eq(tn__cca_check(cca), 0);
		}
		if (!r) {
			r = tn__cca_record_stream(cca, p[0], S2);
			if (!r)
				r = tn__cca_free(cca, p[0]), p[0] = NULL;
		}
		uint64_t attempts = tn_alloc_fail_nth(0);
		ck_assert(r == 0 || r == TN_ENOMEM);
		if (r == TN_ENOMEM)
			ck_assert_str_eq(tn_last_error(),
					 "CUDA caching allocator: out of host memory");
		if (r == 0 && attempts < n)
			done = true; /* the fault did not fire: every step ran */
		for (int i = 0; i < 4; i++)
			if (p[i])
				release(p[i]);
		ck_assert_int_ge(tn__cca_empty_cache(cca), 0);
		ck_assert_uint_eq(stats(0).allocated_bytes, 0);
	}
	ck_assert(done);
}
END_TEST

/* ---- statistics ---- */

START_TEST(test_stats_sequence)
{
	char *a = alloc(100, S1);         /* small segment 2 MiB, block 512 */
	char *b = alloc(3 * MiB + 1, S1); /* large segment 20 MiB, block 3 MiB + 512 */
	char *c = alloc(700 * KiB, S1);   /* same small segment */
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.allocated_bytes, 512 + 3 * MiB + 512 + 700 * KiB);
	ck_assert_uint_eq(s.allocated_peak, s.allocated_bytes);
	ck_assert_uint_eq(s.reserved_bytes, 22 * MiB);
	ck_assert_uint_eq(s.reserved_peak, 22 * MiB);
	ck_assert_uint_eq(s.active_bytes, s.allocated_bytes);
	ck_assert_uint_eq(s.requested_bytes, 100 + 3 * MiB + 1 + 700 * KiB);
	ck_assert_uint_eq(s.inactive_split_bytes, (2 * MiB - 512 - 700 * KiB) + (17 * MiB - 512));
	ck_assert_uint_eq(s.allocated_blocks, 3);
	ck_assert_uint_eq(s.segments, 2);
	ck_assert_uint_eq(s.small_pool_reserved, 2 * MiB);
	ck_assert_uint_eq(s.large_pool_reserved, 20 * MiB);
	ck_assert_uint_eq(s.num_allocs, 3);
	ck_assert_uint_eq(s.num_frees, 0);
	ck_assert_uint_eq(s.num_device_mallocs, 2);
	ck_assert_uint_eq(s.num_device_frees, 0);
	ck_assert_uint_eq(s.memory_limit, 0);

	release(b);
	release(a);
	s = stats(0);
	ck_assert_uint_eq(s.allocated_bytes, 700 * KiB);
	ck_assert_uint_eq(s.allocated_peak, 512 + 3 * MiB + 512 + 700 * KiB);
	ck_assert_uint_eq(s.inactive_split_bytes, 2 * MiB - 700 * KiB);
	ck_assert_uint_eq(s.num_frees, 2);
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(20 * MiB));
	ck_assert_tn_ok(tn__cca_reset_peak(cca, 0));
	s = stats(0);
	ck_assert_uint_eq(s.allocated_peak, 700 * KiB);
	ck_assert_uint_eq(s.reserved_peak, 2 * MiB);
	ck_assert_uint_eq(s.reserved_bytes, 2 * MiB);
	ck_assert_uint_eq(s.num_device_frees, 1);
	release(c);
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(2 * MiB));
	s = stats(0);
	ck_assert_uint_eq(s.reserved_bytes, 0);
	ck_assert_uint_eq(s.reserved_peak, 2 * MiB);
	ck_assert_uint_eq(s.num_device_mallocs, s.num_device_frees);
}
END_TEST

START_TEST(test_devices)
{
	tn__cca_destroy(cca);
	setup_devices(2);
	char *a = alloc_on(0, 1000, S1);
	char *b = alloc_on(1, 1000, S1);
	size_t size;
	int dev;
	ck_assert_tn_ok(tn__cca_block_info(cca, b, &size, NULL, &dev));
	ck_assert_int_eq(dev, 1);
	ck_assert_uint_eq(stats(0).reserved_bytes, 2 * MiB);
	ck_assert_uint_eq(stats(1).reserved_bytes, 2 * MiB);
	ck_assert_tn_ok(tn__cca_set_limit(cca, 1, 3 * MiB));
	void *p;
	ck_assert_tn_error_has(tn__cca_malloc(cca, 1, 2 * MiB, S1, &p), TN_ENOMEM, "GPU 1 has");
	ck_assert_uint_eq(stats(0).num_ooms, 0);
	ck_assert_uint_eq(stats(1).num_ooms, 1);
	release(a);
	release(b);
	/* empty_cache covers every device. */
	ck_assert_int_eq(tn__cca_empty_cache(cca), (int64_t)(4 * MiB));
	ck_assert_tn_error(tn__cca_malloc(cca, 2, 1, S1, &p), TN_ENODEV,
			   "CUDA device 2 does not exist (2 devices)");
	tn_cuda_memory_stats s;
	ck_assert_tn_error_has(tn__cca_stats(cca, -1, &s), TN_ENODEV, "device -1");
}
END_TEST

START_TEST(test_bad_pointers)
{
	int x;
	ck_assert_tn_error_has(tn__cca_free(cca, &x), TN_EINVAL, "is not a live block");
	char *a = alloc(1000, S1);
	ck_assert_tn_error_has(tn__cca_free(cca, a + 512), TN_EINVAL, "is not a live block");
	ck_assert_tn_error_has(tn__cca_record_stream(cca, a + 512, S2), TN_EINVAL,
			       "is not a live block");
	release(a);
	ck_assert_tn_error_has(tn__cca_free(cca, a), TN_EINVAL, "freed already");
	ck_assert_tn_error_has(tn__cca_record_stream(cca, a, S2), TN_EINVAL,
			       "is not a live block");
	ck_assert_tn_error_has(tn__cca_block_info(cca, a, NULL, NULL, NULL), TN_EINVAL,
			       "is not a live block");
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.num_frees, 1);
	ck_assert_uint_eq(s.allocated_blocks, 0);
}
END_TEST

/* ---- threads ---- */

struct worker {
	unsigned seed;
	int iterations;
	int failures;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	void *live[16] = { NULL };
	void *streams[2] = { S1, S2 };
	for (int i = 0; i < w->iterations; i++) {
		unsigned r = (unsigned)rand_r(&w->seed);
		int slot = (int)(r % 16);
		if (live[slot]) {
			if (r & 0x100 && tn__cca_record_stream(cca, live[slot], S3))
				w->failures++;
			if (tn__cca_free(cca, live[slot]))
				w->failures++;
			live[slot] = NULL;
			continue;
		}
		size_t size, big = (size_t)rand_r(&w->seed);
		switch ((r >> 4) % 4) {
		case 0:
			size = 1 + big % 4096;
			break;
		case 1:
			size = 1 + big % MiB;
			break;
		case 2:
			size = MiB + big % (9 * MiB);
			break;
		default:
			size = 10 * MiB + big % (20 * MiB);
			break;
		}
		if (tn__cca_malloc(cca, 0, size, streams[(r >> 12) & 1], &live[slot]))
			w->failures++;
		if ((r & 0xff) == 7 && tn__cca_empty_cache(cca) < 0)
			w->failures++;
	}
	for (int i = 0; i < 16; i++)
		if (live[i] && tn__cca_free(cca, live[i]))
			w->failures++;
	return NULL;
}

START_TEST(test_threads)
{
	host.auto_complete = true;
	enum { NTHREADS = 4 };
	pthread_t t[NTHREADS];
	struct worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .seed = 1234u + (unsigned)i, .iterations = 20000 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_int_eq(w[i].failures, 0);
	}
	ck_assert_tn_ok(tn__cca_check(cca));
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.allocated_bytes, 0);
	ck_assert_uint_eq(s.allocated_blocks, 0);
	ck_assert_uint_eq(s.num_allocs, s.num_frees);
	ck_assert_uint_eq((uint64_t)host.nmalloc, s.num_device_mallocs);
	ck_assert_uint_eq((uint64_t)host.nfree, s.num_device_frees);
	/* What the backend still holds is exactly what is cached. */
	ck_assert_uint_eq((uint64_t)(host.nmalloc - host.nfree), s.segments);
	ck_assert_uint_eq(host.used, s.reserved_bytes);
	ck_assert_int_ge(tn__cca_empty_cache(cca), 0);
	s = stats(0);
	ck_assert_uint_eq(s.reserved_bytes, 0);
	ck_assert_uint_eq(s.active_bytes, 0);
	ck_assert_int_eq(host.nmalloc, host.nfree);
}
END_TEST

/* ---- a randomized run against a reference model ---- */

struct live {
	char *ptr;
	size_t requested;
	void *stream;
};

static int by_ptr(const void *a, const void *b)
{
	const struct live *x = a, *y = b;
	return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

/* Every live block lies inside one backend segment and overlaps no other. */
static void check_model(struct live *lv, int n)
{
	qsort(lv, (size_t)n, sizeof(*lv), by_ptr);
	uint64_t requested = 0;
	for (int i = 0; i < n; i++) {
		size_t size, req;
		ck_assert_tn_ok(tn__cca_block_info(cca, lv[i].ptr, &size, &req, NULL));
		ck_assert_uint_eq(req, lv[i].requested);
		ck_assert_uint_ge(size, lv[i].requested);
		ck_assert_uint_lt(size - (lv[i].requested ? lv[i].requested : 0),
				  lv[i].requested <= MiB ? 2 * MiB : 20 * MiB + 1);
		if (i + 1 < n)
			ck_assert((uintptr_t)(lv[i].ptr + size) <= (uintptr_t)lv[i + 1].ptr);
		int j = 0;
		while (j < host.nsegs &&
		       !(lv[i].ptr >= host.segs[j].ptr &&
			 lv[i].ptr + size <= host.segs[j].ptr + host.segs[j].size))
			j++;
		ck_assert_int_lt(j, host.nsegs);
		requested += lv[i].requested;
	}
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.allocated_blocks, (uint64_t)n);
	ck_assert_uint_ge(s.requested_bytes, requested); /* plus pending blocks' */
	ck_assert_uint_eq(host.used, s.reserved_bytes);
}

START_TEST(test_random_model)
{
	enum { MAXLIVE = 64 };
	struct live lv[MAXLIVE];
	int n = 0;
	unsigned seed = 42;
	void *streams[3] = { S1, S2, S3 };
	host.capacity = 256 * MiB;
	int ooms = 0;
	for (int step = 0; step < 4000; step++) {
		unsigned r = (unsigned)rand_r(&seed);
		int op = (int)(r % 100);
		if (op < 45 && n < MAXLIVE) {
			size_t big = (size_t)rand_r(&seed); /* r has 31 bits: too few for both */
			size_t size = 1 + big % ((r >> 8) & 1 ? 2 * MiB : 40 * MiB);
			void *stream = streams[(r >> 30) % 3];
			void *p = NULL;
			int rc = tn__cca_malloc(cca, 0, size, stream, &p);
			ck_assert(rc == 0 || rc == TN_ENOMEM);
			if (rc == 0)
				lv[n++] = (struct live){ p, size, stream };
			else
				ooms++;
		} else if (op < 85 && n) {
			int i = (int)((r >> 8) % (unsigned)n);
			ck_assert_tn_ok(tn__cca_free(cca, lv[i].ptr));
			lv[i] = lv[--n];
		} else if (op < 93 && n) {
			int i = (int)((r >> 8) % (unsigned)n);
			void *stream = streams[(r >> 20) % 3];
			ck_assert_tn_ok(tn__cca_record_stream(cca, lv[i].ptr, stream));
		} else if (op < 97) {
			complete_stream(&host, streams[(r >> 8) % 3]);
		} else if (op < 98) {
			ck_assert_int_ge(tn__cca_empty_cache(cca), 0);
		} else {
			ck_assert_tn_ok(tn__cca_set_limit(cca, 0, (r >> 8) & 1 ? 0 : 160 * MiB));
		}
		ck_assert_tn_ok(tn__cca_check(cca));
		check_model(lv, n);
	}
	ck_assert_int_gt(ooms, 0); /* the run did reach the out-of-memory path */
	ck_assert_uint_eq(stats(0).num_ooms, (uint64_t)ooms);
	while (n)
		release(lv[--n].ptr);
	ck_assert_int_ge(tn__cca_empty_cache(cca), 0);
	tn_cuda_memory_stats s = stats(0);
	ck_assert_uint_eq(s.reserved_bytes, 0);
	ck_assert_uint_eq(s.active_bytes, 0);
	ck_assert_uint_eq(s.requested_bytes, 0);
	ck_assert_int_eq(host.nsegs, 0);
}
END_TEST

START_TEST(test_format_size)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
		{ 0, "0 bytes" },
		{ 1024, "1024 bytes" },
		{ 1536, "1.50 KiB" },
		{ MiB, "1024.00 KiB" },
		{ 20 * MiB, "20.00 MiB" },
		{ (uint64_t)1 << 30, "1024.00 MiB" },
		{ (uint64_t)79.1 * 1024 * MiB, "79.00 GiB" },
		{ (uint64_t)2 << 30, "2.00 GiB" },
	};
	char buf[32];
	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++) {
		tn__cca_format_size(buf, sizeof(buf), cases[i].bytes);
		ck_assert_str_eq(buf, cases[i].text);
	}
}
END_TEST

/* ---- the public functions over the real backend ---- */

/* Without a GPU (as in CI) the public functions say so; with one, a block goes through the
 * real backend and the limit gives PyTorch's message with the device's figures. */
START_TEST(test_public)
{
	const tn_allocator *a = tn_cuda_caching_allocator();
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->name, "cuda_caching");
	tn_storage *cpu;
	ck_assert_tn_ok(tn_storage_new(TN_CPU, 16, &cpu));
	tn_cuda_stream s0 = { .device = 0, .slot = 0 };
	ck_assert_tn_error_has(tn_cuda_record_stream(cpu, s0), TN_EINVAL,
			       "not a CUDA storage of the caching allocator");
	tn_storage_unref(cpu);
	ck_assert_tn_error_has(tn_cuda_record_stream(NULL, s0), TN_EBADF, "not a live storage");
	tn_cuda_memory_stats st;
	ck_assert_tn_error_has(tn_cuda_allocator_stats(0, NULL), TN_EINVAL, "NULL");
	if (tn_cuda_device_count() == 0) {
		ck_assert_tn_error_has(tn_cuda_allocator_stats(0, &st), TN_ENODEV, "no CUDA device");
		ck_assert_tn_error_has(tn_cuda_set_memory_limit(0, 1), TN_ENODEV, "no CUDA device");
		ck_assert_tn_error_has(tn_cuda_reset_peak_memory_stats(0), TN_ENODEV,
				       "no CUDA device");
		ck_assert_int_eq(tn_cuda_empty_cache(), 0);
		tn_clear_error();
		ck_assert_ptr_null(a->alloc(a->ctx, 100));
		ck_assert_str_eq(tn_last_error(), "no CUDA device (cudaGetDeviceCount found none)");
		return;
	}
	void *p = a->alloc(a->ctx, 1000);
	ck_assert_msg(p != NULL, "%s", tn_last_error());
	ck_assert_tn_ok(tn_cuda_allocator_stats(-1, &st));
	ck_assert_uint_eq(st.allocated_bytes, 1024);
	ck_assert_uint_eq(st.reserved_bytes, 2 * MiB);
	a->free(a->ctx, p, 1000);
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &st));
	ck_assert_uint_eq(st.allocated_bytes, 0);
	ck_assert_uint_eq(st.num_device_mallocs, 1);
	ck_assert_tn_ok(tn_cuda_set_memory_limit(0, 64 * MiB));
	tn_clear_error();
	ck_assert_ptr_null(a->alloc(a->ctx, (size_t)1 << 30));
	static const char oom[] = "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a "
				  "total capacity of ";
	ck_assert_msg(strncmp(tn_last_error(), oom, sizeof(oom) - 1) == 0, "%s", tn_last_error());
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "64.00 MiB allowed; "));
	ck_assert_tn_ok(tn_cuda_set_memory_limit(0, 0));
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &st));
	ck_assert_uint_eq(st.num_ooms, 1);
	ck_assert_uint_eq(st.reserved_bytes, 0); /* the cached segment was released first */
	/* A real out-of-memory: more than the device has. */
	size_t fr, total;
	ck_assert_int_eq(cudaMemGetInfo(&fr, &total), cudaSuccess);
	tn_clear_error();
	ck_assert_ptr_null(a->alloc(a->ctx, total + ((size_t)1 << 30)));
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "CUDA out of memory. Tried to allocate"));
	p = a->alloc(a->ctx, 5 * MiB);
	ck_assert_ptr_nonnull(p);
	a->free(a->ctx, p, 5 * MiB);
	ck_assert_int_eq(tn_cuda_empty_cache(), (int64_t)(20 * MiB));
}
END_TEST

static Suite *cuda_alloc_suite(void)
{
	/* The backend's sources are linked into this program with the library's internal copy:
	 * they serve CUDA here, rather than a libtensor-cuda.so loaded beside them. */
	if (tn__device_register(&tn__cuda_device_ops) < 0)
		ck_abort_msg("%s", tn_last_error());
	Suite *s = suite_create("cuda_alloc");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rounding);
	tcase_add_test(tc, test_segment_sizes);
	tcase_add_test(tc, test_reuse);
	tcase_add_test(tc, test_split_and_merge_small);
	tcase_add_test(tc, test_split_large);
	tcase_add_test(tc, test_max_split);
	tcase_add_test(tc, test_per_stream_cache);
	tcase_add_test(tc, test_record_stream);
	tcase_add_test(tc, test_event_failure);
	tcase_add_test(tc, test_oom_limit);
	tcase_add_test(tc, test_oom_device);
	tcase_add_test(tc, test_host_fault_injection);
	tcase_add_test(tc, test_stats_sequence);
	tcase_add_test(tc, test_devices);
	tcase_add_test(tc, test_bad_pointers);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_random_model);
	tcase_add_test(tc, test_format_size);
	suite_add_tcase(s, tc);
	tc = tcase_create("public");
	tcase_add_test(tc, test_public);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(cuda_alloc_suite)
