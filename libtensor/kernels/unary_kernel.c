/* SPDX-License-Identifier: MIT */
/*
 * Unary kernels (neg, abs, sign, exp, expm1, log, log1p, log2, sqrt, rsqrt, sin, cos, tan,
 * tanh, sigmoid, relu, erf, floor, ceil, round, trunc, reciprocal), compiled once per CPU
 * capability (see stub.h). One row: out[i] = f(a[i]), input and output in one dtype (the
 * caller converts integer inputs of the floating functions first). Floating functions use the
 * C library's float or double versions; 16-bit floats compute in float and round once.
 * round is half-to-even (rint), as torch.round; sign of NaN is 0, as torch.sign. gelu follows
 * ATen's CPU formulas term by term (x * 0.5 * (1 + erf(x / sqrt 2)), and 0.5 * x * (1 + tanh(
 * sqrt(2 / pi) * (x + 0.044715 x^3))) for approximate='tanh'), so the roundings agree;
 * bfloat16's tanh form rounds each operation to bfloat16 as ATen's does (gelu_tanh_bf16).
 *
 * The predicate kernel (logical_not, isnan, isinf, isfinite) writes bool whatever the input's
 * dtype; integers are never NaN or infinite.
 */
#include <math.h>

#include "stub.h"

/* One row: out (TO) = EXPR of x = LOAD(a[i]) (T), contiguous or strided. */
#define ROW_LOOP_TO(TO, T, LOAD, STORE, EXPR)                                              \
	do {                                                                               \
		if (so == (int64_t)sizeof(TO) && sa == (int64_t)sizeof(T)) {               \
			TO *O = (TO *)o;                                                   \
			const T *A = (const T *)a;                                         \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(A[0])) x = LOAD(A[i]);               \
				O[i] = STORE(EXPR);                                        \
			}                                                                  \
		} else {                                                                   \
			for (int64_t i = 0; i < n; i++) {                                  \
				const __typeof__(LOAD(*(const T *)a)) x =                  \
					LOAD(*(const T *)(a + i * sa));                    \
				*(TO *)(o + i * so) = STORE(EXPR);                         \
			}                                                                  \
		}                                                                          \
	} while (0)
#define ROW_LOOP(T, LOAD, STORE, EXPR) ROW_LOOP_TO(T, T, LOAD, STORE, EXPR)

#define ID(v) (v)
#define HLOAD(v) tn_half_to_float(v)
#define HSTORE(v) tn_half_from_float(v)
#define BLOAD(v) tn_bfloat16_to_float(v)
#define BSTORE(v) tn_bfloat16_from_float(v)

/* bfloat16 gelu, approximate='tanh', as ATen's scalar_t formula on BFloat16: every constant
 * and every operation's result rounds to bfloat16 (its vector code converts each operation's
 * result back too), so 1 + tanh(inner) is 0 at x = -5.6 and the result -0.0. */
static inline float gelu_tanh_bf16(float x)
{
#define R(v) BLOAD(BSTORE(v))
	const float beta = R((float)(M_SQRT2 * M_2_SQRTPI * 0.5)), kappa = R(0.044715f);
	float cube = R(R(x * x) * x);
	float inner = R(beta * R(x + R(kappa * cube)));
	return R(0.5f * x) * R(1.0f + R(tanhf(inner)));
#undef R
}

