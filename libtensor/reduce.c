/* SPDX-License-Identifier: MIT */
/*
 * Reductions on the TensorIterator, as ATen's ReduceOps: sum, mean, prod, amax, amin, max and
 * min (whole tensor, and along a dim with indices), argmax, argmin, all and any, each
 * functional and out=, with Meta kernels.
 *
 * An operator checks its dims and dtypes with PyTorch's rules and messages, allocates its
 * result contiguous in the result shape (or takes the out= tensor, which must have that shape),
 * and gives the iterator a keepdim view of it: size 1 along the reduced dims, which the
 * iterator turns into stride 0, reorders first and coalesces apart from the others. The
 * per-capability kernel (kernels/reduce_kernel.c) reduces one 2-D step and combines it into the
 * output, which starts at the operation's identity. Work is spread over threads as ATen's
 * parallel_reduce does: along a non-reduced dimension when there are several outputs, or, when
 * there is one output (or too few to share), in two passes: each thread reduces its range of
 * the input into its own copy of the outputs, and the copies are combined in thread order.
 *
 * Sums and products compute in the result dtype (ATen converts the input to it; here the loop
 * converts CHUNK elements at a time on the stack); float16 and bfloat16 accumulate in float32
 * and round once at the end, as does mean, which divides the sum. Index reductions run a
 * second kernel over the rows of their one reduced dimension.
 */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "iter.h"
#include "ops_kernels.h"
#include "stub.h"

#define CHUNK 1024
/* Outputs at most this many may be reduced in two passes (one copy per thread). */
#define TWO_PASS_MAX_OUTPUTS 4096

/* ---- dims and shapes ---- */

const char *tn__typemeta_name(enum tn_dtype dt)
{
	static const char *const names[] = { "bool",	  "unsigned char", "signed char",
					     "short int", "int",	   "long int",
					     "c10::Half", "c10::BFloat16", "float",
					     "double" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == TN_NUM_DTYPES, "a name per dtype");
	return names[dt];
}

static int expect_out_dtype(const tn_tensor *out, enum tn_dtype want)
{
	if (out->dtype == want)
		return 0;
	return tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s instead",
			 tn__typemeta_name(want), tn__typemeta_name(out->dtype));
}

/*
 * The reduced dims of @self as a bit mask: @dims NULL (None) or empty means all of them.
 * Dims wrap as PyTorch's (IndexError wording) and may not repeat.
 */
static int dim_mask(const tn_tensor *self, int ndims, const int64_t *dims, uint64_t *ret_mask)
{
	uint64_t seen = 0;
	if (!dims || ndims == 0) {
		*ret_mask = self->ndim == 64 ? ~(uint64_t)0 : (((uint64_t)1 << self->ndim) - 1);
		return 0;
	}
	for (int i = 0; i < ndims; i++) {
		int d = tn__wrap_dim(dims[i], self->ndim);
		if (d < 0)
			return d;
		if (seen & ((uint64_t)1 << d))
			return tn__error(TN_EINVAL, "dim %d appears multiple times in the list of dims",
					 d);
		seen |= (uint64_t)1 << d;
	}
	/* A 0-dim tensor has no dimension to reduce (dim 0 or -1 names the tensor itself). */
	*ret_mask = self->ndim ? seen : 0;
	return 0;
}

/*
 * The result of reducing @self over @mask: the out= tensor (checked to have the result
 * shape) or a new contiguous tensor of @dtype, and (in *ret_view) its keepdim view, whose
 * size-1 dims the iterator broadcasts over the reduced ones. Both are new references.
 */
