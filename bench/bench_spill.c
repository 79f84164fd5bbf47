/* SPDX-License-Identifier: MIT */
/*
 * Spilling's costs (issue 21), each beside its peer in the same run:
 *
 * 1. Restoring a spilled tensor (256 MiB by default): a lookup of a name tensord wrote to disk,
 *    timed from the call to the tensor in hand: the lookup's request (a futex word), the
 *    daemon's watcher and loop, its worker's read of the file into a new block (io_uring,
 *    O_DIRECT), the change that names the block, and the wake of the lookup. The file is made
 *    cold first (its pages dropped from the page cache). The peer: reading the same file cold
 *    with io_uring, O_DIRECT, 8 MiB requests 8 deep into a buffer of this process: the
 *    device's rate, which a restore cannot beat. Also the write side: the spill, from the
 *    watermark change to the entry on disk, beside writing the same bytes with io_uring and
 *    fsync.
 * 2. What the last-use clock costs a lookup: tn_arena_lookup of a block already held, with the
 *    clock's write and without (tn__arena_lookup_clock, in alternating rounds), and the
 *    coarse clock's read alone.
 *
 * A private tensord (the one built here) runs on a socket in a temporary directory, with its
 * spill directory beside it (on /tmp's file system, named in the output), and is stopped at
 * the end. BENCH_SPILL_MIB sets the tensor's size, BENCH_REPS the rounds (medians).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include <tensor.h>
#include <tensor/tensord.h>

#include "../shm/arena_internal.h"
#include "bench_util.h"

#define CHECK(call)                                                                         \
	do {                                                                                \
		int r_ = (call);                                                            \
		if (r_ < 0) {                                                               \
			fprintf(stderr, "bench_spill: %s: %s\n", #call, tn_last_error());   \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char dir[64], spill_dir[128], sock_path[128], arena_dir[128];

/* ---- the peer: a cold io_uring read and write ------------------------------------------------- */

#define CHUNK ((size_t)8 << 20)
#define DEPTH 8

static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/* Move @len bytes between @buf and @fd with io_uring, DEPTH requests of CHUNK in flight (a read
 * rounds each request up to whole pages, for O_DIRECT). */
static void uring_io(int fd, unsigned char *buf, size_t len, bool write)
{
	struct io_uring ring;
	if (io_uring_queue_init(DEPTH, &ring, 0)) {
		perror("bench_spill: io_uring_queue_init");
		exit(1);
	}
	size_t next = 0, done = 0;
	unsigned inflight = 0;
	while (done < len) {
		while (inflight < DEPTH && next < len) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			size_t n = len - next < CHUNK ? len - next : CHUNK;
			if (write)
				io_uring_prep_write(sqe, fd, buf + next, (unsigned)n, next);
			else
				io_uring_prep_read(sqe, fd, buf + next,
						   (unsigned)((n + 4095) / 4096 * 4096), next);
			next += n;
			inflight++;
		}
		io_uring_submit(&ring);
		struct io_uring_cqe *cqe;
		io_uring_wait_cqe(&ring, &cqe);
		if (cqe->res <= 0) {
			fprintf(stderr, "bench_spill: peer %s: %s\n", write ? "write" : "read",
				strerror(-cqe->res));
			exit(1);
		}
		done += (size_t)cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
	}
	io_uring_queue_exit(&ring);
}

/* Read @len bytes of @path (cold) into @buf with O_DIRECT. */
static double uring_read(const char *path, unsigned char *buf, size_t len)
{
	drop_cache(path);
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	double t0 = now();
	uring_io(fd, buf, len, false);
	double t = now() - t0;
	close(fd);
	return t;
}

/* Write @len bytes of @buf to a new file @path (buffered, as a spill writes), then fsync: what
 * a spill's write costs at least. */
static double uring_write(const char *path, unsigned char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	double t0 = now();
	uring_io(fd, buf, len, true);
	fsync(fd);
	double t = now() - t0;
	close(fd);
	unlink(path);
	return t;
}

/* ---- 1. spill and restore ---------------------------------------------------------------------- */

static uint32_t entry_flags(tn_arena *a, const char *name)
{
	tn_arena_entry e;
	CHECK(tn_arena_info(a, name, &e));
	return e.flags;
}

/* The spill file of @name (spilled). */
static void spill_file(tn_arena *a, const char *name, char *buf, size_t cap)
{
	tn_arena_entry e;
	CHECK(tn_arena_info(a, name, &e));
	snprintf(buf, cap, "%s/sp/%016llx.safetensors", spill_dir,
		 (unsigned long long)tn__entry_at(a, e.handle.index)->block);
}

/* Lower the watermarks until @name is on disk; returns the seconds from the change. */
static double spill(tn_arena *a, const char *name, uint64_t heap)
{
	double t0 = now();
	CHECK(tn_arena_set_watermarks(a, heap / 100, heap / 200));
	while (!(entry_flags(a, name) & TN_ARENA_ENTRY_SPILLED)) {
		if (now() - t0 > 120) {
			fprintf(stderr, "bench_spill: %s was not spilled in 120 s\n", name);
			exit(1);
		}
		usleep(200);
	}
	double t = now() - t0;
	CHECK(tn_arena_set_watermarks(a, heap / 100 * 99, heap / 100 * 98));
	return t;
}

