// SPDX-License-Identifier: MIT
/*
 * tensord's arena records (daemon.h). An arena the daemon serves is its own attachment and a
 * record kept in NAME.meta beside the arena file NAME.arena in the daemon's directory (0700,
 * files 0600, written atomically): the owner, the mode bits, the grants and the creation
 * time, so that clients never need file system access to either. At start the daemon reopens
 * the arenas recorded there, repairs them and reclaims the slots of processes that are gone.
 * An arena whose file shrank under the daemon's mapping is damaged: from then on only its
 * forced destruction is served, and its mapping is kept until the daemon exits.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../shm/arena_internal.h"
#include "../shm/arena_remote.h"
#include "../shm/shm.h"
#include "daemon.h"
#include "loadsave.h"

static tn_arena **abandoned; /* handles of destroyed damaged arenas: mapped until exit */
static size_t nabandoned;

/* ---- records --------------------------------------------------------------------------------- */

static void meta_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%.3700s/%.63s.meta", tnd_d.cfg.arena_dir, name);
}

/* Write NAME.meta atomically (temporary file, fsync, rename). */
int tnd_arena_write_record(const struct tnd_arena *ar)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	meta_path(path, sizeof(path), ar->name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fchmod(fileno(f), 0600);
	fprintf(f, "# tensord arena record; written by tensord, do not edit\nversion = 1\n"
		   "name = %s\npath = %s\nowner_uid = %u\nowner_gid = %u\nmode = %o\n"
		   "created = %" PRIu64 "\n",
		ar->name, ar->path, ar->owner_uid, ar->owner_gid, ar->mode, ar->created);
	for (uint32_t i = 0; i < ar->ngrants; i++)
		fprintf(f, "grant = %s:%u:%s\n",
			ar->grants[i].kind == TND_GRANT_USER ? "user" : "group", ar->grants[i].id,
			ar->grants[i].access == TND_ACCESS_READ ? "ro" : "rw");
	int e = fflush(f) || fsync(fileno(f)) ? errno : 0;
	if (fclose(f) && !e)
		e = errno;
	if (!e && rename(tmp, path))
		e = errno;
	if (e)
		unlink(tmp);
	return -e;
}

/* Read a record; returns 0 or -1 with a reason. */
static int meta_read(const char *file, struct tnd_arena *ar, char *why, size_t whylen)
{
	FILE *f = fopen(file, "re");
	if (!f) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	char line[PATH_MAX + 64];
	unsigned version = 0;
	bool have_owner = false;
	memset(ar, 0, sizeof(*ar));
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		char *eq = strstr(line, " = ");
		if (!eq) {
			snprintf(why, whylen, "malformed line \"%.60s\"", line);
			goto bad;
		}
		*eq = 0;
		const char *k = line, *v = eq + 3;
		char kind[8], acc[4];
		unsigned id;
		if (!strcmp(k, "version")) {
			version = (unsigned)strtoul(v, NULL, 10);
		} else if (!strcmp(k, "name")) {
			snprintf(ar->name, sizeof(ar->name), "%s", v);
		} else if (!strcmp(k, "path")) {
			snprintf(ar->path, sizeof(ar->path), "%s", v);
		} else if (!strcmp(k, "owner_uid")) {
			ar->owner_uid = (uint32_t)strtoul(v, NULL, 10);
			have_owner = true;
		} else if (!strcmp(k, "owner_gid")) {
			ar->owner_gid = (uint32_t)strtoul(v, NULL, 10);
		} else if (!strcmp(k, "mode")) {
			ar->mode = (uint32_t)strtoul(v, NULL, 8) & 0077;
		} else if (!strcmp(k, "created")) {
			ar->created = strtoull(v, NULL, 10);
		} else if (!strcmp(k, "grant") && ar->ngrants < TND_MAX_GRANTS &&
			   sscanf(v, "%7[a-z]:%u:%3[a-z]", kind, &id, acc) == 3) {
			struct tnd_grant *g = &ar->grants[ar->ngrants++];
			g->kind = !strcmp(kind, "user") ? TND_GRANT_USER : TND_GRANT_GROUP;
			g->id = id;
			g->access = !strcmp(acc, "ro") ? TND_ACCESS_READ : TND_ACCESS_READ_WRITE;
		} else {
			snprintf(why, whylen, "unknown key \"%.40s\"", k);
			goto bad;
		}
	}
	fclose(f);
	if (version != 1 || !tnd_name_ok(ar->name) || !ar->path[0] || !have_owner) {
		snprintf(why, whylen, "incomplete record (version %u)", version);
		return -1;
	}
	return 0;
