// SPDX-License-Identifier: MIT
/*
 * libtensor.Tensor: a Python object owning one tn_tensor reference. Its buffer (PEP 3118) and
 * its DLPack export describe the tensor's bytes in place; a read-only tensor (a sealed arena
 * tensor) gives read-only buffers, and to a legacy DLPack consumer, which has no notion of
 * read-only memory, a private copy-on-write view. from_dlpack takes any producer's tensor in.
 */
#include "pytn.h"

#include <string.h>

PyObject *pytn_wrap(tn_tensor *tensor)
{
	pytn_tensor_object *self = PyObject_New(pytn_tensor_object, &pytn_tensor_type);
	if (!self) {
		tn_tensor_unref(tensor);
		return NULL;
	}
	self->tensor = tensor;
	self->weakrefs = NULL;
	return (PyObject *)self;
}

#define T(o) (((pytn_tensor_object *)(o))->tensor)

static void tensor_dealloc(PyObject *self)
{
	if (((pytn_tensor_object *)self)->weakrefs)
		PyObject_ClearWeakRefs(self);
	tn_tensor_unref(T(self));
	Py_TYPE(self)->tp_free(self);
}

static PyObject *int64_tuple(int n, const int64_t *v)
{
	PyObject *t = PyTuple_New(n);
	for (int i = 0; t && i < n; i++) {
		PyObject *x = PyLong_FromLongLong(v[i]);
		if (!x) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, i, x);
	}
	return t;
}

static PyObject *tensor_shape(PyObject *self, void *c)
{
	return int64_tuple(tn_tensor_ndim(T(self)), tn_tensor_sizes(T(self)));
}

static PyObject *tensor_strides(PyObject *self, void *c)
{
	return int64_tuple(tn_tensor_ndim(T(self)), tn_tensor_strides(T(self)));
}

static PyObject *tensor_dtype(PyObject *self, void *c)
{
	return PyUnicode_FromString(tn_dtype_name(tn_tensor_dtype(T(self))));
}

static PyObject *tensor_device(PyObject *self, void *c)
{
	return pytn_device_str(tn_tensor_device(T(self)));
}

static PyObject *tensor_ndim(PyObject *self, void *c)
{
	return PyLong_FromLong(tn_tensor_ndim(T(self)));
}

static PyObject *tensor_is_readonly(PyObject *self, void *c)
{
	return PyBool_FromLong(tn_tensor_is_readonly(T(self)));
}

static PyObject *tensor_storage_offset(PyObject *self, void *c)
{
	return PyLong_FromLongLong(tn_tensor_storage_offset(T(self)));
}

static PyObject *tensor_itemsize(PyObject *self, void *c)
{
	return PyLong_FromSize_t(tn_tensor_itemsize(T(self)));
}

static PyObject *tensor_nbytes(PyObject *self, void *c)
{
	return PyLong_FromSize_t(tn_tensor_nbytes(T(self)));
}

static PyObject *tensor_is_contiguous(PyObject *self, void *c)
{
	return PyBool_FromLong(tn_tensor_is_contiguous(T(self)));
}

