/* SPDX-License-Identifier: MIT */
/*
 * Index arithmetic of the kernels, as ATen's IntegerDivider.cuh and OffsetCalculator.cuh: a
 * fast unsigned division by a divisor known only at run time (a multiply-high and a shift,
 * computed once on the host), and the byte offsets of each operand from a linear index over
 * the plan's shape (dimension 0 fastest). 32-bit throughout: the launcher splits plans whose
 * offsets do not fit (tn__cuda_plan_split) first.
 */
#ifndef TN_CUDA_OFFSET_CUH
#define TN_CUDA_OFFSET_CUH

#include "common.cuh"

namespace tn_cuda {

/* The most dimensions a kernel's offset calculator takes (ATen's MAX_DIMS); plans with more
 * are refused (the iterator coalesces, so real plans have few). */
#define TN_CUDA_MAX_DIMS 16

/*
 * n / d for 32-bit unsigned n and a divisor d >= 1 (Granlund and Montgomery; Hacker's Delight
 * 10-9, as ATen's IntDivider<unsigned int>): with s = ceil(log2 d) and
 * m = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, m) + n) >> s, the addition in 64 bits
 * so that it cannot overflow.
 */
struct IntDivider {
	uint32_t divisor;
	uint32_t m1;
	uint32_t shift;

	IntDivider() = default;
	__host__ explicit IntDivider(uint32_t d) : divisor(d)
	{
		for (shift = 0; shift < 32; shift++)
			if ((1ull << shift) >= d)
				break;
		uint64_t one = 1;
		uint64_t magic = ((one << 32) * ((one << shift) - d)) / d + 1;
		m1 = (uint32_t)magic; /* magic < 2^32 since 2^shift < 2d */
	}

	TN_HD uint32_t div(uint32_t n) const
	{
#ifdef __CUDA_ARCH__
		uint32_t t = __umulhi(n, m1);
#else
		uint32_t t = (uint32_t)(((uint64_t)n * m1) >> 32);
#endif
		return (uint32_t)(((uint64_t)t + n) >> shift);
	}

	TN_HD void divmod(uint32_t n, uint32_t &q, uint32_t &r) const
	{
		q = div(n);
		r = n - q * divisor;
	}
};

/* Byte offsets of NARGS operands; each fits in int32 (the split's guarantee), computed modulo
 * 2^32 and read back as signed so that negative strides work too. */
template <int NARGS> struct Offsets {
	int32_t v[NARGS];
};

template <int NARGS> struct OffsetCalculator {
	int dims;
	IntDivider sizes[TN_CUDA_MAX_DIMS];
	uint32_t strides[TN_CUDA_MAX_DIMS][NARGS];

	/* From @ndim dims of @shape and per-argument byte strides strides[arg][dim]. Dims of
	 * size 1 are dropped (they move nothing). */
	__host__ void init(int ndim, const int64_t *shape, const int64_t *const *arg_strides)
	{
		dims = 0;
		for (int d = 0; d < ndim; d++) {
			if (shape[d] == 1)
				continue;
			/* (a size 0 has no elements to locate) */
			sizes[dims] = IntDivider(shape[d] ? (uint32_t)shape[d] : 1u);
			for (int k = 0; k < NARGS; k++)
				strides[dims][k] = (uint32_t)arg_strides[k][d];
			dims++;
		}
	}

	TN_HD Offsets<NARGS> get(uint32_t linear) const
	{
		Offsets<NARGS> o;
		uint32_t acc[NARGS];
#pragma unroll
		for (int k = 0; k < NARGS; k++)
			acc[k] = 0;
#pragma unroll
		for (int d = 0; d < TN_CUDA_MAX_DIMS; d++) {
			if (d == dims)
				break;
			uint32_t q, r;
			if (d == dims - 1) { /* the slowest dimension: the rest is its index */
				q = 0;
				r = linear;
			} else {
				sizes[d].divmod(linear, q, r);
			}
#pragma unroll
			for (int k = 0; k < NARGS; k++)
				acc[k] += r * strides[d][k];
			linear = q;
		}
#pragma unroll
		for (int k = 0; k < NARGS; k++)
			o.v[k] = (int32_t)acc[k];
		return o;
	}
};

} /* namespace tn_cuda */

#endif /* TN_CUDA_OFFSET_CUH */
