#!/usr/bin/env bash
# bootstrap.sh: set up a fresh Debian machine for dntrace and run one of its jobs.
#
#   ./bootstrap.sh demo    install what is missing, build, start the sample .NET app, trace it and
#                          print its hottest methods
#   ./bootstrap.sh check   install what is missing, build with ASan+UBSan, run every test (and
#                          the trace readers' tests again built by clang)
#   ./bootstrap.sh bench   build optimised and run the benchmarks (figures printed, not asserted)
#   ./bootstrap.sh fuzz [SECONDS]  build the libFuzzer targets with clang and run each SECONDS (60)
#   ./bootstrap.sh deps | build      only those steps
#
# Idempotent: packages already present are not reinstalled, configure runs only when its inputs
# changed, make rebuilds only what changed. Build trees: build/ (demo, bench), build-check/ (tests)
# and build-clang/ (the trace readers' tests again, built by clang with its ASan+UBSan).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
top=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

packages=(build-essential autoconf autoconf-archive automake libtool pkg-config
          libuv1-dev libxml2-dev zlib1g-dev libcriterion-dev
          linux-perf util-linux procps tmux curl unzip python3
          chromium fonts-dejavu-core time prometheus \
          clang libclang-rt-14-dev golang-go \
          liblzma-dev libicu-dev podman runc catatonit \
          debhelper lintian fakeroot stress-ng gdb)
# chromium renders the flame graph in a test; prometheus (promtool and the server) checks and
# scrapes `counters serve` in a test; clang builds build-clang/ (clang's UBSan) and the fuzzers;
# npm fetches speedscope, the viewer a test loads the timelines into (in chromium); golang-go
# brings `go tool pprof`, which reads the pprof output in a test;
# liblzma-dev and libicu-dev (headers) serve --enable-static-binary; podman, runc and catatonit
# (the pods' pause image, built locally) run tests/containers; debhelper, lintian and fakeroot
# build and check the Debian package (`make deb`); stress-ng holds the CPUs for tests/ci-under-load.sh;
# gdb's gcore writes the core of a process that is not .NET (tests/runtime/test-dump-analyze.c)

say() { printf '==> %s\n' "$*"; }
# a step of check, with the time it started (what a slow run's log shows first)
step() { printf '==> [%s] %s\n' "$(date +%T)" "$*"; }

# The public trace corpus beside the clone (CI has it); exported so `make distcheck`, which runs
# the tests from a copy elsewhere, finds it too.
if [ -z "${DNT_CORPUS:-}" ] && [ -d "$top/../shared/corpus" ]; then
  DNT_CORPUS=$(cd "$top/../shared/corpus" && pwd)
  export DNT_CORPUS
fi

# speedscope's release, a real viewer for the timeline tests (test-convert): the npm package, at a
# pinned version, unpacked into build-tools/speedscope (exported so `make distcheck` finds it)
SPEEDSCOPE_VERSION=1.25.0
DNT_SPEEDSCOPE=${DNT_SPEEDSCOPE:-$top/build-tools/speedscope}
export DNT_SPEEDSCOPE
DNT_DOTNET_TOOLS=${DNT_DOTNET_TOOLS:-$top/build-tools/dotnet-tools}
export DNT_DOTNET_TOOLS

speedscope() {
  [ -f "$DNT_SPEEDSCOPE/.version-$SPEEDSCOPE_VERSION" ] && return 0
  say "npm pack speedscope@$SPEEDSCOPE_VERSION ($DNT_SPEEDSCOPE)"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "speedscope@$SPEEDSCOPE_VERSION" >/dev/null && tar xzf speedscope-*.tgz)
  rm -rf "$DNT_SPEEDSCOPE"
  mkdir -p "$(dirname "$DNT_SPEEDSCOPE")"
  mv "$tmp/package" "$DNT_SPEEDSCOPE"
  touch "$DNT_SPEEDSCOPE/.version-$SPEEDSCOPE_VERSION"
  rm -rf "$tmp"
}

deps() {
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # npm: Debian's, unless the machine has its own Node.js (whose npm Debian's package conflicts with)
  if ! command -v npm >/dev/null 2>&1; then
    say "installing npm"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  containers_conf
  if ! command -v dotnet >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
      echo "bootstrap: no 'dotnet' on PATH: CI needs the .NET SDK to build the sample target" >&2
      exit 1
    fi
    say "warning: no 'dotnet' on PATH: the sample target cannot be built, so runtime tests will skip"
  fi
  speedscope
  dotnet_tool dotnet-gcdump "the heap snapshots"
  dotnet_tool dotnet-dump "dump analyze"
}

