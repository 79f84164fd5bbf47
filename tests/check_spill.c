// SPDX-License-Identifier: MIT
/*
 * Spilling to disk and back (tn_arena_set_spill(3)), with a real tensord whose spill_dir is a
 * private folder (tensord_testutil.h), real client processes and the files themselves:
 * - an arena filled past its high watermark keeps serving: the least recently used cache
 *   tensors go to disk, pinned ones and held ones stay, and read-write and read-only clients
 *   that look a spilled name up (by name, by handle, waiting) get it back bit-exact; the
 *   files, the figures, tensorctl ls and the metrics say where everything is;
 * - a spill directory that is full (a 1 MiB tmpfs the test mounts): the writes fail, the
 *   tensors stay in memory, nothing is lost and no file is left half written;
 * - a restore that cannot be made (its file removed) is reported to the lookups;
 * - tensord killed with SIGKILL during spills and restores, again and again: after each
 *   restart fsck is clean, every name is in memory with its bytes or on disk with its whole
 *   file, and no temporary or unnamed file survives the sweep;
 * - a client killed while it waits for a restore, and restores racing unpublishes: the
 *   arena ends with every byte free, held or named, and no file left.
 */
#include "tensord_testutil.h"

#ifdef TN_SANITIZED
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static char spill_dir[128];

/* Whether the first 8 KiB of @file hold @needle (a safetensors header does). */
static bool file_has(const char *file, const char *needle)
{
	char buf[8192];
	int fd = open(file, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return memmem(buf, n > 0 ? (size_t)n : 0, needle, strlen(needle)) != NULL;
}

/* A daemon with a spill directory of its own under /tmp (@mount_kib > 0: a tmpfs of that size
 * mounted there), watermark checks every 20 ms, and @extra in its tensord.conf. */
static void spill_setup(unsigned mount_kib, const char *extra)
{
	snprintf(spill_dir, sizeof(spill_dir), "/tmp/check-tensord-%d-spill-XXXXXX",
		 (int)runner_pid);
	ck_assert_ptr_nonnull(mkdtemp(spill_dir));
	if (mount_kib) {
		char opts[64];
		snprintf(opts, sizeof(opts), "size=%uk,mode=0700", mount_kib);
		ck_assert_msg(mount("tmpfs", spill_dir, "tmpfs", 0, opts) == 0,
			      "mount tmpfs on %s: %s (the test needs root)", spill_dir,
			      strerror(errno));
	}
	char conf[512];
	snprintf(conf, sizeof(conf), "spill_dir = %s\nevict_interval_ms = 20\n%s", spill_dir,
		 extra ? extra : "");
	daemon_setup_conf(conf);
}

/* After daemon_finish: the arenas were destroyed, so their spill folders are gone. */
static void spill_finish(bool mounted)
{
	ck_assert_int_eq(count_files(spill_dir), 0);
	if (mounted)
		ck_assert_int_eq(umount(spill_dir), 0);
	ck_assert_int_eq(rmdir(spill_dir), 0);
}

/* @n float32 values whose bits come from @seed (NaNs with payloads, infinities, denormals
 * and negative zeros among them): a bit-exact check, not a numeric one. */
static void fill_bits(uint32_t *d, int64_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15u + 1;
	for (int64_t i = 0; i < n; i++)
		d[i] = (uint32_t)(xorshift(&s) >> 17);
}

static tn_tensor *new_f32(tn_arena *a, int64_t n)
{
	tn_storage *s;
	tn_tensor *t;
	ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)n * 4, tn_arena_allocator(a),
						      &s));
	ck_assert_tn_ok(tn_tensor_new(s, 0, 1, &n, NULL, TN_FLOAT32, &t));
	tn_storage_unref(s);
	return t;
}

/* Publish @n random float32 (from @seed) as @name, a cache entry unless @pinned. */
static void publish_bits(tn_arena *a, const char *name, int64_t n, uint64_t seed, bool pinned)
{
	tn_tensor *t = new_f32(a, n);
	fill_bits(tn_tensor_data(t), n, seed);
	ck_assert_tn_ok(tn_arena_publish(a, name, t, TN_ARENA_REPLACE |
					 (pinned ? 0 : TN_ARENA_EVICTABLE), NULL));
	tn_tensor_unref(t);
}

/* 0 when the tensor @t holds the bits of publish_bits(@n, @seed), contiguous. */
static int bits_differ(tn_tensor *t, int64_t n, uint64_t seed)
{
	if (tn_tensor_numel(t) != n || tn_tensor_dtype(t) != TN_FLOAT32 ||
	    !tn_tensor_is_contiguous(t))
		return 2;
	uint32_t *want = malloc((size_t)n * 4);
	fill_bits(want, n, seed);
	int r = memcmp(want, tn_tensor_data(t), (size_t)n * 4) ? 3 : 0;
	free(want);
	return r;
}

/* Look @name up (waiting for a restore as tn_arena_lookup does) and compare its bits. */
static int check_bits(tn_arena *a, const char *name, int64_t n, uint64_t seed)
{
	tn_tensor *t;
	int r = tn_arena_lookup(a, name, &t, NULL);
	if (r)
		return r;
	r = bits_differ(t, n, seed);
	tn_tensor_unref(t);
	return r;
}

