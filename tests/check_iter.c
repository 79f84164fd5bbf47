/* SPDX-License-Identifier: MIT */
/*
 * TensorIterator: type promotion against PyTorch for every dtype pair and priority class,
 * broadcasting and its error, the two overlap errors, safe casting to outputs, output layout
 * from the inputs (permuted, channels-last), coalescing, DimCounter ranges that start and end
 * anywhere, the parallel path, and copy_ between every dtype pair against PyTorch's casts,
 * with broadcast and strided operands, under each CPU capability.
 */
#include <math.h>
#include <stdatomic.h>

#include "testutil.h"
#include "iter.h"
#include "golden/iter_golden.h"
#include "golden/parity_golden.h"

static tn_tensor *arange_f(int n, const int64_t *sizes, enum tn_dtype dt)
{
	int64_t numel = 1;
	tn_tensor *flat, *t;
	for (int i = 0; i < n; i++)
		numel *= sizes[i];
	ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(numel), tn_scalar_int(1), &dt,
				  TN_CPU, &flat));
	ck_assert_tn_ok(tn_view(flat, n, sizes, &t));
	tn_tensor_unref(flat);
	return t;
}

static struct tn_iter_config binary_cfg(const tn_tensor *out, const tn_tensor *a,
					const tn_tensor *b)
{
	struct tn_iter_config c;
	tn__iter_config_init(&c);
	c.noutputs = 1;
	c.ninputs = 2;
	c.tensors[0] = out;
	c.tensors[1] = a;
	c.tensors[2] = b;
	c.promote_inputs_to_common_dtype = true;
	c.cast_common_dtype_to_outputs = true;
	c.enforce_safe_casting_to_output = true;
	return c;
}

static enum tn_dtype result_type(const tn_tensor *a, const tn_tensor *b, bool b_wrapped)
{
	struct tn_iter it;
	struct tn_iter_config c = binary_cfg(NULL, a, b);
	c.wrapped[2] = b_wrapped;
	ck_assert_tn_ok(tn__iter_build(&it, &c, "test"));
	enum tn_dtype r = it.common_dtype;
	ck_assert_int_eq(it.ops[0].dtype, r); /* the allocated output has the common dtype */
	tn__iter_release(&it);
	return r;
}

START_TEST(test_promotion_matches_pytorch)
{
	int64_t two = 2;
	for (int a = 0; a < TN_NUM_DTYPES; a++) {
		for (int b = 0; b < TN_NUM_DTYPES; b++) {
			tn_tensor *ta, *tb, *za, *zb;
			ck_assert_tn_ok(tn_ones(1, &two, a, TN_CPU, &ta));
			ck_assert_tn_ok(tn_ones(1, &two, b, TN_CPU, &tb));
			ck_assert_tn_ok(tn_ones(0, NULL, a, TN_CPU, &za));
			ck_assert_tn_ok(tn_ones(0, NULL, b, TN_CPU, &zb));
			ck_assert_msg((int)tn__promote_types(a, b) == promote_dim_golden[a][b],
				      "promote_types(%s, %s)", tn_dtype_name(a), tn_dtype_name(b));
			ck_assert_msg((int)result_type(ta, tb, false) == promote_dim_golden[a][b],
				      "%s + %s", tn_dtype_name(a), tn_dtype_name(b));
			ck_assert_msg((int)result_type(ta, zb, false) == promote_zero_golden[a][b],
				      "%s + 0-dim %s", tn_dtype_name(a), tn_dtype_name(b));
			ck_assert_msg((int)result_type(za, zb, false) ==
					      promote_zero_zero_golden[a][b],
				      "0-dim %s + 0-dim %s", tn_dtype_name(a), tn_dtype_name(b));
			tn_tensor_unref(ta);
			tn_tensor_unref(tb);
			tn_tensor_unref(za);
			tn_tensor_unref(zb);
		}
		/* Python numbers: bool, int, float, wrapped as 0-dim bool, int64, float64. */
		static const enum tn_dtype wrapped[] = { TN_BOOL, TN_INT64, TN_FLOAT64 };
		for (int k = 0; k < 3; k++) {
			tn_tensor *ta, *w;
			ck_assert_tn_ok(tn_ones(1, &two, a, TN_CPU, &ta));
			ck_assert_tn_ok(tn_ones(0, NULL, wrapped[k], TN_CPU, &w));
			ck_assert_msg((int)result_type(ta, w, true) == promote_wrapped_golden[a][k],
				      "%s + python %d", tn_dtype_name(a), k);
			tn_tensor_unref(ta);
			tn_tensor_unref(w);
		}
	}
}
END_TEST

