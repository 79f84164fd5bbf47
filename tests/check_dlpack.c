// SPDX-License-Identifier: MIT
/*
 * DLPack export and import (tensor/dlpack.h): the ABI against Debian's DLPack 0.6 header (its
 * layout, and a tensor read through its structures), both managed-tensor forms over every dtype
 * and odd layouts (transposed, stepped, 0-dim, empty), zero copy both ways, who keeps what alive
 * until which deleter, the read-only flag of sealed arena tensors, and bad input (each refused
 * with its message and the producer's deleter left uncalled). PyTorch and NumPy consume and
 * produce through tests/dlpack/dlpack_interop.py.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor.h>

#include "dlpack_layout.h"
#include "testutil.h"

static const enum tn_dtype all_dtypes[] = { TN_BOOL,	TN_UINT8,   TN_INT8,	 TN_INT16,
					    TN_INT32,	TN_INT64,   TN_FLOAT16, TN_BFLOAT16,
					    TN_FLOAT32, TN_FLOAT64 };

START_TEST(test_abi_matches_debian_header)
{
	struct dl_layout deb, ours = {
		.sizeof_device = sizeof(DLDevice),
		.sizeof_dtype = sizeof(DLDataType),
		.sizeof_tensor = sizeof(DLTensor),
		.sizeof_managed = sizeof(DLManagedTensor),
		.sizeof_versioned = sizeof(DLManagedTensorVersioned),
		.off_data = offsetof(DLTensor, data),
		.off_device = offsetof(DLTensor, device),
		.off_ndim = offsetof(DLTensor, ndim),
		.off_dtype = offsetof(DLTensor, dtype),
		.off_shape = offsetof(DLTensor, shape),
		.off_strides = offsetof(DLTensor, strides),
		.off_byte_offset = offsetof(DLTensor, byte_offset),
		.off_manager_ctx = offsetof(DLManagedTensor, manager_ctx),
		.off_deleter = offsetof(DLManagedTensor, deleter),
		.code_int = kDLInt,
		.code_uint = kDLUInt,
		.code_float = kDLFloat,
		.code_bfloat = kDLBfloat,
		.code_bool = kDLBool,
		.cpu = kDLCPU,
		.cuda = kDLCUDA,
	};
	tn_test_debian_layout(&deb);
#define SAME(field) ck_assert_msg(deb.field == ours.field, #field ": Debian %zu, libtensor %zu", \
				  (size_t)deb.field, (size_t)ours.field)
	SAME(sizeof_device);
	SAME(sizeof_dtype);
	SAME(sizeof_tensor);
	SAME(sizeof_managed);
	SAME(sizeof_versioned);
	SAME(off_data);
	SAME(off_device);
	SAME(off_ndim);
	SAME(off_dtype);
	SAME(off_shape);
	SAME(off_strides);
	SAME(off_byte_offset);
	SAME(off_manager_ctx);
	SAME(off_deleter);
	SAME(code_int);
	SAME(code_uint);
	SAME(code_float);
	SAME(code_bfloat);
	SAME(code_bool);
	SAME(cpu);
	SAME(cuda);
#undef SAME
	/* DLPack 1.x's layout of the versioned form: version, ctx, deleter, flags, then the
	 * tensor (64-bit). */
	ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, manager_ctx), 8);
	ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, deleter), 16);
	ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, flags), 24);
	ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
	ck_assert_uint_eq(sizeof(DLTensor), 48);
	ck_assert_int_eq(kDLBool, 6);
	/* A strided tensor read through Debian's structures. */
	int64_t s[2] = { 3, 4 };
	tn_tensor *t, *tt;
	ck_assert_tn_ok(tn_zeros(2, s, TN_FLOAT32, TN_CPU, &t));
	ck_assert_tn_ok(tn_transpose(t, 0, 1, &tt));
	ck_assert_int_eq(tn_test_read_through_debian(tt), 0);
	tn_tensor_unref(tt);
	tn_tensor_unref(t);
}
END_TEST

/* A foreign producer: bytes of its own and a deleter that counts. */
struct foreign {
	DLManagedTensor legacy;
	DLManagedTensorVersioned versioned;
	int64_t shape[4], strides[4];
	unsigned char *bytes;
	int deleted;
};

static void foreign_legacy_deleter(DLManagedTensor *m)
{
	struct foreign *f = m->manager_ctx;
	f->deleted++;
}

