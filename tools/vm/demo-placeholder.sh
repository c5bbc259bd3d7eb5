#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# demo-placeholder.sh VM_TEST...: what "make demo" runs until the real demo
# (tools/demo/) exists.  Runs inside the VM (tools/vm/run).  It says what it
# shows and what it does not.
echo "hmirror demo placeholder: the demo (tools/demo/) is not written yet."
echo "What this shows: hmirror.ko loading in a $(uname -r) VM under QEMU TCG,"
echo "the module's VM tests running, its debugfs counters, and a clean unload."
echo "It does not use a GPU and does not mirror anything."
echo
rc=0
if modprobe hmirror; then
	echo "modprobe hmirror: ok"
	ls -l /dev/hmirror
else
	echo "modprobe hmirror: FAILED"
	rc=1
fi
for t in "$@"; do
	echo "== $t"
	tools/vm/ktest -- "$t" >/tmp/demo.out 2>&1 || rc=1
	grep -E '^(not )?ok|^# Totals' /tmp/demo.out
done
modprobe hmirror 2>/dev/null
for f in /sys/kernel/debug/hmirror/*; do
	[ -f "$f" ] || continue
	echo "== $f"
	sed 's/^/  /' "$f"
done
if modprobe -r hmirror; then echo "modprobe -r hmirror: ok"; else echo "modprobe -r hmirror: FAILED"; rc=1; fi
[ $rc = 0 ] || echo "some of the above FAILED"
exit $rc
