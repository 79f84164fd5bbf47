/* SPDX-License-Identifier: MIT */
/*
 * Devices: where a storage's bytes live. Dispatch keys (CPU, CUDA, Meta) map onto these.
 */
#ifndef TENSOR_DEVICE_H
#define TENSOR_DEVICE_H

#include <stdbool.h>

#include <tensor/macros.h>

TN_BEGIN_DECLS

/* X(ENUM, name). Values are ABI. */
#define TN_DEVICE_TYPE_LIST(X) \
	X(TN_DEVICE_CPU, "cpu")    \
	X(TN_DEVICE_CUDA, "cuda")  \
	X(TN_DEVICE_META, "meta")

enum tn_device_type {
#define TN_X_(e, name) e,
	TN_DEVICE_TYPE_LIST(TN_X_)
#undef TN_X_
	TN_NUM_DEVICE_TYPES
};

typedef struct tn_device {
	enum tn_device_type type;
	int index; /* device ordinal; 0 for the CPU and Meta */
} tn_device;

/* The devices of the factories' device argument, as compound literals. */
#define TN_CPU ((tn_device){ TN_DEVICE_CPU, 0 })
#define TN_META ((tn_device){ TN_DEVICE_META, 0 })
#define TN_CUDA(index) ((tn_device){ TN_DEVICE_CUDA, (index) })

/*
 * tn_device_type_name - "cpu", "cuda" or "meta"; NULL when @type is not a device type.
 */
TN_EXPORT const char *tn_device_type_name(enum tn_device_type type);

/*
 * tn_cuda_device_count - the number of CUDA devices this process can use.
 * Returns 0 when libtensor was built without CUDA, when no driver is loaded or no GPU is
 * present; never fails.
 */
TN_EXPORT int tn_cuda_device_count(void);

TN_END_DECLS

#endif /* TENSOR_DEVICE_H */
