#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The GLSL route of the translator's toolchain, as a user meets it: install
# hmirror into a fresh prefix (make install-userspace), build the worked
# example of Documentation/shaders.rst from the installed copy with only
# what is installed (pkg-config, hmirror/lookup.glsl, hmirror-link,
# libhmirror), run it on the Vulkan device (lavapipe here) under
# validation, and check that hmirror-link refuses what it cannot link.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/hmirror-toolchain.XXXXXX")
trap 'rm -rf "$dir"' EXIT
prefix=$dir/prefix
echo "TAP version 13"
echo "1..4"

if env -u MAKEFLAGS -u MAKELEVEL make -s -C "$top" --no-print-directory HMIRROR_NO_DEPS=1 \
		PREFIX="$prefix" install-userspace >"$dir/install.log" 2>&1; then
	echo "ok 1 toolchain.install"
else
	sed 's/^/# /' "$dir/install.log" | tail -n 20
	echo "not ok 1 toolchain.install"
	for i in 2 3 4; do echo "not ok $i toolchain.after_install # not installed"; done
	exit 1
fi

export PATH=$prefix/bin:$PATH PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export LD_LIBRARY_PATH=$prefix/lib
ex=$dir/example
cp -r "$prefix/share/doc/hmirror/examples/glsl-translator" "$ex"
# nothing of the tree: the example's Makefile asks pkg-config for paths
if env -u MAKEFLAGS -u MAKELEVEL make -s -C "$ex" --no-print-directory >"$dir/build.log" 2>&1 &&
   ! grep -q -- "-I$top" "$dir/build.log"; then
	echo "ok 2 toolchain.example_builds_from_install"
else
	sed 's/^/# /' "$dir/build.log" | tail -n 20
	echo "not ok 2 toolchain.example_builds_from_install"
fi

(cd "$ex" && ./run-translated) >"$dir/run.out" 2>"$dir/run.err"
rc=$?
sed 's/^/# /' "$dir/run.err" | tail -n 10
last=$(tail -n 1 "$dir/run.out")
echo "# $last"
case "$rc $last" in
"0 run-translated: "*", 0 mismatches, validation on, 0 messages") echo "ok 3 toolchain.example_runs" ;;
*) echo "not ok 3 toolchain.example_runs # exit $rc" ;;
esac

# a module with neither the import nor the stand-in: a clear refusal,
# nothing written
printf '#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n' > "$dir/plain.comp"
glslangValidator -V --target-env vulkan1.2 -o "$dir/plain.spv" "$dir/plain.comp" >/dev/null
hmirror-link -o "$dir/out.spv" "$dir/plain.spv" 2>"$dir/link.err"
rc=$?
if [ $rc = 1 ] && grep -q 'neither imports hm_lookup' "$dir/link.err" && [ ! -e "$dir/out.spv" ]; then
	echo "ok 4 toolchain.link_refuses_a_module_without_the_helper"
else
	sed 's/^/# /' "$dir/link.err"
	echo "not ok 4 toolchain.link_refuses_a_module_without_the_helper # exit $rc"
fi
