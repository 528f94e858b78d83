#!/usr/bin/env bash
# One GPU host's checks and figures for GPU buffers across hosts, in one
# go (bench/gpu_streams.sh does the work): the GPU suite's network modes on
# tutti's own socket network and again through its plugin
# (NCCL_NET_PLUGIN), the deterministic fold across hosts, then the
# cross-host benchmark against NCCL (phase net) and deterministic mode's
# cost (phase det). BIN holds test_gpu, test_gpu_ordered, tutti-perf,
# libtutti.so.0 and libnccl-net-tutti.so (built elsewhere, or build-gpu/);
# OUT receives summaries and one tarball of every log.
#   bench/gpu_net_session.sh [PHASE...]   (default: check ordered net det)
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
: "${BIN:?BIN must hold the binaries}" "${OUT:?}"
BIN=$(cd "$BIN" && pwd) || { echo "gpu_net_session: FAILED: no folder BIN=$BIN" >&2 && exit 1; }
mkdir -p "$OUT"
logs=$(mktemp -d)
phases=${*:-check ordered net det}
. bench/lib.sh
bench_init "$logs"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nproc
} >"$OUT/machine.txt"
for ph in $phases; do
  t0=$SECONDS
  case $ph in
    check)
      MODES=${MODES:-"net netkill hosts streams-net streams-hosts mismatch-hosts mps"} LIMIT=${LIMIT:-90} \
        BIN=$BIN OUT=$logs/suite bash bench/gpu_streams.sh suite >"$OUT/suite.txt" 2>&1
      bench_status "check (gpu_streams.sh suite; $OUT/suite.txt)" $?
      NCCL_NET_PLUGIN=$BIN/libnccl-net-tutti.so MODES=${PLUGIN_MODES:-"net netkill hosts"} LIMIT=${LIMIT:-90} \
        BIN=$BIN OUT=$logs/suite_plugin bash bench/gpu_streams.sh suite >"$OUT/suite_plugin.txt" 2>&1
      bench_status "check through the plugin ($OUT/suite_plugin.txt)" $?
      ;;
    ordered)
      for p in net hosts; do
        TUTTI_TIMEOUT=60 timeout "${BENCH_LIMIT:-200}" "$BIN/test_gpu_ordered" "$p" 2>&1 | tail -n 3
        bench_status "ordered $p" "${PIPESTATUS[0]}"
      done >"$OUT/ordered.txt"
      ;;
    net | det)
      REPS=${REPS:-1} BIN=$BIN OUT=$logs/$ph bash bench/gpu_streams.sh "$ph" >"$OUT/$ph.txt" 2>&1
      bench_status "$ph ($OUT/$ph.txt)" $?
      ;;
    *) bench_fail "unknown phase $ph" ;;
  esac
  echo "$ph: $((SECONDS - t0)) s" | tee -a "$OUT/machine.txt"
done
tar -czf "$OUT/logs.tgz" -C "$logs" . 2>/dev/null
bench_finish gpu_net_session | tee -a "$OUT/machine.txt"
exit "${PIPESTATUS[0]}"
