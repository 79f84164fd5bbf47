/* SPDX-License-Identifier: MIT */
/*
 * safetensors headers (huggingface/safetensors): a strict JSON reader for the one document
 * shape the format allows, the checks of the reference implementation, and its writer's
 * layout.
 *
 * The header is untrusted and up to 100 MB. It is read twice: a first pass validates every
 * byte and counts the tensors, the metadata entries and the bytes of their strings; one
 * allocation then holds the result, and a second pass over the same bytes fills it. No
 * recursion (values skipped inside a tensor's object keep their nesting in a bit stack), no
 * read past the buffer, every error names its byte.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

#define META_KEY "__metadata__"
#define META_KEY_LEN (sizeof(META_KEY) - 1)
/* The deepest nesting of a value skipped inside a tensor's object (serde_json allows 128). */
#define MAX_DEPTH 64

/*
 * The reference's dtypes in the order of its Dtype enum, which is by alignment: its writer
 * puts the tensors of the dtypes at the end of this list first. libtensor holds ten of them;
 * the others (-1) parse as TN_ENOTSUP.
 */
static const struct {
	const char *name;
	int dtype;
} st_dtypes[] = {
	{ "BOOL", TN_BOOL },	 { "F4", -1 },		{ "F6_E2M3", -1 },    { "F6_E3M2", -1 },
	{ "U8", TN_UINT8 },	 { "I8", TN_INT8 },	{ "F8_E5M2", -1 },    { "F8_E4M3", -1 },
	{ "F8_E8M0", -1 },	 { "I16", TN_INT16 },	{ "U16", -1 },	      { "F16", TN_FLOAT16 },
	{ "BF16", TN_BFLOAT16 }, { "I32", TN_INT32 },	{ "U32", -1 },	      { "F32", TN_FLOAT32 },
	{ "C64", -1 },		 { "F64", TN_FLOAT64 }, { "I64", TN_INT64 },  { "U64", -1 },
};

static int st_rank(enum tn_dtype dtype)
{
	for (size_t i = 0; i < TN_ARRAY_SIZE(st_dtypes); i++)
		if (st_dtypes[i].dtype == (int)dtype)
			return (int)i;
	return -1;
}

/* ---- the JSON cursor ----------------------------------------------------------------------- */

static bool js_literal(struct tn__fmt_cursor *j, const char *word)
{
	size_t n = strlen(word);

	if (j->end - j->pos < n || memcmp(j->s + j->pos, word, n) != 0)
		return false;
	j->pos += n;
	return true;
}

