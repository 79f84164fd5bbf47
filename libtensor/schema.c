/* SPDX-License-Identifier: MIT */
/*
 * Operator schemas: a parser for PyTorch's FunctionSchema grammar
 * ("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"), the canonical
 * text, and the type checks the registry needs (does a value fit an argument type, do two
 * schemas have the same types).
 *
 * The parser reads untrusted text (it is fuzzed): it never recurses, never reads past the
 * terminating NUL, and reports the first error with its line and column ("schema:1:24: ...")
 * and the offending token. Numbers are read and written in the C locale whatever the caller's
 * locale says, so the canonical text parses back to an equal schema anywhere.
 */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch_internal.h"

/*
 * The largest N of a sized list type T[N]. Real schemas use 1 to 3; a bound keeps a default
 * broadcast to N copies ("int[N] x=1") from asking for gigabytes.
 */
#define MAX_LIST_SIZE 1024
/* The most bytes of a token or a default's text quoted in a message. */
#define SHOW_MAX 64

struct tn_schema {
	char *name;     /* "ns::name" as written; "" for a signature */
	char *overload; /* "" when absent */
	tn_schema_arg *args;
	size_t num_args;
	tn_schema_arg *returns;
	size_t num_returns;
	char *text; /* the canonical text, made once so tn_schema_str cannot fail */
};

static const char *const kind_names[TN_NUM_TYPE_KINDS] = {
#define TN_X_(e, name) [e] = name,
	TN_TYPE_KIND_LIST(TN_X_)
#undef TN_X_
};

/* Base type names, as written in schemas; SymInt reads as int. */
static const struct {
	const char *name;
	enum tn_type_kind kind;
} base_types[] = {
	{ "Tensor", TN_TYPE_TENSOR },
	{ "int", TN_TYPE_INT },
	{ "SymInt", TN_TYPE_INT },
	{ "float", TN_TYPE_FLOAT },
	{ "bool", TN_TYPE_BOOL },
	{ "str", TN_TYPE_STR },
	{ "Scalar", TN_TYPE_SCALAR },
	{ "ScalarType", TN_TYPE_SCALAR_TYPE },
	{ "Device", TN_TYPE_DEVICE },
	{ "Layout", TN_TYPE_LAYOUT },
	{ "MemoryFormat", TN_TYPE_MEMORY_FORMAT },
	{ "Generator", TN_TYPE_GENERATOR },
};

/* Indexed by enum tn_memory_format and enum tn_layout. */
static const char *const memory_format_names[] = {
	[TN_CONTIGUOUS_FORMAT] = "contiguous_format",
	[TN_CHANNELS_LAST] = "channels_last",
	[TN_CHANNELS_LAST_3D] = "channels_last_3d",
	[TN_PRESERVE_FORMAT] = "preserve_format",
};
static const char *const layout_names[] = {
	[TN_STRIDED] = "strided",
};

/* ---- the C locale ------------------------------------------------------------------------- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void)
{
	/* On failure (out of memory) numbers use the caller's locale, which is "C" unless the
	 * program called setlocale(). */
	c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* Switch this thread to the C locale for numbers; returns what to give back to end_c(). */
