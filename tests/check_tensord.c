// SPDX-License-Identifier: MIT
/*
 * tensord(8) end to end, with real processes: every test starts the built daemon
 * (tensord/tensord) on a private socket in a mkdtemp() folder with its arenas in a folder of
 * its own under /dev/shm, talks to it through the client library, tensorctl (exec'd) and raw
 * SOCK_SEQPACKET sockets, and stops it with SIGTERM at the end, checking that nothing is left
 * in /dev/shm. Clients are forked children, or this program re-executed as
 * "check_tensord --client SOCKET ARENA ID" for the kill chaos.
 *
 * Covered: arenas across processes (read-write and read-only mappings, grants, figures,
 * destroy), reclamation of killed clients' slots, kill chaos with a daemon restart in the
 * middle, recovery after SIGKILL, access control across users (root only), startup refusals,
 * protocol robustness (malformed and random messages, 1,000 clients at once, memory after
 * 1,000 connections) and descriptor use under a low RLIMIT_NOFILE. LOAD and SAVE are left to
 * the loader's own tests.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "tensord_testutil.h"
#include "prom_parse.h"

static const char *self_exe; /* re-executed as a chaos client */
static struct tnd_cuda_export fake_export(const char *name, unsigned mode);

/* ---- end to end --------------------------------------------------------------------------------- */

/* A writer process: publishes p<id> (1000 values from id * 10000), checks the earlier
 * writers' tensors, reports, then waits to be told to check once more and exit. */
static int e2e_writer(int id, int ready, int go)
{
	tn_tensord *c;
	tn_arena *a;
	char name[16];
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_open(c, "e2e", 0, &a) == 0);
	tn_tensord_close(c); /* the arena keeps the connection */
	snprintf(name, sizeof(name), "p%d", id);
	EXPECT(publish_i32(a, name, 1000, id * 10000) == 0);
	for (int j = 0; j < id; j++) {
		snprintf(name, sizeof(name), "p%d", j);
		EXPECT(check_i32(a, name, 1000, j * 10000) == 0);
	}
	char b = 1;
	EXPECT(write(ready, &b, 1) == 1);
	wait_byte(go);
	for (int j = 0; j < 3; j++) {
		snprintf(name, sizeof(name), "p%d", j);
		EXPECT(check_i32(a, name, 1000, j * 10000) == 0);
	}
	tn_arena_unref(a);
	return 0;
}

START_TEST(test_end_to_end)
{
	daemon_setup();
	tn_tensord *c = conn();
	tn_tensord_status st;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_int_eq(st.pid, D.pid);
	ck_assert_uint_eq(st.arenas, 0);
	ck_assert_uint_eq(st.peer_uid, geteuid());
	ck_assert_uint_eq(st.version, TND_VERSION);
	ck_assert_str_eq(st.arena_dir, D.arena_dir);

	make_arena(c, "e2e", 16 << 20, 0, 0);
	ck_assert_tn_error_has(tn_tensord_arena_create(c, "e2e", NULL), TN_EEXIST, "exists");
	ck_assert_tn_error_has(tn_tensord_arena_create(c, "-bad", NULL), TN_EINVAL, "bad arena");
	ck_assert_tn_error_has(tn_tensord_arena_stat(c, "nosuch", &(tn_tensord_arena_info){ 0 }),
			       TN_ENOENT, "no arena");
	tn_tensord_arena_info info = arena_stat(c, "e2e");
	ck_assert_str_eq(info.name, "e2e");
	ck_assert_uint_eq(info.owner_uid, geteuid());
	ck_assert_uint_eq(info.owner_gid, getegid());
	ck_assert_uint_eq(info.mode, 0);
	ck_assert_uint_eq(info.stats.size, 16 << 20);
	ck_assert_uint_eq(info.stats.clients, 1); /* the daemon */
	ck_assert_uint_eq(info.stats.names, 0);
	ck_assert_uint_eq(info.stats.used_bytes + info.stats.free_bytes, info.stats.heap_bytes);
	uint64_t free0 = info.stats.free_bytes;

	/* Three writers, in turn: each sees what the earlier ones published. */
	int ready[2], go[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t w[3];
	for (int i = 0; i < 3; i++) {
		w[i] = fork_child();
		ck_assert_int_ge(w[i], 0);
		if (w[i] == 0)
			_exit(e2e_writer(i, ready[1], go[0]));
		get_byte(ready[0]);
	}

	/* A read-only opener sees the values and can write nothing. */
	tn_arena *ro;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "e2e", TN_TENSORD_READ_ONLY, &ro));
	for (int i = 0; i < 3; i++) {
		char name[8];
		snprintf(name, sizeof(name), "p%d", i);
		ck_assert_int_eq(check_i32(ro, name, 1000, i * 10000), 0);
	}
	tn_tensor *t;
	ck_assert_tn_ok(tn_arena_lookup(ro, "p1", &t, NULL));
	ck_assert(write_faults(tn_tensor_data(t)));
	void *p;
	ck_assert_tn_error_has(tn_arena_alloc(ro, 64, &p), TN_EPERM, "read-only");
	ck_assert_tn_error_has(tn_arena_publish(ro, "x", t, 0, NULL), TN_EPERM, "read-only");
	ck_assert_tn_error_has(tn_arena_unpublish(ro, "p0"), TN_EPERM, "read-only");
	tn_tensor_unref(t);

	info = arena_stat(c, "e2e");
	ck_assert_uint_eq(info.stats.clients, 5);
	ck_assert_uint_eq(info.stats.names, 3);
	ck_assert_uint_lt(info.stats.free_bytes, free0 - 3 * 4000);
	tn_tensord_arena_info *list;
	size_t n;
	ck_assert_tn_ok(tn_tensord_arena_list(c, &list, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(list[0].name, "e2e");
	ck_assert_uint_eq(list[0].stats.names, 3);
	free(list);
	tn_tensord_client *cl;
	ck_assert_tn_ok(tn_tensord_clients(c, &cl, &n));
	int writers_seen = 0;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 3; k++)
			if (cl[i].pid == w[k] && cl[i].narenas == 1 &&
			    !strcmp(cl[i].program, "check_tensord"))
				writers_seen++;
	ck_assert_int_eq(writers_seen, 3);
	free(cl);

	/* Destroy is refused while others are attached. */
	ck_assert_tn_error_has(tn_tensord_arena_destroy(c, "e2e", 0), TN_EBUSY, "attached");

	/* Grants: add, change, revoke. */
	tn_tensord_grant g = { TN_TENSORD_GRANT_USER, 12345, TN_TENSORD_ACCESS_READ };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "e2e", &g));
	info = arena_stat(c, "e2e");
	ck_assert_uint_eq(info.ngrants, 1);
	ck_assert_uint_eq(info.grants[0].id, 12345);
	ck_assert_int_eq(info.grants[0].access, TN_TENSORD_ACCESS_READ);
	g.access = TN_TENSORD_ACCESS_READ_WRITE;
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "e2e", &g));
	g = (tn_tensord_grant){ TN_TENSORD_GRANT_GROUP, 777, TN_TENSORD_ACCESS_READ };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "e2e", &g));
	info = arena_stat(c, "e2e");
	ck_assert_uint_eq(info.ngrants, 2);
	ck_assert_int_eq(info.grants[0].access, TN_TENSORD_ACCESS_READ_WRITE);
	ck_assert_int_eq(info.grants[1].kind, TN_TENSORD_GRANT_GROUP);
	g.access = TN_TENSORD_ACCESS_NONE;
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "e2e", &g));
	ck_assert_tn_error_has(tn_tensord_arena_grant(c, "e2e", &g), TN_ENOENT, "no grant");
	g = (tn_tensord_grant){ TN_TENSORD_GRANT_USER, 12345, TN_TENSORD_ACCESS_NONE };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "e2e", &g));
	ck_assert_uint_eq(arena_stat(c, "e2e").ngrants, 0);

	/* tensorctl: exit codes and JSON. */
	char out[65536];
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "--json", "status", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"pid\": "));
	ck_assert_ptr_nonnull(strstr(out, "\"protocol_errors\": "));
	ck_assert_ptr_nonnull(strstr(out, "\"arenas\": 1"));
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "arena", "list",
								       NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"e2e\""));
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "arena", "stat",
								       "e2e", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"names\": 3"));
	ck_assert_ptr_nonnull(strstr(out, "\"clients\": 5"));
	ck_assert_ptr_nonnull(strstr(out, "\"grants\": []"));
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "ls", "e2e", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"p0\""));
	ck_assert_ptr_nonnull(strstr(out, "\"p2\""));
	ck_assert_ptr_nonnull(strstr(out, "\"dtype\": \"int32\""));
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "fsck", "e2e",
								       NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"problems\": 0"));
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "clients", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"program\": "));
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
								       "stat", "nosuch", NULL }),
			 4);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
								       "destroy", "e2e", NULL }),
			 1);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "frobnicate", NULL }),
			 2);
	char nowhere[160];
	snprintf(nowhere, sizeof(nowhere), "%s/nothing-here", D.dir);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", nowhere,
								       "status", NULL }),
			 3);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "arena", "create",
								       "ctl", "--size", "4M", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"created\": \"ctl\""));
	ck_assert_uint_eq(arena_stat(c, "ctl").stats.size, 4 << 20);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
								       "--json", "arena", "destroy",
								       "ctl", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "\"destroyed\": \"ctl\""));

	/* The writers check once more and leave; their slots go, the names stay. */
	for (int i = 0; i < 3; i++)
		put_byte(go[1]);
	for (int i = 0; i < 3; i++)
		ck_assert_child_ok(w[i]);
	wait_clients(c, "e2e", 2, 2000);
	tn_arena_unref(ro);
	wait_clients(c, "e2e", 1, 2000);
	info = arena_stat(c, "e2e");
	ck_assert_uint_eq(info.stats.names, 3);

	/* A holder keeps the arena busy; FORCE destroys it anyway, and its mapping lives on. */
	int held[2];
	ck_assert_int_eq(pipe(held), 0);
	pid_t h = fork_child();
	ck_assert_int_ge(h, 0);
	if (h == 0) {
		tn_tensord *hc;
		tn_arena *a;
		EXPECT(tn_tensord_connect(D.sock, &hc) == 0);
		EXPECT(tn_tensord_arena_open(hc, "e2e", 0, &a) == 0);
		char b = 1;
		EXPECT(write(ready[1], &b, 1) == 1);
		wait_byte(held[0]);
		EXPECT(check_i32(a, "p2", 1000, 20000) == 0);
		EXPECT(publish_i32(a, "after", 10, 5) == 0);
		EXPECT(check_i32(a, "after", 10, 5) == 0);
		tn_arena_unref(a);
		tn_tensord_close(hc);
		_exit(0);
	}
	get_byte(ready[0]);
	ck_assert_tn_error_has(tn_tensord_arena_destroy(c, "e2e", 0), TN_EBUSY, "--force");
	/* e2e.arena, e2e.meta, and the daemon's records of its slots and seals */
	ck_assert_int_eq(count_files(D.arena_dir), 4);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "e2e", TN_TENSORD_FORCE));
	ck_assert_int_eq(count_files(D.arena_dir), 0);
	put_byte(held[1]);
	ck_assert_child_ok(h);
	ck_assert_tn_error(tn_tensord_arena_stat(c, "e2e", &info), TN_ENOENT, "no arena \"e2e\"");
	ck_assert_tn_ok(tn_tensord_arena_list(c, &list, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(list);
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_uint_eq(st.arenas, 0);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- reclamation --------------------------------------------------------------------------------- */

START_TEST(test_reclaim_killed_client)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "rec", 8 << 20, 0, 0);
	tn_tensord_arena_info before = arena_stat(c, "rec");
	tn_tensord_status st0;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st0));

	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *cc;
		tn_arena *a;
		void *raw[16];
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, "rec", 0, &a) == 0);
		for (int i = 0; i < 16; i++)
			EXPECT(tn_arena_alloc(a, 1000 + 4096 * (size_t)i, &raw[i]) == 0);
		EXPECT(tn_arena_free(a, raw[3]) == 0);
		EXPECT(publish_i32(a, "kept", 5000, 7) == 0);
		EXPECT(publish_i32(a, "gone", 300, 1) == 0);
		EXPECT(tn_arena_unpublish(a, "gone") == 0);
		tn_tensor *t, *t2;
		EXPECT(tn_arena_lookup(a, "kept", &t, NULL) == 0);
		EXPECT(tn_arena_lookup(a, "kept", &t2, NULL) == 0);
		EXPECT(tn_arena_use(a) == 0);
		tn_tensor *z;
		EXPECT(tn_zeros(1, (int64_t[]){ 100000 }, TN_FLOAT32, TN_CPU, &z) == 0);
		char b = 1;
		EXPECT(write(ready[1], &b, 1) == 1);
		pause();
		_exit(0);
	}
	get_byte(ready[0]);
	tn_tensord_arena_info mid = arena_stat(c, "rec");
	ck_assert_uint_eq(mid.stats.clients, 2);
	ck_assert_uint_gt(before.stats.free_bytes - mid.stats.free_bytes, 16 * 1000 + 400000);

	uint64_t t0 = now_ms();
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	/* Not reaped on purpose at first: a zombie counts as gone. */
	uint64_t ms = wait_clients(c, "rec", 1, 3000);
	uint64_t took = now_ms() - t0;
	ck_assert_msg(took < 1000, "the killed client's slot was reclaimed after %llu ms",
		      (unsigned long long)took);
	(void)ms;
	int stw = child_status(pid);
	ck_assert(WIFSIGNALED(stw) && WTERMSIG(stw) == SIGKILL);

	tn_tensord_arena_info after = arena_stat(c, "rec");
	ck_assert_uint_eq(after.stats.names, 1);
	ck_assert_uint_eq(after.stats.blocks, 1); /* "kept" only */
	ck_assert_uint_eq(after.stats.reclaimed_slots, before.stats.reclaimed_slots + 1);
	tn_tensord_status st;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_uint_eq(st.reclaimed_slots, st0.reclaimed_slots + 1);

	/* What stays is exactly the published tensor's block. */
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "rec", 0, &a));
	ck_assert_int_eq(check_i32(a, "kept", 5000, 7), 0);
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "kept", &e));
	ck_assert_uint_ge(before.stats.free_bytes - after.stats.free_bytes, e.block_bytes);
	ck_assert_uint_le(before.stats.free_bytes - after.stats.free_bytes, e.block_bytes + 4096);
	ck_assert_tn_ok(tn_arena_unpublish(a, "kept"));
	tn_arena_unref(a);
	wait_clients(c, "rec", 1, 2000);
	after = arena_stat(c, "rec");
	ck_assert_uint_eq(after.stats.free_bytes, before.stats.free_bytes);
	ck_assert_uint_eq(after.stats.blocks, 0);
	tn_arena_fsck_report rep;
	ck_assert_tn_ok(tn_tensord_fsck(c, "rec", 0, &rep));
	ck_assert_msg(rep.problems == 0, "fsck: %s", rep.first_problem);
	/* A .npy load needs a name: refused by the library, the connection stays up. */
	int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(nfd, 0);
	ck_assert_tn_error_has(tn_tensord_load(c, "rec", nfd, TN_TENSORD_FORMAT_NPY, "", 0, NULL, NULL,
					   NULL),
			   TN_EINVAL, "cannot be empty");
	close(nfd);
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_uint_eq(st.protocol_errors, st0.protocol_errors);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "rec", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* A process that closed its connection (exec closes it) and dies later: its slot goes within
 * a few polls of its death, not at the next periodic sweep. */