bad:
	fclose(f);
	return -1;
}

struct tnd_arena *tnd_arena_find(const char *name)
{
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next)
		if (!strcmp(ar->name, name))
			return ar;
	return NULL;
}

/* The directory and file name of an arena file path. */
static void split_path(const char *path, char *dir, size_t dlen, const char **file)
{
	const char *slash = strrchr(path, '/');
	size_t n = (size_t)(slash - path);
	snprintf(dir, dlen, "%.*s", (int)n, path);
	*file = slash + 1;
}

/* ---- the daemon's attachments ---------------------------------------------------------------- */

uint64_t tnd_arena_file_size(tn_arena *a)
{
	struct stat st;
	return fstat(tn_arena_fd(a), &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* A read-write client can ftruncate the arena file (any writable descriptor can); touching
 * the mapping past the new end raises SIGBUS in the daemon. Check the size before serving an
 * arena, and from then on serve only its destruction. A shrink between this check and an
 * access is caught by the SIGBUS guard (guard.c), which this check reads too. */
bool tnd_arena_intact(struct tnd_arena *ar)
{
	struct stat st;
	if (ar->damaged)
		return false;
	if (tnd_guard_hit(&ar->guard)) {
		ar->damaged = true;
		tnd_error("arena %s: its file shrank while the daemon used it; the access past its "
			  "end was caught (SIGBUS) and read zeros: serving only its destruction",
			  ar->name);
		return false;
	}
	if (fstat(tn_arena_fd(ar->a), &st) == 0 && (uint64_t)st.st_size < ar->size) {
		ar->damaged = true;
		tnd_error("arena %s: its file shrank to %lld bytes under a mapping of %" PRIu64
			  ": serving only its destruction", ar->name, (long long)st.st_size,
			  ar->size);
		return false;
	}
	return true;
}

/* Register a newly mapped arena with the SIGBUS guard. */
void tnd_arena_guard(struct tnd_arena *ar)
{
	if (tnd_guard_add(ar->a, &ar->guard))
		tnd_warn("arena %s: not guarded against a shrinking file (no room in the guard's "
			 "table)", ar->name);
}

/* Put a new or recovered arena on the daemon's list. */
void tnd_arena_add(struct tnd_arena *ar)
{
	ar->next = tnd_d.arenas;
	tnd_d.arenas = ar;
	tnd_d.narenas++;
	tnd_spill_sync(NULL);
}

/* Take @ar off the daemon's list and remove its file and record (@intact: what
 * tnd_arena_intact said of it). @ar itself stays for the caller to report and free. */
void tnd_arena_remove(struct tnd_arena *ar, bool intact)
{
	char dir[PATH_MAX], mp[PATH_MAX];
	const char *file;
	split_path(ar->path, dir, sizeof(dir), &file);
	tnd_forget_arena(ar);
	tnd_spill_forget(ar);
	/* A damaged arena's mapping is left alone (letting go of the slot would touch pages
	 * past the end of the file): it stays mapped, unused, until the daemon exits. */
	if (intact) {
		tnd_guard_forget(&ar->guard);
		tn_arena_unref(ar->a);
	} else {
		tn_arena **p = realloc(abandoned, (nabandoned + 1) * sizeof(*p));
		if (p) {
			p[nabandoned++] = ar->a;
			abandoned = p;
		}
	}
	ar->a = NULL;
	int r = tn_arena_destroy(file, dir, TN_ARENA_FORCE);
	if (r && r != TN_ENOENT)
		tnd_warn("arena %s: removing %s: %s", ar->name, ar->path, tn_last_error());
	meta_path(mp, sizeof(mp), ar->name);
	unlink(mp);
	tnd_ledger_close(ar, true);
	for (struct tnd_arena **pp = &tnd_d.arenas; *pp; pp = &(*pp)->next)
		if (*pp == ar) {
			*pp = ar->next;
			break;
		}
	tnd_d.narenas--;
}

/* ---- the arena's lock ------------------------------------------------------------------------ */

/* The process whose thread holds @ar's lock, 0 when unlocked or it cannot be told. The lock is
 * glibc's robust mutex in the arena's header, whose owner field is the holder's thread id;
 * only read here, and only to name the holder in a message. */
static int lock_owner_tid(struct tnd_arena *ar)
{
#ifndef __GLIBC__
	/* Another C library's mutex: the holder is unknown, the back-off runs its course. */
	(void)ar;
	return -1;
#else
	struct tn__arena_mapping m;
	if (tn__arena_mapping(ar->a, &m) || m.size < sizeof(struct arena_header))
		return 0;
	const pthread_mutex_t *mx =
		(const pthread_mutex_t *)((const char *)m.base + offsetof(struct arena_header, lock));
	return __atomic_load_n(&mx->__data.__owner, __ATOMIC_RELAXED);
#endif
}

static pid_t lock_holder(struct tnd_arena *ar)
{
	int tid = lock_owner_tid(ar);
	if (tid <= 0)
		return 0;
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	FILE *f = fopen(path, "re");
	pid_t pid = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &pid) == 1)
			break;
	if (f)
		fclose(f);
	return pid > 0 ? pid : 0;
}

