// SPDX-License-Identifier: MIT
/*
 * tensord's table of CUDA exports (proto.h, the CUDA_* operations; DESIGN.md section 9).
 *
 * A producer process exports a device storage under a name; consumers import it, which gives
 * them the record (the CUDA IPC handle and the view) and a hold. The daemon never touches GPU
 * memory: it decides who may import, counts holds, and tells the producer when nobody holds a
 * withdrawn export any more, which is when the producer may give the memory back to its
 * allocator. The rules are the arenas' (section 7): whatever set of processes is killed,
 * every export is held only by live processes, and once the last holder is gone the record
 * goes and the producer's memory is freed on its next collection.
 *
 * Holds and exports belong to processes (pid and start time), not to connections: a process
 * may have several connections, and after a restart of the daemon its records wait, detached,
 * until it reconnects or dies. When the last connection of a process closes, its records are
 * detached; the sweep drops the holds of processes that are gone and marks their exports
 * OWNER_GONE. The table is rewritten (temporary file and rename) at every change, in
 * cuda-shares beside the arenas' records, and read back at start.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../libtensor/internal.h"
#include "../shm/arena_remote.h"
#include "daemon.h"
#include "proto.h"

/* Limits against a runaway or hostile client. */
#define MAX_SHARES 4096          /* exports in the table */
#define MAX_SHARES_PER_USER 1024 /* for users other than root and the daemon's */
#define MAX_HOLDERS 1024         /* importing processes of one export */
#define DETACH_POLL_NS 5000000000ull /* poll a detached process this long after it closed */

_Static_assert(sizeof(struct tnd_cuda_export) == 704, "the table file's hex field is 1408 digits");

struct holder {
	pid_t pid;
	uint64_t start_time;
	uint32_t count;
	bool detached;
};

struct share {
	struct share *next;
	uint64_t id;
	struct tnd_cuda_export rec;
	pid_t owner_pid;
	uint64_t owner_start;
	uint32_t uid, gid;
	uint32_t state; /* TND_CUDA_WITHDRAWN, TND_CUDA_OWNER_GONE */
	bool owner_detached;
	uint64_t created;
	struct holder *holders;
	uint32_t nholders, capholders;
};

static struct {
	struct share *shares;
	unsigned count;
	uint64_t next_id;
	uint64_t poll_until_ns;
	char path[PATH_MAX];
	FILE *log;         /* the table file, open for appending changes after a snapshot */
	unsigned log_lines; /* changes appended since the snapshot */
	bool (*connected)(pid_t pid, uint64_t start_time);
} S = { .next_id = 1 };

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool process_gone(pid_t pid, uint64_t start_time)
{
	uint64_t st = tn__proc_start_time(pid);
	return st == 0 || (st != UINT64_MAX && st != start_time);
}

/* ---- the table file ---------------------------------------------------------------------- */

static void hex_put(FILE *f, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", b[i]);
}

static bool hex_get(const char *s, void *p, size_t n)
{
	unsigned char *b = p;
	if (strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return false;
		b[i] = (unsigned char)v;
	}
	return true;
}

static void write_share(FILE *f, const struct share *s)
{
	fprintf(f, "share = %" PRIu64 " %d %" PRIu64 " %u %u %u %" PRIu64 " ", s->id,
		(int)s->owner_pid, s->owner_start, s->uid, s->gid, s->state, s->created);
	hex_put(f, &s->rec, sizeof(s->rec));
	fputc('\n', f);
}

static void close_log(void)
{
	if (S.log)
		fclose(S.log);
	S.log = NULL;
}

/*
 * The file is a snapshot of the table followed by the changes made since, one line each,
 * every one of which states a value (a hold's new count, an export's new state), so replaying
 * a line twice changes nothing. A change costs one short append; once the changes outnumber
 * the table's lines the file is rewritten as a snapshot (temporary file and rename).
 */
