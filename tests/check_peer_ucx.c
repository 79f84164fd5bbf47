/* SPDX-License-Identifier: MIT */
/*
 * tensord's peers module (tensord/peer_ucx.c, loaded by tensord/peer_module.c) with real
 * processes: a parent registers a buffer and a forked child pulls it by UCX get, over UCX's
 * shared-memory transports and over TCP on the loopback, bit for bit, at sizes from one byte
 * to 64 MiB; the lanes UCX chose, as tensorctl peer list will show them; the lanes parser on
 * ucp_ep_print_info's text as UCX 1.13 prints it; active messages between two processes (a
 * sender's blocks into the receives the other registered, bit for bit; messages under an
 * unknown key, for a receive freed before they came, or of another length); and the loader's
 * refusals.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "peer_module.h"
#include "testutil.h"

/* What UCX 1.13.1 printed for endpoints between two processes of this machine. */
static const char info_shm[] =
	"#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
	"#                 lane[0]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am am_bw#0\n"
	"#                 lane[1]:  4:posix/memory.0 md[3]          -> md[3]/posix/sysdev[255]\n"
	"#                 lane[2]:  5:cma/memory.0 md[4]            -> md[4]/cma/sysdev[255] rma_bw#0\n"
	"#\n#                 am_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)\n"
	"#                  get[0]: 0..<bcopy>..(inf)\n#\n#                  rma_bw: mds rndv_rkey_size 9\n";
static const char info_tcp[] =
	"#                 lane[0]:  0:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0\n"
	"#                 lane[1]:  1:tcp/eth0.0 md[0]              -> md[0]/tcp/sysdev[255] rma_bw#1 wireup\n"
	"#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)\n";
static const char info_peer_mode[] =
	"#                 lane[0]:  1:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] am am_bw#0 keepalive wireup\n"
	"#                  rma_bw: mds rndv_rkey_size 9\n";

