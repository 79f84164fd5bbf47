/* SPDX-License-Identifier: MIT */
/*
 * Random generators (tn_generator, <tensor/random.h>) and the random operators: rand, randn,
 * randint, randperm, rand_like, randn_like, uniform_, normal_, random_, bernoulli, bernoulli_,
 * dropout and dropout_.
 *
 * The numbers come from the bit-exact core of generator.c (PyTorch 1.13's CPUGeneratorImpl
 * and its CPU transformations); this file adds what ATen's DistributionTemplates.h and
 * TensorFactories.cpp add around them: the argument checks with their messages, the generator
 * lock, and the order of the draws. A CPU kernel of torch draws one value per element with
 * cpu_serial_kernel, in TensorIterator's order: memory order for a contiguous tensor, and for
 * any other layout the order of its dimensions sorted by stride. Here every operator draws
 * into a contiguous buffer in that order (the output itself when it is contiguous and of the
 * drawn type) and copies the buffer into a permuted view of the output, which also converts
 * to the output's dtype. normal_ has, as torch, two paths: a contiguous float output of 16 or
 * more elements gets the vectorised Box-Muller fill, anything else one normal_distribution
 * per element.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "generator.h"
#include "iter.h"
#include "ops_kernels.h"

struct tn_generator {
	uint32_t magic;
	bool immortal; /* the default generator: never freed */
	_Atomic int64_t refcount;
	pthread_mutex_t lock;
	struct tn__mt19937 mt;
};

/* ---- generators ------------------------------------------------------------------------------ */

static bool gen_ok(const tn_generator *g)
{
	return tn__handle_is(g, TN_MAGIC_GENERATOR);
}

static int bad_generator(const char *who)
{
	return tn__error(TN_EBADF, "%s: not a live generator handle (NULL, freed or foreign)", who);
}

/* c10::detail::getNonDeterministicRandom on Linux: 64 bits from the kernel's random source. */
static int os_seed(uint64_t *ret, const char *who)
{
	ssize_t n;
	do
		n = getrandom(ret, sizeof(*ret), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*ret))
		return tn__error(TN_EIO, "%s: could not read a seed from the kernel's random source (%s)",
				 who, n < 0 ? strerror(errno) : "short read");
	return 0;
}

TN_EXPORT int tn_generator_new(tn_generator **ret_gen)
{
	tn_generator *g;

	if (!ret_gen)
		return tn__error(TN_EINVAL, "tn_generator_new: NULL ret_gen");
	if (!(g = tn__handle_alloc(sizeof(*g), TN_MAGIC_GENERATOR)))
		return tn__error(TN_ENOMEM, "tn_generator_new: out of memory");
	g->immortal = false;
	atomic_init(&g->refcount, 1);
	pthread_mutex_init(&g->lock, NULL);
	tn__mt_init(&g->mt);
	*ret_gen = g;
	return 0;
}

TN_EXPORT tn_generator *tn_generator_ref(tn_generator *gen)
{
	if (!gen_ok(gen))
		return NULL;
	if (!gen->immortal)
		atomic_fetch_add_explicit(&gen->refcount, 1, memory_order_relaxed);
	return gen;
}

TN_EXPORT tn_generator *tn_generator_unref(tn_generator *gen)
{
	if (!gen_ok(gen) || gen->immortal)
		return NULL;
	if (atomic_fetch_sub_explicit(&gen->refcount, 1, memory_order_acq_rel) == 1) {
		pthread_mutex_destroy(&gen->lock);
		tn__handle_free(gen);
	}
	return NULL;
}

static struct tn_generator default_gen;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
	uint64_t seed;

	default_gen.immortal = true;
	atomic_init(&default_gen.refcount, 1);
	pthread_mutex_init(&default_gen.lock, NULL);
	/* Without a random source (a seccomp sandbox), the clock still varies the seed. */
	if (os_seed(&seed, "tn_default_generator") < 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
	}
	tn__mt_seed(&default_gen.mt, seed);
	default_gen.magic = TN_MAGIC_GENERATOR;
}

TN_EXPORT tn_generator *tn_default_generator(void)
{
	pthread_once(&default_once, default_init);
	return &default_gen;
}

/* The generator an operator draws from: @gen, or the default one for NULL. */
static int resolve(tn_generator *gen, tn_generator **ret, const char *who)
{
	if (!gen)
		gen = tn_default_generator();
	else if (!gen_ok(gen))
		return bad_generator(who);
	*ret = gen;
	return 0;
}

TN_EXPORT int tn_generator_manual_seed(tn_generator *gen, uint64_t seed)
{
	if (!gen_ok(gen))
		return bad_generator("tn_generator_manual_seed");
	pthread_mutex_lock(&gen->lock);
	tn__mt_seed(&gen->mt, seed);
	pthread_mutex_unlock(&gen->lock);
	return 0;
}

TN_EXPORT int tn_generator_seed(tn_generator *gen, uint64_t *ret_seed)
{
	uint64_t seed;
	int rc;

	if (!gen_ok(gen))
		return bad_generator("tn_generator_seed");
	if (!ret_seed)
		return tn__error(TN_EINVAL, "tn_generator_seed: NULL ret_seed");
	if ((rc = os_seed(&seed, "tn_generator_seed")) < 0)
		return rc;
	pthread_mutex_lock(&gen->lock);
	tn__mt_seed(&gen->mt, seed);
	pthread_mutex_unlock(&gen->lock);
	*ret_seed = seed;
	return 0;
}

TN_EXPORT int tn_generator_initial_seed(tn_generator *gen, uint64_t *ret_seed)
{
	if (!gen_ok(gen))
		return bad_generator("tn_generator_initial_seed");
	if (!ret_seed)
		return tn__error(TN_EINVAL, "tn_generator_initial_seed: NULL ret_seed");
	pthread_mutex_lock(&gen->lock);
	*ret_seed = tn__mt_initial_seed(&gen->mt);
	pthread_mutex_unlock(&gen->lock);
	return 0;
}

TN_EXPORT int tn_manual_seed(uint64_t seed)
{
	return tn_generator_manual_seed(tn_default_generator(), seed);
}

TN_EXPORT int tn_seed(uint64_t *ret_seed)
{
	return tn_generator_seed(tn_default_generator(), ret_seed);
}

TN_EXPORT int tn_initial_seed(uint64_t *ret_seed)
{
	return tn_generator_initial_seed(tn_default_generator(), ret_seed);
}

