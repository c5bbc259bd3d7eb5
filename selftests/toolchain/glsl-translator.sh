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
echo "1..6"

if env -u MAKEFLAGS -u MAKELEVEL make -s -C "$top" --no-print-directory HMIRROR_NO_DEPS=1 \
		PREFIX="$prefix" install-userspace >"$dir/install.log" 2>&1; then
	echo "ok 1 toolchain.install"
else
	sed 's/^/# /' "$dir/install.log" | tail -n 20
	echo "not ok 1 toolchain.install"
	for i in 2 3 4 5 6; do echo "not ok $i toolchain.after_install # not installed"; done
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

# the load stand-ins (D969a): each gets the library's two forms of its
# width, and no stand-in is left
cat > "$dir/loads.comp" <<'EOF2'
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "hmirror/lookup.glsl"
layout(local_size_x = 1) in;
layout(push_constant) uniform P { uint64_t t; uint n, s; uint64_t m, wd, wf, wl, g; } pc;
layout(set = 0, binding = 0) buffer O { uvec4 v; uint x; } o;
void main()
{
	o.v = hm_load4(pc.g, pc.t, pc.n, pc.s, pc.m, pc.wd, pc.wf, pc.wl);
	o.x = hm_load1(pc.g + 16, pc.t, pc.n, pc.s, pc.m, pc.wd, pc.wf, pc.wl);
}
EOF2
inc=$(pkg-config --variable=glsl_includedir hmirror)
if glslangValidator -V --target-env vulkan1.2 -I"$inc" -o "$dir/loads.spv" "$dir/loads.comp" \
		>"$dir/loads.log" 2>&1 &&
   hmirror-link -o "$dir/loads-linked.spv" "$dir/loads.spv" >>"$dir/loads.log" 2>&1 &&
   spirv-dis "$dir/loads-linked.spv" >"$dir/loads.dis" 2>>"$dir/loads.log" &&
   [ "$(grep -cE 'OpName %[a-z_0-9]+ "hm_load\.(compact|spec)\.(1|4)"' "$dir/loads.dis")" = 4 ] &&
   ! grep -q 'hm_load[0-9]_stub' "$dir/loads.dis"; then
	echo "ok 5 toolchain.load_stand_ins_link"
else
	sed 's/^/# /' "$dir/loads.log" | tail -n 10
	echo "not ok 5 toolchain.load_stand_ins_link"
fi

# a load stand-in of another signature: refused, nothing written
printf '#version 450\nlayout(local_size_x = 1) in;\nuint hm_load2_stub(uint g) { return g; }\nlayout(set = 0, binding = 0) buffer O { uint x; } o;\nvoid main() { o.x = hm_load2_stub(o.x); }\n' \
	> "$dir/bad.comp"
glslangValidator -V --target-env vulkan1.2 -o "$dir/bad.spv" "$dir/bad.comp" >/dev/null
hmirror-link -o "$dir/bad-out.spv" "$dir/bad.spv" 2>"$dir/bad.err"
rc=$?
if [ $rc = 1 ] && grep -q 'signature' "$dir/bad.err" && [ ! -e "$dir/bad-out.spv" ]; then
	echo "ok 6 toolchain.link_refuses_a_load_stand_in_of_another_signature"
else
	sed 's/^/# /' "$dir/bad.err"
	echo "not ok 6 toolchain.link_refuses_a_load_stand_in_of_another_signature # exit $rc"
fi
