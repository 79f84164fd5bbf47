// SPDX-License-Identifier: MIT
/*
 * libtensor.Client (a connection to tensord) and libtensor.Arena (a handle on a shared-memory
 * arena): publish and look up named tensors zero-copy. Closing either releases the handle;
 * tensors looked up keep their arena attached until they are gone (the C library's rule), and
 * any operation on a closed object raises ValueError.
 */
#include "pytn.h"

#include <math.h>
#include <string.h>
#include <time.h>

typedef struct {
	PyObject_HEAD
	tn_tensord *conn;
} client_object;

typedef struct {
	PyObject_HEAD
	tn_arena *arena;
	PyObject *name;
} arena_object;

static PyObject *closed_error(const char *what)
{
	return PyErr_Format(PyExc_ValueError, "I/O operation on a closed %s: the %s is closed",
			    what, what);
}

#define CLIENT_CHECK(self)                                   \
	do {                                                 \
		if (!((client_object *)(self))->conn)        \
			return closed_error("Client");      \
	} while (0)
#define ARENA_CHECK(self)                                    \
	do {                                                 \
		if (!((arena_object *)(self))->arena)        \
			return closed_error("Arena");       \
	} while (0)
#define A(self) (((arena_object *)(self))->arena)

static PyObject *wrap_arena(tn_arena *arena, const char *name)
{
	arena_object *a = PyObject_New(arena_object, &pytn_arena_type);
	if (!a) {
		tn_arena_unref(arena);
		return NULL;
	}
	a->arena = arena;
	a->name = PyUnicode_FromString(name);
	if (!a->name) {
		Py_DECREF(a);
		return NULL;
	}
	return (PyObject *)a;
}

/* A list of the n names at @first, @first + @stride, ...: the name fields of an array of
 * records (tn_arena_entry, tn_tensord_arena_info). */
static PyObject *name_list(const char *first, size_t n, size_t stride)
{
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *s = PyUnicode_FromString(first + i * stride);
		if (!s)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, (Py_ssize_t)i, s);
	}
	return list;
}

/* ---- Client ------------------------------------------------------------------------------------ */

PyObject *pytn_connect(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "socket", NULL };
	PyObject *sock = Py_None, *bytes = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:connect", kwlist, &sock))
		return NULL;
	const char *path = NULL;
	if (sock != Py_None) {
		if (!PyUnicode_FSConverter(sock, &bytes))
			return NULL;
		path = PyBytes_AS_STRING(bytes);
	}
	tn_tensord *conn;
	int rc;
	char msg[1024] = "";
	Py_BEGIN_ALLOW_THREADS
	rc = tn_tensord_connect(path, &conn);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
	Py_END_ALLOW_THREADS
	Py_XDECREF(bytes);
	if (rc < 0)
		return pytn_raise_msg(rc, msg);
	client_object *c = PyObject_New(client_object, &pytn_client_type);
	if (!c) {
		tn_tensord_close(conn);
		return NULL;
	}
	c->conn = conn;
	return (PyObject *)c;
}

static void client_dealloc(PyObject *self)
{
	tn_tensord_close(((client_object *)self)->conn);
	PyObject_Free(self);
}

static PyObject *client_close(PyObject *self, PyObject *unused)
{
	client_object *c = (client_object *)self;
	tn_tensord_close(c->conn);
	c->conn = NULL;
	Py_RETURN_NONE;
}

static PyObject *enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

static PyObject *client_exit(PyObject *self, PyObject *args)
{
	return client_close(self, NULL);
}

static PyObject *client_closed(PyObject *self, void *c)
{
	return PyBool_FromLong(!((client_object *)self)->conn);
}

