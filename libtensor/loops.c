/* SPDX-License-Identifier: MIT */
/*
 * The chunked-cast loop of the element-wise operators (see loops.h): whole rows when no
 * operand needs converting, else CHUNK elements at a time through stack buffers, with the
 * per-capability cast kernel. A broadcast input (stride 0) is converted once per chunk. A
 * large output may be written with streaming stores.
 */
#include <assert.h>

#include "loops.h"

#define CHUNK 256
/* Bytes of output computed per block before they are streamed out. */
#define STREAM_BLOCK 4096

struct chunked {
	tn__row_fn row;
	const void *ctx;
	tn__cast_fn cast;
	/* Not NULL for an output of TN_STREAM_BYTES or more: its contiguous rows (no operand
	 * converted) are computed in blocks and written with it (streaming stores), or by
	 * row_stream, a row that streams its own stores. */
	tn__stream_copy_fn stream;
	tn__row_fn row_stream;
	int ntensors, noutputs;
	bool cast_any;
	enum tn_dtype dtype[TN_CHUNKED_MAX_OPERANDS];   /* the operands' own */
	enum tn_dtype compute[TN_CHUNKED_MAX_OPERANDS]; /* what the row reads and writes */
	int64_t width[TN_CHUNKED_MAX_OPERANDS];         /* bytes of a compute element */
	bool convert[TN_CHUNKED_MAX_OPERANDS];          /* dtype differs from compute */
};

static void chunked_loop(void *vctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	const struct chunked *c = vctx;
	const int nt = c->ntensors;
	_Alignas(64) unsigned char buf[TN_CHUNKED_MAX_OPERANDS][CHUNK * 8];
	char *p[TN_CHUNKED_MAX_OPERANDS], *q[TN_CHUNKED_MAX_OPERANDS];
	int64_t qs[TN_CHUNKED_MAX_OPERANDS];

	for (int64_t j = 0; j < n1; j++) {
		for (int k = 0; k < nt; k++)
			p[k] = data[k] + j * strides[nt + k];
		const int64_t wo = c->width[0];
		if (c->stream && !c->cast_any && strides[0] == wo) {
			if (c->row_stream) {
				c->row_stream(c->ctx, p, strides, n0);
				continue;
			}
			/* Blocks computed in L1, then streamed out. */
			_Alignas(64) unsigned char sbuf[STREAM_BLOCK];
			const int64_t blk = STREAM_BLOCK / wo;
			int64_t ss[TN_CHUNKED_MAX_OPERANDS];
			for (int k = 0; k < nt; k++)
				ss[k] = k ? strides[k] : wo;
			for (int64_t i = 0; i < n0; i += blk) {
				int64_t m = n0 - i < blk ? n0 - i : blk;
				q[0] = (char *)sbuf;
				for (int k = 1; k < nt; k++)
					q[k] = p[k] + i * strides[k];
				c->row(c->ctx, q, ss, m);
				c->stream(p[0] + i * wo, sbuf, (size_t)(m * wo));
			}
			continue;
		}
		if (!c->cast_any) {
			c->row(c->ctx, p, strides, n0);
			continue;
		}
		for (int64_t i = 0; i < n0; i += CHUNK) {
			int64_t m = n0 - i < CHUNK ? n0 - i : CHUNK;
			for (int k = 0; k < nt; k++) {
				char *src = p[k] + i * strides[k];
				if (!c->convert[k]) {
					q[k] = src;
					qs[k] = strides[k];
					continue;
				}
				const int64_t w = c->width[k];
				q[k] = (char *)buf[k];
				qs[k] = k >= c->noutputs && strides[k] == 0 ? 0 : w;
				/* Inputs are converted in; outputs are written in the buffer and
				 * converted out below. */
				if (k >= c->noutputs)
					c->cast(q[k], c->compute[k], w, src, c->dtype[k], strides[k],
						qs[k] ? m : 1);
			}
			c->row(c->ctx, q, qs, m);
			for (int k = 0; k < c->noutputs; k++)
				if (c->convert[k])
					c->cast(p[k] + i * strides[k], c->dtype[k], strides[k], q[k],
						c->compute[k], qs[k], m);
		}
	}
	if (c->stream)
		tn__store_fence();
}

static void run(const struct tn_iter *it, const enum tn_dtype *compute, tn__row_fn row,
		tn__row_fn row_stream, bool stream, const void *ctx)
{
	struct chunked c = { .row = row, .ctx = ctx, .row_stream = row_stream,
			     .ntensors = it->ntensors, .noutputs = it->noutputs };

	assert(it->ntensors <= TN_CHUNKED_MAX_OPERANDS);
	if (it->numel == 0)
		return;
	for (int k = 0; k < it->ntensors; k++) {
		c.dtype[k] = it->ops[k].dtype;
		c.compute[k] = compute[k];
		c.width[k] = (int64_t)tn__itemsize(compute[k]);
		c.convert[k] = c.dtype[k] != c.compute[k];
		c.cast_any |= c.convert[k];
	}
	if (c.cast_any)
		c.cast = (tn__cast_fn)tn__stub_get(&tn__cast_stub);
	if (stream && it->numel * (int64_t)tn__itemsize(compute[0]) >= TN_STREAM_BYTES)
		c.stream = (tn__stream_copy_fn)tn__stub_get(&tn__stream_copy_stub);
	tn__iter_for_each(it, chunked_loop, &c, TN_GRAIN_SIZE);
}

void tn__chunked_for_each(const struct tn_iter *it, const enum tn_dtype *compute, tn__row_fn row,
			  const void *ctx)
{
	run(it, compute, row, NULL, false, ctx);
}

void tn__chunked_for_each_streamed(const struct tn_iter *it, const enum tn_dtype *compute,
				   tn__row_fn row, tn__row_fn row_stream, const void *ctx)
{
	run(it, compute, row, row_stream, true, ctx);
}
