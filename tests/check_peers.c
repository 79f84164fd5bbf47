// SPDX-License-Identifier: MIT
/*
 * Peers (tensord/peers.c, libtensor-peers(7)) with real daemons: two and three tensord
 * processes on this machine, each with its own socket, arena folder and peer_listen port on
 * 127.0.0.1, talking over UCX's shared-memory transports (the default between processes of one
 * host) and over its TCP transport (UCX_TLS=tcp in the daemons' environment). Every pulled
 * tensor is compared element by element with its source, with its dtype, sizes and strides.
 * Kill tests: the holder killed during a pull (the puller answers TN_ENOTCONN within a bound,
 * publishes nothing and frees the half block; the holder, restarted, is dialed again), and the
 * puller killed during a pull (the holder lets the block go). Bad peers: a wrong secret,
 * garbage, an oversized frame before the handshake, a silent connection, a flood of
 * handshakes, and an authenticated peer that never reads; each is dropped while the daemon
 * goes on serving its local clients and its good peer.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <netinet/tcp.h>

#include "tensord_testutil.h"
#include "peer_auth.h"

#define READY_MS 20000

struct daemon {
	char dir[64], sock[128], arena_dir[128], config[128], log[128];
	pid_t pid;
	int port;
};

static char secret_dir[64], secret_path[128], other_secret_path[128];
/* The namespace and the veth pair of this runner: made by test_network_namespace, removed
 * after it (and by the runner's teardown when a failed assertion ended the test first). */
static char ns_name[32], veth_out[16], veth_in[16];

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static void secrets_setup(void)
{
	snprintf(secret_dir, sizeof(secret_dir), "/tmp/check-tensord-%d-XXXXXX", (int)runner_pid);
	ck_assert_ptr_nonnull(mkdtemp(secret_dir));
	snprintf(secret_path, sizeof(secret_path), "%s/secret", secret_dir);
	snprintf(other_secret_path, sizeof(other_secret_path), "%s/other", secret_dir);
	write_file(secret_path, "correct horse battery staple, peers\n", 0600);
	write_file(other_secret_path, "a different secret of some length\n", 0600);
	/* The names of test_network_namespace's namespace and veth pair, known to the runner's
	 * teardown too. */
	snprintf(ns_name, sizeof(ns_name), "tn-peers-%d", (int)runner_pid);
	snprintf(veth_out, sizeof(veth_out), "tnpo%d", (int)runner_pid % 100000);
	snprintf(veth_in, sizeof(veth_in), "tnpi%d", (int)runner_pid % 100000);
}

static void netns_remove(void);

static void secrets_teardown(void)
{
	rm_dir_files(secret_dir);
}

/* The runner's teardown: what a failed test left. */
static void runner_teardown(void)
{
	netns_remove();
	remove_leftovers();
}

/* Start a daemon whose tensord.conf is @conf (the peer keys are added: its port, the secret),
 * with UCX_TLS=@tls in its environment (NULL: UCX's choice). */
static void up(struct daemon *d, const char *conf, const char *secret, const char *tls)
{
	d->port = free_port();
	char text[2048];
	snprintf(text, sizeof(text), "peer_secret = %s\npeer_listen = 127.0.0.1:%d\n%s",
		 secret ? secret : secret_path, d->port, conf);
	if (tls)
		setenv("UCX_TLS", tls, 1);
	daemon_setup_conf(text);
	unsetenv("UCX_TLS");
	memcpy(d->dir, D.dir, sizeof(d->dir));
	memcpy(d->sock, D.sock, sizeof(d->sock));
	memcpy(d->arena_dir, D.arena_dir, sizeof(d->arena_dir));
	memcpy(d->config, D.config, sizeof(d->config));
	memcpy(d->log, D.log, sizeof(d->log));
	d->pid = D.pid;
}

static void use(const struct daemon *d)
{
	memcpy(D.dir, d->dir, sizeof(D.dir));
	memcpy(D.sock, d->sock, sizeof(D.sock));
	memcpy(D.arena_dir, d->arena_dir, sizeof(D.arena_dir));
	memcpy(D.config, d->config, sizeof(D.config));
	memcpy(D.log, d->log, sizeof(D.log));
	D.pid = d->pid;
}

/* Start @d again (its folders kept), after it was killed. */
static void restart(struct daemon *d, const char *tls)
{
	use(d);
	if (tls)
		setenv("UCX_TLS", tls, 1);
	D.pid = spawn_tensord(D.sock, D.log, NULL);
	unsetenv("UCX_TLS");
	daemon_wait_ready();
	d->pid = D.pid;
}

/* Stop @d with SIGTERM (exit 0); its arena folder must be empty (each test destroys its
 * arenas); remove its folders. */
static void down(struct daemon *d)
{
	int st;
	ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(d->pid, &st, 0), d->pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tensord stopped with 0x%x", st);
	d->pid = 0;
	ck_assert_int_eq(count_files(d->arena_dir), 0);
	ck_assert_int_eq(rmdir(d->arena_dir), 0);
	rm_dir_files(d->dir);
}

/* Holder @A (its tensord.conf: @a_conf) and @B, which dials it (and has @b_conf too), both
 * with UCX_TLS=@tls; A's peer address in @a_addr. */
static void pair(struct daemon *A, const char *a_conf, struct daemon *B, const char *b_conf,
		 const char *tls, char a_addr[64])
{
	up(A, a_conf, NULL, tls);
	snprintf(a_addr, 64, "127.0.0.1:%d", A->port);
	char conf[512];
	snprintf(conf, sizeof(conf), "peer = %s\n%s", a_addr, b_conf);
	up(B, conf, NULL, tls);
}

/* Close the @n connections and stop the @n daemons, the last started first. */
static void finish_all(tn_tensord *const *c, struct daemon *const *d, int n)
{
	for (int i = 0; i < n; i++)
		tn_tensord_close(c[i]);
	for (int i = n - 1; i >= 0; i--)
		down(d[i]);
}

static tn_tensord *connect_to(const struct daemon *d)
{
	tn_tensord *c;
	ck_assert_tn_ok(tn_tensord_connect(d->sock, &c));
	return c;
}

static void addr_of(const struct daemon *d, char *buf, size_t n)
{
	snprintf(buf, n, "127.0.0.1:%d", d->port);
}

/* @c's entry for @addr (dialed or accepted), or false. */
static bool peer_entry(tn_tensord *c, const char *addr, unsigned flag, tn_tensord_peer *ret)
{
	tn_tensord_peer *v;
	size_t n;
	ck_assert_tn_ok(tn_tensord_peer_list(c, &v, &n));
	bool found = false;
	for (size_t i = 0; i < n && !found; i++)
		if (!strcmp(v[i].address, addr) && (v[i].flags & flag)) {
			*ret = v[i];
			found = true;
		}
	free(v);
	return found;
}

/* Wait until @c's peer @addr is ready; its entry. */
static tn_tensord_peer wait_ready(tn_tensord *c, const char *addr, unsigned flag)
{
	uint64_t t0 = now_ms();
	tn_tensord_peer p;
	memset(&p, 0, sizeof(p));
	for (;;) {
		if (peer_entry(c, addr, flag, &p) && p.state == TN_TENSORD_PEER_READY)
			return p;
		ck_assert_msg(now_ms() - t0 < READY_MS, "peer %s not ready after %d ms (state %s, "
			      "error \"%s\")", addr, READY_MS, tn_tensord_peer_state_name(p.state),
			      p.error);
		sleep_ms(10);
	}
}

static bool dlog_has(const struct daemon *d, const char *needle)
{
	FILE *f = fopen(d->log, "r");
	if (!f)
		return false;
	char line[2048];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void wait_log(const struct daemon *d, const char *needle, unsigned ms)
{
	uint64_t t0 = now_ms();
	while (!dlog_has(d, needle)) {
		ck_assert_msg(now_ms() - t0 < ms, "\"%s\" not in %s's log after %u ms", needle,
			      d->sock, ms);
		sleep_ms(10);
	}
}

/* ---- the source tensors --------------------------------------------------------------------- */

struct src {
	const char *name;
	enum tn_dtype dtype;
	int ndim;
	int64_t sizes[4], strides[4];
	int64_t offset, storage_elems;
};

static const struct src sources[] = {
	{ "f32", TN_FLOAT32, 2, { 1024, 1000 }, { 1000, 1 }, 0, 1024 * 1000 },
	{ "t/i16", TN_INT16, 3, { 4, 2, 3 }, { 1, 12, 4 }, 0, 24 },     /* a transposed view */
	{ "t/u8", TN_UINT8, 1, { 3 }, { 2 }, 5, 16 },                    /* a strided narrow */
	{ "scalar", TN_FLOAT64, 0, { 0 }, { 0 }, 3, 4 },                 /* 0-d, offset */
	{ "empty", TN_FLOAT32, 2, { 0, 5 }, { 5, 1 }, 0, 1 },
	{ "bf16", TN_BFLOAT16, 1, { 7 }, { 1 }, 0, 7 },
	{ "i64", TN_INT64, 2, { 3, 5 }, { 10, 2 }, 1, 40 },              /* gaps in both dims */
	{ "big", TN_FLOAT64, 1, { 8 << 20 }, { 1 }, 0, 8 << 20 },        /* 64 MiB */
};
#define NSOURCES (sizeof(sources) / sizeof(sources[0]))

/* Bytes that differ between tensors and runs: an xorshift of the element index and a seed. */
static void fill_bytes(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
}

static void publish_sources(tn_arena *a, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct src *s = &sources[i];
		size_t isz = tn_dtype_size(s->dtype);
		tn_storage *st;
		tn_tensor *t;
		ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)s->storage_elems * isz,
							      tn_arena_allocator(a), &st));
		fill_bytes(tn_storage_data(st), (size_t)s->storage_elems * isz, i + 1);
		ck_assert_tn_ok(tn_tensor_new(st, s->offset, s->ndim, s->sizes, s->strides, s->dtype,
					      &t));
		tn_storage_unref(st);
		ck_assert_tn_ok(tn_arena_publish(a, s->name, t, TN_ARENA_SEAL, NULL));
		tn_tensor_unref(t);
	}
}