static locale_t begin_c(void)
{
	pthread_once(&c_locale_once, make_c_locale);
	return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void end_c(locale_t old)
{
	if (old)
		uselocale(old);
}

/* ---- a growable string -------------------------------------------------------------------- */

struct sbuf {
	char *buf;
	size_t len, cap;
	bool oom; /* an allocation failed: the text is lost, later calls do nothing */
};

static void sb_reserve(struct sbuf *b, size_t extra)
{
	size_t need, cap;
	char *n;

	if (b->oom)
		return;
	if (__builtin_add_overflow(b->len, extra, &need) || need == SIZE_MAX) {
		b->oom = true;
		return;
	}
	need++;
	if (need <= b->cap)
		return;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (!(n = tn__malloc(cap))) {
		b->oom = true;
		return;
	}
	if (b->len)
		memcpy(n, b->buf, b->len);
	n[b->len] = '\0';
	tn__free(b->buf);
	b->buf = n;
	b->cap = cap;
}

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
	sb_reserve(b, n);
	if (b->oom)
		return;
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static void sb_putc(struct sbuf *b, char c)
{
	sb_putn(b, &c, 1);
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) TN_PRINTF(2, 3);
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	int n;

	/* Everything formatted here is short (numbers, names of enums). */
	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_putn(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* The finished text (owned by the caller), or NULL when an allocation failed. */
static char *sb_finish(struct sbuf *b)
{
	sb_reserve(b, 0);
	if (b->oom) {
		tn__free(b->buf);
		b->buf = NULL;
		return NULL;
	}
	return b->buf;
}

static char *dupn(const char *s, size_t n)
{
	char *d = n < SIZE_MAX ? tn__malloc(n + 1) : NULL;
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* ---- formatting types and values ----------------------------------------------------------- */

/* The type's text in pieces, so that an alias annotation can go between base and suffix. */
static const char *type_base(const tn_type *t)
{
	return (unsigned)t->kind < TN_NUM_TYPE_KINDS ? kind_names[t->kind] : "invalid";
}

static int type_suffix(const tn_type *t, char *buf, size_t len)
{
	char size[16] = "";

	if (t->is_list && t->list_size > 0)
		snprintf(size, sizeof(size), "%d", (int)t->list_size);
	return snprintf(buf, len, "%s%s%s%s%s", t->is_list && t->elem_optional ? "?" : "",
			t->is_list ? "[" : "", size, t->is_list ? "]" : "", t->optional ? "?" : "");
}

static void format_type(struct sbuf *b, const tn_type *t, const tn_schema_arg *alias)
{
	char suffix[32];

	sb_puts(b, type_base(t));
	if (alias && alias->alias_set) {
		sb_putc(b, '(');
		sb_puts(b, alias->alias_set);
		if (alias->alias_write)
			sb_putc(b, '!');
		if (alias->alias_after) {
			sb_puts(b, " -> ");
			sb_puts(b, alias->alias_after);
		}
		sb_putc(b, ')');
	}
	type_suffix(t, suffix, sizeof(suffix));
	sb_puts(b, suffix);
}

int tn__type_format(const tn_type *t, char *buf, size_t len)
{
	char suffix[32];
	int n;

	if (!t) {
		if (len)
			buf[0] = '\0';
		return 0;
	}
	type_suffix(t, suffix, sizeof(suffix));
	n = snprintf(buf, len, "%s%s", type_base(t), suffix);
	return n < 0 ? 0 : n;
}

/* The shortest of %.15g, %.16g and %.17g that reads back to the same double, with a '.' or an
 * exponent so that it reads back as a float and not as an int. */
static void format_double(char *buf, size_t len, double d)
{
	locale_t old;

	if (isnan(d)) {
		snprintf(buf, len, "nan");
		return;
	}
	if (isinf(d)) {
		snprintf(buf, len, d < 0 ? "-inf" : "inf");
		return;
	}
	old = begin_c();
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		double back = strtod(buf, NULL);
		if (memcmp(&back, &d, sizeof(d)) == 0)
			break;
	}
	end_c(old);
	if (!strpbrk(buf, ".e")) {
		size_t n = strlen(buf);
		if (n + 3 <= len)
			memcpy(buf + n, ".0", 3);
	}
}

static void format_scalar(struct sbuf *b, tn_scalar s)
{
	char num[40];

	if (s.kind == TN_SCALAR_BOOL) {
		sb_puts(b, s.v.b ? "True" : "False");
	} else if (s.kind == TN_SCALAR_INT) {
		sb_printf(b, "%lld", (long long)s.v.i);
	} else {
		format_double(num, sizeof(num), s.v.d);
		sb_puts(b, num);
	}
}

static void format_string(struct sbuf *b, const char *s, size_t n)
{
	sb_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			sb_putc(b, '\\');
		sb_putc(b, s[i]);
	}
	sb_putc(b, '"');
}

/* A default value as the schema grammar writes it. */
static void format_value(struct sbuf *b, const tn_ivalue *v)
{
	const char *name;
	size_t n;

	switch (v->tag) {
	case TN_IVALUE_NONE:
		sb_puts(b, "None");
		break;
	case TN_IVALUE_INT:
		format_scalar(b, tn_scalar_int(v->u.i));
		break;
	case TN_IVALUE_DOUBLE:
		format_scalar(b, tn_scalar_double(v->u.d));
		break;
	case TN_IVALUE_BOOL:
		format_scalar(b, tn_scalar_bool(v->u.b));
		break;
	case TN_IVALUE_SCALAR:
		if (v->aux == TN_SCALAR_BOOL)
			format_scalar(b, tn_scalar_bool(v->u.b));
		else if (v->aux == TN_SCALAR_INT)
			format_scalar(b, tn_scalar_int(v->u.i));
		else
			format_scalar(b, tn_scalar_double(v->u.d));
		break;
	case TN_IVALUE_INT_LIST:
	case TN_IVALUE_DOUBLE_LIST:
	case TN_IVALUE_BOOL_LIST:
		sb_putc(b, '[');
		n = tn__ivalue_list_len(v);
		for (size_t i = 0; i < n; i++) {
			if (i)
				sb_puts(b, ", ");
			if (v->tag == TN_IVALUE_INT_LIST)
				format_scalar(b, tn_scalar_int(tn__ivalue_list_ints(v)[i]));
			else if (v->tag == TN_IVALUE_DOUBLE_LIST)
				format_scalar(b, tn_scalar_double(tn__ivalue_list_doubles(v)[i]));
			else
				format_scalar(b, tn_scalar_bool(tn__ivalue_list_bools(v)[i]));
		}
		sb_putc(b, ']');
		break;
	case TN_IVALUE_TENSOR_LIST:
		/* Only the empty list can be a default. */
		sb_puts(b, "[]");
		break;
	case TN_IVALUE_STRING:
		format_string(b, v->u.string->text, v->u.string->len);
		break;
	case TN_IVALUE_DTYPE:
		name = tn_dtype_name((enum tn_dtype)v->u.i);
		if (name)
			sb_puts(b, name);
		else
			sb_printf(b, "ScalarType(%lld)", (long long)v->u.i);
		break;
	case TN_IVALUE_DEVICE:
		name = tn_device_type_name((enum tn_device_type)v->u.i);
		sb_putc(b, '"');
		sb_puts(b, name ? name : "invalid");
		if ((v->u.i == TN_DEVICE_CUDA && (int)v->aux >= 0) ||
		    (v->u.i != TN_DEVICE_CUDA && v->aux != 0))
			sb_printf(b, ":%d", (int)v->aux);
		sb_putc(b, '"');
		break;
	case TN_IVALUE_LAYOUT:
		if ((uint64_t)v->u.i < TN_ARRAY_SIZE(layout_names))
			sb_puts(b, layout_names[v->u.i]);
		else
			sb_printf(b, "Layout(%lld)", (long long)v->u.i);
		break;
	case TN_IVALUE_MEMORY_FORMAT:
		if ((uint64_t)v->u.i < TN_ARRAY_SIZE(memory_format_names))
			sb_puts(b, memory_format_names[v->u.i]);
		else
			sb_printf(b, "MemoryFormat(%lld)", (long long)v->u.i);
		break;
	default:
		sb_puts(b, tn_ivalue_type_name(v));
		break;
	}
}

static void format_arg(struct sbuf *b, const tn_schema_arg *a)
{
	format_type(b, &a->type, a);
	if (a->name) {
		sb_putc(b, ' ');
		sb_puts(b, a->name);
	}
	if (a->has_default) {
		sb_putc(b, '=');
		format_value(b, &a->default_value);
	}
}

static char *format_schema(const tn_schema *s)
{
	struct sbuf b = { 0 };
	bool star = false;

	sb_puts(&b, s->name);
	if (s->overload[0]) {
		sb_putc(&b, '.');
		sb_puts(&b, s->overload);
	}
	sb_putc(&b, '(');
	for (size_t i = 0; i < s->num_args; i++) {
		if (i)
			sb_puts(&b, ", ");
		if (s->args[i].kwarg_only && !star) {
			sb_puts(&b, "*, ");
			star = true;
		}
		format_arg(&b, &s->args[i]);
	}
	sb_puts(&b, ") -> ");
	if (s->num_returns == 1 && !s->returns[0].name) {
		format_arg(&b, &s->returns[0]);
	} else {
		sb_putc(&b, '(');
		for (size_t i = 0; i < s->num_returns; i++) {
			if (i)
				sb_puts(&b, ", ");
			format_arg(&b, &s->returns[i]);
		}
		sb_putc(&b, ')');
	}
	return sb_finish(&b);
}

/* ---- the lexer ----------------------------------------------------------------------------- */

enum tok_kind {
	T_END,
	T_IDENT,
	T_NUMBER, /* a run of decimal digits */
	T_PUNCT,  /* one of ( ) [ ] , * ? ! | = . or -> or :: */
	T_OTHER,  /* any other byte */
};

struct token {
	enum tok_kind kind;
	const char *s;
	size_t len;
};

struct parser {
	const char *src;
	const char *p; /* the next byte to read; never past the NUL */
	tn_schema *s;
	size_t args_cap, returns_cap;
};

/* Plain ASCII classes: <ctype.h> would follow the caller's locale. */
static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident(char c)
{
	return is_ident_start(c) || is_digit(c);
}

static const char *skip_space(const char *p)
{
	while (is_space(*p))
		p++;
	return p;
}

static struct token peek(const struct parser *ps)
{
	const char *p = skip_space(ps->p);
	struct token t = { T_END, p, 0 };

	if (!*p)
		return t;
	if (is_ident_start(*p)) {
		t.kind = T_IDENT;
		while (is_ident(p[t.len]))
			t.len++;
	} else if (is_digit(*p)) {
		t.kind = T_NUMBER;
		while (is_digit(p[t.len]))
			t.len++;
	} else if ((p[0] == '-' && p[1] == '>') || (p[0] == ':' && p[1] == ':')) {
		t.kind = T_PUNCT;
		t.len = 2;
	} else if (strchr("()[],*?!|=.", *p)) {
		t.kind = T_PUNCT;
		t.len = 1;
	} else {
		t.kind = T_OTHER;
		t.len = 1;
	}
	return t;
}

static void take(struct parser *ps, struct token t)
{
	ps->p = t.s + t.len;
}

static bool is_punct(struct token t, const char *s)
{
	return t.kind == T_PUNCT && t.len == strlen(s) && memcmp(t.s, s, t.len) == 0;
}

static bool is_word(struct token t, const char *w)
{
	return t.kind == T_IDENT && t.len == strlen(w) && memcmp(t.s, w, t.len) == 0;
}

/* @n bytes at @s for a message, cut at SHOW_MAX, bytes outside ASCII's printable range as
 * \xNN, in single quotes when @quotes. */
static const char *escape(char *buf, size_t len, const char *s, size_t n, bool quotes)
{
	size_t o = 0;

	if (quotes)
		buf[o++] = '\'';
	for (size_t i = 0; i < n && i < SHOW_MAX && o + 8 < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f)
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
	}
	if (n > SHOW_MAX && o + 5 < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	if (quotes)
		buf[o++] = '\'';
	buf[o] = '\0';
	return buf;
}

static const char *quote(char *buf, size_t len, const char *s, size_t n)
{
	return escape(buf, len, s, n, true);
}

/* Room for quote(): SHOW_MAX bytes of up to 4 characters each, quotes, "..." and NUL. */
#define QUOTE_BUF (SHOW_MAX * 4 + 16)

static const char *show(char *buf, size_t len, struct token t)
{
	return t.kind == T_END ? "end of input" : quote(buf, len, t.s, t.len);
}

/* Fail with "schema:LINE:COL: message", the position being that of @at. */
static int perr(const struct parser *ps, const char *at, const char *fmt, ...) TN_PRINTF(3, 4);
static int perr(const struct parser *ps, const char *at, const char *fmt, ...)
{
	char msg[768];
	size_t line = 1, col = 1;
	va_list ap;

	for (const char *q = ps->src; q < at; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tn__error(TN_EINVAL, "schema:%zu:%zu: %s", line, col, msg);
}

static int oom(void)
{
	return tn__error(TN_ENOMEM, "out of memory parsing a schema");
}

/* Fail with "expected WHAT but found TOKEN" at @t. */
static int expected(const struct parser *ps, struct token t, const char *what)
{
	char buf[QUOTE_BUF];
	return perr(ps, t.s, "expected %s but found %s", what, show(buf, sizeof(buf), t));
}

/* ---- freeing ----------------------------------------------------------------------------- */

static void free_args(tn_schema_arg *args, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		tn__free((void *)args[i].name);
		tn__free((void *)args[i].alias_set);
		tn__free((void *)args[i].alias_after);
		tn_ivalue_release(&args[i].default_value);
	}
	tn__free(args);
}

TN_EXPORT void tn_schema_free(tn_schema *schema)
{
	if (!schema)
		return;
	free_args(schema->args, schema->num_args);
	free_args(schema->returns, schema->num_returns);
	tn__free(schema->name);
	tn__free(schema->overload);
	tn__free(schema->text);
	tn__free(schema);
}

/* A new zeroed argument or return at the end of the schema's list (so that the schema owns
 * whatever is put into it even if parsing fails half-way). */
static tn_schema_arg *new_arg(struct parser *ps, bool is_return)
{
	tn_schema_arg **list = is_return ? &ps->s->returns : &ps->s->args;
	size_t *n = is_return ? &ps->s->num_returns : &ps->s->num_args;
	size_t *cap = is_return ? &ps->returns_cap : &ps->args_cap;

	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 4, bytes;
		tn_schema_arg *a;
		if (__builtin_mul_overflow(c, sizeof(*a), &bytes) || !(a = tn__malloc(bytes)))
			return NULL;
		if (*n)
			memcpy(a, *list, *n * sizeof(*a));
		tn__free(*list);
		*list = a;
		*cap = c;
	}
	tn_schema_arg *a = &(*list)[(*n)++];
	memset(a, 0, sizeof(*a));
	a->default_value = tn_ivalue_none();
	return a;
}

