/* SPDX-License-Identifier: MIT */
/* The layout of the DLPack structures as one translation unit sees them (check_dlpack). */
#ifndef TN_TESTS_DLPACK_LAYOUT_H
#define TN_TESTS_DLPACK_LAYOUT_H

#include <stddef.h>

#include <tensor.h>

struct dl_layout {
	size_t sizeof_device, sizeof_dtype, sizeof_tensor, sizeof_managed, sizeof_versioned;
	size_t off_data, off_device, off_ndim, off_dtype, off_shape, off_strides, off_byte_offset;
	size_t off_manager_ctx, off_deleter;
	int code_int, code_uint, code_float, code_bfloat, code_bool, cpu, cuda;
};

/* dlpack_debian.c: with Debian's dlpack.h included before libtensor's. */
void tn_test_debian_layout(struct dl_layout *l);
int tn_test_read_through_debian(const tn_tensor *t);

#endif