static int locked_error(struct tnd_arena *ar)
{
	if (ar->lock_holder)
		return tn__error(TN_EBUSY, "arena \"%s\" is locked by pid %d (stopped or stuck?); "
				 "try again", ar->name, (int)ar->lock_holder);
	return tn__error(TN_EBUSY, "arena \"%s\" is locked by another process (stopped or "
			 "stuck?); try again", ar->name);
}

bool tnd_arena_lockable(struct tnd_arena *ar)
{
	/* Within the back-off, a look at the lock's owner (no wait) tells whether it was let
	 * go, or its holder died (then taking the lock repairs what it left). */
	int tid = ar->locked_until ? lock_owner_tid(ar) : 0;
	if (!ar->locked_until || tnd_now_ns() >= ar->locked_until || tid == 0 ||
	    (tid > 0 && lock_holder(ar) == 0)) {
		ar->locked_until = 0;
		return true;
	}
	locked_error(ar);
	return false;
}

int tnd_arena_locked(struct tnd_arena *ar, int r)
{
	if (r != TN_EBUSY)
		return r;
	pid_t holder = lock_holder(ar);
	if (!holder && !strstr(tn_last_error(), "lock"))
		return r; /* another TN_EBUSY (every slot taken, ...): its own message stays */
	if (!ar->locked_until || holder != ar->lock_holder)
		tnd_warn("arena %s: its lock is held by pid %d (0: unknown; stopped or stuck?): "
			 "the daemon answers TN_EBUSY for it meanwhile", ar->name, (int)holder);
	ar->lock_holder = holder;
	ar->locked_until = tnd_now_ns() + (uint64_t)TND_LOCK_BACKOFF_MS * 1000000u;
	return locked_error(ar);
}

bool tnd_arena_gate(struct tnd_client *c, const struct tnd_hdr *h, struct tnd_arena *ar)
{
	if (tnd_arena_lockable(ar))
		return true;
	tnd_reply_tn(c, h, TN_EBUSY);
	return false;
}

void tnd_arena_fill_info(struct tnd_arena *ar, struct tnd_arena_info *w)
{
	memset(w, 0, sizeof(*w));
	memcpy(w->name, ar->name, sizeof(w->name));
	w->owner_uid = ar->owner_uid;
	w->owner_gid = ar->owner_gid;
	w->mode = ar->mode;
	w->ngrants = ar->ngrants;
	memcpy(w->grants, ar->grants, sizeof(w->grants));
	w->created = ar->created;
	tn_arena_stats s;
	if (tnd_arena_lockable(ar) && tnd_arena_locked(ar, tn_arena_stat(ar->a, &ar->stats)) == 0) {
		ar->have_stats = true;
		ar->locked_until = 0;
	} else {
		w->flags |= TND_INFO_LOCKED;
	}
	if (ar->have_stats) {
		s = ar->stats;
		memcpy(w->uuid, s.uuid, 16);
		w->backing = s.backing;
		w->numa_policy = s.numa_policy;
		w->numa_nodes = s.numa_nodes;
		w->size = s.size;
		w->page_size = s.page_size;
		w->heap_bytes = s.heap_bytes;
		w->used_bytes = s.used_bytes;
		w->free_bytes = s.free_bytes;
		w->largest_free = s.largest_free;
		w->blocks = s.blocks;
		w->free_blocks = s.free_blocks;
		w->names = s.names;
		w->max_names = s.max_names;
		w->clients = s.clients;
		w->num_allocs = s.num_allocs;
		w->num_frees = s.num_frees;
		w->lock_repairs = s.lock_repairs;
		w->reclaimed_slots = s.reclaimed_slots;
	}
	tnd_arena_residency(ar);
	w->nnodes = ar->nnodes;
	memcpy(w->resident_pages, ar->resident, sizeof(w->resident_pages));
}

