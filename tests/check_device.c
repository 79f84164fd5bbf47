/* SPDX-License-Identifier: MIT */
/*
 * The seam between the core and its backends (libtensor/backend.h), tested without any
 * hardware: a fake device registered in this program for the CUDA device type, its memory
 * plain host memory, receives what the core hands a backend. The operators' CUDA dispatch
 * rows must reach it with the iterator plan of each kernel family (tn_add's binary plan,
 * sum's reduction plan, ...), the factories must allocate through its allocator under its
 * device guard and fill through it, copies between the host and the device must go through
 * its copy, element access through its element hooks; CPU and Meta work must never touch it;
 * a second backend for the same type is refused with both names. The fake computes what it
 * is asked (float32 add, mul and sum), so a plan with wrong pointers or strides gives wrong
 * values.
 *
 * It links the internal copy of the library (tn__device_register is internal), and registers
 * before any CUDA use, so no libtensor-cuda is ever loaded here.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backend.h"
#include "iter.h"
#include "op_enums.h"

#define FAKE_DEVICES 2

/* What the fake saw. */
static struct {
	int runs, fills, copies, reads, writes, enters, allocs, frees;
	enum tn__kernel_family family;
	int op;
	enum tn_dtype compute;
	int64_t numel;
	int ntensors, noutputs;
	double divisor;
	int device; /* the current device during the last run */
	int current;
	bool nonblocking;
} seen = { .current = 0 };

static void *fake_alloc(void *ctx, size_t n)
{
	(void)ctx;
	seen.allocs++;
	return aligned_alloc(64, (n + 63) & ~(size_t)63);
}

static void fake_free(void *ctx, void *p, size_t n)
{
	(void)ctx, (void)n;
	seen.frees++;
	free(p);
}

static const tn_allocator fake_allocator = { "fake", NULL, fake_alloc, fake_free };

static int fake_count(void)
{
	return FAKE_DEVICES;
}

static int fake_enter(int index, int *saved)
{
	if (index < 0 || index >= FAKE_DEVICES)
		return tn__error(TN_ENODEV, "fake: no device %d", index);
	seen.enters++;
	*saved = seen.current;
	seen.current = index;
	return 0;
}

static void fake_leave(int saved)
{
	seen.current = saved;
}

static const tn_allocator *fake_get_allocator(void)
{
	return &fake_allocator;
}

/* Visit every element of @it: offsets of each operand in bytes, dim 0 fastest. */
static void each(const struct tn_iter *it, void (*fn)(const struct tn_iter *, char **, void *),
		 void *ctx)
{
	int64_t idx[TN_MAX_DIMS] = { 0 };
	for (int64_t n = 0; n < it->numel; n++) {
		char *p[TN_ITER_MAX_OPERANDS];
		for (int k = 0; k < it->ntensors; k++) {
			p[k] = it->ops[k].data;
			for (int d = 0; d < it->ndim; d++)
				p[k] += idx[d] * it->ops[k].strides[d];
		}
		fn(it, p, ctx);
		for (int d = 0; d < it->ndim && ++idx[d] == it->shape[d]; d++)
			idx[d] = 0;
	}
}

static void add_one(const struct tn_iter *it, char **p, void *ctx)
{
	const struct tn__alpha *alpha = ctx;
	(void)it;
	*(float *)p[0] = *(float *)p[1] + (float)alpha->d * *(float *)p[2];
}

static void mul_one(const struct tn_iter *it, char **p, void *ctx)
{
	(void)it, (void)ctx;
	*(float *)p[0] = *(float *)p[1] * *(float *)p[2];
}

static void zero_one(const struct tn_iter *it, char **p, void *ctx)
{
	(void)it, (void)ctx;
	*(float *)p[0] = 0;
}

static void sum_one(const struct tn_iter *it, char **p, void *ctx)
{
	(void)it, (void)ctx;
	*(float *)p[0] += *(float *)p[1];
}

static int fake_run(const struct tn_iter *it, enum tn__kernel_family family, int op,
		    const void *arg, enum tn_dtype compute, double divisor)
{
	seen.runs++;
	seen.family = family;
	seen.op = op;
	seen.compute = compute;
	seen.numel = it->numel;
	seen.ntensors = it->ntensors;
	seen.noutputs = it->noutputs;
	seen.divisor = divisor;
	seen.device = it->ops[0].tensor->storage->device.index;
	for (int k = 0; k < it->ntensors; k++)
		if (it->ops[k].dtype != TN_FLOAT32)
			return tn__error(TN_ENOTSUP, "fake: float32 only");
	if (family == TN_KERNEL_BINARY && op == TN_BINOP_ADD)
		each(it, add_one, (void *)arg);
	else if (family == TN_KERNEL_BINARY && op == TN_BINOP_MUL)
		each(it, mul_one, NULL);
	else if (family == TN_KERNEL_REDUCE && op == TN_RED_SUM) {
		each(it, zero_one, NULL);
		each(it, sum_one, NULL);
	} else
		return tn__error(TN_ENOTSUP, "fake: kernel %d op %d", (int)family, op);
	return 0;
}

