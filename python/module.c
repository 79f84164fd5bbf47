// SPDX-License-Identifier: MIT
/*
 * libtensor._C: the module object, the exception classes that map TN_E* codes onto Python's
 * built-in exceptions, and the conversions of dtypes, devices and scalars every other file of
 * the extension uses.
 */
#include "pytn.h"

#include <string.h>

/*
 * X(code, class name, built-in base, doc). Each class derives from libtensor.Error and from
 * the built-in exception a Python user expects for that failure, so `except KeyError` catches
 * a missing name and `except libtensor.Error` catches everything the library refused.
 */
#define PYTN_TIMEDOUT_X(X) X(TN_ETIMEDOUT, "TimedOutError", PyExc_TimeoutError, "The wait ran out of time (TN_ETIMEDOUT).")
#define PYTN_ERROR_LIST(X)                                                                        \
	X(TN_EINVAL, "InvalidArgumentError", PyExc_ValueError, "An invalid argument (TN_EINVAL).") \
	X(TN_ENOTSUP, "NotSupportedError", PyExc_TypeError,                                      \
	  "A dtype, device or operation libtensor does not support (TN_ENOTSUP).")                \
	X(TN_ENOENT, "NotFoundError", PyExc_KeyError, "No such name, arena or file (TN_ENOENT).")  \
	X(TN_EPERM, "PermissionDeniedError", PyExc_PermissionError,                              \
	  "Not permitted (TN_EPERM, TN_EACCES), e.g. writing to a read-only arena.")              \
	X(TN_EACCES, "PermissionDeniedError", PyExc_PermissionError, NULL)                       \
	X(TN_ENOMEM, "OutOfMemoryError", PyExc_MemoryError,                                      \
	  "Out of memory, or the arena is full (TN_ENOMEM).")                                     \
	X(TN_ENOSPC, "OutOfMemoryError", PyExc_MemoryError, NULL)                                \
	X(TN_ERANGE, "OutOfRangeError", PyExc_IndexError,                                        \
	  "An index or dimension out of range (TN_ERANGE).")                                      \
	X(TN_EOVERFLOW, "SizeOverflowError", PyExc_OverflowError,                                   \
	  "A size or value overflows its type (TN_EOVERFLOW).")                                   \
	X(TN_ECONNREFUSED, "NoDaemonError", PyExc_ConnectionRefusedError,              \
	  "No tensord listens on the socket (TN_ECONNREFUSED).")                                  \
	X(TN_ENOTCONN, "ConnectionLostError", PyExc_ConnectionError,                             \
	  "The connection to tensord was lost (TN_ENOTCONN).")                                    \
	X(TN_EEXIST, "ExistsError", PyExc_FileExistsError,                                       \
	  "The name or arena exists already (TN_EEXIST).")                                        \
	X(TN_EBUSY, "BusyError", PyExc_OSError, "The object is in use (TN_EBUSY).")              \
	X(TN_EIO, "DataError", PyExc_OSError, "Input/output error or damaged data (TN_EIO).")     \
	X(TN_ESTALE, "StaleError", PyExc_LookupError,                                            \
	  "The entry changed since its handle was taken (TN_ESTALE).")                            \
	X(TN_EBADF, "BadHandleError", PyExc_ValueError, "Not a live handle (TN_EBADF).")         \
	X(TN_ENODEV, "NoDeviceError", PyExc_RuntimeError, "No such device (TN_ENODEV).")         \
	X(TN_EPROTO, "ProtocolError", PyExc_ConnectionError,                                     \
	  "tensord spoke an unexpected protocol (TN_EPROTO).")                                    \
	X(TN_ENAMETOOLONG, "NameTooLongError", PyExc_ValueError,                                 \
	  "A name or path is too long (TN_ENAMETOOLONG).")                                        \
	PYTN_TIMEDOUT_X(X)

enum {
#define PYTN_X_(code, name, base, doc) +1
	PYTN_NUM_ERRORS = 0 PYTN_ERROR_LIST(PYTN_X_)
#undef PYTN_X_
};

