#!/usr/bin/env bash
# End-to-end tests against a real kube-apiserver (issue #11): etcd, kube-apiserver v1.20.2
# and the webhook on 127.0.0.1, the webhook configurations from our own
# `webhook-config --url`, then scenarios that assert through kubectl (stdout, stderr,
# exit status) and on the stored objects. Ends with `N passed, M failed`; exits non-zero
# on any failure. Everything started here is stopped by pid on exit.
#
#   bash e2e/run.sh            # builds what is missing (e2e/setup.sh), then runs
#
# PRESTOP_E2E_KEEP=1 keeps the work directory (certs, logs, kubeconfig) for a look after.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

started=$(date +%s)
APISERVER=$(bash e2e/setup.sh) || { echo "e2e: setup failed" >&2; exit 1; }
# The debug binary: `cargo test` has just built it in CI, so this is a no-op there.
cargo build --locked --quiet --bin prestop-injector || { echo "e2e: cargo build failed" >&2; exit 1; }
BIN="$ROOT/target/debug/prestop-injector"

WORK=$(mktemp -d /tmp/prestop-e2e.XXXXXX)
WEBHOOK_HOST=prestop-injector.prestop-system.svc
HOSTS_MARK="# prestop-e2e $$"
PIDS=()
WEBHOOK_PID=

log() { echo "e2e: $*" >&2; }

cleanup() {
  local pid
  [[ -n "$WEBHOOK_PID" ]] && kill "$WEBHOOK_PID" 2>/dev/null
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  [[ -n "$WEBHOOK_PID" ]] && wait "$WEBHOOK_PID" 2>/dev/null
  # Our /etc/hosts line only (another run's mark has another pid). Rewritten in place:
  # /etc/hosts is often a bind mount, which a rename (sed -i) cannot replace.
  if grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null; then
    grep -vF "$HOSTS_MARK" /etc/hosts >"$WORK/hosts" && cat "$WORK/hosts" >/etc/hosts
  fi
  if [[ "${PRESTOP_E2E_KEEP:-}" == 1 ]]; then
    log "kept $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Polls `$@` until it succeeds or `$1` seconds pass.
wait_for() {
  local seconds=$1
  shift
  local deadline=$(($(date +%s) + seconds))
  until "$@" >/dev/null 2>&1; do
    (($(date +%s) < deadline)) || return 1
    sleep 0.2
  done
}

# --- certificates (openssl) ------------------------------------------------------------
PKI="$WORK/pki"
mkdir -p "$PKI"
sign() { # name subject extensions
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2>/dev/null &&
    openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
      -days 2 -out "$PKI/$1.crt" -extfile <(printf '%b' "$3") 2>/dev/null
}
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 2 \
  -subj "/CN=prestop-e2e-ca" 2>/dev/null || { log "openssl failed"; exit 1; }
sign apiserver "/CN=kube-apiserver" \
  'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' &&
  sign admin "/O=system:masters/CN=e2e-admin" 'extendedKeyUsage=clientAuth\n' &&
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null &&
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null || { log "openssl failed"; exit 1; }
# The webhook's serving certificate, from our own `certs` (SANs: the Service's names).
"$BIN" certs --out "$WORK/webhook" --days 2 >/dev/null 2>&1 || exit 1

# --- etcd and kube-apiserver -----------------------------------------------------------
ETCD_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
API_PORT=$(free_port)
WEBHOOK_PORT=$(free_port)
PROBE_PORT=$(free_port)

etcd --name e2e --data-dir "$WORK/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)

# No proxy for anything here: the API server must call the webhook's name directly.
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy
export NO_PROXY="127.0.0.1,localhost,$WEBHOOK_HOST"

wait_for 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || {
  log "etcd did not start"
  tail -20 "$WORK/etcd.log" >&2
  exit 1
}

# ServiceAccount admission off (no controller-manager makes tokens); the endpoint
# reconciler off (the `kubernetes` Endpoints object may not hold a loopback address).
"$APISERVER" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-account-issuer https://kubernetes.default.svc \
  --authorization-mode RBAC \
  --enable-admission-plugins MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
  --disable-admission-plugins ServiceAccount \
  --endpoint-reconciler-type none \
  --service-cluster-ip-range 10.96.0.0/16 \
  --cert-dir "$WORK/apiserver-certs" \
  >"$WORK/apiserver.log" 2>&1 &
PIDS+=($!)

export KUBECONFIG="$WORK/kubeconfig"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: e2e
  context: {cluster: e2e, user: admin, namespace: e2e}
current-context: e2e
EOF

k() { kubectl --request-timeout=30s "$@"; }
wait_for 90 k get --raw /readyz || {
  log "kube-apiserver did not become ready"
  tail -30 "$WORK/apiserver.log" >&2
  exit 1
}
SERVER_VERSION=$(k version -o json 2>/dev/null | jq -r .serverVersion.gitVersion)
log "kube-apiserver $SERVER_VERSION ready on 127.0.0.1:$API_PORT after $(($(date +%s) - started)) s"

# The webhook's Service name resolves to loopback, so TLS still verifies that name.
if ! grep -qE "^127\.0\.0\.1[[:space:]]+$WEBHOOK_HOST([[:space:]]|$)" /etc/hosts; then
  echo "127.0.0.1 $WEBHOOK_HOST $HOSTS_MARK" >>/etc/hosts
fi

# --- the webhook -----------------------------------------------------------------------
CONFIG_WARN="$WORK/config-warn.yaml"
CONFIG_DENY="$WORK/config-deny.yaml"
echo "orphanDelete: warn" >"$CONFIG_WARN"
echo "orphanDelete: deny" >"$CONFIG_DENY"

start_webhook() { # config file
  # KUBECONFIG is exported: outside a cluster, `serve` learns the version through it.
  "$BIN" serve --listen "127.0.0.1:$WEBHOOK_PORT" --probe-listen "127.0.0.1:$PROBE_PORT" \
    --tls-cert "$WORK/webhook/tls.crt" --tls-key "$WORK/webhook/tls.key" --config "$1" \
    --shutdown-delay 0s --drain-timeout 2s --cert-poll-interval 1s --log-level info,prestop_injector=debug \
    >>"$WORK/webhook.log" 2>&1 &
  WEBHOOK_PID=$!
  wait_for 30 curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" || {
    log "the webhook did not become ready"
    tail -20 "$WORK/webhook.log" >&2
    exit 1
  }
}

