# SPDX-License-Identifier: MIT
"""DLPack with PyTorch 1.13 and NumPy 1.24: every dtype and odd strides, zero copy both ways,
both ABIs, and the errors."""
import gc

import numpy as np
import pytest
import torch

import libtensor as lt

DTYPES = ['uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32',
          'float64']


def layouts(x):
    """The layouts each dtype is exchanged in: contiguous, transposed, sliced with a step,
    0-dim, empty."""
    return {
        'contiguous': x,
        'transposed': x.t(),
        'stepped': x[:, ::2],
        'zero-dim': x[1, 1],
        'empty': x[:0],
    }


def base(dtype):
    return (torch.arange(24) % 7).reshape(4, 6).to(getattr(torch, dtype))


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('layout', ['contiguous', 'transposed', 'stepped', 'zero-dim', 'empty'])
def test_torch_roundtrip(dtype, layout):
    x = layouts(base(dtype))[layout]
    t = lt.from_dlpack(x)                         # torch's __dlpack__ (legacy)
    assert t.shape == tuple(x.shape) and t.dtype == dtype
    t2 = lt.from_dlpack(torch.utils.dlpack.to_dlpack(x))  # a raw capsule
    y = torch.from_dlpack(t)                       # our legacy export
    assert y.dtype == x.dtype and y.shape == x.shape
    if x.numel():   # (torch exports an empty tensor's strides as it likes)
        assert t.strides == tuple(x.stride()) and y.stride() == x.stride()
        assert t.data_ptr() == x.data_ptr() == t2.data_ptr() == y.data_ptr()
    assert torch.equal(y, x)
    z = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    assert torch.equal(z, x)
    if x.numel():
        # A write on one side is seen on the other.
        idx = (0,) * x.dim()
        x[idx] = 5
        assert t.tolist() == x.tolist() if x.dim() else t.item() == x.item()
        y[idx] = 3
        assert x[idx].item() == 3


@pytest.mark.parametrize('dtype', [d for d in DTYPES if d != 'bfloat16'] + ['bool'])
@pytest.mark.parametrize('layout', ['contiguous', 'transposed', 'stepped', 'zero-dim', 'empty'])
def test_numpy_roundtrip(dtype, layout):
    a = layouts(torch.from_numpy((np.arange(24) % 7).reshape(4, 6).astype(dtype)))[layout]
    a = a.numpy()
    if dtype == 'bool':
        # NumPy 1.24 exports no bool through DLPack: the buffer protocol instead.
        t = lt.tensor(a)
        b = np.asarray(t)
        assert b.dtype == np.bool_ and b.tolist() == a.tolist()
        return
    t = lt.from_dlpack(a)
    if a.size:
        assert t.data_ptr() == a.__array_interface__['data'][0]
        assert t.strides == tuple(s // a.itemsize for s in a.strides)
    b = np.from_dlpack(t)              # (NumPy 1.24 makes DLPack arrays read-only)
    assert np.array_equal(a, b)
    c = np.asarray(t)
    assert np.array_equal(a, c) and c.flags.writeable
    if a.size:
        assert b.__array_interface__['data'][0] == t.data_ptr() == c.ctypes.data
        idx = (0,) * a.ndim
        c[idx] = 6
        assert a[idx] == 6 and b[idx] == 6


def test_versioned_capsule():
    t = lt.tensor([1.0, 2.0])
    cap = t.__dlpack__(max_version=(1, 0))
    assert 'dltensor_versioned' in repr(cap)
    u = lt.from_dlpack(cap)                         # consumed: renamed
    assert 'used_dltensor_versioned' in repr(cap) and u.data_ptr() == t.data_ptr()
    with pytest.raises(TypeError):
        lt.from_dlpack(cap)                         # not twice
    legacy = t.__dlpack__(max_version=(0, 8))
    assert '"dltensor"' in repr(legacy)
    del legacy                                      # unconsumed: the deleter runs
    gc.collect()
    copied = lt.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert copied.data_ptr() != t.data_ptr() and copied.tolist() == [1.0, 2.0]
    assert t.__dlpack_device__() == (1, 0)


def test_dlpack_errors():
    t = lt.tensor([1.0])
    with pytest.raises(ValueError, match='stream'):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match='__dlpack__'):
        lt.from_dlpack([1, 2])
    with pytest.raises(TypeError):
        lt.from_dlpack(object())
    with pytest.raises(TypeError, match='complex'):
        lt.from_dlpack(np.zeros(3, np.complex64))
    with pytest.raises(lt.NotSupportedError):
        lt.from_dlpack(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match='negative stride'):
        lt.from_dlpack(np.arange(5.0)[::-1])
    try:
        lt.from_dlpack(np.arange(5.0)[::-1])
    except lt.Error as e:
        assert e.code < 0 and 'negative stride' in str(e)

    class OtherDevice:
        def __dlpack_device__(self):
            return (7, 0)              # Vulkan

        def __dlpack__(self, stream=None):
            return torch.utils.dlpack.to_dlpack(torch.zeros(1))
    # The producer claims a device it does not deliver; what comes is taken by its DLTensor.
    assert lt.from_dlpack(OtherDevice()).shape == (1,)


