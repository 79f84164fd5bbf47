/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static __thread char model_error[256];

void model_clear_error(void)
{
	model_error[0] = '\0';
}

int model_fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(model_error, sizeof(model_error), fmt, ap);
	va_end(ap);
	return code;
}

const char *model_last_error(void)
{
	return model_error[0] ? model_error : tn_last_error();
}

const char *model_shape_str(char *buf, size_t len, int ndim, const int64_t *sizes)
{
	size_t n = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "",
				      (long long)sizes[i]);
	if (n < len)
		snprintf(buf + n, len - n, "]");
	return buf;
}

int model_bind(tn_tensor **slot, model_get_fn get, void *ctx, const char *model, const char *name,
	       int ndim, const int64_t *sizes)
{
	char want[96], got[96];
	tn_tensor *t = NULL;
	int rc = get(ctx, name, &t);
	if (rc < 0)
		return model_fail(rc, "%s: weight %s: %s", model, name, tn_last_error());
	if (tn_tensor_dtype(t) == TN_FLOAT32 && tn_tensor_ndim(t) == ndim &&
	    memcmp(tn_tensor_sizes(t), sizes, sizeof(int64_t) * (size_t)ndim) == 0) {
		*slot = t;
		return 0;
	}
	const char *dt = tn_dtype_name(tn_tensor_dtype(t));
	model_shape_str(got, sizeof(got), tn_tensor_ndim(t), tn_tensor_sizes(t));
	model_shape_str(want, sizeof(want), ndim, sizes);
	tn_tensor_unref(t);
	return model_fail(TN_EINVAL, "%s: weight %s is %s of shape %s, not float32 of shape %s",
			  model, name, dt ? dt : "?", got, want);
}
