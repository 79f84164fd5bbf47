/* SPDX-License-Identifier: MIT */
/*
 * The operator dispatcher: schemas, boxed values and stacks, the operator registry, boxed
 * calls by name, and the CPU capability that picks kernel variants.
 *
 * Every libtensor operator (tn_empty, tn_view, ...) is an entry of one op table, written as
 * PyTorch schemas ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor").
 * Its C function looks the operator up once, computes the dispatch key from the arguments'
 * devices (or from its Device argument), and calls the kernel registered for that key. The
 * same operator can be called "boxed": arguments are tn_ivalue values on a tn_stack, results
 * replace them. Programs may define operators of their own and register kernels for any
 * operator and key; see libtensor-ops(7) for the table and tn_op_def_at(3) for registration.
 *
 * Conventions: as everywhere in libtensor, functions return 0 or a negative TN_E* code and
 * leave a message in tn_last_error(); outputs are written on success only.
 */
#ifndef TENSOR_DISPATCH_H
#define TENSOR_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/device.h>
#include <tensor/dtype.h>
#include <tensor/macros.h>
#include <tensor/random.h>
#include <tensor/tensor.h>

TN_BEGIN_DECLS

/* ---- Dispatch keys ------------------------------------------------------------------ */

/*
 * X(ENUM, name), lowest priority first: when a call's tensors live on several device types
 * the highest key wins (a Meta tensor beats a CUDA one, a CUDA one beats a CPU one).
 * Values are ABI.
 */
#define TN_DISPATCH_KEY_LIST(X)   \
	X(TN_KEY_CPU, "CPU")      \
	X(TN_KEY_CUDA, "CUDA")    \
	X(TN_KEY_META, "Meta")

enum tn_dispatch_key {
#define TN_X_(e, name) e,
	TN_DISPATCH_KEY_LIST(TN_X_)
#undef TN_X_
	TN_NUM_DISPATCH_KEYS
};

/* tn_dispatch_key_name - "CPU", "CUDA" or "Meta"; NULL for a value that is not a key. */
TN_EXPORT const char *tn_dispatch_key_name(enum tn_dispatch_key key);

/* tn_dispatch_key_for_device - the key of a device type (TN_DEVICE_CPU -> TN_KEY_CPU, ...). */
TN_EXPORT enum tn_dispatch_key tn_dispatch_key_for_device(enum tn_device_type type);

/* ---- Boxed values ------------------------------------------------------------------- */

/* X(ENUM, type name as PyTorch prints it). Values are ABI. */
#define TN_IVALUE_TAG_LIST(X)                          \
	X(TN_IVALUE_NONE, "NoneType")                  \
	X(TN_IVALUE_TENSOR, "Tensor")                  \
	X(TN_IVALUE_INT, "int")                        \
	X(TN_IVALUE_DOUBLE, "float")                   \
	X(TN_IVALUE_BOOL, "bool")                      \
	X(TN_IVALUE_SCALAR, "Scalar")                  \
	X(TN_IVALUE_INT_LIST, "List[int]")             \
	X(TN_IVALUE_DOUBLE_LIST, "List[float]")        \
	X(TN_IVALUE_BOOL_LIST, "List[bool]")           \
	X(TN_IVALUE_TENSOR_LIST, "List[Tensor]")       \
	X(TN_IVALUE_STRING, "str")                     \
	X(TN_IVALUE_DTYPE, "ScalarType")               \
	X(TN_IVALUE_DEVICE, "Device")                  \
	X(TN_IVALUE_LAYOUT, "Layout")                  \
	X(TN_IVALUE_MEMORY_FORMAT, "MemoryFormat")     \
	X(TN_IVALUE_GENERATOR, "Generator")

enum tn_ivalue_tag {
#define TN_X_(e, name) e,
	TN_IVALUE_TAG_LIST(TN_X_)
#undef TN_X_
	TN_NUM_IVALUE_TAGS
};

/*
 * Reference-counted payloads of list and string values (opaque). The string payload has no
 * typedef: its name would clash with the function tn_ivalue_string().
 */
typedef struct tn_ivalue_list tn_ivalue_list;
struct tn_ivalue_string;

