/* SPDX-License-Identifier: MIT */
/*
 * The other binary kernels (floor and truncating division, remainder, fmod, pow and its
 * Scalar-exponent special cases, maximum, minimum, atan2, the bitwise and shift operators and
 * the logical ones), compiled once per CPU capability (see stub.h). One row: out[i] =
 * a[i] OP b[i] with a and b in one dtype (the iterator's common dtype); the logical operators
 * write bool, the others that dtype. The rows use the contiguous, broadcast-scalar and
 * strided paths of binary_loops.h.
 *
 * The formulas are PyTorch 1.13's CPU kernels, so that the bits agree: remainder and floor
 * division go through fmod, maximum and minimum propagate NaN, integer pow is exact
 * (repeated squaring, wrapping). Where PyTorch's 16-bit vector code rounds to the 16-bit type
 * after every step (c10::Half and BFloat16 arithmetic), so does this (R below); everything
 * else computes in float and rounds once. Integer division by zero never reaches a kernel
 * (the caller checks the divisor first, as PyTorch raises ZeroDivisionError), but the kernels
 * still refuse to trap on it or on INT_MIN / -1, which wraps here where PyTorch dies of SIGFPE.
 * Shift counts are taken modulo 32 (64 for int64), the x86 semantics PyTorch 1.13 shows.
 */
#include <math.h>
#include <string.h>

#include "binary_loops.h"
#include "half_rows.h"
#include "vmath.h"

/* Round a float result to the 16-bit type and back. */
#define R_HALF(v) tn__h2f(tn__f2h(v))
#define R_BF16(v) tn__bf2f(tn__f2bf(v))
#define R_NONE(v) (v)

/* Floor division and remainder of one floating type family, computing in CT with rounding
 * step R (c10::div_floor_floating and ATen's remainder_kernel). */
#define FLOAT_HELPERS(SUF, CT, R, FMOD, FLOOR, COPYSIGN)                                   \
	static inline CT div_floor_##SUF(CT a, CT b)                                       \
	{                                                                                  \
		if (b == 0)                                                                \
			return R(a / b);                                                   \
		CT mod = FMOD(a, b);                                                       \
		CT div = R(R(a - mod) / b);                                                \
		if (mod != 0 && (b < 0) != (mod < 0))                                      \
			div = R(div - 1);                                                  \
		if (div == 0)                                                              \
			return COPYSIGN((CT)0, R(a / b));                                  \
		CT fl = FLOOR(div);                                                        \
		return R(div - fl) > (CT)0.5 ? R(fl + 1) : fl;                             \
	}                                                                                  \
	static inline CT remainder_##SUF(CT a, CT b)                                       \
	{                                                                                  \
		CT mod = FMOD(a, b);                                                       \
		return mod != 0 && (b < 0) != (mod < 0) ? R(mod + b) : mod;                \
	}

FLOAT_HELPERS(h, float, R_HALF, fmodf, floorf, copysignf)
FLOAT_HELPERS(bf, float, R_BF16, fmodf, floorf, copysignf)
FLOAT_HELPERS(f, float, R_NONE, fmodf, floorf, copysignf)
FLOAT_HELPERS(d, double, R_NONE, fmod, floor, copysign)

/*
 * c10::div_floor_floating with scalar_t = Half, as ATen's scalar loop runs it: std::fmod of
 * two Halves is float's, so the remainder and the quotient stay in float, and only the floor
 * and its correction round to Half (19920 // 7 is 2844: the quotient 2845 rounds to even).
 * The vector code rounds every step instead (div_floor_h): 2846.
 */
static inline float div_floor_h_scalar(float a, float b)
{
	if (b == 0)
		return R_HALF(a / b);
	float mod = fmodf(a, b);
	float div = (a - mod) / b;
	if (mod != 0 && (b < 0) != (mod < 0))
		div -= 1.0f;
	if (div == 0)
		return copysignf(0.0f, R_HALF(a / b));
	float fl = R_HALF(floorf(div));
	return div - fl > 0.5f ? R_HALF(fl + 1.0f) : fl;
}

