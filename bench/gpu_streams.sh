#!/usr/bin/env bash
# On a host with one NVIDIA GPU (or more), in phases:
#   suite  the GPU suite's multi-stream, memory-kind, several-hosts and MPS
#          modes (tests/gpu/test_gpu.c), then the older modes they touch
#   torch  FSDP2 and DDP on tutti against NVIDIA's NCCL (scripts/torch-fsdp.sh)
#   perf   small and mid-size allreduces, two ranks sharing the GPU under MPS:
#          this build against OLD (an earlier libtutti.so.0, the cost of the
#          launch order) and against NCCL, alternating, as two hosts
#          (NCCL_HOSTID) and, for tutti, as one host
#   threads the same allreduces with the two ranks as threads of one process
#          (tutti-perf -t 2) on the GPU, this build against OLD, alternating
#   det    allreduce and reduce-scatter with and without TUTTI_DETERMINISTIC,
#          alternating, as one host and as two
#   net    two ranks on the GPU as two hosts (NCCL_HOSTID, MPS), GPU buffers:
#          allreduce, all-gather, reduce-scatter, broadcast, alternating:
#          tutti (its own sockets), NCCL (its socket transport), NCCL and
#          tutti each on tutti's plugin (NCCL_NET_PLUGIN=$PLUGIN)
#   putsignal  two ranks on the GPU under MPS, GPU buffers, alternating:
#          ncclPutSignal/ncclWaitSignal against ncclSend/ncclRecv on tutti,
#          one host (direct puts through peer memory; TUTTI_RMA_DIRECT=0:
#          the service thread) and as two hosts (NCCL_HOSTID), and NCCL's
#          send/recv as two hosts
# Usage: bench/gpu_streams.sh PHASE... with BIN=dir holding test_gpu,
# libtutti.so.0, tutti-perf and libnccl-net-tutti.so (else build-gpu/ is built), OLD=lib,
# NCCL=libnccl.so.2 (else PyTorch's), OUT=dir for logs.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
if [ -z "${BIN:-}" ]; then
  BUILD_DIR=build-gpu CMAKE_ARGS="-DTUTTI_CUDA=ON ${CMAKE_ARGS:-}" bash scripts/build.sh >/dev/null ||
    { echo "gpu_streams: FAILED: the build failed" && exit 1; }
  BIN=$out/bin
  mkdir -p "$BIN"
  cp build-gpu/tests/test_gpu build-gpu/tools/tutti-perf/tutti-perf "$BIN/"
  cp -L build-gpu/libtutti.so.0 "$BIN/"
  cp -L build-gpu/plugin/net/libnccl-net-tutti.so "$BIN/" 2>/dev/null
fi
nccl=${NCCL:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)}
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader

suite() {
  local modes=${MODES:-"streams streams-hosts streams-net streams-ring streams-ce streams-nop2p streams-ll128 memkinds hosts mps frames samegpu procs graph concurrent p2p net netkill"}
  for m in $modes; do
    local t0=$SECONDS
    TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-60} TUTTI_GPU_TEST_LIMIT=${LIMIT:-300} timeout "${BENCH_LIMIT:-$((${LIMIT:-300} + 30))}" \
      "$BIN/test_gpu" "$m" "${NRANKS:-2}" >"$out/suite_$m.log" 2>&1
    local rc=$?
    echo "$m: rc $rc, $((SECONDS - t0)) s: $(grep -E "^mode|SKIPPED" "$out/suite_$m.log" | tr '\n' ' ')"
    bench_status "suite $m" $rc
    [ $rc = 0 ] || grep -v "^case" "$out/suite_$m.log" | head -n 8
  done
}

# perf_pair LABEL LIB HOSTS: tutti-perf $COLL (allreduce), two processes on
# GPU 0, with $PERF_ENV (NAME=VALUE ...) in their environment.
perf_pair() {
  local label=$1 lib=$2 hosts=$3 port=$((20000 + RANDOM % 20000)) pids=()
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port ${PERF_ENV:-} \
      ${hosts:+NCCL_HOSTID=perf-host-$r TUTTI_HOSTID=perf-host-$r} timeout "${PERF_LIMIT:-90}" "$BIN/tutti-perf" "${COLL:-allreduce}" -T 30 -b "${MIN:-8}" -e "${MAX:-64M}" \
      -f 4 -n "${ITERS:-50}" -w 10 -c 1 --lib "$lib" --label "$label" --device gpu \
      >"$out/perf_${label}_$r.log" 2>&1 &
    pids+=($!)
  done
  bench_wait "$label (${COLL:-allreduce})" "$out/perf_${label}_0.log" "$out/perf_${label}_1.log" -- "${pids[@]}"
  grep -vE "^#|^$" "$out/perf_${label}_0.log" | awk -v l="$label" '{print l, $0}'
}

perf() {
  mps_start "$out"
  for rep in 1 2 3; do
    perf_pair new "$BIN/libtutti.so.0" ""
    [ -n "${OLD:-}" ] && perf_pair old "$OLD" ""
    perf_pair new-hosts "$BIN/libtutti.so.0" 1
    [ -n "${OLD:-}" ] && perf_pair old-hosts "$OLD" 1
    [ -n "$nccl" ] && perf_pair nccl-hosts "$nccl" 1
  done | tee "$out/perf.txt"
  mps_stop
}

