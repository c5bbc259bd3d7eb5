#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/check.sh: every test of hmirror (what "make check" runs).
#
#   1. NATIVE_TESTS, one after the other, on this machine;
#   2. VM_TESTS inside one VM boot per test kernel (tools/vm/kernels), each
#      program under tools/vm/ktest; the boot itself (clean kernel log,
#      no time-out) counts as one test;
#   3. the Debian packages built, installed and used in a systemd VM
#      (tools/pkg/check-install.sh, make check-install);
#   4. static checks, one test each: checkpatch.pl --strict over kmod/ and
#      uapi/, sparse (make C=2) for each test kernel, and no cycle in the
#      call and include graph among kmod/ files, nor among the files of
#      daemon/, lib/ or lib/engine/, nor of lib/ and lib/engine/ together
#      (tools/kmod-graph.sh), and docutils
#      over Documentation/*.rst, failing on any warning or error
#      (tools/check-docs.py).
#
# Test programs speak TAP (kselftest harness): "ok", "not ok" and
# "ok ... # SKIP" lines are counted.  A program that crashes, times out or
# exits non-zero without a "not ok" line counts as one more failure; one
# that prints fewer results than its plan ("1..N") counts the missing ones
# as failures.  The last line is "N passed, N failed, N skipped"; the exit
# status is 1 if anything failed.
#
# Environment (the Makefile sets the first two):
#   NATIVE_TESTS, VM_TESTS    programs, separated by spaces
#   CHECK_KERNELS             kernel series for the VM, default all of
#                             tools/vm/kernels
#   CHECK_ONLY                subset of "native vm install static", default all
#   HMIRROR_INSTALL_TIMEOUT   seconds for check-install, default 1800
#   CHECK_BUILD_RC            exit status of the build before (one test)
#   HMIRROR_TEST_TIMEOUT      seconds per native test, default 300
#   HMIRROR_VM_TEST_TIMEOUT   seconds per VM test, default 600
#   CHECK_OUT                 where logs go, default build/check
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${CHECK_OUT:-build/check}
# One make check at a time in a tree (they share build/check): run again
# under flock; -o keeps the lock away from the tests' processes.
if [ -z "${HMIRROR_CHECK_LOCKED:-}" ]; then
	mkdir -p build
	export HMIRROR_CHECK_LOCKED=1
	flock -n -E 99 -o build/.check.lock "$0" "$@"
	rc=$?
	[ $rc = 99 ] || exit $rc
	echo "check: waiting for another make check in this tree to finish"
	exec flock -o build/.check.lock "$0" "$@"
fi
rm -rf "$out"
mkdir -p "$out"
check_start=$(date +%s)

NATIVE_TESTS=${NATIVE_TESTS:-}
VM_TESTS=${VM_TESTS:-}
CHECK_KERNELS=${CHECK_KERNELS:-$(awk '!/^[[:space:]]*(#|$)/ {printf "%s ", $1}' tools/vm/kernels)}
CHECK_ONLY=${CHECK_ONLY:-native vm install static}
tlimit=${HMIRROR_TEST_TIMEOUT:-300}
vlimit=${HMIRROR_VM_TEST_TIMEOUT:-600}	# TCG on a busy host is slow

npass=0 nfail=0 nskip=0
failures=()

want() { case " $CHECK_ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

# account NAME LOG RC: count the TAP results of one program.
account() {
	local name=$1 log=$2 rc=$3 secs=${4:-} p f s plan n why=
	p=$(grep -cE '^ok\b' "$log" 2>/dev/null)
	s=$(grep -ciE '^ok\b.*#[[:space:]]*skip' "$log" 2>/dev/null)
	f=$(grep -cE '^not ok\b' "$log" 2>/dev/null)
	p=$((p - s))
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$log" 2>/dev/null | tail -n1)
	n=$((p + s + f))
	if [ -n "$plan" ] && [ "$n" -lt "$plan" ]; then
		f=$((f + plan - n))
		why="$((plan - n)) of $plan results missing"
	fi
	# a crash, time-out or error exit counts as one failure unless a
	# "not ok" line or a missing result already says so
	local w=
	case "$rc" in
	0) [ $n = 0 ] && w="no TAP results" ;;
	4) [ $n = 0 ] && s=$((s + 1)) ;;
	124|137) w="timed out" ;;
	none) w="did not finish" ;;
	notbuilt) w="not built" ;;
	1) [ "$f" = 0 ] && w="exit status 1" ;;	# the harness's "some failed"
	*) if [ "$rc" -gt 128 ]; then w="killed by signal $((rc - 128))"
	   else w="exit status $rc"; fi ;;
	esac
	if [ -n "$w" ]; then
		[ "$f" = 0 ] && f=1
		why="$w${why:+, $why}"
	fi
	npass=$((npass + p)); nfail=$((nfail + f)); nskip=$((nskip + s))
	if [ "$f" -gt 0 ]; then
		printf '  FAIL %-40s %d passed, %d failed, %d skipped%s%s\n' "$name" "$p" "$f" "$s" \
			"${secs:+, ${secs}s}" "${why:+ ($why)}"
		while read -r l; do failures+=("$name: $l"); done < <(grep -E '^not ok\b' "$log" 2>/dev/null | head -n 20)
		[ -n "$why" ] && failures+=("$name: $why")
		failures+=("$name: log in $log")
	else
		printf '  ok   %-40s %d passed, %d skipped%s\n' "$name" "$p" "$s" "${secs:+, ${secs}s}"
	fi
}

