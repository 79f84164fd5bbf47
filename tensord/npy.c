/* SPDX-License-Identifier: MIT */
/*
 * NumPy .npy headers (numpy/lib/format.py): the magic, the version, the header length and the
 * Python dict literal that describes the array, read with a small strict parser of exactly
 * that literal syntax, and written byte for byte as numpy.save writes them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "formats_internal.h"

static const unsigned char npy_magic[6] = { 0x93, 'N', 'U', 'M', 'P', 'Y' };

/* numpy's spare room after the dict for the growth axis' size to grow in place. */
#define GROWTH_AXIS_MAX_DIGITS 21

/* The dtypes both sides have, as numpy's descr writes them on a little-endian machine. */
static const struct {
	enum tn_dtype dtype;
	char kind;
	unsigned char size;
	const char *descr;
} npy_dtypes[] = {
	{ TN_BOOL, 'b', 1, "|b1" },    { TN_UINT8, 'u', 1, "|u1" },   { TN_INT8, 'i', 1, "|i1" },
	{ TN_INT16, 'i', 2, "<i2" },   { TN_INT32, 'i', 4, "<i4" },   { TN_INT64, 'i', 8, "<i8" },
	{ TN_FLOAT16, 'f', 2, "<f2" }, { TN_FLOAT32, 'f', 4, "<f4" }, { TN_FLOAT64, 'f', 8, "<f8" },
};

static bool host_big_endian(void)
{
	return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
}

/* ---- the dict literal --------------------------------------------------------------------- */

/* A quoted string without escapes (numpy's never need one); *ret_at is its first byte. */
static int py_string(struct tn__fmt_cursor *p, const char *what, size_t *ret_at, size_t *ret_len)
{
	char found[32];
	int q;

	tn__fmt_ws(p);
	q = tn__fmt_peek(p);
	if (q != '\'' && q != '"')
		return tn__fmt_fail(p, TN_EINVAL, "expected %s (a quoted string), found %s", what,
				    tn__fmt_found(p, found, sizeof(found)));
	p->pos++;
	*ret_at = p->pos;
	for (;;) {
		int c = tn__fmt_peek(p);
		if (c < 0 || c == '\n')
			return tn__fmt_fail(p, TN_EINVAL, "unterminated string");
		if (c == '\\')
			return tn__fmt_fail(p, TN_ENOTSUP, "escapes in strings are not supported");
		p->pos++;
		if (c == q)
			break;
	}
	*ret_len = p->pos - 1 - *ret_at;
	return 0;
}

static bool py_ident_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c >= 0x80;
}

static int py_bool(struct tn__fmt_cursor *p, bool *ret)
{
	char text[TN__FMT_SHOW_MAX];
	size_t at;

	tn__fmt_ws(p);
	at = p->pos;
	while (py_ident_char(tn__fmt_peek(p)))
		p->pos++;
	if (p->pos - at == 4 && !memcmp(p->s + at, "True", 4)) {
		*ret = true;
		return 0;
	}
	if (p->pos - at == 5 && !memcmp(p->s + at, "False", 5)) {
		*ret = false;
		return 0;
	}
	tn__fmt_show(text, sizeof(text), p->s + at, p->pos - at);
	p->pos = at;
	return tn__fmt_fail(p, TN_EINVAL, "fortran_order must be True or False, not '%s'", text);
}

/* A size: a decimal int literal, with Python 2's L suffix in 1.0 and 2.0 headers. */
static int py_size(struct tn__fmt_cursor *p, int major, int64_t *ret)
{
	char found[32];
	size_t at = p->pos;
	uint64_t v = 0;

	if (tn__fmt_peek(p) < '0' || tn__fmt_peek(p) > '9')
		return tn__fmt_fail(p, TN_EINVAL, "expected a size (an integer), found %s",
				    tn__fmt_found(p, found, sizeof(found)));
	while (tn__fmt_peek(p) >= '0' && tn__fmt_peek(p) <= '9') {
		uint64_t digit = (uint64_t)(tn__fmt_peek(p) - '0');
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, digit, &v) ||
		    v > INT64_MAX) {
			p->pos = at;
			return tn__fmt_fail(p, TN_EINVAL, "size is larger than int64");
		}
		p->pos++;
	}
	if (p->s[at] == '0' && p->pos - at > 1) {
		p->pos = at;
		return tn__fmt_fail(p, TN_EINVAL, "size with a leading zero");
	}
	if (major <= 2 && tn__fmt_peek(p) == 'L')
		p->pos++;
	if (py_ident_char(tn__fmt_peek(p)) || tn__fmt_peek(p) == '.') {
		p->pos = at;
		return tn__fmt_fail(p, TN_EINVAL, "size is not a decimal integer");
	}
	*ret = (int64_t)v;
	return 0;
}

