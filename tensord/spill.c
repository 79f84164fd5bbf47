// SPDX-License-Identifier: MIT
/*
 * Spilling: the arenas in spill mode (tn_arena_set_spill(3)) evict by writing tensors to disk,
 * and get them back when a lookup asks (shm.h's spilling section for the arena's side).
 *
 * Each such arena has a directory, spill_dir/NAME, of files named by number (the entry's
 * block word while it is spilled): ID.safetensors, each one tensor under its name, useful on
 * its own. The work runs on a worker thread per arena at a time (a job), never on the loop:
 *   - restores first: every entry a lookup flagged TN_ARENA_ENTRY_RESTORING is read into a
 *     block the daemon allocates (tnd_read_tensor, through io_uring, O_DIRECT for what is not
 *     cached) and named under its entry in one change (tn__arena_restore_commit), which wakes
 *     the waiting lookups; then the file is removed. A failure is recorded in the entry
 *     (tn__arena_restore_fail): the waiting lookups report it;
 *   - then, while the arena's use is above its high watermark, the least recently used
 *     evictable entries are written down to the low one: each to .ID.tmp, synced, renamed to
 *     ID.safetensors, and only then its block freed and the entry flagged spilled, in one
 *     change that first checks nobody looked it up meanwhile (else the file goes). A full
 *     disk fails the write: the tensor stays in memory and nothing is lost;
 *   - and a sweep of the directory at the first job and every SWEEP_NS: .tmp files and files
 *     no spilled entry names (a job killed between its rename and its change, a spilled name
 *     unpublished since) are removed.
 * A daemon killed at any instruction therefore leaves each entry resident or spilled with its
 * whole file, a block it allocated for a restore held by its dead slot (freed by the
 * reclamation of the slot at the next start), and at worst files the next sweep removes.
 *
 * The lookups that ask for a restore advance the arena's restore word and wake it (a futex in
 * the arena's header); a watcher thread sleeps on every arena's word at once (futex_waitv) and
 * wakes the loop through the event fd. An allocation that fails in a spilling arena wakes it
 * too, so that the watermark check comes at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../shm/shm.h"
#include "internal.h"
#include "daemon.h"
#include "loadsave.h"

#define WATCH_MAX 127                           /* arenas watched (futex_waitv takes 128) */
#define SWEEP_NS ((uint64_t)30 * 1000000000u) /* between sweeps of an arena's directory */

/* ---- the watcher ----------------------------------------------------------------------------- */

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct watched {
	_Atomic uint32_t *word;
	uint32_t seen;
} watched[WATCH_MAX];
static size_t nwatched;
static _Atomic uint32_t watch_kick; /* the loop's, to make the watcher read the list again */
static _Atomic bool watch_stop, poked;
static pthread_t watch_thread;
static bool watch_started;

static void wake_loop(void)
{
	uint64_t one = 1;
	ssize_t n = write(tnd_d.event_fd, &one, sizeof(one));
	(void)n;
}

