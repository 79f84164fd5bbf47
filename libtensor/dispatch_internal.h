/* SPDX-License-Identifier: MIT */
/*
 * Internals of the dispatcher shared between ivalue.c, schema.c and the registry: the payload
 * layouts of boxed lists and strings, unchecked accessors for code that has already checked a
 * value's type against a schema, and the schema helpers the registry uses to check arguments
 * and kernel signatures. Never installed.
 */
#ifndef TN_DISPATCH_INTERNAL_H
#define TN_DISPATCH_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include <tensor/dispatch.h>

/* ---- payloads (ivalue.c) ---- */

/*
 * The payload of a list value, shared by every copy of the value. The entries follow the
 * header: a C array of int64_t, double, bool or tn_tensor * as @tag says; each tensor entry is
 * an owned reference or NULL (the None of a Tensor?[] list).
 */
struct tn_ivalue_list {
	_Atomic int64_t refcount;
	uint32_t tag; /* the list's TN_IVALUE_*_LIST tag */
	size_t len;
	_Alignas(16) unsigned char data[];
};

/* The payload of a string value: @len bytes of text and a terminating NUL. */
struct tn_ivalue_string {
	_Atomic int64_t refcount;
	size_t len;
	char text[];
};

/*
 * Unchecked accessors for code that has already checked the value's tag (generated unboxing
 * code, the registry after tn__ivalue_fits). They do not look at the tag.
 */
static inline size_t tn__ivalue_list_len(const tn_ivalue *v)
{
	return v->u.list->len;
}

static inline const int64_t *tn__ivalue_list_ints(const tn_ivalue *v)
{
	return (const int64_t *)(const void *)v->u.list->data;
}

static inline const double *tn__ivalue_list_doubles(const tn_ivalue *v)
{
	return (const double *)(const void *)v->u.list->data;
}

static inline const bool *tn__ivalue_list_bools(const tn_ivalue *v)
{
	return (const bool *)(const void *)v->u.list->data;
}

static inline tn_tensor *const *tn__ivalue_list_tensors(const tn_ivalue *v)
{
	return (tn_tensor *const *)(const void *)v->u.list->data;
}

static inline const char *tn__ivalue_str(const tn_ivalue *v)
{
	return v->u.string->text;
}

/* ---- schemas (schema.c) ---- */

/*
 * Format @t as a schema spells it ("int", "int[2]?", "Tensor?[]") into @buf, as snprintf
 * does: the text is truncated to @len - 1 bytes and always NUL-terminated when @len > 0.
 * Returns the length of the full text (which fits when it is less than @len).
 */
int tn__type_format(const tn_type *t, char *buf, size_t len);

/*
 * Whether @v may be passed for an argument of type @t, by the readers' widening rules: None
 * for an optional type; Int, or a Scalar of kind int, for int (and, broadcast, for int[N] with
 * N > 0); Int, Double or a Scalar of kind int or double for float; Bool or a Scalar of kind
 * bool for bool; Int, Double, Bool or Scalar for Scalar; a list of the element type of any
 * length (N in T[N] is a size hint, as in PyTorch: sum's int[1] dim takes several dims, and
 * max_pool2d's int[2] stride=[] means "not given"), a Tensor list holding NULL entries
 * only for Tensor?[]; String for str; the enum values by their tags. False when either is
 * NULL.
 */
bool tn__ivalue_fits(const tn_ivalue *v, const tn_type *t);

/*
 * Whether two schemas have the same argument and return types, in order (names, defaults,
 * alias annotations and the keyword-only marker are ignored). On a difference, and when @why
 * is not NULL, a sentence saying what differs goes into @why ("argument 2 is 'int' in one and
 * 'Tensor' in the other", "3 arguments against 2"; indexes count from 1).
 */
bool tn__schema_types_equal(const tn_schema *a, const tn_schema *b, char *why, size_t len);

/*
 * Parse a signature without an operator name, "(Tensor self, Scalar alpha) -> Tensor", with
 * the grammar and errors of tn_schema_parse(). The result's name and overload are "" and its
 * tn_schema_str() is the signature's canonical text.
 */
int tn__schema_parse_signature(const char *text, tn_schema **ret);

#endif /* TN_DISPATCH_INTERNAL_H */
