// SPDX-License-Identifier: MIT
/*
 * tensord's own records of an arena (daemon.h), kept in its directory (0700, files 0600) where
 * no client can write, unlike the arena file, every word of which a read-write grantee can
 * write (libtensor-arena(7), TRUST MODEL):
 *
 * - NAME.slots: who each slot the daemon assigned belongs to (pid and start time from the
 *   socket's credentials), a fixed array of records rewritten in place at each change. A
 *   restarted daemon reads it back, so that it goes on judging those slots from its own record:
 *   it writes the record back into the file's client table when a grantee overwrote it, before
 *   anything reclaims by the table, and a process re-registering a slot after the restart must
 *   be the one the record names.
 *
 * - NAME.seals: the seal record, an append-only journal of the tensors sealed in the arena
 *   (entry index and generation, a hash of the description, a digest of the block's bytes
 *   taken when the seal was recorded), compacted when it grows to twice what it says. The
 *   daemon learns of a seal from the sealing client (SEALED, sent by tn_arena_seal and sealed
 *   publishes of handles attached through it), from its own loads, and from its periodic
 *   sweep of the directory, which records any seal bit it has not seen. The record is the
 *   authority: a seal bit a grantee cleared is set again by the next sweep (and reported by
 *   fsck); a description rewritten is reported; VERIFY reads every sealed byte again and
 *   compares it with the digest. A name unpublished (which any read-write client may do, sealed
 *   or not) or replaced drops its record.
 *
 * Digests are computed off the loop, by one worker thread: the loop looks the entry up (which
 * holds its block for the daemon, so that it is not freed under the worker), queues the job,
 * and gets the result back through the event fd, as transfers do. The worker reads the bytes
 * without the arena's lock: sealed bytes do not change, unless someone writes them outside the
 * rules, which is what the digest is for.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../shm/arena_internal.h"
#include "../shm/arena_remote.h"
#include "daemon.h"

struct tnd_seal {
	tn_arena_handle handle;
	uint64_t desc;   /* hash of the entry's description (dtype, sizes, strides, offset) */
	uint64_t digest; /* of the block's bytes, when digested */
	uint64_t nbytes; /* digested */
	bool digested;
	bool changed;      /* a verification found bytes that differ from the digest */
	bool desc_changed; /* the sweep found the description rewritten */
	bool queued;       /* a digest job runs */
	bool seen;         /* marked by a scan */
	char name[TN_ARENA_NAME_MAX + 1];
};

struct tnd_ledger {
	struct tnd_seal *seals;
	size_t n, cap;
	FILE *journal;
	size_t lines;
	int slots_fd;
	uint64_t restored; /* seal bits set again since the daemon started */
};

/* ---- the digest ------------------------------------------------------------------------------
 * The accumulation of XXH3 over 64-byte stripes in eight 64-bit lanes (two vectors of four):
 * each word is added to its neighbour lane and the product of its keyed halves to its own, the
 * lanes are scrambled every KiB, then merged and mixed at the end. One 32x32-bit multiply per
 * word, vectorised: with AVX2 (chosen at run time) it runs at the speed of one
 * core's reads (bench_tensord measures both); every build computes the same value. Not a
 * cryptographic hash: it finds bytes changed by mistake or by a grantee who does not know the
 * digest, which only the daemon keeps. */
#define P1 UINT64_C(0x9E3779B185EBCA87)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P3 UINT64_C(0x165667B19E3779F9)

typedef uint64_t v4u64 __attribute__((vector_size(32)));

static inline uint64_t rotl(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	return rotl(h ^ rotl(v * P2, 31) * P1, 27) * P1 + P3;
}

/* A macro: a function returning a 32-byte vector has another ABI with AVX than without. */
#ifdef __clang__
#define swap_pairs(v) __builtin_shufflevector(v, v, 1, 0, 3, 2)
#else
#define swap_pairs(v) __builtin_shuffle(v, (v4u64){ 1, 0, 3, 2 })
#endif

/* The body, inlined into a build for AVX2 and one for the baseline, chosen at run time (not
 * by target_clones: its ifunc resolver runs before ThreadSanitizer's runtime is up). */
