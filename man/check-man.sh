#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-man.sh - lint libtensor's manual pages and check that every exported symbol has one.
#
# Usage: check-man.sh [MANDIR [SYMBOLS]]
#
#   MANDIR   the directory holding man1/, man3/, man7/, ... (default: this script's directory)
#   SYMBOLS  a file listing exported symbol names, one per line ("#" comments, blank lines and
#            a trailing "@VERSION" are ignored); each must have MANDIR/man3/<name>.3
#
# Every page is linted with "mandoc -Tlint -W warning"; any warning or error is a problem.
# Alias pages (a single ".so man3/<page>.3" line, as liburing uses) are not linted, since
# mandoc warns on every .so; instead the target must exist, must not itself be an alias, and
# must list the alias's name in its NAME section so that whatis(1) and apropos(1) find it.
# Main pages must have a .TH title equal to their file name.
#
# Prints one summary line; exits 0 when clean, 1 on any problem, 2 on a usage error.
# MANDOC may name the mandoc binary (configure's AC_PATH_PROG result).

mandoc=${MANDOC:-mandoc}

if [ $# -gt 2 ]; then
	echo "usage: $0 [MANDIR [SYMBOLS]]" >&2
	exit 2
fi
if [ $# -ge 1 ]; then
	mandir=$1
else
	mandir=$(dirname "$0")
fi
symbols=${2-}

if [ ! -d "$mandir" ]; then
	echo "$0: $mandir: not a directory" >&2
	exit 2
fi
if [ -n "$symbols" ] && [ ! -r "$symbols" ]; then
	echo "$0: $symbols: cannot read" >&2
	exit 2
fi
if ! command -v "$mandoc" >/dev/null 2>&1; then
	echo "$0: $mandoc not found (install the mandoc package)" >&2
	exit 2
fi

tmp=$(mktemp) || exit 2
trap 'rm -f "$tmp"' EXIT HUP INT TERM

linted=0
aliases=0
problems=0

problem() {
	echo "$*"
	problems=$((problems + 1))
}

# The target of an alias page, or nothing for a main page. An alias holds exactly one
# non-comment line, ".so <target>".
alias_target() {
	sed -e '/^\.\\"/d' -e '/^'"'"'\\"/d' -e '/^[[:space:]]*$/d' "$1" |
		awk 'NR == 1 && $1 == ".so" && NF == 2 { t = $2 } END { if (NR == 1) print t }'
}

# The names listed in the NAME section of a page (before "\-"), one per line.
page_names() {
	awk '/^\.SH/ { on = ($2 == "NAME"); next } on { print }' "$1" |
		sed -e 's/\\-.*//' -e 's/\\&//g' | tr ',' '\n' | sed -e 's/^[[:space:]]*//' \
		-e 's/[[:space:]]*$//' -e '/^$/d'
}

for page in "$mandir"/man[1-9]/*.[1-9]*; do
	[ -f "$page" ] || continue
	rel=${page#"$mandir"/}
	base=$(basename "$page")
	name=${base%.*}
	target=$(alias_target "$page")

	if [ -n "$target" ]; then
		aliases=$((aliases + 1))
		if [ ! -f "$mandir/$target" ]; then
			problem "$rel: .so target $target does not exist"
		elif [ -n "$(alias_target "$mandir/$target")" ]; then
			problem "$rel: .so target $target is itself an alias"
		elif ! page_names "$mandir/$target" | grep -qx "$name"; then
			problem "$rel: $name is not listed in the NAME section of $target"
		fi
		continue
	fi

	linted=$((linted + 1))
	if "$mandoc" -Tlint -W warning -I os=libtensor "$page" >"$tmp" 2>&1; then
		status=0
	else
		status=$?
	fi
	if [ -s "$tmp" ]; then
		while IFS= read -r line; do
			problem "$line"
		done <"$tmp"
	elif [ "$status" -ne 0 ]; then
		problem "$rel: mandoc exited with status $status"
	fi

	title=$(awk '$1 == ".TH" { print $2; exit }' "$page")
	if [ "$title" != "$name" ]; then
		problem "$rel: .TH title \"$title\" does not match the file name"
	fi
done

if [ "$linted" -eq 0 ]; then
	problem "$mandir: no manual pages found"
fi

checked=0
if [ -n "$symbols" ]; then
	missing=
	sed -e 's/#.*//' -e 's/@.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$symbols" >"$tmp"
	while IFS= read -r sym; do
		checked=$((checked + 1))
		if [ ! -f "$mandir/man3/$sym.3" ]; then
			missing="$missing $sym"
			problem "$sym: exported but has no page man3/$sym.3"
		fi
	done <"$tmp"
	if [ -n "$missing" ]; then
		echo "symbols without a man page:$missing"
	fi
fi

summary="man: $linted pages linted, $aliases aliases checked"
if [ -n "$symbols" ]; then
	summary="$summary, $checked symbols checked"
fi
echo "$summary, $problems problems"
[ "$problems" -eq 0 ]
