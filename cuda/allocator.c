/* SPDX-License-Identifier: MIT */
/*
 * The caching device allocator's bookkeeping: segments obtained from the backend, blocks
 * carved out of them, free blocks cached per (device, pool) in a treap ordered by (stream,
 * size, address), live blocks found by pointer in a hash map, and the events that keep a
 * block freed after record_stream out of reuse. The policy is described in allocator.h; the
 * code follows PyTorch's c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) step by
 * step: malloc, free, free_block, process_events, release_cached_blocks.
 *
 * No CUDA header here: everything device-side goes through struct tn__cuda_backend.
 */
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "allocator.h"

enum block_state {
	BLOCK_FREE,      /* cached, in its pool's tree */
	BLOCK_ALLOCATED, /* handed out, in the pointer map */
	BLOCK_PENDING,   /* freed, waiting for events on the streams it was recorded on */
	BLOCK_LOST,      /* freed, but an event could not be recorded: never reused */
};

struct segment;

struct block {
	char *ptr;
	size_t size;      /* rounded */
	size_t requested; /* as asked, while active */
	void *stream;     /* the stream it was allocated for (its segment's) */
	struct segment *seg;
	struct block *prev, *next; /* neighbours in the segment, by address */
	enum block_state state;
	int event_count;           /* pending events (BLOCK_PENDING) */
	struct block *left, *right; /* the pool's treap (BLOCK_FREE) */
	uint32_t prio;
	struct block *hnext; /* the pointer map's chain (BLOCK_ALLOCATED) */
	void **uses;         /* streams recorded on, other than its own */
	int nuses, cuses;
};

struct segment {
	char *ptr;
	size_t size;
	bool small;
	int device;
	struct block *head; /* the block at ptr: merges keep the lower block, so it never changes */
	struct segment *prev, *next;
};

/* An event recorded on @stream when @block was freed; spare ones (block NULL) are kept for
 * reuse, as PyTorch's EventPool does. */
struct pending {
	void *event;
	void *stream;
	struct block *block;
	struct pending *next;
};

struct pool {
	struct block *root;
	size_t count;
};

struct device {
	pthread_mutex_t lock;
	struct pool pools[2]; /* [1] small, [0] large */
	struct segment *segments;
	struct pending *pending, *pending_tail;
	struct pending *spare;
	uint64_t limit;
	uint32_t rng;
	tn_cuda_memory_stats st;
};

struct tn__cca {
	struct tn__cuda_backend be;
	int ndevices;
	_Atomic size_t max_split; /* read under a device's lock; relaxed is enough */
	pthread_mutex_t map_lock;
	struct block **buckets;
	unsigned bucket_bits;
	size_t nlive;
	struct device dev[];
};

/* ---- sizes ---- */

static size_t round_size(size_t size)
{
	if (size < TN__CCA_MIN_BLOCK)
		return TN__CCA_MIN_BLOCK;
	return (size + TN__CCA_MIN_BLOCK - 1) / TN__CCA_MIN_BLOCK * TN__CCA_MIN_BLOCK;
}

static size_t allocation_size(size_t size)
{
	if (size <= TN__CCA_SMALL_SIZE)
		return TN__CCA_SMALL_BUFFER;
	if (size < TN__CCA_MIN_LARGE_ALLOC)
		return TN__CCA_LARGE_BUFFER;
	return (size + TN__CCA_ROUND_LARGE - 1) / TN__CCA_ROUND_LARGE * TN__CCA_ROUND_LARGE;
}

void tn__cca_format_size(char *buf, size_t len, uint64_t size)
{
	if (size <= 1024)
		snprintf(buf, len, "%" PRIu64 " bytes", size);
	else if (size <= 1048576)
		snprintf(buf, len, "%.2f KiB", (double)size / 1024.0);
	else if (size <= 1073741824ULL)
		snprintf(buf, len, "%.2f MiB", (double)size / 1048576.0);
	else
		snprintf(buf, len, "%.2f GiB", (double)size / 1073741824.0);
}

static bool block_is_split(const struct block *b)
{
	return b->prev || b->next;
}

/* ---- the pools: treaps ordered by (stream, size, address) ---- */

static int key_cmp(const struct block *b, uintptr_t stream, size_t size, uintptr_t ptr)
{
	uintptr_t bs = (uintptr_t)b->stream, bp = (uintptr_t)b->ptr;
	if (bs != stream)
		return bs < stream ? -1 : 1;
	if (b->size != size)
		return b->size < size ? -1 : 1;
	if (bp != ptr)
		return bp < ptr ? -1 : 1;
	return 0;
}

static int block_cmp(const struct block *a, const struct block *b)
{
	return key_cmp(a, (uintptr_t)b->stream, b->size, (uintptr_t)b->ptr);
}

