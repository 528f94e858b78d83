#!/usr/bin/env bash
# The tests of tutti-ddp (one ctest test per case):
#   test_ddp.sh TUTTIRUN DDP COMPARE equiv float|fixed N  N ranks x batch B = 1 rank x batch N*B
#   test_ddp.sh TUTTIRUN DDP COMPARE resume float|fixed   stop, resume, same end as no stop
#   test_ddp.sh TUTTIRUN DDP COMPARE flags                bad flags, bad checkpoints
#   test_ddp.sh TUTTIRUN DDP COMPARE netns HOSTS_SH       2 namespace hosts x 2 ranks (77: skip)
# Checkpoints are compared with COMPARE (tutti-ddp-compare): float gradient
# sums must agree within FLOAT_TOL, fixed-point ones bit for bit.
set -u
TUTTIRUN=$1 DDP=$2 COMPARE=$3 WHAT=$4
shift 4
FLOAT_TOL=1e-5 # see README.md, "Equivalence and its tolerance"
B=4            # per-rank batch
# Tiny model (layers of 132, 1056 and 544 parameters in backward order); 101
# samples leave a partial last batch for every N; two epochs. In float mode
# buckets of 2 KB cut the middle layer into pieces; in fixed mode (8-byte
# sums) buckets of 9.4 KB put the last two layers into one bucket, started
# only when both are done.
COMMON="--layers 16,32,32,4 --train-size 101 --val-size 16 --epochs 2 --progress 0"
args() { echo "$COMMON --grad $1 --bucket-mb $([ "$1" = fixed ] && echo 0.0092 || echo 0.002)"; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

fail() {
  echo "FAIL: $*"
  FAILED=1
}

# run LOG CMD...: runs CMD with its output in $TMP/LOG (echoed on failure).
run() {
  local log=$TMP/$1
  shift
  echo "+ $*" | sed "s|$TMP/||g; s|$(dirname "$DDP")/||g"
  "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then
    sed 's/^/  | /' "$log"
    fail "exit status $rc"
  fi
  return $rc
}

# same A B TOL [--expect-differ]: compares two checkpoints.
same() {
  local out
  out=$("$COMPARE" "$TMP/$1" "$TMP/$2" --tol "$3" ${4:-})
  local rc=$?
  echo "  $1 vs $2: $out" | tr '\n' ' '
  echo
  [ $rc = 0 ] || fail "$1 vs $2"
}

# tol_of MODE [N]: fixed point and one rank are bit-identical; float within FLOAT_TOL.
tol_of() { [ "$1" = fixed ] || [ "${2:-0}" = 1 ] && echo 0 || echo $FLOAT_TOL; }

equiv() {
  local mode=$1 n=$2 tol
  tol=$(tol_of "$mode" "$n")
  run ref.log "$DDP" $(args "$mode") --batch $((n * B)) --checkpoint "$TMP/ref.ck"
  run dist.log "$TUTTIRUN" -n "$n" "$DDP" $(args "$mode") --batch $B \
    --checkpoint "$TMP/dist.ck"
  grep -h "epoch 2/2" "$TMP/ref.log" "$TMP/dist.log"
  grep -Eq "^\[rank0\]: tutti-ddp: $n ranks?, .* ([2-9]|[1-9][0-9]+) buckets .*overlap on" \
    "$TMP/dist.log" ||
    fail "the run did not use several buckets with overlap"
  same ref.ck dist.ck "$tol"
  if [ "$mode" = fixed ]; then # the last partial batch dropped instead
    run ref_drop.log "$DDP" $(args fixed) --drop-last --batch $((n * B)) \
      --checkpoint "$TMP/ref_drop.ck"
    run dist_drop.log "$TUTTIRUN" -n "$n" "$DDP" $(args fixed) --drop-last --batch $B \
      --checkpoint "$TMP/dist_drop.ck"
    same ref_drop.ck dist_drop.ck 0
  fi
  if [ "$n" -gt 1 ]; then # what the comparison catches: ranks that do not all-reduce
    run nosync.log "$TUTTIRUN" -n "$n" "$DDP" $(args "$mode") --batch $B --no-sync \
      --checkpoint "$TMP/nosync.ck"
    same ref.ck nosync.ck "$FLOAT_TOL" --expect-differ
  fi
}

resume() {
  local mode=$1 tol
  tol=$(tol_of "$mode")
  local job=("$TUTTIRUN" -n 2 "$DDP" $(args "$mode") --epochs 3 --batch $B)
  run full.log "${job[@]}" --checkpoint "$TMP/full.ck"
  # 13 steps per epoch: stop inside epoch 1, then at its end, then finish.
  run a.log "${job[@]}" --stop-after-step 5 --checkpoint "$TMP/a.ck"
  run b.log "${job[@]}" --resume "$TMP/a.ck" --stop-after-step 13 --checkpoint "$TMP/b.ck"
  run c.log "${job[@]}" --resume "$TMP/b.ck" --checkpoint-every 4 --checkpoint "$TMP/c.ck"
  grep -q "stopped after step 5" "$TMP/a.log" || fail "no stop at step 5"
  grep -q "resumed from .* at epoch 1, step 5 of it (global step 5)" "$TMP/b.log" ||
    fail "b did not resume at step 5"
  grep -q "resumed from .* at epoch 2, step 0 of it (global step 13)" "$TMP/c.log" ||
    fail "c did not resume at step 13"
  same full.ck c.ck 0
  cmp "$TMP/full.ck" "$TMP/c.ck" || fail "the final checkpoints are not the same bytes"
  # Epoch 1's line (its sums carried through the checkpoint) and epoch 3's.
  for e in 1 3; do
    local want got
    want=$(grep -ho "epoch $e/3  loss [0-9.]*  acc [0-9.]*%  val_acc [0-9.]*%" "$TMP/full.log")
    got=$(grep -ho "epoch $e/3  loss [0-9.]*  acc [0-9.]*%  val_acc [0-9.]*%" "$TMP"/[bc].log)
    echo "  uninterrupted: $want; resumed: $got"
    [ -n "$want" ] && [ "$want" = "$got" ] || fail "epoch $e's line differs"
  done
  # The same global batch on 4 ranks: resuming on another number of ranks.
  run d.log "$TUTTIRUN" -n 4 "$DDP" $(args "$mode") --epochs 3 --batch $((B / 2)) \
    --resume "$TMP/a.ck" --checkpoint "$TMP/d.ck"
  same full.ck d.ck "$tol"
}

# expect_error LOG TEXT CMD...: CMD must fail with TEXT in its output.
expect_error() {
  local log=$TMP/$1 text=$2
  shift 2
  "$@" >"$log" 2>&1 && fail "$* succeeded"
  grep -q -- "$text" "$log" || { fail "no '$text' from: $*"; sed 's/^/  | /' "$log"; }
}

flags() {
  run help.log "$DDP" --help
  grep -q -- "--bucket-mb" "$TMP/help.log" || fail "--help does not list the flags"
  expect_error bad1.log "unknown flag --bogus" "$DDP" --bogus
  expect_error bad2.log "bad value 'x' for --batch" "$DDP" --batch x
  expect_error bad3.log "bad value '16' for --layers" "$DDP" --layers 16
  expect_error bad4.log "needs --checkpoint" "$DDP" --stop-after-step 3
  run ck.log "$DDP" $COMMON --stop-after-step 3 --checkpoint "$TMP/ck"
  expect_error bad5.log "layers differ" "$DDP" $COMMON --layers 16,8,4 --resume "$TMP/ck"
  expect_error bad6.log "global batch" "$DDP" $COMMON --batch 3 --resume "$TMP/ck"
  expect_error bad7.log "cannot open" "$DDP" $COMMON --resume "$TMP/none"
  expect_error bad7b.log "not after the checkpoint" "$DDP" $COMMON --resume "$TMP/ck" \
    --stop-after-step 3 --checkpoint "$TMP/ck2"
  cp "$TMP/ck" "$TMP/damaged"
  printf 'X' | dd of="$TMP/damaged" bs=1 seek=200 conv=notrunc 2>/dev/null
  expect_error bad8.log "checksum mismatch" "$DDP" $COMMON --resume "$TMP/damaged"
  head -c 100 "$TMP/ck" >"$TMP/short"
  expect_error bad9.log "damaged header\|truncated" "$DDP" $COMMON --resume "$TMP/short"
  # All ranks load: a rank that cannot read the file fails the job.
  expect_error bad10.log "exited with status" "$TUTTIRUN" -n 2 "$DDP" $COMMON \
    --resume "$TMP/none"
  [ $FAILED = 0 ] && echo "flags and checkpoint errors: ok"
}

netns() {
  HOSTS="bash $1"
  for _ in 1 2 3 4 5 6 7 8; do # an id no other run uses
    export TUTTI_NETNS_ID=$(((RANDOM << 8 ^ $$) % 65536))
    ip netns list 2>/dev/null | grep -q "^tutti-h$(printf %04x $TUTTI_NETNS_ID)-" || break
  done
  export TUTTI_JOB_SECRET="ddp-netns-$TUTTI_NETNS_ID-$RANDOM"
  $HOSTS up 2
  case $? in
    0) ;;
    77) exit 77 ;;
    *) echo "FAIL: could not create 2 hosts"; exit 1 ;;
  esac
  trap '$HOSTS down; rm -rf "$TMP"' EXIT
  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET # to see which links go over TCP
  for mode in fixed float; do
    run ref_$mode.log "$DDP" $(args $mode) --batch $((4 * B)) --checkpoint "$TMP/ref_$mode.ck"
    local pids=()
    for i in 0 1; do
      $HOSTS run $i timeout -s TERM 100 "$TUTTIRUN" --nnodes 2 --node_rank $i \
        --nproc_per_node 2 --master_addr "$($HOSTS addr 0)" --master_port 29500 \
        "$DDP" $(args $mode) --batch $B --checkpoint "$TMP/nn_$mode.ck" \
        >"$TMP/host${i}_$mode.log" 2>&1 &
      pids[$i]=$!
    done
    for i in 0 1; do
      if ! wait "${pids[$i]}"; then
        fail "host $i: tuttirun exited with status $?"
        sed 's/^/  | /' "$TMP/host${i}_$mode.log"
      fi
    done
    grep -h "tutti-ddp: 4 ranks\|epoch 2/2" "$TMP/host0_$mode.log"
    grep -q "via NET/Socket" "$TMP/host0_$mode.log" "$TMP/host1_$mode.log" ||
      fail "no ring pair went over TCP between the hosts"
    same ref_$mode.ck nn_$mode.ck "$(tol_of $mode)"
  done
}

case "$WHAT" in
  equiv) equiv "$@" ;;
  resume) resume "$@" ;;
  flags) flags ;;
  netns) netns "$@" ;;
  *) echo "unknown case $WHAT"; exit 2 ;;
esac
[ $FAILED = 0 ] && echo "PASS" || echo "FAILED"
exit $FAILED
