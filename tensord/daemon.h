/* SPDX-License-Identifier: MIT */
/*
 * tensord's internal interfaces: configuration (config.c), logging (log.c), the SIGBUS guard
 * (guard.c), the CUDA export table (cudashare.c), and the daemon's own records and state
 * (struct tnd_arena, struct tnd_client, tnd_d), which its files share.
 */
#ifndef TENSORD_DAEMON_H
#define TENSORD_DAEMON_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include <tensor.h>

#include "proto.h"

enum tnd_log_level { TND_LOG_ERROR = 0, TND_LOG_WARN = 1, TND_LOG_INFO = 2, TND_LOG_DEBUG = 3 };
enum tnd_log_target { TND_LOG_STDERR = 0, TND_LOG_SYSLOG = 1 };
enum tnd_hugepages { TND_HUGE_NO = 0, TND_HUGE_YES = 1, TND_HUGE_REQUIRE = 2 };

#define TND_MAX_CREATORS 64
#define TND_MAX_PEERS 32

struct tnd_config {
	char socket[108];          /* "" until resolved */
	char arena_dir[PATH_MAX];  /* "" : the default for the daemon's uid */
	char hugepage_dir[PATH_MAX]; /* "" : the first hugetlbfs mount */
	uint64_t default_arena_size;
	uint64_t max_arena_size;   /* 0: no limit */
	unsigned max_arenas;
	unsigned max_clients;
	/* Per user (root and the daemon's own user are not limited). */
	unsigned max_clients_per_user;
	/* Connections that have not said HELLO: dropped after hello_timeout_ms, and at most
	 * max_hello_pending of them per user (root and the daemon's user aside) at once. */
	unsigned hello_timeout_ms;
	unsigned max_hello_pending;
	/* Client slots of one arena: one user other than its owner holds at most
	 * max_slots_per_user, and the last reserved_slots free ones are its owner's and root's. */
	unsigned max_slots_per_user;
	unsigned reserved_slots;
	unsigned max_arenas_per_user;
	uint64_t max_bytes_per_user; /* 0: no limit */
	uint64_t max_names_per_user; /* directory capacity of the arenas one user owns; 0: none */
	uint64_t max_spill_bytes_per_user; /* bytes spilled from them to disk; 0: no limit */
	/* create_users: everyone when create_all, else these uids and gids. */
	bool create_all;
	unsigned ncreate_uids, ncreate_gids;
	uint32_t create_uids[TND_MAX_CREATORS];
	uint32_t create_gids[TND_MAX_CREATORS];
	enum tn_numa_policy numa_policy;
	uint64_t numa_nodes;
	enum tnd_hugepages hugepages;
	unsigned reclaim_interval_ms;
	/* How often arenas are checked against their high watermark (tnd_evict_check). */
	unsigned evict_interval_ms;
	/* Where arenas in spill mode write evicted tensors, one directory per arena; "" : no
	 * spilling. */
	char spill_dir[PATH_MAX];
	/* Where GET /metrics is served over HTTP: "PORT" (on 127.0.0.1), "HOST:PORT",
	 * "[V6]:PORT"; "" : not served. */
	char metrics_http[280];
	/* Peers (peers.c, libtensor-peers(7)): where tensord listens for peer daemons ("" : it
	 * does not), the shared secret's file ("" : peers are off), the peers it dials, the
	 * arenas peers may pull from, those they may push into, and the time after which a
	 * silent peer is dropped. */
	char peer_listen[280];
	char peer_secret[PATH_MAX];
	unsigned npeers, nexports, nimports;
	char peers[TND_MAX_PEERS][280];
	char exports[TND_MAX_PEERS][TND_NAME_SIZE];
	char imports[TND_MAX_PEERS][TND_NAME_SIZE];
	unsigned peer_timeout_ms;
	unsigned peer_transfer_timeout_ms; /* a pull's or a push's deadline; 0: none */
	bool peer_direct_read; /* read a same-host peer's blocks with process_vm_readv */
	enum tnd_log_level log_level;
	enum tnd_log_target log_target;
	/* Which keys the file set (so command-line options and defaults combine right). */
	bool set_socket, set_log_level, set_log_target;
};

