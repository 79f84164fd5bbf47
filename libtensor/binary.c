/* SPDX-License-Identifier: MIT */
/*
 * Binary operators on the TensorIterator: the arithmetic ones (add, sub, mul, div) and the
 * comparisons (eq, ne, lt, le, gt, ge), each functional, out= and in place, with Tensor and
 * Scalar right-hand sides, and their Meta kernels.
 *
 * The iterator promotes the inputs to a common dtype (a Scalar is a "wrapped number": the
 * lowest priority, a float one counting as float32), checks that the result may be cast to an
 * out= or in-place output, and allocates functional outputs in the inputs' layout. The loop
 * calls the per-capability kernel on whole rows when every operand already has the common
 * dtype; otherwise it converts 256-element chunks of the other operands into buffers on the
 * stack and back (bounded memory, no full-size temporaries). That loop and the Scalar wrapping
 * serve the other binary operators (binary_ext.c) too, through binary_internal.h.
 */
#include <string.h>

#include "backend.h"
#include "binary_internal.h"
#include "ops_kernels.h"

#define CHUNK 256
/* Bytes of output computed per block before they are streamed out. */
#define STREAM_BLOCK 4096

struct bin_ctx {
	struct tn__bin_loop loop; /* first: the loop's context */
	tn__binary_fn fn;   /* arithmetic */
	tn__compare_fn cmp; /* comparisons */
	int op;
	struct tn__alpha alpha;
};

static void run_row(const struct tn__bin_loop *l, char *o, int64_t so, const char *a, int64_t sa,
		    const char *b, int64_t sb, int64_t n)
{
	const struct bin_ctx *c = (const struct bin_ctx *)l;
	if (c->cmp)
		c->cmp(c->op, l->ct, o, so, a, sa, b, sb, n);
	else
		c->fn(c->op, l->ct, o, so, a, sa, b, sb, n, &c->alpha);
}

/* An arithmetic row whose output is past the caches: the kernel streams its stores. */
static void run_row_stream(const struct tn__bin_loop *l, char *o, int64_t so, const char *a,
			   int64_t sa, const char *b, int64_t sb, int64_t n)
{
	const struct bin_ctx *c = (const struct bin_ctx *)l;
	c->fn(c->op | TN_BINOP_STREAM, l->ct, o, so, a, sa, b, sb, n, &c->alpha);
}

void tn__bin_loop_run(struct tn__bin_loop *c, tn__bin_row_fn row, const struct tn_iter *it,
		      enum tn_dtype out_ct)
{
	c->row = row;
	c->cast = (tn__cast_fn)tn__stub_get(&tn__cast_stub);
	c->ct = it->common_dtype;
	c->out_ct = out_ct;
	c->cast_any = false;
	c->stream = NULL;
	if (it->numel * (int64_t)tn__itemsize(out_ct) >= TN_STREAM_BYTES)
		c->stream = (tn__stream_copy_fn)tn__stub_get(&tn__stream_copy_stub);
	for (int k = 0; k < 3; k++) {
		c->dt[k] = it->ops[k].dtype;
		c->cast_any |= c->dt[k] != (k == 0 ? out_ct : c->ct);
	}
	tn__iter_for_each(it, tn__binary_loop, c, TN_GRAIN_SIZE);
}

void tn__bin_config(struct tn_iter_config *cfg, const tn_tensor *out, const tn_tensor *a,
		    bool a_wrapped, const tn_tensor *b, bool b_wrapped)
{
	tn__iter_config_init(cfg);
	cfg->noutputs = 1;
	cfg->ninputs = 2;
	cfg->tensors[0] = out;
	cfg->tensors[1] = a;
	cfg->tensors[2] = b;
	cfg->wrapped[1] = a_wrapped;
	cfg->wrapped[2] = b_wrapped;
	cfg->promote_inputs_to_common_dtype = true;
}