# Microsoft's diagnostics tools from NuGet, oracles that tests hold dntrace to, in
# $DNT_DOTNET_TOOLS (a tool path of the build's: nothing of the machine's): dotnet-gcdump for
# tests/runtime/test-gcdump.c's heap snapshots, dotnet-dump for tests/runtime/test-dump-analyze.c's
# readings of a core
DIAG_TOOLS_VERSION=10.0.750501
dotnet_tool() { # NAME WHAT-IT-CHECKS
  command -v dotnet >/dev/null 2>&1 || return 0
  [ -x "$DNT_DOTNET_TOOLS/$1" ] && return 0
  say "dotnet tool install $1 $DIAG_TOOLS_VERSION ($DNT_DOTNET_TOOLS)"
  if ! DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 dotnet tool install --tool-path "$DNT_DOTNET_TOOLS" "$1" \
    --version "$DIAG_TOOLS_VERSION" >/dev/null; then
    if [ "${CI:-}" = true ]; then
      echo "bootstrap: cannot install $1 from NuGet (CI needs it: $2's oracle)" >&2
      exit 1
    fi
    say "warning: $1 not installed: the comparison of $2 with it will skip"
  fi
}

# What podman needs on these machines, as a drop-in of its own (the distribution's files are left
# alone): Debian's crun refuses the hosts' hybrid cgroups, so runc; no default ulimits (the
# containers' defaults exceed what the host allows); cgroupfs and file events (no systemd).
CONTAINERS_CONF=/etc/containers/containers.conf.d/dntrace.conf
containers_conf() {
  local want
  want=$(printf '%s\n' '[containers]' 'default_ulimits = []' '' '[engine]' 'runtime = "runc"' \
    'cgroup_manager = "cgroupfs"' 'events_logger = "file"')
  [ "$(cat "$CONTAINERS_CONF" 2>/dev/null)" = "$want" ] && return 0
  say "writing $CONTAINERS_CONF (podman: runc, no default ulimits)"
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo mkdir -p "$(dirname "$CONTAINERS_CONF")"
  printf '%s\n' "$want" | $sudo tee "$CONTAINERS_CONF" >/dev/null
}

# configure_tree DIR [configure args...]: (re)configure DIR when configure or its arguments changed
configure_tree() {
  local dir=$1; shift
  local inputs=(configure.ac Makefile.am $(find . -name Makemodule.am -not -path './build*'))
  local stale=0 f
  [ -x configure ] || stale=1
  for f in "${inputs[@]}"; do [ "$f" -nt configure ] && stale=1; done
  if ((stale)); then say "autoreconf"; autoreconf -fi >/dev/null 2>&1 || autoreconf -fi; fi
  mkdir -p "$dir"
  local want="$*"
  if [ ! -f "$dir/Makefile" ] || [ configure -nt "$dir/config.status" ] ||
     [ "$(cat "$dir/.configure-args" 2>/dev/null)" != "$want" ]; then
    say "configure $want ($dir)"
    (cd "$dir" && "$top/configure" -q "$@") && printf '%s' "$want" > "$dir/.configure-args"
  fi
}

build() {
  configure_tree build CFLAGS="-O2 -g"
  say "make (build/)"
  make -s -C build -j"$jobs"
}

# test_files DIR EXT: the harness's .log or .trs files of every test program in DIR, whatever
# its folder (tests/unit/ipc/, tests/cli/, tests/runtime/, ...)
test_files() {
  find "$1/tests" -name "*.$2" -not -path '*/oracle-te/*' -not -path '*/targets/*' 2>/dev/null | sort
}

# Totals every test case the harness ran in the given trees (one :test-result: line per case in
# the .trs files).
summarize() {
  local dir pass=0 fail=0 skip=0 n
  for dir in "$@"; do
    n=$(test_files "$dir" trs | xargs -r cat | grep -c '^:test-result: \(PASS\|XFAIL\)' || true); pass=$((pass + n))
    n=$(test_files "$dir" trs | xargs -r cat | grep -c '^:test-result: \(FAIL\|XPASS\|ERROR\)' || true); fail=$((fail + n))
    n=$(test_files "$dir" trs | xargs -r cat | grep -c '^:test-result: SKIP' || true); skip=$((skip + n))
  done
  echo "$pass passed, $fail failed, $skip skipped"
}

# After `make check` in DIR (its output in DIR/check-output.txt) ended with status RC: the
# harness's lines, and the failing logs when it failed.
report_check() {
  local dir=$1 rc=$2
  grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):|^# (TOTAL|PASS|SKIP|FAIL|ERROR)' "$dir"/check-output.txt || true
  if [ "$rc" -ne 0 ]; then
    say "make check failed in $dir/; the failing logs:"
    test_files "$dir" log | xargs -r grep -l -E '^(not ok|ERROR)' | while read -r f; do
      echo "--- $f"; grep -v '^ok ' "$f" | tail -n 60
    done
    test_files "$dir" trs | xargs -r grep -q ':test-result:' || tail -n 40 "$dir"/check-output.txt
  fi
}

