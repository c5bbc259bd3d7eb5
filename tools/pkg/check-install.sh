#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/pkg/check-install.sh [--break udev|unit] [--keep] [--timeout S]
#
# make check-install: build the Debian packages from the tree, check them
# with lintian, boot the Debian 12 system of tools/pkg/vm-root.sh (systemd,
# QEMU under TCG, no network), install them there with apt and use them as
# a user would (tools/pkg/guest.sh says what is checked).  The last line
# is "N passed, N failed".
#
#   --break udev   build hmirror-dkms without its udev rule
#   --break unit   build hmirrord with a unit whose daemon cannot start
#                  (both: the negative controls; the check must fail)
#   --keep         keep the run directory (console, journal) and say where
#
# The packages are built in build/check-install/src (a copy of the tracked
# and untracked files, refreshed in place so that make rebuilds only what
# changed); the system image is cached in build/check-install/vm.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/tools/pkg
out=$top/build/check-install
brk= keep=0 timeout=1500
while [ $# -gt 0 ]; do
	case "$1" in
	--break) brk=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--timeout) timeout=$2; shift 2 ;;
	*) sed -n '4,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
case "$brk" in ''|udev|unit) ;; *) echo "check-install: --break udev or unit" >&2; exit 2 ;; esac

passed=0 failed=0
result() {	# result OK|FAIL NAME [why]
	if [ "$1" = OK ]; then
		passed=$((passed + 1)); echo "ok - $2"
	else
		failed=$((failed + 1)); echo "not ok - $2${3:+ # $3}"
	fi
}
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit $?
}

# ---- the packages -------------------------------------------------------
mkdir -p "$out"
src=$out/src${brk:+-broken-$brk}/hmirror	# one copy per variant: they may run at once
mkdir -p "$src"
(cd "$top" && git ls-files -co --exclude-standard | while read -r f; do
	[ -e "$f" ] || [ -L "$f" ] && printf '%s\n' "$f"; done) | sort -u > "$src.files"
tr '\n' '\0' < "$src.files" | (cd "$top" && tar --null -T - -cf -) | tar -C "$src" -xpf -
# files gone from the tree go from the copy (its build/ and what debhelper
# made stay); dh must run its build again, make decides what to rebuild
(cd "$src" && find . -path ./build -prune -o -type f -print | sed 's|^\./||' |
	grep -vE '^debian/(tmp|\.debhelper|hmirror-dkms|hmirrord|libhmirror0|libhmirror-dev)/|^debian/(files|.*\.substvars|.*\.debhelper(\.log)?|debhelper-build-stamp)$' |
	sort | comm -23 - "$src.files" | xargs -r rm -f)
