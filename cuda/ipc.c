/* SPDX-License-Identifier: MIT */
/*
 * Device storages shared between processes through CUDA IPC handles that tensord passes
 * (tn_cuda_ipc_export(3); the daemon's side is tensord/cudashare.c), in the image of
 * PyTorch's CUDA tensor sharing (torch/multiprocessing/reductions.py, CudaIPCTypes.cpp).
 *
 * The producer exports a CUDA tensor: the IPC handle of the caching allocator's segment that
 * holds its storage (cudaIpcGetMemHandle names whole allocations), the storage's place in it,
 * the view, and an interprocess event recorded on the current stream after the producer's
 * queued writes. The export keeps a reference to the storage, so its block is not reused while
 * it is exported. Consumers import by name: the daemon gives them the record and counts a
 * hold; they open the handle (once per process and allocation: CUDA refuses to open one
 * twice), make their current stream wait for the event, and wrap the memory in a storage whose
 * deleter waits for the device, closes the handle and releases the hold.
 *
 * Lifetime: the producer withdraws an export (tn_cuda_ipc_unexport); its storage is let go
 * when the daemon says nobody holds it any more, at once or in a later tn_cuda_ipc_collect
 * (torch.cuda.ipc_collect). A consumer that is killed holds nothing once the daemon sees it
 * gone, so the producer's memory goes back to its allocator and the statistics say so.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tensord/client.h"
#include "cuda_internal.h"

struct ipc_export {
	struct ipc_export *next;
	tn_tensord *conn; /* a reference */
	char name[TN_ARENA_NAME_MAX + 1];
	uint64_t id;
	tn_storage *storage; /* a reference: the block stays allocated while exported */
	cudaEvent_t event;   /* interprocess, recorded at export; NULL when none */
	int device;
};

/* A handle this process opened: CUDA maps an allocation once per process. */
struct ipc_mapping {
	struct ipc_mapping *next;
	int device;
	uint8_t handle[TND_CUDA_HANDLE_SIZE];
	char *base;
	size_t bytes; /* of the allocation as the driver maps it; 0 when it could not say */
	int refs;
};

struct ipc_import {
	tn_tensord *conn; /* a reference */
	char name[TN_ARENA_NAME_MAX + 1];
	uint64_t id;
	struct ipc_mapping *map;
};

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_export *exports;
static struct ipc_mapping *mappings;

/* @r with the current message prefixed by @fn (the message is copied first: formatting a
 * buffer into itself is undefined). */
static int prefixed(int r, const char *fn)
{
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", tn_last_error());
	return tn__error(r, "%s: %s", fn, msg);
}

static int check_name(const char *name, const char *fn)
{
	if (!name || !name[0])
		return tn__error(TN_EINVAL, "%s: empty or NULL name", fn);
	if (strlen(name) > TN_ARENA_NAME_MAX)
		return tn__error(TN_ENAMETOOLONG, "%s: name of %zu bytes, the limit is %d", fn,
				 strlen(name), TN_ARENA_NAME_MAX);
	return 0;
}

