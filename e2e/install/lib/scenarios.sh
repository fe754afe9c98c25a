# The install suite's scenarios (issue 18), for one install method M (lib/kustomize.sh,
# lib/helm.sh): each provides install_M MODE REAPER (which also sets NODE_DS, the
# node DaemonSet's name: the agent, and the reaper), uninstall_M, the certificate rotation (certs_ca_both_M,
# certs_serve_new_M, certs_ca_new_only_M; or certs_rotate_M for steps 1 and 2 at once,
# then certs_ca_new_only_M) and optionally scenarios_M (what only that method has). Sourced by run.sh; uses
# e2e/lib/assert.sh (kc, expect, jqt, scenario), e2e/node/lib/scenarios.sh's helpers and
# run.sh's HOST, IMAGE, NS, WORK, NODE.

SYSTEM_NS=prestop-system
# The node DaemonSet's namespace (the agent in every install, the reaper joins its pod).
NODE_NS=prestop-node
WEBHOOK_SVC=prestop-injector.prestop-system.svc

webhook_pods() { k -n "$SYSTEM_NS" get pods -l app.kubernetes.io/name=prestop-injector -o json 2>/dev/null; }
# The ready, not terminating webhook pods' IPs.
webhook_ips() {
  webhook_pods | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .status.podIP'
}
rollout_done() { # namespace kind/name
  kubectl --request-timeout=0 -n "$1" rollout status "$2" --timeout=240s >/dev/null 2>&1
}
# The SHA-256 fingerprint of the certificate a pod serves on 8443 for the Service's name.
served_fingerprint() { # pod ip
  openssl s_client -connect "$1:8443" -servername "$WEBHOOK_SVC" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null
}
file_fingerprint() { openssl x509 -in "$1" -noout -fingerprint -sha256; }

# --- load: Jobs created in a loop while something happens to the webhook ----------------
# Each create goes through the mutating webhook (annotated; failurePolicy Fail). No pods:
# parallelism 0. Bounded: at most LOAD_MAX creates, and it stops at `load_stop`. Here
# ~5 a second go through. In one of 12 rolls in a row (a machine with leftovers of a
# killed run) "creates go on after it" failed with 0 failed creates; 400 was then ruled
# out as the cause by raising the bound, and `load_more` says what the loop was doing.
LOAD_MAX=1500
LOAD_PID=
load_job() {
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  generateName: load-
  labels: {e2e-load: "1"}
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  parallelism: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: busybox:stable, imagePullPolicy: IfNotPresent, command: [sh, -c, "true"],
         volumeMounts: [{name: s, mountPath: /s}]}
      volumes: [{name: s, hostPath: {path: $HOST/scratch/load, type: DirectoryOrCreate}}]
YAML
}
load_start() {
  rm -f "$WORK/load.stop" "$WORK/load.log"
  load_job >"$WORK/load-job.yaml"
  (
    i=0
    while ((i < LOAD_MAX)) && [[ ! -e "$WORK/load.stop" ]]; do
      if err=$(k create -f "$WORK/load-job.yaml" 2>&1 >/dev/null); then
        echo ok
      else
        echo "fail $(date +%T) $err" | tr '\n' ' '
        echo
      fi
      i=$((i + 1))
    done >>"$WORK/load.log"
  ) &
  LOAD_PID=$!
  PIDS+=("$LOAD_PID")
}
load_count() { grep -c "^$1" "$WORK/load.log" 2>/dev/null; }
load_stop() {
  touch "$WORK/load.stop"
  wait "$LOAD_PID" 2>/dev/null
  LOAD_PID=
}
# Keeps the load running until N more creates have gone through.
load_more() { # n
  local target=$(($(load_count ok) + $1))
  more() { (($(load_count ok) >= target)); }
  wait_for 120 more && return 0
  local loop=ended
  kill -0 "$LOAD_PID" 2>/dev/null && loop=running
  log "load: $(load_count ok) ok and $(load_count fail) failed after 120 s, waiting for $target ok; the loop has $loop (at most $LOAD_MAX); last: $(tail -1 "$WORK/load.log")"
  return 1
}
load_check() { # what
  local oks fails
  oks=$(load_count ok)
  fails=$(load_count fail)
  ((fails == 0)) || load_failure_evidence
  expect "$1: 0 failed creates ($fails of $((oks + fails)); first: $(grep -m1 '^fail' "$WORK/load.log"))" test "$fails" -eq 0
  expect "$1: at least 20 creates went through ($oks)" test "$oks" -ge 20
  kc get jobs -l e2e-load=1 -o json
  expect "$1: every created Job was mutated (status annotation)" \
    jqt "$OUT" '.items | length > 0 and all(.metadata.annotations["prestop-injector.io/status"] != null or .spec.template.metadata.annotations["prestop-injector.io/status"] != null)'
  k delete jobs -l e2e-load=1 --wait=false >/dev/null 2>&1
}