/* config.c */
void tnd_config_defaults(struct tnd_config *cfg);
/* Parse @len bytes of tensord.conf text named @file into @cfg (defaults already in it).
 * Returns 0, or -1 with "FILE:LINE: message" in @err. Never reads past @len. */
int tnd_config_parse(struct tnd_config *cfg, const char *text, size_t len, const char *file,
		     char *err, size_t errlen);
/* Read and parse @path; a missing file is an error only when @must_exist. */
int tnd_config_load(struct tnd_config *cfg, const char *path, bool must_exist, char *err,
		    size_t errlen);
/* "4G", "256MiB", "1048576" -> bytes; -1 when malformed or overflowing. */
int tnd_parse_size(const char *s, uint64_t *ret);
/* "default", "local", "bind:0,2-3", "interleave:0-1", "preferred:1". */
int tnd_parse_numa(const char *s, enum tn_numa_policy *ret_policy, uint64_t *ret_nodes);
/* "HOST:PORT" or "[V6]:PORT" with a port of 1 to 65535 (peer_listen, peer, PEER_ADD). */
bool tnd_peer_address_ok(const char *s);
/* http.c: "PORT" (127.0.0.1), "HOST:PORT", "[V6]:PORT" -> a socket address; 0 or -1 with
 * *why set (getaddrinfo's message). */
struct sockaddr_storage;
int tnd_resolve(const char *spec, struct sockaddr_storage *ret, socklen_t *ret_len,
		const char **why);

/* guard.c: the SIGBUS guard over the daemon's arena mappings (see there). */
struct tnd_guard {
	int rw, ro; /* table entries of the two mappings, or -1 */
};
/* Install the SIGBUS handler; 0 or -errno. */
int tnd_guard_init(void);
/* Register the mappings of @a; 0, or -EINVAL/-ENOSPC (then nothing is registered). */
int tnd_guard_add(tn_arena *a, struct tnd_guard *ret);
/* Stop guarding; the handle's mappings must be kept if they were hit. */
void tnd_guard_forget(struct tnd_guard *g);
/* Whether an access past the end of the file was caught in these mappings. */
bool tnd_guard_hit(const struct tnd_guard *g);
/* Accesses caught since the start. */
uint64_t tnd_guard_faults(void);

/* cudashare.c: the table of CUDA exports (the CUDA_* operations of proto.h). Records belong to
 * processes (pid and start time); errors are libtensor codes with tn_last_error() set. */
struct tnd_cuda_export;
struct tnd_cuda_ref;
struct tnd_cuda_info;
struct tnd_peer {
	pid_t pid;
	uint64_t start_time;
	uint32_t uid, gid;
	bool privileged; /* root or the daemon's user */
	int ngroups;
	const gid_t *groups;
};
/* Read the table kept in @dir; @connected tells whether a process has a connection open. */
void tnd_cuda_init(const char *dir, bool (*connected)(pid_t pid, uint64_t start_time));
void tnd_cuda_fini(void);
int tnd_cuda_export(const struct tnd_peer *p, const struct tnd_cuda_export *m,
		    struct tnd_cuda_info *ret);
int tnd_cuda_import(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
		    struct tnd_cuda_info *ret);
int tnd_cuda_release(const struct tnd_peer *p, const struct tnd_cuda_ref *m);
int tnd_cuda_unexport(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
		      struct tnd_cuda_info *ret);
int tnd_cuda_stat(const struct tnd_peer *p, const struct tnd_cuda_ref *m,
		  struct tnd_cuda_info *ret);
/* Call @fn for each export @p may see (its own and those it may import). */
void tnd_cuda_list(const struct tnd_peer *p, void (*fn)(void *, const struct tnd_cuda_info *),
		   void *ctx);
unsigned tnd_cuda_count(void);
/* A process said hello on a connection / closed one. */
void tnd_cuda_connected(pid_t pid, uint64_t start_time);
void tnd_cuda_disconnected(pid_t pid, uint64_t start_time);
/* Release what exited processes held; true while a detached process should be polled soon. */
bool tnd_cuda_sweep(void);

