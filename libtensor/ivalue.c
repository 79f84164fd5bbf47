/* SPDX-License-Identifier: MIT */
/*
 * Boxed values (tn_ivalue) and the stacks boxed calls pass them on.
 *
 * A value is 16 bytes: a payload and a tag, as c10::IValue. Tensors are held by reference;
 * lists and strings live in reference-counted payloads (dispatch_internal.h) so copying a
 * value never allocates and cannot fail. The readers apply TorchScript's widening rules and
 * word their refusals as PyTorch does, so a wrong argument in a boxed call reads the same as
 * it would in PyTorch.
 */
#include <assert.h>
#include <string.h>

#include "dispatch_internal.h"

static_assert(sizeof(tn_ivalue) == 16, "tn_ivalue is 16 bytes, as c10::IValue (ABI)");

static const char *const tag_names[TN_NUM_IVALUE_TAGS] = {
#define TN_X_(e, name) [e] = name,
	TN_IVALUE_TAG_LIST(TN_X_)
#undef TN_X_
};

static const char *tag_name(uint32_t tag)
{
	return tag < TN_NUM_IVALUE_TAGS ? tag_names[tag] : "invalid";
}

TN_EXPORT const char *tn_ivalue_type_name(const tn_ivalue *value)
{
	return value ? tag_name(value->tag) : "invalid";
}

/* ---- payloads ------------------------------------------------------------------------------ */

static size_t list_elem_size(uint32_t tag)
{
	switch (tag) {
	case TN_IVALUE_INT_LIST: return sizeof(int64_t);
	case TN_IVALUE_DOUBLE_LIST: return sizeof(double);
	case TN_IVALUE_BOOL_LIST: return sizeof(bool);
	case TN_IVALUE_TENSOR_LIST: return sizeof(tn_tensor *);
	default: return 0;
	}
}

/* A list payload of @n entries for @tag, uninitialised, with one reference. */
static int list_alloc(uint32_t tag, size_t n, const char *who, tn_ivalue_list **ret)
{
	size_t bytes;
	tn_ivalue_list *l;

	if (__builtin_mul_overflow(n, list_elem_size(tag), &bytes) ||
	    __builtin_add_overflow(bytes, offsetof(tn_ivalue_list, data), &bytes))
		return tn__error(TN_ENOMEM, "%s: out of memory for a list of %zu entries", who, n);
	l = tn__malloc(bytes);
	if (!l)
		return tn__error(TN_ENOMEM, "%s: out of memory for a list of %zu entries", who, n);
	atomic_init(&l->refcount, 1);
	l->tag = tag;
	l->len = n;
	*ret = l;
	return 0;
}

static tn_ivalue list_value(tn_ivalue_list *l)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.list = l;
	v.tag = l->tag;
	return v;
}

static bool owns_payload(uint32_t tag)
{
	return tag == TN_IVALUE_TENSOR || tag == TN_IVALUE_STRING ||
	       (tag >= TN_IVALUE_INT_LIST && tag <= TN_IVALUE_TENSOR_LIST);
}

