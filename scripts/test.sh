#!/usr/bin/env bash
# Builds tutti and runs the whole test suite with ctest (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" ${CTEST_ARGS:-}
