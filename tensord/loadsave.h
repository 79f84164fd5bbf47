/* SPDX-License-Identifier: MIT */
/*
 * Loading and saving tensors between files and arenas with io_uring (tensord's LOAD and SAVE).
 * Synchronous: the daemon runs them on a worker thread.
 */
#ifndef TENSORD_LOADSAVE_H
#define TENSORD_LOADSAVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <tensor.h>

typedef void (*tnd_progress_fn)(void *ctx, uint64_t done, uint64_t total);

struct tnd_xfer_result {
	uint64_t tensors, bytes, file_bytes, elapsed_ns;
};

int tnd_load(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret);
int tnd_save(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret);

#endif /* TENSORD_LOADSAVE_H */
