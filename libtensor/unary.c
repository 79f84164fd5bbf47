/* SPDX-License-Identifier: MIT */
/*
 * Unary operators on the TensorIterator, each functional, out= and in place, with Meta
 * kernels: the floating functions (exp, log, sin, sigmoid, ...), which compute integer and
 * bool inputs in float32 as PyTorch does, and the ones that keep the input's dtype (neg, abs,
 * sign, relu, floor, ceil, round, trunc); gelu and bitwise_not, which PyTorch builds as
 * "unary ops" proper (an out= tensor must have the input's dtype, nothing is promoted); and
 * the predicates logical_not, isnan, isinf and isfinite, whose functional results are bool
 * and whose out= tensors may have any dtype. Inputs or outputs of another dtype than the
 * compute dtype are converted in 256-element chunks on the stack (loops.h).
 */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "iter.h"
#include "loops.h"
#include "ops_kernels.h"
#include "stub.h"

static const struct {
	const char *name;
	bool floating; /* integer and bool inputs compute in float32 */
	const char *bool_error; /* PyTorch's refusal of bool inputs, or NULL */
	/* ATen's build_unary_op: the output must have the input's dtype, nothing promotes. */
	bool same_dtype;
	/* With same_dtype: the kernel's name in PyTorch's refusal of the dtypes it lacks, and
	 * whether those are the integral ones (else the floating ones). */
	const char *impl;
	bool floating_only;
	/* With same_dtype: the bool refusal comes before the out= dtype check (neg's meta
	 * function checks its input first). */
	bool bool_first;
	/* The out= form is PyTorch's generated one: the functional result converted into out,
	 * of any dtype. */
	bool out_copies;
} unops[TN_NUM_UNOPS] = {
	/* neg, abs, sign, floor, ceil, round and trunc are ATen "unary ops" proper: an out=
	 * tensor must have the input's dtype ("Found dtype Char but expected Short"). */
	[TN_UN_NEG] = { "neg", false,
			"Negation, the `-` operator, on a bool tensor is not supported. If you are "
			"trying to invert a mask, use the `~` or `logical_not()` operator "
			"instead.",
			true, NULL, false, true },
	[TN_UN_ABS] = { "abs", false, "\"abs_cpu\" not implemented for 'Bool'", true },
	[TN_UN_SIGN] = { "sign", false, NULL, true },
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
	[TN_UN_RELU] = { "relu", false, "Boolean inputs not supported for relu", .out_copies = true },
	[TN_UN_ERF] = { "erf", true, NULL },
	[TN_UN_FLOOR] = { "floor", false, "\"floor_vml_cpu\" not implemented for 'Bool'", true },
	[TN_UN_CEIL] = { "ceil", false, "\"ceil_vml_cpu\" not implemented for 'Bool'", true },
	[TN_UN_ROUND] = { "round", false, "\"round_vml_cpu\" not implemented for 'Bool'", true },
	[TN_UN_TRUNC] = { "trunc", false, "\"trunc_vml_cpu\" not implemented for 'Bool'", true },
	[TN_UN_RECIPROCAL] = { "reciprocal", true, NULL },
	[TN_UN_GELU] = { "gelu", false, NULL, true, "GeluKernelImpl", true },
	[TN_UN_GELU_TANH] = { "gelu", false, NULL, true, "GeluKernelImpl", true },
	[TN_UN_BITWISE_NOT] = { "bitwise_not", false, NULL, true, "bitwise_not_cpu", false },
	[TN_UN_SILU] = { "silu", false, NULL, true, "silu_cpu", true },
};

struct un_ctx {
	tn__unary_fn fn;
	int op;
	enum tn_dtype ct;
};

static void unary_row(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	const struct un_ctx *c = vctx;
	c->fn(c->op, c->ct, p[0], s[0], p[1], s[1], n);
}

/* ATen's defaults for one output and one input. */
static void unary_config(struct tn_iter_config *cfg, tn_tensor *out, const tn_tensor *a)
{
	tn__iter_config_init(cfg);
	cfg->noutputs = 1;
	cfg->ninputs = 1;
	cfg->tensors[0] = out;
	cfg->tensors[1] = a;
}

