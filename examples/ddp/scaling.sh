#!/usr/bin/env bash
# The scaling measurement of bench/RESULTS.md: samples per second for 1, 2 and 4
# ranks on this host, with buckets overlapped with backward, the same buckets
# after backward, and one 25 MB bucket. Each configuration runs REPEAT times
# (default 5), round-robin; its row is the run with the median rate, with the
# range of the rates. Every run's output stays in $OUT (default: a temporary
# folder).
#   bash examples/ddp/scaling.sh [BUILD_DIR]     (default: build)
# The "others" column is the CPU that other processes used during the run
# (busy time in /proc/stat minus the job's own user + system time), in cores:
# on a shared machine, a run with others > 0.1 is not a clean measurement.
set -u
BUILD=${1:-build}
DDP=$BUILD/examples/ddp/tutti-ddp
TUTTIRUN=$BUILD/tools/tuttirun/tuttirun
RANKS=${RANKS:-"1 2 4"}
REPEAT=${REPEAT:-5}
MODEL=${MODEL:-"--layers 256,1024,1024,1024,10 --train-size 2048 --val-size 0 --epochs 3 --batch 32"}
VARIANTS=${VARIANTS:-"--bucket-mb=1 --bucket-mb=1,--no-overlap --bucket-mb=25"}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
[ -x "$DDP" ] && [ -x "$TUTTIRUN" ] || { echo "build first: $DDP, $TUTTIRUN" >&2; exit 2; }
echo "model: $MODEL; outputs in $OUT"
echo
echo "| ranks | buckets | samples/s | range | step ms | comm ms/step | hidden ms/step | hidden | exposed wait ms/step | others (cores) |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"

busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

# one N VARIANT LOG: one run; prints "RATE|ROW" (ROW: the table's columns after the range).
one() {
  local n=$1 variant=$2 log=$3 b0 b1 t0 t1 own others s
  b0=$(busy)
  t0=$(date +%s.%N)
  TIMEFORMAT="%U %S"
  # shellcheck disable=SC2086
  own=$({ time "$TUTTIRUN" -n "$n" --no_prefix "$DDP" $MODEL $variant --progress 0 >"$log" 2>&1; } 2>&1)
  t1=$(date +%s.%N)
  b1=$(busy)
  others=$(awk -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" -v own="$own" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {split(own, o, " "); x = ((b1 - b0) / hz - o[1] - o[2]) / (t1 - t0); printf "%.2f", x < 0 ? 0 : x}')
  s=$(grep "^summary:" "$log") || { echo "run failed: see $log" >&2; return 1; }
  num() {
    local x
    x=$(sed -nE "s#.*$1.*#\\1#p" <<<"$s")
    echo "${x:--}"
  }
  echo "$(num ' ([0-9]+) samples/s')|$(num 'step ([0-9.]+) ms') | $(num 'comm ([0-9.]+) ms') |" \
    "$(num 'hidden ([0-9.]+) ms') | $(num 'hidden [0-9.]+ ms/step \(([0-9]+%)\)') |" \
    "$(num 'exposed wait ([0-9.]+) ms') | $others |"
}

variant_of() {
  local v=${1//,/ }
  echo "${v//=/ }"
}
tag_of() { echo "n${1}_$(variant_of "$2" | tr -d ' -')"; }

# Round-robin: each repetition runs every configuration once, so that a slow
# spell of the machine touches all of them alike.
for ((k = 1; k <= REPEAT; k++)); do
  for n in $RANKS; do
    for v in $VARIANTS; do
      tag=$(tag_of "$n" "$v")
      r=$(one "$n" "$(variant_of "$v")" "$OUT/${tag}_$k.log") && echo "$r" >>"$OUT/$tag.rows"
    done
  done
done
for n in $RANKS; do
  for v in $VARIANTS; do
    tag=$(tag_of "$n" "$v")
    variant=$(variant_of "$v")
    [ -s "$OUT/$tag.rows" ] || continue
    sorted=$(sort -t'|' -k1,1n "$OUT/$tag.rows")
    count=$(wc -l <<<"$sorted")
    median=$(sed -n "$(((count + 1) / 2))p" <<<"$sorted")
    range="$(head -1 <<<"$sorted" | cut -d'|' -f1)–$(tail -1 <<<"$sorted" | cut -d'|' -f1)"
    nb=$(sed -nE 's#.* ([0-9]+) buckets? .*#\1#p' "$OUT/${tag}_1.log" | head -1)
    mb=$(sed -nE 's#.*--bucket-mb ([0-9.]+).*#\1#p' <<<"$variant")
    over=$([[ $variant == *no-overlap* ]] && echo "after backward" || echo "overlapped")
    echo "| $n | $nb × ≤$mb MB, $over | ${median%%|*} | $range | ${median#*|}"
  done
done