/* @name in @b is sealed and equals @a's @src_name: dtype, sizes, strides, every element. */
static void expect_same(tn_arena *a, const char *src_name, tn_arena *b, const char *name)
{
	tn_tensor *x, *y;
	ck_assert_tn_ok(tn_arena_lookup(a, src_name, &x, NULL));
	ck_assert_tn_ok(tn_arena_lookup(b, name, &y, NULL));
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(b, name, &e));
	ck_assert_msg(e.flags & TN_ARENA_ENTRY_SEALED, "%s is not sealed", name);
	ck_assert_int_eq(tn_tensor_dtype(x), tn_tensor_dtype(y));
	int nd = tn_tensor_ndim(x);
	ck_assert_int_eq(nd, tn_tensor_ndim(y));
	ck_assert_int_eq(tn_tensor_storage_offset(y), 0);
	const int64_t *sz = tn_tensor_sizes(x), *sx = tn_tensor_strides(x),
		      *sy = tn_tensor_strides(y);
	int64_t numel = 1;
	for (int d = 0; d < nd; d++) {
		ck_assert_int_eq(sz[d], tn_tensor_sizes(y)[d]);
		ck_assert_int_eq(sx[d], sy[d]);
		numel *= sz[d];
	}
	size_t isz = tn_dtype_size(tn_tensor_dtype(x));
	const unsigned char *px = tn_tensor_data(x), *py = tn_tensor_data(y);
	for (int64_t i = 0; i < numel; i++) {
		int64_t rem = i, off = 0;
		for (int d = nd - 1; d >= 0; d--) {
			off += (rem % sz[d]) * sx[d];
			rem /= sz[d];
		}
		if (memcmp(px + off * (int64_t)isz, py + off * (int64_t)isz, isz))
			ck_abort_msg("%s: element %lld differs from %s's", name, (long long)i,
				     src_name);
	}
	tn_tensor_unref(x);
	tn_tensor_unref(y);
}

static tn_arena *open_arena(tn_tensord *c, const char *name)
{
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, name, 0, &a));
	return a;
}

static uint64_t used_bytes(tn_tensord *c, const char *name)
{
	return arena_stat(c, name).stats.used_bytes;
}

/* Wait until arena @name of @c uses @want bytes (within @ms), failing with @what. */
static void wait_used(tn_tensord *c, const char *name, uint64_t want, unsigned ms,
		      const char *what)
{
	uint64_t t0 = now_ms();
	while (used_bytes(c, name) != want) {
		ck_assert_msg(now_ms() - t0 < ms, "%s", what);
		sleep_ms(10);
	}
}

/* Wait until arena @name of @c uses @most bytes or fewer (within 5 s), failing with @what. */
static void wait_used_below(tn_tensord *c, const char *name, uint64_t most, const char *what)
{
	uint64_t t0 = now_ms();
	while (used_bytes(c, name) > most) {
		ck_assert_msg(now_ms() - t0 < 5000, "%s", what);
		sleep_ms(10);
	}
}

/* ---- pulls ---------------------------------------------------------------------------------- */

/* Holder A exports "src"; puller B dials A; both over @tls. Every source is pulled into B's
 * "dst", and B exports "dst" for A to pull one back over the connection A accepted. */
static void pull_all(const char *tls, const char *lanes_want, const char *conf, unsigned method)
{
	struct daemon A, B;
	char a_addr[64], a_conf[256], b_conf[256];
	snprintf(a_conf, sizeof(a_conf), "peer_export = src\n%s", conf);
	snprintf(b_conf, sizeof(b_conf), "peer_export = dst\n%s", conf);
	pair(&A, a_conf, &B, b_conf, tls, a_addr);
	char b_addr[64];
	addr_of(&B, b_addr, sizeof(b_addr));
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 256 << 20, 0, 0);
	make_arena(cb, "dst", 256 << 20, 0, 0);
	make_arena(ca, "back", 64 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src"), *b = open_arena(cb, "dst");
	publish_sources(a, NSOURCES);

	tn_tensord_peer p = wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	ck_assert_msg(strstr(p.lanes, "am=") && strstr(p.lanes, "rma="), "lanes \"%s\"", p.lanes);
	ck_assert_msg(strstr(p.lanes, lanes_want), "lanes \"%s\" without %s", p.lanes, lanes_want);
	/* Direct reads (libtensor-peers(7)) show in the lanes, both ways, or not at all. */
	bool direct = method == TN_TENSORD_PULL_DIRECT_READ;
	ck_assert_msg(!strstr(p.lanes, " read=process_vm_readv") == !direct, "lanes \"%s\"",
		      p.lanes);
	ck_assert_str_eq(p.error, "");
	/* A lists the connection it accepted, under the address B announced. */
	tn_tensord_peer q = wait_ready(ca, b_addr, TN_TENSORD_PEER_ACCEPTED);
	ck_assert_msg(strstr(q.lanes, "rma="), "lanes \"%s\"", q.lanes);
	ck_assert_msg(!strstr(q.lanes, " read=process_vm_readv") == !direct, "lanes \"%s\"",
		      q.lanes);

	for (size_t i = 0; i < NSOURCES; i++) {
		tn_tensord_pull_report rep;
		memset(&rep, 0xff, sizeof(rep));
		ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", sources[i].name, "dst",
						sources[i].name, &rep));
		if (rep.bytes)
			ck_assert_uint_eq(rep.method, method);
		ck_assert_str_eq(rep.lanes, p.lanes);
		expect_same(a, sources[i].name, b, sources[i].name);
	}
	/* tensorctl says how the bytes moved, in words and in JSON. */
	{
		static const char *const words[] = { "", "RMA get", "direct read",
						      "active messages" };
		static const char *const keys[] = { "", "rma_get", "direct_read",
						     "active_messages" };
		char out[4096], from[128], want[64];
		snprintf(from, sizeof(from), "%s:src/f32", a_addr);
		const char *text[] = { "--socket", B.sock, "pull", from, "--into", "dst/ctl/f32",
				       NULL };
		ck_assert_int_eq(tensorctl(out, sizeof(out), text), 0);
		snprintf(want, sizeof(want), " GB/s, %s, am=", words[method]);
		ck_assert_msg(strstr(out, "pulled ") && strstr(out, want), "%s", out);
		const char *json[] = { "--socket", B.sock, "--json", "pull", from, "--into",
				       "dst/ctl/json", NULL };
		ck_assert_int_eq(tensorctl(out, sizeof(out), json), 0);
		snprintf(want, sizeof(want), "\"method\": \"%s\"", keys[method]);
		ck_assert_msg(strstr(out, want), "%s", out);
		expect_same(a, "f32", b, "ctl/json");
	}
	/* The bytes of a view, not of its whole storage: the narrow's three elements two apart. */
	tn_tensord_pull_report rep;
	ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", "t/u8", "dst", "again/u8", &rep));
	ck_assert_uint_eq(rep.bytes, 5);
	expect_same(a, "t/u8", b, "again/u8");

	/* Refusals, each with its code; nothing is published under the names. */
	ck_assert_int_eq(tn_tensord_pull(cb, a_addr, "src", "nope", "dst", "x1", NULL), TN_ENOENT);
	ck_assert_int_eq(tn_tensord_pull(cb, a_addr, "back", "f32", "dst", "x2", NULL),
			 TN_EACCES);
	ck_assert_msg(strstr(tn_last_error(), "not exported"), "%s", tn_last_error());
	ck_assert_int_eq(tn_tensord_pull(cb, "127.0.0.1:1", "src", "f32", "dst", "x3", NULL),
			 TN_ENOTCONN);
	ck_assert_int_eq(tn_tensord_pull(cb, a_addr, "src", "f32", "dst", "f32", NULL), TN_EEXIST);
	ck_assert_int_eq(tn_tensord_pull(cb, a_addr, "src", "f32", "nodst", "x4", NULL), TN_ENOENT);
	{
		/* An unsealed tensor is not served. */
		ck_assert_tn_ok(publish_i32(a, "open", 10, 7));
		ck_assert_int_eq(tn_tensord_pull(cb, a_addr, "src", "open", "dst", "x5", NULL),
				 TN_EINVAL);
		ck_assert_msg(strstr(tn_last_error(), "not sealed"), "%s", tn_last_error());
	}
	for (int i = 1; i <= 5; i++) {
		char n[8];
		snprintf(n, sizeof(n), "x%d", i);
		ck_assert_int_eq(tn_arena_info(b, n, &(tn_arena_entry){ 0 }), TN_ENOENT);
	}

	/* The other way, over the connection A accepted. */
	tn_arena *back = open_arena(ca, "back");
	ck_assert_tn_ok(tn_tensord_pull(ca, b_addr, "dst", "t/i16", "back", "i16", NULL));
	expect_same(a, "t/i16", back, "i16");

	/* The holder let every block go: once unpublished on A, its bytes are free again. */
	uint64_t before = used_bytes(ca, "src");
	ck_assert_tn_ok(tn_arena_unpublish(a, "big"));
	wait_used_below(ca, "src", before - (64u << 20), "the holder still holds \"big\"");

	tn_arena_unref(a);
	tn_arena_unref(b);
	tn_arena_unref(back);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "back", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "dst", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
}

