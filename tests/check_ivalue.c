/* SPDX-License-Identifier: MIT */
/*
 * Boxed values and stacks: every constructor and reader, the widening rules and the exact
 * refusals, reference counts of tensors and payloads across copy and release, equality, the
 * stack's push/pop contract and growth, and allocation failures.
 *
 * Payload reference counts are read through dispatch_internal.h; a tensor's count is observed
 * by when it dies (tn_tensor_ndim returns -1 for a freed handle, which stays recognisable in
 * the library's quarantine).
 */
#include <math.h>

#include "dispatch_internal.h"
#include "testutil.h"

static tn_tensor *make_tensor(void)
{
	int64_t sizes[] = { 2, 3 };
	tn_tensor *t;
	ck_assert_tn_ok(tn_zeros(2, sizes, TN_FLOAT32, TN_CPU, &t));
	return t;
}

static bool alive(const tn_tensor *t)
{
	return tn_tensor_ndim(t) >= 0;
}

/* Drop references to @t until it dies and return how many there were. */
static int drop_all(tn_tensor *t)
{
	int n = 0;
	while (alive(t)) {
		tn_tensor_unref(t);
		ck_assert_int_lt(++n, 1000);
	}
	return n;
}

static int64_t payload_refs(const tn_ivalue *v)
{
	if (v->tag == TN_IVALUE_STRING)
		return atomic_load(&v->u.string->refcount);
	return atomic_load(&v->u.list->refcount);
}

START_TEST(test_inline_constructors)
{
	tn_ivalue v;

	v = tn_ivalue_none();
	ck_assert_uint_eq(v.tag, TN_IVALUE_NONE);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "NoneType");

	v = tn_ivalue_int(-42);
	ck_assert_uint_eq(v.tag, TN_IVALUE_INT);
	ck_assert_int_eq(v.u.i, -42);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "int");

	v = tn_ivalue_double(2.5);
	ck_assert_uint_eq(v.tag, TN_IVALUE_DOUBLE);
	ck_assert_double_eq(v.u.d, 2.5);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "float");

	v = tn_ivalue_bool(true);
	ck_assert_uint_eq(v.tag, TN_IVALUE_BOOL);
	ck_assert(v.u.b);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "bool");

	v = tn_ivalue_scalar(tn_scalar_int(7));
	ck_assert_uint_eq(v.tag, TN_IVALUE_SCALAR);
	ck_assert_uint_eq(v.aux, TN_SCALAR_INT);
	ck_assert_int_eq(v.u.i, 7);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "Scalar");
	v = tn_ivalue_scalar(tn_scalar_double(-0.5));
	ck_assert_uint_eq(v.aux, TN_SCALAR_DOUBLE);
	ck_assert_double_eq(v.u.d, -0.5);
	v = tn_ivalue_scalar(tn_scalar_bool(true));
	ck_assert_uint_eq(v.aux, TN_SCALAR_BOOL);
	ck_assert(v.u.b);

	v = tn_ivalue_dtype(TN_BFLOAT16);
	ck_assert_uint_eq(v.tag, TN_IVALUE_DTYPE);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "ScalarType");

	v = tn_ivalue_device((tn_device){ TN_DEVICE_CUDA, 3 });
	ck_assert_uint_eq(v.tag, TN_IVALUE_DEVICE);
	ck_assert_int_eq(v.u.i, TN_DEVICE_CUDA);
	ck_assert_uint_eq(v.aux, 3);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "Device");

	v = tn_ivalue_layout(TN_STRIDED);
	ck_assert_uint_eq(v.tag, TN_IVALUE_LAYOUT);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "Layout");

	v = tn_ivalue_memory_format(TN_CHANNELS_LAST);
	ck_assert_uint_eq(v.tag, TN_IVALUE_MEMORY_FORMAT);
	ck_assert_int_eq(v.u.i, TN_CHANNELS_LAST);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "MemoryFormat");

	/* Every tag has its PyTorch name; anything else is "invalid". */
	static const char *const names[] = { "NoneType", "Tensor", "int", "float", "bool",
					     "Scalar", "List[int]", "List[float]", "List[bool]",
					     "List[Tensor]", "str", "ScalarType", "Device", "Layout",
					     "MemoryFormat", "Generator" };
	ck_assert_int_eq(TN_ARRAY_SIZE(names), TN_NUM_IVALUE_TAGS);
	for (unsigned i = 0; i < TN_NUM_IVALUE_TAGS; i++) {
		v.tag = i;
		ck_assert_str_eq(tn_ivalue_type_name(&v), names[i]);
	}
	v.tag = TN_NUM_IVALUE_TAGS;
	ck_assert_str_eq(tn_ivalue_type_name(&v), "invalid");
	ck_assert_str_eq(tn_ivalue_type_name(NULL), "invalid");

	/* Releasing a value that owns nothing only makes it None; NULL is accepted. */
	v = tn_ivalue_int(5);
	tn_ivalue_release(&v);
	ck_assert_uint_eq(v.tag, TN_IVALUE_NONE);
	tn_ivalue_release(NULL);
}
END_TEST