static int fake_fill(tn_tensor *t, const void *elem)
{
	seen.fills++;
	if (!tn_tensor_is_contiguous(t))
		return tn__error(TN_ENOTSUP, "fake: contiguous fills only");
	size_t w = tn_dtype_size(t->dtype);
	for (int64_t i = 0; i < t->numel; i++)
		memcpy((char *)tn_tensor_data(t) + i * (int64_t)w, elem, w);
	return 0;
}

static int fake_copy(tn_tensor *dst, const tn_tensor *src, bool non_blocking)
{
	seen.copies++;
	seen.nonblocking = non_blocking;
	if (dst->dtype != src->dtype || dst->numel != src->numel ||
	    !tn_tensor_is_contiguous(dst) || !tn_tensor_is_contiguous(src))
		return tn__error(TN_ENOTSUP, "fake: same-dtype contiguous copies only");
	memcpy(tn_tensor_data(dst), tn_tensor_data(src),
	       (size_t)dst->numel * tn_dtype_size(dst->dtype));
	return 0;
}

static int fake_read(const tn_tensor *t, const void *addr, void *out)
{
	seen.reads++;
	memcpy(out, addr, tn_dtype_size(t->dtype));
	return 0;
}

static int fake_write(tn_tensor *t, void *addr, const void *in)
{
	seen.writes++;
	memcpy(addr, in, tn_dtype_size(t->dtype));
	return 0;
}

static const struct tn__device_ops fake = {
	.abi = TN_BACKEND_ABI,
	.name = "fake-1",
	.type = TN_DEVICE_CUDA,
	.device_count = fake_count,
	.enter = fake_enter,
	.leave = fake_leave,
	.allocator = fake_get_allocator,
	.run = fake_run,
	.fill = fake_fill,
	.copy = fake_copy,
	.element_read = fake_read,
	.element_write = fake_write,
	.api = NULL,
};

static tn_tensor *dev_tensor(int64_t n, float first, int device)
{
	tn_tensor *t = NULL;
	int64_t sizes[] = { n };
	ck_assert_tn_ok(tn_empty(1, sizes, TN_FLOAT32, TN_CUDA(device), TN_CONTIGUOUS_FORMAT, &t));
	for (int64_t i = 0; i < n; i++)
		ck_assert_tn_ok(tn_tensor_set(t, 1, &i, tn_scalar_double(first + (double)i)));
	return t;
}

static double get(const tn_tensor *t, int64_t i)
{
	tn_scalar v;
	ck_assert_tn_ok(tn_tensor_get(t, 1, &i, &v));
	return v.kind == TN_SCALAR_DOUBLE ? v.v.d : (double)v.v.i;
}

static void setup(void)
{
	if (tn__device_register(&fake) < 0)
		ck_abort_msg("%s", tn_last_error());
	memset(&seen, 0, sizeof(seen));
}

static void teardown(void)
{
	tn__device_unregister(&fake);
}

START_TEST(test_add_reaches_the_device)
{
	tn_tensor *a = dev_tensor(5, 1, 1), *b = dev_tensor(5, 10, 1), *c = NULL;
	ck_assert_int_eq(seen.writes, 10);
	ck_assert_int_ge(seen.allocs, 2);
	int runs = seen.runs;
	ck_assert_tn_ok(tn_add(a, b, tn_scalar_double(2.0), &c));
	ck_assert_int_eq(seen.runs, runs + 1);
	ck_assert_int_eq(seen.family, TN_KERNEL_BINARY);
	ck_assert_int_eq(seen.op, TN_BINOP_ADD);
	ck_assert_int_eq(seen.compute, TN_FLOAT32);
	ck_assert_int_eq(seen.numel, 5);
	ck_assert_int_eq(seen.ntensors, 3);
	ck_assert_int_eq(seen.noutputs, 1);
	ck_assert_int_eq(seen.device, 1);
	/* The result lives on the device the inputs are on, and holds a + 2b. */
	ck_assert_int_eq(tn_tensor_device(c).type, TN_DEVICE_CUDA);
	ck_assert_int_eq(tn_tensor_device(c).index, 1);
	for (int64_t i = 0; i < 5; i++)
		ck_assert_double_eq(get(c, i), (1.0 + (double)i) + 2.0 * (10.0 + (double)i));
	/* In place and out= reach it too. */
	ck_assert_tn_ok(tn_mul_(c, a));
	ck_assert_int_eq(seen.op, TN_BINOP_MUL);
	ck_assert_double_eq(get(c, 4), 5.0 * (5.0 + 28.0));
	tn_tensor_unref(a);
	tn_tensor_unref(b);
	tn_tensor_unref(c);
}
END_TEST

