/* SPDX-License-Identifier: MIT */
/*
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for the tests of
 * tensord's metrics: every line is a "# HELP", a "# TYPE" or a sample; metric and label names
 * match [a-zA-Z_:][a-zA-Z0-9_:]* ([a-zA-Z_][a-zA-Z0-9_]* for labels); label values are quoted
 * with only \\, \" and \n escaped; values are floats (or +Inf, -Inf, NaN); each family has at
 * most one HELP and one TYPE, both before its samples, and its samples come together; no
 * sample (name and labels) appears twice; a counter's samples are >= 0; a histogram's buckets
 * are cumulative, their "le" bounds increase to "+Inf", whose count equals its _count, and it
 * has a _sum. The text ends with a line feed.
 */
#ifndef TN_TESTS_PROM_PARSE_H
#define TN_TESTS_PROM_PARSE_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROM_MAX_FAMILIES 256
#define PROM_MAX_SAMPLES 8192

struct prom_sample {
	char name[128];
	char labels[512]; /* as written, between the braces */
	double value;
};

struct prom_family {
	char name[128];
	char type[16]; /* "" until its TYPE line */
	bool help, has_samples, closed;
};

struct prom_doc {
	struct prom_family fam[PROM_MAX_FAMILIES];
	int nfam;
	struct prom_sample *samples;
	int nsamples;
	char why[256];
};

static bool prom_name_char(char c, bool first, bool colon)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':'))
		return true;
	return !first && c >= '0' && c <= '9';
}

/* The length of a name at @s (0: none). */
static size_t prom_name_len(const char *s, bool colon)
{
	size_t n = 0;
	while (prom_name_char(s[n], n == 0, colon))
		n++;
	return n;
}

static struct prom_family *prom_family_of(struct prom_doc *d, const char *name, size_t len)
{
	for (int i = 0; i < d->nfam; i++)
		if (strlen(d->fam[i].name) == len && !strncmp(d->fam[i].name, name, len))
			return &d->fam[i];
	return NULL;
}

/* The family a sample named @name belongs to: itself, or a histogram's or summary's base name
 * without _bucket, _sum or _count. */
static struct prom_family *prom_sample_family(struct prom_doc *d, const char *name)
{
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };
	size_t n = strlen(name);
	for (int k = 0; k < 3; k++) {
		size_t m = strlen(sfx[k]);
		if (n > m && !strcmp(name + n - m, sfx[k])) {
			struct prom_family *f = prom_family_of(d, name, n - m);
			if (f && (!strcmp(f->type, "histogram") || !strcmp(f->type, "summary")))
				return f;
		}
	}
	return prom_family_of(d, name, n);
}

static int prom_fail(struct prom_doc *d, int line, const char *what)
{
	snprintf(d->why, sizeof(d->why), "line %d: %s", line, what);
	return -1;
}

/* Labels at *@p (after '{'), up to and past '}'; copied into @out. */
static int prom_labels(struct prom_doc *d, int line, const char **p, char *out, size_t cap)
{
	const char *s = *p, *start = s;
	for (;;) {
		if (*s == '}')
			break;
		size_t n = prom_name_len(s, false);
		if (!n)
			return prom_fail(d, line, "bad label name");
		s += n;
		if (*s++ != '=' || *s++ != '"')
			return prom_fail(d, line, "label without =\"value\"");
		for (; *s != '"'; s++) {
			if (!*s || *s == '\n')
				return prom_fail(d, line, "unterminated label value");
			if (*s == '\\') {
				s++;
				if (*s != '\\' && *s != '"' && *s != 'n')
					return prom_fail(d, line, "bad escape in a label value");
			}
		}
		s++;
		if (*s == ',')
			s++;
		else if (*s != '}')
			return prom_fail(d, line, "labels not separated by ','");
	}
	size_t len = (size_t)(s - start);
	if (len >= cap)
		return prom_fail(d, line, "labels too long");
	memcpy(out, start, len);
	out[len] = 0;
	*p = s + 1;
	return 0;
}

static int prom_value(const char *s, double *ret)
{
	if (!strcmp(s, "+Inf"))
		*ret = INFINITY;
	else if (!strcmp(s, "-Inf"))
		*ret = -INFINITY;
	else if (!strcmp(s, "NaN"))
		*ret = NAN;
	else {
		char *end;
		*ret = strtod(s, &end);
		if (end == s || *end)
			return -1;
	}
	return 0;
}

/* The "le" of a bucket's labels, and the labels without it (for grouping). */
static int prom_le(const char *labels, double *le, char *rest, size_t cap)
{
	const char *p = strstr(labels, "le=\"");
	if (!p || (p != labels && p[-1] != ','))
		return -1;
	const char *v = p + 4, *q = strchr(v, '"');
	if (!q || q - v >= 32)
		return -1;
	char num[32];
	memcpy(num, v, (size_t)(q - v));
	num[q - v] = 0;
	if (prom_value(num, le))
		return -1;
	size_t a = (size_t)(p - labels);
	if (q[1] != ',' && a > 0)
		a--; /* le was last: drop the comma before it */
	snprintf(rest, cap, "%.*s%s", (int)a, labels, q[1] == ',' ? q + 2 : q + 1);
	return 0;
}

