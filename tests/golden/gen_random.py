# SPDX-License-Identifier: MIT
"""Golden values for the random-number core (libtensor/generator.c).

Runs sequences of random ops on one torch.Generator per case and records every value's exact
bits, under each CPU capability torch can pick (the float results of uniform_(from, to) and
normal_ depend on it). Run with Debian's torch 1.13.1:

    /usr/bin/python3 tests/golden/gen_random.py tests/golden

It writes tests/golden/random_golden.h, read by tests/check_random_core.c. The script runs
itself once per capability with ATEN_CPU_CAPABILITY set (torch reads it once, at start-up).
"""
import json
import os
import subprocess
import sys

CAPS = ["default", "avx2", "avx512"]  # the order of enum tn__rng_isa
SEEDS = [0, 42, 2**32 + 5, 0xFEDCBA9876543210, None]  # None: a fresh Generator()
SIZES = [1, 7, 15, 16, 17, 100, 1000]


def bernoulli_p(i):
    """The probability tensor of the bernoulli_t calls; check_random_core.c computes the same."""
    return ((i * 37) % 101) / 100.0


def script(full):
    """The calls of one case: (op, dtype, n, a, b, lo, hi). full=False keeps the float ops whose
    results depend on the capability."""
    calls = []

    def c(op, dtype, n, a=0.0, b=0.0, lo=0, hi=0):
        calls.append((op, dtype, n, a, b, lo, hi))

    if full:
        c("random_full", "int64", 7)
    for dt in ["float32", "float64"]:
        for n in SIZES if full else [7, 17]:
            c("rand", dt, n, 0.0, 1.0)
        c("rand", dt, 100, -3.7, 11.3)
        c("rand", dt, 17, 1e-3, 2.5e3)
    # normal: the size-16 boundary, the cached Box-Muller sample shared by float32 and
    # float64 calls of fewer than 16 elements, and calls of 16 or more that leave it alone.
    c("randn", "float32", 1, 0.0, 1.0)
    c("randn", "float64", 1, 0.0, 1.0)
    c("randn", "float64", 7, 0.3, 2.7)
    c("randn", "float32", 15, -1.25, 0.5)
    c("randn", "float32", 16, 0.3, 2.7)
    c("randn", "float64", 3, 0.0, 1.0)
    c("randn", "float32", 17, 0.0, 1.0)
    c("randn", "float64", 16, 0.0, 1.0)
    c("randn", "float64", 1, 0.3, 2.7)
    c("randn", "float64", 17, 0.3, 2.7)
    c("randn", "float32", 100, 0.3, 2.7)
    c("randn", "float64", 100, -1.25, 0.5)
    c("randn", "float32", 1000, 0.0, 1.0)
    c("randn", "float64", 1000, 0.3, 2.7)
    c("randn", "float32", 33, 5.0, 0.0)
    c("randn", "float32", 1, 0.3, 2.7)
    if not full:
        return calls
    c("randint", "int64", 100, lo=0, hi=10)
    c("randint", "int64", 17, lo=-5, hi=7)
    c("randint", "int64", 16, lo=-100, hi=2**32)  # range 2^32 + 100: 64-bit draws
    c("randint", "int64", 7, lo=0, hi=2**32 - 1)  # range below 2^32: 32-bit draws
    c("randint", "int64", 7, lo=-(2**63), hi=2**63 - 1)
    c("randint", "int32", 17, lo=-7, hi=2**31 - 1)
    c("randint", "int16", 17, lo=-300, hi=300)
    c("randint", "int8", 17, lo=-128, hi=128)
    c("randint", "uint8", 17, lo=0, hi=256)
    c("randint", "float32", 17, lo=-3, hi=100)
    c("randint", "float32", 7, lo=0, hi=2**24)
    c("randint", "float32", 7, lo=-(2**40), hi=2**40)  # 64-bit draws, rounded to float
    c("randint", "float64", 17, lo=-1000, hi=2**33)
    # Bounds that update_from/update_to move for floating outputs.
    c("randint", "float32", 7, lo=-(2**30) + 3, hi=2**30 + 100)
    c("randint", "float64", 7, lo=-(2**60) + 3, hi=2**60 - 5)
    c("random", "int64", 7)
    c("random", "int32", 7)
    c("random", "float32", 7)
    c("random", "float64", 7)
    c("random", "bool", 17)
    c("random_full", "float32", 7)
    c("random_full", "float64", 7)
    c("bernoulli", "float32", 100, 0.3)
    c("bernoulli", "float64", 17, 0.7)
    c("bernoulli", "int64", 17, 0.5)
    c("bernoulli", "uint8", 17, 0.1)
    c("bernoulli", "bool", 17, 0.9)
    c("bernoulli", "float32", 7, 0.0)
    c("bernoulli", "float64", 7, 1.0)
    c("bernoulli_t", "float32", 100)
    c("bernoulli_t", "float64", 17)
    for n in [0, 1, 2, 7, 16, 100, 1000]:
        c("randperm", "int64", n)
    c("randperm", "int32", 100)
    c("randperm", "float32", 100)
    c("randperm", "float64", 17)
    c("randn", "float64", 3, 0.0, 1.0)  # the cache after everything above
    return calls


