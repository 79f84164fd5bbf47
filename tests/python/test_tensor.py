# SPDX-License-Identifier: MIT
"""The Tensor type: attributes, printing against torch's, the buffer protocol."""
import numpy as np
import pytest
import torch

import libtensor as lt

DTYPES = ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16',
          'float32', 'float64']


def test_import_and_constants():
    assert lt.float32 == 'float32' and lt.bfloat16 == 'bfloat16'
    assert issubclass(lt.NotFoundError, KeyError) and issubclass(lt.NotFoundError, lt.Error)
    assert issubclass(lt.InvalidArgumentError, ValueError)
    assert issubclass(lt.NotSupportedError, TypeError)
    assert issubclass(lt.PermissionDeniedError, PermissionError)
    assert issubclass(lt.OutOfMemoryError, MemoryError)
    assert issubclass(lt.OutOfRangeError, IndexError)
    assert issubclass(lt.NoDaemonError, ConnectionRefusedError)
    assert issubclass(lt.ConnectionLostError, ConnectionError)
    assert issubclass(lt.ExistsError, FileExistsError)
    for obj in (lt.Tensor, lt.Arena, lt.Client, lt.Arena.lookup, lt.Arena.publish,
                lt.from_dlpack, lt.connect, lt.tensor, lt.ops.add, lt.Tensor.__dlpack__):
        assert obj.__doc__ and len(obj.__doc__) > 20, obj


def test_attributes():
    t = lt.tensor([[1.5, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.strides == (3, 1) and t.ndim == 2
    assert t.dtype == 'float32' and t.device == 'cpu' and t.numel() == 6 and len(t) == 2
    assert not t.is_readonly and t.is_contiguous and t.itemsize == 4 and t.nbytes == 24
    assert t.tolist() == [[1.5, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert lt.tensor(7).item() == 7 and lt.tensor(True).item() is True
    assert lt.tensor(2.5).shape == () and len(lt.tensor([])) == 0
    with pytest.raises(TypeError):
        len(lt.tensor(1))
    with pytest.raises(ValueError):
        lt.tensor([1, 2, 3]).item()
    tt = lt.ops.transpose(t, 0, 1)
    assert tt.shape == (3, 2) and tt.strides == (1, 3) and not tt.is_contiguous
    assert tt.data_ptr() == t.data_ptr()
    assert t.size(1) == 3 and t.stride(0) == 3 and t.size() == (2, 3)


@pytest.mark.parametrize('dtype', DTYPES)
def test_repr_matches_torch(dtype):
    x = torch.tensor([[0, 1, 2], [3, 4, 5]]).to(getattr(torch, dtype))
    ours = lt.tensor(x.tolist(), dtype=dtype)
    assert repr(ours) == repr(x)
    assert repr(lt.tensor(x.tolist()[0][1], dtype=dtype)) == repr(x[0][1])


def test_repr_summarised():
    x = torch.arange(2000, dtype=torch.float32)
    assert repr(lt.from_dlpack(x)) == repr(x)


@pytest.mark.parametrize('dtype', [d for d in DTYPES if d != 'bfloat16'])
def test_buffer_zero_copy(dtype):
    t = lt.ops.zeros([3, 4], dtype=dtype)
    a = np.asarray(t)
    assert a.dtype == np.dtype(dtype) and a.shape == (3, 4)
    assert a.ctypes.data == t.data_ptr() and a.flags.writeable
    a[1, 2] = 1
    assert t.tolist()[1][2] == 1
    m = memoryview(t)
    assert m.format == {'bool': '?', 'uint8': 'B', 'int8': 'b', 'int16': 'h', 'int32': 'i',
                        'int64': 'q', 'float16': 'e', 'float32': 'f', 'float64': 'd'}[dtype]
    assert m.shape == (3, 4) and m.strides == (4 * t.itemsize, t.itemsize) and not m.readonly
    assert np.shares_memory(t.numpy(), a)


def test_buffer_odd_strides():
    t = lt.ops.arange(0, 24, dtype='int32')
    v = lt.ops.slice(lt.ops.view(t, [4, 6]), 1, 0, 6, 2)      # every other column
    a = np.asarray(v)
    assert a.strides == (24, 8) and a.ctypes.data == v.data_ptr()
    assert a.tolist() == v.tolist()
    tr = lt.ops.permute(lt.ops.view(t, [2, 3, 4]), [2, 0, 1])
    assert np.asarray(tr).tolist() == np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1).tolist()
    assert np.asarray(lt.tensor(5)).shape == () and np.asarray(lt.tensor(5)) == 5
    e = np.asarray(lt.ops.empty([0, 3]))
    assert e.shape == (0, 3)
    assert memoryview(v).tobytes() == np.ascontiguousarray(a).tobytes()
    import ctypes
    with pytest.raises(BufferError, match='contiguous'):
        np.frombuffer(v, dtype=np.int32)
    with pytest.raises((BufferError, TypeError)):
        (ctypes.c_int32 * 12).from_buffer(v)         # a C-contiguous request
    assert not memoryview(v).c_contiguous and memoryview(t).c_contiguous
    assert len((ctypes.c_int32 * 24).from_buffer(t)) == 24
    assert bytes(memoryview(lt.ops.contiguous(v))) == np.ascontiguousarray(a).tobytes()


def test_bfloat16_has_no_buffer():
    t = lt.ops.zeros([2], dtype='bfloat16')
    with pytest.raises(BufferError, match='DLPack'):
        memoryview(t)
    assert torch.from_dlpack(t).dtype == torch.bfloat16


def test_buffer_keeps_tensor_alive():
    a = np.asarray(lt.ops.arange(0, 10, dtype='float64'))   # the tensor is only referenced by a
    b = a.copy()
    del b
    import gc
    gc.collect()
    assert a.tolist() == list(map(float, range(10)))


def test_tensor_factory():
    assert lt.tensor([[True, False]]).dtype == 'bool'
    assert lt.tensor([1, 2]).dtype == 'int64'
    assert lt.tensor([1, 2.5]).dtype == 'float32'
    assert lt.tensor([1, 2], dtype='float64').tolist() == [1.0, 2.0]
    assert lt.tensor([1, 2], dtype=torch.int16).dtype == 'int16'
    assert lt.tensor([1, 2], dtype=np.uint8).dtype == 'uint8'
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    c = lt.tensor(a)
    assert c.tolist() == a.tolist() and c.data_ptr() != a.ctypes.data   # a copy
    import array
    assert lt.tensor(array.array('d', [1, 2])).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        lt.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        lt.tensor(['a'])
    assert lt.empty(2, 3).shape == (2, 3) and lt.zeros((2, 3), dtype='int8').tolist() == [[0] * 3] * 2
    assert lt.ones(2, dtype=lt.float64).tolist() == [1.0, 1.0]
