#!/usr/bin/env python3
"""Medians of bench/run_netns_small.sh's rounds: netns_small_table.py DIR [COLL...].
Per collective, a markdown table of time per call (µs), size by size:
tutti (and the previous build's, when the run had one), Open MPI yielding
and busy-polling, the reference (the faster of the two), and tutti's time
over it (below 1: tutti is faster), with the range of the per-round ratios.
Broadcast is tutti's in-place call, as MPI_Bcast has one buffer."""
import glob, json, statistics, sys


def load(path, mode):
    with open(path) as f:
        d = json.load(f)
    out = {}
    for r in d["records"]:
        v = r.get(mode) or r.get("out_of_place")
        if v and r["bytes"] > 0:  # tutti-perf's all-gathers below 4 B a rank move nothing
            out[r["bytes"]] = (v["time_us"], v.get("wrong"))
    if not out:
        sys.exit(f"netns_small_table.py: FAILED: {path} has no rows")
    return out


def runs(d, label, coll, mode="out_of_place"):
    return [load(p, mode) for p in sorted(glob.glob(f"{d}/{label}_{coll}_r*.json"))]


def main():
    d = sys.argv[1]
    colls = sys.argv[2:] or ["allreduce", "allgather", "reducescatter", "broadcast"]
    med = statistics.median
    worst = 0.0
    tables = 0
    for coll in colls:
        mode = "in_place" if coll == "broadcast" else "out_of_place"
        t = runs(d, "tutti", coll, mode)
        p = runs(d, "prev", coll, mode)
        y = runs(d, "mpi_yield", coll)
        b = runs(d, "mpi_busy", coll)
        algos = sorted({p.split("/")[-1][5:].split("_" + coll)[0]
                        for p in glob.glob(f"{d}/algo_*_{coll}_r*.json")})
        al = {a: runs(d, f"algo_{a}", coll, mode) for a in algos}
        if not t or not (y or b):
            continue
        tables += 1
        wrong = sum(1 for r in t + p for s in r if r[s][1] not in (None, 0))
        print(f"\n{coll}, 2 hosts x 1 rank: medians of {len(t)} rounds (µs); "
              f"rows with wrong values: {wrong}\n")
        head = "| bytes | tutti |" + (" previous |" if p else "") + \
            "".join(f" {a} |" for a in algos) + \
            " MPI yield | MPI busy | ratio | per round |"
        print(head)
        print("|" + "---:|" * (head.count("|") - 1))
        for s in sorted(set(t[0]) & set((y or b)[0])):
            tt = med(r[s][0] for r in t if s in r)
            ref_rounds = []
            for i in range(len(t)):
                c = [x[i][s][0] for x in (y, b) if i < len(x) and s in x[i]]
                if c and s in t[i]:
                    ref_rounds.append(t[i][s][0] / min(c))
            ym = med(r[s][0] for r in y if s in r) if y else float("inf")
            bm = med(r[s][0] for r in b if s in r) if b else float("inf")
            ratio = tt / min(ym, bm)
            worst = max(worst, ratio)
            row = f"| {s} | {tt:.1f} |"
            if p:
                row += f" {med(r[s][0] for r in p if s in r):.1f} |"
            for a in algos:
                row += f" {med(r[s][0] for r in al[a] if s in r):.1f} |"
            row += f" {ym:.1f} | {bm:.1f} | {ratio:.2f} |"
            row += f" {min(ref_rounds):.2f}–{max(ref_rounds):.2f} |" if ref_rounds else " – |"
            print(row)
    if not tables:
        sys.exit(f"netns_small_table.py: FAILED: no runs of tutti and Open MPI in {d}")
    print(f"\nlargest ratio of medians: {worst:.2f}")


if __name__ == "__main__":
    main()