/*
 * float16 floor division as ATen's vectorized_loop runs it: a contiguous row (or one with a
 * broadcast scalar input) goes through the vector code in blocks of 2 *
 * Vectorized<Half>::size() = 32 elements (AVX2, the capability PyTorch 1.13's x86 builds run)
 * and its last n % 32 elements through the scalar code; a strided row through the scalar
 * code. bfloat16's scalar code rounds every step as its vector code does (c10's BFloat16
 * fmod returns BFloat16), so it needs no such split.
 */
static void div_floor_h_row(char *o, int64_t so, const char *a, int64_t sa, const char *b,
			    int64_t sb, int64_t n)
{
	const int64_t w = (int64_t)sizeof(tn_half);
	const bool vec = so == w && ((sa == w && sb == w) || (sa == w && sb == 0) ||
				     (sa == 0 && sb == w));
	const int64_t body = vec ? n / 32 * 32 : 0;
	for (int64_t i = 0; i < n; i++) {
		const float x = tn__h2f(*(const tn_half *)(a + i * sa));
		const float y = tn__h2f(*(const tn_half *)(b + i * sb));
		*(tn_half *)(o + i * so) =
			tn__f2h(i < body ? div_floor_h(x, y) : div_floor_h_scalar(x, y));
	}
}

/* The floor division row of each floating type. */
#define DIV_FLOOR_ROW_h(T, LX, LY, ST) div_floor_h_row(o, so, a, sa, b, sb, n)
#define DIV_FLOOR_ROW_bf(T, LX, LY, ST) CONTIG_OR_SCALAR(T, LX, LY, div_floor_bf(x, y), ST)
#define DIV_FLOOR_ROW_f(T, LX, LY, ST) CONTIG_OR_SCALAR(T, LX, LY, div_floor_f(x, y), ST)
#define DIV_FLOOR_ROW_d(T, LX, LY, ST) CONTIG_OR_SCALAR(T, LX, LY, div_floor_d(x, y), ST)

/* NaN in either input gives NaN; otherwise x86's maxps/minps, which ATen's vector code uses
 * (between equal values, signed zeros included, the second input). */
#define MAXF(CT, x, y) ((x) != (x) || (y) != (y) ? (CT)NAN : (x) > (y) ? (x) : (y))
#define MINF(CT, x, y) ((x) != (x) || (y) != (y) ? (CT)NAN : (x) < (y) ? (x) : (y))

/* Operators that ignore an input still declare it. */
#define IGNORE(v, e) ((void)(v), (e))

#define FLOAT_CASE(DT, T, CT, SUF, R, LX, LY, ST, POWF, ATAN2F, SQRTF, TRUNCF, FMODF)        \
	case DT:                                                                           \
		switch (op) {                                                              \
		case TN_BIN2_DIV_TRUNC:                                                    \
			CONTIG_OR_SCALAR(T, LX, LY, TRUNCF(R(x / y)), ST);                 \
			return;                                                            \
		case TN_BIN2_DIV_FLOOR:                                                    \
			DIV_FLOOR_ROW_##SUF(T, LX, LY, ST);                                \
			return;                                                            \
		case TN_BIN2_REMAINDER:                                                    \
			CONTIG_OR_SCALAR(T, LX, LY, remainder_##SUF(x, y), ST);            \
			return;                                                            \
		case TN_BIN2_FMOD:                                                         \
			CONTIG_OR_SCALAR(T, LX, LY, FMODF(x, y), ST);                      \
			return;                                                            \
		case TN_BIN2_POW:                                                          \
			CONTIG_OR_SCALAR(T, LX, LY, POWF(x, y), ST);                       \
			return;                                                            \
		case TN_BIN2_MAXIMUM:                                                      \
			CONTIG_OR_SCALAR(T, LX, LY, MAXF(CT, x, y), ST);                   \
			return;                                                            \
		case TN_BIN2_MINIMUM:                                                      \
			CONTIG_OR_SCALAR(T, LX, LY, MINF(CT, x, y), ST);                   \
			return;                                                            \
		case TN_BIN2_ATAN2:                                                        \
			CONTIG_OR_SCALAR(T, LX, LY, ATAN2F(x, y), ST);                     \
			return;                                                            \
		case TN_BIN2_LOGICAL_AND:                                                  \
			BINARY_ROW(bool, T, LX, LY, x != 0 && y != 0, ST_PLAIN);           \
			return;                                                            \
		case TN_BIN2_LOGICAL_OR:                                                   \
			BINARY_ROW(bool, T, LX, LY, x != 0 || y != 0, ST_PLAIN);           \
			return;                                                            \
		case TN_BIN2_LOGICAL_XOR:                                                  \
			BINARY_ROW(bool, T, LX, LY, (x != 0) != (y != 0), ST_PLAIN);       \
			return;                                                            \
		case TN_BIN2_POW_ONE:                                                      \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(x, IGNORE(y, (CT)1)), ST);      \
			return;                                                            \
		case TN_BIN2_POW_LEFT:                                                     \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, x), ST);                     \
			return;                                                            \
		case TN_BIN2_POW_SQUARE:                                                   \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, x * x), ST);                 \
			return;                                                            \
		case TN_BIN2_POW_CUBE:                                                     \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, R(x * x) * x), ST);          \
			return;                                                            \
		case TN_BIN2_POW_INV_SQUARE:                                               \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, (CT)1 / R(x * x)), ST);      \
			return;                                                            \
		case TN_BIN2_POW_SQRT:                                                     \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, SQRTF(x)), ST);              \
			return;                                                            \
		case TN_BIN2_POW_RSQRT:                                                    \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, (CT)1 / SQRTF(x)), ST);      \
			return;                                                            \
		case TN_BIN2_POW_RECIPROCAL:                                               \
			CONTIG_OR_SCALAR(T, LX, LY, IGNORE(y, (CT)1 / x), ST);             \
			return;                                                            \
		default:                                                                   \
			return; /* the bitwise operators refuse floating dtypes */        \
		}

