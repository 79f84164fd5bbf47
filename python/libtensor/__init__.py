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
* ``connect(socket=None)`` -> ``Client`` -> ``Client.arena(name)`` -> ``Arena``: publish
  and look up named tensors in shared memory through tensord.
* ``Error`` and its subclasses, which also derive from the built-in exception Python users
  expect (``NotFoundError`` is a ``KeyError``, ``InvalidArgumentError`` a ``ValueError``...).
"""
from . import _C
from ._C import *  # noqa: F401,F403  (Tensor, Client, Arena, Error..., dtype names)
from ._C import Tensor, Client, Arena, Error, from_dlpack, tensor, connect  # noqa: F401
from . import ops  # noqa: F401

#: The dtype names, also module constants (``libtensor.float32 == 'float32'``).
dtypes = ('bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16',
          'float32', 'float64')


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


__all__ = ['Tensor', 'Client', 'Arena', 'Error', 'from_dlpack', 'tensor', 'connect', 'ops',
           'empty', 'zeros', 'ones', 'dtypes'] + list(dtypes) + \
    [n for n in dir(_C) if n.endswith('Error') and n != 'Error']