/*
 * A boxed value: 16 bytes, a payload and a tag, as c10::IValue. A value owns what it points
 * to: a Tensor value holds a tensor reference, a list or string value a reference to its
 * payload. Release with tn_ivalue_release(); duplicate with tn_ivalue_copy().
 *   Int, ScalarType (enum tn_dtype), Layout, MemoryFormat: u.i
 *   Double: u.d       Bool: u.b
 *   Scalar: u.i, u.d or u.b as aux (enum tn_scalar_kind) says
 *   Device: u.i is the enum tn_device_type, aux the index
 *   Generator: u.generator, a reference
 */
typedef struct tn_ivalue {
	union {
		int64_t i;
		double d;
		bool b;
		tn_tensor *tensor;
		tn_ivalue_list *list;
		struct tn_ivalue_string *string;
		tn_generator *generator;
	} u;
	uint32_t tag; /* enum tn_ivalue_tag */
	uint32_t aux;
} tn_ivalue;

/* Constructors of values that own nothing; they cannot fail. */
static inline tn_ivalue tn_ivalue_none(void)
{
	tn_ivalue v;
	v.u.i = 0;
	v.tag = TN_IVALUE_NONE;
	v.aux = 0;
	return v;
}

static inline tn_ivalue tn_ivalue_int(int64_t value)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.i = value;
	v.tag = TN_IVALUE_INT;
	return v;
}

static inline tn_ivalue tn_ivalue_double(double value)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.d = value;
	v.tag = TN_IVALUE_DOUBLE;
	return v;
}

static inline tn_ivalue tn_ivalue_bool(bool value)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.b = value;
	v.tag = TN_IVALUE_BOOL;
	return v;
}

static inline tn_ivalue tn_ivalue_scalar(tn_scalar value)
{
	tn_ivalue v = tn_ivalue_none();
	v.tag = TN_IVALUE_SCALAR;
	v.aux = (uint32_t)value.kind;
	if (value.kind == TN_SCALAR_BOOL)
		v.u.b = value.v.b;
	else if (value.kind == TN_SCALAR_INT)
		v.u.i = value.v.i;
	else
		v.u.d = value.v.d;
	return v;
}

static inline tn_ivalue tn_ivalue_dtype(enum tn_dtype dtype)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.i = (int64_t)dtype;
	v.tag = TN_IVALUE_DTYPE;
	return v;
}

static inline tn_ivalue tn_ivalue_device(tn_device device)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.i = (int64_t)device.type;
	v.aux = (uint32_t)device.index;
	v.tag = TN_IVALUE_DEVICE;
	return v;
}

static inline tn_ivalue tn_ivalue_layout(enum tn_layout layout)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.i = (int64_t)layout;
	v.tag = TN_IVALUE_LAYOUT;
	return v;
}

static inline tn_ivalue tn_ivalue_memory_format(enum tn_memory_format format)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.i = (int64_t)format;
	v.tag = TN_IVALUE_MEMORY_FORMAT;
	return v;
}

/*
 * Constructors that take a reference or allocate. tn_ivalue_tensor takes a new reference to
 * @tensor (TN_EBADF for a bad handle, TN_EINVAL for NULL: use tn_ivalue_none() for an absent
 * optional tensor). The list constructors copy @n elements; a tensor list may hold NULL
 * entries (the None of a Tensor?[] list). tn_ivalue_string copies the NUL-terminated @text.
 * Errors: TN_EINVAL (NULL output, NULL array with n > 0), TN_EBADF, TN_ENOMEM.
 */
TN_EXPORT int tn_ivalue_tensor(tn_tensor *tensor, tn_ivalue *ret_value);
TN_EXPORT int tn_ivalue_int_list(size_t n, const int64_t *values, tn_ivalue *ret_value);
TN_EXPORT int tn_ivalue_double_list(size_t n, const double *values, tn_ivalue *ret_value);
TN_EXPORT int tn_ivalue_bool_list(size_t n, const bool *values, tn_ivalue *ret_value);
TN_EXPORT int tn_ivalue_tensor_list(size_t n, tn_tensor *const *tensors, tn_ivalue *ret_value);
TN_EXPORT int tn_ivalue_string(const char *text, tn_ivalue *ret_value);
/* tn_ivalue_generator - a Generator value holding a new reference to @gen (TN_EBADF for a bad
 * handle; NULL is TN_EINVAL: the None of a Generator? argument is tn_ivalue_none()). */