/* log.c */
void tnd_log_setup(enum tnd_log_target target, enum tnd_log_level level);
/* Lines are written with every control character escaped (a name cannot forge a line). */
void tnd_log(enum tnd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* @src into @dst (@cap bytes) with control characters and backslashes escaped. */
void tnd_log_escape(char *dst, size_t cap, const char *src);
#define tnd_error(...) tnd_log(TND_LOG_ERROR, __VA_ARGS__)
#define tnd_warn(...) tnd_log(TND_LOG_WARN, __VA_ARGS__)
#define tnd_info(...) tnd_log(TND_LOG_INFO, __VA_ARGS__)
#define tnd_debug(...) tnd_log(TND_LOG_DEBUG, __VA_ARGS__)

/* ---- the daemon's records and state, shared by its files ------------------------------------- */

/* An arena the daemon serves: its own attachment and the record kept in NAME.meta. */
struct tnd_arena {
	struct tnd_arena *next;
	char name[TND_NAME_SIZE];
	tn_arena *a; /* the daemon's own attachment */
	char path[PATH_MAX];
	uint32_t owner_uid, owner_gid, mode;
	uint32_t ngrants;
	struct tnd_grant grants[TND_MAX_GRANTS];
	uint64_t created;
	int transfers; /* LOAD/SAVE running on it */
	uint8_t uuid[16];
	uint64_t size; /* of the file, when the daemon mapped it */
	bool damaged; /* its file shrank under the mapping: only destroy --force is served */
	/* Spilling (spill.c): a job runs on it; a request came while it ran; the missing
	 * spill_dir was reported; when its spill directory was last swept. */
	bool spill_busy, spill_again, spill_warned, spill_closed;
	uint64_t spill_swept_ns;
	/* After a job found the spill directory full: no spilling before then (restores go on),
	 * and the wait doubles at each full one, from 1 s to 30 s. */
	uint64_t spill_retry_ns, spill_backoff_ns;
	struct tnd_guard guard; /* the SIGBUS guard's entries for its mappings */
	/* Its lock: a client that keeps it (stopped, stuck) must not stall the loop, which waits
	 * at most TND_LOCK_WAIT_MS for it; after a wait ran out, the loop does not try again
	 * for TND_LOCK_BACKOFF_MS (tnd_arena_lockable). */
	uint64_t locked_until; /* CLOCK_MONOTONIC ns */
	pid_t lock_holder;     /* the process seen holding it then; 0 unknown */
	bool have_stats;       /* @stats: the last figures read */
	tn_arena_stats stats;
	/* NUMA residency costs a move_pages over every page: sampled at most once a second. */
	uint64_t resident[TND_MAX_NODES];
	uint32_t nnodes;
	uint64_t resident_ns;
	/* Who each slot the daemon assigned belongs to, from the socket's credentials
	 * (SO_PEERCRED and /proc) when it was assigned: the periodic sweep judges whether such
	 * a slot's process is gone from this record, never from the client table in the file,
	 * which any read-write grantee can forge. state 0: no record (the daemon's own slot,
	 * or one attached without the daemon). */
	struct tnd_slot_owner {
		uint64_t state;
		pid_t pid;
		uint64_t start_time;
	} owners[TN_ARENA_MAX_CLIENTS];
	/* The daemon's own records of the arena, in its directory (ledger.c): the owners above
	 * (NAME.slots) and the seals (NAME.seals). */
	struct tnd_ledger *ledger;
};

/* A slot the daemon assigned to a client (or the client re-registered). */
struct tnd_slot {
	struct tnd_arena *arena;
	int slot;
	uint64_t state;
	bool read_only;
};

/* What a completion of the ring is for: its user data points at one of these. */
enum tnd_ring_kind {
	TND_RING_ACCEPT = 1,
	TND_RING_RECV,
	TND_RING_SEND,
	TND_RING_SIGNAL,
	TND_RING_EVENT,
	TND_RING_TIMER
};

struct tnd_ring_op {
	enum tnd_ring_kind kind;
	struct tnd_client *client;
};

struct tnd_outmsg; /* a queued reply (the loop's) */

/* A connection. */
struct tnd_client {
	struct tnd_client *next, *prev;
	int fd;
	uint32_t id;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[64];
	uint64_t start_time;
	uint64_t connected;
	uint64_t connected_ns; /* CLOCK_MONOTONIC: when it was accepted, for hello_timeout_ms */
	uint64_t requests;
	char program[32];
	bool hello_done;
	uint16_t version; /* the protocol version HELLO chose */
	bool closing;   /* no more receives; freed when nothing is in flight */
	int inflight;   /* submitted operations that have not completed */
	bool transfer;  /* a LOAD or SAVE is running for it */
	int verifying;  /* VERIFY requests waiting for their digests */
	_Atomic bool cancel;
	size_t nslots, capslots;
	struct tnd_slot *slots;
	struct tnd_outmsg *out_head, *out_tail;
	size_t outq_bytes; /* queued replies: past OUTQ_MAX (loop.c), no more requests are read */
	bool recv_paused;
	bool sending;
	struct tnd_ring_op recv_op, send_op;
	struct msghdr rmh;
	struct iovec riov;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} rctl;
	union {
		struct tnd_hdr hdr;
		uint64_t align;
		unsigned char bytes[TND_MSG_MAX + 64];
	} rbuf;
	struct msghdr smh;
	struct iovec siov;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} sctl;
};

