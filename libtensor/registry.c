/* SPDX-License-Identifier: MIT */
/*
 * The operator registry and the dispatcher: definitions, kernel registrations, fallbacks,
 * lookup by name, dispatch by key, and boxed calls.
 *
 * As ATen's Dispatcher and OperatorEntry: every operator name ("ns::name.overload") maps to
 * one entry, found in constant time through an open-addressing hash table. Each entry has a
 * dispatch table with one slot per key, holding the newest kernel registered for that key.
 * Registration and deregistration serialise on one mutex and publish with release stores;
 * lookups and calls take no lock and read with acquire loads. Entries, kernel records and
 * replaced schemas are never freed, so a concurrent call never sees freed memory; like
 * PyTorch's dispatcher singleton the registry is not torn down at exit either (a thread
 * still calling an operator while the process exits, or a destructor that deregisters, must
 * find it intact). It stays reachable from the statics, so leak checkers do not report it.
 * Each deregistration therefore keeps its record (about 100 bytes; a removed definition
 * keeps its schema, about 1 KiB) until the process exits. The registry's memory comes from
 * calloc, outside the allocator statistics: it is process-wide state, not tensor data.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

#define TABLE_SITE "libtensor/ops/functions.yaml"

enum reg_kind { REG_DEF, REG_IMPL, REG_FALLBACK };

struct tn_registration {
	enum reg_kind kind;
	struct tn_op *op;
	enum tn_dispatch_key key;
	struct tn__kernel *kernel;   /* impl and fallback */
	struct tn_registration *next; /* older registration for the same op and key */
	char *file;                   /* a kernel's record owns its copy; see kernel_free */
	int line;
};

struct op_table {
	size_t cap; /* a power of two */
	size_t used;
	_Atomic(struct tn_op *) slots[];
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct op_table *) ops;
static struct tn_op **defined;          /* operators in definition order */
static size_t ndefined, defined_cap;
static _Atomic(const struct tn__kernel *) fallbacks[TN_NUM_DISPATCH_KEYS];
static struct tn_registration *fallback_regs[TN_NUM_DISPATCH_KEYS];
static struct tn__kernel *retired_kernels;
static tn_schema **retired_schemas;
static size_t nretired_schemas, retired_schemas_cap;
static struct op_table **old_tables;
static size_t nold_tables, old_tables_cap;

atomic_bool tn__builtins_ready;
static size_t builtins_done; /* table operators fully registered, under the lock */

TN_EXPORT const char *tn_dispatch_key_name(enum tn_dispatch_key key)
{
	switch (key) {
#define TN_X_(e, name) \
	case e:        \
		return name;
		TN_DISPATCH_KEY_LIST(TN_X_)
#undef TN_X_
	default:
		return NULL;
	}
}

TN_EXPORT enum tn_dispatch_key tn_dispatch_key_for_device(enum tn_device_type type)
{
	return (unsigned)type < TN_NUM_DISPATCH_KEYS ? (enum tn_dispatch_key)type : TN_KEY_CPU;
}

/* ---- names and the hash table ---- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* A name as looked up: "aten::" is implied when the name has no namespace. */
struct qname {
	const char *prefix; /* "" or "aten::" */
	size_t prefix_len;
	const char *rest;
	size_t rest_len;
	uint64_t hash;
};

static struct qname qualify(const char *name)
{
	struct qname q;
	bool has_ns = strstr(name, "::") != NULL;
	q.prefix = has_ns ? "" : "aten::";
	q.prefix_len = strlen(q.prefix);
	q.rest = name;
	q.rest_len = strlen(name);
	q.hash = fnv(fnv(FNV_OFFSET, q.prefix, q.prefix_len), q.rest, q.rest_len);
	return q;
}

static bool qname_is(const struct qname *q, const struct tn_op *op)
{
	return op->hash == q->hash && strncmp(op->name, q->prefix, q->prefix_len) == 0 &&
	       strcmp(op->name + q->prefix_len, q->rest) == 0;
}

static struct tn_op *table_find(const struct op_table *t, const struct qname *q)
{
	if (!t)
		return NULL;
	size_t mask = t->cap - 1;
	for (size_t i = q->hash & mask;; i = (i + 1) & mask) {
		/* Acquire: the entry's name and hash were written before it was published. */
		struct tn_op *op = atomic_load_explicit(&t->slots[i], memory_order_acquire);
		if (!op)
			return NULL;
		if (qname_is(q, op))
			return op;
	}
}