stop_webhook() {
  [[ -n "$WEBHOOK_PID" ]] || return 0
  kill "$WEBHOOK_PID" 2>/dev/null
  wait "$WEBHOOK_PID" 2>/dev/null
  WEBHOOK_PID=
}

metric() { # name (with labels, as printed) -> value, 0 when absent
  curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" |
    awk -v name="$1" '$1 == name { print $2; found = 1 } END { if (!found) print 0 }'
}

metric_sum() { # name, label fragment -> sum over the samples that have it
  curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" |
    awk -v name="$1{" -v part="$2" 'index($1, name) == 1 && index($1, part) { sum += $2 } END { print sum + 0 }'
}

apply_webhook_configs() { # mode
  "$BIN" webhook-config --ca-file "$WORK/webhook/ca.crt" --mode "$1" \
    --url "https://$WEBHOOK_HOST:$WEBHOOK_PORT" --kubernetes-version "$SERVER_VERSION" |
    k apply -f - >/dev/null
}

start_webhook "$CONFIG_WARN"
apply_webhook_configs cluster-wide || { log "applying the webhook configurations failed"; exit 1; }
k create namespace e2e >/dev/null || exit 1

# --- scenario machinery ----------------------------------------------------------------
PASSED=0
FAILED=0
FAILS=()
OUT=
ERR=
STATUS=0