static PyGetSetDef tensor_getset[] = {
	{ "shape", tensor_shape, NULL, "The sizes, a tuple of ints.", NULL },
	{ "strides", tensor_strides, NULL, "The strides in elements (not bytes), a tuple.", NULL },
	{ "dtype", tensor_dtype, NULL, "The element type's name: 'float32', 'int64', ...", NULL },
	{ "device", tensor_device, NULL, "'cpu', 'cuda:N' or 'meta'.", NULL },
	{ "ndim", tensor_ndim, NULL, "The number of dimensions.", NULL },
	{ "is_readonly", tensor_is_readonly, NULL,
	  "Whether the tensor is read-only (a sealed arena tensor, a read-only mapping): its\n"
	  "buffers are read-only and operators refuse to write to it.", NULL },
	{ "storage_offset", tensor_storage_offset, NULL, "The offset into the storage, in elements.",
	  NULL },
	{ "itemsize", tensor_itemsize, NULL, "Bytes per element.", NULL },
	{ "nbytes", tensor_nbytes, NULL, "numel() * itemsize.", NULL },
	{ "is_contiguous", tensor_is_contiguous, NULL, "Whether the layout is row-major.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyObject *tensor_numel(PyObject *self, PyObject *unused)
{
	return PyLong_FromLongLong(tn_tensor_numel(T(self)));
}

static PyObject *tensor_data_ptr(PyObject *self, PyObject *unused)
{
	return PyLong_FromVoidPtr(tn_tensor_data(T(self)));
}

static PyObject *tensor_item(PyObject *self, PyObject *unused)
{
	tn_scalar s;
	int rc = tn_tensor_item(T(self), &s);
	return rc < 0 ? pytn_raise(rc) : pytn_scalar_to_py(s);
}

static PyObject *tolist_dim(tn_tensor *t, int dim, int64_t *index)
{
	int ndim = tn_tensor_ndim(t);
	if (dim == ndim) {
		tn_scalar s;
		int rc = tn_tensor_get(t, ndim, index, &s);
		return rc < 0 ? pytn_raise(rc) : pytn_scalar_to_py(s);
	}
	int64_t n = tn_tensor_sizes(t)[dim];
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (int64_t i = 0; list && i < n; i++) {
		index[dim] = i;
		PyObject *x = tolist_dim(t, dim + 1, index);
		if (!x) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, x);
	}
	return list;
}

static PyObject *tensor_tolist(PyObject *self, PyObject *unused)
{
	int64_t index[64] = { 0 };
	if (tn_tensor_ndim(T(self)) > 64)
		return PyErr_Format(PyExc_ValueError, "tolist: more than 64 dims");
	return tolist_dim(T(self), 0, index);
}

static PyObject *tensor_numpy(PyObject *self, PyObject *unused)
{
	PyObject *np = PyImport_ImportModule("numpy");
	if (!np)
		return NULL;
	PyObject *r = PyObject_CallMethod(np, "asarray", "O", self);
	Py_DECREF(np);
	return r;
}

static PyObject *tensor_size(PyObject *self, PyObject *args)
{
	PyObject *dim = Py_None;
	if (!PyArg_ParseTuple(args, "|O:size", &dim))
		return NULL;
	if (dim == Py_None)
		return tensor_shape(self, NULL);
	int d = PyLong_AsLong(dim);
	int64_t v;
	if (d == -1 && PyErr_Occurred())
		return NULL;
	int rc = tn_tensor_size(T(self), d, &v);
	return rc < 0 ? pytn_raise(rc) : PyLong_FromLongLong(v);
}

static PyObject *tensor_stride(PyObject *self, PyObject *args)
{
	PyObject *dim = Py_None;
	if (!PyArg_ParseTuple(args, "|O:stride", &dim))
		return NULL;
	if (dim == Py_None)
		return tensor_strides(self, NULL);
	int d = PyLong_AsLong(dim);
	int64_t v;
	if (d == -1 && PyErr_Occurred())
		return NULL;
	int rc = tn_tensor_stride(T(self), d, &v);
	return rc < 0 ? pytn_raise(rc) : PyLong_FromLongLong(v);
}

/* ---- DLPack export --------------------------------------------------------------------------- */

static void capsule_legacy_free(PyObject *cap)
{
	/* A consumer renames the capsule "used_dltensor" when it took the tensor over. */
	if (PyCapsule_IsValid(cap, "dltensor")) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
		if (m && m->deleter)
			m->deleter(m);
	}
}

static void capsule_versioned_free(PyObject *cap)
{
	if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
		DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
		if (m && m->deleter)
			m->deleter(m);
	}
}

static int dl_device_of(const tn_tensor *t, long *type, long *id)
{
	tn_device d = tn_tensor_device(t);
	if (d.type == TN_DEVICE_CPU) {
		*type = kDLCPU;
		*id = 0;
	} else if (d.type == TN_DEVICE_CUDA) {
		*type = kDLCUDA;
		*id = d.index;
	} else {
		PyErr_SetString(PyExc_BufferError, "a meta tensor has no data to export");
		return -1;
	}
	return 0;
}

static PyObject *tensor_dlpack_device(PyObject *self, PyObject *unused)
{
	long type, id;
	if (dl_device_of(T(self), &type, &id) < 0)
		return NULL;
	return Py_BuildValue("(ll)", type, id);
}