static inline __attribute__((always_inline)) uint64_t digest_body(const unsigned char *p, size_t n)
{
	const v4u64 klo = { P1, P2, P3, P1 ^ P2 }, khi = { P2 ^ P3, P1 ^ P3, ~P1, ~P2 };
	const v4u64 m32 = { 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu };
	v4u64 lo = klo + (v4u64){ 0, 1, 2, 3 }, hi = khi + (v4u64){ 4, 5, 6, 7 };
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		v4u64 wl, wh;
		memcpy(&wl, p + i, 32);
		memcpy(&wh, p + i + 32, 32);
		v4u64 dl = wl ^ klo, dh = wh ^ khi;
		lo += swap_pairs(wl) + (dl & m32) * (dl >> 32);
		hi += swap_pairs(wh) + (dh & m32) * (dh >> 32);
		if ((i & 1023) == 960) {
			lo = ((lo ^ lo >> 47) ^ klo) * UINT64_C(0x9E3779B1);
			hi = ((hi ^ hi >> 47) ^ khi) * UINT64_C(0x9E3779B1);
		}
	}
	uint64_t h = (uint64_t)n * P1;
	for (int k = 0; k < 4; k++)
		h = mix(h, lo[k]);
	for (int k = 0; k < 4; k++)
		h = mix(h, hi[k]);
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = mix(h, w);
	}
	for (; i < n; i++)
		h = mix(h, p[i]);
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	return h ^ h >> 32;
}

__attribute__((target("avx2"))) static uint64_t digest_avx2(const unsigned char *p, size_t n)
{
	return digest_body(p, n);
}

static uint64_t digest_baseline(const unsigned char *p, size_t n)
{
	return digest_body(p, n);
}

static uint64_t digest(const unsigned char *p, size_t n)
{
	return __builtin_cpu_supports("avx2") ? digest_avx2(p, n) : digest_baseline(p, n);
}

static uint64_t desc_hash(const tn_arena_entry *e)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	const int64_t words[] = { e->dtype, e->ndim, e->storage_offset, (int64_t)e->block_bytes };
	for (size_t i = 0; i < 4; i++)
		h = (h ^ (uint64_t)words[i]) * UINT64_C(0x100000001b3);
	for (int i = 0; i < e->ndim && i < TN_ARENA_MAX_DIMS; i++) {
		h = (h ^ (uint64_t)e->sizes[i]) * UINT64_C(0x100000001b3);
		h = (h ^ (uint64_t)e->strides[i]) * UINT64_C(0x100000001b3);
	}
	return h;
}

/* ---- files ----------------------------------------------------------------------------------- */

static void ledger_path(char *buf, size_t len, const char *name, const char *ext)
{
	snprintf(buf, len, "%.3700s/%.63s.%s", tnd_d.cfg.arena_dir, name, ext);
}

#define SLOTS_MAGIC UINT64_C(0x31544f4c53444e54) /* "TNDSLOT1" */

struct slot_file_rec {
	uint64_t state;
	int64_t pid;
	uint64_t start_time;
};

void tnd_ledger_owner(struct tnd_arena *ar, int slot)
{
	struct tnd_ledger *l = ar->ledger;
	if (!l || l->slots_fd < 0 || slot < 0 || slot >= TN_ARENA_MAX_CLIENTS)
		return;
	const struct tnd_slot_owner *o = &ar->owners[slot];
	struct slot_file_rec r = { o->state, o->pid, o->start_time };
	off_t at = 8 + (off_t)slot * (off_t)sizeof(r);
	if (pwrite(l->slots_fd, &r, sizeof(r), at) != (ssize_t)sizeof(r))
		tnd_warn("arena %s: cannot record slot %d's owner: %s", ar->name, slot,
			 strerror(errno));
}

