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
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/prestop-injector"

WORK=$(mktemp -d /tmp/prestop-e2e.XXXXXX)
WEBHOOK_HOST=prestop-injector.prestop-system.svc
HOSTS_MARK="# prestop-e2e $$"
PIDS=()
WEBHOOK_PID=

log() { echo "e2e: $*" >&2; }

# shellcheck source=lib/cluster.sh
source "$ROOT/e2e/lib/cluster.sh"

cleanup() {
  cluster_stop
  remove_work "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cluster_pki prestop-e2e-ca
cluster_start e2e
log "kube-apiserver $SERVER_VERSION ready on 127.0.0.1:$API_PORT after $(($(date +%s) - started)) s"

# --- the webhook -----------------------------------------------------------------------
CONFIG_WARN="$WORK/config-warn.yaml"
CONFIG_DENY="$WORK/config-deny.yaml"
# The scratch prefixes of the seed Job and of job() below: nothing outside them is cleaned.
PREFIXES="allowedHostPathPrefixes: [/test-package, /mnt/scratch]"
printf 'orphanDelete: warn\n%s\n' "$PREFIXES" >"$CONFIG_WARN"
printf 'orphanDelete: deny\n%s\n' "$PREFIXES" >"$CONFIG_DENY"

metric() { # name (with labels, as printed) -> value, 0 when absent
  curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" |
    awk -v name="$1" '$1 == name { print $2; found = 1 } END { if (!found) print 0 }'
}

metric_sum() { # name, label fragment -> sum over the samples that have it
  curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" |
    awk -v name="$1{" -v part="$2" 'index($1, name) == 1 && index($1, part) { sum += $2 } END { print sum + 0 }'
}

start_webhook "$CONFIG_WARN"
apply_webhook_configs cluster-wide || { log "applying the webhook configurations failed"; exit 1; }
k create namespace e2e >/dev/null || exit 1

# shellcheck source=lib/assert.sh
source "$ROOT/e2e/lib/assert.sh"

# A preStop exec on the first container whose argv holds the target path.
PRESTOP_CLEANS='(.lifecycle.preStop.exec.command // []) | index(["/test-package"]) != null'
TEMPLATE='.spec.template'

# A Job whose pods each get their own directory below /mnt/scratch/NAME (subPathExpr with
# the pod's uid): the only kind of directory `auto` cleans without an annotation.
private_job() { # name annotations-yaml-lines
  job "$1" "$2" | sed -e 's|^        volumeMounts: \[{name: scratch, mountPath: /test-package}\]$|        env: [{name: POD_UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}]\n        volumeMounts: [{name: scratch, mountPath: /test-package, subPathExpr: "$(POD_UID)"}]|'
}

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

scenario "seed Job: apply --dry-run=server shows the hook, grace, /bin/sh and 4 warnings; nothing stored" seed_dry_run
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