START_TEST(test_pull_shared_memory)
{
	/* Between processes of one host UCX picks its shared-memory transports, and the puller
	 * reads the holder's block itself (_i 0); with peer_direct_read = no, UCX's get (_i 1). */
	if (_i == 0)
		pull_all(NULL, "memory", "", TN_TENSORD_PULL_DIRECT_READ);
	else
		pull_all(NULL, "memory", "peer_direct_read = no\n", TN_TENSORD_PULL_RMA_GET);
}
END_TEST

START_TEST(test_pull_tcp)
{
	/* Over UCX's TCP there are no direct reads, even on one host. */
	pull_all("tcp", "tcp/", "", TN_TENSORD_PULL_ACTIVE_MESSAGE);
}
END_TEST

/* Three daemons: C pulls from B what B pulled from A. */
START_TEST(test_three_daemons)
{
	struct daemon A, B, C;
	char a_addr[64], b_addr[64], conf[256];
	pair(&A, "peer_export = src\n", &B, "peer_export = mid\n", NULL, a_addr);
	addr_of(&B, b_addr, sizeof(b_addr));
	snprintf(conf, sizeof(conf), "peer = %s\n", b_addr);
	up(&C, conf, NULL, "tcp");
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B), *cc = connect_to(&C);
	make_arena(ca, "src", 64 << 20, 0, 0);
	make_arena(cb, "mid", 64 << 20, 0, 0);
	make_arena(cc, "end", 64 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src"), *c = open_arena(cc, "end");
	publish_sources(a, NSOURCES - 1);
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	wait_ready(cc, b_addr, TN_TENSORD_PEER_DIALED);
	for (size_t i = 0; i < NSOURCES - 1; i++) {
		ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", sources[i].name, "mid",
						sources[i].name, NULL));
		ck_assert_tn_ok(tn_tensord_pull(cc, b_addr, "mid", sources[i].name, "end",
						sources[i].name, NULL));
		expect_same(a, sources[i].name, c, sources[i].name);
	}
	/* C does not dial A: A is not its peer. */
	ck_assert_int_eq(tn_tensord_pull(cc, a_addr, "src", "f32", "end", "f", NULL), TN_ENOTCONN);
	tn_arena_unref(a);
	tn_arena_unref(c);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "mid", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cc, "end", 0));
	finish_all((tn_tensord *[]){ ca, cb, cc }, (struct daemon *[]){ &A, &B, &C }, 3);
}
END_TEST

/* A batch: every sealed tensor under a prefix, in one request, all or nothing. */
START_TEST(test_pull_prefix)
{
	/* Shared memory (direct reads), TCP, shared memory with UCX's get. */
	const char *tls = _i == 1 ? "tcp" : NULL;
	unsigned method = _i == 0   ? TN_TENSORD_PULL_DIRECT_READ
			  : _i == 1 ? TN_TENSORD_PULL_ACTIVE_MESSAGE
				    : TN_TENSORD_PULL_RMA_GET;
	struct daemon A, B;
	char a_addr[64];
	pair(&A, "peer_export = kv\n", &B, _i == 2 ? "peer_direct_read = no\n" : "", tls, a_addr);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "kv", 64 << 20, 0, 0);
	make_arena(cb, "mine", 64 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "kv"), *b = open_arena(cb, "mine");
	uint64_t empty = used_bytes(ca, "kv");
	/* 300 blocks of 4 KiB (int32 [1024], each its own values), a name that only starts like
	 * them, and one not sealed: the batch takes the 300. */
	enum { NB = 300 };
	for (int i = 0; i < NB; i++) {
		char n[32];
		snprintf(n, sizeof(n), "seq7/blk%04d", i);
		ck_assert_tn_ok(publish_i32(a, n, 1024, i * 1000));
		ck_assert_tn_ok(tn_arena_seal(a, n));
	}
	ck_assert_tn_ok(publish_i32(a, "seq7x", 4, 1));
	ck_assert_tn_ok(tn_arena_seal(a, "seq7x"));
	ck_assert_tn_ok(publish_i32(a, "seq7/open", 4, 1));
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);

	tn_tensord_pull_report rep;
	size_t count = 0;
	ck_assert_tn_ok(tn_tensord_pull_prefix(cb, a_addr, "kv", "seq7/", "mine", "s/", &rep,
					       &count));
	ck_assert_uint_eq(count, NB);
	ck_assert_uint_eq(rep.bytes, (uint64_t)NB * 4096);
	ck_assert_uint_eq(rep.method, method);
	for (int i = 0; i < NB; i++) {
		char n[32], m[32];
		snprintf(n, sizeof(n), "seq7/blk%04d", i);
		snprintf(m, sizeof(m), "s/blk%04d", i);
		expect_same(a, n, b, m);
	}
	ck_assert_int_eq(tn_arena_info(b, "s/open", &(tn_arena_entry){ 0 }), TN_ENOENT);
	tn_arena_entry *es;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(b, NULL, &es, &n));
	ck_assert_uint_eq(n, NB);
	free(es);

	/* All or nothing: one name taken here fails the batch before any byte moves. */
	ck_assert_int_eq(tn_tensord_pull_prefix(cb, a_addr, "kv", "seq7/", "mine", "s/", NULL,
						&count), TN_EEXIST);
	ck_assert_uint_eq(count, 0);
	ck_assert_tn_ok(publish_i32(b, "t/blk0150", 4, 1));
	ck_assert_int_eq(tn_tensord_pull_prefix(cb, a_addr, "kv", "seq7/", "mine", "t/", NULL,
						NULL), TN_EEXIST);
	ck_assert_msg(strstr(tn_last_error(), "t/blk0150"), "%s", tn_last_error());
	ck_assert_tn_ok(tn_arena_list(b, "t/", &es, &n));
	ck_assert_uint_eq(n, 1);
	free(es);
	/* Nothing sealed under a prefix; an arena not exported. */
	ck_assert_int_eq(tn_tensord_pull_prefix(cb, a_addr, "kv", "seq8/", "mine", "u/", NULL,
						NULL), TN_ENOENT);
	ck_assert_int_eq(tn_tensord_pull_prefix(cb, a_addr, "mine", "s", "mine", "u/", NULL, NULL),
			 TN_EACCES);

	/* The holder let every block go: unpublished, the arena is empty again. */
	tn_arena_unref(b);
	ck_assert_tn_ok(tn_arena_list(a, NULL, &es, &n));
	for (size_t i = 0; i < n; i++)
		ck_assert_tn_ok(tn_arena_unpublish(a, es[i].name));
	free(es);
	wait_used(ca, "kv", empty, 10000, "the holder kept blocks of the batch");
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "kv", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "mine", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
}
END_TEST

/* ---- kills ---------------------------------------------------------------------------------- */

#define HUGE_BYTES ((size_t)512 << 20)

static void publish_huge(tn_arena *a)
{
	tn_storage *st;
	tn_tensor *t;
	int64_t n = (int64_t)(HUGE_BYTES / 4);
	ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, HUGE_BYTES, tn_arena_allocator(a),
						      &st));
	uint32_t *p = tn_storage_data(st);
	for (int64_t i = 0; i < n; i++)
		p[i] = (uint32_t)i * 2654435761u;
	ck_assert_tn_ok(tn_tensor_new(st, 0, 1, &n, NULL, TN_INT32, &t));
	tn_storage_unref(st);
	ck_assert_tn_ok(tn_arena_publish(a, "huge", t, TN_ARENA_SEAL, NULL));
	tn_tensor_unref(t);
}

