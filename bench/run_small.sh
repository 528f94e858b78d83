#!/usr/bin/env bash
# Small allreduces on this host, tutti against Open MPI, in alternating runs:
# on a shared VM one run of each can land in different scheduler weather, so
# the table is the median over REPS pairs. Ranks as processes, 2 and 4
# (with 2 cores, 4 ranks means every hand-over is a context switch).
# Writes every run's output and a markdown table (medians) under OUT.
# COLL picks another collective (allgather, reducescatter, broadcast) and
# MIN/MAX/FACTOR the sizes; PREV_LIB=path/libtutti.so adds a third run per
# pair, tutti-perf on that library (a previous build), for an A/B.
# Needs: openmpi-bin libopenmpi-dev (installed here if missing). PREBUILT=1:
# BUILD_DIR holds the programs already. A run that cannot start, times out
# (BENCH_LIMIT s), fails or prints no rows is named at the end, and the
# script exits 1 (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mpicc >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
build=${BUILD_DIR:-build}
[ "${PREBUILT:-0}" = 1 ] || BUILD_DIR=$build bash scripts/build.sh >/dev/null
out=${OUT:-bench/results/$(date -u +%Y-%m-%d)-small}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
mpicc -O2 -o "$build/mpi_bench" bench/mpi_bench.c
# 2000 warm-up calls per size, both libraries: with 500, the first sizes of
# a run (8-32 B) still landed while the scheduler settled, 10-30% slower.
MIN=${MIN:-8} MAX=${MAX:-64K} ITERS=${ITERS:-5000} WARM=${WARM:-2000} REPS=${REPS:-8}
COLL=${COLL:-allreduce} FACTOR=${FACTOR:-2}
perf=$build/tools/tutti-perf/tutti-perf
run=$build/tools/tuttirun/tuttirun
mpirun_flags="--allow-run-as-root --oversubscribe --mca btl self,vader"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)" |
  tee "$out/machine.txt"
for rep in $(seq 1 "$REPS"); do
  for n in 2 4; do
    echo "load $(cut -d' ' -f1 /proc/loadavg) before pair $rep, $n ranks" >>"$out/machine.txt"
    sizes="-b $MIN -e $MAX -f $FACTOR -n $ITERS -w $WARM"
    bench_run "tutti $n ranks round $rep" "$out/tutti_np${n}_r$rep.txt" \
      "$run" -n $n --no_prefix "$perf" $COLL $sizes -c 1
    if [ -n "${PREV_LIB:-}" ]; then
      bench_run "previous build $n ranks round $rep" "$out/prev_np${n}_r$rep.txt" \
        "$run" -n $n --no_prefix "$perf" $COLL $sizes -c 1 --lib "$PREV_LIB"
    fi
    bench_run "Open MPI $n ranks round $rep" "$out/mpi_np${n}_r$rep.txt" \
      mpirun $mpirun_flags -np $n "$build/mpi_bench" $COLL $sizes
  done
done
bench_finish run_small || exit 1
/usr/bin/python3 bench/small_table.py "$out" "$COLL" | tee "$out/compare_small.md"
