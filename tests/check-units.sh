#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The systemd units make install puts in place: systemd-analyze verify accepts tensord.service
# and tensord.socket, and systemd-analyze security rates the service's exposure at most 3.0
# (of 10). Skipped (exit 77) only where systemd-analyze is missing (Debian's systemd package
# has it; bootstrap installs it).
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}"
sa=${SYSTEMD_ANALYZE:-$(command -v systemd-analyze || true)}
if [ -z "$sa" ] || [ ! -x "$sa" ]; then
	echo "check-units: SKIP: systemd-analyze not found (install the systemd package)"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unit="$top_builddir/tensord/tensord.service"
[ -f "$unit" ] || { echo "check-units: $unit not built"; exit 1; }
# verify checks that ExecStart names an executable: point it at the built daemon.
tensord=$(cd "$top_builddir/tensord" && pwd)/tensord
sed -e "s|^ExecStart=[^ ]*|ExecStart=$tensord|" "$unit" > "$tmp/tensord.service"
cp "$top_srcdir/tensord/tensord.socket" "$tmp/tensord.socket"
fail=0
if ! "$sa" verify --man=no "$tmp/tensord.socket" "$tmp/tensord.service" > "$tmp/verify" 2>&1 ||
	[ -s "$tmp/verify" ]; then
	echo "check-units: systemd-analyze verify:"
	cat "$tmp/verify"
	fail=1
fi
"$sa" security --offline=yes "$tmp/tensord.service" > "$tmp/security" 2>&1
score=$(sed -n 's/.*Overall exposure level for tensord.service: \([0-9.]*\).*/\1/p' "$tmp/security")
if [ -z "$score" ]; then
	echo "check-units: systemd-analyze security gave no score:"
	cat "$tmp/security"
	fail=1
elif awk -v s="$score" 'BEGIN { exit !(s > 3.0) }'; then
	echo "check-units: systemd-analyze security: exposure $score, above 3.0:"
	grep '✗' "$tmp/security"
	fail=1
else
	echo "check-units: systemd-analyze security: exposure $score (at most 3.0)"
fi
exit $fail