/* ---- names, types and alias annotations -------------------------------------------------- */

static int parse_name(struct parser *ps)
{
	struct token ns, name, dot, ov;
	struct sbuf b = { 0 };

	ns = peek(ps);
	if (ns.kind != T_IDENT)
		return expected(ps, ns, "an operator name");
	take(ps, ns);
	sb_putn(&b, ns.s, ns.len);
	if (is_punct(peek(ps), "::")) {
		take(ps, peek(ps));
		name = peek(ps);
		if (name.kind != T_IDENT) {
			tn__free(sb_finish(&b));
			return expected(ps, name, "an operator name after '::'");
		}
		take(ps, name);
		sb_puts(&b, "::");
		sb_putn(&b, name.s, name.len);
	}
	if (!(ps->s->name = sb_finish(&b)))
		return oom();
	dot = peek(ps);
	if (is_punct(dot, ".")) {
		take(ps, dot);
		ov = peek(ps);
		if (ov.kind != T_IDENT)
			return expected(ps, ov, "an overload name after '.'");
		take(ps, ov);
		ps->s->overload = dupn(ov.s, ov.len);
	} else {
		ps->s->overload = dupn("", 0);
	}
	return ps->s->overload ? 0 : oom();
}

/* "a" or "a|b|c" into *ret (owned). */
static int parse_alias_set(struct parser *ps, char **ret)
{
	struct sbuf b = { 0 };
	struct token t;

	for (;;) {
		t = peek(ps);
		if (t.kind != T_IDENT) {
			tn__free(sb_finish(&b));
			return expected(ps, t, "an alias set name");
		}
		take(ps, t);
		sb_putn(&b, t.s, t.len);
		t = peek(ps);
		if (!is_punct(t, "|"))
			break;
		take(ps, t);
		sb_putc(&b, '|');
	}
	return (*ret = sb_finish(&b)) ? 0 : oom();
}

