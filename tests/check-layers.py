#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering, checked at link level (DESIGN.md section 3: arrows point down).

Every object the build links into libtensor, its CPU kernels, the CUDA backend, tensord and
tensorctl is read with nm: each undefined symbol is mapped to the folder whose objects define
it, and the reference must point down the floors

    base  <-  numa  <-  shm  <-  libtensor  <-  tensord (the client, the daemon), cuda

(libtensor/kernels counts as libtensor). It fails on any reference that points up or across
(core->cuda, shm->cuda, shm->core, numa->core, numa->shm, ...) and on any circle of references
that spans two folders, naming the objects and symbols.

The backend library links no libtensor: its core_shim.c defines the core functions it calls
and forwards them through a table. So a reference from cuda/ resolves first to cuda's own
objects, and the core's references never resolve to the shim.

Inputs (environment, set by make check): TN_LAYER_OBJECTS, the libtool objects (.lo) and plain
objects (.o) to read, relative to top_builddir; NM.
"""
import collections
import os
import subprocess
import sys

ORDER = ["base", "numa", "shm", "libtensor", "tensord", "cuda"]
ALLOWED = {
    "base": set(),
    "numa": {"base"},
    "shm": {"base", "numa"},
    "libtensor": {"base", "numa", "shm"},
    "tensord": {"base", "numa", "shm", "libtensor"},
    "cuda": {"base", "numa", "shm", "libtensor", "tensord"},
}


def folder(path):
    top = path.split("/", 1)[0]
    return top if top in ALLOWED else None


def object_file(builddir, name):
    """The PIC object behind a libtool .lo (its pic_object line), or the .o itself."""
    path = os.path.join(builddir, name)
    if not name.endswith(".lo"):
        return path
    with open(path) as f:
        for line in f:
            if line.startswith("pic_object="):
                pic = line.split("=", 1)[1].strip().strip("'")
                return os.path.join(os.path.dirname(path), pic)
    return None


def main():
    builddir = os.environ.get("top_builddir", ".")
    nm = os.environ.get("NM", "nm").split()
    names = os.environ.get("TN_LAYER_OBJECTS", "").split()
    if not names:
        print("check-layers: TN_LAYER_OBJECTS is empty")
        return 1
    defs = {"core": {}, "cuda": {}}  # symbol -> object, for the core's side and the backend's
    undefs = {}
    for name in sorted(set(names)):
        fold = folder(name)
        obj = object_file(builddir, name)
        if fold is None or obj is None or not os.path.exists(obj):
            print("check-layers: %s: no object (%s)" % (name, obj))
            return 1
        out = subprocess.run(nm + [obj], capture_output=True, text=True, check=True).stdout
        side = "cuda" if fold == "cuda" else "core"
        refs = []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                refs.append(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRCVGS":
                defs[side].setdefault(parts[2], name)
        undefs[name] = (fold, refs)

    edges = collections.defaultdict(list)  # (from, to) -> ["obj -> sym", ...]
    for name, (fold, refs) in undefs.items():
        for sym in refs:
            if fold == "cuda" and sym in defs["cuda"]:
                continue
            where = defs["core"].get(sym)
            if where is None and fold != "cuda":
                where = defs["cuda"].get(sym)
            if where is None:
                continue  # libc, libm, cudart, ...
            to = folder(where)
            if to != fold:
                edges[(fold, to)].append("%s -> %s" % (name, sym))

    bad = 0
    for (a, b), refs in sorted(edges.items()):
        if b not in ALLOWED[a]:
            bad += len(refs)
            print("check-layers: %s calls up into %s (%d references):" % (a, b, len(refs)))
            for r in sorted(refs):
                print("    " + r)

    # Circles: a folder that reaches itself through the graph of references.
    graph = collections.defaultdict(set)
    for (a, b) in edges:
        graph[a].add(b)
    for start in ORDER:
        seen, stack = set(), [start]
        while stack:
            n = stack.pop()
            for m in graph[n]:
                if m == start:
                    bad += 1
                    print("check-layers: a circle of references through %s and %s" % (start, n))
                elif m not in seen:
                    seen.add(m)
                    stack.append(m)

    nrefs = sum(len(r) for r in edges.values())
    if bad:
        print("check-layers: %d forbidden references" % bad)
        return 1
    summary = ", ".join("%s->%s %d" % (a, b, len(r)) for (a, b), r in sorted(edges.items()))
    print("check-layers: %d objects, %d references across folders, all downward (%s)"
          % (len(undefs), nrefs, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