/* Floating functions of one C type F (float or double) with suffix S ("f" or ""). */
#define FLOAT_OPS(T, LOAD, STORE, F, EXP, EXPM1, LOG, LOG1P, LOG2, SQRT, SIN, COS, TAN, TANH, \
		  ERF, FLOOR, CEIL, RINT, TRUNC, FABS)                                      \
	switch (op) {                                                                       \
	case TN_UN_NEG:                                                                     \
		ROW_LOOP(T, LOAD, STORE, -x);                                               \
		return;                                                                     \
	case TN_UN_ABS:                                                                     \
		ROW_LOOP(T, LOAD, STORE, FABS(x));                                          \
		return;                                                                     \
	case TN_UN_SIGN:                                                                    \
		ROW_LOOP(T, LOAD, STORE, (F)((0 < x) - (x < 0)));                           \
		return;                                                                     \
	case TN_UN_EXP:                                                                     \
		ROW_LOOP(T, LOAD, STORE, EXP(x));                                           \
		return;                                                                     \
	case TN_UN_EXPM1:                                                                   \
		ROW_LOOP(T, LOAD, STORE, EXPM1(x));                                         \
		return;                                                                     \
	case TN_UN_LOG:                                                                     \
		ROW_LOOP(T, LOAD, STORE, LOG(x));                                           \
		return;                                                                     \
	case TN_UN_LOG1P:                                                                   \
		ROW_LOOP(T, LOAD, STORE, LOG1P(x));                                         \
		return;                                                                     \
	case TN_UN_LOG2:                                                                    \
		ROW_LOOP(T, LOAD, STORE, LOG2(x));                                          \
		return;                                                                     \
	case TN_UN_SQRT:                                                                    \
		ROW_LOOP(T, LOAD, STORE, SQRT(x));                                          \
		return;                                                                     \
	case TN_UN_RSQRT:                                                                   \
		ROW_LOOP(T, LOAD, STORE, (F)1 / SQRT(x));                                   \
		return;                                                                     \
	case TN_UN_SIN:                                                                     \
		ROW_LOOP(T, LOAD, STORE, SIN(x));                                           \
		return;                                                                     \
	case TN_UN_COS:                                                                     \
		ROW_LOOP(T, LOAD, STORE, COS(x));                                           \
		return;                                                                     \
	case TN_UN_TAN:                                                                     \
		ROW_LOOP(T, LOAD, STORE, TAN(x));                                           \
		return;                                                                     \
	case TN_UN_TANH:                                                                    \
		ROW_LOOP(T, LOAD, STORE, TANH(x));                                          \
		return;                                                                     \
	case TN_UN_SIGMOID:                                                                 \
		ROW_LOOP(T, LOAD, STORE, (F)1 / ((F)1 + EXP(-x)));                          \
		return;                                                                     \
	case TN_UN_SILU:                                                                    \
		ROW_LOOP(T, LOAD, STORE, x / ((F)1 + EXP(-x)));                             \
		return;                                                                     \
	case TN_UN_RELU:                                                                    \
		/* NaN stays NaN, as clamp_min(0) does. */                                  \
		ROW_LOOP(T, LOAD, STORE, x < 0 ? (F)0 : x);                                 \
		return;                                                                     \
	case TN_UN_ERF:                                                                     \
		ROW_LOOP(T, LOAD, STORE, ERF(x));                                           \
		return;                                                                     \
	case TN_UN_FLOOR:                                                                   \
		ROW_LOOP(T, LOAD, STORE, FLOOR(x));                                         \
		return;                                                                     \
	case TN_UN_CEIL:                                                                    \
		ROW_LOOP(T, LOAD, STORE, CEIL(x));                                          \
		return;                                                                     \
	case TN_UN_ROUND:                                                                   \
		ROW_LOOP(T, LOAD, STORE, RINT(x));                                          \
		return;                                                                     \
	case TN_UN_TRUNC:                                                                   \
		ROW_LOOP(T, LOAD, STORE, TRUNC(x));                                         \
		return;                                                                     \
	case TN_UN_RECIPROCAL:                                                              \
		ROW_LOOP(T, LOAD, STORE, (F)1 / x);                                         \
		return;                                                                     \
	case TN_UN_GELU:                                                                    \
		ROW_LOOP(T, LOAD, STORE, x * (F)0.5 * ((F)1 + ERF(x * (F)M_SQRT1_2)));       \
		return;                                                                     \
	case TN_UN_GELU_TANH: {                                                             \
		const F beta = (F)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = (F)0.044715;         \
		ROW_LOOP(T, LOAD, STORE,                                                    \
			 (F)0.5 * x * ((F)1 + TANH(beta * (x + kappa * (x * x * x)))));     \
		return;                                                                     \
	}                                                                                   \
	default: /* bitwise_not: refused for floating dtypes before the kernel */          \
		return;                                                                     \
	}

#define FLOATF(T, LOAD, STORE)                                                             \
	FLOAT_OPS(T, LOAD, STORE, float, expf, expm1f, logf, log1pf, log2f, sqrtf, sinf, cosf, \
		  tanf, tanhf, erff, floorf, ceilf, rintf, truncf, fabsf)

/* Integer functions: the ones PyTorch keeps in the integer dtype (negation wraps). */
#define INT_OPS(T, U)                                                                      \
	switch (op) {                                                                      \
	case TN_UN_NEG:                                                                    \
		ROW_LOOP(T, ID, (T), (U)0 - (U)x);                                         \
		return;                                                                    \
	case TN_UN_ABS:                                                                    \
		ROW_LOOP(T, ID, (T), x < 0 ? (U)0 - (U)x : (U)x);                          \
		return;                                                                    \
	case TN_UN_SIGN:                                                                   \
		ROW_LOOP(T, ID, (T), (0 < x) - (x < 0));                                   \
		return;                                                                    \
	case TN_UN_RELU:                                                                   \
		ROW_LOOP(T, ID, (T), x < 0 ? 0 : x);                                       \
		return;                                                                    \
	case TN_UN_BITWISE_NOT:                                                            \
		ROW_LOOP(T, ID, (T), ~x);                                                  \
		return;                                                                    \
	default: /* floor, ceil, round, trunc: the value itself */                         \
		ROW_LOOP(T, ID, (T), x);                                                   \
		return;                                                                    \
	}

