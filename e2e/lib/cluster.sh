# A loopback etcd and kube-apiserver with openssl-made certificates and an admin
# kubeconfig, shared by e2e/run.sh (the API server alone), e2e/node/run.sh (with a node)
# and e2e/install/run.sh (the install in that node). Sourced, not run. The caller sets
# WORK, BIN (our binary), APISERVER, WEBHOOK_HOST and HOSTS_MARK, keeps a PIDS array
# (cluster_stop stops it newest first), and defines log(). After cluster_start:
# KUBECONFIG, API_PORT, API_URL, WEBHOOK_PORT, PROBE_PORT, SERVER_VERSION, PKI, and k()
# (kubectl with a request timeout).
#
# Optional, for pods that call the API server (e2e/install): API_HOST, the address it
# listens on and is reached at (default 127.0.0.1; the pod bridge's gateway there; set
# before cluster_pki, its certificate names it);
# APISERVER_SANS, more subjectAltNames for its certificate (the `kubernetes` Service's
# ClusterIP); APISERVER_SA_ADMISSION=1, ServiceAccount admission on (token volumes).

# KUBE_VERSION, KUBE_MINOR, kube_at_least: PRESTOP_E2E_KUBE_VERSION, default 1.20.2.
# shellcheck source=kube-version.sh
source "$(dirname "${BASH_SOURCE[0]}")/kube-version.sh"

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

k() { kubectl --request-timeout=30s "$@"; }

# The cluster's CA, the API server's serving cert, an O=system:masters client, the
# service-account key pair, and the webhook's serving cert from our own `certs` (SANs:
# the Service's names).
cluster_pki() { # CA common name
  PKI="$WORK/pki"
  mkdir -p "$PKI"
  sign() { # name subject extensions
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2>/dev/null &&
      openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
        -days 2 -out "$PKI/$1.crt" -extfile <(printf '%b' "$3") 2>/dev/null
  }
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 2 \
    -subj "/CN=$1" 2>/dev/null || { log "openssl failed"; exit 1; }
  sign apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost${API_HOST:+,IP:$API_HOST}${APISERVER_SANS:+,$APISERVER_SANS}\nextendedKeyUsage=serverAuth\n" &&
    sign admin "/O=system:masters/CN=e2e-admin" 'extendedKeyUsage=clientAuth\n' &&
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null &&
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null || { log "openssl failed"; exit 1; }
  "$BIN" certs --out "$WORK/webhook" --days 2 >/dev/null 2>&1 || exit 1
}

# kube-apiserver on API_PORT against the etcd on ETCD_PORT, in the background (its pid is
# $!), logging to $WORK/apiserver.log. Also what a suite calls to bring it back after a
# crash (e2e/reaper): same etcd, same port, so every object persists.
# ServiceAccount admission off (no controller-manager makes tokens); the endpoint
# reconciler off (the `kubernetes` Endpoints object may not hold a loopback address).
apiserver_start() {
  local admission=(--disable-admission-plugins ServiceAccount)
  [[ "${APISERVER_SA_ADMISSION:-}" == 1 ]] && admission=()
  # --insecure-port went in 1.24.
  local insecure=(--insecure-port 0)
  kube_at_least 24 && insecure=()
  "$APISERVER" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$API_HOST" --advertise-address "$API_HOST" --secure-port "$API_PORT" "${insecure[@]}" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --authorization-mode RBAC \
    --enable-admission-plugins MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    "${admission[@]}" \
    --endpoint-reconciler-type none \
    --service-cluster-ip-range 10.96.0.0/16 \
    --cert-dir "$WORK/apiserver-certs" \
    >>"$WORK/apiserver.log" 2>&1 &
}