static int js_hex4(const struct tn__fmt_cursor *j, size_t at, uint32_t *ret)
{
	uint32_t v = 0;

	if (j->end - at < 4)
		return -1;
	for (size_t i = at; i < at + 4; i++) {
		unsigned c = j->s[i];
		if (c >= '0' && c <= '9')
			v = v << 4 | (c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v = v << 4 | ((c | 0x20) - 'a' + 10);
		else
			return -1;
	}
	*ret = v;
	return 0;
}

/* A decoded string: bytes past @cap are counted, not stored. */
struct js_str {
	char *out;
	size_t cap;
	size_t len;
	bool has_nul;
};

static void js_put(struct js_str *d, uint32_t c)
{
	if (d->len < d->cap)
		d->out[d->len] = (char)c;
	d->len++;
	d->has_nul |= c == 0;
}

static void js_put_utf8(struct js_str *d, uint32_t cp)
{
	if (cp < 0x80) {
		js_put(d, cp);
	} else if (cp < 0x800) {
		js_put(d, 0xc0 | cp >> 6);
		js_put(d, 0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		js_put(d, 0xe0 | cp >> 12);
		js_put(d, 0x80 | (cp >> 6 & 0x3f));
		js_put(d, 0x80 | (cp & 0x3f));
	} else {
		js_put(d, 0xf0 | cp >> 18);
		js_put(d, 0x80 | (cp >> 12 & 0x3f));
		js_put(d, 0x80 | (cp >> 6 & 0x3f));
		js_put(d, 0x80 | (cp & 0x3f));
	}
}

/* Decode the \u escape at j->pos (with the low half of a surrogate pair after it). */
static int js_unicode(struct tn__fmt_cursor *j, struct js_str *d)
{
	uint32_t cp, lo;

	if (js_hex4(j, j->pos + 2, &cp))
		return tn__fmt_fail(j, TN_EINVAL, "\\u must be followed by 4 hex digits");
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return tn__fmt_fail(j, TN_EINVAL, "lone low surrogate \\u%04x", (unsigned)cp);
	if (cp >= 0xd800 && cp <= 0xdbff) {
		size_t next = j->pos + 6;
		if (j->end - next < 2 || j->s[next] != '\\' || j->s[next + 1] != 'u' ||
		    js_hex4(j, next + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
			return tn__fmt_fail(j, TN_EINVAL, "high surrogate \\u%04x is not followed "
					    "by a low surrogate", (unsigned)cp);
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		j->pos += 6;
	}
	j->pos += 6;
	js_put_utf8(d, cp);
	return 0;
}

/*
 * Parse the string at the cursor (after whitespace) into @d. The header was checked to be
 * UTF-8 already, and escapes decode to UTF-8 (lone surrogates refused), so @d is UTF-8.
 */
static int js_string(struct tn__fmt_cursor *j, struct js_str *d, const char *what)
{
	char found[32];

	tn__fmt_ws(j);
	if (tn__fmt_peek(j) != '"')
		return tn__fmt_fail(j, TN_EINVAL, "expected %s (a string), found %s", what,
				    tn__fmt_found(j, found, sizeof(found)));
	j->pos++;
	d->len = 0;
	d->has_nul = false;
	for (;;) {
		if (j->pos >= j->end)
			return tn__fmt_fail(j, TN_EINVAL, "unterminated string");
		unsigned c = j->s[j->pos];
		if (c == '"') {
			j->pos++;
			return 0;
		}
		if (c < 0x20)
			return tn__fmt_fail(j, TN_EINVAL, "control character 0x%02x in a string",
					    c);
		if (c != '\\') {
			js_put(d, c);
			j->pos++;
			continue;
		}
		if (j->pos + 1 >= j->end)
			return tn__fmt_fail(j, TN_EINVAL, "unterminated string");
		c = j->s[j->pos + 1];
		switch (c) {
		case '"':
		case '\\':
		case '/':
			break;
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u': {
			int r = js_unicode(j, d);
			if (r)
				return r;
			continue;
		}
		default:
			return tn__fmt_fail(j, TN_EINVAL, "invalid escape in a string");
		}
		js_put(d, c);
		j->pos += 2;
	}
}

static bool js_digit(int c)
{
	return c >= '0' && c <= '9';
}

/*
 * Scan a JSON number (RFC 8259 grammar). *ret_uint tells whether it is an integer in
 * [0, 2^64) written without sign, fraction or exponent, the only numbers the format uses;
 * then *ret_value holds it.
 */
static int js_number(struct tn__fmt_cursor *j, bool *ret_uint, uint64_t *ret_value)
{
	bool uint = true;
	uint64_t v = 0;

	if (tn__fmt_peek(j) == '-') {
		uint = false;
		j->pos++;
	}
	if (!js_digit(tn__fmt_peek(j)))
		return tn__fmt_fail(j, TN_EINVAL, "invalid number");
	if (tn__fmt_peek(j) == '0') {
		j->pos++;
		if (js_digit(tn__fmt_peek(j)))
			return tn__fmt_fail(j, TN_EINVAL, "leading zero in a number");
	}
	while (js_digit(tn__fmt_peek(j))) {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(tn__fmt_peek(j) - '0'), &v))
			uint = false;
		j->pos++;
	}
	if (tn__fmt_peek(j) == '.') {
		uint = false;
		j->pos++;
		if (!js_digit(tn__fmt_peek(j)))
			return tn__fmt_fail(j, TN_EINVAL, "invalid number: no digit after '.'");
		while (js_digit(tn__fmt_peek(j)))
			j->pos++;
	}
	if (tn__fmt_peek(j) == 'e' || tn__fmt_peek(j) == 'E') {
		uint = false;
		j->pos++;
		if (tn__fmt_peek(j) == '+' || tn__fmt_peek(j) == '-')
			j->pos++;
		if (!js_digit(tn__fmt_peek(j)))
			return tn__fmt_fail(j, TN_EINVAL, "invalid number: no digit in the "
					    "exponent");
		while (js_digit(tn__fmt_peek(j)))
			j->pos++;
	}
	*ret_uint = uint;
	*ret_value = v;
	return 0;
}

/* An integer in [0, 2^64), as the reference's usize fields. */
static int js_u64(struct tn__fmt_cursor *j, uint64_t *ret, const char *what)
{
	char found[32], text[TN__FMT_SHOW_MAX];
	size_t at;
	bool uint;
	int r;

	tn__fmt_ws(j);
	at = j->pos;
	if (tn__fmt_peek(j) != '-' && !js_digit(tn__fmt_peek(j)))
		return tn__fmt_fail(j, TN_EINVAL, "expected %s (an integer), found %s", what,
				    tn__fmt_found(j, found, sizeof(found)));
	r = js_number(j, &uint, ret);
	if (r)
		return r;
	if (!uint) {
		tn__fmt_show(text, sizeof(text), j->s + at, j->pos - at);
		j->pos = at;
		return tn__fmt_fail(j, TN_EINVAL, "%s must be an integer from 0 to 2^64-1, not %s",
				    what, text);
	}
	return 0;
}

/* A member's key and its colon; the key is decoded nowhere. */
static int js_member_key(struct tn__fmt_cursor *j)
{
	struct js_str d = { 0 };
	int r = js_string(j, &d, "a key");

	return r ? r : tn__fmt_expect(j, ':', "after a key");
}

/* Skip one value of any kind, nested at most MAX_DEPTH deep. */
static int js_skip(struct tn__fmt_cursor *j)
{
	uint64_t arrays = 0; /* bit d: the container at depth d is an array */
	int depth = 0, r, c;
	char found[32];

	for (;;) {
		tn__fmt_ws(j);
		c = tn__fmt_peek(j);
		if (c == '{' || c == '[') {
			if (depth == MAX_DEPTH)
				return tn__fmt_fail(j, TN_EINVAL, "values nested deeper than %d",
						    MAX_DEPTH);
			j->pos++;
			if (c == '[')
				arrays |= (uint64_t)1 << depth;
			else
				arrays &= ~((uint64_t)1 << depth);
			depth++;
			tn__fmt_ws(j);
			if (tn__fmt_peek(j) != (c == '[' ? ']' : '}')) {
				if (c == '{' && (r = js_member_key(j)))
					return r;
				continue;
			}
			j->pos++;
			depth--;
		} else if (c == '"') {
			struct js_str d = { 0 };
			if ((r = js_string(j, &d, "a value")))
				return r;
		} else if (c == '-' || js_digit(c)) {
			bool uint;
			uint64_t v;
			if ((r = js_number(j, &uint, &v)))
				return r;
		} else if (!js_literal(j, "true") && !js_literal(j, "false") &&
			   !js_literal(j, "null")) {
			return tn__fmt_fail(j, TN_EINVAL, "expected a value, found %s",
					    tn__fmt_found(j, found, sizeof(found)));
		}
		/* After a value: close what ends here, then go on to the next value. */
		for (;;) {
			if (depth == 0)
				return 0;
			bool array = arrays >> (depth - 1) & 1;
			tn__fmt_ws(j);
			c = tn__fmt_peek(j);
			if (c == ',') {
				j->pos++;
				if (!array && (r = js_member_key(j)))
					return r;
				break;
			}
			if (c != (array ? ']' : '}'))
				return tn__fmt_fail(j, TN_EINVAL, "expected ',' or '%c', found %s",
						    array ? ']' : '}',
						    tn__fmt_found(j, found, sizeof(found)));
			j->pos++;
			depth--;
		}
	}
}

/*
 * After a member of an object: true at its closing brace (consumed), false at a comma
 * (consumed) followed by another member.
 */
static int js_next_member(struct tn__fmt_cursor *j, bool *ret_end)
{
	char found[32];
	int c;

	tn__fmt_ws(j);
	c = tn__fmt_peek(j);
	if (c == '}' || c == ',') {
		j->pos++;
		*ret_end = c == '}';
		if (c == ',') {
			tn__fmt_ws(j);
			if (tn__fmt_peek(j) == '}')
				return tn__fmt_fail(j, TN_EINVAL, "trailing comma in an object");
		}
		return 0;
	}
	return tn__fmt_fail(j, TN_EINVAL, "expected ',' or '}' after a member, found %s",
			    tn__fmt_found(j, found, sizeof(found)));
}

/* Enter an object: true when it is empty (and consumed whole). */
static int js_open_object(struct tn__fmt_cursor *j, const char *what, bool *ret_empty)
{
	char found[32];

	tn__fmt_ws(j);
	if (tn__fmt_peek(j) != '{')
		return tn__fmt_fail(j, TN_EINVAL, "expected %s (an object), found %s", what,
				    tn__fmt_found(j, found, sizeof(found)));
	j->pos++;
	tn__fmt_ws(j);
	*ret_empty = tn__fmt_peek(j) == '}';
	if (*ret_empty)
		j->pos++;
	return 0;
}

/* ---- the document -------------------------------------------------------------------------- */

struct st_parse {
	struct tn__fmt_cursor j;
	struct tn__safetensors *out; /* NULL in the counting pass */
	char *pool;		     /* the second pass's string storage */
	size_t pool_cap;
	size_t pool_len; /* string bytes used (or needed), NULs included */
	size_t ntensors, nmeta;
	size_t tensors_cap, meta_cap; /* the second pass's room, counted by the first */
	bool seen_metadata;
};

/* The second pass reads what the first counted; should the bytes change in between (a buffer
 * shared with a writer), it must not write past what was allocated. */
static int st_changed(void)
{
	return tn__error(TN_EINVAL, "safetensors: the header changed while it was parsed");
}

/* A string stored in the pool with a NUL (or only counted, in the first pass). */
static int st_pool_string(struct st_parse *p, const char *what, const char **ret_str,
			  struct js_str *d)
{
	int r;

	d->out = p->out ? p->pool + p->pool_len : NULL;
	d->cap = p->out ? p->pool_cap - p->pool_len : 0;
	if ((r = js_string(&p->j, d, what)))
		return r;
	if (p->out) {
		if (d->len >= d->cap)
			return st_changed();
		d->out[d->len] = '\0';
	}
	p->pool_len += d->len + 1;
	*ret_str = d->out;
	return 0;
}

static int st_metadata(struct st_parse *p)
{
	struct tn__fmt_cursor *j = &p->j;
	bool end;
	int r;

	tn__fmt_ws(j);
	p->seen_metadata = true;
	if (js_literal(j, "null")) /* the reference's Option: null is no metadata */
		return 0;
	if (p->out)
		p->out->has_metadata = true;
	if ((r = js_open_object(j, "\"" META_KEY "\"", &end)))
		return r;
	while (!end) {
		struct tn__fmt_meta m;
		struct js_str d;
		if ((r = st_pool_string(p, "a metadata key", &m.key, &d)))
			return r;
		m.key_len = d.len;
		if ((r = tn__fmt_expect(j, ':', "after a metadata key")))
			return r;
		if ((r = st_pool_string(p, "a metadata value", &m.value, &d)))
			return r;
		m.value_len = d.len;
		if (p->out && p->nmeta == p->meta_cap)
			return st_changed();
		if (p->out)
			p->out->meta[p->nmeta] = m;
		p->nmeta++;
		if ((r = js_next_member(j, &end)))
			return r;
	}
	return 0;
}

enum { F_DTYPE, F_SHAPE, F_OFFSETS, NFIELDS };
static const char *const field_names[NFIELDS] = { "dtype", "shape", "data_offsets" };

static int st_dtype(struct tn__fmt_cursor *j, const char *name, struct tn__fmt_tensor *t)
{
	char buf[16], text[TN__FMT_SHOW_MAX];
	struct js_str d = { buf, sizeof(buf), 0, false };
	size_t at;
	int r;

	tn__fmt_ws(j);
	at = j->pos;
	if ((r = js_string(j, &d, "the dtype")))
		return r;
	for (size_t i = 0; d.len < sizeof(buf) && i < TN_ARRAY_SIZE(st_dtypes); i++) {
		if (strlen(st_dtypes[i].name) != d.len || memcmp(st_dtypes[i].name, buf, d.len))
			continue;
		if (st_dtypes[i].dtype < 0) {
			j->pos = at;
			return tn__fmt_fail(j, TN_ENOTSUP, "tensor \"%s\": dtype %s has no "
					    "libtensor dtype (libtensor holds BOOL, U8, I8, I16, "
					    "I32, I64, F16, BF16, F32, F64)", name,
					    st_dtypes[i].name);
		}
		t->dtype = (enum tn_dtype)st_dtypes[i].dtype;
		return 0;
	}
	tn__fmt_show(text, sizeof(text), j->s + at + 1, j->pos - at - 2);
	j->pos = at;
	return tn__fmt_fail(j, TN_EINVAL, "tensor \"%s\": unknown dtype \"%s\"", name, text);
}

static int st_shape(struct tn__fmt_cursor *j, const char *name, struct tn__fmt_tensor *t)
{
	char found[32];
	bool end;
	int r, c;

	if ((r = tn__fmt_expect(j, '[', "to open the shape")))
		return r;
	tn__fmt_ws(j);
	end = tn__fmt_peek(j) == ']';
	if (end)
		j->pos++;
	while (!end) {
		uint64_t v;
		tn__fmt_ws(j);
		if (t->ndim == TN_ARENA_MAX_DIMS)
			return tn__fmt_fail(j, TN_ENOTSUP, "tensor \"%s\": more than %d dims", name,
					    TN_ARENA_MAX_DIMS);
		if ((r = js_u64(j, &v, "a size")))
			return r;
		if (v > INT64_MAX)
			return tn__fmt_fail(j, TN_ENOTSUP, "tensor \"%s\": size %" PRIu64
					    " is larger than int64", name, v);
		t->sizes[t->ndim++] = (int64_t)v;
		tn__fmt_ws(j);
		c = tn__fmt_peek(j);
		if (c != ',' && c != ']')
			return tn__fmt_fail(j, TN_EINVAL, "expected ',' or ']' in the shape, found "
					    "%s", tn__fmt_found(j, found, sizeof(found)));
		j->pos++;
		end = c == ']';
	}
	return 0;
}

static int st_offsets(struct tn__fmt_cursor *j, uint64_t *begin, uint64_t *end)
{
	int r;

	if ((r = tn__fmt_expect(j, '[', "to open data_offsets")) ||
	    (r = js_u64(j, begin, "begin")) ||
	    (r = tn__fmt_expect(j, ',', "in data_offsets [begin, end]")) ||
	    (r = js_u64(j, end, "end")) ||
	    (r = tn__fmt_expect(j, ']', "after data_offsets [begin, end]")))
		return r;
	return 0;
}

/* A tensor's object, the cursor after the colon that follows its name. */
static int st_tensor(struct st_parse *p, const char *name, const char *stored_name)
{
	struct tn__fmt_tensor t = { .name = stored_name };
	struct tn__fmt_cursor *j = &p->j;
	uint64_t begin = 0, end = 0, nbytes;
	unsigned seen = 0;
	size_t at;
	bool done;
	int r;

	tn__fmt_ws(j);
	at = j->pos;
	if ((r = js_open_object(j, "a tensor's description", &done)))
		return r;
	while (!done) {
		char key[16];
		struct js_str d = { key, sizeof(key), 0, false };
		int f = -1;
		size_t key_at;

		tn__fmt_ws(j);
		key_at = j->pos;
		if ((r = js_string(j, &d, "a field name")) ||
		    (r = tn__fmt_expect(j, ':', "after a field name")))
			return r;
		for (int i = 0; i < NFIELDS; i++)
			if (d.len == strlen(field_names[i]) && !memcmp(key, field_names[i], d.len))
				f = i;
		if (f >= 0 && seen & 1u << f) {
			j->pos = key_at;
			return tn__fmt_fail(j, TN_EINVAL, "tensor \"%s\": duplicate field \"%s\"",
					    name, field_names[f]);
		}
		if (f >= 0)
			seen |= 1u << f;
		switch (f) {
		case F_DTYPE:
			r = st_dtype(j, name, &t);
			break;
		case F_SHAPE:
			r = st_shape(j, name, &t);
			break;
		case F_OFFSETS:
			r = st_offsets(j, &begin, &end);
			break;
		default: /* the reference ignores unknown fields */
			r = js_skip(j);
			break;
		}
		if (r || (r = js_next_member(j, &done)))
			return r;
	}

	size_t after = j->pos;
	j->pos = at;
	for (int i = 0; i < NFIELDS; i++)
		if (!(seen & 1u << i))
			return tn__fmt_fail(j, TN_EINVAL, "tensor \"%s\": missing field \"%s\"",
					    name, field_names[i]);
	r = tn__fmt_nbytes(t.ndim, t.sizes, t.dtype, &nbytes);
	if (r) {
		char shape[256];
		tn__format_shape(shape, sizeof(shape), t.ndim, t.sizes);
		if (r == TN__FMT_TOO_LARGE)
			return tn__fmt_fail(j, TN_ENOTSUP, "tensor \"%s\": shape %s is too large "
					    "for libtensor's int64 strides", name, shape);
		return tn__fmt_fail(j, TN_EINVAL, "tensor \"%s\": the bytes of shape %s overflow "
				    "64 bits", name, shape);
	}
	if (end < begin)
		return tn__fmt_fail(j, TN_EINVAL, "tensor \"%s\": data_offsets [%" PRIu64 ", %"
				    PRIu64 "] end before they begin", name, begin, end);
	if (end - begin != nbytes) {
		char shape[256];
		tn__format_shape(shape, sizeof(shape), t.ndim, t.sizes);
		return tn__fmt_fail(j, TN_EINVAL, "tensor \"%s\": data_offsets [%" PRIu64 ", %"
				    PRIu64 "] hold %" PRIu64 " bytes but shape %s of %s needs %"
				    PRIu64, name, begin, end, end - begin, shape,
				    tn_dtype_name(t.dtype), nbytes);
	}
	j->pos = after;
	if (p->out && p->ntensors == p->tensors_cap)
		return st_changed();
	if (p->out) {
		t.offset = begin; /* relative to the data section until the end */
		t.nbytes = nbytes;
		p->out->tensors[p->ntensors] = t;
	}
	p->ntensors++;
	return 0;
}

/* One member of the top-level object: "__metadata__" or a tensor. */
static int st_member(struct st_parse *p)
{
	struct tn__fmt_cursor *j = &p->j;
	char head[META_KEY_LEN + 1], shown[TN__FMT_SHOW_MAX];
	struct js_str d = { head, sizeof(head), 0, false };
	const char *stored = NULL;
	size_t at;
	int r;

	tn__fmt_ws(j);
	at = j->pos;
	if ((r = js_string(j, &d, "a tensor name")))
		return r;
	if (d.len == META_KEY_LEN && !memcmp(head, META_KEY, META_KEY_LEN)) {
		if (p->seen_metadata) {
			j->pos = at;
			return tn__fmt_fail(j, TN_EINVAL, "\"" META_KEY "\" appears twice");
		}
		if ((r = tn__fmt_expect(j, ':', "after \"" META_KEY "\"")))
			return r;
		return st_metadata(p);
	}

	/* Messages quote the name as the header spells it. */
	tn__fmt_show(shown, sizeof(shown), j->s + at + 1, j->pos - at - 2);
	if (d.len > TN_ARENA_NAME_MAX || d.has_nul) {
		j->pos = at;
		return tn__fmt_fail(j, TN_ENOTSUP, d.has_nul ? "tensor \"%s\": a NUL in the name" :
				    "tensor \"%s\": name longer than %d bytes", shown,
				    TN_ARENA_NAME_MAX);
	}
	if (p->out) {
		j->pos = at;
		if ((r = st_pool_string(p, "a tensor name", &stored, &d)))
			return r;
	} else {
		p->pool_len += d.len + 1;
	}
	if ((r = tn__fmt_expect(j, ':', "after a tensor name")))
		return r;
	return st_tensor(p, shown, stored);
}

static int st_document(struct st_parse *p)
{
	struct tn__fmt_cursor *j = &p->j;
	bool end;
	int r;

	if ((r = js_open_object(j, "the header", &end)))
		return r;
	while (!end) {
		if ((r = st_member(p)) || (r = js_next_member(j, &end)))
			return r;
	}
	tn__fmt_ws(j);
	if (j->pos != j->end)
		return tn__fmt_fail(j, TN_EINVAL, "data after the header's object (only spaces may "
				    "pad it)");
	return 0;
}

/* ---- checks of the whole ------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct tn__fmt_tensor *)a)->name,
		      ((const struct tn__fmt_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
	const struct tn__fmt_tensor *x = a, *y = b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_meta(const void *a, const void *b)
{
	const struct tn__fmt_meta *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->key_len < y->key_len ? x->key_len : y->key_len);

	if (c)
		return c;
	return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

/*
 * The rules that span tensors: unique names and metadata keys, byte ranges that tile the data
 * section in order (the reference sorts by data_offsets and requires each to begin where the
 * previous ended), and a data section that ends at the end of the file.
 */
static int st_check(struct tn__safetensors *st, uint64_t file_size)
{
	char a[TN__FMT_SHOW_MAX], b[TN__FMT_SHOW_MAX];
	uint64_t start = 0;

	qsort(st->tensors, st->ntensors, sizeof(*st->tensors), cmp_name);
	for (size_t i = 1; i < st->ntensors; i++)
		if (!strcmp(st->tensors[i - 1].name, st->tensors[i].name))
			return tn__error(TN_EINVAL, "safetensors: tensor \"%s\" appears twice",
					 tn__fmt_show(a, sizeof(a), st->tensors[i].name,
						      strlen(st->tensors[i].name)));
	qsort(st->meta, st->nmeta, sizeof(*st->meta), cmp_meta);
	for (size_t i = 1; i < st->nmeta; i++)
		if (!cmp_meta(&st->meta[i - 1], &st->meta[i]))
			return tn__error(TN_EINVAL, "safetensors: metadata key \"%s\" appears "
					 "twice", tn__fmt_show(a, sizeof(a), st->meta[i].key,
							       st->meta[i].key_len));

	qsort(st->tensors, st->ntensors, sizeof(*st->tensors), cmp_offset);
	for (size_t i = 0; i < st->ntensors; i++) {
		const struct tn__fmt_tensor *t = &st->tensors[i];
		if (t->offset == start) {
			start += t->nbytes; /* no wrap: it is the end offset, read as a uint64 */
			continue;
		}
		tn__fmt_show(a, sizeof(a), t->name, strlen(t->name));
		if (!i)
			return tn__error(TN_EINVAL, "safetensors: the first tensor, \"%s\", "
					 "begins at byte %" PRIu64 " of the data section, not at 0",
					 a, t->offset);
		tn__fmt_show(b, sizeof(b), t[-1].name, strlen(t[-1].name));
		return tn__error(TN_EINVAL, "safetensors: tensor \"%s\" begins at byte %" PRIu64
				 " of the data section but tensor \"%s\" ends at %" PRIu64 " (%s)",
				 a, t->offset, b, start,
				 t->offset > start ? "a gap" : "an overlap");
	}
	if (file_size - st->data_offset != start)
		return tn__error(TN_EINVAL, "safetensors: the tensors' data is %" PRIu64 " bytes "
				 "but the file has %" PRIu64 " after the header", start,
				 file_size - st->data_offset);
	st->data_len = start;
	for (size_t i = 0; i < st->ntensors; i++)
		st->tensors[i].offset += st->data_offset;
	return 0;
}

/* ---- the entry points ---------------------------------------------------------------------- */

int tn__safetensors_prefix(const void *buf, size_t len, uint64_t file_size,
			   uint64_t *ret_header_len)
{
	const unsigned char *s = buf;
	uint64_t n = 0;

	if (!buf || !ret_header_len)
		return tn__error(TN_EINVAL, "safetensors: NULL argument");
	if (len < TN__SAFETENSORS_PREFIX || file_size < TN__SAFETENSORS_PREFIX)
		return tn__error(TN_EINVAL, "safetensors: the file has %" PRIu64 " bytes, fewer "
				 "than the 8 of the header length", len < file_size ?
				 (uint64_t)len : file_size);
	for (int i = 7; i >= 0; i--)
		n = n << 8 | s[i];
	if (n > TN__SAFETENSORS_MAX_HEADER)
		return tn__error(TN_EINVAL, "safetensors: byte 0: header length %" PRIu64 " is "
				 "over the format's limit of %d bytes", n,
				 TN__SAFETENSORS_MAX_HEADER);
	if (n > file_size - TN__SAFETENSORS_PREFIX)
		return tn__error(TN_EINVAL, "safetensors: byte 0: header length %" PRIu64 " runs "
				 "past the end of the file (%" PRIu64 " bytes)", n, file_size);
	*ret_header_len = n;
	return 0;
}

int tn__safetensors_parse(const void *header, size_t len, uint64_t file_size, unsigned flags,
			  struct tn__safetensors **ret)
{
	struct st_parse p = { .j = { header, 0, len, TN__SAFETENSORS_PREFIX, "safetensors" } };
	struct tn__safetensors *st;
	size_t bad, size, tensors_at, meta_at, pool_at;
	int r;

	if ((!header && len) || !ret)
		return tn__error(TN_EINVAL, "safetensors: NULL argument");
	if (len > TN__SAFETENSORS_MAX_HEADER || file_size < TN__SAFETENSORS_PREFIX ||
	    len > file_size - TN__SAFETENSORS_PREFIX)
		return tn__error(TN_EINVAL, "safetensors: a header of %zu bytes in a file of "
				 "%" PRIu64 " bytes", len, file_size);
	bad = tn__fmt_utf8_invalid(header, len);
	if (bad < len)
		return tn__error(TN_EINVAL, "safetensors: byte %zu: the header is not valid UTF-8",
				 bad + TN__SAFETENSORS_PREFIX);
	if ((r = st_document(&p)))
		return r;

	/* One block: the result, the descriptors, the metadata entries, the strings. */
	tensors_at = sizeof(*st);
	meta_at = tensors_at + p.ntensors * sizeof(struct tn__fmt_tensor);
	pool_at = meta_at + p.nmeta * sizeof(struct tn__fmt_meta);
	size = pool_at + p.pool_len;
	st = tn__malloc(size);
	if (!st)
		return tn__error(TN_ENOMEM, "safetensors: out of memory for %zu tensors",
				 p.ntensors);
	memset(st, 0, pool_at);
	st->header_len = len;
	st->data_offset = TN__SAFETENSORS_PREFIX + (uint64_t)len;
	st->tensors = (struct tn__fmt_tensor *)((char *)st + tensors_at);
	st->meta = (struct tn__fmt_meta *)((char *)st + meta_at);

	struct st_parse fill = { .j = p.j, .out = st };
	fill.j.pos = 0;
	fill.pool = (char *)st + pool_at;
	fill.pool_cap = p.pool_len;
	fill.tensors_cap = p.ntensors;
	fill.meta_cap = p.nmeta;
	r = st_document(&fill);
	st->ntensors = fill.ntensors;
	st->nmeta = fill.nmeta;
	if (r || (r = st_check(st, file_size))) {
		tn__free(st);
		return r;
	}
	if (!(flags & TN__SAFETENSORS_KEEP_METADATA) || !st->nmeta) {
		st->nmeta = 0;
		st->meta = NULL;
	}
	*ret = st;
	return 0;
}

void tn__safetensors_free(struct tn__safetensors *st)
{
	tn__free(st);
}

/* ---- the writer ---------------------------------------------------------------------------- */

/* Output that only counts while buf is NULL, so the header is sized, allocated once, and
 * written by the same code. */
struct st_out {
	char *buf;
	size_t len;
};

static void out_bytes(struct st_out *o, const void *s, size_t n)
{
	if (o->buf)
		memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void out_str(struct st_out *o, const char *s)
{
	out_bytes(o, s, strlen(s));
}

static void out_u64(struct st_out *o, uint64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);

	out_bytes(o, tmp, (size_t)n);
}

/* A JSON string as serde_json writes it: \" \\ \b \f \n \r \t, other controls as \u00xx. */
static void out_json(struct st_out *o, const char *s, size_t n)
{
	out_str(o, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		const char *e = NULL;

		switch (c) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '\b': e = "\\b"; break;
		case '\f': e = "\\f"; break;
		case '\n': e = "\\n"; break;
		case '\r': e = "\\r"; break;
		case '\t': e = "\\t"; break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				e = esc;
			}
		}
		if (e)
			out_str(o, e);
		else
			out_bytes(o, &c, 1);
	}
	out_str(o, "\"");
}

