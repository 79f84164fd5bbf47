/* SPDX-License-Identifier: MIT */
/*
 * The operator codes the kernels share: the CPU kernels (stub.h) and the CUDA ones (cuda/),
 * which include this header from C++. Plain C, no libtensor internals.
 */
#ifndef TN_OP_ENUMS_H
#define TN_OP_ENUMS_H

#include <stdbool.h>
#include <stdint.h>

/* Arithmetic binary kernels: out = a OP b (add and sub: a OP alpha * b) in dtype @dt. */
enum tn__binop { TN_BINOP_ADD, TN_BINOP_SUB, TN_BINOP_MUL, TN_BINOP_DIV };
/* Or'ed into @op: the row's output is past the caches; write it with streaming stores where
 * the kernel can (contiguous float rows), plainly otherwise. The caller fences. */
#define TN_BINOP_STREAM 0x100
struct tn__alpha {
	double d;  /* for floating dtypes */
	int64_t i; /* for integer dtypes */
	bool b;    /* for bool */
};

/* Comparisons: out (bool) = a OP b, a and b in dtype @dt. */
enum tn__cmpop { TN_CMP_EQ, TN_CMP_NE, TN_CMP_LT, TN_CMP_LE, TN_CMP_GT, TN_CMP_GE };

/* Unary functions: out = f(a), both in dtype @dt. */
enum tn__unop {
	TN_UN_NEG, TN_UN_ABS, TN_UN_SIGN, TN_UN_EXP, TN_UN_EXPM1, TN_UN_LOG, TN_UN_LOG1P,
	TN_UN_LOG2, TN_UN_SQRT, TN_UN_RSQRT, TN_UN_SIN, TN_UN_COS, TN_UN_TAN, TN_UN_TANH,
	TN_UN_SIGMOID, TN_UN_RELU, TN_UN_ERF, TN_UN_FLOOR, TN_UN_CEIL, TN_UN_ROUND, TN_UN_TRUNC,
	TN_UN_RECIPROCAL, TN_UN_GELU, TN_UN_GELU_TANH, TN_UN_BITWISE_NOT, TN_UN_SILU, TN_NUM_UNOPS
};

/* The other binary operators: out = a OP b, a and b in dtype @dt; the logical ones write bool,
 * the others dt. The TN_BIN2_POW_* operators are pow with a Scalar exponent, PyTorch's special
 * cases of it (b holds the exponent; ONE and LEFT ignore it). */
enum tn__bin2op {
	TN_BIN2_DIV_TRUNC, TN_BIN2_DIV_FLOOR, TN_BIN2_REMAINDER, TN_BIN2_FMOD, TN_BIN2_POW,
	TN_BIN2_MAXIMUM, TN_BIN2_MINIMUM, TN_BIN2_ATAN2, TN_BIN2_BITWISE_AND, TN_BIN2_BITWISE_OR,
	TN_BIN2_BITWISE_XOR, TN_BIN2_LSHIFT, TN_BIN2_RSHIFT, TN_BIN2_LOGICAL_AND,
	TN_BIN2_LOGICAL_OR, TN_BIN2_LOGICAL_XOR, TN_BIN2_POW_ONE, TN_BIN2_POW_LEFT,
	TN_BIN2_POW_SQUARE, TN_BIN2_POW_CUBE, TN_BIN2_POW_INV_SQUARE, TN_BIN2_POW_SQRT,
	TN_BIN2_POW_RSQRT, TN_BIN2_POW_RECIPROCAL, TN_NUM_BIN2OPS
};

/* Unary predicates: out (bool) = p(a), a in dtype @dt. */
enum tn__predop { TN_PRED_LOGICAL_NOT, TN_PRED_ISNAN, TN_PRED_ISINF, TN_PRED_ISFINITE };

/* clamp modes: a bounded below by lo (TN_CLAMP_LO) and above by hi (TN_CLAMP_HI); with
 * TN_CLAMP_NAN a NaN bound gives NaN (the Tensor forms), without it a NaN bound leaves a. */
enum { TN_CLAMP_LO = 1, TN_CLAMP_HI = 2, TN_CLAMP_NAN = 4 };

/* Reductions. */
enum tn__redop { TN_RED_SUM, TN_RED_PROD, TN_RED_MAX, TN_RED_MIN, TN_RED_ALL, TN_RED_ANY };

#endif /* TN_OP_ENUMS_H */
