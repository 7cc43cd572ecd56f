#!/usr/bin/env bash
# bootstrap.sh: set up a fresh Debian machine for dntrace and run one of its jobs.
#
#   ./bootstrap.sh demo    install what is missing, build, start the sample .NET app, trace it and
#                          print its hottest methods
#   ./bootstrap.sh check   install what is missing, build with ASan+UBSan, run every test
#   ./bootstrap.sh bench   build optimised and run the benchmarks (figures printed, not asserted)
#   ./bootstrap.sh deps | build      only those steps
#
# Idempotent: packages already present are not reinstalled, configure runs only when its inputs
# changed, make rebuilds only what changed. Build trees: build/ (demo, bench) and build-check/ (tests).
set -euo pipefail
cd "$(dirname "$0")"
top=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

packages=(build-essential autoconf autoconf-archive automake libtool pkg-config
          libuv1-dev libxml2-dev zlib1g-dev libcriterion-dev
          linux-perf util-linux procps tmux curl unzip python3
          chromium fonts-dejavu-core time)   # chromium renders the flame graph in a test

say() { printf '==> %s\n' "$*"; }

# The public trace corpus beside the clone (CI has it); exported so `make distcheck`, which runs
# the tests from a copy elsewhere, finds it too.
if [ -z "${DNT_CORPUS:-}" ] && [ -d "$top/../shared/corpus" ]; then
  DNT_CORPUS=$(cd "$top/../shared/corpus" && pwd)
  export DNT_CORPUS
fi

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
  if ! command -v dotnet >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
      echo "bootstrap: no 'dotnet' on PATH: CI needs the .NET SDK to build the sample target" >&2
      exit 1
    fi
    say "warning: no 'dotnet' on PATH: the sample target cannot be built, so runtime tests will skip"
  fi
}

# configure_tree DIR [configure args...]: (re)configure DIR when configure or its arguments changed
configure_tree() {
  local dir=$1; shift
  local inputs=(configure.ac Makefile.am */Makemodule*.am tests/*/Makemodule*.am)
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

# Totals every test case the harness ran (one :test-result: line per case in the .trs files).
summarize() {
  local dir=$1 pass fail skip
  pass=$(cat "$dir"/tests/*.trs 2>/dev/null | grep -c '^:test-result: \(PASS\|XFAIL\)' || true)
  fail=$(cat "$dir"/tests/*.trs 2>/dev/null | grep -c '^:test-result: \(FAIL\|XPASS\|ERROR\)' || true)
  skip=$(cat "$dir"/tests/*.trs 2>/dev/null | grep -c '^:test-result: SKIP' || true)
  echo "$pass passed, $fail failed, $skip skipped"
}

check() {
  configure_tree build-check --enable-asan CFLAGS="-O1 -g"
  say "make check (build-check/, ASan+UBSan)"
  rm -f build-check/tests/*.trs build-check/tests/*.log
  local rc=0
  make -C build-check -j"$jobs" check >build-check/check-output.txt 2>&1 || rc=$?
  grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):|^# (TOTAL|PASS|SKIP|FAIL|ERROR)' build-check/check-output.txt || true
  if [ "$rc" -ne 0 ]; then
    say "make check failed; the failing logs:"
    grep -l -E '^(not ok|ERROR)' build-check/tests/*.log 2>/dev/null | while read -r f; do
      echo "--- $f"; grep -v '^ok ' "$f" | tail -n 60
    done
    grep -q ':test-result:' build-check/tests/*.trs 2>/dev/null || tail -n 40 build-check/check-output.txt
  fi
  if [ "$rc" -eq 0 ]; then
    # the release tarball must build and pass from a read-only tree as well
    configure_tree build CFLAGS="-O2 -g"
    say "make distcheck (build/)"
    if ! make -C build -j"$jobs" distcheck >build/distcheck-output.txt 2>&1; then
      tail -n 40 build/distcheck-output.txt
      say "make distcheck failed (log: build/distcheck-output.txt)"
      rc=1
    fi
  fi
  summarize build-check   # the last line: what CI reads
  return "$rc"
}

demo() {
  build
  say "building the sample .NET app"
  make -s -C build sample-target
  local exe=build/tests/targets/sample/out/Sample
  [ -x "$exe" ] || { echo "demo: the sample app was not built (is dotnet installed?)" >&2; exit 1; }
  demo_out=$(mktemp)
  "$exe" >"$demo_out" 2>&1 &
  demo_pid=$!
  trap 'kill $demo_pid 2>/dev/null; wait $demo_pid 2>/dev/null; rm -f "$demo_out"' EXIT
  local out=$demo_out pid=$demo_pid
  for _ in $(seq 100); do grep -q '^ready' "$out" && break; sleep 0.1; done
  say "dntrace ps"
  build/dntrace ps
  say "dntrace info -p $pid"
  build/dntrace info -p "$pid"
  say "dntrace collect -p $pid --duration 5s -o build/demo.nettrace"
  rm -f build/demo.nettrace
  build/dntrace collect -p "$pid" --duration 5s -o build/demo.nettrace
  say "dntrace report build/demo.nettrace -n 8"
  build/dntrace report build/demo.nettrace -n 8
}

bench() {
  build
  make -s -C build bench
}

case "${1:-}" in
  deps) deps ;;
  build) deps; build ;;
  check) deps; check ;;
  demo) deps; demo ;;
  bench) deps; bench ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
