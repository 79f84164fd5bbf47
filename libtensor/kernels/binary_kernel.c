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

void TN_KERNEL_FN(tn__binary_kernel)(int op, enum tn_dtype dt, char *o, int64_t so,
				       const char *a, int64_t sa, const char *b, int64_t sb,
				       int64_t n, const struct tn__alpha *alpha)
{
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
