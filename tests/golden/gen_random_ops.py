# SPDX-License-Identifier: MIT
"""Golden values for libtensor's random operators (libtensor/random.c).

Where gen_random.py checks the core on plain arrays, this runs torch's operators themselves:
factories (rand, randn, randint, randperm) in every dtype, the in-place fills on transposed and
channels-last tensors (whose draws follow TensorIterator's order, not memory order), random_'s
three forms, bernoulli with a scalar and with a broadcast probability tensor, dropout on the
default generator, and the generator's state bytes. Run with Debian's torch 1.13.1:

    /usr/bin/python3 tests/golden/gen_random_ops.py tests/golden

It writes tests/golden/random_ops_golden.h, read by tests/check_random.c. The script runs itself
once per CPU capability with ATEN_CPU_CAPABILITY set, as the float results of uniform_(from, to)
and normal_ depend on it.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_random import CAPS, run_children, torch_under  # noqa: E402  (the capability runs)
SEEDS = [0, 1234, 2**40 + 17]


def input_value(i):
    """The input of dropout and the probabilities of bernoulli: check_random.c computes the
    same, element i of the tensor in row-major order."""
    return ((i * 37) % 101) / 100.0


# A call: (op, dtype, shape, layout, a, b, lo, hi, extra)
#   layout: "c" contiguous, "t" the transpose of a contiguous tensor of the reversed 2-d shape,
#   "cl" channels_last (4-d).
#   rand/randn: torch.rand/randn(shape, dtype); randint: torch.randint(lo, hi, shape, dtype);
#   randperm: torch.randperm(lo, dtype);
#   uniform: t.uniform_(a, b); normal: t.normal_(a, b); random_ft: t.random_(lo, hi);
#   random_from: t.random_(lo, None); random_to: t.random_(hi); random: t.random_();
#   bernoulli_p: t.bernoulli_(a); bernoulli_t: t.bernoulli_(p) with p of dtype extra and
#   shape shape[-1:] (broadcast); bernoulli: torch.bernoulli(p) with p of dtype and shape;
#   dropout: F.dropout(x, a, training=bool(lo)) with x of dtype, from the default generator
#   seeded with the case's seed (the case's generator is left alone);
#   state: the generator's get_state() bytes.
def script():
    calls = []

    def c(op, dtype, shape, layout="c", a=0.0, b=0.0, lo=0, hi=0, extra=""):
        calls.append((op, dtype, list(shape), layout, a, b, lo, hi, extra))

    for dt in ["float32", "float64", "float16", "bfloat16"]:
        c("rand", dt, (3, 5))
        c("randn", dt, (2, 7))  # 14 elements: one normal_distribution<double> each
    c("randn", "float32", (4, 5))  # 20: the vectorised fill
    c("randn", "float64", (17,))
    c("uniform", "float32", (4, 6), "t", -2.0, 3.0)
    c("uniform", "float64", (2, 3, 4, 5), "cl", 0.5, 1.5)
    c("uniform", "float16", (3, 4), "c", -3.0, 5.0)
    c("uniform", "bfloat16", (3, 4), "t", -3.0, 5.0)
    c("normal", "float32", (5, 4), "t", 1.0, 2.0)  # not contiguous: one per element
    c("normal", "float32", (40,), "c", -1.0, 0.5)
    c("normal", "float64", (2, 3, 4, 5), "cl", 0.0, 1.0)
    c("normal", "float16", (3, 5), "c", 0.0, 1.0)
    c("randint", "int64", (4, 6), lo=3, hi=17)
    c("randint", "int64", (5,), lo=0, hi=2**40)  # a 64-bit draw each
    c("randint", "int8", (7,), lo=-5, hi=5)
    c("randint", "uint8", (6,), lo=0, hi=256)
    c("randint", "int32", (3, 3), lo=-1000, hi=1000)
    c("randint", "float32", (6,), lo=0, hi=10)
    c("randint", "float16", (5,), lo=-100, hi=100)
    c("randint", "bool", (8,), lo=0, hi=2)
    c("randperm", "int64", (), lo=10)
    c("randperm", "int32", (), lo=50)
    c("randperm", "float32", (), lo=20)
    c("randperm", "bfloat16", (), lo=300)
    for dt in ["int64", "int32", "int16", "int8", "uint8", "bool", "float32", "float64",
               "float16", "bfloat16"]:
        c("random", dt, (2, 3), "t")
    c("random_from", "int64", (4,), lo=-(2**63))
    c("random_from", "float32", (4,), lo=-(2**63))
    c("random_from", "int8", (6,), lo=5)
    c("random_from", "uint8", (6,), lo=200)
    c("random_from", "float64", (4,), lo=-7)
    c("random_to", "int32", (5,), hi=10)
    c("random_ft", "int16", (3, 4), "t", lo=-300, hi=300)
    c("bernoulli_p", "float32", (6, 7), a=0.3)
    c("bernoulli_p", "bool", (4, 5), "t", a=0.7)
    c("bernoulli_p", "int32", (9,), a=0.5)
    c("bernoulli_t", "int64", (5, 8), extra="float32")
    c("bernoulli_t", "bfloat16", (3, 4), "t", extra="float64")
    c("bernoulli_t", "float32", (2, 6), extra="bfloat16")
    c("bernoulli", "float32", (5, 8))
    c("bernoulli", "float64", (11,))
    c("dropout", "float32", (6, 5), a=0.3, lo=1)
    c("dropout", "float64", (9,), a=0.5, lo=1)
    c("dropout", "float32", (4,), a=0.3, lo=0)
    c("dropout", "float32", (4,), a=1.0, lo=1)
    c("state", "uint8", ())
    c("randn", "float64", (3,))  # leaves a cached normal sample in the state
    c("state", "uint8", ())
    return calls


def run_case(torch, seed, calls):
    import torch.nn.functional as F

    dt = {n: getattr(torch, n) for n in ["float32", "float64", "float16", "bfloat16", "int64",
                                         "int32", "int16", "int8", "uint8", "bool"]}
    g = torch.Generator()
    g.manual_seed(seed)
    out = []

    def make(dtype, shape, layout):
        if layout == "t":
            return torch.empty(tuple(reversed(shape)), dtype=dt[dtype]).t()
        if layout == "cl":
            return torch.empty(shape, dtype=dt[dtype]).contiguous(memory_format=torch.channels_last)
        return torch.empty(shape, dtype=dt[dtype])

    def values(shape, dtype):
        n = 1
        for s in shape:
            n *= s
        return torch.tensor([input_value(i) for i in range(n)],
                            dtype=torch.float64).reshape(shape).to(dt[dtype])

    for op, dtype, shape, layout, a, b, lo, hi, extra in calls:
        if op == "rand":
            t = torch.rand(shape, dtype=dt[dtype], generator=g)
        elif op == "randn":
            t = torch.randn(shape, dtype=dt[dtype], generator=g)
        elif op == "randint":
            t = torch.randint(lo, hi, shape, dtype=dt[dtype], generator=g)
        elif op == "randperm":
            t = torch.randperm(lo, dtype=dt[dtype], generator=g)
        elif op == "uniform":
            t = make(dtype, shape, layout).uniform_(a, b, generator=g)
        elif op == "normal":
            t = make(dtype, shape, layout).normal_(a, b, generator=g)
        elif op == "random_ft":
            t = make(dtype, shape, layout).random_(lo, hi, generator=g)
        elif op == "random_from":
            t = make(dtype, shape, layout).random_(lo, None, generator=g)
        elif op == "random_to":
            t = make(dtype, shape, layout).random_(hi, generator=g)
        elif op == "random":
            t = make(dtype, shape, layout).random_(generator=g)
        elif op == "bernoulli_p":
            t = make(dtype, shape, layout).bernoulli_(a, generator=g)
        elif op == "bernoulli_t":
            t = make(dtype, shape, layout).bernoulli_(values(shape[-1:], extra), generator=g)
        elif op == "bernoulli":
            t = torch.bernoulli(values(shape, dtype), generator=g)
        elif op == "dropout":
            torch.manual_seed(seed)
            t = F.dropout(values(shape, dtype), a, training=bool(lo))
        elif op == "state":
            t = g.get_state()
        else:
            raise ValueError(op)
        flat = t.reshape(-1).tolist() if t.dtype != torch.bool else [int(v) for v in t.reshape(-1)]
        ints = not t.is_floating_point()
        out.append([int(v) if ints else float(v) for v in flat])
    return out


def child(cap):
    torch = torch_under(cap)
    torch.set_num_threads(1)
    result = []
    for seed in SEEDS:
        calls = script()
        result.append({"seed": seed, "calls": calls, "values": run_case(torch, seed, calls)})
    json.dump({"torch": torch.__version__, "cases": result}, sys.stdout)


def c_double(x):
    if x != x:
        return "NAN"
    if x in (float("inf"), float("-inf")):
        return "INFINITY" if x > 0 else "-INFINITY"
    return repr(float(x))


def main(outdir):
    runs = run_children(__file__)
    version = runs["avx2"]["torch"]

    cases, calls, fvals, ivals = [], [], [], []
    for isa, cap in enumerate(CAPS):
        for case in runs[cap]["cases"]:
            first = len(calls)
            for call, vals in zip(case["calls"], case["values"]):
                op, dtype, shape, layout, a, b, lo, hi, extra = call
                is_int = op == "state" or dtype in ("int64", "int32", "int16", "int8",
                                                    "uint8", "bool")
                off = len(ivals) if is_int else len(fvals)
                (ivals if is_int else fvals).extend(vals)
                calls.append((op, dtype, shape, layout, a, b, lo, hi, extra, len(vals), off))
            cases.append(("%s/seed=%d" % (cap, case["seed"]), case["seed"], isa, first,
                          len(calls) - first))

    lines = []
    w = lines.append
    w("/* Random-operator goldens: torch %s's random operators, value for value." % version)
    w(" *")
    w(" * GENERATED by tests/golden/gen_random_ops.py -- DO NOT EDIT.")
    w(" * Regenerate with:")
    w(" *     /usr/bin/python3 tests/golden/gen_random_ops.py tests/golden")
    w(" *")
    w(" * Each case ran its calls in order on one torch.Generator seeded with seed (dropout on")
    w(" * the default generator, seeded again with seed before each dropout call), torch having")
    w(" * chosen CPU capability isa (enum tn_cpu_capability) through ATEN_CPU_CAPABILITY. The")
    w(" * ops and their arguments are described in gen_random_ops.py. A call's n results, in")
    w(" * row-major order of its logical shape, are in ops_ints (integers, bool, state bytes)")
    w(" * or ops_floats (floating dtypes, exact as doubles) from offset.")
    w(" */")
    w("#ifndef LIBTENSOR_TESTS_RANDOM_OPS_GOLDEN_H")
    w("#define LIBTENSOR_TESTS_RANDOM_OPS_GOLDEN_H")
    w("")
    w("#include <stddef.h>")
    w("#include <stdint.h>")
    w("")
    w("struct rop_call {")
    w("\tconst char *op, *dtype;")
    w("\tint ndim;")
    w("\tint64_t shape[4];")
    w("\tconst char *layout;")
    w("\tdouble a, b;")
    w("\tint64_t lo, hi;")
    w("\tconst char *extra;")
    w("\tsize_t n, offset;")
    w("};")
    w("")
    w("struct rop_case {")
    w("\tconst char *name;")
    w("\tuint64_t seed;")
    w("\tint isa;")
    w("\tsize_t first_call, ncalls;")
    w("};")
    w("")
    w("static const struct rop_case rop_cases[] = {")
    for name, seed, isa, first, ncalls in cases:
        w('\t{"%s", UINT64_C(%d), %d, %d, %d},' % (name, seed, isa, first, ncalls))
    w("};")
    w("")
    w("static const struct rop_call rop_calls[] = {")
    for op, dtype, shape, layout, a, b, lo, hi, extra, n, off in calls:
        los = "INT64_MIN" if lo == -(2**63) else "INT64_C(%d)" % lo
        sh = ", ".join(str(s) for s in shape) or "0"
        w('\t{"%s", "%s", %d, {%s}, "%s", %s, %s, %s, INT64_C(%d), "%s", %d, %d},' %
          (op, dtype, len(shape), sh, layout, c_double(a), c_double(b), los, hi, extra, n, off))
    w("};")
    w("")
    w("static const int64_t rop_ints[] = {")
    for i in range(0, len(ivals), 8):
        w("\t" + " ".join("%s," % ("INT64_MIN" if v == -(2**63) else "INT64_C(%d)" % v)
                          for v in ivals[i:i + 8]))
    w("};")
    w("")
    w("static const double rop_floats[] = {")
    for i in range(0, len(fvals), 4):
        w("\t" + " ".join("%s," % c_double(v) for v in fvals[i:i + 4]))
    w("};")
    w("")
    w("#endif")
    path = os.path.join(outdir, "random_ops_golden.h")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d cases, %d calls, %d integers, %d floats" %
          (path, len(cases), len(calls), len(ivals), len(fvals)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