START_TEST(test_reclaim_after_late_death)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "late", 4 << 20, 0, 0);
	for (int round = 0; round < 3; round++) {
		pid_t pid = fork_child();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			tn_tensord *cc;
			tn_arena *a;
			EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
			EXPECT(tn_tensord_arena_open(cc, "late", 0, &a) == 0);
			EXPECT(publish_i32(a, "x", 10, 0) == 0);
			/* The socket closes at exec; the process lives on, then exits. */
			execl("/bin/sleep", "sleep", round == 1 ? "0.6" : "0.3", (char *)NULL);
			_exit(127);
		}
		wait_clients(c, "late", 2, 2000);
		ck_assert_child_ok(pid);
		uint64_t ms = wait_clients(c, "late", 1, 3000);
		ck_assert_msg(ms < 200, "round %d: the slot of a process that died after closing "
			      "its connection was reclaimed %llu ms after its death", round,
			      (unsigned long long)ms);
	}
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "late", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- kill chaos ------------------------------------------------------------------------------------ */

#define CHAOS_CLIENTS 4

/* "check_tensord --client SOCKET ARENA ID": publishes, reads the others' tensors and checks
 * them, unpublishes, and talks to the daemon every few steps (failing while it is down),
 * until killed. Exits nonzero only on wrong data or when it cannot start. */
static int chaos_client(const char *sock, const char *name, int id)
{
	tn_tensord *c = NULL;
	tn_arena *a = NULL;
	char key[32];
	unsigned seed = (unsigned)id * 7919u + (unsigned)getpid();
	for (int tries = 0; !a; tries++) {
		if (tries > 20000)
			return 10;
		if (!c && tn_tensord_connect(sock, &c))
			c = NULL;
		if (c && tn_tensord_arena_open(c, name, 0, &a))
			a = NULL;
		if (!a)
			usleep(500);
	}
	for (long step = 0;; step++) {
		int64_t n = 1 + rand_r(&seed) % 3000;
		snprintf(key, sizeof(key), "c%d/%ld", id, step % 8);
		if (publish_i32(a, key, n, id * 1000003) == 0) {
			/* published: n values from id * 1000003 */
		}
		snprintf(key, sizeof(key), "c%d/%d", rand_r(&seed) % CHAOS_CLIENTS,
			 rand_r(&seed) % 8);
		tn_tensor *x;
		if (tn_arena_lookup(a, key, &x, NULL) == 0) {
			const int32_t *d = tn_tensor_data(x);
			int owner = key[1] - '0';
			for (int64_t i = 0; i < tn_tensor_numel(x); i += 37)
				if (d[i] != owner * 1000003 + (int32_t)i)
					return 20;
			tn_tensor_unref(x);
		}
		if (rand_r(&seed) % 4 == 0) {
			snprintf(key, sizeof(key), "c%d/%d", id, rand_r(&seed) % 8);
			tn_arena_unpublish(a, key);
		}
		if (step % 16 == 0) {
			tn_tensord_status st;
			int r = tn_tensord_status_get(c, &st);
			if (r && r != TN_ENOTCONN && r != TN_ECONNREFUSED && r != TN_ENOENT) {
				fprintf(stderr, "chaos client %d: status: %d %s\n", id, r,
					tn_last_error());
				return 30;
			}
		}
	}
}

static pid_t spawn_chaos_client(int id)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char ids[8];
		snprintf(ids, sizeof(ids), "%d", id);
		execl(self_exe, self_exe, "--client", D.sock, "chaos", ids, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Wait until every process of @pids is attached to @a (it opened the arena). */
static void wait_attached(tn_arena *a, const pid_t *pids, int n)
{
	tn_arena_client cl[TN_ARENA_MAX_CLIENTS];
	uint64_t t0 = now_ms();
	for (;;) {
		int found = 0, count = tn_arena_clients(a, cl, TN_ARENA_MAX_CLIENTS);
		ck_assert_int_ge(count, 0);
		for (int i = 0; i < n; i++)
			for (int j = 0; j < count && j < TN_ARENA_MAX_CLIENTS; j++)
				if (cl[j].pid == pids[i] && cl[j].alive) {
					found++;
					break;
				}
		if (found == n)
			return;
		for (int i = 0; i < n; i++) {
			int st;
			ck_assert_msg(waitpid(pids[i], &st, WNOHANG) == 0,
				      "client %d exited with 0x%x before attaching", i, st);
		}
		ck_assert_msg(now_ms() - t0 < 20000, "clients did not attach within 20 s");
		usleep(200);
	}
}

/* The live clients (pids) all appear in the daemon's client list with the arena open. Each
 * re-registers on its next call to the daemon (a status every 16 steps of its loop); under
 * distcheck's parallel load one took more than 10 s once, so the window is 30 s, and a miss
 * names the clients that did not come back. */
static void wait_registered(tn_tensord *c, const pid_t *pids, int n)
{
	uint64_t t0 = now_ms();
	for (;;) {
		tn_tensord_client *cl;
		size_t count;
		ck_assert_tn_ok(tn_tensord_clients(c, &cl, &count));
		int found = 0;
		char missing[256] = "";
		for (int i = 0; i < n; i++) {
			bool here = false;
			for (size_t j = 0; j < count && !here; j++)
				here = cl[j].pid == pids[i] && cl[j].narenas >= 1;
			if (here) {
				found++;
			} else {
				size_t used = strlen(missing);
				snprintf(missing + used, sizeof(missing) - used, " %d", (int)pids[i]);
			}
		}
		free(cl);
		if (found == n)
			return;
		ck_assert_msg(now_ms() - t0 < 30000, "%d of %d clients re-registered in 30 s "
			      "(not pid%s)", found, n, missing);
		usleep(1000);
	}
}

START_TEST(test_kill_chaos)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "chaos", 64 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "chaos", 0, &a));
	uint64_t start = arena_stat(c, "chaos").stats.free_bytes;
	unsigned seed = 4242;
	int kills = 0, rounds = 120;
	pid_t w[CHAOS_CLIENTS] = { 0 };
	uint64_t instance0;
	{
		tn_tensord_status st;
		ck_assert_tn_ok(tn_tensord_status_get(c, &st));
		instance0 = st.instance;
	}
	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < CHAOS_CLIENTS; i++)
			if (!w[i])
				w[i] = spawn_chaos_client(i);
		wait_attached(a, w, CHAOS_CLIENTS);
		sleep_ms(rand_r(&seed) % 8);
		if (round == rounds / 2) {
			/* The daemon dies with clients mid-way; they work on, and re-register
			 * with the next one on their next call. */
			daemon_kill9();
			sleep_ms(20);
			for (int i = 0; i < CHAOS_CLIENTS; i++) {
				int st;
				ck_assert_msg(waitpid(w[i], &st, WNOHANG) == 0,
					      "client %d died with the daemon: 0x%x", i, st);
			}
			daemon_start();
			tn_tensord_status st;
			ck_assert_tn_ok(tn_tensord_status_get(c, &st));
			ck_assert_uint_ne(st.instance, instance0);
			ck_assert_uint_eq(st.arenas, 1);
			wait_registered(c, w, CHAOS_CLIENTS);
		}
		int victim = (int)(rand_r(&seed) % CHAOS_CLIENTS);
		ck_assert_int_eq(kill(w[victim], SIGKILL), 0);
		int st = child_status(w[victim]);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
			      "client exited with %d before being killed", WEXITSTATUS(st));
		w[victim] = 0;
		kills++;
	}
	for (int i = 0; i < CHAOS_CLIENTS; i++)
		if (w[i]) {
			kill(w[i], SIGKILL);
			int st = child_status(w[i]);
			ck_assert_msg(WIFSIGNALED(st), "client exited with %d", WEXITSTATUS(st));
			kills++;
		}
	/* The daemon and this process remain attached. */
	wait_clients(c, "chaos", 2, 3000);
	tn_arena_fsck_report rep;
	ck_assert_tn_ok(tn_tensord_fsck(c, "chaos", 0, &rep));
	ck_assert_msg(rep.problems == 0, "fsck after the chaos: %llu problems: %s",
		      (unsigned long long)rep.problems, rep.first_problem);
	tn_arena_entry *e;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, NULL, &e, &n));
	ck_assert_uint_eq(n, arena_stat(c, "chaos").stats.names);
	for (size_t i = 0; i < n; i++)
		ck_assert_tn_ok(tn_arena_unpublish(a, e[i].name));
	free(e);
	tn_tensord_arena_info info = arena_stat(c, "chaos");
	ck_assert_uint_eq(info.stats.free_bytes, start);
	ck_assert_uint_eq(info.stats.blocks, 0);
	ck_assert_uint_eq(info.stats.names, 0);
	ck_assert_uint_ge(info.stats.reclaimed_slots, (uint64_t)kills);
	ck_assert_tn_ok(tn_tensord_fsck(c, "chaos", 0, &rep));
	ck_assert_msg(rep.problems == 0, "fsck: %s", rep.first_problem);
	tn_arena_unref(a);
	wait_clients(c, "chaos", 1, 2000);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "chaos", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- restart --------------------------------------------------------------------------------------- */

START_TEST(test_restart_recovers)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "rst", 4 << 20, 0, 0040);
	make_arena(c, "rst2", 4 << 20, 0, 0);
	tn_tensord_grant g = { TN_TENSORD_GRANT_USER, 4321, TN_TENSORD_ACCESS_READ };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "rst", &g));
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "rst", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "r/a", 2000, 11));
	tn_tensord_status st0;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st0));

	int ready[2], go[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *cc;
		tn_arena *ca, *cr;
		tn_tensord_status s0, s1;
		char b = 1;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_status_get(cc, &s0) == 0);
		EXPECT(tn_tensord_arena_open(cc, "rst", 0, &ca) == 0);
		EXPECT(tn_tensord_arena_open(cc, "rst", TN_TENSORD_READ_ONLY, &cr) == 0);
		EXPECT(publish_i32(ca, "child/x", 100, 3) == 0);
		EXPECT(write(ready[1], &b, 1) == 1);
		wait_byte(go[0]); /* the daemon was killed and restarted meanwhile */
		EXPECT(check_i32(ca, "r/a", 2000, 11) == 0);
		EXPECT(publish_i32(ca, "child/y", 100, 4) == 0);
		EXPECT(tn_tensord_status_get(cc, &s1) == 0); /* reconnects, re-registers */
		EXPECT(s1.instance != s0.instance && s1.pid != s0.pid);
		/* The read-only handle's lookups go through the new daemon. */
		EXPECT(check_i32(cr, "child/y", 100, 4) == 0);
		EXPECT(check_i32(cr, "r/a", 2000, 11) == 0);
		EXPECT(write(ready[1], &b, 1) == 1);
		wait_byte(go[0]);
		tn_arena_unref(cr);
		tn_arena_unref(ca);
		tn_tensord_close(cc);
		_exit(0);
	}
	get_byte(ready[0]);
	ck_assert_uint_eq(arena_stat(c, "rst").stats.clients, 4); /* daemon, us, child twice */

	daemon_kill9();
	/* While it is down: the arena works, the daemon does not answer. */
	ck_assert_int_eq(check_i32(a, "r/a", 2000, 11), 0);
	tn_tensord_status st;
	int r = tn_tensord_status_get(c, &st);
	ck_assert_msg(r == TN_ENOTCONN || r == TN_ECONNREFUSED, "status with no daemon: %d %s", r,
		      tn_last_error());
	daemon_start();

	tn_tensord_arena_info *list;
	size_t n;
	ck_assert_tn_ok(tn_tensord_arena_list(c, &list, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert_int_lt(strcmp(list[0].name, list[1].name), 0); /* by name, restart or not */
	int found = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i].name, "rst")) {
			found++;
			ck_assert_uint_eq(list[i].mode, 0040);
			ck_assert_uint_eq(list[i].ngrants, 1);
			ck_assert_uint_eq(list[i].grants[0].id, 4321);
			ck_assert_uint_eq(list[i].stats.names, 2);
			ck_assert_uint_eq(list[i].stats.clients, 4);
		}
	ck_assert_int_eq(found, 1);
	free(list);
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_uint_ne(st.instance, st0.instance);
	ck_assert_uint_eq(st.arenas, 2);

	put_byte(go[1]);
	get_byte(ready[0]);
	pid_t pids[1] = { pid };
	wait_registered(c, pids, 1);
	tn_tensord_client *cl;
	ck_assert_tn_ok(tn_tensord_clients(c, &cl, &n));
	for (size_t i = 0; i < n; i++)
		if (cl[i].pid == pid)
			ck_assert_uint_eq(cl[i].narenas, 2);
	free(cl);
	put_byte(go[1]);
	ck_assert_child_ok(pid);
	ck_assert_int_eq(check_i32(a, "child/y", 100, 4), 0);
	wait_clients(c, "rst", 2, 2000);

	/* A killed client of the new daemon is reclaimed by it, slot and holds. */
	tn_arena_unref(a);
	wait_clients(c, "rst", 1, 2000);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "rst", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "rst2", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- access control ------------------------------------------------------------------------------ */


static int nobody_denied(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_arena *a;
	tn_tensord_arena_info info;
	tn_tensord_status st;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_status_get(c, &st) == 0 && st.peer_uid == NOBODY);
	EXPECT(tn_tensord_arena_stat(c, "sec", &info) == TN_ENOENT);
	EXPECT(tn_tensord_arena_open(c, "sec", 0, &a) == TN_ENOENT);
	EXPECT(tn_tensord_arena_open(c, "sec", TN_TENSORD_READ_ONLY, &a) == TN_ENOENT);
	EXPECT(tn_tensord_arena_destroy(c, "sec", TN_TENSORD_FORCE) == TN_ENOENT);
	EXPECT(tn_tensord_fsck(c, "sec", 0, NULL) == TN_ENOENT);
	tn_tensord_grant g = { TN_TENSORD_GRANT_USER, NOBODY, TN_TENSORD_ACCESS_READ_WRITE };
	EXPECT(tn_tensord_arena_grant(c, "sec", &g) == TN_ENOENT);
	EXPECT(tn_tensord_shutdown(c) == TN_EACCES);
	tn_tensord_arena_info *list;
	size_t n;
	EXPECT(tn_tensord_arena_list(c, &list, &n) == 0 && n == 0);
	/* The files are the daemon's alone. */
	char path[256];
	snprintf(path, sizeof(path), "%s/sec.arena", D.arena_dir);
	EXPECT(open(path, O_RDONLY) < 0 && errno == EACCES);
	tn_tensord_close(c);
	return 0;
}

static int nobody_read_only(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_arena *a;
	tn_tensord_arena_info info;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_stat(c, "sec", &info) == 0);
	EXPECT(info.stats.names >= 1 && info.owner_uid == 0);
	EXPECT(tn_tensord_arena_open(c, "sec", 0, &a) == 0); /* read-only all the same */
	EXPECT(check_i32(a, "t", 1000, 100) == 0);
	tn_tensor *t;
	EXPECT(tn_arena_lookup(a, "t", &t, NULL) == 0);
	void *p;
	EXPECT(tn_arena_alloc(a, 64, &p) == TN_EPERM);
	EXPECT(tn_arena_publish(a, "mine", t, 0, NULL) == TN_EPERM);
	pid_t w = fork_child();
	EXPECT(w >= 0);
	if (w == 0) {
		signal(SIGSEGV, SIG_DFL);
		*(volatile int32_t *)tn_tensor_data(t) = 1;
		_exit(0);
	}
	int st;
	EXPECT(waitpid(w, &st, 0) == w && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	tn_tensor_unref(t);
	EXPECT(tn_tensord_arena_destroy(c, "sec", 0) == TN_EACCES);
	tn_tensord_grant g = { TN_TENSORD_GRANT_USER, NOBODY, TN_TENSORD_ACCESS_READ_WRITE };
	EXPECT(tn_tensord_arena_grant(c, "sec", &g) == TN_EACCES);
	EXPECT(tn_tensord_fsck(c, "sec", 0, NULL) == TN_EACCES);
	tn_arena_unref(a);
	tn_tensord_close(c);
	return 0;
}

