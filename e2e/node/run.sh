#!/usr/bin/env bash
# End-to-end tests on a real node (issue #13): etcd, the suite's kube-apiserver v1.20.2
# (e2e/setup.sh), the webhook, then containerd + runc, kubelet, kube-controller-manager
# and kube-scheduler v1.20.2 on this machine, so the injected preStop hooks actually run.
# Scenarios assert on files on the node (hostPath directories under a temporary root) and
# on kubectl's output; the run ends with `N passed, M failed` and exits non-zero on any
# failure, including a teardown that left a process, mount, bridge, cgroup or sysctl
# change behind (lib/node.sh: node_teardown_check).
#
#   bash e2e/node/run.sh              # builds what is missing (setup.sh), then runs
#
# PRESTOP_E2E_KEEP=1 keeps the work directory (configs, logs) for a look after;
# PRESTOP_E2E_NODE_STRACE=1 runs every node daemon under `strace -f -e trace=connect` and
# checks that each one connected only to 127.0.0.1, the pod bridge and unix sockets.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
HERE="$ROOT/e2e/node"

started=$(date +%s)
KUBE_VERSION=1.20.2
CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
APISERVER=$(bash e2e/setup.sh) || { echo "e2e/node: e2e/setup.sh failed" >&2; exit 1; }
bash "$HERE/setup.sh" || { echo "e2e/node: setup failed" >&2; exit 1; }
# PRESTOP_E2E_BIN / PRESTOP_E2E_CLEANER_BIN: binaries built elsewhere (another branch).
BIN=${PRESTOP_E2E_BIN:-}
if [[ -z "$BIN" ]]; then
  cargo build --locked --quiet --bin prestop-injector || { echo "e2e/node: cargo build failed" >&2; exit 1; }
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/prestop-injector"
fi
# The cleaner program (issue 10) and its image, when the webhook knows `cleaner.image`.
CLEANER_BIN=${PRESTOP_E2E_CLEANER_BIN:-}
if [[ -z "$CLEANER_BIN" && -x scripts/build-cleaner.sh && -d cleaner ]] &&
  grep -q 'struct CleanerConfig' src/config.rs 2>/dev/null; then
  CLEANER_BIN=$(bash scripts/build-cleaner.sh --quiet | sed -n 's/: .* bytes, static$//p') &&
    [[ -x "$CLEANER_BIN" ]] || { echo "e2e/node: building the cleaner failed" >&2; exit 1; }
  [[ "$CLEANER_BIN" == /* ]] || CLEANER_BIN="$ROOT/$CLEANER_BIN"
fi
setup_seconds=$(($(date +%s) - started))

WORK=$(mktemp -d /tmp/prestop-e2e-node.XXXXXX)
NODE="$WORK/node"
NODE_IMAGES="$WORK/images"
# The node's hostPath directories, the canaries and bind mounts the scenarios plant.
HOST=$(mktemp -d /tmp/prestop-e2e-node-host.XXXXXX)
chmod 0755 "$HOST"
NODE_EXTRA_MOUNT_ROOTS="$HOST"
mkdir -p "$NODE" "$NODE_IMAGES"
WEBHOOK_HOST=prestop-injector.prestop-system.svc
HOSTS_MARK="# prestop-e2e-node $$"
PIDS=()
WEBHOOK_PID=
NS=e2e-node
NODE_NAMESPACE=$NS

log() { echo "e2e/node: $*" >&2; }

# shellcheck source=../lib/cluster.sh
source "$ROOT/e2e/lib/cluster.sh"
# shellcheck source=lib/node.sh
source "$HERE/lib/node.sh"
# shellcheck source=lib/images.sh
source "$HERE/lib/images.sh"

# shellcheck source=lib/suite.sh
source "$HERE/lib/suite.sh"
suite_traps

cluster_pki prestop-e2e-node-ca
cluster_start "$NS"

# --- the node agent --------------------------------------------------------------------
# The node's scratch prefixes: nothing outside them is ever cleaned. $HOST/protected and
# the canaries the scenarios plant beside their directories are not among them.
# $HOST/os has the RHCOS layout (issue 32): os/mnt -> var/mnt, root's, and a prefix below
# the link, which the kubelet and the agent follow and nothing else may.
mkdir -p "$HOST/os/var/mnt/scratch" && ln -s var/mnt "$HOST/os/mnt"
PREFIXES=("$HOST/seed" "$HOST/sleep70" "$HOST/finished" "$HOST/cleaner/package" "$HOST/no-shell" "$HOST/reaped" "$HOST/allowed" "$HOST/replaced" "$HOST/os/mnt/scratch")
# A process of the node, as the DaemonSet's container is on a cluster (docs/INSTALL.md,
# "The node agent"): every injected cleaner asks it whether the directory it opened is
# the node's, from a real container of the kubelet's (its pod known from its cgroup, its
# descriptor's filesystem from its own mount table).
AGENT_DIR="$WORK/agent"
AGENT_PID=
# Starts the agent, or starts it again (lib/fourth_review.sh stops it for a scenario
# without it), appending to its log; true once it says it serves.
node_agent_start() {
  local before
  before=$(grep -c 'node-agent: serving ' "$WORK/agent.log" 2>/dev/null)
  # The agent every install runs (prestop-injector node-agent): the cleaner's agent with
  # one watch of the node's pods, which says whether a pod is ending and which pods bound
  # to the node reach a directory with no process at the instant (issue 38).
  "$BIN" node-agent --node-name "$NODE_NAME" --host-root / --socket "$AGENT_DIR/agent.sock" \
    $(printf -- '--allow %s ' "${PREFIXES[@]}") >>"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("$AGENT_PID")
  serving() { (($(grep -c 'node-agent: serving ' "$WORK/agent.log") > ${before:-0})); }
  wait_for 10 serving
}
# Stops it as a node without it would be: its socket stays, stale, and refuses connections.
node_agent_stop() {
  local pid=$AGENT_PID i
  kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  for i in "${!PIDS[@]}"; do [[ "${PIDS[i]}" == "$pid" ]] && unset 'PIDS[i]'; done
  PIDS=("${PIDS[@]}")
  AGENT_PID=
}
if [[ -n "$CLEANER_BIN" ]]; then
  node_agent_start || { log "the node agent did not start"; cat "$WORK/agent.log" >&2; exit 1; }
fi

# --- the webhook -----------------------------------------------------------------------
CONFIG="$WORK/config.yaml"
{
  echo "orphanDelete: warn"
  echo "allowedHostPathPrefixes: [$(IFS=,; echo "${PREFIXES[*]}" | sed 's/,/, /g')]"
  [[ -n "$CLEANER_BIN" ]] && echo "cleaner: {image: localhost/prestop-e2e/cleaner:dev}"
  [[ -n "$CLEANER_BIN" ]] && echo "nodeAgent: {hostDirectory: $AGENT_DIR}"
} >"$CONFIG"
start_webhook "$CONFIG"
k create namespace "$NS" >/dev/null || exit 1

# --- the node --------------------------------------------------------------------------
node_build_images || { log "building the images failed"; exit 1; }
node_start || exit 1
log "control plane and node up $(($(date +%s) - started)) s after start (setup: $setup_seconds s)"

# shellcheck source=../lib/assert.sh
source "$ROOT/e2e/lib/assert.sh"

source "$HERE/lib/scenarios.sh"
# shellcheck source=lib/safety.sh
source "$HERE/lib/safety.sh"
# shellcheck source=lib/third_review.sh
source "$HERE/lib/third_review.sh"
# shellcheck source=lib/deadline.sh
source "$HERE/lib/deadline.sh"
# shellcheck source=lib/fourth_review.sh
source "$HERE/lib/fourth_review.sh"

run_scenarios
run_safety_scenarios
run_third_review_scenarios
run_deadline_scenarios
run_fourth_review_scenarios

# --- teardown, checked -----------------------------------------------------------------
suite_teardown_checked
if [[ "${PRESTOP_E2E_NODE_STRACE:-}" == 1 ]]; then
  if node_strace_check; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
fi
log "suite took $(($(date +%s) - started)) s (setup $setup_seconds s; kube-apiserver $SERVER_VERSION)"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