/* Exact integer pow by repeated squaring, wrapping (ATen's powi_impl); the caller truncates
 * to the type's width, which multiplication modulo 2^64 commutes with. */
static inline uint64_t powi_u64(uint64_t a, uint64_t b)
{
	uint64_t r = 1;
	while (b) {
		if (b & 1)
			r *= a;
		b >>= 1;
		a *= a;
	}
	return r;
}

/* Signed integer operators (T, its unsigned twin U). Division by -1 negates with wrapping
 * (INT_MIN / -1 traps in C), and a zero divisor gives 0 rather than a trap. */
#define SIGNED_HELPERS(SUF, T, U)                                                          \
	static inline T div_trunc_##SUF(T a, T b)                                          \
	{                                                                                  \
		if (b == 0)                                                                \
			return 0;                                                          \
		return b == -1 ? (T)(U)(0 - (U)a) : (T)(a / b);                            \
	}                                                                                  \
	static inline T div_floor_##SUF(T a, T b)                                          \
	{                                                                                  \
		if (b == 0 || b == -1)                                                     \
			return div_trunc_##SUF(a, b);                                      \
		T q = (T)(a / b), r = (T)(a % b);                                          \
		return r != 0 && (a < 0) != (b < 0) ? (T)(q - 1) : q;                      \
	}                                                                                  \
	static inline T remainder_##SUF(T a, T b)                                          \
	{                                                                                  \
		if (b == 0 || b == -1)                                                     \
			return 0;                                                          \
		T r = (T)(a % b);                                                          \
		return r != 0 && (r < 0) != (b < 0) ? (T)(r + b) : r;                      \
	}                                                                                  \
	static inline T fmod_##SUF(T a, T b)                                               \
	{                                                                                  \
		return b == 0 || b == -1 ? 0 : (T)(a % b);                                 \
	}                                                                                  \
	/* A negative exponent: 1 for 1, +-1 for -1, else 0 (ATen's powi). */             \
	static inline T pow_##SUF(T a, T b)                                                \
	{                                                                                  \
		if (b < 0)                                                                 \
			return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;              \
		return (T)(U)powi_u64((uint64_t)(int64_t)a, (uint64_t)(int64_t)b);         \
	}

SIGNED_HELPERS(i8, int8_t, uint8_t)
SIGNED_HELPERS(i16, int16_t, uint16_t)
SIGNED_HELPERS(i32, int32_t, uint32_t)
SIGNED_HELPERS(i64, int64_t, uint64_t)

