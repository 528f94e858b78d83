#!/usr/bin/env bash
# PyTorch CPU tensors across two network-namespace hosts, one rank each: the
# `tutti` backend against Gloo in the same job (bench/torch_cpu.py
# --launched: all_reduce of 8 B to 64 MB, then DDP steps per second, each
# rank holding one group of each backend). Needs root, iproute2 and a Python
# with torch and tutti: PYTHON, by default the one python.torch_pypi makes.
#   bash bench/run_netns_torch.sh [torch_cpu.py options]
# A rank that cannot start, fails, times out (BENCH_LIMIT s) or prints no
# rows is named, and the script exits 1 (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-build/tests/python/venv-torch-2.15.0/bin/python}
out=${OUT:-bench/results/$(date -u +%Y-%m-%d)/netns-torch}
mkdir -p "$out"
out=$(cd "$out" && pwd)
. bench/lib.sh
bench_init "$out"
export TUTTI_NETNS_ID=$(((RANDOM << 8 ^ $$) % 65536))
hosts="bash $root/tests/netns/hosts.sh"
trap '$hosts down' EXIT
$hosts up 2
a0=$($hosts addr 0)
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)" \
  "  cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" | tee "$out/machine.txt"
pids=()
for i in 0 1; do
  # Gloo finds its address from the interface; tutti picks eth0 itself.
  $hosts run $i env RANK=$i WORLD_SIZE=2 MASTER_ADDR="$a0" MASTER_PORT=29531 GLOO_SOCKET_IFNAME=eth0 \
    timeout "${BENCH_LIMIT:-1800}" "$py" "$root/bench/torch_cpu.py" --launched "$@" \
    >"$out/rank$i.txt" 2>&1 &
  pids+=($!)
done
bench_wait "torch_cpu, 2 namespace hosts" "$out/rank0.txt" "$out/rank1.txt" -- "${pids[@]}"
bench_finish run_netns_torch || exit 1
cat "$out/rank0.txt"
