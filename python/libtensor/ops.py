# SPDX-License-Identifier: MIT
"""Every operator of libtensor's op table, by name.

The functions are made at import from the registry (tn_op_foreach): one per base name, whose
overloads (``aten::add.Tensor``, ``aten::add.Scalar``, ``aten::add.out``...) are tried in
order as PyTorch's Python argument parser does; each function's ``__doc__`` lists its
schemas. Operators of namespaces other than ``aten`` are under ``ops.<namespace>.<name>``.
Tensor arguments take libtensor Tensors, torch tensors and NumPy arrays (through DLPack,
without copying), Python numbers and nested lists (copied).
"""
import keyword as _keyword
import types as _types

from . import _C


def _make(name, schemas):
    short = name.rsplit('::', 1)[-1]

    def op(*args, **kwargs):
        return _C._op_call(name, *args, **kwargs)
    op.__name__ = short
    op.__qualname__ = short
    op.__module__ = __name__
    op.__doc__ = '%s(...)\n\nOverloads, tried in order:\n\n%s' % (
        short, '\n'.join('    ' + s for s in schemas))
    return op


__all__ = []
for _name, _schemas in _C._op_groups():
    _fn = _make(_name, _schemas)
    if '::' in _name:
        _ns, _short = _name.split('::', 1)
        _sub = globals().get(_ns)
        if _sub is None:
            _sub = globals()[_ns] = _types.SimpleNamespace()
        setattr(_sub, _short, _fn)
    else:
        globals()[_name] = _fn
        if not _keyword.iskeyword(_name):
            __all__.append(_name)
del _name, _schemas, _fn
