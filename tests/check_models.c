/* SPDX-License-Identifier: MIT */
/*
 * The model runners against torch 1.13 on the same weights (models/gen_models.py): a real
 * tensord loads a model's weights and torch's outputs into a sealed arena (tn_tensord_load,
 * io_uring), the runner maps them read-only and zero-copy, and for GPT-2
 *   - the prompt's logits match torch's within 2e-4 of their range;
 *   - greedy decoding with the key/value cache generates torch's tokens (each step's best
 *     logit leads by at least 0.037 in torch, far above the difference measured);
 *   - the cached decoding's logits equal a cacheless forward of the whole sequence;
 * for ResNet-18
 *   - the logits of a batch of 1 and of 4 images (96x80) match torch's within RESNET_TOL of
 *     their range, and pick torch's classes (each leads by at least 0.066 in torch);
 *   - the same images in channels-last layout give the same logits;
 * both under each CPU capability and with 1 and 2 threads; and bad input (a missing or
 * misshapen weight, tokens outside the vocabulary, a context overflow, images of the wrong
 * shape or dtype, allocation failures) fails cleanly, leaking nothing.
 */
#include <math.h>

#include "tensord_testutil.h"
#include "../models/gpt2.h"
#include "../models/resnet.h"

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

/* A daemon with arena @model holding the weights (@model.safetensors) under w/ and torch's
 * outputs (@model_expected.safetensors) under x/, in @size bytes. */
static tn_arena *setup_model(const char *model, uint64_t size, tn_tensord **ret_conn)
{
	char file[64];
	tn_tensord *c;
	tn_arena *a;
	daemon_setup();
	c = conn();
	make_arena(c, model, size, 256, 0);
	snprintf(file, sizeof(file), "%s.safetensors", model);
	load_file(c, model, file, "w/");
	snprintf(file, sizeof(file), "%s_expected.safetensors", model);
	load_file(c, model, file, "x/");
	ck_assert_tn_ok(tn_tensord_arena_open(c, model, TN_TENSORD_READ_ONLY, &a));
	*ret_conn = c;
	return a;
}

static tn_arena *setup(tn_tensord **ret_conn)
{
	return setup_model("gpt2", 64 << 20, ret_conn);
}

static void teardown_model(const char *model, tn_tensord *c, tn_arena *a)
{
	tn_arena_unref(a);
	ck_assert_tn_ok(tn_tensord_arena_destroy(c, model, 0));
	tn_tensord_close(c);
	daemon_finish();
}