static void slots_open(struct tnd_arena *ar, bool recovering)
{
	struct tnd_ledger *l = ar->ledger;
	char path[PATH_MAX];
	ledger_path(path, sizeof(path), ar->name, "slots");
	l->slots_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (recovering ? 0 : O_TRUNC), 0600);
	if (l->slots_fd < 0) {
		tnd_warn("arena %s: cannot open %s: %s", ar->name, path, strerror(errno));
		return;
	}
	uint64_t magic = 0;
	struct slot_file_rec recs[TN_ARENA_MAX_CLIENTS];
	ssize_t got = recovering ? pread(l->slots_fd, &magic, 8, 0) : 0;
	if (got == 8 && magic == SLOTS_MAGIC &&
	    pread(l->slots_fd, recs, sizeof(recs), 8) == (ssize_t)sizeof(recs)) {
		for (int i = 0; i < TN_ARENA_MAX_CLIENTS; i++)
			if (recs[i].state && recs[i].pid > 0 && recs[i].pid <= INT32_MAX)
				ar->owners[i] = (struct tnd_slot_owner){
					recs[i].state, (pid_t)recs[i].pid, recs[i].start_time
				};
		return;
	}
	if (recovering && got != 0)
		tnd_warn("arena %s: %s is not a slot record: starting a new one", ar->name, path);
	memset(recs, 0, sizeof(recs));
	magic = SLOTS_MAGIC;
	if (pwrite(l->slots_fd, &magic, 8, 0) != 8 ||
	    pwrite(l->slots_fd, recs, sizeof(recs), 8) != (ssize_t)sizeof(recs))
		tnd_warn("arena %s: cannot write %s: %s", ar->name, path, strerror(errno));
	for (int i = 0; i < TN_ARENA_MAX_CLIENTS; i++)
		if (ar->owners[i].state)
			tnd_ledger_owner(ar, i);
}

static struct tnd_seal *seal_find(struct tnd_ledger *l, tn_arena_handle h)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->seals[i].handle.index == h.index &&
		    l->seals[i].handle.generation == h.generation)
			return &l->seals[i];
	return NULL;
}

static struct tnd_seal *seal_add(struct tnd_ledger *l, tn_arena_handle h, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct tnd_seal *p = realloc(l->seals, cap * sizeof(*p));
		if (!p)
			return NULL;
		l->seals = p;
		l->cap = cap;
	}
	struct tnd_seal *s = &l->seals[l->n++];
	memset(s, 0, sizeof(*s));
	s->handle = h;
	snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

static void journal_line(struct tnd_ledger *l, const struct tnd_seal *s, bool drop)
{
	if (!l->journal)
		return;
	if (drop)
		fprintf(l->journal, "D %u %u\n", s->handle.index, s->handle.generation);
	else
		fprintf(l->journal,
			"S %u %u %016" PRIx64 " %d %016" PRIx64 " %" PRIu64 " %d %s\n",
			s->handle.index, s->handle.generation, s->desc, s->digested, s->digest,
			s->nbytes, s->changed, s->name);
	l->lines++;
}

static FILE *journal_open(const char *path, const char *mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (mode[0] == 'a' ? O_APPEND : O_TRUNC),
		      0600);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, mode);
	if (!f)
		close(fd);
	else
		setvbuf(f, NULL, _IOLBF, 0); /* a line is written whole at once */
	return f;
}

/* Rewrite the journal with one line per record (temporary file, rename). */
static void journal_compact(struct tnd_arena *ar)
{
	struct tnd_ledger *l = ar->ledger;
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	ledger_path(path, sizeof(path), ar->name, "seals");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = journal_open(tmp, "w");
	if (!f) {
		tnd_warn("arena %s: cannot write %s: %s", ar->name, tmp, strerror(errno));
		return;
	}
	FILE *old = l->journal;
	l->journal = f;
	l->lines = 0;
	for (size_t i = 0; i < l->n; i++)
		journal_line(l, &l->seals[i], false);
	if (fflush(f) || rename(tmp, path)) {
		tnd_warn("arena %s: cannot replace %s: %s", ar->name, path, strerror(errno));
		fclose(f);
		unlink(tmp);
		l->journal = old;
		return;
	}
	if (old)
		fclose(old);
}

static void journal_read(struct tnd_arena *ar, const char *path)
{
	struct tnd_ledger *l = ar->ledger;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[TN_ARENA_NAME_MAX + 128];
	size_t bad = 0;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (!len || line[len - 1] != '\n') {
			bad++; /* a line cut short by a crash, or too long */
			continue;
		}
		line[len - 1] = 0;
		tn_arena_handle h;
		unsigned dg, ch;
		uint64_t desc, dig, nbytes;
		int at = 0;
		if (sscanf(line, "D %" SCNu32 " %" SCNu32 "%n", &h.index, &h.generation, &at) == 2 &&
		    !line[at]) {
			struct tnd_seal *s = seal_find(l, h);
			if (s)
				*s = l->seals[--l->n];
		} else if (sscanf(line, "S %" SCNu32 " %" SCNu32 " %" SCNx64 " %u %" SCNx64 " %" SCNu64
					" %u %n",
				  &h.index, &h.generation, &desc, &dg, &dig, &nbytes, &ch, &at) == 7 &&
			   at > 0 && line[at] && strlen(line + at) <= TN_ARENA_NAME_MAX) {
			struct tnd_seal *s = seal_find(l, h);
			if (!s && !(s = seal_add(l, h, line + at)))
				break;
			snprintf(s->name, sizeof(s->name), "%s", line + at);
			s->desc = desc;
			s->digested = dg != 0;
			s->digest = dig;
			s->nbytes = nbytes;
			s->changed = ch != 0;
		} else {
			bad++;
		}
		l->lines++;
	}
	fclose(f);
	if (bad)
		tnd_warn("arena %s: %zu unreadable lines in %s ignored", ar->name, bad, path);
}

