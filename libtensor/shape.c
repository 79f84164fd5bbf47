/* SPDX-License-Identifier: MIT */
/*
 * Joining, splitting and masking, as ATen's TensorShape.cpp, TriangularOps.cpp and the
 * masked_fill of TensorAdvancedIndexing.cpp: cat and stack (functional and out=), split,
 * split_with_sizes and chunk (views), triu and tril (functional, out= and in place), and
 * masked_fill (functional and in place, with a Scalar or a 0-dim Tensor value).
 *
 * cat computes PyTorch 1.13's result: the result type of every input, the legacy skipping of
 * empty 1-d inputs, channels_last (3d) when every input suggests it, and its messages in its
 * order; the data moves through tn__copy (one copy per input into a narrowed view of the
 * result, any dtype and strides). stack, split, split_with_sizes and chunk are composed as
 * PyTorch composes them, so their shapes and messages are its own. masked_fill_ is where.out
 * with the value as a 0-dim tensor of self's dtype and self as both input and output.
 *
 * Deliberate differences, in the man pages (tn_cat(3), tn_masked_fill(3)): out= tensors are never
 * resized; masked_fill refuses masks other than bool and uint8 (PyTorch 1.13 reads the first
 * byte of each element of such a mask); the uint8 mask's deprecation warning is not printed.
 */
#include <string.h>

#include "iter.h"
#include "ops_kernels.h"
#include "parallel.h"

#define SHAPE_BUF 256

/* ---- cat and stack ---- */

/* PyTorch's cat_should_skip_tensor: the legacy empty tensor of shape [0]. */
static bool cat_skip(const tn_tensor *t)
{
	return t->ndim == 1 && t->numel == 0;
}

/* PyTorch's is_channels_last_strides_2d/3d (the strides-like test suggest_memory_format
 * makes, not the contiguity one). */
static bool strides_like_cl(const tn_tensor *t)
{
	static const int order4[] = { 1, 3, 2, 0 }, order5[] = { 1, 4, 3, 2, 0 };
	const int *order;
	int n;
	if (t->ndim == 4)
		order = order4, n = 4;
	else if (t->ndim == 5)
		order = order5, n = 5;
	else
		return false;
	int64_t min = 0;
	if (t->strides[1] == 0)
		return false;
	for (int k = 0; k < n; k++) {
		int d = order[k];
		if (t->sizes[d] == 0 || t->strides[d] < min)
			return false;
		if (d == 0 && min == t->strides[1])
			return false;
		min = t->strides[d];
		if (t->sizes[d] > 1)
			min *= t->sizes[d];
	}
	return true;
}

static enum tn_memory_format suggest_format(const tn_tensor *t)
{
	if (strides_like_cl(t))
		return t->ndim == 4 ? TN_CHANNELS_LAST : TN_CHANNELS_LAST_3D;
	return TN_CONTIGUOUS_FORMAT;
}

/* PyTorch's cat_compute_output_memory_format. */
static enum tn_memory_format cat_format(int n, tn_tensor *const *ts)
{
	enum tn_memory_format fmt = TN_CONTIGUOUS_FORMAT;
	for (int i = 0; i < n; i++) {
		enum tn_memory_format f = suggest_format(ts[i]);
		if (f == TN_CONTIGUOUS_FORMAT || (i > 0 && f != fmt))
			return TN_CONTIGUOUS_FORMAT;
		fmt = f;
	}
	return fmt;
}

/*
 * cat of @n tensors along @dim into @out (NULL: a new result in @ret). @key: the kernel's
 * dispatch key (Meta checks and allocates only).
 */
static int cat_impl(int n, tn_tensor *const *ts, int64_t dim, tn_tensor *out,
		    enum tn_dispatch_key key, tn_tensor **ret)
{
	int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
	enum tn_dtype dtypes[64], *dt = dtypes;
	enum tn__prio prio[64], *pr = prio;
	tn_tensor *dst = NULL;
	int rc, valid = -1, ndim, d = 0;

