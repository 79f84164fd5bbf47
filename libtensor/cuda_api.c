/* SPDX-License-Identifier: MIT */
/*
 * The public tn_cuda_* functions: each forwards to the CUDA backend's table (backend.h,
 * TN_CUDA_API_LIST), loading libtensor-cuda on first use. Without a backend (built without
 * CUDA, not installed, or not loadable) each answers as a machine without a GPU would: no
 * devices, nothing pinned, nothing cached, and TN_ENODEV with the reason from the others.
 */
#include "backend.h"

/* The backend's CUDA functions, or NULL with the reason as the last error. */
static const struct tn__cuda_api *cuda(const char *fn)
{
	const struct tn__device_ops *ops;
	if (tn__device_get(TN_DEVICE_CUDA, &ops, fn) < 0)
		return NULL;
	if (!ops->api)
		tn__error(TN_ENODEV, "%s: the CUDA backend '%s' has no tn_cuda_* functions", fn,
			  ops->name);
	return ops->api;
}

/* The backend's functions, keeping the caller's last error: a failed load is not the failure
 * of the calls that succeed without a backend (counts, predicates); the others report it
 * through TN_NO_BACKEND. */
static const struct tn__cuda_api *cuda_quiet(void)
{
	struct tn__saved_error keep;
	tn__error_save(&keep);
	const struct tn__cuda_api *api = cuda("cuda");
	tn__error_restore(&keep);
	return api;
}

#define TN_X_(ret, name, params, args, fallback)                   \
	TN_EXPORT ret tn_cuda_##name params                         \
	{                                                           \
		const struct tn__cuda_api *api = cuda_quiet();      \
		return api ? api->name args : (fallback);           \
	}
TN_CUDA_API_LIST(TN_X_)
#undef TN_X_

TN_EXPORT void tn_cuda_event_destroy(tn_cuda_event *event)
{
	const struct tn__cuda_api *api = cuda_quiet();
	if (api)
		api->event_destroy(event);
}

TN_EXPORT bool tn_tensor_is_pinned(const tn_tensor *t)
{
	const struct tn__cuda_api *api = cuda_quiet();
	return api && api->tensor_is_pinned(t);
}