/*
 * The byte layout of torch 1.13's CPUGeneratorImplState on x86-64 (CPUGeneratorImpl.cpp): the
 * legacy THGeneratorState (the_initial_seed u64, left i32, seeded i32, next u64, state
 * u64[624], normal_x, normal_y, normal_rho f64, normal_is_valid i32, 4 bytes of padding:
 * 5048 bytes), then next_float_normal_sample f32, is_next_float_normal_sample_valid bool, and
 * padding to 5056. torch value-initialises the struct, so the padding is zero.
 */
enum {
	ST_SEED = 0,
	ST_LEFT = 8,
	ST_SEEDED = 12,
	ST_NEXT = 16,
	ST_STATE = 24,
	ST_NORMAL_X = ST_STATE + 8 * TN__MT_N,
	ST_NORMAL_Y = ST_NORMAL_X + 8,
	ST_NORMAL_RHO = ST_NORMAL_Y + 8,
	ST_NORMAL_VALID = ST_NORMAL_RHO + 8,
	ST_LEGACY_SIZE = ST_NORMAL_VALID + 8,
	ST_FLOAT_NORMAL = ST_LEGACY_SIZE,
	ST_FLOAT_VALID = ST_FLOAT_NORMAL + 4,
	ST_SIZE = ST_LEGACY_SIZE + 8,
};
_Static_assert(ST_SIZE == TN_GENERATOR_STATE_SIZE, "torch's CPUGeneratorImplState is 5056 bytes");

static void put(unsigned char *p, size_t off, const void *v, size_t n)
{
	memcpy(p + off, v, n);
}

static void get(const unsigned char *p, size_t off, void *v, size_t n)
{
	memcpy(v, p + off, n);
}

TN_EXPORT int tn_generator_get_state(tn_generator *gen, tn_tensor **ret_state)
{
	int64_t size = ST_SIZE;
	tn_tensor *t;
	int rc;

	if (!gen_ok(gen))
		return bad_generator("tn_generator_get_state");
	if (!ret_state)
		return tn__error(TN_EINVAL, "tn_generator_get_state: NULL ret_state");
	if ((rc = tn__empty_like_device(TN_CPU, TN_UINT8, 1, &size, NULL, &t,
					"tn_generator_get_state")) < 0)
		return rc;
	unsigned char *p = (unsigned char *)tn__data(t);
	memset(p, 0, ST_SIZE);
	pthread_mutex_lock(&gen->lock);
	const struct tn__mt19937 *m = &gen->mt;
	int32_t left = m->left, seeded = 1, valid = m->has_next_double_normal;
	uint64_t next = m->next;
	put(p, ST_SEED, &m->seed, 8);
	put(p, ST_LEFT, &left, 4);
	put(p, ST_SEEDED, &seeded, 4);
	put(p, ST_NEXT, &next, 8);
	for (int i = 0; i < TN__MT_N; i++) {
		uint64_t w = m->state[i];
		put(p, ST_STATE + 8 * (size_t)i, &w, 8);
	}
	if (m->has_next_double_normal)
		put(p, ST_NORMAL_Y, &m->next_double_normal, 8);
	put(p, ST_NORMAL_VALID, &valid, 4);
	if (m->has_next_float_normal) {
		put(p, ST_FLOAT_NORMAL, &m->next_float_normal, 4);
		p[ST_FLOAT_VALID] = 1;
	}
	pthread_mutex_unlock(&gen->lock);
	*ret_state = t;
	return 0;
}

TN_EXPORT int tn_generator_set_state(tn_generator *gen, const tn_tensor *state)
{
	static const char who[] = "tn_generator_set_state";
	struct tn__mt19937 m;
	int rc;

	if (!gen_ok(gen))
		return bad_generator(who);
	if ((rc = tn__check_tensor_args(state, gen, who)) < 0)
		return rc;
	if (state->dtype != TN_UINT8 || state->storage->device.type != TN_DEVICE_CPU)
		return tn__error(TN_EINVAL, "RNG state must be a torch.ByteTensor");
	if (state->numel != ST_SIZE && state->numel != ST_LEGACY_SIZE)
		return tn__error(TN_EINVAL,
				 "Expected either a CPUGeneratorImplStateLegacy of size %d or a "
				 "CPUGeneratorImplState of size %d but found the input RNG state size "
				 "to be %lld",
				 (int)ST_LEGACY_SIZE, (int)ST_SIZE, (long long)state->numel);
	if (!state->contiguous)
		return tn__error(TN_EINVAL, "%s: the state must be contiguous", who);
	const unsigned char *p = (const unsigned char *)tn__data(state);
	int32_t left, seeded, valid;
	uint64_t next;
	get(p, ST_SEED, &m.seed, 8);
	get(p, ST_LEFT, &left, 4);
	get(p, ST_SEEDED, &seeded, 4);
	get(p, ST_NEXT, &next, 8);
	/* mt19937::is_valid: seeded, 0 < left <= 624, next <= 624 (next_ is 32-bit there). */
	if (!seeded || left <= 0 || left > TN__MT_N || (uint32_t)next > TN__MT_N)
		return tn__error(TN_EINVAL, "Invalid mt19937 state");
	m.left = left;
	m.next = (uint32_t)next;
	for (int i = 0; i < TN__MT_N; i++) {
		uint64_t w;
		get(p, ST_STATE + 8 * (size_t)i, &w, 8);
		m.state[i] = (uint32_t)w;
	}
	get(p, ST_NORMAL_VALID, &valid, 4);
	m.has_next_double_normal = valid != 0;
	m.next_double_normal = 0;
	m.has_next_float_normal = false;
	m.next_float_normal = 0;
	if (state->numel == ST_LEGACY_SIZE) {
		/* The legacy state kept Box-Muller's intermediates: torch rebuilds the sample. */
		if (valid) {
			double x, rho;
			get(p, ST_NORMAL_X, &x, 8);
			get(p, ST_NORMAL_RHO, &rho, 8);
			m.next_double_normal = rho * sin(2.0 * 3.14159265358979323846 * x);
		}
	} else {
		if (valid)
			get(p, ST_NORMAL_Y, &m.next_double_normal, 8);
		if (p[ST_FLOAT_VALID]) {
			m.has_next_float_normal = true;
			get(p, ST_FLOAT_NORMAL, &m.next_float_normal, 4);
		}
	}
	pthread_mutex_lock(&gen->lock);
	gen->mt = m;
	pthread_mutex_unlock(&gen->lock);
	return 0;
}

/* ---- where the draws go ---------------------------------------------------------------------- */

static enum tn__rng_isa rng_isa(void)
{
	return (enum tn__rng_isa)tn_cpu_capability();
}

