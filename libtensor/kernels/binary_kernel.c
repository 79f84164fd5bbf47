/* SPDX-License-Identifier: MIT */
/*
 * Arithmetic binary kernels (add, sub, mul, div), compiled once per CPU capability (see
 * stub.h). One row: out[i] = a[i] OP b[i] in one dtype (the iterator's common dtype; the
 * caller converts operands of other dtypes chunk by chunk). Three paths per type, as ATen's
 * VectorizedLoop2d: all contiguous, one input a broadcast scalar (stride 0), and strided; the
 * first two are plain loops the compiler vectorises with the capability's instructions.
 * Integer arithmetic wraps (two's complement), as PyTorch's does; 16-bit floats compute in
 * float and round once, as c10::Half does, their contiguous and broadcast rows through
 * float32 vectors (half_row below). Kernels are built with -ffp-contract=off so that every
 * capability gives the same bits.
 */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "binary_loops.h"
#include "half_rows.h"

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

/*
 * a + alpha * b as PyTorch 1.13's CPU kernels compute it (alpha already converted to the dtype):
 * float32 and float64 with one rounding, as the vectorised kernels' fmadd (and their scalar
 * loops, which the compiler contracts); float16 in c10::Half arithmetic, rounding alpha * b to
 * half first; bfloat16 rows of contiguous or broadcast operands with one rounding from float
 * (Vectorized<BFloat16>'s fmadd) in whole blocks of 32 elements (its vector loop under
 * PyTorch's AVX2 and default builds), the row's tail and strided rows in c10::BFloat16
 * arithmetic as float16. Sub is
 * add with -alpha. With alpha 1 every form is one rounding of x + y.
 */
#define ROUND_HALF(v) tn__h2f(tn__f2h(v))
#define ROUND_BF16(v) tn__bf2f(tn__f2bf(v))

#define FMA_CASE(DT, T, FMA)                                                                \
	case DT:                                                                            \
		switch (op) {                                                               \
		case TN_BINOP_ADD:                                                          \
		case TN_BINOP_SUB: {                                                        \
			const T al = op == TN_BINOP_SUB ? -(T)alpha->d : (T)alpha->d;       \
			if (al == 1)                                                        \
				CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, x + y, ST_PLAIN);   \
			else if (al == -1)                                                  \
				CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, x - y, ST_PLAIN);   \
			else                                                                \
				CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, FMA(al, y, x),      \
						 ST_PLAIN);                                 \
			return;                                                             \
		}                                                                           \
		case TN_BINOP_MUL:                                                          \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, x * y, ST_PLAIN);           \
			return;                                                             \
		case TN_BINOP_DIV:                                                          \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, x / y, ST_PLAIN);           \
			return;                                                             \
		}                                                                           \
		return;

/* 16-bit floats' strided rows (and the DEFAULT capability's fused bfloat16 rows, see
 * half_row): FUSED says whether contiguous and broadcast rows round once. */
