/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend on a real GPU: every kernel family compared with the CPU kernel on the same
 * inputs (contiguous, transposed, sliced, broadcast, CPU scalars, every dtype pair for the
 * exact operators), copies host<->device with conversion, streams and events, the caching
 * allocator (reuse, record_stream, empty_cache, the memory limit's out-of-memory error), pinned
 * host memory (arena registration, asynchronous copies that outlive their host tensor,
 * unregistration at the arena's end, as CUDA itself sees it).
 *
 * Without a GPU (or in a build without CUDA) the GPU cases cannot run: the program checks
 * that every entry point then fails cleanly with TN_ENODEV, and exits 77 (automake's SKIP) so
 * the report says the GPU part was skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef TN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "testutil.h"

#define NDT TN_NUM_DTYPES

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* A CPU tensor of @dtype with values in [lo, hi) (integers: whole numbers; bool: 0/1). */
static tn_tensor *cpu_random(int n, const int64_t *sizes, enum tn_dtype dt, double lo, double hi)
{
	int64_t numel = 1;
	for (int i = 0; i < n; i++)
		numel *= sizes[i];
	double *v = malloc((size_t)(numel ? numel : 1) * sizeof(double));
	ck_assert_ptr_nonnull(v);
	for (int64_t i = 0; i < numel; i++) {
		double x = lo + (hi - lo) * rnd();
		v[i] = dt == TN_BOOL ? (x > (lo + hi) / 2) : tn_dtype_is_floating(dt) ? x : floor(x);
	}
	tn_tensor *t = tn_test_from_values(v, n, sizes, dt);
	free(v);
	return t;
}

static tn_tensor *to_gpu(const tn_tensor *t)
{
	tn_tensor *g;
	ck_assert_tn_ok(tn_to_device(t, TN_CUDA(0), tn_tensor_dtype(t), false, false, NULL, &g));
	ck_assert_int_eq(tn_tensor_device(g).type, TN_DEVICE_CUDA);
	return g;
}

static tn_tensor *to_cpu(const tn_tensor *t)
{
	tn_tensor *c;
	ck_assert_tn_ok(tn_to_device(t, TN_CPU, tn_tensor_dtype(t), false, false, NULL, &c));
	return c;
}

/* A private 64 MiB arena "a" in a new directory on /dev/shm (@dir, to pass to drop_arena). */
static tn_arena *make_arena(char dir[64])
{
	tn_arena_options o;
	tn_arena *a = NULL;
	strcpy(dir, "/dev/shm/tn-check-cuda-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	tn_arena_options_init(&o);
	o.size = (uint64_t)64 << 20;
	o.dir = dir;
	ck_assert_tn_ok(tn_arena_create("a", &o, &a));
	return a;
}

static void drop_arena(const char *dir)
{
	ck_assert_tn_ok(tn_arena_destroy("a", dir, 0));
	ck_assert_int_eq(rmdir(dir), 0);
}

static uint64_t arena_used(tn_arena *a)
{
	tn_arena_stats st;
	ck_assert_tn_ok(tn_arena_stat(a, &st));
	return st.used_bytes;
}

/* @got (a CUDA tensor) equals @want (CPU) in dtype, sizes and every element, within @ulps
 * (0: bit-exact values; NaN equals NaN). */
static void expect_same(const tn_tensor *got, const tn_tensor *want, double ulps)
{
	tn_tensor *g = to_cpu(got), *w = NULL, *gd = NULL;
	ck_assert_int_eq(tn_tensor_dtype(g), tn_tensor_dtype(want));
	ck_assert_int_eq(tn_tensor_ndim(g), tn_tensor_ndim(want));
	for (int d = 0; d < tn_tensor_ndim(g); d++)
		ck_assert_int_eq(tn_tensor_sizes(g)[d], tn_tensor_sizes(want)[d]);
	enum tn_dtype dt = tn_tensor_dtype(want);
	ck_assert_tn_ok(tn_to(want, TN_FLOAT64, false, true, NULL, &w));
	ck_assert_tn_ok(tn_to(g, TN_FLOAT64, false, true, NULL, &gd));
	tn_tensor *wc, *gc;
	ck_assert_tn_ok(tn_contiguous(w, TN_CONTIGUOUS_FORMAT, &wc));
	ck_assert_tn_ok(tn_contiguous(gd, TN_CONTIGUOUS_FORMAT, &gc));
	const double *pw = tn_tensor_data(wc), *pg = tn_tensor_data(gc);
	if (dt == TN_INT64) { /* beyond 2^53 doubles lose digits: compare the integers */
		tn_tensor *a, *b;
		ck_assert_tn_ok(tn_contiguous(want, TN_CONTIGUOUS_FORMAT, &a));
		ck_assert_tn_ok(tn_contiguous(g, TN_CONTIGUOUS_FORMAT, &b));
		const int64_t *x = tn_tensor_data(a), *y = tn_tensor_data(b);
		for (int64_t i = 0; i < tn_tensor_numel(a); i++)
			ck_assert_msg(x[i] == y[i], "element %lld: cuda %lld, cpu %lld", (long long)i,
				      (long long)y[i], (long long)x[i]);
		tn_tensor_unref(a);
		tn_tensor_unref(b);
	}
	for (int64_t i = 0; i < tn_tensor_numel(wc); i++) {
		double u = tn_test_ulps(pg[i], pw[i], dt);
		ck_assert_msg(u <= ulps, "element %lld: cuda %.17g, cpu %.17g (%g ulps > %g)",
			      (long long)i, pg[i], pw[i], u, ulps);
	}
	tn_tensor_unref(wc);
	tn_tensor_unref(gc);
	tn_tensor_unref(w);
	tn_tensor_unref(gd);
	tn_tensor_unref(g);
}

/* ---- without a GPU ---- */

START_TEST(test_absent)
{
	int64_t sizes[] = { 4 };
	tn_tensor *t = NULL;
	tn_cuda_stream s;
	tn_cuda_event *e = NULL;
	int dev;

	ck_assert_int_eq(tn_cuda_device_count(), 0);
	ck_assert_int_eq(tn_empty(1, sizes, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &t),
			 TN_ENODEV);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(tn_cuda_stream_from_pool(0, false, &s), TN_ENODEV);
	ck_assert_int_eq(tn_cuda_current_device(&dev), TN_ENODEV);
	ck_assert_int_eq(tn_cuda_synchronize(-1), TN_ENODEV);
	ck_assert_int_eq(tn_cuda_set_device(0), TN_ENODEV);
	if (tn_cuda_event_create(0, &e) == 0) { /* a CUDA build: fails at the first record */
		ck_assert_int_eq(tn_cuda_event_record(e, tn_cuda_default_stream(0)), TN_ENODEV);
		ck_assert_int_eq(tn_cuda_event_query(e), 1); /* never recorded: complete */
		tn_cuda_event_destroy(e);
	}
	tn_cuda_memory_stats st;
	ck_assert_int_eq(tn_cuda_allocator_stats(0, &st), TN_ENODEV);
	ck_assert_int_ge(tn_cuda_empty_cache(), 0);
	/* A CPU tensor cannot be sent to a missing GPU. */
	tn_tensor *c = cpu_random(1, sizes, TN_FLOAT32, 0, 1);
	ck_assert_int_eq(tn_to_device(c, TN_CUDA(0), TN_FLOAT32, false, false, NULL, &t),
			 TN_ENODEV);
	tn_tensor_unref(c);
	/* Pinned memory: nothing can be registered, nothing is pinned, the arena still works. */
	char buf[256], dir[64];
	ck_assert_tn_error_has(tn_cuda_host_register(buf, sizeof(buf), 0), TN_ENODEV,
			       "tn_cuda_host_register: ");
	ck_assert(!tn_cuda_is_pinned(buf, 1));
	ck_assert_int_eq(tn_cuda_host_unregister(buf), tn_cuda_caching_allocator() ? TN_ENOENT
										   : TN_ENODEV);
	tn_arena *a = make_arena(dir);
	ck_assert_tn_error_has(tn_cuda_arena_register(a), TN_ENODEV, "tn_cuda_arena_register: ");
	ck_assert_tn_ok(tn_arena_use(a));
	c = cpu_random(1, sizes, TN_FLOAT32, 0, 1);
	ck_assert_tn_ok(tn_arena_use(NULL));
	ck_assert(!tn_tensor_is_pinned(c));
	ck_assert(!tn_cuda_is_pinned(tn_tensor_data(c), 16));
	ck_assert_tn_ok(tn_arena_publish(a, "x", c, TN_ARENA_SEAL, NULL));
	tn_tensor_unref(c);
	ck_assert_tn_ok(tn_arena_lookup(a, "x", &c, NULL));
	ck_assert_int_eq(tn_tensor_numel(c), 4);
	ck_assert(!tn_tensor_is_pinned(c));
	tn_tensor_unref(c);
	tn_arena_unref(a);
	drop_arena(dir);
}
END_TEST

/* ---- devices, streams, events ---- */

START_TEST(test_device_and_streams)
{
	tn_cuda_device_properties p;
	tn_cuda_stream a, b, cur;
	size_t fr, tot;
	int dev = -1;

	ck_assert_tn_ok(tn_cuda_get_device_properties(0, &p));
	ck_assert_int_gt(p.multiprocessor_count, 0);
	ck_assert_uint_gt(p.total_memory, 0);
	ck_assert_tn_ok(tn_cuda_mem_get_info(0, &fr, &tot));
	ck_assert_uint_le(fr, tot);
	ck_assert_tn_ok(tn_cuda_set_device(0));
	ck_assert_tn_ok(tn_cuda_current_device(&dev));
	ck_assert_int_eq(dev, 0);
	ck_assert_int_eq(tn_cuda_set_device(tn_cuda_device_count()), TN_ENODEV);
	/* Pool streams round-robin over 32 slots per priority. */
	ck_assert_tn_ok(tn_cuda_stream_from_pool(0, false, &a));
	for (int i = 0; i < TN_CUDA_STREAMS_PER_POOL - 1; i++)
		ck_assert_tn_ok(tn_cuda_stream_from_pool(0, false, &b));
	ck_assert_tn_ok(tn_cuda_stream_from_pool(0, false, &b));
	ck_assert_int_eq(a.slot, b.slot);
	ck_assert_tn_ok(tn_cuda_stream_from_pool(0, true, &b));
	ck_assert_int_gt(b.slot, TN_CUDA_STREAMS_PER_POOL);
	ck_assert_tn_ok(tn_cuda_current_stream(0, &cur));
	ck_assert_int_eq(cur.slot, 0);
	ck_assert_tn_ok(tn_cuda_set_current_stream(a));
	ck_assert_tn_ok(tn_cuda_current_stream(-1, &cur));
	ck_assert_int_eq(cur.slot, a.slot);
	void *h = NULL;
	ck_assert_tn_ok(tn_cuda_stream_handle(a, &h));
	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(tn_cuda_stream_handle((tn_cuda_stream){ 0, 99 }, &h), TN_EINVAL);
	ck_assert_tn_ok(tn_cuda_stream_synchronize(a));
	ck_assert_int_eq(tn_cuda_stream_query(a), 1);
	ck_assert_tn_ok(tn_cuda_set_current_stream(tn_cuda_default_stream(0)));
}
END_TEST

START_TEST(test_events_order_streams)
{
	/* Work on a side stream, then the default stream waits on an event of it: a copy on the
	 * default stream sees the side stream's result. */
	int64_t sizes[] = { 1 << 22 };
	tn_cuda_stream side;
	tn_cuda_event *ev, *t0, *t1;
	tn_tensor *x, *y = NULL;
	float ms = -1;

	ck_assert_tn_ok(tn_cuda_stream_from_pool(0, false, &side));
	ck_assert_tn_ok(tn_cuda_event_create(0, &ev));
	ck_assert_tn_ok(tn_cuda_event_create(TN_CUDA_EVENT_TIMING, &t0));
	ck_assert_tn_ok(tn_cuda_event_create(TN_CUDA_EVENT_TIMING, &t1));
	ck_assert_tn_ok(tn_cuda_set_current_stream(side));
	ck_assert_tn_ok(tn_cuda_event_record(t0, side));
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(2.5), NULL, TN_CUDA(0), &x));
	ck_assert_tn_ok(tn_mul_scalar(x, tn_scalar_double(4.0), &y));
	ck_assert_tn_ok(tn_cuda_event_record(ev, side));
	ck_assert_tn_ok(tn_cuda_event_record(t1, side));
	ck_assert_tn_ok(tn_cuda_set_current_stream(tn_cuda_default_stream(0)));
	ck_assert_tn_ok(tn_cuda_stream_wait_event(tn_cuda_default_stream(0), ev));
	/* The other tensor's storage was allocated on the side stream and is used there. */
	tn_scalar v;
	int64_t last[] = { sizes[0] - 1 };
	ck_assert_tn_ok(tn_tensor_get(y, 1, last, &v));
	ck_assert_double_eq(v.v.d, 10.0);
	ck_assert_tn_ok(tn_cuda_event_synchronize(t1));
	ck_assert_int_eq(tn_cuda_event_query(ev), 1);
	ck_assert_tn_ok(tn_cuda_event_elapsed_ms(t0, t1, &ms));
	ck_assert(ms >= 0);
	ck_assert_int_eq(tn_cuda_event_elapsed_ms(ev, t1, &ms), TN_EINVAL);
	tn_cuda_event_destroy(ev);
	tn_cuda_event_destroy(t0);
	tn_cuda_event_destroy(t1);
	tn_tensor_unref(x);
	tn_tensor_unref(y);
}
END_TEST

/* ---- copies ---- */

START_TEST(test_copies_every_dtype_pair)
{
	int64_t sizes[] = { 3, 37 };
	for (int s = 0; s < NDT; s++) {
		tn_tensor *src = cpu_random(2, sizes, (enum tn_dtype)s, -100, 100);
		tn_tensor *gs = to_gpu(src);
		expect_same(gs, src, 0); /* plain H2D then D2H */
		for (int d = 0; d < NDT; d++) {
			tn_tensor *want, *g, *h;
			ck_assert_tn_ok(tn_to(src, (enum tn_dtype)d, false, false, NULL, &want));
			/* device-side conversion */
			ck_assert_tn_ok(tn_to(gs, (enum tn_dtype)d, false, false, NULL, &g));
			expect_same(g, want, 0);
			/* conversion on the way in (H2D with a cast) */
			ck_assert_tn_ok(tn_to_device(src, TN_CUDA(0), (enum tn_dtype)d, false, false,
						     NULL, &h));
			expect_same(h, want, 0);
			tn_tensor_unref(h);
			/* conversion on the way out (D2H with a cast) */
			ck_assert_tn_ok(tn_to_device(gs, TN_CPU, (enum tn_dtype)d, false, false, NULL,
						     &h));
			expect_same(g, h, 0);
			tn_tensor_unref(h);
			tn_tensor_unref(g);
			tn_tensor_unref(want);
		}
		tn_tensor_unref(gs);
		tn_tensor_unref(src);
	}
}
END_TEST

START_TEST(test_copies_strided_and_broadcast)
{
	int64_t sizes[] = { 64, 48 }, row[] = { 48 };
	tn_tensor *src = cpu_random(2, sizes, TN_FLOAT32, -1, 1), *srcT, *g, *gT, *dst, *dstT;
	ck_assert_tn_ok(tn_transpose(src, 0, 1, &srcT));
	g = to_gpu(src);
	ck_assert_tn_ok(tn_transpose(g, 0, 1, &gT));
	/* strided device -> contiguous host */
	tn_tensor *back = to_cpu(gT), *want;
	ck_assert_tn_ok(tn_contiguous(srcT, TN_CONTIGUOUS_FORMAT, &want));
	expect_same(gT, want, 0);
	tn_tensor_unref(back);
	/* host -> strided device destination */
	int64_t tsz[] = { 48, 64 };
	ck_assert_tn_ok(tn_zeros(2, tsz, TN_FLOAT64, TN_CUDA(0), &dst));
	ck_assert_tn_ok(tn_transpose(dst, 0, 1, &dstT));
	ck_assert_tn_ok(tn_copy_(dstT, src, false));
	tn_tensor *want64;
	ck_assert_tn_ok(tn_to(srcT, TN_FLOAT64, false, false, NULL, &want64));
	expect_same(dst, want64, 0);
	/* broadcast a host row into a device matrix */
	tn_tensor *r = cpu_random(1, row, TN_INT32, -5, 5), *m, *wm;
	ck_assert_tn_ok(tn_empty(2, sizes, TN_INT64, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &m));
	ck_assert_tn_ok(tn_copy_(m, r, false));
	ck_assert_tn_ok(tn_empty(2, sizes, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &wm));
	ck_assert_tn_ok(tn_copy_(wm, r, false));
	expect_same(m, wm, 0);
	/* a wrong shape fails as on the CPU */
	int64_t bad[] = { 5 };
	tn_tensor *b = cpu_random(1, bad, TN_FLOAT32, 0, 1);
	ck_assert_tn_error_has(tn_copy_(m, b, false), TN_EINVAL, "must match the size");
	tn_tensor *const all[] = { src, srcT, g, gT, dst, dstT, want, want64, r, m, wm, b };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		tn_tensor_unref(all[i]);
}
END_TEST

START_TEST(test_print_and_elements)
{
	double v[] = { 1, 2.5, -3 };
	int64_t sizes[] = { 3 }, i1[] = { 1 };
	tn_tensor *c = tn_test_from_values(v, 1, sizes, TN_FLOAT32), *g = to_gpu(c);
	char *s = NULL;
	ck_assert_tn_ok(tn_tensor_repr(g, &s));
	ck_assert_str_eq(s, "tensor([ 1.0000,  2.5000, -3.0000], device='cuda:0')");
	free(s);
	ck_assert_tn_ok(tn_tensor_set(g, 1, i1, tn_scalar_double(7)));
	ck_assert_double_eq(tn_test_get_double(g, i1), 7.0);
	tn_tensor_unref(g);
	tn_tensor_unref(c);
}
END_TEST

/* ---- element-wise operators against the CPU ---- */

/* The inputs of a binary case: contiguous, transposed, sliced, broadcast. */
static void binary_inputs(int layout, enum tn_dtype da, enum tn_dtype db, tn_tensor **a,
			  tn_tensor **b)
{
	int64_t s2[] = { 33, 65 }, s1[] = { 65 }, s3[] = { 65, 33 };
	tn_tensor *t;
	double lo = db == TN_BOOL ? 0 : 1, hi = 60; /* positive divisors */
	switch (layout) {
	case 0:
		*a = cpu_random(2, s2, da, -50, 50);
		*b = cpu_random(2, s2, db, lo, hi);
		break;
	case 1: /* a transposed */
		t = cpu_random(2, s3, da, -50, 50);
		ck_assert_tn_ok(tn_transpose(t, 0, 1, a));
		tn_tensor_unref(t);
		*b = cpu_random(2, s2, db, lo, hi);
		break;
	case 2: /* b broadcast along rows, a sliced with a step */
		t = cpu_random(2, (int64_t[]){ 66, 65 }, da, -50, 50);
		ck_assert_tn_ok(tn_slice(t, 0, 0, 66, 2, a));
		tn_tensor_unref(t);
		*b = cpu_random(1, s1, db, lo, hi);
		break;
	default: /* b a zero-dim CPU tensor (PyTorch lets a CUDA op read one) */
		*a = cpu_random(2, s2, da, -50, 50);
		*b = cpu_random(0, NULL, db, lo, hi);
	}
}

typedef int (*binop_fn)(const tn_tensor *, const tn_tensor *, tn_tensor **);
static int add2(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_add(a, b, tn_scalar_int(2), r);
}
static int sub1(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_sub(a, b, tn_scalar_int(1), r);
}
static int floordiv(const tn_tensor *a, const tn_tensor *b, tn_tensor **r)
{
	return tn_div_mode(a, b, "floor", r);
}
static const struct {
	const char *name;
	binop_fn fn;
	double ulps;
} binops[] = {
	{ "add", add2, 0 },	      { "sub", sub1, 0 },	  { "mul", tn_mul, 0 },
	{ "div", tn_div, 1 },	      { "eq", tn_eq, 0 },	  { "lt", tn_lt, 0 },
	{ "ge", tn_ge, 0 },	      { "floor_divide", floordiv, 0 },
	{ "remainder", tn_remainder, 0 }, { "maximum", tn_maximum, 0 },
	{ "minimum", tn_minimum, 0 }, { "bitwise_and", tn_bitwise_and, 0 },
	{ "logical_xor", tn_logical_xor, 0 }, { "atan2", tn_atan2, 2 },
	{ "pow", tn_pow, 2 },
};

START_TEST(test_binary_vs_cpu)
{
	const int k = _i;
	for (int da = 0; da < NDT; da++)
		for (int db = 0; db < NDT; db++)
			for (int layout = 0; layout < 4; layout++) {
				tn_tensor *a, *b, *want = NULL, *got = NULL;
				binary_inputs(layout, (enum tn_dtype)da, (enum tn_dtype)db, &a, &b);
				tn_tensor *ga = to_gpu(a);
				tn_tensor *gb = tn_tensor_ndim(b) == 0 ? tn_tensor_ref(b) : to_gpu(b);
				tn_clear_error();
				int rc = binops[k].fn(a, b, &want);
				char cpu_msg[512];
				snprintf(cpu_msg, sizeof(cpu_msg), "%s", tn_last_error());
				tn_clear_error();
				int rg = binops[k].fn(ga, gb, &got);
				/* The same refusals with the same words (dtype rules). */
				ck_assert_msg(rc == rg, "%s %s,%s layout %d: cpu %d (%s), cuda %d (%s)",
					      binops[k].name, tn_dtype_name((enum tn_dtype)da),
					      tn_dtype_name((enum tn_dtype)db), layout, rc, cpu_msg,
					      rg, tn_last_error());
				if (rc == 0)
					expect_same(got, want, binops[k].ulps);
				else
					ck_assert_str_eq(tn_last_error(), cpu_msg);
				tn_tensor_unref(got);
				tn_tensor_unref(want);
				tn_tensor_unref(ga);
				tn_tensor_unref(gb);
				tn_tensor_unref(a);
				tn_tensor_unref(b);
			}
}
END_TEST

typedef int (*unop_fn)(const tn_tensor *, tn_tensor **);
static const struct {
	const char *name;
	unop_fn fn;
	double lo, hi, ulps;
} unops[] = {
	{ "neg", tn_neg, -9, 9, 0 },	     { "abs", tn_abs, -9, 9, 0 },
	{ "sign", tn_sign, -9, 9, 0 },	     { "exp", tn_exp, -5, 5, 2 },
	{ "log", tn_log, 0.01, 50, 2 },	     { "sqrt", tn_sqrt, 0, 50, 1 },
	{ "sin", tn_sin, -5, 5, 2 },	     { "tanh", tn_tanh, -5, 5, 2 },
	{ "sigmoid", tn_sigmoid, -9, 9, 2 }, { "relu", tn_relu, -9, 9, 0 },
	{ "floor", tn_floor, -9, 9, 0 },     { "round", tn_round, -9, 9, 0 },
	{ "reciprocal", tn_reciprocal, 0.5, 9, 1 }, { "erf", tn_erf, -3, 3, 2 },
	{ "logical_not", tn_logical_not, -2, 2, 0 }, { "isnan", tn_isnan, -2, 2, 0 },
	{ "bitwise_not", tn_bitwise_not, -9, 9, 0 },
};

START_TEST(test_unary_vs_cpu)
{
	const int k = _i;
	int64_t sizes[] = { 129, 7 };
	for (int dt = 0; dt < NDT; dt++) {
		tn_tensor *a = cpu_random(2, sizes, (enum tn_dtype)dt, unops[k].lo, unops[k].hi);
		tn_tensor *aT, *ga = to_gpu(a), *gaT, *want = NULL, *got = NULL;
		ck_assert_tn_ok(tn_transpose(a, 0, 1, &aT));
		ck_assert_tn_ok(tn_transpose(ga, 0, 1, &gaT));
		tn_clear_error();
		int rc = unops[k].fn(aT, &want);
		int rg = unops[k].fn(gaT, &got);
		ck_assert_msg(rc == rg, "%s %s: cpu %d, cuda %d (%s)", unops[k].name,
			      tn_dtype_name((enum tn_dtype)dt), rc, rg, tn_last_error());
		/* 16-bit floats round once from float32 on both sides. */
		if (rc == 0)
			expect_same(got, want, unops[k].ulps);
		tn_tensor_unref(got);
		tn_tensor_unref(want);
		tn_tensor_unref(gaT);
		tn_tensor_unref(aT);
		tn_tensor_unref(ga);
		tn_tensor_unref(a);
	}
}
END_TEST

START_TEST(test_where_fill_and_sizes)
{
	/* Sizes around the vector and unroll widths, and an offset view (unaligned). */
	static const int64_t ns[] = { 0, 1, 3, 4, 5, 127, 128, 129, 1000003 };
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		int64_t n[] = { ns[i] + 1 };
		tn_tensor *c = cpu_random(1, n, TN_BOOL, 0, 1), *a = cpu_random(1, n, TN_FLOAT32, -1, 1);
		tn_tensor *b = cpu_random(1, n, TN_FLOAT64, -1, 1), *cs, *as, *bs;
		ck_assert_tn_ok(tn_slice(c, 0, 1, n[0], 1, &cs));
		ck_assert_tn_ok(tn_slice(a, 0, 1, n[0], 1, &as));
		ck_assert_tn_ok(tn_slice(b, 0, 1, n[0], 1, &bs));
		tn_tensor *gc = to_gpu(c), *ga = to_gpu(a), *gb = to_gpu(b), *gcs, *gas, *gbs;
		ck_assert_tn_ok(tn_slice(gc, 0, 1, n[0], 1, &gcs));
		ck_assert_tn_ok(tn_slice(ga, 0, 1, n[0], 1, &gas));
		ck_assert_tn_ok(tn_slice(gb, 0, 1, n[0], 1, &gbs));
		tn_tensor *want, *got, *want2, *got2;
		ck_assert_tn_ok(tn_where(cs, as, bs, &want));
		ck_assert_tn_ok(tn_where(gcs, gas, gbs, &got));
		expect_same(got, want, 0);
		ck_assert_tn_ok(tn_add(as, bs, tn_scalar_int(1), &want2));
		ck_assert_tn_ok(tn_add(gas, gbs, tn_scalar_int(1), &got2));
		expect_same(got2, want2, 0);
		ck_assert_tn_ok(tn_fill_(gas, tn_scalar_double(0.25)));
		ck_assert_tn_ok(tn_fill_(as, tn_scalar_double(0.25)));
		expect_same(ga, a, 0);
		tn_tensor *const all[] = { c, a, b, cs, as, bs, gc, ga, gb, gcs, gas, gbs,
					   want, got, want2, got2 };
		for (size_t j = 0; j < sizeof(all) / sizeof(all[0]); j++)
			tn_tensor_unref(all[j]);
	}
}
END_TEST

START_TEST(test_devices_must_match)
{
	int64_t sizes[] = { 2, 2 };
	tn_tensor *c = cpu_random(2, sizes, TN_FLOAT32, 0, 1), *g = to_gpu(c), *r = NULL;
	ck_assert_tn_error(tn_add(g, c, tn_scalar_int(1), &r), TN_EINVAL,
			   "Expected all tensors to be on the same device, but found at least two "
			   "devices, cuda:0 and cpu!");
	ck_assert_ptr_null(r);
	/* Operators without a CUDA kernel refuse by name, never touch device memory. */
	ck_assert_tn_error_has(tn_argmax(g, NULL, false, &r), TN_ENOTSUP,
			       "with arguments from the 'CUDA' backend");
	tn_tensor_unref(g);
	tn_tensor_unref(c);
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_reductions_vs_cpu)
{
	int64_t sizes[] = { 37, 1001, 3 };
	static const int64_t dims[][2] = { { 0, 0 }, { 1, 0 }, { 2, 0 }, { 0, 2 } };
	static const int ndims[] = { 1, 1, 1, 2 };
	for (int dt = 0; dt < NDT; dt++) {
		tn_tensor *a = cpu_random(3, sizes, (enum tn_dtype)dt, -3, 3), *g = to_gpu(a);
		tn_tensor *want, *got;
		double tol = tn_dtype_is_floating((enum tn_dtype)dt) ? 64 : 0; /* summation order */
		ck_assert_tn_ok(tn_sum(a, NULL, &want));
		ck_assert_tn_ok(tn_sum(g, NULL, &got));
		expect_same(got, want, tol);
		tn_tensor_unref(want);
		tn_tensor_unref(got);
		for (int k = 0; k < 4; k++) {
			ck_assert_tn_ok(tn_sum_dim(a, ndims[k], dims[k], k == 1, NULL, &want));
			ck_assert_tn_ok(tn_sum_dim(g, ndims[k], dims[k], k == 1, NULL, &got));
			expect_same(got, want, tol);
			tn_tensor_unref(want);
			tn_tensor_unref(got);
			ck_assert_tn_ok(tn_amax(a, ndims[k], dims[k], false, &want));
			ck_assert_tn_ok(tn_amax(g, ndims[k], dims[k], false, &got));
			expect_same(got, want, 0);
			tn_tensor_unref(want);
			tn_tensor_unref(got);
			ck_assert_tn_ok(tn_amin(a, ndims[k], dims[k], true, &want));
			ck_assert_tn_ok(tn_amin(g, ndims[k], dims[k], true, &got));
			expect_same(got, want, 0);
			tn_tensor_unref(want);
			tn_tensor_unref(got);
			if (tn_dtype_is_floating((enum tn_dtype)dt)) {
				ck_assert_tn_ok(tn_mean_dim(a, ndims[k], dims[k], false, NULL, &want));
				ck_assert_tn_ok(tn_mean_dim(g, ndims[k], dims[k], false, NULL, &got));
				expect_same(got, want, tol);
				tn_tensor_unref(want);
				tn_tensor_unref(got);
			}
		}
		tn_tensor_unref(g);
		tn_tensor_unref(a);
	}
	/* One output over many elements (the two-pass grid reduction), and NaN in amax. */
	int64_t big[] = { 10000019 };
	tn_tensor *ones, *s, *n;
	ck_assert_tn_ok(tn_ones(1, big, TN_FLOAT32, TN_CUDA(0), &ones));
	ck_assert_tn_ok(tn_sum(ones, NULL, &s));
	ck_assert_double_eq(tn_test_get_double(s, NULL), 10000019.0);
	int64_t at[] = { 777777 };
	ck_assert_tn_ok(tn_tensor_set(ones, 1, at, tn_scalar_double(NAN)));
	ck_assert_tn_ok(tn_amax(ones, 0, NULL, false, &n));
	ck_assert(isnan(tn_test_get_double(n, NULL)));
	tn_tensor_unref(ones);
	tn_tensor_unref(s);
	tn_tensor_unref(n);
}
END_TEST

/* ---- the caching allocator on the device ---- */

START_TEST(test_allocator_reuse_and_limit)
{
	int64_t sizes[] = { 1 << 20 }; /* 4 MiB of float32: the large pool */
	tn_cuda_memory_stats st0, st;
	tn_tensor *a, *b;

	ck_assert_tn_ok(tn_cuda_synchronize(0));
	ck_assert_int_ge(tn_cuda_empty_cache(), 0);
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &st0));
	ck_assert_tn_ok(tn_empty(1, sizes, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &a));
	void *pa = tn_tensor_data(a);
	tn_tensor_unref(a);
	ck_assert_tn_ok(tn_empty(1, sizes, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &b));
	ck_assert_ptr_eq(tn_tensor_data(b), pa); /* the cached block, no cudaMalloc */
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &st));
	ck_assert_uint_eq(st.num_device_mallocs, st0.num_device_mallocs + 1);
	ck_assert_uint_eq(st.allocated_bytes, st0.allocated_bytes + ((uint64_t)4 << 20));
	/* record_stream: a block used on a side stream is not reused before that work ends. */
	tn_cuda_stream side;
	ck_assert_tn_ok(tn_cuda_stream_from_pool(0, false, &side));
	ck_assert_tn_ok(tn_cuda_record_stream(tn_tensor_storage(b), side));
	tn_tensor_unref(b);
	ck_assert_tn_ok(tn_cuda_stream_synchronize(side));
	/* The memory limit makes an out-of-memory error with the figures, never an abort. */
	ck_assert_tn_ok(tn_cuda_set_memory_limit(0, (uint64_t)64 << 20));
	int64_t huge[] = { (int64_t)1 << 28 }; /* 1 GiB */
	tn_tensor *h = NULL;
	ck_assert_tn_error_has(tn_empty(1, huge, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &h),
			       TN_ENOMEM, "CUDA out of memory. Tried to allocate 1.00 GiB");
	ck_assert_ptr_null(h);
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &st));
	ck_assert_uint_ge(st.num_ooms, 1);
	ck_assert_tn_ok(tn_cuda_set_memory_limit(0, 0));
	ck_assert_int_ge(tn_cuda_empty_cache(), 0);
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &st));
	ck_assert_uint_eq(st.allocated_bytes, st0.allocated_bytes);
}
END_TEST