static PyObject *tensor_dlpack(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "stream", "max_version", "dl_device", "copy", NULL };
	PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream,
					 &max_version, &dl_device, &copy))
		return NULL;
	long type, id;
	if (dl_device_of(T(self), &type, &id) < 0)
		return NULL;
	if (stream != Py_None && type == kDLCPU)
		return PyErr_Format(PyExc_ValueError,
				    "__dlpack__: stream must be None for a CPU tensor (kDLCPU)");
	bool versioned = false;
	if (max_version != Py_None) {
		long major, minor;
		if (!PyArg_ParseTuple(max_version, "ll", &major, &minor)) {
			PyErr_Clear();
			return PyErr_Format(PyExc_TypeError,
					    "__dlpack__: max_version must be a (major, minor) tuple");
		}
		versioned = major >= 1;
	}
	if (dl_device != Py_None) {
		long want_type, want_id;
		if (!PyArg_ParseTuple(dl_device, "ll", &want_type, &want_id)) {
			PyErr_Clear();
			return PyErr_Format(PyExc_TypeError,
					    "__dlpack__: dl_device must be a (type, id) tuple");
		}
		if (want_type != type || want_id != id)
			return PyErr_Format(PyExc_BufferError,
					    "__dlpack__: the tensor is on device (%ld, %ld); libtensor "
					    "does not export it to (%ld, %ld)", type, id, want_type,
					    want_id);
	}
	int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
	if (want_copy < 0)
		return NULL;

	tn_tensor *src = tn_tensor_ref(T(self));
	int rc = 0;
	if (want_copy) {
		tn_tensor *c;
		rc = tn_clone(src, TN_PRESERVE_FORMAT, &c);
		tn_tensor_unref(src);
		if (rc < 0)
			return pytn_raise(rc);
		src = c;
	} else if (!versioned && tn_tensor_is_readonly(src)) {
		/* A legacy consumer (PyTorch 1.13) cannot be told the memory is read-only and may
		 * write: it gets a private copy-on-write view, so its writes stay in this process. */
		tn_tensor *cow;
		rc = tn_arena_cow(src, &cow);
		tn_tensor_unref(src);
		if (rc == TN_EINVAL)
			return PyErr_Format(PyExc_BufferError,
					    "__dlpack__: the tensor is read-only and not in an arena, "
					    "so a legacy DLPack consumer cannot be given a private view; "
					    "copy it first (copy=True) or ask for max_version=(1, 0)");
		if (rc < 0)
			return pytn_raise(rc);
		src = cow;
	}
	PyObject *cap;
	if (versioned) {
		DLManagedTensorVersioned *m;
		rc = tn_to_dlpack_versioned(src, &m);
		if (rc < 0) {
			tn_tensor_unref(src);
			return pytn_raise(rc);
		}
		if (want_copy)
			m->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
		cap = PyCapsule_New(m, "dltensor_versioned", capsule_versioned_free);
		if (!cap)
			m->deleter(m);
	} else {
		DLManagedTensor *m;
		rc = tn_to_dlpack(src, &m);
		if (rc < 0) {
			tn_tensor_unref(src);
			return pytn_raise(rc);
		}
		cap = PyCapsule_New(m, "dltensor", capsule_legacy_free);
		if (!cap)
			m->deleter(m);
	}
	tn_tensor_unref(src);
	return cap;
}

/* ---- DLPack import ---------------------------------------------------------------------------- */

static int consume_capsule(PyObject *cap, tn_tensor **ret_tensor)
{
	int rc;
	if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
		DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
		rc = tn_from_dlpack_versioned(m, ret_tensor);
		if (rc < 0) {
			pytn_raise(rc);
			return -1;
		}
		/* Taken over: the producer's capsule destructor must not call the deleter. */
		PyCapsule_SetName(cap, "used_dltensor_versioned");
		return 0;
	}
	if (PyCapsule_IsValid(cap, "dltensor")) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
		rc = tn_from_dlpack(m, ret_tensor);
		if (rc < 0) {
			pytn_raise(rc);
			return -1;
		}
		PyCapsule_SetName(cap, "used_dltensor");
		return 0;
	}
	PyErr_SetString(PyExc_TypeError, "from_dlpack: a capsule that is not an unconsumed "
					 "DLPack tensor (\"dltensor\" or \"dltensor_versioned\")");
	return -1;
}

bool pytn_is_tensor_like(PyObject *obj)
{
	return PYTN_IS_TENSOR(obj) || PyCapsule_CheckExact(obj) ||
	       PyObject_HasAttrString(obj, "__dlpack__");
}

/* A tensor for an object with __dlpack__ (or a capsule, or a Tensor). */
static int dlpack_import(PyObject *obj, tn_tensor **ret_tensor)
{
	if (PYTN_IS_TENSOR(obj)) {
		*ret_tensor = tn_tensor_ref(T(obj));
		return 0;
	}
	if (PyCapsule_CheckExact(obj))
		return consume_capsule(obj, ret_tensor);
	PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
	if (!meth) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError,
			     "from_dlpack: expected an object with __dlpack__ or a DLPack capsule, "
			     "got %s", Py_TYPE(obj)->tp_name);
		return -1;
	}
	/* Producers older than DLPack 1.0 (PyTorch 1.13, NumPy 1.24) take no max_version and
	 * answer it with a TypeError: their types are remembered, so that each later import asks
	 * them the legacy way at once instead of paying for the exception every time. */
	static PyObject *legacy_types, *versioned_kw, *no_args;
	if (!legacy_types && !(legacy_types = PySet_New(NULL)))
		goto fail;
	if (!versioned_kw && !(versioned_kw = Py_BuildValue("{s:(ii)}", "max_version", 1, 0)))
		goto fail;
	if (!no_args && !(no_args = PyTuple_New(0)))
		goto fail;
	PyObject *cap;
	int legacy = PySet_Contains(legacy_types, (PyObject *)Py_TYPE(obj));
	if (legacy < 0)
		goto fail;
	if (legacy) {
		cap = PyObject_CallNoArgs(meth);
	} else {
		cap = PyObject_Call(meth, no_args, versioned_kw);
		if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
			PyErr_Clear();
			cap = PyObject_CallNoArgs(meth);
			if (cap && PySet_Add(legacy_types, (PyObject *)Py_TYPE(obj)) < 0)
				PyErr_Clear(); /* only a missed shortcut */
		}
	}
	Py_DECREF(meth);
	if (!cap)
		return -1;
	if (!PyCapsule_CheckExact(cap)) {
		Py_DECREF(cap);
		PyErr_SetString(PyExc_TypeError, "from_dlpack: __dlpack__ did not return a capsule");
		return -1;
	}
	int rc = consume_capsule(cap, ret_tensor);
	Py_DECREF(cap);
	return rc;
