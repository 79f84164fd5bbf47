/* SPDX-License-Identifier: MIT */
/*
 * Fixtures and helpers of the suites that run arenas with real processes (check_arena,
 * check_remote): each test gets its own directory on /dev/shm (tmpfs), inside one the runner
 * makes for the suite and removes afterwards, even when a test's process fails or dies before
 * its own teardown. Define TN_TEST_SHM_PREFIX before including to name the suite's directory.
 */
#ifndef TN_ARENA_TESTUTIL_H
#define TN_ARENA_TESTUTIL_H

#include <dirent.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "testutil.h"

#ifndef TN_TEST_SHM_PREFIX
#define TN_TEST_SHM_PREFIX "tn-check"
#endif

static char base[64];        /* the suite's directory on /dev/shm, made and removed by the runner */
static char dir[96];         /* the current test's, inside it */
static char arena_file[256]; /* the file of the arena make() made last, for children to open */

/* Remove @path, first unmounting what a test mounted in it (a small tmpfs, hugetlbfs). */
static inline void remove_dir(const char *path)
{
	char cmd[352]; /* room for any path suite_teardown passes */
	snprintf(cmd, sizeof(cmd), "%s/small", path);
	umount2(cmd, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "%s/huge", path);
	umount2(cmd, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", path);
}

/* Unchecked fixtures: they run in the runner, so nothing a failed test made stays behind. */
static inline void suite_setup(void)
{
	strcpy(base, "/dev/shm/" TN_TEST_SHM_PREFIX "-XXXXXX");
	if (!mkdtemp(base))
		base[0] = 0;
}

static inline void suite_teardown(void)
{
	char sub[320];
	if (!base[0])
		return;
	DIR *d = opendir(base);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(sub, sizeof(sub), "%s/%s", base, de->d_name);
			remove_dir(sub);
		}
	if (d)
		closedir(d);
	remove_dir(base);
}

static inline void setup(void)
{
	ck_assert_msg(base[0], "no suite directory on /dev/shm");
	snprintf(dir, sizeof(dir), "%s/tXXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static inline void teardown(void)
{
	remove_dir(dir);
}

/* A new arena @name of @size bytes in the test's directory; its file goes to arena_file. */
static inline tn_arena *make(const char *name, uint64_t size)
{
	tn_arena_options o;
	tn_arena *a = NULL;
	tn_arena_options_init(&o);
	o.size = size;
	o.dir = dir;
	ck_assert_tn_ok(tn_arena_create(name, &o, &a));
	snprintf(arena_file, sizeof(arena_file), "%s", tn_arena_path(a));
	return a;
}

static inline tn_arena_stats stats(tn_arena *a)
{
	tn_arena_stats s;
	ck_assert_tn_ok(tn_arena_stat(a, &s));
	return s;
}

static inline void assert_clean(tn_arena *a)
{
	tn_arena_fsck_report rep;
	int r = tn_arena_fsck(a, 0, &rep);
	ck_assert_msg(r == 0 && rep.problems == 0, "fsck: %d problems, first: %s", (int)rep.problems,
		      rep.first_problem);
}

static inline int wait_status(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

#endif /* TN_ARENA_TESTUTIL_H */
