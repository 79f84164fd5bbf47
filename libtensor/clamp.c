/* SPDX-License-Identifier: MIT */
/*
 * clamp, clamp_min and clamp_max on the TensorIterator, with Scalar and Tensor bounds, each
 * functional, out= and in place, with Meta kernels.
 *
 * The Scalar forms follow ATen's clamp meta function: a floating self keeps its dtype; an
 * integral or bool one promotes with the bounds as wrapped numbers (clamp(int64, 0.5) is
 * float32), which an in-place call may not do; the output must then have the result dtype
 * exactly (build_unary_op). A NaN bound of clamp (both bounds given), clamp_min or clamp_max
 * makes every element NaN, as ATen fills; a NaN single bound of clamp leaves the elements.
 * The Tensor forms are binary-op style: all operands promote to the common dtype, which must
 * cast safely to the output, and a NaN bound element gives NaN there.
 */
#include <math.h>
#include <string.h>

#include "iter.h"
#include "loops.h"
#include "ops_kernels.h"
#include "stub.h"

static const char none_error[] = "torch.clamp: At least one of 'min' or 'max' must not be None";

/* The C++ names PyTorch prints for a tensor's dtype (caffe2::TypeMeta) in the in-place
 * promotion check of the Scalar forms; only integral and bool tensors can reach it. */
static const char *cpp_type_name(enum tn_dtype dt)
{
	static const char *const names[] = { "bool", "unsigned char", "signed char", "short int",
					     "int", "long int", "c10::Half", "c10::BFloat16",
					     "float", "double" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == TN_NUM_DTYPES, "a name per dtype");
	return names[dt];
}

struct clamp_ctx {
	tn__clamp_fn fn;
	int mode;
	enum tn_dtype ct;
	bool scalar; /* bounds in lo and hi below, else operands 2 (and 3) */
	_Alignas(8) unsigned char lo[8];
	_Alignas(8) unsigned char hi[8];
};

static void clamp_row(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	const struct clamp_ctx *c = vctx;
	const char *lo = NULL, *hi = NULL;
	int64_t slo = 0, shi = 0;
	int k = 2;

	if (c->scalar) {
		lo = (const char *)c->lo;
		hi = (const char *)c->hi;
	} else {
		if (c->mode & TN_CLAMP_LO) {
			lo = p[k];
			slo = s[k++];
		}
		if (c->mode & TN_CLAMP_HI) {
			hi = p[k];
			shi = s[k];
		}
	}
	c->fn(c->mode, c->ct, p[0], s[0], p[1], s[1], lo, slo, hi, shi, n);
}

static bool scalar_is_nan(const tn_scalar *v)
{
	return v && v->kind == TN_SCALAR_DOUBLE && isnan(v->v.d);
}

/*
 * The Scalar forms: out = self bounded by @min and/or @max (NULL: None). @out NULL allocates,
 * @out == self is in place. @named: clamp_min or clamp_max, whose NaN bound fills NaN.
 * @run false checks and builds only (Meta).
 */
