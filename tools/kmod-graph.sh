#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/kmod-graph.sh OBJDIR [DIR...]: the call and include graph among the
# files of one or more directories of the tree, DIR (default kmod): their
# objects are OBJDIR/DIR/*.o (hmirror.ko's as tools/build-kmod.sh leaves
# them in build/kmod/KVER/src; the daemon's in build/obj, DIR daemon; the
# library's DIR lib and lib/engine), their sources OBJDIR/DIR/*.[ch] where
# the objects' build copied them, else DIR/*.[ch].  A file is its name
# without .c or .h (foo.c and foo.h are one file); with several DIRs, its
# path (lib/table and lib/engine/table are two files), and the DIRs make
# one graph, so that a circle through two directories is seen too.  An
# edge a -> b for each symbol a.o needs and b.o defines (a function called
# or an object used) and for each #include "b.h" in a.c or a.h that names
# a header of one of the DIRs (resolved from a's directory: "x.h",
# "../x.h").  Prints the edges, then any cycle; exits 1 if there is one.
set -eu

dir=${1:?usage: kmod-graph.sh OBJDIR [DIR...] (e.g. build/kmod/KVER/src, or build/obj daemon, or build/obj lib lib/engine)}
shift
[ $# -gt 0 ] || set -- kmod
qualify=
[ $# -gt 1 ] && qualify=1
for sub; do
	ls "$dir/$sub"/*.o >/dev/null 2>&1 || { echo "kmod-graph: no $dir/$sub/*.o" >&2; exit 2; }
done
# the sources of DIR $1: the build's copies, else the tree's
srcdir() {
	if ls "$dir/$1"/*.c >/dev/null 2>&1; then echo "$dir/$1"; else echo "$1"; fi
}
# the graph's name of file $2 of DIR $1
node() {
	if [ -n "$qualify" ]; then echo "$1/$2"; else echo "$2"; fi
}
for sub; do
	src=$(srcdir "$sub")
	for o in "$dir/$sub"/*.o; do
		case "$o" in *.mod.o) continue ;; esac
		f=$(basename "$o" .o)
		[ -f "$src/$f.c" ] || continue	# a stale object of a removed file
		n=$(node "$sub" "$f")
		nm "$o" | awk -v f="$n" '$1 == "U" { print "U", f, $2 } NF == 3 && $2 ~ /^[TDRB]$/ { print "D", f, $3 }'
	done
done | {
	cat
	# #include "x.h" of a header of one of the DIRs, resolved from the
	# including file's directory
	for sub; do
		src=$(srcdir "$sub")
		for s in "$src"/*.[ch]; do
			[ -f "$s" ] || continue
			f=$(basename "$s"); f=${f%.[ch]}
			sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$s" |
			while read -r h; do
				p=$(realpath -m "$src/$h.h")
				[ -f "$p" ] || continue
				for t; do
					[ "$(dirname "$p")" = "$(realpath -m "$(srcdir "$t")")" ] || continue
					echo "I $(node "$sub" "$f") $(node "$t" "$(basename "$h")").h"
				done
			done
		done
	done
} | python3 -c '
import sys
defs, uses = {}, []
for line in sys.stdin:
    k, f, s = line.split()
    if k == "D":
        defs[s] = f
    elif k == "I":
        uses.append((f, s))
        defs[s] = s[:-2]
    else:
        uses.append((f, s))
edges = {}
for f, s in uses:
    g = defs.get(s)
    if g and g != f:
        edges.setdefault(f, {}).setdefault(g, []).append(s)
for f in sorted(edges):
    for g in sorted(edges[f]):
        print("%s -> %s: %s" % (f, g, " ".join(sorted(set(edges[f][g])))))
# cycles: strongly connected components of more than one file
idx, low, st, on, sccs, n = {}, {}, [], set(), [], [0]
def visit(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, {}):
        if w not in idx:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: sccs.append(sorted(c))
nodes = set(edges) | {g for e in edges.values() for g in e}
for v in sorted(nodes):
    if v not in idx: visit(v)
for c in sccs:
    print("cycle: " + " ".join(c))
sys.exit(1 if sccs else 0)
'