static bool is_float(enum tn_dtype d)
{
	return d == TN_FLOAT32 || d == TN_FLOAT64 || d == TN_FLOAT16 || d == TN_BFLOAT16;
}

static int not_implemented(const char *kernel, enum tn_dtype d)
{
	return tn__error(TN_EINVAL, "\"%s\" not implemented for '%s'", kernel,
			 tn__scalar_type_name(d));
}

/* std::numeric_limits<T>::digits of a floating dtype. */
static int float_digits(enum tn_dtype d)
{
	switch (d) {
	case TN_FLOAT64: return 53;
	case TN_FLOAT32: return 24;
	case TN_FLOAT16: return 11;
	default: return 8; /* bfloat16 */
	}
}

/* std::numeric_limits<T>::max() of a floating dtype, as a double. */
static double float_max(enum tn_dtype d)
{
	switch (d) {
	case TN_FLOAT64: return 1.7976931348623157e308;
	case TN_FLOAT32: return 3.4028234663852886e38;
	case TN_FLOAT16: return 65504.0;
	default: return 3.3895313892515355e38; /* bfloat16 */
	}
}

/* How caffe2::TypeMeta prints a dtype ("from is out of bounds for float"). */
static const char *type_meta_name(enum tn_dtype d)
{
	switch (d) {
	case TN_FLOAT64: return "double";
	case TN_FLOAT32: return "float";
	case TN_FLOAT16: return "c10::Half";
	case TN_BFLOAT16: return "c10::BFloat16";
	case TN_INT64: return "long int";
	case TN_INT32: return "int";
	case TN_INT16: return "short int";
	case TN_INT8: return "signed char";
	case TN_UINT8: return "unsigned char";
	default: return "bool";
	}
}

/*
 * The draws of one operator on @self: a contiguous buffer @buf of the drawn dtype, in the order
 * TensorIterator visits @self, and the permuted view @view of @self that has that order as its
 * row-major order (NULL when @buf is @self).
 */
struct target {
	tn_tensor *buf, *view;
	size_t n;
};

/* The dimensions of @t with the largest stride first: TensorIterator's order for a nullary op
 * (reorder_dimensions), outermost first. Size-1 dimensions go anywhere. */
static void iter_perm(const tn_tensor *t, int64_t *perm)
{
	for (int i = 0; i < t->ndim; i++) {
		int64_t d = i;
		int j = i;
		while (j > 0 && t->sizes[perm[j - 1]] != 1 && t->sizes[d] != 1 &&
		       t->strides[perm[j - 1]] < t->strides[d]) {
			perm[j] = perm[j - 1];
			j--;
		}
		perm[j] = d;
	}
}

static int target_begin(tn_tensor *self, enum tn_dtype dt, struct target *tg, const char *who)
{
	int64_t perm[TN_MAX_DIMS];
	int rc;

	tg->buf = tg->view = NULL;
	tg->n = (size_t)self->numel;
	if (self->contiguous && self->dtype == dt) {
		tg->buf = tn_tensor_ref(self);
		return 0;
	}
	iter_perm(self, perm);
	if ((rc = tn_permute(self, self->ndim, perm, &tg->view)) < 0)
		return rc;
	if ((rc = tn__empty_like_device(TN_CPU, dt, self->ndim, tg->view->sizes, NULL, &tg->buf,
					who)) < 0) {
		tg->view = tn_tensor_unref(tg->view);
		return rc;
	}
	return 0;
}

/* Copy the draws into @self unless @rc says they failed; release the target. */
static int target_end(struct target *tg, int rc, const char *who)
{
	if (rc >= 0 && tg->view)
		rc = tn__copy(tg->view, tg->buf, TN_KEY_CPU, who);
	tn_tensor_unref(tg->view);
	tn_tensor_unref(tg->buf);
	return rc;
}

/* ---- uniform_ ---------------------------------------------------------------------------------- */

/* uniform_impl_'s checks (DistributionTemplates.h); from and to come back clamped to the type. */
static int uniform_checks(const tn_tensor *self, double *from, double *to)
{
	enum tn_dtype d = self->dtype;
	if (!is_float(d))
		return not_implemented("check_uniform_bounds", d);
	double max = float_max(d), min = -max;
	if (!(*from >= min && *from <= max))
		return tn__error(TN_EINVAL, "from is out of bounds for %s", type_meta_name(d));
	if (!(*to >= min && *to <= max))
		return tn__error(TN_EINVAL, "to is out of bounds for %s", type_meta_name(d));
	if (!(*from <= *to))
		return tn__error(TN_EINVAL,
				 "uniform_ expects to return a [from, to) range, but found from=%g > to=%g",
				 *from, *to);
	if (!(*to - *from <= max))
		return tn__error(TN_EINVAL,
				 "uniform_ expects to-from <= std::numeric_limits<%s>::max(), but found "
				 "to=%g and from=%g which result in to-from to exceed the limit",
				 tn__scalar_type_name(d), *to, *from);
	return 0;
}

/*
 * uniform_real_distribution<Half/BFloat16>: the low `digits` bits of one 32-bit draw scaled
 * in float, x * (to - from) + from with to - from rounded to the type (c10's Half - Half is a
 * Half), fused into one FMA where torch's kernels are built with -mfma.
 */
static void uniform16_fill(struct tn__mt19937 *mt, float *out, size_t n, enum tn_dtype d,
			   double from_, double to_, bool fused)
{
	int digits = float_digits(d);
	float from, to, range;
	if (d == TN_FLOAT16) {
		from = tn_half_to_float(tn_half_from_float((float)from_));
		to = tn_half_to_float(tn_half_from_float((float)to_));
		range = tn_half_to_float(tn_half_from_float(to - from));
	} else {
		from = tn_bfloat16_to_float(tn_bfloat16_from_float((float)from_));
		to = tn_bfloat16_to_float(tn_bfloat16_from_float((float)to_));
		range = tn_bfloat16_to_float(tn_bfloat16_from_float(to - from));
	}
	uint32_t mask = (UINT32_C(1) << digits) - 1;
	float scale = 1.0f / (float)(UINT32_C(1) << digits);
	for (size_t i = 0; i < n; i++) {
		float x = (float)(tn__mt_next32(mt) & mask) * scale;
		out[i] = fused ? fmaf(x, range, from) : x * range + from;
	}
}

