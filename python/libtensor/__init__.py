# SPDX-License-Identifier: MIT
"""libtensor: tensors in shared memory, for Python.

The package wraps the libtensor C library (see libtensor-python(7)):

* ``Tensor`` -- a typed, strided tensor; ``numpy.asarray(t)``, ``memoryview(t)`` and
  ``torch.from_dlpack(t)`` view it without copying.
* ``from_dlpack(x)`` -- a Tensor over the memory of a torch tensor, a NumPy array or any
  DLPack producer, without copying.
* ``ops`` -- every operator of libtensor's op table by name (``ops.add(a, b, alpha=2)``),
  generated from the registry at import.
* ``tensor(data, dtype=None)``, ``empty(shape, dtype)``, ``zeros(shape, dtype)`` -- factories.
* ``Generator()``, ``manual_seed(seed)``, ``default_generator`` -- random generators giving
  torch's numbers for the same seed (``ops.randn(3, generator=g)``).
* ``connect(socket=None)`` -> ``Client`` -> ``Client.arena(name)`` -> ``Arena``: publish
  and look up named tensors in shared memory through tensord.
* ``Error`` and its subclasses, which also derive from the built-in exception Python users
  expect (``NotFoundError`` is a ``KeyError``, ``InvalidArgumentError`` a ``ValueError``...).
"""
from . import _C
from ._C import *  # noqa: F401,F403  (Tensor, Client, Arena, Error..., dtype names)
from ._C import Tensor, Client, Arena, Error, from_dlpack, tensor, connect  # noqa: F401
from ._C import Generator, default_generator  # noqa: F401
from . import ops  # noqa: F401

#: The dtype names, also module constants (``libtensor.float32 == 'float32'``).
dtypes = ('bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16',
          'float32', 'float64')


def manual_seed(seed):
    """manual_seed(seed) -> Generator: seed the default generator (torch.manual_seed)."""
    return default_generator.manual_seed(seed)


def seed():
    """seed() -> int: seed the default generator from the kernel's random source."""
    return default_generator.seed()


def initial_seed():
    """initial_seed() -> int: the default generator's seed."""
    return default_generator.initial_seed()


def empty(*shape, dtype='float32', device='cpu'):
    """empty(*shape, dtype='float32', device='cpu') -> Tensor: an uninitialised tensor
    (``empty(2, 3)`` or ``empty((2, 3))``), through ``ops.empty``."""
    return ops.empty(*shape, dtype=dtype, device=device)


def zeros(*shape, dtype='float32', device='cpu'):
    """zeros(*shape, dtype='float32', device='cpu') -> Tensor of zeros, through ``ops.zeros``."""
    return ops.zeros(*shape, dtype=dtype, device=device)


def ones(*shape, dtype='float32', device='cpu'):
    """ones(*shape, dtype='float32', device='cpu') -> Tensor of ones, through ``ops.ones``."""
    return ops.ones(*shape, dtype=dtype, device=device)


def _index(t, key):
    """t[key] for ints, slices with a positive step and one Ellipsis: a view made of
    ops.select and ops.slice (no copy), as PyTorch's basic indexing."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError('an index can only have a single ellipsis')
    explicit = sum(k is not Ellipsis and k is not None for k in key)
    if explicit > t.ndim:
        raise IndexError('too many indices for tensor of dimension %d' % t.ndim)
    dim = 0
    for k in key:
        if k is Ellipsis:
            dim += t.ndim - explicit
        elif isinstance(k, slice):
            start = 0 if k.start is None else k.start
            stop = (1 << 63) - 1 if k.stop is None else k.stop
            step = 1 if k.step is None else k.step
            if step <= 0:
                raise ValueError('step must be greater than zero')
            t = ops.slice(t, dim, start, stop, step)
            dim += 1
        elif isinstance(k, int) or hasattr(k, '__index__'):
            t = ops.select(t, dim, k)
        else:
            raise TypeError('only integers, slices (`:`) and ellipsis (`...`) are valid '
                            'indices, not %s' % type(k).__name__)
    return t


__all__ = ['Tensor', 'Client', 'Arena', 'Error', 'from_dlpack', 'tensor', 'connect', 'ops',
           'Generator', 'default_generator', 'manual_seed', 'seed', 'initial_seed',
           'empty', 'zeros', 'ones', 'dtypes'] + list(dtypes) + \
    [n for n in dir(_C) if n.endswith('Error') and n != 'Error']
