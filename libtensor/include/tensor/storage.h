/* SPDX-License-Identifier: MIT */
/*
 * Storages: reference-counted byte buffers on a device, the memory under every tensor.
 *
 * A storage has atomic strong and weak counts, as the reference notes' intrusive_ptr: the
 * bytes are released when the last strong reference goes, the handle itself when the last weak
 * reference goes too. Handles are checked on every call: a NULL, freed or foreign pointer gets
 * TN_EBADF (or NULL/0 from getters) instead of undefined behaviour, for as long as the freed
 * handle sits in the library's quarantine.
 */
#ifndef TENSOR_STORAGE_H
#define TENSOR_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/alloc.h>
#include <tensor/device.h>
#include <tensor/macros.h>

TN_BEGIN_DECLS

typedef struct tn_storage tn_storage;

/* Called once with the blob and the caller's context when a from_blob storage dies. */
typedef void (*tn_deleter)(void *data, void *ctx);

/*
 * tn_storage_new - allocate @nbytes bytes on @device with that device type's current
 * allocator (tn_allocator_get). The storage is resizable; with 0 bytes its data pointer is
 * NULL. Meta storages record a size and own no bytes, so they need no allocator.
 * *ret_storage gets a new reference. Errors: TN_EINVAL (NULL ret_storage, a device type
 * outside the enum, a negative index, or a non-zero index for the CPU or Meta), TN_ENODEV (no
 * allocator is registered for the device type, as for CUDA today), TN_EOVERFLOW (more than
 * INT64_MAX bytes), TN_ENOMEM.
 */
TN_EXPORT int tn_storage_new(tn_device device, size_t nbytes, tn_storage **ret_storage);

/*
 * tn_storage_new_with_allocator - as tn_storage_new, with an explicit (borrowed) allocator.
 */
TN_EXPORT int tn_storage_new_with_allocator(tn_device device, size_t nbytes,
					    const tn_allocator *allocator,
					    tn_storage **ret_storage);

/*
 * tn_storage_from_blob - wrap @nbytes bytes at @data that the caller owns. When the last strong
 * reference goes, @deleter(data, ctx) is called (if non-NULL). Such a storage is not
 * resizable. @data may be NULL only when @nbytes is 0. On failure the deleter is not called.
 */
TN_EXPORT int tn_storage_from_blob(tn_device device, void *data, size_t nbytes, tn_deleter deleter,
				   void *ctx, tn_storage **ret_storage);

/*
 * tn_storage_ref - add a strong reference; returns @storage (NULL for a bad handle).
 * tn_storage_unref - drop one; accepts NULL; returns NULL.
 */
TN_EXPORT tn_storage *tn_storage_ref(tn_storage *storage);
TN_EXPORT tn_storage *tn_storage_unref(tn_storage *storage);

/*
 * Weak references keep the handle, not the bytes. tn_storage_weak_ref adds one and returns
 * @storage; tn_storage_weak_unref drops one (NULL accepted, returns NULL); tn_storage_weak_lock
 * returns a new strong reference when the storage is still alive, or NULL when the bytes are
 * gone; either way the caller's weak reference is kept and must still be dropped.
 * tn_storage_weak_count counts only weak references taken with tn_storage_weak_ref.
 */
TN_EXPORT tn_storage *tn_storage_weak_ref(tn_storage *storage);
TN_EXPORT tn_storage *tn_storage_weak_unref(tn_storage *storage);
TN_EXPORT tn_storage *tn_storage_weak_lock(tn_storage *storage);

/* Getters: they return 0/NULL/false for a bad handle. Counts are a snapshot. */
TN_EXPORT void *tn_storage_data(const tn_storage *storage);
TN_EXPORT size_t tn_storage_nbytes(const tn_storage *storage);
TN_EXPORT tn_device tn_storage_device(const tn_storage *storage);
TN_EXPORT bool tn_storage_is_resizable(const tn_storage *storage);
TN_EXPORT int64_t tn_storage_use_count(const tn_storage *storage);
TN_EXPORT int64_t tn_storage_weak_count(const tn_storage *storage);

/*
 * tn_storage_resize - change the size to @nbytes, keeping the common prefix of the bytes
 * (new bytes are filled per the allocator's fill mode). The data pointer may change.
 * Errors: TN_EBADF, TN_EPERM (not resizable: "Trying to resize storage that is not
 * resizable"), TN_EBUSY (shrinking while any tensor views the storage or any other reference
 * holds it, which could leave a view reaching past the end), TN_ENOMEM.
 */
TN_EXPORT int tn_storage_resize(tn_storage *storage, size_t nbytes);

TN_END_DECLS

#endif /* TENSOR_STORAGE_H */
