/* SPDX-License-Identifier: MIT */
/*
 * where on the TensorIterator: out = condition ? self : other, with three-way broadcasting,
 * functional and out=, with Tensor or Scalar self and other, and Meta kernels.
 *
 * As PyTorch 1.13's where: self and other promote to their result type (tensors with
 * dimensions over zero-dim tensors over Scalars, which count as wrapped numbers), a Scalar
 * becomes a zero-dim tensor of that dtype (with the overflow check of scalar_tensor), and the
 * condition must be bool, or uint8 (deprecated in PyTorch, which warns; libtensor does not
 * print and reads nonzero as true). The condition takes no part in the promotion. Operands of
 * another dtype than the result are converted chunk by chunk (loops.h).
 */
#include <string.h>

#include "backend.h"
#include "iter.h"
#include "loops.h"
#include "ops_kernels.h"
#include "stub.h"

struct where_ctx {
	tn__where_fn fn;
	size_t itemsize;
};

static void where_row(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	const struct where_ctx *c = vctx;
	c->fn(c->itemsize, p[0], s[0], p[1], s[1], p[2], s[2], p[3], s[3], n);
}

/* A Scalar operand as ATen's scalar_tensor: a zero-dim tensor of @dtype on @dev. */
static int scalar_tensor(tn_scalar v, enum tn_dtype dtype, tn_device dev, tn_tensor **ret)
{
	unsigned char elem[8];
	int rc;
	if ((rc = tn__scalar_to_element(v, dtype, elem)) < 0)
		return rc;
	if ((rc = tn__empty_like_device(dev, dtype, 0, NULL, NULL, ret, "where")) < 0)
		return rc;
	if (dev.type != TN_DEVICE_META)
		memcpy(tn__data(*ret), elem, tn__itemsize(dtype));
	return 0;
}

/*
 * out = cond ? a : b. @as / @bs, when not NULL, replace @a / @b by a Scalar. @out NULL
 * allocates. @key is the kernel's dispatch key (tn__key_runs).
 */
static int where_impl(tn_tensor *out, const tn_tensor *cond, const tn_tensor *a,
		      const tn_tensor *b, const tn_scalar *as, const tn_scalar *bs,
		      enum tn_dispatch_key key, tn_tensor **ret)
{
	const tn_tensor *ops[2] = { a, b };
	const tn_scalar *scalars[2] = { as, bs };
	tn_tensor *wrapped[2] = { NULL, NULL };
	enum tn_dtype dtypes[2];
	enum tn__prio prio[2];
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	if ((rc = tn__check_live(cond, "where")) < 0)
		return rc;
	for (int k = 0; k < 2; k++) {
		if (scalars[k]) {
			enum tn_scalar_kind kind = scalars[k]->kind;
			if (kind != TN_SCALAR_BOOL && kind != TN_SCALAR_INT && kind != TN_SCALAR_DOUBLE)
				return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)kind);
			dtypes[k] = tn__wrapped_scalar_dtype(*scalars[k]);
			prio[k] = TN_PRIO_WRAPPED;
		} else {
			if ((rc = tn__check_live(ops[k], "where")) < 0)
				return rc;
			dtypes[k] = ops[k]->dtype;
			prio[k] = ops[k]->ndim > 0 ? TN_PRIO_DIM : TN_PRIO_ZERO;
		}
	}
	enum tn_dtype rt = dtypes[0] == dtypes[1] && !as && !bs ? dtypes[0]
							      : tn__result_type(2, dtypes, prio);
	for (int k = 0; k < 2; k++) {
		if (!scalars[k])
			continue;
		/* On the host beside CUDA tensors too: the kernel gets its value. */
		tn_device dev = cond->storage->device.type == TN_DEVICE_META
					? cond->storage->device
					: (tn_device){ TN_DEVICE_CPU, 0 };
		if ((rc = scalar_tensor(*scalars[k], rt, dev, &wrapped[k])) < 0)
			goto fail;
		ops[k] = wrapped[k];
	}
	if (cond->dtype != TN_BOOL && cond->dtype != TN_UINT8) {
		rc = tn__error(TN_EINVAL,
			       "where expected condition to be a boolean tensor, but got a tensor "
			       "with dtype %s",
			       tn__scalar_type_name(cond->dtype));
		goto fail;
	}
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 3;
	cfg.tensors[0] = out;
	cfg.tensors[1] = cond;
	cfg.tensors[2] = ops[0];
	cfg.tensors[3] = ops[1];
	cfg.check_all_same_dtype = false;
	cfg.has_static_dtype = true;
	cfg.static_dtype = rt;
	if ((rc = tn__iter_build(&it, &cfg, "where")) < 0)
		goto fail;
	/* PyTorch 1.13 fails an internal assert here; this is the check newer releases make. */
	if (it.ops[0].dtype != rt) {
		rc = tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s instead",
			       tn__scalar_type_name(rt), tn__scalar_type_name(it.ops[0].dtype));
		goto out;
	}
	if (tn__key_on_backend(key)) {
		rc = tn__device_run(key, &it, TN_KERNEL_WHERE, 0, NULL, rt, 1.0, "where");
	} else if (key == TN_KEY_CPU) {
		struct where_ctx c = { (tn__where_fn)tn__stub_get(&tn__where_stub),
				       tn__itemsize(rt) };
		tn__chunked_for_each(&it, (const enum tn_dtype[]){ rt, cond->dtype, rt, rt },
				     where_row, &c);
	}
	if (ret && rc == 0)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
