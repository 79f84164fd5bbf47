// SPDX-License-Identifier: MIT
/*
 * tensord(8): the daemon that owns the arenas.
 *
 * One thread runs an io_uring loop: a multishot accept on the listening socket, one recvmsg
 * per client, one sendmsg at a time per client from its queue of replies (replies to one
 * client must not be reordered), a read of a signalfd, a read of an eventfd through which
 * worker threads report, and a timeout that drives reclamation. Requests are validated
 * (proto.c) and answered in the loop, except LOAD and SAVE, which run on a worker thread
 * (loadsave.c) and report progress through the eventfd queue.
 *
 * Access: the peer's uid, gid and groups come from SO_PEERCRED and SO_PEERGROUPS. Arenas have
 * an owner, a mode and grants, kept in NAME.meta beside the arena file NAME.arena in the
 * daemon's directory (0700, files 0600): clients never need file system access to them.
 *
 * Lifetimes: the daemon assigns client slots (shm/arena_remote.h) and remembers, per
 * connection, each slot and its state word. When the connection closes, the slots are
 * reclaimed as soon as the process is gone (checked every 10 ms); every
 * reclaim_interval_ms, dead processes' slots in every arena are reclaimed whoever attached
 * them. After a restart the daemon reopens the arenas from their records, repairs them, and
 * clients that are still alive re-register their slots (REATTACH) when they reconnect.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../libtensor/internal.h"
#include "../shm/arena_remote.h"
#include "daemon.h"
#include "loadsave.h"
#include "proto.h"

/* ---- state private to the pieces of this file --------------------------------------------- */

/* A connection closed while its process may still be exiting: its slots wait here. */
struct pending {
	struct pending *next;
	struct tnd_arena *arena;
	int slot;
	uint64_t state;
	pid_t pid;
	uint64_t start_time;
	uint64_t deadline_ns;
};

/* Events from worker threads. */
struct event {
	struct event *next;
	struct tnd_client *client; /* may be closing, never freed while a transfer runs */
	uint32_t seq;
	unsigned op;
	bool done;
	int status;
	char message[TND_MESSAGE_SIZE];
	struct tnd_progress progress;
	struct tnd_transfer_reply reply;
};

struct tnd_outmsg {
	struct tnd_outmsg *next;
	size_t len;
	int fd; /* to pass with it, closed after sending; -1 none */
	union {
		struct tnd_hdr hdr;
		unsigned char bytes[TND_MSG_MAX];
	} u;
};

struct tnd_daemon tnd_d;

/* The loop's own. */
static struct {
	struct io_uring ring;
	struct tnd_ring_op accept_op, signal_op, event_op, timer_op;
	struct signalfd_siginfo siginfo;
	uint64_t event_count;
	struct __kernel_timespec timer_ts;
	bool accept_armed;
	bool timer_short;      /* the armed timeout is the 10 ms one of pending slots */
	bool timer_cancelling; /* a TIMEOUT_REMOVE of the long one is in flight */
	uint64_t accept_pause_until; /* out of descriptors: accept again after this */
} L;

static struct pending *pending_list;
static bool cuda_waiting; /* CUDA records of a closed connection's process: poll it */
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static struct event *events;
static _Atomic int workers;
static uint32_t next_client_id;
static tn_arena **abandoned; /* handles of destroyed damaged arenas: mapped until exit */
static size_t nabandoned;
static int lock_fd;
static char config_path[PATH_MAX];
static bool config_required, level_from_cli;

/* ---- arena records --------------------------------------------------------------------------- */

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

/* ---- access control -------------------------------------------------------------------------- */

bool tnd_privileged(const struct tnd_client *c)
{
	return c->uid == 0 || c->uid == tnd_d.uid;
}

static bool in_group(const struct tnd_client *c, uint32_t gid)
{
	if (c->gid == gid)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

unsigned tnd_access_of(const struct tnd_arena *ar, const struct tnd_client *c)
{
	if (tnd_privileged(c) || c->uid == ar->owner_uid)
		return TND_ACC_READ | TND_ACC_WRITE | TND_ACC_ADMIN;
	unsigned bits = in_group(c, ar->owner_gid) ? (ar->mode >> 3) & 7 : ar->mode & 7;
	unsigned acc =
		(bits & 4 ? TND_ACC_READ : 0) | (bits & 2 ? TND_ACC_READ | TND_ACC_WRITE : 0);
	for (uint32_t i = 0; i < ar->ngrants; i++) {
		const struct tnd_grant *g = &ar->grants[i];
		bool match = g->kind == TND_GRANT_USER ? g->id == c->uid : in_group(c, g->id);
		if (match)
			acc |= g->access == TND_ACCESS_READ_WRITE ? TND_ACC_READ | TND_ACC_WRITE
								  : TND_ACC_READ;
	}
	return acc;
}

/* Root and the daemon's own user are not held to the per-user quotas. */
static bool unlimited_user(uid_t uid)
{
	return uid == 0 || uid == tnd_d.uid;
}

bool tnd_may_create(const struct tnd_client *c)
{
	if (tnd_privileged(c) || tnd_d.cfg.create_all)
		return true;
	for (unsigned i = 0; i < tnd_d.cfg.ncreate_uids; i++)
		if (tnd_d.cfg.create_uids[i] == c->uid)
			return true;
	for (unsigned i = 0; i < tnd_d.cfg.ncreate_gids; i++)
		if (in_group(c, tnd_d.cfg.create_gids[i]))
			return true;
	return false;
}

/* ---- replies --------------------------------------------------------------------------------- */

static void submit_send(struct tnd_client *c);

/* A client that does not read its replies gets no more of its requests read once this much
 * waits for it, so it cannot grow the daemon's memory. */
#define OUTQ_MAX ((size_t)256 << 10)

void tnd_queue_msg(struct tnd_client *c, unsigned op, uint32_t seq, int32_t status,
		   uint32_t flags, const void *body, size_t len, int fd)
{
	if (c->closing) {
		if (fd >= 0)
			tnd_close_passed(fd);
		return;
	}
	struct tnd_outmsg *m = malloc(sizeof(*m));
	if (!m) {
		/* Out of memory: the client cannot be answered, so it is dropped. */
		if (fd >= 0)
			tnd_close_passed(fd);
		tnd_error("client %u: out of memory for a reply: dropping it", c->id);
		shutdown(c->fd, SHUT_RDWR);
		return;
	}
	m->next = NULL;
	m->fd = fd;
	tnd_init_hdr(&m->u.hdr, op, len, seq, status, flags | (fd >= 0 ? TND_F_FD : 0));
	if (c->version)
		m->u.hdr.version = c->version; /* what the client speaks */
	if (len)
		memcpy(m->u.bytes + sizeof(m->u.hdr), body, len);
	m->len = sizeof(m->u.hdr) + len;
	c->outq_bytes += m->len;
	if (c->out_tail)
		c->out_tail->next = m;
	else
		c->out_head = m;
	c->out_tail = m;
	submit_send(c);
}

void tnd_reply(struct tnd_client *c, const struct tnd_hdr *req, const void *body, size_t len)
{
	tnd_queue_msg(c, req->op, req->seq, 0, 0, body, len, -1);
}

int tnd_reply_error(struct tnd_client *c, const struct tnd_hdr *req, int code,
		    const char *fmt, ...)
{
	struct tnd_error e = { { 0 } };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	tnd_debug("client %u (pid %d): %s: %s", c->id, (int)c->pid, tnd_op_name(req->op),
		  e.message);
	tnd_queue_msg(c, req->op, req->seq, code < 0 ? code : TN_EIO, 0, &e, sizeof(e), -1);
	return 0;
}

/* A libtensor failure: its code and last message. */
int tnd_reply_tn(struct tnd_client *c, const struct tnd_hdr *req, int code)
{
	return tnd_reply_error(c, req, code, "%s", tn_last_error());
}

/* The per-user quotas: each answers @h and returns false when @c is over its limit. */

/* One more arena of @size bytes (max_arenas_per_user, max_bytes_per_user). */
bool tnd_quota_arena(struct tnd_client *c, const struct tnd_hdr *h, uint64_t size)
{
	if (unlimited_user(c->uid))
		return true;
	unsigned owned = 0;
	uint64_t bytes = 0;
	for (struct tnd_arena *a = tnd_d.arenas; a; a = a->next)
		if (a->owner_uid == c->uid) {
			owned++;
			bytes += a->size;
		}
	if (owned >= tnd_d.cfg.max_arenas_per_user) {
		tnd_reply_error(c, h, TN_ENOSPC, "uid %u owns %u arenas, its limit "
				"(max_arenas_per_user)", (unsigned)c->uid, owned);
		return false;
	}
	if (tnd_d.cfg.max_bytes_per_user && (size > tnd_d.cfg.max_bytes_per_user ||
					     bytes > tnd_d.cfg.max_bytes_per_user - size)) {
		tnd_reply_error(c, h, TN_ENOSPC, "uid %u owns arenas of %" PRIu64 " bytes: "
				"%" PRIu64 " more would pass its limit of %" PRIu64
				" (max_bytes_per_user)", (unsigned)c->uid, bytes, size,
				tnd_d.cfg.max_bytes_per_user);
		return false;
	}
	return true;
}

#define SLOTS_PER_USER 32u

/* One more client slot of @ar. An arena has 256 client slots; someone who only has a grant or
 * a mode bit may not take them all from its owner. */
bool tnd_quota_slots(struct tnd_client *c, const struct tnd_hdr *h,
		     const struct tnd_arena *ar)
{
	if (tnd_access_of(ar, c) & TND_ACC_ADMIN)
		return true;
	unsigned mine = 0;
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		if (o->uid == c->uid)
			for (size_t i = 0; i < o->nslots; i++)
				mine += o->slots[i].arena == ar;
	if (mine >= SLOTS_PER_USER) {
		tnd_reply_error(c, h, TN_EBUSY, "arena \"%s\": uid %u has %u of its client slots "
				"open already, the most a user other than its owner may", ar->name,
				(unsigned)c->uid, mine);
		return false;
	}
	return true;
}

/* One more connection that said HELLO (max_clients_per_user). */
bool tnd_quota_clients(struct tnd_client *c, const struct tnd_hdr *h)
{
	if (unlimited_user(c->uid))
		return true;
	unsigned n = 0;
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		n += o != c && o->uid == c->uid && o->hello_done && !o->closing;
	if (n >= tnd_d.cfg.max_clients_per_user) {
		tnd_reply_error(c, h, TN_EBUSY, "uid %u has %u connections open, its limit "
				"(max_clients_per_user)", (unsigned)c->uid, n);
		return false;
	}
	return true;
}

/* ---- io_uring plumbing ---------------------------------------------------------------------- */

static struct io_uring_sqe *get_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L.ring);
	if (!sqe) {
		io_uring_submit(&L.ring);
		sqe = io_uring_get_sqe(&L.ring);
	}
	return sqe; /* the ring has room after a submit: entries >= what one pass submits */
}

