/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the .npy header parser (make fuzz). The input is a whole file: its
 * first bytes go to tn__npy_prefix, the header to tn__npy_parse, as tensord calls them. A
 * refusal must be TN_EINVAL or TN_ENOTSUP with an "npy: " message. What is accepted must fit
 * the file, and the writer must take it back: its header (64-byte aligned) parses to the same
 * array, and writing that again gives the same bytes.
 */
#include <stdint.h>

#include "fuzz_formats.h"

#define TARGET "fuzz_npy"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char out[TN__NPY_HEADER_MAX], out2[TN__NPY_HEADER_MAX];
	struct tn__fmt_tensor t, w, back;
	size_t end, len, len2;
	void *header;
	int r;

	r = tn__npy_prefix(data, size < TN__NPY_PREFIX_MAX ? size : TN__NPY_PREFIX_MAX, size, &end);
	if (r) {
		fuzz_check_refusal(TARGET, r, "npy: ");
		return 0;
	}
	header = fuzz_copy(data, end);
	if (!header)
		return 0;
	r = tn__npy_parse(header, end, size, &t);
	free(header);
	if (r) {
		fuzz_check_refusal(TARGET, r, "npy: ");
		return 0;
	}
	if (t.offset != end || t.nbytes > size - end || !tn_dtype_is_valid(t.dtype) ||
	    t.ndim < 0 || t.ndim > TN_ARENA_MAX_DIMS || t.name)
		fuzz_fail(TARGET, "the accepted array is out of place or out of range");

	w = t;
	if (tn__npy_write(&w, out, sizeof(out), &len))
		fuzz_fail(TARGET, "the writer refuses what the parser accepted");
	if (len % TN__NPY_ALIGN || w.offset != len || w.nbytes != t.nbytes)
		fuzz_fail(TARGET, "the written header is not aligned or has another size");
	if (tn__npy_parse(out, len, len + w.nbytes, &back))
		fuzz_fail(TARGET, "the written header does not parse");
	if (!fuzz_same_shape(&t, &back) || back.fortran_order != t.fortran_order || back.byteswap)
		fuzz_fail(TARGET, "the written header describes another array");
	if (tn__npy_write(&back, out2, sizeof(out2), &len2) || len2 != len ||
	    memcmp(out, out2, len))
		fuzz_fail(TARGET, "writing the written header's array gives other bytes");
	return 0;
}