void tnd_arena_residency(struct tnd_arena *ar)
{
	if (ar->resident_ns && tnd_now_ns() - ar->resident_ns <= 1000000000u)
		return;
	uint64_t pages[TND_MAX_NODES];
	if (tn_arena_residency(ar->a, pages, TND_MAX_NODES) >= 0) {
		ar->nnodes = TND_MAX_NODES;
		memcpy(ar->resident, pages, sizeof(pages));
		while (ar->nnodes > 1 && !ar->resident[ar->nnodes - 1])
			ar->nnodes--;
	}
	ar->resident_ns = tnd_now_ns();
}

/* ---- recovery at start ----------------------------------------------------------------------- */

/* Whether @name is a load's journal (loadsave.h) or the temporary one of a journal. */
static bool is_journal(const char *name, bool *ret_tmp)
{
	size_t n = strlen(name);
	*ret_tmp = n > 12 && !strcmp(name + n - 12, ".journal.tmp");
	return !strncmp(name, "load-", 5) &&
	       (*ret_tmp || (n > 8 && !strcmp(name + n - 8, ".journal")));
}

/* Undo the loads of arena @ar that a crash interrupted before they committed (their journals
 * are left in arena_dir), then remove the backup names of loads that committed. @forget: only
 * remove the journals (the arena is gone). */
static void recover_loads(struct tnd_arena *ar, const char *arena, bool forget)
{
	DIR *d = opendir(tnd_d.cfg.arena_dir);
	if (!d)
		return;
	struct dirent *e;
	bool left = false; /* a journal whose rollback did not finish */
	while ((e = readdir(d))) {
		bool tmp;
		if (!is_journal(e->d_name, &tmp))
			continue;
		char path[PATH_MAX], owner[TND_NAME_SIZE];
		snprintf(path, sizeof(path), "%.3800s/%.255s", tnd_d.cfg.arena_dir, e->d_name);
		if (tmp) { /* a journal not written whole: its load published nothing */
			unlink(path);
			continue;
		}
		if (tnd_load_journal_arena(path, owner)) {
			tnd_warn("%s: %s: removed", path, tn_last_error());
			unlink(path);
			continue;
		}
		if (strcmp(owner, arena))
			continue;
		if (forget) {
			tnd_warn("arena %s: it is gone; removing the journal of a load into it (%s)",
				 arena, path);
			unlink(path);
			continue;
		}
		uint64_t undone = 0;
		if (tnd_load_rollback(ar->a, path, &undone)) {
			tnd_error("arena %s: rolling back an interrupted load: %s", arena,
				  tn_last_error());
			left = true;
		} else
			tnd_warn("arena %s: a load was interrupted before it committed: rolled back "
				 "(%" PRIu64 " names unpublished)", arena, undone);
	}
	closedir(d);
	/* The backups of a load not rolled back yet are what its rollback gives back. */
	if (!forget && !left) {
		int k = tnd_load_sweep_backups(ar->a);
		if (k > 0)
			tnd_info("arena %s: removed %d backup names of a committed load", arena, k);
	}
}

