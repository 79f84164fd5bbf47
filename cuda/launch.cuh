/* SPDX-License-Identifier: MIT */
/*
 * The launchers of each kernel family with their mode (on the device, or emulated on the
 * host), shared by the .cu files: the public entries of plan.h call them with Mode::device,
 * tn__cuda_emulate (emulate.h) with Mode::emulate.
 */
#ifndef TN_CUDA_LAUNCH_CUH
#define TN_CUDA_LAUNCH_CUH

#include "loops.cuh"

namespace tn_cuda {

int binary_run(const tn__cuda_plan *p, int op, const tn__alpha *alpha, Mode mode);
int compare_run(const tn__cuda_plan *p, int op, Mode mode);
int where_run(const tn__cuda_plan *p, Mode mode);
int copy_run(const tn__cuda_plan *p, Mode mode);
int fill_run(const tn__cuda_plan *p, const void *elem, Mode mode);
int unary_run(const tn__cuda_plan *p, int op, Mode mode);
int pred_run(const tn__cuda_plan *p, int op, Mode mode);
int binary2_run(const tn__cuda_plan *p, int op, Mode mode);
int reduce_run(const tn__cuda_plan *p, int op, double divisor, Mode mode);

} /* namespace tn_cuda */

#endif /* TN_CUDA_LAUNCH_CUH */
