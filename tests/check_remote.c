/* SPDX-License-Identifier: MIT */
/*
 * Daemon-assigned client slots and read-only attachments (shm/arena_remote.h), with real
 * processes: the test's process plays tensord (creates the arena, assigns slots to forked
 * children and serves their hold, release and detach requests over a socketpair), and the
 * children attach by slot, read-write or read-only.
 *
 * The request/response is this file's own, a few fixed structs over SOCK_SEQPACKET; tensord
 * has its real protocol.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../shm/arena_internal.h"
#define TN_TEST_SHM_PREFIX "tn-remote"
#include "arena_testutil.h"

/* An int32 tensor of @n elements in @a, element i = i * @mul + @add, published as @name. */
static tn_tensor *published(tn_arena *a, const char *name, int64_t rows, int64_t cols, int mul,
			    int add)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t sz[] = { rows, cols };
	ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)(rows * cols) * 4,
						      tn_arena_allocator(a), &s));
	ck_assert_tn_ok(tn_tensor_new(s, 0, 2, sz, NULL, TN_INT32, &t));
	tn_storage_unref(s);
	int32_t *d = tn_tensor_data(t);
	for (int64_t i = 0; i < rows * cols; i++)
		d[i] = (int32_t)(i * mul + add);
	if (name)
		ck_assert_tn_ok(tn_arena_publish(a, name, t, 0, NULL));
	return t;
}

/* Assign a slot to this process, as the daemon would to a client. */
static void assign_self(tn_arena *a, int *slot, uint64_t *state)
{
	ck_assert_tn_ok(tn__arena_assign_slot(a, getpid(), tn__proc_start_time(getpid()), slot,
					      state));
}

/* Wait for child @pid and expect it to have exited with status 0. */
static void wait_exit_ok(pid_t pid)
{
	int st = wait_status(pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
}

/* ---- the test's own daemon protocol ------------------------------------------------------------ */

enum { REQ_HOLD = 1, REQ_RELEASE, REQ_DETACH, REQ_NOTE };

struct req {
	int op;
	int has_name;
	int slot;
	int note;
	tn_arena_handle handle;
	uint64_t block;
	char name[TN_ARENA_NAME_MAX + 1];
};

struct resp {
	int r;
	char msg[256];
	struct tn__arena_remote_entry e;
};

/* A child's failed check: the message on stderr, exit status 1. */
#define CHILD_CHECK(cond)                                                                    \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "child %d: line %d: %s (last error: %s)\n", (int)getpid(), \
				__LINE__, #cond, tn_last_error());                           \
			_exit(1);                                                            \
		}                                                                            \
	} while (0)

/* The child's end: the remote operations over the socket. */
static int c_hold(void *ctx, const char *name, const tn_arena_handle *handle,
		  struct tn__arena_remote_entry *ret)
{
	int fd = *(int *)ctx;
	struct req q = { .op = REQ_HOLD, .has_name = name != NULL };
	struct resp p;
	if (name)
		snprintf(q.name, sizeof(q.name), "%s", name);
	if (handle)
		q.handle = *handle;
	if (send(fd, &q, sizeof(q), 0) != sizeof(q) || recv(fd, &p, sizeof(p), 0) != sizeof(p))
		return tn__error(TN_EIO, "lost the daemon");
	if (p.r)
		return tn__error(p.r, "daemon: %s", p.msg);
	*ret = p.e;
	return 0;
}

static void c_release(void *ctx, uint64_t block)
{
	struct req q = { .op = REQ_RELEASE, .block = block };
	CHILD_CHECK(send(*(int *)ctx, &q, sizeof(q), 0) == sizeof(q));
}

static void c_detach(void *ctx, int slot)
{
	struct req q = { .op = REQ_DETACH, .slot = slot };
	CHILD_CHECK(send(*(int *)ctx, &q, sizeof(q), 0) == sizeof(q));
}

static int child_fd;
static const struct tn__arena_remote child_remote = {
	.hold = c_hold, .release = c_release, .detach = c_detach, .ctx = &child_fd
};

/* Tell the daemon @note, then wait for its go-ahead. */
static void note(int v)
{
	struct req q = { .op = REQ_NOTE, .note = v };
	struct resp p;
	CHILD_CHECK(send(child_fd, &q, sizeof(q), 0) == sizeof(q));
	CHILD_CHECK(recv(child_fd, &p, sizeof(p), 0) == sizeof(p));
}

/* The daemon's end. */
struct kid {
	pid_t pid;
	int fd;
	int slot;
	uint64_t state;
	int holds, releases, detaches;
};

typedef int (*kid_fn)(tn_arena *b, int arg);

/* Fork a child, assign it a slot, pass it the slot; the child attaches (read-only with
 * TN__ATTACH_READ_ONLY: through an O_RDONLY fd) and exits with @fn's status. */
static struct kid spawn(tn_arena *a, unsigned flags, kid_fn fn, int arg)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		child_fd = sv[1];
		struct resp m;
		CHILD_CHECK(recv(child_fd, &m, sizeof(m), 0) == sizeof(m));
		int fd = open(arena_file, flags & TN__ATTACH_READ_ONLY ? O_RDONLY : O_RDWR);
		CHILD_CHECK(fd >= 0);
		tn_arena *b = NULL;
		CHILD_CHECK(tn__arena_attach_slot(fd, m.r, flags, &child_remote, &b) == 0);
		close(fd);
		CHILD_CHECK(tn_arena_slot(b) == m.r);
		CHILD_CHECK(tn__arena_read_only(b) == !!(flags & TN__ATTACH_READ_ONLY));
		_exit(fn(b, arg));
	}
	close(sv[1]);
	struct kid k = { .pid = pid, .fd = sv[0] };
	ck_assert_tn_ok(tn__arena_assign_slot(a, pid, tn__proc_start_time(pid), &k.slot, &k.state));
	struct resp m = { .r = k.slot };
	ck_assert_int_eq(send(k.fd, &m, sizeof(m), 0), sizeof(m));
	return k;
}