static struct block *treap_insert(struct block *root, struct block *b)
{
	if (!root)
		return b;
	if (block_cmp(b, root) < 0) {
		root->left = treap_insert(root->left, b);
		if (root->left->prio > root->prio) {
			struct block *l = root->left;
			root->left = l->right;
			l->right = root;
			return l;
		}
	} else {
		root->right = treap_insert(root->right, b);
		if (root->right->prio > root->prio) {
			struct block *r = root->right;
			root->right = r->left;
			r->left = root;
			return r;
		}
	}
	return root;
}

/* Join two treaps, every key of @a below every key of @b. */
static struct block *treap_join(struct block *a, struct block *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->right = treap_join(a->right, b);
		return a;
	}
	b->left = treap_join(a, b->left);
	return b;
}

static struct block *treap_remove(struct block *root, struct block *b)
{
	assert(root);
	if (root == b)
		return treap_join(b->left, b->right);
	if (block_cmp(b, root) < 0)
		root->left = treap_remove(root->left, b);
	else
		root->right = treap_remove(root->right, b);
	return root;
}

/* The smallest block of @stream with at least @size bytes, or NULL. */
static struct block *treap_lower_bound(struct block *node, void *stream, size_t size)
{
	struct block *best = NULL;
	while (node) {
		if (key_cmp(node, (uintptr_t)stream, size, 0) >= 0) {
			best = node;
			node = node->left;
		} else {
			node = node->right;
		}
	}
	return best && best->stream == stream ? best : NULL;
}

static struct pool *pool_of(struct device *dev, const struct block *b)
{
	return &dev->pools[b->seg->small];
}

static void pool_insert(struct device *dev, struct block *b)
{
	struct pool *p = pool_of(dev, b);
	/* xorshift32: the treap's priorities only need to look random to the key order. */
	dev->rng ^= dev->rng << 13;
	dev->rng ^= dev->rng >> 17;
	dev->rng ^= dev->rng << 5;
	b->prio = dev->rng;
	b->left = b->right = NULL;
	b->state = BLOCK_FREE;
	p->root = treap_insert(p->root, b);
	p->count++;
	/* A block's split state cannot change while it is in the tree: its neighbours are taken
	 * out before they split or merge next to it. */
	if (block_is_split(b))
		dev->st.inactive_split_bytes += b->size;
}

static void pool_remove(struct device *dev, struct block *b)
{
	struct pool *p = pool_of(dev, b);
	assert(b->state == BLOCK_FREE);
	p->root = treap_remove(p->root, b);
	p->count--;
	b->left = b->right = NULL;
	if (block_is_split(b))
		dev->st.inactive_split_bytes -= b->size;
}

/* ---- the pointer map (map_lock) ---- */

static size_t map_slot(const struct tn__cca *cca, const void *ptr)
{
	/* Blocks are 512-byte aligned: the low bits carry nothing. */
	uint64_t h = ((uint64_t)(uintptr_t)ptr >> 9) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h >> (64 - cca->bucket_bits));
}

static void map_grow(struct tn__cca *cca)
{
	unsigned bits = cca->bucket_bits + 1;
	struct block **nb = tn__calloc((size_t)1 << bits, sizeof(*nb));
	if (!nb)
		return; /* longer chains, still correct */
	struct block **old = cca->buckets;
	size_t n = (size_t)1 << cca->bucket_bits;
	cca->buckets = nb;
	cca->bucket_bits = bits;
	for (size_t i = 0; i < n; i++) {
		struct block *b = old[i];
		while (b) {
			struct block *next = b->hnext;
			size_t s = map_slot(cca, b->ptr);
			b->hnext = nb[s];
			nb[s] = b;
			b = next;
		}
	}
	tn__free(old);
}

static void map_insert(struct tn__cca *cca, struct block *b)
{
	pthread_mutex_lock(&cca->map_lock);
	if (cca->nlive >= ((size_t)1 << cca->bucket_bits) && cca->bucket_bits < 40)
		map_grow(cca);
	size_t s = map_slot(cca, b->ptr);
	b->hnext = cca->buckets[s];
	cca->buckets[s] = b;
	cca->nlive++;
	pthread_mutex_unlock(&cca->map_lock);
}

/* Called with map_lock held. */
static struct block **map_find_locked(struct tn__cca *cca, const void *ptr)
{
	struct block **pb = &cca->buckets[map_slot(cca, ptr)];
	while (*pb && (*pb)->ptr != ptr)
		pb = &(*pb)->hnext;
	return pb;
}

static struct block *map_remove(struct tn__cca *cca, const void *ptr)
{
	pthread_mutex_lock(&cca->map_lock);
	struct block **pb = map_find_locked(cca, ptr);
	struct block *b = *pb;
	if (b) {
		*pb = b->hnext;
		b->hnext = NULL;
		cca->nlive--;
	}
	pthread_mutex_unlock(&cca->map_lock);
	return b;
}

static struct block *map_find(struct tn__cca *cca, const void *ptr)
{
	pthread_mutex_lock(&cca->map_lock);
	struct block *b = *map_find_locked(cca, ptr);
	pthread_mutex_unlock(&cca->map_lock);
	return b;
}

