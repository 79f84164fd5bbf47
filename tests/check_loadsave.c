/* SPDX-License-Identifier: MIT */
/*
 * tensord's load and save (tensord/loadsave.h): round trips file -> arena -> file byte for
 * byte for every dtype, 0-d, empty, non-contiguous and Fortran-order tensors; the golden files
 * PyTorch and numpy wrote (tests/golden/formats) loaded with the right values; both read paths
 * (cached files read straight into the blocks, uncached ones through O_DIRECT staging, and
 * files half and half); malformed and truncated files, a full arena, a full directory, taken
 * names, sealing, cancellation, progress and allocation failures, each leaving the arena
 * exactly as it was.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "testutil.h"
#include "formats.h"
#include "formats_testutil.h"
#include "loadsave.h"

#define MIB ((uint64_t)1 << 20)

/* ---- fixtures: arenas on /dev/shm, files on disk (O_DIRECT needs a real file system) ------ */

static char shm_base[64], file_base[64]; /* made and removed by the runner */
static char shm_dir[96], file_dir[96];   /* the current test's */

static void remove_tree(const char *path)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (path[0] && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", path);
}

static void suite_setup(void)
{
	const char *tmp = getenv("TMPDIR");
	strcpy(shm_base, "/dev/shm/tn-ls-XXXXXX");
	if (!mkdtemp(shm_base))
		shm_base[0] = 0;
	/* /var/tmp rather than /tmp, which may be a tmpfs without O_DIRECT. */
	snprintf(file_base, sizeof(file_base), "%s/tn-ls-XXXXXX",
		 tmp && strlen(tmp) < 40 ? tmp : "/var/tmp");
	if (!mkdtemp(file_base))
		file_base[0] = 0;
}

static void suite_teardown(void)
{
	remove_tree(shm_base);
	remove_tree(file_base);
}

static void setup(void)
{
	ck_assert_msg(shm_base[0] && file_base[0], "no suite directories");
	snprintf(shm_dir, sizeof(shm_dir), "%s/tXXXXXX", shm_base);
	ck_assert_ptr_nonnull(mkdtemp(shm_dir));
	snprintf(file_dir, sizeof(file_dir), "%s/tXXXXXX", file_base);
	ck_assert_ptr_nonnull(mkdtemp(file_dir));
}

static void teardown(void)
{
	remove_tree(shm_dir);
	remove_tree(file_dir);
}

static tn_arena *make_arena(const char *name, uint64_t size, uint32_t max_names)
{
	tn_arena_options o;
	tn_arena *a = NULL;
	tn_arena_options_init(&o);
	o.size = size;
	o.dir = shm_dir;
	o.max_names = max_names;
	ck_assert_tn_ok(tn_arena_create(name, &o, &a));
	return a;
}

static const char *path_of(const char *name)
{
	static char path[2][256];
	static int k;
	k ^= 1;
	snprintf(path[k], sizeof(path[k]), "%s/%s", file_dir, name);
	return path[k];
}

/* A new empty file for saving, open read-write. */
static int create_file(const char *name)
{
	int fd = open(path_of(name), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int open_file(const char *name)
{
	int fd = open(path_of(name), O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "cannot open %s", path_of(name));
	return fd;
}

static int open_golden(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", TN_GOLDEN_FORMATS_DIR, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "cannot open %s", path);
	return fd;
}

static unsigned char *slurp_fd(int fd, size_t *ret_size)
{
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	unsigned char *buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	*ret_size = (size_t)st.st_size;
	return buf;
}

static void write_file(const char *name, const void *data, size_t len)
{
	int fd = create_file(name);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void assert_same_files(int fd1, int fd2)
{
	size_t n1, n2;
	unsigned char *b1 = slurp_fd(fd1, &n1), *b2 = slurp_fd(fd2, &n2);
	ck_assert_uint_eq(n1, n2);
	for (size_t i = 0; i < n1; i++)
		ck_assert_msg(b1[i] == b2[i], "the files differ at byte %zu of %zu", i, n1);
	free(b1);
	free(b2);
}

/* Push a file's pages out of the page cache, so the next load reads it with O_DIRECT. */
static void uncache(int fd)
{
	ck_assert_int_eq(fdatasync(fd), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
}

/* The bytes of golden file @name, in *@size; *@npy: whether it is a .npy file. */
static unsigned char *golden_image(const char *name, size_t *size, bool *npy)
{
	int fd = open_golden(name);
	unsigned char *file = slurp_fd(fd, size);
	close(fd);
	*npy = strstr(name, ".npy") != NULL;
	return file;
}

/* Saving @prefix of @a as @format makes the very bytes of the file open as @fd. */
static void assert_saves_back(tn_arena *a, unsigned format, const char *prefix, int fd)
{
	int f = create_file("again");
	ck_assert_tn_ok(tnd_save(a, f, format, prefix, 0, NULL, NULL, NULL, NULL));
	assert_same_files(fd, f);
	close(f);
}

/* ---- the arena's state, to show a failure leaves it as it was ------------------------------ */

struct snapshot {
	tn_arena_stats s;
	size_t count;
	char names[4096];
};

static struct snapshot snap(tn_arena *a)
{
	struct snapshot sn;
	tn_arena_entry *e;
	memset(&sn, 0, sizeof(sn));
	ck_assert_tn_ok(tn_arena_stat(a, &sn.s));
	ck_assert_tn_ok(tn_arena_list(a, NULL, &e, &sn.count));
	for (size_t i = 0; i < sn.count; i++) {
		strncat(sn.names, e[i].name, sizeof(sn.names) - strlen(sn.names) - 2);
		strcat(sn.names, ",");
	}
	free(e);
	return sn;
}

#define ck_assert_unchanged(a, before)                                                   \
	do {                                                                             \
		struct snapshot now_ = snap(a);                                          \
		ck_assert_uint_eq(now_.s.free_bytes, (before).s.free_bytes);             \
		ck_assert_uint_eq(now_.s.used_bytes, (before).s.used_bytes);             \
		ck_assert_uint_eq(now_.s.blocks, (before).s.blocks);                     \
		ck_assert_uint_eq(now_.s.largest_free, (before).s.largest_free);         \
		ck_assert_uint_eq(now_.s.names, (before).s.names);                       \
		ck_assert_str_eq(now_.names, (before).names);                            \
	} while (0)

/* A load of @fd into @a is refused with @code and a message containing @part, and leaves @a as
 * it was; returns the arena's state. */
static struct snapshot assert_load_refused(tn_arena *a, int fd, const char *prefix,
					   unsigned flags, int code, const char *part)
{
	struct snapshot before = snap(a);
	ck_assert_tn_error_has(tnd_load(a, fd, TND_FORMAT_AUTO, prefix, flags, NULL, NULL, NULL,
					NULL),
			       code, part);
	ck_assert_unchanged(a, before);
	return before;
}

/* ---- tensors -------------------------------------------------------------------------------- */

/* Deterministic bytes; bool gets 0 and 1 only. */
static void fill(tn_tensor *t, uint32_t seed)
{
	unsigned char *p = tn_tensor_data(t);
	size_t n = tn_tensor_nbytes(t);
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		p[i] = tn_tensor_dtype(t) == TN_BOOL ? (unsigned char)(x >> 31)
						     : (unsigned char)(x >> 24);
	}
}

/* A contiguous tensor of @dtype in @a, @ndim dims of @sizes, filled from @seed; numel 0
 * gets a 1-byte block (a name needs one). */
static tn_tensor *arena_tensor(tn_arena *a, int ndim, const int64_t *sizes, enum tn_dtype dtype,
			       uint32_t seed)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t numel = 1;
	for (int d = 0; d < ndim; d++)
		numel *= sizes[d];
	size_t nbytes = (size_t)numel * tn_dtype_size(dtype);
	ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, nbytes ? nbytes : 1,
						      tn_arena_allocator(a), &s));
	ck_assert_tn_ok(tn_tensor_new(s, 0, ndim, sizes, NULL, dtype, &t));
	tn_storage_unref(s);
	fill(t, seed);
	return t;
}

