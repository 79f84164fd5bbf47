/* SPDX-License-Identifier: MIT */
/*
 * What the file-format fuzz targets (fuzz_safetensors.c, fuzz_npy.c) share: how a breach is
 * reported (abort, as fuzz targets do; the library itself never aborts) and what a refusal
 * must look like.
 */
#ifndef TN_FUZZ_FORMATS_H
#define TN_FUZZ_FORMATS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor.h>
#include "formats.h"

static inline void fuzz_fail(const char *target, const char *what)
{
	fprintf(stderr, "%s: %s\n  last error: %s\n", target, what, tn_last_error());
	abort();
}

/* A parser refused the input: TN_EINVAL or TN_ENOTSUP, with a message of its format. */
static inline void fuzz_check_refusal(const char *target, int r, const char *prefix)
{
	if (r != TN_EINVAL && r != TN_ENOTSUP)
		fuzz_fail(target, "refused with a code other than TN_EINVAL or TN_ENOTSUP");
	if (strncmp(tn_last_error(), prefix, strlen(prefix)) != 0)
		fuzz_fail(target, "refused without a message of its format");
}

/* The header bytes in an allocation of their exact size, so that ASan sees a read past it. */
static inline void *fuzz_copy(const void *data, size_t len)
{
	void *copy = malloc(len ? len : 1);

	if (copy)
		memcpy(copy, data, len);
	return copy;
}

static inline int fuzz_same_shape(const struct tn__fmt_tensor *a, const struct tn__fmt_tensor *b)
{
	return a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
	       !memcmp(a->sizes, b->sizes, sizeof(a->sizes[0]) * (size_t)a->ndim);
}

#endif /* TN_FUZZ_FORMATS_H */
