#!/usr/bin/env bash
# The cost of ncclSetEncryption across two network-namespace hosts (one rank
# each, tests/netns/hosts.sh): tutti-perf allreduce, plaintext and encrypted
# (TUTTI_PERF_PSK) in alternating rounds of one run: busbw at large sizes,
# then the time of 8-byte calls. Writes the outputs and a summary under
# bench/results/<date>/netns-enc/. Needs root, iproute2 and a build in BUILD
# (default build/).
#   bash bench/run_netns_enc.sh [ROUNDS]   default: 3
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(cd "${BUILD:-build}" && pwd)
rounds=${1:-3}
out=bench/results/$(date -u +%Y-%m-%d)/netns-enc
mkdir -p "$out"
export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
export TUTTI_JOB_SECRET="netns-enc-bench-$TUTTI_NETNS_ID-$RANDOM"
hosts="bash $root/tests/netns/hosts.sh"
trap '$hosts down' EXIT
$hosts up 2
a0=$($hosts addr 0)
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  kernel: $(uname -r)" |
  tee "$out/machine.txt"

# run NAME PSK ARGS...: tutti-perf allreduce on both hosts; rank 0's output in $out/NAME.txt.
run() {
  local name=$1 psk=$2
  shift 2
  for i in 0 1; do
    $hosts run $i env TUTTI_PERF_PSK="$psk" "$build/tools/tuttirun/tuttirun" --nnodes 2 \
      --node_rank $i --nproc_per_node 1 --master_addr "$a0" --master_port 29500 --no_prefix \
      "$build/tools/tutti-perf/tutti-perf" allreduce -c 0 --device host "$@" \
      >"$out/$name.$i.log" 2>&1 &
  done
  wait
  grep -E "^ +[0-9]+ " "$out/$name.0.log" >"$out/$name.txt"
}

key="bench-pre-shared-key-0123456789abcdef-$RANDOM"
for ((k = 1; k <= rounds; k++)); do
  for mode in plain enc; do
    psk=""
    [ $mode = enc ] && psk=$key
    run "bw.$mode.$k" "$psk" -b 16M -e 128M -f 2 -n 8 -w 2
    run "lat.$mode.$k" "$psk" -b 8 -e 8 -n 2000 -w 200
  done
done

# Columns of a tutti-perf line: size count type redop root time algbw busbw ...
summary() {
  echo "| size | plain busbw GB/s | encrypted | ratio |"
  echo "|---|---:|---:|---:|"
  for size in 16777216 33554432 67108864 134217728; do
    local p e
    p=$(cat "$out"/bw.plain.*.txt | awk -v s=$size '$1 == s {print $8}' | sort -g | tr '\n' ' ')
    e=$(cat "$out"/bw.enc.*.txt | awk -v s=$size '$1 == s {print $8}' | sort -g | tr '\n' ' ')
    awk -v s=$size -v p="$p" -v e="$e" 'BEGIN {
      np = split(p, a, " "); ne = split(e, b, " ");
      printf "| %d MB | %s | %s | %.2f |\n", s / 1048576, p, e, b[int((ne + 1) / 2)] / a[int((np + 1) / 2)] }'
  done
  local p e
  p=$(cat "$out"/lat.plain.*.txt | awk '$1 == 8 {print $6}' | sort -g | tr '\n' ' ')
  e=$(cat "$out"/lat.enc.*.txt | awk '$1 == 8 {print $6}' | sort -g | tr '\n' ' ')
  awk -v p="$p" -v e="$e" 'BEGIN {
    np = split(p, a, " "); ne = split(e, b, " ");
    printf "\n8 B allreduce, us per call: plain %s; encrypted %s; ratio of medians %.2f\n", p, e,
      b[int((ne + 1) / 2)] / a[int((np + 1) / 2)] }'
}
summary | tee "$out/summary.md"