static void foreign_versioned_deleter(DLManagedTensorVersioned *m)
{
	struct foreign *f = m->manager_ctx;
	f->deleted++;
}

static void foreign_init(struct foreign *f, DLDataType dt, int ndim, const int64_t *shape,
			 const int64_t *strides, size_t nbytes)
{
	memset(f, 0, sizeof(*f));
	f->bytes = calloc(1, nbytes ? nbytes : 1);
	if (ndim) /* a 0-dim tensor's shape may be NULL */
		memcpy(f->shape, shape, (size_t)ndim * sizeof(int64_t));
	if (strides && ndim)
		memcpy(f->strides, strides, (size_t)ndim * sizeof(int64_t));
	DLTensor d = { f->bytes, { kDLCPU, 0 }, ndim, dt, f->shape, strides ? f->strides : NULL,
		       0 };
	f->legacy = (DLManagedTensor){ d, f, foreign_legacy_deleter };
	f->versioned = (DLManagedTensorVersioned){ { 1, 0 }, f, foreign_versioned_deleter, 0, d };
}

/* Every dtype, several layouts: export both ways, check the fields, import a copy of the
 * description as a foreign producer's and find the same bytes in the same places. */
START_TEST(test_round_trip_every_dtype)
{
	struct tn_baseline b0 = tn_test_baseline();
	for (size_t k = 0; k < sizeof(all_dtypes) / sizeof(all_dtypes[0]); k++) {
		enum tn_dtype dt = all_dtypes[k];
		int64_t s[2] = { 4, 6 };
		double vals[24];
		for (int i = 0; i < 24; i++)
			vals[i] = (i * 7) % 5;
		tn_tensor *base = tn_test_from_values(vals, 2, s, dt), *views[5];
		ck_assert_tn_ok(tn_transpose(base, 0, 1, &views[0]));
		ck_assert_tn_ok(tn_slice(base, 1, 1, 6, 2, &views[1]));
		int64_t zero = 0;
		ck_assert_tn_ok(tn_select(base, 0, 2, &views[2])); /* 1-d, offset */
		ck_assert_tn_ok(tn_as_strided(base, 0, NULL, 0, NULL, &(int64_t){ 15 }, &views[3]));
		ck_assert_tn_ok(tn_empty(1, &zero, dt, TN_CPU, TN_CONTIGUOUS_FORMAT, &views[4]));
		for (int v = 0; v < 5; v++) {
			const tn_tensor *t = views[v];
			for (int versioned = 0; versioned < 2; versioned++) {
				DLManagedTensor *lm = NULL;
				DLManagedTensorVersioned *vm = NULL;
				if (versioned) {
					ck_assert_tn_ok(tn_to_dlpack_versioned(t, &vm));
					ck_assert_uint_eq(vm->version.major, 1);
					ck_assert_uint_eq(vm->flags, 0);
				} else {
					ck_assert_tn_ok(tn_to_dlpack(t, &lm));
				}
				const DLTensor *d = versioned ? &vm->dl_tensor : &lm->dl_tensor;
				ck_assert_int_eq(d->ndim, tn_tensor_ndim(t));
				ck_assert_ptr_eq(d->data, tn_tensor_data(t));
				ck_assert_uint_eq(d->byte_offset, 0);
				ck_assert_int_eq(d->device.device_type, kDLCPU);
				ck_assert_int_eq(d->dtype.lanes, 1);
				ck_assert_int_eq(d->dtype.bits, 8 * (int)tn_dtype_size(dt));
				for (int i = 0; i < d->ndim; i++) {
					ck_assert_int_eq(d->shape[i], tn_tensor_sizes(t)[i]);
					ck_assert_int_eq(d->strides[i], tn_tensor_strides(t)[i]);
				}
				/* A foreign producer with the same description. */
				struct foreign f;
				foreign_init(&f, d->dtype, d->ndim, d->shape, d->strides, 0);
				free(f.bytes);
				f.legacy.dl_tensor.data = f.versioned.dl_tensor.data = d->data;
				tn_tensor *r;
				if (versioned)
					ck_assert_tn_ok(tn_from_dlpack_versioned(&f.versioned, &r));
				else
					ck_assert_tn_ok(tn_from_dlpack(&f.legacy, &r));
				ck_assert_int_eq(tn_tensor_dtype(r), dt);
				ck_assert_ptr_eq(tn_tensor_data(r), tn_tensor_data(t));
				ck_assert_int_eq(tn_tensor_ndim(r), tn_tensor_ndim(t));
				for (int i = 0; i < tn_tensor_ndim(t); i++) {
					ck_assert_int_eq(tn_tensor_sizes(r)[i], tn_tensor_sizes(t)[i]);
					ck_assert_int_eq(tn_tensor_strides(r)[i],
							 tn_tensor_strides(t)[i]);
				}
				ck_assert_int_eq(tn_tensor_numel(r), tn_tensor_numel(t));
				ck_assert_int_eq(f.deleted, 0);
				tn_tensor_unref(r);
				ck_assert_int_eq(f.deleted, 1); /* once, when the tensor went */
				/* libtensor's own export comes back over the same storage. */
				if (versioned)
					ck_assert_tn_ok(tn_from_dlpack_versioned(vm, &r));
				else
					ck_assert_tn_ok(tn_from_dlpack(lm, &r));
				ck_assert_ptr_eq(tn_tensor_storage(r), tn_tensor_storage(t));
				ck_assert_ptr_eq(tn_tensor_data(r), tn_tensor_data(t));
				tn_tensor_unref(r);
			}
		}
		for (int v = 0; v < 5; v++)
			tn_tensor_unref(views[v]);
		tn_tensor_unref(base);
	}
	ck_assert_no_leak(b0);
}
END_TEST

