#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make check's share of the differential test against PyTorch 1.13 (tests/difftest/difftest.py;
# `make difftest` runs it for longer with a random seed). Two parts, both deterministic:
#   1. replay corpus.jsonl.gz, cases with torch's outcomes recorded by `make difftest-corpus`,
#      against the built library: needs only python3, so it asserts something on any machine;
#   2. where $TN_TORCH_PYTHON (default /usr/bin/python3) imports torch 1.13, the first
#      $TN_DIFFTEST_CASES cases (default 4000) of seed 1 live, stopped after 75 s at the latest.
# Disagreements listed in allow.txt are counted, not failed. It skips (77) where the library
# is not a shared object python can load: a static-only build, or one with sanitizers (their
# runtime must be loaded first, which python is not built for).
set -u
srcdir=${top_srcdir:-.}/tests/difftest
lib=${top_builddir:-.}/libtensor/.libs/libtensor.so
python=${PYTHON3:-python3}
torch_python=${TN_TORCH_PYTHON:-/usr/bin/python3}
cases=${TN_DIFFTEST_CASES:-4000}

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

rc=0
"$python" "$srcdir/difftest.py" --lib "$lib" --replay "$srcdir/corpus.jsonl.gz" || rc=1
if "$torch_python" -c 'import sys, torch; sys.exit(not torch.__version__.startswith("1.13"))' \
	>/dev/null 2>&1; then
	"$torch_python" "$srcdir/difftest.py" --lib "$lib" --seed 1 --cases "$cases" --time 75 ||
		rc=1
else
	echo "$torch_python cannot import torch 1.13: the live part is skipped, the corpus was checked"
fi
exit $rc
