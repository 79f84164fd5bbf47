/* SPDX-License-Identifier: MIT */
/*
 * The model runners against torch 1.13 on the same weights (models/gen_models.py): a real
 * tensord loads the GPT-2 weights and torch's outputs into a sealed arena (tn_tensord_load,
 * io_uring), the runner maps them read-only and zero-copy, and
 *   - the prompt's logits match torch's within 2e-4 of their range;
 *   - greedy decoding with the key/value cache generates torch's tokens (each step's best
 *     logit leads by at least 0.037 in torch, far above the difference measured);
 *   - the cached decoding's logits equal a cacheless forward of the whole sequence;
 *   - under each CPU capability and with 1 and 2 threads;
 *   - bad input (a missing or misshapen weight, tokens outside the vocabulary, a context
 *     overflow) fails cleanly.
 */
#include <math.h>

#include "tensord_testutil.h"
#include "../models/gpt2.h"

#ifndef TN_MODELS_DIR
#error "TN_MODELS_DIR (the folder gen_models.py wrote) must be defined"
#endif

static const struct gpt2_config CFG = { 4, 256, 4, 8192, 256 };

static void load_file(tn_tensord *c, const char *arena, const char *file, const char *prefix)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", TN_MODELS_DIR, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s (make builds it with models/gen_models.py)", path,
		      strerror(errno));
	tn_tensord_transfer tr;
	ck_assert_tn_ok(tn_tensord_load(c, arena, fd, TN_TENSORD_FORMAT_SAFETENSORS, prefix,
					TN_TENSORD_SEAL, NULL, NULL, &tr));
	close(fd);
}

static int get_weight(void *ctx, const char *name, tn_tensor **ret)
{
	char full[160];
	snprintf(full, sizeof(full), "w/%s", name);
	return tn_arena_lookup(ctx, full, ret, NULL);
}

/* A daemon with arena "gpt2" holding the weights under w/ and torch's outputs under x/. */
static tn_arena *setup(tn_tensord **ret_conn)
{
	tn_tensord *c;
	tn_arena *a;
	daemon_setup();
	c = conn();
	make_arena(c, "gpt2", 64 << 20, 256, 0);
	load_file(c, "gpt2", "gpt2.safetensors", "w/");
	load_file(c, "gpt2", "gpt2_expected.safetensors", "x/");
	ck_assert_tn_ok(tn_tensord_arena_open(c, "gpt2", TN_TENSORD_READ_ONLY, &a));
	*ret_conn = c;
	return a;
}

static void teardown(tn_tensord *c, tn_arena *a)
{
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, "gpt2", 0));
	tn_tensord_close(c);
	daemon_finish();
}

static tn_tensor *expected(tn_arena *a, const char *name)
{
	char full[64];
	tn_tensor *t;
	snprintf(full, sizeof(full), "x/%s", name);
	ck_assert_tn_ok(tn_arena_lookup(a, full, &t, NULL));
	return t;
}

/* max |a - b| over the largest |b|: a relative difference on the logits' scale. */
static double rel_diff(const tn_tensor *a, const tn_tensor *b)
{
	ck_assert_int_eq(tn_tensor_numel(a), tn_tensor_numel(b));
	const float *pa = tn_tensor_data((tn_tensor *)a), *pb = tn_tensor_data((tn_tensor *)b);
	double d = 0, m = 0;
	for (int64_t i = 0; i < tn_tensor_numel(a); i++) {
		d = fmax(d, fabs((double)pa[i] - pb[i]));
		m = fmax(m, fabs((double)pb[i]));
	}
	return d / m;
}

