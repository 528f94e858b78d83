#!/usr/bin/env python3
"""Checks who calls whom in the library, from what each object file defines
and leaves undefined (nm):
- no two source files depend on each other, directly or through others;
- no two folders of src/ depend on each other, directly or through others;
- no folder calls a folder above it in the layer order (LAYERS below), nor
  a sibling of its own layer; a folder the order does not place fails.
Usage: check_cycles.py [--report-layers] OBJECT_DIR [SOURCE_DIR]: OBJECT_DIR
is the build's CMakeFiles/tutti_objects.dir; with SOURCE_DIR, objects whose
source file is gone (a build tree that outlived a move) are left out;
--report-layers prints calls against the layer order without failing on them. check_cycles.py --self-test checks the
checks on made-up graphs."""
import glob
import os
import subprocess
import sys

# The folders of src/ as layers, top first: a folder calls only folders of
# layers below its own. Folders of one layer (siblings) do not call each
# other. The order is who calls whom, which is not everywhere the order in
# which a call's facts flow (DESIGN.md lists topo, algo, tune, exec: what is
# here, the schedule, the choice, the run):
# - tune reads the algorithm registry and executors read tune's sizes
#   (tutti_tune_knob), so tune sits below the executors and above algo;
# - executors run and free schedules and name collectives, so algo, pure
#   functions of the call, sits below them;
# - transports, the network and one-sided windows all-gather over the
#   bootstrap ring and pick interfaces and network devices from topo, so
#   bootstrap and topo sit below them, topo below bootstrap (the root's
#   interface);
# - call (call records, agreement, the doorbell) is rung by executors,
#   transports and proxies, so it sits below them all.
# - net/'s subfolders each have their place (the device executor's links to
#   other hosts are its own subfolder, device/net); the network transport
#   (net/transport) above transport, whose queues and proxy it is built
#   from (the list of transports is api's); the two networks behind
#   net/net.h (net/plugin, net/socket) below every transport, above topo
#   (which chooses a rank's network devices).
# - ras (where every rank is, the flight recorder) is written by the host
#   executor and started by api; it reads the doorbells, the peer table and
#   algorithm names, so it sits above call, topo and algo and below exec.
# A new folder must be placed here (the check fails until it is), and in
# docs/design.md's "Layers and folders".
LAYERS = [
    ("api",),
    ("rma",),
    ("exec", "device"),
    ("tune",),
    ("net/transport",),
    ("transport",),
    ("net/plugin", "net/socket"),
    ("ras",),
    ("bootstrap",),
    ("topo",),
    ("call",),
    ("algo",),
    ("reduce",),
    ("util",),
]
# Folders whose subfolders are layers of their own, each placed in LAYERS
# as "folder/sub"; other folders' subfolders belong to the folder.
SPLIT = ("net",)


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


