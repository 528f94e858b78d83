#!/usr/bin/env bash
# tutti exports every function NVIDIA's libnccl.so.2 exports (2.30.7, from
# PyPI): both of tutti's libraries (libtutti.so and libnccl.so.2) are
# compared with NVIDIA's by nm, and so is src/api/exports.txt, the list the
# aliases are made from.
#   exports.sh SRC LIBTUTTI LIBNCCL
set -uo pipefail
src=$1 libtutti=$2 libnccl=$3
nv=$(bash "$src/tests/abi/nvidia_nccl.sh" 2.30.7) || { echo "FAILED: NVIDIA's NCCL 2.30.7 could not be fetched"; exit 1; }
defined() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWV]$/ {print $3}' | grep -E '^p?nccl' | sort -u; }
defined "$nv/lib/libnccl.so.2" >nvidia.syms
n=$(wc -l <nvidia.syms)
[ "$n" -gt 100 ] || { echo "FAILED: only $n nccl symbols in NVIDIA's library"; exit 1; }
fails=0
for lib in "$libtutti" "$libnccl"; do
  defined "$lib" >tutti.syms
  missing=$(comm -23 nvidia.syms tutti.syms)
  extra=$(comm -13 nvidia.syms tutti.syms)
  if [ -n "$missing" ]; then
    echo "FAIL $(basename "$lib") lacks $(echo "$missing" | wc -l) of NVIDIA's $n symbols: $(echo $missing)"
    fails=$((fails + 1))
  else
    echo "ok   $(basename "$lib") exports all $n of NVIDIA's nccl/pnccl symbols"
  fi
  [ -z "$extra" ] || { echo "FAIL $(basename "$lib") exports what NVIDIA's does not: $(echo $extra)"; fails=$((fails + 1)); }
done
grep -v '^#' "$src/src/api/exports.txt" | sed '/^$/d' | sort >list.syms
grep -v '^pnccl' nvidia.syms >nvidia.plain
if ! diff -q list.syms nvidia.plain >/dev/null; then
  echo "FAIL src/api/exports.txt differs from NVIDIA's exports: $(diff list.syms nvidia.plain | grep '^[<>]' | tr '\n' ' ')"
  fails=$((fails + 1))
else
  echo "ok   src/api/exports.txt lists NVIDIA's $(wc -l <list.syms) functions"
fi
echo "exports: $((3 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
