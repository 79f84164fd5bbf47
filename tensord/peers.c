// SPDX-License-Identifier: MIT
/*
 * tensord's peers (daemon.h, libtensor-peers(7)): the connections to other tensord daemons.
 *
 * One thread, started when peer_secret is set, owns everything here but the list of dialed
 * addresses and the snapshot PEER_LIST reads (both under P.lock): an epoll loop over the
 * peer_listen socket, the control connections, the UCX worker's event fd and an eventfd by
 * which the daemon's loop wakes it. The daemon's loop thread only adds addresses and reads
 * the snapshot, so nothing here can stall a local client's request.
 *
 * A control connection is TCP, framed (struct frame): magic "TNPR", version, type, length,
 * sequence. Its handshake:
 *   dialer -> HELLO {nonce, listen address}     listener -> HELLO {nonce, listen address}
 *   dialer -> PROOF {HMAC, peer_auth.h}         listener checks it, then -> PROOF, ADDR
 *   dialer checks the listener's proof, -> ADDR
 * and each side makes a UCX endpoint to the other's worker address once the other side has
 * proved that it knows the secret: UCX does not validate addresses, so none is parsed before
 * that. Before the proof, a frame longer than a HELLO, or of another type, drops the
 * connection; so does a handshake longer than peer_timeout_ms, a silence as long (PING every
 * third of it keeps a connection alive), or a peer that leaves more than OUT_MAX bytes unread.
 * Dialed peers are dialed again after a failure, waiting 100 ms doubling to 5 s.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "daemon.h"
#include "peer_auth.h"
#include "peer_module.h"
#include "peer_read.h"

#define FRAME_MAGIC 0x52504e54u /* "TNPR" in memory on a little-endian machine */
#define FRAME_VERSION 4 /* 2: PUSH, PUSH_DONE; 3: direct reads (ADDR's f_local, LOCAL_READ);
			  4: f_local.flags, SEND (bytes by active messages) */
#define FRAME_MAX ((uint32_t)1 << 20)  /* a frame's payload, after the handshake */
#define FRAME_PRE_AUTH 512             /* ... and before it */
#define OUT_MAX ((size_t)4 << 20)      /* unsent bytes a peer may leave before it is dropped */
#define MAX_PENDING 16                 /* accepted connections not yet authenticated */
#define RETRY_MIN_NS 100000000u
#define RETRY_MAX_NS 5000000000u
#define MAX_RECEIVING 256               /* pushes of one peer being received at once */

enum frame_type {
	F_HELLO = 1,
	F_PROOF = 2,
	F_ADDR = 3,
	F_PING = 4,
	F_PONG = 5,
	F_PULL = 6,      /* struct f_pull: hold a sealed tensor for a get */
	F_PULL_INFO = 7, /* struct f_pull_info, then the packed remote key */
	F_RELEASE = 8,   /* struct f_release: the get ended, let the block go */
	F_PUSH = 9,      /* struct f_push, f_pull_info, the packed key: publish this, held */
	F_PUSH_DONE = 10, /* struct f_push_done: the pushed tensor is published, or why not */
	F_BATCH_INFO = 11, /* struct f_batch_info, then its entries: a PULL of a prefix answered */
	F_LOCAL_READ = 12, /* no payload: the sender reads this side's blocks itself (peer_read.h) */
	F_SEND = 13,       /* struct f_send: send a lease's blocks by active messages */
	F_TYPE_MAX_
};

struct frame {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len; /* of the payload that follows */
	uint32_t seq;
};

struct f_hello {
	unsigned char nonce[TND_PEER_NONCE];
	char listen[TND_PEER_ADDR_SIZE]; /* the sender's peer_listen, "" when none */
	uint64_t instance;               /* the sender's (tnd_d.instance): not itself */
};

/* ADDR: this, then the UCX worker's address. A daemon that offers direct reads of its memory
 * (peer_read.h) names its pid and where the token for this connection is. */
struct f_local {
	char boot_id[40]; /* /proc/sys/kernel/random/boot_id */
	uint64_t pidns;   /* the inode of /proc/self/ns/pid */
	uint64_t token;   /* the token's address in the sender's memory */
	int32_t pid;      /* 0: no direct reads */
	uint32_t flags;   /* LOCAL_SHM */
};

#define LOCAL_SHM 1u /* f_local.flags: the sender's UCX has a shared-memory transport */

struct f_ping {
	uint64_t sent_ns; /* the sender's clock, echoed by PONG */
};

#define PULL_PREFIX 1u /* f_pull.flags: every sealed tensor whose name starts with name */
#define PULL_SEND 2u   /* f_pull.flags: no remote keys, the puller will SEND for the bytes */
#define BATCH_MAX 4096 /* tensors in one batch */
#define BATCH_VECTOR_MAX ((uint64_t)256 << 10) /* read directly, a batch's blocks up to this go
						  in one vectored copy */

struct f_pull {
	uint64_t id; /* the puller's, echoed by PULL_INFO or BATCH_INFO */
	char arena[TND_NAME_SIZE];
	char name[TND_PREFIX_SIZE];
	uint32_t flags; /* PULL_PREFIX */
	uint32_t pad;
};

/* A batch's answer: one lease for every tensor, then @count entries, each a struct
 * f_batch_entry followed by its name (name_len bytes, no NUL), its sizes and strides (ndim
 * int64 each) and its packed remote key (rkey_len bytes). */
struct f_batch_info {
	uint64_t id;
	int32_t status;
	uint32_t count;
	uint64_t lease;
	char message[TND_MESSAGE_SIZE];
};

struct f_batch_entry {
	uint64_t nbytes, raddr;
	uint32_t rkey_len;
	uint16_t name_len;
	uint8_t dtype, ndim;
};

struct f_pull_info {
	uint64_t id;
	int32_t status; /* 0, or a TN_E* code with a message */
	uint32_t dtype;
	uint32_t ndim;
	uint32_t rkey_len; /* the bytes after this struct */
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t strides[TN_ARENA_MAX_DIMS];
	uint64_t nbytes; /* from the element at the lowest offset to the highest's end */
	uint64_t raddr;  /* where those bytes are in the holder's memory */
	uint64_t lease;  /* to release */
	char message[TND_MESSAGE_SIZE];
};

struct f_release {
	uint64_t lease;
};

/* Send every block of @lease, the i-th as an active message keyed (@key, i) (peer_ucx.h). */
struct f_send {
	uint64_t lease;
	uint64_t key;
};

/* A push: the pusher holds its sealed tensor (a lease, as for a PULL), and asks the receiver to
 * get it and publish it as @name in its arena @arena; the lease is the pusher's to release once
 * PUSH_DONE came (or the connection was lost). */
struct f_push {
	uint64_t id; /* the pusher's, echoed by PUSH_DONE */
	char arena[TND_NAME_SIZE];
	char name[TND_PREFIX_SIZE];
	char src_arena[TND_NAME_SIZE]; /* for messages */
	char src_name[TND_PREFIX_SIZE];
};

struct f_push_done {
	uint64_t id;
	int32_t status; /* 0, or a TN_E* code with a message */
	uint32_t pad;
	uint64_t bytes;
	char message[TND_MESSAGE_SIZE];
};

/* Held for a peer's get (the holder's side). */
struct held {
	tn_tensor *tensor; /* holds the block */
	struct tnd_ucx_mem *mem;
	uint64_t nbytes;       /* its bytes, from the lowest element's */
	struct tnd_ucx_op *op; /* the active message sending them, after SEND */
};

struct lease {
	struct lease *next;
	uint64_t id;
	size_t n;          /* tensors held: 1, or a batch's */
	struct held *held; /* &one, or an array */
	struct held one;
	bool sent;         /* SEND came */
	bool sends_ended;  /* ... and its active messages ended */
	bool released;     /* RELEASE came while an active message was still sending */
};

/* A transfer. A pull (the puller's side) and a push (the pusher's side): the loop thread makes
 * it, this thread runs it, the loop answers the client. A push received: this thread makes and
 * runs it as a pull whose holder's answer came with the request, and the loop only records the
 * seal (client NULL). */
enum job_kind { J_PULL, J_PUSH, J_RECEIVED };

/* One tensor of a batch (a pull of a prefix), on the puller's side. */
struct part {
	char name[TN_ARENA_NAME_MAX + 1]; /* the local name */
	uint32_t dtype, ndim;
	int64_t sizes[TN_ARENA_MAX_DIMS], strides[TN_ARENA_MAX_DIMS];
	uint64_t nbytes;
	tn_storage *storage;
	struct tnd_ucx_mem *mem;
	struct tnd_ucx_op *op;
	struct tnd_read *rd; /* a direct read instead of op */
};

struct tnd_pull_job {
	struct tnd_pull_job *next;
	enum job_kind kind;
	struct tnd_client *client; /* NULL for J_RECEIVED */
	tn_arena *dst;             /* where the bytes go: the loop's attachment, or this thread's */
	uint32_t seq;
	struct tnd_arena *ar;
	struct tnd_pull req;
	uint64_t id, t0;
	struct conn *conn;      /* the peer's connection while it runs */
	bool asked;             /* PULL sent, waiting for PULL_INFO; PUSH sent, for PUSH_DONE */
	uint64_t lease;         /* the holder's, once PULL_INFO came (a push: ours); 0 none */
	struct f_pull_info info;
	tn_storage *storage;    /* the destination, in the local arena */
	struct tnd_ucx_mem *mem;
	struct tnd_ucx_op *op;
	struct tnd_read *rd;    /* a direct read instead of op */
	struct part *parts;     /* a batch: its tensors (the loop frees the array) */
	size_t nparts;
	bool by_send;           /* the bytes come by active messages (PULL_SEND), keyed: */
	uint64_t key;
	int status;
	char message[TND_MESSAGE_SIZE];
	struct tnd_pull_reply reply;
};

/* What a transfer abandoned at its deadline leaves until UCX is done with it: the get still
 * writing into its block (a pull: the holder's lease is released after it), or the lease of a
 * push whose peer still reads (until its PUSH_DONE). The endpoint is not closed for it: with
 * UCP_ERR_HANDLING_MODE_NONE, UCX would still deliver the replies a live holder sends to a get
 * it cancelled, into the request and the buffer it forgot. */
struct drain {
	struct drain *next;
	struct conn *conn;
	uint64_t id, lease;
	tn_storage *storage;
	struct tnd_ucx_mem *mem;
	struct tnd_ucx_op *op;
	struct tnd_read *rd;
	struct part *parts; /* a batch's */
	size_t nparts;
};

enum epoll_kind { K_WAKE = 1, K_LISTEN, K_CONN, K_UCX, K_READ };

/* What an epoll event's data points at: these three kinds start with their kind. */
struct ev_tag {
	enum epoll_kind kind;
};

enum conn_step { S_CONNECTING, S_HELLO, S_PROOF, S_ADDR, S_READY };

struct conn {
	enum epoll_kind kind; /* K_CONN */
	struct conn *next;
	int fd;
	bool dialer;
	int target; /* dialed: its index in P.targets; -1 accepted */
	enum conn_step step;
	char address[TND_PEER_ADDR_SIZE]; /* dialed: the target's; accepted: the socket's, then
					     the announced listen address */
	unsigned char nonce[TND_PEER_NONCE], their_nonce[TND_PEER_NONCE];
	bool sent_proof, got_proof, sent_addr;
	unsigned char *in;
	size_t in_len, in_cap;
	unsigned char *out;
	size_t out_off, out_len, out_cap;
	bool want_out;
	uint32_t seq;
	uint64_t started_ns, last_in_ns, last_out_ns, since;
	uint64_t rtt_us;
	struct tnd_ucx_ep *ep;
	char lanes[TND_PEER_LANES_SIZE];
	struct lease *leases;
	unsigned nleases;
	/* Direct reads (peer_read.h): the token the peer reads in this memory; the peer's pid
	 * and pidfd when this daemon reads the peer's blocks itself (-1: by UCX's get); whether
	 * the peer reads this daemon's (then its leases register nothing with UCX). */
	unsigned char token[TND_SHA256_SIZE];
	pid_t pid;
	int pidfd;
	bool peer_reads;
	bool peer_errors; /* UCX's peer failure handling on the endpoint (peer_ucx.h) */
	bool by_send;     /* this side's pulls ask for active messages (PULL_SEND) */
};

/* A dialed address: its connection, or when to dial it again. */
struct target {
	char address[TND_PEER_ADDR_SIZE];
	struct conn *conn;
	uint64_t retry_ns, backoff_ns;
	uint64_t failures, since;
	char error[TND_MESSAGE_SIZE];
};

