#!/bin/sh
# End-to-end checks of tuttirun with test_child; one ctest test per case.
# usage: test_tuttirun.sh TUTTIRUN TEST_CHILD CASE   (CASE: see the case list at the bottom)
# (test_torchrun.sh holds the comparisons with torchrun itself.)
set -u
RUN=$1
CHILD=$2
CASE=$3
TMP=$(mktemp -d)
# Every process of a case carries this in its arguments, so that pgrep finds
# whatever a broken tuttirun would leave behind.
MARK="tuttirun-test-mark-$$-$CASE"
FAILED=0

fail() {
  echo "FAIL [$CASE]: $*"
  FAILED=1
}

leftovers() {
  pgrep -f -- "$MARK" 2>/dev/null | grep -v "^$$\$" || true
}

cleanup() {
  for p in $(leftovers); do
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

now_ms() {
  echo $(($(date +%s%N) / 1000000))
}

# expect_rc WANT GOT WHAT
expect_rc() {
  [ "$2" -eq "$1" ] || fail "$3: exit status $2, want $1"
}

expect_grep() { # PATTERN FILE WHAT
  grep -Eq -- "$1" "$2" || {
    fail "$3: no line matching '$1' in:"
    sed 's/^/    /' "$2" | head -20
  }
}

expect_no_leftovers() {
  sleep 0.2
  left=$(leftovers)
  [ -z "$left" ] || {
    fail "$1: processes left behind: $left"
    ps -o pid,ppid,pgid,stat,args -p "$(echo $left | tr ' ' ',')"
  }
}

# run_timed WANT_RC MAX_MS WHAT ARGS...: runs tuttirun in the foreground.
run_timed() {
  want=$1 max=$2 what=$3
  shift 3
  t0=$(now_ms)
  "$RUN" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  ms=$(($(now_ms) - t0))
  expect_rc "$want" "$rc" "$what"
  [ "$ms" -le "$max" ] || fail "$what took $ms ms (limit $max)"
}

case_env() {
  run_timed 0 10000 "env -n 3" -n 3 "$CHILD" env
  port=$(sed -n 's/^\[rank0\]: env .* MASTER_PORT=\([0-9]*\) .*/\1/p' "$TMP/out")
  secret=$(sed -n 's/^\[rank0\]: env .* TUTTI_JOB_SECRET=\([0-9a-f]*\)$/\1/p' "$TMP/out")
  [ -n "$port" ] || fail "no MASTER_PORT in rank 0's line"
  [ ${#secret} -eq 32 ] || fail "the secret '$secret' is not 32 hex digits"
  for r in 0 1 2; do
    expect_grep "^\[rank$r\]: env RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NCCL_COMM_ID=127.0.0.1:$((port + 1)) TUTTI_JOB_SECRET=$secret\$" "$TMP/out" "rank $r's variables"
    expect_grep "^\[rank$r\]: to stderr from $r\$" "$TMP/err" "rank $r's stderr"
  done
  [ "$(wc -l <"$TMP/out")" -eq 3 ] || fail "expected 3 stdout lines"
  # Two jobs get different secrets.
  "$RUN" -n 1 "$CHILD" env >"$TMP/out2" 2>/dev/null
  grep -q "TUTTI_JOB_SECRET=$secret" "$TMP/out2" && fail "two jobs share a secret"

  # Node 1 of 2, torchrun's spellings, explicit address and secret.
  run_timed 0 10000 "env node 1 of 2" --nnodes=2 --node-rank 1 --nproc_per_node 2 \
    --master_addr 10.0.0.5 --master-port=1234 --job_secret s3cret -- "$CHILD" env
  for l in 0 1; do
    expect_grep "^\[rank$((2 + l))\]: env RANK=$((2 + l)) LOCAL_RANK=$l WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 MASTER_ADDR=10.0.0.5 MASTER_PORT=1234 NCCL_COMM_ID=10.0.0.5:1235 TUTTI_JOB_SECRET=s3cret\$" "$TMP/out" "node 1 local rank $l"
  done
  # Several nodes and no secret: derived, with a warning; TUTTI_JOB_SECRET wins.
  run_timed 0 10000 "derived secret" --nnodes 2 --nproc_per_node 1 "$CHILD" env
  expect_grep "MASTER_PORT=29500 NCCL_COMM_ID=127.0.0.1:29501 TUTTI_JOB_SECRET=tuttirun:127.0.0.1:29501\$" "$TMP/out" "default port, derived secret"
  expect_grep "^tuttirun: warning: the job secret is derived" "$TMP/err" "guessable-secret warning"
  TUTTI_JOB_SECRET=fromenv "$RUN" --nnodes 2 "$CHILD" env >"$TMP/out" 2>"$TMP/err"
  expect_grep "TUTTI_JOB_SECRET=fromenv\$" "$TMP/out" "TUTTI_JOB_SECRET from the environment"
  grep -q warning "$TMP/err" && fail "warned although TUTTI_JOB_SECRET was set"
  "$RUN" --nnodes 2 --rdzv_id job42 "$CHILD" env >"$TMP/out" 2>&1
  expect_grep "TUTTI_JOB_SECRET=tuttirun-rdzv:job42\$" "$TMP/out" "secret from --rdzv_id"
  # IPv6 master address: brackets in NCCL_COMM_ID only.
  "$RUN" --nnodes 2 --master_addr "[fd00::5]" --master_port 99 --job_secret x "$CHILD" env \
    >"$TMP/out" 2>&1
  expect_grep "MASTER_ADDR=fd00::5 MASTER_PORT=99 NCCL_COMM_ID=\[fd00::5\]:100 " "$TMP/out" "IPv6"
}

case_prefix() {
  n=20000
  run_timed 0 30000 "spam" -n 4 "$CHILD" spam $n
  # Every line whole, in order per rank, nothing torn or mixed: the length
  # and the first and last letters are functions of (rank, i).
  awk -v n=$n -v abc=abcdefghijklmnopqrstuvwxyz '
    function letter(k) { return substr(abc, k % 26 + 1, 1) }
    /^\[rank[0-3]\]: tail without newline [0-3]$/ { tails++; next }
    {
      r = $3; i = $4; len = $5; p = $6
      if (NF != 6 || $1 != "[rank" r "]:" || $2 != "spam" || i != next_i[r] ||
          length(p) != len || len != 1 + (i * 37 + r * 11) % 280 ||
          substr(p, 1, 1) != letter(r + i) || substr(p, len, 1) != letter(r + i + len - 1)) {
        if (bad++ < 5) print "bad line " NR ": " substr($0, 1, 120)
        next
      }
      next_i[r]++
    }
    END {
      for (r = 0; r < 4; r++) if (next_i[r] != n) { print "rank " r ": " next_i[r] " lines"; bad++ }
      if (tails != 4) { print tails " tails without newline"; bad++ }
      exit bad != 0
    }' "$TMP/out" || fail "stdout lines torn, mixed or missing"
  [ "$(grep -c '^\[rank[0-3]\]: spam ' "$TMP/err")" -eq $((4 * n / 10)) ] ||
    fail "stderr: $(wc -l <"$TMP/err") lines, want $((4 * n / 10))"
  # --no_prefix passes lines through untouched.
  run_timed 0 10000 "no prefix" --no_prefix -n 2 "$CHILD" env
  [ "$(grep -c '^env RANK=[01] ' "$TMP/out")" -eq 2 ] || fail "--no_prefix output:"
}

case_fail() {
  run_timed 3 4000 "rank 2 exits 3" -n 4 "$CHILD" fail 2 3 "$MARK"
  expect_grep "^tuttirun: rank 2 \(pid [0-9]+\) exited with status 3" "$TMP/err" "failure report"
  expect_grep "^\[rank2\]: rank 2 failing on purpose" "$TMP/err" "the rank's last words"
  expect_no_leftovers "after a failed rank"
}

case_signal() {
  run_timed 137 4000 "rank 1 SIGKILLs itself" -n 3 "$CHILD" signal 1 9 "$MARK"
  expect_grep "^tuttirun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\)" "$TMP/err" \
    "signal report"
  expect_no_leftovers "after SIGKILL"
  run_timed 143 4000 "rank 0 SIGTERMs itself" -n 2 "$CHILD" signal 0 15 "$MARK"
  expect_grep "was killed by signal 15 \(Terminated\)" "$TMP/err" "SIGTERM report"
  expect_no_leftovers "after SIGTERM"
}

# stop_case SIGNAL WANT_RC GRACE MODE: starts a job in the background, signals tuttirun.
stop_case() {
  sig=$1 want=$2 grace=$3 mode=$4
  "$RUN" -n 3 --grace_period "$grace" "$CHILD" $mode "$MARK" >"$TMP/out" 2>"$TMP/err" &
  pid=$!
  # Wait until all are up: tuttirun + 3 ranks (+ 2 grandchildren each for spawn).
  need=4
  [ "$mode" = spawn ] && need=10
  for _ in $(seq 100); do
    [ "$(leftovers | wc -l)" -ge $need ] && break
    sleep 0.05
  done
  [ "$mode" = ignoreterm ] && sleep 0.3 # until the ranks ignore SIGTERM
  t0=$(now_ms)
  kill -"$sig" $pid
  wait $pid
  rc=$?
  ms=$(($(now_ms) - t0))
  expect_rc "$want" "$rc" "SIG$sig to tuttirun ($mode)"
  expect_no_leftovers "SIG$sig ($mode)"
  echo "  SIG$sig, $mode: exit $rc after $ms ms"
}

case_sigint() {
  stop_case INT 130 5 spawn
  [ "$ms" -le 3000 ] || fail "SIGINT took $ms ms"
  expect_grep "^tuttirun: got SIGINT" "$TMP/err" "SIGINT report"
  stop_case TERM 143 5 sleep
  [ "$ms" -le 3000 ] || fail "SIGTERM took $ms ms"
}

case_escalate() {
  stop_case TERM 143 1 ignoreterm
  [ "$ms" -ge 900 ] && [ "$ms" -le 4000 ] || fail "escalation after $ms ms, want about 1000"
  expect_grep "sending SIGKILL" "$TMP/err" "SIGKILL report"
}

case_leftovers() {
  # Ranks succeed but leave processes behind (one in their group, one in a
  # session of its own): tuttirun ends them and still exits 0.
  run_timed 0 4000 "leftovers" -n 2 "$CHILD" spawn exit "$MARK"
  expect_no_leftovers "after successful ranks"
}

case_logdir() {
  run_timed 0 10000 "log dir" -n 2 --log-dir "$TMP/logs/sub" "$CHILD" env
  for r in 0 1; do
    for s in stdout stderr; do
      [ -f "$TMP/logs/sub/rank_$r.$s" ] || fail "no rank_$r.$s"
    done
    expect_grep "^env RANK=$r " "$TMP/logs/sub/rank_$r.stdout" "rank $r's log (no prefix)"
    expect_grep "^to stderr from $r\$" "$TMP/logs/sub/rank_$r.stderr" "rank $r's stderr log"
  done
  expect_grep "^\[rank1\]: env RANK=1" "$TMP/out" "the terminal still gets the output"
}

case_badflags() {
  for args in "--bogus x" "" "-n" "-n 0 x" "-n abc x" "--nnodes 2 --node_rank 2 x" \
    "-n 2 --nnodes 2 x" "--nnodes 1:4 x" "--master_port 70000 x" "--no_prefix=1 x" \
    "--grace_period -1 x" "-x prog"; do
    # shellcheck disable=SC2086
    "$RUN" $args >"$TMP/out" 2>"$TMP/err"
    expect_rc 2 $? "tuttirun $args"
    expect_grep "^usage: tuttirun" "$TMP/err" "usage for '$args'"
  done
  "$RUN" --help >"$TMP/out" 2>&1
  expect_rc 0 $? "--help"
  expect_grep "^usage: tuttirun" "$TMP/out" "--help text"
  run_timed 127 4000 "missing program" -n 2 "$TMP/no-such-program"
  expect_grep "^tuttirun: cannot start rank 0: .*No such file" "$TMP/err" "exec failure report"
  # stdin is /dev/null: a rank reading it does not hang or steal the input.
  echo data | "$RUN" -n 2 "$CHILD" stdin >"$TMP/out" 2>&1
  [ "$(grep -c 'stdin gave EOF' "$TMP/out")" -eq 2 ] || fail "ranks' stdin is not /dev/null"
}

case_allreduce() {
  for n in 1 2 4; do
    run_timed 0 30000 "allreduce -n $n" -n $n "$CHILD" allreduce
    [ "$(grep -c "^\[rank[0-9]\]: allreduce ok rank [0-9] of $n\$" "$TMP/out")" -eq $n ] || {
      fail "allreduce -n $n:"
      cat "$TMP/out" "$TMP/err" | head -20
    }
  done
}

case_torchenv() {
  # torchrun's other variables; the error file's folder goes away afterwards.
  unset OMP_NUM_THREADS TORCH_NCCL_ASYNC_ERROR_HANDLING
  run_timed 0 10000 "torchenv" --nproc-per-node=2 --role trainer --rdzv_id r9 \
    --max_restarts 2 "$CHILD" torchenv
  for r in 0 1; do
    expect_grep "^\[rank$r\]: torchenv RANK=$r GROUP_WORLD_SIZE=1 ROLE_RANK=$r ROLE_NAME=trainer ROLE_WORLD_SIZE=2 TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=2 TORCHELASTIC_RUN_ID=r9 TORCHELASTIC_USE_AGENT_STORE=True TORCH_NCCL_ASYNC_ERROR_HANDLING=1 OMP_NUM_THREADS=1 TORCHELASTIC_ERROR_FILE=/tmp/torchelastic_[a-z0-9_]{8}/r9_[a-z0-9_]{8}/attempt_0/$r/error.json\$" "$TMP/out" "rank $r's torchrun variables"
  done
  dir=$(sed -n 's|.*ERROR_FILE=\(/tmp/torchelastic_[a-z0-9_]*\)/.*|\1|p' "$TMP/out" | head -1)
  [ -n "$dir" ] && [ ! -e "$dir" ] || fail "the temporary folder $dir was left behind"
  expect_grep "^tuttirun: setting OMP_NUM_THREADS=1" "$TMP/err" "OMP_NUM_THREADS note"
  OMP_NUM_THREADS=7 TORCH_NCCL_ASYNC_ERROR_HANDLING=0 "$RUN" -n 2 "$CHILD" torchenv >"$TMP/out" 2>&1
  expect_grep "TORCH_NCCL_ASYNC_ERROR_HANDLING=0 OMP_NUM_THREADS=7 " "$TMP/out" "inherited values"
  # PET_* variables stand in for flags; nproc cpu/auto/gpu as torchrun counts them.
  PET_NPROC_PER_NODE=3 "$RUN" "$CHILD" torchenv >"$TMP/out" 2>&1
  [ "$(grep -c torchenv "$TMP/out")" -eq 3 ] || fail "PET_NPROC_PER_NODE=3"
  cpus=$(getconf _NPROCESSORS_ONLN)
  "$RUN" --nproc_per_node cpu "$CHILD" torchenv >"$TMP/out" 2>&1
  [ "$(grep -c torchenv "$TMP/out")" -eq "$cpus" ] || fail "--nproc_per_node cpu: not $cpus ranks"
  if ! ls /proc/driver/nvidia/gpus/* /dev/nvidia[0-9]* >/dev/null 2>&1; then
    "$RUN" --nproc_per_node auto "$CHILD" torchenv >"$TMP/out" 2>&1
    [ "$(grep -c torchenv "$TMP/out")" -eq "$cpus" ] || fail "--nproc_per_node auto without GPUs"
    "$RUN" --nproc_per_node gpu "$CHILD" torchenv >"$TMP/out" 2>&1
    expect_rc 2 $? "--nproc_per_node gpu without GPUs"
    expect_grep "no GPU is visible" "$TMP/out" "gpu without GPUs"
  fi
}

case_restart() {
  run_timed 0 10000 "restart once" -n 3 --max_restarts 1 "$CHILD" failfirst 1 5
  for r in 0 1 2; do
    expect_grep "^\[rank$r\]: rank $r attempt 1\$" "$TMP/out" "rank $r restarted"
  done
  expect_grep "^tuttirun: restarting the workers \(restart 1 of 1\)" "$TMP/err" "restart note"
  run_timed 5 10000 "no restart" -n 2 "$CHILD" failfirst 1 5
  run_timed 3 10000 "restarts spent" -n 2 --max-restarts=2 "$CHILD" fail 1 3 "$MARK"
  [ "$(grep -c 'exited with status 3' "$TMP/err")" -eq 3 ] || fail "3 attempts, 3 failures"
  expect_grep "no restarts left" "$TMP/err" "restarts spent note"
  expect_no_leftovers "after the restarts"
  # The same through the c10d rendezvous (one node serving the store).
  run_timed 0 10000 "restart, c10d" --standalone -n 2 --max_restarts 1 "$CHILD" failfirst 0 4
  expect_grep "^\[rank1\]: rank 1 attempt 1\$" "$TMP/out" "c10d restart count"
}

case_python() {
  command -v python3 >/dev/null 2>&1 || {
    echo "no python3: skipping"
    return
  }
  printf 'import os, sys\nprint("py", os.environ["RANK"], sys.argv[1:])\n' >"$TMP/w.py"
  run_timed 0 10000 "script.py" -n 2 "$TMP/w.py" x --y
  expect_grep "^\[rank1\]: py 1 \['x', '--y'\]\$" "$TMP/out" "python runs the .py target"
  mkdir -p "$TMP/m"
  printf 'import os\nprint("module", os.environ["LOCAL_RANK"])\n' >"$TMP/m/hello_tr.py"
  PYTHONPATH=$TMP/m "$RUN" -n 1 -m hello_tr >"$TMP/out" 2>&1
  expect_grep "^\[rank0\]: module 0\$" "$TMP/out" "-m module"
  printf '#!/bin/sh\necho "direct $RANK"\n' >"$TMP/d.py"
  chmod +x "$TMP/d.py"
  "$RUN" -n 1 --no-python "$TMP/d.py" >"$TMP/out" 2>&1
  expect_grep "^\[rank0\]: direct 0\$" "$TMP/out" "--no_python runs the target itself"
  "$RUN" -n 1 --no_python -m x >"$TMP/out" 2>&1
  expect_rc 2 $? "--no_python with -m"
}

case_streams() {
  # --tee: files in torchrun's layout and the terminal; --redirects: files only;
  # --local_ranks_filter: only those local ranks on the terminal.
  run_timed 0 10000 "tee" -n 2 --log_dir "$TMP/l" --tee 3 --rdzv_id t1 "$CHILD" env
  for r in 0 1; do
    f=$(ls "$TMP"/l/t1_*/attempt_0/$r/stdout.log 2>/dev/null)
    [ -n "$f" ] && grep -q "^env RANK=$r " "$f" || fail "no tee'd stdout.log for local rank $r"
    expect_grep "^\[rank$r\]: env RANK=$r " "$TMP/out" "tee still prints rank $r"
  done
  run_timed 0 10000 "redirects" -n 2 --log_dir "$TMP/r" -r 0:1,1:2 "$CHILD" env
  [ "$(grep -c '^\[rank0\]' "$TMP/out")" -eq 0 ] || fail "rank 0's stdout reached the terminal"
  expect_grep "^\[rank1\]: env RANK=1 " "$TMP/out" "rank 1's stdout is not redirected"
  expect_grep "^env RANK=0 " "$(ls "$TMP"/r/none_*/attempt_0/0/stdout.log)" "redirected stdout"
  run_timed 0 10000 "filter" -n 3 --local-ranks-filter 0,2 "$CHILD" env
  [ "$(grep -c '^\[rank[02]\]: env' "$TMP/out")" -eq 2 ] && ! grep -q '^\[rank1\]' "$TMP/out" ||
    fail "--local_ranks_filter 0,2"
}

case_c10d() {
  # Two tuttirun processes meet through the c10d rendezvous (one serves the
  # store), agree on ranks, and tutti's own bootstrap (NCCL_COMM_ID, secret)
  # joins their ranks in one all-reduce.
  port=$((20000 + $$ % 12000)) # below the ephemeral range
  "$RUN" --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" \
    --rdzv_id c1 "$CHILD" allreduce 1000 >"$TMP/a" 2>&1 &
  pid=$!
  "$RUN" --nnodes 2 --nproc_per_node 1 --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$port" \
    --rdzv-id=c1 "$CHILD" allreduce 1000 >"$TMP/b" 2>&1
  expect_rc 0 $? "c10d node B"
  wait $pid
  expect_rc 0 $? "c10d node A"
  [ "$(cat "$TMP/a" "$TMP/b" | grep -c 'allreduce ok rank [0-2] of 3$')" -eq 3 ] || {
    fail "c10d all-reduce over two launchers:"
    cat "$TMP/a" "$TMP/b" | head -20
  }
  # A node alone: the rendezvous gives up after join_timeout, or on SIGINT.
  run_timed 1 5000 "join timeout" --nnodes 2 --rdzv_backend c10d --rdzv_endpoint \
    "127.0.0.1:$port" --rdzv_conf join_timeout=1 "$CHILD" env "$MARK"
  expect_grep "1 of 2 nodes came within 1 s" "$TMP/err" "join timeout report"
  "$RUN" --nnodes 2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" "$CHILD" env "$MARK" \
    >"$TMP/out" 2>&1 &
  pid=$!
  sleep 0.5
  kill -INT $pid
  wait $pid
  expect_rc 130 $? "SIGINT during the rendezvous"
}

case_busyports() {
  # A host whose connect() pool (the even ephemeral ports) is all taken, as
  # after thousands of short connections in TIME_WAIT: the store and tutti's
  # root still find a free pair P, P+1, below the ephemeral range. Run in a
  # network namespace of its own (the port range is per namespace).
  if [ -z "${TUTTIRUN_TEST_NETNS:-}" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1 ||
      ! command -v python3 >/dev/null 2>&1 || ! unshare -n true 2>/dev/null; then
      echo "SKIPPED: needs root, unshare -n and python3 (a network namespace of its own)"
      exit 77
    fi
    TUTTIRUN_TEST_NETNS=1 exec unshare -n sh "$0" "$RUN" "$CHILD" busyports
  fi
  ip link set lo up || fail "lo up"
  echo "40001 40100" >/proc/sys/net/ipv4/ip_local_port_range || fail "port range"
  python3 -c '
import socket, sys, time
held = []
for p in range(40002, 40101, 2):
    s = socket.socket(socket.AF_INET6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", p)); s.listen(); held.append(s)
print("held", flush=True)
time.sleep(120)' "$MARK" >"$TMP/holder" 2>&1 &
  holder=$!
  for _ in $(seq 50); do
    grep -q held "$TMP/holder" && break
    sleep 0.1
  done
  run_timed 0 30000 "allreduce with every even ephemeral port taken" -n 2 "$CHILD" allreduce
  [ "$(grep -c "allreduce ok rank [0-1] of 2\$" "$TMP/out")" -eq 2 ] || {
    fail "allreduce with every even ephemeral port taken:"
    cat "$TMP/holder" "$TMP/out" "$TMP/err" | head -20
  }
  kill $holder 2>/dev/null
}

case "$CASE" in
  env | prefix | fail | signal | sigint | escalate | leftovers | logdir | badflags | allreduce | \
    torchenv | restart | python | streams | c10d | busyports)
    "case_$CASE"
    ;;
  *)
    echo "unknown case $CASE"
    exit 2
    ;;
esac
[ $FAILED -eq 0 ] && echo "PASS [$CASE]"
exit $FAILED
