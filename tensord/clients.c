// SPDX-License-Identifier: MIT
/*
 * tensord's connections (daemon.h): a record per accepted connection with the peer's
 * credentials (SO_PEERCRED, SO_PEERGROUPS) and its process's start time, which tell the
 * process apart from a later one with the same pid; the arena slots the daemon assigned to it;
 * and its end. A closing connection is freed once nothing of it is in flight, and its slots
 * are handed to reclamation (reclaim.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../shm/arena_remote.h"
#include "daemon.h"

static uint32_t next_client_id;

/* ---- connections ----------------------------------------------------------------------------- */

/* Refusals of connections, logged at most once a second with how many there were: a flood
 * of connections must not flood the log too. */
static void log_refusal(uid_t uid, const char *why)
{
	static uint64_t last_ns;
	static unsigned suppressed;
	uint64_t now = tnd_now_ns();
	if (last_ns && now - last_ns < 1000000000u) {
		suppressed++;
		return;
	}
	tnd_warn("refusing a connection of uid %u: over %s%s", (unsigned)uid, why,
		 suppressed ? " (and more refusals in the last second)" : "");
	last_ns = now;
	suppressed = 0;
}

void tnd_client_new(int fd)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl)) {
		tnd_warn("SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return;
	}
	const char *why;
	if (!tnd_quota_accept(cred.uid, &why)) {
		log_refusal(cred.uid, why);
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
	c->connected_ns = tnd_now_ns();
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
	if (!c->closing || c->inflight || c->transfer || c->verifying)
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

void tnd_clients_expire(void)
{
	uint64_t now = tnd_now_ns(), limit = (uint64_t)tnd_d.cfg.hello_timeout_ms * 1000000u;
	unsigned n = 0;
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		if (!c->hello_done && !c->closing && now - c->connected_ns > limit) {
			tnd_debug("client %u (pid %d, uid %u): no HELLO within %u ms: dropping it",
				  c->id, (int)c->pid, (unsigned)c->uid, tnd_d.cfg.hello_timeout_ms);
			/* Both ways: its pending receive ends, and the record goes. */
			c->closing = true;
			atomic_store(&c->cancel, true);
			shutdown(c->fd, SHUT_RDWR);
			n++;
		}
	if (n)
		tnd_info("dropped %u connections that said no HELLO within %u ms "
			 "(hello_timeout_ms)", n, tnd_d.cfg.hello_timeout_ms);
}

/* The connection ended or failed: no more receives, and the record goes once nothing of it is
 * in flight. */
void tnd_client_close(struct tnd_client *c)
{
	/* A send blocked on a client that stopped reading ends with an error now. */
	if (!c->closing)
		shutdown(c->fd, SHUT_RDWR);
	c->closing = true;
	atomic_store(&c->cancel, true);
	tnd_client_maybe_free(c);
}

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

/* A message broke the protocol: counted for STATUS, then the connection is dropped. */
void tnd_protocol_error(struct tnd_client *c, const char *why)
{
	tnd_d.protocol_errors++;
	tnd_client_drop(c, why);
}

bool tnd_process_connected(pid_t pid, uint64_t start_time)
{
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		if (o->pid == pid && o->start_time == start_time && o->hello_done && !o->closing)
			return true;
	return false;
}

/* ---- slots ----------------------------------------------------------------------------------- */

int tnd_slot_add(struct tnd_client *c, struct tnd_arena *ar, int slot, uint64_t state, bool ro)
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
	if (slot >= 0 && slot < TN_ARENA_MAX_CLIENTS) {
		ar->owners[slot] = (struct tnd_slot_owner){ state, c->pid, c->start_time };
		tnd_ledger_owner(ar, slot);
	}
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
