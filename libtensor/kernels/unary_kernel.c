/* SPDX-License-Identifier: MIT */
/*
 * Unary kernels (neg, abs, sign, exp, expm1, log, log1p, log2, sqrt, rsqrt, sin, cos, tan,
 * tanh, sigmoid, silu, relu, erf, gelu, floor, ceil, round, trunc, reciprocal), compiled once
 * per CPU capability (see stub.h). One row: out[i] = f(a[i]), input and output in one dtype
 * (the caller converts integer inputs of the floating functions first).
 *
 * Floating rows run on vectors (vmath.h): float32 and float64 rows in place when contiguous;
 * float16, bfloat16 and strided float32 rows through a float32 block of the stack (vector
 * conversions in, the function, vector conversions out), so a 16-bit row costs about what a
 * float32 row does and rounds once, as before. The transcendental functions are SLEEF's 1-ulp
 * functions, except float32's erf, tanh and both gelus, which are vmath.h's own (within 1.5
 * ulp; gelu without cancellation in its negative tail); sqrt, rsqrt (1 / sqrt), reciprocal and
 * the arithmetic of sigmoid (1 / (1 + exp(-x))) and silu (x / (1 + exp(-x))) are IEEE
 * operations, in ATen's order. Strided float64 rows use the C library.
 * round is half-to-even (rint), as torch.round; sign of NaN is 0, as torch.sign. gelu follows
 * ATen's CPU formulas term by term (x * 0.5 * (1 + erf(x / sqrt 2)), and 0.5 * x * (1 + tanh(
 * sqrt(2 / pi) * (x + 0.044715 x^3))) for approximate='tanh'); bfloat16's tanh form rounds
 * each operation to bfloat16 as ATen's does (gelu_tanh_bf16, and on vectors
 * gelu_tanh_bf16_block).
 *
 * The predicate kernel (logical_not, isnan, isinf, isfinite) writes bool whatever the input's
 * dtype; integers are never NaN or infinite.
 */
#include <math.h>
#include <string.h>

#include "stub.h"
#include "half.h"
#include "vmath.h"

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
#define HLOAD(v) tn__h2f(v)
#define HSTORE(v) tn__f2h(v)
#define BLOAD(v) tn__bf2f(v)
#define BSTORE(v) tn__f2bf(v)

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

/* ---- vector rows ---- */

/* Y[i] = EXPR of the vector x = X[i...] over a contiguous float32 (VT tn_vf, VL TN_VLF) or
 * float64 row; the tail goes through a zero-padded vector, so every element takes the vector
 * path (Y may be X). */
#define VLOOP(VT, ET, VL, LOAD, STORE, EXPR)                                               \
	do {                                                                               \
		int64_t i = 0;                                                             \
		for (; i + (VL) <= n; i += (VL)) {                                         \
			const VT x = LOAD(X + i);                                          \
			STORE(Y + i, (EXPR));                                              \
		}                                                                          \
		if (i < n) {                                                               \
			ET buf[VL];                                                        \
			memset(buf, 0, sizeof(buf));                                       \
			memcpy(buf, X + i, (size_t)(n - i) * sizeof(ET));                  \
			const VT x = LOAD(buf);                                            \
			STORE(buf, (EXPR));                                                \
			memcpy(Y + i, buf, (size_t)(n - i) * sizeof(ET));                  \
		}                                                                          \
	} while (0)

/* The same loop for one C expression of the scalar x (GCC vectorises what it can). */
#define SLOOP(ET, EXPR)                                                                    \
	do {                                                                               \
		for (int64_t i = 0; i < n; i++) {                                          \
			const ET x = X[i];                                                 \
			Y[i] = (EXPR);                                                     \
		}                                                                          \
	} while (0)

/* The functions of one floating vector type: V(f) names its vector functions (tn_vexpf or
 * tn_vexp), ET is the element type, VL the lanes, SPLAT its splat, SEL its select and MASKI
 * its integer lane type. */
