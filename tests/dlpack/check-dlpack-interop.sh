#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make check's DLPack test against real consumers and producers: PyTorch 1.13 and NumPy 1.24
# (Debian's python3-torch and python3-numpy, for $TN_TORCH_PYTHON, default /usr/bin/python3,
# which ./bootstrap installs) exchange tensors with the built libtensor.so through
# tests/dlpack/dlpack_interop.py. It skips (77) where the library is not a shared object python
# can load: a static-only build, or one with sanitizers (their runtime must be loaded first);
# the C side of DLPack is check_dlpack's, which runs in every build.
set -u
srcdir=${top_srcdir:-.}/tests/dlpack
lib=${top_builddir:-.}/libtensor/.libs/libtensor.so
torch_python=${TN_TORCH_PYTHON:-/usr/bin/python3}

case "${TN_SANITIZER_CFLAGS:-}" in
*sanitize*)
	echo "SKIP: a sanitizer build's libtensor.so cannot be loaded into python"
	exit 77
	;;
esac
if [ ! -f "$lib" ]; then
	echo "SKIP: no $lib (a static-only build)"
	exit 77
fi
if ! "$torch_python" -c 'import torch, numpy' >/dev/null 2>&1; then
	echo "FAIL: $torch_python cannot import torch and numpy (./bootstrap installs python3-torch and python3-numpy)"
	exit 1
fi
exec "$torch_python" "$srcdir/dlpack_interop.py" "$lib"
