/* SPDX-License-Identifier: MIT */
/*
 * The harness of the tensord tests (check_tensord.c, check_tensord_hostile.c,
 * check_tensord_trust.c): a real tensord started on a private socket in a mkdtemp() folder,
 * with its arenas in a folder of its own under /dev/shm, stopped with SIGTERM at the end of
 * each test; forked clients that die with their test; raw protocol messages; the daemon's
 * log. Included by each test program once (its functions are static, some unused in one).
 */
#ifndef TN_TENSORD_TESTUTIL_H
#define TN_TENSORD_TESTUTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensor.h>
#include <tensor/tensord.h>

#include "../shm/arena_internal.h"
#include "client.h"
#include "proto.h"
#include "testutil.h"

#ifndef TN_TENSORD_BIN
#error "TN_TENSORD_BIN (the built tensord) must be defined"
#endif
#ifndef TN_TENSORCTL_BIN
#error "TN_TENSORCTL_BIN (the built tensorctl) must be defined"
#endif


#pragma GCC diagnostic ignored "-Wunused-function"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TN_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TN_SANITIZED 1
#endif
#endif


/* ---- the daemon under test -------------------------------------------------------------------- */

static struct {
	char dir[64];        /* /tmp/check-tensord-RUNNER-XXXXXX: socket, lock, config, log */
	char sock[128];
	char arena_dir[128]; /* /dev/shm/check-tensord-RUNNER-PID-N */
	char config[128];
	char log[128];
	pid_t pid;
} D;

static pid_t runner_pid; /* the Check runner: names the files, cleans up after failures */

/* fork(), with the child killed when its parent dies (a failed assertion ends the test's
 * process at once: nothing of it may linger). */
static pid_t fork_child(void)
{
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
	}
	return pid;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static void rm_dir_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* After the tests, in the runner: remove what a failed test left (its daemon and clients died
 * with it; see fork_child). */
static void remove_leftovers(void)
{
	char tag[64];
	int n = snprintf(tag, sizeof(tag), "check-tensord-%d-", (int)runner_pid);
	const char *roots[] = { "/dev/shm", "/tmp" };
	for (int i = 0; i < 2; i++) {
		DIR *d = opendir(roots[i]);
		struct dirent *e;
		char p[512];
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, tag, (size_t)n)) {
				snprintf(p, sizeof(p), "%s/%s", roots[i], e->d_name);
				rm_dir_files(p);
			}
		if (d)
			closedir(d);
	}
}

/* Start tensord with @extra arguments (NULL-terminated, may be NULL); returns its pid without
 * waiting, for the startup refusals. Its stderr goes to @log. */
