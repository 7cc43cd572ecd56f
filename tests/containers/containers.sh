#!/bin/bash
# The static dntrace in containers, as users run it: a FROM-scratch sidecar image holding the
# binary alone, next to the sample .NET target run as uid 1654 with a private /tmp and a read-only
# root, in the ways a sidecar can be given the target (podman's --pid=container:, a pod sharing
# its PID namespace as Kubernetes' shareProcessNamespace does) and with the permissions it may
# get (root with default capabilities, root with SYS_PTRACE alone, the app's user). Images come
# from root tarballs made here (tests/containers/images.sh): nothing is pulled. TAP output.
#
# Needs podman (with runc: see bootstrap.sh for the containers.conf it writes) and root. Skipped
# without them, except under CI=true, where that is a failure.
#
#   tests/containers/containers.sh      (DNT_SRCDIR, DNT_BUILDDIR as `make check` sets them;
#                                        DNT_STATIC_BIN: the static dntrace, default: the build
#                                        tree's own when static, else tests/containers/static/dntrace)

srcdir=${DNT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${DNT_BUILDDIR:-$PWD}
sample_out=${DNT_TARGET_BUILDDIR:-$builddir}/tests/targets/sample/out
host_bin=${DNT_BIN:-$builddir/dntrace}
# shellcheck source=tests/containers/images.sh
. "$srcdir/tests/containers/images.sh"

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
note() { sed 's/^/#   /'; }
# check NAME CONDITION...: ok when CONDITION (a command) succeeds; else not ok with the last
# command's output
check() {
  local name=$1; shift
  if "$@"; then ok "$name"; else not_ok "$name"; note <"$work/last" 2>/dev/null; fi
}
# The end: the plan, and a failure when a prerequisite is missing under CI=true
give_up() {
  if [ "${CI:-}" = true ]; then
    echo "not ok 1 - $1 (CI=true: the container tests must run)"
    echo "1..1"
    exit 1
  fi
  echo "1..0 # SKIP $1"
  exit 0
}

[ "$(id -u)" -eq 0 ] || give_up "needs root (rootful podman: the app runs as uid 1654, the sidecar as root)"
command -v podman >/dev/null 2>&1 || give_up "no podman (./bootstrap.sh deps installs it)"
if [ -z "${DNT_STATIC_BIN:-}" ]; then
  if ldd "$builddir/dntrace" 2>&1 | grep -q 'not a dynamic executable'; then
    DNT_STATIC_BIN=$builddir/dntrace
  else
    DNT_STATIC_BIN=$builddir/tests/containers/static/dntrace
  fi
fi
[ -x "$DNT_STATIC_BIN" ] || give_up "no static dntrace at '$DNT_STATIC_BIN' (make check builds it where podman is)"
[ -f "$sample_out/Sample.dll" ] || give_up "the sample .NET target was not built (no dotnet?)"
runtime_version=$(runtime_dir | sed 's|.*/||')
[ -n "$runtime_version" ] || give_up "no .NET runtime found by 'dotnet --list-runtimes'"

# Unique names for this run; everything made is removed at the end, failed or not. The images
# stay: they are this build tree's cache (named by what went into them).
run=dnt$$-$(date +%s)
work=$(mktemp -d)
img_tree=$(cd "$builddir" && pwd)
cleanup() {
  podman ps -a --format '{{.Names}}' | grep "^$run-" | xargs -r podman rm -f -t 0 >/dev/null 2>&1
  podman pod ps --format '{{.Name}}' | grep "^$run-" | xargs -r podman pod rm -f -t 0 >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

t0=$(date +%s)
sidecar=$(img_sidecar "$DNT_STATIC_BIN" "$srcdir/data" "$work" 2>"$work/last") &&
  app=$(img_app "$sample_out" "$DNT_STATIC_BIN" "$work" 2>>"$work/last")
if [ -z "$sidecar" ] || [ -z "$app" ]; then
  # podman is there but cannot build or run anything: the machine's setup (containers.conf)
  cat "$work/last" >&2
  give_up "podman cannot import an image here: $(tail -n 1 "$work/last")"
fi
if ! podman run --rm --name "$run-probe" "$sidecar" --version >"$work/last" 2>&1; then
  cat "$work/last" >&2
  give_up "podman cannot run a container here (runtime runc, default_ulimits = [] in containers.conf): $(tail -n 1 "$work/last")"
fi

# ---- the binary and the image ----
mb10=10000000
ldd "$DNT_STATIC_BIN" >"$work/last" 2>&1
check "the static dntrace links no shared library (ldd: not a dynamic executable)" \
  grep -q 'not a dynamic executable' "$work/last"
strip -o "$work/stripped" "$DNT_STATIC_BIN"
bin_size=$(stat -c %s "$work/stripped")
echo "bin size $bin_size bytes" >"$work/last"
check "the static dntrace, stripped, is at most 10 MB ($bin_size bytes)" test "$bin_size" -le $mb10
image_size=$(podman image inspect --format '{{.Size}}' "$sidecar")
echo "image size $image_size bytes" >"$work/last"
check "the sidecar image is at most 10 MB ($image_size bytes)" test "$image_size" -le $mb10
podman image inspect --format '{{json .Config.Entrypoint}}' "$sidecar" >"$work/last"
check "the sidecar image's entrypoint is /dntrace" grep -qx '\["/dntrace"\]' "$work/last"
# the image is the binary and its data files, nothing else
podman image save --format oci-dir -o "$work/oci" "$sidecar" >/dev/null 2>&1
layer=$(find "$work/oci/blobs" -type f -size +1M | head -n 1)
tar -tf "$layer" 2>/dev/null | sed 's|^\./||; /^$/d; /\/$/d' | sort >"$work/last"
check "the sidecar image holds /dntrace and /usr/share/dntrace/runtime-events.xml only" \
  test "$(tr '\n' ' ' <"$work/last")" = "dntrace usr/share/dntrace/runtime-events.xml "
echo "# figure: static binary $bin_size bytes stripped, sidecar image $image_size bytes (images ready in $(($(date +%s) - t0)) s)"

# ---- the app: the sample as uid 1654, private /tmp, read-only root ----
# wait_ready NAME: until the sample in container NAME printed "ready" (20 s at most)
wait_ready() {
  local i
  for i in $(seq 200); do
    podman logs "$1" 2>/dev/null | grep -q '^ready' && return 0
    sleep 0.1
  done
  return 1
}
podman run -d --name "$run-app" --read-only --tmpfs /tmp:rw,mode=1777 "$app" >"$work/last" 2>&1 &&
  wait_ready "$run-app"
check "the app container runs the sample as uid 1654 with a read-only root" \
  test "$(podman top "$run-app" huser 2>/dev/null | sed -n 2p)" = 1654

# side NAME [podman options...] -- [dntrace args...]: the sidecar, sharing the app's PID namespace;
# its output in $work/NAME.out and .err, /out its volume ($work/NAME/ on the host); returns its
# status
side() {
  local name=$1; shift
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  mkdir -p "$work/$name" && chmod 1777 "$work/$name"
  timeout 60 podman run --rm --name "$run-$name" --pid="container:$run-app" -v "$work/$name:/out" "${opts[@]}" \
    "$sidecar" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  { echo "status $rc; stdout:"; cat "$work/$name.out"; echo "stderr:"; cat "$work/$name.err"; } >"$work/last"
  return $rc
}

# ps_shows_sample FILE PID: a row with that pid, the name Sample, the runtime version
# `dotnet --list-runtimes` names, and the sample's command line
ps_shows_sample() {
  awk -v pid="$2" -v v="$runtime_version" '$1 == pid && $2 == "Sample" && $3 == v && /\/app\/Sample\.dll/ { f = 1 }
    END { exit !f }' "$1"
}
# is_core FILE: an ELF core file (magic, then e_type ET_CORE at offset 16)
is_core() {
  [ "$(od -An -tx1 -N4 "$1" 2>/dev/null | tr -d ' \n')" = 7f454c46 ] &&
    [ "$(od -An -tx1 -j16 -N2 "$1" | tr -d ' \n')" = 0400 ]
}
# hot_in_report TRACE: the host's dntrace reads the trace and finds the sample's CPU-bound method
hot_in_report() {
  "$host_bin" report "$1" -n 20 >"$work/report.out" 2>&1 && grep -q 'Sample\.CpuWork\.CountPrimes' "$work/report.out" ||
    { cat "$work/report.out" >>"$work/last"; return 1; }
}
# one_line_socket_error NAME: status 3 and one line of stderr naming the socket's owner and mode
# and the fixes
one_line_socket_error() {
  local rc=$1 err=$work/$2.err
  [ "$rc" -eq 3 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q 'belongs to uid 1654 with mode 0600' "$err" &&
    grep -q -- '--user 1654' "$err" && grep -q 'runAsUser: 1654' "$err" && grep -q 'CAP_DAC_OVERRIDE' "$err" &&
    ! grep -qi 'ptrace' "$err"
}

# ---- (a) root, default capabilities: SYS_PTRACE is not one of them ----
side a0_ps -- ps
rc=$?
check "(a) root with default capabilities: ps warns in one line it cannot look into pid 1, and how to fix it" \
  eval '[ $rc -eq 0 ] && [ "$(wc -l <"$work/a0_ps.err")" -eq 1 ] && grep -q "cannot look into process 1 (dotnet)" "$work/a0_ps.err" &&
        grep -q -- "--user 1654:1654" "$work/a0_ps.err" && grep -q -- "--cap-add SYS_PTRACE" "$work/a0_ps.err"'
side a0 -- info -p 1
rc=$?
check "(a) root with default capabilities: info says in one line it needs SYS_PTRACE or --user 1654:1654, exit 3" \
  eval '[ $rc -eq 3 ] && [ "$(wc -l <"$work/a0.err")" -eq 1 ] && grep -q "CAP_SYS_PTRACE" "$work/a0.err" &&
        grep -q -- "--user 1654:1654" "$work/a0.err" && grep -q -- "--cap-add SYS_PTRACE" "$work/a0.err"'

# ---- (a) root, default capabilities and SYS_PTRACE, --pid=container:app ----
side a_ps --cap-add SYS_PTRACE -- ps
check "(a) root: ps shows the sample (pid 1, name, runtime $runtime_version, command line)" ps_shows_sample "$work/a_ps.out" 1
side a_info --cap-add SYS_PTRACE -- info -p 1
check "(a) root: info" eval 'grep -q "^Name *: Sample" "$work/a_info.out" && grep -q "/app/Sample.dll" "$work/a_info.out"'
# the time from `podman run` to the trace's first byte on the volume (the file, as collect writes
# it while the runtime streams)
start_ns=$(date +%s%N)
side a_collect --cap-add SYS_PTRACE -- collect -p 1 --duration 2s -o /out/a.nettrace &
first_ms=
for _ in $(seq 1000); do
  # collect writes a temporary beside the name (renamed at the end): the first non-empty file
  if find "$work/a_collect" -type f -size +0c 2>/dev/null | grep -q .; then first_ms=$((($(date +%s%N) - start_ns) / 1000000)); break; fi
  sleep 0.01
done
wait $!
rc=$?
check "(a) root: collect writes the trace to the sidecar's volume, and report reads it on the host" \
  eval '[ $rc -eq 0 ] && hot_in_report "$work/a_collect/a.nettrace"'
echo "# figure: podman run of the sidecar to the first trace byte on the volume: ${first_ms:-?} ms"
# the image's event schema is where the binary looks (events --verbose warns when it is not; the
# same run pointed elsewhere shows that it would)
side a_collect -- events /out/a.nettrace --verbose -n 1
rc=$?
mkdir -p "$work/empty"
side a_noschema -e DNT_DATADIR=/nowhere -v "$work/empty:/usr/share/dntrace:ro" -v "$work/a_collect:/in" -- \
  events /in/a.nettrace --verbose -n 1
check "(a) the sidecar's dntrace finds the event schema in the image (and warns when it is not there)" \
  eval '[ $rc -eq 0 ] && grep -q "layouts from .*/usr/share/dntrace/runtime-events.xml" "$work/a_collect.err" &&
        ! grep -q "no layouts of the runtime" "$work/a_collect.err" &&
        grep -q "no layouts of the runtime" "$work/a_noschema.err"'
# the static binary reads the trace too (report names the sample's CPU-bound method), from the
# sidecar image, with no install
side a_report -v "$work/a_collect:/in" -- report /in/a.nettrace -n 20
rc=$?
check "(a) the sidecar's dntrace reports the trace it collected" \
  eval '[ $rc -eq 0 ] && grep -q "Sample\.CpuWork\.CountPrimes" "$work/a_report.out"'
# kubectl debug gives no volume: the trace written into the app's own /tmp (reached through
# /proc/1/root, as dntrace reaches its socket), then copied out of the app (kubectl cp)
side a_debug --cap-add SYS_PTRACE -- collect -p 1 --duration 1s -o /proc/1/root/tmp/k.nettrace
rc=$?
podman cp "$run-app:/tmp/k.nettrace" "$work/k.nettrace" >>"$work/last" 2>&1
check "(a) root: collect -o /proc/1/root/tmp/FILE writes into the app's /tmp (kubectl debug), copied out, report reads it" \
  eval '[ $rc -eq 0 ] && hot_in_report "$work/k.nettrace"'
side a_counters --cap-add SYS_PTRACE -- counters collect -p 1 --duration 3s -o /out/c.csv
rc=$?
check "(a) root: counters collect" \
  eval '[ $rc -eq 0 ] && grep -q "^[^,]*,System.Runtime,dotnet.process.memory.working_set" "$work/a_counters/c.csv"'
side a_dump --cap-add SYS_PTRACE -- dump -p 1 --type mini -o /out/core
rc=$?
check "(a) root: dump writes an ELF core to the sidecar's volume" eval '[ $rc -eq 0 ] && is_core "$work/a_dump/core"'

# ---- (b) root with SYS_PTRACE alone: it sees the process but may not use its socket ----
side b_ps --cap-drop ALL --cap-add SYS_PTRACE -- ps
check "(b) root, only SYS_PTRACE: ps shows pid, name, runtime and command line" ps_shows_sample "$work/b_ps.out" 1
for cmd in info collect counters dump; do
  case $cmd in
    info) args=(info -p 1) ;;
    collect) args=(collect -p 1 --duration 1s -o /out/b.nettrace) ;;
    counters) args=(counters collect -p 1 --duration 1s -o /out/b.csv) ;;
    dump) args=(dump -p 1 --type mini -o /out/core) ;;
  esac
  side "b_$cmd" --cap-drop ALL --cap-add SYS_PTRACE -- "${args[@]}"
  rc=$?
  check "(b) root, only SYS_PTRACE: $cmd says in one line whose socket it is and how to fix it, exit 3" \
    one_line_socket_error $rc "b_$cmd"
