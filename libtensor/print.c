/* SPDX-License-Identifier: MIT */
/*
 * Printing tensors exactly as PyTorch's repr() does (torch/_tensor_str.py): the same choice
 * between integer, fixed and scientific notation, the same column width, line wrapping at 80
 * columns, "..." summaries past 1000 elements, and the same size/dtype suffixes.
 *
 * The formatter looks only at the elements that will be printed (PyTorch formats the
 * summarised data), so one visitor walks those elements for both passes.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define PRECISION 4
#define THRESHOLD 1000
#define EDGEITEMS 3
#define LINEWIDTH 80

struct strbuf {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void sb_putn(struct strbuf *sb, const char *s, size_t n)
{
	if (sb->oom)
		return;
	if (sb->len + n + 1 > sb->cap) {
		size_t cap = sb->cap ? sb->cap : 256;
		while (cap < sb->len + n + 1)
			cap *= 2;
		char *p = tn__malloc(cap);
		if (!p) {
			sb->oom = true;
			return;
		}
		if (sb->len)
			memcpy(p, sb->buf, sb->len);
		tn__free(sb->buf);
		sb->buf = p;
		sb->cap = cap;
	}
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

static void sb_puts(struct strbuf *sb, const char *s)
{
	sb_putn(sb, s, strlen(s));
}

static void sb_spaces(struct strbuf *sb, int n)
{
	while (n-- > 0)
		sb_putn(sb, " ", 1);
}

struct formatter {
	const tn_tensor *t;
	bool floating;
	bool summarize;
	bool int_mode;
	bool sci_mode;
	int max_width;
	/* Statistics over the nonzero finite printed values (floating dtypes). */
	bool any_nonzero_finite;
	double min_abs, max_abs;
};

static const unsigned char *element_at(const tn_tensor *t, int64_t offset)
{
	return (const unsigned char *)t->storage->data + offset * (int64_t)tn_dtype_size(t->dtype);
}

/* Format @v the way Python formats a float with @spec ("e", "f" or int-mode "0f"). */
static int format_double(char *buf, size_t len, double v, char mode)
{
	if (isnan(v))
		return snprintf(buf, len, "nan"); /* Python never prints "-nan" */
	if (mode == 'e')
		return snprintf(buf, len, "%.*e", PRECISION, v);
	if (mode == 'f')
		return snprintf(buf, len, "%.*f", PRECISION, v);
	return snprintf(buf, len, "%.0f", v);
}

/* Format one element without padding. */
static void format_value(const struct formatter *f, const unsigned char *p, char *buf, size_t len)
{
	enum tn_dtype dt = f->t->dtype;

	if (!f->floating) {
		tn_scalar s = tn__element_to_scalar(dt, p);
		if (s.kind == TN_SCALAR_BOOL)
			snprintf(buf, len, "%s", s.v.b ? "True" : "False");
		else
			snprintf(buf, len, "%lld", (long long)s.v.i);
		return;
	}
	double v = tn__element_to_double(dt, p);
	if (f->sci_mode) {
		format_double(buf, len, v, 'e');
	} else if (f->int_mode) {
		int n = format_double(buf, len, v, '0');
		if (isfinite(v) && n > 0 && (size_t)n + 1 < len)
			strcat(buf, ".");
	} else {
		format_double(buf, len, v, 'f');
	}
}

typedef void (*visit_fn)(struct formatter *f, const unsigned char *p);

/* Call @fn on each element that will be printed, in order. */
static void visit(struct formatter *f, int dim, int64_t offset, visit_fn fn)
{
	const tn_tensor *t = f->t;
	if (dim == t->ndim) {
		fn(f, element_at(t, offset));
		return;
	}
	int64_t n = t->sizes[dim], stride = t->strides[dim];
	bool cut = f->summarize && n > 2 * EDGEITEMS;
	for (int64_t i = 0; i < n; i++) {
		if (cut && i == EDGEITEMS)
			i = n - EDGEITEMS;
		visit(f, dim + 1, offset + i * stride, fn);
	}
}

static void stats_pass(struct formatter *f, const unsigned char *p)
{
	if (!f->floating) {
		char buf[64];
		format_value(f, p, buf, sizeof(buf));
		int w = (int)strlen(buf);
		if (w > f->max_width)
			f->max_width = w;
		return;
	}
	double v = tn__element_to_double(f->t->dtype, p);
	if (!isfinite(v) || v == 0)
		return;
	double a = fabs(v);
	if (!f->any_nonzero_finite || a < f->min_abs)
		f->min_abs = a;
	if (!f->any_nonzero_finite || a > f->max_abs)
		f->max_abs = a;
	f->any_nonzero_finite = true;
	if (v != ceil(v))
		f->int_mode = false;
}

