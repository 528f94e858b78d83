#!/bin/sh
# tuttirun against torchrun itself (torch.distributed.run of the Python that
# has torch; Debian's python3-torch by default): the same worker under both
# launchers must see the same environment, compute the same collectives
# through init_process_group("env://"), and be restarted the same way.
# usage: test_torchrun.sh TUTTIRUN CASE   (CASE: env | env_nodes | allreduce | restart)
# Exits 77 (skipped) when no Python with torch can be had.
set -u
RUN=$1
CASE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
WORKER=$HERE/torch_worker.py
PY=${TORCH_PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d)
FAILED=0
trap 'rm -rf "$TMP"' EXIT

fail() {
  echo "FAIL [$CASE]: $*"
  FAILED=1
}

have_torch() {
  "$PY" -c 'import torch.distributed.run' >/dev/null 2>&1
}
if ! have_torch; then
  # CI runs as root on Debian: fetch the reference torchrun once when missing.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$PY" = /usr/bin/python3 ]; then
    echo "installing Debian's python3-torch (the reference torchrun)"
    apt_get() {
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -qq "$@"
    }
    (apt_get install python3-torch || { apt_get update && apt_get install python3-torch; }) \
      >"$TMP/apt.log" 2>&1
  fi
  if ! have_torch; then
    echo "SKIPPED: $PY cannot import torch (apt-get install python3-torch, or set TORCH_PYTHON)"
    tail -n 3 "$TMP/apt.log" 2>/dev/null
    exit 77
  fi
fi
VERSION=$("$PY" -c 'import torch; print(torch.__version__)')
echo "torchrun: $PY -m torch.distributed.run, torch $VERSION"

# Both launchers start from this one environment; each names the same Python.
for v in $(env | sed -n 's/^\(PET_[A-Z_]*\|TORCHELASTIC_[A-Z_]*\|OMP_NUM_THREADS\|MASTER_[A-Z]*\|RANK\|LOCAL_RANK\|WORLD_SIZE\|NCCL_COMM_ID\|TUTTI_JOB_SECRET\|TORCH_NCCL_ASYNC_ERROR_HANDLING\|NCCL_ASYNC_ERROR_HANDLING\)=.*/\1/p'); do
  unset "$v"
done
export PYTHON_EXEC=$PY TMPDIR=/tmp
export BASE_ENV=$TMP/base.env
env -0 >"$BASE_ENV"
TORCHRUN="$PY -m torch.distributed.run"
# Debian's torch 1.13 on Python 3.11 cannot read --redirects/--tee "0" (its
# Std.from_str finds no member for 0); a map naming local rank 9 alone means
# the same "none" to every launcher, so both get it.
QUIET="--redirects 9:1 --tee 9:1"

# N free ports, on loopback.
free_ports() {
  "$PY" -c "
import socket
s = [socket.socket() for _ in range($1)]
for x in s: x.bind(('127.0.0.1', 0))
print(' '.join(str(x.getsockname()[1]) for x in s))"
}

# launch WHICH OUT ARGS...: one launcher, worker output to OUT. (The flags are
# spelt with underscores: torch 1.13 knows no --flag-name forms.)
launch() {
  which=$1 out=$2
  shift 2
  if [ "$which" = torchrun ]; then
    # shellcheck disable=SC2086
    timeout 120 $TORCHRUN $QUIET "$@" >>"$out" 2>>"$out.err"
  else
    # shellcheck disable=SC2086
    timeout 120 "$RUN" $QUIET --no_prefix "$@" >>"$out" 2>>"$out.err"
  fi
}

# same_env NAME FLAGS ARGS...: one launcher process each.
same_env() {
  name=$1 flags=$2
  shift 2
  echo "== $name: $*"
  for l in torchrun tuttirun; do
    launch $l "$TMP/$l.out" "$@" "$WORKER" env a1 --b=2 || fail "$name: $l exited $?"
  done
  check_env "$name" "$flags"
}

# same_env_nodes NAME FLAGS "ARGS A" "ARGS B": two launcher processes (nodes).
same_env_nodes() {
  name=$1 flags=$2 a=$3 b=$4
  echo "== $name: node A: $a / node B: $b"
  for l in torchrun tuttirun; do
    # shellcheck disable=SC2086
    launch $l "$TMP/$l.out" $a "$WORKER" env a1 --b=2 &
    pid=$!
    sleep 0.3 # A starts first, as the group rank order follows the pids
    # shellcheck disable=SC2086
    launch $l "$TMP/$l.out" $b "$WORKER" env a1 --b=2 || fail "$name: $l node B exited $?"
    wait $pid || fail "$name: $l node A exited $?"
  done
  check_env "$name" "$flags"
}

