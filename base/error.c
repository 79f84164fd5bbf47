/* SPDX-License-Identifier: MIT */
/*
 * Error codes and the thread-local last-error message.
 *
 * The library never prints: a failing call formats its explanation into a per-thread buffer
 * that the caller reads with tn_last_error().
 */
#include <stdio.h>
#include <string.h>

#include <tensor/version.h>

#include "base.h"

#define TN_ERROR_MSG_MAX 1024

static _Thread_local char last_error[TN_ERROR_MSG_MAX];
static _Thread_local int last_code;
static _Thread_local uint64_t error_seq;

TN_EXPORT const char *tn_strerror(int code)
{
	if (code > 0)
		code = -code;
	switch (code) {
#define TN_X_(name, value, desc) \
	case value:              \
		return desc;
		TN_ERROR_LIST(TN_X_)
#undef TN_X_
	default:
		return "unknown error";
	}
}

TN_EXPORT const char *tn_last_error(void)
{
	return last_error;
}

TN_EXPORT void tn_clear_error(void)
{
	last_error[0] = '\0';
}

int tn__verror(int code, const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	last_code = code;
	error_seq++;
	return code;
}

int tn__error(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tn__verror(code, fmt, ap);
	va_end(ap);
	return code;
}

int tn__last_error_code(void)
{
	return last_error[0] ? last_code : 0;
}

uint64_t tn__error_seq(void)
{
	return error_seq;
}

void tn__error_save(struct tn__saved_error *s)
{
	memcpy(s->message, last_error, sizeof(s->message));
	s->code = last_code;
}

void tn__error_restore(const struct tn__saved_error *s)
{
	memcpy(last_error, s->message, sizeof(last_error));
	last_code = s->code;
}

void tn__format_shape(char *buf, size_t len, int n, const int64_t *values)
{
	size_t pos = 0;
	int w;

	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return;
	}
	buf[pos++] = '[';
	for (int i = 0; i < n; i++) {
		w = snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)values[i]);
		if (w < 0 || (size_t)w >= len - pos - 1) {
			/* Too long: end with "...]" inside the buffer. */
			pos = len - 5;
			memcpy(buf + pos, "...]", 5);
			return;
		}
		pos += (size_t)w;
	}
	buf[pos++] = ']';
	buf[pos] = '\0';
}

TN_EXPORT const char *tn_version(void)
{
	return PACKAGE_VERSION;
}