	if (n < 0 || (n > 0 && !ts))
		return tn__error(TN_EINVAL, "cat: bad tensor list (%d entries)", n);
	if (out && (rc = tn__check_live(out, "cat")) < 0)
		return rc;
	if (!out && !ret)
		return tn__error(TN_EINVAL, "cat: NULL ret_tensor");
	for (int i = 0; i < n; i++)
		if ((rc = tn__check_live(ts[i], "cat")) < 0)
			return rc;
	for (int i = 0; i < n; i++)
		if (ts[i]->ndim == 0)
			return tn__error(TN_EINVAL,
					 "zero-dimensional tensor (at position %d) cannot be concatenated",
					 i);
	for (int i = 0; i < n && valid < 0; i++)
		if (!cat_skip(ts[i]))
			valid = i;
	if (valid >= 0 && (d = tn__wrap_dim(dim, ts[valid]->ndim)) < 0)
		return d;
	if (n == 0)
		return tn__error(TN_EINVAL, "torch.cat(): expected a non-empty list of Tensors");
	enum tn_memory_format fmt = cat_format(n, ts);
	if (n > 64) {
		dt = tn__malloc(sizeof(*dt) * (size_t)n);
		pr = tn__malloc(sizeof(*pr) * (size_t)n);
		if (!dt || !pr) {
			rc = tn__error(TN_ENOMEM, "cat: out of memory");
			goto fail;
		}
	}
	for (int i = 0; i < n; i++) {
		dt[i] = ts[i]->dtype;
		pr[i] = TN_PRIO_DIM;
	}
	enum tn_dtype rt = tn__result_type(n, dt, pr);
	if (out) {
		if (!tn__can_cast(rt, out->dtype)) {
			rc = tn__error(TN_EINVAL,
				       "torch.cat(): input types can't be cast to the desired output "
				       "type %s", tn__scalar_type_name(out->dtype));
			goto fail;
		}
		rt = out->dtype;
	}
	if (valid >= 0) {
		const tn_tensor *first = ts[valid];
		int64_t at_dim = 0;
		char want[SHAPE_BUF];
		(void)want;
		for (int i = 0; i < n; i++) {
			const tn_tensor *t = ts[i];
			if (cat_skip(t))
				continue;
			if (t->ndim != first->ndim) {
				rc = tn__error(TN_EINVAL,
					       "Tensors must have same number of dimensions: got %d and %d",
					       first->ndim, t->ndim);
				goto fail;
			}
			for (int k = 0; k < first->ndim; k++) {
				if (k == d || first->sizes[k] == t->sizes[k])
					continue;
				rc = tn__error(TN_EINVAL,
					       "Sizes of tensors must match except in dimension %d. "
					       "Expected size %lld but got size %lld for tensor number %d "
					       "in the list.", d, (long long)first->sizes[k],
					       (long long)t->sizes[k], i);
				goto fail;
			}
			at_dim += t->sizes[d];
		}
		ndim = first->ndim;
		memcpy(sizes, first->sizes, sizeof(int64_t) * (size_t)ndim);
		sizes[d] = at_dim;
	} else {
		ndim = 1;
		sizes[0] = 0;
	}
	if (out) {
		if ((rc = tn__check_out_shape(out, ndim, sizes)) < 0 ||
		    (rc = tn__check_internal_overlap(out)) < 0)
			goto fail;
		for (int i = 0; i < n; i++)
			if ((rc = tn__check_no_overlap(out, ts[i])) < 0)
				goto fail;
		dst = tn_tensor_ref(out);
	} else {
		const tn_tensor *proto = ts[valid >= 0 ? valid : 0];
		if ((rc = tn__format_strides(ndim, sizes, fmt, strides, "cat")) < 0 ||
		    (rc = tn__empty_like_device(proto->storage->device, rt, ndim, sizes, strides, &dst,
						"cat")) < 0)
			goto fail;
	}
	if (tn__key_runs(key) && valid >= 0) {
		int64_t offset = 0;
		for (int i = 0; i < n && rc == 0; i++) {
			const tn_tensor *t = ts[i];
			tn_tensor *part = NULL;
			if (cat_skip(t) || t->sizes[d] == 0)
				continue;
			if ((rc = tn_narrow(dst, d, offset, t->sizes[d], &part)) == 0)
				rc = tn__copy(part, t, key, "cat");
			tn_tensor_unref(part);
			offset += t->sizes[d];
		}
		if (rc < 0)
			goto fail;
	}
	if (ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	dst = NULL;
fail:
	tn_tensor_unref(dst);
	if (dt != dtypes)
		tn__free(dt);
	if (pr != prio)
		tn__free(pr);
	return rc;
}

/* @ts unsqueezed at @dim, in a new array the caller releases with free_list. */
static int unsqueeze_all(int n, tn_tensor *const *ts, int64_t dim, tn_tensor ***ret)
{
	tn_tensor **u = tn__malloc(sizeof(*u) * (size_t)(n ? n : 1));
	int rc = 0;
	if (!u)
		return tn__error(TN_ENOMEM, "stack: out of memory");
	for (int i = 0; i < n; i++) {
		if ((rc = tn_unsqueeze(ts[i], dim, &u[i])) < 0) {
			while (i--)
				tn_tensor_unref(u[i]);
			tn__free(u);
			return rc;
		}
	}
	*ret = u;
	return 0;
}

static void free_list(int n, tn_tensor **u)
{
	for (int i = 0; i < n; i++)
		tn_tensor_unref(u[i]);
	tn__free(u);
}

/* PyTorch's check_stack_inputs. */
static int check_stack_inputs(int n, tn_tensor *const *ts)
{
	char a[SHAPE_BUF], b[SHAPE_BUF];
	int rc;
	for (int i = 0; i < n; i++)
		if ((rc = tn__check_live(ts[i], "stack")) < 0)
			return rc;
	for (int i = 1; i < n; i++) {
		if (ts[i]->ndim == ts[0]->ndim &&
		    !memcmp(ts[i]->sizes, ts[0]->sizes, sizeof(int64_t) * (size_t)ts[0]->ndim))
			continue;
		tn__format_shape(a, sizeof(a), ts[0]->ndim, ts[0]->sizes);
		tn__format_shape(b, sizeof(b), ts[i]->ndim, ts[i]->sizes);
		return tn__error(TN_EINVAL,
				 "stack expects each tensor to be equal size, but got %s at entry 0 "
				 "and %s at entry %d", a, b, i);
	}
	return 0;
}

/* stack as PyTorch 1.13 composes it: cat along dim then a view when dim is inside the inputs'
 * dims, else cat of the inputs unsqueezed. */
static int stack_impl(int n, tn_tensor *const *ts, int64_t dim, tn_tensor *out,
		      enum tn_dispatch_key key, tn_tensor **ret)
{
	int64_t rsizes[TN_MAX_DIMS + 1];
	tn_tensor **u = NULL, *r = NULL;
	int rc, wd;