static void publish(tn_arena *a, const char *name, tn_tensor *t)
{
	ck_assert_tn_ok(tn_arena_publish(a, name, t, 0, NULL));
	tn_tensor_unref(t);
}

/* The address of element @flat (in C order) of @t. */
static const unsigned char *element_at(const tn_tensor *t, int64_t flat)
{
	const unsigned char *p = tn_tensor_data(t);
	int nd = tn_tensor_ndim(t);
	for (int d = nd - 1; d >= 0; d--) {
		int64_t sz = tn_tensor_sizes(t)[d];
		p += (flat % sz) * tn_tensor_strides(t)[d] * (int64_t)tn_tensor_itemsize(t);
		flat /= sz;
	}
	return p;
}

/* Same dtype, shape and element bytes. */
static void assert_same_tensor(const tn_tensor *x, const tn_tensor *y, const char *name)
{
	ck_assert_int_eq(tn_tensor_dtype(x), tn_tensor_dtype(y));
	ck_assert_int_eq(tn_tensor_ndim(x), tn_tensor_ndim(y));
	for (int d = 0; d < tn_tensor_ndim(x); d++)
		ck_assert_int_eq(tn_tensor_sizes(x)[d], tn_tensor_sizes(y)[d]);
	size_t is = tn_tensor_itemsize(x);
	/* Both contiguous (the usual case): one comparison of the blocks, and the element
	 * walk below only to name the first difference (element by element, 66 M elements took
	 * most of this suite's two minutes under ThreadSanitizer). */
	if (tn_tensor_numel(x) > 0 && tn_tensor_is_contiguous(x) && tn_tensor_is_contiguous(y) &&
	    memcmp(tn_tensor_data(x), tn_tensor_data(y), (size_t)tn_tensor_numel(x) * is) == 0)
		return;
	for (int64_t i = 0; i < tn_tensor_numel(x); i++)
		ck_assert_msg(memcmp(element_at(x, i), element_at(y, i), is) == 0,
			      "%s: element %" PRId64 " differs", name, i);
}

static void assert_same_as_published(tn_arena *a, const char *na, tn_arena *b, const char *nb)
{
	tn_tensor *x, *y;
	ck_assert_tn_ok(tn_arena_lookup(a, na, &x, NULL));
	ck_assert_tn_ok(tn_arena_lookup(b, nb, &y, NULL));
	assert_same_tensor(x, y, nb);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
}

/* The tensor published as @name against a golden one: dtype, shape, and the values, which
 * the golden lists in file order, that is in the order of the block's bytes. */
static void check_golden(tn_arena *a, const char *name, const struct golden_tensor *g,
			 bool fortran)
{
	enum tn_dtype dtype;
	tn_tensor *t;
	ck_assert_tn_ok(tn_arena_lookup(a, name, &t, NULL));
	ck_assert_tn_ok(tn_dtype_from_name(g->dtype, &dtype));
	ck_assert_int_eq(tn_tensor_dtype(t), dtype);
	ck_assert_int_eq(tn_tensor_ndim(t), g->ndim);
	int64_t stride = 1;
	for (int k = 0; k < g->ndim; k++) {
		int d = fortran ? k : g->ndim - 1 - k;
		ck_assert_int_eq(tn_tensor_sizes(t)[d], g->sizes[d]);
		if (g->sizes[d] != 1 && g->nvalues)
			ck_assert_int_eq(tn_tensor_strides(t)[d], stride);
		stride *= g->sizes[d];
	}
	ck_assert_int_eq(tn_tensor_storage_offset(t), 0);
	const unsigned char *data = tn_storage_data(tn_tensor_storage(t));
	size_t is = tn_dtype_size(dtype);
	for (size_t i = 0; i < g->nvalues; i++) {
		double got = element(data + i * is, dtype);
		ck_assert_msg(got == g->values[i] && signbit(got) == signbit(g->values[i]),
			      "%s element %zu: %.17g, expected %.17g", name, i, got, g->values[i]);
	}
	tn_tensor_unref(t);
}

/* ---- round trips ---------------------------------------------------------------------------- */

/*
 * Publish in arena A, under "m/", one tensor of every dtype, a 0-d one, an empty one, and
 * views that are not contiguous (transposed, strided, sliced with an offset, expanded with a
 * zero stride); save; load into arena B under "n/"; save again: the files are identical and
 * every tensor has the values it had. Round @_i also takes every tensor through .npy.
 */
static void publish_zoo(tn_arena *a, uint32_t seed)
{
	static const int64_t s35[] = { 3, 5 }, s0[] = { 0, 3 }, s234[] = { 2, 3, 4 };
	char name[64];
	tn_tensor *t, *v;

	for (int dt = 0; dt < TN_NUM_DTYPES; dt++) {
		snprintf(name, sizeof(name), "m/%s", tn_dtype_name((enum tn_dtype)dt));
		publish(a, name, arena_tensor(a, 2, s35, (enum tn_dtype)dt, seed + (uint32_t)dt));
		snprintf(name, sizeof(name), "m/t_%s", tn_dtype_name((enum tn_dtype)dt));
		t = arena_tensor(a, 3, s234, (enum tn_dtype)dt, seed + 100 + (uint32_t)dt);
		ck_assert_tn_ok(tn_transpose(t, 0, 2, &v));
		ck_assert(!tn_tensor_is_contiguous(v));
		tn_tensor_unref(t);
		publish(a, name, v);
	}
	publish(a, "m/scalar", arena_tensor(a, 0, NULL, TN_FLOAT64, seed + 200));
	publish(a, "m/empty", arena_tensor(a, 2, s0, TN_INT32, seed + 201));
	t = arena_tensor(a, 2, s35, TN_INT16, seed + 202);
	ck_assert_tn_ok(tn_slice(t, 1, 1, 5, 2, &v)); /* offset 1, strides [5, 2] */
	tn_tensor_unref(t);
	publish(a, "m/sliced", v);
	t = arena_tensor(a, 1, s35 + 1, TN_FLOAT32, seed + 203);
	ck_assert_tn_ok(tn_as_strided(t, 2, s35, 2, (const int64_t[]){ 0, 1 }, NULL, &v));
	tn_tensor_unref(t);
	publish(a, "m/expanded", v);
}