static uint32_t flags_of(tn_arena *a, const char *name)
{
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, name, &e));
	return e.flags;
}

static tn_arena_stats stat_of(tn_arena *a)
{
	tn_arena_stats s;
	ck_assert_tn_ok(tn_arena_stat(a, &s));
	return s;
}

/* Until the arena's use is at or below its low watermark (tensord spilled), 10 s at most. */
static tn_arena_stats wait_low(tn_arena *a)
{
	uint64_t deadline = now_ms() + 10000;
	for (;;) {
		tn_arena_stats s = stat_of(a);
		if (s.used_bytes <= s.low_water)
			return s;
		if (now_ms() >= deadline && getenv("SPILL_DEBUG")) {
			char cmd[256];
			snprintf(cmd, sizeof(cmd), "grep -v 'connected\\|gone\\|slot' %s | tail -40 >&2", D.log);
			if (system(cmd)) {}
		}
		ck_assert_msg(now_ms() < deadline, "tensord left %llu bytes used (low %llu; held "
			      "%llu, pinned %llu, evictable %llu, %llu spilled)",
			      (unsigned long long)s.used_bytes, (unsigned long long)s.low_water,
			      (unsigned long long)s.held_bytes, (unsigned long long)s.pinned_bytes,
			      (unsigned long long)s.evictable_bytes,
			      (unsigned long long)s.spilled_names);
		sleep_ms(5);
	}
}

/* The spill file of spilled entry @name, by the number its block word holds. */
static void file_of(tn_arena *a, const char *arena, const char *name, char *buf, size_t cap)
{
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, name, &e));
	ck_assert(e.flags & TN_ARENA_ENTRY_SPILLED);
	uint64_t id = tn__entry_at(a, e.handle.index)->block;
	snprintf(buf, cap, "%s/%s/%016llx.safetensors", spill_dir, arena, (unsigned long long)id);
}

static int files_in(const char *arena)
{
	char d[256];
	snprintf(d, sizeof(d), "%s/%s", spill_dir, arena);
	return count_files(d);
}

/* Until the arena's spill folder holds @n files, 5 s at most: a restore's lookup returns once
 * the block is named, and the daemon removes the file just after (in that order: a crash in
 * between leaves a file the sweep removes, never an entry without its file). */
static void wait_files(const char *arena, int n)
{
	uint64_t deadline = now_ms() + 5000;
	while (files_in(arena) != n && now_ms() < deadline)
		sleep_ms(5);
	ck_assert_int_eq(files_in(arena), n);
}

/* The arena's directory and heap are sound, once tensord reclaimed the slots of the clients
 * that died (it does on their connection's end; a gc request makes it now). */
static void assert_fsck_clean(tn_arena *a)
{
	tn_arena_fsck_report rep;
	uint64_t deadline = now_ms() + 10000;
	int r;
	while ((r = tn_arena_fsck(a, 0, &rep)) && rep.problems == rep.dead_clients &&
	       now_ms() < deadline) {
		tn_tensord *c;
		if (tn_tensord_connect(D.sock, &c) == 0) {
			tn_tensord_gc(c, NULL, NULL, NULL);
			tn_tensord_close(c);
		}
		sleep_ms(20);
	}
	ck_assert_msg(r == 0 && rep.problems == 0, "fsck: %llu problems: %s",
		      (unsigned long long)rep.problems, rep.first_problem);
}

#define NCACHE 10
#define CACHE_N (3 << 17) /* 1.5 MiB each (2 MiB and more are aligned to 2 MiB) */

