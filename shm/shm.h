/* SPDX-License-Identifier: MIT */
/*
 * What the shared-memory floor offers the layers above it beyond the public <tensor/arena.h>:
 * a handle's mappings, and observers told before an arena handle's mappings go (a backend
 * that pinned them for DMA registers one, so shm/ never names the backend).
 */
#ifndef TN_SHM_H
#define TN_SHM_H

#include <stdbool.h>
#include <stddef.h>

#include <tensor/arena.h>

/* The mappings of an arena handle of this process. */
struct tn__arena_mapping {
	void *base;     /* the read-write mapping; read-only for a read-only handle */
	void *ro;       /* the read-only mapping of the same file; NULL for a read-only handle */
	size_t size;    /* bytes of each */
	bool read_only; /* attached read-only: base is a PROT_READ mapping */
};

/* The mappings of @arena; TN_EINVAL when it is not a live arena handle of this process (a
 * handle inherited across fork() is not). */
int tn__arena_mapping(const tn_arena *arena, struct tn__arena_mapping *ret);

/*
 * An observer of arena handles: unmapping(@self, @arena, @map) is called in the process that
 * made @arena, once, when its last reference goes and before its mappings @map are unmapped
 * (never in a fork child for its parent's handles). It must not call back into @arena.
 */
struct tn__arena_observer {
	void (*unmapping)(struct tn__arena_observer *self, tn_arena *arena,
			  const struct tn__arena_mapping *map);
	struct tn__arena_observer *next; /* the list's link, set by tn__arena_observe */
};

/* Add @observer (static storage; observers are never removed). */
void tn__arena_observe(struct tn__arena_observer *observer);

#endif /* TN_SHM_H */
