#!/usr/bin/env bash
# Certificates without cert-manager: generates a CA and a serving certificate for
# Service prestop-injector.prestop-system, the TLS Secret manifest, and a kustomization
# that installs an overlay with the caBundle filled in.
#
#   certs/generate.sh [cluster-wide|namespace-opt-in]     (default: cluster-wide)
#   kubectl apply -k certs/out/cluster-wide
#
# Re-running keeps the existing CA and keys (so the cluster keeps trusting them) and only
# rewrites the manifests; delete certs/out (or set FORCE=1) to start over. The keys stay
# in certs/out, which git ignores.
#
# Environment: PRESTOP_INJECTOR (the binary; default: on PATH, else target/*/),
# OUT (default certs/out), DAYS (default 365), FORCE=1 (new CA and keys).
set -euo pipefail

mode="${1:-cluster-wide}"
case "$mode" in
  cluster-wide | namespace-opt-in) ;;
  *)
    echo "usage: $0 [cluster-wide|namespace-opt-in]" >&2
    exit 2
    ;;
esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$repo/certs/out}"
days="${DAYS:-365}"
service=prestop-injector
namespace=prestop-system

bin="${PRESTOP_INJECTOR:-}"
if [[ -z "$bin" ]]; then
  for candidate in "$(command -v prestop-injector || true)" \
    "$repo/target/release/prestop-injector" "$repo/target/debug/prestop-injector"; do
    if [[ -n "$candidate" && -x "$candidate" ]]; then
      bin="$candidate"
      break
    fi
  done
fi
if [[ -z "$bin" ]]; then
  echo "prestop-injector not found: run 'cargo build --release' or set PRESTOP_INJECTOR" >&2
  exit 1
fi

tls="$out/tls"
if [[ "${FORCE:-0}" == 1 || ! -f "$tls/ca.crt" ]]; then
  force=()
  [[ "${FORCE:-0}" == 1 ]] && force=(--force)
  "$bin" certs --service "$service" --namespace "$namespace" --out "$tls" \
    --days "$days" "${force[@]}"
else
  echo "reusing the CA and keys in $tls (FORCE=1 for new ones)" >&2
fi

# A path from $1 to $2 (kustomize refuses absolute paths to other kustomizations).
relative() {
  realpath --relative-to="$1" "$2" 2>/dev/null ||
    perl -MFile::Spec -e 'print File::Spec->abs2rel($ARGV[1], $ARGV[0])' "$1" "$2"
}

dir="$out/$mode"
mkdir -p "$dir"
overlay="$(relative "$dir" "$repo/deploy/overlays/$mode")"
ca_bundle="$(base64 <"$tls/ca.crt" | tr -d '\n')"
b64() { base64 <"$1" | tr -d '\n'; }

# The Secret the Deployment mounts; a file, not a secretGenerator, so its name stays
# prestop-injector-tls and an update reaches the running pods (hot reload).
umask 077
cat >"$dir/secret.yaml" <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: prestop-injector-tls
  namespace: $namespace
type: kubernetes.io/tls
data:
  ca.crt: $(b64 "$tls/ca.crt")
  tls.crt: $(b64 "$tls/tls.crt")
  tls.key: $(b64 "$tls/tls.key")
YAML

patch="[{\"op\": \"add\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$ca_bundle\"}]"
cat >"$dir/kustomization.yaml" <<YAML
# Written by certs/generate.sh: deploy/overlays/$mode with the TLS Secret and caBundle.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $overlay
  - secret.yaml
patches:
  - target:
      kind: MutatingWebhookConfiguration
      name: prestop-injector
    patch: '$patch'
  - target:
      kind: ValidatingWebhookConfiguration
      name: prestop-injector
    patch: '$patch'
YAML

echo "wrote $dir: install with  kubectl apply -k $dir" >&2
