#!/usr/bin/env bash
# The cost of deterministic reductions on this host: tutti-perf with and
# without TUTTI_DETERMINISTIC=1, in alternating runs (REPS pairs), ranks as
# processes (2 and 4), allreduce and reduce-scatter, small sizes (MIN_S to
# MAX_S) and large (MIN_L to MAX_L), checked (-c 1). Writes every run and a
# markdown table of medians (time, and busbw of the deterministic mode over
# the default's) under OUT. PREBUILT=1: BUILD_DIR holds the programs already.
# A run that cannot start, times out (BENCH_LIMIT s), fails or prints no
# rows is named at the end, and the script exits 1 (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
[ "${PREBUILT:-0}" = 1 ] || BUILD_DIR=$build bash scripts/build.sh >/dev/null
out=${OUT:-bench/results/$(date -u +%Y-%m-%d)-deterministic}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
REPS=${REPS:-4} RANKS=${RANKS:-"2 4"} COLLS=${COLLS:-"allreduce reducescatter"}
MIN_S=${MIN_S:-8} MAX_S=${MAX_S:-64K} MIN_L=${MIN_L:-1M} MAX_L=${MAX_L:-64M}
perf=$build/tools/tutti-perf/tutti-perf
run=$build/tools/tuttirun/tuttirun
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)" |
  tee "$out/machine.txt"
for rep in $(seq 1 "$REPS"); do
  for coll in $COLLS; do
    for n in $RANKS; do
      for mode in default det; do
        det=0
        [ $mode = det ] && det=1
        tag=${coll}_${mode}_np${n}
        bench_run "$tag small round $rep" "$out/${tag}_small_r$rep.txt" env TUTTI_DETERMINISTIC=$det \
          "$run" -n "$n" --no_prefix "$perf" "$coll" -b "$MIN_S" -e "$MAX_S" -f 4 -n 2000 -w 500 -c 1
        bench_run "$tag large round $rep" "$out/${tag}_large_r$rep.txt" env TUTTI_DETERMINISTIC=$det \
          "$run" -n "$n" --no_prefix "$perf" "$coll" -b "$MIN_L" -e "$MAX_L" -f 4 -n 20 -w 5 -c 1
      done
    done
  done
done
bench_finish run_det || exit 1
/usr/bin/python3 - "$out" "$COLLS" "$RANKS" <<'PY' | tee "$out/deterministic.md"
import glob, statistics, sys
d, colls, ranks = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(path):
    rows = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 9 and p[0].isdigit():
            if p[8] not in ("0", "N/A"):
                raise SystemExit(f"{path}: wrong results at {p[0]} bytes")
            rows[int(p[0])] = (float(p[5]), float(p[7]))  # time us, busbw GB/s (out of place)
    return rows
for coll in colls:
    for n in ranks:
        print(f"\n{coll}, {n} ranks (medians; ratio = deterministic busbw / default busbw)\n")
        print("| bytes | default µs | deterministic µs | default GB/s | deterministic GB/s | ratio |")
        print("|---:|---:|---:|---:|---:|---:|")
        for part in ("small", "large"):
            runs = {m: [load(f) for f in sorted(glob.glob(f"{d}/{coll}_{m}_np{n}_{part}_r*.txt"))]
                    for m in ("default", "det")}
            if not runs["default"] or not runs["det"]:
                continue
            for size in sorted(runs["default"][0]):
                t = {m: statistics.median(r[size][0] for r in runs[m]) for m in runs}
                b = {m: statistics.median(r[size][1] for r in runs[m]) for m in runs}
                ratio = b["det"] / b["default"] if b["default"] > 0 else t["default"] / t["det"]
                print(f"| {size} | {t['default']:.1f} | {t['det']:.1f} | {b['default']:.2f} | "
                      f"{b['det']:.2f} | {ratio:.2f} |")
PY