/* A child that pulls "huge" from @from through @sock into "dst", exiting with -code. */
static pid_t pull_child(const char *sock, const char *from)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *c;
		EXPECT(tn_tensord_connect(sock, &c) == 0);
		int r = tn_tensord_pull(c, from, "src", "huge", "dst", "huge", NULL);
		if (r)
			fprintf(stderr, "pull: %s\n", tn_last_error());
		_exit(-r);
	}
	return pid;
}

/* The get's destination block exists in @name of @c (its used bytes passed @used): the
 * puller has PULL_INFO and the get runs. */
static void wait_get_started(tn_tensord *c, const char *name, uint64_t used)
{
	uint64_t t0 = now_ms();
	while (used_bytes(c, name) <= used) {
		ck_assert_msg(now_ms() - t0 < 10000, "the get did not start within 10 s");
		sleep_ms(1);
	}
}

/* The holder is killed during a 512 MiB get, over TCP (_i 0) and over shared memory (_i 1,
 * UCX's choice: sysv/cma on one host). */
START_TEST(test_holder_killed)
{
	const char *tls = _i == 0 ? "tcp" : NULL;
	struct daemon A, B;
	char a_addr[64];
	pair(&A, "peer_export = src\n", &B, "", tls, a_addr);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 600 << 20, 0, 0);
	make_arena(cb, "dst", 600 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src"), *b = open_arena(cb, "dst");
	publish_huge(a);
	tn_arena_unref(a);
	tn_tensord_close(ca);
	tn_tensord_peer p;
	p = wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	ck_assert_msg(strstr(p.lanes, _i == 0 ? "tcp/" : "read=process_vm_readv"), "lanes \"%s\"",
		      p.lanes);
	uint64_t used = used_bytes(cb, "dst");

	pid_t child = pull_child(B.sock, a_addr);
	/* Kill once the puller's block exists: the get runs for 100 ms or more from then. */
	wait_get_started(cb, "dst", used);
	use(&A);
	daemon_kill9();
	uint64_t killed = now_ms();
	int st = child_status(child);
	uint64_t waited = now_ms() - killed;
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == -TN_ENOTCONN,
		      "the pull ended with status 0x%x, not TN_ENOTCONN", st);
	ck_assert_msg(waited < 5000, "the pull failed %llu ms after the kill",
		      (unsigned long long)waited);
	/* No half tensor, and its block is free again. */
	ck_assert_int_eq(tn_arena_info(b, "huge", &(tn_arena_entry){ 0 }), TN_ENOENT);
	ck_assert_uint_eq(used_bytes(cb, "dst"), used);
	/* B goes on serving its clients, and dials A again once A is back. */
	tn_tensord_status s;
	ck_assert_tn_ok(tn_tensord_status_get(cb, &s));
	restart(&A, tls);
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	ck_assert(peer_entry(cb, a_addr, TN_TENSORD_PEER_DIALED, &p));
	ck_assert_uint_ge(p.failures, 1);
	ca = connect_to(&A);
	/* The same pull again. (Over shared memory it goes by a direct read: with UCX 1.13's get
	 * over sysv, a worker whose peer died mid-get could stay busy, and that pull hang.) */
	ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", "huge", "dst", "huge", NULL));
	a = open_arena(ca, "src");
	expect_same(a, "huge", b, "huge");
	tn_arena_unref(a);
	tn_arena_unref(b);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "dst", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
}
END_TEST

/* The holder's name is unpublished while the get runs: the lease keeps the block, the pull
 * completes from it, bit-exact, and the block goes once the pull released it. */
START_TEST(test_unpublished_during_pull)
{
	struct daemon A, B;
	char a_addr[64];
	pair(&A, "peer_export = src\n", &B, "", "tcp", a_addr);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 600 << 20, 0, 0);
	make_arena(cb, "dst", 600 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src"), *b = open_arena(cb, "dst");
	uint64_t empty = used_bytes(ca, "src");
	publish_huge(a);
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	pid_t child = pull_child(B.sock, a_addr);
	sleep_ms(100);
	ck_assert_tn_ok(tn_arena_unpublish(a, "huge"));
	ck_assert_child_ok(child);
	tn_tensor *got;
	ck_assert_tn_ok(tn_arena_lookup(b, "huge", &got, NULL));
	/* publish_huge's values (nothing here holds the holder's block: only the lease does). */
	ck_assert_int_eq(tn_tensor_numel(got), (int64_t)(HUGE_BYTES / 4));
	const uint32_t *v = tn_tensor_data(got);
	for (int64_t i = 0; i < (int64_t)(HUGE_BYTES / 4); i++)
		if (v[i] != (uint32_t)i * 2654435761u)
			ck_abort_msg("element %lld differs", (long long)i);
	tn_tensor_unref(got);
	/* Nobody holds it now: its bytes come back on the holder. */
	wait_used(ca, "src", empty, 10000, "the holder kept the block after the pull");
	tn_arena_unref(a);
	tn_arena_unref(b);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "dst", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
}
END_TEST

START_TEST(test_puller_killed)
{
	struct daemon A, B;
	char a_addr[64], b_addr[64];
	pair(&A, "peer_export = src\n", &B, "", "tcp", a_addr);
	addr_of(&B, b_addr, sizeof(b_addr));
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 600 << 20, 0, 0);
	make_arena(cb, "dst", 600 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src");
	uint64_t empty = used_bytes(ca, "src");
	publish_huge(a);
	tn_tensord_close(cb);
	wait_ready(ca, b_addr, TN_TENSORD_PEER_ACCEPTED);

	pid_t child = pull_child(B.sock, a_addr);
	/* The holder has the lease once it logged nothing yet... wait for the get to run. */
	sleep_ms(150);
	use(&B);
	daemon_kill9();
	int st = child_status(child);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	/* A sees B go, and lets the block go: unpublished, its bytes come back. */
	ck_assert_tn_ok(tn_arena_unpublish(a, "huge"));
	wait_used(ca, "src", empty, 10000, "the holder kept the dead puller's lease");
	tn_tensord_status s;
	ck_assert_tn_ok(tn_tensord_status_get(ca, &s));
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	tn_tensord_close(ca);
	down(&A);
	/* B's arena folder: its record and file stay after the kill; remove them. */
	rm_dir_files(B.arena_dir);
	rm_dir_files(B.dir);
}
END_TEST

/* A pull that takes longer than peer_transfer_timeout_ms fails with TN_ETIMEDOUT and leaves no
 * name; the get drains on (the connection stays: UCX would deliver a cancelled get's replies
 * into freed memory), then its block is freed and the holder's lease released. */
START_TEST(test_transfer_deadline)
{
	struct daemon A, B;
	char a_addr[64];
	pair(&A, "peer_export = src\n", &B, "peer_transfer_timeout_ms = 100\n", "tcp", a_addr);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 600 << 20, 0, 0);
	make_arena(cb, "dst", 600 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src"), *b = open_arena(cb, "dst");
	uint64_t src_empty = used_bytes(ca, "src");
	publish_huge(a);
	ck_assert_tn_ok(publish_i32(a, "small", 1000, 3));
	ck_assert_tn_ok(tn_arena_seal(a, "small"));
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	uint64_t used = used_bytes(cb, "dst");
	/* 512 MiB over UCX's TCP takes several hundred milliseconds here. */
	uint64_t t0 = now_ms();
	ck_assert_int_eq(tn_tensord_pull(cb, a_addr, "src", "huge", "dst", "huge", NULL),
			 TN_ETIMEDOUT);
	ck_assert_msg(strstr(tn_last_error(), "peer_transfer_timeout_ms"), "%s", tn_last_error());
	ck_assert_msg(now_ms() - t0 < 2000, "the deadline fired after %llu ms",
		      (unsigned long long)(now_ms() - t0));
	ck_assert_int_eq(tn_arena_info(b, "huge", &(tn_arena_entry){ 0 }), TN_ENOENT);
	wait_used(cb, "dst", used, 10000, "the drained get's block was not freed");
	/* The same connection serves the next pull, and the holder let the lease go. */
	tn_tensord_peer p = wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	ck_assert_msg(p.failures == 0, "the connection was lost %llu times: %s",
		      (unsigned long long)p.failures, p.error);
	ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", "small", "dst", "small", NULL));
	expect_same(a, "small", b, "small");
	ck_assert_tn_ok(tn_arena_unpublish(a, "huge"));
	ck_assert_tn_ok(tn_arena_unpublish(a, "small"));
	wait_used(ca, "src", src_empty, 10000, "the holder kept the lease of the timed-out pull");
	tn_arena_unref(a);
	tn_arena_unref(b);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "dst", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
}
END_TEST

/* ---- pushes --------------------------------------------------------------------------------- */

