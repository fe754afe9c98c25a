# The Helm install (docs/INSTALL.md "4. With Helm"), the second install method of
# e2e/install/run.sh: install_helm MODE [reaper], uninstall_helm and the certificate
# steps, as lib/kustomize.sh provides them for kustomize, plus rollout_helm (an upgrade
# under load instead of `kubectl rollout restart`) and scenarios_helm (server-side apply,
# helm test). Sourced; uses run.sh's WORK, HOST, IMAGE, ROOT, k, log and
# PRESTOP_HELM (.ci/deploy-tools.sh).
#
# What a user on this cluster would pass: the image (imported into the node's
# containerd, so IfNotPresent never pulls), the mode, this run's scratch prefix as
# config.allowedHostPathPrefixes (which also gives the reaper its hostPath volume), the
# reaper out of dry-run with its state directory under this run's root, and nothing for
# the certificates: the chart generates them (certificates.source: helm).
# Kubernetes 1.20: the chart's own version gates leave out matchConditions, the preStop
# sleep action, policy/v1 and the DaemonSet's maxSurge (Helm reads the server's version).
# What no gate can do, the release namespace's `kubernetes.io/metadata.name` label (1.21+
# sets it), is done here before the install as INSTALL tells a 1.20 user to (the chart
# refuses to install without it); run.sh labelled the namespaces that were there.

HELM=${PRESTOP_HELM:-helm}
RELEASE=prestop-injector
HELM_MODE=
HELM_REAPER=0

helm_values() { # mode reaper(0|1)
  cat <<YAML
mode: $1
image:
  repository: ${IMAGE%:*}
  tag: "${IMAGE##*:}"
  pullPolicy: IfNotPresent
config:
  allowedHostPathPrefixes: [$HOST/scratch]
reaper:
  enabled: $( (($2)) && echo true || echo false)
  dryRun: false
  stateHostPath: $HOST/reaper-state
# The suite's namespace (its pod logs are the suite's to remove), processed by the webhook.
test:
  namespace: $NS
YAML
}

helm_() { "$HELM" --kubeconfig "$KUBECONFIG" "$@" >>"$WORK/helm.log" 2>&1; }

# The serving certificate the chart generated, where the scenarios compare against it
# ($WORK/certs/tls/tls.crt, as certs/generate.sh leaves it for kustomize).
helm_save_cert() {
  mkdir -p "$WORK/certs/tls"
  k -n "$SYSTEM_NS" get secret "$RELEASE-tls" -o json |
    jq -r '.data["tls.crt"]' | base64 -d >"$WORK/certs/tls/tls.crt.new" &&
    mv "$WORK/certs/tls/tls.crt.new" "$WORK/certs/tls/tls.crt"
}

