/* SPDX-License-Identifier: MIT */
/*
 * The file formats layer of tensord (tensord/formats.h): safetensors and .npy headers parsed
 * from golden files that PyTorch and numpy wrote (tests/golden/gen_formats.py), every field and
 * every data byte checked; the writers against the reference layouts byte for byte; round
 * trips; tables of malformed headers with their messages; every byte of the goldens mutated
 * and every truncation; allocation failures.
 */
#include <stdio.h>

#include "testutil.h"
#include "formats.h"
#include "formats_testutil.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static unsigned char *read_golden(const char *name, size_t *ret_size)
{
	char path[1024];
	unsigned char *buf;
	long size;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", TN_GOLDEN_FORMATS_DIR, name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	size = ftell(f);
	ck_assert_int_ge(size, 0);
	rewind(f);
	buf = malloc((size_t)size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*ret_size = (size_t)size;
	return buf;
}

/* Parse a safetensors file image as tensord does: the length, then the header, which sits in
 * an allocation of its exact size so that ASan sees any read past it. */
static int st_load(const unsigned char *file, size_t size, unsigned flags,
		   struct tn__safetensors **ret)
{
	uint64_t n;
	void *header;
	int r;

	r = tn__safetensors_prefix(file, size < 8 ? size : 8, size, &n);
	if (r)
		return r;
	header = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(header);
	memcpy(header, file + 8, n);
	r = tn__safetensors_parse(header, n, size, flags, ret);
	free(header);
	return r;
}

/* The same for .npy: the prefix, then the header with its exact size. */
static int npy_load(const unsigned char *file, size_t size, struct tn__fmt_tensor *ret)
{
	size_t end;
	void *header;
	int r;

	r = tn__npy_prefix(file, size < TN__NPY_PREFIX_MAX ? size : TN__NPY_PREFIX_MAX, size,
			   &end);
	if (r)
		return r;
	header = malloc(end);
	ck_assert_ptr_nonnull(header);
	memcpy(header, file, end);
	r = tn__npy_parse(header, end, size, ret);
	free(header);
	return r;
}

/* A safetensors image: the length of @json, @json, @data_len zero bytes. */
static unsigned char *st_image(const char *json, size_t json_len, size_t data_len,
			       size_t *ret_size)
{
	unsigned char *file = calloc(1, 8 + json_len + data_len + 1);

	ck_assert_ptr_nonnull(file);
	for (int i = 0; i < 8; i++)
		file[i] = (unsigned char)((uint64_t)json_len >> (8 * i));
	memcpy(file + 8, json, json_len);
	*ret_size = 8 + json_len + data_len;
	return file;
}

/* A .npy image of version @major holding @dict, padded as numpy pads, then @data_len zero
 * bytes. */
static unsigned char *npy_image(int major, const char *dict, size_t data_len, size_t *ret_size)
{
	size_t prefix = major == 1 ? 10 : 12, n = strlen(dict);
	size_t hlen = n + 1 + (64 - (prefix + n + 1) % 64);
	unsigned char *file = calloc(1, prefix + hlen + data_len + 1);

	ck_assert_ptr_nonnull(file);
	memcpy(file, "\x93NUMPY", 6);
	file[6] = (unsigned char)major;
	for (size_t i = 0; i < prefix - 8; i++)
		file[8 + i] = (unsigned char)(hlen >> (8 * i));
	memcpy(file + prefix, dict, n);
	memset(file + prefix + n, ' ', hlen - n - 1);
	file[prefix + hlen - 1] = '\n';
	*ret_size = prefix + hlen + data_len;
	return file;
}

/* A parsed descriptor against a golden one: dtype, shape, where the data is, and every
 * element of the data (@data is the file, swapped already when the file is big-endian). */
static void check_tensor(const struct tn__fmt_tensor *t, const struct golden_tensor *g,
			 const unsigned char *data)
{
	enum tn_dtype dtype;
	size_t itemsize;

	ck_assert_tn_ok(tn_dtype_from_name(g->dtype, &dtype));
	ck_assert_int_eq(t->dtype, dtype);
	ck_assert_int_eq(t->ndim, g->ndim);
	for (int d = 0; d < g->ndim; d++)
		ck_assert_int_eq(t->sizes[d], g->sizes[d]);
	ck_assert_uint_eq(t->offset, g->offset);
	ck_assert_uint_eq(t->nbytes, g->nbytes);
	itemsize = tn_dtype_size(dtype);
	ck_assert_uint_eq(t->nbytes, g->nvalues * itemsize);
	for (size_t i = 0; i < g->nvalues; i++) {
		double got = element(data + t->offset + i * itemsize, dtype);
		ck_assert_msg(got == g->values[i] && signbit(got) == signbit(g->values[i]),
			      "element %zu of %s: %.17g, expected %.17g", i,
			      g->name ? g->name : "the array", got, g->values[i]);
	}
}

/* ---- safetensors: the golden files ---------------------------------------------------------- */

START_TEST(test_st_golden)
{
	const struct golden_st_file *g = &golden_st_files[_i];
	struct tn__safetensors *st;
	unsigned char *file;
	size_t size;
	uint64_t n;

	file = read_golden(g->file, &size);
	ck_assert_uint_eq(size, g->file_size);
	ck_assert_tn_ok(tn__safetensors_prefix(file, 8, size, &n));
	ck_assert_uint_eq(n, g->header_len);
	ck_assert_tn_ok(tn__safetensors_parse(file + 8, n, size, TN__SAFETENSORS_KEEP_METADATA,
					      &st));
	ck_assert_uint_eq(st->header_len, n);
	ck_assert_uint_eq(st->data_offset, 8 + n);
	ck_assert_uint_eq(st->data_len, size - 8 - n);
	ck_assert_uint_eq(st->ntensors, g->ntensors);
	for (size_t i = 0; i < g->ntensors; i++) {
		ck_assert_str_eq(st->tensors[i].name, g->tensors[i].name);
		ck_assert(!st->tensors[i].fortran_order && !st->tensors[i].byteswap);
		check_tensor(&st->tensors[i], &g->tensors[i], file);
	}

	/* Metadata comes back sorted by key, each entry as the header holds it. */
	ck_assert_int_eq(st->has_metadata, g->nmeta > 0);
	ck_assert_uint_eq(st->nmeta, g->nmeta);
	for (size_t i = 0; i < g->nmeta; i++) {
		size_t k = 0;
		while (k < st->nmeta && strcmp(st->meta[k].key, g->meta[i][0]))
			k++;
		ck_assert_uint_lt(k, st->nmeta);
		ck_assert_uint_eq(st->meta[k].key_len, strlen(g->meta[i][0]));
		ck_assert_uint_eq(st->meta[k].value_len, strlen(g->meta[i][1]));
		ck_assert_str_eq(st->meta[k].value, g->meta[i][1]);
		if (i)
			ck_assert_int_lt(strcmp(st->meta[i - 1].key, st->meta[i].key), 0);
	}

	/* Files in the reference writer's layout: the writer makes the same header, the same
	 * offsets, the same file size. */
	if (g->reference_layout) {
		struct tn__fmt_tensor copy[16];
		struct tn__fmt_meta meta[4];
		uint64_t file_size;
		void *header;
		size_t len;

		ck_assert_uint_le(g->ntensors, 16);
		ck_assert_uint_le(g->nmeta, 4);
		/* In reverse file order, to show the writer sorts them itself. */
		for (size_t i = 0; i < g->ntensors; i++) {
			copy[i] = st->tensors[g->ntensors - 1 - i];
			copy[i].offset = copy[i].nbytes = 12345;
		}
		for (size_t i = 0; i < g->nmeta; i++)
			meta[i] = (struct tn__fmt_meta){ g->meta[i][0], strlen(g->meta[i][0]),
							 g->meta[i][1], strlen(g->meta[i][1]) };
		ck_assert_tn_ok(tn__safetensors_write(copy, g->ntensors, meta, g->nmeta, &header,
						      &len, &file_size));
		ck_assert_uint_eq(len, 8 + n);
		ck_assert_uint_eq(file_size, size);
		ck_assert_mem_eq(header, file, len);
		for (size_t i = 0; i < g->ntensors; i++) {
			ck_assert_uint_eq(copy[i].offset, st->tensors[g->ntensors - 1 - i].offset);
			ck_assert_uint_eq(copy[i].nbytes, st->tensors[g->ntensors - 1 - i].nbytes);
		}
		free(header);
	}

	/* Without the flag the metadata is checked and dropped. */
	tn__safetensors_free(st);
	ck_assert_tn_ok(tn__safetensors_parse(file + 8, n, size, 0, &st));
	ck_assert_uint_eq(st->nmeta, 0);
	ck_assert_ptr_null(st->meta);
	ck_assert_int_eq(st->has_metadata, g->nmeta > 0);
	tn__safetensors_free(st);
	free(file);
}
END_TEST

/*
 * The reference implementation's own serialization tests (safetensors/src/tensor.rs): the
 * bytes it writes for these tensors, which this writer must write too.
 */
START_TEST(test_st_reference_vectors)
{
	static const char attn_0[] = "@\0\0\0\0\0\0\0{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],"
				     "\"data_offsets\":[0,24]}}";
	static const char attn0[] = "H\0\0\0\0\0\0\0{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],"
				    "\"data_offsets\":[0,24]}}       ";
	static const char empty[] = "\b\0\0\0\0\0\0\0{}      ";
	static const char framework[] = "(\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ";
	struct tn__fmt_tensor t = { .name = "attn.0", .dtype = TN_FLOAT32, .ndim = 3,
				    .sizes = { 1, 2, 3 } };
	struct tn__fmt_meta pt = { "framework", 9, "pt", 2 };
	uint64_t file_size;
	void *header;
	size_t len;

	ck_assert_tn_ok(tn__safetensors_write(&t, 1, NULL, 0, &header, &len, &file_size));
	ck_assert_uint_eq(len, sizeof(attn_0) - 1);
	ck_assert_mem_eq(header, attn_0, len);
	ck_assert_uint_eq(t.offset, 72);
	ck_assert_uint_eq(t.nbytes, 24);
	ck_assert_uint_eq(file_size, 96);
	free(header);

	t = (struct tn__fmt_tensor){ .name = "attn0", .dtype = TN_FLOAT32, .ndim = 4,
				     .sizes = { 1, 1, 2, 3 } };
	ck_assert_tn_ok(tn__safetensors_write(&t, 1, NULL, 0, &header, &len, &file_size));
	ck_assert_uint_eq(len, sizeof(attn0) - 1);
	ck_assert_mem_eq(header, attn0, len);
	ck_assert_uint_eq(t.offset, 80); /* aligned for the float32 data by the padding */
	free(header);

	ck_assert_tn_ok(tn__safetensors_write(NULL, 0, NULL, 0, &header, &len, &file_size));
	ck_assert_uint_eq(len, sizeof(empty) - 1);
	ck_assert_mem_eq(header, empty, len);
	ck_assert_uint_eq(file_size, 16);
	free(header);

	ck_assert_tn_ok(tn__safetensors_write(NULL, 0, &pt, 1, &header, &len, &file_size));
	ck_assert_uint_eq(len, sizeof(framework) - 1);
	ck_assert_mem_eq(header, framework, len);
	free(header);
}
END_TEST

/* ---- safetensors: round trips -------------------------------------------------------------- */

START_TEST(test_st_round_trip)
{
	struct tn__fmt_tensor t[] = {
		{ .name = "w", .dtype = TN_FLOAT32, .ndim = 2, .sizes = { 3, 4 } },
		{ .name = "b", .dtype = TN_FLOAT32, .ndim = 1, .sizes = { 4 } },
		{ .name = "step", .dtype = TN_INT64, .ndim = 0 },
		{ .name = "empty", .dtype = TN_BFLOAT16, .ndim = 2, .sizes = { 0, 7 } },
		{ .name = "mask", .dtype = TN_BOOL, .ndim = 1, .sizes = { 5 } },
		{ .name = "q\"uo\\te\n\x01/", .dtype = TN_INT8, .ndim = 1, .sizes = { 3 } },
		{ .name = "\xc3\xbcn\xc3\xaf \xf0\x9f\x98\x80", .dtype = TN_FLOAT16, .ndim = 3,
		  .sizes = { 1, 2, 3 } },
		{ .name = "u8", .dtype = TN_UINT8, .ndim = 1, .sizes = { 7 } },
		{ .name = "i16", .dtype = TN_INT16, .ndim = 1, .sizes = { 3 } },
		{ .name = "i32", .dtype = TN_INT32, .ndim = 2, .sizes = { 1, 1 } },
		{ .name = "f64", .dtype = TN_FLOAT64, .ndim = 1, .sizes = { 2 } },
		{ .name = "bf", .dtype = TN_BFLOAT16, .ndim = 1, .sizes = { 9 } },
		{ .name = "deep", .dtype = TN_FLOAT32, .ndim = 16,
		  .sizes = { 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3 } },
		{ .name = "", .dtype = TN_UINT8, .ndim = 1, .sizes = { 1 } },
	};
	struct tn__fmt_meta meta[] = {
		{ "z", 1, "last", 4 },
		{ "k\0ey", 4, "v\"al\n\x7f", 6 },
		{ "", 0, "", 0 },
	};
	static const char *const order[] = {
		"step", "f64", "b", "deep", "w", "i32", "bf", "empty",
		"\xc3\xbcn\xc3\xaf \xf0\x9f\x98\x80", "i16", "q\"uo\\te\n\x01/", "", "u8", "mask",
	};
	const size_t n = ARRAY_SIZE(t);
	struct tn__safetensors *st;
	unsigned char *file;
	uint64_t file_size, end;
	void *header;
	size_t len;

	ck_assert_tn_ok(tn__safetensors_write(t, n, meta, ARRAY_SIZE(meta), &header, &len,
					      &file_size));
	ck_assert_uint_eq(len % 8, 0);
	file = calloc(1, file_size);
	ck_assert_ptr_nonnull(file);
	memcpy(file, header, len);
	free(header);
	ck_assert_tn_ok(st_load(file, file_size, TN__SAFETENSORS_KEEP_METADATA, &st));
	ck_assert_uint_eq(st->ntensors, n);
	ck_assert_uint_eq(st->data_offset, len);
	end = len;
	for (size_t i = 0; i < n; i++) {
		const struct tn__fmt_tensor *p = &st->tensors[i];
		uint64_t numel = 1;
		size_t k = 0;

		/* File order is the writer's: dtypes of larger alignment first, then names. */
		ck_assert_str_eq(p->name, order[i]);
		ck_assert_uint_eq(p->offset, end);
		ck_assert_uint_eq(p->offset % tn_dtype_size(p->dtype), 0);
		end += p->nbytes;
		while (k < n && strcmp(t[k].name, p->name))
			k++;
		ck_assert_uint_lt(k, n);
		ck_assert_int_eq(p->dtype, t[k].dtype);
		ck_assert_int_eq(p->ndim, t[k].ndim);
		ck_assert_mem_eq(p->sizes, t[k].sizes, sizeof(int64_t) * (size_t)p->ndim);
		ck_assert_uint_eq(p->offset, t[k].offset);
		ck_assert_uint_eq(p->nbytes, t[k].nbytes);
		for (int d = 0; d < p->ndim; d++)
			numel *= (uint64_t)p->sizes[d];
		ck_assert_uint_eq(p->nbytes, numel * tn_dtype_size(p->dtype));
	}
	ck_assert_uint_eq(end, file_size);
	/* The metadata, NULs and escapes included, sorted by key. */
	ck_assert_uint_eq(st->nmeta, 3);
	ck_assert_uint_eq(st->meta[0].key_len, 0);
	ck_assert_uint_eq(st->meta[0].value_len, 0);
	ck_assert_uint_eq(st->meta[1].key_len, 4);
	ck_assert_mem_eq(st->meta[1].key, "k\0ey", 4);
	ck_assert_uint_eq(st->meta[1].value_len, 6);
	ck_assert_mem_eq(st->meta[1].value, "v\"al\n\x7f", 6);
	ck_assert_str_eq(st->meta[2].key, "z");
	ck_assert_str_eq(st->meta[2].value, "last");
	tn__safetensors_free(st);
	free(file);
}
END_TEST

START_TEST(test_st_write_errors)
{
	char long_name[TN_ARENA_NAME_MAX + 2];
	struct tn__fmt_tensor t[2] = {
		{ .name = "a", .dtype = TN_FLOAT32, .ndim = 1, .sizes = { 2 }, .offset = 7 },
		{ .name = "b", .dtype = TN_FLOAT32, .ndim = 1, .sizes = { 2 }, .offset = 7 },
	};
	struct tn__fmt_meta meta[2] = { { "k", 1, "v", 1 }, { "k", 1, "w", 1 } };
	uint64_t file_size;
	void *header;
	size_t len;

#define WRITE_FAILS(n, m, nm, part) \
	ck_assert_tn_error_has(tn__safetensors_write(t, n, m, nm, &header, &len, &file_size), \
			       TN_EINVAL, part)
	t[1].name = "a";
	WRITE_FAILS(2, NULL, 0, "safetensors: tensor \"a\" appears twice");
	t[1].name = "__metadata__";
	WRITE_FAILS(2, NULL, 0, "tensor 1: \"__metadata__\" is not a tensor name");
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	t[1].name = long_name;
	WRITE_FAILS(2, NULL, 0, "is longer than 255 bytes");
	t[1].name = "\xff";
	WRITE_FAILS(2, NULL, 0, "tensor 1: name \"\\xff\" is not UTF-8");
	t[1].name = NULL;
	WRITE_FAILS(2, NULL, 0, "tensor 1 has no name");
	t[1].name = "b";
	t[1].sizes[0] = -1;
	WRITE_FAILS(2, NULL, 0, "tensor \"b\": negative size in shape [-1]");
	t[1].sizes[0] = 2;
	t[1].ndim = 17;
	WRITE_FAILS(2, NULL, 0, "tensor \"b\": 17 dims (0 to 16)");
	t[1].ndim = 3;
	t[1].sizes[0] = t[1].sizes[1] = INT64_C(1) << 40;
	t[1].sizes[2] = 1 << 20;
	WRITE_FAILS(2, NULL, 0, "is too large");
	t[1] = (struct tn__fmt_tensor){ .name = "b", .dtype = (enum tn_dtype)99, .offset = 7 };
	WRITE_FAILS(2, NULL, 0, "tensor \"b\": invalid dtype 99");
	/* Tensors of 2^62 bytes each fit; four of them overflow the file's 64-bit offsets. */
	{
		struct tn__fmt_tensor big[4];
		for (int i = 0; i < 4; i++)
			big[i] = (struct tn__fmt_tensor){ .name = (const char *[]){ "a", "b", "c",
										  "d" }[i],
							  .dtype = TN_UINT8, .ndim = 1,
							  .sizes = { INT64_C(1) << 62 } };
		ck_assert_tn_ok(tn__safetensors_write(big, 3, NULL, 0, &header, &len, &file_size));
		ck_assert_uint_eq(file_size, len + 3 * (UINT64_C(1) << 62));
		free(header);
		ck_assert_tn_error(tn__safetensors_write(big, 4, NULL, 0, &header, &len,
							 &file_size),
				   TN_EINVAL, "safetensors: the tensors' bytes overflow 64 bits");
	}
	t[0] = (struct tn__fmt_tensor){ .name = "a", .dtype = TN_FLOAT32, .ndim = 1,
					.sizes = { 2 }, .offset = 7 };
	WRITE_FAILS(1, meta, 2, "safetensors: metadata key \"k\" appears twice");
	meta[1].key = "\xc0\x80"; /* an overlong NUL */
	meta[1].key_len = 2;
	WRITE_FAILS(1, meta, 2, "metadata entry 1 is not two UTF-8 strings");
	WRITE_FAILS(1, NULL, 1, "NULL argument");
	ck_assert_tn_error_has(tn__safetensors_write(t, 1, NULL, 0, NULL, &len, &file_size),
			       TN_EINVAL, "NULL argument");
	/* A failed write leaves the descriptors as they were. */
	ck_assert_uint_eq(t[0].offset, 7);
	ck_assert_uint_eq(t[0].nbytes, 0);
#undef WRITE_FAILS
}
END_TEST

/* ---- safetensors: malformed headers -------------------------------------------------------- */

static const struct st_bad {
	const char *json;
	size_t data_len;
	int code;
	const char *part;
} st_bad[] = {
	/* Not JSON, or not strict JSON. */
	{ "", 0, TN_EINVAL, "byte 8: expected the header (an object), found the end of the header" },
	{ "[]", 0, TN_EINVAL, "byte 8: expected the header (an object), found '['" },
	{ "\xef\xbb\xbf{}", 0, TN_EINVAL, "byte 8: expected the header (an object), found byte 0xef" },
	{ "{", 0, TN_EINVAL, "byte 9: expected a tensor name (a string), found the end" },
	{ "{} x", 0, TN_EINVAL, "byte 11: data after the header's object" },
	{ "{'a':1}", 0, TN_EINVAL, "byte 9: expected a tensor name (a string), found '''" },
	{ "{\"a\" {}}", 0, TN_EINVAL, "byte 13: expected ':' after a tensor name, found '{'" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]},}", 1, TN_EINVAL,
	  "trailing comma in an object" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]} \"b\"", 1, TN_EINVAL,
	  "expected ',' or '}' after a member, found '\"'" },
	{ "{\"a", 0, TN_EINVAL, "unterminated string" },
	{ "{\"a\\", 0, TN_EINVAL, "unterminated string" },
	{ "{\"a\tb\":{}}", 0, TN_EINVAL, "byte 11: control character 0x09 in a string" },
	{ "{\"a\\x\":{}}", 0, TN_EINVAL, "byte 11: invalid escape in a string" },
	{ "{\"\\u12\":{}}", 0, TN_EINVAL, "byte 10: \\u must be followed by 4 hex digits" },
	{ "{\"\\ud800\":{}}", 0, TN_EINVAL, "byte 10: high surrogate \\ud800 is not followed by a low" },
	{ "{\"\\ud800\\u0041\":{}}", 0, TN_EINVAL, "high surrogate \\ud800 is not followed" },
	{ "{\"\\udc00\":{}}", 0, TN_EINVAL, "byte 10: lone low surrogate \\udc00" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]} /**/}", 1, TN_EINVAL,
	  "expected ',' or '}' after a member, found '/'" },
	/* The tensors' fields. */
	{ "{\"a\":{\"dtype\":\"F31\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "safetensors: byte 22: tensor \"a\": unknown dtype \"F31\"" },
	{ "{\"a\":{\"dtype\":\"U16\",\"shape\":[],\"data_offsets\":[0,2]}}", 2, TN_ENOTSUP,
	  "tensor \"a\": dtype U16 has no libtensor dtype" },
	{ "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, TN_ENOTSUP,
	  "dtype F8_E4M3 has no libtensor dtype" },
	{ "{\"a\":{\"dtype\":\"f32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "unknown dtype \"f32\"" },
	{ "{\"a\":{\"dtype\":32,\"shape\":[],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "expected the dtype (a string), found '3'" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "a size must be an integer from 0 to 2^64-1, not -1" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "not 1.0" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "not 1e0" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "leading zero in a number" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "expected a size (an integer), found ']'" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}", 4,
	  TN_EINVAL, "not 18446744073709551616" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}}", 4,
	  TN_ENOTSUP, "tensor \"a\": size 9223372036854775808 is larger than int64" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8, TN_EINVAL,
	  "expected '[' to open the shape, found '\"'" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
	  "\"data_offsets\":[0,1]}}", 1, TN_ENOTSUP, "tensor \"a\": more than 16 dims" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,0]}}", 0,
	  TN_EINVAL, "tensor \"a\": the bytes of shape [4294967296, 4294967296, 2] overflow 64 bits" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4],\"data_offsets\":[0,0]}}", 0,
	  TN_ENOTSUP, "is too large for libtensor's int64 strides" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, TN_EINVAL,
	  "safetensors: byte 13: tensor \"a\": data_offsets [0, 4] hold 4 bytes but shape [2] of "
	  "float32 needs 8" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, TN_EINVAL,
	  "tensor \"a\": data_offsets [8, 0] end before they begin" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, TN_EINVAL,
	  "expected ',' in data_offsets [begin, end], found ']'" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, TN_EINVAL,
	  "expected ']' after data_offsets [begin, end], found ','" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, TN_EINVAL,
	  "byte 13: tensor \"a\": missing field \"data_offsets\"" },
	{ "{\"a\":{}}", 0, TN_EINVAL, "tensor \"a\": missing field \"dtype\"" },
	{ "{\"a\":[]}", 0, TN_EINVAL, "expected a tensor's description (an object), found '['" },
	{ "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
	  TN_EINVAL, "byte 28: tensor \"a\": duplicate field \"dtype\"" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":[1,]}}", 1, TN_EINVAL,
	  "expected a value, found ']'" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":{\"k\":1,}}}", 1,
	  TN_EINVAL, "expected a key (a string), found '}'" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":tru}}", 1, TN_EINVAL,
	  "expected a value, found 't'" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":-}}", 1, TN_EINVAL,
	  "invalid number" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":1.}}", 1, TN_EINVAL,
	  "invalid number: no digit after '.'" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":1e+}}", 1, TN_EINVAL,
	  "invalid number: no digit in the exponent" },
	/* Names. */
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]},"
	  "\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[1,2]}}", 2, TN_EINVAL,
	  "safetensors: tensor \"a\" appears twice" },
	{ "{\"\\u0061\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]},"
	  "\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[1,2]}}", 2, TN_EINVAL,
	  "safetensors: tensor \"a\" appears twice" },
	{ "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, TN_ENOTSUP,
	  "tensor \"a\\u0000b\": a NUL in the name" },
	/* Metadata. */
	{ "{\"__metadata__\":{\"k\":1}}", 0, TN_EINVAL, "expected a metadata value (a string), found '1'" },
	{ "{\"__metadata__\":[]}", 0, TN_EINVAL, "expected \"__metadata__\" (an object), found '['" },
	{ "{\"__metadata__\":{},\"__metadata__\":{}}", 0, TN_EINVAL,
	  "byte 27: \"__metadata__\" appears twice" },
	{ "{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, TN_EINVAL,
	  "safetensors: metadata key \"k\" appears twice" },
	/* The data section. */
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
	  "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 12, TN_EINVAL,
	  "tensor \"b\" begins at byte 4 of the data section but tensor \"a\" ends at 8 (an overlap)" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}", 12, TN_EINVAL,
	  "tensor \"b\" begins at byte 8 of the data section but tensor \"a\" ends at 4 (a gap)" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, TN_EINVAL,
	  "the first tensor, \"a\", begins at byte 4 of the data section, not at 0" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8, TN_EINVAL,
	  "(an overlap)" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 5, TN_EINVAL,
	  "safetensors: the tensors' data is 4 bytes but the file has 5 after the header" },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3, TN_EINVAL,
	  "the tensors' data is 4 bytes but the file has 3 after the header" },
};

