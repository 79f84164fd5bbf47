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
#include "../schema_equal.h"

static void fail(const char *what, const char *input, const char *detail)
{
	fprintf(stderr, "fuzz_schema: %s\n  input:  %s\n  detail: %s\n", what, input, detail);
	abort();
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
