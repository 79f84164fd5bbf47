/* SPDX-License-Identifier: MIT */
/*
 * The integer GEMM of the matmul family, compiled once per CPU capability: rows [m0, m1) of
 * C = beta * C + alpha * A @ B in the arithmetic of the dtype, which wraps around. Products and
 * sums are formed in uint64_t and truncated to the dtype at the end: arithmetic modulo 2^64
 * truncated to w bits equals arithmetic modulo 2^w, so the result is the one PyTorch's
 * gemm_notrans_ loop gives in the dtype itself (without its signed-overflow undefined
 * behaviour). Each row accumulates a block of columns over all of k (i-k-j order: the inner
 * loop runs along a row of B, contiguous in the common case, and vectorises).
 */
#include "../internal.h"
#include "../stub.h"

#define COLS 256

#define GEMM_INT(T)                                                                          \
	static void gemm_##T(int64_t m0, int64_t m1, int64_t n, int64_t k, uint64_t alpha,   \
			     const char *a, int64_t ars, int64_t acs, const char *b,         \
			     int64_t brs, int64_t bcs, uint64_t beta, char *c, int64_t crs,  \
			     int64_t ccs)                                                    \
	{                                                                                    \
		const T *A = (const T *)a, *B = (const T *)b;                                \
		T *C = (T *)c;                                                               \
		uint64_t acc[COLS];                                                          \
		for (int64_t i = m0; i < m1; i++) {                                          \
			for (int64_t j0 = 0; j0 < n; j0 += COLS) {                            \
				int64_t w = n - j0 < COLS ? n - j0 : COLS;                    \
				for (int64_t j = 0; j < w; j++)                               \
					acc[j] = 0;                                           \
				for (int64_t p = 0; p < k; p++) {                             \
					uint64_t av = (uint64_t)(int64_t)A[i * ars + p * acs]; \
					const T *brow = B + p * brs + j0 * bcs;               \
					if (bcs == 1) {                                       \
						for (int64_t j = 0; j < w; j++)               \
							acc[j] += av * (uint64_t)(int64_t)brow[j]; \
					} else {                                              \
						for (int64_t j = 0; j < w; j++)               \
							acc[j] += av *                        \
								  (uint64_t)(int64_t)brow[j * bcs]; \
					}                                                     \
				}                                                             \
				T *crow = C + i * crs + j0 * ccs;                             \
				for (int64_t j = 0; j < w; j++) {                             \
					uint64_t v = alpha * acc[j];                          \
					if (beta)                                             \
						v += beta * (uint64_t)(int64_t)crow[j * ccs]; \
					crow[j * ccs] = (T)v;                                 \
				}                                                             \
			}                                                                    \
		}                                                                            \
	}

GEMM_INT(uint8_t)
GEMM_INT(int8_t)
GEMM_INT(int16_t)
GEMM_INT(int32_t)
GEMM_INT(int64_t)

void TN_KERNEL_FN(tn__gemm_int_kernel)(enum tn_dtype dt, int64_t m0, int64_t m1, int64_t n,
				       int64_t k, uint64_t alpha, const char *a, int64_t ars,
				       int64_t acs, const char *b, int64_t brs, int64_t bcs,
				       uint64_t beta, char *c, int64_t crs, int64_t ccs)
{
	switch (dt) {
	case TN_UINT8:
		gemm_uint8_t(m0, m1, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, crs, ccs);
		break;
	case TN_INT8:
		gemm_int8_t(m0, m1, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, crs, ccs);
		break;
	case TN_INT16:
		gemm_int16_t(m0, m1, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, crs, ccs);
		break;
	case TN_INT32:
		gemm_int32_t(m0, m1, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, crs, ccs);
		break;
	case TN_INT64:
		gemm_int64_t(m0, m1, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, crs, ccs);
		break;
	default:
		break;
	}
}
