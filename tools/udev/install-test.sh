#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Every install path (make install, make install-dkms, DKMS's POST_INSTALL)
# leaves /dev/hmirror 0660 to group "hmirror": the udev rule and the
# group's sysusers.d entry land under DESTDIR.  TAP; run by make check.
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0

# t NAME CMD...: one result, CMD's output shown on failure
t() {
	n=$((n + 1))
	name=$1
	shift
	if "$@" >"$tmp/out" 2>&1; then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		sed 's/^/# /' "$tmp/out"
	fi
}

# rule_ok ROOT: the rule (0660, group hmirror, no seat ACL) and the group
rule_ok() {
	grep -Eq '^KERNEL=="hmirror", SUBSYSTEM=="misc", GROUP="hmirror", MODE="0660"$' \
		"$1/etc/udev/rules.d/60-hmirror.rules" &&
		! grep -q uaccess "$1/etc/udev/rules.d/60-hmirror.rules" &&
		grep -Eq '^g hmirror -$' "$1/usr/lib/sysusers.d/hmirror.conf"
}

# make, without the outer make's jobserver and flags
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top" "$@"
}

# dkms_ok ROOT: the tree DKMS gets installs the rule after each build
dkms_ok() {
	src=$(echo "$1"/usr/src/hmirror-*)
	post=$(sed -n 's/^POST_INSTALL="\(.*\)"$/\1/p' "$src/dkms.conf")
	[ -n "$post" ] && [ -x "$src/$post" ] || {
		echo "dkms.conf: no executable POST_INSTALL (\"$post\")"
		return 1
	}
	"$src/$post" "$tmp/post" && rule_ok "$tmp/post"
}

mk_dkms() { mk install-dkms DESTDIR="$tmp/d" && rule_ok "$tmp/d"; }
mk_install() { mk install DESTDIR="$tmp/i" PREFIX=/usr && rule_ok "$tmp/i"; }

echo "1..5"
t "tools/udev/install.sh DESTDIR" sh -c \
	"'$top/tools/udev/install.sh' '$tmp/a' && ls -lR '$tmp/a'"
t "the rule: 0660 to group hmirror, and the group" rule_ok "$tmp/a"
t "make install-dkms: the rule" mk_dkms
t "dkms.conf POST_INSTALL: the rule" dkms_ok "$tmp/d"
t "make install: the rule" mk_install
