#!/usr/bin/env bash
# bench/lib.sh as the GPU bench scripts use it: a run that times out, one
# that cannot start, one that exits non-zero and one that prints no rows
# each make bench_finish fail and name the run; good runs pass.
set -u
cd "$(dirname "$0")/../.."
. bench/lib.sh
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
expect() { # DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fails=$((fails + 1)); fi
}
rows() { printf '# size time\n8 1.0\n64 2.0\n' >"$1"; }

bench_init "$d/good"
rows "$d/g0.log"
rows "$d/g1.log"
true &
p0=$!
true &
p1=$!
bench_wait good "$d/g0.log" "$d/g1.log" -- $p0 $p1
bench_status single 0 "$d/g0.log"
expect "good runs pass" bench_finish good

bench_init "$d/bad"
rows "$d/b0.log"
(exit 124) &
p0=$!
true &
p1=$!
bench_wait timed "$d/b0.log" "$d/b1.log" -- $p0 $p1
printf 'tutti-perf: no collective completed for 30 s\n' >"$d/e0.log"
true &
p0=$!
true &
p1=$!
bench_wait empty "$d/e0.log" "$d/e1.log" -- $p0 $p1
bench_status nostart 127
bench_status crashed 139
out=$(bench_finish bad)
rc=$?
echo "$out"
expect "failures make bench_finish fail" [ $rc -ne 0 ]
expect "a timeout is named" grep -q "timed rank 0 timed out" <<<"$out"
expect "a run without rows is named" grep -q "empty printed no rows" <<<"$out"
expect "a program that could not start is named" grep -q "nostart could not start" <<<"$out"
expect "an exit status is named" grep -q "crashed exited with 139" <<<"$out"
expect "four runs counted" grep -q "FAILED, 4 run" <<<"$out"
# A failure noted inside a pipeline's subshell still counts.
bench_init "$d/sub"
{ bench_status piped 1; } | cat
expect "a failure inside a pipeline counts" bash -c '! (. bench/lib.sh; bench_out='"$d/sub"'; bench_finish sub >/dev/null)'
[ $fails -eq 0 ] && echo "bench lib: passed" || echo "bench lib: $fails FAILED"
exit $((fails > 0))
