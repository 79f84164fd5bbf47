// SPDX-License-Identifier: MIT
/*
 * What a read-write grantee cannot do to the others (issue 17 C7, libtensor-arena(7) TRUST
 * MODEL), with real processes and a real tensord (tensord_testutil.h): tensord keeps its own
 * record of the seals and of the slots it assigned, in its directory where no client writes.
 *
 * - A grantee that clears a seal bit and writes the bytes: fsck reports the cleared seal, a
 *   repair (and, without one, the daemon's sweep) sets it again, VERIFY finds the bytes
 *   changed against the digest taken at the seal, and all of it holds across a daemon restart
 *   (NAME.seals). Unpublishing a sealed name, which every read-write client may do, drops its
 *   record. A LOAD with --seal is recorded too.
 * - A grantee that forges another live client's record in the file's client table: the daemon
 *   refuses it that client's slot on re-registration, an fsck repair writes the daemon's record
 *   back, and a daemon restarted over the forged table (NAME.slots) writes it back before
 *   anything reclaims by it, so the victim keeps its memory.
 */
#include "tensord_testutil.h"

#include "../shm/arena_remote.h"

/* A read-write grantee's child: clears the seal bits of @name in the arena file (the entry's
 * and the block's), looks the tensor up again (now writable) and writes into it. */
static int clear_and_write(const char *arena, const char *name, int32_t value)
{
	tn_tensord *cc;
	tn_arena *a;
	tn_arena_entry e;
	tn_tensor *t;
	EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
	EXPECT(tn_tensord_arena_open(cc, arena, 0, &a) == 0);
	EXPECT(tn_arena_info(a, name, &e) == 0);
	EXPECT(e.flags & TN_ARENA_ENTRY_SEALED);
	struct dir_entry *d = tn__entry_at(a, e.handle.index);
	struct block *b = tn__block_at(a, d->block);
	d->block_gen_flags &= ~((uint64_t)TN_ARENA_ENTRY_SEALED << 32);
	b->magic_flags &= ~((uint64_t)BLOCK_FLAG_SEALED << 32);
	EXPECT(tn_arena_lookup(a, name, &t, NULL) == 0);
	((int32_t *)tn_tensor_data(t))[7] = value;
	tn_tensor_unref(t);
	tn_arena_unref(a);
	tn_tensord_close(cc);
	_exit(0);
}

static void run_clear_and_write(const char *arena, const char *name, int32_t value)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		clear_and_write(arena, name, value);
	ck_assert_child_ok(pid);
}

static bool is_sealed(tn_arena *a, const char *name)
{
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, name, &e));
	return e.flags & TN_ARENA_ENTRY_SEALED;
}

/* VERIFY until every record has its digest (the first is taken off the daemon's loop just
 * after the seal): returns the last report, whose call gave @want. */
static tn_tensord_verify_report verify_settled(tn_tensord *c, const char *arena, uint64_t sealed)
{
	tn_tensord_verify_report rep;
	uint64_t deadline = now_ms() + 10000;
	for (;;) {
		int r = tn_tensord_verify(c, arena, &rep);
		ck_assert_msg(r == 0 || r == TN_EIO, "verify: %d %s", r, tn_last_error());
		if (rep.sealed == sealed && rep.checked == sealed)
			return rep;
		ck_assert_msg(now_ms() < deadline, "verify did not settle: %" PRIu64 " sealed, %"
			      PRIu64 " checked", rep.sealed, rep.checked);
		sleep_ms(10);
	}
}

