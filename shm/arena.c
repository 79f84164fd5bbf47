/* SPDX-License-Identifier: MIT */
/*
 * Arena files and handles: naming, creating and formatting the file, mapping it (read-write,
 * and read-only for sealed tensors), validating its header, attaching and detaching handles,
 * the observers told before a handle's mappings go, fork(), and NUMA placement of blocks.
 *
 * The lock and its undo log are in txn.c, the heap in heap.c, holds and client slots in
 * holds.c, raw blocks and the per-thread cache in tcache.c, the directory in directory.c,
 * statistics and fsck in admin.c, tensord's side in remote.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "arena_internal.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

static int check_file_name(const char *name, const char *fn)
{
	if (!name)
		return tn__error(TN_EINVAL, "%s: NULL arena name", fn);
	size_t n = strlen(name);
	if (!n || n > TN_ARENA_FILE_NAME_MAX || name[0] == '.')
		return tn__error(TN_EINVAL, "%s: arena name '%.40s' must have 1 to %d characters "
				 "and not start with '.'", fn, name, TN_ARENA_FILE_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return tn__error(TN_EINVAL, "%s: arena name '%.40s' has character 0x%02x "
					 "(letters, digits, '.', '_' and '-' only)", fn, name,
					 (unsigned char)c);
	}
	return 0;
}

/* Mount points of huge-page file systems, in /proc/mounts order: hugetlbfs (2 MiB pages)
 * first, then tmpfs mounted with huge=always or huge=within_size. */
static int find_huge_dir(char *buf, size_t len, enum tn_arena_backing *ret_backing)
{
	FILE *f = setmntent("/proc/mounts", "re");
	int found = 0;
	if (!f)
		return 0;
	for (int pass = 0; pass < 2 && !found; pass++) {
		rewind(f);
		struct mntent *m;
		while ((m = getmntent(f))) {
			bool hit = pass == 0 ? !strcmp(m->mnt_type, "hugetlbfs") &&
						       (!hasmntopt(m, "pagesize") ||
							strstr(m->mnt_opts, "pagesize=2M"))
					     : !strcmp(m->mnt_type, "tmpfs") &&
						       (strstr(m->mnt_opts, "huge=always") ||
							strstr(m->mnt_opts, "huge=within_size"));
			if (hit && access(m->mnt_dir, W_OK) == 0 &&
			    strlen(m->mnt_dir) < len) {
				strcpy(buf, m->mnt_dir);
				*ret_backing = pass == 0 ? TN_ARENA_BACKING_HUGETLBFS
							 : TN_ARENA_BACKING_TMPFS_HUGE;
				found = 1;
				break;
			}
		}
	}
	endmntent(f);
	return found;
}

static int make_path(char *buf, size_t len, const char *dir, const char *name, const char *fn)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
		return tn__error(TN_EINVAL, "%s: path %s/%s too long", fn, dir, name);
	return 0;
}

/* The backing of an open arena file, from its file system. */
static enum tn_arena_backing backing_of(int fd, const char *path, uint64_t *ret_page)
{
	struct statfs sf;
	*ret_page = 4096;
	if (fstatfs(fd, &sf) != 0)
		return TN_ARENA_BACKING_FILE;
	if ((uint64_t)sf.f_type == HUGETLBFS_MAGIC) {
		*ret_page = (uint64_t)sf.f_bsize;
		return TN_ARENA_BACKING_HUGETLBFS;
	}
	if ((uint64_t)sf.f_type != TMPFS_MAGIC)
		return TN_ARENA_BACKING_FILE;
	/* A tmpfs mounted with huge=: find its mount options. */
	enum tn_arena_backing b = TN_ARENA_BACKING_TMPFS;
	FILE *f = setmntent("/proc/mounts", "re");
	if (f) {
		struct mntent *m;
		size_t best = 0;
		while ((m = getmntent(f))) {
			size_t n = strlen(m->mnt_dir);
			if (strcmp(m->mnt_type, "tmpfs") || strncmp(path, m->mnt_dir, n) ||
			    (path[n] != '/' && n > 1) || n < best)
				continue;
			best = n;
			b = strstr(m->mnt_opts, "huge=always") || strstr(m->mnt_opts, "huge=within_size")
				    ? TN_ARENA_BACKING_TMPFS_HUGE
				    : TN_ARENA_BACKING_TMPFS;
		}
		endmntent(f);
	}
	if (b == TN_ARENA_BACKING_TMPFS_HUGE)
		*ret_page = ARENA_DATA_ALIGN;
	return b;
}

