# The kustomize install (docs/INSTALL.md), one install method of e2e/install/run.sh: each
# method provides install_<m> MODE [reaper], uninstall_<m> and the certificate steps
# certs_ca_both_<m>, certs_serve_new_<m>, certs_ca_new_only_<m>, so a Helm pass can be
# added beside it. Sourced; uses run.sh's WORK, HOST, IMAGE, BIN, ROOT, k, log.
#
# What the kustomization of a user on Kubernetes >= 1.30 would hold, written to
# $WORK/kustomize/kustomization.yaml on top of `certs/generate.sh MODE`'s output:
# - `images:` with our local image (INSTALL: "an images: entry in your own kustomization");
# - the config with `cleaner.image` = that image (INSTALL: "set cleaner.image ... to the
#   same name"; a configMapGenerator `behavior: replace`, so the repository's file stays
#   as shipped) and `allowedHostPathPrefixes` naming this run's scratch prefix;
# - the node agent's `--allow` for that prefix (INSTALL: "Your prefixes");
# - with the reaper: the Component, the dry-run switched off by the patch INSTALL gives,
#   and "your prefixes" in its two places (config and DaemonSet volume).
# And, on Kubernetes 1.20 (PRESTOP_E2E_KUBE_VERSION's default; 1.37 needs none, so there
# the shipped manifests apply as a user's cluster >= 1.30 gets them), these patches, each
# for a field 1.20 does not have:
# - the webhooks' `matchConditions` (CEL, GA 1.30) are removed: 1.20 sends the webhook
#   every object of the rules, the webhook itself skips what is not annotated;
# - the Deployment's native `preStop: sleep` (1.30) is removed: the server's
#   --shutdown-delay (not ready, still serving) is then all that covers the endpoint
#   removal in a rollout;
# - the PDB is `policy/v1beta1` (`policy/v1` is 1.21);
# - the node DaemonSet's `maxSurge: 0` is removed (1.22; 0 is what 1.20 does anyway);
# - namespaces get the `kubernetes.io/metadata.name` label that 1.21+ sets by itself
#   (run.sh, install_kustomize), which the webhooks' namespaceSelector excludes system namespaces by;
# - the Pod Security labels on the namespaces are inert: 1.20 has no Pod Security
#   admission, so "enforce: restricted" is not checked here (the pod's own
#   securityContext is, by a scenario).

KUSTOMIZE_DIR=
KUSTOMIZE_MODE=