/* "(a)", "(a!)", "(a|b)", "(a -> *)", "(a! -> b)"; the '(' is the next token. */
static int parse_alias(struct parser *ps, tn_schema_arg *a, enum tn_type_kind kind,
		       struct token base, bool elem_q)
{
	struct token t = peek(ps);
	char *set;
	int r;

	if (kind != TN_TYPE_TENSOR)
		return perr(ps, t.s, "alias annotation on a non-Tensor type '%.*s%s'",
			    (int)base.len, base.s, elem_q ? "?" : "");
	take(ps, t);
	if ((r = parse_alias_set(ps, &set)))
		return r;
	a->alias_set = set;
	t = peek(ps);
	if (is_punct(t, "!")) {
		take(ps, t);
		a->alias_write = true;
		t = peek(ps);
	}
	if (is_punct(t, "->")) {
		take(ps, t);
		t = peek(ps);
		if (is_punct(t, "*")) {
			take(ps, t);
			if (!(a->alias_after = dupn("*", 1)))
				return oom();
		} else if ((r = parse_alias_set(ps, &set))) {
			return r;
		} else {
			a->alias_after = set;
		}
		t = peek(ps);
	}
	if (!is_punct(t, ")"))
		return expected(ps, t, "')' to close the alias annotation");
	take(ps, t);
	return 0;
}

/*
 * type := NAME [alias] ['?' [alias]] ['[' [N] ']' ['?']]
 * A '?' before '[' makes the elements optional (Tensor?[]), one after ']' or without a list
 * the whole type. @what names the expected token in errors ("a type", "a return type").
 */
static int parse_type(struct parser *ps, tn_schema_arg *a, const char *what)
{
	struct token base = peek(ps), t;
	tn_type *ty = &a->type;
	bool q = false, found = false;
	int r;

	if (base.kind != T_IDENT)
		return expected(ps, base, what);
	for (size_t i = 0; i < TN_ARRAY_SIZE(base_types); i++) {
		if (is_word(base, base_types[i].name)) {
			ty->kind = base_types[i].kind;
			found = true;
			break;
		}
	}
	if (!found) {
		char buf[QUOTE_BUF];
		return perr(ps, base.s, "unknown type %s",
			    quote(buf, sizeof(buf), base.s, base.len));
	}
	take(ps, base);
	if (is_punct(peek(ps), "(") && (r = parse_alias(ps, a, ty->kind, base, false)))
		return r;
	t = peek(ps);
	if (is_punct(t, "?")) {
		take(ps, t);
		q = true;
		if (!a->alias_set && is_punct(peek(ps), "(") &&
		    (r = parse_alias(ps, a, ty->kind, base, true)))
			return r;
	}
	t = peek(ps);
	if (!is_punct(t, "[")) {
		ty->optional = q;
		return 0;
	}
	if (!(ty->kind == TN_TYPE_TENSOR ||
	      (!q && (ty->kind == TN_TYPE_INT || ty->kind == TN_TYPE_FLOAT ||
		      ty->kind == TN_TYPE_BOOL))))
		return perr(ps, base.s, "unsupported list element type '%.*s%s'", (int)base.len,
			    base.s, q ? "?" : "");
	take(ps, t);
	t = peek(ps);
	if (t.kind == T_NUMBER) {
		int64_t n = 0;
		for (size_t i = 0; i < t.len && n <= MAX_LIST_SIZE; i++)
			n = n * 10 + (t.s[i] - '0');
		if (n < 1 || n > MAX_LIST_SIZE) {
			char buf[QUOTE_BUF];
			return perr(ps, t.s, "list size must be between 1 and %d but found %s",
				    MAX_LIST_SIZE, quote(buf, sizeof(buf), t.s, t.len));
		}
		take(ps, t);
		ty->list_size = (int32_t)n;
		t = peek(ps);
		if (!is_punct(t, "]"))
			return expected(ps, t, "']'");
	} else if (!is_punct(t, "]")) {
		return expected(ps, t, "a list size or ']'");
	}
	take(ps, t);
	ty->is_list = true;
	ty->elem_optional = q;
	t = peek(ps);
	if (is_punct(t, "?")) {
		take(ps, t);
		ty->optional = true;
	}
	return 0;
}

/* ---- default values ------------------------------------------------------------------------ */

enum lit_kind { L_INT, L_DOUBLE, L_BOOL, L_NONE, L_STRING, L_IDENT, L_LIST };

/* A default value as written, before it is checked against the argument's type. */
struct literal {
	enum lit_kind kind;
	const char *start; /* the raw text, for messages */
	size_t len;
	tn_scalar num;     /* L_INT, L_DOUBLE, L_BOOL */
	struct sbuf str;   /* L_STRING: the decoded text */
	tn_scalar *elems;  /* L_LIST: numbers and bools */
	size_t n, cap;
};

static void literal_free(struct literal *l)
{
	tn__free(l->str.buf);
	tn__free(l->elems);
}

/*
 * A number at @p: [+-] digits [. digits] [e [+-] digits], or [+-] . digits [...]. Integers
 * must fit int64; floats must be finite.
 */
