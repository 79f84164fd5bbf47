/* SPDX-License-Identifier: MIT */
/* Storages: strong and weak counts, blobs and deleters, resizing, devices, bad handles. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string.h>

#include "testutil.h"

static const tn_device cpu = { TN_DEVICE_CPU, 0 };

START_TEST(test_new_and_counts)
{
	struct tn_baseline b = tn_test_baseline();
	tn_storage *s;

	ck_assert_tn_ok(tn_storage_new(cpu, 256, &s));
	ck_assert_ptr_nonnull(tn_storage_data(s));
	ck_assert_uint_eq((uintptr_t)tn_storage_data(s) % 64, 0);
	ck_assert_uint_eq(tn_storage_nbytes(s), 256);
	ck_assert(tn_storage_is_resizable(s));
	ck_assert_int_eq(tn_storage_device(s).type, TN_DEVICE_CPU);
	ck_assert_int_eq(tn_storage_use_count(s), 1);
	ck_assert_int_eq(tn_storage_weak_count(s), 0);
	ck_assert_ptr_eq(tn_storage_ref(s), s);
	ck_assert_int_eq(tn_storage_use_count(s), 2);
	ck_assert_ptr_null(tn_storage_unref(s));
	ck_assert_int_eq(tn_storage_use_count(s), 1);
	tn_storage_unref(s);
	ck_assert_no_leak(b);

	/* Zero bytes: a valid storage with no data pointer. */
	ck_assert_tn_ok(tn_storage_new(cpu, 0, &s));
	ck_assert_ptr_null(tn_storage_data(s));
	ck_assert_uint_eq(tn_storage_nbytes(s), 0);
	tn_storage_unref(s);
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_weak_references)
{
	struct tn_baseline b = tn_test_baseline();
	tn_storage *s;

	ck_assert_tn_ok(tn_storage_new(cpu, 64, &s));
	ck_assert_ptr_eq(tn_storage_weak_ref(s), s);
	ck_assert_int_eq(tn_storage_weak_count(s), 1);
	/* While a strong reference exists, lock gives a new strong one. */
	ck_assert_ptr_eq(tn_storage_weak_lock(s), s);
	ck_assert_int_eq(tn_storage_use_count(s), 2);
	tn_storage_unref(s);
	tn_storage_unref(s);
	/* The bytes are gone, the handle is not: lock fails cleanly. */
	ck_assert_int_eq(tn_storage_use_count(s), 0);
	ck_assert_ptr_null(tn_storage_data(s));
	ck_assert_ptr_null(tn_storage_weak_lock(s));
	ck_assert_int_eq(tn_storage_weak_count(s), 1);
	tn_storage *t;
	ck_assert_tn_error(tn_tensor_new(s, 0, 0, NULL, NULL, TN_INT8, &(tn_tensor *){ NULL }),
			   TN_EBADF, "not a live storage handle (NULL, freed or foreign)");
	ck_assert_tn_error(tn_storage_resize(s, 10), TN_EBADF,
			   "tn_storage_resize: the storage has no strong reference");
	(void)t;
	tn_storage_weak_unref(s);
	ck_assert_no_leak(b);
	/* Now the handle is dead too. */
	ck_assert_ptr_null(tn_storage_weak_lock(s));
	ck_assert_ptr_null(tn_storage_ref(s));
}
END_TEST

static void count_deleter(void *data, void *ctx)
{
	int *calls = ctx;
	ck_assert_ptr_nonnull(data);
	(*calls)++;
}

START_TEST(test_from_blob_deleter)
{
	static double blob[16];
	int calls = 0;
	tn_storage *s;
	tn_tensor *t;
	int64_t sizes[] = { 4, 4 };

	ck_assert_tn_ok(tn_storage_from_blob(cpu, blob, sizeof(blob), count_deleter, &calls, &s));
	ck_assert_ptr_eq(tn_storage_data(s), blob);
	ck_assert(!tn_storage_is_resizable(s));
	ck_assert_tn_error(tn_storage_resize(s, 8), TN_EPERM,
			   "Trying to resize storage that is not resizable");
	ck_assert_tn_ok(tn_tensor_new(s, 0, 2, sizes, NULL, TN_FLOAT64, &t));
	tn_storage_unref(s);
	ck_assert_int_eq(calls, 0); /* the tensor still holds it */
	tn_tensor_unref(t);
	ck_assert_int_eq(calls, 1);

	/* tn_from_blob: the deleter runs at the end, and not at all on failure. */
	calls = 0;
	int64_t bad[] = { 4, -4 };
	ck_assert_int_eq(tn_from_blob(blob, 2, bad, NULL, TN_FLOAT64, count_deleter, &calls, &t),
			 TN_EINVAL);
	ck_assert_tn_ok(tn_from_blob(blob, 2, sizes, NULL, TN_FLOAT64, count_deleter, &calls, &t));
	ck_assert_uint_eq(tn_storage_nbytes(tn_tensor_storage(t)), sizeof(blob));
	tn_tensor_unref(t);
	ck_assert_int_eq(calls, 1);

	ck_assert_tn_error(tn_storage_from_blob(cpu, NULL, 8, NULL, NULL, &s), TN_EINVAL,
			   "tn_storage_from_blob: NULL data for 8 bytes");
	ck_assert_tn_ok(tn_storage_from_blob(cpu, NULL, 0, NULL, NULL, &s));
	tn_storage_unref(s);
}
END_TEST