int tnd_ledger_open(struct tnd_arena *ar, bool recovering)
{
	struct tnd_ledger *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->slots_fd = -1;
	ar->ledger = l;
	slots_open(ar, recovering);
	char path[PATH_MAX];
	ledger_path(path, sizeof(path), ar->name, "seals");
	if (recovering)
		journal_read(ar, path);
	else
		unlink(path);
	journal_compact(ar);
	if (!l->journal)
		l->journal = journal_open(path, "a");
	return 0;
}

void tnd_ledger_close(struct tnd_arena *ar, bool remove_files)
{
	struct tnd_ledger *l = ar->ledger;
	if (!l)
		return;
	if (l->journal)
		fclose(l->journal);
	if (l->slots_fd >= 0)
		close(l->slots_fd);
	if (remove_files) {
		char path[PATH_MAX];
		ledger_path(path, sizeof(path), ar->name, "seals");
		unlink(path);
		ledger_path(path, sizeof(path), ar->name, "slots");
		unlink(path);
	}
	free(l->seals);
	free(l);
	ar->ledger = NULL;
}

/* ---- the digest worker ----------------------------------------------------------------------- */

/* A VERIFY waiting for its digests. */
struct verify {
	struct tnd_client *client;
	uint32_t seq;
	size_t remaining;
	struct tnd_verify_reply reply;
};

struct job {
	struct job *next;
	char arena[TND_NAME_SIZE];
	uint8_t uuid[16];
	tn_arena_handle handle;
	tn_tensor *tensor; /* holds the block; unreferenced by the loop */
	const unsigned char *data;
	size_t nbytes;
	uint64_t digest;
	struct verify *verify; /* NULL: a first digest */
};

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_cond = PTHREAD_COND_INITIALIZER;
static struct job *todo, *todo_tail, *done_list;
static bool worker_started;

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&job_lock);
		while (!todo)
			pthread_cond_wait(&job_cond, &job_lock);
		struct job *j = todo;
		todo = j->next;
		if (!todo)
			todo_tail = NULL;
		pthread_mutex_unlock(&job_lock);
		j->digest = digest(j->data, j->nbytes);
		pthread_mutex_lock(&job_lock);
		j->next = done_list;
		done_list = j;
		pthread_mutex_unlock(&job_lock);
		uint64_t one = 1;
		ssize_t n = write(tnd_d.event_fd, &one, sizeof(one));
		(void)n;
	}
	return NULL;
}

/* Look @s up (holding its block) and queue its digest; false when it could not be (the entry
 * is gone: the caller's next scan drops the record; the lock is busy: the next sweep tries
 * again). */
static bool queue_digest(struct tnd_arena *ar, struct tnd_seal *s, struct verify *v)
{
	if (s->queued)
		return false;
	if (!worker_started) {
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int e = pthread_create(&t, &attr, worker, NULL);
		pthread_attr_destroy(&attr);
		if (e) {
			tnd_warn("cannot start the digest worker: %s", strerror(e));
			return false;
		}
		worker_started = true;
	}
	tn_tensor *t;
	if (tnd_arena_locked(ar, tn_arena_lookup_handle(ar->a, s->handle, &t)))
		return false;
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		tn_tensor_unref(t);
		return false;
	}
	tn_storage *st = tn_tensor_storage(t);
	memcpy(j->arena, ar->name, sizeof(j->arena));
	memcpy(j->uuid, ar->uuid, 16);
	j->handle = s->handle;
	j->tensor = t;
	j->data = tn_storage_data(st);
	j->nbytes = tn_storage_nbytes(st);
	j->verify = v;
	s->queued = true;
	pthread_mutex_lock(&job_lock);
	if (todo_tail)
		todo_tail->next = j;
	else
		todo = j;
	todo_tail = j;
	pthread_cond_signal(&job_cond);
	pthread_mutex_unlock(&job_lock);
	return true;
}