static void bench_restore(tn_arena *a, size_t bytes, int reps)
{
	uint64_t heap;
	tn_arena_stats s;
	CHECK(tn_arena_stat(a, &s));
	heap = s.heap_bytes;
	int64_t n = (int64_t)(bytes / 4);
	tn_storage *st;
	tn_tensor *t;
	CHECK(tn_storage_new_with_allocator(TN_CPU, bytes, tn_arena_allocator(a), &st));
	CHECK(tn_tensor_new(st, 0, 1, &n, NULL, TN_FLOAT32, &t));
	tn_storage_unref(st);
	uint32_t *d = tn_tensor_data(t);
	uint64_t x = 88172645463325252u, sum = 0;
	for (int64_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		d[i] = (uint32_t)x;
		sum += d[i];
	}
	CHECK(tn_arena_publish(a, "big", t, TN_ARENA_EVICTABLE, NULL));
	tn_tensor_unref(t);

	unsigned char *buf = mmap(NULL, bytes + 4096, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	double *tr = calloc((size_t)reps, sizeof(double)), *tp = calloc((size_t)reps, sizeof(double));
	double *ts = calloc((size_t)reps, sizeof(double)), *tw = calloc((size_t)reps, sizeof(double));
	char path[512], wpath[512];
	snprintf(wpath, sizeof(wpath), "%s/peer-write", spill_dir);
	for (int r = 0; r < reps; r++) {
		ts[r] = spill(a, "big", heap);
		spill_file(a, "big", path, sizeof(path));
		/* The peer first, then the restore, both from a cold file. */
		tp[r] = uring_read(path, buf, bytes);
		drop_cache(path);
		double t0 = now();
		CHECK(tn_arena_lookup(a, "big", &t, NULL));
		tr[r] = now() - t0;
		const uint32_t *back = tn_tensor_data(t);
		uint64_t check = 0;
		for (int64_t i = 0; i < n; i++)
			check += back[i];
		if (check != sum || memcmp(back, buf + 80, 4096)) {
			/* buf holds the file: its 8-byte length and header come first. */
			uint64_t hl;
			memcpy(&hl, buf, 8);
			if (check != sum || memcmp(back, buf + 8 + hl, 4096)) {
				fprintf(stderr, "bench_spill: the restored tensor differs\n");
				exit(1);
			}
		}
		tn_tensor_unref(t);
		tw[r] = uring_write(wpath, buf, bytes);
	}
	double mr = bench_median(tr, reps), mp = bench_median(tp, reps);
	double ms = bench_median(ts, reps), mw = bench_median(tw, reps);
	double mib = (double)bytes / (1 << 20);
	printf("1. Spill and restore of a %.0f MiB float32 tensor, median of %d rounds\n", mib, reps);
	printf("   %-52s %9s %10s %9s\n", "", "ms", "GB/s", "x peer");
	printf("   %-52s %9.1f %10.2f %9s\n", "peer: io_uring O_DIRECT read, cold, 8x8 MiB", mp * 1e3,
	       (double)bytes / mp / 1e9, "1.00");
	printf("   %-52s %9.1f %10.2f %9.2f\n", "restore: tn_arena_lookup of the spilled name, cold",
	       mr * 1e3, (double)bytes / mr / 1e9, mr / mp);
	printf("   %-52s %9.1f %10.2f %9s\n", "peer: io_uring write of the same bytes + fsync",
	       mw * 1e3, (double)bytes / mw / 1e9, "1.00");
	printf("   %-52s %9.1f %10.2f %9.2f\n", "spill: watermark change to the entry on disk", ms * 1e3,
	       (double)bytes / ms / 1e9, ms / mw);
	printf("   (a restore is the peer's read plus the request, the allocation, the change that\n"
	       "    names the block and the wake; a spill adds the watermark check's period, 10 ms)\n");
	CHECK(tn_arena_unpublish(a, "big"));
	munmap(buf, bytes + 4096);
	free(tr);
	free(tp);
	free(ts);
	free(tw);
}

/* ---- 2. the last-use clock --------------------------------------------------------------------- */

#define CLOCK_CALLS 200000

static double lookup_round(tn_arena *a, bool clock_on)
{
	tn__arena_lookup_clock = clock_on;
	tn_tensor *x;
	double t0 = now();
	for (int i = 0; i < CLOCK_CALLS; i++) {
		if (tn_arena_lookup(a, "w", &x, NULL))
			exit(1);
		tn_tensor_unref(x);
	}
	double t = (now() - t0) / CLOCK_CALLS;
	tn__arena_lookup_clock = true;
	return t;
}

static void bench_clock(int reps)
{
	tn_arena_options o;
	tn_arena_options_init(&o);
	o.size = 16 << 20;
	char name[64];
	snprintf(name, sizeof(name), "bench-spill-clock-%d", (int)getpid());
	tn_arena *a;
	CHECK(tn_arena_create(name, &o, &a));
	int64_t n = 1024;
	tn_storage *st;
	tn_tensor *t, *keep;
	CHECK(tn_storage_new_with_allocator(TN_CPU, 4096, tn_arena_allocator(a), &st));
	CHECK(tn_tensor_new(st, 0, 1, &n, NULL, TN_FLOAT32, &t));
	tn_storage_unref(st);
	CHECK(tn_arena_publish(a, "w", t, 0, NULL));
	tn_tensor_unref(t);
	CHECK(tn_arena_lookup(a, "w", &keep, NULL)); /* the block stays held: no mapping work */
	double *on = calloc((size_t)reps, sizeof(double)), *off = calloc((size_t)reps, sizeof(double));
	double *diff = calloc((size_t)reps, sizeof(double));
	lookup_round(a, true);
	for (int r = 0; r < reps; r++) {
		/* Alternating, so that the machine's drift falls on both. */
		off[r] = lookup_round(a, false);
		on[r] = lookup_round(a, true);
		diff[r] = on[r] - off[r];
	}
	struct timespec ts;
	double t0 = now();
	for (int i = 0; i < 10 * CLOCK_CALLS; i++)
		clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	double read_ns = (now() - t0) / (10 * CLOCK_CALLS) * 1e9;
	printf("\n2. What the last-use clock costs a lookup (tn_arena_lookup of a held block and its\n"
	       "   unref, %d calls a round, median of %d alternating rounds)\n", CLOCK_CALLS, reps);
	printf("   %-44s %8.1f ns\n", "without the clock (before)", bench_median(off, reps) * 1e9);
	printf("   %-44s %8.1f ns\n", "with the clock (after)", bench_median(on, reps) * 1e9);
	printf("   %-44s %8.1f ns (%+.1f%%)\n", "paired difference, median",
	       bench_median(diff, reps) * 1e9,
	       100 * bench_median(diff, reps) / bench_median(off, reps));
	printf("   %-44s %8.1f ns\n", "CLOCK_REALTIME_COARSE read alone (vDSO)", read_ns);
	tn_tensor_unref(keep);
	tn_arena_unref(a);
	tn_arena_destroy(name, NULL, 0);
	free(on);
	free(off);
	free(diff);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *daemon_path = argc > 1 ? argv[1] : TENSORD_PATH;
	const char *e = getenv("BENCH_SPILL_MIB");
	size_t mib = e ? strtoul(e, NULL, 10) : 256;
	e = getenv("BENCH_REPS");
	int reps = e ? atoi(e) : 5;
	if (reps < 1)
		reps = 1;
	snprintf(dir, sizeof(dir), "/tmp/bench-spill.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(spill_dir, sizeof(spill_dir), "%s/spill", dir);
	snprintf(sock_path, sizeof(sock_path), "%s/s", dir);
	snprintf(arena_dir, sizeof(arena_dir), "/dev/shm/bench-spill-%d", (int)getpid());
	char conf[160];
	snprintf(conf, sizeof(conf), "%s/tensord.conf", dir);
	FILE *f = fopen(conf, "w");
	if (!f)
		return 1;
	fprintf(f, "spill_dir = %s\nevict_interval_ms = 10\n", spill_dir);
	fclose(f);
	char log[160];
	snprintf(log, sizeof(log), "%s/log", dir);
	pid_t d = fork();
	if (d == 0) {
		/* Its log beside: a warning of a lock held a while is the benchmark's doing. */
		int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (lfd >= 0) {
			dup2(lfd, 1);
			dup2(lfd, 2);
		}
		execl(daemon_path, daemon_path, "--foreground", "--socket", sock_path, "--arena-dir",
		      arena_dir, "--config", conf, "--log-level", "warn", (char *)NULL);
		perror("exec tensord");
		_exit(127);
	}
	tn_tensord *c = NULL;
	for (int i = 0; i < 500 && tn_tensord_connect(sock_path, &c); i++)
		usleep(10000);
	if (!c) {
		fprintf(stderr, "bench_spill: tensord did not start: %s\n", tn_last_error());
		return 1;
	}
	struct statfs sf;
	statfs(dir, &sf);
	printf("bench_spill: spilling to disk and back (tensord %s; spill directory on %s, "
	       "file system 0x%lx)\n\n", daemon_path, dir, (unsigned long)sf.f_type);
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = (uint64_t)(mib * 2 + 64) << 20;
	CHECK(tn_tensord_arena_create(c, "sp", &o));
	tn_arena *a;
	CHECK(tn_tensord_arena_open(c, "sp", 0, &a));
	CHECK(tn_arena_set_spill(a, true));
	bench_restore(a, mib << 20, reps);
	tn_arena_unref(a);
	CHECK(tn_tensord_arena_destroy(c, "sp", TN_ARENA_FORCE));
	CHECK(tn_tensord_shutdown(c));
	tn_tensord_close(c);
	waitpid(d, NULL, 0);
	rmdir(spill_dir);
	rmdir(arena_dir);
	unlink(conf);
	unlink(log);
	rmdir(dir);
	bench_clock(reps * 4 + 1);
	return 0;
}
