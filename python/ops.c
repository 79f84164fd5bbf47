// SPDX-License-Identifier: MIT
/*
 * The operators by name: every operator of the registry (tn_op_foreach), grouped by base name
 * (aten::add.Tensor, aten::add.Scalar and aten::add.out are libtensor.ops.add), called through
 * the boxed interface. Arguments are bound to each overload's schema as PyTorch's Python
 * argument parser does: positional then keyword, defaults from the schema, keyword-only after
 * the '*'; the first overload whose types fit wins, trying first without converting Python
 * numbers and lists to tensors (so add(t, 2) picks add.Scalar), then with.
 */
#include "pytn.h"

#include <string.h>

#define PYTN_MAX_ARGS 64

static PyObject *groups; /* base name -> list of capsules holding const tn_op * */
static PyObject *order;  /* base names, in definition order */

static int collect(const tn_op *op, void *ctx)
{
	const tn_schema *s = tn_op_schema(op);
	if (!s)
		return 0;
	const char *name = tn_schema_name(s);
	if (!strncmp(name, "aten::", 6))
		name += 6;
	PyObject *key = PyUnicode_FromString(name);
	if (!key)
		return -1;
	PyObject *list = PyDict_GetItemWithError(groups, key);
	if (!list) {
		if (PyErr_Occurred() || !(list = PyList_New(0)) ||
		    PyDict_SetItem(groups, key, list) < 0 || PyList_Append(order, key) < 0) {
			Py_XDECREF(list);
			Py_DECREF(key);
			return -1;
		}
		Py_DECREF(list); /* the dict holds it */
	}
	Py_DECREF(key);
	PyObject *cap = PyCapsule_New((void *)op, "libtensor.op", NULL);
	if (!cap)
		return -1;
	int rc = PyList_Append(list, cap);
	Py_DECREF(cap);
	return rc;
}

static int ensure_groups(void)
{
	if (groups)
		return 0;
	groups = PyDict_New();
	order = PyList_New(0);
	if (!groups || !order || tn_op_foreach(collect, NULL) != 0) {
		Py_CLEAR(groups);
		Py_CLEAR(order);
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_RuntimeError, "cannot list the operators");
		return -1;
	}
	return 0;
}

static const tn_op *group_op(PyObject *list, Py_ssize_t i)
{
	return PyCapsule_GetPointer(PyList_GET_ITEM(list, i), "libtensor.op");
}

PyObject *pytn_op_groups(PyObject *self, PyObject *unused)
{
	if (ensure_groups() < 0)
		return NULL;
	Py_ssize_t n = PyList_GET_SIZE(order);
	PyObject *r = PyList_New(n);
	for (Py_ssize_t i = 0; r && i < n; i++) {
		PyObject *key = PyList_GET_ITEM(order, i);
		PyObject *list = PyDict_GetItem(groups, key);
		PyObject *schemas = PyList_New(PyList_GET_SIZE(list));
		for (Py_ssize_t j = 0; schemas && j < PyList_GET_SIZE(list); j++) {
			PyObject *s = PyUnicode_FromString(tn_schema_str(tn_op_schema(group_op(list, j))));
			if (!s)
				Py_CLEAR(schemas);
			else
				PyList_SET_ITEM(schemas, j, s);
		}
		PyObject *pair = schemas ? PyTuple_Pack(2, key, schemas) : NULL;
		Py_XDECREF(schemas);
		if (!pair) {
			Py_CLEAR(r);
			break;
		}
		PyList_SET_ITEM(r, i, pair);
	}
	return r;
}

/* ---- matching -------------------------------------------------------------------------------- */

static bool is_number(PyObject *o)
{
	return PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o);
}

static bool is_int(PyObject *o, bool strict)
{
	if (PyLong_Check(o))
		return !PyBool_Check(o) || !strict;
	return !strict && PyIndex_Check(o) && !pytn_is_tensor_like(o);
}

static const char *const memory_format_names[] = {
	[TN_CONTIGUOUS_FORMAT] = "contiguous_format",
	[TN_CHANNELS_LAST] = "channels_last",
	[TN_CHANNELS_LAST_3D] = "channels_last_3d",
	[TN_PRESERVE_FORMAT] = "preserve_format",
};