	if (n < 0 || (n > 0 && !ts))
		return tn__error(TN_EINVAL, "stack: bad tensor list (%d entries)", n);
	if (out && (rc = tn__check_live(out, "stack")) < 0)
		return rc;
	if (!out && !ret)
		return tn__error(TN_EINVAL, "stack: NULL ret_tensor");
	if (n == 0)
		return tn__error(TN_EINVAL, "stack expects a non-empty TensorList");
	if ((rc = tn__check_live(ts[0], "stack")) < 0)
		return rc;
	if ((wd = tn__wrap_dim(dim, ts[0]->ndim + 1)) < 0)
		return wd;
	/* PyTorch 1.13 checks the sizes whatever the dim (before cat's own checks). */
	if ((rc = check_stack_inputs(n, ts)) < 0)
		return rc;
	if (ts[0]->ndim + 1 > TN_MAX_DIMS)
		return tn__error(TN_EINVAL, "stack: the result would have more than %d dimensions",
				 TN_MAX_DIMS);
	if (wd < ts[0]->ndim) {
		int nd = ts[0]->ndim;
		memcpy(rsizes, ts[0]->sizes, sizeof(int64_t) * (size_t)wd);
		rsizes[wd] = n;
		memcpy(rsizes + wd + 1, ts[0]->sizes + wd, sizeof(int64_t) * (size_t)(nd - wd));
		if (out) {
			if ((rc = tn__check_out_shape(out, nd + 1, rsizes)) < 0)
				return rc;
		} else {
			if ((rc = cat_impl(n, ts, wd, NULL, key, &r)) == 0)
				rc = tn_view(r, nd + 1, rsizes, ret);
			tn_tensor_unref(r);
			return rc;
		}
	}
	if ((rc = unsqueeze_all(n, ts, wd, &u)) < 0)
		return rc;
	rc = cat_impl(n, u, wd, out, key, ret);
	free_list(n, u);
	return rc;
}

#define CAT_KERNELS(SUFFIX, KEY)                                                              \
	int tn__cat_##SUFFIX(int ntensors, tn_tensor *const *tensors, int64_t dim,            \
			     tn_tensor **ret_tensor)                                          \
	{                                                                                     \
		return cat_impl(ntensors, tensors, dim, NULL, KEY, ret_tensor);               \
	}                                                                                     \
	int tn__cat_out_##SUFFIX(int ntensors, tn_tensor *const *tensors, int64_t dim,        \
				 tn_tensor *out)                                              \
	{                                                                                     \
		return cat_impl(ntensors, tensors, dim, out, KEY, NULL);                      \
	}                                                                                     \
	int tn__stack_##SUFFIX(int ntensors, tn_tensor *const *tensors, int64_t dim,          \
			       tn_tensor **ret_tensor)                                        \
	{                                                                                     \
		return stack_impl(ntensors, tensors, dim, NULL, KEY, ret_tensor);             \
	}                                                                                     \
	int tn__stack_out_##SUFFIX(int ntensors, tn_tensor *const *tensors, int64_t dim,      \
				   tn_tensor *out)                                            \
	{                                                                                     \
		return stack_impl(ntensors, tensors, dim, out, KEY, NULL);                    \
	}

