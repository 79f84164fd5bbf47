/* SPDX-License-Identifier: MIT */
/*
 * NUMA: the machine's topology (hwloc) and memory placement (libnuma's mbind, move_pages).
 *
 * Placement policies are shared by the CPU allocator, the arenas (tensor/arena.h) and the
 * per-allocation calls: a policy and a node mask (bit n = NUMA node n, at most 64 nodes).
 */
#ifndef TENSOR_NUMA_H
#define TENSOR_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/macros.h>

TN_BEGIN_DECLS

/* Where pages go. The values are stored in arena files: never renumber them. */
enum tn_numa_policy {
	TN_NUMA_DEFAULT = 0,    /* the process's policy (usually: the node that touches first) */
	TN_NUMA_BIND = 1,       /* only the nodes of the mask; fail rather than spill */
	TN_NUMA_INTERLEAVE = 2, /* round-robin page by page over the nodes of the mask */
	TN_NUMA_PREFERRED = 3,  /* the (lowest) node of the mask first, others when it is full */
	TN_NUMA_LOCAL = 4,      /* the node of the CPU that allocates (MPOL_LOCAL) */
};

#define TN_NUMA_MAX_NODES 64

TN_END_DECLS

#endif /* TENSOR_NUMA_H */
