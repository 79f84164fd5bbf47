/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher: lookup, definitions and kernel registrations with their errors, dispatch
 * by device, fallbacks, overriding kernels (boxed and unboxed), boxed-call argument checks,
 * concurrent calls during registration, and the CPU capability with its environment override.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "testutil.h"

static tn_tensor *make(int n, const int64_t *sizes, tn_device device)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_zeros(n, sizes, TN_FLOAT32, device, &t));
	return t;
}

/* A tensor whose storage claims to be on CUDA: host bytes nobody reads, enough to see where
 * the dispatcher sends a call (this machine has no GPU). */
static float fake_cuda_bytes[64];
static tn_tensor *fake_cuda_tensor(void)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t sizes[] = { 2, 3 };
	ck_assert_tn_ok(tn_storage_from_blob(TN_CUDA(0), fake_cuda_bytes, sizeof(fake_cuda_bytes),
					     NULL, NULL, &s));
	ck_assert_tn_ok(tn_tensor_new(s, 0, 2, sizes, NULL, TN_FLOAT32, &t));
	tn_storage_unref(s);
	return t;
}

START_TEST(test_key_names)
{
	ck_assert_str_eq(tn_dispatch_key_name(TN_KEY_CPU), "CPU");
	ck_assert_str_eq(tn_dispatch_key_name(TN_KEY_CUDA), "CUDA");
	ck_assert_str_eq(tn_dispatch_key_name(TN_KEY_META), "Meta");
	ck_assert_ptr_null(tn_dispatch_key_name(TN_NUM_DISPATCH_KEYS));
	ck_assert_int_eq(tn_dispatch_key_for_device(TN_DEVICE_META), TN_KEY_META);
	ck_assert_int_eq(tn_dispatch_key_for_device(TN_DEVICE_CUDA), TN_KEY_CUDA);
}
END_TEST

START_TEST(test_find)
{
	const tn_op *op, *op2;
	ck_assert_tn_ok(tn_op_find("aten::view", &op));
	ck_assert_tn_ok(tn_op_find("view", &op2));
	ck_assert_ptr_eq(op, op2);
	ck_assert_str_eq(tn_op_name(op), "aten::view");
	ck_assert_str_eq(tn_schema_str(tn_op_schema(op)),
			 "aten::view(Tensor(a) self, int[] size) -> Tensor(a)");
	ck_assert(tn_op_has_kernel(op, TN_KEY_CPU));
	ck_assert(tn_op_has_kernel(op, TN_KEY_META));
	ck_assert_tn_ok(tn_op_find("aten::transpose.int", &op));
	ck_assert_str_eq(tn_schema_overload(tn_op_schema(op)), "int");
	ck_assert_tn_error(tn_op_find("aten::add.Tensors", &op), TN_ENOENT,
			   "No such operator aten::add.Tensors");
	ck_assert_tn_error(tn_op_find("nope", &op), TN_ENOENT, "No such operator aten::nope");
	ck_assert_tn_error(tn_op_find(NULL, &op), TN_EINVAL, "tn_op_find: NULL name");
	ck_assert_tn_error(tn_call_boxed("aten::nope.x", &(tn_stack)TN_STACK_INIT), TN_ENOENT,
			   "No such operator aten::nope.x");
}
END_TEST

static int count_op(const tn_op *op, void *ctx)
{
	(*(int *)ctx)++;
	ck_assert_ptr_nonnull(tn_op_schema(op));
	return 0;
}

static int stop_at_view(const tn_op *op, void *ctx)
{
	(void)ctx;
	return strcmp(tn_op_name(op), "aten::view") == 0 ? 7 : 0;
}

START_TEST(test_foreach)
{
	int n = 0;
	ck_assert_tn_ok(tn_op_foreach(count_op, &n));
	ck_assert_int_ge(n, 25);
	ck_assert_int_eq(tn_op_foreach(stop_at_view, NULL), 7);
}
END_TEST

START_TEST(test_def_twice_names_both_sites)
{
	tn_registration *r1, *r2;
	char want[1024];
	int line = __LINE__; int rc = TN_OP_DEF("test::twice(Tensor self) -> Tensor", &r1);
	ck_assert_int_eq(rc, 0);
	tn_clear_error();
	int line2 = __LINE__; rc = TN_OP_DEF("test::twice(Tensor self) -> Tensor", &r2);
	ck_assert_int_eq(rc, TN_EBUSY);
	snprintf(want, sizeof(want),
		 "Tried to register an operator (test::twice(Tensor self) -> Tensor) with the same "
		 "name and overload name multiple times. Each overload's schema should only be "
		 "registered with a single call to def(). Duplicate registration: %s:%d. Original "
		 "registration: %s:%d",
		 __FILE__, line2, __FILE__, line);
	ck_assert_str_eq(tn_last_error(), want);
	/* Removing the definition lets it be made again. */
	ck_assert_tn_ok(tn_deregister(r1));
	ck_assert_tn_ok(TN_OP_DEF("test::twice(Tensor self, int n) -> Tensor", &r2));
	ck_assert_tn_ok(tn_deregister(r2));
}
END_TEST

