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

# a whole command on a big file: streaming read, symbolization, aggregation
big=/tmp/dnt-bench-big.nettrace
if "$b/tests/bench-ntr" --write "$big" 512 >/dev/null; then
  size=$(stat -c %s "$big")
  echo "== dntrace report on a $((size / 1000000)) MB synthetic trace (one core)"
  for cmd in "report $big" "convert $big --format folded -o -"; do
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd >/dev/null 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v c="$cmd" \
      'BEGIN { printf "dntrace %-8s %6.0f MB/s (%.2f s), peak RSS %d MB\n", substr(c, 1, index(c, " ") - 1), mb / 1e6 / s, s, kb / 1024 }'
  done
  rm -f "$big"
fi

# a real session of at least 500 MB: the sample's cpu-work beside a thread writing ~600k
# EventSource events a second, recorded with the sampled-thread-time profile for 50 s; then
# parse-only, report and TraceEvent (when dotnet can build tests/bench-traceevent) on it
real=/tmp/dnt-bench-real.nettrace
if [ -x "$exe" ]; then
  echo "== a real 50 s high-rate session: parse-only, report, TraceEvent side by side"
  "$exe" --no-alloc --no-blocking --event-rate 1500000 >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1
  $DNT_BIN collect -p $pid --profile dotnet-sampled-thread-time --providers Sample-Load:0:4 --duration 50s \
    -o $real >/dev/null 2>&1
  kill $pid; wait $pid 2>/dev/null || true
  size=$(stat -c %s $real 2>/dev/null || echo 0)
  echo "recorded $((size / 1000000)) MB"
  "$b/tests/bench-ntr" $real | grep "ntr parse"
  # the best of three runs, and the rate per second of CPU too: this VM's wall times vary by
  # tens of percent with its neighbours' load, CPU time much less
  for cmd in "report $real" "convert $real --format folded -o -" "convert $real --format pprof -o -"; do
    for _ in 1 2 3; do
      /usr/bin/time -f "%e %U %S %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd >/dev/null 2>&1
      tail -n 1 /tmp/dnt-bench-time
    done | sort -n | head -n 1 >/tmp/dnt-bench-best
    read -r secs user sys kb </tmp/dnt-bench-best
    awk -v s="$secs" -v u="$user" -v y="$sys" -v kb="$kb" -v mb="$size" -v c="$cmd" \
      'BEGIN { split(c, w, " "); printf "dntrace %-8s %-8s %6.0f MB/s (%.2f s; %.0f MB per CPU second), peak RSS %d MB\n", w[1], w[4], mb / 1e6 / s, s, mb / 1e6 / (u + y > 0 ? u + y : s), kb / 1024 }'
  done
  te=${DNT_SRCDIR:-$(dirname "$0")/..}/tests/bench-traceevent
  if command -v dotnet >/dev/null 2>&1 && [ -f "$te/BenchTraceEvent.csproj" ] &&
    dotnet build -c Release -o "$b/tests/bench-traceevent-out" "$te" >/tmp/dnt-bench-te-build.log 2>&1; then
    dotnet "$b/tests/bench-traceevent-out/BenchTraceEvent.dll" $real --mode parse
    dotnet "$b/tests/bench-traceevent-out/BenchTraceEvent.dll" $real --mode stacks
  else
    echo "(TraceEvent side by side skipped: no dotnet, or its build failed: /tmp/dnt-bench-te-build.log)"
  fi
  rm -f $real /tmp/dnt-bench-best
fi

# async stacks: 512 MB of synthetic async chains (bench-ntr --write-async: 16 pool threads
# continuing the driver's awaits), report stitched and with --no-async (memory must not grow with
# the tasks); then a 30 s session of the sample's --async chain with the task library's events
# (cpu-sampling,async-tasks), its report stitched and with --no-async, and TraceEvent's thread
# time computer stitching the same file (the oracle's --mode stitched, the runtime's start in it)
at=/tmp/dnt-bench-async.nettrace
if "$b/tests/bench-ntr" --write-async "$at" 512 >/dev/null; then
  size=$(stat -c %s "$at")
  echo "== async stacks: dntrace report on $((size / 1000000)) MB of synthetic async chains (one core)"
  for opt in "" --no-async; do
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN report "$at" $opt >/dev/null 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v o="${opt:-stitched}" \
      'BEGIN { printf "dntrace report %-10s %6.0f MB/s (%.2f s), peak RSS %d MB\n", o, mb / 1e6 / s, s, kb / 1024 }'
  done
  rm -f "$at"