/* ---- pinned host memory ---- */

/* Whether CUDA itself sees @p as registered host memory. */
static bool cuda_sees_pinned(const void *p)
{
#ifdef TN_HAVE_CUDA
	struct cudaPointerAttributes at;
	ck_assert_int_eq(cudaPointerGetAttributes(&at, p), cudaSuccess);
	return at.type == cudaMemoryTypeHost;
#else
	(void)p;
	return false;
#endif
}

START_TEST(test_pinned_arena_copies)
{
	int64_t n[] = { 1 << 22 }; /* 16 MiB of float32 */
	char dir[64];
	tn_arena *a = make_arena(dir);
	tn_tensor *want = cpu_random(1, n, TN_FLOAT32, -1, 1), *host, *g, *back;

	ck_assert_tn_ok(tn_cuda_arena_register(a));
	ck_assert_tn_ok(tn_cuda_arena_register(a)); /* once per mapping: a no-op */
	ck_assert(!tn_tensor_is_pinned(want));      /* malloc'd */
	ck_assert_tn_ok(tn_arena_use(a));
	ck_assert_tn_ok(tn_empty(1, n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &host));
	ck_assert_tn_ok(tn_empty(1, n, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &back));
	ck_assert_tn_ok(tn_arena_use(NULL));
	ck_assert(tn_tensor_is_pinned(host));
	ck_assert(cuda_sees_pinned(tn_tensor_data(host)));
	ck_assert_tn_ok(tn_copy_(host, want, false));

	/* Host to device, non_blocking from pinned memory, the host tensor dropped at once: its
	 * block stays allocated (the copy holds the storage) until a synchronize reaps it. */
	ck_assert_tn_ok(tn_empty(1, n, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &g));
	uint64_t used = arena_used(a);
	ck_assert_tn_ok(tn_copy_(g, host, true));
	tn_tensor_unref(host);
	ck_assert_uint_eq(arena_used(a), used);
	ck_assert_tn_ok(tn_cuda_synchronize(0));
	ck_assert_uint_lt(arena_used(a), used);
	expect_same(g, want, 0);

	/* Device to host into pinned memory, non_blocking, waited for on the stream. */
	ck_assert_tn_ok(tn_copy_(back, g, true));
	ck_assert_tn_ok(tn_cuda_stream_synchronize(tn_cuda_default_stream(0)));
	ck_assert_int_eq(memcmp(tn_tensor_data(back), tn_tensor_data(want), (size_t)4 << 22), 0);

	/* A sealed tensor lies in the read-only mapping, registered READ_ONLY. */
	tn_tensor *sealed, *g2;
	ck_assert_tn_ok(tn_arena_publish(a, "w", back, TN_ARENA_SEAL, NULL));
	tn_tensor_unref(back);
	ck_assert_tn_ok(tn_arena_lookup(a, "w", &sealed, NULL));
	ck_assert(tn_tensor_is_pinned(sealed));
	ck_assert_tn_ok(tn_empty(1, n, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &g2));
	ck_assert_tn_ok(tn_copy_(g2, sealed, true));
	ck_assert_tn_ok(tn_cuda_synchronize(0));
	expect_same(g2, want, 0);
	void *p = tn_tensor_data(sealed);
	tn_tensor_unref(sealed);

	/* Explicit unregistration, then again, then the arena's end unregisters. */
	ck_assert_tn_ok(tn_cuda_arena_unregister(a));
	ck_assert(!tn_cuda_is_pinned(p, 1));
	ck_assert(!cuda_sees_pinned(p));
	ck_assert_tn_ok(tn_cuda_arena_unregister(a)); /* nothing left: 0 */
	ck_assert_tn_ok(tn_cuda_arena_register(a));
	ck_assert(tn_cuda_is_pinned(p, 1));
	ck_assert(cuda_sees_pinned(p));
	tn_arena_unref(a);
	ck_assert(!tn_cuda_is_pinned(p, 1));
	ck_assert(!cuda_sees_pinned(p));
	drop_arena(dir);
	tn_tensor_unref(g2);
	tn_tensor_unref(g);
	tn_tensor_unref(want);
}
END_TEST

