#!/usr/bin/env python3
"""Medians of bench/run_small.sh's alternating runs: small_table.py DIR [COLL].
Prints, for 2 and 4 ranks, a markdown table of tutti's time (out of place
and in place), Open MPI's, and the ratios, size by size; with the runs of
a previous build (prev_np*), its times and this build's speed-up too."""
import glob, statistics, sys


def load(path, col):
    rows = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 5 and p[0].isdigit():
            rows[int(p[0])] = float(p[col])
    if not rows:
        sys.exit(f"small_table.py: FAILED: {path} has no rows")
    return rows


def wrong_rows(files):
    n = 0
    for f in files:
        for line in open(f):
            p = line.split()
            if p[:1] and p[0].isdigit() and (p[8] not in ("0", "N/A") or p[12] not in ("0", "N/A")):
                n += 1
    return n


def main():
    d = sys.argv[1]
    coll = sys.argv[2] if len(sys.argv) > 2 else "allreduce"
    med = statistics.median
    tables = 0
    for n in (2, 4):
        tf = sorted(glob.glob(f"{d}/tutti_np{n}_r*.txt"))
        mf = sorted(glob.glob(f"{d}/mpi_np{n}_r*.txt"))
        pf = sorted(glob.glob(f"{d}/prev_np{n}_r*.txt"))
        if not tf or not mf:
            continue
        tables += 1
        out = [load(f, 5) for f in tf]
        inp = [load(f, 9) for f in tf]
        mpi = [load(f, 2) for f in mf]
        prev = [load(f, 5) for f in pf]
        print(f"\n{coll}, {n} ranks: medians of {len(tf)} alternating runs (µs); "
              f"rows with wrong values: {wrong_rows(tf + pf)}\n")
        head = "| size | tutti | tutti in place | Open MPI | ratio | ratio in place |"
        sep = "|---:|---:|---:|---:|---:|---:|"
        if prev:
            head += " previous build | speed-up |"
            sep += "---:|---:|"
        print(head)
        print(sep)
        for s in sorted(out[0]):
            a = med(r[s] for r in out)
            b = med(r[s] for r in inp)
            m = med(r[s] for r in mpi)
            row = f"| {s} | {a:.2f} | {b:.2f} | {m:.2f} | {a / m:.2f} | {b / m:.2f} |"
            if prev:
                p = med(r[s] for r in prev)
                row += f" {p:.2f} | {p / a:.2f} |"
            print(row)
    if not tables:
        sys.exit(f"small_table.py: FAILED: no runs of tutti and Open MPI in {d} (tutti_np*, mpi_np*)")


if __name__ == "__main__":
    main()
