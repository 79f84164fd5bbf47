// SPDX-License-Identifier: MIT
/*
 * tensorctl(1): administer tensord and look inside its arenas. Uses the public API only
 * (tensor/tensord.h, tensor/arena.h): what it does, any program can do.
 *
 * Exit codes: 0 success, 1 the operation failed, 2 usage, 3 cannot reach tensord, 4 no such
 * arena or tensor, 5 permission denied, 6 fsck found problems it did not repair, or verify
 * found sealed bytes changed, 7 a --wait timed out.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tensor.h>

#include "top.h"
#include "daemon.h" /* tnd_parse_size, tnd_parse_numa: the config file's syntax */

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2, EX_CONNECT = 3, EX_NOENT = 4, EX_ACCESS = 5,
       EX_FSCK = 6, EX_TIMEOUT = 7 };

static const char *socket_path;
static bool json, quiet;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tensorctl [--socket PATH] [--json] [--quiet] COMMAND [ARGS]\n"
		"commands:\n"
		"  status                          the daemon and this client\n"
		"  arena create NAME [--size SIZE] [--hugepages] [--numa POLICY] [--mode MODE]\n"
		"                    [--max-names N]\n"
		"  arena list                      arenas you may open\n"
		"  arena stat NAME                 figures, access, NUMA residency\n"
		"  arena destroy NAME [--force]\n"
		"  arena grant NAME USER|GROUP [--ro|--rw|--revoke]\n"
		"  arena set NAME [--high-water SIZE|N%%] [--low-water SIZE|N%%] [--spill on|off]\n"
		"                                  eviction's watermarks of used bytes\n"
		"  ls NAME [PREFIX] [--wait SECONDS]\n"
		"                                  named tensors (waiting for one under PREFIX)\n"
		"  show NAME TENSOR [--wait SECONDS] [--sealed]\n"
		"                                  metadata and a preview (waiting for it)\n"
		"  load NAME FILE [--prefix P] [--format safetensors|npy] [--seal] [--replace]\n"
		"                  [--evictable]\n"
		"  save NAME FILE [PREFIX] [--format safetensors|npy]\n"
		"  rm NAME TENSOR...               unpublish\n"
		"  seal NAME TENSOR...\n"
		"  pin NAME TENSOR... [--soft SECONDS]\n"
		"                                  never evicted (or not for SECONDS)\n"
		"  unpin NAME TENSOR...            evictable cache tensors\n"
		"  evict NAME [--to SIZE|N%%]       evict cache tensors now (to the low watermark)\n"
		"  clients                         connected processes\n"
		"  peer add HOST:PORT              dial a peer tensord (root, the daemon's user)\n"
		"  peer list                       peers: state, round trip, UCX lanes, last error\n"
		"  pull PEER:ARENA/NAME[*] [--into ARENA[/NAME]]  fetch a sealed tensor (NAME*: all under NAME)\n"
		"  push ARENA/NAME PEER:ARENA[/NAME]  send a sealed tensor to a peer\n"
		"  metrics                         figures in Prometheus' text format\n"
		"  top [--delay SECONDS] [--iterations N]\n"
		"                                  a live view of arenas and clients\n"
		"  fsck NAME [--repair]\n"
		"  verify NAME                     sealed bytes against tensord's digests\n"
		"  gc [NAME]                       reclaim dead processes' slots\n"
		"  cuda [NAME]                     CUDA exports: owners, holders, state\n"
		"  shutdown                        stop tensord\n"
		"  ops                             operator schemas and kernels (no daemon needed)\n"
		"See tensorctl(1).\n");
}

static int exit_for(int code)
{
	switch (code) {
	case TN_OK: return EX_OK;
	case TN_ECONNREFUSED: case TN_ENOTCONN: return EX_CONNECT;
	case TN_ENOENT: return EX_NOENT;
	case TN_EACCES: case TN_EPERM: return EX_ACCESS;
	case TN_ETIMEDOUT: return EX_TIMEOUT;
	default: return EX_FAIL;
	}
}

/* The library's message for the user: without the names of the library's and the daemon's
 * functions that prefix it ("tn_tensord_arena_create: ...", "tnd_load: ...") and with an arena's file named by the arena's
 * name ("/dev/shm/tensord/w.arena" -> "w"). */
static const char *user_message(char *buf, size_t cap)
{
	const char *m = tn_last_error();
	for (;;) {
		size_t k = 0;
		if (strncmp(m, "tn_", 3) && strncmp(m, "tnd_", 4))
			break;
		while (m[k] && (m[k] == '_' || (m[k] >= 'a' && m[k] <= 'z') ||
				(m[k] >= '0' && m[k] <= '9')))
			k++;
		if (strncmp(m + k, ": ", 2))
			break;
		m += k + 2;
	}
	size_t o = 0;
	while (*m && o + 1 < cap) {
		const char *ext = *m == '/' ? strstr(m, ".arena") : NULL;
		const char *sp = *m == '/' ? strpbrk(m, " '\"") : NULL;
		if (ext && (!sp || ext < sp) && (!ext[6] || strchr(" ,;:)'\"", ext[6]))) {
			const char *base = ext;
			while (base > m && base[-1] != '/')
				base--;
			int w = snprintf(buf + o, cap - o, "\"%.*s\"", (int)(ext - base), base);
			o = w < 0 ? o : o + (size_t)w < cap ? o + (size_t)w : cap - 1;
			m = ext + 6;
			continue;
		}
		buf[o++] = *m++;
	}
	buf[o] = 0;
	return buf;
}

static int fail(int code, const char *what)
{
	char msg[1200];
	fprintf(stderr, "tensorctl: %s: %s\n", what,
		tn_last_error()[0] ? user_message(msg, sizeof(msg)) : tn_strerror(code));
	return exit_for(code);
}

static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tensorctl: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n(tensorctl --help lists the commands)\n");
	va_end(ap);
	return EX_USAGE;
}

/* A malformed arena or tensor name is a usage error (exit 2), told before any request. The
 * rules are tensord's (tnd_name_ok in proto.c) and the arena's (tn_arena_publish(3)). */
static bool bad_arena_name(const char *name, int *ret)
{
	size_t n = strlen(name);
	bool ok = n >= 1 && n <= TND_NAME_MAX && name[0] != '.' && name[0] != '-';
	for (size_t i = 0; ok && i < n; i++) {
		char c = name[i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		     c == '.' || c == '_' || c == '-';
	}
	if (!ok)
		*ret = usage_error("bad arena name \"%s\": 1 to %d letters, digits, '.', '_' or "
				   "'-', not starting with '.' or '-'", name, TND_NAME_MAX);
	return !ok;
}

static bool bad_tensor_name(const char *name, int *ret)
{
	size_t n = strlen(name);
	bool ok = n >= 1 && n <= TN_ARENA_NAME_MAX && name[0] != '/' && name[n - 1] != '/' &&
		  !strstr(name, "//");
	for (const unsigned char *p = (const unsigned char *)name; ok && *p; p++)
		ok = *p >= 0x20 && *p != 0x7f;
	if (!ok)
		*ret = usage_error("bad tensor name \"%s\": 1 to %d bytes of '/'-separated parts, "
				   "none empty, no control characters", name, TN_ARENA_NAME_MAX);
	return !ok;
}

static tn_tensord *conn;

static int connect_daemon(void)
{
	int r = tn_tensord_connect(socket_path, &conn);
	if (!r)
		return 0;
	char path[256];
	if (socket_path)
		snprintf(path, sizeof(path), "%s", socket_path);
	else if (tn_tensord_socket_path(path, sizeof(path)) < 0) {
		fprintf(stderr, "tensorctl: no socket to reach tensord: TENSORD_SOCKET and "
				"XDG_RUNTIME_DIR are unset; set TENSORD_SOCKET (the system "
				"daemon's is /run/tensord/tensord.sock) or use --socket\n");
		return EX_CONNECT;
	}
	/* The library's message ends with the system's reason. */
	const char *why = strrchr(tn_last_error(), ':');
	why = why && why[1] ? why + 2 : tn_strerror(r);
	fprintf(stderr, "tensorctl: cannot reach tensord at %s: %s\n", path, why);
	if (r == TN_EACCES || r == TN_EPERM)
		fprintf(stderr, "tensorctl: you may not use that socket; ask its owner\n");
	else
		fprintf(stderr, "tensorctl: is tensord running? start it with `systemctl start "
				"tensord.socket` (or run tensord), or set TENSORD_SOCKET (or "
				"--socket) to the socket it listens on\n");
	return EX_CONNECT;
}

/* ---- output helpers ------------------------------------------------------------------------ */

static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static const char *human(uint64_t b, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%" PRIu64 " B", b);
	else
		snprintf(buf, len, "%.1f %s", v, u[i]);
	return buf;
}

static const char *user_name(uint32_t uid, char *buf, size_t len)
{
	struct passwd *p = getpwuid(uid);
	if (p)
		snprintf(buf, len, "%s", p->pw_name);
	else
		snprintf(buf, len, "%u", uid);
	return buf;
}

static const char *group_name(uint32_t gid, char *buf, size_t len)
{
	struct group *g = getgrgid(gid);
	if (g)
		snprintf(buf, len, "%s", g->gr_name);
	else
		snprintf(buf, len, "%u", gid);
	return buf;
}

static const char *dims(int n, const int64_t *v, char *buf, size_t len)
{
	size_t k = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < n && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, i ? ", " : "", v[i]);
	if (k < len)
		snprintf(buf + k, len - k, "]");
	return buf;
}