static void snapshot(void)
{
	close_log();
	if (!S.path[0])
		return;
	if (!S.shares) {
		/* Nothing to keep: no file (the arena folder holds only arenas then). */
		if (unlink(S.path) && errno != ENOENT)
			tnd_warn("%s: %s", S.path, strerror(errno));
		return;
	}
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", S.path);
	FILE *f = fopen(tmp, "we");
	if (!f) {
		tnd_warn("%s: %s: CUDA exports are not kept across a restart", tmp,
			 strerror(errno));
		return;
	}
	fchmod(fileno(f), 0600);
	fprintf(f, "# tensord CUDA exports; written by tensord, do not edit\nversion = 1\n"
		   "next_id = %" PRIu64 "\n", S.next_id);
	for (struct share *s = S.shares; s; s = s->next) {
		write_share(f, s);
		for (uint32_t i = 0; i < s->nholders; i++)
			fprintf(f, "hold = %" PRIu64 " %d %" PRIu64 " %u\n", s->id,
				(int)s->holders[i].pid, s->holders[i].start_time,
				s->holders[i].count);
	}
	int e = fflush(f) ? errno : 0;
	if (fclose(f) && !e)
		e = errno;
	if (!e && rename(tmp, S.path))
		e = errno;
	if (e) {
		unlink(tmp);
		tnd_warn("%s: %s: CUDA exports are not kept across a restart", S.path,
			 strerror(e));
		return;
	}
	S.log = fopen(S.path, "ae");
	S.log_lines = 0;
}

/* Append one change (a line made by @fn), or write a snapshot when that is due. */
static void journal(void (*fn)(FILE *f, const void *arg), const void *arg)
{
	if (!S.log || !S.shares || S.log_lines >= 256 + 4 * S.count) {
		snapshot();
		return;
	}
	fn(S.log, arg);
	S.log_lines++;
	if (fflush(S.log)) {
		tnd_warn("%s: %s", S.path, strerror(errno));
		snapshot();
	}
}

static void line_share(FILE *f, const void *arg)
{
	write_share(f, arg);
}

struct hold_line {
	uint64_t id;
	pid_t pid;
	uint64_t start_time;
	uint32_t count;
};

static void line_hold(FILE *f, const void *arg)
{
	const struct hold_line *h = arg;
	fprintf(f, "hold = %" PRIu64 " %d %" PRIu64 " %u\n", h->id, (int)h->pid, h->start_time,
		h->count);
}

static void line_state(FILE *f, const void *arg)
{
	const struct share *s = arg;
	fprintf(f, "state = %" PRIu64 " %u\n", s->id, s->state);
}

static void line_drop(FILE *f, const void *arg)
{
	fprintf(f, "drop = %" PRIu64 "\n", *(const uint64_t *)arg);
}

static void journal_hold(const struct share *s, pid_t pid, uint64_t start_time, uint32_t count)
{
	struct hold_line h = { s->id, pid, start_time, count };
	journal(line_hold, &h);
}