START_TEST(test_tensor_value)
{
	struct tn_baseline b = tn_test_baseline();
	tn_tensor *t = make_tensor(), *got = NULL;
	tn_ivalue v = tn_ivalue_int(9), w;

	ck_assert_tn_error(tn_ivalue_tensor(t, NULL), TN_EINVAL, "tn_ivalue_tensor: NULL ret_value");
	ck_assert_tn_error(tn_ivalue_tensor(NULL, &v), TN_EINVAL,
			   "tn_ivalue_tensor: NULL tensor (use tn_ivalue_none() for an absent "
			   "optional tensor)");
	int64_t fake[8] = { 0 };
	ck_assert_tn_error(tn_ivalue_tensor((tn_tensor *)fake, &v), TN_EBADF,
			   "tn_ivalue_tensor: not a live tensor handle (freed or foreign)");
	/* Outputs are written on success only. */
	ck_assert_uint_eq(v.tag, TN_IVALUE_INT);
	ck_assert_int_eq(v.u.i, 9);

	ck_assert_tn_ok(tn_ivalue_tensor(t, &v));
	ck_assert_uint_eq(v.tag, TN_IVALUE_TENSOR);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "Tensor");
	ck_assert_tn_ok(tn_ivalue_to_tensor(&v, &got));
	ck_assert_ptr_eq(got, t);

	/* The value holds its own reference, and a copy another one. */
	tn_ivalue_copy(&v, &w);
	ck_assert(tn_ivalue_equal(&v, &w));
	tn_tensor_unref(t);
	ck_assert(alive(t));
	tn_ivalue_release(&v);
	ck_assert_uint_eq(v.tag, TN_IVALUE_NONE);
	ck_assert(alive(t));
	tn_ivalue_release(&w);
	ck_assert(!alive(t));
	ck_assert_no_leak(b);

	/* The value's reference counts once: the tensor dies after exactly two drops. */
	t = make_tensor();
	ck_assert_tn_ok(tn_ivalue_tensor(t, &v));
	tn_ivalue_copy(&v, &w);
	tn_ivalue_release(&w);
	v.tag = TN_IVALUE_NONE; /* forget it: drop_all counts the value's reference */
	ck_assert_int_eq(drop_all(t), 2);

	/* A freed handle is refused. */
	t = make_tensor();
	tn_tensor_unref(t);
	ck_assert_tn_error(tn_ivalue_tensor(t, &v), TN_EBADF,
			   "tn_ivalue_tensor: not a live tensor handle (freed or foreign)");
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_plain_lists)
{
	int64_t ints[] = { 1, -2, INT64_MAX, INT64_MIN };
	double dbls[] = { 0.5, -0.0, INFINITY };
	bool bools[] = { true, false, true };
	const int64_t *ri;
	const double *rd;
	const bool *rb;
	size_t n = 99;
	tn_ivalue v, w, x;

	ck_assert_tn_ok(tn_ivalue_int_list(4, ints, &v));
	ck_assert_uint_eq(v.tag, TN_IVALUE_INT_LIST);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "List[int]");
	ck_assert_tn_ok(tn_ivalue_to_int_list(&v, &n, &ri));
	ck_assert_uint_eq(n, 4);
	ck_assert_ptr_ne(ri, ints); /* copied */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ri[i], ints[i]);
	ck_assert_uint_eq(tn__ivalue_list_len(&v), 4);
	ck_assert_ptr_eq(tn__ivalue_list_ints(&v), ri);

	/* Copies share the payload; the last release frees it. */
	ck_assert_int_eq(payload_refs(&v), 1);
	tn_ivalue_copy(&v, &w);
	ck_assert_ptr_eq(w.u.list, v.u.list);
	ck_assert_int_eq(payload_refs(&v), 2);
	tn_ivalue_copy(&w, &x);
	ck_assert_int_eq(payload_refs(&v), 3);
	tn_ivalue_release(&x);
	tn_ivalue_release(&w);
	ck_assert_int_eq(payload_refs(&v), 1);
	ck_assert_uint_eq(w.tag, TN_IVALUE_NONE);
	tn_ivalue_release(&v);

	ck_assert_tn_ok(tn_ivalue_double_list(3, dbls, &v));
	ck_assert_str_eq(tn_ivalue_type_name(&v), "List[float]");
	ck_assert_tn_ok(tn_ivalue_to_double_list(&v, &n, &rd));
	ck_assert_uint_eq(n, 3);
	ck_assert_double_eq(rd[0], 0.5);
	ck_assert(signbit(rd[1]) && rd[1] == 0.0);
	ck_assert(isinf(rd[2]));
	ck_assert_ptr_eq(tn__ivalue_list_doubles(&v), rd);
	tn_ivalue_release(&v);

	/* A bool byte that is neither 0 nor 1 reads back as true. */
	unsigned char raw[3] = { 0, 2, 1 };
	bool odd[3];
	memcpy(odd, raw, sizeof(odd));
	ck_assert_tn_ok(tn_ivalue_bool_list(3, odd, &v));
	ck_assert_str_eq(tn_ivalue_type_name(&v), "List[bool]");
	ck_assert_tn_ok(tn_ivalue_to_bool_list(&v, &n, &rb));
	ck_assert_uint_eq(n, 3);
	unsigned char back[3];
	memcpy(back, rb, sizeof(back));
	ck_assert_int_eq(back[0], 0);
	ck_assert_int_eq(back[1], 1);
	ck_assert_int_eq(back[2], 1);
	ck_assert_ptr_eq(tn__ivalue_list_bools(&v), rb);
	tn_ivalue_release(&v);
	ck_assert_tn_ok(tn_ivalue_bool_list(3, bools, &v));
	tn_ivalue_release(&v);

	/* Empty lists: a NULL array is fine with n == 0. */
	ck_assert_tn_ok(tn_ivalue_int_list(0, NULL, &v));
	ck_assert_tn_ok(tn_ivalue_to_int_list(&v, &n, &ri));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_nonnull(ri);
	tn_ivalue_release(&v);
	ck_assert_tn_ok(tn_ivalue_double_list(0, NULL, &v));
	tn_ivalue_release(&v);
	ck_assert_tn_ok(tn_ivalue_bool_list(0, NULL, &v));
	tn_ivalue_release(&v);

	v = tn_ivalue_int(1);
	ck_assert_tn_error(tn_ivalue_int_list(2, NULL, &v), TN_EINVAL,
			   "tn_ivalue_int_list: NULL values for 2 entries");
	ck_assert_tn_error(tn_ivalue_double_list(1, NULL, &v), TN_EINVAL,
			   "tn_ivalue_double_list: NULL values for 1 entries");
	ck_assert_tn_error(tn_ivalue_bool_list(1, NULL, &v), TN_EINVAL,
			   "tn_ivalue_bool_list: NULL values for 1 entries");
	ck_assert_tn_error(tn_ivalue_int_list(1, ints, NULL), TN_EINVAL,
			   "tn_ivalue_int_list: NULL ret_value");
	ck_assert_tn_error(tn_ivalue_double_list(1, dbls, NULL), TN_EINVAL,
			   "tn_ivalue_double_list: NULL ret_value");
	ck_assert_tn_error(tn_ivalue_bool_list(1, bools, NULL), TN_EINVAL,
			   "tn_ivalue_bool_list: NULL ret_value");
	ck_assert_uint_eq(v.tag, TN_IVALUE_INT);
	/* A list so long its byte size overflows is refused before any allocation. */
	ck_assert_tn_error(tn_ivalue_int_list(SIZE_MAX / 4, ints, &v), TN_ENOMEM,
			   "tn_ivalue_int_list: out of memory for a list of 4611686018427387903 "
			   "entries");
}
END_TEST