static struct {
	bool on;
	pthread_t thread;
	int epfd, wake_fd, listen_fd, read_fd; /* read_fd: the direct reads' completions */
	struct ev_tag wake_tag, listen_tag, ucx_tag, read_tag;
	const struct tnd_ucx_ops *ucx;
	struct tnd_ucx *u;
	struct tnd_peer_secret secret;
	struct conn *conns;
	unsigned pending; /* accepted, not yet authenticated */
	_Atomic bool stop;
	_Atomic uint64_t protocol_errors, refused, dropped;
	_Atomic uint64_t pulls_done, pull_failures, pulled_bytes; /* answered by the loop */
	_Atomic uint64_t pushes_done, push_failures, pushed_bytes, received, received_bytes;
	/* Under lock: the dialed addresses (P.ntargets only grows; the loop thread appends),
	 * their records, and the snapshot of every peer for PEER_LIST. */
	pthread_mutex_t lock;
	struct target targets[TND_MAX_PEERS];
	unsigned ntargets;
	struct tnd_peer_info *snap;
	size_t nsnap;
	uint64_t accepted_failures;
	/* Pulls: from the loop (under lock), running (this thread's), done (under lock, for the
	 * loop); started and not yet answered by the loop. */
	struct tnd_pull_job *incoming, *running, *done;
	struct drain *drains;
	_Atomic unsigned pulls;
	uint64_t next_id;   /* this thread's: leases */
	uint64_t next_pull; /* under lock: pulls */
	/* This thread's attachments of the exported arenas it serves. */
	struct served {
		char name[TND_NAME_SIZE];
		tn_arena *a;
		dev_t dev;
		ino_t ino;
	} served[TND_MAX_PEERS], imported[TND_MAX_PEERS];
	char boot_id[40];
	uint64_t pidns;
	uint64_t key_seed, next_key; /* active messages' keys */
	unsigned lingering;          /* released leases whose active messages still send */
	unsigned sending;            /* leases whose blocks were sent (SEND), not yet freed */
	uint64_t ucx_busy_ns;        /* when UCX's progress last did something */
} P = { .epfd = -1, .wake_fd = -1, .listen_fd = -1, .read_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

/* Write to an eventfd (the peers' thread's, or the loop's). */
static void wake(int fd)
{
	uint64_t one = 1;
	ssize_t n = write(fd, &one, sizeof(one));
	(void)n;
}

/* Take a list another thread fills under P.lock. */
static struct tnd_pull_job *take_list(struct tnd_pull_job **list)
{
	pthread_mutex_lock(&P.lock);
	struct tnd_pull_job *l = *list;
	*list = NULL;
	pthread_mutex_unlock(&P.lock);
	return l;
}

/* ---- the snapshot ----------------------------------------------------------------------------- */

static unsigned conn_state(const struct conn *c)
{
	if (!c)
		return TN_TENSORD_PEER_DOWN;
	if (c->step == S_CONNECTING)
		return TN_TENSORD_PEER_CONNECTING;
	return c->step == S_READY ? TN_TENSORD_PEER_READY : TN_TENSORD_PEER_AUTHENTICATING;
}

static void fill_info(struct tnd_peer_info *w, const struct conn *c)
{
	if (!c)
		return;
	w->state = conn_state(c);
	w->since = c->since;
	w->rtt_us = c->rtt_us;
	snprintf(w->lanes, sizeof(w->lanes), "%s", c->lanes);
}

/* Rebuild the snapshot (after any change of state). */
static void publish_snapshot(void)
{
	size_t n = 0;
	pthread_mutex_lock(&P.lock);
	for (struct conn *c = P.conns; c; c = c->next)
		n += !c->dialer;
	n += P.ntargets;
	struct tnd_peer_info *s = n ? calloc(n, sizeof(*s)) : NULL;
	if (n && !s) {
		pthread_mutex_unlock(&P.lock);
		return; /* the old snapshot stays */
	}
	size_t k = 0;
	for (unsigned i = 0; i < P.ntargets; i++, k++) {
		struct target *t = &P.targets[i];
		snprintf(s[k].address, sizeof(s[k].address), "%s", t->address);
		snprintf(s[k].error, sizeof(s[k].error), "%s", t->error);
		s[k].flags = TN_TENSORD_PEER_DIALED;
		s[k].failures = t->failures;
		s[k].since = t->since;
		fill_info(&s[k], t->conn);
	}
	for (struct conn *c = P.conns; c; c = c->next) {
		if (c->dialer)
			continue;
		snprintf(s[k].address, sizeof(s[k].address), "%s", c->address);
		s[k].flags = TN_TENSORD_PEER_ACCEPTED;
		fill_info(&s[k], c);
		k++;
	}
	free(P.snap);
	P.snap = s;
	P.nsnap = k;
	pthread_mutex_unlock(&P.lock);
}


static bool protocol_error(struct conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- pulls ------------------------------------------------------------------------------------ */

/* A get's state, by UCX (@op) or a direct read (@rd), either NULL: 1 running, 0 done (or none),
 * -1 failed with the reason in @err. */
static int get_test(struct tnd_ucx_op *op, struct tnd_read *rd, char *err, size_t nerr)
{
	return op ? P.ucx->op_test(op, err, nerr) : rd ? tnd_read_test(rd, err, nerr) : 0;
}

/* Let a get go, with its registration: a direct read is stopped (and waited for). */
static void get_free(struct tnd_ucx_op **op, struct tnd_ucx_mem **mem, struct tnd_read **rd)
{
	if (*op)
		P.ucx->op_free(*op);
	if (*mem)
		P.ucx->mem_unmap(*mem);
	tnd_read_free(*rd);
	*op = NULL;
	*mem = NULL;
	*rd = NULL;
}

/* Let @n parts' gets, registrations and blocks go (the array stays). */
static void parts_release(struct part *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++) {
		get_free(&p[i].op, &p[i].mem, &p[i].rd);
		tn_storage_unref(p[i].storage);
		p[i].storage = NULL;
	}
}

/* -1: a part's get failed (the reason in @err), 1: some still run, 0: all done. */
static int parts_test(struct part *p, size_t n, char *err, size_t nerr)
{
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		int t = get_test(p[i].op, p[i].rd, err, nerr);
		if (t < 0)
			return -1;
		any |= t > 0;
	}
	return any;
}

static void lease_free(struct lease *l)
{
	P.sending -= l->sent;
	for (size_t i = 0; l->held && i < l->n; i++) {
		if (l->held[i].op)
			P.ucx->op_free(l->held[i].op);
		if (l->held[i].mem)
			P.ucx->mem_unmap(l->held[i].mem);
		tn_tensor_unref(l->held[i].tensor);
	}
	if (l->held != &l->one)
		free(l->held);
	free(l);
}

static bool send_frame(struct conn *c, enum frame_type type, uint32_t seq, const void *body,
		       size_t len);
static void conn_close(struct conn *c, const char *why);

/* Let lease @id of @c go (once its active messages ended: until then it lingers, released);
 * false when @c holds none such. */
static bool lease_drop(struct conn *c, uint64_t id)
{
	for (struct lease **pp = &c->leases; *pp; pp = &(*pp)->next) {
		struct lease *l = *pp;
		if (l->id != id || l->released)
			continue;
		if (l->sent && !l->sends_ended) { /* check_lingering frees it once they end */
			l->released = true;
			P.lingering++;
			return true;
		}
		*pp = l->next;
		c->nleases--;
		lease_free(l);
		return true;
	}
	return false;
}

/* Advance the active messages of the leases whose blocks are being sent (a few chunks at a
 * time, peer_ucx.h); a send that failed closes its connection. */
static void check_sends(void)
{
again:
	for (struct conn *c = P.conns; c && P.sending; c = c->next)
		for (struct lease *l = c->leases; l; l = l->next) {
			if (!l->sent || l->sends_ended)
				continue;
			char err[256];
			bool busy = false;
			for (size_t i = 0; i < l->n; i++) {
				int t = l->held[i].op ? P.ucx->op_test(l->held[i].op, err,
								       sizeof(err))
						      : 0;
				if (t < 0) {
					conn_close(c, err);
					goto again;
				}
				busy |= t > 0;
			}
			l->sends_ended = !busy;
		}
}

/* Free the released leases whose active messages ended. */
static void check_lingering(void)
{
	for (struct conn *c = P.conns; c && P.lingering; c = c->next)
		for (struct lease **pp = &c->leases; *pp;) {
			struct lease *l = *pp;
			if (!l->released || !l->sends_ended) {
				pp = &l->next;
				continue;
			}
			*pp = l->next;
			c->nleases--;
			P.lingering--;
			lease_free(l);
		}
}