void tn__binary_loop(void *vctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	const struct tn__bin_loop *c = vctx;
	const int64_t w = (int64_t)tn__itemsize(c->ct), wo = (int64_t)tn__itemsize(c->out_ct);
	_Alignas(64) unsigned char buf[3][CHUNK * 8];
	_Alignas(64) unsigned char sbuf[STREAM_BLOCK];

	for (int64_t j = 0; j < n1; j++) {
		char *p[3];
		for (int k = 0; k < 3; k++)
			p[k] = data[k] + j * strides[3 + k];
		if (c->stream && !c->cast_any && strides[0] == wo && c->row_stream) {
			c->row_stream(c, p[0], wo, p[1], strides[1], p[2], strides[2], n0);
			continue;
		}
		if (c->stream && !c->cast_any && strides[0] == wo) {
			/* A large output: blocks computed in L1, then streamed out. */
			const int64_t blk = STREAM_BLOCK / wo;
			for (int64_t i = 0; i < n0; i += blk) {
				int64_t m = n0 - i < blk ? n0 - i : blk;
				c->row(c, (char *)sbuf, wo, p[1] + i * strides[1], strides[1],
				       p[2] + i * strides[2], strides[2], m);
				c->stream(p[0] + i * wo, sbuf, (size_t)(m * wo));
			}
			continue;
		}
		if (!c->cast_any) {
			c->row(c, p[0], strides[0], p[1], strides[1], p[2], strides[2], n0);
			continue;
		}
		for (int64_t i = 0; i < n0; i += CHUNK) {
			int64_t m = n0 - i < CHUNK ? n0 - i : CHUNK;
			char *q[3];
			int64_t qs[3];
			for (int k = 1; k < 3; k++) {
				char *src = p[k] + i * strides[k];
				if (c->dt[k] == c->ct) {
					q[k] = src;
					qs[k] = strides[k];
				} else if (strides[k] == 0) { /* a broadcast value: convert it once */
					c->cast((char *)buf[k], c->ct, w, src, c->dt[k], 0, 1);
					q[k] = (char *)buf[k];
					qs[k] = 0;
				} else {
					c->cast((char *)buf[k], c->ct, w, src, c->dt[k], strides[k], m);
					q[k] = (char *)buf[k];
					qs[k] = w;
				}
			}
			char *dst = p[0] + i * strides[0];
			bool out_cast = c->dt[0] != c->out_ct;
			q[0] = out_cast ? (char *)buf[0] : dst;
			qs[0] = out_cast ? wo : strides[0];
			c->row(c, q[0], qs[0], q[1], qs[1], q[2], qs[2], m);
			if (out_cast)
				c->cast(dst, c->dt[0], strides[0], (char *)buf[0], c->out_ct, wo, m);
		}
	}
	if (c->stream)
		tn__store_fence();
}

static const char *const op_names[] = { "add", "sub", "mul", "div" };
static const char *const cmp_names[] = { "eq", "ne", "lt", "le", "gt", "ge" };

int tn__wrap_scalar(tn_scalar v, const tn_tensor *like, tn_tensor **ret)
{
	enum tn_dtype dt = tn__wrapped_scalar_dtype(v);
	/* A wrapped number is a CPU tensor beside CUDA ones too (the kernel gets its value). */
	tn_device dev = tn__handle_is(like, TN_MAGIC_TENSOR) &&
				like->storage->device.type == TN_DEVICE_META
				? like->storage->device
				: (tn_device){ TN_DEVICE_CPU, 0 };
	int rc;
	if (v.kind != TN_SCALAR_BOOL && v.kind != TN_SCALAR_INT && v.kind != TN_SCALAR_DOUBLE)
		return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)v.kind);
	if ((rc = tn__empty_like_device(dev, dt, 0, NULL, NULL, ret, "scalar")) < 0)
		return rc;
	if (dev.type != TN_DEVICE_META)
		tn__scalar_to_element(v, dt, tn_tensor_data(*ret));
	return 0;
}

/*
 * The checks that depend on the compute dtype @ct, and the kernel context they set up:
 * PyTorch's refusals of bool subtraction and of alpha values the dtype cannot hold.
 */