/* A name, with torch's "torch." prefix dropped (str(torch.channels_last)). */
static int name_of(PyObject *o, char *buf, size_t cap)
{
	PyObject *s = PyUnicode_Check(o) ? Py_NewRef(o) : PyObject_Str(o);
	if (!s)
		return -1;
	const char *t = PyUnicode_AsUTF8(s);
	if (!t) {
		Py_DECREF(s);
		return -1;
	}
	if (!strncmp(t, "torch.", 6))
		t += 6;
	snprintf(buf, cap, "%s", t);
	Py_DECREF(s);
	return 0;
}

static int memory_format_of(PyObject *o, enum tn_memory_format *ret)
{
	char buf[64];
	if (name_of(o, buf, sizeof(buf)) < 0)
		return -1;
	for (int i = 0; i < 4; i++)
		if (!strcmp(buf, memory_format_names[i])) {
			*ret = (enum tn_memory_format)i;
			return 0;
		}
	PyErr_Format(PyExc_ValueError, "unknown memory format %R", o);
	return -1;
}

static bool fits_elem(PyObject *o, enum tn_type_kind kind, bool elem_optional, bool strict)
{
	if (o == Py_None)
		return elem_optional;
	switch (kind) {
	case TN_TYPE_INT: return is_int(o, strict);
	case TN_TYPE_FLOAT: return is_number(o) && !PyBool_Check(o);
	case TN_TYPE_BOOL: return PyBool_Check(o);
	case TN_TYPE_TENSOR: return pytn_is_tensor_like(o) || (!strict && is_number(o));
	default: return false;
	}
}

/* Whether @o can be passed as @t (without converting numbers to tensors when @strict). */
static bool fits(PyObject *o, const tn_type *t, bool strict)
{
	if (o == Py_None)
		return t->optional;
	if (t->is_list) {
		if (t->list_size > 0 && t->kind == TN_TYPE_INT && is_int(o, strict))
			return true;
		if (!PyList_Check(o) && !PyTuple_Check(o))
			return false;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
		PyObject **items = PySequence_Fast_ITEMS(o);
		for (Py_ssize_t i = 0; i < n; i++)
			if (!fits_elem(items[i], t->kind, t->elem_optional, strict))
				return false;
		return true;
	}
	switch (t->kind) {
	case TN_TYPE_TENSOR:
		return pytn_is_tensor_like(o) ||
		       (!strict && (is_number(o) || PyList_Check(o) || PyTuple_Check(o)));
	case TN_TYPE_INT: return is_int(o, strict);
	case TN_TYPE_FLOAT:
		return (PyFloat_Check(o) || is_int(o, true)) ||
		       (!strict && PyNumber_Check(o) && !pytn_is_tensor_like(o));
	case TN_TYPE_BOOL: return PyBool_Check(o) || (!strict && is_int(o, true));
	case TN_TYPE_SCALAR:
		return is_number(o) ||
		       (!strict && (PyNumber_Check(o) ||
				    (PYTN_IS_TENSOR(o) && tn_tensor_numel(((pytn_tensor_object *)o)->tensor) == 1)));
	case TN_TYPE_STR: return PyUnicode_Check(o);
	case TN_TYPE_SCALAR_TYPE: {
		if (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o))
			return false;
		enum tn_dtype d;
		if (pytn_dtype_from_obj(o, &d) < 0) {
			PyErr_Clear();
			return false;
		}
		return true;
	}
	case TN_TYPE_DEVICE: {
		if (PyBool_Check(o) || pytn_is_tensor_like(o))
			return false;
		tn_device d;
		if (pytn_device_from_obj(o, &d) < 0) {
			PyErr_Clear();
			return false;
		}
		return true;
	}
	case TN_TYPE_LAYOUT: {
		char buf[32];
		if (name_of(o, buf, sizeof(buf)) < 0) {
			PyErr_Clear();
			return false;
		}
		return !strcmp(buf, "strided");
	}
	case TN_TYPE_MEMORY_FORMAT: {
		enum tn_memory_format f;
		if (memory_format_of(o, &f) < 0) {
			PyErr_Clear();
			return false;
		}
		return true;
	}
	case TN_TYPE_GENERATOR: return PYTN_IS_GENERATOR(o);
	default:
		return false;
	}
}

/* ---- conversion to boxed values --------------------------------------------------------------- */

static int fail(int rc)
{
	pytn_raise(rc);
	return -1;
}

