/* SPDX-License-Identifier: MIT */
/*
 * GPT-2 on libtensor (see gpt2.h): embedding, then per block
 *     x += c_proj(attention(c_attn(layer_norm(x))))
 *     x += mlp_c_proj(gelu_tanh(c_fc(layer_norm(x))))
 * then the final layer_norm and the logits against the tied embedding. Every step is a
 * libtensor operator (embedding, add, layer_norm, linear, narrow/view/transpose,
 * scaled_dot_product_attention, gelu); the model holds references to its weights and
 * allocates only activations and its key/value cache.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gpt2.h"

const char *gpt2_last_error(void)
{
	return model_last_error();
}

/* One weight: looked up, checked to be float32 of shape [d0] or [d0, d1]. */
static int bind(tn_tensor **slot, gpt2_get_fn get, void *ctx, const char *name, int ndim,
		int64_t d0, int64_t d1)
{
	return model_bind(slot, get, ctx, "gpt2", name, ndim, (int64_t[]){ d0, d1 });
}

int gpt2_load(struct gpt2 *m, const struct gpt2_config *cfg, gpt2_get_fn get, void *ctx)
{
	const int64_t C = cfg->n_embd;
	char name[96];
	int rc;

	model_clear_error();
	memset(m, 0, sizeof(*m));
	m->cfg = *cfg;
	if (C % cfg->n_head)
		return model_fail(TN_EINVAL, "gpt2: width %lld is not a multiple of %lld heads",
				    (long long)C, (long long)cfg->n_head);
	m->layers = calloc((size_t)cfg->n_layer, sizeof(*m->layers));
	if (!m->layers)
		return model_fail(TN_ENOMEM, "gpt2: out of memory");
	if ((rc = bind(&m->wte, get, ctx, "wte.weight", 2, cfg->vocab, C)) < 0 ||
	    (rc = bind(&m->wpe, get, ctx, "wpe.weight", 2, cfg->n_ctx, C)) < 0 ||
	    (rc = bind(&m->lnf_w, get, ctx, "ln_f.weight", 1, C, 0)) < 0 ||
	    (rc = bind(&m->lnf_b, get, ctx, "ln_f.bias", 1, C, 0)) < 0)
		goto fail;
	for (int64_t i = 0; i < cfg->n_layer; i++) {
		struct gpt2_layer *l = &m->layers[i];
		static const struct {
			const char *suffix;
			size_t off;
			int ndim, m0, m1; /* sizes as multiples of C (0: 1) */
		} w[] = {
			{ "ln_1.weight", offsetof(struct gpt2_layer, ln1_w), 1, 1, 0 },
			{ "ln_1.bias", offsetof(struct gpt2_layer, ln1_b), 1, 1, 0 },
			{ "attn.c_attn.weight", offsetof(struct gpt2_layer, attn_w), 2, 3, 1 },
			{ "attn.c_attn.bias", offsetof(struct gpt2_layer, attn_b), 1, 3, 0 },
			{ "attn.c_proj.weight", offsetof(struct gpt2_layer, proj_w), 2, 1, 1 },
			{ "attn.c_proj.bias", offsetof(struct gpt2_layer, proj_b), 1, 1, 0 },
			{ "ln_2.weight", offsetof(struct gpt2_layer, ln2_w), 1, 1, 0 },
			{ "ln_2.bias", offsetof(struct gpt2_layer, ln2_b), 1, 1, 0 },
			{ "mlp.c_fc.weight", offsetof(struct gpt2_layer, fc_w), 2, 4, 1 },
			{ "mlp.c_fc.bias", offsetof(struct gpt2_layer, fc_b), 1, 4, 0 },
			{ "mlp.c_proj.weight", offsetof(struct gpt2_layer, fc2_w), 2, 1, 4 },
			{ "mlp.c_proj.bias", offsetof(struct gpt2_layer, fc2_b), 1, 1, 0 },
		};
		for (size_t j = 0; j < sizeof(w) / sizeof(w[0]); j++) {
			snprintf(name, sizeof(name), "h.%lld.%s", (long long)i, w[j].suffix);
			tn_tensor **slot = (tn_tensor **)((char *)l + w[j].off);
			if ((rc = bind(slot, get, ctx, name, w[j].ndim, w[j].m0 * C, w[j].m1 * C)) < 0)
				goto fail;
		}
	}
	return 0;
fail:
	gpt2_free(m);
	return rc;
}

