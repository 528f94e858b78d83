#!/usr/bin/env bash
# A C program compiled against NVIDIA's nccl.h of release VERSION (from
# PyPI, as nvidia_nccl.sh fetches it) and linked to libtutti.so:
# abi_nvidia.c, as abi.nvidia_header builds it against the CUDA toolkit's
# 2.28 header. Where the wheel cannot be fetched the test says so and exits
# 77, which ctest reports as skipped: never a pass.
#   header_nvidia.sh SRC LIBTUTTI CC CUDA_INCLUDE VERSION
set -uo pipefail
src=$1 lib=$2 cc=$3 cuda_inc=$4 version=$5
if ! nv=$(bash "$src/tests/abi/nvidia_nccl.sh" "$version"); then
  echo "SKIPPED: NVIDIA's NCCL $version could not be fetched from PyPI here (no network, or the"
  echo "         index lacks nvidia-nccl-cu13==$version): its header generation DID NOT RUN"
  exit 77
fi
minor=$(echo "$version" | cut -d. -f2)
grep -q "^#define NCCL_MINOR $minor\$" "$nv/include/nccl.h" || { echo "FAILED: $nv/include/nccl.h is not $version"; exit 1; }
flags="-std=gnu11 -Wall -Wextra -Werror -Wno-deprecated-declarations -Wno-missing-field-initializers"
$cc $flags -I"$src/include" -I"$src/tests/abi" -c "$src/tests/abi/abi_tutti.c" -o abi_tutti.o || exit 1
# NVIDIA's directory first and tutti's not at all: its nccl.h is the one seen.
$cc $flags -I"$nv/include" -I"$cuda_inc" -I"$src/tests/abi" -c "$src/tests/abi/abi_nvidia.c" -o abi_nvidia.o || exit 1
$cc abi_nvidia.o abi_tutti.o "$lib" -Wl,-rpath,"$(dirname "$lib")" -pthread -o abi_nv || exit 1
./abi_nv
rc=$?
# The host side of nccl_device.h (C++), against NVIDIA's library for the
# pure helpers.
cxx=${CXX:-$(command -v g++ || command -v c++)}
[ -n "$cxx" ] || { echo "FAILED: no C++ compiler for the nccl_device.h program"; exit 1; }
$cxx -std=c++17 -Wall -Wextra -Werror -Wno-missing-field-initializers -Wno-unused-function -I"$nv/include" -I"$cuda_inc" \
  "$src/tests/abi/abi_device.cc" "$lib" -Wl,-rpath,"$(dirname "$lib")" -ldl -pthread -o abi_device || exit 1
./abi_device "$nv/lib/libnccl.so.2" || rc=1
exit $rc
