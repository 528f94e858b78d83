#!/usr/bin/env bash
# The GPU suite on a host with NVIDIA GPUs: builds tutti with its device
# executor into build-gpu/ and runs tests/gpu/test_gpu in every mode
# (processes, ranks sharing a GPU, one process for all GPUs, graph capture,
# concurrent communicators, send/recv, large counts, device data through
# the network proxy), then suspend and resume measured with cudaMemGetInfo
# (test_gpu_suspend: bench/suspend_mem.c --check), memory per communicator
# within its bound (test_gpu_comm_mem: bench/comm_mem.c --check), one-sided operations on
# device buffers (test_gpu_rma, one host and ranks as hosts), ncclCommGrow
# on device buffers (test_gpu_grow), then a short version
# under compute-sanitizer (memcheck and racecheck) when it is installed.
# Usage: scripts/gpu-test.sh [MODE] [NRANKS]   (MODE: all, full, procs, shared, ..., suspend, comm_mem, rma, grow;
# all: the core mode with the whole matrix, the path modes with a lean one, no soak;
# full: every mode with the whole matrix, the soaks too)
# On a host without a GPU the suite reports itself skipped (exit 77).
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIPPED: no NVIDIA GPU here (nvidia-smi lists none)"
  exit 77
fi
# TUTTI_GPU_PREBUILT=1: build-gpu/ already holds the test programs and libraries.
if [ "${TUTTI_GPU_PREBUILT:-0}" != 1 ]; then
  BUILD_DIR=build-gpu CMAKE_ARGS="-DTUTTI_CUDA=ON ${CMAKE_ARGS:-}" bash scripts/build.sh >/dev/null
fi
echo "== built in $SECONDS s"
bin=build-gpu/tests/test_gpu
[ -x "$bin" ] || bin=$(find build-gpu -name test_gpu -type f | head -n 1)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
set +e
rc=0
whole=0
case "${1:-all}" in all | full) whole=1 ;; esac
sbin=build-gpu/tests/test_gpu_suspend
[ -x "$sbin" ] || sbin=$(find build-gpu -name test_gpu_suspend -type f | head -n 1)
case "${1:-all}" in suspend | rma | grow | comm_mem) ;; *)
  TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} "$bin" "${1:-all}" ${2:-}
  rc=$?
  # A GPU is listed: a skip here is a failure to start CUDA.
  [ $rc -ne 77 ] || rc=1
  ;;
esac
echo "== test_gpu done at $SECONDS s"
if [ $whole = 1 ] && [ -z "${2:-}" ]; then
  # More ranks than GPUs: 4 ranks on the mapped kernel (up to its size limit)
  # and the schedules' kernel, then every pair through the proxy.
  for m in procs ring ce net ll128 streams streams-net; do
    TUTTI_GPU_MATRIX=lean TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} "$bin" $m 4 || rc=1
  done
fi
echo "== 4-rank modes done at $SECONDS s"
if [ $whole = 1 ] || [ "${1:-all}" = suspend ]; then
  # Suspend and resume measured with cudaMemGetInfo (bench/suspend_mem.c --check).
  TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} "$sbin" build-gpu/libnccl.so.2 all ${2:-2} --check
  src=$?
  [ $src -eq 0 ] || rc=1
fi
# One-sided operations on device buffers, and growing on them.
if [ $whole = 1 ] || [ "${1:-all}" = comm_mem ]; then
  # GPU memory per communicator within its layout's bound (bench/comm_mem.c --check):
  # lean, the default, and fitted to 28 MiB.
  mbin=$(find build-gpu -name test_gpu_comm_mem -type f | head -n 1)
  TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} "$mbin" build-gpu/libnccl.so.2 procs 2 4 --check 96 96 || rc=1
  TUTTI_COMM_MEMORY=29360128 TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} "$mbin" build-gpu/libnccl.so.2 procs 2 4 \
    --check 32 32 || rc=1
fi
echo "== comm_mem done at $SECONDS s"
for t in rma grow; do
  if [ $whole = 1 ] || [ "${1:-all}" = $t ]; then
    tbin=$(find build-gpu -name test_gpu_$t -type f | head -n 1)
    for m in all; do
      TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} "$tbin" $m
      trc=$?
      [ $trc -eq 0 ] || rc=1
    done
  fi
done
echo "== suspend, rma and grow done at $SECONDS s"
set -e
if [ $rc -eq 0 ] && [ "${TUTTI_SANITIZE_GPU:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool (p2p and concurrent modes)"
    for m in p2p concurrent; do
      TUTTI_TIMEOUT=120 compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
        "$bin" $m 2 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|SKIPPED" || rc=1
    done
  done
fi
echo "== gpu-test.sh: $([ $rc = 0 ] && echo passed || echo FAILED) in $SECONDS s"
exit $rc
