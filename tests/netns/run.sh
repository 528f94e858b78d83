#!/usr/bin/env bash
# The multi-host scenarios of the tcp transport, hosts being network
# namespaces (hosts.sh), one tuttirun per host; one ctest test each.
#   run.sh TUTTIRUN JOB RAWBW job HOSTS RANKS [IFNAME]  the collective matrix
#   run.sh TUTTIRUN JOB RAWBW rma HOSTS RANKS           one-sided all-to-all and relay
#   run.sh TUTTIRUN JOB RAWBW cut kill|link             a host is lost mid-loop
#   run.sh TUTTIRUN JOB RAWBW stall                     a host's ranks stop mid-loop
#   run.sh TUTTIRUN JOB RAWBW trials [N]                N random faults in random collectives
#   run.sh TUTTIRUN JOB RAWBW bw                        allreduce vs raw TCP rate
#   run.sh TUTTIRUN JOB RAWBW grow GROW                 2 hosts grow to 3, shrink back to 2
#   run.sh TUTTIRUN JOB RAWBW two run|kill TWO          two threads, two communicators
# JOB is test_netns_job, RAWBW tcp_raw_bw. Exits 77 (skip) without namespaces.
# With NET_PLUGIN=path (a network plugin, e.g. libnccl-net-tutti.so) every
# rank loads it (NCCL_NET_PLUGIN) and hosts talk through it instead of the
# TCP transport.
set -u
if [ -n "${NET_PLUGIN:-}" ]; then
  export NCCL_NET_PLUGIN=$NET_PLUGIN
  VIA="NET/tutti"
else
  unset NCCL_NET_PLUGIN
  VIA="NET/Socket"
fi
TUTTIRUN=$1 JOB=$2 RAWBW=$3 WHAT=$4
shift 4
HOSTS="bash $(cd "$(dirname "$0")" && pwd)/hosts.sh"
# An id no other run uses (hosts.sh names everything after it).
new_id() {
  for _ in 1 2 3 4 5 6 7 8; do
    export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
    ip netns list 2>/dev/null | grep -q "^tutti-h$(printf %04x $TUTTI_NETNS_ID)-" || break
  done
}
new_id
export TUTTI_JOB_SECRET="netns-test-$TUTTI_NETNS_ID-$RANDOM"
TMP=$(mktemp -d)
FAILED=0
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do
    kill -9 "$p" 2>/dev/null
  done
  $HOSTS down
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  FAILED=1
}

up() {
  $HOSTS up "$1"
  local rc=$?
  [ $rc = 77 ] && exit 77
  [ $rc = 0 ] || { echo "FAIL: could not create $1 hosts"; exit 1; }
}

# start I NHOSTS NPROC ARGS...: tuttirun for host I in the background; output in $TMP/hostI.log.
start() {
  local i=$1 nh=$2 np=$3
  shift 3
  # In a subshell that outlives what it runs, so that killing a host
  # does not make bash report the job as killed.
  ($HOSTS run "$i" timeout -s TERM 150 "$TUTTIRUN" --nnodes "$nh" --node_rank "$i" \
    ${TR_GRACE:+--grace_period "$TR_GRACE"} --nproc_per_node "$np" --master_addr "$($HOSTS addr 0)" --master_port 29500 \
    "$JOB" "$@" >"$TMP/host$i.log" 2>&1; exit $?) &
  PIDS[$i]=$!
}

# Waits for host I's tuttirun; its exit status.
finish() {
  wait "${PIDS[$1]}"
  local rc=$?
  unset "PIDS[$1]"
  return $rc
}

show() {
  for f in "$TMP"/host*.log; do
    echo "--- $(basename "$f" .log)"
    grep -v "NCCL INFO" "$f" | tail -${1:-15}
  done
}

