/* SPDX-License-Identifier: MIT */
/*
 * Storages: reference-counted bytes with intrusive strong and weak counts.
 *
 * As in c10's intrusive_ptr, weakcount counts the weak references plus one reference held by
 * all the strong ones together. Dropping the last strong reference releases the bytes and then
 * that collective weak reference; dropping the last weak reference frees the handle.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"

static bool storage_ok(const tn_storage *s)
{
	return tn__handle_is(s, TN_MAGIC_STORAGE);
}

static int bad_storage(const char *who)
{
	return tn__error(TN_EBADF, "%s: not a live storage handle (NULL, freed or foreign)", who);
}

static int check_device(tn_device device, const char *who)
{
	if ((unsigned)device.type >= TN_NUM_DEVICE_TYPES)
		return tn__error(TN_EINVAL, "%s: invalid device type %d", who, (int)device.type);
	if (device.index < 0 || (device.type != TN_DEVICE_CUDA && device.index != 0))
		return tn__error(TN_EINVAL, "%s: invalid device index %d for %s", who,
				 device.index, tn_device_type_name(device.type));
	return 0;
}

TN_EXPORT int tn_storage_new_with_allocator(tn_device device, size_t nbytes,
					    const tn_allocator *allocator,
					    tn_storage **ret_storage)
{
	int r;

	if (!ret_storage)
		return tn__error(TN_EINVAL, "tn_storage_new: NULL ret_storage");
	if ((r = check_device(device, "tn_storage_new")))
		return r;
	/* A blob's device is the caller's word; memory libtensor allocates on a backend's device
	 * needs the backend, and the device, which the backend's guard checks. */
	const struct tn__device_ops *dev = NULL;
	const bool backend = device.type != TN_DEVICE_CPU && device.type != TN_DEVICE_META;
	if (backend && (allocator ? nbytes > 0 : true) &&
	    (r = tn__device_get(device.type, &dev, "tn_storage_new")) < 0)
		return r;
	if (device.type != TN_DEVICE_META && !allocator)
		return tn__error(TN_ENODEV, "tn_storage_new: no allocator is registered for %s",
				 tn_device_type_name(device.type));
	if (device.type == TN_DEVICE_META)
		allocator = NULL; /* meta storages track a size and own no bytes */
	if (nbytes > (size_t)INT64_MAX)
		return tn__error(TN_EOVERFLOW, "tn_storage_new: %zu bytes is too large", nbytes);

	tn_storage *s = tn__handle_alloc(sizeof(*s), TN_MAGIC_STORAGE);
	if (!s)
		return tn__error(TN_ENOMEM, "tn_storage_new: out of memory");
	if (allocator && nbytes) {
		/* A device's allocator allocates on the current device: make it the storage's. */
		int saved = 0;
		if (dev && (r = dev->enter(device.index, &saved)) < 0) {
			char why[512];
			snprintf(why, sizeof(why), "%s", tn_last_error());
			tn__handle_free(s);
			return tn__error(r, "tn_storage_new: %s", why);
		}
		/* An allocator may explain its failure (CUDA out of memory). */
		const uint64_t seq = tn__error_seq();
		s->data = allocator->alloc(allocator->ctx, nbytes);
		if (dev)
			dev->leave(saved);
		if (!s->data) {
			tn__handle_free(s);
			if (tn__error_seq() != seq && (r = tn__last_error_code()) < 0)
				return r;
			return tn__error(TN_ENOMEM,
					 "%s: out of memory: tried to allocate %zu bytes",
					 allocator->name ? allocator->name : "allocator", nbytes);
		}
	}
	s->nbytes = nbytes;
	s->allocator = allocator;
	s->device = device;
	s->resizable = true;
	atomic_init(&s->refcount, 1);
	atomic_init(&s->weakcount, 1);
	*ret_storage = s;
	return 0;
}

TN_EXPORT int tn_storage_new(tn_device device, size_t nbytes, tn_storage **ret_storage)
{
	if ((unsigned)device.type >= TN_NUM_DEVICE_TYPES)
		return tn__error(TN_EINVAL, "tn_storage_new: invalid device type %d",
				 (int)device.type);
	return tn_storage_new_with_allocator(device, nbytes, tn_allocator_get(device.type),
					     ret_storage);
}

TN_EXPORT int tn_storage_from_blob(tn_device device, void *data, size_t nbytes, tn_deleter deleter,
				   void *ctx, tn_storage **ret_storage)
{
	int r;

	if (!ret_storage)
		return tn__error(TN_EINVAL, "tn_storage_from_blob: NULL ret_storage");
	if ((r = check_device(device, "tn_storage_from_blob")))
		return r;
	if (!data && nbytes)
		return tn__error(TN_EINVAL, "tn_storage_from_blob: NULL data for %zu bytes", nbytes);
	if (nbytes > (size_t)INT64_MAX || (data && (uintptr_t)data > UINTPTR_MAX - nbytes))
		return tn__error(TN_EOVERFLOW, "tn_storage_from_blob: %zu bytes at %p wrap around",
				 nbytes, data);
	tn_storage *s = tn__handle_alloc(sizeof(*s), TN_MAGIC_STORAGE);
	if (!s)
		return tn__error(TN_ENOMEM, "tn_storage_from_blob: out of memory");
	s->data = data;
	s->nbytes = nbytes;
	s->deleter = deleter;
	s->deleter_ctx = ctx;
	s->device = device;
	s->resizable = false;
	atomic_init(&s->refcount, 1);
	atomic_init(&s->weakcount, 1);
	*ret_storage = s;
	return 0;
}

