/* SPDX-License-Identifier: MIT */
/*
 * The random-number core (libtensor/generator.c) against torch 1.13.1, bit for bit.
 *
 * Replays every case of tests/golden/random_golden.h (gen_random.py) on a struct tn__mt19937
 * and compares each value's bits; prints the first mismatches and exits 1 when there is any.
 * It needs nothing but the core:
 *     gcc -O2 -std=gnu11 -Wall -Wextra -I libtensor tests/check_random_core.c \
 *         libtensor/generator.c -lm
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator.h"
#include "golden/random_golden.h"

#define MAX_REPORTS 20

static int failures;

static void fail(const char *fmt, const char *name, size_t call, const char *op, const char *dtype,
		 size_t i, uint64_t want, uint64_t got)
{
	if (++failures <= MAX_REPORTS) {
		printf("FAIL %s call %zu (%s %s) [%zu]: want 0x%016" PRIx64 " got 0x%016" PRIx64
		       "%s\n",
		       name, call, op, dtype, i, want, got, fmt);
	}
}

static uint64_t bits_f32(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static uint64_t bits_f64(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

enum dt {
	F32,
	F64,
	I64,
	I32,
	I16,
	I8,
	U8,
	BOOL,
	NDT
};

static enum dt dtype_of(const char *s)
{
	static const char *names[NDT] = { "float32", "float64", "int64", "int32",
					  "int16",   "int8",	"uint8", "bool" };
	for (int i = 0; i < NDT; i++)
		if (!strcmp(s, names[i]))
			return (enum dt)i;
	fprintf(stderr, "unknown dtype %s\n", s);
	exit(2);
}

/* Runs one call into buf (8 bytes per element, room for n); returns 0 or a negative code. */
static int run_call(struct tn__mt19937 *g, const struct random_call *c, enum dt dt, void *buf,
		    enum tn__rng_isa isa)
{
	const char *op = c->op;
	size_t n = c->n;
	float *f = buf;
	double *d = buf;
	int64_t *l = buf;
	int32_t *w = buf;

	if (!strcmp(op, "rand")) {
		if (dt == F32)
			return tn__rand_fill_f32(g, f, n, c->a, c->b, isa);
		if (dt == F64)
			return tn__rand_fill_f64(g, d, n, c->a, c->b, isa);
	} else if (!strcmp(op, "randn")) {
		if (dt == F32)
			return tn__randn_fill_f32(g, f, n, c->a, c->b, isa);
		if (dt == F64)
			return tn__randn_fill_f64(g, d, n, c->a, c->b, isa);
	} else if (!strcmp(op, "randint")) {
		switch (dt) {
		case F32:
			return tn__randint_fill_f32(g, f, n, c->lo, c->hi);
		case F64:
			return tn__randint_fill_f64(g, d, n, c->lo, c->hi);
		case I64:
			return tn__randint_fill_i64(g, l, n, c->lo, c->hi);
		case I32:
			return tn__randint_fill_i32(g, w, n, c->lo, c->hi);
		case I16:
			return tn__randint_fill_i16(g, buf, n, c->lo, c->hi);
		case I8:
			return tn__randint_fill_i8(g, buf, n, c->lo, c->hi);
		case U8:
			return tn__randint_fill_u8(g, buf, n, c->lo, c->hi);
		default:
			break;
		}
	} else if (!strcmp(op, "random")) {
		switch (dt) {
		case F32:
			tn__random_fill_f32(g, f, n);
			return 0;
		case F64:
			tn__random_fill_f64(g, d, n);
			return 0;
		case I64:
			tn__random_fill_i64(g, l, n);
			return 0;
		case I32:
			tn__random_fill_i32(g, w, n);
			return 0;
		case BOOL:
			tn__random_fill_bool(g, buf, n);
			return 0;
		default:
			break;
		}
	} else if (!strcmp(op, "random_full")) {
		switch (dt) {
		case F32:
			tn__random_full_fill_f32(g, f, n);
			return 0;
		case F64:
			tn__random_full_fill_f64(g, d, n);
			return 0;
		case I64:
			tn__random_full_fill_i64(g, l, n);
			return 0;
		default:
			break;
		}
	} else if (!strcmp(op, "bernoulli")) {
		switch (dt) {
		case F32:
			return tn__bernoulli_fill_f32(g, f, n, c->a);
		case F64:
			return tn__bernoulli_fill_f64(g, d, n, c->a);
		case I64:
			return tn__bernoulli_fill_i64(g, l, n, c->a);
		case U8:
			return tn__bernoulli_fill_u8(g, buf, n, c->a);
		case BOOL:
			return tn__bernoulli_fill_bool(g, buf, n, c->a);
		default:
			break;
		}
	} else if (!strcmp(op, "bernoulli_t")) {
		/* p[i] = ((i * 37) % 101) / 100.0, rounded to the dtype, as gen_random.py. */
		if (dt == F32) {
			float *p = malloc((n ? n : 1) * sizeof(*p));
			for (size_t i = 0; i < n; i++)
				p[i] = (float)((double)((i * 37) % 101) / 100.0);
			tn__bernoulli_tensor_fill_f32(g, f, p, n);
			free(p);
			return 0;
		}
		if (dt == F64) {
			double *p = malloc((n ? n : 1) * sizeof(*p));
			for (size_t i = 0; i < n; i++)
				p[i] = (double)((i * 37) % 101) / 100.0;
			tn__bernoulli_tensor_fill_f64(g, d, p, n);
			free(p);
			return 0;
		}
	} else if (!strcmp(op, "randperm")) {
		switch (dt) {
		case F32:
			tn__randperm_f32(g, f, n);
			return 0;
		case F64:
			tn__randperm_f64(g, d, n);
			return 0;
		case I64:
			tn__randperm_i64(g, l, n);
			return 0;
		case I32:
			tn__randperm_i32(g, w, n);
			return 0;
		default:
			break;
		}
	}
	fprintf(stderr, "no core function for %s %s\n", op, c->dtype);
	exit(2);
}