static void table_put(struct op_table *t, struct tn_op *op)
{
	size_t mask = t->cap - 1;
	size_t i = op->hash & mask;
	while (atomic_load_explicit(&t->slots[i], memory_order_relaxed))
		i = (i + 1) & mask;
	atomic_store_explicit(&t->slots[i], op, memory_order_release);
	t->used++;
}

static int push_ptr(void ***array, size_t *n, size_t *cap, void *p)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void **a = realloc(*array, ncap * sizeof(*a));
		if (!a)
			return tn__error(TN_ENOMEM, "out of memory growing the operator registry");
		*array = a;
		*cap = ncap;
	}
	(*array)[(*n)++] = p;
	return 0;
}

/* Under the lock: make room for one more entry, keeping the load under one half. */
static int table_reserve(void)
{
	struct op_table *t = atomic_load_explicit(&ops, memory_order_relaxed);
	if (t && (t->used + 1) * 2 <= t->cap)
		return 0;
	size_t cap = t ? t->cap * 2 : 256;
	struct op_table *nt = calloc(1, sizeof(*nt) + cap * sizeof(nt->slots[0]));
	if (!nt)
		return tn__error(TN_ENOMEM, "out of memory growing the operator registry");
	nt->cap = cap;
	if (t) {
		if (push_ptr((void ***)&old_tables, &nold_tables, &old_tables_cap, t) < 0) {
			free(nt);
			return TN_ENOMEM;
		}
		for (size_t i = 0; i < t->cap; i++) {
			struct tn_op *op = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
			if (op)
				table_put(nt, op);
		}
	}
	/* Release: readers that load the new table see its filled slots. The old table stays
	 * readable (it is retired, not freed) for lookups already walking it. */
	atomic_store_explicit(&ops, nt, memory_order_release);
	return 0;
}

/* Under the lock: the entry for @name, created when absent. */
static int op_get_or_create(const char *name, struct tn_op **ret)
{
	struct qname q = qualify(name);
	struct tn_op *op = table_find(atomic_load_explicit(&ops, memory_order_relaxed), &q);
	int rc;

	if (op) {
		*ret = op;
		return 0;
	}
	if ((rc = table_reserve()) < 0)
		return rc;
	op = calloc(1, sizeof(*op));
	if (!op || !(op->name = malloc(q.prefix_len + q.rest_len + 1))) {
		free(op);
		return tn__error(TN_ENOMEM, "out of memory registering %s", name);
	}
	memcpy(op->name, q.prefix, q.prefix_len);
	memcpy(op->name + q.prefix_len, q.rest, q.rest_len + 1);
	op->hash = q.hash;
	table_put(atomic_load_explicit(&ops, memory_order_relaxed), op);
	*ret = op;
	return 0;
}

static struct tn_registration *registration_new(enum reg_kind kind, const char *file, int line)
{
	struct tn_registration *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->kind = kind;
	r->file = strdup(file ? file : "<unknown>");
	r->line = line;
	if (!r->file) {
		free(r);
		return NULL;
	}
	return r;
}

/* The file name of a kernel registration belongs to its kernel record, which may outlive
 * the registration (a concurrent call can still be reading a retired record). */
static void registration_free(struct tn_registration *r)
{
	if (r) {
		if (!r->kernel)
			free(r->file);
		free(r);
	}
}

/* ---- definitions ---- */

/* "ns::name.overload" in a malloc'd string (NULL on ENOMEM). */
static char *full_name(const tn_schema *s)
{
	const char *ov = tn_schema_overload(s);
	size_t n = strlen(tn_schema_name(s)) + strlen(ov) + 2;
	char *buf = malloc(n);
	if (buf)
		snprintf(buf, n, "%s%s%s", tn_schema_name(s), *ov ? "." : "", ov);
	return buf;
}

