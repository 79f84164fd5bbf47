// SPDX-License-Identifier: MIT
/*
 * tensord's log: lines on stderr (with the time and the level) or syslog's daemon facility.
 * Log lines quote what clients chose (arena names, tensor names read from their files, paths,
 * program names, the messages of errors about them), so every control character of a line is
 * written as an escape (\n, \t, \xHH, and a backslash as \\): a name cannot end the line and
 * forge another one.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

#include "daemon.h"

static enum tnd_log_target log_target = TND_LOG_STDERR;
static enum tnd_log_level log_level = TND_LOG_INFO;

void tnd_log_setup(enum tnd_log_target target, enum tnd_log_level level)
{
	if (target == TND_LOG_SYSLOG && log_target != TND_LOG_SYSLOG)
		openlog("tensord", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_target = target;
	log_level = level;
}

/* Copy @src to @dst (@cap bytes, NUL-terminated) with control characters and backslashes
 * escaped; a line too long ends where the escapes stop fitting. */
void tnd_log_escape(char *dst, size_t cap, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
		char e[5];
		size_t k = 0;
		unsigned char ch = *p;
		if (ch == '\\') {
			e[k++] = '\\';
			e[k++] = '\\';
		} else if (ch == '\n' || ch == '\t' || ch == '\r') {
			e[k++] = '\\';
			e[k++] = ch == '\n' ? 'n' : ch == '\t' ? 't' : 'r';
		} else if (ch < 0x20 || ch == 0x7f) {
			e[k++] = '\\';
			e[k++] = 'x';
			e[k++] = hex[ch >> 4];
			e[k++] = hex[ch & 15];
		} else {
			e[k++] = (char)ch;
		}
		if (n + k >= cap)
			break;
		for (size_t i = 0; i < k; i++)
			dst[n++] = e[i];
	}
	dst[n] = 0;
}

void tnd_log(enum tnd_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	if (level > log_level)
		return;
	char raw[1024], msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	tnd_log_escape(msg, sizeof(msg), raw);
	if (log_target == TND_LOG_SYSLOG) {
		syslog(prio[level], "%s", msg);
	} else {
		char stamp[64];
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		size_t n = strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
		snprintf(stamp + n, sizeof(stamp) - n, ".%03ld", ts.tv_nsec / 1000000);
		fprintf(stderr, "%s tensord[%s] %s\n", stamp, names[level], msg);
	}
}
