/* SPDX-License-Identifier: MIT */
/*
 * Views. The base tensor holds its own storage index in every element (arange), so reading
 * element [i, j, ...] of any view chain tells which storage element it reaches; that must equal
 * the index computed by hand from the view's definition, and the address must equal
 * data + sum(index * stride) * itemsize. A randomised as_strided test checks the bounds rule
 * against a brute-force walk over every element.
 */
#include "testutil.h"
#include "golden/parity_golden.h"

static tn_tensor *base(int ndim, const int64_t *sizes)
{
	tn_tensor *a, *v;
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= sizes[i];
	ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(n), tn_scalar_int(1), &(enum tn_dtype){ TN_INT64 }, TN_CPU, &a));
	ck_assert_tn_ok(tn_view(a, ndim, sizes, &v));
	tn_tensor_unref(a);
	return v;
}

/* Walk every element of @t: the value read must equal @expect(index), and the element's
 * address must be the one its strides give. */
typedef int64_t (*expect_fn)(const int64_t *idx, const void *ctx);

static void check_all(const tn_tensor *t, expect_fn expect, const void *ctx)
{
	int n = tn_tensor_ndim(t);
	int64_t idx[TN_MAX_DIMS] = { 0 };
	const int64_t *sizes = tn_tensor_sizes(t), *strides = tn_tensor_strides(t);
	const int64_t *storage = tn_storage_data(tn_tensor_storage(t));
	if (tn_tensor_numel(t) == 0)
		return;
	for (;;) {
		int64_t off = tn_tensor_storage_offset(t);
		for (int d = 0; d < n; d++)
			off += idx[d] * strides[d];
		int64_t want = expect(idx, ctx);
		ck_assert_int_eq(tn_test_get_int(t, idx), want);
		ck_assert_int_eq(storage[off], want);
		ck_assert_ptr_eq((const char *)tn_tensor_data(t) +
					 (off - tn_tensor_storage_offset(t)) * 8,
				 &storage[off]);
		int d = n - 1;
		while (d >= 0 && ++idx[d] == sizes[d])
			idx[d--] = 0;
		if (d < 0)
			return;
	}
}

static int64_t e_transpose(const int64_t *i, const void *c) { (void)c; return i[1] * 4 + i[0]; }
/* permute(2, 0, 1) of a [2, 3, 4] base: result [i, j, k] is base[j, k, i]. */
static int64_t e_permute(const int64_t *i, const void *c) { (void)c; return i[1] * 12 + i[2] * 4 + i[0]; }
/* base [6, 5]: slice dim 1 from 1 step 2 -> cols 1, 3; then select row 4 of dim 0. */
static int64_t e_slice(const int64_t *i, const void *c) { (void)c; return i[0] * 5 + 1 + 2 * i[1]; }
static int64_t e_select(const int64_t *i, const void *c) { (void)c; return 4 * 5 + 1 + 2 * i[0]; }
/* expand [3, 1] -> [2, 3, 4]: result [a, b, c] is base[b, 0]. */
static int64_t e_expand(const int64_t *i, const void *c) { (void)c; return i[1]; }
/* chain: base [4, 6] -> t() [6, 4] -> narrow(0, 1, 4) -> slice(1, 0, end, 3) [4, 2]:
 * [a, b] is t[1 + a, 3 * b] = base[3 * b, 1 + a]. */
static int64_t e_chain(const int64_t *i, const void *c) { (void)c; return i[1] * 3 * 6 + 1 + i[0]; }

