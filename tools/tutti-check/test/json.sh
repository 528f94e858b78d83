#!/bin/sh
# tutti-check --json FILE writes a report that parses and has the verdict,
# the checks, and the sections of the human report.
set -eu
bin=$1
out=${TMPDIR:-/tmp}/tutti-check-json.$$
trap 'rm -f "$out" "$out.txt"' EXIT
"$bin" --quiet --json "$out" >"$out.txt"
cat "$out.txt"
python3 -m json.tool "$out" >/dev/null
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("tool", "library", "cpu", "memory", "network", "shm", "cuda", "checks", "verdict"):
    assert key in r, "missing " + key
assert r["verdict"] == "OK", r["verdict"]
assert r["failed"] == 0 and r["passed"] >= 6, (r["passed"], r["failed"])
names = [c["name"] for c in r["checks"]]
assert any("4 ranks" in n for n in names), names
assert all(c["status"] in ("pass", "fail", "skip") for c in r["checks"])
assert r["network"]["chosen"], r["network"]
print("json ok:", len(r["checks"]), "checks")
PY