static const struct {
	int code;
	const char *name;
	const char *doc;
} error_table[] = {
#define PYTN_X_(code, name, base, doc) { code, name, doc },
	PYTN_ERROR_LIST(PYTN_X_)
#undef PYTN_X_
};

static PyObject *error_base;
static PyObject *error_classes[PYTN_NUM_ERRORS];

static PyObject *error_class(int code)
{
	for (size_t i = 0; i < PYTN_NUM_ERRORS; i++)
		if (error_table[i].code == code)
			return error_classes[i];
	return error_base;
}

PyObject *pytn_raise_msg(int code, const char *msg)
{
	PyObject *cls = error_class(code);
	PyObject *text = PyUnicode_FromString(msg && *msg ? msg : tn_strerror(code));
	if (!text)
		return NULL;
	PyObject *exc = PyObject_CallOneArg(cls, text);
	Py_DECREF(text);
	if (!exc)
		return NULL;
	PyObject *c = PyLong_FromLong(code);
	if (!c || PyObject_SetAttrString(exc, "code", c) < 0) {
		Py_XDECREF(c);
		Py_DECREF(exc);
		return NULL;
	}
	Py_DECREF(c);
	PyErr_SetObject(cls, exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *pytn_raise(int code)
{
	/* Copy first: creating the exception could run code that fails in libtensor again. */
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", tn_last_error());
	return pytn_raise_msg(code, msg);
}

/* ---- dtypes, devices, scalars ------------------------------------------------------------ */

int pytn_dtype_from_obj(PyObject *obj, enum tn_dtype *ret_dtype)
{
	PyObject *s = NULL;
	if (PyUnicode_Check(obj)) {
		s = Py_NewRef(obj);
	} else if (PyType_Check(obj) && (PyObject *)obj == (PyObject *)&PyBool_Type) {
		*ret_dtype = TN_BOOL;
		return 0;
	} else if (PyType_Check(obj) && (PyObject *)obj == (PyObject *)&PyLong_Type) {
		*ret_dtype = TN_INT64;
		return 0;
	} else if (PyType_Check(obj) && (PyObject *)obj == (PyObject *)&PyFloat_Type) {
		*ret_dtype = TN_FLOAT64;
		return 0;
	} else {
		/* A NumPy dtype has .name ("float32"), a NumPy scalar type a __name__ ("float32",
		 * "bool_"); torch.dtype's str() is "torch.float32", which tn_dtype_from_name
		 * reads. */
		PyObject *name = PyObject_GetAttrString(obj, PyType_Check(obj) ? "__name__" : "name");
		if (name && PyUnicode_Check(name)) {
			s = name;
			if (PyUnicode_GET_LENGTH(name) > 1 &&
			    PyUnicode_READ_CHAR(name, PyUnicode_GET_LENGTH(name) - 1) == '_') {
				s = PyUnicode_Substring(name, 0, PyUnicode_GET_LENGTH(name) - 1);
				Py_DECREF(name);
			}
		} else {
			Py_XDECREF(name);
			PyErr_Clear();
			s = PyObject_Str(obj);
		}
		if (!s)
			return -1;
	}
	const char *text = PyUnicode_AsUTF8(s);
	if (!text) {
		Py_DECREF(s);
		return -1;
	}
	if (tn_dtype_from_name(text, ret_dtype) < 0) {
		PyErr_Format(PyExc_TypeError, "unknown or unsupported dtype %R", obj);
		Py_DECREF(s);
		return -1;
	}
	Py_DECREF(s);
	return 0;
}

int pytn_device_from_obj(PyObject *obj, tn_device *ret_device)
{
	if (obj == Py_None) {
		*ret_device = TN_CPU;
		return 0;
	}
	if (PyLong_Check(obj) && !PyBool_Check(obj)) {
		long idx = PyLong_AsLong(obj);
		if (idx < 0 || idx > INT32_MAX)
			goto bad;
		*ret_device = TN_CUDA((int)idx);
		return 0;
	}
	PyObject *s = PyObject_Str(obj); /* torch.device prints "cpu" or "cuda:0" */
	if (!s)
		return -1;
	const char *t = PyUnicode_AsUTF8(s);
	int rc = -1;
	if (t) {
		char *end;
		if (!strcmp(t, "cpu")) {
			*ret_device = TN_CPU;
			rc = 0;
		} else if (!strcmp(t, "meta")) {
			*ret_device = TN_META;
			rc = 0;
		} else if (!strcmp(t, "cuda")) {
			*ret_device = TN_CUDA(0);
			rc = 0;
		} else if (!strncmp(t, "cuda:", 5) && t[5]) {
			long idx = strtol(t + 5, &end, 10);
			if (!*end && idx >= 0 && idx <= INT32_MAX) {
				*ret_device = TN_CUDA((int)idx);
				rc = 0;
			}
		}
	}
	Py_DECREF(s);
	if (rc == 0 || !t)
		return rc;
bad:
	PyErr_Format(PyExc_ValueError, "Expected one of cpu, cuda, meta device type at start of "
				       "device string: %R", obj);
	return -1;
}

PyObject *pytn_device_str(tn_device device)
{
	if (device.type == TN_DEVICE_CUDA)
		return PyUnicode_FromFormat("cuda:%d", device.index);
	const char *n = tn_device_type_name(device.type);
	return PyUnicode_FromString(n ? n : "unknown");
}

PyObject *pytn_scalar_to_py(tn_scalar s)
{
	switch (s.kind) {
	case TN_SCALAR_BOOL:
		return PyBool_FromLong(s.v.b);
	case TN_SCALAR_INT:
		return PyLong_FromLongLong(s.v.i);
	default:
		return PyFloat_FromDouble(s.v.d);
	}
}

/* A Python bool, int (or __index__), float, or one-element Tensor as a scalar. */
int pytn_scalar_from_py(PyObject *obj, tn_scalar *ret)
{
	if (PyBool_Check(obj)) {
		*ret = tn_scalar_bool(obj == Py_True);
		return 0;
	}
	if (PyLong_Check(obj)) {
		int overflow;
		long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
		if (overflow) {
			PyErr_Format(PyExc_OverflowError, "value cannot be converted to type int64 "
							  "without overflow");
			return -1;
		}
		if (v == -1 && PyErr_Occurred())
			return -1;
		*ret = tn_scalar_int(v);
		return 0;
	}
	if (PyFloat_Check(obj)) {
		*ret = tn_scalar_double(PyFloat_AS_DOUBLE(obj));
		return 0;
	}
	if (PYTN_IS_TENSOR(obj)) {
		int rc = tn_tensor_item(((pytn_tensor_object *)obj)->tensor, ret);
		if (rc < 0) {
			pytn_raise(rc);
			return -1;
		}
		return 0;
	}
	if (PyIndex_Check(obj)) {
		PyObject *i = PyNumber_Index(obj);
		if (!i)
			return -1;
		int rc = pytn_scalar_from_py(i, ret);
		Py_DECREF(i);
		return rc;
	}
	PyErr_Format(PyExc_TypeError, "expected a number, got %s", Py_TYPE(obj)->tp_name);
	return -1;
}

/* ---- the module ----------------------------------------------------------------------------- */

PyDoc_STRVAR(from_dlpack_doc,
	     "from_dlpack(x) -> Tensor\n\n"
	     "A libtensor Tensor over the memory of x, without copying. x is an object with\n"
	     "__dlpack__ (a torch tensor, a NumPy array, a libtensor Tensor...) or a DLPack\n"
	     "capsule. The versioned ABI (max_version=(1, 0)) is asked for first; producers that do\n"
	     "not take max_version (PyTorch 1.13, NumPy 1.24) are asked again without it. A\n"
	     "producer's read-only flag makes the Tensor read-only. Raises TypeError for objects\n"
	     "that are not tensors and for dtypes libtensor lacks (complex), ValueError for\n"
	     "negative strides, TypeError for devices other than CPU and CUDA.");
PyDoc_STRVAR(op_groups_doc, "_op_groups() -> list of (name, [schema, ...]) in definition order.");
PyDoc_STRVAR(op_call_doc, "_op_call(name, *args, **kwargs): call operator group `name`.");
PyDoc_STRVAR(tensor_doc,
	     "tensor(data, dtype=None) -> Tensor\n\n"
	     "A new CPU tensor holding a copy of data: a nested list of numbers, a Python number,\n"
	     "an object with __dlpack__ or a buffer. dtype by default: bool, int64 or float32 as\n"
	     "the values are, or the source's dtype.");
PyDoc_STRVAR(connect_doc,
	     "connect(socket=None) -> Client\n\n"
	     "Connect to tensord at the Unix socket path `socket` (None: $TENSORD_SOCKET, else\n"
	     "the default of tn_tensord_socket_path(3)). Raises ConnectionRefusedError when no\n"
	     "daemon listens, NotFoundError (KeyError) when there is no socket file.");

static PyMethodDef module_methods[] = {
	{ "from_dlpack", (PyCFunction)pytn_from_dlpack, METH_O, from_dlpack_doc },
	{ "tensor", (PyCFunction)(void (*)(void))pytn_tensor_ctor, METH_VARARGS | METH_KEYWORDS,
	  tensor_doc },
	{ "connect", (PyCFunction)(void (*)(void))pytn_connect, METH_VARARGS | METH_KEYWORDS,
	  connect_doc },
	{ "_op_groups", pytn_op_groups, METH_NOARGS, op_groups_doc },
	{ "_op_call", (PyCFunction)(void (*)(void))pytn_op_call, METH_VARARGS | METH_KEYWORDS,
	  op_call_doc },
	{ NULL, NULL, 0, NULL },
};

PyDoc_STRVAR(module_doc, "The C extension of the libtensor package; import libtensor instead.");

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT, "libtensor._C", module_doc, -1, module_methods,
	NULL, NULL, NULL, NULL,
};

static int add_errors(PyObject *m)
{
	PyObject *dict = Py_BuildValue("{s:s}", "__doc__",
				       "Base of the errors libtensor reports. .code is the negative "
				       "TN_E* value;\nthe message is the library's (tn_last_error()).");
	if (!dict)
		return -1;
	error_base = PyErr_NewException("libtensor.Error", PyExc_Exception, dict);
	Py_DECREF(dict);
	if (!error_base || PyModule_AddObjectRef(m, "Error", error_base) < 0)
		return -1;
	if (PyObject_SetAttrString(error_base, "code", Py_None) < 0)
		return -1;
	PyObject *bases[] = {
#define PYTN_X_(code, name, base, doc) base,
		PYTN_ERROR_LIST(PYTN_X_)
#undef PYTN_X_
	};
	for (size_t i = 0; i < PYTN_NUM_ERRORS; i++) {
		/* Codes that share a class (EPERM and EACCES) reuse the first one's. */
		for (size_t j = 0; j < i; j++)
			if (!strcmp(error_table[j].name, error_table[i].name))
				error_classes[i] = Py_NewRef(error_classes[j]);
		if (error_classes[i])
			continue;
		char full[96];
		snprintf(full, sizeof(full), "libtensor.%s", error_table[i].name);
		PyObject *b = PyTuple_Pack(2, error_base, bases[i]);
		PyObject *d = b ? Py_BuildValue("{s:s}", "__doc__", error_table[i].doc) : NULL;
		error_classes[i] = d ? PyErr_NewException(full, b, d) : NULL;
		Py_XDECREF(b);
		Py_XDECREF(d);
		if (!error_classes[i] ||
		    PyModule_AddObjectRef(m, error_table[i].name, error_classes[i]) < 0)
			return -1;
	}
	return 0;
}

PyMODINIT_FUNC PyInit__C(void); /* the only exported symbol */
PyMODINIT_FUNC PyInit__C(void)
{
	PyObject *m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	if (add_errors(m) < 0 || pytn_tensor_init_types(m) < 0 || pytn_arena_init_types(m) < 0 ||
	    pytn_random_init_types(m) < 0)
		goto fail;
	for (int d = 0; d < TN_NUM_DTYPES; d++)
		if (PyModule_AddStringConstant(m, tn_dtype_name((enum tn_dtype)d),
					       tn_dtype_name((enum tn_dtype)d)) < 0)
			goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
