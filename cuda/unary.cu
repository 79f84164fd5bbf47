/* SPDX-License-Identifier: MIT */
/*
 * The unary functions, the predicates and the other binary operators (plan.h), on the loops
 * of loops.cuh, instantiated per compute dtype with the operator chosen at run time (one
 * branch per element, the same for every thread: the many operators would otherwise cost
 * hundreds of kernels).
 */
#include "launch.cuh"

namespace tn_cuda {

template <typename T> struct UnaryFam {
	static int run(const tn__cuda_plan *p, int op, Mode mode)
	{
		UnaryOp<T> f;
		f.op = op;
		return run_op<UnaryOp<T>, 1>(p, f, mode);
	}
};

int unary_run(const tn__cuda_plan *p, int op, Mode mode)
{
	return dispatch<UnaryFam>(p->common_dtype, p, op, mode);
}

template <typename T> struct PredFam {
	static int run(const tn__cuda_plan *p, int op, Mode mode)
	{
		PredOp<T> f;
		f.op = op;
		return run_op<PredOp<T>, 1>(p, f, mode);
	}
};

/* In the input's own dtype, as the CPU's predicate kernel (the iterator of a predicate does
 * not promote). */
int pred_run(const tn__cuda_plan *p, int op, Mode mode)
{
	return dispatch<PredFam>(p->ops[1].dtype, p, op, mode);
}

template <typename T> struct Binary2Fam {
	static int run(const tn__cuda_plan *p, int op, Mode mode)
	{
		if (op == TN_BIN2_LOGICAL_AND || op == TN_BIN2_LOGICAL_OR ||
		    op == TN_BIN2_LOGICAL_XOR) {
			Logical2Op<T> f;
			f.op = op;
			return run_op<Logical2Op<T>, 2>(p, f, mode);
		}
		Binary2Op<T> f;
		f.op = op;
		return run_op<Binary2Op<T>, 2>(p, f, mode);
	}
};

int binary2_run(const tn__cuda_plan *p, int op, Mode mode)
{
	return dispatch<Binary2Fam>(p->common_dtype, p, op, mode);
}

} /* namespace tn_cuda */

using namespace tn_cuda;

extern "C" int tn__cuda_unary(const struct tn__cuda_plan *p, int op)
{
	return unary_run(p, op, Mode::device);
}

extern "C" int tn__cuda_pred(const struct tn__cuda_plan *p, int op)
{
	return pred_run(p, op, Mode::device);
}

extern "C" int tn__cuda_binary2(const struct tn__cuda_plan *p, int op)
{
	return binary2_run(p, op, Mode::device);
}