START_TEST(test_seal_record)
{
	/* No sweep during the test: what is found is found by fsck and VERIFY. */
	daemon_setup_conf("reclaim_interval_ms = 3600000\n");
	tn_tensord *c = conn();
	make_arena(c, "seal", 8 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "seal", 0, &a));
	ck_assert_tn_ok(publish_i32(a, "w", 1000, 5));
	ck_assert_tn_ok(publish_i32(a, "v", 500, 9));
	ck_assert_tn_ok(publish_i32(a, "u", 100, 1)); /* never sealed */
	ck_assert_tn_ok(tn_arena_seal(a, "w"));
	ck_assert_tn_ok(tn_arena_seal(a, "v"));
	tn_tensord_verify_report vr = verify_settled(c, "seal", 2);
	ck_assert_uint_eq(vr.changed, 0);
	ck_assert_str_eq(vr.first_changed, "");
	tn_arena_fsck_report rep;
	ck_assert_tn_ok(tn_tensord_fsck(c, "seal", 0, &rep));
	ck_assert_uint_eq(rep.problems, 0);

	/* A grantee clears the seal of w and writes into it. */
	run_clear_and_write("seal", "w", -77);
	ck_assert(!is_sealed(a, "w"));
	ck_assert_int_eq(tn_tensord_fsck(c, "seal", 0, &rep), TN_EIO);
	ck_assert_uint_eq(rep.problems, 1);
	ck_assert_msg(strstr(rep.first_problem, "the seal of \"w\" was cleared by a client"),
		      "%s", rep.first_problem);
	ck_assert(!is_sealed(a, "w")); /* a check mends nothing */
	/* The repair sets the seal again from the daemon's record. */
	ck_assert_tn_ok(tn_tensord_fsck(c, "seal", TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(rep.problems, 1);
	ck_assert_uint_eq(rep.repaired, 1);
	ck_assert(is_sealed(a, "w"));
	/* VERIFY reads the bytes again: w changed, v did not. */
	ck_assert_int_eq(tn_tensord_verify(c, "seal", &vr), TN_EIO);
	ck_assert_uint_eq(vr.sealed, 2);
	ck_assert_uint_eq(vr.checked, 2);
	ck_assert_uint_eq(vr.changed, 1);
	ck_assert_str_eq(vr.first_changed, "w");
	ck_assert_msg(strstr(tn_last_error(), "first: \"w\""), "%s", tn_last_error());
	/* fsck reports it from then on, as something it cannot repair. */
	ck_assert_int_eq(tn_tensord_fsck(c, "seal", TN_ARENA_FSCK_REPAIR, &rep), TN_EIO);
	ck_assert_msg(strstr(rep.first_problem, "the sealed bytes of \"w\" changed"), "%s",
		      rep.first_problem);
	char out[4096];
	ck_assert_int_eq(tensorctl(out, sizeof(out),
				   (const char *[]){ "--socket", D.sock, "verify", "seal", NULL }),
			 6);
	ck_assert_msg(strstr(out, "2 sealed tensors, 2 checked, 1 changed (first: w)"), "%s", out);

	/* The record survives a daemon restart: v, changed after it, is found against the
	 * digest taken before it, and w is still known to have changed. */
	daemon_kill9();
	daemon_start();
	run_clear_and_write("seal", "v", 1234);
	ck_assert_int_eq(tn_tensord_verify(c, "seal", &vr), TN_EIO);
	ck_assert_uint_eq(vr.sealed, 2);
	ck_assert_uint_eq(vr.changed, 2);
	ck_assert_uint_eq(vr.restored, 1); /* v's seal bit, set again by the verification */
	ck_assert(is_sealed(a, "v"));

	/* Unpublishing a sealed name is allowed: its record goes with it. */
	ck_assert_tn_ok(tn_arena_unpublish(a, "w"));
	ck_assert_tn_ok(tn_arena_unpublish(a, "v"));
	ck_assert_tn_ok(tn_tensord_verify(c, "seal", &vr));
	ck_assert_uint_eq(vr.sealed, 0);
	ck_assert_tn_ok(tn_tensord_fsck(c, "seal", 0, &rep));
	ck_assert_uint_eq(rep.problems, 0);
	ck_assert_tn_ok(tn_arena_unpublish(a, "u"));
	tn_arena_unref(a);
	wait_clients(c, "seal", 1, 2000);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "seal", 0)); /* NAME.seals and .slots too */
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* The daemon's sweep sets a cleared seal again without being asked, and seals made by a LOAD
 * are recorded; a reader that looks the tensor up afterwards gets a read-only mapping. */