# failures DIR...: each failed case with the lines its log gives after it (the assertion's words)
failures() {
  local dir f
  for dir in "$@"; do
    for f in $(test_files "$dir" log); do
      [ -f "$f" ] && grep -q -E '^(not ok|ERROR)' "$f" || continue
      echo "--- failed in $f:"
      grep -A6 -E '^(not ok|ERROR)' "$f" | grep -v '^ok ' | head -n 30
    done
  done
}

# The tests of the code that reads traces, built by clang: its UBSan checks more than gcc's
# (NULL + 0, for one, which aborted on real traces; issue 19). Only these programs are built
# (check_PROGRAMS), and the sample target is build-check/'s, not built again (check_DATA).
CLANG_TESTS="tests/unit/nettrace/test-ntr-parser tests/unit/nettrace/test-ntr-malformed tests/unit/nettrace/test-ntr-corpus tests/cli/test-events
             tests/cli/test-report tests/cli/test-convert"

check() {
  configure_tree build-check --enable-asan CFLAGS="-O1 -g"
  test_files build-check trs | xargs -r rm -f; test_files build-check log | xargs -r rm -f
  local rc=0 crc=0 side
  step "build (build-check/, ASan+UBSan: the programs, the sample app, the TraceEvent oracle)"
  if ! make -C build-check -j"$jobs" check TESTS= >build-check/build-output.txt 2>&1; then
    tail -n 60 build-check/build-output.txt
    say "the build failed in build-check/ (log: build-check/build-output.txt)"
    return 1
  fi
  # The suite mostly waits on .NET processes, so the other trees build beside it: clang's tests
  # of the trace readers (they take build-check's sample app), then the fuzzers under CI. No test
  # depends on having the CPUs to itself (issue 23; tests/ci-under-load.sh shows it).
  check_side >build-check/side-output.txt 2>&1 &
  side=$!
  step "make check (build-check/, ASan+UBSan)"
  make -C build-check -j"$((jobs * 2))" check >build-check/check-output.txt 2>&1 || rc=$?
  report_check build-check "$rc"
  wait "$side" || crc=$?
  cat build-check/side-output.txt
  [ "$crc" -eq 0 ] || rc=$crc

  # under CI the fuzzers run beside distcheck (each for a fixed time: a busy machine makes fewer
  # executions, not a different verdict)
  local fuzzing= frc=0
  if [ "${CI:-}" = true ]; then
    step "fuzz (build-fuzz/, ${FUZZ_CI_SECONDS}s per target)"
    mkdir -p build-fuzz
    fuzz_run "$FUZZ_CI_SECONDS" >build-fuzz/fuzz-output.txt 2>&1 &
    fuzzing=$!
  fi
  if [ "$rc" -eq 0 ]; then
    # the release tarball must build and pass from a read-only tree as well
    configure_tree build CFLAGS="-O2 -g"
    step "make distcheck (build/)"
    if ! make -C build -j"$((jobs * 2))" distcheck >build/distcheck-output.txt 2>&1; then
      tail -n 40 build/distcheck-output.txt
      say "make distcheck failed (log: build/distcheck-output.txt)"
      rc=1
    fi
  fi
  if [ -n "$fuzzing" ]; then
    wait "$fuzzing" || frc=$?
    cat build-fuzz/fuzz-output.txt
    if [ "$frc" -ne 0 ]; then say "fuzzing failed (its crashes: build-fuzz/fuzz-crashes/)"; rc=1; fi
  fi
  step "done"
  # a failed distcheck keeps its tree, and with it the logs of the suite it ran
  local trees=(build-check build-clang) d
  for d in build/dntrace-*/_build/sub; do [ -d "$d/tests" ] && trees+=("$d"); done
  failures "${trees[@]}"    # again at the end, where a cut log still shows them
  summarize "${trees[@]}"   # the last line: what CI reads
  return "$rc"
}

# check's side job, beside build-check's suite: build-clang's tests, and the fuzzers' build under
# CI (they run after distcheck). Its status is the clang tests'.
check_side() {
  local crc=0 tests
  tests=$(echo $CLANG_TESTS)
  configure_tree build-clang CC=clang --enable-asan CFLAGS="-O1 -g"
  step "make check (build-clang/, clang ASan+UBSan: the trace readers' tests)"
  test_files build-clang trs | xargs -r rm -f; test_files build-clang log | xargs -r rm -f
  DNT_TARGET_BUILDDIR="$top/build-check" make -C build-clang -j"$jobs" check TESTS="$tests" \
    check_PROGRAMS="$tests" check_DATA= SHARED_TESTS= ALONE_TESTS= >build-clang/check-output.txt 2>&1 || crc=$?
  report_check build-clang "$crc"
  if [ "${CI:-}" = true ]; then
    configure_tree build-fuzz CC=clang --enable-fuzzing CFLAGS="-O1 -g"
    step "build (build-fuzz/: the libFuzzer targets)"
    make -s -C build-fuzz -j"$jobs" fuzzers >build-fuzz/build-output.txt 2>&1 ||
      { tail -n 40 build-fuzz/build-output.txt; say "the fuzzers' build failed"; }
  fi
  return "$crc"
}

