#!/usr/bin/env bash
# Makes a Python environment's PyTorch load tutti as its NCCL, and back.
# PyTorch's pip wheels load NCCL through an RPATH into
# site-packages/nvidia/nccl/lib/libnccl.so.2, so LD_LIBRARY_PATH alone does
# not reach them; this replaces that file (keeping the original beside it).
#   scripts/torch-use-tutti.sh install [PYTHON] [LIBTUTTI]   (default: python3, build-gpu/libtutti.so.0)
#   scripts/torch-use-tutti.sh restore [PYTHON]
#   scripts/torch-use-tutti.sh status  [PYTHON]
# For one run only, no install: LD_PRELOAD=/path/libtutti.so.0 python3 train.py
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-status}
py=${2:-python3}
lib=${3:-$PWD/build-gpu/libtutti.so.0}
dir=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) || {
  echo "$py has no nvidia-nccl package (site-packages/nvidia/nccl): nothing to replace" >&2
  exit 1
}
target=$dir/libnccl.so.2
backup=$dir/libnccl.so.2.nvidia
case $cmd in
  install)
    [ -f "$lib" ] || { echo "no library at $lib: build it first (bash scripts/gpu-test.sh)" >&2; exit 1; }
    [ -f "$backup" ] || cp -p "$target" "$backup"
    cp "$(readlink -f "$lib")" "$target.tmp" && mv "$target.tmp" "$target"
    echo "tutti installed as $target (NVIDIA's NCCL kept as $backup)"
    ;;
  restore)
    [ -f "$backup" ] || { echo "no saved NCCL at $backup: nothing to restore" >&2; exit 1; }
    mv "$backup" "$target"
    echo "NVIDIA's NCCL restored at $target"
    ;;
  status)
    if [ -f "$backup" ]; then echo "tutti ($target), NVIDIA's NCCL saved as $backup"; else echo "NVIDIA's NCCL ($target)"; fi
    ;;
  *)
    echo "usage: $0 install|restore|status [PYTHON] [LIBTUTTI]" >&2
    exit 2
    ;;
esac