fi
if [ -x "$exe" ]; then
  echo "== async stacks: a 30 s session of the sample's --async chain"
  "$exe" --async --no-blocking --no-alloc >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1
  $DNT_BIN collect -p $pid --profile cpu-sampling,async-tasks --duration 30s -o $at >/dev/null 2>&1
  kill $pid; wait $pid 2>/dev/null || true
  size=$(stat -c %s $at 2>/dev/null || echo 0)
  for opt in "" --no-async; do
    /usr/bin/time -f "%e %U %S %M" -o /tmp/dnt-bench-time $DNT_BIN report $at --threads $opt >/dev/null 2>&1
    read -r secs user sys kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v o="${opt:-stitched}" \
      'BEGIN { printf "dntrace report %-10s on %d MB: %.2f s (%.0f MB/s), peak RSS %d MB\n", o, mb / 1e6, s, mb / 1e6 / s, kb / 1024 }'
  done
  if [ -f "$b/tests/oracle-te/out/BenchTraceEvent.dll" ]; then
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time dotnet "$b/tests/oracle-te/out/BenchTraceEvent.dll" --mode stitched \
      $at >/dev/null 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    echo "traceevent stitched thread time (TraceLog + computer): $secs s, peak RSS $((kb / 1024)) MB"
  fi
  rm -f $at
fi

# heap snapshots: the sample's --heap N:16 (N Sample.CacheEntry, each with a 16-byte byte[]: 2N
# objects), 2,000,000 and 10,000,000 objects (beyond dotnet-gcdump's cap), snapshot to a file and
# reported, by dntrace gcdump and by dotnet-gcdump (when ./bootstrap.sh installed it): wall time
# and the client's peak RSS (per object too), and the target's pause in the walk's GC as the
# runtime reports it to a second, light session (GC keyword) beside each snapshot
heap_pause() { # $1: the light session's trace: the induced gen-2 GC's pause, ms
  $DNT_BIN gc "$1" --format json 2>/dev/null |
    python3 -c 'import json,sys; g=[x for x in json.load(sys.stdin)["gcs"] if x["reason"]=="Induced" and x["generation"]==2]; print("%.0f" % g[0]["pauseMSec"] if g else "?")'
}
timed() { # $1: what; the rest: the command; prints "what: S s, peak RSS M MB (B bytes an object)"
  what=$1
  shift
  /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time "$@" >/dev/null 2>&1
  tail -n 1 /tmp/dnt-bench-time | awk -v w="$what" -v n="$objects" \
    '{ printf "  %-46s %6.2f s, peak RSS %5d MB (%.0f bytes an object)\n", w, $1, $2 / 1024, n ? $2 * 1024 / n : 0 }'
}
light_session() { # a session of the GC keyword alone beside a snapshot, in the background ($light)
  $DNT_BIN collect -p "$1" --providers Microsoft-Windows-DotNETRuntime:0x1:4 --duration 180s \
    -o /tmp/dnt-bench-gcs.nettrace >/dev/null 2>&1 &
  light=$!
  sleep 2
}
if [ -x "$exe" ]; then
  tool=${DNT_DOTNET_TOOLS:-${DNT_SRCDIR:-$(dirname "$0")/..}/build-tools/dotnet-tools}/dotnet-gcdump
  for entries in 1000000 5000000; do
    echo "== heap snapshots: the sample's --heap $entries:16 ($((2 * entries)) objects and the runtime's)"
    "$exe" --heap $entries:16 --no-cpu --no-blocking --no-alloc --no-exceptions --no-counters >/tmp/dnt-bench-heap.out 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q '^heap' /tmp/dnt-bench-heap.out 2>/dev/null && break; sleep 0.1; done
    objects=$((2 * entries))
    light_session $pid
    timed "dntrace gcdump collect (a .gcdump)" $DNT_BIN gcdump collect -p $pid -o /tmp/dnt-bench-heap.gcdump
    kill -INT $light
    wait $light 2>/dev/null
    walked=$($DNT_BIN gcdump /tmp/dnt-bench-heap.gcdump --format json --top 1 2>/dev/null | sed -n 's/^{"objects":\([0-9]*\),.*/\1/p')
    echo "  $walked objects walked; the walk's GC paused the target $(heap_pause /tmp/dnt-bench-gcs.nettrace) ms"
    timed "dntrace gcdump -p (report, retained sizes)" $DNT_BIN gcdump -p $pid --top 3
    timed "dntrace gcdump FILE (report, retained sizes)" $DNT_BIN gcdump /tmp/dnt-bench-heap.gcdump --top 3
    if [ -x "$tool" ]; then
      light_session $pid
      timed "dotnet-gcdump collect" "$tool" collect -p $pid -o /tmp/dnt-bench-heap-theirs.gcdump
      kill -INT $light
      wait $light 2>/dev/null
      theirs=$("$tool" report /tmp/dnt-bench-heap-theirs.gcdump 2>/dev/null | sed -n 's/^ *\([0-9,]*\)  GC Heap objects$/\1/p')
      echo "  dotnet-gcdump's file: $theirs nodes (root nodes included; it stops at 10,000,000); the walk's GC paused the target $(heap_pause /tmp/dnt-bench-gcs.nettrace) ms"
      timed "dotnet-gcdump report FILE" "$tool" report /tmp/dnt-bench-heap-theirs.gcdump
    fi
    kill $pid
    wait $pid 2>/dev/null || true
    rm -f /tmp/dnt-bench-heap.out /tmp/dnt-bench-heap.gcdump /tmp/dnt-bench-heap-theirs.gcdump /tmp/dnt-bench-gcs.nettrace
  done