static void check_gpt2(tn_arena *a)
{
	struct gpt2 m;
	struct gpt2_cache cache;
	tn_tensor *prompt = expected(a, "prompt"), *want_logits = expected(a, "logits"),
		  *want_gen = expected(a, "generated"), *logits = NULL;
	const int64_t np = tn_tensor_numel(prompt), ng = tn_tensor_numel(want_gen);
	const int64_t *p = tn_tensor_data(prompt), *want = tn_tensor_data(want_gen);
	int64_t got[64], seq[128];

	ck_assert_msg(gpt2_load(&m, &CFG, get_weight, a) == 0, "%s", gpt2_last_error());
	ck_assert_msg(gpt2_cache_init(&m, &cache) == 0, "%s", gpt2_last_error());
	ck_assert_msg(gpt2_generate(&m, &cache, p, np, ng, got, &logits) == 0, "%s",
		      gpt2_last_error());
	double d = rel_diff(logits, want_logits);
	ck_assert_msg(d < 2e-4, "prompt logits differ from torch's by %g of their range", d);
	for (int64_t i = 0; i < ng; i++)
		ck_assert_msg(got[i] == want[i], "token %lld is %lld, torch's %lld", (long long)i,
			      (long long)got[i], (long long)want[i]);
	ck_assert_int_eq(cache.len, np + ng - 1);

	/* The whole sequence without a cache: its last rows are the cached steps' logits. */
	memcpy(seq, p, (size_t)np * sizeof(int64_t));
	memcpy(seq + np, got, (size_t)ng * sizeof(int64_t));
	tn_tensor *full, *tail;
	ck_assert_msg(gpt2_forward(&m, NULL, seq, np + ng - 1, &full) == 0, "%s", gpt2_last_error());
	ck_assert_tn_ok(tn_narrow(full, 0, 0, np, &tail));
	d = rel_diff(tail, logits);
	ck_assert_msg(d < 1e-5, "cacheless prompt logits differ by %g", d);
	tn_tensor_unref(tail);
	tn_tensor_unref(full);

	tn_tensor_unref(logits);
	gpt2_cache_free(&cache);
	gpt2_free(&m);
	tn_tensor_unref(prompt);
	tn_tensor_unref(want_logits);
	tn_tensor_unref(want_gen);
}

START_TEST(test_gpt2_matches_torch)
{
	static const char *const threads[] = { "1", "2" };
	tn_test_force_capability(_i % TN_NUM_CPU_CAPABILITIES);
	setenv("TN_NUM_THREADS", threads[_i / TN_NUM_CPU_CAPABILITIES], 1);
	tn_tensord *c;
	tn_arena *a = setup(&c);
	check_gpt2(a);
	teardown(c, a);
}
END_TEST

static int get_misshapen(void *ctx, const char *name, tn_tensor **ret)
{
	/* ln_f.weight answered with ln_f.bias's neighbour of another shape */
	return get_weight(ctx, strcmp(name, "ln_f.weight") ? name : "wpe.weight", ret);
}

START_TEST(test_gpt2_bad_input)
{
	tn_tensord *c;
	tn_arena *a = setup(&c);
	struct gpt2 m;
	struct gpt2_config wide = CFG;
	wide.n_layer = 5; /* h.4.* is not in the file */
	ck_assert_int_eq(gpt2_load(&m, &wide, get_weight, a), TN_ENOENT);
	ck_assert_int_eq(gpt2_load(&m, &CFG, get_misshapen, a), TN_EINVAL);
	ck_assert_str_eq(gpt2_last_error(), "gpt2: weight ln_f.weight is not float32 of shape [256]");
	struct gpt2_config odd = CFG;
	odd.n_head = 3;
	ck_assert_int_eq(gpt2_load(&m, &odd, get_weight, a), TN_EINVAL);

	ck_assert_msg(gpt2_load(&m, &CFG, get_weight, a) == 0, "%s", gpt2_last_error());
	struct gpt2_cache cache;
	ck_assert_tn_ok(gpt2_cache_init(&m, &cache));
	tn_tensor *l = NULL;
	int64_t bad[2] = { 5, 8192 };
	ck_assert_int_eq(gpt2_forward(&m, &cache, bad, 2, &l), TN_EINVAL);
	ck_assert_str_eq(gpt2_last_error(), "gpt2: token 8192 is outside the vocabulary of 8192");
	int64_t *many = calloc(300, sizeof(int64_t));
	ck_assert_int_eq(gpt2_forward(&m, &cache, many, 257, &l), TN_EINVAL);
	ck_assert_int_eq(cache.len, 0);
	ck_assert_tn_ok(gpt2_forward(&m, &cache, many, 200, &l));
	tn_tensor_unref(l);
	l = NULL;
	ck_assert_int_eq(gpt2_forward(&m, &cache, many, 57, &l), TN_EINVAL);
	ck_assert_str_eq(gpt2_last_error(), "gpt2: 57 tokens after 200 do not fit a context of 256");
	ck_assert_ptr_null(l);
	free(many);
	gpt2_cache_free(&cache);
	gpt2_free(&m);
	teardown(c, a);
}
END_TEST

static Suite *models_suite(void)
{
	Suite *s = suite_create("models");
	TCase *tc = tcase_create("models");
	tcase_add_loop_test(tc, test_gpt2_matches_torch, 0, 2 * TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(tc, test_gpt2_bad_input);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	runner_pid = getpid();
	SRunner *sr = srunner_create(models_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
