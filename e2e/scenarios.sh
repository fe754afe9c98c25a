# The scenarios of the end-to-end suite, sourced by e2e/run.sh once etcd, kube-apiserver
# and the webhook run. Each function asserts with `expect` on kubectl's stdout, stderr and
# exit status (`kc` keeps them in OUT, ERR, STATUS) and on the stored objects. Assertions
# are on what stays stable while the hook's format evolves: a preStop exec whose argv
# holds the target path, the grace period, warning fragments, the status annotation.
# shellcheck shell=bash

seed_dry_run() {
  kc apply --dry-run=server -o json -f examples/job-worker.yaml
  cp "$WORK/err" "$WORK/seed-dry-run.stderr"
  expect "exit status 0" test "$STATUS" -eq 0
  local spec="$TEMPLATE.spec"
  expect "a preStop exec cleaning /test-package" jqt "$OUT" "$spec.containers[0] | $PRESTOP_CLEANS"
  expect "grace raised to >= 40 s" jqt "$OUT" "$spec.terminationGracePeriodSeconds >= 40"
  expect "command fixed to /bin/sh" jqt "$OUT" "$spec.containers[0].command[0] == \"/bin/sh\""
  expect "status annotation on the template" \
    jqt "$OUT" "$TEMPLATE.metadata.annotations[\"prestop-injector.io/status\"] | fromjson | .containers == [\"busybox\"]"
  expect "four warnings on stderr" test "$(grep -c '^Warning: ' <<<"$ERR")" -eq 4
  expect "warning: command and preStop hook now run /bin/sh" has "$ERR" 'has no bash; command and preStop hook now run /bin/sh'
  expect "warning: without the node agent the fixed directory is not cleaned" has "$ERR" \
    '/test-package is not cleaned without the node agent'
  expect "warning: the hook deletes an unmounted path" has "$ERR" '/cadm-package/*, which is on no volume mount'
  # Issue 31: a deleted pod's replacement may use the fixed directory while it still stops.
  expect "warning: the replacement pod may share the directory" has "$ERR" "/test-package may be shared by a Job's replacement pod"
  # The README shows the real server's output: its block after "Through a real API server".
  local readme
  readme=$(awk '/^Through a real API server/ { on = 1 } on && /^Warning: / { print; seen = 1 }
                on && seen && /^```/ { exit }' README.md)
  expect "the README's dry-run warnings are these, verbatim" test "$(grep '^Warning: ' <<<"$ERR")" = "$readme"
  kc apply --dry-run=server -o yaml -f examples/job-worker.yaml
  expect "yaml output carries the status annotation" has "$OUT" 'prestop-injector.io/status'
  kc get job job-worker
  expect "nothing persisted" test "$STATUS" -ne 0
  expect "NotFound" has "$ERR" 'NotFound'
}

seed_create() {
  kc create -f examples/job-worker.yaml
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the warnings reach kubectl create too" has "$ERR" 'which is on no volume mount'
  kc get job job-worker -o json
  STORED_JOB=$OUT
  local spec="$TEMPLATE.spec"
  expect "stored: preStop exec cleaning /test-package" jqt "$OUT" "$spec.containers[0] | $PRESTOP_CLEANS"
  expect "stored: grace >= 40 s" jqt "$OUT" "$spec.terminationGracePeriodSeconds >= 40"
  expect "stored: /bin/sh command" jqt "$OUT" "$spec.containers[0].command[0] == \"/bin/sh\""
  expect "stored: status annotation" jqt "$OUT" "$TEMPLATE.metadata.annotations | has(\"prestop-injector.io/status\")"
}

pod_from_template() {
  [[ -n "${STORED_JOB:-}" ]] || { FAILS+=("the seed Job was stored"); return; }
  # As the Job controller would: the template's metadata and spec, owned by the Job.
  local pod
  pod=$(jq '{apiVersion: "v1", kind: "Pod",
             metadata: (.spec.template.metadata + {name: "job-worker-pod",
               ownerReferences: [{apiVersion: "batch/v1", kind: "Job", name: .metadata.name,
                                  uid: .metadata.uid, controller: true}]}),
             spec: .spec.template.spec}' <<<"$STORED_JOB")
  local patches_before pods_before
  patches_before=$(metric prestop_injector_patches_total)
  pods_before=$(metric_sum prestop_injector_requests_total 'kind="Pod"')
  kc create -o json -f - <<<"$pod"
  printf "%s" "$OUT" >"$WORK/pod-from-template.json"
  expect "pod created" test "$STATUS" -eq 0
  expect "no warnings" lacks "$ERR" 'Warning:'
  local fields='{containers, initContainers, volumes, terminationGracePeriodSeconds}'
  expect "stored pod's containers, volumes and grace equal the template's" \
    test "$(jq -S ".spec | $fields" <<<"$OUT")" = "$(jq -S ".spec.template.spec | $fields" <<<"$STORED_JOB")"
  # Less the seccomp annotations a 1.20 server adds to a Pod for its containers'
  # seccompProfile fields (the cleaner's init container has one).
  local ours='.metadata.annotations | with_entries(select(.key | (startswith("container.seccomp.security.alpha.kubernetes.io/") or . == "seccomp.security.alpha.kubernetes.io/pod") | not))'
  expect "stored pod's annotations equal the template's" \
    test "$(jq -S "$ours" <<<"$OUT")" = "$(jq -S '.spec.template.metadata.annotations' <<<"$STORED_JOB")"
  expect "the webhook was asked about the Pod" test "$(metric_sum prestop_injector_requests_total 'kind="Pod"')" -gt "$pods_before"
  expect "and answered without a patch" test "$(metric prestop_injector_patches_total)" = "$patches_before"
}

bad_annotation() {
  kc create -f - <<<"$(job bad-hook '"prestop-injector.io/hook-seconds": "ten"')"
  expect "create refused" test "$STATUS" -ne 0
  expect "names our webhook" has "$ERR" 'admission webhook "mutate.prestop-injector.io" denied the request'
  expect "names the annotation and the value" has "$ERR" 'prestop-injector.io/hook-seconds'
  expect "names the bad value" has "$ERR" 'ten'
  kc get job bad-hook
  expect "not persisted" test "$STATUS" -ne 0
}

deployment_sleep70() {
  kc create -f examples/deployment-sleep70.yaml
  expect "create succeeds" test "$STATUS" -eq 0
  kc get deployment web-sleep70 -o json
  local container="$TEMPLATE.spec.containers[0]"
  expect "grace >= 80 s" jqt "$OUT" "$TEMPLATE.spec.terminationGracePeriodSeconds >= 80"
  expect "the hook still runs under /bin/bash" \
    jqt "$OUT" "$container.lifecycle.preStop.exec.command | index([\"/bin/bash\"]) != null"
  expect "the user's sleep 70 kept" jqt "$OUT" "$container.lifecycle.preStop.exec.command | map(contains(\"sleep 70\")) | any"
}

orphan_delete_warns() {
  # --wait=false: the orphan finalizer waits for a garbage collector, and there is none.
  kc delete job job-worker --cascade=orphan --wait=false
  expect "delete succeeds" test "$STATUS" -eq 0
  expect "the orphan warning" has "$ERR" "Warning: this Job's pods keep running and their cleanup waits until they are deleted"
  expect "names the fix" has "$ERR" 'propagationPolicy=Background'
  kc create -f - <<<"$(job plain-delete '"prestop-injector.io/cleanup": "auto"')"
  kc delete job plain-delete
  expect "kubectl's default (background) delete: no warning" lacks "$ERR" 'Warning:'
}

orphan_delete_denied() {
  stop_webhook
  start_webhook "$CONFIG_DENY"
  kc create -f - <<<"$(job guarded '"prestop-injector.io/cleanup": "auto"')"
  kc delete job guarded --cascade=orphan --wait=false
  expect "orphaning delete refused" test "$STATUS" -ne 0
  expect "names our validating webhook" has "$ERR" 'admission webhook "validate.prestop-injector.io" denied the request'
  expect "says what to do" has "$ERR" 'propagationPolicy=Background'
  kc get job guarded
  expect "the Job is still there" test "$STATUS" -eq 0
  kc delete job guarded --cascade=background
  expect "a background delete goes through" test "$STATUS" -eq 0
  stop_webhook
  start_webhook "$CONFIG_WARN"
}

set_failure_policy() {
  k patch mutatingwebhookconfiguration prestop-injector --type=json \
    -p "[{\"op\": \"replace\", \"path\": \"/webhooks/0/failurePolicy\", \"value\": \"$1\"}]" >/dev/null
}

webhook_down() {
  stop_webhook
  kc create -f - <<<"$(job down-fail '"prestop-injector.io/cleanup": "auto"')"
  expect "Fail: create refused" test "$STATUS" -ne 0
  expect "Fail: the error names the webhook" has "$ERR" 'failed calling webhook "mutate.prestop-injector.io"'
  expect "Fail: and why (connection refused)" has "$ERR" 'connection refused'
  set_failure_policy Ignore
  kc create -f - <<<"$(job down-ignore '"prestop-injector.io/cleanup": "auto"')"
  expect "Ignore: create succeeds" test "$STATUS" -eq 0
  kc get job down-ignore -o json
  expect "Ignore: stored unchanged (no hook, no status)" \
    jqt "$OUT" "($TEMPLATE.spec.containers[0].lifecycle == null) and ($TEMPLATE.metadata.annotations == null)"
  set_failure_policy Fail
  start_webhook "$CONFIG_WARN"
}

namespace_opt_in() {
  apply_webhook_configs namespace-opt-in
  k create namespace e2e-opted-in >/dev/null
  k label namespace e2e-opted-in prestop-injector.io/inject=enabled >/dev/null
  k create namespace e2e-plain >/dev/null
  local plain
  plain=$(private_job unannotated '')
  kc -n e2e-opted-in create -f - <<<"$plain"
  expect "opted-in: create succeeds" test "$STATUS" -eq 0
  kc -n e2e-opted-in get job unannotated -o json
  expect "opted-in: an unannotated Job with a per-pod directory gets the hook" \
    jqt "$OUT" "$TEMPLATE.spec.containers[0] | $PRESTOP_CLEANS"
  # A fixed host directory may be another workload's too (a DaemonSet's cache, the next
  # run of a CronJob): without the annotation it is not cleaned, and the user is told.
  kc -n e2e-opted-in create -f - <<<"$(job shared-dir '')"
  expect "opted-in: a Job with a fixed host directory is created" test "$STATUS" -eq 0
  expect "with a warning naming the per-pod fix" has "$ERR" 'subPathExpr'
  kc -n e2e-opted-in get job shared-dir -o json
  expect "and no cleanup hook" jqt "$OUT" "($TEMPLATE.spec.containers[0] | $PRESTOP_CLEANS) | not"
  kc -n e2e-plain create -f - <<<"$plain"
  kc -n e2e-plain get job unannotated -o json
  expect "unlabelled namespace: untouched" jqt "$OUT" "$TEMPLATE.metadata.annotations == null and $TEMPLATE.spec.containers[0].lifecycle == null"
  kc -n e2e-opted-in create -f - <<<"$(job opted-out '"prestop-injector.io/inject": "false"')"
  kc -n e2e-opted-in get job opted-out -o json
  expect "opted-in namespace, inject: false: untouched" jqt "$OUT" "$TEMPLATE.spec.containers[0].lifecycle == null"
  apply_webhook_configs cluster-wide
}

cert_rotation() {
  local serial_before serial_after reloads_before
  serial_before=$(served_serial)
  reloads_before=$(metric 'prestop_injector_tls_reloads_total{result="success"}')
  local failures=0 i
  for i in $(seq 1 30); do
    ((i == 10)) && rotate_serving_cert
    k create -f - >/dev/null 2>>"$WORK/rotation.err" <<<"$(job "rotate-$i" '"prestop-injector.io/cleanup": "auto"')" ||
      failures=$((failures + 1))
    ((i == 10)) && wait_for 20 reloaded_since "$reloads_before"
  done
  ERR=$(cat "$WORK/rotation.err" 2>/dev/null)
  expect "30 creates across the rotation, none failed (failed: $failures)" test "$failures" -eq 0
  expect "the webhook reloaded the certificate" reloaded_since "$reloads_before"
  serial_after=$(served_serial)
  expect "new connections get the new certificate" test -n "$serial_after" -a "$serial_after" != "$serial_before"
  kc get job rotate-30 -o json
  expect "the last one has the hook" jqt "$OUT" "$TEMPLATE.spec.containers[0] | $PRESTOP_CLEANS"
}

served_serial() {
  openssl s_client -connect "127.0.0.1:$WEBHOOK_PORT" -servername "$WEBHOOK_HOST" \
    -CAfile "$WORK/webhook/ca.crt" </dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null
}

reloaded_since() {
  local now
  now=$(metric 'prestop_injector_tls_reloads_total{result="success"}')
  awk -v a="$now" -v b="$1" 'BEGIN { exit !(a > b) }'
}

# A new key and certificate from the same CA, swapped in as the kubelet updates a
# Secret volume: written beside, then renamed over the old files.
rotate_serving_cert() {
  local dir="$WORK/webhook"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/new.key" \
    -out "$dir/new.csr" -subj "/CN=$WEBHOOK_HOST" 2>/dev/null &&
    openssl x509 -req -in "$dir/new.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 2 -out "$dir/new.crt" 2>/dev/null \
      -extfile <(printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$WEBHOOK_HOST") &&
    mv "$dir/new.key" "$dir/tls.key" && mv "$dir/new.crt" "$dir/tls.crt"
}

sidecar_refused() {
  kc create -f - <<<"$(job wants-sidecar '"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"')"
  expect "create refused" test "$STATUS" -ne 0
  expect "says native sidecars need 1.29" has "$ERR" 'sidecar mode needs Kubernetes ≥ 1.29'
  expect "names this server's version" has "$ERR" 'this cluster runs 1.20'
  kc get job wants-sidecar
  expect "not persisted" test "$STATUS" -ne 0
  expect "the webhook knows the version (metric)" test "$(metric prestop_injector_kubernetes_version_known)" = 1
}

version_unknown() {
  stop_webhook
  KUBECONFIG=/nonexistent start_webhook "$CONFIG_WARN"
  expect "metric: version not known" test "$(metric prestop_injector_kubernetes_version_known)" = 0
  expect "metric: decided as 1.20" test "$(metric prestop_injector_kubernetes_minor_version)" = 20
  expect "a log line says so" grep -q 'cannot learn the Kubernetes version from the API server; behaving as on 1.20' "$WORK/webhook.log"
  kc create -f - <<<"$(job unknown-sidecar '"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"')"
  expect "sidecar mode refused (fail closed)" has "$ERR" 'this cluster runs 1.20'
  stop_webhook
  start_webhook "$CONFIG_WARN"
}

# What the gate prevents: told (wrongly) that the cluster runs 1.29, the webhook adds the
# sidecar, and this 1.20 server silently drops its restartPolicy: an init container that
# never exits, so a pod that would never start.
version_override() {
  local config="$WORK/config-1.29.yaml"
  printf '%s\n' 'kubernetesVersion: "1.29"' "$PREFIXES" >"$config"
  stop_webhook
  start_webhook "$config"
  expect "metric: 1.29 from the config" test "$(metric prestop_injector_kubernetes_minor_version)" = 29
  kc create -f - <<<"$(job told-1-29 '"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"')"
  expect "create succeeds" test "$STATUS" -eq 0
  kc get job told-1-29 -o json
  expect "the sidecar was added" jqt "$OUT" "($TEMPLATE.spec.initContainers | length) >= 1"
  expect "and 1.20 dropped its restartPolicy: Always" jqt "$OUT" "$TEMPLATE.spec.initContainers | all(.restartPolicy == null)"
  stop_webhook
  start_webhook "$CONFIG_WARN"
}

reinvocation() {
  local port
  port=$(free_port)
  python3 e2e/late_webhook.py "$port" "$WORK/webhook/tls.crt" "$WORK/webhook/tls.key" >"$WORK/late.log" 2>&1 &
  local late_pid=$!
  PIDS+=("$late_pid")
  wait_for 20 curl -sk -o /dev/null "https://127.0.0.1:$port/" -d '{}'
  local ca
  ca=$(base64 -w0 <"$WORK/webhook/ca.crt")
  k apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: zz-late-container}
webhooks:
- name: late.e2e.prestop-injector.io
  admissionReviewVersions: [v1]
  clientConfig: {url: "https://$WEBHOOK_HOST:$port/", caBundle: "$ca"}
  failurePolicy: Fail
  sideEffects: None
  reinvocationPolicy: Never
  namespaceSelector: {matchLabels: {e2e-late: "yes"}}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs], scope: Namespaced}]
  timeoutSeconds: 5
EOF
  k create namespace e2e-late >/dev/null
  k label namespace e2e-late e2e-late=yes >/dev/null
  kc -n e2e-late create -f - <<<"$(job reinvoked '"prestop-injector.io/cleanup": "auto"')"
  expect "create succeeds" test "$STATUS" -eq 0
  kc -n e2e-late get job reinvoked -o json
  local late="$TEMPLATE.spec.containers[] | select(.name == \"late\")"
  expect "the second webhook added its container" jqt "$OUT" "[$late] | length == 1"
  expect "reinvoked, we cleaned its /late too" jqt "$OUT" "$late | (.lifecycle.preStop.exec.command // []) | index([\"/late\"]) != null"
  expect "and the first container still has its hook" jqt "$OUT" "$TEMPLATE.spec.containers[0] | $PRESTOP_CLEANS"
  expect "grace covers one cleanup budget, not two stacked" jqt "$OUT" "$TEMPLATE.spec.terminationGracePeriodSeconds < 80"
  k delete mutatingwebhookconfiguration zz-late-container >/dev/null
  kill "$late_pid" 2>/dev/null
}