static int nobody_read_write(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_arena *a;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_open(c, "sec", 0, &a) == 0);
	EXPECT(publish_i32(a, "by-nobody", 50, 9) == 0);
	tn_arena_unref(a);
	tn_tensord_close(c);
	return 0;
}

/* Arena "modes" has mode 0004 (others read), "modew" 0006, "modeg" 0040 (group read). */
static int nobody_modes(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_arena *a;
	void *p;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_open(c, "modes", 0, &a) == 0);
	EXPECT(tn_arena_alloc(a, 64, &p) == TN_EPERM);
	EXPECT(check_i32(a, "m", 10, 1) == 0);
	tn_arena_unref(a);
	EXPECT(tn_tensord_arena_open(c, "modew", 0, &a) == 0);
	EXPECT(publish_i32(a, "w", 10, 2) == 0);
	tn_arena_unref(a);
	/* Not in the owner's group (root's): group bits do not apply. */
	EXPECT(tn_tensord_arena_open(c, "modeg", 0, &a) == TN_ENOENT);
	tn_tensord_close(c);
	return 0;
}

START_TEST(test_access_control)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_access_control: skipped (needs root)\n");
		return;
	}
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "sec", 4 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "sec", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "t", 1000, 100));

	ck_assert_child_ok(as_nobody(nobody_denied, 0));
	tn_tensord_grant g = { TN_TENSORD_GRANT_USER, NOBODY, TN_TENSORD_ACCESS_READ };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "sec", &g));
	ck_assert_child_ok(as_nobody(nobody_read_only, 0));
	g.access = TN_TENSORD_ACCESS_READ_WRITE;
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "sec", &g));
	ck_assert_child_ok(as_nobody(nobody_read_write, 0));
	ck_assert_int_eq(check_i32(a, "by-nobody", 50, 9), 0);
	/* Revoked: back to nothing. */
	g.access = TN_TENSORD_ACCESS_NONE;
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "sec", &g));
	ck_assert_child_ok(as_nobody(nobody_denied, 0));
	/* A group grant works as well. */
	g = (tn_tensord_grant){ TN_TENSORD_GRANT_GROUP, NOBODY, TN_TENSORD_ACCESS_READ };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "sec", &g));
	ck_assert_child_ok(as_nobody(nobody_read_only, 0));
	g.access = TN_TENSORD_ACCESS_NONE;
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "sec", &g));

	make_arena(c, "modes", 4 << 20, 0, 0004);
	make_arena(c, "modew", 4 << 20, 0, 0006);
	make_arena(c, "modeg", 4 << 20, 0, 0040);
	tn_arena *m;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "modes", 0, &m));
	ck_assert_tn_ok(publish_i32(m, "m", 10, 1));
	tn_arena_unref(m);
	ck_assert_child_ok(as_nobody(nobody_modes, 0));
	ck_assert_tn_ok(tn_tensord_arena_open(c, "modew", 0, &m));
	ck_assert_int_eq(check_i32(m, "w", 10, 2), 0);
	tn_arena_unref(m);

	tn_arena_unref(a);
	wait_clients(c, "sec", 1, 2000);
	wait_clients(c, "modew", 1, 2000);
	const char *names[] = { "sec", "modes", "modew", "modeg" };
	for (int i = 0; i < 4; i++)
		ck_assert_tn_ok(tn_tensord_arena_destroy(c, names[i], 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* A second daemon on the same socket, and a socket path too long: refused at start. */
START_TEST(test_startup_refusals)
{
	daemon_setup();
	char log2[160], out[4096];
	snprintf(log2, sizeof(log2), "%s/log2", D.dir);
	pid_t p2 = spawn_tensord(D.sock, log2, NULL);
	int st = child_status(p2);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "second tensord: 0x%x", st);
	int fd = open(log2, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, out, sizeof(out) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	out[n] = 0;
	ck_assert_msg(strstr(out, "another tensord"), "second tensord said: %s", out);
	/* The first still serves the socket. */
	tn_tensord *c = conn();
	tn_tensord_status s;
	ck_assert_tn_ok(tn_tensord_status_get(c, &s));
	ck_assert_int_eq(s.pid, D.pid);
	tn_tensord_close(c);

	char longsock[300];
	memset(longsock, 0, sizeof(longsock));
	snprintf(longsock, sizeof(longsock), "%s/", D.dir);
	memset(longsock + strlen(longsock), 'x', 150);
	char log3[160];
	snprintf(log3, sizeof(log3), "%s/log3", D.dir);
	p2 = spawn_tensord(longsock, log3, NULL);
	st = child_status(p2);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "long socket path: 0x%x", st);
	fd = open(log3, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, out, sizeof(out) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	out[n] = 0;
	ck_assert_msg(strstr(out, "socket"), "long socket path said: %s", out);
	ck_assert_int_ne(access(longsock, F_OK), 0);
	ck_assert_tn_error_has(tn_tensord_connect(longsock, &c), TN_ENAMETOOLONG, "socket");
	daemon_finish();
}
END_TEST


START_TEST(test_protocol_robustness)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "proto", 4 << 20, 0, 0);
	uint64_t errors0 = check_served().protocol_errors;
	ck_assert_uint_eq(errors0, 0);
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX + 2048];
	} m;
	int cases = 0, fd, nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(nul, 0);

	/* Truncated: the header says 32 bytes, 20 come. */
	fd = raw_connect();
	raw_hello(fd);
	build(&m, TND_OP_STATUS, NULL, 0, 2);
	raw_send(fd, &m, 20, -1, -1);
	expect_dropped(fd, "truncated");
	cases++;
	/* A body one byte short. */
	fd = raw_connect();
	raw_hello(fd);
	struct tnd_arena_ref ref = { .name = "proto" };
	build(&m, TND_OP_ARENA_STAT, &ref, sizeof(ref) - 1, 2);
	raw_send(fd, &m, m.h.len, -1, -1);
	expect_dropped(fd, "short body");
	cases++;
	/* Oversized: beyond the limit, and beyond the daemon's buffer. */
	for (int k = 0; k < 2; k++) {
		size_t len = k ? TND_MSG_MAX + 2048 : TND_MSG_MAX + 8;
		fd = raw_connect();
		raw_hello(fd);
		memset(&m, 0, sizeof(m));
		build(&m, TND_OP_STATUS, NULL, 0, 2);
		m.h.len = (uint32_t)len;
		raw_send(fd, &m, len, -1, -1);
		expect_dropped(fd, "oversized");
		cases++;
	}
	/* Wrong magic, wrong version, unknown operations, nonzero reserved, reply flags. */
	for (int k = 0; k < 7; k++) {
		fd = raw_connect();
		raw_hello(fd);
		build(&m, TND_OP_STATUS, NULL, 0, 2);
		switch (k) {
		case 0: m.h.magic = 0x31444e55; break;
		case 1: m.h.version = TND_VERSION + 1; break;
		case 2: m.h.op = 99; break;
		case 3: m.h.op = 0; break;
		case 4: m.h.reserved = 1; break;
		case 5: m.h.flags = TND_F_MORE; break;
		case 6: m.h.status = -5; break;
		}
		raw_send(fd, &m, sizeof(m.h), -1, -1);
		expect_dropped(fd, "bad header");
		cases++;
	}
	/* Bad names: empty, leading dot, a slash, unterminated. */
	const char *bad_names[] = { "", ".hidden", "a/b", "../proto", "-x" };
	for (int k = 0; k < 6; k++) {
		fd = raw_connect();
		raw_hello(fd);
		struct tnd_arena_open o = { 0 };
		if (k < 5)
			snprintf(o.name, sizeof(o.name), "%s", bad_names[k]);
		else
			memset(o.name, 'a', sizeof(o.name));
		build(&m, TND_OP_ARENA_OPEN, &o, sizeof(o), 2);
		raw_send(fd, &m, m.h.len, -1, -1);
		expect_dropped(fd, "bad name");
		cases++;
	}
	/* Descriptors where none is expected: with and without the flag, and two of them. */
	for (int k = 0; k < 3; k++) {
		fd = raw_connect();
		raw_hello(fd);
		build(&m, TND_OP_STATUS, NULL, 0, 2);
		if (k == 0)
			m.h.flags = TND_F_FD;
		raw_send(fd, &m, sizeof(m.h), nul, k == 2 ? nul : -1);
		expect_dropped(fd, "descriptor");
		cases++;
	}
	/* LOAD without its descriptor. */
	fd = raw_connect();
	raw_hello(fd);
	struct tnd_transfer tr = { .name = "proto", .format = TND_FORMAT_SAFETENSORS };
	build(&m, TND_OP_LOAD, &tr, sizeof(tr), 2);
	raw_send(fd, &m, m.h.len, -1, -1);
	expect_dropped(fd, "LOAD without a descriptor");
	cases++;
	/* A request before HELLO; a HELLO with no common version. */
	fd = raw_connect();
	build(&m, TND_OP_STATUS, NULL, 0, 1);
	raw_send(fd, &m, sizeof(m.h), -1, -1);
	expect_dropped(fd, "before HELLO");
	cases++;
	fd = raw_connect();
	struct tnd_hello hv = { .min_version = TND_VERSION + 1, .max_version = 5 };
	build(&m, TND_OP_HELLO, &hv, sizeof(hv), 1);
	raw_send(fd, &m, m.h.len, -1, -1);
	expect_dropped(fd, "HELLO version");
	cases++;
	/* A client of protocol version 1 is served in version 1, and refused the operations
	 * version 2 added (CUDA_*): they are malformed in its version. */
	fd = raw_connect();
	struct tnd_hello h1 = { .min_version = 1, .max_version = 1, .program = "v1" };
	build(&m, TND_OP_HELLO, &h1, sizeof(h1), 1);
	raw_send(fd, &m, m.h.len, -1, -1);
	ck_assert_int_eq(raw_recv(fd, &m, 10000),
			 sizeof(struct tnd_hdr) + sizeof(struct tnd_hello_reply));
	ck_assert_int_eq(m.h.status, 0);
	ck_assert_uint_eq(((struct tnd_hello_reply *)(&m.h + 1))->version, 1);
	build(&m, TND_OP_STATUS, NULL, 0, 2);
	m.h.version = 1;
	raw_send(fd, &m, m.h.len, -1, -1);
	ck_assert_int_eq(raw_recv(fd, &m, 10000), sizeof(struct tnd_hdr) + sizeof(struct tnd_status));
	ck_assert_uint_eq(m.h.version, 1);
	ck_assert_int_eq(m.h.status, 0);
	build(&m, TND_OP_STATUS, NULL, 0, 3); /* version 2 on a version-1 connection */
	raw_send(fd, &m, m.h.len, -1, -1);
	expect_dropped(fd, "version 2 message on a version 1 connection");
	cases++;
	fd = raw_connect();
	build(&m, TND_OP_HELLO, &h1, sizeof(h1), 1);
	raw_send(fd, &m, m.h.len, -1, -1);
	ck_assert_int_gt(raw_recv(fd, &m, 10000), 0);
	build(&m, TND_OP_CUDA_LIST, NULL, 0, 2);
	m.h.version = 1;
	raw_send(fd, &m, m.h.len, -1, -1);
	expect_dropped(fd, "CUDA_LIST in version 1");
	cases++;
	/* A CUDA export whose view lies outside its storage. */
	fd = raw_connect();
	raw_hello(fd);
	struct tnd_cuda_export bad = fake_export("bad", 0);
	bad.storage_offset = 100;
	build(&m, TND_OP_CUDA_EXPORT, &bad, sizeof(bad), 2);
	raw_send(fd, &m, m.h.len, -1, -1);
	expect_dropped(fd, "CUDA_EXPORT extent");
	cases++;
	ck_assert_uint_eq(check_served().protocol_errors, errors0 + (uint64_t)cases);

	/* Random and mutated messages from a seeded generator: each invalid one drops its
	 * connection (valid ones are not sent: a valid SHUTDOWN would stop the daemon). */
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct tnd_hello hello = { .min_version = 1, .max_version = 1 };
	struct tnd_arena_create cr = { .name = "fuzzed", .size = 4 << 20 };
	struct tnd_arena_grant gr = { .name = "proto", .grant = { 1, 5, 1, 0 } };
	struct tnd_hold hold = { .name = "proto", .tensor = "x" };
	struct tnd_release rel = { .name = "proto", .block = 64 };
	struct tnd_detach det = { .name = "proto", .slot = 3 };
	struct tnd_reattach rea = { .name = "proto", .slot = 3 };
	struct {
		unsigned op;
		const void *body;
		size_t len;
	} tpl[] = {
		{ TND_OP_HELLO, &hello, sizeof(hello) },   { TND_OP_STATUS, NULL, 0 },
		{ TND_OP_ARENA_CREATE, &cr, sizeof(cr) },  { TND_OP_ARENA_STAT, &ref, sizeof(ref) },
		{ TND_OP_ARENA_GRANT, &gr, sizeof(gr) },   { TND_OP_HOLD, &hold, sizeof(hold) },
		{ TND_OP_RELEASE, &rel, sizeof(rel) },     { TND_OP_DETACH, &det, sizeof(det) },
		{ TND_OP_REATTACH, &rea, sizeof(rea) },    { TND_OP_LOAD, &tr, sizeof(tr) },
		{ TND_OP_ARENA_DESTROY, &ref, sizeof(ref) }, { TND_OP_SHUTDOWN, NULL, 0 },
	};
	int sent = 0;
	for (int i = 0; sent < 3000; i++) {
		size_t len;
		memset(&m, 0, sizeof(m));
		if (xorshift(&seed) % 4 == 0) {
			len = 1 + xorshift(&seed) % 600;
			for (size_t k = 0; k < len; k++)
				m.b[k] = (unsigned char)xorshift(&seed);
		} else {
			int t = (int)(xorshift(&seed) % (sizeof(tpl) / sizeof(tpl[0])));
			build(&m, tpl[t].op, tpl[t].body, tpl[t].len, 2);
			len = m.h.len;
			for (int k = 1 + (int)(xorshift(&seed) % 4); k > 0; k--)
				m.b[xorshift(&seed) % len] ^= (unsigned char)(1u << xorshift(&seed) % 8);
			if (xorshift(&seed) % 8 == 0)
				len = xorshift(&seed) % (len + 64) + 1;
		}
		if (tnd_check_request(&m, len, false) == 0)
			continue;
		fd = raw_connect();
		if (i % 2)
			raw_hello(fd);
		raw_send(fd, &m, len, -1, -1);
		expect_dropped(fd, "random message");
		sent++;
		cases++;
		if (sent % 250 == 0)
			check_served();
	}
	tn_tensord_status st = check_served();
	ck_assert_uint_eq(st.protocol_errors, errors0 + (uint64_t)cases);
	ck_assert_uint_eq(st.arenas, 1);
	close(nul);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "proto", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

