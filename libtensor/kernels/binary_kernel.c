/* SPDX-License-Identifier: MIT */
/*
 * Arithmetic binary kernels (add, sub, mul, div), compiled once per CPU capability (see
 * stub.h). One row: out[i] = a[i] OP b[i] in one dtype (the iterator's common dtype; the
 * caller converts operands of other dtypes chunk by chunk). Three paths per type, as ATen's
 * VectorizedLoop2d: all contiguous, one input a broadcast scalar (stride 0), and strided; the
 * first two are plain loops the compiler vectorises with the capability's instructions.
 * Integer arithmetic wraps (two's complement), as PyTorch's does; 16-bit floats compute in
 * float and round once, as c10::Half does. Kernels are built with -ffp-contract=off so that
 * every capability gives the same bits.
 */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "binary_loops.h"

/* Wrapping integer arithmetic: in uint64 (no promotion to int, which could overflow), then
 * truncated to the type's width. */
#define WRAP(T, U, e) ((T)(U)(e))

#define INT_CASE(DT, T, U)                                                                  \
	case DT:                                                                            \
		switch (op) {                                                               \
		case TN_BINOP_ADD: {                                                        \
			const uint64_t al = (uint64_t)alpha->i;                                           \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN,                             \
					 WRAP(T, U, (uint64_t)x + al * (uint64_t)y), ST_PLAIN);           \
			return;                                                             \
		}                                                                           \
		case TN_BINOP_SUB: {                                                        \
			const uint64_t al = (uint64_t)alpha->i;                                           \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN,                             \
					 WRAP(T, U, (uint64_t)x - al * (uint64_t)y), ST_PLAIN);           \
			return;                                                             \
		}                                                                           \
		case TN_BINOP_MUL:                                                          \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, WRAP(T, U, (uint64_t)x * (uint64_t)y),    \
					 ST_PLAIN);                                         \
			return;                                                             \
		default:                                                                    \
			return; /* integer true division promotes to float first */        \
		}

#define FLOAT_CASE(DT, T, CT, LX, LY, ST)                                                   \
	case DT:                                                                            \
		switch (op) {                                                               \
		case TN_BINOP_ADD: {                                                        \
			const CT al = (CT)alpha->d;                                         \
			if (al == 1)                                                        \
				CONTIG_OR_SCALAR(T, LX, LY, x + y, ST);                     \
			else                                                                \
				CONTIG_OR_SCALAR(T, LX, LY, x + al * y, ST);                \
			return;                                                             \
		}                                                                           \
		case TN_BINOP_SUB: {                                                        \
			const CT al = (CT)alpha->d;                                         \
			if (al == 1)                                                        \
				CONTIG_OR_SCALAR(T, LX, LY, x - y, ST);                     \
			else                                                                \
				CONTIG_OR_SCALAR(T, LX, LY, x - al * y, ST);                \
			return;                                                             \
		}                                                                           \
		case TN_BINOP_MUL:                                                          \
			CONTIG_OR_SCALAR(T, LX, LY, x * y, ST);                             \
			return;                                                             \
		case TN_BINOP_DIV:                                                          \
			CONTIG_OR_SCALAR(T, LX, LY, x / y, ST);                             \
			return;                                                             \
		}                                                                           \
		return;

/*
 * Streaming rows (TN_BINOP_STREAM): float32 and float64 arithmetic on contiguous operands (or
 * a broadcast right operand) writes whole vectors with non-temporal stores, so the output's
 * lines are not read before they are written (3 bytes of traffic per output byte instead of
 * 4 for a binary operator). GCC's vector extensions compute in the capability's width; the
 * head up to the vector alignment and the tail are plain stores. Other rows return false.
 */
#if defined(__AVX512F__)
#define SVEC 64
#define STREAM_VEC(p, v) _mm512_stream_si512((void *)(p), (__m512i)(v))
#elif defined(__AVX2__)
#define SVEC 32
#define STREAM_VEC(p, v) _mm256_stream_si256((void *)(p), (__m256i)(v))
#elif defined(__SSE2__)
#define SVEC 16
#define STREAM_VEC(p, v) _mm_stream_si128((void *)(p), (__m128i)(v))
#endif