START_TEST(test_seal_sweep)
{
	daemon_setup_conf("reclaim_interval_ms = 20\n");
	tn_tensord *c = conn();
	make_arena(c, "sw", 8 << 20, 0, 0);
	char file[160];
	snprintf(file, sizeof(file), "%s/w.safetensors", D.dir);
	write_safetensors(file, 3, NULL, "t", 256, 1.0f);
	int fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_tn_ok(tn_tensord_load(c, "sw", fd, TN_TENSORD_FORMAT_AUTO, "", TN_TENSORD_SEAL,
					NULL, NULL, NULL));
	close(fd);
	tn_tensord_verify_report vr = verify_settled(c, "sw", 3);
	ck_assert_uint_eq(vr.changed, 0);

	run_clear_and_write("sw", "t00001", 42);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "sw", 0, &a));
	uint64_t deadline = now_ms() + 5000;
	while (!is_sealed(a, "t00001") && now_ms() < deadline)
		sleep_ms(10);
	ck_assert_msg(is_sealed(a, "t00001"), "the sweep did not set the cleared seal again");
	/* The daemon logs it just after the change that sets the seal: wait for the line. */
	const char *line = "arena sw: the seal of \"t00001\" was cleared by a client: set again";
	while (!log_has(line) && now_ms() < deadline + 5000)
		sleep_ms(10);
	ck_assert(log_has(line));
	tn_tensor *t;
	ck_assert_tn_ok(tn_arena_lookup(a, "t00001", &t, NULL));
	ck_assert_int_eq(tn_fill_(t, tn_scalar_int(1)), TN_EPERM);
	ck_assert(write_faults(tn_tensor_data(t)));
	tn_tensor_unref(t);
	ck_assert_int_eq(tn_tensord_verify(c, "sw", &vr), TN_EIO);
	ck_assert_uint_eq(vr.changed, 1);
	ck_assert_str_eq(vr.first_changed, "t00001");
	tn_arena_unref(a);
	wait_clients(c, "sw", 1, 2000);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "sw", 0));
	tn_tensord_close(c);
	daemon_finish();
}
END_TEST

/* A victim client holding a private block until told to check it and exit. */
static pid_t victim(const char *arena, int ready, int go)
{
	pid_t pid = fork_child();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tn_tensord *cc;
		tn_arena *a;
		uint32_t *p;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, arena, 0, &a) == 0);
		EXPECT(tn_arena_alloc(a, 4096, (void **)&p) == 0);
		for (int i = 0; i < 1024; i++)
			p[i] = 0x5eed0000u + (uint32_t)i;
		put_byte(ready);
		wait_byte(go);
		for (int i = 0; i < 1024; i++)
			EXPECT(p[i] == 0x5eed0000u + (uint32_t)i);
		EXPECT(tn_arena_free(a, p) == 0);
		tn_arena_unref(a);
		tn_tensord_close(cc);
		_exit(0);
	}
	return pid;
}

static tn_arena_client slot_of_pid(tn_arena *a, pid_t pid)
{
	tn_arena_client cl[TN_ARENA_MAX_CLIENTS];
	int n = tn_arena_clients(a, cl, TN_ARENA_MAX_CLIENTS);
	for (int i = 0; i < n; i++)
		if (cl[i].pid == pid)
			return cl[i];
	ck_abort_msg("no slot of pid %d", (int)pid);
	return cl[0];
}

/* A daemon sweeping every 20 ms, arena "forge", a victim holding a block in it, and the
 * test's own handle; *ret_go tells the victim to check its block and exit. */
static pid_t victim_start(tn_tensord **ret_c, tn_arena **ret_a, int *ret_go)
{
	daemon_setup_conf("reclaim_interval_ms = 20\n");
	*ret_c = conn();
	make_arena(*ret_c, "forge", 8 << 20, 0, 0);
	int ready[2], go[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = victim("forge", ready[1], go[0]);
	get_byte(ready[0]);
	ck_assert_tn_ok(tn_tensord_arena_open(*ret_c, "forge", 0, ret_a));
	*ret_go = go[1];
	return pid;
}

/* The victim's block is still its own: nobody else's allocation lands on it, and the victim
 * finds its bytes as it wrote them; then the arena goes and the daemon stops. */
static void victim_finish(tn_tensord *c, tn_arena *a, pid_t pid, int go)
{
	void *q[8];
	for (int i = 0; i < 8; i++)
		ck_assert_tn_ok(tn_arena_alloc(a, 4096, &q[i]));
	for (int i = 0; i < 8; i++)
		memset(q[i], 0xa5, 4096);
	put_byte(go);
	ck_assert_child_ok(pid);
	for (int i = 0; i < 8; i++)
		ck_assert_tn_ok(tn_arena_free(a, q[i]));
	tn_arena_unref(a);
	wait_clients(c, "forge", 1, 2000);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "forge", 0));
	tn_tensord_close(c);
	daemon_finish();
}

/* A read-write grantee forges another live client's start time in the file's client table.
 * The periodic sweep used to judge the slot dead from that record and reclaim it, freeing the
 * victim's private block under it; it judges the slots it assigned from its own record of the
 * socket's credentials, fsck reports the forgery and its repair writes the record back. */
