/* SPDX-License-Identifier: MIT */
/*
 * Loading and saving tensors between files (safetensors, NumPy .npy) and arenas, for tensord's
 * LOAD and SAVE requests. A worker thread of the daemon calls these synchronously; each call
 * runs its own io_uring with several large reads or writes in flight.
 *
 * Loading reads straight into the arena blocks of the tensors when the file's pages are in the
 * page cache (one copy, the kernel's). Parts of the file that are not cached are read with
 * O_DIRECT (the file reopened through /proc/self/fd) into aligned staging buffers and copied
 * out, since a tensor's offset in a safetensors file is rarely aligned the way its block is:
 * reading around the page cache is what reaches the device's speed, and it leaves no second
 * copy of the file in memory beside the arena's. Without O_DIRECT (a file system that refuses
 * it, no /proc) every read is buffered.
 *
 * Errors are libtensor codes with a message in the thread's last error (tn_last_error); the
 * functions never print. Messages about malformed files are the formats layer's
 * (tensord/formats.h); the others begin with the function's name. The descriptor @fd stays
 * the caller's: it is never closed, and its file offset is not used or moved.
 */
#ifndef TENSORD_LOADSAVE_H
#define TENSORD_LOADSAVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <tensor.h>

#include "proto.h"

/* Reads and writes move at most this many bytes each, this many at once; progress is
 * reported at most every TND_XFER_PROGRESS_STEP bytes. */
#define TND_XFER_CHUNK ((size_t)8 << 20)
#define TND_XFER_DEPTH 8
#define TND_XFER_PROGRESS_STEP ((uint64_t)64 << 20)

/* Called with the data bytes moved so far (headers not counted) and the total. */
typedef void (*tnd_progress_fn)(void *ctx, uint64_t done, uint64_t total);

struct tnd_xfer_result {
	uint64_t tensors;    /* tensors loaded or saved */
	uint64_t bytes;      /* their data bytes */
	uint64_t file_bytes; /* the file's size */
	uint64_t elapsed_ns;
};

/*
 * tnd_load - read the tensors of the regular file open for reading at @fd (format
 * TND_FORMAT_AUTO, _SAFETENSORS or _NPY; AUTO tells them by the .npy magic) into the arena @a
 * (a read-write handle), each in a block of its own, and publish each as @prefix followed by
 * its name in the file (NULL or "" for none); a .npy file has no names, so @prefix is the
 * whole name and is required. Fortran-order .npy arrays are published with column-major
 * strides, big-endian ones swapped to this machine's order. @flags: TND_XFER_SEAL seals every
 * tensor, TND_XFER_REPLACE replaces unsealed tensors of the same names, TND_XFER_EVICTABLE
 * publishes them as cache tensors (TN_ARENA_EVICTABLE). A safetensors file's
 * "__metadata__" entries are published too, as the uint8 vector @prefix"__metadata__" holding
 * the JSON {"__metadata__":{...}} (a name no tensor of a file can have); tnd_save writes them
 * back. It is one more name, under the same rules, not counted in ret->tensors.
 *
 * All or nothing: every name is checked before any data is read, and on any failure no tensor
 * of the file stays published, tensors replaced are published again as they were, and every
 * block allocated is freed. @cancel (may be NULL) is polled between chunks; once it reads
 * true the load fails with TN_EIO "tnd_load: cancelled". @progress (may be NULL) is called
 * with @ctx at most every TND_XFER_PROGRESS_STEP bytes, with @done never decreasing, and once
 * at the end with @done == @total (on success). *ret (may be NULL) gets the figures on success.
 *
 * Errors: TN_EINVAL (bad arguments, not a regular file, a malformed file, a name the arena
 * refuses, a name longer than TN_ARENA_NAME_MAX), TN_EACCES (@fd not open for reading),
 * TN_ENOTSUP (a dtype or rank libtensor lacks), TN_EEXIST (a name is taken and no
 * TND_XFER_REPLACE, or it is sealed), TN_ENOMEM (the arena or the process is out of memory),
 * TN_ENOSPC (the arena's directory is full), TN_EIO (a read failed, the file shrank, cancelled).
 */
int tnd_load(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret);

