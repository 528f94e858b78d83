#!/usr/bin/env bash
# The CPU comparison, all in one run on this host: tutti (ranks as processes
# under tuttirun), Open MPI 4.1 (mpirun, shared memory) and Gloo (PyTorch's
# backend), 2 and 4 ranks, plus the single-core memcpy ceiling. Writes JSON,
# markdown ratio tables and plots under bench/results/<date>/.
# Needs: openmpi-bin libopenmpi-dev python3-torch (installed here if missing).
# A run that cannot start, times out (BENCH_LIMIT s), fails or prints no
# rows is named at the end, and the script exits 1 (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if ! command -v mpicc >/dev/null || ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev python3-torch >/dev/null
fi
# BUILD_DIR (default build/) and CMAKE_ARGS pass through to scripts/build.sh;
# OUT names the results folder (default bench/results/<date>).
build=${BUILD_DIR:-build}
BUILD_DIR=$build bash scripts/build.sh >/dev/null
out=${OUT:-bench/results/$(date -u +%Y-%m-%d)}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
# The comparison programs are built beside the library, not among the results.
mpicc -O2 -o "$build/mpi_bench" bench/mpi_bench.c
cc -O2 -o "$build/memcpy_bw" bench/memcpy_bw.c
perf=$build/tools/tutti-perf/tutti-perf
run=$build/tools/tuttirun/tuttirun
MIN=${MIN:-8} MAX=${MAX:-256M} ITERS=${ITERS:-20} WARM=${WARM:-5}
mpirun_flags="--allow-run-as-root --oversubscribe --mca btl self,vader"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)"
  "$build/memcpy_bw" 256
} | tee "$out/machine.txt"
# The ceiling each size is held against: one core's memcpy, this run.
ceiling=$(sed -n 's/^memcpy [^:]*: \([0-9.]*\) GB\/s.*/\1/p' "$out/machine.txt")
for n in 2 4; do
  for coll in allreduce allgather reducescatter broadcast; do
    echo "== $coll, $n ranks"
    bench_run "tutti $coll $n ranks" "$out/tutti_${coll}_np$n.txt" "$run" -n $n --no_prefix "$perf" \
      $coll -b $MIN -e $MAX -f 4 -n $ITERS -w $WARM -c 0 --json "$out/tutti_${coll}_np$n.json"
    bench_run "Open MPI $coll $n ranks" "$out/mpi_${coll}_np$n.txt" mpirun $mpirun_flags -np $n \
      "$build/mpi_bench" $coll -b $MIN -e $MAX -f 4 -n $ITERS -w $WARM --json "$out/mpi_${coll}_np$n.json"
    refs="$out/mpi_${coll}_np$n.json"
    if [ $coll = allreduce ]; then
      bench_run "Gloo $coll $n ranks" "$out/gloo_${coll}_np$n.txt" /usr/bin/python3 bench/gloo_bench.py \
        $n -b $MIN -e $MAX -f 4 -n $ITERS -w $WARM --json "$out/gloo_${coll}_np$n.json"
      refs="$refs $out/gloo_${coll}_np$n.json"
    fi
    /usr/bin/python3 bench/compare.py --ceiling "$ceiling" "$out/tutti_${coll}_np$n.json" $refs \
      >"$out/compare_${coll}_np$n.md" 2>&1 || bench_fail "compare $coll $n ranks: $(tail -n 1 "$out/compare_${coll}_np$n.md")"
    cat "$out/compare_${coll}_np$n.md"
  done
  tools/tutti-perf/tutti-plot -o "$out/allreduce_np$n.svg" "$out"/tutti_allreduce_np$n.json \
    "$out"/mpi_allreduce_np$n.json "$out"/gloo_allreduce_np$n.json || true
done
echo "results in $out"
bench_finish run_cpu
