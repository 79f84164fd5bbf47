/* SPDX-License-Identifier: MIT */
/*
 * The tensord client API (tensord(8), libtensor-tensord(7)): connect to the daemon that owns
 * the arenas, create and open arenas under its access control, administer them, and move
 * tensors between files and arenas.
 *
 * A connection (tn_tensord) is a UNIX SOCK_SEQPACKET socket to the daemon; the daemon knows
 * the peer by its credentials (uid, gid, groups, pid), never by anything the client says.
 * tn_tensord_arena_open() returns an ordinary arena handle (tensor/arena.h): once it is open,
 * allocation, publish, lookup and every operator work on the mapping without talking to the
 * daemon, except that a read-only client's lookups ask the daemon to hold the tensor for it
 * (it cannot write the arena's metadata itself). When the process dies the socket closes and
 * the daemon reclaims what it held. An arena handle keeps its connection alive; the
 * connection is closed when the caller's reference and every arena opened through it are
 * gone. When the daemon restarts, the next call on the connection reconnects and re-registers
 * the arenas it had open; their mappings were never interrupted.
 *
 * Calls on one connection are serialised by a mutex; connections are cheap, so threads that
 * need parallel control-plane traffic open one each.
 */
#ifndef TENSOR_TENSORD_H
#define TENSOR_TENSORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/arena.h>
#include <tensor/macros.h>
#include <tensor/numa.h>

TN_BEGIN_DECLS

typedef struct tn_tensord tn_tensord;

#define TN_TENSORD_NAME_MAX 63   /* bytes in an arena name: [A-Za-z0-9._-], not first '.' '-' */
#define TN_TENSORD_MAX_GRANTS 16 /* grants per arena */
#define TN_TENSORD_MAX_NODES 8   /* NUMA nodes in residency figures */

/* The system daemon's socket (tensord.socket). */
#define TN_TENSORD_SYSTEM_SOCKET "/run/tensord/tensord.sock"

/*
 * tn_tensord_socket_path - the socket a client connects to when it names none: $TENSORD_SOCKET
 * if set, else /run/tensord/tensord.sock for root; for another user
 * $XDG_RUNTIME_DIR/tensord.sock where that socket exists, else the system daemon's where that
 * one exists, else $XDG_RUNTIME_DIR/tensord.sock (the system's without XDG_RUNTIME_DIR).
 * Writes it NUL-terminated to @buf of @cap bytes. Returns its length or TN_ENAMETOOLONG
 * (longer than a socket address can hold, or than @cap).
 */
TN_EXPORT int tn_tensord_socket_path(char *buf, size_t cap);

/*
 * tn_tensord_connect - connect to the daemon at @path (NULL: tn_tensord_socket_path) and
 * negotiate the protocol version. On success *ret_conn is a new connection (release with
 * tn_tensord_close). Errors: TN_ECONNREFUSED (nothing listens there), TN_ENOENT (no socket
 * file), TN_EACCES, TN_ENAMETOOLONG, TN_EPROTO (not a tensord, or no common version),
 * TN_ENOTCONN (the daemon closed the connection before answering: stopping or killed),
 * TN_ENOMEM.
 */
TN_EXPORT int tn_tensord_connect(const char *path, tn_tensord **ret_conn);

/* tn_tensord_close - drop the caller's reference; NULL is accepted. Arenas opened through the
 * connection keep it open until they are gone. */
TN_EXPORT void tn_tensord_close(tn_tensord *conn);

typedef struct tn_tensord_status {
	int32_t pid;          /* the daemon's */
	uint32_t uid;         /* the daemon's */
	uint64_t instance;    /* random per start */
	uint64_t started;     /* seconds since the epoch */
	uint64_t uptime_ns;
	uint32_t arenas;
	uint32_t clients;     /* connected */
	uint64_t requests;
	uint64_t reclaimed_slots; /* client slots reclaimed after their process died */
	uint64_t protocol_errors; /* connections dropped for malformed messages */
	char arena_dir[256];
	uint32_t client_id;   /* this connection's id */
	uint32_t peer_uid;    /* this connection's credentials as the daemon sees them */
	uint32_t peer_gid;
	uint32_t version;     /* protocol version in use */
} tn_tensord_status;

