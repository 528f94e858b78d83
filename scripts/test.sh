#!/usr/bin/env bash
# Builds tutti and runs the whole test suite with ctest (what CI runs):
# first the unit, process and launcher tests under ASan+UBSan and under TSan
# (TUTTI_SANITIZERS=0 skips them), then everything on the release build,
# whose ctest summary closes the output.
set -euo pipefail
cd "$(dirname "$0")/.."
# Flight records the fault tests leave (docs/ras.md) go under the build
# tree, not into /tmp.
export TUTTI_RECORD_DIR=${TUTTI_RECORD_DIR:-$PWD/build-ras-records}
mkdir -p "$TUTTI_RECORD_DIR"
# Twice as many tests as cores at once: most wait more than they compute,
# and those that keep cores busy say so (PROCESSORS, tests/CMakeLists.txt).
jobs=$(($(nproc) * 2))

# "N passed, M failed of T" from a ctest log's summary line.
summary() {
  sed -n 's/^[0-9]*% tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\)$/\1 \2/p' "$1" |
    tail -n 1 | { read -r failed total && echo "$((total - failed)) passed, $failed failed of $total"; } ||
    echo "no ctest summary in $1"
}

# For every test ctest skipped in the last run: its name and the line it
# printed saying why.
skipped_reasons() {
  local log=Testing/Temporary/LastTest.log
  [ -f "$log" ] || return 0
  awk '/^[0-9]+\/[0-9]+ Test: /{name=$3} /SKIPPED|[Ss]kipped:/{if (name != "" && !(name in seen)) {seen[name]=1; sub(/^[ \t]+/, ""); print "skipped: " name ": " $0}}' "$log"
}
# Each stage's time, printed at the end with the slowest tests.
stages=()
logs=()
stage_start=$SECONDS
stage_done() {
  stages+=("$(printf '%6d s  %s' "$((SECONDS - stage_start))" "$1")")
  stage_start=$SECONDS
}

# The slowest tests of a ctest log ("N/M Test #K: name ....   Passed   T sec").
# awk keeps the first lines and reads the rest: `head` would leave sort to a
# SIGPIPE, which pipefail makes this script's exit status.
slowest() {
  sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$1" |
    sort -rn | awk -v n="$2" -v tag="$3" 'NR <= n {printf "%8.1f s  %s%s\n", $1, tag, $2}'
}
report() {
  echo "== stage times"
  printf '%s\n' "${stages[@]}"
  echo "== the slowest tests"
  { for log in "$@"; do
    [ -f "$log" ] && slowest "$log" 10 "$(basename "$(dirname "$log")"): "
  done; } | sort -rn | awk 'NR <= 10'
}

if [ "${TUTTI_SANITIZERS:-1}" = 1 ]; then
  for san in address,undefined thread; do
    dir=build-san-${san%%,*}
    # The network transport's end-to-end matrix once (a context per
    # communicator, three ranks as threads: its proxies race if anything does),
    # and the one-sided tests (service threads, puts and waits from any thread);
    # RAS on one host (its listener reads what calls write, atomics only).
    tests='unit\.|net\.(plugin|bw_smoke|cut|socket|matrix\.v11|rma\.v11)|coll\.procs\.default|coll\.withdraw\.|coll\.grow\.|coll\.rma\.tcp|coll\.rma_faults\.|tcp\.two\.|tuttirun\.|check\.|ddp\.(equiv|resume)|ras\.(stall|slow|dead|two|record|disabled|verdicts|squat|forged_size|forged_lines|idle|symlink|other_user|encrypted)'
    # TSan cannot follow a multi-threaded parent into a fork that starts
    # threads (the TCP proxy), so the TCP matrix (plain and encrypted) and the
    # attacked job run under ASan only, as do the fuzzers (their decoders are
    # single-threaded).
    [ "$san" = thread ] || tests="$tests|tcp\.procs\.(default|encrypted)|fuzz\.|hostile\."
    # Nor can it follow an order that runs through shared memory mapped at
    # another address (each rank maps its own view, and other processes'):
    # a window reset by its owner, then (after a collective) written by the
    # service thread, looks like a race. The one-sided tests over shared
    # memory run under ASan; over TCP and the network transport under both.
    [ "$san" = thread ] || tests="$tests|coll\.rma\.(threads|procs)"
    # The launcher's comparisons with torchrun test Python and torch more
    # than the launcher's own code: the release build runs them.
    skip='tuttirun\.torchrun'
    # The schedules and the reduction kernels run in one thread: ASan and
    # the release build check them; under TSan they took 320 s for nothing.
    [ "$san" = thread ] && skip="$skip|unit\.(schedules|reduce)$"
    echo "== sanitizer build: $san ($dir)"
    # The device executor's CUDA code is compiled (and run on GPUs) by the
    # release build; the sanitizers check the host side.
    BUILD_DIR=$dir BUILD_TYPE=Debug CMAKE_ARGS="-DTUTTI_SANITIZE=$san -DTUTTI_CUDA=OFF" \
      bash scripts/build.sh >/dev/null
    stage_done "build $dir"
    start=$SECONDS
    if ! (cd "$dir" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      TSAN_OPTIONS=halt_on_error=1 ctest -j"$jobs" --output-on-failure -R "$tests" -E "$skip" \
      >ctest.log 2>&1); then
      cat "$dir/ctest.log"
      echo "== sanitizer build: $san: FAILED ($(summary "$dir/ctest.log"))"
      exit 1
    fi
    echo "== sanitizer build: $san: $(summary "$dir/ctest.log") in $((SECONDS - start)) s"
    stage_done "tests $dir ($(summary "$dir/ctest.log"))"
    logs+=("$dir/ctest.log")
  done
  # The fuzzers ran under ASan, where what they find shows; the release
  # build would repeat their 10 s each without its checks.
  CTEST_EXCLUDE=${CTEST_EXCLUDE:-'^fuzz\.'}
fi
# With no GPU here the device code is compiled to PTX only: every line of it
# through the compiler's front end and NVVM, without the assembler's machine
# code, which nothing here could run (mapped.cu alone: 128 s -> 52 s on 2
# cores). A GPU machine, the GPU suite and the packages build machine code.
if [ -z "${TUTTI_CUDA_ARCHS:-}" ] && ! nvidia-smi -L >/dev/null 2>&1; then
  TUTTI_CUDA_ARCHS=90-virtual
fi
CMAKE_ARGS="${CMAKE_ARGS:-}${TUTTI_CUDA_ARCHS:+ -DTUTTI_CUDA_ARCHS=$TUTTI_CUDA_ARCHS}" bash scripts/build.sh
out=${BUILD_DIR:-build}
stage_done "build $out"
cd "$out"
rc=0
ctest --output-on-failure -j"$jobs" ${CTEST_EXCLUDE:+-E "$CTEST_EXCLUDE"} ${CTEST_ARGS:-} 2>&1 |
  tee ctest.log || rc=$?
stage_done "tests $out ($(summary ctest.log))"
# Skipped tests say why on the console (the GPU suite without a GPU, hosts
# that cannot be made), not only in ctest's log.
skipped_reasons
cd - >/dev/null
report "${logs[@]}" "$out/ctest.log" || true
exit $rc
