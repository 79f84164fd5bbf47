/* SPDX-License-Identifier: MIT */
/*
 * libtensor - a shared-memory tensor runtime. The umbrella header: include this one.
 * See libtensor(7) for the overview and each function's section-3 page for its contract.
 */
#ifndef TENSOR_H
#define TENSOR_H

#include <tensor/macros.h>
#include <tensor/version.h>
#include <tensor/error.h>
#include <tensor/dtype.h>
#include <tensor/device.h>
#include <tensor/cuda.h>
#include <tensor/numa.h>
#include <tensor/alloc.h>
#include <tensor/storage.h>
#include <tensor/tensor.h>
#include <tensor/random.h>
#include <tensor/dispatch.h>
#include <tensor/ops.h>
#include <tensor/arena.h>
#include <tensor/tensord.h>
#include <tensor/dlpack.h>

#endif /* TENSOR_H */
