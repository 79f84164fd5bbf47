// SPDX-License-Identifier: MIT
/*
 * check_dlpack's other translation unit: Debian's DLPack 0.6 header (libdlpack-dev) first,
 * then libtensor's, as a program that already uses DLPack would include them. It reports the
 * layout of Debian's structures, and reads a tensor libtensor exported through them.
 */
#include <dlpack/dlpack.h>
#include <stddef.h>
#include <string.h>

#include <tensor.h>

#include "dlpack_layout.h"

void tn_test_debian_layout(struct dl_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->sizeof_device = sizeof(DLDevice);
	l->sizeof_dtype = sizeof(DLDataType);
	l->sizeof_tensor = sizeof(DLTensor);
	l->sizeof_managed = sizeof(DLManagedTensor);
	l->off_data = offsetof(DLTensor, data);
	l->off_device = offsetof(DLTensor, device);
	l->off_ndim = offsetof(DLTensor, ndim);
	l->off_dtype = offsetof(DLTensor, dtype);
	l->off_shape = offsetof(DLTensor, shape);
	l->off_strides = offsetof(DLTensor, strides);
	l->off_byte_offset = offsetof(DLTensor, byte_offset);
	l->off_manager_ctx = offsetof(DLManagedTensor, manager_ctx);
	l->off_deleter = offsetof(DLManagedTensor, deleter);
	l->code_int = kDLInt;
	l->code_uint = kDLUInt;
	l->code_float = kDLFloat;
	l->code_bfloat = kDLBfloat;
	l->code_bool = kDLBool; /* libtensor's addition to a 0.x header */
	l->cpu = kDLCPU;
	l->cuda = kDLCUDA;
	/* What libtensor adds to a 0.x header is there too. */
	l->sizeof_versioned = sizeof(DLManagedTensorVersioned);
}

/* Export @t with libtensor and read it back through Debian's structures: 0 when the shape,
 * strides, dtype and data agree. */
int tn_test_read_through_debian(const tn_tensor *t)
{
	DLManagedTensor *m;
	if (tn_to_dlpack(t, &m))
		return 1;
	const DLTensor *d = &m->dl_tensor;
	int bad = d->ndim != tn_tensor_ndim(t) || d->data != tn_tensor_data(t) ||
		  d->device.device_type != kDLCPU || d->byte_offset != 0;
	for (int i = 0; !bad && i < d->ndim; i++)
		bad = d->shape[i] != tn_tensor_sizes(t)[i] || d->strides[i] != tn_tensor_strides(t)[i];
	m->deleter(m);
	return bad ? 2 : 0;
}