/* The managed tensor keeps the storage alive after the tensor is gone, until its deleter. */
START_TEST(test_export_outlives_the_tensor)
{
	struct tn_baseline b0 = tn_test_baseline();
	int64_t n = 1000;
	tn_tensor *t;
	ck_assert_tn_ok(tn_full(1, &n, tn_scalar_double(2.5), NULL, TN_CPU, &t));
	DLManagedTensorVersioned *m;
	ck_assert_tn_ok(tn_to_dlpack_versioned(t, &m));
	tn_tensor_unref(t);
	const float *p = m->dl_tensor.data;
	for (int i = 0; i < 1000; i++)
		ck_assert_float_eq(p[i], 2.5f);
	m->deleter(m);
	ck_assert_no_leak(b0);
	/* Writes through an import show in the exporter's tensor: the same bytes. */
	ck_assert_tn_ok(tn_zeros(1, &n, TN_INT32, TN_CPU, &t));
	DLManagedTensor *lm;
	ck_assert_tn_ok(tn_to_dlpack(t, &lm));
	struct foreign f;
	foreign_init(&f, lm->dl_tensor.dtype, 1, &n, NULL, 0);
	free(f.bytes);
	f.legacy.dl_tensor.data = lm->dl_tensor.data;
	tn_tensor *r;
	ck_assert_tn_ok(tn_from_dlpack(&f.legacy, &r));
	ck_assert_tn_ok(tn_fill_(r, tn_scalar_int(7)));
	ck_assert_int_eq(((const int32_t *)tn_tensor_data(t))[999], 7);
	tn_tensor_unref(r);
	lm->deleter(lm);
	tn_tensor_unref(t);
	ck_assert_int_eq(f.deleted, 1);
	ck_assert_no_leak(b0);
}
END_TEST

/* Read-only: a sealed arena tensor exports with DLPACK_FLAG_BITMASK_READ_ONLY, and a tensor
 * imported with the flag refuses writes. */
