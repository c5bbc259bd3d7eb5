#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kernel.sh SERIES...   e.g. kernel.sh 6.1 6.12
#
# For each series print "SERIES KVER VMLINUZ KDIR" for the newest installed
# Debian amd64 kernel of that series that has its headers, found by globbing
# /boot/vmlinuz-SERIES.* and /usr/src/linux-headers-KVER (no version is
# written down anywhere).  A series with no such kernel prints nothing and
# makes the exit status 1.
rc=0
for s in "$@"; do
	best=
	for v in /boot/vmlinuz-"$s".*; do
		[ -e "$v" ] || continue
		kver=${v#/boot/vmlinuz-}
		case "$kver" in
		*-rt-amd64|*-cloud-amd64) continue ;;
		*-amd64) ;;
		*) continue ;;
		esac
		[ -f "/usr/src/linux-headers-$kver/Makefile" ] || continue
		best="$best$kver
"
	done
	kver=$(printf '%s' "$best" | sort -V | tail -n1)
	if [ -z "$kver" ]; then
		rc=1
		continue
	fi
	echo "$s $kver /boot/vmlinuz-$kver /usr/src/linux-headers-$kver"
done
exit $rc
