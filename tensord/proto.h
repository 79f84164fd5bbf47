/* SPDX-License-Identifier: MIT */
/*
 * The tensord wire protocol, shared by the daemon (tensord/) and the client library compiled
 * into libtensor (tensord/client.c).
 *
 * Transport: a UNIX SOCK_SEQPACKET socket, so each message arrives whole or not at all and its
 * length is known. Every message is a fixed 32-byte header followed by a fixed-layout body
 * whose size the operation determines exactly (no variable parts): a reader checks the length
 * first, then each field (magic, version, operation, lengths, flags, enum values, names)
 * with tnd_check_request() / tnd_check_reply() before it reads anything else. Both ends run
 * on one machine, so integers are in the host's byte order; the layout uses fixed-width types
 * with explicit padding and is pinned by static assertions.
 *
 * A request carries a sequence number that its replies repeat. Each request gets exactly one
 * final reply; LOAD and SAVE may send PROGRESS replies before it, and ARENA_LIST and CLIENTS
 * send one reply per item flagged TND_F_MORE before a final reply that counts them. A final
 * reply with status < 0 carries a struct tnd_error body (a message, NUL-terminated) instead of
 * the operation's body. File descriptors travel as SCM_RIGHTS ancillary data: the arena fd in
 * an ARENA_OPEN reply, the file in LOAD and SAVE requests.
 *
 * A daemon that receives a message that fails validation answers with TN_EPROTO when it can
 * tell the sequence number and then closes that connection; it never trusts a field it has
 * not checked.
 */
#ifndef TENSORD_PROTO_H
#define TENSORD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor.h>

#define TND_MAGIC 0x31444e54u /* "TND1" in memory on a little-endian machine */
/* Protocol versions: 2 added the CUDA sharing operations (CUDA_*), 3 the seal record (SEALED,
 * VERIFY), 4 waiting lookups of read-only clients (WAITING), 5 the metrics (METRICS), 6 the peers (PEER_ADD, PEER_LIST, PULL), 7 PUSH. A
 * client sends an operation only on a connection whose version has it. A daemon and a client
 * each speak TND_VERSION_MIN..TND_VERSION; HELLO picks the highest both speak, and every later
 * message of the connection carries that version. */
#define TND_VERSION 7
#define TND_VERSION_MIN 1
#define TND_MSG_MAX 4096 /* no message is longer; receivers use buffers of this size */

/* Arena names: 1 to TND_NAME_MAX bytes of [A-Za-z0-9._-], not starting with '.' or '-'. */
#define TND_NAME_MAX 63
#define TND_NAME_SIZE 64
#define TND_PREFIX_SIZE 256 /* a tensor name or prefix: at most TN_ARENA_NAME_MAX bytes */
#define TND_MESSAGE_SIZE 256
#define TND_MAX_GRANTS 16
#define TND_MAX_NODES 8 /* NUMA nodes reported in residency figures */

/*
 * Operations: X(NAME, value, request body, reply body). "void" bodies are empty.
 */
