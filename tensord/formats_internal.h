/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by safetensors.c and npy.c (formats.c); not for the daemon's other files.
 */
#ifndef TENSORD_FORMATS_INTERNAL_H
#define TENSORD_FORMATS_INTERNAL_H

#include "internal.h" /* tn__error, tn__malloc: libtensor/internal.h */
#include "formats.h"

/* The most bytes of an untrusted string quoted in a message, escapes included. */
#define TN__FMT_SHOW_MAX 80

/*
 * A cursor over untrusted header bytes s[0, end). Messages read "FORMAT: byte N: ...", N being
 * the file offset base + pos.
 */
struct tn__fmt_cursor {
	const unsigned char *s;
	size_t pos, end;
	size_t base;	    /* the file offset of s[0] */
	const char *format; /* "safetensors" or "npy" */
};

/* Fail with @code and a message at the cursor's byte; returns @code. */
int tn__fmt_fail(const struct tn__fmt_cursor *c, int code, const char *fmt, ...) TN_PRINTF(3, 4);

/* The byte at the cursor, or -1 at the end. */
static inline int tn__fmt_peek(const struct tn__fmt_cursor *c)
{
	return c->pos < c->end ? c->s[c->pos] : -1;
}

/* What the cursor is at, for messages: "'x'", "byte 0x0a" or "the end of the header". */
const char *tn__fmt_found(const struct tn__fmt_cursor *c, char *buf, size_t cap);

/* Skip spaces, tabs, newlines and carriage returns (JSON's whitespace; numpy pads with
 * spaces and a newline). */
void tn__fmt_ws(struct tn__fmt_cursor *c);

/* Skip whitespace and the character @ch, or fail: "expected 'ch' @where, found ...". */
int tn__fmt_expect(struct tn__fmt_cursor *c, char ch, const char *where);

/* What tn__fmt_nbytes found wrong. */
enum {
	TN__FMT_OVERFLOW = 1,  /* numel * itemsize overflows 64 bits: a malformed header */
	TN__FMT_TOO_LARGE = 2, /* the strides would overflow int64: more than libtensor holds */
};

/*
 * The bytes of a tensor of @ndim dims @sizes (each >= 0) and @dtype: 0 and *ret_nbytes, or
 * TN__FMT_OVERFLOW or TN__FMT_TOO_LARGE.
 */
int tn__fmt_nbytes(int ndim, const int64_t *sizes, enum tn_dtype dtype, uint64_t *ret_nbytes);

/* The index of the first byte of @text that does not begin a valid UTF-8 sequence (overlong
 * forms and surrogates refused), or @len when all of it is valid. */
size_t tn__fmt_utf8_invalid(const void *text, size_t len);

/* Quote @len untrusted bytes for a message: printable ASCII as is (a JSON name as the header
 * spells it, escapes included), the rest as \xNN, cut with "..." to fit @cap. Returns @buf. */
const char *tn__fmt_show(char *buf, size_t cap, const void *bytes, size_t len);

#endif /* TENSORD_FORMATS_INTERNAL_H */
