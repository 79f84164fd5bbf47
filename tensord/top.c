// SPDX-License-Identifier: MIT
/*
 * tensorctl top: a live view of the daemon, refreshed like top(1): per arena its memory (used of
 * the heap, held, pinned, evictable, on disk), names and clients, and the rates of evictions,
 * spills and restores; per attached process the bytes it holds, its lookups and its requests
 * per second. Each frame is one METRICS request, read as the Prometheus text it is (the
 * figures of tensorctl metrics and of tensord's HTTP endpoint); rates are the differences of
 * the counters between two frames over the time between them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tensor.h>
#include <tensor/tensord.h>

#include "top.h"

struct sample {
	char name[96];
	char labels[320];
	double v;
};

struct frame {
	struct sample *s;
	size_t n, cap;
	double t; /* CLOCK_MONOTONIC seconds */
};

static void frame_free(struct frame *f)
{
	free(f->s);
	memset(f, 0, sizeof(*f));
}

/* The sample lines of @text (comments skipped; a line that does not parse is skipped too:
 * the daemon's text is checked by the tests, this only shows it). */
static int frame_parse(const char *text, struct frame *f)
{
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		if (l && *p != '#') {
			struct sample s = { 0 };
			size_t k = 0;
			while (k < l && p[k] != '{' && p[k] != ' ' && k + 1 < sizeof(s.name)) {
				s.name[k] = p[k];
				k++;
			}
			if (k < l && p[k] == '{') {
				size_t start = ++k, depth_q = 0;
				while (k < l && !(p[k] == '}' && !depth_q)) {
					if (p[k] == '\\')
						k++;
					else if (p[k] == '"')
						depth_q ^= 1;
					k++;
				}
				size_t ll = k - start < sizeof(s.labels) - 1 ? k - start
									    : sizeof(s.labels) - 1;
				memcpy(s.labels, p + start, ll);
				k++;
			}
			char *end;
			s.v = strtod(p + k, &end);
			if (end != p + k) {
				if (f->n == f->cap) {
					size_t nc = f->cap ? 2 * f->cap : 256;
					struct sample *t = realloc(f->s, nc * sizeof(*t));
					if (!t)
						return TN_ENOMEM;
					f->s = t;
					f->cap = nc;
				}
				f->s[f->n++] = s;
			}
		}
		p += l + (nl != NULL);
	}
	return 0;
}

/* Whether @labels has key="value" (exactly). */
static bool has_label(const char *labels, const char *key, const char *value)
{
	char want[256];
	snprintf(want, sizeof(want), "%s=\"%s\"", key, value);
	for (const char *p = labels; (p = strstr(p, want)); p++)
		if ((p == labels || p[-1] == ',') && (p[strlen(want)] == ',' || !p[strlen(want)]))
			return true;
	return false;
}

/* The value of label @key in @labels, into @out. */
static bool label(const char *labels, const char *key, char *out, size_t cap)
{
	char want[64];
	snprintf(want, sizeof(want), "%s=\"", key);
	for (const char *p = labels; (p = strstr(p, want)); p++) {
		if (p != labels && p[-1] != ',')
			continue;
		p += strlen(want);
		size_t n = 0;
		while (*p && *p != '"' && n + 1 < cap) {
			if (*p == '\\' && p[1])
				p++;
			out[n++] = *p++;
		}
		out[n] = 0;
		return true;
	}
	return false;
}

/* The sum of @name's samples whose labels have each given pair (NULL keys end the list). */
static double get(const struct frame *f, const char *name, const char *k1, const char *v1,
		  const char *k2, const char *v2)
{
	double sum = 0;
	bool any = false;
	for (size_t i = 0; f && i < f->n; i++) {
		const struct sample *s = &f->s[i];
		if (strcmp(s->name, name) || (k1 && !has_label(s->labels, k1, v1)) ||
		    (k2 && !has_label(s->labels, k2, v2)))
			continue;
		sum += s->v;
		any = true;
	}
	return any ? sum : NAN;
}

/* Per second between the two frames, or NAN for the first. */
static double rate(const struct frame *prev, const struct frame *cur, const char *name,
		   const char *k1, const char *v1, const char *k2, const char *v2)
{
	if (!prev || !prev->n || cur->t <= prev->t)
		return NAN;
	double a = get(prev, name, k1, v1, k2, v2), b = get(cur, name, k1, v1, k2, v2);
	if (isnan(a) || isnan(b) || b < a)
		return NAN;
	return (b - a) / (cur->t - prev->t);
}

