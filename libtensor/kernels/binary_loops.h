/* SPDX-License-Identifier: MIT */
/*
 * The row loop every binary kernel uses, as ATen's VectorizedLoop2d: out[i] = EXPR of x = a[i]
 * and y = b[i] over one row, in three paths (all contiguous, one input a broadcast scalar, and
 * strided). The first two are plain loops the compiler vectorises with the capability's
 * instructions. LOADX/LOADY declare x and y from an element (16-bit floats widen to float) and
 * STORE writes EXPR back in the output's type; the kernel's o, so, a, sa, b, sb and n name the
 * row. Included by kernel sources only, which are compiled once per CPU capability.
 */
#ifndef TN_KERNELS_BINARY_LOOPS_H
#define TN_KERNELS_BINARY_LOOPS_H

#include "stub.h"
#include "half.h"

/* Output elements of type TO, inputs of type T. */
#define BINARY_ROW(TO, T, LOADX, LOADY, EXPR, STORE)                                       \
	do {                                                                               \
		TO *O = (TO *)o;                                                           \
		const T *A = (const T *)a, *B = (const T *)b;                              \
		const int64_t w = (int64_t)sizeof(T), wo = (int64_t)sizeof(TO);            \
		if (so == wo && sa == w && sb == w) {                                      \
			for (int64_t i = 0; i < n; i++) {                                  \
				LOADX(A[i]);                                               \
				LOADY(B[i]);                                               \
				STORE(O[i], EXPR);                                         \
			}                                                                  \
		} else if (so == wo && sa == w && sb == 0) {                               \
			LOADY(B[0]);                                                       \
			for (int64_t i = 0; i < n; i++) {                                  \
				LOADX(A[i]);                                               \
				STORE(O[i], EXPR);                                         \
			}                                                                  \
		} else if (so == wo && sa == 0 && sb == w) {                               \
			LOADX(A[0]);                                                       \
			for (int64_t i = 0; i < n; i++) {                                  \
				LOADY(B[i]);                                               \
				STORE(O[i], EXPR);                                         \
			}                                                                  \
		} else {                                                                   \
			for (int64_t i = 0; i < n; i++) {                                  \
				LOADX(*(const T *)(a + i * sa));                           \
				LOADY(*(const T *)(b + i * sb));                           \
				STORE(*(TO *)(o + i * so), EXPR);                          \
			}                                                                  \
		}                                                                          \
	} while (0)

/* The output has the inputs' type. */
#define CONTIG_OR_SCALAR(T, LOADX, LOADY, EXPR, STORE) BINARY_ROW(T, T, LOADX, LOADY, EXPR, STORE)

/* Plain types: load as is, store as is. */
#define LX_PLAIN(v) const __typeof__(v) x = (v)
#define LY_PLAIN(v) const __typeof__(v) y = (v)
#define ST_PLAIN(dst, v) ((dst) = (v))
/* 16-bit floats: compute in float. */
#define LX_HALF(v) const float x = tn__h2f(v)
#define LY_HALF(v) const float y = tn__h2f(v)
#define ST_HALF(dst, v) ((dst) = tn__f2h(v))
#define LX_BF16(v) const float x = tn__bf2f(v)
#define LY_BF16(v) const float y = tn__bf2f(v)
#define ST_BF16(dst, v) ((dst) = tn__f2bf(v))

#endif /* TN_KERNELS_BINARY_LOOPS_H */
