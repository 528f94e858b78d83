#!/usr/bin/env bash
# Makes the Debian packages from the build under test (cpack packages what is
# built), checks their metadata and file lists, unpacks them into a temporary
# root (nothing is installed into the system) and builds consumers against
# that tree with pkg-config and with CMake, then runs them and every program
# of tutti-tools from there, without LD_LIBRARY_PATH.
# Exits 77 (skipped) where cpack or dpkg-deb is missing.
# Usage: deb_test.sh SOURCE_DIR BUILD_DIR LIBDIR CPACK VERSION NCCL_PACKAGE(ON|OFF)
set -euo pipefail
src=$1
build=$2
libdir=$3
cpack=$4
version=$5
nccl=$6
for tool in "$cpack" dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIPPED: $tool not found, Debian packages not tested"; exit 77; }
done
fail() {
  echo "FAIL: $*"
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LD_LIBRARY_PATH

"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkgs" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB"; }
arch=$(dpkg --print-architecture 2>/dev/null || sed -n 's/^set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE "\(.*\)")/\1/p' "$build/CPackConfig.cmake")
packages="libtutti0 libtutti-dev tutti-tools"
[ "$nccl" = ON ] && packages="$packages libtutti-nccl2"
n=$(ls "$work"/pkgs/*.deb | wc -l)
[ "$n" -eq "$(echo $packages | wc -w)" ] || { ls "$work/pkgs"; fail "$n packages, expected: $packages"; }

# What each package holds, as patterns over its files (directories aside):
# every file matches one, every pattern matches a file.
l=/usr/$libdir
expect_libtutti0="$l/libtutti\.so\.0 $l/libtutti\.so\.0\.[0-9.]+ $l/libnccl-net-tutti\.so"
expect_libtutti_dev="/usr/include/nccl\.h $l/libtutti\.so $l/libtutti\.a $l/pkgconfig/tutti\.pc
  $l/cmake/tutti/tuttiConfig\.cmake $l/cmake/tutti/tuttiConfigVersion\.cmake
  $l/cmake/tutti/tuttiTargets\.cmake $l/cmake/tutti/tuttiTargets-[a-z]+\.cmake"
expect_tutti_tools="/usr/bin/tuttirun /usr/bin/tutti-perf /usr/bin/tutti-plot /usr/bin/tutti-check /usr/bin/tutti-ras /usr/bin/tutti-ddp"
expect_libtutti_nccl2="$l/tutti/libnccl\.so\.2 $l/tutti/libnccl\.so\.2\.[0-9.]+"

for p in $packages; do
  deb=$work/pkgs/${p}_${version}_${arch}.deb
  [ -f "$deb" ] || { ls "$work/pkgs"; fail "no $(basename "$deb")"; }
  [ "$(dpkg-deb -f "$deb" Package)" = "$p" ] || fail "$deb: Package is not $p"
  [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "$p: Version is not $version"
  [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$p: Architecture is not $arch"
  [ -n "$(dpkg-deb -f "$deb" Maintainer)" ] || fail "$p: no Maintainer"
  [ "$(dpkg-deb -f "$deb" Description | wc -l)" -gt 2 ] || fail "$p: no long description"
  depends=$(dpkg-deb -f "$deb" Depends)
  if grep -qi 'cuda\|nvidia' <<<"$depends"; then fail "$p depends on CUDA: $depends"; fi
  case $p in
    libtutti-dev | tutti-tools)
      grep -q "libtutti0 (= $version)" <<<"$depends" || fail "$p: Depends '$depends' lacks libtutti0 (= $version)" ;;
  esac
  case $p in
    libtutti0 | tutti-tools | libtutti-nccl2)
      grep -q "libc6" <<<"$depends" || fail "$p: Depends '$depends' lacks libc6" ;;
  esac
  echo "$p $version $arch: Depends: $depends"

  dpkg-deb -c "$deb" >"$work/list"
  if grep -v ' root/root ' "$work/list"; then fail "$p: files not owned by root"; fi
  awk '$1 !~ /^d/ { print substr($6, 2) }' "$work/list" >"$work/files"
  var=expect_${p//-/_}
  patterns=${!var}
  while read -r f; do
    ok=0
    for pat in $patterns; do
      if [[ $f =~ ^$pat$ ]]; then ok=1; fi
    done
    [ $ok = 1 ] || fail "$p holds $f, which is not its"
  done <"$work/files"
  for pat in $patterns; do
    grep -Eq "^$pat$" "$work/files" || fail "$p lacks a file like $pat"
  done
  dpkg-deb -x "$deb" "$work/root"
done
deb0=$work/pkgs/libtutti0_${version}_${arch}.deb
grep -qx 'activate-noawait ldconfig' <<<"$(dpkg-deb -I "$deb0" triggers)" || fail "libtutti0 has no ldconfig trigger"
grep -q "^libtutti 0 libtutti0 " <<<"$(dpkg-deb -I "$deb0" shlibs)" || fail "libtutti0 has no shlibs entry"
echo "packages: names, versions, architecture, Depends, file lists, trigger and shlibs as expected"

root=$work/root
pc=$root/usr/$libdir/pkgconfig/tutti.pc
grep -qx 'prefix=/usr' "$pc" || fail "tutti.pc does not name /usr"
if grep '^Libs' "$pc" | grep rpath; then fail "the packaged tutti.pc adds an rpath to a system directory"; fi

# pkg-config, with the prefix moved to the unpacked tree. The packaged .pc
# adds no rpath (its libdir is a system one); here the tree is not, so the
# consumers name the libdir themselves.
if command -v pkg-config >/dev/null 2>&1; then
  pc_config() { PKG_CONFIG_LIBDIR=$root/usr/$libdir/pkgconfig pkg-config --define-variable=prefix="$root/usr" "$@"; }
  flags="$(pc_config --cflags --libs tutti) -Wl,-rpath,$(pc_config --variable=libdir tutti)"
else
  flags="-I$root/usr/include -L$root/usr/$libdir -ltutti -Wl,-rpath,$root/usr/$libdir"
  echo "(pkg-config not installed: linked with the flags tutti.pc lists)"
fi
cc "$src/tests/install/consumer/main.c" $flags -o "$work/pc"
cc "$src/tests/install/consumer/ranks.c" $flags -o "$work/pc_ranks"
"$work/pc"
grep -q "libtutti.so.0 => $root/usr/$libdir/libtutti.so.0" <<<"$(ldd "$work/pc")" || fail "pkg-config consumer loads another libtutti"

# CMake's find_package, against the unpacked tree.
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
"$work/consumer/consumer_static"
grep -q "libtutti.so.0 => $root/usr/$libdir/libtutti.so.0" <<<"$(ldd "$work/consumer/consumer")" ||
  fail "CMake consumer loads another libtutti"
# A machine without the CUDA toolkit still finds the package (the shared
# library needs none).
cmake -S "$src/tests/install/consumer" -B "$work/nocuda" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON --no-warn-unused-cli >/dev/null || fail "find_package(tutti) needs the CUDA toolkit"
cmake --build "$work/nocuda" --target consumer >/dev/null
"$work/nocuda/consumer"

bash "$src/tests/install/check_installed.sh" "$root/usr" "$libdir" "$work/pc_ranks"

# libtutti-nccl2: a program built against NCCL gets tutti when the loader is
# pointed at the package's directory.
if [ "$nccl" = ON ]; then
  dir=$root/usr/$libdir/tutti
  grep -q 'SONAME.*\[libnccl\.so\.2\]' <<<"$(readelf -d "$dir/libnccl.so.2")" || fail "libnccl.so.2 has another soname"
  cc "$src/tests/install/consumer/main.c" -I"$root/usr/include" -L"$dir" -l:libnccl.so.2 -o "$work/asnccl"
  LD_LIBRARY_PATH=$dir "$work/asnccl"
  grep -q "libnccl.so.2 => $dir/libnccl.so.2" <<<"$(LD_LIBRARY_PATH=$dir ldd "$work/asnccl")" ||
    fail "not loaded from $dir"
fi
echo "install.deb: passed"