static int make_result(const tn_tensor *self, uint64_t mask, bool keepdim, enum tn_dtype dtype,
		       tn_tensor *out, tn_tensor **ret_result, tn_tensor **ret_view, const char *who)
{
	int64_t shape[TN_MAX_DIMS], keep[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	int n = 0, rc;
	tn_tensor *res;

	for (int d = 0; d < self->ndim; d++) {
		bool red = mask & ((uint64_t)1 << d);
		keep[d] = red ? 1 : self->sizes[d];
		if (keepdim || !red)
			shape[n++] = keep[d];
	}
	if (out) {
		bool same = out->ndim == n &&
			    memcmp(out->sizes, shape, (size_t)n * sizeof(int64_t)) == 0;
		if (!same) {
			char a[256], b[256];
			tn__format_shape(a, sizeof(a), out->ndim, out->sizes);
			tn__format_shape(b, sizeof(b), n, shape);
			return tn__error(TN_EINVAL,
					 "%s: output with shape %s doesn't match the result shape %s "
					 "(libtensor does not resize out= tensors)",
					 who, a, b);
		}
		res = tn_tensor_ref(out);
	} else if ((rc = tn__empty_like_device(self->storage->device, dtype, n,
					       n ? shape : NULL, NULL, &res, who)) < 0) {
		return rc;
	}
	/* The keepdim view: the result's strides, any stride for the inserted size-1 dims. */
	for (int d = 0, k = 0; d < self->ndim; d++) {
		bool red = mask & ((uint64_t)1 << d);
		strides[d] = (keepdim || !red) ? res->strides[k++] : 1;
	}
	rc = tn__tensor_make(res->storage, res->offset, self->ndim, self->ndim ? keep : NULL,
			     self->ndim ? strides : NULL, res->dtype, ret_view);
	if (rc < 0) {
		tn_tensor_unref(res);
		return rc;
	}
	*ret_result = res;
	return 0;
}

/* ---- running a value reduction ---- */

struct red_ctx {
	tn__reduce_fn fn;
	tn__cast_fn cast;
	int op;
	enum tn_dtype kdt;   /* the kernel's input dtype */
	enum tn_dtype in_dt; /* the input's, converted to kdt chunk by chunk when different */
	const struct tn_iter *it;
	int split;	    /* the dimension split across threads */
	int64_t round;	    /* columns per thread rounded to multiples of this */
	char *buf;	    /* two-pass: a copy of the outputs per thread */
	int64_t extent;	    /* bytes of one copy */
};

static void red_loop(void *vctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	const struct red_ctx *c = vctx;
	int64_t os[2] = { strides[0], strides[2] }, is[2] = { strides[1], strides[3] };
	_Alignas(64) unsigned char buf[CHUNK * 8];

	if (c->in_dt == c->kdt) {
		c->fn(c->op, c->kdt, data[0], os, data[1], is, n0, n1);
		return;
	}
	const int64_t w = (int64_t)tn__itemsize(c->kdt);
	const int64_t bos[2] = { os[0], 0 }, bis[2] = { w, 0 };
	for (int64_t j = 0; j < n1; j++) {
		for (int64_t i = 0; i < n0; i += CHUNK) {
			int64_t m = n0 - i < CHUNK ? n0 - i : CHUNK;
			c->cast((char *)buf, c->kdt, w, data[1] + j * is[1] + i * is[0], c->in_dt,
				is[0], m);
			c->fn(c->op, c->kdt, data[0] + j * os[1] + i * os[0], bos, (char *)buf, bis,
			      m, 1);
		}
	}
}

/* The leading dims the outputs do not move along: the reduced ones, first after reordering. */
static int num_reduce_dims(const struct tn_iter *it)
{
	int d = 0;
	while (d < it->ndim) {
		bool red = true;
		for (int o = 0; o < it->noutputs; o++)
			red &= it->ops[o].strides[d] == 0;
		if (!red)
			break;
		d++;
	}
	return d;
}

/* Split along @c->split: each thread reduces its columns into their outputs. */
static void split_range(void *vctx, int64_t b, int64_t e, int tid)
{
	const struct red_ctx *c = vctx;
	const int64_t cols = c->it->shape[c->split];
	struct tn_iter sub = *c->it;

	(void)tid;
	/* Threads' columns start on 128-byte boundaries when the input's columns are adjacent
	 * (ATen's round_columns), so no two threads write one cache line of the output. */
	b -= b % c->round;
	if (e != cols)
		e -= e % c->round;
	if (b >= e)
		return;
	sub.shape[c->split] = e - b;
	sub.numel = c->it->numel / cols * (e - b);
	for (int k = 0; k < sub.ntensors; k++)
		sub.ops[k].data += b * sub.ops[k].strides[c->split];
	tn__iter_serial_for_each(&sub, red_loop, (void *)c, 0, sub.numel);
}

/* Two passes: each thread reduces a range of the input into its own copy of the outputs. */
static void two_pass_range(void *vctx, int64_t b, int64_t e, int tid)
{
	const struct red_ctx *c = vctx;
	struct tn_iter sub = *c->it;

	sub.ops[0].data = c->buf + tid * c->extent;
	tn__iter_serial_for_each(&sub, red_loop, (void *)c, b, e);
}

/* Call @fn with the byte offset of every output element (the dims from @first on). */
static void for_each_output(const struct tn_iter *it, int first, int k,
			    void (*fn)(void *ctx, int64_t off), void *ctx)
{
	int64_t counter[TN_MAX_DIMS] = { 0 };
	for (;;) {
		int64_t off = 0;
		for (int d = first; d < it->ndim; d++)
			off += counter[d] * it->ops[k].strides[d];
		fn(ctx, off);
		int d = first;
		while (d < it->ndim && ++counter[d] == it->shape[d])
			counter[d++] = 0;
		if (d >= it->ndim)
			return;
	}
}

struct combine_ctx {
	const struct red_ctx *c;
	enum tn_dtype acc_dt;
	int threads;
};

static void combine_one(void *vctx, int64_t off)
{
	const struct combine_ctx *cc = vctx;
	const struct red_ctx *c = cc->c;
	const int64_t os[2] = { 0, 0 }, is[2] = { c->extent, 0 };
	/* The copies hold accumulators: combine them with the kernel of their own dtype. */
	c->fn(c->op, cc->acc_dt, c->it->ops[0].data + off, os, c->buf + off, is, cc->threads, 1);
}

/* The identity of @op in @dt: 0 for sums, 1 for products, the lowest value for max, ... */
static tn_scalar identity(int op, enum tn_dtype dt)
{
	bool fl = tn__is_floating(dt);
	static const int64_t lo[] = { 0, 0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN };
	static const int64_t hi[] = { 1, UINT8_MAX, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX };
	switch (op) {
	case TN_RED_SUM:
	case TN_RED_ANY:
		return dt == TN_BOOL ? tn_scalar_bool(false) : tn_scalar_int(0);
	case TN_RED_PROD:
	case TN_RED_ALL:
		return dt == TN_BOOL ? tn_scalar_bool(true) : tn_scalar_int(1);
	case TN_RED_MAX:
		return dt == TN_BOOL ? tn_scalar_bool(false)
		       : fl	     ? tn_scalar_double(-INFINITY)
				     : tn_scalar_int(lo[dt]);
	default:
		return dt == TN_BOOL ? tn_scalar_bool(true)
		       : fl	     ? tn_scalar_double(INFINITY)
				     : tn_scalar_int(hi[dt]);
	}
}

/*
 * A small contiguous CPU input, in the kernel's dtype, reduced to one value: one kernel call
 * over the flat array, without an iterator (PyTorch pays ~1 us for this; an iterator and the
 * fill of the output would cost more than the sum).
 */
static bool flat_ok(const tn_tensor *in, enum tn_dtype kdt)
{
	return in->contiguous && in->numel <= TN_GRAIN_SIZE && in->dtype == kdt &&
	       in->storage->device.type == TN_DEVICE_CPU;
}

static int reduce_flat(int op, char *o, enum tn_dtype odt, const tn_tensor *in)
{
	const int64_t isz = (int64_t)tn__itemsize(in->dtype), os[2] = { 0, 0 }, is[2] = { isz, 0 };
	int rc = tn__scalar_to_element(identity(op, odt), odt, o);
	if (rc < 0)
		return rc;
	if (in->numel > 0)
		((tn__reduce_fn)tn__stub_get(&tn__reduce_stub))(op, in->dtype, o, os, tn__data(in),
								 is, in->numel, 1);
	return 0;
}

/*
 * A small contiguous input whose reduced dims all come before its kept ones (column sums:
 * [R, C] -> [C]) or all after them (row sums: [R, C] -> [R]), into a contiguous output: one
 * kernel call over the input as a 2-D array, without an iterator. Returns 1 when done, 0 when
 * the dims interleave (the iterator's case), or an error.
 */
static int reduce_2d(int op, tn_tensor *view, const tn_tensor *in)
{
	int last_red = -1, first_red = TN_MAX_DIMS, last_kept = -1, first_kept = TN_MAX_DIMS;
	int64_t nred = 1, nkept = 1;
	unsigned char elem[8];
	int rc;

	for (int d = 0; d < in->ndim; d++) {
		if (in->sizes[d] == 1)
			continue; /* reduced or kept alike */
		if (view->sizes[d] == 1) {
			nred *= in->sizes[d];
			last_red = d;
			first_red = first_red < d ? first_red : d;
		} else {
			nkept *= in->sizes[d];
			last_kept = d;
			first_kept = first_kept < d ? first_kept : d;
		}
	}
	bool cols = last_red < first_kept, rows = last_kept < first_red;
	if (!cols && !rows)
		return 0;
	const int64_t isz = (int64_t)tn__itemsize(in->dtype), osz = (int64_t)tn__itemsize(view->dtype);
	if ((rc = tn__scalar_to_element(identity(op, view->dtype), view->dtype, elem)) < 0)
		return rc;
	tn__fill_elements(tn__data(view), elem, (size_t)osz, nkept);
	if (in->numel == 0)
		return 1;
	/* Kernel dims: 0 is the reduced one (output stride 0), 1 the kept one. */
	const int64_t os[2] = { 0, osz };
	const int64_t is[2] = { cols ? nkept * isz : isz, cols ? isz : nred * isz };
	((tn__reduce_fn)tn__stub_get(&tn__reduce_stub))(op, in->dtype, tn__data(view), os,
							 tn__data(in), is, nred, nkept);
	return 1;
}

/* The reduction iterator: @view (keepdim, stride 0 along reduced dims) is the output. */
static void reduction_config(struct tn_iter_config *cfg, tn_tensor *view, const tn_tensor *in)
{
	tn__iter_config_init(cfg);
	cfg->noutputs = 1;
	cfg->ninputs = 1;
	cfg->tensors[0] = view;
	cfg->tensors[1] = in;
	cfg->check_all_same_dtype = false;
	cfg->resize_outputs = false;
	cfg->is_reduction = true;
}

/*
 * Reduce @in into @view (the keepdim view of the accumulator, dtype @acc_dt) with @op; the
 * kernel reads @kdt (@in is converted to it when its dtype differs). @run false checks only.
 */
static int reduce_into(int op, tn_tensor *view, const tn_tensor *in, enum tn_dtype kdt,
		       bool run, const char *who)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	unsigned char elem[8];
	char *partial = NULL;
	int rc;

	if (run && flat_ok(in, kdt) && view->contiguous && view->storage != in->storage &&
	    view->storage->device.type == TN_DEVICE_CPU) {
		if (view->numel == 1)
			return reduce_flat(op, tn__data(view), view->dtype, in);
		if ((rc = reduce_2d(op, view, in)) != 0)
			return rc < 0 ? rc : 0;
	}
	reduction_config(&cfg, view, in);
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	if (!run)
		goto out;

	enum tn_dtype acc_dt = view->dtype;
	size_t osize = tn__itemsize(acc_dt);
	struct red_ctx c = { .fn = (tn__reduce_fn)tn__stub_get(&tn__reduce_stub),
			     .cast = (tn__cast_fn)tn__stub_get(&tn__cast_stub),
			     .op = op,
			     .kdt = kdt,
			     .in_dt = in->dtype,
			     .it = &it };
	int threads = it.numel > TN_GRAIN_SIZE ? tn__num_threads() : 1;
	int nred = num_reduce_dims(&it);
	int64_t nout = 1;
	for (int d = nred; d < it.ndim; d++)
		nout *= it.shape[d];
	bool two_pass = false;
	if (threads > 1) {
		/* ATen's find_split_dim: the outermost non-reduced dim with a column per
		 * thread, else the largest. */
		c.split = -1;
		for (int d = it.ndim - 1; d >= nred; d--) {
			if (it.shape[d] >= threads) {
				c.split = d;
				break;
			}
			if (c.split < 0 || it.shape[d] > it.shape[c.split])
				c.split = d;
		}
		two_pass = c.split < 0 ||
			   (it.shape[c.split] < threads && nout <= TWO_PASS_MAX_OUTPUTS);
	}
	tn__scalar_to_element(identity(op, acc_dt), acc_dt, elem);
	if (two_pass) {
		c.extent = (int64_t)osize;
		for (int d = nred; d < it.ndim; d++)
			c.extent += (it.shape[d] - 1) * it.ops[0].strides[d];
		c.buf = partial = tn__malloc((size_t)(threads * c.extent));
		if (!c.buf) {
			rc = tn__error(TN_ENOMEM, "%s: out of memory for %d partial results", who,
				       threads);
			goto out;
		}
		tn__fill_elements(c.buf, elem, osize, threads * c.extent / (int64_t)osize);
	}
	/* From here on the output is written: nothing can fail. */
	if ((rc = tn__fill_cpu(view, identity(op, acc_dt))) < 0)
		goto out;
	if (it.numel == 0)
		goto out;
	if (threads <= 1) {
		tn__iter_serial_for_each(&it, red_loop, &c, 0, it.numel);
	} else if (two_pass) {
		tn__parallel_for(it.numel, threads, two_pass_range, &c);
		struct combine_ctx cc = { &c, acc_dt, threads };
		for_each_output(&it, nred, 0, combine_one, &cc);
	} else {
		int64_t isz = (int64_t)tn__itemsize(in->dtype);
		c.round = it.ops[1].strides[c.split] == isz && isz <= 128 ? 128 / isz : 1;
		tn__parallel_for(it.shape[c.split], threads, split_range, &c);
	}
out:
	tn__free(partial);
	tn__iter_release(&it);
	return rc;
}

