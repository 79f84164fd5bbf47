/* SPDX-License-Identifier: MIT */
/*
 * Device types and their names.
 */
#include <stdio.h>

#include "internal.h"

static const char *const device_names[TN_NUM_DEVICE_TYPES] = {
#define TN_X_(e, name) [e] = name,
	TN_DEVICE_TYPE_LIST(TN_X_)
#undef TN_X_
};

TN_EXPORT const char *tn_device_type_name(enum tn_device_type type)
{
	return (unsigned)type < TN_NUM_DEVICE_TYPES ? device_names[type] : NULL;
}

void tn__format_device(char *buf, size_t size, tn_device device)
{
	const char *name = tn_device_type_name(device.type);
	if (!name)
		name = "unknown";
	/* PyTorch names an indexed device with its index ("cuda:0"); the CPU and Meta have none. */
	if (device.type == TN_DEVICE_CUDA)
		snprintf(buf, size, "%s:%d", name, (int)device.index);
	else
		snprintf(buf, size, "%s", name);
}
