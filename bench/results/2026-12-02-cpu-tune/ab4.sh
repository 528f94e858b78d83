#!/bin/bash
# 4 ranks, 512 B - 8 KB allreduce, libraries alternating.
perf=build-prof/tools/tutti-perf/tutti-perf; run=build-prof/tools/tuttirun/tuttirun
libs="prev:/tmp/prev-build/libtutti.so.0 t1:/tmp/b-0fb7f38/libtutti.so.0 t2:/tmp/b-0b072ee/libtutti.so.0 head:build-prof/libtutti.so.0"
for rep in $(seq 1 ${REPS:-6}); do
  for l in $libs; do
    name=${l%%:*}; lib=${l#*:}
    $run -n 4 --no_prefix $perf allreduce -b 128 -e 8K -f 4 -n 3000 -w 1000 -c 0 --lib $lib 2>/dev/null | grep -vE "^#|^$" | awk -v n=$name '{print n, $1, $6}'
  done
done