# What a failed create leaves to read (CI keeps only this output): the API server's
# lines about the webhook, the webhook pods' events and the end of their logs.
load_failure_evidence() {
  echo "    failed creates:" >&2
  grep '^fail' "$WORK/load.log" | head -5 | sed 's/^/      /' >&2
  echo "    the API server on the webhook:" >&2
  grep -E 'mutate.prestop-injector.io|prestop-injector.prestop-system' "$WORK/apiserver.log" 2>/dev/null |
    tail -20 | cut -c1-400 | sed 's/^/      /' >&2
  echo "    the webhook pods' events:" >&2
  k -n "$SYSTEM_NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -25 | sed 's/^/      /' >&2
  pod_log_tails "$SYSTEM_NS"_prestop-injector- 15
}
# The last LINES lines of the logs on the node of the pods whose log directory starts
# with PREFIX (namespace_podname-), on stderr.
pod_log_tails() { # prefix lines
  local log
  for log in /var/log/pods/"$1"*/*/*.log; do
    [[ -f $log ]] || continue
    echo "    $log:" >&2
    tail -"$2" "$log" | cut -c1-600 | sed 's/^/      /' >&2
  done
}

# The node agent says at start that its account may list its node's pods (issue 31:
# whether a pod is ending): in the log of a pod of the node DaemonSet as it is now.
agent_lists() {
  local selector pod
  selector=$(k -n "$NODE_NS" get ds "$NODE_DS" -o json |
    jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")')
  for pod in $(k -n "$NODE_NS" get pods -l "$selector" \
    -o jsonpath='{range .items[*]}{.metadata.name}_{.metadata.uid}{"\n"}{end}'); do
    grep -qh "the API server lists the pods of node" \
      /var/log/pods/"$NODE_NS"_"$pod"/node-agent/*.log 2>/dev/null && return 0
  done
  return 1
}

# --- the scenarios ---------------------------------------------------------------------
install_cluster_wide() {
  expect "$M: install cluster-wide with the reaper, as documented" "install_$M" cluster-wide 1
  expect "the webhook's Deployment rolls out" rollout_done "$SYSTEM_NS" deploy/prestop-injector
  expect "the node DaemonSet (agent and reaper) rolls out" rollout_done "$NODE_NS" "ds/$NODE_DS"
  expect "the node agent lists its node's pods through the reaper's service account" wait_for 60 agent_lists
}

deployment_as_shipped() {
  kc -n "$SYSTEM_NS" get deploy prestop-injector -o json
  expect "2 replicas, 2 ready" jqt "$OUT" '.spec.replicas == 2 and .status.readyReplicas == 2'
  kc -n "$SYSTEM_NS" get pods -l app.kubernetes.io/name=prestop-injector -o json
  local pods=$OUT
  expect "2 pods Running, Ready (readiness probe green), no restart (liveness green)" jqt "$pods" '
    [.items[] | select(.status.phase == "Running")
      | select(any(.status.conditions[]; .type == "Ready" and .status == "True"))
      | select(all(.status.containerStatuses[]; .restartCount == 0))] | length == 2'
  expect "running the release image $IMAGE" jqt "$pods" \
    "all(.items[].spec.containers[]; .image == \"$IMAGE\")"
  expect "pod: uid/gid 65532, runAsNonRoot, fsGroup 65532, RuntimeDefault seccomp" jqt "$pods" '
    all(.items[].spec.securityContext; .runAsUser == 65532 and .runAsGroup == 65532
      and .runAsNonRoot == true and .fsGroup == 65532 and .seccompProfile.type == "RuntimeDefault")'
  expect "container: read-only root, no privilege escalation, all capabilities dropped" jqt "$pods" '
    all(.items[].spec.containers[].securityContext; .readOnlyRootFilesystem == true
      and .allowPrivilegeEscalation == false and .capabilities.drop == ["ALL"])'
  expect "certificates from Secret prestop-injector-tls" jqt "$pods" '
    all(.items[].spec.volumes[]; .name != "tls" or .secret.secretName == "prestop-injector-tls")'
  # As the node sees the processes: the uid, and a read-only root mount.
  local pid n=0 bad=0
  for pid in $(pgrep -f -- '--listen=0.0.0.0:8443'); do
    n=$((n + 1))
    grep -qE '^Uid:\s+65532\s' "/proc/$pid/status" || bad=1
    awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo" | grep -qE '(^|,)ro(,|$)' || bad=1
  done
  expect "on the node: 2 webhook processes, uid 65532, root mounted read-only ($n found)" \
    test "$n" -eq 2 -a "$bad" -eq 0
  local ip ok=0
  for ip in $(webhook_ips); do
    curl -sf "http://$ip:8080/readyz" >/dev/null && curl -sf "http://$ip:8080/healthz" >/dev/null &&
      [[ "$(served_fingerprint "$ip")" == "$(file_fingerprint "$WORK/certs/tls/tls.crt")" ]] && ok=$((ok + 1))
  done
  expect "each pod: /readyz and /healthz answer, 8443 serves the Secret's certificate" test "$ok" -eq 2
  # Pod Security admission is 1.23+: on 1.20 the namespace label is inert, nothing enforces it.
  kc get ns "$SYSTEM_NS" -o json
  expect "the namespace carries the shipped label (inert on 1.20)" \
    jqt "$OUT" '.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"'
}

seed_through_service() {
  local dir="$HOST/scratch/seed/package"
  kc create -o json -f - <<<"$(seed_job "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the API server called the webhook through its Service: the Job is mutated" \
    jqt "$OUT" '.spec.template.spec.containers[0].lifecycle.preStop != null and .spec.template.metadata.annotations["prestop-injector.io/status"] != null'
  local pods="controller-uid=$(jq -r .metadata.uid <<<"$OUT")"
  expect "the pod runs within 90 s (the cleaner init container from the release image)" wait_for 90 pod_running "$pods"
  expect "its file appears on the node within 30 s" wait_for 30 has_file "$dir/test.txt"
  kc delete job job-worker --wait=false
  expect "kubectl delete job succeeds" test "$STATUS" -eq 0
  expect "the preStop empties the host directory within 60 s" wait_for 60 dir_empty "$dir"
  expect "the pod goes away within 120 s" wait_for 120 no_pods "$pods"
  expect "the host directory itself stays" test -d "$dir"
  expect "no FailedPreStopHook event" lacks "$(events_for job-worker)" 'FailedPreStopHook'
}

rollout_under_load() {
  local before
  before=$(webhook_pods | jq -r '[.items[].metadata.name] | sort | join(" ")')
  load_start
  expect "creates go through before the restart" load_more 5
  kc -n "$SYSTEM_NS" rollout restart deploy/prestop-injector
  expect "kubectl rollout restart succeeds" test "$STATUS" -eq 0
  expect "the rollout completes" rollout_done "$SYSTEM_NS" deploy/prestop-injector
  old_gone() { ! webhook_pods | jq -e --arg b "$before" '.items[] | select(.metadata.name as $n | $b | split(" ") | index($n))' >/dev/null; }
  expect "the old pods are gone" wait_for 90 old_gone
  expect "creates go on after it" load_more 5
  load_stop
  load_check "rollout restart"
}

rotation_under_load() {
  local old_fp new_fp ip
  old_fp=$(file_fingerprint "$WORK/certs/tls/tls.crt")
  load_start
  expect "creates go through before the rotation" load_more 5
  local one_step=0
  declare -F "certs_rotate_$M" >/dev/null && one_step=1
  if ((one_step)); then
    expect "steps 1 and 2 at once: a new CA, key and Secret, the caBundle trusts both CAs" "certs_rotate_$M"
  else
    expect "step 1: a new CA and key, the caBundle trusts both" "certs_ca_both_$M"
  fi
  expect "creates go through with both CAs" load_more 5
  new_fp=$(file_fingerprint "$WORK/certs/tls/tls.crt")
  expect "the new serving certificate differs" test "$old_fp" != "$new_fp"
  ((one_step)) || expect "step 2: the new Secret" "certs_serve_new_$M"
  mounted_new() {
    local f n=0
    for f in "$NODE"/kubelet/pods/*/volumes/kubernetes.io~secret/tls/tls.crt; do
      [[ -f "$f" ]] || continue
      [[ "$(file_fingerprint "$f")" == "$new_fp" ]] || return 1
      n=$((n + 1))
    done
    ((n >= 2))
  }
  expect "the kubelet swaps the mounted files within 120 s" wait_for 120 mounted_new
  serving_new() {
    local ip n=0
    for ip in $(webhook_ips); do
      [[ "$(served_fingerprint "$ip")" == "$new_fp" ]] || return 1
      n=$((n + 1))
    done
    ((n == 2))
  }
  expect "both pods serve the new certificate within 30 s of the swap (reloaded, no restart)" \
    wait_for 30 serving_new
  kc -n "$SYSTEM_NS" get pods -l app.kubernetes.io/name=prestop-injector -o json
  expect "no container restarted" jqt "$OUT" 'all(.items[].status.containerStatuses[]; .restartCount == 0)'
  expect "step 3: the caBundle of the new CA only" "certs_ca_new_only_$M"
  expect "creates go on with the new CA only" load_more 10
  load_stop
  load_check "certificate rotation"
}

