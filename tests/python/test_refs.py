# SPDX-License-Identifier: MIT
"""Reference counting and leaks: no reference or memory grows across repeated calls, on the
success and the error paths, and a cycle through a Tensor is collected."""
import gc
import sys
import tracemalloc
import weakref

import numpy as np
import pytest
import torch

import libtensor as lt


def growth(fn, n=300):
    """Bytes the Python allocator keeps after @n more calls of @fn (after a warm-up)."""
    for _ in range(50):
        fn()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(n):
        fn()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before


def swallow(fn, exc):
    def run():
        try:
            fn()
        except exc:
            pass
    return run


def test_refcounts_stable():
    t = lt.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.arange(4.0)
    x = torch.arange(4.0)
    before = (sys.getrefcount(t), sys.getrefcount(a), sys.getrefcount(x))
    for _ in range(100):
        t.shape, t.strides, t.dtype, repr(t), t.tolist(), t.numel()
        memoryview(t).release()
        np.asarray(t)
        torch.from_dlpack(t)
        lt.from_dlpack(a)
        lt.from_dlpack(x)
        lt.ops.add(t, t, alpha=2)
        lt.ops.add(t, 1)
        lt.ops.add_(t, 0)
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
        try:
            lt.ops.add(t, 'x')
        except TypeError:
            pass
    gc.collect()
    assert (sys.getrefcount(t), sys.getrefcount(a), sys.getrefcount(x)) == before


def test_no_growth_exports_and_ops():
    t = lt.tensor(list(range(100)), dtype='float32')
    x = torch.arange(100.0)
    assert growth(lambda: torch.from_dlpack(t)) < 20000
    assert growth(lambda: lt.from_dlpack(x)) < 20000
    assert growth(lambda: t.__dlpack__(max_version=(1, 0))) < 20000
    assert growth(lambda: lt.ops.sum(t, 0, keepdim=True)) < 20000
    assert growth(swallow(lambda: lt.from_dlpack(np.zeros(3, complex)), TypeError)) < 20000
    assert growth(swallow(lambda: lt.ops.add(t, lt.ops.zeros([3])), lt.Error)) < 20000


def test_no_growth_lookups(arena):
    arena.publish('r/w', np.arange(256, dtype=np.float32))
    blocks = arena.stat()['blocks']
    assert growth(lambda: np.asarray(arena.lookup('r/w'))) < 20000
    assert growth(swallow(lambda: arena.lookup('r/missing'), KeyError)) < 20000
    assert growth(lambda: arena.names()) < 20000
    gc.collect()
    assert arena.stat()['blocks'] == blocks


def test_cycle_collected():
    class Holder:
        pass
    h = Holder()
    h.t = lt.tensor([1.0])
    h.cap = h.t.__dlpack__()
    h.self = h
    ref = weakref.ref(h.t)
    del h
    gc.collect()
    assert ref() is None