fi

# dntrace gc: the largest corpus trace with GCs, and a 30 s gc-verbose session of the sample
# inducing 200 GCs a second while it allocates (rows kept, events not: RSS should not grow with it)
corpus=${DNT_CORPUS:-${DNT_SRCDIR:-$(dirname "$0")/..}/../shared/corpus}
gctrace=$corpus/microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace
if [ -f "$gctrace" ]; then
  echo "== dntrace gc"
  /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN gc $gctrace >/dev/null 2>&1
  read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
  echo "dntrace gc on $(basename $gctrace) ($(($(stat -c %s $gctrace) / 1000000)) MB, 478 GCs): $secs s, peak RSS $((kb / 1024)) MB"
fi
if [ -x "$exe" ]; then
  gcreal=/tmp/dnt-bench-gc.nettrace
  "$exe" --gc-induce 200 --no-exceptions --no-counters >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1
  $DNT_BIN collect -p $pid --profile gc-verbose --duration 30s -o $gcreal >/dev/null 2>&1
  kill $pid; wait $pid 2>/dev/null || true
  /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN gc $gcreal >/tmp/dnt-bench-gc.out 2>&1
  read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
  echo "dntrace gc on a 30 s gc-verbose session ($(($(stat -c %s $gcreal) / 1000000)) MB, $(grep -c '^ *[0-9]' /tmp/dnt-bench-gc.out) rows): $secs s, peak RSS $((kb / 1024)) MB"
  if [ -f "$b/tests/oracle-te/out/BenchTraceEvent.dll" ]; then
    dotnet "$b/tests/oracle-te/out/BenchTraceEvent.dll" $gcreal --mode gc | tail -1
  fi
  rm -f $gcreal /tmp/dnt-bench-gc.out
fi

