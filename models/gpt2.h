/* SPDX-License-Identifier: MIT */
/*
 * A GPT-2 forward pass and greedy decoder on libtensor's operators (models/gpt2.c).
 *
 * The weights are tensors found by name (HuggingFace GPT-2's names, torch.nn.Linear layouts:
 * "wte.weight", "h.0.attn.c_attn.weight" [3C, C], ...), typically mapped zero-copy from a
 * sealed arena that tensord loaded: the model never copies them. The key/value cache is a
 * pair of [heads, context, head_dim] tensors per layer, made by tn_empty, so that they live
 * wherever the calling thread's allocator puts them (an arena after tn_arena_use).
 */
#ifndef TN_MODELS_GPT2_H
#define TN_MODELS_GPT2_H

#include <stdint.h>

#include <tensor.h>

#include "common.h"

struct gpt2_config {
	int64_t n_layer, n_embd, n_head, vocab, n_ctx;
};

struct gpt2_layer {
	tn_tensor *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
	tn_tensor *ln2_w, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
};

struct gpt2 {
	struct gpt2_config cfg;
	tn_tensor *wte, *wpe, *lnf_w, *lnf_b;
	struct gpt2_layer *layers;
};

struct gpt2_cache {
	int64_t len; /* positions filled */
	int64_t n_layer;
	tn_tensor **k, **v;
};

/* Find the weight called @name (a new reference in *ret); 0 or a TN_E* code. */
typedef model_get_fn gpt2_get_fn;

/* Bind every weight of a model of @cfg through @get, checking each one's dtype (float32) and
 * shape; 0 or a TN_E* code with the message naming the weight. */
int gpt2_load(struct gpt2 *m, const struct gpt2_config *cfg, gpt2_get_fn get, void *ctx);
void gpt2_free(struct gpt2 *m);

int gpt2_cache_init(const struct gpt2 *m, struct gpt2_cache *c);
void gpt2_cache_free(struct gpt2_cache *c);

/* The logits [n, vocab] of @n tokens following the @c->len already in the cache (NULL: no
 * cache, the tokens start at position 0), appending their keys and values to it. */
int gpt2_forward(const struct gpt2 *m, struct gpt2_cache *c, const int64_t *tokens, int64_t n,
		 tn_tensor **ret_logits);

/* Greedy decoding: @n_new tokens after @prompt (the cache must be empty), into @out; the
 * prompt's logits in *ret_prompt_logits when not NULL. */
int gpt2_generate(const struct gpt2 *m, struct gpt2_cache *c, const int64_t *prompt,
		  int64_t n_prompt, int64_t n_new, int64_t *out, tn_tensor **ret_prompt_logits);

/* The message of the last failure of a gpt2_* call in this thread (the model's own, or
 * libtensor's tn_last_error). */
const char *gpt2_last_error(void);

#endif /* TN_MODELS_GPT2_H */