START_TEST(test_st_malformed)
{
	const struct st_bad *b = &st_bad[_i];
	struct tn__safetensors *st = NULL;
	unsigned char *file;
	size_t size;

	file = st_image(b->json, strlen(b->json), b->data_len, &size);
	tn_clear_error();
	int r = st_load(file, size, TN__SAFETENSORS_KEEP_METADATA, &st);
	ck_assert_msg(r == b->code, "case %d: %d (%s), expected %d", _i, r, tn_last_error(),
		      b->code);
	ck_assert_msg(strstr(tn_last_error(), b->part) != NULL, "case %d: '%s' lacks '%s'", _i,
		      tn_last_error(), b->part);
	ck_assert_ptr_null(st);
	free(file);
}
END_TEST

/* Failures of the 8-byte prefix, and one exact message. */
START_TEST(test_st_prefix)
{
	unsigned char buf[16] = { 0 };
	struct tn__safetensors *st;
	uint64_t n = 99;

	ck_assert_tn_error(tn__safetensors_prefix(buf, 5, 5, &n), TN_EINVAL,
			   "safetensors: the file has 5 bytes, fewer than the 8 of the header length");
	ck_assert_tn_error_has(tn__safetensors_prefix(buf, 7, 100, &n), TN_EINVAL,
			       "the file has 7 bytes, fewer than the 8");
	buf[0] = 0x01, buf[1] = 0xe1, buf[2] = 0xf5, buf[3] = 0x05; /* 100000001 */
	ck_assert_tn_error(tn__safetensors_prefix(buf, 8, 1 << 30, &n), TN_EINVAL,
			   "safetensors: byte 0: header length 100000001 is over the format's limit "
			   "of 100000000 bytes");
	memset(buf, 0xff, 8);
	ck_assert_tn_error_has(tn__safetensors_prefix(buf, 8, 1 << 30, &n), TN_EINVAL,
			       "header length 18446744073709551615 is over");
	memset(buf, 0, 8);
	buf[0] = 100;
	ck_assert_tn_error(tn__safetensors_prefix(buf, 8, 50, &n), TN_EINVAL,
			   "safetensors: byte 0: header length 100 runs past the end of the file "
			   "(50 bytes)");
	ck_assert_uint_eq(n, 99); /* written on success only */
	buf[0] = 100;
	ck_assert_tn_ok(tn__safetensors_prefix(buf, 8, 108, &n));
	ck_assert_uint_eq(n, 100);
	buf[0] = 0;
	ck_assert_tn_ok(tn__safetensors_prefix(buf, 8, 8, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_tn_error_has(tn__safetensors_prefix(NULL, 8, 8, &n), TN_EINVAL, "NULL");
	/* The parser checks the sizes it is given as well. */
	ck_assert_tn_error_has(tn__safetensors_parse("{}", 2, 9, 0, &st), TN_EINVAL,
			       "a header of 2 bytes in a file of 9 bytes");
	ck_assert_tn_error_has(tn__safetensors_parse("{}", 2, 10, 0, NULL), TN_EINVAL, "NULL");
	/* Not UTF-8: a stray continuation byte, an overlong form, a surrogate, past U+10FFFF. */
	static const char *const not_utf8[] = { "{\"\x80\":1}", "{\"\xc0\xaf\":1}",
						"{\"\xed\xa0\x80\":1}", "{\"\xf4\x90\x80\x80\":1}",
						"{\"\xe2\x82\":1}" };
	for (size_t i = 0; i < ARRAY_SIZE(not_utf8); i++)
		ck_assert_tn_error(tn__safetensors_parse(not_utf8[i], strlen(not_utf8[i]),
							 8 + strlen(not_utf8[i]), 0, &st),
				   TN_EINVAL, "safetensors: byte 10: the header is not valid UTF-8");
}
END_TEST

/* A header the reference accepts though no writer makes it: values of every JSON kind in an
 * unknown field, escapes in names, null metadata, zero-size tensors sharing an offset. */
START_TEST(test_st_accepts)
{
	static const char json[] =
		" \t\r\n{ \"__metadata__\" : null ,\n"
		"\"e2\":{\"shape\":[3,0],\"dtype\":\"BF16\",\"data_offsets\":[0,0]},"
		"\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\":{\"dtype\":\"I16\",\"shape\":[2],"
		"\"data_offsets\":[0,4],\"x\":{\"a\":[{},[],\"\",-0.5e-3,0,1E+2,true,false,null]}},"
		"\"e1\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[0,0]}}  ";
	static const char name[] = "\xc3\xa9\xf0\x9f\x98\x80\"\\/\b\f\n\r\t";
	struct tn__safetensors *st;
	unsigned char *file;
	size_t size;

	file = st_image(json, sizeof(json) - 1, 4, &size);
	ck_assert_tn_ok(st_load(file, size, TN__SAFETENSORS_KEEP_METADATA, &st));
	ck_assert(!st->has_metadata);
	ck_assert_uint_eq(st->ntensors, 3);
	/* By offset, then size, then name. */
	ck_assert_str_eq(st->tensors[0].name, "e1");
	ck_assert_str_eq(st->tensors[1].name, "e2");
	ck_assert_str_eq(st->tensors[2].name, name);
	ck_assert_int_eq(st->tensors[2].dtype, TN_INT16);
	ck_assert_uint_eq(st->tensors[2].offset, 8 + sizeof(json) - 1);
	ck_assert_uint_eq(st->tensors[0].offset, st->tensors[2].offset);
	ck_assert_int_eq(st->tensors[1].dtype, TN_BFLOAT16);
	ck_assert_int_eq(st->tensors[1].sizes[0], 3);
	tn__safetensors_free(st);
	free(file);
	tn__safetensors_free(NULL);
}
END_TEST

/* Values skipped in a tensor's unknown field nest up to 64 deep, no deeper. */
START_TEST(test_st_nesting)
{
	char json[512];
	struct tn__safetensors *st;
	unsigned char *file;
	size_t size;

	for (int depth = 63; depth <= 66; depth++) {
		int n = snprintf(json, sizeof(json), "{\"a\":{\"x\":");
		for (int i = 0; i < depth; i++) {
			json[n++] = i % 2 ? '[' : '{';
			if (i % 2 == 0 && i < depth - 1)
				n += sprintf(json + n, "\"k\":");
		}
		for (int i = depth - 1; i >= 0; i--)
			json[n++] = i % 2 ? ']' : '}';
		n += sprintf(json + n, ",\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}");
		file = st_image(json, (size_t)n, 1, &size);
		if (depth <= 64) {
			ck_assert_tn_ok(st_load(file, size, 0, &st));
			tn__safetensors_free(st);
		} else {
			ck_assert_tn_error_has(st_load(file, size, 0, &st), TN_EINVAL,
					       "values nested deeper than 64");
		}
		free(file);
	}
}
END_TEST

/* ---- .npy: the golden files ---------------------------------------------------------------- */

START_TEST(test_npy_golden)
{
	const struct golden_npy_file *g = &golden_npy_files[_i];
	struct tn__fmt_tensor t, w;
	unsigned char *file, header[TN__NPY_HEADER_MAX];
	int64_t strides[TN_ARENA_MAX_DIMS];
	size_t size, end, len;

	file = read_golden(g->file, &size);
	ck_assert_uint_eq(size, g->file_size);
	ck_assert_tn_ok(tn__npy_prefix(file, TN__NPY_PREFIX_MAX, size, &end));
	ck_assert_uint_eq(end, g->t.offset);
	ck_assert_int_eq(file[6], g->version);
	ck_assert_tn_ok(tn__npy_parse(file, end, size, &t));
	ck_assert_ptr_null(t.name);
	ck_assert_int_eq(t.fortran_order, g->fortran_order);
	ck_assert_int_eq(t.byteswap, g->byteswap);
	if (t.byteswap)
		tn__fmt_byteswap(file + t.offset, t.nbytes, tn_dtype_size(t.dtype));
	check_tensor(&t, &g->t, file);

	/* Strides in elements: C order or column-major, an empty dim counting as 1. */
	tn__fmt_strides(&t, strides);
	for (int d = 0; d < t.ndim; d++) {
		int64_t expect = 1;
		for (int e = 0; e < t.ndim; e++)
			if (g->fortran_order ? e < d : e > d)
				expect *= t.sizes[e] ? t.sizes[e] : 1;
		ck_assert_int_eq(strides[d], expect);
	}

	/* numpy.save's header, byte for byte, from the descriptor. */
	if (g->numpy_header) {
		w = t;
		w.offset = w.nbytes = 0;
		ck_assert_tn_ok(tn__npy_write(&w, header, sizeof(header), &len));
		ck_assert_uint_eq(len, end);
		ck_assert_mem_eq(header, file, len);
		ck_assert_uint_eq(w.offset, end);
		ck_assert_uint_eq(w.nbytes, t.nbytes);
	}
	free(file);
}
END_TEST

START_TEST(test_npy_refused)
{
	const struct golden_npy_refused *g = &golden_npy_refused[_i];
	struct tn__fmt_tensor t;
	unsigned char *file;
	size_t size;

	file = read_golden(g->file, &size);
	ck_assert_tn_error_has(npy_load(file, size, &t), TN_ENOTSUP, g->message_part);
	ck_assert_msg(!strncmp(tn_last_error(), "npy: byte ", 10), "%s", tn_last_error());
	free(file);
}
END_TEST

/* ---- .npy: round trips ------------------------------------------------------------------- */

START_TEST(test_npy_round_trip)
{
	static const struct {
		int ndim;
		int64_t sizes[TN_ARENA_MAX_DIMS];
	} shapes[] = {
		{ 0, { 0 } },
		{ 1, { 0 } },
		{ 1, { 7 } },
		{ 2, { 3, 4 } },
		{ 3, { 1, 0, 5 } },
		{ 2, { INT64_C(1) << 40, 2 } },
		{ 16, { 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3 } },
		{ 16, { 0, 1000000000, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1000000000 } },
	};
	unsigned char buf[TN__NPY_HEADER_MAX];
	struct tn__fmt_tensor t, back;
	size_t len;

	for (int dt = 0; dt < TN_NUM_DTYPES; dt++) {
		for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
			for (int fortran = 0; fortran < 2; fortran++) {
				t = (struct tn__fmt_tensor){ .dtype = (enum tn_dtype)dt,
							     .ndim = shapes[s].ndim,
							     .fortran_order = fortran };
				memcpy(t.sizes, shapes[s].sizes, sizeof(t.sizes));
				if (dt == TN_BFLOAT16) {
					ck_assert_tn_error(
						tn__npy_write(&t, buf, sizeof(buf), &len),
						TN_ENOTSUP, "npy: numpy has no dtype for bfloat16");
					continue;
				}
				ck_assert_tn_ok(tn__npy_write(&t, buf, sizeof(buf), &len));
				ck_assert_uint_eq(len % 64, 0);
				ck_assert_uint_eq(t.offset, len);
				ck_assert_int_eq(buf[len - 1], '\n');
				/* A file that ends right after the data, at its header only. */
				ck_assert_tn_ok(tn__npy_parse(buf, len, len + t.nbytes, &back));
				ck_assert_int_eq(back.dtype, t.dtype);
				ck_assert_int_eq(back.ndim, t.ndim);
				ck_assert_mem_eq(back.sizes, t.sizes,
						 sizeof(int64_t) * (size_t)t.ndim);
				ck_assert_int_eq(back.fortran_order, fortran);
				ck_assert(!back.byteswap);
				ck_assert_uint_eq(back.offset, len);
				ck_assert_uint_eq(back.nbytes, t.nbytes);
				if (t.nbytes)
					ck_assert_tn_error_has(tn__npy_parse(buf, len,
									     len + t.nbytes - 1,
									     &back),
							       TN_EINVAL, "npy: the data needs");
			}
		}
	}

	t = (struct tn__fmt_tensor){ .dtype = TN_FLOAT32, .ndim = 2, .sizes = { 2, 3 } };
	ck_assert_tn_error(tn__npy_write(&t, buf, 127, &len), TN_EINVAL,
			   "npy: the header needs 128 bytes, the buffer has 127");
	t.sizes[1] = -3;
	ck_assert_tn_error(tn__npy_write(&t, buf, sizeof(buf), &len), TN_EINVAL,
			   "npy: negative size in shape [2, -3]");
	t.sizes[1] = INT64_MAX;
	ck_assert_tn_error(tn__npy_write(&t, buf, sizeof(buf), &len), TN_EINVAL,
			   "npy: shape [2, 9223372036854775807] is too large");
	t.ndim = 17;
	ck_assert_tn_error(tn__npy_write(&t, buf, sizeof(buf), &len), TN_EINVAL,
			   "npy: 17 dims (0 to 16)");
	t.dtype = (enum tn_dtype)-1;
	ck_assert_tn_error(tn__npy_write(&t, buf, sizeof(buf), &len), TN_EINVAL,
			   "npy: numpy has no dtype for an invalid dtype");
}
END_TEST

/* ---- .npy: malformed headers --------------------------------------------------------------- */

static const struct npy_bad {
	int major;
	const char *dict;
	size_t data_len;
	int code;
	const char *part;
} npy_bad[] = {
	{ 1, "", 0, TN_EINVAL, "npy: byte 64: expected '{' to open the header dict, found the end" },
	{ 1, "{'descr': '<f4', 'fortran_order': False}", 0, TN_EINVAL,
	  "the header dict has no 'shape'" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", 4, TN_EINVAL,
	  "npy: byte 64: unexpected key 'extra' (numpy writes descr, fortran_order and shape)" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'shape': ()}", 4, TN_EINVAL,
	  "key 'shape' appears twice" },
	{ 1, "{'descr': '<f4', 'fortran_order': false, 'shape': ()}", 4, TN_EINVAL,
	  "npy: byte 44: fortran_order must be True or False, not 'false'" },
	{ 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", 4, TN_EINVAL,
	  "fortran_order must be True or False, not '0'" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", 24, TN_EINVAL,
	  "shape must be a tuple, found '['" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, TN_EINVAL,
	  "shape must be a tuple: a single size needs a trailing comma" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4, TN_EINVAL,
	  "expected a size (an integer), found '-'" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", 4, TN_EINVAL,
	  "size is not a decimal integer" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,)}", 64, TN_EINVAL,
	  "size is not a decimal integer" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", 4, TN_EINVAL,
	  "size with a leading zero" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", 8, TN_EINVAL,
	  "expected ',' or ')' in the shape, found '2'" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,)}", 0,
	  TN_EINVAL, "size is larger than int64" },
	{ 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 0,
	  TN_EINVAL, "npy: the bytes of shape [4294967296, 4294967296] overflow 64 bits" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}",
	  4, TN_ENOTSUP, "more than 16 dims" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 11, TN_EINVAL,
	  "npy: the data needs 12 bytes from byte 128 but the file has 11" },
	{ 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}", 12, TN_EINVAL,
	  "size is not a decimal integer" },
	{ 1, "{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': ()}", 4, TN_ENOTSUP,
	  "escapes in strings are not supported" },
	{ 1, "{'descr': '<f4' 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "expected ',' or '}' after a value, found '''" },
	{ 1, "{'descr': '<f4, 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "descr '<f4, ' is not a numpy dtype libtensor knows" },
	{ 1, "{'descr': '<f4}", 4, TN_EINVAL, "unterminated string" },
	{ 1, "{descr: '<f4', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "expected a key (a quoted string), found 'd'" },
	{ 1, "{'descr' '<f4', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "expected ':' after a key, found '''" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()} # comment", 4, TN_EINVAL,
	  "'#' after the header dict" },
	{ 1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}}", 4, TN_EINVAL,
	  "'}' after the header dict" },
	{ 1, "{'descr': '<u2', 'fortran_order': False, 'shape': ()}", 2, TN_ENOTSUP,
	  "npy: byte 20: numpy dtype '<u2' has no libtensor dtype" },
	{ 1, "{'descr': '<f16', 'fortran_order': False, 'shape': ()}", 16, TN_ENOTSUP,
	  "numpy dtype '<f16' has no libtensor dtype" },
	{ 1, "{'descr': '|O', 'fortran_order': False, 'shape': ()}", 8, TN_ENOTSUP,
	  "numpy dtype '|O' has no libtensor dtype" },
	{ 1, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': ()}", 8, TN_ENOTSUP,
	  "numpy dtype '<M8[ns]' has no libtensor dtype" },
	{ 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}", 4, TN_ENOTSUP,
	  "structured dtypes (a descr list) are not supported" },
	{ 1, "{'descr': '|f4', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "descr '|f4': byte order '|' for a 4-byte type" },
	{ 1, "{'descr': 'f4', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "descr 'f4' is not a numpy dtype libtensor knows" },
	{ 1, "{'descr': '<x4', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "descr '<x4' is not a numpy dtype" },
	{ 1, "{'descr': '<', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "descr '<' is not a numpy dtype" },
	{ 1, "{'descr': 4, 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "expected descr (a quoted string), found '4'" },
	{ 3, "{'descr': '<f4\xff', 'fortran_order': False, 'shape': ()}", 4, TN_EINVAL,
	  "npy: byte 26: a 3.0 header that is not UTF-8" },
};

START_TEST(test_npy_malformed)
{
	const struct npy_bad *b = &npy_bad[_i];
	struct tn__fmt_tensor t;
	unsigned char *file;
	size_t size;

	file = npy_image(b->major, b->dict, b->data_len, &size);
	tn_clear_error();
	int r = npy_load(file, size, &t);
	ck_assert_msg(r == b->code, "case %d: %d (%s), expected %d", _i, r, tn_last_error(),
		      b->code);
	ck_assert_msg(strstr(tn_last_error(), b->part) != NULL, "case %d: '%s' lacks '%s'", _i,
		      tn_last_error(), b->part);
	free(file);
}
END_TEST

/* What numpy reads though it does not write it: Python 2's L suffix in 1.0 and 2.0 files, any
 * quotes and spacing, a missing newline, big-endian and byte-order-free 1-byte types, data
 * beyond what the header asks for. */
START_TEST(test_npy_accepts)
{
	static const struct {
		int major;
		const char *dict;
		enum tn_dtype dtype;
		int ndim;
		int64_t sizes[3];
		bool fortran, swap;
	} ok[] = {
		{ 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3L, 4L), }", TN_INT64, 2,
		  { 3, 4 }, false, false },
		{ 2, "{\"shape\":(2,),\"fortran_order\":True,\"descr\":\">f2\"}", TN_FLOAT16, 1,
		  { 2 }, true, true },
		{ 3, "{ 'descr' : '=b1' ,\n\t'fortran_order' : False , 'shape' : ( 0 , 5 , ) , }",
		  TN_BOOL, 2, { 0, 5 }, false, false },
		{ 1, "{'descr': '>u1', 'fortran_order': False, 'shape': ()}", TN_UINT8, 0, { 0 },
		  false, false },
		{ 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (1,1,1)}", TN_INT8, 3,
		  { 1, 1, 1 }, false, false },
	};
	struct tn__fmt_tensor t;
	unsigned char *file;
	size_t size;

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		file = npy_image(ok[i].major, ok[i].dict, 100, &size);
		ck_assert_tn_ok(npy_load(file, size, &t));
		ck_assert_int_eq(t.dtype, ok[i].dtype);
		ck_assert_int_eq(t.ndim, ok[i].ndim);
		ck_assert_mem_eq(t.sizes, ok[i].sizes, sizeof(int64_t) * (size_t)t.ndim);
		ck_assert_int_eq(t.fortran_order, ok[i].fortran);
		ck_assert_int_eq(t.byteswap, ok[i].swap);
		ck_assert_uint_eq(t.offset, size - 100);
		free(file);
	}
	/* No newline at the end of the padding. */
	file = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4, &size);
	file[size - 5] = ' ';
	ck_assert_tn_ok(npy_load(file, size, &t));
	free(file);
}
END_TEST

