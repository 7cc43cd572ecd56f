#!/bin/sh
# The libraries never print and never exit (docs/internals/architecture.md): no object in them
# calls stdio's printing to the terminal, exit, abort, or the command line's message helpers. The
# undefined symbols of each archive (nm -u) say what its code calls. TAP output.
#
#   tests/library-rules.sh [BUILDDIR]     (default: $DNT_BUILDDIR, else .)

builddir=${1:-${DNT_BUILDDIR:-.}}
libs="nettrace/libntr.a ipc/libdsipc.a trace/libdnttrace.a profile/libdntprofile.a perf/libdntperf.a
counters/libdntcounters.a http/libdnthttp.a analyze/libdntanalyze.a agent/libdntagent.a coredump/libdntcore.a"
forbidden='^(printf|vprintf|puts|putchar|perror|exit|abort|err|errx|warn|warnx|dnt_die|dnt_error|dnt_warning|dnt_xmalloc|dnt_xrealloc|dnt_xstrdup)$'

# calls_forbidden ARCHIVE: the forbidden functions it calls, one a line
calls_forbidden() {
  nm -u "$1" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//' | grep -E "$forbidden" | sort -u
}

n=0
for lib in $libs; do n=$((n + 1)); done
echo "1..$((n + 1))"

# 1: the check sees a library that prints (an archive made here from a planted object)
planted=$(mktemp -d)
trap 'rm -rf "$planted"' EXIT
printf '#include <stdio.h>\n#include <stdlib.h>\nvoid f(int x) { printf("%%d\\n", x); exit(x); }\n' >"$planted/p.c"
if ${CC:-cc} -c -O0 -o "$planted/p.o" "$planted/p.c" 2>/dev/null && ar cr "$planted/libp.a" "$planted/p.o" &&
   [ "$(calls_forbidden "$planted/libp.a" | tr '\n' ' ')" = "exit printf " ]; then
  echo "ok 1 - a planted library calling printf and exit is caught"
else
  echo "not ok 1 - the planted library calling printf and exit was not caught (or could not be built)"
fi

i=1
for lib in $libs; do
  i=$((i + 1))
  if [ ! -f "$builddir/$lib" ]; then
    echo "not ok $i - $lib not built under '$builddir'"
    continue
  fi
  bad=$(calls_forbidden "$builddir/$lib" | tr '\n' ' ')
  if [ -n "$bad" ]; then
    echo "not ok $i - $lib calls $bad"
  else
    echo "ok $i - $lib neither prints nor exits"
  fi
done
