// SPDX-License-Identifier: MIT
/*
 * tensord under hostile and unlucky conditions (issue 17, part C), with real processes: a second
 * HELLO, clients that never read their replies, names that would forge log lines, an arena name
 * oracle, a load killed half way, a stopped lock holder, floods of connections and of slots,
 * a socket directory others can write, SIGTERM during a load, a failed huge-page arena. The
 * harness is tensord_testutil.h.
 */
#include "tensord_testutil.h"

/* ---- hostile and unlucky conditions (issue 17, part C) ----------------------------------------- */

/* A second HELLO would switch the connection's protocol version under it: refused, and the
 * connection dropped. */
START_TEST(test_second_hello)
{
	daemon_setup();
	int fd = raw_connect();
	raw_hello(fd);
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	struct tnd_hello h = { .min_version = 1, .max_version = TND_VERSION, .program = "again" };
	build(&m, TND_OP_HELLO, &h, sizeof(h), 2);
	raw_send(fd, &m, sizeof(m.h) + sizeof(h), -1, -1);
	expect_dropped(fd, "a second HELLO");
	check_served();
	daemon_finish();
}
END_TEST

/* Clients that send requests and never read the replies: each costs the daemon at most about
 * the documented 256 KiB of queued replies (it stops reading such a client's requests), and
 * everyone else is still served. */
START_TEST(test_reply_queue_bounded)
{
	enum { CLIENTS = 8, REQUESTS = 4000 };
	daemon_setup();
	int fds[CLIENTS];
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	check_served();
	long rss0 = daemon_rss_kb();
	for (int k = 0; k < CLIENTS; k++) {
		fds[k] = raw_connect();
		raw_hello(fds[k]);
		/* Small replies: each queued message used to cost a 4 KiB buffer. */
		struct tnd_arena_ref r = { .name = "none" };
		build(&m, TND_OP_ARENA_STAT, &r, sizeof(r), 7);
		/* Send until the daemon stops reading (the socket stays full for 300 ms). */
		int sent = 0;
		while (sent < REQUESTS) {
			ssize_t n = send(fds[k], &m, sizeof(m.h) + sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0) {
				ck_assert_msg(errno == EAGAIN, "send: %s", strerror(errno));
				struct pollfd p = { .fd = fds[k], .events = POLLOUT };
				if (poll(&p, 1, 300) == 0)
					break;
				continue;
			}
			sent++;
		}
		ck_assert_int_gt(sent, 1000);
	}
	/* Let the daemon read what it will and queue what it answers. */
	uint64_t t0 = now_ms();
	long rss = daemon_rss_kb(), prev;
	do {
		prev = rss;
		sleep_ms(200);
		rss = daemon_rss_kb();
	} while (rss != prev && now_ms() - t0 < 5000);
	check_served();
#ifndef TN_SANITIZED
	ck_assert_msg(rss - rss0 < CLIENTS * 640, "%d clients that do not read grew the daemon by "
		      "%ld KiB", CLIENTS, rss - rss0);
#else
	/* The sanitizers' quarantine and shadow memory grow with every allocation. */
	(void)rss;
	(void)rss0;
#endif
	for (int k = 0; k < CLIENTS; k++)
		close(fds[k]);
	daemon_finish();
}
END_TEST

/* Names a client chose cannot forge log lines: an arena name with a newline (refused as
 * malformed, and the refusal is logged), a tensor name with one in a loaded file. */
