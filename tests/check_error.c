/* SPDX-License-Identifier: MIT */
/* Error codes, tn_strerror and the per-thread last-error message. */
#include <pthread.h>

#include "testutil.h"

START_TEST(test_strerror_table)
{
	/* Every code in the table has its own description, for both signs. */
#define X(name, value, desc)                                          \
	ck_assert_str_eq(tn_strerror(value), desc);                   \
	ck_assert_str_eq(tn_strerror(-(value)), desc);
	TN_ERROR_LIST(X)
#undef X
	ck_assert_int_eq(TN_EINVAL, -EINVAL);
	ck_assert_int_eq(TN_ENOMEM, -ENOMEM);
	ck_assert_str_eq(tn_strerror(-12345), "unknown error");
	ck_assert_str_eq(tn_strerror(-EPIPE), "unknown error");
}
END_TEST

START_TEST(test_last_error_set_and_clear)
{
	tn_tensor *t;
	int64_t sizes[] = { 2, -3 };

	tn_clear_error();
	ck_assert_str_eq(tn_last_error(), "");
	ck_assert_tn_error(tn_empty(2, sizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EINVAL,
			   "Trying to create tensor with negative dimension -3: [2, -3]");
	/* A success does not clear the message. */
	sizes[1] = 3;
	ck_assert_tn_ok(tn_empty(2, sizes, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_str_ne(tn_last_error(), "");
	tn_clear_error();
	ck_assert_str_eq(tn_last_error(), "");
	tn_tensor_unref(t);
}
END_TEST

static void *other_thread(void *arg)
{
	tn_tensor *t;
	const char **seen = arg;
	seen[0] = strdup(tn_last_error());
	tn_dtype_from_name("complex256", &(enum tn_dtype){ 0 });
	seen[1] = strdup(tn_last_error());
	(void)t;
	return NULL;
}

START_TEST(test_last_error_is_per_thread)
{
	const char *seen[2];
	pthread_t th;
	enum tn_dtype d;

	ck_assert_int_eq(tn_dtype_from_name("nope", &d), TN_EINVAL);
	ck_assert_str_eq(tn_last_error(), "unknown dtype 'nope'");
	ck_assert_int_eq(pthread_create(&th, NULL, other_thread, seen), 0);
	pthread_join(th, NULL);
	ck_assert_str_eq(seen[0], "");
	ck_assert_str_eq(seen[1], "unknown dtype 'complex256'");
	ck_assert_str_eq(tn_last_error(), "unknown dtype 'nope'");
	free((void *)seen[0]);
	free((void *)seen[1]);
}
END_TEST

START_TEST(test_long_messages_are_truncated_safely)
{
	/* A 64-dim shape makes a long message; it must stay NUL-terminated and bounded. */
	int64_t sizes[TN_MAX_DIMS];
	tn_tensor *t;
	for (int i = 0; i < TN_MAX_DIMS; i++)
		sizes[i] = 1000000000000LL + i;
	sizes[TN_MAX_DIMS - 1] = -1;
	ck_assert_int_eq(tn_empty(TN_MAX_DIMS, sizes, TN_INT8, TN_CPU, TN_CONTIGUOUS_FORMAT, &t), TN_EINVAL);
	ck_assert_uint_lt(strlen(tn_last_error()), 1024);
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "negative dimension -1"));
	ck_assert_ptr_nonnull(strstr(tn_last_error(), "...]"));
}
END_TEST

START_TEST(test_version)
{
	ck_assert_str_eq(tn_version(), TN_VERSION_STRING);
	ck_assert_int_eq(TN_VERSION_MAJOR, 0);
}
END_TEST

static Suite *error_suite(void)
{
	Suite *s = suite_create("error");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_strerror_table);
	tcase_add_test(tc, test_last_error_set_and_clear);
	tcase_add_test(tc, test_last_error_is_per_thread);
	tcase_add_test(tc, test_long_messages_are_truncated_safely);
	tcase_add_test(tc, test_version);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(error_suite)
