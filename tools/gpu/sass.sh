#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/gpu/sass.sh DIR: disassemble the pipelines that
# `hmirror-bench lookup --dump-pipelines DIR` wrote (DIR/NAME.cache) with
# the CUDA toolkit's nvdisasm, where the pipeline cache holds an ELF image
# (NVIDIA).  Writes DIR/NAME.sass; prints the instruction count of each.
set -u
dir=$1
cd "$(dirname "$0")" || exit 1
cc -O2 -o /tmp/elfcut elfcut.c || exit 1
dis=$(command -v nvdisasm || ls /usr/local/cuda/bin/nvdisasm 2>/dev/null)
for c in "$dir"/*.cache; do
	[ -e "$c" ] || continue
	name=${c%.cache}
	/tmp/elfcut "$c" "$name"
	for e in "$name".*.elf; do
		[ -e "$e" ] || continue
		if [ -n "$dis" ]; then
			"$dis" -c -hex "$e" > "${e%.elf}.sass" 2>&1 ||
				"$dis" "$e" > "${e%.elf}.sass" 2>&1
			echo "$e: $(grep -c '/\*[0-9a-f]*\*/' "${e%.elf}.sass") instructions"
		fi
	done
done