START_TEST(test_npy_prefix)
{
	unsigned char buf[16];
	size_t end = 99;
	struct tn__fmt_tensor t;

	memcpy(buf, "\x93NUMPY\x01\x00\x76\x00\x00\x00", 12);
	ck_assert_tn_error(tn__npy_prefix(buf, 5, 5, &end), TN_EINVAL,
			   "npy: not a .npy file: it does not begin with \"\\x93NUMPY\"");
	ck_assert_tn_error(tn__npy_prefix("\x93NUMPX\x01\x00\x76\x00", 10, 200, &end), TN_EINVAL,
			   "npy: not a .npy file: it does not begin with \"\\x93NUMPY\"");
	ck_assert_tn_error(tn__npy_prefix(buf, 7, 7, &end), TN_EINVAL,
			   "npy: the file ends in its format version");
	ck_assert_tn_error(tn__npy_prefix(buf, 9, 9, &end), TN_EINVAL,
			   "npy: the file ends in its header length");
	ck_assert_tn_error(tn__npy_prefix(buf, 10, 127, &end), TN_EINVAL,
			   "npy: byte 8: the header (118 bytes) runs past the end of the file "
			   "(127 bytes)");
	ck_assert_tn_error(tn__npy_prefix(buf, 12, 10, &end), TN_EINVAL,
			   "npy: 12 bytes given of a file of 10");
	ck_assert_uint_eq(end, 99);
	ck_assert_tn_ok(tn__npy_prefix(buf, 10, 128, &end));
	ck_assert_uint_eq(end, 128);
	buf[6] = 4;
	ck_assert_tn_error(tn__npy_prefix(buf, 10, 128, &end), TN_ENOTSUP,
			   "npy: byte 6: format version 4.0 (numpy writes 1.0, 2.0 and 3.0)");
	buf[6] = 1, buf[7] = 1;
	ck_assert_tn_error_has(tn__npy_prefix(buf, 10, 128, &end), TN_ENOTSUP, "version 1.1");
	buf[6] = 2, buf[7] = 0;
	ck_assert_tn_error_has(tn__npy_prefix(buf, 11, 128, &end), TN_EINVAL,
			       "ends in its header length");
	buf[8] = 0x11, buf[9] = 0x27; /* 10001 */
	ck_assert_tn_error(tn__npy_prefix(buf, 12, 1 << 20, &end), TN_EINVAL,
			   "npy: byte 8: a header of 10001 bytes is over numpy's limit of 10000");
	buf[6] = 1;
	ck_assert_tn_error_has(tn__npy_prefix(buf, 12, 1 << 20, &end), TN_EINVAL, "10001 bytes");
	buf[9] = 0;
	ck_assert_tn_error_has(tn__npy_parse(buf, 12, 1 << 20, &t), TN_EINVAL,
			       "npy: 12 bytes given, but the header ends at byte 27");
	ck_assert_tn_error_has(tn__npy_parse(buf, 12, 1 << 20, NULL), TN_EINVAL, "NULL");
	ck_assert_tn_error_has(tn__npy_prefix(NULL, 12, 1 << 20, &end), TN_EINVAL, "NULL");
}
END_TEST

