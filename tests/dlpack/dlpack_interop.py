# SPDX-License-Identifier: MIT
"""DLPack between libtensor (loaded with ctypes) and real consumers and producers: PyTorch 1.13
and NumPy 1.24. Both directions, every dtype each side takes, odd strides; zero copy is asserted
(the same data pointer, and a write on one side seen on the other), and lifetimes (a side's
tensor outlives the other's). Usage: dlpack_interop.py LIBTENSOR_SO. Exit 0 when every check
holds; prints each failure."""
import ctypes
import sys

import numpy as np
import torch
from torch.utils import dlpack as tdl

lib = ctypes.CDLL(sys.argv[1])
api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


P = ctypes.c_void_p
lib.tn_zeros.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int, Device,
                         ctypes.POINTER(P)]
lib.tn_transpose.argtypes = [P, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(P)]
lib.tn_tensor_data.restype = P
lib.tn_tensor_data.argtypes = [P]
lib.tn_tensor_unref.argtypes = [P]
lib.tn_tensor_ndim.argtypes = [P]
lib.tn_tensor_strides.restype = ctypes.POINTER(ctypes.c_int64)
lib.tn_tensor_strides.argtypes = [P]
lib.tn_to_dlpack.argtypes = [P, ctypes.POINTER(P)]
lib.tn_from_dlpack.argtypes = [P, ctypes.POINTER(P)]
lib.tn_last_error.restype = ctypes.c_char_p

# tn_dtype order (tensor/dtype.h) and the torch and NumPy dtypes of each.
DTYPES = [("bool", torch.bool, np.bool_), ("uint8", torch.uint8, np.uint8),
          ("int8", torch.int8, np.int8), ("int16", torch.int16, np.int16),
          ("int32", torch.int32, np.int32), ("int64", torch.int64, np.int64),
          ("float16", torch.float16, np.float16), ("bfloat16", torch.bfloat16, None),
          ("float32", torch.float32, np.float32), ("float64", torch.float64, np.float64)]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def ok(rc, what):
    if rc != 0:
        raise RuntimeError("%s: %d %s" % (what, rc, lib.tn_last_error().decode()))


def tn_tensor(code, rows=3, cols=5, transpose=True):
    """A libtensor tensor of zeros, transposed (strides [1, cols]) when asked."""
    size = (ctypes.c_int64 * 2)(rows, cols)
    t = P()
    ok(lib.tn_zeros(2, size, code, Device(0, 0), ctypes.byref(t)), "tn_zeros")
    if not transpose:
        return t
    tt = P()
    ok(lib.tn_transpose(t, 0, 1, ctypes.byref(tt)), "tn_transpose")
    lib.tn_tensor_unref(t)
    return tt


def export_capsule(t):
    m = P()
    ok(lib.tn_to_dlpack(t, ctypes.byref(m)), "tn_to_dlpack")
    return api.PyCapsule_New(m, b"dltensor", None)


def import_capsule(cap):
    """libtensor takes a producer's capsule over (renamed used_dltensor, as consumers do)."""
    m = api.PyCapsule_GetPointer(cap, b"dltensor")
    r = P()
    ok(lib.tn_from_dlpack(m, ctypes.byref(r)), "tn_from_dlpack")
    api.PyCapsule_SetName(cap, b"used_dltensor")
    return r