static int binary_setup(bool cmp, int op, enum tn_dtype ct, enum tn_dtype da, enum tn_dtype db,
			tn_scalar alpha, struct bin_ctx *c)
{
	*c = (struct bin_ctx){ .op = op };
	if (cmp)
		return 0;
	if (op == TN_BINOP_SUB && (da == TN_BOOL || db == TN_BOOL))
		return da == TN_BOOL && db == TN_BOOL
			       ? tn__error(TN_EINVAL,
					   "Subtraction, the `-` operator, with two bool tensors is "
					   "not supported. Use the `^` or `logical_xor()` operator "
					   "instead.")
			       : tn__error(TN_EINVAL,
					   "Subtraction, the `-` operator, with a bool tensor is not "
					   "supported. If you are trying to invert a mask, use the `~` "
					   "or `logical_not()` operator instead.");
	if (op == TN_BINOP_ADD || op == TN_BINOP_SUB) {
		if (alpha.kind == TN_SCALAR_BOOL && ct != TN_BOOL)
			return tn__error(TN_EINVAL,
					 "Boolean alpha only supported for Boolean results.");
		if (alpha.kind == TN_SCALAR_DOUBLE && !tn_dtype_is_floating(ct))
			return tn__error(TN_EINVAL, "For integral input tensors, argument alpha "
						    "must not be a floating point number.");
		c->alpha.b = alpha.kind == TN_SCALAR_BOOL ? alpha.v.b
			     : alpha.kind == TN_SCALAR_INT ? alpha.v.i != 0
							   : alpha.v.d != 0;
		c->alpha.i = alpha.kind == TN_SCALAR_INT ? alpha.v.i : alpha.kind == TN_SCALAR_BOOL;
		c->alpha.d = alpha.kind == TN_SCALAR_DOUBLE ? alpha.v.d : (double)c->alpha.i;
	} else {
		c->alpha = (struct tn__alpha){ 1.0, 1, true };
	}
	return 0;
}

/*
 * Small operands that are already contiguous, of one dtype and one shape (up to leading size-1
 * dimensions), or a Scalar whose category (bool < integral < floating) does not raise the
 * tensor's: no iterator, the kernel runs once over the flat arrays (PyTorch pays ~300-600 ns
 * here; this path ~25 ns). Returns 1 when it ran, 0 when the general path must run, or an
 * error.
 */
static int binary_trivial(bool cmp, int op, tn_tensor *out, const tn_tensor *a,
			  const tn_tensor *b, const tn_scalar *b_scalar, tn_scalar alpha,
			  tn_tensor **ret, const char *who)
{
	_Alignas(8) unsigned char elem[8], wrapped[8];

	if (!tn__handle_is(a, TN_MAGIC_TENSOR))
		return 0;
	enum tn_dtype ct = a->dtype, db = ct;
	if (b_scalar) {
		db = tn__wrapped_scalar_dtype(*b_scalar);
		if (tn_dtype_category(db) > tn_dtype_category(ct) ||
		    tn__scalar_to_element(*b_scalar, db, wrapped) < 0)
			return 0;
	}
	const tn_tensor *shape;
	int64_t n = tn__iter_trivial(out, cmp ? TN_BOOL : ct, a, b_scalar ? NULL : b, &shape);
	if (n < 0)
		return 0;
	/* Integer true division computes in the default float dtype: not trivial. */
	if (!cmp && op == TN_BINOP_DIV && !tn__is_floating(ct))
		return 0;
	struct bin_ctx c;
	int rc = binary_setup(cmp, op, ct, ct, db, alpha, &c);
	if (rc < 0)
		return rc;
	const int64_t w = (int64_t)tn__itemsize(ct);
	const char *pb = b_scalar ? (const char *)elem : tn__data(b);
	const int64_t sb = b_scalar ? 0 : w;
	if (b_scalar) /* converted as the general path's loop converts the wrapped tensor */
		((tn__cast_fn)tn__stub_get(&tn__cast_stub))((char *)elem, ct, w,
							    (const char *)wrapped, db, 0, 1);
	tn_tensor *o = out;
	if (!o && (rc = tn__empty_like_device(a->storage->device, cmp ? TN_BOOL : ct, shape->ndim,
					      shape->sizes, NULL, &o, who)) < 0)
		return rc;
	if (n == 0) /* empty tensors have no data pointer */
		;
	else if (cmp)
		((tn__compare_fn)tn__stub_get(&tn__compare_stub))(op, ct, tn__data(o), 1,
								  tn__data(a), w, pb, sb, n);
	else
		((tn__binary_fn)tn__stub_get(&tn__binary_stub))(op, ct, tn__data(o), w, tn__data(a),
								 w, pb, sb, n, &c.alpha);
	if (ret)
		*ret = out ? tn_tensor_ref(o) : o;
	return 1;
}

/*
 * The one implementation: out = a OP (alpha *) b. @out NULL allocates (functional), @out == a
 * is in place. @b_scalar, when not NULL, replaces @b. @key is the dispatch key of the kernel
 * (tn__key_runs).
 */