START_TEST(test_log_escapes)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "logs", 4 << 20, 0, 0);
	int fd = raw_connect();
	raw_hello(fd);
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	struct tnd_arena_create cr = { .size = 1 << 20 };
	snprintf(cr.name, sizeof(cr.name), "x\nFORGED-ARENA line");
	build(&m, TND_OP_ARENA_CREATE, &cr, sizeof(cr), 2);
	raw_send(fd, &m, sizeof(m.h) + sizeof(cr), -1, -1);
	expect_dropped(fd, "an arena name with a newline");
	char file[256];
	snprintf(file, sizeof(file), "%s/nl.safetensors", D.dir);
	const char *names[] = { "good", "bad\nFORGED-TENSOR line" };
	write_safetensors(file, 2, names, NULL, 4, 0);
	fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ne(tn_tensord_load(c, "logs", fd, TN_TENSORD_FORMAT_AUTO, "", 0, NULL, NULL,
					 NULL), 0);
	close(fd);
	check_served();
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "logs", 0));
	tn_tensord_close(c);
	/* Both were logged, on one line each, with the newline escaped. */
	ck_assert_int_eq(log_count("x\\nFORGED-ARENA line"), 1);
	ck_assert_int_eq(log_count("bad\\nFORGED-TENSOR line"), 1);
	FILE *f = fopen(D.log, "r");
	ck_assert_ptr_nonnull(f);
	char line[4096];
	while (fgets(line, sizeof(line), f))
		ck_assert_msg(strncmp(line, "FORGED", 6) != 0, "a forged log line: %s", line);
	fclose(f);
	daemon_finish();
}
END_TEST

static int nobody_create_taken(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 4 << 20;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	/* Hidden from nobody: the same answer as for any arena nobody may not touch. */
	EXPECT(tn_tensord_arena_create(c, "hidden", &o) == TN_EACCES);
	EXPECT(strstr(tn_last_error(), "exists") == NULL);
	/* Visible to nobody: it may be told. */
	EXPECT(tn_tensord_arena_create(c, "visible", &o) == TN_EEXIST);
	tn_tensord_close(c);
	return 0;
}

/* Creating an arena whose name is taken by one the caller cannot see does not tell it so. */
START_TEST(test_create_no_oracle)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "hidden", 4 << 20, 0, 0);
	make_arena(c, "visible", 4 << 20, 0, 0044);
	ck_assert_child_ok(as_nobody(nobody_create_taken, 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "hidden", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "visible", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* A child that asks the daemon to load @file into arena txn under @prefix; exits 0 when the
 * load succeeded, 1 when it failed (the daemon was killed under it). */
static pid_t load_child(const char *file, const char *prefix, unsigned flags)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *c;
		int fd = open(file, O_RDONLY);
		if (fd < 0 || tn_tensord_connect(D.sock, &c))
			_exit(2);
		if (tn_tensord_load(c, "txn", fd, TN_TENSORD_FORMAT_AUTO, prefix, flags, NULL, NULL,
				    NULL)) {
			fprintf(stderr, "load_child: %s\n", tn_last_error());
			_exit(1);
		}
		_exit(0);
	}
	return pid;
}

static size_t names_with(tn_arena *a, const char *prefix, bool unpublish)
{
	tn_arena_entry *e;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, prefix, &e, &n));
	for (size_t i = 0; unpublish && i < n; i++)
		ck_assert_tn_ok(tn_arena_unpublish(a, e[i].name));
	free(e);
	return n;
}

/* The first value of each tensor PREFIX%05d (i) less i: the same for every one of them
 * when one load's values are there; -1 when they differ. */
static float uniform_base(tn_arena *a, const char *prefix, int n)
{
	float base = 0;
	for (int i = 0; i < n; i++) {
		char name[64];
		tn_tensor *t;
		snprintf(name, sizeof(name), "%st%05d", prefix, i);
		ck_assert_tn_ok(tn_arena_lookup(a, name, &t, NULL));
		float b = ((const float *)tn_tensor_data(t))[0] - (float)i;
		tn_tensor_unref(t);
		if (i == 0)
			base = b;
		else if (b != base)
			return -1;
	}
	return base;
}

/* kill -9 of the daemon in the middle of a LOAD: after the restart, every name of the file is
 * published or none is; a LOAD that replaces names leaves all the old tensors or all the new
 * ones; no backup name, journal or leaked block is left. */
