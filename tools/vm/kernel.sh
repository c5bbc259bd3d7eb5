#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kernel.sh SERIES...   e.g. kernel.sh 6.1 6.12 7.3
#
# For each series print "SERIES KVER VMLINUZ KDIR" for the newest Debian
# amd64 test kernel of that series that tools/deps.sh unpacked under
# build/kernels/KVER/ (image and modules; its modules are in
# build/kernels/KVER/lib/modules/KVER) and whose headers KDIR are there
# too (build/kernels/KVER/usr/src/linux-headers-KVER) or installed in a
# build root (build/roots/*/usr/src/linux-headers-KVER).  Kernels and
# headers installed on the host are never used.  No version is written down anywhere.  A SERIES may also be a full
# version (6.1.0-57-amd64).  A series with no such kernel prints nothing
# and makes the exit status 1.
top=$(cd "$(dirname "$0")/../.." && pwd)
kernels=$top/build/kernels
rc=0
for s in "$@"; do
	best=
	for d in "$kernels/$s" "$kernels/$s".[0-9]* "$kernels/$s"-*; do
		[ -f "$d/.stamp" ] || continue
		kver=${d#"$kernels/"}
		case "$kver" in
		*-rt-amd64|*-cloud-amd64) continue ;;
		*-amd64) ;;
		*) continue ;;
		esac
		best="$best$kver
"
	done
	found=
	for kver in $(printf '%s' "$best" | sort -rV); do
		v=
		for f in "$kernels/$kver/boot/vmlinuz-$kver" "$kernels/$kver/lib/modules/$kver/vmlinuz"; do
			[ -f "$f" ] && v=$f
		done
		[ -n "$v" ] || continue
		k=
		for h in "$kernels/$kver/usr/src/linux-headers-$kver" \
			 "$top"/build/roots/*/usr/src/linux-headers-"$kver"; do
			[ -f "$h/Makefile" ] && { k=$h; break; }
		done
		[ -n "$k" ] || continue
		echo "$s $kver $v $k"
		found=1
		break
	done
	[ -n "$found" ] || rc=1
done
exit $rc
