#!/usr/bin/python3
"""Golden files for the safetensors and .npy format layer (tests/check_formats.c).

Writes, under OUTDIR:

    formats/*.npy          arrays saved by numpy.save (numpy.lib.format.write_array for the
                           2.0 and 3.0 files), one per dtype, shape and layout case, and four
                           numpy dtypes libtensor lacks
    formats/*.safetensors  safetensors files holding tensors made with PyTorch
    formats_golden.h       what each file holds: names, dtypes, shapes, data offsets and sizes,
                           the element values in file order, the metadata

The `safetensors` Python package is not a Debian package, so the safetensors files are written
here by hand, following the format's specification and its reference writer
(huggingface/safetensors, safetensors/src/tensor.rs, prepare()): tensors sorted by dtype
alignment (largest first) then by name, compact JSON in serde's field order (dtype, shape,
data_offsets), "__metadata__" first, spaces up to a multiple of 8 bytes. Two files are marked
reference_layout: the C writer must reproduce their headers byte for byte. The others are laid
out the way other writers may do it (escaped names, indented JSON in any key order, unknown
fields, an unpadded header), which the parser must accept.

Rerun from the repository root with Debian's interpreter (python3-numpy, python3-torch):

    /usr/bin/python3 tests/golden/gen_formats.py tests/golden

The output is deterministic: the same torch/numpy versions produce the same bytes.
"""

import io
import json
import math
import os
import struct
import sys

import numpy as np
import torch

# The C literal helpers of the other goldens (this folder is on sys.path when run as a script).
from gen_golden import c_double, wrap_items

TORCH_VERSION = torch.__version__
NUMPY_VERSION = np.__version__

# The reference's Dtype enum, in its order (by alignment).
ST_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
            "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
TORCH_ST = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
    torch.int32: "I32", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.float32: "F32", torch.float64: "F64",
}
# libtensor's names for the dtypes (tn_dtype_name).
TORCH_TN = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
}
NUMPY_TN = {
    "b1": "bool", "u1": "uint8", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
    "f2": "float16", "f4": "float32", "f8": "float64",
}


# ---- C output -------------------------------------------------------------------------------

def c_bytes_string(b):
    """C string literal for arbitrary bytes; octal escapes cannot swallow what follows."""
    out = []
    for c in b:
        if c in (0x22, 0x5c):
            out.append("\\" + chr(c))
        elif 0x20 <= c < 0x7f and c != 0x3f:  # '?' escaped: no trigraphs
            out.append(chr(c))
        else:
            out.append("\\%03o" % c)
    return '"%s"' % "".join(out)


def c_str(s):
    return c_bytes_string(s.encode("utf-8"))


class Header:
    def __init__(self):
        self.values = []  # value arrays, emitted before the tables
        self.nvalues = 0
        self.lines = []

    def value_array(self, values):
        name = "golden_formats_v%d" % self.nvalues
        self.nvalues += 1
        body = wrap_items([c_double(v) for v in values]) or ["    0"]
        self.values += ["static const double %s[] = {" % name] + body + ["};"]
        return name, len(values)

    def tensor(self, name, dtype, shape, offset, nbytes, values, indent, lead=""):
        vname, nv = self.value_array(values)
        sizes = ", ".join("INT64_C(%d)" % s for s in shape) or "0"
        pad = " " * indent
        return [
            pad + lead + "{ .name = %s," % (c_str(name) if name is not None else "NULL"),
            pad + "  .dtype = \"%s\", .ndim = %d, .sizes = { %s }," % (dtype, len(shape), sizes),
            pad + "  .offset = %d, .nbytes = %d, .nvalues = %d, .values = %s }," % (
                offset, nbytes, nv, vname),
        ]


# ---- safetensors ----------------------------------------------------------------------------

def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    return t.numpy().tobytes()


def tensor_values(t):
    if t.dtype == torch.bool:
        return [1.0 if v else 0.0 for v in t.flatten().tolist()]
    return [float(v) for v in t.flatten().to(torch.float64).tolist()]


