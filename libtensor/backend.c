/* SPDX-License-Identifier: MIT */
/*
 * The device registry (backend.h): the table of each device type's backend, and the loader of
 * backends that are libraries of their own.
 *
 * Looking a type's table up is one acquire load. The first request for a type with no table
 * loads its library once (dlopen by soname, then from the library directory libtensor was
 * configured for; TN_CUDA_LIBRARY names the file instead, for the build tree's tests and
 * for installations elsewhere), hands it the core's table and registers what it returns. A
 * failure is remembered with its reason and reported by every later request, so a CPU-only
 * program that asks for a GPU learns why once per call, with no further dlopen.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "iter.h"

_Atomic(const struct tn__device_ops *) tn__devices[TN_NUM_DEVICE_TYPES];

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

int tn__device_register(const struct tn__device_ops *ops)
{
	if (!ops || (unsigned)ops->type >= TN_NUM_DEVICE_TYPES)
		return tn__error(TN_EINVAL, "device registry: no table, or an invalid device type");
	const char *name = ops->name ? ops->name : "(unnamed)";
	const char *type = tn_device_type_name(ops->type);
	if (ops->abi != TN_BACKEND_ABI)
		return tn__error(TN_EPROTO, "device registry: backend '%s' has ABI %u, libtensor %u",
				 name, ops->abi, TN_BACKEND_ABI);
	if (ops->type == TN_DEVICE_CPU || ops->type == TN_DEVICE_META)
		return tn__error(TN_EINVAL, "device registry: backend '%s': %s is built in", name,
				 type);
	if (!ops->device_count || !ops->enter || !ops->leave || !ops->allocator || !ops->run ||
	    !ops->fill || !ops->copy || !ops->element_read || !ops->element_write)
		return tn__error(TN_EPROTO, "device registry: backend '%s' leaves an entry of its "
				 "table NULL", name);
	pthread_mutex_lock(&registry_lock);
	const struct tn__device_ops *old =
		atomic_load_explicit(&tn__devices[ops->type], memory_order_relaxed);
	if (old) {
		pthread_mutex_unlock(&registry_lock);
		return tn__error(TN_EEXIST, "device registry: backend '%s' cannot serve %s: "
				 "backend '%s' does", name, type, old->name ? old->name : "(unnamed)");
	}
	/* Release: a thread that loads the pointer sees the table it points to. */
	atomic_store_explicit(&tn__devices[ops->type], ops, memory_order_release);
	pthread_mutex_unlock(&registry_lock);
	return 0;
}

void tn__device_unregister(const struct tn__device_ops *ops)
{
	if (!ops || (unsigned)ops->type >= TN_NUM_DEVICE_TYPES)
		return;
	const struct tn__device_ops *expected = ops;
	atomic_compare_exchange_strong(&tn__devices[ops->type], &expected, NULL);
}

/* ---- the table the core gives a loaded backend ---------------------------------------- */

#define TN_CORE_FILL_(ret, name, params, args) .name = name,
#define TN_CORE_VFILL_(name, params, args) .name = name,
static struct tn__core_api core_api = {
	.abi = TN_BACKEND_ABI,
	.version = PACKAGE_VERSION,
	.sizeof_storage = sizeof(struct tn_storage),
	.sizeof_tensor = sizeof(struct tn_tensor),
	.sizeof_iter = sizeof(struct tn_iter),
	TN_CORE_API_LIST(TN_CORE_FILL_, TN_CORE_VFILL_)
};

void tn__backend_provide_client(const struct tn__client_api *client)
{
	/* Release: a backend that loads the pointer sees the table it points to. */
	atomic_store_explicit(&core_api.client, client, memory_order_release);
}

/* ---- loading ---------------------------------------------------------------------------- */

/* The device types whose backend is a library: its name in messages, its soname, the variable
 * that names its file instead, and whether this build made it. */
static const struct loadable {
	enum tn_device_type type;
	const char *name;
	const char *soname;
	const char *env;
	bool built;
} loadables[] = {
	{ TN_DEVICE_CUDA, "CUDA", TN_CUDA_SONAME, "TN_CUDA_LIBRARY",
#ifdef TN_HAVE_CUDA
	  true
#else
	  false
#endif
	},
};

/* Serialises loads; guards tried[] and missing[]. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
/* Why a type has no backend, once a load was tried. */
static char missing[TN_NUM_DEVICE_TYPES][1024];
static bool tried[TN_NUM_DEVICE_TYPES];

static const struct loadable *loadable_of(enum tn_device_type type)
{
	for (size_t i = 0; i < TN_ARRAY_SIZE(loadables); i++)
		if (loadables[i].type == type)
			return &loadables[i];
	return NULL;
}

