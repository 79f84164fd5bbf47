// SPDX-License-Identifier: MIT
/*
 * The HTTP endpoint (metrics_http in tensord.conf): GET /metrics answers what `tensorctl metrics`
 * prints, in the Prometheus text exposition format, for a scraper. Off unless configured; a
 * bare port listens on 127.0.0.1 only.
 *
 * libmicrohttpd serves the connections on threads of its own (one per connection, at most
 * HTTP_CONNECTIONS at once, each dropped after HTTP_TIMEOUT_S idle). The figures belong to the
 * loop's thread, so a request does not read them: it asks the loop (a sequence number and the
 * event fd), and sleeps until the loop has rendered the text once more since the request came
 * (tnd_http_events); concurrent requests share one rendering. A loop that does not answer
 * within HTTP_WAIT_S (stopping, or stuck on an arena) gets the scraper a 503.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "daemon.h"

#define HTTP_CONNECTIONS 16
#define HTTP_TIMEOUT_S 10
#define HTTP_WAIT_S 5

static struct MHD_Daemon *mhd;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static uint64_t asked, answered; /* under lock */
static char *text;                /* the last rendering (under lock) */
static size_t text_len;
static bool stopping;
static _Atomic uint64_t scrapes, refused;

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result plain(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	atomic_fetch_add(&refused, 1);
	return reply(conn, status, "text/plain; charset=utf-8", (char *)msg, strlen(msg),
		     MHD_RESPMEM_PERSISTENT);
}

/* The loop's answer to a request made now: a copy of a rendering made after it, or NULL. */
static char *fresh_text(size_t *ret_len)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HTTP_WAIT_S;
	pthread_mutex_lock(&lock);
	uint64_t mine = ++asked;
	pthread_mutex_unlock(&lock);
	uint64_t one = 1;
	ssize_t n = write(tnd_d.event_fd, &one, sizeof(one));
	(void)n;
	char *copy = NULL;
	pthread_mutex_lock(&lock);
	while (answered < mine && !stopping)
		if (pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
			break;
	if (answered >= mine && text && (copy = malloc(text_len ? text_len : 1))) {
		memcpy(copy, text, text_len);
		*ret_len = text_len;
	}
	pthread_mutex_unlock(&lock);
	return copy;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **req)
{
	(void)cls;
	(void)version;
	(void)upload;
	/* The first call is for the headers alone; a body (there should be none) is read and
	 * dropped before the answer. */
	if (!*req) {
		*req = (void *)1;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	bool head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
	if (strcmp(method, MHD_HTTP_METHOD_GET) && !head)
		return plain(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, "/metrics"))
		return plain(conn, MHD_HTTP_NOT_FOUND, "tensord serves /metrics only\n");
	size_t len = 0;
	char *body = fresh_text(&len);
	if (!body)
		return plain(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
			     "tensord did not render its metrics in time\n");
	atomic_fetch_add(&scrapes, 1);
	/* libmicrohttpd sends the headers alone for HEAD. */
	return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
		     MHD_RESPMEM_MUST_FREE);
}

void tnd_http_events(void)
{
	pthread_mutex_lock(&lock);
	uint64_t want = asked;
	pthread_mutex_unlock(&lock);
	if (!mhd || want == answered)
		return;
	char *t = NULL;
	size_t len = 0;
	int r = tnd_metrics_render(NULL, &t, &len);
	pthread_mutex_lock(&lock);
	if (r == 0) {
		free(text);
		text = t;
		text_len = len;
	}
	/* A failed rendering answers too: the waiters then find the last text, or none. */
	answered = want;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

uint64_t tnd_http_scrapes(void)
{
	return atomic_load(&scrapes);
}

uint64_t tnd_http_refused(void)
{
	return atomic_load(&refused);
}

int tnd_resolve(const char *spec, struct sockaddr_storage *ret, socklen_t *ret_len,
		   const char **why)
{
	char host[256] = "127.0.0.1", port[16];
	const char *colon = strrchr(spec, ':');
	const char *ps = colon ? colon + 1 : spec;
	if (!*ps || strlen(ps) >= sizeof(port)) {
		*why = "bad port";
		return -1;
	}
	memcpy(port, ps, strlen(ps) + 1);
	if (colon) {
		size_t hl = (size_t)(colon - spec);
		const char *h = spec;
		if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
			h++;
			hl -= 2;
		}
		if (!hl || hl >= sizeof(host)) {
			*why = "bad host";
			return -1;
		}
		memcpy(host, h, hl);
		host[hl] = 0;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res;
	int e = getaddrinfo(host, port, &hints, &res);
	if (e) {
		*why = gai_strerror(e);
		return -1;
	}
	memcpy(ret, res->ai_addr, res->ai_addrlen);
	*ret_len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int tnd_http_start(void)
{
	const char *spec = tnd_d.cfg.metrics_http;
	if (!spec[0])
		return 0;
	struct sockaddr_storage addr;
	socklen_t alen;
	const char *why = NULL;
	if (tnd_resolve(spec, &addr, &alen, &why)) {
		tnd_error("metrics_http \"%s\": %s", spec, why);
		return -1;
	}
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_AUTO;
	if (addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR,
			       (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
			       (unsigned)HTTP_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
			       (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_END);
	if (!mhd) {
		tnd_error("metrics_http \"%s\": cannot listen (%s)", spec, strerror(errno));
		return -1;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
	char shown[INET6_ADDRSTRLEN] = "?";
	const void *a = addr.ss_family == AF_INET6
				? (const void *)&((struct sockaddr_in6 *)&addr)->sin6_addr
				: (const void *)&((struct sockaddr_in *)&addr)->sin_addr;
	inet_ntop(addr.ss_family, a, shown, sizeof(shown));
	tnd_info("metrics at http://%s%s%s:%u/metrics", addr.ss_family == AF_INET6 ? "[" : "",
		 shown, addr.ss_family == AF_INET6 ? "]" : "", info ? info->port : 0);
	return 0;
}

void tnd_http_stop(void)
{
	if (!mhd)
		return;
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	MHD_stop_daemon(mhd);
	mhd = NULL;
	free(text);
	text = NULL;
}