static int to_ivalue(PyObject *o, const tn_type *t, tn_ivalue *ret)
{
	if (o == Py_None) {
		*ret = tn_ivalue_none();
		return 0;
	}
	int rc;
	if (t->is_list) {
		bool single = !PyList_Check(o) && !PyTuple_Check(o);
		Py_ssize_t n = single ? t->list_size : PySequence_Fast_GET_SIZE(o);
		PyObject **items = single ? &o : PySequence_Fast_ITEMS(o);
		if (t->kind == TN_TYPE_TENSOR) {
			tn_tensor **ts = PyMem_Calloc((size_t)n + 1, sizeof(*ts));
			if (!ts) {
				PyErr_NoMemory();
				return -1;
			}
			rc = 0;
			for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
				if (items[i] != Py_None && pytn_tensor_from_obj(items[i], true, &ts[i]) < 0)
					rc = -1;
			if (rc == 0 && (rc = tn_ivalue_tensor_list((size_t)n, ts, ret)) < 0)
				rc = fail(rc);
			for (Py_ssize_t i = 0; i < n; i++)
				tn_tensor_unref(ts[i]);
			PyMem_Free(ts);
			return rc;
		}
		void *buf = PyMem_Calloc((size_t)n + 1, 8);
		if (!buf) {
			PyErr_NoMemory();
			return -1;
		}
		rc = 0;
		for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
			PyObject *it = items[single ? 0 : i];
			if (t->kind == TN_TYPE_INT) {
				PyObject *ix = PyNumber_Index(it);
				long long v = ix ? PyLong_AsLongLong(ix) : -1;
				Py_XDECREF(ix);
				if (v == -1 && PyErr_Occurred())
					rc = -1;
				((int64_t *)buf)[i] = v;
			} else if (t->kind == TN_TYPE_FLOAT) {
				double v = PyFloat_AsDouble(it);
				if (v == -1.0 && PyErr_Occurred())
					rc = -1;
				((double *)buf)[i] = v;
			} else {
				int v = PyObject_IsTrue(it);
				if (v < 0)
					rc = -1;
				((bool *)buf)[i] = v;
			}
		}
		if (rc == 0) {
			if (t->kind == TN_TYPE_INT)
				rc = tn_ivalue_int_list((size_t)n, buf, ret);
			else if (t->kind == TN_TYPE_FLOAT)
				rc = tn_ivalue_double_list((size_t)n, buf, ret);
			else
				rc = tn_ivalue_bool_list((size_t)n, buf, ret);
			if (rc < 0)
				rc = fail(rc);
		}
		PyMem_Free(buf);
		return rc;
	}
	switch (t->kind) {
	case TN_TYPE_TENSOR: {
		tn_tensor *x;
		if (pytn_tensor_from_obj(o, true, &x) < 0)
			return -1;
		rc = tn_ivalue_tensor(x, ret);
		tn_tensor_unref(x);
		return rc < 0 ? fail(rc) : 0;
	}
	case TN_TYPE_INT: {
		PyObject *ix = PyNumber_Index(o);
		long long v = ix ? PyLong_AsLongLong(ix) : -1;
		Py_XDECREF(ix);
		if (v == -1 && PyErr_Occurred())
			return -1;
		*ret = tn_ivalue_int(v);
		return 0;
	}
	case TN_TYPE_FLOAT: {
		double v = PyFloat_AsDouble(o);
		if (v == -1.0 && PyErr_Occurred())
			return -1;
		*ret = tn_ivalue_double(v);
		return 0;
	}
	case TN_TYPE_BOOL: {
		int v = PyObject_IsTrue(o);
		if (v < 0)
			return -1;
		*ret = tn_ivalue_bool(v);
		return 0;
	}
	case TN_TYPE_SCALAR: {
		tn_scalar s;
		if (!PyIndex_Check(o) && !is_number(o) && !PYTN_IS_TENSOR(o) && PyNumber_Check(o)) {
			double v = PyFloat_AsDouble(o); /* a NumPy float */
			if (v == -1.0 && PyErr_Occurred())
				return -1;
			s = tn_scalar_double(v);
		} else if (pytn_scalar_from_py(o, &s) < 0) {
			return -1;
		}
		*ret = tn_ivalue_scalar(s);
		return 0;
	}
	case TN_TYPE_STR: {
		const char *s = PyUnicode_AsUTF8(o);
		if (!s)
			return -1;
		rc = tn_ivalue_string(s, ret);
		return rc < 0 ? fail(rc) : 0;
	}
	case TN_TYPE_SCALAR_TYPE: {
		enum tn_dtype d;
		if (pytn_dtype_from_obj(o, &d) < 0)
			return -1;
		*ret = tn_ivalue_dtype(d);
		return 0;
	}
	case TN_TYPE_DEVICE: {
		tn_device d;
		if (pytn_device_from_obj(o, &d) < 0)
			return -1;
		*ret = tn_ivalue_device(d);
		return 0;
	}
	case TN_TYPE_LAYOUT:
		*ret = tn_ivalue_layout(TN_STRIDED);
		return 0;
	case TN_TYPE_MEMORY_FORMAT: {
		enum tn_memory_format f;
		if (memory_format_of(o, &f) < 0)
			return -1;
		*ret = tn_ivalue_memory_format(f);
		return 0;
	}
	case TN_TYPE_GENERATOR: {
		if (!PYTN_IS_GENERATOR(o)) {
			PyErr_Format(PyExc_TypeError, "expected a libtensor.Generator, got %s",
				     Py_TYPE(o)->tp_name);
			return -1;
		}
		int grc = tn_ivalue_generator(pytn_generator_of(o), ret);
		return grc < 0 ? fail(grc) : 0;
	}
	default:
		PyErr_SetString(PyExc_TypeError, "an argument type the bindings do not know");
		return -1;
	}
}