/* A figure of /proc/meminfo ("HugePages_Free"), or 0. */
static unsigned long long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long v = 0;
	size_t n = strlen(key);
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtoull(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* The huge page pool's size (vm.nr_hugepages), or -1 when it cannot be read. */
static long long nr_hugepages(void)
{
	unsigned long long v;
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "re");
	bool ok = f && fscanf(f, "%llu", &v) == 1;
	if (f)
		fclose(f);
	return ok ? (long long)v : -1;
}

/* As root, raise vm.nr_hugepages by what is missing for @pages more huge pages. *ret_before
 * gets the value it had when this raised it, else -1; *ret_set the value written. */
static void reserve_hugepages(uint64_t pages, long long *ret_before, unsigned long long *ret_set)
{
	int saved = errno;
	*ret_before = -1;
	unsigned long long avail = meminfo("HugePages_Free") - meminfo("HugePages_Rsvd");
	long long before = nr_hugepages();
	if (avail >= pages || before < 0) {
		errno = saved;
		return;
	}
	unsigned long long set = (unsigned long long)before + (pages - avail);
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "we");
	if (f) {
		if (fprintf(f, "%llu\n", set) > 0 && fclose(f) == 0) {
			*ret_before = before;
			*ret_set = set;
		}
	}
	errno = saved;
}

/* A creation that raised the pool failed: put vm.nr_hugepages back as it found it, unless
 * someone changed it since (then it is theirs). */
static void unreserve_hugepages(long long before, unsigned long long set)
{
	int saved = errno;
	if (before >= 0 && nr_hugepages() == (long long)set) {
		FILE *f = fopen("/proc/sys/vm/nr_hugepages", "we");
		if (f) {
			fprintf(f, "%lld\n", before);
			fclose(f);
		}
	}
	errno = saved;
}

static void fill_uuid(uint8_t uuid[16])
{
	int saved = errno;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, uuid, 16) : -1;
	if (fd >= 0)
		close(fd);
	if (n != 16) {
		uint64_t x = tn__now_ns() ^ (uint64_t)getpid() << 32;
		for (int i = 0; i < 16; i++, x = x * 6364136223846793005u + 1442695040888963407u)
			uuid[i] = (uint8_t)(x >> 56);
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
	errno = saved;
}