static pid_t spawn_tensord(const char *sock, const char *log, const char *const *extra)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		const char *argv[24] = { "tensord", "--foreground", "--socket", sock, "--config",
					 D.config, "--arena-dir", D.arena_dir, "--log-level",
					 "info" };
		int n = 10;
		for (int i = 0; extra && extra[i] && n < 23; i++)
			argv[n++] = extra[i];
		argv[n] = NULL;
		execv(TN_TENSORD_BIN, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void daemon_wait_ready(void)
{
	uint64_t deadline = now_ms() + 20000;
	for (;;) {
		tn_tensord *c;
		if (tn_tensord_connect(D.sock, &c) == 0) {
			tn_tensord_status st;
			ck_assert_tn_ok(tn_tensord_status_get(c, &st));
			tn_tensord_close(c);
			if (st.pid == D.pid)
				return;
		}
		int status;
		if (waitpid(D.pid, &status, WNOHANG) != 0) {
			/* The log goes with the test's folder: quote its end. */
			char tail[1024] = "";
			FILE *f = fopen(D.log, "r");
			if (f) {
				fseek(f, -(long)sizeof(tail) + 1, SEEK_END);
				size_t n = fread(tail, 1, sizeof(tail) - 1, f);
				tail[n] = 0;
				fclose(f);
			}
			ck_abort_msg("tensord exited (status 0x%x) before it listened; its log "
				     "ends:\n%s", status, tail);
		}
		ck_assert_msg(now_ms() < deadline, "tensord did not listen within 20 s");
		sleep_ms(2);
	}
}

static void daemon_start(void)
{
	D.pid = spawn_tensord(D.sock, D.log, NULL);
	daemon_wait_ready();
}

/* A fresh folder, a fresh arena folder name, and a running daemon with @conf as its
 * tensord.conf. */
static void daemon_setup_conf(const char *conf)
{
	static int counter;
	memset(&D, 0, sizeof(D));
	snprintf(D.dir, sizeof(D.dir), "/tmp/check-tensord-%d-XXXXXX", (int)runner_pid);
	ck_assert_ptr_nonnull(mkdtemp(D.dir));
	ck_assert_int_eq(chmod(D.dir, 0755), 0); /* other users' clients reach the socket */
	snprintf(D.sock, sizeof(D.sock), "%s/s", D.dir);
	snprintf(D.config, sizeof(D.config), "%s/tensord.conf", D.dir);
	snprintf(D.log, sizeof(D.log), "%s/log", D.dir);
	snprintf(D.arena_dir, sizeof(D.arena_dir), "/dev/shm/check-tensord-%d-%d-%d",
		 (int)runner_pid, (int)getpid(), counter++);
	FILE *f = fopen(D.config, "w");
	ck_assert_ptr_nonnull(f);
	fputs(conf, f);
	fclose(f);
	daemon_start();
}

static void daemon_setup(void)
{
	daemon_setup_conf("# empty: built-in defaults\n");
}

static void daemon_kill9(void)
{
	int st;
	ck_assert_int_eq(kill(D.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(D.pid, &st, 0), D.pid);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	D.pid = 0;
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Stop with SIGTERM (exit 0), check the arena folder is empty (every test destroys its
 * arenas), remove it and the private folder, and check nothing of ours is left in /dev/shm. */
static void daemon_finish(void)
{
	int st;
	ck_assert_int_eq(kill(D.pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(D.pid, &st, 0), D.pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tensord stopped with 0x%x", st);
	D.pid = 0;
	ck_assert_msg(access(D.sock, F_OK) != 0, "the socket is left after a clean stop");
	ck_assert_int_eq(count_files(D.arena_dir), 0);
	ck_assert_int_eq(rmdir(D.arena_dir), 0);
	char tag[64];
	snprintf(tag, sizeof(tag), "check-tensord-%d-%d-", (int)runner_pid, (int)getpid());
	DIR *d = opendir("/dev/shm");
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d)))
		ck_assert_msg(strncmp(e->d_name, tag, strlen(tag)) != 0, "/dev/shm/%s is left",
			      e->d_name);
	closedir(d);
	rm_dir_files(D.dir);
	ck_assert_int_ne(access(D.dir, F_OK), 0);
	D.dir[0] = D.arena_dir[0] = 0;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

static tn_tensord *conn(void)
{
	tn_tensord *c;
	ck_assert_tn_ok(tn_tensord_connect(D.sock, &c));
	return c;
}

static void make_arena(tn_tensord *c, const char *name, uint64_t size, uint32_t max_names,
		       unsigned mode)
{
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = size;
	o.max_names = max_names;
	o.mode = mode;
	ck_assert_tn_ok(tn_tensord_arena_create(c, name, &o));
}

static tn_tensord_arena_info arena_stat(tn_tensord *c, const char *name)
{
	tn_tensord_arena_info info;
	ck_assert_tn_ok(tn_tensord_arena_stat(c, name, &info));
	return info;
}

/* Publish @n int32 values base, base+1, ... as @name; returns a TN_E* code. */
static int publish_i32(tn_arena *a, const char *name, int64_t n, int32_t base)
{
	tn_storage *s;
	tn_tensor *t;
	int r = tn_storage_new_with_allocator(TN_CPU, (size_t)n * 4, tn_arena_allocator(a), &s);
	if (r)
		return r;
	r = tn_tensor_new(s, 0, 1, &n, NULL, TN_INT32, &t);
	tn_storage_unref(s);
	if (r)
		return r;
	int32_t *d = tn_tensor_data(t);
	for (int64_t i = 0; i < n; i++)
		d[i] = base + (int32_t)i;
	r = tn_arena_publish(a, name, t, TN_ARENA_REPLACE, NULL);
	tn_tensor_unref(t);
	return r;
}

/* 0 when @name holds @n values from @base; else a nonzero code naming what differs. */
static int check_i32(tn_arena *a, const char *name, int64_t n, int32_t base)
{
	tn_tensor *t;
	if (tn_arena_lookup(a, name, &t, NULL))
		return 1;
	int bad = tn_tensor_numel(t) != n ? 2 : 0;
	const int32_t *d = tn_tensor_data(t);
	for (int64_t i = 0; !bad && i < n; i++)
		if (d[i] != base + (int32_t)i)
			bad = 3;
	tn_tensor_unref(t);
	return bad;
}

static int child_status(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

#define ck_assert_child_ok(pid)                                                               \
	do {                                                                                  \
		int st_ = child_status(pid);                                                  \
		ck_assert_msg(WIFEXITED(st_) && WEXITSTATUS(st_) == 0,                        \
			      "child %d: status 0x%x (exit %d)", (int)(pid), st_,             \
			      WIFEXITED(st_) ? WEXITSTATUS(st_) : -1);                        \
	} while (0)

/* In children: fail with a code that names the line. */
#define EXPECT(cond)                                                                          \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "child %d: %s:%d: %s (last error: %s)\n", (int)getpid(), \
				__FILE__, __LINE__, #cond, tn_last_error());                  \
			_exit(1);                                                             \
		}                                                                             \
	} while (0)

/* Pipes to step children: the parent writes a byte, the child reads it. */
static void wait_byte(int fd)
{
	char b;
	ssize_t n;
	do
		n = read(fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(2);
}

static void put_byte(int fd)
{
	char b = 1;
	ck_assert_int_eq(write(fd, &b, 1), 1);
}

static void get_byte(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ck_assert_msg(poll(&p, 1, 30000) == 1, "a child did not answer within 30 s");
	char b;
	ck_assert_int_eq(read(fd, &b, 1), 1);
}

/* Whether writing a byte at @p in a forked child kills it with SIGSEGV. */
static bool write_faults(void *p)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* The default action takes the fault (under ASan its handler would report it and
		 * exit 1 instead). */
		signal(SIGSEGV, SIG_DFL);
		*(volatile char *)p = 42;
		_exit(0);
	}
	int st = child_status(pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

/* Poll the arena's attached-process count until it is @want (within @ms); returns the ms. */
static uint64_t wait_clients(tn_tensord *c, const char *name, uint64_t want, unsigned ms)
{
	uint64_t t0 = now_ms();
	for (;;) {
		tn_tensord_arena_info i = arena_stat(c, name);
		if (i.stats.clients == want)
			return now_ms() - t0;
		ck_assert_msg(now_ms() - t0 < ms, "arena %s: %llu clients after %u ms, expected %llu",
			      name, (unsigned long long)i.stats.clients, ms,
			      (unsigned long long)want);
		sleep_ms(2);
	}
}

/* Run tensorctl with @args (NULL-terminated) against the daemon; its stdout into @out. Returns
 * its exit status. */
static int tensorctl(char *out, size_t cap, const char *const *args)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		int nul = open("/dev/null", O_WRONLY);
		dup2(nul, 2);
		close(p[0]);
		const char *argv[32] = { "tensorctl" };
		int n = 1;
		for (int i = 0; args[i] && n < 31; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(TN_TENSORCTL_BIN, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(p[0]);
	int st = child_status(pid);
	ck_assert_msg(WIFEXITED(st), "tensorctl died: 0x%x", st);
	return WEXITSTATUS(st);
}

static int count_fds(void)
{
	return count_files("/proc/self/fd") - 1; /* the opendir's own descriptor */
}


#define NOBODY 65534

/* Fork a child that becomes uid/gid NOBODY and runs @fn(arg); returns its pid. */
static pid_t as_nobody(int (*fn)(int), int arg)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		EXPECT(setgroups(0, NULL) == 0);
		EXPECT(setgid(NOBODY) == 0);
		EXPECT(setuid(NOBODY) == 0);
		_exit(fn(arg));
	}
	return pid;
}

/* ---- protocol robustness ----------------------------------------------------------------------- */

static int raw_connect(void)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(D.sock), sizeof(sa.sun_path));
	memcpy(sa.sun_path, D.sock, strlen(D.sock) + 1);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
		      strerror(errno));
	return fd;
}

