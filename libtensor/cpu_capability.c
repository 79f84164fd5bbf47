/* SPDX-License-Identifier: MIT */
/*
 * The CPU capability: which compiled variant of each kernel this process runs.
 *
 * Detection reads cpuid and XGETBV (the OS must save the AVX and AVX-512 register state),
 * as ATen's cpuinfo-based compute_cpu_capability. AVX2 needs AVX2, FMA and F16C (the
 * float16 conversions); AVX512 needs
 * AVX-512 F, VL, BW and DQ. TN_CPU_CAPABILITY=default|avx2|avx512 may lower the choice
 * (never raise it past what the CPU and the build support: a forced AVX-512 kernel on a CPU
 * without it would die of SIGILL). The choice is made once and then fixed.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "stub.h"

/* The fuzz targets compile the library in one go, with the DEFAULT kernels only. */
#ifdef TN_DEFAULT_KERNELS_ONLY
#undef TN_BUILD_AVX2
#undef TN_BUILD_AVX512
#endif

static _Atomic int chosen = -1;

static enum tn_cpu_capability detect(void)
{
	enum tn_cpu_capability cap = TN_CPU_CAPABILITY_DEFAULT;
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return cap;
	bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
	     f16c = c & (1u << 29);
	if (!osxsave || !avx)
		return cap;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	(void)hi;
	bool ymm_state = (lo & 0x6) == 0x6;   /* XMM and YMM */
	bool zmm_state = (lo & 0xe6) == 0xe6; /* and opmask, ZMM_Hi256, Hi16_ZMM */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return cap;
	bool avx2 = b & (1u << 5);
	bool avx512 = (b & (1u << 16)) /* F */ && (b & (1u << 17)) /* DQ */ &&
		      (b & (1u << 30)) /* BW */ && (b & (1u << 31)) /* VL */;
#ifdef TN_BUILD_AVX2
	if (ymm_state && avx2 && fma && f16c)
		cap = TN_CPU_CAPABILITY_AVX2;
#endif
#ifdef TN_BUILD_AVX512
	if (cap == TN_CPU_CAPABILITY_AVX2 && zmm_state && avx512)
		cap = TN_CPU_CAPABILITY_AVX512;
#endif
	(void)ymm_state, (void)zmm_state, (void)avx2, (void)avx512, (void)fma, (void)f16c;
#endif
	return cap;
}

static enum tn_cpu_capability decide(void)
{
	enum tn_cpu_capability best = detect();
	const char *env = getenv("TN_CPU_CAPABILITY");

	if (!env || !*env)
		return best;
	for (int i = 0; i < TN_NUM_CPU_CAPABILITIES; i++) {
		if (strcasecmp(env, tn_cpu_capability_name((enum tn_cpu_capability)i)) == 0)
			return (enum tn_cpu_capability)i < best ? (enum tn_cpu_capability)i : best;
	}
	/* Not an error for any call: the detected capability is used, and the message says
	 * why the setting was ignored. */
	tn__error(TN_EINVAL,
		  "TN_CPU_CAPABILITY='%s' is not one of default, avx2, avx512; using the "
		  "detected %s",
		  env, tn_cpu_capability_name(best));
	return best;
}

TN_EXPORT enum tn_cpu_capability tn_cpu_capability(void)
{
	int c = atomic_load_explicit(&chosen, memory_order_relaxed);
	if (c < 0) {
		int expected = -1;
		c = (int)decide();
		/* Racing first calls agree (same inputs); the first store wins either way. */
		if (!atomic_compare_exchange_strong(&chosen, &expected, c))
			c = expected;
	}
	return (enum tn_cpu_capability)c;
}

TN_EXPORT const char *tn_cpu_capability_name(enum tn_cpu_capability capability)
{
	switch (capability) {
#define TN_X_(e, name) \
	case e:        \
		return name;
		TN_CPU_CAPABILITY_LIST(TN_X_)
#undef TN_X_
	default:
		return NULL;
	}
}

tn_fn tn__stub_choose(struct tn__stub *stub)
{
	int cap = (int)tn_cpu_capability();
	tn_fn fn = NULL;
	while (cap >= 0 && !(fn = stub->variants[cap]))
		cap--;
	atomic_store_explicit(&stub->chosen, fn, memory_order_relaxed);
	return fn;
}

/* ---- the stubs and their variants ---- */

#ifdef TN_BUILD_AVX2
#define TN_AVX2_VARIANT(name) (tn_fn) name##_AVX2
#else
#define TN_AVX2_VARIANT(name) NULL
#endif
#ifdef TN_BUILD_AVX512
#define TN_AVX512_VARIANT(name) (tn_fn) name##_AVX512
#else
#define TN_AVX512_VARIANT(name) NULL
#endif

#define TN_DEFINE_STUB(stub, kern)                                                      \
	struct tn__stub stub = { .name = #kern,                                          \
				 .variants = { (tn_fn)kern##_DEFAULT, TN_AVX2_VARIANT(kern), \
					       TN_AVX512_VARIANT(kern) } }

TN_DEFINE_STUB(tn__fill_stub, tn__fill_kernel);
TN_DEFINE_STUB(tn__stream_copy_stub, tn__stream_copy_kernel);
TN_DEFINE_STUB(tn__cast_stub, tn__cast_kernel);
TN_DEFINE_STUB(tn__gemm_int_stub, tn__gemm_int_kernel);
TN_DEFINE_STUB(tn__pow_f32_scalar_stub, tn__pow_f32_scalar_kernel);
TN_DEFINE_STUB(tn__softmax_f32_stub, tn__softmax_f32_kernel);
TN_DEFINE_STUB(tn__softmax_f64_stub, tn__softmax_f64_kernel);
TN_DEFINE_STUB(tn__layer_norm_f32_stub, tn__layer_norm_f32_kernel);
TN_DEFINE_STUB(tn__layer_norm_f64_stub, tn__layer_norm_f64_kernel);
TN_DEFINE_STUB(tn__transpose32_stub, tn__transpose32_kernel);
TN_DEFINE_STUB(tn__transpose16_stub, tn__transpose16_kernel);
TN_DEFINE_STUB(tn__binary_stub, tn__binary_kernel);
TN_DEFINE_STUB(tn__compare_stub, tn__compare_kernel);
TN_DEFINE_STUB(tn__unary_stub, tn__unary_kernel);
TN_DEFINE_STUB(tn__binary2_stub, tn__binary2_kernel);
TN_DEFINE_STUB(tn__pred_stub, tn__pred_kernel);
TN_DEFINE_STUB(tn__clamp_stub, tn__clamp_kernel);
TN_DEFINE_STUB(tn__where_stub, tn__where_kernel);
TN_DEFINE_STUB(tn__reduce_stub, tn__reduce_kernel);
TN_DEFINE_STUB(tn__argreduce_stub, tn__argreduce_kernel);