/* B dials A; A takes pushes into "in" (peer_import), B into "back". B pushes every source from
 * its "out", which it exports to nobody; A pushes one back over the connection it accepted. */
START_TEST(test_push)
{
	const char *tls = _i == 0 ? NULL : "tcp";
	struct daemon A, B;
	char a_addr[64], b_addr[64];
	pair(&A, "peer_import = in\npeer_import = gone\n", &B, "peer_import = back\n", tls,
	     a_addr);
	addr_of(&B, b_addr, sizeof(b_addr));
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "in", 256 << 20, 0, 0);
	make_arena(ca, "other", 16 << 20, 0, 0);
	make_arena(cb, "out", 256 << 20, 0, 0);
	make_arena(cb, "back", 16 << 20, 0, 0);
	tn_arena *in = open_arena(ca, "in"), *out = open_arena(cb, "out");
	publish_sources(out, NSOURCES);
	tn_tensord_peer p = wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	if (tls)
		ck_assert_msg(strstr(p.lanes, "tcp/"), "lanes \"%s\"", p.lanes);
	wait_ready(ca, b_addr, TN_TENSORD_PEER_ACCEPTED);

	for (size_t i = 0; i < NSOURCES; i++) {
		tn_tensord_pull_report rep;
		memset(&rep, 0xff, sizeof(rep));
		ck_assert_tn_ok(tn_tensord_push(cb, "out", sources[i].name, a_addr, "in",
						sources[i].name, &rep));
		if (rep.bytes)
			ck_assert_uint_eq(rep.method, tls ? TN_TENSORD_PULL_ACTIVE_MESSAGE
							  : TN_TENSORD_PULL_DIRECT_READ);
		ck_assert_str_eq(rep.lanes, p.lanes);
		expect_same(out, sources[i].name, in, sources[i].name);
	}
	/* The bytes of the view only, under another name. */
	tn_tensord_pull_report rep;
	ck_assert_tn_ok(tn_tensord_push(cb, "out", "t/u8", a_addr, "in", "again/u8", &rep));
	ck_assert_uint_eq(rep.bytes, 5);
	expect_same(out, "t/u8", in, "again/u8");

	/* Refusals, each with its code; nothing is published under the names. */
	ck_assert_int_eq(tn_tensord_push(cb, "out", "nope", a_addr, "in", "x1", NULL), TN_ENOENT);
	ck_assert_int_eq(tn_tensord_push(cb, "out", "f32", a_addr, "other", "x2", NULL),
			 TN_EACCES);
	ck_assert_msg(strstr(tn_last_error(), "peer_import"), "%s", tn_last_error());
	ck_assert_int_eq(tn_tensord_push(cb, "out", "f32", "127.0.0.1:1", "in", "x3", NULL),
			 TN_ENOTCONN);
	ck_assert_int_eq(tn_tensord_push(cb, "out", "f32", a_addr, "in", "f32", NULL), TN_EEXIST);
	ck_assert_int_eq(tn_tensord_push(cb, "out", "f32", a_addr, "gone", "x4", NULL), TN_ENOENT);
	ck_assert_msg(strstr(tn_last_error(), "no arena \"gone\""), "%s", tn_last_error());
	ck_assert_tn_ok(publish_i32(out, "open", 10, 7));
	ck_assert_int_eq(tn_tensord_push(cb, "out", "open", a_addr, "in", "x5", NULL), TN_EINVAL);
	ck_assert_msg(strstr(tn_last_error(), "not sealed"), "%s", tn_last_error());
	ck_assert_int_eq(tn_tensord_push(cb, "nosuch", "f32", a_addr, "in", "x6", NULL),
			 TN_ENOENT);
	for (int i = 1; i <= 6; i++) {
		char n[8];
		snprintf(n, sizeof(n), "x%d", i);
		ck_assert_int_eq(tn_arena_info(in, n, &(tn_arena_entry){ 0 }), TN_ENOENT);
	}

	/* The other way, over the connection A accepted. */
	tn_arena *back = open_arena(cb, "back");
	ck_assert_tn_ok(tn_tensord_push(ca, "in", "t/i16", b_addr, "back", "i16", NULL));
	expect_same(out, "t/i16", back, "i16");

	/* B let every block go: once unpublished, "big"'s bytes are free again. */
	uint64_t before = used_bytes(cb, "out");
	ck_assert_tn_ok(tn_arena_unpublish(out, "big"));
	wait_used_below(cb, "out", before - (64u << 20), "the pusher still holds \"big\"");

	tn_arena_unref(in);
	tn_arena_unref(out);
	tn_arena_unref(back);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "in", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "other", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "out", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "back", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
}
END_TEST

/* A child that pushes B's "huge" through @sock to @to's "in", exiting with -code. */
static pid_t push_child(const char *sock, const char *to)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *c;
		EXPECT(tn_tensord_connect(sock, &c) == 0);
		int r = tn_tensord_push(c, "out", "huge", to, "in", "huge", NULL);
		if (r)
			fprintf(stderr, "push: %s\n", tn_last_error());
		_exit(-r);
	}
	return pid;
}

/* A 512 MiB push, during which the receiver (_i 0, over TCP) or the pusher (_i 1, over shared
 * memory) is killed. */
START_TEST(test_push_killed)
{
	const char *tls = _i == 0 ? "tcp" : NULL;
	struct daemon A, B;
	char a_addr[64];
	pair(&A, "peer_import = in\n", &B, "", tls, a_addr);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "in", 600 << 20, 0, 0);
	make_arena(cb, "out", 600 << 20, 0, 0);
	tn_arena *out = open_arena(cb, "out");
	uint64_t out_empty = used_bytes(cb, "out"), in_empty = used_bytes(ca, "in");
	publish_huge(out);
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	pid_t child = push_child(B.sock, a_addr);
	wait_get_started(ca, "in", in_empty);
	if (_i == 0) {
		use(&A);
		daemon_kill9();
		tn_tensord_close(ca);
		uint64_t killed = now_ms();
		int st = child_status(child);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == -TN_ENOTCONN,
			      "the push ended with status 0x%x, not TN_ENOTCONN", st);
		ck_assert_msg(now_ms() - killed < 5000, "the push failed %llu ms after the kill",
			      (unsigned long long)(now_ms() - killed));
		/* B let its lease go: unpublished, the block is free. */
		ck_assert_tn_ok(tn_arena_unpublish(out, "huge"));
		wait_used(cb, "out", out_empty, 10000, "the pusher kept the lease of a dead peer");
		tn_tensord_status s;
		ck_assert_tn_ok(tn_tensord_status_get(cb, &s));
		tn_arena_unref(out);
		ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "out", 0));
		tn_tensord_close(cb);
		down(&B);
		rm_dir_files(A.arena_dir);
		rm_dir_files(A.dir);
	} else {
		use(&B);
		daemon_kill9();
		tn_tensord_close(cb);
		int st = child_status(child);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
		/* A sees B go: no half tensor, and the block it was filling is free again. */
		wait_used(ca, "in", in_empty, 10000, "the receiver kept the half block");
		tn_arena *in = open_arena(ca, "in");
		ck_assert_int_eq(tn_arena_info(in, "huge", &(tn_arena_entry){ 0 }), TN_ENOENT);
		tn_arena_unref(in);
		tn_arena_unref(out);
		tn_tensord_status s;
		ck_assert_tn_ok(tn_tensord_status_get(ca, &s));
		ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "in", 0));
		tn_tensord_close(ca);
		down(&A);
		rm_dir_files(B.arena_dir);
		rm_dir_files(B.dir);
	}
}
END_TEST

/* ---- bad peers ------------------------------------------------------------------------------ */

static int tcp_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* The daemon closes @fd within @ms (reading and dropping what it sent). */
static void expect_closed(int fd, unsigned ms, const char *what)
{
	uint64_t t0 = now_ms();
	char buf[4096];
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)(ms - (now_ms() - t0));
		ck_assert_msg(left > 0 && poll(&p, 1, left) == 1, "%s: not closed within %u ms",
			      what, ms);
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
	}
	close(fd);
}

/* The peer protocol's frame header, version 3 (tensord/peers.c). */
#define WIRE_VERSION 4

struct wire_frame {
	uint32_t magic;
	uint16_t version, type;
	uint32_t len, seq;
};

