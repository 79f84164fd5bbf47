/* SPDX-License-Identifier: MIT */
/*
 * The device registry: how a backend (a device type other than the CPU and Meta) plugs into
 * the core, in the image of ATen's CUDAHooksInterface and DeviceGuardImplInterface and of
 * ggml's backend vtables.
 *
 * A backend fills one table of function pointers (struct tn__device_ops: its devices, their
 * guard, its allocator, the kernel families it runs from an iterator's plan, fill, copies,
 * element access) and a table of its device type's public functions (for CUDA, struct
 * tn__cuda_api behind tn_cuda_*). The core asks the registry for a type's table, never names
 * a backend's functions; the registry loads a backend that is a library of its own
 * (libtensor-cuda.so) on first use.
 *
 * A loaded backend does not link libtensor: the core hands it a table of the core's own
 * functions (struct tn__core_api) when it loads it, and the backend's cuda/core_shim.c
 * forwards its calls of tn__error, tn_storage_ref, tn__iter_build ... through that table. So
 * the same backend serves libtensor.so and the static copy of the library that tensord and
 * the tests link, and nothing of the backend's runtime (cudart) reaches a CPU-only program.
 */
#ifndef TN_BACKEND_H
#define TN_BACKEND_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "../shm/shm.h"

/* Bumped whenever a table below, or a struct whose layout a backend reads (tn_storage,
 * tn_tensor, tn_iter, the tensord records), changes. A backend built for another ABI is
 * refused at load with both numbers. */
#define TN_BACKEND_ABI 1u

/* The kernel families a backend runs from a built iterator (tn__device_ops.run). */
enum tn__kernel_family {
	TN_KERNEL_BINARY,  /* op: TN_BINOP_*, arg: const struct tn__alpha * */
	TN_KERNEL_COMPARE, /* op: TN_CMP_* */
	TN_KERNEL_UNARY,   /* op: TN_UN_* */
	TN_KERNEL_PRED,    /* op: TN_PRED_* */
	TN_KERNEL_BINARY2, /* op: TN_BIN2_* */
	TN_KERNEL_WHERE,
	TN_KERNEL_COPY,
	TN_KERNEL_REDUCE, /* op: TN_RED_*, divisor: mean's element count (1 otherwise) */
	TN_NUM_KERNEL_FAMILIES
};

struct tn_iter;

/* One backend's table. Every pointer is set. */
struct tn__device_ops {
	uint32_t abi;             /* TN_BACKEND_ABI */
	const char *name;         /* "libtensor-cuda 0.1.0 (CUDA runtime 13.0)" */
	enum tn_device_type type; /* the device type it serves */
	/* How many devices of the type this process can use; 0 when none (never fails). */
	int (*device_count)(void);
	/* Make device @index current for the calling thread, saving the previous in *saved;
	 * leave puts it back (a device guard). TN_ENODEV for no such device. */
	int (*enter)(int index, int *saved);
	void (*leave)(int saved);
	/* The type's default allocator (the registry's when none was set). */
	const tn_allocator *(*allocator)(void);
	/* Run a built iterator's plan on the device of its first output, computing in
	 * @compute (what the CPU loop computes in). */
	int (*run)(const struct tn_iter *it, enum tn__kernel_family family, int op,
		   const void *arg, enum tn_dtype compute, double divisor);
	/* Every element of @t set to the element at @elem (t's dtype). */
	int (*fill)(tn_tensor *t, const void *elem);
	/* copy_ with a tensor of this type on either side (the other may be on the CPU). */
	int (*copy)(tn_tensor *dst, const tn_tensor *src, bool non_blocking);
	/* One element of @t at device address @addr, read into / written from host memory. */
	int (*element_read)(const tn_tensor *t, const void *addr, void *out);
	int (*element_write)(tn_tensor *t, void *addr, const void *in);
	/* The type's public functions (struct tn__cuda_api for CUDA); NULL when it has none. */
	const void *api;
};

