/* SPDX-License-Identifier: MIT */
/*
 * DispatchStub: one function pointer per CPU capability for each kernel, as ATen's
 * DispatchStub and REGISTER_DISPATCH.
 *
 * A kernel source under libtensor/kernels/ is compiled once per capability (make builds it
 * with -DTN_KERNEL_CAP=DEFAULT, AVX2 or AVX512 and the matching -m flags) and names its
 * function TN_KERNEL_FN(name), which becomes name_DEFAULT, name_AVX2 or name_AVX512; the
 * prototypes of all three come from TN_DECLARE_KERNEL here, so every variant is type-checked.
 * The stub (TN_DEFINE_STUB, in cpu_capability.c) lists the variants the build made;
 * tn__stub_get() picks the best one the process may use on first call and caches it.
 */
#ifndef TN_STUB_H
#define TN_STUB_H

#include <stdatomic.h>

#include "internal.h"
#include "op_enums.h"
#include <tensor/dispatch.h>

struct tn__stub {
	const char *name;
	_Atomic(tn_fn) chosen;
	tn_fn variants[TN_NUM_CPU_CAPABILITIES];
};

tn_fn tn__stub_choose(struct tn__stub *stub);

static inline tn_fn tn__stub_get(struct tn__stub *stub)
{
	/* Relaxed is enough: the variants are constants, the pointer is the only datum. */
	tn_fn fn = atomic_load_explicit(&stub->chosen, memory_order_relaxed);
	return __builtin_expect(fn != NULL, 1) ? fn : tn__stub_choose(stub);
}

#define TN__CAT3(a, b, c) a##b##c
#define TN__XCAT3(a, b, c) TN__CAT3(a, b, c)

/* In a kernel source: the current capability's name of kernel @name. */
#define TN_KERNEL_FN(name) TN__XCAT3(name, _, TN_KERNEL_CAP)

#define TN_DECLARE_KERNEL(name, ret, params) \
	ret name##_DEFAULT params;           \
	ret name##_AVX2 params;              \
	ret name##_AVX512 params

/* ---- the stubs ---- */

/* Fill @count elements of @itemsize (1, 2, 4 or 8) bytes at @dst with the element at @elem. */
typedef void (*tn__fill_fn)(void *dst, const void *elem, size_t itemsize, int64_t count);
TN_DECLARE_KERNEL(tn__fill_kernel, void, (void *dst, const void *elem, size_t itemsize, int64_t count));
extern struct tn__stub tn__fill_stub;

/* Copy @bytes from @src to @dst with streaming (non-temporal) stores; fence before the data
 * is shared (tn__store_fence). */
typedef void (*tn__stream_copy_fn)(void *dst, const void *src, size_t bytes);
TN_DECLARE_KERNEL(tn__stream_copy_kernel, void, (void *dst, const void *src, size_t bytes));
extern struct tn__stub tn__stream_copy_stub;

/* Outputs at least this large are written with streaming stores (the L3 of common servers is
 * 16 to 64 MiB, shared; an output this large evicts most of what it holds anyway). */
#define TN_STREAM_BYTES ((int64_t)8 << 20)

/* Order streaming stores before later stores (the data is then safe to publish). */
static inline void tn__store_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_sfence();
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Copy @n elements from @src (dtype @sdt, byte stride @ss) to @dst (@ddt, @ds), converting. */
typedef void (*tn__cast_fn)(char *dst, enum tn_dtype ddt, int64_t ds, const char *src,
			    enum tn_dtype sdt, int64_t ss, int64_t n);
TN_DECLARE_KERNEL(tn__cast_kernel, void, (char *dst, enum tn_dtype ddt, int64_t ds,
					  const char *src, enum tn_dtype sdt, int64_t ss, int64_t n));
extern struct tn__stub tn__cast_stub;

/* A transposing copy of 4-byte elements: dst[j * dld + i] = src[i * sld + j] for i < n0,
 * j < n1 (leading dimensions in elements). */
typedef void (*tn__transpose32_fn)(void *dst, int64_t dld, const void *src, int64_t sld,
				   int64_t n0, int64_t n1);
TN_DECLARE_KERNEL(tn__transpose32_kernel, void, (void *dst, int64_t dld, const void *src,
						 int64_t sld, int64_t n0, int64_t n1));
extern struct tn__stub tn__transpose32_stub;

/* The same for 2-byte elements. */
typedef void (*tn__transpose16_fn)(void *dst, int64_t dld, const void *src, int64_t sld,
				   int64_t n0, int64_t n1);
TN_DECLARE_KERNEL(tn__transpose16_kernel, void, (void *dst, int64_t dld, const void *src,
						 int64_t sld, int64_t n0, int64_t n1));
extern struct tn__stub tn__transpose16_stub;

typedef void (*tn__binary_fn)(int op, enum tn_dtype dt, char *o, int64_t so, const char *a,
			      int64_t sa, const char *b, int64_t sb, int64_t n,
			      const struct tn__alpha *alpha);
