// SPDX-License-Identifier: MIT
/*
 * bench_peers: pulls between two tensord daemons started here (libtensor-peers(7)), per
 * transport: UCX's default between processes of one host (shared memory: sysv/cma), where the
 * puller reads the holder's block itself (direct reads), the same with peer_direct_read = no
 * (UCX's get, which UCX 1.13 emulates over sysv), and TCP (UCX_TLS=tcp). For each size:
 *   - "pull": the median wall time of tn_tensord_pull (request to sealed name), each pull
 *     started once the puller freed the block of the one before (its seal digest, tensord(8)
 *     VERIFY, done), so into pages earlier pulls touched;
 *   - "back-to-back": the same pulls one after another, each unpublished at once (the digest
 *     of one then runs beside the next; a pull waits while two blocks are held);
 * beside, in the same run and on the same transport:
 *   - ucx_perftest (Debian ucx-utils) on the same transport: -t ucp_get, its RMA get, and
 *     -t ucp_am_bw, its active messages (what a pull over TCP uses), and the ratios of a
 *     pull to the better of the two;
 *   - a plain TCP socket copy over 127.0.0.1 (one process writes, the other reads).
 * Then the latency of 1,000 pulls of 4 KiB tensors, one after another, and of the same 1,000 in
 * one batch (tn_tensord_pull_prefix).
 * BENCH_PEERS_MAX (bytes, default 1 GiB) caps the sizes; BENCH_PEERS_REPS the repetitions.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensor.h>
#include <tensor/tensord.h>

#include "bench_util.h"

#define CHECK(x)                                                                              \
	do {                                                                                  \
		int r_ = (x);                                                                 \
		if (r_) {                                                                     \
			fprintf(stderr, "bench_peers: %s:%d: %s: %s\n", __FILE__, __LINE__, #x,  \
				tn_last_error());                                             \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

struct daemon {
	char dir[64], sock[128], arena_dir[128], conf[128];
	pid_t pid;
	int port;
};

static char secret[160];

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		perror("bench_peers: port");
		exit(1);
	}
	close(fd);
	return ntohs(sa.sin_port);
}

static void start(struct daemon *d, const char *extra, const char *tls)
{
	snprintf(d->dir, sizeof(d->dir), "/tmp/bench-peers.XXXXXX");
	if (!mkdtemp(d->dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(d->sock, sizeof(d->sock), "%s/s", d->dir);
	snprintf(d->conf, sizeof(d->conf), "%s/conf", d->dir);
	snprintf(d->arena_dir, sizeof(d->arena_dir), "/dev/shm/bench-peers-%d-%d", (int)getpid(),
		 free_port());
	d->port = free_port();
	FILE *f = fopen(d->conf, "w");
	if (!f) {
		perror(d->conf);
		exit(1);
	}
	fprintf(f, "peer_secret = %s\npeer_listen = 127.0.0.1:%d\n%s", secret, d->port, extra);
	fclose(f);
	d->pid = fork();
	if (d->pid == 0) {
		if (tls)
			setenv("UCX_TLS", tls, 1);
		execl(TENSORD_PATH, "tensord", "--foreground", "--socket", d->sock, "--config",
		      d->conf, "--arena-dir", d->arena_dir, "--log-level", "warn", (char *)NULL);
		perror("exec tensord");
		_exit(127);
	}
}

static tn_tensord *connect_to(const struct daemon *d)
{
	tn_tensord *c = NULL;
	for (int i = 0; i < 1000 && tn_tensord_connect(d->sock, &c); i++)
		usleep(10000);
	if (!c) {
		fprintf(stderr, "bench_peers: tensord at %s did not start: %s\n", d->sock,
			tn_last_error());
		exit(1);
	}
	return c;
}

static void stop(struct daemon *d, tn_tensord *c)
{
	CHECK(tn_tensord_shutdown(c));
	tn_tensord_close(c);
	waitpid(d->pid, NULL, 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/conf", d->dir);
	unlink(p);
	rmdir(d->dir);
	rmdir(d->arena_dir);
}

static void wait_ready(tn_tensord *c, const char *addr, char *lanes, size_t n)
{
	for (int i = 0; i < 2000; i++) {
		tn_tensord_peer *v;
		size_t k;
		CHECK(tn_tensord_peer_list(c, &v, &k));
		for (size_t j = 0; j < k; j++)
			if (!strcmp(v[j].address, addr) && v[j].state == TN_TENSORD_PEER_READY) {
				snprintf(lanes, n, "%s", v[j].lanes);
				free(v);
				return;
			}
		free(v);
		usleep(10000);
	}
	fprintf(stderr, "bench_peers: peer %s not ready\n", addr);
	exit(1);
}

static void publish_bytes(tn_arena *a, const char *name, size_t bytes)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t n = (int64_t)bytes;
	CHECK(tn_storage_new_with_allocator(TN_CPU, bytes, tn_arena_allocator(a), &s));
	memset(tn_storage_data(s), 0x5a, bytes);
	CHECK(tn_tensor_new(s, 0, 1, &n, NULL, TN_UINT8, &t));
	tn_storage_unref(s);
	CHECK(tn_arena_publish(a, name, t, TN_ARENA_SEAL, NULL));
	tn_tensor_unref(t);
}

struct perf {
	double gbs; /* bandwidth, GB/s */
	double us;  /* average time of one operation */
};

