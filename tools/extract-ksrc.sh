#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# extract-ksrc.sh TARBALL DEST
#
# Take the few files hmirror needs from the linux-source package at build
# time (nothing of the kernel tree is kept in the repository):
#   DEST/kselftest_harness.h, DEST/kselftest.h      test harness
#   DEST/scripts/checkpatch.pl (+ spelling.txt, const_structs.checkpatch)
# Only the named members are extracted, in one pass over the archive.
set -eu

tarball=${1-}
dest=${2:?usage: extract-ksrc.sh TARBALL DEST}

# An empty TARBALL: the newest linux-source-6.1 tarball under /usr/src.
if [ -z "$tarball" ]; then
	tarball=$(ls /usr/src/linux-source-6.1.tar.* 2>/dev/null | sort -V | tail -n1)
fi

if [ ! -r "$tarball" ]; then
	echo "extract-ksrc: no linux-source tarball ('$tarball'); run tools/deps.sh" >&2
	exit 1
fi

# The archive's top directory, e.g. linux-source-6.1, from its file name.
top=$(basename "$tarball")
top=${top%.tar.*}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmirror-ksrc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

case "$tarball" in
*.xz)	z=-J ;;
*.bz2)	z=-j ;;
*.gz)	z=-z ;;
*.zst)	z=--zstd ;;
*)	z= ;;
esac

# --occurrence: stop reading once every member has been found.
tar -x $z -f "$tarball" -C "$tmp" --occurrence \
	"$top/scripts/checkpatch.pl" \
	"$top/scripts/spelling.txt" \
	"$top/scripts/const_structs.checkpatch" \
	"$top/tools/testing/selftests/kselftest.h" \
	"$top/tools/testing/selftests/kselftest_harness.h"

mkdir -p "$dest/scripts"
cp "$tmp/$top/tools/testing/selftests/kselftest.h" \
   "$tmp/$top/tools/testing/selftests/kselftest_harness.h" "$dest/"
cp "$tmp/$top/scripts/checkpatch.pl" "$tmp/$top/scripts/spelling.txt" \
   "$tmp/$top/scripts/const_structs.checkpatch" "$dest/scripts/"
chmod +x "$dest/scripts/checkpatch.pl"
