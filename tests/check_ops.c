/* SPDX-License-Identifier: MIT */
/*
 * The whole op table, both ways. Every table entry is registered with the schema text the
 * table gives (the generator's reading and the library's agree). For every operator, arguments are built from its schema
 * (defaults where it has them, typical values by type and name otherwise), and the operator
 * is called boxed (tn_call_boxed by name) and unboxed (its public C entry point, reached
 * through the generated per-operator caller in libtensor/ops_calls_gen.h). Both calls must
 * agree: the same error code and message, or results with the same geometry, dtype, device
 * and elements. The same walk runs on Meta tensors, whose results must have the geometry and
 * dtype of the CPU results, computed without touching data.
 */
#include <stdio.h>

#include "testutil.h"

/* The generated callers use the library's internal stack helpers; these are the same
 * operations written with the public API. */
__attribute__((unused)) static size_t tn__ivalue_list_len(const tn_ivalue *v)
{
	size_t n = 0;
	tn_tensor *const *t;
	ck_assert_tn_ok(tn_ivalue_to_tensor_list(v, &n, &t));
	return n;
}

__attribute__((unused)) static tn_tensor *const *tn__ivalue_list_tensors(const tn_ivalue *v)
{
	size_t n;
	tn_tensor *const *t = NULL;
	ck_assert_tn_ok(tn_ivalue_to_tensor_list(v, &n, &t));
	return t;
}

static void tn__stack_drop(tn_stack *st, size_t n)
{
	while (n--) {
		tn_ivalue v;
		ck_assert_tn_ok(tn_stack_pop(st, &v));
		tn_ivalue_release(&v);
	}
}

static void tn__stack_push_reserved(tn_stack *st, tn_ivalue v)
{
	ck_assert_tn_ok(tn_stack_push(st, v));
}

static tn_ivalue tn__ivalue_owned_tensor(tn_tensor *t)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.tensor = t;
	v.tag = TN_IVALUE_TENSOR;
	return v;
}

#define tn__error(code, ...) (code)
#include "ops_calls_gen.h"
#undef tn__error

#define NOPS (sizeof(tn_test_ops) / sizeof(tn_test_ops[0]))

/* The bitwise and shift operators take integers only. */
static bool integer_op(const char *op)
{
	return strncmp(op, "aten::bitwise_", 14) == 0;
}

/* The input tensor: arange(24) as float32 (int64 for integer operators) of sizes [2, 3, 4]
 * (on Meta: the same geometry). */
static tn_tensor *input(const char *op, tn_device dev)
{
	int64_t sizes[] = { 2, 3, 4 };
	enum tn_dtype dt = integer_op(op) ? TN_INT64 : TN_FLOAT32;
	tn_tensor *flat, *t;
	if (dev.type == TN_DEVICE_META) {
		ck_assert_tn_ok(tn_empty(3, sizes, dt, dev, TN_CONTIGUOUS_FORMAT, &t));
		return t;
	}
	ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(24), tn_scalar_int(1), &dt, dev,
				  &flat));
	ck_assert_tn_ok(tn_view(flat, 3, sizes, &t));
	tn_tensor_unref(flat);
	return t;
}

static bool has_tensor_arg(const tn_schema *s)
{
	for (size_t i = 0; i < tn_schema_num_args(s); i++)
		if (tn_schema_arg_at(s, i)->type.kind == TN_TYPE_TENSOR)
			return true;
	return false;
}

static tn_ivalue int_list(size_t n, const int64_t *v)
{
	tn_ivalue iv;
	ck_assert_tn_ok(tn_ivalue_int_list(n, v, &iv));
	return iv;
}