START_TEST(test_view_semantics)
{
	struct tn_baseline b = tn_test_baseline();
	int64_t s34[] = { 3, 4 }, s234[] = { 2, 3, 4 }, s65[] = { 6, 5 }, s31[] = { 3, 1 },
		s46[] = { 4, 6 };
	tn_tensor *a, *v, *w, *x;

	a = base(2, s34);
	ck_assert_tn_ok(tn_transpose(a, 0, 1, &v));
	ck_assert(!tn_tensor_is_contiguous(v));
	check_all(v, e_transpose, NULL);
	tn_tensor_unref(v);
	tn_tensor_unref(a);

	a = base(3, s234);
	int64_t perm[] = { 2, 0, 1 };
	ck_assert_tn_ok(tn_permute(a, 3, perm, &v));
	ck_assert_int_eq(tn_tensor_sizes(v)[0], 4);
	ck_assert_int_eq(tn_tensor_strides(v)[0], 1);
	check_all(v, e_permute, NULL);
	tn_tensor_unref(v);
	tn_tensor_unref(a);

	a = base(2, s65);
	ck_assert_tn_ok(tn_slice(a, 1, 1, INT64_MAX, 2, &v));
	ck_assert_int_eq(tn_tensor_sizes(v)[1], 2);
	ck_assert_int_eq(tn_tensor_strides(v)[1], 2);
	ck_assert_int_eq(tn_tensor_storage_offset(v), 1);
	check_all(v, e_slice, NULL);
	ck_assert_tn_ok(tn_select(v, 0, -2, &w));
	ck_assert_int_eq(tn_tensor_ndim(w), 1);
	check_all(w, e_select, NULL);
	tn_tensor_unref(w);
	tn_tensor_unref(v);
	tn_tensor_unref(a);

	a = base(2, s31);
	ck_assert_tn_ok(tn_expand(a, 3, s234, &v));
	ck_assert_int_eq(tn_tensor_strides(v)[0], 0);
	ck_assert_int_eq(tn_tensor_strides(v)[2], 0);
	check_all(v, e_expand, NULL);
	tn_tensor_unref(v);
	tn_tensor_unref(a);

	a = base(2, s46);
	ck_assert_tn_ok(tn_transpose(a, -1, -2, &v));
	ck_assert_tn_ok(tn_narrow(v, 0, 1, 4, &w));
	ck_assert_tn_ok(tn_slice(w, 1, 0, INT64_MAX, 3, &x));
	ck_assert_int_eq(tn_tensor_sizes(x)[0], 4);
	ck_assert_int_eq(tn_tensor_sizes(x)[1], 2);
	check_all(x, e_chain, NULL);
	/* Views share the storage and keep it alive after the base is gone. */
	ck_assert_ptr_eq(tn_tensor_storage(x), tn_tensor_storage(a));
	tn_tensor_unref(a);
	tn_tensor_unref(v);
	tn_tensor_unref(w);
	check_all(x, e_chain, NULL);
	tn_tensor_unref(x);
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_view_and_reshape)
{
	int64_t s234[] = { 2, 3, 4 };
	tn_tensor *a = base(3, s234), *v, *t, *r;

	int64_t shape[] = { 4, -1 };
	ck_assert_tn_ok(tn_view(a, 2, shape, &v));
	ck_assert_int_eq(tn_tensor_sizes(v)[1], 6);
	ck_assert_ptr_eq(tn_tensor_storage(v), tn_tensor_storage(a));
	tn_tensor_unref(v);
	int64_t bad[] = { 5, -1 };
	ck_assert_tn_error(tn_view(a, 2, bad, &v), TN_EINVAL,
			   "shape '[5, -1]' is invalid for input of size 24");
	int64_t two[] = { -1, -1 };
	ck_assert_tn_error(tn_view(a, 2, two, &v), TN_EINVAL, "only one dimension can be inferred");
	int64_t neg[] = { -2, 12 };
	ck_assert_tn_error(tn_view(a, 2, neg, &v), TN_EINVAL, "invalid shape dimension -2");

	/* A transposed tensor cannot be flattened by a view; reshape copies instead. */
	ck_assert_tn_ok(tn_transpose(a, 1, 2, &t));
	int64_t flat[] = { 24 };
	ck_assert_tn_error(tn_view(t, 1, flat, &v), TN_EINVAL,
			   "view size is not compatible with input tensor's size and stride (at least "
			   "one dimension spans across two contiguous subspaces). Use .reshape(...) "
			   "instead.");
	ck_assert_tn_ok(tn_reshape(t, 1, flat, &r));
	ck_assert_ptr_ne(tn_tensor_storage(r), tn_tensor_storage(a));
	ck_assert(tn_tensor_is_contiguous(r));
	for (int64_t i = 0; i < 24; i++) {
		/* r[i] = t[i / 12, (i / 3) % 4, i % 3] = a[i / 12, i % 3, (i / 3) % 4] */
		int64_t want = (i / 12) * 12 + (i % 3) * 4 + (i / 3) % 4;
		ck_assert_int_eq(tn_test_get_int(r, &i), want);
	}
	tn_tensor_unref(r);
	/* But splitting the untouched dim is a view even on the transposed tensor. */
	int64_t split[] = { 1, 2, 4, 3 };
	ck_assert_tn_ok(tn_view(t, 4, split, &v));
	ck_assert_ptr_eq(tn_tensor_storage(v), tn_tensor_storage(a));
	tn_tensor_unref(v);
	ck_assert_tn_ok(tn_reshape(a, 2, shape, &r)); /* viewable: no copy */
	ck_assert_ptr_eq(tn_tensor_storage(r), tn_tensor_storage(a));
	tn_tensor_unref(r);
	tn_tensor_unref(t);

	/* Empty and 0-dim cases. */
	tn_tensor *z, *s;
	int64_t z0[] = { 0, 4 }, zr[] = { -1, 2 }, zz[] = { 2, -1, 0 };
	ck_assert_tn_ok(tn_empty(2, z0, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &z));
	ck_assert_tn_ok(tn_view(z, 2, zr, &v));
	ck_assert_int_eq(tn_tensor_sizes(v)[0], 0);
	tn_tensor_unref(v);
	ck_assert_tn_error(tn_view(z, 3, zz, &v), TN_EINVAL,
			   "cannot reshape tensor of 0 elements into shape [2, -1, 0] because the "
			   "unspecified dimension size -1 can be any value and is ambiguous");
	tn_tensor_unref(z);
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_int(7), &(enum tn_dtype){ TN_INT64 }, TN_CPU, &s));
	int64_t ones[] = { 1, 1, 1 };
	ck_assert_tn_ok(tn_view(s, 3, ones, &v));
	ck_assert_tn_ok(tn_view(v, 0, NULL, &z));
	ck_assert_int_eq(tn_test_get_int(z, NULL), 7);
	tn_tensor_unref(z);
	tn_tensor_unref(v);
	tn_tensor_unref(s);
	tn_tensor_unref(a);
}
END_TEST

