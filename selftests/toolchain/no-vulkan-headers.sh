#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A client of the daemon alone builds without the Vulkan headers: client.h
# and protocol.h (advice.h for HM_ADVICE_*, the uapi for the push limit)
# pull in nothing of vulkan.h.  A vulkan/vulkan.h that is an #error stands
# first on the include path; engine.h, which needs it, must hit it (the
# negative control).  TAP.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/inc/vulkan"
echo '#error "vulkan.h included"' >"$tmp/inc/vulkan/vulkan.h"
cat >"$tmp/client.c" <<'EOC'
#include <hmirror/client.h>
int advice = HM_ADVICE_READ_MOSTLY;
unsigned push = HM_PROTO_MAX_PUSH;
EOC
cat >"$tmp/engine.c" <<'EOC'
#include <hmirror/engine.h>
int advice = HM_ADVICE_READ_MOSTLY;
EOC
echo "1..2"
if $cc -I"$tmp/inc" -Iuapi -Ilib/include -c -o "$tmp/client.o" "$tmp/client.c" 2>"$tmp/err"; then
	echo "ok 1 client.h and HM_ADVICE_* build without vulkan.h"
else
	echo "not ok 1 client.h needs vulkan.h: $(head -c 300 "$tmp/err")"
fi
if $cc -I"$tmp/inc" -Iuapi -Ilib/include -c -o "$tmp/engine.o" "$tmp/engine.c" 2>/dev/null; then
	echo "not ok 2 the stand-in vulkan.h was not seen (engine.h built)"
else
	echo "ok 2 engine.h reaches the stand-in vulkan.h (negative control)"
fi