START_TEST(test_tensor_lists)
{
	struct tn_baseline b = tn_test_baseline();
	tn_tensor *a = make_tensor(), *c = make_tensor();
	tn_tensor *entries[] = { a, NULL, c, a };
	tn_tensor *const *rt;
	size_t n;
	tn_ivalue v, w;

	ck_assert_tn_ok(tn_ivalue_tensor_list(4, entries, &v));
	ck_assert_str_eq(tn_ivalue_type_name(&v), "List[Tensor]");
	ck_assert_tn_ok(tn_ivalue_to_tensor_list(&v, &n, &rt));
	ck_assert_uint_eq(n, 4);
	ck_assert_ptr_eq(rt[0], a);
	ck_assert_ptr_null(rt[1]);
	ck_assert_ptr_eq(rt[2], c);
	ck_assert_ptr_eq(rt[3], a);
	ck_assert_ptr_eq(tn__ivalue_list_tensors(&v), rt);

	/* The list holds a reference per entry: the callers' are not needed any more. */
	tn_tensor_unref(a);
	tn_tensor_unref(c);
	ck_assert(alive(a) && alive(c));
	tn_ivalue_copy(&v, &w);
	tn_ivalue_release(&v);
	ck_assert(alive(a) && alive(c));
	tn_ivalue_release(&w);
	ck_assert(!alive(a) && !alive(c));
	ck_assert_no_leak(b);

	/* One reference per entry, dropped with the payload: a listed twice is back to ours. */
	a = make_tensor();
	tn_tensor *twice[] = { a, a };
	ck_assert_tn_ok(tn_ivalue_tensor_list(2, twice, &v));
	tn_ivalue_release(&v);
	ck_assert_int_eq(drop_all(a), 1);

	/* A dead entry is refused and no reference is taken on the live ones. */
	a = make_tensor();
	c = make_tensor();
	tn_tensor_unref(c);
	tn_tensor *bad[] = { a, NULL, c };
	ck_assert_tn_error(tn_ivalue_tensor_list(3, bad, &v), TN_EBADF,
			   "tn_ivalue_tensor_list: entry 2 is not a live tensor handle (freed or "
			   "foreign)");
	ck_assert_int_eq(drop_all(a), 1);
	ck_assert_tn_error(tn_ivalue_tensor_list(1, NULL, &v), TN_EINVAL,
			   "tn_ivalue_tensor_list: NULL tensors for 1 entries");
	ck_assert_tn_error(tn_ivalue_tensor_list(0, NULL, NULL), TN_EINVAL,
			   "tn_ivalue_tensor_list: NULL ret_value");
	ck_assert_tn_ok(tn_ivalue_tensor_list(0, NULL, &v));
	ck_assert_tn_ok(tn_ivalue_to_tensor_list(&v, &n, &rt));
	ck_assert_uint_eq(n, 0);
	tn_ivalue_release(&v);
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_strings)
{
	const char *s = NULL;
	tn_ivalue v, w;
	char text[] = "mean";

	ck_assert_tn_ok(tn_ivalue_string(text, &v));
	text[0] = 'X'; /* copied */
	ck_assert_uint_eq(v.tag, TN_IVALUE_STRING);
	ck_assert_str_eq(tn_ivalue_type_name(&v), "str");
	ck_assert_tn_ok(tn_ivalue_to_string(&v, &s));
	ck_assert_str_eq(s, "mean");
	ck_assert_str_eq(tn__ivalue_str(&v), "mean");
	ck_assert_uint_eq(v.u.string->len, 4);
	tn_ivalue_copy(&v, &w);
	ck_assert_int_eq(payload_refs(&v), 2);
	tn_ivalue_release(&v);
	ck_assert_int_eq(payload_refs(&w), 1);
	ck_assert_tn_ok(tn_ivalue_to_string(&w, &s));
	ck_assert_str_eq(s, "mean");
	tn_ivalue_release(&w);

	ck_assert_tn_ok(tn_ivalue_string("", &v));
	ck_assert_tn_ok(tn_ivalue_to_string(&v, &s));
	ck_assert_str_eq(s, "");
	tn_ivalue_release(&v);

	ck_assert_tn_error(tn_ivalue_string(NULL, &v), TN_EINVAL, "tn_ivalue_string: NULL text");
	ck_assert_tn_error(tn_ivalue_string("x", NULL), TN_EINVAL,
			   "tn_ivalue_string: NULL ret_value");

	/* Copying into NULL does nothing; copying NULL gives None. */
	tn_ivalue_copy(NULL, &v);
	ck_assert_uint_eq(v.tag, TN_IVALUE_NONE);
	tn_ivalue_copy(&v, NULL);
}
END_TEST