static int format(tn_arena *a, const tn_arena_options *o, enum tn_arena_backing backing,
		  uint64_t page)
{
	struct arena_header *h = a->hdr;
	uint64_t max_names = o->max_names;
	if (!max_names) {
		max_names = tn__arena_default_max_names(a->size);
	}
	uint64_t slots = 16;
	while (slots < max_names + max_names / 3)
		slots *= 2;
	h->magic = 0;
	h->version = ARENA_VERSION;
	h->header_bytes = (uint32_t)ARENA_HEADER_BYTES;
	fill_uuid(h->uuid);
	h->size = a->size;
	h->page_size = page;
	h->flags = o->flags;
	h->backing = backing;
	h->numa_policy = (uint32_t)o->numa_policy;
	h->numa_nodes = o->numa_nodes;
	h->clients_off = ARENA_HEADER_BYTES;
	h->max_clients = TN_ARENA_MAX_CLIENTS;
	h->client_bytes = sizeof(struct client_rec);
	h->dir_off = h->clients_off + (uint64_t)TN_ARENA_MAX_CLIENTS * sizeof(struct client_rec);
	h->dir_slots = (uint32_t)slots;
	h->entry_bytes = sizeof(struct dir_entry);
	h->max_names = max_names;
	h->data_off = tn__round_up(h->dir_off + slots * sizeof(struct dir_entry), ARENA_DATA_ALIGN);
	if (h->data_off + ((uint64_t)1 << 20) > a->size)
		return tn__error(TN_EINVAL, "tn_arena_create: %" PRIu64 " bytes leave no room for "
				 "a heap after %" PRIu64 " bytes of metadata (%" PRIu64
				 " names); make it larger or lower max_names", a->size, h->data_off,
				 max_names);
	h->data_size = a->size - h->data_off;
	h->create_ns = tn__now_ns();

	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	int r = pthread_mutex_init(&h->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (r)
		return tn__error(TN_EIO, "tn_arena_create: cannot make the lock: %s", strerror(r));

	tn__heap_format(a);
	h->magic = ARENA_MAGIC;
	/* Openers wait for READY: it is stored last, with release order. */
	atomic_store_explicit((_Atomic uint32_t *)&h->state, ARENA_STATE_READY,
			      memory_order_release);
	return 0;
}

/* Validate a mapped header; nothing past it is read before this passes. */
uint64_t tn__arena_default_max_names(uint64_t size)
{
	uint64_t n = size / (64 << 10);
	return n < 1024 ? 1024 : n > 65536 ? 65536 : n;
}

uint64_t tn__arena_max_names(const tn_arena *a)
{
	return a->max_names;
}

int tn__arena_validate(const tn_arena *a, const char *fn)
{
	const struct arena_header *h = a->hdr;
	uint32_t state = atomic_load_explicit((_Atomic uint32_t *)&h->state, memory_order_acquire);
	if (a->size < ARENA_MIN_SIZE || h->magic != ARENA_MAGIC)
		return tn__error(TN_EINVAL, "%s: %s is not a libtensor arena", fn, a->path);
	if (h->version != ARENA_VERSION)
		return tn__error(TN_EINVAL, "%s: %s has layout version %u; this library reads %u",
				 fn, a->path, h->version, ARENA_VERSION);
	if (state != ARENA_STATE_READY)
		return tn__error(TN_EBUSY, "%s: %s is still being created", fn, a->path);
	const char *bad = NULL;
	if (h->size != a->size)
		bad = "size";
	else if (h->header_bytes != ARENA_HEADER_BYTES || h->clients_off != ARENA_HEADER_BYTES)
		bad = "header size";
	else if (h->max_clients != TN_ARENA_MAX_CLIENTS || h->client_bytes != sizeof(struct client_rec))
		bad = "client table";
	else if (h->entry_bytes != sizeof(struct dir_entry) || !h->dir_slots ||
		 (h->dir_slots & (h->dir_slots - 1)) || h->max_names > h->dir_slots ||
		 h->dir_off != h->clients_off + (uint64_t)h->max_clients * h->client_bytes)
		bad = "directory";
	else if (h->data_off % ARENA_DATA_ALIGN ||
		 h->data_off < h->dir_off + (uint64_t)h->dir_slots * h->entry_bytes ||
		 h->data_off >= h->size || h->data_size != h->size - h->data_off)
		bad = "data region";
	else if (h->numa_policy > TN_NUMA_LOCAL || h->backing > TN_ARENA_BACKING_FILE)
		bad = "placement";
	else if (h->page_size < 4096 || h->page_size > ((uint64_t)1 << 30) ||
		 (h->page_size & (h->page_size - 1)) || h->data_off % h->page_size)
		bad = "page size";
	if (bad)
		return tn__error(TN_EINVAL, "%s: %s has a damaged header (%s)", fn, a->path, bad);
	return 0;
}

/* Map the file at a 2 MiB-aligned address, so that offsets aligned in the file are aligned
 * in memory too (huge pages, and the 2 MiB alignment of large blocks). */
static void *map_aligned(int fd, uint64_t size, int prot)
{
	size_t span = size + ARENA_DATA_ALIGN;
	uint8_t *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *at = (uint8_t *)tn__round_up((uintptr_t)r, ARENA_DATA_ALIGN);
	void *p = mmap(at, size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	int saved = errno;
	if (p == MAP_FAILED) {
		munmap(r, span);
		errno = saved;
		return MAP_FAILED;
	}
	/* Give back the parts of the reservation around the mapping. */
	if (at > r)
		munmap(r, (size_t)(at - r));
	if (r + span > at + size)
		munmap(at + size, (size_t)(r + span - (at + size)));
	errno = saved;
	return p;
}

/* Observers, newest first; pushed with release stores, walked after an acquire load. */
static _Atomic(struct tn__arena_observer *) observers;

void tn__arena_observe(struct tn__arena_observer *observer)
{
	struct tn__arena_observer *head = atomic_load_explicit(&observers, memory_order_relaxed);
	do
		observer->next = head;
	while (!atomic_compare_exchange_weak_explicit(&observers, &head, observer,
						      memory_order_release, memory_order_relaxed));
}

int tn__arena_mapping(const tn_arena *a, struct tn__arena_mapping *ret)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EINVAL, "not an arena handle of this process");
	*ret = (struct tn__arena_mapping){ a->base, a->ro, (size_t)a->size, a->read_only,
					   (size_t)a->page_size };
	return 0;
}

int tn__read_only_error(const tn_arena *a, const char *fn)
{
	return tn__error(TN_EPERM, "%s: arena %s is attached read-only", fn, a->path);
}

bool tn__arena_live(const tn_arena *a)
{
	return tn__arena_ok(a);
}

int tn__arena_check(const tn_arena *a, bool write, const char *fn)
{
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (write && a->read_only)
		return tn__read_only_error(a, fn);
	return 0;
}

