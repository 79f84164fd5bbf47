/* SPDX-License-Identifier: MIT */
/*
 * Reductions (tn__cuda_reduce, plan.h), in the manner of ATen's Reduce.cuh: the plan's
 * dimensions are parted into reduced ones (output stride 0) and kept ones, each with its own
 * OffsetCalculator, and one of two schemes runs:
 *
 * - thread per output: each thread reduces one output serially (few elements per output, or
 *   a reduction over an outer dimension, whose neighbouring outputs are neighbours in memory
 *   so that a warp's loads coalesce);
 * - block per output: kThreadsR threads stride through the output's elements (four
 *   accumulators each, for loads in flight), then combine through warp shuffles and shared
 *   memory; when there are few outputs, each is cut into several blocks (about 8 blocks per SM
 *   in all, so a single output of 1e8 elements occupies the whole GPU) which write partial
 *   results to a workspace, combined per output by a second kernel in block order
 *   (deterministic, no atomics).
 *
 * Accumulation is in the plan's common dtype, float for float16 and bfloat16 (the CPU's
 * accumulators); all and any accumulate "nonzero" in bool. max and min propagate NaN as the
 * CPU does. The result is divided by @divisor when it is not 1 (mean) and converted to the
 * output's dtype. The per-thread accumulation and the block's combining tree are
 * __host__ __device__ code that the emulation runs for every thread and block as the device
 * would, in the same order, so the emulated bits are the kernel's.
 */
#include "launch.cuh"