# dntrace jit and threadpool: one session of the sample from its first instruction (its startup's
# JIT, tier-ups, its pool starving) beside ~1.5M EventSource events a second, so that the few JIT
# and pool events sit in a large file; each command on it, then TraceEvent's JIT statistics
if [ -x "$exe" ]; then
  jp=/tmp/dnt-bench-jitpool.nettrace
  echo "== dntrace jit / threadpool on a 30 s session (JIT, Loader, ThreadPool keywords beside Sample-Load events)"
  $DNT_BIN collect --providers Microsoft-Windows-DotNETRuntime:0x10018:5,Sample-Load:0:4 -o $jp -- \
    "$exe" --seconds 30 --pool-starve --no-alloc --no-blocking --event-rate 1500000 >/dev/null 2>&1
  size=$(stat -c %s $jp 2>/dev/null || echo 0)
  for cmd in jit threadpool; do
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd $jp >/tmp/dnt-bench-jp.out 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    what=$( (grep -m1 -E '^Summary:|^thread pool starvation' /tmp/dnt-bench-jp.out || head -1 /tmp/dnt-bench-jp.out) | cut -c1-110)
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v c="$cmd" -v w="$what" \
      'BEGIN { printf "dntrace %-10s on %d MB: %.2f s (%.0f MB/s), peak RSS %d MB (%s)\n", c, mb / 1e6, s, mb / 1e6 / s, kb / 1024, w }'
  done
  if [ -f "$b/tests/oracle-te/out/BenchTraceEvent.dll" ]; then
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time dotnet "$b/tests/oracle-te/out/BenchTraceEvent.dll" $jp --mode jit |
      tail -1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    echo "traceevent jit: peak RSS $((kb / 1024)) MB ($secs s wall, the runtime's start included)"
  fi
  rm -f $jp /tmp/dnt-bench-jp.out
fi

# dntrace allocs: 1 GB of synthetic GCAllocationTick V4 events with stacks (bench-ntr
# --write-allocs: 200 types, 64 stacks, 16 threads; a real session writes some 2 MB of them a
# minute), then a 10 s session of the sample allocating 100 MB/s; TraceEvent's decoding of the
# same ticks (--mode allocs) beside them
allocbig=/tmp/dnt-bench-allocs.nettrace
if "$b/tests/bench-ntr" --write-allocs "$allocbig" 1024 >/dev/null; then
  size=$(stat -c %s "$allocbig")
  echo "== dntrace allocs on $((size / 1000000)) MB of allocation ticks (one core)"
  for cmd in "allocs $allocbig" "allocs $allocbig --format folded -o -"; do
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd >/dev/null 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v c="$cmd" \
      'BEGIN { n = split(c, w, " "); printf "dntrace allocs %-8s %6.0f MB/s (%.2f s), peak RSS %d MB\n", (n > 2 ? w[4] : "text"), mb / 1e6 / s, s, kb / 1024 }'
  done
  # issue 15's yardstick: every analysis on the same 1 GB, each reading all of it
  for cmd in gc jit threadpool exceptions locks; do
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd "$allocbig" >/dev/null 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v c="$cmd" \
      'BEGIN { printf "dntrace %-10s on the same file %6.0f MB/s (%.2f s), peak RSS %d MB\n", c, mb / 1e6 / s, s, kb / 1024 }'
  done
  if [ -f "$b/tests/oracle-te/out/BenchTraceEvent.dll" ]; then
    dotnet "$b/tests/oracle-te/out/BenchTraceEvent.dll" "$allocbig" --mode allocs | tail -1
  fi
  rm -f "$allocbig"
fi
if [ -x "$exe" ]; then
  allocreal=/tmp/dnt-bench-allocs-real.nettrace
  $DNT_BIN collect --providers Microsoft-Windows-DotNETRuntime:0x19:5 -o $allocreal -- "$exe" \
    --alloc Sample.Payload:100000000 --seconds 10 --no-cpu --no-blocking --no-exceptions --no-counters >/dev/null 2>&1
  /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN allocs $allocreal >/dev/null 2>&1
  read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
  echo "dntrace allocs on a 10 s session of the sample at 100 MB/s ($(($(stat -c %s $allocreal) / 1000)) KB): $secs s, peak RSS $((kb / 1024)) MB"
  rm -f $allocreal
fi

