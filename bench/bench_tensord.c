/* SPDX-License-Identifier: MIT */
/*
 * Control-plane operations per second over tensord's socket: connect+hello, status, arena
 * stat, arena open (descriptor passing, mapping and attaching in an assigned slot, then
 * letting go), and a read-only client's lookup (a round trip for the daemon's hold, and one
 * for the release); from one client and from four client processes at once.
 *
 * The peer, measured in the same run: a 32-byte or 1 KiB message bounced by a minimal blocking
 * echo server on a SOCK_SEQPACKET socket (tensord's requests are 32 to 400 bytes, its replies
 * up to 1 KiB), the floor any daemon on this transport sits on. The ratio says what tensord's io_uring loop, validation and work add to it.
 *
 * Then VERIFY (tn_tensord_verify): the daemon reads a sealed 512 MiB tensor again on its digest
 * worker and compares it with the digest taken at the seal. Its peer, in the same run: one
 * thread of this process reading the same bytes once (summing 64-bit words), the rate a digest
 * cannot beat on one core.
 *
 * A private tensord is started on a socket in a temporary directory and stopped at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensor.h>

#include "bench_util.h"
#include "client.h"

#define ROUNDS 7

static char sock_path[256], echo_path[256], arena_dir[256];

#define CHECK(call)                                                                         \
	do {                                                                                \
		int r_ = (call);                                                            \
		if (r_ < 0) {                                                               \
			fprintf(stderr, "bench_tensord: %s: %s\n", #call, tn_last_error()); \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

/* ---- the echo peer ------------------------------------------------------------------------- */

static void echo_server(int lfd)
{
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			char buf[4096];
			ssize_t n;
			while ((n = recv(c, buf, sizeof(buf), 0)) > 0)
				if (send(c, buf, (size_t)n, MSG_NOSIGNAL) != n)
					break;
			_exit(0);
		}
		close(c);
	}
}

static int echo_connect(void)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", echo_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("bench_tensord: echo connect");
		exit(1);
	}
	return fd;
}

/* ---- operations ------------------------------------------------------------------------------ */

enum op { OP_ECHO_SMALL, OP_ECHO_STAT, OP_HELLO, OP_STATUS, OP_STAT, OP_OPEN, OP_LOOKUP_RO,
	  OP_CUDA_HOLD, OP_COUNT };
static const char *const op_names[] = { "echo 32 B (peer)", "echo 1 KiB (peer)",
					"connect + hello", "status", "arena stat", "arena open",
					"read-only lookup", "CUDA import+release" };
/* Which peer each is compared with: the echo of its request and reply sizes. A CUDA import
 * and its release are two exchanges (about 1 KiB and 300 B) and two appends to the daemon's
 * table file. */
static const int op_peer[] = { -1, -1, OP_ECHO_SMALL, OP_ECHO_SMALL, OP_ECHO_STAT,
			       OP_ECHO_SMALL, OP_ECHO_SMALL, OP_ECHO_STAT };

/* Seconds per operation, over @n operations. */
static double run_op(enum op op, int n)
{
	tn_tensord *c = NULL;
	tn_arena *ro = NULL;
	int efd = -1;
	char buf[4096];
	memset(buf, 0, sizeof(buf));
	if (op == OP_ECHO_SMALL || op == OP_ECHO_STAT)
		efd = echo_connect();
	else if (op != OP_HELLO)
		CHECK(tn_tensord_connect(sock_path, &c));
	if (op == OP_LOOKUP_RO)
		CHECK(tn_tensord_arena_open(c, "bench", TN_TENSORD_READ_ONLY, &ro));
	tn_tensord_status st;
	tn_tensord_arena_info info;
	double t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		switch (op) {
		case OP_ECHO_SMALL:
		case OP_ECHO_STAT: {
			size_t req = op == OP_ECHO_SMALL ? 32 : 1024;
			if (send(efd, buf, req, 0) < 0 || recv(efd, buf, sizeof(buf), 0) < 0)
				exit(1);
			break;
		}
		case OP_HELLO:
			CHECK(tn_tensord_connect(sock_path, &c));
			tn_tensord_close(c);
			c = NULL;
			break;
		case OP_STATUS:
			CHECK(tn_tensord_status_get(c, &st));
			break;
		case OP_STAT:
			CHECK(tn_tensord_arena_stat(c, "bench", &info));
			break;
		case OP_OPEN: {
			tn_arena *a;
			CHECK(tn_tensord_arena_open(c, "bench", 0, &a));
			tn_arena_unref(a);
			break;
		}
		case OP_LOOKUP_RO: {
			tn_tensor *t;
			CHECK(tn_arena_lookup(ro, "w", &t, NULL));
			tn_tensor_unref(t);
			break;
		}
		case OP_CUDA_HOLD: {
			/* The daemon's side of tn_cuda_ipc_import and of the storage's release. */
			struct tnd_cuda_info held;
			CHECK(tn__tensord_cuda_import(c, "gpu/w", &held));
			CHECK(tn__tensord_cuda_release(c, "gpu/w", held.id));
			break;
		}
		default:
			break;
		}
	}
	double dt = (bench_now_ns() - t0) / 1e9 / n;
	if (efd >= 0)
		close(efd);
	tn_arena_unref(ro);
	tn_tensord_close(c);
	return dt;
}