START_TEST(test_load_crash_all_or_none)
{
	enum { N = 8000, ROUNDS = 6 };
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "txn", 64 << 20, 4 * N, 0);
	tn_tensord_close(c);
	char file[256], file2[256];
	snprintf(file, sizeof(file), "%s/many.safetensors", D.dir);
	snprintf(file2, sizeof(file2), "%s/many2.safetensors", D.dir);
	write_safetensors(file, N, NULL, "t", 2, 0);
	write_safetensors(file2, N, NULL, "t", 2, 100000);
	tn_arena *a;
	ck_assert_tn_ok(tn_arena_open("txn.arena", D.arena_dir, &a));
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	int partial_windows = 0;
	/* New names: the daemon dies once the names start to appear, a few ms later. */
	for (int round = 0; round < ROUNDS; round++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "r%d/", round);
		tn_arena_stats st;
		ck_assert_tn_ok(tn_arena_stat(a, &st));
		uint64_t base = st.names;
		pid_t child = load_child(file, prefix, 0);
		uint64_t t0 = now_ms();
		bool ended = false;
		int cst = 0;
		for (;;) {
			ended = ended || waitpid(child, &cst, WNOHANG) == child;
			ck_assert_tn_ok(tn_arena_stat(a, &st));
			if (st.names != base)
				break;
			ck_assert_msg(!ended, "the load ended (0x%x) before it published a name", cst);
			ck_assert_msg(now_ms() - t0 < 20000, "the load published nothing in 20 s");
		}
		struct timespec d = { 0, (long)(xorshift(&seed) % 1000) * 1000 };
		nanosleep(&d, NULL);
		ck_assert_tn_ok(tn_arena_stat(a, &st));
		partial_windows += st.names > base && st.names < base + N;
		daemon_kill9();
		if (!ended)
			child_status(child);
		daemon_start();
		size_t got = names_with(a, prefix, true);
		ck_assert_msg(got == 0 || got == N, "round %d: %zu of the %d names are published "
			      "after the restart", round, got, N);
		ck_assert_uint_eq(names_with(a, ".tensord-load/", false), 0);
	}
	/* The daemon was killed with part of the names published at least once. */
	ck_assert_int_gt(partial_windows, 0);
	/* Replacing: all old or all new, at kill times spread over a whole load. */
	pid_t child = load_child(file, "rep/", TN_TENSORD_REPLACE);
	uint64_t t0 = now_ms();
	ck_assert_child_ok(child);
	uint64_t full = now_ms() - t0 + 1;
	float want = 0;
	for (int round = 0; round < ROUNDS; round++) {
		bool second = round % 2 == 0;
		child = load_child(second ? file2 : file, "rep/", TN_TENSORD_REPLACE);
		sleep_ms((unsigned)(full * (uint64_t)(round + 1) / (ROUNDS + 1)));
		daemon_kill9();
		child_status(child); /* its load succeeded or failed: either may be right */
		daemon_start();
		ck_assert_uint_eq(names_with(a, "rep/", false), N);
		float b = uniform_base(a, "rep/", N);
		ck_assert_msg(b == 0 || b == 100000, "round %d: a mix of old and new tensors", round);
		ck_assert_uint_eq(names_with(a, ".tensord-load/", false), 0);
		want = b;
	}
	(void)want;
	/* txn.arena, .meta, .slots, .seals: no journal left */
	ck_assert_int_eq(count_files(D.arena_dir), 4);
	tn_arena_unref(a);
	c = conn();
	tn_arena_fsck_report rep;
	ck_assert_tn_ok(tn_tensord_fsck(c, "txn", 0, &rep));
	ck_assert_uint_eq(rep.problems, 0);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "txn", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* shm's lock of an arena (shm/txn.c), taken here as a hostile or stopped client would. */
int tn__arena_lock(tn_arena *a);

/* A child that loops arena list until @stop (a pipe) has something to read; exits 0 when every
 * list answered. */
static pid_t list_looper(int stop)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *c;
		EXPECT(tn_tensord_connect(D.sock, &c) == 0);
		for (;;) {
			struct pollfd p = { .fd = stop, .events = POLLIN };
			if (poll(&p, 1, 0) == 1)
				_exit(0);
			tn_tensord_arena_info *v;
			size_t n;
			EXPECT(tn_tensord_arena_list(c, &v, &n) == 0 && n == 2);
			free(v);
		}
	}
	return pid;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A client stopped while it holds an arena's lock: requests about other arenas are answered at
 * once while four clients list arenas in a loop; the arena's stat is an error naming the
 * holder, its line in the list is flagged and shows the last figures read, never zeros. */