START_TEST(test_many_clients)
{
	enum { N = 1000 };
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < N + 100) {
		rl.rlim_cur = rl.rlim_max < N + 200 ? rl.rlim_max : N + 200;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	ck_assert_uint_ge(rl.rlim_cur, N + 100);
	daemon_setup();
	static int fds[N];
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	/* 1,000 connections at once: all connect, then all say hello, then all ask STATUS. */
	for (int i = 0; i < N; i++)
		fds[i] = raw_connect();
	struct tnd_hello h = { .min_version = 1, .max_version = 1, .program = "many" };
	build(&m, TND_OP_HELLO, &h, sizeof(h), 1);
	for (int i = 0; i < N; i++)
		raw_send(fds[i], &m, m.h.len, -1, -1);
	for (int i = 0; i < N; i++) {
		ssize_t n = raw_recv(fds[i], &m, 20000);
		ck_assert_msg(n > 0, "client %d: no HELLO reply", i);
		ck_assert_int_eq(tnd_check_reply(&m, (size_t)n, TND_OP_HELLO, 1, false), 0);
		ck_assert_int_eq(m.h.status, 0);
	}
	build(&m, TND_OP_STATUS, NULL, 0, 2);
	for (int i = 0; i < N; i++)
		raw_send(fds[i], &m, m.h.len, -1, -1);
	uint32_t max_clients = 0;
	for (int i = 0; i < N; i++) {
		union {
			struct tnd_hdr h;
			unsigned char b[TND_MSG_MAX];
		} r;
		ssize_t n = raw_recv(fds[i], &r, 20000);
		ck_assert_msg(n > 0, "client %d: no STATUS reply", i);
		ck_assert_int_eq(tnd_check_reply(&r, (size_t)n, TND_OP_STATUS, 2, false), 0);
		const struct tnd_status *s = (const void *)(r.b + sizeof(r.h));
		if (s->clients > max_clients)
			max_clients = s->clients;
	}
	ck_assert_uint_ge(max_clients, N);
	for (int i = 0; i < N; i++)
		close(fds[i]);

	/* The daemon's memory after 1,000 connect/disconnect cycles is what it was after 100. */
	long rss100 = 0;
	for (int i = 0; i < 1000; i++) {
		tn_tensord *c = conn();
		tn_tensord_status st;
		ck_assert_tn_ok(tn_tensord_status_get(c, &st));
		tn_tensord_close(c);
		if (i == 99)
			rss100 = daemon_rss_kb();
	}
	tn_tensord_status st = check_served();
	ck_assert_uint_le(st.clients, 2);
	long rss1000 = daemon_rss_kb();
#ifdef TN_SANITIZED
	/* The sanitizers' quarantine and shadow memory grow with every allocation. */
	(void)rss1000;
	(void)rss100;
#else
	ck_assert_msg(rss1000 - rss100 < 256, "tensord's VmRSS grew from %ld kB to %ld kB", rss100,
		      rss1000);
#endif
	daemon_finish();
}
END_TEST

/* ---- limits --------------------------------------------------------------------------------------- */

enum { LIMIT_TENSORS = 10000 };

/* In a child with RLIMIT_NOFILE 256: the producer publishes LIMIT_TENSORS tensors of 4 values
 * (i*4 .. i*4+3); the consumer holds all of them at once and sums them. The descriptor count
 * must not move. */
static int limits_child(int producer)
{
	struct rlimit rl = { 256, 256 };
	EXPECT(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	tn_tensord *c;
	tn_arena *a;
	char name[32];
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_arena_open(c, "lim", 0, &a) == 0);
	int fds0 = count_fds();
	EXPECT(fds0 > 0 && fds0 < 64);
	if (producer) {
		for (int i = 0; i < LIMIT_TENSORS; i++) {
			snprintf(name, sizeof(name), "t/%05d", i);
			EXPECT(publish_i32(a, name, 4, i * 4) == 0);
		}
		EXPECT(count_fds() == fds0);
	} else {
		static tn_tensor *held[LIMIT_TENSORS];
		int64_t sum = 0;
		for (int i = 0; i < LIMIT_TENSORS; i++) {
			snprintf(name, sizeof(name), "t/%05d", i);
			EXPECT(tn_arena_lookup(a, name, &held[i], NULL) == 0);
			const int32_t *d = tn_tensor_data(held[i]);
			for (int k = 0; k < 4; k++)
				sum += d[k];
		}
		EXPECT(count_fds() == fds0);
		int64_t n = 4 * (int64_t)LIMIT_TENSORS;
		EXPECT(sum == n * (n - 1) / 2);
		for (int i = 0; i < LIMIT_TENSORS; i++)
			tn_tensor_unref(held[i]);
		EXPECT(count_fds() == fds0);
	}
	tn_arena_unref(a);
	tn_tensord_close(c);
	return 0;
}

START_TEST(test_limits_fds)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "lim", 32 << 20, 16384, 0);
	for (int producer = 1; producer >= 0; producer--) {
		pid_t pid = fork_child();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(limits_child(producer));
		ck_assert_child_ok(pid);
	}
	tn_tensord_arena_info info = arena_stat(c, "lim");
	ck_assert_uint_eq(info.stats.names, LIMIT_TENSORS);
	wait_clients(c, "lim", 1, 2000);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "lim", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- hostile read-write clients (review findings) ------------------------------------------------- */

/* Offset of the lock in the arena header: after the identity and geometry fields, 64-byte
 * aligned (shm/arena_internal.h, struct arena_header). */
enum { ARENA_LOCK_OFFSET = 320 };

/* The socket a client connects to by default: root's is the system daemon's; another user's
 * is its own daemon's where one listens, else the system daemon's where that one listens, else
 * its own path (the system's without XDG_RUNTIME_DIR). Checked as uid 65534 in a child. */
START_TEST(test_default_socket_path)
{
	char buf[128];
	bool sys = false;
	struct stat st;
	if (!stat(TN_TENSORD_SYSTEM_SOCKET, &st) && S_ISSOCK(st.st_mode))
		sys = true; /* a system daemon's socket on this machine */
	ck_assert_int_eq(unsetenv("TENSORD_SOCKET"), 0);
	if (geteuid() != 0) {
		/* Not root: only the user's own cases can be told apart here. */
		return;
	}
	ck_assert_int_ge(tn_tensord_socket_path(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, TN_TENSORD_SYSTEM_SOCKET);
	ck_assert_int_eq(setenv("TENSORD_SOCKET", "/tmp/x/y.sock", 1), 0);
	ck_assert_int_ge(tn_tensord_socket_path(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/tmp/x/y.sock");
	ck_assert_int_eq(unsetenv("TENSORD_SOCKET"), 0);

	/* Two runtime directories a user can search: one empty, one with a listening socket. */
	char empty[] = "/tmp/check-xdg-XXXXXX", withsock[] = "/tmp/check-xdg-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(empty));
	ck_assert_ptr_nonnull(mkdtemp(withsock));
	ck_assert_int_eq(chmod(empty, 0755), 0);
	ck_assert_int_eq(chmod(withsock, 0755), 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/tensord.sock", withsock);
	int ls = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	ck_assert_int_ge(ls, 0);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	pid_t k = fork_child();
	ck_assert_int_ge(k, 0);
	if (k == 0) {
		char own[160], got[128];
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(10);
		/* Its own daemon listens: that one. */
		setenv("XDG_RUNTIME_DIR", withsock, 1);
		if (tn_tensord_socket_path(got, sizeof(got)) < 0 || strcmp(got, sa.sun_path))
			_exit(11);
		/* None of its own: the system daemon's if there is one, else its own path. */
		setenv("XDG_RUNTIME_DIR", empty, 1);
		snprintf(own, sizeof(own), "%s/tensord.sock", empty);
		if (tn_tensord_socket_path(got, sizeof(got)) < 0 ||
		    strcmp(got, sys ? TN_TENSORD_SYSTEM_SOCKET : own))
			_exit(12);
		/* No runtime directory (cron, a service): the system daemon's path. */
		unsetenv("XDG_RUNTIME_DIR");
		if (tn_tensord_socket_path(got, sizeof(got)) < 0 ||
		    strcmp(got, TN_TENSORD_SYSTEM_SOCKET))
			_exit(13);
		_exit(0);
	}
	ck_assert_int_eq(child_status(k), 0);
	close(ls);
	unlink(sa.sun_path);
	rmdir(withsock);
	rmdir(empty);
}
END_TEST

START_TEST(test_hostile_clients)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "victim", 8 << 20, 0, 0);
	make_arena(c, "other", 8 << 20, 0, 0);
	uint64_t free_other = arena_stat(c, "other").stats.free_bytes;

	/* 1. A client holds an arena's lock (stopped, or hostile): the daemon answers everyone
	 * else, and requests on that arena fail with TN_EBUSY instead of freezing the loop. */
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "victim", 0, &a));
	int afd = tn_arena_fd(a); /* a fork child's handle is not its own: take the fd now */
	ck_assert_int_ge(afd, 0);
	int go[2], done[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid_t holder = fork_child();
	ck_assert_int_ge(holder, 0);
	if (holder == 0) {
		void *base = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
		if (base == MAP_FAILED)
			_exit(1);
		pthread_mutex_t *m = (pthread_mutex_t *)((char *)base + ARENA_LOCK_OFFSET);
		if (pthread_mutex_lock(m))
			_exit(2);
		put_byte(go[1]);
		get_byte(done[0]);
		sleep_ms(300);
		pthread_mutex_unlock(m);
		_exit(0);
	}
	get_byte(go[0]);
	uint64_t t0 = now_ms();
	tn_tensord *c2 = conn();
	tn_tensord_status st;
	ck_assert_tn_ok(tn_tensord_status_get(c2, &st));
	ck_assert_uint_eq(arena_stat(c2, "other").stats.free_bytes, free_other);
	ck_assert_msg(now_ms() - t0 < 3000, "the daemon took %llu ms with a lock held",
		      (unsigned long long)(now_ms() - t0));
	/* The client retries an open the daemon refuses while the lock is held, for as long as
	 * a local caller would wait for the lock (TN_ARENA_LOCK_TIMEOUT_MS), then reports it. */
	tn_arena *b;
	ck_assert_int_eq(setenv("TN_ARENA_LOCK_TIMEOUT_MS", "400", 1), 0);
	t0 = now_ms();
	ck_assert_tn_error_has(tn_tensord_arena_open(c2, "victim", 0, &b), TN_EBUSY, "is locked by pid");
	uint64_t waited = now_ms() - t0;
	ck_assert_msg(waited >= 390 && waited < 3000, "the open gave up after %llu ms",
		      (unsigned long long)waited);
	ck_assert_int_eq(unsetenv("TN_ARENA_LOCK_TIMEOUT_MS"), 0);
	/* A lock let go of while the client retries (300 ms after this byte): the open waits
	 * for it and succeeds. */
	put_byte(done[1]);
	t0 = now_ms();
	ck_assert_tn_ok(tn_tensord_arena_open(c2, "victim", 0, &b));
	ck_assert_msg(now_ms() - t0 >= 250, "the open did not wait for the lock (%llu ms)",
		      (unsigned long long)(now_ms() - t0));
	tn_arena_unref(b);
	ck_assert_int_eq(child_status(holder), 0);

	/* 2. A client shrinks the arena file (any writable descriptor can): the daemon survives,
	 * serves the other arenas, refuses this one with TN_EIO except its forced destruction. */
	tn_arena_unref(a);
	pid_t shrinker = fork_child();
	ck_assert_int_ge(shrinker, 0);
	if (shrinker == 0) {
		/* Its own handle is never touched again: the process just exits. */
		tn_tensord *cc;
		tn_arena *aa;
		if (tn_tensord_connect(D.sock, &cc) || tn_tensord_arena_open(cc, "victim", 0, &aa))
			_exit(1);
		_exit(ftruncate(tn_arena_fd(aa), 0) ? 2 : 0);
	}
	ck_assert_int_eq(child_status(shrinker), 0);
	sleep_ms(1500);   /* a reclamation sweep passes over every arena */
	ck_assert_tn_ok(tn_tensord_status_get(c2, &st));
	ck_assert_uint_eq(arena_stat(c2, "other").stats.free_bytes, free_other);
	tn_tensord_arena_info info;
	ck_assert_tn_error_has(tn_tensord_arena_stat(c2, "victim", &info), TN_EIO, "is damaged");
	ck_assert_tn_error_has(tn_tensord_arena_destroy(c2, "victim", 0), TN_EIO, "--force");
	ck_assert_tn_ok(tn_tensord_arena_destroy(c2, "victim", TN_TENSORD_FORCE));
	ck_assert_tn_error_has(tn_tensord_arena_stat(c2, "victim", &info), TN_ENOENT, "no arena");

	/* 3. A client that sends requests and never reads the replies: the daemon stops reading
	 * it, its memory stays bounded, and others are served. */
	long rss0 = daemon_rss_kb();
	int fd = raw_connect();
	raw_hello(fd);
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} m;
	build(&m, TND_OP_STATUS, NULL, 0, 7);
	int flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	int sent = 0;
	for (int i = 0; i < 200000; i++) {
		if (send(fd, &m, m.h.len, MSG_NOSIGNAL) < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			sleep_ms(1);
			if (send(fd, &m, m.h.len, MSG_NOSIGNAL) < 0)
				break;
		}
		sent++;
	}
	ck_assert_int_gt(sent, 100);
	ck_assert_tn_ok(tn_tensord_status_get(c2, &st));
	long rss1 = daemon_rss_kb();
#ifndef TN_SANITIZED
	ck_assert_msg(rss1 - rss0 < 16 * 1024, "tensord grew from %ld kB to %ld kB for %d unread "
		      "replies", rss0, rss1, sent);
#else
	(void)rss1;
#endif
	close(fd);

	/* 4. Two read-only handles of one arena on one connection: a hold taken through the
	 * second survives the first one's release. */
	ck_assert_tn_ok(tn_tensord_arena_open(c, "other", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "v", 1000, 7));
	tn_arena *r1, *r2;
	ck_assert_tn_ok(tn_tensord_arena_open(c2, "other", TN_TENSORD_READ_ONLY, &r1));
	ck_assert_tn_ok(tn_tensord_arena_open(c2, "other", TN_TENSORD_READ_ONLY, &r2));
	tn_tensor *t;
	ck_assert_tn_ok(tn_arena_lookup(r2, "v", &t, NULL));
	tn_arena_unref(r1);
	ck_assert_tn_ok(tn_arena_unpublish(a, "v"));
	/* Still held by r2's slot: not freed, values intact. */
	ck_assert_uint_lt(arena_stat(c, "other").stats.free_bytes, free_other);
	ck_assert_int_eq(((int32_t *)tn_tensor_data(t))[999], 7 + 999);
	tn_tensor_unref(t);
	tn_arena_unref(r2);
	tn_arena_unref(a);
	ck_assert_uint_eq(arena_stat(c, "other").stats.free_bytes, free_other);
	tn_arena_fsck_report rep;
	ck_assert_tn_ok(tn_tensord_fsck(c, "other", 0, &rep));
	ck_assert_uint_eq(rep.problems, 0);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "other", 0));
	tn_tensord_close(c2);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- load and save through the daemon ------------------------------------------------------------- */

static bool same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	ck_assert_ptr_nonnull(fa);
	ck_assert_ptr_nonnull(fb);
	int ca, cb;
	do {
		ca = fgetc(fa);
		cb = fgetc(fb);
	} while (ca == cb && ca != EOF);
	fclose(fa);
	fclose(fb);
	return ca == cb;
}

struct progress_seen {
	uint64_t calls, last_done, total;
	bool monotonic;
};

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
	struct progress_seen *p = ctx;
	if (p->calls && done < p->last_done)
		p->monotonic = false;
	p->calls++;
	p->last_done = done;
	p->total = total;
}

