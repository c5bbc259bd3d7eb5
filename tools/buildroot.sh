#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# buildroot.sh make ROOT RELEASE MIRROR [PACKAGES...]
# buildroot.sh exec ROOT COMMAND...
# buildroot.sh kbuild KDIR MAKE-ARGS...
#
# A Debian build root for test kernels whose headers need another release's
# compiler and kbuild than the host's (Debian builds each kernel with its
# release's gcc; mixing releases on the host is not safe).
#
# "make" creates ROOT with debootstrap --variant=minbase from MIRROR (the
# caller derives it from the host's apt sources), adds RELEASE-backports,
# and installs PACKAGES (no recommends, no documentation).  ROOT/.hmirror-root
# records what it was made from; a ROOT whose record matches is kept, any
# other is made again.
#
# "exec" runs COMMAND inside ROOT in a mount namespace of its own, with
# /proc, /dev and this working tree (at the same path as outside) mounted;
# nothing stays mounted when it ends.  COMMAND starts in the current
# directory when it lies in the tree, else in /.
#
# "kbuild" runs make -C KDIR MAKE-ARGS: inside the build root KDIR lies in
# (found by its .hmirror-root), else on the host.  Paths in MAKE-ARGS (M=,
# INSTALL_MOD_PATH=) must then lie in this working tree.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
self=$top/tools/buildroot.sh

err() { echo "buildroot: $*" >&2; exit 1; }

sudo_() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

cmd=${1:-}
if [ "$cmd" = kbuild ]; then
	kdir=${2:?usage: buildroot.sh kbuild KDIR MAKE-ARGS...}
	shift 2
	kdir=$(cd "$kdir" && pwd)
	r=$kdir
	while [ "$r" != / ]; do
		r=$(dirname "$r")
		[ -f "$r/.hmirror-root" ] && exec "$self" exec "$r" make -C "${kdir#"$r"}" "$@"
	done
	exec make -C "$kdir" "$@"
fi
[ $# -ge 2 ] || err "usage: buildroot.sh make ROOT RELEASE MIRROR [PACKAGES...] | exec ROOT COMMAND..."
shift
root=$1
shift
mkdir -p "$(dirname "$root")"
root=$(cd "$(dirname "$root")" && pwd)/$(basename "$root")

case "$cmd" in
exec)
	[ -f "$root/.hmirror-root" ] || err "$root is not a build root (tools/deps.sh makes it)"
	[ $# -gt 0 ] || err "exec: no command"
	case "$PWD/" in "$top"/*) cwd=$PWD ;; *) cwd=/ ;; esac
	# root: a private mount namespace; otherwise a user namespace that
	# maps the caller to root (and a pid namespace, for /proc)
	if [ "$(id -u)" = 0 ]; then ns="-m"; else ns="-r -m -p -f"; fi
	# shellcheck disable=SC2086
	exec unshare $ns --propagation private sh -c '
		root=$1 top=$2 cwd=$3
		shift 3
		mount -t proc proc "$root/proc" &&
		mount --bind /dev "$root/dev" &&
		mkdir -p "$root$top" &&
		mount --bind "$top" "$root$top" || exit 2
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		export PATH
		exec chroot "$root" sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
	' sh "$root" "$top" "$cwd" "$@"
	;;
make)
	[ $# -ge 2 ] || err "usage: buildroot.sh make ROOT RELEASE MIRROR [PACKAGES...]"
	release=$1 mirror=$2
	shift 2
	key="release=$release mirror=$mirror packages=$* script=$(md5sum < "$self" | cut -c1-12)"
	if [ -f "$root/.hmirror-root" ] && [ "$(cat "$root/.hmirror-root")" = "$key" ]; then
		exit 0
	fi
	command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] ||
		err "no debootstrap (tools/deps.sh installs it)"
	PATH=$PATH:/usr/sbin:/sbin
	export DEBIAN_FRONTEND=noninteractive
	t0=$(date +%s)
	sudo_ rm -rf "$root" "$root.tmp"
	echo "buildroot: making $root ($release, minbase) ..."
	sudo_ debootstrap --variant=minbase "$release" "$root.tmp" "$mirror" >"$root.log" 2>&1 ||
		{ tail -n 20 "$root.log" >&2; err "debootstrap $release failed (log: $root.log)"; }
	t1=$(date +%s)
	# no documentation in packages installed from here on
	printf 'path-exclude=/usr/share/doc/*\npath-exclude=/usr/share/man/*\npath-exclude=/usr/share/locale/*\n' |
		sudo_ tee "$root.tmp/etc/dpkg/dpkg.cfg.d/01-hmirror-nodoc" >/dev/null
	printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$mirror" "$release" | sudo_ tee "$root.tmp/etc/apt/sources.list.d/backports.sources" >/dev/null
	# "exec" wants the record; it is rewritten with the key once all is in
	echo incomplete | sudo_ tee "$root.tmp/.hmirror-root" >/dev/null
	sudo_ "$self" exec "$root.tmp" apt-get -q update >>"$root.log" 2>&1 ||
		{ tail -n 20 "$root.log" >&2; err "apt-get update in $root failed (log: $root.log)"; }
	if [ $# -gt 0 ]; then
		sudo_ "$self" exec "$root.tmp" apt-get install -y -q --no-install-recommends "$@" \
			>>"$root.log" 2>&1 ||
			{ tail -n 20 "$root.log" >&2; err "installing $* in $root failed (log: $root.log)"; }
	fi
	sudo_ "$self" exec "$root.tmp" apt-get clean
	echo "$key" | sudo_ tee "$root.tmp/.hmirror-root" >/dev/null
	sudo_ mv -T "$root.tmp" "$root"
	t2=$(date +%s)
	echo "buildroot: $root ready: debootstrap $((t1 - t0))s, packages $((t2 - t1))s, $(du -sm "$root" | cut -f1) MiB"
	;;
*)
	err "unknown command $cmd"
	;;
esac