static int uniform_draw(tn_tensor *self, double from, double to, tn_generator *gen,
			const char *who)
{
	struct target tg;
	enum tn_dtype d = self->dtype;
	int rc;

	if ((rc = target_begin(self, d == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32, &tg, who)) < 0)
		return rc;
	pthread_mutex_lock(&gen->lock);
	if (d == TN_FLOAT64)
		rc = tn__rand_fill_f64(&gen->mt, (double *)tn__data(tg.buf), tg.n, from, to, rng_isa());
	else if (d == TN_FLOAT32)
		rc = tn__rand_fill_f32(&gen->mt, (float *)tn__data(tg.buf), tg.n, from, to, rng_isa());
	else
		uniform16_fill(&gen->mt, (float *)tn__data(tg.buf), tg.n, d, from, to,
			       rng_isa() != TN__RNG_ISA_DEFAULT);
	pthread_mutex_unlock(&gen->lock);
	/* uniform_checks compared the bounds in double; the distribution checks to - from again in
	 * the dtype, where two bounds near the largest float can overflow to inf. */
	if (rc < 0)
		rc = tn__error(TN_EINVAL, "Expected to - from <= std::numeric_limits<T>::max() to be "
					  "true, but got false.");
	return target_end(&tg, rc, who);
}

/* The CPU kernel draws; the Meta kernel (@meta) makes the same checks and draws nothing. */
static int uniform_impl(tn_tensor *self, double from, double to, tn_generator *gen, bool meta)
{
	int rc;
	if ((rc = uniform_checks(self, &from, &to)) < 0 ||
	    (rc = tn__check_internal_overlap(self)) < 0 || (rc = resolve(gen, &gen, "uniform_")) < 0)
		return rc;
	if (meta || self->numel == 0)
		return 0;
	return uniform_draw(self, from, to, gen, "uniform_");
}

int tn__uniform__cpu(tn_tensor *self, double from, double to, tn_generator *generator)
{
	return uniform_impl(self, from, to, generator, false);
}

int tn__uniform__meta(tn_tensor *self, double from, double to, tn_generator *generator)
{
	return uniform_impl(self, from, to, generator, true);
}

/* ---- normal_ ----------------------------------------------------------------------------------- */

static int normal_checks(const tn_tensor *self, double std)
{
	if (!(std >= 0.0))
		return tn__error(TN_EINVAL, "normal expects std >= 0.0, but found std %g", std);
	if (!is_float(self->dtype))
		return not_implemented("normal_kernel_cpu", self->dtype);
	return 0;
}

static int normal_draw(tn_tensor *self, double mean, double std, tn_generator *gen,
		       const char *who)
{
	struct target tg;
	enum tn_dtype d = self->dtype;
	bool wide = d == TN_FLOAT64;
	int rc;

	if ((rc = target_begin(self, wide ? TN_FLOAT64 : TN_FLOAT32, &tg, who)) < 0)
		return rc;
	/* normal_kernel: the vectorised fill for a contiguous output of >= 16 elements, else one
	 * normal_distribution<double> per element (a fill of one element takes that path). */
	size_t chunk = self->contiguous && tg.n >= 16 ? tg.n : 1;
	void *p = tn__data(tg.buf);
	pthread_mutex_lock(&gen->lock);
	for (size_t i = 0; rc >= 0 && i < tg.n; i += chunk) {
		if (wide)
			rc = tn__randn_fill_f64(&gen->mt, (double *)p + i, chunk, mean, std, rng_isa());
		else
			rc = tn__randn_fill_f32(&gen->mt, (float *)p + i, chunk, mean, std, rng_isa());
	}
	pthread_mutex_unlock(&gen->lock);
	/* std was checked (normal_checks): the core's own check cannot fail here. */
	return target_end(&tg, rc, who);
}

static int normal_impl(tn_tensor *self, double mean, double std, tn_generator *gen, bool meta)
{
	int rc;
	if ((rc = normal_checks(self, std)) < 0 || (rc = tn__check_internal_overlap(self)) < 0 ||
	    (rc = resolve(gen, &gen, "normal_")) < 0)
		return rc;
	if (meta || self->numel == 0)
		return 0;
	return normal_draw(self, mean, std, gen, "normal_");
}

int tn__normal__cpu(tn_tensor *self, double mean, double std, tn_generator *generator)
{
	return normal_impl(self, mean, std, generator, false);
}

int tn__normal__meta(tn_tensor *self, double mean, double std, tn_generator *generator)
{
	return normal_impl(self, mean, std, generator, true);
}

/* ---- random_ ----------------------------------------------------------------------------------- */

/* static_cast<int64_t> of a float as x86-64 does it: out of range and NaN give INT64_MIN. */
static int64_t trunc_i64(double x)
{
	if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)x;
}

/* static_cast<int64_t>(static_cast<T>(v)) for a floating dtype. */
static int64_t through_type(int64_t v, enum tn_dtype d)
{
	switch (d) {
	case TN_FLOAT64: return trunc_i64((double)v);
	case TN_FLOAT32: return trunc_i64((float)v);
	case TN_FLOAT16: return trunc_i64(tn_half_to_float(tn_half_from_float((float)v)));
	default: return trunc_i64(tn_bfloat16_to_float(tn_bfloat16_from_float((float)v)));
	}
}

/*
 * update_from<T> and update_to<T> (DistributionTemplates.h) for a floating dtype. torch's
 * update_from(INT64_MAX) overflows from + 1 and then shifts a negative number until it is
 * zero, which never happens: torch 1.13's random_(2**63 - 1, None) on a float tensor spins
 * forever. Here that from is left alone, and the check that follows refuses it.
 */
static int64_t update_from(int64_t from, enum tn_dtype d)
{
	int digits = float_digits(d);
	if (from == INT64_MAX)
		return from;
	int64_t from_plus_1 = through_type(from + 1, d);
	if (from_plus_1 < from) {
		int64_t from_ = from + 1 < 0 ? -(from + 1) : from + 1;
		int k = 0;
		while (from_ >>= 1)
			++k;
		from = from_plus_1 + (INT64_C(1) << (k - digits + 1));
	}
	return from;
}

static int64_t update_to(int64_t to, enum tn_dtype d)
{
	int digits = float_digits(d);
	int64_t to_minus_1 = through_type(to - 1, d);
	if (to_minus_1 >= to) {
		int64_t to_ = to - 1 < 0 ? -(to - 1) : to - 1;
		int k = 0;
		while (to_ >>= 1)
			++k;
		to = to_minus_1 - (INT64_C(1) << (k - digits + 1));
	}
	return to;
}

