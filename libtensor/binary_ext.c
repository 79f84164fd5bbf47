/* SPDX-License-Identifier: MIT */
/*
 * The other binary operators on the TensorIterator: division with a rounding mode, remainder,
 * fmod, pow, maximum, minimum, atan2, and the logical, bitwise and shift operators, each in
 * PyTorch 1.13's schema forms (functional, out=, in place; Tensor and Scalar operands), with
 * their Meta kernels.
 *
 * Each operator builds the iterator as ATen's does (binary_op, binary_float_op for atan2 and
 * true division, comparison_op for the logical ones; pow with a Scalar exponent is a unary
 * operator whose output must have the result dtype) and runs the per-capability kernel of
 * kernels/binary2_kernel.c through binary.c's chunked-cast loop. What PyTorch checks in its
 * kernels (dtypes a kernel lacks, integer division by zero, a Scalar exponent that overflows
 * the dtype) is checked on the CPU only, as in PyTorch, where Meta tensors never reach a
 * kernel; and it is checked before anything is written, so an error leaves the output as it
 * was (PyTorch may have written part of it).
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "binary_internal.h"
#include "ops_kernels.h"

#define CHUNK 256

enum ext_kind {
	K_BINARY,  /* ATen's binary_op: promote, cast to outputs, safe casts only */
	K_FLOAT,   /* binary_float_op: and integers promote to float32 */
	K_LOGICAL, /* comparison_op: bool results, an out= of any dtype */
	K_UNARY,   /* pow with a Scalar exponent: the output must have the result dtype */
};

/* Dtype classes a kernel refuses (PyTorch's AT_DISPATCH lists). */
#define NO_BOOL 1u
#define NO_FLOAT 2u

struct ext_op {
	const char *name;
	int kop; /* the binary2 kernel's operator; -1 for true division (the arithmetic kernel) */
	enum ext_kind kind;
	const char *kernel; /* PyTorch's kernel name, for refusals */
	unsigned refuse;
	bool int_divisor; /* an integer zero divisor is an error */
};

enum {
	X_DIV, X_DIV_TRUNC, X_DIV_FLOOR, X_REMAINDER, X_FMOD, X_POW, X_POW_TS, X_POW_ST,
	X_POW_ONES, X_MAXIMUM, X_MINIMUM, X_ATAN2, X_LOGICAL_AND, X_LOGICAL_OR, X_LOGICAL_XOR,
	X_BITWISE_AND, X_BITWISE_OR, X_BITWISE_XOR, X_LSHIFT, X_RSHIFT,
};