/* The device of the live block at @ptr, or -1. Read under the map's lock: a block in the map
 * is live, so its segment is there too; once the lock is dropped it may be freed at once. */
static int map_find_device(struct tn__cca *cca, const void *ptr)
{
	int d = -1;
	pthread_mutex_lock(&cca->map_lock);
	struct block *b = ptr ? *map_find_locked(cca, ptr) : NULL;
	if (b)
		d = b->seg->device;
	pthread_mutex_unlock(&cca->map_lock);
	return d;
}

/* ---- segments ---- */

static void stat_peak(uint64_t *peak, uint64_t value)
{
	if (value > *peak)
		*peak = value;
}

/*
 * A new segment of @bytes for @stream. Returns 0, 1 when the device (or the limit) has no
 * room, or an error code (the backend's, or TN_ENOMEM for host memory) with the message set.
 */
static int segment_alloc(struct tn__cca *cca, int d, bool small, void *stream, size_t bytes,
			 struct block **ret)
{
	struct device *dev = &cca->dev[d];
	if (dev->limit && dev->st.reserved_bytes + bytes > dev->limit)
		return 1;
	struct segment *seg = tn__calloc(1, sizeof(*seg));
	struct block *b = tn__calloc(1, sizeof(*b));
	if (!seg || !b) {
		tn__free(seg);
		tn__free(b);
		return tn__error(TN_ENOMEM, "CUDA caching allocator: out of host memory");
	}
	void *ptr = NULL;
	int r = cca->be.malloc(cca->be.ctx, d, bytes, &ptr);
	if (r) {
		tn__free(seg);
		tn__free(b);
		return r == TN_ENOMEM ? 1 : r;
	}
	seg->ptr = ptr;
	seg->size = bytes;
	seg->small = small;
	seg->device = d;
	seg->head = b;
	seg->next = dev->segments;
	if (dev->segments)
		dev->segments->prev = seg;
	dev->segments = seg;
	b->ptr = ptr;
	b->size = bytes;
	b->stream = stream;
	b->seg = seg;
	dev->st.reserved_bytes += bytes;
	stat_peak(&dev->st.reserved_peak, dev->st.reserved_bytes);
	dev->st.segments++;
	if (small)
		dev->st.small_pool_reserved += bytes;
	else
		dev->st.large_pool_reserved += bytes;
	dev->st.num_device_mallocs++;
	*ret = b;
	return 0;
}

/* Give @seg, whose only block is free, back to the backend. */
static int segment_release(struct tn__cca *cca, int d, struct segment *seg)
{
	struct device *dev = &cca->dev[d];
	struct block *b = seg->head;
	assert(b->state == BLOCK_FREE && !block_is_split(b));
	int r = cca->be.free(cca->be.ctx, d, seg->ptr);
	dev->st.num_device_frees++;
	if (r)
		return r; /* the segment stays cached */
	pool_remove(dev, b);
	dev->st.reserved_bytes -= seg->size;
	dev->st.segments--;
	if (seg->small)
		dev->st.small_pool_reserved -= seg->size;
	else
		dev->st.large_pool_reserved -= seg->size;
	if (seg->prev)
		seg->prev->next = seg->next;
	else
		dev->segments = seg->next;
	if (seg->next)
		seg->next->prev = seg->prev;
	tn__free(b->uses);
	tn__free(b);
	tn__free(seg);
	return 0;
}

/* Release the unused cached segments of pool @which (0 large, 1 small, -1 both); adds the
 * bytes to *released. Returns 0 or the first error (after trying the others). */
static int release_cached(struct tn__cca *cca, int d, int which, uint64_t *released)
{
	struct device *dev = &cca->dev[d];
	int err = 0;
	struct segment *seg = dev->segments;
	while (seg) {
		struct segment *next = seg->next;
		struct block *b = seg->head;
		if ((which < 0 || which == (int)seg->small) && b->state == BLOCK_FREE &&
		    !block_is_split(b)) {
			size_t size = seg->size;
			int r = segment_release(cca, d, seg);
			if (r && !err)
				err = r;
			if (!r)
				*released += size;
		}
		seg = next;
	}
	return err;
}

/* ---- freeing and events ---- */

/* Merge @hi, the block right after @lo in their segment, into @lo. The lower record is kept,
 * so a segment's head never changes. */
static void absorb(struct block *lo, struct block *hi)
{
	lo->size += hi->size;
	lo->next = hi->next;
	if (hi->next)
		hi->next->prev = lo;
	tn__free(hi->uses);
	tn__free(hi);
}

/* @b is no longer used by anything: merge it with free neighbours and cache it. */
static void free_block(struct device *dev, struct block *b)
{
	dev->st.active_bytes -= b->size;
	dev->st.requested_bytes -= b->requested;
	b->requested = 0;
	b->nuses = 0;
	struct block *p = b->prev;
	if (p && p->state == BLOCK_FREE) {
		pool_remove(dev, p);
		absorb(p, b);
		b = p;
	}
	struct block *n = b->next;
	if (n && n->state == BLOCK_FREE) {
		pool_remove(dev, n);
		absorb(b, n);
	}
	pool_insert(dev, b);
}

