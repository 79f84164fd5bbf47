/* SPDX-License-Identifier: MIT */
/*
 * The matmul family, as ATen's LinearAlgebra.cpp and Blas.cpp: mm, bmm, addmm, baddbmm, mv,
 * addmv and dot run on the BLAS seam (blas.h); matmul, linear, outer and t are composites of
 * them and of the view operators, written as PyTorch 1.13 writes them so that shapes, result
 * layouts and error messages are its own.
 *
 * One routine (product) serves the seven BLAS-backed operators: it checks the operands with
 * the operator's rules and messages, takes the destination (a new contiguous result, the out=
 * tensor or, in place, self), copies self broadcast into it when beta is not 0, and calls
 * tn__gemm once for the whole batch with the operands' own strides: a transposed, sliced or
 * expanded operand is never copied (BLIS takes general strides). A vector is a matrix of one
 * column (its stride as the row stride).
 *
 * Deliberate differences from PyTorch 1.13, in libtensor-linalg(7): float16 runs (PyTorch's CPU
 * kernels refuse it) with float32 accumulation as bfloat16 does; an out= tensor that overlaps
 * an operand is refused instead of being read while it is written; out= tensors are never
 * resized.
 */
#include <string.h>

#include "blas.h"
#include "iter.h"
#include "ops_kernels.h"

enum prod_kind { K_MM, K_BMM, K_ADDMM, K_BADDBMM, K_MV, K_ADDMV, K_DOT };

/* ---- checks ---- */

/* The bytes an operand's elements span: [lo, hi). */
static void byte_span(const tn_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t base = (uintptr_t)tn__data(t);
	int64_t last = 0;
	for (int d = 0; d < t->ndim; d++)
		last += (t->sizes[d] - 1) * t->strides[d];
	*lo = base;
	*hi = base + (uintptr_t)((last + 1) * (int64_t)tn__itemsize(t->dtype));
}

/* An out= tensor the BLAS writes may not share memory with an operand it reads at the same
 * time: refused when the spans meet (PyTorch 1.13 does not check, and computes garbage). */
int tn__check_no_overlap(const tn_tensor *out, const tn_tensor *in)
{
	uintptr_t a0, a1, b0, b1;
	if (!in || out->numel == 0 || in->numel == 0 || out->storage != in->storage ||
	    !out->storage->data)
		return 0;
	byte_span(out, &a0, &a1);
	byte_span(in, &b0, &b1);
	if (a0 < b1 && b0 < a1)
		return tn__error(TN_EINVAL,
				 "unsupported operation: some elements of the input tensor and the "
				 "written-to tensor refer to a single memory location. Please clone() "
				 "the tensor before performing the operation.");
	return 0;
}

int tn__check_internal_overlap(const tn_tensor *out)
{
	if (out->contiguous)
		return 0;
	for (int d = 0; d < out->ndim; d++)
		if (out->sizes[d] > 1 && out->strides[d] == 0)
			return tn__error(TN_EINVAL,
					 "unsupported operation: more than one element of the "
					 "written-to tensor refers to a single memory location. Please "
					 "clone() the tensor before performing the operation.");
	return 0;
}

static int same_dtype(const tn_tensor *expected, const tn_tensor *found)
{
	if (expected->dtype == found->dtype)
		return 0;
	return tn__error(TN_EINVAL, "expected scalar type %s but found %s",
			 tn__scalar_type_name(expected->dtype), tn__scalar_type_name(found->dtype));
}