done

# ---- (c) the app's uid, capabilities dropped but SYS_PTRACE ----
side c_ps --user 1654 --cap-drop ALL --cap-add SYS_PTRACE -- ps
check "(c) --user 1654, only SYS_PTRACE: ps" ps_shows_sample "$work/c_ps.out" 1
side c_info --user 1654 --cap-drop ALL --cap-add SYS_PTRACE -- info -p 1
check "(c) --user 1654, only SYS_PTRACE: info" grep -q "^Name *: Sample" "$work/c_info.out"
side c_collect --user 1654 --cap-drop ALL --cap-add SYS_PTRACE -- collect -p 1 --duration 2s -o /out/c.nettrace
rc=$?
check "(c) --user 1654, only SYS_PTRACE: collect, and report on the host" \
  eval '[ $rc -eq 0 ] && hot_in_report "$work/c_collect/c.nettrace"'
side c_counters --user 1654 --cap-drop ALL --cap-add SYS_PTRACE -- counters collect -p 1 --duration 3s -o /out/c.csv
rc=$?
check "(c) --user 1654, only SYS_PTRACE: counters collect" eval '[ $rc -eq 0 ] && grep -q "System.Runtime" "$work/c_counters/c.csv"'
side c_dump --user 1654 --cap-drop ALL --cap-add SYS_PTRACE -- dump -p 1 --type mini -o /out/core
rc=$?
check "(c) --user 1654, only SYS_PTRACE: dump" eval '[ $rc -eq 0 ] && is_core "$work/c_dump/core"'
# the fix (a)'s error names: the app's uid and gid, no capability at all
side c_nocap --user 1654:1654 --cap-drop ALL -- collect -p 1 --duration 1s -o /out/n.nettrace
rc=$?
check "(c) --user 1654:1654 and no capability at all (the fix the error names): collect" \
  eval '[ $rc -eq 0 ] && [ -s "$work/c_nocap/n.nettrace" ]'