static void verify_finish(struct verify *v)
{
	struct tnd_client *c = v->client;
	tnd_queue_msg(c, TND_OP_VERIFY, v->seq, 0, 0, &v->reply, sizeof(v->reply), -1);
	c->verifying--;
	free(v);
	tnd_client_maybe_free(c);
}

void tnd_ledger_events(void)
{
	pthread_mutex_lock(&job_lock);
	struct job *list = done_list;
	done_list = NULL;
	pthread_mutex_unlock(&job_lock);
	for (struct job *j = list, *next; j; j = next) {
		next = j->next;
		struct tnd_arena *ar = tnd_arena_find(j->arena);
		struct tnd_seal *s = NULL;
		if (ar && ar->ledger && !memcmp(ar->uuid, j->uuid, 16))
			s = seal_find(ar->ledger, j->handle);
		struct verify *v = j->verify;
		if (s) {
			s->queued = false;
			if (!s->digested) {
				s->digested = true;
				s->digest = j->digest;
				s->nbytes = j->nbytes;
				journal_line(ar->ledger, s, false);
				if (v)
					v->reply.digested++;
			} else if (v) {
				v->reply.checked++;
				if (s->digest != j->digest || s->nbytes != j->nbytes) {
					if (!v->reply.changed++)
						snprintf(v->reply.first_changed,
							 sizeof(v->reply.first_changed), "%s",
							 s->name);
					if (!s->changed) {
						s->changed = true;
						journal_line(ar->ledger, s, false);
						tnd_warn("arena %s: the sealed bytes of \"%s\" changed "
							 "since they were sealed",
							 ar->name, s->name);
					}
				}
			}
		}
		tn_tensor_unref(j->tensor);
		free(j);
		if (v && !--v->remaining)
			verify_finish(v);
	}
}

/* ---- the record against the directory -------------------------------------------------------- */

struct scan {
	uint64_t cleared, restored, redescribed, adopted;
	char first[TND_MESSAGE_SIZE];
};

static void note(struct scan *sc, const char *name, const char *what)
{
	if (!sc->first[0])
		snprintf(sc->first, sizeof(sc->first), "%s \"%.150s\" %s",
			 what[0] == 'd' ? "the description (dtype, sizes, strides, offset) of sealed"
					: "the seal of",
			 name, what[0] == 'd' ? "was rewritten (not repaired)"
					      : "was cleared by a client (tensord's record has it)");
}

static struct tnd_seal *adopt(struct tnd_arena *ar, const tn_arena_entry *e)
{
	struct tnd_seal *s = seal_add(ar->ledger, e->handle, e->name);
	if (!s)
		return NULL;
	s->desc = desc_hash(e);
	journal_line(ar->ledger, s, false);
	queue_digest(ar, s, NULL);
	return s;
}

/* Compare the record with the directory: adopt seals not recorded, drop the records of names
 * unpublished or replaced, report rewritten descriptions, and set cleared seal bits again when
 * @restore. Returns 0 or a TN_E* code (the lock, the directory). */
static int scan(struct tnd_arena *ar, bool restore, struct scan *sc)
{
	struct tnd_ledger *l = ar->ledger;
	if (!l)
		return 0;
	tn_arena_entry *es = NULL;
	size_t n = 0;
	int r = tnd_arena_locked(ar, tn_arena_list(ar->a, NULL, &es, &n));
	if (r)
		return r;
	for (size_t i = 0; i < l->n; i++)
		l->seals[i].seen = false;
	for (size_t i = 0; i < n; i++) {
		const tn_arena_entry *e = &es[i];
		/* A spilled entry has no bytes here: its record goes, as for a name unpublished,
		 * and it is adopted again, digest and all, once it is read back. */
		if (e->flags & TN_ARENA_ENTRY_SPILLED)
			continue;
		struct tnd_seal *s = seal_find(l, e->handle);
		if (!s) {
			if ((e->flags & TN_ARENA_ENTRY_SEALED) && (s = adopt(ar, e)))
				s->seen = true;
			continue;
		}
		s->seen = true;
		if (desc_hash(e) != s->desc) {
			sc->redescribed++;
			note(sc, s->name, "description");
			if (!s->desc_changed)
				tnd_warn("arena %s: the description of sealed \"%s\" was rewritten",
					 ar->name, s->name);
			s->desc_changed = true;
		}
		if (e->flags & TN_ARENA_ENTRY_SEALED)
			continue;
		sc->cleared++;
		note(sc, s->name, "seal");
		if (!restore)
			continue;
		r = tnd_arena_locked(ar, tn__arena_reseal(ar->a, s->handle));
		if (r == 1) {
			sc->restored++;
			l->restored++;
			tnd_warn("arena %s: the seal of \"%s\" was cleared by a client: set again",
				 ar->name, s->name);
		}
	}
	/* Records of names gone: unpublished (allowed, sealed or not) or replaced. */
	for (size_t i = 0; i < l->n;) {
		if (l->seals[i].seen || l->seals[i].queued) {
			i++;
			continue;
		}
		journal_line(l, &l->seals[i], true);
		l->seals[i] = l->seals[--l->n];
	}
	free(es);
	if (l->lines > 2 * l->n + 1024)
		journal_compact(ar);
	return 0;
}