static int binary_impl(bool cmp, int op, tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
		       const tn_scalar *b_scalar, tn_scalar alpha, enum tn_dispatch_key key,
		       tn_tensor **ret)
{
	const char *who = cmp ? cmp_names[op] : op_names[op];
	struct tn_iter_config cfg;
	struct tn_iter it;
	tn_tensor *wrapped = NULL;
	int rc;

	if (key == TN_KEY_CPU &&
	    (rc = binary_trivial(cmp, op, out, a, b, b_scalar, alpha, ret, who)) != 0)
		return rc < 0 ? rc : 0;
	if (b_scalar) {
		if ((rc = tn__wrap_scalar(*b_scalar, a, &wrapped)) < 0)
			return rc;
		b = wrapped;
	}
	tn__bin_config(&cfg, out, a, false, b, b_scalar != NULL);
	if (cmp) {
		/* PyTorch's comparison_op: a functional result is bool; an out= tensor of any
		 * dtype gets the 0/1 results converted (no safe-cast rule). */
		cfg.check_all_same_dtype = false;
		cfg.has_output_dtype = true;
		cfg.output_dtype = TN_BOOL;
	} else {
		cfg.cast_common_dtype_to_outputs = true;
		cfg.enforce_safe_casting_to_output = true;
		cfg.promote_integer_inputs_to_float = op == TN_BINOP_DIV;
	}
	/* The iterator borrows its operands: the wrapped scalar lives until the end. */
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0) {
		tn_tensor_unref(wrapped);
		return rc;
	}

	enum tn_dtype ct = it.common_dtype;
	struct bin_ctx c;
	if ((rc = binary_setup(cmp, op, ct, it.ops[1].dtype, it.ops[2].dtype, alpha, &c)) < 0)
		goto out;
	if (tn__key_on_backend(key) && it.numel > 0) {
		rc = cmp ? tn__device_run(key, &it, TN_KERNEL_COMPARE, op, NULL, ct, 1.0)
			 : tn__device_run(key, &it, TN_KERNEL_BINARY, op, &c.alpha, ct, 1.0);
		if (rc < 0)
			goto out;
	} else if (key == TN_KEY_CPU && it.numel > 0) {
		if (cmp)
			c.cmp = (tn__compare_fn)tn__stub_get(&tn__compare_stub);
		else
			c.fn = (tn__binary_fn)tn__stub_get(&tn__binary_stub);
		c.loop.row_stream = cmp ? NULL : run_row_stream;
		tn__bin_loop_run(&c.loop, run_row, &it, cmp ? TN_BOOL : ct);
	}
	if (ret)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
	tn_tensor_unref(wrapped);
	return rc;
}

static int binary(int op, tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
		  const tn_scalar *b_scalar, tn_scalar alpha, enum tn_dispatch_key key,
		  tn_tensor **ret)
{
	return binary_impl(false, op, out, a, b, b_scalar, alpha, key, ret);
}

static int compare(int op, tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
		   const tn_scalar *b_scalar, enum tn_dispatch_key key, tn_tensor **ret)
{
	return binary_impl(true, op, out, a, b, b_scalar, tn_scalar_int(1), key, ret);
}

static int need_ret(void *ret, const char *who)
{
	return ret ? 0 : tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
}

#define need_out tn__check_live

/*
 * The kernels of the table: per operator, functional / out= / in place / Scalar, for each
 * dispatch key (SUFFIX cpu, cuda, meta; KEY its enum value).
 */
#define ALPHA_KERNELS_KEY(NAME, OP, SUFFIX, KEY)                                             \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, const tn_tensor *other,                \
				  tn_scalar alpha, tn_tensor **ret_tensor)                      \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc : binary(OP, NULL, self, other, NULL, alpha, KEY, ret_tensor); \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, const tn_tensor *other,            \
				      tn_scalar alpha, tn_tensor *out)                          \
	{                                                                                    \
		int rc = need_out(out, #NAME);                                               \
		return rc ? rc : binary(OP, out, self, other, NULL, alpha, KEY, NULL);        \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, const tn_tensor *other, tn_scalar alpha)    \
	{                                                                                    \
		int rc = need_out(self, #NAME "_");                                          \
		return rc ? rc : binary(OP, self, self, other, NULL, alpha, KEY, NULL);       \
	}                                                                                    \
	int tn__##NAME##_scalar_##SUFFIX(const tn_tensor *self, tn_scalar other,                \
					 tn_scalar alpha, tn_tensor **ret_tensor)               \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc : binary(OP, NULL, self, NULL, &other, alpha, KEY, ret_tensor); \
	}

