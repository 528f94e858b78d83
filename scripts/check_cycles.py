#!/usr/bin/env python3
"""Fails when two source files of the library depend on each other, directly
or through others: reads what each object file defines and leaves undefined
(nm) and looks for cycles in the graph of files. Usage:
check_cycles.py OBJECT_DIR (the build's CMakeFiles/tutti_objects.dir)."""
import glob
import os
import subprocess
import sys


def symbols(path):
    defined, undefined = set(), set()
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
    return defined, undefined


def main():
    root = sys.argv[1]
    objs = sorted(glob.glob(os.path.join(root, "**", "*.o"), recursive=True))
    if not objs:
        print(f"check_cycles: no object files under {root}")
        return 1
    defs, uses = {}, {}
    for o in objs:
        name = os.path.relpath(o, root).removesuffix(".o")
        defs[name], uses[name] = symbols(o)
    owner = {s: f for f, d in defs.items() for s in d}
    graph = {f: {owner[s] for s in uses[f] if owner.get(s, f) != f} for f in defs}
    # Tarjan's strongly connected components, iteratively.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    for comp in comps:
        print("files that depend on each other: " + ", ".join(comp))
        for f in comp:
            needs = sorted(s for s in uses[f] if owner.get(s) in comp and owner.get(s) != f)
            print(f"  {f} uses {', '.join(needs)}")
    print(f"check_cycles: {len(objs)} files, {len(comps)} cycles")
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())
