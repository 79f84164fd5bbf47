// SPDX-License-Identifier: MIT
/*
 * tensord.conf(5): `key = value` lines, '#' comments. The parser takes a buffer and its
 * length (no NUL needed), so tests feed it any bytes; every error names the file and line.
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

void tnd_config_defaults(struct tnd_config *c)
{
	memset(c, 0, sizeof(*c));
	c->default_arena_size = (uint64_t)256 << 20;
	c->max_arenas = 256;
	c->max_clients = 4096;
	c->max_clients_per_user = 1024;
	c->hello_timeout_ms = 5000;
	c->max_hello_pending = 64;
	c->max_slots_per_user = 32;
	c->reserved_slots = 16;
	c->max_arenas_per_user = 64;
	c->create_all = true;
	c->numa_policy = TN_NUMA_DEFAULT;
	c->hugepages = TND_HUGE_NO;
	c->reclaim_interval_ms = 1000;
	c->evict_interval_ms = 100;
	c->peer_timeout_ms = 5000;
	c->peer_transfer_timeout_ms = 600000;
	c->peer_direct_read = true;
	c->log_level = TND_LOG_INFO;
	c->log_target = TND_LOG_STDERR;
}

/* "HOST:PORT" or "[V6]:PORT", a numeric port of 1 to 65535. */
bool tnd_peer_address_ok(const char *v)
{
	const char *colon = strrchr(v, ':');
	if (!colon || colon == v || strlen(v) >= 280)
		return false;
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || *end || !colon[1] || !isdigit((unsigned char)colon[1]) || !port ||
	    port > 65535)
		return false;
	for (const char *p = v; p < colon; p++)
		if (!isalnum((unsigned char)*p) && !strchr(".-_:[]", *p))
			return false;
	return true;
}

int tnd_parse_size(const char *s, uint64_t *ret)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
		end += strlen(end);
	else if (!shift && !strcmp(end, "B"))
		end++;
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*ret = (uint64_t)v << shift;
	return 0;
}

/* "0,2-3" -> a mask of nodes below 64. */
static int parse_nodes(const char *s, uint64_t *ret)
{
	uint64_t mask = 0;
	if (!*s)
		return -1;
	while (*s) {
		if (!isdigit((unsigned char)*s))
			return -1;
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;
		if (*end == '-') {
			if (!isdigit((unsigned char)end[1]))
				return -1;
			b = strtoul(end + 1, &end, 10);
		}
		if (a > b || b >= 64)
			return -1;
		for (unsigned long i = a; i <= b; i++)
			mask |= (uint64_t)1 << i;
		if (*end == ',' && end[1])
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	*ret = mask;
	return 0;
}

int tnd_parse_numa(const char *s, enum tn_numa_policy *ret_policy, uint64_t *ret_nodes)
{
	static const struct {
		const char *name;
		enum tn_numa_policy policy;
		bool nodes;
	} t[] = {
		{ "default", TN_NUMA_DEFAULT, false },	   { "local", TN_NUMA_LOCAL, false },
		{ "bind", TN_NUMA_BIND, true },		   { "interleave", TN_NUMA_INTERLEAVE, true },
		{ "preferred", TN_NUMA_PREFERRED, true },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t n = strlen(t[i].name);
		if (strncmp(s, t[i].name, n))
			continue;
		uint64_t nodes = 0;
		if (t[i].nodes ? s[n] != ':' || parse_nodes(s + n + 1, &nodes) : s[n] != 0)
			return -1;
		if (t[i].policy == TN_NUMA_PREFERRED && (nodes & (nodes - 1)))
			return -1; /* one node */
		*ret_policy = t[i].policy;
		*ret_nodes = nodes;
		return 0;
	}
	return -1;
}

static int set_err(char *err, size_t errlen, const char *file, unsigned line, const char *fmt,
		   ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "%s:%u: ", file, line);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int parse_creators(struct tnd_config *c, char *v, char *why, size_t whylen)
{
	c->create_all = false;
	c->ncreate_uids = c->ncreate_gids = 0;
	char *save = NULL;
	for (char *tok = strtok_r(v, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*tok))
			tok++;
		char *e = tok + strlen(tok);
		while (e > tok && isspace((unsigned char)e[-1]))
			*--e = 0;
		if (!strcmp(tok, "*")) {
			c->create_all = true;
			continue;
		}
		bool group = tok[0] == '@';
		const char *name = tok + group;
		char *end;
		unsigned long id = strtoul(name, &end, 10);
		if (!*name || (isdigit((unsigned char)*name) && *end)) {
			snprintf(why, whylen, "bad entry \"%s\"", tok);
			return -1;
		}
		if (!isdigit((unsigned char)*name)) {
			if (group) {
				struct group *g = getgrnam(name);
				if (!g) {
					snprintf(why, whylen, "no group \"%s\"", name);
					return -1;
				}
				id = g->gr_gid;
			} else {
				struct passwd *p = getpwnam(name);
				if (!p) {
					snprintf(why, whylen, "no user \"%s\"", name);
					return -1;
				}
				id = p->pw_uid;
			}
		}
		if (id >= UINT32_MAX) {
			snprintf(why, whylen, "id %lu out of range", id);
			return -1;
		}
		unsigned *n = group ? &c->ncreate_gids : &c->ncreate_uids;
		uint32_t *ids = group ? c->create_gids : c->create_uids;
		if (*n == TND_MAX_CREATORS) {
			snprintf(why, whylen, "more than %d %s", TND_MAX_CREATORS,
				 group ? "groups" : "users");
			return -1;
		}
		ids[(*n)++] = (uint32_t)id;
	}
	return 0;
}