START_TEST(test_spill_and_restore)
{
	spill_setup(0, NULL);
	tn_tensord *c = conn();
	make_arena(c, "sp", 32 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "sp", 0, &a));
	ck_assert_tn_ok(tn_arena_set_spill(a, true));
	static char out[1 << 17];
	char name[32];

	/* Pinned weights (4 MiB), ten 1.5 MiB cache tensors, one of them held by a reader, a
	 * strided view and a slice at an offset: 65% of the heap, below the high watermark. */
	publish_bits(a, "weights", 1 << 20, 1, true);
	for (int i = 0; i < NCACHE; i++) {
		snprintf(name, sizeof(name), "kv/%d", i);
		publish_bits(a, name, CACHE_N, 100 + (uint64_t)i, false);
		sleep_ms(5); /* one coarse clock tick apart: an order for LRU */
	}
	/* Each over a block of its own: a block two names share is not evictable. */
	int64_t rows = 256, cols = 512;
	tn_tensor *m = new_f32(a, rows * cols), *m2 = new_f32(a, 8192), *mv, *tr, *sl;
	fill_bits(tn_tensor_data(m), rows * cols, 7);
	fill_bits(tn_tensor_data(m2), 8192, 8);
	ck_assert_tn_ok(tn_view(m, 2, (int64_t[]){ rows, cols }, &mv));
	ck_assert_tn_ok(tn_transpose(mv, 0, 1, &tr));
	ck_assert_tn_ok(tn_arena_publish(a, "transposed", tr, TN_ARENA_EVICTABLE, NULL));
	ck_assert_tn_ok(tn_slice(m2, 0, 1000, 1000 + 4096, 1, &sl));
	ck_assert_tn_ok(tn_arena_publish(a, "slice", sl, TN_ARENA_EVICTABLE, NULL));
	/* Contiguous copies on the heap (clones are allocated there), to compare with. */
	tn_tensor *heap_tr, *heap_sl;
	ck_assert_tn_ok(tn_clone(tr, TN_CONTIGUOUS_FORMAT, &heap_tr));
	ck_assert_tn_ok(tn_clone(sl, TN_CONTIGUOUS_FORMAT, &heap_sl));
	tn_tensor_unref(tr);
	tn_tensor_unref(sl);
	tn_tensor_unref(mv);
	tn_tensor_unref(m);
	tn_tensor_unref(m2);

	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t holder = fork_child();
	ck_assert_int_ge(holder, 0);
	if (holder == 0) {
		tn_tensord *cc;
		tn_arena *b;
		tn_tensor *t;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, "sp", TN_TENSORD_READ_ONLY, &b) == 0);
		EXPECT(tn_arena_lookup(b, "kv/0", &t, NULL) == 0);
		put_byte(ready[1]);
		pause();
		_exit(0);
	}
	get_byte(ready[0]);
	tn_arena_stats s = stat_of(a);
	ck_assert(s.spill);
	ck_assert_uint_eq(s.spills, 0);

	/* The watermarks come down to 50% and 25%: tensord writes the least recently used
	 * cache tensors out until the use is at 25%. */
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
		"set", "sp", "--high-water", "50%", "--low-water", "25%", NULL }), 0);
	ck_assert_msg(strstr(out, "to disk"), "%s", out);
	s = wait_low(a);
	ck_assert_uint_gt(s.spilled_names, 0);
	ck_assert_uint_eq(s.spills, s.spilled_names);
	wait_files("sp", (int)s.spilled_names);
	/* The pinned weights and the held kv/0 stayed; the oldest others went first. */
	ck_assert_uint_eq(flags_of(a, "weights"), 0);
	ck_assert_uint_eq(flags_of(a, "kv/0"), TN_ARENA_ENTRY_CACHE);
	ck_assert(flags_of(a, "kv/1") & TN_ARENA_ENTRY_SPILLED);
	/* Least recently used first: the newest stayed. */
	ck_assert(!(flags_of(a, "slice") & TN_ARENA_ENTRY_SPILLED));
	/* Lower still: every evictable tensor not held goes. */
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 10, s.heap_bytes / 20));
	uint64_t deadline = now_ms() + 10000;
	while (!(flags_of(a, "slice") & TN_ARENA_ENTRY_SPILLED)) {
		ck_assert_msg(now_ms() < deadline, "slice was not spilled");
		sleep_ms(5);
	}
	s = stat_of(a);
	ck_assert_uint_eq(s.spilled_names, NCACHE - 1 + 2);
	ck_assert_uint_eq(s.spills, s.spilled_names);
	wait_files("sp", (int)s.spilled_names);
	ck_assert_uint_eq(flags_of(a, "weights"), 0);
	ck_assert_uint_eq(flags_of(a, "kv/0"), TN_ARENA_ENTRY_CACHE);
	uint64_t listed = 0;
	tn_arena_entry *es;
	size_t n;
	ck_assert_tn_ok(tn_arena_list(a, NULL, &es, &n));
	for (size_t i = 0; i < n; i++)
		if (es[i].flags & TN_ARENA_ENTRY_SPILLED) {
			ck_assert_uint_eq(es[i].block_bytes, 0);
			listed += (uint64_t)tn_dtype_size(es[i].dtype) *
				  (uint64_t)(es[i].ndim == 2 ? es[i].sizes[0] * es[i].sizes[1]
							     : es[i].sizes[0]);
		}
	free(es);
	ck_assert_uint_eq(listed, s.spilled_bytes);
	/* Each file is a safetensors file of the one tensor under its name. */
	char path[512];
	file_of(a, "sp", "kv/1", path, sizeof(path));
	struct stat fst;
	ck_assert_int_eq(stat(path, &fst), 0);
	ck_assert_int_ge(fst.st_size, (off_t)CACHE_N * 4);
	ck_assert_msg(file_has(path, "\"kv/1\""), "%s does not name kv/1", path);
	ck_assert_msg(log_has("spilled"), "no spill logged");
	assert_fsck_clean(a);

	/* tensorctl says where each tensor is. */
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "ls",
		"sp", NULL }), 0);
	ck_assert_msg(strstr(out, "WHERE") && strstr(out, " disk ") && strstr(out, " memory "),
		      "%s", out);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
		"--json", "ls", "sp", "kv/1", NULL }), 0);
	ck_assert_msg(strstr(out, "\"location\": \"disk\""), "%s", out);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "arena",
		"stat", "sp", NULL }), 0);
	ck_assert_msg(strstr(out, "spilled ") && strstr(out, "spilling to disk"), "%s", out);
	/* Eviction is tensord's alone in spill mode. */
	ck_assert_int_ne(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "evict",
		"sp", NULL }), 0);

	/* Back: the watermarks go up (so that what comes back stays), and a read-write client,
	 * a read-only one and this process look the spilled names up, by name, by handle and
	 * waiting; every byte comes back, the files go. */
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 100 * 95, s.heap_bytes / 100 * 90));
	pid_t rw = fork_child();
	ck_assert_int_ge(rw, 0);
	if (rw == 0) {
		tn_tensord *cc;
		tn_arena *b;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, "sp", 0, &b) == 0);
		EXPECT(check_bits(b, "kv/1", CACHE_N, 101) == 0);
		EXPECT(check_bits(b, "kv/2", CACHE_N, 102) == 0);
		_exit(0);
	}
	pid_t ro = fork_child();
	ck_assert_int_ge(ro, 0);
	if (ro == 0) {
		tn_tensord *cc;
		tn_arena *b;
		tn_tensor *t;
		EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
		EXPECT(tn_tensord_arena_open(cc, "sp", TN_TENSORD_READ_ONLY, &b) == 0);
		EXPECT(check_bits(b, "kv/3", CACHE_N, 103) == 0);
		tn_arena_lookup_options lo = { .timeout_ns = 10000000000 };
		EXPECT(tn_arena_lookup_wait(b, "kv/4", &lo, &t, NULL) == 0);
		EXPECT(bits_differ(t, CACHE_N, 104) == 0);
		tn_tensor_unref(t);
		_exit(0);
	}
	ck_assert_child_ok(rw);
	ck_assert_child_ok(ro);
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "kv/5", &e));
	tn_tensor *t;
	if (e.flags & TN_ARENA_ENTRY_SPILLED) {
		ck_assert_tn_ok(tn_arena_lookup_handle(a, e.handle, &t));
		ck_assert_int_eq(bits_differ(t, CACHE_N, 105), 0);
		tn_tensor_unref(t);
	}
	for (int i = 1; i <= 5; i++) {
		snprintf(name, sizeof(name), "kv/%d", i);
		ck_assert_uint_eq(flags_of(a, name), TN_ARENA_ENTRY_CACHE);
	}
	/* The strided view comes back as its contiguous copy; the slice at offset 0. */
	ck_assert(flags_of(a, "transposed") & TN_ARENA_ENTRY_SPILLED);
	ck_assert(flags_of(a, "slice") & TN_ARENA_ENTRY_SPILLED);
	ck_assert_tn_ok(tn_arena_lookup(a, "transposed", &t, NULL));
	ck_assert(tn_tensor_is_contiguous(t));
	ck_assert_int_eq(tn_tensor_ndim(t), 2);
	ck_assert_int_eq(tn_tensor_sizes(t)[0], cols);
	ck_assert_int_eq(memcmp(tn_tensor_data(t), tn_tensor_data(heap_tr), (size_t)rows * cols * 4),
			 0);
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_arena_lookup(a, "slice", &t, NULL));
	ck_assert_int_eq(tn_tensor_storage_offset(t), 0);
	ck_assert_int_eq(tn_tensor_numel(t), 4096);
	ck_assert_int_eq(memcmp(tn_tensor_data(t), tn_tensor_data(heap_sl), 4096 * 4), 0);
	tn_tensor_unref(t);
	tn_tensor_unref(heap_tr);
	tn_tensor_unref(heap_sl);
	s = stat_of(a);
	ck_assert_uint_ge(s.restores, 5);
	wait_files("sp", (int)s.spilled_names);
	ck_assert_msg(log_has("restored"), "no restore logged");

	/* The metrics show all of it. */
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
		"metrics", NULL }), 0);
	ck_assert_msg(strstr(out, "tensord_arena_spill{arena=\"sp\"} 1"), "%s", out);
	ck_assert_msg(strstr(out, "tensord_arena_spills_total{arena=\"sp\"} "), "%s", out);
	ck_assert_msg(strstr(out, "tensord_restores_total "), "%s", out);
	ck_assert_msg(!strstr(out, "tensord_restores_total 0\n"), "%s", out);
	/* Our lookups, counted in our client record of the arena. */
	char want[128];
	snprintf(want, sizeof(want), "tensord_arena_client_lookups_total{arena=\"sp\",pid=\"%d\",",
		 (int)getpid());
	const char *line = strstr(out, want);
	ck_assert_msg(line, "no '%s' in\n%s", want, out);
	unsigned long long looked = 0;
	ck_assert_int_eq(sscanf(strchr(line, '}') + 1, "%llu", &looked), 1);
	ck_assert_uint_ge(looked, 3);
	/* tensorctl top: two frames, the second with rates; our process among the clients. */
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "top",
		"--iterations", "2", "--delay", "0.2", NULL }), 0);
	ck_assert_msg(strstr(out, "RESTORE/s") && strstr(out, "\nsp ") && strstr(out, "LOOKUPS/s"),
		      "%s", out);
	char pidcol[32];
	snprintf(pidcol, sizeof(pidcol), "\n%8d sp ", (int)getpid());
	ck_assert_msg(strstr(out, pidcol), "no line for pid %d:\n%s", (int)getpid(), out);
	/* The first frame has no rates yet, the second has. */
	const char *second = strstr(strstr(out, "tensord up") + 1, "tensord up");
	ck_assert_ptr_nonnull(second);
	ck_assert_msg(strstr(out, ", - requests/s") < second && !strstr(second, ", - requests/s"),
		      "%s", out);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "top",
		"--delay", "0", NULL }), 64);

	/* A spilled name unpublished: its count goes; the file goes at the next sweep. The
	 * weights and the held kv/0 stay: 5.8 MiB; the watermarks at a fifth of the heap. */
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 5, s.heap_bytes / 5));
	s = wait_low(a);
	ck_assert_uint_gt(s.spilled_names, 0);
	ck_assert_tn_ok(tn_arena_list(a, "kv/", &es, &n));
	char gone[TN_ARENA_NAME_MAX + 1] = "";
	for (size_t i = 0; i < n && !gone[0]; i++)
		if (es[i].flags & TN_ARENA_ENTRY_SPILLED)
			strcpy(gone, es[i].name);
	free(es);
	ck_assert_tn_ok(tn_arena_unpublish(a, gone));
	ck_assert_uint_eq(stat_of(a).spilled_names, s.spilled_names - 1);

	kill(holder, SIGKILL);
	child_status(holder);
	assert_fsck_clean(a);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "sp", TN_ARENA_FORCE));
	ck_assert_int_eq(files_in("sp"), -1);
	tn_tensord_close(c);
	daemon_finish();
	spill_finish(false);
}
END_TEST