static PyObject *client_status(PyObject *self, PyObject *unused)
{
	CLIENT_CHECK(self);
	tn_tensord_status st;
	int rc = tn_tensord_status_get(((client_object *)self)->conn, &st);
	if (rc < 0)
		return pytn_raise(rc);
	return Py_BuildValue("{s:i,s:I,s:K,s:K,s:K,s:I,s:I,s:K,s:K,s:K,s:s,s:I,s:I,s:I,s:I}", "pid",
			     (int)st.pid, "uid", st.uid, "instance", (unsigned long long)st.instance,
			     "started", (unsigned long long)st.started, "uptime_ns",
			     (unsigned long long)st.uptime_ns, "arenas", st.arenas, "clients",
			     st.clients, "requests", (unsigned long long)st.requests,
			     "reclaimed_slots", (unsigned long long)st.reclaimed_slots,
			     "protocol_errors", (unsigned long long)st.protocol_errors, "arena_dir",
			     st.arena_dir, "client_id", st.client_id, "peer_uid", st.peer_uid,
			     "peer_gid", st.peer_gid, "version", st.version);
}

static PyObject *client_arena(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "read_only", "create", "size", "mode", NULL };
	const char *name;
	int read_only = 0, create = 0;
	unsigned long long size = 0;
	unsigned int mode = 0;
	PyObject *size_obj = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|$ppOI:arena", kwlist, &name, &read_only,
					 &create, &size_obj, &mode))
		return NULL;
	CLIENT_CHECK(self);
	if (size_obj != Py_None) {
		size = PyLong_AsUnsignedLongLong(size_obj);
		if (PyErr_Occurred())
			return NULL;
	}
	tn_tensord *conn = ((client_object *)self)->conn;
	tn_arena *arena;
	int rc = 0;
	char msg[1024] = "";
	Py_BEGIN_ALLOW_THREADS
	if (create) {
		tn_tensord_arena_options opts;
		tn_tensord_arena_options_init(&opts);
		opts.size = size;
		opts.mode = mode;
		rc = tn_tensord_arena_create(conn, name, &opts);
		if (rc == TN_EEXIST)
			rc = 0; /* create=True: create it when missing */
	}
	if (rc == 0)
		rc = tn_tensord_arena_open(conn, name, read_only ? TN_TENSORD_READ_ONLY : 0, &arena);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
	Py_END_ALLOW_THREADS
	if (rc < 0)
		return pytn_raise_msg(rc, msg);
	return wrap_arena(arena, name);
}

static PyObject *client_arenas(PyObject *self, PyObject *unused)
{
	CLIENT_CHECK(self);
	tn_tensord_arena_info *infos;
	size_t n;
	int rc = tn_tensord_arena_list(((client_object *)self)->conn, &infos, &n);
	if (rc < 0)
		return pytn_raise(rc);
	PyObject *list = name_list(n ? infos[0].name : NULL, n, sizeof(*infos));
	free(infos);
	return list;
}

static PyObject *client_clients(PyObject *self, PyObject *unused)
{
	CLIENT_CHECK(self);
	tn_tensord_client *cs;
	size_t n;
	int rc = tn_tensord_clients(((client_object *)self)->conn, &cs, &n);
	if (rc < 0)
		return pytn_raise(rc);
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *d = Py_BuildValue("{s:I,s:i,s:I,s:I,s:s,s:I,s:K}", "client_id",
					    cs[i].client_id, "pid", (int)cs[i].pid, "uid", cs[i].uid,
					    "gid", cs[i].gid, "program", cs[i].program, "arenas",
					    cs[i].narenas, "requests", (unsigned long long)cs[i].requests);
		if (!d)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	free(cs);
	return list;
}

static PyObject *client_gc(PyObject *self, PyObject *args)
{
	const char *name = NULL;
	if (!PyArg_ParseTuple(args, "|z:gc", &name))
		return NULL;
	CLIENT_CHECK(self);
	uint64_t slots = 0, bytes = 0;
	int rc = tn_tensord_gc(((client_object *)self)->conn, name, &slots, &bytes);
	if (rc < 0)
		return pytn_raise(rc);
	return Py_BuildValue("(KK)", (unsigned long long)slots, (unsigned long long)bytes);
}

