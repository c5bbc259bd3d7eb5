#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# test-demo: the demo end to end, verified (TAP).  Starts its own hmirrord
# on a private socket, runs a small hmirror-demo through it and passes when
# the last line says mismatches=0.  Natively it runs with the userfaultfd
# backend; in the VM (/dev/hmirror present) with the module, smaller still
# (QEMU TCG is slow).  HMIRROR_DEMO_ARGS adds options.
set -u
bin=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/hmirror-test-demo.XXXXXX")
trap 'kill $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
sock=$dir/sock

if [ -e /dev/hmirror ]; then
	backend=kmod
	args="--size 2 --rays 64 --dispatches 2 --mods 16"
	# lavapipe under TCG: the first dispatch takes ~30 s; with the module
	# the daemon subscribes to its netlink events
	dargs="--timeout 300"
else
	backend=uffd-async
	args="--small"
	dargs=--no-netlink
fi
echo "TAP version 13"
echo "1..1"
# shellcheck disable=SC2086
HMIRROR_VALIDATION=${HMIRROR_VALIDATION:-1} \
	"$bin/hmirrord" --socket "$sock" $dargs 2>"$dir/hmirrord.log" &
dpid=$!
i=0
while ! "$bin/hmirrorctl" --socket "$sock" status >"$dir/status" 2>&1; do
	i=$((i + 1))
	if [ $i -gt 400 ] || ! kill -0 $dpid 2>/dev/null; then
		sed 's/^/# /' "$dir/hmirrord.log"
		echo "not ok 1 demo.$backend # hmirrord did not start"
		exit 1
	fi
	sleep 0.05
done
if ! grep -q ' engine' "$dir/status"; then
	sed 's/^/# /' "$dir/status"
	echo "ok 1 demo.$backend # SKIP the daemon has no engine here"
	exit 0
fi
# shellcheck disable=SC2086
"$bin/hmirror-demo" --socket "$sock" --backend $backend $args \
	${HMIRROR_DEMO_ARGS:-} >"$dir/out" 2>"$dir/err"
rc=$?
sed 's/^/# /' "$dir/err" | tr '\r' '\n' | grep -v '^# \[' | tail -n 20
last=$(tail -n 1 "$dir/out")
"$bin/hmirrorctl" --socket "$sock" stats > "$dir/stats" 2>&1
grep -E 'netlink|events|^module|vulkan' "$dir/stats" | sed 's/^/# /'
vkmsgs=$(awk '$1 == "vulkan_validation_messages" {print $2}' "$dir/stats")
echo "# $last"
case "$last" in
demo:*mismatches=0\ *)
	if [ "${vkmsgs:-0}" != 0 ]; then
		sed 's/^/# /' "$dir/hmirrord.log" | tail -n 20
		echo "not ok 1 demo.$backend # $vkmsgs Vulkan validation messages"
		exit 1
	fi
	[ $rc -eq 0 ] && { echo "ok 1 demo.$backend"; exit 0; } ;;
esac
echo "not ok 1 demo.$backend # exit $rc"
exit 1