static void teardown(tn_tensord *c, tn_arena *a)
{
	teardown_model("gpt2", c, a);
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
	ck_assert_str_eq(gpt2_last_error(), "gpt2: weight ln_f.weight is float32 of shape [256, 256], not float32 of shape [256]");
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

/* ---- ResNet-18 ---- */

#define RESNET_CLASSES 1000
/*
 * The bound on max |logit - torch's| over max(range of torch's logits, 1). Measured (set
 * TN_MODELS_VERBOSE=1 to print them): 2.8e-6 for the batch of 1 (6.9e-6 of a range of 2.44),
 * 2.7e-6 for the batch of 4 (7.6e-6 of 2.82), 2.7e-6 and 2.1e-6 channels-last, the same under
 * every capability and thread count (the products are BLIS's). torch's own channels-last
 * logits differ from its NCHW ones by 9e-6.
 */
#define RESNET_TOL 1e-5

static tn_arena *setup_resnet(tn_tensord **ret_conn)
{
	return setup_model("resnet18", 80 << 20, ret_conn);
}

/* max(max - min, 1) of the float32 @t. */
static double range_of(const tn_tensor *t)
{
	const float *p = tn_tensor_data(t);
	double lo = INFINITY, hi = -INFINITY;
	for (int64_t i = 0; i < tn_tensor_numel(t); i++) {
		lo = fmin(lo, p[i]);
		hi = fmax(hi, p[i]);
	}
	return fmax(hi - lo, 1);
}

/* max |a - b| over max(range of b, 1), both float32 [N, classes], a contiguous. */
static double range_diff(const tn_tensor *a, const tn_tensor *b)
{
	ck_assert_int_eq(tn_tensor_numel(a), tn_tensor_numel(b));
	ck_assert(tn_tensor_is_contiguous(a) && tn_tensor_is_contiguous(b));
	const float *pa = tn_tensor_data(a), *pb = tn_tensor_data(b);
	double d = 0;
	for (int64_t i = 0; i < tn_tensor_numel(a); i++)
		d = fmax(d, fabs((double)pa[i] - pb[i]));
	return d / range_of(b);
}

/* Row @row's best class in the contiguous [N, classes] @logits. */
static int64_t best_class(const tn_tensor *logits, int64_t row)
{
	const int64_t n = tn_tensor_sizes(logits)[1];
	const float *p = (const float *)tn_tensor_data(logits) + row * n;
	int64_t best = 0;
	for (int64_t j = 1; j < n; j++)
		if (p[j] > p[best])
			best = j;
	return best;
}

/* The logits of @images are torch's @want, shape and classes included. */
static void check_logits(const struct resnet18 *m, const tn_tensor *images, const tn_tensor *want,
			 const char *what)
{
	const int64_t n = tn_tensor_sizes(images)[0];
	tn_tensor *logits = NULL;
	ck_assert_msg(resnet18_forward(m, images, &logits) == 0, "%s: %s", what,
		      resnet18_last_error());
	ck_assert_int_eq(tn_tensor_dtype(logits), TN_FLOAT32);
	ck_assert_int_eq(tn_tensor_ndim(logits), 2);
	ck_assert_int_eq(tn_tensor_sizes(logits)[0], n);
	ck_assert_int_eq(tn_tensor_sizes(logits)[1], RESNET_CLASSES);
	double d = range_diff(logits, want);
	ck_assert_msg(d <= RESNET_TOL, "%s: logits differ from torch's by %g of their range", what,
		      d);
	for (int64_t i = 0; i < n; i++)
		ck_assert_msg(best_class(logits, i) == best_class(want, i),
			      "%s: image %lld is class %lld, torch's %lld", what, (long long)i,
			      (long long)best_class(logits, i), (long long)best_class(want, i));
	if (getenv("TN_MODELS_VERBOSE"))
		fprintf(stderr, "%s: %g of the range (%g)\n", what, d, d * range_of(want));
	tn_tensor_unref(logits);
}

static void check_resnet(tn_arena *a)
{
	struct resnet18 m;
	char name[32];
	ck_assert_msg(resnet18_load(&m, RESNET_CLASSES, get_weight, a) == 0, "%s",
		      resnet18_last_error());
	struct tn_baseline b = tn_test_baseline();
	for (int n = 1; n <= 4; n += 3) {
		snprintf(name, sizeof(name), "images%d", n);
		tn_tensor *images = expected(a, name), *cl;
		snprintf(name, sizeof(name), "logits%d", n);
		tn_tensor *want = expected(a, name);
		snprintf(name, sizeof(name), "batch of %d", n);
		check_logits(&m, images, want, name);
		ck_assert_tn_ok(tn_contiguous(images, TN_CHANNELS_LAST, &cl));
		ck_assert(tn_tensor_is_contiguous_as(cl, TN_CHANNELS_LAST) &&
			  !tn_tensor_is_contiguous(cl));
		snprintf(name, sizeof(name), "channels-last batch of %d", n);
		check_logits(&m, cl, want, name);
		tn_tensor_unref(cl);
		tn_tensor_unref(images);
		tn_tensor_unref(want);
	}
	ck_assert_no_leak(b);
	resnet18_free(&m);
}

START_TEST(test_resnet_matches_torch)
{
	static const char *const threads[] = { "1", "2" };
	tn_test_force_capability(_i % TN_NUM_CPU_CAPABILITIES);
	setenv("TN_NUM_THREADS", threads[_i / TN_NUM_CPU_CAPABILITIES], 1);
	tn_tensord *c;
	tn_arena *a = setup_resnet(&c);
	check_resnet(a);
	teardown_model("resnet18", c, a);
}
END_TEST

/* Answers one weight's name with another tensor (or none): @ctx's arena, @from, @to. */
struct swap {
	tn_arena *a;
	const char *from, *to; /* to: a full arena name ("w/...", "x/..."), or NULL for none */
};

static int get_swapped(void *ctx, const char *name, tn_tensor **ret)
{
	const struct swap *s = ctx;
	if (strcmp(name, s->from) != 0)
		return get_weight(s->a, name, ret);
	return tn_arena_lookup(s->a, s->to ? s->to : "w/nothing", ret, NULL);
}

/* resnet18_load fails with @code and a message starting with @msg, leaving *m empty. */
static void check_load_fails(tn_arena *a, int64_t classes, const char *from, const char *to,
			     int code, const char *msg)
{
	struct swap s = { a, from, to };
	struct resnet18 m, empty;
	memset(&empty, 0, sizeof(empty));
	struct tn_baseline b = tn_test_baseline();
	ck_assert_int_eq(resnet18_load(&m, classes, get_swapped, &s), code);
	ck_assert_msg(strncmp(resnet18_last_error(), msg, strlen(msg)) == 0,
		      "message '%s' does not start with '%s'", resnet18_last_error(), msg);
	ck_assert(memcmp(&m, &empty, sizeof(m)) == 0);
	ck_assert_no_leak(b);
}

/* resnet18_forward refuses @images with @code and exactly @msg, writing nothing. */
static void check_forward_fails(const struct resnet18 *m, const tn_tensor *images, int code,
				const char *msg)
{
	tn_tensor *logits = NULL;
	struct tn_baseline b = tn_test_baseline();
	ck_assert_int_eq(resnet18_forward(m, images, &logits), code);
	ck_assert_str_eq(resnet18_last_error(), msg);
	ck_assert_ptr_null(logits);
	ck_assert_no_leak(b);
}

START_TEST(test_resnet_bad_input)
{
	tn_tensord *c;
	tn_arena *a = setup_resnet(&c);
	struct resnet18 m;

	check_load_fails(a, RESNET_CLASSES, "layer3.1.bn2.running_var", NULL, TN_ENOENT,
			 "resnet18: weight layer3.1.bn2.running_var: ");
	ck_assert_ptr_nonnull(strstr(resnet18_last_error(), "no tensor 'w/nothing' in arena "));
	check_load_fails(a, RESNET_CLASSES, "layer2.0.downsample.0.weight",
			 "w/layer2.0.conv1.weight", TN_EINVAL,
			 "resnet18: weight layer2.0.downsample.0.weight is float32 of shape "
			 "[128, 64, 3, 3], not float32 of shape [128, 64, 1, 1]");
	check_load_fails(a, RESNET_CLASSES, "bn1.running_mean", "x/margins4", TN_EINVAL,
			 "resnet18: weight bn1.running_mean is float64 of shape [4], not float32 "
			 "of shape [64]");
	check_load_fails(a, 10, "", NULL, TN_EINVAL,
			 "resnet18: weight fc.weight is float32 of shape [1000, 512], not float32 "
			 "of shape [10, 512]");
	check_load_fails(a, 0, "", NULL, TN_EINVAL,
			 "resnet18: the number of classes must be positive, not 0");

	ck_assert_msg(resnet18_load(&m, RESNET_CLASSES, get_weight, a) == 0, "%s",
		      resnet18_last_error());
	tn_tensor *t;
	ck_assert_tn_ok(tn_zeros(4, (int64_t[]){ 2, 4, 64, 64 }, TN_FLOAT32, TN_CPU, &t));
	check_forward_fails(&m, t, TN_EINVAL,
			    "resnet18: images of shape [2, 4, 64, 64] are not [N, 3, H, W]");
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_zeros(3, (int64_t[]){ 3, 64, 64 }, TN_FLOAT32, TN_CPU, &t));
	check_forward_fails(&m, t, TN_EINVAL,
			    "resnet18: images of shape [3, 64, 64] are not [N, 3, H, W]");
	tn_tensor_unref(t);
	ck_assert_tn_ok(tn_zeros(4, (int64_t[]){ 1, 3, 64, 64 }, TN_FLOAT64, TN_CPU, &t));
	check_forward_fails(&m, t, TN_EINVAL, "resnet18: images are float64, not float32");
	tn_tensor_unref(t);
	/* Too small for conv1's 7x7 kernel even padded: libtensor's conv2d says so. */
	ck_assert_tn_ok(tn_zeros(4, (int64_t[]){ 1, 3, 0, 0 }, TN_FLOAT32, TN_CPU, &t));
	check_forward_fails(&m, t, TN_EINVAL,
			    "Calculated padded input size per channel: (6 x 6). Kernel size: "
			    "(7 x 7). Kernel size can't be greater than actual input size");
	tn_tensor_unref(t);

	/* Every allocation of a forward pass failing in turn: TN_ENOMEM, nothing leaked. On one
	 * thread: the 190 passes take a second, where a thread pool's barriers on a busy machine
	 * took ten. */
	setenv("TN_NUM_THREADS", "1", 1);
	tn_tensor *images;
	ck_assert_tn_ok(tn_ones(4, (int64_t[]){ 2, 3, 32, 32 }, TN_FLOAT32, TN_CPU, &images));
	struct tn_baseline b = tn_test_baseline();
	int failures = 0;
	for (uint64_t n = 1;; n++) {
		tn_tensor *logits = NULL;
		tn_alloc_fail_nth(n);
		int rc = resnet18_forward(&m, images, &logits);
		tn_alloc_fail_nth(0);
		if (rc == 0) {
			tn_tensor_unref(logits);
			ck_assert_no_leak(b);
			break;
		}
		ck_assert_msg(rc == TN_ENOMEM, "allocation %llu failing: %d %s",
			      (unsigned long long)n, rc, resnet18_last_error());
		ck_assert_msg(strstr(resnet18_last_error(), "out of memory") != NULL, "'%s'",
			      resnet18_last_error());
		ck_assert_ptr_null(logits);
		ck_assert_no_leak(b);
		failures++;
		ck_assert_msg(n < 2000, "the forward pass never succeeds");
	}
	ck_assert_int_ge(failures, 100);
	tn_tensor_unref(images);
	resnet18_free(&m);
	resnet18_free(&m); /* a second time does nothing */
	teardown_model("resnet18", c, a);
}
END_TEST

static Suite *models_suite(void)
{
	Suite *s = suite_create("models");
	TCase *tc = tcase_create("models");
	tcase_add_loop_test(tc, test_gpt2_matches_torch, 0, 2 * TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(tc, test_gpt2_bad_input);
	tcase_add_loop_test(tc, test_resnet_matches_torch, 0, 2 * TN_NUM_CPU_CAPABILITIES);
	tcase_add_test(tc, test_resnet_bad_input);
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
