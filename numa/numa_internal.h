/* SPDX-License-Identifier: MIT */
/*
 * The NUMA floor's internals: placement of memory with libnuma's system calls, for the CPU
 * allocator and the arenas above. It uses only the base floor (DESIGN.md section 3).
 */
#ifndef TN_NUMA_INTERNAL_H
#define TN_NUMA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/numa.h>

#include "../base/base.h"

/* The number of NUMA nodes (1 on a machine without NUMA). */
int tn__numa_node_count(void);
/* Bind [addr, addr+len) (page aligned, not yet touched) to @node; advice, errno preserved. */
int tn__numa_bind(void *addr, size_t len, int node);
/* Apply @policy over @nodes to [addr, addr+len) (page aligned) with mbind; with @move, migrate
 * pages already there. Returns 0 or a negative errno; errno is preserved. */
int tn__numa_apply(void *addr, size_t len, int policy, uint64_t nodes, bool move);
/* Count the resident pages of [addr, addr+len) per node into ret_pages[0..nnodes-1] with
 * move_pages; pages not yet faulted in are skipped. Returns the pages counted or -errno. */
int64_t tn__numa_residency(const void *addr, size_t len, size_t page_size, uint64_t *ret_pages,
			   int nnodes);

#endif /* TN_NUMA_INTERNAL_H */