/*
 * Register @ops for its device type. TN_EEXIST naming both backends when the type has one
 * already; TN_EPROTO for another ABI or a table with a NULL entry.
 */
int tn__device_register(const struct tn__device_ops *ops);
/* Remove @ops if it is the type's table (the tests' fake devices). */
void tn__device_unregister(const struct tn__device_ops *ops);

int tn__device_get_slow(enum tn_device_type type, const struct tn__device_ops **ret,
			const char *who);
extern _Atomic(const struct tn__device_ops *) tn__devices[TN_NUM_DEVICE_TYPES];

/*
 * The table of device type @type, loading its backend library on first use. TN_ENODEV when
 * there is none, with the reason after "@who: ": the library was built without it, its
 * backend is not installed, or the loader's error. A failed load is not retried.
 */
static inline int tn__device_get(enum tn_device_type type, const struct tn__device_ops **ret,
				 const char *who)
{
	/* Acquire pairs with the release store of registration: the table is fully written. */
	const struct tn__device_ops *ops =
		atomic_load_explicit(&tn__devices[type], memory_order_acquire);
	if (TN_LIKELY(ops != NULL)) {
		*ret = ops;
		return 0;
	}
	return tn__device_get_slow(type, ret, who);
}

/* The table of a tensor's device (not the CPU's nor Meta's). */
static inline int tn__device_of(const tn_tensor *t, const struct tn__device_ops **ret,
				const char *who)
{
	return tn__device_get(t->storage->device.type, ret, who);
}

/* Run @family of the built iterator @it on the backend of dispatch key @key (dispatch keys
 * follow the device types); @who names the operator if the backend is missing. */
static inline int tn__device_run(enum tn_dispatch_key key, const struct tn_iter *it,
				 enum tn__kernel_family family, int op, const void *arg,
				 enum tn_dtype compute, double divisor, const char *who)
{
	const struct tn__device_ops *dev;
	int rc = tn__device_get((enum tn_device_type)key, &dev, who);
	return rc < 0 ? rc : dev->run(it, family, op, arg, compute, divisor);
}

/* ---- CUDA's public functions ---------------------------------------------------------- */

/*
 * X(ret, name, params, args, fallback): tn_cuda_<name> in libtensor forwards to the backend's
 * tn__cuda_api_<name>; without a backend it returns @fallback, in which TN_NO_BACKEND is the
 * TN_ENODEV error with the reason. tn_cuda_event_destroy (void) and tn_tensor_is_pinned are
 * written out.
 */
