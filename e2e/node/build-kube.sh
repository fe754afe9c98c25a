#!/usr/bin/env bash
# Builds the node binaries (kubelet, kube-controller-manager, kube-scheduler, and kube-proxy
# for the install suite's Services, e2e/install) from the same
# Debian `kubernetes` 1.20.2 source package the API-server suite builds kube-apiserver from
# (e2e/setup.sh), and caches them keyed by version:
#   $PRESTOP_E2E_CACHE/{kubelet,kube-controller-manager,kube-scheduler,kube-proxy}-v1.20.2
# A second run finds them and only checks their --version; it builds only those missing (a
# cache from before kube-proxy was added gets just kube-proxy). Right after e2e/setup.sh built
# kube-apiserver it reuses that tree and Go cache (83 s); alone it fetches and unpacks its
# own (359 s from an empty cache on an idle 2-core machine; 20 min under load, issue #13). The tree and Go cache are removed afterwards (~1.5 GB); the
# source tarball (shared with e2e/setup.sh) stays.
set -euo pipefail

KUBE_VERSION="1.20.2"
CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
BINS=(kubelet kube-controller-manager kube-scheduler kube-proxy)

log() { echo "e2e/node/build-kube: $*" >&2; }
# shellcheck source=../lib/kube-source.sh
source "$(dirname "$0")/../lib/kube-source.sh"

MISSING=()
for b in "${BINS[@]}"; do
  "$CACHE/$b-v$KUBE_VERSION" --version 2>/dev/null | grep -qx "Kubernetes v$KUBE_VERSION" || MISSING+=("$b")
done
if ((${#MISSING[@]} == 0)); then
  log "node binaries v$KUBE_VERSION cached in $CACHE"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
need=()
[[ -x "$KUBE_GO_1_20" ]] || need+=(golang-1.19-go)
[[ -f "$KUBE_REFLECT2_SRC/reflect2.go" ]] || need+=(golang-github-modern-go-reflect2-dev)
command -v make >/dev/null || need+=(make)
command -v rsync >/dev/null || need+=(rsync)
if ((${#need[@]})); then
  log "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

SRC="$CACHE/src"
kube_source_fetch "$SRC"

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
  VERSION_FILE="$SRC/version-vars"
else
  mkdir -p "$WORK"
  kube_source_tree "$SRC" "$TREE"
  VERSION_FILE="$WORK/version-vars"
  kube_version_file "$VERSION_FILE" "$KUBE_VERSION"
fi

log "building ${MISSING[*]} v$KUBE_VERSION (about 1.5 minutes in the API server's tree, 6 alone, on 2 cores)"
start=$(date +%s)
kube_build "$TREE" "$GOCACHE_DIR" "$VERSION_FILE" "$CACHE" "$KUBE_VERSION" "${MISSING[@]}"
log "built in $(($(date +%s) - start)) s; cached in $CACHE"
rm -rf "$WORK" "$SRC/tree" "$CACHE/gocache"