job() {
  local nh=$1 np=$2 ifname=${3:-}
  up "$nh"
  if [ -n "$ifname" ]; then export NCCL_SOCKET_IFNAME=$ifname; else unset NCCL_SOCKET_IFNAME; fi
  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET TUTTI_TIMEOUT=30
  local t0=$SECONDS
  for ((i = 0; i < nh; i++)); do start $i "$nh" "$np" "${JOB_MODE:-matrix}"; done
  for ((i = 0; i < nh; i++)); do finish $i || fail "host $i: tuttirun exited with status $?"; done
  local n=$((nh * np)) all
  all=$(cat "$TMP"/host*.log)
  for ((r = 0; r < n; r++)); do
    grep -Eq "rank $r/$n: [1-9][0-9]* passed, 0 failed" <<<"$all" || fail "rank $r did not pass (or checked nothing)"
  done
  # Across hosts the ring goes over TCP (or the plugin) on eth0; within a host over shared memory.
  grep -q "via $VIA/eth0" <<<"$all" || fail "no ring pair runs over $VIA/eth0"
  [ "$np" = 1 ] || grep -q "via SHM" <<<"$all" || fail "no ring pair within a host uses SHM"
  grep -E "using network interface" <<<"$all" | grep -Ev "interface eth0 " &&
    fail "an interface other than eth0 was chosen (the decoys are docker0 and veth*)"
  echo "${JOB_MODE:-job} ${nh}x$np${ifname:+ NCCL_SOCKET_IFNAME=$ifname}: $(grep -Eo "[0-9]+ passed" <<<"$all" |
    awk '{s += $1} END {print s}') checks passed on $n ranks in $((SECONDS - t0)) s"
  [ $FAILED = 0 ] || show
}

# Starts NH hosts x NP ranks on `test_netns_job ARGS...` (loop or trial) and waits until every rank
# loops; returns 1 (after saying why) when they do not.
start_loops() {
  local nh=$1 np=$2
  shift 2
  for ((i = 0; i < nh; i++)); do start $i "$nh" "$np" "$@"; done
  local n=$((nh * np))
  for ((t = 0; t < 300; t++)); do
    [ "$(cat "$TMP"/host*.log 2>/dev/null | grep -c "looping")" = $n ] && return 0
    sleep 0.1
  done
  fail "the job did not start"
  show
  return 1
}

# report R T0: rank R's fault line ("LOST at <epoch> ..."), or fails and
# returns 1; sets DT to the seconds between T0 and the error.
report() {
  local r=$1 t0=$2
  LINE=$(cat "$TMP"/host*.log | grep -E "^\[rank$r\]: rank $r (LOST|NOFAULT)" | head -1)
  [ -n "$LINE" ] || { fail "rank $r reported nothing"; return 1; }
  local at
  at=$(sed -nE 's/.* LOST at ([0-9.]+) .*/\1/p' <<<"$LINE")
  [ -n "$at" ] || { fail "rank $r: $LINE"; return 1; }
  DT=$(awk -v a="$at" -v b="$t0" 'BEGIN {printf "%.2f", a - b}')
}

# A host is lost while 3 hosts x 2 ranks loop over allreduces: `kill` kills
# its processes, `link` takes its link down. With the default TUTTI_TIMEOUT
# (300 s), every rank that remains must report an error naming a rank it
# lost within 5 s: the TCP heartbeat (TUTTI_HEARTBEAT_S, 1 s) bounds it.
cut() {
  local how=$1 nh=3 np=2 bound=5
  up $nh
  unset TUTTI_TIMEOUT TUTTI_HEARTBEAT_S
  start_loops $nh $np loop 60 || return
  sleep 1
  local t_cut n=$((nh * np))
  t_cut=$(date +%s.%N)
  if [ "$how" = kill ]; then $HOSTS kill 2; else $HOSTS cut 2; fi
  for ((i = 0; i < nh; i++)); do
    if [ $i = 2 ] && [ "$how" = kill ]; then wait "${PIDS[2]}" 2>/dev/null; unset "PIDS[2]"; continue; fi
    finish $i || fail "host $i: tuttirun exited with status $?"
  done
  # Ranks 4 and 5 are on host 2; the others lost them (and, with a cut link,
  # they lost the others).
  for ((r = 0; r < n; r++)); do
    local lost='[45]'
    if [ $r -ge 4 ]; then
      [ "$how" = kill ] && continue
      lost='[0-3]'
    fi
    report $r "$t_cut" || continue
    echo "rank $r detected the loss after $DT s: ${LINE#*: }"
    grep -Eq "(rank $lost \(pid|after losing rank $lost )" <<<"$LINE" ||
      fail "rank $r's error does not name a rank it lost"
    awk -v d="$DT" -v b=$bound 'BEGIN {exit !(d < b)}' || fail "rank $r took $DT s (bound $bound s)"
  done
  [ $FAILED = 0 ] || show 30
}

