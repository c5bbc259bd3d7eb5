#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Install, once, the Debian packages hmirror needs to build and test, and
# unpack the test kernels.  Called by the Makefile; safe to run again (it
# does nothing when all is present).
#
# The test kernels (tools/vm/kernels) are never installed: each one's
# image and modules are downloaded and unpacked under build/kernels/KVER/,
# and only its headers are installed, on the host or, for a kernel of
# another Debian release, in a build root of that release under
# build/roots/ (tools/buildroot.sh).  The backports sources are derived
# from the Debian mirror this machine already uses.
#
# apt's locks: a lock held by another process is waited for, up to
# HMIRROR_APT_LOCK_WAIT seconds (default 600).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
stamp=${HMIRROR_DEPS_STAMP:-$top/build/.deps-ok}
kernels=$top/build/kernels
roots=$top/build/roots
lock_wait=${HMIRROR_APT_LOCK_WAIT:-600}
PATH=$PATH:/usr/sbin:/sbin

PKGS="build-essential pkg-config kmod cpio
 libdrm-dev libnl-3-dev libnl-genl-3-dev liburing-dev libsystemd-dev
 libvulkan-dev vulkan-tools mesa-vulkan-drivers vulkan-validationlayers
 spirv-tools spirv-headers glslang-tools
 qemu-system-x86 busybox-static xz-utils zstd debootstrap
 linux-source-6.1
 sparse gnuplot-nox python3 python3-yaml python3-docutils
 debhelper lintian"
# what a build root gets besides each kernel's headers
ROOT_PKGS="make sparse xz-utils"
# Kernels that need a build root need a newer sparse than that release's:
# under sparse their headers use __typeof_unqual__, which 0.6.4 (trixie's)
# cannot parse.  Debian's next release has 0.6.5; its sparse binary (it
# needs only libc) is unpacked, never installed, in ROOT/opt/sparse.
SPARSE_SUITE=forky

err() { echo "deps: $*" >&2; exit 1; }

missing() {
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done
}

sudo_() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# in WHERE CMD...: run CMD on the host ("host") or in build root WHERE
# (never on the loops' standard input)
in_() {
	w=$1
	shift
	if [ "$w" = host ]; then
		sudo_ "$@" </dev/null
	else
		sudo_ "$top/tools/buildroot.sh" exec "$roots/$w" "$@" </dev/null
	fi
}

# apt WHERE ARGS...: apt-get, waiting for apt's locks.  dpkg's lock is
# waited for by apt itself (DPkg::Lock::Timeout); apt-get update does not
# wait for the lists lock, so a failure on a lock is retried until the
# same deadline.
apt_() {
	w=$1
	shift
	deadline=$(($(date +%s) + lock_wait))
	errf=$(mktemp)
	while :; do
		rc=0
		in_ "$w" env DEBIAN_FRONTEND=noninteractive apt-get -q \
			-o DPkg::Lock::Timeout="$lock_wait" "$@" 2>"$errf" || rc=$?
		[ $rc = 0 ] && { cat "$errf" >&2; rm -f "$errf"; return 0; }
		if grep -qE 'Could not get lock|Unable to lock|Unable to acquire' "$errf"; then
			if [ "$(date +%s)" -lt "$deadline" ]; then
				echo "deps: apt is locked by another process ($(grep -m1 -oE 'held by process [0-9]+' "$errf" || echo "lock held")); waiting" >&2
				sleep 5
				continue
			fi
			cat "$errf" >&2
			who=$(grep -m1 -oE 'held by process [0-9]+( \([^)]*\))?' "$errf" || echo "held")
			rm -f "$errf"
			err "apt-get $* ($w) did not run: apt's lock is still $who after ${lock_wait}s.  Run make again once that has finished (HMIRROR_APT_LOCK_WAIT=SECONDS waits longer)."
		fi
		cat "$errf" >&2
		rm -f "$errf"
		err "apt-get $* ($w) failed (exit $rc); see its messages above"
	done
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

# add_source SUITE: a deb822 source for SUITE from the host's mirror
add_source() {
	grep -rqsE "(^|[[:space:]])$1([[:space:]]|$)" /etc/apt/sources.list \
		/etc/apt/sources.list.d/ && return 1
	[ -n "$mirror" ] || err "no bookworm apt source to derive $1 from"
	printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$mirror" "$1" | sudo_ tee "/etc/apt/sources.list.d/hmirror-$1.sources" >/dev/null
}

# newest_kernel WHERE SERIES: the newest amd64 kernel of SERIES that WHERE's
# apt offers with its headers (no version is written down anywhere)
newest_kernel() {
	re=$(printf '%s' "$2" | sed 's/\./\\./g')
	in_ "$1" apt-cache pkgnames linux-image-"$2" 2>/dev/null |
		grep -E "^linux-image-$re[.-][0-9][^ ]*-amd64\$" |
		grep -vE -- '-(rt|cloud)-amd64$' | sed 's/^linux-image-//' | sort -rV |
	while read -r k; do
		if in_ "$1" apt-cache show "linux-headers-$k" >/dev/null 2>&1; then
			echo "$k"
			break
		fi
	done
}

# deps_of WHERE PKG: PKG's dependencies, one clause ("a | b") a line
deps_of() {
	in_ "$1" apt-cache show --no-all-versions "$2" 2>/dev/null |
		sed -n 's/^\(Pre-\)\{0,1\}Depends: //p' | tr ',' '\n' |
		sed 's/([^)]*)//g; s/:any//g; s/^ *//; s/ *$//'
}

# walk WHERE PKG KVER: PKG and what it pulls in of kernel KVER's own
# packages (named for KVER, or its headers and kbuild), one "unpack NAME"
# line each; and "need NAME" for the first alternative of every other
# dependency of those.  Dependencies on a kernel image (6.12's headers
# have one) or on linux-base are dropped: nothing of them is installed.
walk() {
	w=$1 todo=$2 kv=$3 seen=
	nl='
'
	while [ -n "$todo" ]; do
		p=${todo%% *}
		case "$todo" in *" "*) todo=${todo#* } ;; *) todo= ;; esac
		case " $seen " in *" $p "*) continue ;; esac
		seen="$seen $p"
		echo "unpack $p"
		clauses=$(deps_of "$w" "$p")
		ifs=$IFS
		IFS=$nl
		for c in $clauses; do
			IFS=$ifs
			first=${c%%|*}
			first=$(echo $first)
			case " $(echo "$c" | tr '|' ' ') " in
			*" linux-image-"*) continue ;;
			esac
			case "$first" in
			*"$kv"*|linux-headers-*|linux-kbuild-*) todo="${todo:+$todo }$first" ;;
			linux-base|linux-base-*) ;;
			*) echo "need $first" ;;
			esac
		done
		IFS=$ifs
	done
}