def run_case(torch, seed, calls):
    """Runs the calls on one generator; returns a list of lists of 64-bit patterns."""
    import numpy as np

    dt = {
        "float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
        "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
        "uint8": torch.uint8, "bool": torch.bool,
    }
    g = torch.Generator()
    if seed is not None:
        g.manual_seed(seed)
    out = []
    for op, dtype, n, a, b, lo, hi in calls:
        t = torch.empty(n, dtype=dt[dtype])
        if op == "rand":
            t.uniform_(a, b, generator=g)
        elif op == "randn":
            t.normal_(a, b, generator=g)
        elif op == "randint":
            t = torch.randint(lo, hi, (n,), dtype=dt[dtype], generator=g)
        elif op == "random":
            t.random_(generator=g)
        elif op == "random_full":
            t.random_(-(2**63), None, generator=g)
        elif op == "bernoulli":
            t.bernoulli_(a, generator=g)
        elif op == "bernoulli_t":
            p = torch.tensor([bernoulli_p(i) for i in range(n)], dtype=dt[dtype])
            t = torch.bernoulli(p, generator=g)
        elif op == "randperm":
            t = torch.randperm(n, dtype=dt[dtype], generator=g)
        else:
            raise ValueError(op)
        arr = t.numpy()
        if dtype == "float32":
            bits = arr.view(np.uint32).astype(np.uint64)
        elif dtype == "float64":
            bits = arr.view(np.uint64)
        elif dtype == "bool":
            bits = arr.astype(np.uint64)
        else:
            bits = arr.astype(np.int64).view(np.uint64)
        out.append([int(v) for v in bits])
    return out, g.initial_seed()


def torch_under(cap):
    """torch, checked to run capability cap's kernels (this process was started with
    ATEN_CPU_CAPABILITY=cap by run_children)."""
    import torch

    shown = torch.__config__.show()
    want = {"default": "NO AVX", "avx2": "AVX2", "avx512": "AVX512"}[cap]
    if "CPU capability usage: %s\n" % want not in shown:
        sys.exit("torch did not take ATEN_CPU_CAPABILITY=%s" % cap)
    return torch


def run_children(script_path):
    """Run `script_path --child CAP` once per capability (torch reads ATEN_CPU_CAPABILITY once,
    at start-up); returns {cap: the JSON it printed}."""
    runs = {}
    for cap in CAPS:
        env = dict(os.environ, ATEN_CPU_CAPABILITY=cap, OMP_NUM_THREADS="1")
        res = subprocess.run([sys.executable, script_path, "--child", cap], env=env,
                             check=True, capture_output=True, text=True)
        runs[cap] = json.loads(res.stdout)
    return runs


def child(cap):
    torch = torch_under(cap)
    result = []
    # Only the float ops depend on the capability: the other two run them on two seeds.
    full = cap == "avx2"
    for seed in SEEDS if full else [0, 2**32 + 5]:
        calls = script(full)
        values, initial = run_case(torch, seed, calls)
        result.append({"seed": seed, "initial": initial, "calls": calls, "values": values})
    json.dump({"torch": torch.__version__, "cases": result}, sys.stdout)


def c_double(x):
    return repr(float(x)) if x == x else "NAN"


