/* SPDX-License-Identifier: MIT */
/*
 * What the safetensors and .npy code share: the cursor their parsers read with, the
 * descriptors' strides and byte sizes, byte swapping, UTF-8 validation and the quoting of
 * untrusted bytes in error messages.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "formats.h"
#include "formats_internal.h"

int tn__fmt_fail(const struct tn__fmt_cursor *c, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tn__error(code, "%s: byte %zu: %s", c->format, c->base + c->pos, msg);
}

const char *tn__fmt_found(const struct tn__fmt_cursor *c, char *buf, size_t cap)
{
	int ch = tn__fmt_peek(c);

	if (ch < 0)
		snprintf(buf, cap, "the end of the header");
	else if (ch > 0x20 && ch < 0x7f)
		snprintf(buf, cap, "'%c'", ch);
	else
		snprintf(buf, cap, "byte 0x%02x", (unsigned)ch);
	return buf;
}

void tn__fmt_ws(struct tn__fmt_cursor *c)
{
	while (c->pos < c->end) {
		unsigned char ch = c->s[c->pos];
		if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
			break;
		c->pos++;
	}
}

int tn__fmt_expect(struct tn__fmt_cursor *c, char ch, const char *where)
{
	char found[32];

	tn__fmt_ws(c);
	if (tn__fmt_peek(c) != (unsigned char)ch)
		return tn__fmt_fail(c, TN_EINVAL, "expected '%c' %s, found %s", ch, where,
				    tn__fmt_found(c, found, sizeof(found)));
	c->pos++;
	return 0;
}

void tn__fmt_strides(const struct tn__fmt_tensor *t, int64_t *ret_strides)
{
	int64_t stride = 1;

	if (t->fortran_order) {
		for (int d = 0; d < t->ndim; d++) {
			ret_strides[d] = stride;
			stride *= t->sizes[d] ? t->sizes[d] : 1;
		}
	} else {
		for (int d = t->ndim - 1; d >= 0; d--) {
			ret_strides[d] = stride;
			stride *= t->sizes[d] ? t->sizes[d] : 1;
		}
	}
}

void tn__fmt_byteswap(void *data, size_t nbytes, size_t itemsize)
{
	unsigned char *p = data;

	/* A rare path (big-endian .npy files): a plain loop over each element's bytes. */
	for (size_t i = 0; itemsize > 1 && i + itemsize <= nbytes; i += itemsize) {
		for (size_t a = i, b = i + itemsize - 1; a < b; a++, b--) {
			unsigned char t = p[a];
			p[a] = p[b];
			p[b] = t;
		}
	}
}

int tn__fmt_nbytes(int ndim, const int64_t *sizes, enum tn_dtype dtype, uint64_t *ret_nbytes)
{
	uint64_t itemsize = tn_dtype_size(dtype), numel = 1, span = itemsize, n;
	bool overflow = false, too_large = false;

	for (int d = 0; d < ndim; d++) {
		uint64_t size = (uint64_t)sizes[d];
		/* As the reference: numel first, failing at the first overflow even when a later
		 * dim is 0, then times the element size. */
		overflow = overflow || __builtin_mul_overflow(numel, size, &numel);
		/* Strides treat an empty dim as 1, so their product may overflow where numel (0)
		 * does not; libtensor cannot hold such a tensor. */
		too_large = too_large || __builtin_mul_overflow(span, size ? size : 1, &span) ||
			    span > INT64_MAX;
	}
	if (overflow || __builtin_mul_overflow(numel, itemsize, &n))
		return TN__FMT_OVERFLOW;
	if (too_large)
		return TN__FMT_TOO_LARGE;
	*ret_nbytes = n;
	return 0;
}

size_t tn__fmt_utf8_invalid(const void *text, size_t len)
{
	const unsigned char *s = text;
	size_t i = 0;

	while (i < len) {
		unsigned c = s[i];
		size_t n;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			/* A continuation byte, an overlong lead (c0, c1) or past U+10FFFF. */
			return i;
		}
		if (len - i <= n)
			return i;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		/* Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8. */
		if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return i;
		i += n + 1;
	}
	return len;
}

const char *tn__fmt_show(char *buf, size_t cap, const void *bytes, size_t len)
{
	const unsigned char *s = bytes;
	size_t pos = 0;

	/* Room for the widest escape, the "..." of a cut and the NUL. */
	if (cap < 9) {
		if (cap)
			buf[0] = '\0';
		return buf;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned c = s[i];

		if (pos + 4 + 4 > cap) {
			memcpy(buf + pos, "...", 4);
			return buf;
		}
		if (c >= 0x20 && c < 0x7f) {
			buf[pos++] = (char)c;
		} else {
			snprintf(buf + pos, 5, "\\x%02x", c);
			pos += 4;
		}
	}
	buf[pos] = '\0';
	return buf;
}
