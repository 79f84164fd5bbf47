# SPDX-License-Identifier: MIT
"""bench_python: how long a PyTorch process takes to get a tensor another process published,
beside PyTorch's own ways of sharing, measured in the same run; and the DLPack round trip.

    bench_python.py TENSORD_PATH    (make bench runs it with the package's interpreter and
                                     PYTHONPATH at the build tree's package)

1. Getting a published tensor, 1 MiB to 1 GiB (BENCH_PY_MAX_MIB caps the largest): a producer
   (this process) asks a consumer (a forked torch process) for one get at a time; the consumer
   times its get, from its start to holding a torch tensor over the data:
   - libtensor: the tensor is published in an arena of a private tensord; the consumer looks it
     up by name (it has the arena attached) and hands it to torch.from_dlpack;
   - torch.multiprocessing (sharing strategy file_descriptor, the default on Linux): the tensor
     is in shared memory already (share_memory_() before timing); the producer puts it on a
     torch.multiprocessing queue and the consumer, once it is there, gets it (the fd is
     received and mapped);
   - torch.from_file(shared=True): the consumer maps a file holding the same bytes on /dev/shm
     (the mmap way to load weights in torch 1.13, whose torch.load has no mmap);
   - torch.load: the consumer reads a torch.save file of the same tensor from /dev/shm (a copy).
   Medians of BENCH_PY_REPS (default 15) gets, in microseconds, and each peer's time over
   libtensor's.
2. The DLPack round trip, libtensor -> torch -> libtensor, beside torch -> torch through the
   same protocol and through torch.utils.dlpack's capsule functions, in nanoseconds (medians),
   and libtensor's own share of it.
"""
import gc
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.multiprocessing as mp
from torch.utils import dlpack as tdl

import libtensor

REPS = int(os.environ.get("BENCH_PY_REPS", "15"))
MAX_MIB = int(os.environ.get("BENCH_PY_MAX_MIB", "1024"))
SIZES_MIB = [m for m in (1, 16, 256, 1024) if m <= MAX_MIB]


def consumer(socket, cmds, replies, tensors):
    """The torch process: for each request, gets the tensor the way it names and replies with
    the time the get took, from its start to holding a torch tensor over the data."""
    client = libtensor.connect(socket)
    arena = client.arena("bench")
    while True:
        cmd = cmds.get()
        if cmd is None:
            break
        how, arg, n = cmd
        if how == "warm":
            replies.put((warm_gets(arena, arg[0], arg[1], n), True))
            continue
        if how == "mp":
            time.sleep(0.02)  # the tensor is on its queue by then: time its get only
        t0 = time.perf_counter()
        if how == "libtensor":
            x = torch.from_dlpack(arena.lookup(arg))
        elif how == "mp":
            x = tensors.get()
        elif how == "from_file":
            x = torch.from_file(arg, shared=True, size=n, dtype=torch.float32)
        elif how == "load":
            x = torch.load(arg)
        t1 = time.perf_counter()
        ok = x.numel() == n
        del x
        gc.collect()
        replies.put((t1 - t0, ok))
    arena.close()
    client.close()


def warm_gets(arena, name, raw, n, reps=200):
    """Medians (us) of the same get repeated back to back, caches warm: libtensor's and
    torch.from_file's."""
    out = []
    for get in (lambda: torch.from_dlpack(arena.lookup(name)),
                lambda: torch.from_file(raw, shared=True, size=n, dtype=torch.float32)):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            x = get()
            times.append(time.perf_counter() - t0)
            del x
        out.append(statistics.median(times) * 1e6)
    return out


def timed(cmds, replies, cmd, tensors=None, shared=None):
    times = []
    for _ in range(REPS):
        cmds.put(cmd)
        if tensors is not None:
            tensors.put(shared)
        took, ok = replies.get()
        if not ok:
            raise SystemExit("bench_python: the consumer got a wrong tensor for %s" % cmd[0])
        times.append(took)
    return statistics.median(times) * 1e6


ARENAS = "/dev/shm/bench-python-%d" % os.getpid()


def start_tensord(path, tmp):
    sock = os.path.join(tmp, "tensord.sock")
    arenas = ARENAS
    proc = subprocess.Popen([path, "--foreground", "--socket", sock, "--arena-dir", arenas,
                             "--log-level", "warn"])
    for _ in range(500):
        try:
            return proc, sock, libtensor.connect(sock)
        except libtensor.Error:
            time.sleep(0.01)
    proc.kill()
    raise SystemExit("bench_python: tensord did not come up")