static PyObject *client_destroy_arena(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "force", NULL };
	const char *name;
	int force = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|$p:destroy_arena", kwlist, &name, &force))
		return NULL;
	CLIENT_CHECK(self);
	tn_tensord *conn = ((client_object *)self)->conn;
	int rc;
	char msg[1024] = "";
	Py_BEGIN_ALLOW_THREADS
	rc = tn_tensord_arena_destroy(conn, name, force ? TN_TENSORD_FORCE : 0);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
	Py_END_ALLOW_THREADS
	if (rc < 0)
		return pytn_raise_msg(rc, msg);
	Py_RETURN_NONE;
}

static PyMethodDef client_methods[] = {
	{ "close", client_close, METH_NOARGS,
	  "close(): drop the connection (arenas opened through it keep it until they go)." },
	{ "__enter__", enter, METH_NOARGS, "The client itself." },
	{ "__exit__", client_exit, METH_VARARGS, "close()." },
	{ "status", client_status, METH_NOARGS,
	  "status() -> dict: the daemon's figures (pid, uptime_ns, arenas, clients, requests,\n"
	  "reclaimed_slots, arena_dir...) and this connection's identity (client_id, peer_uid)." },
	{ "arena", (PyCFunction)(void (*)(void))client_arena, METH_VARARGS | METH_KEYWORDS,
	  "arena(name, *, read_only=False, create=False, size=None, mode=0) -> Arena\n\n"
	  "Open arena `name` through the daemon (tn_tensord_arena_open). create=True has the\n"
	  "daemon create it first when it does not exist (size in bytes, None: the daemon's\n"
	  "default; mode: group/others access bits, 0o060/0o006). read_only=True maps it\n"
	  "read-only: lookups work, publish and empty raise PermissionError." },
	{ "arenas", client_arenas, METH_NOARGS, "arenas() -> list of the arena names you may open." },
	{ "clients", client_clients, METH_NOARGS,
	  "clients() -> list of dicts: the daemon's connected clients (pid, program, ...)." },
	{ "gc", client_gc, METH_VARARGS,
	  "gc(name=None) -> (slots, bytes): reclaim the client slots of dead processes." },
	{ "destroy_arena", (PyCFunction)(void (*)(void))client_destroy_arena,
	  METH_VARARGS | METH_KEYWORDS,
	  "destroy_arena(name, *, force=False): have the daemon remove arena `name`\n"
	  "(tn_tensord_arena_destroy). BusyError while other processes are attached, unless\n"
	  "force=True (their mappings stay usable until they let go)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef client_getset[] = {
	{ "closed", client_closed, NULL, "Whether close() was called.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject pytn_client_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libtensor.Client",
	.tp_basicsize = sizeof(client_object),
	.tp_dealloc = client_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A connection to tensord, made by libtensor.connect(socket=None). A context\n"
		  "manager: `with libtensor.connect() as c: a = c.arena('weights')`.",
	.tp_methods = client_methods,
	.tp_getset = client_getset,
};

/* ---- Arena --------------------------------------------------------------------------------- */

int pytn_arena_empty(tn_arena *arena, int ndim, const int64_t *sizes, enum tn_dtype dtype,
		     tn_tensor **ret_tensor)
{
	tn_arena *prev = tn_arena_ref(tn_arena_current());
	int rc = tn_arena_use(arena);
	if (rc == 0) {
		rc = tn_empty(ndim, sizes, dtype, TN_CPU, TN_CONTIGUOUS_FORMAT, ret_tensor);
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
		tn_arena_use(prev);
		if (rc < 0)
			pytn_raise_msg(rc, msg);
	} else {
		pytn_raise(rc);
	}
	tn_arena_unref(prev);
	return rc;
}

static void arena_dealloc(PyObject *self)
{
	tn_arena_unref(A(self));
	Py_XDECREF(((arena_object *)self)->name);
	PyObject_Free(self);
}

static PyObject *arena_close(PyObject *self, PyObject *unused)
{
	A(self) = tn_arena_unref(A(self));
	Py_RETURN_NONE;
}

static PyObject *arena_exit(PyObject *self, PyObject *args)
{
	return arena_close(self, NULL);
}

static PyObject *arena_open(PyObject *cls, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "dir", NULL };
	const char *name, *dir = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|z:open", kwlist, &name, &dir))
		return NULL;
	tn_arena *arena;
	int rc = tn_arena_open(name, dir, &arena);
	return rc < 0 ? pytn_raise(rc) : wrap_arena(arena, name);
}

static PyObject *arena_create(PyObject *cls, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "size", "dir", "mode", NULL };
	const char *name, *dir = NULL;
	unsigned long long size = 64ull << 20;
	unsigned int mode = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|KzI:create", kwlist, &name, &size, &dir,
					 &mode))
		return NULL;
	tn_arena_options opts;
	tn_arena_options_init(&opts);
	opts.size = size;
	opts.dir = dir;
	opts.mode = mode;
	tn_arena *arena;
	int rc = tn_arena_create(name, &opts, &arena);
	return rc < 0 ? pytn_raise(rc) : wrap_arena(arena, name);
}

