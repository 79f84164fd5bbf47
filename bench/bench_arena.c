/* SPDX-License-Identifier: MIT */
/*
 * bench_arena - the shared-memory arena's costs beside the allocators people would use instead,
 * all measured in one run on the same machine:
 *
 *  0. the machine's memory bandwidth (memcpy of 128 MiB, 1 and 2 threads), the ceiling for
 *     anything that touches every byte;
 *  1. allocation+free pairs at 64 B, 4 KiB, 1 MiB and 64 MiB, one pair at a time and in
 *     batches, on 1 and 2 threads: tn_arena_alloc/tn_arena_free in an arena on /dev/shm
 *     against glibc malloc, jemalloc and mimalloc. The malloc peers run in child processes:
 *     this program runs itself again with --malloc-worker (and LD_PRELOAD naming jemalloc or
 *     mimalloc, none for glibc), sends it one round at a time on a pipe and reads its figures
 *     back, so the four allocators take turns round by round and a burst of load from the
 *     rest of a shared machine falls on all of them rather than on one. 64 MiB blocks have
 *     every page touched after allocation, and page faults are counted;
 *  2. tn_arena_publish/unpublish, and tn_arena_lookup/tn_arena_lookup_handle in the publishing
 *     process and in a second one (forked; it opens the arena itself);
 *  3. how long a second process (fork+exec) takes to open the arena, look up a published 1 MiB,
 *     64 MiB or 1 GiB tensor and read its first and last elements, which must not grow with the
 *     size;
 *  4. how soon a process waiting for a name (tn_arena_lookup_wait, asleep on the arena's
 *     futex) has it after another publishes it, beside the machine's own cross-process wakeup
 *     (a byte on a pipe to a process blocked in read) and a consumer that polls every 1 ms; and
 *     what a publish costs with nobody waiting and with a waiter to wake.
 *
 * Every figure is a median over rounds (BENCH_REPS, default 11). Nothing here fails on speed:
 * the program exits non-zero only when something does not work (an arena cannot be created, a
 * looked-up tensor holds the wrong values). The arenas it creates are named after its process
 * ID and destroyed at exit, on every error path and on SIGINT/SIGTERM.
 *
 * Usage: bench_arena                 (about 30 s on 2 cores)
 *        BENCH_REPS=N                rounds per figure, 3 to 63 (default 11)
 *        BENCH_ONLY=part,...         only these of bandwidth, alloc, lookup, get, wake
 * Internal modes, run by bench_arena itself:
 *        bench_arena --malloc-worker (commands on stdin, one result line each on stdout)
 *        bench_arena --get ARENA NAME NUMEL FIRST LAST
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensor.h>

#include "bench_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define MAX_THREADS 2
#define MAX_BATCH 64
#define ARENA_DIR "/dev/shm"
#ifndef LIBDIR /* where Debian puts libjemalloc.so.2 and libmimalloc.so.2 */
#define LIBDIR "/usr/lib/x86_64-linux-gnu/"
#endif

/* ---- time, faults, medians ------------------------------------------------------------------ */

/* $BENCH_ONLY: a comma-separated list of the parts to run (bandwidth, alloc, lookup, get);
 * default all. */
static bool selected(const char *part)
{
	const char *only = getenv("BENCH_ONLY");
	char list[256], want[64];
	if (!only || !*only)
		return true;
	snprintf(list, sizeof(list), ",%s,", only);
	snprintf(want, sizeof(want), ",%s,", part);
	return strstr(list, want) != NULL;
}

/* Keep the compiler from eliding an allocation whose block is never used (GCC removes
 * malloc/free pairs): the block's address escapes into an empty asm. */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

/* "16.2 ns", "3.41 us", "27.3 ms": @ns in a unit that keeps three significant digits. */
static const char *fmt_time(char *buf, size_t n, double ns)
{
	if (ns < 0)
		snprintf(buf, n, "n/a");
	else if (ns < 1e3)
		snprintf(buf, n, "%.1f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, n, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, n, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, n, "%.2f s", ns / 1e9);
	return buf;
}

static const char *fmt_size(char *buf, size_t n, size_t bytes)
{
	if (bytes >= GIB && bytes % GIB == 0)
		snprintf(buf, n, "%zu GiB", bytes / GIB);
	else if (bytes >= MIB && bytes % MIB == 0)
		snprintf(buf, n, "%zu MiB", bytes / MIB);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(buf, n, "%zu KiB", bytes / 1024);
	else
		snprintf(buf, n, "%zu B", bytes);
	return buf;
}

/* ---- arenas this process made, removed at exit and on signals -------------------------------- */

static pid_t main_pid;
static char made_names[2][64];
static char made_paths[2][128]; /* for the signal handler, which may only unlink(2) */
static tn_arena *made_arenas[2];

static void destroy_made(int i)
{
	if (!made_names[i][0])
		return;
	if (tn_arena_destroy(made_names[i], ARENA_DIR, TN_ARENA_FORCE) != 0)
		fprintf(stderr, "bench_arena: %s\n", tn_last_error());
	made_names[i][0] = '\0';
	made_paths[i][0] = '\0';
	made_arenas[i] = tn_arena_unref(made_arenas[i]);
}

static void cleanup(void)
{
	/* A forked child runs no atexit handler (it leaves with _exit), but be sure. */
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < 2; i++)
		destroy_made(i);
}

