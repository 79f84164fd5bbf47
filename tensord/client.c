// SPDX-License-Identifier: MIT
/*
 * The tensord client library (tensor/tensord.h), compiled into libtensor: connections, the
 * request/reply exchange over SOCK_SEQPACKET with SCM_RIGHTS, reconnection after a daemon
 * restart, and the remote operations a read-only arena handle uses for its holds.
 *
 * Every reply is validated (tnd_check_reply) before a field of it is read: a daemon is
 * trusted with the arenas, but a malformed reply is still an error here and never a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "../shm/arena_remote.h"
#include "client.h"
#include "proto.h"
#include <tensor/tensord.h>

/* An arena opened through the connection: what a reconnection re-registers, and the context
 * of the handle's remote operations. */
struct conn_arena {
	struct conn_arena *next;
	tn_tensord *conn; /* a reference */
	char name[TND_NAME_SIZE];
	uint8_t uuid[16];
	uint32_t slot;
	uint32_t flags; /* TND_OPEN_READ_ONLY */
};

struct tn_tensord {
	_Atomic int refs;
	pthread_mutex_t lock; /* one exchange at a time; guards everything below */
	int fd;               /* -1 while disconnected */
	pid_t pid;            /* the process that connected; a fork child reconnects */
	uint32_t seq;
	struct tnd_hello_reply hello;
	struct conn_arena *arenas;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* Replies are read into this, aligned for the bodies' 8-byte fields. */
union msg_buf {
	struct tnd_hdr hdr;
	uint64_t align;
	unsigned char bytes[TND_MSG_MAX];
};

TN_EXPORT int tn_tensord_socket_path(char *buf, size_t cap)
{
	static const char fn[] = "tn_tensord_socket_path";
	char path[4200];
	const char *env = getenv("TENSORD_SOCKET");
	if (!buf)
		return tn__error(TN_EINVAL, "%s: NULL buffer", fn);
	if (env && env[0]) {
		snprintf(path, sizeof(path), "%.4100s", env);
	} else if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s", TN_TENSORD_SYSTEM_SOCKET);
	} else {
		/* Another user: its own daemon's socket where one is there, else the system
		 * daemon's where that is there (a user with no session of its own, or who runs
		 * no daemon), else its own (or, without XDG_RUNTIME_DIR, the system's) path, so
		 * that the connection's error names where a daemon was looked for. */
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		struct stat st;
		bool own = xdg && xdg[0];
		if (own)
			snprintf(path, sizeof(path), "%.4080s/tensord.sock", xdg);
		if (!own || ((stat(path, &st) || !S_ISSOCK(st.st_mode)) &&
			     !stat(TN_TENSORD_SYSTEM_SOCKET, &st) && S_ISSOCK(st.st_mode)))
			snprintf(path, sizeof(path), "%s", TN_TENSORD_SYSTEM_SOCKET);
	}
	size_t n = strlen(path);
	if (n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return tn__error(TN_ENAMETOOLONG, "%s: socket path of %zu bytes exceeds the %zu "
				 "a UNIX socket address holds: %s", fn, n,
				 sizeof(((struct sockaddr_un *)0)->sun_path) - 1, path);
	if (n >= cap)
		return tn__error(TN_ENAMETOOLONG, "%s: buffer of %zu bytes too small", fn, cap);
	memcpy(buf, path, n + 1);
	return (int)n;
}

/* ---- transport ------------------------------------------------------------------------------ */

static int send_msg(int fd, const void *msg, size_t len, int pass_fd)
{
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (pass_fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EPROTO;
}

/* Receive one message; *ret_fd gets a descriptor that came with it (else -1). Returns its
 * length, 0 at end of stream, or -errno. Extra descriptors are closed. */
static ssize_t recv_msg(int fd, union msg_buf *buf, int *ret_fd)
{
	struct iovec iov = { .iov_base = buf->bytes, .iov_len = sizeof(buf->bytes) };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	*ret_fd = -1;
	if (n < 0)
		return -errno;
	int nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (nfds++ == 0)
				*ret_fd = f;
			else
				close(f);
		}
	}
	if (nfds > 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*ret_fd >= 0)
			close(*ret_fd);
		*ret_fd = -1;
		return -EPROTO;
	}
	return n;
}