# INSTALL "4. With Helm", on Kubernetes < 1.21: the namespace created and labelled
# kubernetes.io/metadata.name first (what 1.21+ does by itself), then helm install
# --wait, then the Pod Security label INSTALL asks for. The first time, it also checks
# that the documented >= 1.21 command (--create-namespace) is refused here at once by the
# chart's check (templates/kube-1.20-check.yaml) rather than hanging: its own pods would
# be sent to the webhook before it runs.
HELM_GUARD_CHECKED=0
install_helm() { # mode [reaper]
  HELM_MODE=$1 HELM_REAPER=${2:-0}
  NODE_DS=$RELEASE-node
  helm_values "$HELM_MODE" "$HELM_REAPER" >"$WORK/helm-values.yaml"
  # Kubernetes >= 1.21 (PRESTOP_E2E_KUBE_VERSION=1.37.2): INSTALL's command as it is.
  if kube_at_least 21; then
    helm_ install "$RELEASE" "$ROOT/charts/prestop-injector" -n "$SYSTEM_NS" --create-namespace \
      --wait --timeout 4m -f "$WORK/helm-values.yaml" || { log "helm install failed: $(tail -5 "$WORK/helm.log")"; return 1; }
    k label namespace "$SYSTEM_NS" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null || return 1
    helm_save_cert
    return 0
  fi
  if ((!HELM_GUARD_CHECKED)) && ! k get namespace "$SYSTEM_NS" >/dev/null 2>&1; then
    HELM_GUARD_CHECKED=1
    local t0=$SECONDS
    ! helm_ install "$RELEASE" "$ROOT/charts/prestop-injector" -n "$SYSTEM_NS" --create-namespace \
      --wait --timeout 1m -f "$WORK/helm-values.yaml" &&
      tail -3 "$WORK/helm.log" | grep -q 'create and label prestop-system before installing' &&
      ! k get mutatingwebhookconfiguration "$RELEASE" >/dev/null 2>&1 &&
      ((SECONDS - t0 < 30)) ||
      { log "on 1.20, helm install --create-namespace of an unlabelled namespace was not refused at once"; return 1; }
    log "1.20: helm install --create-namespace refused by the chart in $((SECONDS - t0)) s, nothing applied"
    "$HELM" --kubeconfig "$KUBECONFIG" uninstall "$RELEASE" -n "$SYSTEM_NS" >/dev/null 2>&1
  fi
  k get namespace "$SYSTEM_NS" >/dev/null 2>&1 || k create namespace "$SYSTEM_NS" >/dev/null || return 1
  k label namespace "$SYSTEM_NS" --overwrite "kubernetes.io/metadata.name=$SYSTEM_NS" >/dev/null || return 1
  helm_ install "$RELEASE" "$ROOT/charts/prestop-injector" -n "$SYSTEM_NS" \
    --wait --timeout 4m -f "$WORK/helm-values.yaml" || { log "helm install failed: $(tail -5 "$WORK/helm.log")"; return 1; }
  k label namespace "$SYSTEM_NS" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null || return 1
  helm_save_cert
}

# INSTALL "4. With Helm", Uninstall: helm uninstall, then the namespace --create-namespace
# made (Helm does not own it).
uninstall_helm() {
  helm_ uninstall "$RELEASE" -n "$SYSTEM_NS" --wait --timeout 3m || { log "helm uninstall failed: $(tail -5 "$WORK/helm.log")"; return 1; }
  kubectl --request-timeout=0 delete namespace "$SYSTEM_NS" --wait=true --timeout=180s >/dev/null
}

# Rotation, as INSTALL tells Helm users: (1+2) `helm upgrade --reuse-values --set
# certificates.rotation=<new>`: a new CA, key and Secret, the caBundle trusting the old CA
# and the new; (3) once the pods serve the new certificate, `helm upgrade --reuse-values`:
# the caBundle of the new CA alone. (Deleting the Secret and upgrading, what INSTALL said
# before, changes the caBundle at once: x509 "unknown authority" failures for the minute
# the kubelet takes to deliver the Secret; this suite saw creates fail with "x509:
# certificate signed by unknown authority" that way.)
ca_bundle_count() {
  k get mutatingwebhookconfiguration "$RELEASE" -o json |
    jq -r '.webhooks[0].clientConfig.caBundle' | base64 -d | grep -c 'BEGIN CERTIFICATE'
}
certs_rotate_helm() {
  helm_ upgrade "$RELEASE" "$ROOT/charts/prestop-injector" -n "$SYSTEM_NS" --reuse-values \
    --set-string certificates.rotation=e2e-1 --wait --timeout 4m || return 1
  helm_save_cert
  local n
  n=$(ca_bundle_count)
  ((n == 2)) || { log "after the rotation the caBundle holds $n certificates, not 2"; return 1; }
}
certs_ca_new_only_helm() {
  helm_ upgrade "$RELEASE" "$ROOT/charts/prestop-injector" -n "$SYSTEM_NS" --reuse-values --wait --timeout 4m || return 1
  local n
  n=$(ca_bundle_count)
  ((n == 1)) || { log "after the second upgrade the caBundle holds $n certificates, not 1"; return 1; }
}