static int parse_uint(const char *v, unsigned lo, unsigned hi, unsigned *ret)
{
	char *end;
	if (!isdigit((unsigned char)*v))
		return -1;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno || *end || x < lo || x > hi)
		return -1;
	*ret = (unsigned)x;
	return 0;
}

static int set_key(struct tnd_config *c, const char *k, char *v, char *why, size_t whylen)
{
	unsigned u;
	/* "auto": the default these keys compute (from the uid, /proc/mounts, --foreground). */
	bool dflt = !strcmp(v, "auto");
	if (!strcmp(k, "socket") && dflt) {
		c->socket[0] = 0;
		c->set_socket = false;
	} else if (!strcmp(k, "metrics_http")) {
		if (!strcmp(v, "none")) {
			c->metrics_http[0] = 0;
		} else if (!v[0] || strlen(v) >= sizeof(c->metrics_http) ||
			   !strchr("0123456789", v[strlen(v) - 1])) {
			snprintf(why, whylen, "metrics_http must be none, PORT, HOST:PORT or "
				 "[ADDRESS]:PORT");
			return -1;
		} else {
			strcpy(c->metrics_http, v);
		}
	} else if (!strcmp(k, "peer_listen") || !strcmp(k, "peer")) {
		bool listen = k[4] == '_';
		if (listen && !strcmp(v, "none")) {
			c->peer_listen[0] = 0;
		} else if (!tnd_peer_address_ok(v)) {
			snprintf(why, whylen, "%s must be HOST:PORT or [ADDRESS]:PORT%s", k,
				 listen ? ", or none" : "");
			return -1;
		} else if (listen) {
			strcpy(c->peer_listen, v);
		} else if (c->npeers == TND_MAX_PEERS) {
			snprintf(why, whylen, "more than %d peer lines", TND_MAX_PEERS);
			return -1;
		} else {
			strcpy(c->peers[c->npeers++], v);
		}
	} else if (!strcmp(k, "peer_export") || !strcmp(k, "peer_import")) {
		bool import = k[5] == 'i';
		unsigned *n = import ? &c->nimports : &c->nexports;
		if (!v[0] || strlen(v) > TND_NAME_MAX || strchr(v, '/')) {
			snprintf(why, whylen, "%s must be an arena's name", k);
			return -1;
		} else if (*n == TND_MAX_PEERS) {
			snprintf(why, whylen, "more than %d %s lines", TND_MAX_PEERS, k);
			return -1;
		}
		strcpy(import ? c->imports[(*n)++] : c->exports[(*n)++], v);
	} else if (!strcmp(k, "peer_secret")) {
		if (!strcmp(v, "none")) {
			c->peer_secret[0] = 0;
		} else if (v[0] != '/' || strlen(v) >= PATH_MAX) {
			snprintf(why, whylen, "peer_secret must be none or an absolute path");
			return -1;
		} else {
			strcpy(c->peer_secret, v);
		}
	} else if (!strcmp(k, "spill_dir")) {
		if (!strcmp(v, "none")) {
			c->spill_dir[0] = 0;
		} else if (v[0] != '/' || strlen(v) >= PATH_MAX - 300) {
			snprintf(why, whylen, "spill_dir must be none or an absolute path of at most "
				 "%d bytes", PATH_MAX - 301);
			return -1;
		} else {
			strcpy(c->spill_dir, v);
		}
	} else if ((!strcmp(k, "arena_dir") || !strcmp(k, "hugepage_dir")) && dflt) {
		(k[0] == 'a' ? c->arena_dir : c->hugepage_dir)[0] = 0;
	} else if (!strcmp(k, "log_target") && dflt) {
		c->log_target = TND_LOG_STDERR;
		c->set_log_target = false;
	} else if (!strcmp(k, "socket")) {
		if (strlen(v) >= sizeof(c->socket)) {
			snprintf(why, whylen, "socket path longer than %zu bytes", sizeof(c->socket) - 1);
			return -1;
		}
		strcpy(c->socket, v);
		c->set_socket = true;
	} else if (!strcmp(k, "arena_dir") || !strcmp(k, "hugepage_dir")) {
		char *dst = k[0] == 'a' ? c->arena_dir : c->hugepage_dir;
		if (v[0] != '/' || strlen(v) >= PATH_MAX - 300) {
			snprintf(why, whylen, "%s must be auto or an absolute path of at most %d "
				 "bytes", k, PATH_MAX - 301);
			return -1;
		}
		strcpy(dst, v);
	} else if (!strcmp(k, "default_arena_size") || !strcmp(k, "max_arena_size")) {
		uint64_t s;
		if (tnd_parse_size(v, &s)) {
			snprintf(why, whylen, "bad size \"%s\" (like 512M, 4G)", v);
			return -1;
		}
		*(k[0] == 'd' ? &c->default_arena_size : &c->max_arena_size) = s;
	} else if (!strcmp(k, "max_arenas")) {
		if (parse_uint(v, 1, 65536, &c->max_arenas)) {
			snprintf(why, whylen, "max_arenas must be 1 to 65536");
			return -1;
		}
	} else if (!strcmp(k, "max_bytes_per_user")) {
		if (tnd_parse_size(v, &c->max_bytes_per_user)) {
			snprintf(why, whylen, "bad size \"%s\" (like 64G; 0 for no limit)", v);
			return -1;
		}
	} else if (!strcmp(k, "max_spill_bytes_per_user")) {
		if (tnd_parse_size(v, &c->max_spill_bytes_per_user)) {
			snprintf(why, whylen, "bad size \"%s\" (like 512M, 4G)", v);
			return -1;
		}
	} else if (!strcmp(k, "max_names_per_user")) {
		unsigned n;
		if (parse_uint(v, 0, 1u << 30, &n)) {
			snprintf(why, whylen, "max_names_per_user must be 0 to 1073741824");
			return -1;
		}
		c->max_names_per_user = n;
	} else if (!strcmp(k, "max_arenas_per_user")) {
		if (parse_uint(v, 1, 65536, &c->max_arenas_per_user)) {
			snprintf(why, whylen, "max_arenas_per_user must be 1 to 65536");
			return -1;
		}
	} else if (!strcmp(k, "max_clients_per_user")) {
		if (parse_uint(v, 1, 1000000, &c->max_clients_per_user)) {
			snprintf(why, whylen, "max_clients_per_user must be 1 to 1000000");
			return -1;
		}
	} else if (!strcmp(k, "hello_timeout_ms")) {
		if (parse_uint(v, 100, 3600000, &c->hello_timeout_ms)) {
			snprintf(why, whylen, "hello_timeout_ms must be 100 to 3600000");
			return -1;
		}
	} else if (!strcmp(k, "max_hello_pending")) {
		if (parse_uint(v, 1, 1000000, &c->max_hello_pending)) {
			snprintf(why, whylen, "max_hello_pending must be 1 to 1000000");
			return -1;
		}
	} else if (!strcmp(k, "max_slots_per_user")) {
		if (parse_uint(v, 1, TN_ARENA_MAX_CLIENTS, &c->max_slots_per_user)) {
			snprintf(why, whylen, "max_slots_per_user must be 1 to %d",
				 TN_ARENA_MAX_CLIENTS);
			return -1;
		}
	} else if (!strcmp(k, "reserved_slots")) {
		if (parse_uint(v, 0, TN_ARENA_MAX_CLIENTS / 2, &c->reserved_slots)) {
			snprintf(why, whylen, "reserved_slots must be 0 to %d",
				 TN_ARENA_MAX_CLIENTS / 2);
			return -1;
		}
	} else if (!strcmp(k, "max_clients")) {
		if (parse_uint(v, 1, 1000000, &c->max_clients)) {
			snprintf(why, whylen, "max_clients must be 1 to 1000000");
			return -1;
		}
	} else if (!strcmp(k, "reclaim_interval_ms")) {
		if (parse_uint(v, 10, 3600000, &c->reclaim_interval_ms)) {
			snprintf(why, whylen, "reclaim_interval_ms must be 10 to 3600000");
			return -1;
		}
	} else if (!strcmp(k, "peer_timeout_ms")) {
		if (parse_uint(v, 100, 600000, &c->peer_timeout_ms)) {
			snprintf(why, whylen, "peer_timeout_ms must be 100 to 600000");
			return -1;
		}
	} else if (!strcmp(k, "peer_transfer_timeout_ms")) {
		if (parse_uint(v, 0, 86400000, &c->peer_transfer_timeout_ms) ||
		    (c->peer_transfer_timeout_ms && c->peer_transfer_timeout_ms < 100)) {
			snprintf(why, whylen, "peer_transfer_timeout_ms must be 0 (none) or 100 to "
				 "86400000");
			return -1;
		}
	} else if (!strcmp(k, "peer_direct_read")) {
		if (strcmp(v, "yes") && strcmp(v, "no")) {
			snprintf(why, whylen, "peer_direct_read must be yes or no");
			return -1;
		}
		c->peer_direct_read = !strcmp(v, "yes");
	} else if (!strcmp(k, "evict_interval_ms")) {
		if (parse_uint(v, 10, 3600000, &c->evict_interval_ms)) {
			snprintf(why, whylen, "evict_interval_ms must be 10 to 3600000");
			return -1;
		}
	} else if (!strcmp(k, "create_users")) {
		return parse_creators(c, v, why, whylen);
	} else if (!strcmp(k, "numa_policy")) {
		if (tnd_parse_numa(v, &c->numa_policy, &c->numa_nodes)) {
			snprintf(why, whylen, "bad NUMA policy \"%s\" (default, local, bind:NODES, "
				 "interleave:NODES, preferred:NODE)", v);
			return -1;
		}
	} else if (!strcmp(k, "hugepages")) {
		if (!strcmp(v, "no"))
			c->hugepages = TND_HUGE_NO;
		else if (!strcmp(v, "yes"))
			c->hugepages = TND_HUGE_YES;
		else if (!strcmp(v, "require"))
			c->hugepages = TND_HUGE_REQUIRE;
		else {
			snprintf(why, whylen, "hugepages must be no, yes or require");
			return -1;
		}
	} else if (!strcmp(k, "log_level")) {
		static const char *const lv[] = { "error", "warn", "info", "debug" };
		for (u = 0; u < 4 && strcmp(v, lv[u]); u++)
			;
		if (u == 4) {
			snprintf(why, whylen, "log_level must be error, warn, info or debug");
			return -1;
		}
		c->log_level = (enum tnd_log_level)u;
		c->set_log_level = true;
	} else if (!strcmp(k, "log_target")) {
		if (!strcmp(v, "stderr"))
			c->log_target = TND_LOG_STDERR;
		else if (!strcmp(v, "syslog"))
			c->log_target = TND_LOG_SYSLOG;
		else {
			snprintf(why, whylen, "log_target must be auto, stderr or syslog");
			return -1;
		}
		c->set_log_target = true;
	} else {
		snprintf(why, whylen, "unknown key \"%s\"", k);
		return -1;
	}
	return 0;
}