static PyObject *arena_destroy(PyObject *cls, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "dir", "force", NULL };
	const char *name, *dir = NULL;
	int force = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|zp:destroy", kwlist, &name, &dir, &force))
		return NULL;
	int rc = tn_arena_destroy(name, dir, force ? TN_ARENA_FORCE : 0);
	return rc < 0 ? pytn_raise(rc) : Py_NewRef(Py_None);
}

static int shape_of(PyObject *shape, int *ndim, int64_t *sizes)
{
	if (PyLong_Check(shape)) {
		*ndim = 1;
		sizes[0] = PyLong_AsLongLong(shape);
		return sizes[0] == -1 && PyErr_Occurred() ? -1 : 0;
	}
	PyObject *seq = PySequence_Fast(shape, "shape must be a sequence of ints");
	if (!seq)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	if (n > TN_ARENA_MAX_DIMS) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_ValueError, "at most %d dims", TN_ARENA_MAX_DIMS);
		return -1;
	}
	*ndim = (int)n;
	for (Py_ssize_t i = 0; i < n; i++) {
		sizes[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
		if (sizes[i] == -1 && PyErr_Occurred()) {
			Py_DECREF(seq);
			return -1;
		}
	}
	Py_DECREF(seq);
	return 0;
}

static PyObject *arena_empty(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "shape", "dtype", NULL };
	PyObject *shape, *dtype_obj = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:empty", kwlist, &shape, &dtype_obj))
		return NULL;
	ARENA_CHECK(self);
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int ndim;
	enum tn_dtype dtype = TN_FLOAT32;
	if (shape_of(shape, &ndim, sizes) < 0 ||
	    (dtype_obj != Py_None && pytn_dtype_from_obj(dtype_obj, &dtype) < 0))
		return NULL;
	tn_tensor *t;
	if (pytn_arena_empty(A(self), ndim, sizes, dtype, &t) < 0)
		return NULL;
	return pytn_wrap(t);
}

static PyObject *arena_publish(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "tensor", "seal", "replace", "evictable", NULL };
	const char *name;
	PyObject *obj;
	int seal = 1, replace = 0, evictable = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO|ppp:publish", kwlist, &name, &obj, &seal,
					 &replace, &evictable))
		return NULL;
	ARENA_CHECK(self);
	tn_tensor *t;
	if (pytn_tensor_from_obj(obj, true, &t) < 0)
		return NULL;
	unsigned flags = (seal ? TN_ARENA_SEAL : 0) | (replace ? TN_ARENA_REPLACE : 0) |
			 (evictable ? TN_ARENA_EVICTABLE : 0);
	int rc = tn_arena_publish(A(self), name, t, flags, NULL);
	if (rc == TN_EINVAL) {
		/* Most likely not in this arena: copy it in and publish the copy. A bad name fails
		 * the same way again, with its own message. */
		tn_tensor *c;
		if (pytn_arena_empty(A(self), tn_tensor_ndim(t), tn_tensor_sizes(t),
				     tn_tensor_dtype(t), &c) < 0) {
			tn_tensor_unref(t);
			return NULL;
		}
		rc = tn_copy_(c, t, false);
		tn_tensor_unref(t);
		t = c;
		if (rc == 0)
			rc = tn_arena_publish(A(self), name, t, flags, NULL);
	}
	if (rc < 0) {
		pytn_raise(rc);
		tn_tensor_unref(t);
		return NULL;
	}
	return pytn_wrap(t);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Look @name up, waiting up to @timeout seconds (infinity: no limit) in slices of 100 ms with
 * the GIL released, so other threads run and Ctrl-C interrupts the wait. */