static void on_signal(int sig)
{
	for (int i = 0; i < 2; i++)
		if (made_paths[i][0])
			unlink(made_paths[i]);
	_exit(128 + sig);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("bench_arena: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1); /* cleanup() destroys the arenas */
}

/* Create the arena "bench-arena-PID-@what" of @size bytes on /dev/shm in slot @i; *ret is
 * borrowed: destroy_made(@i) removes the file and drops the handle. Returns TN_ENOSPC when
 * /dev/shm has no room; any other failure is fatal. */
static int make_arena(int i, const char *what, uint64_t size, tn_arena **ret)
{
	tn_arena_options o;
	tn_arena_options_init(&o);
	o.size = size;
	o.max_names = 1024;
	o.dir = ARENA_DIR;
	snprintf(made_names[i], sizeof(made_names[i]), "bench-arena-%d-%s", (int)main_pid, what);
	int r = tn_arena_create(made_names[i], &o, ret);
	if (r == TN_ENOSPC) {
		made_names[i][0] = '\0';
		return r;
	}
	if (r)
		die("%s", tn_last_error());
	made_arenas[i] = *ret;
	snprintf(made_paths[i], sizeof(made_paths[i]), "%s", tn_arena_path(*ret));
	return 0;
}

/* ---- child processes that speak lines on pipes ----------------------------------------------- */

/*
 * Run this program again as "bench_arena @args..." with its stdin and stdout on pipes
 * (*ret_to and *ret_from; @ret_to may be NULL for a child that reads nothing). @preload: NULL
 * keeps the environment, "" removes LD_PRELOAD, anything else is put in LD_PRELOAD.
 */
static pid_t spawn_self(char *const args[], const char *preload, FILE **ret_to, FILE **ret_from)
{
	int in[2] = { -1, -1 }, out[2];
	if ((ret_to && pipe2(in, O_CLOEXEC)) || pipe2(out, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		if ((ret_to && dup2(in[0], 0) < 0) || dup2(out[1], 1) < 0)
			_exit(127);
		if (preload && !*preload)
			unsetenv("LD_PRELOAD");
		else if (preload)
			setenv("LD_PRELOAD", preload, 1);
		/* /proc/self/exe is the program itself even behind libtool's wrapper script, whose
		 * LD_LIBRARY_PATH the child inherits. */
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (ret_to) {
		close(in[0]);
		*ret_to = fdopen(in[1], "w");
	}
	close(out[1]);
	*ret_from = fdopen(out[0], "r");
	if ((ret_to && !*ret_to) || !*ret_from)
		die("fdopen: %s", strerror(errno));
	return pid;
}

struct peer {
	const char *name; /* "glibc", "jemalloc", "mimalloc" */
	const char *lib;  /* the library to preload, or NULL for glibc */
	bool ok;          /* measured; otherwise @why says why not */
	char why[160];
	pid_t pid;
	FILE *to, *from;
};

static void peer_stop(struct peer *p, const char *why)
{
	if (why && p->ok)
		snprintf(p->why, sizeof(p->why), "%s", why);
	p->ok = false;
	if (p->to)
		fclose(p->to);
	if (p->from)
		fclose(p->from);
	p->to = p->from = NULL;
	if (p->pid > 0) {
		int st = 0;
		waitpid(p->pid, &st, 0);
		if (why && WIFSIGNALED(st))
			snprintf(p->why, sizeof(p->why), "%s (the worker died of signal %d)", why,
				 WTERMSIG(st));
	}
	p->pid = 0;
}

/* Send one command line on @to and read the one-line answer from @from into @reply. */
__attribute__((format(printf, 5, 6))) static int ask(FILE *to, FILE *from, char *reply,
						     size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vfprintf(to, fmt, ap);
	va_end(ap);
	if (w < 0 || fflush(to) != 0 || !fgets(reply, (int)n, from))
		return -1;
	reply[strcspn(reply, "\n")] = '\0';
	return 0;
}

/* ---- allocation+free loops, for the arena (in this process) and the malloc workers ---------- */

struct allocator {
	void *(*alloc)(void *ctx, size_t n);
	int (*free)(void *ctx, void *p);
	void *ctx;
};

static void *malloc_alloc(void *ctx, size_t n)
{
	return malloc(n);
}

static int malloc_free(void *ctx, void *p)
{
	free(p);
	return 0;
}

static void *arena_alloc(void *ctx, size_t n)
{
	void *p;
	return tn_arena_alloc(ctx, n, &p) == 0 ? p : NULL;
}

static int arena_free(void *ctx, void *p)
{
	return tn_arena_free(ctx, p);
}

struct loop {
	const struct allocator *al;
	size_t size;
	int batch;    /* 1: alloc, free; B: B allocs, then B frees in the order allocated */
	long pairs;   /* per thread, a multiple of batch */
	bool touch;   /* write a byte in every page of each block */
	size_t page;
	pthread_barrier_t *start;
	double t0, t1;
	long faults;
	char err[200];
};

static void *loop_run(void *arg)
{
	struct loop *l = arg;
	void *blocks[MAX_BATCH];
	long f0;

	pthread_barrier_wait(l->start);
	f0 = bench_minflt(RUSAGE_THREAD);
	l->t0 = bench_now_ns();
	for (long i = 0; i < l->pairs; i += l->batch) {
		for (int j = 0; j < l->batch; j++) {
			char *p = l->al->alloc(l->al->ctx, l->size);
			if (!p) {
				const char *why = l->al->alloc == arena_alloc ? tn_last_error()
									      : "NULL";
				snprintf(l->err, sizeof(l->err),
					 "allocation of %zu bytes failed: %s", l->size, why);
				while (j-- > 0)
					l->al->free(l->al->ctx, blocks[j]);
				goto out;
			}
			if (l->touch)
				for (size_t o = 0; o < l->size; o += l->page)
					((volatile char *)p)[o] = 1;
			escape(p);
			blocks[j] = p;
		}
		for (int j = 0; j < l->batch; j++)
			if (l->al->free(l->al->ctx, blocks[j]) != 0 && !l->err[0])
				snprintf(l->err, sizeof(l->err), "free failed: %s",
					 tn_last_error());
	}
out:
	l->t1 = bench_now_ns();
	l->faults = bench_minflt(RUSAGE_THREAD) - f0;
	return NULL;
}

struct round_result {
	double ns;     /* wall time over the pairs each thread made */
	double faults; /* minor faults of all threads over all pairs */
};

/* Run @fn on @threads jobs at once, job i at @jobs + i * @size: the caller runs job 0, new
 * threads the others. A thread that cannot be made is fatal (the jobs' barrier waits for it). */
static void run_team(void *(*fn)(void *), void *jobs, size_t size, int threads)
{
	pthread_t tid[MAX_THREADS];
	for (int i = 1; i < threads; i++)
		if ((errno = pthread_create(&tid[i], NULL, fn, (char *)jobs + size * (size_t)i)) != 0)
			die("pthread_create: %s", strerror(errno));
	fn(jobs);
	for (int i = 1; i < threads; i++)
		pthread_join(tid[i], NULL);
}

/* One round: @threads threads (the caller is the first) each make @pairs pairs at once. */
static int loop_round(const struct allocator *al, size_t size, int batch, int threads, long pairs,
		      bool touch, struct round_result *ret, char *err, size_t errlen)
{
	struct loop l[MAX_THREADS];
	pthread_barrier_t start;

	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++) {
		l[i] = (struct loop){ .al = al, .size = size, .batch = batch, .pairs = pairs,
				      .touch = touch, .page = (size_t)sysconf(_SC_PAGESIZE),
				      .start = &start };
	}
	run_team(loop_run, l, sizeof(l[0]), threads);
	pthread_barrier_destroy(&start);

	double t0 = l[0].t0, t1 = l[0].t1;
	long faults = 0;
	for (int i = 0; i < threads; i++) {
		if (l[i].err[0]) {
			snprintf(err, errlen, "%s", l[i].err);
			return -1;
		}
		t0 = l[i].t0 < t0 ? l[i].t0 : t0;
		t1 = l[i].t1 > t1 ? l[i].t1 : t1;
		faults += l[i].faults;
	}
	ret->ns = (t1 - t0) / (double)pairs;
	ret->faults = (double)faults / (double)(pairs * threads);
	return 0;
}

/* Which malloc this process really got: the preload may have failed to load. */
static const char *malloc_in_use(void)
{
	if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init"))
		return "sanitizer";
	if (dlsym(RTLD_DEFAULT, "mallctl"))
		return "jemalloc";
	if (dlsym(RTLD_DEFAULT, "mi_malloc"))
		return "mimalloc";
	return "glibc";
}

/* --malloc-worker: "run SIZE BATCH THREADS PAIRS TOUCH" -> "ok NS FAULTS" or "err WHY". */
static int malloc_worker(void)
{
	static const struct allocator al = { malloc_alloc, malloc_free, NULL };
	char line[256], err[200];

	printf("hello %s\n", malloc_in_use());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		size_t size;
		int batch, threads, touch;
		long pairs;
		struct round_result r;
		int n = sscanf(line, "run %zu %d %d %ld %d", &size, &batch, &threads, &pairs,
			       &touch);
		if (n != 5 || batch < 1 || batch > MAX_BATCH || threads < 1 ||
		    threads > MAX_THREADS || pairs < batch)
			printf("err bad command\n");
		else if (loop_round(&al, size, batch, threads, pairs, touch, &r, err, sizeof(err)))
			printf("err %s\n", err);
		else
			printf("ok %.4f %.4f\n", r.ns, r.faults);
		fflush(stdout);
	}
	return 0;
}

/* Start the worker of @p, or say in p->why why it is not measured. */
static void peer_start(struct peer *p)
{
	static char *const args[] = { "bench_arena", "--malloc-worker", NULL };
	char reply[64], want[160];

	p->ok = false;
	if (p->lib && access(p->lib, R_OK) != 0) {
		snprintf(p->why, sizeof(p->why), "%s not found (Debian: apt-get install %s)",
			 p->lib,
			 strcmp(p->name, "jemalloc") == 0 ? "libjemalloc2" : "libmimalloc2.0");
		return;
	}
	if (p->lib && SANITIZED) {
		snprintf(p->why, sizeof(p->why), "not measured in a sanitizer build (the sanitizer "
			 "replaces malloc and must be loaded first)");
		return;
	}
	p->pid = spawn_self(args, p->lib ? p->lib : "", &p->to, &p->from);
	p->ok = true;
	if (!fgets(reply, sizeof(reply), p->from)) {
		peer_stop(p, "the worker did not start");
		return;
	}
	snprintf(want, sizeof(want), "hello %s\n", p->lib ? p->name : "glibc");
	if (strcmp(reply, want) != 0 && !(SANITIZED && !p->lib)) {
		reply[strcspn(reply, "\n")] = '\0';
		snprintf(want, sizeof(want), "LD_PRELOAD did not take (the worker says '%s')",
			 reply);
		peer_stop(p, want);
	}
}

/* ---- 0. memory bandwidth --------------------------------------------------------------------- */

struct copy_job {
	char *dst;
	const char *src;
	size_t n;
	pthread_barrier_t *start;
	double t0, t1;
};

static void *copy_run(void *arg)
{
	struct copy_job *j = arg;
	pthread_barrier_wait(j->start);
	j->t0 = bench_now_ns();
	memcpy(j->dst, j->src, j->n);
	escape(j->dst);
	j->t1 = bench_now_ns();
	return NULL;
}

/* memcpy bandwidth in GB/s (bytes per ns), counting the bytes read and written, as STREAM does. */
static double copy_gbps(char *dst, const char *src, size_t n, int threads, int reps)
{
	double t[64];
	reps = reps > 64 ? 64 : reps;
	for (int r = -1; r < reps; r++) {
		struct copy_job j[MAX_THREADS];
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, (unsigned)threads);
		size_t part = n / (size_t)threads;
		for (int i = 0; i < threads; i++)
			j[i] = (struct copy_job){ .dst = dst + part * (size_t)i,
						  .src = src + part * (size_t)i, .n = part,
						  .start = &start };
		run_team(copy_run, j, sizeof(j[0]), threads);
		pthread_barrier_destroy(&start);
		double t0 = j[0].t0, t1 = j[0].t1;
		for (int i = 1; i < threads; i++) {
			t0 = j[i].t0 < t0 ? j[i].t0 : t0;
			t1 = j[i].t1 > t1 ? j[i].t1 : t1;
		}
		if (r >= 0) /* round -1 warms up */
			t[r] = t1 - t0;
	}
	return 2.0 * (double)(n / (size_t)threads * (size_t)threads) / bench_median(t, reps);
}