/* ---- results -------------------------------------------------------------------------------- */

static PyObject *from_ivalue(const tn_ivalue *v)
{
	switch (v->tag) {
	case TN_IVALUE_NONE: Py_RETURN_NONE;
	case TN_IVALUE_TENSOR: return pytn_wrap(tn_tensor_ref(v->u.tensor));
	case TN_IVALUE_INT: return PyLong_FromLongLong(v->u.i);
	case TN_IVALUE_DOUBLE: return PyFloat_FromDouble(v->u.d);
	case TN_IVALUE_BOOL: return PyBool_FromLong(v->u.b);
	case TN_IVALUE_SCALAR: {
		tn_scalar s;
		if (tn_ivalue_to_scalar(v, &s) < 0)
			return pytn_raise(TN_EINVAL);
		return pytn_scalar_to_py(s);
	}
	case TN_IVALUE_DTYPE: return PyUnicode_FromString(tn_dtype_name((enum tn_dtype)v->u.i));
	case TN_IVALUE_DEVICE: {
		tn_device d = { (enum tn_device_type)v->u.i, (int)v->aux };
		return pytn_device_str(d);
	}
	case TN_IVALUE_STRING: {
		const char *s;
		if (tn_ivalue_to_string(v, &s) < 0)
			return pytn_raise(TN_EINVAL);
		return PyUnicode_FromString(s);
	}
	case TN_IVALUE_LAYOUT: return PyUnicode_FromString("strided");
	case TN_IVALUE_GENERATOR: return pytn_wrap_generator(tn_generator_ref(v->u.generator));
	case TN_IVALUE_MEMORY_FORMAT:
		return PyUnicode_FromString(v->u.i >= 0 && v->u.i < 4 ? memory_format_names[v->u.i]
								       : "unknown");
	case TN_IVALUE_INT_LIST: case TN_IVALUE_DOUBLE_LIST: case TN_IVALUE_BOOL_LIST:
	case TN_IVALUE_TENSOR_LIST: {
		size_t n = 0;
		const void *items = NULL;
		if (v->tag == TN_IVALUE_INT_LIST)
			tn_ivalue_to_int_list(v, &n, (const int64_t **)&items);
		else if (v->tag == TN_IVALUE_DOUBLE_LIST)
			tn_ivalue_to_double_list(v, &n, (const double **)&items);
		else if (v->tag == TN_IVALUE_BOOL_LIST)
			tn_ivalue_to_bool_list(v, &n, (const bool **)&items);
		else
			tn_ivalue_to_tensor_list(v, &n, (tn_tensor *const **)&items);
		PyObject *list = PyList_New((Py_ssize_t)n);
		for (size_t i = 0; list && i < n; i++) {
			PyObject *x;
			if (v->tag == TN_IVALUE_INT_LIST)
				x = PyLong_FromLongLong(((const int64_t *)items)[i]);
			else if (v->tag == TN_IVALUE_DOUBLE_LIST)
				x = PyFloat_FromDouble(((const double *)items)[i]);
			else if (v->tag == TN_IVALUE_BOOL_LIST)
				x = PyBool_FromLong(((const bool *)items)[i]);
			else {
				tn_tensor *t = ((tn_tensor *const *)items)[i];
				x = t ? pytn_wrap(tn_tensor_ref(t)) : Py_NewRef(Py_None);
			}
			if (!x) {
				Py_CLEAR(list);
				break;
			}
			PyList_SET_ITEM(list, (Py_ssize_t)i, x);
		}
		return list;
	}
	default:
		return PyErr_Format(PyExc_TypeError, "a result of type %s", tn_ivalue_type_name(v));
	}
}

