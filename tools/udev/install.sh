#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/udev/install.sh [DESTDIR]
#
# Install what makes /dev/hmirror 0660 to group "hmirror": the udev rule
# (DESTDIR/etc/udev/rules.d/60-hmirror.rules) and the group's sysusers.d
# entry (DESTDIR/usr/lib/sysusers.d/hmirror.conf).  Without DESTDIR (a
# real install: make install, make install-dkms, DKMS's POST_INSTALL) it
# also creates the group and applies the rule to a node already there.
# Every install path runs this one script.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-}

# The hmirror-dkms package installs the rule and the group itself
# (/lib/udev/rules.d, sysusers.d): DKMS's POST_INSTALL then leaves them to
# it, so that nothing outside the package's files is written.
if [ -z "$dest" ] && [ -f /lib/udev/rules.d/60-hmirror.rules ]; then
	exit 0
fi

install -d "$dest/etc/udev/rules.d" "$dest/usr/lib/sysusers.d"
install -m 644 "$here/60-hmirror.rules" "$dest/etc/udev/rules.d/60-hmirror.rules"
install -m 644 "$here/hmirror.sysusers" "$dest/usr/lib/sysusers.d/hmirror.conf"
[ -z "$dest" ] || exit 0

if ! getent group hmirror >/dev/null 2>&1; then
	if command -v systemd-sysusers >/dev/null 2>&1; then
		systemd-sysusers /usr/lib/sysusers.d/hmirror.conf
	else
		groupadd -r hmirror
	fi
fi
# no udev (a container, a VM's initramfs): the rule applies at next boot
if command -v udevadm >/dev/null 2>&1 && [ -d /run/udev ]; then
	udevadm control --reload || true
	udevadm trigger --subsystem-match=misc --sysname-match=hmirror || true
fi
