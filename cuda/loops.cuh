/* SPDX-License-Identifier: MIT */
/*
 * The element-wise loops, as ATen's Loops.cuh, CUDALoops.cuh and MemoryAccess.cuh: a plan
 * (already split to 32-bit offsets) runs one of three per-thread bodies,
 *
 * - vectorised: every operand contiguous (one dimension of stride itemsize) in the functor's
 *   own storage types; each thread moves LOOPS aligned vectors of VEC elements (16 bytes of
 *   the widest operand, fewer when a pointer is not aligned to that, as can_vectorize_up_to)
 *   per operand; the block's tail, when numel is not a multiple of its work, goes element by
 *   element;
 * - one-dimensional: any 1-D plan, casting where dtypes differ: UNROLL elements per thread,
 *   offsets index * stride (no division);
 * - strided: the same with an OffsetCalculator (a division per dimension).
 *
 * A scalar input (is_scalar) travels converted in the context and is never loaded. Each
 * kernel is a thin __global__ wrapper over a __host__ __device__ per-thread body, so that the
 * host emulation (launch with Mode::emulate) runs the very same code for every (block,
 * thread) of the grid the device would run, serially.
 */
#ifndef TN_CUDA_LOOPS_CUH
#define TN_CUDA_LOOPS_CUH

#include "offset.cuh"
#include "ops.cuh"