CAT_KERNELS(cpu, TN_KEY_CPU)
CAT_KERNELS(meta, TN_KEY_META)

/* ---- split, split_with_sizes, chunk (views, device-generic) ---- */

/* A new array of @n tensors for the caller to free(3) (tn__malloc is malloc with fault
 * injection). */
static int new_list(int64_t n, tn_tensor ***ret, const char *who)
{
	if (n > INT32_MAX)
		return tn__error(TN_EOVERFLOW, "%s: %lld tensors do not fit an int count", who,
				 (long long)n);
	if (!(*ret = tn__malloc(sizeof(tn_tensor *) * (size_t)(n ? n : 1))))
		return tn__error(TN_ENOMEM, "%s: out of memory", who);
	return 0;
}

static int check_list_ret(const tn_tensor *self, int *ret_n, tn_tensor ***ret, const char *who)
{
	if (!ret_n || !ret)
		return tn__error(TN_EINVAL, "%s: NULL %s", who, ret_n ? "ret_tensors" : "ret_n");
	return tn__check_tensor_args(self, ret, who);
}

/* The narrows of @self along @d, of the lengths @len (@n of them). */
static int narrows(const tn_tensor *self, int d, int64_t n, const int64_t *len, int64_t step,
		   int64_t last, int *ret_n, tn_tensor ***ret, const char *who)
{
	tn_tensor **out;
	int64_t start = 0;
	int rc;
	if ((rc = new_list(n, &out, who)) < 0)
		return rc;
	for (int64_t i = 0; i < n; i++) {
		int64_t l = len ? len[i] : i < n - 1 ? step : last;
		if ((rc = tn_narrow(self, d, start, l, &out[i])) < 0) {
			while (i--)
				tn_tensor_unref(out[i]);
			tn__free(out);
			return rc;
		}
		start += l;
	}
	*ret_n = (int)n;
	*ret = out;
	return 0;
}

int tn__split(const tn_tensor *self, int64_t split_size, int64_t dim, int *ret_n,
	      tn_tensor ***ret_tensors)
{
	int rc = check_list_ret(self, ret_n, ret_tensors, "split"), d;
	if (rc < 0)
		return rc;
	if (self->ndim == 0)
		return tn__error(TN_EINVAL, "split expects at least a 1-dimensional tensor");
	if (split_size < 0)
		return tn__error(TN_EINVAL,
				 "split expects split_size be non-negative, but got split_size=%lld",
				 (long long)split_size);
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	int64_t size = self->sizes[d];
	if (split_size == 0 && size != 0)
		return tn__error(TN_EINVAL,
				 "split_size can only be 0 if dimension size is 0, but got dimension "
				 "size of %lld", (long long)size);
	int64_t n = 1;
	if (split_size != 0) {
		n = size / split_size + (size % split_size != 0);
		if (n < 1)
			n = 1;
	}
	/* split_size * n - size without overflow: the last split is what remains. */
	int64_t last = size - (n - 1) * split_size;
	return narrows(self, d, n, NULL, split_size, last, ret_n, ret_tensors, "split");
}