# dntrace exceptions and locks: a 20 s session of the sample throwing 20000 exceptions a second
# (each with its catch, stop and stack) beside two threads contending for one lock; then both
# commands on it (groups, locks and stacks kept, events not), and TraceEvent reading the same
# events (tests/bench-traceevent --mode exclocks)
if [ -x "$exe" ]; then
  echo "== dntrace exceptions / locks"
  excreal=/tmp/dnt-bench-exc.nettrace
  "$exe" --no-cpu --no-blocking --no-alloc --no-exceptions --no-counters --throw 20000 --contend >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1
  $DNT_BIN collect -p $pid --providers Microsoft-Windows-DotNETRuntime:0xC000:4 --duration 20s -o $excreal >/dev/null 2>&1
  kill $pid; wait $pid 2>/dev/null || true
  size=$(stat -c %s $excreal 2>/dev/null || echo 0)
  for cmd in exceptions locks; do
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd $excreal >/dev/null 2>&1
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v mb="$size" -v c="$cmd" \
      'BEGIN { printf "dntrace %-10s on a %d MB session: %6.0f MB/s (%.2f s), peak RSS %d MB\n", c, mb / 1e6, mb / 1e6 / s, s, kb / 1024 }'
  done
  if [ -f "$b/tests/oracle-te/out/BenchTraceEvent.dll" ]; then
    dotnet "$b/tests/oracle-te/out/BenchTraceEvent.dll" $excreal --mode exclocks | tail -1
  fi
  rm -f $excreal
fi

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
  # counters: what a 1 s monitor costs, and how fast serve answers a scrape
  echo "== dntrace counters against the running sample (System.Runtime + the sample's counters, 1 s refresh)"
  $DNT_BIN counters monitor -p $pid --counters System.Runtime,Sample.Meter,Sample-Counters --plain >/dev/null 2>&1 &
  mon=$!
  sleep 5   # past the start-up
  t0=$(awk '{print $1}' /proc/$mon/schedstat)   # ns on a CPU: finer than the clock ticks of stat
  sleep 30
  t1=$(awk '{print $1}' /proc/$mon/schedstat)
  rss=$(awk '/VmHWM/ {print $2}' /proc/$mon/status)
  kill -INT $mon; wait $mon 2>/dev/null || true
  awk -v a="$t0" -v b="$t1" -v rss="$rss" \
    'BEGIN { printf "counters monitor: %.3f%% of a core over 30 s, peak RSS %.1f MB\n", (b - a) / 1e9 / 30 * 100, rss / 1024 }'
  port=$((20000 + $$ % 20000))
  $DNT_BIN counters serve -p $pid --counters System.Runtime,Sample.Meter,Sample-Counters --listen 127.0.0.1:$port >/dev/null 2>&1 &
  srv=$!
  sleep 4
  times=""
  for _ in $(seq 50); do
    times="$times $(curl -s -o /dev/null -w '%{time_total}' http://127.0.0.1:$port/metrics)"
  done
  series=$(curl -s http://127.0.0.1:$port/metrics | grep -vc '^#')
  echo $times | tr ' ' '\n' | sort -n | awk -v n="$series" \
    '{ t[NR] = $1 } END { printf "counters serve: scrape of %d series median %.2f ms, max %.2f ms over %d scrapes (curl time_total)\n", n, t[int((NR + 1) / 2)] * 1000, t[NR] * 1000, NR }'
  kill -INT $srv; wait $srv 2>/dev/null || true
  kill $pid; wait $pid 2>/dev/null || true
else
  echo "(no sample target: ps/info timings skipped)"
fi

# Figures the tests once held to bounds and now only print (issue 23: no wall-clock bound decides
# a test): stacks of 500+ threads (was <= 1 s), how long after its --duration collect stops (was
# < 1 s past it), and `counters serve`'s scrape while a slow client trickles (the slowloris test
# prints its own median and max in its log)
if [ -x "$exe" ]; then
  echo "== figures the tests print but no longer judge"
  "$exe" --threads 500 >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 600); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 2
  for _ in 1 2 3; do
    /usr/bin/time -f "%e" -o /tmp/dnt-bench-time $DNT_BIN stacks -p $pid >/dev/null 2>&1
    tail -n 1 /tmp/dnt-bench-time
  done | sort -n | awk '{ t[NR] = $1 } END { printf "stacks of 500+ threads: best %.2f s, worst %.2f s of 3 (the test once wanted <= 1 s)\n", t[1], t[NR] }'
  log=/tmp/dnt-bench-collect.log
  start=$(date +%s.%N)
  $DNT_BIN collect -p $pid --duration 2s -o /tmp/dnt-bench-d.nettrace >$log 2>&1 &
  col=$!
  started=
  while kill -0 $col 2>/dev/null; do
    [ -z "$started" ] && grep -q 'Tracing started' $log && started=$(date +%s.%N)
    sleep 0.01
  done
  ended=$(date +%s.%N)
  awk -v a="$start" -v b="${started:-$start}" -v c="$ended" \
    'BEGIN { printf "collect --duration 2s: session started %.2f s after launch, exited %.2f s after that (the test once wanted < 3 s)\n", b - a, c - b }'
  kill $pid; wait $pid 2>/dev/null || true
  rm -f /tmp/dnt-bench-d.nettrace $log /tmp/dnt-bench-time
