#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Randomized differential test of libtensor against PyTorch 1.13.

Every operator of libtensor's registry (enumerated with tn_op_foreach, its schema read with
tn_schema_str) is called, boxed by name through ctypes (tn_call_boxed), with random arguments
generated from its schema: tensors of the ten dtypes with broadcastable shapes and odd layouts
(transposed, sliced with a step, expanded, with a storage offset, 0-dim, size 0), values with
NaN, infinities, -0.0, ties and integer extremes, Scalars and ints with special values,
out= tensors and in-place variants. The same call goes to torch.ops.aten.<name>.<overload>,
and the two outcomes are compared: both fail or both succeed; for every returned tensor its
dtype, sizes, strides, storage offset, values, and which argument it aliases; every tensor
argument after the call (what the call wrote); returned bools.

Values: integers and bools exactly; floating point bit for bit (any NaN equals any NaN, -0.0
differs from 0.0), except the operators of ULPS below (libm-dependent functions and
reductions, whose order of summation is the implementation's), which may differ by the given
number of units in the last place of the result's dtype. Error messages are compared too, but
a different message is only reported (kind "message"), never a failure, unless --messages.

Case number i of seed s is generated from random.Random("s:i") alone, so one case can be
replayed with --seed s --case i. Generation needs torch (an out= tensor's shape is asked of
torch first); the comparison needs libtensor only for a case whose torch outcome is known:

  live       (torch importable): generate, evaluate in both, compare.
  --replay F (no torch needed): read cases and torch's outcomes from a corpus F written with
             --write-corpus F by the same script, evaluate in libtensor, compare.

Known disagreements that are being fixed, and deliberate differences, are listed in an
allow-list (allow.txt next to this script; see its header); a disagreement that matches an
entry is counted but does not fail the run. The exit status is 0 when every disagreement is
allowed, 1 otherwise, 2 on a usage error, 77 (skip) when the library cannot be loaded here.

Examples:
  /usr/bin/python3 tests/difftest/difftest.py --lib build/libtensor/.libs/libtensor.so \\
      --seed random --time 600
  /usr/bin/python3 tests/difftest/difftest.py --lib ... --seed 7 --case 1234 -v
  python3 tests/difftest/difftest.py --lib ... --replay tests/difftest/corpus.jsonl.gz
"""
import argparse
import ctypes
import faulthandler
import fnmatch
import gzip
import io
import json
import math
import os
import random
import re
import struct
import sys
import time

try:
    import torch
    import warnings

    warnings.filterwarnings("ignore")
except ImportError:
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- dtypes -----------------------------------------------------------------------------

# Name, libtensor enum value, itemsize, struct format, kind (b, u, i, f).
DTYPES = [
    ("bool", 0, 1, "?", "b"),
    ("uint8", 1, 1, "B", "u"),
    ("int8", 2, 1, "b", "i"),
    ("int16", 3, 2, "h", "i"),
    ("int32", 4, 4, "i", "i"),
    ("int64", 5, 8, "q", "i"),
    ("float16", 6, 2, "e", "f"),
    ("bfloat16", 7, 2, None, "f"),
    ("float32", 8, 4, "f", "f"),
    ("float64", 9, 8, "d", "f"),
]
DT = {d[0]: d for d in DTYPES}
DT_BY_ENUM = {d[1]: d[0] for d in DTYPES}
INT_RANGE = {
    "uint8": (0, 255),
    "int8": (-128, 127),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}
MEMORY_FORMATS = ["contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


def bf16_bits(x):
    """Round a float to bfloat16 (nearest even, as torch does) and return its 16 bits."""
    if math.isfinite(x) and abs(x) > 3.4028234663852886e38:
        x = math.copysign(math.inf, x)
    (b,) = struct.unpack("<I", struct.pack("<f", x))
    if math.isnan(x):
        return 0x7FC0 | ((b >> 16) & 0x8000)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def pack(dtype, values):
    name, _, size, fmt, kind = DT[dtype]
    if name == "bfloat16":
        return b"".join(struct.pack("<H", bf16_bits(v)) for v in values)
    if name == "float16":
        out = []
        for v in values:
            try:
                out.append(struct.pack("<e", v))
            except OverflowError:
                out.append(struct.pack("<e", math.copysign(math.inf, v)))
        return b"".join(out)
    if name == "float32":
        values = [math.copysign(math.inf, v) if math.isfinite(v) and abs(v) > 3.4028234663852886e38
                  else v for v in values]
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def unpack(dtype, raw):
    name, _, size, fmt, kind = DT[dtype]
    n = len(raw) // size
    if name == "bfloat16":
        return [
            struct.unpack("<f", struct.pack("<I", h << 16))[0]
            for h in struct.unpack("<%dH" % n, raw)
        ]
    return list(struct.unpack("<%d%s" % (n, fmt), raw))


def ordered_bits(dtype, raw):
    """Integers in the order of the floats (for ulp distances); -0.0 and 0.0 are both 0."""
    size = DT[dtype][2]
    fmt = {2: "H", 4: "I", 8: "Q"}[size]
    sign = 1 << (size * 8 - 1)
    out = []
    for u in struct.unpack("<%d%s" % (len(raw) // size, fmt), raw):
        out.append(-(u & (sign - 1)) if u & sign else u)
    return out


# ---- schemas ----------------------------------------------------------------------------

ARG_RE = re.compile(
    r"^(?P<type>[A-Za-z]+)(?P<alias>\([^)]*\))?(?P<list>\[\d*\])?(?P<elemopt>\?)?"
    r"(?P<list2>\[\d*\])?(?P<opt>\?)?(?:\s+(?P<name>\w+))?(?:=(?P<default>.*))?$"
)


def split_top(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


class Arg:
    def __init__(self, text, kwarg_only):
        m = ARG_RE.match(text.strip())
        if not m:
            raise ValueError("cannot read argument %r" % text)
        self.type = m.group("type")
        alias = m.group("alias") or ""
        self.write = "!" in alias
        self.is_list = bool(m.group("list") or m.group("list2"))
        self.optional = bool(m.group("opt")) or (bool(m.group("elemopt")) and not self.is_list)
        self.name = m.group("name")
        self.default = m.group("default")
        self.kwarg_only = kwarg_only


class Schema:
    def __init__(self, text):
        self.text = text
        head, rets = text.rsplit(" -> ", 1)
        name, args = head.split("(", 1)
        args = args[: args.rindex(")")]
        name = name.split("::")[-1]
        self.name, _, self.overload = name.partition(".")
        self.full = name
        self.args = []
        kw = False
        for a in split_top(args):
            if a == "*":
                kw = True
                continue
            self.args.append(Arg(a, kw))
        rets = rets.strip()
        if rets.startswith("("):
            rets = rets[1:-1]
        self.rets = [Arg(r, False) for r in split_top(rets)]

    def arg(self, name):
        for a in self.args:
            if a.name == name:
                return a
        return None


# ---- libtensor through ctypes ----------------------------------------------------------


class IValue(ctypes.Structure):
    class U(ctypes.Union):
        _fields_ = [("i", ctypes.c_int64), ("d", ctypes.c_double), ("b", ctypes.c_bool),
                    ("p", ctypes.c_void_p)]

    _fields_ = [("u", U), ("tag", ctypes.c_uint32), ("aux", ctypes.c_uint32)]


class Stack(ctypes.Structure):
    _fields_ = [("items", ctypes.POINTER(IValue)), ("size", ctypes.c_size_t),
                ("capacity", ctypes.c_size_t)]


TAG = {n: i for i, n in enumerate(
    ["none", "tensor", "int", "double", "bool", "scalar", "int_list", "double_list",
     "bool_list", "tensor_list", "string", "dtype", "device", "layout", "memory_format"])}


class SetupError(Exception):
    """libtensor refused to build an input; the case is not a comparison."""


class Lib:
    def __init__(self, path):
        L = self.L = ctypes.CDLL(path)
        vp, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        sig = {
            "tn_op_foreach": (ctypes.c_int, [vp, vp]),
            "tn_op_name": (ctypes.c_char_p, [vp]),
            "tn_op_schema": (vp, [vp]),
            "tn_schema_str": (ctypes.c_char_p, [vp]),
            "tn_call_boxed": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(Stack)]),
            "tn_stack_push": (ctypes.c_int, [ctypes.POINTER(Stack), IValue]),
            "tn_stack_destroy": (None, [ctypes.POINTER(Stack)]),
            "tn_ivalue_tensor": (ctypes.c_int, [vp, ctypes.POINTER(IValue)]),
            "tn_ivalue_int_list": (ctypes.c_int, [sz, ctypes.POINTER(i64), ctypes.POINTER(IValue)]),
            "tn_ivalue_tensor_list": (ctypes.c_int, [sz, ctypes.POINTER(vp), ctypes.POINTER(IValue)]),
            "tn_ivalue_string": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(IValue)]),
            "tn_ivalue_to_tensor_list": (ctypes.c_int, [ctypes.POINTER(IValue), ctypes.POINTER(sz),
                                                        ctypes.POINTER(ctypes.POINTER(vp))]),
            "tn_tensor_unref": (vp, [vp]),
            "tn_tensor_ndim": (ctypes.c_int, [vp]),
            "tn_tensor_sizes": (ctypes.POINTER(i64), [vp]),
            "tn_tensor_strides": (ctypes.POINTER(i64), [vp]),
            "tn_tensor_storage_offset": (i64, [vp]),
            "tn_tensor_dtype": (ctypes.c_int, [vp]),
            "tn_tensor_data": (vp, [vp]),
            "tn_tensor_storage": (vp, [vp]),
            "tn_storage_data": (vp, [vp]),
            "tn_last_error": (ctypes.c_char_p, []),
            "tn_clear_error": (None, []),
        }
        for name, (res, args) in sig.items():
            f = getattr(L, name)
            f.restype, f.argtypes = res, args

    def schemas(self):
        out = []
        CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

        def visit(op, ctx):
            s = self.L.tn_op_schema(op)
            if s:
                out.append(self.L.tn_schema_str(s).decode())
            return 0

        cb = CB(visit)
        self.L.tn_op_foreach(ctypes.cast(cb, ctypes.c_void_p), None)
        return out

    def error(self):
        m = self.L.tn_last_error()
        return m.decode(errors="replace") if m else ""

    def _push(self, stack, iv):
        if self.L.tn_stack_push(ctypes.byref(stack), iv) != 0:
            raise MemoryError("tn_stack_push")

    def make_tensor(self, spec):
        """An input tensor: a 1-d base filled with the spec's bytes, viewed with as_strided."""
        raw = bytes.fromhex(spec["base"])
        dtype = spec["dtype"]
        n = len(raw) // DT[dtype][2]
        base = self._call_tensor("empty.memory_format", [
            ("int_list", [n]), ("dtype", DT[dtype][1]), ("device", 0), ("memory_format", 0)])
        if n:
            ctypes.memmove(self.L.tn_tensor_data(base), raw, len(raw))
        try:
            return self._call_tensor("as_strided", [
                ("tensor", base), ("int_list", spec["size"]), ("int_list", spec["stride"]),
                ("int", spec["offset"])])
        finally:
            self.L.tn_tensor_unref(base)

    def _call_tensor(self, name, values):
        stack = Stack()
        try:
            for v in values:
                self._push_value(stack, v)
            if self.L.tn_call_boxed(name.encode(), ctypes.byref(stack)) != 0:
                raise SetupError("%s: %s" % (name, self.error()))
            iv = stack.items[stack.size - 1]
            t = iv.u.p
            iv.tag = TAG["none"]  # take the reference out of the stack
            return t
        finally:
            self.L.tn_stack_destroy(ctypes.byref(stack))

    def _push_value(self, stack, v):
        kind, x = v
        iv = IValue()
        if kind == "none":
            iv.tag = TAG["none"]
        elif kind == "tensor":
            if self.L.tn_ivalue_tensor(x, ctypes.byref(iv)) != 0:
                raise SetupError("tn_ivalue_tensor: " + self.error())
        elif kind == "int":
            iv.tag, iv.u.i = TAG["int"], x
        elif kind == "double":
            iv.tag, iv.u.d = TAG["double"], x
        elif kind == "bool":
            iv.tag, iv.u.b = TAG["bool"], x
        elif kind == "int_list":
            arr = (ctypes.c_int64 * max(1, len(x)))(*x)
            if self.L.tn_ivalue_int_list(len(x), arr, ctypes.byref(iv)) != 0:
                raise MemoryError("tn_ivalue_int_list")
        elif kind == "tensor_list":
            arr = (ctypes.c_void_p * max(1, len(x)))(*x)
            if self.L.tn_ivalue_tensor_list(len(x), arr, ctypes.byref(iv)) != 0:
                raise MemoryError("tn_ivalue_tensor_list")
        elif kind == "string":
            if self.L.tn_ivalue_string(x.encode(), ctypes.byref(iv)) != 0:
                raise MemoryError("tn_ivalue_string")
        elif kind in ("dtype", "device", "memory_format", "layout"):
            iv.tag, iv.u.i = TAG[kind], x
        else:
            raise ValueError(kind)
        self._push(stack, iv)

    def describe(self, t, inputs):
        """The outcome record of a result tensor (see tensor_record)."""
        L = self.L
        nd = L.tn_tensor_ndim(t)
        size = [L.tn_tensor_sizes(t)[i] for i in range(nd)]
        stride = [L.tn_tensor_strides(t)[i] for i in range(nd)]
        dtype = DT_BY_ENUM[L.tn_tensor_dtype(t)]
        item = DT[dtype][2]
        data = L.tn_tensor_data(t) or 0
        chunks = []
        for idx in indices(size):
            off = sum(i * s for i, s in zip(idx, stride))
            chunks.append(ctypes.string_at(data + off * item, item))
        alias = -1
        if product(size) > 0:
            mine = L.tn_storage_data(L.tn_tensor_storage(t))
            for k, other in inputs:
                if mine and L.tn_storage_data(L.tn_tensor_storage(other)) == mine:
                    alias = k
                    break
        return {"dtype": dtype, "size": size, "stride": stride,
                "offset": L.tn_tensor_storage_offset(t), "data": b"".join(chunks).hex(),
                "alias": alias}

    def run(self, schema, case):
        """Call the operator; the outcome record (see torch_run)."""
        made, values, tensor_args = [], [], []
        try:
            for k, (a, v) in enumerate(zip(schema.args, case["args"])):
                values.append(self._value(a, v, made, tensor_args, k))
        except SetupError as e:
            for t in made:
                self.L.tn_tensor_unref(t)
            return {"setup_error": str(e)}
        stack = Stack()
        try:
            for v in values:
                self._push_value(stack, v)
            self.L.tn_clear_error()
            rc = self.L.tn_call_boxed(schema.full.encode(), ctypes.byref(stack))
            if rc != 0:
                return {"ok": False, "msg": self.error()}
            rets = []
            base = stack.size - len(schema.rets)
            for j, r in enumerate(schema.rets):
                iv = stack.items[base + j]
                if r.type == "bool":
                    rets.append({"bool": bool(iv.u.b)})
                elif r.is_list:
                    n = ctypes.c_size_t()
                    arr = ctypes.POINTER(ctypes.c_void_p)()
                    self.L.tn_ivalue_to_tensor_list(ctypes.byref(iv), ctypes.byref(n),
                                                    ctypes.byref(arr))
                    rets.append({"list": [self.describe(arr[i], tensor_args)
                                          for i in range(n.value)]})
                else:
                    rets.append(self.describe(iv.u.p, tensor_args))
            return {"ok": True, "rets": rets,
                    "after": [self.describe(t, []) for _, t in tensor_args]}
        finally:
            self.L.tn_stack_destroy(ctypes.byref(stack))
            for t in made:
                self.L.tn_tensor_unref(t)

    def _value(self, arg, v, made, tensor_args, k):
        kind = v["t"]
        if kind == "none":
            return ("none", None)
        if kind == "tensor":
            t = self.make_tensor(v)
            made.append(t)
            tensor_args.append((k, t))
            return ("tensor", t)
        if kind == "int":
            return ("int", v["v"])
        if kind == "float":
            return ("double", float(v["v"]))
        if kind == "bool":
            return ("bool", v["v"])
        if kind == "ints":
            return ("int_list", v["v"])
        if kind == "dtype":
            return ("dtype", DT[v["v"]][1])
        if kind == "device":
            return ("device", 0)
        if kind == "memfmt":
            return ("memory_format", MEMORY_FORMATS.index(v["v"]))
        if kind == "str":
            return ("string", v["v"])
        raise ValueError(kind)


def product(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def indices(size):
    if any(s == 0 for s in size):
        return
    idx = [0] * len(size)
    while True:
        yield tuple(idx)
        d = len(size) - 1
        while d >= 0:
            idx[d] += 1
            if idx[d] < size[d]:
                break
            idx[d] = 0
            d -= 1
        if d < 0:
            return


# ---- torch ------------------------------------------------------------------------------


def torch_dtype(name):
    return getattr(torch, name)


def torch_tensor(spec):
    raw = bytearray(bytes.fromhex(spec["base"]))
    dt = torch_dtype(spec["dtype"])
    if len(raw):
        base = torch.frombuffer(raw, dtype=dt).clone()
    else:
        base = torch.empty(0, dtype=dt)
    return base.as_strided(spec["size"], spec["stride"], spec["offset"])


def torch_value(v):
    kind = v["t"]
    if kind == "none":
        return None
    if kind == "tensor":
        return torch_tensor(v)
    if kind in ("int", "bool", "ints", "str"):
        return v["v"]
    if kind == "float":
        return float(v["v"])
    if kind == "dtype":
        return torch_dtype(v["v"])
    if kind == "device":
        return torch.device("cpu")
    if kind == "memfmt":
        return getattr(torch, v["v"])
    raise ValueError(kind)


def torch_record(t, inputs):
    dtype = str(t.dtype).replace("torch.", "")
    size = list(t.shape)
    raw = b""
    if t.numel():
        flat = torch.empty(t.numel(), dtype=t.dtype)
        flat.copy_(t.reshape(-1))
        raw = flat.view(torch.uint8).numpy().tobytes()
    alias = -1
    if t.numel() > 0:
        mine = t.storage().data_ptr()
        for k, other in inputs:
            if mine and other.storage().data_ptr() == mine:
                alias = k
                break
    return {"dtype": dtype, "size": size, "stride": list(t.stride()),
            "offset": t.storage_offset(), "data": raw.hex(), "alias": alias}


def torch_op(schema):
    try:
        packet = getattr(torch.ops.aten, schema.name)
        return getattr(packet, schema.overload or "default")
    except (AttributeError, RuntimeError):
        return None


def python_api(schema, case):
    """Whether the case must go through torch's Python API rather than torch.ops.aten: in
    1.13, torch.ops reads a Python bool given for a Scalar as an int (True becomes 1, an
    int64 Scalar), while the Python API (as libtensor) keeps it a bool."""
    return any(a.type == "Scalar" and v["t"] == "bool" for a, v in zip(schema.args, case["args"]))


RANDOM_OPS = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "uniform_",
              "normal_", "random_", "bernoulli", "bernoulli_", "dropout", "dropout_"}

# Operators that can kill torch 1.13 itself: integer division of the most negative value by
# -1 raises SIGFPE in its CPU kernels (fmod, remainder, div with a rounding mode). Their
# integer cases run in a child process.
RISKY = {"fmod", "fmod_", "remainder", "remainder_", "div", "div_"}


def torch_run_safe(schema, case):
    if schema.name not in RISKY or not any(
            v is not None and v["t"] == "tensor" and DT[v["dtype"]][4] in "ui"
            for v in case["args"]):
        return torch_run(schema, case)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        faulthandler.disable()
        os.close(rfd)
        try:
            data = json.dumps(torch_run(schema, case)).encode()
            with os.fdopen(wfd, "wb") as f:
                f.write(data)
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"setup_error": "torch died of signal %d" % os.WTERMSIG(status)}
    return json.loads(data)


