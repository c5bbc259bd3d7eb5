#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# test-workload: hmirror-bench workload, every mode but the CUDA ones, at a
# small size on the device at hand (lavapipe in make check), with the
# validation layer (TAP).  A mode passes when it ran every dispatch and every
# hit and every CPU write came out as the CPU reference says.  hmirror-daemon
# runs through a daemon started here with --isolate-all: the traversal's
# window loads pass the isolation check (the daemon re-links the load
# functions), or the mode fails.  Then hmirror once more with the GPU's
# upload form (--twin-mode gather: the copies beside the walk made in
# place, lib/engine/ahead.c), which lavapipe otherwise never takes.
set -u
bin=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/hmirror-test-workload.XXXXXX")
dpid=
trap '[ -n "$dpid" ] && kill $dpid 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
modes="ideal zero-copy buffer-cache hmirror hmirror-boundary hmirror-early hmirror-daemon hmirror-helper"
echo "TAP version 13"
echo "1..10"
HMIRROR_VALIDATION=${HMIRROR_VALIDATION:-1} \
	"$bin/hmirrord" --socket "$dir/sock" --no-netlink --isolate-all 2>"$dir/hmirrord.log" &
dpid=$!
i=0
while [ ! -S "$dir/sock" ] && [ $i -lt 400 ] && kill -0 $dpid 2>/dev/null; do
	sleep 0.05
	i=$((i + 1))
done
HMIRROR_VALIDATION=${HMIRROR_VALIDATION:-1} "$bin/hmirror-bench" workload \
	--modes "$(echo $modes | tr ' ' ,)" --size 4 --rays 2048 --dispatches 4 \
	--rounds 1 --json --socket "$dir/sock" ${HMIRROR_WORKLOAD_ARGS:-} \
	>"$dir/out" 2>"$dir/err"
rc=$?
grep -i 'refused' "$dir/hmirrord.log" | sed 's/^/# hmirrord: /'
sed 's/^/# /' "$dir/err" | tail -n 12
fail=0
i=0
for m in $modes; do
	i=$((i + 1))
	line=$(grep "\"mode\":\"$m\"" "$dir/out")
	case "$line" in
	*'"ran":true'*'"done":4,'*'"mismatches":0,"lost_writes":0'*)
		echo "ok $i workload.$m" ;;
	*)
		echo "# $line" | cut -c1-400
		echo "not ok $i workload.$m"
		fail=1 ;;
	esac
done
summary=$(grep '"summary":true' "$dir/out")
case "$summary" in
*'"validation_messages":0,"all_verified":true'*)
	[ $rc -eq 0 ] && echo "ok 9 workload.summary" ||
		{ echo "not ok 9 workload.summary # exit $rc"; fail=1; } ;;
*)
	echo "# $summary"
	echo "not ok 9 workload.summary # exit $rc"
	fail=1 ;;
esac
HMIRROR_VALIDATION=${HMIRROR_VALIDATION:-1} "$bin/hmirror-bench" workload \
	--modes hmirror --twin-mode gather --size 4 --rays 2048 --dispatches 4 \
	--rounds 1 --json ${HMIRROR_WORKLOAD_ARGS:-} >"$dir/gather" 2>"$dir/gather.err"
rc=$?
line=$(grep '"mode":"hmirror"' "$dir/gather")
# every dispatch read and wrote right, and the pass beside the walk ran
# (its time is never 0.000 ms); how many of its copies were published
# depends on the timing (none in 3 of 8 runs here), so it is not asked
ok=no
case "$line" in
*'"ran":true'*'"done":4,'*'"mismatches":0,"lost_writes":0'*) ok=yes ;;
esac
case "$line" in *'"ahead":0.000,'*) ok=no ;; esac
if [ $ok = yes ] && [ $rc -eq 0 ]; then
	echo "ok 10 workload.hmirror_gather"
else
	sed 's/^/# /' "$dir/gather.err" | tail -n 12
	echo "# $line" | cut -c1-400
	echo "not ok 10 workload.hmirror_gather # exit $rc"
	fail=1
fi
[ $fail -eq 0 ] && echo "# 10 passed, 0 failed" || echo "# some failed"
exit $fail
