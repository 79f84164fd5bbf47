/* SPDX-License-Identifier: MIT */
/*
 * The contiguous fill kernel, compiled once per CPU capability (see stub.h). Plain loops over
 * fixed-width words: the compiler vectorises them with the capability's instructions
 * (SSE2, AVX2 or AVX-512 stores), which is all a fill needs.
 */
#include <string.h>

#include "stub.h"

void TN_KERNEL_FN(tn__fill_kernel)(void *dst, const void *elem, size_t itemsize, int64_t count)
{
	switch (itemsize) {
	case 1: {
		unsigned char v;
		memcpy(&v, elem, 1);
		memset(dst, v, (size_t)count);
		break;
	}
	case 2: {
		uint16_t v, *p = dst;
		memcpy(&v, elem, 2);
		for (int64_t i = 0; i < count; i++)
			p[i] = v;
		break;
	}
	case 4: {
		uint32_t v, *p = dst;
		memcpy(&v, elem, 4);
		for (int64_t i = 0; i < count; i++)
			p[i] = v;
		break;
	}
	default: {
		uint64_t v, *p = dst;
		memcpy(&v, elem, 8);
		for (int64_t i = 0; i < count; i++)
			p[i] = v;
		break;
	}
	}
}
