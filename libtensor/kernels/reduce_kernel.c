/* SPDX-License-Identifier: MIT */
/*
 * Reduction kernels (sum, prod, max, min, all, any, and the index reductions argmax/argmin),
 * compiled once per CPU capability (see stub.h). A call reduces one 2-D step of a reduction
 * iterator and combines the result into the outputs, as the loops of ATen's SumKernel.cpp and
 * Reduce.h do: a contiguous inner reduction reduces each row with LANES independent
 * accumulators (plain loops over a lane array, which the compiler turns into the capability's
 * vectors), a reduction over an outer dimension whose columns are contiguous accumulates blocks
 * of COLS columns across the rows (vectorised across the output row), anything else is a
 * strided scalar loop; 16-bit float inputs are widened a vector at a time in both contiguous
 * paths (ACC_F16, ACC_BF16). Sums use ATen's cascade: the lane accumulators are flushed into
 * LEVELS levels of partial sums every 2^k steps, so a float32 sum of 1e8 elements keeps
 * float32 accuracy without a double accumulator. The order of operations depends on the shape only,
 * never on the capability, so every capability gives the same bits.
 */
#include <math.h>
#include <string.h>

#include "stub.h"
#include "half.h"
#include "half_rows.h"

#define LANES 32 /* accumulators of a row: four AVX2 or two AVX-512 float32 vectors */
/* Columns per block of an outer reduction: rows up to this long are read in one sequential
 * pass (blocks of 64 columns read every row 32 times and ran at a fifth of the speed), with
 * LEVELS x COLS accumulators (64 KiB for float64) on the stack, in the L1 or L2 cache. */
#define COLS 2048
#define LEVELS 4 /* cascade levels, as ATen's multi_row_sum */
#define PREFETCH_ROW_BYTES 16384
#define PREFETCH_MIN_BYTES ((int64_t)1 << 21)

/* Prefetch rows @first to @last - 1 (of @n, @srow bytes apart, @rb bytes each) of @in: the
 * next rows of a reduction along contiguous rows, while one is reduced. */
static inline void prefetch_rows(const char *in, int64_t srow, int64_t rb, int64_t first,
				 int64_t last, int64_t n)
{
	for (int64_t r = first; r < last && r < n; r++)
		for (int64_t b = 0; b < rb; b += 64)
			__builtin_prefetch(in + r * srow + b);
}

/* ATen's level power: max(4, ceil(log2(n)) / LEVELS). */
static inline int level_power(int64_t n)
{
	int lg = 0;
	while (lg < 62 && ((int64_t)1 << lg) < n)
		lg++;
	return lg / LEVELS > 4 ? lg / LEVELS : 4;
}

/*
 * The cascade over @n steps: STEP(acc0) adds one step into the level-0 accumulators (W of
 * them); every 2^lp steps level l - 1 is flushed into level l, level l only when its count is
 * a multiple of 2^(l*lp) (ATen's multi_row_sum). Afterwards acc[0] holds the total.
 */
#define CASCADE(A, W, IDENT, COMB, n, STEP) CASCADE_N(A, W, W, IDENT, COMB, n, STEP)
/* The same with @W (at most @SIZE) accumulators per level. */
#define CASCADE_N(A, SIZE, W, IDENT, COMB, n, STEP)                                            \
	CASCADE_RUN(A, SIZE, W, IDENT, COMB, n, for (int64_t j_ = 0; j_ < m_; j_++, i++) STEP)
/* The same with RUN, a statement that adds the m_ steps from i on and advances i past them
 * (the steps between two flushes, which a run may interleave). */
#define CASCADE_RUN(A, SIZE, W, IDENT, COMB, n, RUN)                                           \
	A acc[LEVELS][SIZE];                                                                   \
	{                                                                                      \
		const int lp_ = level_power(n);                                                \
		const int64_t step_ = (int64_t)1 << lp_, mask_ = step_ - 1;                    \
		/* Fewer steps than one flush use level 0 only (a short column block would    \
		 * otherwise set LEVELS x SIZE accumulators for a handful of rows). */         \
		const int nl_ = (n) >= step_ ? LEVELS : 1;                                     \
		for (int l_ = 0; l_ < nl_; l_++)                                               \
			for (int k = 0; k < (W); k++)                                          \
				acc[l_][k] = (IDENT);                                          \
		int64_t i = 0;                                                                 \
		while (i + step_ <= (n)) {                                                     \
			{                                                                      \
				const int64_t m_ = step_;                                      \
				RUN;                                                           \
			}                                                                      \
			for (int l_ = 1; l_ < LEVELS; l_++) {                                  \
				for (int k = 0; k < (W); k++) {                                \
					acc[l_][k] = COMB(acc[l_][k], acc[l_ - 1][k]);         \
					acc[l_ - 1][k] = (IDENT);                              \
				}                                                              \
				if ((i & (mask_ << (l_ * lp_))) != 0)                          \
					break;                                                 \
			}                                                                      \
		}                                                                              \
		{                                                                              \
			const int64_t m_ = (n) - i;                                            \
			RUN;                                                                   \
		}                                                                              \
		for (int l_ = 1; l_ < nl_; l_++)                                               \
			for (int k = 0; k < (W); k++)                                          \
				acc[0][k] = COMB(acc[0][k], acc[l_][k]);                       \
	}

/*
 * One step over @cnt contiguous inputs at @src: acc[k] = COMB(acc[k], LOAD(src[k])). ACC_PLAIN
 * is that loop, which the compiler vectorises, except for float16's conversion (one scalar
 * vcvtph2ps per element); the 16-bit floats' ACC_F16 and ACC_BF16 widen TN_VLF inputs at a
 * time with vector conversions (half_rows.h) and combine them with COMB's vector form
 * (COMB##_V: the same operation lane by lane), the tail as ACC_PLAIN: the same bits.
 */
