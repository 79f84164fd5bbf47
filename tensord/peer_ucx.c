// SPDX-License-Identifier: MIT
/* tensord's UCX layer for peers (peer_ucx.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "peer_module.h"

/* The active message id of a transfer's bytes, and its header: which receive they are for,
 * and where in it. A block goes in chunks of AM_CHUNK bytes, each its own message: UCX 1.13
 * sends the whole of a rendezvous message from inside one call of its progress (the handler of
 * the receiver's ready-to-receive, then its queue of pending sends, for as long as the socket
 * takes bytes), so chunks sent a few at a time bound how long the peers' thread is away from
 * its control connections (a 512 MiB message under ThreadSanitizer kept it there for 15 s). */
#define AM_ID 17
#define AM_CHUNK ((size_t)8 << 20)
#define AM_WINDOW 2 /* chunks of a block sent at once: a progress call sends 16 MiB at most */
struct am_hdr {
	uint64_t key;
	uint32_t index, pad;
	uint64_t offset;
};

#define RECV_BUCKETS 4096u /* of the table of receives waiting for their message */

struct tnd_ucx {
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_address_t *addr;
	size_t addr_len;
	int efd;
	bool shm; /* the context has a transport between processes of one host */
	struct tnd_ucx_op *waiting[RECV_BUCKETS];
	uint64_t dropped;
};

struct tnd_ucx_mem {
	struct tnd_ucx *u;
	ucp_mem_h mh;
	void *rkey;
	size_t rkey_len;
};

struct tnd_ucx_ep {
	struct tnd_ucx *u;
	ucp_ep_h ep;
	ucs_status_t failed; /* UCS_OK until UCX reported the peer failed (error mode PEER) */
};

/* A get, a block sent by active messages, or one to receive. */
struct tnd_ucx_op {
	const char *what;     /* for messages */
	ucp_rkey_h rkey;      /* a get's */
	ucs_status_t error;   /* UCS_OK, or the first failure */
	size_t nreq;          /* a get's one request, or one per chunk */
	void **reqs;          /* those in progress (NULL: ended, or a chunk not yet arrived) */
	void *one;            /* reqs of a get */
	struct am_hdr *hdrs;  /* a send's, one per chunk: UCX may read them until it ends */
	struct tnd_ucx_ep *ep; /* a send's: its endpoint, source, next chunk, chunks ended */
	const char *src;
	size_t next_chunk, ended;
	bool sending;
	/* A receive: where the bytes go; waiting (in u->waiting) until every chunk came. */
	struct tnd_ucx *u;
	struct am_hdr key;    /* key and index */
	void *dst;
	size_t len, arrived;
	unsigned char *got;   /* per chunk: it came */
	bool waiting;
	struct tnd_ucx_op *next; /* in its bucket */
};

/* The chunks of a block of @len bytes. */
static size_t chunks(size_t len)
{
	return len ? (len + AM_CHUNK - 1) / AM_CHUNK : 1;
}

static int fail(char *err, size_t nerr, const char *what, ucs_status_t st)
{
	snprintf(err, nerr, "%s: %s", what, ucs_status_string(st));
	return -1;
}