/* check_from_to_in_range: from and to - 1 within the dtype (floats: its finite range). */
static int check_from_to(int64_t from, int64_t to_inc, enum tn_dtype d)
{
	const char *name = type_meta_name(d);
	if (is_float(d)) {
		double max = float_max(d);
		if (!((double)from >= -max && (double)from <= max))
			return tn__error(TN_EINVAL, "from is out of bounds for %s", name);
		if (!((double)to_inc >= -max && (double)to_inc <= max))
			return tn__error(TN_EINVAL, "to - 1 is out of bounds for %s", name);
		return 0;
	}
	int64_t min = 0, max = 1;
	switch (d) {
	case TN_INT64: min = INT64_MIN, max = INT64_MAX; break;
	case TN_INT32: min = INT32_MIN, max = INT32_MAX; break;
	case TN_INT16: min = INT16_MIN, max = INT16_MAX; break;
	case TN_INT8: min = INT8_MIN, max = INT8_MAX; break;
	case TN_UINT8: min = 0, max = UINT8_MAX; break;
	default: break; /* bool: [0, 1] */
	}
	if (from < min || from > max)
		return tn__error(TN_EINVAL, "from is out of bounds for %s", name);
	if (to_inc < min || to_inc > max)
		return tn__error(TN_EINVAL, "to - 1 is out of bounds for %s", name);
	return 0;
}

/* The largest value random_(from) may give: to_inc of random_from_to_impl without a to. */
static int64_t max_to_inc(enum tn_dtype d)
{
	switch (d) {
	case TN_INT64: return INT64_MAX;
	case TN_INT32: return INT32_MAX;
	case TN_INT16: return INT16_MAX;
	case TN_INT8: return INT8_MAX;
	case TN_UINT8: return UINT8_MAX;
	case TN_BOOL: return 1;
	default: return INT64_C(1) << float_digits(d); /* below INT64_MAX for every dtype here */
	}
}

/* uniform_int_from_to_distribution<T> takes a 64-bit draw for these types and range >= 2^32. */
static bool wide_from_to(enum tn_dtype d)
{
	return d == TN_INT64 || d == TN_FLOAT64 || d == TN_FLOAT32 || d == TN_BFLOAT16;
}

/* The three kinds of random_ draws, each one value per element into int64. */
enum random_kind { RANDOM_FROM_TO, RANDOM_FULL, RANDOM_PLAIN };

static int random_draw(tn_tensor *self, enum random_kind kind, uint64_t range, int64_t base,
		       tn_generator *gen, const char *who)
{
	struct target tg;
	enum tn_dtype d = self->dtype;
	int rc;

	if ((rc = target_begin(self, TN_INT64, &tg, who)) < 0)
		return rc;
	int64_t *out = (int64_t *)tn__data(tg.buf);
	bool wide;
	uint64_t mod = 0;
	if (kind == RANDOM_PLAIN) {
		/* uniform_int_distribution<T>: a 64-bit draw for int64 and double; the value modulo
		 * max + 1 for integers, 2^digits + 1 for floating types, 2 for bool. */
		wide = d == TN_INT64 || d == TN_FLOAT64;
		mod = d == TN_BOOL ? 2 : is_float(d) ? (UINT64_C(1) << float_digits(d)) + 1
						     : (uint64_t)max_to_inc(d) + 1;
	} else {
		wide = wide_from_to(d) && range >= (UINT64_C(1) << 32);
	}
	pthread_mutex_lock(&gen->lock);
	for (size_t i = 0; i < tg.n; i++) {
		if (kind == RANDOM_FULL) {
			out[i] = (int64_t)tn__mt_next64(&gen->mt);
			continue;
		}
		uint64_t v = wide ? tn__mt_next64(&gen->mt) : tn__mt_next32(&gen->mt);
		out[i] = kind == RANDOM_PLAIN ? (int64_t)(v % mod) : (int64_t)(v % range + (uint64_t)base);
	}
	pthread_mutex_unlock(&gen->lock);
	return target_end(&tg, 0, who);
}

/* random_from_to_impl's checks; *kind, *range and *base say what to draw. */
static int random_from_to_checks(const tn_tensor *self, int64_t from, const int64_t *to_opt,
				 enum random_kind *kind, uint64_t *range, int64_t *base)
{
	enum tn_dtype d = self->dtype;
	int rc;

	if (to_opt) {
		int64_t to = *to_opt;
		if (from >= to)
			return tn__error(TN_EINVAL,
					 "random_ expects 'from' to be less than 'to', but got from=%lld "
					 ">= to=%lld",
					 (long long)from, (long long)to);
		if (is_float(d)) {
			from = update_from(from, d);
			to = update_to(to, d);
			if (from >= to)
				return tn__error(TN_EINVAL,
						 "random_ expects 'from' casted to dtype to be less than "
						 "'to' casted to dtype, but got from=%lld >= to=%lld",
						 (long long)from, (long long)to);
		}
		if ((rc = check_from_to(from, to - 1, d)) < 0)
			return rc;
		*kind = RANDOM_FROM_TO;
		*range = (uint64_t)to - (uint64_t)from;
		*base = from;
		return 0;
	}
	if (from != INT64_MIN) {
		int64_t to_inc = max_to_inc(d);
		if (is_float(d)) {
			from = update_from(from, d);
			if (from >= to_inc)
				return tn__error(TN_EINVAL,
						 "random_ expects 'from' casted to dtype to be less than or "
						 "equal to 'to_inc' casted to dtype, but got from=%lld > "
						 "to_inc=%lld",
						 (long long)from, (long long)to_inc);
		}
		if ((rc = check_from_to(from, to_inc, d)) < 0)
			return rc;
		*kind = RANDOM_FROM_TO;
		*range = (uint64_t)to_inc - (uint64_t)from + 1;
		*base = from;
		return 0;
	}
	/* torch dispatches over the integer types and float, double and bfloat16 first: Half
	 * and Bool fail that dispatch, the other integers its check. */
	if (d == TN_FLOAT16 || d == TN_BOOL)
		return not_implemented("random_full_64_bits_range_kernel_cpu", d);
	if (d != TN_INT64 && d != TN_FLOAT64 && d != TN_FLOAT32 && d != TN_BFLOAT16)
		return tn__error(TN_EINVAL, "random_full_64_bits_range_kernel_cpu handles only int64, "
					    "double, float and bfloat16");
	*kind = RANDOM_FULL;
	*range = 0;
	*base = 0;
	return 0;
}

static int random_from_impl(tn_tensor *self, int64_t from, const int64_t *to,
			    tn_generator *generator, bool meta)
{
	enum random_kind kind = RANDOM_FROM_TO;
	uint64_t range = 0;
	int64_t base = 0;
	int rc;

	if ((rc = random_from_to_checks(self, from, to, &kind, &range, &base)) < 0 ||
	    (rc = tn__check_internal_overlap(self)) < 0 ||
	    (rc = resolve(generator, &generator, "random_")) < 0)
		return rc;
	if (meta || self->numel == 0)
		return 0;
	return random_draw(self, kind, range, base, generator, "random_");
}

