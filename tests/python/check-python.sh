#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make check's test of the Python package: pytest runs tests/python against the package
# assembled in the build tree (python/libtensor), with $PYTHON (configure's, by default Debian's
# /usr/bin/python3 with NumPy, PyTorch and pytest), a real tensord of the build tree on a private
# socket, and tensorctl as the other side. It skips (77) in a sanitizer build, whose extension
# cannot be loaded into python (the sanitizer's runtime must be loaded first).
set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
python=${PYTHON:-/usr/bin/python3}

case "${TN_SANITIZER_CFLAGS:-}" in
*sanitize*)
	echo "SKIP: a sanitizer build's extension cannot be loaded into python"
	exit 77
	;;
esac
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
if ! ls "$builddir"/python/libtensor/_C*.so >/dev/null 2>&1; then
	echo "SKIP: no extension module in $builddir/python/libtensor (a static-only build)"
	exit 77
fi
if ! "$python" -c 'import pytest, numpy, torch' >/dev/null 2>&1; then
	echo "FAIL: $python cannot import pytest, numpy and torch (./bootstrap installs python3-pytest, python3-numpy and python3-torch)"
	exit 1
fi
TN_BUILDDIR=$builddir
PYTHONPATH=$builddir/python${PYTHONPATH:+:$PYTHONPATH}
export TN_BUILDDIR PYTHONPATH
# No cache folder in the source tree (a read-only one under make distcheck).
exec "$python" -m pytest -q -p no:cacheprovider "$srcdir/tests/python"