/* The shape: (), (n,) or (n, m, ...) with an optional trailing comma. */
static int py_shape(struct tn__fmt_cursor *p, int major, struct tn__fmt_tensor *t)
{
	char found[32];
	int r, c;

	tn__fmt_ws(p);
	if (tn__fmt_peek(p) != '(')
		return tn__fmt_fail(p, TN_EINVAL, "shape must be a tuple, found %s",
				    tn__fmt_found(p, found, sizeof(found)));
	p->pos++;
	for (;;) {
		tn__fmt_ws(p);
		if (tn__fmt_peek(p) == ')')
			break;
		if (t->ndim == TN_ARENA_MAX_DIMS)
			return tn__fmt_fail(p, TN_ENOTSUP, "more than %d dims", TN_ARENA_MAX_DIMS);
		if ((r = py_size(p, major, &t->sizes[t->ndim])))
			return r;
		t->ndim++;
		tn__fmt_ws(p);
		c = tn__fmt_peek(p);
		if (c == ',') {
			p->pos++;
			continue;
		}
		if (c != ')')
			return tn__fmt_fail(p, TN_EINVAL, "expected ',' or ')' in the shape, found "
					    "%s", tn__fmt_found(p, found, sizeof(found)));
		/* "(n)" is n in Python, not a tuple. */
		if (t->ndim == 1)
			return tn__fmt_fail(p, TN_EINVAL, "shape must be a tuple: a single size "
					    "needs a trailing comma");
		break;
	}
	p->pos++;
	return 0;
}

/*
 * The descr: a byte order ('<', '>', and for 1-byte types also '|' and '='), a kind and a
 * size, mapped to a libtensor dtype.
 */
static int py_descr(struct tn__fmt_cursor *p, struct tn__fmt_tensor *t)
{
	char text[TN__FMT_SHOW_MAX];
	size_t at, len;
	int r;

	tn__fmt_ws(p);
	if (tn__fmt_peek(p) == '[')
		return tn__fmt_fail(p, TN_ENOTSUP, "structured dtypes (a descr list) are not "
				    "supported");
	if ((r = py_string(p, "descr", &at, &len)))
		return r;
	const unsigned char *d = p->s + at;
	tn__fmt_show(text, sizeof(text), d, len);
	p->pos = at - 1;
	if (len >= 2 && d[0] && strchr("<>|=", d[0])) {
		char kind = (char)d[1];
		unsigned size = 0;
		size_t i = 2;
		while (i < len && d[i] >= '0' && d[i] <= '9' && size < 1000)
			size = size * 10 + (d[i++] - '0');
		/* Datetimes carry a unit: '<M8[ns]'. */
		if ((kind == 'M' || kind == 'm') && i < len && d[i] == '[' && d[len - 1] == ']')
			i = len;
		bool digits = i == len;
		for (i = 0; digits && len > 2 && i < TN_ARRAY_SIZE(npy_dtypes); i++) {
			if (npy_dtypes[i].kind != kind || npy_dtypes[i].size != size)
				continue;
			if (size > 1 && (d[0] == '|' || d[0] == '='))
				return tn__fmt_fail(p, TN_EINVAL, "descr '%s': byte order '%c' for "
						    "a %u-byte type", text, d[0], size);
			t->dtype = npy_dtypes[i].dtype;
			t->byteswap = size > 1 && (d[0] == '>') != host_big_endian();
			p->pos = at + len + 1;
			return 0;
		}
		/* numpy kinds libtensor has no dtype for: unsigned 16-64 bit, long double,
		 * complex, objects, bytes, str, void (records, ml_dtypes' bfloat16), datetimes. */
		if (digits && kind && strchr("uifcOSUVaMm", kind))
			return tn__fmt_fail(p, TN_ENOTSUP, "numpy dtype '%s' has no libtensor "
					    "dtype", text);
	}
	return tn__fmt_fail(p, TN_EINVAL, "descr '%s' is not a numpy dtype libtensor knows", text);
}

enum { K_DESCR, K_FORTRAN, K_SHAPE, NKEYS };
static const char *const npy_keys[NKEYS] = { "descr", "fortran_order", "shape" };