static void raw_send(int fd, const void *msg, size_t len, int pass_fd, int pass_fd2)
{
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (pass_fd >= 0) {
		int fds[2] = { pass_fd, pass_fd2 };
		int k = pass_fd2 >= 0 ? 2 : 1;
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(k * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(k * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, k * sizeof(int));
	}
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	ck_assert_msg(n == (ssize_t)len, "sendmsg of %zu bytes: %zd (%s)", len, n,
		      strerror(errno));
}

/* One message into @buf (TND_MSG_MAX); its length, 0 at the end of the stream, -1 when
 * nothing came within @ms or the connection was reset. */
static ssize_t raw_recv(int fd, void *buf, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) != 1)
		return -1;
	ssize_t n = recv(fd, buf, TND_MSG_MAX, 0);
	if (n < 0 && errno == ECONNRESET)
		return 0;
	return n;
}

static void build(void *buf, unsigned op, const void *body, size_t len, uint32_t seq)
{
	tnd_init_hdr(buf, op, len, seq, 0, 0);
	if (len)
		memcpy((char *)buf + sizeof(struct tnd_hdr), body, len);
}


static void raw_hello(int fd)
{
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	struct tnd_hello h = { .min_version = 1, .max_version = TND_VERSION, .program = "raw" };
	build(&m, TND_OP_HELLO, &h, sizeof(h), 1);
	raw_send(fd, &m, sizeof(m.h) + sizeof(h), -1, -1);
	ssize_t n = raw_recv(fd, &m, 10000);
	ck_assert_int_eq(n, sizeof(struct tnd_hdr) + sizeof(struct tnd_hello_reply));
	ck_assert_int_eq(tnd_check_reply(&m, (size_t)n, TND_OP_HELLO, 1, false), 0);
	ck_assert_int_eq(m.h.status, 0);
}

