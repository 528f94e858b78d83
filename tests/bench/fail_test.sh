#!/usr/bin/env bash
# Every bench script that can run without a GPU, on fake programs: one that
# is missing, one that exits 1, one that hangs past a short limit and one
# that prints no rows must each make the script exit non-zero and name the
# run; a fake that prints proper rows must let it pass (so a script that
# always fails does not satisfy this test). The GPU scripts run against a
# fake nvidia-smi and MPS control, and build nothing (BIN, PREBUILT=1).
#   fail_test.sh [SCRIPT...]   default: all of them
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
export BENCH_LIMIT=1 PERF_LIMIT=1 LIMIT=1 REPS=1 MIN=8 MAX=64 NCCL=$d/libnccl.so.2 NCCL_LIB=$d/libnccl.so.2

# The fake program: FAKE_MODE (passed on through the scripts and the
# launchers) says what it does.
mkdir -p "$d/path" "$d/good" "$d/bin/tools/tutti-perf" "$d/bin/tools/tuttirun"
cat >"$d/fake" <<EOF
#!/usr/bin/env bash
mode=\${FAKE_MODE:-good}
json=""
while [ \$# -gt 0 ]; do [ "\$1" = --json ] && json=\$2; shift; done
case \$mode in
  fail) echo "fake: failing as asked" >&2; exit 1 ;;
  hang) exec sleep 30 ;;
  norows) echo "# fake: nothing measured"; exit 0 ;;
esac
echo "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
for s in 8 16 32 64; do echo "   \$s 2 4 0 -1 1.5 0.01 0.02 0 1.5 0.01 0.02 0"; done
echo "# Avg bus bandwidth    : 0.02"
[ -z "\$json" ] || cat >"\$json" <<J
{"library": {"name": "fake"}, "nranks": 2, "collective": "allreduce", "records": [
 {"bytes": 8, "out_of_place": {"time_us": 1.5, "busbw_gbs": 0.02},
  "in_place": {"time_us": 1.5, "busbw_gbs": 0.02}}]}
J
exit 0
EOF
chmod +x "$d/fake"
printf '#!/bin/sh\necho "GPU 0: Fake GPU (UUID: GPU-0)"\n' >"$d/path/nvidia-smi"
printf '#!/bin/sh\n[ "$1" = -d ] || cat >/dev/null\n' >"$d/path/nvidia-cuda-mps-control"
# mpicc -o OUT ...: OUT becomes the fake; mpirun ... runs it.
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && cp "%s" "$2"; shift; done\n' "$d/fake" \
  >"$d/path/mpicc"
cp "$d/fake" "$d/path/mpirun"
chmod +x "$d/path/"*
export PATH=$d/path:$PATH
for p in test_gpu test_gpu_ordered test_gpu_comm_mem tutti-perf libtutti.so.0 libnccl.so.2 \
  libnccl-net-tutti.so tools/tutti-perf/tutti-perf tools/tuttirun/tuttirun; do
  cp "$d/fake" "$d/bin/$p"
done
cp "$d/fake" "$d/libnccl.so.2"