# --- what only Helm has ------------------------------------------------------------------
# Helm 4 applies server-side by default. kube-apiserver 1.20 has server-side apply (beta,
# on by default since 1.16): the objects carry an Apply entry of Helm's field manager.
helm_applied_server_side() {
  # kubectl leaves managedFields out unless asked.
  kc -n "$SYSTEM_NS" get deploy prestop-injector -o json --show-managed-fields
  expect "the Deployment was applied server-side (a managedFields entry with operation Apply)" \
    jqt "$OUT" 'any(.metadata.managedFields[]; .operation == "Apply")'
  echo "    field managers: $(jq -c '[.metadata.managedFields[] | {manager, operation}]' <<<"$OUT")" >&2
  kc get mutatingwebhookconfiguration prestop-injector -o json --show-managed-fields
  expect "so was the MutatingWebhookConfiguration" \
    jqt "$OUT" 'any(.metadata.managedFields[]; .operation == "Apply")'
  if kube_at_least 28; then
    expect "with matchConditions (the chart's gate: >= 1.28)" jqt "$OUT" '.webhooks[0].matchConditions | length > 0'
  else
    expect "without matchConditions (the chart's gate for < 1.28)" jqt "$OUT" '.webhooks[0].matchConditions == null'
  fi
}

# `helm upgrade` with a changed value while Jobs are created: a config value, so the
# ConfigMap changes and its checksum rolls the pods (surge first, PDB, shutdown delay).
helm_upgrade_under_load() {
  local before fp
  before=$(webhook_pods | jq -r '[.items[].metadata.name] | sort | join(" ")')
  fp=$(file_fingerprint "$WORK/certs/tls/tls.crt")
  seal_key() { k -n "$SYSTEM_NS" get secret "$RELEASE-seal" -o json | jq -r '.data["seal.key"]'; }
  local seal
  seal=$(seal_key)
  load_start
  expect "creates go through before the upgrade" load_more 5
  local seconds=$((10 + ${ROLLOUT_ROUND:-1}))
  expect "helm upgrade --reuse-values --set config.shutdownSeconds=$seconds --wait" \
    helm_ upgrade "$RELEASE" "$ROOT/charts/prestop-injector" -n "$SYSTEM_NS" --reuse-values \
    --set config.shutdownSeconds=$seconds --wait --timeout 4m
  expect "the rollout completes" rollout_done "$SYSTEM_NS" deploy/prestop-injector
  old_gone() { ! webhook_pods | jq -e --arg b "$before" '.items[] | select(.metadata.name as $n | $b | split(" ") | index($n))' >/dev/null; }
  expect "the old pods are gone (the config checksum rolled them)" wait_for 90 old_gone
  kc -n "$SYSTEM_NS" get configmap "$RELEASE-config" -o json
  expect "the ConfigMap holds the new value" jqt "$OUT" ".data[\"config.yaml\"] | test(\"shutdownSeconds: $seconds\")"
  expect "creates go on after it" load_more 5
  load_stop
  load_check "helm upgrade"
  helm_save_cert
  expect "the upgrade kept the serving certificate (the chart looks its Secret up)" \
    test "$(file_fingerprint "$WORK/certs/tls/tls.crt")" == "$fp"
  # docs/REAPER.md#the-seal: a new key would leave every sealed pod to no reaper.
  expect "the upgrade kept the seal key (looked up too)" \
    test -n "$seal" -a "$seal" != null -a "$(seal_key)" == "$seal"
}

helm_test() {
  expect "helm test passes (its pod admitted through the webhook, then runs)" \
    helm_ test "$RELEASE" -n "$SYSTEM_NS" --timeout 3m
}

# Instead of `kubectl rollout restart`: the chart's Deployment rolled by an upgrade.
rollout_helm() {
  scenario "$M: helm upgrade with a changed config value while Jobs are created: 0 failed creates" helm_upgrade_under_load
}
scenarios_helm() {
  scenario "$M: Helm 4's server-side apply works against kube-apiserver $KUBE_VERSION" helm_applied_server_side
  scenario "$M: helm test" helm_test
}
