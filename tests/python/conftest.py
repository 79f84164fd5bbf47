# SPDX-License-Identifier: MIT
"""Fixtures of the Python package's tests: a real tensord of the build tree on a private
socket in a temporary folder (started once per session, stopped at the end), tensorctl, and
a fresh arena per test."""
import itertools
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import libtensor

BUILDDIR = pathlib.Path(os.environ.get('TN_BUILDDIR') or
                        pathlib.Path(libtensor.__file__).resolve().parents[2])
TENSORD = BUILDDIR / 'tensord' / 'tensord'
TENSORCTL = BUILDDIR / 'tensord' / 'tensorctl'


_daemons = itertools.count()


class Daemon:
    def __init__(self, config='# empty: built-in defaults\n'):
        self.dir = tempfile.mkdtemp(prefix='tn-pytest-')
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, 's')
        self.config = os.path.join(self.dir, 'tensord.conf')
        self.log = os.path.join(self.dir, 'log')
        # One folder per daemon: a second one's stop must not remove the first one's arenas.
        self.arena_dir = '/dev/shm/tn-pytest-%d-%d' % (os.getpid(), next(_daemons))
        with open(self.config, 'w') as f:
            f.write(config.replace('@DIR@', self.dir))
        with open(self.log, 'w') as log:
            self.proc = subprocess.Popen(
                [str(TENSORD), '--foreground', '--socket', self.socket, '--config',
                 self.config, '--arena-dir', self.arena_dir, '--log-level', 'info'],
                stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                libtensor.connect(self.socket).close()
                break
            except (ConnectionError, KeyError, FileNotFoundError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError('tensord did not start: ' + open(self.log).read())
                time.sleep(0.02)

    def ctl(self, *args, check=True):
        """Run tensorctl against this daemon; returns its CompletedProcess."""
        r = subprocess.run([str(TENSORCTL), '--socket', self.socket] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError('tensorctl %s failed (%d): %s%s' %
                                 (' '.join(map(str, args)), r.returncode, r.stdout, r.stderr))
        return r

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.arena_dir, ignore_errors=True)


@pytest.fixture(scope='session')
def tensord():
    d = Daemon()
    yield d
    d.stop()


@pytest.fixture
def client(tensord):
    with libtensor.connect(tensord.socket) as c:
        yield c


_counter = itertools.count()


@pytest.fixture
def arena(client):
    """A fresh arena (created through the daemon) for one test."""
    name = 'py%d-%d' % (os.getpid(), next(_counter))
    a = client.arena(name, create=True, size=16 << 20)
    yield a
    a.close()


def run_python(code, *args, **kwargs):
    """Start another Python process running @code with the package importable."""
    return subprocess.Popen([sys.executable, '-c', code] + [str(a) for a in args],
                            env=dict(os.environ), **kwargs)