void tnd_ledger_sweep(struct tnd_arena *ar)
{
	struct scan sc = { 0 };
	(void)scan(ar, true, &sc);
	/* Seals recorded before their digest could be taken (the lock was busy). */
	struct tnd_ledger *l = ar->ledger;
	for (size_t i = 0; l && i < l->n; i++)
		if (!l->seals[i].digested && !l->seals[i].queued)
			queue_digest(ar, &l->seals[i], NULL);
}

int tnd_ledger_sealed(struct tnd_arena *ar, const char *name)
{
	tn_arena_entry e;
	int r = tnd_arena_locked(ar, tn_arena_info(ar->a, name, &e));
	if (r)
		return r;
	if (!(e.flags & TN_ARENA_ENTRY_SEALED))
		return tn__error(TN_EINVAL, "\"%s\" in arena \"%s\" is not sealed", name, ar->name);
	if (ar->ledger && !seal_find(ar->ledger, e.handle) && !adopt(ar, &e))
		return tn__error(TN_ENOMEM, "out of memory");
	return 0;
}

void tnd_ledger_fsck(struct tnd_arena *ar, bool repair, tn_arena_fsck_report *rep)
{
	struct scan sc = { 0 };
	int r = scan(ar, repair, &sc);
	if (r) {
		if (!rep->problems++)
			snprintf(rep->first_problem, sizeof(rep->first_problem),
				 "the seal record could not be compared: %.200s", tn_last_error());
		return;
	}
	uint64_t changed = 0;
	const char *first_changed = NULL;
	for (size_t i = 0; ar->ledger && i < ar->ledger->n; i++)
		if (ar->ledger->seals[i].changed && !changed++)
			first_changed = ar->ledger->seals[i].name;
	uint64_t found = sc.cleared + sc.redescribed + changed;
	if (!found)
		return;
	if (!sc.first[0])
		snprintf(sc.first, sizeof(sc.first),
			 "the sealed bytes of \"%.150s\" changed since they were sealed (found by "
			 "tensorctl verify; not repaired)",
			 first_changed);
	if (!rep->problems)
		snprintf(rep->first_problem, sizeof(rep->first_problem), "%s", sc.first);
	rep->problems += found;
	rep->repaired += sc.restored;
}

int tnd_ledger_verify(struct tnd_client *c, const struct tnd_hdr *h, struct tnd_arena *ar)
{
	struct scan sc = { 0 };
	int r = scan(ar, true, &sc);
	if (r)
		return tnd_reply_tn(c, h, r);
	struct verify *v = calloc(1, sizeof(*v));
	if (!v)
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	v->client = c;
	v->seq = h->seq;
	v->reply.restored = sc.restored;
	struct tnd_ledger *l = ar->ledger;
	v->reply.sealed = l ? l->n : 0;
	for (size_t i = 0; l && i < l->n; i++) {
		struct tnd_seal *s = &l->seals[i];
		if (s->changed) {
			/* Known already: counted without reading again. */
			v->reply.checked++;
			if (!v->reply.changed++)
				snprintf(v->reply.first_changed, sizeof(v->reply.first_changed),
					 "%s", s->name);
			continue;
		}
		if (s->queued)
			continue; /* a first digest runs: it is this check's reference */
		if (queue_digest(ar, s, v))
			v->remaining++;
	}
	c->verifying++;
	if (!v->remaining)
		verify_finish(v);
	return 0;
}