/* ---- robustness ---------------------------------------------------------------------------- */

/*
 * Every byte of every golden file replaced by a few values, and every truncation: the parsers
 * accept or refuse (TN_EINVAL, TN_ENOTSUP, with their prefix), never crash or read out of
 * bounds (ASan builds see that: the header is in an allocation of its size); what they accept
 * tiles the file.
 */
static void check_mutation(const unsigned char *file, size_t size, bool npy)
{
	struct tn__safetensors *st = NULL;
	struct tn__fmt_tensor t;
	int r;

	tn_clear_error();
	if (npy)
		r = npy_load(file, size, &t);
	else
		r = st_load(file, size, TN__SAFETENSORS_KEEP_METADATA, &st);
	if (r) {
		ck_assert_msg(r == TN_EINVAL || r == TN_ENOTSUP, "%d: %s", r, tn_last_error());
		ck_assert_msg(!strncmp(tn_last_error(), npy ? "npy: " : "safetensors: ",
				       npy ? 5 : 13), "%s", tn_last_error());
		return;
	}
	if (npy) {
		ck_assert_uint_le(t.offset + t.nbytes, size);
		return;
	}
	uint64_t at = st->data_offset;
	for (size_t i = 0; i < st->ntensors; i++) {
		ck_assert_uint_eq(st->tensors[i].offset, at);
		at += st->tensors[i].nbytes;
	}
	ck_assert_uint_eq(at, size);
	tn__safetensors_free(st);
}

