/* SPDX-License-Identifier: MIT */
/*
 * Schemas: real PyTorch schemas and synthetic ones parse to the expected fields and canonical
 * text, which parses back to an equal schema; malformed ones fail with the exact message and
 * column; allocation failures leave nothing behind. Also the registry's helpers: whether a
 * value fits an argument type, and whether two schemas have the same types.
 *
 * This suite links a static copy of the library (tests/libtensor_internal.la) because the
 * helpers are internal (tn__*) and hidden in libtensor.so.
 */
#include <locale.h>
#include <math.h>

#include "dispatch_internal.h"
#include "testutil.h"
#include "schema_equal.h"

static tn_schema *parse_ok(const char *text)
{
	tn_schema *s = NULL;
	int r = tn_schema_parse(text, &s);
	ck_assert_msg(r == 0, "'%s' failed: %d %s", text, r, tn_last_error());
	ck_assert_ptr_nonnull(s);
	return s;
}

/* Input, and its canonical text. */
static const struct {
	const char *text, *canon;
} valid[] = {
	/* Real schemas from PyTorch's native_functions.yaml. */
	{ "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", NULL },
	{ "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", NULL },
	{ "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", NULL },
	{ "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", NULL },
	{ "unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", NULL },
	{ "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) "
	  "-> Tensor",
	  NULL },
	{ "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
	  "int[2] dilation=1, int groups=1) -> Tensor",
	  "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1, 1], "
	  "int[2] padding=[0, 0], int[2] dilation=[1, 1], int groups=1) -> Tensor" },
	{ "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", NULL },
	{ "div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", NULL },
	{ "empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
	  "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
	  "empty.memory_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, "
	  "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor" },
	{ "aten::_foo(Tensor[] tensors, float[] w=[1.0, 2.5], bool[] m=[True, False]) -> ()", NULL },
	{ "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor?(a!) running_mean, "
	  "Tensor?(b!) running_var, bool training, float momentum, float eps) "
	  "-> (Tensor, Tensor, Tensor)",
	  "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, "
	  "Tensor(b!)? running_var, bool training, float momentum, float eps) "
	  "-> (Tensor, Tensor, Tensor)" },
	{ "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor", NULL },
	{ "aten::relu_(Tensor(a!) self) -> Tensor(a!)", NULL },
	{ "view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
	  "view(Tensor(a) self, int[] size) -> Tensor(a)" },
	{ "transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", NULL },
	{ "split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
	  "split.Tensor(Tensor(a -> *) self, int split_size, int dim=0) -> Tensor(a)[]" },
	{ "to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
	  "MemoryFormat? memory_format=None) -> Tensor(a)",
	  NULL },
	{ "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", NULL },
	{ "sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
	  NULL },
	{ "topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *, "
	  "Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)",
	  "topk.values(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True, *, "
	  "Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)" },
	{ "layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, "
	  "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
	  "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
	  "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor" },
	{ "dropout(Tensor input, float p, bool train) -> Tensor", NULL },
	{ "cat(Tensor[] tensors, int dim=0) -> Tensor", NULL },
	{ "_foreach_add.List_out(Tensor[] self, Tensor[] other, *, Scalar alpha=1, "
	  "Tensor(a!)[] out) -> ()",
	  NULL },
	{ "arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, "
	  "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
	  NULL },
	{ "contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)",
	  NULL },
	{ "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
	  "int[2] dilation=1, bool ceil_mode=False) -> Tensor",
	  "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=[0, 0], "
	  "int[2] dilation=[1, 1], bool ceil_mode=False) -> Tensor" },
	{ "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
	  "Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) "
	  "-> Tensor",
	  NULL },
	/* Defaults of every kind. */
	{ "f(Device a=\"cpu\", Device b=\"cuda\", Device c=\"cuda:0\", Device d=\"meta\", "
	  "Device e=\"cuda:12\", Device g=\"cpu:0\") -> ()",
	  "f(Device a=\"cpu\", Device b=\"cuda\", Device c=\"cuda:0\", Device d=\"meta\", "
	  "Device e=\"cuda:12\", Device g=\"cpu\") -> ()" },
	{ "f(ScalarType a=float, ScalarType b=long, ScalarType c=float32, ScalarType d=bool, "
	  "ScalarType e=half) -> ()",
	  "f(ScalarType a=float32, ScalarType b=int64, ScalarType c=float32, ScalarType d=bool, "
	  "ScalarType e=float16) -> ()" },
	{ "f(MemoryFormat a=contiguous_format, MemoryFormat b=channels_last, "
	  "MemoryFormat c=channels_last_3d, MemoryFormat d=preserve_format, Layout l=strided) -> ()",
	  NULL },
	{ "f(str a=\"x\", str b='y', str c=\"q\\\"uote\", str d='it\\'s', str e=\"back\\\\slash\", "
	  "str? f=None, str g=\"\") -> ()",
	  "f(str a=\"x\", str b=\"y\", str c=\"q\\\"uote\", str d=\"it's\", str e=\"back\\\\slash\", "
	  "str? f=None, str g=\"\") -> ()" },
	{ "f(float a=1, float b=-2.5, float c=.5, float d=1e10, float e=1E-3, float f=+3.0, "
	  "float g=2.) -> ()",
	  "f(float a=1.0, float b=-2.5, float c=0.5, float d=10000000000.0, float e=0.001, "
	  "float f=3.0, float g=2.0) -> ()" },
	{ "f(Scalar a=1, Scalar b=1.5, Scalar c=True, Scalar d=-7, Scalar? e=None) -> ()", NULL },
	{ "f(int a=-9223372036854775808, int b=9223372036854775807, int c=+5, int d=007) -> ()",
	  "f(int a=-9223372036854775808, int b=9223372036854775807, int c=5, int d=7) -> ()" },
	{ "f(int[3] a=7, int[1] b=[5], float[2] c=[1, 2], int[2]? d=-1, Tensor[] t=[]) -> ()",
	  "f(int[3] a=[7, 7, 7], int[1] b=[5], float[2] c=[1.0, 2.0], int[2]? d=[-1, -1], "
	  "Tensor[] t=[]) -> ()" },
	{ "f(float x=0.1, float y=0.33333333333333331, float z=1.0000000000000001e-05, "
	  "float w=-0.0, float v=1e+308, float u=5e-324) -> ()",
	  "f(float x=0.1, float y=0.3333333333333333, float z=1e-05, float w=-0.0, float v=1e+308, "
	  "float u=4.94065645841247e-324) -> ()" },
	/* Layout: whitespace, empty lists, names, aliases, types. */
	{ "  aten :: add . Tensor ( Tensor  self ,Tensor other,*,Scalar alpha = 1 )->Tensor  ",
	  "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" },
	{ "f(\n\tTensor a,\n\tint b=1\r\n) ->\n Tensor", "f(Tensor a, int b=1) -> Tensor" },
	{ "f() -> ()", NULL },
	{ "f(*, Tensor(a!) out) -> Tensor(a!)", NULL },
	{ "f(Tensor a) -> (Tensor)", "f(Tensor a) -> Tensor" },
	{ "f(Tensor a) -> Tensor out", "f(Tensor a) -> (Tensor out)" },
	{ "f(Tensor(a|b) x, Tensor(a! -> *) y, Tensor(a -> b|c) z) -> ()", NULL },
	{ "f(Tensor?[]? a, Tensor[3] b, Tensor?[2]? c, bool[2] d=[True, False], float[] e=[], "
	  "int[]? g=None, Tensor(a)?[] h) -> ()",
	  NULL },
	{ "f(Tensor a) -> (Tensor, Tensor b, int, float[] c, Scalar, bool?, str)", NULL },
	{ "ns::op_.over_load2(SymInt a, SymInt[] b) -> SymInt[]",
	  "ns::op_.over_load2(int a, int[] b) -> int[]" },
	{ "f(int[1024] a) -> ()", NULL },
	{ "f(Tensor self, int int, str float) -> ()", NULL },
};