/* ---- value reductions: sum, mean, prod, amax, amin, max, min, all, any ---- */

enum kind { K_SUM, K_MEAN, K_PROD, K_AMAX, K_AMIN, K_MAX, K_MIN, K_ALL, K_ANY };

static const struct {
	const char *name;
	int op;
} kinds[] = {
	[K_SUM] = { "sum", TN_RED_SUM },   [K_MEAN] = { "mean", TN_RED_SUM },
	[K_PROD] = { "prod", TN_RED_PROD }, [K_AMAX] = { "amax", TN_RED_MAX },
	[K_AMIN] = { "amin", TN_RED_MIN }, [K_MAX] = { "max", TN_RED_MAX },
	[K_MIN] = { "min", TN_RED_MIN },   [K_ALL] = { "all", TN_RED_ALL },
	[K_ANY] = { "any", TN_RED_ANY },
};

static bool is_half(enum tn_dtype dt)
{
	return dt == TN_FLOAT16 || dt == TN_BFLOAT16;
}

/* The result dtype, with PyTorch's checks of dtype= and of the out= tensor's dtype. */
static int result_dtype(enum kind k, const tn_tensor *self, const enum tn_dtype *dtype,
			const tn_tensor *out, enum tn_dtype *ret)
{
	int rc;
	if (dtype && !tn_dtype_is_valid(*dtype))
		return tn__error(TN_EINVAL, "%s: invalid dtype %d", kinds[k].name, (int)*dtype);
	switch (k) {
	case K_SUM:
	case K_PROD:
		if (dtype && out && (rc = expect_out_dtype(out, *dtype)) < 0)
			return rc;
		*ret = dtype ? *dtype
		       : out ? out->dtype
		       : tn__is_floating(self->dtype) ? self->dtype
						      : TN_INT64;
		return 0;
	case K_MEAN: {
		enum tn_dtype in = dtype ? *dtype : self->dtype;
		if (!tn__is_floating(in))
			return tn__error(TN_EINVAL,
					 "mean(): could not infer output dtype. %s dtype must be "
					 "either a floating point or complex dtype. Got: %s",
					 dtype ? "Optional" : "Input", tn__scalar_type_name(in));
		if (out && dtype && (rc = expect_out_dtype(out, *dtype)) < 0)
			return rc;
		if (out && !tn__can_cast(in, out->dtype))
			return tn__error(TN_EINVAL,
					 "result type %s can't be cast to the desired output type %s",
					 tn__scalar_type_name(in), tn__scalar_type_name(out->dtype));
		*ret = out ? out->dtype : in;
		return 0;
	}
	case K_AMAX:
	case K_AMIN:
	case K_MAX:
	case K_MIN:
		if (out && out->dtype != self->dtype)
			return tn__error(TN_EINVAL,
					 "Expected the dtype for input and out to match, but got %s "
					 "for input's dtype and %s for out's dtype.",
					 tn__scalar_type_name(self->dtype),
					 tn__scalar_type_name(out->dtype));
		*ret = self->dtype;
		return 0;
	default:
		if (out && out->dtype != TN_BOOL && out->dtype != TN_UINT8)
			return tn__error(TN_EINVAL, "%s only supports bool tensor for result, got: %s",
					 kinds[k].name, tn__scalar_type_name(out->dtype));
		*ret = out ? out->dtype : self->dtype == TN_UINT8 ? TN_UINT8 : TN_BOOL;
		return 0;
	}
}