def folder_of(name):
    """The folder of a source file named as in the object directory
    ("src/net/socket.c" -> "net"; "src/device/kernels/kernel.cu" -> "device";
    a subfolder of a SPLIT folder is its own: "src/net/plugin/abi.c" ->
    "net/plugin")."""
    parts = name.split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if len(parts) < 2:
        return "."
    if parts[0] in SPLIT and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def strongly_connected(graph):
    """The components of more than one node of `graph` (node -> set of
    nodes), each sorted (Tarjan's algorithm, iteratively)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    for start in sorted(graph):
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
    return sorted(comps)


def analyze(defs, uses, layers=LAYERS):
    """From what each file defines and uses: the file cycles, the folder
    cycles, the calls against the layer order and the folders it does not
    place. Calls are (from folder, to folder, [(file, file, symbol)])."""
    owner = {s: f for f, d in defs.items() for s in d}
    calls = {}  # (file, file) -> symbols
    for f in defs:
        for s in uses[f]:
            g = owner.get(s, f)
            if g != f:
                calls.setdefault((f, g), []).append(s)
    files = {f: set() for f in defs}
    for f, g in calls:
        files[f].add(g)
    file_cycles = strongly_connected(files)
    between = {}  # (folder, folder) -> [(file, file, symbol)]
    for (f, g), syms in sorted(calls.items()):
        a, b = folder_of(f), folder_of(g)
        if a != b:
            between.setdefault((a, b), []).extend((f, g, s) for s in sorted(syms))
    folders = {folder_of(f): set() for f in defs}
    for a, b in between:
        folders[a].add(b)
    folder_cycles = strongly_connected(folders)
    level = {name: i for i, layer in enumerate(layers) for name in layer}
    unplaced = sorted(f for f in folders if f not in level)
    against = [(a, b, why) for (a, b), why in sorted(between.items())
               if a in level and b in level and level[b] <= level[a]]
    return file_cycles, folder_cycles, against, unplaced, between


def report(defs, uses, strict_layers):
    file_cycles, folder_cycles, against, unplaced, between = analyze(defs, uses)
    owner = {s: f for f, d in defs.items() for s in d}
    for comp in file_cycles:
        print("files that depend on each other: " + ", ".join(comp))
        for f in comp:
            needs = sorted(s for s in uses[f] if owner.get(s) in comp and owner.get(s) != f)
            print(f"  {f} uses {', '.join(needs)}")
    for comp in folder_cycles:
        print("folders that depend on each other: " + ", ".join(comp))
        for a in comp:
            for b in comp:
                for f, g, s in between.get((a, b), [])[:3]:
                    print(f"  {a} -> {b}: {f} uses {s} of {g}")
    for f in unplaced:
        print(f"src/{f}/ has no place in the layer order: add it to LAYERS in "
              "scripts/check_cycles.py, below the folders that call it and above those it "
              "calls, and to docs/design.md's \"Layers and folders\"")
    for a, b, why in against:
        kind = "a sibling" if any(a in l and b in l for l in LAYERS) else "a layer above"
        print(f"{a} calls {b}, {kind} ({len(why)} call(s)):")
        for f, g, s in why[:4]:
            print(f"  {f} uses {s} of {g}")
    nfolders = len({folder_of(f) for f in defs})
    print(f"check_cycles: {len(defs)} files, {len(file_cycles)} file cycles; {nfolders} folders, "
          f"{len(folder_cycles)} folder cycles, {len(unplaced)} unplaced, {len(against)} "
          f"calls against the layer order{'' if strict_layers else ' (reported only)'}")
    failed = file_cycles or folder_cycles or unplaced or (strict_layers and against)
    return 1 if failed else 0


def self_test():
    """Each check catches what it is for, on made-up files."""
    def run(graph):
        defs = {f: {f + "_fn"} for f in graph}
        uses = {f: {g + "_fn" for g in graph[f]} for f in graph}
        return analyze(defs, uses, layers=[("api",), ("exec", "device"), ("net/plugin",),
                                           ("util",)])

    ok = True
    # Downward calls only: nothing to say.
    fc, dc, against, unplaced, _ = run({"src/api/a.c": ["src/exec/e.c"],
                                        "src/exec/e.c": ["src/util/u.c"],
                                        "src/device/kernels/k.cu": ["src/net/plugin/p.c"],
                                        "src/net/plugin/p.c": [], "src/util/u.c": []})
    ok &= fc == [] and dc == [] and against == [] and unplaced == []
    # Two files through a third: a file cycle, and a folder cycle.
    fc, dc, against, _, _ = run({"src/exec/e.c": ["src/util/u.c"],
                                 "src/util/u.c": ["src/util/v.c"],
                                 "src/util/v.c": ["src/exec/e.c"]})
    ok &= fc == [["src/exec/e.c", "src/util/u.c", "src/util/v.c"]]
    ok &= dc == [["exec", "util"]] and [(a, b) for a, b, _ in against] == [("util", "exec")]
    # Folders that depend on each other through different files: no file
    # cycle, a folder cycle.
    fc, dc, _, _, _ = run({"src/exec/e.c": ["src/util/u.c"], "src/util/u.c": [],
                           "src/util/v.c": ["src/exec/f.c"], "src/exec/f.c": []})
    ok &= fc == [] and dc == [["exec", "util"]]
    # A sibling called, a layer above called.
    _, _, against, _, _ = run({"src/device/d.cu": ["src/exec/e.c"], "src/exec/e.c": [],
                               "src/util/u.c": ["src/api/a.c"], "src/api/a.c": []})
    ok &= [(a, b) for a, b, _ in against] == [("device", "exec"), ("util", "api")]
    # A folder the order does not place, and a SPLIT folder's unknown subfolder.
    _, _, _, unplaced, _ = run({"src/newdir/n.c": [], "src/net/other/o.c": [],
                                "src/net/plugin/p.c": []})
    ok &= unplaced == ["net/other", "newdir"]
    print(f"check_cycles: self-test {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    strict_layers = "--report-layers" not in args
    args = [a for a in args if a != "--report-layers"]
    if len(args) not in (1, 2):
        print(__doc__)
        return 2
    root = args[0]
    objs = sorted(glob.glob(os.path.join(root, "**", "*.o"), recursive=True))
    if len(args) == 2:
        objs = [o for o in objs
                if os.path.exists(os.path.join(args[1], os.path.relpath(o, root)[:-2]))]
    if not objs:
        print(f"check_cycles: no object files under {root}")
        return 1
    defs, uses = {}, {}
    for o in objs:
        name = os.path.relpath(o, root).removesuffix(".o")
        defs[name], uses[name] = symbols(o)
    return report(defs, uses, strict_layers)


if __name__ == "__main__":
    sys.exit(main())
