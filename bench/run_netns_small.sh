#!/usr/bin/env bash
# Small collectives across two network-namespace hosts (one rank each, host
# buffers), tutti against Open MPI over `--mca btl tcp,self` both
# busy-polling (its default) and yielding when idle
# (`mpi_yield_when_idle 1`), in alternating rounds: on a shared VM one run
# of each can land in different scheduler weather, so the table
# (bench/netns_small_table.py) takes medians over REPS rounds and compares
# tutti with the faster Open MPI mode per size. PREV=dir adds, per round, a
# tutti-perf run on that build's libtutti.so (an A/B against an earlier
# tree); ALGOS="Direct Ring" adds a run per algorithm (NCCL_ALGO), to set
# the planner's table from; PSK=key a run encrypted (ncclSetEncryption,
# tutti-perf's TUTTI_PERF_PSK); VARIANTS="name:VAR=value,..." a run with
# that environment each. LOOPBACK=1: the two ranks on this host instead,
# each its own NCCL_HOSTID (so tutti takes TCP over loopback, as between
# hosts) against Open MPI's tcp,self over lo. Needs root, iproute2 and
# Open MPI (installed here when missing).
#   REPS=3 bash bench/run_netns_small.sh [COLL...]
# Environment: BUILD (build/), OUT, MIN/MAX (8/64K), ITERS/WARM for tutti
# and yielding Open MPI, BUSY_ITERS/BUSY_WARM for busy-polling Open MPI
# (whose calls took 8 ms each on the VM: a scheduler tick per message).
# A run that cannot start, times out (BENCH_LIMIT s), fails or prints no
# rows is named, and the script exits 1 before the table (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD:-build}
colls=${*:-allreduce allgather reducescatter broadcast}
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
out=${OUT:-bench/results/$(date -u +%Y-%m-%d)/netns-small}
mkdir -p "$out"
out=$(cd "$out" && pwd)
. bench/lib.sh
bench_init "$out"
mpi_bench=$(cd "$build" && pwd)/mpi_bench
mpicc -O2 -o "$mpi_bench" bench/mpi_bench.c
MIN=${MIN:-8} MAX=${MAX:-64K} ITERS=${ITERS:-1000} WARM=${WARM:-200} REPS=${REPS:-3}
BUSY_ITERS=${BUSY_ITERS:-$ITERS} BUSY_WARM=${BUSY_WARM:-$WARM}
export TUTTI_NETNS_ID=$(((RANDOM << 8 ^ $$) % 65536))
export TUTTI_JOB_SECRET="netns-small-$TUTTI_NETNS_ID-$RANDOM"
loopback=${LOOPBACK:-0}
hosts="bash $root/tests/netns/hosts.sh"
if [ "$loopback" = 1 ]; then
  a0=127.0.0.1
else
  trap '$hosts down' EXIT
  $hosts up 2
  a0=$($hosts addr 0)
  a1=$($hosts addr 1)
  printf '%s slots=1\n%s slots=1\n' "$a0" "$a1" >"$out/hostfile"
fi
echo "mode: $([ "$loopback" = 1 ] && echo "loopback, a host id per rank" || echo "two namespace hosts")" \
  | tee -a "$out/machine.txt"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)" \
  "  cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" | tee "$out/machine.txt"

tutti() { # tutti() LABEL BUILD COLL REP [ENV...]
  local label=$1 b=$2 coll=$3 rep=$4 pids=()
  shift 4
  if [ "$loopback" = 1 ]; then
    # shellcheck disable=SC2016 # LOCAL_RANK is the rank's, set by tuttirun
    bench_run "$label $coll round $rep" "$out/${label}_${coll}_r$rep.0.txt" \
      env "$@" "$b/tools/tuttirun/tuttirun" --nproc_per_node 2 --master_addr 127.0.0.1 \
      --master_port $((29500 + rep % 50)) --no_prefix \
      sh -c 'NCCL_HOSTID=loopback-$LOCAL_RANK exec "$@"' sh \
      "$b/tools/tutti-perf/tutti-perf" "$coll" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARM" \
      -c 1 --device host --json "$out/${label}_${coll}_r$rep.json"
    return
  fi
  for i in 0 1; do
    $hosts run $i env "$@" timeout "${BENCH_LIMIT:-1800}" "$b/tools/tuttirun/tuttirun" --nnodes 2 --node_rank $i \
      --nproc_per_node 1 --master_addr "$a0" --master_port $((29500 + rep % 50)) --no_prefix \
      "$b/tools/tutti-perf/tutti-perf" "$coll" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARM" \
      -c 1 --device host --json "$out/${label}_${coll}_r$rep.json" \
      >"$out/${label}_${coll}_r$rep.$i.txt" 2>&1 &
    pids+=($!)
  done
  bench_wait "$label $coll round $rep" "$out/${label}_${coll}_r$rep.0.txt" \
    "$out/${label}_${coll}_r$rep.1.txt" -- "${pids[@]}"
}

mpi() { # mpi() LABEL COLL REP ITERS WARM [MCA...]
  local label=$1 coll=$2 rep=$3 n=$4 w=$5
  shift 5
  if [ "$loopback" = 1 ]; then
    bench_run "$label $coll round $rep" "$out/${label}_${coll}_r$rep.txt" \
      mpirun --allow-run-as-root -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo "$@" \
      "$mpi_bench" "$coll" -b "$MIN" -e "$MAX" -f 2 -n "$n" -w "$w" \
      --json "$out/${label}_${coll}_r$rep.json"
    return
  fi
  bench_run "$label $coll round $rep" "$out/${label}_${coll}_r$rep.txt" \
    $hosts run 0 mpirun --allow-run-as-root --hostfile "$out/hostfile" -np 2 --map-by node \
    --mca plm_rsh_agent "$root/bench/netns_agent.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 "$@" \
    "$mpi_bench" "$coll" -b "$MIN" -e "$MAX" -f 2 -n "$n" -w "$w" \
    --json "$out/${label}_${coll}_r$rep.json"
}

for rep in $(seq 1 "$REPS"); do
  for coll in $colls; do
    echo "round $rep, $coll, load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/machine.txt"
    tutti tutti "$build" "$coll" "$rep"
    if [ -n "${PREV:-}" ]; then
      tutti prev "$PREV" "$coll" "$rep"
    fi
    for algo in ${ALGOS:-}; do
      tutti "algo_$algo" "$build" "$coll" "$rep" NCCL_ALGO="$algo"
    done
    for v in ${VARIANTS:-}; do # name:VAR=value[,VAR=value]
      tutti "algo_${v%%:*}" "$build" "$coll" "$rep" $(tr , ' ' <<<"${v#*:}")
    done
    if [ -n "${PSK:-}" ]; then
      tutti algo_encrypted "$build" "$coll" "$rep" TUTTI_PERF_PSK="$PSK"
    fi
    mpi mpi_yield "$coll" "$rep" "$ITERS" "$WARM" --mca mpi_yield_when_idle 1
    mpi mpi_busy "$coll" "$rep" "$BUSY_ITERS" "$BUSY_WARM"
  done
done
bench_finish run_netns_small || exit 1
/usr/bin/python3 bench/netns_small_table.py "$out" $colls | tee "$out/compare.md"