static int parse_number(struct parser *ps, const tn_schema_arg *a, const char *p, tn_scalar *ret,
			const char **ret_end)
{
	const char *q = p, *digits;
	bool neg = false, is_float = false;
	size_t before, after = 0;
	char buf[QUOTE_BUF];

	if (*q == '+' || *q == '-')
		neg = *q++ == '-';
	digits = q;
	while (is_digit(*q))
		q++;
	before = (size_t)(q - digits);
	if (*q == '.' && (before > 0 || is_digit(q[1]))) {
		is_float = true;
		q++;
		while (is_digit(*q)) {
			q++;
			after++;
		}
	}
	if (before + after == 0) /* the callers check starts_number() first */
		return perr(ps, p, "expected a number in the default value of argument '%s'",
			    a->name);
	if (*q == 'e' || *q == 'E') {
		const char *e = q + 1;
		if (*e == '+' || *e == '-')
			e++;
		if (is_digit(*e)) {
			is_float = true;
			while (is_digit(*e))
				e++;
			q = e;
		}
	}
	*ret_end = q;
	if (!is_float) {
		int64_t v = 0;
		/* Accumulate negatively so that INT64_MIN is representable. */
		for (const char *d = digits; d < q; d++) {
			if (__builtin_mul_overflow(v, 10, &v) ||
			    __builtin_sub_overflow(v, *d - '0', &v))
				goto range;
		}
		if (!neg && __builtin_mul_overflow(v, -1, &v))
			goto range;
		*ret = tn_scalar_int(v);
		return 0;
	}
	/* strtod needs a terminated copy; most numbers fit on the stack. */
	size_t n = (size_t)(q - p);
	char small[64], *copy = n < sizeof(small) ? small : tn__malloc(n + 1);
	if (!copy)
		return oom();
	memcpy(copy, p, n);
	copy[n] = '\0';
	locale_t old = begin_c();
	double d = strtod(copy, NULL);
	end_c(old);
	if (copy != small)
		tn__free(copy);
	if (!isfinite(d))
		goto range;
	*ret = tn_scalar_double(d);
	return 0;
range:
	return perr(ps, p, "default value for argument '%s' is out of range: %s", a->name,
		    escape(buf, sizeof(buf), p, (size_t)(q - p), false));
}

/* A string in '...' or "..." with the escapes \" \' and \\. */
static int parse_string(struct parser *ps, const tn_schema_arg *a, const char *p,
			struct sbuf *out, const char **ret_end)
{
	char quote_char = *p, buf[QUOTE_BUF];
	const char *q = p + 1;

	sb_reserve(out, 0);
	for (;;) {
		if (*q == '\0')
			return perr(ps, p, "unterminated string in the default value of argument "
					   "'%s'",
				    a->name);
		if (*q == quote_char)
			break;
		if (*q == '\\') {
			if (q[1] == '\0')
				return perr(ps, p, "unterminated string in the default value of "
						   "argument '%s'",
					    a->name);
			if (q[1] != '"' && q[1] != '\'' && q[1] != '\\')
				return perr(ps, q,
					    "unknown escape sequence %s in the default value of "
					    "argument '%s'",
					    quote(buf, sizeof(buf), q, 2), a->name);
			q++;
		}
		sb_putc(out, *q);
		q++;
	}
	if (out->oom)
		return oom();
	*ret_end = q + 1;
	return 0;
}

static bool starts_number(const char *p)
{
	if (*p == '+' || *p == '-')
		p++;
	return is_digit(*p) || (*p == '.' && is_digit(p[1]));
}

/* '[' [elem (',' elem)*] ']' where elem is a number, True or False. */
static int parse_list_literal(struct parser *ps, const tn_schema_arg *a, struct literal *l)
{
	struct token t;
	const char *end = NULL;
	tn_scalar v;
	int r;

	ps->p = l->start + 1;
	t = peek(ps);
	if (is_punct(t, "]")) {
		take(ps, t);
		return 0;
	}
	for (;;) {
		t = peek(ps);
		if (starts_number(t.s)) {
			if ((r = parse_number(ps, a, t.s, &v, &end)))
				return r;
			ps->p = end;
		} else if (is_word(t, "True") || is_word(t, "False")) {
			v = tn_scalar_bool(t.s[0] == 'T');
			take(ps, t);
		} else {
			char buf[128];
			snprintf(buf, sizeof(buf),
				 "a number, True or False in the list of argument '%.64s'", a->name);
			return expected(ps, t, buf);
		}
		if (l->n == l->cap) {
			size_t c = l->cap ? l->cap * 2 : 8, bytes;
			tn_scalar *e;
			if (__builtin_mul_overflow(c, sizeof(*e), &bytes) ||
			    !(e = tn__malloc(bytes)))
				return oom();
			if (l->n)
				memcpy(e, l->elems, l->n * sizeof(*e));
			tn__free(l->elems);
			l->elems = e;
			l->cap = c;
		}
		l->elems[l->n++] = v;
		t = peek(ps);
		if (is_punct(t, "]")) {
			take(ps, t);
			return 0;
		}
		if (!is_punct(t, ","))
			return expected(ps, t, "',' or ']'");
		take(ps, t);
	}
}

static int parse_literal(struct parser *ps, const tn_schema_arg *a, struct literal *l)
{
	struct token t = peek(ps);
	const char *end = t.s;
	int r;

	l->start = t.s;
	if (starts_number(t.s)) {
		if ((r = parse_number(ps, a, t.s, &l->num, &end)))
			return r;
		l->kind = l->num.kind == TN_SCALAR_INT ? L_INT : L_DOUBLE;
		ps->p = end;
	} else if (*t.s == '"' || *t.s == '\'') {
		if ((r = parse_string(ps, a, t.s, &l->str, &end)))
			return r;
		l->kind = L_STRING;
		ps->p = end;
	} else if (is_punct(t, "[")) {
		if ((r = parse_list_literal(ps, a, l)))
			return r;
		l->kind = L_LIST;
	} else if (t.kind == T_IDENT) {
		if (is_word(t, "True") || is_word(t, "False")) {
			l->kind = L_BOOL;
			l->num = tn_scalar_bool(t.s[0] == 'T');
		} else {
			l->kind = is_word(t, "None") ? L_NONE : L_IDENT;
		}
		take(ps, t);
	} else {
		char buf[128];
		snprintf(buf, sizeof(buf), "a default value for argument '%.64s'", a->name);
		return expected(ps, t, buf);
	}
	l->len = (size_t)(ps->p - l->start);
	return 0;
}