/* The UUID of @device. */
static int device_uuid(int device, uint8_t out[16])
{
	struct cudaDeviceProp prop;
	int r = tn__cuda_error(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
	if (!r)
		memcpy(out, prop.uuid.bytes, 16);
	return r;
}

/* The ordinal of the device with @uuid in this process, or TN_ENODEV. */
static int device_of_uuid(const uint8_t uuid[16], int *ret, const char *fn)
{
	int n = tn__cuda_api_device_count();
	for (int d = 0; d < n; d++) {
		uint8_t u[16];
		if (device_uuid(d, u) == 0 && memcmp(u, uuid, 16) == 0) {
			*ret = d;
			return 0;
		}
	}
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
	return tn__error(TN_ENODEV, "%s: the export's GPU (UUID %s) is not visible in this process "
			 "(%d CUDA devices; check CUDA_VISIBLE_DEVICES)", fn, hex, n);
}

static void export_free(struct ipc_export *e)
{
	if (e->event) {
		int saved;
		if (tn__cuda_device_enter(e->device, &saved) == 0) {
			cudaEventDestroy(e->event);
			tn__cuda_device_exit(saved);
		}
	}
	tn_storage_unref(e->storage);
	tn_tensord_close(e->conn);
	free(e);
}

int tn__cuda_api_ipc_export(tn_tensord *conn, const char *name, const tn_tensor *t,
				 unsigned mode)
{
	static const char fn[] = "tn_cuda_ipc_export";
	int r, saved;
	if (!conn)
		return tn__error(TN_EINVAL, "%s: NULL connection", fn);
	if ((r = check_name(name, fn)))
		return r;
	if (!tn__handle_is(t, TN_MAGIC_TENSOR))
		return tn__error(TN_EBADF, "%s: not a live tensor", fn);
	if (t->storage->device.type != TN_DEVICE_CUDA)
		return tn__error(TN_EINVAL, "%s: a %s tensor; only CUDA tensors are shared this way "
				 "(CPU tensors go in arenas)", fn,
				 tn_device_type_name(t->storage->device.type));
	if (t->ndim > TN_ARENA_MAX_DIMS)
		return tn__error(TN_EINVAL, "%s: %d dims, at most %d can be shared", fn, t->ndim,
				 TN_ARENA_MAX_DIMS);
	if (mode & ~0077u)
		return tn__error(TN_EINVAL, "%s: mode 0%o has bits beyond group and others", fn,
				 mode);
	const tn_storage *st = t->storage;
	void *base;
	size_t seg_bytes;
	if (st->nbytes == 0)
		return tn__error(TN_EINVAL, "%s: an empty storage has no device memory to share",
				 fn);
	if ((r = tn__cuda_storage_segment(st, &base, &seg_bytes)))
		return prefixed(r, fn);

	struct ipc_export *e = calloc(1, sizeof(*e));
	if (!e)
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	e->device = st->device.index;
	struct tnd_cuda_export rec = { .flags = TND_CUDA_EVENT, .mode = mode };
	strcpy(rec.name, name);
	rec.alloc_bytes = seg_bytes;
	rec.offset = (uint64_t)((char *)st->data - (char *)base);
	rec.storage_bytes = st->nbytes;
	rec.storage_offset = t->offset;
	rec.dtype = (uint32_t)t->dtype;
	rec.ndim = (uint32_t)t->ndim;
	memcpy(rec.sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t));
	memcpy(rec.strides, t->strides, (size_t)t->ndim * sizeof(int64_t));

	if ((r = tn__cuda_device_enter(e->device, &saved))) {
		free(e);
		return r;
	}
	cudaIpcMemHandle_t mh;
	cudaIpcEventHandle_t eh;
	cudaStream_t stream;
	if (!(r = device_uuid(e->device, rec.device_uuid)) &&
	    !(r = tn__cuda_error(cudaIpcGetMemHandle(&mh, base), "cudaIpcGetMemHandle")) &&
	    !(r = tn__cuda_stream_get(tn__cuda_current_stream(e->device), &stream)) &&
	    !(r = tn__cuda_error(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming |
									  cudaEventInterprocess),
				 "cudaEventCreateWithFlags")) &&
	    !(r = tn__cuda_error(cudaEventRecord(e->event, stream), "cudaEventRecord")))
		r = tn__cuda_error(cudaIpcGetEventHandle(&eh, e->event), "cudaIpcGetEventHandle");
	tn__cuda_device_exit(saved);
	_Static_assert(sizeof(mh) == TND_CUDA_HANDLE_SIZE && sizeof(eh) == TND_CUDA_HANDLE_SIZE,
		       "CUDA IPC handles are 64 bytes");
	if (!r) {
		memcpy(rec.mem_handle, &mh, sizeof(mh));
		memcpy(rec.event_handle, &eh, sizeof(eh));
		struct tnd_cuda_info info;
		r = tn__tensord_cuda_export(conn, &rec, &info);
		e->id = info.id;
	}
	if (r) {
		r = prefixed(r, fn);
		e->storage = NULL;
		e->conn = NULL;
		export_free(e);
		return r;
	}
	strcpy(e->name, name);
	e->storage = tn_storage_ref(t->storage);
	e->conn = tn__tensord_ref(conn);
	pthread_mutex_lock(&ipc_lock);
	e->next = exports;
	exports = e;
	pthread_mutex_unlock(&ipc_lock);
	return 0;
}

