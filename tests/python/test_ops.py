# SPDX-License-Identifier: MIT
"""Operators by name (libtensor.ops), compared with torch."""
import numpy as np
import pytest
import torch

import libtensor as lt


def T(x):
    """torch tensor of a libtensor result (zero copy)."""
    return torch.from_dlpack(x)


def test_every_operator_has_a_function():
    groups = lt._C._op_groups()
    assert len(groups) > 50
    for name, schemas in groups:
        fn = getattr(lt.ops, name)
        assert callable(fn) and fn.__name__ == name
        for s in schemas:
            assert s in fn.__doc__
    assert 'aten::add.Tensor' in lt.ops.add.__doc__ and 'aten::add.Scalar' in lt.ops.add.__doc__


def test_add_alpha_and_overloads():
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.full((2, 3), 0.5)
    assert torch.equal(T(lt.ops.add(a, b, alpha=2)), torch.add(a, b, alpha=2))
    assert torch.equal(T(lt.ops.add(a, 2.5)), torch.add(a, 2.5))          # add.Scalar
    assert T(lt.ops.add(a, 2.5)).dtype == torch.float32
    assert torch.equal(T(lt.ops.add(a, 3, 2)), a + 6)                     # alpha positional
    x = lt.from_dlpack(a)
    assert torch.equal(T(x.add(b, alpha=-1)), a - b)                      # as a method
    assert torch.equal(T(lt.ops.mul(a, np.full((2, 3), 2, np.float32))), a * 2)
    assert torch.equal(T(lt.ops.sub(a, [1.0, 2.0, 3.0])), a - torch.tensor([1.0, 2.0, 3.0]))


def test_sum_variants():
    a = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    assert T(lt.ops.sum(a)).item() == a.sum().item()
    assert torch.equal(T(lt.ops.sum(a, 1)), a.sum(1))
    assert torch.equal(T(lt.ops.sum(a, dim=[0, 2], keepdim=True)), a.sum(dim=[0, 2], keepdim=True))
    r = lt.ops.sum(a, dim=1, dtype='float64')
    assert r.dtype == 'float64' and torch.equal(T(r), a.sum(1, dtype=torch.float64))
    r = lt.ops.sum(torch.ones(3, dtype=torch.int32), dtype=torch.int64)
    assert r.dtype == 'int64' and r.item() == 3
    i = lt.ops.sum(lt.tensor([[1, 2], [3, 4]]), -1)
    assert i.dtype == 'int64' and i.tolist() == [3, 7]


def test_out_and_inplace_identity():
    a = lt.tensor([1.0, 2.0, 3.0])
    b = lt.tensor([10.0, 20.0, 30.0])
    out = lt.ops.empty([3])
    r = lt.ops.add(a, b, alpha=2, out=out)
    assert r is out and out.tolist() == [21.0, 42.0, 63.0]
    r = lt.ops.add_(a, 1)
    assert r is a and a.tolist() == [2.0, 3.0, 4.0]
    t = torch.zeros(3)
    lt.ops.add(a, b, out=t)                 # out= a torch tensor: written in place
    assert t.tolist() == [12.0, 23.0, 34.0]


def test_factories_and_views():
    assert lt.ops.zeros([2, 3], dtype='int16').tolist() == [[0] * 3] * 2
    assert lt.ops.empty(2, 3).shape == (2, 3)                # int[] as varargs
    assert lt.ops.full([2], 7, dtype='int32').tolist() == [7, 7]
    x = lt.ops.arange(0, 12)
    v = lt.ops.view(x, 3, 4)
    assert v.shape == (3, 4) and v.data_ptr() == x.data_ptr()
    assert lt.ops.view(x, [2, 6]).shape == (2, 6)
    parts = lt.ops.unbind(v, 0)
    assert isinstance(parts, list) and [p.tolist() for p in parts] == torch.arange(12).reshape(3, 4).tolist()
    assert lt.ops.empty([2], device='cpu').device == 'cpu'
    assert lt.ops.empty([2], device=torch.device('cpu')).device == 'cpu'
    c = lt.ops.contiguous(lt.ops.transpose(v, 0, 1), memory_format=torch.contiguous_format)
    assert c.is_contiguous and c.tolist() == torch.arange(12).reshape(3, 4).t().tolist()


def test_unary_and_binary_match_torch():
    a = torch.linspace(-3, 3, 13)
    b = torch.linspace(1, 2, 13)
    for name in ('neg', 'abs', 'exp', 'sin', 'tanh', 'relu', 'sigmoid'):
        if hasattr(lt.ops, name):
            assert torch.allclose(T(getattr(lt.ops, name)(a)), getattr(torch, name)(a)), name
    for name in ('mul', 'div', 'maximum', 'minimum'):
        if hasattr(lt.ops, name):
            assert torch.allclose(T(getattr(lt.ops, name)(a, b)), getattr(torch, name)(a, b)), name


def test_bad_arguments():
    a = lt.tensor([1.0])
    with pytest.raises(TypeError, match='invalid combination of arguments'):
        lt.ops.add(a, 'x')
    with pytest.raises(TypeError, match='unexpected keyword'):
        lt.ops.add(a, a, beta=2)
    with pytest.raises(TypeError, match="missing required argument"):
        lt.ops.add(a)
    with pytest.raises(TypeError):
        lt.ops.add(object(), a)
    with pytest.raises(lt.Error) as e:
        lt.ops.add(lt.ops.zeros([2]), lt.ops.zeros([3]))
    assert e.value.code < 0 and 'size' in str(e.value)
    with pytest.raises(IndexError):
        lt.ops.sum(lt.ops.zeros([2]), 5)
    with pytest.raises(AttributeError):
        lt.ops.no_such_operator
    with pytest.raises(AttributeError):
        a.no_such_method


def test_python_operators_and_indexing():
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    t = lt.from_dlpack(x)
    for k in [1, (1, 2), (slice(None), 1), (Ellipsis, 1), (0, slice(1, None, 2)),
              (slice(None, None, 2),), -1, (1, -1, slice(-3, None))]:
        v = t[k]
        assert v.tolist() == x[k].tolist(), k
        if v.numel():
            assert v.data_ptr() == x[k].data_ptr()          # a view, not a copy
    assert torch.equal(T(t + 1), x + 1) and torch.equal(T(2 * t), 2 * x)
    assert torch.equal(T(t - t), x - x) and torch.equal(T(1 - t), 1 - x)
    assert torch.equal(T(t / 2), x / 2) and torch.equal(T(t ** 2), x ** 2)
    assert torch.equal(T(t % 3), x % 3) and torch.equal(T(-t), -x)
    assert (2 * t).dtype == 'float32' and (t + x).dtype == 'float32'
    with pytest.raises(TypeError):
        t + 'a'
    with pytest.raises(TypeError):
        t['a']
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]
    with pytest.raises(ValueError):
        t[::-1]