static int clamp_scalar(tn_tensor *out, const tn_tensor *self, const tn_scalar *min,
			const tn_scalar *max, bool named, bool run, tn_tensor **ret,
			const char *who)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	if ((rc = tn__check_live(self, who)) < 0)
		return rc;
	if (!min && !max)
		return tn__error(TN_EINVAL, "%s", none_error);
	for (int k = 0; k < 2; k++) {
		const tn_scalar *v = k ? max : min;
		if (v && v->kind != TN_SCALAR_BOOL && v->kind != TN_SCALAR_INT &&
		    v->kind != TN_SCALAR_DOUBLE)
			return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)v->kind);
	}
	enum tn_dtype rt = self->dtype;
	if (!tn__is_floating(rt)) {
		enum tn_dtype dtypes[3] = { rt };
		enum tn__prio prio[3] = { self->ndim > 0 ? TN_PRIO_DIM : TN_PRIO_ZERO };
		int n = 1;
		if (min) {
			dtypes[n] = tn__wrapped_scalar_dtype(*min);
			prio[n++] = TN_PRIO_WRAPPED;
		}
		if (max) {
			dtypes[n] = tn__wrapped_scalar_dtype(*max);
			prio[n++] = TN_PRIO_WRAPPED;
		}
		rt = tn__result_type(n, dtypes, prio);
		if (rt != self->dtype && out == self)
			return tn__error(TN_EINVAL,
					 "result type %s can't be cast to the desired output type %s",
					 tn__scalar_type_name(rt), cpp_type_name(self->dtype));
	}
	/* build_unary_op(out, self.to(rt)): self converts chunk by chunk in the loop. */
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = out;
	cfg.tensors[1] = self;
	cfg.check_all_same_dtype = false;
	cfg.has_static_dtype = true;
	cfg.static_dtype = rt;
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	if (it.ops[0].dtype != rt) {
		rc = tn__error(TN_EINVAL, "Found dtype %s but expected %s",
			       tn__scalar_type_name(it.ops[0].dtype), tn__scalar_type_name(rt));
		goto out;
	}
	struct clamp_ctx c = { .mode = (min ? TN_CLAMP_LO : 0) | (max ? TN_CLAMP_HI : 0),
			       .ct = rt, .scalar = true };
	/* ATen fills NaN for a NaN bound of clamp with both bounds, and of clamp_min and
	 * clamp_max; the NaN-propagating mode of the kernel does the same. */
	bool fill_nan = (named || (min && max)) && (scalar_is_nan(min) || scalar_is_nan(max));
	if (fill_nan) {
		c.mode |= TN_CLAMP_NAN;
	} else if (rt == TN_BOOL) {
		/* The kernels PyTorch dispatches to have no bool case. */
		rc = tn__error(TN_EINVAL, "\"%s\" not implemented for 'Bool'",
			       min && max ? "clamp_scalar_cpu"
			       : min	  ? "clamp_min_cpu"
					  : "clamp_max_scalar_cpu");
		goto out;
	}
	/* A fill converts neither bound (ATen calls fill_ before looking at the other one, so
	 * clamp(nan, 1e300) of a float32 tensor gives NaN, not an overflow): both are NaN. */
	const tn_scalar nan = tn_scalar_double(NAN);
	const tn_scalar *lo = fill_nan && min ? &nan : min, *hi = fill_nan && max ? &nan : max;
	if ((lo && (rc = tn__scalar_to_element(*lo, rt, c.lo)) < 0) ||
	    (hi && (rc = tn__scalar_to_element(*hi, rt, c.hi)) < 0))
		goto out;
	if (run) {
		c.fn = (tn__clamp_fn)tn__stub_get(&tn__clamp_stub);
		tn__chunked_for_each(&it, (const enum tn_dtype[]){ rt, rt }, clamp_row, &c);
	}
	if (ret)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
	return rc;
}

/* The Tensor forms: out = self bounded by @min and/or @max (NULL: None), broadcast and
 * promoted to the common dtype. */
static int clamp_tensor(tn_tensor *out, const tn_tensor *self, const tn_tensor *min,
			const tn_tensor *max, bool run, tn_tensor **ret, const char *who)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	if (!min && !max)
		return tn__error(TN_EINVAL, "%s", none_error);
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.tensors[0] = out;
	cfg.tensors[1] = self;
	cfg.ninputs = 1;
	if (min)
		cfg.tensors[++cfg.ninputs] = min;
	if (max)
		cfg.tensors[++cfg.ninputs] = max;
	cfg.promote_inputs_to_common_dtype = true;
	cfg.cast_common_dtype_to_outputs = true;
	cfg.enforce_safe_casting_to_output = true;
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	enum tn_dtype ct = it.common_dtype;
	/* With one bound ATen runs maximum or minimum, which take bool; clamp_cpu does not. */
	if (min && max && ct == TN_BOOL) {
		rc = tn__error(TN_EINVAL, "\"clamp_cpu\" not implemented for 'Bool'");
		goto out;
	}
	if (run) {
		struct clamp_ctx c = { (tn__clamp_fn)tn__stub_get(&tn__clamp_stub),
				       (min ? TN_CLAMP_LO : 0) | (max ? TN_CLAMP_HI : 0) |
					       TN_CLAMP_NAN,
				       ct, false, { 0 }, { 0 } };
		tn__chunked_for_each(&it, (const enum tn_dtype[]){ ct, ct, ct, ct }, clamp_row, &c);
	}
	if (ret)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
	return rc;
}

static int need_ret(void *ret, const char *who)
{
	return ret ? 0 : tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
}