/* tn_tensord_status_get - the daemon's figures and this connection's identity. */
TN_EXPORT int tn_tensord_status_get(tn_tensord *conn, tn_tensord_status *ret_status);

/* ---- arenas -------------------------------------------------------------------------------- */

#define TN_TENSORD_HUGEPAGES (1u << 0) /* back the arena with 2 MiB pages */

typedef struct tn_tensord_arena_options {
	uint64_t size;           /* bytes; 0: the daemon's default (tensord.conf(5)) */
	uint32_t flags;          /* TN_TENSORD_HUGEPAGES */
	uint32_t max_names;      /* 0: chosen from the size */
	enum tn_numa_policy numa_policy; /* TN_NUMA_DEFAULT: the daemon's configured policy */
	uint64_t numa_nodes;
	unsigned mode;           /* access of the owner's group (0060) and others (0006): r reads,
				  * w writes; the owner always has both. 0: none */
} tn_tensord_arena_options;

TN_EXPORT void tn_tensord_arena_options_init(tn_tensord_arena_options *opts);

/*
 * tn_tensord_arena_create - have the daemon create arena @name, owned by the caller's uid and
 * gid. Errors: TN_EINVAL (bad name or options), TN_EEXIST, TN_ENOSPC, TN_EACCES (the daemon's
 * limits forbid it), TN_ENOTCONN, ...
 */
TN_EXPORT int tn_tensord_arena_create(tn_tensord *conn, const char *name,
				      const tn_tensord_arena_options *opts);

#define TN_TENSORD_READ_ONLY (1u << 0)

/*
 * tn_tensord_arena_open - open arena @name through the daemon: it checks the caller's access,
 * assigns a client slot and passes the arena's file descriptor; the arena is then mapped and
 * attached in that slot. With TN_TENSORD_READ_ONLY, or when the caller has a read-only grant
 * only, the mapping is read-only: lookups work (every tensor is read-only, as a sealed one),
 * allocation and publish fail with TN_EPERM. *ret_arena is a new handle (tn_arena_unref).
 * Errors: TN_ENOENT, TN_EACCES, TN_EBUSY (the arena's client table is full), TN_ENOTCONN.
 */
TN_EXPORT int tn_tensord_arena_open(tn_tensord *conn, const char *name, unsigned flags,
				    tn_arena **ret_arena);

/* Grants. */
enum tn_tensord_grant_kind { TN_TENSORD_GRANT_USER = 1, TN_TENSORD_GRANT_GROUP = 2 };
enum tn_tensord_access {
	TN_TENSORD_ACCESS_NONE = 0,       /* revoke */
	TN_TENSORD_ACCESS_READ = 1,
	TN_TENSORD_ACCESS_READ_WRITE = 2,
};

typedef struct tn_tensord_grant {
	enum tn_tensord_grant_kind kind;
	uint32_t id; /* uid or gid */
	enum tn_tensord_access access;
} tn_tensord_grant;

typedef struct tn_tensord_arena_info {
	char name[TN_TENSORD_NAME_MAX + 1];
	uint32_t owner_uid;
	uint32_t owner_gid;
	unsigned mode;
	uint32_t ngrants;
	tn_tensord_grant grants[TN_TENSORD_MAX_GRANTS];
	uint64_t created; /* seconds since the epoch */
	tn_arena_stats stats;
	uint32_t nnodes;  /* entries of resident_pages */
	uint64_t resident_pages[TN_TENSORD_MAX_NODES];
	uint32_t flags;   /* TN_TENSORD_INFO_LOCKED */
} tn_tensord_arena_info;

/* The arena's lock is held by a process (stopped or stuck?): the figures in stats are the last
 * the daemon read (zeros when it never read any). Only tn_tensord_arena_list reports it;
 * tn_tensord_arena_stat fails with TN_EBUSY instead. */
#define TN_TENSORD_INFO_LOCKED (1u << 0)

/*
 * tn_tensord_arena_list - every arena the caller may open (all of them for root and for the
 * daemon's user), sorted by name. *ret_infos is a new array of *ret_count entries (free() it; NULL when 0).
 */
