/* SPDX-License-Identifier: MIT */
/*
 * Tensor file formats for tensord: safetensors and NumPy .npy headers, parsed and written.
 *
 * The layer is pure: it does no I/O and keeps no state. tensord reads a file's first bytes
 * (with io_uring), asks this layer how long the header is, reads the header, and gets back one
 * descriptor per tensor saying where its bytes lie in the file; it then moves the data itself.
 * To save, it describes its tensors, gets the header bytes and each tensor's file offset, and
 * writes them. The fuzz targets (tests/fuzz/fuzz_safetensors.c, fuzz_npy.c) call the parsers
 * directly.
 *
 * Every function returns 0 or a negative code and, on failure, leaves a message naming the
 * byte or the field at fault in the thread's last error (tn_last_error): TN_EINVAL for a
 * malformed header, TN_ENOTSUP for a well-formed one that libtensor cannot hold (a dtype it
 * lacks, more than TN_ARENA_MAX_DIMS dims, a name longer than TN_ARENA_NAME_MAX bytes),
 * TN_ENOMEM. Messages begin with "safetensors: " or "npy: "; byte positions are offsets in
 * the file. The parsers read nothing outside the buffer they are given, whatever it holds.
 * Output parameters are written on success only.
 *
 * The functions call tn__error() and tn__malloc() from libtensor/internal.h: a program links
 * them with a copy of libtensor that exposes its internals (tests/libtensor_internal.la) or
 * compiles the library's sources in (the fuzz targets).
 */
#ifndef TENSORD_FORMATS_H
#define TENSORD_FORMATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor.h>

/* ---- descriptors ------------------------------------------------------------------------- */

/*
 * One tensor of a file. The parsers fill every field; the writers read name (safetensors
 * only), dtype, ndim, sizes and fortran_order (.npy only) and fill offset and nbytes.
 */
struct tn__fmt_tensor {
	/* NUL-terminated, at most TN_ARENA_NAME_MAX bytes, valid UTF-8, no NUL inside. Parsed
	 * names point into the parse result; .npy files have no names (NULL). */
	const char *name;
	enum tn_dtype dtype;
	int ndim; /* 0 (a scalar) to TN_ARENA_MAX_DIMS */
	int64_t sizes[TN_ARENA_MAX_DIMS];
	uint64_t offset; /* file offset of the first data byte */
	uint64_t nbytes; /* numel * itemsize */
	/* .npy: the elements are in column-major order (tn__fmt_strides gives the strides). */
	bool fortran_order;
	/* .npy: the elements are stored big-endian, the other way round from this machine; the
	 * loader swaps each element after reading (tn__fmt_byteswap). The writers always write
	 * this machine's order, little-endian on every platform libtensor builds for. */
	bool byteswap;
};

/* A "__metadata__" entry of a safetensors header: a string to string map. Lengths are in
 * bytes; the strings are also NUL-terminated but may hold NULs (JSON "\u0000"). */
struct tn__fmt_meta {
	const char *key;
	size_t key_len;
	const char *value;
	size_t value_len;
};

/*
 * tn__fmt_strides - the element strides of a parsed tensor laid out densely in C order, or in
 * Fortran order when t->fortran_order. Writes t->ndim values to ret_strides; cannot fail for
 * a descriptor a parser returned.
 */
void tn__fmt_strides(const struct tn__fmt_tensor *t, int64_t *ret_strides);

/*
 * tn__fmt_byteswap - reverse the bytes of each @itemsize-byte element of @data (itemsize 1,
 * 2, 4 or 8; @nbytes a multiple of it). For .npy files flagged byteswap.
 */
void tn__fmt_byteswap(void *data, size_t nbytes, size_t itemsize);

/* ---- safetensors ------------------------------------------------------------------------- */

/*
 * The file: an 8-byte little-endian header length N, N bytes of JSON (an object mapping each
 * tensor's name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
 * "__metadata__" object of strings), then the data section, which the tensors' byte ranges
 * cover exactly, in order, without gaps or overlaps. Rules as in the reference implementation
 * (huggingface/safetensors): N at most 100,000,000; the header valid UTF-8 and strict JSON
 * (RFC 8259: no comments, no trailing commas, no lone surrogates), followed by whitespace
 * only; end - begin == numel * itemsize without overflow; unknown fields inside a tensor's
 * object are skipped, as the reference's serde derive does. Stricter than the reference:
 * duplicate tensor names, duplicate fields and duplicate metadata keys are refused (the
 * reference keeps the last one silently), and JSON nesting deeper than 64 is refused.
 */
#define TN__SAFETENSORS_PREFIX 8
#define TN__SAFETENSORS_MAX_HEADER 100000000

/* Keep the "__metadata__" entries in the parse result (otherwise they are checked and
 * dropped). */
#define TN__SAFETENSORS_KEEP_METADATA 0x1u

struct tn__safetensors {
	uint64_t header_len;  /* N */
	uint64_t data_offset; /* 8 + N: the data section's offset in the file */
	uint64_t data_len;    /* bytes in the data section */
	size_t ntensors;
	struct tn__fmt_tensor *tensors; /* in file order: by offset, then size, then name */
	bool has_metadata;              /* the header has a "__metadata__" object */
	size_t nmeta;
	struct tn__fmt_meta *meta; /* sorted by key; NULL and 0 entries unless kept */
};

/*
 * tn__safetensors_prefix - read the header length N from the file's first @len bytes (at least
 * 8 are needed) and check it against the format's limit and the file's size @file_size.
 * Returns 0 and writes N, or TN_EINVAL (truncated file, N too large or past the end).
 */