START_TEST(test_load_save)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "io", 64 << 20, 0, 0);
	char out[8192], file[256], file2[256], golden[512];
	/* .npy files numpy wrote (tests/golden/gen_formats.py): loaded through tensorctl and the
	 * daemon, saved back, byte for byte the same file. */
	static const char *const npy[] = { "f32", "f64", "i64", "bool", "u8", "i8", "i16",
					   "i32", "f16", "scalar", "fortran", "f64_4d", "empty" };
	for (size_t i = 0; i < sizeof(npy) / sizeof(npy[0]); i++) {
		snprintf(golden, sizeof(golden), "%s/%s.npy", TN_GOLDEN_FORMATS_DIR, npy[i]);
		snprintf(file, sizeof(file), "%s/%s.npy", D.dir, npy[i]);
		char name[64];
		snprintf(name, sizeof(name), "np/%s", npy[i]);
		const char *load[] = { "--socket", D.sock, "load", "io", golden, "--prefix", name, NULL };
		ck_assert_int_eq(tensorctl(out, sizeof(out), load), 0);
		const char *save[] = { "--socket", D.sock, "save", "io", file, name, NULL };
		ck_assert_int_eq(tensorctl(out, sizeof(out), save), 0);
		ck_assert_msg(same_file(file, golden), "%s.npy came back different", npy[i]);
		unlink(file);
	}
	/* A safetensors file: load, save, load the saved file under another prefix, save that:
	 * the two saved files are the same bytes, and every tensor has the same values. */
	snprintf(golden, sizeof(golden), "%s/mixed.safetensors", TN_GOLDEN_FORMATS_DIR);
	snprintf(file, sizeof(file), "%s/a.safetensors", D.dir);
	snprintf(file2, sizeof(file2), "%s/b.safetensors", D.dir);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "io", 0, &a));
	int fd = open(golden, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	struct progress_seen ps = { .monotonic = true };
	tn_tensord_transfer t;
	ck_assert_tn_ok(tn_tensord_load(c, "io", fd, TN_TENSORD_FORMAT_AUTO, "st1/", 0, on_progress,
					&ps, &t));
	close(fd);
	ck_assert_uint_eq(t.tensors, 12);
	ck_assert_msg(ps.calls >= 1 && ps.monotonic && ps.last_done == ps.total &&
			      ps.total == t.bytes,
		      "progress: %llu calls, last %llu of %llu, %llu bytes",
		      (unsigned long long)ps.calls, (unsigned long long)ps.last_done,
		      (unsigned long long)ps.total, (unsigned long long)t.bytes);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_tn_ok(tn_tensord_save(c, "io", fd, TN_TENSORD_FORMAT_SAFETENSORS, "st1/", 0, NULL,
					NULL, &t));
	close(fd);
	const char *load2[] = { "--socket", D.sock, "load", "io", file, "--prefix", "st2/", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), load2), 0);
	const char *save2[] = { "--socket", D.sock, "save", "io", file2, "st2/", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), save2), 0);
	ck_assert_msg(same_file(file, file2), "a saved safetensors file did not come back the same");
	tn_arena_entry *e;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, "st1/", &e, &n));
	ck_assert_uint_eq(n, 13); /* 12 tensors and the file's metadata, st1/__metadata__ */
	for (size_t i = 0; i < n; i++) {
		char other[300];
		snprintf(other, sizeof(other), "st2/%s", e[i].name + 4);
		tn_tensor *x, *y;
		ck_assert_tn_ok(tn_arena_lookup(a, e[i].name, &x, NULL));
		ck_assert_tn_ok(tn_arena_lookup(a, other, &y, NULL));
		ck_assert_int_eq(tn_tensor_dtype(x), tn_tensor_dtype(y));
		ck_assert_int_eq(tn_tensor_numel(x), tn_tensor_numel(y));
		ck_assert_msg(!memcmp(tn_tensor_data(x), tn_tensor_data(y), tn_tensor_nbytes(x)),
			      "%s and %s differ", e[i].name, other);
		tn_tensor_unref(x);
		tn_tensor_unref(y);
	}
	free(e);
	/* A malformed file fails with the parser's message and leaves the arena as it was. */
	tn_tensord_arena_info before = arena_stat(c, "io");
	int in = open(golden, O_RDONLY);
	snprintf(file2, sizeof(file2), "%s/cut.safetensors", D.dir);
	int cut = open(file2, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char buf[4096];
	ssize_t k = read(in, buf, sizeof(buf));
	ck_assert_int_gt(k, 40);
	ck_assert_int_eq(write(cut, buf, (size_t)k - 7), k - 7);
	close(in);
	close(cut);
	fd = open(file2, O_RDONLY);
	ck_assert_tn_error_has(tn_tensord_load(c, "io", fd, TN_TENSORD_FORMAT_AUTO, "bad/", 0,
					       NULL, NULL, &t),
			       TN_EINVAL, "safetensors");
	close(fd);
	tn_tensord_arena_info after = arena_stat(c, "io");
	ck_assert_uint_eq(after.stats.names, before.stats.names);
	ck_assert_uint_eq(after.stats.free_bytes, before.stats.free_bytes);
	/* A name that is taken: TN_EEXIST, and nothing of the file stays. */
	fd = open(golden, O_RDONLY);
	ck_assert_tn_error_has(tn_tensord_load(c, "io", fd, TN_TENSORD_FORMAT_AUTO, "st1/", 0,
					       NULL, NULL, &t),
			       TN_EEXIST, "already published");
	close(fd);
	after = arena_stat(c, "io");
	ck_assert_uint_eq(after.stats.names, before.stats.names);
	ck_assert_uint_eq(after.stats.free_bytes, before.stats.free_bytes);
	/* The file is read with the caller's access, through its descriptor: one opened for
	 * writing only is refused. */
	fd = open(file, O_WRONLY);
	ck_assert_tn_error_has(tn_tensord_load(c, "io", fd, TN_TENSORD_FORMAT_AUTO, "w/", 0, NULL,
					       NULL, &t),
			       TN_EACCES, "not open for reading");
	close(fd);
	/* The descriptors that refused requests carry are closed (through the ring, so that
	 * a close that blocks never blocks the loop): 300 loads into an arena that does not
	 * exist leave the daemon with the descriptors it had. */
	char fddir[64];
	snprintf(fddir, sizeof(fddir), "/proc/%d/fd", (int)D.pid);
	int dfds0 = count_files(fddir);
	fd = open(golden, O_RDONLY);
	for (int i = 0; i < 300; i++)
		ck_assert_tn_error_has(tn_tensord_load(c, "nowhere", fd, TN_TENSORD_FORMAT_AUTO,
						       "x/", 0, NULL, NULL, &t),
				       TN_ENOENT, "no arena");
	close(fd);
	int dfds = 0;
	for (int i = 0; i < 100 && (dfds = count_files(fddir)) != dfds0; i++)
		sleep_ms(10);
	ck_assert_int_eq(dfds, dfds0);
	tn_arena_unref(a);
	unlink(file);
	unlink(file2);
	snprintf(file2, sizeof(file2), "%s/b.safetensors", D.dir);
	unlink(file2);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "io", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST


/* Issue 17 C1, end to end: a client of an arena poisons its free-list heads (the first
 * arena) or a block header (the second) and exits holding blocks. tensord, reclaiming its
 * slot, used to die of SIGSEGV, and again on every restart while recovering. Now it survives,
 * the arena is marked damaged (its users and fsck get TN_EIO), other arenas are served, and a
 * restart recovers: the free lists are rebuilt from the block headers, while a broken tiling,
 * which fsck cannot mend, stays quarantined without stopping the daemon. */
static int poison_child(const char *name, bool header)
{
	tn_tensord *cc;
	tn_arena *a;
	void *p[3];
	EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
	EXPECT(tn_tensord_arena_open(cc, name, 0, &a) == 0);
	for (int i = 0; i < 3; i++)
		EXPECT(tn_arena_alloc(a, 100 + 64 * (size_t)i, &p[i]) == 0);
	if (header) {
		tn__block_at(a, a->data_off)->size = UINT64_C(0x4141414141414000);
	} else {
		for (unsigned fl = 0; fl < FL_COUNT; fl++)
			for (unsigned sl = 0; sl < SL_COUNT; sl++)
				a->hdr->bins[fl][sl] = UINT64_C(0x4141414141414000);
	}
	_exit(0);
}

START_TEST(test_damaged_arena_survived)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "dmg", 8 << 20, 0, 0);
	make_arena(c, "dmg2", 8 << 20, 0, 0);
	make_arena(c, "fine", 4 << 20, 0, 0);
	for (int k = 0; k < 2; k++) {
		pid_t pid = fork_child();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			poison_child(k ? "dmg2" : "dmg", k);
		ck_assert_child_ok(pid);
	}
	uint64_t deadline = now_ms() + 5000;
	while (!log_has("dmg2: reclaiming slot") && now_ms() < deadline)
		sleep_ms(10);
	ck_assert_msg(log_has("arena dmg: reclaiming slot") && log_has("is damaged"),
		      "the daemon logged no damage");
	tn_tensord_status st;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st)); /* the daemon lives */
	tn_arena_fsck_report rep;
	ck_assert_int_eq(tn_tensord_fsck(c, "dmg", 0, &rep), TN_EIO);
	ck_assert_uint_ge(rep.problems, 1);
	/* A user of the damaged arena gets the error, not a crash; the others are served. */
	tn_arena *a;
	void *p;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "dmg", 0, &a));
	ck_assert_tn_error_has(tn_arena_alloc(a, 1000, &p), TN_EIO, "run tensorctl fsck");
	/* Issue 17 C7: repair is for the owner and root, through the daemon, not for a
	 * grantee's own handle. */
	ck_assert_tn_error_has(tn_arena_fsck(a, TN_ARENA_FSCK_REPAIR, &rep), TN_EPERM,
			       "its owner or root repairs it");
	ck_assert_int_eq(tn_arena_fsck(a, 0, &rep), TN_EIO);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_open(c, "fine", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "x", 100, 5));
	ck_assert_int_eq(check_i32(a, "x", 100, 5), 0);
	tn_arena_unref(a);

	/* A restart recovers both without dying: "dmg" repaired, "dmg2" left damaged. */
	daemon_kill9();
	daemon_start();
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_uint_eq(st.arenas, 3);
	ck_assert_tn_ok(tn_tensord_fsck(c, "dmg", 0, &rep));
	ck_assert_uint_eq(arena_stat(c, "dmg").stats.clients, 1); /* the daemon's own */
	ck_assert_uint_eq(arena_stat(c, "dmg").stats.blocks, 0);
	ck_assert_int_eq(tn_tensord_fsck(c, "dmg2", 0, &rep), TN_EIO);
	ck_assert(log_has("arena dmg2 is damaged, fsck could not mend it"));
	ck_assert_tn_ok(tn_tensord_arena_open(c, "dmg2", 0, &a));
	ck_assert_tn_error_has(tn_arena_alloc(a, 1000, &p), TN_EIO, "is damaged");
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_open(c, "fine", 0, &a));
	ck_assert_int_eq(check_i32(a, "x", 100, 5), 0);
	ck_assert_tn_ok(tn_arena_unpublish(a, "x"));
	tn_arena_unref(a);
	daemon_kill9(); /* and once more, recovering the quarantined arena again */
	daemon_start();
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	ck_assert_uint_eq(st.arenas, 3);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "dmg", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "dmg2", TN_TENSORD_FORCE));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "fine", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* A read-write client shrinks the arena file while the daemon saves a tensor it gathers
 * element by element from the arena's pages: the daemon's reads past the new end raise SIGBUS,
 * which the guard catches. The save fails with TN_EIO, the daemon keeps serving, the arena is
 * damaged and only its forced destruction is served. */
START_TEST(test_shrink_during_save)
{
	daemon_setup();
	tn_tensord *c = conn();
	char file[160];
	snprintf(file, sizeof(file), "%s/bus.safetensors", D.dir);
	bool caught = false;
	int rounds = 0;
	/* The shrink must land while the save's worker reads the arena, and the machine may be
	 * busy with other suites: up to 24 tries, at spread delays. */
	for (int round = 0; round < 24 && !caught; round++, rounds++) {
		char name[32];
		snprintf(name, sizeof(name), "bus%d", round);
		make_arena(c, name, 96 << 20, 0, 0);
		tn_arena *a;
		ck_assert_tn_ok(tn_tensord_arena_open(c, name, 0, &a));
		/* 4096 x 4096 float32, published transposed: the save gathers it in C order. */
		tn_storage *st;
		tn_tensor *t;
		int64_t sizes[2] = { 4096, 4096 }, strides[2] = { 1, 4096 };
		ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)64 << 20,
							      tn_arena_allocator(a), &st));
		ck_assert_tn_ok(tn_tensor_new(st, 0, 2, sizes, strides, TN_FLOAT32, &t));
		tn_storage_unref(st);
		memset(tn_tensor_data(t), 0x3f, (size_t)64 << 20);
		ck_assert_tn_ok(tn_arena_publish(a, "t", t, 0, NULL));
		tn_tensor_unref(t);
		tn_arena_unref(a);

		int go[2];
		ck_assert_int_eq(pipe(go), 0);
		pid_t k = fork_child();
		ck_assert_int_ge(k, 0);
		if (k == 0) {
			/* Its own handle is never touched again: the process just exits. */
			tn_tensord *cc;
			tn_arena *aa;
			char b;
			close(go[1]);
			if (tn_tensord_connect(D.sock, &cc) || tn_tensord_arena_open(cc, name, 0, &aa))
				_exit(1);
			if (read(go[0], &b, 1) != 1)
				_exit(2);
			sleep_ms(1 + (7 * (unsigned)round) % 40);
			_exit(ftruncate(tn_arena_fd(aa), 4096) ? 3 : 0);
		}
		close(go[0]);
		int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		ck_assert_int_ge(fd, 0);
		put_byte(go[1]);
		close(go[1]);
		tn_tensord_transfer res;
		tn_clear_error();
		int r = tn_tensord_save(c, name, fd, TN_TENSORD_FORMAT_SAFETENSORS, "", 0, NULL, NULL,
					&res);
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
		close(fd);
		ck_assert_int_eq(child_status(k), 0);
		/* Caught mid-way: the save says so. Otherwise the shrink came before or after it. */
		caught = log_has("the access past its end was caught (SIGBUS)");
		if (caught)
			ck_assert_msg(r == TN_EIO && strstr(msg, "shrank during the save"),
				      "save: %d (%s)", r, msg);
		/* Either way the daemon serves, and serves this arena's forced destruction only. */
		tn_tensord_status st2;
		ck_assert_tn_ok(tn_tensord_status_get(c, &st2));
		tn_tensord_arena_info info;
		ck_assert_tn_error_has(tn_tensord_arena_stat(c, name, &info), TN_EIO, "damaged");
		ck_assert_tn_ok(tn_tensord_arena_destroy(c, name, TN_TENSORD_FORCE));
	}
	ck_assert_msg(caught, "no shrink landed during a save in %d rounds", rounds);
	/* And another arena works as before. */
	make_arena(c, "after", 8 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "after", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "x", 1000, 7));
	ck_assert_int_eq(check_i32(a, "x", 1000, 7), 0);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "after", 0));
	unlink(file);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* As nobody, under quotas: connections, arenas and bytes per user. */
static int nobody_quotas(int unused)
{
	(void)unused;
	tn_tensord *c[4];
	for (int i = 0; i < 3; i++)
		EXPECT(tn_tensord_connect(D.sock, &c[i]) == 0);
	/* The fourth connection is refused, and says why. */
	EXPECT(tn_tensord_connect(D.sock, &c[3]) == TN_EBUSY);
	EXPECT(strstr(tn_last_error(), "max_clients_per_user") != NULL);
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 4 << 20;
	EXPECT(tn_tensord_arena_create(c[0], "q1", &o) == 0);
	o.size = 8 << 20;
	EXPECT(tn_tensord_arena_create(c[0], "q2", &o) == TN_ENOSPC);
	EXPECT(strstr(tn_last_error(), "max_bytes_per_user") != NULL);
	o.size = 4 << 20;
	EXPECT(tn_tensord_arena_create(c[1], "q2", &o) == 0);
	o.size = 1 << 20;
	EXPECT(tn_tensord_arena_create(c[2], "q3", &o) == TN_ENOSPC);
	EXPECT(strstr(tn_last_error(), "max_arenas_per_user") != NULL);
	/* Room again once one goes. */
	EXPECT(tn_tensord_arena_destroy(c[0], "q2", 0) == 0);
	o.size = 4 << 20;
	EXPECT(tn_tensord_arena_create(c[2], "q3", &o) == 0);
	/* A closed connection frees its place. */
	tn_tensord_close(c[2]);
	EXPECT(tn_tensord_connect(D.sock, &c[2]) == 0);
	EXPECT(tn_tensord_arena_destroy(c[2], "q1", 0) == 0);
	EXPECT(tn_tensord_arena_destroy(c[2], "q3", 0) == 0);
	for (int i = 0; i < 3; i++)
		tn_tensord_close(c[i]);
	return 0;
}