START_TEST(test_broadcast_and_errors)
{
	int64_t s23[] = { 2, 3 }, s24[] = { 2, 4 }, s3[] = { 3 }, s413[] = { 4, 1, 3 };
	tn_tensor *a = arange_f(2, s23, TN_FLOAT32), *b = arange_f(2, s24, TN_FLOAT32);
	tn_tensor *r = arange_f(1, s3, TN_FLOAT32), *c = arange_f(3, s413, TN_FLOAT32);
	struct tn_iter it;
	struct tn_iter_config cfg = binary_cfg(NULL, a, b);
	ck_assert_tn_error(tn__iter_build(&it, &cfg, "add"), TN_EINVAL,
			   "The size of tensor a (3) must match the size of tensor b (4) at "
			   "non-singleton dimension 1");
	cfg = binary_cfg(NULL, a, c);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add"));
	ck_assert_int_eq(it.out_ndim, 3);
	ck_assert_int_eq(it.out_shape[0], 4);
	ck_assert_int_eq(it.out_shape[1], 2);
	ck_assert_int_eq(it.out_shape[2], 3);
	tn_tensor *out = tn__iter_output(&it, 0);
	ck_assert_int_eq(tn_tensor_ndim(out), 3);
	ck_assert(tn_tensor_is_contiguous(out));
	tn_tensor_unref(out);
	tn__iter_release(&it);
	/* An out= tensor of the wrong shape is refused (PyTorch would resize it). */
	cfg = binary_cfg(b, a, r);
	ck_assert_tn_error_has(tn__iter_build(&it, &cfg, "add"), TN_EINVAL,
			       "output with shape [2, 4] doesn't match the broadcast shape [2, 3]");
	/* Unsafe cast to an out= tensor. */
	tn_tensor *li;
	ck_assert_tn_ok(tn_zeros(2, s23, TN_INT64, TN_CPU, &li));
	cfg = binary_cfg(li, a, a);
	ck_assert_tn_error(tn__iter_build(&it, &cfg, "add"), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	/* Without promotion, mixed dtypes are refused. */
	struct tn_iter_config plain;
	tn__iter_config_init(&plain);
	plain.noutputs = 1;
	plain.ninputs = 2;
	plain.tensors[1] = a;
	plain.tensors[2] = li;
	ck_assert_tn_error(tn__iter_build(&it, &plain, "add"), TN_EINVAL,
			   "Found dtype Long but expected Float");
	tn_tensor *list[] = { a, b, r, c, li };
	for (size_t i = 0; i < 5; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

START_TEST(test_overlap_errors)
{
	int64_t s6[] = { 6 }, s23[] = { 2, 3 };
	tn_tensor *x = arange_f(1, s6, TN_FLOAT32), *lo, *hi, *row, *ex;
	struct tn_iter it;
	ck_assert_tn_ok(tn_narrow(x, 0, 0, 4, &lo));
	ck_assert_tn_ok(tn_narrow(x, 0, 2, 4, &hi));
	struct tn_iter_config cfg = binary_cfg(hi, lo, lo);
	ck_assert_tn_error(tn__iter_build(&it, &cfg, "add"), TN_EINVAL,
			   "unsupported operation: some elements of the input tensor and the "
			   "written-to tensor refer to a single memory location. Please clone() the "
			   "tensor before performing the operation.");
	ck_assert_tn_ok(tn_narrow(x, 0, 0, 3, &row));
	ck_assert_tn_ok(tn_expand(row, 2, s23, &ex));
	tn_tensor *src = arange_f(2, s23, TN_FLOAT32);
	cfg = binary_cfg(ex, src, src);
	ck_assert_tn_error(tn__iter_build(&it, &cfg, "add"), TN_EINVAL,
			   "unsupported operation: more than one element of the written-to tensor "
			   "refers to a single memory location. Please clone() the tensor before "
			   "performing the operation.");
	/* In place (the output is an input) is fine and marked read-write. */
	cfg = binary_cfg(lo, lo, lo);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add_"));
	ck_assert(it.ops[0].is_read_write);
	tn__iter_release(&it);
	/* The same through copy_. */
	ck_assert_tn_error_has(tn_copy_(hi, lo, false), TN_EINVAL, "some elements of the input");
	ck_assert_tn_error_has(tn_copy_(ex, src, false), TN_EINVAL, "more than one element");
	tn_tensor *list[] = { x, lo, hi, row, ex, src };
	for (size_t i = 0; i < 6; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

START_TEST(test_output_layout_follows_inputs)
{
	int64_t s234[] = { 2, 3, 4 }, perm[] = { 2, 0, 1 }, nchw[] = { 2, 3, 4, 5 };
	tn_tensor *a = arange_f(3, s234, TN_FLOAT32), *p, *out;
	struct tn_iter it;
	ck_assert_tn_ok(tn_permute(a, 3, perm, &p)); /* sizes [4, 2, 3], strides [1, 12, 4] */
	struct tn_iter_config cfg = binary_cfg(NULL, p, p);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add"));
	out = tn__iter_output(&it, 0);
	ck_assert_int_eq(tn_tensor_strides(out)[0], 1);
	ck_assert_int_eq(tn_tensor_strides(out)[1], 12);
	ck_assert_int_eq(tn_tensor_strides(out)[2], 4);
	ck_assert_int_eq(it.ndim, 1); /* dense in the same order: one dimension */
	tn_tensor_unref(out);
	tn__iter_release(&it);
	/* channels-last in, channels-last out */
	tn_tensor *x, *cl;
	ck_assert_tn_ok(tn_zeros(4, nchw, TN_FLOAT32, TN_CPU, &x));
	ck_assert_tn_ok(tn_contiguous(x, TN_CHANNELS_LAST, &cl));
	cfg = binary_cfg(NULL, cl, cl);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add"));
	out = tn__iter_output(&it, 0);
	ck_assert(tn_tensor_is_contiguous_as(out, TN_CHANNELS_LAST));
	tn_tensor_unref(out);
	tn__iter_release(&it);
	/* A transposed input with a contiguous one: the written output's order wins ties. */
	tn_tensor *t, *c2;
	int64_t s34[] = { 3, 4 }, s43[] = { 4, 3 };
	tn_tensor *m = arange_f(2, s43, TN_FLOAT32);
	ck_assert_tn_ok(tn_transpose(m, 0, 1, &t));
	c2 = arange_f(2, s34, TN_FLOAT32);
	cfg = binary_cfg(NULL, t, t);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add"));
	out = tn__iter_output(&it, 0);
	ck_assert_int_eq(tn_tensor_strides(out)[0], 1); /* transposed like its inputs */
	tn_tensor_unref(out);
	tn__iter_release(&it);
	tn_tensor *list[] = { a, p, x, cl, t, c2, m };
	for (size_t i = 0; i < 7; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* Count visits: each element's int32 counter goes up by one. */
static void count_loop(void *ctx, char **data, const int64_t *strides, int64_t n0, int64_t n1)
{
	atomic_long *calls = ctx;
	atomic_fetch_add(calls, 1);
	for (int64_t j = 0; j < n1; j++)
		for (int64_t i = 0; i < n0; i++)
			(*(int32_t *)(data[0] + j * strides[1] + i * strides[0]))++; /* one operand */
}

static void check_all_ones(const tn_tensor *t)
{
	tn_tensor *c;
	ck_assert_tn_ok(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c));
	const int32_t *p = tn_tensor_data(c);
	for (int64_t i = 0; i < tn_tensor_numel(c); i++)
		ck_assert_msg(p[i] == 1, "element %lld visited %d times", (long long)i, p[i]);
	tn_tensor_unref(c);
}

START_TEST(test_serial_ranges_visit_each_element_once)
{
	int64_t s[] = { 5, 7, 3, 4 }, perm[] = { 3, 1, 0, 2 };
	tn_tensor *base, *v, *sl;
	ck_assert_tn_ok(tn_zeros(4, s, TN_INT32, TN_CPU, &base));
	ck_assert_tn_ok(tn_permute(base, 4, perm, &v));
	ck_assert_tn_ok(tn_slice(v, 1, 0, INT64_MAX, 2, &sl)); /* not coalescible */
	struct tn_iter_config cfg;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.tensors[0] = sl;
	cfg.has_static_dtype = true;
	cfg.static_dtype = TN_INT32;
	struct tn_iter it;
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "test"));
	ck_assert_int_ge(it.ndim, 2);
	/* Split the range at awkward points: each piece starts mid-row. */
	int64_t cuts[] = { 0, 1, 6, 13, 50, 51, 100, it.numel };
	atomic_long calls = 0;
	for (size_t k = 0; k + 1 < sizeof(cuts) / sizeof(cuts[0]); k++)
		tn__iter_serial_for_each(&it, count_loop, &calls, cuts[k], cuts[k + 1]);
	check_all_ones(sl);
	tn__iter_release(&it);
	tn_tensor_unref(sl);
	tn_tensor_unref(v);
	tn_tensor_unref(base);
}
END_TEST

START_TEST(test_parallel_for_each)
{
	int64_t s[] = { 300, 1001 };
	tn_tensor *t, *tt;
	ck_assert_tn_ok(tn_zeros(2, s, TN_INT32, TN_CPU, &t));
	ck_assert_tn_ok(tn_transpose(t, 0, 1, &tt));
	struct tn_iter_config cfg;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.tensors[0] = tt;
	struct tn_iter it;
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "test"));
	atomic_long calls = 0;
	tn__iter_for_each(&it, count_loop, &calls, TN_GRAIN_SIZE);
	check_all_ones(t);
	if (tn__num_threads() > 1)
		ck_assert_int_ge(atomic_load(&calls), 2);
	tn__iter_release(&it);
	tn_tensor_unref(tt);
	tn_tensor_unref(t);
}
END_TEST

START_TEST(test_zero_dim_and_empty)
{
	tn_tensor *z, *e, *out;
	int64_t s0[] = { 0, 3 };
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_double(2.5), NULL, TN_CPU, &z));
	ck_assert_tn_ok(tn_zeros(2, s0, TN_FLOAT64, TN_CPU, &e));
	struct tn_iter it;
	struct tn_iter_config cfg = binary_cfg(NULL, z, z);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add"));
	ck_assert_int_eq(it.ndim, 0);
	ck_assert_int_eq(it.numel, 1);
	atomic_long calls = 0;
	tn__iter_release(&it);
	cfg = binary_cfg(NULL, e, z);
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "add"));
	ck_assert_int_eq(it.numel, 0);
	tn__iter_for_each(&it, count_loop, &calls, TN_GRAIN_SIZE);
	ck_assert_int_eq(atomic_load(&calls), 0);
	out = tn__iter_output(&it, 0);
	ck_assert_int_eq(tn_tensor_dtype(out), TN_FLOAT64);
	ck_assert_int_eq(tn_tensor_sizes(out)[0], 0);
	tn_tensor_unref(out);
	tn__iter_release(&it);
	tn_tensor_unref(z);
	tn_tensor_unref(e);
}
END_TEST

/* Reduction mode: the input gives the shape, the keepdim-shaped output broadcasts with stride 0
 * along the reduced dims, which come first (fastest) and coalesce only among themselves. */