static void json_dims(int n, const int64_t *v)
{
	putchar('[');
	for (int i = 0; i < n; i++)
		printf("%s%" PRId64, i ? ", " : "", v[i]);
	putchar(']');
}

static const char *backing_name(enum tn_arena_backing b)
{
	switch (b) {
	case TN_ARENA_BACKING_TMPFS: return "tmpfs";
	case TN_ARENA_BACKING_TMPFS_HUGE: return "tmpfs-huge";
	case TN_ARENA_BACKING_HUGETLBFS: return "hugetlbfs";
	default: return "file";
	}
}

static const char *policy_name(enum tn_numa_policy p)
{
	static const char *const n[] = { "default", "bind", "interleave", "preferred", "local" };
	return (unsigned)p < 5 ? n[p] : "?";
}

/* ---- commands -------------------------------------------------------------------------------- */

static int cmd_status(void)
{
	tn_tensord_status s;
	int r = tn_tensord_status_get(conn, &s);
	if (r)
		return fail(r, "status");
	char u[64];
	if (json) {
		printf("{\"pid\": %d, \"uid\": %u, \"started\": %" PRIu64 ", \"uptime_s\": %.3f, "
		       "\"arenas\": %u, \"clients\": %u, \"requests\": %" PRIu64
		       ", \"reclaimed_slots\": %" PRIu64 ", \"protocol_errors\": %" PRIu64
		       ", \"arena_dir\": ",
		       s.pid, s.uid, s.started, (double)s.uptime_ns / 1e9, s.arenas, s.clients,
		       s.requests, s.reclaimed_slots, s.protocol_errors);
		json_str(s.arena_dir);
		printf(", \"client_id\": %u, \"peer_uid\": %u, \"peer_gid\": %u, \"version\": %u}\n",
		       s.client_id, s.peer_uid, s.peer_gid, s.version);
		return 0;
	}
	printf("tensord pid %d (user %s), up %.1f s, protocol %u\n", s.pid,
	       user_name(s.uid, u, sizeof(u)), (double)s.uptime_ns / 1e9, s.version);
	printf("arenas %u in %s, clients %u, requests %" PRIu64 ", reclaimed slots %" PRIu64
	       ", protocol errors %" PRIu64 "\n",
	       s.arenas, s.arena_dir, s.clients, s.requests, s.reclaimed_slots, s.protocol_errors);
	printf("you: client %u, uid %u, gid %u\n", s.client_id, s.peer_uid, s.peer_gid);
	return 0;
}

static int cmd_arena_create(int argc, char **argv)
{
	static const struct option o[] = { { "size", 1, NULL, 's' }, { "hugepages", 0, NULL, 'H' },
					   { "numa", 1, NULL, 'n' },  { "mode", 1, NULL, 'm' },
					   { "max-names", 1, NULL, 'N' }, { NULL, 0, NULL, 0 } };
	tn_tensord_arena_options opts;
	tn_tensord_arena_options_init(&opts);
	int c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "s:Hn:m:N:", o, NULL)) != -1) {
		char *end;
		switch (c) {
		case 's':
			if (tnd_parse_size(optarg, &opts.size))
				return usage_error("bad size \"%s\" (like 4G, 512M)", optarg);
			break;
		case 'H': opts.flags |= TN_TENSORD_HUGEPAGES; break;
		case 'n':
			if (tnd_parse_numa(optarg, &opts.numa_policy, &opts.numa_nodes))
				return usage_error("bad NUMA policy \"%s\" (default, local, bind:0, "
						   "interleave:0-1, preferred:1)", optarg);
			break;
		case 'm':
			opts.mode = (unsigned)strtoul(optarg, &end, 8);
			if (*end || opts.mode > 0777)
				return usage_error("bad mode \"%s\" (octal, like 0660)", optarg);
			opts.mode &= 0077;
			break;
		case 'N':
			opts.max_names = (uint32_t)strtoul(optarg, &end, 10);
			if (*end)
				return usage_error("bad --max-names \"%s\"", optarg);
			break;
		default: return EX_USAGE;
		}
	}
	if (argc - optind != 1)
		return usage_error("arena create NAME [options]");
	int r;
	if (bad_arena_name(argv[optind], &r))
		return r;
	r = tn_tensord_arena_create(conn, argv[optind], &opts);
	if (r)
		return fail(r, "arena create");
	if (json)
		printf("{\"created\": \"%s\"}\n", argv[optind]);
	else if (!quiet)
		printf("arena %s created\n", argv[optind]);
	return 0;
}

static void print_info_json(const tn_tensord_arena_info *i)
{
	const tn_arena_stats *s = &i->stats;
	printf("{\"name\": ");
	json_str(i->name);
	printf(", \"owner_uid\": %u, \"owner_gid\": %u, \"mode\": \"0%03o\", \"created\": %" PRIu64
	       ", \"size\": %" PRIu64 ", \"page_size\": %" PRIu64 ", \"backing\": \"%s\""
	       ", \"heap_bytes\": %" PRIu64 ", \"used_bytes\": %" PRIu64 ", \"free_bytes\": %" PRIu64
	       ", \"largest_free\": %" PRIu64 ", \"fragmentation\": %.4f, \"blocks\": %" PRIu64
	       ", \"free_blocks\": %" PRIu64 ", \"names\": %" PRIu64 ", \"max_names\": %" PRIu64
	       ", \"clients\": %" PRIu64 ", \"reclaimed_slots\": %" PRIu64
	       ", \"numa_policy\": \"%s\", \"numa_nodes\": %" PRIu64 ", \"locked\": %s"
	       ", \"resident_pages\": [",
	       i->owner_uid, i->owner_gid, 0600 | i->mode, i->created, s->size, s->page_size,
	       backing_name(s->backing), s->heap_bytes, s->used_bytes, s->free_bytes,
	       s->largest_free,
	       s->free_bytes ? 1.0 - (double)s->largest_free / (double)s->free_bytes : 0.0,
	       s->blocks, s->free_blocks, s->names, s->max_names, s->clients, s->reclaimed_slots,
	       policy_name(s->numa_policy), s->numa_nodes,
	       i->flags & TN_TENSORD_INFO_LOCKED ? "true" : "false");
	for (uint32_t k = 0; k < i->nnodes; k++)
		printf("%s%" PRIu64, k ? ", " : "", i->resident_pages[k]);
	printf("], \"grants\": [");
	for (uint32_t k = 0; k < i->ngrants; k++)
		printf("%s{\"kind\": \"%s\", \"id\": %u, \"access\": \"%s\"}", k ? ", " : "",
		       i->grants[k].kind == TN_TENSORD_GRANT_USER ? "user" : "group", i->grants[k].id,
		       i->grants[k].access == TN_TENSORD_ACCESS_READ ? "ro" : "rw");
	printf("]}");
}

static int cmd_arena_list(void)
{
	tn_tensord_arena_info *v;
	size_t n;
	int r = tn_tensord_arena_list(conn, &v, &n);
	if (r)
		return fail(r, "arena list");
	if (json) {
		printf("[");
		for (size_t i = 0; i < n; i++) {
			printf(i ? ",\n " : "");
			print_info_json(&v[i]);
		}
		printf("]\n");
	} else {
		printf("%-20s %10s %10s %10s %6s %7s %-10s %s\n", "NAME", "SIZE", "USED", "FREE",
		       "NAMES", "CLIENTS", "OWNER", "MODE");
		bool locked = false;
		for (size_t i = 0; i < n; i++) {
			char a[32], b[32], c[32], u[64];
			const tn_arena_stats *s = &v[i].stats;
			bool l = v[i].flags & TN_TENSORD_INFO_LOCKED;
			printf("%-20s %10s %10s %10s %6" PRIu64 " %7" PRIu64 " %-10s 0%03o%s\n",
			       v[i].name, human(s->size, a, sizeof(a)),
			       human(s->used_bytes, b, sizeof(b)), human(s->free_bytes, c, sizeof(c)),
			       s->names, s->clients, user_name(v[i].owner_uid, u, sizeof(u)),
			       0600 | v[i].mode, l ? " (locked)" : "");
			locked = locked || l;
		}
		if (locked)
			printf("(locked): a process holds the arena's lock (stopped or stuck?); "
			       "its figures are the last read\n");
	}
	free(v);
	return 0;
}

