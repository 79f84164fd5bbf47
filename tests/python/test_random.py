# SPDX-License-Identifier: MIT
"""libtensor.Generator and the random operators from Python, against torch's generator in the
same process: the same seeds give the same tensors, and states move between the two."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import libtensor as lt


def T(x):
    """torch tensor of a libtensor result (zero copy)."""
    return torch.from_dlpack(x)


def test_generator_matches_torch():
    g = lt.Generator().manual_seed(2026)
    tg = torch.Generator().manual_seed(2026)
    assert g.initial_seed() == tg.initial_seed() == 2026
    assert torch.equal(T(lt.ops.rand(4, 5, generator=g)), torch.rand(4, 5, generator=tg))
    assert torch.equal(T(lt.ops.randn(33, generator=g, dtype='float64')),
                       torch.randn(33, generator=tg, dtype=torch.float64))
    assert torch.equal(T(lt.ops.randint(-3, 9, (2, 7), generator=g)),
                       torch.randint(-3, 9, (2, 7), generator=tg))
    assert torch.equal(T(lt.ops.randint(5, (6,), generator=g)),
                       torch.randint(5, (6,), generator=tg))
    assert torch.equal(T(lt.ops.randperm(40, generator=g)), torch.randperm(40, generator=tg))
    # Probabilities from a third stream (drawn from tg they would equal g's next draws).
    p = torch.rand(3, 8, generator=torch.Generator().manual_seed(9))
    q = p.clone()
    assert torch.equal(T(lt.ops.bernoulli(p, generator=g)), torch.bernoulli(q, generator=tg))
    # In-place fills on a transposed tensor: torch's order of draws.
    a = torch.empty(6, 4).t()
    b = torch.empty(6, 4).t()
    lt.ops.uniform_(lt.from_dlpack(a), -2.0, 3.0, generator=g)
    b.uniform_(-2.0, 3.0, generator=tg)
    assert torch.equal(a, b)
    lt.ops.normal_(lt.from_dlpack(a), 1.0, 0.5, generator=g)
    b.normal_(1.0, 0.5, generator=tg)
    assert torch.equal(a, b)
    # Same state at the end.
    assert torch.equal(T(g.get_state()), tg.get_state())


def test_default_generator_and_dropout():
    lt.manual_seed(11)
    torch.manual_seed(11)
    assert lt.initial_seed() == 11
    x = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    assert torch.equal(T(lt.ops.dropout(x, 0.25, True)),
                       torch.nn.functional.dropout(x, 0.25, training=True))
    assert torch.equal(T(lt.ops.rand(7)), torch.rand(7))
    assert torch.equal(T(lt.ops.randn_like(x)), torch.randn_like(x))
    # Not training: the input itself.
    y = lt.from_dlpack(x)
    assert T(lt.ops.dropout(y, 0.5, False)).data_ptr() == x.data_ptr()
    s = lt.seed()
    assert lt.initial_seed() == s
    assert isinstance(lt.default_generator, lt.Generator)
    assert lt.default_generator.initial_seed() == s


def test_state_round_trip_with_torch():
    tg = torch.Generator().manual_seed(5)
    torch.randn(3, dtype=torch.float64, generator=tg)  # a cached normal sample in the state
    g = lt.Generator().set_state(tg.get_state())  # torch's bytes, through DLPack
    assert torch.equal(T(lt.ops.randn(5, dtype='float64', generator=g)),
                       torch.randn(5, dtype=torch.float64, generator=tg))
    tg2 = torch.Generator()
    tg2.set_state(T(g.get_state()).clone())  # and back into torch
    assert torch.equal(torch.rand(9, generator=tg2), T(lt.ops.rand(9, generator=g)))


def test_negative_and_large_seeds():
    for seed in [-1, -(2**63), 2**64 - 1, 2**32 + 5]:
        g = lt.Generator().manual_seed(seed)
        tg = torch.Generator().manual_seed(seed)
        assert g.initial_seed() == tg.initial_seed()
        assert torch.equal(T(lt.ops.rand(8, generator=g)), torch.rand(8, generator=tg))
    with pytest.raises(OverflowError):
        lt.Generator().manual_seed(2**64)
    with pytest.raises(TypeError):
        lt.Generator().manual_seed(1.5)


def test_errors():
    g = lt.Generator()
    with pytest.raises(lt.InvalidArgumentError, match=r"from=2 > to=1"):
        lt.ops.uniform_(lt.ops.empty(3), 2.0, 1.0, generator=g)
    with pytest.raises(lt.InvalidArgumentError, match="to - 1 is out of bounds for unsigned char"):
        lt.ops.randint(0, 300, (3,), dtype='uint8', generator=g)
    with pytest.raises(lt.InvalidArgumentError, match="RNG state must be a torch.ByteTensor"):
        g.set_state(lt.ops.zeros(5056))
    with pytest.raises(lt.InvalidArgumentError, match="Invalid mt19937 state"):
        g.set_state(lt.ops.zeros(5056, dtype='uint8'))
    with pytest.raises(TypeError):
        lt.ops.rand(3, generator=5)
    with pytest.raises(lt.Error):
        lt.Generator(device='cuda')


def test_processes_get_different_default_seeds():
    code = "import libtensor; print(libtensor.initial_seed())"
    env = dict(os.environ)
    seeds = {subprocess.run([sys.executable, '-c', code], env=env, check=True,
                            capture_output=True, text=True).stdout.strip() for _ in range(2)}
    assert len(seeds) == 2