kustomize_write() { # mode reaper(0|1) ca-bundle-file
  local mode=$1 reaper=$2 ca=$3 dir="$WORK/kustomize" name=${IMAGE%:*} tag=${IMAGE##*:}
  mkdir -p "$dir"
  # The shipped config, with our image as cleaner.image and this run's scratch prefix.
  sed "s|^  image: ghcr.io/prestop-injector/prestop-injector:.*|  image: $IMAGE|" \
    "$ROOT/deploy/base/config.yaml" |
    awk '/^allowedHostPathPrefixes:/ { skip = 1; next } skip && /^(  |- )/ { next } { skip = 0; print }' \
      >"$dir/config.yaml"
  echo "allowedHostPathPrefixes: [$HOST/scratch]" >>"$dir/config.yaml"
  # The shipped config sends every cleaner to the node agent, which every install runs
  # (deploy/base/node): without its word a cleaner empties only per-pod directories, and
  # the seed Job's is a fixed one (issue 31).
  grep -q '^nodeAgent:' "$dir/config.yaml" || { log "deploy/base/config.yaml has no nodeAgent"; return 1; }
  echo "allowedHostPathPrefixes: [$HOST/scratch]" >"$dir/reaper-config.yaml"
  cat >"$dir/pdb-v1beta1.yaml" <<YAML
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata:
  name: prestop-injector
  namespace: prestop-system
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: prestop-injector
YAML
  # The Component one level down: a generator up here (the config's `behavior: replace`)
  # only sees what the levels below generated.
  if ((reaper)); then
    mkdir -p "$dir/with-reaper"
    cat >"$dir/with-reaper/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../certs/$mode
components:
  - $(realpath --relative-to="$dir/with-reaper" "$ROOT/deploy/components/reaper")
  # The reaper's copy of the seal key, from certs/generate.sh (docs/INSTALL.md).
  - ../../certs/reaper-seal
YAML
  fi
  local bundle legacy=1
  bundle=$(base64 <"$ca" | tr -d '\n')
  kube_at_least 30 && legacy=0
  cat >"$dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $( ((reaper)) && echo with-reaper || echo "../certs/$mode")
$( ((legacy)) && echo "  - pdb-v1beta1.yaml")
images:
  - name: ghcr.io/prestop-injector/prestop-injector
    newName: $name
    newTag: "$tag"
configMapGenerator:
  - name: prestop-injector-config
    namespace: prestop-system
    behavior: replace
    files: [config.yaml]
$( ((reaper)) && printf '  - name: prestop-reaper-config\n    namespace: prestop-node\n    behavior: replace\n    files: [config.yaml=reaper-config.yaml]\n')
patches:
  # The caBundle (certs/generate.sh writes the same; replaced here during a rotation).
  - target: {kind: MutatingWebhookConfiguration, name: prestop-injector}
    patch: '[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "$bundle"}]'
  - target: {kind: ValidatingWebhookConfiguration, name: prestop-injector}
    patch: '[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "$bundle"}]'
$( ((legacy)) && cat <<'LEGACY'
  # Kubernetes 1.20 only (see the top of e2e/install/lib/kustomize.sh).
  - target: {kind: MutatingWebhookConfiguration, name: prestop-injector}
    patch: '[{"op": "remove", "path": "/webhooks/0/matchConditions"}]'
  - target: {kind: ValidatingWebhookConfiguration, name: prestop-injector}
    patch: '[{"op": "remove", "path": "/webhooks/0/matchConditions"}]'
  - target: {kind: Deployment, name: prestop-injector}
    patch: '[{"op": "remove", "path": "/spec/template/spec/containers/0/lifecycle"}]'
  - target: {kind: PodDisruptionBudget, version: v1, name: prestop-injector}
    patch: |-
      $patch: delete
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {name: prestop-injector}
  # Kubernetes 1.20 only: a DaemonSet's rolling update has no maxSurge (1.22).
  - target: {kind: DaemonSet, name: prestop-node}
    patch: '[{"op": "remove", "path": "/spec/updateStrategy/rollingUpdate/maxSurge"}]'
LEGACY
)
  # The node agent's --allow, in step with the prefixes (docs/INSTALL.md "Your
  # prefixes": appended to its command; with the reaper its container is the second).
  - target: {kind: DaemonSet, name: prestop-node}
    patch: |-
      - {op: test, path: /spec/template/spec/containers/$reaper/name, value: node-agent}
      - {op: add, path: /spec/template/spec/containers/$reaper/command/-, value: --allow}
      - {op: add, path: /spec/template/spec/containers/$reaper/command/-, value: $HOST/scratch}
YAML
  if ((reaper)); then
    cat >>"$dir/kustomization.yaml" <<YAML
  # docs/INSTALL.md "Dry run first": the documented patch that switches it off.
  - target: {kind: DaemonSet, name: prestop-node}
    patch: |-
      - {op: test, path: /spec/template/spec/containers/0/args/6, value: --dry-run}
      - {op: remove, path: /spec/template/spec/containers/0/args/6}
  # docs/INSTALL.md "Your prefixes": the hostPath volume per prefix, at /host + prefix;
  # the state directory under this run's root too (nothing left on the machine).
  - target: {kind: DaemonSet, name: prestop-node}
    patch: |-
      - {op: test, path: /spec/template/spec/volumes/0/hostPath/path, value: /mnt/scratch}
      - {op: replace, path: /spec/template/spec/volumes/0/hostPath/path, value: $HOST/scratch}
      - {op: test, path: /spec/template/spec/containers/0/volumeMounts/0/mountPath, value: /host/mnt/scratch}
      - {op: replace, path: /spec/template/spec/containers/0/volumeMounts/0/mountPath, value: /host$HOST/scratch}
      - {op: test, path: /spec/template/spec/volumes/1/hostPath/path, value: /var/lib/prestop-injector/reaper}
      - {op: replace, path: /spec/template/spec/volumes/1/hostPath/path, value: $HOST/reaper-state}
YAML
  fi
  KUSTOMIZE_DIR=$dir
}

# certs/generate.sh MODE (OUT under the run's directory, the binary of the image), then
# `kubectl apply -k` of the kustomization above.
install_kustomize() { # mode [reaper]
  local mode=$1 reaper=${2:-0}
  KUSTOMIZE_MODE=$mode
  # 1.20: the label 1.21+ sets, before the webhook configurations exist (deploy/ creates
  # the namespaces too; apply keeps the label).
  local ns
  for ns in prestop-system "$NODE_NS"; do
    k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null || return 1
    k label namespace "$ns" --overwrite "kubernetes.io/metadata.name=$ns" >/dev/null || return 1
  done
  OUT="$WORK/certs" PRESTOP_INJECTOR="$BIN" bash "$ROOT/certs/generate.sh" "$mode" \
    >>"$WORK/generate.log" 2>&1 || { log "certs/generate.sh $mode failed"; return 1; }
  KUSTOMIZE_REAPER=$reaper
  kustomize_write "$mode" "$reaper" "$WORK/certs/tls/ca.crt"
  NODE_DS=prestop-node
  kc apply -k "$KUSTOMIZE_DIR"
  ((STATUS == 0)) || { log "kubectl apply -k failed: $ERR"; return 1; }
}

# docs/INSTALL.md "Uninstall": the webhook configurations first, then the rest.
uninstall_kustomize() {
  k delete mutatingwebhookconfiguration prestop-injector >/dev/null &&
    k delete validatingwebhookconfiguration prestop-injector >/dev/null &&
    kubectl --request-timeout=0 delete -k "$KUSTOMIZE_DIR" --ignore-not-found --wait=true --timeout=180s >/dev/null
}

# Rotation without cert-manager, in the order that never leaves the API server without a
# trusted serving certificate: (1) a new CA and key (FORCE=1), the caBundle trusting both
# CAs, the old Secret still served; (2) the new Secret; (3) the caBundle of the new CA only.
certs_ca_both_kustomize() {
  local keep="$WORK/certs-old"
  rm -rf "$keep" && cp -r "$WORK/certs" "$keep"
  OUT="$WORK/certs" FORCE=1 PRESTOP_INJECTOR="$BIN" bash "$ROOT/certs/generate.sh" "$KUSTOMIZE_MODE" \
    >>"$WORK/generate.log" 2>&1 || return 1
  cat "$keep/tls/ca.crt" "$WORK/certs/tls/ca.crt" >"$WORK/ca-both.crt"
  cp "$WORK/certs/$KUSTOMIZE_MODE/secret.yaml" "$WORK/secret-new.yaml"
  cp "$keep/$KUSTOMIZE_MODE/secret.yaml" "$WORK/certs/$KUSTOMIZE_MODE/secret.yaml"
  kustomize_write "$KUSTOMIZE_MODE" "$KUSTOMIZE_REAPER" "$WORK/ca-both.crt"
  k apply -k "$KUSTOMIZE_DIR" >/dev/null
}
certs_serve_new_kustomize() {
  cp "$WORK/secret-new.yaml" "$WORK/certs/$KUSTOMIZE_MODE/secret.yaml"
  k apply -k "$KUSTOMIZE_DIR" >/dev/null
}
certs_ca_new_only_kustomize() {
  kustomize_write "$KUSTOMIZE_MODE" "$KUSTOMIZE_REAPER" "$WORK/certs/tls/ca.crt"
  k apply -k "$KUSTOMIZE_DIR" >/dev/null
}