/* A full spill directory: every write fails, nothing is lost, nothing half written stays. */
START_TEST(test_spill_disk_full)
{
	if (geteuid() != 0) {
		/* Mounting a tmpfs needs root; CI runs as root. */
		fprintf(stderr, "test_spill_disk_full: not root: skipped\n");
		return;
	}
	spill_setup(1024, NULL);
	tn_tensord *c = conn();
	make_arena(c, "full", 32 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "full", 0, &a));
	ck_assert_tn_ok(tn_arena_set_spill(a, true));
	char name[32];
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "big/%d", i);
		publish_bits(a, name, CACHE_N, 200 + (uint64_t)i, false); /* each over 1 MiB */
	}
	tn_arena_stats s = stat_of(a);
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 10, s.heap_bytes / 20));
	uint64_t deadline = now_ms() + 10000;
	while (!log_has("spill directory is full") && now_ms() < deadline)
		sleep_ms(10);
	ck_assert_msg(log_has("spill directory is full"), "no full spill directory logged");
	ck_assert_msg(log_has("No space left on device"), "the cause is not logged");
	s = stat_of(a);
	ck_assert_uint_eq(s.spilled_names, 0);
	ck_assert_uint_eq(s.names, 6);
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "big/%d", i);
		ck_assert_int_eq(check_bits(a, name, CACHE_N, 200 + (uint64_t)i), 0);
	}
	/* No file half written, under any name (the daemon waits before it tries again: a
	 * write under way meanwhile is a temporary file, gone when it fails). */
	wait_files("full", 0);
	ck_assert_msg(log_count("the spill directory is full") <= 3, "tensord retries at once");
	static char out[1 << 17];
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
		"metrics", NULL }), 0);
	ck_assert_msg(strstr(out, "tensord_spill_failures_total ") &&
		      !strstr(out, "tensord_spill_failures_total 0\n"), "%s", out);
	assert_fsck_clean(a);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "full", TN_ARENA_FORCE));
	tn_tensord_close(c);
	daemon_finish();
	spill_finish(true);
}
END_TEST

