#!/usr/bin/env bash
# The GPU suite on a host with NVIDIA GPUs: builds tutti with its device
# executor into build-gpu/ (the local GPUs' architecture, only the programs
# the suite runs; a build already there is brought up to date) and runs
# tests/gpu/test_gpu in every mode (processes, ranks sharing a GPU, one
# process for all GPUs, graph capture, concurrent communicators, send/recv,
# large counts, device data through the network proxy), then suspend and
# resume measured with cudaMemGetInfo (test_gpu_suspend: bench/suspend_mem.c
# --check), memory per communicator within its bound (test_gpu_comm_mem:
# bench/comm_mem.c --check), one-sided operations on device buffers
# (test_gpu_rma: one host, ranks as hosts, and its loop with the GPU's
# hardware queues shared: CUDA_DEVICE_MAX_CONNECTIONS=1 and under MPS),
# tutti-ras seeing a kernel that waits (test_gpu_ras), ncclCommGrow on
# device buffers (test_gpu_grow), then a short version under
# compute-sanitizer (memcheck and racecheck) when it is installed.
# Usage: scripts/gpu-test.sh [MODE] [NRANKS]
#   all    (default) the core mode with the whole matrix, every other mode
#          with a lean one, the 4-rank modes, suspend, comm_mem, rma, grow,
#          compute-sanitizer; no soak
#   quick  the core matrix and one pass through every other mode, the
#          one-sided loop, comm_mem's bound, tutti-ras on a waiting kernel: a
#          few minutes
#   full   every mode with the whole matrix, the soaks too
#   procs, shared, ..., suspend, comm_mem, rma, ras, grow: that part alone
# Each stage prints its time, and the end the total. On a host without a GPU
# the suite reports itself skipped (exit 77).
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIPPED: no NVIDIA GPU here (nvidia-smi lists none)"
  exit 77
fi
mode=${1:-all}
nranks=${2:-}
t0=$SECONDS
stage_t=$SECONDS
# "== <what> done in N s (at T s)" after each stage.
stage() {
  echo "== $1 done in $((SECONDS - stage_t)) s (at $((SECONDS - t0)) s)"
  stage_t=$SECONDS
}
# TUTTI_GPU_PREBUILT=1: build-gpu/ already holds the test programs and libraries.
if [ "${TUTTI_GPU_PREBUILT:-0}" != 1 ]; then
  TARGETS="test_gpu test_gpu_suspend test_gpu_comm_mem test_gpu_rma test_gpu_grow tutti_as_nccl" \
    BUILD_DIR=build-gpu CMAKE_ARGS="-DTUTTI_CUDA=ON -DTUTTI_CUDA_ARCHS=local ${CMAKE_ARGS:-}" \
    bash scripts/build.sh >/dev/null
fi
stage build
find_bin() {
  local b=build-gpu/tests/$1
  [ -x "$b" ] || b=$(find build-gpu -name "$1" -type f | head -n 1)
  echo "$b"
}
bin=$(find_bin test_gpu)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
set +e
rc=0
whole=0
case "$mode" in all | full) whole=1 ;; esac
quick=0
[ "$mode" = quick ] && quick=1
to=${TUTTI_TIMEOUT:-60}
# Runs a program and notes a failure.
run() {
  "$@"
  local r=$?
  [ $r -eq 0 ] || { echo "== FAILED ($r): $*"; rc=1; }
}

case "$mode" in suspend | rma | grow | comm_mem | ras) ;; *)
  TUTTI_TIMEOUT=$to "$bin" "$mode" $nranks
  r=$?
  # A GPU is listed: a skip here is a failure to start CUDA.
  [ $r -eq 0 ] || { echo "== FAILED ($r): test_gpu $mode"; rc=1; }
  stage "test_gpu $mode"
  ;;
esac
if [ $whole = 1 ] && [ -z "$nranks" ]; then
  # More ranks than GPUs: 4 ranks on the mapped kernel (up to its size limit)
  # and the schedules' kernel, then every pair through the proxy.
  for m in procs ring ce net ll128 streams streams-net; do
    TUTTI_GPU_MATRIX=lean TUTTI_TIMEOUT=$to run "$bin" $m 4
  done
  stage "4-rank modes"
fi
if [ $whole = 1 ] || [ "$mode" = suspend ]; then
  # Suspend and resume measured with cudaMemGetInfo (bench/suspend_mem.c --check).
  TUTTI_TIMEOUT=$to run "$(find_bin test_gpu_suspend)" build-gpu/libnccl.so.2 all ${nranks:-2} --check
  stage suspend
fi
if [ $whole = 1 ] || [ $quick = 1 ] || [ "$mode" = comm_mem ]; then
  # GPU memory per communicator within its layout's bound (bench/comm_mem.c --check):
  # lean, the default, and fitted to 28 MiB.
  mbin=$(find_bin test_gpu_comm_mem)
  TUTTI_TIMEOUT=$to run "$mbin" build-gpu/libnccl.so.2 procs 2 4 --check 96 96
  [ $quick = 1 ] || TUTTI_COMM_MEMORY=29360128 TUTTI_TIMEOUT=$to run "$mbin" build-gpu/libnccl.so.2 \
    procs 2 4 --check 32 32
  stage comm_mem
fi
if [ $whole = 1 ] || [ $quick = 1 ] || [ "$mode" = rma ]; then
  rbin=$(find_bin test_gpu_rma)
  [ $quick = 1 ] || TUTTI_TIMEOUT=$to run "$rbin" all
  # The ring of puts and waits issued without a synchronize, where streams
  # share the GPU's hardware queues: a delivery that waited behind the
  # application's own work would stall here every time.
  TUTTI_TIMEOUT=20 CUDA_DEVICE_MAX_CONNECTIONS=1 run "$rbin" loop
  if command -v nvidia-cuda-mps-control >/dev/null; then
    mps=$(mktemp -d)
    if CUDA_MPS_PIPE_DIRECTORY=$mps CUDA_MPS_LOG_DIRECTORY=$mps nvidia-cuda-mps-control -d; then
      CUDA_MPS_PIPE_DIRECTORY=$mps TUTTI_TIMEOUT=20 run "$rbin" loop
      echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps nvidia-cuda-mps-control
    else
      echo "== FAILED: could not start MPS for the one-sided loop"
      rc=1
    fi
  else
    echo "== one-sided loop under MPS skipped: no nvidia-cuda-mps-control"
  fi
  stage rma
fi
if [ $whole = 1 ] || [ $quick = 1 ] || [ "$mode" = ras ]; then
  # tutti-ras sees a rank whose kernel waits for a peer that never launched.
  TUTTI_TIMEOUT=$to run "$(find_bin test_gpu_ras)" "$(find build-gpu -name tutti-ras -type f -perm -u+x | head -n 1)"
  stage ras
fi
if [ $whole = 1 ] || [ "$mode" = grow ]; then
  TUTTI_TIMEOUT=$to run "$(find_bin test_gpu_grow)" all
  stage grow
fi
set -e
if [ $rc -eq 0 ] && [ $whole = 1 ] && [ "${TUTTI_SANITIZE_GPU:-1}" = 1 ] &&
  command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool (p2p and concurrent modes)"
    for m in p2p concurrent; do
      TUTTI_TIMEOUT=120 compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
        "$bin" $m 2 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|SKIPPED" || rc=1
    done
  done
  stage compute-sanitizer
fi
echo "== gpu-test.sh $mode: $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s"
exit $rc