TN_DECLARE_KERNEL(tn__binary_kernel, void,
		  (int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		   const char *b, int64_t sb, int64_t n, const struct tn__alpha *alpha));
extern struct tn__stub tn__binary_stub;

/* Comparisons: out (bool) = a OP b, a and b in dtype @dt. */
typedef void (*tn__compare_fn)(int op, enum tn_dtype dt, char *o, int64_t so, const char *a,
			       int64_t sa, const char *b, int64_t sb, int64_t n);
TN_DECLARE_KERNEL(tn__compare_kernel, void,
		  (int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		   const char *b, int64_t sb, int64_t n));
extern struct tn__stub tn__compare_stub;

/* Unary functions: out = f(a), both in dtype @dt. */
typedef void (*tn__unary_fn)(int op, enum tn_dtype dt, char *o, int64_t so, const char *a,
			     int64_t sa, int64_t n);
TN_DECLARE_KERNEL(tn__unary_kernel, void, (int op, enum tn_dtype dt, char *o, int64_t so,
					   const char *a, int64_t sa, int64_t n));
extern struct tn__stub tn__unary_stub;

/* The other binary operators: out = a OP b, a and b in dtype @dt; the logical ones write bool,
 * the others dt. The TN_BIN2_POW_* operators are pow with a Scalar exponent, PyTorch's special
 * cases of it (b holds the exponent; ONE and LEFT ignore it). */
typedef void (*tn__binary2_fn)(int op, enum tn_dtype dt, char *o, int64_t so, const char *a,
			       int64_t sa, const char *b, int64_t sb, int64_t n);
TN_DECLARE_KERNEL(tn__binary2_kernel, void,
		  (int op, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		   const char *b, int64_t sb, int64_t n));
extern struct tn__stub tn__binary2_stub;
/* Unary predicates: out (bool) = p(a), a in dtype @dt. */
typedef void (*tn__pred_fn)(int op, enum tn_dtype dt, char *o, int64_t so, const char *a,
			    int64_t sa, int64_t n);
TN_DECLARE_KERNEL(tn__pred_kernel, void, (int op, enum tn_dtype dt, char *o, int64_t so,
					  const char *a, int64_t sa, int64_t n));
extern struct tn__stub tn__pred_stub;

/* clamp: out = a bounded below by lo (TN_CLAMP_LO) and above by hi (TN_CLAMP_HI), all in
 * dtype @dt; a bound of stride 0 is one value. With TN_CLAMP_NAN a NaN bound gives NaN (the
 * Tensor forms, ATen's maximum/minimum/clamp kernels); without it a NaN bound compares false
 * and leaves a (the Scalar forms). A NaN in a stays NaN either way. */
typedef void (*tn__clamp_fn)(int mode, enum tn_dtype dt, char *o, int64_t so, const char *a,
			     int64_t sa, const char *lo, int64_t slo, const char *hi, int64_t shi,
			     int64_t n);
TN_DECLARE_KERNEL(tn__clamp_kernel, void,
		  (int mode, enum tn_dtype dt, char *o, int64_t so, const char *a, int64_t sa,
		   const char *lo, int64_t slo, const char *hi, int64_t shi, int64_t n));
extern struct tn__stub tn__clamp_stub;

/* where: out = c ? a : b, elements of @itemsize (1, 2, 4 or 8) bytes; c is bool or uint8
 * (nonzero selects a). */
typedef void (*tn__where_fn)(size_t itemsize, char *o, int64_t so, const char *c, int64_t sc,
			     const char *a, int64_t sa, const char *b, int64_t sb, int64_t n);
TN_DECLARE_KERNEL(tn__where_kernel, void,
		  (size_t itemsize, char *o, int64_t so, const char *c, int64_t sc, const char *a,
		   int64_t sa, const char *b, int64_t sb, int64_t n));
extern struct tn__stub tn__where_stub;
/*
 * Reductions (see reduce.c): one 2-D step of a reduction iterator, combined into the outputs.
 * out[i, j] = OP(out[i, j], in[i, j]) where the output strides are 0 along reduced dims; the
 * step is reduced in registers first (cascade sums for floating types, as ATen's cascade_sum).
 * Input dtype @dt; the output holds the accumulator: float32 for float16 and bfloat16 sums and
 * products, @dt otherwise, and 0/1 bytes for all and any. Strides in bytes: [0] and [1] for
 * the two dimensions of the step.
 */
typedef void (*tn__reduce_fn)(int op, enum tn_dtype dt, char *out, const int64_t *out_strides,
			      const char *in, const int64_t *in_strides, int64_t size0,
			      int64_t size1);
TN_DECLARE_KERNEL(tn__reduce_kernel, void,
		  (int op, enum tn_dtype dt, char *out, const int64_t *out_strides, const char *in,
		   const int64_t *in_strides, int64_t size0, int64_t size1));
