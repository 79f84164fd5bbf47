/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the tensord wire protocol's validation (tensord/proto.c, make fuzz):
 * tnd_check_request, which the daemon runs on every message a client sends, and
 * tnd_check_reply, which the client library runs on every reply.
 *
 * The first input byte chooses how the rest is used: bit 0, a descriptor came with it; bit 1,
 * the rest is a whole message (raw) or the body of a message whose header is made well-formed
 * here (framed: the operation from bits 3-7, so that every operation's body checks are
 * reached); bit 2, a framed reply carries an error status. Each message is checked in an
 * allocation of its exact size, so ASan sees a read past it.
 *
 * A refusal must be TN_EPROTO with a message. What is accepted must be what the protocol
 * allows: the length the header says and the operation's exact body size, within
 * TND_MSG_MAX, known flags, a descriptor exactly with LOAD and SAVE requests and ARENA_OPEN
 * replies, valid arena names, terminated strings.
 *
 * The seeds in corpus/proto are one framed, valid request body per operation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor.h>
#include "proto.h"

#define TARGET "fuzz_proto"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
	fprintf(stderr, "%s: %s\n  last error: %s\n", TARGET, what, tn_last_error());
	abort();
}

static void check_refusal(int r)
{
	if (r != TN_EPROTO)
		fail("refused with a code other than TN_EPROTO");
	if (!tn_last_error()[0])
		fail("refused without a message");
}

static bool terminated(const char *s, size_t n)
{
	return memchr(s, 0, n) != NULL;
}

/* What every accepted message has: its header agrees with what arrived. */
static void check_header(const struct tnd_hdr *h, size_t len)
{
	if (len < sizeof(*h) || len > TND_MSG_MAX || h->len != len)
		fail("accepted a message of the wrong length");
	if (h->magic != TND_MAGIC || h->reserved || (h->flags & ~TND_F_ALL))
		fail("accepted a bad magic, reserved field or flags");
	if (h->op == 0 || h->op >= TND_OP_MAX_)
		fail("accepted an unknown operation");
	if ((h->version < TND_VERSION_MIN || h->version > TND_VERSION) && h->op != TND_OP_HELLO)
		fail("accepted another protocol version");
	if (h->op >= TND_OP_CUDA_EXPORT && h->version < 2)
		fail("accepted a CUDA operation in protocol version 1");
}

static void check_request(const void *msg, size_t len, bool has_fd)
{
	tn_clear_error();
	int r = tnd_check_request(msg, len, has_fd);
	if (r) {
		check_refusal(r);
		return;
	}
	const struct tnd_hdr *h = msg;
	check_header(h, len);
	if (h->status || (h->flags & (TND_F_MORE | TND_F_PROGRESS)))
		fail("accepted a request with a status or reply flags");
	if ((int64_t)(len - sizeof(*h)) != tnd_request_size(h->op))
		fail("accepted a request body of the wrong size");
	bool wants_fd = h->op == TND_OP_LOAD || h->op == TND_OP_SAVE;
	if (has_fd != wants_fd || !!(h->flags & TND_F_FD) != has_fd)
		fail("accepted a descriptor where none belongs, or none where one does");
	const char *body = (const char *)(h + 1);
	switch (h->op) {
	case TND_OP_HELLO: {
		const struct tnd_hello *m = (const void *)body;
		if (!m->min_version || m->min_version > m->max_version ||
		    !terminated(m->program, sizeof(m->program)))
			fail("accepted a bad HELLO");
		break;
	}
	case TND_OP_GC:
		if (body[0] && !tnd_name_ok(body))
			fail("accepted a bad arena name in GC");
		break;
	case TND_OP_ARENA_CREATE:
	case TND_OP_ARENA_OPEN:
	case TND_OP_ARENA_STAT:
	case TND_OP_ARENA_DESTROY:
	case TND_OP_ARENA_GRANT:
	case TND_OP_FSCK:
	case TND_OP_LOAD:
	case TND_OP_SAVE:
	case TND_OP_REATTACH:
	case TND_OP_HOLD:
	case TND_OP_RELEASE:
	case TND_OP_DETACH:
		/* Every body with an arena name has it first. */
		if (!tnd_name_ok(body))
			fail("accepted a bad arena name");
		break;
	default:
		break;
	}
	if (h->op == TND_OP_HOLD) {
		const struct tnd_hold *m = (const void *)body;
		if (!terminated(m->tensor, sizeof(m->tensor)) ||
		    strlen(m->tensor) > TN_ARENA_NAME_MAX)
			fail("accepted a bad tensor name in HOLD");
	}
	if (h->op == TND_OP_CUDA_EXPORT) {
		const struct tnd_cuda_export *m = (const void *)body;
		/* The view lies in the storage, the storage in the allocation. */
		if (!terminated(m->name, sizeof(m->name)) || !m->name[0] || m->ndim > 16 ||
		    m->offset > m->alloc_bytes || m->storage_bytes > m->alloc_bytes - m->offset ||
		    m->storage_offset < 0 || (m->mode & ~0077u) || !tn_dtype_is_valid(m->dtype))
			fail("accepted a bad CUDA export");
		int64_t last = m->storage_offset;
		bool empty = false;
		for (uint32_t d = 0; d < m->ndim; d++) {
			if (m->sizes[d] < 0 || m->strides[d] < 0)
				fail("accepted negative sizes or strides in a CUDA export");
			empty |= m->sizes[d] == 0;
			if (m->sizes[d] > 0)
				last += (m->sizes[d] - 1) * m->strides[d];
		}
		if (!empty && (uint64_t)(last + 1) * tn_dtype_size(m->dtype) > m->storage_bytes)
			fail("accepted a CUDA export whose view leaves its storage");
	}
	if (h->op >= TND_OP_CUDA_IMPORT && h->op <= TND_OP_CUDA_STAT) {
		const struct tnd_cuda_ref *m = (const void *)body;
		if (!terminated(m->name, sizeof(m->name)) || !m->name[0])
			fail("accepted a bad CUDA export name");
	}
	if (h->op == TND_OP_LOAD || h->op == TND_OP_SAVE) {
		const struct tnd_transfer *m = (const void *)body;
		if (!terminated(m->prefix, sizeof(m->prefix)) || m->format > TND_FORMAT_NPY)
			fail("accepted a bad transfer");
	}
	if (h->op == TND_OP_ARENA_GRANT) {
		const struct tnd_arena_grant *m = (const void *)body;
		if ((m->grant.kind != TND_GRANT_USER && m->grant.kind != TND_GRANT_GROUP) ||
		    m->grant.access > TND_ACCESS_READ_WRITE)
			fail("accepted a bad grant");
	}
	if (h->op == TND_OP_REATTACH || h->op == TND_OP_DETACH || h->op == TND_OP_HOLD ||
	    h->op == TND_OP_RELEASE) {
		uint32_t slot =
			h->op == TND_OP_REATTACH ? ((const struct tnd_reattach *)(const void *)body)->slot
			: h->op == TND_OP_DETACH ? ((const struct tnd_detach *)(const void *)body)->slot
			: h->op == TND_OP_HOLD	 ? ((const struct tnd_hold *)(const void *)body)->slot
						 : ((const struct tnd_release *)(const void *)body)->slot;
		if (slot >= TN_ARENA_MAX_CLIENTS)
			fail("accepted a slot out of range");
	}
}