/* max, min, amax and amin of an empty tensor need every reduced dim to have elements. */
static int check_nonempty(enum kind k, const tn_tensor *self, int ndims, const int64_t *dims)
{
	if (self->numel != 0)
		return 0;
	if (!dims || ndims == 0)
		return tn__error(TN_EINVAL,
				 "%s(): Expected reduction dim to be specified for input.numel() == "
				 "0. Specify the reduction dim with the 'dim' argument.",
				 kinds[k].name);
	for (int i = 0; i < ndims; i++) {
		int d = tn__wrap_dim(dims[i], self->ndim);
		if (d < 0)
			return d;
		if (self->sizes[d] == 0)
			return tn__error(TN_ERANGE,
					 "%s(): Expected reduction dim %lld to have non-zero size.",
					 kinds[k].name, (long long)dims[i]);
	}
	return 0;
}

/* out = mean's sum divided by the count, in the accumulator's floating dtype (contiguous). */
static void divide(tn_tensor *acc, int64_t count)
{
	if (acc->dtype == TN_FLOAT64) {
		double *p = tn_tensor_data(acc);
		for (int64_t i = 0; i < acc->numel; i++)
			p[i] /= (double)count;
	} else {
		float *p = tn_tensor_data(acc);
		for (int64_t i = 0; i < acc->numel; i++)
			p[i] /= (float)count;
	}
}

/*
 * A value reduction on the backend of dispatch key @key: one kernel accumulates in @acc_dt
 * and writes the result dtype of @view, divided by the count for mean. An empty input gives
 * the identity (mean: NaN, 0/0), as on the CPU.
 */
static int device_reduce(enum tn_dispatch_key key, enum kind k, tn_tensor *view,
			 const tn_tensor *in, enum tn_dtype acc_dt, const char *who)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	if (in->numel == 0)
		return tn__fill_key(view, k == K_MEAN ? tn_scalar_double(NAN)
						      : identity(kinds[k].op, view->dtype), key);
	reduction_config(&cfg, view, in);
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		return rc;
	double divisor = k == K_MEAN && view->numel > 0 ? (double)(in->numel / view->numel) : 1.0;
	rc = tn__device_run(key, &it, TN_KERNEL_REDUCE, kinds[k].op, NULL, acc_dt, divisor,
			    who);
	tn__iter_release(&it);
	return rc;
}

/*
 * The one implementation of the value reductions: @dims NULL reduces everything. @out NULL
 * allocates the result into *ret; @key is the kernel's dispatch key (tn__key_runs).
 */
static int value_reduce(enum kind k, const tn_tensor *self, int ndims, const int64_t *dims,
			bool keepdim, const enum tn_dtype *dtype, tn_tensor *out,
			enum tn_dispatch_key key, tn_tensor **ret)
{
	const char *who = kinds[k].name;
	tn_tensor *res = NULL, *view = NULL, *acc = NULL, *acc_view = NULL;
	enum tn_dtype dt = TN_BOOL;
	uint64_t mask;
	int rc;

	if ((rc = tn__check_live(self, who)) < 0 || (out && (rc = tn__check_live(out, who)) < 0))
		return rc;
	if (!out && !ret)
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
	if (ndims < 0)
		return tn__error(TN_EINVAL, "%s: ndim is negative (%d)", who, ndims);
	if ((rc = result_dtype(k, self, dtype, out, &dt)) < 0)
		return rc;
	if ((k == K_AMAX || k == K_AMIN || k == K_MAX || k == K_MIN) &&
	    (rc = check_nonempty(k, self, ndims, dims)) < 0)
		return rc;
	if ((rc = dim_mask(self, ndims, dims, &mask)) < 0)
		return rc;
	/* all and any into a uint8 out= tensor: PyTorch converts the input to uint8 first, so
	 * 0.5 counts as false and 256 (wrapping to 0) too; but not an input of one element,
	 * which its allany_impl converts to bool instead (0.5 and 256 count as true). */
	if ((k == K_ALL || k == K_ANY) && out && out->dtype == TN_UINT8 &&
	    self->dtype != TN_UINT8 && self->numel != 1) {
		tn_tensor *u8;
		if ((rc = tn__empty_like_device(self->storage->device, TN_UINT8, self->ndim,
						self->ndim ? self->sizes : NULL, NULL, &u8, who)) < 0)
			return rc;
		rc = tn__copy(u8, self, key, who);
		if (rc == 0)
			rc = value_reduce(k, u8, ndims, dims, keepdim, dtype, out, key, ret);
		tn_tensor_unref(u8);
		return rc;
	}

