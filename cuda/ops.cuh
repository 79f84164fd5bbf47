/* SPDX-License-Identifier: MIT */
/*
 * The element-wise operators as functors over storage types, each the CPU kernel's formula
 * (libtensor/kernels/binary_kernel.c, compare_kernel.c, unary_kernel.c, binary2_kernel.c):
 * 16-bit floats widen to float, compute, and round once (or after each step where the CPU's
 * 16-bit code does); integers wrap. A functor names its input storage types (in_t<K>) and its
 * output storage type (out_t); the loops (loops.cuh) load, convert and store around it.
 *
 * The .cu files are compiled with -fmad=false, so a * b + c is two roundings as in the CPU
 * kernels (built with -ffp-contract=off), not one fused multiply-add.
 */
#ifndef TN_CUDA_OPS_CUH
#define TN_CUDA_OPS_CUH

#include <math.h>

#include "common.cuh"

namespace tn_cuda {

template <typename T> struct is_float16 {
	static constexpr bool value = std::is_same<T, half_t>::value || std::is_same<T, bf16_t>::value;
};
template <typename T> struct is_floating {
	static constexpr bool value = is_float16<T>::value || std::is_floating_point<T>::value;
};

/* The unsigned twin of an integer type, for wrapping arithmetic. */
template <typename T> struct uns {
	using type = typename std::make_unsigned<T>::type;
};
template <> struct uns<bool> {
	using type = uint8_t;
};

/* Round a float to the 16-bit type T and back (the CPU's R_HALF and R_BF16), or nothing. */
template <typename T, typename A> TN_HD A rnd(A v)
{
	if constexpr (is_float16<T>::value)
		return widen(to<T>(v));
	else
		return v;
}

/* ---- arithmetic: add, sub (with alpha), mul, div ---- */

/*
 * a * b + c rounded once, as nvcc's default contraction (--fmad=true) computes PyTorch's
 * a + alpha * b on the device, and as the CPU kernels' fmadd does; spelt out so the host
 * emulation (where the compiler need not contract) rounds the same way.
 */
template <typename A> TN_HD A fused(A a, A b, A c)
{
	if constexpr (std::is_same<A, float>::value)
		return fmaf(a, b, c);
	else
		return fma(a, b, c);
}

template <typename T> struct BinaryOp {
	template <int K> using in_t = T;
	using out_t = T;
	using A = typename acc_of<T>::type;
	int op;
	A alpha_f;       /* floating */
	uint64_t alpha_i; /* integers */
	bool alpha_b;    /* bool */

	TN_HD T operator()(T a, T b) const
	{
		if constexpr (std::is_same<T, bool>::value) {
			return op == TN_BINOP_MUL ? (a && b) : (a || (alpha_b && b));
		} else if constexpr (std::is_integral<T>::value) {
			using U = typename uns<T>::type;
			uint64_t x = (uint64_t)(int64_t)a, y = (uint64_t)(int64_t)b;
			switch (op) {
			case TN_BINOP_ADD:
				return (T)(U)(x + alpha_i * y);
			case TN_BINOP_SUB:
				return (T)(U)(x - alpha_i * y);
			case TN_BINOP_MUL:
				return (T)(U)(x * y);
			default:
				/* Not reached from the operators (integer true division promotes to
				 * float); truncating, 0 for a zero divisor, wrapping MIN / -1. */
				if (b == 0)
					return 0;
				if (std::is_signed<T>::value && b == (T)-1)
					return (T)(U)((U)0 - (U)a);
				return (T)(a / b);
			}
		} else {
			A x = widen(a), y = widen(b);
			switch (op) {
			case TN_BINOP_ADD:
				return narrow<T>(alpha_f == (A)1 ? x + y : fused(alpha_f, y, x));
			case TN_BINOP_SUB:
				return narrow<T>(alpha_f == (A)1 ? x - y : fused(-alpha_f, y, x));
			case TN_BINOP_MUL:
				return narrow<T>(x * y);
			default:
				return narrow<T>(x / y);
			}
		}
	}
};

/* ---- comparisons ---- */

template <typename T> struct CompareOp {
	template <int K> using in_t = T;
	using out_t = bool;
	int op;

	TN_HD bool operator()(T a, T b) const
	{
		auto x = widen(a);
		auto y = widen(b);
		switch (op) {
		case TN_CMP_EQ:
			return x == y;
		case TN_CMP_NE:
			return x != y;
		case TN_CMP_LT:
			return x < y;
		case TN_CMP_LE:
			return x <= y;
		case TN_CMP_GT:
			return x > y;
		default:
			return x >= y;
		}
	}
};

/* ---- where, copy, fill ---- */

/* out = c ? a : b: the condition loads as bool (nonzero), a and b move as they are. */
template <typename T> struct WhereOp {
	template <int K> using in_t = typename std::conditional<K == 0, bool, T>::type;
	using out_t = T;
	TN_HD T operator()(bool c, T a, T b) const
	{
		return c ? a : b;
	}
};

/* The conversion happens in the load (load_as, the CPU cast's semantics). */
template <typename T> struct CopyOp {
	template <int K> using in_t = T;
	using out_t = T;
	TN_HD T operator()(T a) const
	{
		return a;
	}
};

template <typename T> struct FillOp {
	template <int K> using in_t = T;
	using out_t = T;
	T value;
	TN_HD T operator()() const
	{
		return value;
	}
};

/* ---- unary functions ---- */

/* The C library's functions by argument type: float or double overloads, host or device. */
#define TN_MATH1(name, fn)                                                                  \
	TN_HD float name(float x)                                                           \
	{                                                                                   \
		return fn##f(x);                                                            \
	}                                                                                   \
	TN_HD double name(double x)                                                         \
	{                                                                                   \
		return fn(x);                                                               \
	}
TN_MATH1(m_exp, exp)
TN_MATH1(m_expm1, expm1)
TN_MATH1(m_log, log)
TN_MATH1(m_log1p, log1p)
TN_MATH1(m_log2, log2)
TN_MATH1(m_sqrt, sqrt)
TN_MATH1(m_sin, sin)
TN_MATH1(m_cos, cos)
TN_MATH1(m_tan, tan)
TN_MATH1(m_tanh, tanh)
TN_MATH1(m_erf, erf)
TN_MATH1(m_floor, floor)
TN_MATH1(m_ceil, ceil)
TN_MATH1(m_rint, rint)
TN_MATH1(m_trunc, trunc)
TN_MATH1(m_fabs, fabs)
#undef TN_MATH1
#define TN_MATH2(name, fn)                                                                  \
	TN_HD float name(float x, float y)                                                  \
	{                                                                                   \
		return fn##f(x, y);                                                         \
	}                                                                                   \
	TN_HD double name(double x, double y)                                               \
	{                                                                                   \
		return fn(x, y);                                                            \
	}
TN_MATH2(m_pow, pow)
TN_MATH2(m_atan2, atan2)
TN_MATH2(m_fmod, fmod)
TN_MATH2(m_copysign, copysign)
#undef TN_MATH2

template <typename F> TN_HD F unary_float(int op, F x)
{
	switch (op) {
	case TN_UN_NEG:
		return -x;
	case TN_UN_ABS:
		return m_fabs(x);
	case TN_UN_SIGN:
		return (F)((0 < x) - (x < 0));
	case TN_UN_EXP:
		return m_exp(x);
	case TN_UN_EXPM1:
		return m_expm1(x);
	case TN_UN_LOG:
		return m_log(x);
	case TN_UN_LOG1P:
		return m_log1p(x);
	case TN_UN_LOG2:
		return m_log2(x);
	case TN_UN_SQRT:
		return m_sqrt(x);
	case TN_UN_RSQRT:
		return (F)1 / m_sqrt(x);
	case TN_UN_SIN:
		return m_sin(x);
	case TN_UN_COS:
		return m_cos(x);
	case TN_UN_TAN:
		return m_tan(x);
	case TN_UN_TANH:
		return m_tanh(x);
	case TN_UN_SIGMOID:
		return (F)1 / ((F)1 + m_exp(-x));
	case TN_UN_SILU:
		return x / ((F)1 + m_exp(-x));
	case TN_UN_RELU:
		return x < 0 ? (F)0 : x;
	case TN_UN_ERF:
		return m_erf(x);
	case TN_UN_FLOOR:
		return m_floor(x);
	case TN_UN_CEIL:
		return m_ceil(x);
	case TN_UN_ROUND:
		return m_rint(x);
	case TN_UN_TRUNC:
		return m_trunc(x);
	case TN_UN_RECIPROCAL:
		return (F)1 / x;
	case TN_UN_GELU:
		return x * (F)0.5 * ((F)1 + m_erf(x * (F)0.70710678118654752440));
	case TN_UN_GELU_TANH: {
		/* (F)(M_SQRT2 * M_2_SQRTPI * 0.5), computed in double as the CPU does */
		const F beta = (F)(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
		const F kappa = (F)0.044715;
		return (F)0.5 * x * ((F)1 + m_tanh(beta * (x + kappa * (x * x * x))));
	}
	default:
		return x;
	}
}

template <typename T> struct UnaryOp {
	template <int K> using in_t = T;
	using out_t = T;
	int op;

	TN_HD T operator()(T a) const
	{
		if constexpr (std::is_same<T, bool>::value) {
			return op == TN_UN_BITWISE_NOT ? !a : a;
		} else if constexpr (std::is_same<T, uint8_t>::value) {
			switch (op) {
			case TN_UN_NEG:
				return (uint8_t)(0u - (unsigned)a);
			case TN_UN_SIGN:
				return a != 0;
			case TN_UN_BITWISE_NOT:
				return (uint8_t)~a;
			default:
				return a;
			}
		} else if constexpr (std::is_integral<T>::value) {
			using U = typename uns<T>::type;
			switch (op) {
			case TN_UN_NEG:
				return (T)((U)0 - (U)a);
			case TN_UN_ABS:
				return (T)(a < 0 ? (U)0 - (U)a : (U)a);
			case TN_UN_SIGN:
				return (T)((0 < a) - (a < 0));
			case TN_UN_RELU:
				return a < 0 ? (T)0 : a;
			case TN_UN_BITWISE_NOT:
				return (T)~a;
			default:
				return a;
			}
		} else {
			return narrow<T>(unary_float(op, widen(a)));
		}
	}
};

/* ---- predicates ---- */

template <typename T> struct PredOp {
	template <int K> using in_t = T;
	using out_t = bool;
	int op;

	TN_HD bool operator()(T a) const
	{
		auto x = widen(a);
		if constexpr (is_floating<T>::value) {
			switch (op) {
			case TN_PRED_LOGICAL_NOT:
				return x == 0;
			case TN_PRED_ISNAN:
				return isnan(x);
			case TN_PRED_ISINF:
				return isinf(x);
			default:
				return isfinite(x);
			}
		} else {
			return op == TN_PRED_LOGICAL_NOT ? x == 0 : op == TN_PRED_ISFINITE;
		}
	}
};

/* ---- the other binary operators ---- */

/* c10::div_floor_floating and ATen's remainder, rounding as the CPU's 16-bit code (R). */
template <typename T, typename A> TN_HD A div_floor_f(A a, A b)
{
	if (b == 0)
		return rnd<T>(a / b);
	A mod = m_fmod(a, b);
	A div = rnd<T>(rnd<T>(a - mod) / b);
	if (mod != 0 && (b < 0) != (mod < 0))
		div = rnd<T>(div - 1);
	if (div == 0)
		return m_copysign((A)0, rnd<T>(a / b));
	A fl = m_floor(div);
	return rnd<T>(div - fl) > (A)0.5 ? rnd<T>(fl + 1) : fl;
}

template <typename T, typename A> TN_HD A remainder_f(A a, A b)
{
	A mod = m_fmod(a, b);
	return mod != 0 && (b < 0) != (mod < 0) ? rnd<T>(mod + b) : mod;
}

TN_HD uint64_t powi_u64(uint64_t a, uint64_t b)
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

template <typename T> TN_HD T bin2_int(int op, T x, T y)
{
	using U = typename uns<T>::type;
	constexpr bool sgn = std::is_signed<T>::value;
	constexpr bool wide = sizeof(T) == 8;
	switch (op) {
	case TN_BIN2_DIV_TRUNC:
		if (y == 0)
			return 0;
		return sgn && y == (T)-1 ? (T)(U)((U)0 - (U)x) : (T)(x / y);
	case TN_BIN2_DIV_FLOOR: {
		if (y == 0)
			return 0;
		if (sgn && y == (T)-1)
			return (T)(U)((U)0 - (U)x);
		T q = (T)(x / y), r = (T)(x % y);
		return sgn && r != 0 && (x < 0) != (y < 0) ? (T)(q - 1) : q;
	}
	case TN_BIN2_REMAINDER: {
		if (y == 0 || (sgn && y == (T)-1))
			return 0;
		T r = (T)(x % y);
		return sgn && r != 0 && (r < 0) != (y < 0) ? (T)(r + y) : r;
	}
	case TN_BIN2_FMOD:
		return y == 0 || (sgn && y == (T)-1) ? (T)0 : (T)(x % y);
	case TN_BIN2_POW:
		if (sgn && y < 0)
			return x == 1 ? (T)1 : x == (T)-1 ? ((y & 1) ? (T)-1 : (T)1) : (T)0;
		return (T)(U)powi_u64((uint64_t)(int64_t)x, (uint64_t)(int64_t)y);
	case TN_BIN2_MAXIMUM:
		return x > y ? x : y;
	case TN_BIN2_MINIMUM:
		return x < y ? x : y;
	case TN_BIN2_BITWISE_AND:
		return (T)(x & y);
	case TN_BIN2_BITWISE_OR:
		return (T)(x | y);
	case TN_BIN2_BITWISE_XOR:
		return (T)(x ^ y);
	case TN_BIN2_LSHIFT:
		if constexpr (wide)
			return (T)((uint64_t)x << ((uint64_t)y & 63u));
		else
			return (T)((uint32_t)(int32_t)x << ((uint32_t)y & 31u));
	case TN_BIN2_RSHIFT:
		if constexpr (wide)
			return (T)(x >> ((uint64_t)y & 63u));
		else
			return (T)((int32_t)x >> ((uint32_t)y & 31u));
	case TN_BIN2_POW_ONE:
		return 1;
	default: /* POW_LEFT */
		return x;
	}
}

template <typename T> TN_HD T bin2_float(int op, T a, T b)
{
	using A = typename acc_of<T>::type;
	A x = widen(a), y = widen(b);
	A r;
	switch (op) {
	case TN_BIN2_DIV_TRUNC:
		r = m_trunc(rnd<T>(x / y));
		break;
	case TN_BIN2_DIV_FLOOR:
		r = div_floor_f<T>(x, y);
		break;
	case TN_BIN2_REMAINDER:
		r = remainder_f<T>(x, y);
		break;
	case TN_BIN2_FMOD:
		r = m_fmod(x, y);
		break;
	case TN_BIN2_POW:
		r = m_pow(x, y);
		break;
	case TN_BIN2_MAXIMUM:
		r = x != x || y != y ? (A)NAN : x > y ? x : y;
		break;
	case TN_BIN2_MINIMUM:
		r = x != x || y != y ? (A)NAN : x < y ? x : y;
		break;
	case TN_BIN2_ATAN2:
		r = m_atan2(x, y);
		break;
	case TN_BIN2_POW_ONE:
		r = 1;
		break;
	case TN_BIN2_POW_LEFT:
		r = x;
		break;
	case TN_BIN2_POW_SQUARE:
		r = x * x;
		break;
	case TN_BIN2_POW_CUBE:
		r = rnd<T>(x * x) * x;
		break;
	case TN_BIN2_POW_INV_SQUARE:
		r = (A)1 / rnd<T>(x * x);
		break;
	case TN_BIN2_POW_SQRT:
		r = m_sqrt(x);
		break;
	case TN_BIN2_POW_RSQRT:
		r = (A)1 / m_sqrt(x);
		break;
	case TN_BIN2_POW_RECIPROCAL:
		r = (A)1 / x;
		break;
	default:
		r = x;
		break;
	}
	return narrow<T>(r);
}

/* The operators that write the inputs' dtype. */
template <typename T> struct Binary2Op {
	template <int K> using in_t = T;
	using out_t = T;
	int op;

	TN_HD T operator()(T x, T y) const
	{
		if constexpr (std::is_same<T, bool>::value) {
			switch (op) {
			case TN_BIN2_MAXIMUM:
			case TN_BIN2_BITWISE_OR:
			case TN_BIN2_LOGICAL_OR:
				return x || y;
			case TN_BIN2_MINIMUM:
			case TN_BIN2_BITWISE_AND:
			case TN_BIN2_LOGICAL_AND:
				return x && y;
			default:
				return x != y;
			}
		} else if constexpr (std::is_integral<T>::value) {
			return bin2_int<T>(op, x, y);
		} else {
			return bin2_float<T>(op, x, y);
		}
	}
};

/* logical_and, logical_or, logical_xor: bool results. */
template <typename T> struct Logical2Op {
	template <int K> using in_t = T;
	using out_t = bool;
	int op;

	TN_HD bool operator()(T a, T b) const
	{
		bool x = widen(a) != 0, y = widen(b) != 0;
		switch (op) {
		case TN_BIN2_LOGICAL_AND:
			return x && y;
		case TN_BIN2_LOGICAL_OR:
			return x || y;
		default:
			return x != y;
		}
	}
};

} /* namespace tn_cuda */

#endif /* TN_CUDA_OPS_CUH */