/* The kernels of the table, CPU (RUN true) and Meta. */
#define CLAMP_KERNELS(SUFFIX, RUN)                                                           \
	int tn__clamp_##SUFFIX(const tn_tensor *self, const tn_scalar *min, const tn_scalar *max, \
			       tn_tensor **ret_tensor)                                          \
	{                                                                                    \
		int rc = need_ret(ret_tensor, "clamp");                                      \
		return rc ? rc                                                               \
			  : clamp_scalar(NULL, self, min, max, false, RUN, ret_tensor, "clamp"); \
	}                                                                                    \
	int tn__clamp_out_##SUFFIX(const tn_tensor *self, const tn_scalar *min,                 \
				   const tn_scalar *max, tn_tensor *out)                        \
	{                                                                                    \
		int rc = tn__check_live(out, "clamp");                                       \
		return rc ? rc : clamp_scalar(out, self, min, max, false, RUN, NULL, "clamp"); \
	}                                                                                    \
	int tn__clamp__##SUFFIX(tn_tensor *self, const tn_scalar *min, const tn_scalar *max)    \
	{                                                                                    \
		return clamp_scalar(self, self, min, max, false, RUN, NULL, "clamp_");       \
	}                                                                                    \
	int tn__clamp_tensor_##SUFFIX(const tn_tensor *self, const tn_tensor *min,              \
				      const tn_tensor *max, tn_tensor **ret_tensor)             \
	{                                                                                    \
		int rc = need_ret(ret_tensor, "clamp");                                      \
		return rc ? rc : clamp_tensor(NULL, self, min, max, RUN, ret_tensor, "clamp"); \
	}                                                                                    \
	int tn__clamp_tensor_out_##SUFFIX(const tn_tensor *self, const tn_tensor *min,          \
					  const tn_tensor *max, tn_tensor *out)                 \
	{                                                                                    \
		int rc = tn__check_live(out, "clamp");                                       \
		return rc ? rc : clamp_tensor(out, self, min, max, RUN, NULL, "clamp");       \
	}                                                                                    \
	int tn__clamp_tensor__##SUFFIX(tn_tensor *self, const tn_tensor *min,                   \
				       const tn_tensor *max)                                    \
	{                                                                                    \
		int rc = tn__check_live(self, "clamp_");                                     \
		return rc ? rc : clamp_tensor(self, self, min, max, RUN, NULL, "clamp_");     \
	}

/* clamp_min (LO true) and clamp_max: one bound, never None. */
#define ONE_BOUND_KERNELS(NAME, LO, SUFFIX, RUN)                                             \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, tn_scalar b, tn_tensor **ret_tensor)   \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc                                                               \
			  : clamp_scalar(NULL, self, LO ? &b : NULL, LO ? NULL : &b, true, RUN, \
					 ret_tensor, #NAME);                                  \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, tn_scalar b, tn_tensor *out)       \
	{                                                                                    \
		int rc = tn__check_live(out, #NAME);                                         \
		return rc ? rc                                                               \
			  : clamp_scalar(out, self, LO ? &b : NULL, LO ? NULL : &b, true, RUN, \
					 NULL, #NAME);                                        \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, tn_scalar b)                                \
	{                                                                                    \
		return clamp_scalar(self, self, LO ? &b : NULL, LO ? NULL : &b, true, RUN, NULL, \
				    #NAME "_");                                               \
	}                                                                                    \
	int tn__##NAME##_tensor_##SUFFIX(const tn_tensor *self, const tn_tensor *b,             \
					 tn_tensor **ret_tensor)                                \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc                                                               \
			  : clamp_tensor(NULL, self, LO ? b : NULL, LO ? NULL : b, RUN,       \
					 ret_tensor, #NAME);                                  \
	}                                                                                    \
	int tn__##NAME##_tensor_out_##SUFFIX(const tn_tensor *self, const tn_tensor *b,         \
					     tn_tensor *out)                                    \
	{                                                                                    \
		int rc = tn__check_live(out, #NAME);                                         \
		return rc ? rc                                                               \
			  : clamp_tensor(out, self, LO ? b : NULL, LO ? NULL : b, RUN, NULL,  \
					 #NAME);                                              \
	}                                                                                    \
	int tn__##NAME##_tensor__##SUFFIX(tn_tensor *self, const tn_tensor *b)                  \
	{                                                                                    \
		int rc = tn__check_live(self, #NAME "_");                                    \
		return rc ? rc                                                               \
			  : clamp_tensor(self, self, LO ? b : NULL, LO ? NULL : b, RUN, NULL, \
					 #NAME "_");                                          \
	}

CLAMP_KERNELS(cpu, true)
CLAMP_KERNELS(meta, false)
ONE_BOUND_KERNELS(clamp_min, true, cpu, true)
ONE_BOUND_KERNELS(clamp_min, true, meta, false)
ONE_BOUND_KERNELS(clamp_max, false, cpu, true)
ONE_BOUND_KERNELS(clamp_max, false, meta, false)