/* End @j (taken off the running list) with @status and a message, for the loop to answer. */
static void finish(struct tnd_pull_job *j, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void finish(struct tnd_pull_job *j, int status, const char *fmt, ...)
{
	for (struct tnd_pull_job **pp = &P.running; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	get_free(&j->op, &j->mem, &j->rd);
	tn_storage_unref(j->storage);
	j->storage = NULL;
	parts_release(j->parts, j->nparts);
	j->status = status;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(j->message, sizeof(j->message), fmt, ap);
		va_end(ap);
	}
	/* The holder lets the block go (a connection that was lost released it there): the peer
	 * for a pull, this daemon for its push; a push received is answered. */
	struct conn *c = j->conn;
	j->conn = NULL;
	if (c && j->kind == J_PULL && j->lease) {
		struct f_release r = { .lease = j->lease };
		send_frame(c, F_RELEASE, 0, &r, sizeof(r));
	} else if (c && j->kind == J_PUSH && j->lease) {
		lease_drop(c, j->lease);
	} else if (c && j->kind == J_RECEIVED) {
		struct f_push_done d = { .id = j->id, .status = status, .bytes = j->reply.bytes };
		snprintf(d.message, sizeof(d.message), "%s", status ? j->message : "");
		send_frame(c, F_PUSH_DONE, 0, &d, sizeof(d));
	}
	j->reply.elapsed_ns = tnd_now_ns() - j->t0;
	pthread_mutex_lock(&P.lock);
	j->next = P.done;
	P.done = j;
	pthread_mutex_unlock(&P.lock);
	wake(tnd_d.event_fd);
}

/* The connection to @peer that is ready: one dialed to that address, else one accepted from a
 * daemon that announced it. */
static struct conn *ready_conn(const char *peer)
{
	struct conn *accepted = NULL;
	for (struct conn *c = P.conns; c; c = c->next) {
		if (c->step != S_READY || strcmp(c->address, peer))
			continue;
		if (c->dialer)
			return c;
		accepted = c;
	}
	return accepted;
}

static void start_pull(struct tnd_pull_job *j)
{
	j->next = P.running;
	P.running = j;
	/* A name taken here fails before any byte moves (publishing checks it again); a batch's
	 * names are checked once known. */
	tn_arena_entry e;
	bool batch = j->req.flags & TND_PULL_PREFIX;
	if (!batch && !tn_arena_info(j->dst, j->req.name, &e)) {
		finish(j, TN_EEXIST, "\"%.200s\" is published in arena \"%s\" already",
		       j->req.name, j->req.arena);
		return;
	}
	struct conn *c = ready_conn(j->req.peer);
	if (!c) {
		finish(j, TN_ENOTCONN, "peer %.200s is not connected (tensorctl peer list)",
		       j->req.peer);
		return;
	}
	struct f_pull f;
	memset(&f, 0, sizeof(f));
	f.id = j->id;
	memcpy(f.arena, j->req.remote_arena, sizeof(f.arena));
	memcpy(f.name, j->req.remote_name, sizeof(f.name));
	f.flags = (batch ? PULL_PREFIX : 0) | (c->by_send ? PULL_SEND : 0);
	j->by_send = c->by_send;
	j->conn = c;
	j->asked = true;
	snprintf(j->reply.lanes, sizeof(j->reply.lanes), "%s", c->lanes);
	send_frame(c, F_PULL, 0, &f, sizeof(f)); /* a failure closes c, which finishes j */
}

/* This thread's attachment of arena @name, exported to peers (@import false) or open to their
 * pushes (true), or NULL with a code and a message. */
static tn_arena *own_arena(const char *name, bool import, int *code, char *msg, size_t nmsg)
{
	unsigned i, n = import ? tnd_d.cfg.nimports : tnd_d.cfg.nexports;
	char(*list)[TND_NAME_SIZE] = import ? tnd_d.cfg.imports : tnd_d.cfg.exports;
	for (i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			break;
	if (i == n) {
		*code = TN_EACCES;
		snprintf(msg, nmsg, import ? "arena \"%s\" is not open to peers' pushes (peer_import)"
				      : "arena \"%s\" is not exported to peers (peer_export)", name);
		return NULL;
	}
	struct served *sv = import ? &P.imported[i] : &P.served[i];
	char file[TND_NAME_SIZE + 8];
	snprintf(file, sizeof(file), "%s.arena", name);
	const char *dirs[2] = { tnd_d.cfg.arena_dir, tnd_d.hugedir };
	for (int k = 0; k < 2; k++) {
		if (!dirs[k][0])
			continue;
		char path[PATH_MAX + 80];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dirs[k], file);
		if (stat(path, &st))
			continue;
		if (sv->a && sv->dev == st.st_dev && sv->ino == st.st_ino)
			return sv->a;
		/* Destroyed and created again since: attach to the new one. */
		sv->a = tn_arena_unref(sv->a);
		int r = tn_arena_open(file, dirs[k], &sv->a);
		if (r) {
			*code = r;
			snprintf(msg, nmsg, "arena \"%s\": %s", name, tn_last_error());
			return NULL;
		}
		snprintf(sv->name, sizeof(sv->name), "%s", name);
		sv->dev = st.st_dev;
		sv->ino = st.st_ino;
		return sv->a;
	}
	*code = TN_ENOENT;
	snprintf(msg, nmsg, "no arena \"%s\"", name);
	return NULL;
}

/* The bytes a view reaches from its first element: 0 for an empty one, -1 past 2^62. */
static int64_t view_span(int ndim, const int64_t *sizes, const int64_t *strides, size_t isz)
{
	int64_t last = 0;
	for (int d = 0; d < ndim; d++) {
		if (sizes[d] < 0 || strides[d] < 0)
			return -1;
		if (!sizes[d])
			return 0;
		if (sizes[d] > 1 &&
		    (strides[d] > ((int64_t)1 << 62) / (sizes[d] - 1) ||
		     last > ((int64_t)1 << 62) - (sizes[d] - 1) * strides[d]))
			return -1;
		last += (sizes[d] - 1) * strides[d];
	}
	if (last >= ((int64_t)1 << 62) / (int64_t)isz - 1)
		return -1;
	return (last + 1) * (int64_t)isz;
}

/* Hold sealed @name of arena @a (@arena_name) for a get by @c's peer: its tensor and
 * registration in @h (none when the peer reads this daemon's memory itself, or asks for
 * active messages: @send), described in @in (its rkey in @rkey_out, rkey_len bytes at most
 * @rcap). Returns 0, or a TN_E* code with the message in @in. */
static int hold_one(const struct conn *c, tn_arena *a, const char *arena_name, const char *name,
		    bool send, struct held *h, struct f_pull_info *in, unsigned char *rkey_out,
		    size_t rcap)
{
	int code = 0;
	tn_tensor *t = NULL;
	tn_arena_entry e;
	tn_arena_handle hd;
	memset(h, 0, sizeof(*h));
	if ((code = tn_arena_lookup(a, name, &t, &hd))) {
		snprintf(in->message, sizeof(in->message), "%s", tn_last_error());
		goto refuse;
	}
	/* The entry's flags, for the same publication the lookup found. */
	if ((code = tn_arena_info(a, name, &e))) {
		snprintf(in->message, sizeof(in->message), "%s", tn_last_error());
		goto refuse;
	}
	if (e.handle.index != hd.index || e.handle.generation != hd.generation ||
	    !(e.flags & TN_ARENA_ENTRY_SEALED)) {
		code = TN_EINVAL;
		snprintf(in->message, sizeof(in->message), "\"%.120s\" in arena \"%s\" is not "
			 "sealed (only sealed tensors go to peers)", name, arena_name);
		goto refuse;
	}
	int ndim = tn_tensor_ndim(t);
	size_t isz = tn_dtype_size(tn_tensor_dtype(t));
	int64_t span = view_span(ndim, tn_tensor_sizes(t), tn_tensor_strides(t), isz);
	if (span < 0) {
		code = TN_ENOTSUP;
		snprintf(in->message, sizeof(in->message), "\"%.200s\": a view with negative "
			 "strides", name);
		goto refuse;
	}
	h->tensor = t;
	h->nbytes = (uint64_t)span;
	t = NULL;
	char err[256];
	if (span && !c->peer_reads && !send &&
	    P.ucx->mem_map(P.u, tn_tensor_data(h->tensor), (size_t)span, &h->mem, err,
			   sizeof(err))) {
		code = TN_EIO;
		snprintf(in->message, sizeof(in->message), "%s", err);
		goto refuse;
	}
	in->dtype = (uint32_t)tn_tensor_dtype(h->tensor);
	in->ndim = (uint32_t)ndim;
	memcpy(in->sizes, tn_tensor_sizes(h->tensor), (size_t)ndim * sizeof(int64_t));
	memcpy(in->strides, tn_tensor_strides(h->tensor), (size_t)ndim * sizeof(int64_t));
	in->nbytes = (uint64_t)span;
	in->raddr = (uint64_t)(uintptr_t)tn_tensor_data(h->tensor);
	size_t rlen = 0;
	if (h->mem) {
		const void *rkey;
		P.ucx->mem_rkey(h->mem, &rkey, &rlen);
		if (rlen > rcap) {
			code = TN_ENOTSUP;
			snprintf(in->message, sizeof(in->message), "a remote key of %zu bytes", rlen);
			goto refuse;
		}
		memcpy(rkey_out, rkey, rlen);
	}
	in->rkey_len = (uint32_t)rlen;
	return 0;
refuse:
	if (h->mem)
		P.ucx->mem_unmap(h->mem);
	tn_tensor_unref(h->tensor);
	tn_tensor_unref(t);
	memset(h, 0, sizeof(*h));
	return code;
}

/* A new lease on @c, of @n tensors (@held: NULL for one, in the lease itself, else an array
 * the lease takes); NULL with the reason in @msg. */
static struct lease *lease_new(struct conn *c, size_t n, struct held *held, char *msg,
			       size_t nmsg)
{
	if (c->nleases >= 65536) {
		snprintf(msg, nmsg, "65536 transfers of this peer at once");
		return NULL;
	}
	struct lease *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(msg, nmsg, "out of memory");
		return NULL;
	}
	l->n = n;
	l->held = held ? held : &l->one;
	l->id = ++P.next_id;
	l->next = c->leases;
	c->leases = l;
	c->nleases++;
	return l;
}

/* Hold sealed @name of arena @a for a get by @c's peer: a lease on @c, described in @in (see
 * hold_one). Returns 0, or a TN_E* code with the message in @in. */
static int make_lease(struct conn *c, tn_arena *a, const char *arena_name, const char *name,
		      bool send, struct f_pull_info *in, unsigned char *rkey_out, size_t rcap)
{
	struct held h;
	int code = hold_one(c, a, arena_name, name, send, &h, in, rkey_out, rcap);
	if (code)
		return code;
	struct lease *l = lease_new(c, 1, NULL, in->message, sizeof(in->message));
	if (!l) {
		if (h.mem)
			P.ucx->mem_unmap(h.mem);
		tn_tensor_unref(h.tensor);
		return TN_EBUSY;
	}
	l->one = h;
	in->lease = l->id;
	return 0;
}

/* A peer asks for every sealed tensor under a prefix: hold them all (one lease) and tell
 * where each is, in one frame. */
static bool serve_batch(struct conn *c, const struct f_pull *f)
{
	struct f_batch_info bi;
	memset(&bi, 0, sizeof(bi));
	bi.id = f->id;
	int code = 0;
	tn_arena_entry *es = NULL;
	size_t n = 0, used = sizeof(bi), count = 0;
	struct held *held = NULL;
	unsigned char *out = NULL;
	tn_arena *a = own_arena(f->arena, false, &code, bi.message, sizeof(bi.message));
	if (!a)
		goto refuse;
	if ((code = tn_arena_list(a, f->name, &es, &n))) {
		snprintf(bi.message, sizeof(bi.message), "%s", tn_last_error());
		goto refuse;
	}
	held = calloc(n ? n : 1, sizeof(*held));
	out = malloc(FRAME_MAX);
	if (!held || !out) {
		code = TN_ENOMEM;
		snprintf(bi.message, sizeof(bi.message), "out of memory");
		goto refuse;
	}
	for (size_t i = 0; i < n; i++) {
		/* Sealed and here (a spilled tensor's bytes are on disk). */
		if ((es[i].flags & (TN_ARENA_ENTRY_SEALED | TN_ARENA_ENTRY_SPILLED)) !=
		    TN_ARENA_ENTRY_SEALED)
			continue;
		struct f_pull_info in;
		unsigned char rkey[4096];
		memset(&in, 0, sizeof(in));
		int r = hold_one(c, a, f->arena, es[i].name, f->flags & PULL_SEND, &held[count], &in,
				 rkey, sizeof(rkey));
		if (r == TN_ENOENT || r == TN_EINVAL)
			continue; /* unpublished, or replaced unsealed, since the list */
		if (r) {
			code = r;
			snprintf(bi.message, sizeof(bi.message), "%s", in.message);
			goto refuse;
		}
		size_t nl = strlen(es[i].name);
		size_t need = sizeof(struct f_batch_entry) + nl + 2 * in.ndim * sizeof(int64_t) +
			      in.rkey_len;
		count++;
		if (count > BATCH_MAX || used + need > FRAME_MAX) {
			code = TN_ENOSPC;
			snprintf(bi.message, sizeof(bi.message), "more tensors under \"%.120s\" than "
				 "one batch takes (%d, or 1 MiB of descriptions): pull a narrower "
				 "prefix", f->name, BATCH_MAX);
			goto refuse;
		}
		struct f_batch_entry be = { .nbytes = in.nbytes, .raddr = in.raddr,
					    .rkey_len = in.rkey_len, .name_len = (uint16_t)nl,
					    .dtype = (uint8_t)in.dtype, .ndim = (uint8_t)in.ndim };
		unsigned char *p = out + used;
		memcpy(p, &be, sizeof(be));
		p += sizeof(be);
		memcpy(p, es[i].name, nl);
		p += nl;
		memcpy(p, in.sizes, in.ndim * sizeof(int64_t));
		p += in.ndim * sizeof(int64_t);
		memcpy(p, in.strides, in.ndim * sizeof(int64_t));
		p += in.ndim * sizeof(int64_t);
		memcpy(p, rkey, in.rkey_len);
		used += need;
	}
	if (!count) {
		code = TN_ENOENT;
		snprintf(bi.message, sizeof(bi.message), "no sealed tensor under \"%.120s\" in arena "
			 "\"%s\"", f->name, f->arena);
		goto refuse;
	}
	struct lease *l = lease_new(c, count, held, bi.message, sizeof(bi.message));
	if (!l) {
		code = TN_EBUSY;
		goto refuse;
	}
	held = NULL;
	bi.count = (uint32_t)count;
	bi.lease = l->id;
	memcpy(out, &bi, sizeof(bi));
	bool ok = send_frame(c, F_BATCH_INFO, 0, out, used);
	free(out);
	free(es);
	return ok;
refuse:
	for (size_t i = 0; held && i < count; i++) {
		if (held[i].mem)
			P.ucx->mem_unmap(held[i].mem);
		tn_tensor_unref(held[i].tensor);
	}
	free(held);
	free(out);
	free(es);
	bi.status = code;
	bi.count = 0;
	return send_frame(c, F_BATCH_INFO, 0, &bi, sizeof(bi));
}

/* A peer asks for a sealed tensor: hold it and tell where it is. */
static bool serve_pull(struct conn *c, const struct f_pull *f)
{
	struct {
		struct f_pull_info info;
		unsigned char rkey[4096];
	} out;
	memset(&out.info, 0, sizeof(out.info));
	struct f_pull_info *in = &out.info;
	in->id = f->id;
	int code = 0;
	if (!memchr(f->arena, 0, sizeof(f->arena)) || !memchr(f->name, 0, sizeof(f->name)))
		return protocol_error(c, "PULL with an unterminated name");
	if (f->flags & ~(PULL_PREFIX | PULL_SEND) || f->pad)
		return protocol_error(c, "PULL with unknown flags 0x%x", f->flags);
	if (f->flags & PULL_PREFIX)
		return serve_batch(c, f);
	tn_arena *a = own_arena(f->arena, false, &code, in->message, sizeof(in->message));
	if (a)
		code = make_lease(c, a, f->arena, f->name, f->flags & PULL_SEND, in, out.rkey,
				  sizeof(out.rkey));
	if (!code)
		return send_frame(c, F_PULL_INFO, 0, &out, sizeof(out.info) + in->rkey_len);
	in->status = code;
	return send_frame(c, F_PULL_INFO, 0, in, sizeof(*in));
}

static bool on_release(struct conn *c, const struct f_release *r)
{
	if (lease_drop(c, r->lease))
		return true;
	return protocol_error(c, "RELEASE of lease %" PRIu64 ", which it does not hold", r->lease);
}

/* The peer asks for a lease's bytes by active messages (it registered their receives). */
static bool on_send(struct conn *c, const struct f_send *f)
{
	struct lease *l = c->leases;
	while (l && (l->id != f->lease || l->released))
		l = l->next;
	if (!l)
		return protocol_error(c, "SEND of lease %" PRIu64 ", which it does not hold",
				      f->lease);
	if (l->sent)
		return protocol_error(c, "SEND of lease %" PRIu64 " again", f->lease);
	l->sent = true;
	P.sending++;
	for (size_t i = 0; i < l->n; i++) {
		struct held *h = &l->held[i];
		char err[256];
		if (h->nbytes && (P.ucx->send_start(c->ep, f->key, (uint32_t)i,
						    tn_tensor_data(h->tensor), (size_t)h->nbytes,
						    &h->op, err, sizeof(err)) ||
				  P.ucx->op_test(h->op, err, sizeof(err)) < 0)) {
			conn_close(c, err);
			return false;
		}
	}
	return true;
}