#define PLAIN_KERNELS_KEY(NAME, OP, SUFFIX, KEY)                                             \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, const tn_tensor *other,                \
				  tn_tensor **ret_tensor)                                       \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc                                                               \
			  : binary(OP, NULL, self, other, NULL, tn_scalar_int(1), KEY,        \
				   ret_tensor);                                                \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, const tn_tensor *other,            \
				      tn_tensor *out)                                           \
	{                                                                                    \
		int rc = need_out(out, #NAME);                                               \
		return rc ? rc : binary(OP, out, self, other, NULL, tn_scalar_int(1), KEY, NULL); \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, const tn_tensor *other)                     \
	{                                                                                    \
		int rc = need_out(self, #NAME "_");                                          \
		return rc ? rc : binary(OP, self, self, other, NULL, tn_scalar_int(1), KEY, NULL); \
	}                                                                                    \
	int tn__##NAME##_scalar_##SUFFIX(const tn_tensor *self, tn_scalar other,                \
					 tn_tensor **ret_tensor)                                \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc                                                               \
			  : binary(OP, NULL, self, NULL, &other, tn_scalar_int(1), KEY,       \
				   ret_tensor);                                                \
	}

#define ALPHA_KERNELS(NAME, OP) TN_FOR_EACH_KEY(ALPHA_KERNELS_KEY, NAME, OP)
#define PLAIN_KERNELS(NAME, OP) TN_FOR_EACH_KEY(PLAIN_KERNELS_KEY, NAME, OP)

ALPHA_KERNELS(add, TN_BINOP_ADD)
ALPHA_KERNELS(sub, TN_BINOP_SUB)
PLAIN_KERNELS(mul, TN_BINOP_MUL)
PLAIN_KERNELS(div, TN_BINOP_DIV)

/* Comparisons: .Tensor, .Scalar, .Tensor_out, .Scalar_out, _.Tensor, _.Scalar; each key. */
#define CMP_KERNELS_RUN(NAME, OP, SUFFIX, KEY)                                               \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, const tn_tensor *other,                \
				  tn_tensor **ret_tensor)                                       \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc : compare(OP, NULL, self, other, NULL, KEY, ret_tensor);       \
	}                                                                                    \
	int tn__##NAME##_scalar_##SUFFIX(const tn_tensor *self, tn_scalar other,                \
					 tn_tensor **ret_tensor)                                \
	{                                                                                    \
		int rc = need_ret(ret_tensor, #NAME);                                        \
		return rc ? rc : compare(OP, NULL, self, NULL, &other, KEY, ret_tensor);      \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, const tn_tensor *other,            \
				      tn_tensor *out)                                           \
	{                                                                                    \
		int rc = need_out(out, #NAME);                                               \
		return rc ? rc : compare(OP, out, self, other, NULL, KEY, NULL);              \
	}                                                                                    \
	int tn__##NAME##_scalar_out_##SUFFIX(const tn_tensor *self, tn_scalar other,            \
					     tn_tensor *out)                                    \
	{                                                                                    \
		int rc = need_out(out, #NAME);                                               \
		return rc ? rc : compare(OP, out, self, NULL, &other, KEY, NULL);             \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, const tn_tensor *other)                     \
	{                                                                                    \
		int rc = need_out(self, #NAME "_");                                          \
		return rc ? rc : compare(OP, self, self, other, NULL, KEY, NULL);             \
	}                                                                                    \
	int tn__##NAME##_scalar__##SUFFIX(tn_tensor *self, tn_scalar other)                     \
	{                                                                                    \
		int rc = need_out(self, #NAME "_");                                          \
		return rc ? rc : compare(OP, self, self, NULL, &other, KEY, NULL);            \
	}

#define CMP_KERNELS(NAME, OP) TN_FOR_EACH_KEY(CMP_KERNELS_RUN, NAME, OP)

CMP_KERNELS(eq, TN_CMP_EQ)
CMP_KERNELS(ne, TN_CMP_NE)
CMP_KERNELS(lt, TN_CMP_LT)
CMP_KERNELS(le, TN_CMP_LE)
CMP_KERNELS(gt, TN_CMP_GT)
CMP_KERNELS(ge, TN_CMP_GE)