static const char *const zoo_extra[] = { "scalar", "empty", "sliced", "expanded" };

START_TEST(test_roundtrip_safetensors)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0), *b = make_arena("b", 16 * MIB, 0);
	struct tnd_xfer_result r1, r2, r3;
	char na[64], nb[64];

	publish_zoo(a, 7);
	int f1 = create_file("one.safetensors"), f2 = create_file("two.safetensors");
	ck_assert_tn_ok(tnd_save(a, f1, TND_FORMAT_SAFETENSORS, "m/", 0, NULL, NULL, NULL, &r1));
	ck_assert_uint_eq(r1.tensors, 2 * TN_NUM_DTYPES + 4);
	ck_assert_tn_ok(tnd_load(b, f1, TND_FORMAT_AUTO, "n/", 0, NULL, NULL, NULL, &r2));
	ck_assert_uint_eq(r2.tensors, r1.tensors);
	ck_assert_uint_eq(r2.bytes, r1.bytes);
	ck_assert_uint_eq(r2.file_bytes, r1.file_bytes);
	ck_assert_tn_ok(tnd_save(b, f2, TND_FORMAT_SAFETENSORS, "n/", 0, NULL, NULL, NULL, &r3));
	ck_assert_uint_eq(r3.file_bytes, r1.file_bytes);
	assert_same_files(f1, f2);

	/* The file is what the formats layer reads back, and what the reference writer lays
	 * out (tn__safetensors_write is pinned to it in check_formats). */
	size_t size;
	unsigned char *file = slurp_fd(f1, &size);
	ck_assert_uint_eq(size, r1.file_bytes);
	free(file);

	for (int dt = 0; dt < TN_NUM_DTYPES; dt++) {
		const char *dn = tn_dtype_name((enum tn_dtype)dt);
		snprintf(na, sizeof(na), "m/%s", dn);
		snprintf(nb, sizeof(nb), "n/%s", dn);
		assert_same_as_published(a, na, b, nb);
		snprintf(na, sizeof(na), "m/t_%s", dn);
		snprintf(nb, sizeof(nb), "n/t_%s", dn);
		assert_same_as_published(a, na, b, nb);
	}
	for (size_t i = 0; i < ARRAY_SIZE(zoo_extra); i++) {
		snprintf(na, sizeof(na), "m/%s", zoo_extra[i]);
		snprintf(nb, sizeof(nb), "n/%s", zoo_extra[i]);
		assert_same_as_published(a, na, b, nb);
	}
	/* Loaded tensors are contiguous, each in a block of its own, not sealed. */
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(b, "n/t_float32", &e));
	ck_assert_int_eq(e.strides[0], 6);
	ck_assert_int_eq(e.strides[2], 1);
	ck_assert_uint_eq(e.flags, 0);

	/* Saving the whole arena names the tensors in full. */
	int f3 = create_file("all.safetensors");
	ck_assert_tn_ok(tnd_save(b, f3, TND_FORMAT_SAFETENSORS, NULL, 0, NULL, NULL, NULL, &r3));
	ck_assert_uint_eq(r3.tensors, r1.tensors);
	ck_assert_tn_ok(tnd_load(a, f3, TND_FORMAT_SAFETENSORS, "c/", 0, NULL, NULL, NULL, NULL));
	assert_same_as_published(a, "m/sliced", a, "c/n/sliced");
	close(f1);
	close(f2);
	close(f3);
	tn_arena_unref(a);
	tn_arena_unref(b);
}
END_TEST

/* tensord's spill files: a save with TND_SAVE_ALIGN_PAGES puts the data at a multiple of 4096,
 * and tnd_read_tensor reads such a file back, cold, with O_DIRECT straight into a page-aligned
 * block (and the plain way for a tail that is not a whole page, and for a block that is not
 * page-aligned), bit-exact. */
START_TEST(test_aligned_save_read)
{
	tn_arena *a = make_arena("a", 32 * MIB, 0);
	const int64_t sizes[] = { 3 << 20, 1000003, 5000 };
	const char *names[] = { "x", "odd", "small" };
	for (int k = 0; k < 3; k++) {
		int64_t n = sizes[k];
		tn_storage *s;
		tn_tensor *t, *back;
		ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)n, tn_arena_allocator(a),
							      &s));
		ck_assert_tn_ok(tn_tensor_new(s, 0, 1, &n, NULL, TN_UINT8, &t));
		tn_storage_unref(s);
		unsigned char *d = tn_tensor_data(t);
		for (int64_t i = 0; i < n; i++)
			d[i] = (unsigned char)(i * 131 + k * 7 + (i >> 9));
		ck_assert_tn_ok(tn_arena_publish(a, names[k], t, 0, NULL));
		char fname[32];
		snprintf(fname, sizeof(fname), "%s.safetensors", names[k]);
		int fd = create_file(fname);
		ck_assert_tn_ok(tnd_save(a, fd, TND_FORMAT_SAFETENSORS, names[k], TND_SAVE_ALIGN_PAGES,
					 NULL, NULL, NULL, NULL));
		uint64_t hlen;
		ck_assert_int_eq(pread(fd, &hlen, 8, 0), 8);
		ck_assert_uint_eq((8 + hlen) % 4096, 0);
		struct stat st;
		ck_assert_int_eq(fstat(fd, &st), 0);
		ck_assert_uint_eq((uint64_t)st.st_size, 8 + hlen + (uint64_t)n);
		/* Cold: the pages dropped, so the reader goes around the page cache. */
		ck_assert_int_eq(fdatasync(fd), 0);
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		int rfd = open_file(fname);
		ck_assert_tn_ok(tn_storage_new_with_allocator(TN_CPU, (size_t)n, tn_arena_allocator(a),
							      &s));
		ck_assert_tn_ok(tn_tensor_new(s, 0, 1, &n, NULL, TN_UINT8, &back));
		tn_storage_unref(s);
		uint64_t direct0 = atomic_load(&tnd_direct_reads);
		ck_assert_tn_ok(tnd_read_tensor(rfd, names[k], back, NULL));
		ck_assert_int_eq(memcmp(tn_tensor_data(back), d, (size_t)n), 0);
		/* The large block's data is page-aligned: its whole pages came straight in (a
		 * tmpfs keeps every page in memory: nothing there is read around the cache). */
		struct statfs sf;
		ck_assert_int_eq(fstatfs(fd, &sf), 0);
		if (k == 0 && sf.f_type != 0x01021994 /* TMPFS_MAGIC */)
			ck_assert_uint_gt(atomic_load(&tnd_direct_reads), direct0);
		ck_assert_tn_error_has(tnd_read_tensor(rfd, "other", back, NULL), TN_EINVAL,
				       "does not hold 'other'");
		tn_tensor_unref(back);
		tn_tensor_unref(t);
		close(rfd);
		close(fd);
	}
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_roundtrip_npy)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0), *b = make_arena("b", 16 * MIB, 0);
	char nb[64];
	int n = 0;

	publish_zoo(a, 11);
	tn_arena_entry *e;
	size_t count;
	ck_assert_tn_ok(tn_arena_list(a, "m/", &e, &count));
	for (size_t i = 0; i < count; i++) {
		struct tnd_xfer_result r1, r2;
		int f1 = create_file("one.npy"), f2 = create_file("two.npy");
		if (e[i].dtype == TN_BFLOAT16) {
			ck_assert_tn_error_has(tnd_save(a, f1, TND_FORMAT_NPY, e[i].name, 0, NULL,
							NULL, NULL, NULL),
					       TN_ENOTSUP, "bfloat16");
			ck_assert_int_eq(lseek(f1, 0, SEEK_END), 0);
			close(f1);
			close(f2);
			continue;
		}
		snprintf(nb, sizeof(nb), "x/%zu", i);
		ck_assert_tn_ok(tnd_save(a, f1, TND_FORMAT_NPY, e[i].name, 0, NULL, NULL, NULL,
					 &r1));
		ck_assert_uint_eq(r1.tensors, 1);
		ck_assert_tn_ok(tnd_load(b, f1, TND_FORMAT_AUTO, nb, 0, NULL, NULL, NULL, &r2));
		ck_assert_uint_eq(r2.bytes, r1.bytes);
		ck_assert_tn_ok(tnd_save(b, f2, TND_FORMAT_NPY, nb, 0, NULL, NULL, NULL, NULL));
		assert_same_files(f1, f2);
		assert_same_as_published(a, e[i].name, b, nb);
		close(f1);
		close(f2);
		n++;
	}
	ck_assert_int_eq(n, (int)count - 2);
	free(e);
	tn_arena_unref(a);
	tn_arena_unref(b);
}
END_TEST