static int unary_impl(int op, tn_tensor *out, const tn_tensor *a, enum tn_dispatch_key key,
		      tn_tensor **ret, const char *bad_arg);

/* relu.out as PyTorch 1.13 generates it: relu computed as the functional form computes it,
 * then converted into @out of any dtype (a float relu into a bool out gives true for every
 * nonzero). PyTorch resizes @out; libtensor requires the result's shape. */
static int unary_out_copy(int op, tn_tensor *out, const tn_tensor *a, enum tn_dispatch_key key)
{
	tn_tensor *r = NULL;
	int rc = unary_impl(op, NULL, a, key, &r, NULL);
	if (rc < 0)
		return rc;
	rc = tn__copy_result_into(out, r, key, unops[op].name);
	tn_tensor_unref(r);
	return rc;
}

/*
 * out = f(a): @out NULL allocates, @out == a is in place; @key is the kernel's dispatch key
 * (tn__key_runs).
 * @bad_arg, when not NULL, is the message for an argument found bad after the iterator's
 * checks and before the dtype's (gelu's approximate).
 */
static int unary_impl(int op, tn_tensor *out, const tn_tensor *a, enum tn_dispatch_key key,
		      tn_tensor **ret, const char *bad_arg)
{
	const char *who = unops[op].name;
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	if (unops[op].bool_first && tn__handle_is(a, TN_MAGIC_TENSOR) && a->dtype == TN_BOOL)
		return tn__error(TN_EINVAL, "%s", unops[op].bool_error);
	if (unops[op].out_copies && out && out != a)
		return unary_out_copy(op, out, a, key);
	unary_config(&cfg, out, a);
	if (!unops[op].same_dtype) {
		cfg.promote_inputs_to_common_dtype = true;
		cfg.promote_integer_inputs_to_float = unops[op].floating;
		cfg.cast_common_dtype_to_outputs = true;
		cfg.enforce_safe_casting_to_output = true;
	}
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	enum tn_dtype ct = it.common_dtype;
	if (bad_arg) {
		rc = tn__error(TN_EINVAL, "%s", bad_arg);
		goto out;
	}
	if (ct == TN_BOOL && unops[op].bool_error) {
		rc = tn__error(TN_EINVAL, "%s", unops[op].bool_error);
		goto out;
	}
	if (unops[op].impl && unops[op].floating_only != tn__is_floating(ct)) {
		rc = tn__error(TN_EINVAL, "\"%s\" not implemented for '%s'", unops[op].impl,
			       tn__scalar_type_name(ct));
		goto out;
	}
	if (tn__key_on_backend(key)) {
		rc = tn__device_run(key, &it, TN_KERNEL_UNARY, op, NULL, ct, 1.0, who);
	} else if (key == TN_KEY_CPU) {
		struct un_ctx c = { (tn__unary_fn)tn__stub_get(&tn__unary_stub), op, ct };
		tn__chunked_for_each(&it, (const enum tn_dtype[]){ ct, ct }, unary_row, &c);
	}
	if (ret && rc == 0)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
	return rc;
}

static int unary(int op, tn_tensor *out, const tn_tensor *a, enum tn_dispatch_key key,
		 tn_tensor **ret)
{
	return unary_impl(op, out, a, key, ret, NULL);
}