/* The out= tensors of the reductions: the input reduced over dim 1 (ndim 2) or whole (0). */
static const struct {
	const char *op, *arg;
	int ndim;
	enum tn_dtype dtype;
} reduce_outs[] = {
	{ "aten::sum.IntList_out", "out", 2, TN_FLOAT32 },
	{ "aten::sum.out", "out", 0, TN_FLOAT32 },
	{ "aten::mean.out", "out", 2, TN_FLOAT32 },
	{ "aten::prod.int_out", "out", 2, TN_FLOAT32 },
	{ "aten::prod.out", "out", 0, TN_FLOAT32 },
	{ "aten::amax.out", "out", 0, TN_FLOAT32 },
	{ "aten::amin.out", "out", 0, TN_FLOAT32 },
	{ "aten::max.dim_max", "max", 2, TN_FLOAT32 },
	{ "aten::max.dim_max", "max_values", 2, TN_INT64 },
	{ "aten::min.dim_min", "min", 2, TN_FLOAT32 },
	{ "aten::min.dim_min", "min_indices", 2, TN_INT64 },
	{ "aten::argmax.out", "out", 0, TN_INT64 },
	{ "aten::argmin.out", "out", 0, TN_INT64 },
	{ "aten::all.out", "out", 2, TN_BOOL },
	{ "aten::all.all_out", "out", 0, TN_BOOL },
	{ "aten::any.out", "out", 2, TN_BOOL },
	{ "aten::any.all_out", "out", 0, TN_BOOL },
};

/* The matmul family's operands: shapes that multiply, by operator and argument (the op
 * name without its overload; out= tensors have the result's shape). */