static void *watch_run(void *arg)
{
	(void)arg;
	struct futex_waitv wv[WATCH_MAX + 1];
	bool vectored = true;
	while (!atomic_load(&watch_stop)) {
		size_t n = 0;
		bool moved = false;
		pthread_mutex_lock(&watch_lock);
		wv[n++] = (struct futex_waitv){ .val = atomic_load(&watch_kick),
						.uaddr = (uintptr_t)&watch_kick,
						.flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
		for (size_t i = 0; i < nwatched; i++) {
			uint32_t v = atomic_load(watched[i].word);
			if (v != watched[i].seen) {
				watched[i].seen = v;
				moved = true;
			}
			/* Shared: every process maps the arena file at its own address. */
			wv[n++] = (struct futex_waitv){ .val = v, .uaddr = (uintptr_t)watched[i].word,
							.flags = FUTEX_32 };
		}
		pthread_mutex_unlock(&watch_lock);
		/* The word was read before the loop looks: a request after the look moves it
		 * again, and the wait below returns at once. */
		if (moved) {
			atomic_store(&poked, true);
			wake_loop();
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 1;
		if (vectored) {
			long r = syscall(SYS_futex_waitv, wv, (unsigned)n, 0, &ts, CLOCK_MONOTONIC);
			if (r < 0 && errno == ENOSYS) {
				tnd_warn("spill: no futex_waitv (Linux 5.16): restore requests are polled "
					 "every 10 ms");
				vectored = false;
			}
		} else {
			struct timespec poll = { 0, 10000000 };
			nanosleep(&poll, NULL);
		}
	}
	return NULL;
}

void tnd_spill_sync(const struct tnd_arena *except)
{
	pthread_mutex_lock(&watch_lock);
	struct watched keep[WATCH_MAX];
	size_t n = 0;
	for (struct tnd_arena *ar = tnd_d.arenas; ar && n < WATCH_MAX; ar = ar->next) {
		if (ar == except || !ar->a || ar->damaged)
			continue;
		_Atomic uint32_t *w = tn__arena_restore_word(ar->a);
		uint32_t seen = atomic_load(w);
		for (size_t i = 0; i < nwatched; i++)
			if (watched[i].word == w)
				seen = watched[i].seen;
		keep[n++] = (struct watched){ w, seen };
	}
	memcpy(watched, keep, n * sizeof(*keep));
	nwatched = n;
	atomic_fetch_add(&watch_kick, 1);
	pthread_mutex_unlock(&watch_lock);
	syscall(SYS_futex, (uint32_t *)&watch_kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int tnd_spill_init(void)
{
	tnd_spill_sync(NULL);
	int e = pthread_create(&watch_thread, NULL, watch_run, NULL);
	if (e) {
		tnd_error("spill: cannot start the watcher thread: %s", strerror(e));
		return -1;
	}
	watch_started = true;
	return 0;
}

void tnd_spill_fini(void)
{
	if (!watch_started)
		return;
	atomic_store(&watch_stop, true);
	atomic_fetch_add(&watch_kick, 1);
	syscall(SYS_futex, (uint32_t *)&watch_kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(watch_thread, NULL);
	watch_started = false;
}

/* ---- jobs ------------------------------------------------------------------------------------ */

struct job {
	struct job *next;
	struct job *rnext;    /* the loop's list of running jobs */
	_Atomic bool cancel;  /* stop at the next chunk (the arena goes, or the daemon) */
	struct tnd_arena *ar; /* the loop's: not touched by the worker */
	tn_arena *a;          /* a reference of the worker's */
	char name[TND_NAME_SIZE];
	char dir[3200];
	bool sweep;
	bool may_spill; /* not while the arena's spill directory was found full lately */
	/* Results, read by the loop once the job ended. */
	uint64_t spills, spilled_bytes, spill_failures, restores, restored_bytes,
		restore_failures, removed, spill_ns, restore_ns;
	uint64_t used, high, low;
	bool disk_full;
	/* The owner's room under max_spill_bytes_per_user (UINT64_MAX: none), and the spills
	 * it refused. */
	uint64_t quota_left, over_quota;
	uint32_t owner;
	/* The arena's restore word when the job last served the restores asked for; whether it
	 * is restoring now (a restore may spill to make room, which does not serve restores). */
	uint32_t restore_seen;
	bool restoring;
};

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job *done_jobs;
static _Atomic int running;
static struct job *running_jobs; /* the loop's */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void file_path(char *buf, size_t cap, const struct job *j, uint64_t id, bool tmp)
{
	if (tmp)
		snprintf(buf, cap, "%s/.%016" PRIx64 ".tmp", j->dir, id);
	else
		snprintf(buf, cap, "%s/%016" PRIx64 ".safetensors", j->dir, id);
}

/* Whether @e's strides are those of C order (size-1 dims aside). */
static bool c_contiguous(const tn_arena_entry *e)
{
	int64_t expect = 1;
	for (int d = e->ndim - 1; d >= 0; d--) {
		if (e->sizes[d] == 0)
			return true;
		if (e->sizes[d] != 1 && e->strides[d] != expect)
			return false;
		expect *= e->sizes[d];
	}
	return true;
}

static int write_out(struct job *j, const struct tn__spill_item *it);
static void restore_wanted(struct job *j);

/* Spill what brings the use to @target (bytes used), least recently used first. Returns the
 * bytes of the blocks freed. */
static uint64_t spill_down(struct job *j, uint64_t target)
{
	struct tn__spill_item *v = NULL;
	size_t n = 0;
	uint64_t freed = 0;
	if (tn__arena_spill_candidates(j->a, target, &v, &n)) {
		tnd_warn("arena %s: spill: %s", j->name, tn_last_error());
		return 0;
	}
	for (size_t i = 0; i < n && !atomic_load(&j->cancel) && !j->disk_full; i++) {
		if (v[i].bytes > j->quota_left) {
			/* Over its owner's quota of disk: it stays in memory. */
			j->over_quota++;
			continue;
		}
		uint64_t t0 = now_ns();
		if (write_out(j, &v[i]) == 0) {
			j->spills++;
			j->spilled_bytes += v[i].bytes;
			freed += v[i].block_size;
			if (j->quota_left != UINT64_MAX)
				j->quota_left -= v[i].bytes;
		}
		j->spill_ns += now_ns() - t0;
		/* A lookup that asked for a tensor back does not wait for the whole batch. */
		if (!j->restoring && atomic_load(tn__arena_restore_word(j->a)) != j->restore_seen)
			restore_wanted(j);
	}
	free(v);
	return freed;
}

static int write_out(struct job *j, const struct tn__spill_item *it)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	uint64_t id;
	int r = tn__arena_spill_next_id(j->a, &id);
	if (r) {
		tnd_warn("arena %s: spill of \"%s\": %s", j->name, it->name, tn_last_error());
		j->spill_failures++;
		return r;
	}
	file_path(tmp, sizeof(tmp), j, id, true);
	file_path(path, sizeof(path), j, id, false);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = errno == ENOSPC || errno == EDQUOT ? TN_ENOSPC : TN_EIO;
		tnd_error("arena %s: spill of \"%s\": %s: %s", j->name, it->name, tmp,
			  strerror(errno));
		goto fail;
	}
	r = tnd_save(j->a, fd, TND_FORMAT_SAFETENSORS, it->name, TND_SAVE_ALIGN_PAGES, NULL, NULL,
		     &j->cancel, NULL);
	if (r == 0 && fsync(fd) != 0)
		r = tn__error(errno == ENOSPC || errno == EDQUOT ? TN_ENOSPC : TN_EIO,
			      "fsync %s: %s", tmp, strerror(errno));
	close(fd);
	if (r) {
		tnd_error("arena %s: spill of \"%s\" (%" PRIu64 " bytes) to %s: %s", j->name,
			  it->name, it->bytes, j->dir, tn_last_error());
		unlink(tmp);
		goto fail;
	}
	if (rename(tmp, path) != 0) {
		r = TN_EIO;
		tnd_error("arena %s: spill: rename %s: %s", j->name, tmp, strerror(errno));
		unlink(tmp);
		goto fail;
	}
	if ((r = tn__arena_spill_commit(j->a, it, id))) {
		/* Looked up or changed meanwhile: it stays, the file goes. */
		tnd_debug("arena %s: spill of \"%s\" abandoned: %s", j->name, it->name,
			  tn_last_error());
		unlink(path);
		return r;
	}
	tnd_debug("arena %s: spilled \"%s\" (%" PRIu64 " bytes) to %s", j->name, it->name,
		  it->bytes, path);
	return 0;
fail:
	j->spill_failures++;
	if (r == TN_ENOSPC)
		j->disk_full = true;
	return r;
}

/* A contiguous tensor of @e's dtype and sizes in a new block of @a, held by the daemon. */
static int new_tensor(tn_arena *a, const tn_arena_entry *e, uint64_t nbytes, tn_tensor **ret)
{
	tn_storage *s;
	int64_t strides[TN_ARENA_MAX_DIMS], step = 1;
	for (int d = e->ndim - 1; d >= 0; d--) {
		strides[d] = step;
		step *= e->sizes[d] > 1 ? e->sizes[d] : 1;
	}
	int r = tn_storage_new_with_allocator(TN_CPU, nbytes ? (size_t)nbytes : 1,
					      tn_arena_allocator(a), &s);
	if (r)
		return r;
	r = tn_tensor_new(s, 0, e->ndim, e->sizes, strides, e->dtype, ret);
	tn_storage_unref(s);
	return r;
}

/* Read @it back. Returns 0 when restored (or when the name went meanwhile). */
static int restore_one(struct job *j, const struct tn__spill_item *it)
{
	char path[PATH_MAX];
	tn_arena_entry e;
	tn_tensor *t = NULL;
	int r = tn_arena_info(j->a, it->name, &e);
	if (r || e.handle.index != it->handle.index || e.handle.generation != it->handle.generation ||
	    !(e.flags & TN_ARENA_ENTRY_SPILLED))
		return 0; /* unpublished, replaced or restored meanwhile */
	file_path(path, sizeof(path), j, it->id, false);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = tn__error(TN_EIO, "open %s: %s", path, strerror(errno));
		goto fail;
	}
	r = new_tensor(j->a, &e, it->bytes, &t);
	if (r == TN_ENOMEM) {
		/* Room is made as the watermark check makes it: by spilling others. */
		struct tn__spill_state st;
		if (tn__arena_spill_state(j->a, &st) == 0) {
			uint64_t need = it->bytes + 4096;
			spill_down(j, st.used > need ? st.used - need : 0);
		}
		r = new_tensor(j->a, &e, it->bytes, &t);
	}
	if (r == 0)
		r = tnd_read_tensor(fd, it->name, t, &j->cancel);
	close(fd);
	if (r)
		goto fail;
	struct tn__arena_desc desc = {
		.block = tn__arena_block_of(j->a, tn_storage_data(tn_tensor_storage(t)), NULL),
		.dtype = (uint32_t)e.dtype,
		.ndim = (uint32_t)e.ndim,
		.storage_offset = 0,
	};
	memcpy(desc.sizes, e.sizes, (size_t)e.ndim * sizeof(int64_t));
	/* A contiguous entry comes back with its own strides; a strided view as its copy. */
	memcpy(desc.strides, c_contiguous(&e) ? e.strides : tn_tensor_strides(t),
	       (size_t)e.ndim * sizeof(int64_t));
	r = tn__arena_restore_commit(j->a, it, &desc);
	tn_tensor_unref(t);
	if (r == TN_ESTALE) {
		unlink(path);
		return 0;
	}
	if (r)
		goto fail;
	unlink(path);
	j->restores++;
	j->restored_bytes += it->bytes;
	tnd_debug("arena %s: restored \"%s\" (%" PRIu64 " bytes) from %s", j->name, it->name,
		  it->bytes, path);
	return 0;
fail:
	tn_tensor_unref(t);
	tnd_error("arena %s: restore of \"%s\" from %s: %s", j->name, it->name, path,
		  tn_last_error());
	j->restore_failures++;
	tn__arena_restore_fail(j->a, it, r);
	return r;
}

static void restore_wanted(struct job *j)
{
	struct tn__spill_item *v = NULL;
	size_t n = 0;
	/* Read before the look: a request after it moves the word again. */
	j->restore_seen = atomic_load(tn__arena_restore_word(j->a));
	if (tn__arena_spilled(j->a, true, &v, &n)) {
		tnd_warn("arena %s: restore: %s", j->name, tn_last_error());
		return;
	}
	j->restoring = true;
	for (size_t i = 0; i < n && !atomic_load(&j->cancel); i++) {
		uint64_t t0 = now_ns();
		restore_one(j, &v[i]);
		j->restore_ns += now_ns() - t0;
	}
	j->restoring = false;
	free(v);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
	return p < q ? -1 : p > q;
}

/* Remove the temporary files and the files no spilled entry names. */
static void sweep(struct job *j)
{
	struct tn__spill_item *v = NULL;
	size_t n = 0;
	if (tn__arena_spilled(j->a, false, &v, &n))
		return;
	uint64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!ids) {
		free(v);
		return;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = v[i].id;
	free(v);
	qsort(ids, n, sizeof(*ids), cmp_u64);
	DIR *d = opendir(j->dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		uint64_t id;
		char tail[32];
		bool tmp = de->d_name[0] == '.' && sscanf(de->d_name, ".%16" SCNx64 "%20s", &id,
							  tail) == 2 && !strcmp(tail, ".tmp");
		bool ours = !tmp && sscanf(de->d_name, "%16" SCNx64 "%20s", &id, tail) == 2 &&
			    !strcmp(tail, ".safetensors") && strlen(de->d_name) == 16 + 12;
		if (!tmp && !(ours && !bsearch(&id, ids, n, sizeof(*ids), cmp_u64)))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
			j->removed++;
			tnd_info("arena %s: removed %s/%s (%s)", j->name, j->dir, de->d_name,
				 tmp ? "a spill that did not finish" : "no entry names it");
		}
	}
	if (d)
		closedir(d);
	free(ids);
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	if (mkdir(j->dir, 0700) != 0 && errno != EEXIST)
		tnd_error("arena %s: spill directory %s: %s", j->name, j->dir, strerror(errno));
	restore_wanted(j);
	struct tn__spill_state st;
	if (j->may_spill && tn__arena_spill_state(j->a, &st) == 0 && st.spill && st.used > st.high) {
		j->used = st.used;
		j->high = st.high;
		j->low = st.low;
		spill_down(j, st.low);
		/* A lookup that asked meanwhile is served before the job ends. */
		if (atomic_load(tn__arena_restore_word(j->a)) != j->restore_seen)
			restore_wanted(j);
	}
	if (j->sweep)
		sweep(j);
	pthread_mutex_lock(&done_lock);
	j->next = done_jobs;
	done_jobs = j;
	pthread_mutex_unlock(&done_lock);
	wake_loop();
	return NULL;
}

static void job_start(struct tnd_arena *ar, bool sweep_now)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->ar = ar;
	j->a = tn_arena_ref(ar->a);
	j->sweep = sweep_now;
	j->may_spill = now_ns() >= ar->spill_retry_ns;
	j->owner = ar->owner_uid;
	j->quota_left = UINT64_MAX;
	if (tnd_d.cfg.max_spill_bytes_per_user && !tnd_unlimited_user(ar->owner_uid)) {
		/* What the owner's arenas have on disk now (this job is the only writer of
		 * this arena's; the others' jobs may add to theirs meanwhile, by at most what
		 * they checked the same way). */
		uint64_t on_disk = 0;
		for (struct tnd_arena *o = tnd_d.arenas; o; o = o->next) {
			struct tn__spill_state st;
			if (o->owner_uid == ar->owner_uid && o->a && !o->damaged &&
			    tnd_arena_lockable(o) &&
			    tnd_arena_locked(o, tn__arena_spill_state(o->a, &st)) == 0)
				on_disk += st.spilled_bytes;
		}
		uint64_t max = tnd_d.cfg.max_spill_bytes_per_user;
		j->quota_left = on_disk < max ? max - on_disk : 0;
	}
	snprintf(j->name, sizeof(j->name), "%s", ar->name);
	snprintf(j->dir, sizeof(j->dir), "%.3000s/%.63s", tnd_d.cfg.spill_dir, ar->name);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	ar->spill_busy = true;
	ar->spill_again = false;
	atomic_fetch_add(&running, 1);
	j->rnext = running_jobs;
	running_jobs = j;
	int e = pthread_create(&t, &attr, job_run, j);
	pthread_attr_destroy(&attr);
	if (e) {
		ar->spill_busy = false;
		running_jobs = j->rnext;
		atomic_fetch_sub(&running, 1);
		tn_arena_unref(j->a);
		free(j);
		tnd_warn("arena %s: cannot start a spill worker: %s", ar->name, strerror(e));
		return;
	}
	if (sweep_now)
		ar->spill_swept_ns = now_ns();
}