#define TND_OP_LIST(X)                                                                        \
	X(HELLO, 1, struct tnd_hello, struct tnd_hello_reply)                                 \
	X(STATUS, 2, void, struct tnd_status)                                                 \
	X(ARENA_CREATE, 3, struct tnd_arena_create, void)                                     \
	X(ARENA_OPEN, 4, struct tnd_arena_open, struct tnd_arena_open_reply)                  \
	X(ARENA_LIST, 5, void, struct tnd_arena_info)                                         \
	X(ARENA_STAT, 6, struct tnd_arena_ref, struct tnd_arena_info)                         \
	X(ARENA_DESTROY, 7, struct tnd_arena_ref, void)                                       \
	X(ARENA_GRANT, 8, struct tnd_arena_grant, void)                                       \
	X(CLIENTS, 9, void, struct tnd_client_info)                                           \
	X(FSCK, 10, struct tnd_arena_ref, struct tnd_fsck_reply)                              \
	X(GC, 11, struct tnd_arena_ref, struct tnd_gc_reply)                                  \
	X(LOAD, 12, struct tnd_transfer, struct tnd_transfer_reply)                           \
	X(SAVE, 13, struct tnd_transfer, struct tnd_transfer_reply)                           \
	X(SHUTDOWN, 14, void, void)                                                           \
	X(REATTACH, 15, struct tnd_reattach, struct tnd_arena_open_reply)                     \
	X(HOLD, 16, struct tnd_hold, struct tnd_hold_reply)                                   \
	X(RELEASE, 17, struct tnd_release, void)                                              \
	X(DETACH, 18, struct tnd_detach, void)                                                \
	X(CUDA_EXPORT, 19, struct tnd_cuda_export, struct tnd_cuda_info)                      \
	X(CUDA_IMPORT, 20, struct tnd_cuda_ref, struct tnd_cuda_info)                         \
	X(CUDA_RELEASE, 21, struct tnd_cuda_ref, void)                                        \
	X(CUDA_UNEXPORT, 22, struct tnd_cuda_ref, struct tnd_cuda_info)                       \
	X(CUDA_STAT, 23, struct tnd_cuda_ref, struct tnd_cuda_info)                           \
	X(CUDA_LIST, 24, void, struct tnd_cuda_info)                                          \
	X(SEALED, 25, struct tnd_sealed, void)                                                \
	X(VERIFY, 26, struct tnd_arena_ref, struct tnd_verify_reply)                          \
	X(WAITING, 27, struct tnd_waiting, void)                                              \
	X(METRICS, 28, void, struct tnd_metrics_chunk)                                        \
	X(PEER_ADD, 29, struct tnd_peer_ref, void)                                            \
	X(PEER_LIST, 30, void, struct tnd_peer_info)                                          \
	X(PULL, 31, struct tnd_pull, struct tnd_pull_reply)                                   \
	X(PUSH, 32, struct tnd_pull, struct tnd_pull_reply)

enum tnd_op {
#define TND_X_(name, value, req, rep) TND_OP_##name = (value),
	TND_OP_LIST(TND_X_)
#undef TND_X_
	TND_OP_MAX_
};

/* The size of a body of @type as TND_OP_LIST names it: "void" bodies are empty (GNU C gives
 * sizeof(void) == 1, hence the test for void first). */
#define TND_BODY_SIZE(type) (__builtin_types_compatible_p(type, void) ? 0 : sizeof(type))

/* Header flags. */
#define TND_F_MORE 0x1u     /* a reply: more items of a list follow */
#define TND_F_PROGRESS 0x2u /* a reply: a struct tnd_progress, the final reply follows */
#define TND_F_FD 0x4u       /* the message carries one file descriptor (SCM_RIGHTS) */
#define TND_F_ALL 0x7u

struct tnd_hdr {
	uint32_t magic;   /* TND_MAGIC */
	uint16_t version; /* TND_VERSION (HELLO may carry any: it negotiates) */
	uint16_t op;      /* enum tnd_op */
	uint32_t len;     /* bytes in the whole message, header included */
	uint32_t seq;     /* chosen by the client; replies repeat it */
	int32_t status;   /* replies: 0 or a negative TN_E* code; requests: 0 */
	uint32_t flags;   /* TND_F_* */
	uint64_t reserved; /* 0 */
};

/* ---- bodies ---------------------------------------------------------------------------- */

struct tnd_error {
	char message[TND_MESSAGE_SIZE];
};

struct tnd_hello {
	uint32_t min_version; /* the client speaks versions min..max */
	uint32_t max_version;
	char program[32]; /* the client's name, for `tensorctl clients` (NUL-terminated) */
};

struct tnd_hello_reply {
	uint32_t version;  /* the version chosen */
	int32_t daemon_pid;
	uint32_t client_id; /* unique for the daemon's life */
	uint32_t uid;       /* the peer's credentials as the daemon sees them */
	uint32_t gid;
	uint32_t max_msg;      /* TND_MSG_MAX */
	uint64_t instance;     /* random per daemon start: a change means the daemon restarted */
};

