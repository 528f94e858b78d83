#!/usr/bin/env bash
# Prints the directory holding NVIDIA's NCCL VERSION (lib/libnccl.so.2 and
# include/), unpacked from the nvidia-nccl-cu13 wheel on PyPI into a cache
# that later runs reuse ($TUTTI_CACHE, else ~/.cache/tutti). Exits 1 with a
# sentence when the wheel cannot be fetched.
set -uo pipefail
version=${1:-2.30.7}
cache=${TUTTI_CACHE:-${HOME:-/tmp}/.cache/tutti}
dir=$cache/nvidia-nccl-$version
if [ -f "$dir/nvidia/nccl/lib/libnccl.so.2" ] && [ -f "$dir/nvidia/nccl/include/nccl.h" ]; then
  echo "$dir/nvidia/nccl"
  exit 0
fi
mkdir -p "$cache" || exit 1
tmp=$(mktemp -d "$cache/fetch.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
py=$(command -v python3 || command -v python)
for try in 1 2 3; do
  # Wheels name the oldest glibc they need: 2.31 carries manylinux_2_18, 2.32 manylinux_2_27.
  if "$py" -m pip download --no-deps --only-binary=:all: --platform manylinux_2_18_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$tmp" "nvidia-nccl-cu13==$version" >"$tmp/pip.log" 2>&1; then
    break
  fi
  [ "$try" = 3 ] && { tail -n 5 "$tmp/pip.log" >&2; echo "cannot fetch nvidia-nccl-cu13==$version from PyPI (pip download failed 3 times)" >&2; exit 1; }
  sleep 5
done
whl=$(ls "$tmp"/nvidia_nccl_cu13-*.whl 2>/dev/null | head -n 1)
[ -n "$whl" ] || { echo "pip saved no nvidia_nccl_cu13 wheel" >&2; exit 1; }
"$py" - "$whl" "$tmp/unpacked" <<'PY' || exit 1
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("nvidia/nccl/")])
PY
rm -rf "$dir"
mv "$tmp/unpacked" "$dir" || exit 1
echo "$dir/nvidia/nccl"