int tn__safetensors_prefix(const void *buf, size_t len, uint64_t file_size,
			   uint64_t *ret_header_len);

/*
 * tn__safetensors_parse - parse and validate the @len header bytes at @header (the N bytes
 * that follow the 8-byte length) of a file of @file_size bytes. @flags: 0 or
 * TN__SAFETENSORS_KEEP_METADATA. On success *ret is a new result, one allocation that owns the
 * descriptors and their strings; free it with tn__safetensors_free. The header is read twice
 * (to count, then to fill that allocation) and must not change during the call. Returns 0,
 * TN_EINVAL, TN_ENOTSUP or TN_ENOMEM.
 */
int tn__safetensors_parse(const void *header, size_t len, uint64_t file_size, unsigned flags,
			  struct tn__safetensors **ret);

/* tn__safetensors_free - free a parse result; NULL is accepted. */
void tn__safetensors_free(struct tn__safetensors *st);

/*
 * tn__safetensors_write - make the header of a file holding @n tensors (names unique, valid
 * UTF-8, not "__metadata__") and, when @nmeta > 0, a "__metadata__" object of @meta's entries
 * (keys unique, valid UTF-8). The layout is the reference writer's: tensors sorted by dtype
 * alignment, largest first, then by name (bytewise); compact JSON padded with spaces to a
 * multiple of 8 bytes, so every tensor starts aligned to its element size. On success
 * *ret_header is a new buffer of *ret_len bytes (8-byte length included) that the caller
 * frees with free(), each tensor's offset and nbytes are filled in, and *ret_file_size is the
 * size of the whole file. Returns 0, TN_EINVAL (bad descriptor, duplicate, header over the
 * limit) or TN_ENOMEM; on failure @tensors is left untouched.
 */
int tn__safetensors_write(struct tn__fmt_tensor *tensors, size_t n,
			  const struct tn__fmt_meta *meta, size_t nmeta, void **ret_header,
			  size_t *ret_len, uint64_t *ret_file_size);
/* The same, with the header padded so that the data section starts at a multiple of @align
 * (a power of two, 8 to 65536): 4096 lets a reader read a tensor with O_DIRECT straight into
 * page-aligned memory. */
int tn__safetensors_write_aligned(struct tn__fmt_tensor *tensors, size_t n,
				  const struct tn__fmt_meta *meta, size_t nmeta, size_t align,
				  void **ret_header, size_t *ret_len, uint64_t *ret_file_size);

/* ---- NumPy .npy ------------------------------------------------------------------------- */

/*
 * The file: "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), the header length (2 bytes
 * little-endian in 1.0, 4 in 2.0 and 3.0), the header, then the data up to the end of the
 * file or beyond (numpy reads only what the header asks for). The header is a Python dict
 * literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a
 * newline; numpy's reader refuses headers over 10000 bytes and so does this one. The parser
 * takes exactly that literal syntax: quoted keys and strings without escapes, True/False,
 * tuples of decimal integers (with Python 2's "L" suffix in 1.0 and 2.0 files, which numpy
 * still reads), whitespace, and nothing else; each of the three keys exactly once.
 *
 * Dtypes: '|b1' bool, '|u1' uint8, '|i1' int8, '<i2' '<i4' '<i8', '<f2' '<f4' '<f8'; 1-byte
 * types take any byte-order mark. Big-endian ('>') ones are accepted and flagged byteswap.
 * numpy dtypes that libtensor lacks (unsigned 16-64 bit, long double, complex, strings,
 * objects, records, datetimes; and bfloat16, which numpy does not have: ml_dtypes writes it as
 * '<V2') are refused with TN_ENOTSUP.
 */
#define TN__NPY_PREFIX_MAX 12 /* magic, version and the 2.0/3.0 header length */
#define TN__NPY_MAX_HEADER 10000
#define TN__NPY_ALIGN 64
/* Room enough for any header tn__npy_write makes (16 dims of 19 digits need about 500). */
#define TN__NPY_HEADER_MAX 640

/*
 * tn__npy_prefix - read the magic, version and header length from the file's first @len
 * bytes (pass min(file size, TN__NPY_PREFIX_MAX)); check them against @file_size. Writes the
 * size of the whole header, the offset of the data, to *ret_header_end. Returns 0 or
 * TN_EINVAL.
 */
int tn__npy_prefix(const void *buf, size_t len, uint64_t file_size, size_t *ret_header_end);

/*
 * tn__npy_parse - parse the first @len bytes of a .npy file of @file_size bytes, @len being
 * the header end tn__npy_prefix gave (prefix included). Fills *ret (name NULL, offset the
 * header end). Returns 0, TN_EINVAL (malformed; data past the end of the file) or TN_ENOTSUP.
 */
int tn__npy_parse(const void *buf, size_t len, uint64_t file_size, struct tn__fmt_tensor *ret);

/*
 * tn__npy_write - write the header numpy.save writes for @t (dtype, ndim, sizes,
 * fortran_order; little-endian): version 1.0, version 2.0 were it longer than 65535 bytes,
 * the dict with numpy's spare room for the growth axis, padded so the data starts at a
 * multiple of 64 bytes. Writes at most @cap bytes to @buf (TN__NPY_HEADER_MAX is always
 * enough), the length to *ret_len, and fills t->offset and t->nbytes. Returns 0, TN_EINVAL
 * (bad descriptor, @cap too small) or TN_ENOTSUP (bfloat16).
 */
int tn__npy_write(struct tn__fmt_tensor *t, void *buf, size_t cap, size_t *ret_len);

#endif /* TENSORD_FORMATS_H */