/* Serve one request of @k's: a note's value, -1 when it detaches, -2 when it is gone, -3
 * after a hold or a release. */
static int serve_one(tn_arena *a, struct kid *k)
{
	{
		struct req q;
		ssize_t n = recv(k->fd, &q, sizeof(q), 0);
		if (n <= 0)
			return -2;
		ck_assert_int_eq(n, sizeof(q));
		switch (q.op) {
		case REQ_HOLD: {
			struct resp p;
			memset(&p, 0, sizeof(p));
			p.r = tn__arena_hold_for(a, k->slot, q.has_name ? q.name : NULL, &q.handle,
						 &p.e);
			if (p.r)
				snprintf(p.msg, sizeof(p.msg), "%s", tn_last_error());
			else
				k->holds++;
			ck_assert_int_eq(send(k->fd, &p, sizeof(p), 0), sizeof(p));
			return -3;
		}
		case REQ_RELEASE:
			ck_assert_tn_ok(tn__arena_release_for(a, k->slot, q.block));
			k->releases++;
			return -3;
		case REQ_DETACH:
			ck_assert_int_eq(q.slot, k->slot);
			k->detaches++;
			return -1;
		case REQ_NOTE:
			return q.note;
		default:
			ck_abort_msg("bad request %d", q.op);
			return -2;
		}
	}
}

/* Serve @k's requests until it sends a note (returned), detaches (-1) or goes (-2). */
static int serve(tn_arena *a, struct kid *k)
{
	int v;
	while ((v = serve_one(a, k)) == -3)
		;
	return v;
}

static void go(struct kid *k)
{
	struct resp p = { 0 };
	ck_assert_int_eq(send(k->fd, &p, sizeof(p), 0), sizeof(p));
}

/* Serve @k until it detaches, then expect a clean exit. */
static void finish(tn_arena *a, struct kid *k)
{
	ck_assert_int_eq(serve(a, k), -1);
	wait_exit_ok(k->pid);
	close(k->fd);
}

/* ---- read-only clients -------------------------------------------------------------------------- */

static int64_t element(const tn_tensor *t, int64_t i, int64_t j)
{
	tn_scalar v;
	int64_t x;
	if (tn_tensor_get(t, 2, (int64_t[]){ i, j }, &v) || tn_scalar_to_int(v, &x))
		return INT64_MIN;
	return x;
}

static bool values_ok(const tn_tensor *t, int64_t rows, int64_t cols, int mul, int add)
{
	int64_t r, c;
	if (tn_tensor_ndim(t) != 2 || tn_tensor_size(t, 0, &r) || tn_tensor_size(t, 1, &c) ||
	    r != rows || c != cols)
		return false;
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++)
			if (element(t, i, j) != (i * cols + j) * mul + add)
				return false;
	return true;
}

#define RO_ERR(call) (tn_clear_error(), (call) == TN_EPERM && strstr(tn_last_error(), "read-only"))