static struct tnd_ucx_op **bucket(struct tnd_ucx *u, uint64_t key, uint32_t index)
{
	uint64_t h = (key ^ ((uint64_t)index * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return &u->waiting[(h >> 40) % RECV_BUCKETS];
}

/* The receive waiting for (@key, @index), taken off the table when @take; NULL when none. */
static struct tnd_ucx_op *find_waiting(struct tnd_ucx *u, uint64_t key, uint32_t index,
				       bool take)
{
	for (struct tnd_ucx_op **pp = bucket(u, key, index); *pp; pp = &(*pp)->next) {
		struct tnd_ucx_op *op = *pp;
		if (op->key.key == key && op->key.index == index) {
			if (take) {
				*pp = op->next;
				op->next = NULL;
				op->waiting = false;
			}
			return op;
		}
	}
	return NULL;
}

/*
 * A chunk of a transfer arrived (ucp_am_recv_callback_t): into the receive waiting for it,
 * copied now (eager) or received by UCX's rendezvous into its place. A message that no receive
 * waits for is dropped (its sender's request completes): the receive was freed meanwhile (a
 * deadline, a closed connection). One that does not fit the receive (another length or
 * offset, a chunk again) is dropped and fails the receive: the peer is confused.
 */
static ucs_status_t am_recv(void *arg, const void *header, size_t header_length, void *data,
			    size_t length, const ucp_am_recv_param_t *param)
{
	struct tnd_ucx *u = arg;
	struct am_hdr h;
	struct tnd_ucx_op *op = NULL;
	if (header_length == sizeof(h)) {
		memcpy(&h, header, sizeof(h));
		op = find_waiting(u, h.key, h.index, false);
	}
	size_t k = op ? (size_t)(h.offset / AM_CHUNK) : 0;
	if (!op || h.offset % AM_CHUNK || h.offset >= op->len + !op->len || op->got[k] ||
	    length != (op->len - h.offset < AM_CHUNK ? op->len - h.offset : AM_CHUNK)) {
		if (op) {
			op->error = UCS_ERR_MESSAGE_TRUNCATED;
			(void)find_waiting(u, h.key, h.index, true);
		}
		u->dropped++;
		return UCS_OK;
	}
	op->got[k] = 1;
	if (++op->arrived == op->nreq)
		(void)find_waiting(u, h.key, h.index, true);
	char *at = (char *)op->dst + h.offset;
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
		memcpy(at, data, length);
		return UCS_OK;
	}
	ucp_request_param_t rp = { .op_attr_mask = 0 };
	void *req = ucp_am_recv_data_nbx(u->worker, data, at, length, &rp);
	if (UCS_PTR_IS_ERR(req))
		op->error = UCS_PTR_STATUS(req);
	else
		op->reqs[k] = req;
	return UCS_OK;
}

/* Whether UCX's list of resources (ucp_context_print_info) names a transport between
 * processes of one host. */
static bool context_shm(ucp_context_h ctx)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return false;
	ucp_context_print_info(ctx, f);
	bool shm = fclose(f) == 0 && tnd_ucx_lanes_local(text);
	free(text);
	return shm;
}

int tnd_ucx_open(struct tnd_ucx **out, char *err, size_t nerr)
{
	*out = NULL;
	struct tnd_ucx *u = calloc(1, sizeof(*u));
	if (!u) {
		snprintf(err, nerr, "UCX: out of memory");
		return -1;
	}
	u->efd = -1;
	ucp_config_t *cfg;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) {
		free(u);
		return fail(err, nerr, "UCX configuration", st);
	}
	/* No memory events: tensord registers arena memory itself and unregisters it before
	 * unmapping, so UCX's registration cache (what the events keep right) has nothing to
	 * track, and its hooks would patch the daemon's mmap and malloc (under ThreadSanitizer
	 * they crashed it). UCX_MEM_EVENTS in the environment still wins. */
	ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES,
			   .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP };
	st = ucp_init(&p, cfg, &u->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		free(u);
		return fail(err, nerr, "UCX context", st);
	}
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };
	if ((st = ucp_worker_create(u->ctx, &wp, &u->worker)) != UCS_OK) {
		ucp_cleanup(u->ctx);
		free(u);
		return fail(err, nerr, "UCX worker", st);
	}
	if ((st = ucp_worker_get_address(u->worker, &u->addr, &u->addr_len)) != UCS_OK ||
	    (st = ucp_worker_get_efd(u->worker, &u->efd)) != UCS_OK) {
		tnd_ucx_close(u);
		return fail(err, nerr, "UCX worker address", st);
	}
	ucp_am_handler_param_t hp = { .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
						    UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
						    UCP_AM_HANDLER_PARAM_FIELD_CB |
						    UCP_AM_HANDLER_PARAM_FIELD_ARG,
				      .id = AM_ID,
				      .flags = UCP_AM_FLAG_WHOLE_MSG,
				      .cb = am_recv,
				      .arg = u };
	if ((st = ucp_worker_set_am_recv_handler(u->worker, &hp)) != UCS_OK) {
		tnd_ucx_close(u);
		return fail(err, nerr, "UCX active messages", st);
	}
	u->shm = context_shm(u->ctx);
	*out = u;
	return 0;
}

void tnd_ucx_close(struct tnd_ucx *u)
{
	if (!u)
		return;
	if (u->addr)
		ucp_worker_release_address(u->worker, u->addr);
	ucp_worker_destroy(u->worker);
	ucp_cleanup(u->ctx);
	free(u);
}

void tnd_ucx_address(const struct tnd_ucx *u, const void **addr, size_t *len)
{
	*addr = u->addr;
	*len = u->addr_len;
}

bool tnd_ucx_shared_memory(const struct tnd_ucx *u)
{
	return u->shm;
}