/* A restore that cannot be made: the lookups are told why, and ask again. */
START_TEST(test_restore_failure)
{
	spill_setup(0, NULL);
	tn_tensord *c = conn();
	make_arena(c, "rf", 16 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "rf", 0, &a));
	ck_assert_tn_ok(tn_arena_set_spill(a, true));
	publish_bits(a, "lost", CACHE_N, 9, false);
	publish_bits(a, "kept", CACHE_N, 10, false);
	tn_arena_stats s = stat_of(a);
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 20, s.heap_bytes / 40));
	s = wait_low(a);
	ck_assert_uint_eq(s.spilled_names, 2);
	char path[512];
	file_of(a, "rf", "lost", path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 100 * 95, s.heap_bytes / 100 * 90));
	tn_tensor *t;
	ck_assert_tn_error_has(tn_arena_lookup(a, "lost", &t, NULL), TN_EIO, "could not read");
	/* Asked again: the lookup asked once, was told of the first failure and flagged the
	 * entry again, so it is flagged for a restore, or tensord has already tried again and
	 * failed a second time (a failure clears the flag and counts in one transaction: with
	 * the flag read clear, the count read after it has moved). */
	const uint32_t flags = flags_of(a, "lost");
	const uint64_t failures = stat_of(a).restore_failures;
	ck_assert_msg((flags & TN_ARENA_ENTRY_RESTORING) || failures >= 2,
		      "the failed lookup did not ask for the restore again (flags 0x%x, %llu "
		      "failures)", flags, (unsigned long long)failures);
	ck_assert_int_eq(check_bits(a, "kept", CACHE_N, 10), 0);
	ck_assert_uint_ge(stat_of(a).restore_failures, 1);
	ck_assert_msg(log_has("restore of \"lost\""), "the failure is not logged");
	/* tensorctl load --evictable publishes cache tensors; a plain load pins them. */
	char file[256], out[4096];
	snprintf(file, sizeof(file), "%s/two.safetensors", D.dir);
	write_safetensors(file, 2, NULL, "f", 1000, 5);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "load",
		"rf", file, "--prefix", "ev/", "--evictable", NULL }), 0);
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock, "load",
		"rf", file, "--prefix", "pin/", NULL }), 0);
	ck_assert_uint_eq(flags_of(a, "ev/f00000"), TN_ARENA_ENTRY_CACHE);
	ck_assert_uint_eq(flags_of(a, "pin/f00001"), 0);
	for (int i = 0; i < 2; i++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "ev/f%05d", i);
		ck_assert_tn_ok(tn_arena_unpublish(a, nm));
		snprintf(nm, sizeof(nm), "pin/f%05d", i);
		ck_assert_tn_ok(tn_arena_unpublish(a, nm));
	}
	/* The lookup's retry fails too; then the name goes. */
	ck_assert_int_ne(tn_arena_lookup(a, "lost", &t, NULL), 0);
	ck_assert_tn_ok(tn_arena_unpublish(a, "lost"));
	s = stat_of(a);
	ck_assert_uint_eq(s.spilled_names, 0);
	ck_assert_uint_eq(s.spilled_bytes, 0);
	assert_fsck_clean(a);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "rf", TN_ARENA_FORCE));
	tn_tensord_close(c);
	daemon_finish();
	spill_finish(false);
}
END_TEST