/* The requests of one operation and the time the loop spent on them (metrics.c): a histogram
 * with cumulative buckets bounded by tnd_latency_bounds. */
#define TND_LAT_BUCKETS 11
struct tnd_op_stats {
	uint64_t count, sum_ns;
	uint64_t buckets[TND_LAT_BUCKETS];
};
extern const double tnd_latency_bounds[TND_LAT_BUCKETS];

/* What more than one of the daemon's files reads or writes. Only the loop's thread uses it: a
 * worker thread (LOAD, SAVE) uses its arena's handle and its client's cancel flag, no more. */
struct tnd_daemon {
	struct tnd_config cfg;
	uid_t uid; /* the daemon's effective uid */
	int listen_fd, signal_fd, event_fd;
	uint64_t instance, started, started_ns;
	char hugedir[PATH_MAX]; /* "" : no hugetlbfs mount to create arenas in */
	struct tnd_arena *arenas;
	unsigned narenas;
	struct tnd_client *clients;
	unsigned nclients;
	uint64_t requests, reclaimed_slots, protocol_errors;
	uint64_t evictions, evicted_bytes; /* by the watermark checks, since the start */
	/* By the spill jobs, since the start (spill.c). */
	uint64_t spills, spilled_bytes, spill_failures, restores, restored_bytes, restore_failures;
	uint64_t spill_ns, restore_ns, spill_quota_refusals;
	struct tnd_op_stats ops[TND_OP_MAX_];
	bool stop;
};
extern struct tnd_daemon tnd_d;

/* The access a client may have to an arena (tnd_access_of, tnd_arena_for). */
#define TND_ACC_READ 1u
#define TND_ACC_WRITE 2u
#define TND_ACC_ADMIN 4u

/* arenas.c: the daemon's arena records (NAME.meta beside NAME.arena), recovery at start. */
struct tnd_arena *tnd_arena_find(const char *name);
/* Whether @ar's file still covers the daemon's mapping; logs and marks it damaged if not. */
bool tnd_arena_intact(struct tnd_arena *ar);
/* Register a newly mapped arena with the SIGBUS guard. */
void tnd_arena_guard(struct tnd_arena *ar);
/* The size of an arena's file; 0 when it cannot be told. */
uint64_t tnd_arena_file_size(tn_arena *a);
/* Write @ar's record atomically; 0 or -errno. */
int tnd_arena_write_record(const struct tnd_arena *ar);
/* Put a new or recovered arena on the daemon's list. */
void tnd_arena_add(struct tnd_arena *ar);
/* Take @ar off the list and remove its file and record; the caller frees @ar. */
void tnd_arena_remove(struct tnd_arena *ar, bool intact);
/* The wire record of an arena (ARENA_LIST, ARENA_STAT); with its lock held, the last
 * figures read, flagged TND_INFO_LOCKED. */