static inline uint8_t div_trunc_u8(uint8_t a, uint8_t b)
{
	return b == 0 ? 0 : (uint8_t)(a / b);
}
#define div_floor_u8 div_trunc_u8 /* no signs to differ */
static inline uint8_t fmod_u8(uint8_t a, uint8_t b)
{
	return b == 0 ? 0 : (uint8_t)(a % b);
}
#define remainder_u8 fmod_u8
static inline uint8_t pow_u8(uint8_t a, uint8_t b)
{
	return (uint8_t)powi_u64(a, b);
}

/* Shifts as the x86 instructions do them (the count modulo 32 for types up to 32 bits, which
 * C promotes to int, modulo 64 for int64): what PyTorch 1.13's unchecked shifts give. Left
 * shifts run unsigned, so that shifting a negative value is defined. */
#define SHL_32(T, x, y) ((T)((uint32_t)(int32_t)(x) << ((uint32_t)(y)&31u)))
#define SHR_32(T, x, y) ((T)((int32_t)(x) >> ((uint32_t)(y)&31u)))
#define SHL_64(T, x, y) ((T)((uint64_t)(x) << ((uint64_t)(y)&63u)))
#define SHR_64(T, x, y) ((T)((x) >> ((uint64_t)(y)&63u)))

#define INT_CASE(DT, T, SUF, SH)                                                           \
	case DT:                                                                           \
		switch (op) {                                                              \
		case TN_BIN2_DIV_TRUNC:                                                    \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, div_trunc_##SUF(x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_DIV_FLOOR:                                                    \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, div_floor_##SUF(x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_REMAINDER:                                                    \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, remainder_##SUF(x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_FMOD:                                                         \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, fmod_##SUF(x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_POW:                                                          \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, pow_##SUF(x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_MAXIMUM:                                                      \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, x > y ? x : y, ST_PLAIN);  \
			return;                                                            \
		case TN_BIN2_MINIMUM:                                                      \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, x < y ? x : y, ST_PLAIN);  \
			return;                                                            \
		case TN_BIN2_BITWISE_AND:                                                  \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, (T)(x & y), ST_PLAIN);     \
			return;                                                            \
		case TN_BIN2_BITWISE_OR:                                                   \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, (T)(x | y), ST_PLAIN);     \
			return;                                                            \
		case TN_BIN2_BITWISE_XOR:                                                  \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, (T)(x ^ y), ST_PLAIN);     \
			return;                                                            \
		case TN_BIN2_LSHIFT:                                                       \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, SHL_##SH(T, x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_RSHIFT:                                                       \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, SHR_##SH(T, x, y), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_LOGICAL_AND:                                                  \
			BINARY_ROW(bool, T, LX_PLAIN, LY_PLAIN, x != 0 && y != 0, ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_LOGICAL_OR:                                                   \
			BINARY_ROW(bool, T, LX_PLAIN, LY_PLAIN, x != 0 || y != 0, ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_LOGICAL_XOR:                                                  \
			BINARY_ROW(bool, T, LX_PLAIN, LY_PLAIN, (x != 0) != (y != 0), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_POW_ONE:                                                      \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, IGNORE(x, IGNORE(y, (T)1)), ST_PLAIN); \
			return;                                                            \
		case TN_BIN2_POW_LEFT:                                                     \
			CONTIG_OR_SCALAR(T, LX_PLAIN, LY_PLAIN, IGNORE(y, x), ST_PLAIN);   \
			return;                                                            \
		default:                                                                   \
			return; /* atan2 promotes to float; pow's float cases */           \
		}

/* pow and atan2 of float32 and float64 rows whose inputs are contiguous or broadcast scalars,
 * on SLEEF's 1-ulp vector functions (vmath.h), as ATen's Vectorized<float>::pow and ::atan2;
 * the tail through zero-padded vectors. */
#define VEC2_ROW(VT, ET, VL, LOAD, STORE, SPLAT, FN)                                        \
	do {                                                                                \
		const ET *A = (const ET *)a, *B = (const ET *)b;                            \
		ET *O = (ET *)o;                                                            \
		int64_t i = 0;                                                              \
		for (; i + (VL) <= n; i += (VL)) {                                          \
			const VT x = sa ? LOAD(A + i) : SPLAT(A[0]);                        \
			const VT y = sb ? LOAD(B + i) : SPLAT(B[0]);                        \
			STORE(O + i, FN(x, y));                                             \
		}                                                                           \
		if (i < n) {                                                                \
			ET bx[VL], by[VL], bo[VL];                                          \
			for (int64_t k = 0; k < (VL); k++) {                                \
				bx[k] = i + k < n ? A[sa ? i + k : 0] : 0;                  \
				by[k] = i + k < n ? B[sb ? i + k : 0] : 0;                  \
			}                                                                   \
			STORE(bo, FN(LOAD(bx), LOAD(by)));                                  \
			memcpy(O + i, bo, (size_t)(n - i) * sizeof(ET));                    \
		}                                                                           \
	} while (0)

static bool vec2_row(int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		     const char *b, int64_t sb, int64_t n)
{
	const int64_t w = dt == TN_FLOAT32 ? 4 : 8;
	/* float32 maximum and minimum: MAXF and MINF lane by lane in three instructions (a
	 * comparison for NaN, maxps or minps, a blend), where the scalar formula's vectorised
	 * loop took twice as many. */
	if ((op == TN_BIN2_MAXIMUM || op == TN_BIN2_MINIMUM) && dt == TN_FLOAT32 && so == 4 &&
	    (sa == 4 || sa == 0) && (sb == 4 || sb == 0)) {
		if (op == TN_BIN2_MAXIMUM)
			VEC2_ROW(tn_vf, float, TN_VLF, tn_vload_f32, tn_vstore_f32, tn_vf_splat,
				 tn__vmaxf_nan);
		else
			VEC2_ROW(tn_vf, float, TN_VLF, tn_vload_f32, tn_vstore_f32, tn_vf_splat,
				 tn__vminf_nan);
		return true;
	}
	if ((op != TN_BIN2_POW && op != TN_BIN2_ATAN2) ||
	    (dt != TN_FLOAT32 && dt != TN_FLOAT64) || so != w || (sa != w && sa != 0) ||
	    (sb != w && sb != 0))
		return false;
	if (dt == TN_FLOAT32 && op == TN_BIN2_POW)
		VEC2_ROW(tn_vf, float, TN_VLF, tn_vload_f32, tn_vstore_f32, tn_vf_splat, tn_vpowf);
	else if (dt == TN_FLOAT32)
		VEC2_ROW(tn_vf, float, TN_VLF, tn_vload_f32, tn_vstore_f32, tn_vf_splat, tn_vatan2f);
	else if (op == TN_BIN2_POW)
		VEC2_ROW(tn_vd, double, TN_VLD, tn_vload_f64, tn_vstore_f64, tn_vd_splat, tn_vpow);
	else
		VEC2_ROW(tn_vd, double, TN_VLD, tn_vload_f64, tn_vstore_f64, tn_vd_splat, tn_vatan2);
	return true;
}

/*
 * 16-bit rows with a contiguous output and contiguous or broadcast inputs, through float32
 * vectors (half_rows.h; the compiler does not vectorise float16's scalar conversion):
 * - maximum and minimum, MAXF and MINF lane by lane (the same bits as the scalar rows);
 * - bfloat16 pow and atan2 as ATen's cpu_kernel_vec runs them: SLEEF's 1-ulp functions on
 *   whole blocks of 2 * Vectorized<BFloat16>::size() = 32 elements (Vectorized<BFloat16>::pow
 *   and ::atan2 widen to float, call Sleef_powf8_u10 / Sleef_atan2f8_u10 and round), the
 *   row's last n % 32 elements through the scalar code (std::pow and std::atan2 of float);
 * - float16 atan2 (PyTorch 1.13 has no float16 atan2): float32's rows rounded, SLEEF on the
 *   whole row as vec2_row. float16 pow stays scalar, as ATen's (Vectorized<Half> is its generic
 *   per-element std::pow in 1.13).
 * Other rows return false.
 */
#define H16_TAIL_ROW(T, SLOAD, SSTORE, FN, from)                                            \
	do {                                                                                \
		const T *A_ = (const T *)a, *B_ = (const T *)b;                             \
		T *O_ = (T *)o;                                                             \
		for (int64_t i_ = (from); i_ < n; i_++)                                     \
			SSTORE(O_[i_], FN(SLOAD(A_[sa ? i_ : 0]), SLOAD(B_[sb ? i_ : 0])));  \
	} while (0)

/* FN on whole vectors, the last n % TN_VLF elements through one zero-padded vector. */
#define H16_VEC2_ROW(T, VLOAD, SLOAD, VSTORE, SSTORE, FN, SFN)                              \
	do {                                                                                \
		const int64_t nv_ = n / TN_VLF * TN_VLF;                                    \
		H16_ROW(T, T, o, a, sa, b, sb, nv_, VLOAD, SLOAD, VSTORE, SSTORE, FN(x, y),   \
			SFN(x, y));                                                         \
		if (nv_ < n) {                                                              \
			T bx_[TN_VLF], by_[TN_VLF], bo_[TN_VLF];                            \
			memset(bx_, 0, sizeof(bx_));                                        \
			memset(by_, 0, sizeof(by_));                                        \
			for (int64_t k_ = 0; k_ < n - nv_; k_++) {                          \
				bx_[k_] = ((const T *)a)[sa ? nv_ + k_ : 0];                \
				by_[k_] = ((const T *)b)[sb ? nv_ + k_ : 0];                \
			}                                                                   \
			VSTORE(bo_, FN(VLOAD(bx_), VLOAD(by_)));                            \
			memcpy((T *)o + nv_, bo_, (size_t)(n - nv_) * sizeof(T));           \
		}                                                                           \
	} while (0)

#define MAXF_F(x, y) MAXF(float, x, y)
#define MINF_F(x, y) MINF(float, x, y)

static bool h16_row(int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		    const char *b, int64_t sb, int64_t n)
{
	if (so != 2 || (sa != 2 && sa != 0) || (sb != 2 && sb != 0) || (sa | sb) == 0)
		return false;
	const bool h = dt == TN_FLOAT16;
	switch (op) {
	case TN_BIN2_MAXIMUM:
		if (h)
			H16_ROW(tn_half, tn_half, o, a, sa, b, sb, n, tn_vload_f16, tn__h2f,
				tn_vstore_f16, ST_HALF, tn__vmaxf_nan(x, y), MAXF_F(x, y));
		else
			H16_ROW(tn_bfloat16, tn_bfloat16, o, a, sa, b, sb, n, tn_vload_bf16,
				tn__bf2f, tn__vstore_bf16_exact, ST_BF16, tn__vmaxf_nan(x, y),
				MAXF_F(x, y));
		return true;
	case TN_BIN2_MINIMUM:
		if (h)
			H16_ROW(tn_half, tn_half, o, a, sa, b, sb, n, tn_vload_f16, tn__h2f,
				tn_vstore_f16, ST_HALF, tn__vminf_nan(x, y), MINF_F(x, y));
		else
			H16_ROW(tn_bfloat16, tn_bfloat16, o, a, sa, b, sb, n, tn_vload_bf16,
				tn__bf2f, tn__vstore_bf16_exact, ST_BF16, tn__vminf_nan(x, y),
				MINF_F(x, y));
		return true;
	case TN_BIN2_ATAN2:
		if (h) {
			H16_VEC2_ROW(tn_half, tn_vload_f16, tn__h2f, tn_vstore_f16, ST_HALF,
				     tn_vatan2f, atan2f);
			return true;
		}
		/* fall through */
	case TN_BIN2_POW: {
		if (h)
			return false;
		const int64_t nv = n / 32 * 32;
		if (op == TN_BIN2_POW) {
			H16_ROW(tn_bfloat16, tn_bfloat16, o, a, sa, b, sb, nv, tn_vload_bf16,
				tn__bf2f, tn_vstore_bf16, ST_BF16, tn_vpowf(x, y), powf(x, y));
			H16_TAIL_ROW(tn_bfloat16, tn__bf2f, ST_BF16, powf, nv);
		} else {
			H16_ROW(tn_bfloat16, tn_bfloat16, o, a, sa, b, sb, nv, tn_vload_bf16,
				tn__bf2f, tn_vstore_bf16, ST_BF16, tn_vatan2f(x, y), atan2f(x, y));
			H16_TAIL_ROW(tn_bfloat16, tn__bf2f, ST_BF16, atan2f, nv);
		}
		return true;
	}
	default:
		return false;
	}
}

void TN_KERNEL_FN(tn__binary2_kernel)(int op, enum tn_dtype dt, char *o, int64_t so,
					const char *a, int64_t sa, const char *b, int64_t sb,
					int64_t n)
{
	if (vec2_row(op, dt, o, so, a, sa, b, sb, n))
		return;
	if ((dt == TN_FLOAT16 || dt == TN_BFLOAT16) && h16_row(op, dt, o, so, a, sa, b, sb, n))
		return;
	switch (dt) {
	case TN_BOOL:
		switch (op) {
		case TN_BIN2_MAXIMUM:
		case TN_BIN2_BITWISE_OR:
		case TN_BIN2_LOGICAL_OR:
			CONTIG_OR_SCALAR(bool, LX_PLAIN, LY_PLAIN, x || y, ST_PLAIN);
			return;
		case TN_BIN2_MINIMUM:
		case TN_BIN2_BITWISE_AND:
		case TN_BIN2_LOGICAL_AND:
			CONTIG_OR_SCALAR(bool, LX_PLAIN, LY_PLAIN, x && y, ST_PLAIN);
			return;
		case TN_BIN2_BITWISE_XOR:
		case TN_BIN2_LOGICAL_XOR:
			CONTIG_OR_SCALAR(bool, LX_PLAIN, LY_PLAIN, x != y, ST_PLAIN);
			return;
		default:
			return; /* the others refuse bool */
		}
		INT_CASE(TN_UINT8, uint8_t, u8, 32)
		INT_CASE(TN_INT8, int8_t, i8, 32)
		INT_CASE(TN_INT16, int16_t, i16, 32)
		INT_CASE(TN_INT32, int32_t, i32, 32)
		INT_CASE(TN_INT64, int64_t, i64, 64)
		FLOAT_CASE(TN_FLOAT16, tn_half, float, h, R_HALF, LX_HALF, LY_HALF, ST_HALF, powf,
			   atan2f, sqrtf, truncf, fmodf)
		FLOAT_CASE(TN_BFLOAT16, tn_bfloat16, float, bf, R_BF16, LX_BF16, LY_BF16, ST_BF16, powf,
			   atan2f, sqrtf, truncf, fmodf)
		FLOAT_CASE(TN_FLOAT32, float, float, f, R_NONE, LX_PLAIN, LY_PLAIN, ST_PLAIN, powf,
			   atan2f, sqrtf, truncf, fmodf)
		FLOAT_CASE(TN_FLOAT64, double, double, d, R_NONE, LX_PLAIN, LY_PLAIN, ST_PLAIN, pow,
			   atan2, sqrt, trunc, fmod)
	default:
		return;
	}
}

/*
 * A float32 row to the power of the Scalar @e, as PyTorch 1.13's
 * pow_tensor_scalar_optimized_kernel<float, double> computes it: its vector loop,
 * Vectorized<float>::pow (SLEEF's powf, as here) with the exponent rounded to float, over the
 * whole blocks of 16 (2 * Vectorized<float>::size() under its AVX2 build) of a contiguous row;
 * its scalar loop, std::pow(float, double), in double with one rounding to float, over the
 * rest and over strided rows.
 */
void TN_KERNEL_FN(tn__pow_f32_scalar_kernel)(char *o, int64_t so, const char *a, int64_t sa,
					       int64_t n, double e)
{
	int64_t i = 0;
	if (so == (int64_t)sizeof(float) && sa == (int64_t)sizeof(float)) {
		const tn_vf ev = tn_vf_splat((float)e);
		float *O = (float *)(void *)o;
		const float *A = (const float *)(const void *)a;
		for (const int64_t nv = n / 16 * 16; i < nv; i += TN_VLF)
			tn_vstore_f32(O + i, tn_vpowf(tn_vload_f32(A + i), ev));
	}
	for (; i < n; i++) {
		float x;
		memcpy(&x, a + i * sa, sizeof(x));
		const float r = (float)pow((double)x, e);
		memcpy(o + i * so, &r, sizeof(r));
	}
}