START_TEST(test_view_errors)
{
	int64_t s234[] = { 2, 3, 4 };
	tn_tensor *a = base(3, s234), *v;

	int64_t dims2[] = { 0, 1 }, dup[] = { 0, 1, -3 };
	ck_assert_tn_error(tn_permute(a, 2, dims2, &v), TN_EINVAL,
			   "permute(sparse_coo): number of dimensions in the tensor input does not match the "
			   "length of the desired ordering of dimensions i.e. input.dim() = 3 is not "
			   "equal to len(dims) = 2");
	ck_assert_tn_error(tn_permute(a, 3, dup, &v), TN_EINVAL,
			   "permute(): duplicate dims are not allowed.");
	ck_assert_tn_error(tn_transpose(a, 0, 3, &v), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
	ck_assert_tn_error(tn_slice(a, 0, 0, 2, 0, &v), TN_EINVAL, "slice step must be positive");
	ck_assert_tn_error(tn_narrow(a, 2, 3, 2, &v), TN_ERANGE,
			   "start (3) + length (2) exceeds dimension size (4).");
	ck_assert_tn_error(tn_narrow(a, 2, -5, 1, &v), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-4, 3], but got -5)");
	ck_assert_tn_error(tn_narrow(a, 2, 0, -1, &v), TN_ERANGE,
			   "start (0) + length (-1) exceeds dimension size (4).");
	ck_assert_tn_error(tn_select(a, 1, 3, &v), TN_ERANGE,
			   "select(): index 3 out of range for tensor of size [2, 3, 4] at dimension 1");
	ck_assert_tn_error(tn_select(a, 1, -4, &v), TN_ERANGE,
			   "select(): index -4 out of range for tensor of size [2, 3, 4] at dimension 1");
	int64_t e1[] = { 4 }, e2[] = { 2, 5, 4 }, e3[] = { -1, 2, 3, 4 };
	ck_assert_tn_error(tn_expand(a, 1, e1, &v), TN_EINVAL,
			   "expand(torch.LongTensor{[2, 3, 4]}, size=[4]): the number of sizes provided (1) must "
			   "be greater or equal to the number of dimensions in the tensor (3)");
	ck_assert_tn_error(tn_expand(a, 3, e2, &v), TN_EINVAL,
			   "The expanded size of the tensor (5) must match the existing size (3) at "
			   "non-singleton dimension 1.  Target sizes: [2, 5, 4].  Tensor sizes: [2, 3, 4]");
	ck_assert_tn_error(tn_expand(a, 4, e3, &v), TN_EINVAL,
			   "The expanded size of the tensor (-1) isn't allowed in a leading, "
			   "non-existing dimension 0");
	ck_assert_tn_error(tn_unsqueeze(a, 4, &v), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-4, 3], but got 4)");
	ck_assert_tn_error(tn_squeeze_dim(a, -4, &v), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-3, 2], but got -4)");
	ck_assert_tn_error(tn_view(a, 1, e1, NULL), TN_EINVAL, "view: NULL ret_tensor");
	tn_tensor *s;
	ck_assert_tn_ok(tn_select(a, 0, 0, &s));
	tn_tensor *s0;
	ck_assert_tn_ok(tn_select(s, 0, 0, &v));
	ck_assert_tn_ok(tn_select(v, 0, 3, &s0));
	ck_assert_int_eq(tn_tensor_ndim(s0), 0);
	ck_assert_int_eq(tn_test_get_int(s0, NULL), 3);
	ck_assert_tn_error(tn_select(s0, 0, 0, &(tn_tensor *){ NULL }), TN_ERANGE,
			   "select() cannot be applied to a 0-dim tensor.");
	ck_assert_tn_error(tn_narrow(s0, 0, 0, 1, &(tn_tensor *){ NULL }), TN_EINVAL,
			   "narrow() cannot be applied to a 0-dim tensor.");
	tn_tensor_unref(s0);
	tn_tensor_unref(v);
	tn_tensor_unref(s);
	tn_tensor_unref(a);
}
END_TEST