static const struct {
	const char *op, *arg;
	int ndim;
	int64_t sizes[4];
} linalg_args[] = {
	{ "aten::t", "self", 2, { 3, 4 } },
	{ "aten::mm", "self", 2, { 2, 3 } },	      { "aten::mm", "mat2", 2, { 3, 4 } },
	{ "aten::mm", "out", 2, { 2, 4 } },	      { "aten::bmm", "self", 3, { 2, 3, 4 } },
	{ "aten::bmm", "mat2", 3, { 2, 4, 3 } },      { "aten::bmm", "out", 3, { 2, 3, 3 } },
	{ "aten::addmm", "self", 2, { 2, 4 } },	      { "aten::addmm", "mat1", 2, { 2, 3 } },
	{ "aten::addmm", "mat2", 2, { 3, 4 } },	      { "aten::addmm", "out", 2, { 2, 4 } },
	{ "aten::addmm_", "self", 2, { 2, 4 } },      { "aten::addmm_", "mat1", 2, { 2, 3 } },
	{ "aten::addmm_", "mat2", 2, { 3, 4 } },      { "aten::baddbmm", "self", 3, { 2, 3, 3 } },
	{ "aten::baddbmm", "batch1", 3, { 2, 3, 4 } }, { "aten::baddbmm", "batch2", 3, { 2, 4, 3 } },
	{ "aten::baddbmm", "out", 3, { 2, 3, 3 } },   { "aten::baddbmm_", "self", 3, { 2, 3, 3 } },
	{ "aten::baddbmm_", "batch1", 3, { 2, 3, 4 } }, { "aten::baddbmm_", "batch2", 3, { 2, 4, 3 } },
	{ "aten::mv", "self", 2, { 2, 3 } },	      { "aten::mv", "vec", 1, { 3 } },
	{ "aten::mv", "out", 1, { 2 } },	      { "aten::addmv", "self", 1, { 2 } },
	{ "aten::addmv", "mat", 2, { 2, 3 } },	      { "aten::addmv", "vec", 1, { 3 } },
	{ "aten::addmv", "out", 1, { 2 } },	      { "aten::addmv_", "self", 1, { 2 } },
	{ "aten::addmv_", "mat", 2, { 2, 3 } },	      { "aten::addmv_", "vec", 1, { 3 } },
	{ "aten::dot", "self", 1, { 4 } },	      { "aten::dot", "tensor", 1, { 4 } },
	{ "aten::dot", "out", 0, { 0 } },	      { "aten::outer", "self", 1, { 2 } },
	{ "aten::outer", "vec2", 1, { 3 } },	      { "aten::outer", "out", 2, { 2, 3 } },
	{ "aten::matmul", "self", 3, { 2, 3, 4 } },   { "aten::matmul", "other", 2, { 4, 2 } },
	{ "aten::matmul", "out", 3, { 2, 3, 2 } },    { "aten::linear", "input", 3, { 2, 3, 4 } },
	{ "aten::linear", "weight", 2, { 5, 4 } },    { "aten::linear", "out", 3, { 2, 3, 5 } },
	/* Joining, splitting and indexing (shape.c, index.c): the tensors of cat and stack are
	 * two of the [2, 3, 4] input; indices are converted to int64 and masks to bool by name
	 * (value_for). */
	{ "aten::cat", "out", 3, { 4, 3, 4 } },	      { "aten::stack", "out", 4, { 2, 2, 3, 4 } },
	{ "aten::index_select", "index", 1, { 2 } },  { "aten::index_select", "out", 3, { 2, 2, 4 } },
	{ "aten::gather", "index", 3, { 1, 1, 3 } },  { "aten::gather", "out", 3, { 1, 1, 3 } },
	{ "aten::embedding", "weight", 2, { 6, 4 } }, { "aten::embedding", "indices", 2, { 1, 2 } },
	{ "aten::masked_fill", "value", 0, { 0 } },   { "aten::masked_fill_", "value", 0, { 0 } },
	{ "aten::nonzero", "out", 2, { 23, 3 } },
	{ "aten::conv1d", "weight", 3, { 2, 3, 3 } }, { "aten::conv2d", "input", 4, { 1, 2, 3, 4 } },
	{ "aten::conv2d", "weight", 4, { 3, 2, 2, 2 } },
	{ "aten::max_pool2d", "self", 4, { 1, 2, 3, 4 } },
	{ "aten::avg_pool2d", "self", 4, { 1, 2, 3, 4 } },
	{ "aten::avg_pool2d", "out", 4, { 1, 2, 1, 2 } },
	{ "aten::adaptive_avg_pool2d", "self", 4, { 1, 2, 3, 4 } },
	{ "aten::adaptive_avg_pool2d", "out", 4, { 1, 2, 2, 2 } },
	{ "aten::batch_norm", "weight", 1, { 3 } },   { "aten::batch_norm", "bias", 1, { 3 } },
	{ "aten::batch_norm", "running_mean", 1, { 3 } }, { "aten::batch_norm", "running_var", 1, { 3 } },
};

/* arange(numel) as float32 in the shape linalg_args gives @op's argument @arg, or NULL. */
static tn_tensor *linalg_input(const char *op, const char *arg, tn_device dev)
{
	size_t base = strcspn(op, ".");
	for (size_t k = 0; k < sizeof(linalg_args) / sizeof(linalg_args[0]); k++) {
		if (strlen(linalg_args[k].op) != base || strncmp(op, linalg_args[k].op, base) ||
		    strcmp(arg, linalg_args[k].arg))
			continue;
		int64_t n = 1;
		tn_tensor *flat, *t;
		for (int d = 0; d < linalg_args[k].ndim; d++)
			n *= linalg_args[k].sizes[d];
		if (dev.type == TN_DEVICE_META) {
			ck_assert_tn_ok(tn_empty(linalg_args[k].ndim, linalg_args[k].sizes, TN_FLOAT32,
						 dev, TN_CONTIGUOUS_FORMAT, &t));
			return t;
		}
		ck_assert_tn_ok(tn_arange(tn_scalar_int(0), tn_scalar_int(n), tn_scalar_int(1),
					  &(enum tn_dtype){ TN_FLOAT32 }, dev, &flat));
		ck_assert_tn_ok(tn_view(flat, linalg_args[k].ndim, linalg_args[k].sizes, &t));
		tn_tensor_unref(flat);
		return t;
	}
	return NULL;
}