START_TEST(test_valid_schemas)
{
	struct tn_baseline b = tn_test_baseline();

	ck_assert_uint_ge(TN_ARRAY_SIZE(valid), 40);
	for (size_t i = 0; i < TN_ARRAY_SIZE(valid); i++) {
		const char *want = valid[i].canon ? valid[i].canon : valid[i].text;
		tn_schema *s = parse_ok(valid[i].text), *back;
		ck_assert_msg(strcmp(tn_schema_str(s), want) == 0, "schema %zu:\n got  %s\n want %s",
			      i, tn_schema_str(s), want);
		back = parse_ok(tn_schema_str(s));
		ck_assert_str_eq(tn_schema_str(back), want);
		ck_assert_msg(same_schema(s, back), "schema %zu does not round-trip: %s", i, want);
		char why[128] = "";
		ck_assert(tn__schema_types_equal(s, back, why, sizeof(why)));
		ck_assert_str_eq(why, "");
		tn_schema_free(back);
		tn_schema_free(s);
	}
	ck_assert_no_leak(b);
}
END_TEST

static const tn_schema_arg *arg(const tn_schema *s, size_t i)
{
	const tn_schema_arg *a = tn_schema_arg_at(s, i);
	ck_assert_ptr_nonnull(a);
	return a;
}

static const tn_schema_arg *ret(const tn_schema *s, size_t i)
{
	const tn_schema_arg *a = tn_schema_return_at(s, i);
	ck_assert_ptr_nonnull(a);
	return a;
}

#define ck_assert_type(a, k, list, elem_opt, opt, size)              \
	do {                                                         \
		ck_assert_int_eq((a)->type.kind, (k));               \
		ck_assert_int_eq((a)->type.is_list, (list));         \
		ck_assert_int_eq((a)->type.elem_optional, (elem_opt)); \
		ck_assert_int_eq((a)->type.optional, (opt));         \
		ck_assert_int_eq((a)->type.list_size, (size));       \
	} while (0)

static void check_no_alias(const tn_schema_arg *a)
{
	ck_assert_ptr_null(a->alias_set);
	ck_assert_ptr_null(a->alias_after);
	ck_assert(!a->alias_write);
}

START_TEST(test_fields_add)
{
	tn_schema *s = parse_ok("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
	tn_scalar sc;

	ck_assert_str_eq(tn_schema_name(s), "aten::add");
	ck_assert_str_eq(tn_schema_overload(s), "Tensor");
	ck_assert_uint_eq(tn_schema_num_args(s), 3);
	ck_assert_uint_eq(tn_schema_num_returns(s), 1);
	ck_assert_str_eq(arg(s, 0)->name, "self");
	ck_assert_type(arg(s, 0), TN_TYPE_TENSOR, false, false, false, 0);
	ck_assert(!arg(s, 0)->kwarg_only && !arg(s, 0)->has_default);
	ck_assert_uint_eq(arg(s, 0)->default_value.tag, TN_IVALUE_NONE);
	check_no_alias(arg(s, 0));
	ck_assert_str_eq(arg(s, 1)->name, "other");
	ck_assert(!arg(s, 1)->kwarg_only);
	ck_assert_str_eq(arg(s, 2)->name, "alpha");
	ck_assert_type(arg(s, 2), TN_TYPE_SCALAR, false, false, false, 0);
	ck_assert(arg(s, 2)->kwarg_only && arg(s, 2)->has_default);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&arg(s, 2)->default_value, &sc));
	ck_assert_int_eq(arg(s, 2)->default_value.tag, TN_IVALUE_SCALAR);
	ck_assert_int_eq(sc.kind, TN_SCALAR_INT);
	ck_assert_int_eq(sc.v.i, 1);
	ck_assert_ptr_null(ret(s, 0)->name);
	ck_assert_type(ret(s, 0), TN_TYPE_TENSOR, false, false, false, 0);
	check_no_alias(ret(s, 0));
	ck_assert_ptr_null(tn_schema_arg_at(s, 3));
	ck_assert_ptr_null(tn_schema_return_at(s, 1));
	tn_schema_free(s);

	s = parse_ok("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)");
	ck_assert_str_eq(tn_schema_name(s), "add"); /* no namespace is added */
	ck_assert_str_eq(tn_schema_overload(s), "out");
	ck_assert_str_eq(arg(s, 3)->name, "out");
	ck_assert(arg(s, 3)->kwarg_only);
	ck_assert_str_eq(arg(s, 3)->alias_set, "a");
	ck_assert(arg(s, 3)->alias_write);
	ck_assert_ptr_null(arg(s, 3)->alias_after);
	ck_assert_str_eq(ret(s, 0)->alias_set, "a");
	ck_assert(ret(s, 0)->alias_write);
	tn_schema_free(s);

	s = parse_ok("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
	ck_assert_str_eq(tn_schema_name(s), "add_");
	ck_assert_str_eq(arg(s, 0)->alias_set, "a");
	ck_assert(arg(s, 0)->alias_write);
	ck_assert(!arg(s, 0)->kwarg_only);
	tn_schema_free(s);

	s = parse_ok("relu(Tensor self) -> Tensor");
	ck_assert_str_eq(tn_schema_overload(s), "");
	tn_schema_free(s);
}
END_TEST