class Exporter:
    """What NumPy's from_dlpack wants: __dlpack__ and __dlpack_device__."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return export_capsule(self.t)

    def __dlpack_device__(self):
        return (1, 0)


for code, (name, tdt, ndt) in enumerate(DTYPES):
    # libtensor -> torch: the same bytes, the same strides, and writes seen both ways.
    t = tn_tensor(code)
    base = lib.tn_tensor_data(t)
    if tdt == torch.bool:
        try:
            tdl.from_dlpack(export_capsule(t))
            check(False, "torch 1.13 took a kDLBool tensor")
        except RuntimeError as e:
            check("not supported" in str(e) or "Unsupported" in str(e) or "bool" in str(e).lower(),
                  "torch's refusal of bool: %s" % e)
    else:
        x = tdl.from_dlpack(export_capsule(t))
        check(x.dtype == tdt, "%s: torch dtype %s" % (name, x.dtype))
        check(x.data_ptr() == base, "%s: torch's data_ptr is libtensor's" % name)
        check(list(x.shape) == [5, 3] and list(x.stride()) == [1, 5],
              "%s: torch shape %s strides %s" % (name, list(x.shape), list(x.stride())))
        x.fill_(3)
        y = tdl.from_dlpack(export_capsule(t))  # libtensor's bytes, as torch wrote them
        check(bool((y == 3).all()), "%s: torch's write seen through a second export" % name)
        lib.tn_tensor_unref(t)  # torch's tensors keep the storage alive
        check(bool((x == 3).all()) and x.data_ptr() == base, "%s: alive after unref" % name)
        del x, y
    # torch -> libtensor: torch's storage kept alive by libtensor's tensor.
    if tdt != torch.bool:
        src = (torch.arange(15) % 7).to(tdt).reshape(3, 5).t()
        cap = tdl.to_dlpack(src)
        r = import_capsule(cap)
        check(lib.tn_tensor_data(r) == src.data_ptr(), "%s: libtensor's data is torch's" % name)
        st = lib.tn_tensor_strides(r)
        check([st[0], st[1]] == [1, 5], "%s: libtensor strides %s" % (name, [st[0], st[1]]))
        ref = src.clone()
        ptr = src.data_ptr()
        del src, cap
        back = tdl.from_dlpack(export_capsule(r))  # and back to torch, the same bytes
        check(back.data_ptr() == ptr and torch.equal(back, ref),
              "%s: torch -> libtensor -> torch" % name)
        lib.tn_tensor_unref(r)
        del back
    # libtensor -> NumPy, and NumPy -> libtensor.
    if ndt is not None and ndt is not np.bool_:
        t = tn_tensor(code, transpose=False)
        a = np.from_dlpack(Exporter(t))
        check(a.dtype == ndt, "%s: numpy dtype %s" % (name, a.dtype))
        check(a.__array_interface__["data"][0] == lib.tn_tensor_data(t),
              "%s: numpy shares libtensor's bytes" % name)
        # NumPy 1.24 makes every DLPack import read-only; libtensor writes, numpy reads.
        check(not a.flags.writeable, "%s: numpy's import is read-only" % name)
        v = np.array([5], dtype=ndt).tobytes()
        ctypes.memmove(lib.tn_tensor_data(t) + (1 * 5 + 2) * len(v), v, len(v))
        check(a[1, 2] == 5, "%s: libtensor's write seen by numpy" % name)
        lib.tn_tensor_unref(t)  # numpy's array keeps the storage alive
        check(a[1, 2] == 5 and a.sum() == 5, "%s: numpy's array alive after unref" % name)
        del a
        arr = (np.arange(12) % 5).astype(ndt).reshape(3, 4)[:, ::2]
        r = import_capsule(arr.__dlpack__())
        check(lib.tn_tensor_data(r) == arr.__array_interface__["data"][0],
              "%s: libtensor's data is numpy's" % name)
        st = lib.tn_tensor_strides(r)
        check([st[0], st[1]] == [4, 2], "%s: strides of numpy's view %s" % (name, [st[0], st[1]]))
        lib.tn_tensor_unref(r)
    elif ndt is None or ndt is np.bool_:
        t = tn_tensor(code)
        try:
            np.from_dlpack(Exporter(t))
            check(False, "numpy 1.24 took %s" % name)
        except (RuntimeError, TypeError, BufferError) as e:
            check("dtype" in str(e).lower() or "bool" in str(e).lower(),
                  "numpy's refusal of %s: %s" % (name, e))
        lib.tn_tensor_unref(t)

print("dlpack_interop: %d failures over %d dtypes (torch %s, numpy %s)" %
      (len(failures), len(DTYPES), torch.__version__, np.__version__))
sys.exit(1 if failures else 0)