START_TEST(test_lanes_parser)
{
	char buf[256];
	ck_assert_int_gt(tnd_ucx_parse_lanes(info_shm, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "am=sysv/memory rma=cma/memory");
	ck_assert(tnd_ucx_lanes_native_get(buf));
	ck_assert_int_gt(tnd_ucx_parse_lanes(info_tcp, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "am=tcp/lo rma=tcp/lo,tcp/eth0");
	ck_assert(!tnd_ucx_lanes_native_get(buf));
	ck_assert_int_gt(tnd_ucx_parse_lanes(info_peer_mode, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "am=tcp/lo rma=-");
	ck_assert(!tnd_ucx_lanes_native_get(buf));
	/* Text with no lane, or broken lane lines, gives -1; a short buffer truncates. */
	ck_assert_int_eq(tnd_ucx_parse_lanes("", buf, sizeof(buf)), -1);
	ck_assert_int_eq(tnd_ucx_parse_lanes("#  lane[0]: garbage\n#  lane[1] -> x\n", buf,
					     sizeof(buf)), -1);
	char small[8];
	ck_assert_int_eq(tnd_ucx_parse_lanes(info_shm, small, sizeof(small)), 7);
	ck_assert_str_eq(small, "am=sysv");
}
END_TEST

static void send_blob(int fd, const void *p, size_t n)
{
	uint64_t l = n;
	ck_assert_int_eq(write(fd, &l, 8), 8);
	ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
}

static size_t recv_blob(int fd, void *p, size_t cap)
{
	uint64_t l;
	if (read(fd, &l, 8) != 8 || l > cap)
		return SIZE_MAX;
	size_t got = 0;
	while (got < l) {
		ssize_t r = read(fd, (char *)p + got, l - got);
		if (r <= 0)
			return SIZE_MAX;
		got += (size_t)r;
	}
	return l;
}

static unsigned char byte_at(size_t i)
{
	return (unsigned char)(i * 7 + 3 + (i >> 12));
}

/* The child: pull @n bytes from the parent, check them, report the lanes; exit status 0 when
 * every byte arrived. */
static void child_pull(int fd, size_t n)
{
	char err[256], lanes[256];
	const struct tnd_ucx_ops *x = tnd_ucx_load(".", err, sizeof(err));
	struct tnd_ucx *u;
	if (!x || x->open(&u, err, sizeof(err)))
		_exit(10);
	static char addr[1 << 16], rkey[4096];
	size_t al = recv_blob(fd, addr, sizeof(addr)), rl;
	uint64_t raddr;
	if (al == SIZE_MAX || recv_blob(fd, &raddr, 8) != 8 ||
	    (rl = recv_blob(fd, rkey, sizeof(rkey))) == SIZE_MAX)
		_exit(11);
	struct tnd_ucx_ep *ep;
	if (x->connect(u, addr, al, false, &ep, err, sizeof(err)))
		_exit(12);
	unsigned char *dst = malloc(n);
	struct tnd_ucx_mem *m;
	if (!dst || x->mem_map(u, dst, n, &m, err, sizeof(err)))
		_exit(13);
	memset(dst, 0, n);
	if (x->get(ep, dst, m, raddr, rkey, rl, n, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		_exit(14);
	}
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += dst[i] != byte_at(i);
	if (x->lanes(ep, lanes, sizeof(lanes)) < 0)
		_exit(15);
	uint64_t b = bad;
	if (write(fd, &b, 8) != 8 || write(fd, lanes, strlen(lanes) + 1) < 0)
		_exit(16);
	x->disconnect(ep, false);
	x->mem_unmap(m);
	x->close(u);
	_exit(0);
}

/* The peers module, loaded, and a context of it in *@u. */
static const struct tnd_ucx_ops *open_module(struct tnd_ucx **u)
{
	char err[256];
	const struct tnd_ucx_ops *x = tnd_ucx_load(".", err, sizeof(err));
	ck_assert_msg(x != NULL, "%s", err);
	ck_assert_msg(x->open(u, err, sizeof(err)) == 0, "%s", err);
	return x;
}

/* The parent registers @n bytes, the child pulls them; returns the lanes the child saw. */
static void pull_once(size_t n, char *lanes, size_t nlanes)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		child_pull(sv[1], n);
	}
	close(sv[1]);
	char err[256];
	struct tnd_ucx *u;
	const struct tnd_ucx_ops *x = open_module(&u);
	unsigned char *src = malloc(n);
	ck_assert_ptr_nonnull(src);
	for (size_t i = 0; i < n; i++)
		src[i] = byte_at(i);
	struct tnd_ucx_mem *m;
	ck_assert_msg(x->mem_map(u, src, n, &m, err, sizeof(err)) == 0, "%s", err);
	const void *addr, *rkey;
	size_t al, rl;
	x->address(u, &addr, &al);
	x->mem_rkey(m, &rkey, &rl);
	uint64_t raddr = (uint64_t)(uintptr_t)src;
	send_blob(sv[0], addr, al);
	send_blob(sv[0], &raddr, 8);
	send_blob(sv[0], rkey, rl);
	/* Progress the worker (TCP's emulated get needs the owner's) until the child reports. */
	struct pollfd p = { .fd = sv[0], .events = POLLIN };
	while (poll(&p, 1, 0) == 0)
		x->progress(u);
	uint64_t bad = UINT64_MAX;
	ssize_t r = read(sv[0], &bad, 8);
	ssize_t nl = read(sv[0], lanes, nlanes - 1);
	lanes[nl > 0 ? nl : 0] = '\0';
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the puller exited with %d",
		      WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
	ck_assert_int_eq(r, 8);
	ck_assert_msg(bad == 0, "%llu of %zu bytes differ", (unsigned long long)bad, n);
	x->mem_unmap(m);
	x->close(u);
	free(src);
	close(sv[0]);
}

/* The last two go in chunks by active messages (8 MiB each): 3, the last of 5 bytes, and 8. */
static const size_t sizes[] = { 1, 4097, (1u << 20) + 3, (16u << 20) + 5, 64u << 20 };

/* Over the shared-memory transports UCX picks by default between two processes. */
START_TEST(test_pull_shared_memory)
{
	char lanes[256];
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		pull_once(sizes[k], lanes, sizeof(lanes));
		ck_assert_msg(strstr(lanes, "am=sysv/") || strstr(lanes, "am=posix/"),
			      "lanes \"%s\"", lanes);
		ck_assert_msg(!strstr(lanes, "tcp/"), "lanes \"%s\"", lanes);
	}
}
END_TEST

/* Over TCP on the loopback only: an emulated get, shown as such. */
START_TEST(test_pull_tcp)
{
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", "lo", 1);
	char lanes[256];
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		pull_once(sizes[k], lanes, sizeof(lanes));
		ck_assert_str_eq(lanes, "am=tcp/lo rma=tcp/lo");
		ck_assert(!tnd_ucx_lanes_native_get(lanes));
	}
}
END_TEST

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The sender of test_active_messages: connect to the parent (error mode PEER when @peer_errors),
 * send each block under the key it is given, and the messages nobody waits for; exit 0 once
 * every send completed and the parent said so. */