namespace tn_cuda {

enum class Mode { device, emulate };

constexpr int kThreads = 128; /* threads per block of the element-wise kernels */
constexpr int kUnroll = 4;    /* elements per thread of the casting/strided bodies */
constexpr int kLoops = 2;     /* vectors per thread and operand of the vectorised body */

template <typename Op, int K> using in_at = typename Op::template in_t<K>;

template <typename T, int N> struct alignas(sizeof(T) * N) avec {
	T val[N];
};

/* The context of an element-wise launch: NIN inputs and one output (operand 0). */
template <typename Op, int NIN> struct ElemCtx {
	Op op;
	char *data[NIN + 1];
	int dt[NIN + 1];
	int32_t stride0[NIN + 1]; /* the 1-D bodies' byte strides */
	uint64_t scal[NIN > 0 ? NIN : 1]; /* scalar inputs, in in_t<K>, as bits */
	uint32_t scalar_mask;	  /* bit K: input K is a scalar */
	uint32_t numel;
	OffsetCalculator<NIN + 1> oc;
};

template <typename T> TN_HD T from_bits(uint64_t bits)
{
	T v;
	memcpy(&v, &bits, sizeof(T));
	return v;
}

/* Input K at byte offset @off, converted to in_t<K>. */
template <int K, typename Op, int NIN>
TN_HD in_at<Op, K> load_in(const ElemCtx<Op, NIN> &c, int32_t off)
{
	using A = in_at<Op, K>;
	if (c.scalar_mask & (1u << K))
		return from_bits<A>(c.scal[K]);
	return load_as<A>(c.data[K + 1] + off, c.dt[K + 1]);
}

/* The functor on the inputs at offsets o[1..NIN]. */
template <typename Op, int NIN, typename Offs>
TN_HD typename Op::out_t apply(const ElemCtx<Op, NIN> &c, const Offs &o)
{
	if constexpr (NIN == 0)
		return c.op();
	else if constexpr (NIN == 1)
		return c.op(load_in<0>(c, o[1]));
	else if constexpr (NIN == 2)
		return c.op(load_in<0>(c, o[1]), load_in<1>(c, o[2]));
	else
		return c.op(load_in<0>(c, o[1]), load_in<1>(c, o[2]), load_in<2>(c, o[3]));
}

template <int N> struct OffArr {
	int32_t v[N];
	TN_HD int32_t operator[](int k) const
	{
		return v[k];
	}
};

/* Casting/strided body: element base + j * nthreads + tid for j < kUnroll, as ATen's
 * unrolled_elementwise_kernel (all loads and computations first, then the stores). */
template <bool ONE_DIM, typename Op, int NIN>
TN_HD void unrolled_thread(const ElemCtx<Op, NIN> &c, uint32_t block, uint32_t tid)
{
	using R = typename Op::out_t;
	const uint32_t base = block * (uint32_t)(kThreads * kUnroll);
	R res[kUnroll];
	int32_t out_off[kUnroll];
#pragma unroll
	for (int j = 0; j < kUnroll; j++) {
		const uint32_t idx = base + (uint32_t)j * kThreads + tid;
		if (idx >= c.numel)
			break;
		OffArr<NIN + 1> o;
		if constexpr (ONE_DIM) {
#pragma unroll
			for (int k = 0; k <= NIN; k++)
				o.v[k] = (int32_t)(idx * (uint32_t)c.stride0[k]);
		} else {
			Offsets<NIN + 1> g = c.oc.get(idx);
#pragma unroll
			for (int k = 0; k <= NIN; k++)
				o.v[k] = g.v[k];
		}
		out_off[j] = o.v[0];
		res[j] = apply(c, o);
	}
#pragma unroll
	for (int j = 0; j < kUnroll; j++) {
		const uint32_t idx = base + (uint32_t)j * kThreads + tid;
		if (idx >= c.numel)
			break;
		store_as<R>(c.data[0] + out_off[j], c.dt[0], res[j]);
	}
}

/* Vectorised body: kLoops vectors of VEC elements per operand, at element
 * base + (l * nthreads + tid) * VEC; a partial block goes element by element. */
template <int VEC, typename Op, int NIN>
TN_HD void vectorized_thread(const ElemCtx<Op, NIN> &c, uint32_t block, uint32_t tid)
{
	using R = typename Op::out_t;
	constexpr uint32_t work = (uint32_t)kThreads * VEC * kLoops;
	const uint32_t base = block * work;
	if (c.numel - base < work) {
		for (int j = 0; j < VEC * kLoops; j++) {
			const uint32_t idx = base + (uint32_t)j * kThreads + tid;
			if (idx >= c.numel)
				return;
			OffArr<NIN + 1> o;
#pragma unroll
			for (int k = 0; k <= NIN; k++)
				o.v[k] = (int32_t)(idx * (uint32_t)c.stride0[k]);
			*(R *)(c.data[0] + o.v[0]) = apply(c, o);
		}
		return;
	}
	avec<in_at<Op, 0>, VEC> v0[kLoops];
	avec<in_at<Op, 1>, VEC> v1[kLoops];
	avec<in_at<Op, 2>, VEC> v2[kLoops];
#pragma unroll
	for (int l = 0; l < kLoops; l++) {
		const uint32_t e = base + ((uint32_t)l * kThreads + tid) * VEC;
		if constexpr (NIN > 0)
			if (!(c.scalar_mask & 1u))
				v0[l] = ((const avec<in_at<Op, 0>, VEC> *)c.data[1])[e / VEC];
		if constexpr (NIN > 1)
			if (!(c.scalar_mask & 2u))
				v1[l] = ((const avec<in_at<Op, 1>, VEC> *)c.data[2])[e / VEC];
		if constexpr (NIN > 2)
			if (!(c.scalar_mask & 4u))
				v2[l] = ((const avec<in_at<Op, 2>, VEC> *)c.data[3])[e / VEC];
	}
#pragma unroll
	for (int l = 0; l < kLoops; l++) {
		const uint32_t e = base + ((uint32_t)l * kThreads + tid) * VEC;
		avec<R, VEC> r;
#pragma unroll
		for (int i = 0; i < VEC; i++) {
			if constexpr (NIN == 0) {
				r.val[i] = c.op();
			} else {
				in_at<Op, 0> a = (c.scalar_mask & 1u)
							 ? from_bits<in_at<Op, 0>>(c.scal[0])
							 : v0[l].val[i];
				if constexpr (NIN == 1) {
					r.val[i] = c.op(a);
				} else {
					in_at<Op, 1> b = (c.scalar_mask & 2u)
								 ? from_bits<in_at<Op, 1>>(c.scal[1])
								 : v1[l].val[i];
					if constexpr (NIN == 2) {
						r.val[i] = c.op(a, b);
					} else {
						in_at<Op, 2> d =
							(c.scalar_mask & 4u)
								? from_bits<in_at<Op, 2>>(c.scal[2])
								: v2[l].val[i];
						r.val[i] = c.op(a, b, d);
					}
				}
			}
		}
		((avec<R, VEC> *)c.data[0])[e / VEC] = r;
	}
}

template <int VEC, typename Op, int NIN>
__global__ void __launch_bounds__(kThreads) vectorized_kernel(const ElemCtx<Op, NIN> c)
{
	vectorized_thread<VEC>(c, blockIdx.x, threadIdx.x);
}

template <bool ONE_DIM, typename Op, int NIN>
__global__ void __launch_bounds__(kThreads) unrolled_kernel(const ElemCtx<Op, NIN> c)
{
	unrolled_thread<ONE_DIM>(c, blockIdx.x, threadIdx.x);
}

inline uint32_t ceil_div(uint64_t a, uint64_t b)
{
	return (uint32_t)((a + b - 1) / b);
}

/* The host's and the device's launches of a per-thread body over @grid blocks. */
template <int VEC, typename Op, int NIN>
int launch_vectorized(const ElemCtx<Op, NIN> &c, Mode mode, cudaStream_t stream)
{
	const uint32_t grid = ceil_div(c.numel, (uint64_t)kThreads * VEC * kLoops);
	if (mode == Mode::emulate) {
		for (uint32_t b = 0; b < grid; b++)
			for (uint32_t t = 0; t < (uint32_t)kThreads; t++)
				vectorized_thread<VEC>(c, b, t);
		return 0;
	}
	vectorized_kernel<VEC><<<grid, kThreads, 0, stream>>>(c);
	return (int)cudaGetLastError();
}

template <bool ONE_DIM, typename Op, int NIN>
int launch_unrolled(const ElemCtx<Op, NIN> &c, Mode mode, cudaStream_t stream)
{
	const uint32_t grid = ceil_div(c.numel, (uint64_t)kThreads * kUnroll);
	if (mode == Mode::emulate) {
		for (uint32_t b = 0; b < grid; b++)
			for (uint32_t t = 0; t < (uint32_t)kThreads; t++)
				unrolled_thread<ONE_DIM>(c, b, t);
		return 0;
	}
	unrolled_kernel<ONE_DIM><<<grid, kThreads, 0, stream>>>(c);
	return (int)cudaGetLastError();
}

/* The widest storage type among the functor's operands. */
template <typename Op, int NIN> constexpr int max_size()
{
	int m = (int)sizeof(typename Op::out_t);
	if constexpr (NIN > 0)
		m = m > (int)sizeof(in_at<Op, 0>) ? m : (int)sizeof(in_at<Op, 0>);
	if constexpr (NIN > 1)
		m = m > (int)sizeof(in_at<Op, 1>) ? m : (int)sizeof(in_at<Op, 1>);
	if constexpr (NIN > 2)
		m = m > (int)sizeof(in_at<Op, 2>) ? m : (int)sizeof(in_at<Op, 2>);
	return m;
}

template <typename Op, int K> constexpr int size_at()
{
	if constexpr (K == 0)
		return (int)sizeof(typename Op::out_t);
	else
		return (int)sizeof(in_at<Op, K - 1>);
}

/*
 * Run @op on a plan that fits 32-bit offsets: NIN inputs (ops 1..NIN), output ops[0]. Picks
 * the body: vectorised when every operand is contiguous in the functor's own types, 1-D when
 * the plan has one dimension, strided otherwise.
 */
template <typename Op, int NIN>
int run_elementwise(const tn__cuda_plan *p, const Op &op, Mode mode)
{
	static_assert(NIN <= 3, "at most 3 inputs");
	if (p->numel == 0)
		return 0;
	ElemCtx<Op, NIN> c;
	memset((void *)&c, 0, sizeof(c));
	c.op = op;
	c.numel = (uint32_t)p->numel;
	c.scalar_mask = 0;
	cudaStream_t stream = (cudaStream_t)p->stream;

	/* Dims of size 1 move nothing: the plan's dimensionality is that of the others. */
	int ndim = 0, last = 0;
	for (int d = 0; d < p->ndim; d++)
		if (p->shape[d] != 1) {
			ndim++;
			last = d;
		}
	if (ndim > TN_CUDA_MAX_DIMS)
		return (int)cudaErrorNotSupported;

	bool same = true, contig = ndim <= 1;
	int sizes[NIN + 1] = { size_at<Op, 0>() };
	if constexpr (NIN > 0)
		sizes[1] = size_at<Op, 1>();
	if constexpr (NIN > 1)
		sizes[2] = size_at<Op, 2>();
	if constexpr (NIN > 2)
		sizes[3] = size_at<Op, 3>();
	int native[NIN + 1] = { dtype_of<typename Op::out_t>::value };
	if constexpr (NIN > 0)
		native[1] = dtype_of<in_at<Op, 0>>::value;
	if constexpr (NIN > 1)
		native[2] = dtype_of<in_at<Op, 1>>::value;
	if constexpr (NIN > 2)
		native[3] = dtype_of<in_at<Op, 2>>::value;

	const int64_t *strides[NIN + 1];
	for (int k = 0; k <= NIN; k++) {
		const tn__cuda_operand *o = &p->ops[k];
		c.data[k] = o->data;
		c.dt[k] = o->dtype;
		strides[k] = o->strides;
		c.stride0[k] = ndim == 0 ? 0 : (int32_t)o->strides[last];
		if (k > 0 && o->is_scalar) {
			c.scalar_mask |= 1u << (k - 1);
			unsigned char v[8] = { 0 };
			switch (k) {
			case 1:
				if constexpr (NIN > 0) {
					in_at<Op, 0> x = load_as<in_at<Op, 0>>((const char *)o->scalar.bytes, o->dtype);
					memcpy(v, &x, sizeof(x));
				}
				break;
			case 2:
				if constexpr (NIN > 1) {
					in_at<Op, 1> x = load_as<in_at<Op, 1>>((const char *)o->scalar.bytes, o->dtype);
					memcpy(v, &x, sizeof(x));
				}
				break;
			default:
				if constexpr (NIN > 2) {
					in_at<Op, 2> x = load_as<in_at<Op, 2>>((const char *)o->scalar.bytes, o->dtype);
					memcpy(v, &x, sizeof(x));
				}
				break;
			}
			memcpy(&c.scal[k - 1], v, 8);
			continue;
		}
		same &= o->dtype == native[k];
		contig &= ndim == 0 || o->strides[last] == sizes[k];
	}
	if (ndim > 1)
		c.oc.init(p->ndim, p->shape, strides);

	if (same && contig) {
		/* can_vectorize_up_to: 16 bytes of the widest operand, halved until every
		 * pointer is aligned to its vector. */
		constexpr int maxvec = 16 / max_size<Op, NIN>();
		int vec = maxvec;
		for (int k = 0; k <= NIN; k++) {
			if (k > 0 && (c.scalar_mask & (1u << (k - 1))))
				continue;
			while (vec > 1 && (uintptr_t)c.data[k] % (uintptr_t)(vec * sizes[k]) != 0)
				vec /= 2;
		}
		if constexpr (maxvec >= 16)
			if (vec >= 16)
				return launch_vectorized<16>(c, mode, stream);
		if constexpr (maxvec >= 8)
			if (vec >= 8)
				return launch_vectorized<8>(c, mode, stream);
		if constexpr (maxvec >= 4)
			if (vec >= 4)
				return launch_vectorized<4>(c, mode, stream);
		if constexpr (maxvec >= 2)
			if (vec >= 2)
				return launch_vectorized<2>(c, mode, stream);
	}
	if (ndim <= 1)
		return launch_unrolled<true>(c, mode, stream);
	return launch_unrolled<false>(c, mode, stream);
}

/* Fam<T>::run(args...) with T the storage type of @dt (ATen's AT_DISPATCH). */
template <template <typename> class Fam, typename... Args> int dispatch(int dt, Args &&...args)
{
	switch (dt) {
	case TN_BOOL:
		return Fam<bool>::run(args...);
	case TN_UINT8:
		return Fam<uint8_t>::run(args...);
	case TN_INT8:
		return Fam<int8_t>::run(args...);
	case TN_INT16:
		return Fam<int16_t>::run(args...);
	case TN_INT32:
		return Fam<int32_t>::run(args...);
	case TN_INT64:
		return Fam<int64_t>::run(args...);
	case TN_FLOAT16:
		return Fam<half_t>::run(args...);
	case TN_BFLOAT16:
		return Fam<bf16_t>::run(args...);
	case TN_FLOAT32:
		return Fam<float>::run(args...);
	case TN_FLOAT64:
		return Fam<double>::run(args...);
	default:
		return (int)cudaErrorInvalidValue;
	}
}

/* The plan split to 32-bit offsets, each part run by @Runner::run(sub). */
template <typename Fn> int for_each_32bit(const tn__cuda_plan *p, Fn &fn)
{
	if (tn__cuda_plan_fits_32bit(p))
		return p->numel == 0 ? 0 : fn(p, false);
	return tn__cuda_plan_split(
		p,
		[](void *ctx, const tn__cuda_plan *sub, bool acc) -> int {
			return (*(Fn *)ctx)(sub, acc);
		},
		&fn);
}

/* @f over the plan, split to 32-bit offsets first when it must be. */
template <typename Op, int NIN> int run_op(const tn__cuda_plan *p, const Op &f, Mode mode)
{
	auto fn = [&](const tn__cuda_plan *sub, bool) {
		return run_elementwise<Op, NIN>(sub, f, mode);
	};
	return for_each_32bit(p, fn);
}

} /* namespace tn_cuda */

#endif /* TN_CUDA_LOOPS_CUH */
