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

/* The active message id of a transfer's bytes, and its header: which receive they are for. */
#define AM_ID 17
struct am_hdr {
	uint64_t key;
	uint32_t index, pad;
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

/* A get, an active message sent, or one to receive. */
struct tnd_ucx_op {
	const char *what;  /* for messages */
	ucp_rkey_h rkey;   /* a get's */
	void *req;         /* NULL: completed at once, or not begun (a receive still waiting) */
	ucs_status_t status;
	struct am_hdr hdr; /* a send's header (kept while UCX may read it), a receive's key */
	/* A receive: where the bytes go; waiting while in u->waiting, for its message. */
	struct tnd_ucx *u;
	void *dst;
	size_t len;
	bool waiting;
	struct tnd_ucx_op *next; /* in its bucket */
};

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

/* Take the receive waiting for (@key, @index) off the table; NULL when none waits. */
static struct tnd_ucx_op *take_waiting(struct tnd_ucx *u, uint64_t key, uint32_t index)
{
	for (struct tnd_ucx_op **pp = bucket(u, key, index); *pp; pp = &(*pp)->next) {
		struct tnd_ucx_op *op = *pp;
		if (op->hdr.key == key && op->hdr.index == index) {
			*pp = op->next;
			op->next = NULL;
			op->waiting = false;
			return op;
		}
	}
	return NULL;
}

/*
 * A transfer's bytes arrived (ucp_am_recv_callback_t): into the receive waiting for them,
 * copied now (eager) or received by UCX's rendezvous into its destination. A message that no
 * receive waits for, or of another length, is dropped (its sender's request completes): the
 * receive was freed meanwhile (a deadline, a closed connection), or the peer is confused.
 */
static ucs_status_t am_recv(void *arg, const void *header, size_t header_length, void *data,
			    size_t length, const ucp_am_recv_param_t *param)
{
	struct tnd_ucx *u = arg;
	struct am_hdr h;
	struct tnd_ucx_op *op = NULL;
	if (header_length == sizeof(h)) {
		memcpy(&h, header, sizeof(h));
		op = take_waiting(u, h.key, h.index);
	}
	if (!op || op->len != length) {
		if (op)
			op->status = UCS_ERR_MESSAGE_TRUNCATED;
		u->dropped++;
		return UCS_OK;
	}
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
		memcpy(op->dst, data, length);
		op->status = UCS_OK;
		return UCS_OK;
	}
	ucp_request_param_t rp = { .op_attr_mask = 0 };
	void *req = ucp_am_recv_data_nbx(u->worker, data, op->dst, length, &rp);
	if (UCS_PTR_IS_ERR(req)) {
		op->status = UCS_PTR_STATUS(req);
	} else {
		op->req = req;
		op->status = req ? UCS_INPROGRESS : UCS_OK;
	}
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

/* A new operation, @what for its messages; NULL with a message. */
static struct tnd_ucx_op *op_new(const char *what, char *err, size_t nerr)
{
	struct tnd_ucx_op *op = calloc(1, sizeof(*op));
	if (!op) {
		snprintf(err, nerr, "UCX: out of memory");
		return NULL;
	}
	op->what = what;
	return op;
}

int tnd_ucx_get_start(struct tnd_ucx_ep *e, void *dst, const struct tnd_ucx_mem *local,
		      uint64_t raddr, const void *rkey, size_t rkey_len, size_t len,
		      struct tnd_ucx_op **out, char *err, size_t nerr)
{
	(void)rkey_len;
	*out = NULL;
	struct tnd_ucx_op *op = op_new("UCX get", err, nerr);
	if (!op)
		return -1;
	ucs_status_t st = ucp_ep_rkey_unpack(e->ep, rkey, &op->rkey);
	if (st != UCS_OK) {
		free(op);
		return fail(err, nerr, "UCX remote key", st);
	}
	ucp_request_param_t gp = { .op_attr_mask = local ? UCP_OP_ATTR_FIELD_MEMH : 0,
				   .memh = local ? local->mh : NULL };
	void *req = ucp_get_nbx(e->ep, dst, len, raddr, op->rkey, &gp);
	if (UCS_PTR_IS_ERR(req)) {
		ucp_rkey_destroy(op->rkey);
		free(op);
		return fail(err, nerr, "UCX get", UCS_PTR_STATUS(req));
	}
	op->req = req;
	op->status = req ? UCS_INPROGRESS : UCS_OK;
	*out = op;
	return 0;
}

int tnd_ucx_send_start(struct tnd_ucx_ep *e, uint64_t key, uint32_t index, const void *src,
		       size_t len, struct tnd_ucx_op **out, char *err, size_t nerr)
{
	*out = NULL;
	struct tnd_ucx_op *op = op_new("UCX active message", err, nerr);
	if (!op)
		return -1;
	op->hdr = (struct am_hdr){ .key = key, .index = index };
	ucp_request_param_t sp = { .op_attr_mask = 0 };
	void *req = ucp_am_send_nbx(e->ep, AM_ID, &op->hdr, sizeof(op->hdr), src, len, &sp);
	if (UCS_PTR_IS_ERR(req)) {
		free(op);
		return fail(err, nerr, "UCX active message", UCS_PTR_STATUS(req));
	}
	op->req = req;
	op->status = req ? UCS_INPROGRESS : UCS_OK;
	*out = op;
	return 0;
}

int tnd_ucx_recv_start(struct tnd_ucx *u, uint64_t key, uint32_t index, void *dst, size_t len,
		       struct tnd_ucx_op **out, char *err, size_t nerr)
{
	*out = NULL;
	struct tnd_ucx_op *op = op_new("UCX active message", err, nerr);
	if (!op)
		return -1;
	op->hdr = (struct am_hdr){ .key = key, .index = index };
	op->u = u;
	op->dst = dst;
	op->len = len;
	op->status = UCS_INPROGRESS;
	op->waiting = true;
	struct tnd_ucx_op **b = bucket(u, key, index);
	op->next = *b;
	*b = op;
	*out = op;
	return 0;
}

int tnd_ucx_op_test(struct tnd_ucx_op *op, char *err, size_t nerr)
{
	if (op->req && op->status == UCS_INPROGRESS) {
		op->status = ucp_request_check_status(op->req);
		if (op->status != UCS_INPROGRESS) {
			ucp_request_free(op->req);
			op->req = NULL;
		}
	}
	if (op->status == UCS_INPROGRESS)
		return 1;
	return op->status == UCS_OK ? 0 : fail(err, nerr, op->what, op->status);
}

void tnd_ucx_op_free(struct tnd_ucx_op *op)
{
	if (!op)
		return;
	if (op->waiting)
		(void)take_waiting(op->u, op->hdr.key, op->hdr.index);
	if (op->req)
		ucp_request_free(op->req); /* released when it completes */
	if (op->rkey)
		ucp_rkey_destroy(op->rkey);
	free(op);
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
};
