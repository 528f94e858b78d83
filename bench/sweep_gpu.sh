#!/usr/bin/env bash
# Tuning sweep on a GPU host: busbw of tutti under several settings (queue
# size, channels, threads, the mapped kernel's limits) beside NCCL, one process
# driving every GPU (MODE=g) or one process per GPU (MODE=procs). Prints one
# table: size, then busbw (and time) per setting. A setting is default or
# VAR=value, several joined by commas (A=1,B=2).
# Usage: bench/sweep_gpu.sh [MIN] [MAX]   env: SETTINGS MODE COLL
# (BUILD_DIR, default build-gpu/, must exist: bench/run_gpu.sh builds it)
# A run that cannot start, times out (BENCH_LIMIT s), fails or prints no
# rows is named, and the script exits 1 before the table (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
build=${BUILD_DIR:-build-gpu}
perf=$build/tools/tutti-perf/tutti-perf
ngpu=$(nvidia-smi -L | wc -l)
nccl=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))')} ||
  { echo "sweep_gpu: FAILED: no NVIDIA NCCL to compare with (pip install nvidia-nccl-cu12, or NCCL_LIB)" >&2 && exit 1; }
out=${OUT_DIR:-/tmp/sweep}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
flags="-b ${1:-1M} -e ${2:-512M} -f 4 -n 10 -w 3 -c 0"
coll=${COLL:-allreduce}
# One tutti-perf run: bench LABEL "VAR=value ..." [tutti-perf arguments].
bench() {
  local label=$1 vars=$2 cmd
  shift 2
  # $vars, $coll and $flags split into words on purpose.
  # shellcheck disable=SC2206
  if [ "${MODE:-g}" = procs ]; then
    cmd=(env $vars "$build/tools/tuttirun/tuttirun" -n "$ngpu" --no_prefix "$perf" $coll $flags "$@")
  else
    cmd=(env $vars "$perf" $coll -g "$ngpu" $flags "$@")
  fi
  bench_run "$label" "$out/$label.txt" "${cmd[@]}"
}
settings=${SETTINGS:-"default NCCL_BUFFSIZE=1048576 NCCL_MAX_NCHANNELS=16 NCCL_NTHREADS=256 TUTTI_TUNE=channel=1m"}
name() { echo "$1" | tr '=,' '__'; }
for s in $settings; do
  vars=$(echo "$s" | tr ',' ' ')
  [ "$s" = default ] && vars=""
  bench "$(name "$s")" "$vars" --json "$out/$(name "$s").json"
done
bench nccl "" --lib "$nccl" --json "$out/nccl.json"
bench_finish sweep_gpu || exit 1
python3 - "$out" $settings nccl <<'PY'
import json, sys, os
out, names = sys.argv[1], sys.argv[2:]
rows = {}
for n in names:
    d = json.load(open(os.path.join(out, n.replace("=", "_").replace(",", "_") + ".json")))
    for r in d["records"]:
        rows.setdefault(r["bytes"], {})[n] = (r["out_of_place"]["busbw_gbs"], r["out_of_place"]["time_us"])
print("busbw GB/s (time us)")
print("| bytes | " + " | ".join(names) + " |")
for b in sorted(rows):
    print(f"| {b} | " + " | ".join("%.1f (%.1f)" % rows[b].get(n, (0, 0)) for n in names) + " |")
PY
