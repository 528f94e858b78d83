#!/usr/bin/env bash
# Builds tutti and runs the main job: a 4-rank allreduce benchmark on this
# host (ranks as threads over shared memory), every size checked for
# correctness, in nccl-tests' format.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
exec "${BUILD_DIR:-build}"/tools/tutti-perf/tutti-perf allreduce -t 4 -b 16 -e 64M -f 4 -c 1 "$@"
