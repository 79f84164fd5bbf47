/* SPDX-License-Identifier: MIT */
/*
 * The allocator registry: one allocator per device type (c10's SetAllocator/GetAllocator),
 * and a per-thread override of the CPU one (tn_arena_use makes a thread's new CPU storages
 * come from an arena).
 */
#include "backend.h"

static _Atomic(const tn_allocator *) registry[TN_NUM_DEVICE_TYPES];

/* The CPU's own, a backend's (loading it: the first allocation on a device is a first use),
 * none for Meta. Asking leaves the caller's last error as it was. */
static const tn_allocator *default_allocator(enum tn_device_type type)
{
	const struct tn__device_ops *dev;
	struct tn__saved_error keep;

	if (type == TN_DEVICE_CPU)
		return tn_cpu_allocator();
	if (type == TN_DEVICE_META)
		return NULL;
	tn__error_save(&keep);
	int r = tn__device_get(type, &dev, "tn_allocator_get");
	tn__error_restore(&keep);
	return r < 0 ? NULL : dev->allocator();
}

TN_EXPORT int tn_allocator_set(enum tn_device_type type, const tn_allocator *allocator)
{
	if ((unsigned)type >= TN_NUM_DEVICE_TYPES)
		return tn__error(TN_EINVAL, "tn_allocator_set: invalid device type %d", (int)type);
	if (type == TN_DEVICE_META)
		return tn__error(TN_EINVAL, "tn_allocator_set: meta tensors have no memory");
	if (allocator && (!allocator->alloc || !allocator->free))
		return tn__error(TN_EINVAL, "tn_allocator_set: allocator '%s' lacks alloc or free",
				 allocator->name ? allocator->name : "(unnamed)");
	/* Release pairs with the acquire in tn_allocator_get: a storage made on another thread
	 * after the switch sees a fully written allocator struct. */
	atomic_store_explicit(&registry[type], allocator, memory_order_release);
	return 0;
}

static _Thread_local const tn_allocator *thread_cpu_allocator;

void tn__allocator_set_thread(const tn_allocator *allocator)
{
	thread_cpu_allocator = allocator;
}

TN_EXPORT const tn_allocator *tn_allocator_get(enum tn_device_type type)
{
	if ((unsigned)type >= TN_NUM_DEVICE_TYPES)
		return NULL;
	if (type == TN_DEVICE_CPU && thread_cpu_allocator)
		return thread_cpu_allocator;
	const tn_allocator *a = atomic_load_explicit(&registry[type], memory_order_acquire);
	return a ? a : default_allocator(type);
}