TN_EXPORT int tn_ivalue_generator(tn_generator *gen, tn_ivalue *ret_value);

/* tn_ivalue_copy - *ret_value becomes another owner of what @value holds; cannot fail. */
TN_EXPORT void tn_ivalue_copy(const tn_ivalue *value, tn_ivalue *ret_value);
/* tn_ivalue_release - drop what @value owns and make it None; NULL is accepted. */
TN_EXPORT void tn_ivalue_release(tn_ivalue *value);

/* tn_ivalue_type_name - "Tensor", "int", "List[int]", ... ("invalid" for a bad tag). */
TN_EXPORT const char *tn_ivalue_type_name(const tn_ivalue *value);

/*
 * Typed readers. They fail with TN_EINVAL ("Expected a value of type 'int' but found type
 * 'Tensor'") when the tag does not fit. Widening is allowed as in TorchScript: an Int reads
 * as a double; an Int, Double or Bool reads as a Scalar. Borrowed results (the tensor, list
 * data, string) live as long as the value.
 */
TN_EXPORT int tn_ivalue_to_int(const tn_ivalue *value, int64_t *ret);
TN_EXPORT int tn_ivalue_to_double(const tn_ivalue *value, double *ret);
TN_EXPORT int tn_ivalue_to_bool(const tn_ivalue *value, bool *ret);
TN_EXPORT int tn_ivalue_to_scalar(const tn_ivalue *value, tn_scalar *ret);
TN_EXPORT int tn_ivalue_to_tensor(const tn_ivalue *value, tn_tensor **ret);
TN_EXPORT int tn_ivalue_to_dtype(const tn_ivalue *value, enum tn_dtype *ret);
TN_EXPORT int tn_ivalue_to_device(const tn_ivalue *value, tn_device *ret);
TN_EXPORT int tn_ivalue_to_memory_format(const tn_ivalue *value, enum tn_memory_format *ret);
TN_EXPORT int tn_ivalue_to_layout(const tn_ivalue *value, enum tn_layout *ret);
TN_EXPORT int tn_ivalue_to_string(const tn_ivalue *value, const char **ret);
TN_EXPORT int tn_ivalue_to_generator(const tn_ivalue *value, tn_generator **ret);
TN_EXPORT int tn_ivalue_to_int_list(const tn_ivalue *value, size_t *ret_n,
				    const int64_t **ret_values);
TN_EXPORT int tn_ivalue_to_double_list(const tn_ivalue *value, size_t *ret_n,
				       const double **ret_values);
TN_EXPORT int tn_ivalue_to_bool_list(const tn_ivalue *value, size_t *ret_n,
				     const bool **ret_values);
TN_EXPORT int tn_ivalue_to_tensor_list(const tn_ivalue *value, size_t *ret_n,
				       tn_tensor *const **ret_tensors);

/*
 * tn_ivalue_equal - true when both values have the same tag and equal contents (tensors are
 * compared by identity, lists element by element, doubles bit for bit).
 */
TN_EXPORT bool tn_ivalue_equal(const tn_ivalue *a, const tn_ivalue *b);

/* ---- Stacks ------------------------------------------------------------------------- */

/*
 * A growable stack of values, the calling convention of boxed calls: arguments are pushed
 * in schema order (keyword-only ones too), the call replaces them with the results. The
 * stack owns its values. Initialise with TN_STACK_INIT (or zero it); release with
 * tn_stack_destroy(). items[0] is the bottom.
 */
typedef struct tn_stack {
	tn_ivalue *items;
	size_t size;
	size_t capacity;
} tn_stack;

#define TN_STACK_INIT { NULL, 0, 0 }