fi

# serve as an agent: two targets, profiles and scrapes (SERVE_BENCH_SECONDS, default 120)
sh "$(dirname "$0")/bench-serve.sh"

# perf: from Ctrl+C to the report for a 30 s 999 Hz recording, beside plain perf's own tools on
# the same data; then collect --native + compare on the same length
if [ -x "$exe" ] && perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1; then
  echo "== dntrace perf / collect --native / compare on the sample target (30 s at 999 Hz)"
  "$exe" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1
  base=/tmp/dnt-bench-perf
  rm -f $base.*
  $DNT_BIN perf -p $pid -o $base >$base.out 2>&1 &
  rec=$!
  sleep 30
  t0=$(date +%s%N)
  kill -INT $rec; wait $rec 2>/dev/null || true
  t1=$(date +%s%N)
  mb=$(perf script -i $base.perf.data --ns --show-mmap-events -F sw:comm,pid,tid,time,event,ip,sym,dso -F trace:comm,pid,tid,time,event,trace 2>/dev/null | wc -c)
  t2=$(date +%s%N)
  perf script -i $base.perf.data --ns --show-mmap-events -F sw:comm,pid,tid,time,event,ip,sym,dso -F trace:comm,pid,tid,time,event,trace >/dev/null 2>&1
  t3=$(date +%s%N)
  perf report -i $base.perf.data --stdio >/dev/null 2>&1
  t4=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" -v mb="$mb" 'BEGIN {
    printf "dntrace perf: Ctrl+C to report %.2f s (perf stop, rundown, perf script of %.1f MB, naming, report)\n", (b - a) / 1e9, mb / 1e6
    printf "  perf script alone on the same data %.2f s; perf report --stdio %.2f s (JIT frames left as hex)\n", (d - c) / 1e9, (e - d) / 1e9 }'
  grep -E "^Read .* MB of perf script" $base.out || true
  rm -f $base.*
  $DNT_BIN collect -p $pid --native --duration 30s -o $base.nettrace >/dev/null 2>&1
  t0=$(date +%s%N)
  $DNT_BIN compare $base.nettrace >$base.out 2>&1
  t1=$(date +%s%N)
  kb=$(stat -c %s $base.perf.data)
  awk -v a="$t0" -v b="$t1" -v kb="$kb" 'BEGIN { printf "dntrace compare of a 30 s collect --native (perf.data %.1f MB): %.2f s\n", kb / 1e6, (b - a) / 1e9 }'
  grep -E "^Read .* MB of perf script|cpu-work|blocking-work" $base.out || true
  rm -f $base.*
  kill $pid; wait $pid 2>/dev/null || true
else
  echo "(no sample target, or perf cannot record: perf timings skipped)"
fi

