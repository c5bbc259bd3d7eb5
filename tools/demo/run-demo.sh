#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# run-demo.sh [hmirror-demo options]: run the demo against the hmirrord that
# answers on $HMIRROR_SOCKET (default /run/hmirror/hmirrord.sock); when none
# does, start build/bin/hmirrord on build/demo/hmirrord.sock for the run.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
sock=${HMIRROR_SOCKET:-/run/hmirror/hmirrord.sock}
started=
if ! "$bin/hmirrorctl" --socket "$sock" status >/dev/null 2>&1; then
	mkdir -p "$top/build/demo"
	sock=$top/build/demo/hmirrord.sock
	echo "demo: no hmirrord answering; starting $bin/hmirrord on $sock" >&2
	"$bin/hmirrord" --socket "$sock" 2>"$top/build/demo/hmirrord.log" &
	started=$!
	i=0
	while ! "$bin/hmirrorctl" --socket "$sock" status >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 200 ] || ! kill -0 $started 2>/dev/null; then
			echo "demo: hmirrord did not start; see build/demo/hmirrord.log" >&2
			cat "$top/build/demo/hmirrord.log" >&2
			echo "demo: FAILED daemon did not start mismatches=unknown"
			exit 1
		fi
		sleep 0.05
	done
fi
HMIRROR_SOCKET=$sock "$bin/hmirror-demo" --socket "$sock" "$@"
rc=$?
if [ -n "$started" ]; then
	kill -TERM $started 2>/dev/null
	wait $started 2>/dev/null
fi
exit $rc