/* Close a descriptor a client passed. Its close may block (a FUSE file's flush waits for the
 * file system's daemon, which the client may run), so it goes through the ring: io_uring
 * closes a file that has a flush method on one of its io-wq workers, never in this thread.
 * The completion carries no op and is ignored. */
void tnd_close_passed(int fd)
{
	struct io_uring_sqe *sqe = get_sqe();
	if (!sqe) {
		close(fd);
		return;
	}
	io_uring_prep_close(sqe, fd);
	io_uring_sqe_set_data(sqe, NULL);
}

static void arm_accept(void)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_multishot_accept(sqe, tnd_d.listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data(sqe, &L.accept_op);
	L.accept_armed = true;
}

void tnd_submit_recv(struct tnd_client *c)
{
	c->riov.iov_base = c->rbuf.bytes;
	c->riov.iov_len = sizeof(c->rbuf.bytes);
	memset(&c->rmh, 0, sizeof(c->rmh));
	c->rmh.msg_iov = &c->riov;
	c->rmh.msg_iovlen = 1;
	c->rmh.msg_control = c->rctl.buf;
	c->rmh.msg_controllen = sizeof(c->rctl.buf);
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_recvmsg(sqe, c->fd, &c->rmh, MSG_CMSG_CLOEXEC);
	io_uring_sqe_set_data(sqe, &c->recv_op);
	c->inflight++;
}

static void submit_send(struct tnd_client *c)
{
	if (c->sending || !c->out_head)
		return;
	struct tnd_outmsg *m = c->out_head;
	c->siov.iov_base = m->u.bytes;
	c->siov.iov_len = m->len;
	memset(&c->smh, 0, sizeof(c->smh));
	c->smh.msg_iov = &c->siov;
	c->smh.msg_iovlen = 1;
	if (m->fd >= 0) {
		memset(&c->sctl, 0, sizeof(c->sctl));
		c->smh.msg_control = c->sctl.buf;
		c->smh.msg_controllen = sizeof(c->sctl.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&c->smh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &m->fd, sizeof(int));
	}
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_sendmsg(sqe, c->fd, &c->smh, MSG_NOSIGNAL);
	io_uring_sqe_set_data(sqe, &c->send_op);
	c->sending = true;
	c->inflight++;
}

void tnd_free_outq(struct tnd_client *c)
{
	while (c->out_head) {
		struct tnd_outmsg *m = c->out_head;
		c->out_head = m->next;
		if (m->fd >= 0)
			close(m->fd);
		free(m);
	}
	c->out_tail = NULL;
	c->outq_bytes = 0;
}

/* ---- slots and reclamation ------------------------------------------------------------------- */

int tnd_slot_add(struct tnd_client *c, struct tnd_arena *ar, int slot, uint64_t state,
		 bool ro)
{
	if (c->nslots == c->capslots) {
		size_t cap = c->capslots ? 2 * c->capslots : 4;
		struct tnd_slot *p = realloc(c->slots, cap * sizeof(*p));
		if (!p)
			return TN_ENOMEM;
		c->slots = p;
		c->capslots = cap;
	}
	c->slots[c->nslots++] = (struct tnd_slot){ ar, slot, state, ro };
	return 0;
}

struct tnd_slot *tnd_slot_find(struct tnd_client *c, const struct tnd_arena *ar, int slot)
{
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].arena == ar && (slot < 0 || c->slots[i].slot == slot))
			return &c->slots[i];
	return NULL;
}

void tnd_slot_drop(struct tnd_client *c, struct tnd_slot *s)
{
	*s = c->slots[--c->nslots];
}

void tnd_reclaim_slot(struct tnd_arena *ar, int slot, uint64_t state, pid_t pid)
{
	uint64_t freed = 0;
	if (!tnd_arena_intact(ar))
		return;
	int r = tn__arena_reclaim_if(ar->a, slot, state, &freed);
	if (r == 1) {
		tnd_d.reclaimed_slots++;
		tnd_info("arena %s: reclaimed slot %d of pid %d (%" PRIu64 " bytes freed)",
			 ar->name, slot, (int)pid, freed);
	} else if (r < 0) {
		tnd_warn("arena %s: reclaiming slot %d: %s", ar->name, slot, tn_last_error());
	}
}

/* Check the pending slots of closed connections: reclaim those whose process is gone. A
 * process still alive after the deadline closed its connection but lives on; its slot is
 * left to the periodic sweep, which reclaims it when it dies. */
void tnd_reclaim_check(void)
{
	cuda_waiting = tnd_cuda_sweep();
	uint64_t now = tnd_now_ns();
	for (struct pending **pp = &pending_list; *pp;) {
		struct pending *p = *pp;
		uint64_t st = tn__proc_start_time(p->pid);
		bool dead = st == 0 || (st != UINT64_MAX && st != p->start_time);
		if (dead)
			tnd_reclaim_slot(p->arena, p->slot, p->state, p->pid);
		if (dead || now > p->deadline_ns) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
}

/* Hand the slots of a closing connection to the pending list, to be reclaimed once its
 * process is gone. */
void tnd_reclaim_later(const struct tnd_client *c)
{
	uint64_t deadline = tnd_now_ns() + 5000000000u;
	for (size_t i = 0; i < c->nslots; i++) {
		struct pending *p = malloc(sizeof(*p));
		if (!p)
			continue; /* the periodic sweep still reclaims it */
		*p = (struct pending){ pending_list, c->slots[i].arena, c->slots[i].slot,
				       c->slots[i].state, c->pid, c->start_time, deadline };
		pending_list = p;
	}
}

/* Whether slots or CUDA records wait for a process to go (then the loop polls every 10 ms). */
bool tnd_reclaim_waiting(void)
{
	return pending_list || cuda_waiting;
}

void tnd_reclaim_sweep(void)
{
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next) {
		tn_arena_stats before, after;
		if (!tnd_arena_intact(ar) || tn_arena_stat(ar->a, &before))
			continue;
		int n = tn_arena_reclaim_dead(ar->a);
		if (n > 0 && !tn_arena_stat(ar->a, &after)) {
			tnd_d.reclaimed_slots += (uint64_t)n;
			tnd_info("arena %s: reclaimed %d slots of dead processes (%" PRIu64
				 " bytes freed)",
				 ar->name, n, after.free_bytes - before.free_bytes);
		}
	}
}

/* Forget every connection's record of an arena (it is being destroyed). */
void tnd_forget_arena(struct tnd_arena *ar)
{
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		for (size_t i = 0; i < c->nslots;)
			if (c->slots[i].arena == ar)
				tnd_slot_drop(c, &c->slots[i]);
			else
				i++;
	for (struct pending **pp = &pending_list; *pp;) {
		if ((*pp)->arena == ar) {
			struct pending *p = *pp;
			*pp = p->next;
			free(p);
		} else {
			pp = &(*pp)->next;
		}
	}
}

