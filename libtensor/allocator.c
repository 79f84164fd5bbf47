/* SPDX-License-Identifier: MIT */
/*
 * The allocator registry: one allocator per device type (c10's SetAllocator/GetAllocator),
 * and a per-thread override of the CPU one (tn_arena_use makes a thread's new CPU storages
 * come from an arena).
 */
#include "internal.h"

static _Atomic(const tn_allocator *) registry[TN_NUM_DEVICE_TYPES];

static const tn_allocator *default_allocator(enum tn_device_type type)
{
	return type == TN_DEVICE_CPU ? tn_cpu_allocator()
	       : type == TN_DEVICE_CUDA ? tn_cuda_caching_allocator()
					: NULL;
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