START_TEST(test_stopped_lock_holder)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "stuck", 4 << 20, 0, 0);
	make_arena(c, "other", 4 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "stuck", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "x", 1000, 0));
	tn_tensord_arena_info before = arena_stat(c, "stuck");
	ck_assert_uint_gt(before.stats.used_bytes, 0);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t holder = fork_child();
	ck_assert_int_ge(holder, 0);
	if (holder == 0) {
		tn_arena *b;
		EXPECT(tn_arena_open("stuck.arena", D.arena_dir, &b) == 0);
		EXPECT(tn__arena_lock(b) == 0);
		char one = 1;
		EXPECT(write(ready[1], &one, 1) == 1);
		raise(SIGSTOP);
		_exit(0); /* the lock goes with the process (robust mutex) */
	}
	get_byte(ready[0]);
	int st;
	ck_assert_int_eq(waitpid(holder, &st, WUNTRACED), holder);
	ck_assert(WIFSTOPPED(st));
	/* The arena itself: an error that names the holder, not figures. */
	tn_tensord_arena_info info;
	ck_assert_tn_error_has(tn_tensord_arena_stat(c, "stuck", &info), TN_EBUSY, "locked by pid");
	char pidtext[32];
	snprintf(pidtext, sizeof(pidtext), "pid %d", (int)holder);
	ck_assert_msg(strstr(tn_last_error(), pidtext), "the holder is not named: %s",
		      tn_last_error());
	char out[4096];
	const char *stat[] = { "--socket", D.sock, "arena", "stat", "stuck", NULL };
	ck_assert_int_ne(tensorctl(out, sizeof(out), stat), 0);
	tn_tensord_arena_info *v;
	size_t n;
	ck_assert_tn_ok(tn_tensord_arena_list(c, &v, &n));
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++) {
		bool stuck = !strcmp(v[i].name, "stuck");
		ck_assert_uint_eq(v[i].flags, stuck ? TN_TENSORD_INFO_LOCKED : 0);
		if (stuck)
			ck_assert_uint_eq(v[i].stats.used_bytes, before.stats.used_bytes);
	}
	free(v);
	const char *list[] = { "--socket", D.sock, "arena", "list", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), list), 0);
	ck_assert_msg(strstr(out, "(locked)"), "arena list does not mark the locked arena:\n%s", out);
	/* Others are served at once while four clients list in a loop. */
	int stop[2];
	ck_assert_int_eq(pipe(stop), 0);
	pid_t loopers[4];
	for (int i = 0; i < 4; i++)
		loopers[i] = list_looper(stop[0]);
	sleep_ms(100);
	enum { SAMPLES = 40 };
	uint64_t us[SAMPLES];
	for (int i = 0; i < SAMPLES; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		tn_tensord *d = conn();
		tn_tensord_status sst;
		ck_assert_tn_ok(tn_tensord_status_get(d, &sst));
		tn_arena *o;
		ck_assert_tn_ok(tn_tensord_arena_open(d, "other", 0, &o));
		tn_arena_unref(o);
		tn_tensord_close(d);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		us[i] = (uint64_t)(((int64_t)t1.tv_sec - t0.tv_sec) * 1000000000 +
				   (t1.tv_nsec - t0.tv_nsec)) / 1000u;
		sleep_ms(5);
	}
	ck_assert_int_eq(write(stop[1], "x", 1), 1);
	for (int i = 0; i < 4; i++)
		ck_assert_child_ok(loopers[i]);
	qsort(us, SAMPLES, sizeof(us[0]), cmp_u64);
	ck_assert_msg(us[SAMPLES / 2] < 50000, "status and open of another arena took %llu us "
		      "(median; max %llu us) while a stopped client held a lock",
		      (unsigned long long)us[SAMPLES / 2], (unsigned long long)us[SAMPLES - 1]);
	/* The holder goes on and exits: the arena is served again. */
	ck_assert_int_eq(kill(holder, SIGCONT), 0);
	ck_assert_child_ok(holder);
	info = arena_stat(c, "stuck"); /* at once: the daemon sees the lock let go */
	ck_assert_uint_eq(info.flags, 0);
	ck_assert_int_eq(check_i32(a, "x", 1000, 0), 0);
	tn_arena_unref(a);
	close(stop[0]);
	close(stop[1]);
	close(ready[0]);
	close(ready[1]);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "stuck", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "other", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* Fork a child that becomes @uid (and gid) and runs @fn(@arg); returns its pid. */