/* tn_stack_reserve - room for @n more values without reallocation (TN_ENOMEM). */
TN_EXPORT int tn_stack_reserve(tn_stack *stack, size_t n);
/* tn_stack_push - push @value, taking ownership; on failure (TN_ENOMEM) @value is released. */
TN_EXPORT int tn_stack_push(tn_stack *stack, tn_ivalue value);
/* tn_stack_push_tensor - push a new reference to @tensor (tn_ivalue_tensor + tn_stack_push). */
TN_EXPORT int tn_stack_push_tensor(tn_stack *stack, tn_tensor *tensor);
/* tn_stack_pop - move the top value to *ret_value (TN_EINVAL on an empty stack). */
TN_EXPORT int tn_stack_pop(tn_stack *stack, tn_ivalue *ret_value);
/*
 * tn_stack_pop_tensor - pop a Tensor value and hand its reference to *ret_tensor. A value of
 * another type stays on the stack and the call fails with TN_EINVAL.
 */
TN_EXPORT int tn_stack_pop_tensor(tn_stack *stack, tn_tensor **ret_tensor);
/* tn_stack_clear - release every value, keep the capacity. tn_stack_destroy - also free it. */
TN_EXPORT void tn_stack_clear(tn_stack *stack);
TN_EXPORT void tn_stack_destroy(tn_stack *stack);

/* ---- Schemas ------------------------------------------------------------------------ */

/* X(ENUM, name in schemas). Values are ABI. */
#define TN_TYPE_KIND_LIST(X)                           \
	X(TN_TYPE_TENSOR, "Tensor")                    \
	X(TN_TYPE_INT, "int")                          \
	X(TN_TYPE_FLOAT, "float")                      \
	X(TN_TYPE_BOOL, "bool")                        \
	X(TN_TYPE_STR, "str")                          \
	X(TN_TYPE_SCALAR, "Scalar")                    \
	X(TN_TYPE_SCALAR_TYPE, "ScalarType")           \
	X(TN_TYPE_DEVICE, "Device")                    \
	X(TN_TYPE_LAYOUT, "Layout")                    \
	X(TN_TYPE_MEMORY_FORMAT, "MemoryFormat")       \
	X(TN_TYPE_GENERATOR, "Generator")

enum tn_type_kind {
#define TN_X_(e, name) e,
	TN_TYPE_KIND_LIST(TN_X_)
#undef TN_X_
	TN_NUM_TYPE_KINDS
};

/*
 * An argument or return type: "int" is {TN_TYPE_INT}, "int[2]?" is {TN_TYPE_INT, list,
 * list_size 2, optional}, "Tensor?[]" is {TN_TYPE_TENSOR, list, elem_optional}. SymInt is
 * read as int.
 */
typedef struct tn_type {
	enum tn_type_kind kind; /* the element kind for lists */
	bool is_list;
	bool elem_optional; /* Tensor?[] */
	bool optional;      /* the trailing '?' */
	int32_t list_size;  /* N of int[N]; 0 for an unsized list */
} tn_type;

/*
 * One argument or return of a schema. Alias annotations: "Tensor(a!)" has alias_set "a" and
 * alias_write; "Tensor(a -> *)" has alias_set "a" and alias_after "*"; NULL when absent.
 */
typedef struct tn_schema_arg {
	const char *name; /* NULL for an unnamed return */
	tn_type type;
	const char *alias_set;
	const char *alias_after;
	bool alias_write;
	bool kwarg_only;        /* after the '*' */
	bool has_default;
	tn_ivalue default_value; /* None unless has_default */
} tn_schema_arg;

typedef struct tn_schema tn_schema;

/*
 * tn_schema_parse - parse a schema in PyTorch's grammar:
 *   [ns::]name[.overload](args) -> returns
 * Errors: TN_EINVAL with the column ("schema:1:24: expected ',' or ')' but found 'x'"),
 * TN_ENOMEM. Free the result with tn_schema_free().
 */
TN_EXPORT int tn_schema_parse(const char *text, tn_schema **ret_schema);
TN_EXPORT void tn_schema_free(tn_schema *schema);