reaper_daemonset() {
  local dir="$HOST/scratch/reaped/cut-off"
  kc -n "$NODE_NS" get ds "$NODE_DS" -o json
  expect "the reaper runs without --dry-run" jqt "$OUT" \
    '.status.numberReady == 1 and (.spec.template.spec.containers[] | select(.name == "reaper") | .args | index("--dry-run") == null)'
  kc create -f - <<<"$(cut_off_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  running() { k get pod cut-off -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  expect "its files appear on the node" wait_for 30 has_file "$dir/d/.hidden"
  recorded() { grep -qF "$dir" "$HOST/reaper-state/state.json" 2>/dev/null; }
  expect "the reaper recorded its directory in its state file" wait_for 60 recorded
  kc delete pod cut-off --grace-period=0 --force --wait=false
  gone() { ! k get pod cut-off >/dev/null 2>&1; }
  expect "the pod is gone from the API at once" wait_for 10 gone
  container_gone() { ! pgrep -f "sleep 100001" >/dev/null; }
  expect "the kubelet stops the container" wait_for 60 container_gone
  expect "the preStop did not clean (cut off)" has_file "$dir/file"
  # The shipped delay is 60 s, then a second look.
  if ! wait_for 150 dir_empty "$dir"; then
    FAILS+=("the reaper empties the directory (60 s delay) within 150 s")
    # Why not, while its log is still on the node (the uninstall removes it).
    echo "    the reaper's log (its reasons):" >&2
    pod_log_tails "$NODE_NS"_ 30
  fi
  expect "the directory itself stays" test -d "$dir"
}

