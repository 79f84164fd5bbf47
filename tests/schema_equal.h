/* SPDX-License-Identifier: MIT */
/*
 * Field-by-field schema equality, shared by the schema suite and the schema fuzz target (both
 * check that a schema's canonical text parses back to an equal schema).
 */
#ifndef TN_SCHEMA_EQUAL_H
#define TN_SCHEMA_EQUAL_H

#include <stdbool.h>
#include <string.h>

#include <tensor.h>

static inline bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static inline bool same_arg(const tn_schema_arg *a, const tn_schema_arg *b)
{
	return same_str(a->name, b->name) && a->type.kind == b->type.kind &&
	       a->type.is_list == b->type.is_list && a->type.elem_optional == b->type.elem_optional &&
	       a->type.optional == b->type.optional && a->type.list_size == b->type.list_size &&
	       same_str(a->alias_set, b->alias_set) && same_str(a->alias_after, b->alias_after) &&
	       a->alias_write == b->alias_write && a->kwarg_only == b->kwarg_only &&
	       a->has_default == b->has_default &&
	       tn_ivalue_equal(&a->default_value, &b->default_value);
}

static inline bool same_schema(const tn_schema *a, const tn_schema *b)
{
	if (!same_str(tn_schema_name(a), tn_schema_name(b)) ||
	    !same_str(tn_schema_overload(a), tn_schema_overload(b)) ||
	    tn_schema_num_args(a) != tn_schema_num_args(b) ||
	    tn_schema_num_returns(a) != tn_schema_num_returns(b))
		return false;
	for (size_t i = 0; i < tn_schema_num_args(a); i++)
		if (!same_arg(tn_schema_arg_at(a, i), tn_schema_arg_at(b, i)))
			return false;
	for (size_t i = 0; i < tn_schema_num_returns(a); i++)
		if (!same_arg(tn_schema_return_at(a, i), tn_schema_return_at(b, i)))
			return false;
	return true;
}

#endif /* TN_SCHEMA_EQUAL_H */