/* The daemon drops the connection: at most an error reply (TN_EPROTO), then the end. */
static void expect_dropped(int fd, const char *what)
{
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	for (int replies = 0;; replies++) {
		ssize_t n = raw_recv(fd, &m, 10000);
		ck_assert_msg(n >= 0, "%s: the daemon neither answered nor dropped the client", what);
		if (n == 0)
			break;
		ck_assert_msg(replies == 0, "%s: more than one reply", what);
		ck_assert_msg(n >= (ssize_t)sizeof(m.h) && m.h.status == TN_EPROTO,
			      "%s: a reply that is not TN_EPROTO (status %d)", what,
			      n >= (ssize_t)sizeof(m.h) ? m.h.status : 0);
	}
	close(fd);
}

/* A well-behaved client still gets served. */
static tn_tensord_status check_served(void)
{
	tn_tensord *c = conn();
	tn_tensord_status st;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_int_eq(st.pid, D.pid);
	tn_tensord_close(c);
	return st;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Whether the daemon's log holds @needle. */
static bool log_has(const char *needle)
{
	FILE *f = fopen(D.log, "r");
	char line[1024];
	bool found = false;
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* Write a safetensors file of @n float32 tensors of @elems elements each, tensor i holding
 * base+i, base+i+1, ...; named by @names[i] when given (JSON-escaped here), else STEM%05d. */
static void write_safetensors(const char *path, int n, const char *const *names, const char *stem,
			      int64_t elems, float base)
{
	size_t cap = (size_t)n * 400 + 64, len = 0;
	char *hdr = malloc(cap);
	ck_assert_ptr_nonnull(hdr);
	len += (size_t)snprintf(hdr + len, cap - len, "{");
	for (int i = 0; i < n; i++) {
		char name[300], esc[600];
		if (names)
			snprintf(name, sizeof(name), "%s", names[i]);
		else
			snprintf(name, sizeof(name), "%s%05d", stem, i);
		size_t k = 0;
		for (const char *q = name; *q; q++) {
			if (*q == '\n') {
				esc[k++] = '\\';
				esc[k++] = 'n';
			} else {
				esc[k++] = *q;
			}
		}
		esc[k] = 0;
		uint64_t b = (uint64_t)i * (uint64_t)elems * 4;
		len += (size_t)snprintf(hdr + len, cap - len,
					"%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],"
					"\"data_offsets\":[%llu,%llu]}",
					i ? "," : "", esc, (long long)elems, (unsigned long long)b,
					(unsigned long long)(b + (uint64_t)elems * 4));
	}
	len += (size_t)snprintf(hdr + len, cap - len, "}");
	while (len % 8)
		hdr[len++] = ' ';
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	uint64_t hl = len;
	ck_assert_int_eq(fwrite(&hl, 8, 1, f), 1);
	ck_assert_int_eq(fwrite(hdr, 1, len, f), len);
	for (int i = 0; i < n; i++)
		for (int64_t j = 0; j < elems; j++) {
			float v = base + (float)(i + j);
			ck_assert_int_eq(fwrite(&v, 4, 1, f), 1);
		}
	ck_assert_int_eq(fclose(f), 0);
	free(hdr);
}

/* Lines of the daemon's log that contain @needle. */
static int log_count(const char *needle)
{
	FILE *f = fopen(D.log, "r");
	char line[4096];
	int n = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static long daemon_rss_kb(void)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)D.pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_int_gt(kb, 0);
	return kb;
}

#endif /* TN_TENSORD_TESTUTIL_H */