/* A Fortran-order .npy loads with column-major strides, saves back to numpy's very bytes
 * (fortran_order kept: no gather), and saves as safetensors in C order. */
START_TEST(test_fortran)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	const struct golden_npy_file *g = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(golden_npy_files); i++)
		if (strcmp(golden_npy_files[i].file, "fortran.npy") == 0)
			g = &golden_npy_files[i];
	ck_assert_ptr_nonnull(g);
	int fd = open_golden("fortran.npy");
	ck_assert_tn_ok(tnd_load(a, fd, TND_FORMAT_NPY, "f", 0, NULL, NULL, NULL, NULL));
	check_golden(a, "f", &g->t, true);
	assert_saves_back(a, TND_FORMAT_NPY, "f", fd);

	int f2 = create_file("f.safetensors");
	ck_assert_tn_ok(tnd_save(a, f2, TND_FORMAT_SAFETENSORS, "", 0, NULL, NULL, NULL, NULL));
	ck_assert_tn_ok(tnd_load(a, f2, TND_FORMAT_AUTO, "c/", 0, NULL, NULL, NULL, NULL));
	assert_same_as_published(a, "f", a, "c/f");
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "c/f", &e));
	ck_assert_int_eq(e.strides[0], 4);
	ck_assert_int_eq(e.strides[1], 1);
	/* The C-order file holds the values transposed from the Fortran one's. */
	tn_tensor *t;
	ck_assert_tn_ok(tn_arena_lookup(a, "c/f", &t, NULL));
	const float *v = tn_tensor_data(t);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 4; j++)
			ck_assert_double_eq(v[i * 4 + j], g->t.values[j * 3 + i]);
	tn_tensor_unref(t);
	close(fd);
	close(f2);
	tn_arena_unref(a);
}
END_TEST

/* ---- golden files ----------------------------------------------------------------------- */

START_TEST(test_golden_safetensors)
{
	const struct golden_st_file *g = &golden_st_files[_i];
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	struct tnd_xfer_result r;
	char name[512];
	int fd = open_golden(g->file);

	if (strcmp(g->file, "names.safetensors") == 0) {
		/* Names the arena refuses (a control character, a trailing '/'): nothing is
		 * loaded. */
		assert_load_refused(a, fd, "", 0, TN_EINVAL, "control");
		/* The same names under a prefix that makes them too long. */
		memset(name, 'p', 250);
		name[250] = 0;
		assert_load_refused(a, fd, name, 0, TN_EINVAL,
				    "bytes long; a name has at most 255");
		close(fd);
		tn_arena_unref(a);
		return;
	}
	ck_assert_tn_ok(tnd_load(a, fd, TND_FORMAT_AUTO, "g/", 0, NULL, NULL, NULL, &r));
	ck_assert_uint_eq(r.tensors, g->ntensors);
	ck_assert_uint_eq(r.file_bytes, g->file_size);
	ck_assert_uint_eq(r.bytes, g->file_size - 8 - g->header_len);
	/* The metadata, when there is some, is kept as g/__metadata__. */
	ck_assert_uint_eq(snap(a).count, g->ntensors + (g->nmeta > 0));
	for (size_t i = 0; i < g->ntensors; i++) {
		snprintf(name, sizeof(name), "g/%s", g->tensors[i].name);
		check_golden(a, name, &g->tensors[i], false);
	}
	/* Files PyTorch's writer made come back byte for byte, metadata included. */
	if (g->reference_layout)
		assert_saves_back(a, TND_FORMAT_SAFETENSORS, g->ntensors || g->nmeta ? "g/" : "",
				  fd);
	close(fd);
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_golden_npy)
{
	const struct golden_npy_file *g = &golden_npy_files[_i];
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	struct tnd_xfer_result r;
	int fd = open_golden(g->file);

	ck_assert_tn_ok(tnd_load(a, fd, TND_FORMAT_AUTO, "arr", TND_XFER_SEAL, NULL, NULL, NULL,
				 &r));
	ck_assert_uint_eq(r.tensors, 1);
	ck_assert_uint_eq(r.bytes, g->t.nbytes);
	check_golden(a, "arr", &g->t, g->fortran_order);
	if (g->numpy_header)
		assert_saves_back(a, TND_FORMAT_NPY, "arr", fd);
	close(fd);
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_golden_npy_refused)
{
	const struct golden_npy_refused *g = &golden_npy_refused[_i];
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	int fd = open_golden(g->file);
	assert_load_refused(a, fd, "arr", 0, TN_ENOTSUP, g->message_part);
	close(fd);
	tn_arena_unref(a);
}
END_TEST

/* ---- malformed files ------------------------------------------------------------------------ */

/* Every truncation of every golden file, and every byte of the headers changed: either the
 * load succeeds, or it fails with the formats layer's own code and message and leaves the
 * arena as it was. */