def test_capsule_lifetime():
    """The producer's memory lives as long as the consumer's tensor, and an unconsumed capsule
    releases its reference."""
    t = lt.ops.arange(0, 1000, dtype='float64')
    y = torch.from_dlpack(t)
    ptr = t.data_ptr()
    del t
    gc.collect()
    assert y.data_ptr() == ptr and y[999].item() == 999.0
    x = torch.arange(10.0)
    u = lt.from_dlpack(x)
    del x
    gc.collect()
    assert u.tolist() == [float(i) for i in range(10)]


# ---- a foreign producer of a read-only tensor (DLPack 1.x, made with ctypes) -----------------
import ctypes as C   # noqa: E402


class DLDevice(C.Structure):
    _fields_ = [('device_type', C.c_int32), ('device_id', C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [('code', C.c_uint8), ('bits', C.c_uint8), ('lanes', C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [('data', C.c_void_p), ('device', DLDevice), ('ndim', C.c_int32),
                ('dtype', DLDataType), ('shape', C.POINTER(C.c_int64)),
                ('strides', C.POINTER(C.c_int64)), ('byte_offset', C.c_uint64)]


class DLManagedTensorVersioned(C.Structure):
    pass


DELETER = C.CFUNCTYPE(None, C.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [('major', C.c_uint32), ('minor', C.c_uint32),
                                     ('manager_ctx', C.c_void_p), ('deleter', DELETER),
                                     ('flags', C.c_uint64), ('dl_tensor', DLTensor)]
PyCapsule_New = C.pythonapi.PyCapsule_New
PyCapsule_New.restype = C.py_object
PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]
VERSIONED = b'dltensor_versioned'


def foreign_readonly(a, deleted):
    """A versioned capsule over NumPy array @a flagged READ_ONLY; @deleted gets True when the
    consumer calls the deleter."""
    shape = (C.c_int64 * a.ndim)(*a.shape)
    m = DLManagedTensorVersioned()
    keep = [a, shape, m]

    def deleter(ptr):
        deleted.append(True)
        keep.clear()
    cb = DELETER(deleter)
    keep.append(cb)
    m.major, m.minor, m.deleter, m.flags = 1, 0, cb, 1        # DLPACK_FLAG_BITMASK_READ_ONLY
    m.dl_tensor = DLTensor(a.ctypes.data, DLDevice(1, 0), a.ndim, DLDataType(2, 32, 1), shape,
                           None, 0)
    foreign_readonly.alive.append(keep)
    return PyCapsule_New(C.addressof(m), VERSIONED, None)


foreign_readonly.alive = []


def test_foreign_readonly():
    deleted = []
    a = np.arange(4, dtype=np.float32)
    t = lt.from_dlpack(foreign_readonly(a, deleted))
    assert t.is_readonly and t.data_ptr() == a.ctypes.data and t.tolist() == [0, 1, 2, 3]
    n = np.asarray(t)
    assert not n.flags.writeable
    with pytest.raises(ValueError):
        n[0] = 1
    with pytest.raises(BufferError, match='max_version'):
        t.__dlpack__()                    # read-only, not in an arena: no private view
    with pytest.raises(BufferError):
        torch.from_dlpack(t)
    v = lt.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert v.is_readonly and v.data_ptr() == t.data_ptr()
    c = torch.utils.dlpack.from_dlpack(t.__dlpack__(copy=True))   # a copy is the way out
    c += 1
    assert a.tolist() == [0, 1, 2, 3]
    del t, v, n
    gc.collect()
    assert deleted == [True]