# waits beside compare on one 30 s collect --native of the sample with --handoff (setter wakes
# waiter every 10 ms): time and peak RSS of each on the same recording
if [ -x "$exe" ] && perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1; then
  echo "== dntrace waits / compare on a 30 s collect --native of the sample with --handoff"
  "$exe" --handoff >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1
  base=/tmp/dnt-bench-waits
  rm -f $base.*
  $DNT_BIN collect -p $pid --native --duration 30s -o $base.nettrace >/dev/null 2>&1
  kill $pid; wait $pid 2>/dev/null || true
  mb=$(stat -c %s $base.perf.data)
  for cmd in waits compare; do
    # time's peak RSS is the larger of dntrace's and perf script's (its child); dntrace's own is
    # its VmHWM, read until it exits
    /usr/bin/time -f "%e %M" -o /tmp/dnt-bench-time $DNT_BIN $cmd $base.nettrace >$base.out 2>&1 &
    own=0
    while kill -0 $! 2>/dev/null; do
      for p in $(pgrep -P $! -x dntrace); do
        hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$p/status 2>/dev/null)
        [ -n "$hwm" ] && [ "$hwm" -gt "$own" ] && own=$hwm
      done
      sleep 0.05
    done
    read -r secs kb <<EOF
$(tail -n 1 /tmp/dnt-bench-time)
EOF
    awk -v s="$secs" -v kb="$kb" -v own="$own" -v mb="$mb" -v c="$cmd" \
      'BEGIN { printf "dntrace %-8s %.2f s, peak RSS %d MB with perf script, %d MB dntrace alone (perf.data %.1f MB)\n", c, s, kb / 1024, own / 1024, mb / 1e6 }'
  done
  rm -f $base.* /tmp/dnt-bench-time
else
  echo "(no sample target, or perf cannot record: waits timings skipped)"
fi

# dump analyze (issue 25): full dumps of the sample holding a 10,000,000-object heap (--heap
# 5000000:0, a CacheEntry and an empty byte[] each) and a 1 GB one (--heap 10000:100000, in the
# large object heap), then `dumpheap -stat` by dntrace and by dotnet-dump (when ./bootstrap.sh
# installed it) on each: wall time and peak RSS; gcroot of an object behind the 5,000,000-entry
# array; and `clrstack -all` of a sample with 500 idle threads
if [ -x "$exe" ]; then
  dd=${DNT_DOTNET_TOOLS:-${DNT_SRCDIR:-$(dirname "$0")/..}/build-tools/dotnet-tools}/dotnet-dump
  for heap in 5000000:0 10000:100000 threads; do
    if [ "$heap" = threads ]; then
      "$exe" --threads 500 --no-cpu --no-blocking --no-alloc --no-exceptions >/dev/null 2>&1 &
    else
      "$exe" --heap "$heap" --no-cpu --no-blocking --no-alloc --no-exceptions --no-counters >/dev/null 2>&1 &
    fi
    pid=$!
    for _ in $(seq 600); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
    sleep 5
    core=/tmp/dnt-bench-analyze.core
    $DNT_BIN dump -p $pid --type full -o $core >/dev/null 2>&1
    kill $pid
    wait $pid 2>/dev/null || true
    if [ "$heap" = threads ]; then
      echo "== dump analyze: clrstack -all, 500 idle threads ($(($(stat -c %s $core) / 1000000)) MB core)"
      cmd="clrstack -all" ddcmd="clrstack -all"
    else
      echo "== dump analyze: dumpheap -stat, --heap $heap ($(($(stat -c %s $core) / 1000000)) MB core)"
      cmd="dumpheap -stat" ddcmd="dumpheap -stat -noprogress"
    fi
    /usr/bin/time -f "  dntrace:     %e s, %U s user, peak RSS %M KB" $DNT_BIN dump analyze $core -c "$cmd" 2>&1 >/dev/null |
      grep 'dntrace:'
    if [ -x "$dd" ]; then
      /usr/bin/time -f "  dotnet-dump: %e s, %U s user, peak RSS %M KB" "$dd" analyze $core -c "$ddcmd" -c exit 2>&1 \
        >/dev/null | grep 'dotnet-dump:'
    fi
    if [ "$heap" = 5000000:0 ]; then
      # gcroot of the one Sample.TableValue: reached through the static array of 5,000,000 entries
      # and a dependent handle, every thread's stack searched too
      mt=$($DNT_BIN dump analyze $core -c "dumpheap -stat" 2>/dev/null | awk '$4 == "Sample.TableValue" && NF == 4 {print $1}')
      obj=$($DNT_BIN dump analyze $core -c "dumpheap -short -mt $mt" 2>/dev/null | head -1)
      echo "== dump analyze: gcroot $obj (a 10,000,000-object heap)"
      /usr/bin/time -f "  dntrace:     %e s, %U s user, peak RSS %M KB" $DNT_BIN dump analyze $core -c "gcroot $obj" 2>&1 \
        >/dev/null | grep 'dntrace:'
      if [ -x "$dd" ]; then
        /usr/bin/time -f "  dotnet-dump: %e s, %U s user, peak RSS %M KB" "$dd" analyze $core -c "gcroot $obj" -c exit 2>&1 \
          >/dev/null | grep 'dotnet-dump:'
      fi
    fi
    rm -f $core
  done
