#!/usr/bin/env bash
# ncclSetEncryption across hosts (network namespaces, hosts.sh), one
# tuttirun per host; test_netns_job sets the key from TEST_PSK.
#   enc.sh TUTTIRUN JOB job HOSTS RANKS  the collective matrix, every rank with the key
#   enc.sh TUTTIRUN JOB wrongkey         one host's rank has another key
#   enc.sh TUTTIRUN JOB flip             one host alters a record as it sends it
#   enc.sh TUTTIRUN JOB relay            a relay on the wire flips a bit of the root's answer
#   enc.sh TUTTIRUN JOB hidden           OpenSSL hidden: ncclSetEncryption refuses
#   enc.sh TUTTIRUN JOB nonces           the matrix on 2 hosts x 2 ranks while relay.py
#                                        taps the bridge: no record's nonce may repeat
# With NET_PLUGIN=path hosts talk through that network plugin instead of
# the TCP transport: outside the encryption, as in NCCL, and every rank
# must say so. Exits 77 without namespaces.
set -u
if [ -n "${NET_PLUGIN:-}" ]; then export NCCL_NET_PLUGIN=$NET_PLUGIN; else unset NCCL_NET_PLUGIN; fi
TUTTIRUN=$1 JOB=$2 WHAT=$3
shift 3
HOSTS="bash $(cd "$(dirname "$0")" && pwd)/hosts.sh"
for _ in 1 2 3 4 5 6 7 8; do
  export TUTTI_NETNS_ID=$(( (RANDOM << 8 ^ $$) % 65536 ))
  ip netns list 2>/dev/null | grep -q "^tutti-h$(printf %04x $TUTTI_NETNS_ID)-" || break
done
export TUTTI_JOB_SECRET="netns-enc-$TUTTI_NETNS_ID-$RANDOM"
export TEST_PSK="netns-encryption-test-key-0123456789abcdef-$RANDOM"
unset TEST_PSK_ODD_RANK TEST_PSK_ODD TUTTI_TEST_FLIP_RECORD TUTTI_TEST_HIDE_OPENSSL
TMP=$(mktemp -d)
FAILED=0
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
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

# start I NHOSTS NPROC ENV... -- ARGS...: tuttirun for host I in the background.
start() {
  local i=$1 nh=$2 np=$3
  shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  ($HOSTS run "$i" env "${envs[@]}" timeout -s TERM 100 "$TUTTIRUN" --nnodes "$nh" \
    --node_rank "$i" --nproc_per_node "$np" --master_addr "$($HOSTS addr 0)" \
    --master_port "${MP:-29500}" "$JOB" "$@" >"$TMP/host$i.log" 2>&1; exit $?) &
  PIDS[$i]=$!
}

finish() {
  wait "${PIDS[$1]}"
  local rc=$?
  unset "PIDS[$1]"
  return $rc
}

show() {
  for f in "$TMP"/host*.log; do
    echo "--- $(basename "$f" .log)"
    grep -v "NCCL INFO" "$f" | tail -12
  done
}

# The matrix on every rank, all with the key: results bit for bit.
job() {
  local nh=$1 np=$2 n=$(($1 * $2)) t0=$SECONDS
  up "$nh"
  [ -z "${TAP:-}" ] || tap_start
  export TUTTI_TIMEOUT=30 NCCL_DEBUG=WARN
  for ((i = 0; i < nh; i++)); do start $i "$nh" "$np" X=1 -- matrix; done
  for ((i = 0; i < nh; i++)); do finish $i || fail "host $i: tuttirun exited with status $?"; done
  local all
  all=$(cat "$TMP"/host*.log)
  for ((r = 0; r < n; r++)); do
    grep -Eq "rank $r/$n: [1-9][0-9]* passed, 0 failed" <<<"$all" || fail "rank $r did not pass"
  done
  # A network plugin's traffic is outside the encryption (as in NCCL): said.
  [ -z "${NCCL_NET_PLUGIN:-}" ] || grep -q "outside the encryption" <<<"$all" ||
    fail "no rank warned that the network plugin is not encrypted"
  echo "encrypted job ${nh}x$np: $(grep -Eo "[0-9]+ passed" <<<"$all" |
    awk '{s += $1} END {print s}') checks passed on $n ranks in $((SECONDS - t0)) s"
  [ $FAILED = 0 ] || show
}

# Every host's tuttirun must end with an error within `bound` seconds, no
# rank may pass or see a wrong result, and some log must say `want`.
expect_failure() {
  local nh=$1 t0=$2 bound=$3 want=$4 all
  for ((i = 0; i < nh; i++)); do finish $i && fail "host $i: tuttirun exited with status 0"; done
  [ -n "${ENC_SHOW:-}" ] && show
  local dt=$((SECONDS - t0))
  all=$(cat "$TMP"/host*.log)
  [ $dt -le "$bound" ] || fail "the job took $dt s to fail (bound $bound s)"
  grep -q "wrong result" <<<"$all" && fail "a rank saw a wrong result"
  grep -Eq "passed, 0 failed" <<<"$all" && fail "a rank passed"
  grep -q "$want" <<<"$all" || fail "no log says \"$want\""
  echo "$WHAT: every host failed in $dt s"
  for f in "$TMP"/host*.log; do
    echo "  $(basename "$f" .log): $(grep -Ev 'NCCL (INFO|WARN)' "$f" | grep -m1 -E 'failed|refus')"
  done
  [ $FAILED = 0 ] || show
}