/* Unlink and return the live export of @conn named @name, or NULL. */
static struct ipc_export *take_export(tn_tensord *conn, const char *name)
{
	pthread_mutex_lock(&ipc_lock);
	struct ipc_export *e = NULL;
	for (struct ipc_export **pp = &exports; *pp; pp = &(*pp)->next)
		if ((*pp)->conn == conn && !strcmp((*pp)->name, name)) {
			e = *pp;
			*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&ipc_lock);
	return e;
}

/* Withdrawn exports the daemon still lists as held: their storages wait here. */
static struct ipc_export *withdrawn;

static void park(struct ipc_export *e)
{
	pthread_mutex_lock(&ipc_lock);
	e->next = withdrawn;
	withdrawn = e;
	pthread_mutex_unlock(&ipc_lock);
}

int tn__cuda_api_ipc_unexport(tn_tensord *conn, const char *name)
{
	static const char fn[] = "tn_cuda_ipc_unexport";
	int r;
	if (!conn)
		return tn__error(TN_EINVAL, "%s: NULL connection", fn);
	if ((r = check_name(name, fn)))
		return r;
	struct ipc_export *e = take_export(conn, name);
	if (!e)
		return tn__error(TN_ENOENT, "%s: this process exports no \"%s\" through this "
				 "connection", fn, name);
	struct tnd_cuda_info info;
	r = tn__tensord_cuda_unexport(conn, e->name, e->id, &info);
	if (r == TN_ENOENT || (r == 0 && info.holders == 0)) {
		export_free(e); /* nobody holds it: the block goes back to the allocator */
		return 0;
	}
	if (r) {
		/* Not withdrawn (the daemon is unreachable): still exported. */
		pthread_mutex_lock(&ipc_lock);
		e->next = exports;
		exports = e;
		pthread_mutex_unlock(&ipc_lock);
		return prefixed(r, fn);
	}
	park(e);
	return 0;
}

int64_t tn__cuda_api_ipc_collect(void)
{
	pthread_mutex_lock(&ipc_lock);
	struct ipc_export *list = withdrawn;
	withdrawn = NULL;
	pthread_mutex_unlock(&ipc_lock);
	int64_t freed = 0;
	int err = 0;
	while (list) {
		struct ipc_export *e = list;
		list = e->next;
		struct tnd_cuda_info info;
		int r = tn__tensord_cuda_stat(e->conn, e->name, e->id, &info);
		if (r == TN_ENOENT) {
			export_free(e);
			freed++;
			continue;
		}
		if (r && !err)
			err = r; /* kept, asked again next time */
		park(e);
	}
	return err && !freed ? err : freed;
}

/* ---- the consumer ---- */

/* cuMemGetAddressRange through the runtime (no link to the driver library): the size of the
 * allocation an opened handle maps, against which an exporter's figures are checked. */
typedef int (*address_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);
static address_range_fn address_range;
static pthread_once_t address_range_once = PTHREAD_ONCE_INIT;

static void find_address_range(void)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q;
	if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
					     &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		address_range = (address_range_fn)fn;
}

static size_t mapped_bytes(char *base)
{
	unsigned long long b = 0;
	size_t n = 0;
	pthread_once(&address_range_once, find_address_range);
	if (!address_range || address_range(&b, &n, (unsigned long long)(uintptr_t)base) != 0 ||
	    b != (unsigned long long)(uintptr_t)base)
		return 0;
	return n;
}

