#!/usr/bin/env bash
# The whole suite under load (issue 23): `CI=true ./bootstrap.sh check` while stress-ng's busy
# workers (one a CPU: `stress-ng --cpu N`) hold every core, as a CI machine's neighbours may. A
# test that fails here but not on an idle machine asserts how fast the machine was, not what
# dntrace did. Prints the suite's closing line, then one line: wall time, the mean 1-minute load
# average over the run, and the suite's status (which is this script's).
#
#   tests/ci-under-load.sh [--clean] [--workers N]
#     --clean      run on a fresh clone of HEAD beside this tree (so ../shared is found as on CI),
#                  removed afterwards when it passed; otherwise on this tree
#     --workers N  stress-ng's CPU workers (default: the number of CPUs)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
clean=0
workers=$(nproc 2>/dev/null || echo 2)
while (($#)); do
  case $1 in
    --clean) clean=1 ;;
    --workers) shift; workers=${1:?--workers wants a number} ;;
    -h | --help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ci-under-load: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case $workers in '' | *[!0-9]* | 0) echo "ci-under-load: --workers wants a positive number" >&2; exit 2 ;; esac
if ! command -v stress-ng >/dev/null 2>&1; then
  echo "ci-under-load: no stress-ng (./bootstrap.sh deps installs it)" >&2
  exit 2
fi

tree=$top
if ((clean)); then
  tree=$(mktemp -d "$top/../ci-under-load.XXXXXX")
  git -C "$top" clone -q "$top" "$tree"
  echo "==> a clean clone of $(git -C "$top" rev-parse --short HEAD) in $tree"
fi
log=$(mktemp "${TMPDIR:-/tmp}/ci-under-load.XXXXXX.log")
loads=$(mktemp "${TMPDIR:-/tmp}/ci-under-load.XXXXXX.loads")

stress_pid= sampler_pid=
stop_load() {
  [ -n "$stress_pid" ] && kill -- "-$stress_pid" 2>/dev/null || true
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  stress_pid= sampler_pid=
}
trap 'stop_load; rm -f "$loads"' EXIT

# stress-ng in a process group of its own, so that its workers go with it
set -m
stress-ng --cpu "$workers" --timeout 0 --quiet &
stress_pid=$!
set +m
# the 1-minute load average every 15 s, for the closing line's mean
(while :; do cut -d' ' -f1 /proc/loadavg >>"$loads"; sleep 15; done) &
sampler_pid=$!

echo "==> CI=true ./bootstrap.sh check beside stress-ng --cpu $workers (log: $log)"
start=$(date +%s)
rc=0
(cd "$tree" && CI=true ./bootstrap.sh check) >"$log" 2>&1 || rc=$?
wall=$(($(date +%s) - start))
stop_load

grep -E '^--- failed in|^  - |Assertion failed' "$log" | head -n 40 || true
tail -n 1 "$log"
mean=$(awk '{s += $1; n++} END {if (n) printf "%.2f", s / n; else print "?"}' "$loads")
printf 'under load: %dm%02ds wall, mean load average %s (%d stress-ng workers), status %d\n' \
  $((wall / 60)) $((wall % 60)) "$mean" "$workers" "$rc"
if ((clean)) && ((rc == 0)); then rm -rf "$tree"; fi
exit "$rc"