struct tnd_status {
	int32_t daemon_pid;
	uint32_t uid; /* the daemon's */
	uint64_t instance;
	uint64_t started;  /* CLOCK_REALTIME, seconds */
	uint64_t uptime_ns;
	uint32_t arenas;
	uint32_t clients;
	uint64_t requests; /* served since start */
	uint64_t reclaimed_slots;
	uint64_t protocol_errors;
	char arena_dir[TND_MESSAGE_SIZE];
};

/* Arena creation flags. */
#define TND_CREATE_HUGEPAGES 0x1u
#define TND_CREATE_ALL 0x1u

struct tnd_arena_create {
	char name[TND_NAME_SIZE];
	uint64_t size;       /* bytes; 0: the configured default */
	uint32_t flags;      /* TND_CREATE_* */
	uint32_t numa_policy; /* enum tn_numa_policy; TN_NUMA_DEFAULT: the configured one */
	uint64_t numa_nodes;
	uint32_t max_names;  /* 0: chosen from the size */
	uint32_t mode;       /* permission bits 0..0777 for group and others; 0: 0600 */
};

/* Open flags. */
#define TND_OPEN_READ_ONLY 0x1u
#define TND_OPEN_ALL 0x1u

struct tnd_arena_open {
	char name[TND_NAME_SIZE];
	uint32_t flags; /* TND_OPEN_* */
	uint32_t pad;
};

struct tnd_arena_open_reply {
	uint32_t slot;  /* the client-table slot the daemon assigned to the peer */
	uint32_t flags; /* TND_OPEN_READ_ONLY when the fd is read-only */
	uint64_t size;
	uint8_t uuid[16];
};

/* After the daemon restarted: "I am attached to this arena in this slot". */
struct tnd_reattach {
	char name[TND_NAME_SIZE];
	uint8_t uuid[16];
	uint32_t slot;
	uint32_t flags; /* TND_OPEN_READ_ONLY as the client opened it */
};

/* Arena reference with flags: STAT, DESTROY (TND_DESTROY_FORCE), FSCK (TN_ARENA_FSCK_REPAIR),
 * GC (name "" means every arena). */
#define TND_DESTROY_FORCE 0x1u
struct tnd_arena_ref {
	char name[TND_NAME_SIZE];
	uint32_t flags;
	uint32_t pad;
};

/* Grants. */
#define TND_GRANT_USER 1
#define TND_GRANT_GROUP 2
#define TND_ACCESS_NONE 0 /* revokes */
#define TND_ACCESS_READ 1
#define TND_ACCESS_READ_WRITE 2

struct tnd_grant {
	uint32_t kind;   /* TND_GRANT_USER or _GROUP */
	uint32_t id;     /* uid or gid */
	uint32_t access; /* TND_ACCESS_* */
	uint32_t pad;
};

struct tnd_arena_grant {
	char name[TND_NAME_SIZE];
	struct tnd_grant grant;
};

/* Flags of struct tnd_arena_info. */
#define TND_INFO_LOCKED 0x1u /* its lock is held (a stopped or stuck process): the figures are
			      * the last the daemon read, or zeros when it never read any */

struct tnd_arena_info {
	char name[TND_NAME_SIZE];
	uint32_t owner_uid;
	uint32_t owner_gid;
	uint32_t mode;
	uint32_t ngrants;
	struct tnd_grant grants[TND_MAX_GRANTS];
	uint64_t created; /* CLOCK_REALTIME, seconds */
	uint32_t backing;     /* enum tn_arena_backing */
	uint32_t numa_policy; /* enum tn_numa_policy */
	uint64_t numa_nodes;
	uint8_t uuid[16];
	uint64_t size, page_size, heap_bytes, used_bytes, free_bytes, largest_free;
	uint64_t blocks, free_blocks, names, max_names, clients;
	uint64_t num_allocs, num_frees, lock_repairs, reclaimed_slots;
	uint32_t nnodes;                    /* entries of resident_pages filled */
	uint32_t flags;                     /* TND_INFO_* */
	uint64_t resident_pages[TND_MAX_NODES]; /* pages of the arena on each NUMA node */
	uint64_t count; /* in the final reply of ARENA_LIST: the items sent */
};