/* One pending event of @p's block has completed. */
static void event_done(struct device *dev, struct pending *p)
{
	struct block *b = p->block;
	p->block = NULL;
	p->stream = NULL;
	p->next = dev->spare;
	dev->spare = p;
	if (--b->event_count == 0 && b->state == BLOCK_PENDING)
		free_block(dev, b);
}

/*
 * Poll the pending events, oldest first (PyTorch's process_events). Events on one stream
 * complete in the order they were recorded, so after one that is not done the later ones of
 * its stream are not asked about. With @wait, wait for each instead (synchronize_and_free_
 * events); an event that cannot be waited for stays pending and its error is returned.
 */
static int process_events(struct tn__cca *cca, struct device *dev, bool wait)
{
	void *blocked[16];
	int nblocked = 0, err = 0;
	struct pending **pp = &dev->pending, *last = NULL;
	while (*pp) {
		struct pending *p = *pp;
		bool skip = false;
		for (int i = 0; i < nblocked && !skip; i++)
			skip = blocked[i] == p->stream;
		int r = 0;
		if (!skip) {
			r = wait ? cca->be.event_synchronize(cca->be.ctx, p->event)
				 : cca->be.event_query(cca->be.ctx, p->event);
			if (wait && r == 0)
				r = 1;
		}
		if (r == 1) {
			*pp = p->next;
			event_done(dev, p);
			continue;
		}
		if (r < 0 && !err)
			err = r;
		if (!skip && nblocked < (int)TN_ARRAY_SIZE(blocked))
			blocked[nblocked++] = p->stream;
		last = p;
		pp = &p->next;
	}
	dev->pending_tail = last;
	return err;
}

/* Record an event on each stream @b was used on; @b stays out of the pool until all are done. */
static int insert_events(struct tn__cca *cca, int d, struct block *b)
{
	struct device *dev = &cca->dev[d];
	int err = 0;
	b->state = BLOCK_PENDING;
	for (int i = 0; i < b->nuses && !err; i++) {
		struct pending *p = dev->spare;
		if (p) {
			dev->spare = p->next;
		} else {
			p = tn__calloc(1, sizeof(*p));
			if (!p) {
				err = tn__error(TN_ENOMEM,
						"CUDA caching allocator: out of host memory");
				break;
			}
			err = cca->be.event_create(cca->be.ctx, d, &p->event);
			if (err) {
				tn__free(p);
				break;
			}
		}
		err = cca->be.event_record(cca->be.ctx, p->event, b->uses[i]);
		if (err) {
			p->next = dev->spare;
			dev->spare = p;
			break;
		}
		p->stream = b->uses[i];
		p->block = b;
		p->next = NULL;
		if (dev->pending_tail)
			dev->pending_tail->next = p;
		else
			dev->pending = p;
		dev->pending_tail = p;
		b->event_count++;
	}
	b->nuses = 0;
	/* Without an event we cannot know when the stream is done with the block: keep it out of
	 * reach (still counted active) rather than risk handing it out while in use. */
	if (err)
		b->state = BLOCK_LOST;
	return err;
}

/* ---- the instance ---- */

static int check_device(const struct tn__cca *cca, int device)
{
	if (device < 0 || device >= cca->ndevices)
		return tn__error(TN_ENODEV, "CUDA device %d does not exist (%d device%s)", device,
				 cca->ndevices, cca->ndevices == 1 ? "" : "s");
	return 0;
}

int tn__cca_create(const struct tn__cuda_backend *backend, int ndevices, struct tn__cca **ret)
{
	if (!backend || !ret || ndevices < 0 || ndevices > 4096)
		return tn__error(TN_EINVAL, "tn__cca_create: bad arguments");
	struct tn__cca *cca = tn__calloc(1, sizeof(*cca) + (size_t)ndevices * sizeof(cca->dev[0]));
	if (!cca)
		return tn__error(TN_ENOMEM, "CUDA caching allocator: out of host memory");
	cca->bucket_bits = 10;
	cca->buckets = tn__calloc((size_t)1 << cca->bucket_bits, sizeof(*cca->buckets));
	if (!cca->buckets) {
		tn__free(cca);
		return tn__error(TN_ENOMEM, "CUDA caching allocator: out of host memory");
	}
	cca->be = *backend;
	cca->ndevices = ndevices;
	atomic_init(&cca->max_split, TN__CCA_MAX_SPLIT_DEFAULT);
	pthread_mutex_init(&cca->map_lock, NULL);
	for (int d = 0; d < ndevices; d++) {
		pthread_mutex_init(&cca->dev[d].lock, NULL);
		cca->dev[d].rng = 0x2545f491u ^ (uint32_t)d;
	}
	*ret = cca;
	return 0;
}