static int lookup_wait(tn_arena *arena, const char *name, double timeout, bool sealed,
		       tn_tensor **ret)
{
	/* The library sleeps on the arena's futex; the wait is cut in slices of 100 ms only so
	 * that a signal (Ctrl-C) is handled between them. */
	double deadline = now_s() + timeout;
	for (;;) {
		double left = deadline - now_s();
		if (left < 0)
			left = 0;
		int64_t slice_ns = left > 0.1 ? 100000000 : (int64_t)(left * 1e9);
		tn_arena_lookup_options opts = {
			.timeout_ns = slice_ns,
			.flags = sealed ? TN_ARENA_LOOKUP_SEALED : 0,
		};
		int rc;
		char msg[1024] = "";
		Py_BEGIN_ALLOW_THREADS
		rc = tn_arena_lookup_wait(arena, name, &opts, ret, NULL);
		if (rc < 0 && rc != TN_ETIMEDOUT && rc != TN_ENOENT)
			snprintf(msg, sizeof(msg), "%s", tn_last_error());
		Py_END_ALLOW_THREADS
		if (rc == 0)
			return 0;
		if (rc != TN_ETIMEDOUT && rc != TN_ENOENT) {
			pytn_raise_msg(rc, msg);
			return -1;
		}
		if (PyErr_CheckSignals() < 0)
			return -1;
		if (now_s() >= deadline) {
			snprintf(msg, sizeof(msg), "Arena.lookup: '%s' was not %s in arena %s within "
				 "%g s", name, sealed ? "published sealed" : "published",
				 tn_arena_path(arena), timeout);
			pytn_raise_msg(TN_ETIMEDOUT, msg);
			return -1;
		}
	}
}

static PyObject *arena_lookup(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "name", "timeout", "sealed", NULL };
	const char *name;
	PyObject *timeout_obj = Py_None;
	int sealed = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|O$p:lookup", kwlist, &name, &timeout_obj,
					 &sealed))
		return NULL;
	ARENA_CHECK(self);
	tn_tensor *t;
	if (timeout_obj == Py_None && !sealed) {
		/* Without the GIL: a spilled tensor waits while tensord reads it back. */
		int rc;
		char msg[1024] = "";
		Py_BEGIN_ALLOW_THREADS
		rc = tn_arena_lookup(A(self), name, &t, NULL);
		if (rc < 0)
			snprintf(msg, sizeof(msg), "%s", tn_last_error());
		Py_END_ALLOW_THREADS
		if (rc < 0) {
			pytn_raise_msg(rc, msg);
			return NULL;
		}
		return pytn_wrap(t);
	}
	double timeout = timeout_obj == Py_None ? 0 : PyFloat_AsDouble(timeout_obj);
	if (timeout == -1.0 && PyErr_Occurred())
		return NULL;
	if (isnan(timeout) || timeout < 0)
		return PyErr_Format(PyExc_ValueError, "timeout must be >= 0 (inf: no limit)");
	/* Keep the handle alive across the wait even if another thread closes the Arena. */
	tn_arena *arena = tn_arena_ref(A(self));
	int rc = lookup_wait(arena, name, timeout, sealed, &t);
	tn_arena_unref(arena);
	return rc < 0 ? NULL : pytn_wrap(t);
}

