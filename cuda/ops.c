/* SPDX-License-Identifier: MIT */
/*
 * The operators' CUDA side: running a built TensorIterator's plan on the device of its
 * tensors (the CUDA half of ATen's DispatchStub), fills, element reads and writes, and copies
 * between the host and devices (ATen's copy_kernel_cuda).
 *
 * The kernels are queued on the calling thread's current stream of the tensors' device and
 * not waited for, as in PyTorch: a later operator on the same stream sees the result, a
 * copy to the host waits for it. Copies that read or write host memory wait for their stream
 * before returning unless non_blocking was asked and no temporary host buffer is involved;
 * from or to pinned memory such a copy is asynchronous DMA (memcpy_plain).
 */
#include <string.h>

#include "../libtensor/iter.h"
#include "cuda_internal.h"
#include "plan.h"

/* ---- plans ---- */

/* The plan of a one-operand "iterator" over @t (fill): dims fastest first, in bytes, with
 * size-1 dims dropped; a dense tensor becomes one dimension. */
static void plan_of_tensor(const tn_tensor *t, struct tn__cuda_plan *p)
{
	const int64_t w = (int64_t)tn__itemsize(t->dtype);
	memset(p, 0, sizeof(*p));
	p->noutputs = 1;
	p->ntensors = 1;
	p->numel = t->numel;
	p->common_dtype = t->dtype;
	p->ops[0].data = tn__data(t);
	p->ops[0].dtype = t->dtype;
	if (t->contiguous || tn__is_non_overlapping_and_dense(t)) {
		p->ndim = 1;
		p->shape[0] = t->numel;
		p->ops[0].strides[0] = w;
		return;
	}
	for (int d = t->ndim - 1; d >= 0; d--) {
		if (t->sizes[d] == 1)
			continue;
		p->shape[p->ndim] = t->sizes[d];
		p->ops[0].strides[p->ndim] = t->strides[d] * w;
		p->ndim++;
	}
}

/* Prepare @p to run on @device: its current stream, the device made current (*saved). */
static int plan_enter(struct tn__cuda_plan *p, int device, int *saved)
{
	cudaStream_t s;
	int rc;
	if ((rc = tn__cuda_device_enter(device, saved)) < 0)
		return rc;
	if ((rc = tn__cuda_stream_get(tn__cuda_current_stream(device), &s)) < 0) {
		tn__cuda_device_exit(*saved);
		return rc;
	}
	p->device = device;
	p->stream = s;
	p->ws_alloc = tn__cuda_workspace_alloc;
	p->ws_free = tn__cuda_workspace_free;
	return 0;
}

static int launched(int err, const char *what)
{
	return err ? tn__cuda_error((cudaError_t)err, what) : 0;
}

int tn__cuda_run(const struct tn_iter *it, enum tn__kernel_family kernel, int op, const void *arg,
		 enum tn_dtype compute, double divisor)
{
	struct tn__cuda_plan p;
	int saved, rc;

	if (it->numel == 0)
		return 0;
	if ((rc = tn__cuda_plan_from_iter(it, &p)) < 0)
		return rc;
	p.common_dtype = compute;
	if ((rc = plan_enter(&p, it->ops[0].tensor->storage->device.index, &saved)) < 0)
		return rc;
	switch (kernel) {
	case TN_KERNEL_BINARY:
		rc = launched(tn__cuda_binary(&p, op, arg), "binary kernel");
		break;
	case TN_KERNEL_COMPARE:
		rc = launched(tn__cuda_compare(&p, op), "comparison kernel");
		break;
	case TN_KERNEL_UNARY:
		rc = launched(tn__cuda_unary(&p, op), "unary kernel");
		break;
	case TN_KERNEL_PRED:
		rc = launched(tn__cuda_pred(&p, op), "predicate kernel");
		break;
	case TN_KERNEL_BINARY2:
		rc = launched(tn__cuda_binary2(&p, op), "binary kernel");
		break;
	case TN_KERNEL_WHERE:
		rc = launched(tn__cuda_where(&p), "where kernel");
		break;
	case TN_KERNEL_COPY:
		rc = launched(tn__cuda_copy(&p), "copy kernel");
		break;
	case TN_KERNEL_REDUCE:
		rc = launched(tn__cuda_reduce(&p, op, divisor), "reduction kernel");
		break;
	default:
		rc = tn__error(TN_EINVAL, "tn__cuda_run: unknown kernel %d", (int)kernel);
	}
	tn__cuda_device_exit(saved);
	return rc;
}

int tn__cuda_fill_tensor(tn_tensor *t, const void *elem)
{
	struct tn__cuda_plan p;
	int saved, rc;

	if (t->numel == 0)
		return 0;
	plan_of_tensor(t, &p);
	if ((rc = plan_enter(&p, t->storage->device.index, &saved)) < 0)
		return rc;
	rc = launched(tn__cuda_fill(&p, elem), "fill kernel");
	tn__cuda_device_exit(saved);
	return rc;
}

/* ---- copies ---- */

/* Copy @n bytes between the host and @device (or within it) on the device's current stream;
 * with @wait, wait for the stream afterwards. */