static bool literal_is(const struct literal *l, const char *w)
{
	return l->len == strlen(w) && memcmp(l->start, w, l->len) == 0;
}

/* "cpu", "meta", "cuda", "cuda:N"; "cpu:0" and "meta:0" too, as PyTorch. */
static bool parse_device(const char *s, tn_device *ret)
{
	static const struct {
		const char *name;
		enum tn_device_type type;
	} types[] = {
		{ "cpu", TN_DEVICE_CPU },
		{ "cuda", TN_DEVICE_CUDA },
		{ "meta", TN_DEVICE_META },
	};

	for (size_t i = 0; i < TN_ARRAY_SIZE(types); i++) {
		size_t n = strlen(types[i].name);
		if (strncmp(s, types[i].name, n) != 0)
			continue;
		const char *p = s + n;
		int64_t idx = types[i].type == TN_DEVICE_CUDA ? -1 : 0;
		if (*p == ':') {
			p++;
			if (!is_digit(*p))
				return false;
			idx = 0;
			while (is_digit(*p) && idx <= INT32_MAX)
				idx = idx * 10 + (*p++ - '0');
			if (idx > INT32_MAX || (types[i].type != TN_DEVICE_CUDA && idx != 0))
				return false;
		}
		if (*p)
			return false;
		ret->type = types[i].type;
		ret->index = (int)idx;
		return true;
	}
	return false;
}

/*
 * Turn @l into the default of @a, or fail with "does not fit". Returns 0, a negative code
 * (TN_ENOMEM), or 1 for "does not fit" (the caller words the message).
 */
static int literal_value(const struct literal *l, const tn_schema_arg *a, tn_ivalue *ret)
{
	const tn_type *t = &a->type;
	int r;

	if (l->kind == L_NONE) {
		if (!t->optional)
			return 1;
		*ret = tn_ivalue_none();
		return 0;
	}
	if (t->is_list) {
		size_t n = l->kind == L_LIST ? l->n : (size_t)t->list_size, bytes;
		void *tmp;

		if (l->kind == L_LIST) {
			/* [] stands for "not given" in sized lists too (max_pool2d's
			 * int[2] stride=[]). */
			if (t->list_size > 0 && l->n != (size_t)t->list_size && l->n != 0)
				return 1;
			for (size_t i = 0; i < l->n; i++) {
				enum tn_scalar_kind k = l->elems[i].kind;
				if ((t->kind == TN_TYPE_INT && k != TN_SCALAR_INT) ||
				    (t->kind == TN_TYPE_FLOAT && k == TN_SCALAR_BOOL) ||
				    (t->kind == TN_TYPE_BOOL && k != TN_SCALAR_BOOL) ||
				    t->kind == TN_TYPE_TENSOR)
					return 1;
			}
		} else if (!(l->kind == L_INT && t->kind == TN_TYPE_INT && t->list_size > 0)) {
			return 1;
		}
		if (t->kind == TN_TYPE_TENSOR)
			return tn_ivalue_tensor_list(0, NULL, ret) ? oom() : 0;
		if (__builtin_mul_overflow(n, sizeof(int64_t), &bytes) ||
		    !(tmp = tn__malloc(bytes)))
			return oom();
		for (size_t i = 0; i < n; i++) {
			tn_scalar e = l->kind == L_LIST ? l->elems[i] : l->num;
			if (t->kind == TN_TYPE_INT)
				((int64_t *)tmp)[i] = e.v.i;
			else if (t->kind == TN_TYPE_FLOAT)
				((double *)tmp)[i] =
					e.kind == TN_SCALAR_INT ? (double)e.v.i : e.v.d;
			else
				((bool *)tmp)[i] = e.v.b;
		}
		if (t->kind == TN_TYPE_INT)
			r = tn_ivalue_int_list(n, tmp, ret);
		else if (t->kind == TN_TYPE_FLOAT)
			r = tn_ivalue_double_list(n, tmp, ret);
		else
			r = tn_ivalue_bool_list(n, tmp, ret);
		tn__free(tmp);
		return r ? oom() : 0;
	}
	switch (t->kind) {
	case TN_TYPE_INT:
		if (l->kind != L_INT)
			return 1;
		*ret = tn_ivalue_int(l->num.v.i);
		return 0;
	case TN_TYPE_FLOAT:
		if (l->kind != L_INT && l->kind != L_DOUBLE)
			return 1;
		*ret = tn_ivalue_double(l->kind == L_INT ? (double)l->num.v.i : l->num.v.d);
		return 0;
	case TN_TYPE_BOOL:
		if (l->kind != L_BOOL)
			return 1;
		*ret = tn_ivalue_bool(l->num.v.b);
		return 0;
	case TN_TYPE_SCALAR:
		if (l->kind != L_INT && l->kind != L_DOUBLE && l->kind != L_BOOL)
			return 1;
		*ret = tn_ivalue_scalar(l->num);
		return 0;
	case TN_TYPE_STR:
		if (l->kind != L_STRING)
			return 1;
		return tn_ivalue_string(l->str.buf, ret) ? oom() : 0;
	case TN_TYPE_SCALAR_TYPE: {
		char name[32];
		enum tn_dtype d;
		if (l->kind != L_IDENT || l->len >= sizeof(name))
			return 1;
		memcpy(name, l->start, l->len);
		name[l->len] = '\0';
		if (tn_dtype_from_name(name, &d))
			return 1;
		*ret = tn_ivalue_dtype(d);
		return 0;
	}
	case TN_TYPE_MEMORY_FORMAT:
		for (size_t i = 0; i < TN_ARRAY_SIZE(memory_format_names); i++) {
			if (l->kind == L_IDENT && literal_is(l, memory_format_names[i])) {
				*ret = tn_ivalue_memory_format((enum tn_memory_format)i);
				return 0;
			}
		}
		return 1;
	case TN_TYPE_LAYOUT:
		for (size_t i = 0; i < TN_ARRAY_SIZE(layout_names); i++) {
			if (l->kind == L_IDENT && literal_is(l, layout_names[i])) {
				*ret = tn_ivalue_layout((enum tn_layout)i);
				return 0;
			}
		}
		return 1;
	case TN_TYPE_DEVICE: {
		tn_device dev;
		/* A NUL inside the string cannot occur: no escape produces one. */
		if (l->kind != L_STRING || !parse_device(l->str.buf, &dev))
			return 1;
		*ret = tn_ivalue_device(dev);
		return 0;
	}
	default: /* Tensor: only None */
		return 1;
	}
}