START_TEST(test_resize)
{
	struct tn_baseline b = tn_test_baseline();
	tn_storage *s;

	ck_assert_tn_ok(tn_storage_new(cpu, 16, &s));
	for (int i = 0; i < 16; i++)
		((unsigned char *)tn_storage_data(s))[i] = (unsigned char)i;
	ck_assert_tn_ok(tn_storage_resize(s, (size_t)3 << 20)); /* small -> large path */
	ck_assert_uint_eq(tn_storage_nbytes(s), (size_t)3 << 20);
	for (int i = 0; i < 16; i++)
		ck_assert_int_eq(((unsigned char *)tn_storage_data(s))[i], i);
	/* Shrinking while a tensor views it could leave the view past the end: refused. */
	tn_tensor *t;
	int64_t n = 1 << 20;
	ck_assert_tn_ok(tn_tensor_new(s, 0, 1, &n, NULL, TN_UINT8, &t));
	ck_assert_tn_error(tn_storage_resize(s, 8), TN_EBUSY,
			   "tn_storage_resize: cannot shrink a storage from 3145728 to 8 bytes while 1 "
			   "tensors view it and 2 references hold it");
	/* Even when the tensor's reference is the only one left: its view would escape. */
	tn_storage_unref(s);
	s = tn_tensor_storage(t);
	ck_assert_int_eq(tn_storage_use_count(s), 1);
	ck_assert_tn_error(tn_storage_resize(s, 8), TN_EBUSY,
			   "tn_storage_resize: cannot shrink a storage from 3145728 to 8 bytes while 1 "
			   "tensors view it and 1 references hold it");
	ck_assert_tn_ok(tn_storage_resize(s, (size_t)4 << 20)); /* growing is always fine */
	tn_storage_ref(s);
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_storage_resize(s, 8));
	ck_assert_uint_eq(tn_storage_nbytes(s), 8);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(((unsigned char *)tn_storage_data(s))[i], i);
	ck_assert_tn_ok(tn_storage_resize(s, 0));
	ck_assert_ptr_null(tn_storage_data(s));
	tn_storage_unref(s);
	ck_assert_no_leak(b);
}
END_TEST

