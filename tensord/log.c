// SPDX-License-Identifier: MIT
/* tensord's log: lines on stderr (with the time and the level) or syslog's daemon facility. */
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

void tnd_log(enum tnd_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	if (level > log_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (log_target == TND_LOG_SYSLOG) {
		vsyslog(prio[level], fmt, ap);
	} else {
		char line[1024];
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		int n = (int)strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
		n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ld tensord[%s] ",
			      ts.tv_nsec / 1000000, names[level]);
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		fprintf(stderr, "%s\n", line);
	}
	va_end(ap);
}
