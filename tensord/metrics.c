/* SPDX-License-Identifier: MIT */
/*
 * The daemon's figures in the Prometheus text exposition format (version 0.0.4): what
 * `tensorctl metrics` prints (the METRICS request) and what a scraper reads. One family per
 * metric, each with its HELP and TYPE lines, its samples together; label values escaped as the
 * format says (backslash, double quote, line feed).
 *
 * Arenas: their geometry and use from tn_arena_stat under the arena's lock (an arena whose lock
 * a client holds is left out of that scrape, never waited for), resident bytes from the last
 * residency reading (at most a second old), the eviction and repair counters kept in the file.
 * The daemon: requests and the time its loop spent on each, by operation (a histogram), the
 * connections, the io_uring operations in flight, reclamations and evictions since its start.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

const double tnd_latency_bounds[TND_LAT_BUCKETS] = { 1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3,
						     4e-3, 16e-3, 64e-3, 256e-3, 1.0 };

void tnd_metrics_observe(unsigned op, uint64_t ns)
{
	if (op >= TND_OP_MAX_)
		return;
	struct tnd_op_stats *s = &tnd_d.ops[op];
	s->count++;
	s->sum_ns += ns;
	double sec = (double)ns * 1e-9;
	for (int b = 0; b < TND_LAT_BUCKETS; b++)
		if (sec <= tnd_latency_bounds[b])
			s->buckets[b]++; /* cumulative, as the format counts them */
}

