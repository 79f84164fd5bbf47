/* SPDX-License-Identifier: MIT */
/*
 * NUMA topology from hwloc, loaded once per process on first use.
 *
 * Only the node count is needed today (to validate placement requests); the arena and
 * OpenMP placement work will grow this into the topology queries DESIGN.md section 8 lists.
 */
#include <hwloc.h>
#include <pthread.h>

#include "../libtensor/internal.h"

static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static int node_count = 1;

static void topo_load(void)
{
	hwloc_topology_t topo;
	int saved = errno;

	if (hwloc_topology_init(&topo) == 0) {
		if (hwloc_topology_load(topo) == 0) {
			int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
			if (n > 0)
				node_count = n;
		}
		hwloc_topology_destroy(topo);
	}
	errno = saved;
}

int tn__numa_node_count(void)
{
	pthread_once(&topo_once, topo_load);
	return node_count;
}
