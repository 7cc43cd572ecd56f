#!/bin/sh
# dntrace serve as an agent (issue 14): two sample targets, a profile request every 15 s (10 s
# of thread time, the two targets in turn) and a /metrics scrape every 5 s, for
# SERVE_BENCH_SECONDS (default 120; the figure is for 600: run with
# SERVE_BENCH_SECONDS=600). Prints serve's average CPU (% of one core, from its schedstat), its
# peak RSS in the first and in the last minute (VmRSS read every second), what the requests got,
# and what the agent costs the first target: its work items per second alone and with serve
# attached. Nothing is asserted. CPU is summed over all of serve's threads (the profiles are
# parsed on libuv's thread pool). SERVE_BENCH_CPU=1: serve --cpu (the profiles are perf's; perf's
# own CPU, serve's children, is shown apart). Called by tests/bench.sh; DNT_BUILDDIR and DNT_BIN
# as there.
#
# Throughput: the first target runs its cpu-work thread (CountPrimes in a loop, a work item
# each), which it reports as the EventCounter Sample-Counters/work-items: every 100 ms the items
# done since the last report, plus one, so its mean over a second is 1 + items per 100 ms. A
# `dntrace counters collect` of that counter alone (one EventCounters session, every second) is
# attached in every phase: alone before serve (ALONE s), with serve (the schedule above), alone
# again after it (ALONE s; the machine's load may drift, the two baselines show by how much).
# The first value of each phase is left out (a partial interval).
set -u
b=$DNT_BUILDDIR
exe=$b/tests/targets/sample/out/Sample
secs=${SERVE_BENCH_SECONDS:-120}
cpu_flag=
[ "${SERVE_BENCH_CPU:-0}" = 1 ] && cpu_flag=--cpu
alone=30
[ "$secs" -ge 300 ] && alone=60
if [ ! -x "$exe" ]; then
  echo "(no sample target: serve bench skipped)"
  exit 0
fi
echo "== dntrace serve${cpu_flag:+ --cpu}: 2 targets, a 10 s profile every 15 s, a scrape every 5 s, for $secs s"
"$exe" --no-blocking --no-alloc --no-exceptions >/dev/null 2>&1 &
p1=$!
"$exe" --no-cpu >/dev/null 2>&1 &
p2=$!
for pid in $p1 $p2; do
  for _ in $(seq 100); do ls /tmp/dotnet-diagnostic-$pid-*-socket >/dev/null 2>&1 && break; sleep 0.1; done
done
sleep 1
port=$((20000 + ($$ + 7) % 20000))
out=/tmp/dnt-bench-serve.$$
mkdir -p $out

# the first target's work items per second over a phase: 10 x (mean - 1), the first value left out
meter() {
  f=$1
  shift
  $DNT_BIN counters collect -p $p1 --counters 'EventCounters\Sample-Counters' -o "$f" "$@" >/dev/null 2>&1
}
rate() {
  awk -F, 'NR > 2 && $3 ~ /Work Items/ { s += $5; n++ } END { if (n) printf "%.0f %d", 10 * (s / n - 1), n; else print "0 0" }' "$1"
}
echo "-- the first target alone for $alone s"
meter $out/alone1.csv --duration ${alone}s

$DNT_BIN serve $cpu_flag -p $p1,$p2 --label bench=1 --listen 127.0.0.1:$port >$out/serve.log 2>&1 &
srv=$!
for _ in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:$port/metrics && break; sleep 0.1; done
# ns on a CPU of every thread (/proc/PID/schedstat is the main thread's only)
cpu_ns() { cat /proc/$srv/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
# the CPU of serve's children that have exited (perf record, perf script), in clock ticks
child_ticks() { awk '{ sub(/^.*\) /, ""); print $14 + $15 }' /proc/$srv/stat 2>/dev/null || echo 0; }
echo "-- with serve for $secs s"
$DNT_BIN counters collect -p $p1 --counters 'EventCounters\Sample-Counters' -o $out/with.csv >/dev/null 2>&1 &
mtr=$!
t0=$(cpu_ns)
c0=$(child_ticks)
start=$(date +%s)
i=0
: >$out/rss
: >$out/profiles
: >$out/scrapes
while [ $i -lt $secs ]; do
  if [ $((i % 15)) -eq 0 ]; then
    pid=$p1
    [ $((i / 15 % 2)) -eq 1 ] && pid=$p2
    curl -s -o $out/p.pb.gz -w "%{http_code} %{size_download} %{time_total}\n" \
      "http://127.0.0.1:$port/debug/pprof/profile?seconds=10&pid=$pid" >>$out/profiles &
  fi
  if [ $((i % 5)) -eq 0 ]; then
    curl -s -o /dev/null -w "%{http_code} %{time_total}\n" http://127.0.0.1:$port/metrics >>$out/scrapes &
  fi
  awk -v t=$i '/VmRSS/ {print t, $2}' /proc/$srv/status >>$out/rss
  i=$((i + 1))
  sleep $((start + i - $(date +%s))) 2>/dev/null || true
done
kill -INT $mtr; wait $mtr 2>/dev/null || true
wait_for=0
while [ $wait_for -lt 15 ] && [ "$(wc -l <$out/profiles)" -lt $(( (secs + 14) / 15 )) ]; do sleep 1; wait_for=$((wait_for + 1)); done
t1=$(cpu_ns)
c1=$(child_ticks)
elapsed=$(( $(date +%s) - start ))
kill -INT $srv; wait $srv 2>/dev/null || true
echo "-- the first target alone again for $alone s"
meter $out/alone2.csv --duration ${alone}s
kill $p1 $p2; wait $p1 $p2 2>/dev/null || true
awk -v a="$t0" -v b="$t1" -v s="$elapsed" 'BEGIN { printf "serve: %.2f%% of a core on average over %d s\n", (b - a) / 1e9 / s * 100, s }'
[ -n "$cpu_flag" ] && awk -v a="$c0" -v b="$c1" -v s="$elapsed" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "serve'"'"'s children (perf record, perf script): %.2f%% of a core on average\n", (b - a) / hz / s * 100 }'
awk -v last=$((secs - 60)) '$1 < 60 && $2 > f { f = $2 } $1 >= last && $2 > l { l = $2 }
  END { printf "serve: peak RSS %.1f MB in the first minute, %.1f MB in the last\n", f / 1024, l / 1024 }' $out/rss
awk '{ n++; if ($1 == 200) ok++; sz += $2; if ($3 > mx) mx = $3 }
  END { printf "profiles: %d of %d answered 200, %.0f KB each on average, the slowest in %.1f s\n", ok, n, n ? sz / n / 1024 : 0, mx }' $out/profiles
sort -n -k2 $out/scrapes | awk '{ n++; if ($1 == 200) ok++; t[n] = $2 }
  END { printf "scrapes: %d of %d answered 200, median %.1f ms, max %.1f ms\n", ok, n, t[int((n + 1) / 2)] * 1000, t[n] * 1000 }'
set -- $(rate $out/alone1.csv) $(rate $out/with.csv) $(rate $out/alone2.csv)
awk -v a1="$1" -v n1="$2" -v w="$3" -v nw="$4" -v a2="$5" -v n2="$6" 'BEGIN {
  printf "first target: %d work items/s alone before (%d s), %d with serve (%d s), %d alone after (%d s)\n", a1, n1, w, nw, a2, n2
  base = (a1 + a2) / 2
  if (base > 0) printf "first target: throughput with serve / alone = %.3f (alone before/after differ by %.1f%%)\n", w / base, (a1 > a2 ? a1 - a2 : a2 - a1) / base * 100
}'
rm -rf $out