START_TEST(test_user_quotas)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_user_quotas: skipped (needs root)\n");
		return;
	}
	daemon_setup_conf("max_clients_per_user = 3\nmax_arenas_per_user = 2\n"
			  "max_bytes_per_user = 10M\ncreate_users = *\n");
	/* Root is not held to them. */
	tn_tensord *c[5];
	for (int i = 0; i < 5; i++)
		c[i] = conn();
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 8 << 20;
	const char *mine[] = { "r1", "r2", "r3" };
	for (int i = 0; i < 3; i++)
		ck_assert_tn_ok(tn_tensord_arena_create(c[i], mine[i], &o));
	ck_assert_child_ok(as_nobody(nobody_quotas, 0));
	for (int i = 0; i < 3; i++)
		ck_assert_tn_ok(tn_tensord_arena_destroy(c[0], mine[i], 0));
	for (int i = 0; i < 5; i++)
		tn_tensord_close(c[i]);
	ck_assert(log_has("over max_clients_per_user"));
	daemon_finish();
}
END_TEST


/* ---- CUDA exports (the daemon's table; no GPU needed: the handles are opaque bytes) ---------- */

/* An export record as tn_cuda_ipc_export would make it, with made-up handles: a [4, 8] float32
 * view at element 2 of a 200-byte storage, 4096 bytes into a 2 MiB allocation. */
static struct tnd_cuda_export fake_export(const char *name, unsigned mode)
{
	struct tnd_cuda_export r = { .alloc_bytes = 2 << 20, .offset = 4096, .storage_bytes = 200,
				     .storage_offset = 2, .dtype = TN_FLOAT32, .ndim = 2,
				     .flags = TND_CUDA_EVENT, .mode = mode };
	snprintf(r.name, sizeof(r.name), "%s", name);
	for (int i = 0; i < TND_CUDA_HANDLE_SIZE; i++) {
		r.mem_handle[i] = (uint8_t)(i * 7 + 1);
		r.event_handle[i] = (uint8_t)(i * 5 + 3);
	}
	for (int i = 0; i < 16; i++)
		r.device_uuid[i] = (uint8_t)(0xa0 + i);
	r.sizes[0] = 4;
	r.sizes[1] = 8;
	r.strides[0] = 8;
	r.strides[1] = 1;
	return r;
}

/* The daemon's record of @name: 0 and *ret, or the error (TN_ENOENT once it is gone). */
static int cuda_stat(tn_tensord *c, const char *name, tn_tensord_cuda_export *ret)
{
	tn_tensord_cuda_export tmp;
	return tn_tensord_cuda_stat(c, name, ret ? ret : &tmp);
}

/* Wait up to @ms for @name to have @holders holds (-1: to be gone); returns the time taken. */
static uint64_t wait_holders(tn_tensord *c, const char *name, int holders, unsigned ms)
{
	uint64_t t0 = now_ms();
	for (;;) {
		tn_tensord_cuda_export e;
		int r = cuda_stat(c, name, &e);
		if (holders < 0 ? r == TN_ENOENT : r == 0 && e.holders == (uint32_t)holders)
			return now_ms() - t0;
		ck_assert_msg(r == 0 || r == TN_ENOENT, "stat %s: %s", name, tn_last_error());
		ck_assert_msg(now_ms() - t0 < ms, "%s: %d holders after %u ms (wanted %d)", name,
			      r ? -1 : (int)e.holders, ms, holders);
		sleep_ms(2);
	}
}

/* A child that connects, imports @name @n times (or exports it when @n is 0), says so on
 * @ready and waits for a byte on @go, then releases one hold (n > 0) and waits to be killed. */
static pid_t cuda_child(const char *name, int n, int ready, int go)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	tn_tensord *cc;
	struct tnd_cuda_info info;
	EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
	if (n == 0) {
		struct tnd_cuda_export rec = fake_export(name, 0004);
		EXPECT(tn__tensord_cuda_export(cc, &rec, &info) == 0);
	}
	for (int i = 0; i < n; i++)
		EXPECT(tn__tensord_cuda_import(cc, name, &info) == 0);
	char b = 1;
	EXPECT(write(ready, &b, 1) == 1);
	wait_byte(go);
	if (n > 0)
		EXPECT(tn__tensord_cuda_release(cc, name, info.id) == 0);
	EXPECT(write(ready, &b, 1) == 1);
	for (;;)
		pause();
}

