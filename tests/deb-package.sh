#!/bin/bash
# The Debian package, built as a distribution builds it: from the release tarball (debian/ is in
# it), unpacked in a temporary directory, with `dpkg-buildpackage -us -uc -b`. Then lintian must
# report neither error nor warning, and the package must hold the command, every manual page and
# the runtime's event schema where the command looks for it. TAP output.
#
# A full optimised build: about two minutes on two cores, so `make deb-check` runs it, not
# `make check`. The .deb is left in BUILDDIR/deb/.
#
#   tests/deb-package.sh TARBALL      (DNT_SRCDIR: the source tree, for the list of man pages)

tarball=$1
srcdir=${DNT_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
out=${DNT_BUILDDIR:-$PWD}/deb
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
check() {
  local name=$1; shift
  if "$@"; then ok "$name"; else not_ok "$name"; sed 's/^/#   /' "$work/last" 2>/dev/null | tail -n 40; fi
}

for tool in dpkg-buildpackage lintian dh fakeroot; do
  command -v "$tool" >/dev/null 2>&1 || { echo "1..0 # SKIP no $tool (./bootstrap.sh deps installs it)"; exit 0; }
done
[ -f "$tarball" ] || { echo "Bail out! no tarball '$tarball'"; exit 1; }

tar -C "$work" -xzf "$tarball"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/last" 2>&1
rc=$?
deb=$(find "$work" -maxdepth 1 -name 'dntrace_*.deb' | head -n 1)
check "dpkg-buildpackage -us -uc -b builds dntrace_*.deb from the release tarball" eval '[ $rc -eq 0 ] && [ -n "$deb" ]'
[ -n "$deb" ] || { echo "1..$n"; exit 1; }

changes=$(find "$work" -maxdepth 1 -name 'dntrace_*.changes' | head -n 1)
lintian --fail-on error,warning --tag-display-limit 0 "$changes" >"$work/last" 2>&1
rc=$?
check "lintian: no error, no warning" eval '[ $rc -eq 0 ] && ! grep -q "^[EW]:" "$work/last"'

dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$work/files"
cp "$work/files" "$work/last"
check "the package installs /usr/bin/dntrace" grep -qx /usr/bin/dntrace "$work/files"
check "the package installs the runtime's event schema in /usr/share/dntrace" \
  grep -qx /usr/share/dntrace/runtime-events.xml "$work/files"
missing=
for page in "$srcdir"/man/*.1; do
  grep -qx "/usr/share/man/man1/$(basename "$page").gz" "$work/files" || missing="$missing $(basename "$page")"
done
echo "missing:$missing" >"$work/last"
check "the package installs every manual page (man/*.1)" test -z "$missing"

# the installed command, run from the unpacked package: it finds the schema in the path it was
# built with (an events run that needs no schema would not tell; --verbose says when it is missing)
dpkg-deb -x "$deb" "$work/root"
"$work/root/usr/bin/dntrace" --version >"$work/last" 2>&1
check "the packaged dntrace runs" grep -q '^dntrace ' "$work/last"
strings "$work/root/usr/bin/dntrace" >"$work/strings"
echo "the binary names no /usr/share/dntrace" >"$work/last"
check "the packaged dntrace looks for its schema in /usr/share/dntrace" grep -qx /usr/share/dntrace "$work/strings"

mkdir -p "$out" && cp "$deb" "$out/" && echo "# $(basename "$deb"): $(stat -c %s "$deb") bytes, in $out"
echo "1..$n"
exit $failed
