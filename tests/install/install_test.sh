#!/usr/bin/env bash
# Installs the build under test into a temporary prefix (also as libnccl.so.2,
# the install component "nccl") and builds consumers three ways: CMake
# find_package (shared and static), pkg-config, and a plain -lnccl link
# against the NCCL-named install.
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake --install "$build" --prefix "$work/prefix" --component nccl >/dev/null
lib=$(ls -d "$work"/prefix/lib*)
for f in include/nccl.h "$(basename "$lib")/libtutti.so.0" "$(basename "$lib")/libtutti.a" \
  "$(basename "$lib")/libnccl.so.2" "$(basename "$lib")/pkgconfig/tutti.pc" \
  "$(basename "$lib")/cmake/tutti/tuttiConfig.cmake"; do
  [ -e "$work/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
echo "installed: headers, libtutti.so.0, libtutti.a, libnccl.so.2, tutti.pc, CMake package"

cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$lib" "$work/consumer/consumer"
"$work/consumer/consumer_static"

if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH="$lib/pkgconfig"
  cc "$src/tests/install/consumer/main.c" $(pkg-config --cflags --libs tutti) -o "$work/pc"
  "$work/pc" # tutti.pc's rpath: no LD_LIBRARY_PATH needed
else
  cc "$src/tests/install/consumer/main.c" -I"$work/prefix/include" -L"$lib" -ltutti -o "$work/pc"
  LD_LIBRARY_PATH="$lib" "$work/pc"
  echo "(pkg-config not installed: linked with the flags tutti.pc lists)"
fi

# A program that asks the loader for NCCL by name gets tutti.
cc "$src/tests/install/consumer/main.c" -I"$work/prefix/include" -L"$lib" -lnccl -o "$work/asnccl"
LD_LIBRARY_PATH="$lib" "$work/asnccl"
LD_LIBRARY_PATH="$lib" ldd "$work/asnccl" >"$work/ldd.txt"
grep -q "libnccl.so.2 => $lib/libnccl.so.2" "$work/ldd.txt" || { echo "FAIL: not loaded as libnccl.so.2"; cat "$work/ldd.txt"; exit 1; }
# Installed programs run from the prefix without LD_LIBRARY_PATH.
for prog in tutti-ddp tutti-check; do
  [ -x "$work/prefix/bin/$prog" ] || { echo "FAIL: $prog not installed"; exit 1; }
  if env -u LD_LIBRARY_PATH ldd "$work/prefix/bin/$prog" | grep -q "libtutti.so.0 => not found"; then
    echo "FAIL: installed $prog cannot find libtutti.so.0"
    exit 1
  fi
  env -u LD_LIBRARY_PATH "$work/prefix/bin/$prog" --help >/dev/null 2>&1 ||
    { echo "FAIL: installed $prog --help failed"; exit 1; }
done
env -u LD_LIBRARY_PATH "$work/prefix/bin/tutti-perf" allreduce -t 2 -b 8 -e 64 --device host >/dev/null ||
  { echo "FAIL: installed tutti-perf did not run"; exit 1; }
echo "install: 7 passed, 0 failed"
