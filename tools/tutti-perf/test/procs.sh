#!/bin/sh
# Two tutti-perf processes of two threads each, started the way torchrun or
# tuttirun starts ranks (RANK, WORLD_SIZE, LOCAL_RANK, NCCL_COMM_ID), must
# agree on 4 ranks, verify, and print one table (process 0). A second
# argument names the collective (default allreduce).
set -u
perf=$1
coll=${2:-allreduce}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export NCCL_COMM_ID=127.0.0.1:$port WORLD_SIZE=2
for r in 0 1; do
  RANK=$r LOCAL_RANK=$r "$perf" "$coll" -t 2 -b 8 -e 1M -f 16 -n 2 -w 1 -a 3 >"$dir/out$r" 2>&1 &
  eval "pid$r=\$!"
done
rc=0
wait "$pid0" || rc=1
wait "$pid1" || rc=1
cat "$dir/out0"
echo "--- process 1:"
cat "$dir/out1"
grep -q "Out of bounds values : 0 OK" "$dir/out0" || rc=1
grep -q "Rank  3 Group" "$dir/out0" || rc=1
# Process 1 measures but prints no table.
if grep -q "Avg bus bandwidth" "$dir/out1"; then rc=1; fi
exit $rc