void tn__cca_destroy(struct tn__cca *cca)
{
	if (!cca)
		return;
	for (int d = 0; d < cca->ndevices; d++) {
		struct device *dev = &cca->dev[d];
		(void)process_events(cca, dev, true);
		/* Events that could not be waited for: drop them with their blocks. */
		while (dev->pending) {
			struct pending *p = dev->pending;
			dev->pending = p->next;
			cca->be.event_destroy(cca->be.ctx, p->event);
			tn__free(p);
		}
		while (dev->spare) {
			struct pending *p = dev->spare;
			dev->spare = p->next;
			cca->be.event_destroy(cca->be.ctx, p->event);
			tn__free(p);
		}
		while (dev->segments) {
			struct segment *seg = dev->segments;
			dev->segments = seg->next;
			(void)cca->be.free(cca->be.ctx, d, seg->ptr);
			for (struct block *b = seg->head, *next; b; b = next) {
				next = b->next;
				tn__free(b->uses);
				tn__free(b);
			}
			tn__free(seg);
		}
		pthread_mutex_destroy(&dev->lock);
	}
	pthread_mutex_destroy(&cca->map_lock);
	tn__free(cca->buckets);
	tn__free(cca);
}

int tn__cca_ndevices(const struct tn__cca *cca)
{
	return cca->ndevices;
}

/* The cached block to use for @size bytes on @stream, or NULL (get_free_block). */
static struct block *get_free_block(struct tn__cca *cca, struct device *dev, bool small,
				    void *stream, size_t size)
{
	struct block *b = treap_lower_bound(dev->pools[small].root, stream, size);
	if (!b)
		return NULL;
	size_t max_split = atomic_load_explicit(&cca->max_split, memory_order_relaxed);
	/* Oversize blocks are not split for smaller requests, and serve an oversize request only
	 * when they waste less than a large segment. */
	if (size < max_split && b->size >= max_split)
		return NULL;
	if (size >= max_split && b->size >= size + TN__CCA_LARGE_BUFFER)
		return NULL;
	return b;
}

static bool should_split(const struct tn__cca *cca, const struct block *b, size_t size)
{
	size_t remaining = b->size - size;
	if (b->seg->small)
		return remaining >= TN__CCA_MIN_BLOCK;
	return size < atomic_load_explicit(&cca->max_split, memory_order_relaxed) &&
	       remaining > TN__CCA_SMALL_SIZE;
}

static int oom_error(struct tn__cca *cca, int d, size_t alloc_size)
{
	struct device *dev = &cca->dev[d];
	size_t free_bytes = 0, total = 0;
	dev->st.num_ooms++;
	if (cca->be.mem_info(cca->be.ctx, d, &free_bytes, &total))
		free_bytes = total = 0;
	char want[32], cap[32], fr[32], alloc[32], unalloc[32], lim[32], allowed[48] = "";
	tn__cca_format_size(want, sizeof(want), alloc_size);
	tn__cca_format_size(cap, sizeof(cap), total);
	tn__cca_format_size(fr, sizeof(fr), free_bytes);
	tn__cca_format_size(alloc, sizeof(alloc), dev->st.allocated_bytes);
	tn__cca_format_size(unalloc, sizeof(unalloc),
			    dev->st.reserved_bytes - dev->st.allocated_bytes);
	if (dev->limit) {
		tn__cca_format_size(lim, sizeof(lim), dev->limit);
		snprintf(allowed, sizeof(allowed), "%s allowed; ", lim);
	}
	return tn__error(TN_ENOMEM,
			 "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity "
			 "of %s of which %s is free. %sOf the allocated memory %s is allocated by "
			 "libtensor, and %s is reserved by libtensor but unallocated.",
			 want, d, cap, fr, allowed, alloc, unalloc);
}