void tnd_spill_consider(struct tnd_arena *ar, bool asked)
{
	if (!ar->a || ar->damaged || ar->spill_closed || tnd_d.stop)
		return;
	if (ar->spill_busy) {
		ar->spill_again = ar->spill_again || asked;
		return;
	}
	if (!tnd_arena_lockable(ar))
		return;
	struct tn__spill_state st;
	if (tnd_arena_locked(ar, tn__arena_spill_state(ar->a, &st)) || !st.spill)
		return;
	if (!tnd_d.cfg.spill_dir[0]) {
		if (!ar->spill_warned)
			tnd_warn("arena %s spills its evicted tensors, but tensord has no spill_dir "
				 "(tensord.conf): nothing is evicted from it", ar->name);
		ar->spill_warned = true;
		return;
	}
	bool sweep_due = !ar->spill_swept_ns || now_ns() - ar->spill_swept_ns >= SWEEP_NS;
	bool may_spill = st.used > st.high && now_ns() >= ar->spill_retry_ns;
	if (may_spill || (asked && st.spilled_names) || sweep_due)
		job_start(ar, sweep_due);
}

void tnd_spill_events(void)
{
	pthread_mutex_lock(&done_lock);
	struct job *list = done_jobs;
	done_jobs = NULL;
	pthread_mutex_unlock(&done_lock);
	for (struct job *j = list, *next; j; j = next) {
		next = j->next;
		struct tnd_arena *ar = j->ar;
		atomic_fetch_sub(&running, 1);
		for (struct job **pp = &running_jobs; *pp; pp = &(*pp)->rnext)
			if (*pp == j) {
				*pp = j->rnext;
				break;
			}
		if (!ar) {
			tn_arena_unref(j->a);
			free(j);
			continue;
		}
		ar->spill_busy = false;
		tnd_d.spills += j->spills;
		tnd_d.spilled_bytes += j->spilled_bytes;
		tnd_d.spill_failures += j->spill_failures;
		tnd_d.restores += j->restores;
		tnd_d.restored_bytes += j->restored_bytes;
		tnd_d.restore_failures += j->restore_failures;
		tnd_d.spill_ns += j->spill_ns;
		tnd_d.restore_ns += j->restore_ns;
		tnd_d.evictions += j->spills;
		if (j->spills || j->spill_failures)
			tnd_log(j->spill_failures ? TND_LOG_WARN : TND_LOG_INFO,
				"arena %s: %" PRIu64 " bytes used, above the high watermark (%" PRIu64
				"): spilled %" PRIu64 " tensors (%" PRIu64 " bytes) to %s in %.3f s"
				"%s%s", ar->name, j->used, j->high, j->spills, j->spilled_bytes, j->dir,
				(double)j->spill_ns / 1e9, j->spill_failures ? "; some failed" : "",
				j->disk_full ? " (the spill directory is full)" : "");
		if (j->over_quota)
			tnd_warn("arena %s: %" PRIu64 " tensors stay in memory: spilling them would "
				 "pass uid %u's max_spill_bytes_per_user (%" PRIu64 " bytes)", ar->name,
				 j->over_quota, (unsigned)j->owner, tnd_d.cfg.max_spill_bytes_per_user);
		tnd_d.spill_quota_refusals += j->over_quota;
		if (j->restores)
			tnd_info("arena %s: restored %" PRIu64 " tensors (%" PRIu64 " bytes) in %.3f s",
				 ar->name, j->restores, j->restored_bytes, (double)j->restore_ns / 1e9);
		if (j->disk_full) {
			/* Not again at once: each try writes until the disk says no. */
			ar->spill_backoff_ns = ar->spill_backoff_ns ? ar->spill_backoff_ns * 2
								    : 1000000000u;
			if (ar->spill_backoff_ns > 30000000000u)
				ar->spill_backoff_ns = 30000000000u;
			ar->spill_retry_ns = now_ns() + ar->spill_backoff_ns;
		} else if (j->spills) {
			ar->spill_backoff_ns = 0;
		}
		bool again = ar->spill_again && !j->disk_full;
		tn_arena_unref(j->a);
		free(j);
		if (again)
			tnd_spill_consider(ar, true);
	}
	if (atomic_exchange(&poked, false))
		for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next)
			tnd_spill_consider(ar, true);
}

bool tnd_spill_running(void)
{
	return atomic_load(&running) > 0;
}

void tnd_spill_cancel(void)
{
	for (struct job *j = running_jobs; j; j = j->rnext)
		atomic_store(&j->cancel, true);
}

void tnd_spill_forget(struct tnd_arena *ar)
{
	/* Its job, if one runs, stops at its next chunk: waited for here (the arena is going;
	 * what the job left half done is removed with the folder). */
	ar->spill_closed = true;
	for (struct job *j = running_jobs; j; j = j->rnext)
		if (j->ar == ar)
			atomic_store(&j->cancel, true);
	for (int i = 0; i < 20000 && ar->spill_busy; i++) {
		struct timespec ms = { 0, 500000 };
		nanosleep(&ms, NULL);
		tnd_spill_events();
	}
	if (ar->spill_busy) {
		tnd_warn("arena %s: its spill worker did not stop", ar->name);
		for (struct job *j = running_jobs; j; j = j->rnext)
			if (j->ar == ar)
				j->ar = NULL; /* its end is then only counted */
	}
	tnd_spill_sync(ar);
	if (!tnd_d.cfg.spill_dir[0])
		return;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.3000s/%s", tnd_d.cfg.spill_dir, ar->name);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	rmdir(dir);
}