# One-sided against two-sided, 8 B-256 MB (MIN, MAX), REPS alternations.
putsignal() {
  mps_start "$out"
  for rep in $(seq "${REPS:-2}"); do
    COLL=sendrecv MAX=${MAX:-256M} perf_pair sendrecv "$BIN/libtutti.so.0" ""
    COLL=putsignal MAX=${MAX:-256M} perf_pair putsignal "$BIN/libtutti.so.0" ""
    COLL=putsignal MAX=${MAX:-256M} PERF_ENV=TUTTI_RMA_DIRECT=0 perf_pair putsignal-service \
      "$BIN/libtutti.so.0" ""
    COLL=sendrecv MAX=${MAX:-256M} perf_pair sendrecv-hosts "$BIN/libtutti.so.0" 1
    COLL=putsignal MAX=${MAX:-256M} perf_pair putsignal-hosts "$BIN/libtutti.so.0" 1
    [ -n "$nccl" ] && COLL=sendrecv MAX=${MAX:-256M} perf_pair nccl-sendrecv-hosts "$nccl" 1
  done | tee "$out/putsignal.txt"
  mps_stop
}

# Deterministic reductions against the default mode, alternating, as one
# host (the device paths) and as two hosts (the proxy's schedules).
det() {
  mps_start "$out"
  for rep in $(seq "${REPS:-3}"); do
    for c in allreduce reducescatter; do
      COLL=$c perf_pair "$c-default" "$BIN/libtutti.so.0" ""
      COLL=$c PERF_ENV=TUTTI_DETERMINISTIC=1 perf_pair "$c-det" "$BIN/libtutti.so.0" ""
      COLL=$c perf_pair "$c-default-hosts" "$BIN/libtutti.so.0" 1
      COLL=$c PERF_ENV=TUTTI_DETERMINISTIC=1 perf_pair "$c-det-hosts" "$BIN/libtutti.so.0" 1
    done
  done | tee "$out/det.txt"
  mps_stop
}

# Across "hosts": each library and transport in turn, every collective, REPS times.
net() {
  mps_start "$out"
  local plugin=${PLUGIN:-$BIN/libnccl-net-tutti.so}
  for rep in $(seq "${REPS:-3}"); do
    for c in ${COLLS:-allreduce allgather reducescatter broadcast}; do
      COLL=$c MAX=${MAX:-128M} perf_pair "$c-tutti" "$BIN/libtutti.so.0" 1
      if [ "$c" = allreduce ]; then
        for t in ${THREADS:-1 4}; do
          COLL=$c MAX=${MAX:-128M} PERF_ENV="NCCL_SOCKET_NTHREADS=$t" \
            perf_pair "$c-tutti-t$t" "$BIN/libtutti.so.0" 1
        done
      fi
      # Small messages with the proxy polling one channel instead of four.
      [ "$c" = allgather ] && COLL=$c MAX=64K PERF_ENV="NCCL_MAX_NCHANNELS=1" \
        perf_pair "$c-tutti-ch1" "$BIN/libtutti.so.0" 1
      [ -n "$nccl" ] && COLL=$c MAX=${MAX:-128M} perf_pair "$c-nccl" "$nccl" 1
      [ -n "$nccl" ] && COLL=$c MAX=${MAX:-128M} PERF_ENV="NCCL_NET_PLUGIN=$plugin" \
        perf_pair "$c-nccl+plugin" "$nccl" 1
      COLL=$c MAX=${MAX:-128M} PERF_ENV="NCCL_NET_PLUGIN=$plugin" \
        perf_pair "$c-tutti+plugin" "$BIN/libtutti.so.0" 1
    done
  done | tee "$out/net.txt"
  mps_stop
}

# perf_threads LABEL LIB: tutti-perf allreduce, one process, two threads on GPU 0.
perf_threads() {
  "$BIN/tutti-perf" allreduce -t 2 -g 1 -p 1 --share-gpus -b "${MIN:-8}" -e "${MAX:-64M}" -f 4 -n "${ITERS:-50}" \
    -w 10 -c 1 --lib "$2" --label "$1" --device gpu >"$out/threads_$1.log" 2>&1
  bench_status "threads $1" $? "$out/threads_$1.log"
  grep -vE "^#|^$" "$out/threads_$1.log" | awk -v l="$1" '{print l, $0}'
}

threads() {
  for rep in $(seq "${REPS:-3}"); do
    perf_threads new "$BIN/libtutti.so.0"
    [ -n "${OLD:-}" ] && perf_threads old "$OLD"
  done | tee "$out/threads.txt"
}

for phase in "$@"; do
  case $phase in
    suite) suite ;;
    torch)
      LIB=$BIN/libtutti.so.0 OUT=$out/torch bash scripts/torch-fsdp.sh
      bench_status torch $?
      ;;
    perf) perf ;;
    det) det ;;
    putsignal) putsignal ;;
    net) net ;;
    threads) threads ;;
    *) echo "unknown phase $phase" && exit 2 ;;
  esac
done
echo "logs in $out"
bench_finish gpu_streams
