#!/usr/bin/env bash
# The multi-host scenarios of the tcp transport, hosts being network
# namespaces (hosts.sh), one tuttirun per host; one ctest test each.
#   run.sh TUTTIRUN JOB RAWBW job HOSTS RANKS [IFNAME]  the collective matrix
#   run.sh TUTTIRUN JOB RAWBW cut kill|link             a host is lost mid-loop
#   run.sh TUTTIRUN JOB RAWBW bw                        allreduce vs raw TCP rate
# JOB is test_netns_job, RAWBW tcp_raw_bw. Exits 77 (skip) without namespaces.
set -u
TUTTIRUN=$1 JOB=$2 RAWBW=$3 WHAT=$4
shift 4
HOSTS="bash $(cd "$(dirname "$0")" && pwd)/hosts.sh"
# An id no other run uses (hosts.sh names everything after it).
for _ in 1 2 3 4 5 6 7 8; do
  export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
  ip netns list 2>/dev/null | grep -q "^tutti-h$(printf %04x $TUTTI_NETNS_ID)-" || break
done
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
    --nproc_per_node "$np" --master_addr "$($HOSTS addr 0)" --master_port 29500 \
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
  for ((i = 0; i < nh; i++)); do start $i "$nh" "$np" matrix; done
  for ((i = 0; i < nh; i++)); do finish $i || fail "host $i: tuttirun exited with status $?"; done
  local n=$((nh * np)) all
  all=$(cat "$TMP"/host*.log)
  for ((r = 0; r < n; r++)); do
    grep -Eq "rank $r/$n: [0-9]+ passed, 0 failed" <<<"$all" || fail "rank $r did not pass"
  done
  # Across hosts the ring goes over TCP on eth0; within a host over shared memory.
  grep -q "via NET/Socket/eth0" <<<"$all" || fail "no ring pair runs over NET/Socket/eth0"
  [ "$np" = 1 ] || grep -q "via SHM" <<<"$all" || fail "no ring pair within a host uses SHM"
  grep -E "using network interface" <<<"$all" | grep -Ev "interface eth0 " &&
    fail "an interface other than eth0 was chosen (the decoys are docker0 and veth*)"
  echo "job ${nh}x$np${ifname:+ NCCL_SOCKET_IFNAME=$ifname}: $(grep -Eo "[0-9]+ passed" <<<"$all" |
    awk '{s += $1} END {print s}') checks passed on $n ranks in $((SECONDS - t0)) s"
  [ $FAILED = 0 ] || show
}

# A host is lost while 3 hosts x 2 ranks loop over allreduces: `kill` kills
# its processes, `link` takes its link down. Every rank that remains must
# report an error naming a rank it lost, within TUTTI_TIMEOUT (10 s).
cut() {
  local how=$1 nh=3 np=2 bound=10
  up $nh
  export TUTTI_TIMEOUT=$bound
  for ((i = 0; i < nh; i++)); do start $i $nh $np loop 60; done
  local n=$((nh * np))
  for ((t = 0; t < 300; t++)); do
    [ "$(cat "$TMP"/host*.log 2>/dev/null | grep -c "looping")" = $n ] && break
    sleep 0.1
  done
  [ "$(cat "$TMP"/host*.log 2>/dev/null | grep -c "looping")" = $n ] || { fail "the job did not start"; show; return; }
  sleep 1
  local t_cut
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
    local line
    line=$(cat "$TMP"/host*.log | grep -E "^\[rank$r\]: rank $r (LOST|NOFAULT)" | head -1)
    if [ -z "$line" ]; then
      fail "rank $r reported nothing"
      continue
    fi
    local at dt
    at=$(sed -nE 's/.* LOST at ([0-9.]+) .*/\1/p' <<<"$line")
    [ -n "$at" ] || { fail "rank $r: $line"; continue; }
    dt=$(awk -v a="$at" -v b="$t_cut" 'BEGIN {printf "%.2f", a - b}')
    echo "rank $r detected the loss after $dt s: ${line#*: }"
    grep -Eq "(rank $lost \(pid|after losing rank $lost )" <<<"$line" ||
      fail "rank $r's error does not name a rank it lost"
    awk -v d="$dt" -v b=$bound 'BEGIN {exit !(d < b)}' || fail "rank $r took $dt s (bound $bound s)"
  done
  [ $FAILED = 0 ] || show 30
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

case "$WHAT" in
  job) job "$@" ;;
  cut) cut "$@" ;;
  bw) bw ;;
  *) echo "unknown scenario $WHAT"; exit 2 ;;
esac
exit $FAILED