fail:
	Py_DECREF(meth);
	return -1;
}

PyObject *pytn_from_dlpack(PyObject *self, PyObject *obj)
{
	tn_tensor *t;
	if (dlpack_import(obj, &t) < 0)
		return NULL;
	return pytn_wrap(t);
}

/* ---- tensors from Python data ------------------------------------------------------------------ */

#define PYTN_MAX_DIMS 64

/* Walk a nested list: check that it is rectangular, note its shape and the widest kind of value
 * (0 bool, 1 int, 2 float), and append the leaves to @leaves. */
static int walk_list(PyObject *obj, int dim, int *ndim, int64_t *shape, int *kind, PyObject *leaves)
{
	if (PyList_Check(obj) || PyTuple_Check(obj)) {
		Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
		if (dim >= PYTN_MAX_DIMS) {
			PyErr_SetString(PyExc_ValueError, "tensor: too many dimensions");
			return -1;
		}
		if (dim == *ndim) {
			(*ndim)++;
			shape[dim] = n;
		} else if (dim > *ndim || shape[dim] != n) {
			PyErr_Format(PyExc_ValueError,
				     "expected sequence of length %lld at dim %d (got %zd)",
				     (long long)(dim < *ndim ? shape[dim] : 0), dim, n);
			return -1;
		}
		PyObject **items = PySequence_Fast_ITEMS(obj);
		for (Py_ssize_t i = 0; i < n; i++)
			if (walk_list(items[i], dim + 1, ndim, shape, kind, leaves) < 0)
				return -1;
		return 0;
	}
	if (dim != *ndim && PyList_GET_SIZE(leaves) > 0) {
		PyErr_Format(PyExc_ValueError, "tensor: a number where a sequence was expected at dim %d",
			     dim);
		return -1;
	}
	*ndim = dim;
	if (PyBool_Check(obj)) {
	} else if (PyLong_Check(obj) || PyIndex_Check(obj)) {
		if (*kind < 1)
			*kind = 1;
	} else if (PyFloat_Check(obj)) {
		*kind = 2;
	} else if (PYTN_IS_TENSOR(obj) && tn_tensor_numel(T(obj)) == 1) {
		int k = tn_dtype_is_floating(tn_tensor_dtype(T(obj))) ? 2 : 1;
		if (*kind < k)
			*kind = k;
	} else {
		PyErr_Format(PyExc_TypeError, "tensor: could not convert %s to a number",
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	return PyList_Append(leaves, obj);
}

static int tensor_from_list(PyObject *data, PyObject *dtype_obj, tn_tensor **ret_tensor)
{
	int64_t shape[PYTN_MAX_DIMS];
	int ndim = 0, kind = 0;
	PyObject *leaves = PyList_New(0);
	if (!leaves)
		return -1;
	if (walk_list(data, 0, &ndim, shape, &kind, leaves) < 0) {
		Py_DECREF(leaves);
		return -1;
	}
	/* An empty list at the last dim is still a dim: [] is shape (0,), [[], []] is (2, 0). */
	if (PyList_GET_SIZE(leaves) == 0) {
		ndim = 0;
		for (PyObject *o = data; PyList_Check(o) || PyTuple_Check(o);) {
			shape[ndim++] = PySequence_Fast_GET_SIZE(o);
			if (PySequence_Fast_GET_SIZE(o) == 0)
				break;
			o = PySequence_Fast_ITEMS(o)[0];
		}
		kind = 2;
	}
	enum tn_dtype dtype = kind == 0 ? TN_BOOL : kind == 1 ? TN_INT64 : TN_FLOAT32;
	if (dtype_obj != Py_None && pytn_dtype_from_obj(dtype_obj, &dtype) < 0) {
		Py_DECREF(leaves);
		return -1;
	}
	tn_tensor *t;
	int rc = tn_empty(ndim, shape, dtype, TN_CPU, TN_CONTIGUOUS_FORMAT, &t);
	if (rc < 0) {
		Py_DECREF(leaves);
		pytn_raise(rc);
		return -1;
	}
	int64_t index[PYTN_MAX_DIMS] = { 0 };
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(leaves); i++) {
		tn_scalar s;
		if (pytn_scalar_from_py(PyList_GET_ITEM(leaves, i), &s) < 0)
			goto fail;
		int64_t rest = i;
		for (int d = ndim - 1; d >= 0; d--) {
			index[d] = rest % shape[d];
			rest /= shape[d];
		}
		rc = tn_tensor_set(t, ndim, index, s);
		if (rc < 0) {
			pytn_raise(rc);
			goto fail;
		}
	}
	Py_DECREF(leaves);
	*ret_tensor = t;
	return 0;
fail:
	Py_DECREF(leaves);
	tn_tensor_unref(t);
	return -1;
}

/* A PEP 3118 format code as a dtype. */
static int format_dtype(const char *fmt, Py_ssize_t itemsize, enum tn_dtype *ret)
{
	if (!fmt)
		fmt = "B";
	if (*fmt == '@' || *fmt == '=' || *fmt == '<')
		fmt++;
	if (fmt[0] && !fmt[1]) {
		switch (fmt[0]) {
		case '?': *ret = TN_BOOL; return 0;
		case 'B': *ret = TN_UINT8; return 0;
		case 'b': *ret = TN_INT8; return 0;
		case 'e': *ret = TN_FLOAT16; return 0;
		case 'f': *ret = TN_FLOAT32; return 0;
		case 'd': *ret = TN_FLOAT64; return 0;
		case 'h': case 'i': case 'l': case 'q': case 'n':
			switch (itemsize) {
			case 2: *ret = TN_INT16; return 0;
			case 4: *ret = TN_INT32; return 0;
			case 8: *ret = TN_INT64; return 0;
			}
		}
	}
	PyErr_Format(PyExc_TypeError, "tensor: buffer format '%s' has no libtensor dtype", fmt);
	return -1;
}

static int tensor_from_buffer(PyObject *data, tn_tensor **ret_tensor)
{
	Py_buffer view;
	if (PyObject_GetBuffer(data, &view, PyBUF_RECORDS_RO) < 0)
		return -1;
	enum tn_dtype dtype;
	int rc = -1;
	if (format_dtype(view.format, view.itemsize, &dtype) < 0)
		goto out;
	if (view.ndim > PYTN_MAX_DIMS) {
		PyErr_SetString(PyExc_ValueError, "tensor: too many dimensions");
		goto out;
	}
	int64_t shape[PYTN_MAX_DIMS];
	for (int d = 0; d < view.ndim; d++)
		shape[d] = view.shape ? view.shape[d] : view.len / view.itemsize;
	tn_tensor *t;
	int err = tn_empty(view.ndim, shape, dtype, TN_CPU, TN_CONTIGUOUS_FORMAT, &t);
	if (err < 0) {
		pytn_raise(err);
		goto out;
	}
	if (view.len && PyBuffer_ToContiguous(tn_tensor_data(t), &view, view.len, 'C') < 0) {
		tn_tensor_unref(t);
		goto out;
	}
	*ret_tensor = t;
	rc = 0;
out:
	PyBuffer_Release(&view);
	return rc;
}

int pytn_tensor_from_obj(PyObject *obj, bool scalars, tn_tensor **ret_tensor)
{
	if (PYTN_IS_TENSOR(obj) || PyCapsule_CheckExact(obj) ||
	    PyObject_HasAttrString(obj, "__dlpack__"))
		return dlpack_import(obj, ret_tensor);
	if (scalars && (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) ||
			PyList_Check(obj) || PyTuple_Check(obj)))
		return tensor_from_list(obj, Py_None, ret_tensor);
	PyErr_Format(PyExc_TypeError, "expected a Tensor (or an object with __dlpack__), got %s",
		     Py_TYPE(obj)->tp_name);
	return -1;
}