#define ACC_PLAIN(acc, src, cnt, LOAD, COMB)                                                   \
	for (int64_t k_ = 0; k_ < (cnt); k_++)                                                 \
		(acc)[k_] = COMB((acc)[k_], LOAD((src)[k_]))
#define ACC_WIDEN(VLOAD, T, acc, src, cnt, LOAD, COMB)                                         \
	do {                                                                                   \
		float *a_ = (acc);                                                             \
		const T *s_ = (src);                                                           \
		const int64_t c_ = (cnt);                                                      \
		const int64_t cv_ = c_ - c_ % TN_VLF;                                          \
		for (int64_t k_ = 0; k_ < cv_; k_ += TN_VLF)                                   \
			tn_vstore_f32(a_ + k_, COMB##_V(tn_vload_f32(a_ + k_), VLOAD(s_ + k_))); \
		for (int64_t k_ = cv_; k_ < c_; k_++)                                          \
			a_[k_] = COMB(a_[k_], LOAD(s_[k_]));                                   \
	} while (0)
#define ACC_F16(acc, src, cnt, LOAD, COMB)                                                     \
	ACC_WIDEN(tn_vload_f16, tn_half, acc, src, cnt, LOAD, COMB)
#define ACC_BF16(acc, src, cnt, LOAD, COMB)                                                    \
	ACC_WIDEN(tn_vload_bf16, tn_bfloat16, acc, src, cnt, LOAD, COMB)

/*
 * The cascades of @NR contiguous rows (@nb steps of LANES inputs from each of pp[0] to
 * pp[NR - 1]), leaving each row's level 0 in racc_[r]. ACC_PLAIN's is CASCADE_RUN with its
 * step in a loop, a row at a time. The floating ones (ACC_F32, ACC_F16, ACC_BF16) hold every
 * level in vector registers, LANES / TN_VLF vectors a level (the arrays on the stack were set
 * with rep stos, stored and reloaded every step and flushed through memory: a float32 sum of
 * rows of 1,000 ran at 0.8x torch's speed), and step the rows side by side: a row's
 * accumulators are one chain of dependent additions, nb long, so two rows at once do twice
 * the work in the same latency. The operations and their order are CASCADE_RUN's, lane by
 * lane and row by row, so every capability and every row count gives the same bits.
 */
#define ACC_PLAIN_ROWS(A, pp, NR, nb, LOAD, COMB, IDENT)                                       \
	A racc_[NR][LANES];                                                                    \
	for (int r_ = 0; r_ < (NR); r_++) {                                                    \
		CASCADE_RUN(A, LANES, LANES, IDENT, COMB, nb,                                  \
			    for (int64_t j_ = 0; j_ < m_; j_++, i++)                           \
				    ACC_PLAIN(acc[0], (pp)[r_] + i * LANES, LANES, LOAD, COMB)) \
		memcpy(racc_[r_], acc[0], sizeof(racc_[r_]));                                  \
	}
#define NVF ((int)(LANES / TN_VLF))
#define VSTEP(VLOAD, lv, NR, pp, i, COMB)                                                      \
	_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)                              \
		_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++) lv[r_][0][k_] =       \
			COMB##_V(lv[r_][0][k_], VLOAD((pp)[r_] + (i) * LANES + k_ * TN_VLF))
#define ACC_VROWS(VLOAD, A, pp, NR, nb, COMB, IDENT)                                           \
	A racc_[NR][LANES];                                                                    \
	{                                                                                      \
		const int lp_ = level_power(nb);                                               \
		const int64_t step_ = (int64_t)1 << lp_, mask_ = step_ - 1;                    \
		const tn_vf id_ = tn_vf_splat(IDENT);                                          \
		tn_vf lv_[NR][LEVELS][NVF];                                                    \
		_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)                      \
			_Pragma("GCC unroll 4") for (int l_ = 0; l_ < LEVELS; l_++)            \
				_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++)       \
					lv_[r_][l_][k_] = id_;                                 \
		int64_t i = 0;                                                                 \
		while (i + step_ <= (nb)) {                                                    \
			for (int64_t j_ = 0; j_ < step_; j_++, i++)                            \
				VSTEP(VLOAD, lv_, NR, pp, i, COMB);                            \
			_Pragma("GCC unroll 4") for (int l_ = 1; l_ < LEVELS; l_++) {          \
				_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)      \
					_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++) { \
						lv_[r_][l_][k_] = COMB##_V(lv_[r_][l_][k_],    \
									   lv_[r_][l_ - 1][k_]); \
						lv_[r_][l_ - 1][k_] = id_;                     \
					}                                                      \
				if ((i & (mask_ << (l_ * lp_))) != 0)                          \
					break;                                                 \
			}                                                                      \
		}                                                                              \
		for (; i < (nb); i++)                                                          \
			VSTEP(VLOAD, lv_, NR, pp, i, COMB);                                    \
		/* Fewer steps than one flush: level 0 only (CASCADE_RUN's nl_). */            \
		if ((nb) >= step_)                                                             \
			_Pragma("GCC unroll 4") for (int l_ = 1; l_ < LEVELS; l_++)            \
				_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)      \
					_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++) \
						lv_[r_][0][k_] = COMB##_V(lv_[r_][0][k_],      \
									  lv_[r_][l_][k_]);    \
		_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)                      \
			_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++)               \
				tn_vstore_f32(racc_[r_] + k_ * TN_VLF, lv_[r_][0][k_]);        \
	}
