#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Install, once, the Debian packages hmirror needs to build and test.
# Called by the Makefile; safe to run again (it does nothing when all is
# present).  The bookworm-backports source (for the 6.12 test kernel) is
# derived from the Debian mirror this machine already uses.
set -eu

stamp=${HMIRROR_DEPS_STAMP:-build/.deps-ok}

PKGS="build-essential pkg-config kmod cpio
 libdrm-dev libnl-3-dev libnl-genl-3-dev liburing-dev libsystemd-dev
 libvulkan-dev vulkan-tools mesa-vulkan-drivers vulkan-validationlayers
 spirv-tools glslang-tools
 qemu-system-x86 busybox-static xz-utils zstd
 linux-image-amd64 linux-headers-amd64 linux-source-6.1
 sparse gnuplot-nox python3 python3-yaml
 debhelper lintian debootstrap"
BPO_PKGS="linux-image-amd64 linux-headers-amd64"

missing() {
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done
}

sudo_() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# The mirror this machine already uses for bookworm (deb822 or one-line).
debian_mirror() {
	{
		cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
			awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}'
		grep -hE '^deb +[^ ]+ +bookworm +' /etc/apt/sources.list \
			/etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '{print $2; exit}'
	} | head -n1
}

add_backports() {
	grep -rqs 'bookworm-backports' /etc/apt/sources.list \
		/etc/apt/sources.list.d/ && return 0
	m=$(debian_mirror)
	[ -n "$m" ] || { echo "deps: no bookworm apt source to derive backports from" >&2; exit 1; }
	printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$m" | sudo_ tee /etc/apt/sources.list.d/hmirror-backports.sources >/dev/null
	echo updated
}

bpo_installed() {
	ls /lib/modules 2>/dev/null | grep -q '^6\.12\..*-amd64$' &&
		ls /usr/src 2>/dev/null | grep -q '^linux-headers-6\.12\..*-amd64$'
}

need=$(missing $PKGS)
if [ -z "$need" ] && bpo_installed; then
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
add_backports >/dev/null || true
sudo_ apt-get update -q
[ -z "$need" ] || sudo_ apt-get install -y -q --no-install-recommends $need
bpo_installed || sudo_ apt-get install -y -q --no-install-recommends \
	-t bookworm-backports $BPO_PKGS
mkdir -p "$(dirname "$stamp")" && touch "$stamp"