#define UNARY_KERNELS_KEY(NAME, OP, SUFFIX, KEY)                                             \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                \
	{                                                                                    \
		if (!ret_tensor)                                                             \
			return tn__error(TN_EINVAL, "%s: NULL ret_tensor", #NAME);           \
		return unary(OP, NULL, self, KEY, ret_tensor);                               \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, tn_tensor *out)                    \
	{                                                                                    \
		int rc = tn__check_live(out, #NAME);                                         \
		return rc ? rc : unary(OP, out, self, KEY, NULL);                            \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self)                                             \
	{                                                                                    \
		int rc = tn__check_live(self, #NAME "_");                                    \
		return rc ? rc : unary(OP, self, self, KEY, NULL);                           \
	}

#define UNARY_KERNELS(NAME, OP) TN_FOR_EACH_KEY(UNARY_KERNELS_KEY, NAME, OP)

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
UNARY_KERNELS(silu, TN_UN_SILU)

/* gelu: approximate "none" or "tanh", checked before the dtype as ATen's gelu_out_cpu does. */
static int gelu(tn_tensor *out, const tn_tensor *a, const char *approximate,
		enum tn_dispatch_key key, tn_tensor **ret)
{
	if (approximate && strcmp(approximate, "none") == 0)
		return unary(TN_UN_GELU, out, a, key, ret);
	if (approximate && strcmp(approximate, "tanh") == 0)
		return unary(TN_UN_GELU_TANH, out, a, key, ret);
	return unary_impl(TN_UN_GELU, out, a, TN_KEY_META, NULL,
			  "approximate argument must be either none or tanh.");
}

#define GELU_KERNELS(SUFFIX, KEY)                                                            \
	int tn__gelu_##SUFFIX(const tn_tensor *self, const char *approximate,                   \
			      tn_tensor **ret_tensor)                                           \
	{                                                                                    \
		if (!ret_tensor)                                                             \
			return tn__error(TN_EINVAL, "gelu: NULL ret_tensor");                \
		return gelu(NULL, self, approximate, KEY, ret_tensor);                       \
	}                                                                                    \
	int tn__gelu_out_##SUFFIX(const tn_tensor *self, const char *approximate, tn_tensor *out) \
	{                                                                                    \
		int rc = tn__check_live(out, "gelu");                                        \
		return rc ? rc : gelu(out, self, approximate, KEY, NULL);                    \
	}                                                                                    \
	int tn__gelu__##SUFFIX(tn_tensor *self, const char *approximate)                        \
	{                                                                                    \
		int rc = tn__check_live(self, "gelu_");                                      \
		return rc ? rc : gelu(self, self, approximate, KEY, NULL);                   \
	}

GELU_KERNELS(cpu, TN_KEY_CPU)
GELU_KERNELS(cuda, TN_KEY_CUDA)
GELU_KERNELS(meta, TN_KEY_META)
UNARY_KERNELS(bitwise_not, TN_UN_BITWISE_NOT)

/* ---- predicates: bool results, out= of any dtype ---- */

static const char *const pred_names[] = { "logical_not", "isnan", "isinf", "isfinite" };

struct pred_ctx {
	tn__pred_fn fn;
	int op;
	enum tn_dtype dt;
};

static void pred_row(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	const struct pred_ctx *c = vctx;
	c->fn(c->op, c->dt, p[0], s[0], p[1], s[1], n);
}

/*
 * The strides of PyTorch 1.13's isinf and isfinite results, which are composites there: of
 * an integer or bool tensor zeros_like/ones_like(self, kBool) (preserve_format: the strides
 * of a non-overlapping, dense self, else dense strides in its order); of a floating one
 * self.abs() == inf and (self == self) * (self.abs() != inf), whose layout the same
 * operators give on Meta tensors of self's sizes and strides. Fused here into one kernel,
 * they must still lay the result out as the composites do (size-1 and size-0 dimensions).
 */
static int composite_pred_layout(int op, const tn_tensor *a, tn_tensor **ret, const char *who)
{
	int64_t strides[TN_MAX_DIMS];
	tn_tensor *m = NULL, *ab = NULL, *x = NULL, *y = NULL, *r = NULL;
	int rc;
	if (!tn__is_floating(a->dtype)) {
		tn__preserve_strides(a, strides);
		return tn__empty_like_device(a->storage->device, TN_BOOL, a->ndim, a->sizes,
					     strides, ret, who);
	}
	const tn_scalar inf = tn_scalar_double(INFINITY);
	if ((rc = tn__empty_like_device(TN_META, a->dtype, a->ndim, a->sizes, a->strides, &m,
					who)) < 0 ||
	    (rc = tn_abs(m, &ab)) < 0)
		goto out;
	if (op == TN_PRED_ISINF) {
		rc = tn_eq_scalar(ab, inf, &r);
	} else if ((rc = tn_eq(m, m, &x)) == 0 && (rc = tn_ne_scalar(ab, inf, &y)) == 0) {
		rc = tn_mul(x, y, &r);
	}
	if (rc == 0)
		rc = tn__empty_like_device(a->storage->device, TN_BOOL, a->ndim, a->sizes,
					   r->strides, ret, who);
out:
	tn_tensor_unref(r);
	tn_tensor_unref(y);
	tn_tensor_unref(x);
	tn_tensor_unref(ab);
	tn_tensor_unref(m);
	return rc;
}

/*
 * out = p(a) as bool, as ATen's logical_not_out: no dtype rule, a functional result is bool,
 * an out= (or in-place) tensor of another dtype receives 0 and 1 converted.
 */
static int predicate(int op, tn_tensor *out, const tn_tensor *a, enum tn_dispatch_key key,
		     tn_tensor **ret)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	tn_tensor *laid = NULL;
	int rc;

	if (!out && (op == TN_PRED_ISINF || op == TN_PRED_ISFINITE) &&
	    tn__handle_is(a, TN_MAGIC_TENSOR) && !tn__standard_contiguous(a)) {
		if ((rc = composite_pred_layout(op, a, &laid, pred_names[op])) < 0)
			return rc;
		out = laid;
	}
	unary_config(&cfg, out, a);
	cfg.check_all_same_dtype = false;
	cfg.has_output_dtype = true;
	cfg.output_dtype = TN_BOOL;
	if ((rc = tn__iter_build(&it, &cfg, pred_names[op])) < 0) {
		tn_tensor_unref(laid);
		return rc;
	}
	if (tn__key_on_backend(key)) {
		rc = tn__device_run(key, &it, TN_KERNEL_PRED, op, NULL, it.ops[1].dtype, 1.0,
				    pred_names[op]);
	} else if (key == TN_KEY_CPU) {
		struct pred_ctx c = { (tn__pred_fn)tn__stub_get(&tn__pred_stub), op,
				      it.ops[1].dtype };
		tn__chunked_for_each(&it, (const enum tn_dtype[]){ TN_BOOL, it.ops[1].dtype },
				     pred_row, &c);
	}
	if (ret && rc == 0)
		*ret = laid ? laid : tn__iter_output(&it, 0);
	else
		tn_tensor_unref(laid);
	tn__iter_release(&it);
	return rc;
}

#define PRED_FN_KERNELS(NAME, OP, SUFFIX, KEY)                                               \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                \
	{                                                                                    \
		if (!ret_tensor)                                                             \
			return tn__error(TN_EINVAL, "%s: NULL ret_tensor", #NAME);           \
		return predicate(OP, NULL, self, KEY, ret_tensor);                           \
	}
#define PRED_OUT_KERNELS(NAME, OP, SUFFIX, KEY)                                              \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, tn_tensor *out)                    \
	{                                                                                    \
		int rc = tn__check_live(out, #NAME);                                         \
		return rc ? rc : predicate(OP, out, self, KEY, NULL);                        \
	}
#define PRED_KERNELS(NAME, OP, SUFFIX, KEY)     \
	PRED_FN_KERNELS(NAME, OP, SUFFIX, KEY)  \
	PRED_OUT_KERNELS(NAME, OP, SUFFIX, KEY)

#define LOGICAL_NOT_INPLACE(NAME, OP, SUFFIX, KEY)                                           \
	int tn__##NAME##__##SUFFIX(tn_tensor *self)                                             \
	{                                                                                    \
		int rc = tn__check_live(self, #NAME "_");                                    \
		return rc ? rc : predicate(OP, self, self, KEY, NULL);                       \
	}

TN_FOR_EACH_KEY(PRED_KERNELS, logical_not, TN_PRED_LOGICAL_NOT)
TN_FOR_EACH_KEY(LOGICAL_NOT_INPLACE, logical_not, TN_PRED_LOGICAL_NOT)
TN_FOR_EACH_KEY(PRED_KERNELS, isnan, TN_PRED_ISNAN)
TN_FOR_EACH_KEY(PRED_KERNELS, isinf, TN_PRED_ISINF)
TN_FOR_EACH_KEY(PRED_FN_KERNELS, isfinite, TN_PRED_ISFINITE)
