/* SPDX-License-Identifier: MIT */
/*
 * Unary operators on the TensorIterator, each functional, out= and in place, with Meta
 * kernels: the floating functions (exp, log, sin, sigmoid, ...), which compute integer and
 * bool inputs in float32 as PyTorch does, and the ones that keep the input's dtype (neg, abs,
 * sign, relu, floor, ceil, round, trunc). Inputs or outputs of another dtype than the
 * compute dtype are converted in 256-element chunks on the stack, as for the binary ones.
 */
#include <string.h>

#include "iter.h"
#include "ops_kernels.h"
#include "stub.h"

#define CHUNK 256

static const struct {
	const char *name;
	bool floating; /* integer and bool inputs compute in float32 */
	const char *bool_error; /* PyTorch's refusal of bool inputs, or NULL */
} unops[TN_NUM_UNOPS] = {
	[TN_UN_NEG] = { "neg", false,
			"Negation, the `-` operator, on a bool tensor is not supported. If you are "
			"trying to invert a mask, use the `~` or `logical_not()` operator "
			"instead." },
	[TN_UN_ABS] = { "abs", false, "\"abs_cpu\" not implemented for 'Bool'" },
	[TN_UN_SIGN] = { "sign", false, NULL },
	[TN_UN_EXP] = { "exp", true, NULL },
	[TN_UN_EXPM1] = { "expm1", true, NULL },
	[TN_UN_LOG] = { "log", true, NULL },
	[TN_UN_LOG1P] = { "log1p", true, NULL },
	[TN_UN_LOG2] = { "log2", true, NULL },
	[TN_UN_SQRT] = { "sqrt", true, NULL },
	[TN_UN_RSQRT] = { "rsqrt", true, NULL },
	[TN_UN_SIN] = { "sin", true, NULL },
	[TN_UN_COS] = { "cos", true, NULL },
	[TN_UN_TAN] = { "tan", true, NULL },
	[TN_UN_TANH] = { "tanh", true, NULL },
	[TN_UN_SIGMOID] = { "sigmoid", true, NULL },
	[TN_UN_RELU] = { "relu", false, "Boolean inputs not supported for relu" },
	[TN_UN_ERF] = { "erf", true, NULL },
	[TN_UN_FLOOR] = { "floor", false, "\"floor_vml_cpu\" not implemented for 'Bool'" },
	[TN_UN_CEIL] = { "ceil", false, "\"ceil_vml_cpu\" not implemented for 'Bool'" },
	[TN_UN_ROUND] = { "round", false, "\"round_vml_cpu\" not implemented for 'Bool'" },
	[TN_UN_TRUNC] = { "trunc", false, "\"trunc_vml_cpu\" not implemented for 'Bool'" },
	[TN_UN_RECIPROCAL] = { "reciprocal", true, NULL },
};

struct un_ctx {
	tn__unary_fn fn;
	tn__cast_fn cast;
	int op;
	enum tn_dtype ct, dt[2];
	bool cast_any;
};

static void unary_loop(void *vctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	const struct un_ctx *c = vctx;
	const int64_t w = (int64_t)tn__itemsize(c->ct);
	_Alignas(64) unsigned char buf[2][CHUNK * 8];

	for (int64_t j = 0; j < n1; j++) {
		char *o = data[0] + j * strides[2], *a = data[1] + j * strides[3];
		if (!c->cast_any) {
			c->fn(c->op, c->ct, o, strides[0], a, strides[1], n0);
			continue;
		}
		for (int64_t i = 0; i < n0; i += CHUNK) {
			int64_t m = n0 - i < CHUNK ? n0 - i : CHUNK;
			char *src = a + i * strides[1], *dst = o + i * strides[0];
			const char *q = src;
			int64_t qs = strides[1];
			if (c->dt[1] != c->ct) {
				c->cast((char *)buf[1], c->ct, w, src, c->dt[1], strides[1], m);
				q = (const char *)buf[1];
				qs = w;
			}
			bool out_cast = c->dt[0] != c->ct;
			c->fn(c->op, c->ct, out_cast ? (char *)buf[0] : dst, out_cast ? w : strides[0], q,
			      qs, m);
			if (out_cast)
				c->cast(dst, c->dt[0], strides[0], (char *)buf[0], c->ct, w, m);
		}
	}
}