#ifdef SVEC
#define STREAM_ROW(T, EXPR)                                                                 \
	do {                                                                                \
		typedef T vec_t __attribute__((vector_size(SVEC)));                         \
		const int64_t L = SVEC / (int64_t)sizeof(T);                                \
		T *O = (T *)o;                                                              \
		const T *A = (const T *)a, *B = (const T *)b;                               \
		int64_t i = 0;                                                              \
		for (; i < n && ((uintptr_t)(O + i) % SVEC) != 0; i++) {                    \
			const T x = A[i], y = sb ? B[i] : B[0];                             \
			O[i] = (EXPR);                                                      \
		}                                                                           \
		if (sb) {                                                                   \
			for (; i + L <= n; i += L) {                                        \
				vec_t x, y;                                                 \
				memcpy(&x, A + i, sizeof(x));                               \
				memcpy(&y, B + i, sizeof(y));                               \
				const vec_t r = (EXPR);                                     \
				STREAM_VEC(O + i, r);                                       \
			}                                                                   \
		} else {                                                                    \
			const T y = B[0];                                                   \
			for (; i + L <= n; i += L) {                                        \
				vec_t x;                                                    \
				memcpy(&x, A + i, sizeof(x));                               \
				const vec_t r = (EXPR);                                     \
				STREAM_VEC(O + i, r);                                       \
			}                                                                   \
		}                                                                           \
		for (; i < n; i++) {                                                        \
			const T x = A[i], y = sb ? B[i] : B[0];                             \
			O[i] = (EXPR);                                                      \
		}                                                                           \
	} while (0)

#define STREAM_OPS(T)                                                                       \
	do {                                                                                \
		const T al = (T)alpha->d;                                                   \
		switch (op) {                                                               \
		case TN_BINOP_ADD:                                                          \
			if (al == 1)                                                        \
				STREAM_ROW(T, x + y);                                       \
			else                                                                \
				STREAM_ROW(T, x + al * y);                                  \
			return true;                                                        \
		case TN_BINOP_SUB:                                                          \
			if (al == 1)                                                        \
				STREAM_ROW(T, x - y);                                       \
			else                                                                \
				STREAM_ROW(T, x - al * y);                                  \
			return true;                                                        \
		case TN_BINOP_MUL:                                                          \
			STREAM_ROW(T, x * y);                                               \
			return true;                                                        \
		case TN_BINOP_DIV:                                                          \
			STREAM_ROW(T, x / y);                                               \
			return true;                                                        \
		}                                                                           \
	} while (0)
#endif

static bool stream_row(int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		       const char *b, int64_t sb, int64_t n, const struct tn__alpha *alpha)
{
#ifdef SVEC
	const int64_t w = (int64_t)tn__itemsize(dt);
	if (so != w || sa != w || (sb != w && sb != 0))
		return false;
	if (dt == TN_FLOAT32)
		STREAM_OPS(float);
	else if (dt == TN_FLOAT64)
		STREAM_OPS(double);
#else
	(void)op, (void)dt, (void)o, (void)so, (void)a, (void)sa, (void)b, (void)sb, (void)n;
	(void)alpha;
#endif
	return false;
}

void TN_KERNEL_FN(tn__binary_kernel)(int op, enum tn_dtype dt, char *o, int64_t so,
				       const char *a, int64_t sa, const char *b, int64_t sb,
				       int64_t n, const struct tn__alpha *alpha)
{
	if (op & TN_BINOP_STREAM) {
		op &= ~TN_BINOP_STREAM;
		if (stream_row(op, dt, o, so, a, sa, b, sb, n, alpha))
			return;
	}
	switch (dt) {
	case TN_BOOL:
		/* bool + bool is "or", bool * bool is "and" (PyTorch computes in bool). */
		if (op == TN_BINOP_MUL)
			CONTIG_OR_SCALAR(bool, LX_PLAIN, LY_PLAIN, x && y, ST_PLAIN);
		else
			CONTIG_OR_SCALAR(bool, LX_PLAIN, LY_PLAIN, x || (alpha->b && y), ST_PLAIN);
		return;
		INT_CASE(TN_UINT8, uint8_t, uint8_t)
		INT_CASE(TN_INT8, int8_t, uint8_t)
		INT_CASE(TN_INT16, int16_t, uint16_t)
		INT_CASE(TN_INT32, int32_t, uint32_t)
		INT_CASE(TN_INT64, int64_t, uint64_t)
		FLOAT_CASE(TN_FLOAT16, tn_half, float, LX_HALF, LY_HALF, ST_HALF)
		FLOAT_CASE(TN_BFLOAT16, tn_bfloat16, float, LX_BF16, LY_BF16, ST_BF16)
		FLOAT_CASE(TN_FLOAT32, float, float, LX_PLAIN, LY_PLAIN, ST_PLAIN)
		FLOAT_CASE(TN_FLOAT64, double, double, LX_PLAIN, LY_PLAIN, ST_PLAIN)
	default:
		return;
	}
}