static void send_all(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* @n bytes from @fd, or false when it closed first. */
static bool try_recv_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ck_assert_int_eq(poll(&pf, 1, 10000), 1);
		ssize_t r = recv(fd, (char *)p + got, n - got, 0);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

static void recv_all(int fd, void *p, size_t n)
{
	ck_assert_msg(try_recv_all(fd, p, n), "the daemon closed the connection");
}

/* What ADDR starts with (tensord/peers.c's struct f_local), before the UCX worker address. */
struct wire_local {
	char boot_id[40];
	uint64_t pidns, token;
	int32_t pid;
	uint32_t flags; /* 1: the sender's UCX has a shared-memory transport */
};

/* A raw dialer that knows the secret, through the handshake up to the daemon's ADDR. */
struct raw_peer {
	int fd;
	unsigned char nonce[TND_PEER_NONCE], their_nonce[TND_PEER_NONCE];
	unsigned char *addr; /* the daemon's ADDR payload: a wire_local, then its worker address */
	size_t len;
};

static void raw_handshake(int port, struct raw_peer *r)
{
	int fd;
	struct {
		struct wire_frame f;
		unsigned char nonce[TND_PEER_NONCE];
		char listen[280];
		uint64_t instance;
	} hello;
	memset(&hello, 0, sizeof(hello));
	hello.f = (struct wire_frame){ 0x52504e54u, WIRE_VERSION, 1, sizeof(hello) - sizeof(hello.f), 0 };
	ck_assert_int_eq(tnd_peer_nonce(hello.nonce), 0);
	hello.instance = 12345;
	typeof(hello) theirs;
	/* The daemon may not yet have seen the end of the flood's connections, and close this
	 * one as the 17th waiting handshake: then again. */
	for (int tries = 0;; tries++) {
		fd = tcp_connect(port);
		send_all(fd, &hello, sizeof(hello));
		if (try_recv_all(fd, &theirs, sizeof(theirs)))
			break;
		close(fd);
		ck_assert_int_lt(tries, 100);
		sleep_ms(20);
	}
	ck_assert_uint_eq(theirs.f.type, 1);
	struct tnd_peer_secret s;
	char err[256];
	ck_assert_int_eq(tnd_peer_secret_load(secret_path, &s, err, sizeof(err)), 0);
	struct {
		struct wire_frame f;
		unsigned char proof[TND_SHA256_SIZE];
	} proof;
	proof.f = (struct wire_frame){ 0x52504e54u, WIRE_VERSION, 2, TND_SHA256_SIZE, 0 };
	tnd_peer_proof(&s, TND_PEER_DIALER, hello.nonce, theirs.nonce, proof.proof);
	send_all(fd, &proof, sizeof(proof));
	typeof(proof) lp;
	recv_all(fd, &lp, sizeof(lp));
	ck_assert_uint_eq(lp.f.type, 2);
	ck_assert(tnd_peer_proof_ok(&s, TND_PEER_LISTENER, hello.nonce, theirs.nonce, lp.proof));
	tnd_peer_secret_clear(&s);
	struct wire_frame af;
	recv_all(fd, &af, sizeof(af));
	ck_assert_uint_eq(af.type, 3);
	ck_assert_uint_gt(af.len, sizeof(struct wire_local));
	ck_assert_uint_le(af.len, 65536);
	r->fd = fd;
	memcpy(r->nonce, hello.nonce, sizeof(r->nonce));
	memcpy(r->their_nonce, theirs.nonce, sizeof(r->their_nonce));
	r->len = af.len;
	r->addr = malloc(af.len);
	ck_assert_ptr_nonnull(r->addr);
	recv_all(fd, r->addr, af.len);
}

/* Send ADDR: @lo, then the worker address @ucx of @n bytes. */
static void raw_send_addr(int fd, const struct wire_local *lo, const void *ucx, size_t n)
{
	struct wire_frame f = { 0x52504e54u, WIRE_VERSION, 3, (uint32_t)(sizeof(*lo) + n), 0 };
	unsigned char *b = malloc(sizeof(f) + sizeof(*lo) + n);
	ck_assert_ptr_nonnull(b);
	memcpy(b, &f, sizeof(f));
	memcpy(b + sizeof(f), lo, sizeof(*lo));
	memcpy(b + sizeof(f) + sizeof(*lo), ucx, n);
	send_all(fd, b, sizeof(f) + sizeof(*lo) + n);
	free(b);
}

/* A raw dialer that knows the secret, connected: the daemon's own ADDR sent back as ours (its
 * endpoint then leads to itself, which UCX allows); returns the descriptor. */
static int raw_authenticated(int port)
{
	struct raw_peer r;
	raw_handshake(port, &r);
	struct wire_local lo;
	memcpy(&lo, r.addr, sizeof(lo));
	raw_send_addr(r.fd, &lo, r.addr + sizeof(lo), r.len - sizeof(lo));
	free(r.addr);
	return r.fd;
}

/* The token a dialer shows for direct reads on @r's connection (tensord/peer_read.h). */
static void raw_token(const struct raw_peer *r, unsigned char tok[TND_SHA256_SIZE])
{
	struct tnd_peer_secret s;
	char err[256];
	ck_assert_int_eq(tnd_peer_secret_load(secret_path, &s, err, sizeof(err)), 0);
	tnd_peer_proof(&s, TND_PEER_DIALER_TOKEN, r->nonce, r->their_nonce, tok);
	tnd_peer_secret_clear(&s);
}

/* Direct reads: a peer that names a process other than itself is read over UCX only; one
 * that shows its token in its own memory is read directly. @a, @b: two daemons of this host
 * (b's worker address makes the endpoint a shared-memory one). */
static void direct_read_claims(const struct daemon *A, const struct daemon *B)
{
	struct raw_peer rb, ra;
	raw_handshake(B->port, &rb);
	const unsigned char *b_ucx = rb.addr + sizeof(struct wire_local);
	size_t b_len = rb.len - sizeof(struct wire_local);
	static unsigned char tok[TND_SHA256_SIZE];
	struct wire_local lo;

	/* Its token here, but B's pid: A reads B, finds no token there, and reads by UCX. */
	raw_handshake(A->port, &ra);
	memcpy(&lo, ra.addr, sizeof(lo)); /* A's boot id and pid namespace */
	ck_assert_int_eq(lo.pid, A->pid);
	raw_token(&ra, tok);
	lo.pid = B->pid;
	lo.token = (uint64_t)(uintptr_t)tok;
	raw_send_addr(ra.fd, &lo, b_ucx, b_len);
	char needle[96];
	snprintf(needle, sizeof(needle), "pid %d", (int)B->pid);
	wait_log(A, "no direct reads (UCX's get instead)", 5000);
	wait_log(A, needle, 100);
	free(ra.addr);
	close(ra.fd);

	/* This process's pid, the token of another connection: the same. */
	raw_handshake(A->port, &ra);
	memcpy(&lo, ra.addr, sizeof(lo));
	lo.pid = getpid();
	lo.token = (uint64_t)(uintptr_t)tok; /* still the first connection's */
	raw_send_addr(ra.fd, &lo, b_ucx, b_len);
	snprintf(needle, sizeof(needle), "pid %d does not hold this connection's token",
		 (int)getpid());
	wait_log(A, needle, 5000);
	free(ra.addr);
	close(ra.fd);

	/* Its own pid and its token: A says it reads directly (LOCAL_READ, no payload). */
	raw_handshake(A->port, &ra);
	memcpy(&lo, ra.addr, sizeof(lo));
	raw_token(&ra, tok);
	lo.pid = getpid();
	lo.token = (uint64_t)(uintptr_t)tok;
	raw_send_addr(ra.fd, &lo, b_ucx, b_len);
	struct wire_frame lr;
	recv_all(ra.fd, &lr, sizeof(lr));
	ck_assert_uint_eq(lr.type, 12);
	ck_assert_uint_eq(lr.len, 0);
	free(ra.addr);
	close(ra.fd);
	free(rb.addr);
	close(rb.fd);
}

/* A PULL frame (tensord/peers.c's struct f_pull), id 1. */
struct raw_pull {
	struct wire_frame f;
	uint64_t id;
	char arena[64];
	char name[256];
	uint32_t flags, pad;
};

static struct raw_pull raw_pull(const char *arena, const char *name, uint32_t flags)
{
	struct raw_pull p;
	memset(&p, 0, sizeof(p));
	p.f = (struct wire_frame){ 0x52504e54u, WIRE_VERSION, 6, sizeof(p) - sizeof(p.f), 0 };
	p.id = 1;
	snprintf(p.arena, sizeof(p.arena), "%s", arena);
	snprintf(p.name, sizeof(p.name), "%s", name);
	p.flags = flags;
	return p;
}

START_TEST(test_bad_peers)
{
	struct daemon A, B, C;
	char a_addr[64], conf[256];
	pair(&A, "peer_export = src\npeer_timeout_ms = 1000\n", &B, "", NULL, a_addr);
	snprintf(conf, sizeof(conf), "peer = %s\n", a_addr);
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 16 << 20, 0, 0);
	make_arena(cb, "dst", 16 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src");
	publish_sources(a, 3);
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);

	/* A daemon with another secret: refused, never ready, nothing served to it. */
	up(&C, conf, other_secret_path, NULL);
	tn_tensord *cc = connect_to(&C);
	make_arena(cc, "dst", 16 << 20, 0, 0);
	wait_log(&A, "refused: its proof does not match the shared secret", 10000);
	tn_tensord_peer p;
	ck_assert(peer_entry(cc, a_addr, TN_TENSORD_PEER_DIALED, &p));
	ck_assert_uint_ne(p.state, TN_TENSORD_PEER_READY);
	ck_assert_int_eq(tn_tensord_pull(cc, a_addr, "src", "f32", "dst", "f32", NULL),
			 TN_ENOTCONN);

	/* Garbage: not a peer. */
	int fd = tcp_connect(A.port);
	char junk[64];
	memset(junk, 0xab, sizeof(junk));
	send_all(fd, junk, sizeof(junk));
	expect_closed(fd, 3000, "garbage");
	wait_log(&A, "not a tensord peer (bad magic 0xabababab)", 3000);
	/* A frame longer than a HELLO before the handshake. */
	fd = tcp_connect(A.port);
	struct wire_frame big = { 0x52504e54u, 1, 1, 1u << 20, 0 };
	send_all(fd, &big, sizeof(big));
	expect_closed(fd, 3000, "oversized HELLO");
	/* Another version of the peer protocol. */
	fd = tcp_connect(A.port);
	struct wire_frame v9 = { 0x52504e54u, 9, 1, 0, 0 };
	send_all(fd, &v9, sizeof(v9));
	expect_closed(fd, 3000, "version 9");
	/* A frame other than PROOF after the HELLOs. */
	fd = tcp_connect(A.port);
	{
		struct {
			struct wire_frame f;
			unsigned char nonce[TND_PEER_NONCE];
			char listen[280];
			uint64_t instance;
		} hello;
		memset(&hello, 0, sizeof(hello));
		hello.f = (struct wire_frame){ 0x52504e54u, WIRE_VERSION, 1, sizeof(hello) - sizeof(hello.f),
					       0 };
		send_all(fd, &hello, sizeof(hello));
		struct wire_frame addr = { 0x52504e54u, 1, 3, 0, 0 };
		send_all(fd, &addr, sizeof(addr));
		expect_closed(fd, 3000, "ADDR before PROOF");
	}
	direct_read_claims(&A, &B);
	/* Silent: dropped after peer_timeout_ms. */
	fd = tcp_connect(A.port);
	uint64_t t0 = now_ms();
	expect_closed(fd, 5000, "a silent connection");
	ck_assert_uint_ge(now_ms() - t0, 800);
	/* A flood of handshakes: at most 16 wait at once, the rest are closed at once. */
	int flood[24];
	for (int i = 0; i < 24; i++)
		flood[i] = tcp_connect(A.port);
	expect_closed(flood[23], 800, "the 24th waiting handshake");
	for (int i = 0; i < 23; i++)
		close(flood[i]);
	/* An authenticated peer that sends garbage after the handshake. */
	fd = raw_authenticated(A.port);
	struct wire_frame odd = { 0x52504e54u, WIRE_VERSION, 77, 0, 0 };
	send_all(fd, &odd, sizeof(odd));
	expect_closed(fd, 3000, "an unknown frame type after the handshake");
	/* SEND (bytes by active messages) of a lease it does not hold; SEND of one twice. */
	fd = raw_authenticated(A.port);
	{
		struct {
			struct wire_frame f;
			uint64_t lease, key;
		} snd = { { 0x52504e54u, WIRE_VERSION, 13, 16, 0 }, 777, 1 };
		send_all(fd, &snd, sizeof(snd));
		expect_closed(fd, 3000, "SEND of a lease it does not hold");
		wait_log(&A, "SEND of lease 777, which it does not hold", 3000);
		fd = raw_authenticated(A.port);
		struct raw_pull pull = raw_pull("src", "f32", 2); /* PULL_SEND: no remote key */
		send_all(fd, &pull, sizeof(pull));
		/* PULL_INFO (tensord/peers.c's struct f_pull_info): id, status, dtype, ndim,
		 * rkey_len, sizes and strides, nbytes, raddr, then the lease. */
		struct wire_frame pi;
		recv_all(fd, &pi, sizeof(pi));
		ck_assert_uint_eq(pi.type, 7);
		unsigned char info[4096];
		ck_assert_uint_le(pi.len, sizeof(info));
		recv_all(fd, info, pi.len);
		int32_t status;
		uint32_t rkey_len;
		memcpy(&status, info + 8, 4);
		memcpy(&rkey_len, info + 20, 4);
		ck_assert_int_eq(status, 0);
		ck_assert_uint_eq(rkey_len, 0); /* nothing registered for a get */
		memcpy(&snd.lease, info + 24 + 16 * TN_ARENA_MAX_DIMS + 16, 8);
		/* The first SEND is served (its message goes to A itself, whose worker address
		 * this peer presented, and is dropped there: no receive waits for it). */
		send_all(fd, &snd, sizeof(snd));
		send_all(fd, &snd, sizeof(snd));
		expect_closed(fd, 3000, "SEND of a lease twice");
		char again[96];
		snprintf(again, sizeof(again), "SEND of lease %llu again",
			 (unsigned long long)snd.lease);
		wait_log(&A, again, 3000);
	}
	/* An authenticated peer that asks and never reads the answers: dropped, once 4 MiB of
	 * answers wait for it, or once its own frames stop coming (TCP stops acknowledging them
	 * when the answers it does not read fill its window: the silence rule then drops it). */
	fd = raw_authenticated(A.port);
	{
		struct raw_pull pull = raw_pull("src", "nope", 0);
		uint64_t t1 = now_ms();
		while (!dlog_has(&A, "does not read what it is sent") &&
		       !dlog_has(&A, "silent for 1000 ms")) {
			ck_assert_msg(now_ms() - t1 < 10000, "a peer that never reads was not dropped");
			for (int i = 0; i < 256; i++) {
				pull.id++;
				if (send(fd, &pull, sizeof(pull), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
					break;
			}
			sleep_ms(5);
		}
		close(fd);
	}

	/* Through all of it A served its clients, and B stayed ready and can pull. */
	tn_tensord_status s;
	ck_assert_tn_ok(tn_tensord_status_get(ca, &s));
	ck_assert(peer_entry(cb, a_addr, TN_TENSORD_PEER_DIALED, &p));
	ck_assert_uint_eq(p.state, TN_TENSORD_PEER_READY);
	ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", "f32", "dst", "f32", NULL));
	tn_arena *b = open_arena(cb, "dst");
	expect_same(a, "f32", b, "f32");
	tn_arena_unref(a);
	tn_arena_unref(b);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "dst", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cc, "dst", 0));
	finish_all((tn_tensord *[]){ ca, cb, cc }, (struct daemon *[]){ &A, &B, &C }, 3);
}
END_TEST