static void st_emit(struct st_out *o, struct tn__fmt_tensor *const *order, size_t n,
		    const struct tn__fmt_meta *meta, size_t nmeta)
{
	uint64_t offset = 0, nbytes = 0;

	out_str(o, "{");
	if (nmeta) {
		out_str(o, "\"" META_KEY "\":{");
		for (size_t i = 0; i < nmeta; i++) {
			if (i)
				out_str(o, ",");
			out_json(o, meta[i].key, meta[i].key_len);
			out_str(o, ":");
			out_json(o, meta[i].value, meta[i].value_len);
		}
		out_str(o, n ? "}," : "}");
	}
	for (size_t i = 0; i < n; i++) {
		const struct tn__fmt_tensor *t = order[i];
		if (i)
			out_str(o, ",");
		out_json(o, t->name, strlen(t->name));
		out_str(o, ":{\"dtype\":\"");
		out_str(o, st_dtypes[st_rank(t->dtype)].name);
		out_str(o, "\",\"shape\":[");
		for (int d = 0; d < t->ndim; d++) {
			if (d)
				out_str(o, ",");
			out_u64(o, (uint64_t)t->sizes[d]);
		}
		out_str(o, "],\"data_offsets\":[");
		tn__fmt_nbytes(t->ndim, t->sizes, t->dtype, &nbytes); /* checked before */
		out_u64(o, offset);
		out_str(o, ",");
		out_u64(o, offset + nbytes);
		out_str(o, "]}");
		offset += nbytes;
	}
	out_str(o, "}");
}