PyObject *pytn_tensor_ctor(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "data", "dtype", NULL };
	PyObject *data, *dtype = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:tensor", kwlist, &data, &dtype))
		return NULL;
	tn_tensor *t, *c;
	int rc;
	if (PyBool_Check(data) || PyLong_Check(data) || PyFloat_Check(data) || PyList_Check(data) ||
	    PyTuple_Check(data)) {
		if (tensor_from_list(data, dtype, &t) < 0)
			return NULL;
		return pytn_wrap(t);
	}
	if (pytn_is_tensor_like(data)) {
		if (dlpack_import(data, &t) < 0) {
			/* A producer that refuses a dtype through DLPack (NumPy 1.24's bool) may still
			 * have a buffer. */
			if (!PyObject_CheckBuffer(data) || PYTN_IS_TENSOR(data) ||
			    !(PyErr_ExceptionMatches(PyExc_BufferError) ||
			      PyErr_ExceptionMatches(PyExc_TypeError)))
				return NULL;
			PyErr_Clear();
			if (tensor_from_buffer(data, &t) < 0)
				return NULL;
		}
	} else if (PyObject_CheckBuffer(data)) {
		if (tensor_from_buffer(data, &t) < 0)
			return NULL;
	} else {
		return PyErr_Format(PyExc_TypeError, "tensor: cannot make a tensor of %s",
				    Py_TYPE(data)->tp_name);
	}
	/* A copy, as torch.tensor makes, in the dtype asked for. */
	enum tn_dtype dt = tn_tensor_dtype(t);
	if (dtype != Py_None && pytn_dtype_from_obj(dtype, &dt) < 0) {
		tn_tensor_unref(t);
		return NULL;
	}
	rc = tn_to(t, dt, false, true, NULL, &c);
	tn_tensor_unref(t);
	if (rc < 0)
		return pytn_raise(rc);
	return pytn_wrap(c);
}