static int cmd_arena_stat(const char *name)
{
	tn_tensord_arena_info i;
	int r;
	if (bad_arena_name(name, &r))
		return r;
	r = tn_tensord_arena_stat(conn, name, &i);
	if (r)
		return fail(r, "arena stat");
	if (json) {
		print_info_json(&i);
		printf("\n");
		return 0;
	}
	const tn_arena_stats *s = &i.stats;
	char a[32], b[32], u[64], g[64];
	printf("arena         %s\n", i.name);
	printf("owner         %s:%s, mode 0%03o\n", user_name(i.owner_uid, u, sizeof(u)),
	       group_name(i.owner_gid, g, sizeof(g)), 0600 | i.mode);
	for (uint32_t k = 0; k < i.ngrants; k++) {
		const tn_tensord_grant *gr = &i.grants[k];
		char nm[64];
		printf("grant         %s %s: %s\n", gr->kind == TN_TENSORD_GRANT_USER ? "user" : "group",
		       gr->kind == TN_TENSORD_GRANT_USER ? user_name(gr->id, nm, sizeof(nm))
							: group_name(gr->id, nm, sizeof(nm)),
		       gr->access == TN_TENSORD_ACCESS_READ ? "read-only" : "read-write");
	}
	time_t t = (time_t)i.created;
	char when[64];
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
	printf("created       %s\n", when);
	printf("size          %s (%" PRIu64 " bytes, %s pages of %s)\n", human(s->size, a, sizeof(a)),
	       s->size, backing_name(s->backing), human(s->page_size, b, sizeof(b)));
	printf("heap          %s\n", human(s->heap_bytes, a, sizeof(a)));
	printf("used          %s in %" PRIu64 " blocks\n", human(s->used_bytes, a, sizeof(a)),
	       s->blocks);
	printf("free          %s in %" PRIu64 " blocks, largest %s\n",
	       human(s->free_bytes, a, sizeof(a)), s->free_blocks,
	       human(s->largest_free, b, sizeof(b)));
	printf("fragmentation %.1f%%\n",
	       s->free_bytes ? 100.0 * (1.0 - (double)s->largest_free / (double)s->free_bytes) : 0.0);
	printf("names         %" PRIu64 " of %" PRIu64 "\n", s->names, s->max_names);
	printf("clients       %" PRIu64 " attached, %" PRIu64 " slots reclaimed so far\n",
	       s->clients, s->reclaimed_slots);
	printf("allocations   %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " lock repairs\n",
	       s->num_allocs, s->num_frees, s->lock_repairs);
	/* Retention's figures walk the directory under the arena's lock: from a read-write
	 * attachment of our own, when we may have one. */
	tn_arena *att;
	tn_arena_stats ls;
	if (tn_tensord_arena_open(conn, name, 0, &att) == 0) {
		if (tn_arena_stat(att, &ls) == 0) {
			char c[32], d[32], e[32];
			printf("retention     held %s, pinned %s, evictable %s\n",
			       human(ls.held_bytes, a, sizeof(a)), human(ls.pinned_bytes, b, sizeof(b)),
			       human(ls.evictable_bytes, c, sizeof(c)));
			printf("eviction      above %s down to %s, %s; %" PRIu64 " evicted (%s)\n",
			       human(ls.high_water, d, sizeof(d)), human(ls.low_water, e, sizeof(e)),
			       ls.spill ? "spilling to disk" : "dropping", ls.evictions,
			       human(ls.evicted_bytes, a, sizeof(a)));
			if (ls.spill || ls.spilled_names || ls.spills)
				printf("spilled       %" PRIu64 " tensors on disk (%s); %" PRIu64
				       " spills (%s), %" PRIu64 " restores, %" PRIu64 " failed\n",
				       ls.spilled_names, human(ls.spilled_bytes, b, sizeof(b)),
				       ls.spills, human(ls.spilled_total, c, sizeof(c)), ls.restores,
				       ls.restore_failures);
		}
		tn_arena_unref(att);
	}
	tn_clear_error();
	printf("numa          %s", policy_name(s->numa_policy));
	if (s->numa_nodes)
		printf(" (nodes 0x%" PRIx64 ")", s->numa_nodes);
	printf("; resident pages by node:");
	for (uint32_t k = 0; k < i.nnodes; k++)
		printf(" %u:%" PRIu64, k, i.resident_pages[k]);
	printf("\n");
	return 0;
}

static int cmd_arena_destroy(int argc, char **argv)
{
	bool force = false;
	const char *name = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
			force = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return usage_error("arena destroy NAME [--force]");
	}
	if (!name)
		return usage_error("arena destroy NAME [--force]");
	int r;
	if (bad_arena_name(name, &r))
		return r;
	r = tn_tensord_arena_destroy(conn, name, force ? TN_TENSORD_FORCE : 0);
	if (r)
		return fail(r, "arena destroy");
	if (json)
		printf("{\"destroyed\": \"%s\"}\n", name);
	else if (!quiet)
		printf("arena %s destroyed\n", name);
	return 0;
}

/* USER|GROUP: uid:N, gid:N, user:NAME, group:NAME, a user name, else a group name, else a
 * number as a uid. */
static int parse_principal(const char *s, tn_tensord_grant *g)
{
	char *end;
	if (!strncmp(s, "uid:", 4) || !strncmp(s, "gid:", 4)) {
		unsigned long v = strtoul(s + 4, &end, 10);
		if (!s[4] || *end || v >= UINT32_MAX)
			return -1;
		g->kind = s[0] == 'u' ? TN_TENSORD_GRANT_USER : TN_TENSORD_GRANT_GROUP;
		g->id = (uint32_t)v;
		return 0;
	}
	if (!strncmp(s, "user:", 5)) {
		struct passwd *p = getpwnam(s + 5);
		if (!p)
			return -1;
		g->kind = TN_TENSORD_GRANT_USER;
		g->id = p->pw_uid;
		return 0;
	}
	if (!strncmp(s, "group:", 6)) {
		struct group *gr = getgrnam(s + 6);
		if (!gr)
			return -1;
		g->kind = TN_TENSORD_GRANT_GROUP;
		g->id = gr->gr_gid;
		return 0;
	}
	struct passwd *p = getpwnam(s);
	if (p) {
		g->kind = TN_TENSORD_GRANT_USER;
		g->id = p->pw_uid;
		return 0;
	}
	struct group *gr = getgrnam(s);
	if (gr) {
		g->kind = TN_TENSORD_GRANT_GROUP;
		g->id = gr->gr_gid;
		return 0;
	}
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v >= UINT32_MAX)
		return -1;
	g->kind = TN_TENSORD_GRANT_USER;
	g->id = (uint32_t)v;
	return 0;
}

static int cmd_arena_grant(int argc, char **argv)
{
	tn_tensord_grant g = { .access = TN_TENSORD_ACCESS_READ_WRITE };
	const char *pos[2] = { NULL, NULL };
	int np = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ro"))
			g.access = TN_TENSORD_ACCESS_READ;
		else if (!strcmp(argv[i], "--rw"))
			g.access = TN_TENSORD_ACCESS_READ_WRITE;
		else if (!strcmp(argv[i], "--revoke"))
			g.access = TN_TENSORD_ACCESS_NONE;
		else if (np < 2 && argv[i][0] != '-')
			pos[np++] = argv[i];
		else
			return usage_error("arena grant NAME USER|GROUP [--ro|--rw|--revoke]");
	}
	if (np != 2)
		return usage_error("arena grant NAME USER|GROUP [--ro|--rw|--revoke]");
	int r;
	if (bad_arena_name(pos[0], &r))
		return r;
	if (parse_principal(pos[1], &g))
		return usage_error("no user or group \"%s\" (uid:N, gid:N, user:NAME, group:NAME)",
				   pos[1]);
	r = tn_tensord_arena_grant(conn, pos[0], &g);
	if (r)
		return fail(r, "arena grant");
	if (json)
		printf("{\"arena\": \"%s\", \"kind\": \"%s\", \"id\": %u, \"access\": \"%s\"}\n",
		       pos[0], g.kind == TN_TENSORD_GRANT_USER ? "user" : "group", g.id,
		       g.access == TN_TENSORD_ACCESS_NONE   ? "none"
		       : g.access == TN_TENSORD_ACCESS_READ ? "ro"
							    : "rw");
	else if (!quiet)
		printf("arena %s: %s %u %s\n", pos[0],
		       g.kind == TN_TENSORD_GRANT_USER ? "uid" : "gid", g.id,
		       g.access == TN_TENSORD_ACCESS_NONE   ? "revoked"
		       : g.access == TN_TENSORD_ACCESS_READ ? "may read"
							    : "may read and write");
	return 0;
}

/* Open an arena through the daemon; read-only unless @write. */
static int open_arena(const char *name, bool write, tn_arena **ret)
{
	int r;
	if (bad_arena_name(name, &r))
		return r;
	r = tn_tensord_arena_open(conn, name, write ? 0 : TN_TENSORD_READ_ONLY, ret);
	if (r)
		return fail(r, "open arena");
	return 0;
}

/* --wait SECONDS: nanoseconds (a negative for "inf"), or -2 after the usage error. */
static int64_t parse_wait(const char *text)
{
	char *end;
	errno = 0;
	double sec = strtod(text, &end);
	if (errno || end == text || *end || sec < 0 || sec != sec)
		return -2;
	return sec >= 9e9 ? -1 : (int64_t)(sec * 1e9);
}