int tn__split_with_sizes(const tn_tensor *self, int nsplit_sizes, const int64_t *split_sizes,
			 int64_t dim, int *ret_n, tn_tensor ***ret_tensors)
{
	char buf[SHAPE_BUF];
	int rc = check_list_ret(self, ret_n, ret_tensors, "split_with_sizes"), d;
	if (rc < 0)
		return rc;
	if (nsplit_sizes < 0 || (nsplit_sizes > 0 && !split_sizes))
		return tn__error(TN_EINVAL, "split_with_sizes: bad split_sizes (%d entries)",
				 nsplit_sizes);
	if (self->ndim == 0)
		return tn__error(TN_EINVAL, "split expects at least a 1-dimensional tensor");
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	int64_t sum = 0;
	bool overflow = false;
	for (int i = 0; i < nsplit_sizes; i++) {
		if (split_sizes[i] < 0) {
			tn__format_shape(buf, sizeof(buf), nsplit_sizes, split_sizes);
			return tn__error(TN_EINVAL,
					 "split_with_sizes expects split_sizes have only non-negative "
					 "entries, but got split_sizes=%s", buf);
		}
		overflow |= __builtin_add_overflow(sum, split_sizes[i], &sum);
	}
	if (overflow || sum != self->sizes[d]) {
		tn__format_shape(buf, sizeof(buf), nsplit_sizes, split_sizes);
		return tn__error(TN_EINVAL,
				 "split_with_sizes expects split_sizes to sum exactly to %lld (input "
				 "tensor's size at dimension %lld), but got split_sizes=%s",
				 (long long)self->sizes[d], (long long)dim, buf);
	}
	return narrows(self, d, nsplit_sizes, split_sizes, 0, 0, ret_n, ret_tensors,
		       "split_with_sizes");
}

int tn__chunk(const tn_tensor *self, int64_t chunks, int64_t dim, int *ret_n,
	      tn_tensor ***ret_tensors)
{
	int rc = check_list_ret(self, ret_n, ret_tensors, "chunk"), d;
	if (rc < 0)
		return rc;
	if (self->ndim == 0)
		return tn__error(TN_EINVAL, "chunk expects at least a 1-dimensional tensor");
	if (chunks <= 0)
		return tn__error(TN_EINVAL, "chunk expects `chunks` to be greater than 0, got: %lld",
				 (long long)chunks);
	if ((d = tn__wrap_dim(dim, self->ndim)) < 0)
		return d;
	int64_t size = self->sizes[d];
	int64_t split_size = size / chunks + (size % chunks != 0);
	if (split_size == 0 && size == 0) {
		/* chunks empty pieces (split would give one). */
		if (chunks > INT32_MAX)
			return tn__error(TN_EOVERFLOW, "chunk: %lld tensors do not fit an int count",
					 (long long)chunks);
		return narrows(self, d, chunks, NULL, 0, 0, ret_n, ret_tensors, "chunk");
	}
	return tn__split(self, split_size, d, ret_n, ret_tensors);
}

/* ---- triu, tril ---- */

struct trilu_ctx {
	bool upper;
	int64_t k, rows, cols; /* rows and cols of each matrix */
	size_t isz;
	int nb; /* batch dims */
	const int64_t *bsizes, *sbs, *dbs; /* batch sizes and strides of src and dst */
	int64_t srs, scs, drs, dcs;
	const char *src;
	char *dst;
};

