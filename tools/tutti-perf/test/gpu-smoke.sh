#!/bin/sh
# GPU-mode smoke run of tutti-perf against NVIDIA's NCCL, for a machine with
# GPUs, a CUDA runtime and libnccl.so.2 (e.g. from the nvidia-nccl-cu* wheel).
# Usage: test/gpu-smoke.sh [OUTDIR]   (from the repository root)
# Not part of ctest: CI has no GPU.
set -u
out=${1:-/tmp/tutti-perf-gpu}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on shared machines
perf=$out/tutti-perf
cc -O2 -std=gnu11 -Wall -Wextra -Iinclude tools/tutti-perf/*.c -o "$perf" -ldl -lm -lpthread || exit 1
cmake -S . -B "$out/build" -DTUTTI_BUILD_TESTS=OFF >/dev/null &&
  cmake --build "$out/build" --target tutti -j8 >/dev/null || echo "(libtutti did not build)"
tutti=$out/build/libtutti.so.0
find_lib() { # $1: file name; searches the Python packages and the CUDA toolkit
  python3 - "$1" <<'PY'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages(), "/usr/local/cuda", "/usr/lib"]
for r in roots:
    for p in sorted(glob.glob(os.path.join(r, "**", sys.argv[1]), recursive=True)):
        print(p); sys.exit(0)
PY
}
nccl=${NCCL_LIB:-$(find_lib 'libnccl.so.2')}
export TUTTI_PERF_CUDART=${TUTTI_PERF_CUDART:-$(find_lib 'libcudart.so.1[0-9]*')}
echo "nccl=$nccl cudart=$TUTTI_PERF_CUDART"
ngpu=$(nvidia-smi -L | wc -l)
rc=0
run() { echo "=== $*"; "$perf" --lib "$nccl" "$@" || { echo "rc=$?"; rc=1; }; }
run allreduce -t "$ngpu" -b 8 -e 256M -f 4 --json "$out/nccl-allreduce.json"
for c in allgather reducescatter broadcast reduce alltoall gather scatter sendrecv; do
  run $c -t "$ngpu" -b 8 -e 16M -f 16 -n 5 -w 2
done
run allreduce -g "$ngpu" -b 1K -e 1M -f 32 -d all -o all -n 2 -w 1
run allreduce -t "$ngpu" -b 8 -e 1M -f 8 -G 10 -n 5 -w 2
run allreduce -t "$ngpu" -b 8 -e 1M -f 8 -p 1 -m 4 -a 3 -y 1
run reducescatter -g "$ngpu" -b 8 -e 1M -f 8 -z 1 -a 0 -c 2
# One process per GPU, started as a launcher would.
port=$((20000 + $$ % 12000)) # below the ephemeral range
for r in $(seq 0 $((ngpu - 1))); do
  NCCL_COMM_ID=127.0.0.1:$port RANK=$r WORLD_SIZE=$ngpu LOCAL_RANK=$r \
    "$perf" --lib "$nccl" allreduce -b 8 -e 64M -f 8 -a 2 >"$out/procs$r.txt" 2>&1 &
done
wait || rc=1
cat "$out/procs0.txt"
# tutti on the same box: host buffers must work; device buffers give a clear error.
"$perf" --lib "$tutti" allreduce --device host -t 2 -b 8 -e 1M -f 8 || rc=1
"$perf" --lib "$tutti" allreduce --device gpu -b 8 -e 8 -n 1 -w 0; echo "tutti --device gpu: rc=$?"
python3 tools/tutti-perf/tutti-plot "$out/nccl-allreduce.json" -o "$out/nccl-allreduce.svg" || rc=1
exit $rc