static void mapping_put(struct ipc_mapping *m)
{
	pthread_mutex_lock(&ipc_lock);
	bool last = --m->refs == 0;
	if (last)
		for (struct ipc_mapping **pp = &mappings; *pp; pp = &(*pp)->next)
			if (*pp == m) {
				*pp = m->next;
				break;
			}
	pthread_mutex_unlock(&ipc_lock);
	if (!last)
		return;
	int saved;
	if (tn__cuda_device_enter(m->device, &saved) == 0) {
		cudaIpcCloseMemHandle(m->base);
		tn__cuda_device_exit(saved);
	}
	free(m);
}

static int mapping_get(int device, const uint8_t *handle, struct ipc_mapping **ret,
		       const char *fn)
{
	pthread_mutex_lock(&ipc_lock);
	for (struct ipc_mapping *m = mappings; m; m = m->next)
		if (m->device == device && !memcmp(m->handle, handle, TND_CUDA_HANDLE_SIZE)) {
			m->refs++;
			pthread_mutex_unlock(&ipc_lock);
			*ret = m;
			return 0;
		}
	/* Opened under the lock: two threads importing the same allocation must not both
	 * open it (CUDA refuses the second). */
	struct ipc_mapping *m = calloc(1, sizeof(*m));
	int r = m ? 0 : tn__error(TN_ENOMEM, "%s: out of memory", fn);
	int saved;
	if (!r && !(r = tn__cuda_device_enter(device, &saved))) {
		cudaIpcMemHandle_t h;
		void *base = NULL;
		memcpy(&h, handle, sizeof(h));
		r = tn__cuda_error(cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess),
				   "cudaIpcOpenMemHandle");
		tn__cuda_device_exit(saved);
		if (!r) {
			m->device = device;
			memcpy(m->handle, handle, TND_CUDA_HANDLE_SIZE);
			m->base = base;
			m->bytes = mapped_bytes(base);
			m->refs = 1;
			m->next = mappings;
			mappings = m;
		}
	}
	pthread_mutex_unlock(&ipc_lock);
	if (r) {
		free(m);
		return r;
	}
	*ret = m;
	return 0;
}

/* The imported storage died: no queued work may still read it, then the handle is closed and
 * the hold released. */
static void import_deleter(void *data, void *ctx)
{
	(void)data;
	struct ipc_import *imp = ctx;
	struct tn__saved_error keep;
	int saved;
	tn__error_save(&keep); /* a storage's death is not a failure of the caller's call */
	if (tn__cuda_device_enter(imp->map->device, &saved) == 0) {
		cudaDeviceSynchronize();
		tn__cuda_device_exit(saved);
	}
	mapping_put(imp->map);
	(void)tn__tensord_cuda_release(imp->conn, imp->name, imp->id);
	tn__error_restore(&keep);
	tn_tensord_close(imp->conn);
	free(imp);
}

/* The exporter is this process: a tensor over its own storage. */
static int import_local(const struct tnd_cuda_info *info, tn_tensor **ret, const char *fn)
{
	const struct tnd_cuda_export *rec = &info->rec;
	tn_storage *st = NULL;
	pthread_mutex_lock(&ipc_lock);
	for (struct ipc_export *e = exports; e; e = e->next)
		if (e->id == info->id && !strcmp(e->name, rec->name))
			st = tn_storage_ref(e->storage);
	pthread_mutex_unlock(&ipc_lock);
	if (!st)
		return tn__error(TN_ENOENT, "%s: \"%s\" is exported by this process through another "
				 "tensord connection", fn, rec->name);
	int r = tn_tensor_new(st, rec->storage_offset, (int)rec->ndim, rec->sizes, rec->strides,
			      (enum tn_dtype)rec->dtype, ret);
	tn_storage_unref(st);
	return r;
}

