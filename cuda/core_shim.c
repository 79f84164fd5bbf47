/* SPDX-License-Identifier: MIT */
/*
 * libtensor-cuda.so's link to the core: the entry point the core's loader calls, and the core
 * functions the backend's sources call (tn__error, tn_storage_ref, tn__iter_build, ...),
 * each forwarded through the table the core handed over (libtensor/backend.h). The library
 * links no libtensor, so it serves libtensor.so and the static copy of the library alike;
 * -no-undefined at link time proves that nothing else of the core is reached.
 *
 * Compiled into the shared library only: the tests that link the backend's sources into a
 * static program call the core's own functions and register tn__cuda_device_ops themselves.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "../libtensor/iter.h"
#include "../tensord/client.h"

static const struct tn__core_api *core;

/* The client's table, which the core fills in at the first tensord connection. */
static const struct tn__client_api *client(void)
{
	return atomic_load_explicit(&core->client, memory_order_acquire);
}

#define TN_FORWARD_(ret, name, params, args) \
	ret name params                      \
	{                                    \
		return core->name args;      \
	}
#define TN_VFORWARD_(name, params, args) \
	void name params                 \
	{                                \
		core->name args;         \
	}
TN_CORE_API_LIST(TN_FORWARD_, TN_VFORWARD_)

/* A backend only meets a tensord connection that the client made, which provided its table
 * first; without one the handle cannot be a connection. */
#define TN_NO_CLIENT(name) \
	tn__error(TN_EINVAL, "%s: no tensord connection was made in this process", #name)
#define TN_CLIENT_FORWARD_(ret, name, params, args, fallback) \
	ret name params                                       \
	{                                                     \
		const struct tn__client_api *c = client();    \
		return c ? c->name args : (fallback);         \
	}
#define TN_CLIENT_VFORWARD_(name, params, args)        \
	void name params                               \
	{                                              \
		const struct tn__client_api *c = client(); \
		if (c)                                 \
			c->name args;                  \
	}
TN_CLIENT_API_LIST(TN_CLIENT_FORWARD_, TN_CLIENT_VFORWARD_)

int tn__error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	core->tn__verror(code, fmt, ap);
	va_end(ap);
	return code;
}

TN_EXPORT extern const uint32_t tn_backend_abi;
TN_EXPORT const uint32_t tn_backend_abi = TN_BACKEND_ABI;

TN_EXPORT int tn_backend_init(const struct tn__core_api *api, const struct tn__device_ops **ret);

TN_EXPORT int tn_backend_init(const struct tn__core_api *api, const struct tn__device_ops **ret)
{
	if (!api || !ret || api->abi != TN_BACKEND_ABI)
		return TN_EPROTO; /* the loader checked tn_backend_abi: not reached */
	core = api;
	if (strcmp(api->version, PACKAGE_VERSION) != 0)
		return tn__error(TN_EPROTO, "libtensor-cuda is version %s, libtensor %s",
				 PACKAGE_VERSION, api->version);
	if (api->sizeof_storage != sizeof(struct tn_storage) ||
	    api->sizeof_tensor != sizeof(struct tn_tensor) ||
	    api->sizeof_iter != sizeof(struct tn_iter))
		return tn__error(TN_EPROTO, "libtensor-cuda was built for other structure layouts "
				 "than libtensor's (a different build of the same version)");
	*ret = &tn__cuda_device_ops;
	return 0;
}
