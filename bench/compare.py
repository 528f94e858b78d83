#!/usr/bin/env python3
"""Ratios of one library's busbw (and time) to others', size by size, from
tutti-perf JSON files: compare.py [--ceiling GBS] TUTTI.json REF.json [...]
Prints a markdown table: size, tutti time and busbw, then per reference its
busbw, and tutti's busbw ratio and time ratio against it. --ceiling: the
single-core memcpy rate measured in the same run (GB/s); a last column says
how close tutti's busbw comes to it."""
import json, sys


def load(path, mode="out_of_place"):
    with open(path) as f:
        d = json.load(f)
    name = d["library"]["name"] if isinstance(d.get("library"), dict) else d.get("library", path)
    rows = {r["bytes"]: r[mode] for r in d.get("records", []) if r.get(mode)}
    if not rows:
        sys.exit(f"compare.py: FAILED: {path} has no rows ({mode})")
    return name, d.get("nranks"), d.get("collective"), rows


def human(b):
    for unit, v in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= v and b % v == 0:
            return f"{b // v} {unit}B"
    return f"{b} B"


def main():
    args = sys.argv[1:]
    ceiling = None
    if args[:1] == ["--ceiling"]:
        ceiling = float(args[1])
        args = args[2:]
    tname, n, coll, t = load(args[0])
    note = ""
    if coll == "broadcast":
        # MPI_Bcast has one buffer: the like-for-like tutti call is the
        # in-place one (out of place, the root also copies its input).
        tname, n, coll, t = load(args[0], "in_place")
        note = " (tutti in place, as MPI_Bcast)"
    refs = [load(p) for p in args[1:]]
    head = f"| size | tutti µs | tutti busbw |"
    sep = "|---:|---:|---:|"
    for name, _, _, _ in refs:
        short = name.split(" (")[0]
        head += f" {short} µs | {short} busbw | busbw ratio | time ratio |"
        sep += "---:|---:|---:|---:|"
    if ceiling:
        head += f" busbw / memcpy ({ceiling:g} GB/s) |"
        sep += "---:|"
    print(f"{coll}, {n} ranks: {tname}{note} against " + ", ".join(r[0] for r in refs))
    print()
    print(head)
    print(sep)
    for b in sorted(t):
        line = f"| {human(b)} | {t[b]['time_us']:.2f} | {t[b]['busbw_gbs']:.2f} |"
        for _, _, _, r in refs:
            if b in r:
                rb, rt = r[b]["busbw_gbs"], r[b]["time_us"]
                ratio = f"{t[b]['busbw_gbs'] / rb:.2f}x" if rb > 0 else "–"
                line += f" {rt:.2f} | {rb:.2f} | {ratio} | {t[b]['time_us'] / rt:.2f}x |"
            else:
                line += " – | – | – | – |"
        if ceiling:
            line += f" {100 * t[b]['busbw_gbs'] / ceiling:.0f}% |"
        print(line)
    print()


if __name__ == "__main__":
    main()