static void parse_like_tensord(const unsigned char *file, size_t size, bool npy, int *ret_code,
			       char *ret_msg)
{
	int r;
	tn_clear_error();
	if (npy) {
		size_t end;
		struct tn__fmt_tensor t;
		r = tn__npy_prefix(file, size < TN__NPY_PREFIX_MAX ? size : TN__NPY_PREFIX_MAX,
				   size, &end);
		if (!r)
			r = tn__npy_parse(file, end, size, &t);
	} else {
		uint64_t n;
		struct tn__safetensors *st = NULL;
		r = tn__safetensors_prefix(file, size < 8 ? size : 8, size, &n);
		if (!r)
			r = tn__safetensors_parse(file + 8, (size_t)n, size, 0, &st);
		tn__safetensors_free(st);
	}
	*ret_code = r;
	snprintf(ret_msg, 512, "%s", r ? tn_last_error() : "");
}

static void try_image(tn_arena *a, const unsigned char *file, size_t size, bool npy)
{
	int code, fd;
	char msg[512];
	struct snapshot before = snap(a);

	parse_like_tensord(file, size, npy, &code, msg);
	write_file("bad", file, size);
	fd = open_file("bad");
	tn_clear_error();
	int r = tnd_load(a, fd, npy ? TND_FORMAT_NPY : TND_FORMAT_SAFETENSORS, "bad/",
			 TND_XFER_REPLACE, NULL, NULL, NULL, NULL);
	close(fd);
	if (code == 0 && r == 0) {
		/* Unpublish what loaded, so the next image starts from the same state. */
		tn_arena_entry *e;
		size_t n;
		ck_assert_tn_ok(tn_arena_list(a, "bad/", &e, &n));
		for (size_t i = 0; i < n; i++)
			ck_assert_tn_ok(tn_arena_unpublish(a, e[i].name));
		free(e);
		ck_assert_unchanged(a, before);
		return;
	}
	ck_assert_msg(r == code, "load returned %d (%s), the parser %d (%s)", r, tn_last_error(),
		      code, msg);
	/* A parsed file can still fail: a name the arena refuses. */
	if (code == 0)
		return;
	ck_assert_str_eq(tn_last_error(), msg);
	ck_assert_unchanged(a, before);
}

START_TEST(test_truncated)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	static const char *const files[] = { "mixed.safetensors", "unordered.safetensors",
					     "f64_4d.npy", "fortran.npy", "i32_be.npy" };
	for (size_t f = 0; f < ARRAY_SIZE(files); f++) {
		bool npy;
		size_t size;
		unsigned char *file = golden_image(files[f], &size, &npy);
		for (size_t len = 0; len < size; len += 1 + len / 64)
			try_image(a, file, len, npy);
		free(file);
	}
	tn_arena_unref(a);
}
END_TEST

START_TEST(test_mutated)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	static const char *const files[] = { "unordered.safetensors", "f64_be.npy" };
	int failures = 0;
	for (size_t f = 0; f < ARRAY_SIZE(files); f++) {
		bool npy;
		size_t size;
		unsigned char *file = golden_image(files[f], &size, &npy);
		size_t header = npy ? 128 : 8 + 258;
		for (size_t i = 0; i < header; i += 3) {
			unsigned char saved = file[i];
			int code;
			char msg[512];
			file[i] ^= i % 2 ? 0x20 : 0x01;
			parse_like_tensord(file, size, npy, &code, msg);
			failures += code != 0;
			try_image(a, file, size, npy);
			file[i] = saved;
		}
		free(file);
	}
	ck_assert_int_gt(failures, 50);
	tn_arena_unref(a);
}
END_TEST

/* Arguments and files the functions refuse. */
START_TEST(test_refused)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	int pipefd[2];
	struct snapshot before;
	static const int64_t s4[] = { 4 };

	publish(a, "w/x", arena_tensor(a, 1, s4, TN_FLOAT32, 1));
	publish(a, "w/bf", arena_tensor(a, 1, s4, TN_BFLOAT16, 2));
	before = snap(a);
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_tn_error_has(tnd_load(a, pipefd[0], TND_FORMAT_AUTO, "p", 0, NULL, NULL, NULL,
					NULL),
			       TN_EINVAL, "is not a regular file");
	close(pipefd[0]);
	close(pipefd[1]);

	int fd = open_golden("f32.npy");
	ck_assert_tn_error(tnd_load(a, fd, TND_FORMAT_NPY, "", 0, NULL, NULL, NULL, NULL),
			   TN_EINVAL, "tnd_load: a .npy file holds one unnamed array: the prefix "
			   "is its name and cannot be empty");
	ck_assert_tn_error(tnd_load(a, fd, 3, "p", 0, NULL, NULL, NULL, NULL), TN_EINVAL,
			   "tnd_load: unknown format 3");
	ck_assert_tn_error(tnd_load(a, fd, TND_FORMAT_NPY, "p", 8, NULL, NULL, NULL, NULL),
			   TN_EINVAL, "tnd_load: unknown flags 0x8");
	/* A .npy read as safetensors: the formats layer says why. */
	ck_assert_tn_error_has(tnd_load(a, fd, TND_FORMAT_SAFETENSORS, "p", 0, NULL, NULL, NULL,
					NULL),
			       TN_EINVAL, "safetensors: ");
	ck_assert_unchanged(a, before);
	close(fd);

	fd = create_file("w.safetensors");
	int ro = open_file("w.safetensors");
	ck_assert_tn_error_has(tnd_load(a, fd, TND_FORMAT_AUTO, "p", 0, NULL, NULL, NULL, NULL),
			       TN_EINVAL, "safetensors: ");
	ck_assert_tn_error_has(tnd_save(a, ro, TND_FORMAT_SAFETENSORS, "w/", 0, NULL, NULL, NULL,
					NULL),
			       TN_EACCES, "not open for writing");
	ck_assert_tn_error(tnd_save(a, fd, TND_FORMAT_AUTO, "w/", 0, NULL, NULL, NULL, NULL),
			   TN_EINVAL, "tnd_save: format 0: saving needs TND_FORMAT_SAFETENSORS or "
			   "TND_FORMAT_NPY");
	ck_assert_tn_error(tnd_save(a, fd, TND_FORMAT_SAFETENSORS, "w/", 1, NULL, NULL, NULL,
				    NULL),
			   TN_EINVAL, "tnd_save: flags 0x1: saving takes TND_SAVE_ALIGN_PAGES only");
	ck_assert_tn_error_has(tnd_save(a, fd, TND_FORMAT_SAFETENSORS, "nothing/", 0, NULL, NULL,
					NULL, NULL),
			       TN_ENOENT, "starts with 'nothing/'");
	ck_assert_tn_error_has(tnd_save(a, fd, TND_FORMAT_NPY, "w/none", 0, NULL, NULL, NULL,
					NULL),
			       TN_ENOENT, "w/none");
	ck_assert_tn_error_has(tnd_save(a, fd, TND_FORMAT_NPY, "w/bf", 0, NULL, NULL, NULL, NULL),
			       TN_ENOTSUP, "bfloat16");
	ck_assert_int_eq(lseek(fd, 0, SEEK_END), 0);
	ck_assert_tn_ok(tnd_save(a, fd, TND_FORMAT_SAFETENSORS, "w/", 0, NULL, NULL, NULL, NULL));
	ck_assert_tn_error_has(tnd_save(a, fd, TND_FORMAT_SAFETENSORS, "w/", 0, NULL, NULL, NULL,
					NULL),
			       TN_EINVAL, "not empty");
	int wo = open(path_of("w.safetensors"), O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(wo, 0);
	ck_assert_tn_error_has(tnd_load(a, wo, TND_FORMAT_AUTO, "p/", 0, NULL, NULL, NULL, NULL),
			       TN_EACCES, "not open for reading");
	ck_assert_unchanged(a, before);
	close(wo);
	close(ro);
	close(fd);
	tn_arena_unref(a);
}
END_TEST