# fetch_kernel SERIES SUITE WHERE: kernel image and modules unpacked under
# build/kernels/KVER (KVER/lib/modules/KVER holds the modules and, with
# depmod's files, their modules.dep); headers unpacked there too
# (KVER/usr/src/linux-headers-KVER) with what they need installed on the
# host, or, for a kernel built in a build root, installed in that root.
fetch_kernel() {
	s=$1 suite=$2 w=$3
	kver=$(newest_kernel "$w" "$s")
	[ -n "$kver" ] || err "no linux-image-$s.*-amd64 with headers in the apt sources of $w (suite $suite)"
	if [ "$w" != host ] && [ ! -f "$roots/$w/usr/src/linux-headers-$kver/Makefile" ]; then
		t0=$(date +%s)
		apt_ "$w" install -y --no-install-recommends -t "$suite" "linux-headers-$kver" >/dev/null
		echo "deps: headers of $kver installed in build/roots/$w in $(($(date +%s) - t0))s"
	fi
	if [ -f "$kernels/$kver/.stamp" ] && { [ "$w" != host ] ||
	   [ -f "$kernels/$kver/usr/src/linux-headers-$kver/Makefile" ]; }; then
		return 0
	fi
	t0=$(date +%s)
	pkgs=$(walk "$w" "linux-image-$kver" "$kver" | sed -n 's/^unpack //p')
	if [ "$w" = host ]; then
		hdr=$(walk host "linux-headers-$kver" "$kver")
		pkgs="$pkgs $(echo "$hdr" | sed -n 's/^unpack //p')"
		need=$(missing $(echo "$hdr" | sed -n 's/^need //p' | sort -u))
		[ -z "$need" ] || apt_ host install -y --no-install-recommends $need
	fi
	pkgs=$(echo $pkgs)
	dl=$kernels/.dl-$kver
	u=$kernels/.tmp-$kver
	rm -rf "$dl" "$u"
	mkdir -p "$dl" "$u"
	(cd "$dl" && apt_ "$w" -o APT::Sandbox::User=root download $pkgs >/dev/null)
	t1=$(date +%s)
	for d in "$dl"/*.deb; do
		dpkg -x "$d" "$u"
	done
	# 7.x ships /usr/lib/modules only (merged /usr); depmod -b and the
	# VM runner look in lib/modules
	[ -e "$u/lib" ] || ln -s usr/lib "$u/lib"
	v=
	for f in "$u/boot/vmlinuz-$kver" "$u/lib/modules/$kver/vmlinuz"; do
		if [ -f "$f" ]; then v=$f; fi
	done
	[ -n "$v" ] && [ -d "$u/lib/modules/$kver/kernel" ] ||
		err "packages $pkgs of $kver hold no vmlinuz or no modules"
	# Debian's headers include their -common tree by its installed path
	h=$u/usr/src/linux-headers-$kver
	if [ -f "$h/Makefile" ]; then
		sed -i "s@^\(include\|KBUILD_OUTPUT=\)[[:space:]]*/usr/src/@\1 $kernels/$kver/usr/src/@" "$h/Makefile"
		sed -i "s@^KBUILD_OUTPUT= @KBUILD_OUTPUT=@" "$h/Makefile"
	fi
	depmod -b "$u" "$kver"
	rm -rf "$kernels/$kver" "$dl"
	mv "$u" "$kernels/$kver"
	touch "$kernels/$kver/.stamp"
	echo "deps: kernel $kver unpacked in build/kernels/$kver: download $((t1 - t0))s, unpack $(($(date +%s) - t1))s, $(du -sm "$kernels/$kver" | cut -f1) MiB ($pkgs)"
	# older kernels of the series go
	for o in "$kernels/$s".[0-9]*; do
		if [ -d "$o" ] && [ "$o" != "$kernels/$kver" ]; then rm -rf "$o"; fi
	done
}