static int ro_reader(tn_arena *b, int arg)
{
	(void)arg;
	tn_tensor *w, *w2, *wt, *v, *y;
	tn_arena_handle hw;
	CHILD_CHECK(tn_arena_lookup(b, "w", &w, &hw) == 0);
	CHILD_CHECK(values_ok(w, 4, 8, 3, 1));
	/* The same block again: the same mapping and one local hold. */
	CHILD_CHECK(tn_arena_lookup_handle(b, hw, &w2) == 0);
	CHILD_CHECK(tn_tensor_data(w2) == tn_tensor_data(w));
	CHILD_CHECK(tn_tensor_storage(w2) == tn_tensor_storage(w));
	/* A strided view of the same block, published under its own name. */
	CHILD_CHECK(tn_arena_lookup(b, "w/t", &wt, NULL) == 0);
	CHILD_CHECK(tn_tensor_storage(wt) == tn_tensor_storage(w));
	for (int64_t i = 0; i < 8; i++)
		for (int64_t j = 0; j < 4; j++)
			CHILD_CHECK(element(wt, i, j) == (j * 8 + i) * 3 + 1);
	CHILD_CHECK(tn_arena_lookup(b, "v", &v, NULL) == 0);
	CHILD_CHECK(values_ok(v, 16, 16, -2, 5));

	/* Errors come from the daemon with its message. */
	tn_tensor *x = NULL;
	CHILD_CHECK(tn_arena_lookup(b, "nope", &x, NULL) == TN_ENOENT && !x);
	CHILD_CHECK(strstr(tn_last_error(), "no tensor 'nope'"));
	CHILD_CHECK(tn_arena_lookup_handle(b, (tn_arena_handle){ hw.index, hw.generation + 7 }, &x) ==
		    TN_ESTALE);

	/* Read without the lock. */
	tn_arena_entry e, *list;
	size_t n;
	CHILD_CHECK(tn_arena_info(b, "w/t", &e) == 0 && e.ndim == 2 && e.sizes[0] == 8 &&
		    e.strides[0] == 1 && e.strides[1] == 8 && e.dtype == TN_INT32);
	CHILD_CHECK(tn_arena_info(b, "nope", &e) == TN_ENOENT);
	CHILD_CHECK(tn_arena_list(b, NULL, &list, &n) == 0 && n == 3);
	CHILD_CHECK(!strcmp(list[0].name, "v") && !strcmp(list[1].name, "w") &&
		    !strcmp(list[2].name, "w/t"));
	free(list);
	CHILD_CHECK(tn_arena_list(b, "w", &list, &n) == 0 && n == 2);
	free(list);
	tn_arena_stats st;
	CHILD_CHECK(tn_arena_stat(b, &st) == 0 && st.names == 3 && st.blocks == 2 &&
		    st.clients == 2);
	uint8_t uuid[16];
	tn__arena_uuid(b, uuid);
	CHILD_CHECK(!memcmp(uuid, st.uuid, 16));
	tn_arena_client cl[4];
	int nc = tn_arena_clients(b, cl, 4);
	CHILD_CHECK(nc == 2 && cl[1].slot == tn_arena_slot(b) && cl[1].pid == getpid() &&
		    cl[1].held_blocks == 2 && cl[1].alive);
	tn_arena_fsck_report rep;
	CHILD_CHECK(tn_arena_fsck(b, 0, &rep) == 0 && rep.problems == 0 && rep.blocks >= 2);
	bool attached;
	int32_t pid;
	CHILD_CHECK(tn__arena_slot_info(b, tn_arena_slot(b), &attached, &pid, NULL, NULL) == 0 &&
		    attached && pid == getpid());

	/* Nothing writes. */
	void *p;
	tn_storage *s = NULL;
	CHILD_CHECK(tn_fill_(w, tn_scalar_int(3)) == TN_EPERM);
	CHILD_CHECK(tn_tensor_set(w, 2, (int64_t[]){ 0, 0 }, tn_scalar_int(1)) == TN_EPERM);
	CHILD_CHECK(tn_abs(w, &y) == 0);
	CHILD_CHECK(tn_add_out(y, y, tn_scalar_int(1), wt) == TN_EPERM);
	tn_tensor_unref(y);
	CHILD_CHECK(RO_ERR(tn_arena_alloc(b, 64, &p)));
	CHILD_CHECK(RO_ERR(tn_arena_free(b, tn_tensor_data(w))));
	CHILD_CHECK(RO_ERR(tn_arena_trim(b)));
	CHILD_CHECK(RO_ERR(tn_arena_publish(b, "w2", w, 0, NULL)));
	CHILD_CHECK(RO_ERR(tn_arena_unpublish(b, "w")));
	CHILD_CHECK(RO_ERR(tn_arena_seal(b, "w")));
	CHILD_CHECK(RO_ERR(tn_arena_reclaim(b, 0)));
	CHILD_CHECK(RO_ERR(tn_arena_reclaim_dead(b)));
	CHILD_CHECK(RO_ERR(tn_arena_fsck(b, TN_ARENA_FSCK_REPAIR, NULL)));
	CHILD_CHECK(RO_ERR(tn_arena_place(b, tn_tensor_data(w), TN_NUMA_LOCAL, 0)));
	CHILD_CHECK(RO_ERR(tn_arena_use(b)));
	CHILD_CHECK(tn_storage_new_with_allocator(TN_CPU, 64, tn_arena_allocator(b), &s) != 0 && !s);
	int slot;
	uint64_t state;
	CHILD_CHECK(RO_ERR(tn__arena_assign_slot(b, getpid(), 1, &slot, &state)));
	CHILD_CHECK(RO_ERR(tn__arena_hold_for(b, 0, "w", NULL, &(struct tn__arena_remote_entry){ 0 })));
	CHILD_CHECK(RO_ERR(tn__arena_release_for(b, 0, 0)));
	CHILD_CHECK(RO_ERR(tn__arena_reclaim_if(b, 0, 1, NULL)));

	/* A raw write faults: the mapping is read-only (the default action takes the fault,
	 * not a sanitizer's handler). A fork child's handle is refused. */
	for (int mode = 0; mode < 2; mode++) {
		pid_t g = fork();
		CHILD_CHECK(g >= 0);
		if (g == 0) {
			if (mode == 1) {
				tn_tensor *z;
				_exit(tn_arena_lookup(b, "w", &z, NULL) == TN_EBADF ? 0 : 2);
			}
			signal(SIGSEGV, SIG_DFL);
			((volatile int32_t *)tn_tensor_data(v))[3] = -5;
			_exit(3);
		}
		int gs;
		CHILD_CHECK(waitpid(g, &gs, 0) == g);
		CHILD_CHECK(mode == 0 ? WIFSIGNALED(gs) && WTERMSIG(gs) == SIGSEGV
				      : WIFEXITED(gs) && WEXITSTATUS(gs) == 0);
	}
	CHILD_CHECK(values_ok(v, 16, 16, -2, 5));

	note(1); /* the daemon counts holds and releases so far */
	tn_tensor_unref(w);
	tn_tensor_unref(w2);
	note(2); /* "w" and "w/t" share a block: still held through wt */
	tn_tensor_unref(wt);
	tn_tensor_unref(v);
	note(3);
	tn_arena_unref(b);
	return 0;
}