START_TEST(test_fields_returns_and_aliases)
{
	tn_schema *s = parse_ok("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
	bool bo = true;

	ck_assert_type(arg(s, 1), TN_TYPE_INT, false, false, false, 0);
	ck_assert(!arg(s, 1)->has_default);
	ck_assert_type(arg(s, 2), TN_TYPE_BOOL, false, false, false, 0);
	ck_assert_int_eq(arg(s, 2)->default_value.tag, TN_IVALUE_BOOL);
	ck_assert_tn_ok(tn_ivalue_to_bool(&arg(s, 2)->default_value, &bo));
	ck_assert(!bo);
	ck_assert_uint_eq(tn_schema_num_returns(s), 2);
	ck_assert_str_eq(ret(s, 0)->name, "values");
	ck_assert_str_eq(ret(s, 1)->name, "indices");
	tn_schema_free(s);

	s = parse_ok("unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]");
	ck_assert_str_eq(arg(s, 0)->alias_set, "a");
	ck_assert_str_eq(arg(s, 0)->alias_after, "*");
	ck_assert(!arg(s, 0)->alias_write);
	ck_assert_int_eq(arg(s, 1)->default_value.tag, TN_IVALUE_INT);
	ck_assert_int_eq(arg(s, 1)->default_value.u.i, 0);
	ck_assert_type(ret(s, 0), TN_TYPE_TENSOR, true, false, false, 0);
	ck_assert_str_eq(ret(s, 0)->alias_set, "a");
	ck_assert(!ret(s, 0)->alias_write);
	tn_schema_free(s);

	s = parse_ok("f(Tensor(a|b -> c|d) x, Tensor(a! -> *) y) -> ()");
	ck_assert_str_eq(arg(s, 0)->alias_set, "a|b");
	ck_assert_str_eq(arg(s, 0)->alias_after, "c|d");
	ck_assert_str_eq(arg(s, 1)->alias_set, "a");
	ck_assert_str_eq(arg(s, 1)->alias_after, "*");
	ck_assert(arg(s, 1)->alias_write);
	ck_assert_uint_eq(tn_schema_num_returns(s), 0);
	tn_schema_free(s);

	s = parse_ok("native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, "
		     "Tensor?(a!) running_mean, Tensor?(b!) running_var, bool training, "
		     "float momentum, float eps) -> (Tensor, Tensor, Tensor)");
	ck_assert_type(arg(s, 1), TN_TYPE_TENSOR, false, false, true, 0);
	ck_assert(!arg(s, 1)->has_default);
	ck_assert_type(arg(s, 3), TN_TYPE_TENSOR, false, false, true, 0);
	ck_assert_str_eq(arg(s, 3)->alias_set, "a");
	ck_assert(arg(s, 3)->alias_write);
	ck_assert_str_eq(arg(s, 4)->alias_set, "b");
	ck_assert_type(arg(s, 6), TN_TYPE_FLOAT, false, false, false, 0);
	ck_assert_uint_eq(tn_schema_num_returns(s), 3);
	for (size_t i = 0; i < 3; i++)
		ck_assert_ptr_null(ret(s, i)->name);
	tn_schema_free(s);

	s = parse_ok("_foreach_add.List_out(Tensor[] self, Tensor[] other, *, Scalar alpha=1, "
		     "Tensor(a!)[] out) -> ()");
	ck_assert_type(arg(s, 3), TN_TYPE_TENSOR, true, false, false, 0);
	ck_assert_str_eq(arg(s, 3)->alias_set, "a");
	ck_assert(arg(s, 3)->alias_write);
	tn_schema_free(s);
}
END_TEST

START_TEST(test_fields_lists_and_optionals)
{
	const int64_t *ri;
	const double *rd;
	const bool *rb;
	size_t n;
	tn_schema *s = parse_ok("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
				"ScalarType? dtype=None) -> Tensor");

	ck_assert_type(arg(s, 1), TN_TYPE_INT, true, false, true, 1);
	ck_assert(!arg(s, 1)->has_default);
	ck_assert_type(arg(s, 3), TN_TYPE_SCALAR_TYPE, false, false, true, 0);
	ck_assert(arg(s, 3)->kwarg_only && arg(s, 3)->has_default);
	ck_assert_uint_eq(arg(s, 3)->default_value.tag, TN_IVALUE_NONE);
	tn_schema_free(s);

	s = parse_ok("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
		     "int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor");
	ck_assert(arg(s, 2)->has_default);
	ck_assert_uint_eq(arg(s, 2)->default_value.tag, TN_IVALUE_NONE);
	ck_assert_type(arg(s, 3), TN_TYPE_INT, true, false, false, 2);
	/* A bare int for int[N] is broadcast to N copies. */
	ck_assert_tn_ok(tn_ivalue_to_int_list(&arg(s, 3)->default_value, &n, &ri));
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(ri[0], 1);
	ck_assert_int_eq(ri[1], 1);
	ck_assert_tn_ok(tn_ivalue_to_int_list(&arg(s, 4)->default_value, &n, &ri));
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(ri[0], 0);
	ck_assert_int_eq(arg(s, 6)->default_value.u.i, 1);
	tn_schema_free(s);

	s = parse_ok("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor");
	ck_assert_type(arg(s, 1), TN_TYPE_TENSOR, true, true, false, 0);
	tn_schema_free(s);

	s = parse_ok("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor");
	ck_assert_type(arg(s, 2), TN_TYPE_STR, false, false, true, 0);
	ck_assert(arg(s, 2)->kwarg_only);
	ck_assert(!arg(s, 2)->has_default);
	tn_schema_free(s);

	s = parse_ok("empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
		     "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) "
		     "-> Tensor");
	ck_assert_type(arg(s, 0), TN_TYPE_INT, true, false, false, 0); /* SymInt is int */
	ck_assert(!arg(s, 0)->kwarg_only);
	static const enum tn_type_kind kinds[] = { TN_TYPE_INT, TN_TYPE_SCALAR_TYPE, TN_TYPE_LAYOUT,
						   TN_TYPE_DEVICE, TN_TYPE_BOOL,
						   TN_TYPE_MEMORY_FORMAT };
	for (size_t i = 1; i < 6; i++) {
		ck_assert_type(arg(s, i), kinds[i], false, false, true, 0);
		ck_assert(arg(s, i)->kwarg_only && arg(s, i)->has_default);
		ck_assert_uint_eq(arg(s, i)->default_value.tag, TN_IVALUE_NONE);
	}
	tn_schema_free(s);

	s = parse_ok("aten::_foo(Tensor[] tensors, float[] w=[1.0, 2.5], bool[] m=[True, False]) -> ()");
	ck_assert_str_eq(tn_schema_name(s), "aten::_foo");
	ck_assert_type(arg(s, 0), TN_TYPE_TENSOR, true, false, false, 0);
	ck_assert_tn_ok(tn_ivalue_to_double_list(&arg(s, 1)->default_value, &n, &rd));
	ck_assert_uint_eq(n, 2);
	ck_assert_double_eq(rd[0], 1.0);
	ck_assert_double_eq(rd[1], 2.5);
	ck_assert_tn_ok(tn_ivalue_to_bool_list(&arg(s, 2)->default_value, &n, &rb));
	ck_assert_uint_eq(n, 2);
	ck_assert(rb[0] && !rb[1]);
	ck_assert_uint_eq(tn_schema_num_returns(s), 0);
	tn_schema_free(s);

	s = parse_ok("f(Tensor?[]? a, Tensor[3] b, Tensor?[2]? c, int[2] d=[], Tensor[] t=[]) -> ()");
	ck_assert_type(arg(s, 0), TN_TYPE_TENSOR, true, true, true, 0);
	ck_assert_type(arg(s, 1), TN_TYPE_TENSOR, true, false, false, 3);
	ck_assert_type(arg(s, 2), TN_TYPE_TENSOR, true, true, true, 2);
	ck_assert_tn_ok(tn_ivalue_to_int_list(&arg(s, 3)->default_value, &n, &ri));
	ck_assert_uint_eq(n, 0);
	tn_tensor *const *rt;
	ck_assert_tn_ok(tn_ivalue_to_tensor_list(&arg(s, 4)->default_value, &n, &rt));
	ck_assert_uint_eq(n, 0);
	tn_schema_free(s);
}
END_TEST

START_TEST(test_default_values)
{
	tn_schema *s = parse_ok(
		"f(float a=1, float b=-1e-5, float c=.5, Scalar d=2.5, Scalar e=True, Scalar g=-3, "
		"str h='it\\'s \"x\" \\\\', ScalarType i=long, ScalarType j=float16, "
		"Device k=\"cuda:3\", Device l=\"cuda\", Device m=\"meta\", Layout n=strided, "
		"MemoryFormat o=channels_last_3d, MemoryFormat p=preserve_format, "
		"int q=-9223372036854775808) -> ()");
	const char *str = NULL;
	tn_device dev;
	enum tn_dtype dt;
	enum tn_layout lay;
	enum tn_memory_format mf;
	tn_scalar sc;

	ck_assert_int_eq(arg(s, 0)->default_value.tag, TN_IVALUE_DOUBLE);
	ck_assert_double_eq(arg(s, 0)->default_value.u.d, 1.0);
	ck_assert_double_eq(arg(s, 1)->default_value.u.d, -1e-5);
	ck_assert_double_eq(arg(s, 2)->default_value.u.d, 0.5);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&arg(s, 3)->default_value, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_DOUBLE);
	ck_assert_double_eq(sc.v.d, 2.5);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&arg(s, 4)->default_value, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_BOOL);
	ck_assert(sc.v.b);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&arg(s, 5)->default_value, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_INT);
	ck_assert_int_eq(sc.v.i, -3);
	ck_assert_tn_ok(tn_ivalue_to_string(&arg(s, 6)->default_value, &str));
	ck_assert_str_eq(str, "it's \"x\" \\");
	ck_assert_tn_ok(tn_ivalue_to_dtype(&arg(s, 7)->default_value, &dt));
	ck_assert_int_eq(dt, TN_INT64);
	ck_assert_tn_ok(tn_ivalue_to_dtype(&arg(s, 8)->default_value, &dt));
	ck_assert_int_eq(dt, TN_FLOAT16);
	ck_assert_tn_ok(tn_ivalue_to_device(&arg(s, 9)->default_value, &dev));
	ck_assert_int_eq(dev.type, TN_DEVICE_CUDA);
	ck_assert_int_eq(dev.index, 3);
	ck_assert_tn_ok(tn_ivalue_to_device(&arg(s, 10)->default_value, &dev));
	ck_assert_int_eq(dev.type, TN_DEVICE_CUDA);
	ck_assert_int_eq(dev.index, -1); /* the current device, as PyTorch's Device("cuda") */
	ck_assert_tn_ok(tn_ivalue_to_device(&arg(s, 11)->default_value, &dev));
	ck_assert_int_eq(dev.type, TN_DEVICE_META);
	ck_assert_int_eq(dev.index, 0);
	ck_assert_tn_ok(tn_ivalue_to_layout(&arg(s, 12)->default_value, &lay));
	ck_assert_int_eq(lay, TN_STRIDED);
	ck_assert_tn_ok(tn_ivalue_to_memory_format(&arg(s, 13)->default_value, &mf));
	ck_assert_int_eq(mf, TN_CHANNELS_LAST_3D);
	ck_assert_tn_ok(tn_ivalue_to_memory_format(&arg(s, 14)->default_value, &mf));
	ck_assert_int_eq(mf, TN_PRESERVE_FORMAT);
	ck_assert_int_eq(arg(s, 15)->default_value.u.i, INT64_MIN);
	ck_assert_str_eq(tn_schema_str(s),
			 "f(float a=1.0, float b=-1e-05, float c=0.5, Scalar d=2.5, Scalar e=True, "
			 "Scalar g=-3, str h=\"it's \\\"x\\\" \\\\\", ScalarType i=int64, "
			 "ScalarType j=float16, Device k=\"cuda:3\", Device l=\"cuda\", "
			 "Device m=\"meta\", Layout n=strided, MemoryFormat o=channels_last_3d, "
			 "MemoryFormat p=preserve_format, int q=-9223372036854775808) -> ()");
	/* Every default fits its own argument's type. */
	for (size_t i = 0; i < tn_schema_num_args(s); i++)
		ck_assert_msg(tn__ivalue_fits(&arg(s, i)->default_value, &arg(s, i)->type),
			      "default %zu", i);
	tn_schema_free(s);
}
END_TEST