/* A new key for a transfer's active messages: unguessable by another peer. */
static uint64_t new_key(void)
{
	uint64_t z = P.key_seed + ++P.next_key * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Ask @c's peer for lease @lease's bytes under @key; false when @c was closed. */
static bool ask_send(struct conn *c, uint64_t lease, uint64_t key)
{
	struct f_send f = { .lease = lease, .key = key };
	return send_frame(c, F_SEND, 0, &f, sizeof(f));
}

static bool start_get(struct conn *c, struct tnd_pull_job *j, const struct f_pull_info *inp,
		      const unsigned char *rkey, size_t rlen, const char *what);

/* The pull @id of @c that a PULL_INFO, or a BATCH_INFO (@batch), answers with @status, @lease
 * and @message: the job, to start its gets; NULL when it was dealt with here (*ok: false when
 * @c was closed). */
static struct tnd_pull_job *answered(struct conn *c, uint64_t id, bool batch, int32_t status,
				     uint64_t lease, char *message, size_t nmsg, bool *ok)
{
	*ok = true;
	struct tnd_pull_job *j = P.running;
	while (j && !(j->kind == J_PULL && j->conn == c && j->id == id && j->asked &&
		      !(j->req.flags & TND_PULL_PREFIX) == !batch))
		j = j->next;
	if (!j) {
		/* Ended meanwhile (tensord is stopping, a deadline): let the blocks go again. */
		if (!status && lease) {
			struct f_release r = { .lease = lease };
			*ok = send_frame(c, F_RELEASE, 0, &r, sizeof(r));
		}
		return NULL;
	}
	j->asked = false;
	if (status) {
		message[nmsg - 1] = 0;
		if (status >= 0 || status < -1000)
			status = TN_EIO;
		finish(j, status, "peer %.200s: %s", j->req.peer, message);
		return NULL;
	}
	return j;
}

/* The holder's answer: start the get into a new block of the local arena. */
static bool on_pull_info(struct conn *c, const unsigned char *body, uint32_t len)
{
	struct f_pull_info in;
	memcpy(&in, body, sizeof(in));
	bool ok;
	struct tnd_pull_job *j = answered(c, in.id, false, in.status, in.lease, in.message,
					  sizeof(in.message), &ok);
	return j ? start_get(c, j, &in, body + sizeof(in), len - sizeof(in), "PULL_INFO") : ok;
}

/* How @j's bytes move over @c. */
static uint32_t method_of(const struct conn *c, const struct tnd_pull_job *j)
{
	return c->pidfd >= 0 ? TN_TENSORD_PULL_DIRECT_READ
	       : j->by_send  ? TN_TENSORD_PULL_ACTIVE_MESSAGE
			     : TN_TENSORD_PULL_RMA_GET;
}

/* Start getting @len bytes at @raddr of @c's peer into @dst, the @index-th block of @j: a
 * direct read when this daemon reads the peer's memory itself, the receive of an active
 * message when @j asked for them, else a UCX get (registering @dst, the remote key @rkey).
 * Returns 0, or -1 with a message. */
static int get_begin(struct conn *c, const struct tnd_pull_job *j, uint32_t index, void *dst,
		     uint64_t raddr, const void *rkey, size_t rlen, size_t len,
		     struct tnd_ucx_mem **mem, struct tnd_ucx_op **op, struct tnd_read **rd,
		     char *err, size_t nerr)
{
	if (c->pidfd >= 0)
		return tnd_read_start(c->pid, c->pidfd, dst, raddr, len, P.read_fd, rd, err, nerr);
	if (j->by_send)
		return P.ucx->recv_start(P.u, j->key, index, dst, len, op, err, nerr);
	if (P.ucx->mem_map(P.u, dst, len, mem, err, nerr))
		return -1;
	return P.ucx->get_start(c->ep, dst, *mem, raddr, rkey, rlen, len, op, err, nerr);
}

/* Start the get @in describes (the remote key @rkey, of @rlen bytes) into a new block of @j's
 * arena; false when @c was closed (@what: the frame, for the message). */
static bool start_get(struct conn *c, struct tnd_pull_job *j, const struct f_pull_info *inp,
		      const unsigned char *rkey, size_t rlen, const char *what)
{
	struct f_pull_info in = *inp;
	if (j->kind == J_PULL)
		j->lease = in.lease;
	int64_t span = in.dtype < TN_NUM_DTYPES && in.ndim <= TN_ARENA_MAX_DIMS
			       ? view_span((int)in.ndim, in.sizes, in.strides,
					   tn_dtype_size((enum tn_dtype)in.dtype))
			       : -1;
	/* A push without a remote key asks for a SEND (the pusher's choice, as PULL_SEND is
	 * the puller's). */
	if (j->kind == J_RECEIVED)
		j->by_send = c->pidfd < 0 && !in.rkey_len;
	if (span < 0 || (uint64_t)span != in.nbytes || in.rkey_len != rlen ||
	    (span && !in.rkey_len && c->pidfd < 0 && !j->by_send)) {
		if (j->kind == J_RECEIVED)
			finish(j, TN_EPROTO, "%s describes no valid view", what);
		return protocol_error(c, "%s describes no valid view", what);
	}
	j->info = in;
	int r = tn_storage_new_with_allocator(TN_CPU, span ? (size_t)span : 1,
					      tn_arena_allocator(j->dst), &j->storage);
	if (r) {
		finish(j, r, "arena \"%s\": %s", j->req.arena, tn_last_error());
		return true;
	}
	if (!span) {
		j->op = NULL;
		return true; /* nothing to move: the check of running pulls publishes it */
	}
	char err[256];
	if (j->by_send)
		j->key = new_key();
	if (get_begin(c, j, 0, tn_storage_data(j->storage), in.raddr, rkey, in.rkey_len,
		      (size_t)span, &j->mem, &j->op, &j->rd, err, sizeof(err))) {
		finish(j, TN_EIO, "peer %.200s: %s", j->req.peer, err);
		return true;
	}
	j->reply.bytes = (uint64_t)span;
	j->reply.method = method_of(c, j);
	return j->by_send && j->op ? ask_send(c, in.lease, j->key) : true;
}

/* @j's get failed (@err): its endpoint is of no more use, so its connection goes (it is
 * dialed again), which ends @j and the other transfers over it with TN_ENOTCONN ("lost
 * during the transfer: @err"), as the loss of the control connection would. Returns whether
 * a connection was closed (the list of running transfers changed). */
static bool get_failed(struct tnd_pull_job *j, const char *err)
{
	if (!j->conn) {
		finish(j, TN_EIO, "peer %.200s: %s", j->req.peer, err);
		return false;
	}
	conn_close(j->conn, err);
	return true;
}

/* A batch whose bytes all arrived: publish every tensor, sealed, or none; returns whether
 * the list of running transfers changed beyond @j. */
static bool check_batch(struct tnd_pull_job *j)
{
	char err[256];
	int t = parts_test(j->parts, j->nparts, err, sizeof(err));
	if (t > 0)
		return false;
	if (t < 0)
		return get_failed(j, err);
	for (size_t i = 0; i < j->nparts; i++) {
		struct part *p = &j->parts[i];
		tn_tensor *v;
		int r = tn_tensor_new(p->storage, 0, (int)p->ndim, p->sizes, p->strides,
				      (enum tn_dtype)p->dtype, &v);
		if (!r) {
			r = tn_arena_publish(j->dst, p->name, v, TN_ARENA_SEAL, NULL);
			tn_tensor_unref(v);
		}
		if (r) {
			snprintf(err, sizeof(err), "%s", tn_last_error());
			for (size_t k = 0; k < i; k++)
				(void)tn_arena_unpublish(j->dst, j->parts[k].name);
			finish(j, r, "arena \"%s\": %s (nothing of the batch was published)",
			       j->req.arena, err);
			return false;
		}
	}
	j->reply.count = (uint32_t)j->nparts;
	finish(j, 0, NULL);
	return false;
}

/* A batch's answer: check every entry, then start a get of each into a new block. */
static bool on_batch_info(struct conn *c, const unsigned char *body, uint32_t len)
{
	struct f_batch_info bi;
	memcpy(&bi, body, sizeof(bi));
	bool ok;
	struct tnd_pull_job *j = answered(c, bi.id, true, bi.status, bi.lease, bi.message,
					  sizeof(bi.message), &ok);
	if (!j)
		return ok;
	j->lease = bi.lease;
	if (!bi.count || bi.count > BATCH_MAX)
		return protocol_error(c, "BATCH_INFO of %u tensors", bi.count);
	j->parts = calloc(bi.count, sizeof(*j->parts));
	if (!j->parts) {
		finish(j, TN_ENOMEM, "out of memory");
		return true;
	}
	j->nparts = bi.count;
	/* Every entry checked before any allocation: a hostile peer could send anything. */
	const unsigned char *p = body + sizeof(bi), *end = body + len, *rkeys[BATCH_MAX];
	size_t plen = strlen(j->req.remote_name), llen = strlen(j->req.name);
	for (uint32_t i = 0; i < bi.count; i++) {
		struct f_batch_entry be;
		struct part *pt = &j->parts[i];
		if ((size_t)(end - p) < sizeof(be))
			return protocol_error(c, "BATCH_INFO cut short");
		memcpy(&be, p, sizeof(be));
		p += sizeof(be);
		size_t rest = (size_t)be.name_len + 2u * be.ndim * sizeof(int64_t) + be.rkey_len;
		if (be.dtype >= TN_NUM_DTYPES || be.ndim > TN_ARENA_MAX_DIMS || !be.name_len ||
		    be.name_len > TN_ARENA_NAME_MAX || (size_t)(end - p) < rest ||
		    be.name_len < plen || memcmp(p, j->req.remote_name, plen) ||
		    memchr(p, 0, be.name_len))
			return protocol_error(c, "BATCH_INFO with a bad entry");
		if (llen + be.name_len - plen > TN_ARENA_NAME_MAX) {
			finish(j, TN_EINVAL, "\"%s%.*s\": a name longer than %d bytes", j->req.name,
			       (int)(be.name_len - plen), (const char *)p + plen, TN_ARENA_NAME_MAX);
			return true;
		}
		memcpy(pt->name, j->req.name, llen);
		memcpy(pt->name + llen, p + plen, be.name_len - plen);
		pt->name[llen + be.name_len - plen] = 0;
		p += be.name_len;
		pt->dtype = be.dtype;
		pt->ndim = be.ndim;
		memcpy(pt->sizes, p, be.ndim * sizeof(int64_t));
		p += be.ndim * sizeof(int64_t);
		memcpy(pt->strides, p, be.ndim * sizeof(int64_t));
		p += be.ndim * sizeof(int64_t);
		int64_t span = view_span((int)be.ndim, pt->sizes, pt->strides,
					 tn_dtype_size((enum tn_dtype)be.dtype));
		if (span < 0 || (uint64_t)span != be.nbytes ||
		    (span && !be.rkey_len && c->pidfd < 0 && !j->by_send))
			return protocol_error(c, "BATCH_INFO describes no valid view");
		pt->nbytes = be.nbytes;
		rkeys[i] = p;
		p += be.rkey_len;
	}
	if (p != end)
		return protocol_error(c, "BATCH_INFO with bytes after its entries");
	for (uint32_t i = 0; i < bi.count; i++) {
		tn_arena_entry e;
		if (!tn_arena_info(j->dst, j->parts[i].name, &e)) {
			finish(j, TN_EEXIST, "\"%.200s\" is published in arena \"%s\" already",
			       j->parts[i].name, j->req.arena);
			return true;
		}
	}
	/* Second pass: the gets (the entries' raddr and rkey read again from the frame). Read
	 * directly, the small blocks go in one vectored copy at the end, not a read each. */
	struct iovec *lv = NULL, *rv = NULL;
	size_t nv = 0;
	if (c->pidfd >= 0 && (!(lv = calloc(bi.count, sizeof(*lv))) ||
			      !(rv = calloc(bi.count, sizeof(*rv))))) {
		free(lv);
		finish(j, TN_ENOMEM, "out of memory");
		return true;
	}
	p = body + sizeof(bi);
	if (j->by_send)
		j->key = new_key();
	bool sending = false;
	for (uint32_t i = 0; i < bi.count; i++) {
		struct f_batch_entry be;
		struct part *pt = &j->parts[i];
		memcpy(&be, p, sizeof(be));
		p += sizeof(be) + be.name_len + 2u * be.ndim * sizeof(int64_t) + be.rkey_len;
		int r = tn_storage_new_with_allocator(TN_CPU, pt->nbytes ? (size_t)pt->nbytes : 1,
						      tn_arena_allocator(j->dst), &pt->storage);
		if (r) {
			free(lv);
			free(rv);
			finish(j, r, "arena \"%s\": %s", j->req.arena, tn_last_error());
			return true;
		}
		if (!pt->nbytes)
			continue;
		j->reply.bytes += pt->nbytes;
		if (lv && pt->nbytes <= BATCH_VECTOR_MAX) {
			lv[nv] = (struct iovec){ tn_storage_data(pt->storage), (size_t)pt->nbytes };
			rv[nv++] = (struct iovec){ (void *)(uintptr_t)be.raddr, (size_t)pt->nbytes };
			continue;
		}
		char err[256];
		if (get_begin(c, j, i, tn_storage_data(pt->storage), be.raddr, rkeys[i],
			      be.rkey_len, (size_t)pt->nbytes, &pt->mem, &pt->op, &pt->rd, err,
			      sizeof(err))) {
			free(lv);
			free(rv);
			finish(j, TN_EIO, "peer %.200s: %s", j->req.peer, err);
			return true;
		}
		sending |= pt->op && j->by_send;
	}
	j->reply.method = method_of(c, j);
	char err[256];
	int r = nv ? tnd_read_now(c->pid, c->pidfd, lv, rv, nv, err, sizeof(err)) : 0;
	free(lv);
	free(rv);
	if (r)
		return !get_failed(j, err);
	return sending ? ask_send(c, j->lease, j->key) : true;
}

/* Pulls whose bytes arrived: publish them, sealed. */
static void check_pulls(void)
{
again:
	for (struct tnd_pull_job *j = P.running, *next; j; j = next) {
		next = j->next;
		if (!j->asked && j->parts) {
			if (check_batch(j))
				goto again;
			continue;
		}
		if (j->asked || !j->storage)
			continue;
		char err[256];
		int t = get_test(j->op, j->rd, err, sizeof(err));
		if (t > 0)
			continue;
		if (t < 0) {
			if (get_failed(j, err))
				goto again;
			continue;
		}
		tn_tensor *v;
		int r = tn_tensor_new(j->storage, 0, (int)j->info.ndim, j->info.sizes,
				      j->info.strides, (enum tn_dtype)j->info.dtype, &v);
		if (!r) {
			r = tn_arena_publish(j->dst, j->req.name, v, TN_ARENA_SEAL, NULL);
			tn_tensor_unref(v);
		}
		if (r)
			finish(j, r, "arena \"%s\": %s", j->req.arena, tn_last_error());
		else
			finish(j, 0, NULL);
	}
}

static void drain_free(struct drain *d)
{
	parts_release(d->parts, d->nparts);
	free(d->parts);
	get_free(&d->op, &d->mem, &d->rd);
	tn_storage_unref(d->storage);
	free(d);
}

/* @j passed peer_transfer_timeout_ms: fail it, and keep what UCX still uses as a drain. */
static void abandon(struct tnd_pull_job *j)
{
	/* Active messages not yet come are not waited for (peer_ucx.h): the holder's UCX sees
	 * them dropped, and only those being received drain. */
	if (j->by_send) {
		P.ucx->op_cancel(j->op);
		for (size_t i = 0; j->parts && i < j->nparts; i++)
			P.ucx->op_cancel(j->parts[i].op);
	}
	if (j->conn && (j->op || j->rd || j->parts || (j->kind == J_PUSH && j->asked && j->lease))) {
		struct drain *d = calloc(1, sizeof(*d));
		if (!d)
			return; /* the next tick tries again */
		d->conn = j->conn;
		d->id = j->id;
		d->lease = j->lease;
		d->storage = j->storage;
		d->mem = j->mem;
		d->op = j->op;
		d->rd = j->rd;
		d->parts = j->parts;
		d->nparts = j->nparts;
		j->parts = NULL;
		j->nparts = 0;
		d->next = P.drains;
		P.drains = d;
		j->conn = NULL;
		j->lease = 0;
		j->storage = NULL;
		j->mem = NULL;
		j->op = NULL;
		j->rd = NULL;
	}
	finish(j, TN_ETIMEDOUT, "peer %.200s: the transfer took longer than "
	       "peer_transfer_timeout_ms (%u ms)", j->req.peer, tnd_d.cfg.peer_transfer_timeout_ms);
}

/* Drains whose get ended: free the block, and let the holder release its lease. */
static void check_drains(void)
{
	struct drain **pp = &P.drains;
	while (*pp) {
		struct drain *d = *pp;
		char err[256];
		if ((!d->op && !d->rd && !d->parts) ||
		    get_test(d->op, d->rd, err, sizeof(err)) > 0 ||
		    (d->parts && parts_test(d->parts, d->nparts, err, sizeof(err)) > 0)) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		struct conn *c = d->conn;
		uint64_t lease = d->lease;
		drain_free(d);
		if (lease) {
			struct f_release r = { .lease = lease };
			if (!send_frame(c, F_RELEASE, 0, &r, sizeof(r)))
				pp = &P.drains; /* c was closed, and its drains with it */
		}
	}
}

/* Push: hold the local sealed tensor (a lease on the peer's connection) and ask the peer to get
 * it; PUSH_DONE ends it. */
static void start_push(struct tnd_pull_job *j)
{
	j->next = P.running;
	P.running = j;
	struct conn *c = ready_conn(j->req.peer);
	if (!c) {
		finish(j, TN_ENOTCONN, "peer %.200s is not connected (tensorctl peer list)",
		       j->req.peer);
		return;
	}
	struct {
		struct f_push push;
		struct f_pull_info info;
		unsigned char rkey[4096];
	} out;
	memset(&out.push, 0, sizeof(out.push) + sizeof(out.info));
	out.push.id = j->id;
	memcpy(out.push.arena, j->req.remote_arena, sizeof(out.push.arena));
	memcpy(out.push.name, j->req.remote_name, sizeof(out.push.name));
	memcpy(out.push.src_arena, j->req.arena, sizeof(out.push.src_arena));
	memcpy(out.push.src_name, j->req.name, sizeof(out.push.src_name));
	int code = make_lease(c, j->dst, j->req.arena, j->req.name, c->by_send, &out.info,
			      out.rkey, sizeof(out.rkey));
	if (code) {
		finish(j, code, "%s", out.info.message);
		return;
	}
	j->conn = c;
	j->asked = true;
	j->lease = out.info.lease;
	j->reply.bytes = out.info.nbytes;
	j->reply.method = c->peer_reads ? TN_TENSORD_PULL_DIRECT_READ
			  : c->by_send  ? TN_TENSORD_PULL_ACTIVE_MESSAGE
					: TN_TENSORD_PULL_RMA_GET;
	snprintf(j->reply.lanes, sizeof(j->reply.lanes), "%s", c->lanes);
	send_frame(c, F_PUSH, 0, &out, sizeof(out.push) + sizeof(out.info) + out.info.rkey_len);
}

/* A peer pushes a sealed tensor: get it into an arena open to pushes (peer_import), as a pull
 * whose PULL_INFO came with the request. */
static bool on_push(struct conn *c, const unsigned char *body, uint32_t len)
{
	struct f_push f;
	struct f_pull_info in;
	memcpy(&f, body, sizeof(f));
	memcpy(&in, body + sizeof(f), sizeof(in));
	if (!memchr(f.arena, 0, sizeof(f.arena)) || !memchr(f.name, 0, sizeof(f.name)) ||
	    !memchr(f.src_arena, 0, sizeof(f.src_arena)) ||
	    !memchr(f.src_name, 0, sizeof(f.src_name)))
		return protocol_error(c, "PUSH with an unterminated name");
	struct f_push_done d = { .id = f.id };
	unsigned receiving = 0;
	for (struct tnd_pull_job *k = P.running; k; k = k->next)
		receiving += k->kind == J_RECEIVED && k->conn == c;
	tn_arena *a = NULL;
	if (receiving >= MAX_RECEIVING) {
		d.status = TN_EBUSY;
		snprintf(d.message, sizeof(d.message), "%d pushes of this peer at once",
			 MAX_RECEIVING);
	} else if (!tnd_name_ok(f.arena) || !f.name[0]) {
		d.status = TN_EINVAL;
		snprintf(d.message, sizeof(d.message), "bad arena or tensor name");
	} else {
		a = own_arena(f.arena, true, &d.status, d.message, sizeof(d.message));
	}
	struct tnd_pull_job *j = a ? calloc(1, sizeof(*j)) : NULL;
	if (a && !j) {
		d.status = TN_ENOMEM;
		snprintf(d.message, sizeof(d.message), "out of memory");
	}
	if (!j) {
		/* Nothing was taken: the pusher lets its lease go on the answer. */
		return send_frame(c, F_PUSH_DONE, 0, &d, sizeof(d));
	}
	j->kind = J_RECEIVED;
	j->dst = a;
	j->id = f.id;
	j->t0 = tnd_now_ns();
	j->conn = c;
	snprintf(j->req.peer, sizeof(j->req.peer), "%s", c->address);
	memcpy(j->req.remote_arena, f.src_arena, sizeof(j->req.remote_arena));
	memcpy(j->req.remote_name, f.src_name, sizeof(j->req.remote_name));
	memcpy(j->req.arena, f.arena, sizeof(j->req.arena));
	snprintf(j->req.name, sizeof(j->req.name), "%s", f.name);
	snprintf(j->reply.lanes, sizeof(j->reply.lanes), "%s", c->lanes);
	j->next = P.running;
	P.running = j;
	tn_arena_entry e;
	if (!tn_arena_info(a, j->req.name, &e)) {
		finish(j, TN_EEXIST, "\"%.200s\" is published in arena \"%s\" already",
		       j->req.name, j->req.arena);
		return true;
	}
	/* The pusher's lease is released by the pusher, once PUSH_DONE tells it to. */
	return start_get(c, j, &in, body + sizeof(f) + sizeof(in), len - sizeof(f) - sizeof(in),
			 "PUSH");
}

/* The receiver's answer to our PUSH: release the lease, and end the push. */
static bool on_push_done(struct conn *c, const struct f_push_done *d)
{
	struct tnd_pull_job *j = P.running;
	while (j && !(j->kind == J_PUSH && j->conn == c && j->id == d->id && j->asked))
		j = j->next;
	if (!j) {
		/* A push abandoned at its deadline: its lease goes now. */
		for (struct drain **pp = &P.drains; *pp; pp = &(*pp)->next) {
			struct drain *k = *pp;
			if (k->conn == c && k->id == d->id && !k->op && !k->parts) {
				*pp = k->next;
				lease_drop(c, k->lease);
				drain_free(k);
				return true;
			}
		}
		return protocol_error(c, "PUSH_DONE for push %" PRIu64 ", which it was not sent",
				      d->id);
	}
	j->asked = false;
	if (!d->status) {
		finish(j, 0, NULL);
		return true;
	}
	char msg[TND_MESSAGE_SIZE];
	memcpy(msg, d->message, sizeof(msg));
	msg[sizeof(msg) - 1] = 0;
	int status = d->status < 0 && d->status >= -1000 ? d->status : TN_EIO;
	finish(j, status, "peer %.200s: %s", j->req.peer, msg);
	return true;
}

/* New transfers from the loop. */
static void take_pulls(void)
{
	struct tnd_pull_job *list = take_list(&P.incoming);
	while (list) {
		struct tnd_pull_job *j = list;
		list = j->next;
		if (j->kind == J_PUSH)
			start_push(j);
		else
			start_pull(j);
	}
}

/* @t failed: record @why and when to dial it again (100 ms after a connection that had been
 * ready, else doubling from 100 ms to 5 s). Under P.lock. */
static void target_failed(struct target *t, const char *why, bool was_ready)
{
	t->failures++;
	t->since = tnd_wall_s();
	snprintf(t->error, sizeof(t->error), "%s", why);
	t->backoff_ns = was_ready || !t->backoff_ns ? RETRY_MIN_NS : t->backoff_ns * 2;
	if (t->backoff_ns > RETRY_MAX_NS)
		t->backoff_ns = RETRY_MAX_NS;
	t->retry_ns = tnd_now_ns() + t->backoff_ns;
}

/* ---- connections ------------------------------------------------------------------------------ */

static void set_events(struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (c->want_out ? EPOLLOUT : 0),
				  .data.ptr = c };
	epoll_ctl(P.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Close @c with @why logged (NULL: a clean end) and recorded on its target. */
static void conn_close(struct conn *c, const char *why)
{
	char esc[2 * TND_PEER_ADDR_SIZE];
	tnd_log_escape(esc, sizeof(esc), c->address);
	if (why)
		tnd_warn("peer %s: %s", esc, why);
	/* Closing the endpoint first ends the gets in flight over it (with an error). */
	if (c->ep)
		P.ucx->disconnect(c->ep, true);
	c->ep = NULL;
	while (c->leases) {
		struct lease *l = c->leases;
		c->leases = l->next;
		P.lingering -= l->released;
		lease_free(l);
	}
	for (struct tnd_pull_job *j = P.running, *next; j; j = next) {
		next = j->next;
		if (j->conn == c) {
			j->conn = NULL;
			j->lease = 0;
			finish(j, TN_ENOTCONN, "peer %.200s lost during the transfer: %.200s",
			       j->req.peer, why ? why : "closed");
		}
	}
	for (struct drain **pp = &P.drains; *pp;) {
		struct drain *d = *pp;
		if (d->conn != c) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		drain_free(d);
	}
	if (c->pidfd >= 0)
		close(c->pidfd);
	epoll_ctl(P.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (!c->dialer && c->step != S_READY)
		P.pending--;
	for (struct conn **pp = &P.conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_lock(&P.lock);
	if (c->target >= 0) {
		struct target *t = &P.targets[c->target];
		t->conn = NULL;
		target_failed(t, why ? why : "closed", c->step == S_READY);
	} else if (why) {
		P.accepted_failures++;
	}
	pthread_mutex_unlock(&P.lock);
	free(c->in);
	free(c->out);
	free(c);
	publish_snapshot();
}

/* Close @c after a failed @what (send, recv), with errno's reason. */
static void close_errno(struct conn *c, const char *what)
{
	char why[128];
	snprintf(why, sizeof(why), "%s: %s", what, strerror(errno));
	conn_close(c, why);
}

/* Send what is queued; false when @c was closed. */
static bool flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			close_errno(c, "send");
			return false;
		}
		c->out_off += (size_t)n;
		c->last_out_ns = tnd_now_ns();
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	bool want = c->out_len > 0;
	if (want != c->want_out) {
		c->want_out = want;
		set_events(c);
	}
	return true;
}

/* Queue a frame and try to send it; false when @c was closed (a peer that does not read). */
static bool send_frame(struct conn *c, enum frame_type type, uint32_t seq, const void *body,
		       size_t len)
{
	size_t need = c->out_len + sizeof(struct frame) + len;
	if (need - c->out_off > OUT_MAX) {
		conn_close(c, "does not read what it is sent");
		return false;
	}
	if (need > c->out_cap) {
		if (c->out_off) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
			need = c->out_len + sizeof(struct frame) + len;
		}
		if (need > c->out_cap) {
			size_t cap = c->out_cap ? c->out_cap : 4096;
			while (cap < need)
				cap *= 2;
			unsigned char *nb = realloc(c->out, cap);
			if (!nb) {
				conn_close(c, "out of memory");
				return false;
			}
			c->out = nb;
			c->out_cap = cap;
		}
	}
	struct frame f = { .magic = FRAME_MAGIC, .version = FRAME_VERSION, .type = (uint16_t)type,
			   .len = (uint32_t)len, .seq = seq };
	memcpy(c->out + c->out_len, &f, sizeof(f));
	if (len)
		memcpy(c->out + c->out_len + sizeof(f), body, len);
	c->out_len += sizeof(f) + len;
	return flush_out(c);
}

static struct conn *conn_new(int fd, bool dialer, int target, const char *address)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return NULL;
	}
	c->kind = K_CONN;
	c->fd = fd;
	c->pidfd = -1;
	c->dialer = dialer;
	c->target = target;
	c->started_ns = c->last_in_ns = c->last_out_ns = tnd_now_ns();
	c->since = tnd_wall_s();
	snprintf(c->address, sizeof(c->address), "%s", address);
	if (tnd_peer_nonce(c->nonce)) {
		close(fd);
		free(c);
		return NULL;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
	if (epoll_ctl(P.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		free(c);
		return NULL;
	}
	c->next = P.conns;
	P.conns = c;
	return c;
}

static bool send_hello(struct conn *c)
{
	struct f_hello h;
	memset(&h, 0, sizeof(h));
	memcpy(h.nonce, c->nonce, sizeof(h.nonce));
	snprintf(h.listen, sizeof(h.listen), "%s", tnd_d.cfg.peer_listen);
	h.instance = tnd_d.instance;
	return send_frame(c, F_HELLO, 0, &h, sizeof(h));
}

static bool send_proof(struct conn *c)
{
	unsigned char proof[TND_SHA256_SIZE];
	const unsigned char *dn = c->dialer ? c->nonce : c->their_nonce;
	const unsigned char *ln = c->dialer ? c->their_nonce : c->nonce;
	tnd_peer_proof(&P.secret, c->dialer ? TND_PEER_DIALER : TND_PEER_LISTENER, dn, ln, proof);
	c->sent_proof = true;
	return send_frame(c, F_PROOF, 0, proof, sizeof(proof));
}

static bool conn_alive(const struct conn *c);

/* The token the side of @c that @dialer names shows in its memory for direct reads. */
static void local_token(const struct conn *c, bool dialer, unsigned char out[TND_SHA256_SIZE])
{
	const unsigned char *dn = c->dialer ? c->nonce : c->their_nonce;
	const unsigned char *ln = c->dialer ? c->their_nonce : c->nonce;
	tnd_peer_proof(&P.secret, dialer ? TND_PEER_DIALER_TOKEN : TND_PEER_LISTENER_TOKEN, dn, ln,
		       out);
}

static bool send_addr(struct conn *c)
{
	const void *addr;
	size_t len;
	P.ucx->address(P.u, &addr, &len);
	if (len > 65536 - sizeof(struct f_local)) {
		conn_close(c, "a UCX worker address of more than 64 KiB");
		return false;
	}
	unsigned char *body = malloc(sizeof(struct f_local) + len);
	if (!body) {
		conn_close(c, "out of memory");
		return false;
	}
	struct f_local lo;
	memset(&lo, 0, sizeof(lo));
	memcpy(lo.boot_id, P.boot_id, sizeof(lo.boot_id));
	lo.pidns = P.pidns;
	lo.flags = P.ucx->shared_memory(P.u) ? LOCAL_SHM : 0;
	if (tnd_d.cfg.peer_direct_read && P.boot_id[0]) {
		local_token(c, c->dialer, c->token);
		lo.token = (uint64_t)(uintptr_t)c->token;
		lo.pid = (int32_t)getpid();
	}
	memcpy(body, &lo, sizeof(lo));
	memcpy(body + sizeof(lo), addr, len);
	c->sent_addr = true;
	bool ok = send_frame(c, F_ADDR, 0, body, sizeof(lo) + len);
	free(body);
	return ok;
}

/* Whether the daemon whose ADDR began with @lo runs on this host, in this pid namespace. */
static bool same_host(const struct f_local *lo)
{
	return P.boot_id[0] && !memcmp(lo->boot_id, P.boot_id, sizeof(P.boot_id)) &&
	       lo->pidns == P.pidns;
}

/* Read @c's peer's memory directly from now on, if it offers it (@lo) and can be trusted
 * to be the process that proved the secret (peer_read.h); else UCX's get stays. */
static void try_direct_read(struct conn *c, const struct f_local *lo)
{
	if (!tnd_d.cfg.peer_direct_read || lo->pid <= 0 || !same_host(lo) ||
	    !tnd_ucx_lanes_local(c->lanes))
		return;
	unsigned char want[TND_SHA256_SIZE];
	char err[256], esc[2 * TND_PEER_ADDR_SIZE];
	local_token(c, !c->dialer, want);
	tnd_log_escape(esc, sizeof(esc), c->address);
	int fd = tnd_read_probe((pid_t)lo->pid, lo->token, want, sizeof(want), err, sizeof(err));
	if (fd < 0) {
		tnd_info("peer %s: no direct reads (UCX's get instead): %s", esc, err);
		return;
	}
	c->pid = (pid_t)lo->pid;
	c->pidfd = fd;
	size_t n = strlen(c->lanes);
	snprintf(c->lanes + n, sizeof(c->lanes) - n, " read=process_vm_readv");
	send_frame(c, F_LOCAL_READ, 0, NULL, 0);
}

/* The other side's ADDR (it proved the secret): the endpoint, direct reads, and ready. */
static bool on_addr(struct conn *c, const unsigned char *body, size_t len)
{
	char err[256];
	struct f_local lo;
	memcpy(&lo, body, sizeof(lo));
	lo.boot_id[sizeof(lo.boot_id) - 1] = 0;
	/* Both sides choose the same: UCX's peer failure handling, unless shared memory could
	 * join them (peer_ucx.h). */
	c->peer_errors = !(same_host(&lo) && (lo.flags & LOCAL_SHM) &&
			   P.ucx->shared_memory(P.u));
	if (P.ucx->connect(P.u, body + sizeof(lo), len - sizeof(lo), c->peer_errors, &c->ep, err,
			   sizeof(err))) {
		conn_close(c, err);
		return false;
	}
	if (P.ucx->lanes(c->ep, c->lanes, sizeof(c->lanes)) < 0)
		snprintf(c->lanes, sizeof(c->lanes), "?");
	try_direct_read(c, &lo);
	if (!conn_alive(c))
		return false;
	/* Where UCX would only emulate a get (TCP), the bytes come by active messages. */
	c->by_send = c->pidfd < 0 && !tnd_ucx_lanes_native_get(c->lanes);
	c->step = S_READY;
	c->since = tnd_wall_s();
	if (!c->dialer)
		P.pending--;
	char esc[2 * TND_PEER_ADDR_SIZE];
	tnd_log_escape(esc, sizeof(esc), c->address);
	tnd_info("peer %s: ready (%s, %s)", esc, c->dialer ? "dialed" : "accepted", c->lanes);
	if (c->target >= 0) {
		pthread_mutex_lock(&P.lock);
		P.targets[c->target].backoff_ns = 0;
		P.targets[c->target].error[0] = 0;
		P.targets[c->target].since = c->since;
		pthread_mutex_unlock(&P.lock);
	}
	publish_snapshot();
	return true;
}

static bool protocol_error(struct conn *c, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	P.protocol_errors++;
	conn_close(c, why);
	return false;
}

/* One frame; false when @c was closed. */
static bool on_frame(struct conn *c, const struct frame *f, const unsigned char *body)
{
	switch (c->step) {
	case S_HELLO: {
		if (f->type != F_HELLO || f->len != sizeof(struct f_hello))
			return protocol_error(c, "expected HELLO, got frame type %u of %u bytes",
					      f->type, f->len);
		const struct f_hello *h = (const void *)body;
		memcpy(c->their_nonce, h->nonce, sizeof(c->their_nonce));
		if (!memcmp(c->their_nonce, c->nonce, sizeof(c->nonce)))
			return protocol_error(c, "HELLO with this daemon's own nonce (reflected)");
		if (h->instance == tnd_d.instance) {
			conn_close(c, "is this daemon itself");
			return false;
		}
		if (!c->dialer && memchr(h->listen, 0, sizeof(h->listen)) && h->listen[0] &&
		    tnd_peer_address_ok(h->listen))
			snprintf(c->address, sizeof(c->address), "%s", h->listen);
		c->step = S_PROOF;
		/* The listener answers HELLO with its own; the dialer proves first. */
		return c->dialer ? send_proof(c) : send_hello(c);
	}
	case S_PROOF: {
		if (f->type != F_PROOF || f->len != TND_SHA256_SIZE)
			return protocol_error(c, "expected PROOF, got frame type %u of %u bytes",
					      f->type, f->len);
		const unsigned char *dn = c->dialer ? c->nonce : c->their_nonce;
		const unsigned char *ln = c->dialer ? c->their_nonce : c->nonce;
		if (!tnd_peer_proof_ok(&P.secret, c->dialer ? TND_PEER_LISTENER : TND_PEER_DIALER,
				       dn, ln, body)) {
			P.refused++;
			conn_close(c, "refused: its proof does not match the shared secret");
			return false;
		}
		c->got_proof = true;
		c->step = S_ADDR;
		/* The listener proves only to a dialer that proved itself. */
		if (!c->dialer && !send_proof(c))
			return false;
		return send_addr(c);
	}
	case S_ADDR:
		if (f->type != F_ADDR || f->len <= sizeof(struct f_local) || f->len > 65536)
			return protocol_error(c, "expected ADDR, got frame type %u of %u bytes",
					      f->type, f->len);
		return on_addr(c, body, f->len);
	case S_READY:
		switch (f->type) {
		case F_PING:
			if (f->len != sizeof(struct f_ping))
				return protocol_error(c, "PING of %u bytes", f->len);
			return send_frame(c, F_PONG, f->seq, body, f->len);
		case F_PONG: {
			if (f->len != sizeof(struct f_ping))
				return protocol_error(c, "PONG of %u bytes", f->len);
			struct f_ping p;
			memcpy(&p, body, sizeof(p));
			uint64_t now = tnd_now_ns();
			if (p.sent_ns <= now && now - p.sent_ns < (uint64_t)600 * 1000000000u) {
				c->rtt_us = (now - p.sent_ns) / 1000;
				publish_snapshot();
			}
			return true;
		}
		case F_PULL:
			if (f->len != sizeof(struct f_pull))
				return protocol_error(c, "PULL of %u bytes", f->len);
			struct f_pull p;
			memcpy(&p, body, sizeof(p));
			return serve_pull(c, &p);
		case F_PULL_INFO:
			if (f->len < sizeof(struct f_pull_info))
				return protocol_error(c, "PULL_INFO of %u bytes", f->len);
			return on_pull_info(c, body, f->len);
		case F_PUSH:
			if (f->len < sizeof(struct f_push) + sizeof(struct f_pull_info))
				return protocol_error(c, "PUSH of %u bytes", f->len);
			return on_push(c, body, f->len);
		case F_BATCH_INFO:
			if (f->len < sizeof(struct f_batch_info))
				return protocol_error(c, "BATCH_INFO of %u bytes", f->len);
			return on_batch_info(c, body, f->len);
		case F_PUSH_DONE: {
			if (f->len != sizeof(struct f_push_done))
				return protocol_error(c, "PUSH_DONE of %u bytes", f->len);
			struct f_push_done d;
			memcpy(&d, body, sizeof(d));
			return on_push_done(c, &d);
		}
		case F_LOCAL_READ:
			if (f->len)
				return protocol_error(c, "LOCAL_READ of %u bytes", f->len);
			c->peer_reads = true;
			return true;
		case F_SEND: {
			if (f->len != sizeof(struct f_send))
				return protocol_error(c, "SEND of %u bytes", f->len);
			struct f_send sf;
			memcpy(&sf, body, sizeof(sf));
			return on_send(c, &sf);
		}
		case F_RELEASE: {
			if (f->len != sizeof(struct f_release))
				return protocol_error(c, "RELEASE of %u bytes", f->len);
			struct f_release r;
			memcpy(&r, body, sizeof(r));
			return on_release(c, &r);
		}
		default:
			return protocol_error(c, "unknown frame type %u", f->type);
		}
	default:
		return protocol_error(c, "frame before the connection was made");
	}
}

/* Whether @c is still open (on the list; not dereferenced). */
static bool conn_alive(const struct conn *c)
{
	for (const struct conn *k = P.conns; k; k = k->next)
		if (k == c)
			return true;
	return false;
}

/* Read what arrived and handle every whole frame; false when @c was closed. */
static bool on_readable(struct conn *c)
{
	for (;;) {
		bool authed = c->got_proof;
		size_t limit = sizeof(struct frame) + (authed ? FRAME_MAX : FRAME_PRE_AUTH);
		if (c->in_cap < limit && c->in_len == c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 1024;
			if (cap > limit)
				cap = limit;
			unsigned char *nb = realloc(c->in, cap);
			if (!nb) {
				conn_close(c, "out of memory");
				return false;
			}
			c->in = nb;
			c->in_cap = cap;
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n == 0) {
			conn_close(c, c->step == S_READY ? "closed the connection"
							  : "closed the connection during the handshake");
			return false;
		}
		if (n < 0) {
			close_errno(c, "recv");
			return false;
		}
		c->in_len += (size_t)n;
		c->last_in_ns = tnd_now_ns();
		size_t off = 0;
		while (c->in_len - off >= sizeof(struct frame)) {
			struct frame f;
			memcpy(&f, c->in + off, sizeof(f));
			uint32_t max = c->got_proof ? FRAME_MAX : FRAME_PRE_AUTH;
			if (f.magic != FRAME_MAGIC)
				return protocol_error(c, "not a tensord peer (bad magic 0x%08x)",
						      f.magic);
			if (f.version != FRAME_VERSION)
				return protocol_error(c, "peer protocol version %u (this daemon: %u)",
						      f.version, FRAME_VERSION);
			if (!f.type || f.type >= F_TYPE_MAX_)
				return protocol_error(c, "unknown frame type %u", f.type);
			if (f.len > max)
				return protocol_error(c, "frame of %u bytes (at most %u %s)", f.len,
						      max, c->got_proof ? "" : "before the handshake");
			if (c->in_len - off - sizeof(f) < f.len)
				break;
			/* Frames are handled in place; keep the buffer while they run. A
			 * handler that answered a transfer may have closed @c without saying
			 * (a frame sent to a peer that reads nothing): look for it too. */
			if (!on_frame(c, &f, c->in + off + sizeof(f)) || !conn_alive(c))
				return false;
			off += sizeof(f) + f.len;
		}
		if (off) {
			memmove(c->in, c->in + off, c->in_len - off);
			c->in_len -= off;
		}
	}
}

/* The dialer's connect finished. */
static bool on_connected(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		char why[160];
		snprintf(why, sizeof(why), "connect: %s", strerror(err ? err : errno));
		conn_close(c, why);
		return false;
	}
	c->step = S_HELLO;
	publish_snapshot();
	return send_hello(c);
}