/* A value for argument @a of operator @op without a default: typical values by type and
 * name, chosen so that the call succeeds on the [2, 3, 4] input. */
static tn_ivalue value_for(const char *op, const tn_schema *s, const tn_schema_arg *a,
			   tn_device dev)
{
	const char *n = a->name;
	switch (a->type.kind) {
	case TN_TYPE_TENSOR: {
		tn_ivalue v;
		tn_tensor *t = NULL;
		if (a->type.is_list) { /* cat's and stack's tensors: two of the input */
			tn_tensor *two[2] = { input(op, dev), input(op, dev) };
			ck_assert_tn_ok(tn_ivalue_tensor_list(2, two, &v));
			tn_tensor_unref(two[0]);
			tn_tensor_unref(two[1]);
			return v;
		}
		for (size_t k = 0; k < sizeof(reduce_outs) / sizeof(reduce_outs[0]); k++)
			if (strcmp(op, reduce_outs[k].op) == 0 && strcmp(n, reduce_outs[k].arg) == 0)
				ck_assert_tn_ok(tn_zeros(reduce_outs[k].ndim, (int64_t[]){ 2, 4 },
							 reduce_outs[k].dtype, dev, &t));
		if (!t)
			t = linalg_input(op, n, dev);
		if (!t)
			t = input(op, dev);
		/* Indices are int64 (nonzero's out= too). */
		if (strcmp(n, "index") == 0 || strcmp(n, "indices") == 0 ||
		    (strncmp(op, "aten::nonzero", 13) == 0 && strcmp(n, "out") == 0)) {
			tn_tensor *f = t;
			ck_assert_tn_ok(tn_to(f, TN_INT64, false, false, NULL, &t));
			tn_tensor_unref(f);
		}
		/* where wants a bool condition, masked_fill a bool mask. */
		if (strcmp(n, "condition") == 0 || strcmp(n, "mask") == 0) {
			tn_tensor *f = t;
			ck_assert_tn_ok(tn_to(f, TN_BOOL, false, false, NULL, &t));
			tn_tensor_unref(f);
		}
		ck_assert_tn_ok(tn_ivalue_tensor(t, &v));
		tn_tensor_unref(t);
		return v;
	}
	case TN_TYPE_INT:
		if (a->type.is_list) {
			if (strcmp(n, "dims") == 0)
				return int_list(3, (int64_t[]){ 2, 0, 1 });
			if (strcmp(n, "split_sizes") == 0)
				return int_list(2, (int64_t[]){ 1, 1 });
			if (strcmp(n, "dim") == 0) /* a reduction's dims */
				return int_list(1, (int64_t[]){ 1 });
			if (strcmp(n, "normalized_shape") == 0) /* layer_norm's: the last dim */
				return int_list(1, (int64_t[]){ 4 });
			if (strcmp(n, "stride") == 0)
				return has_tensor_arg(s) ? int_list(2, (int64_t[]){ 1, 2 })
							 : int_list(2, (int64_t[]){ 3, 1 });
			if (!has_tensor_arg(s))
				return int_list(2, (int64_t[]){ 2, 3 });
			if (strcmp(op, "aten::expand") == 0)
				return int_list(4, (int64_t[]){ 2, 2, 3, 4 });
			if (strcmp(n, "kernel_size") == 0 || strcmp(n, "output_size") == 0)
				return int_list(2, (int64_t[]){ 2, 2 });
			if (strcmp(n, "shape") == 0)
				return int_list(2, (int64_t[]){ 6, -1 });
			return int_list(2, (int64_t[]){ 4, 6 });
		}
		if (strcmp(n, "dim0") == 0)
			return tn_ivalue_int(0);
		if (strcmp(n, "dim1") == 0)
			return tn_ivalue_int(-1);
		if (strcmp(n, "length") == 0)
			return tn_ivalue_int(2);
		if (strcmp(n, "high") == 0 || strcmp(n, "to") == 0) /* randint's, random_'s */
			return tn_ivalue_int(7);
		return tn_ivalue_int(1);
	case TN_TYPE_SCALAR:
		if (strcmp(n, "start") == 0)
			return tn_ivalue_scalar(tn_scalar_int(0));
		if (strcmp(n, "end") == 0)
			return tn_ivalue_scalar(tn_scalar_int(5));
		return tn_ivalue_scalar(integer_op(op) ? tn_scalar_int(3) : tn_scalar_double(2.5));
	case TN_TYPE_STR: {
		/* div's rounding_mode and the convolutions' padding. */
		tn_ivalue v;
		if (strcmp(n, "padding") == 0) {
			ck_assert_tn_ok(tn_ivalue_string("same", &v));
			return v;
		}
		ck_assert_str_eq(n, "rounding_mode");
		ck_assert_tn_ok(tn_ivalue_string("floor", &v));
		return v;
	}
	case TN_TYPE_FLOAT:
		/* A probability (bernoulli's, dropout's) must lie in [0, 1]. */
		return tn_ivalue_double(strcmp(n, "p") == 0 ? 0.25 : 1.5);
	case TN_TYPE_BOOL:
		return tn_ivalue_bool(false);
	case TN_TYPE_SCALAR_TYPE:
		return tn_ivalue_dtype(TN_FLOAT32);
	case TN_TYPE_DEVICE:
		return tn_ivalue_device(dev);
	case TN_TYPE_MEMORY_FORMAT:
		return tn_ivalue_memory_format(TN_CONTIGUOUS_FORMAT);
	case TN_TYPE_LAYOUT:
		return tn_ivalue_layout(TN_STRIDED);
	default:
		ck_abort_msg("%s: no test value for argument '%s'", op, n);
	}
	return tn_ivalue_none();
}