/* A growing text buffer; a failed growth sticks (the render then fails whole). */
struct out {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	if (o->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt,
				  ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if (o->buf && o->len + (size_t)n < o->cap) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 16384;
		while (cap < o->len + (size_t)n + 1)
			cap *= 2;
		char *nb = realloc(o->buf, cap);
		if (!nb) {
			o->oom = true;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
}

/* A label value, escaped: \\, \" and \n. */
static const char *esc(const char *s, char *buf, size_t cap)
{
	size_t n = 0;
	for (; *s && n + 3 < cap; s++) {
		if (*s == '\\' || *s == '"') {
			buf[n++] = '\\';
			buf[n++] = *s;
		} else if (*s == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else {
			buf[n++] = *s;
		}
	}
	buf[n] = 0;
	return buf;
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The figures of one arena the scrape may show, read once. */
struct arena_row {
	const struct tnd_arena *ar;
	tn_arena_stats s;
	uint64_t resident_bytes;
	tn_arena_client *clients;
	size_t nclients;
};

/* One gauge or counter over every arena row: @field picks the value. */
static void arena_family(struct out *o, const struct arena_row *rows, size_t n, const char *name,
			 const char *type, const char *help,
			 uint64_t (*field)(const struct arena_row *))
{
	family(o, name, type, help);
	char e[2 * TND_NAME_SIZE];
	for (size_t i = 0; i < n; i++)
		put(o, "%s{arena=\"%s\"} %" PRIu64 "\n", name, esc(rows[i].ar->name, e, sizeof(e)),
		    field(&rows[i]));
}

#define FIELD(fname, expr)                                                                       \
	static uint64_t fname(const struct arena_row *r)                                         \
	{                                                                                        \
		return (expr);                                                                   \
	}
FIELD(f_size, r->s.size)
FIELD(f_heap, r->s.heap_bytes)
FIELD(f_used, r->s.used_bytes)
FIELD(f_free, r->s.free_bytes)
FIELD(f_largest, r->s.largest_free)
FIELD(f_held, r->s.held_bytes)
FIELD(f_pinned, r->s.pinned_bytes)
FIELD(f_evictable, r->s.evictable_bytes)
FIELD(f_resident, r->resident_bytes)
FIELD(f_high, r->s.high_water)
FIELD(f_low, r->s.low_water)
FIELD(f_names, r->s.names)
FIELD(f_max_names, r->s.max_names)
FIELD(f_clients, r->s.clients)
FIELD(f_evictions, r->s.evictions)
FIELD(f_evicted, r->s.evicted_bytes)
FIELD(f_spill, r->s.spill)
FIELD(f_spilled_names, r->s.spilled_names)
FIELD(f_spilled_bytes, r->s.spilled_bytes)
FIELD(f_spills, r->s.spills)
FIELD(f_spilled_total, r->s.spilled_total)
FIELD(f_restores, r->s.restores)
FIELD(f_restore_failures, r->s.restore_failures)
FIELD(f_reclaimed, r->s.reclaimed_slots)
FIELD(f_repairs, r->s.lock_repairs)
FIELD(f_allocs, r->s.num_allocs)
FIELD(f_frees, r->s.num_frees)
#undef FIELD

static const struct {
	const char *name, *type, *help;
	uint64_t (*field)(const struct arena_row *);
} arena_metrics[] = {
	{ "tensord_arena_size_bytes", "gauge", "Bytes of the arena's file.", f_size },
	{ "tensord_arena_heap_bytes", "gauge", "Bytes of the arena's heap.", f_heap },
	{ "tensord_arena_used_bytes", "gauge", "Bytes in allocated blocks, headers included.",
	  f_used },
	{ "tensord_arena_free_bytes", "gauge", "Bytes in free blocks.", f_free },
	{ "tensord_arena_largest_free_bytes", "gauge", "Usable bytes of the largest free block.",
	  f_largest },
	{ "tensord_arena_held_bytes", "gauge",
	  "Used bytes in blocks a process holds (looked up or allocated).", f_held },
	{ "tensord_arena_pinned_bytes", "gauge",
	  "Used bytes in blocks nobody holds that pinned names keep.", f_pinned },
	{ "tensord_arena_evictable_bytes", "gauge",
	  "Used bytes in blocks nobody holds under one evictable name.", f_evictable },
	{ "tensord_arena_resident_bytes", "gauge",
	  "Bytes of the arena's pages in memory (read at most a second ago).", f_resident },
	{ "tensord_arena_high_water_bytes", "gauge", "Used bytes above which tensord evicts.",
	  f_high },
	{ "tensord_arena_low_water_bytes", "gauge", "Used bytes down to which tensord evicts.",
	  f_low },
	{ "tensord_arena_names", "gauge", "Published names.", f_names },
	{ "tensord_arena_max_names", "gauge", "The directory's capacity.", f_max_names },
	{ "tensord_arena_clients", "gauge", "Attached processes (tensord included).", f_clients },
	{ "tensord_arena_evictions_total", "counter",
	  "Tensors evicted since the arena was created.", f_evictions },
	{ "tensord_arena_evicted_bytes_total", "counter",
	  "Bytes freed by evictions since the arena was created.", f_evicted },
	{ "tensord_arena_spill", "gauge",
	  "1 when the arena's evicted tensors are written to disk, 0 when they are dropped.",
	  f_spill },
	{ "tensord_arena_spilled_names", "gauge", "Tensors on disk (spilled) now.",
	  f_spilled_names },
	{ "tensord_arena_spilled_bytes", "gauge", "Bytes of the tensors on disk now.",
	  f_spilled_bytes },
	{ "tensord_arena_spills_total", "counter",
	  "Tensors written to disk since the arena was created.", f_spills },
	{ "tensord_arena_spilled_bytes_total", "counter",
	  "Bytes written to disk by spills since the arena was created.", f_spilled_total },
	{ "tensord_arena_restores_total", "counter",
	  "Spilled tensors read back since the arena was created.", f_restores },
	{ "tensord_arena_restore_failures_total", "counter",
	  "Restores that failed since the arena was created.", f_restore_failures },
	{ "tensord_arena_reclaimed_slots_total", "counter",
	  "Client slots of dead processes reclaimed since the arena was created.", f_reclaimed },
	{ "tensord_arena_lock_repairs_total", "counter",
	  "Changes of dead lock holders rolled back since the arena was created.", f_repairs },
	{ "tensord_arena_allocations_total", "counter", "Blocks allocated since creation.",
	  f_allocs },
	{ "tensord_arena_frees_total", "counter", "Blocks freed since creation.", f_frees },
};

static void render_ops(struct out *o)
{
	family(o, "tensord_requests_total", "counter", "Requests served, by operation.");
	for (unsigned op = 1; op < TND_OP_MAX_; op++)
		if (tnd_d.ops[op].count)
			put(o, "tensord_requests_total{op=\"%s\"} %" PRIu64 "\n", tnd_op_name(op),
			    tnd_d.ops[op].count);
	family(o, "tensord_request_duration_seconds", "histogram",
	       "Time the daemon's loop spent on a request, by operation (a load or save runs on "
	       "in a worker).");
	for (unsigned op = 1; op < TND_OP_MAX_; op++) {
		const struct tnd_op_stats *s = &tnd_d.ops[op];
		if (!s->count)
			continue;
		const char *nm = tnd_op_name(op);
		for (int b = 0; b < TND_LAT_BUCKETS; b++)
			put(o, "tensord_request_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %" PRIu64
			    "\n", nm, tnd_latency_bounds[b], s->buckets[b]);
		put(o, "tensord_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64
		    "\n", nm, s->count);
		put(o, "tensord_request_duration_seconds_sum{op=\"%s\"} %.9f\n", nm,
		    (double)s->sum_ns * 1e-9);
		put(o, "tensord_request_duration_seconds_count{op=\"%s\"} %" PRIu64 "\n", nm,
		    s->count);
	}
}

static void render_daemon(struct out *o)
{
	struct tnd_peer_counts pc;
	tnd_peers_counts(&pc);
	const struct {
		const char *name, *type, *help;
		uint64_t value;
	} rows[] = {
		{ "tensord_start_time_seconds", "gauge", "When the daemon started, since the epoch.",
		  tnd_d.started },
		{ "tensord_connections", "gauge", "Client connections open.", tnd_d.nclients },
		{ "tensord_arenas", "gauge", "Arenas the daemon owns.", tnd_d.narenas },
		{ "tensord_protocol_errors_total", "counter",
		  "Connections dropped for a malformed or out-of-order message.",
		  tnd_d.protocol_errors },
		{ "tensord_reclaimed_slots_total", "counter",
		  "Client slots of dead processes the daemon reclaimed since it started.",
		  tnd_d.reclaimed_slots },
		{ "tensord_evictions_total", "counter",
		  "Tensors the daemon evicted above high watermarks since it started.",
		  tnd_d.evictions },
		{ "tensord_evicted_bytes_total", "counter",
		  "Bytes the daemon's evictions freed since it started.", tnd_d.evicted_bytes },
		{ "tensord_spills_total", "counter",
		  "Tensors the daemon wrote to disk since it started.", tnd_d.spills },
		{ "tensord_spill_failures_total", "counter",
		  "Spills that failed (the tensor stayed in memory) since the daemon started.",
		  tnd_d.spill_failures },
		{ "tensord_restores_total", "counter",
		  "Spilled tensors the daemon read back since it started.", tnd_d.restores },
		{ "tensord_restored_bytes_total", "counter",
		  "Bytes the daemon read back since it started.", tnd_d.restored_bytes },
		{ "tensord_restore_failures_total", "counter",
		  "Restores that failed since the daemon started.", tnd_d.restore_failures },
		{ "tensord_spill_quota_refusals_total", "counter",
		  "Spills not made because they would pass the owner's max_spill_bytes_per_user.",
		  tnd_d.spill_quota_refusals },
		{ "tensord_http_scrapes_total", "counter",
		  "GET /metrics requests the HTTP endpoint answered (metrics_http).",
		  tnd_http_scrapes() },
		{ "tensord_http_refused_total", "counter",
		  "HTTP requests refused: another method or path, or no rendering in time.",
		  tnd_http_refused() },
		{ "tensord_peers_ready", "gauge",
		  "Peer connections authenticated and ready (libtensor-peers(7)).", pc.ready },
		{ "tensord_peer_pulls_total", "counter",
		  "Pulls from peers that published their tensor since the daemon started.",
		  pc.pulls },
		{ "tensord_peer_pull_failures_total", "counter",
		  "Pulls from peers that failed since the daemon started.", pc.pull_failures },
		{ "tensord_peer_pulled_bytes_total", "counter",
		  "Bytes pulled from peers since the daemon started.", pc.pulled_bytes },
		{ "tensord_peer_pushes_total", "counter",
		  "Pushes to peers that the peer published since the daemon started.", pc.pushes },
		{ "tensord_peer_push_failures_total", "counter",
		  "Pushes to peers that failed since the daemon started.", pc.push_failures },
		{ "tensord_peer_pushed_bytes_total", "counter",
		  "Bytes pushed to peers since the daemon started.", pc.pushed_bytes },
		{ "tensord_peer_pushes_received_total", "counter",
		  "Pushes from peers published here since the daemon started.", pc.received },
		{ "tensord_peer_received_bytes_total", "counter",
		  "Bytes pushed here by peers since the daemon started.", pc.received_bytes },
		{ "tensord_peer_protocol_errors_total", "counter",
		  "Peer connections dropped for a malformed or out-of-order frame.",
		  pc.protocol_errors },
		{ "tensord_peer_messages_dropped_total", "counter",
		  "Active messages from peers that no transfer waited for (or of another length).",
		  pc.dropped },
		{ "tensord_peer_refused_total", "counter",
		  "Peer connections refused: a proof that does not match, or too many handshakes.",
		  pc.refused },
		{ "tensord_uring_in_flight", "gauge",
		  "io_uring operations submitted and not yet completed (the queue depth).",
		  tnd_loop_in_flight() },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		family(o, rows[i].name, rows[i].type, rows[i].help);
		put(o, "%s %" PRIu64 "\n", rows[i].name, rows[i].value);
	}
	family(o, "tensord_spill_seconds_total", "counter",
	       "Time the spill workers spent writing tensors to disk.");
	put(o, "tensord_spill_seconds_total %.9f\n", (double)tnd_d.spill_ns * 1e-9);
	family(o, "tensord_restore_seconds_total", "counter",
	       "Time the spill workers spent reading tensors back.");
	put(o, "tensord_restore_seconds_total %.9f\n", (double)tnd_d.restore_ns * 1e-9);
}

static void render_clients(struct out *o, const struct tnd_client *viewer)
{
	char e[64];
	family(o, "tensord_client_requests_total", "counter", "Requests of each connection.");
	for (const struct tnd_client *c = tnd_d.clients; c; c = c->next) {
		if (c->closing || (viewer && !tnd_privileged(viewer) && c->uid != viewer->uid))
			continue;
		put(o, "tensord_client_requests_total{client=\"%u\",pid=\"%d\",program=\"%s\"} %"
		    PRIu64 "\n", c->id, (int)c->pid, esc(c->program, e, sizeof(e)), c->requests);
	}
}

static void render_holds(struct out *o, const struct arena_row *rows, size_t n)
{
	char e[2 * TND_NAME_SIZE];
	family(o, "tensord_arena_client_held_bytes", "gauge",
	       "Bytes of the blocks each attached process holds, by arena.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < rows[i].nclients; k++) {
			const tn_arena_client *cl = &rows[i].clients[k];
			put(o, "tensord_arena_client_held_bytes{arena=\"%s\",pid=\"%d\",slot=\"%d\"} %"
			    PRIu64 "\n", esc(rows[i].ar->name, e, sizeof(e)), (int)cl->pid, cl->slot,
			    cl->held_bytes);
		}
	family(o, "tensord_arena_client_lookups_total", "counter",
	       "Lookups each attached process made in the arena since it attached.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < rows[i].nclients; k++) {
			const tn_arena_client *cl = &rows[i].clients[k];
			put(o, "tensord_arena_client_lookups_total{arena=\"%s\",pid=\"%d\",slot=\"%d\"} %"
			    PRIu64 "\n", esc(rows[i].ar->name, e, sizeof(e)), (int)cl->pid, cl->slot,
			    cl->lookups);
		}
}

/* Per owner of the arenas shown: what the quotas of tensord.conf(5) count. */
static void render_users(struct out *o, const struct arena_row *rows, size_t n)
{
	static const struct {
		const char *name, *help;
	} fams[] = {
		{ "tensord_user_arenas", "Arenas each user owns (max_arenas_per_user)." },
		{ "tensord_user_arena_bytes",
		  "Bytes of the arenas each user owns, resident in memory (max_bytes_per_user)." },
		{ "tensord_user_names",
		  "Directory capacity of the arenas each user owns (max_names_per_user)." },
		{ "tensord_user_spilled_bytes",
		  "Bytes spilled to disk from the arenas each user owns (max_spill_bytes_per_user)." },
	};
	for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
		family(o, fams[f].name, "gauge", fams[f].help);
		for (size_t i = 0; i < n; i++) {
			uint32_t uid = rows[i].ar->owner_uid;
			bool first = true;
			for (size_t k = 0; k < i && first; k++)
				first = rows[k].ar->owner_uid != uid;
			if (!first)
				continue;
			uint64_t v = 0;
			for (size_t k = i; k < n; k++) {
				if (rows[k].ar->owner_uid != uid)
					continue;
				v += f == 0 ? 1 : f == 1 ? rows[k].ar->size : f == 2 ? rows[k].s.max_names
										: rows[k].s.spilled_bytes;
			}
			put(o, "%s{uid=\"%u\"} %" PRIu64 "\n", fams[f].name, (unsigned)uid, v);
		}
	}
}

int tnd_metrics_render(const struct tnd_client *viewer, char **ret_text, size_t *ret_len)
{
	struct out o = { 0 };
	size_t n = 0;
	struct arena_row *rows = calloc(tnd_d.narenas ? tnd_d.narenas : 1, sizeof(*rows));
	if (!rows)
		return TN_ENOMEM;
	for (struct tnd_arena *ar = tnd_d.arenas; ar && n < tnd_d.narenas; ar = ar->next) {
		if ((viewer && !(tnd_access_of(ar, viewer) & (TND_ACC_READ | TND_ACC_ADMIN))) ||
		    !tnd_arena_intact(ar) || !tnd_arena_lockable(ar))
			continue;
		struct arena_row *r = &rows[n];
		if (tnd_arena_locked(ar, tn_arena_stat(ar->a, &r->s)))
			continue;
		r->ar = ar;
		tnd_arena_residency(ar);
		for (uint32_t k = 0; k < ar->nnodes; k++)
			r->resident_bytes += ar->resident[k] * r->s.page_size;
		r->clients = malloc(TN_ARENA_MAX_CLIENTS * sizeof(*r->clients));
		int k = r->clients ? tnd_arena_locked(ar, tn_arena_clients(ar->a, r->clients,
									    TN_ARENA_MAX_CLIENTS))
				   : -1;
		r->nclients = k < 0 ? 0 : (size_t)k < TN_ARENA_MAX_CLIENTS ? (size_t)k
									 : TN_ARENA_MAX_CLIENTS;
		n++;
	}
	render_daemon(&o);
	render_ops(&o);
	for (size_t i = 0; i < sizeof(arena_metrics) / sizeof(arena_metrics[0]); i++)
		arena_family(&o, rows, n, arena_metrics[i].name, arena_metrics[i].type,
			     arena_metrics[i].help, arena_metrics[i].field);
	render_holds(&o, rows, n);
	render_users(&o, rows, n);
	render_clients(&o, viewer);
	for (size_t i = 0; i < n; i++)
		free(rows[i].clients);
	free(rows);
	tn_clear_error();
	if (o.oom) {
		free(o.buf);
		return TN_ENOMEM;
	}
	*ret_text = o.buf;
	*ret_len = o.len;
	return 0;
}