TN_EXPORT int tn_tensord_arena_list(tn_tensord *conn, tn_tensord_arena_info **ret_infos,
				    size_t *ret_count);

/* tn_tensord_arena_stat - one arena's owner, access and figures. TN_ENOENT, TN_EACCES,
 * TN_EBUSY (its lock is held by a process, which the message names). */
TN_EXPORT int tn_tensord_arena_stat(tn_tensord *conn, const char *name,
				    tn_tensord_arena_info *ret_info);

#define TN_TENSORD_FORCE (1u << 0)

/*
 * tn_tensord_arena_destroy - remove arena @name (its owner, root or the daemon's user only).
 * Refused with TN_EBUSY while a live process other than the daemon is attached, unless
 * TN_TENSORD_FORCE: then the file goes at once and attached processes keep their mapping
 * until they let go. Nothing is left in the file system either way.
 */
TN_EXPORT int tn_tensord_arena_destroy(tn_tensord *conn, const char *name, unsigned flags);

/*
 * tn_tensord_arena_grant - give a user or a group read or read-write access to @name, or
 * revoke it (TN_TENSORD_ACCESS_NONE). Owner, root or the daemon's user only. TN_ENOSPC when
 * the arena has TN_TENSORD_MAX_GRANTS already.
 */
TN_EXPORT int tn_tensord_arena_grant(tn_tensord *conn, const char *name,
				     const tn_tensord_grant *grant);

/* ---- administration ------------------------------------------------------------------------ */

typedef struct tn_tensord_client {
	uint32_t client_id;
	int32_t pid;
	uint32_t uid;
	uint32_t gid;
	uint64_t connected; /* seconds since the epoch */
	char program[32];
	uint32_t narenas;
	uint64_t requests;
} tn_tensord_client;

/* tn_tensord_clients - the connected clients (root and the daemon's user see all, others
 * their own). *ret_clients is a new array (free()). */
TN_EXPORT int tn_tensord_clients(tn_tensord *conn, tn_tensord_client **ret_clients,
				 size_t *ret_count);

/*
 * tn_tensord_metrics - the daemon's figures in the Prometheus text exposition format (0.0.4):
 * per arena its bytes (used, free, held, pinned, evictable, resident), names, clients,
 * evictions and repairs; the daemon's requests and their time by operation, connections,
 * io_uring queue depth. Arenas the caller may not read, and other users' connections (unless
 * the caller is root or the daemon's user), are left out. *ret_text is a new NUL-terminated
 * string (free()); *ret_len (may be NULL) its length. TN_ENOTSUP from a tensord older than
 * this library's protocol 5.
 */
TN_EXPORT int tn_tensord_metrics(tn_tensord *conn, char **ret_text, size_t *ret_len);

/* tn_tensord_fsck - check arena @name (TN_ARENA_FSCK_REPAIR: and repair) in the daemon. */
TN_EXPORT int tn_tensord_fsck(tn_tensord *conn, const char *name, unsigned flags,
			      tn_arena_fsck_report *ret_report);

/* What tn_tensord_verify found. */
typedef struct tn_tensord_verify_report {
	uint64_t sealed;   /* tensors tensord records as sealed in the arena */
	uint64_t checked;  /* of which read again and compared with the digest of their seal */
	uint64_t changed;  /* of which differ from it */
	uint64_t digested; /* digested for the first time (sealed moments ago) */
	uint64_t restored; /* seal bits a client had cleared, set again */
	char first_changed[TN_ARENA_NAME_MAX + 1]; /* the first that differs ("" when none) */
} tn_tensord_verify_report;

/* tn_tensord_verify - read every sealed tensor of arena @name again and compare it with the
 * digest tensord took when it recorded the seal (any reader of the arena may ask). Returns 0,
 * or TN_EIO when bytes changed (the report says how many and which first). */
TN_EXPORT int tn_tensord_verify(tn_tensord *conn, const char *name,
				tn_tensord_verify_report *ret_report);

/* tn_tensord_gc - reclaim the slots of dead processes in @name (NULL or "": every arena the
 * caller administers). *ret_slots (may be NULL): slots reclaimed; *ret_bytes: bytes freed. */