START_TEST(test_forged_client_record)
{
	tn_tensord *c;
	tn_arena *a;
	int go;
	pid_t pid = victim_start(&c, &a, &go);
	tn_arena_client v = slot_of_pid(a, pid);
	struct client_rec *rec = tn__client_at(a, v.slot);
	rec->start_time ^= 0x12345;
	sleep_ms(300); /* fifteen sweeps */
	tn_arena_client now = slot_of_pid(a, pid); /* aborts when the slot was reclaimed */
	ck_assert_int_eq(now.slot, v.slot);
	ck_assert_uint_eq(now.held_blocks, 1);
	tn_arena_fsck_report rep;
	ck_assert_int_eq(tn_tensord_fsck(c, "forge", 0, &rep), TN_EIO);
	ck_assert_uint_ge(rep.problems, 1);
	ck_assert_ptr_nonnull(strstr(rep.first_problem, "written by another process"));
	ck_assert_tn_ok(tn_tensord_fsck(c, "forge", TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(rep.repaired, 1);
	ck_assert_uint_eq(rec->start_time, v.start_time);
	victim_finish(c, a, pid, go);
}
END_TEST

START_TEST(test_forged_record_restart)
{
	tn_tensord *c;
	tn_arena *a;
	int go;
	pid_t pid = victim_start(&c, &a, &go);
	tn_arena_client v = slot_of_pid(a, pid);
	ck_assert_uint_eq(v.held_blocks, 1);
	struct client_rec *rec = tn__client_at(a, v.slot);

	/* The grantee writes its own pid and start time into the victim's record and asks the
	 * daemon for that slot: the daemon's record says whose it is. */
	rec->pid = getpid();
	rec->start_time = tn__proc_start_time(getpid());
	int fd = raw_connect();
	raw_hello(fd);
	struct tnd_reattach m = { .slot = (uint32_t)v.slot };
	snprintf(m.name, sizeof(m.name), "forge");
	tn__arena_uuid(a, m.uuid);
	union {
		struct tnd_hdr h;
		unsigned char b[TND_MSG_MAX];
	} msg;
	build(&msg, TND_OP_REATTACH, &m, sizeof(m), 2);
	raw_send(fd, &msg, sizeof(msg.h) + sizeof(m), -1, -1);
	ssize_t n = raw_recv(fd, &msg, 10000);
	ck_assert_int_gt(n, (ssize_t)sizeof(msg.h));
	ck_assert_int_eq(msg.h.status, TN_ESTALE);
	ck_assert_ptr_nonnull(strstr((const char *)(msg.b + sizeof(msg.h)), "is not this process's"));
	close(fd);
	/* fsck reports the forgery; its repair writes the daemon's record back. */
	tn_arena_fsck_report rep;
	ck_assert_int_eq(tn_tensord_fsck(c, "forge", 0, &rep), TN_EIO);
	ck_assert_ptr_nonnull(strstr(rep.first_problem, "written by another process; not repaired"));
	ck_assert_tn_ok(tn_tensord_fsck(c, "forge", TN_ARENA_FSCK_REPAIR, &rep));
	ck_assert_uint_eq(rep.repaired, 1);
	ck_assert_ptr_nonnull(strstr(rep.first_problem, "tensord's record written back"));
	ck_assert_int_eq((int)rec->pid, (int)pid);
	ck_assert_uint_eq(rec->start_time, v.start_time);

	/* Forged again, then the daemon restarts over the forged table: its record from
	 * NAME.slots is written back before the recovery's repair could reclaim the slot. */
	rec->start_time ^= 0x12345;
	daemon_kill9();
	daemon_start();
	ck_assert(log_has("arena forge: 1 client records in its file differed from tensord's own"));
	sleep_ms(200); /* ten sweeps */
	tn_arena_client after = slot_of_pid(a, pid);
	ck_assert_int_eq(after.slot, v.slot);
	ck_assert_uint_eq(after.start_time, v.start_time);
	ck_assert_uint_eq(after.held_blocks, 1);
	victim_finish(c, a, pid, go);
}
END_TEST

static Suite *trust_suite(void)
{
	Suite *s = suite_create("tensord_trust");
	TCase *tc = tcase_create("trust");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, NULL, remove_leftovers);
	tcase_add_test(tc, test_seal_record);
	tcase_add_test(tc, test_seal_sweep);
	tcase_add_test(tc, test_forged_client_record);
	tcase_add_test(tc, test_forged_record_restart);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	runner_pid = getpid();
	SRunner *sr = srunner_create(trust_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
