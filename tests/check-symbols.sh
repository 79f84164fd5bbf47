#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The public surface audit: the symbols libtensor.so exports, the functions the installed
# headers declare, the version script and the man pages must all agree, and every page must
# lint clean and be listed for installation.
set -u
: "${top_srcdir:=.}" "${top_builddir:=.}" "${NM:=nm}"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

so="$top_builddir/libtensor/.libs/libtensor.so"
[ -f "$so" ] || { echo "check-symbols: $so not built"; exit 1; }

# Exported functions of the built library (defined, default visibility).
$NM -D --defined-only "$so" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u > "$tmp/exported"
# Every tn_ function named in a declaration of the installed headers (inline ones included).
ops_h="$top_builddir/libtensor/include/tensor/ops.h"
names="$top_builddir/libtensor/ops_names.txt"
[ -f "$ops_h" ] && [ -f "$names" ] || { echo "check-symbols: generated $ops_h or $names missing"; exit 1; }
cat "$top_srcdir"/libtensor/include/tensor/*.h "$top_srcdir"/libtensor/include/tensor/version.h.in "$ops_h" |
	sed -e 's,/\*.*\*/,,g' -e '/^[[:space:]]*\*/d' -e '/^[[:space:]]*\/\*/d' |
	grep -oE '\btn_[a-z0-9_]+[[:space:]]*\(' | tr -d ' (' | sort -u > "$tmp/declared"
grep -oE '^[[:space:]]+tn_[a-z0-9_]+;' "$top_builddir/libtensor/libtensor.map" | tr -d ' \t;' | sort -u > "$tmp/map"
grep -h 'static inline' "$top_srcdir"/libtensor/include/tensor/*.h | grep -oE '\btn_[a-z0-9_]+\(' | tr -d '(' | sort -u > "$tmp/inline"
comm -23 "$tmp/declared" "$tmp/inline" > "$tmp/declared_exported"

report() { # title file
	if [ -s "$2" ]; then
		echo "check-symbols: $1: $(tr '\n' ' ' < "$2")"
		fail=1
	fi
}
comm -23 "$tmp/declared_exported" "$tmp/exported" > "$tmp/x"; report "declared but not exported" "$tmp/x"
comm -13 "$tmp/declared_exported" "$tmp/exported" > "$tmp/x"; report "exported but not declared" "$tmp/x"
comm -3 "$tmp/map" "$tmp/exported" > "$tmp/x"; report "version script and exports differ" "$tmp/x"

# The generator's list of C names matches the generated header, and libtensor-ops(7) has each.
grep -oE '\btn_[a-z0-9_]+\(' "$ops_h" | tr -d '(' | sort -u > "$tmp/ops_declared"
sort -u "$names" > "$tmp/ops_names"
comm -3 "$tmp/ops_names" "$tmp/ops_declared" > "$tmp/x"; report "ops_names.txt and tensor/ops.h differ" "$tmp/x"
: > "$tmp/x"
while read -r f; do
	grep -q "^int $f(" "$top_builddir/libtensor/libtensor-ops.7" || echo "$f" >> "$tmp/x"
done < "$tmp/ops_names"
report "operators missing from libtensor-ops(7)" "$tmp/x"
if ! "${MANDOC:-mandoc}" -Tlint -W warning -I os=libtensor "$top_builddir/libtensor/libtensor-ops.7" > "$tmp/x" 2>&1; then
	echo "check-symbols: libtensor-ops.7 does not lint clean:"; cat "$tmp/x"; fail=1
fi

# Every declared function (exported or inline) has a section-3 page.
: > "$tmp/x"
while read -r f; do
	[ -f "$top_srcdir/man/man3/$f.3" ] || echo "$f" >> "$tmp/x"
done < "$tmp/declared"
report "no man page" "$tmp/x"

# Every page on disk is listed for installation and distribution.
: > "$tmp/x"
for p in "$top_srcdir"/man/man[0-9]/*.[0-9]; do
	rel=${p#"$top_srcdir/"}
	grep -q "[[:space:]]$rel\\( \\|\$\\)" "$top_srcdir/man/pages.am" || echo "$rel" >> "$tmp/x"
done
report "pages missing from man/pages.am (run man/list-pages.sh)" "$tmp/x"

# Lint every page.
if ! sh "$top_srcdir/man/check-man.sh" "$top_srcdir/man" "$tmp/declared"; then
	fail=1
fi

n=$(wc -l < "$tmp/exported")
if [ $fail -eq 0 ]; then
	echo "check-symbols: $n exported functions, all declared, versioned and documented"
fi
exit $fail