TN_EXPORT int tn_tensord_gc(tn_tensord *conn, const char *name, uint64_t *ret_slots,
			    uint64_t *ret_bytes);

/* tn_tensord_shutdown - ask the daemon to stop (root or the daemon's user). It detaches, keeps
 * the arenas' files (a later start finds them) and exits. */
TN_EXPORT int tn_tensord_shutdown(tn_tensord *conn);

/* ---- peers (libtensor-peers(7)) -------------------------------------------------------------- */

/* States of a peer (tn_tensord_peer.state). */
enum tn_tensord_peer_state {
	TN_TENSORD_PEER_DOWN = 0,           /* not connected; a dialed peer is tried again */
	TN_TENSORD_PEER_CONNECTING = 1,     /* the TCP connection is being made */
	TN_TENSORD_PEER_AUTHENTICATING = 2, /* the handshake: nonces, proofs, UCX addresses */
	TN_TENSORD_PEER_READY = 3           /* authenticated, with a UCX endpoint */
};

#define TN_TENSORD_PEER_DIALED (1u << 0)   /* this daemon dials it (peer lines, peer_add) */
#define TN_TENSORD_PEER_ACCEPTED (1u << 1) /* it dialed this daemon's peer_listen */

typedef struct tn_tensord_peer {
	char address[280]; /* dialed: HOST:PORT as given; accepted: the address it listens on
			      as it announced it, else its socket's address */
	char lanes[128];   /* the transports UCX chose, "am=TL/DEV rma=TL/DEV[,...]" ("" until
			      ready) */
	char error[256];   /* why it last failed ("" none) */
	unsigned state;    /* enum tn_tensord_peer_state */
	unsigned flags;    /* TN_TENSORD_PEER_DIALED, TN_TENSORD_PEER_ACCEPTED */
	uint64_t since;    /* seconds since the epoch: when it entered this state */
	uint64_t rtt_us;   /* the last keepalive's round trip in microseconds; 0: none yet */
	uint64_t failures; /* connections lost or refused since the daemon started */
} tn_tensord_peer;

/*
 * tn_tensord_peer_add - have the daemon dial the peer daemon at @address ("HOST:PORT" or
 * "[ADDRESS]:PORT", the peer's peer_listen) and keep it connected, as a peer line of
 * tensord.conf(5) does, until the daemon stops. Root or the daemon's user only. It returns
 * once the peer is on the daemon's list: tn_tensord_peer_list tells when it is ready.
 * Errors: TN_EINVAL (a bad address; peers are off: no peer_secret), TN_EEXIST (already
 * dialed), TN_ENOSPC (32 dialed peers), TN_EPERM, TN_ENOTSUP (a daemon older than protocol
 * version 6).
 */
TN_EXPORT int tn_tensord_peer_add(tn_tensord *conn, const char *address);

/* tn_tensord_peer_list - the peers the daemon dials and those connected to it, dialed first
 * in the order added. *ret_peers is a new array (free(); NULL when *ret_count is 0). */
TN_EXPORT int tn_tensord_peer_list(tn_tensord *conn, tn_tensord_peer **ret_peers,
				   size_t *ret_count);

/* tn_tensord_pull_report.method: */
#define TN_TENSORD_PULL_RMA_GET 1     /* a UCX RMA get */
#define TN_TENSORD_PULL_DIRECT_READ 2 /* the peer's memory read directly (same host) */
#define TN_TENSORD_PULL_ACTIVE_MESSAGE 3 /* UCX active messages (where a get is emulated: TCP) */

typedef struct tn_tensord_pull_report {
	uint64_t bytes;      /* data bytes moved */
	uint64_t elapsed_ns; /* in the daemon, from the request to the sealed name */
	unsigned method;     /* TN_TENSORD_PULL_* */
	char lanes[128];     /* the UCX lanes of the peer it came over */
} tn_tensord_pull_report;

