/* SPDX-License-Identifier: MIT */
/*
 * The libtensor Python extension (libtensor._C): what its files share. The module is written
 * against the library's public API only (<tensor.h>, <tensor/ops.h>, <tensor/dlpack.h>).
 *
 * module.c: the module, the exception classes and the conversions of dtypes, devices and
 * scalars; tensor.c: the Tensor type, its buffer and DLPack export, from_dlpack; ops.c: the
 * operators by name; arena.c: Client and Arena; random.c: Generator and the default one.
 */
#ifndef PYTN_H
#define PYTN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <tensor.h>
#include <tensor/dlpack.h>
#include <tensor/ops.h>

typedef struct {
	PyObject_HEAD
	tn_tensor *tensor; /* owned */
	PyObject *weakrefs;
} pytn_tensor_object;

extern PyTypeObject pytn_tensor_type;
extern PyTypeObject pytn_client_type;
extern PyTypeObject pytn_arena_type;
extern PyTypeObject pytn_generator_type;

#define PYTN_IS_TENSOR(o) PyObject_TypeCheck((o), &pytn_tensor_type)

/* module.c */
/* Raise the exception class of @code with tn_last_error() (read at once: it is per thread).
 * Returns NULL. */
PyObject *pytn_raise(int code);
/* Raise with an explicit message. */
PyObject *pytn_raise_msg(int code, const char *msg);
int pytn_dtype_from_obj(PyObject *obj, enum tn_dtype *ret_dtype);
int pytn_device_from_obj(PyObject *obj, tn_device *ret_device);
PyObject *pytn_device_str(tn_device device);
PyObject *pytn_scalar_to_py(tn_scalar s);
int pytn_scalar_from_py(PyObject *obj, tn_scalar *ret);

/* tensor.c */
PyObject *pytn_wrap(tn_tensor *tensor); /* steals the reference, also on failure */
/* A new reference to a tensor for @obj: a Tensor, an object with __dlpack__, a DLPack capsule;
 * with @scalars also a Python number or a nested list (copied). Returns 0 or -1 with an
 * exception set. */
int pytn_tensor_from_obj(PyObject *obj, bool scalars, tn_tensor **ret_tensor);
bool pytn_is_tensor_like(PyObject *obj);
PyObject *pytn_from_dlpack(PyObject *self, PyObject *obj);
PyObject *pytn_tensor_ctor(PyObject *self, PyObject *args, PyObject *kwargs);
int pytn_tensor_init_types(PyObject *module);

/* ops.c */
PyObject *pytn_op_groups(PyObject *self, PyObject *unused);
PyObject *pytn_op_call(PyObject *self, PyObject *args, PyObject *kwargs);

/* arena.c */
PyObject *pytn_connect(PyObject *self, PyObject *args, PyObject *kwargs);
int pytn_arena_init_types(PyObject *module);
/* tn_empty of @ndim @sizes in @arena (the calling thread's allocator meanwhile). */
int pytn_arena_empty(tn_arena *arena, int ndim, const int64_t *sizes, enum tn_dtype dtype,
		     tn_tensor **ret_tensor);

/* random.c */
int pytn_random_init_types(PyObject *module);
PyObject *pytn_wrap_generator(tn_generator *gen); /* steals the reference, also on failure */
tn_generator *pytn_generator_of(PyObject *obj);    /* borrowed, of a libtensor.Generator */
#define PYTN_IS_GENERATOR(o) PyObject_TypeCheck((o), &pytn_generator_type)

#endif /* PYTN_H */