#define KILL_NAMES 24
#define KILL_N (1 << 18) /* 1 MiB each */

/* The killed daemon's arena after a restart: each name in memory with its bytes, or on disk
 * with its whole file; once the first job's sweep ran, no other file. */
static void check_after_restart(tn_arena *a, const char *arena)
{
	uint64_t deadline = now_ms() + 10000;
	/* The sweep runs in the first job after the start (a watermark check: every 20 ms). */
	for (;;) {
		tn_arena_stats s = stat_of(a);
		if (files_in(arena) == (int)s.spilled_names && log_count("listening on") >= 1)
			break;
		ck_assert_msg(now_ms() < deadline, "%d files for %llu spilled names",
			      files_in(arena), (unsigned long long)s.spilled_names);
		sleep_ms(10);
	}
	char name[32], path[512];
	for (int i = 0; i < KILL_NAMES; i++) {
		snprintf(name, sizeof(name), "k/%d", i);
		tn_arena_entry e;
		ck_assert_tn_ok(tn_arena_info(a, name, &e));
		if (e.flags & TN_ARENA_ENTRY_SPILLED) {
			file_of(a, arena, name, path, sizeof(path));
			struct stat st;
			ck_assert_msg(stat(path, &st) == 0 && st.st_size > (off_t)KILL_N * 4,
				      "%s: no whole file %s", name, path);
		}
	}
}

/* tensord killed with SIGKILL while it spills and restores, then started again. */
START_TEST(test_kill_during_spill_and_restore)
{
	spill_setup(0, NULL);
	tn_tensord *c = conn();
	make_arena(c, "kd", 64 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "kd", 0, &a));
	tn_tensord_close(c);
	ck_assert_tn_ok(tn_arena_set_spill(a, true));
	char name[32];
	publish_bits(a, "weights", KILL_N, 1, true);
	for (int i = 0; i < KILL_NAMES; i++) {
		snprintf(name, sizeof(name), "k/%d", i);
		publish_bits(a, name, KILL_N, 1000 + (uint64_t)i, false);
	}
	uint64_t heap = stat_of(a).heap_bytes, seed = 42;
	int rounds = SANITIZED ? 4 : 12, mid_write = 0, pending = 0;
	for (int round = 0; round < rounds; round++) {
		/* Alternately low and high watermarks: spills, or room for restores. */
		bool low = round % 2 == 0;
		ck_assert_tn_ok(tn_arena_set_watermarks(a, low ? heap / 10 : heap / 100 * 95,
							low ? heap / 20 : heap / 100 * 90));
		/* A reader asks for random names back meanwhile. */
		pid_t reader = fork_child();
		ck_assert_int_ge(reader, 0);
		if (reader == 0) {
			tn_tensord *cc;
			tn_arena *b;
			EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
			EXPECT(tn_tensord_arena_open(cc, "kd", 0, &b) == 0);
			uint64_t s = (uint64_t)getpid();
			for (;;) {
				char nm[32];
				int i = (int)(xorshift(&s) % KILL_NAMES);
				snprintf(nm, sizeof(nm), "k/%d", i);
				tn_tensor *t;
				tn_arena_lookup_options lo = { .timeout_ns = 200000000 };
				if (tn_arena_lookup_wait(b, nm, &lo, &t, NULL) == 0) {
					EXPECT(bits_differ(t, KILL_N, 1000 + (uint64_t)i) == 0);
					tn_tensor_unref(t);
				}
			}
		}
		sleep_ms(5 + (unsigned)(xorshift(&seed) % 40));
		daemon_kill9();
		kill(reader, SIGKILL);
		child_status(reader);
		/* What the kill interrupted: a write (its temporary file), restores asked for. */
		char d[256];
		snprintf(d, sizeof(d), "%s/kd", spill_dir);
		DIR *dd = opendir(d);
		struct dirent *de;
		while (dd && (de = readdir(dd)))
			if (strstr(de->d_name, ".tmp"))
				mid_write++;
		if (dd)
			closedir(dd);
		tn_arena_entry *es;
		size_t n;
		ck_assert_tn_ok(tn_arena_list(a, NULL, &es, &n));
		for (size_t i = 0; i < n; i++)
			if (es[i].flags & TN_ARENA_ENTRY_RESTORING)
				pending++;
		free(es);
		daemon_start();
		check_after_restart(a, "kd");
	}
	fprintf(stderr, "test_kill_during_spill_and_restore: %d rounds; the kills interrupted %d "
		"writes and left %d restores asked for\n", rounds, mid_write, pending);
	/* Every name comes back bit-exact; then the arena is sound. */
	ck_assert_tn_ok(tn_arena_set_watermarks(a, heap / 100 * 95, heap / 100 * 90));
	ck_assert_int_eq(check_bits(a, "weights", KILL_N, 1), 0);
	for (int i = 0; i < KILL_NAMES; i++) {
		snprintf(name, sizeof(name), "k/%d", i);
		ck_assert_msg(check_bits(a, name, KILL_N, 1000 + (uint64_t)i) == 0, "%s: %s", name,
			      tn_last_error());
	}
	tn_arena_stats s = stat_of(a);
	ck_assert_uint_eq(s.spilled_names, 0);
	wait_files("kd", 0);
	/* The readers' and the killed daemons' slots go with the reclamation. */
	assert_fsck_clean(a);
	tn_arena_unref(a);
	c = conn();
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "kd", TN_ARENA_FORCE));
	tn_tensord_close(c);
	daemon_finish();
	spill_finish(false);
}
END_TEST

