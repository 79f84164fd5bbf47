/* SPDX-License-Identifier: MIT */
/*
 * What every CUDA kernel source shares: the host-and-device qualifier, the 16-bit float types
 * and their conversions, and the conversions between the 10 dtypes with the CPU cast kernel's
 * semantics (libtensor/kernels/copy_kernel.c), so that a kernel and the host emulation of it
 * (emulate.cu) compute the same bits as the CPU.
 *
 * Conversions, as the CPU's:
 * - float16 and bfloat16 go through float (c10::Half, c10::BFloat16); rounding to them is
 *   round-to-nearest-even, and a NaN keeps its top payload bits (tn_half_from_float and
 *   tn_bfloat16_from_float), which is not what CUDA's __float2half gives for NaN, so the
 *   conversions here are the library's integer ones (on the device the finite cases take the
 *   hardware's cvt, which rounds the same way).
 * - a floating value converts to an integer with truncation through int64 (int64, uint8) or
 *   int32 (int32, int16, int8), then wraps; a NaN or a value outside that range gives INT64_MIN
 *   or INT32_MIN (x86's cvttsd2si/cvttss2si "integer indefinite"), where a GPU's cvt would
 *   saturate.
 * - to bool: != 0 (NaN is true).
 */
#ifndef TN_CUDA_COMMON_CUH
#define TN_CUDA_COMMON_CUH

#include <stdint.h>
#include <string.h>
#include <type_traits>

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "plan.h"

#define TN_HD __host__ __device__ __forceinline__

namespace tn_cuda {

/* The element types, in dtype order. half_t and bf16_t hold bits (as tn_half does) so that
 * host code can use them without the CUDA headers' host operators. */
struct half_t {
	uint16_t bits;
};
struct bf16_t {
	uint16_t bits;
};

TN_HD uint32_t f2u(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
#endif
}

TN_HD float u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;
	memcpy(&f, &u, 4);
	return f;
#endif
}

/* tn_half_from_float, bit for bit. */
TN_HD uint16_t half_bits_from_float(float value)
{
	uint32_t x = f2u(value);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u)
		return sign | (ax > 0x7f800000u ? (uint16_t)(0x7e00u | ((ax >> 13) & 0x3ffu))
						: (uint16_t)0x7c00u);
#ifdef __CUDA_ARCH__
	/* Finite: the hardware rounds to nearest even, as the integer code below. */
	return __half_as_ushort(__float2half_rn(value));
#else
	if (ax >= 0x477ff000u)
		return sign | 0x7c00u;
	if (ax < 0x38800000u) {
		uint32_t e = ax >> 23;
		if (e == 0)
			return sign;
		uint32_t m = (ax & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - e;
		if (shift >= 25)
			return sign;
		uint32_t r = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (r & 1u)))
			r++;
		return sign | (uint16_t)r;
	}
	uint32_t r = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
	uint32_t rem = ax & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
		r++;
	return sign | (uint16_t)r;
#endif
}

/* tn_half_to_float, bit for bit (NaN payloads included). */
TN_HD float half_bits_to_float(uint16_t bits)
{
	uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
	uint32_t exp = (bits >> 10) & 0x1fu;
	uint32_t man = bits & 0x3ffu;
	if (exp == 0x1f)
		return u2f(sign | 0x7f800000u | (man << 13));
#ifdef __CUDA_ARCH__
	return __half2float(__ushort_as_half(bits)); /* exact */
#else
	if (exp == 0) {
		if (man == 0)
			return u2f(sign);
		exp = 113;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		man &= 0x3ffu;
		return u2f(sign | (exp << 23) | (man << 13));
	}
	return u2f(sign | ((exp + 112u) << 23) | (man << 13));
#endif
}