static int memcpy_on(int device, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
		     bool wait)
{
	cudaStream_t s;
	int saved, rc;
	if (n == 0)
		return 0;
	if ((rc = tn__cuda_device_enter(device, &saved)) < 0)
		return rc;
	if ((rc = tn__cuda_stream_get(tn__cuda_current_stream(device), &s)) == 0)
		rc = tn__cuda_error(cudaMemcpyAsync(dst, src, n, kind, s), "cudaMemcpyAsync");
	if (rc == 0 && wait)
		rc = tn__cuda_error(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	tn__cuda_device_exit(saved);
	return rc;
}

/*
 * A plain copy between @host (a CPU tensor) and @device: one cudaMemcpyAsync on the device's
 * current stream. Without @non_blocking it is waited for. With it, from or to pageable memory,
 * it is not waited for either, as before pinned memory existed: CUDA itself returns only once
 * pageable memory may be reused (it stages it). From or to pinned memory (tn_cuda_is_pinned)
 * it is real asynchronous DMA: the host storage is kept alive by the deferred-release list
 * until the copy is done, so the caller may drop it at once; reading or writing the bytes
 * still needs a wait on the stream, as in PyTorch.
 */
static int memcpy_plain(int device, const tn_tensor *host, void *dst, const void *src, size_t n,
			enum cudaMemcpyKind kind, bool non_blocking)
{
	const void *hp = kind == cudaMemcpyHostToDevice ? src : dst;
	if (!non_blocking || n == 0 || !tn__cuda_api_is_pinned(hp, n))
		return memcpy_on(device, dst, src, n, kind, !non_blocking);
	cudaStream_t s;
	int saved, rc;
	if ((rc = tn__cuda_device_enter(device, &saved)) < 0)
		return rc;
	if ((rc = tn__cuda_stream_get(tn__cuda_current_stream(device), &s)) == 0)
		rc = tn__cuda_error(cudaMemcpyAsync(dst, src, n, kind, s), "cudaMemcpyAsync");
	/* Nowhere to keep the storage: wait, as a blocking copy would. */
	if (rc == 0 && tn__cuda_defer_release(device, s, host->storage) < 0)
		rc = tn__cuda_error(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	tn__cuda_device_exit(saved);
	return rc;
}

int tn__cuda_element_read(const tn_tensor *t, const void *addr, void *out)
{
	return memcpy_on(t->storage->device.index, out, addr, tn__itemsize(t->dtype),
			 cudaMemcpyDeviceToHost, true);
}

int tn__cuda_element_write(tn_tensor *t, void *addr, const void *in)
{
	return memcpy_on(t->storage->device.index, addr, in, tn__itemsize(t->dtype),
			 cudaMemcpyHostToDevice, true);
}

static bool same_sizes(const tn_tensor *a, const tn_tensor *b)
{
	return a->ndim == b->ndim &&
	       memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* One memcpy does it: same dtype and sizes, both contiguous. */
static bool plain_copy(const tn_tensor *dst, const tn_tensor *src)
{
	return dst->dtype == src->dtype && same_sizes(dst, src) && dst->contiguous &&
	       src->contiguous;
}

/* A contiguous tensor on @device with @like's sizes and @dtype. */
static int temp_like(tn_device device, enum tn_dtype dtype, const tn_tensor *like,
		     tn_tensor **ret)
{
	return tn__empty_like_device(device, dtype, like->ndim, like->sizes, NULL, ret, "copy_");
}

static int copy_between(tn_tensor *dst, const tn_tensor *src, bool non_blocking);

/* Host to device: convert and broadcast on the host into a contiguous buffer of dst's dtype
 * and sizes, then one DMA, then (dst strided) a device copy into place. */
static int copy_h2d(tn_tensor *dst, const tn_tensor *src, bool non_blocking)
{
	const int dev = dst->storage->device.index;
	tn_tensor *host = NULL, *staged = NULL;
	int rc;

	if (plain_copy(dst, src))
		return memcpy_plain(dev, src, tn__data(dst), tn__data(src),
				    (size_t)dst->numel * tn__itemsize(dst->dtype),
				    cudaMemcpyHostToDevice, non_blocking);
	if ((rc = temp_like((tn_device){ TN_DEVICE_CPU, 0 }, dst->dtype, dst, &host)) < 0)
		return rc;
	if ((rc = tn__copy_host(host, src)) < 0)
		goto out;
	if (dst->contiguous) {
		rc = memcpy_on(dev, tn__data(dst), tn__data(host),
			       (size_t)dst->numel * tn__itemsize(dst->dtype), cudaMemcpyHostToDevice,
			       true); /* the host buffer is freed below: wait */
		goto out;
	}
	if ((rc = temp_like(dst->storage->device, dst->dtype, dst, &staged)) < 0 ||
	    (rc = memcpy_on(dev, tn__data(staged), tn__data(host),
			    (size_t)dst->numel * tn__itemsize(dst->dtype), cudaMemcpyHostToDevice,
			    true)) < 0)
		goto out;
	rc = copy_between(dst, staged, non_blocking);
out:
	tn_tensor_unref(staged);
	tn_tensor_unref(host);
	return rc;
}

/* Device to host: convert and broadcast on the device into a contiguous buffer of dst's dtype
 * and sizes, one DMA, then (dst strided) a host copy into place. */
static int copy_d2h(tn_tensor *dst, const tn_tensor *src, bool non_blocking)
{
	const int dev = src->storage->device.index;
	tn_tensor *staged = NULL, *host = NULL;
	int rc;

	if (plain_copy(dst, src))
		return memcpy_plain(dev, dst, tn__data(dst), tn__data(src),
				    (size_t)dst->numel * tn__itemsize(dst->dtype),
				    cudaMemcpyDeviceToHost, non_blocking);
	if ((rc = temp_like(src->storage->device, dst->dtype, dst, &staged)) < 0 ||
	    (rc = copy_between(staged, src, false)) < 0)
		goto out;
	if (dst->contiguous) {
		rc = memcpy_on(dev, tn__data(dst), tn__data(staged),
			       (size_t)dst->numel * tn__itemsize(dst->dtype), cudaMemcpyDeviceToHost,
			       true);
		goto out;
	}
	if ((rc = temp_like((tn_device){ TN_DEVICE_CPU, 0 }, dst->dtype, dst, &host)) < 0 ||
	    (rc = memcpy_on(dev, tn__data(host), tn__data(staged),
			    (size_t)dst->numel * tn__itemsize(dst->dtype), cudaMemcpyDeviceToHost,
			    true)) < 0)
		goto out;
	rc = tn__copy_host(dst, host);
out:
	tn_tensor_unref(host);
	tn_tensor_unref(staged);
	return rc;
}

/* Between two devices: through a contiguous buffer of dst's dtype and sizes on the source
 * device, then a peer copy (the destination's stream waits for the source's first). */
static int copy_d2d_peer(tn_tensor *dst, const tn_tensor *src)
{
	tn_tensor *staged = NULL, *landed = NULL;
	int rc, saved;

	if ((rc = temp_like(src->storage->device, dst->dtype, dst, &staged)) < 0 ||
	    (rc = copy_between(staged, src, false)) < 0)
		goto out;
	/* The source's work must be done before the peer copy on the destination's stream. */
	if ((rc = tn__cuda_api_stream_synchronize(tn__cuda_current_stream(src->storage->device.index))))
		goto out;
	tn_tensor *into = dst;
	if (!dst->contiguous) {
		if ((rc = temp_like(dst->storage->device, dst->dtype, dst, &landed)) < 0)
			goto out;
		into = landed;
	}
	cudaStream_t s;
	const int dd = dst->storage->device.index;
	if ((rc = tn__cuda_device_enter(dd, &saved)) < 0)
		goto out;
	if ((rc = tn__cuda_stream_get(tn__cuda_current_stream(dd), &s)) == 0)
		rc = tn__cuda_error(cudaMemcpyPeerAsync(tn__data(into), dd, tn__data(staged),
							src->storage->device.index,
							(size_t)dst->numel * tn__itemsize(dst->dtype),
							s),
				    "cudaMemcpyPeerAsync");
	/* staged is freed below and belongs to the other device's stream: wait. */
	if (rc == 0)
		rc = tn__cuda_error(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	tn__cuda_device_exit(saved);
	if (rc == 0 && landed)
		rc = copy_between(dst, landed, false);
out:
	tn_tensor_unref(landed);
	tn_tensor_unref(staged);
	return rc;
}

/* On one device: the copy kernel over the iterator's plan. */
static int copy_on_device(tn_tensor *dst, const tn_tensor *src)
{
	struct tn_iter_config cfg;
	struct tn_iter it;
	int rc;

	tn__copy_config(&cfg, dst, src);
	if ((rc = tn__iter_build(&it, &cfg, "copy_")) < 0)
		return rc;
	rc = tn__cuda_run(&it, TN_KERNEL_COPY, 0, NULL, dst->dtype, 1.0);
	tn__iter_release(&it);
	return rc;
}

static int copy_between(tn_tensor *dst, const tn_tensor *src, bool non_blocking)
{
	const bool dc = dst->storage->device.type == TN_DEVICE_CUDA;
	const bool sc = src->storage->device.type == TN_DEVICE_CUDA;
	if (dc && sc && dst->storage->device.index != src->storage->device.index)
		return copy_d2d_peer(dst, src);
	if (dc && sc)
		return copy_on_device(dst, src);
	return dc ? copy_h2d(dst, src, non_blocking) : copy_d2h(dst, src, non_blocking);
}

/* Broadcasting and its errors come from the iterators of the steps (on the host for a host
 * source, on the device otherwise); a plain memcpy needs equal sizes. */
int tn__cuda_copy_tensor(tn_tensor *dst, const tn_tensor *src, bool non_blocking)
{
	/* Host storages of earlier non_blocking copies that are done can go now. */
	tn__cuda_deferred_reap();
	return copy_between(dst, src, non_blocking);
}