/* ---- requests -------------------------------------------------------------------------------- */

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
		tnd_error(
			"arena %s: its file shrank while the daemon used it; the access past "
			"its end was caught (SIGBUS) and read zeros: serving only its destruction",
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

/* Put a new or recovered arena on the daemon's list. */
void tnd_arena_add(struct tnd_arena *ar)
{
	ar->next = tnd_d.arenas;
	tnd_d.arenas = ar;
	tnd_d.narenas++;
}

/* Take @ar off the daemon's list and remove its file and record (@intact: what
 * tnd_arena_intact said of it). @ar itself stays for the caller to report and free. */
void tnd_arena_remove(struct tnd_arena *ar, bool intact)
{
	char dir[PATH_MAX], mp[PATH_MAX];
	const char *file;
	split_path(ar->path, dir, sizeof(dir), &file);
	tnd_forget_arena(ar);
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
	for (struct tnd_arena **pp = &tnd_d.arenas; *pp; pp = &(*pp)->next)
		if (*pp == ar) {
			*pp = ar->next;
			break;
		}
	tnd_d.narenas--;
}

/* Register a newly mapped arena with the SIGBUS guard. */
void tnd_arena_guard(struct tnd_arena *ar)
{
	if (tnd_guard_add(ar->a, &ar->guard))
		tnd_warn("arena %s: not guarded against a shrinking file (no room in the guard's "
			 "table)", ar->name);
}

struct tnd_arena *tnd_arena_for(struct tnd_client *c, const struct tnd_hdr *h,
				const char *name, unsigned need)
{
	struct tnd_arena *ar = tnd_arena_find(name);
	/* Someone who may not even see the arena learns nothing about it: both errors read
	 * "no arena". */
	if (!ar || !(tnd_access_of(ar, c) & (TND_ACC_READ | TND_ACC_ADMIN))) {
		tnd_reply_error(c, h, TN_ENOENT, "no arena \"%s\"", name);
		return NULL;
	}
	if (!tnd_arena_intact(ar) && !(need & TND_ACC_ADMIN)) {
		tnd_reply_error(c, h, TN_EIO, "arena \"%s\" is damaged (its file shrank under the "
				"mapping); only destroy --force is served", name);
		return NULL;
	}
	if ((tnd_access_of(ar, c) & need) != need) {
		tnd_reply_error(c, h, TN_EACCES,
				"arena \"%s\": permission denied (uid %u needs %s "
				"access)",
				name, (unsigned)c->uid,
				need & TND_ACC_ADMIN   ? "owner"
				: need & TND_ACC_WRITE ? "read-write"
						       : "read");
		return NULL;
	}
	return ar;
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
	if (tn_arena_stat(ar->a, &s) == 0) {
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
	if (!ar->resident_ns || tnd_now_ns() - ar->resident_ns > 1000000000u) {
		uint64_t pages[TND_MAX_NODES];
		if (tn_arena_residency(ar->a, pages, TND_MAX_NODES) >= 0) {
			ar->nnodes = TND_MAX_NODES;
			memcpy(ar->resident, pages, sizeof(pages));
			while (ar->nnodes > 1 && !ar->resident[ar->nnodes - 1])
				ar->nnodes--;
		}
		ar->resident_ns = tnd_now_ns();
	}
	w->nnodes = ar->nnodes;
	memcpy(w->resident_pages, ar->resident, sizeof(w->resident_pages));
}

static int do_ARENA_CREATE(struct tnd_client *c, const struct tnd_hdr *h,
			   const struct tnd_arena_create *m, int fd)
{
	if (!tnd_may_create(c))
		return tnd_reply_error(c, h, TN_EACCES,
				       "uid %u may not create arenas (create_users "
				       "in tensord.conf)",
				       (unsigned)c->uid);
	if (tnd_arena_find(m->name))
		return tnd_reply_error(c, h, TN_EEXIST, "arena \"%s\" exists", m->name);
	if (tnd_d.narenas >= tnd_d.cfg.max_arenas)
		return tnd_reply_error(c, h, TN_ENOSPC, "the daemon holds its limit of %u arenas "
				       "(max_arenas)", tnd_d.cfg.max_arenas);
	uint64_t size = m->size ? m->size : tnd_d.cfg.default_arena_size;
	if (!tnd_quota_arena(c, h, size))
		return 0;
	if (tnd_d.cfg.max_arena_size && size > tnd_d.cfg.max_arena_size)
		return tnd_reply_error(c, h, TN_EINVAL,
				       "arena size %" PRIu64 " exceeds max_arena_size "
				       "%" PRIu64,
				       size, tnd_d.cfg.max_arena_size);
	struct tnd_arena *ar = calloc(1, sizeof(*ar));
	if (!ar)
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	memcpy(ar->name, m->name, sizeof(ar->name));
	ar->owner_uid = c->uid;
	ar->owner_gid = c->gid;
	ar->mode = m->mode;
	ar->created = tnd_wall_s();
	tn_arena_options o;
	tn_arena_options_init(&o);
	o.size = size;
	o.max_names = m->max_names;
	o.mode = 0600;
	o.numa_policy =
		m->numa_policy ? (enum tn_numa_policy)m->numa_policy : tnd_d.cfg.numa_policy;
	o.numa_nodes = m->numa_policy ? m->numa_nodes : tnd_d.cfg.numa_nodes;
	bool huge = (m->flags & TND_CREATE_HUGEPAGES) || tnd_d.cfg.hugepages != TND_HUGE_NO;
	const char *dir = tnd_d.cfg.arena_dir;
	if (huge) {
		if (!tnd_d.hugedir[0])
			goto no_huge;
		o.flags |= TN_ARENA_HUGEPAGES | TN_ARENA_REQUIRE_HUGEPAGES |
			   (tnd_d.uid == 0 ? TN_ARENA_RESERVE_HUGEPAGES : 0);
		dir = tnd_d.hugedir;
	}
	o.dir = dir;
	char file[TND_NAME_SIZE + 8];
	snprintf(file, sizeof(file), "%s.arena", m->name);
	int r = tn_arena_create(file, &o, &ar->a);
	if (r && huge && !(m->flags & TND_CREATE_HUGEPAGES) &&
	    tnd_d.cfg.hugepages == TND_HUGE_YES) {
		/* hugepages = yes in the config is a preference: fall back to small pages. */
	no_huge:
		if ((m->flags & TND_CREATE_HUGEPAGES) || tnd_d.cfg.hugepages == TND_HUGE_REQUIRE) {
			free(ar);
			return tnd_reply_error(c, h, TN_ENOTSUP,
					       "no hugetlbfs mount for huge pages "
					       "(hugepage_dir in tensord.conf)");
		}
		o.flags &= ~(TN_ARENA_HUGEPAGES | TN_ARENA_REQUIRE_HUGEPAGES |
			     TN_ARENA_RESERVE_HUGEPAGES);
		dir = tnd_d.cfg.arena_dir;
		o.dir = dir;
		r = tn_arena_create(file, &o, &ar->a);
	}
	if (r) {
		free(ar);
		return tnd_reply_tn(c, h, r);
	}
	snprintf(ar->path, sizeof(ar->path), "%.3900s/%.71s", dir, file);
	tn__arena_uuid(ar->a, ar->uuid);
	ar->size = tnd_arena_file_size(ar->a);
	tnd_arena_guard(ar);
	if ((r = tnd_arena_write_record(ar))) {
		tnd_error("arena %s: cannot write its record: %s", ar->name, strerror(-r));
		tnd_guard_forget(&ar->guard);
		tn_arena_unref(ar->a);
		tn_arena_destroy(file, dir, TN_ARENA_FORCE);
		free(ar);
		return tnd_reply_error(c, h, TN_EIO, "cannot write the arena's record: %s",
				       strerror(-r));
	}
	tnd_arena_add(ar);
	tnd_info("arena %s created by uid %u (pid %d): %" PRIu64 " bytes in %s", ar->name,
		 (unsigned)c->uid, (int)c->pid, size, ar->path);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

static int do_ARENA_OPEN(struct tnd_client *c, const struct tnd_hdr *h,
			 const struct tnd_arena_open *m, int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_READ);
	if (!ar)
		return 0;
	bool ro = (m->flags & TND_OPEN_READ_ONLY) || !(tnd_access_of(ar, c) & TND_ACC_WRITE);
	if (!tnd_quota_slots(c, h, ar))
		return 0;
	int arena_fd = ro ? open(ar->path, O_RDONLY | O_CLOEXEC)
			  : fcntl(tn_arena_fd(ar->a), F_DUPFD_CLOEXEC, 3);
	if (arena_fd < 0)
		return tnd_reply_error(c, h, TN_EIO, "arena \"%s\": %s", m->name, strerror(errno));
	int slot;
	uint64_t state;
	int r = tn__arena_assign_slot(ar->a, c->pid, c->start_time, &slot, &state);
	if (r) {
		close(arena_fd);
		return tnd_reply_tn(c, h, r);
	}
	if (tnd_slot_add(c, ar, slot, state, ro)) {
		tn__arena_reclaim_if(ar->a, slot, state, NULL);
		close(arena_fd);
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	}
	struct tnd_arena_open_reply rep = { .slot = (uint32_t)slot,
					    .flags = ro ? TND_OPEN_READ_ONLY : 0 };
	tn_arena_stats s;
	if (tn_arena_stat(ar->a, &s) == 0) {
		rep.size = s.size;
		memcpy(rep.uuid, s.uuid, 16);
	}
	tnd_debug("arena %s: slot %d to pid %d (%s)", m->name, slot, (int)c->pid, ro ? "ro" : "rw");
	tnd_queue_msg(c, h->op, h->seq, 0, 0, &rep, sizeof(rep), arena_fd);
	return 0;
}

static int do_REATTACH(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_reattach *m,
		       int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_READ);
	if (!ar)
		return 0;
	tn_arena_stats s;
	bool attached;
	int32_t pid;
	uint64_t st, state;
	if (tn_arena_stat(ar->a, &s) || memcmp(s.uuid, m->uuid, 16))
		return tnd_reply_error(c, h, TN_ESTALE, "arena \"%s\" is another arena now",
				       m->name);
	if (tn__arena_slot_info(ar->a, (int)m->slot, &attached, &pid, &st, &state) || !attached ||
	    pid != c->pid || st != c->start_time)
		return tnd_reply_error(c, h, TN_ESTALE,
				       "arena \"%s\": slot %u is not this process's", m->name,
				       m->slot);
	bool ro = (m->flags & TND_OPEN_READ_ONLY) || !(tnd_access_of(ar, c) & TND_ACC_WRITE);
	if (!tnd_slot_find(c, ar, (int)m->slot) && tnd_slot_add(c, ar, (int)m->slot, state, ro))
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	struct tnd_arena_open_reply rep = { .slot = m->slot, .flags = ro ? TND_OPEN_READ_ONLY : 0,
					    .size = s.size };
	memcpy(rep.uuid, s.uuid, 16);
	tnd_info("arena %s: pid %d re-registered slot %u", m->name, (int)c->pid, m->slot);
	tnd_reply(c, h, &rep, sizeof(rep));
	return 0;
}

static int do_ARENA_DESTROY(struct tnd_client *c, const struct tnd_hdr *h,
			    const struct tnd_arena_ref *m, int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_ADMIN);
	if (!ar)
		return 0;
	if (ar->transfers)
		return tnd_reply_error(c, h, TN_EBUSY, "arena \"%s\": a load or save is running",
				       m->name);
	bool intact = tnd_arena_intact(ar);
	if (!intact && !(m->flags & TND_DESTROY_FORCE))
		return tnd_reply_error(c, h, TN_EIO,
				       "arena \"%s\" is damaged: destroy it with --force", m->name);
	if (!(m->flags & TND_DESTROY_FORCE)) {
		tn_arena_client cl[TN_ARENA_MAX_CLIENTS];
		int n = tn_arena_clients(ar->a, cl, TN_ARENA_MAX_CLIENTS);
		int live = 0;
		pid_t first = 0;
		for (int i = 0; i < n; i++)
			if (cl[i].alive && cl[i].pid != getpid() && live++ == 0)
				first = cl[i].pid;
		if (live)
			return tnd_reply_error(c, h, TN_EBUSY,
					       "arena \"%s\": %d processes are attached "
					       "(pid %d first); --force destroys it anyway",
					       m->name, live, (int)first);
	}
	tnd_arena_remove(ar, intact);
	tnd_info("arena %s destroyed by uid %u%s", ar->name, (unsigned)c->uid,
		 m->flags & TND_DESTROY_FORCE ? " (forced)" : "");
	free(ar);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

static int do_ARENA_GRANT(struct tnd_client *c, const struct tnd_hdr *h,
			  const struct tnd_arena_grant *m, int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_ADMIN);
	if (!ar)
		return 0;
	struct tnd_arena saved = *ar;
	uint32_t i;
	for (i = 0; i < ar->ngrants; i++)
		if (ar->grants[i].kind == m->grant.kind && ar->grants[i].id == m->grant.id)
			break;
	if (m->grant.access == TND_ACCESS_NONE) {
		if (i == ar->ngrants)
			return tnd_reply_error(
				c, h, TN_ENOENT, "arena \"%s\" has no grant for %s %u", m->name,
				m->grant.kind == TND_GRANT_USER ? "uid" : "gid", m->grant.id);
		ar->grants[i] = ar->grants[--ar->ngrants];
	} else if (i < ar->ngrants) {
		ar->grants[i].access = m->grant.access;
	} else {
		if (ar->ngrants == TND_MAX_GRANTS)
			return tnd_reply_error(c, h, TN_ENOSPC,
					       "arena \"%s\" has %d grants already", m->name,
					       TND_MAX_GRANTS);
		ar->grants[ar->ngrants++] = m->grant;
	}
	int r = tnd_arena_write_record(ar);
	if (r) {
		*ar = saved;
		return tnd_reply_error(c, h, TN_EIO, "cannot write the arena's record: %s",
				       strerror(-r));
	}
	tnd_info("arena %s: %s %u now has %s access (by uid %u)", ar->name,
		 m->grant.kind == TND_GRANT_USER ? "uid" : "gid", m->grant.id,
		 m->grant.access == TND_ACCESS_NONE   ? "no granted"
		 : m->grant.access == TND_ACCESS_READ ? "read-only"
						      : "read-write",
		 (unsigned)c->uid);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

static int do_ARENA_LIST(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	struct tnd_arena_info w;
	uint64_t count = 0;
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next) {
		if (!(tnd_access_of(ar, c) & (TND_ACC_READ | TND_ACC_ADMIN)) ||
		    !tnd_arena_intact(ar))
			continue;
		tnd_arena_fill_info(ar, &w);
		tnd_queue_msg(c, h->op, h->seq, 0, TND_F_MORE, &w, sizeof(w), -1);
		count++;
	}
	memset(&w, 0, sizeof(w));
	w.count = count;
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

static int do_ARENA_STAT(struct tnd_client *c, const struct tnd_hdr *h,
			 const struct tnd_arena_ref *m, int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_READ);
	if (ar) {
		struct tnd_arena_info w;
		tnd_arena_fill_info(ar, &w);
		tnd_reply(c, h, &w, sizeof(w));
	}
	return 0;
}