/* Reopen the arenas recorded in arena_dir (after a restart, or a clean stop). */
void tnd_arenas_recover(void)
{
	DIR *d = opendir(tnd_d.cfg.arena_dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".meta"))
			continue;
		char file[PATH_MAX], why[200];
		snprintf(file, sizeof(file), "%.3800s/%.255s", tnd_d.cfg.arena_dir, e->d_name);
		struct tnd_arena *ar = malloc(sizeof(*ar));
		if (!ar)
			break;
		if (meta_read(file, ar, why, sizeof(why))) {
			tnd_warn("%s: %s: ignored", file, why);
			free(ar);
			continue;
		}
		if (strlen(ar->name) != n - 5 || strncmp(ar->name, e->d_name, n - 5) ||
		    tnd_arena_find(ar->name)) {
			tnd_warn("%s: names arena \"%s\": ignored", file, ar->name);
			free(ar);
			continue;
		}
		char dir[PATH_MAX];
		const char *fname;
		split_path(ar->path, dir, sizeof(dir), &fname);
		int r = tn_arena_open(fname, dir, &ar->a);
		if (r == TN_ENOENT) {
			tnd_warn("arena %s: its file %s is gone: removing its record", ar->name,
				 ar->path);
			recover_loads(NULL, ar->name, true);
			unlink(file);
			free(ar);
			continue;
		}
		if (r) {
			tnd_error("arena %s: cannot open %s: %s", ar->name, ar->path,
				  tn_last_error());
			free(ar);
			continue;
		}
		ar->damaged = false;
		memset(ar->owners, 0, sizeof(ar->owners));
		ar->ledger = NULL;
		if (tnd_ledger_open(ar, true)) {
			tnd_error("arena %s: out of memory", ar->name);
			tn_arena_unref(ar->a);
			free(ar);
			break;
		}
		tnd_arena_guard(ar);
		/* The slot this daemon just attached with is its own, whoever had it before. */
		if (ar->a->slot >= 0 && ar->a->slot < TN_ARENA_MAX_CLIENTS) {
			ar->owners[ar->a->slot].state = 0;
			tnd_ledger_owner(ar, ar->a->slot);
		}
		/* Before anything judges a slot by the file's client table: the daemon's record
		 * of the slots it assigned is written back over what a grantee forged there. */
		int forged = 0;
		for (int i = 0; i < TN_ARENA_MAX_CLIENTS; i++)
			if (ar->owners[i].state &&
			    tn__arena_slot_restore(ar->a, i, ar->owners[i].state, ar->owners[i].pid,
						   ar->owners[i].start_time) == 1)
				forged++;
		if (forged)
			tnd_warn("arena %s: %d client records in its file differed from tensord's "
				 "own: written back", ar->name, forged);
		/* Before anything reclaims the dead daemon's slot: the loads' new blocks it
		 * held are freed by that reclamation once their names are undone. */
		recover_loads(ar, ar->name, false);
		tn_arena_fsck_report rep;
		int fr = tn_arena_fsck(ar->a, TN_ARENA_FSCK_REPAIR, &rep);
		if (fr == TN_EIO)
			/* Left as it is, attached and listed: its users get TN_EIO, its owner
			 * can inspect and destroy it, and the other arenas are served. */
			tnd_error("arena %s is damaged, fsck could not mend it (%s): its users get "
				  "errors until it is repaired or destroyed", ar->name,
				  rep.first_problem);
		else if (fr >= 0 && rep.problems)
			tnd_warn("arena %s: fsck repaired %" PRIu64 " of %" PRIu64 " problems (%s)",
				 ar->name, rep.repaired, rep.problems, rep.first_problem);
		int k = tn_arena_reclaim_dead(ar->a);
		if (k > 0)
			tnd_d.reclaimed_slots += (uint64_t)k;
		/* Records of slots the recovery reclaimed (judged on the records written back)
		 * are done with. */
		for (int i = 0; i < TN_ARENA_MAX_CLIENTS; i++) {
			bool attached;
			uint64_t state;
			if (ar->owners[i].state &&
			    (tn__arena_slot_info(ar->a, i, &attached, NULL, NULL, &state) ||
			     !attached || state != ar->owners[i].state)) {
				ar->owners[i].state = 0;
				tnd_ledger_owner(ar, i);
			}
		}
		ar->transfers = 0;
		memset(&ar->resident_ns, 0, sizeof(ar->resident_ns));
		tn__arena_uuid(ar->a, ar->uuid);
		ar->size = tnd_arena_file_size(ar->a);
		tnd_arena_add(ar);
		tnd_info("arena %s recovered from %s (%d dead slots reclaimed)", ar->name, ar->path,
			 k > 0 ? k : 0);
	}
	closedir(d);
}