int tn__random__from_cpu(tn_tensor *self, int64_t from, const int64_t *to, tn_generator *generator)
{
	return random_from_impl(self, from, to, generator, false);
}

int tn__random__from_meta(tn_tensor *self, int64_t from, const int64_t *to, tn_generator *generator)
{
	return random_from_impl(self, from, to, generator, true);
}

int tn__random__to_cpu(tn_tensor *self, int64_t to, tn_generator *generator)
{
	return random_from_impl(self, 0, &to, generator, false);
}

int tn__random__to_meta(tn_tensor *self, int64_t to, tn_generator *generator)
{
	return random_from_impl(self, 0, &to, generator, true);
}

static int random_plain_impl(tn_tensor *self, tn_generator *generator, bool meta)
{
	int rc;
	if ((rc = tn__check_internal_overlap(self)) < 0 ||
	    (rc = resolve(generator, &generator, "random_")) < 0)
		return rc;
	if (meta || self->numel == 0)
		return 0;
	return random_draw(self, RANDOM_PLAIN, 0, 0, generator, "random_");
}

int tn__random__cpu(tn_tensor *self, tn_generator *generator)
{
	return random_plain_impl(self, generator, false);
}

int tn__random__meta(tn_tensor *self, tn_generator *generator)
{
	return random_plain_impl(self, generator, true);
}

/* ---- bernoulli --------------------------------------------------------------------------------- */

static int bernoulli_p_check(double p)
{
	if (!(p >= 0.0 && p <= 1.0))
		return tn__error(TN_EINVAL, "bernoulli_ expects p to be in [0, 1], but got p=%g", p);
	return 0;
}

/* bernoulli_(float p): one bernoulli_distribution<double> (a 64-bit draw) per element. */
static int bernoulli_scalar_draw(tn_tensor *self, double p, tn_generator *gen, const char *who)
{
	struct target tg;
	int rc;

	if ((rc = target_begin(self, TN_UINT8, &tg, who)) < 0)
		return rc;
	/* p was checked: the core's own check cannot fail here. */
	pthread_mutex_lock(&gen->lock);
	rc = tn__bernoulli_fill_u8(&gen->mt, (uint8_t *)tn__data(tg.buf), tg.n, p);
	pthread_mutex_unlock(&gen->lock);
	return target_end(&tg, rc, who);
}

static int bernoulli_float_impl(tn_tensor *self, double p, tn_generator *gen, bool meta)
{
	int rc;
	if ((rc = bernoulli_p_check(p)) < 0 || (rc = tn__check_internal_overlap(self)) < 0 ||
	    (rc = resolve(gen, &gen, "bernoulli_")) < 0)
		return rc;
	if (meta || self->numel == 0)
		return 0;
	return bernoulli_scalar_draw(self, p, gen, "bernoulli_");
}

int tn__bernoulli__float_cpu(tn_tensor *self, double p, tn_generator *generator)
{
	return bernoulli_float_impl(self, p, generator, false);
}

int tn__bernoulli__float_meta(tn_tensor *self, double p, tn_generator *generator)
{
	return bernoulli_float_impl(self, p, generator, true);
}

/*
 * bernoulli_(Tensor p): p expanded to self (expand_inplace), then per element in self's order
 * bernoulli_distribution<double> for a float64 p and <float> (one 32-bit draw) for a float32 p.
 */
static int bernoulli_tensor_impl(tn_tensor *self, const tn_tensor *p, tn_generator *gen,
				 bool meta)
{
	static const char who[] = "bernoulli_";
	tn_tensor *pe = NULL, *pv = NULL, *pc = NULL;
	int64_t perm[TN_MAX_DIMS];
	struct target tg;
	int rc;

	if ((rc = tn__check_tensor_args(p, self, who)) < 0 || (rc = tn__check_internal_overlap(self)) < 0 ||
	    (rc = resolve(gen, &gen, who)) < 0)
		return rc;
	if ((rc = tn_expand(p, self->ndim, self->sizes, &pe)) < 0)
		return rc;
	if (!is_float(p->dtype)) {
		rc = not_implemented("bernoulli_tensor_cpu_p_", p->dtype);
		goto out;
	}
	if (meta || self->numel == 0)
		goto out;
	/* A 16-bit p is read as float (bernoulli_distribution<float>(p_val)). */
	bool wide = p->dtype == TN_FLOAT64;
	enum tn_dtype pdt = wide ? TN_FLOAT64 : TN_FLOAT32;
	iter_perm(self, perm);
	if ((rc = tn_permute(pe, self->ndim, perm, &pv)) < 0 ||
	    (rc = tn__empty_like_device(TN_CPU, pdt, self->ndim, pv->sizes, NULL, &pc, who)) < 0 ||
	    (rc = tn__copy(pc, pv, TN_KEY_CPU, who)) < 0)
		goto out;
	if ((rc = target_begin(self, pdt, &tg, who)) < 0)
		goto out;
	pthread_mutex_lock(&gen->lock);
	if (wide)
		tn__bernoulli_tensor_fill_f64(&gen->mt, (double *)tn__data(tg.buf),
					      (const double *)tn__data(pc), tg.n);
	else
		tn__bernoulli_tensor_fill_f32(&gen->mt, (float *)tn__data(tg.buf),
					      (const float *)tn__data(pc), tg.n);
	pthread_mutex_unlock(&gen->lock);
	rc = target_end(&tg, 0, who);
out:
	tn_tensor_unref(pc);
	tn_tensor_unref(pv);
	tn_tensor_unref(pe);
	return rc;
}

int tn__bernoulli__tensor_cpu(tn_tensor *self, const tn_tensor *p, tn_generator *generator)
{
	return bernoulli_tensor_impl(self, p, generator, false);
}

int tn__bernoulli__tensor_meta(tn_tensor *self, const tn_tensor *p, tn_generator *generator)
{
	return bernoulli_tensor_impl(self, p, generator, true);
}

/* at::empty_like(self, LEGACY_CONTIGUOUS_MEMORY_FORMAT) on self's device. */
static int empty_contiguous_like(const tn_tensor *self, tn_tensor **ret, const char *who)
{
	return tn__empty_like_device(self->storage->device, self->dtype, self->ndim, self->sizes, NULL,
				     ret, who);
}

