/* SPDX-License-Identifier: MIT */
/*
 * The operator registry's internals, shared by registry.c and the generated ops_gen.c.
 *
 * An operator entry (struct tn_op) holds its schema and one published kernel pointer per
 * dispatch key. Registration, under one mutex, builds an immutable kernel record and
 * publishes it with a release store; calls load it with an acquire load and take no lock.
 * Records that a deregistration replaces are retired, never freed, so a call that loaded one
 * just before can still use it.
 */
#ifndef TN_REGISTRY_H
#define TN_REGISTRY_H

#include <stdatomic.h>

#include "dispatch_internal.h"
#include <tensor/ops.h>

#define TN_LIKELY(x) __builtin_expect(!!(x), 1)
#define TN_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The boxed adapter of a table operator: run the unboxed kernel @fn with the arguments on
 * top of @stack and replace them with its results (room for them is reserved beforehand). */
typedef int (*tn__unbox_fn)(tn_fn fn, tn_stack *stack);

struct tn_registration;

/* One registered kernel; immutable once published. */
struct tn__kernel {
	tn_fn unboxed;          /* NULL for boxed-only kernels */
	tn_boxed_kernel boxed;  /* NULL for unboxed kernels of table operators */
	void *ctx;
	tn__unbox_fn unbox;     /* the operator's adapter, used when boxed is NULL */
	enum tn_dispatch_key key;
	const char *file;       /* owned by the registration */
	int line;
	struct tn__kernel *retired_next;
};

struct tn_op {
	char *name; /* "ns::name.overload" */
	uint64_t hash;
	/* The kernel calls use, per key: the newest registration's record. */
	_Atomic(const struct tn__kernel *) table[TN_NUM_DISPATCH_KEYS];
	_Atomic(tn_schema *) schema; /* NULL while not defined */
	tn__unbox_fn unbox;          /* table operators only */
	/* Under the registry lock: */
	struct tn_registration *def;
	struct tn_registration *impls[TN_NUM_DISPATCH_KEYS]; /* newest first */
	bool listed; /* in the definition-order list */
};

/* One row of the generated registration table. */
struct tn__builtin_kernel {
	enum tn_dispatch_key key;
	tn_fn fn;
	int line;
};

struct tn__builtin_op {
	const char *schema;
	const char *cname;
	int line;
	tn__unbox_fn unbox;
	const struct tn__builtin_kernel *kernels;
	int nkernels;
	const char *doc;
};

extern const struct tn__builtin_op tn__builtin_ops[];
extern const size_t tn__num_builtin_ops;
extern struct tn_op *tn__builtin_handles[];
extern atomic_bool tn__builtins_ready;

int tn__builtin_op_slow(size_t index, struct tn_op **ret);

/* The handle of table operator @index, registering the table on first use. */
static inline int tn__builtin_op(size_t index, struct tn_op **ret)
{
	/* Acquire: the handles were written before the flag was set with release. */
	if (TN_LIKELY(atomic_load_explicit(&tn__builtins_ready, memory_order_acquire))) {
		*ret = tn__builtin_handles[index];
		return 0;
	}
	return tn__builtin_op_slow(index, ret);
}

_Static_assert((int)TN_KEY_CPU == (int)TN_DEVICE_CPU && (int)TN_KEY_CUDA == (int)TN_DEVICE_CUDA &&
		       (int)TN_KEY_META == (int)TN_DEVICE_META,
	       "dispatch keys follow the device types");

/* Add the key of tensor argument @arg to @keys; TN_EBADF for a dead handle. */
static inline int tn__keys_of_tensor(unsigned *keys, const tn_tensor *t, const char *who,
				     const char *arg)
{
	(void)arg;
	if (TN_UNLIKELY(!tn__handle_is(t, TN_MAGIC_TENSOR)))
		return tn__bad_tensor(who);
	*keys |= 1u << (unsigned)t->storage->device.type;
	return 0;
}

/* A written (Tensor(a!)) argument over a sealed arena tensor's read-only bytes: TN_EPERM. */
int tn__readonly_error(const char *who, const char *arg);
static inline int tn__check_writable(const tn_tensor *t, const char *who, const char *arg)
{
	if (TN_UNLIKELY(tn__handle_is(t, TN_MAGIC_TENSOR) && t->storage->readonly))
		return tn__readonly_error(who, arg);
	return 0;
}

int tn__keys_of_tensor_list(unsigned *keys, int n, tn_tensor *const *tensors, const char *who,
			    const char *arg);
int tn__keys_of_device(unsigned *keys, const tn_device *device, const char *who);

static inline enum tn_dispatch_key tn__highest_key(unsigned keys)
{
	return keys ? (enum tn_dispatch_key)(31 - __builtin_clz(keys)) : TN_KEY_CPU;
}

int tn__dispatch_slow(const struct tn_op *op, enum tn_dispatch_key key,
		      const struct tn__kernel **ret);

/* The kernel for @key: the operator's own, else the key's fallback, else TN_ENOTSUP. */
static inline int tn__dispatch(const struct tn_op *op, enum tn_dispatch_key key,
			       const struct tn__kernel **ret)
{
	/* Acquire pairs with the release store that published the record. */
	const struct tn__kernel *k = atomic_load_explicit(&op->table[key], memory_order_acquire);
	if (TN_LIKELY(k != NULL)) {
		*ret = k;
		return 0;
	}
	return tn__dispatch_slow(op, key, ret);
}

/* Run kernel @k the boxed way on the arguments atop @stack (already type-checked), and check
 * what a boxed kernel left there against the schema's returns. */
int tn__call_kernel_boxed(const struct tn_op *op, const tn_schema *schema,
			  enum tn_dispatch_key key, const struct tn__kernel *k, tn_stack *stack);

/* Stack helpers for generated code. */
static inline void tn__stack_push_reserved(tn_stack *stack, tn_ivalue value)
{
	stack->items[stack->size++] = value;
}

static inline void tn__stack_drop(tn_stack *stack, size_t n)
{
	while (n--)
		tn_ivalue_release(&stack->items[--stack->size]);
}

/* A Tensor value that takes over the caller's reference. */
static inline tn_ivalue tn__ivalue_owned_tensor(tn_tensor *t)
{
	tn_ivalue v = tn_ivalue_none();
	v.u.tensor = t;
	v.tag = TN_IVALUE_TENSOR;
	return v;
}

/* Move a Tensor list value's tensors into a malloc'd array (new references). */
int tn__ivalue_take_tensor_array(tn_ivalue *value, int *ret_n, tn_tensor ***ret);

/* Register the op table (idempotent, retried after a failure). */
int tn__registry_init(void);

#endif /* TN_REGISTRY_H */