static const char *size_text(double b, char *buf, size_t cap)
{
	static const char *const u[] = { "B", "K", "M", "G", "T" };
	if (isnan(b)) {
		snprintf(buf, cap, "-");
		return buf;
	}
	int i = 0;
	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, cap, i ? "%.1f%s" : "%.0f%s", b, u[i]);
	return buf;
}

static const char *rate_text(double r, char *buf, size_t cap)
{
	if (isnan(r))
		snprintf(buf, cap, "-");
	else if (r >= 100)
		snprintf(buf, cap, "%.0f", r);
	else
		snprintf(buf, cap, "%.1f", r);
	return buf;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The distinct values of label @key among @name's samples, in order of appearance. */
static size_t distinct(const struct frame *f, const char *name, const char *key,
		       char (*out)[TN_ARENA_FILE_NAME_MAX + 1], size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n && n < cap; i++) {
		char v[TN_ARENA_FILE_NAME_MAX + 1];
		if (strcmp(f->s[i].name, name) || !label(f->s[i].labels, key, v, sizeof(v)))
			continue;
		bool seen = false;
		for (size_t k = 0; k < n && !seen; k++)
			seen = !strcmp(out[k], v);
		if (!seen)
			strcpy(out[n++], v);
	}
	return n;
}

#define TOP_MAX 256