int tnd_config_parse(struct tnd_config *c, const char *text, size_t len, const char *file,
		     char *err, size_t errlen)
{
	unsigned lineno = 0;
	size_t pos = 0;
	while (pos < len) {
		lineno++;
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		char line[4096];
		if (n >= sizeof(line))
			return set_err(err, errlen, file, lineno, "line longer than %zu bytes",
				       sizeof(line) - 1);
		memcpy(line, text + pos, n);
		line[n] = 0;
		pos += n + (nl != NULL);
		if (memchr(line, 0, n))
			return set_err(err, errlen, file, lineno, "NUL byte in the line");
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *s = line;
		while (isspace((unsigned char)*s))
			s++;
		char *e = s + strlen(s);
		while (e > s && isspace((unsigned char)e[-1]))
			*--e = 0;
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			return set_err(err, errlen, file, lineno, "expected \"key = value\"");
		char *k = s, *ke = eq;
		while (ke > k && isspace((unsigned char)ke[-1]))
			ke--;
		*ke = 0;
		char *v = eq + 1;
		while (isspace((unsigned char)*v))
			v++;
		if (!*k)
			return set_err(err, errlen, file, lineno, "missing key");
		if (!*v)
			return set_err(err, errlen, file, lineno, "missing value for \"%s\"", k);
		char why[256];
		if (set_key(c, k, v, why, sizeof(why)))
			return set_err(err, errlen, file, lineno, "%s", why);
	}
	return 0;
}

int tnd_config_load(struct tnd_config *c, const char *path, bool must_exist, char *err,
		    size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT && !must_exist)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char *buf = malloc(1 << 20);
	if (!buf) {
		fclose(f);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	size_t n = fread(buf, 1, 1 << 20, f);
	int bad = ferror(f) || !feof(f);
	fclose(f);
	int r = bad ? (snprintf(err, errlen, "%s: unreadable or larger than 1 MiB", path), -1)
		    : tnd_config_parse(c, buf, n, path, err, errlen);
	free(buf);
	return r;
}