def torch_run(schema, case):
    """The outcome: {"ok": False, "msg"} or {"ok": True, "rets": [...]}, plus "after", the
    records of every tensor argument after the call."""
    fn = torch_op(schema)
    if fn is None:
        return {"setup_error": "torch 1.13 has no aten::%s" % schema.full}
    if python_api(schema, case):
        fn = getattr(torch, schema.name, None)
        if fn is None or schema.name.endswith("_"):
            fn = lambda self, *a, **k: getattr(self, schema.name)(*a, **k)
    pos, kw, tensors = [], {}, []
    for k, (a, v) in enumerate(zip(schema.args, case["args"])):
        x = torch_value(v)
        if isinstance(x, torch.Tensor):
            tensors.append((k, x))
        if a.kwarg_only or (a.name == "alpha" and python_api(schema, case)):
            kw[a.name] = x
        else:
            pos.append(x)
    try:
        res = fn(*pos, **kw)
    except Exception as e:  # torch raises RuntimeError, IndexError, TypeError, ...
        msg = str(e).split("\n")[0]
        if isinstance(e, TypeError) and "invalid combination of arguments" in msg:
            # A bool Scalar where torch's Python API has no such overload
            # (bitwise_xor(True, tensor)): the case cannot be put to torch.
            return {"setup_error": "torch cannot take it: " + msg}
        # What a failed call left in its arguments is not compared (torch may have resized an
        # out= into uninitialised memory before failing).
        return {"ok": False, "msg": msg}
    if not isinstance(res, (tuple, list)) or not schema.rets[0].is_list:
        res = res if isinstance(res, tuple) else (res,)
    else:
        res = (res,)
    rets = []
    for r, x in zip(schema.rets, res):
        if r.type == "bool":
            rets.append({"bool": bool(x)})
        elif r.is_list:
            rets.append({"list": [torch_record(t, tensors) for t in x]})
        else:
            rets.append(torch_record(x, tensors))
    if ULPS.get(schema.name, 0) is None:
        for r in rets:  # uninitialised memory
            r["data"] = ""
    return {"ok": True, "rets": rets, "after": [torch_record(t, []) for _, t in tensors]}


