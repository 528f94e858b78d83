#!/usr/bin/env bash
# The GPU comparison, in one run on one host: tutti against NVIDIA's NCCL
# (the libnccl.so.2 of PyTorch's Python environment, or NCCL_LIB), measured by
# the same tutti-perf binary with --lib, one process driving every GPU (-g N)
# and one process per GPU (tuttirun), for each collective. Writes JSON, the
# markdown ratio tables and the raw outputs under OUT_DIR (default
# bench/results/<date>-gpu), and all of it as one archive beside it
# (OUT_DIR.tgz: a remote runner may bring back only a few files). NVLink
# multicast (NVLS) stays off.
# Usage: bench/run_gpu.sh [COLL ...]    env: MIN MAX ITERS WARM NGPU MODES
# (BUILD_DIR, default build-gpu/, is built unless PREBUILT=1). A run that
# cannot start, times out (BENCH_LIMIT s), fails or prints no rows is named
# at the end, and the script exits 1 (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
build=${BUILD_DIR:-build-gpu}
[ "${PREBUILT:-0}" = 1 ] || BUILD_DIR=$build CMAKE_ARGS="-DTUTTI_CUDA=ON" bash scripts/build.sh >/dev/null
nccl=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))')} ||
  { echo "run_gpu: FAILED: no NVIDIA NCCL to compare with (pip install nvidia-nccl-cu12, or NCCL_LIB)" >&2 && exit 1; }
tutti=$(cd "$build" && pwd)/libtutti.so.0 || { echo "run_gpu: FAILED: no build folder $build" >&2 && exit 1; }
perf=$build/tools/tutti-perf/tutti-perf
run=$build/tools/tuttirun/tuttirun
out=${OUT_DIR:-bench/results/$(date -u +%Y-%m-%d)-gpu}
mkdir -p "$out"
NGPU=${NGPU:-$(nvidia-smi -L | wc -l)}
MIN=${MIN:-8} MAX=${MAX:-1G} ITERS=${ITERS:-20} WARM=${WARM:-5}
colls=${*:-allreduce allgather reducescatter broadcast reduce}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  nvidia-smi topo -m 2>/dev/null | head -n $((NGPU + 1)) || true
  echo "nccl: $nccl"
} | tee "$out/machine.txt"
flags="-b $MIN -e $MAX -f 2 -n $ITERS -w $WARM -c 1"
. bench/lib.sh
bench_init "$out"
for coll in $colls; do
  for mode in ${MODES:-g procs}; do
    for lib in tutti nccl; do
      l=$tutti
      [ $lib = nccl ] && l=$nccl
      tag=${lib}_${coll}_${mode}
      if [ $mode = g ]; then
        bench_run "$tag" "$out/$tag.txt" "$perf" $coll -g "$NGPU" $flags --lib "$l" --label $lib \
          --json "$out/$tag.json"
      else
        bench_run "$tag" "$out/$tag.txt" "$run" -n "$NGPU" --no_prefix "$perf" $coll $flags --lib "$l" \
          --label $lib --json "$out/$tag.json"
      fi
    done
    echo "== $coll, $NGPU GPUs, $([ $mode = g ] && echo "one process" || echo "one process per GPU")"
    python3 bench/compare.py "$out/tutti_${coll}_${mode}.json" "$out/nccl_${coll}_${mode}.json" \
      | tee "$out/compare_${coll}_${mode}.md" || true
  done
done
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
bench_finish run_gpu