uninstall_then_create() {
  expect "uninstall as documented" "uninstall_$M"
  kc get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name
  expect "no webhook configuration left" lacks "$OUT" prestop-injector
  ns_gone() { ! k get ns "$SYSTEM_NS" >/dev/null 2>&1 && ! k get ns "$NODE_NS" >/dev/null 2>&1; }
  expect "its namespaces are gone within 120 s" wait_for 120 ns_gone
  kc create -o json -f "$WORK/load-job.yaml"
  expect "an annotated Job is still created" test "$STATUS" -eq 0
  expect "and not mutated" jqt "$OUT" '.spec.template.metadata.annotations["prestop-injector.io/status"] == null'
  k delete jobs -l e2e-load=1 --wait=false >/dev/null 2>&1
}

# An unannotated Job with a per-pod directory (subPathExpr $(POD_UID), restartPolicy
# Never): what `auto` cleans without an annotation (issue 17).
optin_job() {
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: optin}
spec:
  parallelism: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "true"]
        env: [{name: POD_UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}]
        volumeMounts: [{name: s, mountPath: /s, subPathExpr: \$(POD_UID)}]
      volumes: [{name: s, hostPath: {path: $HOST/scratch/optin, type: DirectoryOrCreate}}]
YAML
}

namespace_opt_in() {
  expect "$M: install namespace-opt-in, as documented" "install_$M" namespace-opt-in 0
  expect "the webhook's Deployment rolls out" rollout_done "$SYSTEM_NS" deploy/prestop-injector
  expect "the node agent's DaemonSet rolls out" rollout_done "$NODE_NS" "ds/$NODE_DS"
  expect "the node agent lists its node's pods through its own service account" wait_for 60 agent_lists
  k create namespace e2e-optin >/dev/null
  k label ns e2e-optin kubernetes.io/metadata.name=e2e-optin prestop-injector.io/inject=enabled >/dev/null
  # Ready pods are not yet a Service that routes to them: the Endpoints update and
  # kube-proxy's rules follow the rollout, and with failurePolicy Fail a create in that
  # moment is refused. Wait as a user previews: a server-side dry run that goes through.
  previews() { k -n e2e-optin create --dry-run=server -f - <<<"$(optin_job)" >/dev/null 2>&1; }
  expect "a server-side dry run goes through the webhook's Service within 30 s" wait_for 30 previews
  kc -n e2e-optin create -o json -f - <<<"$(optin_job)"
  expect "a labelled namespace's unannotated Job is created ($(head -c 400 <<<"$ERR"))" test "$STATUS" -eq 0
  expect "and injected (status annotation on its template)" \
    jqt "$OUT" '.spec.template.metadata.annotations["prestop-injector.io/status"] != null'
  kc -n "$NS" create -o json -f - <<<"$(optin_job)"
  expect "the same Job in an unlabelled namespace is not" \
    jqt "$OUT" '.spec.template.metadata.annotations["prestop-injector.io/status"] == null'
  k -n e2e-optin delete job optin --wait=false >/dev/null 2>&1
  k -n "$NS" delete job optin --wait=false >/dev/null 2>&1
  expect "uninstall as documented" "uninstall_$M"
  k delete namespace e2e-optin --wait=false >/dev/null 2>&1
}