static int py_dict(struct tn__fmt_cursor *p, int major, struct tn__fmt_tensor *t)
{
	char text[TN__FMT_SHOW_MAX], found[32];
	unsigned seen = 0;
	int r, c;

	if ((r = tn__fmt_expect(p, '{', "to open the header dict")))
		return r;
	for (;;) {
		size_t at, len;
		int k = -1;

		tn__fmt_ws(p);
		if (tn__fmt_peek(p) == '}')
			break;
		if ((r = py_string(p, "a key", &at, &len)))
			return r;
		for (int i = 0; i < NKEYS; i++)
			if (len == strlen(npy_keys[i]) && !memcmp(p->s + at, npy_keys[i], len))
				k = i;
		if (k < 0 || seen & 1u << k) {
			tn__fmt_show(text, sizeof(text), p->s + at, len);
			p->pos = at - 1;
			if (k >= 0)
				return tn__fmt_fail(p, TN_EINVAL, "key '%s' appears twice", text);
			return tn__fmt_fail(p, TN_EINVAL, "unexpected key '%s' (numpy writes "
					    "descr, fortran_order and shape)", text);
		}
		seen |= 1u << k;
		if ((r = tn__fmt_expect(p, ':', "after a key")))
			return r;
		if (k == K_DESCR)
			r = py_descr(p, t);
		else if (k == K_FORTRAN)
			r = py_bool(p, &t->fortran_order);
		else
			r = py_shape(p, major, t);
		if (r)
			return r;
		tn__fmt_ws(p);
		c = tn__fmt_peek(p);
		if (c == ',') {
			p->pos++;
			continue;
		}
		if (c != '}')
			return tn__fmt_fail(p, TN_EINVAL, "expected ',' or '}' after a value, "
					    "found %s", tn__fmt_found(p, found, sizeof(found)));
	}
	p->pos++;
	for (int i = 0; i < NKEYS; i++)
		if (!(seen & 1u << i))
			return tn__fmt_fail(p, TN_EINVAL, "the header dict has no '%s'",
					    npy_keys[i]);
	tn__fmt_ws(p);
	if (p->pos != p->end)
		return tn__fmt_fail(p, TN_EINVAL, "%s after the header dict (only spaces and a "
				    "newline may pad it)", tn__fmt_found(p, found, sizeof(found)));
	return 0;
}

/* ---- the entry points ---------------------------------------------------------------------- */

int tn__npy_prefix(const void *buf, size_t len, uint64_t file_size, size_t *ret_header_end)
{
	const unsigned char *s = buf;
	size_t prefix;
	uint32_t hlen;

	if (!buf || !ret_header_end)
		return tn__error(TN_EINVAL, "npy: NULL argument");
	if (len > file_size)
		return tn__error(TN_EINVAL, "npy: %zu bytes given of a file of %" PRIu64, len,
				 file_size);
	if (len < sizeof(npy_magic) || memcmp(s, npy_magic, sizeof(npy_magic)))
		return tn__error(TN_EINVAL, "npy: not a .npy file: it does not begin with "
				 "\"\\x93NUMPY\"");
	if (len < 8)
		return tn__error(TN_EINVAL, "npy: the file ends in its format version");
	if (s[6] < 1 || s[6] > 3 || s[7] != 0)
		return tn__error(TN_ENOTSUP, "npy: byte 6: format version %u.%u (numpy writes 1.0, "
				 "2.0 and 3.0)", s[6], s[7]);
	prefix = s[6] == 1 ? 10 : 12;
	if (len < prefix)
		return tn__error(TN_EINVAL, "npy: the file ends in its header length");
	hlen = s[8] | (uint32_t)s[9] << 8;
	if (s[6] > 1)
		hlen |= (uint32_t)s[10] << 16 | (uint32_t)s[11] << 24;
	if (hlen > TN__NPY_MAX_HEADER)
		return tn__error(TN_EINVAL, "npy: byte 8: a header of %" PRIu32 " bytes is over "
				 "numpy's limit of %d", hlen, TN__NPY_MAX_HEADER);
	if (hlen > file_size - prefix)
		return tn__error(TN_EINVAL, "npy: byte 8: the header (%" PRIu32 " bytes) runs past "
				 "the end of the file (%" PRIu64 " bytes)", hlen, file_size);
	*ret_header_end = prefix + hlen;
	return 0;
}