START_TEST(test_reduction_mode)
{
	int64_t s[] = { 4, 5, 6 }, ks[] = { 4, 1, 1 }, kt[] = { 4, 1, 6 }, bad[] = { 4, 2, 1 };
	tn_tensor *x = arange_f(3, s, TN_FLOAT32), *o, *ot, *ob;
	ck_assert_tn_ok(tn_zeros(3, ks, TN_FLOAT64, TN_CPU, &o));
	ck_assert_tn_ok(tn_zeros(3, kt, TN_FLOAT32, TN_CPU, &ot));
	ck_assert_tn_ok(tn_zeros(3, bad, TN_FLOAT32, TN_CPU, &ob));
	struct tn_iter_config cfg;
	tn__iter_config_init(&cfg);
	cfg.noutputs = 1;
	cfg.ninputs = 1;
	cfg.tensors[0] = o;
	cfg.tensors[1] = x;
	cfg.check_all_same_dtype = false;
	cfg.resize_outputs = false;
	cfg.is_reduction = true;
	struct tn_iter it;
	/* Dims 1 and 2 reduced: one run of 30 reduced elements, then the 4 outputs. */
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "sum"));
	ck_assert_int_eq(it.numel, 120);
	ck_assert_int_eq(it.ndim, 2);
	ck_assert_int_eq(it.shape[0], 30);
	ck_assert_int_eq(it.shape[1], 4);
	ck_assert_int_eq(it.ops[0].strides[0], 0);
	ck_assert_int_eq(it.ops[0].strides[1], 8);
	ck_assert_int_eq(it.ops[1].strides[0], 4);
	ck_assert_int_eq(it.ops[1].strides[1], 120);
	tn__iter_release(&it);
	/* The middle dim reduced: it moves first, and dims 0 and 2 stay apart from it. */
	cfg.tensors[0] = ot;
	ck_assert_tn_ok(tn__iter_build(&it, &cfg, "sum"));
	ck_assert_int_eq(it.ndim, 3);
	ck_assert_int_eq(it.shape[0], 5);
	ck_assert_int_eq(it.ops[0].strides[0], 0);
	ck_assert_int_eq(it.ops[1].strides[0], 24);
	ck_assert_int_eq(it.shape[1], 6);
	ck_assert_int_eq(it.ops[0].strides[1], 4);
	ck_assert_int_eq(it.shape[2], 4);
	tn__iter_release(&it);
	/* An output that is not the input's shape with ones is refused; so is none. */
	cfg.tensors[0] = ob;
	ck_assert_tn_error(tn__iter_build(&it, &cfg, "sum"), TN_EINVAL,
			   "output with shape [4, 2, 1] doesn't match the reduction of shape "
			   "[4, 5, 6]");
	cfg.tensors[0] = NULL;
	ck_assert_tn_error(tn__iter_build(&it, &cfg, "sum"), TN_EINVAL,
			   "a reduction's output 0 must be given");
	tn_tensor *list[] = { x, o, ot, ob };
	for (size_t i = 0; i < 4; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

static void sum_range(void *ctx, int64_t b, int64_t e, int tid)
{
	atomic_long *sums = ctx;
	ck_assert_int_lt(tid, 4);
	for (int64_t i = b; i < e; i++)
		atomic_fetch_add(&sums[tid], i);
}

/* tn__parallel_for covers [0, n) once, in ranges by thread number. */
START_TEST(test_parallel_for_ranges)
{
	atomic_long sums[4] = { 0 };
	int used = tn__parallel_for(1000, 4, sum_range, sums);
	ck_assert_int_ge(used, 1);
	long total = 0;
	for (int t = 0; t < 4; t++)
		total += atomic_load(&sums[t]);
	ck_assert_int_eq(total, 999 * 1000 / 2);
	/* Fewer items than threads: no empty range runs. */
	atomic_long one[4] = { 0 };
	tn__parallel_for(1, 4, sum_range, one);
	ck_assert_int_eq(atomic_load(&one[0]), 0);
}
END_TEST

/* copy_ from each dtype into each dtype: PyTorch's values. */
START_TEST(test_copy_casts_match_pytorch)
{
	int64_t n = CAST_NVALS;
	tn_tensor *f64;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f64));
	memcpy(tn_tensor_data(f64), cast_values, sizeof(cast_values));
	for (int s = 0; s < TN_NUM_DTYPES; s++) {
		tn_tensor *src;
		ck_assert_tn_ok(tn_empty(1, &n, s, TN_CPU, TN_CONTIGUOUS_FORMAT, &src));
		ck_assert_tn_ok(tn_copy_(src, f64, false));
		for (int d = 0; d < TN_NUM_DTYPES; d++) {
			tn_tensor *dst, *back;
			ck_assert_tn_ok(tn_empty(1, &n, d, TN_CPU, TN_CONTIGUOUS_FORMAT, &dst));
			ck_assert_tn_ok(tn_copy_(dst, src, false));
			ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &back));
			ck_assert_tn_ok(tn_copy_(back, dst, false));
			const double *got = tn_tensor_data(back);
			for (int i = 0; i < CAST_NVALS; i++)
				ck_assert_msg(got[i] == cast_golden[s][d][i],
					      "%s -> %s: value %g gives %g, PyTorch %g",
					      tn_dtype_name(s), tn_dtype_name(d), cast_values[i], got[i],
					      cast_golden[s][d][i]);
			tn_tensor_unref(dst);
			tn_tensor_unref(back);
		}
		tn_tensor_unref(src);
	}
	tn_tensor_unref(f64);
}
END_TEST

START_TEST(test_copy_strided_broadcast_parallel)
{
	/* A transposed int32 source broadcast into a strided float64 slice, past the grain. */
	int64_t s[] = { 257, 301 }, big[] = { 3, 301, 514 };
	tn_tensor *src = arange_f(2, s, TN_INT32), *srct, *base, *dst;
	ck_assert_tn_ok(tn_transpose(src, 0, 1, &srct)); /* [301, 257] */
	ck_assert_tn_ok(tn_zeros(3, big, TN_FLOAT64, TN_CPU, &base));
	ck_assert_tn_ok(tn_slice(base, 2, 1, INT64_MAX, 2, &dst)); /* [3, 301, 257], stride 2 */
	ck_assert_tn_ok(tn_copy_(dst, srct, false));
	for (int64_t k = 0; k < 3; k++)
		for (int64_t i = 0; i < 301; i += 7)
			for (int64_t j = 0; j < 257; j += 5) {
				int64_t idx[] = { k, i, j };
				ck_assert_double_eq(tn_test_get_double(dst, idx), (double)(j * 301 + i));
				int64_t hole[] = { k, i, 2 * j };
				ck_assert_double_eq(tn_test_get_double(base, hole), 0.0);
			}
	/* The source does not fit: PyTorch's message. */
	int64_t s2[] = { 2, 3 };
	tn_tensor *small = arange_f(2, s2, TN_FLOAT32);
	ck_assert_tn_error(tn_copy_(small, srct, false), TN_EINVAL,
			   "The size of tensor a (3) must match the size of tensor b (257) at "
			   "non-singleton dimension 1");
	int64_t s3[] = { 3 };
	tn_tensor *vec3 = arange_f(1, s3, TN_FLOAT32);
	ck_assert_tn_error(tn_copy_(vec3, small, false), TN_EINVAL,
			   "output with shape [3] doesn't match the broadcast shape [2, 3]");
	tn_tensor_unref(vec3);
	tn_tensor *list[] = { src, srct, base, dst, small };
	for (size_t i = 0; i < 5; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

START_TEST(test_copy_under_each_capability)
{
	tn_test_force_capability(_i);
	/* The cast table and a strided copy, in this process's kernel variant. */
	int64_t n = CAST_NVALS;
	tn_tensor *f64, *f32, *i8;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f64));
	memcpy(tn_tensor_data(f64), cast_values, sizeof(cast_values));
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &f32));
	ck_assert_tn_ok(tn_empty(1, &n, TN_INT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &i8));
	ck_assert_tn_ok(tn_copy_(f32, f64, false));
	ck_assert_tn_ok(tn_copy_(i8, f32, false));
	const int8_t *p = tn_tensor_data(i8);
	for (int i = 0; i < CAST_NVALS; i++)
		ck_assert_int_eq(p[i], (int8_t)cast_golden[8][2][i]);
	tn_tensor_unref(f64);
	tn_tensor_unref(f32);
	tn_tensor_unref(i8);
}
END_TEST

/* The [2, 3] operand arith_a laid out transposed in memory: a [3, 2] tensor holding its
 * transpose, and (in *ret_view) the [2, 3] transposed view of it, with the values of arith_a. */
static tn_tensor *transposed_a(enum tn_dtype dtype, tn_tensor **ret_view)
{
	int64_t s32[] = { 3, 2 };
	double at[6];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			at[j * 2 + i] = arith_a[i * 3 + j];
	tn_tensor *mem = tn_test_from_values(at, 2, s32, dtype);
	ck_assert_tn_ok(tn_transpose(mem, 0, 1, ret_view));
	return mem;
}

static void assert_values(const tn_tensor *t, const double *want, int n, const char *what)
{
	tn_tensor *f64;
	ck_assert_tn_ok(tn_empty(tn_tensor_ndim(t), tn_tensor_sizes(t), TN_FLOAT64, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &f64));
	ck_assert_tn_ok(tn_copy_(f64, t, false));
	const double *got = tn_tensor_data(f64);
	for (int i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i] || (got[i] != got[i] && want[i] != want[i]),
			      "%s: element %d is %.17g, PyTorch %.17g", what, i, got[i], want[i]);
	tn_tensor_unref(f64);
}

static int arith(int op, const tn_tensor *a, const tn_tensor *b, tn_scalar alpha, tn_tensor **r)
{
	switch (op) {
	case 0:
		return tn_add(a, b, alpha, r);
	case 1:
		return tn_sub(a, b, tn_scalar_int(1), r);
	case 2:
		return tn_mul(a, b, r);
	default:
		return tn_div(a, b, r);
	}
}

static int arith_out(int op, const tn_tensor *a, const tn_tensor *b, tn_scalar alpha,
		     tn_tensor *out)
{
	switch (op) {
	case 0:
		return tn_add_out(a, b, alpha, out);
	case 1:
		return tn_sub_out(a, b, tn_scalar_int(1), out);
	case 2:
		return tn_mul_out(a, b, out);
	default:
		return tn_div_out(a, b, out);
	}
}

/* Every dtype pair of add/sub/mul/div against PyTorch: contiguous, with the left operand
 * transposed in memory, and into an out= tensor of the result dtype. */