static int shape_error(const tn_tensor *a, const tn_tensor *b)
{
	return tn__error(TN_EINVAL, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
			 (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
			 (long long)b->sizes[1]);
}

/* The operand checks of each operator, in PyTorch's order (its meta function, then the
 * CPU implementation's dtype dispatch). @self is the added term (NULL for mm, bmm, mv, dot). */
static int check_operands(enum prod_kind kind, const tn_tensor *self, const tn_tensor *a,
			  const tn_tensor *b, enum tn_dispatch_key key, int *ret_ndim,
			  int64_t *sizes, enum tn_dtype *ret_dtype)
{
	char s1[64], s2[64];
	int rc;

	switch (kind) {
	case K_MM:
	case K_ADDMM:
		if (a->ndim != 2)
			return kind == K_MM ? tn__error(TN_EINVAL, "self must be a matrix")
					    : tn__error(TN_EINVAL, "mat1 must be a matrix, got %d-D tensor",
							a->ndim);
		if (b->ndim != 2)
			return kind == K_MM ? tn__error(TN_EINVAL, "mat2 must be a matrix")
					    : tn__error(TN_EINVAL, "mat2 must be a matrix, got %d-D tensor",
							b->ndim);
		if (a->sizes[1] != b->sizes[0])
			return shape_error(a, b);
		*ret_ndim = 2;
		sizes[0] = a->sizes[0];
		sizes[1] = b->sizes[1];
		break;
	case K_BMM:
	case K_BADDBMM:
		if (a->ndim != 3)
			return tn__error(TN_EINVAL, "batch1 must be a 3D tensor");
		if (b->ndim != 3)
			return tn__error(TN_EINVAL, "batch2 must be a 3D tensor");
		if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2]) {
			tn__format_shape(s1, sizeof(s1), 2, (int64_t[]){ a->sizes[0], a->sizes[2] });
			tn__format_shape(s2, sizeof(s2), 2, b->sizes);
			return tn__error(TN_EINVAL,
					 "Expected size for first two dimensions of batch2 tensor to "
					 "be: %s but got: %s.", s1, s2);
		}
		*ret_ndim = 3;
		sizes[0] = a->sizes[0];
		sizes[1] = a->sizes[1];
		sizes[2] = b->sizes[2];
		break;
	case K_MV:
	case K_ADDMV: {
		int sd = self ? self->ndim : 1;
		if (a->ndim != 2 || b->ndim != 1 || (sd != 1 && sd != 0))
			return tn__error(TN_EINVAL, "vector + matrix @ vector expected, got %d, %d, %d",
					 sd, a->ndim, b->ndim);
		/* mv is addmv into a new result of mat's rows, whose size the message shows. */
		int64_t sn = self ? self->numel : a->sizes[0];
		int64_t s0 = self && self->ndim == 1 ? self->sizes[0] : sn;
		if (a->sizes[1] != b->sizes[0] || (sn != a->sizes[0] && sn != 1))
			return tn__error(TN_EINVAL, "size mismatch, got %lld, %lldx%lld,%lld",
					 (long long)s0, (long long)a->sizes[0],
					 (long long)a->sizes[1], (long long)b->sizes[0]);
		*ret_ndim = 1;
		sizes[0] = a->sizes[0];
		break;
	}
	case K_DOT:
		if (a->ndim != 1 || b->ndim != 1)
			return tn__error(TN_EINVAL, "1D tensors expected, but got %dD and %dD tensors",
					 a->ndim, b->ndim);
		if (a->dtype != b->dtype)
			return tn__error(TN_EINVAL,
					 "dot : expected both vectors to have same dtype, but found %s "
					 "and %s", tn__scalar_type_name(a->dtype),
					 tn__scalar_type_name(b->dtype));
		if (a->sizes[0] != b->sizes[0])
			return tn__error(TN_EINVAL,
					 "inconsistent tensor size, expected tensor [%lld] and src [%lld] "
					 "to have the same number of elements, but got %lld and %lld "
					 "elements respectively", (long long)a->sizes[0],
					 (long long)b->sizes[0], (long long)a->sizes[0],
					 (long long)b->sizes[0]);
		*ret_ndim = 0;
		break;
	}
	/* mm, bmm and mv return before their dtype checks when there is nothing to multiply
	 * (an empty result, or zeros when k is 0), in the dtype of their meta function's
	 * result: mm self's, bmm and mv the second operand's (PyTorch 1.13). */
	int64_t numel = 1;
	for (int d = 0; d < *ret_ndim; d++)
		numel *= sizes[d];
	if ((kind == K_MM || kind == K_BMM || kind == K_MV) &&
	    (numel == 0 || a->sizes[a->ndim - 1] == 0)) {
		*ret_dtype = kind == K_MM ? a->dtype : b->dtype;
		return 0;
	}
	*ret_dtype = a->dtype;
	if (kind != K_DOT) {
		if (self && kind == K_ADDMM && self->dtype != b->dtype)
			return tn__error(TN_EINVAL, "self and mat2 must have the same dtype");
		if (kind == K_ADDMM && a->dtype != b->dtype)
			return tn__error(TN_EINVAL, "mat1 and mat2 must have the same dtype");
		if ((rc = same_dtype(a, b)) < 0)
			return rc;
		/* baddbmm and addmv convert self to the product's dtype; in place it must be it. */
	}
	if (key == TN_KEY_CPU && a->dtype == TN_BOOL) {
		static const char *const impl[] = { [K_MM] = "addmm_impl_cpu_",
						    [K_ADDMM] = "addmm_impl_cpu_",
						    [K_BMM] = "bmm", [K_BADDBMM] = "baddbmm",
						    [K_MV] = "addmv_impl_cpu",
						    [K_ADDMV] = "addmv_impl_cpu", [K_DOT] = "dot" };
		return tn__error(TN_EINVAL, "\"%s\" not implemented for 'Bool'", impl[kind]);
	}
	return 0;
}

