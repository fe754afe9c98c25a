#!/usr/bin/env bash
# Builds the node binaries (kubelet, kube-controller-manager, kube-scheduler) from the same
# Debian `kubernetes` 1.20.2 source package the API-server suite builds kube-apiserver from
# (e2e/setup.sh), and caches them keyed by version:
#   $PRESTOP_E2E_CACHE/{kubelet,kube-controller-manager,kube-scheduler}-v1.20.2
# A second run finds them and only checks their --version. Right after e2e/setup.sh built
# kube-apiserver it reuses that tree and Go cache; alone it unpacks its own (10+ min cold
# on 2 cores, issue #13). The tree and Go cache are removed afterwards (~1.5 GB); the
# source tarball (shared with e2e/setup.sh) stays.
set -euo pipefail

KUBE_VERSION="1.20.2"
CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
BINS=(kubelet kube-controller-manager kube-scheduler)
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2

log() { echo "e2e/node/build-kube: $*" >&2; }

cached() {
  local b
  for b in "${BINS[@]}"; do
    [[ -x "$CACHE/$b-v$KUBE_VERSION" ]] || return 1
    "$CACHE/$b-v$KUBE_VERSION" --version 2>/dev/null | grep -qx "Kubernetes v$KUBE_VERSION" || return 1
  done
}
if cached; then
  log "node binaries v$KUBE_VERSION cached in $CACHE"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
need=()
command -v go >/dev/null || need+=(golang-go)
[[ -f "$REFLECT2_SRC/reflect2.go" ]] || need+=(golang-github-modern-go-reflect2-dev)
command -v make >/dev/null || need+=(make)
command -v rsync >/dev/null || need+=(rsync)
if ((${#need[@]})); then
  log "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

SRC="$CACHE/src"
if ! ls "$SRC"/kubernetes_*.orig.tar.* >/dev/null 2>&1; then
  # e2e/setup.sh downloads the source package when it builds kube-apiserver and keeps the
  # tarball; with a cached kube-apiserver but no tarball, fetch it the same way (a deb-src
  # entry for this download only).
  DEBSRC=/etc/apt/sources.list.d/prestop-e2e-node-deb-src.sources
  log "downloading the kubernetes source package"
  cat >"$DEBSRC" <<'SOURCES'
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
SOURCES
  mkdir -p "$SRC"
  apt-get update -qq && (cd "$SRC" && apt-get source --download-only -qq kubernetes >&2)
  rc=$?
  rm -f "$DEBSRC"
  ((rc == 0)) || { log "downloading the source package failed"; exit 1; }
fi

WORK="$CACHE/node-build"
TREE="$WORK/tree"
GOCACHE_DIR="$WORK/gocache"
if [[ -f "$SRC/tree/cmd/kubelet/kubelet.go" && -f "$SRC/version-vars" ]]; then
  # e2e/setup.sh has just built kube-apiserver and left its tree (reflect2 already
  # replaced) and Go cache: most packages the node binaries need are compiled already.
  log "reusing e2e/setup.sh's tree and Go cache"
  mkdir -p "$WORK"
  TREE="$SRC/tree"
  GOCACHE_DIR="$CACHE/gocache"
elif [[ ! -f "$TREE/cmd/kubelet/kubelet.go" ]]; then
  rm -rf "$WORK"
  mkdir -p "$WORK/unpack"
  orig=$(ls "$SRC"/kubernetes_*.orig.tar.* | head -n1)
  log "unpacking $(basename "$orig")"
  tar -C "$WORK/unpack" -xf "$orig"
  cmd=$(find "$WORK/unpack" -maxdepth 3 -path '*/cmd/kubelet' -type d | head -n1)
  [[ -n "$cmd" ]] || { log "no cmd/kubelet in $(basename "$orig")"; exit 1; }
  mv "$(dirname "$(dirname "$cmd")")" "$TREE"
  rm -rf "$WORK/unpack"
fi

# Same fix as e2e/setup.sh: the vendored reflect2 v1.0.1 segfaults under Go >= 1.18.
rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
mkdir -p "$TREE/vendor/github.com/modern-go/reflect2"
cp -r "$REFLECT2_SRC"/. "$TREE/vendor/github.com/modern-go/reflect2/"
sed -i 's#^github.com/modern-go/reflect2 v1.0.1$#github.com/modern-go/reflect2 v1.0.2#' \
  "$TREE/vendor/modules.txt" || true

cat >"$WORK/version-vars" <<VARS
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='v$KUBE_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
VARS

log "building ${BINS[*]} v$KUBE_VERSION (10+ minutes cold on 2 cores)"
start=$(date +%s)
(
  cd "$TREE"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOPROXY=off GOFLAGS=
  export KUBE_GIT_VERSION_FILE="$WORK/version-vars"
  export KUBE_STATIC_OVERRIDES=kubelet
  export GOCACHE="$GOCACHE_DIR"
  nice -n 10 make WHAT="cmd/kubelet cmd/kube-controller-manager cmd/kube-scheduler" >&2
)
for b in "${BINS[@]}"; do
  built="$TREE/_output/local/bin/linux/amd64/$b"
  [[ -x "$built" ]] || built=$(find "$TREE/_output" -name "$b" -type f -perm -u+x | head -n1)
  "$built" --version >&2
  install -m 0755 "$built" "$CACHE/$b-v$KUBE_VERSION.tmp"
  mv "$CACHE/$b-v$KUBE_VERSION.tmp" "$CACHE/$b-v$KUBE_VERSION"
done
log "built in $(($(date +%s) - start)) s; cached in $CACHE"
rm -rf "$WORK" "$SRC/tree" "$CACHE/gocache"
