#!/usr/bin/env bash
# Installs the build under test into a temporary prefix (also as libnccl.so.2,
# the install component "nccl") and builds consumers three ways: CMake
# find_package (shared and static), pkg-config, and a plain -lnccl link
# against the NCCL-named install. Everything built against the prefix, and
# every installed program, runs without LD_LIBRARY_PATH.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR LIBDIR
set -euo pipefail
src=$1
build=$2
libdir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LD_LIBRARY_PATH
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake --install "$build" --prefix "$work/prefix" --component nccl >/dev/null
lib=$work/prefix/$libdir
for f in include/nccl.h "$libdir/libtutti.so.0" "$libdir/libtutti.a" "$libdir/libnccl.so.2" \
  "$libdir/pkgconfig/tutti.pc" "$libdir/cmake/tutti/tuttiConfig.cmake"; do
  [ -e "$work/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
echo "installed: headers, libtutti.so.0, libtutti.a, libnccl.so.2, tutti.pc, CMake package"

# CMake puts the imported library's directory in the consumers' RUNPATH.
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
"$work/consumer/consumer_static"

if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH="$lib/pkgconfig"
  # Outside the system's libdirs tutti.pc adds an rpath to its libdir.
  grep -q -- "-Wl,-rpath," <<<"$(pkg-config --libs tutti)" || { echo "FAIL: tutti.pc has no rpath"; exit 1; }
  cc "$src/tests/install/consumer/main.c" $(pkg-config --cflags --libs tutti) -o "$work/pc"
  cc "$src/tests/install/consumer/ranks.c" $(pkg-config --cflags --libs tutti) -o "$work/pc_ranks"
  "$work/pc"
else
  cc "$src/tests/install/consumer/main.c" -I"$work/prefix/include" -L"$lib" -Wl,-rpath,"$lib" -ltutti -o "$work/pc"
  cc "$src/tests/install/consumer/ranks.c" -I"$work/prefix/include" -L"$lib" -Wl,-rpath,"$lib" -ltutti -o "$work/pc_ranks"
  "$work/pc"
  echo "(pkg-config not installed: linked with the flags tutti.pc lists)"
fi

# A program that asks the loader for NCCL by name gets tutti.
cc "$src/tests/install/consumer/main.c" -I"$work/prefix/include" -L"$lib" -lnccl -o "$work/asnccl"
LD_LIBRARY_PATH="$lib" "$work/asnccl"
LD_LIBRARY_PATH="$lib" ldd "$work/asnccl" >"$work/ldd.txt"
grep -q "libnccl.so.2 => $lib/libnccl.so.2" "$work/ldd.txt" || { echo "FAIL: not loaded as libnccl.so.2"; cat "$work/ldd.txt"; exit 1; }

# The installed programs, from the prefix.
bash "$src/tests/install/check_installed.sh" "$work/prefix" "$libdir" "$work/pc_ranks"
echo "install: passed"
