# Which Kubernetes a suite runs (issue 41): PRESTOP_E2E_KUBE_VERSION, default 1.20.2, the
# oldest supported (Debian's source package, e2e/setup.sh); a newer one is built from the
# Go module proxy's k8s.io/kubernetes (e2e/setup-latest.sh; 1.37.2 in CI). Sourced; sets
# KUBE_VERSION and KUBE_MINOR, and kube_at_least tells what a version-dependent flag or
# config field needs.
# shellcheck shell=bash

KUBE_VERSION=${PRESTOP_E2E_KUBE_VERSION:-1.20.2}
KUBE_VERSION=${KUBE_VERSION#v}
if ! [[ "$KUBE_VERSION" =~ ^1\.([0-9]+)\.[0-9]+$ ]]; then
  echo "PRESTOP_E2E_KUBE_VERSION=$KUBE_VERSION: expected 1.MINOR.PATCH" >&2
  exit 1
fi
KUBE_MINOR=${BASH_REMATCH[1]}
# The one version built from Debian's source package; every other comes from the modules.
KUBE_DEBIAN_VERSION=1.20.2
export PRESTOP_E2E_KUBE_VERSION=$KUBE_VERSION

kube_at_least() { # minor: true when the suite's Kubernetes is 1.<minor> or newer
  ((KUBE_MINOR >= $1))
}
