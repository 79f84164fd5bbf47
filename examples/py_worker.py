# SPDX-License-Identifier: MIT
"""The Python workers of `make demo` (examples/tensord_demo.c starts them before the producer).

    py_worker.py torch|numpy ARENA_DIR

Each connects to the demo's tensord ($TENSORD_SOCKET), waits for the producer's sealed weights
(no polling: a futex in the arena), maps them zero-copy (the torch worker through DLPack, the
NumPy one through the buffer protocol), computes what the C consumers compute, publishes its
results as results/torch or results/numpy, tries to write the weights, and prints its PSS:
the arena's pages it maps are shared with every other process, not copied.
"""
import os
import sys
import time

import libtensor

KIND, ARENA_DIR = sys.argv[1], sys.argv[2]
BATCH, NINPUTS = 64, 3


def arena_memory():
    """Rss, Pss and private bytes of this process's mappings of the demo's arena files."""
    rss = pss = private = 0
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                inside = ARENA_DIR in line
            elif inside and first in ("Rss:", "Pss:", "Private_Clean:", "Private_Dirty:"):
                kib = int(line.split()[1]) * 1024
                if first == "Rss:":
                    rss += kib
                elif first == "Pss:":
                    pss += kib
                else:
                    private += kib
    return rss, pss, private


def total_pss():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def mib(n):
    return "%.1f MiB" % (n / 1048576.0)


def say(text):
    print("%-9s %s" % (KIND, text), flush=True)


def main():
    with libtensor.connect() as client, client.arena("demo") as arena:
        t0 = time.monotonic()
        # Started before the producer: waits for the weights to be published and sealed.
        weights = arena.lookup("model/weights", timeout=60.0, sealed=True)
        waited = time.monotonic() - t0
        inputs = [arena.lookup("inputs/%d" % i, timeout=60.0) for i in range(NINPUTS)]
        base = weights.data_ptr()
        if KIND == "torch":
            import torch

            w = torch.from_dlpack(weights)
            xs = [torch.from_dlpack(x) for x in inputs]
            # float32 products summed in float64: the C consumers' sum is float32.
            results = [float((x.double() * w[:BATCH].double()).sum()) for x in xs]
            mapped = "torch.from_dlpack"
            # PyTorch has no read-only tensors: a sealed tensor reaches it as a private
            # copy-on-write mapping of the arena's pages.
            before = arena_memory()
            w.add_(1.0)
            after = arena_memory()
            shared = libtensor.ops.sum(weights, dtype=libtensor.float64).item()
            write = ("w.add_(1) changed this process's copy only (%s of pages copied on "
                     "write); the shared weights still sum to %.6f" %
                     (mib(after[2] - before[2]), shared))
            out = torch.tensor(results, dtype=torch.float64)
        else:
            import numpy as np

            w = np.asarray(weights)
            xs = [np.asarray(x) for x in inputs]
            results = [float((x.astype(np.float64) * w[:BATCH].astype(np.float64)).sum())
                       for x in xs]
            mapped = "numpy.asarray"
            try:
                w[0, 0] = 1.0
                write = "w[0, 0] = 1 was ALLOWED"
            except ValueError as e:
                write = "w[0, 0] = 1 refused: %s" % e
            out = np.array(results, dtype=np.float64)
            assert w.ctypes.data == base, "numpy did not map the weights in place"
        arena.publish("results/" + KIND, out, seal=True)
        rss, pss, private = arena_memory()
        say("(pid %d): waited %.0f ms for the sealed weights, mapped them with %s; "
            "sum(inputs/i * weights[:%d]) = %s" %
            (os.getpid(), waited * 1e3, mapped, BATCH, ", ".join("%.6f" % r for r in results)))
        say(write)
        say("PSS %s in all (the interpreter and its libraries); of the arena: RSS %s, "
            "PSS %s, private %s" % (mib(total_pss()), mib(rss), mib(pss), mib(private)))


if __name__ == "__main__":
    main()