# fetch_sparse ROOT: sparse from $SPARSE_SUITE in ROOT/opt/sparse (an apt
# source list of its own, so that nothing else of that release is seen)
fetch_sparse() {
	r=$roots/$1
	[ ! -x "$r/opt/sparse/usr/bin/sparse" ] || return 0
	t0=$(date +%s)
	d=/etc/apt/hmirror-sparse.d
	sudo_ mkdir -p "$r$d" "$r/var/lib/apt/lists-sparse/partial"
	printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$mirror" "$SPARSE_SUITE" | sudo_ tee "$r$d/sparse.sources" >/dev/null
	o="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$d -o Dir::State::Lists=/var/lib/apt/lists-sparse"
	# (one binary, its hash signed by the Release file; a mirror that is
	# slow to refresh the next release's Release must not stop the build)
	apt_ "$1" $o -o Acquire::Check-Valid-Until=false update >/dev/null
	dl=$kernels/.dl-sparse
	rm -rf "$dl" && mkdir -p "$dl"
	(cd "$dl" && apt_ "$1" $o -o APT::Sandbox::User=root download sparse >/dev/null)
	sudo_ rm -rf "$r/opt/sparse"
	sudo_ dpkg -x "$dl"/sparse_*.deb "$r/opt/sparse"
	rm -rf "$dl"
	in_ "$1" /opt/sparse/usr/bin/sparse --version >/dev/null ||
		err "sparse from $SPARSE_SUITE does not run in build/roots/$1"
	echo "deps: sparse from $SPARSE_SUITE unpacked in build/roots/$1/opt/sparse in $(($(date +%s) - t0))s"
}

mirror=$(debian_mirror)
table=$(grep -vE '^[[:space:]]*(#|$)' "$top/tools/vm/kernels")

# ---- host packages -----------------------------------------------------
need=$(missing $PKGS)
updated=
if [ -n "$need" ]; then
	for suite in $(echo "$table" | awk '$3 == "host" && $2 ~ /-backports$/ {print $2}'); do
		add_source "$suite" || true
	done
	apt_ host update
	updated=1
	apt_ host install -y --no-install-recommends $need
fi

# ---- build roots and test kernels --------------------------------------
echo "$table" | awk '$3 != "host" {print $3, $2}' | sort -u | while read -r r suite; do
	sudo_ "$top/tools/buildroot.sh" make "$roots/$r" "$r" "$mirror" $ROOT_PKGS </dev/null
done
if [ -z "$updated" ]; then
	# the pool drops superseded kernels: download from fresh lists
	for s in $(echo "$table" | awk '$3 == "host" && $2 ~ /-backports$/ {print $2}'); do
		add_source "$s" || true
	done
	apt_ host update >/dev/null
fi
for r in $(echo "$table" | awk '$3 != "host" {print $3}' | sort -u); do
	apt_ "$r" update >/dev/null
	fetch_sparse "$r"
done
echo "$table" | while read -r s suite w; do
	fetch_kernel "$s" "$suite" "$w"
done

# the VMs see the host's root read-only and lay their module tree over its
# /lib/modules (tools/vm/init): a host kernel without modules may have no
# such directory, and an empty one is all the VMs need
[ -d /lib/modules ] || sudo_ mkdir -p /lib/modules

mkdir -p "$(dirname "$stamp")" && touch "$stamp"
