#!/usr/bin/env bash
# A C program compiled against NVIDIA's NCCL 2.30.7 nccl.h (from PyPI, as
# nvidia_nccl.sh fetches it) and linked to libtutti.so: abi_nvidia.c, as
# abi.nvidia_header builds it against the CUDA toolkit's 2.28 header.
#   header230.sh SRC LIBTUTTI CC CUDA_INCLUDE
set -uo pipefail
src=$1 lib=$2 cc=$3 cuda_inc=$4
nv=$(bash "$src/tests/abi/nvidia_nccl.sh" 2.30.7) || { echo "FAILED: NVIDIA's NCCL 2.30.7 could not be fetched"; exit 1; }
grep -q '^#define NCCL_MINOR 30' "$nv/include/nccl.h" || { echo "FAILED: $nv/include/nccl.h is not 2.30"; exit 1; }
flags="-std=gnu11 -Wall -Wextra -Werror -Wno-deprecated-declarations -Wno-missing-field-initializers"
$cc $flags -I"$src/include" -I"$src/tests/abi" -c "$src/tests/abi/abi_tutti.c" -o abi_tutti.o || exit 1
# NVIDIA's directory first and tutti's not at all: its nccl.h is the one seen.
$cc $flags -I"$nv/include" -I"$cuda_inc" -I"$src/tests/abi" -c "$src/tests/abi/abi_nvidia.c" -o abi_nvidia.o || exit 1
$cc abi_nvidia.o abi_tutti.o "$lib" -Wl,-rpath,"$(dirname "$lib")" -pthread -o abi230 || exit 1
./abi230
rc=$?
# The host side of nccl_device.h (C++), against NVIDIA's library for the
# pure helpers.
cxx=${CXX:-$(command -v g++ || command -v c++)}
[ -n "$cxx" ] || { echo "FAILED: no C++ compiler for the nccl_device.h program"; exit 1; }
$cxx -std=c++17 -Wall -Wextra -Werror -Wno-missing-field-initializers -Wno-unused-function -I"$nv/include" -I"$cuda_inc" \
  "$src/tests/abi/abi_device.cc" "$lib" -Wl,-rpath,"$(dirname "$lib")" -ldl -pthread -o abi_device || exit 1
./abi_device "$nv/lib/libnccl.so.2" || rc=1
exit $rc
