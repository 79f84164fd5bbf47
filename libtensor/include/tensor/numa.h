/* SPDX-License-Identifier: MIT */
/*
 * NUMA: the machine's topology (hwloc) and memory placement (libnuma's mbind, move_pages).
 *
 * Placement policies are shared by the CPU allocator, the arenas (tensor/arena.h) and the
 * per-allocation calls: a policy and a node mask (bit n = NUMA node n, at most 64 nodes).
 *
 * A topology (tn_topology) is a read-only snapshot of a machine, taken from hwloc: this
 * machine's, or one described by an hwloc synthetic string or XML export, so that code that
 * places memory and threads can be tested for machines it does not run on. Nodes and CPUs
 * are named everywhere by their operating-system numbers, the ones that placement masks,
 * sched_setaffinity(2), numactl(8) and /sys/devices/system/{node,cpu} use. A topology holds
 * no hwloc object: every query reads the snapshot, allocates nothing and may be made from
 * any number of threads at once.
 *
 * Worker pinning binds the OpenMP threads that run libtensor's parallel loops to one CPU
 * each, so that a loop runs next to the memory it reads (tn_topology_pin_plan picks the
 * CPUs, tn_workers_pin applies them).
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

/* The most OpenMP workers tn_workers_pin() binds (TN_NUM_THREADS has the same limit). */
#define TN_WORKERS_MAX 1024

typedef struct tn_topology tn_topology;

/* One NUMA node of a topology (tn_topology_node_info). */
typedef struct tn_numa_node_info {
	int node;        /* its operating-system number, as in placement masks */
	int cores;       /* cores with at least one of the node's CPUs */
	int cpus;        /* CPUs (processing units, hardware threads) in the node's set */
	uint64_t memory; /* bytes of memory local to the node; 0 when unknown */
} tn_numa_node_info;

/* One data (or unified) cache of a topology (tn_topology_cache, tn_topology_cpu_cache). */
typedef struct tn_cache_info {
	int level;         /* 1 (the L1 data cache), 2 or 3 */
	int index;         /* its place among the caches of its level, from 0, in topology order */
	uint64_t size;     /* bytes; 0 when unknown */
	int line_size;     /* bytes; 0 when unknown */
	int associativity; /* ways; 0 when unknown, -1 when fully associative */
	int cpus;          /* CPUs that share it */
} tn_cache_info;

/*
 * tn_topology_load - take a snapshot of this machine's topology.
 * @ret: on success, a new topology (release it with tn_topology_unref).
 *
 * Covers the CPUs and nodes this process may use (its cgroup's cpuset) and the PCI devices.
 * Returns 0, TN_EINVAL (ret NULL), TN_ENOMEM, TN_ENOTSUP (a node numbered 64 or more) or
 * TN_EIO (hwloc could not read the machine).
 */
TN_EXPORT int tn_topology_load(tn_topology **ret);

/*
 * tn_topology_load_synthetic - a topology from an hwloc synthetic description.
 * @description: for example "pack:2 numa:1 l3:1 core:4 pu:2" (hwloc(7), lstopo(1) -i).
 * @ret: on success, a new topology.
 *
 * Such a topology has no PCI device and no distance matrix. Returns 0, TN_EINVAL (NULL
 * argument, or a description hwloc rejects), TN_ENOMEM or TN_ENOTSUP (64 nodes or more).
 */
TN_EXPORT int tn_topology_load_synthetic(const char *description, tn_topology **ret);

/*
 * tn_topology_load_xml - a topology from an hwloc XML export (lstopo --of xml).
 * @path: the file to read.
 * @ret: on success, a new topology.
 *
 * XML keeps what synthetic descriptions cannot: PCI devices and distance matrices. Returns
 * 0, TN_EINVAL (NULL argument or not a valid hwloc XML topology), TN_ENOENT (no such file),
 * TN_EIO (other read errors), TN_ENOMEM or TN_ENOTSUP (64 nodes or more).
 */
TN_EXPORT int tn_topology_load_xml(const char *path, tn_topology **ret);

/*
 * tn_topology_load_xml_buffer - as tn_topology_load_xml, from @len bytes at @xml (a
 * terminating NUL is neither needed nor harmful). The buffer is not kept.
 */
TN_EXPORT int tn_topology_load_xml_buffer(const char *xml, size_t len, tn_topology **ret);

/*
 * tn_topology_ref - take one more reference to @topo; returns @topo (NULL if it is not a
 * live topology).
 */
TN_EXPORT tn_topology *tn_topology_ref(tn_topology *topo);

/*
 * tn_topology_unref - drop a reference; the last one frees the topology. Accepts NULL and
 * returns NULL.
 */
TN_EXPORT tn_topology *tn_topology_unref(tn_topology *topo);

/*
 * tn_topology_nodes - the number of NUMA nodes, and which.
 * @ret_nodes: if not NULL, receives the node mask (bit n for node n).
 *
 * Returns the count (at least 1), or TN_EBADF when @topo is not a live topology.
 */
TN_EXPORT int tn_topology_nodes(const tn_topology *topo, uint64_t *ret_nodes);

/*
 * tn_topology_node_info - one node's CPUs, cores and memory.
 * Returns 0, TN_EBADF, TN_EINVAL (ret NULL) or TN_ERANGE (the topology has no node @node).
 */
TN_EXPORT int tn_topology_node_info(const tn_topology *topo, int node, tn_numa_node_info *ret);

/*
 * tn_topology_node_cpus - the CPUs of node @node, in increasing order.
 * @ret_cpus: receives up to @max CPU numbers (may be NULL when @max is 0).
 *
 * Returns the node's CPU count, which may exceed @max (as snprintf does: call again with a
 * larger array), or TN_EBADF, TN_EINVAL (max < 0, or ret_cpus NULL with max > 0), TN_ERANGE.
 */