void tnd_arena_fill_info(struct tnd_arena *ar, struct tnd_arena_info *w);
/* Read the pages of @ar resident on each node (ar->resident) when the last reading is more
 * than a second old (move_pages over the whole file is not free). */
void tnd_arena_residency(struct tnd_arena *ar);

/* The loop's waits for an arena's lock (tn__arena_lock_timeout_ms), and how long it leaves an
 * arena whose lock it could not take alone. */
#define TND_LOCK_WAIT_MS 1
#define TND_LOCK_BACKOFF_MS 100
/* Whether the loop may call into @ar's lock now: false (with tn_last_error set to say who
 * holds it) within TND_LOCK_BACKOFF_MS of a wait that ran out. */
bool tnd_arena_lockable(struct tnd_arena *ar);
/* After a call into @ar returned @r: a TN_EBUSY while a process holds its lock starts the
 * back-off (and sets the message). Returns @r. */
int tnd_arena_locked(struct tnd_arena *ar, int r);
/* tnd_arena_lockable, answering @h with TN_EBUSY when not. */
bool tnd_arena_gate(struct tnd_client *c, const struct tnd_hdr *h, struct tnd_arena *ar);
/* Reopen the arenas recorded in arena_dir (after a restart, or a clean stop). */
void tnd_arenas_recover(void);

/* access.c: who may do what (owner, mode bits, grants, create_users) and the per-user quotas.
 * The functions that take a request header answer it when they refuse. */
bool tnd_privileged(const struct tnd_client *c);
unsigned tnd_access_of(const struct tnd_arena *ar, const struct tnd_client *c);
bool tnd_may_create(const struct tnd_client *c);
/* The arena @name if @c has @need (TND_ACC_*) on it, else NULL after answering @h. */
struct tnd_arena *tnd_arena_for(struct tnd_client *c, const struct tnd_hdr *h, const char *name,
				unsigned need);
bool tnd_quota_arena(struct tnd_client *c, const struct tnd_hdr *h, uint64_t size,
		     uint64_t names);
/* Root and the daemon's own user are not held to the per-user quotas. */
bool tnd_unlimited_user(uid_t uid);
bool tnd_quota_slots(struct tnd_client *c, const struct tnd_hdr *h, struct tnd_arena *ar);
bool tnd_quota_clients(struct tnd_client *c, const struct tnd_hdr *h);
/* Whether a connection from @uid may be accepted (max_clients, max_hello_pending; root and
 * the daemon's user always may); false with the limit's name in *ret_why. */
bool tnd_quota_accept(uid_t uid, const char **ret_why);

/* loop.c: the io_uring loop, the connections' receives and sends, the replies' queue. */
int tnd_loop_init(void);
void tnd_loop_run(void);
void tnd_loop_fini(void);
/* Poll every 10 ms from now on while tnd_reclaim_waiting() (see reclaim.c). */
void tnd_loop_poll_soon(void);
void tnd_submit_recv(struct tnd_client *c);
/* Close a descriptor a client passed, through the ring (its close may block). */
void tnd_close_passed(int fd);
/* Queue a message for @c with @fd to pass (-1: none; it is closed once sent). */
void tnd_queue_msg(struct tnd_client *c, unsigned op, uint32_t seq, int32_t status,
		   uint32_t flags, const void *body, size_t len, int fd);
void tnd_free_outq(struct tnd_client *c);
/* The final reply to @req: a body, an error with a message (returns 0, so a handler can return
 * it), or a libtensor failure with its code and tn_last_error(). */
void tnd_reply(struct tnd_client *c, const struct tnd_hdr *req, const void *body, size_t len);
int tnd_reply_error(struct tnd_client *c, const struct tnd_hdr *req, int code, const char *fmt,
		    ...) __attribute__((format(printf, 4, 5)));
