#!/bin/bash
# `./bootstrap.sh demo` ends with status 0 and leaves no temporary file (issue 18, item 1): the
# demo's cleanup (bootstrap.sh's demo_start/demo_stop, sourced here) under `set -e` with a
# stand-in process, then the demo's real steps on this build tree with the sample app. TAP output.
#
#   tests/bootstrap-demo.sh      (DNT_SRCDIR and DNT_BUILDDIR as `make check` sets them)

srcdir=${DNT_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${DNT_BUILDDIR:-$PWD}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "1..4"

# run_script NAME BODY: BODY in a fresh bash with bootstrap.sh sourced, `set -e` on, its temp
# files in a directory of its own; prints the exit status
run_script() {
  local tmp=$work/$1
  mkdir -p "$tmp"
  TMPDIR=$tmp bash -c "set -euo pipefail; source '$srcdir/bootstrap.sh'; $2" >"$work/$1.log" 2>&1
  echo $?
}

# leftovers NAME: the temp files mktemp made there and the runtime's socket and pipes, which
# nobody removed
leftovers() {
  find "$work/$1" -maxdepth 1 \( -name 'tmp.*' -o -name 'dotnet-diagnostic-*' -o -name 'clr-debug-pipe-*' \) |
    sed "s|^$work/$1/||" | tr '\n' ' '
}

# 1: a run that succeeds: status 0, the stand-in stopped, its output file gone
rc=$(run_script ok 'demo_start sh -c "echo ready; exec sleep 300"; echo "$demo_pid" >"$TMPDIR/../ok.pid"; echo demo body')
pid=$(cat "$work/ok.pid" 2>/dev/null)
left=$(leftovers ok)
if [ "$rc" = 0 ] && [ -z "$left" ] && [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
  echo "ok 1 - the demo's cleanup: status 0, the sample stopped, no temp file"
else
  echo "not ok 1 - status $rc (want 0), left '$left', stand-in $pid still running: $(kill -0 "$pid" 2>/dev/null && echo yes || echo no)"
  sed 's/^/#   /' "$work/ok.log"
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
fi

# 2: a run that fails keeps its own status and still cleans up
rc=$(run_script fail 'demo_start sh -c "echo ready; exec sleep 300"; echo "$demo_pid" >"$TMPDIR/../fail.pid"; false')
pid=$(cat "$work/fail.pid" 2>/dev/null)
left=$(leftovers fail)
if [ "$rc" = 1 ] && [ -z "$left" ] && [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
  echo "ok 2 - a failing demo keeps its status (1) and still cleans up"
else
  echo "not ok 2 - status $rc (want 1), left '$left'"
  sed 's/^/#   /' "$work/fail.log"
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
fi

# 3: a sample that exits before "ready" fails the start at
# once, with what it printed, instead of the demo going on without it
rc=$(run_script early 'demo_start sh -c "echo starting; exit 3"; echo "went on"')
if [ "$rc" = 1 ] && grep -q 'did not get ready' "$work/early.log" && grep -q '^starting' "$work/early.log" &&
   ! grep -q 'went on' "$work/early.log" && [ -z "$(leftovers early)" ]; then
  echo "ok 3 - a sample that exits before 'ready' stops the demo with what it printed"
else
  echo "not ok 3 - status $rc (want 1), left '$(leftovers early)'"
  sed 's/^/#   /' "$work/early.log"
fi

# 4: the demo's real steps (ps, info, collect 5 s, report) on this build tree
if [ ! -x "$builddir/tests/targets/sample/out/Sample" ]; then
  if [ "${CI:-}" = true ]; then
    echo "not ok 4 - no sample app in $builddir (CI=true: a missing runtime is a failure)"
  else
    echo "ok 4 # SKIP no sample app in $builddir (needs dotnet)"
  fi
  exit 0
fi
rc=$(run_script real "demo_run '$builddir' '$work'")
left=$(leftovers real)
if [ "$rc" = 0 ] && [ -z "$left" ] && grep -q 'CountPrimes' "$work/real.log"; then
  echo "ok 4 - the demo on the built tree: status 0, its report, no temp file, no socket left"
else
  echo "not ok 4 - status $rc (want 0), left '$left', CountPrimes in the report: $(grep -c CountPrimes "$work/real.log")"
  sed 's/^/#   /' "$work/real.log" | tail -n 40
fi