#define HALF_CASE(DT, T, LX, LY, ST, ROUND, FUSED)                                         \
	case DT:                                                                            \
		switch (op) {                                                               \
		case TN_BINOP_ADD:                                                          \
		case TN_BINOP_SUB: {                                                        \
			const float al = op == TN_BINOP_SUB ? -(float)alpha->d : (float)alpha->d; \
			const int64_t ew = (int64_t)sizeof(T);                              \
			const bool row = so == ew && (sa == ew || sa == 0) && (sb == ew || sb == 0) && \
					 (sa | sb) != 0;                                    \
			if (al == 1)                                                        \
				CONTIG_OR_SCALAR(T, LX, LY, x + y, ST);                     \
			else if (al == -1)                                                  \
				CONTIG_OR_SCALAR(T, LX, LY, x - y, ST);                     \
			else if (FUSED && row) {                                            \
				/* ATen's vector loop: 2 * Vectorized<BFloat16>::size() (32 \
				 * under its AVX2 and default builds) at a time; its scalar   \
				 * tail rounds as the strided rows do. */                     \
				const int64_t nrow = n, nv = n / 32 * 32;                   \
				n = nv;                                                     \
				CONTIG_OR_SCALAR(T, LX, LY, fmaf(al, y, x), ST);            \
				o += nv * so;                                               \
				a += nv * sa;                                               \
				b += nv * sb;                                               \
				n = nrow - nv;                                              \
				CONTIG_OR_SCALAR(T, LX, LY, x + ROUND(al * y), ST);         \
			} else                                                              \
				CONTIG_OR_SCALAR(T, LX, LY, x + ROUND(al * y), ST);         \
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
 * 16-bit float rows with a contiguous output and contiguous or broadcast inputs, through
 * float32 vectors (half_rows.h): the formulas of HALF_CASE element for element, so the same
 * bits; the output streamed when @stream. The fused bfloat16 rows need a vector fma: the
 * DEFAULT capability (SSE2, no FMA) leaves them to HALF_CASE. Other rows return false.
 */
#define H16_ARITH(T, o, a, b, n, VL, SL, VS, SS, VEXPR, SEXPR)                              \
	do {                                                                                \
		if (stream)                                                                 \
			H16_STREAM_ROW(T, o, a, sa, b, sb, n, VL, SL, VS, SS, VEXPR, SEXPR); \
		else                                                                        \
			H16_ROW(T, T, o, a, sa, b, sb, n, VL, SL, VS, SS, VEXPR, SEXPR);     \
	} while (0)

#if defined(__FMA__) || defined(__AVX512F__)
#define H16_VFMA 1
#else
#define H16_VFMA 0
#endif

#define HALF_ROW(NAME, T, VL, SL, VS, SS, VROUND, SROUND, FUSED)                            \
	static bool NAME(int op, char *o, int64_t so, const char *a, int64_t sa, const char *b, \
			 int64_t sb, int64_t n, const struct tn__alpha *alpha, bool stream)   \
	{                                                                                   \
		const int64_t ew = (int64_t)sizeof(T);                                      \
		if (so != ew || (sa != ew && sa != 0) || (sb != ew && sb != 0) || (sa | sb) == 0) \
			return false;                                                       \
		switch (op) {                                                               \
		case TN_BINOP_ADD:                                                          \
		case TN_BINOP_SUB: {                                                        \
			const float al = op == TN_BINOP_SUB ? -(float)alpha->d : (float)alpha->d; \
			if (al == 1) {                                                      \
				H16_ARITH(T, o, a, b, n, VL, SL, VS, SS, x + y, x + y);     \
			} else if (al == -1) {                                              \
				H16_ARITH(T, o, a, b, n, VL, SL, VS, SS, x - y, x - y);     \
			} else if (FUSED) {                                                 \
				if (!H16_VFMA)                                              \
					return false;                                       \
				/* Blocks of 32 round once, the tail as strided rows. */    \
				const int64_t nv = n / 32 * 32;                             \
				const tn_vf val = tn_vf_splat(al);                          \
				H16_ARITH(T, o, a, b, nv, VL, SL, VS, SS, tn__vfmaf(val, y, x), \
					  fmaf(al, y, x));                                  \
				H16_ARITH(T, o + nv * so, a + nv * sa, b + nv * sb, n - nv, VL, SL, \
					  VS, SS, x + VROUND(al * y), x + SROUND(al * y));  \
			} else {                                                            \
				H16_ARITH(T, o, a, b, n, VL, SL, VS, SS, x + VROUND(al * y),  \
					  x + SROUND(al * y));                              \
			}                                                                   \
			return true;                                                        \
		}                                                                           \
		case TN_BINOP_MUL:                                                          \
			H16_ARITH(T, o, a, b, n, VL, SL, VS, SS, x * y, x * y);             \
			return true;                                                        \
		case TN_BINOP_DIV:                                                          \
			H16_ARITH(T, o, a, b, n, VL, SL, VS, SS, x / y, x / y);             \
			return true;                                                        \
		}                                                                           \
		return false;                                                               \
	}

HALF_ROW(half_row, tn_half, tn_vload_f16, tn__h2f, tn_vstore_f16, ST_HALF, tn__vround_f16,
	 ROUND_HALF, false)
HALF_ROW(bf16_row, tn_bfloat16, tn_vload_bf16, tn__bf2f, tn_vstore_bf16, ST_BF16, tn_vround_bf16,
	 ROUND_BF16, true)

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
			if (al != 1) /* a fused multiply-add: the plain loop's fma */       \
				return false;                                               \
			STREAM_ROW(T, x + y);                                               \
			return true;                                                        \
		case TN_BINOP_SUB:                                                          \
			if (al != 1)                                                        \
				return false;                                               \
			STREAM_ROW(T, x - y);                                               \
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
	const bool stream = (op & TN_BINOP_STREAM) != 0;
	op &= ~TN_BINOP_STREAM;
	if (stream && stream_row(op, dt, o, so, a, sa, b, sb, n, alpha))
		return;
	if (dt == TN_FLOAT16 && half_row(op, o, so, a, sa, b, sb, n, alpha, stream))
		return;
	if (dt == TN_BFLOAT16 && bf16_row(op, o, so, a, sa, b, sb, n, alpha, stream))
		return;
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
		HALF_CASE(TN_FLOAT16, tn_half, LX_HALF, LY_HALF, ST_HALF, ROUND_HALF, false)
		HALF_CASE(TN_BFLOAT16, tn_bfloat16, LX_BF16, LY_BF16, ST_BF16, ROUND_BF16, true)
		FMA_CASE(TN_FLOAT32, float, fmaf)
		FMA_CASE(TN_FLOAT64, double, fma)
	default:
		return;
	}
}
