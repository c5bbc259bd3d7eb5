#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# build-kmod.sh KDIR OUTDIR [make args...]
#
# Build hmirror.ko out of tree against the kernel build tree KDIR.  The
# sources (Kbuild, kmod/, uapi/) are copied into OUTDIR/src first, so that
# builds for different kernels never share objects; kernel-API differences
# are probed from KDIR's headers by kmod/configure.sh (when present) into
# OUTDIR/src/kmod/hmirror_config.h.  The result is OUTDIR/hmirror.ko.
# Extra arguments go to kbuild's make (e.g. C=2 CHECK=sparse).  A KDIR in
# a build root (tools/buildroot.sh: headers that need another Debian
# release's compiler) is built inside that root; OUTDIR must then lie in
# this working tree, which the root sees at the same path.
set -eu

kdir=${1:?usage: build-kmod.sh KDIR OUTDIR [make args...]}
out=${2:?usage: build-kmod.sh KDIR OUTDIR [make args...]}
shift 2
top=$(cd "$(dirname "$0")/.." && pwd)
kdir=$(cd "$kdir" 2>/dev/null && pwd) || { echo "build-kmod: no directory $1" >&2; exit 1; }

if [ ! -f "$kdir/Makefile" ]; then
	echo "build-kmod: $kdir is not a kernel build tree" >&2
	exit 1
fi
if [ ! -f "$top/Kbuild" ]; then
	echo "build-kmod: no Kbuild in $top" >&2
	exit 1
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)

src=$out/src

# one build at a time per output directory (make module and the sparse
# check of make check may run together)
exec 9>"$out/.lock"
flock 9

# Refresh the copy; only files whose content changed are copied (and so
# get a new time stamp and are rebuilt).  Removed files are removed.
mkdir -p "$src/kmod" "$src/uapi"
cmp -s "$top/Kbuild" "$src/Kbuild" || cp "$top/Kbuild" "$src/Kbuild"
for d in kmod uapi; do
	(cd "$top/$d" && find . -type f \( -name '*.[ch]' -o -name '*.sh' -o -name 'Kbuild*' \) -print) |
	while read -r f; do
		mkdir -p "$src/$d/$(dirname "$f")"
		if ! cmp -s "$top/$d/$f" "$src/$d/$f"; then
			cp "$top/$d/$f" "$src/$d/$f"
		fi
	done
	(cd "$src/$d" && find . -type f \( -name '*.[ch]' -o -name '*.sh' \) -print) |
	while read -r f; do
		case "$f" in ./hmirror_config.h|*/hmirror_config.h) continue ;; esac
		[ -e "$top/$d/$f" ] || rm -f "$src/$d/$f"
	done
done

cd "$top"
if [ -f kmod/configure.sh ]; then
	if [ -x kmod/configure.sh ]; then cfg=kmod/configure.sh; else cfg="sh kmod/configure.sh"; fi
	$cfg "$kdir" > "$src/kmod/hmirror_config.h.new"
	if cmp -s "$src/kmod/hmirror_config.h.new" "$src/kmod/hmirror_config.h"; then
		rm -f "$src/kmod/hmirror_config.h.new"
	else
		mv "$src/kmod/hmirror_config.h.new" "$src/kmod/hmirror_config.h"
	fi
fi

# buildroot.sh runs kbuild in KDIR's build root, if it is in one (a DKMS
# tree has neither).
kbuild="make -C $kdir"
[ -x "$top/tools/buildroot.sh" ] && kbuild="$top/tools/buildroot.sh kbuild $kdir"
# A failed build leaves no hmirror.ko behind (nothing stale gets tested);
# a good one replaces it in one rename (a VM starting meanwhile sees the
# old or the new one, whole).
if ! $kbuild M="$src" "$@" modules; then
	rm -f "$out/hmirror.ko"
	exit 1
fi
cp "$src/hmirror.ko" "$out/.hmirror.ko.tmp"
mv -f "$out/.hmirror.ko.tmp" "$out/hmirror.ko"