START_TEST(test_def_clash_with_table)
{
	tn_registration *r;
	const tn_op *op;
	ck_assert_tn_error_has(TN_OP_DEF("aten::view(Tensor(a) self, int[] size) -> Tensor(a)", &r),
			       TN_EBUSY, "Original registration: libtensor/ops/functions.yaml:");
	ck_assert_tn_error_has(TN_OP_DEF("aten::view(Tensor(a) self, int[] size) -> Tensor(a)", &r),
			       TN_EBUSY, "Duplicate registration: " __FILE__ ":");
	ck_assert_tn_ok(tn_op_find("aten::view", &op)); /* untouched */
}
END_TEST

START_TEST(test_def_errors)
{
	tn_registration *r;
	ck_assert_tn_error(TN_OP_DEF("scale(Tensor self) -> Tensor", &r), TN_EINVAL,
			   "operator 'scale' has no namespace: define it as 'myns::scale(...)'");
	ck_assert_tn_error_has(TN_OP_DEF("test::f(Tenser x) -> Tensor", &r), TN_EINVAL,
			       "schema:1:9:");
	ck_assert_tn_error(tn_op_def_at(NULL, "f", 1, &r), TN_EINVAL, "tn_op_def_at: NULL schema");
}
END_TEST

static int noop_kernel(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	(void)op, (void)key, (void)stack, (void)ctx;
	return 0;
}

START_TEST(test_impl_for_unknown_schema)
{
	tn_registration *r;
	char want[512];
	tn_clear_error();
	int line = __LINE__; int rc = TN_OP_IMPL("test::nothing", TN_KEY_CPU, noop_kernel, NULL, &r);
	ck_assert_int_eq(rc, TN_ENOENT);
	snprintf(want, sizeof(want),
		 "Tried to register a kernel (%s:%d) for operator test::nothing for dispatch key "
		 "CPU, but no schema is registered for that operator",
		 __FILE__, line);
	ck_assert_str_eq(tn_last_error(), want);
	ck_assert_tn_error(TN_OP_IMPL("aten::view", (enum tn_dispatch_key)9, noop_kernel, NULL, &r),
			   TN_EINVAL, "tn_op_impl_at: 9 is not a dispatch key");
}
END_TEST

START_TEST(test_missing_kernel_message)
{
	tn_tensor *c = fake_cuda_tensor(), *out = NULL;
	int64_t sizes[] = { 2 };

	tn_scalar lo = tn_scalar_int(1);
	ck_assert_tn_error(tn_clamp_(c, &lo, NULL), TN_ENOTSUP,
			   "Could not run 'aten::clamp_' with arguments from the 'CUDA' "
			   "backend. 'aten::clamp_' is only available for these backends: "
			   "[CPU, Meta].");
	(void)sizes;
	ck_assert_tn_error(tn_arange(tn_scalar_int(0), tn_scalar_int(4), tn_scalar_int(1), NULL,
				     TN_CUDA(0), &out),
			   TN_ENOTSUP,
			   "Could not run 'aten::arange.start_step' with arguments from the 'CUDA' "
			   "backend. 'aten::arange.start_step' is only available for these "
			   "backends: [CPU, Meta].");
	ck_assert_ptr_null(out);
	/* Views are device-independent and have a CUDA kernel. */
	ck_assert_tn_ok(tn_transpose(c, 0, 1, &out));
	ck_assert_int_eq(tn_tensor_device(out).type, TN_DEVICE_CUDA);
	tn_tensor_unref(out);
	/* The same through a boxed call. */
	tn_stack st = TN_STACK_INIT;
	ck_assert_tn_ok(tn_stack_push_tensor(&st, c));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_double(2.0)));
	ck_assert_tn_error_has(tn_call_boxed("aten::clamp_min_", &st), TN_ENOTSUP,
			       "from the 'CUDA' backend");
	ck_assert_uint_eq(st.size, 0); /* arguments popped on failure */
	tn_stack_destroy(&st);
	tn_tensor_unref(c);
}
END_TEST

START_TEST(test_mixed_devices_pick_highest_key)
{
	int64_t sizes[] = { 2, 3 };
	tn_tensor *cpu = make(2, sizes, TN_CPU), *meta = make(2, sizes, TN_META), *c;
	bool same = false;
	/* Meta outranks CPU: the Meta kernel runs (is_same_size has one). */
	ck_assert_tn_ok(tn_is_same_size(cpu, meta, &same));
	ck_assert(same);
	c = fake_cuda_tensor();
	ck_assert_tn_ok(tn_is_same_size(cpu, c, &same));
	ck_assert(same);
	tn_tensor_unref(c);
	tn_tensor_unref(cpu);
	tn_tensor_unref(meta);
}
END_TEST