/* The Python object for result @r: the argument object itself when the result is the
 * argument written to (Tensor(a!)), as add_(t, 1) is t and add(a, b, out=o) is o. */
static PyObject *result_object(const tn_schema *s, size_t r, const tn_ivalue *v, PyObject **slots)
{
	const tn_schema_arg *ret = tn_schema_return_at(s, r);
	if (v->tag == TN_IVALUE_TENSOR && ret->alias_set && ret->alias_write) {
		for (size_t i = 0; i < tn_schema_num_args(s); i++) {
			const tn_schema_arg *a = tn_schema_arg_at(s, i);
			if (a->alias_set && !strcmp(a->alias_set, ret->alias_set) && slots[i] &&
			    PYTN_IS_TENSOR(slots[i]) &&
			    ((pytn_tensor_object *)slots[i])->tensor == v->u.tensor)
				return Py_NewRef(slots[i]);
		}
	}
	return from_ivalue(v);
}

/* ---- binding and calling ------------------------------------------------------------------ */

/* Bind @args/@kwargs to @s's arguments in @slots (borrowed, NULL: use the default). Returns 1
 * on a fit, 0 with a reason in @why, -1 with an exception. *ret_packed owns a tuple made of
 * trailing ints for a last int[] argument (empty(2, 3)). */
static int bind(const tn_schema *s, PyObject *args, PyObject *kwargs, bool strict,
		PyObject **slots, PyObject **ret_packed, char *why, size_t whylen)
{
	size_t n = tn_schema_num_args(s);
	Py_ssize_t nargs = PyTuple_GET_SIZE(args);
	size_t npos = 0;
	*ret_packed = NULL;
	if (n > PYTN_MAX_ARGS) {
		snprintf(why, whylen, "too many arguments in the schema");
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		slots[i] = NULL;
		if (!tn_schema_arg_at(s, i)->kwarg_only)
			npos = i + 1;
	}
	Py_ssize_t take = nargs;
	if (npos > 0 && (Py_ssize_t)npos <= nargs) {
		const tn_schema_arg *last = tn_schema_arg_at(s, npos - 1);
		PyObject *first = PyTuple_GET_ITEM(args, npos - 1);
		if (last->type.is_list && last->type.kind == TN_TYPE_INT && is_int(first, true) &&
		    ((Py_ssize_t)npos < nargs || last->type.list_size == 0)) {
			*ret_packed = PyTuple_GetSlice(args, (Py_ssize_t)npos - 1, nargs);
			if (!*ret_packed)
				return -1;
			slots[npos - 1] = *ret_packed;
			take = (Py_ssize_t)npos - 1;
		}
	}
	if (take > (Py_ssize_t)npos) {
		snprintf(why, whylen, "takes %zu positional arguments but %zd were given", npos, nargs);
		return 0;
	}
	for (Py_ssize_t i = 0; i < take; i++)
		slots[i] = PyTuple_GET_ITEM(args, i);
	if (kwargs) {
		PyObject *key, *value;
		Py_ssize_t pos = 0;
		while (PyDict_Next(kwargs, &pos, &key, &value)) {
			const char *k = PyUnicode_AsUTF8(key);
			if (!k)
				return -1;
			size_t i;
			for (i = 0; i < n; i++)
				if (tn_schema_arg_at(s, i)->name && !strcmp(tn_schema_arg_at(s, i)->name, k))
					break;
			if (i == n) {
				snprintf(why, whylen, "unexpected keyword argument '%s'", k);
				return 0;
			}
			if (slots[i]) {
				snprintf(why, whylen, "got multiple values for argument '%s'", k);
				return 0;
			}
			slots[i] = value;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const tn_schema_arg *a = tn_schema_arg_at(s, i);
		if (!slots[i]) {
			if (!a->has_default && !a->type.optional) {
				snprintf(why, whylen, "missing required argument '%s'", a->name);
				return 0;
			}
			continue;
		}
		if (!fits(slots[i], &a->type, strict)) {
			static const char *const kinds[] = {
#define PYTN_X_(e, nm) [e] = nm,
				TN_TYPE_KIND_LIST(PYTN_X_)
#undef PYTN_X_
			};
			snprintf(why, whylen, "argument '%s' must be %s%s%s, not %s", a->name,
				 kinds[a->type.kind], a->type.is_list ? "[]" : "",
				 a->type.optional ? "?" : "", Py_TYPE(slots[i])->tp_name);
			return 0;
		}
	}
	return 1;
}

static PyObject *call(const tn_op *op, PyObject **slots)
{
	const tn_schema *s = tn_op_schema(op);
	size_t n = tn_schema_num_args(s);
	tn_stack stack = TN_STACK_INIT;
	PyObject *result = NULL;
	int rc = tn_stack_reserve(&stack, n + 1);
	if (rc < 0)
		return pytn_raise(rc);
	for (size_t i = 0; i < n; i++) {
		const tn_schema_arg *a = tn_schema_arg_at(s, i);
		tn_ivalue v;
		if (slots[i]) {
			if (to_ivalue(slots[i], &a->type, &v) < 0)
				goto out;
		} else if (a->has_default) {
			tn_ivalue_copy(&a->default_value, &v);
		} else {
			v = tn_ivalue_none();
		}
		if ((rc = tn_stack_push(&stack, v)) < 0) {
			pytn_raise(rc);
			goto out;
		}
	}
	Py_BEGIN_ALLOW_THREADS
	rc = tn_op_call_boxed(op, &stack);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		/* tn_last_error() is per thread: this is still the calling thread. */
		pytn_raise(rc);
		goto out;
	}
	size_t nret = stack.size;
	if (nret == 0) {
		result = Py_NewRef(Py_None);
	} else if (nret == 1) {
		result = result_object(s, 0, &stack.items[0], slots);
	} else {
		result = PyTuple_New((Py_ssize_t)nret);
		for (size_t i = 0; result && i < nret; i++) {
			PyObject *x = result_object(s, i, &stack.items[i], slots);
			if (!x) {
				Py_CLEAR(result);
				break;
			}
			PyTuple_SET_ITEM(result, (Py_ssize_t)i, x);
		}
	}
out:
	tn_stack_destroy(&stack);
	return result;
}