# check NAME WANT CMD...: run CMD for each mode; WANT is a pattern naming the
# failed run (the mode's words are added), "" when the mode is not tried.
# Each mode's output is in $d/NAME.MODE.log.
check() {
  local name=$1 want=$2 mode rc why
  shift 2
  # Test programs (not benchmarks) print no rows to check: NOROWS=0.
  local modes="missing fail hang norows good"
  [ "${NOROWS:-1}" = 1 ] || modes="missing fail hang good"
  for mode in $modes; do
    case $mode in
      missing) why="could not start" ;;
      fail) why="exited with 1.*failing as asked|failing as asked" ;;
      hang) why="timed out" ;;
      norows) why="printed no rows|has no rows|no rows" ;;
      good) why="" ;;
    esac
    local bin=$d/bin
    [ $mode = missing ] && bin=$d/nothing-here
    rc=0
    mkdir -p "$d/out.$name.$mode"
    FAKE_MODE=$mode BIN=$bin BUILD_DIR=$bin OUT=$d/out.$name.$mode OUT_DIR=$d/out.$name.$mode \
      timeout 60 "$@" >"$d/$name.$mode.log" 2>&1 || rc=$?
    if [ $mode = good ]; then
      if [ $rc -eq 0 ]; then echo "ok: $name passes on good runs"; else
        echo "FAILED: $name exited $rc on good runs:"
        tail -n 15 "$d/$name.$mode.log"
        fails=$((fails + 1))
      fi
    elif [ $rc -eq 0 ]; then
      echo "FAILED: $name exited 0 with a program that $mode:"
      tail -n 15 "$d/$name.$mode.log"
      fails=$((fails + 1))
    elif [ $rc -eq 124 ]; then
      echo "FAILED: $name itself hung with a program that $mode"
      fails=$((fails + 1))
    elif ! grep -Eq "($want).*($why)|FAILED: .*($want)" "$d/$name.$mode.log"; then
      echo "FAILED: $name exited $rc with a program that $mode, but no line names the run (/$want/, /$why/):"
      tail -n 15 "$d/$name.$mode.log"
      fails=$((fails + 1))
    else
      echo "ok: $name ($mode): $(grep -Em1 "($want).*($why)|FAILED: .*($want)" "$d/$name.$mode.log" | sed 's/^ *//')"
    fi
  done
}

only=("$@")
# run NAME WANT CMD...: check, if NAME was asked for, in the background
# (the fakes mostly sleep: the scripts run side by side).
run() {
  if [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" $1 "* ]]; then
    check "$@" >"$d/result.$1" 2>&1 &
  fi
}

run gpu_streams.putsignal "sendrecv \(sendrecv\) rank 0|sendrecv \(sendrecv\) printed" \
  bash bench/gpu_streams.sh putsignal
NOROWS=0 MODES=streams run gpu_streams.suite "suite streams" bash bench/gpu_streams.sh suite
COLLS=allreduce run gpu_small "tutti allreduce" bash bench/gpu_small.sh sweep
SETTINGS=default COLLS=allreduce ROUNDS=1 run comm_mem "mem tutti default|perf allreduce setting 0" \
  bash bench/comm_mem.sh mem perf
NOROWS=0 run gpu_net_session "ordered net|no folder BIN" bash bench/gpu_net_session.sh ordered
PREBUILT=1 MODES=g NGPU=1 run run_gpu "tutti_allreduce_g|no build folder" bash bench/run_gpu.sh allreduce
SETTINGS=default run sweep_gpu "default" bash bench/sweep_gpu.sh 8 64
PREBUILT=1 RANKS=2 COLLS=allreduce run run_det "allreduce_default_np2 small round 1" bash bench/run_det.sh
PREBUILT=1 run run_small "tutti 2 ranks round 1" bash bench/run_small.sh
run ras_query_cost "run without queries" \
  bash -c 'exec python3 bench/ras_query_cost.py "$BUILD_DIR" 8 10 1 4'
wait
for f in "$d"/result.*; do
  cat "$f"
  fails=$((fails + $(grep -c "^FAILED" "$f" || true)))
done
# The table makers alone: a run's file without rows is named.
mkdir -p "$d/tables"
echo "# nothing" >"$d/tables/tutti_np2_r1.txt"
"$d/fake" >"$d/tables/mpi_np2_r1.txt"
if python3 bench/small_table.py "$d/tables" >"$d/small_table.log" 2>&1 ||
  ! grep -q "tutti_np2_r1.txt has no rows" "$d/small_table.log"; then
  echo "FAILED: small_table.py passed a run without rows"
  fails=$((fails + 1))
else
  echo "ok: small_table.py: $(tail -n 1 "$d/small_table.log")"
fi
if python3 bench/net_breakdown.py "$d/no-trace" >"$d/breakdown.log" 2>&1; then
  echo "FAILED: net_breakdown.py passed without traces"
  fails=$((fails + 1))
else
  echo "ok: net_breakdown.py: $(tail -n 1 "$d/breakdown.log")"
fi
cd "$root"
[ $fails -eq 0 ] && echo "bench scripts: every failure named" || echo "bench scripts: $fails FAILED"
exit $((fails > 0))