/* Options of ls and show: --wait SECONDS, and --sealed where @sealed is non-NULL. Leaves the
 * positional arguments at argv[optind...]; returns 0 or an exit code. */
static int wait_options(int argc, char **argv, int64_t *ret_wait, bool *sealed)
{
	static const struct option o[] = { { "wait", 1, NULL, 'w' }, { "sealed", 0, NULL, 's' },
					   { NULL, 0, NULL, 0 } };
	int c;
	*ret_wait = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "w:s", o, NULL)) != -1) {
		switch (c) {
		case 'w':
			if ((*ret_wait = parse_wait(optarg)) == -2)
				return usage_error("bad --wait \"%s\" (seconds, or inf)", optarg);
			break;
		case 's':
			if (!sealed)
				return usage_error("--sealed is an option of show");
			*sealed = true;
			break;
		default: return EX_USAGE;
		}
	}
	return 0;
}

static const char *retention_name(uint32_t flags)
{
	return flags & TN_ARENA_ENTRY_CACHE	     ? "cache"
	       : flags & TN_ARENA_ENTRY_SOFT_PINNED ? "soft"
						    : "pinned";
}

/* Where the tensor's bytes are: "memory", or "disk" (spilled), "restoring" (spilled, and a
 * lookup asked for it), "disk!" (spilled, and its last restore failed). */
static const char *location_name(uint32_t flags)
{
	if (!(flags & TN_ARENA_ENTRY_SPILLED))
		return "memory";
	return flags & TN_ARENA_ENTRY_RESTORING	      ? "restoring"
	       : flags & TN_ARENA_ENTRY_RESTORE_FAILED ? "disk!"
						       : "disk";
}

/* "pinned", "cache", "soft 59s" (the pin's time left), "soft, expired". */
static const char *retention_text(const tn_arena_entry *e, char *buf, size_t len)
{
	if (!(e->flags & TN_ARENA_ENTRY_SOFT_PINNED))
		return retention_name(e->flags);
	int64_t left = e->pin_until - (int64_t)time(NULL);
	if (left > 0)
		snprintf(buf, len, "soft %" PRId64 "s", left);
	else
		snprintf(buf, len, "soft, expired");
	return buf;
}

static int cmd_ls(int argc, char **argv)
{
	int64_t wait_ns;
	int r = wait_options(argc, argv, &wait_ns, NULL);
	if (r)
		return r;
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 2 || argc > 3)
		return usage_error("ls NAME [PREFIX] [--wait SECONDS]");
	tn_arena *a;
	r = open_arena(argv[1], false, &a);
	if (r)
		return r;
	tn_arena_entry *v;
	size_t n;
	/* With --wait, until some name under the prefix is there: the generation read before
	 * each look, so that a publish after it ends the wait at once. */
	for (;;) {
		uint32_t gen = tn_arena_generation(a);
		if ((r = tn_arena_list(a, argc == 3 ? argv[2] : NULL, &v, &n)) || n || !wait_ns)
			break;
		if ((r = tn_arena_wait_change(a, gen, wait_ns)))
			break;
	}
	if (r == TN_ETIMEDOUT) {
		fprintf(stderr, "tensorctl: ls: no tensor%s%s%s was published in arena %s in time\n",
			argc == 3 ? " under '" : "", argc == 3 ? argv[2] : "", argc == 3 ? "'" : "",
			argv[1]);
		tn_arena_unref(a);
		return EX_TIMEOUT;
	}
	if (r) {
		r = fail(r, "ls");
		tn_arena_unref(a);
		return r;
	}
	if (json)
		printf("[");
	else
		printf("%-32s %-9s %-20s %-20s %12s %-6s %-10s %s\n", "NAME", "DTYPE", "SHAPE",
		       "STRIDES", "BYTES", "SEALED", "WHERE", "RETENTION");
	for (size_t i = 0; i < n; i++) {
		const tn_arena_entry *e = &v[i];
		int64_t numel = 1;
		for (int d = 0; d < e->ndim; d++)
			numel *= e->sizes[d];
		uint64_t bytes = (uint64_t)numel * tn_dtype_size(e->dtype);
		bool sealed = e->flags & TN_ARENA_ENTRY_SEALED;
		if (json) {
			printf(i ? ",\n {\"name\": " : "{\"name\": ");
			json_str(e->name);
			printf(", \"dtype\": \"%s\", \"shape\": ", tn_dtype_name(e->dtype));
			json_dims(e->ndim, e->sizes);
			printf(", \"strides\": ");
			json_dims(e->ndim, e->strides);
			printf(", \"storage_offset\": %" PRId64 ", \"bytes\": %" PRIu64
			       ", \"sealed\": %s, \"retention\": \"%s\", \"pin_until\": %" PRId64
			       ", \"last_use_ns\": %" PRIu64 ", \"location\": \"%s\"}",
			       e->storage_offset, bytes, sealed ? "true" : "false",
			       retention_name(e->flags), e->pin_until, e->last_use_ns,
			       location_name(e->flags));
		} else {
			char s1[160], s2[160], kept[64];
			printf("%-32s %-9s %-20s %-20s %12" PRIu64 " %-6s %-10s %s\n", e->name,
			       tn_dtype_name(e->dtype), dims(e->ndim, e->sizes, s1, sizeof(s1)),
			       dims(e->ndim, e->strides, s2, sizeof(s2)), bytes, sealed ? "yes" : "no",
			       location_name(e->flags), retention_text(e, kept, sizeof(kept)));
		}
	}
	if (json)
		printf("]\n");
	free(v);
	tn_arena_unref(a);
	return 0;
}

static int cmd_show(int argc, char **argv)
{
	int64_t wait_ns;
	bool sealed = false;
	int r = wait_options(argc, argv, &wait_ns, &sealed);
	if (r)
		return r;
	argc -= optind - 1;
	argv += optind - 1;
	if (argc != 3)
		return usage_error("show NAME TENSOR [--wait SECONDS] [--sealed]");
	tn_arena *a;
	if (bad_tensor_name(argv[2], &r))
		return r;
	r = open_arena(argv[1], false, &a);
	if (r)
		return r;
	tn_arena_entry e;
	tn_tensor *t = NULL;
	tn_arena_lookup_options lo = { .timeout_ns = wait_ns,
				       .flags = sealed ? TN_ARENA_LOOKUP_SEALED : 0 };
	if ((r = tn_arena_lookup_wait(a, argv[2], &lo, &t, NULL)) ||
	    (r = tn_arena_info(a, argv[2], &e))) {
		r = fail(r, "show");
		tn_tensor_unref(t);
		tn_arena_unref(a);
		return r;
	}
	char *repr = NULL;
	r = tn_tensor_repr(t, &repr);
	if (json) {
		printf("{\"name\": ");
		json_str(e.name);
		printf(", \"dtype\": \"%s\", \"shape\": ", tn_dtype_name(e.dtype));
		json_dims(e.ndim, e.sizes);
		printf(", \"strides\": ");
		json_dims(e.ndim, e.strides);
		printf(", \"storage_offset\": %" PRId64 ", \"block_bytes\": %" PRIu64
		       ", \"sealed\": %s, \"preview\": ",
		       e.storage_offset, e.block_bytes,
		       e.flags & TN_ARENA_ENTRY_SEALED ? "true" : "false");
		json_str(repr ? repr : "");
		printf("}\n");
	} else {
		char s1[160], s2[160];
		printf("%s: %s, shape %s, strides %s, offset %" PRId64 ", %s%s\n", e.name,
		       tn_dtype_name(e.dtype), dims(e.ndim, e.sizes, s1, sizeof(s1)),
		       dims(e.ndim, e.strides, s2, sizeof(s2)), e.storage_offset,
		       e.flags & TN_ARENA_ENTRY_SEALED ? "sealed" : "writable",
		       tn_tensor_is_contiguous(t) ? ", contiguous" : "");
		printf("%s\n", repr ? repr : "(no preview)");
	}
	free(repr);
	tn_tensor_unref(t);
	tn_arena_unref(a);
	return r ? exit_for(r) : 0;
}

static int cmd_rm_seal(int argc, char **argv, bool seal)
{
	if (argc < 3)
		return usage_error(seal ? "seal NAME TENSOR..." : "rm NAME TENSOR...");
	tn_arena *a;
	int r, ret = 0;
	for (int i = 2; i < argc; i++)
		if (bad_tensor_name(argv[i], &r))
			return r;
	if ((r = open_arena(argv[1], true, &a)))
		return r;
	for (int i = 2; i < argc; i++) {
		r = seal ? tn_arena_seal(a, argv[i]) : tn_arena_unpublish(a, argv[i]);
		if (r) {
			ret = fail(r, argv[i]);
			continue;
		}
		if (!quiet && !json)
			printf("%s %s\n", seal ? "sealed" : "removed", argv[i]);
	}
	if (json)
		printf("{\"ok\": %s}\n", ret ? "false" : "true");
	tn_arena_unref(a);
	return ret;
}