/* Spill @name (the only cache entry) and make room for it to come back. */
static void spill_one(tn_arena *a, const char *name, uint64_t heap)
{
	ck_assert_tn_ok(tn_arena_set_watermarks(a, heap / 200, heap / 400));
	uint64_t deadline = now_ms() + 10000;
	while (!(flags_of(a, name) & TN_ARENA_ENTRY_SPILLED)) {
		ck_assert_msg(now_ms() < deadline, "%s was not spilled", name);
		sleep_ms(5);
	}
	ck_assert_tn_ok(tn_arena_set_watermarks(a, heap / 100 * 95, heap / 100 * 90));
}

/* A client killed while it waits for a restore, and restores racing unpublishes. */
START_TEST(test_restore_kill_and_race)
{
	spill_setup(0, NULL);
	tn_tensord *c = conn();
	make_arena(c, "rk", 64 << 20, 0, 0);
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "rk", 0, &a));
	ck_assert_tn_ok(tn_arena_set_spill(a, true));
	uint64_t heap = stat_of(a).heap_bytes, seed = 7;
	uint64_t base_used = stat_of(a).used_bytes;
	int rounds = SANITIZED ? 4 : 12;
	const int64_t big = 6 << 20; /* 24 MiB: a restore that takes a while */
	for (int round = 0; round < rounds; round++) {
		publish_bits(a, "big", big, 50 + (uint64_t)round, false);
		spill_one(a, "big", heap);
		pid_t waiter = fork_child();
		ck_assert_int_ge(waiter, 0);
		if (waiter == 0) {
			tn_tensord *cc;
			tn_arena *b;
			tn_tensor *t;
			EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
			EXPECT(tn_tensord_arena_open(cc, "rk", round % 2 ? TN_TENSORD_READ_ONLY : 0,
						     &b) == 0);
			EXPECT(tn_arena_lookup(b, "big", &t, NULL) == 0);
			_exit(0);
		}
		sleep_ms((unsigned)(xorshift(&seed) % 8));
		kill(waiter, SIGKILL);
		child_status(waiter);
		/* The restore goes on without it, or is asked for by us. */
		ck_assert_int_eq(check_bits(a, "big", big, 50 + (uint64_t)round), 0);
		ck_assert_tn_ok(tn_arena_unpublish(a, "big"));
	}
	/* Restores racing unpublishes: the lookup gets the tensor whole, or nothing. */
	for (int round = 0; round < rounds; round++) {
		publish_bits(a, "race", CACHE_N, 70 + (uint64_t)round, false);
		spill_one(a, "race", heap);
		pid_t looker = fork_child();
		ck_assert_int_ge(looker, 0);
		if (looker == 0) {
			tn_tensord *cc;
			tn_arena *b;
			tn_tensor *t;
			EXPECT(tn_tensord_connect(D.sock, &cc) == 0);
			EXPECT(tn_tensord_arena_open(cc, "rk", 0, &b) == 0);
			int r = tn_arena_lookup(b, "race", &t, NULL);
			EXPECT(r == 0 || r == TN_ENOENT);
			if (r == 0) {
				EXPECT(bits_differ(t, CACHE_N, 70 + (uint64_t)round) == 0);
				tn_tensor_unref(t);
			}
			_exit(0);
		}
		sleep_ms((unsigned)(xorshift(&seed) % 4));
		ck_assert_tn_ok(tn_arena_unpublish(a, "race"));
		ck_assert_child_ok(looker);
	}
	/* Every byte is free again (the dead waiters' slots reclaimed), the arena is sound,
	 * and no file stays once the sweep ran (a restart runs it at once). */
	assert_fsck_clean(a);
	uint64_t deadline = now_ms() + 10000;
	while (stat_of(a).used_bytes != base_used && now_ms() < deadline)
		sleep_ms(20);
	ck_assert_uint_eq(stat_of(a).used_bytes, base_used);
	ck_assert_uint_eq(stat_of(a).names, 0);
	assert_fsck_clean(a);
	tn_tensord_close(c);
	daemon_kill9();
	daemon_start();
	deadline = now_ms() + 10000;
	while (files_in("rk") > 0 && now_ms() < deadline)
		sleep_ms(10);
	ck_assert_int_eq(files_in("rk"), 0);
	tn_arena_unref(a);
	c = conn();
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "rk", TN_ARENA_FORCE));
	tn_tensord_close(c);
	daemon_finish();
	spill_finish(false);
}
END_TEST