/* ---- names: EEXIST, REPLACE, SEAL, a full directory ----------------------------------------- */

/* A safetensors file of @n float32 tensors "t00", "t01", ... of @numel elements, element j
 * of tensor i being @base + i * 1000 + j. */
static void make_st_file(tn_arena *scratch, const char *file, int n, int64_t numel, float base)
{
	char name[32];
	for (int i = 0; i < n; i++) {
		tn_tensor *t = arena_tensor(scratch, 1, &numel, TN_FLOAT32, 0);
		float *v = tn_tensor_data(t);
		for (int64_t j = 0; j < numel; j++)
			v[j] = base + (float)(i * 1000 + j);
		snprintf(name, sizeof(name), "tmp/t%02d", i);
		publish(scratch, name, t);
	}
	int fd = create_file(file);
	ck_assert_tn_ok(tnd_save(scratch, fd, TND_FORMAT_SAFETENSORS, "tmp/", 0, NULL, NULL, NULL,
				 NULL));
	close(fd);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "tmp/t%02d", i);
		ck_assert_tn_ok(tn_arena_unpublish(scratch, name));
	}
}

static float value_of(tn_arena *a, const char *name, int64_t j)
{
	tn_tensor *t;
	ck_assert_tn_ok(tn_arena_lookup(a, name, &t, NULL));
	float v = ((const float *)tn_tensor_data(t))[j];
	tn_tensor_unref(t);
	return v;
}

START_TEST(test_names)
{
	tn_arena *s = make_arena("s", 16 * MIB, 0), *a = make_arena("a", 16 * MIB, 0);
	make_st_file(s, "one", 3, 10, 0);
	make_st_file(s, "two", 3, 10, 0.5f);
	int one = open_file("one"), two = open_file("two");

	ck_assert_tn_ok(tnd_load(a, one, TND_FORMAT_AUTO, "p/", 0, NULL, NULL, NULL, NULL));
	struct snapshot before = assert_load_refused(a, two, "p/", 0, TN_EEXIST,
						     "tnd_load: 'p/t00' is already published in arena");
	ck_assert_double_eq(value_of(a, "p/t01", 3), 1003);

	/* REPLACE: the new values, the same names, the old blocks freed. */
	ck_assert_tn_ok(tnd_load(a, two, TND_FORMAT_AUTO, "p/", TND_XFER_REPLACE, NULL, NULL, NULL,
				 NULL));
	ck_assert_double_eq(value_of(a, "p/t01", 3), 1003.5);
	/* The same bytes in use; where the blocks lie may differ. */
	ck_assert_uint_eq(snap(a).s.free_bytes, before.s.free_bytes);
	ck_assert_str_eq(snap(a).names, before.names);

	/* SEAL: sealed entries, which REPLACE cannot replace. */
	ck_assert_tn_ok(tnd_load(a, one, TND_FORMAT_AUTO, "s/", TND_XFER_SEAL, NULL, NULL, NULL,
				 NULL));
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "s/t02", &e));
	ck_assert_uint_eq(e.flags & TN_ARENA_ENTRY_SEALED, TN_ARENA_ENTRY_SEALED);
	assert_load_refused(a, two, "s/", TND_XFER_REPLACE, TN_EEXIST, "and sealed");
	close(one);
	close(two);
	tn_arena_unref(a);
	tn_arena_unref(s);
}
END_TEST

/* The header of a file open as @fd, parsed with its metadata. */
static struct tn__safetensors *parse_saved(int fd)
{
	size_t size;
	unsigned char *file = slurp_fd(fd, &size);
	uint64_t hlen;
	struct tn__safetensors *st;
	ck_assert_tn_ok(tn__safetensors_prefix(file, size, size, &hlen));
	ck_assert_tn_ok(tn__safetensors_parse(file + 8, (size_t)hlen, size,
					      TN__SAFETENSORS_KEEP_METADATA, &st));
	free(file);
	return st;
}

/* A safetensors file's "__metadata__" survives a load and a save: kept as the uint8 tensor
 * PREFIX__metadata__, written back by a save of PREFIX; a file without metadata adds no such
 * name. A prefix that is a tensor's whole name saves that tensor alone, under its name. */