# ---- case generation --------------------------------------------------------------------

SPECIAL_FLOATS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                  1e-40, 65504.0, 70000.0, 3e38, 1e300, -1e10, 2.0 ** 31, 2.0 ** 63, -129.5,
                  255.5, 256.0, -1.0]
SPECIAL_SCALARS = [0, 1, -1, 2, 3, -7, 249, 300, 70000, 2 ** 31, 2 ** 63 - 1, -(2 ** 63),
                   True, False, 0.0, -0.0, 0.5, -0.5, 1.37, 2.5, -2.5, 1e10, math.nan,
                   math.inf, -math.inf, 772.0]


def rand_value(rng, dtype):
    kind = DT[dtype][4]
    if kind == "b":
        return rng.random() < 0.5
    if kind in ("u", "i"):
        lo, hi = INT_RANGE[dtype]
        r = rng.random()
        if r < 0.75:
            return max(lo, min(hi, rng.randint(-6, 9)))
        if r < 0.9:
            return rng.choice([lo, hi, lo + 1, hi - 1, 0, -1 if lo < 0 else 1])
        return rng.randint(lo, hi)
    r = rng.random()
    if r < 0.45:
        return float(rng.randint(-6, 9))
    if r < 0.8:
        return round(rng.uniform(-10, 10), rng.choice([1, 3, 7]))
    return rng.choice(SPECIAL_FLOATS)


