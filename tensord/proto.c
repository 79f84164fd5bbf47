// SPDX-License-Identifier: MIT
/*
 * Validation of tensord wire messages (proto.h), shared by the daemon and the client library.
 * Pure functions: a message is checked field by field before anything reads it, and the
 * checks are what the protocol fuzz target (tests/fuzz/fuzz_proto.c) exercises.
 */
#include <string.h>

#include "internal.h"
#include "proto.h"
#include "../shm/shm.h" /* tn__extent_problem */

/* Body sizes by operation. */
static const struct {
	const char *name;
	int64_t req, rep;
} ops[TND_OP_MAX_] = {
#define TND_X_(nm, value, reqt, rept)                                                            \
	[value] = { #nm, (int64_t)TND_BODY_SIZE(reqt), (int64_t)TND_BODY_SIZE(rept) },
	TND_OP_LIST(TND_X_)
#undef TND_X_
};

_Static_assert(sizeof(struct tnd_hdr) == 32, "the header is 32 bytes");
_Static_assert(sizeof(struct tnd_arena_info) + sizeof(struct tnd_hdr) <= TND_MSG_MAX,
	       "an arena record fits a message");
_Static_assert(sizeof(struct tnd_hold_reply) + sizeof(struct tnd_hdr) <= TND_MSG_MAX,
	       "a hold reply fits a message");
_Static_assert(sizeof(struct tnd_transfer) + sizeof(struct tnd_hdr) <= TND_MSG_MAX,
	       "a transfer request fits a message");
_Static_assert(sizeof(struct tnd_cuda_info) + sizeof(struct tnd_hdr) <= TND_MSG_MAX,
	       "a CUDA export record fits a message");

static bool op_known(unsigned op)
{
	return op > 0 && op < TND_OP_MAX_ && ops[op].name;
}

int64_t tnd_request_size(unsigned op)
{
	return op_known(op) ? ops[op].req : -1;
}

int64_t tnd_reply_size(unsigned op)
{
	return op_known(op) ? ops[op].rep : -1;
}

const char *tnd_op_name(unsigned op)
{
	return op_known(op) ? ops[op].name : "?";
}

void tnd_init_hdr(struct tnd_hdr *h, unsigned op, size_t body_len, uint32_t seq, int32_t status,
		  uint32_t flags)
{
	memset(h, 0, sizeof(*h));
	h->magic = TND_MAGIC;
	h->version = TND_VERSION;
	h->op = (uint16_t)op;
	h->len = (uint32_t)(sizeof(*h) + body_len);
	h->seq = seq;
	h->status = status;
	h->flags = flags;
}

/* A fixed-size string field: NUL-terminated within its array. */
static bool str_ok(const char *s, size_t size)
{
	return memchr(s, 0, size) != NULL;
}

bool tnd_name_ok(const char *name)
{
	if (!str_ok(name, TND_NAME_SIZE))
		return false;
	size_t n = strlen(name);
	if (n == 0 || n > TND_NAME_MAX || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Tensor names or prefixes: NUL-terminated, no control characters (the arena checks the
 * rest when the name is used). */
static bool tensor_str_ok(const char *s)
{
	if (!str_ok(s, TND_PREFIX_SIZE) || strlen(s) > TN_ARENA_NAME_MAX)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

#define BAD(...) tn__error(TN_EPROTO, __VA_ARGS__)

const char *tnd_cuda_export_problem(const struct tnd_cuda_export *m)
{
	if (!tensor_str_ok(m->name) || !m->name[0])
		return "bad name";
	if (m->flags & ~TND_CUDA_EXPORT_ALL)
		return "unknown flags";
	if (m->mode & ~0077u)
		return "mode has bits beyond group and others";
	if (!(m->flags & TND_CUDA_EVENT))
		for (size_t i = 0; i < sizeof(m->event_handle); i++)
			if (m->event_handle[i])
				return "an event handle without TND_CUDA_EVENT";
	if (m->alloc_bytes == 0 || m->offset > m->alloc_bytes ||
	    m->storage_bytes > m->alloc_bytes - m->offset)
		return "storage outside its allocation";
	const char *why = tn__extent_problem(m->dtype, m->ndim, m->sizes, m->strides,
					     m->storage_offset, m->storage_bytes);
	if (why)
		return why; /* "dtype", "ndim", "extent past the block", ... */
	for (uint32_t d = m->ndim; d < TN_ARENA_MAX_DIMS; d++)
		if (m->sizes[d] || m->strides[d])
			return "sizes or strides past ndim";
	return NULL;
}

static int check_hdr(const struct tnd_hdr *h, size_t len, const char *what)
{
	if (len < sizeof(*h))
		return BAD("%s of %zu bytes is shorter than a header (%zu)", what, len,
			   sizeof(*h));
	if (h->magic != TND_MAGIC)
		return BAD("%s: bad magic 0x%08x", what, h->magic);
	if (h->len != len)
		return BAD("%s: header says %u bytes, %zu arrived", what, h->len, len);
	if (len > TND_MSG_MAX)
		return BAD("%s of %zu bytes exceeds the limit of %d", what, len, TND_MSG_MAX);
	if (!op_known(h->op))
		return BAD("%s: unknown operation %u", what, h->op);
	if ((h->version < TND_VERSION_MIN || h->version > TND_VERSION) && h->op != TND_OP_HELLO)
		return BAD("%s: version %u, this side speaks %d to %d", what, h->version,
			   TND_VERSION_MIN, TND_VERSION);
	if (h->op >= TND_OP_CUDA_EXPORT && h->version < 2)
		return BAD("%s: %s needs protocol version 2, the message has %u", what,
			   tnd_op_name(h->op), h->version);
	if (h->op >= TND_OP_WAITING && h->version < 4)
		return BAD("%s: %s needs protocol version 4, the message has %u", what,
			   tnd_op_name(h->op), h->version);
	if (h->op >= TND_OP_PUSH && h->version < 7)
		return BAD("%s: %s needs protocol version 7, the message has %u", what,
			   tnd_op_name(h->op), h->version);
	if (h->flags & ~TND_F_ALL)
		return BAD("%s: unknown flags 0x%x", what, h->flags);
	if (h->reserved)
		return BAD("%s: reserved field is not zero", what);
	return 0;
}

static int check_body(const struct tnd_hdr *h, size_t len, int64_t want, const char *what)
{
	if ((int64_t)(len - sizeof(*h)) != want)
		return BAD("%s %s: body of %zu bytes, expected %lld", what, tnd_op_name(h->op),
			   len - sizeof(*h), (long long)want);
	return 0;
}

static int check_name(const char *name, bool empty_ok, const char *op)
{
	if (!str_ok(name, TND_NAME_SIZE))
		return BAD("%s: arena name is not terminated", op);
	if (empty_ok && !name[0])
		return 0;
	if (!tnd_name_ok(name))
		return BAD("%s: bad arena name \"%.63s\"", op, name);
	return 0;
}

int tnd_check_request(const void *msg, size_t len, bool has_fd)
{
	const struct tnd_hdr *h = msg;
	int r;
	if ((r = check_hdr(h, len, "request")))
		return r;
	if (h->status)
		return BAD("request %s: status field is not zero", tnd_op_name(h->op));
	if (h->flags & (TND_F_MORE | TND_F_PROGRESS))
		return BAD("request %s: reply flags set", tnd_op_name(h->op));
	bool wants_fd = h->op == TND_OP_LOAD || h->op == TND_OP_SAVE;
	if (!!(h->flags & TND_F_FD) != has_fd || has_fd != wants_fd)
		return BAD("request %s: %s", tnd_op_name(h->op),
			   wants_fd ? "needs a file descriptor" : "unexpected file descriptor");
	if ((r = check_body(h, len, ops[h->op].req, "request")))
		return r;
	const void *b = h + 1;
	const char *op = tnd_op_name(h->op);
	switch (h->op) {
	case TND_OP_HELLO: {
		const struct tnd_hello *m = b;
		if (m->min_version > m->max_version || m->min_version == 0)
			return BAD("HELLO: bad version range %u..%u", m->min_version,
				   m->max_version);
		if (!str_ok(m->program, sizeof(m->program)))
			return BAD("HELLO: program name is not terminated");
		return 0;
	}
	case TND_OP_ARENA_CREATE: {
		const struct tnd_arena_create *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->flags & ~TND_CREATE_ALL)
			return BAD("ARENA_CREATE: unknown flags 0x%x", m->flags);
		if (m->numa_policy > TN_NUMA_LOCAL)
			return BAD("ARENA_CREATE: bad NUMA policy %u", m->numa_policy);
		if (m->mode & ~0077u)
			return BAD("ARENA_CREATE: mode 0%o has bits beyond group and others",
				   m->mode);
		return 0;
	}
	case TND_OP_ARENA_OPEN: {
		const struct tnd_arena_open *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->flags & ~TND_OPEN_ALL || m->pad)
			return BAD("ARENA_OPEN: unknown flags 0x%x", m->flags);
		return 0;
	}
	case TND_OP_REATTACH: {
		const struct tnd_reattach *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->slot >= TN_ARENA_MAX_CLIENTS)
			return BAD("REATTACH: slot %u out of range", m->slot);
		if (m->flags & ~TND_OPEN_ALL)
			return BAD("REATTACH: unknown flags 0x%x", m->flags);
		return 0;
	}
	case TND_OP_SEALED: {
		const struct tnd_sealed *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (!tensor_str_ok(m->tensor) || !m->tensor[0])
			return BAD("SEALED: bad tensor name");
		return 0;
	}
	case TND_OP_ARENA_STAT:
	case TND_OP_ARENA_DESTROY:
	case TND_OP_VERIFY:
	case TND_OP_FSCK:
	case TND_OP_GC: {
		const struct tnd_arena_ref *m = b;
		if ((r = check_name(m->name, h->op == TND_OP_GC, op)))
			return r;
		unsigned allowed = h->op == TND_OP_ARENA_DESTROY ? TND_DESTROY_FORCE
				   : h->op == TND_OP_FSCK	  ? TN_ARENA_FSCK_REPAIR
								  : 0;
		if (m->flags & ~allowed || m->pad)
			return BAD("%s: unknown flags 0x%x", op, m->flags);
		return 0;
	}
	case TND_OP_ARENA_GRANT: {
		const struct tnd_arena_grant *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->grant.kind != TND_GRANT_USER && m->grant.kind != TND_GRANT_GROUP)
			return BAD("ARENA_GRANT: bad kind %u", m->grant.kind);
		if (m->grant.access > TND_ACCESS_READ_WRITE || m->grant.pad)
			return BAD("ARENA_GRANT: bad access %u", m->grant.access);
		if (m->grant.id == UINT32_MAX)
			return BAD("ARENA_GRANT: id -1 is not a user or group");
		return 0;
	}
	case TND_OP_LOAD:
	case TND_OP_SAVE: {
		const struct tnd_transfer *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (!tensor_str_ok(m->prefix))
			return BAD("%s: bad tensor name or prefix", op);
		if (m->format > TND_FORMAT_NPY ||
		    (h->op == TND_OP_SAVE && m->format == TND_FORMAT_AUTO))
			return BAD("%s: bad format %u", op, m->format);
		if (m->flags & ~(h->op == TND_OP_LOAD ? TND_XFER_ALL : 0))
			return BAD("%s: unknown flags 0x%x", op, m->flags);
		if (m->format == TND_FORMAT_NPY && h->op == TND_OP_LOAD && !m->prefix[0])
			return BAD("LOAD: a .npy file needs a tensor name");
		return 0;
	}
	case TND_OP_HOLD: {
		const struct tnd_hold *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (!tensor_str_ok(m->tensor))
			return BAD("HOLD: bad tensor name");
		if (m->slot >= TN_ARENA_MAX_CLIENTS || m->pad)
			return BAD("HOLD: slot %u out of range", m->slot);
		return 0;
	}
	case TND_OP_RELEASE: {
		const struct tnd_release *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->block == 0 || m->block % 64)
			return BAD("RELEASE: bad block offset %llu", (unsigned long long)m->block);
		if (m->slot >= TN_ARENA_MAX_CLIENTS || m->pad)
			return BAD("RELEASE: slot %u out of range", m->slot);
		return 0;
	}
	case TND_OP_WAITING: {
		const struct tnd_waiting *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->slot >= TN_ARENA_MAX_CLIENTS)
			return BAD("WAITING: slot %u out of range", m->slot);
		if (m->on > 1)
			return BAD("WAITING: bad state %u", m->on);
		return 0;
	}
	case TND_OP_DETACH: {
		const struct tnd_detach *m = b;
		if ((r = check_name(m->name, false, op)))
			return r;
		if (m->slot >= TN_ARENA_MAX_CLIENTS || m->pad)
			return BAD("DETACH: slot %u out of range", m->slot);
		return 0;
	}
	case TND_OP_CUDA_EXPORT: {
		const char *why = tnd_cuda_export_problem(b);
		return why ? BAD("CUDA_EXPORT: %s", why) : 0;
	}
	case TND_OP_CUDA_IMPORT:
	case TND_OP_CUDA_RELEASE:
	case TND_OP_CUDA_UNEXPORT:
	case TND_OP_CUDA_STAT: {
		const struct tnd_cuda_ref *m = b;
		if (!tensor_str_ok(m->name) || !m->name[0])
			return BAD("%s: bad name", op);
		if (m->id == 0 && (h->op == TND_OP_CUDA_RELEASE || h->op == TND_OP_CUDA_UNEXPORT))
			return BAD("%s: no export id", op);
		return 0;
	}
	case TND_OP_PULL:
	case TND_OP_PUSH: {
		const struct tnd_pull *m = b;
		if (!str_ok(m->peer, sizeof(m->peer)) || !m->peer[0])
			return BAD("%s: bad peer", op);
		if (!str_ok(m->remote_arena, sizeof(m->remote_arena)) ||
		    !str_ok(m->arena, sizeof(m->arena)))
			return BAD("%s: arena name is not terminated", op);
		if (!tensor_str_ok(m->remote_name) || !m->remote_name[0] ||
		    !tensor_str_ok(m->name) || !m->name[0])
			return BAD("%s: bad tensor name", op);
		if ((m->flags & ~(h->op == TND_OP_PULL ? TND_PULL_PREFIX : 0u)) || m->pad)
			return BAD("%s: unknown flags 0x%x", op, m->flags);
		return 0;
	}
	case TND_OP_PEER_ADD: {
		const struct tnd_peer_ref *m = b;
		if (!str_ok(m->address, sizeof(m->address)))
			return BAD("PEER_ADD: address is not terminated");
		return 0;
	}
	default:
		return 0; /* empty bodies: nothing more to check */
	}
}