#define TN_NO_BACKEND(fn) tn__device_missing(TN_DEVICE_CUDA, fn)
#define TN_CUDA_API_LIST(X)                                                                      \
	X(int, device_count, (void), (), 0)                                                      \
	X(int, get_device_properties, (int device, tn_cuda_device_properties *ret),              \
	  (device, ret), TN_NO_BACKEND("tn_cuda_get_device_properties"))                         \
	X(int, set_device, (int device), (device), TN_NO_BACKEND("tn_cuda_set_device"))          \
	X(int, current_device, (int *ret_device), (ret_device),                                  \
	  TN_NO_BACKEND("tn_cuda_current_device"))                                               \
	X(int, synchronize, (int device), (device), TN_NO_BACKEND("tn_cuda_synchronize"))        \
	X(int, mem_get_info, (int device, size_t *ret_free, size_t *ret_total),                  \
	  (device, ret_free, ret_total), TN_NO_BACKEND("tn_cuda_mem_get_info"))                  \
	X(tn_cuda_stream, default_stream, (int device), (device), ((tn_cuda_stream){ device, 0 })) \
	X(int, stream_from_pool, (int device, bool high_priority, tn_cuda_stream *ret),          \
	  (device, high_priority, ret), TN_NO_BACKEND("tn_cuda_stream_from_pool"))               \
	X(int, current_stream, (int device, tn_cuda_stream *ret), (device, ret),                 \
	  TN_NO_BACKEND("tn_cuda_current_stream"))                                               \
	X(int, set_current_stream, (tn_cuda_stream stream), (stream),                            \
	  TN_NO_BACKEND("tn_cuda_set_current_stream"))                                           \
	X(int, stream_synchronize, (tn_cuda_stream stream), (stream),                            \
	  TN_NO_BACKEND("tn_cuda_stream_synchronize"))                                           \
	X(int, stream_query, (tn_cuda_stream stream), (stream),                                  \
	  TN_NO_BACKEND("tn_cuda_stream_query"))                                                 \
	X(int, stream_handle, (tn_cuda_stream stream, void **ret_handle), (stream, ret_handle),  \
	  TN_NO_BACKEND("tn_cuda_stream_handle"))                                                \
	X(int, event_create, (unsigned flags, tn_cuda_event **ret_event), (flags, ret_event),    \
	  TN_NO_BACKEND("tn_cuda_event_create"))                                                 \
	X(int, event_record, (tn_cuda_event *event, tn_cuda_stream stream), (event, stream),     \
	  TN_NO_BACKEND("tn_cuda_event_record"))                                                 \
	X(int, event_query, (tn_cuda_event *event), (event), TN_NO_BACKEND("tn_cuda_event_query")) \
	X(int, event_synchronize, (tn_cuda_event *event), (event),                               \
	  TN_NO_BACKEND("tn_cuda_event_synchronize"))                                            \
	X(int, stream_wait_event, (tn_cuda_stream stream, tn_cuda_event *event), (stream, event), \
	  TN_NO_BACKEND("tn_cuda_stream_wait_event"))                                            \
	X(int, event_elapsed_ms, (tn_cuda_event *start, tn_cuda_event *end, float *ret_ms),      \
	  (start, end, ret_ms), TN_NO_BACKEND("tn_cuda_event_elapsed_ms"))                       \
	X(int, allocator_stats, (int device, tn_cuda_memory_stats *ret), (device, ret),          \
	  TN_NO_BACKEND("tn_cuda_allocator_stats"))                                              \
	X(int, reset_peak_memory_stats, (int device), (device),                                  \
	  TN_NO_BACKEND("tn_cuda_reset_peak_memory_stats"))                                      \
	X(int64_t, empty_cache, (void), (), 0)                                                   \
	X(int, set_memory_limit, (int device, uint64_t bytes), (device, bytes),                  \
	  TN_NO_BACKEND("tn_cuda_set_memory_limit"))                                             \
	X(int, record_stream, (const tn_storage *storage, tn_cuda_stream stream),                \
	  (storage, stream), TN_NO_BACKEND("tn_cuda_record_stream"))                             \
	X(const tn_allocator *, caching_allocator, (void), (), NULL)                             \
	X(int, ipc_export,                                                                       \
	  (tn_tensord * conn, const char *name, const tn_tensor *tensor, unsigned mode),        \
	  (conn, name, tensor, mode), TN_NO_BACKEND("tn_cuda_ipc_export"))                       \
	X(int, ipc_unexport, (tn_tensord * conn, const char *name), (conn, name),               \
	  TN_NO_BACKEND("tn_cuda_ipc_unexport"))                                                 \
	X(int64_t, ipc_collect, (void), (), 0)                                                   \
	X(int, ipc_import, (tn_tensord * conn, const char *name, tn_tensor **ret_tensor),       \
	  (conn, name, ret_tensor), TN_NO_BACKEND("tn_cuda_ipc_import"))                         \
	X(int, host_register, (void *ptr, size_t nbytes, unsigned flags), (ptr, nbytes, flags),  \
	  TN_NO_BACKEND("tn_cuda_host_register"))                                                \
	X(int, host_unregister, (void *ptr), (ptr), TN_NO_BACKEND("tn_cuda_host_unregister"))    \
	X(bool, is_pinned, (const void *ptr, size_t nbytes), (ptr, nbytes), false)               \
	X(int, arena_register, (tn_arena * arena), (arena),                                      \
	  TN_NO_BACKEND("tn_cuda_arena_register"))                                               \
	X(int, arena_unregister, (tn_arena * arena), (arena),                                    \
	  TN_NO_BACKEND("tn_cuda_arena_unregister"))