START_TEST(test_metadata)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	static const char hdr[] = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"a\\\"b\\u00e9\"},"
				  "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	unsigned char file[256];
	size_t hl = (sizeof(hdr) - 1 + 7) / 8 * 8;
	uint64_t hl64 = hl;
	memcpy(file, &hl64, 8); /* little-endian, as every machine libtensor builds for */
	memset(file + 8, ' ', hl);
	memcpy(file + 8, hdr, sizeof(hdr) - 1);
	float w[2] = { 1.5f, -2.0f };
	memcpy(file + 8 + hl, w, sizeof(w));
	write_file("meta.safetensors", file, 8 + hl + sizeof(w));

	int in = open_file("meta.safetensors");
	ck_assert_tn_ok(tnd_load(a, in, TND_FORMAT_AUTO, "p/", 0, NULL, NULL, NULL, NULL));
	close(in);
	tn_arena_entry e;
	ck_assert_tn_ok(tn_arena_info(a, "p/__metadata__", &e));
	ck_assert_int_eq(e.dtype, TN_UINT8);
	ck_assert_int_eq(e.ndim, 1);
	ck_assert_double_eq(value_of(a, "p/w", 1), -2.0);

	/* Saved back: the same metadata, and the tensor alone. */
	int out = create_file("out.safetensors");
	struct tnd_xfer_result res;
	ck_assert_tn_ok(tnd_save(a, out, TND_FORMAT_SAFETENSORS, "p/", 0, NULL, NULL, NULL, &res));
	ck_assert_uint_eq(res.tensors, 1);
	struct tn__safetensors *st = parse_saved(out);
	close(out);
	ck_assert_uint_eq(st->ntensors, 1);
	ck_assert_str_eq(st->tensors[0].name, "w");
	ck_assert(st->has_metadata);
	ck_assert_uint_eq(st->nmeta, 2);
	ck_assert_str_eq(st->meta[0].key, "format");
	ck_assert_str_eq(st->meta[0].value, "pt");
	ck_assert_str_eq(st->meta[1].key, "note");
	ck_assert_str_eq(st->meta[1].value, "a\"b\xc3\xa9");
	tn__safetensors_free(st);

	/* Loaded again under another prefix: the same record. */
	in = open_file("out.safetensors");
	ck_assert_tn_ok(tnd_load(a, in, TND_FORMAT_AUTO, "q/", 0, NULL, NULL, NULL, NULL));
	close(in);
	tn_arena_entry e2;
	ck_assert_tn_ok(tn_arena_info(a, "q/__metadata__", &e2));
	ck_assert_int_eq(e2.sizes[0], e.sizes[0]);
	tn_tensor *m1, *m2;
	ck_assert_tn_ok(tn_arena_lookup(a, "p/__metadata__", &m1, NULL));
	ck_assert_tn_ok(tn_arena_lookup(a, "q/__metadata__", &m2, NULL));
	ck_assert_int_eq(memcmp(tn_tensor_data(m1), tn_tensor_data(m2), (size_t)e.sizes[0]), 0);
	tn_tensor_unref(m1);
	tn_tensor_unref(m2);

	/* A file without metadata adds no record. */
	int64_t two = 2;
	publish(a, "plain/x", arena_tensor(a, 1, &two, TN_FLOAT32, 3));
	out = create_file("plain.safetensors");
	ck_assert_tn_ok(tnd_save(a, out, TND_FORMAT_SAFETENSORS, "plain/", 0, NULL, NULL, NULL,
				 NULL));
	st = parse_saved(out);
	ck_assert(!st->has_metadata);
	tn__safetensors_free(st);
	ck_assert_tn_ok(tnd_load(a, out, TND_FORMAT_AUTO, "r/", 0, NULL, NULL, NULL, NULL));
	close(out);
	ck_assert_int_eq(tn_arena_info(a, "r/__metadata__", &e2), TN_ENOENT);

	/* One tensor by its exact name: that tensor alone, under its whole name. */
	out = create_file("one.safetensors");
	ck_assert_tn_ok(tnd_save(a, out, TND_FORMAT_SAFETENSORS, "p/w", 0, NULL, NULL, NULL, &res));
	ck_assert_uint_eq(res.tensors, 1);
	st = parse_saved(out);
	close(out);
	ck_assert_uint_eq(st->ntensors, 1);
	ck_assert_str_eq(st->tensors[0].name, "p/w");
	ck_assert(!st->has_metadata);
	tn__safetensors_free(st);

	/* A PREFIX__metadata__ that is not a record is refused, the file left empty. */
	publish(a, "bad/__metadata__", arena_tensor(a, 1, &two, TN_FLOAT32, 4));
	out = create_file("bad.safetensors");
	ck_assert_tn_error_has(tnd_save(a, out, TND_FORMAT_SAFETENSORS, "bad/", 0, NULL, NULL,
					NULL, NULL),
			       TN_EINVAL, "'bad/__metadata__' is not the uint8 vector");
	ck_assert_int_eq(lseek(out, 0, SEEK_END), 0);
	close(out);
	tn_arena_unref(a);
}
END_TEST

/* The directory fills up while publishing: the names published go, the tensor replaced comes
 * back with its old values, the blocks are freed. */
START_TEST(test_directory_full)
{
	tn_arena *s = make_arena("s", 16 * MIB, 0), *a = make_arena("a", 16 * MIB, 4);
	uint64_t max = snap(a).s.max_names;
	ck_assert_uint_lt(max, 40);
	make_st_file(s, "one", 1, 100, 0);
	make_st_file(s, "many", (int)max + 1, 100, 0.25f);
	int one = open_file("one"), many = open_file("many");

	ck_assert_tn_ok(tnd_load(a, one, TND_FORMAT_AUTO, "p/", 0, NULL, NULL, NULL, NULL));
	assert_load_refused(a, many, "p/", TND_XFER_REPLACE, TN_ENOSPC, "directory");
	ck_assert_double_eq(value_of(a, "p/t00", 7), 7);
	close(one);
	close(many);
	tn_arena_unref(a);
	tn_arena_unref(s);
}
END_TEST

/* An arena too small: TN_ENOMEM after some blocks were allocated, all of them freed. */
START_TEST(test_arena_full)
{
	tn_arena *s = make_arena("s", 64 * MIB, 0), *a = make_arena("a", 4 * MIB, 0);
	make_st_file(s, "big", 6, (int64_t)(MIB / 4), 0); /* 6 tensors of 1 MiB */
	int fd = open_file("big");
	assert_load_refused(a, fd, "p/", 0, TN_ENOMEM, "");
	close(fd);
	tn_arena_unref(a);
	tn_arena_unref(s);
}
END_TEST

/* ---- the read paths, progress, cancel ------------------------------------------------------- */

struct progress_log {
	uint64_t calls, last_done, total;
	bool monotonic;
	_Atomic bool *cancel_at_first;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress_log *p = ctx;
	if (done < p->last_done || (p->calls && total != p->total) || done > total)
		p->monotonic = false;
	p->calls++;
	p->last_done = done;
	p->total = total;
	if (p->cancel_at_first)
		atomic_store(p->cancel_at_first, true);
}

/*
 * A file of about 200 MiB whose tensors sit at offsets aligned to nothing (a 3-byte uint8
 * tensor first, then int16 and float32 ones of odd lengths), loaded cold (O_DIRECT staging),
 * warm (straight into the blocks) and half and half; each time the same bytes, progress
 * monotonic every 64 MiB or more and ending at the total; then cancelled from the progress
 * callback, leaving nothing.
 */