/*
 * tn_tensord_pull - have the daemon fetch the sealed tensor @remote_name of arena
 * @remote_arena on the peer daemon @peer (as tn_tensord_peer_list names it; the peer must
 * export the arena: peer_export in its tensord.conf(5)) and publish it, sealed, as @name in
 * the local arena @arena (the caller needs write access to it), with its dtype, sizes and
 * strides; the storage offset becomes 0 and only the bytes the view reaches are moved. The
 * peer holds the tensor's block until the bytes have arrived, so an unpublish there meanwhile
 * does not disturb the transfer. Nothing is published under @name unless every byte arrived.
 * @ret_report may be NULL. One pull or load at a time per connection. Errors: TN_ENOTCONN
 * (the peer is not ready, or was lost during the transfer), TN_ENOENT (no such tensor there),
 * TN_EACCES (the peer does not export the arena; no write access here), TN_EINVAL (the tensor
 * there is not sealed; bad names), TN_EEXIST (@name is taken here), TN_ENOMEM (the local arena
 * is full), TN_EBUSY (a transfer of this connection runs), TN_EIO, TN_ENOTSUP.
 */
TN_EXPORT int tn_tensord_pull(tn_tensord *conn, const char *peer, const char *remote_arena,
			      const char *remote_name, const char *arena, const char *name,
			      tn_tensord_pull_report *ret_report);

/*
 * tn_tensord_pull_prefix - a batch: every sealed tensor of @remote_arena on @peer whose name
 * starts with @remote_prefix, in one request, each published sealed in @arena as @prefix
 * followed by the rest of its name. All or nothing: every name must be free here, and none is
 * published unless every byte of every tensor arrived. At most 4096 tensors, and as many as
 * one 1 MiB frame describes. *ret_count (may be NULL) gets their number. Errors as for
 * tn_tensord_pull; TN_ENOENT also when no sealed tensor is under the prefix, TN_ENOSPC when
 * more are than one batch takes.
 */
TN_EXPORT int tn_tensord_pull_prefix(tn_tensord *conn, const char *peer,
				     const char *remote_arena, const char *remote_prefix,
				     const char *arena, const char *prefix,
				     tn_tensord_pull_report *ret_report, size_t *ret_count);

/*
 * tn_tensord_push - the other way: have the daemon send its sealed tensor @name of the local
 * arena @arena (the caller needs read access to it) to the peer daemon @peer, which publishes
 * it, sealed, as @remote_name in its arena @remote_arena (which it must open to pushes:
 * peer_import in its tensord.conf(5)). The local daemon holds the block until the peer has the
 * bytes; the peer gets them as for a pull, and nothing is published there unless every byte
 * arrived. The report is the pusher's (elapsed_ns: from the request to the peer's answer).
 * Errors as for tn_tensord_pull, with the sides swapped: TN_EACCES (the peer's arena is not
 * open to pushes; no read access here), TN_EEXIST (@remote_name is taken on the peer),
 * TN_ENOMEM (the peer's arena is full).
 */
TN_EXPORT int tn_tensord_push(tn_tensord *conn, const char *arena, const char *name,
			      const char *peer, const char *remote_arena, const char *remote_name,
			      tn_tensord_pull_report *ret_report);

/* "down", "connecting", "authenticating", "ready"; "?" for another value. */
TN_EXPORT const char *tn_tensord_peer_state_name(unsigned state);

/* ---- CUDA exports ---------------------------------------------------------------------------- */

/* States of an export (tn_tensord_cuda_export.state). */
enum tn_tensord_cuda_state {
	TN_TENSORD_CUDA_WITHDRAWN = 1,  /* unexported: no new imports; gone once nobody holds it */
	TN_TENSORD_CUDA_OWNER_GONE = 2, /* the exporting process has exited */
	TN_TENSORD_CUDA_DETACHED = 4,   /* the exporting process is alive but not connected */
};