static int do_CLIENTS(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	struct tnd_client_info w;
	uint64_t count = 0;
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next) {
		if (o->closing || (!tnd_privileged(c) && o->uid != c->uid))
			continue;
		memset(&w, 0, sizeof(w));
		w.client_id = o->id;
		w.pid = o->pid;
		w.uid = o->uid;
		w.gid = o->gid;
		w.connected = o->connected;
		memcpy(w.program, o->program, sizeof(w.program));
		w.narenas = (uint32_t)o->nslots;
		w.requests = o->requests;
		tnd_queue_msg(c, h->op, h->seq, 0, TND_F_MORE, &w, sizeof(w), -1);
		count++;
	}
	memset(&w, 0, sizeof(w));
	w.count = count;
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

static int do_FSCK(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_arena_ref *m,
		   int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_ADMIN);
	if (!ar)
		return 0;
	tn_arena_fsck_report rep;
	/* TN_EIO: the check ran and problems remain; the report says which (the client
	 * library turns it back into TN_EIO). */
	int r = tn_arena_fsck(ar->a, m->flags, &rep);
	if (r < 0 && r != TN_EIO)
		return tnd_reply_tn(c, h, r);
	struct tnd_fsck_reply w = { .problems = rep.problems, .repaired = rep.repaired,
				    .blocks = rep.blocks, .free_blocks = rep.free_blocks,
				    .orphan_blocks = rep.orphan_blocks, .dead_holds = rep.dead_holds,
				    .dead_clients = rep.dead_clients, .bad_names = rep.bad_names };
	snprintf(w.first_problem, sizeof(w.first_problem), "%s", rep.first_problem);
	if (rep.problems)
		tnd_warn("arena %s: fsck found %" PRIu64 " problems (%" PRIu64 " repaired): %s",
			 ar->name, rep.problems, rep.repaired, rep.first_problem);
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

static int do_GC(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_arena_ref *m,
		 int fd)
{
	struct tnd_gc_reply w = { 0 };
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next) {
		if (m->name[0] ? strcmp(ar->name, m->name)
			       : !(tnd_access_of(ar, c) & TND_ACC_ADMIN))
			continue;
		if (m->name[0] && !tnd_arena_for(c, h, m->name, TND_ACC_ADMIN))
			return 0;
		if (!tnd_arena_intact(ar))
			continue;
		tn_arena_stats before, after;
		tn_arena_stat(ar->a, &before);
		int n = tn_arena_reclaim_dead(ar->a);
		if (n < 0)
			return tnd_reply_tn(c, h, n);
		int64_t t = tn_arena_trim(ar->a);
		tn_arena_stat(ar->a, &after);
		w.reclaimed_slots += (uint64_t)n;
		if (after.free_bytes > before.free_bytes)
			w.freed_bytes += after.free_bytes - before.free_bytes;
		if (t > 0)
			w.trimmed_bytes += (uint64_t)t;
		tnd_d.reclaimed_slots += (uint64_t)n;
	}
	if (m->name[0] && !tnd_arena_find(m->name))
		return tnd_reply_error(c, h, TN_ENOENT, "no arena \"%s\"", m->name);
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

/* The slot this connection has in arena @name (@slot: a given one, or -1 any), or NULL after
 * answering TN_EBADF. */
static struct tnd_slot *slot_of(struct tnd_client *c, const struct tnd_hdr *h, const char *name,
				int slot, const uint8_t uuid[16])
{
	struct tnd_arena *ar = tnd_arena_find(name);
	struct tnd_slot *s = ar ? tnd_slot_find(c, ar, slot) : NULL;
	if (s && (memcmp(ar->uuid, uuid, 16) || !tnd_arena_intact(ar)))
		s = NULL; /* the name was destroyed and made again, or the arena is damaged */
	if (!s)
		tnd_reply_error(c, h, TN_EBADF, "arena \"%s\": %s is not open on this connection",
				name, slot < 0 ? "it" : "that slot");
	return s;
}