/* A size for the watermarks: SIZE as the config file writes it, or N% of @heap. */
static int parse_water(const char *text, uint64_t heap, uint64_t *ret)
{
	size_t n = strlen(text);
	if (n > 1 && text[n - 1] == '%') {
		char *end;
		errno = 0;
		double pct = strtod(text, &end);
		if (errno || end != text + n - 1 || !(pct > 0 && pct <= 100))
			return -1;
		*ret = (uint64_t)((double)heap * pct / 100.0);
		return 0;
	}
	return tnd_parse_size(text, ret);
}

static int cmd_arena_set(int argc, char **argv)
{
	static const struct option o[] = { { "high-water", 1, NULL, 'h' },
					   { "low-water", 1, NULL, 'l' },
					   { "spill", 1, NULL, 's' }, { NULL, 0, NULL, 0 } };
	const char *high_text = NULL, *low_text = NULL, *spill = NULL;
	int c, r;
	optind = 0;
	while ((c = getopt_long(argc, argv, "h:l:s:", o, NULL)) != -1) {
		switch (c) {
		case 'h': high_text = optarg; break;
		case 'l': low_text = optarg; break;
		case 's': spill = optarg; break;
		default: return EX_USAGE;
		}
	}
	if (optind != argc - 1 || (!high_text && !low_text && !spill))
		return usage_error("arena set NAME [--high-water SIZE|N%%] [--low-water SIZE|N%%] "
				   "[--spill on|off]");
	if (spill && strcmp(spill, "on") && strcmp(spill, "off"))
		return usage_error("bad --spill \"%s\" (on or off)", spill);
	tn_arena *a;
	if ((r = open_arena(argv[optind], true, &a)))
		return r;
	tn_arena_stats s;
	uint64_t high, low;
	if ((r = tn_arena_stat(a, &s))) {
		r = fail(r, "arena set");
	} else if (high_text && parse_water(high_text, s.heap_bytes, &high)) {
		r = usage_error("bad --high-water \"%s\" (like 900M, or 90%%)", high_text);
	} else if (low_text && parse_water(low_text, s.heap_bytes, &low)) {
		r = usage_error("bad --low-water \"%s\" (like 800M, or 80%%)", low_text);
	} else if ((high_text || low_text) &&
		   (r = tn_arena_set_watermarks(a, high_text ? high : s.high_water,
						low_text ? low : s.low_water))) {
		r = fail(r, "arena set");
	} else if (spill && (r = tn_arena_set_spill(a, !strcmp(spill, "on")))) {
		r = fail(r, "arena set");
	} else if ((r = tn_arena_stat(a, &s)) == 0) {
		char x[32], y[32];
		if (json)
			printf("{\"high_water\": %" PRIu64 ", \"low_water\": %" PRIu64
			       ", \"spill\": %s}\n", s.high_water, s.low_water,
			       s.spill ? "true" : "false");
		else if (!quiet)
			printf("arena %s: evicts above %s down to %s, %s\n", argv[optind],
			       human(s.high_water, x, sizeof(x)), human(s.low_water, y, sizeof(y)),
			       s.spill ? "to disk (tensord's spill_dir)" : "dropping evicted tensors");
	} else {
		r = fail(r, "arena set");
	}
	tn_arena_unref(a);
	return r;
}

/* pin [--soft SECONDS] and unpin: the retention class of each tensor named. */
static int cmd_pin(int argc, char **argv, bool pin)
{
	static const struct option o[] = { { "soft", 1, NULL, 's' }, { NULL, 0, NULL, 0 } };
	int64_t soft = 0;
	int c, r, ret = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "s:", o, NULL)) != -1) {
		char *end;
		switch (c) {
		case 's':
			errno = 0;
			soft = strtoll(optarg, &end, 10);
			if (!pin || errno || *end || soft < 1)
				return usage_error(pin ? "bad --soft \"%s\" (seconds, 1 or more)"
						       : "--soft is an option of pin", optarg);
			break;
		default: return EX_USAGE;
		}
	}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 3)
		return usage_error(pin ? "pin NAME TENSOR... [--soft SECONDS]" : "unpin NAME TENSOR...");
	for (int i = 2; i < argc; i++)
		if (bad_tensor_name(argv[i], &r))
			return r;
	tn_arena *a;
	if ((r = open_arena(argv[1], true, &a)))
		return r;
	enum tn_arena_retention cls = !pin ? TN_ARENA_CACHE
				      : soft ? TN_ARENA_SOFT_PINNED
					     : TN_ARENA_PINNED;
	for (int i = 2; i < argc; i++) {
		if ((r = tn_arena_set_retention(a, argv[i], cls, soft))) {
			ret = fail(r, argv[i]);
			continue;
		}
		if (quiet || json)
			continue;
		if (cls == TN_ARENA_SOFT_PINNED)
			printf("pinned %s for %" PRId64 " s\n", argv[i], soft);
		else
			printf("%s %s\n", pin ? "pinned" : "unpinned (evictable)", argv[i]);
	}
	if (json)
		printf("{\"ok\": %s}\n", ret ? "false" : "true");
	tn_arena_unref(a);
	return ret;
}

static int cmd_evict(int argc, char **argv)
{
	static const struct option o[] = { { "to", 1, NULL, 't' }, { NULL, 0, NULL, 0 } };
	const char *to = NULL;
	int c, r;
	optind = 0;
	while ((c = getopt_long(argc, argv, "t:", o, NULL)) != -1) {
		switch (c) {
		case 't': to = optarg; break;
		default: return EX_USAGE;
		}
	}
	if (optind != argc - 1)
		return usage_error("evict NAME [--to SIZE|N%%]");
	tn_arena *a;
	if ((r = open_arena(argv[optind], true, &a)))
		return r;
	tn_arena_stats s;
	uint64_t target;
	tn_arena_evict_report rep;
	if ((r = tn_arena_stat(a, &s))) {
		r = fail(r, "evict");
	} else if (to && parse_water(to, s.heap_bytes, &target)) {
		r = usage_error("bad --to \"%s\" (like 100M, or 50%%)", to);
	} else if ((r = tn_arena_evict(a, to ? target : s.low_water, &rep))) {
		r = fail(r, "evict");
	} else if (json) {
		printf("{\"evicted\": %" PRIu64 ", \"evicted_bytes\": %" PRIu64
		       ", \"used_bytes\": %" PRIu64 "}\n", rep.evicted, rep.evicted_bytes,
		       rep.used_bytes);
	} else if (!quiet) {
		char x[32], y[32];
		printf("evicted %" PRIu64 " tensors (%s); %s used\n", rep.evicted,
		       human(rep.evicted_bytes, x, sizeof(x)), human(rep.used_bytes, y, sizeof(y)));
	}
	tn_arena_unref(a);
	return r;
}

static int cmd_metrics(void)
{
	char *text;
	size_t len;
	int r = tn_tensord_metrics(conn, &text, &len);
	if (r)
		return fail(r, "metrics");
	fwrite(text, 1, len, stdout);
	free(text);
	return 0;
}

static int cmd_clients(void)
{
	tn_tensord_client *v;
	size_t n;
	int r = tn_tensord_clients(conn, &v, &n);
	if (r)
		return fail(r, "clients");
	if (json)
		printf("[");
	else
		printf("%6s %8s %-10s %-16s %6s %9s %s\n", "ID", "PID", "USER", "PROGRAM", "ARENAS",
		       "REQUESTS", "CONNECTED");
	for (size_t i = 0; i < n; i++) {
		char u[64], when[64];
		time_t t = (time_t)v[i].connected;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
		if (json) {
			printf("%s{\"id\": %u, \"pid\": %d, \"uid\": %u, \"gid\": %u, \"program\": ",
			       i ? ",\n " : "", v[i].client_id, v[i].pid, v[i].uid, v[i].gid);
			json_str(v[i].program);
			printf(", \"arenas\": %u, \"requests\": %" PRIu64 ", \"connected\": %" PRIu64
			       "}",
			       v[i].narenas, v[i].requests, v[i].connected);
		} else {
			printf("%6u %8d %-10s %-16s %6u %9" PRIu64 " %s\n", v[i].client_id, v[i].pid,
			       user_name(v[i].uid, u, sizeof(u)), v[i].program, v[i].narenas,
			       v[i].requests, when);
		}
	}
	if (json)
		printf("]\n");
	free(v);
	return 0;
}

