/* SPDX-License-Identifier: MIT */
/*
 * The bookkeeping of pinned host memory (cuda/pinned.c): the sorted table of the ranges
 * registered through libtensor, without any CUDA call, so the host tests
 * (tests/check_cuda_pinned.c) can drive it without a GPU.
 */
#ifndef TN_CUDA_PINNED_H
#define TN_CUDA_PINNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A range's internal flag: being registered or unregistered with CUDA right now; lookups do
 * not see it, insertions still collide with it. */
#define TN__PINNED_BUSY 0x80000000u

struct tn__pinned_range {
	uintptr_t start;
	size_t len; /* > 0; start + len does not wrap */
	unsigned flags; /* TN_CUDA_HOST_* | TN__PINNED_BUSY */
};

/* Ranges sorted by start, pairwise disjoint. A zeroed table is empty and valid. */
struct tn__pinned_table {
	struct tn__pinned_range *r;
	size_t n, cap;
};

/*
 * Insert [start, start+len) with @flags. TN_EINVAL for len 0 or a range that wraps the
 * address space, TN_EEXIST when it overlaps a range of the table (adjacent ranges are fine),
 * TN_ENOMEM; each with a message naming @who.
 */
int tn__pinned_insert(struct tn__pinned_table *t, uintptr_t start, size_t len, unsigned flags,
		      const char *who);

/* The index of the range that starts exactly at @start, or -1. */
ptrdiff_t tn__pinned_index(const struct tn__pinned_table *t, uintptr_t start);

/* Remove range @i (from tn__pinned_index). */
void tn__pinned_remove_at(struct tn__pinned_table *t, size_t i);

/*
 * The range that contains all of [p, p+len) (len 0: the byte at p), or NULL; ranges marked
 * TN__PINNED_BUSY are ignored. O(log n).
 */
const struct tn__pinned_range *tn__pinned_find(const struct tn__pinned_table *t, uintptr_t p,
					       size_t len);

/* Empty the table and free its array. */
void tn__pinned_clear(struct tn__pinned_table *t);

/*
 * The process-wide table behind tn_cuda_host_register, under its lock (also for the host
 * tests). tn__pinned_add inserts, as tn__pinned_insert. tn__pinned_mark changes the flags of
 * the range starting at @start (| @set, & ~@clear) and copies it to *ret (may be NULL):
 * TN_ENOENT when no range starts there, TN_EBUSY when @set has TN__PINNED_BUSY and the range
 * has it already (somebody else is registering or unregistering it). tn__pinned_del removes
 * the range starting at @start (TN_ENOENT when none); only the holder of its busy mark, or a
 * test, calls it.
 */
int tn__pinned_add(uintptr_t start, size_t len, unsigned flags, const char *who);
int tn__pinned_mark(uintptr_t start, unsigned set, unsigned clear, struct tn__pinned_range *ret,
		    const char *who);
int tn__pinned_del(uintptr_t start, const char *who);
/* The number of ranges in the process-wide table (busy ones included). */
size_t tn__pinned_count(void);

#endif /* TN_CUDA_PINNED_H */