/* Doubles print in the shortest of %.15g/%.16g/%.17g that reads back exactly. */
START_TEST(test_double_text)
{
	static const struct {
		double value;
		const char *text;
	} cases[] = {
		{ 0.1, "0.1" },
		{ 1.0 / 3.0, "0.3333333333333333" },
		{ 2.0 / 3.0, "0.6666666666666666" },
		{ 0.1 + 0.2, "0.30000000000000004" },
		{ 100.0, "100.0" },
		{ 1e15, "1e+15" },
		{ 123456789012345.0, "123456789012345.0" },
		{ 1e-05, "1e-05" },
		{ 1.7976931348623157e308, "1.7976931348623157e+308" },
		{ -2.2250738585072014e-308, "-2.2250738585072014e-308" },
		{ 9007199254740993.0, "9007199254740992.0" },
	};
	char text[128], expect[128];

	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++) {
		/* Build the schema from the value with %.17g, so the parser sees the exact double. */
		snprintf(text, sizeof(text), "f(float x=%.17g) -> ()", cases[i].value);
		snprintf(expect, sizeof(expect), "f(float x=%s) -> ()", cases[i].text);
		tn_schema *s = parse_ok(text);
		ck_assert_str_eq(tn_schema_str(s), expect);
		double d = arg(s, 0)->default_value.u.d;
		ck_assert(memcmp(&d, &cases[i].value, sizeof(d)) == 0);
		tn_schema_free(s);
	}
}
END_TEST

/* A comma as the decimal point in the caller's locale changes nothing. */
START_TEST(test_locale_independence)
{
	static const char *const names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
					     "ru_RU.UTF-8", "C.UTF-8" };
	const char *got = NULL;

	for (size_t i = 0; i < TN_ARRAY_SIZE(names) && !got; i++)
		got = setlocale(LC_NUMERIC, names[i]);
	tn_schema *s = parse_ok("f(float x=1.5, float y=2.5e-3, float[] z=[0.25]) -> ()");
	ck_assert_double_eq(arg(s, 0)->default_value.u.d, 1.5);
	ck_assert_str_eq(tn_schema_str(s), "f(float x=1.5, float y=0.0025, float[] z=[0.25]) -> ()");
	tn_schema_free(s);
	setlocale(LC_NUMERIC, "C");
}
END_TEST

