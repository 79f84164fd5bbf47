/* SPDX-License-Identifier: MIT */
/*
 * Memory placement with the mbind(2) wrapper from libnuma. Placement must be applied before
 * the first touch of the pages, which is why the CPU allocator calls this right after mmap.
 */
#include <numaif.h>

#include "../libtensor/internal.h"

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
