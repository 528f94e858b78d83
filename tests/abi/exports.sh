#!/usr/bin/env bash
# tutti exports every function NVIDIA's libnccl.so.2 of release VERSION
# exports (from PyPI): both of tutti's libraries (libtutti.so and
# libnccl.so.2) are compared with NVIDIA's by nm, and so is
# src/api/exports.txt, the list the aliases are made from. NEWER: the
# functions of releases after VERSION that tutti exports beyond it (checked
# against an older wheel). Where the wheel cannot be fetched the test says
# so and exits 77, which ctest reports as skipped: never a pass.
#   exports.sh SRC LIBTUTTI LIBNCCL VERSION [NEWER...]
set -uo pipefail
src=$1 libtutti=$2 libnccl=$3 version=$4
shift 4
newer=("$@")
if ! nv=$(bash "$src/tests/abi/nvidia_nccl.sh" "$version"); then
  echo "SKIPPED: NVIDIA's NCCL $version could not be fetched from PyPI here (no network, or the"
  echo "         index lacks nvidia-nccl-cu13==$version): the export check against it DID NOT RUN"
  exit 77
fi
defined() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWV]$/ {print $3}' | grep -E '^p?nccl' | sort -u; }
defined "$nv/lib/libnccl.so.2" >nvidia.syms
n=$(wc -l <nvidia.syms)
[ "$n" -gt 100 ] || { echo "FAILED: only $n nccl symbols in NVIDIA's library"; exit 1; }
# What tutti should export: NVIDIA's symbols and the later releases' functions.
cp nvidia.syms want.syms
for f in "${newer[@]}"; do
  grep -qx "$f" nvidia.syms && { echo "FAILED: $f is in NVIDIA's $version already"; exit 1; }
  printf '%s\np%s\n' "$f" "$f" >>want.syms
done
sort -u -o want.syms want.syms
fails=0
for lib in "$libtutti" "$libnccl"; do
  defined "$lib" >tutti.syms
  missing=$(comm -23 want.syms tutti.syms)
  extra=$(comm -13 want.syms tutti.syms)
  if [ -n "$missing" ]; then
    echo "FAIL $(basename "$lib") lacks $(echo "$missing" | wc -l) of NVIDIA's $version symbols: $(echo $missing)"
    fails=$((fails + 1))
  else
    echo "ok   $(basename "$lib") exports all $n of NVIDIA's $version nccl/pnccl symbols${newer:+ and ${#newer[@]} later}"
  fi
  [ -z "$extra" ] || { echo "FAIL $(basename "$lib") exports what NVIDIA's does not: $(echo $extra)"; fails=$((fails + 1)); }
done
grep -v '^#' "$src/src/api/exports.txt" | sed '/^$/d' | sort >list.syms
grep -v '^pnccl' want.syms >want.plain
if ! diff -q list.syms want.plain >/dev/null; then
  echo "FAIL src/api/exports.txt differs from NVIDIA's $version exports: $(diff list.syms want.plain | grep '^[<>]' | tr '\n' ' ')"
  fails=$((fails + 1))
else
  echo "ok   src/api/exports.txt lists NVIDIA's $version functions ($(wc -l <list.syms))"
fi
echo "exports ($version): $((3 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
