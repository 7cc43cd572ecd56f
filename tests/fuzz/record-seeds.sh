#!/usr/bin/env bash
# record-seeds.sh BUILDDIR [OUTDIR]: records the fuzz targets' real seeds from the sample target
# (BUILDDIR has dntrace and `make sample-target` done; OUTDIR defaults to tests/fuzz/seeds).
# Needs dotnet, perf (root or perf_event_paranoid <= 1), gdb (gcore), python3, curl and wget.
# The sample runs with an empty environment (env -i), so no variable of this machine ends up in
# the ProcessEnvironment seed. Not run by make: the seeds are committed; rerun it when a format
# changes (a new runtime, a new perf).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: record-seeds.sh BUILDDIR [OUTDIR]}" && pwd)
out=${2:-$src/tests/fuzz/seeds}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
sample=$build/tests/targets/sample/out/Sample
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out"/{ipc,http,perf-script,perfdata,perfmap,traces,ntr,elfcore}

start_sample() { # start_sample LOG [VAR=VALUE...]: the sample, its pid in $sample_pid
  local log=$1
  shift
  env -i PATH=/usr/bin:/bin HOME="$work" DOTNET_CLI_TELEMETRY_OPTOUT=1 "$@" "$sample" >"$log" 2>&1 &
  sample_pid=$!
  pids+=("$sample_pid")
}
wait_ready() { for _ in $(seq 100); do grep -q '^ready' "$1" && return 0; sleep 0.1; done; return 1; }

# with the tree's compiler and sanitizers, as its libdsipc.a was built
cc=$(sed -n 's/^CC = //p' "$build/Makefile")
san=$(sed -n 's/^DNT_SAN_CFLAGS = //p' "$build/Makefile")
# shellcheck disable=SC2086 # flag lists
$cc $san -O1 -g -include "$build/config.h" -I "$src/ipc" -I "$src/tests/fuzz" "$src/tests/fuzz/record-ipc.c" \
  "$build/ipc/libdsipc.a" -luv -o "$work/record-ipc"

# IPC replies and a session's first bytes
start_sample "$work/a.log"
wait_ready "$work/a.log"
"$work/record-ipc" connect "$(ls /tmp/dotnet-diagnostic-"$sample_pid"-*-socket)" "$out/ipc"

# traces: runtime events (GC, exceptions) and counters (EventCounters and the Meter), no rundown
"$build/dntrace" collect -p "$sample_pid" --rundown false --duration 1s -o "$work/gc.nettrace" \
  --providers 'Microsoft-Windows-DotNETRuntime:0x8001:5' >/dev/null
# the sample allocating from its start (fuzz-allocs): ticks, then .NET 10's samples (with the
# sampling keyword on, the runtime writes no ticks)
for k in 0x11:tick 0x80000000011:sampled; do
  env -i PATH=/usr/bin:/bin HOME="$work" DOTNET_CLI_TELEMETRY_OPTOUT=1 "$build/dntrace" collect --rundown false \
    --providers "Microsoft-Windows-DotNETRuntime:${k%%:*}:5" -o "$work/allocs-${k##*:}.nettrace" -- "$sample" \
    --alloc Sample.Payload:3000000 --seconds 0.4 --no-cpu --no-blocking --no-exceptions --no-counters >/dev/null
  cp "$work/allocs-${k##*:}.nettrace" "$out/traces/sample-allocs-${k##*:}"
done
"$build/dntrace" collect -p "$sample_pid" --rundown false --duration 3s -o "$work/counters.nettrace" \
  --providers 'System.Runtime:0:5:EventCounterIntervalSec=1,System.Diagnostics.Metrics:0x2:5:SessionId=fuzzseed;Metrics=System.Runtime;RefreshInterval=1;MaxTimeSeries=1000;MaxHistograms=10;ClientId=dntrace' >/dev/null

# perf script text, perf map and thread list of a native recording
"$build/dntrace" collect -p "$sample_pid" --native --duration 2s -o "$work/run.nettrace" >/dev/null
perf script -i "$work/run.perf.data" --ns --show-mmap-events -F comm,pid,tid,time,event,ip,sym,dso,trace \
  >"$work/run.script" 2>/dev/null

# a small perf.data of switches (some preempted: two loops share a CPU), wake-ups and cpu-clock
# samples, recorded as collect --native records them (compare reads its tracepoints itself)
perf record --quiet -e cpu-clock/freq=999/ -e sched:sched_switch -e sched:sched_waking -g -k CLOCK_MONOTONIC \
  -o "$out/perfdata/sched" -- taskset -c 0 sh -c 'busy() { i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done; };
  busy & busy; wait; sleep 0.01' >/dev/null 2>&1