void *tn__arena_upper(tn_arena *a)
{
	return a->upper;
}

static void destroy_handle(tn_arena *a)
{
	tn__tcache_forget(a);
	/* An observer that pinned the pages (a backend, for DMA) must forget them before they are
	 * unmapped. A fork child's inherited handle is never destroyed (tn_arena_unref refuses
	 * it), so observers hear only of handles this process made. */
	struct tn__arena_mapping map = { a->base, a->ro, (size_t)a->size, a->read_only,
					 (size_t)a->page_size };
	for (struct tn__arena_observer *o = atomic_load_explicit(&observers, memory_order_acquire);
	     o; o = o->next)
		o->unmapping(o, a, &map);
	if (a->ro)
		munmap(a->ro, a->size);
	if (a->base)
		munmap(a->base, a->size);
	if (a->fd >= 0)
		close(a->fd);
	pthread_mutex_destroy(&a->local_lock);
	tn__free(a->holds);
	tn__handle_free(a);
}

_Atomic unsigned tn__arena_fork_gen;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* In the child of a fork(): the parent's handles are refused from now on, and the thread
 * cache (blocks held by the parent's slot) is forgotten. */
static void atfork_child(void)
{
	atomic_fetch_add_explicit(&tn__arena_fork_gen, 1, memory_order_relaxed);
	tn__tcache_fork_child();
}

static void atfork_init(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static tn_arena *new_handle(void)
{
	pthread_once(&atfork_once, atfork_init);
	tn_arena *a = tn__handle_alloc(sizeof(*a), TN_MAGIC_ARENA);
	if (!a)
		return NULL;
	a->fork_gen = atomic_load_explicit(&tn__arena_fork_gen, memory_order_relaxed);
	a->fd = -1;
	a->slot = -1;
	atomic_init(&a->refcount, 1);
	pthread_mutex_init(&a->local_lock, NULL);
	return a;
}

/* Map the file (read-write and read-only) and validate it. */
static int map_file(tn_arena *a, const char *fn, bool fresh)
{
	struct stat st;
	int saved = errno;
	if (fstat(a->fd, &st) != 0)
		return tn__error(TN_EIO, "%s: %s: %s", fn, a->path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)ARENA_MIN_SIZE)
		return tn__error(TN_EINVAL, "%s: %s is not a libtensor arena (%lld bytes)", fn,
				 a->path, (long long)st.st_size);
	a->size = (uint64_t)st.st_size;
	/* A read-only handle's fd may be O_RDONLY, where PROT_WRITE would fail: never ask. */
	void *p = map_aligned(a->fd, a->size, a->read_only ? PROT_READ : PROT_READ | PROT_WRITE);
	if (p == MAP_FAILED) {
		int e = errno;
		errno = saved;
		return tn__error(e == ENOMEM ? TN_ENOMEM : e == EACCES ? TN_EPERM : TN_EIO,
				 "%s: cannot map %s: %s", fn, a->path, strerror(e));
	}
	a->base = p;
	a->hdr = p;
	if (!fresh) {
		int r = tn__arena_validate(a, fn);
		if (r)
			return r;
	}
	const struct arena_header *h = a->hdr; /* validated */
	a->clients_off = h->clients_off;
	a->dir_off = h->dir_off;
	a->data_off = h->data_off;
	a->data_size = h->data_size;
	a->page_size = h->page_size;
	a->max_names = h->max_names;
	a->max_clients = h->max_clients;
	a->dir_slots = h->dir_slots;
	memcpy(a->uuid, h->uuid, sizeof(a->uuid));
	if (a->read_only)
		return 0; /* the one mapping is read-only already */
	p = map_aligned(a->fd, a->size, PROT_READ);
	if (p == MAP_FAILED) {
		errno = saved;
		return tn__error(TN_ENOMEM, "%s: cannot map %s read-only", fn, a->path);
	}
	a->ro = p;
	return 0;
}

static int take_slot(tn_arena *a)
{
	return tn__claim_slot(a, getpid(), tn__proc_start_time(getpid()), &a->slot, NULL);
}

TN_EXPORT void tn_arena_options_init(tn_arena_options *o)
{
	if (o)
		*o = (tn_arena_options){ .size = (uint64_t)64 << 20 };
}

TN_EXPORT int tn_arena_create(const char *name, const tn_arena_options *opts, tn_arena **ret)
{
	static const char fn[] = "tn_arena_create";
	tn_arena_options o;
	char dir[4096];
	enum tn_arena_backing want = TN_ARENA_BACKING_TMPFS;
	int r, saved = errno;
	long long huge_before = -1; /* vm.nr_hugepages before this raised it */
	unsigned long long huge_set = 0;

	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_arena", fn);
	if ((r = check_file_name(name, fn)))
		return r;
	if (opts)
		o = *opts;
	else
		tn_arena_options_init(&o);
	if (o.flags & ~(TN_ARENA_HUGEPAGES | TN_ARENA_REQUIRE_HUGEPAGES | TN_ARENA_RESERVE_HUGEPAGES))
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, o.flags);
	if (o.flags & (TN_ARENA_REQUIRE_HUGEPAGES | TN_ARENA_RESERVE_HUGEPAGES))
		o.flags |= TN_ARENA_HUGEPAGES;
	if ((unsigned)o.numa_policy > TN_NUMA_LOCAL)
		return tn__error(TN_EINVAL, "%s: unknown NUMA policy %d", fn, (int)o.numa_policy);
	bool masked = o.numa_policy == TN_NUMA_BIND || o.numa_policy == TN_NUMA_INTERLEAVE ||
		      o.numa_policy == TN_NUMA_PREFERRED;
	if (masked && !o.numa_nodes)
		return tn__error(TN_EINVAL, "%s: NUMA policy %d needs a node mask", fn,
				 (int)o.numa_policy);
	int nodes = tn__numa_node_count();
	if (masked && nodes < 64 && o.numa_nodes >> nodes)
		return tn__error(TN_ERANGE, "%s: node mask 0x%" PRIx64 " names nodes this machine "
				 "lacks (it has %d)", fn, o.numa_nodes, nodes);
	if (o.size < ARENA_MIN_SIZE || o.size > ((uint64_t)1 << 46))
		return tn__error(TN_EINVAL, "%s: size %" PRIu64 " outside [4 MiB, 64 TiB]", fn,
				 o.size);
	if (o.max_names > (1u << 24))
		return tn__error(TN_EINVAL, "%s: max_names %u above %u", fn, o.max_names, 1u << 24);
	if (o.dir) {
		if (strlen(o.dir) >= sizeof(dir))
			return tn__error(TN_EINVAL, "%s: directory name too long", fn);
		strcpy(dir, o.dir);
	} else if (!(o.flags & TN_ARENA_HUGEPAGES) || !find_huge_dir(dir, sizeof(dir), &want)) {
		strcpy(dir, "/dev/shm");
	}

	tn_arena *a = new_handle();
	if (!a)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	if ((r = make_path(a->path, sizeof(a->path), dir, name, fn)))
		goto fail;
	a->fd = open(a->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, o.mode ? o.mode : 0600);
	if (a->fd < 0) {
		int e = errno;
		r = tn__error(e == EEXIST ? TN_EEXIST : e == EACCES ? TN_EPERM
						       : e == ENOENT ? TN_ENOENT
								     : TN_EIO,
			      "%s: cannot create %s: %s", fn, a->path, strerror(e));
		goto fail;
	}
	uint64_t page;
	enum tn_arena_backing backing = backing_of(a->fd, a->path, &page);
	if ((o.flags & TN_ARENA_REQUIRE_HUGEPAGES) && backing != TN_ARENA_BACKING_HUGETLBFS &&
	    backing != TN_ARENA_BACKING_TMPFS_HUGE) {
		r = tn__error(TN_ENOTSUP, "%s: no huge pages for %s (no hugetlbfs or huge tmpfs "
			      "mount, and shared memory's transparent huge pages are off)", fn,
			      a->path);
		goto fail_unlink;
	}
	a->size = tn__round_up(o.size, page > ARENA_DATA_ALIGN ? page : ARENA_DATA_ALIGN);
	if (ftruncate(a->fd, (off_t)a->size) != 0) {
		int e = errno;
		r = tn__error(e == EFBIG || e == ENOSPC ? TN_ENOSPC : TN_EIO,
			      "%s: cannot size %s to %" PRIu64 " bytes: %s", fn, a->path, a->size,
			      strerror(e));
		goto fail_unlink;
	}
	/* hugetlbfs reserves a shared mapping's pages when it is made: raise the pool first. */
	if (backing == TN_ARENA_BACKING_HUGETLBFS && (o.flags & TN_ARENA_RESERVE_HUGEPAGES) &&
	    geteuid() == 0)
		reserve_hugepages(a->size / page, &huge_before, &huge_set);
	void *p = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		r = backing == TN_ARENA_BACKING_HUGETLBFS && e == ENOMEM
			    ? tn__error(TN_ENOSPC, "%s: not enough free huge pages for %" PRIu64
					" bytes in %s (vm.nr_hugepages; TN_ARENA_RESERVE_HUGEPAGES "
					"raises it as root)", fn, a->size, a->path)
			    : tn__error(TN_ENOMEM, "%s: cannot map %s: %s", fn, a->path, strerror(e));
		goto fail_unlink;
	}
	a->base = p;
	a->hdr = p;
	/* Placement is a property of the shared file's pages: set it on the mapping before
	 * fallocate allocates them. */
	if (o.numa_policy != TN_NUMA_DEFAULT &&
	    (r = tn__numa_apply(p, a->size, (int)o.numa_policy, o.numa_nodes, false)) < 0) {
		r = tn__error(r == -EINVAL ? TN_EINVAL : TN_EIO, "%s: NUMA placement failed: %s",
			      fn, strerror(-r));
		goto fail_unlink;
	}
	/* Allocate every page now, so that a full file system is an error here and not a
	 * SIGBUS at the first touch of some page later. */
	int fr = fallocate(a->fd, 0, 0, (off_t)a->size) ? errno : 0;
	if (fr == EOPNOTSUPP) {
		/* Without fallocate nothing guarantees the pages exist, and a later first touch
		 * could raise SIGBUS: refuse. */
		r = tn__error(TN_ENOTSUP, "%s: %s cannot preallocate (no fallocate)", fn, a->path);
		goto fail_unlink;
	}
	if (fr) {
		r = tn__error(fr == ENOSPC ? TN_ENOSPC : TN_EIO,
			      "%s: cannot allocate %" PRIu64 " bytes for %s: %s%s", fn, a->size,
			      a->path, strerror(fr),
			      backing == TN_ARENA_BACKING_HUGETLBFS ? " (not enough huge pages)" : "");
		goto fail_unlink;
	}
	if ((r = format(a, &o, backing, page)))
		goto fail_unlink;
	munmap(a->base, a->size);
	a->base = NULL;
	if ((r = map_file(a, fn, false)) || (r = take_slot(a)))
		goto fail_unlink;
	errno = saved;
	*ret = a;
	return 0;