START_TEST(test_mutations)
{
	static const unsigned char values[] = { 0x00, 0x01, 0x22, 0x2c, 0x30, 0x39, 0x5b, 0x5d,
						0x7b, 0x7d, 0x27, 0x28, 0x29, 0x5c, 0x80, 0xff };
	const char *name;
	bool npy;
	unsigned char *file;
	size_t size, nst = ARRAY_SIZE(golden_st_files);

	if ((size_t)_i < nst) {
		name = golden_st_files[_i].file;
		npy = false;
	} else {
		name = golden_npy_files[(size_t)_i - nst].file;
		npy = true;
	}
	file = read_golden(name, &size);
	for (size_t len = 0; len < size; len++) {
		unsigned char *cut = malloc(len ? len : 1);
		memcpy(cut, file, len);
		check_mutation(cut, len, npy);
		free(cut);
	}
	for (size_t at = 0; at < size; at++) {
		unsigned char keep = file[at];
		for (size_t v = 0; v < sizeof(values); v++) {
			file[at] = values[v];
			check_mutation(file, size, npy);
		}
		file[at] = keep ^ 0x20;
		check_mutation(file, size, npy);
		file[at] = keep;
	}
	free(file);
}
END_TEST

/* Every allocation the parser and the writer make can fail: a clean TN_ENOMEM each time. */
START_TEST(test_alloc_failures)
{
	struct tn__safetensors *st;
	unsigned char *file;
	uint64_t n, file_size, attempts;
	void *header;
	size_t size, len;
	int r;

	file = read_golden("mixed.safetensors", &size);
	ck_assert_tn_ok(tn__safetensors_prefix(file, 8, size, &n));
	for (uint64_t nth = 1;; nth++) {
		tn_alloc_fail_nth(nth);
		r = tn__safetensors_parse(file + 8, n, size, TN__SAFETENSORS_KEEP_METADATA, &st);
		attempts = tn_alloc_fail_nth(0);
		if (!r)
			break;
		ck_assert_int_eq(r, TN_ENOMEM);
		ck_assert_str_eq(tn_last_error(), "safetensors: out of memory for 12 tensors");
		ck_assert_uint_lt(nth, 4);
	}
	ck_assert_uint_eq(attempts, 1);
	for (uint64_t nth = 1;; nth++) {
		tn_alloc_fail_nth(nth);
		r = tn__safetensors_write(st->tensors, st->ntensors, st->meta, st->nmeta, &header,
					  &len, &file_size);
		attempts = tn_alloc_fail_nth(0);
		if (!r)
			break;
		ck_assert_int_eq(r, TN_ENOMEM);
		ck_assert_uint_lt(nth, 4);
	}
	ck_assert_uint_eq(attempts, 2);
	ck_assert_uint_eq(file_size, size);
	free(header);
	tn__safetensors_free(st);
	free(file);
}
END_TEST