static void build_args(const char *op, tn_device dev, tn_stack *st)
{
	const tn_op *h;
	ck_assert_tn_ok(tn_op_find(op, &h));
	const tn_schema *s = tn_op_schema(h);
	for (size_t i = 0; i < tn_schema_num_args(s); i++) {
		const tn_schema_arg *a = tn_schema_arg_at(s, i);
		tn_ivalue v;
		if (a->type.kind == TN_TYPE_DEVICE)
			v = tn_ivalue_device(dev); /* the pass's device, default or not */
		else if (a->has_default && !(strncmp(op, "aten::clamp", 11) == 0 &&
					     (strcmp(a->name, "min") == 0 || strcmp(a->name, "max") == 0)))
			tn_ivalue_copy(&a->default_value, &v); /* clamp needs a bound */
		else
			v = value_for(op, s, a, dev);
		ck_assert_tn_ok(tn_stack_push(st, v));
	}
}

static bool is_empty_op(const char *op)
{
	return strncmp(op, "aten::empty", 11) == 0;
}

static void same_geometry(const char *op, const tn_tensor *a, const tn_tensor *b)
{
	ck_assert_msg(tn_tensor_ndim(a) == tn_tensor_ndim(b), "%s: ndim %d vs %d", op,
		      tn_tensor_ndim(a), tn_tensor_ndim(b));
	for (int d = 0; d < tn_tensor_ndim(a); d++) {
		ck_assert_msg(tn_tensor_sizes(a)[d] == tn_tensor_sizes(b)[d], "%s: size %d", op, d);
		ck_assert_msg(tn_tensor_strides(a)[d] == tn_tensor_strides(b)[d], "%s: stride %d",
			      op, d);
	}
	ck_assert_msg(tn_tensor_storage_offset(a) == tn_tensor_storage_offset(b), "%s: offset", op);
	ck_assert_msg(tn_tensor_dtype(a) == tn_tensor_dtype(b), "%s: dtype", op);
}