cluster_start() { # namespace of the kubeconfig's context
  ETCD_PORT=$(free_port)
  ETCD_PEER_PORT=$(free_port)
  API_PORT=$(free_port)
  WEBHOOK_PORT=$(free_port)
  PROBE_PORT=$(free_port)
  API_HOST=${API_HOST:-127.0.0.1}
  API_URL="https://$API_HOST:$API_PORT"

  # No proxy for anything here: the API server must call the webhook's name directly.
  unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy
  export NO_PROXY="127.0.0.1,localhost,$WEBHOOK_HOST"

  etcd --name e2e --data-dir "$WORK/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" >"$WORK/etcd.log" 2>&1 &
  PIDS+=($!)
  wait_for 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || {
    log "etcd did not start"
    tail -20 "$WORK/etcd.log" >&2
    exit 1
  }

  apiserver_start
  PIDS+=($!)

  export KUBECONFIG="$WORK/kubeconfig"
  cat >"$KUBECONFIG" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $API_URL
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: e2e
  context: {cluster: e2e, user: admin, namespace: $1}
current-context: e2e
KUBECONFIG

  wait_for 90 k get --raw /readyz || {
    log "kube-apiserver did not become ready"
    tail -30 "$WORK/apiserver.log" >&2
    exit 1
  }
  SERVER_VERSION=$(k version -o json 2>/dev/null | jq -r .serverVersion.gitVersion)

  # The webhook's Service name resolves to loopback, so TLS still verifies that name. Our
  # own line even when another run's is there: that run removes its line when it ends,
  # and creates would fail mid-run (seen with two suites at once). So does the node's
  # name, where a suite runs a kubelet (it serves on 127.0.0.1): `kubectl logs` and
  # `exec` go from the API server to the kubelet by that name, as the runbooks' do.
  echo "127.0.0.1 $WEBHOOK_HOST ${NODE_NAME:-} $HOSTS_MARK" >>/etc/hosts
}

# Stops what cluster_start and start_webhook started — the webhook, then PIDS newest
# first — and removes our /etc/hosts line only (another run's mark has another pid),
# rewritten in place: /etc/hosts is often a bind mount, which a rename (sed -i) cannot
# replace. Each suite's exit trap calls it, then removes its own work directory.
cluster_stop() {
  local pid i
  [[ -n "${WEBHOOK_PID:-}" ]] && kill "$WEBHOOK_PID" 2>/dev/null
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  [[ -n "${WEBHOOK_PID:-}" ]] && wait "$WEBHOOK_PID" 2>/dev/null
  if grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null; then
    grep -vF "$HOSTS_MARK" /etc/hosts >"$WORK/hosts" && cat "$WORK/hosts" >/etc/hosts
  fi
  return 0
}

# Removes the suite's work directories, or keeps them for a look with PRESTOP_E2E_KEEP=1.
remove_work() { # directory...
  if [[ "${PRESTOP_E2E_KEEP:-}" == 1 ]]; then
    log "kept $*"
  else
    rm -rf "$@"
  fi
}

# The suite's seal key file (docs/REAPER.md#the-seal), made once in WORK: the webhook
# seals with it and the suite's reapers verify with it (SEAL_KEY_FILE).
SEAL_KEY_FILE=
seal_key_file() {
  SEAL_KEY_FILE="$WORK/seal.key"
  [[ -s "$SEAL_KEY_FILE" ]] && return 0
  (umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$SEAL_KEY_FILE" &&
    echo >>"$SEAL_KEY_FILE")
}

# Our webhook on WEBHOOK_PORT (probes on PROBE_PORT) with the certs of cluster_pki.
# KUBECONFIG is exported: outside a cluster, `serve` learns the version through it.
start_webhook() { # config file
  seal_key_file
  "$BIN" serve --listen "127.0.0.1:$WEBHOOK_PORT" --probe-listen "127.0.0.1:$PROBE_PORT" \
    --tls-cert "$WORK/webhook/tls.crt" --tls-key "$WORK/webhook/tls.key" --config "$1" \
    --seal-key-file "$SEAL_KEY_FILE" \
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

# The configurations from our own `webhook-config --url`, for this server's version.
apply_webhook_configs() { # mode
  "$BIN" webhook-config --ca-file "$WORK/webhook/ca.crt" --mode "$1" \
    --url "https://$WEBHOOK_HOST:$WEBHOOK_PORT" --kubernetes-version "$SERVER_VERSION" 2>>"$WORK/webhook-config.err" |
    k apply -f - >/dev/null
}