static void kill_child(pid_t pid)
{
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	int st = child_status(pid);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

START_TEST(test_cuda_exports)
{
	daemon_setup();
	tn_tensord *c = conn();
	struct tnd_cuda_info info, info2;
	struct tnd_cuda_export rec = fake_export("w/x", 0);
	ck_assert_tn_ok(tn__tensord_cuda_export(c, &rec, &info));
	ck_assert_uint_gt(info.id, 0);
	ck_assert_int_eq(info.owner_pid, getpid());
	ck_assert_uint_eq(info.holders, 0);
	ck_assert_uint_eq(info.state, 0);
	tn_tensord_cuda_export e;
	ck_assert_tn_ok(cuda_stat(c, "w/x", &e));
	ck_assert_str_eq(e.name, "w/x");
	ck_assert_uint_eq(e.id, info.id);
	ck_assert_int_eq(e.owner_pid, getpid());
	ck_assert_uint_eq(e.owner_uid, getuid());
	ck_assert_uint_eq(e.storage_bytes, 200);
	ck_assert_int_eq(e.dtype, TN_FLOAT32);
	ck_assert_int_eq(e.ndim, 2);
	ck_assert_int_eq(e.sizes[0], 4);
	ck_assert_int_eq(e.sizes[1], 8);
	ck_assert(e.has_event);
	ck_assert_uint_eq(e.device_uuid[3], 0xa3);
	ck_assert_uint_eq(e.state, 0);
	ck_assert_tn_error_has(tn__tensord_cuda_export(c, &rec, &info2), TN_EEXIST, "exists");
	ck_assert_tn_error_has(cuda_stat(c, "w/y", NULL), TN_ENOENT, "no CUDA export");
	/* Records the library refuses before they are sent. */
	struct tnd_cuda_export bad = fake_export("bad", 0);
	bad.storage_bytes = (2 << 20) - 4095;
	ck_assert_tn_error_has(tn__tensord_cuda_export(c, &bad, &info2), TN_EINVAL, "outside");
	bad = fake_export("bad", 0);
	bad.sizes[0] = 7; /* 2 + 6 * 8 + 7 elements of 4 bytes > 200 */
	ck_assert_tn_error_has(tn__tensord_cuda_export(c, &bad, &info2), TN_EINVAL, "extent");
	bad = fake_export("bad", 0700);
	ck_assert_tn_error_has(tn__tensord_cuda_export(c, &bad, &info2), TN_EINVAL, "mode");

	/* Two holds from one process, one released, then the process killed holding the
	 * other: the daemon drops it within a few polls of the death. */
	int ready[2], go[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = cuda_child("w/x", 2, ready[1], go[0]);
	get_byte(ready[0]);
	ck_assert_tn_ok(cuda_stat(c, "w/x", &e));
	ck_assert_uint_eq(e.holders, 2);
	ck_assert_uint_eq(e.importers, 1);
	put_byte(go[1]);
	get_byte(ready[0]);
	ck_assert_tn_ok(cuda_stat(c, "w/x", &e));
	ck_assert_uint_eq(e.holders, 1);
	char out[8192];
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "cuda", NULL }), 0);
	ck_assert_msg(strstr(out, "w/x") && strstr(out, "float32") && strstr(out, "[4, 8]") &&
			      strstr(out, "exported"),
		      "tensorctl cuda:\n%s", out);
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "--json", "cuda", "w/x",
						     NULL }),
			 0);
	ck_assert_msg(strstr(out, "\"holders\": 1") && strstr(out, "\"state\": \"exported\""),
		      "tensorctl --json cuda w/x:\n%s", out);
	uint64_t t0 = now_ms();
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	wait_holders(c, "w/x", 0, 3000);
	uint64_t took = now_ms() - t0;
	ck_assert_msg(took < 1000, "a killed importer's hold went after %llu ms",
		      (unsigned long long)took);
	kill_child(pid);

	/* Withdrawn while held: no new imports; the record goes with the last release. */
	pid = cuda_child("w/x", 1, ready[1], go[0]);
	get_byte(ready[0]);
	ck_assert_tn_ok(tn__tensord_cuda_unexport(c, "w/x", info.id, &info2));
	ck_assert_uint_eq(info2.holders, 1);
	ck_assert_uint_eq(info2.state & TND_CUDA_WITHDRAWN, TND_CUDA_WITHDRAWN);
	ck_assert_tn_ok(cuda_stat(c, "w/x", &e));
	ck_assert_uint_eq(e.state, TN_TENSORD_CUDA_WITHDRAWN);
	ck_assert_tn_error_has(tn__tensord_cuda_import(c, "w/x", &info2), TN_ENOENT, "withdrawn");
	/* The name is free again: a new export of it is another record. */
	ck_assert_tn_ok(tn__tensord_cuda_export(c, &rec, &info2));
	ck_assert_uint_gt(info2.id, info.id);
	ck_assert_tn_ok(cuda_stat(c, "w/x", &e));
	ck_assert_uint_eq(e.id, info2.id);
	put_byte(go[1]);
	get_byte(ready[0]);
	struct tnd_cuda_info gone;
	ck_assert_tn_error_has(tn__tensord_cuda_stat(c, "w/x", info.id, &gone), TN_ENOENT,
			       "with id");
	kill_child(pid);
	ck_assert_tn_ok(tn__tensord_cuda_unexport(c, "w/x", info2.id, &info2));
	ck_assert_uint_eq(info2.holders, 0);
	ck_assert_tn_error_has(cuda_stat(c, "w/x", NULL), TN_ENOENT, "no CUDA export");

	/* The exporting process dies: its exports are withdrawn, and gone once nobody holds
	 * them; one still held stays, marked, until released. */
	pid = cuda_child("p/a", 0, ready[1], go[0]);
	get_byte(ready[0]);
	struct tnd_cuda_info held;
	ck_assert_tn_ok(tn__tensord_cuda_import(c, "p/a", &held));
	ck_assert_int_eq(held.owner_pid, pid);
	kill_child(pid);
	uint64_t deadline = now_ms() + 3000;
	do {
		ck_assert_tn_ok(cuda_stat(c, "p/a", &e));
		ck_assert(now_ms() < deadline);
		sleep_ms(2);
	} while (!(e.state & TN_TENSORD_CUDA_OWNER_GONE));
	ck_assert_uint_eq(e.state & TN_TENSORD_CUDA_WITHDRAWN, TN_TENSORD_CUDA_WITHDRAWN);
	ck_assert_uint_eq(e.holders, 1);
	ck_assert_tn_error_has(tn__tensord_cuda_import(c, "p/a", &info2), TN_ENOENT, "exited");
	/* Importing through the library: the record's GPU is nowhere here, so the import fails
	 * (TN_ENODEV) and its hold is released. */
	ck_assert_tn_ok(tn__tensord_cuda_release(c, "p/a", held.id));
	ck_assert_tn_error_has(cuda_stat(c, "p/a", NULL), TN_ENOENT, "no CUDA export");
	pid = cuda_child("q", 0, ready[1], go[0]);
	get_byte(ready[0]);
	tn_tensor *t = NULL;
	ck_assert_int_eq(tn_cuda_ipc_import(c, "q", &t), TN_ENODEV);
	ck_assert_ptr_null(t);
	ck_assert_tn_ok(cuda_stat(c, "q", &e));
	ck_assert_uint_eq(e.holders, 0);
	tn_tensord_cuda_export *list;
	size_t n;
	ck_assert_tn_ok(tn_tensord_cuda_list(c, &list, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(list[0].name, "q");
	free(list);
	kill_child(pid);
	wait_holders(c, "q", -1, 3000);
	ck_assert_tn_ok(tn_tensord_cuda_list(c, &list, &n));
	ck_assert_uint_eq(n, 0);
	free(list);
	/* A CPU tensor is not exported this way; without CUDA nothing is. */
	tn_tensor *cpu;
	ck_assert_tn_ok(tn_zeros(1, (int64_t[]){ 4 }, TN_FLOAT32, TN_CPU, &cpu));
	int r = tn_cuda_ipc_export(c, "cpu", cpu, 0);
	ck_assert_msg(r == TN_EINVAL || r == TN_ENODEV, "export of a CPU tensor: %d", r);
	tn_tensor_unref(cpu);
	/* With CUDA built in the tensor was refused; without, every call is. */
	ck_assert_int_eq(tn_cuda_ipc_unexport(c, "cpu"), r == TN_EINVAL ? TN_ENOENT : TN_ENODEV);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

static int nobody_cuda(int unused)
{
	(void)unused;
	tn_tensord *c;
	struct tnd_cuda_info info;
	tn_tensord_cuda_export e, *list;
	size_t n;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	/* Root's private export is invisible; the one for everyone can be imported. */
	EXPECT(tn_tensord_cuda_stat(c, "root/priv", &e) == TN_ENOENT);
	EXPECT(tn__tensord_cuda_import(c, "root/priv", &info) == TN_ENOENT);
	EXPECT(tn_tensord_cuda_stat(c, "root/all", &e) == 0 && e.owner_uid == 0);
	EXPECT(tn__tensord_cuda_import(c, "root/all", &info) == 0 && info.holders == 1);
	EXPECT(tn__tensord_cuda_unexport(c, "root/all", info.id, &info) == TN_EACCES);
	EXPECT(tn_tensord_cuda_list(c, &list, &n) == 0 && n == 1 &&
	       !strcmp(list[0].name, "root/all"));
	free(list);
	EXPECT(tn__tensord_cuda_release(c, "root/all", info.id) == 0);
	EXPECT(tn__tensord_cuda_release(c, "root/all", info.id) == TN_ENOENT);
	tn_tensord_close(c);
	return 0;
}

START_TEST(test_cuda_exports_access)
{
	if (getuid() != 0)
		return; /* needs root to become another user; CI runs as root */
	daemon_setup();
	tn_tensord *c = conn();
	struct tnd_cuda_info a, b;
	struct tnd_cuda_export rec = fake_export("root/priv", 0);
	ck_assert_tn_ok(tn__tensord_cuda_export(c, &rec, &a));
	rec = fake_export("root/all", 0004);
	ck_assert_tn_ok(tn__tensord_cuda_export(c, &rec, &b));
	ck_assert_child_ok(as_nobody(nobody_cuda, 0));
	ck_assert_tn_ok(tn__tensord_cuda_unexport(c, "root/priv", a.id, &a));
	ck_assert_tn_ok(tn__tensord_cuda_unexport(c, "root/all", b.id, &b));
	ck_assert_uint_eq(b.holders, 0);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* The table outlives the daemon: after a kill -9 and a start, the records of live processes
 * are back (detached until they reconnect), and those of processes that died meanwhile go. */
START_TEST(test_cuda_exports_restart)
{
	daemon_setup();
	/* One "go" pipe per child: a byte on a shared one would wake any of them. */
	int ready[2], go_owner[2], go_holder[2], go_dying[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go_owner), 0);
	ck_assert_int_eq(pipe(go_holder), 0);
	ck_assert_int_eq(pipe(go_dying), 0);
	pid_t owner = cuda_child("r", 0, ready[1], go_owner[0]);
	get_byte(ready[0]);
	pid_t holder = cuda_child("r", 1, ready[1], go_holder[0]);
	get_byte(ready[0]);
	pid_t dying = cuda_child("r", 3, ready[1], go_dying[0]);
	get_byte(ready[0]);
	tn_tensord *c = conn();
	tn_tensord_cuda_export e0, e;
	/* Enough changes that the table file is rewritten from a snapshot several times: the
	 * restarted daemon reads a snapshot followed by changes. */
	struct tnd_cuda_info mine;
	for (int i = 0; i < 700; i++) {
		ck_assert_tn_ok(tn__tensord_cuda_import(c, "r", &mine));
		if (i % 3)
			ck_assert_tn_ok(tn__tensord_cuda_release(c, "r", mine.id));
	}
	ck_assert_tn_ok(cuda_stat(c, "r", &e0));
	ck_assert_uint_eq(e0.holders, 4 + 234);
	ck_assert_uint_eq(e0.importers, 3); /* the holder, the dying one and us */
	daemon_kill9();
	kill_child(dying); /* dies while no daemon runs */
	daemon_start();
	ck_assert_tn_ok(cuda_stat(c, "r", &e));
	ck_assert_uint_eq(e.id, e0.id);
	ck_assert_int_eq(e.owner_pid, owner);
	ck_assert_uint_eq(e.state, TN_TENSORD_CUDA_DETACHED);
	wait_holders(c, "r", 1 + 234, 3000);
	/* Our own holds came back with the table; we give them back. */
	for (int i = 0; i < 234; i++)
		ck_assert_tn_ok(tn__tensord_cuda_release(c, "r", mine.id));
	ck_assert_tn_error_has(tn__tensord_cuda_release(c, "r", mine.id), TN_ENOENT, "not held");
	wait_holders(c, "r", 1, 3000);
	/* The holder reconnects (its next request) and releases its hold. */
	put_byte(go_holder[1]);
	get_byte(ready[0]);
	ck_assert_tn_ok(cuda_stat(c, "r", &e));
	ck_assert_uint_eq(e.holders, 0);
	kill_child(holder);
	/* The owner never reconnected; its death is noticed by the sweep. */
	kill_child(owner);
	wait_holders(c, "r", -1, 3000);
	int fds[] = { ready[0], ready[1], go_owner[0], go_owner[1], go_holder[0], go_holder[1],
		      go_dying[0], go_dying[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		close(fds[i]);
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- messages a user can act on ---------------------------------------------------------------- */

/* Run tensorctl with @args; its standard error into @err. Returns its exit status. */
static int tensorctl_err(char *err, size_t cap, const char *const *args)
{
	char file[160];
	snprintf(file, sizeof(file), "%s/tensorctl.err", D.dir);
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int nul = open("/dev/null", O_WRONLY);
		if (fd < 0 || nul < 0)
			_exit(126);
		dup2(nul, 1);
		dup2(fd, 2);
		const char *argv[32] = { "tensorctl" };
		int n = 1;
		for (int i = 0; args[i] && n < 31; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(TN_TENSORCTL_BIN, (char *const *)argv);
		_exit(127);
	}
	int st = child_status(pid);
	ck_assert_msg(WIFEXITED(st), "tensorctl died: 0x%x", st);
	int fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, err, cap - 1);
	close(fd);
	err[n > 0 ? n : 0] = 0;
	unlink(file);
	return WEXITSTATUS(st);
}

/* tensorctl's errors name arenas and tensors by their names, never the library's functions or
 * the arenas' files, and say what to do; malformed names are usage errors (exit 2); a client
 * that exits holding nothing is not logged as a reclaim at info. */
START_TEST(test_tensorctl_messages)
{
	daemon_setup();
	char err[4096];
	tn_tensord *c = conn();
	make_arena(c, "good", 4 << 20, 16, 0);
#define CTL(code, ...)                                                                        \
	do {                                                                                  \
		const char *a_[] = { "--socket", D.sock, __VA_ARGS__, NULL };                 \
		int rc_ = tensorctl_err(err, sizeof(err), a_);                                \
		ck_assert_msg(rc_ == (code), "tensorctl %s: exit %d, not %d: %s", #__VA_ARGS__, \
			      rc_, (code), err);                                             \
		ck_assert_msg(!strstr(err, "tn_") && !strstr(err, D.arena_dir),               \
			      "tensorctl %s names internals: %s", #__VA_ARGS__, err);          \
	} while (0)
	/* Malformed names: usage errors. */
	CTL(2, "arena", "create", "a/b");
	ck_assert_msg(strstr(err, "bad arena name \"a/b\""), "%s", err);
	CTL(2, "arena", "create", "");
	CTL(2, "arena", "stat", "-x");
	CTL(2, "ls", ".hidden");
	CTL(2, "load", "a b", "/dev/null");
	CTL(2, "save", "a/b", "/nonexistent/x.safetensors");
	CTL(2, "fsck", "a:b");
	CTL(2, "show", "good", "a//b");
	ck_assert_msg(strstr(err, "bad tensor name \"a//b\""), "%s", err);
	CTL(2, "rm", "good", "/x");
	/* Errors of well-formed requests: by name, without function names or paths. */
	CTL(4, "show", "good", "nosuch");
	ck_assert_msg(strstr(err, "no tensor 'nosuch' in arena \"good\""), "%s", err);
	CTL(4, "arena", "stat", "nosuch");
	ck_assert_msg(strstr(err, "no arena \"nosuch\""), "%s", err);
	CTL(1, "arena", "create", "small", "--size", "1k");
	ck_assert_msg(strstr(err, "arena create: size 1024 outside"), "%s", err);
	/* No daemon: where it looked, and what to do. */
	char nothere[160];
	snprintf(nothere, sizeof(nothere), "%s/nothere.sock", D.dir);
	const char *a[] = { "--socket", nothere, "status", NULL };
	ck_assert_int_eq(tensorctl_err(err, sizeof(err), a), 3);
	char want[256];
	snprintf(want, sizeof(want), "cannot reach tensord at %s: No such file or directory",
		 nothere);
	ck_assert_msg(strstr(err, want), "%s", err);
	ck_assert_msg(strstr(err, "systemctl start tensord.socket") &&
			      strstr(err, "TENSORD_SOCKET"),
		      "%s", err);
	/* A client that opens an arena and exits normally: no reclaim at info. */
	CTL(0, "ls", "good");
	wait_clients(c, "good", 1, 3000); /* the daemon alone */
	sleep_ms(50);
	ck_assert_msg(!log_has("reclaimed slot"), "a normal exit was logged as a reclaim");
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "good", 0));
	tn_tensord_close(c);
	daemon_finish();
#undef CTL
}
END_TEST

/* ---- socket activation -------------------------------------------------------------------------- */

/* A listening AF_UNIX socket of @type bound to @path, as systemd's tensord.socket makes it. */
static int listening_socket(const char *path, int type)
{
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	return fd;
}

/* Start tensord as systemd does for a socket unit: @lfd becomes descriptor 3 and the child
 * sets LISTEN_PID to its own pid and LISTEN_FDS=1 before the exec. @sock, when not NULL, is
 * passed as --socket. */
static pid_t spawn_activated(int lfd, const char *sock, const char *log)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (lfd != 3 && dup2(lfd, 3) != 3)
			_exit(126);
		fcntl(3, F_SETFD, 0);
		char pidbuf[32];
		snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
		setenv("LISTEN_PID", pidbuf, 1);
		setenv("LISTEN_FDS", "1", 1);
		unsetenv("TENSORD_SOCKET");
		const char *argv[16] = { "tensord", "--foreground", "--config", D.config,
					 "--arena-dir", D.arena_dir, "--log-level", "info" };
		int n = 8;
		if (sock) {
			argv[n++] = "--socket";
			argv[n++] = sock;
		}
		argv[n] = NULL;
		execv(TN_TENSORD_BIN, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static bool file_has(const char *file, const char *needle)
{
	char buf[8192];
	int fd = open(file, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return strstr(buf, needle) != NULL;
}

/* tensord started with a socket systemd made (LISTEN_FDS/LISTEN_PID) serves it without a
 * --socket, leaves it in place when it stops (it is systemd's), and refuses a socket of the
 * wrong type or bound elsewhere than its configuration names. */
START_TEST(test_socket_activation)
{
	static int counter;
	memset(&D, 0, sizeof(D));
	snprintf(D.dir, sizeof(D.dir), "/tmp/check-tensord-%d-XXXXXX", (int)runner_pid);
	ck_assert_ptr_nonnull(mkdtemp(D.dir));
	snprintf(D.sock, sizeof(D.sock), "%s/activated.sock", D.dir);
	snprintf(D.config, sizeof(D.config), "%s/tensord.conf", D.dir);
	snprintf(D.log, sizeof(D.log), "%s/log", D.dir);
	snprintf(D.arena_dir, sizeof(D.arena_dir), "/dev/shm/check-tensord-%d-%d-a%d",
		 (int)runner_pid, (int)getpid(), counter++);
	FILE *f = fopen(D.config, "w");
	ck_assert_ptr_nonnull(f);
	fputs("# empty\n", f);
	fclose(f);

	int lfd = listening_socket(D.sock, SOCK_SEQPACKET);
	D.pid = spawn_activated(lfd, NULL, D.log);
	close(lfd);
	daemon_wait_ready();
	char want[200];
	snprintf(want, sizeof(want), "listening on %s ", D.sock);
	ck_assert_msg(log_has(want), "the log does not say \"%s\"", want);
	/* A request through the passed socket, from the library and from tensorctl. */
	tn_tensord *c = conn();
	make_arena(c, "act", 4 << 20, 16, 0);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "act", 0));
	tn_tensord_close(c);
	char out[4096];
	const char *args[] = { "--socket", D.sock, "status", NULL };
	ck_assert_int_eq(tensorctl(out, sizeof(out), args), 0);
	ck_assert_msg(strstr(out, "tensord pid"), "tensorctl status said: %s", out);
	int st;
	ck_assert_int_eq(kill(D.pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(D.pid, &st, 0), D.pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tensord stopped with 0x%x", st);
	D.pid = 0;
	ck_assert_msg(access(D.sock, F_OK) == 0, "tensord removed systemd's socket");
	ck_assert_int_eq(unlink(D.sock), 0);

	/* A stream socket, and a socket bound elsewhere than --socket names: refused. */
	char log2[160], other[160];
	snprintf(log2, sizeof(log2), "%s/log2", D.dir);
	snprintf(other, sizeof(other), "%s/other.sock", D.dir);
	lfd = listening_socket(D.sock, SOCK_STREAM);
	pid_t p = spawn_activated(lfd, NULL, log2);
	close(lfd);
	st = child_status(p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "stream socket: 0x%x", st);
	ck_assert_msg(file_has(log2, "ListenSequentialPacket"), "stream socket: no reason given");
	ck_assert_int_eq(unlink(D.sock), 0);
	char log3[160];
	snprintf(log3, sizeof(log3), "%s/log3", D.dir);
	lfd = listening_socket(D.sock, SOCK_SEQPACKET);
	p = spawn_activated(lfd, other, log3);
	close(lfd);
	st = child_status(p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "socket elsewhere: 0x%x", st);
	ck_assert_msg(file_has(log3, "configured for"), "socket elsewhere: no reason given");
	ck_assert_int_eq(access(other, F_OK), -1);
	ck_assert_int_eq(unlink(D.sock), 0);

	ck_assert_int_eq(count_files(D.arena_dir), 0);
	ck_assert_int_eq(rmdir(D.arena_dir), 0);
	rm_dir_files(D.dir);
	D.dir[0] = D.arena_dir[0] = 0;
}
END_TEST

/* A read-only client waits for a name without polling: tensord marks its slot waiting (it
 * cannot write the mask), a read-write publisher wakes it, and a waiter killed in its sleep is
 * cleared with its slot when its connection closes. */
static uint64_t waiters_of(tn_arena *a)
{
	tn_arena_stats st;
	ck_assert_tn_ok(tn_arena_stat(a, &st));
	return st.waiters;
}

START_TEST(test_read_only_waiters)
{
	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "wro", 8 << 20, 0, 0);
	tn_arena *rw;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "wro", 0, &rw));

	for (int round = 0; round < 2; round++) {
		pid_t pid = fork_child();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			tn_tensord *cc;
			tn_arena *ro;
			tn_tensor *t = NULL;
			EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
			EXPECT(tn_tensord_arena_open(cc, "wro", TN_TENSORD_READ_ONLY, &ro) == 0);
			/* Round 0: woken by the publish. Round 1: waits until killed. */
			tn_arena_lookup_options o = { .timeout_ns = round ? -1 : 20000000000 };
			EXPECT(tn_arena_lookup_wait(ro, round ? "never" : "w", &o, &t, NULL) == 0);
			EXPECT(tn_tensor_is_readonly(t));
			EXPECT(((const int32_t *)tn_tensor_data(t))[9] == 109);
			tn_tensor_unref(t);
			tn_arena_unref(ro);
			tn_tensord_close(cc);
			_exit(0);
		}
		uint64_t t0 = now_ms();
		while (waiters_of(rw) == 0 && now_ms() - t0 < 10000)
			sleep_ms(5);
		ck_assert_uint_eq(waiters_of(rw), 1);
		if (round == 0) {
			ck_assert_int_eq(publish_i32(rw, "w", 10, 100), 0);
			ck_assert_child_ok(pid);
		} else {
			kill(pid, SIGKILL);
			int st = child_status(pid);
			ck_assert(WIFSIGNALED(st));
		}
		t0 = now_ms();
		while (waiters_of(rw) != 0 && now_ms() - t0 < 10000)
			sleep_ms(5);
		ck_assert_uint_eq(waiters_of(rw), 0);
	}
	/* tensorctl waits the same way: show for a name published 300 ms later (sealed later
	 * still), ls for a prefix; and gives up with exit status 7. */
	char out[4096];
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *cc;
		tn_arena *w;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, "wro", 0, &w) == 0);
		sleep_ms(300);
		EXPECT(publish_i32(w, "late/a", 4, 1) == 0);
		sleep_ms(200);
		EXPECT(tn_arena_seal(w, "late/a") == 0);
		tn_arena_unref(w);
		tn_tensord_close(cc);
		_exit(0);
	}
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "ls", "wro", "late/", "--wait",
						     "20", NULL }),
			 0);
	ck_assert_ptr_nonnull(strstr(out, "late/a"));
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "show", "wro", "late/a",
						     "--wait", "20", "--sealed", NULL }),
			 0);
	ck_assert_msg(strstr(out, "sealed"), "show printed: %s", out);
	ck_assert_child_ok(pid);
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "show", "wro", "none",
						     "--wait", "0.1", NULL }),
			 7);
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "ls", "wro", "none/",
						     "--wait", "0.1", NULL }),
			 7);
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "show", "wro", "w",
						     "--wait", "-1", NULL }),
			 2);
	ck_assert_uint_eq(waiters_of(rw), 0);
	tn_arena_unref(rw);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "wro", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- eviction at the watermarks ---------------------------------------------------------------- */

/* A cache tensor of @n int32 published from @a (not kept). */
static void publish_cache(tn_arena *a, const char *name, int64_t n, int32_t base)
{
	ck_assert_tn_ok(publish_i32(a, name, n, base));
	ck_assert_tn_ok(tn_arena_set_retention(a, name, TN_ARENA_CACHE, 0));
}

