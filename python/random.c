/* SPDX-License-Identifier: MIT */
/*
 * libtensor.Generator and the module's default_generator (whose methods libtensor's
 * manual_seed, seed and initial_seed call, in __init__.py): tn_generator (<tensor/random.h>) as
 * torch.Generator is for torch's CPU generator. The random operators of libtensor.ops take one
 * as their generator= argument.
 */
#include "pytn.h"

typedef struct {
	PyObject_HEAD
	tn_generator *gen; /* owned (the default generator needs no reference) */
} generator_object;

PyObject *pytn_wrap_generator(tn_generator *gen)
{
	generator_object *o = PyObject_New(generator_object, &pytn_generator_type);
	if (!o) {
		tn_generator_unref(gen);
		return NULL;
	}
	o->gen = gen;
	return (PyObject *)o;
}

tn_generator *pytn_generator_of(PyObject *obj)
{
	return ((generator_object *)obj)->gen;
}

static PyObject *generator_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "device", NULL };
	PyObject *device = NULL;
	tn_device d = TN_CPU;
	tn_generator *gen;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Generator", kwlist, &device))
		return NULL;
	if (device && device != Py_None && pytn_device_from_obj(device, &d) < 0)
		return NULL;
	if (d.type != TN_DEVICE_CPU)
		return pytn_raise_msg(TN_ENOTSUP, "libtensor generators are CPU generators");
	if ((rc = tn_generator_new(&gen)) < 0)
		return pytn_raise(rc);
	generator_object *o = (generator_object *)type->tp_alloc(type, 0);
	if (!o) {
		tn_generator_unref(gen);
		return NULL;
	}
	o->gen = gen;
	return (PyObject *)o;
}

static void generator_dealloc(PyObject *self)
{
	tn_generator_unref(((generator_object *)self)->gen);
	Py_TYPE(self)->tp_free(self);
}

/* torch's THPGenerator_manualSeed: an unsigned 64-bit seed, or a negative one taken modulo
 * 2^64; anything else raises. */
static int seed_from_py(PyObject *obj, uint64_t *ret)
{
	if (!PyLong_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "manual_seed expected a long, but got %s",
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	unsigned long long u = PyLong_AsUnsignedLongLong(obj);
	if (u == (unsigned long long)-1 && PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return -1;
		PyErr_Clear();
		long long s = PyLong_AsLongLong(obj);
		if (s == -1 && PyErr_Occurred())
			return -1;
		u = (unsigned long long)s;
	}
	*ret = (uint64_t)u;
	return 0;
}

static PyObject *generator_manual_seed(PyObject *self, PyObject *seed_obj)
{
	uint64_t seed;
	int rc;
	if (seed_from_py(seed_obj, &seed) < 0)
		return NULL;
	if ((rc = tn_generator_manual_seed(pytn_generator_of(self), seed)) < 0)
		return pytn_raise(rc);
	return Py_NewRef(self);
}

static PyObject *generator_seed(PyObject *self, PyObject *unused)
{
	uint64_t seed;
	int rc;
	(void)unused;
	if ((rc = tn_generator_seed(pytn_generator_of(self), &seed)) < 0)
		return pytn_raise(rc);
	return PyLong_FromUnsignedLongLong(seed);
}

static PyObject *generator_initial_seed(PyObject *self, PyObject *unused)
{
	uint64_t seed;
	int rc;
	(void)unused;
	if ((rc = tn_generator_initial_seed(pytn_generator_of(self), &seed)) < 0)
		return pytn_raise(rc);
	return PyLong_FromUnsignedLongLong(seed);
}

static PyObject *generator_get_state(PyObject *self, PyObject *unused)
{
	tn_tensor *t;
	int rc;
	(void)unused;
	if ((rc = tn_generator_get_state(pytn_generator_of(self), &t)) < 0)
		return pytn_raise(rc);
	return pytn_wrap(t);
}

static PyObject *generator_set_state(PyObject *self, PyObject *state)
{
	tn_tensor *t;
	int rc;
	/* A libtensor Tensor, or torch's ByteTensor through DLPack: the same bytes. */
	if (pytn_tensor_from_obj(state, false, &t) < 0)
		return NULL;
	rc = tn_generator_set_state(pytn_generator_of(self), t);
	tn_tensor_unref(t);
	if (rc < 0)
		return pytn_raise(rc);
	return Py_NewRef(self);
}

static PyObject *generator_device(PyObject *self, void *closure)
{
	(void)self;
	(void)closure;
	return PyUnicode_FromString("cpu");
}

static PyMethodDef generator_methods[] = {
	{ "manual_seed", generator_manual_seed, METH_O,
	  "manual_seed(seed) -> Generator: seed it (64 bits kept, mt19937 takes the low 32), as "
	  "torch's; returns the generator." },
	{ "seed", generator_seed, METH_NOARGS,
	  "seed() -> int: a fresh seed from the kernel's random source, set and returned." },
	{ "initial_seed", generator_initial_seed, METH_NOARGS,
	  "initial_seed() -> int: the seed last set." },
	{ "get_state", generator_get_state, METH_NOARGS,
	  "get_state() -> Tensor: the state as 5056 uint8 bytes, torch's get_state() layout." },
	{ "set_state", generator_set_state, METH_O,
	  "set_state(state) -> Generator: restore a state from get_state(), this one's or "
	  "torch's (a torch.uint8 tensor works too)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef generator_getset[] = {
	{ "device", generator_device, NULL, "Always 'cpu'.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject pytn_generator_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libtensor.Generator",
	.tp_basicsize = sizeof(generator_object),
	.tp_dealloc = generator_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Generator(device='cpu'): a random generator giving torch 1.13's CPU numbers "
		  "for the same seed\n(seeded with 67280421310721 until manual_seed). Pass it as "
		  "generator= to ops.rand, ops.randn,\nops.randint, ops.randperm, ops.uniform_, "
		  "ops.normal_, ops.random_, ops.bernoulli...",
	.tp_methods = generator_methods,
	.tp_getset = generator_getset,
	.tp_new = generator_new,
};

/* ---- the default generator ----------------------------------------------------------------- */

int pytn_random_init_types(PyObject *module)
{
	if (PyType_Ready(&pytn_generator_type) < 0 ||
	    PyModule_AddObjectRef(module, "Generator", (PyObject *)&pytn_generator_type) < 0)
		return -1;
	tn_generator *d = tn_default_generator();
	if (!d) {
		pytn_raise(TN_ENOMEM);
		return -1;
	}
	PyObject *g = pytn_wrap_generator(d);
	if (!g)
		return -1;
	int rc = PyModule_AddObjectRef(module, "default_generator", g);
	Py_DECREF(g);
	return rc;
}
