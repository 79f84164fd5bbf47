/* SPDX-License-Identifier: MIT */
/*
 * bench_dispatch - the cost of going through the dispatcher, next to a direct C call of the
 * same kernel in the same run.
 *
 * A trivial kernel (aten::is_same_size: compare two size arrays) is called four ways: its
 * function pointer directly (the kernel registered for CPU, from tn_op_kernel_unboxed), the
 * generated unboxed entry point tn_is_same_size (cached handle, dispatch key from the
 * arguments, table load, call), boxed by handle (tn_op_call_boxed: push two tensors, type-check,
 * adapter, pop the bool) and boxed by name (tn_call_boxed: plus the hash lookup). A view
 * (aten::view, which allocates a tensor) shows the same overheads against real work.
 * The smallest real operator call, add.out of 1-element float32 tensors (dispatch, the trivial
 * path's checks, one kernel call), shows the CPU path's whole cost; the functional add adds
 * the result's allocation.
 * Each figure is the median of 15 samples of 200000 calls. Targets from the issues: unboxed
 * under 20 ns, boxed by name under 150 ns, the 1-element add.out under 50 ns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensor.h>

#include "bench_util.h"

#define CALLS 200000
#define SAMPLES 15

typedef int (*same_fn)(const tn_tensor *, const tn_tensor *, bool *);
typedef int (*view_fn)(const tn_tensor *, int, const int64_t *, tn_tensor **);

static tn_tensor *a, *b;
static const tn_op *same_op, *view_op;
static same_fn same_direct;
static view_fn view_direct;
static volatile long sink;
static const int64_t shape[] = { 6, 4 };


static void die(const char *what)
{
	fprintf(stderr, "bench_dispatch: %s: %s\n", what, tn_last_error());
	exit(1);
}

static void run_direct(void)
{
	bool r;
	long n = 0;
	for (int i = 0; i < CALLS; i++) {
		same_direct(a, b, &r);
		n += r;
	}
	sink += n;
}

static void run_unboxed(void)
{
	bool r;
	long n = 0;
	for (int i = 0; i < CALLS; i++) {
		tn_is_same_size(a, b, &r);
		n += r;
	}
	sink += n;
}

static void run_boxed(bool by_name)
{
	tn_stack st = TN_STACK_INIT;
	long n = 0;
	for (int i = 0; i < CALLS; i++) {
		tn_ivalue v;
		tn_stack_push_tensor(&st, a);
		tn_stack_push_tensor(&st, b);
		if ((by_name ? tn_call_boxed("aten::is_same_size", &st)
			     : tn_op_call_boxed(same_op, &st)) < 0)
			die("boxed call");
		tn_stack_pop(&st, &v);
		n += v.u.b;
	}
	tn_stack_destroy(&st);
	sink += n;
}

static void run_boxed_handle(void)
{
	run_boxed(false);
}

static void run_boxed_name(void)
{
	run_boxed(true);
}

static void run_view_direct(void)
{
	for (int i = 0; i < CALLS; i++) {
		tn_tensor *v;
		view_direct(a, 2, shape, &v);
		tn_tensor_unref(v);
	}
}

static void run_view_unboxed(void)
{
	for (int i = 0; i < CALLS; i++) {
		tn_tensor *v;
		tn_view(a, 2, shape, &v);
		tn_tensor_unref(v);
	}
}

static void run_view_boxed(void)
{
	tn_stack st = TN_STACK_INIT;
	tn_ivalue size;
	if (tn_ivalue_int_list(2, shape, &size) < 0)
		die("int list");
	for (int i = 0; i < CALLS; i++) {
		tn_ivalue s2;
		tn_stack_push_tensor(&st, a);
		tn_ivalue_copy(&size, &s2);
		tn_stack_push(&st, s2);
		if (tn_call_boxed("aten::view", &st) < 0)
			die("boxed view");
		tn_stack_clear(&st);
	}
	tn_ivalue_release(&size);
	tn_stack_destroy(&st);
}

/* add.out and add of one float32 element: the CPU path of an operator end to end. */
static tn_tensor *one_a, *one_b, *one_out;

static void run_add_out(void)
{
	for (int i = 0; i < CALLS; i++)
		if (tn_add_out(one_a, one_b, tn_scalar_int(1), one_out) < 0)
			die("add_out");
}

static void run_add(void)
{
	for (int i = 0; i < CALLS; i++) {
		tn_tensor *r;
		if (tn_add(one_a, one_b, tn_scalar_int(1), &r) < 0)
			die("add");
		tn_tensor_unref(r);
	}
}

/* fill_ of an in-cache block: where the CPU capability's kernel variant shows. */
#define FILL_ELEMS 16384 /* 64 KiB of float32: in L2 */
#define FILL_CALLS 20000
static tn_tensor *fill_t;

static void run_fill(void)
{
	for (int i = 0; i < FILL_CALLS; i++)
		tn_fill_(fill_t, tn_scalar_double(i));
}

static void run_memset(void)
{
	for (int i = 0; i < FILL_CALLS; i++) {
		memset(tn_tensor_data(fill_t), i, FILL_ELEMS * sizeof(float));
		__asm__ volatile("" ::: "memory");
	}
}