static const struct ext_op ext_ops[] = {
	[X_DIV] = { "div", -1, K_FLOAT, NULL, 0, false },
	[X_DIV_TRUNC] = { "div", TN_BIN2_DIV_TRUNC, K_BINARY, "div_trunc_cpu", NO_BOOL, true },
	[X_DIV_FLOOR] = { "div", TN_BIN2_DIV_FLOOR, K_BINARY, "div_floor_cpu", NO_BOOL, true },
	[X_REMAINDER] = { "remainder", TN_BIN2_REMAINDER, K_BINARY, "remainder_cpu", NO_BOOL, true },
	[X_FMOD] = { "fmod", TN_BIN2_FMOD, K_BINARY, "fmod_cpu", NO_BOOL, true },
	[X_POW] = { "pow", TN_BIN2_POW, K_BINARY, "pow", NO_BOOL, false },
	/* pow(Tensor, Scalar): the kernel operator is chosen from the exponent. */
	[X_POW_TS] = { "pow", TN_BIN2_POW, K_UNARY, "pow", NO_BOOL, false },
	/* pow(Scalar, Tensor): X_POW, or X_POW_ONES for a base of 1. */
	[X_POW_ST] = { "pow", TN_BIN2_POW, K_BINARY, "pow", NO_BOOL, false },
	/* A base of 1: PyTorch fills the result with ones without running a kernel. */
	[X_POW_ONES] = { "pow", TN_BIN2_POW_ONE, K_BINARY, NULL, 0, false },
	[X_MAXIMUM] = { "maximum", TN_BIN2_MAXIMUM, K_BINARY, NULL, 0, false },
	[X_MINIMUM] = { "minimum", TN_BIN2_MINIMUM, K_BINARY, NULL, 0, false },
	[X_ATAN2] = { "atan2", TN_BIN2_ATAN2, K_FLOAT, NULL, 0, false },
	[X_LOGICAL_AND] = { "logical_and", TN_BIN2_LOGICAL_AND, K_LOGICAL, NULL, 0, false },
	[X_LOGICAL_OR] = { "logical_or", TN_BIN2_LOGICAL_OR, K_LOGICAL, NULL, 0, false },
	[X_LOGICAL_XOR] = { "logical_xor", TN_BIN2_LOGICAL_XOR, K_LOGICAL, NULL, 0, false },
	[X_BITWISE_AND] = { "bitwise_and", TN_BIN2_BITWISE_AND, K_BINARY, "bitwise_and_cpu",
			    NO_FLOAT, false },
	[X_BITWISE_OR] = { "bitwise_or", TN_BIN2_BITWISE_OR, K_BINARY, "bitwise_or_cpu", NO_FLOAT,
			   false },
	[X_BITWISE_XOR] = { "bitwise_xor", TN_BIN2_BITWISE_XOR, K_BINARY, "bitwise_xor_cpu",
			    NO_FLOAT, false },
	[X_LSHIFT] = { "bitwise_left_shift", TN_BIN2_LSHIFT, K_BINARY, "lshift_cpu",
		       NO_FLOAT | NO_BOOL, false },
	[X_RSHIFT] = { "bitwise_right_shift", TN_BIN2_RSHIFT, K_BINARY, "rshift_cpu",
		       NO_FLOAT | NO_BOOL, false },
};

struct ext_ctx {
	tn__binary2_fn fn;
	tn__binary_fn div; /* true division */
	int kop;
	enum tn_dtype ct; /* the inputs' compute dtype */
	bool pow_f32;     /* float32 to the power of the Scalar exponent e */
	double e;
};

/* A row of float32 to the power of a Scalar, as PyTorch 1.13 computes it (the kernel's
 * comment, kernels/binary2_kernel.c: SLEEF's powf over whole blocks of 16, double elsewhere). */
static void pow_f32_row(char *o, int64_t so, const char *a, int64_t sa, int64_t n, double e)
{
	((tn__pow_f32_scalar_fn)tn__stub_get(&tn__pow_f32_scalar_stub))(o, so, a, sa, n, e);
}

/* One row of out = a OP b: operands 0 (out), 1 and 2 in the chunked loop's compute dtypes. */
static void ext_row(const void *vctx, char *const *p, const int64_t *s, int64_t n)
{
	static const struct tn__alpha one = { 1.0, 1, true };
	const struct ext_ctx *c = vctx;
	if (c->pow_f32)
		pow_f32_row(p[0], s[0], p[1], s[1], n, c->e);
	else if (c->div)
		c->div(TN_BINOP_DIV, c->ct, p[0], s[0], p[1], s[1], p[2], s[2], n, &one);
	else
		c->fn(c->kop, c->ct, p[0], s[0], p[1], s[1], p[2], s[2], n);
}

/* ---- integer division by zero: the divisor is read before anything is written ---- */

struct zero_scan {
	tn__cast_fn cast;
	enum tn_dtype ct, dt;
	/* Set by any thread that meets a zero; read after for_each has joined them, which
	 * orders the stores before the read, so relaxed accesses are enough. */
	atomic_bool found;
};

static bool any_zero(const char *p, int64_t stride, int64_t n, size_t w)
{
	for (int64_t i = 0; i < n; i++) {
		uint64_t v = 0;
		memcpy(&v, p + i * stride, w);
		if (v == 0)
			return true;
	}
	return false;
}