# Host 2's ranks are stopped (SIGSTOP) while 3 hosts x 2 ranks loop over
# allreduces: their kernel still answers, so nobody may call them lost (a
# peer that stops reading, with its TCP window shut, is unit.socket's case).
# Every other rank reports, once TUTTI_TIMEOUT (8 s) has passed without
# progress, that it made none (or that its neighbour left for that reason).
# Then host 2 is continued: its ranks find their peers gone and exit.
stall() {
  local nh=3 np=2 limit=8
  up $nh
  export TUTTI_TIMEOUT=$limit
  unset TUTTI_HEARTBEAT_S
  start_loops $nh $np loop 60 || return
  sleep 1
  local t_stop
  t_stop=$(date +%s.%N)
  $HOSTS stop 2
  for ((i = 0; i < 2; i++)); do finish $i || fail "host $i: tuttirun exited with status $?"; done
  $HOSTS cont 2
  for ((t = 0; t < 100; t++)); do
    kill -0 "${PIDS[2]}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${PIDS[2]}" 2>/dev/null; then
    fail "host 2's ranks still run 10 s after SIGCONT"
    $HOSTS kill 2
  fi
  finish 2
  local stalled=0
  for ((r = 0; r < 4; r++)); do
    report $r "$t_stop" || continue
    echo "rank $r reported after $DT s: ${LINE#*: }"
    grep -q "made no progress" <<<"$LINE" && stalled=$((stalled + 1))
    grep -q "made no progress" <<<"$LINE" ||
      fail "rank $r's error does not say that a rank made no progress"
    grep -Eq "lost its connection|after losing" <<<"$LINE" &&
      fail "rank $r called a stopped rank lost"
    awk -v d="$DT" -v b=$limit 'BEGIN {exit !(d > b - 1)}' ||
      fail "rank $r gave up after $DT s, before TUTTI_TIMEOUT ($limit s)"
  done
  [ $stalled -gt 0 ] || fail "no rank reported that it made no progress"
  grep -q "is stalled, not lost" "$TMP"/host0.log "$TMP"/host1.log ||
    fail "no error says that the stopped ranks are stalled, not lost"
  [ $FAILED = 0 ] || show 30
}

# wait_exit I S: waits up to S seconds for host I's tuttirun to end; kills
# the host and returns 1 when it does not.
wait_exit() {
  local i=$1 s=$2
  for ((t = 0; t < s * 10; t++)); do
    kill -0 "${PIDS[$i]}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${PIDS[$i]}" 2>/dev/null; then
    $HOSTS kill "$i"
    finish "$i"
    return 1
  fi
  finish "$i"
  return 0
}