/* out = f(a): @out NULL allocates, @out == a is in place; @run false builds only (Meta). */
static int unary(int op, tn_tensor *out, const tn_tensor *a, bool run, tn_tensor **ret)
{
	const char *who = unops[op].name;
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = out;
	cfg.tensors[1] = a;
	cfg.promote_inputs_to_common_dtype = true;
	cfg.promote_integer_inputs_to_float = unops[op].floating;
	cfg.cast_common_dtype_to_outputs = true;
	cfg.enforce_safe_casting_to_output = true;
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	if (it.common_dtype == TN_BOOL && unops[op].bool_error) {
		rc = tn__error(TN_EINVAL, "%s", unops[op].bool_error);
		goto out;
	}
	if (run && it.numel > 0) {
		struct un_ctx c = { (tn__unary_fn)tn__stub_get(&tn__unary_stub),
				    (tn__cast_fn)tn__stub_get(&tn__cast_stub), op, it.common_dtype,
				    { it.ops[0].dtype, it.ops[1].dtype }, false };
		c.cast_any = c.dt[0] != c.ct || c.dt[1] != c.ct;
		tn__iter_for_each(&it, unary_loop, &c, TN_GRAIN_SIZE);
	}
	if (ret)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
	return rc;
}

#define UNARY_KERNELS_RUN(NAME, OP, SUFFIX, RUN)                                             \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                \
	{                                                                                    \
		if (!ret_tensor)                                                             \
			return tn__error(TN_EINVAL, "%s: NULL ret_tensor", #NAME);           \
		return unary(OP, NULL, self, RUN, ret_tensor);                               \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, tn_tensor *out)                    \
	{                                                                                    \
		int rc = tn__check_live(out, #NAME);                                         \
		return rc ? rc : unary(OP, out, self, RUN, NULL);                            \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self)                                             \
	{                                                                                    \
		int rc = tn__check_live(self, #NAME "_");                                    \
		return rc ? rc : unary(OP, self, self, RUN, NULL);                           \
	}

#define UNARY_KERNELS(NAME, OP)                      \
	UNARY_KERNELS_RUN(NAME, OP, cpu, true)       \
	UNARY_KERNELS_RUN(NAME, OP, meta, false)

UNARY_KERNELS(neg, TN_UN_NEG)
UNARY_KERNELS(abs, TN_UN_ABS)
UNARY_KERNELS(sign, TN_UN_SIGN)
UNARY_KERNELS(exp, TN_UN_EXP)
UNARY_KERNELS(expm1, TN_UN_EXPM1)
UNARY_KERNELS(log, TN_UN_LOG)
UNARY_KERNELS(log1p, TN_UN_LOG1P)
UNARY_KERNELS(log2, TN_UN_LOG2)
UNARY_KERNELS(sqrt, TN_UN_SQRT)
UNARY_KERNELS(rsqrt, TN_UN_RSQRT)
UNARY_KERNELS(sin, TN_UN_SIN)
UNARY_KERNELS(cos, TN_UN_COS)
UNARY_KERNELS(tan, TN_UN_TAN)
UNARY_KERNELS(tanh, TN_UN_TANH)
UNARY_KERNELS(sigmoid, TN_UN_SIGMOID)
UNARY_KERNELS(relu, TN_UN_RELU)
UNARY_KERNELS(erf, TN_UN_ERF)
UNARY_KERNELS(floor, TN_UN_FLOOR)
UNARY_KERNELS(ceil, TN_UN_CEIL)
UNARY_KERNELS(round, TN_UN_ROUND)
UNARY_KERNELS(trunc, TN_UN_TRUNC)
UNARY_KERNELS(reciprocal, TN_UN_RECIPROCAL)