struct tn__cuda_api {
#define TN_X_(ret, name, params, args, fallback) ret(*name) params;
	TN_CUDA_API_LIST(TN_X_)
#undef TN_X_
	void (*event_destroy)(tn_cuda_event *event);
	bool (*tensor_is_pinned)(const tn_tensor *t);
};

/* TN_ENODEV for a call of @fn that needs @type's backend, with the reason it is missing. */
int tn__device_missing(enum tn_device_type type, const char *fn);

/* ---- what the core gives a loaded backend --------------------------------------------- */

struct tnd_cuda_export;
struct tnd_cuda_info;
struct tn_iter_config;

/*
 * X(ret, name, params, args) for functions with a result, V(name, params, args) for void
 * ones: the core functions a backend library may call, each forwarded by its shim.
 * tn__error is forwarded through tn__verror.
 */
#define TN_CORE_API_LIST(X, V)                                                                  \
	X(int, tn__verror, (int code, const char *fmt, va_list ap), (code, fmt, ap))            \
	V(tn__error_save, (struct tn__saved_error * s), (s))                                    \
	V(tn__error_restore, (const struct tn__saved_error *s), (s))                            \
	X(const char *, tn_last_error, (void), ())                                              \
	X(void *, tn__malloc, (size_t size), (size))                                            \
	X(void *, tn__calloc, (size_t n, size_t size), (n, size))                               \
	V(tn__free, (void *ptr), (ptr))                                                         \
	X(bool, tn__fault_fires, (void), ())                                                    \
	X(tn_storage *, tn_storage_ref, (tn_storage * storage), (storage))                      \
	X(tn_storage *, tn_storage_unref, (tn_storage * storage), (storage))                    \
	X(int, tn_storage_from_blob,                                                            \
	  (tn_device device, void *data, size_t nbytes, tn_deleter deleter, void *ctx,         \
	   tn_storage **ret_storage),                                                           \
	  (device, data, nbytes, deleter, ctx, ret_storage))                                    \
	X(int, tn_tensor_new,                                                                   \
	  (tn_storage * storage, int64_t storage_offset, int ndim, const int64_t *sizes,       \
	   const int64_t *strides, enum tn_dtype dtype, tn_tensor **ret_tensor),               \
	  (storage, storage_offset, ndim, sizes, strides, dtype, ret_tensor))                   \
	X(tn_tensor *, tn_tensor_unref, (tn_tensor * tensor), (tensor))                         \
	X(const char *, tn_device_type_name, (enum tn_device_type type), (type))                \
	X(bool, tn__is_non_overlapping_and_dense, (const tn_tensor *t), (t))                    \
	X(int, tn__empty_like_device,                                                           \
	  (tn_device device, enum tn_dtype dtype, int ndim, const int64_t *sizes,              \
	   const int64_t *strides, tn_tensor **ret, const char *who),                           \
	  (device, dtype, ndim, sizes, strides, ret, who))                                      \
	X(int, tn__iter_build,                                                                  \
	  (struct tn_iter * it, const struct tn_iter_config *cfg, const char *who),            \
	  (it, cfg, who))                                                                       \
	V(tn__iter_release, (struct tn_iter * it), (it))                                        \
	V(tn__copy_config,                                                                      \
	  (struct tn_iter_config * cfg, const tn_tensor *dst, const tn_tensor *src),           \
	  (cfg, dst, src))                                                                      \
	X(int, tn__copy_host, (tn_tensor * dst, const tn_tensor *src), (dst, src))              \
	X(int, tn__arena_mapping, (const tn_arena *arena, struct tn__arena_mapping *ret),       \
	  (arena, ret))                                                                         \
	V(tn__arena_observe, (struct tn__arena_observer * observer), (observer))