/* ---- 1. allocation+free pairs ---------------------------------------------------------------- */

struct alloc_case {
	size_t size;
	int batch;
	int threads;
	long pairs; /* per thread in the warm-up round; the others are sized from it */
	bool touch;
	int reps;   /* rounds */
};

enum { ARENA, GLIBC, JEMALLOC, MIMALLOC, NALLOC };

#define REPS_64M 7     /* rounds at most for 64 MiB blocks */
#define ROUND_NS 2e6   /* the length of a round, where one pair is shorter */

static struct peer peers[NALLOC] = {
	[GLIBC] = { .name = "glibc", .lib = NULL },
	[JEMALLOC] = { .name = "jemalloc", .lib = LIBDIR "libjemalloc.so.2" },
	[MIMALLOC] = { .name = "mimalloc", .lib = LIBDIR "libmimalloc.so.2" },
};

/* Measure case @c on the arena and on every peer still measured, and print its row; the
 * medians go to @ret_ns and @ret_faults (-1 for an allocator not measured). */
static void alloc_case_row(const struct allocator *arena_al, const struct alloc_case *c,
			   double *ret_ns, double *ret_faults)
{
	const int reps = c->reps;
	double ns[NALLOC][64], flt[NALLOC][64], m[NALLOC];
	char reply[256], err[200], b1[32], b2[32];
	long pairs[NALLOC];
	bool ok[NALLOC];

	for (int k = 0; k < NALLOC; k++) {
		ok[k] = k == ARENA || peers[k].ok;
		pairs[k] = c->pairs;
	}
	/* Round -1 warms up (the arena's first touch of its pages, the peers' heaps) and sizes
	 * each allocator's rounds to last about ROUND_NS: on a shared machine a longer round is
	 * more likely to lose the CPU to another process, which would count against the slower
	 * allocator. The order of the four turns by one each round. */
	for (int r = -1; r < reps; r++) {
		for (int i = 0; i < NALLOC; i++) {
			int k = (i + r + 1) % NALLOC;
			struct peer *p = &peers[k];
			struct round_result rr;
			if (!ok[k])
				continue;
			if (k == ARENA) {
				if (loop_round(arena_al, c->size, c->batch, c->threads, pairs[k],
					       c->touch, &rr, err, sizeof(err)))
					die("arena: %s", err);
			} else if (ask(p->to, p->from, reply, sizeof(reply),
				       "run %zu %d %d %ld %d\n", c->size, c->batch, c->threads,
				       pairs[k], (int)c->touch) != 0) {
				peer_stop(p, "the worker stopped answering");
				ok[k] = false;
				continue;
			} else if (sscanf(reply, "ok %lf %lf", &rr.ns, &rr.faults) != 2) {
				/* A failed round (out of memory?) loses this case only. */
				fprintf(stderr, "bench_arena: %s: %s\n", p->name, reply);
				ok[k] = false;
				continue;
			}
			if (r >= 0) {
				ns[k][r] = rr.ns;
				flt[k][r] = rr.faults;
			} else {
				double n = ROUND_NS / (rr.ns > 1 ? rr.ns : 1);
				n = n < 1 << 22 ? n : 1 << 22;
				pairs[k] = (long)n / c->batch * c->batch;
				pairs[k] = pairs[k] > c->batch ? pairs[k] : c->batch;
			}
		}
	}
	printf("   %-7s %-6s %3d |", fmt_size(b1, sizeof(b1), c->size),
	       c->batch > 1 ? "batch" : "pair", c->threads);
	for (int k = 0; k < NALLOC; k++) {
		ret_ns[k] = ret_faults[k] = -1;
		if (!ok[k]) {
			printf(" %9s %6s |", "n/a", "");
			continue;
		}
		m[k] = ret_ns[k] = bench_median(ns[k], reps);
		double f = ret_faults[k] = bench_median(flt[k], reps);
		int digits = f >= 10 || f == 0 ? 0 : 2;
		printf(" %9s %6.*f |", fmt_time(b2, sizeof(b2), m[k]), digits, f);
	}
	for (int k = GLIBC; k < NALLOC; k++) {
		double q = ok[k] ? m[ARENA] / m[k] : -1;
		if (q < 0)
			printf(" %8s", "n/a");
		else
			printf(" %7.*fx", q >= 10 ? 1 : q >= 0.1 ? 2 : 4, q);
	}
	printf("\n");
	fflush(stdout);
}