int tn__npy_parse(const void *buf, size_t len, uint64_t file_size, struct tn__fmt_tensor *ret)
{
	struct tn__fmt_tensor t = { 0 };
	struct tn__fmt_cursor p = { .s = buf, .format = "npy" };
	int major;
	size_t end, bad;
	int r;

	if (!ret)
		return tn__error(TN_EINVAL, "npy: NULL argument");
	if ((r = tn__npy_prefix(buf, len < TN__NPY_PREFIX_MAX ? len : TN__NPY_PREFIX_MAX,
				file_size, &end)))
		return r;
	if (len < end)
		return tn__error(TN_EINVAL, "npy: %zu bytes given, but the header ends at byte %zu",
				 len, end);
	major = p.s[6];
	p.pos = major == 1 ? 10 : 12;
	p.end = end;
	/* 3.0 headers are UTF-8; 1.0 and 2.0 are Latin-1, where every byte is a character. */
	if (major == 3 && (bad = tn__fmt_utf8_invalid(p.s + p.pos, end - p.pos)) < end - p.pos)
		return tn__error(TN_EINVAL, "npy: byte %zu: a 3.0 header that is not UTF-8",
				 p.pos + bad);
	if ((r = py_dict(&p, major, &t)))
		return r;
	r = tn__fmt_nbytes(t.ndim, t.sizes, t.dtype, &t.nbytes);
	if (r) {
		char shape[256];
		tn__format_shape(shape, sizeof(shape), t.ndim, t.sizes);
		if (r == TN__FMT_TOO_LARGE)
			return tn__error(TN_ENOTSUP, "npy: shape %s is too large for libtensor's "
					 "int64 strides", shape);
		return tn__error(TN_EINVAL, "npy: the bytes of shape %s overflow 64 bits", shape);
	}
	if (t.nbytes > file_size - end)
		return tn__error(TN_EINVAL, "npy: the data needs %" PRIu64 " bytes from byte %zu "
				 "but the file has %" PRIu64, t.nbytes, end, file_size - end);
	t.offset = end;
	*ret = t;
	return 0;
}

int tn__npy_write(struct tn__fmt_tensor *t, void *buf, size_t cap, size_t *ret_len)
{
	char dict[TN__NPY_HEADER_MAX], shape[256];
	const char *descr = NULL;
	size_t n = 0, prefix, hlen, pad;
	uint64_t nbytes;
	int w;

	if (!t || !buf || !ret_len)
		return tn__error(TN_EINVAL, "npy: NULL argument");
	for (size_t i = 0; i < TN_ARRAY_SIZE(npy_dtypes); i++)
		if (npy_dtypes[i].dtype == t->dtype)
			descr = npy_dtypes[i].descr;
	if (!descr && !tn_dtype_is_valid(t->dtype))
		return tn__error(TN_EINVAL, "npy: numpy has no dtype for an invalid dtype");
	if (!descr)
		return tn__error(TN_ENOTSUP, "npy: numpy has no dtype for %s",
				 tn_dtype_name(t->dtype));
	if (t->ndim < 0 || t->ndim > TN_ARENA_MAX_DIMS)
		return tn__error(TN_EINVAL, "npy: %d dims (0 to %d)", t->ndim, TN_ARENA_MAX_DIMS);
	tn__format_shape(shape, sizeof(shape), t->ndim, t->sizes);
	for (int d = 0; d < t->ndim; d++)
		if (t->sizes[d] < 0)
			return tn__error(TN_EINVAL, "npy: negative size in shape %s", shape);
	if (tn__fmt_nbytes(t->ndim, t->sizes, t->dtype, &nbytes))
		return tn__error(TN_EINVAL, "npy: shape %s is too large", shape);

	/* numpy: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" (keys sorted,
	 * repr of each value), then spaces for the growth axis to gain digits in place. */
	n = (size_t)snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': %s, 'shape': (",
			     descr, t->fortran_order ? "True" : "False");
	for (int d = 0; d < t->ndim; d++)
		n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s%" PRId64, d ? ", " : "",
				      t->sizes[d]);
	n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s), }", t->ndim == 1 ? "," : "");
	if (t->ndim) {
		w = snprintf(shape, sizeof(shape), "%" PRId64,
			     t->sizes[t->fortran_order ? t->ndim - 1 : 0]);
		for (int i = w; i < GROWTH_AXIS_MAX_DIGITS; i++)
			dict[n++] = ' ';
	}
	/* Spaces and a newline so the data starts at a multiple of 64 (at least one space);
	 * version 2.0 only when the length does not fit 1.0's 16 bits, as numpy chooses (with
	 * at most 16 dims it always does). */
	prefix = 10;
	pad = TN__NPY_ALIGN - (prefix + n + 1) % TN__NPY_ALIGN;
	if (n + 1 + pad > UINT16_MAX) {
		prefix = 12;
		pad = TN__NPY_ALIGN - (prefix + n + 1) % TN__NPY_ALIGN;
	}
	hlen = n + 1 + pad;
	if (prefix + hlen > cap)
		return tn__error(TN_EINVAL, "npy: the header needs %zu bytes, the buffer has %zu",
				 prefix + hlen, cap);

	unsigned char *out = buf;
	memcpy(out, npy_magic, sizeof(npy_magic));
	out[6] = prefix == 10 ? 1 : 2;
	out[7] = 0;
	for (size_t i = 0; i < prefix - 8; i++)
		out[8 + i] = (unsigned char)(hlen >> (8 * i));
	memcpy(out + prefix, dict, n);
	memset(out + prefix + n, ' ', pad);
	out[prefix + hlen - 1] = '\n';
	t->offset = prefix + hlen;
	t->nbytes = nbytes;
	*ret_len = prefix + hlen;
	return 0;
}