namespace tn_cuda {

constexpr int kThreadsR = 256; /* threads of the block-per-output scheme */
constexpr int kEmuSMs = 132;   /* the SM count the emulation assumes (an H100 SXM) */

/* The combining operations, by accumulator type A. */
template <typename A> struct SumR {
	static TN_HD A ident()
	{
		return (A)0;
	}
	static TN_HD A comb(A a, A b)
	{
		if constexpr (std::is_same<A, bool>::value)
			return a || b;
		else if constexpr (std::is_integral<A>::value)
			return (A)(typename uns<A>::type)((uint64_t)(int64_t)a + (uint64_t)(int64_t)b);
		else
			return a + b;
	}
};

template <typename A> struct ProdR {
	static TN_HD A ident()
	{
		return (A)1;
	}
	static TN_HD A comb(A a, A b)
	{
		if constexpr (std::is_same<A, bool>::value)
			return a && b;
		else if constexpr (std::is_integral<A>::value)
			return (A)(typename uns<A>::type)((uint64_t)(int64_t)a * (uint64_t)(int64_t)b);
		else
			return a * b;
	}
};

template <typename A> TN_HD A lowest()
{
	if constexpr (std::is_floating_point<A>::value)
		return -(A)INFINITY;
	else if constexpr (std::is_same<A, bool>::value)
		return false;
	else if constexpr (std::is_signed<A>::value)
		return (A)((typename uns<A>::type)1 << (sizeof(A) * 8 - 1));
	else
		return (A)0;
}

template <typename A> TN_HD A highest()
{
	if constexpr (std::is_floating_point<A>::value)
		return (A)INFINITY;
	else if constexpr (std::is_same<A, bool>::value)
		return true;
	else if constexpr (std::is_signed<A>::value)
		return (A)(((typename uns<A>::type)1 << (sizeof(A) * 8 - 1)) - 1);
	else
		return (A)~(A)0;
}

/* NaN wins and stays (a != a), as the CPU's MAXF and MINF. */
template <typename A> struct MaxR {
	static TN_HD A ident()
	{
		return lowest<A>();
	}
	static TN_HD A comb(A a, A b)
	{
		return (a >= b || a != a) ? a : b;
	}
};

template <typename A> struct MinR {
	static TN_HD A ident()
	{
		return highest<A>();
	}
	static TN_HD A comb(A a, A b)
	{
		return (a <= b || a != a) ? a : b;
	}
};

template <typename A> struct AllR {
	static TN_HD A ident()
	{
		return true;
	}
	static TN_HD A comb(A a, A b)
	{
		return a && b;
	}
};

template <typename A> struct AnyR {
	static TN_HD A ident()
	{
		return false;
	}
	static TN_HD A comb(A a, A b)
	{
		return a || b;
	}
};

template <typename A> struct ReduceCtx {
	const char *in;
	char *out;
	int in_dt, out_dt;
	uint32_t nred, nout; /* elements per output, outputs */
	uint32_t splits;     /* blocks per output */
	uint32_t chunk;	     /* elements per block */
	A *ws;		     /* splits > 1: partial results [nout][splits] */
	A divisor;
	bool divide, accumulate;
	OffsetCalculator<1> red; /* input offsets along the reduced dims */
	OffsetCalculator<2> kept; /* output and input offsets along the kept dims */
};

/* The output's value: divided (mean), combined with what an earlier part wrote, stored. */
template <typename R, typename A> TN_HD void finish(const ReduceCtx<A> &c, uint32_t o, A v)
{
	Offsets<2> ko = c.kept.get(o);
	char *p = c.out + ko.v[0];
	if constexpr (std::is_floating_point<A>::value)
		if (c.divide)
			v = v / c.divisor;
	if (c.accumulate)
		v = R::comb(load_as<A>(p, c.out_dt), v);
	store_as<A>(p, c.out_dt, v);
}

/* Elements [begin, end) of output @o, every @step-th from @begin, four accumulators. */
template <typename R, typename A>
TN_HD A accumulate(const ReduceCtx<A> &c, int32_t in_base, uint32_t begin, uint32_t end,
		   uint32_t step)
{
	A acc[4] = { R::ident(), R::ident(), R::ident(), R::ident() };
	uint32_t r = begin;
	for (; r + 3 * step < end; r += 4 * step) {
#pragma unroll
		for (int k = 0; k < 4; k++) {
			int32_t off = in_base + c.red.get(r + k * step).v[0];
			acc[k] = R::comb(acc[k], load_as<A>(c.in + off, c.in_dt));
		}
	}
	for (; r < end; r += step)
		acc[0] = R::comb(acc[0], load_as<A>(c.in + in_base + c.red.get(r).v[0], c.in_dt));
	return R::comb(R::comb(acc[0], acc[1]), R::comb(acc[2], acc[3]));
}

/* Thread per output: thread @tid of block @block. */
template <typename R, typename A> TN_HD void column_thread(const ReduceCtx<A> &c, uint32_t block, uint32_t tid)
{
	uint32_t o = block * kThreadsR + tid;
	if (o >= c.nout)
		return;
	int32_t in_base = c.kept.get(o).v[1];
	A acc = R::ident();
	for (uint32_t r = 0; r < c.nred; r++)
		acc = R::comb(acc, load_as<A>(c.in + in_base + c.red.get(r).v[0], c.in_dt));
	finish<R>(c, o, acc);
}

template <typename R, typename A> __global__ void __launch_bounds__(kThreadsR) column_kernel(const ReduceCtx<A> c)
{
	column_thread<R>(c, blockIdx.x, threadIdx.x);
}

/* Block per output, the thread's part: output blockIdx.x, part blockIdx.y. */
template <typename R, typename A>
TN_HD A block_thread(const ReduceCtx<A> &c, uint32_t o, uint32_t part, uint32_t tid)
{
	uint32_t begin = part * c.chunk;
	uint32_t end = c.nred - begin < c.chunk ? c.nred : begin + c.chunk;
	int32_t in_base = c.kept.get(o).v[1];
	return accumulate<R>(c, in_base, begin + tid, end, kThreadsR);
}

/* The block's result (or partial result) of output @o, part @part. */
template <typename R, typename A> TN_HD void block_result(const ReduceCtx<A> &c, uint32_t o, uint32_t part, A v)
{
	if (c.splits == 1)
		finish<R>(c, o, v);
	else
		c.ws[(size_t)o * c.splits + part] = v;
}

#ifdef __CUDACC__
template <typename A> __device__ A shfl_down(A v, int offset)
{
	if constexpr (sizeof(A) == 8) {
		long long x;
		memcpy(&x, &v, 8);
		x = __shfl_down_sync(0xffffffffu, x, offset);
		memcpy(&v, &x, 8);
		return v;
	} else if constexpr (std::is_same<A, float>::value) {
		return __shfl_down_sync(0xffffffffu, v, offset);
	} else {
		int x = (int)v;
		return (A)__shfl_down_sync(0xffffffffu, x, offset);
	}
}
#endif

/* The combining tree of a block: within each warp, lane i takes lane i + 16, 8, 4, 2, 1;
 * then warp 0 the same over the warps' results. The host version runs it over the array of
 * the threads' values in the same order. */
template <typename R, typename A> void block_tree_host(A *v)
{
	A w[kThreadsR / 32];
	for (int warp = 0; warp < kThreadsR / 32; warp++) {
		A *l = v + warp * 32;
		for (int off = 16; off > 0; off /= 2)
			for (int i = 0; i + off < 32; i++)
				l[i] = R::comb(l[i], l[i + off]);
		w[warp] = l[0];
	}
	A l[32];
	for (int i = 0; i < 32; i++)
		l[i] = i < kThreadsR / 32 ? w[i] : R::ident();
	for (int off = 16; off > 0; off /= 2)
		for (int i = 0; i + off < 32; i++)
			l[i] = R::comb(l[i], l[i + off]);
	v[0] = l[0];
}

template <typename R, typename A> __global__ void __launch_bounds__(kThreadsR) block_kernel(const ReduceCtx<A> c)
{
#ifdef __CUDA_ARCH__
	__shared__ A warps[kThreadsR / 32];
	const uint32_t tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
	A v = block_thread<R>(c, blockIdx.x, blockIdx.y, tid);
	for (int off = 16; off > 0; off /= 2)
		v = R::comb(v, shfl_down(v, off));
	if (lane == 0)
		warps[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < kThreadsR / 32 ? warps[lane] : R::ident();
		for (int off = 16; off > 0; off /= 2)
			v = R::comb(v, shfl_down(v, off));
		if (lane == 0)
			block_result<R>(c, blockIdx.x, blockIdx.y, v);
	}
#endif
}

/* The parts of output @o, in order. */
template <typename R, typename A> TN_HD void combine_thread(const ReduceCtx<A> &c, uint32_t block, uint32_t tid)
{
	uint32_t o = block * kThreadsR + tid;
	if (o >= c.nout)
		return;
	A acc = R::ident();
	for (uint32_t k = 0; k < c.splits; k++)
		acc = R::comb(acc, c.ws[(size_t)o * c.splits + k]);
	finish<R>(c, o, acc);
}

template <typename R, typename A> __global__ void __launch_bounds__(kThreadsR) combine_kernel(const ReduceCtx<A> c)
{
	combine_thread<R>(c, blockIdx.x, threadIdx.x);
}

template <typename R, typename A>
int reduce_32bit(const tn__cuda_plan *p, double divisor, bool accumulate, Mode mode)
{
	ReduceCtx<A> c;
	memset((void *)&c, 0, sizeof(c));
	cudaStream_t stream = (cudaStream_t)p->stream;
	c.in = p->ops[1].data;
	c.out = p->ops[0].data;
	c.in_dt = p->ops[1].dtype;
	c.out_dt = p->ops[0].dtype;
	c.divisor = (A)divisor;
	c.divide = divisor != 1;
	c.accumulate = accumulate;

	/* Reduced dims (output stride 0) and kept dims, fastest first. */
	int64_t rshape[TN_MAX_DIMS], kshape[TN_MAX_DIMS];
	int64_t rs[TN_MAX_DIMS], ko[TN_MAX_DIMS], ki[TN_MAX_DIMS];
	int nr = 0, nk = 0;
	uint64_t NR = 1, NO = 1;
	for (int d = 0; d < p->ndim; d++) {
		if (p->shape[d] == 1)
			continue;
		if (p->ops[0].strides[d] == 0) {
			rshape[nr] = p->shape[d];
			rs[nr++] = p->ops[1].strides[d];
			NR *= (uint64_t)p->shape[d];
		} else {
			kshape[nk] = p->shape[d];
			ko[nk] = p->ops[0].strides[d];
			ki[nk++] = p->ops[1].strides[d];
			NO *= (uint64_t)p->shape[d];
		}
	}
	if (nr > TN_CUDA_MAX_DIMS || nk > TN_CUDA_MAX_DIMS)
		return (int)cudaErrorNotSupported;
	if (p->numel == 0)
		NR = 0; /* an empty reduced dim: every output is the identity */
	if (NO == 0)
		return 0;
	c.nred = (uint32_t)NR;
	c.nout = (uint32_t)NO;
	const int64_t *rsp[1] = { rs };
	const int64_t *ksp[2] = { ko, ki };
	c.red.init(nr, rshape, rsp);
	c.kept.init(nk, kshape, ksp);

	const bool contig = nr > 0 && rs[0] == (int64_t)dtype_size(c.in_dt);
	if (NR <= 64 || (!contig && NO >= 256)) {
		const uint32_t grid = ceil_div(NO, kThreadsR);
		if (mode == Mode::emulate) {
			for (uint32_t b = 0; b < grid; b++)
				for (uint32_t t = 0; t < (uint32_t)kThreadsR; t++)
					column_thread<R>(c, b, t);
			return 0;
		}
		column_kernel<R><<<grid, kThreadsR, 0, stream>>>(c);
		return (int)cudaGetLastError();
	}

	int sms = kEmuSMs;
	if (mode == Mode::device) {
		int dev = 0;
		cudaError_t e = cudaGetDevice(&dev);
		if (e == cudaSuccess)
			e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
		if (e != cudaSuccess)
			return (int)e;
	}
	/* About 8 blocks per SM in all; at least 16 elements per thread. */
	const uint64_t target = (uint64_t)sms * 8;
	uint64_t splits = (target + NO - 1) / NO;
	const uint64_t most = (NR + (uint64_t)kThreadsR * 16 - 1) / ((uint64_t)kThreadsR * 16);
	splits = splits < most ? splits : most;
	splits = splits < 65535 ? splits : 65535;
	if (splits < 1)
		splits = 1;
	c.chunk = (uint32_t)((NR + splits - 1) / splits);
	c.splits = (uint32_t)((NR + c.chunk - 1) / c.chunk);
	if (NO > 0x7fffffffu)
		return (int)cudaErrorNotSupported;

	const size_t wsbytes = c.splits > 1 ? (size_t)NO * c.splits * sizeof(A) : 0;
	if (mode == Mode::emulate) {
		A *ws = wsbytes ? (A *)malloc(wsbytes) : nullptr;
		if (wsbytes && !ws)
			return (int)cudaErrorMemoryAllocation;
		c.ws = ws;
		A vals[kThreadsR];
		for (uint32_t o = 0; o < c.nout; o++)
			for (uint32_t part = 0; part < c.splits; part++) {
				for (uint32_t t = 0; t < (uint32_t)kThreadsR; t++)
					vals[t] = block_thread<R>(c, o, part, t);
				block_tree_host<R>(vals);
				block_result<R>(c, o, part, vals[0]);
			}
		if (c.splits > 1) {
			const uint32_t grid = ceil_div(NO, kThreadsR);
			for (uint32_t b = 0; b < grid; b++)
				for (uint32_t t = 0; t < (uint32_t)kThreadsR; t++)
					combine_thread<R>(c, b, t);
		}
		free(ws);
		return 0;
	}
	if (wsbytes) {
		int e = p->ws_alloc ? p->ws_alloc(p->device, wsbytes, p->stream, (void **)&c.ws)
				    : (int)cudaMallocAsync((void **)&c.ws, wsbytes, stream);
		if (e != 0)
			return e;
	}
	/* Outputs along x (up to 2^31 - 1 blocks), parts along y (at most 65535). */
	block_kernel<R><<<dim3(c.nout, c.splits), kThreadsR, 0, stream>>>(c);
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess && c.splits > 1) {
		combine_kernel<R><<<ceil_div(NO, kThreadsR), kThreadsR, 0, stream>>>(c);
		e = cudaGetLastError();
	}
	if (wsbytes) {
		/* The block goes back to the stream's cache: later work on the stream that reuses
		 * it runs after these kernels. */
		cudaError_t f = cudaSuccess;
		if (p->ws_free)
			p->ws_free(c.ws);
		else
			f = cudaFreeAsync(c.ws, stream);
		if (e == cudaSuccess)
			e = f;
	}
	return (int)e;
}