/* ucx_perftest's @test (ucp_get, ucp_am_bw) of @bytes on @tls (NULL: UCX's choice); zeros when
 * it cannot be run. */
static struct perf perftest(size_t bytes, const char *tls, const char *test, int iters)
{
	struct perf none = { 0, 0 };
	int port = free_port();
	char ps[16], ss[32], ns[16];
	snprintf(ps, sizeof(ps), "%d", port);
	snprintf(ss, sizeof(ss), "%zu", bytes);
	snprintf(ns, sizeof(ns), "%d", iters);
	pid_t srv = fork();
	if (srv == 0) {
		if (tls)
			setenv("UCX_TLS", tls, 1);
		int nul = open("/dev/null", O_WRONLY);
		dup2(nul, 1);
		dup2(nul, 2);
		execlp("ucx_perftest", "ucx_perftest", "-p", ps, (char *)NULL);
		_exit(127);
	}
	usleep(300000);
	int p[2];
	if (pipe(p))
		return none;
	pid_t cli = fork();
	if (cli == 0) {
		if (tls)
			setenv("UCX_TLS", tls, 1);
		dup2(p[1], 1);
		int nul = open("/dev/null", O_WRONLY);
		dup2(nul, 2);
		execlp("ucx_perftest", "ucx_perftest", "127.0.0.1", "-p", ps, "-t", test, "-s", ss,
		       "-n", ns, "-w", "2", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char out[16384];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof(out) - 1 && (r = read(p[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = 0;
	close(p[0]);
	waitpid(cli, NULL, 0);
	kill(srv, SIGTERM);
	waitpid(srv, NULL, 0);
	/* "Final: ITERS LAT50 LATAVG LATALL BWAVG BWALL RATEAVG RATEALL", latencies in us,
	 * bandwidth in MB/s of 2^20 bytes. */
	const char *f = strstr(out, "Final:");
	double it, l1, l2, l3, bw;
	if (!f || sscanf(f, "Final: %lf %lf %lf %lf %lf", &it, &l1, &l2, &l3, &bw) != 5)
		return none;
	return (struct perf){ bw * 1048576.0 / 1e9, l2 };
}

/* A plain TCP copy of @bytes over 127.0.0.1, median of @reps, in GB/s. */
static double tcp_copy(size_t bytes, int reps)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len))
		return 0;
	char *buf = malloc(bytes);
	if (!buf)
		return 0;
	memset(buf, 1, bytes);
	pid_t w = fork();
	if (w == 0) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			_exit(1);
		for (int r = 0; r < reps; r++) {
			char go;
			if (read(fd, &go, 1) != 1)
				_exit(1);
			for (size_t off = 0; off < bytes;) {
				ssize_t n = write(fd, buf + off, bytes - off);
				if (n <= 0)
					_exit(1);
				off += (size_t)n;
			}
		}
		_exit(0);
	}
	int fd = accept(lfd, NULL, NULL);
	double v[64];
	for (int r = 0; r < reps && r < 64; r++) {
		double t0 = bench_now_ns();
		char go = 1;
		if (write(fd, &go, 1) != 1)
			break;
		for (size_t off = 0; off < bytes;) {
			ssize_t n = read(fd, buf + off, bytes - off);
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		v[r] = (double)bytes / (bench_now_ns() - t0);
	}
	close(fd);
	close(lfd);
	waitpid(w, NULL, 0);
	free(buf);
	return bench_median(v, reps < 64 ? reps : 64);
}

static uint64_t used_bytes(tn_tensord *c, const char *arena)
{
	tn_tensord_arena_info info;
	CHECK(tn_tensord_arena_stat(c, arena, &info));
	return info.stats.used_bytes;
}

/* Wait (at most 10 s) until arena @arena of @c uses @want bytes or fewer. */
static void wait_used(tn_tensord *c, const char *arena, uint64_t want)
{
	double t0 = bench_now_ns();
	while (used_bytes(c, arena) > want && bench_now_ns() - t0 < 10e9)
		usleep(200);
}

static void run_transport(const char *label, const char *tls, const char *conf, size_t max,
			  int reps)
{
	struct daemon A, B;
	start(&A, "peer_export = src\n", tls);
	char a_addr[64], extra[192], lanes[128];
	snprintf(a_addr, sizeof(a_addr), "127.0.0.1:%d", A.port);
	snprintf(extra, sizeof(extra), "peer = %s\n%s", a_addr, conf);
	start(&B, extra, tls);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	wait_ready(cb, a_addr, lanes, sizeof(lanes));
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = max + (64u << 20);
	CHECK(tn_tensord_arena_create(ca, "src", &o));
	/* Room for three: the puller's seal record digests each pulled tensor on a worker thread
	 * (tensord(8), VERIFY), holding its block a while after the pull answered. */
	o.size = 3 * max + (64u << 20);
	CHECK(tn_tensord_arena_create(cb, "dst", &o));
	tn_arena *a, *b;
	CHECK(tn_tensord_arena_open(ca, "src", 0, &a));
	CHECK(tn_tensord_arena_open(cb, "dst", 0, &b));
	printf("\n%s (UCX_TLS=%s%s%.*s): lanes %s\n", label, tls ? tls : "UCX's choice",
	       conf[0] ? "; " : "", (int)strcspn(conf, "\n"), conf, lanes);
	printf("%10s %10s %10s %10s %13s %9s %9s %14s %11s %9s\n", "size", "pull GB/s",
	       "pull cold", "daemon", "back-to-back", "pt get", "pt am_bw", "pull/perftest",
	       "b2b/perftest", "TCP copy");
	uint64_t empty = used_bytes(cb, "dst");
	for (size_t bytes = (size_t)1 << 20; bytes <= max; bytes *= 16) {
		publish_bytes(a, "t", bytes);
		double v[64], d[64], cold = 0;
		int n = reps < 64 ? reps : 64;
		for (int r = 0; r <= n; r++) {
			tn_tensord_pull_report rep;
			wait_used(cb, "dst", empty);
			double t0 = bench_now_ns();
			CHECK(tn_tensord_pull(cb, a_addr, "src", "t", "dst", "t", &rep));
			double gbs = (double)bytes / (bench_now_ns() - t0);
			if (r == 0)
				cold = gbs; /* the first: fresh pages in the puller's arena */
			else {
				v[r - 1] = gbs;
				d[r - 1] = (double)bytes / (double)rep.elapsed_ns;
			}
			CHECK(tn_arena_unpublish(b, "t"));
		}
		wait_used(cb, "dst", empty);
		double b0 = bench_now_ns();
		for (int r = 0; r < n; r++) {
			/* At most one digest behind (the arena has room for three). */
			wait_used(cb, "dst", empty + bytes);
			CHECK(tn_tensord_pull(cb, a_addr, "src", "t", "dst", "t", NULL));
			CHECK(tn_arena_unpublish(b, "t"));
		}
		double b2b = (double)bytes * n / (bench_now_ns() - b0);
		CHECK(tn_arena_unpublish(a, "t"));
		double pull = bench_median(v, n), dmn = bench_median(d, n);
		int iters = bytes >= ((size_t)256 << 20) ? 8 : bytes >= ((size_t)16 << 20) ? 40 : 400;
		double pg = perftest(bytes, tls, "ucp_get", iters).gbs;
		double pa = perftest(bytes, tls, "ucp_am_bw", iters).gbs;
		double pt = pg > pa ? pg : pa;
		double tc = tcp_copy(bytes, n);
		char sz[32];
		if (bytes >= ((size_t)1 << 30))
			snprintf(sz, sizeof(sz), "%zu GiB", bytes >> 30);
		else
			snprintf(sz, sizeof(sz), "%zu MiB", bytes >> 20);
		printf("%10s %10.2f %10.2f %10.2f %13.2f %9.2f %9.2f %13.2fx %10.2fx %9.2f\n", sz,
		       pull, cold, dmn, b2b, pg, pa, pt > 0 ? pull / pt : 0.0,
		       pt > 0 ? b2b / pt : 0.0, tc);
		if (bytes * 16 > max && bytes < max) {
			bytes = max / 16; /* the last row is max itself */
		}
	}
	/* Latency: 1,000 pulls of 4 KiB tensors, one after another. */
	wait_used(cb, "dst", empty);
	char name[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "s/%d", i);
		publish_bytes(a, name, 4096);
	}
	double t0 = bench_now_ns();
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "s/%d", i);
		CHECK(tn_tensord_pull(cb, a_addr, "src", name, "dst", name, NULL));
	}
	double per = (bench_now_ns() - t0) / 1000.0;
	/* The same 1,000 in one batch (tn_tensord_pull_prefix): one request, one lease (the
	 * copies above go first: the directory holds 1,536 names). */
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "s/%d", i);
		CHECK(tn_arena_unpublish(b, name));
	}
	size_t count = 0;
	t0 = bench_now_ns();
	CHECK(tn_tensord_pull_prefix(cb, a_addr, "src", "s/", "dst", "b/", NULL, &count));
	double batch = (bench_now_ns() - t0) / (count ? (double)count : 1.0);
	struct perf lg = perftest(4096, tls, "ucp_get", 2000);
	struct perf la = perftest(4096, tls, "ucp_am_bw", 2000);
	printf("1,000 pulls of 4 KiB one after another: %.1f us per pull (%.0f pulls/s); "
	       "in one batch of %zu: %.1f us per tensor (%.1fx); ucx_perftest of 4 KiB: "
	       "ucp_get %.1f us, ucp_am_bw %.2f us per message\n", per / 1e3, 1e9 / per, count,
	       batch / 1e3, batch > 0 ? per / batch : 0.0, lg.us, la.us);
	tn_arena_unref(a);
	tn_arena_unref(b);
	CHECK(tn_tensord_arena_destroy(ca, "src", 0));
	CHECK(tn_tensord_arena_destroy(cb, "dst", 0));
	stop(&B, cb);
	stop(&A, ca);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!getenv("TND_UCX_MODULE"))
		setenv("TND_UCX_MODULE", TND_UCX_MODULE_PATH, 1);
	struct stat st;
	if (stat(getenv("TND_UCX_MODULE"), &st)) {
		printf("bench_peers: skipped (no peers module at %s: configured without UCX)\n",
		       getenv("TND_UCX_MODULE"));
		return 0;
	}
	char dir[] = "/tmp/bench-peers-secret.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	FILE *f = fopen(secret, "w");
	if (!f)
		return 1;
	fputs("bench_peers shared secret, not a real one\n", f);
	fclose(f);
	chmod(secret, 0600);
	size_t max = (size_t)1 << 30;
	if (getenv("BENCH_PEERS_MAX"))
		max = strtoull(getenv("BENCH_PEERS_MAX"), NULL, 0);
	int reps = getenv("BENCH_PEERS_REPS") ? atoi(getenv("BENCH_PEERS_REPS")) : 7;
	if (reps < 1)
		reps = 1;
	printf("bench_peers: tn_tensord_pull between two tensord on this machine, medians of %d "
	       "pulls per size (GB/s = 1e9 B/s; \"pull\": request to sealed name, seen by the "
	       "caller, each started once the puller freed the last one's block; \"cold\": the "
	       "first pull, into untouched pages; \"daemon\": the puller's own elapsed time; "
	       "\"back-to-back\": the same pulls one after another, each one's seal digest beside "
	       "the next); peers measured in the same run: ucx_perftest -t ucp_get (\"pt get\") "
	       "and -t ucp_am_bw (\"pt am_bw\") on the same transport, the ratios against the "
	       "better of the two, and a plain TCP socket copy on 127.0.0.1. %ld CPUs.\n",
	       reps, sysconf(_SC_NPROCESSORS_ONLN));
	run_transport("shared memory, direct reads", NULL, "", max, reps);
	run_transport("shared memory, UCX's get", NULL, "peer_direct_read = no\n", max, reps);
	run_transport("UCX TCP", "tcp", "", max, reps);
	unlink(secret);
	rmdir(dir);
	return 0;
}