static void dial(unsigned i)
{
	struct target *t = &P.targets[i];
	struct sockaddr_storage sa;
	socklen_t slen;
	const char *why = NULL;
	char err[TND_MESSAGE_SIZE];
	err[0] = 0;
	int fd = -1;
	if (tnd_resolve(t->address, &sa, &slen, &why))
		snprintf(err, sizeof(err), "cannot resolve: %s", why);
	else if ((fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		snprintf(err, sizeof(err), "socket: %s", strerror(errno));
	else if (connect(fd, (struct sockaddr *)&sa, slen) && errno != EINPROGRESS)
		snprintf(err, sizeof(err), "connect: %s", strerror(errno));
	if (err[0]) {
		if (fd >= 0)
			close(fd);
		if (strcmp(err, t->error)) { /* logged when the reason changes, not each retry */
			char esc[2 * TND_PEER_ADDR_SIZE];
			tnd_log_escape(esc, sizeof(esc), t->address);
			tnd_warn("peer %s: %s", esc, err);
		}
		pthread_mutex_lock(&P.lock);
		target_failed(t, err, false);
		pthread_mutex_unlock(&P.lock);
		publish_snapshot();
		return;
	}
	struct conn *c = conn_new(fd, true, (int)i, t->address);
	if (!c)
		return;
	c->step = S_CONNECTING;
	c->want_out = true; /* writable: connected */
	set_events(c);
	pthread_mutex_lock(&P.lock);
	t->conn = c;
	t->since = c->since;
	pthread_mutex_unlock(&P.lock);
	publish_snapshot();
}

static void on_accept(void)
{
	for (;;) {
		struct sockaddr_storage sa;
		socklen_t slen = sizeof(sa);
		int fd = accept4(P.listen_fd, (struct sockaddr *)&sa, &slen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (P.pending >= MAX_PENDING) {
			/* Too many handshakes at once: a flood, not peers. */
			P.refused++;
			close(fd);
			continue;
		}
		char host[INET6_ADDRSTRLEN] = "?", port[8] = "?", addr[TND_PEER_ADDR_SIZE];
		getnameinfo((struct sockaddr *)&sa, slen, host, sizeof(host), port, sizeof(port),
			    NI_NUMERICHOST | NI_NUMERICSERV);
		snprintf(addr, sizeof(addr), sa.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host,
			 port);
		struct conn *c = conn_new(fd, false, -1, addr);
		if (!c)
			continue;
		c->step = S_HELLO;
		P.pending++;
		publish_snapshot();
	}
}

/* Deadlines: handshakes, silence, keepalives, dialing again. */
/* Whether a transfer runs with @c's peer: it holds leases here, or a get from it runs (or
 * drains, past its deadline). */
static bool transferring(const struct conn *c)
{
	if (c->nleases)
		return true;
	for (const struct tnd_pull_job *j = P.running; j; j = j->next)
		if (j->conn == c && (j->op || j->rd || j->parts))
			return true;
	for (const struct drain *d = P.drains; d; d = d->next)
		if (d->conn == c)
			return true;
	return false;
}

static void tick(void)
{
	uint64_t now = tnd_now_ns();
	uint64_t timeout = (uint64_t)tnd_d.cfg.peer_timeout_ms * 1000000u;
	/* A peer a transfer runs with (it holds leases here, or a get from it runs) may be silent
	 * for as long as a transfer may take: over TCP, UCX can keep either side's peers' thread
	 * inside one call of its progress for as long as the bytes flow, and no control frame is
	 * sent meanwhile. Its death still shows at once (the connection's end), and the transfer's
	 * deadline bounds a peer that hangs. */
	uint64_t deadline = (uint64_t)tnd_d.cfg.peer_transfer_timeout_ms * 1000000u;
	uint64_t busy = !deadline ? UINT64_MAX : deadline > timeout ? deadline : timeout;
	for (struct conn *c = P.conns, *next; c; c = next) {
		next = c->next;
		if (c->step != S_READY && now - c->started_ns > timeout) {
			conn_close(c, "handshake timed out");
		} else if (c->step == S_READY &&
			   now - c->last_in_ns > (transferring(c) ? busy : timeout)) {
			char why[96];
			snprintf(why, sizeof(why), "silent for %u ms", tnd_d.cfg.peer_timeout_ms);
			conn_close(c, why);
		} else if (c->step == S_READY && now - c->last_out_ns > timeout / 3) {
			struct f_ping p = { .sent_ns = now };
			send_frame(c, F_PING, ++c->seq, &p, sizeof(p));
		}
	}
	/* Transfers past their deadline fail; what UCX still uses of them drains. */
	for (struct tnd_pull_job *j = P.running, *next; deadline && j; j = next) {
		next = j->next;
		if (j->kind != J_RECEIVED && now - j->t0 > deadline)
			abandon(j);
	}
	/* tensord is stopping (the loop set the clients' cancel flags): end the pulls that wait
	 * for a holder's answer (those in a get end with it). */
	for (struct tnd_pull_job *j = P.running, *next; j; j = next) {
		next = j->next;
		if (j->asked && atomic_load(&j->client->cancel))
			finish(j, TN_EIO, "cancelled: tensord is stopping");
	}
	pthread_mutex_lock(&P.lock);
	unsigned n = P.ntargets;
	pthread_mutex_unlock(&P.lock);
	for (unsigned i = 0; i < n; i++)
		if (!P.targets[i].conn && now >= P.targets[i].retry_ns)
			dial(i);
}

/* Progress UCX until its event fd is armed; false when it stayed busy, for 64 rounds or 20 ms
 * (UCX 1.13's shared memory transports can report events forever once a peer died
 * mid-transfer, and a large get over TCP keeps UCX busy for as long as it runs: the caller then
 * polls rather than waits, and handles the control connections and its ticks meanwhile, which
 * keep the peers' connections alive and notice their loss). */
static bool progress_ucx(void)
{
	uint64_t t0 = tnd_now_ns();
	for (int round = 0; round < 64; round++) {
		/* One call can take long (UCX sends what a socket takes of a rendezvous message
		 * within it): the clock is read after each. */
		for (int k = 0; k < 4096 && P.ucx->progress(P.u); k++) {
			P.ucx_busy_ns = tnd_now_ns();
			if (P.ucx_busy_ns - t0 > 20000000u)
				return false;
		}
		int r = P.ucx->arm(P.u);
		if (r != 0) /* armed (1), or an error: then the 100 ms ticks progress it */
			return true;
	}
	return false;
}

static void *peers_main(void *arg)
{
	(void)arg;
	struct epoll_event evs[64];
	uint64_t last_tick = 0;
	bool armed = progress_ucx();
	while (!atomic_load(&P.stop)) {
		/* While a transfer's bytes move through UCX (active messages over TCP), UCX is
		 * polled rather than slept on: its sockets fill and drain faster than a wake-up
		 * (a 256 MiB pull over TCP ran at 0.6x of ucx_perftest, which polls, while both
		 * daemons slept half the time). Polling stops 2 ms after UCX last did something,
		 * so a peer that stops answering costs no CPU. */
		bool polling = (P.running || P.sending) &&
			       tnd_now_ns() - P.ucx_busy_ns < 2000000u;
		int n = epoll_wait(P.epfd, evs, 64, armed && !polling ? 100 : 0);
		if (n == 0 && polling)
			sched_yield(); /* the other daemon, the kernel's TCP work (2 CPUs here) */
		for (int i = 0; i < n; i++) {
			struct ev_tag *tag = evs[i].data.ptr;
			switch (tag->kind) {
			case K_WAKE: {
				uint64_t v;
				ssize_t r = read(P.wake_fd, &v, sizeof(v));
				(void)r;
				last_tick = 0; /* an address was added: dial it now */
				take_pulls();
				break;
			}
			case K_LISTEN:
				on_accept();
				break;
			case K_UCX:
				break; /* progressed below */
			case K_READ: {
				uint64_t v;
				ssize_t r = read(P.read_fd, &v, sizeof(v));
				(void)r;
				break; /* a direct read ended: checked below */
			}
			case K_CONN: {
				struct conn *c = (struct conn *)tag;
				uint32_t e = evs[i].events;
				/* A connection closed by an earlier event of this batch was freed:
				 * find it on the list first. */
				struct conn *k = P.conns;
				while (k && k != c)
					k = k->next;
				if (!k)
					break;
				if (c->step == S_CONNECTING) {
					if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP))
						on_connected(c);
					break;
				}
				if ((e & EPOLLOUT) && !flush_out(c))
					break;
				if (e & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
					on_readable(c);
				break;
			}
			}
		}
		armed = progress_ucx();
		atomic_store(&P.dropped, P.ucx->dropped(P.u));
		check_pulls();
		check_drains();
		check_sends();
		check_lingering();
		uint64_t now = tnd_now_ns();
		if ((n <= 0 && armed) || now - last_tick >= 50000000u) {
			tick();
			last_tick = now;
		}
	}
	take_pulls();
	while (P.running)
		finish(P.running, TN_EIO, "tensord is stopping");
	while (P.conns)
		conn_close(P.conns, NULL);
	tnd_read_shutdown();
	for (unsigned i = 0; i < TND_MAX_PEERS; i++) {
		P.served[i].a = tn_arena_unref(P.served[i].a);
		P.imported[i].a = tn_arena_unref(P.imported[i].a);
	}
	return NULL;
}

/* ---- the daemon's side ------------------------------------------------------------------------ */

static int add_target(const char *address)
{
	for (unsigned i = 0; i < P.ntargets; i++)
		if (!strcmp(P.targets[i].address, address))
			return TN_EEXIST;
	if (P.ntargets == TND_MAX_PEERS)
		return TN_ENOSPC;
	struct target *t = &P.targets[P.ntargets];
	memset(t, 0, sizeof(*t));
	snprintf(t->address, sizeof(t->address), "%s", address);
	t->since = tnd_wall_s();
	P.ntargets++;
	return 0;
}

static int open_listener(void)
{
	struct sockaddr_storage sa;
	socklen_t slen;
	const char *why = NULL;
	if (tnd_resolve(tnd_d.cfg.peer_listen, &sa, &slen, &why)) {
		tnd_error("peer_listen %s: %s", tnd_d.cfg.peer_listen, why);
		return -1;
	}
	int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sa, slen) || listen(fd, 64)) {
		tnd_error("peer_listen %s: %s", tnd_d.cfg.peer_listen, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	P.listen_fd = fd;
	return 0;
}

int tnd_peers_start(void)
{
	if (!tnd_d.cfg.peer_secret[0]) {
		if (tnd_d.cfg.peer_listen[0] || tnd_d.cfg.npeers)
			tnd_warn("peers are off: peer_listen and peer lines need a peer_secret");
		return 0;
	}
	char err[4096 + 512];
	if (tnd_peer_secret_load(tnd_d.cfg.peer_secret, &P.secret, err, sizeof(err))) {
		tnd_error("peer_secret: %s", err);
		return -1;
	}
	/* Before any thread but this one runs: the loader sets UCX_MEM_EVENTS. */
	P.ucx = tnd_ucx_load(TND_PKGLIBDIR, err, sizeof(err));
	if (!P.ucx) {
		tnd_error("peers: %s", err);
		tnd_peer_secret_clear(&P.secret);
		return -1;
	}
	if (P.ucx->open(&P.u, err, sizeof(err))) {
		tnd_error("peers: %s", err);
		tnd_peer_secret_clear(&P.secret);
		return -1;
	}
	P.epfd = epoll_create1(EPOLL_CLOEXEC);
	P.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	P.read_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (P.epfd < 0 || P.wake_fd < 0 || P.read_fd < 0 ||
	    (tnd_d.cfg.peer_listen[0] && open_listener()))
		goto fail;
	P.wake_tag.kind = K_WAKE;
	P.listen_tag.kind = K_LISTEN;
	P.ucx_tag.kind = K_UCX;
	P.read_tag.kind = K_READ;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &P.wake_tag };
	if (epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.wake_fd, &ev))
		goto fail;
	ev.data.ptr = &P.read_tag;
	if (epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.read_fd, &ev))
		goto fail;
	/* Direct reads need both daemons on one kernel and in one pid namespace. */
	unsigned char seed[TND_PEER_NONCE];
	if (tnd_peer_nonce(seed)) {
		tnd_error("peers: no random bytes for the transfers' keys");
		goto fail;
	}
	memcpy(&P.key_seed, seed, sizeof(P.key_seed));
	FILE *bf = fopen("/proc/sys/kernel/random/boot_id", "re");
	struct stat ns;
	if (bf && fgets(P.boot_id, sizeof(P.boot_id), bf) && !stat("/proc/self/ns/pid", &ns))
		P.pidns = (uint64_t)ns.st_ino;
	else
		P.boot_id[0] = 0;
	if (bf)
		fclose(bf);
	P.boot_id[strcspn(P.boot_id, "\n")] = 0;
	ev.data.ptr = &P.ucx_tag;
	if (epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.ucx->efd(P.u), &ev))
		goto fail;
	if (P.listen_fd >= 0) {
		ev.data.ptr = &P.listen_tag;
		if (epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.listen_fd, &ev))
			goto fail;
	}
	for (unsigned i = 0; i < tnd_d.cfg.npeers; i++)
		add_target(tnd_d.cfg.peers[i]);
	publish_snapshot();
	if (pthread_create(&P.thread, NULL, peers_main, NULL))
		goto fail;
	P.on = true;
	tnd_info("peers: on (listening on %s, %u to dial)",
		 tnd_d.cfg.peer_listen[0] ? tnd_d.cfg.peer_listen : "nothing", P.ntargets);
	return 0;