fi

# incidents (issue 26): `watch` with three counter rules on the sample for 60 s (CPU time and peak
# RSS of dntrace), `collect --ring 10s` at 100,000 events a second for 30 s beside a plain
# collect of the same stream, and a 64 MB ring's RSS over five minutes
if [ -x "$exe" ]; then
  echo "== watch: three counter rules, 60 s"
  "$exe" --no-cpu --no-blocking --no-alloc >/dev/null 2>&1 &
  pid=$!
  sleep 3
  /usr/bin/time -f "  dntrace watch: %U s user + %S s system CPU in %e s, peak RSS %M KB" $DNT_BIN watch -p $pid \
    --duration 60s -o /tmp/dnt-bench-watch --rule 'cpu-usage > 95 for 30s => stacks' \
    --rule 'gc-heap-size > 4000MB => gcdump' --rule 'threadpool-queue-length > 1000 for 10s => stacks' 2>&1 |
    grep 'dntrace watch:'
  kill $pid
  wait $pid 2>/dev/null || true
  rm -rf /tmp/dnt-bench-watch
  echo "== collect --ring 10s at 100,000 events a second, 30 s"
  "$exe" --event-rate 100000 --no-cpu --no-blocking --no-alloc --no-exceptions >/dev/null 2>&1 &
  pid=$!
  sleep 3
  /usr/bin/time -f "  ring:  %U s user + %S s system CPU in %e s, peak RSS %M KB" $DNT_BIN collect -p $pid \
    --providers Sample-Load --ring 10s --duration 30s -o /tmp/dnt-bench-ring 2>&1 | grep -E 'ring:|Saved'
  /usr/bin/time -f "  plain: %U s user + %S s system CPU in %e s, peak RSS %M KB" $DNT_BIN collect -p $pid \
    --providers Sample-Load --duration 30s -o /tmp/dnt-bench-plain.nettrace 2>&1 | grep -E 'plain:'
  # the size bound over a long run (issue 26: 5 minutes; BENCH_RING_SECONDS shortens it): the ring
  # is full after seconds, so its RSS at one minute and at the end are the same when it holds
  ring_s=${BENCH_RING_SECONDS:-300}
  echo "== collect --ring 60s --ring-size 64MB at 100,000 events a second, $ring_s s"
  rm -rf /tmp/dnt-bench-ring
  $DNT_BIN collect -p $pid --providers Sample-Load --ring 60s --ring-size 64 --duration "${ring_s}s" \
    -o /tmp/dnt-bench-ring >/dev/null 2>&1 &
  ring=$!
  at60=0 most=0
  for i in $(seq 1 "$ring_s"); do
    sleep 1
    rss=$(awk '/^VmRSS/ { print $2 }' /proc/$ring/status 2>/dev/null)
    [ -z "$rss" ] && break
    [ "$rss" -gt "$most" ] && most=$rss
    [ "$i" = 60 ] && at60=$rss
  done
  wait $ring 2>/dev/null || true
  echo "  RSS at 60 s ${at60} KB, at most ${most} KB over $ring_s s (ring bound 64 MB)"
  kill $pid
  wait $pid 2>/dev/null || true
  rm -rf /tmp/dnt-bench-ring /tmp/dnt-bench-plain.nettrace
fi