START_TEST(test_slice_clamping)
{
	int64_t n10[] = { 10 };
	tn_tensor *a = base(1, n10), *v;
	static const struct {
		int64_t start, end, step, size, first;
	} cases[] = {
		{ -3, INT64_MAX, 1, 3, 7 },   { -100, 2, 1, 2, 0 }, { 8, 100, 1, 2, 8 },
		{ 5, 2, 1, 0, -1 },           { 0, 10, 3, 4, 0 },   { 1, -1, 4, 2, 1 },
		{ INT64_MIN, INT64_MAX, INT64_MAX, 1, 0 },          { 10, 10, 1, 0, -1 },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		ck_assert_tn_ok(tn_slice(a, 0, cases[k].start, cases[k].end, cases[k].step, &v));
		ck_assert_int_eq(tn_tensor_sizes(v)[0], cases[k].size);
		if (cases[k].size) {
			int64_t zero = 0;
			ck_assert_int_eq(tn_test_get_int(v, &zero), cases[k].first);
		}
		tn_tensor_unref(v);
	}
	tn_tensor_unref(a);
	/* Slicing a size-0 dimension at the end of a storage stays valid. */
	int64_t s35[] = { 3, 5 };
	tn_tensor *b = base(2, s35), *e, *f;
	ck_assert_tn_ok(tn_slice(b, 0, 3, 3, 1, &e));
	ck_assert_tn_ok(tn_slice(e, 1, 4, 4, 1, &f));
	ck_assert_int_eq(tn_tensor_numel(f), 0);
	ck_assert_int_eq(tn_tensor_storage_offset(f), 19);
	tn_tensor_unref(f);
	tn_tensor_unref(e);
	tn_tensor_unref(b);
}
END_TEST

START_TEST(test_squeeze_unsqueeze)
{
	int64_t s[] = { 1, 3, 1, 2 };
	tn_tensor *a = base(4, s), *v, *w;
	ck_assert_tn_ok(tn_squeeze(a, &v));
	ck_assert_int_eq(tn_tensor_ndim(v), 2);
	ck_assert_int_eq(tn_tensor_sizes(v)[0], 3);
	ck_assert_int_eq(tn_tensor_sizes(v)[1], 2);
	tn_tensor_unref(v);
	ck_assert_tn_ok(tn_squeeze_dim(a, -2, &v));
	ck_assert_int_eq(tn_tensor_ndim(v), 3);
	ck_assert_tn_ok(tn_squeeze_dim(v, 1, &w)); /* size 3: unchanged */
	ck_assert_int_eq(tn_tensor_ndim(w), 3);
	tn_tensor_unref(w);
	ck_assert_tn_ok(tn_unsqueeze(v, -1, &w));
	ck_assert_int_eq(tn_tensor_ndim(w), 4);
	ck_assert_int_eq(tn_tensor_sizes(w)[3], 1);
	ck_assert_int_eq(tn_tensor_strides(w)[3], 1);
	tn_tensor_unref(w);
	ck_assert_tn_ok(tn_unsqueeze(v, 1, &w));
	ck_assert_int_eq(tn_tensor_strides(w)[1], 6); /* sizes[1] * strides[1] of the input */
	int64_t idx[] = { 0, 0, 2, 1 };
	ck_assert_int_eq(tn_test_get_int(w, idx), 5);
	tn_tensor_unref(w);
	tn_tensor_unref(v);
	tn_tensor_unref(a);
}
END_TEST