/* uint8: never negative (abs and relu are the value, sign is 0 or 1). */
#define UINT8_OPS                                                                          \
	switch (op) {                                                                      \
	case TN_UN_NEG:                                                                    \
		ROW_LOOP(uint8_t, ID, (uint8_t), 0u - (unsigned)x);                        \
		return;                                                                    \
	case TN_UN_SIGN:                                                                   \
		ROW_LOOP(uint8_t, ID, (uint8_t), x != 0);                                  \
		return;                                                                    \
	case TN_UN_BITWISE_NOT:                                                            \
		ROW_LOOP(uint8_t, ID, (uint8_t), ~x);                                      \
		return;                                                                    \
	default: /* abs, relu, floor, ceil, round, trunc: the value itself */              \
		ROW_LOOP(uint8_t, ID, (uint8_t), x);                                       \
		return;                                                                    \
	}

void TN_KERNEL_FN(tn__unary_kernel)(int op, enum tn_dtype dt, char *o, int64_t so,
				      const char *a, int64_t sa, int64_t n)
{
	switch (dt) {
	case TN_BOOL: /* sign: the value itself; bitwise_not: logical not */
		if (op == TN_UN_BITWISE_NOT)
			ROW_LOOP(bool, ID, (bool), !x);
		else
			ROW_LOOP(bool, ID, (bool), x);
		return;
	case TN_UINT8:
		UINT8_OPS
	case TN_INT8:
		INT_OPS(int8_t, uint8_t)
	case TN_INT16:
		INT_OPS(int16_t, uint16_t)
	case TN_INT32:
		INT_OPS(int32_t, uint32_t)
	case TN_INT64:
		INT_OPS(int64_t, uint64_t)
	case TN_FLOAT16:
		FLOATF(tn_half, HLOAD, HSTORE)
	case TN_BFLOAT16:
		if (op == TN_UN_GELU_TANH) {
			ROW_LOOP(tn_bfloat16, BLOAD, BSTORE, gelu_tanh_bf16(x));
			return;
		}
		FLOATF(tn_bfloat16, BLOAD, BSTORE)
	case TN_FLOAT32:
		FLOATF(float, ID, ID)
	case TN_FLOAT64:
		FLOAT_OPS(double, ID, ID, double, exp, expm1, log, log1p, log2, sqrt, sin, cos, tan,
			  tanh, erf, floor, ceil, rint, trunc, fabs)
	default:
		return;
	}
}

#define PRED_LOOP(T, LOAD, EXPR) ROW_LOOP_TO(bool, T, LOAD, (bool), EXPR)

#define PRED_FLOAT(T, LOAD)                                                                \
	switch (op) {                                                                      \
	case TN_PRED_LOGICAL_NOT:                                                          \
		PRED_LOOP(T, LOAD, x == 0);                                                \
		return;                                                                    \
	case TN_PRED_ISNAN:                                                                \
		PRED_LOOP(T, LOAD, isnan(x));                                              \
		return;                                                                    \
	case TN_PRED_ISINF:                                                                \
		PRED_LOOP(T, LOAD, isinf(x));                                              \
		return;                                                                    \
	default:                                                                           \
		PRED_LOOP(T, LOAD, isfinite(x));                                           \
		return;                                                                    \
	}

/* Integers and bool: only logical_not looks at the value. */
#define PRED_INT(T)                                                                        \
	switch (op) {                                                                      \
	case TN_PRED_LOGICAL_NOT:                                                          \
		PRED_LOOP(T, ID, x == 0);                                                  \
		return;                                                                    \
	default: {                                                                         \
		const bool v = op == TN_PRED_ISFINITE;                                     \
		for (int64_t i = 0; i < n; i++)                                            \
			*(bool *)(o + i * so) = v;                                         \
		return;                                                                    \
	}                                                                                  \
	}

void TN_KERNEL_FN(tn__pred_kernel)(int op, enum tn_dtype dt, char *o, int64_t so, const char *a,
				     int64_t sa, int64_t n)
{
	switch (dt) {
	case TN_BOOL:
		PRED_INT(bool)
	case TN_UINT8:
		PRED_INT(uint8_t)
	case TN_INT8:
		PRED_INT(int8_t)
	case TN_INT16:
		PRED_INT(int16_t)
	case TN_INT32:
		PRED_INT(int32_t)
	case TN_INT64:
		PRED_INT(int64_t)
	case TN_FLOAT16:
		PRED_FLOAT(tn_half, HLOAD)
	case TN_BFLOAT16:
		PRED_FLOAT(tn_bfloat16, BLOAD)
	case TN_FLOAT32:
		PRED_FLOAT(float, ID)
	case TN_FLOAT64:
		PRED_FLOAT(double, ID)
	default:
		return;
	}
}