def rand_shape(rng):
    nd = rng.choices([0, 1, 2, 3, 4], weights=[2, 4, 5, 3, 1])[0]
    return [rng.choices([0, 1, 2, 3, 4, 5], weights=[1, 4, 5, 4, 2, 1])[0] for _ in range(nd)]


def broadcast_variant(rng, shape):
    """A shape that broadcasts to @shape: leading dims dropped, some dims set to 1."""
    s = list(shape)
    if s and rng.random() < 0.3:
        s = s[rng.randint(0, len(s)):]
    return [1 if (d and rng.random() < 0.25) else d for d in s]


def contiguous_strides(size):
    st, acc = [], 1
    for d in reversed(size):
        st.append(acc)
        acc *= max(d, 1)
    return list(reversed(st))


def layout(rng, size, writable):
    """(strides, storage offset, base length) for a tensor of @size in a random layout."""
    nd = len(size)
    r = rng.random()
    offset = rng.choice([0, 0, 0, 1, 3])
    if nd >= 2 and r < 0.2:  # transposed / permuted
        perm = list(range(nd))
        rng.shuffle(perm)
        phys = [size[p] for p in perm]
        pst = contiguous_strides(phys)
        stride = [0] * nd
        for i, p in enumerate(perm):
            stride[p] = pst[i]
    elif nd >= 1 and r < 0.4:  # sliced with a step
        steps = [rng.choice([1, 2, 3]) for _ in size]
        phys = [d * s for d, s in zip(size, steps)]
        pst = contiguous_strides(phys)
        stride = [p * s for p, s in zip(pst, steps)]
    elif nd >= 1 and r < (0.47 if writable else 0.55):  # expanded
        stride = contiguous_strides(size)
        for i in range(nd):
            if rng.random() < 0.5:
                stride[i] = 0
    else:
        stride = contiguous_strides(size)
    extent = sum((d - 1) * s for d, s in zip(size, stride)) + 1 if product(size) else 0
    return stride, offset, offset + extent + rng.choice([0, 0, 1])


def tensor_spec(rng, dtype, size, writable=False, contiguous=False):
    if contiguous:
        stride, offset = contiguous_strides(size), 0
        n = product(size)
    else:
        stride, offset, n = layout(rng, size, writable)
    vals = [rand_value(rng, dtype) for _ in range(n)]
    return {"t": "tensor", "dtype": dtype, "size": list(size), "stride": stride,
            "offset": offset, "base": pack(dtype, vals).hex()}


def rand_dtype(rng):
    return rng.choice([d[0] for d in DTYPES])


def rand_scalar(rng):
    r = rng.random()
    if r < 0.4:
        v = rng.choice(SPECIAL_SCALARS)
    elif r < 0.7:
        v = rng.randint(-5, 9)
    elif r < 0.85:
        v = round(rng.uniform(-5, 5), 2)
    else:
        v = rng.random() < 0.5
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": v}
    return {"t": "float", "v": v}


def factorize(rng, n):
    """A random shape with n elements (n >= 0)."""
    if n == 0:
        return rng.choice([[0], [0, 3], [2, 0]])
    dims = []
    m = n
    for p in (2, 3, 5, 7):
        while m % p == 0:
            dims.append(p)
            m //= p
    if m > 1:
        dims.append(m)
    rng.shuffle(dims)
    out = []
    for d in dims:
        if out and rng.random() < 0.5:
            out[-1] *= d
        else:
            out.append(d)
    for _ in range(rng.choice([0, 0, 1])):
        out.insert(rng.randint(0, len(out)), 1)
    return out