static uint64_t element_bits(const void *buf, enum dt dt, size_t i)
{
	switch (dt) {
	case F32:
		return bits_f32(((const float *)buf)[i]);
	case F64:
		return bits_f64(((const double *)buf)[i]);
	case I64:
		return (uint64_t)((const int64_t *)buf)[i];
	case I32:
		return (uint64_t)(int64_t)((const int32_t *)buf)[i];
	case I16:
		return (uint64_t)(int64_t)((const int16_t *)buf)[i];
	case I8:
		return (uint64_t)(int64_t)((const int8_t *)buf)[i];
	case U8:
		return ((const uint8_t *)buf)[i];
	case BOOL:
		return ((const bool *)buf)[i];
	default:
		return 0;
	}
}

static void run_case(const struct random_case *rc, size_t *ncompared)
{
	struct tn__mt19937 g;

	if (rc->has_seed)
		tn__mt_seed(&g, rc->seed);
	else
		tn__mt_init(&g);
	if (tn__mt_initial_seed(&g) != rc->initial_seed)
		fail("", rc->name, 0, "initial_seed", "", 0, rc->initial_seed,
		     tn__mt_initial_seed(&g));

	for (size_t k = 0; k < rc->ncalls; k++) {
		const struct random_call *c = &random_calls[rc->first_call + k];
		enum dt dt = dtype_of(c->dtype);
		uint64_t *buf = calloc(c->n + 1, sizeof(uint64_t));
		int rv = run_call(&g, c, dt, buf, (enum tn__rng_isa)rc->isa);
		if (rv != 0) {
			fail(" (the call failed)", rc->name, k, c->op, c->dtype, 0, 0,
			     (uint64_t)rv);
		} else {
			for (size_t i = 0; i < c->n; i++) {
				uint64_t want = random_values[c->offset + i];
				uint64_t got = element_bits(buf, dt, i);
				if (want != got)
					fail("", rc->name, k, c->op, c->dtype, i, want, got);
				(*ncompared)++;
			}
		}
		free(buf);
	}
}

/* What the goldens do not show: the raw streams, the seed truncation, argument checks. */
static void check_engine(void)
{
	struct tn__mt19937 a, b;
	float f[4];

	/* std::mt19937 seeded with 5489 gives 4123659995 as its 10000th output. */
	tn__mt_seed(&a, 5489);
	uint32_t v = 0;
	for (int i = 0; i < 10000; i++)
		v = tn__mt_next32(&a);
	if (v != 4123659995u)
		fail("", "engine", 0, "mt19937 10000th", "", 0, 4123659995u, v);

	/* random64 = first draw << 32 | second draw. */
	tn__mt_seed(&a, 7);
	tn__mt_seed(&b, 7);
	uint64_t hi = tn__mt_next32(&b), lo = tn__mt_next32(&b), r = tn__mt_next64(&a);
	if (r != (hi << 32 | lo))
		fail("", "engine", 0, "random64", "", 0, hi << 32 | lo, r);

	/* Seeds equal modulo 2^32 give one stream but keep their own initial_seed. */
	tn__mt_seed(&a, 5);
	tn__mt_seed(&b, (UINT64_C(1) << 32) + 5);
	if (tn__mt_next64(&a) != tn__mt_next64(&b) ||
	    tn__mt_initial_seed(&b) != (UINT64_C(1) << 32) + 5)
		fail("", "engine", 0, "seed truncation", "", 0, 0, 0);

	/* Rejected arguments draw nothing and write nothing. */
	tn__mt_seed(&a, 1);
	b = a;
	f[0] = 42.0f;
	if (tn__rand_fill_f32(&a, f, 1, 2.0, 1.0, TN__RNG_ISA_DEFAULT) != -EINVAL ||
	    tn__randn_fill_f32(&a, f, 1, 0.0, -1.0, TN__RNG_ISA_AVX2) != -EINVAL ||
	    tn__bernoulli_fill_f32(&a, f, 1, 1.5) != -EINVAL ||
	    tn__randint_fill_f32(&a, f, 1, 3, 3) != -EINVAL || f[0] != 42.0f ||
	    memcmp(&a, &b, sizeof(a)) != 0)
		fail("", "engine", 0, "argument checks", "", 0, 0, 0);
}

int main(void)
{
	size_t ncompared = 0;
	size_t ncases = sizeof(random_cases) / sizeof(random_cases[0]);

	check_engine();
	for (size_t i = 0; i < ncases; i++)
		run_case(&random_cases[i], &ncompared);
	if (failures) {
		printf("%d mismatches (%zu values compared)\n", failures, ncompared);
		return 1;
	}
	printf("ok: %zu cases, %zu values bit-exact\n", ncases, ncompared);
	return 0;
}