run_install_pass() { # method
  M=$1
  local failed=$FAILED
  scenario "$M: cluster-wide install as documented (image overridden, reaper on)" install_cluster_wide
  if ((FAILED > failed)); then
    # Nothing below can pass without the install: say so once, clean up, go on.
    skip "$M: the cluster-wide scenarios" "the install failed"
    "uninstall_$M" >/dev/null 2>&1
    scenario "$M: namespace-opt-in: a labelled namespace's unannotated Job is injected; uninstall" namespace_opt_in
    return
  fi
  # From here to the end of the pass, as an operator's Prometheus would (lib/prometheus.sh).
  scenario "$M: a real Prometheus finds the installed pods through the API server and scrapes them" prometheus_start
  scenario "$M: the Deployment: 2 ready replicas, probes green, restricted, read-only root, certs from the Secret" deployment_as_shipped
  scenario "$M: seed Job injected through the Service, runs; kubectl delete job empties its host dir" seed_through_service
  # A method may roll the pods its own way instead (lib/helm.sh: helm upgrade with a
  # changed value, which rolls the same Deployment as `kubectl rollout restart` does).
  # PRESTOP_E2E_ROLLOUTS=N rolls N times (hunting a rare failure; 1 in CI).
  local round
  for ((round = 1; round <= ${PRESTOP_E2E_ROLLOUTS:-1}; round++)); do
    ROLLOUT_ROUND=$round
    if declare -F "rollout_$M" >/dev/null; then
      "rollout_$M"
    else
      scenario "$M: rollout restart while Jobs are created: 0 failed creates" rollout_under_load
    fi
  done
  scenario "$M: certificate rotation as documented: reloaded, 0 failed creates" rotation_under_load
  # What only this method has (lib/helm.sh: server-side apply, helm test), on the
  # cluster-wide install with the reaper.
  if declare -F "scenarios_$M" >/dev/null; then "scenarios_$M"; fi
  scenario "$M: the reaper DaemonSet (out of dry-run) empties a force-deleted pod's directory" reaper_daemonset
  # After the suite's traffic and the reaper's work (lib/prometheus.sh, issue 33).
  scenario "$M: a real Prometheus scrapes webhook, reaper and agent; every dashboard query and alert evaluates; no alert through the rollout and rotation" prometheus_live
  # The on-call's commands as docs/RUNBOOKS.md prints them (issue 39; lib/runbooks.sh):
  # on both passes where both methods are what users run (≥ 1.30, which the kustomize
  # install needs), so each method's own commands run with its own names. Tenants at the
  # agent's doors (lib/doors.sh) and 5 minutes of the agent alert's own `for:`: on one
  # pass only (CI's 1.37 run has both); PRESTOP_E2E_ALERT_PASS=helm runs them on the Helm
  # pass instead.
  if [[ $M == "${PRESTOP_E2E_ALERT_PASS:-kustomize}" ]] || kube_at_least 30; then
    scenario "$M: every command of the runbooks runs against this install (changes as server-side dry runs)" runbooks_live
  fi
  if [[ $M == "${PRESTOP_E2E_ALERT_PASS:-kustomize}" ]]; then
    scenario "$M: tenants trickling on the agent's port and asking without pause: its probes stay green, another pod is answered 'same' and emptied" agent_not_wedged
    scenario "$M: a node whose agent cannot judge: cleanups refused, PrestopInjectorNodeAgentRefusing fires, the reaper empties them after" agent_refusing_fires
  fi
  prometheus_stop
  scenario "$M: uninstall leaves no webhook configuration; Jobs are still created" uninstall_then_create
  scenario "$M: namespace-opt-in: a labelled namespace's unannotated Job is injected; uninstall" namespace_opt_in
}