void gpt2_free(struct gpt2 *m)
{
	if (m->layers)
		for (int64_t i = 0; i < m->cfg.n_layer; i++) {
			tn_tensor **t = (tn_tensor **)&m->layers[i];
			for (size_t j = 0; j < sizeof(struct gpt2_layer) / sizeof(tn_tensor *); j++)
				tn_tensor_unref(t[j]);
		}
	free(m->layers);
	tn_tensor_unref(m->wte);
	tn_tensor_unref(m->wpe);
	tn_tensor_unref(m->lnf_w);
	tn_tensor_unref(m->lnf_b);
	memset(m, 0, sizeof(*m));
}

int gpt2_cache_init(const struct gpt2 *m, struct gpt2_cache *c)
{
	const struct gpt2_config *g = &m->cfg;
	int64_t s[3] = { g->n_head, g->n_ctx, g->n_embd / g->n_head };
	model_clear_error();
	memset(c, 0, sizeof(*c));
	c->n_layer = g->n_layer;
	c->k = calloc((size_t)g->n_layer, sizeof(tn_tensor *));
	c->v = calloc((size_t)g->n_layer, sizeof(tn_tensor *));
	if (!c->k || !c->v) {
		gpt2_cache_free(c);
		return model_fail(TN_ENOMEM, "gpt2: out of memory");
	}
	for (int64_t i = 0; i < g->n_layer; i++) {
		int rc;
		if ((rc = tn_empty(3, s, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &c->k[i])) < 0 ||
		    (rc = tn_empty(3, s, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &c->v[i])) < 0) {
			gpt2_cache_free(c);
			return rc;
		}
	}
	return 0;
}

void gpt2_cache_free(struct gpt2_cache *c)
{
	for (int64_t i = 0; i < c->n_layer; i++) {
		if (c->k)
			tn_tensor_unref(c->k[i]);
		if (c->v)
			tn_tensor_unref(c->v[i]);
	}
	free(c->k);
	free(c->v);
	memset(c, 0, sizeof(*c));
}

/* A scope of temporaries, unreferenced together. */
#define MAX_TMP 64
struct scope {
	tn_tensor *t[MAX_TMP];
	int n;
};

static tn_tensor *keep(struct scope *s, tn_tensor *t)
{
	if (s->n < MAX_TMP)
		s->t[s->n++] = t;
	return t;
}

static void drop(struct scope *s)
{
	while (s->n)
		tn_tensor_unref(s->t[--s->n]);
}

/* The [n, L] mask of @n queries at positions len.. against L = len + n keys (key j visible to
 * query i when j <= len + i): PyTorch's is_causal aligns the other corner. */
static int causal_mask(int64_t len, int64_t n, tn_tensor **ret)
{
	int64_t L = len + n, s[2] = { n, L };
	int rc = tn_empty(2, s, TN_BOOL, TN_CPU, TN_CONTIGUOUS_FORMAT, ret);
	if (rc < 0)
		return rc;
	bool *p = tn_tensor_data(*ret);
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < L; j++)
			p[i * L + j] = j <= len + i;
	return 0;
}

