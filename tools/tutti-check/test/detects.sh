#!/bin/sh
# Problems make tutti-check fail (exit 1) and print the fix: a shared-memory
# file system under 1 GB (its size faked), and none at all (--shm-dir
# pointing at a directory that does not exist).
set -u
bin=$1
out=${TMPDIR:-/tmp}/tutti-check-detects.$$
trap 'rm -f "$out" "$out.json"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

TUTTI_CHECK_SHM_BYTES=67108864 "$bin" --json "$out.json" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a 64 MB /dev/shm: exit $rc, expected 1"
grep -q '^\[FAIL\] shared memory: /dev/shm has 64 MB' "$out" || fail "no shared-memory failure"
grep -q 'fix: start the container with --shm-size=8g' "$out" || fail "no fix printed"
grep -Eq '^tutti-check: FAILED \(1 of [0-9]+ checks failed' "$out" || fail "no FAILED verdict"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["verdict"]=="FAILED" and r["failed"]==1' "$out.json" ||
  fail "the JSON report does not say FAILED"

"$bin" --quiet --shm-dir /nonexistent/shm >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a missing shm directory: exit $rc, expected 1"
grep -q '/nonexistent/shm does not exist' "$out" || fail "the missing directory is not named"
grep -q 'fix: start the container with --shm-size=8g' "$out" || fail "no fix printed"
[ "$(grep -c '^\[ ok \]' "$out")" = 0 ] || fail "--quiet printed passing checks"
echo "detects ok"