int tnd_reply_tn(struct tnd_client *c, const struct tnd_hdr *req, int code);

/* clients.c: connections and the slots they hold. */
void tnd_client_new(int fd);
/* Drop the connections that did not say HELLO within hello_timeout_ms (the loop's timer). */
void tnd_clients_expire(void);
/* Free a closing connection once nothing of it is in flight. */
void tnd_client_maybe_free(struct tnd_client *c);
void tnd_client_close(struct tnd_client *c);
void tnd_client_drop(struct tnd_client *c, const char *why);
void tnd_protocol_error(struct tnd_client *c, const char *why);
int tnd_slot_add(struct tnd_client *c, struct tnd_arena *ar, int slot, uint64_t state, bool ro);
/* @c's slot in @ar (@slot: that one, or -1 any), or NULL. */
struct tnd_slot *tnd_slot_find(struct tnd_client *c, const struct tnd_arena *ar, int slot);
void tnd_slot_drop(struct tnd_client *c, struct tnd_slot *s);
/* Whether a process (pid and start time) has a connection that said HELLO. */
bool tnd_process_connected(pid_t pid, uint64_t start_time);

/* reclaim.c: giving back the slots of processes that are gone. */
void tnd_reclaim_slot(struct tnd_arena *ar, int slot, uint64_t state, pid_t pid);
/* fsck's check of the file's client table against the daemon's record of the slots it
 * assigned (a forged pid or start time); adds what it finds to @rep; with @repair, writes the
 * daemon's record back into the table. Returns the records it found forged and left so. */
uint64_t tnd_fsck_owners(struct tnd_arena *ar, bool repair, tn_arena_fsck_report *rep);
void tnd_reclaim_later(const struct tnd_client *c);
bool tnd_reclaim_waiting(void);
void tnd_reclaim_check(void);
void tnd_reclaim_sweep(void);
/* Every evict_interval_ms: the arenas whose use passed their high watermark evict their least
 * recently used cache tensors down to the low one (tn_arena_evict). */
void tnd_evict_check(void);

/* spill.c: arenas in spill mode (tn_arena_set_spill(3)) evict by writing their tensors to
 * files under spill_dir, and read them back when looked up, on worker threads. */
/* Start the watcher thread that wakes the loop when a lookup asks for a restore. */
int tnd_spill_init(void);
/* Stop the watcher (after the jobs ended). */
void tnd_spill_fini(void);
/* The arena list changed: watch its arenas' restore words (call before an arena is unmapped,
 * with @except the one going). */
void tnd_spill_sync(const struct tnd_arena *except);
/* Consider a job for @ar (from the watermark check and the watcher's wake-ups). */
void tnd_spill_consider(struct tnd_arena *ar, bool asked);
/* The loop read the event fd: end the jobs that finished, serve the watcher's wake-up. */
void tnd_spill_events(void);
/* Whether a job runs; tell them to stop. */
bool tnd_spill_running(void);
void tnd_spill_cancel(void);
/* The arena is being destroyed: remove its spill directory. */
void tnd_spill_forget(struct tnd_arena *ar);

/* http.c: the HTTP endpoint of the metrics (metrics_http). Start it (0, or -1 logged); stop it;
 * render for the requests waiting (the loop read the event fd); the scrapes served and the
 * requests refused (a wrong method or path, no rendering in time). */
int tnd_http_start(void);
void tnd_http_stop(void);
void tnd_http_events(void);
uint64_t tnd_http_scrapes(void);
uint64_t tnd_http_refused(void);

/* metrics.c: count a request of @op that took @ns in the loop. */
void tnd_metrics_observe(unsigned op, uint64_t ns);
/* The Prometheus text exposition of the daemon's figures, in a new buffer (free()): the arenas
 * and connections @viewer may see (NULL: all, for the HTTP endpoint). TN_ENOMEM. */
int tnd_metrics_render(const struct tnd_client *viewer, char **ret_text, size_t *ret_len);
/* loop.c: io_uring operations submitted and not yet completed. */
uint64_t tnd_loop_in_flight(void);
void tnd_forget_arena(struct tnd_arena *ar);

