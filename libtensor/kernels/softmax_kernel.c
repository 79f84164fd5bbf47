/* SPDX-License-Identifier: MIT */
/*
 * softmax, log_softmax and layer_norm over rows, compiled once per CPU capability with the
 * vector width of its instruction set (GCC vector extensions: 16 float32 lanes for AVX-512, 8
 * for AVX2, 4 for the DEFAULT build's SSE2).
 *
 * A row is short enough to stay in the L1 or L2 cache between its passes, so each kernel reads
 * the row from memory once and writes it once: softmax takes the maximum, then writes
 * exp(x - max) while summing it, then scales by 1 / sum; log_softmax takes the maximum, sums
 * exp(x - max) without writing, then writes x - max - log(sum); layer_norm takes the mean,
 * then the variance about it (two passes, so no cancellation), then writes
 * (x - mean) * rstd * weight + bias.
 *
 * exp is vmath.h's inline float32 exp (Cephes' expf: range reduction by ln 2 in two parts and
 * a degree-6 polynomial, within 1 ulp of the correctly rounded result over the range where
 * it is normal: measured over every float32 there). exp(x) for x below -87.33 (results in float32's subnormal range) is 0, where
 * libm and Sleef give subnormals: softmax probabilities below 1.2e-38 become 0. float64 rows
 * use libm's exp.
 */
#include <math.h>
#include <string.h>

#include "../internal.h"
#include "../stub.h"

#include "vmath.h"

/* The capability's float32 vectors (vmath.h). */
#define VL TN_VLF
typedef tn_vf vf;
typedef tn_vi vi;
#define vload tn_vload_f32
#define vstore tn_vstore_f32
#define vsplat tn_vf_splat
#define vsel tn_vf_sel
#define vexp tn_vexpf_cephes

static inline vf vmax(vf a, vf b)
{
	/* NaN in a propagates (a > b false and a == a false pick a). */
	return vsel((a > b) | (a != a), a, b);
}

static inline float hsum(vf v)
{
	float s = 0;
	for (int i = 0; i < (int)VL; i++)
		s += v[i];
	return s;
}

static inline float hmax(vf v)
{
	float m = v[0];
	for (int i = 1; i < (int)VL; i++)
		m = (v[i] > m || v[i] != v[i]) ? v[i] : m;
	return m;
}

static inline float sexp(float x)
{
	return vexp(vsplat(x))[0];
}

static float row_max_f32(const float *x, int64_t n)
{
	vf m = vsplat(-INFINITY);
	int64_t i = 0;
	for (; i + VL <= n; i += VL)
		m = vmax(vload(x + i), m);
	float r = hmax(m);
	for (; i < n; i++)
		r = (x[i] > r || x[i] != x[i]) ? x[i] : r;
	return r;
}

/*
 * @rows rows of @n float32 at @in (row stride @ins elements) into @out (@outs): softmax or,
 * with @log, log_softmax.
 */
void TN_KERNEL_FN(tn__softmax_f32_kernel)(bool log, const float *in, int64_t ins, float *out,
					  int64_t outs, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *x = in + r * ins;
		float *y = out + r * outs;
		float mx = row_max_f32(x, n);
		/* A row of -inf (everything masked) has max -inf: x - max is NaN, as in PyTorch. */
		vf vm = vsplat(mx), s0 = { 0 }, s1 = { 0 };
		int64_t i = 0;
		if (!log) {
			for (; i + 2 * VL <= n; i += 2 * VL) {
				vf e0 = vexp(vload(x + i) - vm), e1 = vexp(vload(x + i + VL) - vm);
				vstore(y + i, e0);
				vstore(y + i + VL, e1);
				s0 += e0;
				s1 += e1;
			}
			float s = hsum(s0 + s1);
			for (; i < n; i++) {
				y[i] = sexp(x[i] - mx);
				s += y[i];
			}
			float inv = 1.0f / s;
			vf vinv = vsplat(inv);
			for (i = 0; i + VL <= n; i += VL)
				vstore(y + i, vload(y + i) * vinv);
			for (; i < n; i++)
				y[i] *= inv;
		} else {
			for (; i + 2 * VL <= n; i += 2 * VL) {
				s0 += vexp(vload(x + i) - vm);
				s1 += vexp(vload(x + i + VL) - vm);
			}
			float s = hsum(s0 + s1);
			for (; i < n; i++)
				s += sexp(x[i] - mx);
			/* (x - max) - log(sum), in that order, as PyTorch: max + log(sum) first
			 * would round away log(sum)'s low bits when it is small. */
			float ls = logf(s);
			vf vls = vsplat(ls);
			for (i = 0; i + VL <= n; i += VL)
				vstore(y + i, (vload(x + i) - vm) - vls);
			for (; i < n; i++)
				y[i] = (x[i] - mx) - ls;
		}
	}
}