/* A strided, broadcast plan: the fake computes from the plan's pointers and strides alone. */
START_TEST(test_broadcast_plan)
{
	tn_tensor *row = dev_tensor(3, 1, 0), *col = dev_tensor(4, 100, 0), *c = NULL, *col2 = NULL;
	int64_t shape[] = { 4, 1 };
	ck_assert_tn_ok(tn_view(col, 2, shape, &col2));
	ck_assert_tn_ok(tn_add(col2, row, tn_scalar_int(1), &c));
	ck_assert_int_eq(seen.numel, 12);
	ck_assert_int_eq(tn_tensor_ndim(c), 2);
	for (int64_t i = 0; i < 4; i++)
		for (int64_t j = 0; j < 3; j++) {
			int64_t idx[] = { i, j };
			tn_scalar v;
			ck_assert_tn_ok(tn_tensor_get(c, 2, idx, &v));
			ck_assert_double_eq(v.v.d, (100.0 + (double)i) + (1.0 + (double)j));
		}
	/* A CPU 0-dim tensor may join a device operation (a scalar); a CPU tensor with
	 * dimensions may not. */
	tn_tensor *s = NULL, *cpu = NULL, *bad = NULL;
	ck_assert_tn_ok(tn_full(0, NULL, tn_scalar_double(0.5), NULL, TN_CPU, &s));
	int runs = seen.runs;
	ck_assert_tn_ok(tn_mul_(c, s));
	ck_assert_int_eq(seen.runs, runs + 1);
	ck_assert_tn_ok(tn_ones(1, (int64_t[]){ 3 }, TN_FLOAT32, TN_CPU, &cpu));
	ck_assert_tn_error(tn_add(row, cpu, tn_scalar_int(1), &bad), TN_EINVAL,
			   "Expected all tensors to be on the same device, but found at least two "
			   "devices, cuda:0 and cpu!");
	ck_assert_int_eq(seen.runs, runs + 1);
	tn_tensor_unref(s);
	tn_tensor_unref(cpu);
	tn_tensor_unref(col2);
	tn_tensor_unref(row);
	tn_tensor_unref(col);
	tn_tensor_unref(c);
}
END_TEST

START_TEST(test_reduction_plan)
{
	tn_tensor *a = dev_tensor(6, 1, 0), *m = NULL, *s = NULL, *a2 = NULL;
	int64_t shape[] = { 2, 3 }, dim = 1;
	ck_assert_tn_ok(tn_view(a, 2, shape, &a2));
	ck_assert_tn_ok(tn_sum_dim(a2, 1, &dim, false, NULL, &s));
	ck_assert_int_eq(seen.family, TN_KERNEL_REDUCE);
	ck_assert_int_eq(seen.op, TN_RED_SUM);
	ck_assert_double_eq(seen.divisor, 1.0);
	ck_assert_double_eq(get(s, 0), 1 + 2 + 3);
	ck_assert_double_eq(get(s, 1), 4 + 5 + 6);
	/* mean hands the count over as the divisor. */
	tn_tensor_unref(s);
	int runs = seen.runs;
	tn_mean(a2, NULL, &m); /* the fake does not divide; only the plan is checked */
	ck_assert_int_eq(seen.runs, runs + 1);
	ck_assert_double_eq(seen.divisor, 6.0);
	tn_tensor_unref(m);
	tn_tensor_unref(a2);
	tn_tensor_unref(a);
}
END_TEST

START_TEST(test_factories_copies_and_printing)
{
	tn_tensor *z = NULL, *h = NULL, *d = NULL, *back = NULL;
	int64_t sizes[] = { 3 };
	ck_assert_tn_ok(tn_full(1, sizes, tn_scalar_double(7.5), NULL, TN_CUDA(1), &z));
	ck_assert_int_eq(seen.fills, 1);
	ck_assert_int_ge(seen.enters, 1); /* allocated under the device's guard */
	ck_assert_int_eq(seen.current, 0); /* and the guard put the device back */
	ck_assert_double_eq(get(z, 2), 7.5);
	/* Host to device and back, through the device's copy. */
	ck_assert_tn_ok(tn_arange(tn_scalar_double(0), tn_scalar_double(3), tn_scalar_int(1),
				  NULL, TN_CPU, &h));
	ck_assert_tn_ok(tn_to_device(h, TN_CUDA(0), TN_FLOAT32, true, false, NULL, &d));
	ck_assert_int_eq(seen.copies, 1);
	ck_assert(seen.nonblocking);
	ck_assert_int_eq(tn_tensor_device(d).index, 0);
	ck_assert_tn_ok(tn_to_device(d, TN_CPU, TN_FLOAT32, false, false, NULL, &back));
	ck_assert_int_eq(seen.copies, 2);
	ck_assert_double_eq(((float *)tn_tensor_data(back))[2], 2.0);
	/* Printing brings the values to the host and names the device. */
	char *s = NULL;
	ck_assert_tn_ok(tn_tensor_repr(z, &s));
	ck_assert_str_eq(s, "tensor([7.5000, 7.5000, 7.5000], device='cuda:1')");
	free(s);
	/* A device that does not exist: the backend's guard says so, named by the core. */
	tn_tensor *none = NULL;
	ck_assert_tn_error(tn_zeros(1, sizes, TN_FLOAT32, TN_CUDA(2), &none), TN_ENODEV,
			   "tn_storage_new: fake: no device 2");
	tn_tensor_unref(z);
	tn_tensor_unref(h);
	tn_tensor_unref(d);
	tn_tensor_unref(back);
}
END_TEST