static int parse_default(struct parser *ps, tn_schema_arg *a)
{
	struct literal l = { 0 };
	char type[64], buf[QUOTE_BUF];
	int r;

	if (!(r = parse_literal(ps, a, &l))) {
		r = literal_value(&l, a, &a->default_value);
		if (r == 1) {
			tn__type_format(&a->type, type, sizeof(type));
			r = perr(ps, l.start,
				 "default value for argument '%s' does not fit type '%s': %s",
				 a->name, type, escape(buf, sizeof(buf), l.start, l.len, false));
		} else if (r == 0) {
			a->has_default = true;
		}
	}
	literal_free(&l);
	return r;
}

/* ---- arguments and returns ------------------------------------------------------------------ */

static int parse_arg(struct parser *ps, bool kwarg_only)
{
	tn_schema_arg *a = new_arg(ps, false);
	struct token t;
	int r;

	if (!a)
		return oom();
	a->kwarg_only = kwarg_only;
	if ((r = parse_type(ps, a, "a type")))
		return r;
	t = peek(ps);
	if (t.kind != T_IDENT)
		return expected(ps, t, "an argument name");
	take(ps, t);
	for (size_t i = 0; i + 1 < ps->s->num_args; i++) {
		const char *other = ps->s->args[i].name;
		if (strlen(other) == t.len && memcmp(other, t.s, t.len) == 0)
			return perr(ps, t.s, "duplicate argument name '%.*s'", (int)t.len, t.s);
	}
	if (!(a->name = dupn(t.s, t.len)))
		return oom();
	t = peek(ps);
	if (is_punct(t, "=")) {
		take(ps, t);
		return parse_default(ps, a);
	}
	return 0;
}

static int parse_args(struct parser *ps)
{
	struct token t = peek(ps), star = { T_END, NULL, 0 };
	bool after_star = false;
	int r;

	take(ps, t); /* '(' */
	t = peek(ps);
	if (is_punct(t, ")")) {
		take(ps, t);
		return 0;
	}
	for (;;) {
		t = peek(ps);
		if (is_punct(t, "*")) {
			if (star.s)
				return perr(ps, t.s,
					    "a second '*' in the arguments (the first is at column "
					    "%zu)",
					    (size_t)(star.s - ps->src) + 1);
			star = t;
			take(ps, t);
		} else {
			if ((r = parse_arg(ps, star.s != NULL)))
				return r;
			after_star = star.s != NULL;
		}
		t = peek(ps);
		if (is_punct(t, ")")) {
			take(ps, t);
			break;
		}
		if (!is_punct(t, ","))
			return expected(ps, t, "',' or ')'");
		take(ps, t);
	}
	if (star.s && !after_star)
		return perr(ps, star.s, "'*' must be followed by keyword-only arguments");
	return 0;
}

static int parse_return(struct parser *ps)
{
	tn_schema_arg *a;
	struct token t = peek(ps);
	int r;

	if (is_punct(t, "*"))
		return perr(ps, t.s, "'*' is not allowed in the returns");
	if (!(a = new_arg(ps, true)))
		return oom();
	if ((r = parse_type(ps, a, "a return type")))
		return r;
	t = peek(ps);
	if (t.kind == T_IDENT) {
		take(ps, t);
		for (size_t i = 0; i + 1 < ps->s->num_returns; i++) {
			const char *other = ps->s->returns[i].name;
			if (other && strlen(other) == t.len && memcmp(other, t.s, t.len) == 0)
				return perr(ps, t.s, "duplicate return name '%.*s'", (int)t.len,
					    t.s);
		}
		if (!(a->name = dupn(t.s, t.len)))
			return oom();
		t = peek(ps);
	}
	if (is_punct(t, "="))
		return perr(ps, t.s, "a return cannot have a default value");
	return 0;
}

static int parse_returns(struct parser *ps)
{
	struct token t = peek(ps);
	int r;

	if (!is_punct(t, "->"))
		return expected(ps, t, "'->' after the arguments");
	take(ps, t);
	t = peek(ps);
	if (!is_punct(t, "("))
		return parse_return(ps);
	take(ps, t);
	t = peek(ps);
	if (is_punct(t, ")")) {
		take(ps, t);
		return 0;
	}
	for (;;) {
		if ((r = parse_return(ps)))
			return r;
		t = peek(ps);
		if (is_punct(t, ")")) {
			take(ps, t);
			return 0;
		}
		if (!is_punct(t, ","))
			return expected(ps, t, "',' or ')'");
		take(ps, t);
	}
}

static int parse(const char *text, bool with_name, tn_schema **ret, const char *who)
{
	struct parser ps = { text, text, NULL, 0, 0 };
	struct token t;
	int r;

	if (!text || !ret)
		return tn__error(TN_EINVAL, "%s: NULL argument", who);
	if (!(ps.s = tn__calloc(1, sizeof(*ps.s))))
		return oom();
	if (with_name) {
		if ((r = parse_name(&ps)))
			goto fail;
	} else if (!(ps.s->name = dupn("", 0)) || !(ps.s->overload = dupn("", 0))) {
		r = oom();
		goto fail;
	}
	t = peek(&ps);
	if (!is_punct(t, "(")) {
		r = expected(&ps, t,
			     with_name ? "'(' after the operator name" : "'(' to start a signature");
		goto fail;
	}
	if ((r = parse_args(&ps)) || (r = parse_returns(&ps)))
		goto fail;
	t = peek(&ps);
	if (t.kind != T_END) {
		char buf[QUOTE_BUF];
		r = perr(&ps, t.s, "unexpected %s after the returns", show(buf, sizeof(buf), t));
		goto fail;
	}
	if (!(ps.s->text = format_schema(ps.s))) {
		r = oom();
		goto fail;
	}
	*ret = ps.s;
	return 0;
fail:
	tn_schema_free(ps.s);
	return r;
}

TN_EXPORT int tn_schema_parse(const char *text, tn_schema **ret_schema)
{
	return parse(text, true, ret_schema, "tn_schema_parse");
}

int tn__schema_parse_signature(const char *text, tn_schema **ret)
{
	return parse(text, false, ret, "tn__schema_parse_signature");
}

/* ---- accessors ------------------------------------------------------------------------------ */