extern struct tn__stub tn__reduce_stub;

/*
 * Index reductions (argmax, argmin, max.dim, min.dim): for each of @nout rows (input stride
 * @s_out between rows), the first position of the largest (TN_RED_MAX) or smallest (TN_RED_MIN)
 * of @nred elements @s_red apart, a NaN winning over any number. Writes the value (dtype @dt)
 * at vals + j * s_vals unless vals is NULL, and the position plus @base (int64) at
 * idx + j * s_idx.
 */
typedef void (*tn__argreduce_fn)(int op, enum tn_dtype dt, const char *in, int64_t s_red,
				 int64_t nred, int64_t s_out, int64_t nout, char *vals,
				 int64_t s_vals, char *idx, int64_t s_idx, int64_t base);
TN_DECLARE_KERNEL(tn__argreduce_kernel, void,
		  (int op, enum tn_dtype dt, const char *in, int64_t s_red, int64_t nred,
		   int64_t s_out, int64_t nout, char *vals, int64_t s_vals, char *idx,
		   int64_t s_idx, int64_t base));
extern struct tn__stub tn__argreduce_stub;

/*
 * The integer GEMM (kernels/gemm_kernel.c): rows [@m0, @m1) of C = beta * C + alpha * A @ B
 * for the integer dtype @dt (A m x k, B k x n, element strides), wrapping around as the dtype
 * does; beta 0 does not read C. alpha and beta are the scalars converted to the dtype and
 * sign-extended.
 */
typedef void (*tn__gemm_int_fn)(enum tn_dtype dt, int64_t m0, int64_t m1, int64_t n, int64_t k,
				uint64_t alpha, const char *a, int64_t ars, int64_t acs,
				const char *b, int64_t brs, int64_t bcs, uint64_t beta, char *c,
				int64_t crs, int64_t ccs);
TN_DECLARE_KERNEL(tn__gemm_int_kernel, void,
		  (enum tn_dtype dt, int64_t m0, int64_t m1, int64_t n, int64_t k, uint64_t alpha,
		   const char *a, int64_t ars, int64_t acs, const char *b, int64_t brs,
		   int64_t bcs, uint64_t beta, char *c, int64_t crs, int64_t ccs));
extern struct tn__stub tn__gemm_int_stub;

/* A float32 row to the power of the Scalar @e, as PyTorch 1.13's
 * pow_tensor_scalar_optimized_kernel<float, double> (kernels/binary2_kernel.c). */
typedef void (*tn__pow_f32_scalar_fn)(char *o, int64_t so, const char *a, int64_t sa, int64_t n,
				      double e);
TN_DECLARE_KERNEL(tn__pow_f32_scalar_kernel, void, (char *o, int64_t so, const char *a,
						    int64_t sa, int64_t n, double e));
extern struct tn__stub tn__pow_f32_scalar_stub;

/* softmax / log_softmax (@log) over @rows rows of @n elements (kernels/softmax_kernel.c);
 * row strides in elements. */
typedef void (*tn__softmax_f32_fn)(bool log, const float *in, int64_t ins, float *out,
				   int64_t outs, int64_t rows, int64_t n);
TN_DECLARE_KERNEL(tn__softmax_f32_kernel, void, (bool log, const float *in, int64_t ins,
						 float *out, int64_t outs, int64_t rows, int64_t n));
extern struct tn__stub tn__softmax_f32_stub;
typedef void (*tn__softmax_f64_fn)(bool log, const double *in, int64_t ins, double *out,
				   int64_t outs, int64_t rows, int64_t n);
TN_DECLARE_KERNEL(tn__softmax_f64_kernel, void, (bool log, const double *in, int64_t ins,
						 double *out, int64_t outs, int64_t rows, int64_t n));
extern struct tn__stub tn__softmax_f64_stub;
/* layer_norm over @rows rows of @n elements, scaled by @w and shifted by @b (or NULL). */
typedef void (*tn__layer_norm_f32_fn)(const float *in, int64_t ins, float *out, int64_t outs,
				      int64_t rows, int64_t n, const float *w, const float *b,
				      float eps);
TN_DECLARE_KERNEL(tn__layer_norm_f32_kernel, void,
		  (const float *in, int64_t ins, float *out, int64_t outs, int64_t rows, int64_t n,
		   const float *w, const float *b, float eps));
extern struct tn__stub tn__layer_norm_f32_stub;
typedef void (*tn__layer_norm_f64_fn)(const double *in, int64_t ins, double *out, int64_t outs,
				      int64_t rows, int64_t n, const double *w, const double *b,
				      double eps);
TN_DECLARE_KERNEL(tn__layer_norm_f64_kernel, void,
		  (const double *in, int64_t ins, double *out, int64_t outs, int64_t rows,
		   int64_t n, const double *w, const double *b, double eps));
extern struct tn__stub tn__layer_norm_f64_stub;

#endif /* TN_STUB_H */