static void width_pass(struct formatter *f, const unsigned char *p)
{
	char buf[64];
	double v = tn__element_to_double(f->t->dtype, p);
	int w;

	if (!isfinite(v) || v == 0)
		return;
	if (f->sci_mode)
		w = format_double(buf, sizeof(buf), v, 'e');
	else if (f->int_mode)
		w = format_double(buf, sizeof(buf), v, '0') + 1;
	else
		w = format_double(buf, sizeof(buf), v, 'f');
	if (w > f->max_width)
		f->max_width = w;
}

static void formatter_init(struct formatter *f, const tn_tensor *t, bool summarize)
{
	memset(f, 0, sizeof(*f));
	f->t = t;
	f->floating = tn_dtype_is_floating(t->dtype);
	f->summarize = summarize;
	f->int_mode = true;
	f->max_width = 1;
	visit(f, 0, t->offset, stats_pass);
	if (!f->floating || !f->any_nonzero_finite)
		return;
	if (f->int_mode)
		f->sci_mode = f->max_abs / f->min_abs > 1000.0 || f->max_abs > 1.0e8;
	else
		f->sci_mode = f->max_abs / f->min_abs > 1000.0 || f->max_abs > 1.0e8 ||
			      f->min_abs < 1.0e-4;
	visit(f, 0, t->offset, width_pass);
}

static void put_value(struct strbuf *sb, const struct formatter *f, const unsigned char *p)
{
	char buf[64];
	format_value(f, p, buf, sizeof(buf));
	sb_spaces(sb, f->max_width - (int)strlen(buf));
	sb_puts(sb, buf);
}

static void vector_str(struct strbuf *sb, const struct formatter *f, int64_t offset, int indent)
{
	const tn_tensor *t = f->t;
	int dim = t->ndim - 1;
	int64_t n = t->sizes[dim], stride = t->strides[dim];
	int element_length = f->max_width + 2;
	int per_line = (LINEWIDTH - indent) / element_length;
	bool cut = f->summarize && n > 2 * EDGEITEMS;
	int64_t printed = 0;

	if (per_line < 1)
		per_line = 1;
	sb_puts(sb, "[");
	for (int64_t i = 0; i < n; i++) {
		if (printed) {
			if (printed % per_line == 0) {
				sb_puts(sb, ",\n");
				sb_spaces(sb, indent + 1);
			} else {
				sb_puts(sb, ", ");
			}
		}
		if (cut && i == EDGEITEMS) {
			sb_puts(sb, " ...");
			printed++;
			i = n - EDGEITEMS - 1;
			continue;
		}
		put_value(sb, f, element_at(t, offset + i * stride));
		printed++;
	}
	sb_puts(sb, "]");
}

static void tensor_str(struct strbuf *sb, const struct formatter *f, int dim, int64_t offset,
		       int indent)
{
	const tn_tensor *t = f->t;
	int remaining = t->ndim - dim;

	if (remaining == 0) {
		put_value(sb, f, element_at(t, offset));
		return;
	}
	if (remaining == 1) {
		vector_str(sb, f, offset, indent);
		return;
	}
	int64_t n = t->sizes[dim], stride = t->strides[dim];
	bool cut = f->summarize && n > 2 * EDGEITEMS;
	sb_puts(sb, "[");
	for (int64_t i = 0; i < n; i++) {
		if (i) {
			sb_puts(sb, ",");
			for (int k = 0; k < remaining - 1; k++)
				sb_puts(sb, "\n");
			sb_spaces(sb, indent + 1);
		}
		if (cut && i == EDGEITEMS) {
			sb_puts(sb, "...,");
			for (int k = 0; k < remaining - 1; k++)
				sb_puts(sb, "\n");
			sb_spaces(sb, indent + 1);
			i = n - EDGEITEMS;
		}
		tensor_str(sb, f, dim + 1, offset + i * stride, indent + 1);
	}
	sb_puts(sb, "]");
}

/* Length of the last line of @s plus one, as _add_suffixes computes it. */
static int last_line_len(const struct strbuf *sb)
{
	const char *nl = sb->buf ? strrchr(sb->buf, '\n') : NULL;
	/* Python: len(s) - s.rfind("\n") + 1, with rfind = -1 when there is no newline. */
	int64_t pos = nl ? nl - sb->buf : -1;
	return (int)((int64_t)sb->len - pos + 1);
}