static int cmd_peer(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "add")) {
		int r = tn_tensord_peer_add(conn, argv[2]);
		if (r)
			return fail(r, "peer add");
		if (json) {
			printf("{\"added\": ");
			json_str(argv[2]);
			printf("}\n");
		} else if (!quiet) {
			printf("peer %s added\n", argv[2]);
		}
		return 0;
	}
	if (argc != 2 || strcmp(argv[1], "list"))
		return usage_error("peer add HOST:PORT | peer list");
	tn_tensord_peer *v;
	size_t n;
	int r = tn_tensord_peer_list(conn, &v, &n);
	if (r)
		return fail(r, "peer list");
	if (json)
		printf("[");
	else
		printf("%-24s %-8s %-14s %8s %5s %-32s %s\n", "PEER", "DIR", "STATE", "RTT(us)",
		       "FAILS", "LANES", "ERROR");
	for (size_t i = 0; i < n; i++) {
		const char *dir = v[i].flags & TN_TENSORD_PEER_DIALED ? "dialed" : "accepted";
		const char *st = tn_tensord_peer_state_name(v[i].state);
		if (json) {
			printf("%s{\"address\": ", i ? ",\n " : "");
			json_str(v[i].address);
			printf(", \"direction\": \"%s\", \"state\": \"%s\", \"since\": %" PRIu64
			       ", \"rtt_us\": %" PRIu64 ", \"failures\": %" PRIu64 ", \"lanes\": ",
			       dir, st, v[i].since, v[i].rtt_us, v[i].failures);
			json_str(v[i].lanes);
			printf(", \"error\": ");
			json_str(v[i].error);
			printf("}");
		} else {
			printf("%-24s %-8s %-14s %8" PRIu64 " %5" PRIu64 " %-32s %s\n", v[i].address,
			       dir, st, v[i].rtt_us, v[i].failures, v[i].lanes[0] ? v[i].lanes : "-",
			       v[i].error[0] ? v[i].error : "-");
		}
	}
	if (json)
		printf("]\n");
	free(v);
	return 0;
}

/* How a transfer's bytes moved (tn_tensord_pull_report.method), in words and for --json. */
static const char *method_name(unsigned m, bool for_json)
{
	switch (m) {
	case TN_TENSORD_PULL_RMA_GET:
		return for_json ? "rma_get" : "RMA get";
	case TN_TENSORD_PULL_DIRECT_READ:
		return for_json ? "direct_read" : "direct read";
	case TN_TENSORD_PULL_ACTIVE_MESSAGE:
		return for_json ? "active_messages" : "active messages";
	default:
		return for_json ? "none" : "nothing to move";
	}
}

/* Print a pull's or a push's report: "pulled SRC into DST: ..." (@verb, @src, @dst). */
static int print_peer_transfer(const char *verb, const char *src, const char *dst,
			       const tn_tensord_pull_report *rep)
{
	double s = (double)rep->elapsed_ns / 1e9;
	if (json) {
		printf("{\"bytes\": %" PRIu64 ", \"elapsed_ns\": %" PRIu64 ", \"method\": \"%s\", "
		       "\"lanes\": ", rep->bytes, rep->elapsed_ns, method_name(rep->method, true));
		json_str(rep->lanes);
		printf("}\n");
	} else if (!quiet) {
		printf("%s %s %s %s: %" PRIu64 " bytes in %.3f ms (%.2f GB/s, %s, %s)\n", verb, src,
		       strcmp(verb, "pulled") ? "to" : "into", dst, rep->bytes, s * 1e3,
		       s > 0 ? (double)rep->bytes / s / 1e9 : 0.0, method_name(rep->method, false),
		       rep->lanes);
	}
	return 0;
}

/* pull PEER:ARENA/NAME [--into ARENA[/NAME]] */
static int cmd_pull(int argc, char **argv)
{
	static const struct option o[] = { { "into", 1, NULL, 'i' }, { NULL, 0, NULL, 0 } };
	const char *into = NULL;
	int ch;
	optind = 0;
	while ((ch = getopt_long(argc, argv, "i:", o, NULL)) != -1) {
		if (ch == 'i')
			into = optarg;
		else
			return usage_error("pull PEER:ARENA/NAME [--into ARENA[/NAME]]");
	}
	if (optind != argc - 1)
		return usage_error("pull PEER:ARENA/NAME [--into ARENA[/NAME]]");
	const char *spec = argv[optind];
	char peer[280], rarena[64], rname[256], arena[64], name[256];
	const char *slash = strchr(spec, '/');
	const char *colon = NULL;
	for (const char *p = spec; slash && p < slash; p++)
		if (*p == ':')
			colon = p;
	if (!slash || !colon || colon == spec || (size_t)(colon - spec) >= sizeof(peer) ||
	    (size_t)(slash - colon - 1) >= sizeof(rarena) || strlen(slash + 1) >= sizeof(rname))
		return usage_error("bad source \"%s\": PEER:ARENA/NAME, PEER being HOST:PORT", spec);
	snprintf(peer, sizeof(peer), "%.*s", (int)(colon - spec), spec);
	snprintf(rarena, sizeof(rarena), "%.*s", (int)(slash - colon - 1), colon + 1);
	snprintf(rname, sizeof(rname), "%s", slash + 1);
	snprintf(arena, sizeof(arena), "%s", rarena);
	snprintf(name, sizeof(name), "%s", rname);
	if (into) {
		const char *s2 = strchr(into, '/');
		size_t al = s2 ? (size_t)(s2 - into) : strlen(into);
		if (!al || al >= sizeof(arena) || (s2 && (!s2[1] || strlen(s2 + 1) >= sizeof(name))))
			return usage_error("bad --into \"%s\": ARENA or ARENA/NAME", into);
		snprintf(arena, sizeof(arena), "%.*s", (int)al, into);
		if (s2)
			snprintf(name, sizeof(name), "%s", s2 + 1);
	}
	tn_tensord_pull_report rep;
	/* NAME ending in '*': a batch of every sealed tensor under the prefix before it. */
	size_t rl = strlen(rname), count = 0;
	bool batch = rl > 1 && rname[rl - 1] == '*';
	if (batch) {
		rname[rl - 1] = 0;
		if (!strcmp(name, spec + (slash + 1 - spec)))
			snprintf(name, sizeof(name), "%s", rname);
	}
	int r = batch ? tn_tensord_pull_prefix(conn, peer, rarena, rname, arena, name, &rep, &count)
		      : tn_tensord_pull(conn, peer, rarena, rname, arena, name, &rep);
	if (r)
		return fail(r, "pull");
	if (batch && !json && !quiet)
		printf("%zu tensors: ", count);
	char src[600], dst[400];
	snprintf(src, sizeof(src), "%s:%s/%s", peer, rarena, rname);
	snprintf(dst, sizeof(dst), "%s/%s", arena, name);
	return print_peer_transfer("pulled", src, dst, &rep);
}

/* push ARENA/NAME PEER:ARENA[/NAME] */
static int cmd_push(int argc, char **argv)
{
	static const char use[] = "push ARENA/NAME PEER:ARENA[/NAME]";
	if (argc != 3)
		return usage_error(use);
	char peer[280], rarena[64], rname[256], arena[64], name[256];
	const char *src = argv[1], *dst = argv[2];
	const char *slash = strchr(src, '/');
	if (!slash || slash == src || (size_t)(slash - src) >= sizeof(arena) || !slash[1] ||
	    strlen(slash + 1) >= sizeof(name))
		return usage_error("bad source \"%s\": ARENA/NAME", src);
	snprintf(arena, sizeof(arena), "%.*s", (int)(slash - src), src);
	snprintf(name, sizeof(name), "%s", slash + 1);
	/* PEER is HOST:PORT: the arena follows the last ':' before the first '/'. */
	const char *dslash = strchr(dst, '/');
	const char *end = dslash ? dslash : dst + strlen(dst);
	const char *colon = NULL;
	for (const char *p = dst; p < end; p++)
		if (*p == ':')
			colon = p;
	if (!colon || colon == dst || (size_t)(colon - dst) >= sizeof(peer) || colon + 1 == end ||
	    (size_t)(end - colon - 1) >= sizeof(rarena) || (dslash && !dslash[1]) ||
	    (dslash && strlen(dslash + 1) >= sizeof(rname)))
		return usage_error("bad destination \"%s\": PEER:ARENA[/NAME], PEER being "
				   "HOST:PORT", dst);
	snprintf(peer, sizeof(peer), "%.*s", (int)(colon - dst), dst);
	snprintf(rarena, sizeof(rarena), "%.*s", (int)(end - colon - 1), colon + 1);
	snprintf(rname, sizeof(rname), "%s", dslash ? dslash + 1 : name);
	tn_tensord_pull_report rep;
	int r = tn_tensord_push(conn, arena, name, peer, rarena, rname, &rep);
	if (r)
		return fail(r, "push");
	char from[400], to[600];
	snprintf(from, sizeof(from), "%s/%s", arena, name);
	snprintf(to, sizeof(to), "%s:%s/%s", peer, rarena, rname);
	return print_peer_transfer("pushed", from, to, &rep);
}

static const char *cuda_state(unsigned state)
{
	if (state & TN_TENSORD_CUDA_OWNER_GONE)
		return "owner-gone";
	if (state & TN_TENSORD_CUDA_WITHDRAWN)
		return "withdrawn";
	if (state & TN_TENSORD_CUDA_DETACHED)
		return "detached";
	return "exported";
}