static void trilu_range(void *vctx, int64_t begin, int64_t end, int tid)
{
	const struct trilu_ctx *c = vctx;
	(void)tid;
	for (int64_t r = begin; r < end; r++) {
		int64_t b = r / c->rows, i = r % c->rows, so = 0, dof = 0;
		for (int k = c->nb - 1; k >= 0; k--) {
			int64_t x = b % c->bsizes[k];
			b /= c->bsizes[k];
			so += x * c->sbs[k];
			dof += x * c->dbs[k];
		}
		const char *s = c->src + (so + i * c->srs) * (int64_t)c->isz;
		char *dp = c->dst + (dof + i * c->drs) * (int64_t)c->isz;
		/* triu keeps j >= i + k, tril keeps j <= i + k. */
		for (int64_t j = 0; j < c->cols; j++) {
			bool keep = c->upper ? j - i >= c->k : j - i <= c->k;
			char *o = dp + j * c->dcs * (int64_t)c->isz;
			if (keep) {
				const char *in = s + j * c->scs * (int64_t)c->isz;
				if (in != o)
					memcpy(o, in, c->isz);
			} else {
				memset(o, 0, c->isz);
			}
		}
	}
}

static bool same_geometry(const tn_tensor *a, const tn_tensor *b)
{
	return a->storage == b->storage && a->offset == b->offset && a->ndim == b->ndim &&
	       !memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) &&
	       !memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim);
}

static int trilu(bool upper, const tn_tensor *self, int64_t k, tn_tensor *out, bool inplace,
		 enum tn_dispatch_key key, tn_tensor **ret, const char *who)
{
	tn_tensor *dst = NULL;
	int rc;
	if (out && (rc = tn__check_live(out, who)) < 0)
		return rc;
	if (!out && (rc = tn__check_tensor_args(self, ret, who)) < 0)
		return rc;
	if (out && (rc = tn__check_live(self, who)) < 0)
		return rc;
	/* PyTorch wraps dim -2 without the scalar rule, hence two messages. */
	if (self->ndim == 0)
		return tn__error(TN_ERANGE, "Dimension specified as -2 but tensor has no dimensions");
	/* An empty tensor of one dim is returned as it is, as PyTorch 1.13 does. */
	if (self->numel > 0 && (rc = tn__wrap_dim(-2, self->ndim)) < 0)
		return rc;
	if (out && !inplace) {
		if (out->dtype != self->dtype)
			return tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s "
					 "instead", tn__typemeta_name(self->dtype),
					 tn__typemeta_name(out->dtype));
		if ((rc = tn__check_out_shape(out, self->ndim, self->sizes)) < 0 ||
		    (rc = tn__check_internal_overlap(out)) < 0 ||
		    (!same_geometry(out, self) && (rc = tn__check_no_overlap(out, self)) < 0))
			return rc;
	}
	if (inplace && (rc = tn__check_internal_overlap(out)) < 0)
		return rc;
	if (out)
		dst = tn_tensor_ref(out);
	else if ((rc = tn__empty_like(self, self->ndim, self->sizes, NULL, &dst, who)) < 0)
		return rc;
	if (tn__key_runs(key) && self->numel > 0) {
		const int n = self->ndim;
		struct trilu_ctx c = { upper, k, self->sizes[n - 2], self->sizes[n - 1],
				       tn__itemsize(self->dtype), n - 2, self->sizes,
				       self->strides, dst->strides,
				       self->strides[n - 2], self->strides[n - 1],
				       dst->strides[n - 2], dst->strides[n - 1],
				       tn__data(self), tn__data(dst) };
		int64_t rows = self->numel / c.cols;
		int threads = self->numel >= 32768 ? tn__num_threads() : 1;
		tn__parallel_for(rows, threads, trilu_range, &c);
	}
	if (ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return 0;
}

