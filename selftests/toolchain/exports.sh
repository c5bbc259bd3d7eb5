#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Every function the public headers declare is exported by libhmirror.so
# (lib/libhmirror.map) and listed in debian/libhmirror0.symbols: a header
# function the version script leaves local links statically and fails
# from the shared library.  TAP.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
so=build/lib/libhmirror.so
ar=build/lib/libhmirror.a
echo "1..2"
if [ ! -f "$so" ] || [ ! -f "$ar" ]; then
	echo "not ok 1 # no $so or $ar: build first"
	echo "not ok 2 # no library"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# names declared in the headers that the static library defines as functions
cat lib/include/hmirror/*.h | tr '\n' ' ' |
	grep -oE '\bhm_[a-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:]]*(//' | sort -u >"$tmp/decl"
nm "$ar" 2>/dev/null | awk '$2 == "T" {print $3}' | sort -u >"$tmp/defined"
comm -12 "$tmp/decl" "$tmp/defined" >"$tmp/api"
nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
missing=$(comm -23 "$tmp/api" "$tmp/exported")
if [ -z "$missing" ]; then
	echo "ok 1 every header function ($(wc -l <"$tmp/api")) is exported"
else
	echo "not ok 1 header functions the library does not export:" $missing
fi
sed -n 's/^ \(hm_[a-z0-9_]*\)@.*/\1/p' debian/libhmirror0.symbols | sort -u >"$tmp/symbols"
missing=$(comm -23 "$tmp/api" "$tmp/symbols")
if [ -z "$missing" ]; then
	echo "ok 2 debian/libhmirror0.symbols lists them all"
else
	echo "not ok 2 not in debian/libhmirror0.symbols:" $missing
fi