/* ---- a network namespace ---------------------------------------------------------------------- */


static int run_ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_ip(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char full[600];
	snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
	return system(full);
}

static void netns_remove(void)
{
	if (!ns_name[0])
		return;
	run_ip("ip link del %s", veth_out); /* takes its other end with it */
	run_ip("ip netns del %s", ns_name);
}

/* Start daemon @d inside the namespace (setns before exec). */
static void up_in_netns(struct daemon *d, const char *addr_in, const char *conf)
{
	d->port = free_port();
	memset(&D, 0, sizeof(D));
	snprintf(D.dir, sizeof(D.dir), "/tmp/check-tensord-%d-XXXXXX", (int)runner_pid);
	ck_assert_ptr_nonnull(mkdtemp(D.dir));
	snprintf(D.sock, sizeof(D.sock), "%s/s", D.dir);
	snprintf(D.config, sizeof(D.config), "%s/tensord.conf", D.dir);
	snprintf(D.log, sizeof(D.log), "%s/log", D.dir);
	snprintf(D.arena_dir, sizeof(D.arena_dir), "/dev/shm/check-tensord-%d-%d-ns",
		 (int)runner_pid, (int)getpid());
	char text[1024];
	snprintf(text, sizeof(text), "peer_secret = %s\npeer_listen = %s:%d\n%s", secret_path,
		 addr_in, d->port, conf);
	write_file(D.config, text, 0600);
	/* The child runs tensord through `ip netns exec`, which also mounts the namespace's own
	 * /sys (where UCX looks for network devices) and then execs it (same pid). */
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", veth_in, 1);
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(D.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("ip", "ip", "netns", "exec", ns_name, TN_TENSORD_BIN, "--foreground",
		       "--socket", D.sock, "--config", D.config, "--arena-dir", D.arena_dir,
		       "--log-level", "info", (char *)NULL);
		_exit(127);
	}
	unsetenv("UCX_TLS");
	unsetenv("UCX_NET_DEVICES");
	D.pid = pid;
	daemon_wait_ready();
	memcpy(d->dir, D.dir, sizeof(d->dir));
	memcpy(d->sock, D.sock, sizeof(d->sock));
	memcpy(d->arena_dir, D.arena_dir, sizeof(d->arena_dir));
	memcpy(d->config, D.config, sizeof(d->config));
	memcpy(d->log, D.log, sizeof(d->log));
	d->pid = pid;
}