/* The writer's order: larger alignment first (later in st_dtypes), then by name. */
static int cmp_write_order(const void *a, const void *b)
{
	const struct tn__fmt_tensor *x = *(const struct tn__fmt_tensor *const *)a;
	const struct tn__fmt_tensor *y = *(const struct tn__fmt_tensor *const *)b;
	int rx = st_rank(x->dtype), ry = st_rank(y->dtype);

	if (rx != ry)
		return ry - rx;
	return strcmp(x->name, y->name);
}

static int cmp_name_ptr(const void *a, const void *b)
{
	return strcmp((*(const struct tn__fmt_tensor *const *)a)->name,
		      (*(const struct tn__fmt_tensor *const *)b)->name);
}

static int st_check_tensor(const struct tn__fmt_tensor *t, size_t i, uint64_t *ret_nbytes)
{
	char shown[TN__FMT_SHOW_MAX], shape[256];
	size_t len;

	if (!t->name)
		return tn__error(TN_EINVAL, "safetensors: tensor %zu has no name", i);
	len = strnlen(t->name, TN_ARENA_NAME_MAX + 1);
	tn__fmt_show(shown, sizeof(shown), t->name, len);
	if (len > TN_ARENA_NAME_MAX)
		return tn__error(TN_EINVAL, "safetensors: tensor %zu: name \"%s\" is longer than "
				 "%d bytes", i, shown, TN_ARENA_NAME_MAX);
	if (tn__fmt_utf8_invalid(t->name, len) < len)
		return tn__error(TN_EINVAL, "safetensors: tensor %zu: name \"%s\" is not UTF-8", i,
				 shown);
	if (!strcmp(t->name, META_KEY))
		return tn__error(TN_EINVAL, "safetensors: tensor %zu: \"" META_KEY "\" is not a "
				 "tensor name", i);
	if (!tn_dtype_is_valid(t->dtype))
		return tn__error(TN_EINVAL, "safetensors: tensor \"%s\": invalid dtype %d", shown,
				 (int)t->dtype);
	if (t->ndim < 0 || t->ndim > TN_ARENA_MAX_DIMS)
		return tn__error(TN_EINVAL, "safetensors: tensor \"%s\": %d dims (0 to %d)", shown,
				 t->ndim, TN_ARENA_MAX_DIMS);
	tn__format_shape(shape, sizeof(shape), t->ndim, t->sizes);
	for (int d = 0; d < t->ndim; d++)
		if (t->sizes[d] < 0)
			return tn__error(TN_EINVAL, "safetensors: tensor \"%s\": negative size in "
					 "shape %s", shown, shape);
	if (tn__fmt_nbytes(t->ndim, t->sizes, t->dtype, ret_nbytes))
		return tn__error(TN_EINVAL, "safetensors: tensor \"%s\": shape %s is too large",
				 shown, shape);
	return 0;
}