/* Operand @t as a batch of matrices for tn__gemm: a 1-d vector is a k x 1 column (@as_row:
 * a 1 x k row), a 2-d tensor one matrix of the batch (batch stride 0). */
static struct tn__mat as_mat(const tn_tensor *t, bool as_row)
{
	struct tn__mat m = { tn__data(t), 0, 0, 0 };
	switch (t->ndim) {
	case 0:
		break;
	case 1:
		if (as_row)
			m.cs = t->strides[0];
		else
			m.rs = t->strides[0];
		break;
	case 2:
		m.rs = t->strides[0];
		m.cs = t->strides[1];
		break;
	default:
		m.bs = t->strides[0];
		m.rs = t->strides[1];
		m.cs = t->strides[2];
		break;
	}
	return m;
}

static bool scalar_is_zero(tn_scalar s)
{
	return s.kind == TN_SCALAR_DOUBLE ? s.v.d == 0 : s.kind == TN_SCALAR_BOOL ? !s.v.b : s.v.i == 0;
}

/*
 * The BLAS-backed operators. @self: the added term of addmm/baddbmm/addmv (broadcast to the
 * result), NULL otherwise; @out: the out= tensor, or self for the in-place forms (@inplace),
 * or NULL for a new result returned in @ret.
 */
static int product(enum prod_kind kind, const tn_tensor *self, const tn_tensor *a,
		   const tn_tensor *b, tn_scalar beta, tn_scalar alpha, tn_tensor *out,
		   bool inplace, enum tn_dispatch_key key, tn_tensor **ret, const char *who)
{
	int64_t sizes[3] = { 0 };
	int ndim = 0, rc;
	tn_tensor *dst = NULL;

	if (out && (rc = tn__check_live(out, who)) < 0)
		return rc;
	if (!out && (rc = tn__check_tensor_args(a, ret, who)) < 0)
		return rc;
	if (kind == K_BADDBMM && self && !inplace) {
		/* baddbmm expands self to [batch1.size(0), batch1.size(1), batch2.size(2)] before
		 * it checks the batches' ranks, so that error comes first. */
		tn_tensor *e = NULL;
		if ((rc = tn__wrap_dim(1, a->ndim)) < 0 || (rc = tn__wrap_dim(2, b->ndim)) < 0 ||
		    (rc = tn_expand(self, 3, (int64_t[]){ a->sizes[0], a->sizes[1], b->sizes[2] },
				    &e)) < 0)
			return rc;
		tn_tensor_unref(e);
	}
	enum tn_dtype rdt = a->dtype;
	if ((rc = check_operands(kind, self, a, b, key, &ndim, sizes, &rdt)) < 0)
		return rc;
	if (inplace && self->dtype != rdt)
		return tn__error(TN_EINVAL, "Bad in-place call: input tensor dtype %s and output tensor "
				 "dtype %s should match", tn__typemeta_name(self->dtype),
				 tn__typemeta_name(rdt));
	if (out) {
		if (out->dtype != rdt)
			return tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s "
					 "instead", tn__typemeta_name(rdt),
					 tn__typemeta_name(out->dtype));
		if ((rc = tn__check_out_shape(out, ndim, sizes)) < 0 ||
		    (rc = tn__check_internal_overlap(out)) < 0 || (rc = tn__check_no_overlap(out, a)) < 0 ||
		    (rc = tn__check_no_overlap(out, b)) < 0)
			return rc;
		/* self may be out itself (its copy into out is then a no-op); a partial
		 * overlap is refused by that copy. */
		dst = tn_tensor_ref(out);
	} else {
		if ((rc = tn__empty_like_device(a->storage->device, rdt, ndim, sizes, NULL, &dst,
						who)) < 0)
			return rc;
	}
	/* self broadcasts to the result (expand's message); beta 0 ignores its values. */
	bool use_self = self && !scalar_is_zero(beta);
	if (self && !inplace) {
		tn_tensor *e = NULL;
		if ((rc = tn_expand(self, ndim, sizes, &e)) < 0)
			goto fail;
		if (use_self && tn__key_runs(key) && e != dst)
			rc = tn__copy(dst, e, key, who);
		tn_tensor_unref(e);
		if (rc < 0)
			goto fail;
	}
	if (tn__key_runs(key) && (a->dtype != b->dtype || a->dtype == TN_BOOL)) {
		/* mm, bmm or mv with nothing to multiply (check_operands): zeros. */
		rc = tn__fill_key(dst, tn_scalar_int(0), key);
		if (rc < 0)
			goto fail;
	} else if (tn__key_runs(key)) {
		int64_t m = kind == K_DOT ? 1 : a->sizes[a->ndim - 2];
		int64_t k = a->sizes[a->ndim - 1];
		int64_t n = kind == K_MM || kind == K_ADDMM || kind == K_BMM || kind == K_BADDBMM
				    ? b->sizes[b->ndim - 1]
				    : 1;
		int64_t batch = ndim == 3 ? sizes[0] : 1;
		struct tn__mat ma = as_mat(a, kind == K_DOT), mb = as_mat(b, false);
		struct tn__mat mc = as_mat(dst, false);
		if (kind == K_DOT)
			mc = (struct tn__mat){ tn__data(dst), 0, 0, 0 };
		rc = tn__gemm(a->dtype, batch, m, n, k, alpha, &ma, &mb,
			      use_self ? beta : tn_scalar_int(0), &mc);
		if (rc < 0)
			goto fail;
	}
	if (ret)
		*ret = dst;
	else
		tn_tensor_unref(dst);
	return 0;