/* One reader applied to one value: expect success with @ok, or the refusal naming @want. */
START_TEST(test_readers_widening)
{
	int64_t i = 0;
	double d = 0;
	bool bo = false;
	tn_scalar sc;
	tn_ivalue v;

	/* Exact reads. */
	v = tn_ivalue_int(-3);
	ck_assert_tn_ok(tn_ivalue_to_int(&v, &i));
	ck_assert_int_eq(i, -3);
	v = tn_ivalue_double(1.25);
	ck_assert_tn_ok(tn_ivalue_to_double(&v, &d));
	ck_assert_double_eq(d, 1.25);
	v = tn_ivalue_bool(true);
	ck_assert_tn_ok(tn_ivalue_to_bool(&v, &bo));
	ck_assert(bo);

	/* Int widens to double; Int, Double and Bool widen to Scalar keeping their kind. */
	v = tn_ivalue_int(INT64_C(1) << 53);
	ck_assert_tn_ok(tn_ivalue_to_double(&v, &d));
	ck_assert_double_eq(d, 9007199254740992.0);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&v, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_INT);
	ck_assert_int_eq(sc.v.i, INT64_C(1) << 53);
	v = tn_ivalue_double(-2.5);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&v, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_DOUBLE);
	ck_assert_double_eq(sc.v.d, -2.5);
	v = tn_ivalue_bool(true);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&v, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_BOOL);
	ck_assert(sc.v.b);

	/* A Scalar reads as the plain type of its kind (and an int one as a double too). */
	v = tn_ivalue_scalar(tn_scalar_int(12));
	ck_assert_tn_ok(tn_ivalue_to_int(&v, &i));
	ck_assert_int_eq(i, 12);
	ck_assert_tn_ok(tn_ivalue_to_double(&v, &d));
	ck_assert_double_eq(d, 12.0);
	ck_assert_tn_ok(tn_ivalue_to_scalar(&v, &sc));
	ck_assert_int_eq(sc.kind, TN_SCALAR_INT);
	ck_assert_tn_error(tn_ivalue_to_bool(&v, &bo), TN_EINVAL,
			   "Expected a value of type 'bool' but found type 'Scalar'");
	v = tn_ivalue_scalar(tn_scalar_double(0.75));
	ck_assert_tn_ok(tn_ivalue_to_double(&v, &d));
	ck_assert_double_eq(d, 0.75);
	ck_assert_tn_error(tn_ivalue_to_int(&v, &i), TN_EINVAL,
			   "Expected a value of type 'int' but found type 'Scalar'");
	v = tn_ivalue_scalar(tn_scalar_bool(true));
	bo = false;
	ck_assert_tn_ok(tn_ivalue_to_bool(&v, &bo));
	ck_assert(bo);
	ck_assert_tn_error(tn_ivalue_to_double(&v, &d), TN_EINVAL,
			   "Expected a value of type 'float' but found type 'Scalar'");
	v.aux = 7; /* a corrupt kind */
	ck_assert_tn_error(tn_ivalue_to_scalar(&v, &sc), TN_EINVAL,
			   "tn_ivalue_to_scalar: bad scalar kind 7");

	/* No narrowing, and the output stays untouched on refusal. */
	i = 77;
	v = tn_ivalue_double(1.0);
	ck_assert_tn_error(tn_ivalue_to_int(&v, &i), TN_EINVAL,
			   "Expected a value of type 'int' but found type 'float'");
	ck_assert_int_eq(i, 77);
	v = tn_ivalue_bool(true);
	ck_assert_tn_error(tn_ivalue_to_int(&v, &i), TN_EINVAL,
			   "Expected a value of type 'int' but found type 'bool'");
	ck_assert_tn_error(tn_ivalue_to_double(&v, &d), TN_EINVAL,
			   "Expected a value of type 'float' but found type 'bool'");
	v = tn_ivalue_int(1);
	ck_assert_tn_error(tn_ivalue_to_bool(&v, &bo), TN_EINVAL,
			   "Expected a value of type 'bool' but found type 'int'");
	v = tn_ivalue_none();
	ck_assert_tn_error(tn_ivalue_to_scalar(&v, &sc), TN_EINVAL,
			   "Expected a value of type 'Scalar' but found type 'NoneType'");
	tn_tensor *t = NULL;
	ck_assert_tn_error(tn_ivalue_to_tensor(&v, &t), TN_EINVAL,
			   "Expected a value of type 'Tensor' but found type 'NoneType'");
	ck_assert_ptr_null(t);

	tn_tensor *x = make_tensor();
	ck_assert_tn_ok(tn_ivalue_tensor(x, &v));
	ck_assert_tn_error(tn_ivalue_to_int(&v, &i), TN_EINVAL,
			   "Expected a value of type 'int' but found type 'Tensor'");
	ck_assert_tn_error(tn_ivalue_to_scalar(&v, &sc), TN_EINVAL,
			   "Expected a value of type 'Scalar' but found type 'Tensor'");
	tn_ivalue_release(&v);
	tn_tensor_unref(x);

	/* The enum readers. */
	enum tn_dtype dt = TN_BOOL;
	enum tn_layout lay = (enum tn_layout)5;
	enum tn_memory_format mf = TN_CONTIGUOUS_FORMAT;
	tn_device dev = { TN_DEVICE_CPU, 0 };
	const char *s = NULL;
	v = tn_ivalue_dtype(TN_FLOAT16);
	ck_assert_tn_ok(tn_ivalue_to_dtype(&v, &dt));
	ck_assert_int_eq(dt, TN_FLOAT16);
	ck_assert_tn_error(tn_ivalue_to_layout(&v, &lay), TN_EINVAL,
			   "Expected a value of type 'Layout' but found type 'ScalarType'");
	v = tn_ivalue_layout(TN_STRIDED);
	ck_assert_tn_ok(tn_ivalue_to_layout(&v, &lay));
	ck_assert_int_eq(lay, TN_STRIDED);
	ck_assert_tn_error(tn_ivalue_to_memory_format(&v, &mf), TN_EINVAL,
			   "Expected a value of type 'MemoryFormat' but found type 'Layout'");
	v = tn_ivalue_memory_format(TN_PRESERVE_FORMAT);
	ck_assert_tn_ok(tn_ivalue_to_memory_format(&v, &mf));
	ck_assert_int_eq(mf, TN_PRESERVE_FORMAT);
	ck_assert_tn_error(tn_ivalue_to_dtype(&v, &dt), TN_EINVAL,
			   "Expected a value of type 'ScalarType' but found type 'MemoryFormat'");
	ck_assert_tn_error(tn_ivalue_to_int(&v, &i), TN_EINVAL,
			   "Expected a value of type 'int' but found type 'MemoryFormat'");
	v = tn_ivalue_device((tn_device){ TN_DEVICE_META, 0 });
	ck_assert_tn_ok(tn_ivalue_to_device(&v, &dev));
	ck_assert_int_eq(dev.type, TN_DEVICE_META);
	ck_assert_int_eq(dev.index, 0);
	v = tn_ivalue_device((tn_device){ TN_DEVICE_CUDA, -1 });
	ck_assert_tn_ok(tn_ivalue_to_device(&v, &dev));
	ck_assert_int_eq(dev.type, TN_DEVICE_CUDA);
	ck_assert_int_eq(dev.index, -1);
	ck_assert_tn_error(tn_ivalue_to_string(&v, &s), TN_EINVAL,
			   "Expected a value of type 'str' but found type 'Device'");
	v = tn_ivalue_int(0);
	ck_assert_tn_error(tn_ivalue_to_device(&v, &dev), TN_EINVAL,
			   "Expected a value of type 'Device' but found type 'int'");

	/* List readers take the exact list type: no broadcast, no widening of elements. */
	int64_t one = 1;
	size_t n = 5;
	const int64_t *ri = NULL;
	const double *rd = NULL;
	const bool *rb = NULL;
	tn_tensor *const *rt = NULL;
	ck_assert_tn_error(tn_ivalue_to_int_list(&v, &n, &ri), TN_EINVAL,
			   "Expected a value of type 'int[]' but found type 'int'");
	ck_assert_tn_ok(tn_ivalue_int_list(1, &one, &v));
	ck_assert_tn_error(tn_ivalue_to_double_list(&v, &n, &rd), TN_EINVAL,
			   "Expected a value of type 'float[]' but found type 'List[int]'");
	ck_assert_tn_error(tn_ivalue_to_bool_list(&v, &n, &rb), TN_EINVAL,
			   "Expected a value of type 'bool[]' but found type 'List[int]'");
	ck_assert_tn_error(tn_ivalue_to_tensor_list(&v, &n, &rt), TN_EINVAL,
			   "Expected a value of type 'Tensor[]' but found type 'List[int]'");
	ck_assert_uint_eq(n, 5);
	ck_assert_ptr_null(rd);
	tn_ivalue_release(&v);

	/* NULL arguments and a corrupt tag. */
	ck_assert_tn_error(tn_ivalue_to_int(NULL, &i), TN_EINVAL, "tn_ivalue_to_int: NULL argument");
	ck_assert_tn_error(tn_ivalue_to_double(&v, NULL), TN_EINVAL,
			   "tn_ivalue_to_double: NULL argument");
	ck_assert_tn_error(tn_ivalue_to_dtype(&v, NULL), TN_EINVAL,
			   "tn_ivalue_to_dtype: NULL argument");
	ck_assert_tn_error(tn_ivalue_to_int_list(&v, NULL, &ri), TN_EINVAL,
			   "tn_ivalue_to_int_list: NULL argument");
	ck_assert_tn_error(tn_ivalue_to_tensor_list(&v, &n, NULL), TN_EINVAL,
			   "tn_ivalue_to_tensor_list: NULL argument");
	v.tag = 200;
	ck_assert_tn_error(tn_ivalue_to_int(&v, &i), TN_EINVAL,
			   "Expected a value of type 'int' but found type 'invalid'");
}
END_TEST