START_TEST(test_ro_lookup_and_refusals)
{
	tn_arena *a = make("ro", 16 << 20);
	tn_tensor *w = published(a, "w", 4, 8, 3, 1), *wt, *v = published(a, "v", 16, 16, -2, 5);
	ck_assert_tn_ok(tn_transpose(w, 0, 1, &wt));
	ck_assert_tn_ok(tn_arena_publish(a, "w/t", wt, 0, NULL));
	tn_tensor_unref(wt);
	tn_tensor_unref(w);
	tn_tensor_unref(v);
	uint64_t used = stats(a).used_bytes;

	struct kid k = spawn(a, TN__ATTACH_READ_ONLY, ro_reader, 0);
	ck_assert_int_eq(serve(a, &k), 1);
	ck_assert_int_ge(k.holds, 4); /* w, w by handle, w/t, v: idempotent for the same block */
	ck_assert_int_eq(k.releases, 0);
	tn_arena_client cl[4];
	ck_assert_int_eq(tn_arena_clients(a, cl, 4), 2);
	ck_assert_int_eq(cl[1].slot, k.slot);
	ck_assert_uint_eq(cl[1].held_blocks, 2);
	go(&k);
	ck_assert_int_eq(serve(a, &k), 2);
	ck_assert_int_eq(k.releases, 0);
	go(&k);
	ck_assert_int_eq(serve(a, &k), 3);
	ck_assert_int_eq(k.releases, 2); /* once per block, at the last local use */
	ck_assert_int_eq(tn_arena_clients(a, cl, 4), 2);
	ck_assert_uint_eq(cl[1].held_blocks, 0);
	go(&k);
	finish(a, &k);
	ck_assert_int_eq(k.detaches, 1);
	/* The slot is the daemon's to give back; nothing was held, nothing is freed. */
	uint64_t freed = 1;
	ck_assert_int_eq(tn__arena_reclaim_if(a, k.slot, k.state, &freed), 1);
	ck_assert_uint_eq(freed, 0);
	ck_assert_uint_eq(stats(a).used_bytes, used);
	ck_assert_uint_eq(stats(a).clients, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* A read-only client's hold keeps a tensor alive after the name goes; its release frees it. */
static int ro_keeper(tn_arena *b, int arg)
{
	(void)arg;
	tn_tensor *x;
	CHILD_CHECK(tn_arena_lookup(b, "x", &x, NULL) == 0);
	note(1); /* the daemon unpublishes "x" */
	CHILD_CHECK(tn_arena_lookup(b, "x", &(tn_tensor *){ NULL }, NULL) == TN_ENOENT);
	CHILD_CHECK(values_ok(x, 512, 512, 7, -3));
	tn_tensor_unref(x);
	note(2);
	tn_arena_unref(b);
	return 0;
}

START_TEST(test_ro_hold_keeps_alive)
{
	tn_arena *a = make("keep", 16 << 20);
	uint64_t free0 = stats(a).free_bytes;
	tn_tensor_unref(published(a, "x", 512, 512, 7, -3));
	struct kid k = spawn(a, TN__ATTACH_READ_ONLY, ro_keeper, 0);
	ck_assert_int_eq(serve(a, &k), 1);
	ck_assert_tn_ok(tn_arena_unpublish(a, "x"));
	ck_assert_uint_eq(stats(a).blocks, 1); /* held by the child's slot */
	ck_assert_uint_lt(stats(a).free_bytes, free0);
	assert_clean(a);
	go(&k);
	ck_assert_int_eq(serve(a, &k), 2);
	ck_assert_int_eq(k.releases, 1);
	ck_assert_uint_eq(stats(a).blocks, 0);
	ck_assert_uint_eq(stats(a).free_bytes, free0);
	go(&k);
	finish(a, &k);
	ck_assert_int_eq(tn__arena_reclaim_if(a, k.slot, k.state, NULL), 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* ---- read-write clients --------------------------------------------------------------------- */

static int rw_writer(tn_arena *b, int arg)
{
	(void)arg;
	tn_tensor *x;
	CHILD_CHECK(tn_arena_lookup(b, "x", &x, NULL) == 0);
	CHILD_CHECK(values_ok(x, 8, 8, 1, 0));
	CHILD_CHECK(tn_fill_(x, tn_scalar_int(9)) == 0);
	tn_tensor_unref(x);
	CHILD_CHECK(tn_arena_use(b) == 0);
	tn_tensor *y;
	CHILD_CHECK(tn_full(2, (int64_t[]){ 3, 3 }, tn_scalar_int(4), &(enum tn_dtype){ TN_INT32 },
			    TN_CPU, &y) == 0);
	CHILD_CHECK(tn_arena_publish(b, "y", y, 0, NULL) == 0);
	tn_tensor_unref(y);
	CHILD_CHECK(tn_arena_use(NULL) == 0);
	void *p;
	CHILD_CHECK(tn_arena_alloc(b, 1000, &p) == 0); /* freed with the slot */
	tn_arena_unref(b);
	return 0;
}

START_TEST(test_rw_attach_slot)
{
	tn_arena *a = make("rw", 16 << 20);
	tn_tensor *x = published(a, "x", 8, 8, 1, 0);
	struct kid k = spawn(a, 0, rw_writer, 0);
	finish(a, &k);
	ck_assert_int_eq(k.holds, 0); /* a read-write client holds blocks itself */
	ck_assert_int_eq(k.detaches, 1);
	/* The child released its slot itself: nothing to reclaim. */
	bool attached = true;
	ck_assert_tn_ok(tn__arena_slot_info(a, k.slot, &attached, NULL, NULL, NULL));
	ck_assert(!attached);
	ck_assert_int_eq(tn__arena_reclaim_if(a, k.slot, k.state, NULL), 0);
	int32_t *d = tn_tensor_data(x);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(d[i], 9);
	tn_tensor *y;
	ck_assert_tn_ok(tn_arena_lookup(a, "y", &y, NULL));
	ck_assert_int_eq(((int32_t *)tn_tensor_data(y))[8], 4);
	tn_tensor_unref(y);
	tn_tensor_unref(x);
	ck_assert_uint_eq(stats(a).blocks, 2);
	ck_assert_uint_eq(stats(a).clients, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* Slots that are not this process's are refused. */
START_TEST(test_attach_slot_refusals)
{
	tn_arena *a = make("perm", 16 << 20);
	int mine, stale, free_slot;
	uint64_t state;
	/* A slot of the parent's, one with our pid but another start time, and a free one. */
	assign_self(a, &mine, &state);
	int sv[2];
	ck_assert_int_eq(pipe(sv), 0);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		CHILD_CHECK(read(sv[0], &c, 1) == 1);
		int slot = (unsigned char)c;
		int fd = open(arena_file, O_RDONLY), rfd = open(arena_file, O_RDWR);
		tn_arena *b = NULL;
		CHILD_CHECK(fd >= 0 && rfd >= 0);
		for (int ro = 0; ro < 2; ro++) {
			unsigned fl = ro ? TN__ATTACH_READ_ONLY : 0;
			int f = ro ? fd : rfd;
			CHILD_CHECK(tn__arena_attach_slot(f, mine, fl, &child_remote, &b) == TN_EPERM);
			CHILD_CHECK(strstr(tn_last_error(), "not assigned to this process"));
			CHILD_CHECK(tn__arena_attach_slot(f, slot, fl, &child_remote, &b) == TN_EPERM);
			CHILD_CHECK(tn__arena_attach_slot(f, slot + 1, fl, &child_remote, &b) ==
				    TN_EPERM);
			CHILD_CHECK(tn__arena_attach_slot(f, TN_ARENA_MAX_CLIENTS, fl, &child_remote,
							  &b) == TN_EINVAL);
			CHILD_CHECK(tn__arena_attach_slot(f, -1, fl, &child_remote, &b) == TN_EINVAL);
			CHILD_CHECK(!b);
		}
		CHILD_CHECK(tn__arena_attach_slot(fd, mine, TN__ATTACH_READ_ONLY, NULL, &b) ==
			    TN_EINVAL);
		CHILD_CHECK(tn__arena_attach_slot(fd, mine, 0x10, NULL, &b) == TN_EINVAL);
		/* A read-write attachment through a read-only fd cannot map the file. */
		CHILD_CHECK(tn__arena_attach_slot(fd, mine, 0, NULL, &b) == TN_EPERM &&
			    strstr(tn_last_error(), "cannot map"));
		CHILD_CHECK(tn__arena_attach_slot(-1, mine, 0, NULL, &b) == TN_EINVAL);
		_exit(0);
	}
	ck_assert_tn_ok(tn__arena_assign_slot(a, pid, tn__proc_start_time(pid) + 1, &stale,
					      &state));
	free_slot = stale + 1;
	ck_assert_int_lt(free_slot, TN_ARENA_MAX_CLIENTS);
	char c = (char)stale;
	ck_assert_int_eq(write(sv[1], &c, 1), 1);
	wait_exit_ok(pid);
	ck_assert_uint_eq(stats(a).clients, 3);
	ck_assert_int_eq(tn__arena_reclaim_if(a, stale, state, NULL), 1);
	ck_assert_int_eq(tn__arena_reclaim_if(a, free_slot, state, NULL), 0);
	ck_assert_int_eq(tn__arena_reclaim_if(a, tn_arena_slot(a), state, NULL), TN_EINVAL);
	ck_assert_int_eq(tn__arena_reclaim_if(a, -1, state, NULL), TN_ERANGE);
	tn_arena_unref(a);
}
END_TEST

/* ---- the daemon's side ------------------------------------------------------------------------ */

/* A child killed while it holds a block: reclaim_if frees it, and refuses a slot reused. */
static int ro_holder(tn_arena *b, int arg)
{
	tn_tensor *x;
	CHILD_CHECK(tn_arena_lookup(b, "x", &x, NULL) == 0);
	note(arg);
	pause(); /* until killed */
	return 0;
}

START_TEST(test_reclaim_if)
{
	tn_arena *a = make("rec", 16 << 20);
	uint64_t free0 = stats(a).free_bytes;
	tn_tensor_unref(published(a, "x", 100, 100, 1, 2));
	struct kid k = spawn(a, TN__ATTACH_READ_ONLY, ro_holder, 5);
	ck_assert_int_eq(serve(a, &k), 5);
	ck_assert_tn_ok(tn_arena_unpublish(a, "x"));
	uint64_t held = stats(a).used_bytes;
	ck_assert_uint_gt(held, 0);
	kill(k.pid, SIGKILL);
	int st = wait_status(k.pid);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	close(k.fd);

	/* The slot goes to another process before the daemon gets round to the dead one:
	 * the old state word no longer matches. */
	bool attached;
	int32_t pid;
	uint64_t state;
	ck_assert_tn_ok(tn__arena_slot_info(a, k.slot, &attached, &pid, NULL, &state));
	ck_assert(attached);
	ck_assert_int_eq(pid, k.pid);
	ck_assert_uint_eq(state, k.state);
	uint64_t freed = 7;
	ck_assert_int_eq(tn__arena_reclaim_if(a, k.slot, k.state, &freed), 1);
	ck_assert_uint_eq(freed, held);
	ck_assert_uint_eq(stats(a).free_bytes, free0);
	ck_assert_uint_eq(stats(a).blocks, 0);
	assert_clean(a);
	ck_assert_int_eq(tn__arena_reclaim_if(a, k.slot, k.state, &freed), 0);

	int again;
	uint64_t state2;
	assign_self(a, &again, &state2);
	ck_assert_int_eq(again, k.slot); /* the first free slot */
	ck_assert_uint_ne(state2, k.state);
	ck_assert_int_eq(tn__arena_reclaim_if(a, again, k.state, NULL), 0);
	ck_assert_tn_ok(tn__arena_slot_info(a, again, &attached, &pid, NULL, NULL));
	ck_assert(attached);
	ck_assert_int_eq(pid, getpid());
	ck_assert_int_eq(tn__arena_reclaim_if(a, again, state2, NULL), 1);
	ck_assert_uint_eq(stats(a).clients, 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* Every slot assigned: TN_EBUSY, unless some belong to dead processes, which go first. */
START_TEST(test_assign_all_slots)
{
	tn_arena *a = make("all", 16 << 20);
	uint64_t reclaimed0 = stats(a).reclaimed_slots;
	/* A process that is gone, with the start time it had. */
	int sv[2];
	ck_assert_int_eq(pipe(sv), 0);
	pid_t dead = fork();
	if (dead == 0) {
		char c;
		_exit(read(sv[0], &c, 1) == 1 ? 0 : 1);
	}
	uint64_t dead_start = tn__proc_start_time(dead);
	ck_assert_uint_gt(dead_start, 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	wait_status(dead);

	int slots[TN_ARENA_MAX_CLIENTS];
	uint64_t states[TN_ARENA_MAX_CLIENTS];
	int n = 0;
	for (; n < TN_ARENA_MAX_CLIENTS - 1; n++) {
		bool gone = n % 5 == 0;
		ck_assert_tn_ok(tn__arena_assign_slot(a, gone ? dead : getpid(),
						      gone ? dead_start
							   : tn__proc_start_time(getpid()),
						      &slots[n], &states[n]));
		ck_assert_int_ne(slots[n], tn_arena_slot(a));
	}
	ck_assert_uint_eq(stats(a).clients, TN_ARENA_MAX_CLIENTS);
	int ndead = (TN_ARENA_MAX_CLIENTS - 1 + 4) / 5;
	/* Full: the dead ones are reclaimed and one of theirs is taken. */
	int s;
	uint64_t st;
	assign_self(a, &s, &st);
	ck_assert_int_eq(s % 5, 1); /* slot i + 1 was assigned i-th: i % 5 == 0 were dead */
	ck_assert_uint_eq(stats(a).reclaimed_slots, reclaimed0 + (uint64_t)ndead);
	ck_assert_uint_eq(stats(a).clients, TN_ARENA_MAX_CLIENTS - ndead + 1);
	for (int i = 0; i < ndead - 1; i++)
		assign_self(a, &s, &st);
	ck_assert_tn_error_has(tn__arena_assign_slot(a, getpid(), 1, &s, &st), TN_EBUSY,
			       "all 256 client slots are taken");
	/* The old state words of the reclaimed slots match nothing now. */
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(tn__arena_reclaim_if(a, slots[i], states[i], NULL),
				 (i % 5 == 0 ? 0 : 1));
	ck_assert_uint_eq(stats(a).clients, 1 + (uint64_t)ndead);
	ck_assert_int_eq(tn_arena_clients(a, NULL, 0), 1 + ndead);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

static bool held_by(tn_arena *a, uint64_t block, int slot)
{
	return tn__hold_has(tn__block_at(a, block), slot);
}

START_TEST(test_hold_for_rules)
{
	tn_arena *a = make("hold", 16 << 20);
	tn_arena_handle h;
	tn_tensor *x = published(a, "x", 10, 10, 1, 0);
	ck_assert_tn_ok(tn_arena_publish(a, "x2", x, 0, &h));
	tn_tensor_unref(x);
	int s, unused;
	uint64_t st, st2;
	assign_self(a, &s, &st);
	assign_self(a, &unused, &st2);
	ck_assert_int_eq(tn__arena_reclaim_if(a, unused, st2, NULL), 1);
	struct tn__arena_remote_entry e, e2;
	ck_assert_tn_error_has(tn__arena_hold_for(a, s, "nope", NULL, &e), TN_ENOENT,
			       "no tensor 'nope'");
	ck_assert_tn_error_has(tn__arena_hold_for(a, s, "", NULL, &e), TN_EINVAL, "1 to 255");
	ck_assert_tn_error_has(tn__arena_hold_for(a, s, NULL, NULL, &e), TN_EINVAL, "NULL");
	ck_assert_tn_error_has(tn__arena_hold_for(a, unused, "x", NULL, &e), TN_ERANGE,
			       "not attached");
	ck_assert_tn_error_has(tn__arena_hold_for(a, 256, "x", NULL, &e), TN_ERANGE, "outside");
	/* Two holds of the same block by the same slot are one bit. */
	ck_assert_tn_ok(tn__arena_hold_for(a, s, "x", NULL, &e));
	ck_assert_tn_ok(tn__arena_hold_for(a, s, NULL, &h, &e2));
	ck_assert_uint_eq(e.block, e2.block);
	ck_assert_str_eq(e2.entry.name, "x2");
	ck_assert_int_eq(e.entry.ndim, 2);
	ck_assert_int_eq(e.entry.sizes[1], 10);
	ck_assert_uint_ge(e.entry.block_bytes, 400);
	ck_assert(held_by(a, e.block, s));
	/* A handle whose name was replaced is stale. */
	tn_tensor *y = published(a, NULL, 2, 2, 1, 0);
	ck_assert_tn_ok(tn_arena_publish(a, "x2", y, TN_ARENA_REPLACE, NULL));
	ck_assert_tn_error_has(tn__arena_hold_for(a, s, NULL, &h, &e2), TN_ESTALE, "stale");
	ck_assert_tn_ok(tn_arena_unpublish(a, "x"));
	ck_assert_tn_ok(tn_arena_unpublish(a, "x2"));
	ck_assert_uint_eq(stats(a).blocks, 2); /* x by the slot, y by this handle */
	ck_assert_tn_error_has(tn__arena_release_for(a, s, e.block + 64), TN_EINVAL,
			       "not a block slot");
	ck_assert_tn_error_has(tn__arena_release_for(a, s, 1), TN_EINVAL, "not a block slot");
	ck_assert_tn_error_has(tn__arena_release_for(a, unused, e.block), TN_EINVAL,
			       "not a block slot");
	ck_assert_tn_ok(tn__arena_release_for(a, s, e.block));
	ck_assert_uint_eq(stats(a).blocks, 1);
	ck_assert_tn_error_has(tn__arena_release_for(a, s, e.block), TN_EINVAL, "not a block slot");
	/* A raw block of the slot's is not the daemon's to release. */
	void *p;
	ck_assert_tn_ok(tn_arena_alloc(a, 100, &p));
	ck_assert_int_eq(tn__arena_release_for(a, tn_arena_slot(a), tn__arena_block_of(a, p, NULL)),
			 TN_EINVAL);
	ck_assert_tn_ok(tn_arena_free(a, p));
	tn_tensor_unref(y);
	ck_assert_int_eq(tn__arena_reclaim_if(a, s, st, NULL), 1);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

/* The daemon killed at every write point of hold_for, release_for, assign_slot and
 * reclaim_if: the arena checks clean afterwards, and the change happened or did not. */
START_TEST(test_daemon_killed)
{
	int op = _i;
	int points_done = 0;
	for (int point = 1; point < 200; point++) {
		char name[32];
		snprintf(name, sizeof(name), "d%d", point);
		tn_arena *a = make(name, 16 << 20);
		uint64_t free0 = stats(a).free_bytes;
		tn_tensor_unref(published(a, "x", 30, 30, 1, 0));
		int s;
		uint64_t st;
		assign_self(a, &s, &st);
		struct tn__arena_remote_entry e;
		ck_assert_tn_ok(tn__arena_hold_for(a, s, "x", NULL, &e));
		if (op != 1)
			ck_assert_tn_ok(tn__arena_release_for(a, s, e.block));
		if (op == 3) { /* reclaim frees a block only the slot holds */
			ck_assert_tn_ok(tn__arena_hold_for(a, s, "x", NULL, &e));
			ck_assert_tn_ok(tn_arena_unpublish(a, "x"));
		}
		tn_arena_stats before = stats(a);
		pid_t pid = fork();
		if (pid == 0) {
			tn_arena *d;
			int s2;
			uint64_t st2;
			if (tn_arena_open(name, dir, &d))
				_exit(10);
			tn__arena_crash_countdown = point;
			switch (op) {
			case 0:
				_exit(tn__arena_hold_for(d, s, "x", NULL, &e) ? 11 : 0);
			case 1:
				_exit(tn__arena_release_for(d, s, e.block) ? 11 : 0);
			case 2:
				_exit(tn__arena_assign_slot(d, getppid(),
							    tn__proc_start_time(getppid()), &s2,
							    &st2) ? 11 : 0);
			default:
				_exit(tn__arena_reclaim_if(d, s, st, NULL) == 1 ? 0 : 11);
			}
		}
		int status = wait_status(pid);
		bool finished = WIFEXITED(status);
		ck_assert_msg((finished && WEXITSTATUS(status) == 0) ||
				      (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL),
			      "status 0x%x", status);
		/* Take the lock (rolling back), then reclaim the dead daemon's own slot. */
		ck_assert_int_eq(tn_arena_reclaim_dead(a), 1);
		assert_clean(a);
		tn_arena_stats after = stats(a);
		ck_assert_uint_le(after.lock_repairs, before.lock_repairs + 1);
		bool attached;
		ck_assert_tn_ok(tn__arena_slot_info(a, s, &attached, NULL, NULL, NULL));
		/* All or nothing. */
		switch (op) {
		case 0:
		case 1:
			ck_assert(held_by(a, e.block, s) == (finished == (op == 0)));
			break;
		case 2:
			ck_assert_uint_eq(after.clients, before.clients + (finished ? 1 : 0));
			break;
		default:
			/* Reclaiming commits block by block: a reclaimer killed half way leaves
			 * the slot attached, and reclaim_if below finishes the job. */
			ck_assert(attached == !finished);
			ck_assert_uint_le(after.blocks, finished ? 0 : 1);
			break;
		}
		/* Give everything back: every byte returns. */
		ck_assert_int_eq(tn__arena_reclaim_if(a, s, st, NULL),
				 (op == 3 && finished ? 0 : 1));
		for (int i = 0; i < TN_ARENA_MAX_CLIENTS; i++) {
			uint64_t state;
			ck_assert_tn_ok(tn__arena_slot_info(a, i, &attached, NULL, NULL, &state));
			if (attached && i != tn_arena_slot(a))
				ck_assert_int_eq(tn__arena_reclaim_if(a, i, state, NULL), 1);
		}
		tn_arena_unpublish(a, "x");
		ck_assert_uint_eq(stats(a).free_bytes, free0);
		ck_assert_uint_eq(stats(a).clients, 1);
		assert_clean(a);
		tn_arena_unref(a);
		ck_assert_tn_ok(tn_arena_destroy(name, dir, 0));
		points_done++;
		if (finished)
			break;
	}
	ck_assert_int_gt(points_done, 1);
}
END_TEST

/* Readers without the lock while the directory and the heap churn: answers are right or
 * momentarily stale, never out of the mapping, never a crash. */
static int ro_churn_reader(tn_arena *b, int arg)
{
	(void)arg;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long iters = 0, found = 0, busy = 0;
	do {
		tn_arena_entry e, *list;
		size_t n;
		int r = tn_arena_info(b, "churn/a", &e);
		/* TN_EBUSY: replaced at each of its 64 looks; allowed, but must stay rare. */
		CHILD_CHECK(r == 0 || r == TN_ENOENT || r == TN_EBUSY);
		busy += r == TN_EBUSY;
		if (r == 0) {
			found++;
			CHILD_CHECK(e.ndim == 2 && e.dtype == TN_INT32 && e.sizes[0] * e.sizes[1] * 4 <=
				    (int64_t)e.block_bytes);
		}
		CHILD_CHECK(tn_arena_list(b, "churn/", &list, &n) == 0 && n <= 8);
		for (size_t i = 0; i < n; i++)
			CHILD_CHECK(!strncmp(list[i].name, "churn/", 6));
		free(list);
		/* Read-only: the figures agree with each other, or TN_EBUSY (rare, counted). */
		tn_arena_stats st;
		r = tn_arena_stat(b, &st);
		CHILD_CHECK(r == 0 || r == TN_EBUSY);
		busy += r == TN_EBUSY;
		CHILD_CHECK(r || st.used_bytes + st.free_bytes == st.heap_bytes);
		CHILD_CHECK(tn_arena_clients(b, NULL, 0) >= 2);
		if (iters % 16 == 0) {
			tn_arena_fsck_report rep;
			tn_arena_fsck(b, 0, &rep); /* may see a change under way; must not crash */
		}
		tn_tensor *x;
		r = tn_arena_lookup(b, "churn/b", &x, NULL);
		CHILD_CHECK(r == 0 || r == TN_ENOENT);
		if (r == 0) {
			CHILD_CHECK(values_ok(x, 16, 16, 1, 0));
			tn_tensor_unref(x);
		}
		iters++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 700);
	CHILD_CHECK(found > 0 && busy * 10 <= iters);
	note(1);
	tn_arena_unref(b);
	return 0;
}

START_TEST(test_ro_readers_under_churn)
{
	tn_arena *a = make("churn", 32 << 20);
	uint64_t free0 = stats(a).free_bytes;
	tn_tensor_unref(published(a, "churn/b", 16, 16, 1, 0));
	struct kid k = spawn(a, TN__ATTACH_READ_ONLY, ro_churn_reader, 0);
	/* The child's hold requests come over the socket between the churn's changes. */
	ck_assert_int_eq(fcntl(k.fd, F_SETFL, O_NONBLOCK), 0);
	unsigned seed = 1;
	int noted = 0;
	while (!noted) {
		int64_t rows = 1 + rand_r(&seed) % 64, cols = 1 + rand_r(&seed) % 64;
		tn_tensor *t = published(a, NULL, rows, cols, 1, 0);
		ck_assert_tn_ok(tn_arena_publish(a, "churn/a", t, TN_ARENA_REPLACE, NULL));
		if (rand_r(&seed) % 3 == 0)
			ck_assert_tn_ok(tn_arena_unpublish(a, "churn/a"));
		tn_tensor_unref(t);
		struct req q;
		ssize_t n;
		while ((n = recv(k.fd, &q, sizeof(q), MSG_PEEK)) != 0) {
			if (n < 0)
				break; /* nothing yet */
			ck_assert_int_eq(n, sizeof(q));
			ck_assert_int_eq(fcntl(k.fd, F_SETFL, 0), 0);
			int v = serve_one(a, &k);
			ck_assert_int_eq(fcntl(k.fd, F_SETFL, O_NONBLOCK), 0);
			if (v == 1) {
				noted = 1;
				break;
			}
		}
		ck_assert_msg(n != 0, "the reader died");
	}
	ck_assert_int_eq(fcntl(k.fd, F_SETFL, 0), 0);
	go(&k);
	finish(a, &k);
	/* Every lookup of "churn/b" was held and released once (the child dropped each). */
	ck_assert_int_gt(k.holds, 0);
	ck_assert_int_eq(k.releases, k.holds);
	ck_assert_int_eq(tn__arena_reclaim_if(a, k.slot, k.state, NULL), 1);
	tn_arena_unpublish(a, "churn/a");
	ck_assert_tn_ok(tn_arena_unpublish(a, "churn/b"));
	ck_assert_uint_eq(stats(a).free_bytes, free0);
	assert_clean(a);
	tn_arena_unref(a);
}
END_TEST

static Suite *remote_suite(void)
{
	Suite *s = suite_create("remote");
	TCase *tc = tcase_create("remote");
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ro_lookup_and_refusals);
	tcase_add_test(tc, test_ro_hold_keeps_alive);
	tcase_add_test(tc, test_rw_attach_slot);
	tcase_add_test(tc, test_attach_slot_refusals);
	tcase_add_test(tc, test_reclaim_if);
	tcase_add_test(tc, test_assign_all_slots);
	tcase_add_test(tc, test_hold_for_rules);
	tcase_add_loop_test(tc, test_daemon_killed, 0, 4);
	tcase_add_test(tc, test_ro_readers_under_churn);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(remote_suite)
