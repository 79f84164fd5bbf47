/* SPDX-License-Identifier: MIT */
/*
 * What the model runners (gpt2.c, resnet.c) share: the message of a runner's last failure in
 * this thread, and binding a weight found by name with a check of its dtype and shape.
 */
#ifndef TN_MODELS_COMMON_H
#define TN_MODELS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <tensor.h>

/* Find the weight called @name (a new reference in *ret); 0 or a TN_E* code. */
typedef int (*model_get_fn)(void *ctx, const char *name, tn_tensor **ret);

/* Forget the last runner failure: a call starts with it, so that model_last_error then
 * reports libtensor's message for a failure of libtensor's own. */
void model_clear_error(void);

/* Record a runner failure (printf-style) and return @code. */
__attribute__((format(printf, 2, 3))) int model_fail(int code, const char *fmt, ...);

/* The last runner failure of this thread, or libtensor's tn_last_error() when there is none. */
const char *model_last_error(void);

/* "[a, b, c]" into @buf of @len bytes; returns @buf. */
const char *model_shape_str(char *buf, size_t len, int ndim, const int64_t *sizes);

/*
 * Look up weight @name of model @model ("gpt2") through @get and check it is float32 of shape
 * @sizes: *slot receives the reference. A missing weight keeps @get's code with the message
 * "MODEL: weight NAME: ..."; another dtype or shape gives TN_EINVAL with "MODEL: weight NAME is
 * float64 of shape [4], not float32 of shape [256]".
 */
int model_bind(tn_tensor **slot, model_get_fn get, void *ctx, const char *model, const char *name,
	       int ndim, const int64_t *sizes);

#endif /* TN_MODELS_COMMON_H */