static PyObject *entry_dict(const tn_arena_entry *e)
{
	PyObject *shape = PyTuple_New(e->ndim), *strides = PyTuple_New(e->ndim);
	for (int i = 0; shape && strides && i < e->ndim; i++) {
		PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(e->sizes[i]));
		PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(e->strides[i]));
	}
	PyObject *d = shape && strides
			      ? Py_BuildValue("{s:s,s:s,s:O,s:O,s:L,s:K,s:O,s:s,s:s}", "name",
					      e->name, "dtype", tn_dtype_name(e->dtype), "shape", shape,
					      "strides", strides, "storage_offset",
					      (long long)e->storage_offset, "block_bytes",
					      (unsigned long long)e->block_bytes, "sealed",
					      (e->flags & TN_ARENA_ENTRY_SEALED) ? Py_True : Py_False,
					      "retention",
					      e->flags & TN_ARENA_ENTRY_CACHE	       ? "cache"
					      : e->flags & TN_ARENA_ENTRY_SOFT_PINNED ? "soft"
										       : "pinned",
					      "location",
					      !(e->flags & TN_ARENA_ENTRY_SPILLED) ? "memory"
					      : e->flags & TN_ARENA_ENTRY_RESTORING ? "restoring"
										    : "disk")
			      : NULL;
	Py_XDECREF(shape);
	Py_XDECREF(strides);
	return d;
}

static PyObject *arena_info(PyObject *self, PyObject *args)
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s:info", &name))
		return NULL;
	ARENA_CHECK(self);
	tn_arena_entry e;
	int rc = tn_arena_info(A(self), name, &e);
	return rc < 0 ? pytn_raise(rc) : entry_dict(&e);
}

static PyObject *arena_names(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "prefix", NULL };
	const char *prefix = "";
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|s:names", kwlist, &prefix))
		return NULL;
	ARENA_CHECK(self);
	tn_arena_entry *es;
	size_t n;
	int rc = tn_arena_list(A(self), prefix, &es, &n);
	if (rc < 0)
		return pytn_raise(rc);
	PyObject *list = name_list(n ? es[0].name : NULL, n, sizeof(*es));
	free(es);
	return list;
}

static PyObject *arena_stat(PyObject *self, PyObject *unused)
{
	ARENA_CHECK(self);
	tn_arena_stats s;
	int rc = tn_arena_stat(A(self), &s);
	if (rc < 0)
		return pytn_raise(rc);
#define K(f) #f, (unsigned long long)s.f
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
			     "s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
			     K(size), K(page_size), K(heap_bytes), K(used_bytes), K(free_bytes),
			     K(largest_free), K(blocks), K(free_blocks), K(names), K(max_names),
			     K(clients), K(num_allocs), K(num_frees), K(lock_repairs),
			     K(reclaimed_slots), K(high_water), K(low_water), K(evictions),
			     K(evicted_bytes), K(spill), K(spilled_names), K(spilled_bytes), K(spills),
			     K(spilled_total), K(restores), K(restore_failures));
#undef K
}

static PyObject *arena_clients(PyObject *self, PyObject *unused)
{
	ARENA_CHECK(self);
	tn_arena_client cs[TN_ARENA_MAX_CLIENTS];
	int n = tn_arena_clients(A(self), cs, TN_ARENA_MAX_CLIENTS);
	if (n < 0)
		return pytn_raise(n);
	if (n > TN_ARENA_MAX_CLIENTS)
		n = TN_ARENA_MAX_CLIENTS;
	PyObject *list = PyList_New(n);
	for (int i = 0; list && i < n; i++) {
		PyObject *d = Py_BuildValue("{s:i,s:i,s:O,s:K,s:K}", "slot", cs[i].slot, "pid",
					    (int)cs[i].pid, "alive", cs[i].alive ? Py_True : Py_False,
					    "held_blocks", (unsigned long long)cs[i].held_blocks,
					    "held_bytes", (unsigned long long)cs[i].held_bytes);
		if (!d)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, i, d);
	}
	return list;
}