TN_EXPORT const char *tn_schema_name(const tn_schema *schema)
{
	return schema ? schema->name : NULL;
}

TN_EXPORT const char *tn_schema_overload(const tn_schema *schema)
{
	return schema ? schema->overload : NULL;
}

TN_EXPORT size_t tn_schema_num_args(const tn_schema *schema)
{
	return schema ? schema->num_args : 0;
}

TN_EXPORT const tn_schema_arg *tn_schema_arg_at(const tn_schema *schema, size_t index)
{
	return schema && index < schema->num_args ? &schema->args[index] : NULL;
}

TN_EXPORT size_t tn_schema_num_returns(const tn_schema *schema)
{
	return schema ? schema->num_returns : 0;
}

TN_EXPORT const tn_schema_arg *tn_schema_return_at(const tn_schema *schema, size_t index)
{
	return schema && index < schema->num_returns ? &schema->returns[index] : NULL;
}

TN_EXPORT const char *tn_schema_str(const tn_schema *schema)
{
	return schema ? schema->text : NULL;
}

/* ---- type checks --------------------------------------------------------------------------- */

static bool scalar_kind_is(const tn_ivalue *v, enum tn_scalar_kind k)
{
	return v->tag == TN_IVALUE_SCALAR && v->aux == (uint32_t)k;
}

/* Whether @v fits the element type of @t (ignoring list-ness and optional). */
static bool fits_elem(const tn_ivalue *v, enum tn_type_kind kind)
{
	switch (kind) {
	case TN_TYPE_TENSOR:
		return v->tag == TN_IVALUE_TENSOR;
	case TN_TYPE_INT:
		return v->tag == TN_IVALUE_INT || scalar_kind_is(v, TN_SCALAR_INT);
	case TN_TYPE_FLOAT:
		return v->tag == TN_IVALUE_DOUBLE || v->tag == TN_IVALUE_INT ||
		       scalar_kind_is(v, TN_SCALAR_DOUBLE) || scalar_kind_is(v, TN_SCALAR_INT);
	case TN_TYPE_BOOL:
		return v->tag == TN_IVALUE_BOOL || scalar_kind_is(v, TN_SCALAR_BOOL);
	case TN_TYPE_SCALAR:
		return v->tag == TN_IVALUE_INT || v->tag == TN_IVALUE_DOUBLE ||
		       v->tag == TN_IVALUE_BOOL ||
		       (v->tag == TN_IVALUE_SCALAR && v->aux <= TN_SCALAR_DOUBLE);
	case TN_TYPE_STR:
		return v->tag == TN_IVALUE_STRING;
	case TN_TYPE_SCALAR_TYPE:
		return v->tag == TN_IVALUE_DTYPE;
	case TN_TYPE_DEVICE:
		return v->tag == TN_IVALUE_DEVICE;
	case TN_TYPE_LAYOUT:
		return v->tag == TN_IVALUE_LAYOUT;
	case TN_TYPE_MEMORY_FORMAT:
		return v->tag == TN_IVALUE_MEMORY_FORMAT;
	case TN_TYPE_GENERATOR:
		return v->tag == TN_IVALUE_GENERATOR;
	default:
		return false;
	}
}

bool tn__ivalue_fits(const tn_ivalue *v, const tn_type *t)
{
	uint32_t want;
	size_t n;

	if (!v || !t)
		return false;
	if (v->tag == TN_IVALUE_NONE)
		return t->optional;
	if (v->tag == TN_IVALUE_STRING && !v->u.string)
		return false;
	if (!t->is_list)
		return fits_elem(v, t->kind);
	switch (t->kind) {
	case TN_TYPE_INT:
		/* A single int broadcasts to a sized list, as PyTorch's int[2] stride=1. */
		if (t->list_size > 0 && fits_elem(v, TN_TYPE_INT))
			return true;
		want = TN_IVALUE_INT_LIST;
		break;
	case TN_TYPE_FLOAT: want = TN_IVALUE_DOUBLE_LIST; break;
	case TN_TYPE_BOOL: want = TN_IVALUE_BOOL_LIST; break;
	case TN_TYPE_TENSOR: want = TN_IVALUE_TENSOR_LIST; break;
	default: return false;
	}
	if (v->tag != want || !v->u.list) /* a hand-built value may lack its payload */
		return false;
	/* Any length: N in T[N] only broadcasts a single value (and sizes defaults); PyTorch
	 * passes sum's int[1] dim a list of several dims. */
	n = tn__ivalue_list_len(v);
	if (want == TN_IVALUE_TENSOR_LIST && !t->elem_optional) {
		for (size_t i = 0; i < n; i++)
			if (!tn__ivalue_list_tensors(v)[i])
				return false;
	}
	return true;
}

static bool types_equal(const tn_type *a, const tn_type *b)
{
	return a->kind == b->kind && a->is_list == b->is_list &&
	       a->elem_optional == b->elem_optional && a->optional == b->optional &&
	       a->list_size == b->list_size;
}

static bool why(char *buf, size_t len, const char *fmt, ...) TN_PRINTF(3, 4);
static bool why(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (buf && len) {
		va_start(ap, fmt);
		vsnprintf(buf, len, fmt, ap);
		va_end(ap);
	}
	return false;
}

static bool list_types_equal(const tn_schema_arg *a, size_t na, const tn_schema_arg *b,
			     size_t nb, const char *what, char *buf, size_t len)
{
	char ta[64], tb[64];

	if (na != nb)
		return why(buf, len, "%zu %s%s against %zu", na, what, na == 1 ? "" : "s", nb);
	for (size_t i = 0; i < na; i++) {
		if (!types_equal(&a[i].type, &b[i].type)) {
			tn__type_format(&a[i].type, ta, sizeof(ta));
			tn__type_format(&b[i].type, tb, sizeof(tb));
			return why(buf, len, "%s %zu is '%s' in one and '%s' in the other", what,
				   i + 1, ta, tb);
		}
	}
	return true;
}

bool tn__schema_types_equal(const tn_schema *a, const tn_schema *b, char *buf, size_t len)
{
	if (!a || !b)
		return why(buf, len, "a schema is NULL");
	return list_types_equal(a->args, a->num_args, b->args, b->num_args, "argument", buf,
				len) &&
	       list_types_equal(a->returns, a->num_returns, b->returns, b->num_returns, "return",
				buf, len);
}
