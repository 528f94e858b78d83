#!/usr/bin/env bash
# The socket network between two hosts (network namespaces of
# tests/netns/hosts.sh), 16 MB messages streaming from host 0 to host 1:
# a receiver stopped for 4 s is no failure, and once host 1 is cut off
# both ends fail within about 3 heartbeats, naming the other's address.
#   cut.sh NET_PEER
# Exits 77 (skip) where namespaces cannot be made.
set -u
PEER=$1
HOSTS="bash $(cd "$(dirname "$0")/../netns" && pwd)/hosts.sh"
export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
# Data sockets with workers, whatever the cores.
export TUTTI_HEARTBEAT_S=1 NCCL_SOCKET_IFNAME=eth0 NCCL_SOCKET_NTHREADS=2
TMP=$(mktemp -d)
cleanup() {
  $HOSTS down
  rm -rf "$TMP"
}
trap cleanup EXIT
$HOSTS up 2 || exit $?
FAILED=0
fail() {
  echo "FAIL: $*"
  FAILED=1
}
# Waits up to $2 seconds for pattern $3 in file $1.
await() {
  local end=$((SECONDS + $2))
  while ((SECONDS < end)); do
    grep -q "$3" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
last_count() { sed -n 's/^[a-z]*: \([0-9]*\) messages$/\1/p' "$1" | tail -n 1; }

$HOSTS run 1 "$PEER" recv "$TMP/handle" >"$TMP/recv.log" 2>&1 &
$HOSTS run 0 "$PEER" send "$TMP/handle" >"$TMP/send.log" 2>&1 &
await "$TMP/send.log" 20 "send: 16 messages" || fail "no messages flow"

# A stopped receiver: its kernel still answers, so nobody may give up.
$HOSTS stop 1
sleep 4
$HOSTS cont 1
before=$(last_count "$TMP/send.log")
# Flowing again: a count printed since, within 10 s (a sanitizer build on
# busy cores takes a while to print its next 16 messages).
end=$((SECONDS + 10))
while [ "$(last_count "$TMP/send.log")" = "$before" ] && ((SECONDS < end)); do
  sleep 0.2
done
grep -h failed "$TMP/send.log" "$TMP/recv.log" && fail "a stopped receiver was taken for a lost one"
[ "$(last_count "$TMP/send.log")" != "$before" ] || fail "messages did not flow again within 10 s of SIGCONT"

# Host 1 cut off with data in flight.
t_cut=$(date +%s.%N)
$HOSTS cut 1
for side in send recv; do
  if ! await "$TMP/$side.log" 15 "failed at"; then
    fail "$side: no failure 15 s after the cut"
    continue
  fi
  line=$(grep -m1 "failed at" "$TMP/$side.log")
  echo "$line"
  t=$(sed -n 's/.*failed at \([0-9.]*\):.*/\1/p' <<<"$line")
  took=$(echo "$t - $t_cut" | bc -l 2>/dev/null || awk "BEGIN{print $t - $t_cut}")
  echo "$side: failed $took s after the cut"
  awk "BEGIN{exit !($took < 3 * $TUTTI_HEARTBEAT_S + 3)}" || fail "$side: took $took s"
  other=$([ $side = send ] && echo 1 || echo 0)
  grep -q "$($HOSTS addr $other)" <<<"$line" || fail "$side: the sentence does not name host $other"
  grep -qi "remote\|stopped answering\|broke\|closed" <<<"$line" || fail "$side: not a remote error"
done
[ $FAILED = 0 ] && echo "PASS" || { tail -n 3 "$TMP"/*.log; }
exit $FAILED