	/* The kernel's input dtype and the accumulator: sums and products run in the result
	 * dtype (16-bit floats accumulating in float32); the others in the input's dtype. As
	 * ATen's make_reduction_from_out_ty on the CPU, the input is converted to the result
	 * dtype first (sum(bfloat16, dtype=float16) rounds each element to float16, 1e5
	 * becoming inf); a 16-bit input of a float32 result is read directly, which converts
	 * exactly. */
	enum tn_dtype kdt = self->dtype, acc_dt = dt;
	if (k == K_SUM || k == K_MEAN || k == K_PROD) {
		acc_dt = is_half(dt) ? TN_FLOAT32 : dt;
		bool direct = self->dtype == dt || (is_half(self->dtype) && dt == TN_FLOAT32);
		kdt = direct ? self->dtype : dt;
	}
	/* A small contiguous tensor reduced to one value: no keepdim view, no iterator. */
	bool one = true;
	for (int d = 0; d < self->ndim; d++)
		one &= (mask >> d & 1) || self->sizes[d] == 1;
	if (key == TN_KEY_CPU && one && !out && acc_dt == dt && flat_ok(self, kdt)) {
		/* Every dim has size 1 in the result: the reduced ones kept (keepdim) and
		 * the size-1 dims not reduced, which stay (sum(ones(1, 3), [1]) has shape
		 * [1], not []). */
		int64_t ones[TN_MAX_DIMS];
		int n = 0;
		for (int d = 0; d < self->ndim; d++)
			if (keepdim || !(mask >> d & 1))
				ones[n++] = 1;
		if ((rc = tn__empty_like_device(self->storage->device, dt, n, n ? ones : NULL,
						NULL, &res, who)) < 0)
			return rc;
		if ((rc = reduce_flat(kinds[k].op, tn__data(res), dt, self)) < 0) {
			tn_tensor_unref(res);
			return rc;
		}
		if (k == K_MEAN) /* the count: every element (0 when empty: NaN) */
			divide(res, self->numel);
		*ret = res;
		return 0;
	}
	if ((rc = make_result(self, mask, keepdim, dt, out, &res, &view, who)) < 0)
		return rc;
	const bool run = key == TN_KEY_CPU;
	if (tn__key_on_backend(key)) {
		rc = device_reduce(key, k, view, self, acc_dt, who);
	} else if (!run || (acc_dt == dt && k != K_MEAN)) {
		rc = reduce_into(kinds[k].op, view, self, kdt, run, who);
	} else {
		/* A contiguous accumulator, converted (and divided, for mean) into the result. */
		if ((rc = make_result(self, mask, keepdim, acc_dt, NULL, &acc, &acc_view, who)) <
		    0)
			goto out;
		if ((rc = reduce_into(kinds[k].op, acc_view, self, kdt, run, who)) < 0)
			goto out;
		/* The count of a mean: the reduced elements per output (0 when empty: NaN).
		 * PyTorch 1.13's CPU mean is sum_out into the result, then div_: a 16-bit
		 * result's sum is rounded to it first (a float16 sum past 65504 is inf, and
		 * its mean too), then divided in float and rounded again. */
		int64_t count = acc->numel > 0 ? self->numel / acc->numel : 0;
		if (k == K_MEAN && acc->numel > 0 && is_half(dt) &&
		    ((rc = tn__copy(res, acc, TN_KEY_CPU, who)) < 0 ||
		     (rc = tn__copy(acc, res, TN_KEY_CPU, who)) < 0))
			goto out;
		if (k == K_MEAN && acc->numel > 0)
			divide(acc, count);
		rc = tn__copy(res, acc, TN_KEY_CPU, who);
	}
out:
	tn_tensor_unref(acc_view);
	tn_tensor_unref(acc);
	tn_tensor_unref(view);
	if (rc == 0 && ret)
		*ret = res;
	else
		tn_tensor_unref(res);
	return rc;
}

/*
 * sum.out and prod.out without dims: PyTorch 1.13 has no kernel of their own but runs the
 * functional form (in the input's dtype, int64 for integers, or dtype=) and copies its result
 * into @out, converting: a float32 sum of [2.5, 2.5] into an int64 out is 5, and dtype= need
 * not be out's dtype. PyTorch resizes @out to the 0-dim result; libtensor requires that shape.
 */
static int whole_out(enum kind k, const tn_tensor *self, const enum tn_dtype *dtype,
		     tn_tensor *out, enum tn_dispatch_key key)
{
	const char *who = kinds[k].name;
	tn_tensor *r = NULL;
	int rc;

	if ((rc = tn__check_live(self, who)) < 0 || (rc = tn__check_live(out, who)) < 0)
		return rc;
	if ((rc = value_reduce(k, self, 0, NULL, false, dtype, NULL, key, &r)) < 0)
		return rc;
	if (out->ndim != 0) {
		char a[256];
		tn__format_shape(a, sizeof(a), out->ndim, out->sizes);
		rc = tn__error(TN_EINVAL,
			       "%s: output with shape %s doesn't match the result shape [] "
			       "(libtensor does not resize out= tensors)",
			       who, a);
	} else {
		rc = tn__copy(out, r, key, who);
	}
	tn_tensor_unref(r);
	return rc;
}

/* ---- index reductions: argmax, argmin, max.dim, min.dim ---- */

struct arg_ctx {
	tn__argreduce_fn fn;
	int op;
	enum tn_dtype dt;
	const struct tn_iter *it;
	int nv;		/* operands: [values,] indices, input */
	int64_t nred;	/* the reduced dim's size (1 when nothing is reduced) */
	int64_t s_red;	/* its input stride */
	int first;	/* the first output dim of the iterator */
	/* two passes over one row: the row's offsets and each thread's partial result */
	int64_t off[3];
	_Alignas(8) unsigned char part_val[64][8];
	int64_t part_idx[64];
	bool part_ok[64];
};