START_TEST(test_arith_matches_pytorch)
{
	static const char *names[] = { "add", "sub", "mul", "div" };
	int64_t s23[] = { 2, 3 }, s3[] = { 3 };
	for (int g = 0; g < ARITH_NGOLDEN; g++) {
		const struct arith_golden *G = &arith_golden[g];
		char what[96];
		snprintf(what, sizeof(what), "%s(%s, %s)", names[G->op], tn_dtype_name(G->a),
			 tn_dtype_name(G->b));
		tn_tensor *a = tn_test_from_values(arith_a, 2, s23, G->a);
		tn_tensor *b = tn_test_from_values(arith_b, 1, s3, G->b);
		tn_tensor *a_t, *r = NULL, *a_mem = transposed_a(G->a, &a_t);
		tn_scalar alpha = tn_scalar_int(G->a == TN_BOOL && G->b == TN_BOOL ? 1 : 2);
		int rc = arith(G->op, a, b, alpha, &r);
		if (!G->ok) {
			ck_assert_msg(rc == TN_EINVAL, "%s: PyTorch refuses, libtensor gave %d", what,
				      rc);
		} else {
			ck_assert_msg(rc == 0, "%s failed: %s", what, tn_last_error());
			ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)G->dtype, "%s: dtype %s, PyTorch %s", what,
				      tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(G->dtype));
			assert_values(r, G->v, 6, what);
			tn_tensor_unref(r);
			ck_assert_tn_ok(arith(G->op, a_t, b, alpha, &r));
			ck_assert_int_eq(tn_tensor_strides(r)[0], 1); /* laid out like a_t */
			assert_values(r, G->v, 6, what);
			tn_tensor_unref(r);
			tn_tensor *out;
			ck_assert_tn_ok(tn_zeros(2, s23, G->dtype, TN_CPU, &out));
			ck_assert_tn_ok(arith_out(G->op, a_t, b, alpha, out));
			assert_values(out, G->v, 6, what);
			tn_tensor_unref(out);
		}
		tn_tensor_unref(a);
		tn_tensor_unref(b);
		tn_tensor_unref(a_mem);
		tn_tensor_unref(a_t);
	}
	/* With a Python number on the right. */
	for (int g = 0; g < ARITH_SCALAR_NGOLDEN; g++) {
		const struct arith_scalar_golden *G = &arith_scalar_golden[g];
		tn_scalar num = G->k == 0 ? tn_scalar_bool(true)
				: G->k == 1 ? tn_scalar_int(3)
					    : tn_scalar_double(2.5);
		char what[96];
		snprintf(what, sizeof(what), "%s(%s, number %d)", names[G->op], tn_dtype_name(G->a),
			 G->k);
		tn_tensor *a = tn_test_from_values(arith_a, 2, s23, G->a), *r = NULL;
		int rc = G->op == 0   ? tn_add_scalar(a, num, tn_scalar_int(1), &r)
			 : G->op == 1 ? tn_sub_scalar(a, num, tn_scalar_int(1), &r)
			 : G->op == 2 ? tn_mul_scalar(a, num, &r)
				      : tn_div_scalar(a, num, &r);
		if (!G->ok) {
			ck_assert_msg(rc == TN_EINVAL, "%s: PyTorch refuses, libtensor gave %d", what,
				      rc);
		} else {
			ck_assert_msg(rc == 0, "%s failed: %s", what, tn_last_error());
			ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)G->dtype, "%s: dtype %s, PyTorch %s", what,
				      tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(G->dtype));
			assert_values(r, G->v, 6, what);
			tn_tensor_unref(r);
		}
		tn_tensor_unref(a);
	}
}
END_TEST

/* Past the grain size (parallel), mixed int32 + float32 (chunked casts), a transposed
 * operand and an out= of another dtype (cast back), under each CPU capability. */