/* A device storage shared through tensord (tn_cuda_ipc_export(3)), as the daemon records it. */
typedef struct tn_tensord_cuda_export {
	char name[TN_ARENA_NAME_MAX + 1];
	uint64_t id;       /* unique in the daemon's table, never reused */
	int32_t owner_pid; /* the exporting process */
	uint32_t owner_uid;
	uint32_t owner_gid;
	unsigned mode;     /* group (040) and others (004) may import */
	uint32_t holders;  /* imports not yet released, all processes together */
	uint32_t importers; /* processes holding it */
	unsigned state;    /* enum tn_tensord_cuda_state bits */
	uint64_t created;  /* seconds since the epoch */
	uint64_t storage_bytes;
	enum tn_dtype dtype;
	int ndim;
	int64_t sizes[TN_ARENA_MAX_DIMS];
	uint8_t device_uuid[16]; /* the GPU's UUID */
	bool has_event;    /* importers wait for the exporter's event */
} tn_tensord_cuda_export;

/*
 * tn_tensord_cuda_list - the CUDA exports the caller may see (its own, and those it may
 * import), sorted by name. *ret_exports is a new array (free(); NULL when 0). Works in every
 * build: the daemon keeps the table, no GPU is needed to read it. TN_ENOTSUP when the daemon
 * predates CUDA sharing (protocol version 1).
 */
TN_EXPORT int tn_tensord_cuda_list(tn_tensord *conn, tn_tensord_cuda_export **ret_exports,
				   size_t *ret_count);

/* tn_tensord_cuda_stat - the export named @name (a live one, else the newest withdrawn one).
 * TN_ENOENT when there is none the caller may see. */
TN_EXPORT int tn_tensord_cuda_stat(tn_tensord *conn, const char *name,
				   tn_tensord_cuda_export *ret_export);

/* ---- load and save ------------------------------------------------------------------------- */

enum tn_tensord_format {
	TN_TENSORD_FORMAT_AUTO = 0, /* load: by the file's first bytes */
	TN_TENSORD_FORMAT_SAFETENSORS = 1,
	TN_TENSORD_FORMAT_NPY = 2,
};

#define TN_TENSORD_SEAL (1u << 0)    /* load: seal every tensor loaded */
#define TN_TENSORD_REPLACE (1u << 1) /* load: replace tensors that have the name already */
#define TN_TENSORD_EVICTABLE (1u << 2) /* load: publish them as cache tensors (evictable) */

/* Called with the data bytes moved so far and the total, as the daemon reports them (at most
 * every 64 MiB and at the end). */
typedef void (*tn_tensord_progress_fn)(uint64_t done, uint64_t total, void *ctx);

typedef struct tn_tensord_transfer {
	uint64_t tensors;
	uint64_t bytes;      /* data bytes moved */
	uint64_t file_bytes; /* save: the size of the file written */
	uint64_t elapsed_ns; /* in the daemon */
} tn_tensord_transfer;

/*
 * tn_tensord_load - have the daemon read the tensors of the file open at @fd (the caller's
 * descriptor, opened for reading: the caller's own access to the file is what counts) into
 * arena @name, publishing each under @prefix followed by its name in the file (.npy: @prefix
 * is the whole name). @progress (may be NULL) is called as the daemon reports. The daemon
 * reads with io_uring. Loading is all or nothing: on failure no tensor of the file stays
 * published. Errors: TN_EINVAL (malformed file, the message names the byte), TN_ENOTSUP,
 * TN_EEXIST (a name is taken and no TN_TENSORD_REPLACE), TN_ENOMEM (the arena is full),
 * TN_EACCES, TN_EIO.
 */
TN_EXPORT int tn_tensord_load(tn_tensord *conn, const char *name, int fd,
			      enum tn_tensord_format format, const char *prefix, unsigned flags,
			      tn_tensord_progress_fn progress, void *ctx,
			      tn_tensord_transfer *ret_transfer);

/*
 * tn_tensord_save - have the daemon write the tensors of arena @name whose names start with
 * @prefix (NULL or "": all) to the file open at @fd (the caller's, opened for writing, empty):
 * safetensors with names relative to @prefix, or .npy with @prefix naming exactly one tensor.
 * Non-contiguous tensors are written in C order.
 */
TN_EXPORT int tn_tensord_save(tn_tensord *conn, const char *name, int fd,
			      enum tn_tensord_format format, const char *prefix, unsigned flags,
			      tn_tensord_progress_fn progress, void *ctx,
			      tn_tensord_transfer *ret_transfer);

TN_END_DECLS

#endif /* TENSOR_TENSORD_H */
