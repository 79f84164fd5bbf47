/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the safetensors header parser (make fuzz). The input is a whole file:
 * its first 8 bytes go to tn__safetensors_prefix, the header to tn__safetensors_parse, as
 * tensord calls them. A refusal must be TN_EINVAL or TN_ENOTSUP with a "safetensors: "
 * message. What is accepted must tile the file, and the writer must take it back: its header
 * parses to the same tensors and metadata, and writing that again gives the same bytes.
 */
#include <stdint.h>

#include "fuzz_formats.h"

#define TARGET "fuzz_safetensors"

static void check_tiling(const struct tn__safetensors *st, uint64_t file_size)
{
	uint64_t at = st->data_offset;

	for (size_t i = 0; i < st->ntensors; i++) {
		const struct tn__fmt_tensor *t = &st->tensors[i];
		uint64_t numel = 1;
		if (t->offset != at || !tn_dtype_is_valid(t->dtype) || t->ndim < 0 ||
		    t->ndim > TN_ARENA_MAX_DIMS || strlen(t->name) > TN_ARENA_NAME_MAX)
			fuzz_fail(TARGET, "an accepted tensor is out of place or out of range");
		for (int d = 0; d < t->ndim; d++)
			numel *= (uint64_t)t->sizes[d];
		if (t->nbytes != numel * tn_dtype_size(t->dtype))
			fuzz_fail(TARGET, "an accepted tensor's bytes do not match its shape");
		at += t->nbytes;
	}
	if (at != file_size || st->data_len != file_size - st->data_offset)
		fuzz_fail(TARGET, "the accepted tensors do not cover the data section");
}

static void check_same(const struct tn__safetensors *a, const struct tn__safetensors *b)
{
	if (a->ntensors != b->ntensors || a->nmeta != b->nmeta)
		fuzz_fail(TARGET, "the written header has other counts");
	for (size_t i = 0; i < a->ntensors; i++) {
		size_t k = 0;
		while (k < b->ntensors && strcmp(a->tensors[i].name, b->tensors[k].name))
			k++;
		if (k == b->ntensors || !fuzz_same_shape(&a->tensors[i], &b->tensors[k]))
			fuzz_fail(TARGET, "the written header describes another tensor");
	}
	for (size_t i = 0; i < a->nmeta; i++) /* both sorted by key */
		if (a->meta[i].key_len != b->meta[i].key_len ||
		    a->meta[i].value_len != b->meta[i].value_len ||
		    memcmp(a->meta[i].key, b->meta[i].key, a->meta[i].key_len) ||
		    memcmp(a->meta[i].value, b->meta[i].value, a->meta[i].value_len))
			fuzz_fail(TARGET, "the written header has other metadata");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tn__safetensors *st, *back;
	uint64_t n, file_size, file_size2;
	void *header, *out, *out2;
	size_t len, len2;
	int r;

	r = tn__safetensors_prefix(data, size < 8 ? size : 8, size, &n);
	if (r) {
		fuzz_check_refusal(TARGET, r, "safetensors: ");
		return 0;
	}
	header = fuzz_copy(data + 8, n);
	if (!header)
		return 0;
	r = tn__safetensors_parse(header, n, size, TN__SAFETENSORS_KEEP_METADATA, &st);
	free(header);
	if (r) {
		fuzz_check_refusal(TARGET, r, "safetensors: ");
		return 0;
	}
	check_tiling(st, size);

	if (tn__safetensors_write(st->tensors, st->ntensors, st->meta, st->nmeta, &out, &len,
				  &file_size))
		fuzz_fail(TARGET, "the writer refuses what the parser accepted");
	if (len % 8 || file_size != len + st->data_len)
		fuzz_fail(TARGET, "the written header is not padded or has another data size");
	if (tn__safetensors_parse((char *)out + 8, len - 8, file_size,
				  TN__SAFETENSORS_KEEP_METADATA, &back))
		fuzz_fail(TARGET, "the written header does not parse");
	check_same(st, back);
	check_tiling(back, file_size);
	if (tn__safetensors_write(back->tensors, back->ntensors, back->meta, back->nmeta, &out2,
				  &len2, &file_size2) ||
	    len2 != len || file_size2 != file_size || memcmp(out, out2, len))
		fuzz_fail(TARGET, "writing the written header's tensors gives other bytes");
	free(out2);
	free(out);
	tn__safetensors_free(back);
	tn__safetensors_free(st);
	return 0;
}