#define VEC_OPS(VT, ET, VL, LOAD, STORE, SPLAT, SEL, MASKI, EXP, EXPM1, LOG, LOG1P, LOG2,    \
		SIN, COS, TAN, TANH, ERF, GELU, GELU_TANH, SQRT, FLOOR, CEIL, RINT, TRUNC, SL) \
	const VT one = SPLAT(1), zero = SPLAT(0);                                           \
	(void)zero;                                                                         \
	switch (op) {                                                                       \
	case TN_UN_NEG:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, -x);                                         \
		return true;                                                                \
	case TN_UN_ABS:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, (VT)((MASKI)x & ~(MASKI)SPLAT(-0.0)));       \
		return true;                                                                \
	case TN_UN_SIGN:                                                                    \
		VLOOP(VT, ET, VL, LOAD, STORE,                                              \
		      SEL(zero < x, one, zero) - SEL(x < zero, one, zero));                 \
		return true;                                                                \
	case TN_UN_RELU: /* NaN stays NaN, as clamp_min(0) does. */                         \
		VLOOP(VT, ET, VL, LOAD, STORE, SEL(x < zero, zero, x));                     \
		return true;                                                                \
	case TN_UN_EXP:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, EXP(x));                                     \
		return true;                                                                \
	case TN_UN_EXPM1:                                                                   \
		VLOOP(VT, ET, VL, LOAD, STORE, EXPM1(x));                                   \
		return true;                                                                \
	case TN_UN_LOG:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, LOG(x));                                     \
		return true;                                                                \
	case TN_UN_LOG1P:                                                                   \
		VLOOP(VT, ET, VL, LOAD, STORE, LOG1P(x));                                   \
		return true;                                                                \
	case TN_UN_LOG2:                                                                    \
		VLOOP(VT, ET, VL, LOAD, STORE, LOG2(x));                                    \
		return true;                                                                \
	case TN_UN_SQRT:                                                                    \
		VLOOP(VT, ET, VL, LOAD, STORE, SQRT(x));                                    \
		return true;                                                                \
	case TN_UN_RSQRT:                                                                   \
		VLOOP(VT, ET, VL, LOAD, STORE, one / SQRT(x));                              \
		return true;                                                                \
	case TN_UN_SIN:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, SIN(x));                                     \
		return true;                                                                \
	case TN_UN_COS:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, COS(x));                                     \
		return true;                                                                \
	case TN_UN_TAN:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, TAN(x));                                     \
		return true;                                                                \
	case TN_UN_TANH:                                                                    \
		VLOOP(VT, ET, VL, LOAD, STORE, TANH(x));                                    \
		return true;                                                                \
	case TN_UN_SIGMOID:                                                                 \
		VLOOP(VT, ET, VL, LOAD, STORE, one / (one + EXP(-x)));                      \
		return true;                                                                \
	case TN_UN_SILU:                                                                    \
		VLOOP(VT, ET, VL, LOAD, STORE, x / (one + EXP(-x)));                        \
		return true;                                                                \
	case TN_UN_ERF:                                                                     \
		VLOOP(VT, ET, VL, LOAD, STORE, ERF(x));                                     \
		return true;                                                                \
	case TN_UN_RECIPROCAL:                                                              \
		VLOOP(VT, ET, VL, LOAD, STORE, one / x);                                    \
		return true;                                                                \
	case TN_UN_GELU:                                                                    \
		VLOOP(VT, ET, VL, LOAD, STORE, GELU(x));                                    \
		return true;                                                                \
	case TN_UN_GELU_TANH:                                                               \
		VLOOP(VT, ET, VL, LOAD, STORE, GELU_TANH(x));                               \
		return true;                                                                \
	case TN_UN_FLOOR:                                                                   \
		SL(ET, FLOOR(x));                                                           \
		return true;                                                                \
	case TN_UN_CEIL:                                                                    \
		SL(ET, CEIL(x));                                                            \
		return true;                                                                \
	case TN_UN_ROUND:                                                                   \
		SL(ET, RINT(x));                                                            \
		return true;                                                                \
	case TN_UN_TRUNC:                                                                   \
		SL(ET, TRUNC(x));                                                           \
		return true;                                                                \
	default:                                                                            \
		return false;                                                               \
	}

/* float64 gelu, both forms, ATen's formulas term by term on SLEEF's erf and tanh. */
static inline tn_vd vgelu_f64(tn_vd x)
{
	const tn_vd one = tn_vd_splat(1), half = tn_vd_splat(0.5), alpha = tn_vd_splat(M_SQRT1_2);
	return x * half * (one + tn_verf(x * alpha));
}