# 3 hosts x 1 rank; host 1's rank holds another key. TUTTI_TIMEOUT bounds
# how long the others wait for it (a peer without the key is refused as any
# stranger would be, and named).
wrongkey() {
  up 3
  export TUTTI_TIMEOUT=6
  local t0=$SECONDS
  start 0 3 1 X=1 -- matrix
  start 1 3 1 TEST_PSK="another-key-of-thirty-two-bytes-or-more-$RANDOM" -- matrix
  start 2 3 1 X=1 -- matrix
  expect_failure 3 $t0 20 "pre-shared keys differ"
}

# 2 hosts x 1 rank; every connection of host 1 flips a bit of its 40th
# record: the record is refused, never delivered.
flip() {
  up 2
  export TUTTI_TIMEOUT=6
  local t0=$SECONDS
  start 0 2 1 X=1 -- matrix
  start 1 2 1 TUTTI_TEST_FLIP_RECORD=40 -- matrix
  expect_failure 2 $t0 30 "does not authenticate"
}

# 2 hosts x 1 rank; host 1 reaches the bootstrap root through relay.py,
# which flips a bit of the root's answer (byte 90: after the handshake's 76,
# inside the table's record): rank 1 must refuse it, rank 0 then fail.
relay() {
  up 2
  export TUTTI_TIMEOUT=10
  local a0 t0=$SECONDS
  a0=$($HOSTS addr 0)
  ($HOSTS run 0 python3 "$(dirname "$0")/relay.py" "$a0:29601" "$a0:29501" 90 \
    >"$TMP/relay.out" 2>&1; exit 0) &
  PIDS[9]=$!
  # The relay listening before the ranks start (Python starts slowly on busy cores).
  for _ in $(seq 50); do
    $HOSTS run 0 ss -ltn 2>/dev/null | grep -q ":29601 " && break
    sleep 0.2
  done
  start 0 2 1 X=1 -- matrix
  MP=29600 start 1 2 1 X=1 -- matrix
  expect_failure 2 $t0 30 "does not authenticate"
}

# OpenSSL hidden on every host: ncclSetEncryption refuses with what to install.
hidden() {
  up 2
  local t0=$SECONDS
  start 0 2 1 TUTTI_TEST_HIDE_OPENSSL=1 -- matrix
  start 1 2 1 TUTTI_TEST_HIDE_OPENSSL=1 -- matrix
  expect_failure 2 $t0 10 "install OpenSSL 3"
}

# 2 hosts x 2 ranks, the matrix (every collective, both directions of
# every connection), with relay.py tapping the hosts' bridge: it finds the
# nonce each record authenticates under, independent of util/seal.c's
# counter, and fails naming the connection and the value if one repeats.
nonces() {
  # The tap opens records with Python's cryptography: installed when missing.
  python3 -c "import cryptography" 2>/dev/null ||
    python3 -m pip install -q cryptography >/dev/null 2>&1 ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-cryptography >/dev/null 2>&1 || true
  python3 -c "import cryptography" 2>/dev/null || { echo "SKIPPED: no python3-cryptography (pip and apt could not install it)"; exit 77; }
  TAP=1 job 2 2
  kill -INT "${PIDS[9]}"
  wait "${PIDS[9]}" || fail "the tap saw a nonce repeat, or could not read the streams"
  unset "PIDS[9]"
  cat "$TMP/tap.out"
  grep -Eq "tap: [0-9]{3,} records on ([2-9]|[1-9][0-9]+) encrypted" "$TMP/tap.out" ||
    fail "the tap checked fewer than 100 records or 2 connections"
}

# relay.py's tap on the hosts' bridge, in the background until SIGINT.
tap_start() {
  python3 "$(dirname "$0")/relay.py" tap "tb$(printf %04x $((TUTTI_NETNS_ID % 65536)))" "$TEST_PSK" \
    >"$TMP/tap.out" 2>&1 &
  PIDS[9]=$!
  for _ in $(seq 50); do grep -q tapping "$TMP/tap.out" && return; sleep 0.1; done
  cat "$TMP/tap.out"
  fail "the tap did not start"
}

case "$WHAT" in
  job) job "$@" ;;
  wrongkey | flip | relay | hidden | nonces) "$WHAT" ;;
  *) echo "usage: enc.sh TUTTIRUN JOB job HOSTS RANKS | wrongkey | flip | relay | hidden | nonces" >&2
    exit 2 ;;
esac
exit $FAILED
