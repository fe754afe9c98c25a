# The start of both reaper suites (e2e/reaper/run.sh, e2e/reaper/scale.sh): the API
# server (e2e/setup.sh), our debug binary, a work directory, cleanup by pid on exit, etcd,
# kube-apiserver, the webhook (with the reaper's configuration), its webhook
# configurations, namespace e2e, and the reaper (e2e/reaper/lib.sh). Sourced with ROOT and
# SUITE (the work directory's and /etc/hosts mark's name) set, from $ROOT.
# PRESTOP_E2E_KEEP=1 keeps the work directory (logs, state file, host tree).
# shellcheck shell=bash

started=$(date +%s)
APISERVER=$(bash e2e/setup.sh) || { echo "$SUITE: setup failed" >&2; exit 1; }
# PRESTOP_E2E_RELEASE=1 (scale.sh's figures for what a DaemonSet runs): the release build.
# The reaper runs each walk as `prestop-clean empty`, found beside its own executable.
if [[ "${PRESTOP_E2E_RELEASE:-}" == 1 ]]; then
  cargo build --locked --quiet --release --bin prestop-injector --bin prestop-clean || { echo "$SUITE: cargo build failed" >&2; exit 1; }
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/prestop-injector"
else
  cargo build --locked --quiet --bin prestop-injector --bin prestop-clean || { echo "$SUITE: cargo build failed" >&2; exit 1; }
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/prestop-injector"
fi

WORK=$(mktemp -d "/tmp/prestop-$SUITE.XXXXXX")
WEBHOOK_HOST=prestop-injector.prestop-system.svc
HOSTS_MARK="# prestop-$SUITE $$"
PIDS=()
WEBHOOK_PID=
REAPER_PID=

log() { echo "$SUITE: $*" >&2; }

# shellcheck source=../lib/cluster.sh
source "$ROOT/e2e/lib/cluster.sh"

cleanup() {
  [[ -n "$REAPER_PID" ]] && kill "$REAPER_PID" 2>/dev/null && wait "$REAPER_PID" 2>/dev/null
  cluster_stop
  # A scenario's pod cgroup (scenarios.sh), once the processes in it are gone.
  declare -F restart_cgroup_remove >/dev/null && restart_cgroup_remove
  remove_work "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cluster_pki prestop-e2e-reaper-ca
cluster_start e2e
# shellcheck source=lib.sh
source "$ROOT/e2e/reaper/lib.sh"
remember_apiserver
log "kube-apiserver $SERVER_VERSION ready on 127.0.0.1:$API_PORT after $(($(date +%s) - started)) s"

start_webhook "$REAPER_CONFIG"
apply_webhook_configs cluster-wide || { log "applying the webhook configurations failed"; exit 1; }
k create namespace e2e >/dev/null || exit 1
start_reaper || exit 1
log "reaper ready on 127.0.0.1:$REAPER_PORT"

