/* SPDX-License-Identifier: MIT */
/*
 * The arithmetic, comparison, where, copy/cast and fill kernels (plan.h), on the loops of
 * loops.cuh, instantiated per compute dtype.
 */
#include "launch.cuh"

namespace tn_cuda {

template <typename T> struct BinaryFam {
	static int run(const tn__cuda_plan *p, int op, const tn__alpha *alpha, Mode mode)
	{
		BinaryOp<T> f;
		f.op = op;
		f.alpha_f = (typename acc_of<T>::type)alpha->d;
		f.alpha_i = (uint64_t)alpha->i;
		f.alpha_b = alpha->b;
		return run_op<BinaryOp<T>, 2>(p, f, mode);
	}
};

int binary_run(const tn__cuda_plan *p, int op, const tn__alpha *alpha, Mode mode)
{
	return dispatch<BinaryFam>(p->common_dtype, p, op, alpha, mode);
}

template <typename T> struct CompareFam {
	static int run(const tn__cuda_plan *p, int op, Mode mode)
	{
		CompareOp<T> f;
		f.op = op;
		return run_op<CompareOp<T>, 2>(p, f, mode);
	}
};

int compare_run(const tn__cuda_plan *p, int op, Mode mode)
{
	return dispatch<CompareFam>(p->common_dtype, p, op, mode);
}

template <typename T> struct WhereFam {
	static int run(const tn__cuda_plan *p, Mode mode)
	{
		WhereOp<T> f;
		return run_op<WhereOp<T>, 3>(p, f, mode);
	}
};

int where_run(const tn__cuda_plan *p, Mode mode)
{
	return dispatch<WhereFam>(p->common_dtype, p, mode);
}

/* Copies compute in the output's dtype: the load converts (ATen's dynamic casting). */
template <typename T> struct CopyFam {
	static int run(const tn__cuda_plan *p, Mode mode)
	{
		CopyOp<T> f;
		return run_op<CopyOp<T>, 1>(p, f, mode);
	}
};

int copy_run(const tn__cuda_plan *p, Mode mode)
{
	return dispatch<CopyFam>(p->ops[0].dtype, p, mode);
}

template <typename T> struct FillFam {
	static int run(const tn__cuda_plan *p, const void *elem, Mode mode)
	{
		FillOp<T> f;
		memcpy(&f.value, elem, sizeof(T));
		return run_op<FillOp<T>, 0>(p, f, mode);
	}
};

int fill_run(const tn__cuda_plan *p, const void *elem, Mode mode)
{
	return dispatch<FillFam>(p->ops[0].dtype, p, elem, mode);
}

} /* namespace tn_cuda */

using namespace tn_cuda;

extern "C" int tn__cuda_binary(const struct tn__cuda_plan *p, int op, const struct tn__alpha *alpha)
{
	return binary_run(p, op, alpha, Mode::device);
}

extern "C" int tn__cuda_compare(const struct tn__cuda_plan *p, int op)
{
	return compare_run(p, op, Mode::device);
}

extern "C" int tn__cuda_where(const struct tn__cuda_plan *p)
{
	return where_run(p, Mode::device);
}

extern "C" int tn__cuda_copy(const struct tn__cuda_plan *p)
{
	return copy_run(p, Mode::device);
}

extern "C" int tn__cuda_fill(const struct tn__cuda_plan *p, const void *elem)
{
	return fill_run(p, elem, Mode::device);
}