uint64_t tnd_ucx_dropped(const struct tnd_ucx *u)
{
	return u->dropped;
}

int tnd_ucx_efd(const struct tnd_ucx *u)
{
	return u->efd;
}

int tnd_ucx_arm(struct tnd_ucx *u)
{
	ucs_status_t st = ucp_worker_arm(u->worker);
	return st == UCS_OK ? 1 : st == UCS_ERR_BUSY ? 0 : -1;
}

unsigned tnd_ucx_progress(struct tnd_ucx *u)
{
	return ucp_worker_progress(u->worker);
}

int tnd_ucx_mem_map(struct tnd_ucx *u, void *base, size_t len, struct tnd_ucx_mem **out, char *err,
		    size_t nerr)
{
	*out = NULL;
	struct tnd_ucx_mem *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, nerr, "UCX: out of memory");
		return -1;
	}
	m->u = u;
	ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
						  UCP_MEM_MAP_PARAM_FIELD_LENGTH,
				    .address = base,
				    .length = len };
	ucs_status_t st = ucp_mem_map(u->ctx, &mp, &m->mh);
	if (st != UCS_OK) {
		free(m);
		return fail(err, nerr, "UCX memory registration", st);
	}
	if ((st = ucp_rkey_pack(u->ctx, m->mh, &m->rkey, &m->rkey_len)) != UCS_OK) {
		ucp_mem_unmap(u->ctx, m->mh);
		free(m);
		return fail(err, nerr, "UCX remote key", st);
	}
	*out = m;
	return 0;
}

void tnd_ucx_mem_rkey(const struct tnd_ucx_mem *m, const void **rkey, size_t *len)
{
	*rkey = m->rkey;
	*len = m->rkey_len;
}

void tnd_ucx_mem_unmap(struct tnd_ucx_mem *m)
{
	if (!m)
		return;
	ucp_rkey_buffer_release(m->rkey);
	ucp_mem_unmap(m->u->ctx, m->mh);
	free(m);
}

/* Wait for @req (a request pointer of an _nbx call) to complete; its status. */
static ucs_status_t wait_req(struct tnd_ucx *u, void *req)
{
	if (req == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(req))
		return UCS_PTR_STATUS(req);
	ucs_status_t st;
	while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS)
		ucp_worker_progress(u->worker);
	ucp_request_free(req);
	return st;
}

/* UCX found @ep's peer gone (error mode PEER): its requests complete with an error, and the
 * endpoint can only be closed (force) from now on. */
static void ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	(void)ep;
	struct tnd_ucx_ep *e = arg;
	e->failed = status;
}

int tnd_ucx_connect(struct tnd_ucx *u, const void *addr, size_t len, bool peer_errors,
		    struct tnd_ucx_ep **out, char *err, size_t nerr)
{
	(void)len; /* UCX reads the address's own length */
	*out = NULL;
	struct tnd_ucx_ep *e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, nerr, "UCX: out of memory");
		return -1;
	}
	e->u = u;
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
					     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
					     UCP_EP_PARAM_FIELD_ERR_HANDLER,
			       .address = (const ucp_address_t *)addr,
			       .err_mode = peer_errors ? UCP_ERR_HANDLING_MODE_PEER
						       : UCP_ERR_HANDLING_MODE_NONE,
			       .err_handler = { .cb = ep_failed, .arg = e } };
	ucs_status_t st = ucp_ep_create(u->worker, &ep, &e->ep);
	if (st != UCS_OK) {
		free(e);
		return fail(err, nerr, "UCX endpoint", st);
	}
	*out = e;
	return 0;
}

void tnd_ucx_disconnect(struct tnd_ucx_ep *e, bool force)
{
	if (!e)
		return;
	ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
				   .flags = force || e->failed != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE
									   : 0 };
	(void)wait_req(e->u, ucp_ep_close_nbx(e->ep, &rp));
	free(e);
}

int tnd_ucx_lanes(struct tnd_ucx_ep *e, char *buf, size_t n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return -1;
	ucp_ep_print_info(e->ep, f);
	if (fclose(f) != 0) {
		free(text);
		return -1;
	}
	int r = tnd_ucx_parse_lanes(text, buf, n);
	free(text);
	return r;
}