static void bench_alloc_pairs(int reps, double copy1_gbps)
{
	const size_t sizes[] = { 64, 4096, MIB, 64 * MIB };
	char b1[32], b2[32], b3[32];
	double ns[NALLOC], faults[NALLOC], small_vs_je[2] = { -1, -1 }, big_faults = 0;
	double glibc_faults = -1;
	bool started[NALLOC];
	tn_arena *a;
	tn_arena_stats st;

	/* Room for the largest round: 2 threads x a batch of 4 x 64 MiB, plus alignment. */
	double t0 = bench_now_ns();
	if (make_arena(0, "alloc", 768 * MIB, &a) != 0)
		die("/dev/shm has no room for a 768 MiB arena");
	double create_ns = bench_now_ns() - t0;
	if (tn_arena_stat(a, &st) != 0)
		die("%s", tn_last_error());
	const struct allocator arena_al = { arena_alloc, arena_free, a };
	for (int k = GLIBC; k < NALLOC; k++) {
		peer_start(&peers[k]);
		started[k] = peers[k].ok;
	}

	printf("\n1. Allocation+free pairs: time per pair, median of %d rounds of about %.0f ms "
	       "(%d at 64 MiB), page faults per pair beside it\n", reps, ROUND_NS / 1e6,
	       reps < REPS_64M ? reps : REPS_64M);
	/* The arena pays for its pages once, when fallocate allocates them: say how much. */
	printf("   arena   : %s (%s, %s pages, %s, created in %s): tn_arena_alloc, "
	       "tn_arena_free\n", tn_arena_path(a),
	       st.backing == TN_ARENA_BACKING_TMPFS ? "tmpfs" :
	       st.backing == TN_ARENA_BACKING_TMPFS_HUGE ? "huge tmpfs" :
	       st.backing == TN_ARENA_BACKING_HUGETLBFS ? "hugetlbfs" : "file",
	       fmt_size(b1, sizeof(b1), st.page_size), fmt_size(b2, sizeof(b2), st.size),
	       fmt_time(b3, sizeof(b3), create_ns));
	for (int k = GLIBC; k < NALLOC; k++)
		printf("   %-8s: %s\n", peers[k].name,
		       !started[k] ? peers[k].why :
		       peers[k].lib ? peers[k].lib : "the C library's malloc, free");
	printf("   pair: alloc, free; batch: %d allocs, then their frees in the same order (4 at "
	       "64 MiB);\n   64 MiB blocks get one byte written in every page after allocation.\n"
	       "   thr 2: two threads at once on one allocator (one arena handle); time = wall "
	       "time / pairs per thread.\n   ratios: arena time / peer time (above 1: the arena is "
	       "slower). Peers run in worker processes.\n\n", MAX_BATCH);
	printf("   %-7s %-6s %3s | %-17s| %-17s| %-17s| %-17s| %8s %8s %8s\n", "size", "kind",
	       "thr", "arena", "glibc", "jemalloc", "mimalloc", "/glibc", "/jemal.", "/mimal.");

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		for (int batched = 0; batched < 2; batched++) {
			for (int threads = 1; threads <= MAX_THREADS; threads++) {
				struct alloc_case c = { .size = sizes[si], .threads = threads,
							.reps = reps };
				if (c.size >= 64 * MIB) {
					/* A pair that faults 64 MiB in takes 50 ms or more: one
					 * pair or batch a round for who faults, and fewer rounds,
					 * keep the run short. */
					c.touch = true;
					c.batch = c.pairs = batched ? 4 : 1;
					c.reps = reps < REPS_64M ? reps : REPS_64M;
				} else {
					c.batch = batched ? MAX_BATCH : 1;
					c.pairs = c.size >= MIB ? 2048 : 8192;
				}
				alloc_case_row(&arena_al, &c, ns, faults);
				/* What issue 5 sets targets for: small pairs on one thread
				 * against jemalloc, and 64 MiB blocks without faults. */
				bool je = ns[JEMALLOC] > 0;
				if (c.size <= 4096 && c.batch == 1 && threads == 1)
					small_vs_je[si] = je ? ns[ARENA] / ns[JEMALLOC] : -1;
				if (c.size == 64 * MIB) {
					big_faults = faults[ARENA] > big_faults ? faults[ARENA]
										: big_faults;
					glibc_faults = faults[GLIBC];
				}
			}
		}
	}
	if (small_vs_je[0] > 0 && small_vs_je[1] > 0)
		printf("   target: 64 B and 4 KiB pairs (1 thread) within 1.5x of jemalloc: %.1fx "
		       "and %.1fx, %s\n", small_vs_je[0], small_vs_je[1],
		       small_vs_je[0] <= 1.5 && small_vs_je[1] <= 1.5 ? "met" : "not met");
	else
		printf("   target: small pairs within 1.5x of jemalloc: jemalloc not measured\n");
	snprintf(b2, sizeof(b2), glibc_faults >= 0 ? " (glibc %.0f)" : "", glibc_faults);
	printf("   target: 64 MiB blocks reused without page faults: the arena makes %.0f per pair "
	       "at most%s, %s\n", big_faults, b2, big_faults < 1 ? "met" : "not met");
	for (int k = GLIBC; k < NALLOC; k++) {
		if (started[k] && !peers[k].ok)
			printf("   %s stopped: %s\n", peers[k].name, peers[k].why);
		peer_stop(&peers[k], NULL);
	}
	printf("   For scale: copying 64 MiB at the bandwidth of part 0 (1 thread) takes %s.\n",
	       fmt_time(b1, sizeof(b1), (double)(64 * MIB) * 2 / copy1_gbps));
	destroy_made(0);
}