def gen_int(rng, schema, arg, ctx):
    name = arg.name
    nd = len(ctx["shape"])
    if name in ("dim", "dim0", "dim1"):
        if rng.random() < 0.08:
            return rng.choice([nd, -nd - 1, nd + 1])
        return rng.randint(-max(nd, 1), max(nd, 1) - 1)
    sz = ctx["shape"][ctx["dim"]] if nd else 1
    if name == "index":
        return rng.randint(-sz - 1, sz)
    if name in ("start", "end", "length"):
        if name == "end" and rng.random() < 0.25:
            return 2 ** 63 - 1
        return rng.randint(-sz - 1, sz + 1)
    if name == "step":
        return rng.choice([1, 1, 2, 3, 5, 0, -1]) if rng.random() < 0.3 else rng.choice([1, 2, 3])
    if name == "storage_offset":
        return rng.randint(0, 3)
    return rng.randint(-2, 4)


def gen_int_list(rng, schema, arg, ctx):
    name, shape, nd = arg.name, ctx["shape"], len(ctx["shape"])
    op = schema.name
    if name == "dims":
        perm = list(range(nd))
        rng.shuffle(perm)
        perm = [p - nd if rng.random() < 0.3 else p for p in perm]
        if rng.random() < 0.08:
            perm = perm[:-1] if perm else [0]
        return perm
    if name == "dim":
        if nd == 0 or rng.random() < 0.15:
            return [] if rng.random() < 0.7 else [0]
        k = rng.choice([1, 1, 1, 2, nd])
        dims = rng.sample(range(nd), min(k, nd))
        dims = [d - nd if rng.random() < 0.3 else d for d in dims]
        if rng.random() < 0.05:
            dims.append(dims[0])
        return dims
    if op in ("view", "reshape") and name in ("size", "shape"):
        out = factorize(rng, product(shape))
        if out and rng.random() < 0.3:
            out[rng.randrange(len(out))] = -1
        if rng.random() < 0.05:
            out = out + [2]
        return out
    if op == "expand":
        out = [d if d != 1 else rng.choice([1, 2, 3]) for d in shape]
        out = [-1 if rng.random() < 0.2 else d for d in out]
        for _ in range(rng.choice([0, 0, 1, 2])):
            out.insert(0, rng.choice([1, 2, 3]))
        if rng.random() < 0.05 and out:
            out[-1] = 7
        return out
    if name in ("stride", "padding", "dilation", "kernel_size", "output_size") and "size_arg" not in ctx:
        # The network layers' int[1]/int[2] parameters: one value or one per spatial dim.
        lo = 0 if name in ("padding", "output_size") else 1
        return [rng.choice([lo, 1, 1, 2, 3]) for _ in range(rng.choice([1, 2]))]
    if name == "stride":
        return [rng.choice([0, 1, 1, 2, 3, 4]) for _ in ctx["size_arg"]]
    if name == "size" and op == "as_strided":
        sz = [rng.randint(0, 3) for _ in range(rng.randint(0, 3))]
        ctx["size_arg"] = sz
        return sz
    sz = rand_shape(rng)
    ctx["size_arg"] = sz
    return sz


def gen_case(rng, schema, probe):
    """One case: {"op": name, "args": [...]}. @probe(schema, case) runs it in torch."""
    shape = rand_shape(rng)
    ctx = {"shape": shape, "dim": rng.randrange(len(shape)) if shape else 0}
    main_dtype = rand_dtype(rng)
    args = []
    first_tensor = True
    for a in schema.args:
        if a.optional and (a.default in (None, "None") or a.type == "Tensor") and \
                rng.random() < (0.5 if a.type != "Tensor" else 0.3):
            args.append({"t": "none"})
            continue
        if a.type == "Tensor" and a.kwarg_only and a.write:
            args.append(None)  # out=, filled in below
            continue
        if a.type == "Tensor":
            if first_tensor:
                size = shape
                dtype = main_dtype
            else:
                size = broadcast_variant(rng, shape) if rng.random() < 0.9 else rand_shape(rng)
                dtype = main_dtype if rng.random() < 0.4 else rand_dtype(rng)
            if a.name == "condition":
                dtype = "bool" if rng.random() < 0.9 else dtype
            if a.is_list:
                args.append({"t": "none"})
                continue
            args.append(tensor_spec(rng, dtype, size, writable=a.write))
            first_tensor = False
        elif a.type == "Scalar":
            if schema.name == "arange":
                v = {"start": rng.randint(-5, 5), "end": rng.randint(-3, 12),
                     "step": rng.choice([1, 1, 2, 3, -1, 0, 0.5, 1.5])}[a.name]
                if rng.random() < 0.2:
                    v = v + 0.25
                args.append({"t": "float" if isinstance(v, float) else "int", "v": v})
            else:
                args.append(rand_scalar(rng))
        elif a.type == "float":
            # eps-like and probability-like values (layer_norm's eps).
            args.append({"t": "float", "v": rng.choice([1e-5, 1e-5, 1e-3, 0.5, 0.0])})
        elif a.type == "int" and a.is_list:
            args.append({"t": "ints", "v": gen_int_list(rng, schema, a, ctx)})
        elif a.type == "int":
            args.append({"t": "int", "v": gen_int(rng, schema, a, ctx)})
        elif a.type == "float":
            # batch_norm's momentum and eps.
            args.append({"t": "float", "v": rng.choice([0.0, 0.1, 1e-5, 0.5])})
        elif a.type == "bool":
            v = False if a.name == "non_blocking" else rng.random() < 0.5
            args.append({"t": "bool", "v": v})
        elif a.type == "ScalarType":
            args.append({"t": "dtype", "v": rand_dtype(rng)})
        elif a.type == "Device":
            args.append({"t": "device"})
        elif a.type == "MemoryFormat":
            fmts = ["contiguous_format", "preserve_format"]
            if len(shape) == 4:
                fmts.append("channels_last")
            args.append({"t": "memfmt", "v": rng.choice(fmts)})
        elif a.type == "str":
            if a.name == "rounding_mode":
                v = rng.choice(["trunc", "floor", "trunc", "floor", "bogus"])
            else:
                v = rng.choice(["none", "tanh", "none", "tanh", "bogus"])
            args.append({"t": "str", "v": v})
        else:
            raise ValueError("no generator for %s in %s" % (a.type, schema.text))
    outs = [i for i, a in enumerate(schema.args) if a.type == "Tensor" and a.kwarg_only and
            a.write]
    if outs:
        # Ask torch the shape it would give each out= (it resizes a size-0 one).
        probe_case = {"op": schema.full, "args": list(args)}
        odt = {}
        for i in outs:
            odt[i] = main_dtype if rng.random() < 0.5 else rand_dtype(rng)
            if schema.args[i].name in ("indices", "max_values", "min_indices") or \
                    (schema.name in ("argmax", "argmin")):
                odt[i] = "int64" if rng.random() < 0.85 else odt[i]
            probe_case["args"][i] = tensor_spec(rng, odt[i], [0], contiguous=True)
        got = probe(schema, probe_case)
        for j, i in enumerate(outs):
            size = None
            if got.get("ok"):
                size = got["after"][[k for k, a in enumerate(probe_case["args"])
                                     if a["t"] == "tensor"].index(i)]["size"]
            r = rng.random()
            if size is None or r < 0.05:
                size = rand_shape(rng) if rng.random() < 0.5 else [0]
            args[i] = tensor_spec(rng, odt[i], size, writable=True)
    return {"op": schema.full, "args": args}