fail:
	tn_tensor_unref(wrapped[0]);
	tn_tensor_unref(wrapped[1]);
	return rc;
}

static int need_ret(void *ret)
{
	return ret ? 0 : tn__error(TN_EINVAL, "where: NULL ret_tensor");
}

#define WHERE_KERNELS(SUFFIX, KEY)                                                           \
	int tn__where_##SUFFIX(const tn_tensor *condition, const tn_tensor *self,               \
			       const tn_tensor *other, tn_tensor **ret_tensor)                  \
	{                                                                                    \
		int rc = need_ret(ret_tensor);                                               \
		return rc ? rc                                                               \
			  : where_impl(NULL, condition, self, other, NULL, NULL, KEY, ret_tensor); \
	}                                                                                    \
	int tn__where_out_##SUFFIX(const tn_tensor *condition, const tn_tensor *self,           \
				   const tn_tensor *other, tn_tensor *out)                      \
	{                                                                                    \
		int rc = tn__check_live(out, "where");                                       \
		return rc ? rc : where_impl(out, condition, self, other, NULL, NULL, KEY, NULL); \
	}                                                                                    \
	int tn__where_scalar_self_##SUFFIX(const tn_tensor *condition, tn_scalar self,          \
					   const tn_tensor *other, tn_tensor **ret_tensor)      \
	{                                                                                    \
		int rc = need_ret(ret_tensor);                                               \
		return rc ? rc                                                               \
			  : where_impl(NULL, condition, NULL, other, &self, NULL, KEY, ret_tensor); \
	}                                                                                    \
	int tn__where_scalar_other_##SUFFIX(const tn_tensor *condition, const tn_tensor *self,  \
					    tn_scalar other, tn_tensor **ret_tensor)            \
	{                                                                                    \
		int rc = need_ret(ret_tensor);                                               \
		return rc ? rc                                                               \
			  : where_impl(NULL, condition, self, NULL, NULL, &other, KEY, ret_tensor); \
	}                                                                                    \
	int tn__where_scalar_##SUFFIX(const tn_tensor *condition, tn_scalar self,               \
				      tn_scalar other, tn_tensor **ret_tensor)                  \
	{                                                                                    \
		int rc = need_ret(ret_tensor);                                               \
		return rc ? rc                                                               \
			  : where_impl(NULL, condition, NULL, NULL, &self, &other, KEY,       \
				       ret_tensor);                                            \
	}

WHERE_KERNELS(cpu, TN_KEY_CPU)
WHERE_KERNELS(cuda, TN_KEY_CUDA)
WHERE_KERNELS(meta, TN_KEY_META)