static void render(FILE *o, const struct frame *prev, const struct frame *cur, double delay)
{
	char a[32], b[32], c[32], d[32], e[32], g[32], h[32], k[32], m[32];
	double started = get(cur, "tensord_start_time_seconds", NULL, NULL, NULL, NULL);
	double up = isnan(started) ? 0 : (double)time(NULL) - started;
	double req = rate(prev, cur, "tensord_requests_total", NULL, NULL, NULL, NULL);
	fprintf(o, "tensord up %dd %02d:%02d:%02d, %.0f connections, %.0f arenas, %s requests/s, "
		   "io_uring %.0f in flight, spills %s/s, restores %s/s (every %.1f s)\n",
		(int)(up / 86400), (int)fmod(up / 3600, 24), (int)fmod(up / 60, 60),
		(int)fmod(up, 60), get(cur, "tensord_connections", NULL, NULL, NULL, NULL),
		get(cur, "tensord_arenas", NULL, NULL, NULL, NULL), rate_text(req, a, sizeof(a)),
		get(cur, "tensord_uring_in_flight", NULL, NULL, NULL, NULL),
		rate_text(rate(prev, cur, "tensord_spills_total", NULL, NULL, NULL, NULL), b,
			  sizeof(b)),
		rate_text(rate(prev, cur, "tensord_restores_total", NULL, NULL, NULL, NULL), c,
			  sizeof(c)),
		delay);
	static char names[TOP_MAX][TN_ARENA_FILE_NAME_MAX + 1];
	size_t n = distinct(cur, "tensord_arena_used_bytes", "arena", names, TOP_MAX);
	fprintf(o, "\n%-20s %8s %8s %8s %8s %8s %8s %6s %4s %8s %8s %8s\n", "ARENA", "USED", "HEAP",
		"HELD", "PINNED", "EVICT", "ON-DISK", "NAMES", "CLI", "EVICT/s", "SPILL/s",
		"RESTORE/s");
	for (size_t i = 0; i < n; i++) {
		const char *ar = names[i];
#define A(m) get(cur, m, "arena", ar, NULL, NULL)
#define R(m) rate(prev, cur, m, "arena", ar, NULL, NULL)
		fprintf(o, "%-20.20s %8s %8s %8s %8s %8s %8s %6.0f %4.0f %8s %8s %8s\n", ar,
			size_text(A("tensord_arena_used_bytes"), a, sizeof(a)),
			size_text(A("tensord_arena_heap_bytes"), b, sizeof(b)),
			size_text(A("tensord_arena_held_bytes"), c, sizeof(c)),
			size_text(A("tensord_arena_pinned_bytes"), d, sizeof(d)),
			size_text(A("tensord_arena_evictable_bytes"), e, sizeof(e)),
			size_text(A("tensord_arena_spilled_bytes"), g, sizeof(g)),
			A("tensord_arena_names"), A("tensord_arena_clients"),
			rate_text(R("tensord_arena_evictions_total"), h, sizeof(h)),
			rate_text(R("tensord_arena_spills_total"), k, sizeof(k)),
			rate_text(R("tensord_arena_restores_total"), m, sizeof(m)));
#undef A
#undef R
	}
	/* The attached processes: one line per (arena, slot). */
	fprintf(o, "\n%8s %-20s %4s %-16s %8s %10s %10s\n", "PID", "ARENA", "SLOT", "PROGRAM",
		"HELD", "LOOKUPS/s", "REQUESTS/s");
	for (size_t i = 0; i < cur->n; i++) {
		const struct sample *s = &cur->s[i];
		char ar[TN_ARENA_FILE_NAME_MAX + 1], pid[16], slot[16], prog[64] = "-";
		if (strcmp(s->name, "tensord_arena_client_held_bytes") ||
		    !label(s->labels, "arena", ar, sizeof(ar)) ||
		    !label(s->labels, "pid", pid, sizeof(pid)) ||
		    !label(s->labels, "slot", slot, sizeof(slot)))
			continue;
		for (size_t k2 = 0; k2 < cur->n; k2++)
			if (!strcmp(cur->s[k2].name, "tensord_client_requests_total") &&
			    has_label(cur->s[k2].labels, "pid", pid))
				label(cur->s[k2].labels, "program", prog, sizeof(prog));
		double lk = rate(prev, cur, "tensord_arena_client_lookups_total", "arena", ar, "slot",
				 slot);
		double rq = rate(prev, cur, "tensord_client_requests_total", "pid", pid, NULL, NULL);
		fprintf(o, "%8s %-20.20s %4s %-16.16s %8s %10s %10s\n", pid, ar, slot, prog,
			size_text(s->v, a, sizeof(a)), rate_text(lk, b, sizeof(b)),
			rate_text(rq, c, sizeof(c)));
	}
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int tnctl_top(tn_tensord *conn, int argc, char **argv)
{
	static const struct option o[] = { { "delay", 1, NULL, 'd' },
					   { "iterations", 1, NULL, 'n' }, { NULL, 0, NULL, 0 } };
	double delay = 2;
	long iterations = 0;
	int c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "d:n:", o, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'd':
			errno = 0;
			delay = strtod(optarg, &end);
			if (errno || *end || !(delay >= 0.05 && delay <= 3600)) {
				fprintf(stderr, "tensorctl: top: bad --delay \"%s\" (seconds, 0.05 to "
						"3600)\n", optarg);
				return 64;
			}
			break;
		case 'n':
			errno = 0;
			iterations = strtol(optarg, &end, 10);
			if (errno || *end || iterations < 1) {
				fprintf(stderr, "tensorctl: top: bad --iterations \"%s\" (1 or more)\n",
					optarg);
				return 64;
			}
			break;
		default: return 64;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "tensorctl: usage: top [--delay SECONDS] [--iterations N]\n");
		return 64;
	}
	bool tty = isatty(STDOUT_FILENO) && !iterations;
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct frame prev = { 0 }, cur = { 0 };
	int r = 0;
	for (long i = 0; !stop && (!iterations || i < iterations); i++) {
		if (i) {
			struct timespec ts = { (time_t)delay,
					       (long)((delay - (double)(time_t)delay) * 1e9) };
			while (nanosleep(&ts, &ts) && errno == EINTR && !stop) {
			}
			if (stop)
				break;
		}
		char *text;
		size_t len;
		if ((r = tn_tensord_metrics(conn, &text, &len))) {
			fprintf(stderr, "tensorctl: top: %s\n", tn_last_error());
			break;
		}
		cur.t = now_s();
		r = frame_parse(text, &cur);
		free(text);
		if (r) {
			fprintf(stderr, "tensorctl: top: out of memory\n");
			break;
		}
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (i)
			fputc('\n', stdout);
		render(stdout, &prev, &cur, delay);
		fflush(stdout);
		frame_free(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
	}
	frame_free(&prev);
	frame_free(&cur);
	return r ? 1 : 0;
}