/* x + attention block of layer @l for the @n rows of @x at positions c->len.. */
static int attention(const struct gpt2 *m, const struct gpt2_layer *l, struct gpt2_cache *c,
		     int64_t layer, tn_tensor *x, int64_t n, tn_tensor **ret)
{
	const int64_t C = m->cfg.n_embd, H = m->cfg.n_head, D = C / H, len = c ? c->len : 0;
	struct scope s = { .n = 0 };
	tn_tensor *h, *qkv, *part[3], *heads[3], *k, *v, *y, *mask = NULL, *yt, *y2, *proj;
	int rc;

	if ((rc = tn_layer_norm(x, 1, &C, l->ln1_w, l->ln1_b, 1e-5, true, &h)) < 0)
		goto out;
	keep(&s, h);
	if ((rc = tn_linear(h, l->attn_w, l->attn_b, &qkv)) < 0)
		goto out;
	keep(&s, qkv);
	for (int i = 0; i < 3; i++) {
		tn_tensor *v3;
		if ((rc = tn_narrow(qkv, 1, i * C, C, &part[i])) < 0)
			goto out;
		keep(&s, part[i]);
		if ((rc = tn_view(part[i], 3, (int64_t[]){ n, H, D }, &v3)) < 0)
			goto out;
		keep(&s, v3);
		if ((rc = tn_transpose(v3, 0, 1, &heads[i])) < 0) /* [H, n, D] */
			goto out;
		keep(&s, heads[i]);
	}
	if (c) {
		/* Append this step's keys and values, then attend over all of them. */
		for (int i = 1; i < 3; i++) {
			tn_tensor *dst, *cache = i == 1 ? c->k[layer] : c->v[layer];
			if ((rc = tn_narrow(cache, 1, len, n, &dst)) < 0)
				goto out;
			keep(&s, dst);
			if ((rc = tn_copy_(dst, heads[i], false)) < 0)
				goto out;
		}
		if ((rc = tn_narrow(c->k[layer], 1, 0, len + n, &k)) < 0)
			goto out;
		keep(&s, k);
		if ((rc = tn_narrow(c->v[layer], 1, 0, len + n, &v)) < 0)
			goto out;
		keep(&s, v);
	} else {
		k = heads[1];
		v = heads[2];
	}
	if (len > 0 && n > 1) {
		if ((rc = causal_mask(len, n, &mask)) < 0)
			goto out;
		keep(&s, mask);
	}
	/* One query (a decoding step) sees every key; a prompt from position 0 is causal. */
	if ((rc = tn_scaled_dot_product_attention(heads[0], k, v, mask, 0.0, len == 0 && n > 1,
						  NULL, &y)) < 0)
		goto out;
	keep(&s, y);
	if ((rc = tn_transpose(y, 0, 1, &yt)) < 0) /* [n, H, D] */
		goto out;
	keep(&s, yt);
	if ((rc = tn_reshape(yt, 2, (int64_t[]){ n, C }, &y2)) < 0)
		goto out;
	keep(&s, y2);
	if ((rc = tn_linear(y2, l->proj_w, l->proj_b, &proj)) < 0)
		goto out;
	keep(&s, proj);
	rc = tn_add(x, proj, tn_scalar_int(1), ret);
out:
	drop(&s);
	return rc;
}

/* x + MLP block of layer @l. */
static int mlp(const struct gpt2 *m, const struct gpt2_layer *l, tn_tensor *x, tn_tensor **ret)
{
	struct scope s = { .n = 0 };
	tn_tensor *h, *f, *g, *p;
	int rc;
	if ((rc = tn_layer_norm(x, 1, &m->cfg.n_embd, l->ln2_w, l->ln2_b, 1e-5, true, &h)) < 0)
		goto out;
	keep(&s, h);
	if ((rc = tn_linear(h, l->fc_w, l->fc_b, &f)) < 0)
		goto out;
	keep(&s, f);
	if ((rc = tn_gelu(f, "tanh", &g)) < 0)
		goto out;
	keep(&s, g);
	if ((rc = tn_linear(g, l->fc2_w, l->fc2_b, &p)) < 0)
		goto out;
	keep(&s, p);
	rc = tn_add(x, p, tn_scalar_int(1), ret);
out:
	drop(&s);
	return rc;
}

