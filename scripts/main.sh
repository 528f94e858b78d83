#!/usr/bin/env bash
# Builds tutti and runs the main job: a 4-rank allreduce benchmark on this
# host (ranks as threads over shared memory), every size checked for
# correctness, in nccl-tests' format. The build shows its progress; its
# full output is kept in build/build.log.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
mkdir -p "$dir"
log="$dir/build.log"
cuda=0
if command -v nvcc >/dev/null 2>&1; then
  case "${CMAKE_ARGS:-}" in *TUTTI_CUDA=OFF*) ;; *) cuda=1 ;; esac
fi
if [ "$cuda" = 1 ]; then
  echo "building tutti in $dir/ with the GPU executor (nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))."
  echo "  A first build takes about 2.5 minutes on 2 cores, most of it nvcc compiling the"
  echo "  device code; later builds redo only what changed."
  echo "  CMAKE_ARGS=-DTUTTI_CUDA=OFF builds the CPU-only library in about 20 s."
else
  why="no nvcc on PATH"
  command -v nvcc >/dev/null 2>&1 && why="TUTTI_CUDA=OFF"
  echo "building tutti in $dir/, CPU only ($why): about 20 s on 2 cores the first time."
fi
# One line per tenth of the build and one when the device code starts, so
# that a slow step is never silent (read line by line: awk would read the
# pipe in blocks and print late).
progress() {
  local cuda=0 next=0 line pct
  local ncu
  ncu=$(find src/device -name '*.cu' | wc -l)
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [[ $line == *"Building CUDA object CMakeFiles/tutti_objects.dir/src/device/"* ]]; then
      [ "$cuda" = 0 ] &&
        printf '  [%3ds] compiling the device code (CUDA), %d files: the long part of a first build\n' \
          "$SECONDS" "$ncu"
      cuda=$((cuda + 1))
      line=${line##*tutti_objects.dir/src/device/}
      printf '  [%3ds]   device code %d/%d: %s\n' "$SECONDS" "$cuda" "$ncu" "${line%.o}"
      continue
    fi
    # The libraries' links (the device code's included) take tens of
    # seconds with no other line: say what is being linked.
    if [[ $line =~ Linking\ [A-Z+]+\ (shared|static)\ library\ (lib(tutti|nccl)\.[a-z.0-9]*)$ ]]; then
      printf '  [%3ds] linking %s\n' "$SECONDS" "${BASH_REMATCH[2]}"
    fi
    if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      pct=$((10#${BASH_REMATCH[1]}))
      if [ "$pct" -ge "$next" ]; then
        printf '  [%3ds] %3d%%\n' "$SECONDS" "$pct"
        while [ "$next" -le "$pct" ]; do next=$((next + 10)); done
      fi
    fi
  done
}
SECONDS=0
: >"$log"
if ! bash scripts/build.sh 2>&1 | progress; then
  echo "the build failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "built in $SECONDS s; running a 4-rank allreduce benchmark (every size verified):"
exec "$dir"/tools/tutti-perf/tutti-perf allreduce -t 4 -b 16 -e 64M -f 4 -c 1 "$@"