int tn__safetensors_write(struct tn__fmt_tensor *tensors, size_t n,
			  const struct tn__fmt_meta *meta, size_t nmeta, void **ret_header,
			  size_t *ret_len, uint64_t *ret_file_size)
{
	return tn__safetensors_write_aligned(tensors, n, meta, nmeta, 8, ret_header, ret_len,
					     ret_file_size);
}

int tn__safetensors_write_aligned(struct tn__fmt_tensor *tensors, size_t n,
				  const struct tn__fmt_meta *meta, size_t nmeta, size_t align,
				  void **ret_header, size_t *ret_len, uint64_t *ret_file_size)
{
	struct tn__fmt_tensor **order = NULL;
	struct st_out o = { 0 };
	char shown[TN__FMT_SHOW_MAX];
	uint64_t total = 0, nbytes, header_len;
	size_t pad;
	int r = 0;

	if ((!tensors && n) || (!meta && nmeta) || !ret_header || !ret_len || !ret_file_size)
		return tn__error(TN_EINVAL, "safetensors: NULL argument");
	for (size_t i = 0; i < n; i++) {
		if ((r = st_check_tensor(&tensors[i], i, &nbytes)))
			return r;
		if (__builtin_add_overflow(total, nbytes, &total))
			return tn__error(TN_EINVAL, "safetensors: the tensors' bytes overflow 64 "
					 "bits");
	}
	for (size_t i = 0; i < nmeta; i++) {
		if (!meta[i].key || !meta[i].value ||
		    tn__fmt_utf8_invalid(meta[i].key, meta[i].key_len) < meta[i].key_len ||
		    tn__fmt_utf8_invalid(meta[i].value, meta[i].value_len) < meta[i].value_len)
			return tn__error(TN_EINVAL, "safetensors: metadata entry %zu is not two "
					 "UTF-8 strings", i);
		/* Metadata is small and the caller's: a quadratic check needs no memory. */
		for (size_t k = 0; k < i; k++)
			if (meta[k].key_len == meta[i].key_len &&
			    !memcmp(meta[k].key, meta[i].key, meta[i].key_len))
				return tn__error(TN_EINVAL, "safetensors: metadata key \"%s\" "
						 "appears twice",
						 tn__fmt_show(shown, sizeof(shown), meta[i].key,
							      meta[i].key_len));
	}

	order = tn__malloc((n ? n : 1) * sizeof(*order));
	if (!order)
		return tn__error(TN_ENOMEM, "safetensors: out of memory");
	for (size_t i = 0; i < n; i++)
		order[i] = &tensors[i];
	qsort(order, n, sizeof(*order), cmp_name_ptr);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(order[i - 1]->name, order[i]->name)) {
			r = tn__error(TN_EINVAL, "safetensors: tensor \"%s\" appears twice",
				      tn__fmt_show(shown, sizeof(shown), order[i]->name,
						   strlen(order[i]->name)));
			goto out;
		}
	}
	qsort(order, n, sizeof(*order), cmp_write_order);

	st_emit(&o, order, n, meta, nmeta);
	if (align < 8 || align > 65536 || (align & (align - 1))) {
		r = tn__error(TN_EINVAL, "safetensors: alignment %zu is not a power of two from 8 "
			      "to 65536", align);
		goto out;
	}
	/* The data starts at 8 + N: N padded so that it is a multiple of @align. */
	pad = (align - (TN__SAFETENSORS_PREFIX + o.len) % align) % align;
	header_len = o.len + pad;
	if (header_len > TN__SAFETENSORS_MAX_HEADER ||
	    total > UINT64_MAX - TN__SAFETENSORS_PREFIX - header_len) {
		r = tn__error(TN_EINVAL, "safetensors: a header of %" PRIu64 " bytes is over the "
			      "format's limit of %d", header_len, TN__SAFETENSORS_MAX_HEADER);
		goto out;
	}
	o.buf = tn__malloc(TN__SAFETENSORS_PREFIX + header_len);
	if (!o.buf) {
		r = tn__error(TN_ENOMEM, "safetensors: out of memory for a %" PRIu64 "-byte header",
			      header_len);
		goto out;
	}
	for (int i = 0; i < 8; i++)
		o.buf[i] = (char)(header_len >> (8 * i));
	o.len = TN__SAFETENSORS_PREFIX;
	st_emit(&o, order, n, meta, nmeta);
	memset(o.buf + o.len, ' ', pad);

	total = TN__SAFETENSORS_PREFIX + header_len;
	for (size_t i = 0; i < n; i++) {
		tn__fmt_nbytes(order[i]->ndim, order[i]->sizes, order[i]->dtype, &nbytes);
		order[i]->offset = total;
		order[i]->nbytes = nbytes;
		total += nbytes;
	}
	*ret_header = o.buf;
	*ret_len = TN__SAFETENSORS_PREFIX + header_len;
	*ret_file_size = total;
out:
	tn__free(order);
	return r;
}
