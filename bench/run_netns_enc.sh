#!/usr/bin/env bash
# The cost of ncclSetEncryption across two network-namespace hosts (one rank
# each, tests/netns/hosts.sh): tutti-perf allreduce, plaintext and encrypted
# (TUTTI_PERF_PSK) in alternating rounds of one run: busbw at large sizes,
# then the time of 8-byte calls. With BASE=another build (the tree before
# encryption), its plaintext takes turns too: the cost of the unencrypted
# path. Writes the outputs and a summary under
# bench/results/<date>/netns-enc/. Needs root, iproute2 and a build in BUILD
# (default build/).
#   bash bench/run_netns_enc.sh [ROUNDS]   default: 3
# A run that cannot start, times out (BENCH_LIMIT s), fails or prints no
# rows is named, and the script exits 1 before the summary (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(cd "${BUILD:-build}" && pwd)
base=${BASE:+$(cd "$BASE" && pwd)}
modes="plain enc"
[ -z "$base" ] || modes="base plain enc"
rounds=${1:-3}
out=bench/results/$(date -u +%Y-%m-%d)/netns-enc
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
export TUTTI_JOB_SECRET="netns-enc-bench-$TUTTI_NETNS_ID-$RANDOM"
hosts="bash $root/tests/netns/hosts.sh"
trap '$hosts down' EXIT
$hosts up 2
a0=$($hosts addr 0)
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)" |
  tee "$out/machine.txt"

# run NAME PSK BUILD ARGS...: tutti-perf allreduce on both hosts; rank 0's lines in $out/NAME.txt.
run() {
  local name=$1 psk=$2 b=$3 pids=()
  shift 3
  for i in 0 1; do
    $hosts run $i env TUTTI_PERF_PSK="$psk" timeout "${BENCH_LIMIT:-1800}" "$b/tools/tuttirun/tuttirun" \
      --nnodes 2 --node_rank $i --nproc_per_node 1 --master_addr "$a0" --master_port 29500 \
      --no_prefix "$b/tools/tutti-perf/tutti-perf" allreduce -c 0 --device host "$@" \
      >"$out/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  bench_wait "$name" "$out/$name.0.log" "$out/$name.1.log" -- "${pids[@]}"
  grep -E "^ +[0-9]+ " "$out/$name.0.log" >"$out/$name.txt" || true
}

key="bench-pre-shared-key-0123456789abcdef-$RANDOM"
for ((k = 1; k <= rounds; k++)); do
  for mode in $modes; do
    psk="" b=$build
    [ $mode = enc ] && psk=$key
    [ $mode = base ] && b=$base
    run "bw.$mode.$k" "$psk" "$b" -b 16M -e 128M -f 2 -n 8 -w 2
    run "lat.$mode.$k" "$psk" "$b" -b 8 -e 8 -n 2000 -w 200
  done
done

# Columns of a tutti-perf line: size count type redop root time algbw busbw ...
# col FILES COLUMN SIZE: the sorted values; med: their median.
col() { cat $1 2>/dev/null | awk -v s=$3 -v c=$2 '$1 == s {print $c}' | sort -g | tr '\n' ' '; }
med() { awk -v v="$1" 'BEGIN {n = split(v, a, " "); if (n) print a[int((n + 1) / 2)]; else print 0}'; }
summary() {
  echo "| size | base busbw GB/s | plain | encrypted | plain / base | encrypted / plain |"
  echo "|---|---|---|---|---:|---:|"
  for size in 16777216 33554432 67108864 134217728; do
    local b p e
    b=$(col "$out/bw.base.*.txt" 8 $size) p=$(col "$out/bw.plain.*.txt" 8 $size)
    e=$(col "$out/bw.enc.*.txt" 8 $size)
    awk -v s=$size -v b="$b" -v p="$p" -v e="$e" -v mb="$(med "$b")" -v mp="$(med "$p")" \
      -v me="$(med "$e")" 'BEGIN {printf "| %d MB | %s | %s | %s | %.2f | %.2f |\n", s / 1048576,
        b, p, e, (mb > 0 ? mp / mb : 0), me / mp}'
  done
  local b p e
  b=$(col "$out/lat.base.*.txt" 6 8) p=$(col "$out/lat.plain.*.txt" 6 8) e=$(col "$out/lat.enc.*.txt" 6 8)
  echo
  echo "8 B allreduce, us per call: base $b; plain $p; encrypted $e"
  awk -v mb="$(med "$b")" -v mp="$(med "$p")" -v me="$(med "$e")" 'BEGIN {
    printf "medians: plain / base %.2f, encrypted / plain %.2f\n", (mb > 0 ? mp / mb : 0), me / mp}'
}
bench_finish run_netns_enc || exit 1
summary | tee "$out/summary.md"
# One file of every run's lines (the folder stays small; logs are dropped).
for f in "$out"/bw.*.txt "$out"/lat.*.txt; do
  echo "== $(basename "$f" .txt)"
  cat "$f"
done >"$out/runs.txt"
rm -f "$out"/bw.*.txt "$out"/lat.*.txt "$out"/*.log