static int do_HOLD(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_hold *m, int fd)
{
	struct tnd_slot *s = slot_of(c, h, m->name, (int)m->slot, m->uuid);
	if (!s)
		return 0;
	struct tnd_arena *ar = s->arena;
	tn_arena_handle hd = { .index = m->index, .generation = m->generation };
	struct tn__arena_remote_entry e;
	int r = tn__arena_hold_for(ar->a, s->slot, m->tensor[0] ? m->tensor : NULL,
				   m->tensor[0] ? NULL : &hd, &e);
	if (r)
		return tnd_reply_tn(c, h, r);
	struct tnd_hold_reply w = { .block = e.block, .block_bytes = e.entry.block_bytes,
				    .index = e.entry.handle.index,
				    .generation = e.entry.handle.generation,
				    .dtype = (uint32_t)e.entry.dtype, .ndim = (uint32_t)e.entry.ndim,
				    .flags = e.entry.flags,
				    .storage_offset = e.entry.storage_offset };
	memcpy(w.sizes, e.entry.sizes, sizeof(w.sizes));
	memcpy(w.strides, e.entry.strides, sizeof(w.strides));
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

static int do_RELEASE(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_release *m,
		      int fd)
{
	struct tnd_slot *s = slot_of(c, h, m->name, (int)m->slot, m->uuid);
	if (!s)
		return 0;
	int r = tn__arena_release_for(s->arena->a, s->slot, m->block);
	if (r)
		return tnd_reply_tn(c, h, r);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

static int do_DETACH(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_detach *m,
		     int fd)
{
	struct tnd_slot *s = slot_of(c, h, m->name, (int)m->slot, m->uuid);
	if (!s)
		return 0;
	struct tnd_arena *ar = s->arena;
	/* The process lets go of its slot: a read-only one cannot write the release itself; a
	 * read-write one has already (then the state changed and this does nothing). */
	tnd_reclaim_slot(ar, s->slot, s->state, c->pid);
	tnd_slot_drop(c, s);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

/* ---- load and save on worker threads --------------------------------------------------------- */

struct job {
	struct tnd_client *client;
	struct tnd_arena *arena;
	unsigned op;
	uint32_t seq;
	int fd;
	struct tnd_transfer req;
	uint64_t last_progress;
};

static void post_event(struct event *ev)
{
	pthread_mutex_lock(&event_lock);
	ev->next = events;
	events = ev;
	pthread_mutex_unlock(&event_lock);
	uint64_t one = 1;
	ssize_t n = write(tnd_d.event_fd, &one, sizeof(one));
	(void)n;
}

static void job_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct job *j = ctx;
	struct event *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return; /* a progress report is not worth failing for */
	ev->client = j->client;
	ev->seq = j->seq;
	ev->op = j->op;
	ev->progress.done = done;
	ev->progress.total = total;
	post_event(ev);
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	struct tnd_xfer_result res = { 0 };
	int r = j->op == TND_OP_LOAD
			? tnd_load(j->arena->a, j->fd, j->req.format, j->req.prefix, j->req.flags,
				   job_progress, j, &j->client->cancel, &res)
			: tnd_save(j->arena->a, j->fd, j->req.format, j->req.prefix, j->req.flags,
				   job_progress, j, &j->client->cancel, &res);
	close(j->fd);
	/* The final event is preallocated by the loop (struct event follows the job). */
	struct event *ev = (struct event *)(j + 1);
	ev->client = j->client;
	ev->seq = j->seq;
	ev->op = j->op;
	ev->done = true;
	ev->status = r;
	if (r)
		snprintf(ev->message, sizeof(ev->message), "%s", tn_last_error());
	ev->reply.tensors = res.tensors;
	ev->reply.bytes = res.bytes;
	ev->reply.file_bytes = res.file_bytes;
	ev->reply.elapsed_ns = res.elapsed_ns;
	tn_arena_trim(j->arena->a); /* this thread's cache goes back before it exits */
	post_event(ev);
	return NULL;
}

int tnd_transfer_start(struct tnd_client *c, const struct tnd_hdr *h,
		       const struct tnd_transfer *m, int fd)
{
	struct tnd_arena *ar =
		tnd_arena_for(c, h, m->name, h->op == TND_OP_LOAD ? TND_ACC_WRITE : TND_ACC_READ);
	if (!ar) {
		tnd_close_passed(fd);
		return 0;
	}
	if (c->transfer) {
		tnd_close_passed(fd);
		return tnd_reply_error(c, h, TN_EBUSY,
				       "a load or save is running on this connection");
	}
	struct job *j = calloc(1, sizeof(*j) + sizeof(struct event));
	if (!j) {
		tnd_close_passed(fd);
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	}
	j->client = c;
	j->arena = ar;
	j->op = h->op;
	j->seq = h->seq;
	j->fd = fd;
	j->req = *m;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	c->transfer = true;
	ar->transfers++;
	atomic_fetch_add(&workers, 1);
	int e = pthread_create(&t, &attr, job_run, j);
	pthread_attr_destroy(&attr);
	if (e) {
		c->transfer = false;
		ar->transfers--;
		atomic_fetch_sub(&workers, 1);
		tnd_close_passed(fd);
		free(j);
		return tnd_reply_error(c, h, TN_ENOMEM, "cannot start a worker: %s", strerror(e));
	}
	tnd_info("%s of arena %s for pid %d started", tnd_op_name(h->op), ar->name, (int)c->pid);
	return 0;
}

static int do_LOAD(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_transfer *m,
		   int fd)
{
	return tnd_transfer_start(c, h, m, fd);
}

static int do_SAVE(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_transfer *m,
		   int fd)
{
	return tnd_transfer_start(c, h, m, fd);
}

/* Give the workers up to 3 s to see their cancel flags and end. */
void tnd_transfer_wait(void)
{
	for (int i = 0; i < 3000 && atomic_load(&workers) > 0; i++)
		usleep(1000);
}

void tnd_transfer_events(void)
{
	pthread_mutex_lock(&event_lock);
	struct event *list = events;
	events = NULL;
	pthread_mutex_unlock(&event_lock);
	/* The list is newest first: reverse it so progress goes out in order. */
	struct event *rev = NULL;
	while (list) {
		struct event *n = list->next;
		list->next = rev;
		rev = list;
		list = n;
	}
	for (struct event *ev = rev, *next; ev; ev = next) {
		next = ev->next;
		struct tnd_client *c = ev->client;
		if (!ev->done) {
			tnd_queue_msg(c, ev->op, ev->seq, 0, TND_F_PROGRESS, &ev->progress,
				      sizeof(ev->progress), -1);
			free(ev);
			continue;
		}
		struct job *j = (struct job *)ev - 1;
		j->arena->transfers--;
		atomic_fetch_sub(&workers, 1);
		c->transfer = false;
		if (!ev->status && !tnd_arena_intact(j->arena)) {
			/* The file shrank under the transfer: what was read past its new end
			 * were zeros the guard put there. */
			ev->status = TN_EIO;
			snprintf(ev->message, sizeof(ev->message), "arena \"%s\" is damaged: its "
				 "file shrank during the %s; what it %s is not to be trusted",
				 j->arena->name, ev->op == TND_OP_LOAD ? "load" : "save",
				 ev->op == TND_OP_LOAD ? "loaded" : "saved");
		}
		if (ev->status) {
			struct tnd_error e;
			memcpy(e.message, ev->message, sizeof(e.message));
			tnd_info("%s of arena %s for pid %d failed: %s", tnd_op_name(ev->op),
				 j->arena->name, (int)c->pid, ev->message);
			tnd_queue_msg(c, ev->op, ev->seq, ev->status, 0, &e, sizeof(e), -1);
		} else {
			tnd_info("%s of arena %s for pid %d: %" PRIu64 " tensors, %" PRIu64
				 " bytes in %.3f s", tnd_op_name(ev->op), j->arena->name,
				 (int)c->pid, ev->reply.tensors, ev->reply.bytes,
				 (double)ev->reply.elapsed_ns / 1e9);
			tnd_queue_msg(c, ev->op, ev->seq, 0, 0, &ev->reply, sizeof(ev->reply), -1);
		}
		free(j);
		tnd_client_maybe_free(c);
	}
}

/* ---- dispatch -------------------------------------------------------------------------------- */

/* Stop reading @c; the error reply already queued still goes out (a closing client's queue
 * drains), then client_maybe_free closes the connection. */
void tnd_client_drop(struct tnd_client *c, const char *why)
{
	tnd_warn("client %u (pid %d, uid %u): %s: dropping the connection", c->id, (int)c->pid,
		 (unsigned)c->uid, why);
	c->closing = true;
	atomic_store(&c->cancel, true);
	shutdown(c->fd, SHUT_RD);
}

void tnd_protocol_error(struct tnd_client *c, const char *why)
{
	tnd_d.protocol_errors++;
	tnd_client_drop(c, why);
}

/* ---- session requests ----------------------------------------------------------------------- */

static int do_HELLO(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_hello *m,
		    int fd)
{
	if (m->min_version > TND_VERSION || m->max_version < TND_VERSION_MIN) {
		tnd_reply_error(c, h, TN_EPROTO, "tensord speaks protocol versions %d to %d, "
				"the client %u to %u", TND_VERSION_MIN, TND_VERSION,
				m->min_version, m->max_version);
		tnd_protocol_error(c, "no common protocol version");
		return 0;
	}
	memcpy(c->program, m->program, sizeof(c->program));
	if (!tnd_quota_clients(c, h)) {
		tnd_client_drop(c, "over max_clients_per_user");
		return 0;
	}
	c->hello_done = true;
	c->version = (uint16_t)(m->max_version < TND_VERSION ? m->max_version : TND_VERSION);
	tnd_cuda_connected(c->pid, c->start_time);
	struct tnd_hello_reply r = { .version = c->version, .daemon_pid = getpid(),
				     .client_id = c->id, .uid = c->uid, .gid = c->gid,
				     .max_msg = TND_MSG_MAX, .instance = tnd_d.instance };
	tnd_reply(c, h, &r, sizeof(r));
	return 0;
}

static int do_STATUS(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	struct tnd_status s = { .daemon_pid = getpid(), .uid = tnd_d.uid,
				.instance = tnd_d.instance, .started = tnd_d.started,
				.uptime_ns = tnd_now_ns() - tnd_d.started_ns,
				.arenas = tnd_d.narenas, .clients = tnd_d.nclients,
				.requests = tnd_d.requests,
				.reclaimed_slots = tnd_d.reclaimed_slots,
				.protocol_errors = tnd_d.protocol_errors };
	snprintf(s.arena_dir, sizeof(s.arena_dir), "%.255s", tnd_d.cfg.arena_dir);
	tnd_reply(c, h, &s, sizeof(s));
	return 0;
}

static int do_SHUTDOWN(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	if (!tnd_privileged(c))
		return tnd_reply_error(c, h, TN_EACCES, "only root or uid %u may stop tensord",
				       (unsigned)tnd_d.uid);
	tnd_info("shutdown requested by pid %d (uid %u)", (int)c->pid, (unsigned)c->uid);
	tnd_reply(c, h, NULL, 0);
	tnd_d.stop = true;
	return 0;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

/*
 * Requests are dispatched through one table with a row per operation of the wire list
 * (TND_OP_LIST in proto.h), built from that list. Each operation's handler is do_<NAME>,
 * declared here from the list too: the body it is given has the request type the list names
 * (const void * for an empty body), so a handler that reads another body does not compile, and
 * an operation added to the list without a handler does not link. A handler answers through
 * tnd_reply*() (a refusal is a reply, so it returns 0); @fd is the descriptor that came with
 * the request, which the handler owns: only LOAD and SAVE carry one (proto.c checks that), the
 * others get -1.
 */
#define TND_X_(name, value, req, rep)                                                            \
	static int do_##name(struct tnd_client *c, const struct tnd_hdr *h, const req *m, int fd);
TND_OP_LIST(TND_X_)
#undef TND_X_

/* A row: the handler, reached through a thunk that turns the received bytes into its request
 * type (calling it through a pointer of another type would be undefined), and the size of the
 * request body, which tnd_check_request() has already held the message to: the table repeats
 * it so that the dispatch can tell a handler never reads past what arrived. */
struct handler {
	int (*fn)(struct tnd_client *c, const struct tnd_hdr *h, const void *body, int fd);
	size_t body;
};

#define TND_X_(name, value, req, rep)                                                            \
	static int call_##name(struct tnd_client *c, const struct tnd_hdr *h, const void *body, \
			       int fd)                                                           \
	{                                                                                        \
		return do_##name(c, h, body, fd);                                                \
	}
TND_OP_LIST(TND_X_)
#undef TND_X_

static const struct handler handlers[TND_OP_MAX_] = {
#define TND_X_(name, value, req, rep) [value] = { call_##name, TND_BODY_SIZE(req) },
	TND_OP_LIST(TND_X_)
#undef TND_X_
};

void tnd_handle_request(struct tnd_client *c, size_t len, int fd)
{
	const struct tnd_hdr *h = &c->rbuf.hdr;
	if (tnd_check_request(c->rbuf.bytes, len, fd >= 0)) {
		/* Answer what can be told apart (a known operation with the right magic), then
		 * drop the connection: it is out of step or hostile. */
		char why[300];
		snprintf(why, sizeof(why), "%s", tn_last_error());
		if (fd >= 0)
			tnd_close_passed(fd);
		if (len >= sizeof(*h) && h->magic == TND_MAGIC) {
			struct tnd_error e = { { 0 } };
			snprintf(e.message, sizeof(e.message), "%.255s", why);
			uint16_t op = h->op > 0 && h->op < TND_OP_MAX_ ? h->op : TND_OP_HELLO;
			tnd_queue_msg(c, op, h->seq, TN_EPROTO, 0, &e, sizeof(e), -1);
		}
		tnd_protocol_error(c, why);
		return;
	}
	tnd_d.requests++;
	c->requests++;
	if (!c->hello_done && h->op != TND_OP_HELLO) {
		if (fd >= 0)
			tnd_close_passed(fd);
		tnd_reply_error(c, h, TN_EPROTO, "%s before HELLO", tnd_op_name(h->op));
		tnd_protocol_error(c, "request before HELLO");
		return;
	}
	if (c->hello_done && h->version != c->version) {
		if (fd >= 0)
			tnd_close_passed(fd);
		tnd_reply_error(c, h, TN_EPROTO, "%s: version %u on a connection that chose %u",
				tnd_op_name(h->op), h->version, c->version);
		tnd_protocol_error(c, "message of another protocol version");
		return;
	}
	const struct handler *hd = &handlers[h->op];
	assert(hd->fn && len == sizeof(*h) + hd->body);
	hd->fn(c, h, h + 1, fd);
}

/* ---- CUDA exports (cudashare.c) ----------------------------------------------------------- */

static struct tnd_peer peer_of(const struct tnd_client *c)
{
	return (struct tnd_peer){ .pid = c->pid, .start_time = c->start_time, .uid = c->uid,
				  .gid = c->gid, .privileged = tnd_privileged(c),
				  .ngroups = c->ngroups, .groups = c->groups };
}

bool tnd_process_connected(pid_t pid, uint64_t start_time)
{
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		if (o->pid == pid && o->start_time == start_time && o->hello_done && !o->closing)
			return true;
	return false;
}

struct cuda_list_ctx {
	struct tnd_client *c;
	const struct tnd_hdr *h;
	uint64_t count;
};

static void cuda_list_item(void *ctx, const struct tnd_cuda_info *w)
{
	struct cuda_list_ctx *x = ctx;
	tnd_queue_msg(x->c, x->h->op, x->h->seq, 0, TND_F_MORE, w, sizeof(*w), -1);
	x->count++;
}

/* The final reply of a CUDA request whose answer is an export's record. */
static int cuda_reply(struct tnd_client *c, const struct tnd_hdr *h, int r,
		      const struct tnd_cuda_info *w)
{
	if (r)
		return tnd_reply_tn(c, h, r);
	tnd_reply(c, h, w, sizeof(*w));
	return 0;
}

static int do_CUDA_EXPORT(struct tnd_client *c, const struct tnd_hdr *h,
			  const struct tnd_cuda_export *m, int fd)
{
	struct tnd_peer p = peer_of(c);
	struct tnd_cuda_info w;
	return cuda_reply(c, h, tnd_cuda_export(&p, m, &w), &w);
}

static int do_CUDA_IMPORT(struct tnd_client *c, const struct tnd_hdr *h,
			  const struct tnd_cuda_ref *m, int fd)
{
	struct tnd_peer p = peer_of(c);
	struct tnd_cuda_info w;
	return cuda_reply(c, h, tnd_cuda_import(&p, m, &w), &w);
}

static int do_CUDA_RELEASE(struct tnd_client *c, const struct tnd_hdr *h,
			   const struct tnd_cuda_ref *m, int fd)
{
	struct tnd_peer p = peer_of(c);
	int r = tnd_cuda_release(&p, m);
	if (r)
		return tnd_reply_tn(c, h, r);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

static int do_CUDA_UNEXPORT(struct tnd_client *c, const struct tnd_hdr *h,
			    const struct tnd_cuda_ref *m, int fd)
{
	struct tnd_peer p = peer_of(c);
	struct tnd_cuda_info w;
	return cuda_reply(c, h, tnd_cuda_unexport(&p, m, &w), &w);
}

static int do_CUDA_STAT(struct tnd_client *c, const struct tnd_hdr *h,
			const struct tnd_cuda_ref *m, int fd)
{
	struct tnd_peer p = peer_of(c);
	struct tnd_cuda_info w;
	return cuda_reply(c, h, tnd_cuda_stat(&p, m, &w), &w);
}

static int do_CUDA_LIST(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	struct tnd_peer p = peer_of(c);
	struct cuda_list_ctx x = { c, h, 0 };
	struct tnd_cuda_info w;
	tnd_cuda_list(&p, cuda_list_item, &x);
	memset(&w, 0, sizeof(w));
	w.count = x.count;
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

/* ---- clients --------------------------------------------------------------------------------- */

void tnd_client_new(int fd)
{
	if (tnd_d.nclients >= tnd_d.cfg.max_clients) {
		tnd_warn("refusing a connection: %u clients is the limit (max_clients)",
			 tnd_d.cfg.max_clients);
		close(fd);
		return;
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl)) {
		tnd_warn("SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return;
	}
	struct tnd_client *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->id = ++next_client_id;
	c->pid = cred.pid;
	c->uid = cred.uid;
	c->gid = cred.gid;
	socklen_t gl = sizeof(c->groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, c->groups, &gl) == 0)
		c->ngroups = (int)(gl / sizeof(gid_t));
	c->start_time = tn__proc_start_time(cred.pid);
	c->connected = tnd_wall_s();
	c->recv_op = (struct tnd_ring_op){ TND_RING_RECV, c };
	c->send_op = (struct tnd_ring_op){ TND_RING_SEND, c };
	c->next = tnd_d.clients;
	if (tnd_d.clients)
		tnd_d.clients->prev = c;
	tnd_d.clients = c;
	tnd_d.nclients++;
	tnd_debug("client %u connected: pid %d uid %u gid %u", c->id, (int)c->pid,
		  (unsigned)c->uid, (unsigned)c->gid);
	tnd_submit_recv(c);
}

void tnd_client_maybe_free(struct tnd_client *c)
{
	if (!c->closing || c->inflight || c->transfer)
		return;
	/* Slots go to the pending list: reclaimed once the process is gone. */
	tnd_reclaim_later(c);
	free(c->slots);
	tnd_free_outq(c);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		tnd_d.clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	tnd_d.nclients--;
	tnd_debug("client %u (pid %d) gone", c->id, (int)c->pid);
	bool said_hello = c->hello_done;
	pid_t pid = c->pid;
	uint64_t start_time = c->start_time;
	free(c);
	if (said_hello)
		tnd_cuda_disconnected(pid, start_time);
	tnd_reclaim_check();
	/* Slots and CUDA records wait for their process now: poll every 10 ms from here, not
	 * at the end of a reclaim interval armed when nothing was pending. */
	tnd_loop_poll_soon();
}

void tnd_client_close(struct tnd_client *c)
{
	/* A send blocked on a client that stopped reading ends with an error now. */
	if (!c->closing)
		shutdown(c->fd, SHUT_RDWR);
	c->closing = true;
	atomic_store(&c->cancel, true);
	tnd_client_maybe_free(c);
}

static void on_recv(struct tnd_client *c, int res)
{
	c->inflight--;
	if (res <= 0 || c->closing) {
		/* Descriptors that arrived with a message we will not read. */
		if (res > 0)
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(&c->rmh); cm;
			     cm = CMSG_NXTHDR(&c->rmh, cm))
				if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
					for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
					     i++) {
						int f;
						memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
						close(f);
					}
		tnd_client_close(c);
		return;
	}
	int fd = -1, nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&c->rmh); cm; cm = CMSG_NXTHDR(&c->rmh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int f;
			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			if (nfds++ == 0)
				fd = f;
			else
				close(f);
		}
	}
	if (nfds > 1 || (c->rmh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)res > TND_MSG_MAX) {
		if (fd >= 0)
			close(fd);
		tnd_protocol_error(c, nfds > 1 ? "more than one descriptor" : "message too long");
		tnd_client_close(c);
		return;
	}
	tnd_handle_request(c, (size_t)res, fd);
	if (c->closing)
		tnd_client_maybe_free(c);
	else if (c->outq_bytes >= OUTQ_MAX)
		c->recv_paused = true; /* resumed by on_send once the client reads */
	else
		tnd_submit_recv(c);
}

