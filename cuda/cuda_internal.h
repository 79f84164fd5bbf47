/* SPDX-License-Identifier: MIT */
/*
 * Declarations shared by the CUDA backend's C sources (runtime.c, allocator.c, ops.c).
 */
#ifndef TN_CUDA_INTERNAL_H
#define TN_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "../libtensor/backend.h"
#include <tensor/cuda.h>

/* The backend's public functions, behind libtensor's tn_cuda_* (backend.h's list). */
#define TN_X_(ret, name, params, args, fallback) ret tn__cuda_api_##name params;
TN_CUDA_API_LIST(TN_X_)
#undef TN_X_
void tn__cuda_api_event_destroy(tn_cuda_event *event);
bool tn__cuda_api_tensor_is_pinned(const tn_tensor *t);

/* The backend's device table (backend.c), for the static builds of the tests to register. */
extern const struct tn__device_ops tn__cuda_device_ops;

/* ---- the device table's entries (runtime.c, ops.c) ---- */

/* Make CUDA device @index the calling thread's current one, saving the previous in *saved;
 * tn__cuda_device_exit puts it back. TN_ENODEV when there is no such device. */
int tn__cuda_device_enter(int index, int *saved);
void tn__cuda_device_exit(int saved);
/* Run a built iterator's plan on the CUDA device of its first output, on the calling thread's
 * current stream, computing in @compute (what the CPU loop computes in). */
int tn__cuda_run(const struct tn_iter *it, enum tn__kernel_family kernel, int op, const void *arg,
		 enum tn_dtype compute, double divisor);
/* Every element of CUDA tensor @t set to the element at @elem (t's dtype). */
int tn__cuda_fill_tensor(tn_tensor *t, const void *elem);
/* copy_ with a CUDA tensor on either side (host<->device, device<->device, any dtypes). */
int tn__cuda_copy_tensor(tn_tensor *dst, const tn_tensor *src, bool non_blocking);
/* One element of CUDA tensor @t at device address @addr, read into / written from host memory. */
int tn__cuda_element_read(const tn_tensor *t, const void *addr, void *out);
int tn__cuda_element_write(tn_tensor *t, void *addr, const void *in);

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