struct fallback_log {
	int calls;
	char last[64];
};

/* A CUDA fallback for in-place operators: records the call and leaves self as the result. */
static int cuda_fallback(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	struct fallback_log *log = ctx;
	size_t nargs = tn_schema_num_args(tn_op_schema(op));
	ck_assert_int_eq(key, TN_KEY_CUDA);
	log->calls++;
	snprintf(log->last, sizeof(log->last), "%s", tn_op_name(op));
	while (nargs-- > 1) {
		tn_ivalue v;
		ck_assert_tn_ok(tn_stack_pop(stack, &v));
		tn_ivalue_release(&v);
	}
	return 0;
}

START_TEST(test_fallback)
{
	struct fallback_log log = { 0, "" };
	tn_registration *r, *r2;
	tn_tensor *c = fake_cuda_tensor();
	char want[512];

	int line = __LINE__; int rc = TN_FALLBACK_IMPL(TN_KEY_CUDA, cuda_fallback, &log, &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_tn_ok(tn_clamp_min_(c, tn_scalar_int(3)));
	ck_assert_tn_ok(tn_clamp_max_(c, tn_scalar_int(5)));
	ck_assert_int_eq(log.calls, 2);
	ck_assert_str_eq(log.last, "aten::clamp_max_");
	/* An operator's own kernel wins over the fallback: view has a CUDA kernel. */
	tn_tensor *v;
	int64_t shape[] = { 6 };
	ck_assert_tn_ok(tn_view(c, 1, shape, &v));
	ck_assert_int_eq(log.calls, 2);
	tn_tensor_unref(v);
	tn_clear_error();
	int line2 = __LINE__; rc = TN_FALLBACK_IMPL(TN_KEY_CUDA, cuda_fallback, &log, &r2);
	ck_assert_int_eq(rc, TN_EBUSY);
	snprintf(want, sizeof(want),
		 "Tried to register a fallback for dispatch key CUDA at %s:%d, but one is already "
		 "registered at %s:%d",
		 __FILE__, line2, __FILE__, line);
	ck_assert_str_eq(tn_last_error(), want);
	ck_assert_tn_ok(tn_deregister(r));
	ck_assert_int_eq(tn_clamp_min_(c, tn_scalar_int(3)), TN_ENOTSUP);
	ck_assert_int_eq(log.calls, 2);
	tn_tensor_unref(c);
}
END_TEST

/* A boxed kernel for is_same_size that always answers true. */
static int always_same(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	(void)op, (void)key;
	(*(int *)ctx)++;
	tn_ivalue v;
	for (int i = 0; i < 2; i++) {
		ck_assert_tn_ok(tn_stack_pop(stack, &v));
		tn_ivalue_release(&v);
	}
	return tn_stack_push(stack, tn_ivalue_bool(true));
}

START_TEST(test_override_boxed_and_restore)
{
	int64_t s1[] = { 2, 3 }, s2[] = { 3, 2 };
	tn_tensor *a = make(2, s1, TN_CPU), *b = make(2, s2, TN_CPU);
	tn_registration *r;
	const tn_op *op;
	tn_fn fn;
	bool same = true;
	int calls = 0;

	ck_assert_tn_ok(tn_is_same_size(a, b, &same));
	ck_assert(!same);
	ck_assert_tn_ok(tn_op_find("aten::is_same_size", &op));
	ck_assert_tn_ok(tn_op_kernel_unboxed(op, TN_KEY_CPU, &fn));
	ck_assert_tn_ok(TN_OP_IMPL("aten::is_same_size", TN_KEY_CPU, always_same, &calls, &r));
	/* The unboxed entry point boxes its arguments for the boxed kernel. */
	ck_assert_tn_ok(tn_is_same_size(a, b, &same));
	ck_assert(same);
	ck_assert_int_eq(calls, 1);
	ck_assert_tn_error(tn_op_kernel_unboxed(op, TN_KEY_CPU, &fn), TN_ENOENT,
			   "aten::is_same_size has no unboxed kernel for dispatch key CPU");
	/* A NULL output is refused before any boxing. */
	ck_assert_tn_error(tn_is_same_size(a, b, NULL), TN_EINVAL,
			   "is_same_size: NULL ret_value");
	ck_assert_tn_ok(tn_deregister(r));
	ck_assert_tn_ok(tn_is_same_size(a, b, &same));
	ck_assert(!same);
	ck_assert_int_eq(calls, 1);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}
END_TEST

static int unboxed_calls;
static int my_is_same_size(const tn_tensor *self, const tn_tensor *other, bool *ret)
{
	unboxed_calls++;
	*ret = tn_tensor_numel(self) == tn_tensor_numel(other);
	return 0;
}

START_TEST(test_unboxed_user_kernel)
{
	int64_t s1[] = { 2, 3 }, s2[] = { 3, 2 };
	tn_tensor *a = make(2, s1, TN_CPU), *b = make(2, s2, TN_CPU);
	tn_registration *r;
	bool same = false;

	tn_clear_error();
	int line = 4242;
	ck_assert_int_eq(tn_op_impl_unboxed_at("aten::is_same_size", TN_KEY_CPU, "(Tensor self) -> bool",
					       (tn_fn)my_is_same_size, NULL, NULL, __FILE__, line, &r),
			 TN_EINVAL);
	char site[256];
	snprintf(site, sizeof(site), "registered at %s:%d for dispatch key CPU", __FILE__, line);
	ck_assert_msg(strstr(tn_last_error(), site), "%s", tn_last_error());
	ck_assert_msg(strstr(tn_last_error(), "the schema registered at libtensor/ops/functions.yaml:"),
		      "%s", tn_last_error());
	ck_assert_tn_ok(tn_op_impl_unboxed_at("aten::is_same_size", TN_KEY_CPU,
					      "(Tensor a, Tensor b) -> bool", (tn_fn)my_is_same_size,
					      NULL, NULL, __FILE__, __LINE__, &r));
	ck_assert_tn_ok(tn_is_same_size(a, b, &same));
	ck_assert(same);
	ck_assert_int_eq(unboxed_calls, 1);
	/* The boxed path reaches it through the table's adapter. */
	tn_stack st = TN_STACK_INIT;
	ck_assert_tn_ok(tn_stack_push_tensor(&st, a));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, b));
	ck_assert_tn_ok(tn_call_boxed("aten::is_same_size", &st));
	ck_assert_uint_eq(st.size, 1);
	ck_assert_int_eq(st.items[0].tag, TN_IVALUE_BOOL);
	ck_assert(st.items[0].u.b);
	ck_assert_int_eq(unboxed_calls, 2);
	tn_stack_destroy(&st);
	ck_assert_tn_ok(tn_deregister(r));
	/* A program's own operator needs a boxed kernel beside an unboxed one. */
	tn_registration *d;
	ck_assert_tn_ok(TN_OP_DEF("test::same(Tensor a, Tensor b) -> bool", &d));
	ck_assert_tn_error_has(tn_op_impl_unboxed_at("test::same", TN_KEY_CPU,
						     "(Tensor a, Tensor b) -> bool",
						     (tn_fn)my_is_same_size, NULL, NULL, "x.c", 1, &r),
			       TN_EINVAL, "test::same is not in the op table");
	ck_assert_tn_ok(tn_deregister(d));
	tn_tensor_unref(a);
	tn_tensor_unref(b);
}
END_TEST

