#!/usr/bin/env bash
# Builds the release image offline, from the repository's Dockerfile (its runtime stage,
# fed the static binaries built here: BINARIES=prebuilt), with buildah, and writes it as a
# docker-archive that `ctr images import` and `docker load` read:
#
#   scripts/build-image.sh            # stdout: the archive's path; the image is $IMAGE
#
# IMAGE (default localhost/prestop-injector:<Cargo version>) names it. BINARIES=DIR skips
# the cargo build and takes DIR/prestop-injector and DIR/prestop-clean (binaries CI built
# already). PRESTOP_IMAGE_CACHE (default /var/cache/prestop-image) keeps the archive, keyed
# by the binaries' and the Dockerfile's digests: a second run with the same inputs only
# checks it. buildah runs with a storage root of its own (vfs, removed afterwards): nothing
# is left in /var/lib/containers. Root on Debian bookworm (installs buildah when missing).
# Before writing the archive it runs the image's webhook binary (`--version`) chrooted in
# the image's own root filesystem, which has no libc and no loader: it must be static.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "build-image: $*" >&2; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
IMAGE=${IMAGE:-localhost/prestop-injector:$version}
CACHE=${PRESTOP_IMAGE_CACHE:-/var/cache/prestop-image}

if ! command -v buildah >/dev/null; then
  log "installing buildah"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends buildah >/dev/null
fi

work=$(mktemp -d /tmp/prestop-image.XXXXXX)
# buildah keeps its blob-info cache in /var/lib/containers/cache (root) whatever --root
# says, and may create /run/containers: removed again when this run created them.
created=()
for d in /var/lib/containers /run/containers; do [[ -e "$d" ]] || created+=("$d"); done
cleanup() {
  # The vfs layers may hold read-only directories (the image's); make them removable.
  chmod -R u+w "$work" 2>/dev/null
  rm -rf "$work" "${created[@]}"
}
trap cleanup EXIT

# The build context holds the two binaries and nothing else.
ctx="$work/context"
mkdir -p "$ctx"
if [[ -n "${BINARIES:-}" ]]; then
  install -m 0555 "$BINARIES/prestop-injector" "$BINARIES/prestop-clean" "$ctx/"
else
  t0=$(date +%s)
  bash scripts/build-binaries.sh "$ctx"
  log "binaries built in $(($(date +%s) - t0)) s"
fi

key=$(cat "$ctx/prestop-injector" "$ctx/prestop-clean" Dockerfile | sha256sum | cut -c1-16)
archive="$CACHE/prestop-injector-$version-$key.tar"
name_file="$archive.name"
if [[ -s "$archive" && "$(cat "$name_file" 2>/dev/null)" == "$IMAGE" ]]; then
  log "$IMAGE cached at $archive"
  echo "$archive"
  exit 0
fi

t0=$(date +%s)
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
bah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
"${bah[@]}" bud --quiet --layers=false --pull=never --build-arg BINARIES=prebuilt \
  -f "$PWD/Dockerfile" -t "$IMAGE" "$ctx" >&2

# The image's own root, as a container would see it: only our two files in it.
ctr=$("${bah[@]}" from --pull=never "$IMAGE")
root=$("${bah[@]}" mount "$ctr")
files=$(cd "$root" && find . -mindepth 1 ! -type d | sort | tr '\n' ' ')
if [[ "$files" != "./usr/local/bin/prestop-clean ./usr/local/bin/prestop-injector " ]]; then
  log "unexpected files in the image: $files"
  exit 1
fi
if ! out=$(chroot --userspec=65532:65532 "$root" /usr/local/bin/prestop-injector --version 2>&1); then
  log "the webhook binary does not run in the image's root: $out"
  exit 1
fi
log "runs in the image's empty root: $out"
user=$("${bah[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$IMAGE")
[[ "$user" == 65532:65532 ]] || { log "image user is '$user', not 65532:65532"; exit 1; }
"${bah[@]}" umount "$ctr" >/dev/null
"${bah[@]}" rm "$ctr" >/dev/null

mkdir -p "$CACHE"
rm -f "$CACHE"/prestop-injector-"$version"-*.tar "$CACHE"/prestop-injector-"$version"-*.tar.name
"${bah[@]}" push --quiet "$IMAGE" "docker-archive:$archive.tmp:$IMAGE" >&2
mv "$archive.tmp" "$archive"
echo "$IMAGE" >"$name_file"
"${bah[@]}" rmi -a -f >/dev/null 2>&1 || true
log "built $IMAGE in $(($(date +%s) - t0)) s: $archive ($(stat -c %s "$archive") bytes)"
echo "$archive"