/*
 * The rows of a floating max or min (COMB MAXF or MINF): no cascade (the result of a run of
 * MAXF does not depend on how the run is grouped, but for which of +0 and -0, or of two NaNs,
 * survives: the first of the run here), and two accumulators per vector instead of one chain
 * of compare, mask and blend: the max (min) of the values that are not NaN, one maxps (minps)
 * per step (tn_vmaxf(x, m) is m unless x > m: m on a tie and on a NaN x), and beside it the
 * lane's first NaN, if any, which wins at the end as MAXF's NaN does. One instruction of
 * latency per step on the chain instead of three (amax of rows of 1,000 float32 waited on it).
 */
#define ACC_VSEL_ROWS(VLOAD, A, pp, NR, nb, COMB, IDENT)                                       \
	A racc_[NR][LANES];                                                                    \
	{                                                                                      \
		const tn_vf id_ = tn_vf_splat(IDENT);                                          \
		tn_vf m_[NR][NVF], q_[NR][NVF];                                                \
		_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)                      \
			_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++)               \
				m_[r_][k_] = q_[r_][k_] = id_;                                 \
		for (int64_t i = 0; i < (nb); i++)                                             \
			_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)              \
				_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++) {     \
					const tn_vf x_ =                                       \
						VLOAD((pp)[r_] + i * LANES + k_ * TN_VLF);     \
					m_[r_][k_] = COMB##_NN_V(x_, m_[r_][k_]);              \
					q_[r_][k_] = tn_vf_msel(tn_vf_isnan(q_[r_][k_]),       \
								q_[r_][k_], x_);               \
				}                                                              \
		_Pragma("GCC unroll 2") for (int r_ = 0; r_ < (NR); r_++)                      \
			_Pragma("GCC unroll 8") for (int k_ = 0; k_ < NVF; k_++)               \
				tn_vstore_f32(racc_[r_] + k_ * TN_VLF,                         \
					      tn_vf_msel(tn_vf_isnan(q_[r_][k_]), q_[r_][k_],  \
							 m_[r_][k_]));                         \
	}
/* Sums and products take the cascade; max and min (MAXF_ROWS_, MINF_ROWS_) ACC_VSEL_ROWS. */
#define ACC_VROWS_OF_(VLOAD, A, pp, NR, nb, COMB, IDENT)                                       \
	COMB##_ROWS_(VLOAD, A, pp, NR, nb, COMB, IDENT)
#define ADD_ROWS_ ACC_VROWS
#define MUL_ROWS_ ACC_VROWS
#define MAXF_ROWS_ ACC_VSEL_ROWS
#define MINF_ROWS_ ACC_VSEL_ROWS
#define ACC_F32_ROWS(A, pp, NR, nb, LOAD, COMB, IDENT)                                         \
	ACC_VROWS_OF_(tn_vload_f32, A, pp, NR, nb, COMB, IDENT)
#define ACC_F16_ROWS(A, pp, NR, nb, LOAD, COMB, IDENT)                                         \
	ACC_VROWS_OF_(tn_vload_f16, A, pp, NR, nb, COMB, IDENT)
#define ACC_BF16_ROWS(A, pp, NR, nb, LOAD, COMB, IDENT)                                        \
	ACC_VROWS_OF_(tn_vload_bf16, A, pp, NR, nb, COMB, IDENT)

/*
 * Four steps at once: rows r0 to r3 (@cnt contiguous inputs each) combined into acc[k] in
 * that order, so the same operations as four ACC steps, with four input streams in flight
 * instead of one (a column reduction waited on each row's first lines: two threads summing
 * halves of every row ran slower than one summing whole rows).
 */
#define ACC_PLAIN_4(acc, r0, r1, r2, r3, cnt, LOAD, COMB)                                      \
	for (int64_t k_ = 0; k_ < (cnt); k_++) {                                               \
		__typeof__((acc)[0]) t_ = COMB((acc)[k_], LOAD((r0)[k_]));                     \
		t_ = COMB(t_, LOAD((r1)[k_]));                                                 \
		t_ = COMB(t_, LOAD((r2)[k_]));                                                 \
		(acc)[k_] = COMB(t_, LOAD((r3)[k_]));                                          \
	}
