# shellcheck shell=bash
# Sourced by the bench scripts: MPS started and stopped, and runs that fail
# loudly. A run that could not start, timed out, exited non-zero or printed
# no rows is noted in $bench_out/failures (a file, so that runs inside
# pipelines and subshells count too); bench_finish then names each one and
# returns non-zero.
#   bench_init DIR                  where failures are noted (once, first)
#   bench_wait LABEL LOG... -- PID...  each PID's exit, then LOG's rows
#   bench_status LABEL RC [LOG]     one command's exit status (and rows)
#   bench_run LABEL LOG CMD...      CMD under timeout ($BENCH_LIMIT s, default
#                                   1800), its output in LOG, then bench_status
#   bench_rows LOG                  how many result rows LOG holds
#   bench_finish NAME               "NAME: PASSED", or FAILED and the list
#   mps_start DIR / mps_stop        an MPS daemon for this script's runs

bench_init() {
  bench_out=$1
  mkdir -p "$bench_out"
  : >"$bench_out/failures"
}

bench_fail() {
  echo "$*" >>"$bench_out/failures"
  echo "bench: FAILED: $*" >&2
}

# What an exit status says: 124/137 timed out (timeout(1)), 126/127 could not start.
bench_why() {
  case $1 in
    124 | 137) echo "timed out" ;;
    126 | 127) echo "could not start" ;;
    *) echo "exited with $1" ;;
  esac
}

# Rows a benchmark printed: lines whose first field is a size.
bench_rows() {
  awk '$1 ~ /^[0-9]+$/ {n++} END {print n + 0}' "$1" 2>/dev/null || echo 0
}

# The log's last line: what a program said when it gave up.
bench_last() {
  [ -s "$1" ] && tail -n 1 "$1" | cut -c 1-160 | sed 's/^/: /'
}

bench_status() {
  local label=$1 rc=$2 log=${3:-}
  if [ "$rc" -ne 0 ]; then
    bench_fail "$label $(bench_why "$rc")${log:+ (log $log$(bench_last "$log"))}"
  elif [ -n "$log" ] && [ "$(bench_rows "$log")" -eq 0 ]; then
    bench_fail "$label printed no rows (log $log)"
  fi
}

bench_run() {
  local label=$1 log=$2 rc=0
  shift 2
  timeout "${BENCH_LIMIT:-1800}" "$@" >"$log" 2>&1 || rc=$?
  bench_status "$label" "$rc" "$log"
  return 0
}

bench_wait() {
  local label=$1 logs=() rc i=0
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    logs+=("$1")
    shift
  done
  shift
  for pid in "$@"; do
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -eq 0 ] || bench_fail "$label rank $i $(bench_why "$rc") (log ${logs[$i]:-?}$(bench_last "${logs[$i]:-}"))"
    i=$((i + 1))
  done
  # Rank 0 prints the table.
  if [ ${#logs[@]} -gt 0 ] && [ "$(bench_rows "${logs[0]}")" -eq 0 ]; then
    bench_fail "$label printed no rows (log ${logs[0]})"
  fi
}

bench_finish() {
  if [ -s "$bench_out/failures" ]; then
    echo "$1: FAILED, $(wc -l <"$bench_out/failures") run(s):"
    sed 's/^/  /' "$bench_out/failures"
    return 1
  fi
  echo "$1: PASSED"
}

mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=$1/mps CUDA_MPS_LOG_DIRECTORY=$1/mps
  mkdir -p "$1/mps"
  nvidia-cuda-mps-control -d >/dev/null || bench_fail "could not start MPS (nvidia-cuda-mps-control -d)"
}

mps_stop() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