static int bernoulli_impl(const tn_tensor *self, tn_generator *generator, tn_tensor **ret,
			  bool meta)
{
	tn_tensor *r;
	int rc;
	if ((rc = tn__check_tensor_args(self, ret, "bernoulli")) < 0 ||
	    (rc = empty_contiguous_like(self, &r, "bernoulli")) < 0)
		return rc;
	if ((rc = bernoulli_tensor_impl(r, self, generator, meta)) < 0) {
		tn_tensor_unref(r);
		return rc;
	}
	*ret = r;
	return 0;
}

int tn__bernoulli_cpu(const tn_tensor *self, tn_generator *generator, tn_tensor **ret_tensor)
{
	return bernoulli_impl(self, generator, ret_tensor, false);
}

int tn__bernoulli_meta(const tn_tensor *self, tn_generator *generator, tn_tensor **ret_tensor)
{
	return bernoulli_impl(self, generator, ret_tensor, true);
}

static int bernoulli_p_impl(const tn_tensor *self, double p, tn_generator *generator,
			    tn_tensor **ret, bool meta)
{
	tn_tensor *r;
	int rc;
	if ((rc = tn__check_tensor_args(self, ret, "bernoulli")) < 0 ||
	    (rc = empty_contiguous_like(self, &r, "bernoulli")) < 0)
		return rc;
	rc = meta ? tn__bernoulli__float_meta(r, p, generator)
		  : tn__bernoulli__float_cpu(r, p, generator);
	if (rc < 0) {
		tn_tensor_unref(r);
		return rc;
	}
	*ret = r;
	return 0;
}

int tn__bernoulli_p_cpu(const tn_tensor *self, double p, tn_generator *generator,
			tn_tensor **ret_tensor)
{
	return bernoulli_p_impl(self, p, generator, ret_tensor, false);
}

int tn__bernoulli_p_meta(const tn_tensor *self, double p, tn_generator *generator,
			 tn_tensor **ret_tensor)
{
	return bernoulli_p_impl(self, p, generator, ret_tensor, true);
}

/* ---- factories --------------------------------------------------------------------------------- */

/* at::empty(size, options) then @fill on it (the CPU or Meta in-place kernel). */
#define FACTORY(name, fill, ...)                                                                \
	do {                                                                                    \
		tn_tensor *r;                                                                   \
		int rc;                                                                         \
		if (!ret_tensor)                                                                \
			return tn__error(TN_EINVAL, "%s: NULL ret_tensor", name);               \
		if ((rc = tn_empty(nsize, size, dtype, device, TN_CONTIGUOUS_FORMAT, &r)) < 0) \
			return rc;                                                              \
		if ((rc = fill(r, __VA_ARGS__)) < 0) {                                          \
			tn_tensor_unref(r);                                                     \
			return rc;                                                              \
		}                                                                               \
		*ret_tensor = r;                                                                \
		return 0;                                                                       \
	} while (0)

int tn__rand_cpu(int nsize, const int64_t *size, tn_generator *generator, enum tn_dtype dtype,
		 tn_device device, tn_tensor **ret_tensor)
{
	FACTORY("rand", tn__uniform__cpu, 0.0, 1.0, generator);
}

int tn__rand_meta(int nsize, const int64_t *size, tn_generator *generator, enum tn_dtype dtype,
		  tn_device device, tn_tensor **ret_tensor)
{
	FACTORY("rand", tn__uniform__meta, 0.0, 1.0, generator);
}

int tn__randn_cpu(int nsize, const int64_t *size, tn_generator *generator, enum tn_dtype dtype,
		  tn_device device, tn_tensor **ret_tensor)
{
	FACTORY("randn", tn__normal__cpu, 0.0, 1.0, generator);
}

int tn__randn_meta(int nsize, const int64_t *size, tn_generator *generator, enum tn_dtype dtype,
		   tn_device device, tn_tensor **ret_tensor)
{
	FACTORY("randn", tn__normal__meta, 0.0, 1.0, generator);
}

int tn__randint_low_cpu(int64_t low, int64_t high, int nsize, const int64_t *size,
			tn_generator *generator, enum tn_dtype dtype, tn_device device,
			tn_tensor **ret_tensor)
{
	FACTORY("randint", tn__random__from_cpu, low, &high, generator);
}

int tn__randint_low_meta(int64_t low, int64_t high, int nsize, const int64_t *size,
			 tn_generator *generator, enum tn_dtype dtype, tn_device device,
			 tn_tensor **ret_tensor)
{
	FACTORY("randint", tn__random__from_meta, low, &high, generator);
}

int tn__randint_cpu(int64_t high, int nsize, const int64_t *size, tn_generator *generator,
		    enum tn_dtype dtype, tn_device device, tn_tensor **ret_tensor)
{
	return tn__randint_low_cpu(0, high, nsize, size, generator, dtype, device, ret_tensor);
}

int tn__randint_meta(int64_t high, int nsize, const int64_t *size, tn_generator *generator,
		     enum tn_dtype dtype, tn_device device, tn_tensor **ret_tensor)
{
	return tn__randint_low_meta(0, high, nsize, size, generator, dtype, device, ret_tensor);
}

/* rand_like/randn_like: empty_like (preserve_format, dtype when given) then the fill. */
static int like_impl(const tn_tensor *self, const enum tn_dtype *dtype, bool normal, bool meta,
		     tn_tensor **ret, const char *who)
{
	int64_t strides[TN_MAX_DIMS];
	tn_tensor *r;
	int rc;

	if ((rc = tn__check_tensor_args(self, ret, who)) < 0)
		return rc;
	tn__preserve_strides(self, strides);
	if ((rc = tn__empty_like_device(self->storage->device, dtype ? *dtype : self->dtype,
					self->ndim, self->sizes, strides, &r, who)) < 0)
		return rc;
	if (normal)
		rc = meta ? tn__normal__meta(r, 0.0, 1.0, NULL) : tn__normal__cpu(r, 0.0, 1.0, NULL);
	else
		rc = meta ? tn__uniform__meta(r, 0.0, 1.0, NULL) : tn__uniform__cpu(r, 0.0, 1.0, NULL);
	if (rc < 0) {
		tn_tensor_unref(r);
		return rc;
	}
	*ret = r;
	return 0;
}

int tn__rand_like_cpu(const tn_tensor *self, const enum tn_dtype *dtype, tn_tensor **ret_tensor)
{
	return like_impl(self, dtype, false, false, ret_tensor, "rand_like");
}

int tn__rand_like_meta(const tn_tensor *self, const enum tn_dtype *dtype, tn_tensor **ret_tensor)
{
	return like_impl(self, dtype, false, true, ret_tensor, "rand_like");
}