static int dev_malloc(struct tn__cca *cca, int d, size_t req, void *stream, void **ret_ptr)
{
	struct device *dev = &cca->dev[d];
	(void)process_events(cca, dev, false);
	if (req > SIZE_MAX / 2)
		return oom_error(cca, d, req);
	size_t size = round_size(req);
	bool small = size <= TN__CCA_SMALL_SIZE;
	size_t alloc_size = allocation_size(size);
	struct block *b = get_free_block(cca, dev, small, stream, size);
	if (b) {
		pool_remove(dev, b);
	} else {
		int r = segment_alloc(cca, d, small, stream, alloc_size, &b);
		if (r == 1) {
			/* release_available_cached_blocks: this pool's unused segments first. */
			uint64_t released = 0;
			(void)release_cached(cca, d, small, &released);
			if (released) {
				dev->st.num_alloc_retries++;
				r = segment_alloc(cca, d, small, stream, alloc_size, &b);
			}
		}
		if (r == 1) {
			/* release_cached_blocks: wait for pending events, then every unused
			 * segment of the device, and try once more. */
			uint64_t released = 0;
			(void)process_events(cca, dev, true);
			b = get_free_block(cca, dev, small, stream, size);
			if (b) {
				pool_remove(dev, b);
				r = 0;
			} else {
				(void)release_cached(cca, d, -1, &released);
				dev->st.num_alloc_retries++;
				r = segment_alloc(cca, d, small, stream, alloc_size, &b);
			}
		}
		if (r == 1)
			return oom_error(cca, d, alloc_size);
		if (r)
			return r;
	}
	if (should_split(cca, b, size)) {
		struct block *rem = tn__calloc(1, sizeof(*rem));
		/* Without memory for the remainder's record, hand out the whole block. */
		if (rem) {
			rem->ptr = b->ptr + size;
			rem->size = b->size - size;
			rem->stream = stream;
			rem->seg = b->seg;
			rem->prev = b;
			rem->next = b->next;
			if (b->next)
				b->next->prev = rem;
			b->next = rem;
			b->size = size;
			pool_insert(dev, rem);
		}
	}
	b->state = BLOCK_ALLOCATED;
	b->requested = req;
	b->nuses = 0;
	dev->st.allocated_bytes += b->size;
	stat_peak(&dev->st.allocated_peak, dev->st.allocated_bytes);
	dev->st.allocated_blocks++;
	dev->st.active_bytes += b->size;
	dev->st.requested_bytes += req;
	dev->st.num_allocs++;
	map_insert(cca, b);
	*ret_ptr = b->ptr;
	return 0;
}

int tn__cca_malloc(struct tn__cca *cca, int device, size_t size, void *stream, void **ret_ptr)
{
	if (!ret_ptr)
		return tn__error(TN_EINVAL, "CUDA caching allocator: NULL ret_ptr");
	int r = check_device(cca, device);
	if (r)
		return r;
	if (size == 0) {
		*ret_ptr = NULL;
		return 0;
	}
	struct device *dev = &cca->dev[device];
	pthread_mutex_lock(&dev->lock);
	r = dev_malloc(cca, device, size, stream, ret_ptr);
	pthread_mutex_unlock(&dev->lock);
	return r;
}

int tn__cca_free(struct tn__cca *cca, void *ptr)
{
	if (!ptr)
		return 0;
	/* Once out of the map the block is ours alone, so its device can be read unlocked. */
	struct block *b = map_remove(cca, ptr);
	if (!b)
		return tn__error(TN_EINVAL,
				 "CUDA caching allocator: %p is not a live block (never allocated "
				 "here, or freed already)",
				 ptr);
	int d = b->seg->device;
	struct device *dev = &cca->dev[d];
	int r = 0;
	pthread_mutex_lock(&dev->lock);
	dev->st.allocated_bytes -= b->size;
	dev->st.allocated_blocks--;
	dev->st.num_frees++;
	if (b->nuses)
		r = insert_events(cca, d, b);
	else
		free_block(dev, b);
	pthread_mutex_unlock(&dev->lock);
	return r;
}

int tn__cca_record_stream(struct tn__cca *cca, void *ptr, void *stream)
{
	int d = map_find_device(cca, ptr);
	if (d < 0)
		return tn__error(TN_EINVAL, "record_stream: %p is not a live block of the CUDA "
					    "caching allocator",
				 ptr);
	struct device *dev = &cca->dev[d];
	int r = 0;
	pthread_mutex_lock(&dev->lock);
	struct block *b;
	/* It may have been freed (and the record reused) meanwhile: look again under the lock. */
	b = map_find(cca, ptr);
	if (!b || b->seg->device != d) {
		r = tn__error(TN_EINVAL, "record_stream: %p was freed meanwhile", ptr);
	} else if (stream != b->stream) {
		int i = 0;
		while (i < b->nuses && b->uses[i] != stream)
			i++;
		if (i == b->nuses) {
			if (b->nuses == b->cuses) {
				int c = b->cuses ? 2 * b->cuses : 4;
				void **u = tn__malloc((size_t)c * sizeof(*u));
				if (!u) {
					r = tn__error(TN_ENOMEM,
						      "CUDA caching allocator: out of host memory");
					goto out;
				}
				if (b->nuses)
					memcpy(u, b->uses, (size_t)b->nuses * sizeof(*u));
				tn__free(b->uses);
				b->uses = u;
				b->cuses = c;
			}
			b->uses[b->nuses++] = stream;
		}
	}
out:
	pthread_mutex_unlock(&dev->lock);
	return r;
}

int64_t tn__cca_empty_cache(struct tn__cca *cca)
{
	uint64_t released = 0;
	int err = 0;
	for (int d = 0; d < cca->ndevices; d++) {
		struct device *dev = &cca->dev[d];
		pthread_mutex_lock(&dev->lock);
		int r = process_events(cca, dev, true);
		int r2 = release_cached(cca, d, -1, &released);
		pthread_mutex_unlock(&dev->lock);
		if (!err)
			err = r ? r : r2;
	}
	return err ? err : (int64_t)released;
}