fail:
	tnd_error("peers: cannot start: %s", strerror(errno));
	tnd_peers_stop();
	return -1;
}

void tnd_peers_stop(void)
{
	if (P.on) {
		atomic_store(&P.stop, true);
		wake(P.wake_fd);
		pthread_join(P.thread, NULL);
		P.on = false;
	}
	if (P.listen_fd >= 0)
		close(P.listen_fd);
	if (P.wake_fd >= 0)
		close(P.wake_fd);
	if (P.read_fd >= 0)
		close(P.read_fd);
	if (P.epfd >= 0)
		close(P.epfd);
	P.listen_fd = P.wake_fd = P.read_fd = P.epfd = -1;
	if (P.u)
		P.ucx->close(P.u);
	P.u = NULL;
	tnd_peer_secret_clear(&P.secret);
	free(P.snap);
	P.snap = NULL;
	P.nsnap = 0;
}

int tnd_peers_add(const char *address, char *why, size_t nwhy)
{
	if (!P.on) {
		snprintf(why, nwhy, "peers are off (tensord.conf(5): peer_secret)");
		return TN_EINVAL;
	}
	if (!tnd_peer_address_ok(address)) {
		snprintf(why, nwhy, "bad address \"%.200s\": HOST:PORT or [ADDRESS]:PORT", address);
		return TN_EINVAL;
	}
	pthread_mutex_lock(&P.lock);
	int r = add_target(address);
	pthread_mutex_unlock(&P.lock);
	if (r == TN_EEXIST)
		snprintf(why, nwhy, "%s is dialed already", address);
	else if (r == TN_ENOSPC)
		snprintf(why, nwhy, "%d peers are dialed already", TND_MAX_PEERS);
	if (r)
		return r;
	publish_snapshot();
	wake(P.wake_fd);
	return 0;
}