/* Accessors; the strings live as long as the schema. */
TN_EXPORT const char *tn_schema_name(const tn_schema *schema);     /* "aten::add" */
TN_EXPORT const char *tn_schema_overload(const tn_schema *schema); /* "Tensor", or "" */
TN_EXPORT size_t tn_schema_num_args(const tn_schema *schema);
TN_EXPORT const tn_schema_arg *tn_schema_arg_at(const tn_schema *schema, size_t index);
TN_EXPORT size_t tn_schema_num_returns(const tn_schema *schema);
TN_EXPORT const tn_schema_arg *tn_schema_return_at(const tn_schema *schema, size_t index);
/* tn_schema_str - the canonical text, which tn_schema_parse() reads back to an equal schema. */
TN_EXPORT const char *tn_schema_str(const tn_schema *schema);

/* ---- Operators and registration ----------------------------------------------------- */

typedef struct tn_op tn_op;                     /* an operator entry; lives until exit */
typedef struct tn_registration tn_registration; /* undone by tn_deregister() */

/*
 * A boxed kernel: the operator's arguments are the top tn_schema_num_args() values of
 * @stack; on success the kernel replaces them with the results and returns 0, on failure it
 * returns a negative TN_E* code (the dispatcher pops whatever arguments it left), and the
 * caller reads whatever tn_last_error() then holds: libtensor calls the kernel makes leave
 * their own messages there.
 */
typedef int (*tn_boxed_kernel)(const tn_op *op, enum tn_dispatch_key key, tn_stack *stack,
			       void *ctx);

/* Any C function pointer; unboxed kernels are stored as this and cast back by their caller. */
typedef void (*tn_fn)(void);

/*
 * tn_op_def_at - define an operator from a schema with a namespace ("myns::scale(Tensor
 * self, float factor) -> Tensor"). Defining the same name.overload twice fails with TN_EBUSY
 * naming both sites. TN_OP_DEF passes the caller's file and line.
 */
TN_EXPORT int tn_op_def_at(const char *schema, const char *file, int line,
			   tn_registration **ret_registration);
#define TN_OP_DEF(schema, ret) tn_op_def_at((schema), __FILE__, __LINE__, (ret))

/*
 * tn_op_impl_at - register a boxed kernel for @name ("ns::op.overload") under @key. The
 * operator must be defined (TN_ENOENT otherwise). A later registration for the same operator
 * and key takes over; deregistering it brings the earlier one back.
 */
TN_EXPORT int tn_op_impl_at(const char *name, enum tn_dispatch_key key, tn_boxed_kernel kernel,
			    void *ctx, const char *file, int line,
			    tn_registration **ret_registration);
#define TN_OP_IMPL(name, key, kernel, ctx, ret) \
	tn_op_impl_at((name), (key), (kernel), (ctx), __FILE__, __LINE__, (ret))

/*
 * tn_op_impl_unboxed_at - register an unboxed kernel: a C function with the operator's C
 * signature (see libtensor-ops(7)), described by @signature, a schema whose types must match
 * the operator's ("(Tensor self, Tensor other, Scalar alpha) -> Tensor"; names, defaults and
 * argument alias annotations may differ, but a written-to return, Tensor(a!), must be marked
 * so, since it has no C parameter). A mismatch fails with TN_EINVAL naming both sites. Operators of the op table box and unbox
 * for such a kernel themselves; for other operators @boxed must be given too.
 */
TN_EXPORT int tn_op_impl_unboxed_at(const char *name, enum tn_dispatch_key key,
				    const char *signature, tn_fn kernel, tn_boxed_kernel boxed,
				    void *ctx, const char *file, int line,
				    tn_registration **ret_registration);

/*
 * tn_fallback_impl_at - a boxed kernel for every operator that has no kernel of its own for
 * @key (PyTorch's backend fallback). One per key; registering a second fails with TN_EBUSY.
 */
TN_EXPORT int tn_fallback_impl_at(enum tn_dispatch_key key, tn_boxed_kernel kernel, void *ctx,
				  const char *file, int line, tn_registration **ret_registration);
#define TN_FALLBACK_IMPL(key, kernel, ctx, ret) \
	tn_fallback_impl_at((key), (kernel), (ctx), __FILE__, __LINE__, (ret))