static pid_t as_uid(uid_t uid, int (*fn)(int), int arg)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		EXPECT(setgroups(0, NULL) == 0);
		EXPECT(setresgid(uid, uid, uid) == 0);
		EXPECT(setresuid(uid, uid, uid) == 0);
		_exit(fn(arg));
	}
	return pid;
}

static int flood_pipe[2];

/* Open 300 connections that never say HELLO, report how many the daemon kept open, wait to be
 * told, then report how many are still open. */
static int hello_flood(int unused)
{
	(void)unused;
	enum { N = 300 };
	static int fds[N];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, D.sock, strlen(D.sock) + 1);
	for (int i = 0; i < N; i++) {
		fds[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		EXPECT(fds[i] >= 0);
		EXPECT(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) == 0);
	}
	sleep_ms(300); /* the daemon accepts (or closes) them all */
	for (int round = 0; round < 2; round++) {
		int open_ = 0;
		for (int i = 0; i < N; i++) {
			struct pollfd p = { .fd = fds[i], .events = POLLIN };
			char b;
			open_ += !(poll(&p, 1, 0) == 1 && recv(fds[i], &b, 1, MSG_DONTWAIT) <= 0);
		}
		EXPECT(write(flood_pipe[1], &open_, sizeof(open_)) == sizeof(open_));
		if (round == 0) {
			char b;
			EXPECT(read(flood_pipe[0], &b, 1) == 1);
		}
	}
	return 0;
}

/* A user's connections that never say HELLO: capped (max_hello_pending) and dropped after
 * hello_timeout_ms; root is served throughout, also past max_clients. */
START_TEST(test_hello_flood)
{
	/* Keys older than the per-user accounting of connections: the same file shows the
	 * lock-out before it. */
	daemon_setup_conf("max_clients = 200\n");
	ck_assert_int_eq(pipe(flood_pipe), 0);
	/* The child writes its counts on flood_pipe[1] and reads its go on flood_pipe[0]: use a
	 * second pipe for the go so the parent never reads its own byte. */
	int go[2], counts[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(counts), 0);
	flood_pipe[0] = go[0];
	flood_pipe[1] = counts[1];
	pid_t child = as_uid(NOBODY, hello_flood, 0);
	int open_;
	ck_assert_int_eq(read(counts[0], &open_, sizeof(open_)), sizeof(open_));
	ck_assert_int_le(open_, 64); /* max_hello_pending */
	/* Root is served while nobody's connections are open. */
	tn_tensord_status st = check_served();
	ck_assert_uint_le(st.clients, 66);
	char out[4096];
	const char *status[] = { "--socket", D.sock, "status", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), status), 0);
	/* After the timeout (hello_timeout_ms, 5 s) the daemon has dropped them. */
	sleep_ms(6500);
	ck_assert_int_eq(write(go[1], "x", 1), 1);
	ck_assert_int_eq(read(counts[0], &open_, sizeof(open_)), sizeof(open_));
	ck_assert_int_eq(open_, 0);
	ck_assert_child_ok(child);
	ck_assert(log_has("hello_timeout_ms"));
	close(go[0]);
	close(go[1]);
	close(counts[0]);
	close(counts[1]);
	daemon_finish();
}
END_TEST

/* ARENA_OPEN on a raw connection @fd until refused, at most @max times; returns how many
 * succeeded (their descriptors closed). */
