#!/usr/bin/env bash
# Small messages across hosts on one GPU: two ranks as two hosts
# (NCCL_HOSTID per rank, MPS on), GPU buffers, tutti's device proxy over
# its socket network against NVIDIA's NCCL sockets (issue 51's setup).
#   breakdown  blocking calls of 8 B (tutti-perf -z 1) with TUTTI_NET_TRACE:
#              where a call's time goes (bench/net_breakdown.py), per
#              collective in $COLLS
#   sweep      tutti and NCCL alternating, $REPS times, every collective of
#              $COLLS, $MIN-$MAX: time per call (us) side by side, and the
#              ratio tutti / NCCL of the medians; $VARIANTS adds tutti runs
#              with other settings to the alternation ("label:NAME=VALUE,...")
# Usage: BIN=dir (tutti-perf, libtutti.so.0) [NCCL=libnccl.so.2] [OUT=dir]
#        [PERF_ENV="NAME=VALUE ..."] bench/gpu_small.sh PHASE...
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
. bench/lib.sh
bench_init "$out"
BIN=${BIN:-build-gpu}
perf=$BIN/tutti-perf
[ -x "$perf" ] || perf=$BIN/tools/tutti-perf/tutti-perf
lib=$BIN/libtutti.so.0
nccl=${NCCL:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)}
COLLS=${COLLS:-allreduce allgather reducescatter broadcast}

# pair LABEL LIB COLL MIN MAX ITERS EXTRA...: two ranks as two hosts; rank 0's rows.
pair() {
  local label=$1 l=$2 coll=$3 min=$4 max=$5 iters=$6 port=$((20000 + RANDOM % 20000)) pids=()
  shift 6
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port \
      NCCL_HOSTID=small-host-$r TUTTI_HOSTID=small-host-$r ${PERF_ENV:-} \
      timeout "${PERF_LIMIT:-120}" "$perf" "$coll" -T 30 -b "$min" -e "$max" -f 2 -n "$iters" -w 20 \
      -c 1 --lib "$l" --label "$label" --device gpu "$@" >"$out/${label}_${coll}_$r.log" 2>&1 &
    pids+=($!)
  done
  bench_wait "$label $coll" "$out/${label}_${coll}_0.log" "$out/${label}_${coll}_1.log" -- "${pids[@]}"
  grep -vE "^#|^$" "$out/${label}_${coll}_0.log" | awk -v l="$label" -v c="$coll" '{print l, c, $0}'
}

breakdown() {
  mps_start "$out"
  for c in $COLLS; do
    rm -f "$out/trace_$c".*
    PERF_ENV="${PERF_ENV:-} TUTTI_NET_TRACE=$out/trace_$c" pair trace "$lib" "$c" 8 8 "${ITERS:-2000}" -z 1
    echo "== $c, 8 B, blocking calls"
    python3 bench/net_breakdown.py "$out/trace_$c" || bench_fail "breakdown $c: no trace to read"
    rm -f "$out/trace_$c".*
  done | tee "$out/breakdown.txt"
  mps_stop
}

sweep() {
  mps_start "$out"
  for rep in $(seq "${REPS:-3}"); do
    for c in $COLLS; do
      pair tutti "$lib" "$c" "${MIN:-8}" "${MAX:-1M}" "${ITERS:-200}"
      for v in ${VARIANTS:-}; do
        local venv=${v#*:}
        PERF_ENV="${PERF_ENV:-} ${venv//,/ }" pair "${v%%:*}" "$lib" "$c" "${MIN:-8}" "${MAX:-1M}" \
          "${ITERS:-200}"
      done
      [ -n "$nccl" ] && pair nccl "$nccl" "$c" "${MIN:-8}" "${MAX:-1M}" "${ITERS:-200}"
    done
  done | tee "$out/sweep.txt"
  mps_stop
  table "$out/sweep.txt" | tee "$out/sweep_table.md"
}

# The medians of sweep.txt's rows: us per call (out of place), tutti / NCCL.
table() {
  python3 - "$1" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) > 8 and w[2].isdigit():
        t[(w[0], w[1], int(w[2]))].append(float(w[7]))
colls = sorted({k[1] for k in t}, key=["allreduce", "allgather", "reducescatter", "broadcast"].index)
sizes = sorted({k[2] for k in t})
for lab in sorted({k[0] for k in t} - {"nccl"}):
    print("\n%s against NCCL, us per call (ratio):\n" % lab)
    print("| bytes | " + " | ".join("%s %s / NCCL" % (c, lab) for c in colls) + " |")
    print("|---:|" + "---:|" * len(colls))
    for b in sizes:
        cells = []
        for c in colls:
            a, n = t.get((lab, c, b)), t.get(("nccl", c, b))
            if a and n:
                ma, mn = statistics.median(a), statistics.median(n)
                cells.append("%.1f / %.1f (%.2f)" % (ma, mn, ma / mn))
            else:
                cells.append("-")
        print("| %d | %s |" % (b, " | ".join(cells)))
PY
}

for phase in "$@"; do
  case $phase in
    breakdown | sweep) $phase ;;
    *) echo "unknown phase $phase" >&2 && exit 2 ;;
  esac
done
bench_finish gpu_small
