/* SPDX-License-Identifier: MIT */
/*
 * Memory placement with the mbind(2) wrapper from libnuma. Placement must be applied before
 * the first touch of the pages, which is why the CPU allocator calls this right after mmap.
 */
#include <numaif.h>

#include "numa_internal.h"
#include <tensor/numa.h>

int tn__numa_bind(void *addr, size_t len, int node)
{
	unsigned long mask[4] = { 0 };
	const unsigned long bits = 8 * sizeof(unsigned long);
	int saved = errno;

	if (node < 0 || (unsigned long)node >= bits * TN_ARRAY_SIZE(mask))
		return -EINVAL;
	mask[(unsigned long)node / bits] = 1ul << ((unsigned long)node % bits);
	int r = mbind(addr, len, MPOL_BIND, mask, bits * TN_ARRAY_SIZE(mask), 0) ? -errno : 0;
	errno = saved;
	return r;
}

int tn__numa_apply(void *addr, size_t len, int policy, uint64_t nodes, bool move)
{
	unsigned long mask[TN_NUMA_MAX_NODES / (8 * sizeof(unsigned long))] = { 0 };
	const unsigned long maxnode = TN_NUMA_MAX_NODES + 1; /* mbind counts one past the last */
	int mode, saved = errno;

	for (unsigned n = 0; n < TN_NUMA_MAX_NODES; n++)
		if (nodes >> n & 1)
			mask[n / (8 * sizeof(unsigned long))] |= 1ul << (n % (8 * sizeof(unsigned long)));
	switch (policy) {
	case TN_NUMA_DEFAULT:
		mode = MPOL_DEFAULT;
		break;
	case TN_NUMA_BIND:
		mode = MPOL_BIND;
		break;
	case TN_NUMA_INTERLEAVE:
		mode = MPOL_INTERLEAVE;
		break;
	case TN_NUMA_PREFERRED:
		mode = MPOL_PREFERRED;
		break;
	case TN_NUMA_LOCAL:
		mode = MPOL_LOCAL;
		break;
	default:
		return -EINVAL;
	}
	bool masked = mode == MPOL_BIND || mode == MPOL_INTERLEAVE || mode == MPOL_PREFERRED;
	if (masked && !nodes)
		return -EINVAL;
	int r = mbind(addr, len, mode, masked ? mask : NULL, masked ? maxnode : 0,
		      move ? MPOL_MF_MOVE : 0)
			? -errno
			: 0;
	errno = saved;
	return r;
}

int64_t tn__numa_residency(const void *addr, size_t len, size_t page_size, uint64_t *ret_pages,
			   int nnodes)
{
	enum { CHUNK = 512 };
	void *pages[CHUNK];
	int status[CHUNK];
	int64_t counted = 0;
	int saved = errno;

	if (!page_size || (uintptr_t)addr % page_size || nnodes < 0)
		return -EINVAL;
	for (int i = 0; i < nnodes; i++)
		ret_pages[i] = 0;
	for (size_t done = 0; done < len;) {
		unsigned long n = 0;
		for (; n < CHUNK && done < len; n++, done += page_size)
			pages[n] = (char *)addr + done;
		/* With no target nodes move_pages only reports where each page is. */
		if (move_pages(0, n, pages, NULL, status, 0) < 0) {
			int e = -errno;
			errno = saved;
			return e;
		}
		for (unsigned long i = 0; i < n; i++) {
			if (status[i] < 0)
				continue; /* -ENOENT: not faulted in yet */
			counted++;
			if (status[i] < nnodes)
				ret_pages[status[i]]++;
		}
	}
	errno = saved;
	return counted;
}