fail_unlink:
	unlink(a->path);
fail:
	destroy_handle(a);
	/* After the file and its mapping are gone, so that its pages are free again. */
	unreserve_hugepages(huge_before, huge_set);
	errno = saved;
	return r;
}

static int attach(tn_arena *a, const char *fn, tn_arena **ret)
{
	int r;
	if ((r = map_file(a, fn, false)) || (r = take_slot(a))) {
		destroy_handle(a);
		return r;
	}
	*ret = a;
	return 0;
}

static int resolve(const char *name, const char *dir, char *path, size_t len, const char *fn)
{
	int r;
	if ((r = check_file_name(name, fn)))
		return r;
	if (dir)
		return make_path(path, len, dir, name, fn);
	char hd[4096];
	enum tn_arena_backing b;
	if (find_huge_dir(hd, sizeof(hd), &b) && !make_path(path, len, hd, name, fn) &&
	    access(path, F_OK) == 0)
		return 0;
	return make_path(path, len, "/dev/shm", name, fn);
}

TN_EXPORT int tn_arena_open(const char *name, const char *dir, tn_arena **ret)
{
	static const char fn[] = "tn_arena_open";
	int r, saved = errno;
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_arena", fn);
	tn_arena *a = new_handle();
	if (!a)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	if ((r = resolve(name, dir, a->path, sizeof(a->path), fn))) {
		destroy_handle(a);
		return r;
	}
	a->fd = open(a->path, O_RDWR | O_CLOEXEC);
	if (a->fd < 0) {
		int e = errno;
		errno = saved;
		r = tn__error(e == ENOENT ? TN_ENOENT : e == EACCES ? TN_EPERM : TN_EIO,
			      "%s: cannot open %s: %s", fn, a->path, strerror(e));
		destroy_handle(a);
		return r;
	}
	r = attach(a, fn, ret);
	errno = saved;
	return r;
}