START_TEST(test_watermark_eviction)
{
	daemon_setup_conf("evict_interval_ms = 20\n");
	tn_tensord *c = conn();
	make_arena(c, "ev", 32 << 20, 0, 0);
	char out[8192];
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "ev", 0, &a));
	tn_arena_stats s;
	ck_assert_tn_ok(tn_arena_stat(a, &s));
	ck_assert_uint_eq(s.high_water, s.heap_bytes / 100 * 90);
	ck_assert_uint_eq(s.low_water, s.heap_bytes / 100 * 80);

	/* Pinned weights, a cache tensor another process holds, then 1 MiB cache tensors to
	 * 70% of the heap (below the high watermark of 90%: nothing is evicted yet); then the
	 * watermarks go down to 50% and 25%, and tensord brings the use down to the low one. */
	ck_assert_tn_ok(publish_i32(a, "weights", 1 << 20, 3));
	publish_cache(a, "hot", 1 << 18, 5);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *cc;
		tn_arena *b;
		tn_tensor *t;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, "ev", TN_TENSORD_READ_ONLY, &b) == 0);
		EXPECT(tn_arena_lookup(b, "hot", &t, NULL) == 0);
		char x = 1;
		EXPECT(write(ready[1], &x, 1) == 1);
		pause();
		_exit(0);
	}
	get_byte(ready[0]);
	char name[32];
	int n = 0;
	for (; n < 64; n++) {
		ck_assert_tn_ok(tn_arena_stat(a, &s));
		if (s.used_bytes > s.heap_bytes / 10 * 7)
			break;
		snprintf(name, sizeof(name), "batch/%d", n);
		publish_cache(a, name, 1 << 18, n);
	}
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
		"set", "ev", "--high-water", "50%", "--low-water", "25%", NULL }), 0);
	ck_assert_msg(strstr(out, "arena ev: evicts above"), "%s", out);
	ck_assert_tn_ok(tn_arena_stat(a, &s));
	ck_assert_uint_eq(s.high_water, s.heap_bytes / 2);
	ck_assert_uint_eq(s.low_water, s.heap_bytes / 4);
	uint64_t deadline = now_ms() + 5000;
	for (;;) {
		ck_assert_tn_ok(tn_arena_stat(a, &s));
		if (s.used_bytes <= s.low_water)
			break;
		ck_assert_msg(now_ms() < deadline, "tensord left %llu bytes used (low %llu)",
			      (unsigned long long)s.used_bytes, (unsigned long long)s.low_water);
		sleep_ms(10);
	}
	ck_assert_uint_gt(s.evictions, 0);
	ck_assert_int_eq(check_i32(a, "weights", 1 << 20, 3), 0);
	ck_assert_int_eq(check_i32(a, "hot", 1 << 18, 5), 0);
	tn_arena_entry e;
	ck_assert_int_eq(tn_arena_info(a, "batch/0", &e), TN_ENOENT);
	ck_assert_tn_ok(tn_arena_info(a, "weights", &e));
	ck_assert_uint_eq(e.flags, 0);
	/* Each entry that survived is intact. */
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "batch/%d", i);
		if (tn_arena_info(a, name, &e) == 0)
			ck_assert_int_eq(check_i32(a, name, 1 << 18, i), 0);
	}
	ck_assert_msg(file_has(D.log, "above the high watermark"), "no eviction logged");

	/* tensorctl: the classes in ls, pin and unpin, evict now, the figures in arena stat. */
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "ls",
		"ev", NULL }), 0);
	ck_assert_msg(strstr(out, "RETENTION") && strstr(out, "pinned") && strstr(out, "cache"),
		      "%s", out);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "pin",
		"ev", "hot", "--soft", "60", NULL }), 0);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "ls",
		"ev", "hot", NULL }), 0);
	ck_assert_msg(strstr(out, "soft 6") || strstr(out, "soft 5"), "%s", out);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "unpin",
		"ev", "weights", NULL }), 0);
	ck_assert_tn_ok(tn_arena_info(a, "weights", &e));
	ck_assert_uint_eq(e.flags, TN_ARENA_ENTRY_CACHE);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "evict",
		"ev", "--to", "0", NULL }), 0);
	ck_assert_msg(strstr(out, "evicted "), "%s", out);
	ck_assert_int_eq(tn_arena_info(a, "weights", &e), TN_ENOENT);
	ck_assert_tn_ok(tn_arena_info(a, "hot", &e)); /* held and soft-pinned */
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
		"stat", "ev", NULL }), 0);
	ck_assert_msg(strstr(out, "retention     held ") && strstr(out, "evicted ("), "%s", out);
	ck_assert_int_ne(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "pin",
		"ev", "nope", NULL }), 0);
	ck_assert_int_ne(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
		"set", "ev", "--low-water", "120%", NULL }), 0);

	/* The holder dies: its hold is reclaimed, and "hot" can go once its pin is lifted. */
	kill(pid, SIGKILL);
	child_status(pid);
	wait_clients(c, "ev", 2, 3000); /* tensord and this process */
	ck_assert_tn_ok(tn_arena_set_retention(a, "hot", TN_ARENA_CACHE, 0));
	tn_arena_evict_report rep;
	ck_assert_tn_ok(tn_arena_evict(a, 0, &rep));
	ck_assert_tn_ok(tn_arena_stat(a, &s));
	ck_assert_uint_eq(s.names, 0);
	ck_assert_uint_eq(s.used_bytes, 0);
	close(ready[0]);
	close(ready[1]);
	tn_arena_unref(a);
	tn_arena_fsck_report fr;
	ck_assert_tn_ok(tn_tensord_fsck(c, "ev", 0, &fr));
	ck_assert_msg(fr.problems == 0, "fsck: %s", fr.first_problem);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "ev", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* ---- metrics ---------------------------------------------------------------------------------- */

/* The strict reader refuses what the format forbids (so that its passing means something). */
static void prom_refuses(const char *text, const char *why)
{
	struct prom_doc d;
	int r = prom_parse(text, &d);
	prom_free(&d);
	ck_assert_msg(r != 0, "the reader took a document with %s", why);
}

/* What nobody sees: only the arenas it may read ("open"), and its own connections. */
static int nobody_metrics(int unused)
{
	(void)unused;
	tn_tensord *c;
	char *text;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	EXPECT(tn_tensord_metrics(c, &text, NULL) == 0);
	struct prom_doc d;
	EXPECT(prom_parse(text, &d) == 0);
	EXPECT(!isnan(prom_get(&d, "tensord_arena_used_bytes", "arena=\"open\"")));
	EXPECT(isnan(prom_get(&d, "tensord_arena_used_bytes", "arena=\"mx\"")));
	EXPECT(strstr(text, "program=\"check_tensord\"") == NULL ||
	       strstr(text, "arena=\"mx\"") == NULL);
	prom_free(&d);
	free(text);
	tn_tensord_close(c);
	return 0;
}

START_TEST(test_metrics)
{
	prom_refuses("# TYPE a counter\n# TYPE a counter\na 1\n", "a second TYPE");
	prom_refuses("a 1\n", "a sample before its TYPE");
	prom_refuses("# TYPE a gauge\na{x=\"\\q\"} 1\n", "a bad escape");
	prom_refuses("# TYPE a gauge\na 1\n# TYPE b gauge\nb 2\na 3\n", "a family split");
	prom_refuses("# TYPE a counter\na -1\n", "a negative counter");
	prom_refuses("# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"2\"} 2\n"
		     "h_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n", "buckets that are not cumulative");
	prom_refuses("# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_sum 1\nh_count 3\n",
		     "a histogram without +Inf");
	prom_refuses("# TYPE a gauge\na 1", "no final line feed");
	prom_refuses("# TYPE a gauge\na 1\na 2\n", "a sample given twice");

	daemon_setup();
	tn_tensord *c = conn();
	make_arena(c, "mx", 16 << 20, 0, 0);
	make_arena(c, "open", 4 << 20, 0, 0);
	tn_tensord_grant g = { TN_TENSORD_GRANT_USER, NOBODY, TN_TENSORD_ACCESS_READ };
	ck_assert_tn_ok(tn_tensord_arena_grant(c, "open", &g));
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "mx", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "w", 1 << 18, 1));
	publish_cache(a, "c0", 1 << 18, 2);
	publish_cache(a, "c1", 1 << 18, 3);
	tn_tensor *held;
	ck_assert_tn_ok(tn_arena_lookup(a, "c1", &held, NULL));
	tn_arena_evict_report rep;
	ck_assert_tn_ok(tn_arena_evict(a, 0, &rep));
	ck_assert_uint_eq(rep.evicted, 1); /* c0; c1 is held */
	tn_arena_stats s;
	ck_assert_tn_ok(tn_arena_stat(a, &s));

	char *text;
	size_t len;
	ck_assert_tn_ok(tn_tensord_metrics(c, &text, &len));
	ck_assert_uint_eq(len, strlen(text));
	struct prom_doc d;
	ck_assert_msg(prom_parse(text, &d) == 0, "%s", d.why);
	const char *mx = "arena=\"mx\"";
	ck_assert_double_eq(prom_get(&d, "tensord_arena_used_bytes", mx), (double)s.used_bytes);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_held_bytes", mx), (double)s.held_bytes);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_pinned_bytes", mx),
			    (double)s.pinned_bytes);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_evictable_bytes", mx), 0);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_evictions_total", mx), 1);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_names", mx), 2);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_heap_bytes", mx), (double)s.heap_bytes);
	ck_assert_double_gt(prom_get(&d, "tensord_arena_resident_bytes", mx), 0);
	ck_assert_double_ge(prom_get(&d, "tensord_requests_total", "op=\"HELLO\""), 1);
	ck_assert_double_eq(prom_get(&d, "tensord_request_duration_seconds_count",
				     "op=\"ARENA_CREATE\""), 2);
	ck_assert_double_eq(prom_get(&d, "tensord_connections", ""), 1);
	ck_assert(!isnan(prom_get(&d, "tensord_uring_in_flight", "")));
	ck_assert_int_ge(d.nfam, 25);
	for (int i = 0; i < d.nfam; i++)
		ck_assert_msg(d.fam[i].help && d.fam[i].type[0], "%s lacks HELP or TYPE",
			      d.fam[i].name);
	prom_free(&d);
	free(text);

	/* tensorctl metrics prints the same format; nobody sees only what it may read. */
	char out[65536];
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
		"metrics", NULL }), 0);
	ck_assert_msg(prom_parse(out, &d) == 0, "%s", d.why);
	ck_assert_double_ge(prom_get(&d, "tensord_requests_total", "op=\"METRICS\""), 1);
	prom_free(&d);
	ck_assert_child_ok(as_nobody(nobody_metrics, 0));

	tn_tensor_unref(held);
	ck_assert_tn_ok(tn_arena_unpublish(a, "w"));
	ck_assert_tn_ok(tn_arena_unpublish(a, "c1"));
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "mx", 0));
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "open", 0));
	tn_tensord_close(c);
	/* Off unless configured. */
	ck_assert(!log_has("metrics at http"));
	daemon_finish();
}
END_TEST

/* One HTTP exchange with 127.0.0.1:@port: the whole answer (the server closes). */
static size_t http_ask(int port, const char *request, char *out, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
	size_t len = 0;
	ssize_t n;
	while (len + 1 < cap && (n = read(fd, out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(fd);
	return len;
}

/* tensord serves the metrics over HTTP where metrics_http says: a scraper's GET /metrics gets the
 * text tensorctl prints, in the exposition format a strict parser accepts; other paths and
 * methods are refused; a client that connects and says nothing delays nobody. */
START_TEST(test_metrics_http)
{
	daemon_setup_conf("metrics_http = 127.0.0.1:0\n");
	char line[1024] = "";
	FILE *f = fopen(D.log, "r");
	ck_assert_ptr_nonnull(f);
	int port = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "metrics at http://127.0.0.1:"))
			port = atoi(strstr(line, "127.0.0.1:") + 10);
	fclose(f);
	ck_assert_int_gt(port, 0);
	tn_tensord *c = conn();
	make_arena(c, "web", 8 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "web", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "w", 1 << 16, 1));
	/* A silent client: its connection waits on a thread of its own. */
	int idle = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(connect(idle, (struct sockaddr *)&sa, sizeof(sa)), 0);

	static char out[1 << 18];
	uint64_t t0 = now_ms();
	http_ask(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out,
		 sizeof(out));
	ck_assert_uint_lt(now_ms() - t0, 3000);
	ck_assert_msg(!strncmp(out, "HTTP/1.1 200 OK\r\n", 17), "%.200s", out);
	ck_assert_msg(strcasestr(out, "\r\nContent-Type: text/plain; version=0.0.4"), "%.400s", out);
	char *body = strstr(out, "\r\n\r\n");
	ck_assert_ptr_nonnull(body);
	body += 4;
	struct prom_doc d;
	ck_assert_msg(prom_parse(body, &d) == 0, "%s", d.why);
	tn_arena_stats s;
	ck_assert_tn_ok(tn_arena_stat(a, &s));
	ck_assert_double_eq(prom_get(&d, "tensord_arena_used_bytes", "arena=\"web\""),
			    (double)s.used_bytes);
	ck_assert_double_eq(prom_get(&d, "tensord_arena_names", "arena=\"web\""), 1);
	prom_free(&d);
	/* The second scrape counts the first. */
	http_ask(port, "GET /metrics HTTP/1.0\r\n\r\n", out, sizeof(out));
	body = strstr(out, "\r\n\r\n");
	ck_assert_ptr_nonnull(body);
	ck_assert_msg(prom_parse(body + 4, &d) == 0, "%s", d.why);
	ck_assert_double_ge(prom_get(&d, "tensord_http_scrapes_total", ""), 1);
	prom_free(&d);
	/* HEAD: the headers alone. */
	size_t n = http_ask(port, "HEAD /metrics HTTP/1.0\r\n\r\n", out, sizeof(out));
	ck_assert_msg(!strncmp(out, "HTTP/1.1 200", 12), "%.200s", out);
	ck_assert_uint_eq(n, (size_t)(strstr(out, "\r\n\r\n") + 4 - out));
	/* Refusals. */
	http_ask(port, "GET /other HTTP/1.0\r\n\r\n", out, sizeof(out));
	ck_assert_msg(!strncmp(out, "HTTP/1.1 404", 12), "%.200s", out);
	http_ask(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", out,
		 sizeof(out));
	ck_assert_msg(!strncmp(out, "HTTP/1.1 405", 12) && strcasestr(out, "Allow: GET, HEAD"),
		      "%.300s", out);
	/* A malformed request is dropped (libmicrohttpd closes without an answer) or 400. */
	http_ask(port, "garbage\r\n\r\n", out, sizeof(out));
	ck_assert_msg(!out[0] || !strncmp(out, "HTTP/1.1 400", 12), "%.200s", out);
	/* The daemon went on serving its clients throughout. */
	tn_tensord_status st;
	ck_assert_tn_ok(tn_tensord_status_get(c, &st));
	close(idle);
	ck_assert_tn_ok(tn_arena_unpublish(a, "w"));
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "web", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

static Suite *tensord_suite(void)
{
	Suite *s = suite_create("tensord");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, NULL, remove_leftovers);
	tcase_add_test(tc, test_end_to_end);
	tcase_add_test(tc, test_reclaim_killed_client);
	tcase_add_test(tc, test_reclaim_after_late_death);
	tcase_add_test(tc, test_read_only_waiters);
	tcase_add_test(tc, test_watermark_eviction);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_metrics_http);
	tcase_add_test(tc, test_kill_chaos);
	tcase_add_test(tc, test_restart_recovers);
	tcase_add_test(tc, test_access_control);
	tcase_add_test(tc, test_startup_refusals);
	tcase_add_test(tc, test_socket_activation);
	tcase_add_test(tc, test_tensorctl_messages);
	tcase_add_test(tc, test_protocol_robustness);
	tcase_add_test(tc, test_many_clients);
	tcase_add_test(tc, test_limits_fds);
	tcase_add_test(tc, test_default_socket_path);
	tcase_add_test(tc, test_hostile_clients);
	tcase_add_test(tc, test_load_save);
	tcase_add_test(tc, test_shrink_during_save);
	tcase_add_test(tc, test_damaged_arena_survived);
	tcase_add_test(tc, test_user_quotas);
	tcase_add_test(tc, test_cuda_exports);
	tcase_add_test(tc, test_cuda_exports_access);
	tcase_add_test(tc, test_cuda_exports_restart);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	self_exe = argv[0];
	runner_pid = getpid();
	if (argc == 5 && !strcmp(argv[1], "--client"))
		return chaos_client(argv[2], argv[3], atoi(argv[4]));
	SRunner *sr = srunner_create(tensord_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