/* xorshift64*: a fixed-seed generator, so failures reproduce. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

START_TEST(test_as_strided_bounds_fuzz)
{
	/* Storage of 97 int16 elements; random geometries are accepted exactly when a brute-force
	 * walk finds every element inside the storage. */
	tn_storage *st;
	tn_tensor *a, *v;
	const int64_t nelem = 97;
	ck_assert_tn_ok(tn_storage_new((tn_device){ TN_DEVICE_CPU, 0 }, nelem * 2 + 1, &st));
	ck_assert_tn_ok(tn_tensor_new(st, 0, 0, NULL, NULL, TN_INT16, &a));
	int accepted = 0, refused = 0;
	for (int iter = 0; iter < 20000; iter++) {
		int ndim = (int)(rnd() % 4);
		int64_t sizes[4], strides[4], off = (int64_t)(rnd() % 120) - 5;
		if (off == -1)
			off = -2; /* -1 means "keep the offset", tested below */
		bool huge = rnd() % 50 == 0;
		for (int d = 0; d < ndim; d++) {
			sizes[d] = (int64_t)(rnd() % 6);
			strides[d] = huge ? (int64_t)(rnd() >> 1) : (int64_t)(rnd() % 40) - 2;
		}
		/* Brute force: the largest element index, with overflow treated as out of range. */
		bool neg = off < 0, any_zero = false, out = false;
		__int128 max = off;
		for (int d = 0; d < ndim; d++) {
			neg |= strides[d] < 0;
			any_zero |= sizes[d] == 0;
			if (sizes[d] > 0)
				max += (__int128)(sizes[d] - 1) * strides[d];
		}
		out = !any_zero && (max + 1) * 2 > nelem * 2 + 1;
		int r = tn_as_strided(a, ndim, sizes, ndim, strides, &(int64_t){ off }, &v);
		if (neg || out) {
			ck_assert_msg(r < 0, "accepted an escaping view (iter %d)", iter);
			refused++;
			continue;
		}
		ck_assert_msg(r == 0, "refused a valid view (iter %d): %s", iter, tn_last_error());
		accepted++;
		/* Every element is readable: the walk stays inside the storage (ASan checks too). */
		int64_t idx[4] = { 0 };
		for (int64_t k = 0; k < tn_tensor_numel(v); k++) {
			int64_t rem = k;
			for (int d = ndim - 1; d >= 0; d--) {
				idx[d] = rem % sizes[d];
				rem /= sizes[d];
			}
			tn_scalar s;
			ck_assert_int_eq(tn_tensor_get(v, ndim, idx, &s), 0);
		}
		tn_tensor_unref(v);
	}
	ck_assert_int_gt(accepted, 1000);
	ck_assert_int_gt(refused, 1000);
	ck_assert_tn_error(tn_as_strided(a, 1, (int64_t[]){ 2 }, 1, (int64_t[]){ -1 }, &(int64_t){ 0 }, &v), TN_EINVAL,
			   "as_strided: Negative strides are not supported at the moment, got strides: "
			   "[-1]");
	ck_assert_tn_error(tn_as_strided(a, 1, (int64_t[]){ 2 }, 1, (int64_t[]){ 1 }, &(int64_t){ -2 }, &v), TN_EINVAL,
			   "Tensor: invalid storage offset -2");
	ck_assert_tn_error(tn_as_strided(a, 1, (int64_t[]){ 98 }, 1, (int64_t[]){ 1 }, NULL, &v), TN_ERANGE,
			   "setStorage: sizes [98], strides [1], storage offset 0, and itemsize 2 "
			   "requiring a storage size of 196 are out of bounds for storage of size 195");
	tn_tensor_unref(a);
	tn_storage_unref(st);
}
END_TEST

START_TEST(test_contiguous_and_clone)
{
	int64_t s[] = { 3, 4 };
	tn_tensor *a = base(2, s), *c, *t;
	ck_assert_tn_ok(tn_contiguous(a, TN_CONTIGUOUS_FORMAT, &c));
	ck_assert_ptr_eq(c, a); /* already contiguous: the same tensor */
	tn_tensor_unref(c);
	ck_assert_tn_ok(tn_clone(a, TN_CONTIGUOUS_FORMAT, &c));
	ck_assert_ptr_ne(tn_tensor_storage(c), tn_tensor_storage(a));
	tn_tensor_unref(c);
	ck_assert_tn_ok(tn_transpose(a, 0, 1, &t));
	ck_assert_tn_ok(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c));
	ck_assert(tn_tensor_is_contiguous(c));
	check_all(c, e_transpose, NULL);
	tn_tensor_unref(c);
	tn_tensor_unref(t);
	tn_tensor_unref(a);
}
END_TEST

/* clone's preserve_format against PyTorch 1.13: dense inputs keep their strides, others get
 * dense strides in the same order (infer_dense_strides). */