static void zero_loop(void *vctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	struct zero_scan *z = vctx;
	const size_t w = tn__itemsize(z->ct);
	const int64_t s = strides[2];
	_Alignas(64) unsigned char buf[CHUNK * 8];

	/* A broadcast divisor is one value per row. */
	if (s == 0)
		n0 = 1;
	for (int64_t j = 0; j < n1; j++) {
		const char *p = data[2] + j * strides[5];
		for (int64_t i = 0; i < n0; i += CHUNK) {
			if (atomic_load_explicit(&z->found, memory_order_relaxed))
				return;
			int64_t m = n0 - i < CHUNK ? n0 - i : CHUNK;
			const char *q = p + i * s;
			int64_t qs = s;
			if (z->dt != z->ct) {
				z->cast((char *)buf, z->ct, (int64_t)w, q, z->dt, s, m);
				q = (const char *)buf;
				qs = (int64_t)w;
			}
			if (any_zero(q, qs, m, w)) {
				atomic_store_explicit(&z->found, true, memory_order_relaxed);
				return;
			}
		}
	}
}

static bool has_zero_divisor(const struct tn_iter *it)
{
	struct zero_scan z = { (tn__cast_fn)tn__stub_get(&tn__cast_stub), it->common_dtype,
			       it->ops[2].dtype, false };
	tn__iter_for_each(it, zero_loop, &z, TN_GRAIN_SIZE);
	return atomic_load_explicit(&z.found, memory_order_relaxed);
}

/* ---- pow with a Scalar exponent ---- */

/* c10's names of the types a Scalar is converted to, for the overflow message. */
static const char *c10_type_name(enum tn_dtype dt)
{
	static const char *const names[] = { "bool",	"uint8_t",  "int8_t",	    "int16_t",
					     "int",	"int64_t",  "at::Half",	    "at::BFloat16",
					     "float",	"double" };
	return names[dt];
}