START_TEST(test_paths_progress_cancel)
{
	tn_arena *s = make_arena("s", 320 * MIB, 0), *a = make_arena("a", 320 * MIB, 0);
	int64_t n3 = 3, n_small = 1001, n_big = 33 * (int64_t)MIB + 7;
	publish(s, "f/a", arena_tensor(s, 1, &n3, TN_UINT8, 1));
	publish(s, "f/b", arena_tensor(s, 1, &n_small, TN_INT16, 2));
	publish(s, "f/c", arena_tensor(s, 1, &n_big, TN_FLOAT32, 3));
	publish(s, "f/d", arena_tensor(s, 1, &n_small, TN_INT8, 4));
	publish(s, "f/e", arena_tensor(s, 1, &n_big, TN_INT16, 5));
	int fd = create_file("big");
	struct tnd_xfer_result r;
	ck_assert_tn_ok(tnd_save(s, fd, TND_FORMAT_SAFETENSORS, "f/", 0, NULL, NULL, NULL, &r));
	ck_assert_uint_gt(r.bytes, 190 * MIB);

	static const char *const names[] = { "a", "b", "c", "d", "e" };
	for (int round = 0; round < 3; round++) {
		struct progress_log log = { .monotonic = true };
		struct snapshot before = snap(a);
		char na[16], nb[16];
		if (round == 0) {
			uncache(fd);
		} else if (round == 2) {
			/* Every other 8 MiB window cached. */
			uncache(fd);
			unsigned char *buf = malloc(MIB);
			for (uint64_t off = 0; off < r.file_bytes; off += 16 * MIB)
				ck_assert_int_gt(pread(fd, buf, MIB, (off_t)off), 0);
			free(buf);
		}
		ck_assert_tn_ok(tnd_load(a, fd, TND_FORMAT_AUTO, "g/", 0, on_progress, &log, NULL,
					 &r));
		ck_assert(log.monotonic);
		ck_assert_uint_ge(log.calls, 3);
		ck_assert_uint_le(log.calls, r.bytes / TND_XFER_PROGRESS_STEP + 1);
		ck_assert_uint_eq(log.last_done, r.bytes);
		ck_assert_uint_eq(log.total, r.bytes);
		for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
			snprintf(na, sizeof(na), "f/%s", names[i]);
			snprintf(nb, sizeof(nb), "g/%s", names[i]);
			assert_same_as_published(s, na, a, nb);
			ck_assert_tn_ok(tn_arena_unpublish(a, nb));
		}
		ck_assert_unchanged(a, before);
	}

	/* Cancelled at the first report, cold and warm. */
	for (int round = 0; round < 2; round++) {
		_Atomic bool cancel = false;
		struct progress_log log = { .monotonic = true, .cancel_at_first = &cancel };
		struct snapshot before = snap(a);
		if (round == 0)
			uncache(fd);
		ck_assert_tn_error(tnd_load(a, fd, TND_FORMAT_AUTO, "g/", 0, on_progress, &log,
					    &cancel, NULL),
				   TN_EIO, "tnd_load: cancelled");
		ck_assert_uint_eq(log.calls, 1);
		ck_assert_unchanged(a, before);
	}
	/* Cancelled before it starts; and a save cancelled leaves an empty file. */
	_Atomic bool cancel = true;
	ck_assert_tn_error(tnd_load(a, fd, TND_FORMAT_AUTO, "g/", 0, NULL, NULL, &cancel, NULL),
			   TN_EIO, "tnd_load: cancelled");
	int f2 = create_file("cancelled");
	ck_assert_tn_error(tnd_save(s, f2, TND_FORMAT_SAFETENSORS, "f/", 0, NULL, NULL, &cancel,
				    NULL),
			   TN_EIO, "tnd_save: cancelled");
	ck_assert_int_eq(lseek(f2, 0, SEEK_END), 0);
	close(f2);
	close(fd);
	tn_arena_unref(a);
	tn_arena_unref(s);
}
END_TEST

/* Saving progress: every 64 MiB at most, ending at the total, including non-contiguous
 * tensors gathered through the staging buffers. */
START_TEST(test_save_progress)
{
	tn_arena *s = make_arena("s", 200 * MIB, 0), *a = make_arena("a", 200 * MIB, 0);
	int64_t sz[2] = { 4099, 4097 };
	tn_tensor *t = arena_tensor(s, 2, sz, TN_FLOAT32, 9), *v;
	ck_assert_tn_ok(tn_transpose(t, 0, 1, &v));
	tn_tensor_unref(t);
	publish(s, "q/t", v);
	publish(s, "q/c", arena_tensor(s, 2, sz, TN_INT16, 10));
	struct progress_log log = { .monotonic = true };
	int fd = create_file("p");
	struct tnd_xfer_result r;
	ck_assert_tn_ok(tnd_save(s, fd, TND_FORMAT_SAFETENSORS, "q/", 0, on_progress, &log, NULL,
				 &r));
	ck_assert(log.monotonic);
	ck_assert_uint_eq(r.bytes, (uint64_t)(4099 * 4097) * 6);
	ck_assert_uint_eq(log.last_done, r.bytes);
	ck_assert_uint_ge(log.calls, 2);
	ck_assert_uint_le(log.calls, r.bytes / TND_XFER_PROGRESS_STEP + 1);
	uncache(fd);
	ck_assert_tn_ok(tnd_load(a, fd, TND_FORMAT_AUTO, "", 0, NULL, NULL, NULL, NULL));
	assert_same_as_published(s, "q/t", a, "t");
	assert_same_as_published(s, "q/c", a, "c");
	close(fd);
	tn_arena_unref(a);
	tn_arena_unref(s);
}
END_TEST

/* ---- allocation failures -------------------------------------------------------------------- */

START_TEST(test_alloc_failures)
{
	tn_arena *a = make_arena("a", 16 * MIB, 0);
	int fd = open_golden("mixed.safetensors");
	struct snapshot before = snap(a);
	uint64_t nth;
	int r;

	for (nth = 1;; nth++) {
		tn_alloc_fail_nth(nth);
		r = tnd_load(a, fd, TND_FORMAT_AUTO, "g/", 0, NULL, NULL, NULL, NULL);
		tn_alloc_fail_nth(0);
		if (!r)
			break;
		ck_assert_msg(r == TN_ENOMEM, "attempt %" PRIu64 ": %d %s", nth, r,
			      tn_last_error());
		ck_assert_unchanged(a, before);
		ck_assert_uint_lt(nth, 1000);
	}
	ck_assert_uint_gt(nth, 10);
	ck_assert_uint_eq(snap(a).count, 13); /* 12 tensors and g/__metadata__ */
	int out = create_file("out.safetensors");
	for (nth = 1;; nth++) {
		tn_alloc_fail_nth(nth);
		r = tnd_save(a, out, TND_FORMAT_SAFETENSORS, "g/", 0, NULL, NULL, NULL, NULL);
		tn_alloc_fail_nth(0);
		if (!r)
			break;
		ck_assert_msg(r == TN_ENOMEM, "attempt %" PRIu64 ": %d %s", nth, r,
			      tn_last_error());
		ck_assert_int_eq(lseek(out, 0, SEEK_END), 0);
		ck_assert_uint_lt(nth, 1000);
	}
	ck_assert_uint_gt(nth, 3);
	close(out);
	close(fd);
	tn_arena_unref(a);
}
END_TEST

static Suite *loadsave_suite(void)
{
	Suite *s = suite_create("loadsave");
	TCase *tc = tcase_create("loadsave");
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_roundtrip_safetensors);
	tcase_add_test(tc, test_roundtrip_npy);
	tcase_add_test(tc, test_aligned_save_read);
	tcase_add_test(tc, test_fortran);
	tcase_add_loop_test(tc, test_golden_safetensors, 0, (int)ARRAY_SIZE(golden_st_files));
	tcase_add_loop_test(tc, test_golden_npy, 0, (int)ARRAY_SIZE(golden_npy_files));
	tcase_add_loop_test(tc, test_golden_npy_refused, 0, (int)ARRAY_SIZE(golden_npy_refused));
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_mutated);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_metadata);
	tcase_add_test(tc, test_directory_full);
	tcase_add_test(tc, test_arena_full);
	tcase_add_test(tc, test_paths_progress_cancel);
	tcase_add_test(tc, test_save_progress);
	tcase_add_test(tc, test_alloc_failures);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(loadsave_suite)
