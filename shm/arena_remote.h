/* SPDX-License-Identifier: MIT */
/*
 * Arena internals for tensord and its client library (not exported from libtensor.so; the
 * daemon links a static copy of the library, the client library is compiled into it).
 *
 * With tensord, the daemon assigns client slots: it records the client's pid and start time
 * (from SO_PEERCRED and /proc) in a free slot of the arena's client table, passes the slot
 * number with the arena fd, and the client adopts the slot when it maps the file. The daemon
 * remembers the slot's state word (state and generation) so that it can later reclaim
 * exactly that attachment and never a slot that has since been given to someone else.
 *
 * A read-only client maps the file PROT_READ through a read-only fd: it cannot take the lock
 * or write a hold bit. Its handle carries remote operations (struct tn__arena_remote) through
 * which a lookup asks the daemon to resolve the name and hold the block for the client's slot,
 * and the last local release asks the daemon to drop that hold.
 */
#ifndef TN_SHM_ARENA_REMOTE_H
#define TN_SHM_ARENA_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/arena.h>

/* The start time of process @pid (clock ticks after boot, field 22 of /proc/PID/stat): 0 when
 * it is gone or a zombie, UINT64_MAX when it cannot be told. */
uint64_t tn__proc_start_time(int64_t pid);

/* Milliseconds the calling thread waits for an arena's lock before the call fails with
 * TN_EBUSY; 0 (the default) waits tn__arena_lock_default_ms(). */
extern _Thread_local unsigned tn__arena_lock_timeout_ms;
/* The bound on a lock wait where the thread sets none: TN_ARENA_LOCK_TIMEOUT_MS, or 10 s. */
unsigned tn__arena_lock_default_ms(void);

/* ---- daemon side ----------------------------------------------------------------------------- */

/*
 * tn__arena_assign_slot - take a free client slot for process @pid, whose start time (in clock
 * ticks after boot, as tn__proc_start_time gives) is @start_time; reclaims the slots of dead
 * processes first when none is free. Writes the slot and its state word (to be passed to
 * tn__arena_reclaim_if). Returns 0, TN_EBUSY (every slot live), TN_EINVAL (pid <= 0, NULL
 * ret), TN_EPERM (a read-only handle), or a lock error.
 */
int tn__arena_assign_slot(tn_arena *a, int32_t pid, uint64_t start_time, int *ret_slot,
			  uint64_t *ret_state);

/*
 * tn__arena_slot_info - read slot @slot's record: whether attached, pid, start time, state
 * word (each output may be NULL). Also on a read-only handle, which reads the record without
 * the lock. Returns 0 or TN_ERANGE.
 */
int tn__arena_slot_info(tn_arena *a, int slot, bool *ret_attached, int32_t *ret_pid,
			uint64_t *ret_start_time, uint64_t *ret_state);

/*
 * tn__arena_reclaim_if - reclaim slot @slot (drop its holds, free what nobody else holds,
 * release the slot) only if its state word is still @state; returns 1 when it did, 0 when
 * the slot had changed hands or was already free, or a negative error. @ret_freed (may be
 * NULL) gets the heap bytes that became free. The daemon decides that the client is gone (its
 * socket closed); the process need not be dead. Errors: TN_ERANGE (slot outside the table),
 * TN_EINVAL (the caller's own slot), TN_EPERM (a read-only handle), TN_EIO (damage).
 */
int tn__arena_reclaim_if(tn_arena *a, int slot, uint64_t state, uint64_t *ret_freed);

/* What a read-only client gets for a name: the entry as tn_arena_info gives it, and the block
 * the daemon now holds for the client's slot. */
struct tn__arena_remote_entry {
	tn_arena_entry entry;
	uint64_t block; /* offset of the block header in the file */
};

/*
 * tn__arena_hold_for - resolve @name (NULL: use @handle instead) under the lock and set
 * @slot's hold bit on the block it names (a block already held by that slot stays held once:
 * holds are bits). Fills *ret. Returns 0, TN_ENOENT, TN_ESTALE (handle generation), TN_ERANGE
 * (slot outside the table or not attached), TN_EINVAL (bad name, or neither name nor handle),
 * TN_EIO (a damaged entry, never trusted).
 */
int tn__arena_hold_for(tn_arena *a, int slot, const char *name, const tn_arena_handle *handle,
		       struct tn__arena_remote_entry *ret);

/*
 * tn__arena_release_for - clear @slot's hold bit on the block at offset @block and free the
 * block if nothing else holds or pins it. Returns 0, TN_EINVAL (not a block, a raw block, not
 * held by the slot), TN_ERANGE (slot outside the table).
 */
int tn__arena_release_for(tn_arena *a, int slot, uint64_t block);

/*
 * tn__arena_reseal - set the seal bits of the entry @handle names (the entry's flag and its
 * block's) again, under the lock, if the entry is still the one @handle names. For tensord,
 * whose record of a seal is kept where read-write grantees cannot write it. Returns 1 when a
 * bit had been cleared and is set again, 0 when both were set, TN_ESTALE (the name was
 * unpublished or replaced since), TN_EIO (the entry is damaged), TN_EPERM (a read-only
 * handle), or a lock error.
 */
