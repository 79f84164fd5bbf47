/* SPDX-License-Identifier: MIT */
/*
 * The where kernel, compiled once per CPU capability (see stub.h): out[i] = c[i] ? a[i] :
 * b[i]. Selection moves bits and never converts, so one loop per element width serves every
 * dtype of that width; the condition is a bool or (deprecated in PyTorch) uint8 byte, nonzero
 * selecting a. Contiguous operands with a contiguous condition take a plain loop the compiler
 * turns into blends, with a one-value condition a copy of the operand it selects (memmove:
 * the output may be that operand); others walk their strides.
 */
#include <string.h>

#include "stub.h"

#define WHERE_LOOP(T)                                                                      \
	do {                                                                               \
		const int64_t w = (int64_t)sizeof(T);                                      \
		if (so == w && sa == w && sb == w && (sc == 1 || sc == 0)) {               \
			T *O = (T *)o;                                                     \
			const T *A = (const T *)a, *B = (const T *)b;                      \
			const unsigned char *C = (const unsigned char *)c;                 \
			/* Both values loaded before the select: the compiler may not     \
			 * load the one not selected itself, and branched on each         \
			 * condition (random conditions ran at 2.4 ns an element). */     \
			if (sc == 1) {                                                     \
				for (int64_t i = 0; i < n; i++) {                          \
					const T x = A[i], y = B[i];                        \
					O[i] = C[i] ? x : y;                               \
				}                                                          \
			} else {                                                           \
				memmove(O, C[0] ? A : B, (size_t)n * sizeof(T));           \
			}                                                                  \
		} else {                                                                   \
			for (int64_t i = 0; i < n; i++) {                                  \
				const char *src = *(const unsigned char *)(c + i * sc)     \
							  ? a + i * sa                     \
							  : b + i * sb;                    \
				memcpy(o + i * so, src, sizeof(T));                        \
			}                                                                  \
		}                                                                          \
	} while (0)

void TN_KERNEL_FN(tn__where_kernel)(size_t itemsize, char *o, int64_t so, const char *c,
				      int64_t sc, const char *a, int64_t sa, const char *b,
				      int64_t sb, int64_t n)
{
	switch (itemsize) {
	case 1:
		WHERE_LOOP(uint8_t);
		return;
	case 2:
		WHERE_LOOP(uint16_t);
		return;
	case 4:
		WHERE_LOOP(uint32_t);
		return;
	default:
		WHERE_LOOP(uint64_t);
		return;
	}
}