START_TEST(test_equal)
{
	tn_tensor *a = make_tensor(), *c = make_tensor();
	int64_t i12[] = { 1, 2 }, i13[] = { 1, 3 };
	double dz[] = { 0.0 }, dnz[] = { -0.0 };
	bool bt[] = { true, false };
	tn_ivalue x, y;

	x = tn_ivalue_none(), y = tn_ivalue_none();
	ck_assert(tn_ivalue_equal(&x, &y));
	ck_assert(tn_ivalue_equal(NULL, NULL));
	ck_assert(!tn_ivalue_equal(&x, NULL));
	x = tn_ivalue_int(3), y = tn_ivalue_int(3);
	ck_assert(tn_ivalue_equal(&x, &y));
	y = tn_ivalue_int(4);
	ck_assert(!tn_ivalue_equal(&x, &y));
	/* Different tags are different values, even when they read the same. */
	y = tn_ivalue_double(3.0);
	ck_assert(!tn_ivalue_equal(&x, &y));
	y = tn_ivalue_scalar(tn_scalar_int(3));
	ck_assert(!tn_ivalue_equal(&x, &y));
	/* Doubles compare bit for bit: NaN equals itself, 0.0 differs from -0.0. */
	x = tn_ivalue_double(NAN), y = tn_ivalue_double(NAN);
	ck_assert(tn_ivalue_equal(&x, &y));
	x = tn_ivalue_double(0.0), y = tn_ivalue_double(-0.0);
	ck_assert(!tn_ivalue_equal(&x, &y));
	x = tn_ivalue_bool(true), y = tn_ivalue_bool(true);
	ck_assert(tn_ivalue_equal(&x, &y));
	x = tn_ivalue_scalar(tn_scalar_double(1.5)), y = tn_ivalue_scalar(tn_scalar_double(1.5));
	ck_assert(tn_ivalue_equal(&x, &y));
	y = tn_ivalue_scalar(tn_scalar_int(1));
	ck_assert(!tn_ivalue_equal(&x, &y));
	x = tn_ivalue_scalar(tn_scalar_bool(false)), y = tn_ivalue_scalar(tn_scalar_bool(false));
	ck_assert(tn_ivalue_equal(&x, &y));
	x = tn_ivalue_device((tn_device){ TN_DEVICE_CUDA, 0 });
	y = tn_ivalue_device((tn_device){ TN_DEVICE_CUDA, 1 });
	ck_assert(!tn_ivalue_equal(&x, &y));
	y = tn_ivalue_device((tn_device){ TN_DEVICE_CUDA, 0 });
	ck_assert(tn_ivalue_equal(&x, &y));
	x = tn_ivalue_dtype(TN_INT8), y = tn_ivalue_dtype(TN_INT16);
	ck_assert(!tn_ivalue_equal(&x, &y));
	x = tn_ivalue_layout(TN_STRIDED), y = tn_ivalue_layout(TN_STRIDED);
	ck_assert(tn_ivalue_equal(&x, &y));
	x = tn_ivalue_memory_format(TN_CHANNELS_LAST);
	y = tn_ivalue_memory_format(TN_CHANNELS_LAST_3D);
	ck_assert(!tn_ivalue_equal(&x, &y));

	/* Tensors by identity. */
	ck_assert_tn_ok(tn_ivalue_tensor(a, &x));
	ck_assert_tn_ok(tn_ivalue_tensor(a, &y));
	ck_assert(tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_tensor(c, &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&x);
	tn_ivalue_release(&y);

	/* Lists element by element; separate payloads with the same contents are equal. */
	ck_assert_tn_ok(tn_ivalue_int_list(2, i12, &x));
	ck_assert_tn_ok(tn_ivalue_int_list(2, i12, &y));
	ck_assert(tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_int_list(2, i13, &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_int_list(1, i12, &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	tn_ivalue_release(&x);
	ck_assert_tn_ok(tn_ivalue_int_list(0, NULL, &x));
	ck_assert_tn_ok(tn_ivalue_double_list(0, NULL, &y));
	ck_assert(!tn_ivalue_equal(&x, &y)); /* List[int] is not List[float] */
	tn_ivalue_release(&x);
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_double_list(1, dz, &x));
	ck_assert_tn_ok(tn_ivalue_double_list(1, dnz, &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&x);
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_bool_list(2, bt, &x));
	ck_assert_tn_ok(tn_ivalue_bool_list(2, bt, &y));
	ck_assert(tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&x);
	tn_ivalue_release(&y);
	tn_tensor *l1[] = { a, NULL }, *l2[] = { a, NULL }, *l3[] = { a, c };
	ck_assert_tn_ok(tn_ivalue_tensor_list(2, l1, &x));
	ck_assert_tn_ok(tn_ivalue_tensor_list(2, l2, &y));
	ck_assert(tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_tensor_list(2, l3, &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&x);
	tn_ivalue_release(&y);

	ck_assert_tn_ok(tn_ivalue_string("abc", &x));
	ck_assert_tn_ok(tn_ivalue_string("abc", &y));
	ck_assert(tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_string("abd", &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	ck_assert_tn_ok(tn_ivalue_string("ab", &y));
	ck_assert(!tn_ivalue_equal(&x, &y));
	tn_ivalue_release(&y);
	tn_ivalue_release(&x);

	tn_tensor_unref(a);
	tn_tensor_unref(c);
}
END_TEST

START_TEST(test_stack_basics)
{
	struct tn_baseline b = tn_test_baseline();
	tn_stack st = TN_STACK_INIT;
	tn_tensor *t = make_tensor(), *got = NULL;
	tn_ivalue v;

	ck_assert_tn_error(tn_stack_pop(&st, &v), TN_EINVAL, "tn_stack_pop: the stack is empty");
	ck_assert_tn_error(tn_stack_pop_tensor(&st, &got), TN_EINVAL,
			   "tn_stack_pop_tensor: the stack is empty");

	/* Arguments go in order; items[0] is the bottom. */
	ck_assert_tn_ok(tn_stack_push_tensor(&st, t));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(5)));
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_scalar(tn_scalar_double(0.5))));
	ck_assert_uint_eq(st.size, 3);
	ck_assert_uint_ge(st.capacity, 3);
	ck_assert_uint_eq(st.items[0].tag, TN_IVALUE_TENSOR);
	ck_assert_uint_eq(st.items[1].tag, TN_IVALUE_INT);

	/* pop_tensor of a non-Tensor leaves the value where it was. */
	ck_assert_tn_error(tn_stack_pop_tensor(&st, &got), TN_EINVAL,
			   "Expected a value of type 'Tensor' but found type 'Scalar'");
	ck_assert_uint_eq(st.size, 3);
	ck_assert_ptr_null(got);
	ck_assert_tn_ok(tn_stack_pop(&st, &v));
	ck_assert_uint_eq(v.tag, TN_IVALUE_SCALAR);
	ck_assert_tn_ok(tn_stack_pop(&st, &v));
	ck_assert_int_eq(v.u.i, 5);
	ck_assert_uint_eq(st.size, 1);

	/* pop_tensor hands over the stack's reference. */
	tn_tensor_unref(t);
	ck_assert(alive(t));
	ck_assert_tn_ok(tn_stack_pop_tensor(&st, &got));
	ck_assert_ptr_eq(got, t);
	ck_assert_uint_eq(st.size, 0);
	ck_assert_int_eq(drop_all(got), 1);

	/* Push errors: the value is released. */
	t = make_tensor();
	ck_assert_tn_ok(tn_ivalue_tensor(t, &v));
	ck_assert_tn_error(tn_stack_push(NULL, v), TN_EINVAL, "tn_stack_push: NULL stack");
	ck_assert_int_eq(drop_all(t), 1);
	ck_assert_tn_error(tn_stack_push_tensor(&st, NULL), TN_EINVAL,
			   "tn_ivalue_tensor: NULL tensor (use tn_ivalue_none() for an absent "
			   "optional tensor)");
	ck_assert_tn_error(tn_stack_push_tensor(NULL, NULL), TN_EINVAL,
			   "tn_stack_push_tensor: NULL stack");
	ck_assert_tn_error(tn_stack_pop(NULL, &v), TN_EINVAL, "tn_stack_pop: NULL argument");
	ck_assert_tn_error(tn_stack_pop(&st, NULL), TN_EINVAL, "tn_stack_pop: NULL argument");
	ck_assert_tn_error(tn_stack_pop_tensor(&st, NULL), TN_EINVAL,
			   "tn_stack_pop_tensor: NULL argument");
	ck_assert_tn_error(tn_stack_reserve(NULL, 1), TN_EINVAL, "tn_stack_reserve: NULL stack");

	/* clear releases what the stack owns and keeps the capacity; destroy frees it. */
	t = make_tensor();
	ck_assert_tn_ok(tn_stack_push_tensor(&st, t));
	ck_assert_tn_ok(tn_stack_push_tensor(&st, t));
	ck_assert_tn_ok(tn_ivalue_string("x", &v));
	ck_assert_tn_ok(tn_stack_push(&st, v));
	tn_tensor_unref(t);
	size_t cap = st.capacity;
	tn_stack_clear(&st);
	ck_assert(!alive(t));
	ck_assert_uint_eq(st.size, 0);
	ck_assert_uint_eq(st.capacity, cap);
	tn_stack_destroy(&st);
	ck_assert_ptr_null(st.items);
	ck_assert_uint_eq(st.capacity, 0);
	tn_stack_destroy(&st); /* twice is fine */
	tn_stack_destroy(NULL);
	tn_stack_clear(NULL);

	/* A zeroed stack works as TN_STACK_INIT does. */
	tn_stack z;
	memset(&z, 0, sizeof(z));
	ck_assert_tn_ok(tn_stack_push(&z, tn_ivalue_none()));
	tn_stack_destroy(&z);
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_stack_reserve_and_growth)
{
	tn_stack st = TN_STACK_INIT;
	size_t moves = 0;
	tn_ivalue v;

	ck_assert_tn_ok(tn_stack_reserve(&st, 0));
	ck_assert_tn_ok(tn_stack_reserve(&st, 100));
	ck_assert_uint_ge(st.capacity, 100);
	tn_ivalue *items = st.items;
	for (int i = 0; i < 100; i++)
		ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(i)));
	ck_assert_ptr_eq(st.items, items); /* no reallocation within the reservation */
	ck_assert_tn_error(tn_stack_reserve(&st, SIZE_MAX), TN_ENOMEM,
			   "tn_stack_reserve: 18446744073709551615 more values overflow the size");
	ck_assert_tn_error(tn_stack_reserve(&st, SIZE_MAX / 2), TN_ENOMEM,
			   "tn_stack_reserve: out of memory growing a stack to 9223372036854775907 "
			   "values");
	ck_assert_uint_eq(st.size, 100);

	/* Growth is geometric: few moves, capacity within twice the size. */
	for (int i = 100; i < 10000; i++) {
		items = st.items;
		ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(i)));
		moves += st.items != items;
		ck_assert_uint_le(st.capacity, 2 * st.size + 4);
	}
	ck_assert_uint_eq(st.size, 10000);
	ck_assert_uint_le(moves, 10);
	for (int i = 0; i < 10000; i++)
		ck_assert_int_eq(st.items[i].u.i, i);
	for (int i = 9999; i >= 0; i--) {
		ck_assert_tn_ok(tn_stack_pop(&st, &v));
		ck_assert_int_eq(v.u.i, i);
	}
	tn_stack_destroy(&st);
}
END_TEST

