#!/usr/bin/env bash
# tutti against Open MPI over TCP across two network-namespace hosts (one
# rank each, tests/netns/hosts.sh), in one run: the raw TCP stream
# (tcp_raw_bw), tutti-perf under one tuttirun per host, and bench/mpi_bench.c
# under mpirun with `--mca btl tcp,self`, started in host 0 and reaching
# host 1 through bench/netns_agent.sh (mpirun's "ssh" becomes a namespace
# exec). Writes JSON and a markdown ratio table under
# bench/results/<date>/netns/. Needs root, iproute2, openmpi-bin and
# libopenmpi-dev (installed here if missing), and a build in BUILD (default
# build/).
#   bash bench/run_netns.sh [COLL...]      default: allreduce
# A run that cannot start, times out (BENCH_LIMIT s), fails or prints no
# rows is named at the end, and the script exits 1 (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD:-build}
colls=${*:-allreduce}
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
out=bench/results/$(date -u +%Y-%m-%d)/netns
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
mpi_bench=$(cd "$build" && pwd)/mpi_bench
mpicc -O2 -o "$mpi_bench" bench/mpi_bench.c
MIN=${MIN:-1M} MAX=${MAX:-256M} ITERS=${ITERS:-10} WARM=${WARM:-3}
export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
export TUTTI_JOB_SECRET="netns-bench-$TUTTI_NETNS_ID-$RANDOM"
hosts="bash $root/tests/netns/hosts.sh"
trap '$hosts down' EXIT
$hosts up 2
a0=$($hosts addr 0)
a1=$($hosts addr 1)
printf '%s slots=1\n%s slots=1\n' "$a0" "$a1" >"$out/hostfile"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)"
  $hosts run 1 "$build/tests/tcp_raw_bw" -l -p 29400 -s 2 >/dev/null 2>&1 &
  sleep 0.3
  $hosts run 0 "$build/tests/tcp_raw_bw" -c "$a1" -p 29400 -b 512M -s 2 -d
  wait
} | tee "$out/machine.txt"
for coll in $colls; do
  echo "== $coll, 2 hosts x 1 rank"
  pids=()
  for i in 0 1; do
    $hosts run $i timeout "${BENCH_LIMIT:-1800}" "$build/tools/tuttirun/tuttirun" --nnodes 2 \
      --node_rank $i --nproc_per_node 1 --master_addr "$a0" --master_port 29500 --no_prefix \
      "$build/tools/tutti-perf/tutti-perf" "$coll" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" \
      -w "$WARM" -c 0 --device host --json "$root/$out/tutti_$coll.json" >"$out/tutti_$coll.$i.txt" 2>&1 &
    pids+=($!)
  done
  bench_wait "tutti $coll" "$out/tutti_$coll.0.txt" "$out/tutti_$coll.1.txt" -- "${pids[@]}"
  bench_run "Open MPI $coll" "$out/mpi_$coll.txt" $hosts run 0 mpirun --allow-run-as-root \
    --hostfile "$out/hostfile" -np 2 --map-by node \
    --mca plm_rsh_agent "$root/bench/netns_agent.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    "$mpi_bench" "$coll" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARM" \
    --json "$root/$out/mpi_$coll.json"
  /usr/bin/python3 bench/compare.py "$out/tutti_$coll.json" "$out/mpi_$coll.json" \
    >"$out/compare_$coll.md" 2>&1 || bench_fail "compare $coll: $(tail -n 1 "$out/compare_$coll.md")"
  cat "$out/compare_$coll.md"
done
bench_finish run_netns