static double scalar_double(tn_scalar s)
{
	return s.kind == TN_SCALAR_DOUBLE ? s.v.d : s.kind == TN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

/* Scalar::equal: a bool Scalar equals no number. */
static bool scalar_equals(tn_scalar s, double v)
{
	return s.kind != TN_SCALAR_BOOL && scalar_double(s) == v;
}

/*
 * ATen's pow_tensor_scalar_kernel: an exponent of 0 fills with ones and 1 copies (before any
 * kernel); float32, float64 and bfloat16 take sqrt, rsqrt and reciprocal for 0.5, -0.5 and -1,
 * and x*x, x*x*x, 1/(x*x) for 2, 3 and -2 (bfloat16 compares the exponent rounded to
 * bfloat16). *@converts: the kernel converts the exponent to @ct with an overflow check.
 */
static int pow_scalar_kop(enum tn_dtype ct, tn_scalar e, bool *converts)
{
	*converts = false;
	if (scalar_equals(e, 0.0))
		return TN_BIN2_POW_ONE;
	if (scalar_equals(e, 1.0))
		return TN_BIN2_POW_LEFT;
	bool special = ct == TN_FLOAT32 || ct == TN_FLOAT64 || ct == TN_BFLOAT16;
	if (special && scalar_equals(e, 0.5))
		return TN_BIN2_POW_SQRT;
	if (special && scalar_equals(e, -0.5))
		return TN_BIN2_POW_RSQRT;
	if (special && scalar_equals(e, -1.0))
		return TN_BIN2_POW_RECIPROCAL;
	*converts = ct != TN_FLOAT32 && ct != TN_FLOAT64;
	if (!special)
		return TN_BIN2_POW;
	double v = scalar_double(e);
	if (ct == TN_BFLOAT16)
		v = tn_bfloat16_to_float(tn_bfloat16_from_float((float)v));
	return v == 2.0 ? TN_BIN2_POW_SQUARE
	       : v == 3.0 ? TN_BIN2_POW_CUBE
	       : v == -2.0 ? TN_BIN2_POW_INV_SQUARE
			   : TN_BIN2_POW;
}

/* c10's checked_convert of the exponent to @ct: integers must fit, 16-bit floats must not
 * exceed the largest finite value (infinities and NaN pass). */
static int check_exponent(enum tn_dtype ct, tn_scalar e)
{
	bool fits = true;
	if (ct == TN_FLOAT16 || ct == TN_BFLOAT16) {
		double v = scalar_double(e), max = ct == TN_FLOAT16 ? 65504.0 : 3.3895313892515355e38;
		fits = !isfinite(v) || (v <= max && v >= -max);
	} else if (e.kind == TN_SCALAR_INT) {
		static const int64_t lo[] = { 0, 0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN },
				     hi[] = { 1, UINT8_MAX, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX };
		fits = e.v.i >= lo[ct] && e.v.i <= hi[ct];
	}
	return fits ? 0
		    : tn__error(TN_EOVERFLOW, "value cannot be converted to type %s without overflow",
				c10_type_name(ct));
}

/* ---- the one implementation ---- */

/*
 * out = a OP b for operator @x: @out NULL allocates (functional), @out == a is in place. A
 * Scalar replaces a (@a_scalar) or b (@b_scalar). @key is the kernel's dispatch key
 * (tn__key_runs).
 */
static int ext(int x, tn_tensor *out, const tn_tensor *a, const tn_scalar *a_scalar,
	       const tn_tensor *b, const tn_scalar *b_scalar, enum tn_dispatch_key key,
	       tn_tensor **ret)
{
	const struct ext_op *d = &ext_ops[x];
	struct tn_iter_config cfg;
	struct tn_iter it;
	tn_tensor *wrapped = NULL;
	int rc;

	if (x == X_POW_ST && !out) {
		/* pow.Scalar's meta function allocates a contiguous result of the exponent's
		 * sizes (set_output_raw_strided without strides), whatever the exponent's layout,
		 * and pow_out runs into it. */
		if (!tn__handle_is(b, TN_MAGIC_TENSOR))
			return tn__bad_tensor(d->name);
		const enum tn_dtype dts[2] = { tn__wrapped_scalar_dtype(*a_scalar), b->dtype };
		const enum tn__prio prio[2] = { TN_PRIO_WRAPPED, b->ndim ? TN_PRIO_DIM : TN_PRIO_ZERO };
		tn_tensor *res;
		if (a_scalar->kind != TN_SCALAR_BOOL && a_scalar->kind != TN_SCALAR_INT &&
		    a_scalar->kind != TN_SCALAR_DOUBLE)
			return tn__error(TN_EINVAL, "invalid scalar kind %d", (int)a_scalar->kind);
		if ((rc = tn__empty_like_device(b->storage->device, tn__result_type(2, dts, prio),
						b->ndim, b->sizes, NULL, &res, d->name)) < 0)
			return rc;
		if ((rc = ext(x, res, a, a_scalar, b, b_scalar, key, NULL)) < 0) {
			tn_tensor_unref(res);
			return rc;
		}
		*ret = res;
		return 0;
	}
	if (x == X_POW_ST && scalar_equals(*a_scalar, 1.0)) {
		/* PyTorch's pow_out(Scalar, Tensor, out) fills out, whatever its dtype, once
		 * its meta function resized it to the exponent's shape (which libtensor
		 * requires); the functional form allocates the promoted result and fills it. */
		if (out) {
			if (!tn__handle_is(b, TN_MAGIC_TENSOR))
				return tn__bad_tensor(d->name);
			if (tn__handle_is(out, TN_MAGIC_TENSOR) &&
			    (rc = tn__check_out_shape(out, b->ndim, b->sizes)) < 0)
				return rc;
			return tn__fill_key(out, tn_scalar_int(1), key);
		}
		d = &ext_ops[x = X_POW_ONES];
	}
	if (x == X_POW_TS) {
		if (!tn__handle_is(a, TN_MAGIC_TENSOR))
			return tn__bad_tensor(d->name);
		if (!tn__is_floating(a->dtype) && b_scalar->kind == TN_SCALAR_INT && b_scalar->v.i < 0)
			return tn__error(TN_EINVAL, "Integers to negative integer powers are not "
						    "allowed.");
		/* ATen's pow.Tensor_Scalar converts the base first (base.to(result dtype), laid
		 * out as preserve_format: a dense base keeps its strides, another becomes
		 * contiguous), and its float32 kernel's vector loop runs over that copy: the
		 * general float32 case computes on such a copy too (pow_f32_row). */
		enum tn_dtype rt;
		bool conv;
		if (out != a && a->dtype != TN_FLOAT32 && tn__key_runs(key) &&
		    !tn__key_on_backend(key) &&
		    (b_scalar->kind == TN_SCALAR_INT || b_scalar->kind == TN_SCALAR_DOUBLE ||
		     b_scalar->kind == TN_SCALAR_BOOL) &&
		    (rt = tn__result_type(2, (const enum tn_dtype[]){ a->dtype,
								    tn__wrapped_scalar_dtype(*b_scalar) },
					  (const enum tn__prio[]){ a->ndim ? TN_PRIO_DIM : TN_PRIO_ZERO,
								   TN_PRIO_WRAPPED })) == TN_FLOAT32 &&
		    pow_scalar_kop(rt, *b_scalar, &conv) == TN_BIN2_POW) {
			tn_tensor *base;
			if ((rc = tn__to_dtype(a, TN_FLOAT32, false, false, NULL, &base)) < 0)
				return rc;
			rc = ext(x, out, base, NULL, NULL, b_scalar, key, ret);
			tn_tensor_unref(base);
			return rc;
		}
	}
	if (a_scalar || b_scalar) {
		rc = tn__wrap_scalar(a_scalar ? *a_scalar : *b_scalar, a_scalar ? b : a, &wrapped);
		if (rc < 0)
			return rc;
		if (a_scalar)
			a = wrapped;
		else
			b = wrapped;
	}
	tn__bin_config(&cfg, out, a, a_scalar != NULL, b, b_scalar != NULL);
	/* ATen's pow(Tensor, Scalar) is a unary op on the base: the exponent lays out nothing. */
	cfg.by_value[2] = x == X_POW_TS;
	switch (d->kind) {
	case K_FLOAT:
		cfg.promote_integer_inputs_to_float = true;
		/* fall through */
	case K_BINARY:
		cfg.cast_common_dtype_to_outputs = true;
		cfg.enforce_safe_casting_to_output = true;
		break;
	case K_LOGICAL:
		/* A functional result is bool; an out= tensor of any dtype gets 0 and 1. */
		cfg.check_all_same_dtype = false;
		cfg.has_output_dtype = true;
		cfg.output_dtype = TN_BOOL;
		break;
	case K_UNARY:
		/* The output must have the common dtype ("Found dtype ... but expected ..."). */
		break;
	}
	/* The iterator borrows its operands: the wrapped scalar lives until the end. */
	if ((rc = tn__iter_build(&it, &cfg, d->name)) < 0) {
		tn_tensor_unref(wrapped);
		return rc;
	}

	const enum tn_dtype ct = it.common_dtype;
	int kop = d->kop;
	bool converts = false;
	if (x == X_POW_TS)
		kop = pow_scalar_kop(ct, *b_scalar, &converts);
	if (tn__key_runs(key)) {
		/* PyTorch's kernels refuse these dtypes; ones and copies never reach one. */
		bool refused = ct == TN_BOOL ? d->refuse & NO_BOOL
					     : tn__is_floating(ct) && (d->refuse & NO_FLOAT);
		if (refused && kop != TN_BIN2_POW_ONE && kop != TN_BIN2_POW_LEFT) {
			rc = tn__error(TN_EINVAL, "\"%s\" not implemented for '%s'", d->kernel,
				       tn__scalar_type_name(ct));
			goto out;
		}
		if (converts && (rc = check_exponent(ct, *b_scalar)) < 0)
			goto out;
		/* The scan reads the divisor on the host; on CUDA, as in PyTorch, an integer
		 * division by zero is not detected (the kernel's result is undefined). */
		if (d->int_divisor && tn_dtype_is_integral(ct) && it.numel > 0 &&
		    key == TN_KEY_CPU && has_zero_divisor(&it)) {
			rc = tn__error(TN_EINVAL, "ZeroDivisionError");
			goto out;
		}
		if (it.numel > 0 && tn__key_on_backend(key)) {
			static const struct tn__alpha one = { 1.0, 1, true };
			rc = kop < 0 ? tn__device_run(key, &it, TN_KERNEL_BINARY, TN_BINOP_DIV, &one,
						      ct, 1.0, d->name)
				     : tn__device_run(key, &it, TN_KERNEL_BINARY2, kop, NULL, ct, 1.0,
						      d->name);
		} else if (it.numel > 0) {
			struct ext_ctx c = { .kop = kop, .ct = ct };
			if (x == X_POW_TS && kop == TN_BIN2_POW && ct == TN_FLOAT32) {
				c.pow_f32 = true;
				c.e = scalar_double(*b_scalar);
			}
			if (kop < 0)
				c.div = (tn__binary_fn)tn__stub_get(&tn__binary_stub);
			else
				c.fn = (tn__binary2_fn)tn__stub_get(&tn__binary2_stub);
			const enum tn_dtype out_ct = d->kind == K_LOGICAL ? TN_BOOL : ct;
			/* Plain stores: the streamed loop's blocks (computed in the L1 cache,
			 * then copied out with non-temporal stores) made float32 maximum of
			 * 1e7 elements 20% slower (4.9 against 4.0 ms, 2 threads). */
			tn__chunked_for_each(&it, (const enum tn_dtype[]){ out_ct, ct, ct }, ext_row,
					     &c);
		}
	}
	if (ret && rc == 0)
		*ret = tn__iter_output(&it, 0);
out:
	tn__iter_release(&it);
	tn_tensor_unref(wrapped);
	return rc;
}

static int need_ret(void *ret, const char *who)
{
	return ret ? 0 : tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
}

/* div's rounding mode: NULL (None), "trunc" or "floor"; the operator to run, or an error. */
static int div_mode(const char *mode)
{
	if (!mode)
		return X_DIV;
	if (strcmp(mode, "trunc") == 0)
		return X_DIV_TRUNC;
	if (strcmp(mode, "floor") == 0)
		return X_DIV_FLOOR;
	return tn__error(TN_EINVAL,
			 "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
			 "found '%s'",
			 mode);
}

/* ---- the kernels of the table, for each dispatch key ---- */

/* Tensor OP Tensor: functional, out=, in place. */
#define TT_RUN(NAME, X, SUFFIX, KEY)                                                         \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, const tn_tensor *other,                \
				  tn_tensor **ret_tensor)                                       \
	{                                                                                    \
		int rc = need_ret(ret_tensor, ext_ops[X].name);                              \
		return rc ? rc : ext(X, NULL, self, NULL, other, NULL, KEY, ret_tensor);      \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, const tn_tensor *other,            \
				      tn_tensor *out)                                           \
	{                                                                                    \
		int rc = tn__check_live(out, ext_ops[X].name);                               \
		return rc ? rc : ext(X, out, self, NULL, other, NULL, KEY, NULL);             \
	}