size_t tnd_peers_list(struct tnd_peer_info **ret)
{
	pthread_mutex_lock(&P.lock);
	size_t n = P.nsnap;
	*ret = n ? malloc(n * sizeof(**ret)) : NULL;
	if (*ret)
		memcpy(*ret, P.snap, n * sizeof(**ret));
	else
		n = 0;
	pthread_mutex_unlock(&P.lock);
	return n;
}

/* Queue a pull (@push false) or a push for the peers' thread. */
static int queue_transfer(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m,
			  bool push)
{
	if (!P.on)
		return tnd_reply_error(c, h, TN_ENOTCONN, "peers are off (tensord.conf(5): "
				       "peer_secret)");
	if (!tnd_name_ok(m->arena) || (push && !tnd_name_ok(m->remote_arena)))
		return tnd_reply_error(c, h, TN_EINVAL, "bad arena name");
	struct tnd_arena *ar = tnd_arena_for(c, h, m->arena, push ? TND_ACC_READ : TND_ACC_WRITE);
	if (!ar)
		return 0;
	if (c->transfer)
		return tnd_reply_error(c, h, TN_EBUSY, "a transfer of this connection runs");
	if (ar->damaged)
		return tnd_reply_error(c, h, TN_EIO, "arena \"%s\" is damaged", ar->name);
	struct tnd_pull_job *j = calloc(1, sizeof(*j));
	if (!j)
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	j->kind = push ? J_PUSH : J_PULL;
	j->client = c;
	j->seq = h->seq;
	j->ar = ar;
	j->dst = ar->a;
	j->req = *m;
	j->t0 = tnd_now_ns();
	c->transfer = true;
	ar->transfers++;
	atomic_fetch_add(&P.pulls, 1);
	pthread_mutex_lock(&P.lock);
	j->id = ++P.next_pull;
	j->next = P.incoming;
	P.incoming = j;
	pthread_mutex_unlock(&P.lock);
	wake(P.wake_fd);
	return 0;
}

