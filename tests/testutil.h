/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the Check suites: an error assertion that also checks the message, a
 * leak baseline from the allocator's counters, and the main() every suite uses.
 */
#ifndef TN_TESTUTIL_H
#define TN_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Check marks the location of every passing assertion in fork mode with a write() to its
 * pipe, so an assertion in a loop over a million elements costs a million system calls (most
 * of a suite's time). The same few locations in a row are marked once: a crash still reports
 * the last assertion that passed before it.
 */
static inline void tn_test_mark_point(const char *file, int line)
{
	static _Thread_local const char *files[4];
	static _Thread_local int lines[4];
	static _Thread_local unsigned next;
	for (int i = 0; i < 4; i++)
		if (lines[i] == line && files[i] == file)
			return;
	files[next % 4] = file;
	lines[next % 4] = line;
	next++;
	(_mark_point)(file, line);
}
#define _mark_point(file, line) tn_test_mark_point(file, line)

#include <tensor.h>

/* Force CPU capability @i (a Check loop index) for this forked test: kernels chosen from here
 * on are that variant, or the best below it the machine has. Returns the capability asked. */
static inline enum tn_cpu_capability tn_test_force_capability(int i)
{
	enum tn_cpu_capability want = (enum tn_cpu_capability)i;
	setenv("TN_CPU_CAPABILITY", tn_cpu_capability_name(want), 1);
	ck_assert_int_le(tn_cpu_capability(), want);
	return want;
}

/* The call failed with @code and left exactly @msg as the thread's last error. */
#define ck_assert_tn_error(call, code, msg)                                              \
	do {                                                                             \
		tn_clear_error();                                                        \
		int tn_r_ = (call);                                                      \
		ck_assert_msg(tn_r_ == (code), "%s returned %d (%s), expected %d", #call, \
			      tn_r_, tn_last_error(), (int)(code));                      \
		ck_assert_str_eq(tn_last_error(), (msg));                                \
	} while (0)

/* The call failed with @code and left a message containing @part. */
#define ck_assert_tn_error_has(call, code, part)                                          \
	do {                                                                              \
		tn_clear_error();                                                         \
		int tn_r_ = (call);                                                       \
		ck_assert_msg(tn_r_ == (code), "%s returned %d (%s), expected %d", #call,  \
			      tn_r_, tn_last_error(), (int)(code));                       \
		ck_assert_msg(strstr(tn_last_error(), (part)) != NULL,                    \
			      "message '%s' lacks '%s'", tn_last_error(), (part));        \
	} while (0)

#define ck_assert_tn_ok(call)                                                             \
	do {                                                                              \
		int tn_r_ = (call);                                                       \
		ck_assert_msg(tn_r_ == 0, "%s failed: %d %s", #call, tn_r_, tn_last_error()); \
	} while (0)

struct tn_baseline {
	uint64_t objects, blocks, bytes;
};

static inline struct tn_baseline tn_test_baseline(void)
{
	tn_alloc_stats s;
	tn_cpu_allocator_stats(&s);
	return (struct tn_baseline){ s.live_objects, s.allocated_blocks, s.allocated_bytes };
}

/* Nothing allocated since @b is still alive: no handle, no block, no byte. */
#define ck_assert_no_leak(b)                                                              \
	do {                                                                              \
		struct tn_baseline now_ = tn_test_baseline();                             \
		ck_assert_uint_eq(now_.objects, (b).objects);                             \
		ck_assert_uint_eq(now_.blocks, (b).blocks);                               \
		ck_assert_uint_eq(now_.bytes, (b).bytes);                                 \
	} while (0)

/*
 * The fault-injection loop: run @fn (which makes *ret from the tensors @args) with its 1st,
 * 2nd, ... allocation failing until it succeeds. Each failure must be TN_ENOMEM with an "out of
 * memory" message, *ret left NULL and nothing leaked; at least one allocation must have been
 * failed, and the call must succeed within 200 allocations.
 */
typedef int (*tn_test_ctor)(tn_tensor **ret, tn_tensor *const *args);
static inline void tn_test_alloc_failures(const char *name, tn_test_ctor fn, tn_tensor *const *args)
{
	struct tn_baseline b = tn_test_baseline();
	int failures = 0;
	for (uint64_t n = 1;; n++) {
		tn_tensor *r = NULL;
		tn_alloc_fail_nth(n);
		tn_clear_error();
		int rc = fn(&r, args);
		tn_alloc_fail_nth(0);
		if (rc == 0) {
			tn_tensor_unref(r);
			ck_assert_no_leak(b);
			break;
		}
		ck_assert_msg(rc == TN_ENOMEM, "%s with allocation %llu failing: %d %s", name,
			      (unsigned long long)n, rc, tn_last_error());
		ck_assert_msg(strstr(tn_last_error(), "out of memory") != NULL, "%s: '%s'", name,
			      tn_last_error());
		ck_assert_ptr_null(r);
		ck_assert_no_leak(b);
		failures++;
		ck_assert_msg(n < 200, "%s never succeeds", name);
	}
	ck_assert_msg(failures >= 1, "%s: no allocation was ever failed", name);
}

static inline int64_t tn_test_get_int(const tn_tensor *t, const int64_t *index)
{
	tn_scalar s;
	ck_assert_int_eq(tn_tensor_get(t, tn_tensor_ndim(t), index, &s), 0);
	ck_assert_int_eq(s.kind, TN_SCALAR_INT);
	return s.v.i;
}

static inline double tn_test_get_double(const tn_tensor *t, const int64_t *index)
{
	tn_scalar s;
	ck_assert_int_eq(tn_tensor_get(t, tn_tensor_ndim(t), index, &s), 0);
	ck_assert_int_eq(s.kind, TN_SCALAR_DOUBLE);
	return s.v.d;
}

/* A tensor of @dtype holding @values (made in float64, then copy_'d: PyTorch's .to()). */
static inline tn_tensor *tn_test_from_values(const double *values, int n,
					     const int64_t *sizes, enum tn_dtype dtype)
{
	int64_t numel = 1;
	tn_tensor *f64, *t;
	for (int i = 0; i < n; i++)
		numel *= sizes[i];
	ck_assert_tn_ok(tn_empty(n, sizes, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &f64));
	if (numel > 0) /* an empty tensor has no data pointer */
		memcpy(tn_tensor_data(f64), values, (size_t)numel * sizeof(double));
	ck_assert_tn_ok(tn_empty(n, sizes, dtype, TN_CPU, TN_CONTIGUOUS_FORMAT, &t));
	ck_assert_tn_ok(tn_copy_(t, f64, false));
	tn_tensor_unref(f64);
	return t;
}

/* Distance in units of the last place, in the result dtype (exact dtypes: 0 or "far"). */
static inline double tn_test_ulps(double got, double want, enum tn_dtype dt)
{
	if (got != got || want != want)
		return (got != got) == (want != want) ? 0 : 1e9;
	if (got == want)
		return 0;
	if (isinf(got) || isinf(want))
		return 1e9;
	switch (dt) {
	case TN_FLOAT32: {
		float g = (float)got, w = (float)want;
		int32_t gi, wi;
		memcpy(&gi, &g, 4);
		memcpy(&wi, &w, 4);
		return fabs((double)gi - (double)wi);
	}
	case TN_FLOAT64: {
		/* Subtracted as integers: two int64 bit patterns converted to double first are
		 * only 512 or 1024 apart near 2^62 (double's 53 bits), which hid small errors. */
		int64_t gi, wi;
		memcpy(&gi, &got, 8);
		memcpy(&wi, &want, 8);
		if ((gi < 0) != (wi < 0))
			return 1e9;
		return fabs((double)(gi - wi));
	}
	case TN_FLOAT16: {
		tn_half g = tn_half_from_float((float)got), w = tn_half_from_float((float)want);
		return fabs((double)(int16_t)g.bits - (double)(int16_t)w.bits);
	}
	case TN_BFLOAT16: {
		tn_bfloat16 g = tn_bfloat16_from_float((float)got), w = tn_bfloat16_from_float((float)want);
		return fabs((double)(int16_t)g.bits - (double)(int16_t)w.bits);
	}
	default:
		return 1e9;
	}
}

#define TN_TEST_MAIN(suite_fn)                                  \
	int main(void)                                          \
	{                                                       \
		SRunner *sr = srunner_create(suite_fn());       \
		srunner_run_all(sr, CK_NORMAL);                 \
		int failed = srunner_ntests_failed(sr);         \
		srunner_free(sr);                               \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;    \
	}

#endif /* TN_TESTUTIL_H */