int tn__cuda_api_ipc_import(tn_tensord *conn, const char *name, tn_tensor **ret)
{
	static const char fn[] = "tn_cuda_ipc_import";
	int r, saved;
	if (!conn || !ret)
		return tn__error(TN_EINVAL, "%s: NULL %s", fn, conn ? "ret_tensor" : "connection");
	if ((r = check_name(name, fn)))
		return r;
	struct tnd_cuda_info info;
	if ((r = tn__tensord_cuda_import(conn, name, &info)))
		return r;
	const struct tnd_cuda_export *rec = &info.rec;
	const char *why = tnd_cuda_export_problem(rec);
	if (why) {
		r = tn__error(TN_EPROTO, "%s: tensord sent a bad record for \"%s\": %s", fn, name,
			      why);
		goto release;
	}
	if (info.owner_pid == getpid()) {
		r = import_local(&info, ret, fn);
		goto release; /* the process's own storage reference keeps the memory */
	}
	int device = -1;
	if ((r = device_of_uuid(rec->device_uuid, &device, fn)))
		goto release;
	struct ipc_import *imp = calloc(1, sizeof(*imp));
	if (!imp) {
		r = tn__error(TN_ENOMEM, "%s: out of memory", fn);
		goto release;
	}
	if ((r = mapping_get(device, rec->mem_handle, &imp->map, fn))) {
		free(imp);
		goto release;
	}
	/* The exporter's figures must fit the allocation the handle maps: a view past it would
	 * fault on the device (a fault that ends this process's CUDA context). */
	if (imp->map->bytes && rec->offset + rec->storage_bytes > imp->map->bytes) {
		r = tn__error(TN_EPROTO, "%s: \"%s\" claims %llu bytes at %llu of an allocation of "
			      "%zu bytes", fn, name, (unsigned long long)rec->storage_bytes,
			      (unsigned long long)rec->offset, imp->map->bytes);
		mapping_put(imp->map);
		free(imp);
		goto release;
	}
	/* Later work on this thread's current stream waits for the producer's writes. */
	if ((rec->flags & TND_CUDA_EVENT) && !(r = tn__cuda_device_enter(device, &saved))) {
		cudaIpcEventHandle_t eh;
		cudaEvent_t ev;
		cudaStream_t s;
		memcpy(&eh, rec->event_handle, sizeof(eh));
		if (!(r = tn__cuda_error(cudaIpcOpenEventHandle(&ev, eh), "cudaIpcOpenEventHandle"))) {
			if (!(r = tn__cuda_stream_get(tn__cuda_current_stream(device), &s)))
				r = tn__cuda_error(cudaStreamWaitEvent(s, ev, 0),
						   "cudaStreamWaitEvent");
			cudaEventDestroy(ev);
		}
		tn__cuda_device_exit(saved);
	}
	if (r) {
		mapping_put(imp->map);
		free(imp);
		goto release;
	}
	imp->conn = tn__tensord_ref(conn);
	strcpy(imp->name, rec->name);
	imp->id = info.id;
	tn_storage *st;
	r = tn_storage_from_blob((tn_device){ TN_DEVICE_CUDA, (int16_t)device },
				 imp->map->base + rec->offset, rec->storage_bytes, import_deleter,
				 imp, &st);
	if (r) {
		tn_tensord_close(imp->conn);
		mapping_put(imp->map);
		free(imp);
		goto release;
	}
	/* From here the storage's deleter releases the hold. */
	r = tn_tensor_new(st, rec->storage_offset, (int)rec->ndim, rec->sizes, rec->strides,
			  (enum tn_dtype)rec->dtype, ret);
	tn_storage_unref(st);
	return r;
release:;
	struct tn__saved_error keep;
	tn__error_save(&keep);
	(void)tn__tensord_cuda_release(conn, name, info.id);
	tn__error_restore(&keep);
	return r;
}
