// SPDX-License-Identifier: MIT
/*
 * tensord's event loop (daemon.h). One thread runs an io_uring loop: a multishot accept on the
 * listening socket, one recvmsg per client, one sendmsg at a time per client from its queue of
 * replies (replies to one client must not be reordered), a read of a signalfd, a read of an
 * eventfd through which worker threads report, and a timeout that drives reclamation. Requests
 * are handed to handlers.c as they arrive, and everything that answers a client queues its
 * reply here.
 */
#include <errno.h>
#include <stddef.h>
#include <liburing.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

struct tnd_outmsg {
	struct tnd_outmsg *next;
	size_t len;
	size_t cost; /* bytes of the daemon's memory it takes, as outq_bytes counts them */
	int fd;      /* to pass with it, closed after sending; -1 none */
	union {
		struct tnd_hdr hdr;
		unsigned char bytes[TND_MSG_MAX];
	} u; /* allocated only as long as the message */
};

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

/* A client that does not read its replies gets no more of its requests read once this much
 * of the daemon's memory (messages and their allocations) waits for it, so it cannot grow the
 * daemon's memory. Only the replies of the one request read before the pause can take the
 * queue past it; a queue that would pass OUTQ_HARD all the same (a list of thousands of
 * items to a client that reads none) drops the connection. */
#define OUTQ_MAX ((size_t)256 << 10)
#define OUTQ_HARD (4 * OUTQ_MAX)

/* What a queued message costs: its bytes and malloc's overhead, roughly. */
#define OUTMSG_COST(len) (offsetof(struct tnd_outmsg, u) + (len) + 16)

/* ---- io_uring plumbing ----------------------------------------------------------------------- */

/* Operations taken from the ring and operations finished (a multishot one finishes with its
 * last completion): their difference is the queue depth the metrics report. */
static uint64_t sqes_taken, ops_finished;

uint64_t tnd_loop_in_flight(void)
{
	return sqes_taken - ops_finished;
}

static struct io_uring_sqe *get_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L.ring);
	if (!sqe) {
		io_uring_submit(&L.ring);
		sqe = io_uring_get_sqe(&L.ring);
	}
	sqes_taken++;
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

/* ---- replies --------------------------------------------------------------------------------- */

void tnd_queue_msg(struct tnd_client *c, unsigned op, uint32_t seq, int32_t status,
		   uint32_t flags, const void *body, size_t len, int fd)
{
	if (c->closing) {
		if (fd >= 0)
			tnd_close_passed(fd);
		return;
	}
	size_t cost = OUTMSG_COST(sizeof(struct tnd_hdr) + len);
	if (c->outq_bytes + cost > OUTQ_HARD) {
		if (fd >= 0)
			close(fd); /* the daemon's own (an arena's), not a client's */
		tnd_warn("client %u (pid %d, uid %u): does not read its replies (%zu bytes of them "
			 "wait): dropping the connection", c->id, (int)c->pid, (unsigned)c->uid,
			 c->outq_bytes);
		/* Both ways: the send in flight fails, and on_send frees the queue. */
		c->closing = true;
		atomic_store(&c->cancel, true);
		shutdown(c->fd, SHUT_RDWR);
		return;
	}
	struct tnd_outmsg *m = malloc(offsetof(struct tnd_outmsg, u) + sizeof(struct tnd_hdr) + len);
	if (!m) {
		/* Out of memory: the client cannot be answered, so it is dropped: it reads no
		 * more, and its record goes once what is in flight completes. */
		if (fd >= 0)
			close(fd);
		tnd_error("client %u: out of memory for a reply: dropping it", c->id);
		c->closing = true;
		atomic_store(&c->cancel, true);
		shutdown(c->fd, SHUT_RDWR);
		return;
	}
	m->next = NULL;
	m->fd = fd;
	m->cost = cost;
	tnd_init_hdr(&m->u.hdr, op, len, seq, status, flags | (fd >= 0 ? TND_F_FD : 0));
	if (c->version)
		m->u.hdr.version = c->version; /* what the client speaks */
	if (len)
		memcpy(m->u.bytes + sizeof(m->u.hdr), body, len);
	m->len = sizeof(m->u.hdr) + len;
	c->outq_bytes += m->cost;
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

/* ---- connections ----------------------------------------------------------------------------- */

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
						tnd_close_passed(f);
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
				tnd_close_passed(f);
		}
	}
	if (nfds > 1 || (c->rmh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)res > TND_MSG_MAX) {
		if (fd >= 0)
			tnd_close_passed(fd);
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
		c->outq_bytes -= m->cost;
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

/* ---- signals and timers ---------------------------------------------------------------------- */

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
	if (ms > tnd_d.cfg.evict_interval_ms)
		ms = tnd_d.cfg.evict_interval_ms;
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

/* ---- the loop -------------------------------------------------------------------------------- */

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

void tnd_loop_run(void)
{
	uint64_t last_sweep = tnd_now_ns(), last_evict = 0;
	arm_accept();
	arm_signal();
	arm_event();
	arm_timer();
	uint64_t stop_deadline = 0;
	for (;;) {
		if (tnd_d.stop) {
			/* Cancel the loads and saves in progress, wait for them to end (their
			 * clients are answered TN_EIO through the event fd, like any end), and let
			 * replies already queued (the SHUTDOWN request's own, the cancellations) go
			 * out: for at most 4 seconds in all. */
			tnd_spill_cancel();
			bool busy = tnd_transfers_running() || tnd_spill_running() ||
				    tnd_peers_running();
			for (struct tnd_client *c = tnd_d.clients; c; c = c->next) {
				if (c->transfer)
					atomic_store(&c->cancel, true);
				busy = busy || (c->out_head && !c->closing);
			}
			if (!stop_deadline)
				stop_deadline = tnd_now_ns() + 4000000000u;
			if (!busy || tnd_now_ns() > stop_deadline)
				break;
			/* Wake at least every 10 ms to look again (the timer may be long). */
			struct __kernel_timespec ts = { 0, 10000000 };
			struct io_uring_cqe *w;
			io_uring_submit_and_wait_timeout(&L.ring, &w, 1, &ts, NULL);
		} else {
			io_uring_submit_and_wait(&L.ring, 1);
		}
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&L.ring, head, cqe)
		{
			seen++;
			struct tnd_ring_op *op = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			bool more = cqe->flags & IORING_CQE_F_MORE;
			if (!more)
				ops_finished++;
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
				tnd_ledger_events();
				tnd_spill_events();
				tnd_http_events();
				tnd_peers_events();
				arm_event();
				break;
			case TND_RING_TIMER:
				tnd_clients_expire();
				tnd_reclaim_check();
				if (tnd_now_ns() - last_evict >=
				    (uint64_t)tnd_d.cfg.evict_interval_ms * 1000000u) {
					tnd_evict_check();
					last_evict = tnd_now_ns();
				}
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

void tnd_loop_fini(void)
{
	io_uring_queue_exit(&L.ring);
}