/* A new handle over a duplicate of @fd, named by the file's path. */
static int handle_for_fd(int fd, const char *fn, tn_arena **ret)
{
	int saved = errno;
	tn_arena *a = new_handle();
	if (!a)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	snprintf(a->path, sizeof(a->path), "fd:%d", fd);
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, a->path, sizeof(a->path) - 1);
	if (n > 0)
		a->path[n] = 0;
	a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (a->fd < 0) {
		int e = errno;
		errno = saved;
		destroy_handle(a);
		return tn__error(e == EBADF ? TN_EBADF : TN_EIO, "%s: fd %d: %s", fn, fd,
				 strerror(e));
	}
	errno = saved;
	*ret = a;
	return 0;
}

TN_EXPORT int tn_arena_attach_fd(int fd, tn_arena **ret)
{
	static const char fn[] = "tn_arena_attach_fd";
	int saved = errno;
	if (!ret || fd < 0)
		return tn__error(TN_EINVAL, "%s: %s", fn, ret ? "negative fd" : "NULL ret_arena");
	tn_arena *a;
	int r = handle_for_fd(fd, fn, &a);
	if (r)
		return r;
	r = attach(a, fn, ret);
	errno = saved;
	return r;
}

int tn__arena_attach_slot(int fd, int slot, unsigned flags, const struct tn__arena_remote *remote,
			  tn_arena **ret)
{
	static const char fn[] = "tn__arena_attach_slot";
	bool ro = flags & TN__ATTACH_READ_ONLY;
	int saved = errno;
	if (!ret || fd < 0)
		return tn__error(TN_EINVAL, "%s: %s", fn, ret ? "negative fd" : "NULL ret_arena");
	if (flags & ~TN__ATTACH_READ_ONLY)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (slot < 0 || slot >= TN_ARENA_MAX_CLIENTS)
		return tn__error(TN_EINVAL, "%s: slot %d outside [0, %d)", fn, slot,
				 TN_ARENA_MAX_CLIENTS);
	if (ro && (!remote || !remote->hold || !remote->release))
		return tn__error(TN_EINVAL, "%s: a read-only attachment needs remote hold and "
				 "release", fn);
	tn_arena *a;
	int r = handle_for_fd(fd, fn, &a);
	if (r)
		return r;
	a->read_only = ro;
	if ((r = map_file(a, fn, false)))
		goto fail;
	/* The daemon wrote the record before it passed us the fd. Read once: another process
	 * may write it. */
	const volatile struct client_rec *c = tn__client_at(a, slot);
	uint64_t state = c->state_gen, start = c->start_time;
	int64_t pid = c->pid;
	if ((uint32_t)state != CLIENT_ATTACHED || pid != getpid() ||
	    start != tn__proc_start_time(getpid())) {
		r = tn__error(TN_EPERM, "%s: slot %d of arena %s is not assigned to this process "
			      "(pid %d)", fn, slot, a->path, (int)getpid());
		goto fail;
	}
	a->slot = slot;
	/* Only now: a failed attachment never calls the caller's detach. */
	if (remote) {
		a->remote = *remote;
		a->has_remote = true;
	}
	errno = saved;
	*ret = a;
	return 0;
fail:
	destroy_handle(a);
	errno = saved;
	return r;
}

