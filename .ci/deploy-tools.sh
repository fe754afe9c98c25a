#!/usr/bin/env bash
# Installs the tools the deploy/ tests need: kubernetes-validate (PyPI, pinned) in a venv.
# kubectl (with built-in kustomize) is expected on PATH. Idempotent: a second run that
# finds the pinned version installed does nothing.
#
# After it runs, the tests find the tool through PRESTOP_KUBERNETES_VALIDATE: its only
# line on stdout is that export (`eval "$(bash .ci/deploy-tools.sh)"`).
set -euo pipefail

KUBERNETES_VALIDATE_VERSION="1.37.0"
VENV="${PRESTOP_CI_VENV:-/opt/prestop-ci-venv}"
BIN="$VENV/bin/kubernetes-validate"

installed_version() {
  "$VENV/bin/python" -c \
    'import importlib.metadata as m; print(m.version("kubernetes-validate"))' 2>/dev/null || true
}

if [[ "$(installed_version)" != "$KUBERNETES_VALIDATE_VERSION" ]]; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null && command -v apt-get >/dev/null; then
    # Debian splits venv out of python3.
    apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
fi

"$BIN" --version >/dev/null
# openssl verifies the output of `prestop-injector certs` in the tests.
if ! command -v openssl >/dev/null && command -v apt-get >/dev/null; then
  apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi
if ! command -v kubectl >/dev/null; then
  echo "deploy-tools: kubectl is not on PATH; the deploy tests need it (kubectl >= 1.27 for kustomize v5)" >&2
  exit 1
fi
echo "export PRESTOP_KUBERNETES_VALIDATE=$BIN"