static void check_reply(const void *msg, size_t len, unsigned op, uint32_t seq, bool has_fd)
{
	tn_clear_error();
	int r = tnd_check_reply(msg, len, op, seq, has_fd);
	if (r) {
		check_refusal(r);
		return;
	}
	const struct tnd_hdr *h = msg;
	check_header(h, len);
	if (h->op != op || h->seq != seq || h->status > 0)
		fail("accepted a reply to another request, or a positive status");
	if (!!(h->flags & TND_F_FD) != has_fd)
		fail("accepted a reply whose descriptor flag disagrees");
	size_t body = len - sizeof(*h);
	if (h->status < 0) {
		const struct tnd_error *e = (const void *)(h + 1);
		if (body != sizeof(*e) || !terminated(e->message, sizeof(e->message)) || has_fd)
			fail("accepted a bad error reply");
		return;
	}
	if (h->flags & TND_F_PROGRESS) {
		if ((op != TND_OP_LOAD && op != TND_OP_SAVE) || body != sizeof(struct tnd_progress))
			fail("accepted a bad progress reply");
		return;
	}
	if ((h->flags & TND_F_MORE) && op != TND_OP_ARENA_LIST && op != TND_OP_CLIENTS &&
	    op != TND_OP_CUDA_LIST)
		fail("accepted a list item for an operation without a list");
	if (has_fd != (op == TND_OP_ARENA_OPEN))
		fail("accepted a reply with a descriptor where none belongs, or without one");
	if ((int64_t)body != tnd_reply_size(op))
		fail("accepted a reply body of the wrong size");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned mode = data[0];
	data++;
	size--;
	bool has_fd = mode & 1, raw = mode & 2, error = mode & 4;
	unsigned op = (mode >> 3) % (TND_OP_MAX_ + 1); /* 0 and TND_OP_MAX_ are unknown */
	if (tnd_op_name(op)[0] == '?' && op != 0 && op != TND_OP_MAX_)
		fail("a listed operation has no name");

	if (raw) {
		void *msg = malloc(size ? size : 1);
		if (!msg)
			return 0;
		memcpy(msg, data, size);
		check_request(msg, size, has_fd);
		/* As a reply: to the operation and sequence it names, so the body checks run. */
		const struct tnd_hdr *h = msg;
		if (size >= sizeof(*h))
			check_reply(msg, size, h->op, h->seq, has_fd);
		else
			check_reply(msg, size, op, 0, has_fd);
		free(msg);
		return 0;
	}
	if (size > TND_MSG_MAX)
		return 0;
	size_t len = sizeof(struct tnd_hdr) + size;
	unsigned char *msg = malloc(len);
	if (!msg)
		return 0;
	tnd_init_hdr((struct tnd_hdr *)(void *)msg, op, size, 7, 0, has_fd ? TND_F_FD : 0);
	memcpy(msg + sizeof(struct tnd_hdr), data, size);
	check_request(msg, len, has_fd);
	if (error)
		((struct tnd_hdr *)(void *)msg)->status = TN_EINVAL;
	else if (op == TND_OP_ARENA_LIST || op == TND_OP_CLIENTS)
		((struct tnd_hdr *)(void *)msg)->flags |= TND_F_MORE;
	check_reply(msg, len, op, 7, has_fd);
	free(msg);
	return 0;
}