check_env() {
  "$PY" "$WORKER" compare "$VERSION" "$2" "$TMP/torchrun.out" "$TMP/tuttirun.out" ||
    {
      fail "$1: the environments differ"
      tail -n 20 "$TMP/torchrun.out.err" "$TMP/tuttirun.out.err"
    }
  rm -f "$TMP"/*.out "$TMP"/*.err
}

case_env() {
  set -- $(free_ports 3)
  same_env "static, one node" static --nproc_per_node 2 --master_port "$1"
  same_env "restarts, role" static --nnodes 1 --nproc_per_node 3 --max_restarts 1 \
    --master_port "$2" --role trainer
  same_env "standalone" port,c10d --standalone --nproc_per_node 2
  same_env "c10d, one node" port,c10d --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$3" \
    --rdzv_id job7 --nproc_per_node 2
}

case_env_nodes() {
  set -- $(free_ports 2)
  same_env_nodes "static, two nodes" static \
    "--nnodes 2 --node_rank 0 --nproc_per_node 2 --master_port $1 --rdzv_id s2" \
    "--nnodes 2 --node_rank 1 --nproc_per_node 2 --master_port $1 --rdzv_id s2"
  same_env_nodes "c10d, two nodes" port,c10d \
    "--nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$2 --rdzv_id j2" \
    "--nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$2 --rdzv_id j2"
}

# same_results NAME MODE ARGS...: the RESULT lines of both launchers, sorted.
same_results() {
  name=$1 mode=$2
  shift 2
  echo "== $name: $*"
  for l in torchrun tuttirun; do
    launch $l "$TMP/$l.out" "$@" "$WORKER" "$mode" || fail "$name: $l exited $?"
    grep '^RESULT' "$TMP/$l.out" | sort >"$TMP/$l.res"
  done
  if [ -s "$TMP/torchrun.res" ] && cmp -s "$TMP/torchrun.res" "$TMP/tuttirun.res"; then
    sed 's/^/  /' "$TMP/tuttirun.res"
  else
    fail "$name: different results"
    diff "$TMP/torchrun.res" "$TMP/tuttirun.res"
    tail -n 20 "$TMP/torchrun.out.err" "$TMP/tuttirun.out.err"
  fi
  rm -f "$TMP"/*.out "$TMP"/*.err "$TMP"/*.res
}

case_allreduce() {
  set -- $(free_ports 2)
  same_results "gloo, static" allreduce --nproc_per_node 3 --master_port "$1"
  same_results "gloo, c10d" allreduce --nproc_per_node 2 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$2"
}

# The results every launcher that restarts must print for failonce, 2 ranks.
RESTARTED='RESULT ok rank 0 restart 1 world 2
RESULT ok rank 1 restart 1 world 2
RESULT rank 1 fails on attempt 0
RESULT start rank 0 restart 1
RESULT start rank 1 restart 1'

case_restart() {
  set -- $(free_ports 2)
  # torch 2.11's torchrun ends a static-rendezvous job at the first failure
  # despite --max_restarts (torch 1.13's restarts it); tuttirun restarts under
  # every backend (docs/tuttirun.md): where the reference did not, tuttirun's
  # results are checked against what a restart prints.
  echo "== a rank fails once, static: --nproc_per_node 2 --max_restarts 1 --master_port $1"
  launch torchrun "$TMP/torchrun.out" --nproc_per_node 2 --max_restarts 1 --monitor_interval 0.5 \
    --master_port "$1" "$WORKER" failonce
  trc=$?
  launch tuttirun "$TMP/tuttirun.out" --nproc_per_node 2 --max_restarts 1 --monitor_interval 0.5 \
    --master_port "$1" "$WORKER" failonce || fail "static restart: tuttirun exited $?"
  grep '^RESULT' "$TMP/tuttirun.out" | sort >"$TMP/tuttirun.res"
  grep '^RESULT' "$TMP/torchrun.out" | sort >"$TMP/torchrun.res"
  if [ $trc != 0 ] && ! grep -q 'restart 1' "$TMP/torchrun.res"; then
    echo "  torchrun (torch $VERSION) did not restart under static rendezvous (exit $trc)"
    echo "$RESTARTED" >"$TMP/torchrun.res"
  fi
  if cmp -s "$TMP/torchrun.res" "$TMP/tuttirun.res"; then
    sed 's/^/  /' "$TMP/tuttirun.res"
  else
    fail "static restart: different results"
    diff "$TMP/torchrun.res" "$TMP/tuttirun.res"
  fi
  rm -f "$TMP"/*.out "$TMP"/*.err "$TMP"/*.res
  same_results "a rank fails once, standalone" failonce --standalone --nproc_per_node 2 --monitor_interval 0.5 \
    --max_restarts 1
  # tuttirun alone: two nodes meet through c10d, one fails, both restart.
  echo "== tuttirun, c10d, two nodes, node B's rank fails once"
  launch tuttirun "$TMP/a.out" --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$2" --max_restarts 1 "$WORKER" failonce &
  pid=$!
  sleep 0.3
  launch tuttirun "$TMP/b.out" --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$2" --max_restarts 1 "$WORKER" failonce || fail "node B failed"
  wait $pid || fail "node A failed"
  cat "$TMP/a.out" "$TMP/b.out" | grep '^RESULT ok' | sort >"$TMP/ok"
  printf 'RESULT ok rank 0 restart 1 world 2\nRESULT ok rank 1 restart 1 world 2\n' >"$TMP/want"
  cmp -s "$TMP/ok" "$TMP/want" || {
    fail "two-node restart"
    cat "$TMP/a.out" "$TMP/b.out" "$TMP"/*.err
  }
}

case "$CASE" in
  env | env_nodes | allreduce | restart) "case_$CASE" ;;
  *)
    echo "unknown case $CASE"
    exit 2
    ;;
esac
[ $FAILED -eq 0 ] && echo "PASS [$CASE]"
exit $FAILED