static void list_unref(tn_ivalue_list *l)
{
	/* A hand-built value may lack its payload: nothing to drop. */
	if (!l)
		return;
	/* acq_rel, as tn_tensor_unref: the last owner must see every other owner's writes to
	 * the entries before it frees them. */
	if (atomic_fetch_sub_explicit(&l->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (l->tag == TN_IVALUE_TENSOR_LIST) {
		tn_tensor **t = (tn_tensor **)(void *)l->data;
		for (size_t i = 0; i < l->len; i++)
			tn_tensor_unref(t[i]);
	}
	tn__free(l);
}

static void string_unref(struct tn_ivalue_string *s)
{
	if (s && atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) == 1)
		tn__free(s);
}

/* ---- constructors -------------------------------------------------------------------------- */

TN_EXPORT int tn_ivalue_tensor(tn_tensor *tensor, tn_ivalue *ret_value)
{
	tn_ivalue v = tn_ivalue_none();

	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_ivalue_tensor: NULL ret_value");
	if (!tensor)
		return tn__error(TN_EINVAL, "tn_ivalue_tensor: NULL tensor (use tn_ivalue_none() "
					    "for an absent optional tensor)");
	if (!tn_tensor_ref(tensor))
		return tn__error(TN_EBADF,
				 "tn_ivalue_tensor: not a live tensor handle (freed or foreign)");
	v.u.tensor = tensor;
	v.tag = TN_IVALUE_TENSOR;
	*ret_value = v;
	return 0;
}

TN_EXPORT int tn_ivalue_generator(tn_generator *gen, tn_ivalue *ret_value)
{
	tn_ivalue v = tn_ivalue_none();

	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_ivalue_generator: NULL ret_value");
	if (!gen)
		return tn__error(TN_EINVAL, "tn_ivalue_generator: NULL generator (use "
					    "tn_ivalue_none() for an absent optional generator)");
	if (!tn_generator_ref(gen))
		return tn__error(TN_EBADF, "tn_ivalue_generator: not a live generator handle");
	v.u.generator = gen;
	v.tag = TN_IVALUE_GENERATOR;
	*ret_value = v;
	return 0;
}

/* The checks and allocation every plain-data list constructor shares. */
static int plain_list(uint32_t tag, size_t n, const void *values, const char *who,
		      tn_ivalue *ret_value)
{
	tn_ivalue_list *l;
	int r;

	if (!ret_value)
		return tn__error(TN_EINVAL, "%s: NULL ret_value", who);
	if (!values && n > 0)
		return tn__error(TN_EINVAL, "%s: NULL values for %zu entries", who, n);
	if ((r = list_alloc(tag, n, who, &l)))
		return r;
	if (n > 0)
		memcpy(l->data, values, n * list_elem_size(tag));
	*ret_value = list_value(l);
	return 0;
}

TN_EXPORT int tn_ivalue_int_list(size_t n, const int64_t *values, tn_ivalue *ret_value)
{
	return plain_list(TN_IVALUE_INT_LIST, n, values, "tn_ivalue_int_list", ret_value);
}

TN_EXPORT int tn_ivalue_double_list(size_t n, const double *values, tn_ivalue *ret_value)
{
	return plain_list(TN_IVALUE_DOUBLE_LIST, n, values, "tn_ivalue_double_list", ret_value);
}

TN_EXPORT int tn_ivalue_bool_list(size_t n, const bool *values, tn_ivalue *ret_value)
{
	tn_ivalue v;
	int r;

	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_ivalue_bool_list: NULL ret_value");
	if ((r = plain_list(TN_IVALUE_BOOL_LIST, n, values, "tn_ivalue_bool_list", &v)))
		return r;
	/* Normalise: a bool read through a byte that is neither 0 nor 1 is undefined. */
	bool *b = (bool *)(void *)v.u.list->data;
	const unsigned char *raw = (const unsigned char *)values;
	for (size_t i = 0; i < n; i++)
		b[i] = raw[i] != 0;
	*ret_value = v;
	return 0;
}

TN_EXPORT int tn_ivalue_tensor_list(size_t n, tn_tensor *const *tensors, tn_ivalue *ret_value)
{
	static const char who[] = "tn_ivalue_tensor_list";
	tn_ivalue_list *l;
	int r;

	if (!ret_value)
		return tn__error(TN_EINVAL, "%s: NULL ret_value", who);
	if (!tensors && n > 0)
		return tn__error(TN_EINVAL, "%s: NULL tensors for %zu entries", who, n);
	/* Check every entry before taking any reference, so a failure leaves nothing to undo. */
	for (size_t i = 0; i < n; i++) {
		if (tensors[i] && !tn__handle_is(tensors[i], TN_MAGIC_TENSOR))
			return tn__error(TN_EBADF,
					 "%s: entry %zu is not a live tensor handle (freed or "
					 "foreign)",
					 who, i);
	}
	if ((r = list_alloc(TN_IVALUE_TENSOR_LIST, n, who, &l)))
		return r;
	tn_tensor **t = (tn_tensor **)(void *)l->data;
	for (size_t i = 0; i < n; i++)
		t[i] = tensors[i] ? tn_tensor_ref(tensors[i]) : NULL;
	*ret_value = list_value(l);
	return 0;
}

TN_EXPORT int tn_ivalue_string(const char *text, tn_ivalue *ret_value)
{
	struct tn_ivalue_string *s;
	tn_ivalue v = tn_ivalue_none();
	size_t len;

	if (!ret_value)
		return tn__error(TN_EINVAL, "tn_ivalue_string: NULL ret_value");
	if (!text)
		return tn__error(TN_EINVAL, "tn_ivalue_string: NULL text");
	len = strlen(text);
	if (len > SIZE_MAX - sizeof(*s) - 1 || !(s = tn__malloc(sizeof(*s) + len + 1)))
		return tn__error(TN_ENOMEM, "tn_ivalue_string: out of memory for %zu bytes", len);
	atomic_init(&s->refcount, 1);
	s->len = len;
	memcpy(s->text, text, len + 1);
	v.u.string = s;
	v.tag = TN_IVALUE_STRING;
	*ret_value = v;
	return 0;
}

/* ---- ownership ----------------------------------------------------------------------------- */

TN_EXPORT void tn_ivalue_copy(const tn_ivalue *value, tn_ivalue *ret_value)
{
	tn_ivalue v;

	if (!ret_value)
		return;
	if (!value) {
		*ret_value = tn_ivalue_none();
		return;
	}
	v = *value;
	/* Relaxed increments: a new owner is made from an existing one, which keeps the
	 * payload alive meanwhile (the usual reference-counting argument). */
	if (v.tag == TN_IVALUE_TENSOR)
		tn_tensor_ref(v.u.tensor);
	else if (v.tag == TN_IVALUE_GENERATOR)
		tn_generator_ref(v.u.generator);
	else if (v.tag == TN_IVALUE_STRING && v.u.string)
		atomic_fetch_add_explicit(&v.u.string->refcount, 1, memory_order_relaxed);
	else if (owns_payload(v.tag) && v.u.list)
		atomic_fetch_add_explicit(&v.u.list->refcount, 1, memory_order_relaxed);
	*ret_value = v;
}

TN_EXPORT void tn_ivalue_release(tn_ivalue *value)
{
	if (!value)
		return;
	if (value->tag == TN_IVALUE_TENSOR)
		tn_tensor_unref(value->u.tensor);
	else if (value->tag == TN_IVALUE_GENERATOR)
		tn_generator_unref(value->u.generator);
	else if (value->tag == TN_IVALUE_STRING)
		string_unref(value->u.string);
	else if (owns_payload(value->tag))
		list_unref(value->u.list);
	*value = tn_ivalue_none();
}

/* ---- readers ------------------------------------------------------------------------------- */

static int wrong_type(const tn_ivalue *value, const char *want)
{
	return tn__error(TN_EINVAL, "Expected a value of type '%s' but found type '%s'", want,
			 tag_name(value->tag));
}

static int null_arg(const char *who)
{
	return tn__error(TN_EINVAL, "%s: NULL argument", who);
}

#define CHECK_ARGS(value, ret, who)             \
	do {                                    \
		if (!(value) || !(ret))         \
			return null_arg(who);   \
	} while (0)

TN_EXPORT int tn_ivalue_to_int(const tn_ivalue *value, int64_t *ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_int");
	if (value->tag == TN_IVALUE_INT ||
	    (value->tag == TN_IVALUE_SCALAR && value->aux == TN_SCALAR_INT)) {
		*ret = value->u.i;
		return 0;
	}
	return wrong_type(value, "int");
}

TN_EXPORT int tn_ivalue_to_double(const tn_ivalue *value, double *ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_double");
	if (value->tag == TN_IVALUE_DOUBLE ||
	    (value->tag == TN_IVALUE_SCALAR && value->aux == TN_SCALAR_DOUBLE)) {
		*ret = value->u.d;
		return 0;
	}
	if (value->tag == TN_IVALUE_INT ||
	    (value->tag == TN_IVALUE_SCALAR && value->aux == TN_SCALAR_INT)) {
		*ret = (double)value->u.i;
		return 0;
	}
	return wrong_type(value, "float");
}

TN_EXPORT int tn_ivalue_to_bool(const tn_ivalue *value, bool *ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_bool");
	if (value->tag == TN_IVALUE_BOOL ||
	    (value->tag == TN_IVALUE_SCALAR && value->aux == TN_SCALAR_BOOL)) {
		*ret = value->u.b;
		return 0;
	}
	return wrong_type(value, "bool");
}

TN_EXPORT int tn_ivalue_to_scalar(const tn_ivalue *value, tn_scalar *ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_scalar");
	switch (value->tag) {
	case TN_IVALUE_INT:
		*ret = tn_scalar_int(value->u.i);
		return 0;
	case TN_IVALUE_DOUBLE:
		*ret = tn_scalar_double(value->u.d);
		return 0;
	case TN_IVALUE_BOOL:
		*ret = tn_scalar_bool(value->u.b);
		return 0;
	case TN_IVALUE_SCALAR:
		if (value->aux == TN_SCALAR_INT)
			*ret = tn_scalar_int(value->u.i);
		else if (value->aux == TN_SCALAR_DOUBLE)
			*ret = tn_scalar_double(value->u.d);
		else if (value->aux == TN_SCALAR_BOOL)
			*ret = tn_scalar_bool(value->u.b);
		else
			return tn__error(TN_EINVAL, "tn_ivalue_to_scalar: bad scalar kind %u",
					 (unsigned)value->aux);
		return 0;
	default:
		return wrong_type(value, "Scalar");
	}
}

TN_EXPORT int tn_ivalue_to_tensor(const tn_ivalue *value, tn_tensor **ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_tensor");
	if (value->tag != TN_IVALUE_TENSOR)
		return wrong_type(value, "Tensor");
	*ret = value->u.tensor;
	return 0;
}

TN_EXPORT int tn_ivalue_to_generator(const tn_ivalue *value, tn_generator **ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_generator");
	if (value->tag != TN_IVALUE_GENERATOR)
		return wrong_type(value, "Generator");
	*ret = value->u.generator;
	return 0;
}

/* The readers of the enum-like tags, which all keep their value in u.i. */
#define ENUM_READER(fn, tag_, ctype, want)                   \
	TN_EXPORT int fn(const tn_ivalue *value, ctype *ret) \
	{                                                    \
		CHECK_ARGS(value, ret, #fn);                 \
		if (value->tag != (tag_))                    \
			return wrong_type(value, want);      \
		*ret = (ctype)value->u.i;                    \
		return 0;                                    \
	}

ENUM_READER(tn_ivalue_to_dtype, TN_IVALUE_DTYPE, enum tn_dtype, "ScalarType")
ENUM_READER(tn_ivalue_to_memory_format, TN_IVALUE_MEMORY_FORMAT, enum tn_memory_format,
	    "MemoryFormat")
ENUM_READER(tn_ivalue_to_layout, TN_IVALUE_LAYOUT, enum tn_layout, "Layout")

TN_EXPORT int tn_ivalue_to_device(const tn_ivalue *value, tn_device *ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_device");
	if (value->tag != TN_IVALUE_DEVICE)
		return wrong_type(value, "Device");
	ret->type = (enum tn_device_type)value->u.i;
	ret->index = (int)value->aux;
	return 0;
}

TN_EXPORT int tn_ivalue_to_string(const tn_ivalue *value, const char **ret)
{
	CHECK_ARGS(value, ret, "tn_ivalue_to_string");
	if (value->tag != TN_IVALUE_STRING)
		return wrong_type(value, "str");
	*ret = value->u.string->text;
	return 0;
}

static int list_reader(const tn_ivalue *value, uint32_t tag, const char *want, const char *who,
		       size_t *ret_n, const void **ret_data)
{
	if (!value || !ret_n || !ret_data)
		return null_arg(who);
	if (value->tag != tag)
		return wrong_type(value, want);
	*ret_n = value->u.list->len;
	*ret_data = value->u.list->data;
	return 0;
}

TN_EXPORT int tn_ivalue_to_int_list(const tn_ivalue *value, size_t *ret_n,
				    const int64_t **ret_values)
{
	const void *d = NULL;
	int r = list_reader(value, TN_IVALUE_INT_LIST, "int[]", "tn_ivalue_to_int_list", ret_n,
			    ret_values ? &d : NULL);
	if (!r)
		*ret_values = d;
	return r;
}

TN_EXPORT int tn_ivalue_to_double_list(const tn_ivalue *value, size_t *ret_n,
				       const double **ret_values)
{
	const void *d = NULL;
	int r = list_reader(value, TN_IVALUE_DOUBLE_LIST, "float[]", "tn_ivalue_to_double_list",
			    ret_n, ret_values ? &d : NULL);
	if (!r)
		*ret_values = d;
	return r;
}

TN_EXPORT int tn_ivalue_to_bool_list(const tn_ivalue *value, size_t *ret_n,
				     const bool **ret_values)
{
	const void *d = NULL;
	int r = list_reader(value, TN_IVALUE_BOOL_LIST, "bool[]", "tn_ivalue_to_bool_list", ret_n,
			    ret_values ? &d : NULL);
	if (!r)
		*ret_values = d;
	return r;
}

TN_EXPORT int tn_ivalue_to_tensor_list(const tn_ivalue *value, size_t *ret_n,
				       tn_tensor *const **ret_tensors)
{
	const void *d = NULL;
	int r = list_reader(value, TN_IVALUE_TENSOR_LIST, "Tensor[]", "tn_ivalue_to_tensor_list",
			    ret_n, ret_tensors ? &d : NULL);
	if (!r)
		*ret_tensors = d;
	return r;
}

/* ---- equality ------------------------------------------------------------------------------ */

static bool same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

static bool list_equal(const tn_ivalue_list *a, const tn_ivalue_list *b)
{
	if (a == b)
		return true;
	if (a->tag != b->tag || a->len != b->len)
		return false;
	if (a->tag == TN_IVALUE_BOOL_LIST) {
		const bool *x = (const bool *)(const void *)a->data;
		const bool *y = (const bool *)(const void *)b->data;
		for (size_t i = 0; i < a->len; i++)
			if (x[i] != y[i])
				return false;
		return true;
	}
	/* Ints and tensor pointers compare by value, doubles bit for bit: all are memcmp. */
	return a->len == 0 || memcmp(a->data, b->data, a->len * list_elem_size(a->tag)) == 0;
}

TN_EXPORT bool tn_ivalue_equal(const tn_ivalue *a, const tn_ivalue *b)
{
	if (!a || !b)
		return a == b;
	if (a->tag != b->tag)
		return false;
	switch (a->tag) {
	case TN_IVALUE_NONE:
		return true;
	case TN_IVALUE_TENSOR:
		return a->u.tensor == b->u.tensor;
	case TN_IVALUE_GENERATOR:
		return a->u.generator == b->u.generator;
	case TN_IVALUE_INT:
	case TN_IVALUE_DTYPE:
	case TN_IVALUE_LAYOUT:
	case TN_IVALUE_MEMORY_FORMAT:
		return a->u.i == b->u.i;
	case TN_IVALUE_DOUBLE:
		return same_bits(a->u.d, b->u.d);
	case TN_IVALUE_BOOL:
		return a->u.b == b->u.b;
	case TN_IVALUE_SCALAR:
		if (a->aux != b->aux)
			return false;
		if (a->aux == TN_SCALAR_BOOL)
			return a->u.b == b->u.b;
		if (a->aux == TN_SCALAR_DOUBLE)
			return same_bits(a->u.d, b->u.d);
		return a->u.i == b->u.i;
	case TN_IVALUE_DEVICE:
		return a->u.i == b->u.i && a->aux == b->aux;
	case TN_IVALUE_STRING:
		return a->u.string == b->u.string ||
		       (a->u.string->len == b->u.string->len &&
			memcmp(a->u.string->text, b->u.string->text, a->u.string->len) == 0);
	case TN_IVALUE_INT_LIST:
	case TN_IVALUE_DOUBLE_LIST:
	case TN_IVALUE_BOOL_LIST:
	case TN_IVALUE_TENSOR_LIST:
		return list_equal(a->u.list, b->u.list);
	default:
		return false;
	}
}

/* ---- stacks -------------------------------------------------------------------------------- */

/* Make room for @need values in all, growing geometrically; the old items stay on failure. */
static int stack_grow(tn_stack *stack, size_t need, const char *who)
{
	size_t cap = stack->capacity, bytes;
	tn_ivalue *items;

	if (need <= cap)
		return 0;
	cap = cap < 4 ? 4 : cap;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (__builtin_mul_overflow(cap, sizeof(tn_ivalue), &bytes) || !(items = tn__malloc(bytes)))
		return tn__error(TN_ENOMEM, "%s: out of memory growing a stack to %zu values", who,
				 cap);
	if (stack->size)
		memcpy(items, stack->items, stack->size * sizeof(tn_ivalue));
	tn__free(stack->items);
	stack->items = items;
	stack->capacity = cap;
	return 0;
}

TN_EXPORT int tn_stack_reserve(tn_stack *stack, size_t n)
{
	if (!stack)
		return tn__error(TN_EINVAL, "tn_stack_reserve: NULL stack");
	if (n > SIZE_MAX - stack->size)
		return tn__error(TN_ENOMEM, "tn_stack_reserve: %zu more values overflow the size",
				 n);
	return stack_grow(stack, stack->size + n, "tn_stack_reserve");
}

TN_EXPORT int tn_stack_push(tn_stack *stack, tn_ivalue value)
{
	int r;

	if (!stack) {
		tn_ivalue_release(&value);
		return tn__error(TN_EINVAL, "tn_stack_push: NULL stack");
	}
	if (stack->size == stack->capacity &&
	    (r = stack_grow(stack, stack->size + 1, "tn_stack_push"))) {
		tn_ivalue_release(&value);
		return r;
	}
	stack->items[stack->size++] = value;
	return 0;
}

TN_EXPORT int tn_stack_push_tensor(tn_stack *stack, tn_tensor *tensor)
{
	tn_ivalue v;
	int r;

	if (!stack)
		return tn__error(TN_EINVAL, "tn_stack_push_tensor: NULL stack");
	if ((r = tn_ivalue_tensor(tensor, &v)))
		return r;
	return tn_stack_push(stack, v);
}

TN_EXPORT int tn_stack_pop(tn_stack *stack, tn_ivalue *ret_value)
{
	if (!stack || !ret_value)
		return tn__error(TN_EINVAL, "tn_stack_pop: NULL argument");
	if (stack->size == 0)
		return tn__error(TN_EINVAL, "tn_stack_pop: the stack is empty");
	*ret_value = stack->items[--stack->size];
	return 0;
}

TN_EXPORT int tn_stack_pop_tensor(tn_stack *stack, tn_tensor **ret_tensor)
{
	if (!stack || !ret_tensor)
		return tn__error(TN_EINVAL, "tn_stack_pop_tensor: NULL argument");
	if (stack->size == 0)
		return tn__error(TN_EINVAL, "tn_stack_pop_tensor: the stack is empty");
	tn_ivalue *top = &stack->items[stack->size - 1];
	if (top->tag != TN_IVALUE_TENSOR)
		return wrong_type(top, "Tensor");
	*ret_tensor = top->u.tensor;
	stack->size--;
	return 0;
}

TN_EXPORT void tn_stack_clear(tn_stack *stack)
{
	if (!stack)
		return;
	/* From the top down, the order a caller popping them would release them in. */
	while (stack->size > 0)
		tn_ivalue_release(&stack->items[--stack->size]);
}

TN_EXPORT void tn_stack_destroy(tn_stack *stack)
{
	if (!stack)
		return;
	tn_stack_clear(stack);
	tn__free(stack->items);
	stack->items = NULL;
	stack->capacity = 0;
}