static int bad_zero(const tn_tensor *self, tn_tensor **ret)
{
	(void)self, (void)ret;
	return 0;
}

START_TEST(test_signature_check_covers_written_returns)
{
	tn_registration *r;
	/* zero_ returns Tensor(a!): no C parameter. A signature claiming a plain Tensor return
	 * describes another C function, (const tn_tensor *, tn_tensor **), and is refused. */
	ck_assert_tn_error_has(tn_op_impl_unboxed_at("aten::zero_", TN_KEY_META,
						     "(Tensor self) -> Tensor", (tn_fn)bad_zero,
						     NULL, NULL, "x.c", 7, &r),
			       TN_EINVAL, "return 1 is written-to (a!) in one and not in the other");
	ck_assert_tn_ok(tn_op_impl_unboxed_at("aten::zero_", TN_KEY_META,
					      "(Tensor(a!) self) -> Tensor(a!)", (tn_fn)bad_zero, NULL,
					      NULL, "x.c", 8, &r));
	ck_assert_tn_ok(tn_deregister(r));
}
END_TEST

/* A Meta kernel for zeros that returns a dead tensor. */
static int null_result(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	size_t n = tn_schema_num_args(tn_op_schema(op));
	(void)key, (void)ctx;
	while (n--) {
		tn_ivalue v;
		tn_stack_pop(stack, &v);
		tn_ivalue_release(&v);
	}
	return tn_stack_push(stack, (tn_ivalue){ .u.tensor = NULL, .tag = TN_IVALUE_TENSOR });
}

START_TEST(test_hostile_values)
{
	tn_registration *r;
	tn_tensor *t = (tn_tensor *)0x1;
	int64_t two = 2;
	/* A kernel's dead tensor result is caught, never handed out. */
	ck_assert_tn_ok(TN_OP_IMPL("aten::zeros", TN_KEY_META, null_result, NULL, &r));
	ck_assert_tn_error_has(tn_zeros(1, &two, TN_FLOAT32, TN_META, &t), TN_EINVAL,
			       "returned a tensor that is not a live handle for return 0");
	ck_assert_ptr_eq(t, (tn_tensor *)0x1);
	ck_assert_tn_ok(tn_deregister(r));
	/* A hand-built list value without its payload does not fit any list type. */
	int64_t s[] = { 2, 3 };
	tn_tensor *x = make(2, s, TN_CPU);
	tn_stack st = TN_STACK_INIT;
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, (tn_ivalue){ .u.list = NULL, .tag = TN_IVALUE_INT_LIST }));
	ck_assert_tn_error_has(tn_call_boxed("aten::view", &st), TN_EINVAL,
			       "Expected a value of type 'int[]' for argument 'size'");
	/* A malformed stack. */
	tn_stack bad = { NULL, 3, 0 };
	ck_assert_tn_error_has(tn_call_boxed("aten::view", &bad), TN_EINVAL, "a malformed stack");
	tn_stack_destroy(&st);
	tn_tensor_unref(x);
}
END_TEST