static struct share *find_id(uint64_t id)
{
	for (struct share *s = S.shares; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static int add_holder(struct share *s, pid_t pid, uint64_t start, uint32_t count, bool detached)
{
	for (uint32_t i = 0; i < s->nholders; i++) {
		struct holder *h = &s->holders[i];
		if (h->pid == pid && h->start_time == start) {
			if (h->count > UINT32_MAX - count)
				return tn__error(TN_ENOSPC, "too many holds on one CUDA export");
			h->count += count;
			h->detached = detached;
			return 0;
		}
	}
	if (s->nholders >= MAX_HOLDERS)
		return tn__error(TN_ENOSPC, "CUDA export \"%s\" has %d importing processes, the "
				 "limit", s->rec.name, MAX_HOLDERS);
	if (s->nholders == s->capholders) {
		uint32_t cap = s->capholders ? 2 * s->capholders : 4;
		struct holder *p = realloc(s->holders, cap * sizeof(*p));
		if (!p)
			return tn__error(TN_ENOMEM, "out of memory");
		s->holders = p;
		s->capholders = cap;
	}
	s->holders[s->nholders++] = (struct holder){ pid, start, count, detached };
	return 0;
}

static void link_share(struct share *s)
{
	s->next = S.shares;
	S.shares = s;
	S.count++;
}

static void free_share(struct share *s)
{
	free(s->holders);
	free(s);
}

static void unlink_share(struct share *s)
{
	for (struct share **pp = &S.shares; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			S.count--;
			break;
		}
	free_share(s);
}

/* Read the table back; malformed lines are skipped with a warning (the file is the daemon's
 * own, but it is not trusted more than a message). */
static void load(void)
{
	FILE *f = fopen(S.path, "re");
	if (!f) {
		if (errno != ENOENT)
			tnd_warn("%s: %s", S.path, strerror(errno));
		return;
	}
	char *line = NULL;
	size_t cap = 0;
	unsigned version = 0, lineno = 0, shares = 0, holds = 0, bad = 0;
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		char hex[2 * sizeof(struct tnd_cuda_export) + 2]; /* one more digit than fits */
		uint64_t id, start, created, next;
		int pid;
		unsigned uid, gid, state, count;
		if (sscanf(line, "version = %u", &version) == 1)
			continue;
		if (sscanf(line, "next_id = %" SCNu64, &next) == 1) {
			S.next_id = next > S.next_id ? next : S.next_id;
			continue;
		}
		if (version == 1 &&
		    sscanf(line, "share = %" SCNu64 " %d %" SCNu64 " %u %u %u %" SCNu64 " %1409s",
			   &id, &pid, &start, &uid, &gid, &state, &created, hex) == 8) {
			struct share *s = calloc(1, sizeof(*s));
			if (!s)
				break;
			if (!hex_get(hex, &s->rec, sizeof(s->rec)) ||
			    tnd_cuda_export_problem(&s->rec) || id == 0 || find_id(id) ||
			    pid <= 0 || (state & ~(TND_CUDA_WITHDRAWN | TND_CUDA_OWNER_GONE))) {
				free(s);
				bad++;
				continue;
			}
			s->id = id;
			s->owner_pid = pid;
			s->owner_start = start;
			s->uid = uid;
			s->gid = gid;
			s->state = state;
			s->owner_detached = true;
			s->created = created;
			link_share(s);
			if (id >= S.next_id)
				S.next_id = id + 1;
			shares++;
			continue;
		}
		if (version == 1 &&
		    sscanf(line, "hold = %" SCNu64 " %d %" SCNu64 " %u", &id, &pid, &start,
			   &count) == 4) {
			/* A hold's count as of that line: replaces what an earlier one said. */
			struct share *s = find_id(id);
			if (!s || pid <= 0) {
				bad++;
				continue;
			}
			for (uint32_t i = 0; i < s->nholders; i++)
				if (s->holders[i].pid == pid && s->holders[i].start_time == start) {
					s->holders[i] = s->holders[--s->nholders];
					break; /* one entry per process */
				}
			if (count && add_holder(s, pid, start, count, true)) {
				bad++;
				continue;
			}
			holds++;
			continue;
		}
		if (version == 1 && sscanf(line, "state = %" SCNu64 " %u", &id, &state) == 2) {
			struct share *s = find_id(id);
			if (!s || (state & ~(TND_CUDA_WITHDRAWN | TND_CUDA_OWNER_GONE))) {
				bad++;
				continue;
			}
			s->state = state;
			continue;
		}
		if (version == 1 && sscanf(line, "drop = %" SCNu64, &id) == 1) {
			struct share *s = find_id(id);
			if (s)
				unlink_share(s);
			continue;
		}
		bad++;
		tnd_warn("%s:%u: unreadable line: ignored", S.path, lineno);
	}
	free(line);
	fclose(f);
	if (bad)
		tnd_warn("%s: %u records ignored", S.path, bad);
	if (S.count)
		tnd_info("%u CUDA exports recovered from %s (%u export and %u hold records read)",
			 S.count, S.path, shares, holds);
	S.poll_until_ns = mono_ns() + DETACH_POLL_NS;
}

void tnd_cuda_init(const char *dir, bool (*connected)(pid_t pid, uint64_t start_time))
{
	snprintf(S.path, sizeof(S.path), "%.4000s/cuda-shares", dir);
	S.connected = connected;
	/* Ids grow with the clock across restarts, so an id is not handed out twice even when
	 * the table was empty (no file) at a restart: a producer may still ask after one. */
	S.next_id = ((uint64_t)time(NULL) << 20) | 1;
	load();
	tnd_cuda_sweep();
}

void tnd_cuda_fini(void)
{
	close_log();
	while (S.shares) {
		struct share *s = S.shares;
		S.shares = s->next;
		free_share(s);
	}
	S.count = 0;
}

/* ---- operations -------------------------------------------------------------------------- */

static bool may_import(const struct tnd_peer *p, const struct share *s)
{
	if (p->privileged || p->uid == s->uid)
		return true;
	if (s->rec.mode & 0004)
		return true;
	if (s->rec.mode & 0040) {
		if (p->gid == s->gid)
			return true;
		for (int i = 0; i < p->ngroups; i++)
			if (p->groups[i] == s->gid)
				return true;
	}
	return false;
}

static bool is_owner(const struct tnd_peer *p, const struct share *s)
{
	return p->pid == s->owner_pid && p->start_time == s->owner_start;
}

static void fill(const struct share *s, struct tnd_cuda_info *w)
{
	memset(w, 0, sizeof(*w));
	w->rec = s->rec;
	w->id = s->id;
	w->owner_pid = s->owner_pid;
	w->owner_uid = s->uid;
	w->owner_gid = s->gid;
	w->state = s->state | (s->owner_detached && !(s->state & TND_CUDA_OWNER_GONE)
				       ? TND_CUDA_DETACHED
				       : 0);
	w->created = s->created;
	for (uint32_t i = 0; i < s->nholders; i++) {
		w->holders += s->holders[i].count;
		w->importers++;
	}
}

/* The live export of that name (and id, unless 0): one not withdrawn, else the newest. */
static struct share *lookup(const char *name, uint64_t id)
{
	struct share *best = NULL;
	for (struct share *s = S.shares; s; s = s->next) {
		if (strcmp(s->rec.name, name) || (id && s->id != id))
			continue;
		if (!(s->state & TND_CUDA_WITHDRAWN))
			return s;
		if (!best || s->id > best->id)
			best = s;
	}
	return best;
}

static int not_found(const char *name, uint64_t id)
{
	if (id)
		return tn__error(TN_ENOENT, "no CUDA export \"%.200s\" with id %" PRIu64, name, id);
	return tn__error(TN_ENOENT, "no CUDA export \"%.200s\"", name);
}

/* Drop the record when it is withdrawn and nobody holds it. */
static bool maybe_remove(struct share *s)
{
	if (!(s->state & TND_CUDA_WITHDRAWN) || s->nholders)
		return false;
	tnd_debug("CUDA export %s (id %" PRIu64 ") removed", s->rec.name, s->id);
	uint64_t id = s->id;
	unlink_share(s);
	journal(line_drop, &id);
	return true;
}

int tnd_cuda_export(const struct tnd_peer *p, const struct tnd_cuda_export *m,
		    struct tnd_cuda_info *ret)
{
	struct share *old = lookup(m->name, 0);
	if (old && !(old->state & TND_CUDA_WITHDRAWN))
		return tn__error(TN_EEXIST, "CUDA export \"%.200s\" exists (pid %d)", m->name,
				 (int)old->owner_pid);
	if (S.count >= MAX_SHARES)
		return tn__error(TN_ENOSPC, "tensord holds %d CUDA exports, its limit",
				 MAX_SHARES);
	if (!p->privileged) {
		unsigned mine = 0;
		for (struct share *s = S.shares; s; s = s->next)
			mine += s->uid == p->uid;
		if (mine >= MAX_SHARES_PER_USER)
			return tn__error(TN_ENOSPC, "uid %u has %u CUDA exports, the limit per "
					 "user", p->uid, mine);
	}
	struct share *s = calloc(1, sizeof(*s));
	if (!s)
		return tn__error(TN_ENOMEM, "out of memory");
	s->id = S.next_id++;
	s->rec = *m;
	s->owner_pid = p->pid;
	s->owner_start = p->start_time;
	s->uid = p->uid;
	s->gid = p->gid;
	s->created = (uint64_t)time(NULL);
	link_share(s);
	journal(line_share, s);
	tnd_debug("CUDA export %s (id %" PRIu64 ") by pid %d: %" PRIu64 " bytes", m->name, s->id,
		  (int)p->pid, m->storage_bytes);
	fill(s, ret);
	return 0;
}

int tnd_cuda_import(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
		    struct tnd_cuda_info *ret)
{
	struct share *s = lookup(m->name, m->id);
	if (!s || !may_import(p, s))
		return not_found(m->name, m->id); /* not told apart: names are not disclosed */
	if (s->state & TND_CUDA_OWNER_GONE)
		return tn__error(TN_ENOENT, "CUDA export \"%.200s\": its process (pid %d) has "
				 "exited", m->name, (int)s->owner_pid);
	if (s->state & TND_CUDA_WITHDRAWN)
		return tn__error(TN_ENOENT, "CUDA export \"%.200s\" was withdrawn", m->name);
	int r = add_holder(s, p->pid, p->start_time, 1, false);
	if (r)
		return r;
	for (uint32_t i = 0; i < s->nholders; i++)
		if (s->holders[i].pid == p->pid && s->holders[i].start_time == p->start_time)
			journal_hold(s, p->pid, p->start_time, s->holders[i].count);
	fill(s, ret);
	return 0;
}

int tnd_cuda_release(const struct tnd_peer *p, const struct tnd_cuda_ref *m)
{
	struct share *s = find_id(m->id);
	if (!s || strcmp(s->rec.name, m->name))
		return not_found(m->name, m->id);
	for (uint32_t i = 0; i < s->nholders; i++) {
		struct holder *h = &s->holders[i];
		if (h->pid != p->pid || h->start_time != p->start_time)
			continue;
		journal_hold(s, p->pid, p->start_time, --h->count);
		if (h->count == 0)
			*h = s->holders[--s->nholders];
		maybe_remove(s);
		return 0;
	}
	return tn__error(TN_ENOENT, "CUDA export \"%.200s\" is not held by pid %d", m->name,
			 (int)p->pid);
}

int tnd_cuda_unexport(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
		      struct tnd_cuda_info *ret)
{
	struct share *s = find_id(m->id);
	if (!s || strcmp(s->rec.name, m->name) || (!is_owner(p, s) && !may_import(p, s)))
		return not_found(m->name, m->id);
	if (!is_owner(p, s) && !p->privileged)
		return tn__error(TN_EACCES, "CUDA export \"%.200s\" belongs to pid %d", m->name,
				 (int)s->owner_pid);
	s->state |= TND_CUDA_WITHDRAWN;
	fill(s, ret);
	if (!maybe_remove(s))
		journal(line_state, s);
	return 0;
}

int tnd_cuda_stat(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
		  struct tnd_cuda_info *ret)
{
	struct share *s = lookup(m->name, m->id);
	if (!s || (!is_owner(p, s) && !may_import(p, s)))
		return not_found(m->name, m->id);
	fill(s, ret);
	return 0;
}

void tnd_cuda_list(const struct tnd_peer *p, void (*fn)(void *, const struct tnd_cuda_info *),
		   void *ctx)
{
	struct tnd_cuda_info w;
	for (struct share *s = S.shares; s; s = s->next) {
		if (!is_owner(p, s) && !may_import(p, s))
			continue;
		fill(s, &w);
		fn(ctx, &w);
	}
}

unsigned tnd_cuda_count(void)
{
	return S.count;
}

/* ---- processes coming and going ---------------------------------------------------------- */

void tnd_cuda_connected(pid_t pid, uint64_t start_time)
{
	for (struct share *s = S.shares; s; s = s->next) {
		if (s->owner_pid == pid && s->owner_start == start_time)
			s->owner_detached = false;
		for (uint32_t i = 0; i < s->nholders; i++)
			if (s->holders[i].pid == pid && s->holders[i].start_time == start_time)
				s->holders[i].detached = false;
	}
}

void tnd_cuda_disconnected(pid_t pid, uint64_t start_time)
{
	if (S.connected && S.connected(pid, start_time))
		return; /* another connection of the process is open */
	bool any = false;
	for (struct share *s = S.shares; s; s = s->next) {
		if (s->owner_pid == pid && s->owner_start == start_time) {
			s->owner_detached = true;
			any = true;
		}
		for (uint32_t i = 0; i < s->nholders; i++)
			if (s->holders[i].pid == pid && s->holders[i].start_time == start_time) {
				s->holders[i].detached = true;
				any = true;
			}
	}
	if (any) {
		S.poll_until_ns = mono_ns() + DETACH_POLL_NS;
		tnd_cuda_sweep();
	}
}

bool tnd_cuda_sweep(void)
{
	bool changed = false, waiting = false;
	for (struct share *s = S.shares, *next; s; s = next) {
		next = s->next;
		for (uint32_t i = 0; i < s->nholders;) {
			struct holder *h = &s->holders[i];
			if (h->detached && process_gone(h->pid, h->start_time)) {
				tnd_info("CUDA export %s: pid %d exited holding it %u times: "
					 "released", s->rec.name, (int)h->pid, h->count);
				*h = s->holders[--s->nholders];
				changed = true;
				continue;
			}
			waiting |= h->detached;
			i++;
		}
		if (s->owner_detached && !(s->state & TND_CUDA_OWNER_GONE)) {
			if (process_gone(s->owner_pid, s->owner_start)) {
				tnd_info("CUDA export %s: its process (pid %d) exited", s->rec.name,
					 (int)s->owner_pid);
				s->state |= TND_CUDA_OWNER_GONE | TND_CUDA_WITHDRAWN;
				changed = true;
			} else {
				waiting = true;
			}
		}
		changed |= maybe_remove(s);
	}
	if (changed)
		snapshot(); /* rare: one rewrite rather than a line per change */
	return waiting && mono_ns() < S.poll_until_ns;
}