# ---- fuzzing: tests/fuzz, docs/internals/fuzzing.md ----
# CI runs every target this long (about 11 of them: some 80 s in all, after the clang build).
FUZZ_CI_SECONDS=7

# fuzz SECONDS: one clang tree (build-fuzz/: libFuzzer, ASan, UBSan), every target SECONDS long;
# a crash fails it, its input in build-fuzz/fuzz-crashes/.
fuzz() {
  local seconds=$1
  case $seconds in '' | *[!0-9]*) echo "bootstrap: fuzz takes a number of seconds, not '$seconds'" >&2; return 2 ;; esac
  say "make fuzz (build-fuzz/, ${seconds}s per target)"
  fuzz_run "$seconds"
}

# fuzz_run SECONDS: builds what is not built yet in build-fuzz/, runs every target SECONDS long
fuzz_run() {
  configure_tree build-fuzz CC=clang --enable-fuzzing CFLAGS="-O1 -g"
  make -s -C build-fuzz -j"$jobs" fuzz FUZZ_SECONDS="$1"
}

# demo_start EXE [ARGS...]: starts the sample in the background, its output in a temp file, and
# waits for its "ready" line (up to 120 s: a loaded machine starts .NET slowly; fails with a
# message when the sample exits or never gets there); demo_stop (also the EXIT trap) ends it and removes the file (and the
# socket and pipes the runtime leaves when a signal ends it). Every
# step of the cleanup tolerates failure: under `set -e` a failing `wait` on the killed sample
# (status 143) would otherwise end the trap early, leave the file and become the script's status.
demo_start() {
  demo_out=$(mktemp)
  "$@" >"$demo_out" 2>&1 &
  demo_pid=$!
  trap demo_stop EXIT
  local i
  for i in $(seq 1200); do
    grep -q '^ready' "$demo_out" && return 0
    kill -0 "$demo_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "demo: the sample did not get ready (${i}00 ms); it printed:" >&2
  cat "$demo_out" >&2
  return 1
}

demo_stop() {
  if [ -n "${demo_pid:-}" ]; then
    kill "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
    # a runtime ended by a signal leaves its diagnostic socket and debugger pipes in its TMPDIR
    rm -f "${TMPDIR:-/tmp}/dotnet-diagnostic-$demo_pid-"*-socket "${TMPDIR:-/tmp}/clr-debug-pipe-$demo_pid-"* || true
    demo_pid=
  fi
  if [ -n "${demo_out:-}" ]; then
    rm -f "$demo_out" || true
    demo_out=
  fi
}

# demo_run BUILDDIR [OUTDIR]: the demo's steps on a built tree (the sample app built there); the
# trace goes to OUTDIR (default BUILDDIR)
demo_run() {
  local dir=$1 out=${2:-$1}
  local exe=$dir/tests/targets/sample/out/Sample
  [ -x "$exe" ] || { echo "demo: the sample app was not built (is dotnet installed?)" >&2; return 1; }
  demo_start "$exe" || return 1
  local pid=$demo_pid
  say "dntrace ps"
  "$dir"/dntrace ps
  say "dntrace info -p $pid"
  "$dir"/dntrace info -p "$pid"
  say "dntrace collect -p $pid --duration 5s -o $out/demo.nettrace"
  rm -f "$out"/demo.nettrace
  "$dir"/dntrace collect -p "$pid" --duration 5s -o "$out"/demo.nettrace
  # native time folded into its caller (the default, as dotnet-trace's): the method each thread waits in
  say "dntrace report $out/demo.nettrace -n 8"
  "$dir"/dntrace report "$out"/demo.nettrace -n 8
  demo_stop
}

demo() {
  build
  say "building the sample .NET app"
  make -s -C build sample-target
  demo_run build
}

bench() {
  build
  make -s -C build bench
}

# sourced (tests/bootstrap-demo.sh): only the functions
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case "${1:-}" in
  deps) deps ;;
  build) deps; build ;;
  check) deps; check ;;
  demo) deps; demo ;;
  bench) deps; bench ;;
  fuzz) deps; fuzz "${2:-60}" ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