struct tnd_client_info {
	uint32_t client_id;
	int32_t pid;
	uint32_t uid;
	uint32_t gid;
	uint64_t connected; /* CLOCK_REALTIME, seconds */
	char program[32];
	uint32_t narenas;   /* arenas the client has open through the daemon */
	uint32_t pad;
	uint64_t requests;
	uint64_t count;     /* in the final reply of CLIENTS: the items sent */
};

/* The Prometheus text of METRICS, in pieces: replies flagged TND_F_MORE carry @len bytes of it
 * each, in order; the final reply carries none and @count, the pieces sent. */
#define TND_METRICS_CHUNK 3968
struct tnd_metrics_chunk {
	uint32_t len;
	uint32_t pad;
	uint64_t count;
	char text[TND_METRICS_CHUNK];
};

struct tnd_fsck_reply {
	uint64_t problems, repaired, blocks, free_blocks, orphan_blocks, dead_holds, dead_clients,
		bad_names;
	char first_problem[TND_MESSAGE_SIZE];
};

struct tnd_gc_reply {
	uint64_t reclaimed_slots; /* dead clients whose holds were dropped */
	uint64_t freed_bytes;     /* heap bytes that became free */
	uint64_t trimmed_bytes;   /* bytes the daemon's own caches gave back */
};

/* LOAD and SAVE. The file travels as an fd the client opened (so the client's own access to
 * the file applies, never the daemon's). */
#define TND_FORMAT_AUTO 0
#define TND_FORMAT_SAFETENSORS 1
#define TND_FORMAT_NPY 2
#define TND_XFER_SEAL 0x1u    /* LOAD: seal each tensor loaded */
#define TND_XFER_REPLACE 0x2u /* LOAD: replace tensors of the same name */
#define TND_XFER_EVICTABLE 0x4u /* LOAD: publish them as cache tensors (TN_ARENA_EVICTABLE) */
#define TND_XFER_ALL 0x7u

struct tnd_transfer {
	char name[TND_NAME_SIZE];   /* the arena */
	char prefix[TND_PREFIX_SIZE]; /* LOAD: prefix of the names (.npy: the name); SAVE: the
				       * prefix of the tensors to save (.npy: the one name) */
	uint32_t format; /* TND_FORMAT_*; AUTO: by the file's first bytes (LOAD only) */
	uint32_t flags;  /* TND_XFER_* */
};

struct tnd_progress {
	uint64_t done;  /* bytes moved */
	uint64_t total; /* bytes to move */
};

struct tnd_transfer_reply {
	uint64_t tensors;
	uint64_t bytes;      /* data bytes moved */
	uint64_t file_bytes; /* SAVE: size of the file written */
	uint64_t elapsed_ns;
};

/* Read-only clients cannot write the arena's metadata, so the daemon takes and drops their
 * holds (on the block a directory entry names) for them. */
/* SEALED: a read-write client sealed @tensor of arena @name; the daemon records the seal. */
struct tnd_sealed {
	char name[TND_NAME_SIZE];     /* the arena */
	char tensor[TND_PREFIX_SIZE]; /* the tensor's name */
};

/* VERIFY: the sealed tensors of an arena checked against the daemon's record. */
struct tnd_verify_reply {
	uint64_t sealed;   /* tensors the daemon records as sealed */
	uint64_t checked;  /* of which compared with the digest taken when sealed */
	uint64_t changed;  /* of which differ from it */
	uint64_t digested; /* digested for the first time by this verification */
	uint64_t restored; /* seal bits found cleared and set again */
	char first_changed[TND_PREFIX_SIZE]; /* the first tensor that differs ("" when none) */
};

/* Peers (libtensor-peers(7)). */
#define TND_PEER_ADDR_SIZE 280
#define TND_PEER_LANES_SIZE 128
struct tnd_peer_ref {
	char address[TND_PEER_ADDR_SIZE]; /* HOST:PORT or [ADDRESS]:PORT */
};