static int raw_open_all(int fd, const char *name, int max)
{
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	int ok = 0;
	for (int i = 0; i < max; i++) {
		struct tnd_arena_open o = { .flags = TND_OPEN_READ_ONLY };
		snprintf(o.name, sizeof(o.name), "%s", name);
		tnd_init_hdr(&m.h, TND_OP_ARENA_OPEN, sizeof(o), (uint32_t)i + 2, 0, 0);
		memcpy(m.b + sizeof(m.h), &o, sizeof(o));
		if (send(fd, &m, sizeof(m.h) + sizeof(o), MSG_NOSIGNAL) != (ssize_t)(sizeof(m.h) + sizeof(o)))
			return -1;
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		struct iovec iov = { m.b, sizeof(m.b) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				     .msg_controllen = sizeof(ctl.buf) };
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 10000) != 1 || recvmsg(fd, &mh, MSG_CMSG_CLOEXEC) <= 0)
			return -1;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_type == SCM_RIGHTS) {
			int f;
			memcpy(&f, CMSG_DATA(cm), sizeof(f));
			close(f);
		}
		if (m.h.status)
			break;
		ok++;
	}
	return ok;
}

static int slot_pipe[2], slot_go[2];

/* A user with read access: open the arena as often as the daemon lets it, report, wait. */
static int slot_taker(int unused)
{
	(void)unused;
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, D.sock, strlen(D.sock) + 1);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	EXPECT(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	struct tnd_hello h = { .min_version = 1, .max_version = TND_VERSION, .program = "slots" };
	tnd_init_hdr(&m.h, TND_OP_HELLO, sizeof(h), 1, 0, 0);
	memcpy(m.b + sizeof(m.h), &h, sizeof(h));
	EXPECT(send(fd, &m, sizeof(m.h) + sizeof(h), 0) > 0 && recv(fd, &m, sizeof(m), 0) > 0 &&
	       m.h.status == 0);
	int n = raw_open_all(fd, "shared", 300);
	EXPECT(write(slot_pipe[1], &n, sizeof(n)) == sizeof(n));
	char b;
	EXPECT(read(slot_go[0], &b, 1) == 1);
	close(fd);
	return 0;
}

static int owner_creates(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 4 << 20;
	o.mode = 0044;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_create(c, "shared", &o) == 0);
	tn_tensord_close(c);
	return 0;
}

static int owner_opens(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_arena *a;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_open(c, "shared", 0, &a) == 0);
	tn_arena_unref(a);
	EXPECT(tn_tensord_arena_destroy(c, "shared", TN_TENSORD_FORCE) == 0);
	tn_tensord_close(c);
	return 0;
}

/* Users with read access take an arena's client slots: each at most max_slots_per_user (32),
 * and together never the last reserved_slots (16): its owner can still open it. */
START_TEST(test_slot_flood)
{
	enum { USERS = 9, OWNER = 60100 };
	daemon_setup();
	ck_assert_int_eq(pipe(slot_pipe), 0);
	ck_assert_int_eq(pipe(slot_go), 0);
	ck_assert_child_ok(as_uid(OWNER, owner_creates, 0));
	pid_t kids[USERS];
	int total = 0;
	for (int i = 0; i < USERS; i++) {
		kids[i] = as_uid(60000 + (uid_t)i, slot_taker, 0);
		int n;
		ck_assert_int_eq(read(slot_pipe[0], &n, sizeof(n)), sizeof(n));
		ck_assert_int_ge(n, 0);
		ck_assert_int_le(n, 32);
		total += n;
	}
	ck_assert_int_le(total, TN_ARENA_MAX_CLIENTS - 16 - 1);
	ck_assert_child_ok(as_uid(OWNER, owner_opens, 0));
	for (int i = 0; i < USERS; i++)
		ck_assert_int_eq(write(slot_go[1], "x", 1), 1);
	for (int i = 0; i < USERS; i++)
		ck_assert_child_ok(kids[i]);
	close(slot_pipe[0]);
	close(slot_pipe[1]);
	close(slot_go[0]);
	close(slot_go[1]);
	daemon_finish();
}
END_TEST

