/* SPDX-License-Identifier: MIT */
/*
 * Declarations shared by the CUDA backend's C sources (runtime.c, allocator.c, ops.c).
 */
#ifndef TN_CUDA_INTERNAL_H
#define TN_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "../libtensor/internal.h"
#include <tensor/cuda.h>

/* Map a CUDA error to a libtensor code, with "@what: CUDA error: <name>: <message>" as the
 * last error; cudaSuccess is 0. Clears CUDA's sticky last error. */
int tn__cuda_error(cudaError_t err, const char *what);

/* Check @device (-1: the current one) and return its ordinal in *ret, or TN_ENODEV. */
int tn__cuda_resolve_device(int device, int *ret);

/* The cudaStream_t of a stream value (NULL for the default stream), or TN_EINVAL/TN_ENODEV. */
int tn__cuda_stream_get(tn_cuda_stream stream, cudaStream_t *ret);

struct tn_iter;
struct tn__cuda_plan;
/* Flatten a built iterator into a kernel plan (cuda/plan.c); CPU zero-dim inputs become
 * scalars. */
int tn__cuda_plan_from_iter(const struct tn_iter *it, struct tn__cuda_plan *p);

/* The calling thread's current stream on @device (a valid ordinal). */
tn_cuda_stream tn__cuda_current_stream(int device);

/* Kernel scratch memory from the caching allocator, for work on @stream (plan.h ws_alloc,
 * ws_free); cudaErrorMemoryAllocation when there is no room. */
int tn__cuda_workspace_alloc(int device, size_t bytes, void *stream, void **ret_ptr);
void tn__cuda_workspace_free(void *ptr);

/* The allocation (cudaMalloc'd segment) holding @storage's block, for CUDA IPC; TN_EINVAL
 * for a storage not of the caching allocator (allocator_cuda.c). */
int tn__cuda_storage_segment(const tn_storage *storage, void **ret_base, size_t *ret_size);

/* ---- pinned.c ---- */
/* Keep @storage (host memory a copy queued on @stream of @device reads or writes) alive until
 * the copy is done; @device is current. On error nothing is kept: the caller waits instead. */
int tn__cuda_defer_release(int device, cudaStream_t stream, tn_storage *storage);
/* Drop the references of the deferred copies that are done (cheap when none is pending). */
void tn__cuda_deferred_reap(void);

#endif /* TN_CUDA_INTERNAL_H */