# an ELF core of the sample (notes and program headers only: coredump_filter 0)
echo 0 >"/proc/$sample_pid/coredump_filter"
gcore -o "$work/core" "$sample_pid" >/dev/null 2>&1
kill "$sample_pid"
# and one of a small C program, one thread
sleep 300 &
pids+=($!)
echo 0 >"/proc/$!/coredump_filter"
gcore -o "$work/sleepcore" "$!" >/dev/null 2>&1
kill "$!"

# a runtime connecting to a reverse port: its advertise, then ResumeRuntime's reply
"$work/record-ipc" listen "$work/port.sock" "$out/ipc" &
rec=$!
sleep 0.3
start_sample "$work/b.log" DOTNET_DiagnosticPorts="$work/port.sock"
wait "$rec"
wait_ready "$work/b.log"
kill "$sample_pid"

# real HTTP requests: a one-shot listener keeps each client's request head
python3 - "$out/http" curl-get curl-head python-urllib wget curl-post-http10 <<'EOF' &
import socket, sys
out, names = sys.argv[1], sys.argv[2:]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 19411)); s.listen(4)
for name in names:
    c, _ = s.accept(); c.settimeout(2); data = b""
    while b"\r\n\r\n" not in data:
        d = c.recv(4096)
        if not d: break
        data += d
    open(out + "/" + name, "wb").write(data)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nup 1\n"); c.close()
EOF
cap=$!
sleep 0.5
curl -s http://127.0.0.1:19411/metrics >/dev/null
curl -sI 'http://127.0.0.1:19411/metrics?name[]=process_cpu' >/dev/null
python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:19411/metrics').read()"
wget -q -O /dev/null http://127.0.0.1:19411/metrics
curl -s -0 -X POST -d 'x=1' http://127.0.0.1:19411/metrics >/dev/null
wait "$cap"

# slices of the big files, cut where perf script ends a record; seeds with their first byte;
# plain traces without the .nettrace suffix (.gitignore keeps those out of git)
python3 - "$work" "$out" <<'EOF'
import gzip, sys, zipfile, glob
work, out = sys.argv[1], sys.argv[2]
t = open(work + '/run.script', 'rb').read()
def cut(start, size):
    if start: start = t.index(b'\n\n', start) + 2
    return t[start:t.index(b'\n\n', start + size) + 2]
open(out + '/perf-script/sample-head', 'wb').write(b'\x00' + cut(0, 12000))
i = t.index(b'sched:sched_switch')
open(out + '/perf-script/sample-sched', 'wb').write(b'\x07' + cut(max(0, i - 4000), 8000))
i = t.index(b'sched:sched_waking')  # wake-ups with their call chains, as dntrace waits reads them
open(out + '/perf-script/sample-chains', 'wb').write(b'\x07' + cut(max(0, i - 2000), 10000))
m = open(work + '/run.perf.map', 'rb').read()
open(out + '/perfmap/sample-perf-map', 'wb').write(b'\x00' + m[:m.index(b'\n', 12000) + 1])
open(out + '/perfmap/sample-threads', 'wb').write(b'\x01' + open(work + '/run.threads', 'rb').read())
gc = open(work + '/gc.nettrace', 'rb').read(); ctr = open(work + '/counters.nettrace', 'rb').read()
open(out + '/traces/sample-gc', 'wb').write(gc)
open(out + '/traces/sample-counters', 'wb').write(ctr)
open(out + '/traces/sample-gc.nettrace.gz', 'wb').write(gzip.compress(gc, 9))
with zipfile.ZipFile(out + '/traces/sample-gc.nettrace.zip', 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('sample-gc.nettrace', gc)
with zipfile.ZipFile(out + '/traces/sample-counters-stored.zip', 'w', zipfile.ZIP_STORED) as z:
    z.writestr('readme.txt', b'recorded from tests/targets/sample\n'); z.writestr('sample-counters.nettrace', ctr)
open(out + '/ntr/sample-gc', 'wb').write(b'\x00' + gc)
open(out + '/elfcore/core-sample', 'wb').write(open(glob.glob(work + '/core.*')[0], 'rb').read())
open(out + '/elfcore/core-sleep', 'wb').write(open(glob.glob(work + '/sleepcore.*')[0], 'rb').read())
EOF
echo "seeds recorded in $out"