static void same_elements(const char *op, const tn_tensor *a, const tn_tensor *b)
{
	int n = tn_tensor_ndim(a);
	int64_t idx[TN_MAX_DIMS] = { 0 };
	if (tn_tensor_numel(a) == 0)
		return;
	for (;;) {
		tn_scalar x, y;
		ck_assert_tn_ok(tn_tensor_get(a, n, idx, &x));
		ck_assert_tn_ok(tn_tensor_get(b, n, idx, &y));
		ck_assert_msg(x.kind == y.kind, "%s: scalar kinds differ", op);
		ck_assert_msg(x.kind == TN_SCALAR_DOUBLE ? (x.v.d == y.v.d || (x.v.d != x.v.d && y.v.d != y.v.d))
			      : x.kind == TN_SCALAR_INT	 ? x.v.i == y.v.i
							 : x.v.b == y.v.b,
			      "%s: elements differ", op);
		int k = n - 1;
		while (k >= 0 && ++idx[k] == tn_tensor_sizes(a)[k])
			idx[k--] = 0;
		if (k < 0)
			return;
	}
}

static void same_value(const char *op, const tn_ivalue *a, const tn_ivalue *b, bool data)
{
	ck_assert_msg(a->tag == b->tag, "%s: result types %s and %s", op, tn_ivalue_type_name(a),
		      tn_ivalue_type_name(b));
	if (a->tag == TN_IVALUE_TENSOR) {
		same_geometry(op, a->u.tensor, b->u.tensor);
		if (data)
			same_elements(op, a->u.tensor, b->u.tensor);
	} else if (a->tag == TN_IVALUE_TENSOR_LIST) {
		size_t na, nb;
		tn_tensor *const *ta, *const *tb;
		ck_assert_tn_ok(tn_ivalue_to_tensor_list(a, &na, &ta));
		ck_assert_tn_ok(tn_ivalue_to_tensor_list(b, &nb, &tb));
		ck_assert_uint_eq(na, nb);
		for (size_t i = 0; i < na; i++) {
			same_geometry(op, ta[i], tb[i]);
			if (data)
				same_elements(op, ta[i], tb[i]);
		}
	} else {
		ck_assert_msg(tn_ivalue_equal(a, b), "%s: results differ", op);
	}
}