fail:
	tn_tensor_unref(dst);
	return rc;
}

/* ---- the kernels of the BLAS-backed operators (CPU and Meta) ---- */

#define PRODUCT_KERNELS(SUFFIX, KEY)                                                          \
	int tn__mm_##SUFFIX(const tn_tensor *self, const tn_tensor *mat2, tn_tensor **ret)    \
	{                                                                                     \
		return product(K_MM, NULL, self, mat2, tn_scalar_int(0), tn_scalar_int(1), NULL, \
			       false, KEY, ret, "mm");                                        \
	}                                                                                     \
	int tn__mm_out_##SUFFIX(const tn_tensor *self, const tn_tensor *mat2, tn_tensor *out) \
	{                                                                                     \
		return product(K_MM, NULL, self, mat2, tn_scalar_int(0), tn_scalar_int(1), out, \
			       false, KEY, NULL, "mm");                                       \
	}                                                                                     \
	int tn__bmm_##SUFFIX(const tn_tensor *self, const tn_tensor *mat2, tn_tensor **ret)   \
	{                                                                                     \
		return product(K_BMM, NULL, self, mat2, tn_scalar_int(0), tn_scalar_int(1), NULL, \
			       false, KEY, ret, "bmm");                                       \
	}                                                                                     \
	int tn__bmm_out_##SUFFIX(const tn_tensor *self, const tn_tensor *mat2, tn_tensor *out) \
	{                                                                                     \
		return product(K_BMM, NULL, self, mat2, tn_scalar_int(0), tn_scalar_int(1), out, \
			       false, KEY, NULL, "bmm");                                      \
	}                                                                                     \
	int tn__mv_##SUFFIX(const tn_tensor *self, const tn_tensor *vec, tn_tensor **ret)     \
	{                                                                                     \
		return product(K_MV, NULL, self, vec, tn_scalar_int(0), tn_scalar_int(1), NULL, \
			       false, KEY, ret, "mv");                                        \
	}                                                                                     \
	int tn__mv_out_##SUFFIX(const tn_tensor *self, const tn_tensor *vec, tn_tensor *out)  \
	{                                                                                     \
		return product(K_MV, NULL, self, vec, tn_scalar_int(0), tn_scalar_int(1), out, \
			       false, KEY, NULL, "mv");                                       \
	}                                                                                     \
	int tn__dot_##SUFFIX(const tn_tensor *self, const tn_tensor *tensor, tn_tensor **ret) \
	{                                                                                     \
		return product(K_DOT, NULL, self, tensor, tn_scalar_int(0), tn_scalar_int(1),   \
			       NULL, false, KEY, ret, "dot");                                 \
	}                                                                                     \
	int tn__dot_out_##SUFFIX(const tn_tensor *self, const tn_tensor *tensor, tn_tensor *out) \
	{                                                                                     \
		return product(K_DOT, NULL, self, tensor, tn_scalar_int(0), tn_scalar_int(1),   \
			       out, false, KEY, NULL, "dot");                                 \
	}                                                                                     \
	ADD_KERNELS(addmm, K_ADDMM, mat1, mat2, SUFFIX, KEY)                                  \
	ADD_KERNELS(baddbmm, K_BADDBMM, batch1, batch2, SUFFIX, KEY)                          \
	ADD_KERNELS(addmv, K_ADDMV, mat, vec, SUFFIX, KEY)

