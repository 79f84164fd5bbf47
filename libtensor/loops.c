/* SPDX-License-Identifier: MIT */
/*
 * The chunked-cast loop of the element-wise operators (see loops.h): whole rows when no
 * operand needs converting, else CHUNK elements at a time through stack buffers, with the
 * per-capability cast kernel. A broadcast input (stride 0) is converted once per chunk.
 */
#include <assert.h>

#include "loops.h"

#define CHUNK 256

struct chunked {
	tn__row_fn row;
	const void *ctx;
	tn__cast_fn cast;
	int ntensors, noutputs;
	bool cast_any;
	enum tn_dtype dtype[TN_CHUNKED_MAX_OPERANDS];   /* the operands' own */
	enum tn_dtype compute[TN_CHUNKED_MAX_OPERANDS]; /* what the row reads and writes */
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
		if (!c->cast_any) {
			c->row(c->ctx, p, strides, n0);
			continue;
		}
		for (int64_t i = 0; i < n0; i += CHUNK) {
			int64_t m = n0 - i < CHUNK ? n0 - i : CHUNK;
			for (int k = 0; k < nt; k++) {
				char *src = p[k] + i * strides[k];
				int64_t w = (int64_t)tn__itemsize(c->compute[k]);
				if (c->dtype[k] == c->compute[k]) {
					q[k] = src;
					qs[k] = strides[k];
					continue;
				}
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
				if (c->dtype[k] != c->compute[k])
					c->cast(p[k] + i * strides[k], c->dtype[k], strides[k], q[k],
						c->compute[k], qs[k], m);
		}
	}
}

void tn__chunked_for_each(const struct tn_iter *it, const enum tn_dtype *compute, tn__row_fn row,
			  const void *ctx)
{
	struct chunked c = { .row = row, .ctx = ctx, .ntensors = it->ntensors,
			     .noutputs = it->noutputs };

	assert(it->ntensors <= TN_CHUNKED_MAX_OPERANDS);
	if (it->numel == 0)
		return;
	for (int k = 0; k < it->ntensors; k++) {
		c.dtype[k] = it->ops[k].dtype;
		c.compute[k] = compute[k];
		c.cast_any |= c.dtype[k] != c.compute[k];
	}
	if (c.cast_any)
		c.cast = (tn__cast_fn)tn__stub_get(&tn__cast_stub);
	tn__iter_for_each(it, chunked_loop, &c, TN_GRAIN_SIZE);
}