/* tn_bfloat16_from_float, bit for bit. */
TN_HD uint16_t bf16_bits_from_float(float value)
{
	uint32_t x = f2u(value);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x0040u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

TN_HD float bf16_bits_to_float(uint16_t bits)
{
	return u2f((uint32_t)bits << 16);
}

/* Bytes per element of a dtype (tn_dtype_size without the library). */
TN_HD int dtype_size(int dt)
{
	return dt <= TN_INT8 ? 1 : dt == TN_INT16 || dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? 2
				 : dt == TN_INT32 || dt == TN_FLOAT32 ? 4 : 8;
}

/* The compute type of a dtype: 16-bit floats compute in float. */
template <typename T> struct acc_of {
	using type = T;
};
template <> struct acc_of<half_t> {
	using type = float;
};
template <> struct acc_of<bf16_t> {
	using type = float;
};

template <typename T> struct dtype_of;
template <> struct dtype_of<bool> {
	static constexpr tn_dtype value = TN_BOOL;
};
template <> struct dtype_of<uint8_t> {
	static constexpr tn_dtype value = TN_UINT8;
};
template <> struct dtype_of<int8_t> {
	static constexpr tn_dtype value = TN_INT8;
};
template <> struct dtype_of<int16_t> {
	static constexpr tn_dtype value = TN_INT16;
};
template <> struct dtype_of<int32_t> {
	static constexpr tn_dtype value = TN_INT32;
};
template <> struct dtype_of<int64_t> {
	static constexpr tn_dtype value = TN_INT64;
};
template <> struct dtype_of<half_t> {
	static constexpr tn_dtype value = TN_FLOAT16;
};
template <> struct dtype_of<bf16_t> {
	static constexpr tn_dtype value = TN_BFLOAT16;
};
template <> struct dtype_of<float> {
	static constexpr tn_dtype value = TN_FLOAT32;
};
template <> struct dtype_of<double> {
	static constexpr tn_dtype value = TN_FLOAT64;
};

/* A floating value to int64 as x86's truncating conversion: NaN and out-of-range values give
 * INT64_MIN. */
template <typename F> TN_HD int64_t f2i64(F v)
{
	if (!(v >= (F)-9223372036854775808.0 && v < (F)9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)v;
}

/* The same into int32: NaN and values outside int32 give INT32_MIN. */
template <typename F> TN_HD int32_t f2i32(F v)
{
	if (!(v > (F)-2147483649.0 && v < (F)2147483648.0))
		return INT32_MIN;
	return (int32_t)v;
}

/* The compute value of a stored element: 16-bit floats widen to float. */
template <typename T> TN_HD typename acc_of<T>::type widen(T v)
{
	if constexpr (std::is_same<T, half_t>::value)
		return half_bits_to_float(v.bits);
	else if constexpr (std::is_same<T, bf16_t>::value)
		return bf16_bits_to_float(v.bits);
	else
		return v;
}

/*
 * to<D>(v): the CPU cast kernel's conversion of a value of type S (a C type or the compute type
 * float of a 16-bit float) to the storage type D.
 */
template <typename D, typename S> TN_HD D to(S v)
{
	if constexpr (std::is_same<D, S>::value) {
		return v;
	} else if constexpr (std::is_same<S, half_t>::value || std::is_same<S, bf16_t>::value) {
		return to<D>(widen(v));
	} else if constexpr (std::is_same<D, bool>::value) {
		return v != (S)0;
	} else if constexpr (std::is_same<D, half_t>::value) {
		return half_t{ half_bits_from_float((float)v) };
	} else if constexpr (std::is_same<D, bf16_t>::value) {
		return bf16_t{ bf16_bits_from_float((float)v) };
	} else if constexpr (std::is_integral<D>::value && std::is_floating_point<S>::value) {
		if constexpr (std::is_same<D, int64_t>::value || std::is_same<D, uint8_t>::value)
			return (D)f2i64(v);
		else
			return (D)f2i32(v);
	} else {
		return (D)v;
	}
}

/* Store a compute value (float for 16-bit floats) as storage type T. */
template <typename T, typename A> TN_HD T narrow(A v)
{
	return to<T>(v);
}

/*
 * Dynamic casting: load an element of dtype @dt as compute type A, and store a compute value A
 * as dtype @dt, each a conversion as the CPU's (through the element's compute type: a half
 * converts to float first, then to A).
 */
template <typename A> TN_HD A load_as(const char *p, int dt)
{
	if (dt == dtype_of<A>::value)
		return *(const A *)p; /* no conversion: the bits as they are */
	switch (dt) {
	case TN_BOOL:
		return to<A>(*(const bool *)p);
	case TN_UINT8:
		return to<A>(*(const uint8_t *)p);
	case TN_INT8:
		return to<A>(*(const int8_t *)p);
	case TN_INT16:
		return to<A>(*(const int16_t *)p);
	case TN_INT32:
		return to<A>(*(const int32_t *)p);
	case TN_INT64:
		return to<A>(*(const int64_t *)p);
	case TN_FLOAT16:
		return to<A>(half_bits_to_float(*(const uint16_t *)p));
	case TN_BFLOAT16:
		return to<A>(bf16_bits_to_float(*(const uint16_t *)p));
	case TN_FLOAT32:
		return to<A>(*(const float *)p);
	default:
		return to<A>(*(const double *)p);
	}
}

/* to<D>(v) where D is a 16-bit float's compute value is not a storage type: store_as handles
 * the 16-bit floats itself. */
template <typename A> TN_HD void store_as(char *p, int dt, A v)
{
	if (dt == dtype_of<A>::value) {
		*(A *)p = v;
		return;
	}
	switch (dt) {
	case TN_BOOL:
		*(bool *)p = to<bool>(v);
		return;
	case TN_UINT8:
		*(uint8_t *)p = to<uint8_t>(v);
		return;
	case TN_INT8:
		*(int8_t *)p = to<int8_t>(v);
		return;
	case TN_INT16:
		*(int16_t *)p = to<int16_t>(v);
		return;
	case TN_INT32:
		*(int32_t *)p = to<int32_t>(v);
		return;
	case TN_INT64:
		*(int64_t *)p = to<int64_t>(v);
		return;
	case TN_FLOAT16:
		*(uint16_t *)p = to<half_t>(v).bits;
		return;
	case TN_BFLOAT16:
		*(uint16_t *)p = to<bf16_t>(v).bits;
		return;
	case TN_FLOAT32:
		*(float *)p = to<float>(v);
		return;
	default:
		*(double *)p = to<double>(v);
		return;
	}
}

} /* namespace tn_cuda */

#endif /* TN_CUDA_COMMON_CUH */