#define TT_INPLACE_RUN(NAME, X, SUFFIX, KEY)                                                 \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, const tn_tensor *other)                     \
	{                                                                                    \
		int rc = tn__check_live(self, ext_ops[X].name);                              \
		return rc ? rc : ext(X, self, self, NULL, other, NULL, KEY, NULL);            \
	}
/* Tensor OP Scalar: functional, out=, in place (NAME is the C name's stem, name_scalar). */
#define TS_RUN(NAME, X, SUFFIX, KEY)                                                         \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, tn_scalar other, tn_tensor **ret_tensor) \
	{                                                                                    \
		int rc = need_ret(ret_tensor, ext_ops[X].name);                              \
		return rc ? rc : ext(X, NULL, self, NULL, NULL, &other, KEY, ret_tensor);     \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, tn_scalar other, tn_tensor *out)   \
	{                                                                                    \
		int rc = tn__check_live(out, ext_ops[X].name);                               \
		return rc ? rc : ext(X, out, self, NULL, NULL, &other, KEY, NULL);            \
	}                                                                                    \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, tn_scalar other)                            \
	{                                                                                    \
		int rc = tn__check_live(self, ext_ops[X].name);                              \
		return rc ? rc : ext(X, self, self, NULL, NULL, &other, KEY, NULL);           \
	}