static void add_suffix(struct strbuf *sb, int *line_len, const char *suffix, int indent)
{
	int n = (int)strlen(suffix);
	if (*line_len + n + 2 > LINEWIDTH) {
		sb_puts(sb, ",\n");
		sb_spaces(sb, indent);
		sb_puts(sb, suffix);
		*line_len = indent + n;
	} else {
		sb_puts(sb, ", ");
		sb_puts(sb, suffix);
		*line_len += n + 2;
	}
}

TN_EXPORT int tn_tensor_repr(const tn_tensor *tensor, char **ret_string)
{
	struct strbuf sb = { 0 };
	struct formatter f;
	char suffix[2][TN_MAX_DIMS * 22 + 32];
	int nsuffix = 0;
	const int indent = 7; /* strlen("tensor(") */

	if (!tn__handle_is(tensor, TN_MAGIC_TENSOR))
		return tn__error(TN_EBADF, "tn_tensor_repr: not a live tensor handle (NULL, freed or "
					   "foreign)");
	if (!ret_string)
		return tn__error(TN_EINVAL, "tn_tensor_repr: NULL ret_string");
	if (tensor->storage->device.type == TN_DEVICE_META)
		return tn__error(TN_ENOTSUP, "tn_tensor_repr: a meta tensor has no values to print");
	tn_tensor *host = NULL;
	if (!tn__on_host(tensor)) {
		/* As PyTorch: the values come to the host; the device is named after them. */
		const struct tn__device_ops *ops;
		int r = tn__empty_like_device((tn_device){ TN_DEVICE_CPU, 0 }, tensor->dtype,
					      tensor->ndim, tensor->sizes, NULL, &host,
					      "tn_tensor_repr");
		if (r < 0 || (r = tn__device_of(tensor, &ops, "tn_tensor_repr")) < 0 ||
		    (r = ops->copy(host, tensor, false)) < 0) {
			tn_tensor_unref(host);
			return r;
		}
		char dev[32];
		tn__format_device(dev, sizeof(dev), tensor->storage->device);
		snprintf(suffix[nsuffix++], sizeof(suffix[0]), "device='%s'", dev);
	}
	tensor = host ? host : tensor;

	enum tn_dtype dt = tensor->dtype;
	sb_puts(&sb, "tensor(");
	if (tensor->numel == 0) {
		if (tensor->ndim != 1) {
			size_t pos = (size_t)snprintf(suffix[nsuffix], sizeof(suffix[0]), "size=(");
			for (int d = 0; d < tensor->ndim; d++)
				pos += (size_t)snprintf(suffix[nsuffix] + pos, sizeof(suffix[0]) - pos,
							"%s%lld", d ? ", " : "",
							(long long)tensor->sizes[d]);
			snprintf(suffix[nsuffix] + pos, sizeof(suffix[0]) - pos, ")");
			nsuffix++;
		}
		if (dt != TN_FLOAT32)
			snprintf(suffix[nsuffix++], sizeof(suffix[0]), "dtype=torch.%s",
				 tn_dtype_name(dt));
		sb_puts(&sb, "[]");
	} else {
		if (dt != TN_FLOAT32 && dt != TN_INT64 && dt != TN_BOOL)
			snprintf(suffix[nsuffix++], sizeof(suffix[0]), "dtype=torch.%s",
				 tn_dtype_name(dt));
		formatter_init(&f, tensor, tensor->numel > THRESHOLD);
		tensor_str(&sb, &f, 0, tensor->offset, indent);
	}
	if (!sb.oom) {
		int line_len = last_line_len(&sb);
		for (int i = 0; i < nsuffix; i++)
			add_suffix(&sb, &line_len, suffix[i], indent);
		sb_puts(&sb, ")");
	}
	tn_tensor_unref(host);
	if (sb.oom) {
		tn__free(sb.buf);
		return tn__error(TN_ENOMEM, "tn_tensor_repr: out of memory");
	}
	/* tn__malloc is malloc(3), so the caller releases this with free(3). */
	*ret_string = sb.buf;
	return 0;
}

TN_EXPORT int tn_tensor_fprint(FILE *stream, const tn_tensor *tensor)
{
	char *s;
	int r;

	if (!stream)
		return tn__error(TN_EINVAL, "tn_tensor_fprint: NULL stream");
	if ((r = tn_tensor_repr(tensor, &s)))
		return r;
	r = fputs(s, stream) < 0 || fputc('\n', stream) == EOF
		    ? tn__error(TN_EIO, "tn_tensor_fprint: write failed")
		    : 0;
	free(s);
	return r;
}