static int cmd_cuda(int argc, char **argv)
{
	if (argc > 2)
		return usage_error("cuda [NAME]");
	tn_tensord_cuda_export *v = NULL, one;
	size_t n = 1;
	int r;
	if (argc == 2) {
		r = tn_tensord_cuda_stat(conn, argv[1], &one);
		v = &one;
	} else {
		r = tn_tensord_cuda_list(conn, &v, &n);
	}
	if (r)
		return fail(r, "cuda");
	if (json)
		printf(argc == 2 ? "" : "[");
	else
		printf("%-24s %8s %-10s %-8s %-12s %9s %7s %s\n", "NAME", "PID", "USER", "DTYPE",
		       "SIZES", "BYTES", "HOLDERS", "STATE");
	for (size_t i = 0; i < n; i++) {
		const tn_tensord_cuda_export *e = &v[i];
		char u[64], d[128], h[32], uuid[33];
		for (int k = 0; k < 16; k++)
			snprintf(uuid + 2 * k, 3, "%02x", e->device_uuid[k]);
		if (json) {
			printf("%s{\"name\": ", i ? ",\n " : "");
			json_str(e->name);
			printf(", \"id\": %" PRIu64 ", \"owner_pid\": %d, \"owner_uid\": %u, "
			       "\"owner_gid\": %u, \"mode\": \"%04o\", \"dtype\": \"%s\", \"sizes\": ",
			       e->id, e->owner_pid, e->owner_uid, e->owner_gid, e->mode,
			       tn_dtype_name(e->dtype));
			json_dims(e->ndim, e->sizes);
			printf(", \"storage_bytes\": %" PRIu64 ", \"holders\": %u, \"importers\": %u, "
			       "\"state\": \"%s\", \"device_uuid\": \"%s\", \"created\": %" PRIu64 "}",
			       e->storage_bytes, e->holders, e->importers, cuda_state(e->state), uuid,
			       e->created);
		} else {
			printf("%-24s %8d %-10s %-8s %-12s %9s %7u %s\n", e->name, e->owner_pid,
			       user_name(e->owner_uid, u, sizeof(u)), tn_dtype_name(e->dtype),
			       dims(e->ndim, e->sizes, d, sizeof(d)),
			       human(e->storage_bytes, h, sizeof(h)), e->holders,
			       cuda_state(e->state));
		}
	}
	if (json)
		printf(argc == 2 ? "\n" : "]\n");
	if (v != &one)
		free(v);
	return 0;
}

static int cmd_fsck(int argc, char **argv)
{
	bool repair = false;
	const char *name = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--repair"))
			repair = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return usage_error("fsck NAME [--repair]");
	}
	if (!name)
		return usage_error("fsck NAME [--repair]");
	int bad;
	if (bad_arena_name(name, &bad))
		return bad;
	tn_arena_fsck_report rep;
	/* TN_EIO: the check ran and problems remain; the report is written. */
	int r = tn_tensord_fsck(conn, name, repair ? TN_ARENA_FSCK_REPAIR : 0, &rep);
	if (r && r != TN_EIO)
		return fail(r, "fsck");
	if (json) {
		printf("{\"problems\": %" PRIu64 ", \"repaired\": %" PRIu64 ", \"blocks\": %" PRIu64
		       ", \"free_blocks\": %" PRIu64 ", \"orphan_blocks\": %" PRIu64
		       ", \"dead_holds\": %" PRIu64 ", \"dead_clients\": %" PRIu64
		       ", \"bad_names\": %" PRIu64 ", \"first_problem\": ",
		       rep.problems, rep.repaired, rep.blocks, rep.free_blocks, rep.orphan_blocks,
		       rep.dead_holds, rep.dead_clients, rep.bad_names);
		json_str(rep.first_problem);
		printf("}\n");
	} else {
		printf("%s: %" PRIu64 " blocks, %" PRIu64 " free; %" PRIu64 " problems, %" PRIu64
		       " repaired%s%s\n",
		       name, rep.blocks, rep.free_blocks, rep.problems, rep.repaired,
		       rep.problems ? ": " : "", rep.first_problem);
	}
	return rep.problems > rep.repaired ? EX_FSCK : 0;
}

static int cmd_verify(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-')
		return usage_error("verify NAME");
	const char *name = argv[1];
	int bad;
	if (bad_arena_name(name, &bad))
		return bad;
	tn_tensord_verify_report rep;
	/* TN_EIO: bytes changed; the report is written. */
	int r = tn_tensord_verify(conn, name, &rep);
	if (r && r != TN_EIO)
		return fail(r, "verify");
	if (json) {
		printf("{\"sealed\": %" PRIu64 ", \"checked\": %" PRIu64 ", \"changed\": %" PRIu64
		       ", \"digested\": %" PRIu64 ", \"restored\": %" PRIu64 ", \"first_changed\": ",
		       rep.sealed, rep.checked, rep.changed, rep.digested, rep.restored);
		json_str(rep.first_changed);
		printf("}\n");
	} else {
		printf("%s: %" PRIu64 " sealed tensors, %" PRIu64 " checked, %" PRIu64 " changed",
		       name, rep.sealed, rep.checked, rep.changed);
		if (rep.changed)
			printf(" (first: %s)", rep.first_changed);
		if (rep.digested)
			printf("; %" PRIu64 " digested now", rep.digested);
		if (rep.restored)
			printf("; %" PRIu64 " cleared seals set again", rep.restored);
		printf("\n");
	}
	return rep.changed ? EX_FSCK : 0;
}

static int cmd_gc(int argc, char **argv)
{
	if (argc > 2)
		return usage_error("gc [NAME]");
	uint64_t slots = 0, bytes = 0;
	int r;
	if (argc == 2 && bad_arena_name(argv[1], &r))
		return r;
	r = tn_tensord_gc(conn, argc == 2 ? argv[1] : NULL, &slots, &bytes);
	if (r)
		return fail(r, "gc");
	char b[32];
	if (json)
		printf("{\"reclaimed_slots\": %" PRIu64 ", \"freed_bytes\": %" PRIu64 "}\n", slots,
		       bytes);
	else if (!quiet)
		printf("reclaimed %" PRIu64 " slots of dead processes, freed %s\n", slots,
		       human(bytes, b, sizeof(b)));
	return 0;
}

/* A progress bar on stderr when it is a terminal. */
static void progress_bar(uint64_t done, uint64_t total, void *ctx)
{
	const char *what = ctx;
	if (quiet || !isatty(2) || !total)
		return;
	int width = 40, fill = (int)((double)done / (double)total * width);
	char a[32], b[32];
	fprintf(stderr, "\r%s [", what);
	for (int i = 0; i < width; i++)
		fputc(i < fill ? '#' : '.', stderr);
	fprintf(stderr, "] %s / %s", human(done, a, sizeof(a)), human(total, b, sizeof(b)));
	if (done >= total)
		fputc('\n', stderr);
	fflush(stderr);
}

static int parse_format(const char *s, enum tn_tensord_format *f)
{
	if (!strcmp(s, "safetensors"))
		*f = TN_TENSORD_FORMAT_SAFETENSORS;
	else if (!strcmp(s, "npy"))
		*f = TN_TENSORD_FORMAT_NPY;
	else
		return -1;
	return 0;
}

static void print_transfer(const char *verb, const char *file, const tn_tensord_transfer *t)
{
	double s = (double)t->elapsed_ns / 1e9;
	char b[32];
	if (json)
		printf("{\"file\": \"%s\", \"tensors\": %" PRIu64 ", \"bytes\": %" PRIu64
		       ", \"file_bytes\": %" PRIu64 ", \"seconds\": %.6f}\n",
		       file, t->tensors, t->bytes, t->file_bytes, s);
	else if (!quiet)
		printf("%s %" PRIu64 " tensors (%s) %s %s in %.3f s (%.2f GB/s)\n", verb, t->tensors,
		       human(t->bytes, b, sizeof(b)), verb[0] == 'l' ? "from" : "to", file, s,
		       s > 0 ? (double)t->bytes / s / 1e9 : 0.0);
}

static int cmd_load(int argc, char **argv)
{
	static const struct option o[] = { { "prefix", 1, NULL, 'p' }, { "format", 1, NULL, 'F' },
					   { "seal", 0, NULL, 'S' },   { "replace", 0, NULL, 'R' },
					   { "evictable", 0, NULL, 'E' }, { NULL, 0, NULL, 0 } };
	const char *prefix = "";
	enum tn_tensord_format fmt = TN_TENSORD_FORMAT_AUTO;
	unsigned flags = 0;
	int c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "p:F:SRE", o, NULL)) != -1) {
		switch (c) {
		case 'p': prefix = optarg; break;
		case 'F':
			if (parse_format(optarg, &fmt))
				return usage_error("bad format \"%s\" (safetensors, npy)", optarg);
			break;
		case 'S': flags |= TN_TENSORD_SEAL; break;
		case 'R': flags |= TN_TENSORD_REPLACE; break;
		case 'E': flags |= TN_TENSORD_EVICTABLE; break;
		default: return EX_USAGE;
		}
	}
	if (argc - optind != 2)
		return usage_error("load NAME FILE [--prefix P] [--format F] [--seal] [--replace] "
				   "[--evictable]");
	const char *name = argv[optind], *file = argv[optind + 1];
	int bad;
	if (bad_arena_name(name, &bad))
		return bad;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "tensorctl: %s: %s\n", file, strerror(errno));
		return errno == ENOENT ? EX_NOENT : errno == EACCES ? EX_ACCESS : EX_FAIL;
	}
	/* A .npy file has no names: the prefix is the tensor's name, or else the file's name
	 * without its directory and without a ".npy" suffix. */
	char stem[256];
	size_t n = strlen(file);
	bool npy_ext = n > 4 && !strcmp(file + n - 4, ".npy");
	if ((fmt == TN_TENSORD_FORMAT_NPY || (fmt == TN_TENSORD_FORMAT_AUTO && npy_ext)) &&
	    !prefix[0]) {
		const char *base = strrchr(file, '/');
		base = base ? base + 1 : file;
		size_t bl = strlen(base);
		if (bl > 4 && !strcmp(base + bl - 4, ".npy"))
			bl -= 4;
		snprintf(stem, sizeof(stem), "%.*s", (int)(bl < 255 ? bl : 255), base);
		prefix = stem;
	}
	tn_tensord_transfer t;
	int r = tn_tensord_load(conn, name, fd, fmt, prefix, flags, progress_bar, "load", &t);
	close(fd);
	if (r)
		return fail(r, "load");
	print_transfer("loaded", file, &t);
	return 0;
}