START_TEST(test_long_operator_names)
{
	char schema[1200], name[1100];
	memset(name, 'a', 700);
	memcpy(name, "ns::", 4);
	name[700] = '\0';
	snprintf(schema, sizeof(schema), "%s(Tensor self) -> Tensor", name);
	tn_registration *r, *r2;
	const tn_op *op;
	ck_assert_tn_ok(TN_OP_DEF(schema, &r));
	ck_assert_tn_ok(tn_op_find(name, &op));
	ck_assert_str_eq(tn_op_name(op), name);
	name[699] = 'b';
	snprintf(schema, sizeof(schema), "%s(Tensor self) -> Tensor", name);
	ck_assert_tn_ok(TN_OP_DEF(schema, &r2)); /* a different name, not a duplicate */
	ck_assert_tn_ok(tn_deregister(r2));
	ck_assert_tn_ok(tn_deregister(r));
}
END_TEST

/* myns::scale(Tensor self, float factor) -> Tensor: a program-defined operator, boxed. */
static int scale_kernel(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	tn_ivalue fv, sv;
	tn_tensor *self, *out;
	double f;
	int rc;
	(void)op, (void)key, (void)ctx;
	tn_stack_pop(stack, &fv);
	tn_stack_pop(stack, &sv);
	tn_ivalue_to_double(&fv, &f);
	tn_ivalue_to_tensor(&sv, &self);
	rc = tn_clone(self, TN_CONTIGUOUS_FORMAT, &out);
	if (rc == 0) {
		float *p = tn_tensor_data(out);
		for (int64_t i = 0; i < tn_tensor_numel(out); i++)
			p[i] *= (float)f;
		rc = tn_stack_push(stack, (tn_ivalue){ .u.tensor = out, .tag = TN_IVALUE_TENSOR });
	}
	tn_ivalue_release(&sv);
	return rc;
}

/* A kernel that breaks the contract: two results for a schema with one. */
static int two_results(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	(void)op, (void)key, (void)ctx;
	tn_stack_push(stack, tn_ivalue_int(1));
	return 0;
}

static int wrong_type(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	tn_ivalue v;
	(void)op, (void)key, (void)ctx;
	tn_stack_pop(stack, &v);
	tn_ivalue_release(&v);
	return 0; /* self stays: a Tensor where the schema returns int */
}

START_TEST(test_user_operator_boxed)
{
	int64_t sizes[] = { 3 };
	tn_tensor *x, *y, *m;
	tn_registration *d, *k;
	tn_stack st = TN_STACK_INIT;

	ck_assert_tn_ok(tn_arange(tn_scalar_int(1), tn_scalar_int(4), tn_scalar_int(1),
				  &(enum tn_dtype){ TN_FLOAT32 }, TN_CPU, &x));
	ck_assert_tn_ok(TN_OP_DEF("myns::scale(Tensor self, float factor) -> Tensor", &d));
	ck_assert_tn_ok(TN_OP_IMPL("myns::scale", TN_KEY_CPU, scale_kernel, NULL, &k));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(2))); /* an int widens to float */
	ck_assert_tn_ok(tn_call_boxed("myns::scale", &st));
	ck_assert_uint_eq(st.size, 1);
	ck_assert_tn_ok(tn_stack_pop_tensor(&st, &y));
	ck_assert_double_eq(tn_test_get_double(y, (int64_t[]){ 2 }), 6.0);
	tn_tensor_unref(y);
	/* Wrong argument type: the message names the argument; the arguments are popped. */
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_error(tn_call_boxed("myns::scale", &st), TN_EINVAL,
			   "Expected a value of type 'float' for argument 'factor' but instead "
			   "found type 'Tensor'.");
	ck_assert_uint_eq(st.size, 0);
	/* Too few values: the stack is left alone. */
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_double(1.0)));
	ck_assert_tn_error(tn_call_boxed("myns::scale", &st), TN_EINVAL,
			   "myns::scale takes 2 arguments but the stack holds 1 values");
	ck_assert_uint_eq(st.size, 1);
	tn_stack_clear(&st);
	/* No Meta kernel: */
	m = make(1, sizes, TN_META);
	ck_assert_tn_ok(tn_stack_push_tensor(&st, m));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_double(1.0)));
	ck_assert_tn_error(tn_call_boxed("myns::scale", &st), TN_ENOTSUP,
			   "Could not run 'myns::scale' with arguments from the 'Meta' backend. "
			   "'myns::scale' is only available for these backends: [CPU].");
	tn_tensor_unref(m);
	/* The definition cannot go while a kernel is registered. */
	ck_assert_tn_error_has(tn_deregister(d), TN_EBUSY,
			       "cannot remove the definition of myns::scale while a kernel is "
			       "registered for it (CPU at " __FILE__ ":");
	ck_assert_tn_ok(tn_deregister(k));
	/* Kernels that break the contract are caught, with their site. */
	ck_assert_tn_ok(TN_OP_IMPL("myns::scale", TN_KEY_CPU, two_results, NULL, &k));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_double(1.0)));
	ck_assert_tn_error_has(tn_call_boxed("myns::scale", &st), TN_EINVAL,
			       "left 3 values on the stack, but the schema has 1 returns");
	ck_assert_uint_eq(st.size, 0);
	ck_assert_tn_ok(tn_deregister(k));
	tn_registration *d2, *k2;
	ck_assert_tn_ok(TN_OP_DEF("myns::count(Tensor self, int n) -> int", &d2));
	ck_assert_tn_ok(TN_OP_IMPL("myns::count", TN_KEY_CPU, wrong_type, NULL, &k2));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(1)));
	ck_assert_tn_error_has(tn_call_boxed("myns::count", &st), TN_EINVAL,
			       "returned a value of type 'Tensor' for return 0, of type 'int'");
	ck_assert_tn_ok(tn_deregister(k2));
	ck_assert_tn_ok(tn_deregister(d2));
	ck_assert_tn_ok(tn_deregister(d));
	ck_assert_tn_error(tn_call_boxed("myns::scale", &st), TN_ENOENT,
			   "No such operator myns::scale");
	tn_stack_destroy(&st);
	tn_tensor_unref(x);
}
END_TEST