/* Under the lock. Takes ownership of @schema. */
static int def_locked(tn_schema *schema, tn__unbox_fn unbox, const char *file, int line,
		      tn_registration **ret, struct tn_op **ret_op)
{
	char *name = full_name(schema);
	struct tn_registration *r;
	struct tn_op *op = NULL;
	int rc;

	if (!name) {
		rc = tn__error(TN_ENOMEM, "out of memory registering an operator");
		goto fail;
	}
	if ((rc = op_get_or_create(name, &op)) < 0)
		goto fail;
	if (op->def) {
		rc = tn__error(TN_EBUSY,
			       "Tried to register an operator (%s) with the same name and overload "
			       "name multiple times. Each overload's schema should only be "
			       "registered with a single call to def(). Duplicate registration: "
			       "%s:%d. Original registration: %s:%d",
			       tn_schema_str(schema), file ? file : "<unknown>", line,
			       op->def->file, op->def->line);
		goto fail;
	}
	if (!op->listed &&
	    (rc = push_ptr((void ***)&defined, &ndefined, &defined_cap, op)) < 0)
		goto fail;
	op->listed = true;
	if (!(r = registration_new(REG_DEF, file, line))) {
		rc = tn__error(TN_ENOMEM, "out of memory registering %s", name);
		goto fail;
	}
	r->op = op;
	op->def = r;
	op->unbox = unbox;
	/* Release: the schema is complete before callers can load it. */
	atomic_store_explicit(&op->schema, schema, memory_order_release);
	if (ret)
		*ret = r;
	if (ret_op)
		*ret_op = op;
	free(name);
	return 0;
fail:
	free(name);
	tn_schema_free(schema);
	return rc;
}