START_TEST(test_devices)
{
	tn_storage *s;
	tn_device meta = { TN_DEVICE_META, 0 }, cuda = { TN_DEVICE_CUDA, 0 };

	ck_assert_tn_ok(tn_storage_new(meta, (size_t)1 << 40, &s));
	ck_assert_ptr_null(tn_storage_data(s));
	ck_assert_uint_eq(tn_storage_nbytes(s), (size_t)1 << 40);
	ck_assert_tn_ok(tn_storage_resize(s, 10));
	ck_assert_uint_eq(tn_storage_nbytes(s), 10);
	tn_storage_unref(s);
	/* CUDA: without its backend (a build without it, or libtensor-cuda not loadable) the
	 * reason; with it, the device must exist. */
	if (!tn_cuda_caching_allocator()) {
		ck_assert_int_eq(tn_storage_new(cuda, 8, &s), TN_ENODEV);
		ck_assert_msg(strncmp(tn_last_error(), "tn_storage_new: libtensor was built without "
					"CUDA (configure --with-cuda)", 72) == 0 ||
				      strncmp(tn_last_error(), "tn_storage_new: the CUDA backend could "
					      "not be loaded: ", 54) == 0,
			      "%s", tn_last_error());
	} else if (tn_cuda_device_count() == 0)
		ck_assert_tn_error(tn_storage_new(cuda, 8, &s), TN_ENODEV,
				   "tn_storage_new: no CUDA GPUs are available");
	if (tn_cuda_device_count() > 0)
		ck_assert_tn_error_has(tn_storage_new((tn_device){ TN_DEVICE_CUDA, 4096 }, 8, &s),
				       TN_ENODEV, "invalid device ordinal 4096");
	ck_assert_tn_error(tn_storage_new((tn_device){ TN_DEVICE_CPU, 1 }, 8, &s), TN_EINVAL,
			   "tn_storage_new: invalid device index 1 for cpu");
	ck_assert_tn_error(tn_storage_new((tn_device){ (enum tn_device_type)9, 0 }, 8, &s),
			   TN_EINVAL, "tn_storage_new: invalid device type 9");
	ck_assert_tn_error(tn_storage_new(cpu, 8, NULL), TN_EINVAL,
			   "tn_storage_new: NULL ret_storage");
	ck_assert_int_ge(tn_cuda_device_count(), 0);
	/* A CUDA storage the caller vouches for (a blob) on a machine without a GPU, or without
	 * the backend: operators on it reach the CUDA kernels, which refuse with TN_ENODEV
	 * naming the operator, and nothing touches the bytes. */
	if (tn_cuda_device_count() == 0) {
		float fake_dev[4] = { 1, 2, 3, 4 };
		int64_t four = 4;
		tn_tensor *t = NULL, *r = NULL;
		ck_assert_tn_ok(tn_storage_from_blob(cuda, fake_dev, sizeof(fake_dev), NULL, NULL, &s));
		ck_assert_tn_ok(tn_tensor_new(s, 0, 1, &four, NULL, TN_FLOAT32, &t));
		tn_storage_unref(s);
		ck_assert_int_eq(tn_add(t, t, tn_scalar_int(1), &r), TN_ENODEV);
		ck_assert_ptr_null(r);
		/* In place nothing is allocated: the kernel itself refuses, naming the operator
		 * when there is no backend. */
		ck_assert_int_eq(tn_neg_(t), TN_ENODEV);
		ck_assert_msg(strstr(tn_last_error(), "no CUDA GPUs are available") ||
				      strncmp(tn_last_error(), "neg: ", 5) == 0,
			      "%s", tn_last_error());
		ck_assert_float_eq(fake_dev[3], 4);
		tn_tensor_unref(t);
	}
}
END_TEST

START_TEST(test_bad_handles)
{
	tn_storage *s;
	tn_tensor *t;
	int64_t one = 1;

	/* NULL */
	ck_assert_ptr_null(tn_storage_ref(NULL));
	ck_assert_ptr_null(tn_storage_unref(NULL));
	ck_assert_ptr_null(tn_storage_data(NULL));
	ck_assert_uint_eq(tn_storage_nbytes(NULL), 0);
	ck_assert_tn_error(tn_storage_resize(NULL, 1), TN_EBADF,
			   "tn_storage_resize: not a live storage handle (NULL, freed or foreign)");
	/* Foreign: a tensor handle passed as a storage, and a random struct. */
	ck_assert_tn_ok(tn_empty(1, &one, TN_INT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_ptr_null(tn_storage_ref((tn_storage *)t));
	ck_assert_int_eq(tn_storage_use_count((tn_storage *)t), 0);
	struct { uint64_t junk[16]; } fake = { { 0x1234 } };
	ck_assert_ptr_null(tn_storage_unref((tn_storage *)&fake));
	ck_assert_int_eq(tn_storage_resize((tn_storage *)&fake, 4), TN_EBADF);
	tn_tensor_unref(t);
	/* Freed. */
	ck_assert_tn_ok(tn_storage_new(cpu, 8, &s));
	tn_storage_unref(s);
	ck_assert_ptr_null(tn_storage_ref(s));
	ck_assert_ptr_null(tn_storage_unref(s)); /* a double unref is refused, not a double free */
	ck_assert_int_eq(tn_storage_resize(s, 4), TN_EBADF);
	ck_assert_int_eq(tn_tensor_new(s, 0, 1, &one, NULL, TN_INT8, &t), TN_EBADF);
}
END_TEST

/* Many threads take views of one tensor, drop them, and churn large and small blocks: the
 * counts must come out exact and (under TSan) race-free. */
#define THREADS 4
#define ROUNDS 2000

static void *churn(void *arg)
{
	tn_tensor *shared = arg;
	for (int i = 0; i < ROUNDS; i++) {
		tn_tensor *v, *w;
		if (tn_transpose(shared, 0, 1, &v) || tn_select(v, 0, i % 8, &w))
			return (void *)1;
		tn_tensor_unref(v);
		tn_storage *s;
		size_t n = (i % 16 == 0) ? (size_t)2 << 20 : 256;
		if (tn_storage_new(cpu, n, &s))
			return (void *)1;
		((unsigned char *)tn_storage_data(s))[n - 1] = 1;
		tn_storage *weak = tn_storage_weak_ref(tn_tensor_storage(w));
		tn_storage *strong = tn_storage_weak_lock(weak);
		if (strong != tn_tensor_storage(shared))
			return (void *)1;
		tn_storage_unref(strong);
		tn_storage_weak_unref(weak);
		tn_storage_unref(s);
		tn_tensor_unref(w);
	}
	return NULL;
}

START_TEST(test_threads_share_refcounts)
{
	struct tn_baseline b = tn_test_baseline();
	pthread_t th[THREADS];
	tn_tensor *t;
	int64_t sizes[] = { 4, 8 };

	ck_assert_tn_ok(tn_zeros(2, sizes, TN_FLOAT32, TN_CPU, &t));
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn, t), 0);
	for (int i = 0; i < THREADS; i++) {
		void *ret;
		pthread_join(th[i], &ret);
		ck_assert_ptr_null(ret);
	}
	ck_assert_int_eq(tn_storage_use_count(tn_tensor_storage(t)), 1);
	ck_assert_int_eq(tn_storage_weak_count(tn_tensor_storage(t)), 0);
	tn_tensor_unref(t);
	ck_assert_no_leak(b);
}
END_TEST

