# SPDX-License-Identifier: MIT
"""Client and Arena against a real tensord: Python producers and C consumers (tensorctl), C
producers (tensorctl load) and torch/NumPy consumers mapping zero-copy, sealed tensors, a
SIGKILLed consumer's holds, waits, and the errors."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import libtensor as lt
from conftest import run_python



def in_mapping(ptr, path):
    """Whether address @ptr lies in a mapping of file @path in this process."""
    with open('/proc/self/maps') as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip().split(' (deleted)')[0] == path:
                lo, hi = (int(x, 16) for x in parts[0].split('-'))
                if lo <= ptr < hi:
                    return True
    return False


def test_publish_lookup(arena):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = arena.publish('a/np', src)                      # copied in, sealed
    assert t.is_readonly and t.tolist() == src.tolist() and in_mapping(t.data_ptr(), arena.path)
    u = arena.lookup('a/np')
    assert u.tolist() == src.tolist() and u.is_readonly and in_mapping(u.data_ptr(), arena.path)
    arena.publish('a/torch', torch.ones(2, 2, dtype=torch.float64), seal=False)
    arena.publish('a/list', [[1, 2], [3, 4]])
    assert arena.names() == ['a/list', 'a/np', 'a/torch'] and arena.names('a/t') == ['a/torch']
    assert 'a/np' in arena and 'nope' not in arena
    assert arena['a/list'].tolist() == [[1, 2], [3, 4]]
    info = arena.info('a/torch')
    assert info['dtype'] == 'float64' and info['shape'] == (2, 2) and not info['sealed']
    # A tensor allocated in the arena is published as it is, without a copy.
    e = arena.empty([4], 'int32')
    np.asarray(e)[:] = [1, 2, 3, 4]
    p = arena.publish('a/direct', e, seal=False)
    assert p.data_ptr() == e.data_ptr() and arena.lookup('a/direct').data_ptr() == e.data_ptr()
    arena.seal('a/direct')
    assert arena.info('a/direct')['sealed']
    with pytest.raises(FileExistsError):
        arena.publish('a/np', src)
    arena.publish('a/torch', torch.zeros(1), replace=True)
    assert arena['a/torch'].tolist() == [0.0]
    arena.unpublish('a/torch')
    with pytest.raises(KeyError):
        arena.lookup('a/torch')
    with pytest.raises(lt.NotFoundError):
        arena['a/torch']
    st = arena.stat()
    assert st['names'] == 3 and st['used_bytes'] > 0
    assert st['spill'] == 0 and st['spilled_names'] == 0 and st['high_water'] > st['low_water']
    arena.publish('a/cache', torch.ones(4), seal=False, evictable=True)
    info = arena.info('a/cache')
    assert info['retention'] == 'cache' and info['location'] == 'memory'
    assert arena.info('a/np')['retention'] == 'pinned'
    arena.unpublish('a/cache')


def test_python_producer_c_consumer(tensord, arena):
    x = torch.arange(6, dtype=torch.int32).reshape(2, 3) * 7
    arena.publish('py/x', x)
    r = tensord.ctl('--json', 'show', arena.name, 'py/x')
    doc = json.loads(r.stdout)
    assert doc['dtype'] == 'int32' and doc['shape'] == [2, 3] and doc['sealed']
    assert doc['preview'] == repr(x)
    ls = tensord.ctl('ls', arena.name).stdout
    assert 'py/x' in ls and 'int32' in ls


CONSUMER = r'''
import sys, numpy as np, torch, libtensor as lt
sys.path.insert(0, sys.argv[3])
from test_arena import in_mapping
c = lt.connect(sys.argv[1]); a = c.arena(sys.argv[2])
t = a.lookup('c/w')
n = np.asarray(t)
ok = [in_mapping(t.data_ptr(), a.path), in_mapping(n.ctypes.data, a.path), not n.flags.writeable]
try:
    n[0, 0] = 1
    ok.append(False)
except ValueError:
    ok.append(True)
u = a.lookup('c/u')
y = torch.from_dlpack(u)
ok += [in_mapping(y.data_ptr(), a.path), y.tolist() == np.asarray(u).tolist()]
# The sealed one through legacy DLPack: a private copy-on-write mapping of the same file.
s = torch.from_dlpack(t)
ok += [in_mapping(s.data_ptr(), a.path), s.tolist() == t.tolist()]
s += 1
ok += [t.tolist() == a.lookup('c/w').tolist() != s.tolist()]
print(ok, t.tolist())
'''


def test_c_producer_torch_numpy_consumers(tensord, arena, tmp_path):
    w = np.arange(12, dtype=np.int16).reshape(3, 4)
    np.save(tmp_path / 'w.npy', w)
    np.save(tmp_path / 'u.npy', w.astype(np.float32))
    tensord.ctl('load', arena.name, tmp_path / 'w.npy', '--prefix', 'c/w', '--seal')
    tensord.ctl('load', arena.name, tmp_path / 'u.npy', '--prefix', 'c/u')
    p = run_python(CONSUMER, tensord.socket, arena.name, os.path.dirname(__file__),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out.strip() == '%s %s' % ([True] * 9, w.tolist())


def test_sealed_tensor(tensord, arena):
    arena.publish('s/w', np.arange(4, dtype=np.float32))
    t = arena.lookup('s/w')
    assert t.is_readonly
    n = np.asarray(t)
    assert not n.flags.writeable
    with pytest.raises(ValueError):
        n[0] = 5
    assert memoryview(t).readonly
    with pytest.raises(lt.Error):
        lt.ops.add_(t, 1)                      # operators refuse to write
    v = lt.from_dlpack(t.__dlpack__(max_version=(1, 0)))   # versioned: READ_ONLY travels
    assert v.is_readonly and v.data_ptr() == t.data_ptr()
    y = torch.from_dlpack(t)                   # legacy: a private copy-on-write view
    y += 100
    assert y.tolist() == [100.0, 101.0, 102.0, 103.0]
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] == arena.lookup('s/w').tolist()
    other = subprocess.run([sys.executable, '-c', 'import libtensor as lt, sys; '
                            'print(lt.connect(sys.argv[1]).arena(sys.argv[2]).lookup("s/w").tolist())',
                            tensord.socket, arena.name], capture_output=True, text=True)
    assert other.stdout.strip() == '[0.0, 1.0, 2.0, 3.0]'


def test_writable_tensor_exports_writable():
    t = lt.tensor([1.0])
    r = lt.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert not r.is_readonly and np.asarray(r).flags.writeable


def test_sigkilled_consumer_is_reclaimed(tensord, client, arena):
    arena.publish('k/w', np.ones(1024, dtype=np.float64))
    code = ('import sys, time, libtensor as lt\n'
            'a = lt.connect(sys.argv[1]).arena(sys.argv[2])\n'
            't = a.lookup("k/w")\n'
            'print(a.slot, flush=True)\n'
            'time.sleep(600)\n')
    p = run_python(code, tensord.socket, arena.name, stdout=subprocess.PIPE, text=True)
    try:
        slot = int(p.stdout.readline())
        mine = [c for c in arena.clients() if c['pid'] == p.pid]
        assert mine and mine[0]['slot'] == slot and mine[0]['held_blocks'] >= 1
        before = client.status()['reclaimed_slots']
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
    deadline = time.monotonic() + 15
    while any(c['pid'] == p.pid for c in arena.clients()):
        assert time.monotonic() < deadline, arena.clients()
        time.sleep(0.05)
    assert client.status()['reclaimed_slots'] > before
    assert arena.lookup('k/w').tolist() == [1.0] * 1024      # the name still holds it


def test_wait_times_out(arena):
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as e:
        arena.lookup('w/never', timeout=0.3)
    assert 0.25 <= time.monotonic() - t0 < 3
    assert isinstance(e.value, lt.TimedOutError)
    assert "'w/never' was not published" in str(e.value) and 'within 0.3 s' in str(e.value)
    arena.publish('w/unsealed', [1.0], seal=False)
    with pytest.raises(TimeoutError, match='not published sealed .* within 0.2 s'):
        arena.lookup('w/unsealed', timeout=0.2, sealed=True)
    with pytest.raises(KeyError):
        arena.lookup('w/never')                               # no timeout: no wait
    with pytest.raises(ValueError):
        arena.lookup('w/never', timeout=-1)


def test_wait_wakes(tensord, arena):
    code = ('import sys, time, libtensor as lt\n'
            'a = lt.connect(sys.argv[1]).arena(sys.argv[2])\n'
            'time.sleep(0.5)\n'
            'a.publish("w/late", [1, 2, 3], seal=False)\n'
            'a.publish("w/other", [4], seal=False)\n'
            'time.sleep(0.5)\n'
            'a.seal("w/late")\n')
    p = run_python(code, tensord.socket, arena.name)
    try:
        t0 = time.monotonic()
        t = arena.lookup('w/late', timeout=float('inf'), sealed=True)
        waited = time.monotonic() - t0
        assert t.tolist() == [1, 2, 3] and t.is_readonly and 0.8 <= waited < 10
        assert arena.lookup('w/other', timeout=0.1).tolist() == [4]
    finally:
        assert p.wait(30) == 0
    p = run_python(code.replace('w/late', 'w/late2').replace('w/other', 'w/other2'),
                   tensord.socket, arena.name)
    try:
        t0 = time.monotonic()
        t = arena.lookup('w/other2', timeout=30)     # published, not sealed, is enough
        assert t.tolist() == [4] and 0.3 <= time.monotonic() - t0 < 10
    finally:
        assert p.wait(30) == 0


def test_wait_interrupted(tensord, arena):
    """Ctrl-C ends a wait without limit: the wait releases the GIL and checks signals."""
    # The child installs Python's SIGINT handler itself: one started in the background by a
    # non-interactive shell inherits SIGINT ignored, and Python then installs none.
    code = ('import signal, sys, libtensor as lt\n'
            'signal.signal(signal.SIGINT, signal.default_int_handler)\n'
            'a = lt.connect(sys.argv[1]).arena(sys.argv[2])\n'
            'print("waiting", flush=True)\n'
            'try:\n'
            '    a.lookup("w/never", timeout=float("inf"))\n'
            'except KeyboardInterrupt:\n'
            '    print("interrupted", flush=True)\n')
    p = run_python(code, tensord.socket, arena.name, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == 'waiting'
        time.sleep(0.3)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=10)  # never hang the suite on a lost signal
        assert out.strip() == 'interrupted'
        assert time.monotonic() - t0 < 3
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


def test_closed_and_bad_use(tensord, tmp_path):
    c = lt.connect(tensord.socket)
    a = c.arena('pyclosed', create=True, size=4 << 20)
    a.publish('x', [1.0])
    t = a.lookup('x')
    a.close()
    c.close()
    assert a.closed and c.closed and 'closed' in repr(a)
    for f in (lambda: a.lookup('x'), lambda: a.names(), lambda: a.publish('y', [1]),
              lambda: 'x' in a, lambda: a['x'], lambda: a.stat(), lambda: c.status(),
              lambda: c.arena('pyclosed')):
        with pytest.raises(ValueError, match='closed'):
            f()
    assert t.tolist() == [1.0]                 # the tensor keeps the arena attached
    with pytest.raises((ConnectionError, KeyError)):
        lt.connect(str(tmp_path / 'no-socket'))
    with lt.connect(tensord.socket) as c2:
        with pytest.raises(KeyError):
            c2.arena('no-such-arena')
        with c2.arena('pyclosed', read_only=True) as ro:
            assert ro.lookup('x').is_readonly
            with pytest.raises(PermissionError):
                ro.publish('z', [1.0])
        assert 'pyclosed' in c2.arenas()


def test_direct_arena(tmp_path):
    d = str(tmp_path)
    with lt.Arena.create('direct', size=4 << 20, dir=d) as a:
        a.publish('x', np.arange(3.0), seal=False)
        with pytest.raises(FileExistsError):
            lt.Arena.create('direct', dir=d)
        with lt.Arena.open('direct', dir=d) as b:
            assert b.lookup('x').tolist() == [0.0, 1.0, 2.0]
    lt.Arena.destroy('direct', dir=d)
    with pytest.raises(KeyError):
        lt.Arena.open('direct', dir=d)


def test_connect_default_socket(tensord):
    """connect() without a socket uses $TENSORD_SOCKET (tn_tensord_socket_path)."""
    env = dict(os.environ, TENSORD_SOCKET=tensord.socket)
    r = subprocess.run([sys.executable, '-c', 'import libtensor as lt, os\n'
                        'with lt.connect() as c: print(c.status()["pid"])'],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == tensord.proc.pid


def test_destroy_arena(tensord):
    with lt.connect(tensord.socket) as c:
        a = c.arena('pydestroy', create=True, size=4 << 20)
        t = a.publish('x', [1.0, 2.0])
        # This process is attached: refused without force.
        with pytest.raises(lt.BusyError):
            c.destroy_arena('pydestroy')
        c.destroy_arena('pydestroy', force=True)
        assert 'pydestroy' not in c.arenas()
        assert t.tolist() == [1.0, 2.0]        # the mapping stays usable until let go
        a.close()
        with pytest.raises(KeyError):
            c.destroy_arena('pydestroy')
        b = c.arena('pydestroy2', create=True, size=4 << 20)
        b.close()
        c.destroy_arena('pydestroy2')          # nobody attached: no force needed
        assert 'pydestroy2' not in c.arenas()
        with pytest.raises(ValueError):
            c.destroy_arena('bad/name')


def test_spilled_tensor_comes_back(tmp_path):
    """A torch tensor published as a cache entry into an arena in spill mode goes to disk when
    the arena passes its high watermark, and a lookup brings it back bit-exact (NaN payloads
    included) to a torch consumer."""
    from conftest import Daemon
    d = Daemon('spill_dir = @DIR@/spill\nevict_interval_ms = 20\n')
    try:
        with lt.connect(d.socket) as c:
            a = c.arena('spilly', create=True, size=16 << 20)
            d.ctl('arena', 'set', 'spilly', '--spill', 'on')
            g = torch.Generator().manual_seed(5)
            x = torch.randint(-2**31, 2**31 - 1, (512, 512), dtype=torch.int32, generator=g)
            x = x.view(torch.float32)  # every bit pattern, NaNs with payloads among them
            a.publish('kv/0', x, seal=False, evictable=True)
            a.publish('w', torch.ones(8), seal=True)
            d.ctl('arena', 'set', 'spilly', '--high-water', '1%', '--low-water', '1%')
            deadline = time.monotonic() + 10
            while a.info('kv/0')['location'] != 'disk':
                assert time.monotonic() < deadline, 'kv/0 was not spilled'
                time.sleep(0.01)
            assert a.info('w')['location'] == 'memory'
            assert a.stat()['spilled_names'] == 1
            d.ctl('arena', 'set', 'spilly', '--high-water', '95%', '--low-water', '90%')
            back = torch.from_dlpack(a.lookup('kv/0'))
            assert a.info('kv/0')['location'] == 'memory'
            assert torch.equal(back.view(torch.int32), x.view(torch.int32))
            assert a.stat()['restores'] == 1
            del back
            a.close()
            c.destroy_arena('spilly', force=True)
    finally:
        d.stop()
