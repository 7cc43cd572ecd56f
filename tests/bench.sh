#!/bin/sh
# Prints dntrace's performance figures. Nothing here is asserted: the numbers go into closing
# notes and are compared by people across changes.
set -u
b=$DNT_BUILDDIR
exe=$b/tests/targets/sample/out/Sample

for prog in $DNT_BENCHES; do
  echo "== $prog"
  "$b/$prog" || echo "($prog failed with $?)"
done

if [ -x "$exe" ]; then
  echo "== dntrace ps / info against a running sample target"
  "$exe" --no-cpu >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 0.5
  nproc_total=$(ls -d /proc/[0-9]* | wc -l)
  for cmd in "ps" "info -p $pid"; do
    best=999999
    total=0
    runs=20
    i=0
    while [ $i -lt $runs ]; do
      t0=$(date +%s%N)
      $DNT_BIN $cmd >/dev/null
      t1=$(date +%s%N)
      ms=$(( (t1 - t0) / 1000 ))
      total=$((total + ms))
      [ $ms -lt $best ] && best=$ms
      i=$((i + 1))
    done
    printf 'dntrace %-10s best %d.%03d ms, mean %d.%03d ms over %d runs (%d processes on the machine)\n' \
      "$cmd" $((best / 1000)) $((best % 1000)) $((total / runs / 1000)) $((total / runs % 1000)) $runs "$nproc_total"
  done
  kill $pid; wait $pid 2>/dev/null || true
else
  echo "(no sample target: ps/info timings skipped)"
fi