static const struct {
	const char *text, *msg;
} invalid[] = {
	{ "", "schema:1:1: expected an operator name but found end of input" },
	{ "(Tensor self) -> Tensor", "schema:1:1: expected an operator name but found '('" },
	{ "123(Tensor a) -> ()", "schema:1:1: expected an operator name but found '123'" },
	{ "aten::(Tensor a) -> ()", "schema:1:7: expected an operator name after '::' but found '('" },
	{ "add.(Tensor a) -> ()", "schema:1:5: expected an overload name after '.' but found '('" },
	{ "add.Tensor.x(Tensor a) -> ()",
	  "schema:1:11: expected '(' after the operator name but found '.'" },
	{ "aten::add::x(Tensor a) -> ()",
	  "schema:1:10: expected '(' after the operator name but found '::'" },
	{ "add Tensor self", "schema:1:5: expected '(' after the operator name but found 'Tensor'" },
	{ "f(Tenser x) -> ()", "schema:1:3: unknown type 'Tenser'" },
	{ "add.Tensor(Tensor self, Tenser other) -> Tensor", "schema:1:25: unknown type 'Tenser'" },
	{ "f(Tensor self, Tensor self) -> Tensor", "schema:1:23: duplicate argument name 'self'" },
	{ "f(Tensor a", "schema:1:11: expected ',' or ')' but found end of input" },
	{ "f(Tensor a x) -> ()", "schema:1:12: expected ',' or ')' but found 'x'" },
	{ "f(Tensor a) Tensor", "schema:1:13: expected '->' after the arguments but found 'Tensor'" },
	{ "f(Tensor a)", "schema:1:12: expected '->' after the arguments but found end of input" },
	{ "f(Tensor a) - > Tensor", "schema:1:13: expected '->' after the arguments but found '-'" },
	{ "f(Tensor a) ->", "schema:1:15: expected a return type but found end of input" },
	{ "f(Tensor a) -> Tensor x y", "schema:1:25: unexpected 'y' after the returns" },
	{ "f(int x) -> ()\x01", "schema:1:15: unexpected '\\x01' after the returns" },
	{ "f(int a, *) -> ()", "schema:1:10: '*' must be followed by keyword-only arguments" },
	{ "f(*) -> ()", "schema:1:3: '*' must be followed by keyword-only arguments" },
	{ "f(*, int a, *, int b) -> ()",
	  "schema:1:13: a second '*' in the arguments (the first is at column 3)" },
	{ "f(Tensor) -> ()", "schema:1:9: expected an argument name but found ')'" },
	{ "f(Tensor a,) -> ()", "schema:1:12: expected a type but found ')'" },
	{ "f(int \xc3\xa9) -> ()", "schema:1:7: expected an argument name but found '\\xc3'" },
	{ "f(int(a) x) -> ()", "schema:1:6: alias annotation on a non-Tensor type 'int'" },
	{ "f(Tensor x, float?(a!) y) -> ()",
	  "schema:1:19: alias annotation on a non-Tensor type 'float?'" },
	{ "f(str[] x) -> ()", "schema:1:3: unsupported list element type 'str'" },
	{ "f(int?[] x) -> ()", "schema:1:3: unsupported list element type 'int?'" },
	{ "f(Scalar[2] x) -> ()", "schema:1:3: unsupported list element type 'Scalar'" },
	{ "f(SymInt?[] x) -> ()", "schema:1:3: unsupported list element type 'SymInt?'" },
	{ "f(int[0] x) -> ()", "schema:1:7: list size must be between 1 and 1024 but found '0'" },
	{ "f(int[1025] x) -> ()", "schema:1:7: list size must be between 1 and 1024 but found '1025'" },
	{ "f(int[99999999999999999999999] x) -> ()",
	  "schema:1:7: list size must be between 1 and 1024 but found '99999999999999999999999'" },
	{ "f(int[-1] x) -> ()", "schema:1:7: expected a list size or ']' but found '-'" },
	{ "f(int[2 x) -> ()", "schema:1:9: expected ']' but found 'x'" },
	{ "f(Tensor(a x) -> ()", "schema:1:12: expected ')' to close the alias annotation but found 'x'" },
	{ "f(Tensor() x) -> ()", "schema:1:10: expected an alias set name but found ')'" },
	{ "f(Tensor(a|) x) -> ()", "schema:1:12: expected an alias set name but found ')'" },
	{ "f(Tensor(a ->) x) -> ()", "schema:1:14: expected an alias set name but found ')'" },
	{ "f(Tensor(a)(b) x) -> ()", "schema:1:12: expected an argument name but found '('" },
	{ "f(int alpha=1.5) -> ()",
	  "schema:1:13: default value for argument 'alpha' does not fit type 'int': 1.5" },
	{ "add.Tensor(Tensor self, Tensor other, *, int alpha=1.5) -> Tensor",
	  "schema:1:52: default value for argument 'alpha' does not fit type 'int': 1.5" },
	{ "f(Tensor x=None) -> ()",
	  "schema:1:12: default value for argument 'x' does not fit type 'Tensor': None" },
	{ "f(int x=None) -> ()",
	  "schema:1:9: default value for argument 'x' does not fit type 'int': None" },
	{ "f(bool x=1) -> ()", "schema:1:10: default value for argument 'x' does not fit type 'bool': 1" },
	{ "f(float x=True) -> ()",
	  "schema:1:11: default value for argument 'x' does not fit type 'float': True" },
	{ "f(str x=abc) -> ()", "schema:1:9: default value for argument 'x' does not fit type 'str': abc" },
	{ "f(str x=1) -> ()", "schema:1:9: default value for argument 'x' does not fit type 'str': 1" },
	{ "f(Scalar x=\"1\") -> ()",
	  "schema:1:12: default value for argument 'x' does not fit type 'Scalar': \"1\"" },
	{ "f(ScalarType t=floaty) -> ()",
	  "schema:1:16: default value for argument 't' does not fit type 'ScalarType': floaty" },
	{ "f(MemoryFormat m=strided) -> ()",
	  "schema:1:18: default value for argument 'm' does not fit type 'MemoryFormat': strided" },
	{ "f(Layout l=sparse) -> ()",
	  "schema:1:12: default value for argument 'l' does not fit type 'Layout': sparse" },
	{ "f(Device d=cpu) -> ()",
	  "schema:1:12: default value for argument 'd' does not fit type 'Device': cpu" },
	{ "f(Device d=\"xpu\") -> ()",
	  "schema:1:12: default value for argument 'd' does not fit type 'Device': \"xpu\"" },
	{ "f(Device d=\"cpu:1\") -> ()",
	  "schema:1:12: default value for argument 'd' does not fit type 'Device': \"cpu:1\"" },
	{ "f(Device d=\"cuda:-1\") -> ()",
	  "schema:1:12: default value for argument 'd' does not fit type 'Device': \"cuda:-1\"" },
	{ "f(Device d=\"cuda:99999999999\") -> ()",
	  "schema:1:12: default value for argument 'd' does not fit type 'Device': \"cuda:99999999999\"" },
	{ "f(int[] x=1) -> ()", "schema:1:11: default value for argument 'x' does not fit type 'int[]': 1" },
	{ "f(float[2] x=1.0) -> ()",
	  "schema:1:14: default value for argument 'x' does not fit type 'float[2]': 1.0" },
	{ "f(int[2] x=[1, 2, 3]) -> ()",
	  "schema:1:12: default value for argument 'x' does not fit type 'int[2]': [1, 2, 3]" },
	{ "f(int[] x=[1, 2.5]) -> ()",
	  "schema:1:11: default value for argument 'x' does not fit type 'int[]': [1, 2.5]" },
	{ "f(bool[] x=[1]) -> ()",
	  "schema:1:12: default value for argument 'x' does not fit type 'bool[]': [1]" },
	{ "f(float[] x=[True]) -> ()",
	  "schema:1:13: default value for argument 'x' does not fit type 'float[]': [True]" },
	{ "f(Tensor[] x=[1]) -> ()",
	  "schema:1:14: default value for argument 'x' does not fit type 'Tensor[]': [1]" },
	{ "f(int[2]? x=\"ab\") -> ()",
	  "schema:1:13: default value for argument 'x' does not fit type 'int[2]?': \"ab\"" },
	{ "f(int[] x=[1, [2]]) -> ()",
	  "schema:1:15: expected a number, True or False in the list of argument 'x' but found '['" },
	{ "f(int[] x=[1 2]) -> ()", "schema:1:14: expected ',' or ']' but found '2'" },
	{ "f(int[] x=[1,]) -> ()",
	  "schema:1:14: expected a number, True or False in the list of argument 'x' but found ']'" },
	{ "f(int[] x=[1", "schema:1:13: expected ',' or ']' but found end of input" },
	{ "f(int x=) -> ()", "schema:1:9: expected a default value for argument 'x' but found ')'" },
	{ "f(int x=--1) -> ()", "schema:1:9: expected a default value for argument 'x' but found '-'" },
	{ "f(float x=1.5.5) -> ()", "schema:1:14: expected ',' or ')' but found '.'" },
	{ "f(int x=1.5.5) -> ()",
	  "schema:1:9: default value for argument 'x' does not fit type 'int': 1.5" },
	{ "f(int x=99999999999999999999) -> ()",
	  "schema:1:9: default value for argument 'x' is out of range: 99999999999999999999" },
	{ "f(int x=-9223372036854775809) -> ()",
	  "schema:1:9: default value for argument 'x' is out of range: -9223372036854775809" },
	{ "f(float x=1e400) -> ()", "schema:1:11: default value for argument 'x' is out of range: 1e400" },
	{ "f(str s=\"abc) -> ()",
	  "schema:1:9: unterminated string in the default value of argument 's'" },
	{ "f(str s='abc\\", "schema:1:9: unterminated string in the default value of argument 's'" },
	{ "f(str s='a\\n') -> ()",
	  "schema:1:11: unknown escape sequence '\\n' in the default value of argument 's'" },
	{ "f(int x=1) -> (Tensor a=1)", "schema:1:24: a return cannot have a default value" },
	{ "f(int x) -> (*, Tensor a)", "schema:1:14: '*' is not allowed in the returns" },
	{ "f(int x) -> (Tensor a, Tensor a)", "schema:1:31: duplicate return name 'a'" },
	{ "f(int x) -> (Tensor a,)", "schema:1:23: expected a return type but found ')'" },
	{ "f(int x) -> (Tensor a Tensor b)", "schema:1:23: expected ',' or ')' but found 'Tensor'" },
	{ "f(int x) -> Tensor??", "schema:1:20: unexpected '?' after the returns" },
	{ "f(int x)\n  -> Tenser", "schema:2:6: unknown type 'Tenser'" },
	{ "f(Tensor a) -> Tenser\n", "schema:1:16: unknown type 'Tenser'" },
	{ "f(Tensor\n\n\tx,\n y y) -> ()", "schema:4:2: unknown type 'y'" },
	{ "f(Tensor\n\n\tx\n y) -> ()", "schema:4:2: expected ',' or ')' but found 'y'" },
	{ "f(Taaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa x) -> ()",
	  "schema:1:3: unknown type "
	  "'Taaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'" },
};