/*
 * tnd_load_txn - tnd_load, with the names published as one transaction that survives the
 * death of the calling process (@journal NULL: as tnd_load). Before the first name is
 * published, a journal is written at @journal->path listing the names and their new blocks,
 * and every tensor being replaced is also published under a backup name
 * (TND_LOAD_BACKUP_PREFIX, @journal->id, an index), which needs a free directory entry each;
 * removing the journal commits the load. A process that dies before the commit leaves the
 * journal: tnd_load_rollback undoes the load from it. Errors as tnd_load's, and TN_EIO or
 * TN_ENOSPC when the journal cannot be written or removed.
 */
struct tnd_load_journal {
	const char *path;  /* the journal's file (a temporary beside it is renamed over it) */
	const char *arena; /* the arena's name, recorded for the recovery */
	uint64_t id;       /* unique among the loads of the arena's lifetime */
};
#define TND_LOAD_BACKUP_PREFIX ".tensord-load/"
int tnd_load_txn(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
		 tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
		 const struct tnd_load_journal *journal, struct tnd_xfer_result *ret);

/* The arena a load journal at @path was written for, into @ret_arena; 0, TN_EIO or
 * TN_EINVAL (not a journal). */
int tnd_load_journal_arena(const char *path, char ret_arena[TND_NAME_SIZE]);

/*
 * tnd_load_rollback - undo the load that left the journal at @path in @a (a read-write
 * handle): each name of the journal that still names the load's new block is unpublished,
 * and given back the tensor it had, from its backup name; the backups are unpublished and the
 * journal removed. Names that no longer name the load's blocks are left alone. *ret_names
 * (may be NULL) gets the number of names undone. Errors: TN_EIO, TN_EINVAL (not a journal),
 * and those of looking up, unpublishing and publishing (TN_EBUSY for a lock held too long):
 * then the journal stays, and a later call goes on from the start (the rollback is
 * idempotent).
 */
int tnd_load_rollback(tn_arena *a, const char *path, uint64_t *ret_names);

/* tnd_load_sweep_backups - unpublish every backup name left in @a by loads that committed
 * (call after rolling back every journal of @a); returns how many, or an error. */
int tnd_load_sweep_backups(tn_arena *a);

/*
 * tnd_save - write the tensors of @a whose names start with @prefix (NULL or "": all) to the
 * empty regular file open for writing at @fd. TND_FORMAT_SAFETENSORS: every such tensor,
 * named relative to @prefix (the part of its name after it), laid out as the reference
 * writer lays them out, with the metadata of @prefix"__metadata__" (see tnd_load) as the
 * file's "__metadata__"; or, when @prefix is a tensor's whole name, that tensor alone under
 * its whole name. TND_FORMAT_NPY: the one tensor named @prefix exactly; a tensor
 * contiguous in column-major order but not in row-major order is written with fortran_order
 * True. Other non-contiguous tensors are written in C order. @flags: 0, or
 * TND_SAVE_ALIGN_PAGES to pad a safetensors header so that the data starts at a multiple of
 * 4096 (tensord's spill files, read back with O_DIRECT straight into their block); @progress,
 * @ctx, @cancel and *ret as for tnd_load. On failure the file is truncated back to empty.
 *
 * Errors: TN_EINVAL (bad arguments, TND_FORMAT_AUTO, not a regular file, a file that is not
 * empty, a @prefix"__metadata__" that is not a record tnd_load made), TN_EACCES (@fd
 * not open for writing), TN_ENOENT (no tensor has the name or the prefix), TN_ENOTSUP
 * (bfloat16 in .npy), TN_ENOMEM, TN_ENOSPC (the file system is full), TN_EIO (a write failed,
 * cancelled).
 */
/* Reads made with O_DIRECT straight into a tensor's bytes, by every load of the process (for
 * the tests and benchmarks). */
extern _Atomic uint64_t tnd_direct_reads;
#define TND_SAVE_ALIGN_PAGES 0x100u /* pad the header: the data starts at a multiple of 4096 */
int tnd_save(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret);

/*
 * tnd_read_tensor - read the safetensors file at @fd, which must hold the one tensor @name with
 * the dtype and sizes of @dest (a contiguous tensor), into @dest's bytes: tensord's restore of a
 * spilled entry, through the same engine as tnd_load (O_DIRECT for what is not cached).
 * Errors: TN_EINVAL (another file), TN_ENOMEM, TN_EIO (a read failed, cancelled).
 */
int tnd_read_tensor(int fd, const char *name, tn_tensor *dest, const _Atomic bool *cancel);

#endif /* TENSORD_LOADSAVE_H */