#define TRILU_KERNELS(NAME, UPPER, SUFFIX, KEY)                                               \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, int64_t diagonal, tn_tensor **ret_tensor) \
	{                                                                                     \
		return trilu(UPPER, self, diagonal, NULL, false, KEY, ret_tensor, #NAME);       \
	}                                                                                     \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, int64_t diagonal, tn_tensor *out) \
	{                                                                                     \
		return trilu(UPPER, self, diagonal, out, false, KEY, NULL, #NAME);              \
	}                                                                                     \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, int64_t diagonal)                         \
	{                                                                                     \
		return trilu(UPPER, self, diagonal, self, true, KEY, NULL, #NAME "_");          \
	}

TRILU_KERNELS(triu, true, cpu, TN_KEY_CPU)
TRILU_KERNELS(triu, true, meta, TN_KEY_META)
TRILU_KERNELS(tril, false, cpu, TN_KEY_CPU)
TRILU_KERNELS(tril, false, meta, TN_KEY_META)

/* ---- masked_fill ---- */

/* PyTorch's infer_size of two shapes, with its message (a: @a, b: @b). */
static int broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *ret_n,
			    int64_t *out)
{
	int n = na > nb ? na : nb;
	for (int i = n - 1; i >= 0; i--) {
		int ia = i - (n - na), ib = i - (n - nb);
		int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
		if (sa != sb && sa != 1 && sb != 1)
			return tn__error(TN_EINVAL,
					 "The size of tensor a (%lld) must match the size of tensor b "
					 "(%lld) at non-singleton dimension %d",
					 (long long)sa, (long long)sb, i);
		out[i] = sa == 1 ? sb : sa;
	}
	*ret_n = n;
	return 0;
}

static int check_mask(const tn_tensor *mask)
{
	/* PyTorch 1.13 accepts uint8 (with a deprecation warning) and reads any other mask's
	 * first byte per element; libtensor refuses those with the wording of later releases. */
	if (mask->dtype != TN_BOOL && mask->dtype != TN_UINT8)
		return tn__error(TN_EINVAL,
				 "masked_fill_ only supports boolean masks, but got mask with dtype %s",
				 tn__typemeta_name(mask->dtype));
	return 0;
}

/* masked_fill_ with the value already a 0-dim tensor of self's dtype. */
static int fill_masked(tn_tensor *self, const tn_tensor *mask, const tn_tensor *v)
{
	int64_t shape[TN_MAX_DIMS];
	char a[SHAPE_BUF], b[SHAPE_BUF];
	int n, rc;
	if ((rc = broadcast_shapes(self->ndim, self->sizes, mask->ndim, mask->sizes, &n, shape)) < 0)
		return rc;
	if (n != self->ndim || memcmp(shape, self->sizes, sizeof(int64_t) * (size_t)n)) {
		tn__format_shape(a, sizeof(a), self->ndim, self->sizes);
		tn__format_shape(b, sizeof(b), n, shape);
		return tn__error(TN_EINVAL, "output with shape %s doesn't match the broadcast shape %s",
				 a, b);
	}
	/* PyTorch's kernel reads a uint8 mask as 0 or 1 and refuses other values. */
	if (mask->dtype == TN_UINT8 && tn__on_host(mask) && tn__data(mask)) {
		int64_t idx[TN_MAX_DIMS] = { 0 };
		const uint8_t *m = (const uint8_t *)tn__data(mask);
		for (int64_t i = 0; i < mask->numel; i++) {
			int64_t off = 0;
			for (int d = 0; d < mask->ndim; d++)
				off += idx[d] * mask->strides[d];
			if (m[off] > 1)
				return tn__error(TN_EINVAL, "Mask tensor can take 0 and 1 values only");
			for (int d = mask->ndim - 1; d >= 0; d--) {
				if (++idx[d] < mask->sizes[d])
					break;
				idx[d] = 0;
			}
		}
	}
	return tn_where_out(mask, v, self, self);
}

/* @value as a 0-dim tensor of @dtype beside @like (PyTorch converts it with the overflow
 * check of Scalar conversions). */
static int value_tensor(tn_scalar value, const tn_tensor *like, tn_tensor **ret)
{
	unsigned char elem[8];
	int rc;
	if ((rc = tn__scalar_to_element(value, like->dtype, elem)) < 0)
		return rc;
	if ((rc = tn__empty_like(like, 0, NULL, NULL, ret, "masked_fill")) < 0)
		return rc;
	if (tn__data(*ret))
		memcpy(tn__data(*ret), elem, tn__itemsize(like->dtype));
	return 0;
}