/* CPU and Meta work never reaches the device. */
START_TEST(test_cpu_and_meta_stay_home)
{
	tn_tensor *a = NULL, *b = NULL, *m = NULL, *mm = NULL;
	int64_t sizes[] = { 100 };
	ck_assert_tn_ok(tn_ones(1, sizes, TN_FLOAT32, TN_CPU, &a));
	ck_assert_tn_ok(tn_add(a, a, tn_scalar_int(1), &b));
	ck_assert_tn_ok(tn_sum(b, NULL, &m));
	tn_tensor_unref(m);
	ck_assert_tn_ok(tn_empty(1, sizes, TN_FLOAT32, TN_META, TN_CONTIGUOUS_FORMAT, &m));
	ck_assert_tn_ok(tn_add(m, m, tn_scalar_int(1), &mm));
	ck_assert_int_eq(seen.runs + seen.fills + seen.copies + seen.allocs, 0);
	tn_tensor_unref(a);
	tn_tensor_unref(b);
	tn_tensor_unref(m);
	tn_tensor_unref(mm);
}
END_TEST

START_TEST(test_registration_rules)
{
	struct tn__device_ops second = fake, cpu = fake, holey = fake, old = fake;
	second.name = "fake-2";
	ck_assert_tn_error(tn__device_register(&second), TN_EEXIST,
			   "device registry: backend 'fake-2' cannot serve cuda: backend 'fake-1' "
			   "does");
	cpu.type = TN_DEVICE_CPU;
	ck_assert_tn_error(tn__device_register(&cpu), TN_EINVAL,
			   "device registry: backend 'fake-1': cpu is built in");
	holey.run = NULL;
	holey.name = "holey";
	ck_assert_tn_error(tn__device_register(&holey), TN_EPROTO,
			   "device registry: backend 'holey' leaves an entry of its table NULL");
	old.abi = TN_BACKEND_ABI + 1;
	old.name = "old";
	ck_assert_tn_error_has(tn__device_register(&old), TN_EPROTO, "backend 'old' has ABI");
	/* Unregistering another table leaves the registered one; then the second may come. */
	tn__device_unregister(&second);
	const struct tn__device_ops *got;
	ck_assert_tn_ok(tn__device_get(TN_DEVICE_CUDA, &got, "test"));
	ck_assert_ptr_eq(got, &fake);
	tn__device_unregister(&fake);
	ck_assert_tn_ok(tn__device_register(&second));
	tn_tensor *t = dev_tensor(2, 3, 0);
	ck_assert_double_eq(get(t, 1), 4);
	tn_tensor_unref(t);
	tn__device_unregister(&second);
	ck_assert_tn_ok(tn__device_register(&fake)); /* for teardown */
}
END_TEST

/* A backend without CUDA's public functions: tn_cuda_* answer as without a backend. */
START_TEST(test_public_functions_without_api)
{
	int dev;
	ck_assert_int_eq(tn_cuda_device_count(), 0);
	ck_assert_tn_error(tn_cuda_current_device(&dev), TN_ENODEV,
			   "tn_cuda_current_device: the CUDA backend 'fake-1' has no such function");
	ck_assert(!tn_cuda_is_pinned(&dev, 1));
}
END_TEST

static Suite *device_suite(void)
{
	Suite *s = suite_create("device");
	TCase *tc = tcase_create("fake");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_add_reaches_the_device);
	tcase_add_test(tc, test_broadcast_plan);
	tcase_add_test(tc, test_reduction_plan);
	tcase_add_test(tc, test_factories_copies_and_printing);
	tcase_add_test(tc, test_cpu_and_meta_stay_home);
	tcase_add_test(tc, test_registration_rules);
	tcase_add_test(tc, test_public_functions_without_api);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(device_suite)