/* dlopen @file; on failure append the loader's error to @why. */
static void *open_library(const char *file, char *why, size_t len)
{
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		size_t used = strlen(why);
		snprintf(why + used, len - used, "%s%s", used ? "; " : "", e ? e : file);
	}
	return h;
}

/* Load @l's library and register its table; the reason in missing[] otherwise. */
static void load(const struct loadable *l)
{
	char *why = missing[l->type];
	const char *type = l->name;
	const struct tn__device_ops *ops = NULL;
	void *h = NULL;

	why[0] = '\0';
	if (!l->built) {
		snprintf(why, sizeof(missing[0]), "libtensor was built without %s (configure "
			 "--with-%s)", type, tn_device_type_name(l->type));
		return;
	}
	char loaded[4096];
	/* secure_getenv: a set-user-ID program never loads code a caller's environment names. */
	const char *file = secure_getenv(l->env);
	if (file && *file) {
		snprintf(loaded, sizeof(loaded), "%s", file);
		h = open_library(file, why, sizeof(missing[0]));
	} else {
		/* By soname (the loader's path, ldconfig), then where make install put it. */
		snprintf(loaded, sizeof(loaded), "%s", l->soname);
		if (!(h = open_library(l->soname, why, sizeof(missing[0])))) {
			snprintf(loaded, sizeof(loaded), "%s/%s", TN_LIBDIR, l->soname);
			h = open_library(loaded, why, sizeof(missing[0]));
		}
	}
	if (!h) {
		char detail[sizeof(missing[0])];
		snprintf(detail, sizeof(detail), "%s", why);
		snprintf(why, sizeof(missing[0]), "the %s backend could not be loaded: %.900s",
			 type, detail);
		return;
	}
	why[0] = '\0';
	tn__backend_entry_fn entry;
	*(void **)&entry = dlsym(h, TN_BACKEND_ENTRY);
	const uint32_t *abi = dlsym(h, TN_BACKEND_ABI_SYMBOL);
	int rc;
	if (!entry || !abi) {
		snprintf(why, sizeof(missing[0]), "%.900s is not a libtensor backend (no %s)", loaded,
			 entry ? TN_BACKEND_ABI_SYMBOL : TN_BACKEND_ENTRY);
	} else if (*abi != TN_BACKEND_ABI) {
		snprintf(why, sizeof(missing[0]), "%.800s has backend ABI %u, libtensor %u: install "
			 "the %s backend built with this libtensor", loaded, *abi, TN_BACKEND_ABI,
			 type);
	} else if ((rc = entry(&core_api, &ops)) < 0 || !ops) {
		snprintf(why, sizeof(missing[0]), "%.400s refused to start: %.500s", loaded,
			 tn_last_error());
	} else if (ops->type != l->type) {
		snprintf(why, sizeof(missing[0]), "%.900s serves %s, not %s", loaded,
			 tn_device_type_name(ops->type), tn_device_type_name(l->type));
	} else if (tn__device_register(ops) < 0) {
		snprintf(why, sizeof(missing[0]), "%.1000s", tn_last_error());
	} else {
		return; /* the library stays loaded for the life of the process */
	}
	dlclose(h);
}

int tn__device_missing(enum tn_device_type type, const char *fn)
{
	const struct tn__device_ops *ops;
	if (tn__device_get(type, &ops, fn) == 0)
		return tn__error(TN_ENODEV, "%s: the %s backend '%s' has no such function", fn,
				 loadable_of(type) ? loadable_of(type)->name : tn_device_type_name(type),
				 ops->name);
	return tn__last_error_code();
}

int tn__device_get_slow(enum tn_device_type type, const struct tn__device_ops **ret,
			const char *who)
{
	const char *name = tn_device_type_name(type);
	const struct loadable *l;

	if (!name)
		return tn__error(TN_EINVAL, "%s: invalid device type %d", who, (int)type);
	if (!(l = loadable_of(type)))
		return tn__error(TN_ENODEV, "%s: no backend serves %s tensors", who, name);
	/* One load per type: a second caller waits for the first's outcome. The caller's last
	 * error is kept; only a failure sets one, below. */
	pthread_mutex_lock(&load_lock);
	if (!tried[type] && !atomic_load_explicit(&tn__devices[type], memory_order_acquire)) {
		struct tn__saved_error keep;
		tried[type] = true;
		tn__error_save(&keep);
		load(l);
		tn__error_restore(&keep);
	}
	const struct tn__device_ops *ops =
		atomic_load_explicit(&tn__devices[type], memory_order_acquire);
	char why[sizeof(missing[0])];
	snprintf(why, sizeof(why), "%s", missing[type][0] ? missing[type] : "no backend is registered");
	pthread_mutex_unlock(&load_lock);
	if (ops) {
		*ret = ops;
		return 0;
	}
	return tn__error(TN_ENODEV, "%s: %s", who, why);
}