/* One daemon in a network namespace of its own, joined to this one by a veth pair with an
 * address at each end and nothing else: the pull crosses the pair over UCX's TCP transport. */
START_TEST(test_network_namespace)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_network_namespace: skipped: making a network namespace needs "
			"root\n");
		return;
	}
	/* 10.213.N.0/30, N from the runner's pid: two runners never share a subnet. */
	int net = (int)runner_pid % 250 + 1;
	char out_ip[32], in_ip[32];
	snprintf(out_ip, sizeof(out_ip), "10.213.%d.1", net);
	snprintf(in_ip, sizeof(in_ip), "10.213.%d.2", net);
	netns_remove(); /* a previous run's, if one was killed */
	ck_assert_int_eq(run_ip("ip netns add %s", ns_name), 0);
	ck_assert_int_eq(run_ip("ip link add %s type veth peer name %s", veth_out, veth_in), 0);
	ck_assert_int_eq(run_ip("ip link set %s netns %s", veth_in, ns_name), 0);
	ck_assert_int_eq(run_ip("ip addr add %s/30 dev %s", out_ip, veth_out), 0);
	ck_assert_int_eq(run_ip("ip link set %s up", veth_out), 0);
	ck_assert_int_eq(run_ip("ip netns exec %s ip addr add %s/30 dev %s", ns_name, in_ip,
				veth_in), 0);
	ck_assert_int_eq(run_ip("ip netns exec %s ip link set %s up", ns_name, veth_in), 0);
	ck_assert_int_eq(run_ip("ip netns exec %s ip link set lo up", ns_name), 0);

	struct daemon A, B;
	up_in_netns(&A, in_ip, "peer_export = src\n");
	char a_addr[64], conf[256];
	snprintf(a_addr, sizeof(a_addr), "%s:%d", in_ip, A.port);
	snprintf(conf, sizeof(conf), "peer = %s\n", a_addr);
	setenv("UCX_NET_DEVICES", veth_out, 1);
	up(&B, conf, NULL, "tcp");
	unsetenv("UCX_NET_DEVICES");
	tn_tensord *ca = connect_to(&A), *cb = connect_to(&B);
	make_arena(ca, "src", 128 << 20, 0, 0);
	make_arena(cb, "dst", 128 << 20, 0, 0);
	tn_arena *a = open_arena(ca, "src"), *b = open_arena(cb, "dst");
	publish_sources(a, NSOURCES);
	tn_tensord_peer p = wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	ck_assert_msg(strstr(p.lanes, veth_out), "lanes \"%s\" do not use %s", p.lanes, veth_out);
	for (size_t i = 0; i < NSOURCES; i++) {
		ck_assert_tn_ok(tn_tensord_pull(cb, a_addr, "src", sources[i].name, "dst",
						sources[i].name, NULL));
		expect_same(a, sources[i].name, b, sources[i].name);
	}
	tn_arena_unref(a);
	tn_arena_unref(b);
	ck_assert_tn_ok(tn_tensord_arena_destroy(ca, "src", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(cb, "dst", 0));
	finish_all((tn_tensord *[]){ ca, cb }, (struct daemon *[]){ &A, &B }, 2);
	netns_remove();
	ck_assert_int_ne(run_ip("ip netns exec %s true", ns_name), 0);
}
END_TEST

/* Peer addition and listing through the API and tensorctl; refusals. */
START_TEST(test_peer_add_and_list)
{
	struct daemon A, B;
	up(&A, "", NULL, NULL);
	up(&B, "", NULL, NULL);
	char a_addr[64], b_addr[64];
	addr_of(&A, a_addr, sizeof(a_addr));
	addr_of(&B, b_addr, sizeof(b_addr));
	tn_tensord *cb = connect_to(&B);
	tn_tensord_peer *v;
	size_t n;
	ck_assert_tn_ok(tn_tensord_peer_list(cb, &v, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(v);
	ck_assert_tn_ok(tn_tensord_peer_add(cb, a_addr));
	ck_assert_int_eq(tn_tensord_peer_add(cb, a_addr), TN_EEXIST);
	ck_assert_int_eq(tn_tensord_peer_add(cb, "no-port"), TN_EINVAL);
	ck_assert_int_eq(tn_tensord_peer_add(cb, "host:99999"), TN_EINVAL);
	ck_assert_int_eq(tn_tensord_peer_add(cb, "bad host:1"), TN_EINVAL);
	wait_ready(cb, a_addr, TN_TENSORD_PEER_DIALED);
	/* A peer that cannot be reached: down, with the reason, tried again. */
	char dead[64];
	snprintf(dead, sizeof(dead), "127.0.0.1:%d", free_port());
	ck_assert_tn_ok(tn_tensord_peer_add(cb, dead));
	uint64_t t0 = now_ms();
	tn_tensord_peer p;
	for (;;) {
		ck_assert(peer_entry(cb, dead, TN_TENSORD_PEER_DIALED, &p));
		if (p.failures >= 2)
			break;
		ck_assert_msg(now_ms() - t0 < 5000, "not dialed again");
		sleep_ms(20);
	}
	ck_assert_uint_eq(p.state, TN_TENSORD_PEER_DOWN);
	ck_assert_msg(strstr(p.error, "refused"), "error \"%s\"", p.error);
	/* tensorctl shows the lanes. */
	char out[8192];
	use(&B);
	const char *list[] = { "--socket", B.sock, "peer", "list", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), list), 0);
	ck_assert_msg(strstr(out, a_addr) && strstr(out, "ready") && strstr(out, "rma="), "%s",
		      out);
	const char *json[] = { "--socket", B.sock, "--json", "peer", "list", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), json), 0);
	ck_assert_msg(strstr(out, "\"state\": \"ready\"") && strstr(out, "\"lanes\": \"am="), "%s",
		      out);
	const char *bad[] = { "--socket", B.sock, "pull", "nocolon/x", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), bad), 2);
	/* A daemon without peer_secret: peers are off. */
	tn_tensord_close(cb);
	down(&B);
	down(&A);
	daemon_setup();
	tn_tensord *c = conn();
	ck_assert_int_eq(tn_tensord_peer_add(c, "127.0.0.1:5"), TN_EINVAL);
	ck_assert_msg(strstr(tn_last_error(), "peers are off"), "%s", tn_last_error());
	ck_assert_tn_ok(tn_tensord_peer_list(c, &v, &n));
	ck_assert_uint_eq(n, 0);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* A secret file that others may read stops the daemon at its start. */
START_TEST(test_secret_refused)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/loose", secret_dir);
	write_file(path, "correct horse battery staple, peers\n", 0644);
	memset(&D, 0, sizeof(D));
	snprintf(D.dir, sizeof(D.dir), "/tmp/check-tensord-%d-XXXXXX", (int)runner_pid);
	ck_assert_ptr_nonnull(mkdtemp(D.dir));
	snprintf(D.sock, sizeof(D.sock), "%s/s", D.dir);
	snprintf(D.config, sizeof(D.config), "%s/tensord.conf", D.dir);
	snprintf(D.log, sizeof(D.log), "%s/log", D.dir);
	snprintf(D.arena_dir, sizeof(D.arena_dir), "/dev/shm/check-tensord-%d-%d-x",
		 (int)runner_pid, (int)getpid());
	char conf[300];
	snprintf(conf, sizeof(conf), "peer_secret = %s\n", path);
	write_file(D.config, conf, 0600);
	pid_t pid = spawn_tensord(D.sock, D.log, NULL);
	int st = child_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "tensord started: 0x%x", st);
	struct daemon d;
	memcpy(d.log, D.log, sizeof(d.log));
	ck_assert(dlog_has(&d, "peer_secret"));
	rm_dir_files(D.arena_dir);
	rm_dir_files(D.dir);
}
END_TEST

static Suite *peers_suite(void)
{
	Suite *s = suite_create("peers");
	TCase *tc = tcase_create("peers");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, secrets_setup, runner_teardown);
	tcase_add_test(tc, test_peer_add_and_list);
	tcase_add_loop_test(tc, test_pull_shared_memory, 0, 2);
	tcase_add_test(tc, test_pull_tcp);
	tcase_add_test(tc, test_three_daemons);
	tcase_add_loop_test(tc, test_pull_prefix, 0, 3);
	tcase_add_loop_test(tc, test_holder_killed, 0, 2);
	tcase_add_test(tc, test_puller_killed);
	tcase_add_test(tc, test_unpublished_during_pull);
	tcase_add_test(tc, test_transfer_deadline);
	tcase_add_loop_test(tc, test_push, 0, 2);
	tcase_add_loop_test(tc, test_push_killed, 0, 2);
	tcase_add_test(tc, test_bad_peers);
	tcase_add_test(tc, test_network_namespace);
	tcase_add_test(tc, test_secret_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	runner_pid = getpid();
	SRunner *sr = srunner_create(peers_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	secrets_teardown();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
