#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# check-selftest.sh: tests of tools/check.sh's counting (TAP output).
# Each case runs check.sh on fake test programs and compares its summary
# line with what the case must give.  Runs natively (make check lists it).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmirror-check-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

prog() {	# prog NAME BODY: a fake test program
	printf '#!/bin/sh\n%s\n' "$2" > "$tmp/$1"
	chmod +x "$tmp/$1"
}
prog pass	'echo "1..2"; echo "ok 1 a"; echo "ok 2 b"'
prog fail	'echo "1..2"; echo "ok 1 a"; echo "not ok 2 b"; exit 1'
prog skip	'echo "1..2"; echo "ok 1 a # SKIP no device"; echo "ok 2 b"'
prog crash	'echo "1..3"; echo "ok 1 a"; kill -SEGV $$'
prog short	'echo "1..3"; echo "ok 1 a"'
prog notap	'echo "all fine"'
prog badexit	'echo "ok 1 a"; exit 3'
prog skipall	'echo "no hardware"; exit 4'
prog slow	'echo "1..1"; sleep 30; echo "ok 1 a"'
prog indent	'echo "1..1"; echo "    ok 1 nested"; echo "    not ok 2 nested"; echo "ok 1 a"'

n=0 failed=0
case_() {	# case_ NAME "EXPECTED SUMMARY" PROGRAMS...
	local name=$1 want=$2 got
	shift 2
	n=$((n + 1))
	got=$(cd "$top" && env -u CHECK_BUILD_RC -u VM_TESTS CHECK_ONLY=native CHECK_OUT="$tmp/out" HMIRROR_CHECK_LOCKED=1 \
		HMIRROR_TEST_TIMEOUT=2 NATIVE_TESTS="$*" tools/check.sh 2>&1 | tail -n1)
	if [ "$got" = "$want" ]; then
		echo "ok $n $name"
	else
		echo "# expected: $want"
		echo "# got:      $got"
		echo "not ok $n $name"
		failed=1
	fi
}
echo "1..11"
case_ all_pass		"2 passed, 0 failed, 0 skipped"	"$tmp/pass"
case_ not_ok_counts	"1 passed, 1 failed, 0 skipped"	"$tmp/fail"
case_ skip_counts	"1 passed, 0 failed, 1 skipped"	"$tmp/skip"
case_ crash_fails	"1 passed, 2 failed, 0 skipped"	"$tmp/crash"
case_ missing_results	"1 passed, 2 failed, 0 skipped"	"$tmp/short"
case_ no_tap_fails	"0 passed, 1 failed, 0 skipped"	"$tmp/notap"
case_ bad_exit_fails	"1 passed, 1 failed, 0 skipped"	"$tmp/badexit"
case_ exit4_skips	"0 passed, 0 failed, 1 skipped"	"$tmp/skipall"
case_ timeout_fails	"0 passed, 1 failed, 0 skipped"	"$tmp/slow"
case_ nested_ignored	"1 passed, 0 failed, 0 skipped"	"$tmp/indent"
case_ sums_and_missing	"4 passed, 2 failed, 1 skipped"	"$tmp/pass $tmp/fail $tmp/skip $tmp/nonexistent"
exit $failed
