#!/usr/bin/env bash
# Certificates without cert-manager: generates a CA and a serving certificate for
# Service prestop-injector.prestop-system, the TLS Secret manifest, and a kustomization
# that installs an overlay with the caBundle filled in.
#
#   certs/generate.sh [cluster-wide|namespace-opt-in]     (default: cluster-wide)
#   kubectl apply -k certs/out/cluster-wide
#
# It also makes the seal key (docs/REAPER.md#the-seal) and its Secret, for the webhook
# and, in certs/out/reaper-seal (a Component to add beside deploy/components/reaper), the
# node reaper's copy.
#
# Re-running keeps the existing CA and keys (so the cluster keeps trusting them) and only
# rewrites the manifests; delete certs/out (or set FORCE=1) to start over. FORCE=1 keeps
# the seal key (a new one would leave the pods sealed with the old one to no reaper):
# rotate it as docs/REAPER.md says. The keys stay in certs/out, which git ignores.
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

# The seal key: 32 random bytes in hex, one line. Kept across runs, FORCE=1 included.
seal_key="$tls/seal.key"
if [[ ! -s "$seal_key" ]]; then
  mkdir -p "$tls"
  (umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$seal_key" &&
    echo >>"$seal_key")
  echo "wrote a new seal key $seal_key" >&2
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

# The seal key for the webhook, and the reaper's copy in the node's namespace
# prestop-node, where the reaper's container runs (a Component, added with the reaper
# only: the node agent alone needs no key).
seal_secret() { # name namespace
  cat <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: $2
  labels:
    app.kubernetes.io/part-of: prestop-injector
type: Opaque
data:
  seal.key: $(b64 "$seal_key")
YAML
}
seal_secret prestop-injector-seal "$namespace" >"$dir/seal-secret.yaml"
mkdir -p "$out/reaper-seal"
seal_secret prestop-reaper-seal prestop-node >"$out/reaper-seal/secret.yaml"
cat >"$out/reaper-seal/kustomization.yaml" <<YAML
# Written by certs/generate.sh: the node reaper's copy of the seal key. Add it beside
# deploy/components/reaper (docs/INSTALL.md "The node reaper (optional)").
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources:
  - secret.yaml
YAML

patch="[{\"op\": \"add\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$ca_bundle\"}]"
cat >"$dir/kustomization.yaml" <<YAML
# Written by certs/generate.sh: deploy/overlays/$mode with the TLS Secret and caBundle.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $overlay
  - secret.yaml
  - seal-secret.yaml
# With the node reaper (docs/INSTALL.md "The node reaper (optional)"):
# components:
#   - $(relative "$dir" "$repo/deploy/components/reaper")
#   - ../reaper-seal
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
