# tests/containers/images.sh: the two images the container tests run, built from files on this
# machine only (nothing is pulled): each is a root tarball made here and given to `podman import`.
# Sourced by tests/containers/containers.sh.
#
#   sidecar  the static dntrace alone (/dntrace, its ENTRYPOINT) and the data files it reads
#            (/usr/share/dntrace, named by DNT_DATADIR): the image the README tells users to build
#   app      the sample .NET target: the host's .NET runtime directory, the sample's build output,
#            the few host libraries they load (found with ldd), and the static dntrace again for
#            `collect -- CMD` as an entrypoint wrapper
#
# An image is tagged with a hash of what went into it, so a build tree rebuilds it only when the
# binary, the sample or the runtime changed; a rebuild removes the images this build tree made
# before (label dntrace.test.tree).

IMG_SIDECAR_REPO=localhost/dntrace-test-sidecar
IMG_APP_REPO=localhost/dntrace-test-app

# img_hash FILE...: a short hash of the files' contents and names
img_hash() {
  { for f in "$@"; do printf '%s\n' "$f"; sha256sum <"$f"; done; } | sha256sum | cut -c1-16
}

# img_import REPO TAG ROOTDIR CHANGE...: the tarball of ROOTDIR (owned by root) imported as
# REPO:TAG with the given --change lines, unless it exists; then the tree's older tags removed
img_import() {
  local repo=$1 tag=$2 root=$3; shift 3
  podman image exists "$repo:$tag" && return 0
  local changes=() c
  for c in "$@"; do changes+=(--change "$c"); done
  tar -C "$root" --owner=0 --group=0 --numeric-owner -cf "$root.tar" . || return 1
  podman import -q "${changes[@]}" --change "LABEL dntrace.test.tree=$img_tree" "$root.tar" "$repo:$tag" >/dev/null || return 1
  rm -f "$root.tar"
  podman images --format '{{.Repository}}:{{.Tag}}' --filter "label=dntrace.test.tree=$img_tree" |
    grep "^$repo:" | grep -v ":$tag\$" | xargs -r podman rmi -f >/dev/null 2>&1
  return 0
}

# img_sidecar BIN DATADIR WORK: builds the sidecar image; prints its name
img_sidecar() {
  local bin=$1 data=$2 work=$3
  local tag root=$work/sidecar-root
  tag=$(img_hash "$bin" "$data"/runtime-events.xml "${BASH_SOURCE[0]}") || return 1
  if ! podman image exists "$IMG_SIDECAR_REPO:$tag"; then
    mkdir -p "$root/usr/share/dntrace" "$root/tmp" || return 1
    chmod 1777 "$root/tmp"
    strip -o "$root/dntrace" "$bin" || return 1
    cp "$data"/runtime-events.xml "$root/usr/share/dntrace/" || return 1
    img_import "$IMG_SIDECAR_REPO" "$tag" "$root" 'ENTRYPOINT ["/dntrace"]' \
      'ENV DNT_DATADIR=/usr/share/dntrace' || return 1
  fi
  echo "$IMG_SIDECAR_REPO:$tag"
}

# runtime_dir: the newest Microsoft.NETCore.App directory `dotnet --list-runtimes` names
runtime_dir() {
  dotnet --list-runtimes 2>/dev/null | awk '$1 == "Microsoft.NETCore.App" { d = $3 "/" $2 } END { print d }' |
    tr -d '[]'
}

# copy_libs ROOT FILE...: the shared libraries FILE... load (ldd), with the dynamic loader, copied
# into ROOT at the same paths
copy_libs() {
  local root=$1; shift
  local lib
  for lib in $(ldd "$@" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' | sort -u); do
    mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib" || return 1
  done
}

# img_app SAMPLE_OUT BIN WORK: builds the app image; prints its name
img_app() {
  local out=$1 bin=$2 work=$3
  local rt dotnet_root tag root=$work/app-root
  rt=$(runtime_dir)
  [ -n "$rt" ] && [ -d "$rt" ] || { echo "no .NET runtime found by 'dotnet --list-runtimes'" >&2; return 1; }
  dotnet_root=$(cd "$rt/../../.." && pwd)
  tag=$(printf '%s\n' "$rt" | cat - "$out"/Sample.dll "$out"/Sample.runtimeconfig.json "$bin" "${BASH_SOURCE[0]}" |
    sha256sum | cut -c1-16)
  if ! podman image exists "$IMG_APP_REPO:$tag"; then
    mkdir -p "$root/tmp" "$root/app" "$root/etc" "$root$dotnet_root/host" "$root$(dirname "$rt")" || return 1
    chmod 1777 "$root/tmp"
    cp "$dotnet_root/dotnet" "$root$dotnet_root/" && cp -r "$dotnet_root/host/fxr" "$root$dotnet_root/host/" &&
      cp -r "$rt" "$root$rt" || return 1
    cp "$out"/Sample.dll "$out"/Sample.runtimeconfig.json "$out"/Sample.deps.json "$root/app/" || return 1
    strip -o "$root/dntrace" "$bin" || return 1
    copy_libs "$root" "$dotnet_root/dotnet" "$dotnet_root"/host/fxr/*/*.so "$rt"/*.so "$rt/createdump" || return 1
    # the app's user, as in Microsoft's images (uid 1654); root for the sidecar's own view
    printf 'root:x:0:0:root:/root:/sbin/nologin\napp:x:1654:1654:app:/app:/sbin/nologin\n' >"$root/etc/passwd"
    printf 'root:x:0:\napp:x:1654:\n' >"$root/etc/group"
    # no ICU in the image: the runtime's invariant globalization mode
    img_import "$IMG_APP_REPO" "$tag" "$root" "ENV DOTNET_ROOT=$dotnet_root" \
      'ENV DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1' 'ENV DOTNET_CLI_TELEMETRY_OPTOUT=1' \
      "ENTRYPOINT [\"$dotnet_root/dotnet\", \"/app/Sample.dll\"]" 'USER 1654' 'WORKDIR /app' || return 1
  fi
  echo "$IMG_APP_REPO:$tag"
}
