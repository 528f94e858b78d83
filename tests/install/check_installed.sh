#!/usr/bin/env bash
# Runs what an install put in PREFIX/bin, from there, with no LD_LIBRARY_PATH:
# every program must find libtutti.so.0 in PREFIX/LIBDIR through its
# $ORIGIN-relative RUNPATH, never through a path of the build machine.
# Usage: check_installed.sh PREFIX LIBDIR RANKS_CONSUMER
set -euo pipefail
prefix=$1
libdir=$2
ranks=$3
bin=$prefix/bin
lib=$prefix/$libdir
unset LD_LIBRARY_PATH
export TUTTI_TIMEOUT=30
fail() {
  echo "FAIL: $*"
  exit 1
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The library has its soname and no search path of its own.
readelf -d "$lib/libtutti.so.0" >"$out"
grep -q 'SONAME.*\[libtutti\.so\.0\]' "$out" || fail "libtutti.so.0 has no soname libtutti.so.0"
if grep -Eq 'RPATH|RUNPATH' "$out"; then fail "libtutti.so.0 carries a search path"; fi
# Each program: RUNPATH exactly $ORIGIN/../LIBDIR, nothing absolute.
n=0
for prog in "$bin"/*; do
  [ "$(od -An -tx1 -N4 "$prog" | tr -d ' \n')" = 7f454c46 ] || continue # ELF
  paths=$(readelf -d "$prog" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
  [ "$paths" = "\$ORIGIN/../$libdir" ] ||
    fail "$(basename "$prog"): search path '$paths', expected '\$ORIGIN/../$libdir'"
  n=$((n + 1))
done
echo "installed: $n programs, each with RUNPATH \$ORIGIN/../$libdir"
ldd "$bin/tutti-ddp" >"$out"
found=$(sed -n 's/.*libtutti\.so\.0 => \([^ ]*\).*/\1/p' "$out")
[ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$lib/libtutti.so.0")" ] ||
  { cat "$out"; fail "tutti-ddp does not load $lib/libtutti.so.0"; }

"$bin/tuttirun" --help >"$out" 2>&1 || fail "tuttirun --help"
for prog in tutti-ddp tutti-check tutti-perf tutti-ras; do
  "$bin/$prog" --help >"$out" 2>&1 || { cat "$out"; fail "$prog --help"; }
done
if command -v python3 >/dev/null 2>&1; then
  "$bin/tutti-plot" --help >"$out" 2>&1 || { cat "$out"; fail "tutti-plot --help"; }
fi

"$bin/tuttirun" -n 2 "$ranks" >"$out" 2>&1 || { cat "$out"; fail "2 ranks of a consumer under tuttirun"; }
grep -q 'rank 1 of 2, sum 3' "$out" || { cat "$out"; fail "consumer under tuttirun: wrong sum"; }
echo "tuttirun -n 2 consumer: sum 3 on both ranks"

# Two ranks as two processes, every size verified, on the installed library.
"$bin/tuttirun" -n 2 "$bin/tutti-perf" allreduce -t 1 -b 8 -e 64K -f 8 -c 1 -n 1 -w 1 >"$out" 2>&1 ||
  { cat "$out"; fail "tutti-perf allreduce, 2 ranks"; }
grep -q "Library: tutti .* $lib/libtutti.so.0" "$out" || { cat "$out"; fail "tutti-perf did not load $lib/libtutti.so.0"; }
grep -q 'Out of bounds values : 0 OK' "$out" || { cat "$out"; fail "tutti-perf: wrong values"; }
echo "tutti-perf allreduce, 2 ranks: verified"

"$bin/tutti-check" --quiet >"$out" 2>&1 || { cat "$out"; fail "tutti-check"; }
grep '^tutti-check: OK' "$out"

"$bin/tuttirun" -n 2 "$bin/tutti-ddp" --train-size 256 --val-size 64 --epochs 1 --progress 0 >"$out" 2>&1 ||
  { cat "$out"; fail "tutti-ddp, 2 ranks"; }
grep -q 'summary: 2 ranks' "$out" || { cat "$out"; fail "tutti-ddp printed no summary"; }
echo "tutti-ddp, 2 ranks: one epoch"
