#!/bin/sh
# dntrace serve as an agent (issue 14): two sample targets, a profile request every 15 s (10 s
# of thread time, the two targets in turn) and a /metrics scrape every 5 s, for
# SERVE_BENCH_SECONDS (default 120; the figure is for 600: run with
# SERVE_BENCH_SECONDS=600). Prints serve's average CPU (% of one core, from its schedstat), its
# peak RSS in the first and in the last minute (VmRSS read every second), and what the requests
# got. Nothing is asserted. CPU is summed over all of serve's threads (the profiles are parsed on
# libuv's thread pool). Called by tests/bench.sh; DNT_BUILDDIR and DNT_BIN as there.
set -u
b=$DNT_BUILDDIR
exe=$b/tests/targets/sample/out/Sample
secs=${SERVE_BENCH_SECONDS:-120}
if [ ! -x "$exe" ]; then
  echo "(no sample target: serve bench skipped)"
  exit 0
fi
echo "== dntrace serve: 2 targets, a 10 s profile every 15 s, a scrape every 5 s, for $secs s"
"$exe" --no-cpu >/dev/null 2>&1 &
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
$DNT_BIN serve -p $p1,$p2 --label bench=1 --listen 127.0.0.1:$port >$out/serve.log 2>&1 &
srv=$!
for _ in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:$port/metrics && break; sleep 0.1; done
# ns on a CPU of every thread (/proc/PID/schedstat is the main thread's only)
cpu_ns() { cat /proc/$srv/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
t0=$(cpu_ns)
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
wait_for=0
while [ $wait_for -lt 15 ] && [ "$(wc -l <$out/profiles)" -lt $(( (secs + 14) / 15 )) ]; do sleep 1; wait_for=$((wait_for + 1)); done
t1=$(cpu_ns)
elapsed=$(( $(date +%s) - start ))
kill -INT $srv; wait $srv 2>/dev/null || true
kill $p1 $p2; wait $p1 $p2 2>/dev/null || true
awk -v a="$t0" -v b="$t1" -v s="$elapsed" 'BEGIN { printf "serve: %.2f%% of a core on average over %d s\n", (b - a) / 1e9 / s * 100, s }'
awk -v last=$((secs - 60)) '$1 < 60 && $2 > f { f = $2 } $1 >= last && $2 > l { l = $2 }
  END { printf "serve: peak RSS %.1f MB in the first minute, %.1f MB in the last\n", f / 1024, l / 1024 }' $out/rss
awk '{ n++; if ($1 == 200) ok++; sz += $2; if ($3 > mx) mx = $3 }
  END { printf "profiles: %d of %d answered 200, %.0f KB each on average, the slowest in %.1f s\n", ok, n, n ? sz / n / 1024 : 0, mx }' $out/profiles
sort -n -k2 $out/scrapes | awk '{ n++; if ($1 == 200) ok++; t[n] = $2 }
  END { printf "scrapes: %d of %d answered 200, median %.1f ms, max %.1f ms\n", ok, n, t[int((n + 1) / 2)] * 1000, t[n] * 1000 }'
rm -rf $out
