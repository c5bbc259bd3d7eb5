#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/bench/guards-vm.sh [BENCH OPTIONS...]
#
# hmirror-bench guards inside the VM on both test kernels (6.1 and 6.12),
# with the module loaded, in one go; JSON lines on stdout, each prefixed
# with the kernel series.  Default options: a 64 MiB space, 1024 written
# pages, 3 rounds (QEMU TCG is slow).  Needs build/bin/hmirror-bench and
# the module (make build/bin/hmirror-bench module).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ $# -gt 0 ] || set -- --space-bytes 67108864 --written 1024 --rounds 3
cmd="modprobe hmirror; i=0; while [ ! -e /dev/hmirror ] && [ \$i -lt 20 ]; do sleep 0.1; i=\$((i+1)); done; build/bin/hmirror-bench guards --json $*"
rc=0
for k in 6.1 6.12; do
	tools/vm/run --kernel "$k" --timeout 600 -- sh -c "$cmd" 2>/dev/null |
		grep '^{' | sed "s/^{/{\"kernel\":\"$k\",/" || rc=1
done
exit $rc