/* Outputs [b, e) in linear order: rows of the first output dim, one kernel call each. */
static void arg_outputs(void *vctx, int64_t b, int64_t e, int tid)
{
	const struct arg_ctx *c = vctx;
	const struct tn_iter *it = c->it;
	const int nt = it->ntensors, f = c->first;
	const int64_t n1 = f < it->ndim ? it->shape[f] : 1;

	(void)tid;
	for (int64_t o = b; o < e;) {
		int64_t j = o % n1, rest = o / n1, off[3] = { 0, 0, 0 };
		for (int d = f + 1; d < it->ndim; d++) {
			int64_t v = rest % it->shape[d];
			rest /= it->shape[d];
			for (int k = 0; k < nt; k++)
				off[k] += v * it->ops[k].strides[d];
		}
		int64_t s1[3] = { 0, 0, 0 };
		for (int k = 0; k < nt && f < it->ndim; k++) {
			s1[k] = it->ops[k].strides[f];
			off[k] += j * s1[k];
		}
		int64_t cnt = n1 - j < e - o ? n1 - j : e - o;
		const int in = nt - 1, ix = nt - 2;
		c->fn(c->op, c->dt, it->ops[in].data + off[in], c->s_red, c->nred, s1[in], cnt,
		      c->nv ? it->ops[0].data + off[0] : NULL, s1[0], it->ops[ix].data + off[ix],
		      s1[ix], 0);
		o += cnt;
	}
}

/* One segment [b, e) of a long row into the thread's partial result. */
static void arg_segment(void *vctx, int64_t b, int64_t e, int tid)
{
	struct arg_ctx *c = vctx;
	const int in = c->it->ntensors - 1;
	c->fn(c->op, c->dt, c->it->ops[in].data + c->off[in] + b * c->s_red, c->s_red, e - b, 0, 1,
	      (char *)c->part_val[tid], 0, (char *)&c->part_idx[tid], 0, b);
	c->part_ok[tid] = true;
}

/*
 * The one implementation: @dim NULL reduces the flattened tensor. @vals (values, NULL for
 * argmax/argmin) and @idx are out= tensors or NULL to allocate into *ret_vals / *ret_idx.
 */
static int index_reduce(int op, const char *who, const tn_tensor *self, const int64_t *dim,
			bool keepdim, bool want_vals, tn_tensor *vals, tn_tensor *idx, bool run,
			tn_tensor **ret_vals, tn_tensor **ret_idx)
{
	tn_tensor *flat = NULL, *rv = NULL, *vv = NULL, *ri = NULL, *vi = NULL;
	const tn_tensor *src = self;
	int rc, d = 0;

	if ((rc = tn__check_live(self, who)) < 0 || (vals && (rc = tn__check_live(vals, who)) < 0) ||
	    (idx && (rc = tn__check_live(idx, who)) < 0))
		return rc;
	if ((!idx && !ret_idx) || (want_vals && !vals && !ret_vals))
		return tn__error(TN_EINVAL, "%s: NULL ret_tensor", who);
	if (vals && (rc = expect_out_dtype(vals, self->dtype)) < 0)
		return rc;
	if (idx && (rc = expect_out_dtype(idx, TN_INT64)) < 0)
		return rc;
	if (dim && (d = tn__wrap_dim(*dim, self->ndim)) < 0)
		return d;
	if (self->numel == 0) {
		if (!dim)
			return tn__error(TN_ERANGE,
					 "%s(): Expected reduction dim to be specified for "
					 "input.numel() == 0.",
					 who);
		if (self->ndim > 0 && self->sizes[d] == 0)
			return tn__error(TN_ERANGE,
					 "%s(): Expected reduction dim %d to have non-zero size.", who,
					 d);
	}
	/* ATen's argmax and argmin fill zeros when the reduced dimension has size 1, before
	 * any kernel runs; otherwise PyTorch has no bool kernel for them, only reached with
	 * elements. */
	const bool zero_fill = !want_vals && dim && self->ndim > 0 && self->sizes[d] == 1;
	if (!want_vals && self->dtype == TN_BOOL && self->numel > 0 && !zero_fill)
		return tn__error(TN_EINVAL, "\"%s_cpu\" not implemented for 'Bool'", who);

	uint64_t mask;
	if (dim) {
		if ((rc = dim_mask(self, 1, dim, &mask)) < 0)
			return rc;
		if ((want_vals && (rc = make_result(self, mask, keepdim, self->dtype, vals, &rv,
						      &vv, who)) < 0) ||
		    (rc = make_result(self, mask, keepdim, TN_INT64, idx, &ri, &vi, who)) < 0)
			goto out;
	} else {
		/* The flattened tensor (a view when the strides allow it, as reshape), and a
		 * 1-element view of the result, whose shape is all ones (keepdim) or 0-dim. */
		int64_t n = self->numel, one = 1;
		if ((rc = (run ? tn__reshape : tn__reshape_meta)(self, 1, &n, &flat)) < 0)
			goto out;
		src = flat;
		uint64_t all = self->ndim == 64 ? ~(uint64_t)0 : (((uint64_t)1 << self->ndim) - 1);
		if ((rc = make_result(self, all, keepdim, TN_INT64, idx, &ri, &vi, who)) < 0)
			goto out;
		tn_tensor_unref(vi);
		vi = NULL;
		if ((rc = tn__tensor_make(ri->storage, ri->offset, 1, &one, &one, TN_INT64, &vi)) <
		    0)
			goto out;
	}

	struct tn_iter_config cfg;
	struct tn_iter it;
	tn__iter_config_init(&cfg);
	cfg.noutputs = want_vals ? 2 : 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = want_vals ? vv : vi;
	cfg.tensors[1] = want_vals ? vi : src;
	cfg.tensors[2] = src;
	cfg.check_all_same_dtype = false;
	cfg.resize_outputs = false;
	cfg.is_reduction = true;
	if ((rc = tn__iter_build(&it, &cfg, who)) < 0)
		goto out;
	if (run && it.numel > 0 && zero_fill) {
		rc = tn__fill_cpu(ri, tn_scalar_int(0));
	} else if (run && it.numel > 0) {
		struct arg_ctx c = { .fn = (tn__argreduce_fn)tn__stub_get(&tn__argreduce_stub),
				     .op = op,
				     .dt = self->dtype,
				     .it = &it,
				     .nv = want_vals,
				     .nred = 1,
				     .s_red = 0,
				     .first = 0 };
		const int in = it.ntensors - 1;
		if (num_reduce_dims(&it) > 0) {
			c.nred = it.shape[0];
			c.s_red = it.ops[in].strides[0];
			c.first = 1;
		}
		int64_t nout = it.numel / c.nred;
		int threads = it.numel > TN_GRAIN_SIZE ? tn__num_threads() : 1;
		if (threads > 64)
			threads = 64;
		if (threads > 1 && nout < threads) {
			/* Few long rows: each split across the threads, the partial results
			 * (in row order) reduced once more, as ATen's two-pass reduction. */
			for (int64_t o = 0; o < nout; o++) {
				int64_t rest = o;
				memset(c.off, 0, sizeof(c.off));
				for (int dd = c.first; dd < it.ndim; dd++) {
					int64_t v = rest % it.shape[dd];
					rest /= it.shape[dd];
					for (int k = 0; k < it.ntensors; k++)
						c.off[k] += v * it.ops[k].strides[dd];
				}
				memset(c.part_ok, 0, sizeof(c.part_ok));
				tn__parallel_for(c.nred, threads, arg_segment, &c);
				int np = 0;
				size_t isz = tn__itemsize(c.dt);
				for (int t = 0; t < threads; t++) {
					if (!c.part_ok[t])
						continue;
					memmove(c.part_val[np], c.part_val[t], isz);
					c.part_idx[np++] = c.part_idx[t];
				}
				int64_t win;
				c.fn(op, c.dt, (const char *)c.part_val, (int64_t)isz, np, 0, 1, NULL, 0,
				     (char *)&win, 0, 0);
				if (want_vals)
					memcpy(it.ops[0].data + c.off[0], c.part_val[win], isz);
				*(int64_t *)(it.ops[in - 1].data + c.off[in - 1]) = c.part_idx[win];
			}
		} else {
			tn__parallel_for(nout, threads, arg_outputs, &c);
		}
	}
	tn__iter_release(&it);
	if (rc == 0) {
		if (!vals && want_vals)
			*ret_vals = tn_tensor_ref(rv);
		if (!idx)
			*ret_idx = tn_tensor_ref(ri);
	}
out:
	tn_tensor_unref(flat);
	tn_tensor_unref(rv);
	tn_tensor_unref(vv);
	tn_tensor_unref(ri);
	tn_tensor_unref(vi);
	return rc;
}

