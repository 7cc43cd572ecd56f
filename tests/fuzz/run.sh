#!/bin/sh
# run.sh SECONDS FUZZER...: runs each libFuzzer target for SECONDS on its seeds (`make fuzz`,
# `./bootstrap.sh fuzz`). What a target finds new is kept in $DNT_BUILDDIR/fuzz-corpus/TARGET,
# so the next run starts from there; a crash is written to $DNT_BUILDDIR/fuzz-crashes/ and fails
# the run (exit 1) once every target has had its turn. One line per target: executions, speed,
# coverage. docs/internals/fuzzing.md explains the targets and their seeds.
set -u
seconds=$1
shift
src=${DNT_SRCDIR:?}
build=${DNT_BUILDDIR:?}
seeds=$src/tests/fuzz/seeds
corpus=${DNT_CORPUS:-}

# halt on the first report of either sanitizer; leaks count
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# fuzz-fields reads the runtime's event layouts from here
export DNT_DATADIR="$src/data"

mkdir -p "$build/fuzz-corpus" "$build/fuzz-crashes"
failed=
for fuzzer in "$@"; do
  name=$(basename "$fuzzer")
  # each target's seeds: its own folder, real files beside, and its input size limit
  dirs= max_len=65536
  case $name in
    ntr-fuzzer) dirs="$seeds/ntr" ;;
    fuzz-ipc) dirs="$seeds/ipc" ;;
    fuzz-http) dirs="$seeds/http" max_len=9000 ;;
    fuzz-cli) dirs="$seeds/cli" max_len=4096 ;;
    fuzz-elfcore) dirs="$seeds/elfcore" max_len=131072 ;;
    fuzz-coredump) dirs="$seeds/elfcore $seeds/coredump" max_len=131072 ;;
    fuzz-gcinfo) dirs="$seeds/gcinfo" max_len=4096 ;;
    fuzz-perf-script) dirs="$seeds/perf-script" ;;
    fuzz-perfmap) dirs="$seeds/perfmap" ;;
    fuzz-perfdata) dirs="$seeds/perfdata" ;;
    fuzz-gcdump) dirs="$seeds/gcdump" max_len=262144 ;;
    fuzz-schema) dirs="$src/data $seeds/schema" ;;
    fuzz-r2r)
      # the shared framework's small ReadyToRun assemblies, when .NET is installed (not committed:
      # Microsoft's files); without them the target starts from nothing
      max_len=262144
      dirs="$build/fuzz-seeds-r2r"
      mkdir -p "$dirs"
      for f in /usr/share/dotnet/shared/Microsoft.NETCore.App/*/System.*.dll \
               /usr/lib/dotnet/shared/Microsoft.NETCore.App/*/System.*.dll; do
        [ -f "$f" ] && [ "$(wc -c <"$f")" -le "$max_len" ] && [ "$(wc -c <"$f")" -ge 20000 ] && cp "$f" "$dirs/"
      done
      ;;
    fuzz-pdb)
      # the sample's own portable PDB, from a build beside this one that made it (a build output:
      # not committed), and the inputs that once failed (seeds/pdb)
      max_len=262144
      mkdir -p "$build/fuzz-seeds-pdb"
      dirs="$seeds/pdb $build/fuzz-seeds-pdb"
      for f in "$build"/tests/targets/sample/out/Sample.pdb "$build"/../*/tests/targets/sample/out/Sample.pdb; do
        [ -f "$f" ] && cp "$f" "$build/fuzz-seeds-pdb/" && break
      done
      ;;
    fuzz-fields | fuzz-counters | fuzz-trace-read | fuzz-gc | fuzz-jitpool | fuzz-allocs | fuzz-exclocks | fuzz-heap)
      dirs="$seeds/traces"
      # the public corpus of real traces, when it is there (read only: new finds go to fuzz-corpus)
      if [ -n "$corpus" ] && [ -d "$corpus" ]; then
        for d in "$corpus"/*/; do dirs="$dirs ${d%/}"; done
      fi
      ;;
    *) echo "run.sh: no seeds known for '$name'" >&2; failed="$failed $name"; continue ;;
  esac
  mkdir -p "$build/fuzz-corpus/$name"
  log=$build/fuzz-crashes/$name.log
  # shellcheck disable=SC2086 # dirs is a list
  "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-crashes/$name-" \
    "$build/fuzz-corpus/$name" $dirs >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  printf '%-18s %10s executions in %ss (%s/s), coverage %s edges%s\n' "$name" "${execs:-?}" "$seconds" \
    "${speed:-?}" "${cov:-?}" "$([ "$rc" -eq 0 ] || echo ", FAILED (exit $rc): $log")"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -n 8 | sed 's/^/    /'
    failed="$failed $name"
  fi
done
if [ -n "$failed" ]; then
  echo "fuzzing found a problem in:$failed (inputs in $build/fuzz-crashes/)" >&2
  exit 1
fi