TN_EXPORT tn_storage *tn_storage_ref(tn_storage *storage)
{
	if (!storage_ok(storage))
		return NULL;
	/* Relaxed: taking a reference needs no ordering, the caller already holds one. */
	atomic_fetch_add_explicit(&storage->refcount, 1, memory_order_relaxed);
	return storage;
}

static void storage_release_data(tn_storage *s)
{
	if (s->allocator && s->data)
		s->allocator->free(s->allocator->ctx, s->data, s->nbytes);
	else if (s->deleter)
		s->deleter(s->data, s->deleter_ctx);
	s->data = NULL;
}

TN_EXPORT tn_storage *tn_storage_weak_unref(tn_storage *storage)
{
	if (!storage_ok(storage))
		return NULL;
	/* acq_rel: the thread that frees the handle must see every other thread's last use. */
	if (atomic_fetch_sub_explicit(&storage->weakcount, 1, memory_order_acq_rel) == 1)
		tn__handle_free(storage);
	return NULL;
}

TN_EXPORT tn_storage *tn_storage_unref(tn_storage *storage)
{
	if (!storage_ok(storage))
		return NULL;
	/* acq_rel: whoever drops the last reference releases the bytes after every other
	 * holder's writes to them. */
	if (atomic_fetch_sub_explicit(&storage->refcount, 1, memory_order_acq_rel) == 1) {
		storage_release_data(storage);
		tn_storage_weak_unref(storage);
	}
	return NULL;
}

TN_EXPORT tn_storage *tn_storage_weak_ref(tn_storage *storage)
{
	if (!storage_ok(storage))
		return NULL;
	atomic_fetch_add_explicit(&storage->weakcount, 1, memory_order_relaxed);
	return storage;
}

TN_EXPORT tn_storage *tn_storage_weak_lock(tn_storage *storage)
{
	if (!storage_ok(storage))
		return NULL;
	int64_t n = atomic_load_explicit(&storage->refcount, memory_order_relaxed);
	/* Only resurrect a count that is still above zero: once it hit zero the bytes are gone. */
	do {
		if (n == 0)
			return NULL;
	} while (!atomic_compare_exchange_weak_explicit(&storage->refcount, &n, n + 1,
							 memory_order_acquire,
							 memory_order_relaxed));
	return storage;
}

TN_EXPORT void *tn_storage_data(const tn_storage *storage)
{
	return storage_ok(storage) ? storage->data : NULL;
}

TN_EXPORT size_t tn_storage_nbytes(const tn_storage *storage)
{
	return storage_ok(storage) ? storage->nbytes : 0;
}

TN_EXPORT tn_device tn_storage_device(const tn_storage *storage)
{
	tn_device cpu = { TN_DEVICE_CPU, 0 };
	return storage_ok(storage) ? storage->device : cpu;
}

TN_EXPORT bool tn_storage_is_resizable(const tn_storage *storage)
{
	return storage_ok(storage) && storage->resizable;
}

TN_EXPORT int64_t tn_storage_use_count(const tn_storage *storage)
{
	return storage_ok(storage) ? atomic_load_explicit(&storage->refcount, memory_order_relaxed)
				   : 0;
}

TN_EXPORT int64_t tn_storage_weak_count(const tn_storage *storage)
{
	if (!storage_ok(storage))
		return 0;
	/* Report the user's weak references, not the one the strong references share. */
	int64_t w = atomic_load_explicit(&storage->weakcount, memory_order_relaxed);
	int64_t s = atomic_load_explicit(&storage->refcount, memory_order_relaxed);
	return s > 0 ? w - 1 : w;
}

TN_EXPORT int tn_storage_resize(tn_storage *storage, size_t nbytes)
{
	if (!storage_ok(storage))
		return bad_storage("tn_storage_resize");
	if (atomic_load_explicit(&storage->refcount, memory_order_acquire) == 0)
		return tn__error(TN_EBADF, "tn_storage_resize: the storage has no strong reference");
	if (!storage->resizable || storage->readonly)
		return tn__error(TN_EPERM, "Trying to resize storage that is not resizable");
	if (nbytes == storage->nbytes)
		return 0;
	if (nbytes < storage->nbytes) {
		int64_t views = atomic_load_explicit(&storage->tensors, memory_order_acquire);
		int64_t refs = atomic_load_explicit(&storage->refcount, memory_order_acquire);
		if (views > 0 || refs > 1)
			return tn__error(TN_EBUSY,
					 "tn_storage_resize: cannot shrink a storage from %zu to %zu "
					 "bytes while %lld tensors view it and %lld references hold it",
					 storage->nbytes, nbytes, (long long)views, (long long)refs);
	}
	if (nbytes > (size_t)INT64_MAX)
		return tn__error(TN_EOVERFLOW, "tn_storage_resize: %zu bytes is too large", nbytes);
	if (!storage->allocator) { /* meta */
		storage->nbytes = nbytes;
		return 0;
	}
	void *data = NULL;
	if (nbytes) {
		data = storage->allocator->alloc(storage->allocator->ctx, nbytes);
		if (!data)
			return tn__error(TN_ENOMEM,
					 "tn_storage_resize: out of memory: tried to allocate %zu bytes",
					 nbytes);
		size_t keep = nbytes < storage->nbytes ? nbytes : storage->nbytes;
		if (keep && storage->device.type == TN_DEVICE_CPU)
			memcpy(data, storage->data, keep);
	}
	if (storage->data)
		storage->allocator->free(storage->allocator->ctx, storage->data, storage->nbytes);
	storage->data = data;
	storage->nbytes = nbytes;
	return 0;
}
