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
    --url "https://$WEBHOOK_HOST:$WEBHOOK_PORT" --kubernetes-version "$SERVER_VERSION" 2>>"$WORK/webhook-config.err" |
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
        securityContext: {runAsUser: 1000}
        volumeMounts: [{name: scratch, mountPath: /test-package}]
      volumes:
      - name: scratch
        hostPath: {path: /mnt/scratch/$1, type: DirectoryOrCreate}
EOF
}

# --- scenarios -------------------------------------------------------------------------
source "$ROOT/e2e/scenarios.sh"

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
scenario "reinvocationPolicy: IfNeeded: a later webhook's container gets its cleanup" reinvocation
scenario "version unknown: behaves as 1.20 (log line, metric, sidecar refused)" version_unknown
scenario "kubernetesVersion \"1.29\" obeyed; shows why: 1.20 drops the sidecar's restartPolicy" version_override

log "suite took $(($(date +%s) - started)) s (kube-apiserver $SERVER_VERSION)"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