static inline tn_vd vgelu_tanh_f64(tn_vd x)
{
	const tn_vd one = tn_vd_splat(1), half = tn_vd_splat(0.5),
		    beta = tn_vd_splat(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = tn_vd_splat(0.044715);
	return half * x * (one + tn_vtanh(beta * (x + kappa * (x * x * x))));
}

/* Y[i] = op(X[i]) over @n contiguous float32 (Y may be X); false for an op it lacks. */
static bool vec_f32(int op, float *Y, const float *X, int64_t n)
{
	VEC_OPS(tn_vf, float, TN_VLF, tn_vload_f32, tn_vstore_f32, tn_vf_splat, tn_vf_sel, tn_vi,
		tn_vexpf, tn_vexpm1f, tn_vlogf, tn_vlog1pf, tn_vlog2f, tn_vsinf, tn_vcosf,
		tn_vtanf, tn_vtanhf, tn_verff, tn_vgeluf, tn_vgelu_tanhf, tn_vsqrtf, floorf, ceilf,
		rintf, truncf, SLOOP)
}

static bool vec_f64(int op, double *Y, const double *X, int64_t n)
{
	VEC_OPS(tn_vd, double, TN_VLD, tn_vload_f64, tn_vstore_f64, tn_vd_splat, tn_vd_sel, tn_vl,
		tn_vexp, tn_vexpm1, tn_vlog, tn_vlog1p, tn_vlog2, tn_vsin, tn_vcos, tn_vtan,
		tn_vtanh, tn_verf, vgelu_f64, vgelu_tanh_f64, tn_vsqrt, floor, ceil, rint, trunc,
		SLOOP)
}

/* The rounding functions are not fused for 16-bit rows: the block path below runs them. */
#define NO_SLOOP(ET, EXPR) return false

/* Contiguous float16 and bfloat16 rows fused: each vector converted in, computed in float32
 * and converted out, one pass over the row (the same values as the block path). */
static bool vec_f16(int op, tn_half *Y, const tn_half *X, int64_t n)
{
	VEC_OPS(tn_vf, tn_half, TN_VLF, tn_vload_f16, tn_vstore_f16, tn_vf_splat, tn_vf_sel, tn_vi,
		tn_vexpf, tn_vexpm1f, tn_vlogf, tn_vlog1pf, tn_vlog2f, tn_vsinf, tn_vcosf,
		tn_vtanf, tn_vtanhf, tn_verff, tn_vgeluf, tn_vgelu_tanhf, tn_vsqrtf, floorf, ceilf,
		rintf, truncf, NO_SLOOP)
}

static bool vec_bf16(int op, tn_bfloat16 *Y, const tn_bfloat16 *X, int64_t n)
{
	VEC_OPS(tn_vf, tn_bfloat16, TN_VLF, tn_vload_bf16, tn_vstore_bf16, tn_vf_splat, tn_vf_sel,
		tn_vi, tn_vexpf, tn_vexpm1f, tn_vlogf, tn_vlog1pf, tn_vlog2f, tn_vsinf, tn_vcosf,
		tn_vtanf, tn_vtanhf, tn_verff, tn_vgeluf, tn_vgelu_tanhf, tn_vsqrtf, floorf, ceilf,
		rintf, truncf, NO_SLOOP)
}

/* Elements per float32 block of the 16-bit and strided rows: 4 KiB of stack. */
#define BLOCK 1024

/* @m elements of dtype @dt (float16, bfloat16 or float32) at @src, byte stride @ss, into the
 * float32 array @dst. */
static void block_load(float *dst, enum tn_dtype dt, const char *src, int64_t ss, int64_t m)
{
	int64_t i = 0;
	if (dt == TN_FLOAT16 && ss == 2) {
		for (; i + TN_VLF <= m; i += TN_VLF)
			tn_vstore_f32(dst + i, tn_vload_f16((const tn_half *)src + i));
	} else if (dt == TN_BFLOAT16 && ss == 2) {
		for (; i + TN_VLF <= m; i += TN_VLF)
			tn_vstore_f32(dst + i, tn_vload_bf16((const tn_bfloat16 *)src + i));
	}
	for (; i < m; i++) {
		const char *p = src + i * ss;
		dst[i] = dt == TN_FLOAT16    ? tn__h2f(*(const tn_half *)p)
			 : dt == TN_BFLOAT16 ? tn__bf2f(*(const tn_bfloat16 *)p)
					     : *(const float *)p;
	}
}

static void block_store(char *dst, int64_t ds, enum tn_dtype dt, const float *src, int64_t m)
{
	int64_t i = 0;
	if (dt == TN_FLOAT16 && ds == 2) {
		for (; i + TN_VLF <= m; i += TN_VLF)
			tn_vstore_f16((tn_half *)dst + i, tn_vload_f32(src + i));
	} else if (dt == TN_BFLOAT16 && ds == 2) {
		for (; i + TN_VLF <= m; i += TN_VLF)
			tn_vstore_bf16((tn_bfloat16 *)dst + i, tn_vload_f32(src + i));
	}
	for (; i < m; i++) {
		char *p = dst + i * ds;
		if (dt == TN_FLOAT16)
			*(tn_half *)p = tn__f2h(src[i]);
		else if (dt == TN_BFLOAT16)
			*(tn_bfloat16 *)p = tn__f2bf(src[i]);
		else
			*(float *)p = src[i];
	}
}

/* gelu_tanh_bf16 on vectors, over @m float32 values of bfloat16s in place: every constant and
 * every operation's result rounded to bfloat16, tanh SLEEF's (ATen's Vectorized<float>::tanh,
 * which its bfloat16 vector code calls). */
static void gelu_tanh_bf16_block(float *X, int64_t m)
{
#define R(v) tn_vround_bf16(v)
	const tn_vf beta = R(tn_vf_splat((float)(M_SQRT2 * M_2_SQRTPI * 0.5))),
		    kappa = R(tn_vf_splat(0.044715f)), half = tn_vf_splat(0.5f),
		    one = tn_vf_splat(1.0f);
	float *Y = X;
	const int64_t n = m;
	VLOOP(tn_vf, float, TN_VLF, tn_vload_f32, tn_vstore_f32,
	      R(R(half * x) * R(one + R(tn_vtanhf_sleef(R(beta * R(x + R(kappa * R(R(x * x) * x)))))))));
#undef R
}

/* The vector path of a floating row; false where the scalar code below must run it. */
static bool vec_row(int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		    int64_t n)
{
	const int64_t es = dt == TN_FLOAT32 ? 4 : dt == TN_FLOAT64 ? 8 : 2;
	if (dt == TN_FLOAT64)
		return so == es && sa == es && vec_f64(op, (double *)o, (const double *)a, n);
	if (dt == TN_FLOAT32 && so == es && sa == es)
		return vec_f32(op, (float *)o, (const float *)a, n);
	const bool bf16_gelu_tanh = op == TN_UN_GELU_TANH && dt == TN_BFLOAT16;
	if (so == 2 && sa == 2 && !bf16_gelu_tanh &&
	    (dt == TN_FLOAT16 ? vec_f16(op, (tn_half *)o, (const tn_half *)a, n)
			      : vec_bf16(op, (tn_bfloat16 *)o, (const tn_bfloat16 *)a, n)))
		return true;
	/* Probe with an empty row: does vec_f32 have this op? */
	float probe[1] = { 0 }, buf[BLOCK];
	if (!vec_f32(op, probe, probe, 0))
		return false;
	for (int64_t i = 0; i < n; i += BLOCK) {
		const int64_t m = n - i < BLOCK ? n - i : BLOCK;
		block_load(buf, dt, a + i * sa, sa, m);
		if (bf16_gelu_tanh)
			gelu_tanh_bf16_block(buf, m);
		else
			vec_f32(op, buf, buf, m);
		block_store(o + i * so, so, dt, buf, m);
	}
	return true;
}

void TN_KERNEL_FN(tn__unary_kernel)(int op, enum tn_dtype dt, char *o, int64_t so,
				      const char *a, int64_t sa, int64_t n)
{
	if ((dt == TN_FLOAT32 || dt == TN_FLOAT64 || dt == TN_FLOAT16 || dt == TN_BFLOAT16) &&
	    vec_row(op, dt, o, so, a, sa, n))
		return;
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
