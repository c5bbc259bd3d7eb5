#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/kmod-graph.sh OBJDIR [DIR]: the call and include graph among the
# files of one directory of the tree, DIR (default kmod): its objects are
# OBJDIR/DIR/*.o (hmirror.ko's as tools/build-kmod.sh leaves them in
# build/kmod/KVER/src; the daemon's in build/obj, DIR daemon; the
# library's DIR lib and lib/engine), its sources
# OBJDIR/DIR/*.[ch] where the objects' build copied them, else DIR/*.[ch].
# A file is its name without .c or .h (foo.c and foo.h are one file).  An
# edge a -> b for each symbol a.o needs and b.o defines (a function called
# or an object used) and for each #include "b.h" in a.c or a.h.  Prints
# the edges, then any cycle; exits 1 if there is one.
set -eu

dir=${1:?usage: kmod-graph.sh OBJDIR [DIR] (e.g. build/kmod/KVER/src, or build/obj daemon)}
sub=${2:-kmod}
ls "$dir/$sub"/*.o >/dev/null 2>&1 || { echo "kmod-graph: no $dir/$sub/*.o" >&2; exit 2; }
src=$dir/$sub
ls "$src"/*.c >/dev/null 2>&1 || src=$sub
for o in "$dir/$sub"/*.o; do
	case "$o" in *.mod.o) continue ;; esac
	f=$(basename "$o" .o)
	[ -f "$src/$f.c" ] || continue	# a stale object of a removed file
	nm "$o" | awk -v f="$f" '$1 == "U" { print "U", f, $2 } NF == 3 && $2 ~ /^[TDRB]$/ { print "D", f, $3 }'
done | {
	cat
	# #include "x.h" of a header of the same directory
	for s in "$src"/*.[ch]; do
		[ -f "$s" ] || continue
		f=$(basename "$s"); f=${f%.[ch]}
		sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"/]*\)\.h".*/\1/p' "$s" |
		while read -r h; do
			[ -f "$src/$h.h" ] && echo "I $f $h.h"
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
