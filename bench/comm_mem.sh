#!/usr/bin/env bash
# What a communicator costs, and what that costs in speed, on a host with one
# NVIDIA GPU (or more): two ranks as processes on GPU 0 under MPS.
#   mem    bench/comm_mem.c: MiB per rank of the first communicator and of
#          each further one (K=4, splits), one host, for each setting; NCCL
#          (each rank its own host, NCCL_HOSTID: NCCL refuses two ranks of
#          one host on one GPU) beside it
#   perf   tutti-perf, every collective of COLLS, 8 B - 256 MB, each setting
#          and alternation (ROUNDS), one host; a table of time per call per
#          setting, and its ratio to the first setting
# Settings: SETTINGS, separated by '|', each "default" or VAR=VALUE ... (a
# TUTTI_TUNE value's ';' kept), e.g.
#   SETTINGS='default|TUTTI_COMM_MEMORY=0'
# Usage: bench/comm_mem.sh PHASE... with BIN=dir holding libtutti.so.0,
# libnccl.so.2 (tutti's), tutti-perf and test_gpu_comm_mem (else build-gpu/ is
# built), NCCL=NVIDIA's libnccl.so.2 (else PyTorch's), OUT=dir for logs.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
if [ -z "${BIN:-}" ]; then
  BUILD_DIR=build-gpu CMAKE_ARGS="-DTUTTI_CUDA=ON ${CMAKE_ARGS:-}" bash scripts/build.sh >/dev/null ||
    { echo "comm_mem: FAILED: the build failed" && exit 1; }
  BIN=$out/bin
  mkdir -p "$BIN"
  cp build-gpu/tools/tutti-perf/tutti-perf build-gpu/tests/test_gpu_comm_mem "$BIN/"
  cp -L build-gpu/libtutti.so.0 "$BIN/"
  cp -L build-gpu/libnccl.so.2 "$BIN/" 2>/dev/null || cp -L build-gpu/libtutti.so.0 "$BIN/libnccl.so.2"
fi
nccl=${NCCL:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)}
IFS='|' read -r -a settings <<<"${SETTINGS:-default|TUTTI_COMM_MEMORY=0}"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader

mps_start "$out"
trap mps_stop EXIT

vars_of() { [ "$1" = default ] && echo "" || echo "$1"; }

mem() {
  local i=0
  for s in "${settings[@]}"; do
    echo "== tutti, $s"
    env $(vars_of "$s") timeout "${BENCH_LIMIT:-300}" "$BIN/test_gpu_comm_mem" "$BIN/libnccl.so.2" procs 2 "${K:-4}" 2>&1 |
      tee "$out/mem_$i.log" | grep -vE "^$"
    bench_status "mem tutti $s" "${PIPESTATUS[0]}"
    i=$((i + 1))
  done
  if [ -n "$nccl" ]; then
    echo "== NVIDIA NCCL ($nccl), each rank its own host"
    timeout "${BENCH_LIMIT:-300}" "$BIN/test_gpu_comm_mem" "$nccl" hosts 2 "${K:-4}" 2>&1 | tee "$out/mem_nccl.log"
    bench_status "mem NCCL" "${PIPESTATUS[0]}"
  fi
}

# pair SETTING_INDEX COLL ROUND: one tutti-perf run of two ranks on GPU 0.
pair() {
  local i=$1 coll=$2 round=$3 port=$((20000 + RANDOM % 20000))
  local vars pids=()
  vars=$(vars_of "${settings[$i]}")
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port $vars \
      timeout "${PERF_LIMIT:-120}" "$BIN/tutti-perf" "$coll" -T 30 -b "${MIN:-8}" -e "${MAX:-256M}" \
      -f 4 -n "${ITERS:-20}" -w 5 -c 0 --lib "$BIN/libtutti.so.0" --device gpu \
      --json "$out/perf_${coll}_${i}_${round}_$r.json" >"$out/perf_${coll}_${i}_${round}_$r.log" 2>&1 &
    pids+=($!)
  done
  bench_wait "perf $coll setting $i round $round" "$out/perf_${coll}_${i}_${round}_0.log" \
    "$out/perf_${coll}_${i}_${round}_1.log" -- "${pids[@]}"
}

perf() {
  for coll in ${COLLS:-allreduce reducescatter allgather broadcast}; do
    for round in $(seq 1 "${ROUNDS:-2}"); do
      for i in "${!settings[@]}"; do
        pair "$i" "$coll" "$round"
      done
    done
  done
  python3 - "$out" "${#settings[@]}" "${ROUNDS:-2}" ${COLLS:-allreduce reducescatter allgather broadcast} <<'PY'
import json, sys, os, glob
out, ns, rounds, colls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
for coll in colls:
    best = {}
    for i in range(ns):
        for rd in range(1, rounds + 1):
            p = os.path.join(out, f"perf_{coll}_{i}_{rd}_0.json")
            if not os.path.exists(p):
                continue
            for r in json.load(open(p))["records"]:
                t = r["out_of_place"]["time_us"]
                k = (r["bytes"], i)
                best[k] = min(best.get(k, t), t)
    sizes = sorted({b for b, _ in best})
    print(f"{coll}: time per call (us), best of {rounds}; ratio to setting 0")
    print("| bytes | " + " | ".join(f"setting {i}" for i in range(ns)) + " |")
    for b in sizes:
        t0 = best.get((b, 0))
        cells = []
        for i in range(ns):
            t = best.get((b, i))
            cells.append("-" if t is None else (f"{t:.1f}" if i == 0 or not t0 else f"{t:.1f} ({t / t0:.2f})"))
        print(f"| {b} | " + " | ".join(cells) + " |")
PY
}

for i in "${!settings[@]}"; do echo "setting $i: ${settings[$i]}"; done
for phase in "$@"; do
  case $phase in
    mem | perf) "$phase" ;;
    *) echo "unknown phase $phase" >&2 && exit 2 ;;
  esac
done
bench_finish comm_mem