/* Scalar OP Tensor: functional and out= (NAME: name_scalar_tensor). */
#define ST_RUN(NAME, X, SUFFIX, KEY)                                                         \
	int tn__##NAME##_##SUFFIX(tn_scalar self, const tn_tensor *other, tn_tensor **ret_tensor) \
	{                                                                                    \
		int rc = need_ret(ret_tensor, ext_ops[X].name);                              \
		return rc ? rc : ext(X, NULL, NULL, &self, other, NULL, KEY, ret_tensor);     \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(tn_scalar self, const tn_tensor *other, tn_tensor *out)   \
	{                                                                                    \
		int rc = tn__check_live(out, ext_ops[X].name);                               \
		return rc ? rc : ext(X, out, NULL, &self, other, NULL, KEY, NULL);            \
	}

/*
 * Scalar OP Tensor for the families whose Scalar_Tensor_out PyTorch 1.13 generates from the
 * functional form (remainder, the bitwise operators and shifts): the result is computed as the
 * functional form computes it and then converted into @out, of any dtype (a float remainder
 * into an int64 out truncates; the functional form's errors come first). PyTorch resizes
 * @out; libtensor requires the result's shape.
 */
static int st_out_copy(int x, tn_scalar self, const tn_tensor *other, tn_tensor *out,
		       enum tn_dispatch_key key)
{
	tn_tensor *r = NULL;
	int rc = ext(x, NULL, NULL, &self, other, NULL, key, &r);
	if (rc < 0)
		return rc;
	rc = tn__copy_result_into(out, r, key, ext_ops[x].name);
	tn_tensor_unref(r);
	return rc;
}
#define ST_COPY_RUN(NAME, X, SUFFIX, KEY)                                                    \
	int tn__##NAME##_##SUFFIX(tn_scalar self, const tn_tensor *other, tn_tensor **ret_tensor) \
	{                                                                                    \
		int rc = need_ret(ret_tensor, ext_ops[X].name);                              \
		return rc ? rc : ext(X, NULL, NULL, &self, other, NULL, KEY, ret_tensor);     \
	}                                                                                    \
	int tn__##NAME##_out_##SUFFIX(tn_scalar self, const tn_tensor *other, tn_tensor *out)   \
	{                                                                                    \
		int rc = tn__check_live(out, ext_ops[X].name);                               \
		if (rc == 0)                                                                 \
			rc = tn__check_live(other, ext_ops[X].name);                         \
		return rc ? rc : st_out_copy(X, self, other, out, KEY);                      \
	}

#define ALL_KEYS(FORM, NAME, X) TN_FOR_EACH_KEY(FORM, NAME, X)

/* The families with every form: Tensor, Scalar (and Scalar_Tensor), out=, in place. */
#define FULL_FAMILY(NAME, X)                           \
	ALL_KEYS(TT_RUN, NAME, X)                          \
	ALL_KEYS(TT_INPLACE_RUN, NAME, X)                  \
	ALL_KEYS(TS_RUN, NAME##_scalar, X)

FULL_FAMILY(remainder, X_REMAINDER)
ALL_KEYS(ST_COPY_RUN, remainder_scalar_tensor, X_REMAINDER)
FULL_FAMILY(fmod, X_FMOD)
FULL_FAMILY(bitwise_and, X_BITWISE_AND)
ALL_KEYS(ST_COPY_RUN, bitwise_and_scalar_tensor, X_BITWISE_AND)
FULL_FAMILY(bitwise_or, X_BITWISE_OR)
ALL_KEYS(ST_COPY_RUN, bitwise_or_scalar_tensor, X_BITWISE_OR)
FULL_FAMILY(bitwise_xor, X_BITWISE_XOR)
ALL_KEYS(ST_COPY_RUN, bitwise_xor_scalar_tensor, X_BITWISE_XOR)
FULL_FAMILY(bitwise_left_shift, X_LSHIFT)
ALL_KEYS(ST_COPY_RUN, bitwise_left_shift_scalar_tensor, X_LSHIFT)
FULL_FAMILY(bitwise_right_shift, X_RSHIFT)
ALL_KEYS(ST_COPY_RUN, bitwise_right_shift_scalar_tensor, X_RSHIFT)

ALL_KEYS(TT_RUN, pow, X_POW)
ALL_KEYS(TT_INPLACE_RUN, pow, X_POW)
ALL_KEYS(TS_RUN, pow_scalar, X_POW_TS)
ALL_KEYS(ST_RUN, pow_scalar_tensor, X_POW_ST)

/* maximum and minimum have no in-place form in PyTorch. */
ALL_KEYS(TT_RUN, maximum, X_MAXIMUM)
ALL_KEYS(TT_RUN, minimum, X_MINIMUM)
ALL_KEYS(TT_RUN, atan2, X_ATAN2)
ALL_KEYS(TT_INPLACE_RUN, atan2, X_ATAN2)
ALL_KEYS(TT_RUN, logical_and, X_LOGICAL_AND)
ALL_KEYS(TT_INPLACE_RUN, logical_and, X_LOGICAL_AND)
ALL_KEYS(TT_RUN, logical_or, X_LOGICAL_OR)
ALL_KEYS(TT_INPLACE_RUN, logical_or, X_LOGICAL_OR)
ALL_KEYS(TT_RUN, logical_xor, X_LOGICAL_XOR)
ALL_KEYS(TT_INPLACE_RUN, logical_xor, X_LOGICAL_XOR)

/* div with a rounding mode: .Tensor_mode, .Scalar_mode, .out_mode, _.Tensor_mode,
 * _.Scalar_mode. The mode is checked first, as PyTorch does. */
#define DIV_MODE_RUN(SUFFIX, KEY)                                                            \
	int tn__div_mode_##SUFFIX(const tn_tensor *self, const tn_tensor *other,                \
				  const char *rounding_mode, tn_tensor **ret_tensor)            \
	{                                                                                    \
		int x = div_mode(rounding_mode), rc = x < 0 ? x : need_ret(ret_tensor, "div"); \
		return rc ? rc : ext(x, NULL, self, NULL, other, NULL, KEY, ret_tensor);      \
	}                                                                                    \
	int tn__div_scalar_mode_##SUFFIX(const tn_tensor *self, tn_scalar other,                \
					 const char *rounding_mode, tn_tensor **ret_tensor)     \
	{                                                                                    \
		int x = div_mode(rounding_mode), rc = x < 0 ? x : need_ret(ret_tensor, "div"); \
		return rc ? rc : ext(x, NULL, self, NULL, NULL, &other, KEY, ret_tensor);     \
	}                                                                                    \
	int tn__div_out_mode_##SUFFIX(const tn_tensor *self, const tn_tensor *other,            \
				      const char *rounding_mode, tn_tensor *out)                \
	{                                                                                    \
		int x = div_mode(rounding_mode), rc = x < 0 ? x : tn__check_live(out, "div"); \
		return rc ? rc : ext(x, out, self, NULL, other, NULL, KEY, NULL);             \
	}                                                                                    \
	int tn__div_mode__##SUFFIX(tn_tensor *self, const tn_tensor *other,                     \
				   const char *rounding_mode)                                   \
	{                                                                                    \
		int x = div_mode(rounding_mode), rc = x < 0 ? x : tn__check_live(self, "div_"); \
		return rc ? rc : ext(x, self, self, NULL, other, NULL, KEY, NULL);            \
	}                                                                                    \
	int tn__div_scalar_mode__##SUFFIX(tn_tensor *self, tn_scalar other,                     \
					  const char *rounding_mode)                            \
	{                                                                                    \
		int x = div_mode(rounding_mode), rc = x < 0 ? x : tn__check_live(self, "div_"); \
		return rc ? rc : ext(x, self, self, NULL, NULL, &other, KEY, NULL);           \
	}

DIV_MODE_RUN(cpu, TN_KEY_CPU)
DIV_MODE_RUN(cuda, TN_KEY_CUDA)
DIV_MODE_RUN(meta, TN_KEY_META)