int gpt2_forward(const struct gpt2 *m, struct gpt2_cache *c, const int64_t *tokens, int64_t n,
		 tn_tensor **ret_logits)
{
	const int64_t len = c ? c->len : 0;
	tn_tensor *idx = NULL, *emb = NULL, *pos = NULL, *x = NULL, *y = NULL;
	int rc;

	model_clear_error();
	if (n <= 0 || len + n > m->cfg.n_ctx)
		return model_fail(TN_EINVAL, "gpt2: %lld tokens after %lld do not fit a context "
				    "of %lld", (long long)n, (long long)len, (long long)m->cfg.n_ctx);
	for (int64_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab)
			return model_fail(TN_EINVAL, "gpt2: token %lld is outside the vocabulary "
					    "of %lld", (long long)tokens[i], (long long)m->cfg.vocab);
	if ((rc = tn_empty(1, &n, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &idx)) < 0)
		return rc;
	memcpy(tn_tensor_data(idx), tokens, (size_t)n * sizeof(int64_t));
	if ((rc = tn_embedding(m->wte, idx, -1, false, false, &emb)) < 0 ||
	    (rc = tn_narrow(m->wpe, 0, len, n, &pos)) < 0 ||
	    (rc = tn_add(emb, pos, tn_scalar_int(1), &x)) < 0)
		goto out;
	for (int64_t i = 0; i < m->cfg.n_layer; i++) {
		if ((rc = attention(m, &m->layers[i], c, i, x, n, &y)) < 0)
			goto out;
		tn_tensor_unref(x);
		x = y;
		y = NULL;
		if ((rc = mlp(m, &m->layers[i], x, &y)) < 0)
			goto out;
		tn_tensor_unref(x);
		x = y;
		y = NULL;
	}
	if ((rc = tn_layer_norm(x, 1, &m->cfg.n_embd, m->lnf_w, m->lnf_b, 1e-5, true, &y)) < 0)
		goto out;
	if ((rc = tn_linear(y, m->wte, NULL, ret_logits)) < 0)
		goto out;
	if (c)
		c->len += n;
out:
	tn_tensor_unref(idx);
	tn_tensor_unref(emb);
	tn_tensor_unref(pos);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	return rc;
}

/* The index of the largest logit of row @row of the float32 [rows, vocab] @logits. */
static int64_t argmax_row(const tn_tensor *logits, int64_t row)
{
	const int64_t V = tn_tensor_sizes(logits)[1];
	const float *p = (const float *)tn_tensor_data((tn_tensor *)logits) + row * V;
	int64_t best = 0;
	for (int64_t j = 1; j < V; j++)
		if (p[j] > p[best])
			best = j;
	return best;
}

int gpt2_generate(const struct gpt2 *m, struct gpt2_cache *c, const int64_t *prompt,
		  int64_t n_prompt, int64_t n_new, int64_t *out, tn_tensor **ret_prompt_logits)
{
	tn_tensor *logits = NULL;
	int rc;
	if (c->len != 0)
		return model_fail(TN_EINVAL, "gpt2: generation needs an empty cache");
	if ((rc = gpt2_forward(m, c, prompt, n_prompt, &logits)) < 0)
		return rc;
	for (int64_t i = 0; i < n_new; i++) {
		int64_t rows = tn_tensor_sizes(logits)[0];
		out[i] = argmax_row(logits, rows - 1);
		if (i == 0 && ret_prompt_logits)
			*ret_prompt_logits = tn_tensor_ref(logits);
		tn_tensor_unref(logits);
		logits = NULL;
		if (i + 1 < n_new && (rc = gpt2_forward(m, c, &out[i], 1, &logits)) < 0)
			return rc;
	}
	tn_tensor_unref(logits);
	return 0;
}