PyObject *pytn_op_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
	if (PyTuple_GET_SIZE(args) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(args, 0)))
		return PyErr_Format(PyExc_TypeError, "_op_call(name, *args, **kwargs)");
	if (ensure_groups() < 0)
		return NULL;
	PyObject *name = PyTuple_GET_ITEM(args, 0);
	PyObject *list = PyDict_GetItemWithError(groups, name);
	if (!list)
		return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_AttributeError,
							      "no operator named %R", name);
	PyObject *rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
	if (!rest)
		return NULL;
	PyObject *slots[PYTN_MAX_ARGS];
	PyObject *result = NULL, *reasons = PyList_New(0);
	if (!reasons)
		goto out;
	for (int pass = 0; pass < 2; pass++) {
		for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
			const tn_op *op = group_op(list, i);
			const tn_schema *s = tn_op_schema(op);
			if (!s)
				continue;
			char why[256];
			PyObject *packed;
			int fit = bind(s, rest, kwargs, pass == 0, slots, &packed, why, sizeof(why));
			if (fit > 0)
				result = call(op, slots);
			Py_XDECREF(packed);
			if (fit != 0)
				goto out;
			if (pass == 1) {
				PyObject *r = PyUnicode_FromFormat("  %s\n      (%s)", tn_schema_str(s), why);
				if (!r || PyList_Append(reasons, r) < 0) {
					Py_XDECREF(r);
					goto out;
				}
				Py_DECREF(r);
			}
		}
	}
	PyObject *types = PyList_New(0);
	for (Py_ssize_t i = 0; types && i < PyTuple_GET_SIZE(rest); i++) {
		PyObject *tn = PyUnicode_FromString(Py_TYPE(PyTuple_GET_ITEM(rest, i))->tp_name);
		if (!tn || PyList_Append(types, tn) < 0)
			Py_CLEAR(types);
		Py_XDECREF(tn);
	}
	PyObject *sep = PyUnicode_FromString("\n"), *csep = PyUnicode_FromString(", ");
	PyObject *all = sep ? PyUnicode_Join(sep, reasons) : NULL;
	PyObject *got = csep && types ? PyUnicode_Join(csep, types) : NULL;
	if (all && got)
		PyErr_Format(PyExc_TypeError,
			     "%U() received an invalid combination of arguments - got (%U), but "
			     "expected one of:\n%U", name, got, all);
	Py_XDECREF(sep);
	Py_XDECREF(csep);
	Py_XDECREF(all);
	Py_XDECREF(got);
	Py_XDECREF(types);
out:
	Py_XDECREF(reasons);
	Py_DECREF(rest);
	return result;
}