int tn__randn_like_cpu(const tn_tensor *self, const enum tn_dtype *dtype, tn_tensor **ret_tensor)
{
	return like_impl(self, dtype, true, false, ret_tensor, "randn_like");
}

int tn__randn_like_meta(const tn_tensor *self, const enum tn_dtype *dtype, tn_tensor **ret_tensor)
{
	return like_impl(self, dtype, true, true, ret_tensor, "randn_like");
}

/*
 * randperm: at::empty({n}) then randperm_out_cpu: check_supported_max_int_with_precision, then
 * randperm_cpu<T>, whose swaps move values of T; since they depend only on the draws, the
 * result is the int64 permutation converted to T.
 */
static int randperm_checks(int64_t n, enum tn_dtype d)
{
	int64_t v = n > 0 ? n - 1 : n;
	const char *ctype = NULL;
	switch (d) {
	case TN_UINT8: ctype = v > UINT8_MAX ? "uint8_t" : NULL; break;
	case TN_INT8: ctype = v > INT8_MAX ? "int8_t" : NULL; break;
	case TN_INT16: ctype = v > INT16_MAX ? "int16_t" : NULL; break;
	case TN_INT32: ctype = v > INT32_MAX ? "int" : NULL; break;
	default: break;
	}
	if (ctype)
		return tn__error(TN_EINVAL, "value cannot be converted to type %s without overflow",
				 ctype);
	if (d == TN_FLOAT16 && n > (INT64_C(1) << 11) + 1)
		return tn__error(TN_EINVAL, "n cannot be greater than 2049 for Half type.");
	if (d == TN_FLOAT32 && n > (INT64_C(1) << 24) + 1)
		return tn__error(TN_EINVAL, "n cannot be greater than 2^24+1 for Float type.");
	if (d == TN_FLOAT64 && n > (INT64_C(1) << 53) + 1)
		return tn__error(TN_EINVAL, "n cannot be greater than 2^53+1 for Double type.");
	if (d == TN_BOOL)
		return not_implemented("randperm", d);
	return 0;
}

static int randperm_impl(int64_t n, tn_generator *generator, enum tn_dtype dtype,
			 tn_device device, tn_tensor **ret_tensor, bool meta)
{
	tn_tensor *r, *perm = NULL;
	int rc;

	if (!ret_tensor)
		return tn__error(TN_EINVAL, "randperm: NULL ret_tensor");
	if ((rc = tn_empty(1, &n, dtype, device, TN_CONTIGUOUS_FORMAT, &r)) < 0)
		return rc;
	if ((rc = randperm_checks(n, dtype)) < 0 || (rc = resolve(generator, &generator, "randperm")) < 0)
		goto fail;
	if (!meta && n > 0) {
		if (dtype == TN_INT64)
			perm = tn_tensor_ref(r);
		else if ((rc = tn__empty_like_device(TN_CPU, TN_INT64, 1, &n, NULL, &perm,
						     "randperm")) < 0)
			goto fail;
		pthread_mutex_lock(&generator->lock);
		tn__randperm_i64(&generator->mt, (int64_t *)tn__data(perm), (size_t)n);
		pthread_mutex_unlock(&generator->lock);
		if (perm != r && (rc = tn__copy(r, perm, TN_KEY_CPU, "randperm")) < 0)
			goto fail;
		tn_tensor_unref(perm);
	}
	*ret_tensor = r;
	return 0;
fail:
	tn_tensor_unref(perm);
	tn_tensor_unref(r);
	return rc;
}

int tn__randperm_cpu(int64_t n, tn_generator *generator, enum tn_dtype dtype, tn_device device,
		     tn_tensor **ret_tensor)
{
	return randperm_impl(n, generator, dtype, device, ret_tensor, false);
}

int tn__randperm_meta(int64_t n, tn_generator *generator, enum tn_dtype dtype, tn_device device,
		      tn_tensor **ret_tensor)
{
	return randperm_impl(n, generator, dtype, device, ret_tensor, true);
}

/* ---- dropout ----------------------------------------------------------------------------------- */

/*
 * ATen's _dropout_impl (Dropout.cpp) on the CPU, where 1.13 never takes the fused kernel:
 * identity when p is 0, not training, or nothing to drop; input * 0 when p is 1; else
 * noise = empty_like(input).bernoulli_(1 - p).div_(1 - p) and input * noise.
 * @inplace multiplies into @self and sets *ret to NULL.
 */
static int dropout_impl(tn_tensor *self, double p, bool train, bool inplace, bool meta,
			tn_tensor **ret)
{
	static const char who[] = "dropout";
	tn_tensor *noise = NULL;
	int rc;

	if ((rc = tn__check_tensor_args(self, inplace ? (void *)self : (void *)ret, who)) < 0)
		return rc;
	if (!(p >= 0.0 && p <= 1.0))
		return tn__error(TN_EINVAL, "dropout probability has to be between 0 and 1, but got %g",
				 p);
	if (p == 0.0 || !train || self->numel == 0) {
		if (!inplace)
			*ret = tn_tensor_ref(self);
		return 0;
	}
	if (p == 1.0) {
		int64_t none = 0;
		if ((rc = tn__empty_like_device(self->storage->device, self->dtype, 0, &none, NULL,
						&noise, who)) < 0 ||
		    (rc = tn_fill_(noise, tn_scalar_int(0))) < 0)
			goto out;
	} else {
		if ((rc = empty_contiguous_like(self, &noise, who)) < 0)
			goto out;
		rc = meta ? tn__bernoulli__float_meta(noise, 1.0 - p, NULL)
			  : tn__bernoulli__float_cpu(noise, 1.0 - p, NULL);
		if (rc < 0 || (rc = tn_div_scalar_mode_(noise, tn_scalar_double(1.0 - p), NULL)) < 0)
			goto out;
	}
	rc = inplace ? tn_mul_(self, noise) : tn_mul(self, noise, ret);
out:
	tn_tensor_unref(noise);
	return rc;
}

int tn__dropout_cpu(const tn_tensor *input, double p, bool train, tn_tensor **ret_tensor)
{
	return dropout_impl((tn_tensor *)input, p, train, false, false, ret_tensor);
}

int tn__dropout_meta(const tn_tensor *input, double p, bool train, tn_tensor **ret_tensor)
{
	return dropout_impl((tn_tensor *)input, p, train, false, true, ret_tensor);
}

int tn__dropout__cpu(tn_tensor *self, double p, bool train)
{
	return dropout_impl(self, p, train, true, false, NULL);
}

int tn__dropout__meta(tn_tensor *self, double p, bool train)
{
	return dropout_impl(self, p, train, true, true, NULL);
}