static void on_send(struct tnd_client *c, int res)
{
	c->inflight--;
	c->sending = false;
	struct tnd_outmsg *m = c->out_head;
	if (m) {
		c->out_head = m->next;
		c->outq_bytes -= m->len;
		if (!c->out_head)
			c->out_tail = NULL;
		if (m->fd >= 0)
			close(m->fd);
		free(m);
	}
	if (res < 0) {
		tnd_debug("client %u: send: %s", c->id, strerror(-res));
		tnd_free_outq(c);
		c->closing = true;
		shutdown(c->fd, SHUT_RDWR);
	}
	if (!c->closing || res >= 0)
		submit_send(c);
	if (c->recv_paused && !c->closing && c->outq_bytes < OUTQ_MAX / 2) {
		c->recv_paused = false;
		tnd_submit_recv(c);
	}
	tnd_client_maybe_free(c);
}

/* ---- startup --------------------------------------------------------------------------------- */

static int mkdir_private(const char *dir)
{
	if (mkdir(dir, 0700) && errno != EEXIST) {
		tnd_error("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode)) {
		tnd_error("%s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != tnd_d.uid) {
		tnd_error("%s belongs to uid %u, not to tensord's uid %u", dir, (unsigned)st.st_uid,
			  (unsigned)tnd_d.uid);
		return -1;
	}
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700)) {
		tnd_error("chmod 0700 %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
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
		tnd_arena_guard(ar);
		tn_arena_fsck_report rep;
		if (tn_arena_fsck(ar->a, TN_ARENA_FSCK_REPAIR, &rep) >= 0 && rep.problems)
			tnd_warn("arena %s: fsck repaired %" PRIu64 " of %" PRIu64 " problems (%s)",
				 ar->name, rep.repaired, rep.problems, rep.first_problem);
		int k = tn_arena_reclaim_dead(ar->a);
		if (k > 0)
			tnd_d.reclaimed_slots += (uint64_t)k;
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

static int sd_notify_msg(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !path[0] || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	ssize_t n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	close(fd);
	return n < 0 ? -1 : 0;
}

/* Bind the socket, refusing when another tensord serves it. */
static int open_socket(void)
{
	const char *path = tnd_d.cfg.socket;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		tnd_error("socket path %s is %zu bytes; a UNIX socket address holds %zu", path,
			  strlen(path), sizeof(sa.sun_path) - 1);
		return -1;
	}
	strcpy(sa.sun_path, path);
	/* The directory (for /run/tensord and similar). */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) && errno != EEXIST) {
			tnd_error("cannot create %s: %s", dir, strerror(errno));
			return -1;
		}
	}
	/* A lock beside the socket serialises daemons starting at the same time. */
	char lock[PATH_MAX];
	snprintf(lock, sizeof(lock), "%s.lock", path);
	lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock_fd < 0) {
		tnd_error("cannot open %s: %s", lock, strerror(errno));
		return -1;
	}
	if (flock(lock_fd, LOCK_EX | LOCK_NB)) {
		tnd_error("another tensord holds %s: it is serving or starting on %s", lock, path);
		return -1;
	}
	/* A daemon killed a moment ago may still have its socket listening: its io_uring is
	 * torn down after the process, by the kernel's workers, and holds the socket until
	 * then. A listener whose process is gone is given up to 2 s to disappear. */
	int probe, pe;
	for (int tries = 0;; tries++) {
		probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (probe < 0 || connect(probe, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			break;
		struct ucred cr = { 0 };
		socklen_t cl = sizeof(cr);
		getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cr, &cl);
		close(probe);
		if (cr.pid > 0 && kill(cr.pid, 0) && errno == ESRCH && tries < 200) {
			usleep(10000);
			continue;
		}
		tnd_error("another tensord (pid %d) is serving %s", (int)cr.pid, path);
		return -1;
	}
	pe = errno;
	if (probe >= 0)
		close(probe);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			tnd_error("%s exists and is not a socket: not touching it", path);
			return -1;
		}
		/* Nothing listens (ECONNREFUSED): a stale socket of a daemon that died. */
		if (pe != ECONNREFUSED) {
			tnd_error("cannot probe %s: %s", path, strerror(pe));
			return -1;
		}
		tnd_info("removing the stale socket %s", path);
		unlink(path);
	}
	/* Access control is by credentials, not by the socket's mode: bind it 0666 (through the
	 * umask, never a chmod by path that a symlink could redirect). */
	tnd_d.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	mode_t old_mask = umask(0111);
	int br = tnd_d.listen_fd < 0 ? -1
				     : bind(tnd_d.listen_fd, (struct sockaddr *)&sa, sizeof(sa));
	int be = errno;
	umask(old_mask);
	if (br) {
		tnd_error("cannot bind %s: %s", path, strerror(be));
		return -1;
	}
	if (listen(tnd_d.listen_fd, 4096)) {
		tnd_error("listen: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void find_hugedir(void)
{
	const char *base = tnd_d.cfg.hugepage_dir;
	char mnt[PATH_MAX] = "";
	if (!base[0]) {
		FILE *f = fopen("/proc/mounts", "re");
		char dev[256], mp[PATH_MAX], type[64];
		while (f && fscanf(f, "%255s %4095s %63s %*[^\n]", dev, mp, type) == 3)
			if (!strcmp(type, "hugetlbfs")) {
				snprintf(mnt, sizeof(mnt), "%s", mp);
				break;
			}
		if (f)
			fclose(f);
		base = mnt;
	}
	if (!base[0])
		return;
	if (tnd_d.uid)
		snprintf(tnd_d.hugedir, sizeof(tnd_d.hugedir), "%.3900s/tensord-%u", base,
			 (unsigned)tnd_d.uid);
	else
		snprintf(tnd_d.hugedir, sizeof(tnd_d.hugedir), "%.3900s/tensord", base);
	if (mkdir_private(tnd_d.hugedir))
		tnd_d.hugedir[0] = 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tensord [--socket PATH] [--config FILE] [--foreground]\n"
		   "               [--log-level error|warn|info|debug] [--log-target stderr|syslog]\n"
		   "               [--arena-dir DIR] [--version] [--help]\n"
		   "The daemon that owns libtensor's shared-memory arenas; see tensord(8).\n");
}

static int parse_args(int argc, char **argv, bool *foreground, char *cfg_err, size_t errlen)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-target", required_argument, NULL, 't' },
		{ "arena-dir", required_argument, NULL, 'd' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *sock = NULL, *level = NULL, *target = NULL, *dir = NULL;
	int o;
	while ((o = getopt_long(argc, argv, "s:c:fl:t:d:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'c': config = optarg; break;
		case 'f': *foreground = true; break;
		case 'l': level = optarg; break;
		case 't': target = optarg; break;
		case 'd': dir = optarg; break;
		case 'V': printf("tensord %s\n", tn_version()); exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tensord: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
	tnd_config_defaults(&tnd_d.cfg);
	char *path = config_path;
	level_from_cli = level != NULL;
	if (config) {
		snprintf(config_path, sizeof(config_path), "%s", config);
		config_required = true;
		if (tnd_config_load(&tnd_d.cfg, config, true, cfg_err, errlen))
			return -1;
	} else {
		const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
		if (tnd_d.uid == 0)
			snprintf(path, PATH_MAX, "/etc/tensord.conf");
		else if (xdg && xdg[0])
			snprintf(path, PATH_MAX, "%.4000s/tensord.conf", xdg);
		else
			snprintf(path, PATH_MAX, "%.4000s/.config/tensord.conf", home ? home : "/");
		if (tnd_config_load(&tnd_d.cfg, path, false, cfg_err, errlen))
			return -1;
	}
	char line[PATH_MAX + 32];
	if (level) {
		snprintf(line, sizeof(line), "log_level = %s", level);
		if (tnd_config_parse(&tnd_d.cfg, line, strlen(line), "--log-level", cfg_err,
				     errlen))
			return -1;
	}
	if (target) {
		snprintf(line, sizeof(line), "log_target = %s", target);
		if (tnd_config_parse(&tnd_d.cfg, line, strlen(line), "--log-target", cfg_err,
				     errlen))
			return -1;
	} else if (!tnd_d.cfg.set_log_target) {
		tnd_d.cfg.log_target = *foreground ? TND_LOG_STDERR : TND_LOG_SYSLOG;
	}
	if (dir) {
		snprintf(line, sizeof(line), "arena_dir = %s", dir);
		if (tnd_config_parse(&tnd_d.cfg, line, strlen(line), "--arena-dir", cfg_err,
				     errlen))
			return -1;
	}
	if (sock) {
		if (strlen(sock) >= sizeof(tnd_d.cfg.socket)) {
			snprintf(cfg_err, errlen,
				 "socket path %s is %zu bytes; a UNIX socket "
				 "address holds %zu",
				 sock, strlen(sock), sizeof(tnd_d.cfg.socket) - 1);
			return -1;
		}
		strcpy(tnd_d.cfg.socket, sock);
	} else if (getenv("TENSORD_SOCKET") && getenv("TENSORD_SOCKET")[0]) {
		const char *env = getenv("TENSORD_SOCKET");
		if (strlen(env) >= sizeof(tnd_d.cfg.socket)) {
			snprintf(cfg_err, errlen, "TENSORD_SOCKET is %zu bytes; a UNIX socket "
				 "address holds %zu", strlen(env), sizeof(tnd_d.cfg.socket) - 1);
			return -1;
		}
		strcpy(tnd_d.cfg.socket, env);
	} else if (!tnd_d.cfg.set_socket) {
		char p[sizeof(tnd_d.cfg.socket)];
		int r = tn_tensord_socket_path(p, sizeof(p));
		if (r < 0) {
			snprintf(cfg_err, errlen, "%s", tn_last_error());
			return -1;
		}
		strcpy(tnd_d.cfg.socket, p);
	}
	if (!tnd_d.cfg.arena_dir[0]) {
		if (tnd_d.uid == 0)
			snprintf(tnd_d.cfg.arena_dir, sizeof(tnd_d.cfg.arena_dir),
				 "/dev/shm/tensord");
		else
			snprintf(tnd_d.cfg.arena_dir, sizeof(tnd_d.cfg.arena_dir),
				 "/dev/shm/tensord-%u", (unsigned)tnd_d.uid);
	}
	return 0;
}

void tnd_reload_config(void)
{
	/* Re-read the config file: the log level (unless --log-level set it), the limits
	 * and who may create arenas change; the socket, the directories, the log target
	 * and the defaults of new arenas stay as they were at start. */
	struct tnd_config n;
	char err[600];
	tnd_config_defaults(&n);
	if (tnd_config_load(&n, config_path, config_required, err, sizeof(err))) {
		tnd_error("SIGHUP: %s: keeping the current configuration", err);
		return;
	}
	if (!level_from_cli)
		tnd_d.cfg.log_level = n.log_level;
	tnd_d.cfg.max_arena_size = n.max_arena_size;
	tnd_d.cfg.max_arenas = n.max_arenas;
	tnd_d.cfg.max_clients = n.max_clients;
	tnd_d.cfg.max_clients_per_user = n.max_clients_per_user;
	tnd_d.cfg.max_arenas_per_user = n.max_arenas_per_user;
	tnd_d.cfg.max_bytes_per_user = n.max_bytes_per_user;
	tnd_d.cfg.reclaim_interval_ms = n.reclaim_interval_ms;
	tnd_d.cfg.create_all = n.create_all;
	tnd_d.cfg.ncreate_uids = n.ncreate_uids;
	tnd_d.cfg.ncreate_gids = n.ncreate_gids;
	memcpy(tnd_d.cfg.create_uids, n.create_uids, sizeof(n.create_uids));
	memcpy(tnd_d.cfg.create_gids, n.create_gids, sizeof(n.create_gids));
	tnd_log_setup(tnd_d.cfg.log_target, tnd_d.cfg.log_level);
	tnd_info("SIGHUP: re-read %s (log level, limits, quotas, create_users)",
		 config_path);
}

/* ---- the loop -------------------------------------------------------------------------------- */

static void arm_signal(void)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_read(sqe, tnd_d.signal_fd, &L.siginfo, sizeof(L.siginfo), 0);
	io_uring_sqe_set_data(sqe, &L.signal_op);
}

static void arm_event(void)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_read(sqe, tnd_d.event_fd, &L.event_count, sizeof(L.event_count), 0);
	io_uring_sqe_set_data(sqe, &L.event_op);
}

static void arm_timer(void)
{
	/* 10 ms while closed connections wait for their process to go, else the sweep. */
	bool waiting = tnd_reclaim_waiting();
	uint64_t ms = waiting || !L.accept_armed ? 10 : tnd_d.cfg.reclaim_interval_ms;
	L.timer_short = waiting;
	L.timer_cancelling = false;
	L.timer_ts.tv_sec = (long long)(ms / 1000);
	L.timer_ts.tv_nsec = (long long)(ms % 1000) * 1000000;
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_timeout(sqe, &L.timer_ts, 0, 0);
	io_uring_sqe_set_data(sqe, &L.timer_op);
}

/* Cut the long timeout short when something starts waiting for a process: the cancelled
 * timeout completes (-ECANCELED) and its handler arms the short one. */
void tnd_loop_poll_soon(void)
{
	if (tnd_reclaim_waiting() && !L.timer_short && !L.timer_cancelling) {
		struct io_uring_sqe *sqe = get_sqe();
		io_uring_prep_timeout_remove(sqe, (__u64)(uintptr_t)&L.timer_op, 0);
		io_uring_sqe_set_data(sqe, NULL);
		L.timer_cancelling = true;
	}
}

static void on_signal(void)
{
	switch (L.siginfo.ssi_signo) {
	case SIGTERM:
	case SIGINT:
		tnd_info("signal %u: shutting down", L.siginfo.ssi_signo);
		tnd_d.stop = true;
		break;
	case SIGHUP:
		tnd_reload_config();
		break;
	default:
		break;
	}
}

void tnd_loop_run(void)
{
	uint64_t last_sweep = tnd_now_ns();
	arm_accept();
	arm_signal();
	arm_event();
	arm_timer();
	uint64_t stop_deadline = 0;
	for (;;) {
		if (tnd_d.stop) {
			/* Let replies already queued (the SHUTDOWN request's own) go out, for at
			 * most a second. */
			bool sending = false;
			for (struct tnd_client *c = tnd_d.clients; c && !sending; c = c->next)
				sending = c->out_head && !c->closing;
			if (!stop_deadline)
				stop_deadline = tnd_now_ns() + 1000000000u;
			if (!sending || tnd_now_ns() > stop_deadline)
				break;
		}
		io_uring_submit_and_wait(&L.ring, 1);
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&L.ring, head, cqe)
		{
			seen++;
			struct tnd_ring_op *op = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			bool more = cqe->flags & IORING_CQE_F_MORE;
			if (!op)
				continue;
			switch (op->kind) {
			case TND_RING_ACCEPT:
				if (res >= 0)
					tnd_client_new(res);
				else if (res == -EMFILE || res == -ENFILE)
					L.accept_pause_until = tnd_now_ns() + 100000000u;
				else if (res != -EINTR && res != -ECONNABORTED)
					tnd_warn("accept: %s", strerror(-res));
				if (!more)
					L.accept_armed = false;
				break;
			case TND_RING_RECV:
				on_recv(op->client, res);
				break;
			case TND_RING_SEND:
				on_send(op->client, res);
				break;
			case TND_RING_SIGNAL:
				if (res == (int)sizeof(L.siginfo))
					on_signal();
				arm_signal();
				break;
			case TND_RING_EVENT:
				tnd_transfer_events();
				arm_event();
				break;
			case TND_RING_TIMER:
				tnd_reclaim_check();
				if (tnd_now_ns() - last_sweep >=
				    (uint64_t)tnd_d.cfg.reclaim_interval_ms * 1000000u) {
					tnd_reclaim_sweep();
					last_sweep = tnd_now_ns();
				}
				arm_timer();
				break;
			}
		}
		io_uring_cq_advance(&L.ring, seen);
		/* A multishot accept ends when the kernel runs out of something (descriptors):
		 * re-arm it, after a pause if descriptors ran out. */
		if (!L.accept_armed && !tnd_d.stop && tnd_now_ns() >= L.accept_pause_until)
			arm_accept();
	}
}

int tnd_loop_init(void)
{
	L.accept_op.kind = TND_RING_ACCEPT;
	L.signal_op.kind = TND_RING_SIGNAL;
	L.event_op.kind = TND_RING_EVENT;
	L.timer_op.kind = TND_RING_TIMER;
	/* Room for a receive and a send per client at once without waiting on a submit. */
	struct io_uring_params params = { .flags = IORING_SETUP_CQSIZE, .cq_entries = 16384 };
	int r = io_uring_queue_init_params(4096, &L.ring, &params);
	if (r) {
		tnd_error("io_uring_queue_init: %s (io_uring disabled?)", strerror(-r));
		return -1;
	}
	return 0;
}

void tnd_loop_fini(void)
{
	io_uring_queue_exit(&L.ring);
}

static void shutdown_daemon(void)
{
	sd_notify_msg("STOPPING=1");
	/* Transfers see the cancel flag and end; wait for them (they use the arenas). */
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		atomic_store(&c->cancel, true);
	tnd_transfer_wait();
	close(tnd_d.listen_fd);
	unlink(tnd_d.cfg.socket);
	/* The lock file stays: removing it would let a daemon that opened it before and one
	 * that creates it afresh both win the lock. */
	close(lock_fd);
	/* Connections close without reclaiming: live clients keep their slots, and their
	 * library re-registers them with the next tensord. */
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		close(c->fd);
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next)
		if (tnd_arena_intact(ar))
			tn_arena_unref(ar->a);
	tnd_cuda_fini(); /* its file stays for the next daemon */
	tnd_loop_fini();
	tnd_info("stopped");
}