START_TEST(test_invalid_schemas)
{
	struct tn_baseline b = tn_test_baseline();
	tn_schema *s;

	ck_assert_uint_ge(TN_ARRAY_SIZE(invalid), 40);
	for (size_t i = 0; i < TN_ARRAY_SIZE(invalid); i++) {
		s = (tn_schema *)&b; /* untouched on failure */
		tn_clear_error();
		int r = tn_schema_parse(invalid[i].text, &s);
		ck_assert_msg(r == TN_EINVAL, "'%s' gave %d (%s)", invalid[i].text, r,
			      r ? tn_last_error() : tn_schema_str(s));
		ck_assert_msg(strcmp(tn_last_error(), invalid[i].msg) == 0,
			      "'%s':\n got  %s\n want %s", invalid[i].text, tn_last_error(),
			      invalid[i].msg);
		ck_assert_ptr_eq(s, (tn_schema *)&b);
	}
	ck_assert_tn_error(tn_schema_parse(NULL, &s), TN_EINVAL, "tn_schema_parse: NULL argument");
	ck_assert_tn_error(tn_schema_parse("f() -> ()", NULL), TN_EINVAL,
			   "tn_schema_parse: NULL argument");
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_accessors_null)
{
	ck_assert_ptr_null(tn_schema_name(NULL));
	ck_assert_ptr_null(tn_schema_overload(NULL));
	ck_assert_ptr_null(tn_schema_str(NULL));
	ck_assert_uint_eq(tn_schema_num_args(NULL), 0);
	ck_assert_uint_eq(tn_schema_num_returns(NULL), 0);
	ck_assert_ptr_null(tn_schema_arg_at(NULL, 0));
	ck_assert_ptr_null(tn_schema_return_at(NULL, 0));
	tn_schema_free(NULL);
}
END_TEST