START_TEST(test_boxed_errors_on_table_ops)
{
	int64_t sizes[] = { 2, 3 };
	tn_tensor *x = make(2, sizes, TN_CPU);
	tn_stack st = TN_STACK_INIT;

	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(6)));
	ck_assert_tn_error(tn_call_boxed("aten::view", &st), TN_EINVAL,
			   "Expected a value of type 'int[]' for argument 'size' but instead found "
			   "type 'int'.");
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_error(tn_call_boxed("view", &st), TN_EINVAL,
			   "aten::view takes 2 arguments but the stack holds 1 values");
	tn_stack_clear(&st);
	/* A Tensor value built by hand around a dead handle is refused, not read. */
	ck_assert_tn_ok(tn_stack_push(&st, (tn_ivalue){ .u.tensor = NULL, .tag = TN_IVALUE_TENSOR }));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(0)));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(1)));
	ck_assert_tn_error(tn_call_boxed("aten::transpose.int", &st), TN_EBADF,
			   "aten::transpose.int: not a live tensor handle (NULL, freed or foreign)");
	ck_assert_uint_eq(st.size, 0);
	/* The kernel's own error comes through unchanged. */
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(5)));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(0)));
	ck_assert_tn_error(tn_call_boxed("aten::transpose.int", &st), TN_ERANGE,
			   "Dimension out of range (expected to be in range of [-2, 1], but got 5)");
	ck_assert_uint_eq(st.size, 0);
	/* A Scalar argument accepts bool, int and double values; a list does not. */
	tn_ivalue list;
	ck_assert_tn_ok(tn_ivalue_int_list(2, sizes, &list));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, list));
	ck_assert_tn_error(tn_call_boxed("aten::fill_.Scalar", &st), TN_EINVAL,
			   "Expected a value of type 'Scalar' for argument 'value' but instead found "
			   "type 'List[int]'.");
	ck_assert_tn_ok(tn_stack_push_tensor(&st, x));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_bool(true)));
	ck_assert_tn_ok(tn_call_boxed("aten::fill_.Scalar", &st));
	ck_assert_double_eq(tn_test_get_double(x, (int64_t[]){ 1, 2 }), 1.0);
	tn_stack_destroy(&st);
	tn_tensor_unref(x);
}
END_TEST

START_TEST(test_boxed_call_fault_injection)
{
	int64_t sizes[] = { 2, 3 }, shape[] = { 3, 2 };
	tn_tensor *x = make(2, sizes, TN_CPU), *y;
	struct tn_baseline b;
	int rc;

	/* Warm up the registry, then fail each allocation of the call in turn. */
	ck_assert_tn_ok(tn_view(x, 2, shape, &y));
	tn_tensor_unref(y);
	b = tn_test_baseline();
	for (uint64_t n = 1;; n++) {
		tn_stack st = TN_STACK_INIT;
		tn_ivalue v;
		tn_alloc_fail_nth(n);
		rc = tn_stack_push_tensor(&st, x);
		if (rc == 0)
			rc = tn_ivalue_int_list(2, shape, &v);
		if (rc == 0)
			rc = tn_stack_push(&st, v);
		if (rc == 0)
			rc = tn_call_boxed("aten::view", &st);
		tn_alloc_fail_nth(0);
		if (rc == 0) {
			ck_assert_uint_eq(st.size, 1);
			tn_stack_destroy(&st);
			break;
		}
		ck_assert_int_eq(rc, TN_ENOMEM);
		tn_stack_destroy(&st);
		ck_assert_no_leak(b);
		ck_assert_uint_lt(n, 100);
	}
	ck_assert_no_leak(b);
	tn_tensor_unref(x);
}
END_TEST