/* nobody's part of the quota test: arenas up to its names quota, spill mode on its own. */
static int nobody_spill_arena(int unused)
{
	(void)unused;
	tn_tensord *c;
	tn_arena *a;
	EXPECT(tn_tensord_connect(D.sock, &c) == 0);
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 16 << 20;
	o.max_names = 2000;
	EXPECT(tn_tensord_arena_create(c, "q", &o) == 0);
	EXPECT(tn_tensord_arena_create(c, "q2", &o) == TN_ENOSPC);
	EXPECT(strstr(tn_last_error(), "max_names_per_user") != NULL);
	o.max_names = 1000;
	EXPECT(tn_tensord_arena_create(c, "q2", &o) == 0);
	EXPECT(tn_tensord_arena_destroy(c, "q2", 0) == 0);
	EXPECT(tn_tensord_arena_open(c, "q", 0, &a) == 0);
	EXPECT(tn_arena_set_spill(a, true) == 0);
	tn_arena_unref(a);
	tn_tensord_close(c);
	return 0;
}

/* Per-user quotas: the names of the arenas a user owns, and the bytes spilled from them,
 * counted apart from the bytes of the arenas (resident). */
START_TEST(test_spill_quota)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_spill_quota: not root: skipped\n");
		return;
	}
	spill_setup(0, "create_users = *\nmax_names_per_user = 3000\n"
		    "max_spill_bytes_per_user = 3500K\n");
	ck_assert_child_ok(as_nobody(nobody_spill_arena, 0));
	tn_tensord *c = conn();
	tn_arena *a;
	ck_assert_tn_ok(tn_tensord_arena_open(c, "q", 0, &a));
	char name[32];
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "t/%d", i);
		publish_bits(a, name, CACHE_N, 300 + (uint64_t)i, false);
		sleep_ms(5);
	}
	tn_arena_stats s = stat_of(a);
	ck_assert_tn_ok(tn_arena_set_watermarks(a, s.heap_bytes / 20, s.heap_bytes / 40));
	/* Two fit in 3500 KiB of disk; the other two stay in memory. */
	uint64_t deadline = now_ms() + 10000;
	while (!log_has("max_spill_bytes_per_user") && now_ms() < deadline)
		sleep_ms(10);
	ck_assert_msg(log_has("max_spill_bytes_per_user"), "no quota refusal logged");
	s = stat_of(a);
	ck_assert_uint_eq(s.spilled_names, 2);
	ck_assert_uint_eq(s.spilled_bytes, 2 * CACHE_N * 4);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "t/%d", i);
		ck_assert_uint_eq(!!(flags_of(a, name) & TN_ARENA_ENTRY_SPILLED), i < 2);
	}
	static char out[1 << 17];
	ck_assert_int_eq(tensorctl(out, sizeof(out), (const char *[]){ "--socket", D.sock,
		"metrics", NULL }), 0);
	char want[128];
	snprintf(want, sizeof(want), "tensord_user_spilled_bytes{uid=\"%d\"} %d\n", NOBODY,
		 2 * CACHE_N * 4);
	ck_assert_msg(strstr(out, want), "no '%s' in\n%s", want, out);
	snprintf(want, sizeof(want), "tensord_user_names{uid=\"%d\"} 2000\n", NOBODY);
	ck_assert_msg(strstr(out, want), "no '%s' in\n%s", want, out);
	ck_assert_msg(!strstr(out, "tensord_spill_quota_refusals_total 0\n"), "%s", out);
	/* Back, and gone. */
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "t/%d", i);
		ck_assert_int_eq(check_bits(a, name, CACHE_N, 300 + (uint64_t)i), 0);
	}
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "q", TN_ARENA_FORCE));
	tn_tensord_close(c);
	daemon_finish();
	spill_finish(false);
}
END_TEST

static Suite *spill_suite(void)
{
	Suite *s = suite_create("spill");
	TCase *tc = tcase_create("spill");
	tcase_set_timeout(tc, SANITIZED ? 600 : 240);
	tcase_add_test(tc, test_spill_and_restore);
	tcase_add_test(tc, test_spill_disk_full);
	tcase_add_test(tc, test_restore_failure);
	tcase_add_test(tc, test_spill_quota);
	tcase_add_test(tc, test_kill_during_spill_and_restore);
	tcase_add_test(tc, test_restore_kill_and_race);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	runner_pid = getpid();
	SRunner *sr = srunner_create(spill_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	remove_leftovers();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