START_TEST(test_signature)
{
	tn_schema *s = NULL;

	ck_assert_tn_ok(tn__schema_parse_signature("(Tensor self, Scalar alpha) -> Tensor", &s));
	ck_assert_str_eq(tn_schema_name(s), "");
	ck_assert_str_eq(tn_schema_overload(s), "");
	ck_assert_uint_eq(tn_schema_num_args(s), 2);
	ck_assert_str_eq(tn_schema_str(s), "(Tensor self, Scalar alpha) -> Tensor");
	tn_schema *op = parse_ok("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
	char why[128];
	ck_assert(!tn__schema_types_equal(op, s, why, sizeof(why)));
	ck_assert_str_eq(why, "3 arguments against 2");
	tn_schema_free(s);
	ck_assert_tn_ok(tn__schema_parse_signature(
		" ( Tensor a , Tensor b , Scalar c ) -> Tensor ", &s));
	ck_assert(tn__schema_types_equal(op, s, why, sizeof(why)));
	tn_schema_free(s);
	tn_schema_free(op);

	ck_assert_tn_ok(tn__schema_parse_signature("() -> ()", &s));
	ck_assert_str_eq(tn_schema_str(s), "() -> ()");
	tn_schema_free(s);
	s = NULL;
	ck_assert_tn_error(tn__schema_parse_signature("add(Tensor a) -> Tensor", &s), TN_EINVAL,
			   "schema:1:1: expected '(' to start a signature but found 'add'");
	ck_assert_tn_error(tn__schema_parse_signature("(Tensor a) -> Tensor x x", &s), TN_EINVAL,
			   "schema:1:24: unexpected 'x' after the returns");
	ck_assert_tn_error(tn__schema_parse_signature(NULL, &s), TN_EINVAL,
			   "tn__schema_parse_signature: NULL argument");
	ck_assert_ptr_null(s);
}
END_TEST

static tn_type ty(enum tn_type_kind kind, bool list, bool elem_opt, bool opt, int32_t size)
{
	tn_type t = { kind, list, elem_opt, opt, size };
	return t;
}

START_TEST(test_type_format)
{
	char buf[32];

	tn_type t = ty(TN_TYPE_INT, true, false, true, 2);
	ck_assert_int_eq(tn__type_format(&t, buf, sizeof(buf)), 7);
	ck_assert_str_eq(buf, "int[2]?");
	t = ty(TN_TYPE_TENSOR, true, true, false, 0);
	tn__type_format(&t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "Tensor?[]");
	t = ty(TN_TYPE_MEMORY_FORMAT, false, false, true, 0);
	tn__type_format(&t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "MemoryFormat?");
	t = ty(TN_TYPE_TENSOR, true, true, true, 3);
	tn__type_format(&t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "Tensor?[3]?");
	/* Truncated as snprintf does, returning the full length. */
	ck_assert_int_eq(tn__type_format(&t, buf, 5), 11);
	ck_assert_str_eq(buf, "Tens");
	t.kind = (enum tn_type_kind)99;
	tn__type_format(&t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "invalid?[3]?");
	ck_assert_int_eq(tn__type_format(NULL, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_ivalue_fits)
{
	int64_t i2[] = { 1, 2 }, i3[] = { 1, 2, 3 };
	double d2[] = { 1, 2 };
	bool b1[] = { true };
	tn_tensor *t;
	int64_t sizes[] = { 2 };
	ck_assert_tn_ok(tn_zeros(1, sizes, TN_FLOAT32, TN_CPU, &t));
	tn_tensor *tl_some[] = { t, t }, *tl_none[] = { t, NULL };
	tn_ivalue none = tn_ivalue_none(), vi = tn_ivalue_int(3), vd = tn_ivalue_double(0.5),
		  vb = tn_ivalue_bool(true), si = tn_ivalue_scalar(tn_scalar_int(1)),
		  sd = tn_ivalue_scalar(tn_scalar_double(1.5)),
		  sb = tn_ivalue_scalar(tn_scalar_bool(false)), vt, li2, li3, li0, ld2, lb1, lt, ltn,
		  str, dt = tn_ivalue_dtype(TN_INT8),
		  dev = tn_ivalue_device((tn_device){ TN_DEVICE_CPU, 0 }),
		  lay = tn_ivalue_layout(TN_STRIDED), mf = tn_ivalue_memory_format(TN_CHANNELS_LAST);
	ck_assert_tn_ok(tn_ivalue_tensor(t, &vt));
	ck_assert_tn_ok(tn_ivalue_int_list(2, i2, &li2));
	ck_assert_tn_ok(tn_ivalue_int_list(3, i3, &li3));
	ck_assert_tn_ok(tn_ivalue_int_list(0, NULL, &li0));
	ck_assert_tn_ok(tn_ivalue_double_list(2, d2, &ld2));
	ck_assert_tn_ok(tn_ivalue_bool_list(1, b1, &lb1));
	ck_assert_tn_ok(tn_ivalue_tensor_list(2, tl_some, &lt));
	ck_assert_tn_ok(tn_ivalue_tensor_list(2, tl_none, &ltn));
	ck_assert_tn_ok(tn_ivalue_string("mean", &str));

	const tn_type T = ty(TN_TYPE_TENSOR, false, false, false, 0),
		      To = ty(TN_TYPE_TENSOR, false, false, true, 0),
		      I = ty(TN_TYPE_INT, false, false, false, 0),
		      F = ty(TN_TYPE_FLOAT, false, false, false, 0),
		      B = ty(TN_TYPE_BOOL, false, false, false, 0),
		      S = ty(TN_TYPE_SCALAR, false, false, false, 0),
		      So = ty(TN_TYPE_SCALAR, false, false, true, 0),
		      Str = ty(TN_TYPE_STR, false, false, false, 0),
		      Dt = ty(TN_TYPE_SCALAR_TYPE, false, false, false, 0),
		      Dev = ty(TN_TYPE_DEVICE, false, false, false, 0),
		      Lay = ty(TN_TYPE_LAYOUT, false, false, false, 0),
		      Mf = ty(TN_TYPE_MEMORY_FORMAT, false, false, true, 0),
		      IL = ty(TN_TYPE_INT, true, false, false, 0),
		      IL2 = ty(TN_TYPE_INT, true, false, false, 2),
		      IL2o = ty(TN_TYPE_INT, true, false, true, 2),
		      FL = ty(TN_TYPE_FLOAT, true, false, false, 0),
		      BL = ty(TN_TYPE_BOOL, true, false, false, 0),
		      TL = ty(TN_TYPE_TENSOR, true, false, false, 0),
		      TLo = ty(TN_TYPE_TENSOR, true, true, false, 0),
		      TL3 = ty(TN_TYPE_TENSOR, true, false, false, 3);
	/* A list of any length fits T[N]: N is a size hint (sum's int[1] dim takes [0, 2]). */
	struct {
		const tn_ivalue *v;
		const tn_type *t;
		bool fits;
	} cases[] = {
		{ &none, &T, false },  { &none, &To, true },  { &none, &So, true },
		{ &none, &IL2o, true }, { &none, &Mf, true }, { &vt, &T, true },
		{ &vt, &To, true },    { &vi, &T, false },    { &vi, &I, true },
		{ &vi, &F, true },     { &vi, &S, true },     { &vi, &B, false },
		{ &vd, &I, false },    { &vd, &F, true },     { &vd, &S, true },
		{ &vb, &B, true },     { &vb, &I, false },    { &vb, &S, true },
		{ &si, &I, true },     { &si, &F, true },     { &si, &B, false },
		{ &sd, &F, true },     { &sd, &I, false },    { &sb, &B, true },
		{ &sb, &F, false },    { &si, &S, true },     { &sd, &So, true },
		{ &str, &Str, true },  { &str, &S, false },   { &dt, &Dt, true },
		{ &dt, &I, false },    { &dev, &Dev, true },  { &lay, &Lay, true },
		{ &lay, &Mf, false },  { &mf, &Mf, true },    { &li2, &IL, true },
		{ &li3, &IL, true },   { &li2, &IL2, true },  { &li3, &IL2, true },
		{ &li0, &IL2, true },  { &vi, &IL2, true },   { &si, &IL2o, true },
		{ &vi, &IL, false },   { &vd, &IL2, false },  { &li2, &FL, false },
		{ &ld2, &FL, true },   { &ld2, &IL, false },  { &lb1, &BL, true },
		{ &lb1, &IL, false },  { &lt, &TL, true },    { &lt, &TLo, true },
		{ &ltn, &TL, false },  { &ltn, &TLo, true },  { &lt, &TL3, true },
		{ &vt, &TL, false },   { &li2, &I, false },
	};
	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++)
		ck_assert_msg(tn__ivalue_fits(cases[i].v, cases[i].t) == cases[i].fits,
			      "case %zu: %s for a %s", i, tn_ivalue_type_name(cases[i].v),
			      cases[i].fits ? "fit" : "misfit");
	ck_assert(!tn__ivalue_fits(NULL, &T));
	ck_assert(!tn__ivalue_fits(&vt, NULL));
	tn_ivalue bad = tn_ivalue_scalar(tn_scalar_int(1));
	bad.aux = 9;
	ck_assert(!tn__ivalue_fits(&bad, &S));

	tn_ivalue *all[] = { &vt, &li2, &li3, &li0, &ld2, &lb1, &lt, &ltn, &str };
	for (size_t i = 0; i < TN_ARRAY_SIZE(all); i++)
		tn_ivalue_release(all[i]);
	tn_tensor_unref(t);
}
END_TEST

START_TEST(test_types_equal)
{
	static const struct {
		const char *a, *b, *why; /* why NULL: equal */
	} cases[] = {
		{ "f(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
		  "g.x(Tensor(a!) a, Tensor b, Scalar c) -> Tensor(a!)", NULL },
		{ "f(int[2] a=1, SymInt b) -> (Tensor x, Tensor y)", "f(int[2] c, int d) -> (Tensor, Tensor)",
		  NULL },
		{ "f(Tensor a, int b) -> ()", "f(Tensor a, Tensor b) -> ()",
		  "argument 2 is 'int' in one and 'Tensor' in the other" },
		{ "f(Tensor a, int b, int c) -> ()", "f(Tensor a, int b) -> ()", "3 arguments against 2" },
		{ "f(Tensor a) -> ()", "f() -> ()", "1 argument against 0" },
		{ "f(int[2] a) -> ()", "f(int[] a) -> ()",
		  "argument 1 is 'int[2]' in one and 'int[]' in the other" },
		{ "f(Tensor? a) -> ()", "f(Tensor a) -> ()",
		  "argument 1 is 'Tensor?' in one and 'Tensor' in the other" },
		{ "f(Tensor?[] a) -> ()", "f(Tensor[]? a) -> ()",
		  "argument 1 is 'Tensor?[]' in one and 'Tensor[]?' in the other" },
		{ "f(Tensor a) -> Tensor", "f(Tensor a) -> (Tensor, Tensor)", "1 return against 2" },
		{ "f(Tensor a) -> (Tensor, float)", "f(Tensor a) -> (Tensor, Scalar)",
		  "return 2 is 'float' in one and 'Scalar' in the other" },
	};
	char why[128];

	for (size_t i = 0; i < TN_ARRAY_SIZE(cases); i++) {
		tn_schema *a = parse_ok(cases[i].a), *b = parse_ok(cases[i].b);
		strcpy(why, "unchanged");
		bool eq = tn__schema_types_equal(a, b, why, sizeof(why));
		ck_assert_msg(eq == !cases[i].why, "case %zu: %s", i, why);
		ck_assert_str_eq(why, cases[i].why ? cases[i].why : "unchanged");
		ck_assert(tn__schema_types_equal(b, a, NULL, 0) == eq);
		tn_schema_free(a);
		tn_schema_free(b);
	}
	ck_assert(!tn__schema_types_equal(NULL, NULL, why, sizeof(why)));
	ck_assert_str_eq(why, "a schema is NULL");
}
END_TEST

START_TEST(test_fault_injection)
{
	static const char *const texts[] = {
		"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
		"conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
		"int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor",
		"f(Tensor(a|b -> c|d) x, str s=\"a\\\"b\", float[] w=[1.0, 2.5, 3, 4, 5, 6, 7, 8, 9], "
		"bool[] m=[True, False], Tensor[] t=[], float e=1.0000000000000000000000000000000000000"
		"0000000000000000000000000000001, Device d=\"cuda:1\", ScalarType dt=float) -> ()",
		"f(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9) "
		"-> (Tensor r0, Tensor r1, Tensor r2, Tensor r3, Tensor r4, Tensor r5)",
		/* A failure in the middle must free what was built. */
		"f(Tensor(a!) x, str s=\"abc\", int[] l=[1, 2], Tenser y) -> ()",
		"(Tensor self, Scalar alpha) -> Tensor",
	};
	struct tn_baseline b = tn_test_baseline();

	for (size_t k = 0; k < TN_ARRAY_SIZE(texts); k++) {
		bool signature = texts[k][0] == '(';
		int failures = 0, want_r;
		tn_schema *want = NULL;
		char want_msg[256];

		tn_clear_error();
		want_r = signature ? tn__schema_parse_signature(texts[k], &want)
				   : tn_schema_parse(texts[k], &want);
		snprintf(want_msg, sizeof(want_msg), "%s", tn_last_error());
		for (uint64_t n = 1;; n++) {
			tn_schema *s = (tn_schema *)&b;
			tn_alloc_fail_nth(n);
			tn_clear_error();
			int r = signature ? tn__schema_parse_signature(texts[k], &s)
					  : tn_schema_parse(texts[k], &s);
			uint64_t attempts = tn_alloc_fail_nth(0);
			if (r == want_r && attempts < n) {
				/* The injected failure was never reached: the normal result. */
				if (r == 0) {
					ck_assert_str_eq(tn_schema_str(s), tn_schema_str(want));
					tn_schema_free(s);
				} else {
					ck_assert_str_eq(tn_last_error(), want_msg);
				}
				break;
			}
			ck_assert_msg(r == TN_ENOMEM, "text %zu, allocation %llu: %d %s", k,
				      (unsigned long long)n, r, tn_last_error());
			ck_assert_str_eq(tn_last_error(), "out of memory parsing a schema");
			ck_assert_ptr_eq(s, (tn_schema *)&b);
			failures++;
			ck_assert_msg(n < 1000, "text %zu never succeeds", k);
		}
		ck_assert_int_ge(failures, 3);
		tn_schema_free(want);
		ck_assert_no_leak(b);
	}
}
END_TEST

static Suite *schema_suite(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_valid_schemas);
	tcase_add_test(tc, test_fields_add);
	tcase_add_test(tc, test_fields_returns_and_aliases);
	tcase_add_test(tc, test_fields_lists_and_optionals);
	tcase_add_test(tc, test_default_values);
	tcase_add_test(tc, test_double_text);
	tcase_add_test(tc, test_locale_independence);
	tcase_add_test(tc, test_invalid_schemas);
	tcase_add_test(tc, test_accessors_null);
	tcase_add_test(tc, test_signature);
	tcase_add_test(tc, test_type_format);
	tcase_add_test(tc, test_ivalue_fits);
	tcase_add_test(tc, test_types_equal);
	tcase_add_test(tc, test_fault_injection);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(schema_suite)