static PyObject *arena_name_op(PyObject *self, PyObject *args, int (*fn)(tn_arena *, const char *))
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	ARENA_CHECK(self);
	int rc = fn(A(self), name);
	return rc < 0 ? pytn_raise(rc) : Py_NewRef(Py_None);
}

static PyObject *arena_unpublish(PyObject *self, PyObject *args)
{
	return arena_name_op(self, args, tn_arena_unpublish);
}

static PyObject *arena_seal(PyObject *self, PyObject *args)
{
	return arena_name_op(self, args, tn_arena_seal);
}

static int arena_contains(PyObject *self, PyObject *key)
{
	if (!A(self)) {
		closed_error("Arena");
		return -1;
	}
	const char *name = PyUnicode_AsUTF8(key);
	if (!name)
		return -1;
	tn_arena_entry e;
	int rc = tn_arena_info(A(self), name, &e);
	if (rc == TN_ENOENT)
		return 0;
	if (rc < 0) {
		pytn_raise(rc);
		return -1;
	}
	return 1;
}

static PyObject *arena_getitem(PyObject *self, PyObject *key)
{
	ARENA_CHECK(self);
	const char *name = PyUnicode_AsUTF8(key);
	if (!name)
		return NULL;
	tn_tensor *t;
	int rc = tn_arena_lookup(A(self), name, &t, NULL);
	return rc < 0 ? pytn_raise(rc) : pytn_wrap(t);
}

static PyObject *arena_get_name(PyObject *self, void *c)
{
	return Py_NewRef(((arena_object *)self)->name);
}

static PyObject *arena_get_closed(PyObject *self, void *c)
{
	return PyBool_FromLong(!A(self));
}

static PyObject *arena_get_path(PyObject *self, void *c)
{
	ARENA_CHECK(self);
	return PyUnicode_DecodeFSDefault(tn_arena_path(A(self)));
}

static PyObject *arena_get_slot(PyObject *self, void *c)
{
	ARENA_CHECK(self);
	return PyLong_FromLong(tn_arena_slot(A(self)));
}

static PyObject *arena_repr(PyObject *self)
{
	return PyUnicode_FromFormat("<libtensor.Arena %R%s>", ((arena_object *)self)->name,
				    A(self) ? "" : " (closed)");
}