/* @procs processes run @op at once; returns operations per second over all of them. */
static double run_parallel(enum op op, int n, int procs)
{
	double *res = mmap(NULL, sizeof(double) * (size_t)procs, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pids[16];
	double t0 = bench_now_ns();
	for (int p = 0; p < procs; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			res[p] = run_op(op, n);
			_exit(0);
		}
	}
	for (int p = 0; p < procs; p++)
		waitpid(pids[p], NULL, 0);
	double dt = (bench_now_ns() - t0) / 1e9;
	munmap(res, sizeof(double) * (size_t)procs);
	return (double)n * procs / dt;
}

/* VERIFY of one sealed tensor of @bytes against reading it once here. */
static void bench_verify(tn_tensord *c, size_t bytes)
{
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = bytes + (64 << 20);
	CHECK(tn_tensord_arena_create(c, "sealbench", &o));
	tn_arena *a;
	CHECK(tn_tensord_arena_open(c, "sealbench", 0, &a));
	CHECK(tn_arena_use(a));
	tn_tensor *t;
	int64_t n = (int64_t)(bytes / 4);
	CHECK(tn_empty(1, &n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	float *p = tn_tensor_data(t);
	for (int64_t i = 0; i < n; i++)
		p[i] = (float)(i % 1000);
	CHECK(tn_arena_publish(a, "w", t, TN_ARENA_SEAL, NULL));
	tn_arena_use(NULL);
	tn_tensord_verify_report rep;
	do /* the first digest is taken just after the seal */
		CHECK(tn_tensord_verify(c, "sealbench", &rep));
	while (rep.checked != 1);
	double v[ROUNDS], r[ROUNDS];
	volatile uint64_t sink = 0;
	for (int k = 0; k < ROUNDS; k++) {
		double t0 = bench_now_ns();
		CHECK(tn_tensord_verify(c, "sealbench", &rep));
		v[k] = bench_now_ns() - t0;
		t0 = bench_now_ns();
		const uint64_t *w = (const uint64_t *)(const void *)p;
		uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		for (size_t i = 0; i + 4 <= bytes / 8; i += 4) {
			s0 += w[i];
			s1 += w[i + 1];
			s2 += w[i + 2];
			s3 += w[i + 3];
		}
		sink += s0 + s1 + s2 + s3;
		r[k] = bench_now_ns() - t0;
	}
	double vm = bench_median(v, ROUNDS), rm = bench_median(r, ROUNDS);
	printf("\nVERIFY of a sealed %zu MiB tensor (digest on the daemon's worker thread):\n",
	       bytes >> 20);
	printf("%-24s %12.1f ms %8.2f GB/s\n", "tensorctl verify", vm / 1e6, (double)bytes / vm);
	printf("%-24s %12.1f ms %8.2f GB/s  (verify: %.2fx the time of one read)\n",
	       "read once (peer)", rm / 1e6, (double)bytes / rm, vm / rm);
	tn_tensor_unref(t);
	tn_arena_unref(a);
	CHECK(tn_tensord_arena_destroy(c, "sealbench", 0));
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *daemon_path = argc > 1 ? argv[1] : TENSORD_PATH;
	char dir[] = "/tmp/bench-tensord.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock_path, sizeof(sock_path), "%s/s", dir);
	snprintf(echo_path, sizeof(echo_path), "%s/echo", dir);
	snprintf(arena_dir, sizeof(arena_dir), "/dev/shm/bench-tensord-%d", (int)getpid());
	pid_t d = fork();
	if (d == 0) {
		execl(daemon_path, daemon_path, "--foreground", "--socket", sock_path, "--arena-dir",
		      arena_dir, "--log-level", "warn", (char *)NULL);
		perror("exec tensord");
		_exit(127);
	}
	int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", echo_path);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 64)) {
		perror("echo bind");
		return 1;
	}
	pid_t e = fork();
	if (e == 0)
		echo_server(lfd);
	close(lfd);
	tn_tensord *c = NULL;
	for (int i = 0; i < 500 && tn_tensord_connect(sock_path, &c); i++)
		usleep(10000);
	if (!c) {
		fprintf(stderr, "bench_tensord: tensord did not start: %s\n", tn_last_error());
		return 1;
	}
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 64 << 20;
	CHECK(tn_tensord_arena_create(c, "bench", &o));
	tn_arena *a;
	CHECK(tn_tensord_arena_open(c, "bench", 0, &a));
	CHECK(tn_arena_use(a));
	tn_tensor *w;
	int64_t shape[] = { 1024 };
	CHECK(tn_ones(1, shape, TN_FLOAT32, TN_CPU, &w));
	CHECK(tn_arena_publish(a, "w", w, 0, NULL));
	tn_arena_use(NULL);
	/* A CUDA export record (the daemon never reads the handles: made-up bytes will do). */
	struct tnd_cuda_export rec = { .name = "gpu/w", .alloc_bytes = 2 << 20,
				       .storage_bytes = 4096, .dtype = TN_FLOAT32, .ndim = 1,
				       .sizes = { 1024 }, .strides = { 1 } };
	memset(rec.mem_handle, 0x5a, sizeof(rec.mem_handle));
	struct tnd_cuda_info exported;
	CHECK(tn__tensord_cuda_export(c, &rec, &exported));

	printf("bench_tensord: control-plane operations over tensord's SOCK_SEQPACKET socket\n"
	       "(medians of %d rounds; peer: a blocking echo server, same message sizes, same run)\n\n",
	       ROUNDS);
	printf("%-24s %12s %12s %10s\n", "operation", "us/op", "ops/s", "x echo");
	double med[OP_COUNT];
	static const int counts[] = { 20000, 20000, 2000, 20000, 10000, 2000, 10000, 10000 };
	for (int op = 0; op < OP_COUNT; op++) {
		double v[ROUNDS];
		run_op((enum op)op, counts[op] / 10); /* warm-up */
		for (int r = 0; r < ROUNDS; r++)
			v[r] = run_op((enum op)op, counts[op]);
		med[op] = bench_median(v, ROUNDS);
		printf("%-24s %12.2f %12.0f", op_names[op], med[op] * 1e6, 1.0 / med[op]);
		if (op_peer[op] >= 0)
			printf(" %9.2fx", med[op] / med[op_peer[op]]);
		printf("\n");
	}
	printf("\n4 client processes at once (total ops/s; the machine has %ld CPUs):\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	static const enum op par[] = { OP_ECHO_SMALL, OP_STATUS, OP_STAT, OP_OPEN };
	for (size_t i = 0; i < sizeof(par) / sizeof(par[0]); i++) {
		double v[ROUNDS];
		for (int r = 0; r < ROUNDS; r++)
			v[r] = run_parallel(par[i], counts[par[i]] / 4, 4);
		printf("%-24s %12.0f ops/s\n", op_names[par[i]], bench_median(v, ROUNDS));
	}
	bench_verify(c, (size_t)512 << 20);
	CHECK(tn__tensord_cuda_unexport(c, "gpu/w", exported.id, &exported));
	tn_tensor_unref(w);
	tn_arena_unref(a);
	CHECK(tn_tensord_arena_destroy(c, "bench", 0));
	CHECK(tn_tensord_shutdown(c));
	tn_tensord_close(c);
	waitpid(d, NULL, 0);
	kill(e, SIGKILL);
	waitpid(e, NULL, 0);
	unlink(echo_path);
	rmdir(arena_dir);
	rmdir(dir);
	return 0;
}