int tnd_ucx_get(struct tnd_ucx_ep *e, void *dst, const struct tnd_ucx_mem *local, uint64_t raddr,
		const void *rkey, size_t rkey_len, size_t len, char *err, size_t nerr)
{
	(void)rkey_len;
	ucp_rkey_h rk;
	ucs_status_t st = ucp_ep_rkey_unpack(e->ep, rkey, &rk);
	if (st != UCS_OK)
		return fail(err, nerr, "UCX remote key", st);
	ucp_request_param_t gp = { .op_attr_mask = local ? UCP_OP_ATTR_FIELD_MEMH : 0,
				   .memh = local ? local->mh : NULL };
	st = wait_req(e->u, ucp_get_nbx(e->ep, dst, len, raddr, rk, &gp));
	if (st == UCS_OK)
		st = wait_req(e->u, ucp_ep_flush_nbx(e->ep, &(ucp_request_param_t){ 0 }));
	ucp_rkey_destroy(rk);
	return st == UCS_OK ? 0 : fail(err, nerr, "UCX get", st);
}

/* A new operation of @nreq requests (a get's reqs: its one), @what for its messages; NULL
 * with a message. */
static struct tnd_ucx_op *op_new(const char *what, size_t nreq, char *err, size_t nerr)
{
	struct tnd_ucx_op *op = calloc(1, sizeof(*op));
	if (op && nreq > 1 && !(op->reqs = calloc(nreq, sizeof(*op->reqs)))) {
		free(op);
		op = NULL;
	}
	if (!op) {
		snprintf(err, nerr, "UCX: out of memory");
		return NULL;
	}
	op->what = what;
	op->nreq = nreq;
	if (nreq == 1)
		op->reqs = &op->one;
	return op;
}

static void op_release(struct tnd_ucx_op *op)
{
	if (op->reqs != &op->one)
		free(op->reqs);
	free(op->hdrs);
	free(op->got);
	free(op);
}

int tnd_ucx_get_start(struct tnd_ucx_ep *e, void *dst, const struct tnd_ucx_mem *local,
		      uint64_t raddr, const void *rkey, size_t rkey_len, size_t len,
		      struct tnd_ucx_op **out, char *err, size_t nerr)
{
	(void)rkey_len;
	*out = NULL;
	struct tnd_ucx_op *op = op_new("UCX get", 1, err, nerr);
	if (!op)
		return -1;
	ucs_status_t st = ucp_ep_rkey_unpack(e->ep, rkey, &op->rkey);
	if (st != UCS_OK) {
		op_release(op);
		return fail(err, nerr, "UCX remote key", st);
	}
	ucp_request_param_t gp = { .op_attr_mask = local ? UCP_OP_ATTR_FIELD_MEMH : 0,
				   .memh = local ? local->mh : NULL };
	void *req = ucp_get_nbx(e->ep, dst, len, raddr, op->rkey, &gp);
	if (UCS_PTR_IS_ERR(req)) {
		ucp_rkey_destroy(op->rkey);
		op_release(op);
		return fail(err, nerr, "UCX get", UCS_PTR_STATUS(req));
	}
	op->one = req;
	*out = op;
	return 0;
}

/* Start the send's next chunks, up to AM_WINDOW in flight; not after a failure. (No
 * completion callbacks: UCX may complete a request of a force-closed endpoint in a later
 * progress, after the operation was freed.) */
static void send_more(struct tnd_ucx_op *op)
{
	for (;;) {
		while (op->ended < op->next_chunk && !op->reqs[op->ended])
			op->ended++; /* chunks end in order here: ended counts a prefix */
		if (op->error != UCS_OK || op->next_chunk == op->nreq ||
		    op->next_chunk - op->ended >= AM_WINDOW)
			return;
		size_t k = op->next_chunk++, off = k * AM_CHUNK;
		ucp_request_param_t sp = { .op_attr_mask = 0 };
		void *req = ucp_am_send_nbx(op->ep->ep, AM_ID, &op->hdrs[k], sizeof(op->hdrs[k]),
					    op->src + off,
					    op->len - off < AM_CHUNK ? op->len - off : AM_CHUNK, &sp);
		if (UCS_PTR_IS_ERR(req))
			op->error = UCS_PTR_STATUS(req);
		else
			op->reqs[k] = req; /* NULL: done at once */
	}
}