static void disconnect(tn_tensord *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Callbacks of one exchange. */
struct exchange {
	unsigned op;
	const void *body;
	size_t body_len;
	int pass_fd;
	void *reply;        /* the final reply's body (reply size of op); may be NULL */
	int *ret_fd;        /* a descriptor in the final reply */
	int (*item)(void *ctx, const void *body); /* TND_F_MORE items */
	tn_tensord_progress_fn progress;
	void *ctx;
};

static int connect_locked(tn_tensord *c, const char *fn);

/* One request and its replies, with the lock held. A request that could not be sent because
 * the daemon went away is sent again once after reconnecting; one whose reply was lost is
 * not (it may have taken effect), and fails with TN_ENOTCONN. */
/*
 * Requests the daemon refuses with TN_EBUSY, having done nothing, while a process holds the
 * arena's lock: the daemon waits for a lock only a millisecond, so that one arena's holder
 * delays no request about another, and the caller waits instead, as a local caller of the
 * arena would (tn__arena_lock_default_ms: TN_ARENA_LOCK_TIMEOUT_MS, 10 s by default).
 */
static bool retried_while_locked(unsigned op, const char *message)
{
	switch (op) {
	case TND_OP_ARENA_OPEN:
	case TND_OP_ARENA_STAT:
	case TND_OP_REATTACH:
	case TND_OP_HOLD:
	case TND_OP_FSCK:
	case TND_OP_GC:
	case TND_OP_SAVE:
		return strstr(message, "\" is locked by ") != NULL;
	default:
		return false;
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int exchange_locked(tn_tensord *c, struct exchange *x, const char *fn)
{
	int r;
	uint64_t busy_deadline = 0;
	unsigned busy_sleep_us = 500;
	if (c->pid != getpid()) {
		/* A fork child shares the parent's socket: let go of it (closing our copy does
		 * not disturb the parent) and of the parent's arena records. */
		disconnect(c);
		c->arenas = NULL;
	}
	union {
		struct tnd_hdr hdr;
		unsigned char bytes[TND_MSG_MAX];
	} out;
	for (int attempt = 0;; attempt++) {
		if (c->fd < 0 && (r = connect_locked(c, fn)))
			return r;
		if (x->op >= TND_OP_CUDA_EXPORT && x->op < TND_OP_SEALED && c->hello.version < 2)
			return tn__error(TN_ENOTSUP, "%s: tensord at %s speaks protocol version %u; "
					 "sharing CUDA memory needs version 2 (a newer tensord)",
					 fn, c->path, c->hello.version);
		if (x->op >= TND_OP_PEER_ADD && c->hello.version < 6)
			return tn__error(TN_ENOTSUP, "%s: tensord at %s speaks protocol version %u; "
					 "peers need version 6 (a newer tensord)",
					 fn, c->path, c->hello.version);
		if (x->op >= TND_OP_PUSH && c->hello.version < 7)
			return tn__error(TN_ENOTSUP, "%s: tensord at %s speaks protocol version %u; "
					 "pushes need version 7 (a newer tensord)",
					 fn, c->path, c->hello.version);
		if (x->op >= TND_OP_SEALED && x->op < TND_OP_WAITING && c->hello.version < 3)
			return tn__error(TN_ENOTSUP, "%s: tensord at %s speaks protocol version %u; "
					 "its record of seals needs version 3 (a newer tensord)",
					 fn, c->path, c->hello.version);
		if (x->op >= TND_OP_WAITING && x->op < TND_OP_METRICS && c->hello.version < 4)
			return tn__error(TN_ENOTSUP, "%s: tensord at %s speaks protocol version %u; "
					 "waking read-only waiters needs version 4 (a newer tensord)",
					 fn, c->path, c->hello.version);
		if (x->op >= TND_OP_METRICS && c->hello.version < 5)
			return tn__error(TN_ENOTSUP, "%s: tensord at %s speaks protocol version %u; "
					 "its metrics need version 5 (a newer tensord)", fn, c->path,
					 c->hello.version);
		uint32_t seq = ++c->seq;
		tnd_init_hdr(&out.hdr, x->op, x->body_len, seq, 0, x->pass_fd >= 0 ? TND_F_FD : 0);
		out.hdr.version = (uint16_t)c->hello.version;
		if (x->body_len)
			memcpy(out.bytes + sizeof(out.hdr), x->body, x->body_len);
		r = send_msg(c->fd, &out, sizeof(out.hdr) + x->body_len, x->pass_fd);
		if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
			disconnect(c);
			if (attempt == 0)
				continue;
			return tn__error(TN_ENOTCONN, "%s: the connection to tensord at %s was lost",
					 fn, c->path);
		}
		if (r)
			return tn__error(TN_EIO, "%s: sending to tensord: %s", fn, strerror(-r));
		union msg_buf in;
		for (;;) {
			int rfd = -1;
			ssize_t n = recv_msg(c->fd, &in, &rfd);
			if (n <= 0 && n != -EPROTO) {
				disconnect(c);
				return tn__error(TN_ENOTCONN, "%s: tensord at %s closed the connection "
						 "during %s%s%s", fn, c->path, tnd_op_name(x->op),
						 n ? ": " : "", n ? strerror((int)-n) : "");
			}
			if (n < 0 || (r = tnd_check_reply(&in, (size_t)n, x->op, seq, rfd >= 0))) {
				if (rfd >= 0)
					close(rfd);
				disconnect(c); /* out of step with the daemon: start afresh */
				if (n < 0)
					return tn__error(TN_EPROTO, "%s: malformed reply from tensord "
							 "(truncated or too many descriptors)", fn);
				return tn__error(TN_EPROTO, "%s: malformed reply from tensord: %s",
						 fn, tn_last_error());
			}
			const void *body = in.bytes + sizeof(in.hdr);
			if (in.hdr.status < 0) {
				const struct tnd_error *e = body;
				if (in.hdr.status == TN_EBUSY &&
				    retried_while_locked(x->op, e->message)) {
					uint64_t now = now_ns();
					if (!busy_deadline)
						busy_deadline = now + (uint64_t)tn__arena_lock_default_ms() *
									      1000000u;
					if (now < busy_deadline) {
						/* 0.5 ms doubling to 50 ms: the holder of a lock
						 * keeps it microseconds, unless it is stopped. */
						usleep(busy_sleep_us);
						if (busy_sleep_us < 50000)
							busy_sleep_us *= 2;
						attempt = -1;
						break;
					}
				}
				return tn__error(in.hdr.status, "%s", e->message);
			}
			if (in.hdr.flags & TND_F_PROGRESS) {
				const struct tnd_progress *p = body;
				if (x->progress)
					x->progress(p->done, p->total, x->ctx);
				continue;
			}
			if (in.hdr.flags & TND_F_MORE) {
				/* Out of memory (the callback keeps the error): drain the rest, so
				 * the stream stays in step, without collecting. */
				if (x->item && x->item(x->ctx, body) < 0)
					x->item = NULL;
				continue;
			}
			if (x->reply)
				memcpy(x->reply, body, (size_t)tnd_reply_size(x->op));
			if (rfd >= 0) {
				if (x->ret_fd)
					*x->ret_fd = rfd;
				else
					close(rfd);
			}
			return 0;
		}
	}
}

static int exchange(tn_tensord *c, struct exchange *x, const char *fn)
{
	pthread_mutex_lock(&c->lock);
	int r = exchange_locked(c, x, fn);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Connect, say hello, and re-register the arenas this process has open through the
 * connection (after a daemon restart they are still mapped and attached). */
static int connect_locked(tn_tensord *c, const char *fn)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tn__error(errno == EMFILE || errno == ENFILE ? TN_ENOSPC : TN_EIO,
				 "%s: socket: %s", fn, strerror(errno));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
	int r;
	while ((r = connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0 && errno == EINTR)
		;
	if (r < 0) {
		int e = errno;
		close(fd);
		return tn__error(e == ENOENT	       ? TN_ENOENT
				 : e == ECONNREFUSED ? TN_ECONNREFUSED
				 : e == EACCES	     ? TN_EACCES
						     : TN_EIO,
				 "%s: cannot connect to tensord at %s: %s", fn, c->path,
				 strerror(e));
	}
	c->fd = fd;
	c->pid = getpid();
	struct tnd_hello h = { .min_version = TND_VERSION_MIN, .max_version = TND_VERSION };
	extern char *program_invocation_short_name;
	snprintf(h.program, sizeof(h.program), "%s", program_invocation_short_name);
	struct exchange x = { .op = TND_OP_HELLO, .body = &h, .body_len = sizeof(h),
			      .pass_fd = -1, .reply = &c->hello };
	uint32_t seq = ++c->seq;
	union {
		struct tnd_hdr hdr;
		unsigned char bytes[sizeof(struct tnd_hdr) + sizeof(h)];
	} out;
	tnd_init_hdr(&out.hdr, x.op, sizeof(h), seq, 0, 0);
	memcpy(out.bytes + sizeof(out.hdr), &h, sizeof(h));
	union msg_buf in;
	int rfd = -1;
	ssize_t n = 0;
	if ((r = send_msg(fd, &out, sizeof(out), -1)) || (n = recv_msg(fd, &in, &rfd)) <= 0) {
		disconnect(c);
		/* A daemon that stops (or is killed) between accept and reply closes the
		 * connection: that is a lost connection, not a peer that speaks another protocol. */
		int e = r ? -r : n ? (int)-n : 0;
		if (e == 0 || e == EPIPE || e == ECONNRESET || e == ENOTCONN)
			return tn__error(TN_ENOTCONN, "%s: tensord at %s closed the connection "
					 "during the hello", fn, c->path);
		return tn__error(TN_EPROTO, "%s: %s did not answer the hello: is it a tensord?",
				 fn, c->path);
	}
	if ((r = tnd_check_reply(&in, (size_t)n, TND_OP_HELLO, seq, rfd >= 0))) {
		if (rfd >= 0)
			close(rfd);
		disconnect(c);
		return tn__error(TN_EPROTO, "%s: bad hello reply from %s: %s", fn, c->path,
				 tn_last_error());
	}
	if (in.hdr.status < 0) {
		disconnect(c);
		const struct tnd_error *e = (const void *)(in.bytes + sizeof(in.hdr));
		return tn__error(in.hdr.status, "%s", e->message);
	}
	memcpy(&c->hello, in.bytes + sizeof(in.hdr), sizeof(c->hello));
	if (c->hello.version < TND_VERSION_MIN || c->hello.version > TND_VERSION) {
		disconnect(c);
		return tn__error(TN_EPROTO, "%s: tensord chose protocol version %u, this library "
				 "speaks %d to %d", fn, c->hello.version, TND_VERSION_MIN,
				 TND_VERSION);
	}
	/* Re-register open arenas; one that is gone (destroyed) keeps its mapping and only
	 * loses the daemon's bookkeeping. */
	for (struct conn_arena *ca = c->arenas; ca; ca = ca->next) {
		struct tnd_reattach ra = { .slot = ca->slot, .flags = ca->flags };
		memcpy(ra.name, ca->name, sizeof(ra.name));
		memcpy(ra.uuid, ca->uuid, sizeof(ra.uuid));
		struct tnd_arena_open_reply rep;
		struct exchange rx = { .op = TND_OP_REATTACH, .body = &ra, .body_len = sizeof(ra),
				       .pass_fd = -1, .reply = &rep };
		if (exchange_locked(c, &rx, fn) == TN_ENOTCONN)
			return TN_ENOTCONN;
	}
	return 0;
}

/* What a backend may call of the client (CUDA IPC): given to the core's registry at the first
 * connection, since a backend meets the client only through one. */
#define TN_CLIENT_FILL_(ret, name, params, args, fallback) .name = name,
#define TN_CLIENT_VFILL_(name, params, args) .name = name,
static const struct tn__client_api client_api = {
	TN_CLIENT_API_LIST(TN_CLIENT_FILL_, TN_CLIENT_VFILL_)
};

TN_EXPORT int tn_tensord_connect(const char *path, tn_tensord **ret)
{
	static const char fn[] = "tn_tensord_connect";
	int r, saved = errno;
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_conn", fn);
	tn__backend_provide_client(&client_api);
	tn_tensord *c = tn__calloc(1, sizeof(*c));
	if (!c)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	c->fd = -1;
	atomic_init(&c->refs, 1);
	pthread_mutex_init(&c->lock, NULL);
	if (path) {
		if (strlen(path) >= sizeof(c->path)) {
			tn__free(c);
			return tn__error(TN_ENAMETOOLONG, "%s: socket path of %zu bytes exceeds "
					 "the %zu a UNIX socket address holds", fn, strlen(path),
					 sizeof(c->path) - 1);
		}
		strcpy(c->path, path);
	} else if ((r = tn_tensord_socket_path(c->path, sizeof(c->path))) < 0) {
		tn__free(c);
		return r;
	}
	pthread_mutex_lock(&c->lock);
	r = connect_locked(c, fn);
	pthread_mutex_unlock(&c->lock);
	errno = saved;
	if (r) {
		pthread_mutex_destroy(&c->lock);
		tn__free(c);
		return r;
	}
	*ret = c;
	return 0;
}

static tn_tensord *conn_ref(tn_tensord *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	return c;
}

TN_EXPORT void tn_tensord_close(tn_tensord *c)
{
	if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
		return;
	int saved = errno;
	if (c->pid == getpid())
		disconnect(c);
	else if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->lock);
	tn__free(c);
	errno = saved;
}

/* ---- requests -------------------------------------------------------------------------------- */

static int copy_name(char *dst, const char *name, const char *fn)
{
	if (!name)
		return tn__error(TN_EINVAL, "%s: NULL arena name", fn);
	size_t n = strlen(name);
	if (n == 0 || n > TND_NAME_MAX)
		return tn__error(TN_EINVAL, "%s: arena name must be 1 to %d bytes, not %zu", fn,
				 TND_NAME_MAX, n);
	memset(dst, 0, TND_NAME_SIZE);
	memcpy(dst, name, n);
	if (!tnd_name_ok(dst))
		return tn__error(TN_EINVAL, "%s: bad arena name \"%s\": letters, digits, '.', "
				 "'_' and '-' only, not first '.' or '-'", fn, name);
	return 0;
}

#define CHECK_CONN(c, fn)                                                                    \
	do {                                                                                 \
		if (!(c))                                                                    \
			return tn__error(TN_EINVAL, "%s: NULL connection", fn);             \
	} while (0)

TN_EXPORT int tn_tensord_status_get(tn_tensord *c, tn_tensord_status *ret)
{
	static const char fn[] = "tn_tensord_status_get";
	CHECK_CONN(c, fn);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_status", fn);
	struct tnd_status st;
	struct exchange x = { .op = TND_OP_STATUS, .pass_fd = -1, .reply = &st };
	int r = exchange(c, &x, fn);
	if (r)
		return r;
	memset(ret, 0, sizeof(*ret));
	ret->pid = st.daemon_pid;
	ret->uid = st.uid;
	ret->instance = st.instance;
	ret->started = st.started;
	ret->uptime_ns = st.uptime_ns;
	ret->arenas = st.arenas;
	ret->clients = st.clients;
	ret->requests = st.requests;
	ret->reclaimed_slots = st.reclaimed_slots;
	ret->protocol_errors = st.protocol_errors;
	snprintf(ret->arena_dir, sizeof(ret->arena_dir), "%s", st.arena_dir);
	pthread_mutex_lock(&c->lock);
	ret->client_id = c->hello.client_id;
	ret->peer_uid = c->hello.uid;
	ret->peer_gid = c->hello.gid;
	ret->version = c->hello.version;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

TN_EXPORT void tn_tensord_arena_options_init(tn_tensord_arena_options *o)
{
	if (o)
		memset(o, 0, sizeof(*o));
}

TN_EXPORT int tn_tensord_arena_create(tn_tensord *c, const char *name,
				      const tn_tensord_arena_options *o)
{
	static const char fn[] = "tn_tensord_arena_create";
	CHECK_CONN(c, fn);
	struct tnd_arena_create m = { 0 };
	int r;
	if ((r = copy_name(m.name, name, fn)))
		return r;
	if (o) {
		if (o->flags & ~TN_TENSORD_HUGEPAGES)
			return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, o->flags);
		if (o->mode & ~0077u)
			return tn__error(TN_EINVAL, "%s: mode 0%o: only group and other bits "
					 "(0077) apply; the owner always reads and writes", fn,
					 o->mode);
		if ((unsigned)o->numa_policy > TN_NUMA_LOCAL)
			return tn__error(TN_EINVAL, "%s: bad NUMA policy %d", fn, o->numa_policy);
		m.size = o->size;
		m.flags = o->flags & TN_TENSORD_HUGEPAGES ? TND_CREATE_HUGEPAGES : 0;
		m.numa_policy = o->numa_policy;
		m.numa_nodes = o->numa_nodes;
		m.max_names = o->max_names;
		m.mode = o->mode;
	}
	struct exchange x = { .op = TND_OP_ARENA_CREATE, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	return exchange(c, &x, fn);
}

/* ---- remote operations of arena handles ------------------------------------------------------ */

static int remote_hold(void *ctx, const char *name, const tn_arena_handle *handle,
		       struct tn__arena_remote_entry *ret)
{
	static const char fn[] = "tn_arena_lookup";
	struct conn_arena *ca = ctx;
	struct tnd_hold m = { .slot = ca->slot };
	memcpy(m.name, ca->name, sizeof(m.name));
	memcpy(m.uuid, ca->uuid, sizeof(m.uuid));
	if (name) {
		if (strlen(name) > TN_ARENA_NAME_MAX)
			return tn__error(TN_EINVAL, "%s: name longer than %d bytes", fn,
					 TN_ARENA_NAME_MAX);
		strcpy(m.tensor, name);
	} else {
		m.index = handle->index;
		m.generation = handle->generation;
	}
	struct tnd_hold_reply rep;
	struct exchange x = { .op = TND_OP_HOLD, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1, .reply = &rep };
	int r = exchange(ca->conn, &x, fn);
	if (r)
		return r;
	if (rep.ndim > TN_ARENA_MAX_DIMS || rep.dtype >= TN_NUM_DTYPES)
		return tn__error(TN_EPROTO, "%s: tensord described a tensor of %u dims, dtype %u",
				 fn, rep.ndim, rep.dtype);
	memset(ret, 0, sizeof(*ret));
	if (name)
		strcpy(ret->entry.name, name);
	ret->entry.dtype = (enum tn_dtype)rep.dtype;
	ret->entry.ndim = (int)rep.ndim;
	memcpy(ret->entry.sizes, rep.sizes, sizeof(rep.sizes));
	memcpy(ret->entry.strides, rep.strides, sizeof(rep.strides));
	ret->entry.storage_offset = rep.storage_offset;
	ret->entry.block_bytes = rep.block_bytes;
	ret->entry.flags = rep.flags;
	ret->entry.handle.index = rep.index;
	ret->entry.handle.generation = rep.generation;
	ret->block = rep.block;
	return 0;
}

static void remote_release(void *ctx, uint64_t block)
{
	struct conn_arena *ca = ctx;
	struct tnd_release m = { .block = block, .slot = ca->slot };
	memcpy(m.name, ca->name, sizeof(m.name));
	memcpy(m.uuid, ca->uuid, sizeof(m.uuid));
	struct exchange x = { .op = TND_OP_RELEASE, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	/* A failure (the daemon is gone) leaves the hold to the slot's reclamation. */
	int saved = errno;
	char keep[256];
	snprintf(keep, sizeof(keep), "%s", tn_last_error());
	if (exchange(ca->conn, &x, "tn_arena_unref") < 0)
		tn__error(0, "%s", keep); /* the caller's last error, as it was */
	errno = saved;
}

/* A seal by this process's read-write handle: the daemon records it where grantees cannot
 * write (an older daemon, which does not, answers TN_ENOTSUP: nothing to do). */
static void remote_sealed(void *ctx, const char *name)
{
	struct conn_arena *ca = ctx;
	tn_tensord *c = ca->conn;
	if (c->pid != getpid() || strlen(name) > TN_ARENA_NAME_MAX)
		return;
	struct tnd_sealed m;
	memset(&m, 0, sizeof(m));
	memcpy(m.name, ca->name, sizeof(m.name));
	strcpy(m.tensor, name);
	struct exchange x = { .op = TND_OP_SEALED, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	(void)exchange(c, &x, "tn_arena_seal");
}

/* A read-only handle's thread begins or ends waiting for a publish: the daemon marks the slot. */
static int remote_waiting(void *ctx, bool on)
{
	struct conn_arena *ca = ctx;
	struct tnd_waiting m = { .slot = ca->slot, .on = on };
	memcpy(m.name, ca->name, sizeof(m.name));
	memcpy(m.uuid, ca->uuid, sizeof(m.uuid));
	struct exchange x = { .op = TND_OP_WAITING, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	int saved = errno;
	int r = exchange(ca->conn, &x, "tn_arena_lookup_wait");
	errno = saved;
	return r;
}

static void conn_forget(tn_tensord *c, struct conn_arena *ca)
{
	pthread_mutex_lock(&c->lock);
	for (struct conn_arena **p = &c->arenas; *p; p = &(*p)->next)
		if (*p == ca) {
			*p = ca->next;
			break;
		}
	pthread_mutex_unlock(&c->lock);
}

static void remote_detach(void *ctx, int slot)
{
	struct conn_arena *ca = ctx;
	tn_tensord *c = ca->conn;
	conn_forget(c, ca);
	int saved = errno;
	struct tnd_detach m = { .slot = (uint32_t)slot };
	memcpy(m.name, ca->name, sizeof(m.name));
	memcpy(m.uuid, ca->uuid, sizeof(m.uuid));
	struct exchange x = { .op = TND_OP_DETACH, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	if (c->pid == getpid())
		(void)exchange(c, &x, "tn_arena_unref");
	errno = saved;
	tn__free(ca);
	tn_tensord_close(c);
}

TN_EXPORT int tn_tensord_arena_open(tn_tensord *c, const char *name, unsigned flags,
				    tn_arena **ret)
{
	static const char fn[] = "tn_tensord_arena_open";
	CHECK_CONN(c, fn);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_arena", fn);
	if (flags & ~TN_TENSORD_READ_ONLY)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	struct tnd_arena_open m = { .flags = flags & TN_TENSORD_READ_ONLY ? TND_OPEN_READ_ONLY : 0 };
	int r;
	if ((r = copy_name(m.name, name, fn)))
		return r;
	struct conn_arena *ca = tn__calloc(1, sizeof(*ca));
	if (!ca)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	struct tnd_arena_open_reply rep;
	int afd = -1;
	struct exchange x = { .op = TND_OP_ARENA_OPEN, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1, .reply = &rep, .ret_fd = &afd };
	int saved = errno;
	pthread_mutex_lock(&c->lock);
	r = exchange_locked(c, &x, fn);
	if (r == 0) {
		ca->conn = conn_ref(c);
		memcpy(ca->name, m.name, sizeof(ca->name));
		memcpy(ca->uuid, rep.uuid, sizeof(ca->uuid));
		ca->slot = rep.slot;
		ca->flags = rep.flags & TND_OPEN_READ_ONLY;
		ca->next = c->arenas;
		c->arenas = ca;
	}
	pthread_mutex_unlock(&c->lock);
	if (r) {
		tn__free(ca);
		errno = saved;
		return r;
	}
	if (afd < 0) {
		r = tn__error(TN_EPROTO, "%s: tensord sent no descriptor", fn);
		goto fail;
	}
	struct tn__arena_remote remote = { .hold = remote_hold, .release = remote_release,
					   .detach = remote_detach, .sealed = remote_sealed,
					   .waiting = remote_waiting, .ctx = ca };
	tn_arena *a = NULL;
	r = tn__arena_attach_slot(afd, (int)rep.slot,
				  ca->flags & TND_OPEN_READ_ONLY ? TN__ATTACH_READ_ONLY : 0,
				  &remote, &a);
	close(afd);
	if (r)
		goto fail;
	uint8_t uuid[16];
	tn__arena_uuid(a, uuid);
	if (memcmp(uuid, rep.uuid, 16)) {
		tn_arena_unref(a); /* detaches: frees ca and drops the reference */
		errno = saved;
		return tn__error(TN_EPROTO, "%s: the descriptor is of another arena than %s", fn,
				 name);
	}
	*ret = a;
	errno = saved;
	return 0;
fail:
	/* Give the assigned slot back, then forget the record. */
	{
		char keep[512];
		snprintf(keep, sizeof(keep), "%s", tn_last_error());
		remote_detach(ca, (int)rep.slot);
		tn__error(r, "%s", keep);
	}
	errno = saved;
	return r;
}

static void info_from_wire(tn_tensord_arena_info *o, const struct tnd_arena_info *w)
{
	memset(o, 0, sizeof(*o));
	memcpy(o->name, w->name, sizeof(o->name));
	o->name[TN_TENSORD_NAME_MAX] = 0;
	o->owner_uid = w->owner_uid;
	o->owner_gid = w->owner_gid;
	o->mode = w->mode;
	o->ngrants = w->ngrants > TN_TENSORD_MAX_GRANTS ? TN_TENSORD_MAX_GRANTS : w->ngrants;
	for (uint32_t i = 0; i < o->ngrants; i++) {
		o->grants[i].kind = (enum tn_tensord_grant_kind)w->grants[i].kind;
		o->grants[i].id = w->grants[i].id;
		o->grants[i].access = (enum tn_tensord_access)w->grants[i].access;
	}
	o->created = w->created;
	tn_arena_stats *s = &o->stats;
	memcpy(s->uuid, w->uuid, 16);
	s->size = w->size;
	s->page_size = w->page_size;
	s->backing = (enum tn_arena_backing)w->backing;
	s->numa_policy = (enum tn_numa_policy)w->numa_policy;
	s->numa_nodes = w->numa_nodes;
	s->heap_bytes = w->heap_bytes;
	s->used_bytes = w->used_bytes;
	s->free_bytes = w->free_bytes;
	s->largest_free = w->largest_free;
	s->blocks = w->blocks;
	s->free_blocks = w->free_blocks;
	s->names = w->names;
	s->max_names = w->max_names;
	s->clients = w->clients;
	s->num_allocs = w->num_allocs;
	s->num_frees = w->num_frees;
	s->lock_repairs = w->lock_repairs;
	s->reclaimed_slots = w->reclaimed_slots;
	o->nnodes = w->nnodes > TN_TENSORD_MAX_NODES ? TN_TENSORD_MAX_NODES : w->nnodes;
	o->flags = w->flags & TND_INFO_LOCKED ? TN_TENSORD_INFO_LOCKED : 0;
	memcpy(o->resident_pages, w->resident_pages, sizeof(o->resident_pages));
}

/* A growing array of list items. */
struct collect {
	void *items;
	size_t n, cap, size;
	int err;
	void (*convert)(void *dst, const void *wire);
};

static int collect_item(void *ctx, const void *body)
{
	struct collect *k = ctx;
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 16;
		void *p = realloc(k->items, cap * k->size);
		if (!p) {
			k->err = TN_ENOMEM;
			return TN_ENOMEM;
		}
		k->items = p;
		k->cap = cap;
	}
	k->convert((char *)k->items + k->n * k->size, body);
	k->n++;
	return 0;
}

static void convert_info(void *dst, const void *wire)
{
	info_from_wire(dst, wire);
}

static void convert_client(void *dst, const void *wire)
{
	const struct tnd_client_info *w = wire;
	tn_tensord_client *o = dst;
	memset(o, 0, sizeof(*o));
	o->client_id = w->client_id;
	o->pid = w->pid;
	o->uid = w->uid;
	o->gid = w->gid;
	o->connected = w->connected;
	memcpy(o->program, w->program, sizeof(o->program));
	o->program[sizeof(o->program) - 1] = 0;
	o->narenas = w->narenas;
	o->requests = w->requests;
}

static int list(tn_tensord *c, unsigned op, size_t size, void (*convert)(void *, const void *),
		void **ret, size_t *ret_count, const char *fn)
{
	CHECK_CONN(c, fn);
	if (!ret || !ret_count)
		return tn__error(TN_EINVAL, "%s: NULL result pointer", fn);
	struct collect k = { .size = size, .convert = convert };
	union {
		struct tnd_arena_info a;
		struct tnd_client_info c;
		struct tnd_cuda_info g;
		struct tnd_peer_info p;
	} fin;
	struct exchange x = { .op = op, .pass_fd = -1, .reply = &fin, .item = collect_item,
			      .ctx = &k };
	int r = exchange(c, &x, fn);
	if (!r && k.err)
		r = tn__error(k.err, "%s: out of memory", fn);
	if (r) {
		free(k.items);
		return r;
	}
	*ret = k.items;
	*ret_count = k.n;
	return 0;
}

static int info_cmp(const void *x, const void *y)
{
	return strcmp(((const tn_tensord_arena_info *)x)->name,
		      ((const tn_tensord_arena_info *)y)->name);
}

TN_EXPORT int tn_tensord_arena_list(tn_tensord *c, tn_tensord_arena_info **ret, size_t *n)
{
	int r = list(c, TND_OP_ARENA_LIST, sizeof(tn_tensord_arena_info), convert_info,
		     (void **)ret, n, "tn_tensord_arena_list");
	/* The daemon lists in the order of its table, which a restart changes. */
	if (!r && *n > 1)
		qsort(*ret, *n, sizeof(**ret), info_cmp);
	return r;
}

TN_EXPORT int tn_tensord_clients(tn_tensord *c, tn_tensord_client **ret, size_t *n)
{
	return list(c, TND_OP_CLIENTS, sizeof(tn_tensord_client), convert_client, (void **)ret, n,
		    "tn_tensord_clients");
}

static void convert_peer(void *dst, const void *wire)
{
	const struct tnd_peer_info *w = wire;
	tn_tensord_peer *o = dst;
	memset(o, 0, sizeof(*o));
	memcpy(o->address, w->address, sizeof(o->address) - 1);
	memcpy(o->lanes, w->lanes, sizeof(o->lanes) - 1);
	memcpy(o->error, w->error, sizeof(o->error) - 1);
	o->state = w->state;
	o->flags = w->flags;
	o->since = w->since;
	o->rtt_us = w->rtt_us;
	o->failures = w->failures;
}

TN_EXPORT int tn_tensord_peer_list(tn_tensord *c, tn_tensord_peer **ret, size_t *n)
{
	return list(c, TND_OP_PEER_LIST, sizeof(tn_tensord_peer), convert_peer, (void **)ret, n,
		    "tn_tensord_peer_list");
}

TN_EXPORT int tn_tensord_peer_add(tn_tensord *c, const char *address)
{
	static const char fn[] = "tn_tensord_peer_add";
	CHECK_CONN(c, fn);
	struct tnd_peer_ref m = { { 0 } };
	if (!address || !address[0] || strlen(address) >= sizeof(m.address))
		return tn__error(TN_EINVAL, "%s: the address must be HOST:PORT", fn);
	strcpy(m.address, address);
	struct exchange x = { .op = TND_OP_PEER_ADD, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	return exchange(c, &x, fn);
}

static int copy_field(char *dst, size_t cap, const char *src, const char *what, const char *fn)
{
	if (!src || !src[0] || strlen(src) >= cap)
		return tn__error(TN_EINVAL, "%s: bad %s", fn, what);
	strcpy(dst, src);
	return 0;
}

static int peer_transfer(tn_tensord *c, int op, uint32_t flags, const char *peer,
			 const char *remote_arena, const char *remote_name, const char *arena,
			 const char *name, tn_tensord_pull_report *ret, size_t *ret_count,
			 const char *fn)
{
	struct tnd_pull m;
	memset(&m, 0, sizeof(m));
	int r;
	if ((r = copy_field(m.peer, sizeof(m.peer), peer, "peer address", fn)) ||
	    (r = copy_field(m.remote_arena, sizeof(m.remote_arena), remote_arena,
			    "remote arena name", fn)) ||
	    (r = copy_field(m.remote_name, sizeof(m.remote_name), remote_name,
			    "remote tensor name", fn)) ||
	    (r = copy_field(m.arena, sizeof(m.arena), arena, "arena name", fn)) ||
	    (r = copy_field(m.name, sizeof(m.name), name, "tensor name", fn)))
		return r;
	struct tnd_pull_reply rep;
	memset(&rep, 0, sizeof(rep));
	m.flags = flags;
	struct exchange x = { .op = op, .body = &m, .body_len = sizeof(m), .pass_fd = -1,
			      .reply = &rep };
	if ((r = exchange(c, &x, fn)))
		return r;
	if (ret) {
		memset(ret, 0, sizeof(*ret));
		ret->bytes = rep.bytes;
		ret->elapsed_ns = rep.elapsed_ns;
		ret->method = rep.method;
		memcpy(ret->lanes, rep.lanes, sizeof(ret->lanes) - 1);
	}
	if (ret_count)
		*ret_count = rep.count;
	return 0;
}

TN_EXPORT int tn_tensord_pull(tn_tensord *c, const char *peer, const char *remote_arena,
			      const char *remote_name, const char *arena, const char *name,
			      tn_tensord_pull_report *ret)
{
	static const char fn[] = "tn_tensord_pull";
	CHECK_CONN(c, fn);
	return peer_transfer(c, TND_OP_PULL, 0, peer, remote_arena, remote_name, arena, name, ret,
			     NULL, fn);
}

TN_EXPORT int tn_tensord_pull_prefix(tn_tensord *c, const char *peer, const char *remote_arena,
				     const char *remote_prefix, const char *arena,
				     const char *prefix, tn_tensord_pull_report *ret,
				     size_t *ret_count)
{
	static const char fn[] = "tn_tensord_pull_prefix";
	CHECK_CONN(c, fn);
	if (ret_count)
		*ret_count = 0;
	return peer_transfer(c, TND_OP_PULL, TND_PULL_PREFIX, peer, remote_arena, remote_prefix,
			     arena, prefix, ret, ret_count, fn);
}

TN_EXPORT int tn_tensord_push(tn_tensord *c, const char *arena, const char *name,
			      const char *peer, const char *remote_arena, const char *remote_name,
			      tn_tensord_pull_report *ret)
{
	static const char fn[] = "tn_tensord_push";
	CHECK_CONN(c, fn);
	return peer_transfer(c, TND_OP_PUSH, 0, peer, remote_arena, remote_name, arena, name, ret,
			     NULL, fn);
}

TN_EXPORT const char *tn_tensord_peer_state_name(unsigned state)
{
	static const char *const names[] = { "down", "connecting", "authenticating", "ready" };
	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

/* The pieces of the metrics' text, appended as they come. */
struct text_acc {
	char *buf;
	size_t len;
	int err;
};

static int text_piece(void *ctx, const void *body)
{
	struct text_acc *t = ctx;
	const struct tnd_metrics_chunk *w = body;
	if (w->len > TND_METRICS_CHUNK) {
		t->err = TN_EPROTO;
		return TN_EPROTO;
	}
	char *nb = realloc(t->buf, t->len + w->len + 1);
	if (!nb) {
		t->err = TN_ENOMEM;
		return TN_ENOMEM;
	}
	memcpy(nb + t->len, w->text, w->len);
	t->buf = nb;
	t->len += w->len;
	t->buf[t->len] = 0;
	return 0;
}

TN_EXPORT int tn_tensord_metrics(tn_tensord *c, char **ret_text, size_t *ret_len)
{
	static const char fn[] = "tn_tensord_metrics";
	CHECK_CONN(c, fn);
	if (!ret_text)
		return tn__error(TN_EINVAL, "%s: NULL ret_text", fn);
	struct text_acc t = { 0 };
	struct tnd_metrics_chunk *fin = malloc(sizeof(*fin));
	if (!fin)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	struct exchange x = { .op = TND_OP_METRICS, .pass_fd = -1, .reply = fin,
			      .item = text_piece, .ctx = &t };
	int r = exchange(c, &x, fn);
	free(fin);
	if (!r && t.err)
		r = tn__error(t.err, "%s: %s", fn, t.err == TN_ENOMEM ? "out of memory"
								      : "a piece longer than a message");
	if (!r && !t.buf && !(t.buf = calloc(1, 1)))
		r = tn__error(TN_ENOMEM, "%s: out of memory", fn);
	if (r) {
		free(t.buf);
		return r;
	}
	*ret_text = t.buf;
	if (ret_len)
		*ret_len = t.len;
	return 0;
}

static int arena_ref_call(tn_tensord *c, unsigned op, const char *name, bool empty_ok,
			  uint32_t flags, void *reply, const char *fn)
{
	CHECK_CONN(c, fn);
	struct tnd_arena_ref m = { .flags = flags };
	int r;
	if (!(empty_ok && (!name || !name[0])) && (r = copy_name(m.name, name, fn)))
		return r;
	struct exchange x = { .op = op, .body = &m, .body_len = sizeof(m), .pass_fd = -1,
			      .reply = reply };
	return exchange(c, &x, fn);
}

TN_EXPORT int tn_tensord_arena_stat(tn_tensord *c, const char *name, tn_tensord_arena_info *ret)
{
	static const char fn[] = "tn_tensord_arena_stat";
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_info", fn);
	struct tnd_arena_info w;
	int r = arena_ref_call(c, TND_OP_ARENA_STAT, name, false, 0, &w, fn);
	if (!r)
		info_from_wire(ret, &w);
	return r;
}

TN_EXPORT int tn_tensord_arena_destroy(tn_tensord *c, const char *name, unsigned flags)
{
	static const char fn[] = "tn_tensord_arena_destroy";
	if (flags & ~TN_TENSORD_FORCE)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	return arena_ref_call(c, TND_OP_ARENA_DESTROY, name, false,
			      flags & TN_TENSORD_FORCE ? TND_DESTROY_FORCE : 0, NULL, fn);
}

TN_EXPORT int tn_tensord_arena_grant(tn_tensord *c, const char *name, const tn_tensord_grant *g)
{
	static const char fn[] = "tn_tensord_arena_grant";
	CHECK_CONN(c, fn);
	if (!g)
		return tn__error(TN_EINVAL, "%s: NULL grant", fn);
	if (g->kind != TN_TENSORD_GRANT_USER && g->kind != TN_TENSORD_GRANT_GROUP)
		return tn__error(TN_EINVAL, "%s: bad grant kind %d", fn, g->kind);
	if ((unsigned)g->access > TN_TENSORD_ACCESS_READ_WRITE)
		return tn__error(TN_EINVAL, "%s: bad access %d", fn, g->access);
	struct tnd_arena_grant m = { .grant = { .kind = g->kind, .id = g->id,
						.access = g->access } };
	int r;
	if ((r = copy_name(m.name, name, fn)))
		return r;
	struct exchange x = { .op = TND_OP_ARENA_GRANT, .body = &m, .body_len = sizeof(m),
			      .pass_fd = -1 };
	return exchange(c, &x, fn);
}

TN_EXPORT int tn_tensord_fsck(tn_tensord *c, const char *name, unsigned flags,
			      tn_arena_fsck_report *ret)
{
	static const char fn[] = "tn_tensord_fsck";
	if (flags & ~TN_ARENA_FSCK_REPAIR)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	struct tnd_fsck_reply w;
	int r = arena_ref_call(c, TND_OP_FSCK, name, false, flags, &w, fn);
	if (r)
		return r;
	if (w.problems > w.repaired)
		r = tn__error(TN_EIO, "%s: arena %s: %" PRIu64 " problems, %" PRIu64 " repaired; "
			      "first: %.200s", fn, name, w.problems, w.repaired, w.first_problem);
	if (!ret)
		return r;
	memset(ret, 0, sizeof(*ret));
	ret->problems = w.problems;
	ret->repaired = w.repaired;
	ret->blocks = w.blocks;
	ret->free_blocks = w.free_blocks;
	ret->orphan_blocks = w.orphan_blocks;
	ret->dead_holds = w.dead_holds;
	ret->dead_clients = w.dead_clients;
	ret->bad_names = w.bad_names;
	snprintf(ret->first_problem, sizeof(ret->first_problem), "%s", w.first_problem);
	return r;
}

TN_EXPORT int tn_tensord_verify(tn_tensord *c, const char *name, tn_tensord_verify_report *ret)
{
	static const char fn[] = "tn_tensord_verify";
	struct tnd_verify_reply w;
	int r = arena_ref_call(c, TND_OP_VERIFY, name, false, 0, &w, fn);
	if (r)
		return r;
	if (!memchr(w.first_changed, 0, sizeof(w.first_changed)) || w.checked > w.sealed ||
	    w.changed > w.checked)
		return tn__error(TN_EPROTO, "%s: tensord's reply does not add up", fn);
	if (w.changed)
		r = tn__error(TN_EIO, "%s: arena %s: the bytes of %" PRIu64 " of %" PRIu64
			      " sealed tensors changed since they were sealed; first: \"%.200s\"",
			      fn, name, w.changed, w.sealed, w.first_changed);
	if (!ret)
		return r;
	memset(ret, 0, sizeof(*ret));
	ret->sealed = w.sealed;
	ret->checked = w.checked;
	ret->changed = w.changed;
	ret->digested = w.digested;
	ret->restored = w.restored;
	snprintf(ret->first_changed, sizeof(ret->first_changed), "%s", w.first_changed);
	return r;
}

TN_EXPORT int tn_tensord_gc(tn_tensord *c, const char *name, uint64_t *ret_slots,
			    uint64_t *ret_bytes)
{
	struct tnd_gc_reply w;
	int r = arena_ref_call(c, TND_OP_GC, name, true, 0, &w, "tn_tensord_gc");
	if (r)
		return r;
	if (ret_slots)
		*ret_slots = w.reclaimed_slots;
	if (ret_bytes)
		*ret_bytes = w.freed_bytes;
	return 0;
}

TN_EXPORT int tn_tensord_shutdown(tn_tensord *c)
{
	static const char fn[] = "tn_tensord_shutdown";
	CHECK_CONN(c, fn);
	struct exchange x = { .op = TND_OP_SHUTDOWN, .pass_fd = -1 };
	return exchange(c, &x, fn);
}

static int transfer(tn_tensord *c, unsigned op, const char *name, int fd,
		    enum tn_tensord_format format, const char *prefix, unsigned flags,
		    tn_tensord_progress_fn progress, void *ctx, tn_tensord_transfer *ret,
		    const char *fn)
{
	CHECK_CONN(c, fn);
	struct tnd_transfer m = { .format = (uint32_t)format };
	int r;
	if ((r = copy_name(m.name, name, fn)))
		return r;
	if (fd < 0)
		return tn__error(TN_EBADF, "%s: negative file descriptor", fn);
	if ((unsigned)format > TN_TENSORD_FORMAT_NPY)
		return tn__error(TN_EINVAL, "%s: bad format %d", fn, format);
	if (op == TND_OP_LOAD &&
	    (flags & ~(TN_TENSORD_SEAL | TN_TENSORD_REPLACE | TN_TENSORD_EVICTABLE)))
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (op == TND_OP_SAVE && flags)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (prefix) {
		if (strlen(prefix) > TN_ARENA_NAME_MAX)
			return tn__error(TN_ENAMETOOLONG, "%s: prefix longer than %d bytes", fn,
					 TN_ARENA_NAME_MAX);
		strcpy(m.prefix, prefix);
	}
	if (op == TND_OP_LOAD && format == TN_TENSORD_FORMAT_NPY && !m.prefix[0])
		return tn__error(TN_EINVAL, "%s: a .npy file holds one unnamed array: the prefix is "
				 "its name and cannot be empty", fn);
	if (op == TND_OP_SAVE && format == TN_TENSORD_FORMAT_AUTO)
		m.format = TND_FORMAT_SAFETENSORS;
	m.flags = (flags & TN_TENSORD_SEAL ? TND_XFER_SEAL : 0) |
		  (flags & TN_TENSORD_REPLACE ? TND_XFER_REPLACE : 0) |
		  (flags & TN_TENSORD_EVICTABLE ? TND_XFER_EVICTABLE : 0);
	struct tnd_transfer_reply w;
	struct exchange x = { .op = op, .body = &m, .body_len = sizeof(m), .pass_fd = fd,
			      .reply = &w, .progress = progress, .ctx = ctx };
	if ((r = exchange(c, &x, fn)))
		return r;
	if (ret) {
		ret->tensors = w.tensors;
		ret->bytes = w.bytes;
		ret->file_bytes = w.file_bytes;
		ret->elapsed_ns = w.elapsed_ns;
	}
	return 0;
}

TN_EXPORT int tn_tensord_load(tn_tensord *c, const char *name, int fd,
			      enum tn_tensord_format format, const char *prefix, unsigned flags,
			      tn_tensord_progress_fn progress, void *ctx, tn_tensord_transfer *ret)
{
	return transfer(c, TND_OP_LOAD, name, fd, format, prefix, flags, progress, ctx, ret,
			"tn_tensord_load");
}

TN_EXPORT int tn_tensord_save(tn_tensord *c, const char *name, int fd,
			      enum tn_tensord_format format, const char *prefix, unsigned flags,
			      tn_tensord_progress_fn progress, void *ctx, tn_tensord_transfer *ret)
{
	return transfer(c, TND_OP_SAVE, name, fd, format, prefix, flags, progress, ctx, ret,
			"tn_tensord_save");
}

/* ---- CUDA exports ---------------------------------------------------------------------------- */

tn_tensord *tn__tensord_ref(tn_tensord *c)
{
	return conn_ref(c);
}

static int cuda_ref_call(tn_tensord *c, unsigned op, const char *name, uint64_t id,
			 struct tnd_cuda_info *ret, const char *fn)
{
	CHECK_CONN(c, fn);
	struct tnd_cuda_ref m = { .id = id };
	if (!name || !name[0] || strlen(name) > TN_ARENA_NAME_MAX)
		return tn__error(name && name[0] ? TN_ENAMETOOLONG : TN_EINVAL,
				 "%s: the name must have 1 to %d bytes", fn, TN_ARENA_NAME_MAX);
	strcpy(m.name, name);
	struct exchange x = { .op = op, .body = &m, .body_len = sizeof(m), .pass_fd = -1,
			      .reply = ret };
	return exchange(c, &x, fn);
}

int tn__tensord_cuda_export(tn_tensord *c, const struct tnd_cuda_export *rec,
			    struct tnd_cuda_info *ret)
{
	static const char fn[] = "tn_cuda_ipc_export";
	CHECK_CONN(c, fn);
	const char *why = tnd_cuda_export_problem(rec);
	if (why)
		return tn__error(TN_EINVAL, "%s: %s", fn, why);
	struct exchange x = { .op = TND_OP_CUDA_EXPORT, .body = rec, .body_len = sizeof(*rec),
			      .pass_fd = -1, .reply = ret };
	return exchange(c, &x, fn);
}

int tn__tensord_cuda_import(tn_tensord *c, const char *name, struct tnd_cuda_info *ret)
{
	return cuda_ref_call(c, TND_OP_CUDA_IMPORT, name, 0, ret, "tn_cuda_ipc_import");
}

int tn__tensord_cuda_release(tn_tensord *c, const char *name, uint64_t id)
{
	return cuda_ref_call(c, TND_OP_CUDA_RELEASE, name, id, NULL, "tn_cuda_ipc_release");
}

int tn__tensord_cuda_unexport(tn_tensord *c, const char *name, uint64_t id,
			      struct tnd_cuda_info *ret)
{
	return cuda_ref_call(c, TND_OP_CUDA_UNEXPORT, name, id, ret, "tn_cuda_ipc_unexport");
}

int tn__tensord_cuda_stat(tn_tensord *c, const char *name, uint64_t id, struct tnd_cuda_info *ret)
{
	return cuda_ref_call(c, TND_OP_CUDA_STAT, name, id, ret, "tn_tensord_cuda_stat");
}

static void cuda_info_from_wire(void *dst, const void *wire)
{
	const struct tnd_cuda_info *w = wire;
	tn_tensord_cuda_export *o = dst;
	memset(o, 0, sizeof(*o));
	memcpy(o->name, w->rec.name, sizeof(o->name));
	o->name[TN_ARENA_NAME_MAX] = 0;
	o->id = w->id;
	o->owner_pid = w->owner_pid;
	o->owner_uid = w->owner_uid;
	o->owner_gid = w->owner_gid;
	o->holders = w->holders;
	o->importers = w->importers;
	o->state = w->state;
	o->created = w->created;
	o->mode = w->rec.mode;
	o->storage_bytes = w->rec.storage_bytes;
	o->dtype = (enum tn_dtype)w->rec.dtype;
	o->ndim = (int)(w->rec.ndim > TN_ARENA_MAX_DIMS ? TN_ARENA_MAX_DIMS : w->rec.ndim);
	memcpy(o->sizes, w->rec.sizes, sizeof(o->sizes));
	memcpy(o->device_uuid, w->rec.device_uuid, sizeof(o->device_uuid));
	o->has_event = (w->rec.flags & TND_CUDA_EVENT) != 0;
}

static int cuda_export_cmp(const void *x, const void *y)
{
	const tn_tensord_cuda_export *a = x, *b = y;
	int d = strcmp(a->name, b->name);
	return d ? d : (a->id > b->id) - (a->id < b->id);
}

TN_EXPORT int tn_tensord_cuda_list(tn_tensord *c, tn_tensord_cuda_export **ret, size_t *n)
{
	int r = list(c, TND_OP_CUDA_LIST, sizeof(tn_tensord_cuda_export), cuda_info_from_wire,
		     (void **)ret, n, "tn_tensord_cuda_list");
	if (!r && *n > 1)
		qsort(*ret, *n, sizeof(**ret), cuda_export_cmp);
	return r;
}

TN_EXPORT int tn_tensord_cuda_stat(tn_tensord *c, const char *name, tn_tensord_cuda_export *ret)
{
	static const char fn[] = "tn_tensord_cuda_stat";
	struct tnd_cuda_info w;
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_export", fn);
	int r = cuda_ref_call(c, TND_OP_CUDA_STAT, name, 0, &w, fn);
	if (!r)
		cuda_info_from_wire(ret, &w);
	return r;
}