START_TEST(test_read_only)
{
	char dir[] = "/dev/shm/check-dlpack-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	tn_arena_options o;
	tn_arena_options_init(&o);
	o.size = 4 << 20;
	o.dir = dir;
	tn_arena *a;
	ck_assert_tn_ok(tn_arena_create("d.arena", &o, &a));
	ck_assert_tn_ok(tn_arena_use(a));
	int64_t n = 16;
	tn_tensor *w, *ws;
	ck_assert_tn_ok(tn_full(1, &n, tn_scalar_double(1.5), NULL, TN_CPU, &w));
	ck_assert_tn_ok(tn_arena_use(NULL));
	ck_assert_tn_ok(tn_arena_publish(a, "w", w, TN_ARENA_SEAL, NULL));
	ck_assert_tn_ok(tn_arena_lookup(a, "w", &ws, NULL));
	DLManagedTensorVersioned *m;
	ck_assert_tn_ok(tn_to_dlpack_versioned(ws, &m));
	ck_assert_uint_eq(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
	m->deleter(m);
	/* A foreign read-only tensor. */
	struct foreign f;
	foreign_init(&f, (DLDataType){ kDLFloat, 32, 1 }, 1, &n, NULL, 64);
	f.versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
	tn_tensor *r;
	ck_assert_tn_ok(tn_from_dlpack_versioned(&f.versioned, &r));
	ck_assert_tn_error_has(tn_fill_(r, tn_scalar_int(1)), TN_EPERM, "read-only");
	ck_assert_tn_ok(tn_to_dlpack_versioned(r, &m)); /* and it says so again */
	ck_assert_uint_eq(m->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
	m->deleter(m);
	tn_tensor_unref(r);
	ck_assert_int_eq(f.deleted, 1);
	free(f.bytes);
	tn_tensor_unref(ws);
	tn_tensor_unref(w);
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_arena_destroy("d.arena", dir, 0));
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Devices: kDLCUDAHost is host memory; a CUDA tensor keeps its device index both ways. */
START_TEST(test_devices)
{
	int64_t n = 4;
	struct foreign f;
	foreign_init(&f, (DLDataType){ kDLInt, 64, 1 }, 1, &n, NULL, 32);
	f.legacy.dl_tensor.device = (DLDevice){ kDLCUDAHost, 0 };
	tn_tensor *r;
	ck_assert_tn_ok(tn_from_dlpack(&f.legacy, &r));
	ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_CPU);
	tn_tensor_unref(r);
	/* A CUDA tensor described, not touched: this machine may have no GPU. */
	f.legacy.dl_tensor.device = (DLDevice){ kDLCUDA, 1 };
	ck_assert_tn_ok(tn_from_dlpack(&f.legacy, &r));
	ck_assert_int_eq(tn_tensor_device(r).type, TN_DEVICE_CUDA);
	ck_assert_int_eq(tn_tensor_device(r).index, 1);
	DLManagedTensor *m;
	ck_assert_tn_ok(tn_to_dlpack(r, &m));
	ck_assert_int_eq(m->dl_tensor.device.device_type, kDLCUDA);
	ck_assert_int_eq(m->dl_tensor.device.device_id, 1);
	m->deleter(m);
	tn_tensor_unref(r);
	ck_assert_int_eq(f.deleted, 2);
	free(f.bytes);
	/* A Meta tensor has nothing to export. */
	tn_tensor *meta;
	ck_assert_tn_ok(tn_empty(1, &n, TN_FLOAT32, TN_META, TN_CONTIGUOUS_FORMAT, &meta));
	ck_assert_tn_error(tn_to_dlpack(meta, &m), TN_EINVAL,
			   "tn_to_dlpack: a Meta tensor has no data to export");
	tn_tensor_unref(meta);
}
END_TEST

/* Bad input: refused with a message, the producer's deleter never called. */
START_TEST(test_bad_input)
{
	struct tn_baseline b0 = tn_test_baseline();
	int64_t n = 4, neg = -1;
	struct foreign f;
	tn_tensor *r = NULL;
	ck_assert_tn_error(tn_from_dlpack(NULL, &r), TN_EINVAL, "tn_from_dlpack: NULL managed");
	ck_assert_tn_error(tn_to_dlpack(NULL, NULL), TN_EBADF, "tn_to_dlpack: not a tensor handle");
#define REFUSED(setup, code, part)                                                          \
	do {                                                                                \
		foreign_init(&f, (DLDataType){ kDLFloat, 32, 1 }, 1, &n, NULL, 64);         \
		setup;                                                                      \
		ck_assert_tn_error_has(tn_from_dlpack(&f.legacy, &r), code, part);          \
		f.versioned.dl_tensor = f.legacy.dl_tensor;                                 \
		ck_assert_tn_error_has(tn_from_dlpack_versioned(&f.versioned, &r), code, part); \
		ck_assert_int_eq(f.deleted, 0);                                             \
		free(f.bytes);                                                              \
	} while (0)
	REFUSED(f.legacy.dl_tensor.ndim = -1, TN_EINVAL, "ndim -1 outside [0, 64]");
	REFUSED(f.legacy.dl_tensor.ndim = 65, TN_EINVAL, "ndim 65 outside [0, 64]");
	REFUSED(f.legacy.dl_tensor.shape = NULL, TN_EINVAL, "NULL shape for 1 dims");
	REFUSED(f.legacy.dl_tensor.dtype.lanes = 4, TN_ENOTSUP, "4 lanes");
	REFUSED(f.legacy.dl_tensor.dtype = ((DLDataType){ kDLComplex, 64, 1 }), TN_ENOTSUP,
		"DLPack type complex64 is not one of libtensor's dtypes");
	REFUSED(f.legacy.dl_tensor.dtype = ((DLDataType){ kDLFloat, 8, 1 }), TN_ENOTSUP,
		"DLPack type float8");
	REFUSED(f.legacy.dl_tensor.dtype = ((DLDataType){ 99, 8, 1 }), TN_ENOTSUP, "code 99");
	REFUSED(f.legacy.dl_tensor.device = ((DLDevice){ kDLOpenCL, 0 }), TN_ENOTSUP,
		"device type 4 is neither the CPU nor CUDA");
	REFUSED(f.legacy.dl_tensor.device = ((DLDevice){ kDLCUDA, -2 }), TN_EINVAL,
		"CUDA device index -2");
	REFUSED((f.strides[0] = -1, f.legacy.dl_tensor.strides = f.strides), TN_EINVAL,
		"negative stride -1 in dim 0");
	REFUSED(f.legacy.dl_tensor.shape = &neg, TN_EINVAL, "negative size -1 in dim 0");
	REFUSED(f.legacy.dl_tensor.data = NULL, TN_EINVAL, "NULL data for 16 bytes");
	REFUSED((f.shape[0] = INT64_MAX, f.strides[0] = 2, f.legacy.dl_tensor.strides = f.strides),
		TN_EINVAL, "the tensor's bytes overflow");
	REFUSED((f.shape[0] = INT64_MAX, f.strides[0] = INT64_MAX,
		 f.legacy.dl_tensor.strides = f.strides),
		TN_EINVAL, "the strides reach past 2^64 elements");
	/* A version the consumer does not know: refused before anything is read. */
	foreign_init(&f, (DLDataType){ kDLFloat, 32, 1 }, 1, &n, NULL, 64);
	f.versioned.version = (DLPackVersion){ 2, 1 };
	ck_assert_tn_error(tn_from_dlpack_versioned(&f.versioned, &r), TN_ENOTSUP,
			   "tn_from_dlpack_versioned: DLPack version 2.1 (libtensor takes 1.x)");
	ck_assert_int_eq(f.deleted, 0);
	free(f.bytes);
	/* Empty and 0-dim tensors need no bytes; NULL data is fine for an empty one. */
	int64_t zero = 0;
	foreign_init(&f, (DLDataType){ kDLBool, 8, 1 }, 1, &zero, NULL, 0);
	f.legacy.dl_tensor.data = NULL;
	ck_assert_tn_ok(tn_from_dlpack(&f.legacy, &r));
	ck_assert_int_eq(tn_tensor_numel(r), 0);
	ck_assert_int_eq(tn_tensor_dtype(r), TN_BOOL);
	tn_tensor_unref(r);
	ck_assert_int_eq(f.deleted, 1);
	free(f.bytes);
	foreign_init(&f, (DLDataType){ kDLBfloat, 16, 1 }, 0, NULL, NULL, 2);
	ck_assert_tn_ok(tn_from_dlpack(&f.legacy, &r));
	ck_assert_int_eq(tn_tensor_ndim(r), 0);
	ck_assert_int_eq(tn_tensor_dtype(r), TN_BFLOAT16);
	tn_tensor_unref(r);
	free(f.bytes);
#undef REFUSED
	ck_assert_no_leak(b0);
}
END_TEST

static Suite *dlpack_suite(void)
{
	Suite *s = suite_create("dlpack");
	TCase *tc = tcase_create("dlpack");
	tcase_add_test(tc, test_abi_matches_debian_header);
	tcase_add_test(tc, test_round_trip_every_dtype);
	tcase_add_test(tc, test_export_outlives_the_tensor);
	tcase_add_test(tc, test_read_only);
	tcase_add_test(tc, test_devices);
	tcase_add_test(tc, test_bad_input);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(dlpack_suite)