START_TEST(test_clone_preserve_format)
{
	struct {
		int64_t perm[4];
		int slice_dim;
		int64_t slice_end, step;
		int64_t want[4];
	} cases[] = {
		/* empty(2,3,4,5, channels_last)[..., :3] -> (36, 1, 9, 3) */
		{ { 0, 1, 2, 3 }, 3, 3, 1, { 36, 1, 9, 3 } },
		/* empty(2,3,4,5).permute(0,2,3,1)[..., :2] -> (40, 5, 1, 20) */
		{ { 0, 2, 3, 1 }, 3, 2, 1, { 40, 5, 1, 20 } },
	};
	int64_t sizes[] = { 2, 3, 4, 5 };
	for (size_t k = 0; k < 2; k++) {
		tn_tensor *base, *src, *v, *sl, *c;
		ck_assert_tn_ok(tn_zeros(4, sizes, TN_FLOAT32, TN_CPU, &base));
		if (k == 0)
			ck_assert_tn_ok(tn_contiguous(base, TN_CHANNELS_LAST, &src));
		else
			src = tn_tensor_ref(base);
		ck_assert_tn_ok(tn_permute(src, 4, cases[k].perm, &v));
		ck_assert_tn_ok(tn_slice(v, cases[k].slice_dim, 0, cases[k].slice_end, cases[k].step, &sl));
		ck_assert_tn_ok(tn_clone(sl, TN_PRESERVE_FORMAT, &c));
		for (int d = 0; d < 4; d++)
			ck_assert_int_eq(tn_tensor_strides(c)[d], cases[k].want[d]);
		tn_tensor *list[] = { base, src, v, sl, c };
		for (size_t i = 0; i < 5; i++)
			tn_tensor_unref(list[i]);
	}
	/* A dense channels-last tensor keeps its strides; contiguous() makes it row-major. */
	tn_tensor *base, *cl, *c, *rm;
	ck_assert_tn_ok(tn_zeros(4, sizes, TN_FLOAT32, TN_CPU, &base));
	ck_assert_tn_ok(tn_contiguous(base, TN_CHANNELS_LAST, &cl));
	ck_assert_tn_ok(tn_clone(cl, TN_PRESERVE_FORMAT, &c));
	ck_assert(tn_tensor_is_contiguous_as(c, TN_CHANNELS_LAST));
	ck_assert_tn_ok(tn_contiguous(cl, TN_CONTIGUOUS_FORMAT, &rm));
	ck_assert(tn_tensor_is_contiguous(rm));
	tn_tensor *list[] = { base, cl, c, rm };
	for (size_t i = 0; i < 4; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* A view's sizes and strides equal PyTorch's, or its error is PyTorch's message. */
static void assert_view_case(int r, tn_tensor *v, int ok, int nd, const int64_t *sizes,
			     const int64_t *strides, const char *msg, const char *what, size_t i)
{
	if (!ok) {
		ck_assert_msg(r < 0, "%s case %zu: succeeded, PyTorch says '%s'", what, i, msg);
		ck_assert_msg(strcmp(tn_last_error(), msg) == 0, "%s case %zu: '%s', PyTorch '%s'",
			      what, i, tn_last_error(), msg);
		return;
	}
	ck_assert_msg(r == 0, "%s case %zu failed: %s", what, i, tn_last_error());
	ck_assert_int_eq(tn_tensor_ndim(v), nd);
	for (int d = 0; d < nd; d++) {
		ck_assert_msg(tn_tensor_sizes(v)[d] == sizes[d] && tn_tensor_strides(v)[d] == strides[d],
			      "%s case %zu dim %d: size %lld stride %lld, PyTorch %lld %lld", what, i,
			      d, (long long)tn_tensor_sizes(v)[d], (long long)tn_tensor_strides(v)[d],
			      (long long)sizes[d], (long long)strides[d]);
	}
	tn_tensor_unref(v);
}

static tn_tensor *empty_f32(int ndim, const int64_t *sizes)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_empty(ndim, sizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	return t;
}

/* slice keeps stride * step even when one element is left; narrow wraps start and words its
 * errors as 1.13 does (a size-0 dimension takes start -1); expand of a 0-dim tensor gives
 * stride 0 everywhere: PyTorch's results on a grid of shapes and arguments. */
START_TEST(test_views_match_pytorch)
{
	for (size_t i = 0; i < sizeof(par_slice_cases) / sizeof(par_slice_cases[0]); i++) {
		const struct par_slice_case *c = &par_slice_cases[i];
		tn_tensor *t = empty_f32(c->ndim, c->sizes), *v = NULL;
		tn_clear_error();
		int r = tn_slice(t, c->dim, c->start, c->end, c->step, &v);
		assert_view_case(r, v, c->ok, c->out_ndim, c->out_sizes, c->out_strides, c->msg,
				 "slice", i);
		tn_tensor_unref(t);
	}
	for (size_t i = 0; i < sizeof(par_narrow_cases) / sizeof(par_narrow_cases[0]); i++) {
		const struct par_narrow_case *c = &par_narrow_cases[i];
		tn_tensor *t = empty_f32(c->ndim, c->sizes), *v = NULL;
		tn_clear_error();
		int r = tn_narrow(t, c->dim, c->start, c->length, &v);
		assert_view_case(r, v, c->ok, c->out_ndim, c->out_sizes, c->out_strides, c->msg,
				 "narrow", i);
		tn_tensor_unref(t);
	}
	for (size_t i = 0; i < sizeof(par_expand_cases) / sizeof(par_expand_cases[0]); i++) {
		const struct par_expand_case *c = &par_expand_cases[i];
		tn_tensor *t = empty_f32(c->ndim, c->sizes), *v = NULL;
		tn_clear_error();
		int r = tn_expand(t, c->nt, c->target, &v);
		assert_view_case(r, v, c->ok, c->out_ndim, c->out_sizes, c->out_strides, c->msg,
				 "expand", i);
		tn_tensor_unref(t);
	}
	/* unbind of a 0-dim tensor: the dimension is checked first (PyTorch's order). */
	tn_tensor *z = empty_f32(0, NULL), **list;
	int n;
	ck_assert_tn_error(tn_unbind(z, 1, &n, &list), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
	ck_assert_tn_error(tn_unbind(z, -1, &n, &list), TN_ERANGE,
			   "Dimension specified as 0 but tensor has no dimensions");
	tn_tensor_unref(z);
}
END_TEST

static const char *par_msg(const char *name)
{
	for (size_t i = 0; i < sizeof(par_msg_cases) / sizeof(par_msg_cases[0]); i++)
		if (strcmp(par_msg_cases[i].name, name) == 0)
			return par_msg_cases[i].msg;
	ck_abort_msg("no golden message for %s", name);
	return NULL;
}

/* The call fails with PyTorch's message for the same bad call. */
#define CK_MSG(name, call)                                                                 \
	do {                                                                               \
		tn_clear_error();                                                          \
		int rc_ = (call);                                                          \
		ck_assert_msg(rc_ < 0, "%s: succeeded, PyTorch says '%s'", name, par_msg(name)); \
		ck_assert_msg(strcmp(tn_last_error(), par_msg(name)) == 0,                  \
			      "%s: '%s', PyTorch '%s'", name, tn_last_error(), par_msg(name)); \
	} while (0)
#define SZ(...) ((const int64_t[]){ __VA_ARGS__ })

/* A survey of bad calls to the view, shape and factory operators: PyTorch 1.13's words,
 * with no operator prefix and the first problem PyTorch would report. */
START_TEST(test_messages_match_pytorch)
{
	tn_tensor *t, *z, *tt, *r = NULL, **list, *z23, *z5, *z3, *u8, *i32, *f16;
	int n;
	enum tn_dtype f32 = TN_FLOAT32;
	ck_assert_tn_ok(tn_zeros(3, SZ(2, 3, 4), TN_FLOAT32, TN_CPU, &t));
	ck_assert_tn_ok(tn_zeros(0, NULL, TN_FLOAT32, TN_CPU, &z));
	ck_assert_tn_ok(tn_transpose(t, 0, 1, &tt));
	ck_assert_tn_ok(tn_zeros(2, SZ(2, 3), TN_FLOAT32, TN_CPU, &z23));
	ck_assert_tn_ok(tn_zeros(1, SZ(5), TN_FLOAT32, TN_CPU, &z5));
	ck_assert_tn_ok(tn_zeros(1, SZ(3), TN_FLOAT32, TN_CPU, &z3));
	ck_assert_tn_ok(tn_zeros(1, SZ(2), TN_UINT8, TN_CPU, &u8));
	ck_assert_tn_ok(tn_zeros(1, SZ(2), TN_INT32, TN_CPU, &i32));
	ck_assert_tn_ok(tn_zeros(1, SZ(2), TN_FLOAT16, TN_CPU, &f16));
	CK_MSG("view55", tn_view(t, 2, SZ(5, 5), &r));
	CK_MSG("view_m1m1", tn_view(t, 2, SZ(-1, -1), &r));
	CK_MSG("view_m2", tn_view(t, 2, SZ(-2, 12), &r));
	CK_MSG("view_T", tn_view(tt, 1, SZ(24), &r));
	CK_MSG("reshape55", tn_reshape(t, 2, SZ(5, 5), &r));
	CK_MSG("reshape_m1m1", tn_reshape(t, 2, SZ(-1, -1), &r));
	CK_MSG("reshape_m3", tn_reshape(t, 2, SZ(-3, 8), &r));
	CK_MSG("permute2", tn_permute(t, 2, SZ(0, 1), &r));
	CK_MSG("permute_dup", tn_permute(t, 3, SZ(0, 0, 1), &r));
	CK_MSG("permute_oob", tn_permute(t, 3, SZ(0, 1, 5), &r));
	CK_MSG("permute_neg", tn_permute(t, 3, SZ(0, 1, -4), &r));
	CK_MSG("transpose_oob", tn_transpose(t, 0, 3, &r));
	CK_MSG("transpose_neg", tn_transpose(t, -4, 0, &r));
	CK_MSG("slice_dim", tn_slice(t, 3, 0, 1, 1, &r));
	CK_MSG("slice_step0", tn_slice(t, 0, 0, 1, 0, &r));
	CK_MSG("slice_0d", tn_slice(z, 0, 0, 1, 1, &r));
	CK_MSG("select_dim", tn_select(t, 3, 0, &r));
	CK_MSG("select_idx", tn_select(t, 1, 5, &r));
	CK_MSG("select_0d", tn_select(z, 0, 0, &r));
	CK_MSG("unbind_dim", tn_unbind(t, 3, &n, &list));
	CK_MSG("unbind_0d_dim1", tn_unbind(z, 1, &n, &list));
	CK_MSG("unbind_0d_dim0", tn_unbind(z, 0, &n, &list));
	CK_MSG("expand_fewer", tn_expand(t, 1, SZ(4), &r));
	CK_MSG("expand_mismatch", tn_expand(t, 3, SZ(2, 5, 4), &r));
	CK_MSG("expand_lead_m1", tn_expand(t, 4, SZ(-1, 2, 3, 4), &r));
	CK_MSG("expand_neg", tn_expand(t, 3, SZ(2, -2, 4), &r));
	CK_MSG("expand_neg_new", tn_expand(t, 4, SZ(-2, 2, 3, 4), &r));
	CK_MSG("squeeze_dim", tn_squeeze_dim(t, 3, &r));
	CK_MSG("unsqueeze_dim", tn_unsqueeze(t, 4, &r));
	CK_MSG("as_strided_len", tn_as_strided(t, 2, SZ(2, 3), 1, SZ(1), NULL, &r));
	CK_MSG("as_strided_neg", tn_as_strided(t, 2, SZ(2, 3), 2, SZ(-1, 1), NULL, &r));
	CK_MSG("as_strided_oob", tn_as_strided(t, 2, SZ(2, 30), 2, SZ(1, 1), NULL, &r));
	CK_MSG("as_strided_negsize", tn_as_strided(t, 2, SZ(2, -3), 2, SZ(1, 1), NULL, &r));
	CK_MSG("contig_cl", tn_contiguous(t, TN_CHANNELS_LAST, &r));
	CK_MSG("contig_cl3d", tn_contiguous(t, TN_CHANNELS_LAST_3D, &r));
	CK_MSG("contig_preserve", tn_contiguous(tt, TN_PRESERVE_FORMAT, &r));
	CK_MSG("clone_cl", tn_clone(t, TN_CHANNELS_LAST, &r));
	CK_MSG("empty_neg", tn_empty(2, SZ(2, -1), f32, TN_CPU, TN_CONTIGUOUS_FORMAT, &r));
	CK_MSG("empty_cl", tn_empty(2, SZ(2, 3), f32, TN_CPU, TN_CHANNELS_LAST, &r));
	CK_MSG("empty_preserve", tn_empty(2, SZ(2, 3), f32, TN_CPU, TN_PRESERVE_FORMAT, &r));
	CK_MSG("empty_strided_len", tn_empty_strided(2, SZ(2, 3), 1, SZ(1), f32, TN_CPU, &r));
	CK_MSG("empty_strided_neg", tn_empty_strided(2, SZ(2, 3), 2, SZ(-1, 1), f32, TN_CPU, &r));
	CK_MSG("narrow_start", tn_narrow(t, 2, -5, 1, &r));
	CK_MSG("narrow_len", tn_narrow(t, 2, 0, -1, &r));
	CK_MSG("narrow_0d", tn_narrow(z, 0, 0, 1, &r));
	CK_MSG("add_inplace_shape", tn_add_(z23, t, tn_scalar_int(1)));
	CK_MSG("add_bcast", tn_add(t, z5, tn_scalar_int(1), &r));
	CK_MSG("copy_bcast_out", tn_copy_(z3, z23, false));
	CK_MSG("fill_u8", tn_fill_(u8, tn_scalar_int(256)));
	CK_MSG("fill_i32_nan", tn_fill_(i32, tn_scalar_double(NAN)));
	CK_MSG("fill_f16", tn_fill_(f16, tn_scalar_double(1e10)));
	ck_assert_ptr_null(r);
	tn_tensor *all[] = { t, z, tt, z23, z5, z3, u8, i32, f16 };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		tn_tensor_unref(all[i]);
}
END_TEST

static Suite *view_suite(void)
{
	Suite *s = suite_create("view");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_view_semantics);
	tcase_add_test(tc, test_view_and_reshape);
	tcase_add_test(tc, test_view_errors);
	tcase_add_test(tc, test_slice_clamping);
	tcase_add_test(tc, test_squeeze_unsqueeze);
	tcase_add_test(tc, test_as_strided_bounds_fuzz);
	tcase_add_test(tc, test_contiguous_and_clone);
	tcase_add_test(tc, test_clone_preserve_format);
	tcase_add_test(tc, test_views_match_pytorch);
	tcase_add_test(tc, test_messages_match_pytorch);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(view_suite)
