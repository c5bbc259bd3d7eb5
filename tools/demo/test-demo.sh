#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# test-demo: the demo end to end, verified (TAP).  Starts its own hmirrord
# on a private socket, runs a small hmirror-demo through it and passes when
# the last line says mismatches=0.  The daemon holds the demo's module to
# the isolation check, as it does any other uid's (--isolate-all).
# Natively it runs with the userfaultfd backend; in the VM (/dev/hmirror
# present) with the module, smaller still (QEMU TCG is slow).  The
# traversal's loads are at the mirror window (the daemon re-links its load
# functions and the isolation check takes them): a fallback to the
# helper's form fails the test.
# HMIRROR_DEMO_ARGS adds options.
set -u
bin=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/hmirror-test-demo.XXXXXX")
trap 'kill $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
sock=$dir/sock

if [ -e /dev/hmirror ]; then
	backend=kmod
	args="--size 2 --rays 64 --dispatches 2 --mods 16 --hits-advice 2"
	# lavapipe under TCG: the first dispatch takes ~30 s; with the module
	# the daemon subscribes to its netlink events
	dargs="--timeout 300 --isolate-all"
else
	backend=uffd-async
	args="--small --hits-advice 2"
	dargs="--no-netlink --isolate-all"
fi
echo "TAP version 13"
echo "1..3"
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
	echo "ok 2 demo.sigterm_reports # SKIP the daemon has no engine here"
	echo "ok 3 hmirrorctl.no_daemon # SKIP the daemon has no engine here"
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
fail=0
case "$last" in
demo:*mismatches=0\ *)
	if ! grep -q 'loads at the mirror window' "$dir/err"; then
		grep 'demo: .*loads\|refused' "$dir/err" | sed 's/^/# /'
		echo "not ok 1 demo.$backend # the window loads were not taken"
		fail=1
	elif [ "${vkmsgs:-0}" != 0 ]; then
		sed 's/^/# /' "$dir/hmirrord.log" | tail -n 20
		echo "not ok 1 demo.$backend # $vkmsgs Vulkan validation messages"
		fail=1
	elif [ $rc -eq 0 ]; then
		echo "ok 1 demo.$backend"
	else
		echo "not ok 1 demo.$backend # exit $rc"
		fail=1
	fi ;;
*)
	echo "not ok 1 demo.$backend # exit $rc"
	fail=1 ;;
esac

# 2: SIGTERM mid-run: the demo stops after the dispatch in flight, still
# prints its last line (INTERRUPTED, verified so far) and exits 143; no
# abort on the way out (the first H200 run died in munmap_chunk() here)
if [ "$backend" = kmod ]; then
	echo "ok 2 demo.sigterm_reports # SKIP natively only (TCG is too slow)"
else
	"$bin/hmirror-demo" --socket "$sock" --backend $backend --small \
		--dispatches 1000 >"$dir/out2" 2>"$dir/err2" &
	p=$!
	i=0
	# once the scene is built (at most 20 s), plus a second of dispatches
	while ! grep -q 'built in' "$dir/err2" 2>/dev/null && [ $i -lt 200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 1
	kill -TERM $p
	wait $p
	rc2=$?
	last2=$(tail -n 1 "$dir/out2")
	echo "# $last2"
	case "$rc2:$last2" in
	143:demo:*mismatches=0\ INTERRUPTED*) echo "ok 2 demo.sigterm_reports" ;;
	*)
		tr '\r' '\n' < "$dir/err2" | tail -n 5 | sed 's/^/# /'
		echo "not ok 2 demo.sigterm_reports # exit $rc2"
		fail=1 ;;
	esac
fi

# 3: hmirrorctl against no daemon says so (exit 1); it used to free an
# uninitialised pointer and abort
"$bin/hmirrorctl" --socket "$dir/none.sock" stats --json >"$dir/ctl" 2>&1
rc3=$?
if [ $rc3 -eq 1 ] && grep -q '"present":false' "$dir/ctl"; then
	echo "ok 3 hmirrorctl.no_daemon"
else
	sed 's/^/# /' "$dir/ctl"
	echo "not ok 3 hmirrorctl.no_daemon # exit $rc3"
	fail=1
fi
exit $fail