static double median_ns(void (*fn)(void))
{
	double t[SAMPLES];
	fn(); /* warm up: first-use registration, caches */
	for (int s = 0; s < SAMPLES; s++) {
		double t0 = bench_now_ns();
		fn();
		t[s] = (bench_now_ns() - t0) / CALLS;
	}
	qsort(t, SAMPLES, sizeof(t[0]), bench_cmp_double);
	return t[SAMPLES / 2];
}

int main(void)
{
	int64_t s1[] = { 2, 3, 4 }, s2[] = { 2, 3, 4 };
	tn_fn fn;

	if (tn_zeros(3, s1, TN_FLOAT32, TN_CPU, &a) < 0 || tn_zeros(3, s2, TN_FLOAT32, TN_CPU, &b) < 0)
		die("zeros");
	if (tn_op_find("aten::is_same_size", &same_op) < 0 || tn_op_find("aten::view", &view_op) < 0)
		die("find");
	if (tn_op_kernel_unboxed(same_op, TN_KEY_CPU, &fn) < 0)
		die("kernel");
	same_direct = (same_fn)fn;
	if (tn_op_kernel_unboxed(view_op, TN_KEY_CPU, &fn) < 0)
		die("kernel");
	view_direct = (view_fn)fn;

	double d = median_ns(run_direct), u = median_ns(run_unboxed);
	double bh = median_ns(run_boxed_handle), bn = median_ns(run_boxed_name);
	double vd = median_ns(run_view_direct), vu = median_ns(run_view_unboxed);
	double vb = median_ns(run_view_boxed);

	printf("dispatch overhead (median of %d x %d calls, ns per call; cpu capability %s)\n",
	       SAMPLES, CALLS, tn_cpu_capability_name(tn_cpu_capability()));
	printf("  %-44s %8s %10s %8s\n", "call", "ns", "vs direct", "target");
	printf("  %-44s %8.2f %10s %8s\n", "is_same_size: direct kernel call", d, "1.00x", "");
	printf("  %-44s %8.2f %9.2fx %8s  overhead %.2f ns\n", "is_same_size: unboxed tn_is_same_size", u,
	       u / d, "< 20", u - d);
	printf("  %-44s %8.2f %9.2fx %8s\n", "is_same_size: boxed, tn_op_call_boxed", bh, bh / d, "");
	printf("  %-44s %8.2f %9.2fx %8s  overhead %.2f ns\n", "is_same_size: boxed by name, tn_call_boxed",
	       bn, bn / d, "< 150", bn - d);
	printf("  %-44s %8.2f %10s\n", "view [2,3,4]->[6,4]: direct kernel call", vd, "1.00x");
	printf("  %-44s %8.2f %9.2fx\n", "view: unboxed tn_view", vu, vu / vd);
	printf("  %-44s %8.2f %9.2fx\n", "view: boxed by name", vb, vb / vd);
	printf("  unboxed %s the 20 ns target; boxed by name %s the 150 ns target\n",
	       u < 20 ? "meets" : "MISSES", bn < 150 ? "meets" : "MISSES");

	int64_t one = 1;
	if (tn_ones(1, &one, TN_FLOAT32, TN_CPU, &one_a) < 0 ||
	    tn_ones(1, &one, TN_FLOAT32, TN_CPU, &one_b) < 0 ||
	    tn_zeros(1, &one, TN_FLOAT32, TN_CPU, &one_out) < 0)
		die("ones");
	double ao = median_ns(run_add_out), af = median_ns(run_add);
	printf("one-element operator calls (float32 [1], CPU)\n");
	printf("  %-44s %8.2f %10s %8s\n", "add.out: tn_add_out", ao, "", "< 50");
	printf("  %-44s %8.2f\n", "add: tn_add (allocates the result)", af);
	printf("  add.out %s the 50 ns target\n", ao < 50 ? "meets" : "MISSES");
	tn_tensor_unref(one_a);
	tn_tensor_unref(one_b);
	tn_tensor_unref(one_out);

	/* Fill: ns per call of 64 KiB, as GB/s, next to memset of the same block. */
	int64_t fe = FILL_ELEMS;
	if (tn_empty(1, &fe, TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &fill_t) < 0)
		die("empty");
	double fl = median_ns(run_fill) * CALLS / FILL_CALLS;
	double ms = median_ns(run_memset) * CALLS / FILL_CALLS;
	printf("fill_ of 64 KiB float32 in cache (kernel variant %s; TN_CPU_CAPABILITY lowers it)\n",
	       tn_cpu_capability_name(tn_cpu_capability()));
	printf("  tn_fill_  %8.1f ns  %6.1f GB/s\n", fl, FILL_ELEMS * 4.0 / fl);
	printf("  memset    %8.1f ns  %6.1f GB/s  (tn_fill_ at %.2fx memset's time)\n", ms,
	       FILL_ELEMS * 4.0 / ms, fl / ms);
	tn_tensor_unref(fill_t);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
	return 0;
}
