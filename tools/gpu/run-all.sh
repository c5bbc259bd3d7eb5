#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The H200 measurements in one device call each (Documentation/performance.rst).
#   tools/gpu/run-all.sh engine   CUDA anchors + tools/gpu/h200.sh (mirror, lookup)
#   tools/gpu/run-all.sh lookup   CUDA anchors + the lookup bench alone, three
#                                 runs (ONLY=lookup)
#   tools/gpu/run-all.sh compile  CUDA anchors + the compile time of modules of
#                                 many accesses in each call-site form
#   tools/gpu/run-all.sh d969a    CUDA anchors + issue 14: the load call site
#                                 beside raw (lookup x3), mirror 4G x3, both
#                                 tiers' compile times and first dispatch
#   tools/gpu/run-all.sh dispatch-ab  CUDA anchors + the dispatch overhead of
#                                 .oldd/hmirrord (an earlier build) and ours
#   tools/gpu/run-all.sh daemon   CUDA anchors + guards (userspace backends) +
#                                 tools/demo/measure.sh (dispatch bench, demo)
# Carried: .gl (Vulkan loader debs), .cuda (cuda_anchors.cu from shared/tools,
# never part of the project), .gpulibs (liburing, libnl-genl: the image lacks
# them), build/bin and build/share prebuilt here.  Every result is packed
# into $OUT/results.tgz (the device returns at most 8 files).
set -u
mode=${1:-engine}
cd "$(dirname "$0")/../.." || exit 1
res=/tmp/hmirror-results/$mode
mkdir -p "$res"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export LD_LIBRARY_PATH=$PWD/.gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HMIRROR_DEVICE=${HMIRROR_DEVICE:-NVIDIA}
pack() { tar czf "$OUT/results-$mode.tgz" -C /tmp/hmirror-results "$mode"; }
trap pack EXIT

if [ -f .cuda/cuda_anchors.cu ] && command -v nvcc >/dev/null; then
	(cd .cuda && nvcc -O2 -arch=sm_90 -o /tmp/cuda_anchors cuda_anchors.cu) &&
		timeout 120 /tmp/cuda_anchors > "$res/cuda_anchors.txt" 2>&1
	cat "$res/cuda_anchors.txt"
fi

case $mode in
engine)
	OUT=$res bash tools/gpu/h200.sh
	;;
lookup)
	ONLY=lookup OUT=$res bash tools/gpu/h200.sh
	;;
compile)
	ONLY=compile OUT=$res bash tools/gpu/h200.sh
	;;
d969a)
	H200_BUDGET=${H200_BUDGET:-450} ONLY=d969a OUT=$res bash tools/gpu/h200.sh
	;;
dispatch-ab)
	ONLY=dispatch-ab OLD_HMIRRORD=${OLD_HMIRRORD:-.oldd/hmirrord} OUT=$res bash tools/gpu/h200.sh
	;;
daemon)
	timeout 150 build/bin/hmirror-bench guards --backend uffd-async,uffd-sync,mprotect \
		--rounds 5 --json > "$res/guards.jsonl" 2>&1
	cat "$res/guards.jsonl"
	DEMO_SIZE=${DEMO_SIZE:-1024} timeout 360 sh tools/demo/measure.sh "$res"
	;;
esac
