/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the schema parser (make fuzz). Any byte string goes in, NUL-terminated;
 * the parser must either refuse it with TN_EINVAL and a "schema:LINE:COL: " message, or accept
 * it, in which case its canonical text must parse back to an equal schema (every field, the
 * defaults compared with tn_ivalue_equal) with the same canonical text. A breach aborts, which
 * is how a fuzz target reports; the library itself never aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor.h>

static void fail(const char *what, const char *input, const char *detail)
{
	fprintf(stderr, "fuzz_schema: %s\n  input:  %s\n  detail: %s\n", what, input, detail);
	abort();
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_arg(const tn_schema_arg *a, const tn_schema_arg *b)
{
	return same_str(a->name, b->name) && a->type.kind == b->type.kind &&
	       a->type.is_list == b->type.is_list && a->type.elem_optional == b->type.elem_optional &&
	       a->type.optional == b->type.optional && a->type.list_size == b->type.list_size &&
	       same_str(a->alias_set, b->alias_set) && same_str(a->alias_after, b->alias_after) &&
	       a->alias_write == b->alias_write && a->kwarg_only == b->kwarg_only &&
	       a->has_default == b->has_default &&
	       tn_ivalue_equal(&a->default_value, &b->default_value);
}

static bool same_schema(const tn_schema *a, const tn_schema *b)
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	tn_schema *s, *back;
	int r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	r = tn_schema_parse(text, &s);
	if (r) {
		if (r != TN_EINVAL || strncmp(tn_last_error(), "schema:", 7) != 0)
			fail("refused without a positioned TN_EINVAL", text, tn_last_error());
		free(text);
		return 0;
	}
	const char *canon = tn_schema_str(s);
	if (!canon)
		fail("no canonical text", text, "");
	if (tn_schema_parse(canon, &back))
		fail("the canonical text does not parse", text, tn_last_error());
	if (strcmp(canon, tn_schema_str(back)) != 0)
		fail("the canonical text changes when parsed again", canon, tn_schema_str(back));
	if (!same_schema(s, back))
		fail("the canonical text parses to a different schema", text, canon);
	tn_schema_free(back);
	tn_schema_free(s);
	free(text);
	return 0;
}