static PyMethodDef arena_methods[] = {
	{ "open", (PyCFunction)(void (*)(void))arena_open, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "Arena.open(name, dir=None) -> Arena: attach directly to an existing arena file,\n"
	  "without tensord (tn_arena_open; dir None: the huge page mounts, then /dev/shm)." },
	{ "create", (PyCFunction)(void (*)(void))arena_create,
	  METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "Arena.create(name, size=64 MiB, dir=None, mode=0o600) -> Arena: create and attach\n"
	  "an arena file without tensord (tn_arena_create). FileExistsError if it exists." },
	{ "destroy", (PyCFunction)(void (*)(void))arena_destroy,
	  METH_VARARGS | METH_KEYWORDS | METH_STATIC,
	  "Arena.destroy(name, dir=None, force=False): remove an arena file (tn_arena_destroy)." },
	{ "close", arena_close, METH_NOARGS,
	  "close(): release this handle. Tensors looked up or allocated in the arena keep it\n"
	  "attached until they are gone; the Arena object can no longer be used." },
	{ "__enter__", enter, METH_NOARGS, "The arena itself." },
	{ "__exit__", arena_exit, METH_VARARGS, "close()." },
	{ "empty", (PyCFunction)(void (*)(void))arena_empty, METH_VARARGS | METH_KEYWORDS,
	  "empty(shape, dtype='float32') -> Tensor: an uninitialised tensor allocated in the\n"
	  "arena, to fill (through numpy.asarray(t) or torch.from_dlpack(t)) and publish." },
	{ "publish", (PyCFunction)(void (*)(void))arena_publish, METH_VARARGS | METH_KEYWORDS,
	  "publish(name, tensor, seal=True, replace=False, evictable=False) -> Tensor\n\n"
	  "Give `tensor` the name `name` in the arena. A libtensor Tensor whose storage lives in\n"
	  "this arena is published as it is; anything else (another Tensor, a torch tensor, a\n"
	  "NumPy array, a list) is copied into the arena first. seal=True makes it read-only for\n"
	  "every process for good; replace=True replaces an unsealed entry of that name;\n"
	  "evictable=True makes it a cache entry, which leaves the arena (or goes to disk in\n"
	  "spill mode) when the arena passes its high watermark.\n"
	  "Returns the published tensor. FileExistsError when the name is taken." },
	{ "lookup", (PyCFunction)(void (*)(void))arena_lookup, METH_VARARGS | METH_KEYWORDS,
	  "lookup(name, timeout=None, *, sealed=False) -> Tensor\n\n"
	  "The tensor published as `name`, mapped zero-copy (read-only when sealed). timeout\n"
	  "None: no wait, NotFoundError (a KeyError) when absent; a number of seconds: wait up\n"
	  "to that long for it to be published (sealed=True: published and sealed), then raise\n"
	  "TimeoutError; float('inf'): wait without limit. The wait releases the GIL and\n"
	  "Ctrl-C interrupts it." },
	{ "names", (PyCFunction)(void (*)(void))arena_names, METH_VARARGS | METH_KEYWORDS,
	  "names(prefix='') -> list of the published names starting with prefix, sorted." },
	{ "info", arena_info, METH_VARARGS,
	  "info(name) -> dict (dtype, shape, strides, storage_offset, block_bytes, sealed,\n"
	  "retention: pinned, soft or cache; location: memory, disk or restoring)\n"
	  "without mapping or holding the tensor." },
	{ "stat", arena_stat, METH_NOARGS,
	  "stat() -> dict: size, used_bytes, free_bytes, blocks, names, clients, the\n"
	  "watermarks, evictions, and spilling's figures (spill, spilled_names, spilled_bytes,\n"
	  "spills, restores, ...)." },
	{ "clients", arena_clients, METH_NOARGS,
	  "clients() -> list of dicts (slot, pid, alive, held_blocks, held_bytes): the\n"
	  "processes attached to the arena." },
	{ "unpublish", arena_unpublish, METH_VARARGS,
	  "unpublish(name): remove the name; the bytes go once nobody holds them." },
	{ "seal", arena_seal, METH_VARARGS,
	  "seal(name): make the named tensor read-only for every process, for good." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef arena_getset[] = {
	{ "name", arena_get_name, NULL, "The arena's name.", NULL },
	{ "closed", arena_get_closed, NULL, "Whether close() was called.", NULL },
	{ "path", arena_get_path, NULL, "The arena file's path.", NULL },
	{ "slot", arena_get_slot, NULL, "This process's slot in the arena's client table.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PySequenceMethods arena_as_sequence = { .sq_contains = arena_contains };
static PyMappingMethods arena_as_mapping = { .mp_subscript = arena_getitem };

PyTypeObject pytn_arena_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libtensor.Arena",
	.tp_basicsize = sizeof(arena_object),
	.tp_dealloc = arena_dealloc,
	.tp_repr = arena_repr,
	.tp_as_sequence = &arena_as_sequence,
	.tp_as_mapping = &arena_as_mapping,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A handle on a shared-memory arena of named tensors, from Client.arena() or\n"
		  "Arena.open()/Arena.create(). `name in arena` tests for a name, arena[name]\n"
		  "looks it up (KeyError when absent). A context manager: closing releases the\n"
		  "handle; tensors looked up keep the arena attached until they are gone.",
	.tp_methods = arena_methods,
	.tp_getset = arena_getset,
};

int pytn_arena_init_types(PyObject *module)
{
	if (PyType_Ready(&pytn_client_type) < 0 || PyType_Ready(&pytn_arena_type) < 0)
		return -1;
	if (PyModule_AddObjectRef(module, "Client", (PyObject *)&pytn_client_type) < 0 ||
	    PyModule_AddObjectRef(module, "Arena", (PyObject *)&pytn_arena_type) < 0)
		return -1;
	return 0;
}
