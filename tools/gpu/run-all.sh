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
#   tools/gpu/run-all.sh tiers    CUDA anchors + issue 14's compile times and
#                                 first dispatch alone, TIER_ROUNDS rounds
#   tools/gpu/run-all.sh dispatch-ab  CUDA anchors + the dispatch overhead of
#                                 .oldd/hmirrord (an earlier build) and ours
#   tools/gpu/run-all.sh daemon   CUDA anchors + guards (userspace backends) +
#                                 tools/demo/measure.sh (dispatch bench, demo)
#   tools/gpu/run-all.sh probe    CUDA anchors + guards (uffd-async) beside 0,
#                                 2, 8 and 15 threads spinning in the same
#                                 process (what a write-protecting scan's
#                                 TLB flush costs per CPU the space is live
#                                 on) + test-daemon's timeline test in the
#                                 test's own device
#   tools/gpu/run-all.sh gmap     CUDA anchors + hmirror-bench gmap, three runs
#                                 (a 16 GiB space added, mapped, one chunk
#                                 touched: what the driver makes resident)
#   tools/gpu/run-all.sh workload CUDA anchors + hmirror-bench workload, every
#                                 mode side by side (the CUDA ones from
#                                 build/bin/hmirror-bench-uvm.so: make
#                                 bench-uvm here first), WL_ROUNDS rounds
#                                 (3), WL_ARGS added; with .old/hmirror-bench
#                                 (+ .old/hmirrord) carried, one round of its
#                                 engine modes (WL_OLD_ROUNDS: more) after
#                                 ours (the build before a
#                                 change); WL_EXTRA: more runs, one a line
#                                 (label: [VAR=value ...] args), e.g. other
#                                 chunk sizes or HMIRROR_SCAN_THREADS=1;
#                                 uvm is added to each one's --modes:
#                                 runs without a CUDA mode after the
#                                 first met a slowed walk (performance.rst)
# Carried: .gl (the Vulkan loader and libglvnd debs: libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2, fetched as the device README says), .cuda (cuda_anchors.cu from shared/tools,
# never part of the project), .gpulibs (liburing, libnl-genl: the image lacks
# them), build/bin and build/share prebuilt here.  Every result is packed
# into $OUT/results.tgz (the device returns at most 8 files).
set -u
mode=${1:-engine}
cd "$(dirname "$0")/../.." || exit 1
res=/tmp/hmirror-results/$mode
mkdir -p "$res"
# the Vulkan loader and libglvnd from the carried debs: an image may have
# the loader but not libglvnd, and then finds no NVIDIA driver
# ("Could not get 'vkCreateInstance' ... for ICD libGLX_nvidia.so.0")
if ls .gl/*.deb >/dev/null 2>&1; then
	for f in .gl/*.deb; do dpkg -x "$f" /; done
	ldconfig
fi
if [ -z "${VK_DRIVER_FILES:-}" ]; then
	for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
		 /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
		if [ -f "$j" ]; then export VK_DRIVER_FILES=$j; break; fi
	done
fi
export LD_LIBRARY_PATH=$PWD/.gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HMIRROR_DEVICE=${HMIRROR_DEVICE:-NVIDIA}
pack() { tar czf "$OUT/results-$mode.tgz" -C /tmp/hmirror-results "$mode"; }
trap pack EXIT

# SKIP_ANCHORS=1: a second mode in the same call (the anchors ran in the first)
if [ -z "${SKIP_ANCHORS:-}" ] && [ -f .cuda/cuda_anchors.cu ] && command -v nvcc >/dev/null; then
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
tiers)
	# issue 14's first-dispatch target alone: TIER_SITES (250,1000,4000),
	# TIER_ROUNDS rounds (3) of each tier's compile and first dispatch
	timeout 500 build/bin/hmirror-bench mirror --json --tiers "${TIER_SITES:-250,1000,4000}" \
		--rounds "${TIER_ROUNDS:-3}" > "$res/tiers.jsonl" 2> "$res/tiers.log"
	echo "tiers: exit $?"
	cat "$res/tiers.jsonl" "$res/tiers.log"
	;;
d969a)
	H200_BUDGET=${H200_BUDGET:-450} ONLY=d969a OUT=$res bash tools/gpu/h200.sh
	;;
dispatch-ab)
	ONLY=dispatch-ab OLD_HMIRRORD=${OLD_HMIRRORD:-.oldd/hmirrord} OUT=$res bash tools/gpu/h200.sh
	;;
workload)
	# every run's limit is cut to what is left of WL_BUDGET seconds (540)
	wl() {	# wl LABEL WANTED_S BINARY ARGS...: one run, JSON lines + its log
		local label=$1 want=$2 bin=$3 left
		shift 3
		left=$(( ${WL_BUDGET:-540} - SECONDS - 15 ))
		[ "$left" -lt "$want" ] && want=$left
		if [ "$want" -lt 30 ]; then echo "== workload $label: no time left"; return; fi
		echo "== workload $label (${want} s at most): $*"
		# shellcheck disable=SC2086
		timeout --foreground -s INT -k 20 "$want" env ${wl_env:-} "$bin" workload --json --timeline \
			"$@" > "$res/workload-$label.jsonl" 2> "$res/workload-$label.log"
		echo "exit $?"
		grep -v '^  ' "$res/workload-$label.log" | tail -n 14
	}
	wl after 420 build/bin/hmirror-bench --rounds "${WL_ROUNDS:-3}" \
		--plot "$res/workload.png" ${WL_ARGS:-}
	if [ -x .old/hmirror-bench ]; then
		wl before 150 .old/hmirror-bench --modes ideal,hmirror,hmirror-daemon \
			--rounds "${WL_OLD_ROUNDS:-1}" ${WL_ARGS:-}
	fi
	printf '%s\n' "${WL_EXTRA:-}" | while IFS=: read -r label args; do
		[ -n "$label" ] || continue
		# leading VAR=value words: the run's environment
		wl_env=
		for a in $args; do
			case $a in *=*) wl_env="$wl_env $a"; args=${args#*"$a"} ;; *) break ;; esac
		done
		# uvm beside every run (see the header): added to its --modes
		if [ -f build/bin/hmirror-bench-uvm.so ]; then
			case " $args" in
			*" --modes "*uvm*) ;;
			*" --modes "*) args=$(printf '%s' "$args" |
					      sed 's/--modes \([^ ]*\)/--modes \1,uvm/') ;;
			esac
		fi
		# shellcheck disable=SC2086
		wl "$label" 150 build/bin/hmirror-bench $args
	done
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
		--format=csv > "$res/nvidia-smi.txt" 2>&1
	;;
gmap)
	for i in 1 2 3; do
		timeout 120 build/bin/hmirror-bench gmap --json >> "$res/gmap.jsonl" 2>&1
	done
	cat "$res/gmap.jsonl"
	;;
probe)
	uname -r > "$res/uname.txt"; nproc >> "$res/uname.txt"
	for n in 0 2 8 15; do
		timeout 120 build/bin/hmirror-bench guards --backend uffd-async --rounds 7 \
			--spin $n --json >> "$res/guards-spin.jsonl" 2>&1
	done
	cat "$res/uname.txt" "$res/guards-spin.jsonl"
	# no validation layers there: without this the daemon has no engine
	HMIRROR_VALIDATION=0 HMIRROR_TEST_ONLY=timeline_semaphore timeout 150 build/bin/test-daemon \
		> "$res/test-daemon-timeline.txt" 2>&1
	tail -n 5 "$res/test-daemon-timeline.txt"
	;;
daemon)
	timeout 150 build/bin/hmirror-bench guards --backend uffd-async,uffd-sync,mprotect \
		--rounds 5 --json > "$res/guards.jsonl" 2>&1
	cat "$res/guards.jsonl"
	DEMO_SIZE=${DEMO_SIZE:-1024} timeout 360 sh tools/demo/measure.sh "$res"
	;;
esac
