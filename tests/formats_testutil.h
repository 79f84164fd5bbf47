/* SPDX-License-Identifier: MIT */
/*
 * What the suites of tensord's file formats (check_formats, check_loadsave) share: the golden
 * files' descriptions and the reading of one element of a dtype from raw bytes.
 */
#ifndef TN_FORMATS_TESTUTIL_H
#define TN_FORMATS_TESTUTIL_H

#include "testutil.h"

/*
 * What the golden files hold (tests/golden/formats_golden.h, from gen_formats.py). A tensor's
 * values are its elements in file order, as doubles.
 */
struct golden_tensor {
	const char *name;  /* NULL in .npy files */
	const char *dtype; /* tn_dtype_name() */
	int ndim;
	int64_t sizes[16];
	uint64_t offset, nbytes;
	size_t nvalues;
	const double *values;
};

struct golden_st_file {
	const char *file;
	uint64_t file_size, header_len;
	bool reference_layout; /* the reference writer's bytes: tn__safetensors_write's too */
	size_t nmeta;
	const char *const (*meta)[2]; /* key, value; in header order */
	size_t ntensors;
	const struct golden_tensor *tensors; /* in file order */
};

struct golden_npy_file {
	const char *file;
	uint64_t file_size;
	int version;
	bool fortran_order, byteswap;
	bool numpy_header; /* tn__npy_write must make the same header bytes */
	struct golden_tensor t;
};

/* numpy files of dtypes libtensor lacks: TN_ENOTSUP with this in the message. */
struct golden_npy_refused {
	const char *file;
	const char *message_part;
};

#include "golden/formats_golden.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* One element of @dtype at @p, as a double. */
static inline double element(const unsigned char *p, enum tn_dtype dtype)
{
	union {
		int8_t i8;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		float f32;
		double f64;
		tn_half f16;
		tn_bfloat16 bf16;
	} v;

	memcpy(&v, p, tn_dtype_size(dtype));
	switch (dtype) {
	case TN_BOOL:
	case TN_UINT8: return p[0];
	case TN_INT8: return v.i8;
	case TN_INT16: return v.i16;
	case TN_INT32: return v.i32;
	case TN_INT64: return (double)v.i64;
	case TN_FLOAT16: return tn_half_to_float(v.f16);
	case TN_BFLOAT16: return tn_bfloat16_to_float(v.bf16);
	case TN_FLOAT32: return v.f32;
	case TN_FLOAT64: return v.f64;
	default: ck_abort_msg("bad dtype %d", (int)dtype);
	}
	return 0;
}

#endif /* TN_FORMATS_TESTUTIL_H */