# N fault trials (default 5), each on fresh hosts: 3 hosts x 1 or 2 ranks
# loop over random collectives of random sizes; at a random moment one
# random rank is killed or one random host is cut off. At the default
# TUTTI_TIMEOUT, every rank left must error within 5 s naming a rank it
# lost, every process must exit, and no shared memory may be left.
trials() {
  local ntrials=${1:-5} bound=5 all_dt=()
  unset TUTTI_TIMEOUT TUTTI_HEARTBEAT_S
  export TR_GRACE=20 # siblings of a killed rank must report before tuttirun stops them
  for ((tr = 1; tr <= ntrials; tr++)); do
    local nh=3 np=$((RANDOM % 2 + 1)) seed=$((RANDOM * 32768 + RANDOM)) fault target
    local n=$((nh * np)) shm_before
    if ((RANDOM % 2)); then fault=kill target=$((RANDOM % n)); else fault=cut target=$((RANDOM % nh)); fi
    new_id # the links of the last trial's hosts may take a moment to go
    up $nh
    shm_before=$(ls /dev/shm | grep '^tutti-' | sort)
    local f0=$FAILED
    start_loops $nh $np trial $seed 60 || { $HOSTS down; continue; }
    sleep "$(awk -v r=$RANDOM 'BEGIN {printf "%.2f", 0.2 + (r % 1500) / 1000}')"
    local t_fault victims
    t_fault=$(date +%s.%N)
    if [ $fault = kill ]; then
      kill -9 "$(cat "$TMP"/host*.log | sed -nE "s/.*rank $target looping \(pid ([0-9]+)\).*/\1/p")"
      victims="$target"
    else
      $HOSTS cut $target
      victims=$(seq -s '|' $((target * np)) $((target * np + np - 1)))
    fi
    echo "trial $tr: ${nh}x$np ranks, seed $seed, $fault $([ $fault = kill ] && echo rank || echo host) $target"
    for ((i = 0; i < nh; i++)); do
      wait_exit $i 20 || fail "trial $tr: host $i still ran 20 s after the fault"
    done
    for ((r = 0; r < n; r++)); do
      local lost="($victims)"
      [ $fault = kill ] && [ $r = "$target" ] && continue
      if [ $fault = cut ] && [ $((r / np)) = "$target" ]; then
        lost="($(for ((q = 0; q < n; q++)); do [ $((q / np)) = "$target" ] || printf '%s|' $q; done | sed 's/|$//'))"
      fi
      report $r "$t_fault" || continue
      echo "  rank $r after $DT s: ${LINE#*: }"
      all_dt+=("$DT")
      grep -Eq "(rank $lost \(pid|after losing rank $lost )" <<<"$LINE" ||
        fail "trial $tr: rank $r's error does not name a rank it lost"
      awk -v d="$DT" -v b=$bound 'BEGIN {exit !(d < b)}' ||
        fail "trial $tr: rank $r took $DT s (bound $bound s)"
    done
    local left
    left=$(comm -13 <(echo "$shm_before") <(ls /dev/shm | grep '^tutti-' | sort))
    if [ -n "$left" ]; then
      sleep 2 # another job's segment lives for its init only
      for f in $left; do [ -e "/dev/shm/$f" ] && fail "trial $tr: /dev/shm/$f was left behind"; done
    fi
    $HOSTS down
    [ $FAILED = "$f0" ] || show 30
    mkdir -p "$TMP/trial$tr" && mv "$TMP"/host*.log "$TMP/trial$tr/"
  done
  [ ${#all_dt[@]} -gt 0 ] && printf '%s\n' "${all_dt[@]}" | sort -n | awk '{v[NR] = $1} END {if (NR)
    printf "detection times of %d ranks: min %.2f s, median %.2f s, max %.2f s\n", NR, v[1],
      v[int((NR + 1) / 2)], v[NR]}'
}

# Two hosts, one rank each: the raw TCP rate both ways at once (as a 2-rank
# allreduce moves data) against the allreduce's bus bandwidth.
bw() {
  up 2
  local raw ar
  $HOSTS run 1 "$RAWBW" -l -p 29400 -s 2 >"$TMP/raw_l.log" 2>&1 &
  PIDS[5]=$!
  raw=$($HOSTS run 0 "$RAWBW" -c "$($HOSTS addr 1)" -p 29400 -b 512M -s 2 -d)
  wait "${PIDS[5]}"
  unset "PIDS[5]"
  echo "$raw"
  for size in 67108864 268435456; do
    for ((i = 0; i < 2; i++)); do start $i 2 1 bw $size 5; done
    for ((i = 0; i < 2; i++)); do finish $i || fail "host $i: tuttirun exited with status $?"; done
    ar=$(grep -ho "allreduce bytes.*" "$TMP"/host0.log)
    echo "${ar:-no allreduce result}"
  done
  local r a
  r=$(sed -nE 's/.*GB\/s ([0-9.]+).*/\1/p' <<<"$raw")
  a=$(sed -nE 's/.*busbw ([0-9.]+).*/\1/p' <<<"$ar")
  [ -n "$r" ] && [ -n "$a" ] || { fail "no numbers"; show; return; }
  echo "allreduce busbw / raw TCP rate (each direction): $(awk -v a="$a" -v r="$r" 'BEGIN {printf "%.0f%%", 100 * a / r}')"
  # A loose floor: catches a transport that stalls, not a slow machine.
  awk -v a="$a" -v r="$r" 'BEGIN {exit !(a > 0.1 * r)}' || fail "allreduce reaches under 10% of raw TCP"
}

# Hosts 0 and 1 (one rank each) grow their job to host 2, whose process
# gets the grow's id through a file, as a job would hand it to a process it
# starts; then shrink back to hosts 0 and 1. GROW is test_netns_grow: every
# collective, bit for bit, on each communicator of each step.
grow() {
  local bin=$1 all
  up 3
  unset NCCL_SOCKET_IFNAME
  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET TUTTI_TIMEOUT=30
  local t0=$SECONDS
  for i in 0 1 2; do
    ($HOSTS run "$i" timeout -s TERM 150 "$bin" "$TMP" "$([ $i = 2 ] && echo new || echo $i)" \
      >"$TMP/host$i.log" 2>&1; exit $?) &
    PIDS[$i]=$!
  done
  for i in 0 1 2; do finish $i || fail "host $i: exited with status $?"; done
  all=$(cat "$TMP"/host*.log)
  for i in 0 1 2; do
    grep -Eq "^grow host $i: [0-9]+ passed, 0 failed" "$TMP/host$i.log" || fail "host $i did not pass"
  done
  for step in "2 hosts" "grown to 3 hosts" "the parent after the grow" "shrunk back to 2 hosts"; do
    [ "$(grep -Ec "^grow host [0-9]: $step: [1-9][0-9]* passed, 0 failed" <<<"$all")" = \
      "$([ "$step" = "grown to 3 hosts" ] && echo 3 || echo 2)" ] || fail "step \"$step\" did not pass"
  done
  grep -q "via $VIA/eth0" <<<"$all" || fail "no ring pair runs over $VIA/eth0"
  grep -E "using network interface" <<<"$all" | grep -Ev "interface eth0 " &&
    fail "an interface other than eth0 was chosen (the decoys are docker0 and veth*)"
  echo "grow 2 -> 3 -> 2 hosts: $(grep -Eo "^grow host [0-9]: [0-9]+ passed" <<<"$all" |
    awk '{s += $4} END {print s}') checks passed in $((SECONDS - t0)) s"
  [ $FAILED = 0 ] || show 30
}