START_TEST(test_byteswap)
{
	unsigned char b[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	static const unsigned char s2[16] = { 2, 1, 4, 3, 6, 5, 8, 7,
					      10, 9, 12, 11, 14, 13, 16, 15 };
	static const unsigned char s4[16] = { 4, 3, 2, 1, 8, 7, 6, 5,
					      12, 11, 10, 9, 16, 15, 14, 13 };
	static const unsigned char s8[16] = { 8, 7, 6, 5, 4, 3, 2, 1,
					      16, 15, 14, 13, 12, 11, 10, 9 };
	unsigned char c[16];

	memcpy(c, b, 16);
	tn__fmt_byteswap(c, 16, 1);
	ck_assert_mem_eq(c, b, 16);
	tn__fmt_byteswap(c, 16, 2);
	ck_assert_mem_eq(c, s2, 16);
	memcpy(c, b, 16);
	tn__fmt_byteswap(c, 16, 4);
	ck_assert_mem_eq(c, s4, 16);
	memcpy(c, b, 16);
	tn__fmt_byteswap(c, 16, 8);
	ck_assert_mem_eq(c, s8, 16);
	tn__fmt_byteswap(c, 16, 8);
	ck_assert_mem_eq(c, b, 16);
}
END_TEST

static Suite *formats_suite(void)
{
	Suite *s = suite_create("formats");
	TCase *tc = tcase_create("formats");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_st_golden, 0, (int)ARRAY_SIZE(golden_st_files));
	tcase_add_test(tc, test_st_reference_vectors);
	tcase_add_test(tc, test_st_round_trip);
	tcase_add_test(tc, test_st_write_errors);
	tcase_add_loop_test(tc, test_st_malformed, 0, (int)ARRAY_SIZE(st_bad));
	tcase_add_test(tc, test_st_prefix);
	tcase_add_test(tc, test_st_accepts);
	tcase_add_test(tc, test_st_nesting);
	tcase_add_loop_test(tc, test_npy_golden, 0, (int)ARRAY_SIZE(golden_npy_files));
	tcase_add_loop_test(tc, test_npy_refused, 0, (int)ARRAY_SIZE(golden_npy_refused));
	tcase_add_test(tc, test_npy_round_trip);
	tcase_add_loop_test(tc, test_npy_malformed, 0, (int)ARRAY_SIZE(npy_bad));
	tcase_add_test(tc, test_npy_accepts);
	tcase_add_test(tc, test_npy_prefix);
	tcase_add_loop_test(tc, test_mutations, 0,
			    (int)(ARRAY_SIZE(golden_st_files) + ARRAY_SIZE(golden_npy_files)));
	tcase_add_test(tc, test_alloc_failures);
	tcase_add_test(tc, test_byteswap);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(formats_suite)