void TN_KERNEL_FN(tn__softmax_f64_kernel)(bool take_log, const double *in, int64_t ins, double *out,
					  int64_t outs, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++) {
		const double *x = in + r * ins;
		double *y = out + r * outs;
		double mx = -INFINITY, s = 0;
		for (int64_t i = 0; i < n; i++)
			mx = (x[i] > mx || x[i] != x[i]) ? x[i] : mx;
		if (!take_log) {
			for (int64_t i = 0; i < n; i++) {
				y[i] = exp(x[i] - mx);
				s += y[i];
			}
			double inv = 1.0 / s;
			for (int64_t i = 0; i < n; i++)
				y[i] *= inv;
		} else {
			for (int64_t i = 0; i < n; i++)
				s += exp(x[i] - mx);
			double ls = log(s);
			for (int64_t i = 0; i < n; i++)
				y[i] = (x[i] - mx) - ls;
		}
	}
}

/*
 * layer_norm of @rows rows of @n float32 (row strides @ins, @outs); @w and @b (n values or
 * NULL) scale and shift. Mean and rstd of each row into @mean and @rstd when not NULL.
 */
void TN_KERNEL_FN(tn__layer_norm_f32_kernel)(const float *in, int64_t ins, float *out,
					     int64_t outs, int64_t rows, int64_t n, const float *w,
					     const float *b, float eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *x = in + r * ins;
		float *y = out + r * outs;
		vf a0 = { 0 }, a1 = { 0 };
		int64_t i = 0;
		for (; i + 2 * VL <= n; i += 2 * VL) {
			a0 += vload(x + i);
			a1 += vload(x + i + VL);
		}
		float s = hsum(a0 + a1);
		for (; i < n; i++)
			s += x[i];
		float mean = s / (float)n;
		vf vmean = vsplat(mean);
		a0 = a1 = (vf){ 0 };
		for (i = 0; i + 2 * VL <= n; i += 2 * VL) {
			vf d0 = vload(x + i) - vmean, d1 = vload(x + i + VL) - vmean;
			a0 += d0 * d0;
			a1 += d1 * d1;
		}
		float q = hsum(a0 + a1);
		for (; i < n; i++)
			q += (x[i] - mean) * (x[i] - mean);
		float var = q / (float)n;
		float rstd = 1.0f / sqrtf((var > 0 ? var : 0) + eps);
		vf vr = vsplat(rstd);
		for (i = 0; i + VL <= n; i += VL) {
			vf v = (vload(x + i) - vmean) * vr;
			if (w)
				v *= vload(w + i);
			if (b)
				v += vload(b + i);
			vstore(y + i, v);
		}
		for (; i < n; i++) {
			float v = (x[i] - mean) * rstd;
			if (w)
				v *= w[i];
			if (b)
				v += b[i];
			y[i] = v;
		}
	}
}

void TN_KERNEL_FN(tn__layer_norm_f64_kernel)(const double *in, int64_t ins, double *out,
					     int64_t outs, int64_t rows, int64_t n, const double *w,
					     const double *b, double eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const double *x = in + r * ins;
		double *y = out + r * outs;
		double s = 0, q = 0;
		for (int64_t i = 0; i < n; i++)
			s += x[i];
		double mean = s / (double)n;
		for (int64_t i = 0; i < n; i++)
			q += (x[i] - mean) * (x[i] - mean);
		double var = q / (double)n;
		double rstd = 1.0 / sqrt((var > 0 ? var : 0) + eps);
		for (int64_t i = 0; i < n; i++) {
			double v = (x[i] - mean) * rstd;
			if (w)
				v *= w[i];
			if (b)
				v += b[i];
			y[i] = v;
		}
	}
}