# Two threads per process drive two communicators at once, small and large
# calls interleaved (TWO is test_netns_two). `run`: 2 hosts x 1 rank, every
# result checked. `kill`: 3 hosts x 1 rank call until host 2 is killed
# mid-call; each survivor's two threads must fail naming rank 2 within
# TUTTI_TIMEOUT (10 s), and none may have seen a wrong value before.
two() {
  local how=$1 bin=$2 nh=2 calls=300 limit=10 all
  [ "$how" = kill ] && nh=3 calls=100000000
  up $nh
  unset NCCL_SOCKET_IFNAME TUTTI_HEARTBEAT_S
  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET TUTTI_TIMEOUT=$limit
  local t0=$SECONDS
  for ((i = 0; i < nh; i++)); do
    ($HOSTS run "$i" timeout -s TERM 150 "$TUTTIRUN" --nnodes $nh --node_rank $i \
      --nproc_per_node 1 --master_addr "$($HOSTS addr 0)" --master_port 29500 "$bin" job $calls \
      >"$TMP/host$i.log" 2>&1; exit $?) &
    PIDS[$i]=$!
  done
  if [ "$how" = kill ]; then
    for ((t = 0; t < 300; t++)); do
      [ "$(cat "$TMP"/host*.log 2>/dev/null | grep -c "looping")" = $((2 * nh)) ] && break
      sleep 0.1
    done
    [ "$(cat "$TMP"/host*.log | grep -c "looping")" = $((2 * nh)) ] || fail "the job did not start"
    sleep 2
    local t_kill
    t_kill=$(date +%s.%N)
    $HOSTS kill 2
    wait "${PIDS[2]}" 2>/dev/null
    unset "PIDS[2]"
    for i in 0 1; do finish $i; done
    all=$(cat "$TMP"/host*.log)
    for r in 0 1; do
      for c in 0 1; do
        LINE=$(grep -E "rank $r comm $c LOST" <<<"$all" | head -1)
        [ -n "$LINE" ] || { fail "rank $r comm $c reported nothing"; continue; }
        local at dt
        at=$(sed -nE 's/.* LOST at ([0-9.]+) .*/\1/p' <<<"$LINE")
        dt=$(awk -v a="$at" -v b="$t_kill" 'BEGIN {printf "%.2f", a - b}')
        echo "rank $r comm $c detected the loss after $dt s: ${LINE#*: }"
        grep -Eq "(rank 2 \(pid|after losing rank 2 )" <<<"$LINE" ||
          fail "rank $r comm $c: the error does not name rank 2"
        awk -v d="$dt" -v b=$limit 'BEGIN {exit !(d < b)}' || fail "rank $r comm $c took $dt s"
        grep -Eq "rank $r comm $c: [1-9][0-9]* passed, 0 failed" <<<"$all" ||
          fail "rank $r comm $c checked nothing, or saw a wrong value"
      done
    done
  else
    for ((i = 0; i < nh; i++)); do finish $i || fail "host $i: tuttirun exited with status $?"; done
    all=$(cat "$TMP"/host*.log)
    for ((r = 0; r < nh; r++)); do
      for c in 0 1; do
        grep -Eq "rank $r comm $c: $calls passed, 0 failed" <<<"$all" ||
          fail "rank $r comm $c did not pass all $calls calls"
      done
    done
  fi
  grep -q "via $VIA/eth0" <<<"$all" || fail "no pair runs over $VIA/eth0"
  echo "two $how: $(grep -Eo "comm [01]: [0-9]+ passed" <<<"$all" | awk '{s += $3} END {print s}') calls checked in $((SECONDS - t0)) s"
  [ $FAILED = 0 ] || show 30
}

case "$WHAT" in
  job) job "$@" ;;
  rma) JOB_MODE=rma job "$@" ;;
  cut) cut "$@" ;;
  stall) stall ;;
  trials) trials "$@" ;;
  bw) bw ;;
  grow) grow "$@" ;;
  two) two "$@" ;;
  *) echo "unknown scenario $WHAT"; exit 2 ;;
esac
exit $FAILED