# ---- comparison -------------------------------------------------------------------------

# Units in the last place allowed for floating results, per operator (the default is 0: bit
# for bit). Transcendental functions: torch uses SLEEF or its own vectorised code, libtensor
# libm. Reductions: the order of additions and multiplications is each implementation's.
ULPS = {}
for _n in ("exp expm1 log log1p log2 rsqrt sin cos tan tanh sigmoid erf gelu gelu_ pow pow_ "
           "atan2 atan2_ sqrt reciprocal").split():
    ULPS[_n] = 4
for _n in ("exp_ expm1_ log_ log1p_ log2_ rsqrt_ sin_ cos_ tan_ tanh_ sigmoid_ erf_ sqrt_ "
           "reciprocal_").split():
    ULPS[_n] = 4
for _n in "sum mean prod".split():
    ULPS[_n] = 16
# softmax and log_softmax: exp (libtensor's own vectorised one, within 1 ulp) and a row sum in
# another order; silu: exp; layer_norm: two row sums.
for _n in "softmax log_softmax silu silu_".split():
    ULPS[_n] = 4
ULPS["layer_norm"] = 16
# Uninitialised memory: no values to compare.
ULPS["empty"] = ULPS["empty_strided"] = None


# The unary floating functions compute in the input's dtype (float32 for integers and bool,
# as PyTorch's TensorIterator does) and convert into out's: the ulps of those results are
# counted in the compute dtype where out's is wider (cos of an int16 into float64 is a float32
# value in both, one float32 ulp apart when torch's vectorised cosf rounds the other way).
UNARY_FLOAT = set("exp expm1 log log1p log2 sqrt rsqrt sin cos tan tanh sigmoid erf "
                  "reciprocal".split())
FLOAT_WIDTH = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}  # significand bits


def ulp_dtype(schema, case, dtype):
    """The dtype whose ulps measure a result of @dtype (narrower compute dtypes, above)."""
    args = case["args"]
    if (schema.name == "pow" and len(args) > 1 and args[0]["t"] in ("int", "float", "bool")
            and args[1]["t"] == "tensor"):
        # pow(Scalar, Tensor) computes in the promoted dtype of the two (a float Scalar and an
        # integer tensor: float32) and converts into out's.
        td = args[1]["dtype"]
        ct = td if td in FLOAT_WIDTH else "float32" if args[0]["t"] == "float" else None
        if ct and dtype in FLOAT_WIDTH and FLOAT_WIDTH[ct] < FLOAT_WIDTH[dtype]:
            return ct
        return dtype
    if schema.name not in UNARY_FLOAT or not args or args[0]["t"] != "tensor":
        return dtype
    ct = case["args"][0]["dtype"]
    if ct not in FLOAT_WIDTH:
        ct = "float32"
    if dtype in FLOAT_WIDTH and FLOAT_WIDTH[ct] < FLOAT_WIDTH[dtype]:
        return ct
    return dtype


def values_equal(dtype, a_hex, b_hex, ulps, ulp_dt=None):
    """None when equal within @ulps (counted in @ulp_dt's ulps, when given), else the index
    of the first different element."""
    if a_hex == b_hex:
        return None
    a, b = bytes.fromhex(a_hex), bytes.fromhex(b_hex)
    if len(a) != len(b):
        return 0
    if ulps and ulp_dt and ulp_dt != dtype:
        i = values_equal(ulp_dt, pack(ulp_dt, unpack(dtype, a)).hex(),
                         pack(ulp_dt, unpack(dtype, b)).hex(), ulps)
        if i is not None:
            return i
        # Both within @ulps in the compute dtype: the same value there, or neighbours.
        return None
    kind = DT[dtype][4]
    if kind != "f":
        size = DT[dtype][2]
        for i in range(0, len(a), size):
            if a[i:i + size] != b[i:i + size]:
                return i // size
        return None
    fa, fb = unpack(dtype, a), unpack(dtype, b)
    oa, ob = ordered_bits(dtype, a), ordered_bits(dtype, b)
    size = DT[dtype][2]
    for i in range(len(fa)):
        if math.isnan(fa[i]) and math.isnan(fb[i]):
            continue
        if math.isnan(fa[i]) or math.isnan(fb[i]):
            return i
        if ulps == 0:
            if a[i * size:(i + 1) * size] != b[i * size:(i + 1) * size]:
                return i
        elif abs(oa[i] - ob[i]) > ulps:
            return i
    return None


def show(dtype, hexdata, i):
    vals = unpack(dtype, bytes.fromhex(hexdata))
    return vals[i] if i < len(vals) else None


def compare_record(where, exp, got, ulps, out, ulp_dt=None):
    if exp["dtype"] != got["dtype"]:
        out.append(("dtype", "%s: torch %s, libtensor %s" % (where, exp["dtype"], got["dtype"])))
        return
    if exp["size"] != got["size"]:
        out.append(("shape", "%s: torch %s, libtensor %s" % (where, exp["size"], got["size"])))
        return
    i = None if ulps is None else values_equal(exp["dtype"], exp["data"], got["data"], ulps,
                                                 ulp_dt)
    if i is not None:
        out.append(("values", "%s: element %d: torch %r, libtensor %r" % (
            where, i, show(exp["dtype"], exp["data"], i), show(got["dtype"], got["data"], i))))
    if where.startswith("arg"):
        return
    if exp["stride"] != got["stride"]:
        out.append(("strides" if product(exp["size"]) else "strides0", "%s: sizes %s: torch strides %s, libtensor %s" % (
            where, exp["size"], exp["stride"], got["stride"])))
    if exp["alias"] != got["alias"]:
        out.append(("alias", "%s: aliases argument %d in torch, %d in libtensor" % (
            where, exp["alias"], got["alias"])))
    elif exp["alias"] >= 0 and exp["offset"] != got["offset"]:
        out.append(("offset", "%s: storage offset: torch %d, libtensor %d" % (
            where, exp["offset"], got["offset"])))