TN_EXPORT int tn_op_def_at(const char *schema, const char *file, int line,
			   tn_registration **ret_registration)
{
	tn_schema *s;
	int rc;

	if (!schema || !ret_registration)
		return tn__error(TN_EINVAL, "tn_op_def_at: NULL %s",
				 schema ? "ret_registration" : "schema");
	if ((rc = tn__registry_init()) < 0)
		return rc;
	if ((rc = tn_schema_parse(schema, &s)) < 0)
		return rc;
	if (!strstr(tn_schema_name(s), "::")) {
		rc = tn__error(TN_EINVAL,
			       "operator '%s' has no namespace: define it as 'myns::%s(...)'",
			       tn_schema_name(s), tn_schema_name(s));
		tn_schema_free(s);
		return rc;
	}
	pthread_mutex_lock(&reg_lock);
	rc = def_locked(s, NULL, file, line, ret_registration, NULL);
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

/* ---- kernels ---- */

static void publish_slot(struct tn_op *op, enum tn_dispatch_key key)
{
	struct tn_registration *head = op->impls[key];
	/* Release: the record's fields are written before a caller can load the pointer. */
	atomic_store_explicit(&op->table[key], head ? head->kernel : NULL, memory_order_release);
}

/* Under the lock. */
static int impl_locked(struct tn_op *op, enum tn_dispatch_key key, tn_fn unboxed,
		       tn_boxed_kernel boxed, void *ctx, const char *file, int line,
		       tn_registration **ret)
{
	struct tn_registration *r = registration_new(REG_IMPL, file, line);
	struct tn__kernel *k = calloc(1, sizeof(*k));

	if (!r || !k) {
		registration_free(r);
		free(k);
		return tn__error(TN_ENOMEM, "out of memory registering a kernel for %s", op->name);
	}
	k->unboxed = unboxed;
	k->boxed = boxed;
	k->ctx = ctx;
	k->unbox = op->unbox;
	k->key = key;
	k->file = r->file;
	k->line = line;
	r->op = op;
	r->key = key;
	r->kernel = k;
	r->next = op->impls[key];
	op->impls[key] = r;
	publish_slot(op, key);
	if (ret)
		*ret = r;
	return 0;
}

static int check_key(enum tn_dispatch_key key, const char *who)
{
	if ((unsigned)key >= TN_NUM_DISPATCH_KEYS)
		return tn__error(TN_EINVAL, "%s: %d is not a dispatch key", who, (int)key);
	return 0;
}

/* Under the lock: the defined operator @name, else TN_ENOENT naming the registration site. */
static int find_defined_locked(const char *name, enum tn_dispatch_key key, const char *file,
			       int line, struct tn_op **ret)
{
	struct qname q = qualify(name);
	struct tn_op *op = table_find(atomic_load_explicit(&ops, memory_order_relaxed), &q);
	if (!op || !op->def)
		return tn__error(TN_ENOENT,
				 "Tried to register a kernel (%s:%d) for operator %s%s for dispatch "
				 "key %s, but no schema is registered for that operator",
				 file ? file : "<unknown>", line, q.prefix, name,
				 tn_dispatch_key_name(key));
	*ret = op;
	return 0;
}

TN_EXPORT int tn_op_impl_at(const char *name, enum tn_dispatch_key key, tn_boxed_kernel kernel,
			    void *ctx, const char *file, int line,
			    tn_registration **ret_registration)
{
	struct tn_op *op;
	int rc;

	if (!name || !kernel || !ret_registration)
		return tn__error(TN_EINVAL, "tn_op_impl_at: NULL %s",
				 !name ? "name" : !kernel ? "kernel" : "ret_registration");
	if ((rc = check_key(key, "tn_op_impl_at")) < 0 || (rc = tn__registry_init()) < 0)
		return rc;
	pthread_mutex_lock(&reg_lock);
	if ((rc = find_defined_locked(name, key, file, line, &op)) == 0)
		rc = impl_locked(op, key, NULL, kernel, ctx, file, line, ret_registration);
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

TN_EXPORT int tn_op_impl_unboxed_at(const char *name, enum tn_dispatch_key key,
				    const char *signature, tn_fn kernel, tn_boxed_kernel boxed,
				    void *ctx, const char *file, int line,
				    tn_registration **ret_registration)
{
	tn_schema *sig = NULL;
	struct tn_op *op;
	char why[256];
	int rc;

	if (!name || !signature || !kernel || !ret_registration)
		return tn__error(TN_EINVAL, "tn_op_impl_unboxed_at: NULL %s",
				 !name ? "name" : !signature ? "signature"
						 : !kernel	 ? "kernel"
								 : "ret_registration");
	if ((rc = check_key(key, "tn_op_impl_unboxed_at")) < 0 || (rc = tn__registry_init()) < 0)
		return rc;
	if ((rc = tn__schema_parse_signature(signature, &sig)) < 0)
		return rc;
	pthread_mutex_lock(&reg_lock);
	if ((rc = find_defined_locked(name, key, file, line, &op)) < 0)
		goto out;
	const tn_schema *schema = atomic_load_explicit(&op->schema, memory_order_relaxed);
	bool same = tn__schema_types_equal(schema, sig, why, sizeof(why));
	/* A return that aliases a written argument (Tensor(a!)) has no C parameter, so it
	 * changes the C signature: the annotations of the returns must agree too. */
	for (size_t i = 0; same && i < tn_schema_num_returns(schema); i++) {
		if (tn_schema_return_at(schema, i)->alias_write !=
		    tn_schema_return_at(sig, i)->alias_write) {
			snprintf(why, sizeof(why),
				 "return %zu is written-to (a!) in one and not in the other, which "
				 "changes the C parameters",
				 i + 1);
			same = false;
		}
	}
	if (!same) {
		rc = tn__error(TN_EINVAL,
			       "Mismatch in kernel C signature for operator %s: the kernel "
			       "registered at %s:%d for dispatch key %s declares '%s', the schema "
			       "registered at %s:%d is '%s': %s",
			       op->name, file ? file : "<unknown>", line, tn_dispatch_key_name(key),
			       signature, op->def->file, op->def->line, tn_schema_str(schema), why);
		goto out;
	}
	if (!op->unbox && !boxed) {
		rc = tn__error(TN_EINVAL,
			       "%s is not in the op table, so libtensor cannot box its arguments "
			       "for an unboxed kernel: register a boxed kernel with it",
			       op->name);
		goto out;
	}
	rc = impl_locked(op, key, kernel, boxed, ctx, file, line, ret_registration);
out:
	pthread_mutex_unlock(&reg_lock);
	tn_schema_free(sig);
	return rc;
}

TN_EXPORT int tn_fallback_impl_at(enum tn_dispatch_key key, tn_boxed_kernel kernel, void *ctx,
				  const char *file, int line, tn_registration **ret_registration)
{
	struct tn_registration *r;
	struct tn__kernel *k;
	int rc = 0;

	if (!kernel || !ret_registration)
		return tn__error(TN_EINVAL, "tn_fallback_impl_at: NULL %s",
				 kernel ? "ret_registration" : "kernel");
	if ((rc = check_key(key, "tn_fallback_impl_at")) < 0)
		return rc;
	pthread_mutex_lock(&reg_lock);
	if (fallback_regs[key]) {
		rc = tn__error(TN_EBUSY,
			       "Tried to register a fallback for dispatch key %s at %s:%d, but one "
			       "is already registered at %s:%d",
			       tn_dispatch_key_name(key), file ? file : "<unknown>", line,
			       fallback_regs[key]->file, fallback_regs[key]->line);
		goto out;
	}
	r = registration_new(REG_FALLBACK, file, line);
	k = calloc(1, sizeof(*k));
	if (!r || !k) {
		registration_free(r);
		free(k);
		rc = tn__error(TN_ENOMEM, "out of memory registering a fallback");
		goto out;
	}
	k->boxed = kernel;
	k->ctx = ctx;
	k->key = key;
	k->file = r->file;
	k->line = line;
	r->key = key;
	r->kernel = k;
	fallback_regs[key] = r;
	atomic_store_explicit(&fallbacks[key], k, memory_order_release);
	*ret_registration = r;
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

static void retire_kernel(struct tn__kernel *k)
{
	k->retired_next = retired_kernels;
	retired_kernels = k;
}

TN_EXPORT int tn_deregister(tn_registration *r)
{
	int rc = 0;

	if (!r)
		return 0;
	pthread_mutex_lock(&reg_lock);
	switch (r->kind) {
	case REG_DEF: {
		struct tn_op *op = r->op;
		for (int key = 0; key < TN_NUM_DISPATCH_KEYS; key++) {
			if (op->impls[key]) {
				rc = tn__error(TN_EBUSY,
					       "cannot remove the definition of %s while a kernel is "
					       "registered for it (%s at %s:%d)",
					       op->name, tn_dispatch_key_name((enum tn_dispatch_key)key),
					       op->impls[key]->file, op->impls[key]->line);
				goto out;
			}
		}
		tn_schema *s = atomic_load_explicit(&op->schema, memory_order_relaxed);
		if (push_ptr((void ***)&retired_schemas, &nretired_schemas, &retired_schemas_cap,
			     s) < 0) {
			rc = TN_ENOMEM;
			goto out;
		}
		atomic_store_explicit(&op->schema, NULL, memory_order_release);
		op->def = NULL;
		op->unbox = NULL;
		break;
	}
	case REG_IMPL: {
		struct tn_registration **p = &r->op->impls[r->key];
		while (*p != r)
			p = &(*p)->next;
		*p = r->next;
		publish_slot(r->op, r->key);
		retire_kernel(r->kernel);
		break;
	}
	case REG_FALLBACK:
		fallback_regs[r->key] = NULL;
		atomic_store_explicit(&fallbacks[r->key], NULL, memory_order_release);
		retire_kernel(r->kernel);
		break;
	}
	registration_free(r);
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

/* ---- the op table ---- */

static int register_builtin_locked(size_t i)
{
	const struct tn__builtin_op *b = &tn__builtin_ops[i];
	struct tn_op *op = tn__builtin_handles[i];
	tn_schema *s;
	int rc;

	if (!op) {
		if ((rc = tn_schema_parse(b->schema, &s)) < 0)
			return tn__error(rc, "op table entry at %s:%d: %s", TABLE_SITE, b->line,
					 tn_last_error());
		if ((rc = def_locked(s, b->unbox, TABLE_SITE, b->line, NULL, &op)) < 0)
			return rc;
		tn__builtin_handles[i] = op;
	}
	for (int j = 0; j < b->nkernels; j++) {
		const struct tn__builtin_kernel *bk = &b->kernels[j];
		bool have = false;
		for (struct tn_registration *r = op->impls[bk->key]; r; r = r->next)
			have |= r->kernel->unboxed == bk->fn;
		if (!have && (rc = impl_locked(op, bk->key, bk->fn, NULL, NULL, TABLE_SITE, bk->line,
					       NULL)) < 0)
			return rc;
	}
	return 0;
}

int tn__registry_init(void)
{
	int rc = 0;

	if (atomic_load_explicit(&tn__builtins_ready, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&reg_lock);
	while (builtins_done < tn__num_builtin_ops) {
		if ((rc = register_builtin_locked(builtins_done)) < 0)
			break;
		builtins_done++;
	}
	if (rc == 0)
		atomic_store_explicit(&tn__builtins_ready, true, memory_order_release);
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

int tn__builtin_op_slow(size_t index, struct tn_op **ret)
{
	int rc = tn__registry_init();
	if (rc < 0)
		return rc;
	*ret = tn__builtin_handles[index];
	return 0;
}

/* ---- lookup and introspection ---- */

TN_EXPORT int tn_op_find(const char *name, const tn_op **ret_op)
{
	struct tn_op *op;
	int rc;

	if (!name || !ret_op)
		return tn__error(TN_EINVAL, "tn_op_find: NULL %s", name ? "ret_op" : "name");
	if ((rc = tn__registry_init()) < 0)
		return rc;
	struct qname q = qualify(name);
	op = table_find(atomic_load_explicit(&ops, memory_order_acquire), &q);
	if (!op || !atomic_load_explicit(&op->schema, memory_order_acquire))
		return tn__error(TN_ENOENT, "No such operator %s%s", q.prefix, name);
	*ret_op = op;
	return 0;
}

TN_EXPORT const char *tn_op_name(const tn_op *op)
{
	return op ? op->name : NULL;
}

TN_EXPORT const tn_schema *tn_op_schema(const tn_op *op)
{
	return op ? atomic_load_explicit(&((tn_op *)op)->schema, memory_order_acquire) : NULL;
}

TN_EXPORT bool tn_op_has_kernel(const tn_op *op, enum tn_dispatch_key key)
{
	if (!op || (unsigned)key >= TN_NUM_DISPATCH_KEYS)
		return false;
	return atomic_load_explicit(&((tn_op *)op)->table[key], memory_order_acquire) != NULL;
}

TN_EXPORT int tn_op_kernel_unboxed(const tn_op *op, enum tn_dispatch_key key, tn_fn *ret_kernel)
{
	if (!op || !ret_kernel)
		return tn__error(TN_EINVAL, "tn_op_kernel_unboxed: NULL %s",
				 op ? "ret_kernel" : "op");
	if ((unsigned)key >= TN_NUM_DISPATCH_KEYS)
		return check_key(key, "tn_op_kernel_unboxed");
	const struct tn__kernel *k =
		atomic_load_explicit(&((tn_op *)op)->table[key], memory_order_acquire);
	if (!k || !k->unboxed)
		return tn__error(TN_ENOENT, "%s has no unboxed kernel for dispatch key %s",
				 op->name, tn_dispatch_key_name(key));
	*ret_kernel = k->unboxed;
	return 0;
}

TN_EXPORT int tn_op_foreach(int (*fn)(const tn_op *op, void *ctx), void *ctx)
{
	struct tn_op **snap;
	size_t n;
	int rc;

	if (!fn)
		return tn__error(TN_EINVAL, "tn_op_foreach: NULL fn");
	if ((rc = tn__registry_init()) < 0)
		return rc;
	/* Walk a snapshot, so the callback may register and deregister. */
	pthread_mutex_lock(&reg_lock);
	n = ndefined;
	snap = malloc((n ? n : 1) * sizeof(*snap));
	if (snap)
		memcpy(snap, defined, n * sizeof(*snap));
	pthread_mutex_unlock(&reg_lock);
	if (!snap)
		return tn__error(TN_ENOMEM, "tn_op_foreach: out of memory");
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		if (atomic_load_explicit(&snap[i]->schema, memory_order_acquire))
			rc = fn(snap[i], ctx);
	free(snap);
	return rc;
}

/* ---- dispatch ---- */

int tn__readonly_error(const char *who, const char *arg)
{
	return tn__error(TN_EPERM, "%s: argument '%s' is a sealed tensor, which is read-only", who,
			 arg);
}

int tn__keys_of_tensor_list(unsigned *keys, int n, tn_tensor *const *tensors, const char *who,
			    const char *arg)
{
	int rc;
	if (n < 0 || (n > 0 && !tensors))
		return tn__error(TN_EINVAL, "%s: bad tensor list '%s' (%d entries at %p)", who, arg,
				 n, (const void *)tensors);
	for (int i = 0; i < n; i++)
		if (tensors[i] && (rc = tn__keys_of_tensor(keys, tensors[i], who, arg)) < 0)
			return rc;
	return 0;
}

int tn__keys_of_device(unsigned *keys, const tn_device *device, const char *who)
{
	if (!device)
		return 0;
	if ((unsigned)device->type >= TN_NUM_DEVICE_TYPES)
		return tn__error(TN_EINVAL, "%s: %d is not a device type", who, (int)device->type);
	*keys |= 1u << (unsigned)device->type;
	return 0;
}

int tn__dispatch_slow(const struct tn_op *op, enum tn_dispatch_key key,
		      const struct tn__kernel **ret)
{
	char have[128];
	size_t pos = 0;
	const struct tn__kernel *k =
		atomic_load_explicit(&fallbacks[key], memory_order_acquire);

	if (k) {
		*ret = k;
		return 0;
	}
	have[0] = '\0';
	for (int i = 0; i < TN_NUM_DISPATCH_KEYS; i++) {
		if (!atomic_load_explicit(&((struct tn_op *)op)->table[i], memory_order_acquire))
			continue;
		pos += (size_t)snprintf(have + pos, sizeof(have) - pos, "%s%s", pos ? ", " : "",
					tn_dispatch_key_name((enum tn_dispatch_key)i));
	}
	return tn__error(TN_ENOTSUP,
			 "Could not run '%s' with arguments from the '%s' backend. '%s' is only "
			 "available for these backends: [%s].",
			 op->name, tn_dispatch_key_name(key), op->name, have);
}

static void drop_to(tn_stack *stack, size_t base)
{
	if (stack->size > base)
		tn__stack_drop(stack, stack->size - base);
}

int tn__call_kernel_boxed(const struct tn_op *op, const tn_schema *s, enum tn_dispatch_key key,
			  const struct tn__kernel *k, tn_stack *stack)
{
	size_t nargs = tn_schema_num_args(s), nret = tn_schema_num_returns(s);
	size_t base = stack->size - nargs;
	char want[64];
	int rc;

	if (!k->boxed) {
		/* An unboxed kernel through the operator's adapter: reserve for the results
		 * first so that pushing them cannot fail after the kernel ran. */
		if ((rc = tn_stack_reserve(stack, nret)) < 0) {
			drop_to(stack, base);
			return rc;
		}
		return k->unbox(k->unboxed, stack);
	}
	rc = k->boxed(op, key, stack, k->ctx);
	if (rc < 0) {
		drop_to(stack, base);
		return rc;
	}
	/* A program's kernel: hold it to the schema, so callers can trust the results. */
	if (stack->size != base + nret) {
		long got = (long)stack->size - (long)base;
		drop_to(stack, base);
		return tn__error(TN_EINVAL,
				 "the %s kernel of %s (%s:%d) left %ld values on the stack, but the "
				 "schema has %zu returns",
				 tn_dispatch_key_name(key), op->name, k->file, k->line, got, nret);
	}
	for (size_t i = 0; i < nret; i++) {
		const tn_schema_arg *r = tn_schema_return_at(s, i);
		const tn_ivalue *v = &stack->items[base + i];
		bool dead = v->tag == TN_IVALUE_TENSOR && !tn__handle_is(v->u.tensor, TN_MAGIC_TENSOR);
		if (v->tag == TN_IVALUE_TENSOR_LIST && tn__ivalue_fits(v, &r->type)) {
			size_t n = tn__ivalue_list_len(v);
			tn_tensor *const *t = tn__ivalue_list_tensors(v);
			for (size_t j = 0; j < n; j++)
				dead |= t[j] && !tn__handle_is(t[j], TN_MAGIC_TENSOR);
		}
		if (dead) {
			drop_to(stack, base);
			return tn__error(TN_EINVAL,
					 "the %s kernel of %s (%s:%d) returned a tensor that is not a "
					 "live handle for return %zu",
					 tn_dispatch_key_name(key), op->name, k->file, k->line, i);
		}
		if (!tn__ivalue_fits(v, &r->type)) {
			tn__type_format(&r->type, want, sizeof(want));
			const char *got = tn_ivalue_type_name(&stack->items[base + i]);
			drop_to(stack, base);
			return tn__error(TN_EINVAL,
					 "the %s kernel of %s (%s:%d) returned a value of type '%s' "
					 "for return %zu, of type '%s'",
					 tn_dispatch_key_name(key), op->name, k->file, k->line, got,
					 i, want);
		}
	}
	return 0;
}

TN_EXPORT int tn_op_call_boxed(const tn_op *op, tn_stack *stack)
{
	const struct tn__kernel *k;
	const tn_schema *s;
	unsigned keys = 0, dev_keys = 0;
	size_t nargs, base;
	char want[64];
	int rc;

	if (!op || !stack)
		return tn__error(TN_EINVAL, "tn_op_call_boxed: NULL %s", op ? "stack" : "op");
	s = atomic_load_explicit(&((struct tn_op *)op)->schema, memory_order_acquire);
	if (!s)
		return tn__error(TN_ENOENT, "No such operator %s", op->name);
	nargs = tn_schema_num_args(s);
	if (stack->size > stack->capacity || (stack->size && !stack->items))
		return tn__error(TN_EINVAL, "%s: a malformed stack (%zu values, capacity %zu, items %p)",
				 op->name, stack->size, stack->capacity, (void *)stack->items);
	if (stack->size < nargs)
		return tn__error(TN_EINVAL, "%s takes %zu arguments but the stack holds %zu values",
				 op->name, nargs, stack->size);
	base = stack->size - nargs;
	for (size_t i = 0; i < nargs; i++) {
		const tn_schema_arg *a = tn_schema_arg_at(s, i);
		tn_ivalue *v = &stack->items[base + i];
		if (!tn__ivalue_fits(v, &a->type)) {
			tn__type_format(&a->type, want, sizeof(want));
			rc = tn__error(TN_EINVAL,
				       "Expected a value of type '%s' for argument '%s' but instead "
				       "found type '%s'.",
				       want, a->name, tn_ivalue_type_name(v));
			drop_to(stack, base);
			return rc;
		}
		/* A value built by hand rather than by tn_ivalue_tensor() may hold anything:
		 * check the handles before reading their devices. */
		if (v->tag == TN_IVALUE_TENSOR) {
			if ((rc = tn__keys_of_tensor(&keys, v->u.tensor, op->name, a->name)) < 0) {
				drop_to(stack, base);
				return rc;
			}
		} else if (v->tag == TN_IVALUE_TENSOR_LIST) {
			size_t n = tn__ivalue_list_len(v);
			tn_tensor *const *t = tn__ivalue_list_tensors(v);
			for (size_t j = 0; j < n; j++) {
				if (t[j] && (rc = tn__keys_of_tensor(&keys, t[j], op->name, a->name)) < 0) {
					drop_to(stack, base);
					return rc;
				}
			}
		} else if (v->tag == TN_IVALUE_DEVICE && !dev_keys) {
			if (v->u.i < 0 || v->u.i >= TN_NUM_DEVICE_TYPES) {
				rc = tn__error(TN_EINVAL, "%s: %lld is not a device type", op->name,
					       (long long)v->u.i);
				drop_to(stack, base);
				return rc;
			}
			dev_keys = 1u << (unsigned)v->u.i;
		}
	}
	if (!keys)
		keys = dev_keys;
	if ((rc = tn__dispatch(op, tn__highest_key(keys), &k)) < 0) {
		drop_to(stack, base);
		return rc;
	}
	return tn__call_kernel_boxed(op, s, tn__highest_key(keys), k, stack);
}

TN_EXPORT int tn_call_boxed(const char *name, tn_stack *stack)
{
	const tn_op *op;
	int rc;

	if ((rc = tn_op_find(name, &op)) < 0)
		return rc;
	return tn_op_call_boxed(op, stack);
}

int tn__ivalue_take_tensor_array(tn_ivalue *value, int *ret_n, tn_tensor ***ret)
{
	size_t n = tn__ivalue_list_len(value);
	tn_tensor *const *src = tn__ivalue_list_tensors(value);
	tn_tensor **arr;

	if (n > INT32_MAX)
		return tn__error(TN_EOVERFLOW, "a list of %zu tensors is too long", n);
	arr = tn__malloc((n ? n : 1) * sizeof(*arr));
	if (!arr)
		return tn__error(TN_ENOMEM, "out of memory for a list of %zu tensors", n);
	for (size_t i = 0; i < n; i++)
		arr[i] = src[i] ? tn_tensor_ref(src[i]) : NULL;
	*ret_n = (int)n;
	*ret = arr;
	return 0;
}