struct tnd_peer_info {
	char address[TND_PEER_ADDR_SIZE]; /* dialed: as configured; accepted: as it announced */
	char lanes[TND_PEER_LANES_SIZE];  /* UCX's lanes, once ready: "am=... rma=..." */
	char error[TND_MESSAGE_SIZE];     /* why it last failed ("" none) */
	uint32_t state;                   /* TN_TENSORD_PEER_* */
	uint32_t flags;                   /* TN_TENSORD_PEER_DIALED, _ACCEPTED */
	uint64_t since;                   /* wall seconds: entered this state */
	uint64_t rtt_us;                  /* the last keepalive's round trip; 0 none yet */
	uint64_t failures;                /* connections lost or refused */
	uint64_t count;                   /* the final reply: the number of items */
};

struct tnd_pull {
	char peer[TND_PEER_ADDR_SIZE];        /* a peer on the daemon's list */
	char remote_arena[TND_NAME_SIZE];     /* an arena the peer exports */
	char remote_name[TND_PREFIX_SIZE];    /* a sealed tensor in it */
	char arena[TND_NAME_SIZE];            /* the local arena (write access) */
	char name[TND_PREFIX_SIZE];           /* the name to publish, sealed */
	uint32_t flags;                       /* PULL: TND_PULL_PREFIX; PUSH: 0 */
	uint32_t pad;
};

/* tnd_pull.flags: remote_name is a prefix: every sealed tensor under it, published as name
 * followed by the rest of its name, in one batch. */
#define TND_PULL_PREFIX 1u

struct tnd_pull_reply {
	uint64_t bytes;      /* data bytes moved */
	uint64_t elapsed_ns; /* from the request to the publish */
	uint32_t method;     /* TN_TENSORD_PULL_RMA_GET: by UCX RMA get */
	uint32_t count;      /* TND_PULL_PREFIX: the tensors published; else 0 */
	char lanes[TND_PEER_LANES_SIZE];
};

struct tnd_hold {
	char name[TND_NAME_SIZE];     /* the arena */
	char tensor[TND_PREFIX_SIZE]; /* the tensor's name; "" to use index and generation */
	uint32_t index;               /* the directory entry, as in tn_arena_handle */
	uint32_t generation;
	uint32_t slot;                /* the client's slot in it (one connection may have several) */
	uint32_t pad;
	uint8_t uuid[16];             /* the arena's (a name may be re-created) */
};

struct tnd_hold_reply {
	uint64_t block;          /* offset of the block header, now held for the client */
	uint64_t block_bytes;    /* usable bytes of the block */
	uint32_t index;          /* the entry's handle */
	uint32_t generation;
	uint32_t dtype;          /* enum tn_dtype */
	uint32_t ndim;
	uint32_t flags;          /* TN_ARENA_ENTRY_* */
	uint32_t pad;
	int64_t storage_offset;  /* elements */
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t strides[TN_ARENA_MAX_DIMS];
};

struct tnd_release {
	char name[TND_NAME_SIZE];
	uint64_t block;
	uint32_t slot;
	uint32_t pad;
	uint8_t uuid[16];
};

/* WAITING: a read-only client's thread begins (on 1) or ends (on 0) a waiting lookup; the
 * daemon sets or clears its slot's bit in the arena's waiting mask, which the client cannot
 * write. */
struct tnd_waiting {
	char name[TND_NAME_SIZE];
	uint32_t slot;
	uint32_t on;
	uint8_t uuid[16];
};

/* A read-only client gives its slot back (its arena handle is gone). */
struct tnd_detach {
	char name[TND_NAME_SIZE];
	uint32_t slot;
	uint32_t pad;
	uint8_t uuid[16];
};

/*
 * CUDA sharing (version 2). A producer exports a device storage under a name: the CUDA IPC
 * handle of the allocation that holds it, where in that allocation the storage lies, the
 * tensor's view of it, and optionally an interprocess event recorded after the producer's last
 * write. tensord interprets none of the handles' bytes: it keeps the table of exports, decides
 * who may import (the owner's uid, root, or the export's mode bits), and counts who holds each
 * one. A hold belongs to the importing connection and ends with CUDA_RELEASE or when the
 * importing process is gone; the producer withdraws an export with CUDA_UNEXPORT, and the
 * record goes once it is withdrawn and nobody holds it, which the producer learns with
 * CUDA_STAT before it frees the memory. The table is kept in a file beside the arenas, so a
 * restarted daemon still knows the exports and holds of live processes.
 */