def compare(schema, case, exp, got, messages=False):
    """A list of (kind, detail) disagreements."""
    out = []
    if "setup_error" in got:
        return [("setup", got["setup_error"])]
    if exp["ok"] != got["ok"]:
        if exp["ok"]:
            resized = any(a is not None and a["t"] == "tensor" and schema.args[k].write and
                          schema.args[k].kwarg_only and exp["after"][_tindex(case, k)]["size"]
                          != a["size"] for k, a in enumerate(case["args"]))
            kind = "out-resize" if resized else "lib-error"
            return [(kind, "torch succeeds, libtensor fails: %s" % got["msg"])]
        return [("torch-error", "torch fails (%s), libtensor succeeds" % exp["msg"])]
    if not exp["ok"]:
        if exp["msg"] != got["msg"]:
            out.append(("message", "torch: %s | libtensor: %s" % (exp["msg"], got["msg"])))
        return out
    ulps = ULPS.get(schema.name, 0)
    for j, (e, g) in enumerate(zip(exp["rets"], got["rets"])):
        if "bool" in e:
            if e != g:
                out.append(("values", "return %d: torch %s, libtensor %s" % (j, e, g)))
        elif "list" in e:
            if len(e["list"]) != len(g["list"]):
                out.append(("shape", "return %d: %d tensors in torch, %d in libtensor" % (
                    j, len(e["list"]), len(g["list"]))))
            else:
                for m, (ee, gg) in enumerate(zip(e["list"], g["list"])):
                    compare_record("return %d[%d]" % (j, m), ee, gg, ulps, out)
        else:
            compare_record("return %d" % j, e, g, ulps, out,
                           ulp_dtype(schema, case, e["dtype"]))
    if not out:
        tensor_args = [k for k, a in enumerate(case["args"]) if a["t"] == "tensor"]
        for n, (e, g) in enumerate(zip(exp["after"], got["after"])):
            compare_record("arg %s after the call" % schema.args[tensor_args[n]].name, e, g,
                           ulps, out, ulp_dtype(schema, case, e["dtype"]))
    return out


def _tindex(case, k):
    return [i for i, a in enumerate(case["args"]) if a["t"] == "tensor"].index(k)


# ---- allow-list -------------------------------------------------------------------------


class Allow:
    """allow.txt: one entry a line, "OP-GLOB KIND [dtype=D] [dtype_arg=GLOB] [detail~TEXT]
    # item". KIND is a disagreement kind or *; dtype= matches when any tensor argument has
    dtype D; dtype_arg= when a ScalarType argument matches GLOB; detail~ when TEXT occurs in
    the disagreement's detail."""

    def __init__(self, path):
        self.entries = []
        if not path:
            return
        with open(path) as f:
            for n, line in enumerate(f, 1):
                body, _, note = line.partition("#")
                words = body.split()
                if not words:
                    continue
                if len(words) < 2:
                    raise SystemExit("%s:%d: expected OP KIND [conditions]" % (path, n))
                conds = []
                rest = body.split(None, 2)[2] if len(words) > 2 else ""
                for m in re.finditer(r"(\w+)(=|~)(\"[^\"]*\"|\S+)", rest):
                    conds.append((m.group(1), m.group(2), m.group(3).strip('"')))
                self.entries.append({"op": words[0], "kind": words[1], "conds": conds,
                                     "note": note.strip(), "line": n, "hits": 0})

    def match(self, op, kind, detail, case):
        for e in self.entries:
            if not any(fnmatch.fnmatchcase(op, g) for g in e["op"].split(",")):
                continue
            if e["kind"] not in ("*", kind):
                continue
            ok = True
            for key, how, val in e["conds"]:
                if key == "dtype":
                    ok = any(a["t"] == "tensor" and a["dtype"] == val for a in case["args"])
                elif key == "dtype_arg":
                    ok = any(a["t"] == "dtype" and fnmatch.fnmatchcase(a["v"], val)
                             for a in case["args"])
                elif key == "detail":
                    ok = val in detail
                else:
                    ok = False
                if not ok:
                    break
            if ok:
                e["hits"] += 1
                return e
        return None


# ---- reporting --------------------------------------------------------------------------


def torch_repr(schema, case):
    """The case as a line of PyTorch, to paste into python3."""
    def tensor(v):
        vals = unpack(v["dtype"], bytes.fromhex(v["base"]))
        vals = [("float('%s')" % x if isinstance(x, float) and not math.isfinite(x) else
                 repr(x)) for x in vals]
        s = "torch.tensor([%s], dtype=torch.%s)" % (", ".join(vals), v["dtype"])
        return "%s.as_strided(%s, %s, %d)" % (s, v["size"], v["stride"], v["offset"])

    parts = []
    for a, v in zip(schema.args, case["args"]):
        t = v["t"]
        if t == "none":
            s = "None"
        elif t == "tensor":
            s = tensor(v)
        elif t in ("dtype", "memfmt"):
            s = "torch." + v["v"]
        elif t == "device":
            s = "'cpu'"
        elif t == "float" and not math.isfinite(v["v"]):
            s = "float('%s')" % v["v"]
        else:
            s = repr(v["v"])
        kw = a.kwarg_only or (a.name == "alpha" and python_api(schema, case))
        parts.append(("%s=%s" % (a.name, s)) if kw else s)
    if python_api(schema, case):
        if schema.name.endswith("_") or (torch is not None and not hasattr(torch, schema.name)):
            return "%s.%s(%s)" % (parts[0], schema.name, ", ".join(parts[1:]))
        return "torch.%s(%s)" % (schema.name, ", ".join(parts))
    return "torch.ops.aten.%s.%s(%s)" % (schema.name, schema.overload or "default",
                                         ", ".join(parts))


def signature(op, kind, detail):
    """Disagreements with the same signature count as one in the summary."""
    d = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", detail)
    d = re.sub(r"\[[^\]]*\]", "[..]", d)
    d = re.sub(r"(torch|libtensor) (nan|inf|-inf|True|False)", r"\1 N", d)
    if kind in ("values",):
        d = re.sub(r"element N: .*", "", d)
    return (op, kind, d)


