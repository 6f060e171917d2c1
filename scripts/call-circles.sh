#!/usr/bin/env bash
# Lists the call circles between the files of src/: sets of files that
# reach each other through the named (non-static) functions and data they
# use, read with nm from the objects of a build (issue 19: files call
# down, never round a circle; docs/conventions.md "Layout").  A reference
# is a call or a function's address handed on (a callback), so a circle
# here can also be a registration, e.g. a listener handing its accept
# callback to libuv.  Exit status 1 when there is a circle.
#
#   scripts/call-circles.sh [BUILD]    BUILD defaults to build/release
#
# Build first (make -j2 all); only the objects that exist are read.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build/release}
[ -d "$build/src" ] || { echo "call-circles: no objects under $build/src (build first)" >&2; exit 2; }
exec python3 - "$build" <<'PY'
import collections, glob, subprocess, sys
build = sys.argv[1]
defs, uses = {}, collections.defaultdict(set)
for o in sorted(glob.glob(build + '/src/**/*.o', recursive=True)):
    f = o[len(build) + 1:-2] + '.c'
    for line in subprocess.run(['nm', o], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBR':
            defs.setdefault(p[2], set()).add(f)
        elif len(p) == 2 and p[0] == 'U':
            uses[f].add(p[1])
edges = collections.defaultdict(set)
why = collections.defaultdict(set)
for f, syms in uses.items():
    for s in syms:
        for g in defs.get(s, ()):
            if g != f:
                edges[f].add(g)
                why[f, g].add(s)
# Strongly connected components (Tarjan), iteratively.
index, low, on, stack, out, n = {}, {}, set(), [], [], 0
for root in sorted(set(edges) | {g for v in edges.values() for g in v}):
    if root in index:
        continue
    work = [(root, iter(sorted(edges.get(root, ()))))]
    index[root] = low[root] = n; n += 1; stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is None:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop(); on.discard(x); comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
        elif w not in index:
            index[w] = low[w] = n; n += 1; stack.append(w); on.add(w)
            work.append((w, iter(sorted(edges.get(w, ())))))
        elif w in on:
            low[v] = min(low[v], index[w])
for comp in out:
    print('circle of %d files: %s' % (len(comp), ' '.join(comp)))
    for a in comp:
        for b in comp:
            if (a, b) in why:
                print('  %s -> %s: %s' % (a, b, ', '.join(sorted(why[a, b])[:6])))
print('%d circle(s)' % len(out))
sys.exit(1 if out else 0)
PY