int tnd_ucx_send_start(struct tnd_ucx_ep *e, uint64_t key, uint32_t index, const void *src,
		       size_t len, struct tnd_ucx_op **out, char *err, size_t nerr)
{
	*out = NULL;
	size_t n = chunks(len);
	struct tnd_ucx_op *op = op_new("UCX active message", n, err, nerr);
	if (op && !(op->hdrs = calloc(n, sizeof(*op->hdrs)))) {
		op_release(op);
		snprintf(err, nerr, "UCX: out of memory");
		return -1;
	}
	if (!op)
		return -1;
	for (size_t k = 0; k < n; k++)
		op->hdrs[k] = (struct am_hdr){ .key = key, .index = index, .offset = k * AM_CHUNK };
	op->ep = e;
	op->src = src;
	op->len = len;
	op->sending = true;
	send_more(op);
	if (op->error != UCS_OK && op->ended == op->next_chunk) { /* nothing in flight */
		ucs_status_t st = op->error;
		op_release(op);
		return fail(err, nerr, "UCX active message", st);
	}
	*out = op;
	return 0;
}

int tnd_ucx_recv_start(struct tnd_ucx *u, uint64_t key, uint32_t index, void *dst, size_t len,
		       struct tnd_ucx_op **out, char *err, size_t nerr)
{
	*out = NULL;
	size_t n = chunks(len);
	struct tnd_ucx_op *op = op_new("UCX active message", n, err, nerr);
	if (op && !(op->got = calloc(n, 1))) {
		op_release(op);
		snprintf(err, nerr, "UCX: out of memory");
		return -1;
	}
	if (!op)
		return -1;
	op->key = (struct am_hdr){ .key = key, .index = index };
	op->u = u;
	op->dst = dst;
	op->len = len;
	op->waiting = true;
	struct tnd_ucx_op **b = bucket(u, key, index);
	op->next = *b;
	*b = op;
	*out = op;
	return 0;
}

int tnd_ucx_op_test(struct tnd_ucx_op *op, char *err, size_t nerr)
{
	bool busy = op->waiting;
	/* A send's chunks in flight are those from ended to next_chunk. */
	size_t k0 = op->sending ? op->ended : 0, k1 = op->sending ? op->next_chunk : op->nreq;
	for (size_t k = k0; k < k1; k++) {
		if (!op->reqs[k])
			continue;
		ucs_status_t st = ucp_request_check_status(op->reqs[k]);
		if (st == UCS_INPROGRESS) {
			busy = true;
			continue;
		}
		ucp_request_free(op->reqs[k]);
		op->reqs[k] = NULL;
		if (st != UCS_OK && op->error == UCS_OK)
			op->error = st;
	}
	if (op->sending) {
		/* A failed send reports it once no chunk is in flight (UCX reads the block). */
		send_more(op);
		busy = op->error == UCS_OK ? op->ended < op->nreq : op->ended < op->next_chunk;
		if (busy)
			return 1;
	}
	if (op->error != UCS_OK)
		return fail(err, nerr, op->what, op->error);
	return busy ? 1 : 0;
}

void tnd_ucx_op_cancel(struct tnd_ucx_op *op)
{
	if (op && op->waiting)
		(void)find_waiting(op->u, op->key.key, op->key.index, true);
}

void tnd_ucx_op_free(struct tnd_ucx_op *op)
{
	if (!op)
		return;
	if (op->waiting)
		(void)find_waiting(op->u, op->key.key, op->key.index, true);
	for (size_t k = 0; k < op->nreq; k++)
		if (op->reqs[k])
			ucp_request_free(op->reqs[k]); /* released when it completes */
	if (op->rkey)
		ucp_rkey_destroy(op->rkey);
	op_release(op);
}

/* The module's entry points (peer_module.h), the one symbol it exports. */
__attribute__((visibility("default"))) const struct tnd_ucx_ops tnd_ucx_module = {
	.abi = TND_UCX_ABI,
	.open = tnd_ucx_open,
	.close = tnd_ucx_close,
	.address = tnd_ucx_address,
	.shared_memory = tnd_ucx_shared_memory,
	.dropped = tnd_ucx_dropped,
	.efd = tnd_ucx_efd,
	.arm = tnd_ucx_arm,
	.progress = tnd_ucx_progress,
	.mem_map = tnd_ucx_mem_map,
	.mem_rkey = tnd_ucx_mem_rkey,
	.mem_unmap = tnd_ucx_mem_unmap,
	.connect = tnd_ucx_connect,
	.disconnect = tnd_ucx_disconnect,
	.lanes = tnd_ucx_lanes,
	.get = tnd_ucx_get,
	.get_start = tnd_ucx_get_start,
	.send_start = tnd_ucx_send_start,
	.recv_start = tnd_ucx_recv_start,
	.op_test = tnd_ucx_op_test,
	.op_free = tnd_ucx_op_free,
	.op_cancel = tnd_ucx_op_cancel,
};