#define TND_CUDA_HANDLE_SIZE 64
#define TND_CUDA_EVENT 0x1u /* CUDA_EXPORT: event_handle holds an interprocess event */
#define TND_CUDA_EXPORT_ALL 0x1u

struct tnd_cuda_export {
	char name[TND_PREFIX_SIZE];            /* tensor-name rules */
	uint8_t mem_handle[TND_CUDA_HANDLE_SIZE]; /* cudaIpcMemHandle_t of the allocation */
	uint8_t event_handle[TND_CUDA_HANDLE_SIZE]; /* cudaIpcEventHandle_t (TND_CUDA_EVENT) */
	uint8_t device_uuid[16];               /* the GPU's UUID (ordinals differ per process) */
	uint64_t alloc_bytes;                  /* size of the allocation the handle names */
	uint64_t offset;                       /* where the storage starts in it */
	uint64_t storage_bytes;
	int64_t storage_offset;                /* the tensor's, in elements */
	uint32_t dtype;                        /* enum tn_dtype */
	uint32_t ndim;
	uint32_t flags;                        /* TND_CUDA_* */
	uint32_t mode;                         /* 0..0077: group and others may import (read bit) */
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t strides[TN_ARENA_MAX_DIMS];
};

/* States of an export, in tnd_cuda_info.state. */
#define TND_CUDA_WITHDRAWN 0x1u   /* unexported: no new imports; gone once nobody holds it */
#define TND_CUDA_OWNER_GONE 0x2u  /* the exporting process has exited */
#define TND_CUDA_DETACHED 0x4u    /* the owner is alive but not connected (after a restart) */

struct tnd_cuda_ref {
	char name[TND_PREFIX_SIZE];
	uint64_t id; /* the export's; 0: whichever has the name (IMPORT, STAT) */
};

struct tnd_cuda_info {
	struct tnd_cuda_export rec;
	uint64_t id;          /* unique for the daemon's table, never reused */
	int32_t owner_pid;
	uint32_t owner_uid;
	uint32_t owner_gid;
	uint32_t holders;     /* holds on it, all importers together */
	uint32_t importers;   /* processes holding it */
	uint32_t state;       /* TND_CUDA_WITHDRAWN, ... */
	uint64_t created;     /* CLOCK_REALTIME, seconds */
	uint64_t count;       /* in the final reply of CUDA_LIST: the items sent */
};

/* ---- validation (tensord/proto.c) ---------------------------------------------------------- */

/* Size of an operation's request and reply bodies; -1 for an unknown operation. */
int64_t tnd_request_size(unsigned op);
int64_t tnd_reply_size(unsigned op);
const char *tnd_op_name(unsigned op); /* "HELLO", ...; "?" when unknown */

/*
 * tnd_check_request - validate a received request of @len bytes at @msg, header and body,
 * every field. @has_fd: a descriptor came with it. Returns 0 or TN_EPROTO with a message
 * naming the field (tn_last_error).
 */
int tnd_check_request(const void *msg, size_t len, bool has_fd);

/* tnd_check_reply - the same for a reply to a request of operation @op and sequence @seq. */
int tnd_check_reply(const void *msg, size_t len, unsigned op, uint32_t seq, bool has_fd);

/* tnd_name_ok - whether @name (a NUL-terminated array of TND_NAME_SIZE) is a valid arena
 * name. */
bool tnd_name_ok(const char *name);

/* tnd_cuda_export_problem - what is wrong with an export record (a request's, or one read
 * back from the daemon's table file), or NULL. */
const char *tnd_cuda_export_problem(const struct tnd_cuda_export *m);

/* tnd_init_msg - fill a header for a message of @op with a body of @body_len bytes. */
void tnd_init_hdr(struct tnd_hdr *h, unsigned op, size_t body_len, uint32_t seq, int32_t status,
		  uint32_t flags);

#endif /* TENSORD_PROTO_H */