TN_EXPORT tn_arena *tn_arena_ref(tn_arena *a)
{
	if (!tn__arena_ok(a))
		return NULL;
	atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
	return a;
}

TN_EXPORT tn_arena *tn_arena_unref(tn_arena *a)
{
	if (!tn__arena_ok(a))
		return NULL;
	if (atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) != 1)
		return NULL;
	if (a->read_only) {
		/* Every local hold keeps a reference, so none is left unless a storage was
		 * leaked past its arena; give back whatever the daemon still holds for us. */
		for (size_t i = 0; i < a->holds_cap; i++)
			if (a->holds[i].block)
				a->remote.release(a->remote.ctx, a->holds[i].block);
	} else if (a->slot >= 0 && tn__arena_lock_any(a) == 0) {
		/* No storage of ours is left, so no hold: release the slot (dropping any hold
		 * bit a raw allocation that was never freed still has). In a damaged arena too:
		 * the walk is validated, and a slot that holds nothing is released. */
		tn__reclaim_locked(a, a->slot);
		tn__arena_unlock(a);
	}
	struct tn__arena_remote remote = a->remote;
	bool has_remote = a->has_remote;
	int slot = a->slot;
	destroy_handle(a);
	if (has_remote && remote.detach)
		remote.detach(remote.ctx, slot);
	return NULL;
}