static void child_send(int fd, bool peer_errors)
{
	char err[256];
	const struct tnd_ucx_ops *x = tnd_ucx_load(".", err, sizeof(err));
	struct tnd_ucx *u;
	if (!x || x->open(&u, err, sizeof(err)))
		_exit(10);
	static char addr[1 << 16];
	uint64_t key;
	size_t al = recv_blob(fd, addr, sizeof(addr));
	if (al == SIZE_MAX || recv_blob(fd, &key, 8) != 8)
		_exit(11);
	struct tnd_ucx_ep *ep;
	if (x->connect(u, addr, al, peer_errors, &ep, err, sizeof(err)))
		_exit(12);
	size_t n = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	unsigned char *src = malloc(n);
	if (!src)
		_exit(13);
	for (size_t i = 0; i < n; i++)
		src[i] = byte_at(i);
	struct tnd_ucx_op *ops[16];
	size_t nops = 0;
	for (uint32_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		if (x->send_start(ep, key, k, src, sizes[k], &ops[nops++], err, sizeof(err)))
			_exit(14);
	/* A receive freed before it came (50), one cancelled (60), one of another length (99), an
	 * unknown key. */
	if (x->send_start(ep, key, 50, src, 1000, &ops[nops++], err, sizeof(err)) ||
	    x->send_start(ep, key, 60, src, 1000, &ops[nops++], err, sizeof(err)) ||
	    x->send_start(ep, key, 99, src, 20, &ops[nops++], err, sizeof(err)) ||
	    x->send_start(ep, key ^ 1, 0, src, 100, &ops[nops++], err, sizeof(err)))
		_exit(15);
	for (size_t i = 0; i < nops; i++) {
		int t;
		while ((t = x->op_test(ops[i], err, sizeof(err))) > 0)
			x->progress(u);
		if (t < 0) {
			fprintf(stderr, "%s\n", err);
			_exit(16);
		}
		x->op_free(ops[i]);
	}
	/* Until the parent has them all (an eager send completes before it arrives). */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (poll(&p, 1, 0) == 0)
		x->progress(u);
	x->disconnect(ep, false);
	x->close(u);
	free(src);
	_exit(0);
}

/* Active messages from a child into receives the parent registered: over TCP with UCX's peer
 * failure handling (_i 0), and over UCX's choice, shared memory, without it (_i 1). */
START_TEST(test_active_messages)
{
	bool tcp = _i == 0;
	if (tcp) {
		setenv("UCX_TLS", "tcp", 1);
		setenv("UCX_NET_DEVICES", "lo", 1);
	}
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		child_send(sv[1], tcp);
	}
	close(sv[1]);
	char err[256];
	struct tnd_ucx *u;
	const struct tnd_ucx_ops *x = open_module(&u);
	ck_assert(x->shared_memory(u) == !tcp);
	enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
	unsigned char *dst[NS];
	struct tnd_ucx_op *ops[NS], *gone, *short_one;
	uint64_t key = 0x1234567890abcdefull;
	for (uint32_t k = 0; k < NS; k++) {
		dst[k] = calloc(1, sizes[k]);
		ck_assert_ptr_nonnull(dst[k]);
		ck_assert_int_eq(x->recv_start(u, key, k, dst[k], sizes[k], &ops[k], err,
					       sizeof(err)), 0);
		ck_assert_int_eq(x->op_test(ops[k], err, sizeof(err)), 1);
	}
	static unsigned char small[10], unused[1000];
	ck_assert_int_eq(x->recv_start(u, key, 50, unused, sizeof(unused), &gone, err,
				       sizeof(err)), 0);
	x->op_free(gone);
	/* Cancelled before anything came: ended at once, and its message is dropped. */
	static unsigned char unused2[1000];
	struct tnd_ucx_op *cancelled;
	ck_assert_int_eq(x->recv_start(u, key, 60, unused2, sizeof(unused2), &cancelled, err,
				       sizeof(err)), 0);
	ck_assert_int_eq(x->op_test(cancelled, err, sizeof(err)), 1);
	x->op_cancel(cancelled);
	ck_assert_int_eq(x->op_test(cancelled, err, sizeof(err)), 0);
	ck_assert_int_eq(x->recv_start(u, key, 99, small, sizeof(small), &short_one, err,
				       sizeof(err)), 0);
	const void *addr;
	size_t al;
	x->address(u, &addr, &al);
	send_blob(sv[0], addr, al);
	send_blob(sv[0], &key, 8);
	/* Progress until every receive ended (the child's sends need this side's answers). */
	uint64_t t0 = now_ms();
	for (;;) {
		int busy = x->op_test(short_one, err, sizeof(err)) > 0;
		for (uint32_t k = 0; k < NS; k++)
			busy |= x->op_test(ops[k], err, sizeof(err)) > 0;
		if (!busy && x->dropped(u) >= 4)
			break;
		ck_assert_msg(now_ms() - t0 < 60000, "receives still waiting after 60 s");
		x->progress(u);
	}
	for (uint32_t k = 0; k < NS; k++) {
		ck_assert_msg(x->op_test(ops[k], err, sizeof(err)) == 0, "%s", err);
		size_t bad = 0;
		for (size_t i = 0; i < sizes[k]; i++)
			bad += dst[k][i] != byte_at(i);
		ck_assert_msg(bad == 0, "%zu of %zu bytes differ", bad, sizes[k]);
		x->op_free(ops[k]);
		free(dst[k]);
	}
	/* 20 bytes for a receive of 10: failed, nothing written. Not received: that one, the
	 * freed receive's, the cancelled one's and the unknown key's. */
	ck_assert_int_eq(x->op_test(short_one, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "UCX active message"), "%s", err);
	x->op_free(short_one);
	for (size_t i = 0; i < sizeof(small); i++)
		ck_assert_uint_eq(small[i], 0);
	ck_assert_uint_eq(x->dropped(u), 4);
	for (size_t i = 0; i < sizeof(unused2); i++)
		ck_assert_uint_eq(unused2[i], 0);
	x->op_free(cancelled);
	uint64_t bye = 1;
	ck_assert_int_eq(write(sv[0], &bye, 8), 8);
	/* The child's endpoint closes against this worker: keep answering until it is gone. */
	int st;
	while (waitpid(pid, &st, WNOHANG) == 0)
		x->progress(u);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the sender exited with %d",
		      WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
	x->close(u);
	close(sv[0]);
}
END_TEST

START_TEST(test_load_errors)
{
	char err[512];
	setenv("TND_UCX_MODULE", _i == 0 ? "/nonexistent/tensord-ucx.so" : "libm.so.6", 1);
	ck_assert_ptr_null(tnd_ucx_load(".", err, sizeof(err)));
	ck_assert_msg(strstr(err, _i == 0 ? "/nonexistent/tensord-ucx.so" : "no tnd_ucx_module"),
		      "%s", err);
	/* Remembered: the same message again, without another attempt. */
	char again[512];
	ck_assert_ptr_null(tnd_ucx_load(".", again, sizeof(again)));
	ck_assert_str_eq(again, err);
}
END_TEST

static Suite *peer_ucx_suite(void)
{
	Suite *s = suite_create("peer_ucx");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lanes_parser);
	tcase_add_test(tc, test_pull_shared_memory);
	tcase_add_test(tc, test_pull_tcp);
	tcase_add_loop_test(tc, test_active_messages, 0, 2);
	tcase_add_loop_test(tc, test_load_errors, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(peer_ucx_suite)