/* ledger.c: the daemon's own records of an arena, where no client can write: the owners of the
 * slots it assigned (NAME.slots) and the seals (NAME.seals). */
/* Open (@recovering: read back what the files say; otherwise start empty ones); 0 or -ENOMEM
 * (a file that cannot be written is logged, and the records are kept in memory only). */
int tnd_ledger_open(struct tnd_arena *ar, bool recovering);
void tnd_ledger_close(struct tnd_arena *ar, bool remove_files);
/* Write ar->owners[@slot] to NAME.slots (after each change). */
void tnd_ledger_owner(struct tnd_arena *ar, int slot);
/* The sweep: record seals not yet recorded, set cleared seal bits again, digest. */
void tnd_ledger_sweep(struct tnd_arena *ar);
/* SEALED: record the seal of @name now; 0 or a TN_E* code with the message set. */
int tnd_ledger_sealed(struct tnd_arena *ar, const char *name);
/* fsck: the seal record against the directory (@repair sets cleared bits again). */
void tnd_ledger_fsck(struct tnd_arena *ar, bool repair, tn_arena_fsck_report *rep);
/* VERIFY: read every sealed byte again off the loop; the reply goes when all are read. */
int tnd_ledger_verify(struct tnd_client *c, const struct tnd_hdr *h, struct tnd_arena *ar);
/* Digests the worker finished (the loop read the event fd). */
void tnd_ledger_events(void);

/* transfer.c: LOAD and SAVE on worker threads. */
int tnd_transfer_start(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_transfer *m,
		       int fd);
/* Pass on what the workers reported (the loop read the event fd). */
void tnd_transfer_events(void);
void tnd_transfer_wait(void);
/* Whether a LOAD or SAVE has not been seen to end yet. */
bool tnd_transfers_running(void);

/* handlers.c: a request received on @c, @len bytes in c->rbuf, with @fd passed (-1: none). */
void tnd_handle_request(struct tnd_client *c, size_t len, int fd);

/* peers.c: the peer daemons (libtensor-peers(7)). Start the peers' thread when peer_secret is
 * set (0, or -1 logged: the secret, the module or the listener failed); stop it. */
int tnd_peers_start(void);
void tnd_peers_stop(void);
bool tnd_peers_on(void);
/* Dial @address too (PEER_ADD): 0, or a TN_E* code with the reason in @why. */
int tnd_peers_add(const char *address, char *why, size_t nwhy);
/* A copy of the list PEER_LIST reports (free()); the number of entries. */
size_t tnd_peers_list(struct tnd_peer_info **ret);
/* PULL: start it (the reply comes from tnd_peers_events once it ended); always returns 0. */
int tnd_peers_pull(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m);
/* PUSH: the same, the other way (@m's arena and name are the local source). */
int tnd_peers_push(struct tnd_client *c, const struct tnd_hdr *h, const struct tnd_pull *m);
/* Answer the pulls and pushes that ended, and record the seals of pushes received (the loop
 * read the event fd). */
void tnd_peers_events(void);
/* Whether a pull or a push has not been answered yet. */
bool tnd_peers_running(void);
/* The peers' figures for the metrics: connections dropped for breaking the protocol, refused
 * (a wrong proof, a flood of handshakes), pulls answered and failed, bytes pulled, the same
 * for pushes, pushes received and their bytes, peers ready now. */
struct tnd_peer_counts {
	uint64_t protocol_errors, refused, pulls, pull_failures, pulled_bytes, ready;
	uint64_t pushes, push_failures, pushed_bytes, received, received_bytes;
	uint64_t dropped; /* active messages not received (peer_ucx.h) */
};
void tnd_peers_counts(struct tnd_peer_counts *ret);

/* tensord.c: SIGHUP. */
void tnd_reload_config(void);

static inline uint64_t tnd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t tnd_wall_s(void)
{
	return (uint64_t)time(NULL);
}

#endif /* TENSORD_DAEMON_H */
