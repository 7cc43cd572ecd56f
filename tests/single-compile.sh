#!/bin/sh
# Every source file is compiled into one program or library only: code shared by the command and
# the tests lives in a library that both link (issue: "linked, never recompiled"). The compiler's
# dependency files (.deps/*.Po, one per object) name the source of each object on their first
# line; a source named by two objects was compiled twice. TAP output.
#
#   tests/single-compile.sh [BUILDDIR]     (default: $DNT_BUILDDIR, else .)

# sources_compiled_twice DIR: prints each source that two or more objects were compiled from
sources_compiled_twice() {
  # tests/containers/static/ is a build tree of its own (the static dntrace of the container tests)
  find "$1" -path '*/.deps/*.Po' -not -path '*/tests/containers/static/*' -type f 2>/dev/null | while read -r po; do
    # "obj.o: ../dir/file.c header.h ...": the first prerequisite is the source
    sed -n '1{s/^[^:]*: *//;s/ .*//;p;q}' "$po"
  done | grep '\.c$' | sed 's|^\(\.\./\)*||' | sort | uniq -d
}

builddir=${1:-${DNT_BUILDDIR:-.}}
echo "1..2"

# 1: the check finds a source compiled twice (a planted pair of dependency files)
planted=$(mktemp -d)
trap 'rm -rf "$planted"' EXIT
mkdir -p "$planted/a/.deps" "$planted/b/.deps"
printf 'a/prog_one-x.o: ../src/x.c ../src/x.h\n' >"$planted/a/.deps/prog_one-x.Po"
printf 'b/prog_two-x.o: ../src/x.c ../src/x.h\n' >"$planted/b/.deps/prog_two-x.Po"
printf 'b/prog_two-y.o: ../src/y.c\n' >"$planted/b/.deps/prog_two-y.Po"
if [ "$(sources_compiled_twice "$planted")" = "src/x.c" ]; then
  echo "ok 1 - a source compiled into two programs is found"
else
  echo "not ok 1 - the planted src/x.c compiled twice was not found"
fi

# 2: the real build
count=$(find "$builddir" -path '*/.deps/*.Po' -not -path '*/tests/containers/static/*' -type f 2>/dev/null | wc -l)
twice=$(sources_compiled_twice "$builddir")
if [ "$count" -lt 20 ]; then
  echo "not ok 2 - only $count dependency files under '$builddir': is it a build tree?"
elif [ -n "$twice" ]; then
  echo "not ok 2 - compiled into more than one program or library:"
  printf '%s\n' "$twice" | sed 's/^/#   /'
else
  echo "ok 2 - each of the $count objects comes from a source compiled once"
fi