typedef int (*ctor_fn)(tn_tensor *t, tn_ivalue *ret);

static int c_int_list(tn_tensor *t, tn_ivalue *ret)
{
	int64_t v[] = { 1, 2, 3 };
	return tn_ivalue_int_list(3, v, ret);
}

static int c_double_list(tn_tensor *t, tn_ivalue *ret)
{
	double v[] = { 1, 2 };
	return tn_ivalue_double_list(2, v, ret);
}

static int c_bool_list(tn_tensor *t, tn_ivalue *ret)
{
	bool v[] = { true };
	return tn_ivalue_bool_list(1, v, ret);
}

static int c_tensor_list(tn_tensor *t, tn_ivalue *ret)
{
	tn_tensor *v[] = { t, NULL, t };
	return tn_ivalue_tensor_list(3, v, ret);
}

static int c_string(tn_tensor *t, tn_ivalue *ret)
{
	return tn_ivalue_string("reduction", ret);
}

START_TEST(test_fault_injection)
{
	static const struct {
		const char *name;
		ctor_fn fn;
	} ctors[] = { { "int_list", c_int_list },       { "double_list", c_double_list },
		      { "bool_list", c_bool_list },     { "tensor_list", c_tensor_list },
		      { "string", c_string } };
	struct tn_baseline b = tn_test_baseline();
	tn_tensor *t = make_tensor();
	struct tn_baseline with_t = tn_test_baseline();

	for (size_t k = 0; k < TN_ARRAY_SIZE(ctors); k++) {
		int failures = 0;
		for (uint64_t n = 1;; n++) {
			tn_ivalue v = tn_ivalue_int(-1);
			tn_alloc_fail_nth(n);
			tn_clear_error();
			int r = ctors[k].fn(t, &v);
			tn_alloc_fail_nth(0);
			if (r == 0) {
				tn_ivalue_release(&v);
				break;
			}
			ck_assert_msg(r == TN_ENOMEM, "%s: %d %s", ctors[k].name, r, tn_last_error());
			ck_assert_msg(strstr(tn_last_error(), "out of memory") != NULL, "%s: '%s'",
				      ctors[k].name, tn_last_error());
			ck_assert_uint_eq(v.tag, TN_IVALUE_INT); /* untouched */
			failures++;
			ck_assert_msg(n < 100, "%s never succeeds", ctors[k].name);
		}
		ck_assert_int_ge(failures, 1);
		ck_assert_no_leak(with_t);
	}
	/* The tensor list took and dropped its references: only ours is left. */
	ck_assert_int_eq(drop_all(t), 1);

	/* A push that cannot grow the stack releases the value and keeps the items. */
	tn_stack st = TN_STACK_INIT;
	t = make_tensor();
	for (int i = 0; i < 4; i++)
		ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(i)));
	ck_assert_uint_eq(st.size, st.capacity); /* the next push must grow */
	tn_ivalue v;
	ck_assert_tn_ok(tn_ivalue_tensor(t, &v));
	tn_alloc_fail_nth(1);
	tn_clear_error();
	int r = tn_stack_push(&st, v);
	tn_alloc_fail_nth(0);
	ck_assert_int_eq(r, TN_ENOMEM);
	ck_assert_str_eq(tn_last_error(), "tn_stack_push: out of memory growing a stack to 8 values");
	ck_assert_uint_eq(st.size, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(st.items[i].u.i, i);
	ck_assert_int_eq(drop_all(t), 1);
	t = make_tensor();
	tn_alloc_fail_nth(1);
	ck_assert_tn_error(tn_stack_push_tensor(&st, t), TN_ENOMEM,
			   "tn_stack_push: out of memory growing a stack to 8 values");
	tn_alloc_fail_nth(0);
	ck_assert_int_eq(drop_all(t), 1);
	tn_alloc_fail_nth(1);
	ck_assert_tn_error(tn_stack_reserve(&st, 1), TN_ENOMEM,
			   "tn_stack_reserve: out of memory growing a stack to 8 values");
	tn_alloc_fail_nth(0);
	ck_assert_uint_eq(st.size, 4);
	ck_assert_uint_eq(st.capacity, 4);
	ck_assert_tn_ok(tn_stack_push(&st, tn_ivalue_int(4)));
	ck_assert_uint_eq(st.size, 5);
	tn_stack_destroy(&st);
	ck_assert_no_leak(b);
}
END_TEST

static Suite *ivalue_suite(void)
{
	Suite *s = suite_create("ivalue");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_inline_constructors);
	tcase_add_test(tc, test_tensor_value);
	tcase_add_test(tc, test_plain_lists);
	tcase_add_test(tc, test_tensor_lists);
	tcase_add_test(tc, test_strings);
	tcase_add_test(tc, test_readers_widening);
	tcase_add_test(tc, test_equal);
	tcase_add_test(tc, test_stack_basics);
	tcase_add_test(tc, test_stack_reserve_and_growth);
	tcase_add_test(tc, test_fault_injection);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(ivalue_suite)