int tn__arena_reseal(tn_arena *a, tn_arena_handle handle);

/*
 * tn__arena_slot_restore - write @pid and @start_time back into slot @slot's record of the
 * client table, if the slot is attached with state word @state (tensord's own record of the
 * process it assigned the slot to, when the file's record was overwritten by another
 * process). Returns 1 when the record was rewritten, 0 when it already said so or the slot
 * changed hands, TN_ERANGE, TN_EPERM (a read-only handle), or a lock error.
 */
int tn__arena_slot_restore(tn_arena *a, int slot, uint64_t state, int32_t pid,
			   uint64_t start_time);

/*
 * tn__arena_waiting_for - set (@on) or clear @slot's bit in the arena's waiting mask, for a
 * read-only client that cannot write it (tensord's WAITING request). Returns 0, TN_ERANGE (slot
 * outside the table or not attached), TN_EPERM (a read-only handle).
 */
int tn__arena_waiting_for(tn_arena *a, int slot, bool on);

/* ---- client side ---------------------------------------------------------------------------- */

/*
 * The callbacks run with the handle's lock of its local holds held (so that a hold and the
 * release of the same block by two threads are ordered): they must not call back into the
 * handle, nor drop a tensor of it. hold is called for every lookup, also of a block the process
 * holds already (the daemon's hold is a bit: setting it again is harmless); release once per
 * block, when the process's last storage over it goes (and at the last unref for any block
 * still recorded, which only a leaked storage leaves).
 */

struct tn__arena_remote {
	/* Resolve a name (or a handle when name is NULL) and hold its block for this client.
	 * Returns 0 or a negative code (with the message set). */
	int (*hold)(void *ctx, const char *name, const tn_arena_handle *handle,
		    struct tn__arena_remote_entry *ret);
	/* Drop the hold on @block (the process's last storage over it is gone). */
	void (*release)(void *ctx, uint64_t block);
	/* The handle's last reference is gone: give the slot back. Then unref ctx. */
	void (*detach)(void *ctx, int slot);
	/* A read-write handle sealed @name (tn_arena_seal, or a sealed publish): tell the
	 * daemon, which keeps its own record of the seal and a digest of the bytes. May be NULL.
	 * Called without any lock of the handle's; a failure is the daemon's to mend later (its
	 * sweep finds the seal bit). */
	void (*sealed)(void *ctx, const char *name);
	/* A read-only handle's thread begins (@on) or ends waiting for a publish: the daemon sets
	 * or clears the slot's waiting bit, which the handle cannot write. Returns 0 or a negative
	 * code (TN_ENOTSUP from an older daemon: the waiter then wakes at intervals). May be NULL
	 * (the same). */
	int (*waiting)(void *ctx, bool on);
	void *ctx;
};

#define TN__ATTACH_READ_ONLY 0x1u

/*
 * tn__arena_attach_slot - map the arena file open at @fd (duplicated; the caller keeps its
 * own) and adopt client slot @slot, which must be attached to this process (pid and start
 * time), as the daemon assigned it. With TN__ATTACH_READ_ONLY the file is mapped read-only
 * (the fd may be O_RDONLY) and @remote (copied; required) serves lookups and releases; every
 * tensor looked up is read-only as a sealed one; alloc, publish, unpublish, seal, trim,
 * reclaim and fsck repair fail with TN_EPERM; info, list, stat and clients read without the
 * lock, validating everything they read (an answer may be momentarily stale); trim, use and
 * place fail with TN_EPERM too; there are no thread caches. Without the flag @remote may be
 * NULL, and a non-NULL one gets only detach (at the last unref, after the handle released its
 * slot itself) and sealed. detach is called after the file is unmapped. On failure @remote is not used
 * (its ctx stays the caller's). Returns 0, TN_EINVAL (not an arena, bad slot or flags, a
 * read-only attachment without hold and release), TN_EPERM (slot not ours; or a read-write
 * attachment through a read-only fd, which cannot be mapped writable), TN_EIO.
 */
int tn__arena_attach_slot(int fd, int slot, unsigned flags, const struct tn__arena_remote *remote,
			  tn_arena **ret_arena);

/* tn__arena_read_only - whether the handle was attached read-only. */
bool tn__arena_read_only(const tn_arena *a);

/* tn__arena_uuid - the arena's uuid (16 bytes), copied into the handle at attach. */
void tn__arena_uuid(const tn_arena *a, uint8_t ret_uuid[16]);

/* tn__arena_mappings - where the handle maps the file: its read-write mapping (read-only for
 * a read-only handle), its read-only alias (NULL for a read-only handle), their length and
 * the arena's page size (both mappings start on a page boundary). NULLs and 0 for a bad
 * handle. For tensord's SIGBUS guard (tensord/guard.c). */
void tn__arena_mappings(const tn_arena *a, void **ret_rw, void **ret_ro, size_t *ret_len,
			size_t *ret_page);

#endif /* TN_SHM_ARENA_REMOTE_H */