START_TEST(test_pinned_host_register)
{
	const size_t len = (size_t)8 << 20;
	char *buf = aligned_alloc(4096, len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_tn_ok(tn_cuda_host_register(buf, len / 2, 0));
	ck_assert(tn_cuda_is_pinned(buf, len / 2));
	ck_assert(!tn_cuda_is_pinned(buf, len / 2 + 1));
	ck_assert(cuda_sees_pinned(buf));
	ck_assert_int_eq(tn_cuda_host_register(buf + 4096, 4096, 0), TN_EEXIST);
	ck_assert_tn_ok(tn_cuda_host_register(buf + len / 2, len / 2, 0)); /* adjacent */
	ck_assert_int_eq(tn_cuda_host_unregister(buf + 4096), TN_ENOENT);
	/* Many non_blocking copies from a pinned blob, the blob dropped each time. */
	int64_t n[] = { (int64_t)(len / 2 / sizeof(float)) };
	for (int64_t i = 0; i < n[0]; i++)
		((float *)buf)[i] = (float)i;
	tn_tensor *g, *h, *want;
	ck_assert_tn_ok(tn_empty(1, n, TN_FLOAT32, TN_CUDA(0), TN_CONTIGUOUS_FORMAT, &g));
	for (int k = 0; k < 200; k++) { /* past the list's soft limit: reaped as it grows */
		ck_assert_tn_ok(tn_from_blob(buf, 1, n, NULL, TN_FLOAT32, NULL, NULL, &h));
		ck_assert(tn_tensor_is_pinned(h));
		ck_assert_tn_ok(tn_copy_(g, h, true));
		tn_tensor_unref(h);
	}
	/* Unregistering waits for the copies still reading the range. */
	ck_assert_tn_ok(tn_cuda_host_unregister(buf));
	ck_assert(!tn_cuda_is_pinned(buf, 1));
	ck_assert_tn_ok(tn_from_blob(buf, 1, n, NULL, TN_FLOAT32, NULL, NULL, &want));
	expect_same(g, want, 0);
	tn_tensor_unref(want);
	tn_tensor_unref(g);
	ck_assert_tn_ok(tn_cuda_host_unregister(buf + len / 2));
	ck_assert(!cuda_sees_pinned(buf + len / 2));
	free(buf);
}
END_TEST

static Suite *cuda_suite(void)
{
	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_device_and_streams);
	tcase_add_test(tc, test_events_order_streams);
	tcase_add_test(tc, test_copies_every_dtype_pair);
	tcase_add_test(tc, test_copies_strided_and_broadcast);
	tcase_add_test(tc, test_print_and_elements);
	tcase_add_loop_test(tc, test_binary_vs_cpu, 0, (int)(sizeof(binops) / sizeof(binops[0])));
	tcase_add_loop_test(tc, test_unary_vs_cpu, 0, (int)(sizeof(unops) / sizeof(unops[0])));
	tcase_add_test(tc, test_where_fill_and_sizes);
	tcase_add_test(tc, test_devices_must_match);
	tcase_add_test(tc, test_reductions_vs_cpu);
	tcase_add_test(tc, test_allocator_reuse_and_limit);
	tcase_add_test(tc, test_pinned_arena_copies);
	tcase_add_test(tc, test_pinned_host_register);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const bool gpu = tn_cuda_device_count() > 0;
	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("absent");
	tcase_add_test(tc, test_absent);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(gpu ? cuda_suite() : s);
	/* Counting the devices initialised CUDA here, and CUDA does not survive a fork: the GPU
	 * tests run in this process. */
	if (gpu)
		srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (!gpu && failed == 0) {
		printf("check_cuda: no CUDA device: the no-device checks passed, the GPU checks are "
		       "skipped\n");
		return 77;
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
