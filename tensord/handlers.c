// SPDX-License-Identifier: MIT
/*
 * tensord's requests (daemon.h): a handler per operation of the wire protocol (proto.h), and
 * the table they are dispatched through, built from the protocol's list of operations. A
 * request reaches its handler only after tnd_check_request() (proto.c) has checked every field
 * of it and the connection has said HELLO in the version it uses; the handler checks access
 * and the daemon's state, and answers exactly once through the replies of loop.c.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../shm/arena_remote.h"
#include "../shm/shm.h"
#include "daemon.h"

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

/* ---- session --------------------------------------------------------------------------------- */

static int do_HELLO(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_hello *m,
		    int fd)
{
	if (c->hello_done) {
		/* The version is chosen once: a second HELLO could switch the connection to
		 * another one under requests already answered. */
		tnd_reply_error(c, h, TN_EPROTO, "HELLO on a connection that said HELLO already");
		tnd_protocol_error(c, "a second HELLO");
		return 0;
	}
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

static int do_PEER_ADD(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_peer_ref *r,
		       int fd)
{
	if (!tnd_privileged(c))
		return tnd_reply_error(c, h, TN_EPERM, "adding a peer is for root and the daemon's "
				       "user");
	char why[TND_MESSAGE_SIZE];
	int e = tnd_peers_add(r->address, why, sizeof(why));
	if (e)
		return tnd_reply_error(c, h, e, "%s", why);
	char esc[2 * TND_PEER_ADDR_SIZE];
	tnd_log_escape(esc, sizeof(esc), r->address);
	tnd_info("peer %s added by pid %d (uid %u)", esc, (int)c->pid, (unsigned)c->uid);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

static int do_PULL(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m, int fd)
{
	return tnd_peers_pull(c, h, m);
}

static int do_PUSH(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m, int fd)
{
	return tnd_peers_push(c, h, m);
}

static int do_PEER_LIST(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	struct tnd_peer_info *list = NULL, fin;
	size_t n = tnd_peers_list(&list);
	for (size_t i = 0; i < n; i++)
		tnd_queue_msg(c, h->op, h->seq, 0, TND_F_MORE, &list[i], sizeof(list[i]), -1);
	free(list);
	memset(&fin, 0, sizeof(fin));
	fin.count = n;
	tnd_reply(c, h, &fin, sizeof(fin));
	return 0;
}

/* The Prometheus text of the daemon's figures, in pieces: the arenas the client may read and,
 * unless it is privileged, its own user's connections only (as CLIENTS). */
static int do_METRICS(struct tnd_client *c, const struct tnd_hdr *h, const void *m, int fd)
{
	char *text;
	size_t len;
	int r = tnd_metrics_render(c, &text, &len);
	if (r)
		return tnd_reply_error(c, h, r, "out of memory for the metrics");
	struct tnd_metrics_chunk *w = malloc(sizeof(*w));
	if (!w) {
		free(text);
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory for the metrics");
	}
	uint64_t count = 0;
	for (size_t off = 0; off < len; off += w->len, count++) {
		memset(w, 0, sizeof(*w));
		w->len = (uint32_t)(len - off < TND_METRICS_CHUNK ? len - off : TND_METRICS_CHUNK);
		memcpy(w->text, text + off, w->len);
		tnd_queue_msg(c, h->op, h->seq, 0, TND_F_MORE, w, sizeof(*w), -1);
	}
	memset(w, 0, sizeof(*w));
	w->count = count;
	tnd_reply(c, h, w, sizeof(*w));
	free(w);
	free(text);
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

/* ---- arenas ---------------------------------------------------------------------------------- */

static int do_ARENA_CREATE(struct tnd_client *c, const struct tnd_hdr *h,
			   const struct tnd_arena_create *m, int fd)
{
	if (!tnd_may_create(c))
		return tnd_reply_error(c, h, TN_EACCES, "uid %u may not create arenas "
				       "(create_users in tensord.conf)", (unsigned)c->uid);
	struct tnd_arena *other = tnd_arena_find(m->name);
	/* Someone who may not see the arena is not told that the name is taken (an oracle for
	 * other users' arena names): the creation is refused as an arena of theirs would be. */
	if (other && !(tnd_access_of(other, c) & (TND_ACC_READ | TND_ACC_ADMIN)))
		return tnd_reply_error(c, h, TN_EACCES, "arena \"%s\": permission denied",
				       m->name);
	if (other)
		return tnd_reply_error(c, h, TN_EEXIST, "arena \"%s\" exists", m->name);
	if (tnd_d.narenas >= tnd_d.cfg.max_arenas)
		return tnd_reply_error(c, h, TN_ENOSPC, "the daemon holds its limit of %u arenas "
				       "(max_arenas)", tnd_d.cfg.max_arenas);
	uint64_t size = m->size ? m->size : tnd_d.cfg.default_arena_size;
	if (!tnd_quota_arena(c, h, size, m->max_names ? m->max_names
						      : tn__arena_default_max_names(size)))
		return 0;
	if (tnd_d.cfg.max_arena_size && size > tnd_d.cfg.max_arena_size)
		return tnd_reply_error(c, h, TN_EINVAL, "arena size %" PRIu64 " exceeds "
				       "max_arena_size %" PRIu64, size, tnd_d.cfg.max_arena_size);
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
			return tnd_reply_error(c, h, TN_ENOTSUP, "no hugetlbfs mount for huge "
					       "pages (hugepage_dir in tensord.conf)");
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
	if ((r = tnd_arena_write_record(ar)) || (r = tnd_ledger_open(ar, false))) {
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
	if (!tnd_quota_slots(c, h, ar) || !tnd_arena_gate(c, h, ar))
		return 0;
	int arena_fd = ro ? open(ar->path, O_RDONLY | O_CLOEXEC)
			  : fcntl(tn_arena_fd(ar->a), F_DUPFD_CLOEXEC, 3);
	if (arena_fd < 0)
		return tnd_reply_error(c, h, TN_EIO, "arena \"%s\": %s", m->name, strerror(errno));
	int slot;
	uint64_t state;
	int r = tnd_arena_locked(ar, tn__arena_assign_slot(ar->a, c->pid, c->start_time, &slot,
							   &state));
	if (r) {
		close(arena_fd);
		return tnd_reply_tn(c, h, r);
	}
	if (tnd_slot_add(c, ar, slot, state, ro)) {
		tn__arena_reclaim_if(ar->a, slot, state, NULL);
		close(arena_fd);
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	}
	/* The size and uuid never change: the header's copy, read without the lock. */
	struct tnd_arena_open_reply rep = { .slot = (uint32_t)slot,
					    .flags = ro ? TND_OPEN_READ_ONLY : 0, .size = ar->size };
	memcpy(rep.uuid, ar->uuid, 16);
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
	bool attached;
	int32_t pid;
	uint64_t st, state;
	if (memcmp(ar->uuid, m->uuid, 16))
		return tnd_reply_error(c, h, TN_ESTALE, "arena \"%s\" is another arena now",
				       m->name);
	/* The slot must be this process's by the daemon's own record where it has one (kept in
	 * NAME.slots across restarts), by the file's table otherwise (a slot attached without
	 * the daemon), and attached with the state word recorded. */
	const struct tnd_slot_owner *o = &ar->owners[m->slot];
	if (tn__arena_slot_info(ar->a, (int)m->slot, &attached, &pid, &st, &state) || !attached ||
	    (o->state ? o->state != state || o->pid != c->pid || o->start_time != c->start_time
		      : pid != c->pid || st != c->start_time))
		return tnd_reply_error(c, h, TN_ESTALE, "arena \"%s\": slot %u is not this "
				       "process's", m->name, m->slot);
	bool ro = (m->flags & TND_OPEN_READ_ONLY) || !(tnd_access_of(ar, c) & TND_ACC_WRITE);
	if (!tnd_slot_find(c, ar, (int)m->slot) && tnd_slot_add(c, ar, (int)m->slot, state, ro))
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	struct tnd_arena_open_reply rep = { .slot = m->slot, .flags = ro ? TND_OPEN_READ_ONLY : 0,
					    .size = ar->size };
	memcpy(rep.uuid, ar->uuid, 16);
	tnd_info("arena %s: pid %d re-registered slot %u", m->name, (int)c->pid, m->slot);
	tnd_reply(c, h, &rep, sizeof(rep));
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
		/* One arena asked for: its lock held is an error naming the holder, never
		 * figures that may be stale. */
		if (w.flags & TND_INFO_LOCKED)
			return tnd_reply_tn(c, h, TN_EBUSY);
		tnd_reply(c, h, &w, sizeof(w));
	}
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
		return tnd_reply_error(c, h, TN_EIO, "arena \"%s\" is damaged: destroy it with "
				       "--force", m->name);
	if (!(m->flags & TND_DESTROY_FORCE)) {
		tn_arena_client cl[TN_ARENA_MAX_CLIENTS];
		if (!tnd_arena_gate(c, h, ar))
			return 0;
		int n = tnd_arena_locked(ar, tn_arena_clients(ar->a, cl, TN_ARENA_MAX_CLIENTS));
		if (n < 0) /* who is attached cannot be told: not destroyed without --force */
			return tnd_reply_tn(c, h, n);
		int live = 0;
		pid_t first = 0;
		for (int i = 0; i < n; i++)
			if (cl[i].alive && cl[i].pid != getpid() && live++ == 0)
				first = cl[i].pid;
		if (live)
			return tnd_reply_error(c, h, TN_EBUSY, "arena \"%s\": %d processes are "
					       "attached (pid %d first); --force destroys it "
					       "anyway", m->name, live, (int)first);
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
			return tnd_reply_error(c, h, TN_ENOENT, "arena \"%s\" has no grant for "
					       "%s %u", m->name,
					       m->grant.kind == TND_GRANT_USER ? "uid" : "gid",
					       m->grant.id);
		ar->grants[i] = ar->grants[--ar->ngrants];
	} else if (i < ar->ngrants) {
		ar->grants[i].access = m->grant.access;
	} else {
		if (ar->ngrants == TND_MAX_GRANTS)
			return tnd_reply_error(c, h, TN_ENOSPC, "arena \"%s\" has %d grants "
					       "already", m->name, TND_MAX_GRANTS);
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

static int do_FSCK(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_arena_ref *m,
		   int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_ADMIN);
	if (!ar)
		return 0;
	tn_arena_fsck_report rep;
	if (!tnd_arena_gate(c, h, ar))
		return 0;
	/* TN_EIO: the check ran and problems remain; the report says which (the client
	 * library turns it back into TN_EIO). */
	/* The client table against the daemon's record first: a repair writes the daemon's
	 * record back over a forged one, before anything judges the slot by it; a forgery left
	 * (the lock was busy) would have the repair reclaim a live client's slot, so there is
	 * no repair then, only the report. */
	tn_arena_fsck_report own = { 0 };
	bool repair = m->flags & TN_ARENA_FSCK_REPAIR;
	uint64_t forged = tnd_fsck_owners(ar, repair, &own);
	unsigned flags = forged ? m->flags & ~TN_ARENA_FSCK_REPAIR : m->flags;
	int r = tnd_arena_locked(ar, tn_arena_fsck(ar->a, flags, &rep));
	if (r < 0 && r != TN_EIO)
		return tnd_reply_tn(c, h, r);
	if (own.problems) {
		rep.problems += own.problems;
		rep.repaired += own.repaired;
		memcpy(rep.first_problem, own.first_problem, sizeof(rep.first_problem));
	}
	/* The seal record against the directory: cleared bits, rewritten descriptions, bytes a
	 * verification found changed. */
	tnd_ledger_fsck(ar, repair && !forged, &rep);
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
		/* Every arena: one whose lock is held is left for later; the one named: an
		 * error. */
		if (!m->name[0] && !tnd_arena_lockable(ar))
			continue;
		if (!tnd_arena_gate(c, h, ar))
			return 0;
		tn_arena_stats before, after;
		int r = tnd_arena_locked(ar, tn_arena_stat(ar->a, &before));
		if (r == TN_EBUSY && !m->name[0])
			continue;
		if (r)
			return tnd_reply_tn(c, h, r);
		int n = tnd_arena_locked(ar, tn_arena_reclaim_dead(ar->a));
		if (n < 0)
			return tnd_reply_tn(c, h, n);
		int64_t t = tn_arena_trim(ar->a);
		w.reclaimed_slots += (uint64_t)n;
		tnd_d.reclaimed_slots += (uint64_t)n;
		/* Without a second reading the freed bytes are not known: not made up. */
		if ((r = tnd_arena_locked(ar, tn_arena_stat(ar->a, &after))))
			return tnd_reply_tn(c, h, r);
		if (after.free_bytes > before.free_bytes)
			w.freed_bytes += after.free_bytes - before.free_bytes;
		if (t > 0)
			w.trimmed_bytes += (uint64_t)t;
	}
	if (m->name[0] && !tnd_arena_find(m->name))
		return tnd_reply_error(c, h, TN_ENOENT, "no arena \"%s\"", m->name);
	tnd_reply(c, h, &w, sizeof(w));
	return 0;
}

/* ---- holds for read-only clients ------------------------------------------------------------- */

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
	if (!tnd_arena_gate(c, h, ar))
		return 0;
	int r = tnd_arena_locked(ar, tn__arena_hold_for(ar->a, s->slot,
							m->tensor[0] ? m->tensor : NULL,
							m->tensor[0] ? NULL : &hd, &e));
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
	if (!tnd_arena_gate(c, h, s->arena))
		return 0;
	int r = tnd_arena_locked(s->arena, tn__arena_release_for(s->arena->a, s->slot, m->block));
	if (r)
		return tnd_reply_tn(c, h, r);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

/* A read-only client waits for a publish (tn_arena_lookup_wait): its slot's bit in the arena's
 * waiting mask, which its read-only mapping cannot write. The slot's reclamation clears it. */
static int do_WAITING(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_waiting *m,
		      int fd)
{
	struct tnd_slot *s = slot_of(c, h, m->name, (int)m->slot, m->uuid);
	if (!s)
		return 0;
	if (!tnd_arena_gate(c, h, s->arena))
		return 0;
	int r = tn__arena_waiting_for(s->arena->a, s->slot, m->on != 0);
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

/* ---- load and save (transfer.c) -------------------------------------------------------------- */

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

/* ---- CUDA exports (cudashare.c) -------------------------------------------------------------- */

static struct tnd_peer peer_of(const struct tnd_client *c)
{
	return (struct tnd_peer){ .pid = c->pid, .start_time = c->start_time, .uid = c->uid,
				  .gid = c->gid, .privileged = tnd_privileged(c),
				  .ngroups = c->ngroups, .groups = c->groups };
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

/* The final reply of a CUDA request whose answer is an export's record: @w, or the error @r. */
static int cuda_reply(struct tnd_client *c, const struct tnd_hdr *h, int r,
		      const struct tnd_cuda_info *w)
{
	if (r)
		return tnd_reply_tn(c, h, r);
	tnd_reply(c, h, w, sizeof(*w));
	return 0;
}

/* IMPORT, UNEXPORT and STAT: @op on the export @m names. */
static int cuda_by_ref(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_cuda_ref *m,
		       int (*op)(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
				 struct tnd_cuda_info *ret))
{
	struct tnd_peer p = peer_of(c);
	struct tnd_cuda_info w;
	return cuda_reply(c, h, op(&p, m, &w), &w);
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
	return cuda_by_ref(c, h, m, tnd_cuda_import);
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
	return cuda_by_ref(c, h, m, tnd_cuda_unexport);
}

static int do_CUDA_STAT(struct tnd_client *c, const struct tnd_hdr *h,
			const struct tnd_cuda_ref *m, int fd)
{
	return cuda_by_ref(c, h, m, tnd_cuda_stat);
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

/* ---- dispatch -------------------------------------------------------------------------------- */

/* A row: the handler, reached through a thunk that turns the received bytes into its request
 * type (calling it through a pointer of another type would be undefined), and the size of the
 * request body, which tnd_check_request() has already held the message to: the table repeats
 * it so that the dispatch can tell a handler never reads past what arrived. */
/* A read-write client sealed a tensor: the daemon records the seal where grantees cannot
 * write, and digests the bytes. */
static int do_SEALED(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_sealed *m,
		     int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_WRITE);
	if (!ar || !tnd_arena_gate(c, h, ar))
		return 0;
	int r = tnd_ledger_sealed(ar, m->tensor);
	if (r)
		return tnd_reply_tn(c, h, r);
	tnd_reply(c, h, NULL, 0);
	return 0;
}

/* Every sealed tensor's bytes against the digest taken when the seal was recorded; any reader
 * may ask. The reply waits for the digest worker. */
static int do_VERIFY(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_arena_ref *m,
		     int fd)
{
	struct tnd_arena *ar = tnd_arena_for(c, h, m->name, TND_ACC_READ);
	if (!ar || !tnd_arena_gate(c, h, ar))
		return 0;
	if (!tnd_arena_intact(ar))
		return tnd_reply_error(c, h, TN_EIO, "arena \"%s\" is damaged: its file shrank",
				       ar->name);
	return tnd_ledger_verify(c, h, ar);
}

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
	unsigned op = h->op; /* the handler may free the client and its buffer */
	uint64_t t0 = tnd_now_ns();
	hd->fn(c, h, h + 1, fd);
	tnd_metrics_observe(op, tnd_now_ns() - t0);
}