/* Calls on several threads while another registers and deregisters an override. */
struct race {
	tn_tensor *a, *b;
	atomic_bool stop;
	atomic_long bad;
};

static void *caller(void *arg)
{
	struct race *r = arg;
	while (!atomic_load(&r->stop)) {
		bool same = false;
		int rc = tn_is_same_size(r->a, r->b, &same);
		/* Either the table's kernel (false: different sizes) or the override (true). */
		if (rc != 0)
			atomic_fetch_add(&r->bad, 1);
	}
	return NULL;
}

static int count_calls(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack, void *ctx)
{
	(void)ctx;
	return always_same(op, key, stack, &(int){ 0 });
}

START_TEST(test_concurrent_calls_and_registration)
{
	int64_t s1[] = { 2, 3 }, s2[] = { 3, 2 };
	struct race r = { make(2, s1, TN_CPU), make(2, s2, TN_CPU), false, 0 };
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, caller, &r), 0);
	for (int i = 0; i < 2000; i++) {
		tn_registration *reg;
		ck_assert_tn_ok(TN_OP_IMPL("aten::is_same_size", TN_KEY_CPU, count_calls, NULL, &reg));
		ck_assert_tn_ok(tn_deregister(reg));
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(atomic_load(&r.bad), 0);
	bool same = true;
	ck_assert_tn_ok(tn_is_same_size(r.a, r.b, &same));
	ck_assert(!same);
	tn_tensor_unref(r.a);
	tn_tensor_unref(r.b);
}
END_TEST

/* ---- CPU capability (each test runs in its own process, before any first use) ---- */

/* A fill past the streaming threshold, starting off the vector alignment and ending in a
 * partial vector: every element inside is set, the neighbours outside are not. */
static void check_large_fill(enum tn_dtype dt, tn_scalar v, tn_scalar zero_like)
{
	int64_t n = (INT64_C(12) << 20) / (int64_t)tn_dtype_size(dt) + 7;
	tn_tensor *t, *inner;
	ck_assert_tn_ok(tn_zeros(1, &n, dt, TN_CPU, &t));
	ck_assert_tn_ok(tn_narrow(t, 0, 3, n - 5, &inner));
	ck_assert_tn_ok(tn_fill_(inner, v));
	int64_t probes[] = { 0, 2, 3, 4, 17, n / 2, n / 2 + 1, n - 3, n - 2, n - 1 };
	for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++) {
		tn_scalar s;
		bool in = probes[k] >= 3 && probes[k] < n - 2;
		tn_scalar want = in ? v : zero_like;
		ck_assert_tn_ok(tn_tensor_get(t, 1, &probes[k], &s));
		ck_assert_msg(s.kind == TN_SCALAR_DOUBLE ? s.v.d == want.v.d : s.v.i == want.v.i,
			      "%s element %lld", tn_dtype_name(dt), (long long)probes[k]);
	}
	/* Every element, cheaply: the sum of the filled run. */
	double sum = 0;
	if (dt == TN_FLOAT32) {
		const float *p = tn_tensor_data(t);
		for (int64_t i = 0; i < n; i++)
			sum += p[i];
		ck_assert_double_eq(sum, (double)(n - 5) * v.v.d);
	}
	tn_tensor_unref(inner);
	tn_tensor_unref(t);
}