/* ---- 2. publish and lookup ------------------------------------------------------------------- */

#define LOOKUP_NAME "bench/lookup/weight"
#define LOOKUP_NUMEL 1024
#define LOOKUPS 2000
#define PUBLISHES 256

enum { BY_NAME_HELD, BY_HANDLE_HELD, BY_NAME_DROPPED, BY_HANDLE_DROPPED, NLOOKUP };

static tn_tensor *arena_tensor(tn_arena *a, int64_t numel)
{
	tn_storage *s;
	tn_tensor *t;
	if (tn_storage_new_with_allocator(TN_CPU, (size_t)numel * sizeof(float),
					  tn_arena_allocator(a), &s) != 0 ||
	    tn_tensor_new(s, 0, 1, &numel, NULL, TN_FLOAT32, &t) != 0)
		die("%s", tn_last_error());
	tn_storage_unref(s);
	return t;
}

/*
 * One round of each kind of lookup, @n calls each (a call is the lookup and the unref of the
 * tensor it returns), into ns[NLOOKUP]. "held": a tensor over the block is alive all along, so
 * the process's hold and storage are reused; "dropped": nothing else holds the block, so every
 * call takes the hold and its unref releases it. Returns 0, or -1 with the reason in @err.
 */
static int lookup_round(tn_arena *a, tn_arena_handle h, int n, double *ns, char *err, size_t len)
{
	tn_tensor *keep, *x;
	double t0;

	if (tn_arena_lookup(a, LOOKUP_NAME, &keep, NULL) != 0) {
		snprintf(err, len, "%s", tn_last_error());
		return -1;
	}
	const float *v = tn_tensor_data(keep);
	if (tn_tensor_numel(keep) != LOOKUP_NUMEL || v[7] != 7.0f) {
		snprintf(err, len, "%s: a wrong tensor (%" PRId64 " elements)", LOOKUP_NAME,
			 tn_tensor_numel(keep));
		tn_tensor_unref(keep);
		return -1;
	}
	for (int pass = 0; pass < 2; pass++) {
		t0 = bench_now_ns();
		for (int i = 0; i < n; i++) {
			if (tn_arena_lookup(a, LOOKUP_NAME, &x, NULL) != 0)
				goto fail;
			tn_tensor_unref(x);
		}
		ns[pass ? BY_NAME_DROPPED : BY_NAME_HELD] = (bench_now_ns() - t0) / n;
		t0 = bench_now_ns();
		for (int i = 0; i < n; i++) {
			if (tn_arena_lookup_handle(a, h, &x) != 0)
				goto fail;
			tn_tensor_unref(x);
		}
		ns[pass ? BY_HANDLE_DROPPED : BY_HANDLE_HELD] = (bench_now_ns() - t0) / n;
		keep = tn_tensor_unref(keep);
	}
	return 0;
fail:
	snprintf(err, len, "%s", tn_last_error());
	tn_tensor_unref(keep);
	return -1;
}

/* The forked lookup process: open the arena, look the tensor up once, then one round per
 * "round" line, answered with "ok OPEN FIRST L0 L1 L2 L3" or "err WHY". */
/* Fork a peer process talking over two pipes. In the parent it returns the child's pid with
 * *ret_a the stream to it and *ret_b the stream from it; in the child it returns 0 with *ret_a
 * its input and *ret_b its output. */