int tnd_check_reply(const void *msg, size_t len, unsigned op, uint32_t seq, bool has_fd)
{
	const struct tnd_hdr *h = msg;
	int r;
	if ((r = check_hdr(h, len, "reply")))
		return r;
	if (h->op != op)
		return BAD("reply for %s to a %s request", tnd_op_name(h->op), tnd_op_name(op));
	if (h->seq != seq)
		return BAD("reply %u to request %u", h->seq, seq);
	if (!!(h->flags & TND_F_FD) != has_fd)
		return BAD("reply %s: descriptor flag and ancillary data disagree", tnd_op_name(op));
	if (h->status > 0)
		return BAD("reply %s: positive status %d", tnd_op_name(op), h->status);
	if (h->status < 0) {
		if (h->flags & (TND_F_MORE | TND_F_PROGRESS | TND_F_FD))
			return BAD("error reply %s with flags 0x%x", tnd_op_name(op), h->flags);
		if ((r = check_body(h, len, sizeof(struct tnd_error), "error reply")))
			return r;
		const struct tnd_error *e = (const void *)(h + 1);
		if (!str_ok(e->message, sizeof(e->message)))
			return BAD("error reply %s: message is not terminated", tnd_op_name(op));
		return 0;
	}
	if (h->flags & TND_F_PROGRESS) {
		if (has_fd || (h->flags & TND_F_MORE))
			return BAD("progress reply with flags 0x%x", h->flags);
		if (op != TND_OP_LOAD && op != TND_OP_SAVE)
			return BAD("progress reply to %s", tnd_op_name(op));
		return check_body(h, len, sizeof(struct tnd_progress), "progress reply");
	}
	if ((h->flags & TND_F_MORE) && op != TND_OP_ARENA_LIST && op != TND_OP_CLIENTS &&
	    op != TND_OP_CUDA_LIST && op != TND_OP_METRICS && op != TND_OP_PEER_LIST)
		return BAD("list item in reply to %s", tnd_op_name(op));
	if (has_fd != (op == TND_OP_ARENA_OPEN))
		return BAD("reply %s: %s", tnd_op_name(op),
			   has_fd ? "unexpected file descriptor" : "no file descriptor");
	return check_body(h, len, ops[op].rep, "reply");
}
