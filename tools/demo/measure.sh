#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# measure.sh [OUTDIR]: the daemon's measurements in one go, for a GPU
# machine (or here, on lavapipe).  Builds what it needs, starts hmirrord on
# a private socket, then records into OUTDIR (default build/demo/measure,
# or $OUT when set):
#   devices.txt      hmirrord --list-devices
#   bench.json       hmirror-bench dispatch --json (daemon vs in-process,
#                    the engine's phases, plain Vulkan submission variants)
#   bench-spin1000.json  the same, daemon with --spin-us 1000
#   demo.txt/.png    the demo at DEMO_SIZE MiB (default 4096 on a GPU,
#                    256 on a CPU device), per-dispatch time plot
#   stats.json       hmirrorctl stats --json after the demo
#   hmirrord.log
# HMIRROR_DEVICE picks the device (e.g. H200); DEMO_ARGS adds options.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
out=${1:-${OUT:-build/demo/measure}}
mkdir -p "$out"
# Build only what is missing: a GPU machine gets prebuilt binaries and
# may have neither the build dependencies nor a compiler for them.
for b in hmirrord hmirrorctl hmirror-demo hmirror-bench; do
	[ -x "build/bin/$b" ] || { make -s build/bin/hmirrord build/bin/hmirrorctl \
		build/bin/hmirror-demo build/bin/hmirror-bench || exit 1; break; }
done
bin=build/bin
sock=$(mktemp -u /tmp/hmirror-measure.XXXXXX.sock)
$bin/hmirrord --list-devices > "$out/devices.txt" 2>&1
$bin/hmirrord --socket "$sock" -v 2> "$out/hmirrord.log" &
dpid=$!
# a signal ends the script (a trap alone would run the rest of it against
# a daemon already gone); EXIT stops the daemon
trap 'kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -f "$sock"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
i=0
until $bin/hmirrorctl --socket "$sock" status > "$out/status.txt" 2>&1; do
	i=$((i + 1))
	[ $i -lt 400 ] || { echo "hmirrord did not start"; cat "$out/hmirrord.log"; exit 1; }
	sleep 0.05
done
cat "$out/status.txt"
if grep -q 'llvmpipe\|lavapipe' "$out/status.txt"; then size=${DEMO_SIZE:-256}; else size=${DEMO_SIZE:-4096}; fi
echo "== bench dispatch"
HMIRROR_SOCKET=$sock $bin/hmirror-bench dispatch --rounds 5 --n 500 --json | tee "$out/bench.json"
# the same against a daemon whose device thread spins 1 ms for the next job
# (--spin-us; default 50): how much of "daemon adds" is the wake-up
sock2=$sock.spin
$bin/hmirrord --socket "$sock2" --no-netlink --spin-us 1000 2>/dev/null &
dpid2=$!
i=0
until $bin/hmirrorctl --socket "$sock2" status > /dev/null 2>&1 || [ $i -ge 400 ]; do
	i=$((i + 1))
	sleep 0.05
done
echo "== bench dispatch, daemon --spin-us 1000"
HMIRROR_SOCKET=$sock2 $bin/hmirror-bench dispatch --rounds 3 --n 500 --json | tee "$out/bench-spin1000.json"
kill -TERM $dpid2 2>/dev/null
wait $dpid2 2>/dev/null
echo "== demo, $size MiB"
# DEMO_LIMIT (s, default 240): past it the demo gets SIGINT, finishes the
# dispatch in flight and reports what it did (exit 130) instead of dying
# with nothing written.
# shellcheck disable=SC2086
timeout --foreground -s INT -k 30 "${DEMO_LIMIT:-240}" \
	$bin/hmirror-demo --socket "$sock" --size "$size" --plot "$out/demo.png" ${DEMO_ARGS:-} \
	> "$out/demo.txt" 2> "$out/demo.err"
rc=$?
tr '\r' '\n' < "$out/demo.err" | grep -v '^\[' | tail -n 8
tail -n 1 "$out/demo.txt"
$bin/hmirrorctl --socket "$sock" stats --json > "$out/stats.json"
echo "results in $out (demo exit $rc)"
exit $rc
