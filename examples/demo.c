/* SPDX-License-Identifier: MIT */
/*
 * The demo `make demo` runs: make tensors, take views of them, print them as PyTorch would.
 * Every view shares the first tensor's storage; writing through one shows in the others.
 * Then operators on the TensorIterator: broadcasting with type promotion, where, reductions
 * along a dimension, and PyTorch's errors for what PyTorch refuses.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tensor.h>

#define CHECK(call)                                                                   \
	do {                                                                          \
		int r_ = (call);                                                      \
		if (r_ < 0) {                                                         \
			fprintf(stderr, "demo: %s failed: %s (%s)\n", #call,          \
				tn_last_error(), tn_strerror(r_));                    \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

static void show(const char *title, const tn_tensor *t)
{
	printf("%s  (sizes", title);
	for (int d = 0; d < tn_tensor_ndim(t); d++)
		printf(" %lld", (long long)tn_tensor_sizes(t)[d]);
	printf(", strides");
	for (int d = 0; d < tn_tensor_ndim(t); d++)
		printf(" %lld", (long long)tn_tensor_strides(t)[d]);
	printf(", offset %lld, %s)\n", (long long)tn_tensor_storage_offset(t),
	       tn_tensor_is_contiguous(t) ? "contiguous" : "strided");
	CHECK(tn_tensor_fprint(stdout, t));
	printf("\n");
}

int main(void)
{
	tn_tensor *a, *m, *mt, *col, *row, *ev, *big, *e, *h;
	int64_t shape[] = { 3, 4 }, bshape[] = { 2, 3, 4 };

	printf("libtensor %s\n\n", tn_version());
	CHECK(tn_arange(tn_scalar_int(0), tn_scalar_int(12), tn_scalar_int(1), &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &a));
	show("a = arange(12)", a);
	CHECK(tn_view(a, 2, shape, &m));
	show("m = a.view(3, 4)", m);
	CHECK(tn_transpose(m, 0, 1, &mt));
	show("m.t()", mt);
	CHECK(tn_select(m, 1, 2, &col));
	show("m[:, 2]", col);
	CHECK(tn_slice(m, 0, 0, INT64_MAX, 2, &row));
	show("m[::2]", row);
	CHECK(tn_slice(a, 0, 1, INT64_MAX, 3, &ev));
	show("a[1::3]", ev);

	/* Writing through a view changes the shared storage. */
	int64_t idx[] = { 1 };
	CHECK(tn_tensor_set(col, 1, idx, tn_scalar_double(-2.5)));
	show("after m[1, 2] = -2.5, a is", a);

	int64_t eshape[] = { 2, 3 };
	CHECK(tn_expand(col, 2, eshape, &e));
	show("m[:, 2].expand(2, 3)  (stride 0: no copy)", e);

	CHECK(tn_arange(tn_scalar_int(0), tn_scalar_int(24), tn_scalar_int(1), &(enum tn_dtype){ TN_INT32 }, TN_CPU, &big));
	tn_tensor *b3;
	CHECK(tn_view(big, 3, bshape, &b3));
	show("arange(24, dtype=int32).view(2, 3, 4)", b3);

	CHECK(tn_full(1, shape, tn_scalar_double(0.1), &(enum tn_dtype){ TN_FLOAT16 }, TN_CPU, &h));
	show("full((3,), 0.1, dtype=float16)", h);

	/* A view that does not fit: the error says why, in PyTorch's words. */
	int64_t bad[] = { 5, -1 };
	tn_tensor *fail;
	if (tn_view(a, 2, bad, &fail) < 0)
		printf("a.view(5, -1) -> error: %s\n", tn_last_error());

	/* Operators: an int32 [3, 4] plus a float32 [4] broadcasts and promotes to float32. */
	tn_tensor *mi, *w, *sum, *pos, *neg, *sel, *mean, *mx, *amx, *q;
	int64_t four[] = { 4 }, dim1[] = { 1 };
	CHECK(tn_arange(tn_scalar_int(0), tn_scalar_int(12), tn_scalar_int(1),
			&(enum tn_dtype){ TN_INT32 }, TN_CPU, &big));
	CHECK(tn_view(big, 2, shape, &mi));
	tn_tensor_unref(big);
	CHECK(tn_full(1, four, tn_scalar_double(0.5), &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &w));
	CHECK(tn_add(mi, w, tn_scalar_int(2), &sum));
	show("mi = arange(12, dtype=int32).view(3, 4); mi + 2 * full((4,), 0.5)", sum);
	CHECK(tn_gt_scalar(mi, tn_scalar_int(5), &pos));
	CHECK(tn_neg(mi, &neg));
	CHECK(tn_where(pos, mi, neg, &sel));
	show("where(mi > 5, mi, -mi)", sel);
	CHECK(tn_mean_dim(sum, 1, dim1, true, NULL, &mean));
	show("(mi + 2 * w).mean(1, keepdim=True)", mean);
	CHECK(tn_max_dim(sel, 0, false, &mx, &amx));
	show("where(...).max(0).values", mx);
	show("where(...).max(0).indices", amx);
	CHECK(tn_div_scalar_mode(mi, tn_scalar_int(-5), "floor", &q));
	show("mi.div(-5, rounding_mode='floor')", q);

	/* What PyTorch refuses, refused with its words; nothing is written. */
	tn_tensor *three;
	int64_t n3[] = { 3 };
	CHECK(tn_ones(1, n3, TN_FLOAT32, TN_CPU, &three));
	if (tn_add(mi, three, tn_scalar_int(1), &fail) < 0)
		printf("mi + ones(3) -> error: %s\n", tn_last_error());
	if (tn_add_(mi, w, tn_scalar_int(1)) < 0)
		printf("mi += full((4,), 0.5) -> error: %s\n", tn_last_error());
	if (tn_bitwise_and(w, w, &fail) < 0)
		printf("w & w -> error: %s\n", tn_last_error());
	tn_tensor *ops_list[] = { mi, w, sum, pos, neg, sel, mean, mx, amx, q, three };
	for (size_t i = 0; i < sizeof(ops_list) / sizeof(ops_list[0]); i++)
		tn_tensor_unref(ops_list[i]);

	/* Every operator above went through the dispatcher; any can also be called by name,
	 * boxed, with its arguments on a stack (how tools reach every operator generically). */
	const tn_op *op;
	CHECK(tn_op_find("aten::transpose.int", &op));
	printf("\n%s\n", tn_schema_str(tn_op_schema(op)));
	tn_stack st = TN_STACK_INIT;
	CHECK(tn_stack_push_tensor(&st, b3));
	CHECK(tn_stack_push(&st, tn_ivalue_int(0)));
	CHECK(tn_stack_push(&st, tn_ivalue_int(2)));
	CHECK(tn_call_boxed("aten::transpose.int", &st));
	tn_tensor *tb;
	CHECK(tn_stack_pop_tensor(&st, &tb));
	tn_stack_destroy(&st);
	show("tn_call_boxed(\"aten::transpose.int\", [b3, 0, 2])", tb);

	/* A Meta tensor has sizes, strides and dtype but no memory: shape inference only. */
	int64_t huge[] = { 1 << 20, 1 << 20 };
	tn_tensor *meta, *metat;
	CHECK(tn_empty(2, huge, TN_FLOAT64, TN_META, TN_CONTIGUOUS_FORMAT, &meta));
	CHECK(tn_transpose(meta, 0, 1, &metat));
	printf("meta: empty(2^20, 2^20, float64).t() has strides %lld %lld and data %p; "
	       "8 TiB never allocated\n",
	       (long long)tn_tensor_strides(metat)[0], (long long)tn_tensor_strides(metat)[1],
	       tn_tensor_data(metat));
	printf("kernels: %s variant (TN_CPU_CAPABILITY=default|avx2|avx512 lowers it)\n",
	       tn_cpu_capability_name(tn_cpu_capability()));

	tn_tensor *list[] = { a, m, mt, col, row, ev, e, big, b3, h, tb, meta, metat };
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		tn_tensor_unref(list[i]);
	return 0;
}