/* The exit status of @pid within @ms, or -1 after killing it when it still runs. */
static int wait_exit(pid_t pid, unsigned ms)
{
	uint64_t t0 = now_ms();
	int st;
	while (now_ms() - t0 < ms) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* What a tensord started on @sock said, when it refused to start. */
static void expect_refused_start(const char *sock, const char *logname, const char *needle)
{
	char log[200], out[4096];
	snprintf(log, sizeof(log), "%s/%s", D.dir, logname);
	int st = wait_exit(spawn_tensord(sock, log, NULL), 10000);
	ck_assert_msg(st != -1, "tensord started with its socket at %s", sock);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "tensord at %s: 0x%x", sock, st);
	int fd = open(log, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, out, sizeof(out) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	out[n] = 0;
	ck_assert_msg(strstr(out, needle), "tensord at %s said: %s", sock, out);
	unlink(log);
}

static char squat_lock[256];

static int squat(int unused)
{
	(void)unused;
	int fd = open(squat_lock, O_RDWR | O_CREAT | O_EXCL, 0644);
	EXPECT(fd >= 0);
	close(fd);
	return 0;
}

/* A socket directory other users may write (where they could hold the lock file or take the
 * socket's name) is refused with a message that says what to do. */
START_TEST(test_socket_dir_refused)
{
	daemon_setup();
	char dir[160], sock[200];
	snprintf(dir, sizeof(dir), "%s/ww", D.dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	snprintf(sock, sizeof(sock), "%s/s", dir);
	expect_refused_start(sock, "log-ww", "writable by others");
	ck_assert_int_eq(count_files(dir), 0); /* no lock file, no socket */
	ck_assert_int_eq(rmdir(dir), 0);
	/* Group-writable likewise. */
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(dir, 0770), 0);
	expect_refused_start(sock, "log-gw", "writable by its group");
	ck_assert_int_eq(rmdir(dir), 0);
	/* Sticky (as /tmp): allowed, but a lock file another user made first is refused. */
	snprintf(dir, sizeof(dir), "%s/st", D.dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(dir, 01777), 0);
	snprintf(sock, sizeof(sock), "%s/s", dir);
	snprintf(squat_lock, sizeof(squat_lock), "%s.lock", sock);
	ck_assert_child_ok(as_nobody(squat, 0));
	expect_refused_start(sock, "log-st", "belongs to uid 65534");
	ck_assert_int_eq(unlink(squat_lock), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	/* The daemon under test still serves. */
	check_served();
	daemon_finish();
}
END_TEST

static pid_t term_target;

static void term_on_progress(uint64_t done, uint64_t total, void *ctx)
{
	(void)done;
	(void)total;
	bool *sent = ctx;
	if (!*sent)
		kill(term_target, SIGTERM);
	*sent = true;
}

/* A child loading @file into arena big; SIGTERMs the daemon at its first progress report and
 * expects the load to fail with TN_EIO saying it was cancelled. */
static int load_then_term(const char *file)
{
	tn_tensord *c;
	bool sent = false;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	int fd = open(file, O_RDONLY);
	EXPECT(fd >= 0);
	int r = tn_tensord_load(c, "big", fd, TN_TENSORD_FORMAT_AUTO, "w/", 0, term_on_progress,
				&sent, NULL);
	EXPECT(sent);
	EXPECT(r == TN_EIO);
	EXPECT(strstr(tn_last_error(), "cancelled") != NULL);
	EXPECT(strstr(tn_last_error(), "stopping") != NULL);
	return 0;
}

/* SIGTERM while a LOAD runs: the load is cancelled and its client answered TN_EIO (not a
 * dropped connection); nothing of it stays published; the daemon exits 0. */
START_TEST(test_sigterm_during_load)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "big", 320 << 20, 0, 0);
	tn_tensord_close(c);
	/* Three 96 MiB float32 tensors of zeros (a sparse file): progress comes every 64 MiB. */
	char file[256], hdr[512];
	snprintf(file, sizeof(file), "%s/big.safetensors", D.dir);
	const uint64_t t = (uint64_t)96 << 20;
	int len = snprintf(hdr, sizeof(hdr),
			   "{\"a\":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[0,%llu]},"
			   "\"b\":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]},"
			   "\"c\":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}}",
			   (unsigned long long)t / 4, (unsigned long long)t,
			   (unsigned long long)t / 4, (unsigned long long)t, (unsigned long long)2 * t,
			   (unsigned long long)t / 4, (unsigned long long)2 * t,
			   (unsigned long long)3 * t);
	while (len % 8)
		hdr[len++] = ' ';
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	uint64_t hl = (uint64_t)len;
	ck_assert_int_eq(write(fd, &hl, 8), 8);
	ck_assert_int_eq(write(fd, hdr, (size_t)len), len);
	ck_assert_int_eq(ftruncate(fd, (off_t)(8 + (uint64_t)len + 3 * t)), 0);
	close(fd);
	term_target = D.pid;
	pid_t child = fork_child();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(load_then_term(file));
	ck_assert_child_ok(child);
	int st;
	ck_assert_int_eq(waitpid(D.pid, &st, 0), D.pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tensord stopped with 0x%x", st);
	unlink(file);
	daemon_start();
	c = conn();
	tn_tensord_arena_info info = arena_stat(c, "big");
	ck_assert_uint_eq(info.stats.names, 0);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "big", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

static long long read_nr_hugepages(void)
{
	long long v = -1;
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "r");
	if (f && fscanf(f, "%lld", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

static bool write_nr_hugepages(long long v)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	if (!f)
		return false;
	bool ok = fprintf(f, "%lld\n", v) > 0;
	return fclose(f) == 0 && ok;
}

/* A hugepage arena whose creation fails after the daemon (root) raised vm.nr_hugepages for it
 * puts the pool back as it found it. Needs root, a hugetlbfs mount of our own and a writable
 * vm.nr_hugepages; skipped (with a note) without them. */
START_TEST(test_hugepage_create_restores_pool)
{
	char mnt[128];
	snprintf(mnt, sizeof(mnt), "/tmp/check-tensord-%d-huge-%d", (int)runner_pid, (int)getpid());
	long long before = read_nr_hugepages();
	if (geteuid() != 0 || before < 0 || mkdir(mnt, 0700)) {
		fprintf(stderr, "test_hugepage_create_restores_pool: skipped (needs root)\n");
		return;
	}
	if (mount("none", mnt, "hugetlbfs", 0, NULL) || !write_nr_hugepages(before)) {
		rmdir(mnt);
		fprintf(stderr, "test_hugepage_create_restores_pool: skipped (no hugetlbfs mount or "
			"vm.nr_hugepages not writable here)\n");
		return;
	}
	char conf[256];
	snprintf(conf, sizeof(conf), "hugepage_dir = %s\n", mnt);
	daemon_setup_conf(conf);
	tn_tensord *c = conn();
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 4 << 20; /* two huge pages, and a directory that cannot fit in them */
	o.max_names = 1u << 20;
	o.flags = TN_TENSORD_HUGEPAGES;
	int r = tn_tensord_arena_create(c, "huge", &o);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", tn_last_error());
	long long after = read_nr_hugepages();
	if (after != before)
		write_nr_hugepages(before); /* the machine's pool, whatever the outcome */
	tn_tensord_close(c);
	daemon_finish();
	ck_assert_int_eq(umount(mnt), 0);
	ck_assert_int_eq(rmdir(mnt), 0);
	ck_assert_msg(r == TN_EINVAL && strstr(msg, "no room"), "create: %d %s", r, msg);
	ck_assert_msg(after == before, "vm.nr_hugepages was %lld, is %lld after a failed creation",
		      before, after);
}
END_TEST


static Suite *hostile_suite(void)
{
	Suite *s = suite_create("tensord_hostile");
	TCase *tc;
	/* Issue 17's part C (CK_RUN_CASE=hostile runs only these). */
	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, NULL, remove_leftovers);
	tcase_add_test(tc, test_second_hello);
	tcase_add_test(tc, test_reply_queue_bounded);
	tcase_add_test(tc, test_log_escapes);
	tcase_add_test(tc, test_create_no_oracle);
	tcase_add_test(tc, test_load_crash_all_or_none);
	tcase_add_test(tc, test_stopped_lock_holder);
	tcase_add_test(tc, test_hello_flood);
	tcase_add_test(tc, test_slot_flood);
	tcase_add_test(tc, test_socket_dir_refused);
	tcase_add_test(tc, test_sigterm_during_load);
	tcase_add_test(tc, test_hugepage_create_restores_pool);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	runner_pid = getpid();
	SRunner *sr = srunner_create(hostile_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
