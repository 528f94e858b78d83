#!/usr/bin/env bash
# FSDP2 and DDP on tutti against NVIDIA's NCCL (tests/torch/fsdp_compare.py),
# two ranks under torchrun, on a host with one or more NVIDIA GPUs and a
# Python whose PyTorch uses NCCL (pip wheels). With one GPU both ranks share
# it: NCCL then needs each rank to be its own host (NCCL_HOSTID), and an MPS
# server (started here when none runs) lets their kernels run at once.
# Runs, for fsdp and ddp: NCCL, tutti as the same kind of hosts (the network
# proxy when NCCL_HOSTID is used), and tutti with both ranks on one host
# (GPU peer memory); compares each tutti run's losses and parameters with
# NCCL's.
# Usage: scripts/torch-fsdp.sh [PYTHON]   (STEPS=12 OUT=dir LIB=libtutti.so.0 to change)
# Exits 77 (skipped) without a GPU or without PyTorch.
set -uo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
STEPS=${STEPS:-12}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "${ngpu:-0}" -lt 1 ]; then
  echo "SKIPPED: needs PyTorch with a CUDA device ($py)"
  exit 77
fi
if [ -z "${LIB:-}" ]; then
  BUILD_DIR=build-gpu CMAKE_ARGS="-DTUTTI_CUDA=ON ${CMAKE_ARGS:-}" bash scripts/build.sh >/dev/null || exit 1
  LIB=$PWD/build-gpu/libtutti.so.0
fi
hostid=()
mps_started=0
if [ "$ngpu" -lt 2 ]; then
  hostid=(--hostid)
  if [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && command -v nvidia-cuda-mps-control >/dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=$out/mps CUDA_MPS_LOG_DIRECTORY=$out/mps
    mkdir -p "$out/mps"
    nvidia-cuda-mps-control -d && mps_started=1
  fi
fi
run() { # run NAME LIB ARGS...: torchrun with LIB preloaded ("" for NVIDIA's NCCL)
  local name=$1 pre=$2
  shift 2
  echo "== $name: $*"
  # NCCL_DEBUG=VERSION: each library says which it is, so a run that
  # silently fell back to NVIDIA's NCCL is caught.
  TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} NCCL_DEBUG=VERSION timeout 600 env ${pre:+LD_PRELOAD=$pre} \
    "$py" -m torch.distributed.run --nproc_per_node 2 --master_port $((29500 + RANDOM % 1000)) \
    tests/torch/fsdp_compare.py "$@" >"$out/$name.log" 2>&1
  local rc=$?
  grep -E "fsdp_compare|NCCL version|Error|error" "$out/$name.log" | grep -v "^W.*OMP_NUM_THREADS" |
    sort -u | head -n 20
  if [ -n "$pre" ] && ! grep -q "(tutti" "$out/$name.log"; then
    echo "FAIL: $name did not run on tutti"
    return 1
  fi
  return $rc
}
fail=0
for mode in fsdp ddp; do
  run "${mode}_nccl" "" "$out/${mode}_nccl.pt" --mode $mode --steps "$STEPS" "${hostid[@]}" || fail=1
  run "${mode}_tutti_hosts" "$LIB" "$out/${mode}_tutti_hosts.pt" --mode $mode --steps "$STEPS" \
    "${hostid[@]}" || fail=1
  "$py" tests/torch/fsdp_compare.py --compare "$out/${mode}_tutti_hosts.pt" "$out/${mode}_nccl.pt" ||
    fail=1
  if [ ${#hostid[@]} -gt 0 ]; then
    run "${mode}_tutti_onehost" "$LIB" "$out/${mode}_tutti_onehost.pt" --mode $mode \
      --steps "$STEPS" || fail=1
    "$py" tests/torch/fsdp_compare.py --compare "$out/${mode}_tutti_onehost.pt" \
      "$out/${mode}_nccl.pt" || fail=1
  fi
done
[ $mps_started = 1 ] && echo quit | nvidia-cuda-mps-control
echo "torch-fsdp: $([ $fail = 0 ] && echo PASSED || echo FAILED) (logs in $out)"
exit $fail