/* Histogram rules over the parsed samples of family @f. */
static int prom_check_histogram(struct prom_doc *d, const struct prom_family *f)
{
	char bucket[160], sum[160], count[160];
	snprintf(bucket, sizeof(bucket), "%s_bucket", f->name);
	snprintf(sum, sizeof(sum), "%s_sum", f->name);
	snprintf(count, sizeof(count), "%s_count", f->name);
	for (int i = 0; i < d->nsamples; i++) {
		const struct prom_sample *s = &d->samples[i];
		if (strcmp(s->name, count))
			continue;
		/* Its buckets: the same labels plus le, in order. */
		double last_le = -INFINITY, last_v = 0;
		bool inf = false, has_sum = false;
		for (int k = 0; k < d->nsamples; k++) {
			const struct prom_sample *b = &d->samples[k];
			char rest[512];
			double le;
			if (!strcmp(b->name, sum) && !strcmp(b->labels, s->labels))
				has_sum = true;
			if (strcmp(b->name, bucket))
				continue;
			if (prom_le(b->labels, &le, rest, sizeof(rest)))
				return prom_fail(d, 0, "a bucket without a good le label");
			if (strcmp(rest, s->labels))
				continue;
			if (!(le > last_le) || b->value < last_v)
				return prom_fail(d, 0, "buckets not in increasing le or not cumulative");
			last_le = le;
			last_v = b->value;
			if (isinf(le)) {
				inf = true;
				if (b->value != s->value)
					return prom_fail(d, 0, "the +Inf bucket differs from _count");
			}
		}
		if (!inf || !has_sum)
			return prom_fail(d, 0, "a histogram without its +Inf bucket or its _sum");
	}
	return 0;
}

/* Parse @text into @d (whose samples the caller frees with prom_free); 0, or -1 with d->why. */
static int prom_parse(const char *text, struct prom_doc *d)
{
	memset(d, 0, sizeof(*d));
	d->samples = calloc(PROM_MAX_SAMPLES, sizeof(*d->samples));
	if (!d->samples)
		return prom_fail(d, 0, "out of memory");
	size_t tl = strlen(text);
	if (!tl || text[tl - 1] != '\n')
		return prom_fail(d, 0, "the text does not end with a line feed");
	struct prom_family *current = NULL;
	int line = 0;
	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = (size_t)(eol - p);
		char buf[1024];
		line++;
		if (len >= sizeof(buf))
			return prom_fail(d, line, "line too long");
		memcpy(buf, p, len);
		buf[len] = 0;
		p = eol + 1;
		if (!len)
			return prom_fail(d, line, "empty line");
		if (buf[0] == '#') {
			bool help = !strncmp(buf, "# HELP ", 7), type = !strncmp(buf, "# TYPE ", 7);
			if (!help && !type)
				return prom_fail(d, line, "a comment that is neither HELP nor TYPE");
			const char *nm = buf + 7;
			size_t n = prom_name_len(nm, true);
			if (!n || nm[n] != ' ' || !nm[n + 1])
				return prom_fail(d, line, "HELP or TYPE without a name and text");
			struct prom_family *f = prom_family_of(d, nm, n);
			if (!f) {
				if (d->nfam == PROM_MAX_FAMILIES)
					return prom_fail(d, line, "too many families");
				f = &d->fam[d->nfam++];
				memcpy(f->name, nm, n);
			}
			if (f->has_samples)
				return prom_fail(d, line, "HELP or TYPE after the family's samples");
			if (help) {
				if (f->help)
					return prom_fail(d, line, "a second HELP");
				f->help = true;
			} else {
				const char *t = nm + n + 1;
				if (f->type[0])
					return prom_fail(d, line, "a second TYPE");
				if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram") &&
				    strcmp(t, "summary") && strcmp(t, "untyped"))
					return prom_fail(d, line, "an unknown TYPE");
				snprintf(f->type, sizeof(f->type), "%s", t);
			}
			continue;
		}
		if (d->nsamples == PROM_MAX_SAMPLES)
			return prom_fail(d, line, "too many samples");
		struct prom_sample *s = &d->samples[d->nsamples];
		size_t n = prom_name_len(buf, true);
		if (!n || n >= sizeof(s->name))
			return prom_fail(d, line, "a sample without a good metric name");
		memcpy(s->name, buf, n);
		const char *q = buf + n;
		if (*q == '{') {
			q++;
			if (prom_labels(d, line, &q, s->labels, sizeof(s->labels)))
				return -1;
		}
		if (*q != ' ' || prom_value(q + 1, &s->value))
			return prom_fail(d, line, "a sample without a good value");
		struct prom_family *f = prom_sample_family(d, s->name);
		if (!f || !f->type[0])
			return prom_fail(d, line, "a sample of a family without TYPE");
		if (f->closed)
			return prom_fail(d, line, "a family's samples are not together");
		if (current && current != f)
			current->closed = true;
		current = f;
		f->has_samples = true;
		if (!strcmp(f->type, "counter") && !(s->value >= 0))
			return prom_fail(d, line, "a negative counter");
		for (int i = 0; i < d->nsamples; i++)
			if (!strcmp(d->samples[i].name, s->name) &&
			    !strcmp(d->samples[i].labels, s->labels))
				return prom_fail(d, line, "a sample given twice");
		d->nsamples++;
	}
	for (int i = 0; i < d->nfam; i++)
		if (!strcmp(d->fam[i].type, "histogram") && prom_check_histogram(d, &d->fam[i]))
			return -1;
	return 0;
}

/* The value of the sample @name{@labels} ("" for none), or NAN when absent. */
static double prom_get(const struct prom_doc *d, const char *name, const char *labels)
{
	for (int i = 0; i < d->nsamples; i++)
		if (!strcmp(d->samples[i].name, name) && !strcmp(d->samples[i].labels, labels))
			return d->samples[i].value;
	return NAN;
}

static void prom_free(struct prom_doc *d)
{
	free(d->samples);
	d->samples = NULL;
}

#endif /* TN_TESTS_PROM_PARSE_H */