#define ACC_WIDEN_4(VLOAD, acc, r0, r1, r2, r3, cnt, LOAD, COMB)                                \
	do {                                                                                   \
		float *a_ = (acc);                                                             \
		const int64_t c_ = (cnt);                                                      \
		const int64_t cv_ = c_ - c_ % TN_VLF;                                          \
		for (int64_t k_ = 0; k_ < cv_; k_ += TN_VLF) {                                 \
			tn_vf v_ = COMB##_V(tn_vload_f32(a_ + k_), VLOAD((r0) + k_));          \
			v_ = COMB##_V(v_, VLOAD((r1) + k_));                                   \
			v_ = COMB##_V(v_, VLOAD((r2) + k_));                                   \
			tn_vstore_f32(a_ + k_, COMB##_V(v_, VLOAD((r3) + k_)));                \
		}                                                                              \
		for (int64_t k_ = cv_; k_ < c_; k_++) {                                        \
			float t_ = COMB(a_[k_], LOAD((r0)[k_]));                               \
			t_ = COMB(t_, LOAD((r1)[k_]));                                         \
			t_ = COMB(t_, LOAD((r2)[k_]));                                         \
			a_[k_] = COMB(t_, LOAD((r3)[k_]));                                     \
		}                                                                              \
	} while (0)
#define ACC_F32(acc, src, cnt, LOAD, COMB) ACC_WIDEN(tn_vload_f32, float, acc, src, cnt, LOAD, COMB)
#define ACC_F32_4(acc, r0, r1, r2, r3, cnt, LOAD, COMB)                                         \
	ACC_WIDEN_4(tn_vload_f32, acc, r0, r1, r2, r3, cnt, LOAD, COMB)
#define ACC_F16_4(acc, r0, r1, r2, r3, cnt, LOAD, COMB)                                         \
	ACC_WIDEN_4(tn_vload_f16, acc, r0, r1, r2, r3, cnt, LOAD, COMB)
#define ACC_BF16_4(acc, r0, r1, r2, r3, cnt, LOAD, COMB)                                        \
	ACC_WIDEN_4(tn_vload_bf16, acc, r0, r1, r2, r3, cnt, LOAD, COMB)

/*
 * A run of the column path's rows (CASCADE_RUN). Whole rows one after the other are one
 * sequential stream, best read one row at a time (four at a time took twice as long on one
 * thread); a part of each row (the columns of one thread, or a block of a wide row) is a short
 * stream per row, and four at a time overlap their starts (two threads summing the halves of
 * [10000, 1000] float32 rows: 2.1 -> 1.3 ms). Either way the same operations in the same
 * order.
 */
#define ROW_AT(T, p, srow, r) ((const T *)((const char *)(p) + (r) * (srow)))
#define COLS_RUN(T, p, srow, nc, LOAD, COMB, ACC, ACC4)                                         \
	do {                                                                                   \
		int64_t j_ = 0;                                                                \
		if ((int64_t)(nc) * (int64_t)sizeof(T) != (srow))                              \
			for (; j_ + 4 <= m_; j_ += 4, i += 4)                                  \
				ACC4(acc[0], ROW_AT(T, p, srow, i), ROW_AT(T, p, srow, i + 1), \
				     ROW_AT(T, p, srow, i + 2), ROW_AT(T, p, srow, i + 3), nc, \
				     LOAD, COMB);                                              \
		for (; j_ < m_; j_++, i++)                                                     \
			ACC(acc[0], ROW_AT(T, p, srow, i), nc, LOAD, COMB);                    \
	} while (0)

/*
 * One reducer: input elements T loaded as A by LOAD, combined by COMB from IDENT, and combined
 * into output elements O (read with LOADO, written with STOREO).
 */
#define DEFINE_REDUCER_ACC(NAME, T, A, O, LOAD, LOADO, STOREO, COMB, IDENT, ACC)                \
	/* A contiguous row's result from its LANES accumulators @acc (nb steps) and the      \
	 * tail of @p's @n elements. */                                                        \
	static inline A NAME##_finish(A *acc, const T *p, int64_t nb, int64_t n)               \
	{                                                                                      \
		for (int w = LANES / 2; w > 0; w /= 2)                                         \
			for (int k = 0; k < w; k++)                                            \
				acc[k] = COMB(acc[k], acc[k + w]);                             \
		A r = acc[0];                                                                  \
		for (int64_t i = nb * LANES; i < n; i++)                                       \
			r = COMB(r, LOAD(p[i]));                                               \
		return r;                                                                      \
	}                                                                                      \
	/* Two contiguous rows of @n elements, side by side: each result as NAME##_row's. */  \
	static inline void NAME##_row2(const char *x0, const char *x1, int64_t n, A *r)        \
	{                                                                                      \
		const int64_t nb = n / LANES;                                                  \
		const T *pp[2] = { (const T *)x0, (const T *)x1 };                             \
		ACC##_ROWS(A, pp, 2, nb, LOAD, COMB, IDENT)                                    \
		r[0] = NAME##_finish(racc_[0], pp[0], nb, n);                                  \
		r[1] = NAME##_finish(racc_[1], pp[1], nb, n);                                  \
	}                                                                                      \
	/* @n elements @s bytes apart, LANES at a time, with the cascade. */                   \
	static inline A NAME##_row(const char *x, int64_t s, int64_t n)                        \
	{                                                                                      \
		const int64_t nb = n / LANES;                                                  \
		if (s == (int64_t)sizeof(T)) {                                                 \
			const T *pp[1] = { (const T *)x };                                     \
			ACC##_ROWS(A, pp, 1, nb, LOAD, COMB, IDENT)                            \
			return NAME##_finish(racc_[0], pp[0], nb, n);                          \
		}                                                                              \
		CASCADE(A, LANES, IDENT, COMB, nb,                                             \
			for (int k = 0; k < LANES; k++) acc[0][k] = COMB(                      \
				acc[0][k], LOAD(*(const T *)(x + (i * LANES + k) * s))))       \
		for (int w = LANES / 2; w > 0; w /= 2)                                         \
			for (int k = 0; k < w; k++)                                            \
				acc[0][k] = COMB(acc[0][k], acc[0][k + w]);                    \
		A r = acc[0][0];                                                               \
		for (int64_t i = nb * LANES; i < n; i++)                                       \
			r = COMB(r, LOAD(*(const T *)(x + i * s)));                            \
		return r;                                                                      \
	}                                                                                      \
	/* Columns: @ncols contiguous inputs per row, @nrows rows @srow bytes apart, into outputs \
	 * @so bytes apart; up to COLS columns at a time, walking the rows with a contiguous run \
	 * of COLS elements from each (the accumulators stay in the L1 cache). */              \
	static void NAME##_cols(char *out, int64_t so, const char *in, int64_t srow, int64_t nrows, \
				int64_t ncols)                                                 \
	{                                                                                      \
		for (int64_t c0 = 0; c0 < ncols; c0 += COLS) {                                 \
			const int nc = ncols - c0 < COLS ? (int)(ncols - c0) : COLS;           \
			const T *p = (const T *)in + c0;                                       \
			CASCADE_RUN(A, COLS, nc, IDENT, COMB, nrows,                           \
				    COLS_RUN(T, p, srow, nc, LOAD, COMB, ACC, ACC##_4))        \
			if (so == (int64_t)sizeof(O)) { /* a vector loop */                    \
				O *o = (O *)out + c0;                                          \
				for (int k = 0; k < nc; k++)                                   \
					o[k] = STOREO(COMB(LOADO(o[k]), acc[0][k]));           \
			} else {                                                               \
				for (int k = 0; k < nc; k++) {                                 \
					O *o = (O *)(out + (c0 + k) * so);                     \
					*o = STOREO(COMB(LOADO(*o), acc[0][k]));               \
				}                                                              \
			}                                                                      \
		}                                                                              \
	}                                                                                      \
	static void NAME(char *out, const int64_t *os_, const char *in, const int64_t *is_,    \
			 int64_t n0, int64_t n1)                                               \
	{                                                                                      \
		int64_t os0 = os_[0], os1 = os_[1], is0 = is_[0], is1 = is_[1], t;             \
		/* The reduced dimension first (ATen's cascade_sum). */                        \
		if (os0 != 0 && os1 == 0) {                                                    \
			t = os0, os0 = os1, os1 = t;                                           \
			t = is0, is0 = is1, is1 = t;                                           \
			t = n0, n0 = n1, n1 = t;                                               \
		}                                                                              \
		if (os0 != 0) { /* nothing reduced in this step */                             \
			for (int64_t j = 0; j < n1; j++)                                       \
				for (int64_t i = 0; i < n0; i++) {                             \
					O *o = (O *)(out + i * os0 + j * os1);                 \
					*o = STOREO(COMB(LOADO(*o),                            \
							 LOAD(*(const T *)(in + i * is0 +      \
									   j * is1)))); \
				}                                                              \
			return;                                                                \
		}                                                                              \
		if (is0 != (int64_t)sizeof(T) && is1 == (int64_t)sizeof(T) && os1 != 0 &&     \
		    n1 > 1) {                                                                  \
			NAME##_cols(out, os1, in, is0, n0, n1);                                \
			return;                                                                \
		}                                                                              \
		const int64_t rb_ = n0 * (int64_t)sizeof(T);                                   \
		const bool pf_ = is0 == (int64_t)sizeof(T) && rb_ <= PREFETCH_ROW_BYTES &&     \
				 n1 * rb_ >= PREFETCH_MIN_BYTES;                               \
		int64_t j = 0;                                                                 \
		if (is0 == (int64_t)sizeof(T) && n0 >= LANES)                                  \
			for (; j + 2 <= n1; j += 2) {                                          \
				if (pf_)                                                       \
					prefetch_rows(in, is1, rb_, j + 2, j + 4, n1);         \
				A r_[2];                                                       \
				NAME##_row2(in + j * is1, in + (j + 1) * is1, n0, r_);         \
				O *o = (O *)(out + j * os1);                                   \
				*o = STOREO(COMB(LOADO(*o), r_[0]));                           \
				o = (O *)(out + (j + 1) * os1);                                \
				*o = STOREO(COMB(LOADO(*o), r_[1]));                           \
			}                                                                      \
		for (; j < n1; j++) {                                                          \
			if (pf_)                                                               \
				prefetch_rows(in, is1, rb_, j + 1, j + 2, n1);                 \
			O *o = (O *)(out + j * os1);                                           \
			*o = STOREO(COMB(LOADO(*o), NAME##_row(in + j * is1, is0, n0)));       \
		}                                                                              \
	}

/* The reducers whose contiguous steps are ACC_PLAIN's loop. */
#define DEFINE_REDUCER(NAME, T, A, O, LOAD, LOADO, STOREO, COMB, IDENT)                         \
	DEFINE_REDUCER_ACC(NAME, T, A, O, LOAD, LOADO, STOREO, COMB, IDENT, ACC_PLAIN)

#define ID(v) (v)
#define HALF_F(v) tn__h2f(v)
#define BF16_F(v) tn__bf2f(v)
#define F_HALF(v) tn__f2h(v)
#define F_BF16(v) tn__f2bf(v)
/* Nonzero test of a 16-bit float's bits (either zero counts as zero). */
#define NZ16(v) ((uint8_t)(((v).bits & 0x7fff) != 0))
#define NZ(v) ((uint8_t)((v) != 0))

#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define OR(a, b) ((a) | (b))
#define AND(a, b) ((a) & (b))
/* Floating max and min: NaN wins and stays (a != a), as PyTorch's max and min propagate it. */
#define MAXF(a, b) (((a) >= (b) || (a) != (a)) ? (a) : (b))
#define MINF(a, b) (((a) <= (b) || (a) != (a)) ? (a) : (b))
/* The floating combinations on tn_vf vectors (ACC_WIDEN). */
#define ADD_V(a, b) ((a) + (b))
#define MUL_V(a, b) ((a) * (b))
static inline tn_vf maxf_v(tn_vf a, tn_vf b)
{
	return tn_vf_msel(tn_vf_ge(a, b) | tn_vf_isnan(a), a, b);
}
static inline tn_vf minf_v(tn_vf a, tn_vf b)
{
	return tn_vf_msel(tn_vf_le(a, b) | tn_vf_isnan(a), a, b);
}
#define MAXF_V maxf_v
#define MINF_V minf_v
/* MAXF and MINF of an accumulator @a that is not NaN and an input @x that is not NaN (a on a
 * tie, a where x is NaN). */
#define MAXF_NN_V(x, a) tn_vmaxf(x, a)
#define MINF_NN_V(x, a) tn_vminf(x, a)
#define MAXI(a, b) ((a) >= (b) ? (a) : (b))
#define MINI(a, b) ((a) <= (b) ? (a) : (b))
/* Integer arithmetic wraps (two's complement): computed unsigned, in at least 32 bits. */

#define ADD_I8(a, b) ((int8_t)(uint8_t)((unsigned)(uint8_t)(a) + (unsigned)(uint8_t)(b)))
#define ADD_U8(a, b) ((uint8_t)((unsigned)(a) + (unsigned)(b)))
#define ADD_I16(a, b) ((int16_t)(uint16_t)((unsigned)(uint16_t)(a) + (unsigned)(uint16_t)(b)))
#define ADD_I32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_I64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define MUL_I8(a, b) ((int8_t)(uint8_t)((uint32_t)(uint8_t)(a) * (uint32_t)(uint8_t)(b)))
#define MUL_U8(a, b) ((uint8_t)((uint32_t)(a) * (uint32_t)(b)))
#define MUL_I16(a, b) ((int16_t)(uint16_t)((uint32_t)(uint16_t)(a) * (uint32_t)(uint16_t)(b)))
#define MUL_I32(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define MUL_I64(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))

/* sum (bool: "or", as PyTorch adds bools) */
DEFINE_REDUCER(sum_TN_BOOL, bool, bool, bool, ID, ID, ID, OR, false)
DEFINE_REDUCER(sum_TN_UINT8, uint8_t, uint8_t, uint8_t, ID, ID, ID, ADD_U8, 0)
DEFINE_REDUCER(sum_TN_INT8, int8_t, int8_t, int8_t, ID, ID, ID, ADD_I8, 0)
DEFINE_REDUCER(sum_TN_INT16, int16_t, int16_t, int16_t, ID, ID, ID, ADD_I16, 0)
DEFINE_REDUCER(sum_TN_INT32, int32_t, int32_t, int32_t, ID, ID, ID, ADD_I32, 0)
DEFINE_REDUCER(sum_TN_INT64, int64_t, int64_t, int64_t, ID, ID, ID, ADD_I64, 0)
DEFINE_REDUCER_ACC(sum_TN_FLOAT16, tn_half, float, float, HALF_F, ID, ID, ADD, 0.0f, ACC_F16)
DEFINE_REDUCER_ACC(sum_TN_BFLOAT16, tn_bfloat16, float, float, BF16_F, ID, ID, ADD, 0.0f,
		   ACC_BF16)
DEFINE_REDUCER_ACC(sum_TN_FLOAT32, float, float, float, ID, ID, ID, ADD, 0.0f, ACC_F32)
DEFINE_REDUCER(sum_TN_FLOAT64, double, double, double, ID, ID, ID, ADD, 0.0)
/* prod (bool: "and") */
DEFINE_REDUCER(prod_TN_BOOL, bool, bool, bool, ID, ID, ID, AND, true)
DEFINE_REDUCER(prod_TN_UINT8, uint8_t, uint8_t, uint8_t, ID, ID, ID, MUL_U8, 1)
DEFINE_REDUCER(prod_TN_INT8, int8_t, int8_t, int8_t, ID, ID, ID, MUL_I8, 1)
DEFINE_REDUCER(prod_TN_INT16, int16_t, int16_t, int16_t, ID, ID, ID, MUL_I16, 1)
DEFINE_REDUCER(prod_TN_INT32, int32_t, int32_t, int32_t, ID, ID, ID, MUL_I32, 1)
DEFINE_REDUCER(prod_TN_INT64, int64_t, int64_t, int64_t, ID, ID, ID, MUL_I64, 1)
DEFINE_REDUCER_ACC(prod_TN_FLOAT16, tn_half, float, float, HALF_F, ID, ID, MUL, 1.0f, ACC_F16)
DEFINE_REDUCER_ACC(prod_TN_BFLOAT16, tn_bfloat16, float, float, BF16_F, ID, ID, MUL, 1.0f,
		   ACC_BF16)
DEFINE_REDUCER_ACC(prod_TN_FLOAT32, float, float, float, ID, ID, ID, MUL, 1.0f, ACC_F32)
DEFINE_REDUCER(prod_TN_FLOAT64, double, double, double, ID, ID, ID, MUL, 1.0)
/* max and min: the output keeps the input's dtype; 16-bit floats compare as float */
#define MINMAX(OPN, C, CF, IDF, IDI8, IDU8, IDI16, IDI32, IDI64, IDB)                              \
	DEFINE_REDUCER(OPN##_TN_BOOL, bool, bool, bool, ID, ID, ID, C, IDB)                          \
	DEFINE_REDUCER(OPN##_TN_UINT8, uint8_t, uint8_t, uint8_t, ID, ID, ID, C, IDU8)               \
	DEFINE_REDUCER(OPN##_TN_INT8, int8_t, int8_t, int8_t, ID, ID, ID, C, IDI8)                  \
	DEFINE_REDUCER(OPN##_TN_INT16, int16_t, int16_t, int16_t, ID, ID, ID, C, IDI16)             \
	DEFINE_REDUCER(OPN##_TN_INT32, int32_t, int32_t, int32_t, ID, ID, ID, C, IDI32)             \
	DEFINE_REDUCER(OPN##_TN_INT64, int64_t, int64_t, int64_t, ID, ID, ID, C, IDI64)             \
	DEFINE_REDUCER_ACC(OPN##_TN_FLOAT16, tn_half, float, tn_half, HALF_F, HALF_F, F_HALF, CF,  \
			   IDF, ACC_F16)                                                           \
	DEFINE_REDUCER_ACC(OPN##_TN_BFLOAT16, tn_bfloat16, float, tn_bfloat16, BF16_F, BF16_F,     \
			   F_BF16, CF, IDF, ACC_BF16)                                              \
	DEFINE_REDUCER_ACC(OPN##_TN_FLOAT32, float, float, float, ID, ID, ID, CF, IDF, ACC_F32)     \
	DEFINE_REDUCER(OPN##_TN_FLOAT64, double, double, double, ID, ID, ID, CF, (double)IDF)
MINMAX(max, MAXI, MAXF, -INFINITY, INT8_MIN, 0, INT16_MIN, INT32_MIN, INT64_MIN, false)
MINMAX(min, MINI, MINF, INFINITY, INT8_MAX, UINT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX, true)
/* all and any: 0/1 bytes from any input dtype */
#define LOGICAL(OPN, C, IDENT)                                                                 \
	DEFINE_REDUCER(OPN##_TN_BOOL, bool, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)                  \
	DEFINE_REDUCER(OPN##_TN_UINT8, uint8_t, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)              \
	DEFINE_REDUCER(OPN##_TN_INT8, int8_t, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)               \
	DEFINE_REDUCER(OPN##_TN_INT16, int16_t, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)             \
	DEFINE_REDUCER(OPN##_TN_INT32, int32_t, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)             \
	DEFINE_REDUCER(OPN##_TN_INT64, int64_t, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)             \
	DEFINE_REDUCER(OPN##_TN_FLOAT16, tn_half, uint8_t, uint8_t, NZ16, ID, ID, C, IDENT)           \
	DEFINE_REDUCER(OPN##_TN_BFLOAT16, tn_bfloat16, uint8_t, uint8_t, NZ16, ID, ID, C, IDENT)      \
	DEFINE_REDUCER(OPN##_TN_FLOAT32, float, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)               \
	DEFINE_REDUCER(OPN##_TN_FLOAT64, double, uint8_t, uint8_t, NZ, ID, ID, C, IDENT)
LOGICAL(all, AND, 1)
LOGICAL(any, OR, 0)

typedef void (*reducer_fn)(char *, const int64_t *, const char *, const int64_t *, int64_t,
			   int64_t);

/* [dtype][op]: one row per dtype of the dtype list, so a dtype without its reducers does not
 * compile, and each op at its enum tn__redop index. */
#define TN_REDUCER_ROW_(e, ctype, name, size, cat, sgn)                                        \
	[e] = { [TN_RED_SUM] = sum_##e, [TN_RED_PROD] = prod_##e, [TN_RED_MAX] = max_##e,     \
		[TN_RED_MIN] = min_##e, [TN_RED_ALL] = all_##e, [TN_RED_ANY] = any_##e },
static const reducer_fn reducers[TN_NUM_DTYPES][TN_RED_ANY + 1] = {
	TN_DTYPE_LIST(TN_REDUCER_ROW_)
};
#undef TN_REDUCER_ROW_

void TN_KERNEL_FN(tn__reduce_kernel)(int op, enum tn_dtype dt, char *out,
				       const int64_t *out_strides, const char *in,
				       const int64_t *in_strides, int64_t size0, int64_t size1)
{
	if ((unsigned)op > TN_RED_ANY || (unsigned)dt >= TN_NUM_DTYPES)
		return;
	reducers[dt][op](out, out_strides, in, in_strides, size0, size1);
}

/* ---- argmax / argmin ---- */

#define ARG_COLS 64 /* outputs per block of an index reduction over an outer dimension */
#define ARG_LANES 16 /* running bests of a contiguous row */

/* x beats the best so far b: strictly larger (smaller), or the first NaN. Ties keep the first. */
#define BEATS_MAX(x, b) ((x) > (b) || ((x) != (x) && (b) == (b)))
#define BEATS_MIN(x, b) ((x) < (b) || ((x) != (x) && (b) == (b)))
#define BEATS_MAX_I(x, b) ((x) > (b))
#define BEATS_MIN_I(x, b) ((x) < (b))

#define DEFINE_ARG(NAME, T, A, LOAD, BEATS)                                                    \
	static void NAME(const char *in, int64_t s_red, int64_t nred, int64_t s_out,           \
			 int64_t nout, char *vals, int64_t s_vals, char *idx, int64_t s_idx,   \
			 int64_t base)                                                         \
	{                                                                                      \
		/* Outputs adjacent in memory and rows far apart (a reduction over an outer   \
		 * dimension): ARG_COLS outputs at a time, walking the rows once. */               \
		if (s_out == (int64_t)sizeof(T) && s_red != s_out && nout >= ARG_COLS) {            \
			int64_t j0 = 0;                                                        \
			for (; j0 + ARG_COLS <= nout; j0 += ARG_COLS) {                                \
				A best[ARG_COLS];                                                  \
				int64_t at[ARG_COLS];                                              \
				const T *p = (const T *)in + j0;                               \
				for (int k = 0; k < ARG_COLS; k++) {                               \
					best[k] = LOAD(p[k]);                                  \
					at[k] = 0;                                             \
				}                                                              \
				for (int64_t r = 1; r < nred; r++) {                           \
					const T *q = (const T *)((const char *)p + r * s_red); \
					for (int k = 0; k < ARG_COLS; k++) {                       \
						A x = LOAD(q[k]);                              \
						bool w = BEATS(x, best[k]);                    \
						best[k] = w ? x : best[k];                     \
						at[k] = w ? r : at[k];                         \
					}                                                      \
				}                                                              \
				for (int k = 0; k < ARG_COLS; k++) {                               \
					if (vals)                                              \
						*(T *)(vals + (j0 + k) * s_vals) =             \
							*(const T *)((const char *)(p + k) +    \
								     at[k] * s_red);            \
					*(int64_t *)(idx + (j0 + k) * s_idx) = at[k] + base;   \
				}                                                              \
			}                                                                      \
			if (j0 < nout)                                                         \
				NAME(in + j0 * s_out, s_red, nred, s_out, nout - j0,           \
				     vals ? vals + j0 * s_vals : NULL, s_vals, idx + j0 * s_idx, \
				     s_idx, base);                                             \
			return;                                                                \
		}                                                                              \
		/* Contiguous rows: ARG_LANES running bests, one per lane (the first of       \
		 * equals kept in each), then the lanes' best, the lowest index among equals   \
		 * (NaNs are equal), then the tail, whose indices are all larger. */           \
		if (s_red == (int64_t)sizeof(T) && nred >= 2 * ARG_LANES) {                    \
			for (int64_t j = 0; j < nout; j++) {                                   \
				const T *p = (const T *)(in + j * s_out);                      \
				A best[ARG_LANES];                                             \
				int64_t at[ARG_LANES];                                         \
				for (int k = 0; k < ARG_LANES; k++) {                          \
					best[k] = LOAD(p[k]);                                  \
					at[k] = k;                                             \
				}                                                              \
				int64_t i = ARG_LANES;                                         \
				for (; i + ARG_LANES <= nred; i += ARG_LANES)                  \
					for (int k = 0; k < ARG_LANES; k++) {                  \
						A x = LOAD(p[i + k]);                          \
						bool w = BEATS(x, best[k]);                    \
						best[k] = w ? x : best[k];                     \
						at[k] = w ? i + k : at[k];                     \
					}                                                      \
				A b = best[0];                                                 \
				int64_t a = at[0];                                             \
				for (int k = 1; k < ARG_LANES; k++) {                          \
					bool same = best[k] == b ||                            \
						    (best[k] != best[k] && b != b);            \
					if (BEATS(best[k], b) || (same && at[k] < a)) {        \
						b = best[k];                                   \
						a = at[k];                                     \
					}                                                      \
				}                                                              \
				for (; i < nred; i++) {                                        \
					A x = LOAD(p[i]);                                      \
					if (BEATS(x, b)) {                                     \
						b = x;                                         \
						a = i;                                         \
					}                                                      \
				}                                                              \
				if (vals)                                                      \
					*(T *)(vals + j * s_vals) = p[a];                      \
				*(int64_t *)(idx + j * s_idx) = a + base;                      \
			}                                                                      \
			return;                                                                \
		}                                                                              \
		for (int64_t j = 0; j < nout; j++) {                                           \
			const char *row = in + j * s_out;                                      \
			A best = LOAD(*(const T *)row);                                        \
			int64_t at = 0;                                                        \
			for (int64_t r = 1; r < nred; r++) {                                   \
				A x = LOAD(*(const T *)(row + r * s_red));                     \
				if (BEATS(x, best)) {                                          \
					best = x;                                              \
					at = r;                                                \
				}                                                              \
			}                                                                      \
			if (vals)                                                              \
				*(T *)(vals + j * s_vals) = *(const T *)(row + at * s_red);    \
			*(int64_t *)(idx + j * s_idx) = at + base;                             \
		}                                                                              \
	}

#define ARGS(OPN, BEATS_I, BEATS)                                                              \
	DEFINE_ARG(OPN##_TN_BOOL, bool, int, ID, BEATS_I)                                            \
	DEFINE_ARG(OPN##_TN_UINT8, uint8_t, uint8_t, ID, BEATS_I)                                    \
	DEFINE_ARG(OPN##_TN_INT8, int8_t, int8_t, ID, BEATS_I)                                      \
	DEFINE_ARG(OPN##_TN_INT16, int16_t, int16_t, ID, BEATS_I)                                   \
	DEFINE_ARG(OPN##_TN_INT32, int32_t, int32_t, ID, BEATS_I)                                   \
	DEFINE_ARG(OPN##_TN_INT64, int64_t, int64_t, ID, BEATS_I)                                   \
	DEFINE_ARG(OPN##_TN_FLOAT16, tn_half, float, HALF_F, BEATS)                                   \
	DEFINE_ARG(OPN##_TN_BFLOAT16, tn_bfloat16, float, BF16_F, BEATS)                              \
	DEFINE_ARG(OPN##_TN_FLOAT32, float, float, ID, BEATS)                                         \
	DEFINE_ARG(OPN##_TN_FLOAT64, double, double, ID, BEATS)
ARGS(argmax, BEATS_MAX_I, BEATS_MAX)
ARGS(argmin, BEATS_MIN_I, BEATS_MIN)

typedef void (*arg_fn)(const char *, int64_t, int64_t, int64_t, int64_t, char *, int64_t, char *,
		       int64_t, int64_t);
/* [dtype][0: argmax, 1: argmin], one row per dtype of the dtype list. */
#define TN_ARG_ROW_(e, ctype, name, size, cat, sgn) [e] = { argmax_##e, argmin_##e },
static const arg_fn args[TN_NUM_DTYPES][2] = { TN_DTYPE_LIST(TN_ARG_ROW_) };
#undef TN_ARG_ROW_

void TN_KERNEL_FN(tn__argreduce_kernel)(int op, enum tn_dtype dt, const char *in, int64_t s_red,
					  int64_t nred, int64_t s_out, int64_t nout, char *vals,
					  int64_t s_vals, char *idx, int64_t s_idx, int64_t base)
{
	if ((op != TN_RED_MAX && op != TN_RED_MIN) || (unsigned)dt >= TN_NUM_DTYPES || nred < 1)
		return;
	args[dt][op == TN_RED_MIN](in, s_red, nred, s_out, nout, vals, s_vals, idx, s_idx, base);
}