int tnd_peers_pull(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m)
{
	return queue_transfer(c, h, m, false);
}

int tnd_peers_push(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m)
{
	return queue_transfer(c, h, m, true);
}

/* A push received ended: count it, and record the seal the loop's way. */
static void received_done(struct tnd_pull_job *j)
{
	char peer[2 * TND_PEER_ADDR_SIZE], name[2 * TND_PREFIX_SIZE];
	tnd_log_escape(peer, sizeof(peer), j->req.peer);
	tnd_log_escape(name, sizeof(name), j->req.name);
	if (j->status) {
		tnd_info("push from %s into %s/%s failed: %s", peer, j->req.arena, name,
			 j->message);
		return;
	}
	atomic_fetch_add(&P.received, 1);
	atomic_fetch_add(&P.received_bytes, j->reply.bytes);
	struct tnd_arena *ar = tnd_arena_find(j->req.arena);
	if (ar && tnd_ledger_sealed(ar, j->req.name))
		tnd_debug("push: %s", tn_last_error());
	tnd_info("push from %s into %s/%s: %" PRIu64 " bytes in %.3f ms", peer, j->req.arena,
		 name, j->reply.bytes, (double)j->reply.elapsed_ns / 1e6);
}

void tnd_peers_events(void)
{
	struct tnd_pull_job *list = take_list(&P.done);
	while (list) {
		struct tnd_pull_job *j = list;
		list = j->next;
		if (j->kind == J_RECEIVED) {
			received_done(j);
			free(j);
			continue;
		}
		bool push = j->kind == J_PUSH;
		struct tnd_client *c = j->client;
		struct tnd_hdr h = { .op = push ? TND_OP_PUSH : TND_OP_PULL, .seq = j->seq };
		char peer[2 * TND_PEER_ADDR_SIZE], name[2 * TND_PREFIX_SIZE];
		tnd_log_escape(peer, sizeof(peer), j->req.peer);
		tnd_log_escape(name, sizeof(name), push ? j->req.name : j->req.remote_name);
		if (j->status)
			atomic_fetch_add(push ? &P.push_failures : &P.pull_failures, 1);
		else {
			atomic_fetch_add(push ? &P.pushes_done : &P.pulls_done, 1);
			atomic_fetch_add(push ? &P.pushed_bytes : &P.pulled_bytes, j->reply.bytes);
		}
		if (j->status && push) {
			tnd_info("push of %s/%s to %s:%s for pid %d failed: %s", j->ar->name, name, peer,
				 j->req.remote_arena, (int)c->pid, j->message);
			tnd_reply_error(c, &h, j->status, "%s", j->message);
		} else if (j->status) {
			tnd_info("pull of %s:%s/%s for pid %d failed: %s", peer, j->req.remote_arena,
				 name, (int)c->pid, j->message);
			tnd_reply_error(c, &h, j->status, "%s", j->message);
		} else if (push) {
			tnd_info("push of %s/%s to %s:%s for pid %d: %" PRIu64 " bytes in %.3f ms",
				 j->ar->name, name, peer, j->req.remote_arena, (int)c->pid,
				 j->reply.bytes, (double)j->reply.elapsed_ns / 1e6);
			tnd_reply(c, &h, &j->reply, sizeof(j->reply));
		} else {
			/* Record the seals (a failure leaves it to the periodic sweep). */
			for (size_t i = 0; i < (j->parts ? j->nparts : 1); i++)
				if (tnd_ledger_sealed(j->ar, j->parts ? j->parts[i].name : j->req.name))
					tnd_debug("pull: %s", tn_last_error());
			tnd_info("pull of %s:%s/%s into arena %s for pid %d: %" PRIu64
				 " bytes in %.3f ms", peer, j->req.remote_arena, name, j->ar->name,
				 (int)c->pid, j->reply.bytes, (double)j->reply.elapsed_ns / 1e6);
			tnd_reply(c, &h, &j->reply, sizeof(j->reply));
		}
		j->ar->transfers--;
		c->transfer = false;
		atomic_fetch_sub(&P.pulls, 1);
		free(j->parts);
		free(j);
		tnd_client_maybe_free(c);
	}
}

bool tnd_peers_running(void)
{
	return atomic_load(&P.pulls) > 0;
}

bool tnd_peers_on(void)
{
	return P.on;
}

void tnd_peers_counts(struct tnd_peer_counts *ret)
{
	ret->protocol_errors = atomic_load(&P.protocol_errors);
	ret->refused = atomic_load(&P.refused);
	ret->dropped = atomic_load(&P.dropped);
	ret->pulls = atomic_load(&P.pulls_done);
	ret->pull_failures = atomic_load(&P.pull_failures);
	ret->pulled_bytes = atomic_load(&P.pulled_bytes);
	ret->pushes = atomic_load(&P.pushes_done);
	ret->push_failures = atomic_load(&P.push_failures);
	ret->pushed_bytes = atomic_load(&P.pushed_bytes);
	ret->received = atomic_load(&P.received);
	ret->received_bytes = atomic_load(&P.received_bytes);
	pthread_mutex_lock(&P.lock);
	ret->ready = 0;
	for (size_t i = 0; i < P.nsnap; i++)
		ret->ready += P.snap[i].state == TN_TENSORD_PEER_READY;
	pthread_mutex_unlock(&P.lock);
}