def open_corpus(path, mode):
    """A corpus file, gzip-compressed when its name ends in .gz (written with no time stamp,
    so that the same cases give the same bytes)."""
    if not path.endswith(".gz"):
        return open(path, mode)
    if mode == "w":
        class Writer(io.StringIO):
            def close(self):
                with open(path, "wb") as f:
                    f.write(gzip.compress(self.getvalue().encode(), mtime=0))
                super().close()
        return Writer()
    return io.TextIOWrapper(gzip.open(path, "rb"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lib", default=os.environ.get("TN_LIBTENSOR"),
                   help="libtensor.so to test (default: $TN_LIBTENSOR)")
    p.add_argument("--seed", default="1", help="an integer, or 'random'")
    p.add_argument("--cases", type=int, default=0, help="stop after this many cases")
    p.add_argument("--time", type=float, default=0, help="stop after this many seconds")
    p.add_argument("--case", type=int, action="append", help="run only case N (repeatable)")
    p.add_argument("--first", type=int, default=0, help="the first case number")
    p.add_argument("--ops", default="*", help="glob(s) of operators, comma separated")
    p.add_argument("--allow", default=os.path.join(HERE, "allow.txt"),
                   help="the allow-list ('' for none)")
    p.add_argument("--replay", help="compare against a corpus instead of live torch")
    p.add_argument("--write-corpus", help="write the cases and torch's outcomes here")
    p.add_argument("--messages", action="store_true", help="different messages fail too")
    p.add_argument("--show-allowed", action="store_true",
                   help="print allowed disagreements too (one per signature)")
    p.add_argument("--trace", action="store_true",
                   help="print each case's number to stderr before running it (for crashes)")
    p.add_argument("-v", "--verbose", action="store_true")
    opt = p.parse_args(argv)
    if torch is not None and not opt.replay:
        # torch 1.13 prints its C++ warnings (an out= resized, ...) on file descriptor 2:
        # keep Python's messages and crash reports, drop those.
        sys.stderr.flush()
        sys.stderr = os.fdopen(os.dup(2), "w")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    faulthandler.enable(file=sys.stderr)

    if not opt.lib:
        print("difftest: no library: give --lib or set TN_LIBTENSOR", file=sys.stderr)
        return 2
    try:
        lib = Lib(opt.lib)
    except OSError as e:
        print("difftest: SKIP: cannot load %s: %s" % (opt.lib, e))
        return 77
    schemas = {}
    for text in lib.schemas():
        s = Schema(text)
        schemas[s.full] = s
    globs = [g.strip() for g in opt.ops.split(",")]
    names = [n for n in schemas if any(fnmatch.fnmatchcase(n, g) for g in globs)]
    # Operators torch 1.13 does not have (scaled_dot_product_attention, PyTorch 2.x's) have
    # no reference here; check_norm tests them against their math.
    if torch is not None:
        names = [n for n in names if torch_op(schemas[n]) is not None]
    # The random operators draw from a generator: their values are compared with torch's for
    # the same seed by check_random (tests/golden/gen_random_ops.py) and test_random.py, not
    # here, where each side would draw from its own unseeded stream.
    names = [n for n in names if n.split(".")[0] not in RANDOM_OPS]
    allow = Allow(opt.allow)
    seed = random.randrange(1 << 32) if opt.seed == "random" else int(opt.seed)

    cur_seed = [seed]  # a corpus names the seed of each case
    corpus_out = open_corpus(opt.write_corpus, "w") if opt.write_corpus else None
    if opt.replay:
        def cases():
            with open_corpus(opt.replay, "r") as f:
                for line in f:
                    rec = json.loads(line)
                    if rec["op"] in schemas and rec["op"] in names:
                        cur_seed[0] = rec.get("seed", seed)
                        yield rec["n"], schemas[rec["op"]], rec["case"], rec["torch"]
    else:
        if torch is None:
            print("difftest: torch is not importable by %s; use --replay" % sys.executable,
                  file=sys.stderr)
            return 2
        torch.manual_seed(0)
        if not torch.__version__.startswith("1.13"):
            print("difftest: warning: torch %s is not 1.13: expect disagreements of its own"
                  % torch.__version__, file=sys.stderr)

        def cases():
            numbers = opt.case if opt.case else iter(lambda c=[opt.first - 1]: (
                c.__setitem__(0, c[0] + 1) or c[0]), None)
            for n in numbers:
                rng = random.Random("%d:%d" % (seed, n))
                schema = schemas[rng.choice(sorted(names))]
                case = gen_case(rng, schema, torch_run_safe)
                yield n, schema, case, torch_run_safe(schema, case)

    if opt.seed == "random":  # known before anything can go wrong
        print("difftest: seed %d" % seed, flush=True)
    start = time.monotonic()
    count = failed = allowed = messages = setup = 0
    seen = {}
    setup_reasons = {}
    for n, schema, case, exp in cases():
        if opt.cases and count >= opt.cases:
            break
        if opt.time and time.monotonic() - start > opt.time:
            break
        count += 1
        if opt.trace:
            print("case %d %s" % (n, schema.full), file=sys.stderr, flush=True)
        if corpus_out and "setup_error" not in exp:
            corpus_out.write(json.dumps({"seed": seed, "n": n, "op": schema.full, "case": case,
                                         "torch": exp}, separators=(",", ":")) + "\n")
        if "setup_error" in exp:
            setup += 1
            reason = re.sub(r"[-(].*", "", exp["setup_error"]).strip()
            setup_reasons[reason] = setup_reasons.get(reason, 0) + 1
            if "signal" in exp["setup_error"]:
                lib.run(schema, case)  # torch died; libtensor must not
            continue
        got = lib.run(schema, case)
        diffs = compare(schema, case, exp, got)
        if opt.verbose:
            print("case %d: %s -> torch %s, libtensor %s" % (
                n, torch_repr(schema, case), "ok" if exp["ok"] else exp["msg"],
                "ok" if got.get("ok") else got.get("msg", got.get("setup_error"))))
        for kind, detail in diffs:
            if kind == "message" and not opt.messages:
                messages += 1
                entry = True
            else:
                entry = allow.match(schema.full, kind, detail, case)
            sig = signature(schema.full, kind, detail) + (entry is None,)
            first = sig not in seen
            seen.setdefault(sig, [0, entry is not None and entry is not True])[0] += 1
            if entry is None:
                failed += 1
            elif kind != "message":
                allowed += 1
            if first and (entry is None or opt.show_allowed or opt.verbose):
                tag = "DIFF" if entry is None else (
                    "message" if entry is True else "allowed (%s)" % entry["note"])
                print("%s %s %s: %s" % (tag, schema.full, kind, detail))
                print("  reproduce: difftest.py --seed %d --case %d" % (cur_seed[0], n))
                print("  torch: " + torch_repr(schema, case))
    if corpus_out:
        corpus_out.close()
    unused = [e for e in allow.entries if e["hits"] == 0]
    print("difftest: seed %d, %d cases over %d operators in %.1f s: %d disagreements "
          "(%d distinct), %d allowed, %d different messages, %d not comparable" % (
              seed, count, len(names), time.monotonic() - start, failed,
              sum(1 for s, v in seen.items() if s[1] != "message" and not v[1]),
              allowed, messages, setup))
    if opt.verbose or opt.show_allowed:
        for reason, k in sorted(setup_reasons.items()):
            print("difftest: not comparable: %d cases: %s" % (k, reason))
    if opt.verbose and unused:
        for e in unused:
            print("difftest: allow-list line %d matched nothing: %s %s" % (
                e["line"], e["op"], e["kind"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