def reference_json(tensors, metadata):
    """The reference writer's header: sorted tensors, compact JSON, padded with spaces."""
    items = sorted(tensors.items(), key=lambda kv: (-ST_ORDER.index(TORCH_ST[kv[1].dtype]), kv[0]))
    header, offset, datas = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in items:
        b = tensor_bytes(t)
        header[name] = {"dtype": TORCH_ST[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        datas.append(b)
    js = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    js += b" " * ((8 - len(js) % 8) % 8)
    return js, b"".join(datas)


def safetensors_file(js, data):
    return struct.pack("<Q", len(js)) + js + data


def st_cases():
    """(file name, bytes, reference_layout, metadata pairs in header order, tensors in file
    order as (name, torch tensor, data offset))."""
    cases = []

    # Every dtype, a scalar, an empty tensor, metadata with escapes: the reference layout.
    mixed = {
        "bool": torch.tensor([True, False, True]),
        "u8": torch.arange(0, 250, 50, dtype=torch.uint8),
        "i8": torch.tensor([[-128, 0], [5, 127]], dtype=torch.int8),
        "i16": torch.arange(-3, 3, dtype=torch.int16).reshape(2, 3),
        "i32": torch.tensor([[1, -2, 2147483647]], dtype=torch.int32),
        "i64": torch.tensor(123456789012, dtype=torch.int64),
        "f16": torch.tensor([0.5, -2.0, 65504.0, 1e-7], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -3.140625, 1e30], dtype=torch.bfloat16),
        "f32": torch.linspace(-1, 1, 12, dtype=torch.float32).reshape(2, 3, 2),
        "f64": torch.tensor([math.pi, -0.0, 1e300], dtype=torch.float64),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
        "model.layers.0.weight": torch.tensor([[0.25, -0.75], [4.0, 8.5]]),
    }
    meta = {"format": "pt", "note": "\u00fcn\u00efcode \"quoted\" back\\slash\n\ttab"}
    js, data = reference_json(mixed, meta)
    cases.append(("mixed.safetensors", js, data, True, meta, mixed))

    # No tensors at all: "{}" and six spaces.
    js, data = reference_json({}, None)
    cases.append(("empty.safetensors", js, data, True, None, {}))

    # Names that need escapes, written ASCII-only (\u escapes, a surrogate pair), and one of
    # the longest length libtensor takes.
    names = ["\u00e9t\u00e9", "\u65e5\u672c", "\U0001f600", "quote\"back\\slash/",
             "tab\there", "ctl\x01", "a/b/c", "x" * 255]
    ntensors = {n: torch.tensor([i + 1, 100 + i], dtype=torch.uint8) for i, n in enumerate(names)}
    items = sorted(ntensors.items())
    header, offset, datas = {}, 0, []
    for n, t in items:
        b = tensor_bytes(t)
        header[n] = {"dtype": "U8", "shape": [2], "data_offsets": [offset, offset + 2]}
        offset += 2
        datas.append(b)
    js = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    js += b" " * ((8 - len(js) % 8) % 8)
    cases.append(("names.safetensors", js, b"".join(datas), False, None, ntensors))

    # Another writer's layout: indented, keys in any order, metadata between tensors, an
    # unknown field holding every kind of JSON value, a header not padded to 8 bytes.
    z = torch.tensor([1.5, -2.5], dtype=torch.float32)
    a = torch.tensor([-9007199254740993], dtype=torch.int64)
    js = ('{\n  "z_first": {"data_offsets": [0, 8], "shape": [2], "dtype": "F32",\n'
          '    "extra": {"k": [1, -2.5e-3, 0.0, null, true, false, "s\\u00e9", [], {}]}},\n'
          '  "__metadata__": {"b": "2", "a": "1"},\n'
          '  "a_last": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]}\n}\n').encode()
    assert len(js) % 8 != 0
    data = tensor_bytes(z) + tensor_bytes(a)
    cases.append(("unordered.safetensors", js, data, False, {"b": "2", "a": "1"},
                  {"z_first": z, "a_last": a}))
    return cases


def gen_safetensors(outdir, h):
    table = []
    for fname, js, data, reference, meta, tensors in st_cases():
        blob = safetensors_file(js, data)
        with open(os.path.join(outdir, "formats", fname), "wb") as f:
            f.write(blob)
        parsed = json.loads(js)
        # File order: by data offset, then name, as the parser returns them.
        order = sorted((k for k in parsed if k != "__metadata__"),
                       key=lambda k: (parsed[k]["data_offsets"], k))
        rows = []
        for name in order:
            t = tensors[name]
            info = parsed[name]
            begin, end = info["data_offsets"]
            assert blob[8 + len(js) + begin:8 + len(js) + end] == tensor_bytes(t)
            rows += h.tensor(name, TORCH_TN[t.dtype], list(t.shape), 8 + len(js) + begin,
                             end - begin, tensor_values(t), 4)
        meta_rows = []
        for k, v in (meta or {}).items():
            meta_rows.append("    { %s, %s }," % (c_str(k), c_str(v)))
        tname = "golden_st_tensors_%d" % len(table)
        mname = "golden_st_meta_%d" % len(table)
        h.lines += ["static const struct golden_tensor %s[] = {" % tname] + \
            (rows or ["    { .name = NULL }"]) + ["};"]
        h.lines += ["static const char *const %s[][2] = {" % mname] + \
            (meta_rows or ["    { NULL, NULL }"]) + ["};"]
        table.append("    { %s, %d, %d, %s, %d, %s, %d, %s }," % (
            c_str(fname), len(blob), len(js), "true" if reference else "false",
            len(meta or {}), mname, len(order), tname))
    h.lines += ["", "static const struct golden_st_file golden_st_files[] = {"] + table + ["};"]
    return len(table)


# ---- npy ------------------------------------------------------------------------------------

def npy_cases():
    """(file name, array, version or None for numpy.save)."""
    f32 = np.float32
    return [
        ("bool.npy", np.array([[True, False, True], [False, False, True]]), None),
        ("u8.npy", np.array([0, 1, 128, 255], dtype=np.uint8), None),
        ("i8.npy", np.array([-128, -1, 0, 127], dtype=np.int8), None),
        ("i16.npy", np.arange(-6, 6, dtype=np.int16).reshape(3, 4), None),
        ("i32.npy", np.array([[-2147483648, 7], [2147483647, 0]], dtype=np.int32), None),
        ("i64.npy", np.array([-(2 ** 53), 3, 2 ** 53], dtype=np.int64), None),
        ("f16.npy", np.array([0.5, -65504.0, 6e-8, 1.0], dtype=np.float16), None),
        ("f32.npy", np.linspace(-1, 1, 6, dtype=f32).reshape(2, 3), None),
        ("f64.npy", np.array([math.pi, -0.0, 1e-300]), None),
        ("scalar.npy", np.array(2.5, dtype=f32), None),
        ("empty.npy", np.zeros((0, 4), dtype=np.int64), None),
        ("fortran.npy", np.asfortranarray(np.arange(12, dtype=f32).reshape(3, 4)), None),
        ("f64_4d.npy", np.arange(12, dtype=np.float64).reshape(2, 1, 3, 2) / 4, None),
        ("wide.npy", np.zeros((123456789, 0), dtype=np.int16), None),
        ("i32_be.npy", np.arange(-3, 3, dtype=">i4").reshape(2, 3), None),
        ("f64_be.npy", np.array([1.5, -2.25], dtype=">f8"), None),
        ("v2.npy", np.arange(5, dtype=f32), (2, 0)),
        ("v3.npy", np.arange(4, dtype=np.int16), (3, 0)),
    ]


NPY_REFUSED = [
    ("u16.npy", np.arange(3, dtype=np.uint16), "'<u2'"),
    ("c64.npy", np.array([1 + 2j], dtype=np.complex64), "'<c8'"),
    ("record.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]), "structured"),
    ("void.npy", np.zeros(3, dtype="V2"), "'|V2'"),
]


def npy_bytes(a, version):
    f = io.BytesIO()
    if version is None:
        np.save(f, a)
    else:
        np.lib.format.write_array(f, a, version=version)
    return f.getvalue()


def gen_npy(outdir, h):
    table = []
    for fname, a, version in npy_cases():
        blob = npy_bytes(a, version)
        with open(os.path.join(outdir, "formats", fname), "wb") as f:
            f.write(blob)
        fp = io.BytesIO(blob)
        major, minor = np.lib.format.read_magic(fp)
        shape, fortran, dtype = np.lib.format._read_array_header(fp, (major, minor))
        header_end = fp.tell()
        assert header_end % 64 == 0
        descr = dtype.str
        order = "F" if fortran else "C"
        values = [float(v) for v in np.ravel(a, order=order).astype(np.float64)]
        big = descr[0] == ">"
        # numpy's header is the one tn__npy_write must make for little-endian 1.0 files.
        same = version is None and not big
        head = "    { %s, %d, %d, %s, %s, %s," % (
            c_str(fname), len(blob), major, "true" if fortran else "false",
            "true" if big else "false", "true" if same else "false")
        rows = h.tensor(None, NUMPY_TN[descr[1:]], list(shape), header_end,
                        a.size * a.itemsize, values, 6, ".t = ")
        table += [head] + rows + ["    },"]
    h.lines += ["", "static const struct golden_npy_file golden_npy_files[] = {"]
    h.lines += table + ["};"]

    refused = []
    for fname, a, part in NPY_REFUSED:
        blob = npy_bytes(a, None)
        with open(os.path.join(outdir, "formats", fname), "wb") as f:
            f.write(blob)
        refused.append("    { %s, %s }," % (c_str(fname), c_str(part)))
    h.lines += ["", "static const struct golden_npy_refused golden_npy_refused[] = {"]
    h.lines += refused + ["};"]
    return len(npy_cases()), len(refused)


PREAMBLE = """\
/* safetensors and .npy golden files (tests/golden/formats/) and what they hold.
 *
 * GENERATED by tests/golden/gen_formats.py -- DO NOT EDIT.
 * Regenerate with:
 *     /usr/bin/python3 tests/golden/gen_formats.py tests/golden
 * Reference: torch %s, numpy %s.
 */
#ifndef LIBTENSOR_TESTS_FORMATS_GOLDEN_H
#define LIBTENSOR_TESTS_FORMATS_GOLDEN_H

/* The struct types are check_formats.c's, which includes this file. */
"""


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: %s OUTDIR\n" % argv[0])
        return 2
    outdir = argv[1]
    os.makedirs(os.path.join(outdir, "formats"), exist_ok=True)
    h = Header()
    nst = gen_safetensors(outdir, h)
    nnpy, nref = gen_npy(outdir, h)
    text = PREAMBLE % (TORCH_VERSION, NUMPY_VERSION)
    body = [""] + h.values + [""] + h.lines + ["", "#endif /* LIBTENSOR_TESTS_FORMATS_GOLDEN_H */", ""]
    with open(os.path.join(outdir, "formats_golden.h"), "w", encoding="ascii", newline="\n") as f:
        f.write(text + "\n".join(body))
    print("formats_golden.h: %d safetensors files, %d npy files, %d refused npy files"
          % (nst, nnpy, nref))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