static int cmd_save(int argc, char **argv)
{
	static const struct option o[] = { { "format", 1, NULL, 'F' }, { NULL, 0, NULL, 0 } };
	enum tn_tensord_format fmt = TN_TENSORD_FORMAT_AUTO;
	int c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "F:", o, NULL)) != -1) {
		if (c != 'F' || parse_format(optarg, &fmt))
			return usage_error("save NAME FILE [PREFIX] [--format safetensors|npy]");
	}
	if (argc - optind < 2 || argc - optind > 3)
		return usage_error("save NAME FILE [PREFIX] [--format safetensors|npy]");
	const char *name = argv[optind], *file = argv[optind + 1];
	const char *prefix = argc - optind == 3 ? argv[optind + 2] : "";
	int bad;
	if (bad_arena_name(name, &bad))
		return bad;
	size_t n = strlen(file);
	if (fmt == TN_TENSORD_FORMAT_AUTO)
		fmt = n > 4 && !strcmp(file + n - 4, ".npy") ? TN_TENSORD_FORMAT_NPY
							     : TN_TENSORD_FORMAT_SAFETENSORS;
	int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "tensorctl: %s: %s\n", file, strerror(errno));
		return errno == EACCES ? EX_ACCESS : EX_FAIL;
	}
	tn_tensord_transfer t;
	int r = tn_tensord_save(conn, name, fd, fmt, prefix, 0, progress_bar, "save", &t);
	close(fd);
	if (r) {
		unlink(file); /* no half-written file is left */
		return fail(r, "save");
	}
	print_transfer("saved", file, &t);
	return 0;
}

static int cmd_shutdown(void)
{
	int r = tn_tensord_shutdown(conn);
	if (r)
		return fail(r, "shutdown");
	if (json)
		printf("{\"stopped\": true}\n");
	else if (!quiet)
		printf("tensord is stopping\n");
	return 0;
}

struct ops_ctx {
	size_t n;
};

static int print_op(const tn_op *op, void *ctx)
{
	struct ops_ctx *k = ctx;
	const char *schema = tn_schema_str(tn_op_schema(op));
	if (json) {
		printf("%s{\"name\": ", k->n ? ",\n " : "");
		json_str(tn_op_name(op));
		printf(", \"schema\": ");
		json_str(schema);
		printf(", \"kernels\": [");
		bool first = true;
		for (int key = 0; key < TN_NUM_DISPATCH_KEYS; key++)
			if (tn_op_has_kernel(op, (enum tn_dispatch_key)key)) {
				printf("%s\"%s\"", first ? "" : ", ",
				       tn_dispatch_key_name((enum tn_dispatch_key)key));
				first = false;
			}
		printf("]}");
	} else {
		char keys[64] = "";
		for (int key = 0; key < TN_NUM_DISPATCH_KEYS; key++)
			if (tn_op_has_kernel(op, (enum tn_dispatch_key)key)) {
				if (keys[0])
					strcat(keys, ",");
				strcat(keys, tn_dispatch_key_name((enum tn_dispatch_key)key));
			}
		printf("%-14s %s\n", keys[0] ? keys : "-", schema);
	}
	k->n++;
	return 0;
}

static int cmd_ops(void)
{
	struct ops_ctx k = { 0 };
	if (json)
		printf("[");
	else
		printf("%-14s %s\n", "KERNELS", "SCHEMA");
	int r = tn_op_foreach(print_op, &k);
	if (json)
		printf("]\n");
	else if (!quiet)
		printf("%zu operators; CPU kernels built for %s\n", k.n,
		       tn_cpu_capability_name(tn_cpu_capability()));
	return r < 0 ? fail(r, "ops") : 0;
}

int main(int argc, char **argv)
{
	static const struct option o[] = { { "socket", 1, NULL, 's' }, { "json", 0, NULL, 'j' },
					   { "quiet", 0, NULL, 'q' },  { "help", 0, NULL, 'h' },
					   { "version", 0, NULL, 'V' }, { NULL, 0, NULL, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "+s:jqhV", o, NULL)) != -1) {
		switch (c) {
		case 's': socket_path = optarg; break;
		case 'j': json = true; break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("tensorctl %s\n", tn_version()); return 0;
		default: usage(stderr); return EX_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	argc -= optind;
	argv += optind;
	const char *cmd = argv[0];
	if (!strcmp(cmd, "ops"))
		return argc == 1 ? cmd_ops() : usage_error("ops takes no arguments");
	static const char *const known[] = { "status", "arena", "ls", "show", "load", "save",
					     "rm", "seal", "pin", "unpin", "evict", "clients",
					     "metrics", "top", "fsck", "verify", "gc",
					     "shutdown", "cuda", "peer", "pull", "push" };
	bool ok = false;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		ok |= !strcmp(cmd, known[i]);
	if (!ok)
		return usage_error("unknown command \"%s\"", cmd);
	if (!strcmp(cmd, "arena") && argc < 2)
		return usage_error("arena create|list|stat|destroy|grant|set ...");
	int r = connect_daemon();
	if (r)
		return r;
	if (!strcmp(cmd, "status"))
		r = argc == 1 ? cmd_status() : usage_error("status takes no arguments");
	else if (!strcmp(cmd, "arena")) {
		const char *sub = argv[1];
		if (!strcmp(sub, "create"))
			r = cmd_arena_create(argc - 1, argv + 1);
		else if (!strcmp(sub, "list"))
			r = argc == 2 ? cmd_arena_list() : usage_error("arena list");
		else if (!strcmp(sub, "stat"))
			r = argc == 3 ? cmd_arena_stat(argv[2]) : usage_error("arena stat NAME");
		else if (!strcmp(sub, "destroy"))
			r = cmd_arena_destroy(argc - 1, argv + 1);
		else if (!strcmp(sub, "grant"))
			r = cmd_arena_grant(argc - 1, argv + 1);
		else if (!strcmp(sub, "set"))
			r = cmd_arena_set(argc - 1, argv + 1);
		else
			r = usage_error("unknown arena command \"%s\"", sub);
	} else if (!strcmp(cmd, "ls"))
		r = cmd_ls(argc, argv);
	else if (!strcmp(cmd, "show"))
		r = cmd_show(argc, argv);
	else if (!strcmp(cmd, "load"))
		r = cmd_load(argc, argv);
	else if (!strcmp(cmd, "save"))
		r = cmd_save(argc, argv);
	else if (!strcmp(cmd, "rm"))
		r = cmd_rm_seal(argc, argv, false);
	else if (!strcmp(cmd, "seal"))
		r = cmd_rm_seal(argc, argv, true);
	else if (!strcmp(cmd, "pin"))
		r = cmd_pin(argc, argv, true);
	else if (!strcmp(cmd, "unpin"))
		r = cmd_pin(argc, argv, false);
	else if (!strcmp(cmd, "evict"))
		r = cmd_evict(argc, argv);
	else if (!strcmp(cmd, "metrics"))
		r = argc == 1 ? cmd_metrics() : usage_error("metrics takes no arguments");
	else if (!strcmp(cmd, "top"))
		r = tnctl_top(conn, argc, argv);
	else if (!strcmp(cmd, "clients"))
		r = argc == 1 ? cmd_clients() : usage_error("clients takes no arguments");
	else if (!strcmp(cmd, "fsck"))
		r = cmd_fsck(argc, argv);
	else if (!strcmp(cmd, "verify"))
		r = cmd_verify(argc, argv);
	else if (!strcmp(cmd, "gc"))
		r = cmd_gc(argc, argv);
	else if (!strcmp(cmd, "cuda"))
		r = cmd_cuda(argc, argv);
	else if (!strcmp(cmd, "peer"))
		r = cmd_peer(argc, argv);
	else if (!strcmp(cmd, "pull"))
		r = cmd_pull(argc, argv);
	else if (!strcmp(cmd, "push"))
		r = cmd_push(argc, argv);
	else if (!strcmp(cmd, "shutdown"))
		r = argc == 1 ? cmd_shutdown() : usage_error("shutdown takes no arguments");
	tn_tensord_close(conn);
	return r;
}
