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
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend.h"
#include "binary_internal.h"
#include "ops_kernels.h"

struct bin_ctx {
	tn__binary_fn fn;   /* arithmetic */
	tn__compare_fn cmp; /* comparisons */
	int op;
	enum tn_dtype ct; /* the inputs' compute dtype */
	struct tn__alpha alpha;
};

/* One row of out = a OP b: operands 0 (out), 1 and 2 in the chunked loop's compute dtypes. */
static void run_row(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	const struct bin_ctx *c = vctx;
	if (c->cmp)
		c->cmp(c->op, c->ct, p[0], s[0], p[1], s[1], p[2], s[2], n);
	else
		c->fn(c->op, c->ct, p[0], s[0], p[1], s[1], p[2], s[2], n, &c->alpha);
}

/* An arithmetic row whose output is past the caches: the kernel streams its stores. */
static void run_row_stream(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	const struct bin_ctx *c = vctx;
	c->fn(c->op | TN_BINOP_STREAM, c->ct, p[0], s[0], p[1], s[1], p[2], s[2], n, &c->alpha);
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

/* The C++ type names c10 writes in its conversion errors. */
static const char *c10_type_name(enum tn_dtype dt)
{
	static const char *const names[] = { "bool",  "uint8_t", "int8_t",	"int16_t", "int",
					     "int64_t", "at::Half", "at::BFloat16", "float",	"double" };
	return names[dt];
}

/*
 * alpha as PyTorch's add_kernel takes it: alpha.to<scalar_t>() of the compute dtype @ct, a
 * checked conversion (an int16 add refuses alpha 70000; uint8 accepts down to -255, as c10's
 * overflows() does for unsigned types; 16-bit floats and float32 refuse finite values past
 * their largest) that rounds floating values to @ct (a bfloat16 alpha of 772 is 768). sub is
 * add with -alpha, converted as such (an int16 sub refuses alpha -32768); the kernel gets
 * alpha back, negated exactly.
 */
static int convert_alpha(int op, enum tn_dtype ct, tn_scalar alpha, struct tn__alpha *ret)
{
	const bool neg = op == TN_BINOP_SUB;
	*ret = (struct tn__alpha){ 1.0, 1, true };
	if (ct == TN_BOOL) {
		ret->b = alpha.kind == TN_SCALAR_BOOL ? alpha.v.b
			 : alpha.kind == TN_SCALAR_INT ? alpha.v.i != 0
						       : alpha.v.d != 0;
		return 0;
	}
	if (!tn__is_floating(ct)) {
		static const int64_t lo[] = { 0, -UINT8_MAX, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN },
				     hi[] = { 1, UINT8_MAX, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX };
		int64_t v = alpha.kind == TN_SCALAR_INT ? alpha.v.i : alpha.v.b;
		/* -INT64_MIN does not exist: PyTorch negates it with undefined behaviour. */
		if (neg && v != INT64_MIN)
			v = -v;
		if (v < lo[ct] || v > hi[ct])
			goto overflow;
		ret->i = neg ? (int64_t)(0 - (uint64_t)v) : v;
		ret->d = (double)ret->i;
		ret->b = ret->i != 0;
		return 0;
	}
	double d = alpha.kind == TN_SCALAR_DOUBLE ? alpha.v.d
		   : alpha.kind == TN_SCALAR_INT  ? (double)alpha.v.i
						  : (double)alpha.v.b;
	/* sub's -alpha of the integer INT64_MIN is INT64_MIN again in PyTorch (c10::Scalar's
	 * negation wraps), so sub(x, y, alpha=INT64_MIN) adds -2^63 * y: the kernel, which
	 * subtracts d * y, gets 2^63. */
	if (neg && alpha.kind == TN_SCALAR_INT && alpha.v.i == INT64_MIN)
		d = -d;
	double max = ct == TN_FLOAT16 ? 65504.0 : ct == TN_BFLOAT16 ? 3.3895313892515355e38
		     : ct == TN_FLOAT32 ? (double)FLT_MAX : INFINITY;
	if (isfinite(d) && (d > max || d < -max))
		goto overflow;
	if (ct == TN_FLOAT16)
		d = tn_half_to_float(tn_half_from_float((float)d));
	else if (ct == TN_BFLOAT16)
		d = tn_bfloat16_to_float(tn_bfloat16_from_float((float)d));
	else if (ct == TN_FLOAT32)
		d = (float)d;
	ret->d = d;
	ret->b = d != 0;
	return 0;
overflow:
	return tn__error(TN_EOVERFLOW, "value cannot be converted to type %s without overflow",
			 c10_type_name(ct));
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
		if (alpha.kind == TN_SCALAR_DOUBLE && !tn__is_floating(ct))
			return tn__error(TN_EINVAL, "For integral input tensors, argument alpha "
						    "must not be a floating point number.");
		return convert_alpha(op, ct, alpha, &c->alpha);
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
	/* With a wrapped scalar or a broadcast, ATen allocates the result through
	 * reorder_dimensions: contiguous only for inputs of the standard strides. */
	if (!out && (b_scalar || b->ndim != a->ndim) &&
	    (!tn__standard_contiguous(a) || (!b_scalar && !tn__standard_contiguous(b))))
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
		rc = cmp ? tn__device_run(key, &it, TN_KERNEL_COMPARE, op, NULL, ct, 1.0, who)
			 : tn__device_run(key, &it, TN_KERNEL_BINARY, op, &c.alpha, ct, 1.0, who);
		if (rc < 0)
			goto out;
	} else if (key == TN_KEY_CPU && it.numel > 0) {
		if (cmp)
			c.cmp = (tn__compare_fn)tn__stub_get(&tn__compare_stub);
		else
			c.fn = (tn__binary_fn)tn__stub_get(&tn__binary_stub);
		c.ct = ct;
		tn__chunked_for_each_streamed(&it, (const enum tn_dtype[]){ cmp ? TN_BOOL : ct, ct, ct },
					      run_row, cmp ? NULL : run_row_stream, &c);
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
