#!/usr/bin/env bash
# Configures and builds tutti into build/ (Release), installing the few
# Debian packages the build and its tests need when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
# Not for the build: ncclSetEncryption loads OpenSSL 3 at run time, and its
# tests (unit.seal, netns.enc.*) need it there.
ldconfig -p 2>/dev/null | grep -q 'libcrypto\.so\.3 ' || need+=(libssl3)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >/dev/null
# TARGETS: only these (the GPU suite builds what it runs).
cmake --build "$BUILD_DIR" -j"$(nproc)" ${TARGETS:+--target $TARGETS}