TN_EXPORT int tn_arena_destroy(const char *name, const char *dir, unsigned flags)
{
	static const char fn[] = "tn_arena_destroy";
	char path[4096];
	int r;
	if (flags & ~TN_ARENA_FORCE)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if ((r = resolve(name, dir, path, sizeof(path), fn)))
		return r;
	if (!(flags & TN_ARENA_FORCE)) {
		tn_arena *a;
		/* Attach to count the live clients; a file that is not an arena may go. */
		r = tn_arena_open(name, dir, &a);
		/* Only an arena known to be idle, or a file that is no arena, goes: a full client
		 * table (TN_EBUSY) or a broken lock says nothing about who still uses it. */
		if (r && r != TN_EINVAL)
			return r;
		if (r == 0) {
			int busy = 0, pid = getpid();
			if ((r = tn__arena_lock(a))) {
				tn_arena_unref(a);
				return r;
			}
			for (int i = 0; i < (int)a->max_clients; i++) {
				struct client_rec *c = tn__client_at(a, i);
				if (i != a->slot && c->pid != pid && tn__client_alive(c))
					busy++;
			}
			tn__arena_unlock(a);
			tn_arena_unref(a);
			if (busy)
				return tn__error(TN_EBUSY, "%s: %d other processes are attached to "
						 "%s (TN_ARENA_FORCE destroys it anyway)", fn, busy,
						 path);
		}
	}
	int saved = errno;
	if (unlink(path) != 0) {
		int e = errno;
		errno = saved;
		return tn__error(e == ENOENT ? TN_ENOENT : e == EACCES ? TN_EPERM : TN_EIO,
				 "%s: cannot remove %s: %s", fn, path, strerror(e));
	}
	return 0;
}

TN_EXPORT const char *tn_arena_path(const tn_arena *a)
{
	return tn__arena_ok(a) ? a->path : NULL;
}

TN_EXPORT int tn_arena_fd(const tn_arena *a)
{
	return tn__arena_ok(a) ? a->fd : TN_EBADF;
}

TN_EXPORT int tn_arena_slot(const tn_arena *a)
{
	return tn__arena_ok(a) ? a->slot : TN_EBADF;
}

TN_EXPORT int tn_arena_place(tn_arena *a, void *ptr, enum tn_numa_policy policy, uint64_t nodes)
{
	static const char fn[] = "tn_arena_place";
	int r = tn__arena_check(a, true, fn);
	if (r)
		return r;
	uint64_t off = tn__arena_block_of(a, ptr, NULL);
	if (!off || !tn__block_sane(a, off) ||
	    tn__block_magic(tn__block_at(a, off)) != BLOCK_MAGIC_USED)
		return tn__error(TN_EBADF, "%s: %p is not an allocated block of arena %s", fn, ptr,
				 a->path);
	if ((unsigned)policy > TN_NUMA_LOCAL)
		return tn__error(TN_EINVAL, "%s: unknown NUMA policy %d", fn, (int)policy);
	int count = tn__numa_node_count();
	if (count < 64 && nodes >> count)
		return tn__error(TN_ERANGE, "%s: node mask 0x%" PRIx64 " names nodes this machine "
				 "lacks (it has %d)", fn, nodes, count);
	uint64_t start = off + BLOCK_HDR, len = tn__block_at(a, off)->size - BLOCK_HDR;
	uint64_t page = a->page_size;
	if (start % page || len % page)
		return tn__error(TN_EINVAL, "%s: the block at %p (%" PRIu64 " bytes) shares pages "
				 "with other blocks; blocks of 64 KiB or more can be placed", fn, ptr,
				 len);
	r = tn__numa_apply(a->base + start, len, (int)policy, nodes, true);
	if (r == -EINVAL)
		return tn__error(TN_EINVAL, "%s: policy %d needs a non-empty node mask", fn,
				 (int)policy);
	if (r)
		return tn__error(TN_EIO, "%s: mbind: %s", fn, strerror(-r));
	return 0;
}

TN_EXPORT int64_t tn_arena_residency(tn_arena *a, uint64_t *ret_pages, int nnodes)
{
	static const char fn[] = "tn_arena_residency";
	if (!tn__arena_ok(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (nnodes < 0 || (nnodes && !ret_pages))
		return tn__error(TN_EINVAL, "%s: %d nodes, ret_pages %p", fn, nnodes,
				 (void *)ret_pages);
	/* move_pages sees only pages mapped into this process: map them all first (the file's
	 * pages all exist since fallocate, so this allocates nothing). */
	uint8_t *data = a->base + a->data_off;
	int saved = errno;
#ifdef MADV_POPULATE_READ
	if (madvise(data, a->data_size, MADV_POPULATE_READ) != 0)
#endif
		for (uint64_t i = 0; i < a->data_size; i += a->page_size)
			(void)*(volatile uint8_t *)(data + i);
	errno = saved;
	int64_t n = tn__numa_residency(data, a->data_size, a->page_size, ret_pages,
				       nnodes);
	if (n < 0)
		return tn__error(TN_EIO, "%s: move_pages: %s", fn, strerror((int)-n));
	return n;
}