/* The accumulator of the common dtype's storage type T: float for the 16-bit floats. */
template <typename T> struct ReduceFam {
	static int run(const tn__cuda_plan *p, int op, double divisor, Mode mode)
	{
		using A = typename acc_of<T>::type;
		auto fn = [&](const tn__cuda_plan *sub, bool accumulate) {
			switch (op) {
			case TN_RED_SUM:
				return reduce_32bit<SumR<A>, A>(sub, divisor, accumulate, mode);
			case TN_RED_PROD:
				return reduce_32bit<ProdR<A>, A>(sub, divisor, accumulate, mode);
			case TN_RED_MAX:
				return reduce_32bit<MaxR<A>, A>(sub, divisor, accumulate, mode);
			case TN_RED_MIN:
				return reduce_32bit<MinR<A>, A>(sub, divisor, accumulate, mode);
			default:
				return (int)cudaErrorInvalidValue;
			}
		};
		/* Outputs over an empty dim get the identity (a mean 0 / 0). */
		return p->numel == 0 ? fn(p, false) : for_each_32bit(p, fn);
	}
};

int reduce_run(const tn__cuda_plan *p, int op, double divisor, Mode mode)
{
	if (op == TN_RED_ALL || op == TN_RED_ANY) {
		/* "nonzero" in bool, whatever the input. */
		auto fn = [&](const tn__cuda_plan *sub, bool accumulate) {
			return op == TN_RED_ALL
				       ? reduce_32bit<AllR<bool>, bool>(sub, 1, accumulate, mode)
				       : reduce_32bit<AnyR<bool>, bool>(sub, 1, accumulate, mode);
		};
		return p->numel == 0 ? fn(p, false) : for_each_32bit(p, fn);
	}
	if ((unsigned)op > TN_RED_MIN)
		return (int)cudaErrorInvalidValue;
	return dispatch<ReduceFam>(p->common_dtype, p, op, divisor, mode);
}

} /* namespace tn_cuda */

using namespace tn_cuda;

extern "C" int tn__cuda_reduce(const struct tn__cuda_plan *p, int op, double divisor)
{
	return reduce_run(p, op, divisor, Mode::device);
}