# Runs kubectl, keeping its stdout, stderr and exit status for the assertions.
kc() {
  k "$@" >"$WORK/out" 2>"$WORK/err"
  STATUS=$?
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# expect DESCRIPTION COMMAND...: records a failure when the command fails.
expect() {
  local what=$1
  shift
  "$@" || FAILS+=("$what")
}
has() { [[ "$1" == *"$2"* ]]; }
lacks() { [[ "$1" != *"$2"* ]]; }
jqt() { jq -e "$2" >/dev/null 2>&1 <<<"$1"; } # json, filter that must be true

scenario() { # name function
  FAILS=()
  OUT= ERR= STATUS=0
  "$2"
  if ((${#FAILS[@]} == 0)); then
    echo "ok - $1"
    PASSED=$((PASSED + 1))
  else
    echo "FAIL - $1"
    local failure
    for failure in "${FAILS[@]}"; do echo "    expected: $failure"; done
    echo "    last kubectl exit status: $STATUS"
    echo "    last stdout: $(head -c 1500 <<<"$OUT")"
    echo "    last stderr: $(head -c 1500 <<<"$ERR")"
    FAILED=$((FAILED + 1))
  fi
}

# A preStop exec on the first container whose argv holds the target path.
PRESTOP_CLEANS='(.lifecycle.preStop.exec.command // []) | index(["/test-package"]) != null'
TEMPLATE='.spec.template'

job() { # name annotations-yaml-lines hostPath
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {$2}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: busybox:1.37
        command: [sh, -c, "echo data > /test-package/data && sleep 10"]
        volumeMounts: [{name: scratch, mountPath: /test-package}]
      volumes:
      - name: scratch
        hostPath: {path: /mnt/scratch/$1, type: DirectoryOrCreate}
EOF
}

# --- scenarios -------------------------------------------------------------------------
seed_dry_run() {
  kc apply --dry-run=server -o json -f examples/job-worker.yaml
  expect "exit status 0" test "$STATUS" -eq 0
  local spec="$TEMPLATE.spec"
  expect "a preStop exec cleaning /test-package" jqt "$OUT" "$spec.containers[0] | $PRESTOP_CLEANS"
  expect "grace raised to >= 40 s" jqt "$OUT" "$spec.terminationGracePeriodSeconds >= 40"
  expect "command fixed to /bin/sh" jqt "$OUT" "$spec.containers[0].command[0] == \"/bin/sh\""
  expect "status annotation on the template" \
    jqt "$OUT" "$TEMPLATE.metadata.annotations[\"prestop-injector.io/status\"] | fromjson | .containers == [\"busybox\"]"
  expect "three warnings on stderr" test "$(grep -c '^Warning: ' <<<"$ERR")" -eq 3
  expect "warning: command now runs /bin/sh" has "$ERR" 'has no bash; command now runs /bin/sh'
  expect "warning: preStop hook fixed" has "$ERR" 'preStop hook now runs /bin/sh'
  expect "warning: the hook deletes an unmounted path" has "$ERR" '/cadm-package/*, which is on no volume mount'
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
  # As the Job controller would: the template's metadata and spec, nothing else.
  local pod
  pod=$(jq '{apiVersion: "v1", kind: "Pod",
             metadata: (.spec.template.metadata + {name: "job-worker-pod"}),
             spec: .spec.template.spec}' <<<"$STORED_JOB")
  local patches_before pods_before
  patches_before=$(metric prestop_injector_patches_total)
  pods_before=$(metric_sum prestop_injector_requests_total 'kind="Pod"')
  kc create -o json -f - <<<"$pod"
  expect "pod created" test "$STATUS" -eq 0
  expect "no warnings" lacks "$ERR" 'Warning:'
  local fields='{containers, initContainers, volumes, terminationGracePeriodSeconds}'
  expect "stored pod's containers, volumes and grace equal the template's" \
    test "$(jq -S ".spec | $fields" <<<"$OUT")" = "$(jq -S ".spec.template.spec | $fields" <<<"$STORED_JOB")"
  expect "stored pod's annotations equal the template's" \
    test "$(jq -S '.metadata.annotations' <<<"$OUT")" = "$(jq -S '.spec.template.metadata.annotations' <<<"$STORED_JOB")"
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
  plain=$(job unannotated '')
  kc -n e2e-opted-in create -f - <<<"$plain"
  expect "opted-in: create succeeds" test "$STATUS" -eq 0
  kc -n e2e-opted-in get job unannotated -o json
  expect "opted-in: an unannotated Job gets the hook" jqt "$OUT" "$TEMPLATE.spec.containers[0] | $PRESTOP_CLEANS"
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

scenario "seed Job: apply --dry-run=server shows the hook, grace, /bin/sh and 3 warnings; nothing stored" seed_dry_run
scenario "seed Job: create stores the hook" seed_create
scenario "a Pod made from the stored template gets no patch" pod_from_template
scenario "a bad annotation is denied with the sentence" bad_annotation
scenario "Deployment with a 70 s hook gets grace >= 80" deployment_sleep70
scenario "sidecar mode refused on this $SERVER_VERSION server" sidecar_refused
scenario "delete --cascade=orphan warns" orphan_delete_warns
scenario "delete --cascade=orphan refused with orphanDelete: deny" orphan_delete_denied
scenario "namespace opt-in: labelled namespace injected, unlabelled untouched" namespace_opt_in
scenario "webhook down: Fail refuses with a clear error, Ignore lets it through unchanged" webhook_down
scenario "serving certificate rotated while kubectl keeps creating" cert_rotation

log "suite took $(($(date +%s) - started)) s (kube-apiserver $SERVER_VERSION)"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