/*
 * tn_deregister - undo a registration and free @registration (NULL is accepted). Removing a
 * definition while kernels are registered for it fails with TN_EBUSY and keeps it. The
 * registry keeps the removed kernel record (about 100 bytes) or schema (about 1 KiB) until the
 * process exits, since a call on another thread may still be using it: a program that
 * registers and deregisters in a loop grows by that much per cycle.
 */
TN_EXPORT int tn_deregister(tn_registration *registration);

/*
 * tn_op_find - the operator named "ns::name.overload" (or "name.overload", read as "aten::"),
 * in constant time. TN_ENOENT ("No such operator aten::foo") when none is defined.
 */
TN_EXPORT int tn_op_find(const char *name, const tn_op **ret_op);

/* tn_op_name - "aten::add.Tensor". tn_op_schema - the definition (NULL once removed). */
TN_EXPORT const char *tn_op_name(const tn_op *op);
TN_EXPORT const tn_schema *tn_op_schema(const tn_op *op);

/* tn_op_has_kernel - whether @op has a kernel of its own for @key (fallbacks not counted). */
TN_EXPORT bool tn_op_has_kernel(const tn_op *op, enum tn_dispatch_key key);

/*
 * tn_op_kernel_unboxed - the unboxed kernel registered for @op and @key, for a caller that
 * knows its C type. TN_ENOENT when the kernel there is boxed only or there is none.
 */
TN_EXPORT int tn_op_kernel_unboxed(const tn_op *op, enum tn_dispatch_key key, tn_fn *ret_kernel);

/*
 * tn_op_foreach - call @fn for every defined operator, in definition order, until it returns
 * non-zero (which tn_op_foreach then returns).
 */
TN_EXPORT int tn_op_foreach(int (*fn)(const tn_op *op, void *ctx), void *ctx);

/*
 * tn_op_call_boxed / tn_call_boxed - call an operator with the top values of @stack as its
 * arguments, in schema order, all of them (defaults are in the schema for the caller to
 * push). The dispatch key comes from the tensors among them (else a Device argument, else
 * CPU). On success the arguments are replaced by the results; on failure they are popped
 * and released, except when the stack holds fewer values than the operator takes, or the
 * operator is no longer defined, or an argument is NULL: then the stack is left as it was. Errors: TN_ENOENT (unknown name), TN_EINVAL (too few values, a value of the
 * wrong type: "Expected a value of type 'Tensor' for argument 'other' but instead found type
 * 'int'."), TN_ENOTSUP (no kernel for the key: "Could not run 'aten::add.Tensor' with
 * arguments from the 'CUDA' backend. ..."), and whatever the kernel returns.
 */
TN_EXPORT int tn_op_call_boxed(const tn_op *op, tn_stack *stack);
TN_EXPORT int tn_call_boxed(const char *name, tn_stack *stack);

/* ---- CPU capability ----------------------------------------------------------------- */

/* X(ENUM, name), lowest first. Values are ABI. */
#define TN_CPU_CAPABILITY_LIST(X)                    \
	X(TN_CPU_CAPABILITY_DEFAULT, "default")      \
	X(TN_CPU_CAPABILITY_AVX2, "avx2")            \
	X(TN_CPU_CAPABILITY_AVX512, "avx512")

enum tn_cpu_capability {
#define TN_X_(e, name) e,
	TN_CPU_CAPABILITY_LIST(TN_X_)
#undef TN_X_
	TN_NUM_CPU_CAPABILITIES
};

/*
 * tn_cpu_capability - the capability whose kernel variants this process uses: the best the
 * CPU and the build support (AVX512 needs AVX512 F, VL, BW and DQ with OS support), lowered
 * by TN_CPU_CAPABILITY=default|avx2|avx512. Decided at first use, then fixed.
 */
TN_EXPORT enum tn_cpu_capability tn_cpu_capability(void);
/* tn_cpu_capability_name - "default", "avx2" or "avx512"; NULL for a bad value. */
TN_EXPORT const char *tn_cpu_capability_name(enum tn_cpu_capability capability);

TN_END_DECLS

#endif /* TENSOR_DISPATCH_H */