/* The Scalar of a 0-dim value tensor (Meta and device tensors: 0, only the checks matter). */
static int value_of(const tn_tensor *value, tn_scalar *ret)
{
	int rc = tn__check_live(value, "masked_fill");
	if (rc < 0)
		return rc;
	if (value->ndim != 0)
		return tn__error(TN_EINVAL,
				 "masked_fill_ only supports a 0-dimensional value tensor, but got "
				 "tensor with %d dimension(s).", value->ndim);
	if (value->storage->device.type != TN_DEVICE_CPU || !tn__data(value)) {
		*ret = tn_scalar_int(0);
		return 0;
	}
	*ret = tn__element_to_scalar(value->dtype, tn__data(value));
	return 0;
}

static int masked_fill_inplace(tn_tensor *self, const tn_tensor *mask, tn_scalar value)
{
	tn_tensor *v = NULL;
	int rc;
	if ((rc = tn__check_live(self, "masked_fill_")) < 0 ||
	    (rc = tn__check_live(mask, "masked_fill_")) < 0 || (rc = check_mask(mask)) < 0 ||
	    (rc = value_tensor(value, self, &v)) < 0)
		return rc;
	rc = fill_masked(self, mask, v);
	tn_tensor_unref(v);
	return rc;
}

/* The functional form: self and mask broadcast (expand_outplace(mask, self)), self's values
 * copied into a new contiguous result, then filled in place. */
static int masked_fill_new(const tn_tensor *self, const tn_tensor *mask, tn_scalar value,
			   enum tn_dispatch_key key, tn_tensor **ret)
{
	int64_t shape[TN_MAX_DIMS];
	tn_tensor *r = NULL, *v = NULL;
	int n, rc;
	if ((rc = tn__check_tensor_args(self, ret, "masked_fill")) < 0 ||
	    (rc = tn__check_live(mask, "masked_fill")) < 0)
		return rc;
	if ((rc = broadcast_shapes(mask->ndim, mask->sizes, self->ndim, self->sizes, &n, shape)) < 0)
		return rc;
	if ((rc = check_mask(mask)) < 0 || (rc = value_tensor(value, self, &v)) < 0)
		return rc;
	if ((rc = tn__empty_like(self, n, shape, NULL, &r, "masked_fill")) < 0)
		goto out;
	if ((rc = tn__copy(r, self, key, "masked_fill")) < 0 || (rc = fill_masked(r, mask, v)) < 0)
		goto out;
	*ret = r;
	r = NULL;
out:
	tn_tensor_unref(r);
	tn_tensor_unref(v);
	return rc;
}

#define MASKED_FILL_KERNELS(SUFFIX, KEY)                                                      \
	int tn__masked_fill_scalar_##SUFFIX(const tn_tensor *self, const tn_tensor *mask,     \
					    tn_scalar value, tn_tensor **ret_tensor)          \
	{                                                                                     \
		return masked_fill_new(self, mask, value, KEY, ret_tensor);                   \
	}                                                                                     \
	int tn__masked_fill_tensor_##SUFFIX(const tn_tensor *self, const tn_tensor *mask,     \
					    const tn_tensor *value, tn_tensor **ret_tensor)   \
	{                                                                                     \
		tn_scalar s;                                                                  \
		int rc = tn__check_tensor_args(self, ret_tensor, "masked_fill");              \
		if (rc < 0 || (rc = value_of(value, &s)) < 0)                                 \
			return rc;                                                            \
		return masked_fill_new(self, mask, s, KEY, ret_tensor);                       \
	}                                                                                     \
	int tn__masked_fill__scalar_##SUFFIX(tn_tensor *self, const tn_tensor *mask,          \
					     tn_scalar value)                                 \
	{                                                                                     \
		return masked_fill_inplace(self, mask, value);                                \
	}                                                                                     \
	int tn__masked_fill__tensor_##SUFFIX(tn_tensor *self, const tn_tensor *mask,          \
					     const tn_tensor *value)                          \
	{                                                                                     \
		tn_scalar s;                                                                  \
		int rc = value_of(value, &s);                                                 \
		return rc < 0 ? rc : masked_fill_inplace(self, mask, s);                      \
	}

MASKED_FILL_KERNELS(cpu, TN_KEY_CPU)
MASKED_FILL_KERNELS(meta, TN_KEY_META)