/* Call operator @i both ways on @dev; the boxed results stay in @boxed for the caller. */
static int call_both(size_t i, tn_device dev, tn_stack *boxed)
{
	const char *op = tn_test_ops[i].name;
	tn_stack unboxed = TN_STACK_INIT;
	char msg[1024];
	int rb, ru;

	build_args(op, dev, boxed);
	/* The written argument of an in-place or out= operator is its result, the same object:
	 * keep the tensor arguments to compare. */
	tn_tensor *bargs[16] = { NULL }, *uargs[16] = { NULL };
	size_t nargs = boxed->size;
	ck_assert_uint_le(nargs, 16);
	for (size_t k = 0; k < nargs; k++)
		if (boxed->items[k].tag == TN_IVALUE_TENSOR)
			bargs[k] = tn_tensor_ref(boxed->items[k].u.tensor);
	tn_clear_error();
	/* The random operators draw from the default generator: the same stream both ways. */
	ck_assert_tn_ok(tn_manual_seed(20261127));
	rb = tn_call_boxed(op, boxed);
	snprintf(msg, sizeof(msg), "%s", tn_last_error());

	build_args(op, dev, &unboxed);
	for (size_t k = 0; k < nargs; k++)
		if (unboxed.items[k].tag == TN_IVALUE_TENSOR)
			uargs[k] = tn_tensor_ref(unboxed.items[k].u.tensor);
	tn_clear_error();
	ck_assert_tn_ok(tn_manual_seed(20261127));
	ru = tn_test_ops[i].call(&unboxed);
	ck_assert_msg(rb == ru, "%s on %s: boxed %d (%s), unboxed %d (%s)", op,
		      tn_device_type_name(dev.type), rb, msg, ru, tn_last_error());
	if (rb < 0) {
		ck_assert_str_eq(msg, tn_last_error());
	} else {
		ck_assert_uint_eq(boxed->size, unboxed.size);
		const tn_schema *s;
		const tn_op *h;
		ck_assert_tn_ok(tn_op_find(op, &h));
		s = tn_op_schema(h);
		ck_assert_uint_eq(boxed->size, tn_schema_num_returns(s));
		for (size_t r = 0; r < boxed->size; r++) {
			same_value(op, &boxed->items[r], &unboxed.items[r],
				   dev.type == TN_DEVICE_CPU && !is_empty_op(op));
			if (boxed->items[r].tag == TN_IVALUE_TENSOR) {
				ck_assert_int_eq(tn_tensor_device(boxed->items[r].u.tensor).type, dev.type);
				ck_assert_int_eq(tn_tensor_device(unboxed.items[r].u.tensor).type, dev.type);
			}
			const tn_schema_arg *ra = tn_schema_return_at(s, r);
			if (!ra->alias_write)
				continue;
			size_t k = 0;
			while (k < nargs && !(tn_schema_arg_at(s, k)->alias_set &&
					      strcmp(tn_schema_arg_at(s, k)->alias_set, ra->alias_set) == 0))
				k++;
			ck_assert_msg(k < nargs, "%s: no argument for the written return", op);
			ck_assert_ptr_eq(boxed->items[r].u.tensor, bargs[k]);
			ck_assert_ptr_eq(unboxed.items[r].u.tensor, uargs[k]);
		}
	}
	for (size_t k = 0; k < nargs; k++) {
		tn_tensor_unref(bargs[k]);
		tn_tensor_unref(uargs[k]);
	}
	tn_stack_destroy(&unboxed);
	return rb;
}

static int count_aten(const tn_op *op, void *ctx)
{
	if (strncmp(tn_op_name(op), "aten::", 6) == 0)
		(*(size_t *)ctx)++;
	return 0;
}

START_TEST(test_table_is_registered)
{
	/* Every generated caller names an operator the registry knows, with the same schema
	 * count; and every aten:: operator of the registry has a generated caller. */
	size_t aten = 0;
	for (size_t i = 0; i < NOPS; i++) {
		const tn_op *h;
		ck_assert_tn_ok(tn_op_find(tn_test_ops[i].name, &h));
		ck_assert_str_eq(tn_op_name(h), tn_test_ops[i].name);
		/* The generator's parser and the library's agree: the table is written in the
		 * canonical form the library prints. */
		ck_assert_str_eq(tn_schema_str(tn_op_schema(h)), tn_test_ops[i].schema);
	}
	ck_assert_tn_ok(tn_op_foreach(count_aten, &aten));
	ck_assert_uint_eq(aten, NOPS);
}
END_TEST

START_TEST(test_every_op_both_ways_cpu)
{
	struct tn_baseline b = tn_test_baseline();
	size_t i = (size_t)_i;
	tn_stack st = TN_STACK_INIT;
	/* Every operator of the table succeeds on these arguments on the CPU. */
	ck_assert_msg(call_both(i, TN_CPU, &st) == 0, "%s failed: %s", tn_test_ops[i].name,
		      tn_last_error());
	tn_stack_destroy(&st);
	ck_assert_no_leak(b);
}
END_TEST

/* The operators whose result's size depends on the data: no Meta kernel, as in PyTorch. */
static bool data_dependent(const char *op)
{
	return strcmp(op, "aten::nonzero") == 0 || strcmp(op, "aten::nonzero.out") == 0 ||
	       strcmp(op, "aten::where") == 0;
}