/*
 * The CUDA backend missing or broken: in a process of its own (the registry tries a load once
 * per process), TN_CUDA_LIBRARY names a file that is not there, then one that is no backend.
 * Every CUDA call says why with TN_ENODEV, and CPU work goes on. Writes the first failure
 * to @fd and exits 0 when all held.
 */
static void missing_backend_child(const char *library, int fd)
{
	int64_t four = 4;
	tn_tensor *t = NULL, *c = NULL;
	setenv("TN_CUDA_LIBRARY", library, 1);
	int dev;
	const int r1 = tn_cuda_current_device(&dev);
	char why[1024];
	snprintf(why, sizeof(why), "%s", tn_last_error());
	const int r2 = tn_zeros(1, &four, TN_FLOAT32, TN_CUDA(0), &t);
	const int n = tn_cuda_device_count();
	const int r3 = tn_zeros(1, &four, TN_FLOAT32, TN_CPU, &c);
	tn_tensor *d = NULL;
	const int r4 = r3 < 0 ? r3 : tn_add(c, c, tn_scalar_int(1), &d);
	char msg[1200];
	if (r1 != TN_ENODEV || r2 != TN_ENODEV || n != 0 || r3 < 0 || r4 < 0)
		snprintf(msg, sizeof(msg), "%d %d %d %d %d: %s", r1, r2, n, r3, r4, why);
	else
		snprintf(msg, sizeof(msg), "%s", why);
	(void)!write(fd, msg, strlen(msg));
	_exit(0);
}

static void expect_missing(const char *library, const char *want1, const char *want2)
{
	int p[2];
	char got[1300] = { 0 };
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		missing_backend_child(library, p[1]);
	}
	close(p[1]);
	ssize_t n = read(p[0], got, sizeof(got) - 1);
	close(p[0]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_gt(n, 0);
	ck_assert_msg(strstr(got, want1) || (want2 && strstr(got, want2)), "%s", got);
}

START_TEST(test_missing_backend)
{
	/* A build without CUDA says so whatever the variable names; a CUDA build names the file
	 * and the loader's error. */
	expect_missing("/nonexistent/libtensor-cuda.so",
		       "tn_cuda_current_device: libtensor was built without CUDA (configure "
		       "--with-cuda)",
		       "tn_cuda_current_device: the CUDA backend could not be loaded: "
		       "/nonexistent/libtensor-cuda.so: cannot open shared object file");
	expect_missing("libm.so.6",
		       "tn_cuda_current_device: libtensor was built without CUDA",
		       "tn_cuda_current_device: libm.so.6 is not a libtensor backend (no "
		       "tn_backend_init)");
}
END_TEST

static Suite *storage_suite(void)
{
	Suite *s = suite_create("storage");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_new_and_counts);
	tcase_add_test(tc, test_weak_references);
	tcase_add_test(tc, test_from_blob_deleter);
	tcase_add_test(tc, test_resize);
	tcase_add_test(tc, test_devices);
	tcase_add_test(tc, test_missing_backend);
	tcase_add_test(tc, test_bad_handles);
	tcase_add_test(tc, test_threads_share_refcounts);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(storage_suite)
