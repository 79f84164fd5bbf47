#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate libtensor's operator API from the op table (libtensor/ops/functions.yaml).

Run by make; nothing it writes is committed. From each table entry it writes:

  include/tensor/ops.h   the public declarations of the C entry points
  ops_kernels.h          the prototypes every kernel must match (internal)
  ops_gen.c              the C entry points (look the operator up once, compute the dispatch
                         key from the arguments, call the kernel unboxed, or box the arguments
                         for a boxed kernel), the boxed adapters (pop the arguments from a
                         stack, call an unboxed kernel, push the results) and the
                         registration table
  ops_calls_gen.h        for the tests: per operator, pop arguments from a stack and call the
                         public C entry point (the unboxed path seen from outside)
  ops_names.txt          the generated C names, for the man-page coverage audit
  libtensor-ops.7        the operator list with schemas and C prototypes
  libtensor.map          the version script: libtensor.map.in with the C names added

The schema grammar read here is the subset the table uses; the library's own parser
(libtensor/schema.c) parses every schema again at registration and must agree with it.
Only the standard library is used, so any python3 >= 3.6 runs it.
"""
import argparse
import os
import re
import sys

KEYS = ["CPU", "CUDA", "Meta"]
KEY_ENUM = {"CPU": "TN_KEY_CPU", "CUDA": "TN_KEY_CUDA", "Meta": "TN_KEY_META"}
BASE_TYPES = {"Tensor", "int", "SymInt", "float", "bool", "str", "Scalar", "ScalarType",
              "Device", "Layout", "MemoryFormat", "Generator"}


class TableError(Exception):
    pass


# ---- the table (a YAML subset: a list of mappings with scalar values and one nested map) ----

def read_table(path):
    entries = []
    cur = None
    in_dispatch = False
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("- "):
                cur = {"line": lineno, "dispatch": [], "dispatch_lines": []}
                entries.append(cur)
                line = "  " + line[2:]
                in_dispatch = False
            if cur is None:
                raise TableError("%s:%d: expected '- func: ...'" % (path, lineno))
            indent = len(line) - len(line.lstrip())
            key, sep, value = line.strip().partition(":")
            if not sep:
                raise TableError("%s:%d: expected 'key: value'" % (path, lineno))
            value = value.strip()
            if in_dispatch and indent >= 4:
                keys = [k.strip() for k in key.split(",")]
                for k in keys:
                    if k not in KEYS:
                        raise TableError("%s:%d: unknown dispatch key '%s' (known: %s)"
                                         % (path, lineno, k, ", ".join(KEYS)))
                if not re.fullmatch(r"tn__[a-z0-9_]+", value):
                    raise TableError("%s:%d: kernel names are tn__ identifiers, not '%s'"
                                     % (path, lineno, value))
                for k in keys:
                    cur["dispatch"].append((k, value, lineno))
                continue
            in_dispatch = False
            if indent != 2:
                raise TableError("%s:%d: bad indentation" % (path, lineno))
            if key == "dispatch":
                if value:
                    raise TableError("%s:%d: dispatch takes indented KEY: kernel lines"
                                     % (path, lineno))
                in_dispatch = True
            elif key in ("func", "c", "doc", "since"):
                if key in cur:
                    raise TableError("%s:%d: '%s' given twice" % (path, lineno, key))
                cur[key] = value
                if key == "func":
                    cur["func_line"] = lineno
            else:
                raise TableError("%s:%d: unknown key '%s'" % (path, lineno, key))
    for e in entries:
        if "func" not in e:
            raise TableError("%s:%d: entry without func" % (path, e["line"]))
        if "doc" not in e:
            raise TableError("%s:%d: entry without doc" % (path, e["line"]))
        if not e["dispatch"]:
            raise TableError("%s:%d: entry without kernels" % (path, e["line"]))
    return entries


# ---- schemas ----

class Type:
    def __init__(self, kind, is_list=False, size=0, elem_opt=False, opt=False):
        self.kind, self.is_list, self.size, self.elem_opt, self.opt = kind, is_list, size, elem_opt, opt

    def __str__(self):
        s = self.kind
        if self.is_list:
            s += "?" if self.elem_opt else ""
            s += "[%s]" % (self.size or "")
        return s + ("?" if self.opt else "")


class Arg:
    def __init__(self, name, typ, alias=None, write=False, after=None, kwarg=False, default=None):
        self.name, self.type, self.alias, self.write, self.after = name, typ, alias, write, after
        self.kwarg, self.default = kwarg, default


class Schema:
    pass


TOKEN = re.compile(r"\s*(->|::|[A-Za-z_][A-Za-z0-9_]*|-?[0-9][0-9.eE+-]*|\"[^\"]*\"|'[^']*'|[()\[\],.*?!=|])")


def tokenize(text, where):
    pos, out = 0, []
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = TOKEN.match(text, pos)
        if not m:
            raise TableError("%s: cannot read schema at column %d: %r" % (where, pos + 1, text))
        out.append(m.group(1))
        pos = m.end()
    return out


def parse_schema(text, where):
    toks = tokenize(text, where)
    i = 0

    def peek():
        return toks[i] if i < len(toks) else ""

    def take(expected=None):
        nonlocal i
        t = peek()
        if expected is not None and t != expected:
            raise TableError("%s: expected %r, found %r in %r" % (where, expected, t, text))
        i += 1
        return t

    def parse_type():
        base = take()
        if base not in BASE_TYPES:
            raise TableError("%s: unknown type %r" % (where, base))
        kind = "int" if base == "SymInt" else base
        alias = write = after = None
        if peek() == "(":
            take("(")
            alias = take()
            while peek() == "|":
                alias += take() + take()
            if peek() == "!":
                take()
                write = True
            if peek() == "->":
                take()
                after = take()
            take(")")
        t = Type(kind)
        if peek() == "?" and i + 1 < len(toks) and toks[i + 1] == "[":
            take("?")
            t.elem_opt = True
        if peek() == "[":
            take("[")
            t.is_list = True
            if peek() != "]":
                t.size = int(take())
            take("]")
        if peek() == "?":
            take("?")
            t.opt = True
        return t, alias, bool(write), after

    def parse_default():
        t = take()
        if t == "[":
            vals = []
            while peek() != "]":
                vals.append(take())
                if peek() == ",":
                    take(",")
            take("]")
            return vals
        return t

    s = Schema()
    s.text = text
    name = take()
    s.ns = "aten"
    if peek() == "::":
        take("::")
        s.ns, name = name, take()
    s.name = name
    s.overload = ""
    if peek() == ".":
        take(".")
        s.overload = take()
    take("(")
    s.args = []
    kwarg = False
    while peek() != ")":
        if peek() == "*":
            take("*")
            kwarg = True
        else:
            t, alias, write, after = parse_type()
            a = Arg(take(), t, alias, write, after, kwarg)
            if peek() == "=":
                take("=")
                a.default = parse_default()
            s.args.append(a)
        if peek() == ",":
            take(",")
    take(")")
    take("->")
    s.returns = []
    if peek() == "(":
        take("(")
        while peek() != ")":
            t, alias, write, after = parse_type()
            n = take() if peek() not in (",", ")") else None
            s.returns.append(Arg(n, t, alias, write, after))
            if peek() == ",":
                take(",")
        take(")")
    else:
        t, alias, write, after = parse_type()
        n = take() if i < len(toks) else None
        s.returns.append(Arg(n, t, alias, write, after))
    if i != len(toks):
        raise TableError("%s: trailing text in schema %r" % (where, text))
    return s


# ---- C types ----

SCALAR_C = {"int": "int64_t", "float": "double", "bool": "bool", "Scalar": "tn_scalar",
            "ScalarType": "enum tn_dtype", "Device": "tn_device", "Layout": "enum tn_layout",
            "MemoryFormat": "enum tn_memory_format"}
LIST_C = {"int": "int64_t", "float": "double", "bool": "bool"}
READER = {"int": "tn_ivalue_to_int", "float": "tn_ivalue_to_double", "bool": "tn_ivalue_to_bool",
          "Scalar": "tn_ivalue_to_scalar", "ScalarType": "tn_ivalue_to_dtype",
          "Device": "tn_ivalue_to_device", "Layout": "tn_ivalue_to_layout",
          "MemoryFormat": "tn_ivalue_to_memory_format"}
LIST_READER = {"int": "tn_ivalue_to_int_list", "float": "tn_ivalue_to_double_list",
               "bool": "tn_ivalue_to_bool_list"}
BOXER = {"int": "tn_ivalue_int", "float": "tn_ivalue_double", "bool": "tn_ivalue_bool",
         "Scalar": "tn_ivalue_scalar", "ScalarType": "tn_ivalue_dtype",
         "Device": "tn_ivalue_device", "Layout": "tn_ivalue_layout",
         "MemoryFormat": "tn_ivalue_memory_format"}
LIST_BOXER = {"int": "tn_ivalue_int_list", "float": "tn_ivalue_double_list",
              "bool": "tn_ivalue_bool_list"}


def c_params(arg):
    """The C parameters of one schema argument: a list of (ctype, name)."""
    t, n = arg.type, arg.name
    if t.is_list:
        if t.kind == "Tensor":
            return [("int", "n" + n), ("tn_tensor *const *", n)]
        if t.kind not in LIST_C:
            raise TableError("no C mapping for %s" % t)
        return [("int", "n" + n), ("const %s *" % LIST_C[t.kind], n)]
    if t.kind == "Tensor":
        return [("tn_tensor *" if arg.write else "const tn_tensor *", n)]
    if t.kind == "str":
        return [("const char *", n)]
    if t.kind == "Generator":
        return [("tn_generator *", n)]
    if t.opt:
        return [("const %s *" % SCALAR_C[t.kind], n)]
    return [(SCALAR_C[t.kind], n)]


def ret_name(s, idx):
    r = s.returns[idx]
    returned = [x for x in s.returns if not x.write]
    if len(returned) == 1:
        if r.type.kind == "Tensor":
            return "ret_tensors" if r.type.is_list else "ret_tensor"
        return "ret_value"
    return "ret_" + (r.name or str(idx))


def c_returns(s):
    out = []
    for idx, r in enumerate(s.returns):
        if r.write:
            continue  # the result is the argument it aliases
        n = ret_name(s, idx)
        if r.type.is_list:
            if r.type.kind != "Tensor":
                raise TableError("only Tensor[] list returns are supported")
            out += [("int *", "ret_n"), ("tn_tensor ***", n)]
        elif r.type.kind == "Tensor":
            out.append(("tn_tensor **", n))
        else:
            out.append(("%s *" % SCALAR_C[r.type.kind], n))
    return out


def fmt_params(params):
    parts = []
    for ctype, name in params:
        sep = "" if ctype.endswith("*") else " "
        parts.append(ctype + sep + name)
    return ", ".join(parts) if parts else "void"


def wrap_decl(head, params, width=100):
    """A declaration with its parameters wrapped under the opening parenthesis."""
    parts = fmt_params(params).split(", ")
    lines, cur = [], head
    for k, p in enumerate(parts):
        piece = p + (", " if k + 1 < len(parts) else ");")
        if len(cur) + len(piece.rstrip()) > width and cur.strip() and not cur.endswith("("):
            lines.append(cur.rstrip())
            cur = "\t\t" + piece
        else:
            cur += piece
    lines.append(cur)
    return "\n".join(lines)


def cident(s):
    return s.name + ("_" + s.overload if s.overload else "")


# ---- emitters ----

HEADER = "/* Generated by libtensor/ops/gen_ops.py from libtensor/ops/functions.yaml. Do not edit. */\n"


def aliased_arg(s, r):
    for j, a in enumerate(s.args):
        if a.type.kind == "Tensor" and not a.type.is_list and a.alias == r.alias and a.write:
            return j
    raise TableError("%s: return (%s!) aliases no argument" % (s.text, r.alias))


def emit_unpack(s, callee, out, check_writable=True):
    """Body lines that read the top arguments of `st`, call `callee` and push the results."""
    n = len(s.args)
    start = len(out)
    w = out.append
    w("\ttn_ivalue *a = st->items + st->size - %d;" % n if n else "\ttn_ivalue *a = NULL;")
    w("\tint rc;")
    call = []
    for j, arg in enumerate(s.args):
        t, v = arg.type, "a%d" % j
        if t.is_list and t.kind == "Tensor":
            w("\tint n%s = (int)tn__ivalue_list_len(&a[%d]);" % (v, j))
            w("\ttn_tensor *const *%s = tn__ivalue_list_tensors(&a[%d]);" % (v, j))
            call += ["n" + v, v]
        elif t.is_list:
            w("\tsize_t n%s = 0;" % v)
            w("\tconst %s *%s = NULL;" % (LIST_C[t.kind], v))
            if t.size:
                w("\t%s %s_buf[%d];" % (LIST_C[t.kind], v, t.size))
            cond = "a[%d].tag != TN_IVALUE_NONE" % j
            w("\tif (%s) {" % cond)
            if t.size and t.kind == "int":
                w("\t\tif (a[%d].tag == TN_IVALUE_INT || a[%d].tag == TN_IVALUE_SCALAR) {" % (j, j))
                w("\t\t\tint64_t x;")
                w("\t\t\tif ((rc = tn_ivalue_to_int(&a[%d], &x)) < 0)" % j)
                w("\t\t\t\tgoto drop;")
                w("\t\t\tfor (int k = 0; k < %d; k++)" % t.size)
                w("\t\t\t\t%s_buf[k] = x;" % v)
                w("\t\t\t%s = %s_buf;" % (v, v))
                w("\t\t\tn%s = %d;" % (v, t.size))
                w("\t\t} else if ((rc = %s(&a[%d], &n%s, &%s)) < 0) {" % (LIST_READER[t.kind], j, v, v))
                w("\t\t\tgoto drop;")
                w("\t\t}")
            else:
                w("\t\tif ((rc = %s(&a[%d], &n%s, &%s)) < 0)" % (LIST_READER[t.kind], j, v, v))
                w("\t\t\tgoto drop;")
            w("\t}")
            w("\tif (n%s > INT_MAX) {" % v)
            w("\t\trc = tn__error(TN_EINVAL, \"%s: argument '%s' has %%zu entries\", n%s);"
              % (s.qualname, arg.name, v))
            w("\t\tgoto drop;")
            w("\t}")
            call += ["(int)n" + v, v]
        elif t.kind == "Tensor":
            if t.opt:
                w("\ttn_tensor *%s = a[%d].tag == TN_IVALUE_NONE ? NULL : a[%d].u.tensor;" % (v, j, j))
            else:
                w("\ttn_tensor *%s = a[%d].u.tensor;" % (v, j))
            if arg.write and check_writable:
                w("\tif (%s(rc = tn__check_writable(%s, \"%s\", \"%s\")) < 0)"
                  % (v + " && " if t.opt else "", v, s.name, arg.name))
                w("\t\tgoto drop;")
            call.append(v)
        elif t.kind == "Generator":
            w("\ttn_generator *%s = a[%d].tag == TN_IVALUE_NONE ? NULL : a[%d].u.generator;"
              % (v, j, j))
            call.append(v)
        elif t.kind == "str":
            w("\tconst char *%s = NULL;" % v)
            w("\tif (a[%d].tag != TN_IVALUE_NONE && (rc = tn_ivalue_to_string(&a[%d], &%s)) < 0)"
              % (j, j, v))
            w("\t\tgoto drop;")
            call.append(v)
        else:
            w("\t%s %s_val;" % (SCALAR_C[t.kind], v))
            if t.opt:
                w("\tconst %s *%s = NULL;" % (SCALAR_C[t.kind], v))
                w("\tif (a[%d].tag != TN_IVALUE_NONE) {" % j)
                w("\t\tif ((rc = %s(&a[%d], &%s_val)) < 0)" % (READER[t.kind], j, v))
                w("\t\t\tgoto drop;")
                w("\t\t%s = &%s_val;" % (v, v))
                w("\t}")
                call.append(v)
            else:
                w("\tif ((rc = %s(&a[%d], &%s_val)) < 0)" % (READER[t.kind], j, v))
                w("\t\tgoto drop;")
                call.append(v + "_val")
    # results
    for idx, r in enumerate(s.returns):
        rv = "r%d" % idx
        if r.write:
            w("\ttn_tensor *%s = tn_tensor_ref(a[%d].u.tensor);" % (rv, aliased_arg(s, r)))
            continue
        if r.type.is_list:
            w("\tint %s_n = 0;" % rv)
            w("\ttn_tensor **%s = NULL;" % rv)
            call += ["&%s_n" % rv, "&" + rv]
        elif r.type.kind == "Tensor":
            w("\ttn_tensor *%s = NULL;" % rv)
            call.append("&" + rv)
        else:
            w("\t%s %s;" % (SCALAR_C[r.type.kind], rv))
            call.append("&" + rv)
    w("\trc = %s(%s);" % (callee, ", ".join(call)))
    w("\ttn__stack_drop(st, %d);" % n)
    w("\tif (rc < 0) {")
    for idx, r in enumerate(s.returns):
        if r.write:
            w("\t\ttn_tensor_unref(r%d);" % idx)
    w("\t\treturn rc;")
    w("\t}")
    for idx, r in enumerate(s.returns):
        rv = "r%d" % idx
        if r.type.is_list:
            w("\tif (%s_n < 0 || (%s_n > 0 && !%s)) {" % (rv, rv, rv))
            w("\t\treturn tn__error(TN_EINVAL, \"%s: the kernel returned a bad tensor list "
              "(%%d entries at %%p)\", %s_n, (void *)%s);" % (s.qualname, rv, rv))
            w("\t}")
            w("\tfor (int k = 0; k < %s_n; k++) {" % rv)
            w("\t\tif (!%s[k]) {" % rv)
            w("\t\t\tfor (int m = 0; m < %s_n; m++)" % rv)
            w("\t\t\t\ttn_tensor_unref(%s[m]);" % rv)
            w("\t\t\tfree(%s);" % rv)
            w("\t\t\treturn tn__error(TN_EINVAL, \"%s: the kernel returned a NULL tensor "
              "in its list\");" % s.qualname)
            w("\t\t}")
            w("\t}")
            w("\t{")
            w("\t\ttn_ivalue lv;")
            w("\t\tint lrc = tn_ivalue_tensor_list((size_t)%s_n, %s, &lv);" % (rv, rv))
            w("\t\tfor (int k = 0; k < %s_n; k++)" % rv)
            w("\t\t\ttn_tensor_unref(%s[k]);" % rv)
            w("\t\tfree(%s);" % rv)
            w("\t\tif (lrc < 0)")
            w("\t\t\trc = lrc;")
            w("\t\telse")
            w("\t\t\ttn__stack_push_reserved(st, lv);")
            w("\t}")
        elif r.type.kind == "Tensor":
            w("\ttn__stack_push_reserved(st, tn__ivalue_owned_tensor(%s));" % rv)
        else:
            w("\ttn__stack_push_reserved(st, %s(%s));" % (BOXER[r.type.kind], rv))
    w("\treturn rc;")
    if any("goto drop" in l for l in out[start:]):
        w("drop:")
        w("\ttn__stack_drop(st, %d);" % n)
        w("\treturn rc;")


def emit_box_call(s, out):
    """A static function that boxes the C arguments, runs a boxed kernel and unboxes results."""
    w = out.append
    # The dispatch key is dkey_: an operator may have an argument named key (attention's).
    params = [("const struct tn_op *", "op"), ("enum tn_dispatch_key", "dkey_"),
              ("const struct tn__kernel *", "k")] + s.cparams + s.cret
    w("static int box_%s(%s)" % (s.ident, fmt_params(params)))
    w("{")
    w("\ttn_stack st = TN_STACK_INIT;")
    w("\ttn_ivalue v;")
    w("\tint rc;")
    w("")
    for ctype, name in s.cret:
        w("\tif (!%s)" % name)
        w("\t\treturn tn__error(TN_EINVAL, \"%s: NULL %s\");" % (s.name, name))
    w("\tif ((rc = tn_stack_reserve(&st, %d)) < 0)" % max(len(s.args), len(s.returns)))
    w("\t\tgoto out;")
    for arg in s.args:
        t, n = arg.type, arg.name
        if t.is_list:
            boxer = "tn_ivalue_tensor_list" if t.kind == "Tensor" else LIST_BOXER[t.kind]
            w("\tif (n%s < 0) {" % n)
            w("\t\trc = tn__error(TN_EINVAL, \"%s: n%s is negative (%%d)\", n%s);" % (s.name, n, n))
            w("\t\tgoto out;")
            w("\t}")
            if t.opt:
                w("\tif (!%s)" % n)
                w("\t\tv = tn_ivalue_none();")
                w("\telse if ((rc = %s((size_t)n%s, %s, &v)) < 0)" % (boxer, n, n))
            else:
                w("\tif ((rc = %s((size_t)n%s, %s, &v)) < 0)" % (boxer, n, n))
            w("\t\tgoto out;")
        elif t.kind == "Tensor":
            if t.opt:
                w("\tif (!%s)" % n)
                w("\t\tv = tn_ivalue_none();")
                w("\telse if ((rc = tn_ivalue_tensor((tn_tensor *)%s, &v)) < 0)" % n)
            else:
                w("\tif ((rc = tn_ivalue_tensor((tn_tensor *)%s, &v)) < 0)" % n)
            w("\t\tgoto out;")
        elif t.kind == "Generator":
            w("\tif (!%s)" % n)
            w("\t\tv = tn_ivalue_none();")
            w("\telse if ((rc = tn_ivalue_generator(%s, &v)) < 0)" % n)
            w("\t\tgoto out;")
        elif t.kind == "str":
            if t.opt:
                w("\tif (!%s)" % n)
                w("\t\tv = tn_ivalue_none();")
                w("\telse if ((rc = tn_ivalue_string(%s, &v)) < 0)" % n)
            else:
                w("\tif ((rc = tn_ivalue_string(%s, &v)) < 0)" % n)
            w("\t\tgoto out;")
        elif t.opt:
            w("\tv = %s ? %s(*%s) : tn_ivalue_none();" % (n, BOXER[t.kind], n))
        else:
            w("\tv = %s(%s);" % (BOXER[t.kind], n))
        w("\ttn__stack_push_reserved(&st, v);")
    w("\tif ((rc = tn__call_kernel_boxed(op, tn_op_schema(op), dkey_, k, &st)) < 0)")
    w("\t\tgoto out;")
    for idx, r in enumerate(s.returns):
        if r.write:
            continue
        n = ret_name(s, idx)
        if r.type.is_list:
            w("\tif ((rc = tn__ivalue_take_tensor_array(&st.items[%d], ret_n, %s)) < 0)" % (idx, n))
            w("\t\tgoto out;")
        elif r.type.kind == "Tensor":
            w("\t*%s = st.items[%d].u.tensor;" % (n, idx))
            w("\tst.items[%d] = tn_ivalue_none();" % idx)
        else:
            w("\tif ((rc = %s(&st.items[%d], %s)) < 0)" % (READER[r.type.kind], idx, n))
            w("\t\tgoto out;")
    w("out:")
    w("\ttn_stack_destroy(&st);")
    w("\treturn rc;")
    w("}")
    w("")


def emit_entry(s, out):
    w = out.append
    w("TN_EXPORT int %s(%s)" % (s.cname, fmt_params(s.cparams + s.cret)))
    w("{")
    w("\tstruct tn_op *op;")
    w("\tconst struct tn__kernel *k;")
    w("\tunsigned keys = 0;")
    w("\tint rc;")
    w("")
    w("\tif ((rc = tn__builtin_op(%d, &op)) < 0)" % s.index)
    w("\t\treturn rc;")
    has_tensor = False
    for arg in s.args:
        if arg.type.kind != "Tensor":
            continue
        has_tensor = True
        n = arg.name
        if arg.type.is_list:
            w("\tif ((rc = tn__keys_of_tensor_list(&keys, n%s, %s, \"%s\", \"%s\")) < 0)"
              % (n, n, s.name, n))
        elif arg.type.opt:
            w("\tif (%s && (rc = tn__keys_of_tensor(&keys, %s, \"%s\", \"%s\")) < 0)"
              % (n, n, s.name, n))
        else:
            w("\tif ((rc = tn__keys_of_tensor(&keys, %s, \"%s\", \"%s\")) < 0)"
              % (n, s.name, n))
        w("\t\treturn rc;")
    for arg in s.args:
        if arg.type.kind == "Tensor" and not arg.type.is_list and arg.write:
            w("\tif (%s(rc = tn__check_writable(%s, \"%s\", \"%s\")) < 0)"
              % (arg.name + " && " if arg.type.opt else "", arg.name, s.name, arg.name))
            w("\t\treturn rc;")
    devs = [a for a in s.args if a.type.kind == "Device" and not a.type.is_list]
    if not has_tensor and devs:
        d = devs[0]
        ref = d.name if d.type.opt else "&" + d.name
        w("\tif ((rc = tn__keys_of_device(&keys, %s, \"%s\")) < 0)" % (ref, s.name))
        w("\t\treturn rc;")
    w("\tif ((rc = tn__dispatch(op, tn__highest_key(keys), &k)) < 0)")
    w("\t\treturn rc;")
    names = [n for _, n in s.cparams + s.cret]
    w("\tif (k->unboxed)")
    w("\t\treturn ((tn__%s_fn)k->unboxed)(%s);" % (s.ident, ", ".join(names)))
    w("\treturn box_%s(op, tn__highest_key(keys), k%s);"
      % (s.ident, "".join(", " + n for n in names)))
    w("}")
    w("")


def schema_c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def doc_comment(s):
    lines = ["/*", " * %s - %s" % (s.cname, s.doc), " * aten::%s" % s.text, " */"]
    return "\n".join(lines)


def generate(table_path, map_in, outdir, rel_table):
    entries = read_table(table_path)
    schemas = []
    seen_names, seen_c, kernels = {}, {}, {}
    for idx, e in enumerate(entries):
        where = "%s:%d" % (rel_table, e["func_line"])
        s = parse_schema(e["func"], where)
        if s.ns != "aten":
            raise TableError("%s: table operators live in aten::" % where)
        s.index, s.line, s.text, s.doc = idx, e["func_line"], e["func"], e["doc"]
        s.since = e.get("since", "0.1.0")
        s.qualname = "aten::" + s.name + ("." + s.overload if s.overload else "")
        s.ident = cident(s)
        if s.qualname in seen_names:
            raise TableError("%s: %s is already in the table at line %d"
                             % (where, s.qualname, seen_names[s.qualname]))
        seen_names[s.qualname] = s.line
        default_c = "tn_" + s.name + ("_" + s.overload if s.overload else "")
        s.cname = e.get("c", default_c)
        if not re.fullmatch(r"tn_[a-z0-9_]+", s.cname) or s.cname.startswith("tn__"):
            raise TableError("%s: bad C name %r" % (where, s.cname))
        if s.cname in seen_c:
            raise TableError("%s: C name %s already used at line %d"
                             % (where, s.cname, seen_c[s.cname]))
        seen_c[s.cname] = s.line
        s.cparams = []
        for a in s.args:
            s.cparams += c_params(a)
        s.cret = c_returns(s)
        names = [n for _, n in s.cparams + s.cret]
        if len(set(names)) != len(names):
            raise TableError("%s: C parameter names collide: %s" % (where, names))
        s.proto = fmt_params(s.cparams + s.cret)
        s.dispatch = e["dispatch"]
        for key, kern, line in s.dispatch:
            if kern in kernels and kernels[kern][0] != s.proto:
                raise TableError("%s:%d: kernel %s is used with two C signatures"
                                 % (rel_table, line, kern))
            kernels.setdefault(kern, (s.proto, s))
        keys = [k for k, _, _ in s.dispatch]
        if len(set(keys)) != len(keys):
            raise TableError("%s: a dispatch key is given twice" % where)
        schemas.append(s)

    os.makedirs(os.path.join(outdir, "include", "tensor"), exist_ok=True)

    # public header
    h = [HEADER, "/*", " * The operators of libtensor's op table: see libtensor-ops(7) for each one's",
         " * schema and tensor/dispatch.h for how they are dispatched. The conventions of",
         " * tensor/tensor.h hold: borrowed inputs, new references in ret_* outputs, 0 or a",
         " * negative TN_E* code.", " */",
         "#ifndef TENSOR_OPS_H", "#define TENSOR_OPS_H", "",
         "#include <stdbool.h>", "#include <stdint.h>", "",
         "#include <tensor/device.h>", "#include <tensor/dispatch.h>", "#include <tensor/dtype.h>",
         "#include <tensor/macros.h>", "#include <tensor/tensor.h>", "",
         "TN_BEGIN_DECLS", ""]
    for s in schemas:
        h.append(doc_comment(s))
        h.append(wrap_decl("TN_EXPORT int %s(" % s.cname, s.cparams + s.cret))
        h.append("")
    h += ["TN_END_DECLS", "", "#endif /* TENSOR_OPS_H */", ""]
    write(os.path.join(outdir, "include", "tensor", "ops.h"), "\n".join(h))

    # kernel prototypes
    k = [HEADER, "/* The kernels named in the op table, with the C signature of their entry. */",
         "#ifndef TN_OPS_KERNELS_H", "#define TN_OPS_KERNELS_H", "",
         "#include <tensor/ops.h>", ""]
    for kern in sorted(kernels):
        k.append("int %s(%s);" % (kern, kernels[kern][0]))
    k += ["", "#endif", ""]
    write(os.path.join(outdir, "ops_kernels.h"), "\n".join(k))

    # the library part
    c = [HEADER, "#include <limits.h>", "#include <stdlib.h>", "",
         '#include "registry.h"', '#include "ops_kernels.h"', ""]
    for s in schemas:
        c.append("/* %s: aten::%s */" % (s.cname, s.text))
        c.append("typedef int (*tn__%s_fn)(%s);" % (s.ident, s.proto))
        c.append("")
        c.append("static int unbox_%s(tn_fn fn, tn_stack *st)" % s.ident)
        c.append("{")
        emit_unpack(s, "((tn__%s_fn)fn)" % s.ident, c)
        c.append("}")
        c.append("")
        emit_box_call(s, c)
        emit_entry(s, c)
    for s in schemas:
        c.append("static const struct tn__builtin_kernel kernels_%s[] = {" % s.ident)
        for key, kern, line in s.dispatch:
            c.append("\t{ %s, (tn_fn)%s, %d }," % (KEY_ENUM[key], kern, line))
        c.append("};")
    c.append("")
    c.append("const struct tn__builtin_op tn__builtin_ops[] = {")
    for s in schemas:
        c.append("\t{ %s, \"%s\", %d, unbox_%s, kernels_%s, %d, %s }," %
                 (schema_c_string("aten::" + s.text), s.cname, s.line, s.ident, s.ident,
                  len(s.dispatch), schema_c_string(s.doc)))
    c.append("};")
    c.append("const size_t tn__num_builtin_ops = %d;" % len(schemas))
    c.append("struct tn_op *tn__builtin_handles[%d];" % len(schemas))
    c.append("")
    write(os.path.join(outdir, "ops_gen.c"), "\n".join(c))

    # the tests' unboxed callers
    t = [HEADER, "/* Per operator: pop its arguments from a stack, call the public C entry point,",
         " * push the results (the unboxed path, exercised from outside the library). */",
         "#include <limits.h>", "#include <stdlib.h>", ""]
    for s in schemas:
        t.append("static int call_%s(tn_stack *st)" % s.ident)
        t.append("{")
        emit_unpack(s, s.cname, t, check_writable=False)  # the entry point checks
        t.append("}")
        t.append("")
    t.append("static const struct {")
    t.append("\tconst char *name;")
    t.append("\tconst char *schema; /* as the table writes it */")
    t.append("\tint (*call)(tn_stack *);")
    t.append("} tn_test_ops[] = {")
    for s in schemas:
        t.append("\t{ \"%s\", %s, call_%s }," % (s.qualname, schema_c_string("aten::" + s.text), s.ident))
    t.append("};")
    t.append("")
    write(os.path.join(outdir, "ops_calls_gen.h"), "\n".join(t))

    write(os.path.join(outdir, "ops_names.txt"), "".join(s.cname + "\n" for s in schemas))

    # version script
    with open(map_in, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out_map = []
    for line in lines:
        m = re.fullmatch(r"\s*/\* @OPS ([0-9.]+)@ \*/\s*", line)
        if m:
            ver = m.group(1)
            names = sorted(s.cname for s in schemas if s.since == ver)
            out_map += ["\t\t%s;" % n for n in names]
        else:
            out_map.append(line)
    vers = {s.since for s in schemas}
    for v in vers:
        if "/* @OPS %s@ */" % v not in "\n".join(lines):
            raise TableError("%s has no /* @OPS %s@ */ line for the operators since %s"
                             % (map_in, v, v))
    write(os.path.join(outdir, "libtensor.map"), "\n".join(out_map))

    write(os.path.join(outdir, "libtensor-ops.7"), man_page(schemas))


def man_escape(text):
    return text.replace("\\", "\\e").replace("-", "\\-")


def man_page(schemas):
    m = ['.\\" Generated by libtensor/ops/gen_ops.py from libtensor/ops/functions.yaml.',
         ".Dd November 21, 2026",
         ".Dt LIBTENSOR-OPS 7",
         ".Os libtensor",
         ".Sh NAME",
         ".Nm libtensor-ops",
         ".Nd the operators of libtensor and their C entry points",
         ".Sh DESCRIPTION",
         "Every libtensor operator is one entry of the op table",
         ".Pa libtensor/ops/functions.yaml ,",
         "a schema in PyTorch's grammar.",
         "The build generates from it the C entry point, which looks the operator up once,",
         "takes the dispatch key from the devices of its tensor arguments (or from its",
         ".Vt Device",
         "argument, or CPU), and calls the kernel registered for that key;",
         "the boxed adapter that lets",
         ".Xr tn_call_boxed 3",
         "call the same kernel with values on a stack; and this page.",
         ".Ss Schema types in C",
         ".Bl -column \"MemoryFormat\" \"enum tn_memory_format\" -compact",
         ".It Sy schema Ta Sy C parameter",
         ".It Tensor Ta const tn_tensor * Pq tn_tensor * when written, Tensor(a!)",
         ".It Tensor? Ta const tn_tensor * Pq NULL for None",
         ".It Tensor[] Ta int n Ns Ar name , No tn_tensor *const * Ns Ar name",
         ".It int, SymInt Ta int64_t",
         ".It int[], int[N] Ta int n Ns Ar name , No const int64_t * Ns Ar name",
         ".It float Ta double",
         ".It bool Ta bool",
         ".It str Ta const char *",
         ".It Scalar Ta tn_scalar",
         ".It ScalarType Ta enum tn_dtype",
         ".It Device Ta tn_device",
         ".It Layout Ta enum tn_layout",
         ".It MemoryFormat Ta enum tn_memory_format",
         ".It Generator? Ta tn_generator * Pq NULL for the default generator",
         ".It T? Ta const T * Pq NULL for None ; lists and strings: a NULL pointer",
         ".El",
         ".Pp",
         "Results follow the arguments: a returned",
         ".Vt Tensor",
         "is a",
         ".Vt tn_tensor **ret_tensor",
         "that receives a new reference;",
         ".Vt Tensor[]",
         "is",
         ".Vt int *ret_n , tn_tensor ***ret_tensors",
         "(an array the caller frees with",
         ".Xr free 3",
         "after dropping each reference); other types are a",
         ".Vt T *ret_value ;",
         "several results are named",
         ".Va ret_ Ns Ar name .",
         "A result that aliases a written argument",
         "(Tensor(a!), in-place and out= operators)",
         "is that argument and has no C parameter.",
         "Every entry point returns 0 or a negative",
         ".Dv TN_E*",
         "code and leaves a message in",
         ".Xr tn_last_error 3 .",
         ".Sh OPERATORS"]
    for s in schemas:
        m.append(".Ss aten::%s" % man_escape(s.name + ("." + s.overload if s.overload else "")))
        m.append(man_escape(s.doc))
        m.append(".Bd -literal -offset indent")
        m.append(man_escape("aten::" + s.text))
        m.append("int %s(%s);" % (man_escape(s.cname), man_escape(s.proto)))
        m.append(".Ed")
        m.append("Kernels: %s." % ", ".join(man_escape("%s (%s)" % (key, kern))
                                             for key, kern, _ in s.dispatch))
    m += [".Sh SEE ALSO",
          ".Xr tn_call_boxed 3 ,",
          ".Xr tn_op_def_at 3 ,",
          ".Xr tn_schema_parse 3 ,",
          ".Xr libtensor 7",
          ""]
    return "\n".join(m)


def write(path, text):
    # Rewrite only on change, so make does not rebuild what depends on an unchanged file.
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", required=True)
    ap.add_argument("--map", required=True, help="libtensor.map.in")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--table-name", default="libtensor/ops/functions.yaml",
                    help="the table's path as registration sites name it")
    args = ap.parse_args()
    try:
        generate(args.table, args.map, args.outdir, args.table_name)
    except TableError as e:
        sys.stderr.write("gen_ops: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