# one NAME RC LOG: a check that is a single test (static checks, VM boot).
one() {
	local name=$1 rc=$2 log=$3
	case "$rc" in
	0) npass=$((npass + 1)); printf '  ok   %s\n' "$name" ;;
	skip) nskip=$((nskip + 1)); printf '  skip %s (%s)\n' "$name" "$log" ;;
	*) nfail=$((nfail + 1)); printf '  FAIL %s\n' "$name"
	   while read -r l; do failures+=("$name: $l"); done < <(grep -E 'warning|error|ERROR|WARNING|CHECK|^vm:' "$log" |
		grep -vE '^total:|^[[:space:]]+CHECK[[:space:]]' | head -n 10)
	   failures+=("$name: log in $log") ;;
	esac
}

# ---- 0. the build (make check's make -k all, done before this script) -
if [ -n "${CHECK_BUILD_RC:-}" ]; then
	echo "== build"
	if [ "$CHECK_BUILD_RC" = 0 ]; then
		one "build (make all + test programs + modules)" 0 /dev/null
	else
		nfail=$((nfail + 1))
		echo "  FAIL build (make all + test programs + modules)"
		failures+=("build: make -k all exited $CHECK_BUILD_RC (see its output above)")
	fi
fi

# ---- 1. native tests ------------------------------------------------
if want native; then
	echo "== native tests ($(uname -r))"
	mkdir -p "$out/native"
	for t in $NATIVE_TESTS; do
		name=$(basename "$t")
		log=$out/native/$name.log
		if [ ! -x "$t" ]; then
			echo "not built: $t" > "$log"; account "native/$name" "$log" notbuilt; continue
		fi
		# (in a subshell whose stderr is dropped: no "Segmentation fault"
		# from the shell; the count below says it)
		t0=$(date +%s)
		case "$t" in /*) run=$t ;; *) run=./$t ;; esac
		(timeout -k 5 "$tlimit" "$run" </dev/null >"$log" 2>&1; exit $?) 2>/dev/null
		rc=$?
		account "native/$name" "$log" $rc $(( $(date +%s) - t0 ))
	done
fi

# ---- 2. VM tests: one boot per kernel --------------------------------
if want vm; then
	for k in $CHECK_KERNELS; do
		read -r _ kver _ _ < <(tools/vm/kernel.sh "$k") || kver=
		if [ -z "$kver" ]; then
			one "vm-$k/boot" 1 /dev/null
			failures+=("vm-$k: no Debian $k kernel with headers unpacked under build/kernels (tools/deps.sh)")
			continue
		fi
		echo "== VM tests, $kver (QEMU TCG)"
		d=$out/vm-$k
		mkdir -p "$d"
		n=$(echo $VM_TESTS | wc -w)
		start=$(date +%s)
		tools/vm/run --kernel "$k" --append numa=fake=2 --scratch "$d" --timeout $((120 + n * vlimit)) -- \
			tools/vm/run-tests --timeout "$vlimit" "$d" $VM_TESTS > "$d/boot.log" 2>&1
		rc=$?
		boot=$(sed -n 's/^vm: .*(boot \([0-9.]*\)s)$/\1/p' "$d/boot.log" | tail -n1)
		echo "  (VM $kver: ${boot:-?}s to boot, $(( $(date +%s) - start ))s in all for $n programs)"
		for t in $VM_TESTS; do
			name=$(basename "$t")
			if [ -f "$d/$name.rc" ]; then
				account "vm-$k/$name" "$d/$name.tap" "$(cat "$d/$name.rc")" \
					"$(cat "$d/$name.secs" 2>/dev/null)"
			else
				[ -f "$d/$name.tap" ] || : > "$d/$name.tap"
				account "vm-$k/$name" "$d/$name.tap" none
			fi
		done
		one "vm-$k/boot (clean kernel log, no time-out)" "$rc" "$d/boot.log"
	done
fi

# ---- 3. the Debian packages, installed and used in a VM ---------------
# (make check-install: tools/pkg/check-install.sh; most of its time is
# DKMS building the module under TCG)
if want install; then
	echo "== packages (make check-install, QEMU TCG)"
	mkdir -p "$out/install"
	log=$out/install/check-install.log
	t0=$(date +%s)
	(timeout -k 5 "${HMIRROR_INSTALL_TIMEOUT:-1800}" tools/pkg/check-install.sh \
		</dev/null >"$log" 2>&1; exit $?) 2>/dev/null
	rc=$?
	account "install/check-install" "$log" $rc $(( $(date +%s) - t0 ))
fi

# ---- 4. static checks ------------------------------------------------
if want static; then
	echo "== static checks"
	mkdir -p "$out/static"
	# the reStructuredText of Documentation/: any docutils message at
	# warning level or above fails (Debian's python3 has python3-docutils,
	# tools/deps.sh; another python3 first in PATH may lack it)
	docs=$(ls Documentation/*.rst 2>/dev/null)
	log=$out/static/docutils.log
	py=/usr/bin/python3
	[ -x "$py" ] || py=python3
	"$py" tools/check-docs.py $docs >"$log" 2>&1
	rc=$?
	one "docutils over Documentation/ ($(echo $docs | wc -w) files, warnings fail)" $rc "$log"
	src=$(ls kmod/*.[ch] uapi/linux/*.h 2>/dev/null)
	log=$out/static/checkpatch.log
	if [ -z "$src" ]; then
		one "checkpatch --strict" skip "no kmod/ or uapi/ sources"
	elif [ ! -x build/ksft/scripts/checkpatch.pl ]; then
		echo "no build/ksft/scripts/checkpatch.pl (make build/ksft/.stamp)" > "$log"
		one "checkpatch --strict" 1 "$log"
	else
		build/ksft/scripts/checkpatch.pl --strict --no-tree --show-types --terse -f $src >"$log" 2>&1
		rc=$?
		one "checkpatch --strict ($(echo $src | wc -w) files)" $rc "$log"
	fi
	for k in $CHECK_KERNELS; do
		log=$out/static/sparse-$k.log
		: > "$log"
		if [ ! -f Kbuild ]; then
			one "sparse $k" skip "no Kbuild"; continue
		fi
		if ! read -r _ kver _ kdir < <(tools/vm/kernel.sh "$k"); then
			echo "no $k kernel with headers under build/kernels" > "$log"; one "sparse $k" 1 "$log"; continue
		fi
		# A kernel built in a build root is checked by the sparse deps.sh
		# unpacked there (its release's own is too old for its headers);
		# KBUILD_CHECKSRC=2 is C=2 without scripts/checker-valid.sh, which
		# Debian's kbuild package lacks (kbuild would turn sparse off).
		chk="C=2 CHECK=sparse"
		case "$kdir" in
		"$top"/build/roots/*)
			r=${kdir#"$top"/build/roots/}; r=$top/build/roots/${r%%/*}
			chk="KBUILD_CHECKSRC=2 CHECK=/opt/sparse/usr/bin/sparse"
			[ -x "$r/opt/sparse/usr/bin/sparse" ] ||
				echo "error: no $r/opt/sparse/usr/bin/sparse (tools/deps.sh)" >>"$log" ;;
		esac
		tools/build-kmod.sh "$kdir" "build/kmod/$kver" $chk >>"$log" 2>&1
		rc=$?
		# any diagnostic at all fails the check, and so does a run in
		# which sparse checked nothing; kbuild's "not available" line
		# too, unless KBUILD_CHECKSRC is forced (then the missing
		# checker-valid.sh printed it, not sparse)
		bad='(warning|error):'
		case "$chk" in C=*) bad="$bad|not available or not up to date" ;; esac
		if [ $rc = 0 ] && grep -qE "$bad" "$log"; then rc=1; fi
		if [ $rc = 0 ] && ! grep -qE '^[[:space:]]+CHECK[[:space:]]' "$log"; then
			echo "error: sparse checked no file" >>"$log"; rc=1
		fi
		one "sparse $k ($kver)" $rc "$log"
		# the call graph among kmod/ files, from the objects just built
		# (once: it is the same for every kernel)
		if [ -z "${graph_done:-}" ] && [ $rc = 0 ]; then
			graph_done=1
			glog=$out/static/kmod-graph.log
			tools/kmod-graph.sh "build/kmod/$kver/src" >"$glog" 2>&1
			grc=$?
			[ $grc = 0 ] || grep '^cycle:' "$glog" | sed 's/^/error: /' >>"$glog"
			one "kmod call graph without cycles ($kver)" $grc "$glog"
		fi
	done
	# the call and include graph among the files of each userspace
	# directory, from the objects the build left in build/obj; then lib/
	# and lib/engine/ as one graph (an edge each way between them is a
	# circle neither directory's own graph shows)
	for d in daemon lib lib/engine "lib lib/engine"; do
		glog=$out/static/$(echo "$d" | tr '/ ' '-+')-graph.log
		# shellcheck disable=SC2086 # "lib lib/engine": two directories
		tools/kmod-graph.sh build/obj $d >"$glog" 2>&1
		grc=$?
		[ $grc = 0 ] || grep '^cycle:' "$glog" | sed 's/^/error: /' >>"$glog"
		one "$(echo "$d" | sed 's/ / + /') call and include graph without cycles" $grc "$glog"
	done
fi

if [ ${#failures[@]} -gt 0 ]; then
	echo "== failures"
	printf '  %s\n' "${failures[@]}"
fi
echo "(make check: $(( $(date +%s) - check_start ))s of tests, after the build)"
echo "$npass passed, $nfail failed, $nskip skipped"
[ "$nfail" = 0 ]