/* ---- the buffer protocol ------------------------------------------------------------------------ */

static const char *dtype_format(enum tn_dtype dtype)
{
	switch (dtype) {
	case TN_BOOL: return "?";
	case TN_UINT8: return "B";
	case TN_INT8: return "b";
	case TN_INT16: return "h";
	case TN_INT32: return "i";
	case TN_INT64: return "q";
	case TN_FLOAT16: return "e";
	case TN_FLOAT32: return "f";
	case TN_FLOAT64: return "d";
	default: return NULL;
	}
}

static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
	tn_tensor *t = T(self);
	const char *fmt = dtype_format(tn_tensor_dtype(t));
	view->obj = NULL;
	if (tn_tensor_device(t).type != TN_DEVICE_CPU) {
		PyErr_SetString(PyExc_BufferError, "only a CPU tensor has a buffer; use from_dlpack "
						   "or copy it to the CPU");
		return -1;
	}
	if (!fmt) {
		PyErr_Format(PyExc_BufferError,
			     "%s has no buffer format code: exchange it through DLPack "
			     "(torch.from_dlpack(t), libtensor.from_dlpack) instead",
			     tn_dtype_name(tn_tensor_dtype(t)));
		return -1;
	}
	bool ro = tn_tensor_is_readonly(t);
	if (ro && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
		PyErr_SetString(PyExc_BufferError,
				"the tensor is read-only (sealed): a writable buffer was requested");
		return -1;
	}
	int ndim = tn_tensor_ndim(t);
	bool contiguous = tn_tensor_is_contiguous(t);
	if (!contiguous && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
		PyErr_SetString(PyExc_BufferError, "the tensor is not contiguous: its buffer needs "
						   "strides (PyBUF_STRIDES)");
		return -1;
	}
	Py_ssize_t *mem = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * ndim + 1));
	if (!mem) {
		PyErr_NoMemory();
		return -1;
	}
	size_t itemsize = tn_tensor_itemsize(t);
	const int64_t *sizes = tn_tensor_sizes(t), *strides = tn_tensor_strides(t);
	for (int d = 0; d < ndim; d++) {
		mem[d] = (Py_ssize_t)sizes[d];
		mem[ndim + d] = (Py_ssize_t)(strides[d] * (int64_t)itemsize);
	}
	static char empty_byte;
	void *data = tn_tensor_data(t);
	view->buf = data ? data : &empty_byte;
	view->obj = Py_NewRef(self); /* keeps the tensor, and so its bytes, alive */
	view->len = (Py_ssize_t)(tn_tensor_numel(t) * (int64_t)itemsize);
	view->readonly = ro;
	view->itemsize = (Py_ssize_t)itemsize;
	view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
	view->ndim = ndim;
	view->shape = (flags & PyBUF_ND) == PyBUF_ND ? mem : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? mem + ndim : NULL;
	view->suboffsets = NULL;
	view->internal = mem;
	/* A request for a contiguous buffer (C, Fortran or either) is refused when the layout is
	 * not: the consumer would read the wrong elements. */
	char order = (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS ? 'A'
		     : (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS   ? 'C'
		     : (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS   ? 'F'
									    : 0;
	if (order && !PyBuffer_IsContiguous(view, order)) {
		PyMem_Free(mem);
		Py_CLEAR(view->obj);
		PyErr_Format(PyExc_BufferError, "the tensor is not %s-contiguous",
			     order == 'C' ? "C" : order == 'F' ? "Fortran" : "C- or Fortran");
		return -1;
	}
	return 0;
}

static void tensor_releasebuffer(PyObject *self, Py_buffer *view)
{
	PyMem_Free(view->internal);
}

static PyBufferProcs tensor_as_buffer = { tensor_getbuffer, tensor_releasebuffer };

/* ---- printing, length, methods by operator name ---------------------------------------------- */

static PyObject *tensor_repr(PyObject *self)
{
	char *s;
	int rc = tn_tensor_repr(T(self), &s);
	if (rc < 0) {
		/* A CUDA or meta tensor cannot be printed: describe it. */
		PyErr_Clear();
		PyObject *shape = tensor_shape(self, NULL);
		PyObject *dev = tensor_device(self, NULL);
		PyObject *r = shape && dev ? PyUnicode_FromFormat("<libtensor.Tensor shape=%R dtype=%s "
								  "device=%U>", shape,
								  tn_dtype_name(tn_tensor_dtype(T(self))),
								  dev)
					   : NULL;
		Py_XDECREF(shape);
		Py_XDECREF(dev);
		return r;
	}
	PyObject *r = PyUnicode_FromString(s);
	free(s);
	return r;
}

static Py_ssize_t tensor_len(PyObject *self)
{
	if (tn_tensor_ndim(T(self)) == 0) {
		PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
		return -1;
	}
	return (Py_ssize_t)tn_tensor_sizes(T(self))[0];
}

static PySequenceMethods tensor_as_sequence = { .sq_length = tensor_len };

/* t.add(x), t.sum(dim=0): an attribute the type lacks is looked up in libtensor.ops and bound
 * to the tensor, as PyTorch's Tensor methods are its operators with self first. */
static PyObject *tensor_getattro(PyObject *self, PyObject *name)
{
	PyObject *r = PyObject_GenericGetAttr(self, name);
	if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
		return r;
	const char *n = PyUnicode_AsUTF8(name);
	if (!n || n[0] == '_')
		return NULL;
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyObject *ops = PyImport_ImportModule("libtensor.ops");
	PyObject *fn = ops ? PyObject_GetAttr(ops, name) : NULL;
	Py_XDECREF(ops);
	if (!fn) {
		PyErr_Clear();
		PyErr_Restore(type, value, tb);
		return NULL;
	}
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	r = PyMethod_New(fn, self);
	Py_DECREF(fn);
	return r;
}

/* ---- arithmetic and indexing ---------------------------------------------------------------- */

/*
 * t + u, 2 * t, -t, t[1, ::2]: the operators of libtensor.ops (add, sub, mul, div, remainder,
 * pow, neg) and, for indexing, libtensor._index (select and slice views), all looked up by name
 * at the call, so the Tensor type names no operator itself.
 */
static PyObject *call_named(const char *module, const char *name, PyObject *a, PyObject *b)
{
	PyObject *mod = PyImport_ImportModule(module);
	if (!mod)
		return NULL;
	PyObject *fn = PyObject_GetAttrString(mod, name);
	Py_DECREF(mod);
	if (!fn)
		return NULL;
	PyObject *r = b ? PyObject_CallFunctionObjArgs(fn, a, b, NULL)
			: PyObject_CallOneArg(fn, a);
	Py_DECREF(fn);
	return r;
}

static PyObject *binary(const char *name, PyObject *a, PyObject *b, bool commutes)
{
	if (!PYTN_IS_TENSOR(a) && !PYTN_IS_TENSOR(b))
		Py_RETURN_NOTIMPLEMENTED;
	/* 2 * t as t * 2, so that the Scalar overload keeps the tensor's dtype. */
	if (commutes && !PYTN_IS_TENSOR(a))
		return call_named("libtensor.ops", name, b, a);
	PyObject *r = call_named("libtensor.ops", name, a, b);
	if (!r && PyErr_ExceptionMatches(PyExc_TypeError) &&
	    !(pytn_is_tensor_like(a) && pytn_is_tensor_like(b))) {
		/* No overload takes that operand: let Python try the other side's method. */
		PyErr_Clear();
		Py_RETURN_NOTIMPLEMENTED;
	}
	return r;
}

static PyObject *tensor_add(PyObject *a, PyObject *b) { return binary("add", a, b, true); }
static PyObject *tensor_sub(PyObject *a, PyObject *b) { return binary("sub", a, b, false); }
static PyObject *tensor_mul(PyObject *a, PyObject *b) { return binary("mul", a, b, true); }
static PyObject *tensor_div(PyObject *a, PyObject *b) { return binary("div", a, b, false); }
static PyObject *tensor_rem(PyObject *a, PyObject *b) { return binary("remainder", a, b, false); }

static PyObject *tensor_pow(PyObject *a, PyObject *b, PyObject *mod)
{
	if (mod != Py_None)
		Py_RETURN_NOTIMPLEMENTED;
	return binary("pow", a, b, false);
}

static PyObject *tensor_neg(PyObject *a)
{
	return call_named("libtensor.ops", "neg", a, NULL);
}

static PyNumberMethods tensor_as_number = {
	.nb_add = tensor_add,
	.nb_subtract = tensor_sub,
	.nb_multiply = tensor_mul,
	.nb_true_divide = tensor_div,
	.nb_remainder = tensor_rem,
	.nb_power = tensor_pow,
	.nb_negative = tensor_neg,
	.nb_float = NULL,
};

static PyObject *tensor_getitem(PyObject *self, PyObject *key)
{
	return call_named("libtensor", "_index", self, key);
}

static PyMappingMethods tensor_as_mapping = { .mp_subscript = tensor_getitem };

PyDoc_STRVAR(numel_doc, "numel() -> int: the number of elements.");
PyDoc_STRVAR(data_ptr_doc, "data_ptr() -> int: the address of element [0, ..., 0].");
PyDoc_STRVAR(item_doc, "item() -> bool | int | float: the only element of a one-element tensor.");
PyDoc_STRVAR(tolist_doc, "tolist() -> list: the elements as nested Python lists (a number "
			 "for a 0-dim tensor).");
PyDoc_STRVAR(numpy_doc,
	     "numpy() -> numpy.ndarray: a zero-copy NumPy view through the buffer protocol\n"
	     "(read-only for a read-only tensor). bfloat16 has no NumPy type: use DLPack.");
PyDoc_STRVAR(size_doc, "size(dim=None): the shape, or one dimension's size.");
PyDoc_STRVAR(stride_doc, "stride(dim=None): the strides in elements, or one dimension's.");
PyDoc_STRVAR(dlpack_doc,
	     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule\n\n"
	     "Export through DLPack without copying. max_version None or below (1, 0): a legacy\n"
	     "\"dltensor\" capsule; a read-only arena tensor is then exported as a private\n"
	     "copy-on-write view (the consumer's writes stay in its process), and any other\n"
	     "read-only tensor raises BufferError. max_version >= (1, 0): a \"dltensor_versioned\"\n"
	     "capsule with the READ_ONLY flag for a read-only tensor. stream must be None for a\n"
	     "CPU tensor. copy=True exports a copy (flagged IS_COPIED in the versioned ABI).");
PyDoc_STRVAR(dlpack_device_doc, "__dlpack_device__() -> (1, 0) for the CPU, (2, index) for CUDA.");

static PyMethodDef tensor_methods[] = {
	{ "numel", tensor_numel, METH_NOARGS, numel_doc },
	{ "data_ptr", tensor_data_ptr, METH_NOARGS, data_ptr_doc },
	{ "item", tensor_item, METH_NOARGS, item_doc },
	{ "tolist", tensor_tolist, METH_NOARGS, tolist_doc },
	{ "numpy", tensor_numpy, METH_NOARGS, numpy_doc },
	{ "size", tensor_size, METH_VARARGS, size_doc },
	{ "stride", tensor_stride, METH_VARARGS, stride_doc },
	{ "__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
	  dlpack_doc },
	{ "__dlpack_device__", tensor_dlpack_device, METH_NOARGS, dlpack_device_doc },
	{ NULL, NULL, 0, NULL },
};

PyDoc_STRVAR(tensor_type_doc,
	     "A libtensor tensor: a typed, strided view over a storage (CPU, CUDA or an arena's\n"
	     "shared memory). Made by libtensor.tensor(), the operators of libtensor.ops,\n"
	     "from_dlpack(), Arena.lookup() and Arena.empty(); not constructed directly.\n\n"
	     "numpy.asarray(t) and memoryview(t) view its bytes without copying (read-only for a\n"
	     "read-only tensor); torch.from_dlpack(t) and numpy.from_dlpack(t) too, through\n"
	     "__dlpack__. Attributes not defined here are the operators of libtensor.ops with the\n"
	     "tensor as first argument: t.add(u, alpha=2), t.sum(dim=0). +, -, *, /, %, ** and\n"
	     "unary - call add, sub, mul, div, remainder, pow and neg; t[i, a:b:step, ...] makes a\n"
	     "view with select and slice (ints, slices with a positive step, Ellipsis).");

PyTypeObject pytn_tensor_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libtensor.Tensor",
	.tp_basicsize = sizeof(pytn_tensor_object),
	.tp_dealloc = tensor_dealloc,
	.tp_repr = tensor_repr,
	.tp_as_number = &tensor_as_number,
	.tp_as_sequence = &tensor_as_sequence,
	.tp_as_mapping = &tensor_as_mapping,
	.tp_as_buffer = &tensor_as_buffer,
	.tp_getattro = tensor_getattro,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = tensor_type_doc,
	.tp_weaklistoffset = offsetof(pytn_tensor_object, weakrefs),
	.tp_methods = tensor_methods,
	.tp_getset = tensor_getset,
};

int pytn_tensor_init_types(PyObject *module)
{
	if (PyType_Ready(&pytn_tensor_type) < 0)
		return -1;
	return PyModule_AddObjectRef(module, "Tensor", (PyObject *)&pytn_tensor_type);
}