static pid_t fork_peer(FILE **ret_a, FILE **ret_b)
{
	int down[2], up[2];
	if (pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	bool child = pid == 0;
	close(child ? down[1] : down[0]);
	close(child ? up[0] : up[1]);
	*ret_a = child ? fdopen(down[0], "r") : fdopen(down[1], "w");
	*ret_b = child ? fdopen(up[1], "w") : fdopen(up[0], "r");
	if (!*ret_a || !*ret_b) {
		if (child)
			_exit(1);
		die("fdopen: %s", strerror(errno));
	}
	return pid;
}

static void lookup_child(const char *arena_name, tn_arena_handle h, FILE *in, FILE *out)
{
	char line[64], err[256];
	tn_arena *b;
	tn_tensor *x;
	double ns[NLOOKUP];

	double t0 = bench_now_ns();
	int r = tn_arena_open(arena_name, ARENA_DIR, &b);
	double t1 = bench_now_ns();
	if (r == 0)
		r = tn_arena_lookup(b, LOOKUP_NAME, &x, NULL);
	double t2 = bench_now_ns();
	if (r != 0) {
		fprintf(out, "err %s\n", tn_last_error());
		fflush(out);
		_exit(1);
	}
	tn_tensor_unref(x);
	double open_ns = t1 - t0, first_ns = t2 - t1;
	while (fgets(line, sizeof(line), in)) {
		if (lookup_round(b, h, LOOKUPS, ns, err, sizeof(err)) != 0)
			fprintf(out, "err %s\n", err);
		else
			fprintf(out, "ok %.1f %.1f %.2f %.2f %.2f %.2f\n", open_ns, first_ns,
				ns[0], ns[1], ns[2], ns[3]);
		fflush(out);
	}
	tn_arena_unref(b);
	_exit(0);
}

static void bench_lookup(tn_arena *a, int reps)
{
	static const char *const what[NLOOKUP] = {
		"lookup by name, block already held",
		"lookup by handle, block already held",
		"lookup by name, hold taken and dropped",
		"lookup by handle, hold taken and dropped",
	};
	double pub[65], unpub[65], same[NLOOKUP][65], other[NLOOKUP][65], open_ns = 0, first_ns = 0;
	char names[PUBLISHES][32], reply[256], b1[32], b2[32];
	tn_arena_handle h;

	tn_tensor *t = arena_tensor(a, LOOKUP_NUMEL);
	for (int i = 0; i < LOOKUP_NUMEL; i++)
		((float *)tn_tensor_data(t))[i] = (float)i;
	if (tn_arena_publish(a, LOOKUP_NAME, t, 0, &h) != 0)
		die("%s", tn_last_error());
	for (int i = 0; i < PUBLISHES; i++)
		snprintf(names[i], sizeof(names[i]), "bench/publish/%d", i);

	FILE *to, *from;
	pid_t pid = fork_peer(&to, &from);
	if (pid == 0)
		lookup_child(made_names[1], h, to, from);

	/* The publishing process keeps @t until the publish rounds are done, then looks the tensor
	 * up like the other process does. Rounds alternate between this process and the other. */
	for (int r = -1; r < reps; r++) {
		double t0 = bench_now_ns();
		for (int i = 0; i < PUBLISHES; i++)
			if (tn_arena_publish(a, names[i], t, 0, NULL) != 0)
				die("%s", tn_last_error());
		double t1 = bench_now_ns();
		for (int i = 0; i < PUBLISHES; i++)
			if (tn_arena_unpublish(a, names[i]) != 0)
				die("%s", tn_last_error());
		double t2 = bench_now_ns();
		if (r >= 0) {
			pub[r] = (t1 - t0) / PUBLISHES;
			unpub[r] = (t2 - t1) / PUBLISHES;
		}
	}
	t = tn_tensor_unref(t);
	for (int r = -1; r < reps; r++) {
		double ns[NLOOKUP];
		if (lookup_round(a, h, LOOKUPS, ns, reply, sizeof(reply)) != 0)
			die("lookup in the publishing process: %s", reply);
		if (ask(to, from, reply, sizeof(reply), "round\n") != 0)
			die("the lookup process stopped answering");
		double o[NLOOKUP];
		if (sscanf(reply, "ok %lf %lf %lf %lf %lf %lf", &open_ns, &first_ns, &o[0], &o[1],
			   &o[2], &o[3]) != 6)
			die("the lookup process: %s", reply);
		if (r < 0)
			continue;
		for (int k = 0; k < NLOOKUP; k++) {
			same[k][r] = ns[k];
			other[k][r] = o[k];
		}
	}
	fclose(to);
	fclose(from);
	int st = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("the lookup process failed (status %d)", st);

	printf("\n2. Publish and lookup of a float32[%d] tensor, median of %d rounds of %d calls "
	       "(%d for publish)\n", LOOKUP_NUMEL, reps, LOOKUPS, PUBLISHES);
	printf("   a lookup call is tn_arena_lookup[_handle] and the tn_tensor_unref of its "
	       "result;\n   \"held\": another tensor over the block is alive, so the process's "
	       "storage is reused;\n   \"dropped\": nothing else holds it, so each call takes and "
	       "releases the process's hold.\n\n");
	printf("   %-42s %14s %14s\n", "", "same process", "other process");
	printf("   %-42s %14s %14s\n", "publish under a new name",
	       fmt_time(b1, sizeof(b1), bench_median(pub, reps)), "-");
	printf("   %-42s %14s %14s\n", "unpublish", fmt_time(b1, sizeof(b1), bench_median(unpub, reps)),
	       "-");
	double best_other = 1e18;
	for (int k = 0; k < NLOOKUP; k++) {
		double m = bench_median(other[k], reps);
		best_other = m < best_other ? m : best_other;
		printf("   %-42s %14s %14s\n", what[k],
		       fmt_time(b1, sizeof(b1), bench_median(same[k], reps)),
		       fmt_time(b2, sizeof(b2), m));
	}
	printf("   %-42s %14s %14s\n", "open the arena (once)", "-",
	       fmt_time(b1, sizeof(b1), open_ns));
	printf("   %-42s %14s %14s\n", "first lookup after the open (once)", "-",
	       fmt_time(b1, sizeof(b1), first_ns));
	double worst = 0;
	for (int k = 0; k < NLOOKUP; k++) {
		double m = bench_median(other[k], reps);
		worst = m > worst ? m : worst;
	}
	printf("   target: another process's lookup under 1 us after the first mapping: %s to %s, "
	       "%s\n", fmt_time(b1, sizeof(b1), best_other), fmt_time(b2, sizeof(b2), worst),
	       worst < 1e3 ? "met" : best_other < 1e3 ? "met for some kinds" : "not met");
	if (tn_arena_unpublish(a, LOOKUP_NAME) != 0)
		die("%s", tn_last_error());
}

/* ---- 3. a second process gets a published tensor --------------------------------------------- */

/* --get ARENA NAME NUMEL FIRST LAST: "ok OPEN LOOKUP READ FAULTS" (ns) or "err WHY". */
static int get_child(char **argv)
{
	tn_arena *a;
	tn_tensor *x = NULL;
	int64_t numel = strtoll(argv[2], NULL, 10);
	float first = strtof(argv[3], NULL), last = strtof(argv[4], NULL);

	long f0 = bench_minflt(RUSAGE_SELF);
	double t0 = bench_now_ns();
	int r = tn_arena_open(argv[0], ARENA_DIR, &a);
	double t1 = bench_now_ns();
	if (r == 0 && (r = tn_arena_lookup(a, argv[1], &x, NULL)) != 0)
		tn_arena_unref(a);
	double t2 = bench_now_ns();
	if (r != 0) {
		printf("err %s\n", tn_last_error());
		return 1;
	}
	const volatile float *d = tn_tensor_data(x);
	float v0 = d[0], v1 = d[numel - 1];
	double t3 = bench_now_ns();
	long faults = bench_minflt(RUSAGE_SELF) - f0;
	if (tn_tensor_numel(x) != numel || v0 != first || v1 != last)
		printf("err %s: %" PRId64 " elements, first %g, last %g; expected %" PRId64
		       ", %g, %g\n", argv[1], tn_tensor_numel(x), v0, v1, numel, first, last);
	else
		printf("ok %.0f %.0f %.0f %ld\n", t1 - t0, t2 - t1, t3 - t2, faults);
	tn_tensor_unref(x);
	tn_arena_unref(a);
	return 0;
}

static void bench_get(tn_arena *a, bool have_1g, int reps)
{
	const size_t sizes[] = { MIB, 64 * MIB, GIB };
	static const char *const names[] = { "bench/get/1MiB", "bench/get/64MiB",
					     "bench/get/1GiB" };
	const int n = have_1g ? 3 : 2;
	double open[3][65], look[3][65], read[3][65], total[3][65], spawn[3][65], flt[3][65];
	char args[3][32], reply[256], b[6][32];

	for (int i = 0; i < n; i++) {
		int64_t numel = (int64_t)(sizes[i] / sizeof(float));
		tn_tensor *t = arena_tensor(a, numel);
		float *d = tn_tensor_data(t);
		d[0] = (float)(1000 + i);
		d[numel - 1] = (float)-(1000 + i);
		/* The name pins the block; this process's tensor can go. */
		if (tn_arena_publish(a, names[i], t, 0, NULL) != 0)
			die("%s", tn_last_error());
		tn_tensor_unref(t);
	}
	/* Children take turns by size, the order turning each round. */
	for (int r = -1; r < reps; r++)
		for (int j = 0; j < n; j++) {
			int i = (j + r + 1) % n;
			int64_t numel = (int64_t)(sizes[i] / sizeof(float));
			snprintf(args[0], sizeof(args[0]), "%" PRId64, numel);
			snprintf(args[1], sizeof(args[1]), "%d", 1000 + i);
			snprintf(args[2], sizeof(args[2]), "%d", -(1000 + i));
			char *const argv[] = { "bench_arena", "--get", made_names[1],
					       (char *)names[i], args[0], args[1], args[2], NULL };
			FILE *from;
			double t0 = bench_now_ns();
			pid_t pid = spawn_self(argv, NULL, NULL, &from);
			bool got = fgets(reply, sizeof(reply), from) != NULL;
			double t1 = bench_now_ns();
			fclose(from);
			int st = 0;
			waitpid(pid, &st, 0);
			double o, l, rd, f;
			if (!got || sscanf(reply, "ok %lf %lf %lf %lf", &o, &l, &rd, &f) != 4)
				die("the process reading %s: %s (status %d)", names[i],
				    got ? reply : "no answer", st);
			if (r < 0)
				continue;
			open[i][r] = o;
			look[i][r] = l;
			read[i][r] = rd;
			total[i][r] = o + l + rd;
			flt[i][r] = f;
			spawn[i][r] = t1 - t0;
		}

	printf("\n3. A second process gets a published float32 tensor: fork+exec, open the arena, "
	       "look the name up,\n   read the first and last elements (checked); median of %d "
	       "processes per size\n\n", reps);
	printf("   %-8s %10s %10s %10s %12s %8s %16s\n", "size", "open", "lookup", "read 2",
	       "open..read", "faults", "fork..answer");
	double first_total = 0, last_total = 0;
	for (int i = 0; i < n; i++) {
		double tot = bench_median(total[i], reps);
		if (i == 0)
			first_total = tot;
		last_total = tot;
		printf("   %-8s %10s %10s %10s %12s %8.0f %16s\n",
		       fmt_size(b[0], sizeof(b[0]), sizes[i]),
		       fmt_time(b[1], sizeof(b[1]), bench_median(open[i], reps)),
		       fmt_time(b[2], sizeof(b[2]), bench_median(look[i], reps)),
		       fmt_time(b[3], sizeof(b[3]), bench_median(read[i], reps)),
		       fmt_time(b[4], sizeof(b[4]), tot), bench_median(flt[i], reps),
		       fmt_time(b[5], sizeof(b[5]), bench_median(spawn[i], reps)));
	}
	printf("   open..read of %s over %s: %.2fx (should stay near 1: nothing is copied or "
	       "touched beyond two pages)\n", fmt_size(b[0], sizeof(b[0]), sizes[n - 1]),
	       fmt_size(b[1], sizeof(b[1]), sizes[0]), last_total / first_total);
	printf("   faults: minor page faults of the whole open..read; fork..answer: as the parent "
	       "sees it, with exec and loading\n");
	if (!have_1g)
		printf("   1 GiB: not measured, /dev/shm has no room for a 1.5 GiB arena\n");
}

/* ---- 4. waking a waiter --------------------------------------------------------------------- */

/* The forked waiter: one command per line on @in ("wait NAME", "poll NAME", "pipe"), and for
 * each the CLOCK_MONOTONIC time (ns) at which it had what it waited for, on @out. */
static void wake_child(const char *arena_name, FILE *in, FILE *out, int wake_fd)
{
	tn_arena *a;
	char line[128], name[96];
	if (tn_arena_open(arena_name, ARENA_DIR, &a) != 0) {
		fprintf(out, "err %s\n", tn_last_error());
		fflush(out);
		_exit(1);
	}
	while (fgets(line, sizeof(line), in)) {
		tn_tensor *t = NULL;
		int r = 0;
		if (sscanf(line, "wait %95s", name) == 1) {
			tn_arena_lookup_options o = { .timeout_ns = 10000000000 };
			r = tn_arena_lookup_wait(a, name, &o, &t, NULL);
		} else if (sscanf(line, "poll %95s", name) == 1) {
			struct timespec ms = { 0, 1000000 };
			double until = bench_now_ns() + 10e9;
			while ((r = tn_arena_lookup(a, name, &t, NULL)) == TN_ENOENT &&
			       bench_now_ns() < until)
				nanosleep(&ms, NULL);
		} else if (sscanf(line, "pipe %95s", name) == 1) {
			/* Told by a byte on a pipe, then look: what a waiter does at best. */
			char c;
			r = read(wake_fd, &c, 1) == 1 ? tn_arena_lookup(a, name, &t, NULL) : -1;
		} else {
			break;
		}
		double t1 = bench_now_ns();
		if (r)
			fprintf(out, "err %s\n", r < 0 && r != -1 ? tn_last_error() : "read");
		else
			fprintf(out, "ok %.0f\n", t1);
		fflush(out);
		tn_tensor_unref(t);
	}
	tn_arena_unref(a);
	_exit(0);
}

static double wake_read(FILE *from)
{
	char reply[256];
	double t;
	if (!fgets(reply, sizeof(reply), from) || sscanf(reply, "ok %lf", &t) != 1)
		die("the waiting process: %s", reply);
	return t;
}

/* A thread that keeps its process marked waiting until told to stop (by a publish). */
struct wake_waiter {
	tn_arena *a;
	volatile bool stop;
};

static void *bench_wake_waiter(void *p)
{
	struct wake_waiter *w = p;
	tn_arena_lookup_options o = { .timeout_ns = 60000000000 };
	tn_tensor *t = NULL;
	while (!w->stop && tn_arena_lookup_wait(w->a, "bench/wake/stop", &o, &t, NULL) == 0) {
		tn_tensor_unref(t);
		t = NULL;
	}
	return NULL;
}

static void bench_wake(tn_arena *a, int reps)
{
	int wake[2];
	if (pipe2(wake, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	FILE *cmd, *ans;
	pid_t pid = fork_peer(&cmd, &ans);
	if (pid == 0) {
		close(wake[1]);
		wake_child(made_names[1], cmd, ans, wake[0]);
	}
	close(wake[0]);
	tn_tensor *t = arena_tensor(a, 16);
	double futex_ns[65], pipe_ns[65], poll_ns[65];
	struct timespec settle = { 0, 20000000 }; /* the waiter is asleep by then */
	for (int r = 0; r < reps; r++) {
		char name[64];
		snprintf(name, sizeof(name), "bench/wake/%d", r);
		fprintf(cmd, "wait %s\n", name);
		fflush(cmd);
		nanosleep(&settle, NULL);
		double t0 = bench_now_ns();
		if (tn_arena_publish(a, name, t, 0, NULL) != 0)
			die("%s", tn_last_error());
		futex_ns[r] = wake_read(ans) - t0;
		tn_arena_unpublish(a, name);

		fprintf(cmd, "pipe %s\n", name);
		fflush(cmd);
		nanosleep(&settle, NULL);
		t0 = bench_now_ns();
		if (tn_arena_publish(a, name, t, 0, NULL) != 0 || write(wake[1], "x", 1) != 1)
			die("publish and write: %s", strerror(errno));
		pipe_ns[r] = wake_read(ans) - t0;
		tn_arena_unpublish(a, name);

		fprintf(cmd, "poll %s\n", name);
		fflush(cmd);
		nanosleep(&settle, NULL);
		t0 = bench_now_ns();
		if (tn_arena_publish(a, name, t, 0, NULL) != 0)
			die("%s", tn_last_error());
		poll_ns[r] = wake_read(ans) - t0;
		tn_arena_unpublish(a, name);
	}
	fclose(cmd);
	fclose(ans);
	close(wake[1]);
	waitpid(pid, NULL, 0);

	/* A publish+unpublish pair with nobody waiting (no system call) and with a waiter
	 * marked (two FUTEX_WAKE calls each publish): this process marks itself, as a thread of it
	 * waiting would. */
	const int pairs = 20000;
	double quiet[65], marked[65];
	for (int r = 0; r < reps; r++) {
		double t0 = bench_now_ns();
		for (int i = 0; i < pairs; i++)
			if (tn_arena_publish(a, "bench/wake/pub", t, 0, NULL) ||
			    tn_arena_unpublish(a, "bench/wake/pub"))
				die("%s", tn_last_error());
		quiet[r] = (bench_now_ns() - t0) / pairs;
	}
	pthread_t waiter;
	struct wake_waiter w = { a, false };
	if (pthread_create(&waiter, NULL, bench_wake_waiter, &w))
		die("pthread_create");
	tn_arena_stats st;
	for (int i = 0; i < 1000 && tn_arena_stat(a, &st) == 0 && st.waiters == 0; i++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	for (int r = 0; r < reps; r++) {
		double t0 = bench_now_ns();
		for (int i = 0; i < pairs; i++)
			if (tn_arena_publish(a, "bench/wake/pub", t, 0, NULL) ||
			    tn_arena_unpublish(a, "bench/wake/pub"))
				die("%s", tn_last_error());
		marked[r] = (bench_now_ns() - t0) / pairs;
	}
	w.stop = true;
	if (tn_arena_publish(a, "bench/wake/stop", t, 0, NULL))
		die("%s", tn_last_error());
	pthread_join(waiter, NULL);
	tn_arena_unpublish(a, "bench/wake/stop");
	tn_tensor_unref(t);

	char b[6][32];
	printf("\n4. A process waits for a name; another publishes it: from the publish to the "
	       "waiter holding the tensor\n   (median of %d; the waiter is asleep 20 ms before)\n\n",
	       reps);
	double f = bench_median(futex_ns, reps), p = bench_median(pipe_ns, reps),
	       q = bench_median(poll_ns, reps);
	printf("   %-58s %10s\n", "tn_arena_lookup_wait (futex in the arena)",
	       fmt_time(b[0], sizeof(b[0]), f));
	printf("   %-58s %10s   the machine's cross-process wakeup\n",
	       "publish, a byte on a pipe to a process in read(2), lookup", fmt_time(b[1], sizeof(b[1]), p));
	printf("   %-58s %10s   %.0fx the futex wait's\n", "tn_arena_lookup every 1 ms (polling)",
	       fmt_time(b[2], sizeof(b[2]), q), q / f);
	printf("   futex wait over the pipe's wakeup: %.2fx (both look the name up after waking)\n",
	       f / p);
	double qn = bench_median(quiet, reps), mk = bench_median(marked, reps);
	printf("   publish+unpublish: %s with nobody waiting (no system call), %s with a waiter "
	       "marked (the FUTEX_WAKE calls of each publish)\n",
	       fmt_time(b[3], sizeof(b[3]), qn), fmt_time(b[4], sizeof(b[4]), mk));
}

/* ---- the header and main --------------------------------------------------------------------- */

static void cpu_name(char *buf, size_t n)
{
	char line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");
	snprintf(buf, n, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) == 0 && colon) {
			colon += 1 + strspn(colon + 1, " \t");
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(buf, n, "%s", colon);
			break;
		}
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--malloc-worker") == 0)
		return malloc_worker();
	if (argc == 7 && strcmp(argv[1], "--get") == 0)
		return get_child(argv + 2);
	if (argc != 1) {
		fprintf(stderr, "usage: bench_arena   (BENCH_REPS=N: rounds, 3 to 63; "
			"BENCH_ONLY=bandwidth,alloc,lookup,get,wake: parts)\n");
		return 2;
	}
	int reps = 11;
	if (getenv("BENCH_REPS"))
		reps = atoi(getenv("BENCH_REPS"));
	if (reps < 3 || reps > 63) {
		fprintf(stderr, "bench_arena: BENCH_REPS must be 3 to 63\n");
		return 2;
	}

	main_pid = getpid();
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, SIG_IGN); /* a dead worker is an EOF, not a dead benchmark */

	char cpu[128];
	cpu_name(cpu, sizeof(cpu));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("bench_arena: libtensor %s shared-memory arenas beside glibc, jemalloc and "
	       "mimalloc, one run\n", tn_version());
	printf("   CPU: %s, %ld online CPUs; 1 and 2 threads; %ld-byte pages%s\n", cpu, cpus,
	       sysconf(_SC_PAGESIZE),
	       SANITIZED ? "; SANITIZER BUILD: the figures mean nothing" : "");
	printf("   every figure is a median of %d rounds (BENCH_REPS), each allocator taking its "
	       "turn in every round\n", reps);
	/* On a machine shared with other work every figure is noisier; say how shared it was. */
	double load[3];
	if (getloadavg(load, 3) == 3)
		printf("   load average at the start: %.1f %.1f %.1f on %ld CPUs%s\n", load[0],
		       load[1], load[2], cpus,
		       load[0] > (double)cpus ? ": busy, expect noise" : "");

	size_t n = 128 * MIB;
	double bw1 = 0;
	if (selected("bandwidth") || selected("alloc")) {
		char *src = malloc(n), *dst = malloc(n);
		if (!src || !dst)
			die("no memory for the bandwidth buffers");
		memset(src, 1, n);
		memset(dst, 0, n);
		bw1 = copy_gbps(dst, src, n, 1, reps);
		double bw2 = copy_gbps(dst, src, n, 2, reps);
		free(src);
		free(dst);
		printf("\n0. Memory bandwidth, same run (memcpy of 128 MiB, bytes read + written): "
		       "%.1f GB/s on 1 thread, %.1f GB/s on 2\n", bw1, bw2);
		fflush(stdout);
	}
	if (selected("alloc"))
		bench_alloc_pairs(reps, bw1);
	if (!selected("lookup") && !selected("get") && !selected("wake"))
		return 0;

	tn_arena *a;
	bool have_1g = true;
	if (make_arena(1, "get", 1536 * MIB, &a) != 0) {
		have_1g = false;
		if (make_arena(1, "get", 256 * MIB, &a) != 0)
			die("/dev/shm has no room for a 256 MiB arena");
	}
	if (selected("lookup"))
		bench_lookup(a, reps);
	if (selected("get"))
		bench_get(a, have_1g, reps);
	if (selected("wake"))
		bench_wake(a, reps);
	destroy_made(1);
	return 0;
}