static void check_fill_under_capability(void)
{
	check_large_fill(TN_FLOAT32, tn_scalar_double(0.5), tn_scalar_double(0.0));
	check_large_fill(TN_INT16, tn_scalar_int(-7), tn_scalar_int(0));
	check_large_fill(TN_FLOAT64, tn_scalar_double(-2.25), tn_scalar_double(0.0));
	/* Every dtype width, contiguous and strided, against values read back one by one. */
	static const enum tn_dtype dts[] = { TN_UINT8, TN_INT16, TN_FLOAT32, TN_FLOAT64, TN_BOOL };
	int64_t sizes[] = { 37, 41 };
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
		tn_tensor *t, *tt;
		ck_assert_tn_ok(tn_zeros(2, sizes, dts[i], TN_CPU, &t));
		ck_assert_tn_ok(tn_transpose(t, 0, 1, &tt));
		ck_assert_tn_ok(tn_fill_(t, tn_scalar_int(1)));
		for (int64_t r = 0; r < 37; r += 5)
			for (int64_t c = 0; c < 41; c += 3) {
				tn_scalar s;
				ck_assert_tn_ok(tn_tensor_get(t, 2, (int64_t[]){ r, c }, &s));
				ck_assert(s.kind == TN_SCALAR_DOUBLE ? s.v.d == 1.0
					  : s.kind == TN_SCALAR_INT ? s.v.i == 1 : s.v.b);
			}
		/* A slice of every other column: the strided path. */
		tn_tensor *sl;
		ck_assert_tn_ok(tn_slice(t, 1, 0, INT64_MAX, 2, &sl));
		ck_assert_tn_ok(tn_zero_(sl));
		tn_scalar s0, s1;
		ck_assert_tn_ok(tn_tensor_get(t, 2, (int64_t[]){ 36, 40 }, &s0));
		ck_assert_tn_ok(tn_tensor_get(t, 2, (int64_t[]){ 36, 39 }, &s1));
		ck_assert(s0.kind == TN_SCALAR_DOUBLE ? s0.v.d == 0.0
			  : s0.kind == TN_SCALAR_INT ? s0.v.i == 0 : !s0.v.b);
		ck_assert(s1.kind == TN_SCALAR_DOUBLE ? s1.v.d == 1.0
			  : s1.kind == TN_SCALAR_INT ? s1.v.i == 1 : s1.v.b);
		tn_tensor_unref(sl);
		tn_tensor_unref(tt);
		tn_tensor_unref(t);
	}
}

START_TEST(test_capability_detected)
{
	enum tn_cpu_capability c = tn_cpu_capability();
	ck_assert_int_lt(c, TN_NUM_CPU_CAPABILITIES);
	ck_assert_str_eq(tn_cpu_capability_name(TN_CPU_CAPABILITY_AVX512), "avx512");
	ck_assert_ptr_null(tn_cpu_capability_name(TN_NUM_CPU_CAPABILITIES));
	check_fill_under_capability();
}
END_TEST

START_TEST(test_capability_forced)
{
	/* _i is the loop index of this test: 0 = default, 1 = avx2, 2 = avx512. */
	enum tn_cpu_capability want = (enum tn_cpu_capability)_i;
	setenv("TN_CPU_CAPABILITY", tn_cpu_capability_name(want), 1);
	unsetenv("TN_CPU_CAPABILITY_UNUSED");
	enum tn_cpu_capability got = tn_cpu_capability();
	/* Forcing lowers, never raises past what the CPU supports. */
	ck_assert_int_le(got, want);
	if (want == TN_CPU_CAPABILITY_DEFAULT)
		ck_assert_int_eq(got, TN_CPU_CAPABILITY_DEFAULT);
	check_fill_under_capability();
}
END_TEST

START_TEST(test_capability_bad_value)
{
	setenv("TN_CPU_CAPABILITY", "sse9", 1);
	tn_clear_error();
	enum tn_cpu_capability got = tn_cpu_capability();
	char want[256];
	snprintf(want, sizeof(want),
		 "TN_CPU_CAPABILITY='sse9' is not one of default, avx2, avx512; using the detected %s",
		 tn_cpu_capability_name(got));
	ck_assert_str_eq(tn_last_error(), want);
}
END_TEST

static Suite *dispatch_suite(void)
{
	Suite *s = suite_create("dispatch");
	TCase *tc = tcase_create("registry");
	tcase_add_test(tc, test_key_names);
	tcase_add_test(tc, test_find);
	tcase_add_test(tc, test_foreach);
	tcase_add_test(tc, test_def_twice_names_both_sites);
	tcase_add_test(tc, test_def_clash_with_table);
	tcase_add_test(tc, test_def_errors);
	tcase_add_test(tc, test_impl_for_unknown_schema);
	tcase_add_test(tc, test_missing_kernel_message);
	tcase_add_test(tc, test_mixed_devices_pick_highest_key);
	tcase_add_test(tc, test_fallback);
	tcase_add_test(tc, test_override_boxed_and_restore);
	tcase_add_test(tc, test_unboxed_user_kernel);
	tcase_add_test(tc, test_user_operator_boxed);
	tcase_add_test(tc, test_signature_check_covers_written_returns);
	tcase_add_test(tc, test_hostile_values);
	tcase_add_test(tc, test_long_operator_names);
	tcase_add_test(tc, test_boxed_errors_on_table_ops);
	tcase_add_test(tc, test_boxed_call_fault_injection);
	tcase_add_test(tc, test_concurrent_calls_and_registration);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	TCase *cap = tcase_create("capability");
	tcase_add_test(cap, test_capability_detected);
	tcase_add_loop_test(cap, test_capability_forced, 0, TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(cap, test_capability_bad_value);
	suite_add_tcase(s, cap);
	return s;
}

TN_TEST_MAIN(dispatch_suite)
