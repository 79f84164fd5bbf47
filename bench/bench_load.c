/* SPDX-License-Identifier: MIT */
/*
 * bench_load - how fast tensord's loader (tnd_load, tensord/loadsave.h) moves a 1 GiB
 * safetensors file into an arena, beside what the machine does with the same file:
 *
 *  (a) tnd_load into an arena on /dev/shm (tensors published, then unpublished each round);
 *  (b) read() of the whole file into memory from malloc (fresh each round, as a program that
 *      loads a file into the heap would);
 *  (c) a plain io_uring loop of buffered 8 MiB reads, 8 in flight, into one reused 64 MiB
 *      buffer: the machine's io_uring figure, the target (a) is measured against;
 *  (d) the same loop with O_DIRECT: the device's own speed, for the cold case;
 *  (e) the loop of (c) into one 1 GiB buffer faulted in beforehand, each chunk to its own
 *      place, as a load must: the cost of writing 1 GiB of distinct memory rather than
 *      reusing 64 MiB;
 *  (f) the loop of (e) with IOSQE_ASYNC on every read, as tnd_load does on a machine with
 *      more than one CPU: the reads of cached pages run on io-wq's workers, on every CPU,
 *      instead of one after the other in the submitting thread. It is the figure to hold (a)
 *      against when the file is warm: it has what (a) has but aligned chunks (the kernel
 *      copies from the page cache a third slower when the file offset and the destination
 *      differ modulo 32 bytes, as they do for tensors in real files and in this one).
 *
 * Each cold (the file's pages dropped before every round: posix_fadvise DONTNEED, and as
 * root also 1 written to /proc/sys/vm/drop_caches; the program says which) and warm (every
 * page cached before the round, checked with mincore). The methods take turns round by round,
 * so a burst of load from the rest of a shared machine falls on all of them. memcpy bandwidth
 * is measured in the same run. Figures are medians over BENCH_REPS rounds (default 5).
 *
 * The file is made in $TMPDIR, or /var/tmp when $TMPDIR is unset or on tmpfs (a file on tmpfs
 * is never cold), and removed at exit. It holds 1 GiB of float16, bfloat16 and float32 tensors
 * of assorted sizes after a 3-byte tensor, so that, as in real files, no tensor starts at an
 * aligned offset.
 *
 * Usage: bench_load            (about a minute)
 *        BENCH_REPS=N          rounds per figure, 1 to 31
 *        BENCH_LOAD_HUGETLBFS=DIR  put the arena of (a) on the hugetlbfs mounted at DIR
 *                              (2 MiB pages, reserved as root), to tell the cost of 4 KiB
 *                              tmpfs pages from the loader's own
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <liburing.h>

#include "bench_util.h"
#include "formats.h"
#include "loadsave.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define CHUNK ((size_t)8 << 20)
#define DEPTH 8
#define TMPFS_MAGIC_ 0x01021994

static char file_path[512];
static char arena_name[64];

static void cleanup(void)
{
	if (file_path[0])
		unlink(file_path);
	if (arena_name[0])
		tn_arena_destroy(arena_name, getenv("BENCH_LOAD_HUGETLBFS") ? getenv("BENCH_LOAD_HUGETLBFS") : "/dev/shm", TN_ARENA_FORCE);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void die(const char *what)
{
	fprintf(stderr, "bench_load: %s: %s\n", what, errno ? strerror(errno) : tn_last_error());
	cleanup();
	exit(1);
}

/* ---- the file ------------------------------------------------------------------------------- */