def gets(tensord_path):
    tmp = tempfile.mkdtemp(prefix="bench-python.")
    proc, sock, client = start_tensord(tensord_path, tmp)
    ctx = mp.get_context("fork")
    cmds, replies, tensors = ctx.Queue(), ctx.Queue(), ctx.Queue()
    try:
        top = SIZES_MIB[-1] << 20
        arena = client.arena("bench", create=True, size=2 * top + (64 << 20))
        p = ctx.Process(target=consumer, args=(sock, cmds, replies, tensors))
        p.start()
        print("bench_python: a torch process gets a tensor another process published: from "
              "the start of its get to a torch tensor\n  over the data (median of %d, us; each "
              "peer's time over libtensor's)" % REPS)
        print("%9s %12s %12s %8s %12s %8s %12s %8s" %
              ("size", "libtensor", "torch.mp fd", "ratio", "from_file", "ratio",
               "torch.load", "ratio"))
        for mib in SIZES_MIB:
            n = (mib << 20) // 4
            src = torch.arange(n, dtype=torch.float32)
            name = "w%d" % mib
            arena.publish(name, src, seal=True)
            shared = src.clone().share_memory_()
            raw = "/dev/shm/bench-python-%d-%d.bin" % (os.getpid(), mib)
            pt = "/dev/shm/bench-python-%d-%d.pt" % (os.getpid(), mib)
            src.numpy().tofile(raw)
            torch.save(src, pt)
            del src
            lt = timed(cmds, replies, ("libtensor", name, n))
            fd = timed(cmds, replies, ("mp", None, n), tensors, shared)
            ff = timed(cmds, replies, ("from_file", raw, n))
            ld = timed(cmds, replies, ("load", pt, n))
            print("%5d MiB %12.1f %12.1f %7.1fx %12.1f %7.1fx %12.1f %7.1fx" %
                  (mib, lt, fd, fd / lt, ff, ff / lt, ld, ld / lt), flush=True)
            if mib == SIZES_MIB[0]:
                cmds.put(("warm", (name, raw), n))
                warm = replies.get()[0]
            del shared
            os.unlink(raw)
            os.unlink(pt)
            arena.unpublish(name)
        print("  the same get of %d MiB repeated back to back in the consumer (warm caches): "
              "libtensor %.1f us, torch.from_file %.1f us" % (SIZES_MIB[0], warm[0], warm[1]))
        print("  (libtensor's get of a sealed tensor is a lookup and a private copy-on-write "
              "mapping for torch, which has no read-only tensors)")
        cmds.put(None)
        p.join()
        arena.close()
        client.destroy_arena("bench")
    finally:
        client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ARENAS, ignore_errors=True)  # tensord keeps its directory


def roundtrips():
    """Round trips of a 1000-element float32 tensor through DLPack, each way the protocol
    offers, and libtensor's own share of them (its export; its import of a capsule)."""
    n, reps = 1000, 20000
    x = libtensor.zeros(n)
    y = torch.zeros(n)

    def median_ns(fn):
        runs = []
        for _ in range(7):
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                fn()
            runs.append((time.perf_counter_ns() - t0) / reps)
        return statistics.median(runs)

    back = libtensor.from_dlpack(torch.from_dlpack(x))
    assert back.data_ptr() == x.data_ptr(), "the round trip copied"
    ours = median_ns(lambda: libtensor.from_dlpack(torch.from_dlpack(x)))
    theirs = median_ns(lambda: torch.from_dlpack(y))
    capsules = median_ns(lambda: tdl.from_dlpack(tdl.to_dlpack(y)))
    export = median_ns(lambda: x.__dlpack__())
    to_capsule = median_ns(lambda: tdl.to_dlpack(y))
    imp = median_ns(lambda: libtensor.from_dlpack(tdl.to_dlpack(y))) - to_capsule
    print("bench_python: DLPack round trips of a 1000-element float32 tensor (median ns)")
    print("  %-66s %6.0f ns" % ("libtensor -> torch -> libtensor (torch.from_dlpack, "
                                "libtensor.from_dlpack)", ours))
    print("  %-66s %6.0f ns   libtensor's over it: %.2fx" %
          ("torch -> torch through the same protocol (torch.from_dlpack(t))", theirs,
           ours / theirs))
    print("  %-66s %6.0f ns   libtensor's over it: %.2fx" %
          ("torch -> torch through capsules (from_dlpack(to_dlpack(t)))", capsules,
           ours / capsules))
    print("  libtensor's own share: Tensor.__dlpack__() %.0f ns, libtensor.from_dlpack of a "
          "capsule %.0f ns; the rest is torch's" % (export, imp))


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: bench_python.py TENSORD_PATH")
    torch.set_num_threads(1)
    gets(sys.argv[1])
    roundtrips()


if __name__ == "__main__":
    main()