#define ADD_KERNELS(NAME, KIND, A, B, SUFFIX, KEY)                                            \
	int tn__##NAME##_##SUFFIX(const tn_tensor *self, const tn_tensor *A, const tn_tensor *B, \
				  tn_scalar beta, tn_scalar alpha, tn_tensor **ret)           \
	{                                                                                     \
		return product(KIND, self, A, B, beta, alpha, NULL, false, KEY, ret, #NAME);    \
	}                                                                                     \
	int tn__##NAME##_out_##SUFFIX(const tn_tensor *self, const tn_tensor *A,              \
				      const tn_tensor *B, tn_scalar beta, tn_scalar alpha,    \
				      tn_tensor *out)                                         \
	{                                                                                     \
		return product(KIND, self, A, B, beta, alpha, out, false, KEY, NULL, #NAME);    \
	}                                                                                     \
	int tn__##NAME##__##SUFFIX(tn_tensor *self, const tn_tensor *A, const tn_tensor *B,   \
				   tn_scalar beta, tn_scalar alpha)                           \
	{                                                                                     \
		return product(KIND, self, A, B, beta, alpha, self, true, KEY, NULL, #NAME "_"); \
	}

PRODUCT_KERNELS(cpu, TN_KEY_CPU)
PRODUCT_KERNELS(meta, TN_KEY_META)

/* ---- composites: t, outer, matmul, linear (device-generic) ---- */

int tn__t(const tn_tensor *self, tn_tensor **ret)
{
	int rc = tn__check_tensor_args(self, ret, "t");
	if (rc < 0)
		return rc;
	if (self->ndim > 2)
		return tn__error(TN_EINVAL, "t() expects a tensor with <= 2 dimensions, but self is %dD",
				 self->ndim);
	if (self->ndim < 2)
		return tn_alias(self, ret);
	return tn_transpose(self, 0, 1, ret);
}

int tn__outer(const tn_tensor *self, const tn_tensor *vec2, tn_tensor **ret)
{
	int rc = tn__check_tensor_args(self, ret, "outer");
	tn_tensor *col;
	if (rc < 0)
		return rc;
	if (self->ndim != 1)
		return tn__error(TN_EINVAL, "outer: Expected 1-D argument self, but got %d-D", self->ndim);
	if (vec2->ndim != 1)
		return tn__error(TN_EINVAL, "outer: Expected 1-D argument vec2, but got %d-D", vec2->ndim);
	if ((rc = tn_unsqueeze(self, 1, &col)) < 0)
		return rc;
	rc = tn_mul(col, vec2, ret);
	tn_tensor_unref(col);
	return rc;
}

int tn__outer_out(const tn_tensor *self, const tn_tensor *vec2, tn_tensor *out)
{
	tn_tensor *col;
	int rc;
	if (self->ndim != 1)
		return tn__error(TN_EINVAL, "outer: Expected 1-D argument self, but got %d-D", self->ndim);
	if (vec2->ndim != 1)
		return tn__error(TN_EINVAL, "outer: Expected 1-D argument vec2, but got %d-D", vec2->ndim);
	if ((rc = tn_unsqueeze(self, 1, &col)) < 0)
		return rc;
	rc = tn_mul_out(col, vec2, out);
	tn_tensor_unref(col);
	return rc;
}

/* The product of the sizes of @t's dims [0, @n). */
static int64_t prod_sizes(const tn_tensor *t, int n)
{
	int64_t p = 1;
	for (int d = 0; d < n; d++)
		p *= t->sizes[d];
	return p;
}

/*
 * matmul with batch dims folded into mm's rows (PyTorch's should_fold case): @t1 has >= 3
 * dims, @t2 1 or 2. The result has t1's leading dims, then t2's columns when t2 is a matrix.
 */
static int matmul_fold(const tn_tensor *t1, const tn_tensor *t2, tn_tensor **ret)
{
	int64_t shape[TN_MAX_DIMS + 1];
	int nd = t1->ndim - 1, rc;
	tn_tensor *folded = NULL, *r = NULL;
	memcpy(shape, t1->sizes, sizeof(int64_t) * (size_t)nd);
	if (t2->ndim == 2)
		shape[nd++] = t2->sizes[1];
	int64_t fold[2] = { prod_sizes(t1, t1->ndim - 1), t1->sizes[t1->ndim - 1] };
	if ((rc = tn_reshape(t1, 2, fold, &folded)) < 0)
		return rc;
	rc = t2->ndim == 2 ? tn_mm(folded, t2, &r) : tn_mv(folded, t2, &r);
	if (rc == 0)
		rc = tn_view(r, nd, shape, ret); /* _unsafe_view of a fresh contiguous result */
	tn_tensor_unref(r);
	tn_tensor_unref(folded);
	return rc;
}

static int matmul_impl(const tn_tensor *t1, const tn_tensor *t2, tn_tensor **ret)
{
	const int d1 = t1->ndim, d2 = t2->ndim;
	tn_tensor *x = NULL, *y = NULL, *r = NULL;
	int rc;

	if (d1 == 0 || d2 == 0)
		return tn__error(TN_EINVAL, "both arguments to matmul need to be at least 1D, but "
				 "they are %dD and %dD", d1, d2);
	if (d1 == 1 && d2 == 1)
		return tn_dot(t1, t2, ret);
	if (d1 == 2 && d2 == 1)
		return tn_mv(t1, t2, ret);
	if (d1 == 1 && d2 == 2) {
		if ((rc = tn_unsqueeze(t1, 0, &x)) == 0 && (rc = tn_mm(x, t2, &r)) == 0)
			rc = tn_squeeze_dim(r, 0, ret);
		goto done;
	}
	if (d1 == 2 && d2 == 2)
		return tn_mm(t1, t2, ret);
	if (d1 >= 3 && d2 <= 2)
		return matmul_fold(t1, t2, ret);
	if (d2 >= 3 && d1 <= 2) {
		/* t1 @ t2 = (t2^T @ t1^T)^T, folded the other way, made contiguous again. */
		if ((rc = tn_transpose(t2, -1, -2, &x)) < 0)
			goto done;
		if (d1 == 2 && (rc = tn__t(t1, &y)) < 0)
			goto done;
		if ((rc = matmul_fold(x, d1 == 2 ? y : t1, &r)) < 0)
			goto done;
		if (d1 == 2) {
			tn_tensor *rt;
			if ((rc = tn_transpose(r, -1, -2, &rt)) < 0)
				goto done;
			rc = tn_contiguous(rt, TN_CONTIGUOUS_FORMAT, ret);
			tn_tensor_unref(rt);
		} else {
			*ret = tn_tensor_ref(r);
		}
		goto done;
	}
	/* Both batched: broadcast the batch dims, fold them into one, bmm. */
	{
		const int b1 = d1 - 2 > 0 ? d1 - 2 : 0, b2 = d2 - 2 > 0 ? d2 - 2 : 0;
		const int nb = b1 > b2 ? b1 : b2;
		int64_t batch[TN_MAX_DIMS], e1[TN_MAX_DIMS + 2], e2[TN_MAX_DIMS + 2];
		int64_t n = d1 > 1 ? t1->sizes[d1 - 2] : 1, m1 = t1->sizes[d1 - 1];
		int64_t m2 = d2 > 1 ? t2->sizes[d2 - 2] : t2->sizes[0];
		int64_t p = d2 > 1 ? t2->sizes[d2 - 1] : 1;
		for (int i = nb - 1; i >= 0; i--) { /* infer_size: from the last dim */
			int i1 = i - (nb - b1), i2 = i - (nb - b2);
			int64_t s1 = i1 >= 0 ? t1->sizes[i1] : 1, s2 = i2 >= 0 ? t2->sizes[i2] : 1;
			if (s1 != s2 && s1 != 1 && s2 != 1) {
				rc = tn__error(TN_EINVAL, "The size of tensor a (%lld) must match the "
					       "size of tensor b (%lld) at non-singleton dimension %d",
					       (long long)s1, (long long)s2, i);
				goto done;
			}
			batch[i] = s1 == 1 ? s2 : s1;
		}
		int64_t bp = 1;
		for (int i = 0; i < nb; i++)
			bp *= batch[i];
		memcpy(e1, batch, sizeof(int64_t) * (size_t)nb);
		memcpy(e2, batch, sizeof(int64_t) * (size_t)nb);
		e1[nb] = n, e1[nb + 1] = m1;
		e2[nb] = m2, e2[nb + 1] = p;
		tn_tensor *ex1 = NULL, *ex2 = NULL, *v1 = NULL, *v2 = NULL;
		int64_t bv1[3] = { bp, n, m1 }, bv2[3] = { bp, m2, p };
		if ((rc = tn_expand(t1, nb + 2, e1, &ex1)) == 0 &&
		    (rc = tn_expand(t2, nb + 2, e2, &ex2)) == 0 &&
		    (rc = tn_reshape(ex1, 3, bv1, &v1)) == 0 &&
		    (rc = tn_reshape(ex2, 3, bv2, &v2)) == 0 && (rc = tn_bmm(v1, v2, &r)) == 0) {
			int64_t oshape[TN_MAX_DIMS + 2];
			int on = nb;
			memcpy(oshape, batch, sizeof(int64_t) * (size_t)nb);
			if (d1 > 1)
				oshape[on++] = n;
			if (d2 > 1)
				oshape[on++] = p;
			rc = tn_view(r, on, oshape, ret);
		}
		tn_tensor_unref(ex1);
		tn_tensor_unref(ex2);
		tn_tensor_unref(v1);
		tn_tensor_unref(v2);
	}
done:
	tn_tensor_unref(r);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	return rc;
}

int tn__matmul(const tn_tensor *self, const tn_tensor *other, tn_tensor **ret)
{
	int rc = tn__check_tensor_args(self, ret, "matmul");
	if (rc < 0)
		return rc;
	return matmul_impl(self, other, ret);
}

/* The out= forms of the composites compute the result, then check and fill out: out must have
 * its dtype (the message of mm.out) and shape. */
static int into_out(tn_tensor *out, tn_tensor *r, const char *who)
{
	int rc = 0;
	if (out->dtype != r->dtype)
		rc = tn__error(TN_EINVAL, "Expected out tensor to have dtype %s, but got %s instead",
			       tn__typemeta_name(r->dtype), tn__typemeta_name(out->dtype));
	else if ((rc = tn__check_internal_overlap(out)) == 0)
		rc = tn__copy_result_into(out, r, tn__on_host(out) && out->storage->data ? TN_KEY_CPU
							 : TN_KEY_META, who);
	tn_tensor_unref(r);
	return rc;
}

int tn__matmul_out(const tn_tensor *self, const tn_tensor *other, tn_tensor *out)
{
	tn_tensor *r = NULL;
	int rc = tn__check_live(out, "matmul");
	if (rc == 0)
		rc = matmul_impl(self, other, &r);
	return rc < 0 ? rc : into_out(out, r, "matmul");
}

int tn__linear(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
	       tn_tensor **ret)
{
	tn_tensor *wt = NULL, *r = NULL;
	int rc = tn__check_tensor_args(input, ret, "linear");
	if (rc < 0 || (rc = tn__t(weight, &wt)) < 0)
		return rc;
	if (input->ndim == 2 && bias) {
		rc = tn_addmm(bias, input, wt, tn_scalar_int(1), tn_scalar_int(1), ret);
	} else if (bias && input->ndim == 3 && input->contiguous) {
		/* The fused path for contiguous 3-d input: one addmm over the folded rows. */
		tn_tensor *v = NULL;
		int64_t fold[2] = { input->sizes[0] * input->sizes[1], input->sizes[2] };
		if ((rc = tn_view(input, 2, fold, &v)) == 0 &&
		    (rc = tn_addmm(bias, v, wt, tn_scalar_int(1), tn_scalar_int(1), &r)) == 0)
			rc = tn_view(r, 3, (int64_t[]){ input->sizes[0], input->sizes[1], r->sizes[1] },
				     ret);
		tn_tensor_unref(v);
	} else if ((rc = matmul_impl(input, wt, &r)) == 0) {
		if (bias && (rc = tn_add_(r, bias, tn_scalar_int(1))) < 0)
			goto out;
		*ret = tn_tensor_ref(r);
	}
out:
	tn_tensor_unref(r);
	tn_tensor_unref(wt);
	return rc;
}

int tn__linear_out(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
		   tn_tensor *out)
{
	tn_tensor *wt = NULL, *r = NULL;
	int rc = tn__check_live(out, "linear");
	if (rc < 0)
		return rc;
	if ((rc = tn__t(weight, &wt)) < 0)
		return rc;
	if (input->ndim == 2 && bias)
		rc = tn_addmm_out(bias, input, wt, tn_scalar_int(1), tn_scalar_int(1), out);
	else if ((rc = matmul_impl(input, wt, &r)) == 0 && bias)
		rc = tn_add_(r, bias, tn_scalar_int(1));
	if (rc == 0 && r)
		rc = into_out(out, tn_tensor_ref(r), "linear");
	tn_tensor_unref(r);
	tn_tensor_unref(wt);
	return rc;
}
