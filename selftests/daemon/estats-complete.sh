#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The daemon exposes every counter of its clients' engines: each uint64_t
# of struct hm_engine_stats (lib/include/hmirror/engine.h) is read by
# hmd_eng_stats() (daemon/engine_host.c) into an HM_ESTAT_* value, and each
# HM_ESTAT_* value has a name (lib/client.c, what hmirrorctl stats prints),
# and so has each HM_DSTAT_* value.  "Why is nothing mirrored?" needs the
# budget and refusal counters too.  TAP.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
fields=$(sed -n '/^struct hm_engine_stats {/,/^};/p' lib/include/hmirror/engine.h |
	sed -n 's/^[[:space:]]*uint64_t[[:space:]]\{1,\}\([a-z0-9_]*\);.*/\1/p')
body=$(sed -n '/^int hmd_eng_stats(/,/^}/p' daemon/engine_host.c)
enums=$(sed -n '/^enum hm_engine_stat {/,/^};/p' lib/include/hmirror/protocol.h |
	sed -n 's/^[[:space:]]*\(HM_ESTAT_[A-Z0-9_]*\).*/\1/p' | grep -vx HM_ESTAT_NR)
echo "1..3"
missing=
n=0
for f in $fields; do
	n=$((n + 1))
	printf '%s\n' "$body" | grep -q "s\.$f\b" || missing="$missing $f"
done
if [ "$n" -lt 20 ]; then
	echo "not ok 1 only $n counters found in struct hm_engine_stats (parser out of date)"
elif [ -n "$missing" ]; then
	echo "not ok 1 the daemon does not expose:$missing"
else
	echo "ok 1 the daemon exposes all $n counters of struct hm_engine_stats"
fi
# named NR WHAT MIN VALUES...: each value has a name in lib/client.c
named() {
	nr=$1 what=$2 min=$3 missing= n=0
	shift 3
	for e in "$@"; do
		n=$((n + 1))
		grep -q "\[$e\] = \"" lib/client.c || missing="$missing $e"
	done
	if [ "$n" -lt "$min" ] || [ -n "$missing" ]; then
		echo "not ok $nr $what without a name in lib/client.c ($n seen):$missing"
	else
		echo "ok $nr every one of the $n $what values has a name"
	fi
}
# shellcheck disable=SC2086
named 2 'HM_ESTAT_*' 20 $enums
# shellcheck disable=SC2046
named 3 'HM_DSTAT_*' 10 $(sed -n '/^enum hm_daemon_stat {/,/^};/p' lib/include/hmirror/protocol.h |
	sed -n 's/^[[:space:]]*\(HM_DSTAT_[A-Z0-9_]*\).*/\1/p' | grep -vx HM_DSTAT_NR)