int main(int argc, char **argv)
{
	bool foreground = false;
	char err[600];
	tnd_d.uid = geteuid();
	if (parse_args(argc, argv, &foreground, err, sizeof(err))) {
		fprintf(stderr, "tensord: %s\n", err);
		return 1;
	}
	tnd_log_setup(tnd_d.cfg.log_target, tnd_d.cfg.log_level);
	signal(SIGPIPE, SIG_IGN);
	/* A descriptor per client: take all the kernel allows. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int ready[2] = { -1, -1 };
	if (!foreground) {
		if (pipe2(ready, O_CLOEXEC)) {
			perror("tensord: pipe");
			return 1;
		}
		pid_t p = fork();
		if (p < 0) {
			perror("tensord: fork");
			return 1;
		}
		if (p > 0) {
			/* The parent exits when the child listens (0) or fails (1). */
			close(ready[1]);
			char ok = 1;
			ssize_t n = read(ready[0], &ok, 1);
			if (n == 1 && ok == 0)
				return 0;
			/* The child's standard error may be /dev/null by now: say it here. */
			fprintf(stderr, "tensord: failed to start (see the log)\n");
			return 1;
		}
		close(ready[0]);
		setsid();
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			if (tnd_d.cfg.log_target == TND_LOG_SYSLOG)
				dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	tnd_d.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	tnd_d.event_fd = eventfd(0, EFD_CLOEXEC);
	int r;
	if ((r = tnd_guard_init())) {
		tnd_error("cannot install the SIGBUS guard: %s", strerror(-r));
		goto fail;
	}
	if (tnd_d.signal_fd < 0 || tnd_d.event_fd < 0 || mkdir_private(tnd_d.cfg.arena_dir) ||
	    open_socket())
		goto fail;
	if (tnd_loop_init())
		goto fail;
	find_hugedir();
	int rnd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (rnd < 0 || read(rnd, &tnd_d.instance, sizeof(tnd_d.instance)) != sizeof(tnd_d.instance))
		tnd_d.instance = tnd_now_ns() ^ (uint64_t)getpid() << 32;
	if (rnd >= 0)
		close(rnd);
	tnd_d.started = tnd_wall_s();
	tnd_d.started_ns = tnd_now_ns();
	tnd_arenas_recover();
	tnd_cuda_init(tnd_d.cfg.arena_dir, tnd_process_connected);
	/* From here on, this thread gives up on an arena whose lock a client keeps. */
	tn__arena_lock_timeout_ms = 250;
	tnd_info("listening on %s (arenas in %s, %u recovered, pid %d)", tnd_d.cfg.socket,
		 tnd_d.cfg.arena_dir, tnd_d.narenas, (int)getpid());
	sd_notify_msg("READY=1");
	if (ready[1] >= 0) {
		char ok = 0;
		ssize_t n = write(ready[1], &ok, 1);
		(void)n;
		close(ready[1]);
	}
	tnd_loop_run();
	shutdown_daemon();
	return 0;
fail:
	if (ready[1] >= 0) {
		char ok = 1;
		ssize_t n = write(ready[1], &ok, 1);
		(void)n;
	}
	if (foreground && tnd_d.cfg.log_target == TND_LOG_SYSLOG)
		fprintf(stderr, "tensord: failed to start (see the log)\n");
	return 1;
}