START_TEST(test_arith_large_under_each_capability)
{
	tn_test_force_capability(_i);
	int64_t s[] = { 311, 257 }, row[] = { 311 };
	tn_tensor *ai = arange_f(2, s, TN_INT32), *ait, *b, *r, *out64;
	ck_assert_tn_ok(tn_transpose(ai, 0, 1, &ait)); /* [257, 311] */
	tn_tensor *b_mem = arange_f(1, row, TN_FLOAT32);
	ck_assert_tn_ok(tn_mul_scalar(b_mem, tn_scalar_double(0.25), &b));
	ck_assert_tn_ok(tn_add(ait, b, tn_scalar_int(1), &r));
	ck_assert_int_eq(tn_tensor_dtype(r), TN_FLOAT32);
	ck_assert_tn_ok(tn_empty(2, (int64_t[]){ 257, 311 }, TN_FLOAT64, TN_CPU,
				 TN_CONTIGUOUS_FORMAT, &out64));
	ck_assert_tn_ok(tn_sub_out(ait, b, tn_scalar_int(2), out64));
	for (int64_t i = 0; i < 257; i += 3)
		for (int64_t j = 0; j < 311; j += 7) {
			int64_t idx[] = { i, j };
			float x = (float)(j * 257 + i), y = (float)j * 0.25f;
			ck_assert_double_eq(tn_test_get_double(r, idx), (double)(x + y));
			ck_assert_double_eq(tn_test_get_double(out64, idx), (double)(x - 2.0f * y));
		}
	tn_tensor *list[] = { ai, ait, b, b_mem, r, out64 };
	for (size_t i = 0; i < 6; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

typedef int (*cmp_fn)(const tn_tensor *, const tn_tensor *, tn_tensor **);
typedef int (*cmp_scalar_fn)(const tn_tensor *, tn_scalar, tn_tensor **);
typedef int (*cmp_out_fn)(const tn_tensor *, const tn_tensor *, tn_tensor *);

static void assert_bools(const tn_tensor *t, const unsigned char *want, const char *what)
{
	ck_assert_int_eq(tn_tensor_dtype(t), TN_BOOL);
	tn_tensor *c;
	ck_assert_tn_ok(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c));
	const bool *p = tn_tensor_data(c);
	for (int i = 0; i < 6; i++)
		ck_assert_msg(p[i] == (bool)want[i], "%s: element %d", what, i);
	tn_tensor_unref(c);
}

/* Every comparison for every dtype pair against PyTorch, with a transposed left operand,
 * into an int64 out= tensor, against numbers, and with NaN. */
START_TEST(test_compare_matches_pytorch)
{
	static const char *names[] = { "eq", "ne", "lt", "le", "gt", "ge" };
	static const cmp_fn fns[] = { tn_eq, tn_ne, tn_lt, tn_le, tn_gt, tn_ge };
	static const cmp_scalar_fn sfns[] = { tn_eq_scalar, tn_ne_scalar, tn_lt_scalar,
					      tn_le_scalar, tn_gt_scalar, tn_ge_scalar };
	static const cmp_out_fn ofns[] = { tn_eq_out, tn_ne_out, tn_lt_out,
					   tn_le_out, tn_gt_out, tn_ge_out };
	int64_t s23[] = { 2, 3 }, s3[] = { 3 };
	for (int g = 0; g < CMP_NGOLDEN; g++) {
		const struct cmp_golden *G = &cmp_golden[g];
		char what[96];
		snprintf(what, sizeof(what), "%s(%s, %s)", names[G->op], tn_dtype_name(G->a),
			 tn_dtype_name(G->b));
		tn_tensor *a = tn_test_from_values(arith_a, 2, s23, G->a),
			  *b = tn_test_from_values(cmp_b, 1, s3, G->b);
		tn_tensor *a_t, *r, *o, *a_mem = transposed_a(G->a, &a_t);
		ck_assert_msg(fns[G->op](a, b, &r) == 0, "%s: %s", what, tn_last_error());
		assert_bools(r, G->v, what);
		tn_tensor_unref(r);
		ck_assert_tn_ok(fns[G->op](a_t, b, &r));
		assert_bools(r, G->v, what);
		tn_tensor_unref(r);
		ck_assert_tn_ok(tn_empty(2, s23, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &o));
		ck_assert_tn_ok(ofns[G->op](a_t, b, o));
		for (int i = 0; i < 6; i++)
			ck_assert_int_eq(((const int64_t *)tn_tensor_data(o))[i], G->v[i]);
		tn_tensor *list[] = { a, b, a_mem, a_t, o };
		for (size_t i = 0; i < 5; i++)
			tn_tensor_unref(list[i]);
	}
	for (int g = 0; g < CMP_SCALAR_NGOLDEN; g++) {
		const struct cmp_scalar_golden *G = &cmp_scalar_golden[g];
		tn_scalar num = G->k == 0 ? tn_scalar_bool(true)
				: G->k == 1 ? tn_scalar_int(2)
					    : tn_scalar_double(2.5);
		char what[96];
		snprintf(what, sizeof(what), "%s(%s, number %d)", names[G->op], tn_dtype_name(G->a),
			 G->k);
		tn_tensor *a = tn_test_from_values(arith_a, 2, s23, G->a), *r;
		ck_assert_msg(sfns[G->op](a, num, &r) == 0, "%s: %s", what, tn_last_error());
		assert_bools(r, G->v, what);
		tn_tensor_unref(r);
		tn_tensor_unref(a);
	}
	/* NaN: unequal to everything, no order holds. */
	double nanv[] = { NAN, 1.0, NAN, 2.0, NAN, 0.0 }, other[] = { NAN, NAN, 1.0 };
	tn_tensor *x = tn_test_from_values(nanv, 2, s23, TN_FLOAT32),
		  *y = tn_test_from_values(other, 1, s3, TN_FLOAT64);
	static const unsigned char want[6][6] = {
		{ 0, 0, 0, 0, 0, 0 }, { 1, 1, 1, 1, 1, 1 }, { 0, 0, 0, 0, 0, 1 },
		{ 0, 0, 0, 0, 0, 1 }, { 0, 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0 },
	};
	for (int op = 0; op < 6; op++) {
		tn_tensor *r;
		ck_assert_tn_ok(fns[op](x, y, &r));
		assert_bools(r, want[op], names[op]);
		tn_tensor_unref(r);
	}
	tn_tensor_unref(x);
	tn_tensor_unref(y);
}
END_TEST

typedef int (*unary_fn)(const tn_tensor *, tn_tensor **);

/* Every unary function on every dtype against PyTorch: the result dtype, the refusals, and
 * the values (exact for the exact functions; transcendental ones within 4 ulps of float32,
 * 2 of float64, 1 of the 16-bit floats: the C library's and PyTorch's vectorised versions
 * may differ in the last bit). In place and out= forms give the same values. */
START_TEST(test_unary_matches_pytorch)
{
	static const char *names[] = { "neg", "abs", "sign", "exp", "expm1", "log", "log1p", "log2",
				       "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
				       "relu", "erf", "floor", "ceil", "round", "trunc",
				       "reciprocal" };
	static const unary_fn fns[] = { tn_neg, tn_abs, tn_sign, tn_exp, tn_expm1, tn_log,
					tn_log1p, tn_log2, tn_sqrt, tn_rsqrt, tn_sin, tn_cos,
					tn_tan, tn_tanh, tn_sigmoid, tn_relu, tn_erf, tn_floor,
					tn_ceil, tn_round, tn_trunc, tn_reciprocal };
	static const bool exact[] = { 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1 };
	int64_t n = UN_NVALS;
	for (int g = 0; g < UNARY_NGOLDEN; g++) {
		const struct unary_golden *G = &unary_golden[g];
		enum tn_dtype dt = (enum tn_dtype)G->dtype;
		const double *in = tn_dtype_is_floating(dt) ? unary_fvals : unary_ivals;
		char what[96];
		snprintf(what, sizeof(what), "%s(%s)", names[G->op], tn_dtype_name(dt));
		tn_tensor *a = tn_test_from_values(in, 1, &n, dt), *r = NULL;
		int rc = fns[G->op](a, &r);
		if (!G->ok) {
			ck_assert_msg(rc == TN_EINVAL, "%s: PyTorch refuses, libtensor gave %d", what, rc);
			tn_tensor_unref(a);
			continue;
		}
		ck_assert_msg(rc == 0, "%s failed: %s", what, tn_last_error());
		ck_assert_msg(tn_tensor_dtype(r) == (enum tn_dtype)G->rdtype, "%s: dtype %s, PyTorch %s",
			      what, tn_dtype_name(tn_tensor_dtype(r)), tn_dtype_name(G->rdtype));
		tn_tensor *f64;
		ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f64));
		ck_assert_tn_ok(tn_copy_(f64, r, false));
		const double *got = tn_tensor_data(f64);
		/* 16-bit results may round twice on either side (PyTorch's kernels for them
		 * differ by op): 1 ulp, even for the exact functions. */
		enum tn_dtype rd = tn_tensor_dtype(r);
		bool narrow = rd == TN_FLOAT16 || rd == TN_BFLOAT16;
		double tol = !tn_dtype_is_floating(rd) ? 0
			     : narrow			? 1
			     : exact[G->op]		? 0
			     : rd == TN_FLOAT32		? 4
							: 2;
		for (int i = 0; i < UN_NVALS; i++) {
			double d = tn_dtype_is_floating(tn_tensor_dtype(r))
					   ? tn_test_ulps(got[i], G->v[i], tn_tensor_dtype(r))
					   : (got[i] == G->v[i] ? 0 : 1e9);
			ck_assert_msg(d <= tol, "%s: input %g gives %.17g, PyTorch %.17g (%g ulps)", what,
				      in[i], got[i], G->v[i], d);
		}
		tn_tensor_unref(f64);
		tn_tensor_unref(r);
		tn_tensor_unref(a);
	}
	/* In place and out=, on a float32 tensor: the functional result. */
	tn_tensor *x = tn_test_from_values(unary_fvals, 1, &n, TN_FLOAT32), *y, *o;
	ck_assert_tn_ok(tn_exp(x, &y));
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &o));
	ck_assert_tn_ok(tn_exp_out(x, o));
	ck_assert_tn_ok(tn_exp_(x));
	for (int64_t i = 0; i < n; i++) {
		double a = tn_test_get_double(x, &i), b = tn_test_get_double(y, &i),
		       c = tn_test_get_double(o, &i);
		ck_assert(a == b || (a != a && b != b));
		ck_assert(b == c || (b != b && c != c));
	}
	tn_tensor *xi = tn_test_from_values(unary_ivals, 1, &n, TN_INT64);
	ck_assert_tn_error(tn_exp_(xi), TN_EINVAL,
			   "result type Float can't be cast to the desired output type Long");
	tn_tensor *list[] = { x, y, o, xi };
	for (size_t i = 0; i < 4; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* Transposing copies take the tiled path (4- and 2-byte elements: blocks transposed in
 * registers): every element lands, for shapes that are not multiples of the tile or of the
 * register block, and for the NHWC -> NCHW permute with few channels, under each CPU
 * capability. */
START_TEST(test_transposing_copies)
{
	tn_test_force_capability(_i);
	int64_t sides[][2] = { { 8, 8 }, { 5, 3 }, { 16, 24 }, { 33, 17 } };
	for (size_t k = 0; k < sizeof(sides) / sizeof(sides[0]); k++) {
		tn_tensor *m = arange_f(2, sides[k], TN_FLOAT32), *mt, *mc;
		ck_assert_tn_ok(tn_transpose(m, 0, 1, &mt));
		ck_assert_tn_ok(tn_contiguous(mt, TN_CONTIGUOUS_FORMAT, &mc));
		const float *pm = tn_tensor_data(mc);
		for (int64_t i = 0; i < sides[k][1]; i++)
			for (int64_t j = 0; j < sides[k][0]; j++)
				ck_assert_float_eq(pm[i * sides[k][0] + j],
						   (float)(j * sides[k][1] + i));
		tn_tensor_unref(m);
		tn_tensor_unref(mt);
		tn_tensor_unref(mc);
	}
	int64_t s[] = { 517, 300 }, nhwc[] = { 2, 37, 41, 3 }, perm[] = { 0, 3, 1, 2 };
	tn_tensor *a = arange_f(2, s, TN_INT32), *t, *c;
	ck_assert_tn_ok(tn_transpose(a, 0, 1, &t));
	ck_assert_tn_ok(tn_contiguous(t, TN_CONTIGUOUS_FORMAT, &c));
	const int32_t *p = tn_tensor_data(c);
	for (int64_t i = 0; i < 300; i++)
		for (int64_t j = 0; j < 517; j++)
			ck_assert_int_eq(p[i * 517 + j], (int32_t)(j * 300 + i));
	for (int64_t C = 3; C <= 16; C += 13) {
		nhwc[3] = C;
		tn_tensor *x = arange_f(4, nhwc, TN_FLOAT32), *xp, *xc;
		ck_assert_tn_ok(tn_permute(x, 4, perm, &xp));
		ck_assert_tn_ok(tn_contiguous(xp, TN_CONTIGUOUS_FORMAT, &xc));
		const float *q = tn_tensor_data(xc);
		for (int64_t n = 0; n < 2; n++)
			for (int64_t ch = 0; ch < C; ch++)
				for (int64_t h = 0; h < 37; h++)
					for (int64_t w = 0; w < 41; w++)
						ck_assert_float_eq(
							q[((n * C + ch) * 37 + h) * 41 + w],
							(float)(((n * 37 + h) * 41 + w) * C + ch));
		tn_tensor_unref(x);
		tn_tensor_unref(xp);
		tn_tensor_unref(xc);
	}
	tn_tensor *list[] = { a, t, c };
	for (size_t i = 0; i < 3; i++)
		tn_tensor_unref(list[i]);
	/* 2-byte elements (the 16-bit kernel), each holding its index's low 16 bits: float16 bit
	 * patterns (NaNs included) and int16, transposed and NHWC -> NCHW. */
	static const enum tn_dtype d16[] = { TN_FLOAT16, TN_INT16 };
	for (int d = 0; d < 2; d++) {
		for (size_t k = 0; k < sizeof(sides) / sizeof(sides[0]) + 1; k++) {
			const int64_t *sz = k < 4 ? sides[k] : s;
			tn_tensor *m, *mt, *mc;
			ck_assert_tn_ok(tn_empty(2, sz, d16[d], TN_CPU, TN_CONTIGUOUS_FORMAT, &m));
			uint16_t *pm = tn_tensor_data(m);
			for (int64_t i = 0; i < sz[0] * sz[1]; i++)
				pm[i] = (uint16_t)i;
			ck_assert_tn_ok(tn_transpose(m, 0, 1, &mt));
			ck_assert_tn_ok(tn_contiguous(mt, TN_CONTIGUOUS_FORMAT, &mc));
			const uint16_t *pc = tn_tensor_data(mc);
			for (int64_t i = 0; i < sz[1]; i++)
				for (int64_t j = 0; j < sz[0]; j++)
					ck_assert_int_eq(pc[i * sz[0] + j], (uint16_t)(j * sz[1] + i));
			tn_tensor_unref(m);
			tn_tensor_unref(mt);
			tn_tensor_unref(mc);
		}
		for (int64_t C = 3; C <= 16; C += 13) {
			nhwc[3] = C;
			tn_tensor *x, *xp, *xc;
			ck_assert_tn_ok(tn_empty(4, nhwc, d16[d], TN_CPU, TN_CONTIGUOUS_FORMAT, &x));
			uint16_t *px = tn_tensor_data(x);
			for (int64_t i = 0; i < 2 * 37 * 41 * C; i++)
				px[i] = (uint16_t)i;
			ck_assert_tn_ok(tn_permute(x, 4, perm, &xp));
			ck_assert_tn_ok(tn_contiguous(xp, TN_CONTIGUOUS_FORMAT, &xc));
			const uint16_t *q = tn_tensor_data(xc);
			for (int64_t n = 0; n < 2; n++)
				for (int64_t ch = 0; ch < C; ch++)
					for (int64_t h = 0; h < 37; h++)
						for (int64_t w = 0; w < 41; w++)
							ck_assert_int_eq(
								q[((n * C + ch) * 37 + h) * 41 + w],
								(uint16_t)(((n * 37 + h) * 41 + w) * C +
									   ch));
			tn_tensor_unref(x);
			tn_tensor_unref(xp);
			tn_tensor_unref(xc);
		}
	}
}
END_TEST

/* A copy of @t that is not contiguous (every other element of a tensor twice as long), so
 * operators on it take the general iterator path instead of the trivial one. */
static tn_tensor *strided_copy(const tn_tensor *t, tn_tensor **ret_base)
{
	int64_t n = tn_tensor_numel(t), two_n = 2 * n;
	tn_tensor *base, *view, *flat;
	ck_assert_tn_ok(tn_zeros(1, &two_n, tn_tensor_dtype(t), TN_CPU, &base));
	ck_assert_tn_ok(tn_slice(base, 0, 0, two_n, 2, &view));
	ck_assert_tn_ok(tn_reshape(t, 1, &n, &flat));
	ck_assert_tn_ok(tn_copy_(view, flat, false));
	tn_tensor_unref(flat);
	*ret_base = base;
	return view;
}

static void assert_same_bytes(const tn_tensor *x, const tn_tensor *y, const char *what)
{
	ck_assert_int_eq(tn_tensor_dtype(x), tn_tensor_dtype(y));
	ck_assert_int_eq(tn_tensor_numel(x), tn_tensor_numel(y));
	tn_tensor *cx, *cy;
	ck_assert_tn_ok(tn_contiguous(x, TN_CONTIGUOUS_FORMAT, &cx));
	ck_assert_tn_ok(tn_contiguous(y, TN_CONTIGUOUS_FORMAT, &cy));
	ck_assert_msg(memcmp(tn_tensor_data(cx), tn_tensor_data(cy),
			     (size_t)tn_tensor_numel(x) * tn_dtype_size(tn_tensor_dtype(x))) == 0,
		      "%s: trivial and general paths differ", what);
	tn_tensor_unref(cx);
	tn_tensor_unref(cy);
}

/* Small contiguous operands of one dtype take the trivial path (no iterator): every dtype,
 * operator, Scalar kind and comparison gives the general path's bytes and errors, and the
 * in-place and aliasing cases keep their meaning. */
START_TEST(test_trivial_path_matches_general)
{
	static const double va[] = { -3, -1.5, 0, 0.5, 1, 2.25, 7, 100, -128, 255, 3, -0.0 };
	static const double vb[] = { 2, 0.5, -1, 3, -4, 1.5, 2, -7, 3, 1, 0, 5 };
	int64_t s[] = { 3, 4 };
	const tn_scalar scalars[] = { tn_scalar_int(300), tn_scalar_int(-2), tn_scalar_double(2.5),
				      tn_scalar_bool(true) };
	for (int dt = 0; dt < TN_NUM_DTYPES; dt++) {
		tn_tensor *a = tn_test_from_values(va, 2, s, dt), *b = tn_test_from_values(vb, 2, s, dt);
		tn_tensor *abase, *bbase, *ag = strided_copy(a, &abase), *bg = strided_copy(b, &bbase);
		for (int op = 0; op < 4; op++) {
			tn_tensor *r1 = NULL, *r2 = NULL;
			int rc1 = arith(op, a, b, tn_scalar_int(2), &r1);
			int rc2 = arith(op, ag, bg, tn_scalar_int(2), &r2);
			ck_assert_int_eq(rc1, rc2);
			if (rc1 == 0)
				assert_same_bytes(r1, r2, tn_dtype_name(dt));
			tn_tensor_unref(r1);
			tn_tensor_unref(r2);
			for (size_t k = 0; k < sizeof(scalars) / sizeof(scalars[0]); k++) {
				r1 = r2 = NULL;
				rc1 = op == 0 ? tn_add_scalar(a, scalars[k], tn_scalar_int(1), &r1)
				      : op == 1 ? tn_sub_scalar(a, scalars[k], tn_scalar_int(1), &r1)
				      : op == 2 ? tn_mul_scalar(a, scalars[k], &r1)
						: tn_div_scalar(a, scalars[k], &r1);
				rc2 = op == 0 ? tn_add_scalar(ag, scalars[k], tn_scalar_int(1), &r2)
				      : op == 1 ? tn_sub_scalar(ag, scalars[k], tn_scalar_int(1), &r2)
				      : op == 2 ? tn_mul_scalar(ag, scalars[k], &r2)
						: tn_div_scalar(ag, scalars[k], &r2);
				ck_assert_int_eq(rc1, rc2);
				if (rc1 == 0)
					assert_same_bytes(r1, r2, tn_dtype_name(dt));
				tn_tensor_unref(r1);
				tn_tensor_unref(r2);
			}
		}
		tn_tensor *c1, *c2;
		ck_assert_tn_ok(tn_lt(a, b, &c1));
		ck_assert_tn_ok(tn_lt(ag, bg, &c2));
		assert_same_bytes(c1, c2, "lt");
		tn_tensor_unref(c1);
		tn_tensor_unref(c2);
		ck_assert_tn_ok(tn_eq_scalar(a, tn_scalar_int(3), &c1));
		ck_assert_tn_ok(tn_eq_scalar(ag, tn_scalar_int(3), &c2));
		assert_same_bytes(c1, c2, "eq");
		tn_tensor_unref(c1);
		tn_tensor_unref(c2);
		tn_tensor *list[] = { a, b, abase, bbase, ag, bg };
		for (size_t i = 0; i < 6; i++)
			tn_tensor_unref(list[i]);
	}

	/* Leading size-1 dimensions: [1, 12] + [12] and [12] * [1, 1, 12] have the longer shape. */
	int64_t s12[] = { 12 }, s1_12[] = { 1, 12 }, s1_1_12[] = { 1, 1, 12 };
	tn_tensor *u = tn_test_from_values(va, 2, s1_12, TN_FLOAT32);
	tn_tensor *v = tn_test_from_values(vb, 1, s12, TN_FLOAT32);
	tn_tensor *w = tn_test_from_values(vb, 3, s1_1_12, TN_FLOAT32), *vbase;
	tn_tensor *vg = strided_copy(v, &vbase);
	tn_tensor *r1, *r2;
	ck_assert_tn_ok(tn_add(u, v, tn_scalar_int(1), &r1));
	ck_assert_tn_ok(tn_add(u, vg, tn_scalar_int(1), &r2));
	ck_assert_int_eq(tn_tensor_ndim(r1), 2);
	assert_same_bytes(r1, r2, "[1, 12] + [12]");
	tn_tensor_unref(r1);
	tn_tensor_unref(r2);
	ck_assert_tn_ok(tn_mul(v, w, &r1));
	ck_assert_int_eq(tn_tensor_ndim(r1), 3);
	ck_assert_int_eq(tn_tensor_sizes(r1)[2], 12);
	ck_assert_tn_ok(tn_mul(vg, w, &r2));
	assert_same_bytes(r1, r2, "[12] * [1, 1, 12]");
	tn_tensor_unref(r1);
	tn_tensor_unref(r2);
	tn_tensor *ulist[] = { u, v, w, vbase, vg };
	for (size_t i = 0; i < 5; i++)
		tn_tensor_unref(ulist[i]);

	/* Aliasing: a += a doubles; out= the input itself; a partial overlap is refused. */
	tn_tensor *x = tn_test_from_values(va, 2, s, TN_FLOAT32), *row, *row2;
	ck_assert_tn_ok(tn_add_(x, x, tn_scalar_int(1)));
	const float *px = tn_tensor_data(x);
	for (int i = 0; i < 12; i++)
		ck_assert_float_eq(px[i], (float)(2 * va[i]));
	ck_assert_tn_ok(tn_mul_out(x, x, x));
	for (int i = 0; i < 12; i++)
		ck_assert_float_eq(px[i], (float)(4 * va[i] * va[i]));
	ck_assert_tn_ok(tn_select(x, 0, 0, &row));
	ck_assert_tn_ok(tn_narrow(row, 0, 0, 4, &row2));
	tn_tensor *flat, *shifted;
	int64_t n12 = 12;
	ck_assert_tn_ok(tn_reshape(x, 1, &n12, &flat));
	ck_assert_tn_ok(tn_slice(flat, 0, 1, 5, 1, &shifted)); /* elements 1..4 */
	ck_assert_tn_error(tn_add_out(row2, row2, tn_scalar_int(1), shifted), TN_EINVAL,
			   "unsupported operation: some elements of the input tensor and the "
			   "written-to tensor refer to a single memory location. Please clone() the "
			   "tensor before performing the operation.");
	tn_tensor *list[] = { x, row, row2, flat, shifted };
	for (size_t i = 0; i < 5; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* Outputs over TN_STREAM_BYTES are written with streaming stores: every element lands, with
 * an output that starts off the vector alignment, in place, float32 and float64, with a
 * broadcast operand, and under each CPU capability. */
START_TEST(test_streamed_outputs_under_each_capability)
{
	tn_test_force_capability(_i);
	int64_t n = ((int64_t)8 << 20) / 4 + 37, n1 = n + 1;
	tn_tensor *a = arange_f(1, &n, TN_FLOAT32), *b, *big, *out;
	ck_assert_tn_ok(tn_ones(1, &n, TN_FLOAT32, TN_CPU, &b));
	ck_assert_tn_ok(tn_zeros(1, &n1, TN_FLOAT32, TN_CPU, &big));
	ck_assert_tn_ok(tn_slice(big, 0, 1, n1, 1, &out)); /* 4 bytes past a 64-byte boundary */
	ck_assert_tn_ok(tn_add_out(a, b, tn_scalar_int(2), out));
	const float *po = tn_tensor_data(out), *pbig = tn_tensor_data(big);
	for (int64_t i = 0; i < n; i++)
		ck_assert_float_eq(po[i], (float)i + 2.0f);
	ck_assert_float_eq(pbig[0], 0.0f); /* nothing written before the output */
	ck_assert_tn_ok(tn_mul_(a, a)); /* in place: blocks are read before they are streamed */
	const float *pa = tn_tensor_data(a);
	for (int64_t i = 0; i < n; i += 997)
		ck_assert_float_eq(pa[i], (float)i * (float)i);
	/* float64 with a broadcast right operand (stride 0), functional. */
	int64_t n64 = ((int64_t)8 << 20) / 8 + 13, one = 1;
	tn_tensor *x = arange_f(1, &n64, TN_FLOAT64), *four, *q, *d;
	ck_assert_tn_ok(tn_full(1, &one, tn_scalar_double(4.0), &(enum tn_dtype){ TN_FLOAT64 },
				TN_CPU, &four));
	ck_assert_tn_ok(tn_div(x, four, &q));
	ck_assert_tn_ok(tn_sub(x, four, tn_scalar_int(3), &d));
	const double *pq = tn_tensor_data(q), *pd = tn_tensor_data(d);
	for (int64_t i = 0; i < n64; i++) {
		ck_assert_double_eq(pq[i], (double)i / 4.0);
		ck_assert_double_eq(pd[i], (double)i - 12.0);
	}
	tn_tensor *list[] = { a, b, big, out, x, four, q, d };
	for (size_t i = 0; i < 8; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/* Operands on two devices: PyTorch's message names the first non-CPU device first, whatever
 * the order; a 0-dim CPU input joins a tensor of another device as a scalar (not an output). */
START_TEST(test_device_errors)
{
	int64_t n = 2;
	tn_tensor *c, *m, *z, *r;
	ck_assert_tn_ok(tn_ones(1, &n, TN_FLOAT32, TN_CPU, &c));
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_META, TN_CONTIGUOUS_FORMAT, &m));
	ck_assert_tn_ok(tn_ones(0, NULL, TN_FLOAT32, TN_CPU, &z));
	const char *msg = "Expected all tensors to be on the same device, but found at least two "
			  "devices, meta and cpu!";
	ck_assert_tn_error(tn_add(c, m, tn_scalar_int(1), &r), TN_EINVAL, msg);
	ck_assert_tn_error(tn_add(m, c, tn_scalar_int(1), &r), TN_EINVAL, msg);
	ck_assert_tn_error(tn_add_out(m, m, tn_scalar_int(1), z), TN_EINVAL, msg);
	ck_assert_tn_ok(tn_mul(m, z, &r)); /* a CPU scalar */
	ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_META);
	ck_assert_int_eq(tn_tensor_ndim(r), 1);
	tn_tensor *list[] = { c, m, z, r };
	for (size_t i = 0; i < 4; i++)
		tn_tensor_unref(list[i]);
}
END_TEST

/*
 * Floating -> integer copies of NaN, the infinities and values outside int32's and int64's
 * range give PyTorch's x86 results (INT64_MIN or INT32_MIN, narrowed), contiguous (long
 * enough for the vector loops), strided and broadcast, under each CPU capability.
 */
START_TEST(test_copy_float_to_int_special_values)
{
	tn_test_force_capability(_i);
	enum { REP = 37 };
	int64_t n = PAR_CAST_NVALS * REP;
	double all[PAR_CAST_NVALS * REP];
	for (int r = 0; r < REP; r++)
		memcpy(all + r * PAR_CAST_NVALS, par_cast_values, sizeof(par_cast_values));
	for (size_t s = 0; s < sizeof(par_cast_src) / sizeof(par_cast_src[0]); s++) {
		tn_tensor *src = tn_test_from_values(all, 1, &n, par_cast_src[s]), *strided, *bcast;
		int64_t two[] = { 2, n };
		ck_assert_tn_ok(tn_slice(src, 0, 0, INT64_MAX, 3, &strided));
		ck_assert_tn_ok(tn_expand(src, 2, two, &bcast));
		for (size_t d = 0; d < sizeof(par_cast_dst) / sizeof(par_cast_dst[0]); d++) {
			enum tn_dtype dt = par_cast_dst[d];
			tn_tensor *c, *st, *bc, *back, *sback;
			ck_assert_tn_ok(tn_empty(1, &n, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &c));
			ck_assert_tn_ok(tn_copy_(c, src, false));
			ck_assert_tn_ok(tn_to(strided, dt, false, false, NULL, &st));
			ck_assert_tn_ok(tn_empty(2, two, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &bc));
			ck_assert_tn_ok(tn_copy_(bc, bcast, false));
			ck_assert_tn_ok(tn_to(c, TN_INT64, false, false, NULL, &back));
			ck_assert_tn_ok(tn_to(st, TN_INT64, false, false, NULL, &sback));
			const int64_t *got = tn_tensor_data(back), *sgot = tn_tensor_data(sback);
			for (int64_t i = 0; i < n; i++) {
				int64_t want = par_cast_golden[s][d][i % PAR_CAST_NVALS];
				ck_assert_msg(got[i] == want, "%s -> %s: %.17g gives %lld, PyTorch %lld",
					      tn_dtype_name(par_cast_src[s]), tn_dtype_name(dt),
					      all[i], (long long)got[i], (long long)want);
				int64_t idx[] = { 1, i };
				tn_scalar v;
				ck_assert_tn_ok(tn_tensor_get(bc, 2, idx, &v));
				ck_assert_int_eq(v.kind == TN_SCALAR_BOOL ? v.v.b : v.v.i, want);
			}
			for (int64_t i = 0; i < tn_tensor_numel(sback); i++)
				ck_assert_int_eq(sgot[i], par_cast_golden[s][d][(3 * i) % PAR_CAST_NVALS]);
			tn_tensor *list[] = { c, st, bc, back, sback };
			for (size_t k = 0; k < 5; k++)
				tn_tensor_unref(list[k]);
		}
		tn_tensor_unref(src);
		tn_tensor_unref(strided);
		tn_tensor_unref(bcast);
	}
}
END_TEST

/*
 * Element-wise outputs are laid out as PyTorch's TensorIterator lays them out, size-1 and
 * size-0 dimensions included: its fast setups (all contiguous, all channels-last, all dense
 * with one set of strides) and otherwise its permutation (reorder_dimensions) with
 * compatible strides, on a grid of mixed layouts, mixed dtypes and broadcasts.
 */
START_TEST(test_output_layouts_match_pytorch)
{
	for (size_t k = 0; k < sizeof(par_layout_cases) / sizeof(par_layout_cases[0]); k++) {
		const struct par_layout_case *c = &par_layout_cases[k];
		tn_tensor *a, *b, *r = NULL;
		ck_assert_tn_ok(tn_empty_strided(c->na, c->as, c->na, c->ast, TN_FLOAT32, TN_CPU, &a));
		ck_assert_tn_ok(tn_empty_strided(c->nb, c->bs, c->nb, c->bst,
						 c->mixed ? TN_INT32 : TN_FLOAT32, TN_CPU, &b));
		if (c->op == 0)
			ck_assert_tn_ok(tn_add(a, b, tn_scalar_int(1), &r));
		else if (c->op == 1)
			ck_assert_tn_ok(tn_neg(a, &r));
		else
			ck_assert_tn_ok(tn_pow_scalar_tensor(c->op == 2 ? tn_scalar_double(2.5)
								       : tn_scalar_int(1),
							     a, &r));
		ck_assert_int_eq(tn_tensor_ndim(r), c->nr);
		for (int d = 0; d < c->nr; d++) {
			ck_assert_int_eq(tn_tensor_sizes(r)[d], c->rs[d]);
			ck_assert_msg(tn_tensor_strides(r)[d] == c->rst[d],
				      "case %zu (op %d): dim %d stride %lld, PyTorch %lld", k, c->op, d,
				      (long long)tn_tensor_strides(r)[d], (long long)c->rst[d]);
		}
		tn_tensor_unref(a);
		tn_tensor_unref(b);
		tn_tensor_unref(r);
	}
}
END_TEST

/*
 * Random bit patterns in a contiguous 1-D tensor of any dtype (NaN payloads, subnormals,
 * out-of-range values), from @seed: booleans 0 or 1, float16 every bit pattern in turn.
 */
static void fill_bits(tn_tensor *t, uint64_t seed)
{
	const enum tn_dtype dt = tn_tensor_dtype(t);
	const size_t sz = tn_dtype_size(dt);
	const int64_t n = tn_tensor_numel(t);
	unsigned char *p = tn_tensor_data(t);
	uint64_t st = seed;
	for (int64_t i = 0; i < n; i++) {
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		if (dt == TN_BOOL)
			p[i] = (unsigned char)(st & 1);
		else if (dt == TN_FLOAT16)
			memcpy(p + 2 * i, &(uint16_t){ (uint16_t)i }, 2);
		else
			memcpy(p + (size_t)i * sz, &st, sz);
	}
}

/*
 * @src (1-D) copied to @ddt twice: into a contiguous tensor (the kernel's contiguous row) and
 * into every other element of one twice as long (the element-by-element row); the two must
 * hold the same bits, element for element, and every element of the first must be written.
 */
static void check_copy_matches_strided(tn_tensor *src, enum tn_dtype ddt)
{
	const int64_t m = tn_tensor_numel(src), m2 = 2 * m;
	const size_t dsz = tn_dtype_size(ddt);
	tn_tensor *c, *big, *every;
	ck_assert_tn_ok(tn_empty(1, &m, ddt, TN_CPU, TN_CONTIGUOUS_FORMAT, &c));
	ck_assert_tn_ok(tn_zeros(1, &m2, ddt, TN_CPU, &big));
	memset(tn_tensor_data(c), 0xa5, (size_t)m * dsz); /* none left over */
	ck_assert_tn_ok(tn_slice(big, 0, 0, INT64_MAX, 2, &every));
	ck_assert_tn_ok(tn_copy_(c, src, false));
	ck_assert_tn_ok(tn_copy_(every, src, false));
	const unsigned char *pc = tn_tensor_data(c), *pe = tn_tensor_data(big);
	for (int64_t i = 0; i < m; i++)
		if (memcmp(pc + (size_t)i * dsz, pe + (size_t)(2 * i) * dsz, dsz))
			ck_abort_msg("%s -> %s, %lld elements: element %lld differs",
				     tn_dtype_name(tn_tensor_dtype(src)), tn_dtype_name(ddt),
				     (long long)m, (long long)i);
	tn_tensor *list[] = { c, big, every };
	for (size_t k = 0; k < 3; k++)
		tn_tensor_unref(list[k]);
}

/*
 * Copies to and from float16 (every other dtype on the other side): a contiguous row (the
 * kernel's float32 blocks with vector conversions) gives the bits of the same copy into every
 * other element of a tensor (the element-by-element row), for every float16 bit pattern, random
 * bit patterns of float32, float64, bfloat16 and the integers (NaN payloads, subnormals,
 * out-of-range values), and every row length up to 40 and some longer ones, under each CPU
 * capability.
 */
START_TEST(test_float16_casts_under_each_capability)
{
	tn_test_force_capability(_i);
	const int64_t n = 65536 + 11;
	static const int64_t lens[] = { 1, 2, 7, 15, 16, 17, 31, 33, 40, 513, 65536 + 11 };
	for (int od = 0; od < TN_NUM_DTYPES; od++) {
		const enum tn_dtype other = (enum tn_dtype)od;
		if (other == TN_FLOAT16)
			continue;
		for (int dir = 0; dir < 2; dir++) {
			/* dir 0: float16 -> other; 1: other -> float16 */
			const enum tn_dtype sdt = dir ? other : TN_FLOAT16, ddt = dir ? TN_FLOAT16 : other;
			tn_tensor *src;
			ck_assert_tn_ok(tn_empty(1, &n, sdt, TN_CPU, TN_CONTIGUOUS_FORMAT, &src));
			fill_bits(src, 0x2545f4914f6cdd1dull + (uint64_t)(od * 2 + dir));
			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				tn_tensor *s1;
				ck_assert_tn_ok(tn_slice(src, 0, 0, lens[li], 1, &s1));
				check_copy_matches_strided(s1, ddt);
				tn_tensor_unref(s1);
			}
			tn_tensor_unref(src);
		}
	}
}
END_TEST

/*
 * Widening casts of rows long enough for the AVX-512 kernel's streaming rows (256-bit vectors
 * once a row writes 1 MiB; the iterator may split the tensor between threads, so 2^20 + 13
 * elements keep every part above that up to 4 threads): the contiguous copy gives the bits of
 * the same copy into every other element (the element-by-element row) for random bit patterns
 * (NaN payloads, subnormals, out-of-range values; every float16 pattern), for every pair whose destination is wider
 * than its source, under each CPU capability.
 */
START_TEST(test_long_widening_casts_under_each_capability)
{
	tn_test_force_capability(_i);
	const int64_t n = ((int64_t)1 << 20) + 13;
	int pairs = 0;
	for (int sd = 0; sd < TN_NUM_DTYPES; sd++) {
		for (int dd = 0; dd < TN_NUM_DTYPES; dd++) {
			const enum tn_dtype sdt = (enum tn_dtype)sd, ddt = (enum tn_dtype)dd;
			if (tn_dtype_size(ddt) <= tn_dtype_size(sdt))
				continue;
			tn_tensor *src;
			ck_assert_tn_ok(tn_empty(1, &n, sdt, TN_CPU, TN_CONTIGUOUS_FORMAT, &src));
			fill_bits(src, 0x9e3779b97f4a7c15ull + (uint64_t)(sd * 16 + dd));
			check_copy_matches_strided(src, ddt);
			tn_tensor_unref(src);
			pairs++;
		}
	}
	ck_assert_int_eq(pairs, 37);
}
END_TEST

static Suite *iter_suite(void)
{
	Suite *s = suite_create("iter");
	TCase *tc = tcase_create("build");
	tcase_add_test(tc, test_promotion_matches_pytorch);
	tcase_add_test(tc, test_broadcast_and_errors);
	tcase_add_test(tc, test_overlap_errors);
	tcase_add_test(tc, test_device_errors);
	tcase_add_test(tc, test_output_layout_follows_inputs);
	tcase_add_test(tc, test_serial_ranges_visit_each_element_once);
	tcase_add_test(tc, test_parallel_for_each);
	tcase_add_test(tc, test_zero_dim_and_empty);
	tcase_add_test(tc, test_copy_casts_match_pytorch);
	tcase_add_test(tc, test_copy_strided_broadcast_parallel);
	tcase_add_test(tc, test_arith_matches_pytorch);
	tcase_add_loop_test(tc, test_transposing_copies, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(tc, test_compare_matches_pytorch);
	tcase_add_test(tc, test_unary_matches_pytorch);
	tcase_add_test(tc, test_trivial_path_matches_general);
	tcase_add_test(tc, test_reduction_mode);
	tcase_add_test(tc, test_parallel_for_ranges);
	tcase_add_loop_test(tc, test_arith_large_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_copy_under_each_capability, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_long_widening_casts_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_float16_casts_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_add_loop_test(tc, test_streamed_outputs_under_each_capability, 0,
			    TN_NUM_CPU_CAPABILITIES);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	/* Issue 17's parity fixes. */
	TCase *par = tcase_create("parity");
	tcase_add_loop_test(par, test_copy_float_to_int_special_values, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(par, test_output_layouts_match_pytorch);
	tcase_set_timeout(par, 60);
	suite_add_tcase(s, par);
	return s;
}

TN_TEST_MAIN(iter_suite)