def main(outdir):
    runs = run_children(__file__)
    version = runs["avx2"]["torch"]

    cases, calls, values = [], [], []
    for isa, cap in enumerate(CAPS):
        for case in runs[cap]["cases"]:
            seed = case["seed"]
            name = "%s/%s" % (cap, "fresh" if seed is None else "seed=%d" % seed)
            first = len(calls)
            for (op, dtype, n, a, b, lo, hi), vals in zip(case["calls"], case["values"]):
                assert len(vals) == n
                calls.append((op, dtype, n, a, b, lo, hi, len(values)))
                values.extend(vals)
            cases.append((name, seed, case["initial"], isa, first, len(calls) - first))

    lines = []
    w = lines.append
    w("/* Random-number goldens: torch %s's CPU generator, bit for bit." % version)
    w(" *")
    w(" * GENERATED by tests/golden/gen_random.py -- DO NOT EDIT.")
    w(" * Regenerate with:")
    w(" *     /usr/bin/python3 tests/golden/gen_random.py tests/golden")
    w(" *")
    w(" * Each case is one torch.Generator (manual_seed(seed), or a fresh one when has_seed is")
    w(" * 0) on which the case's calls ran in order, torch having chosen the CPU capability")
    w(" * isa (0 default, 1 avx2, 2 avx512: enum tn__rng_isa) through ATEN_CPU_CAPABILITY.")
    w(" * initial_seed is what g.initial_seed() returned afterwards.")
    w(" *")
    w(" * A call: op, output dtype, n elements (contiguous), and its arguments:")
    w(" *   rand        t.uniform_(a, b)                 randn     t.normal_(a, b)")
    w(" *   randint     torch.randint(lo, hi, (n,))      random    t.random_()")
    w(" *   random_full t.random_(-2**63, None)          bernoulli t.bernoulli_(a)")
    w(" *   bernoulli_t torch.bernoulli(p), p[i] = ((i * 37) %% 101) / 100.0 in the dtype")
    w(" *   randperm    torch.randperm(n)")
    w(" * Its n results are random_values[offset..offset + n): float32 bits in the low 32 bits,")
    w(" * float64 bits, integers as two's complement int64, bool as 0/1.")
    w(" */")
    w("#ifndef LIBTENSOR_TESTS_RANDOM_GOLDEN_H")
    w("#define LIBTENSOR_TESTS_RANDOM_GOLDEN_H")
    w("")
    w("#include <stddef.h>")
    w("#include <stdint.h>")
    w("")
    w("struct random_call {")
    w("\tconst char *op;")
    w("\tconst char *dtype;")
    w("\tsize_t n;")
    w("\tdouble a, b;")
    w("\tint64_t lo, hi;")
    w("\tsize_t offset;")
    w("};")
    w("")
    w("struct random_case {")
    w("\tconst char *name;")
    w("\tint has_seed;")
    w("\tuint64_t seed;")
    w("\tuint64_t initial_seed;")
    w("\tint isa;")
    w("\tsize_t first_call, ncalls;")
    w("};")
    w("")
    w("static const struct random_case random_cases[] = {")
    for name, seed, initial, isa, first, ncalls in cases:
        w('\t{"%s", %d, UINT64_C(%d), UINT64_C(%d), %d, %d, %d},' %
          (name, seed is not None, 0 if seed is None else seed, initial, isa, first, ncalls))
    w("};")
    w("")
    w("static const struct random_call random_calls[] = {")
    for op, dtype, n, a, b, lo, hi, off in calls:
        los = "INT64_MIN" if lo == -(2**63) else "INT64_C(%d)" % lo
        w('\t{"%s", "%s", %d, %s, %s, %s, INT64_C(%d), %d},' %
          (op, dtype, n, c_double(a), c_double(b), los, hi, off))
    w("};")
    w("")
    w("static const uint64_t random_values[] = {")
    for i in range(0, len(values), 5):
        w("\t" + " ".join("0x%016x," % v for v in values[i:i + 5]))
    w("};")
    w("")
    w("#endif")
    path = os.path.join(outdir, "random_golden.h")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d cases, %d calls, %d values" % (path, len(cases), len(calls), len(values)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