static uint64_t make_file(const char *dir)
{
	enum { N = 97 };
	struct tn__fmt_tensor t[N];
	char names[N][32];
	void *header;
	size_t header_len;
	uint64_t file_size, left = GIB - 3;

	snprintf(file_path, sizeof(file_path), "%s/bench_load-%d.safetensors", dir, (int)getpid());
	memset(t, 0, sizeof(t));
	for (int i = 0; i < N; i++) {
		static const enum tn_dtype dts[] = { TN_FLOAT16, TN_BFLOAT16, TN_FLOAT32 };
		snprintf(names[i], sizeof(names[i]), "layers.%02d.weight", i);
		t[i].name = names[i];
		if (i == 0) {
			t[i].dtype = TN_UINT8;
			t[i].ndim = 1;
			t[i].sizes[0] = 3;
			continue;
		}
		t[i].dtype = dts[i % 3];
		size_t is = tn_dtype_size(t[i].dtype);
		/* Sizes from 1 to 31 MiB and change; the last takes what is left. */
		uint64_t bytes = i == N - 1 ? left : ((uint64_t)(i % 31) + 1) * MIB + 4 * (uint64_t)i;
		if (bytes > left)
			bytes = left;
		bytes -= bytes % is;
		t[i].ndim = 2;
		t[i].sizes[0] = (int64_t)(bytes / is / 2);
		t[i].sizes[1] = 2;
		left -= (uint64_t)t[i].sizes[0] * 2 * is;
	}
	if (tn__safetensors_write(t, N, NULL, 0, &header, &header_len, &file_size))
		die("tn__safetensors_write");
	int fd = open(file_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die(file_path);
	unsigned char *buf = malloc(CHUNK);
	if (!buf)
		die("malloc");
	if (write(fd, header, header_len) != (ssize_t)header_len)
		die("write");
	uint32_t x = 12345;
	for (uint64_t done = header_len; done < file_size;) {
		size_t n = file_size - done < CHUNK ? (size_t)(file_size - done) : CHUNK;
		for (size_t i = 0; i < n; i += 4) {
			x = x * 1664525u + 1013904223u;
			memcpy(buf + i, &x, n - i < 4 ? n - i : 4);
		}
		if (write(fd, buf, n) != (ssize_t)n)
			die("write");
		done += n;
	}
	if (fsync(fd))
		die("fsync");
	close(fd);
	free(buf);
	free(header);
	return file_size;
}

static bool use_drop_caches;

static void make_cold(int fd)
{
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("posix_fadvise");
	if (use_drop_caches) {
		int p = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
		if (p < 0 || write(p, "1", 1) != 1)
			use_drop_caches = false;
		if (p >= 0)
			close(p);
	}
}

static double resident_fraction(int fd, uint64_t size)
{
	void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	size_t pages = (size + 4095) / 4096, n = 0;
	unsigned char *vec = malloc(pages);
	if (m == MAP_FAILED || !vec || mincore(m, size, vec))
		die("mincore");
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(m, size);
	free(vec);
	return (double)n / (double)pages;
}

static void make_warm(int fd, uint64_t size)
{
	static unsigned char buf[1 << 20];
	for (uint64_t off = 0; off < size; off += sizeof(buf))
		if (pread(fd, buf, sizeof(buf), (off_t)off) < 0)
			die("pread");
	if (resident_fraction(fd, size) < 0.999)
		fprintf(stderr, "bench_load: warning: only %.1f%% of the file stays cached\n",
			100 * resident_fraction(fd, size));
}

/* ---- the methods ---------------------------------------------------------------------------- */

static tn_arena *arena;

static void run_tnd_load(int fd, uint64_t size)
{
	struct tnd_xfer_result r;
	tn_arena_entry *e;
	size_t n;
	(void)size;
	if (tnd_load(arena, fd, TND_FORMAT_AUTO, "b/", 0, NULL, NULL, NULL, &r))
		die("tnd_load");
	if (tn_arena_list(arena, "b/", &e, &n))
		die("tn_arena_list");
	for (size_t i = 0; i < n; i++)
		tn_arena_unpublish(arena, e[i].name);
	free(e);
}

static void run_read_malloc(int fd, uint64_t size)
{
	unsigned char *p = malloc(size);
	if (!p)
		die("malloc");
	for (uint64_t done = 0; done < size;) {
		ssize_t n = pread(fd, p + done, size - done, (off_t)done);
		if (n <= 0)
			die("pread");
		done += (uint64_t)n;
	}
	/* Keep the compiler from dropping the buffer. */
	if (p[size / 2] == 0x5a && p[size - 1] == 0x5a)
		fputc(' ', stderr);
	free(p);
}

static unsigned char *ring_buf; /* DEPTH * CHUNK, page aligned, faulted in once */
static unsigned char *whole_buf; /* the file's size, faulted in once: (e) */
static bool into_whole, use_async;

static void uring_loop(int fd, uint64_t size, bool direct)
{
	struct io_uring ring;
	int dfd = fd;
	if (direct) {
		dfd = open(file_path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (dfd < 0)
			die("open O_DIRECT");
	}
	if (io_uring_queue_init(DEPTH, &ring, 0))
		die("io_uring_queue_init");
	uint64_t next = 0, done = 0;
	unsigned inflight = 0;
	uintptr_t free_slots = ((uintptr_t)1 << DEPTH) - 1;
	while (done < size) {
		while (next < size && free_slots) {
			int slot = __builtin_ctzl(free_slots);
			free_slots &= ~((uintptr_t)1 << slot);
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			size_t len = size - next < CHUNK ? (size_t)(size - next) : CHUNK;
			if (direct)
				len = (len + 4095) & ~(size_t)4095;
			unsigned char *dst = into_whole ? whole_buf + next
							: ring_buf + (size_t)slot * CHUNK;
			io_uring_prep_read(sqe, dfd, dst, (unsigned)len, next);
			if (use_async)
				sqe->flags |= IOSQE_ASYNC;
			io_uring_sqe_set_data64(sqe, (uint64_t)slot | (next << 8));
			next += CHUNK;
			inflight++;
		}
		struct io_uring_cqe *cqe;
		if (io_uring_submit_and_wait(&ring, 1) < 0 || io_uring_wait_cqe(&ring, &cqe))
			die("io_uring_wait_cqe");
		if (cqe->res <= 0) {
			errno = -cqe->res;
			die("io_uring read");
		}
		uint64_t d = io_uring_cqe_get_data64(cqe);
		uint64_t off = d >> 8;
		uint64_t want = size - off < CHUNK ? size - off : CHUNK;
		/* A regular file that does not change reads whole chunks (O_DIRECT: to the end). */
		if ((uint64_t)cqe->res < want) {
			errno = 0;
			die("short read");
		}
		done += want;
		free_slots |= (uintptr_t)1 << (d & 0xff);
		inflight--;
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	if (direct)
		close(dfd);
}

static void run_uring(int fd, uint64_t size)
{
	uring_loop(fd, size, false);
}

static void run_uring_direct(int fd, uint64_t size)
{
	uring_loop(fd, size, true);
}

static void run_uring_whole(int fd, uint64_t size)
{
	into_whole = true;
	uring_loop(fd, size, false);
	into_whole = false;
}

static void run_uring_whole_async(int fd, uint64_t size)
{
	into_whole = use_async = true;
	uring_loop(fd, size, false);
	into_whole = use_async = false;
}

static double memcpy_gbs(int reps)
{
	size_t n = 256 * MIB;
	unsigned char *a = malloc(n), *b = malloc(n);
	double t[31];
	if (!a || !b)
		die("malloc");
	memset(a, 1, n);
	memset(b, 2, n);
	for (int r = 0; r < reps; r++) {
		double t0 = bench_now_ns();
		memcpy(b, a, n);
		t[r] = bench_now_ns() - t0;
		a[r] = b[n - 1 - (size_t)r];
	}
	free(a);
	free(b);
	return (double)n / bench_median(t, reps);
}

struct method {
	const char *name;
	void (*run)(int fd, uint64_t size);
	double t[2][31]; /* cold, warm */
};

int main(void)
{
	const char *reps_env = getenv("BENCH_REPS"), *dir = getenv("TMPDIR");
	int reps = reps_env ? atoi(reps_env) : 5;
	struct statfs sfs;
	if (reps < 1 || reps > 31)
		reps = 5;
	if (!dir || statfs(dir, &sfs) || sfs.f_type == TMPFS_MAGIC_)
		dir = "/var/tmp";
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	use_drop_caches = geteuid() == 0;

	uint64_t size = make_file(dir);
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(file_path);

	tn_arena_options o;
	tn_arena_options_init(&o);
	o.size = size + 256 * MIB;
	snprintf(arena_name, sizeof(arena_name), "bench_load-%d", (int)getpid());
	const char *huge = getenv("BENCH_LOAD_HUGETLBFS");
	if (huge) {
		o.dir = huge;
		o.flags |= TN_ARENA_HUGEPAGES | TN_ARENA_REQUIRE_HUGEPAGES | TN_ARENA_RESERVE_HUGEPAGES;
	}
	if (tn_arena_create(arena_name, &o, &arena))
		die("tn_arena_create");
	ring_buf = mmap(NULL, DEPTH * CHUNK, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	whole_buf = mmap(NULL, size + CHUNK, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (ring_buf == MAP_FAILED || whole_buf == MAP_FAILED)
		die("mmap");

	struct method m[] = {
		{ "(a) tnd_load into an arena", run_tnd_load, { { 0 } } },
		{ "(b) read() into malloc", run_read_malloc, { { 0 } } },
		{ "(c) io_uring loop, buffered", run_uring, { { 0 } } },
		{ "(d) io_uring loop, O_DIRECT", run_uring_direct, { { 0 } } },
		{ "(e) io_uring loop, 1 GiB buffer", run_uring_whole, { { 0 } } },
		{ "(f) (e) on io-wq workers", run_uring_whole_async, { { 0 } } },
	};
	const int nm = (int)(sizeof(m) / sizeof(m[0]));

	/* One untimed pass of each, warm: the arena's pages get mapped, the code paged in. */
	make_warm(fd, size);
	for (int k = 0; k < nm; k++)
		m[k].run(fd, size);
	double bw = memcpy_gbs(reps);
	for (int r = 0; r < reps; r++)
		for (int warm = 0; warm < 2; warm++)
			for (int k = 0; k < nm; k++) {
				if (warm)
					make_warm(fd, size);
				else
					make_cold(fd);
				double t0 = bench_now_ns();
				m[k].run(fd, size);
				m[k].t[warm][r] = bench_now_ns() - t0;
			}

	printf("bench_load: a %.2f GiB safetensors file (97 tensors, none aligned) in %s, %d rounds, "
	       "medians\n", (double)size / (double)GIB, dir, reps);
	printf("cold: posix_fadvise(DONTNEED)%s before each round; warm: every page cached\n",
	       use_drop_caches ? " and drop_caches=1 (root)" : " only (not root: no drop_caches)");
	printf("memcpy bandwidth (256 MiB, 1 thread): %.2f GB/s\n\n", bw);
	printf("%-32s %10s %8s %10s %8s\n", "method", "cold ms", "GB/s", "warm ms", "GB/s");
	double med[8][2];
	for (int k = 0; k < nm; k++) {
		for (int w = 0; w < 2; w++)
			med[k][w] = bench_median(m[k].t[w], reps);
		printf("%-32s %10.1f %8.2f %10.1f %8.2f\n", m[k].name, med[k][0] / 1e6,
		       (double)size / med[k][0], med[k][1] / 1e6, (double)size / med[k][1]);
	}
	printf("\nratios (time of (c) / time of the method: 1.00 is the io_uring figure, higher is "
	       "faster)\n");
	for (int k = 0; k < nm; k++)
		printf("%-32s cold %5.2f  warm %5.2f\n", m[k].name, med[2][0] / med[k][0],
		       med[2][1] / med[k][1]);
	printf("(a) against (f), warm (both on io-wq workers; 1.00: as fast): %.2f\n",
	       med[5][1] / med[0][1]);
	printf("tnd_load warm vs memcpy of the same bytes: %.2f of memcpy bandwidth\n",
	       ((double)size / med[0][1]) / bw);
	close(fd);
	tn_arena_unref(arena);
	return 0;
}