# ---- (d) a pod sharing its PID namespace (Kubernetes shareProcessNamespace) ----
# The sidecar's own process is `counters serve` (the image has no shell to idle in); the other
# commands are run in it with `podman exec`, as `kubectl exec` does.
pod=$run-pod
if podman pod create --name "$pod" --share pid >"$work/last" 2>&1 &&
   podman run -d --pod "$pod" --name "$run-podapp" --read-only --tmpfs /tmp:rw,mode=1777 "$app" >>"$work/last" 2>&1 &&
   wait_ready "$run-podapp" && mkdir -p "$work/d" && chmod 1777 "$work/d" &&
   podman run -d --pod "$pod" --name "$run-podside" -v "$work/d:/out" --user 1654 --cap-drop ALL \
     --cap-add SYS_PTRACE "$sidecar" counters serve -n Sample --listen 127.0.0.1:9400 >>"$work/last" 2>&1; then
  timeout 60 podman exec "$run-podside" /dntrace ps >"$work/d.ps" 2>&1
  pid=$(awk '$2 == "Sample" { print $1 }' "$work/d.ps")
  cp "$work/d.ps" "$work/last"
  check "(d) pod with a shared PID namespace: ps (podman exec) shows the sample (pid $pid)" \
    eval '[ -n "$pid" ] && [ "$pid" != 1 ] && ps_shows_sample "$work/d.ps" "$pid"'
  timeout 60 podman exec "$run-podside" /dntrace collect -n Sample --duration 2s -o /out/d.nettrace >"$work/last" 2>&1
  rc=$?
  check "(d) pod: collect -n Sample in the sidecar, report on the host" \
    eval '[ $rc -eq 0 ] && hot_in_report "$work/d/d.nettrace"'
  # the pod's network namespace, entered from the host: what Prometheus would scrape
  netpid=$(podman inspect -f '{{.State.Pid}}' "$run-podside")
  for _ in $(seq 50); do
    nsenter -t "$netpid" -n curl -sf http://127.0.0.1:9400/metrics >"$work/last" 2>&1 &&
      grep -q '^dotnet_process_memory_working_set' "$work/last" && break
    sleep 0.2
  done
  check "(d) pod: the sidecar's counters serve answers /metrics with the sample's runtime metrics" \
    grep -q '^dotnet_process_memory_working_set' "$work/last"
else
  not_ok "(d) a pod with a shared PID namespace could not be started"; note <"$work/last"
fi

# ---- (e) collect -- CMD as the container's entrypoint wrapper ----
mkdir -p "$work/e" && chmod 1777 "$work/e"
timeout 60 podman run --rm --name "$run-wrap" --read-only --tmpfs /tmp:rw,mode=1777 -v "$work/e:/out" \
  --entrypoint /dntrace "$app" collect -o /out/e.nettrace -- /usr/share/dotnet/dotnet /app/Sample.dll --seconds 2 \
  --exit-code 7 >"$work/last" 2>&1
rc=$?
check "(e) collect -- CMD as the entrypoint: the trace covers the whole run, the container exits with the app's status (7)" \
  eval '[ $rc -eq 7 ] && hot_in_report "$work/e/e.nettrace"'

echo "# the container tests took $(($(date +%s) - t0)) s"
echo "1..$n"
exit $failed