START_TEST(test_every_op_both_ways_meta)
{
	size_t i = (size_t)_i;
	tn_stack meta = TN_STACK_INIT, cpu = TN_STACK_INIT;
	const char *op = tn_test_ops[i].name;
	if (data_dependent(op)) {
		/* Both ways refuse, with PyTorch's words. */
		ck_assert_int_eq(call_both(i, TN_META, &meta), TN_ENOTSUP);
		ck_assert_msg(strstr(tn_last_error(), "Could not run 'aten::nonzero") != NULL &&
				      strstr(tn_last_error(), "from the 'Meta' backend") != NULL,
			      "%s: %s", op, tn_last_error());
		tn_stack_destroy(&meta);
		return;
	}
	/* Every operator has a Meta kernel: same geometry and dtype as on the CPU. */
	ck_assert_msg(call_both(i, TN_META, &meta) == 0, "%s failed on Meta: %s", op,
		      tn_last_error());
	ck_assert_int_eq(call_both(i, TN_CPU, &cpu), 0);
	ck_assert_uint_eq(meta.size, cpu.size);
	for (size_t r = 0; r < meta.size; r++) {
		same_value(op, &meta.items[r], &cpu.items[r], false);
		if (meta.items[r].tag == TN_IVALUE_TENSOR) {
			tn_tensor *t = meta.items[r].u.tensor;
			ck_assert_int_eq(tn_tensor_device(t).type, TN_DEVICE_META);
			ck_assert_ptr_null(tn_tensor_data(t));
		}
	}
	tn_stack_destroy(&meta);
	tn_stack_destroy(&cpu);
}
END_TEST

START_TEST(test_errors_agree)
{
	/* Failing calls agree too: every operator with a tensor argument, given a 0-dim one
	 * where it may not fit, and every factory given a negative size. */
	tn_tensor *z;
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_double(1.0), NULL, TN_CPU, &z));
	int failures = 0;
	for (size_t i = 0; i < NOPS; i++) {
		tn_stack a = TN_STACK_INIT, u = TN_STACK_INIT;
		const char *op = tn_test_ops[i].name;
		const tn_op *h;
		ck_assert_tn_ok(tn_op_find(op, &h));
		bool factory = !has_tensor_arg(tn_op_schema(h));
		build_args(op, TN_CPU, &a);
		build_args(op, TN_CPU, &u);
		for (size_t k = 0; k < a.size; k++) {
			tn_ivalue *va = &a.items[k], *vu = &u.items[k];
			if (va->tag == TN_IVALUE_TENSOR) {
				tn_ivalue_release(va);
				tn_ivalue_release(vu);
				ck_assert_tn_ok(tn_ivalue_tensor(z, va));
				ck_assert_tn_ok(tn_ivalue_tensor(z, vu));
			} else if (va->tag == TN_IVALUE_INT_LIST && factory) {
				tn_ivalue_release(va);
				tn_ivalue_release(vu);
				*va = int_list(2, (int64_t[]){ 2, -3 });
				*vu = int_list(2, (int64_t[]){ 2, -3 });
			}
		}
		tn_clear_error();
		int rb = tn_call_boxed(op, &a);
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
		tn_clear_error();
		int ru = tn_test_ops[i].call(&u);
		ck_assert_msg(rb == ru, "%s: boxed %d (%s), unboxed %d (%s)", op, rb, msg, ru,
			      tn_last_error());
		if (rb < 0) {
			ck_assert_str_eq(msg, tn_last_error());
			failures++;
		}
		tn_stack_destroy(&a);
		tn_stack_destroy(&u);
	}
	ck_assert_int_ge(failures, 10);
	tn_tensor_unref(z);
}
END_TEST

static Suite *ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, test_table_is_registered);
	tcase_add_loop_test(tc, test_every_op_both_ways_cpu, 0, (int)NOPS);
	tcase_add_loop_test(tc, test_every_op_both_ways_meta, 0, (int)NOPS);
	tcase_add_test(tc, test_errors_agree);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(ops_suite)
