#!/usr/bin/env bash
# Builds the newest Kubernetes the suites run beside 1.20.2 (issue 41): kube-apiserver,
# kubelet, kube-controller-manager, kube-scheduler and kube-proxy of the release given
# (default 1.37.2, the newest the Go module proxy serves), from the `k8s.io/kubernetes`
# module with the machine's Go (e2e/lib/kube-modules.sh), statically. Idempotent: a second
# run finds them and only checks their --version.
#
#   bash e2e/setup-latest.sh [1.37.2]
#
# Cached outside the clone, keyed by version: $PRESTOP_E2E_CACHE/<name>-v1.37.2 (default
# /var/cache/prestop-e2e), the Go module and build caches in $PRESTOP_E2E_CACHE/go-v1.37.2
# (kept: a rebuild reuses them). Its stdout is the binaries' paths, one a line.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

KUBE_VERSION=${1:-${PRESTOP_E2E_KUBE_VERSION:-1.37.2}}
CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
BINS=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy)

log() { echo "e2e/setup-latest: $*" >&2; }
# shellcheck source=lib/kube-modules.sh
source "$ROOT/e2e/lib/kube-modules.sh"

MISSING=()
for b in "${BINS[@]}"; do
  "$CACHE/$b-v$KUBE_VERSION" --version 2>/dev/null | grep -qx "Kubernetes v$KUBE_VERSION" || MISSING+=("$b")
done
if ((${#MISSING[@]})); then
  [[ -x "$KUBE_MODULES_GO" ]] || { log "no Go at $KUBE_MODULES_GO (PRESTOP_E2E_GO)"; exit 1; }
  DIR="$CACHE/go-v$KUBE_VERSION"
  mkdir -p "$DIR"
  kube_modules_env "$DIR"
  start=$(date +%s)
  kube_modules_tree "$DIR" "$KUBE_VERSION"
  log "building ${MISSING[*]} v$KUBE_VERSION with $("$KUBE_MODULES_GO" version | cut -d' ' -f3), nice -n 10"
  kube_modules_build "$DIR" "$CACHE" "$KUBE_VERSION" "${MISSING[@]}"
  log "built in $(($(date +%s) - start)) s"
else
  log "v$KUBE_VERSION cached in $CACHE"
fi
for b in "${BINS[@]}"; do echo "$CACHE/$b-v$KUBE_VERSION"; done