TN_EXPORT int tn_topology_node_cpus(const tn_topology *topo, int node, int *ret_cpus, int max);

/*
 * tn_topology_cpu_node - the NUMA node of CPU @cpu (the lowest-numbered one, if several
 * nodes hold it). Returns the node, or TN_EBADF or TN_ERANGE (no such CPU).
 */
TN_EXPORT int tn_topology_cpu_node(const tn_topology *topo, int cpu);

/*
 * tn_topology_cache_count - how many caches of @level (1: L1 data, 2, 3) the topology has:
 * 0 when it has none of that level. Returns the count, TN_EBADF or TN_EINVAL (bad level).
 */
TN_EXPORT int tn_topology_cache_count(const tn_topology *topo, int level);

/*
 * tn_topology_cache - cache @index of @level: its size and the CPUs that share it.
 * @ret: if not NULL, receives the cache's description.
 * @ret_cpus: receives up to @max of the CPUs that share it, in increasing order.
 *
 * Returns the number of CPUs that share it (may exceed @max), or TN_EBADF, TN_EINVAL (bad
 * level or buffer) or TN_ERANGE (no cache @index at that level).
 */
TN_EXPORT int tn_topology_cache(const tn_topology *topo, int level, int index, tn_cache_info *ret,
				int *ret_cpus, int max);

/*
 * tn_topology_cpu_cache - the cache of @level that CPU @cpu uses.
 * Returns 0, TN_EBADF, TN_EINVAL (bad level, ret NULL), TN_ERANGE (no such CPU) or
 * TN_ENOENT (the CPU has no cache of that level).
 */
TN_EXPORT int tn_topology_cpu_cache(const tn_topology *topo, int cpu, int level,
				    tn_cache_info *ret);

/*
 * tn_topology_pci_node - the NUMA node nearest a PCI device (a GPU, a NIC).
 * @busid: "dddd:bb:dd.f" (domain, bus, device, function in hex, as lspci -D and CUDA's
 *         cudaDeviceGetPCIBusId write them; the domain may have up to 8 digits or be left out).
 * @ret_nodes: if not NULL, receives every node equally near (a device attached to the whole
 *             machine is near all of them).
 *
 * Returns the lowest of those nodes, or TN_EBADF, TN_EINVAL (malformed bus id) or TN_ENOENT
 * (no such device in the topology).
 */
TN_EXPORT int tn_topology_pci_node(const tn_topology *topo, const char *busid,
				   uint64_t *ret_nodes);

/*
 * tn_topology_distance - the relative distance from node @from to node @to, as the ACPI SLIT
 * gives it (10 for a node to itself, larger for farther nodes).
 * Returns 0, TN_EBADF, TN_EINVAL (ret NULL), TN_ERANGE (no such node) or TN_ENOENT (hwloc
 * has no distance matrix for this topology, as for most one-node machines).
 */
TN_EXPORT int tn_topology_distance(const tn_topology *topo, int from, int to,
				   uint64_t *ret_distance);

/*
 * tn_topology_pin_plan - choose a CPU for each of @threads worker threads on the nodes of
 * @nodes: spread over the nodes' cores one CPU per core first, as OpenMP's
 * OMP_PROC_BIND=spread with OMP_PLACES=cores, so that worker i of n works on core
 * i * cores / n; with more threads than cores, the extra workers go to the next CPU
 * (hyperthread) of the same cores, and round again past the last.
 * @ret_cpus: receives @threads CPU numbers; ret_cpus[i] is worker i's.
 *
 * Pure computation on the snapshot. Returns 0, or TN_EBADF, TN_EINVAL (threads < 1, ret_cpus
 * NULL, an empty mask, or nodes without CPUs) or TN_ERANGE (a node the topology lacks).
 */
TN_EXPORT int tn_topology_pin_plan(const tn_topology *topo, uint64_t nodes, int threads,
				   int *ret_cpus);

/*
 * tn_workers_pin - bind the OpenMP workers of the calling thread's parallel loops to CPUs.
 * @cpus: worker i is bound to cpus[i] (sched_setaffinity(2) with that one CPU).
 * @threads: 1 to TN_WORKERS_MAX; libtensor's parallel loops then use this many threads.
 *
 * The calling thread is worker 0. The process's CPU mask as it was before the first pin is
 * kept for tn_workers_unpin. Returns the number of workers bound (OpenMP may give fewer
 * than asked), or TN_EINVAL (bad arguments, or a CPU outside the process's mask), TN_EBUSY
 * (called inside a parallel region, or OMP_PROC_BIND has OpenMP bind its threads itself) or
 * TN_EIO (the kernel refused); on failure every worker is left as it was before the call.
 */
TN_EXPORT int tn_workers_pin(const int *cpus, int threads);

/*
 * tn_workers_unpin - give the workers and the calling thread back the process's CPU mask from
 * before the first tn_workers_pin, and libtensor its usual thread count. Returns 0 (also when
 * nothing is pinned), TN_EBUSY (inside a parallel region) or TN_EIO.
 */
TN_EXPORT int tn_workers_unpin(void);

/*
 * tn_workers_pinned - the current binding.
 * @ret_cpus: receives up to @max of the pinned workers' CPUs (worker order).
 *
 * Returns the number of pinned workers (0 when none), or TN_EINVAL (bad buffer).
 */
TN_EXPORT int tn_workers_pinned(int *ret_cpus, int max);

TN_END_DECLS

#endif /* TENSOR_NUMA_H */
