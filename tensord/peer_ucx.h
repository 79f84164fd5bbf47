/* SPDX-License-Identifier: MIT */
/*
 * tensord's UCX layer for peers (issue 22): one UCP context and worker, in the daemon only
 * (UCX hooks the memory calls of the process that loads it). The worker is single-threaded:
 * the event loop's thread calls everything here. Endpoints are made from worker addresses
 * exchanged over the authenticated control connection (peer_auth.h).
 *
 * Error handling: an endpoint to a daemon of another host, or one that cannot be joined by
 * shared memory, has UCX's peer failure handling on (UCP_ERR_HANDLING_MODE_PEER), so that a
 * peer lost mid-transfer fails the requests in flight instead of aborting this process. With
 * it on, UCX 1.13 never selects the shared-memory transports, so an endpoint to a daemon of
 * this host that both sides could join by shared memory has it off, and failure detection is
 * the control connection's (and the pidfd of direct reads, peer_read.h).
 *
 * Bytes move by RMA get where the transport does it natively (tnd_ucx_lanes_native_get), and
 * else by active messages: the holder sends each block (tnd_ucx_send_start) to a receive the
 * puller registered under a key (tnd_ucx_recv_start). UCX 1.13 serves a get over TCP by
 * software emulation, whose holder side aborts the process when its peer fails mid-reply
 * (ucp_get_req_handler's ucp_request_send), while the active message protocols complete the
 * request with the error.
 */
#ifndef TENSORD_PEER_UCX_H
#define TENSORD_PEER_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tnd_ucx;
struct tnd_ucx_mem;
struct tnd_ucx_ep;
struct tnd_ucx_op;

/* The context and worker (RMA and active messages). Returns 0, or -1 with a message. */
int tnd_ucx_open(struct tnd_ucx **u, char *err, size_t nerr);
void tnd_ucx_close(struct tnd_ucx *u);

/* The worker's address, to send to a peer (valid until tnd_ucx_close). */
void tnd_ucx_address(const struct tnd_ucx *u, const void **addr, size_t *len);

/* The worker's event fd (for epoll) and its arming: 1 when armed (sleep on the fd), 0 when
 * events are pending (progress and arm again), -1 on error. */
int tnd_ucx_efd(const struct tnd_ucx *u);

/* Whether the context has a transport between processes of one host (sysv, posix, cma, knem,
 * xpmem), from ucp_context_print_info: not when UCX_TLS leaves them out. */
bool tnd_ucx_shared_memory(const struct tnd_ucx *u);
/* Active messages not received: under a key no receive waited for, or of another length. */
uint64_t tnd_ucx_dropped(const struct tnd_ucx *u);
int tnd_ucx_arm(struct tnd_ucx *u);
unsigned tnd_ucx_progress(struct tnd_ucx *u);

/* @len bytes at @base registered for RMA; the packed remote key a peer needs to read them. */
int tnd_ucx_mem_map(struct tnd_ucx *u, void *base, size_t len, struct tnd_ucx_mem **m, char *err,
		    size_t nerr);
void tnd_ucx_mem_rkey(const struct tnd_ucx_mem *m, const void **rkey, size_t *len);
void tnd_ucx_mem_unmap(struct tnd_ucx_mem *m);

/* An endpoint to the worker at @addr (a peer's tnd_ucx_address), with UCX's peer failure
 * handling when @peer_errors (both sides must choose the same). */
int tnd_ucx_connect(struct tnd_ucx *u, const void *addr, size_t len, bool peer_errors,
		    struct tnd_ucx_ep **ep, char *err, size_t nerr);
/* Close @ep, flushing (force: dropping) what is in flight; completes before returning. */
void tnd_ucx_disconnect(struct tnd_ucx_ep *ep, bool force);

/*
 * The transports UCX chose for @ep, from ucp_ep_print_info: "am=sysv/memory rma=cma/memory",
 * the lane of active messages and those of RMA bandwidth, each TRANSPORT/DEVICE, in lane order,
 * several joined by ','. Returns the length written (truncated to @n - 1), or -1.
 */
int tnd_ucx_lanes(struct tnd_ucx_ep *ep, char *buf, size_t n);
/* Parse ucp_ep_print_info's text (for tnd_ucx_lanes and its test). */
int tnd_ucx_parse_lanes(const char *info, char *buf, size_t n);
/* Whether the RMA lanes do a native get (cma, knem, xpmem, rc/dc verbs), not TCP's emulation. */
bool tnd_ucx_lanes_native_get(const char *lanes);
/* Whether @text (lanes, or UCX's list of resources) names a transport between processes of
 * one host: sysv/, posix/, cma/, xpmem/ or knem/. */
bool tnd_ucx_lanes_local(const char *text);

/*
 * Read @len bytes at the peer's address @raddr (in memory whose packed key is @rkey) into
 * @dst, inside the local registration @local. Blocks, progressing the worker, until done.
 * Returns 0, or -1 with a message.
 */
int tnd_ucx_get(struct tnd_ucx_ep *ep, void *dst, const struct tnd_ucx_mem *local, uint64_t raddr,
		const void *rkey, size_t rkey_len, size_t len, char *err, size_t nerr);

/*
 * The same without blocking: start the read, then test it as the worker progresses (1: in
 * progress, 0: the bytes are in @dst, -1: failed, with a message). tnd_ucx_op_free releases
 * it; an operation still in progress must first be ended by closing its endpoint (force),
 * which completes it with an error. tnd_ucx_get_start returns 0 or -1 with a message.
 */
int tnd_ucx_get_start(struct tnd_ucx_ep *ep, void *dst, const struct tnd_ucx_mem *local,
		      uint64_t raddr, const void *rkey, size_t rkey_len, size_t len,
		      struct tnd_ucx_op **op, char *err, size_t nerr);
int tnd_ucx_op_test(struct tnd_ucx_op *op, char *err, size_t nerr);
void tnd_ucx_op_free(struct tnd_ucx_op *op);

/*
 * Active messages. tnd_ucx_recv_start registers a receive of exactly @len bytes into @dst
 * for the block keyed (@key, @index); tnd_ucx_send_start sends @len bytes at @src to @ep's
 * peer under that key (@src must stay until the operation ended), in messages of 8 MiB at
 * most (UCX sends a whole rendezvous message from within one call of its progress). Both are
 * then tested and freed as a get: a receive is in progress until every chunk arrived and was
 * copied or received by rendezvous; freeing one unregisters it (later chunks under its key are
 * dropped), but chunks being received, or a send in progress, must first be ended by closing
 * the endpoint (force). A chunk that does not fit (another length or offset, a chunk twice)
 * fails the receive. Both return 0, or -1 with a message (a send whose later chunks could not
 * start returns 0, and the test reports it).
 */
int tnd_ucx_send_start(struct tnd_ucx_ep *ep, uint64_t key, uint32_t index, const void *src,
		       size_t len, struct tnd_ucx_op **op, char *err, size_t nerr);
int tnd_ucx_recv_start(struct tnd_ucx *u, uint64_t key, uint32_t index, void *dst, size_t len,
		       struct tnd_ucx_op **op, char *err, size_t nerr);
/* Stop waiting for a receive's chunks that have not come (they are dropped when they do): it
 * then ends once those being received ended, with 0 from tnd_ucx_op_test. A transfer past
 * its deadline drains only those, not the rest of the block. Nothing for gets and sends. */
void tnd_ucx_op_cancel(struct tnd_ucx_op *op);

#endif /* TENSORD_PEER_UCX_H */