/* ---- the kernels of the table: value reductions for each dispatch key, index reductions
 * for the CPU (run) and Meta (check and allocate only) ---- */

#define VALUE_KERNELS(SUFFIX, KEY)                                                            \
	int tn__sum_##SUFFIX(const tn_tensor *self, const enum tn_dtype *dtype,               \
			     tn_tensor **ret_tensor)                                          \
	{                                                                                     \
		return value_reduce(K_SUM, self, 0, NULL, false, dtype, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__sum_out_##SUFFIX(const tn_tensor *self, const enum tn_dtype *dtype,           \
				 tn_tensor *out)                                              \
	{                                                                                     \
		return whole_out(K_SUM, self, dtype, out, KEY);                                 \
	}                                                                                     \
	int tn__sum_dim_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim,          \
				 bool keepdim, const enum tn_dtype *dtype, tn_tensor **ret_tensor) \
	{                                                                                     \
		return value_reduce(K_SUM, self, ndim, dim, keepdim, dtype, NULL, KEY,         \
				    ret_tensor);                                              \
	}                                                                                     \
	int tn__sum_dim_out_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim,      \
				     bool keepdim, const enum tn_dtype *dtype, tn_tensor *out) \
	{                                                                                     \
		int rc = tn__check_live(out, "sum");                                          \
		return rc ? rc : value_reduce(K_SUM, self, ndim, dim, keepdim, dtype, out, KEY, NULL); \
	}                                                                                     \
	int tn__mean_##SUFFIX(const tn_tensor *self, const enum tn_dtype *dtype,              \
			      tn_tensor **ret_tensor)                                         \
	{                                                                                     \
		return value_reduce(K_MEAN, self, 0, NULL, false, dtype, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__mean_dim_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim,         \
				  bool keepdim, const enum tn_dtype *dtype, tn_tensor **ret_tensor) \
	{                                                                                     \
		return value_reduce(K_MEAN, self, ndim, dim, keepdim, dtype, NULL, KEY,        \
				    ret_tensor);                                              \
	}                                                                                     \
	int tn__mean_dim_out_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim,     \
				      bool keepdim, const enum tn_dtype *dtype, tn_tensor *out) \
	{                                                                                     \
		int rc = tn__check_live(out, "mean");                                         \
		return rc ? rc : value_reduce(K_MEAN, self, ndim, dim, keepdim, dtype, out, KEY, NULL); \
	}                                                                                     \
	int tn__prod_##SUFFIX(const tn_tensor *self, const enum tn_dtype *dtype,              \
			      tn_tensor **ret_tensor)                                         \
	{                                                                                     \
		return value_reduce(K_PROD, self, 0, NULL, false, dtype, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__prod_out_##SUFFIX(const tn_tensor *self, const enum tn_dtype *dtype,          \
				  tn_tensor *out)                                             \
	{                                                                                     \
		return whole_out(K_PROD, self, dtype, out, KEY);                                 \
	}                                                                                     \
	int tn__prod_dim_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,            \
				  const enum tn_dtype *dtype, tn_tensor **ret_tensor)         \
	{                                                                                     \
		return value_reduce(K_PROD, self, 1, &dim, keepdim, dtype, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__prod_dim_out_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,        \
				      const enum tn_dtype *dtype, tn_tensor *out)             \
	{                                                                                     \
		int rc = tn__check_live(out, "prod");                                         \
		return rc ? rc : value_reduce(K_PROD, self, 1, &dim, keepdim, dtype, out, KEY, NULL); \
	}                                                                                     \
	int tn__amax_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim, bool keepdim, \
			      tn_tensor **ret_tensor)                                         \
	{                                                                                     \
		return value_reduce(K_AMAX, self, ndim, dim, keepdim, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__amax_out_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim,         \
				  bool keepdim, tn_tensor *out)                               \
	{                                                                                     \
		int rc = tn__check_live(out, "amax");                                         \
		return rc ? rc : value_reduce(K_AMAX, self, ndim, dim, keepdim, NULL, out, KEY, NULL); \
	}                                                                                     \
	int tn__amin_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim, bool keepdim, \
			      tn_tensor **ret_tensor)                                         \
	{                                                                                     \
		return value_reduce(K_AMIN, self, ndim, dim, keepdim, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__amin_out_##SUFFIX(const tn_tensor *self, int ndim, const int64_t *dim,         \
				  bool keepdim, tn_tensor *out)                               \
	{                                                                                     \
		int rc = tn__check_live(out, "amin");                                         \
		return rc ? rc : value_reduce(K_AMIN, self, ndim, dim, keepdim, NULL, out, KEY, NULL); \
	}                                                                                     \
	int tn__max_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                    \
	{                                                                                     \
		return value_reduce(K_MAX, self, 0, NULL, false, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__min_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                    \
	{                                                                                     \
		return value_reduce(K_MIN, self, 0, NULL, false, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__all_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                    \
	{                                                                                     \
		return value_reduce(K_ALL, self, 0, NULL, false, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__all_out_##SUFFIX(const tn_tensor *self, tn_tensor *out)                        \
	{                                                                                     \
		int rc = tn__check_live(out, "all");                                          \
		return rc ? rc : value_reduce(K_ALL, self, 0, NULL, false, NULL, out, KEY, NULL); \
	}                                                                                     \
	int tn__all_dim_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,             \
				 tn_tensor **ret_tensor)                                      \
	{                                                                                     \
		return value_reduce(K_ALL, self, 1, &dim, keepdim, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__all_dim_out_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,         \
				     tn_tensor *out)                                          \
	{                                                                                     \
		int rc = tn__check_live(out, "all");                                          \
		return rc ? rc : value_reduce(K_ALL, self, 1, &dim, keepdim, NULL, out, KEY, NULL); \
	}                                                                                     \
	int tn__any_##SUFFIX(const tn_tensor *self, tn_tensor **ret_tensor)                    \
	{                                                                                     \
		return value_reduce(K_ANY, self, 0, NULL, false, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__any_out_##SUFFIX(const tn_tensor *self, tn_tensor *out)                        \
	{                                                                                     \
		int rc = tn__check_live(out, "any");                                          \
		return rc ? rc : value_reduce(K_ANY, self, 0, NULL, false, NULL, out, KEY, NULL); \
	}                                                                                     \
	int tn__any_dim_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,             \
				 tn_tensor **ret_tensor)                                      \
	{                                                                                     \
		return value_reduce(K_ANY, self, 1, &dim, keepdim, NULL, NULL, KEY, ret_tensor); \
	}                                                                                     \
	int tn__any_dim_out_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,         \
				     tn_tensor *out)                                          \
	{                                                                                     \
		int rc = tn__check_live(out, "any");                                          \
		return rc ? rc : value_reduce(K_ANY, self, 1, &dim, keepdim, NULL, out, KEY, NULL); \
	}

VALUE_KERNELS(cpu, TN_KEY_CPU)
VALUE_KERNELS(cuda, TN_KEY_CUDA)
VALUE_KERNELS(meta, TN_KEY_META)

#define INDEX_KERNELS(SUFFIX, RUN)                                                            \
	int tn__max_dim_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,             \
				 tn_tensor **ret_values, tn_tensor **ret_indices)             \
	{                                                                                     \
		return index_reduce(TN_RED_MAX, "max", self, &dim, keepdim, true, NULL, NULL,  \
				    RUN, ret_values, ret_indices);                            \
	}                                                                                     \
	int tn__max_dim_out_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,         \
				     tn_tensor *max, tn_tensor *max_values)                   \
	{                                                                                     \
		int rc = tn__check_live(max, "max");                                          \
		if (!rc)                                                                      \
			rc = tn__check_live(max_values, "max");                               \
		return rc ? rc                                                                \
			  : index_reduce(TN_RED_MAX, "max", self, &dim, keepdim, true, max,    \
					 max_values, RUN, NULL, NULL);                        \
	}                                                                                     \
	int tn__min_dim_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,             \
				 tn_tensor **ret_values, tn_tensor **ret_indices)             \
	{                                                                                     \
		return index_reduce(TN_RED_MIN, "min", self, &dim, keepdim, true, NULL, NULL,  \
				    RUN, ret_values, ret_indices);                            \
	}                                                                                     \
	int tn__min_dim_out_##SUFFIX(const tn_tensor *self, int64_t dim, bool keepdim,         \
				     tn_tensor *min, tn_tensor *min_indices)                  \
	{                                                                                     \
		int rc = tn__check_live(min, "min");                                          \
		if (!rc)                                                                      \
			rc = tn__check_live(min_indices, "min");                              \
		return rc ? rc                                                                \
			  : index_reduce(TN_RED_MIN, "min", self, &dim, keepdim, true, min,    \
					 min_indices, RUN, NULL, NULL);                       \
	}                                                                                     \
	int tn__argmax_##SUFFIX(const tn_tensor *self, const int64_t *dim, bool keepdim,       \
				tn_tensor **ret_tensor)                                       \
	{                                                                                     \
		return index_reduce(TN_RED_MAX, "argmax", self, dim, keepdim, false, NULL,     \
				    NULL, RUN, NULL, ret_tensor);                             \
	}                                                                                     \
	int tn__argmax_out_##SUFFIX(const tn_tensor *self, const int64_t *dim, bool keepdim,   \
				    tn_tensor *out)                                           \
	{                                                                                     \
		int rc = tn__check_live(out, "argmax");                                       \
		return rc ? rc                                                                \
			  : index_reduce(TN_RED_MAX, "argmax", self, dim, keepdim, false, NULL, \
					 out, RUN, NULL, NULL);                               \
	}                                                                                     \
	int tn__argmin_##SUFFIX(const tn_tensor *self, const int64_t *dim, bool keepdim,       \
				tn_tensor **ret_tensor)                                       \
	{                                                                                     \
		return index_reduce(TN_RED_MIN, "argmin", self, dim, keepdim, false, NULL,     \
				    NULL, RUN, NULL, ret_tensor);                             \
	}                                                                                     \
	int tn__argmin_out_##SUFFIX(const tn_tensor *self, const int64_t *dim, bool keepdim,   \
				    tn_tensor *out)                                           \
	{                                                                                     \
		int rc = tn__check_live(out, "argmin");                                       \
		return rc ? rc                                                                \
			  : index_reduce(TN_RED_MIN, "argmin", self, dim, keepdim, false, NULL, \
					 out, RUN, NULL, NULL);                               \
	}

INDEX_KERNELS(cpu, true)
INDEX_KERNELS(meta, false)
