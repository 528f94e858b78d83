#!/usr/bin/env python3
"""Medians of bench/run_small.sh's alternating runs: small_table.py DIR.
Prints, for 2 and 4 ranks, a markdown table of tutti's time (out of place
and in place), Open MPI's, and the ratios, size by size."""
import glob, statistics, sys


def load(path, col):
    rows = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 5 and p[0].isdigit():
            rows[int(p[0])] = float(p[col])
    return rows


def main():
    d = sys.argv[1]
    for n in (2, 4):
        tf = sorted(glob.glob(f"{d}/tutti_np{n}_r*.txt"))
        mf = sorted(glob.glob(f"{d}/mpi_np{n}_r*.txt"))
        if not tf or not mf:
            continue
        out = [load(f, 5) for f in tf]
        inp = [load(f, 9) for f in tf]
        mpi = [load(f, 2) for f in mf]
        wrong = sum(1 for f in tf for line in open(f) if line.split()[:1] and
                    line.split()[0].isdigit() and (line.split()[8] != "0" or line.split()[12] != "0"))
        print(f"\nallreduce, {n} ranks: medians of {len(tf)} alternating runs (µs); "
              f"rows with wrong values: {wrong}\n")
        print("| size | tutti | tutti in place | Open MPI | ratio | ratio in place |")
        print("|---:|---:|---:|---:|---:|---:|")
        for s in sorted(out[0]):
            a = statistics.median(r[s] for r in out)
            b = statistics.median(r[s] for r in inp)
            m = statistics.median(r[s] for r in mpi)
            print(f"| {s} | {a:.2f} | {b:.2f} | {m:.2f} | {a / m:.2f} | {b / m:.2f} |")


if __name__ == "__main__":
    main()