rm -f "$src/debian/debhelper-build-stamp" "$src"/debian/*.debhelper.log
case "$brk" in
udev)	# the rule is left out of the package
	sed -i '/60-hmirror.rules/d' "$src/debian/hmirror-dkms.install"
	printf 'lib/udev/rules.d/60-hmirror.rules\n' >> "$src/debian/not-installed" ;;
unit)	# a daemon that exits at once: it never gets to READY=1
	sed -i 's|^ExecStart=.*|ExecStart=@SBINDIR@/hmirrord --no-such-option|' \
		"$src/daemon/systemd/hmirrord.service.in" ;;
esac
rm -f "$(dirname "$src")"/hmirror*_* "$(dirname "$src")"/libhmirror*_*
t0=$(date +%s)
# the source package from a clean copy; the binaries in the kept one (-nc:
# its build/ is reused, make rebuilds what changed)
tag=${brk:+-broken-$brk}
srcpkg=$out/srcpkg$tag
rm -rf "$srcpkg"
mkdir -p "$srcpkg/hmirror"
tr '\n' '\0' < "$src.files" | (cd "$top" && tar --null -T - -cf -) | tar -C "$srcpkg/hmirror" -xpf -
blog=$out/build$tag.log
if (cd "$srcpkg" && dpkg-source -b hmirror) >"$blog" 2>&1 &&
   (cd "$src" && dpkg-buildpackage -b -nc -us -uc -j2) >>"$blog" 2>&1; then
	result OK "packages.build ($(( $(date +%s) - t0 ))s)"
else
	tail -n 40 "$blog" | sed 's/^/# /' || true
	result FAIL packages.build "dpkg-source or dpkg-buildpackage failed ($blog)"
	finish
fi
debs=$(ls "$(dirname "$src")"/*.deb | grep -v -- -dbgsym_)
# lintian over the upload (source and binaries), failing at the level an
# upload must pass: errors and warnings
llog=$out/lintian$tag.log
if lintian -I --fail-on error,warning "$srcpkg"/hmirror_*.dsc "$(dirname "$src")"/hmirror_*.changes \
		>"$llog" 2>&1; then
	result OK "packages.lintian ($(grep -c '^[IPX]:' "$llog" || true) tags below warning)"
	grep '^[IPX]:' "$llog" | sed 's/^/# /' || true
else
	grep '^[EW]:' "$llog" | sed 's/^/# /' || true
	result FAIL packages.lintian "errors or warnings ($llog)"
fi

# ---- the system --------------------------------------------------------------
"$here/vm-root.sh" "$out/vm" || { result FAIL vm.root "vm-root.sh failed"; finish; }
mkdir -p "$out/runs"
run=$(mktemp -d "$out/runs/run.XXXXXX")
cleanup() {
	if [ $keep = 1 ]; then echo "check-install: run directory $run" >&2; else rm -rf "$run"; fi
}
trap cleanup EXIT
mkdir -p "$run/debs"
cp $debs "$run/debs/"
cp "$here/guest.sh" "$run/guest.sh"

t0=$(date +%s)
set +e
timeout -k 5 "$timeout" qemu-system-x86_64 \
	-nodefaults -no-user-config -nographic -no-reboot \
	-machine q35,accel=tcg -cpu max,la57=off -smp 2 -m 3072 \
	-kernel "$out/vm/vmlinuz" -initrd "$out/vm/initrd.img" \
	-append "root=/dev/vda rw console=ttyS0 tsc=reliable panic=-1 mitigations=off no_timer_check rcupdate.rcu_cpu_stall_timeout=60 watchdog_thresh=30 systemd.show_status=0" \
	-drive file="$out/vm/root.img",format=raw,if=virtio,snapshot=on \
	-fsdev local,id=hmctl,path="$run",security_model=none \
	-device virtio-9p-pci,fsdev=hmctl,mount_tag=hmctl \
	-serial "file:$run/console.log" -monitor none -nic none \
	</dev/null >"$run/qemu.log" 2>&1
qrc=$?
set -e
secs=$(( $(date +%s) - t0 ))
if [ -f "$run/out.log" ]; then
	grep -E '^(ok|not ok|#)' "$run/out.log" || true
	passed=$((passed + $(grep -c '^ok' "$run/out.log" || true)))
	failed=$((failed + $(grep -c '^not ok' "$run/out.log" || true)))
fi
if [ $qrc = 124 ] || [ $qrc = 137 ]; then
	result FAIL vm.boot "time limit of ${timeout}s ran out"
elif [ ! -f "$run/rc" ]; then
	tail -n 30 "$run/console.log" 2>/dev/null | tr -d '\r' | sed 's/^/# | /' || true
	result FAIL vm.boot "the guest stopped before the check finished (qemu exit $qrc)"
else
	result OK "vm.run (${secs}s)"
fi
bad=$(cat "$run/dmesg" 2>/dev/null | grep -E -f "$top/tools/vm/bad-log.re" || true)
if [ -n "$bad" ]; then
	printf '%s\n' "$bad" | sed 's/^/# /'
	result FAIL vm.kernel_log "WARN/BUG/Oops in the guest's log"
fi
finish