/* The tensord client's functions a backend may call (CUDA IPC): the client puts its table
 * in the core's (tn__backend_provide_client) when it makes its first connection, since a
 * backend meets a connection only through one. */
#define TN_CLIENT_API_LIST(X, V)                                                                \
	X(tn_tensord *, tn__tensord_ref, (tn_tensord * conn), (conn), NULL)                     \
	V(tn_tensord_close, (tn_tensord * conn), (conn))                                        \
	X(int, tn__tensord_cuda_export,                                                         \
	  (tn_tensord * conn, const struct tnd_cuda_export *rec, struct tnd_cuda_info *ret),   \
	  (conn, rec, ret), TN_NO_CLIENT(tn__tensord_cuda_export))                              \
	X(int, tn__tensord_cuda_import,                                                         \
	  (tn_tensord * conn, const char *name, struct tnd_cuda_info *ret), (conn, name, ret),  \
	  TN_NO_CLIENT(tn__tensord_cuda_import))                                                \
	X(int, tn__tensord_cuda_release, (tn_tensord * conn, const char *name, uint64_t id),    \
	  (conn, name, id), TN_NO_CLIENT(tn__tensord_cuda_release))                             \
	X(int, tn__tensord_cuda_unexport,                                                       \
	  (tn_tensord * conn, const char *name, uint64_t id, struct tnd_cuda_info *ret),       \
	  (conn, name, id, ret), TN_NO_CLIENT(tn__tensord_cuda_unexport))                       \
	X(int, tn__tensord_cuda_stat,                                                           \
	  (tn_tensord * conn, const char *name, uint64_t id, struct tnd_cuda_info *ret),       \
	  (conn, name, id, ret), TN_NO_CLIENT(tn__tensord_cuda_stat))                           \
	X(const char *, tnd_cuda_export_problem, (const struct tnd_cuda_export *m), (m),        \
	  "no tensord connection was made in this process")

#define TN_API_MEMBER_(ret, name, params, args) ret(*name) params;
#define TN_API_VMEMBER_(name, params, args) void(*name) params;
#define TN_CLIENT_MEMBER_(ret, name, params, args, fallback) ret(*name) params;

struct tn__client_api {
	TN_CLIENT_API_LIST(TN_CLIENT_MEMBER_, TN_API_VMEMBER_)
};

struct tn__core_api {
	uint32_t abi;        /* TN_BACKEND_ABI; first, so any backend can read it */
	const char *version; /* PACKAGE_VERSION of the core */
	/* Layouts a backend reads directly, checked against its own at load. */
	uint32_t sizeof_storage, sizeof_tensor, sizeof_iter;
	TN_CORE_API_LIST(TN_API_MEMBER_, TN_API_VMEMBER_)
	/* The tensord client's table once a connection was made, else NULL. */
	_Atomic(const struct tn__client_api *) client;
};

/* The client's table (tensord/client.c, at its first connection). */
void tn__backend_provide_client(const struct tn__client_api *client);

/*
 * The entry point a backend library exports: check @core (its version and layouts), keep it
 * for the shim and return the backend's table in *ret; on a mismatch, TN_EPROTO with the
 * reason (reported through @core). Named TN_BACKEND_ENTRY; called only once the loader has
 * checked the library's TN_BACKEND_ABI_SYMBOL.
 */
#define TN_BACKEND_ENTRY "tn_backend_init"
/* The backend's TN_BACKEND_ABI, a uint32_t the loader reads before calling the entry. */
#define TN_BACKEND_ABI_SYMBOL "tn_backend_abi"
typedef int (*tn__backend_entry_fn)(const struct tn__core_api *core,
				    const struct tn__device_ops **ret);

#endif /* TN_BACKEND_H */