int tn__cca_stats(struct tn__cca *cca, int device, tn_cuda_memory_stats *ret)
{
	int r = check_device(cca, device);
	if (r)
		return r;
	if (!ret)
		return tn__error(TN_EINVAL, "CUDA memory stats: NULL ret");
	struct device *dev = &cca->dev[device];
	pthread_mutex_lock(&dev->lock);
	*ret = dev->st;
	ret->memory_limit = dev->limit;
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

int tn__cca_reset_peak(struct tn__cca *cca, int device)
{
	int r = check_device(cca, device);
	if (r)
		return r;
	struct device *dev = &cca->dev[device];
	pthread_mutex_lock(&dev->lock);
	dev->st.allocated_peak = dev->st.allocated_bytes;
	dev->st.reserved_peak = dev->st.reserved_bytes;
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

int tn__cca_set_limit(struct tn__cca *cca, int device, uint64_t bytes)
{
	int r = check_device(cca, device);
	if (r)
		return r;
	struct device *dev = &cca->dev[device];
	pthread_mutex_lock(&dev->lock);
	dev->limit = bytes;
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

int tn__cca_set_max_split(struct tn__cca *cca, size_t bytes)
{
	if (bytes <= TN__CCA_LARGE_BUFFER)
		return tn__error(TN_EINVAL, "max_split %zu must be more than %zu bytes", bytes,
				 TN__CCA_LARGE_BUFFER);
	atomic_store_explicit(&cca->max_split, bytes, memory_order_relaxed);
	return 0;
}

/* The live block at @ptr, with its device's lock held (*ret_dev), or NULL and the error set. */
static struct block *live_block_locked(struct tn__cca *cca, const void *ptr,
				       struct device **ret_dev)
{
	int d = map_find_device(cca, ptr);
	if (d < 0) {
		tn__error(TN_EINVAL, "%p is not a live block of the CUDA caching allocator", ptr);
		return NULL;
	}
	struct device *dev = &cca->dev[d];
	pthread_mutex_lock(&dev->lock);
	struct block *b = map_find(cca, ptr);
	if (!b || b->seg->device != d) {
		pthread_mutex_unlock(&dev->lock);
		tn__error(TN_EINVAL, "%p was freed meanwhile", ptr);
		return NULL;
	}
	*ret_dev = dev;
	return b;
}

int tn__cca_block_info(struct tn__cca *cca, const void *ptr, size_t *ret_size,
		       size_t *ret_requested, int *ret_device)
{
	struct device *dev;
	struct block *b = live_block_locked(cca, ptr, &dev);
	if (!b)
		return TN_EINVAL;
	if (ret_size)
		*ret_size = b->size;
	if (ret_requested)
		*ret_requested = b->requested;
	if (ret_device)
		*ret_device = b->seg->device;
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

int tn__cca_segment_of(struct tn__cca *cca, const void *ptr, void **ret_base,
		       size_t *ret_size)
{
	struct device *dev;
	struct block *b = live_block_locked(cca, ptr, &dev);
	if (!b)
		return TN_EINVAL;
	*ret_base = b->seg->ptr;
	*ret_size = b->seg->size;
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

/* ---- invariants, for the tests ---- */

#define CHECK(cond, ...)                                         \
	do {                                                     \
		if (!(cond))                                     \
			return tn__error(TN_EIO, __VA_ARGS__); \
	} while (0)

/* In-order walk: keys strictly increasing, heap order of priorities, only free blocks of the
 * pool. Counts the nodes into *count. */
static int check_tree(const struct block *node, const struct block **prev, bool small,
		      size_t *count)
{
	if (!node)
		return 0;
	CHECK(!node->left || node->left->prio <= node->prio, "treap: heap order broken");
	CHECK(!node->right || node->right->prio <= node->prio, "treap: heap order broken");
	int r = check_tree(node->left, prev, small, count);
	if (r)
		return r;
	CHECK(node->state == BLOCK_FREE, "treap: block %p is not free", (void *)node->ptr);
	CHECK(node->seg->small == small, "treap: block %p in the wrong pool", (void *)node->ptr);
	CHECK(!*prev || block_cmp(*prev, node) < 0, "treap: keys out of order at %p",
	      (void *)node->ptr);
	*prev = node;
	(*count)++;
	return check_tree(node->right, prev, small, count);
}

static int check_device_locked(struct tn__cca *cca, int d)
{
	struct device *dev = &cca->dev[d];
	tn_cuda_memory_stats s = { 0 };
	size_t nfree[2] = { 0, 0 }, nlive = 0;
	uint64_t pending_blocks = 0;
	for (struct segment *seg = dev->segments; seg; seg = seg->next) {
		CHECK(seg->device == d, "segment %p: device %d, expected %d", (void *)seg->ptr,
		      seg->device, d);
		CHECK(!seg->next || seg->next->prev == seg, "segment list broken");
		s.reserved_bytes += seg->size;
		s.segments++;
		if (seg->small)
			s.small_pool_reserved += seg->size;
		else
			s.large_pool_reserved += seg->size;
		struct block *b = seg->head;
		CHECK(b && !b->prev && b->ptr == seg->ptr, "segment %p: bad head",
		      (void *)seg->ptr);
		char *end = seg->ptr;
		for (; b; b = b->next) {
			CHECK(b->seg == seg, "block %p: wrong segment", (void *)b->ptr);
			CHECK(b->ptr == end, "block %p: expected at %p", (void *)b->ptr,
			      (void *)end);
			CHECK(b->size >= TN__CCA_MIN_BLOCK && b->size % TN__CCA_MIN_BLOCK == 0,
			      "block %p: size %zu", (void *)b->ptr, b->size);
			CHECK(!b->next || b->next->prev == b, "block %p: next's prev",
			      (void *)b->ptr);
			CHECK(b->stream == seg->head->stream,
			      "block %p: stream differs from segment", (void *)b->ptr);
			end += b->size;
			if (b->state == BLOCK_FREE) {
				CHECK(!b->next || b->next->state != BLOCK_FREE,
				      "blocks %p and %p: adjacent free blocks not merged",
				      (void *)b->ptr, (void *)b->next->ptr);
				nfree[seg->small]++;
				if (block_is_split(b))
					s.inactive_split_bytes += b->size;
				CHECK(b->requested == 0, "free block %p: requested %zu",
				      (void *)b->ptr, b->requested);
				continue;
			}
			s.active_bytes += b->size;
			s.requested_bytes += b->requested;
			if (b->state == BLOCK_ALLOCATED) {
				s.allocated_bytes += b->size;
				s.allocated_blocks++;
				nlive++;
				pthread_mutex_lock(&cca->map_lock);
				struct block *m = *map_find_locked(cca, b->ptr);
				pthread_mutex_unlock(&cca->map_lock);
				CHECK(m == b, "live block %p: not in the pointer map",
				      (void *)b->ptr);
			} else {
				CHECK(b->state == BLOCK_LOST || b->event_count > 0,
				      "pending block %p: no event", (void *)b->ptr);
				pending_blocks += (uint64_t)b->event_count;
			}
		}
		CHECK(end == seg->ptr + seg->size, "segment %p: blocks cover %zu of %zu bytes",
		      (void *)seg->ptr, (size_t)(end - seg->ptr), seg->size);
	}
	for (int small = 0; small < 2; small++) {
		const struct block *prev = NULL;
		size_t count = 0;
		int r = check_tree(dev->pools[small].root, &prev, small, &count);
		if (r)
			return r;
		CHECK(count == dev->pools[small].count && count == nfree[small],
		      "pool %d: %zu nodes, count %zu, %zu free blocks", small, count,
		      dev->pools[small].count, nfree[small]);
	}
	uint64_t npending = 0;
	for (struct pending *p = dev->pending; p; p = p->next) {
		CHECK(p->block &&
			      (p->block->state == BLOCK_PENDING || p->block->state == BLOCK_LOST),
		      "pending event of a block not pending");
		CHECK(p->next || dev->pending_tail == p, "pending list: bad tail");
		npending++;
	}
	CHECK(npending == pending_blocks, "%" PRIu64 " pending events, blocks expect %" PRIu64,
	      npending, pending_blocks);
	const tn_cuda_memory_stats *t = &dev->st;
#define SAME(f)                                                                          \
	CHECK(s.f == t->f, "device %d: " #f " is %" PRIu64 ", blocks say %" PRIu64, d, t->f, \
	      s.f)
	SAME(allocated_bytes);
	SAME(reserved_bytes);
	SAME(active_bytes);
	SAME(requested_bytes);
	SAME(inactive_split_bytes);
	SAME(allocated_blocks);
	SAME(segments);
	SAME(small_pool_reserved);
	SAME(large_pool_reserved);
#undef SAME
	CHECK(t->allocated_peak >= t->allocated_bytes && t->reserved_peak >= t->reserved_bytes,
	      "device %d: a peak below its value", d);
	(void)nlive;
	return 0;
}

int tn__cca_check(struct tn__cca *cca)
{
	size_t live = 0;
	for (int d = 0; d < cca->ndevices; d++) {
		struct device *dev = &cca->dev[d];
		pthread_mutex_lock(&dev->lock);
		int r = check_device_locked(cca, d);
		live += dev->st.allocated_blocks;
		pthread_mutex_unlock(&dev->lock);
		if (r)
			return r;
	}
	pthread_mutex_lock(&cca->map_lock);
	size_t n = 0;
	for (size_t i = 0; i < ((size_t)1 << cca->bucket_bits); i++)
		for (struct block *b = cca->buckets[i]; b; b = b->hnext)
			n++;
	size_t nlive = cca->nlive;
	pthread_mutex_unlock(&cca->map_lock);
	CHECK(n == nlive, "pointer map: %zu entries, count %zu", n, nlive);
	/* Only meaningful when no other thread allocates meanwhile, as in the tests. */
	CHECK(n == live, "pointer map: %zu entries, %zu live blocks", n, live);
	return 0;
}
