#!/usr/bin/env bash
# End-to-end tests on a real node (issue #13): etcd, the suite's kube-apiserver v1.20.2
# (e2e/setup.sh), the webhook, then containerd + runc, kubelet, kube-controller-manager
# and kube-scheduler v1.20.2 on this machine, so the injected preStop hooks actually run.
# PRESTOP_E2E_KUBE_VERSION=1.37.2 runs the same on Kubernetes 1.37.2 (issue 41,
# e2e/setup-latest.sh): the seed Job and lib/latest.sh's scenarios.
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
# PRESTOP_E2E_KUBE_VERSION: the Kubernetes of the control plane and node (default 1.20.2,
# from Debian's source package; 1.37.2 from the Go module proxy's modules, issue 41).
# shellcheck source=../lib/kube-version.sh
source "$ROOT/e2e/lib/kube-version.sh"
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
# lib/latest.sh's (≥ 1.29): the sidecar, the deadline, the eviction, the failing hook.
PREFIXES+=("$HOST/sidecar" "$HOST/deadline" "$HOST/evicted" "$HOST/hookfail")
# lib/fifth_review.sh's: the crash-looping neighbour, the newcomer during a walk.
PREFIXES+=("$HOST/crashing" "$HOST/midwalk")
# A process of the node, as the DaemonSet's container is on a cluster (docs/INSTALL.md,
# "The node agent"): every injected cleaner asks it whether the directory it opened is
# the node's, from a real container of the kubelet's (its pod known from its cgroup, its
# descriptor's filesystem from its own mount table).
AGENT_DIR="$WORK/agent"
AGENT_PID=
# Starts the agent, or starts it again (lib/fourth_review.sh stops it for a scenario
# without it), appending to its log; true once it says it serves.
# The agent every install runs (prestop-injector node-agent), on every version: the
# cleaner's agent with one watch of the node's pods, which says whether a pod is ending
# (the restartable sidecar's question) and which pods bound to the node reach a directory
# with no process at the instant (issue 38).
node_agent_start() {
  local before
  before=$(grep -c 'node-agent: serving ' "$WORK/agent.log" 2>/dev/null)
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
# A newer kubelet (lib/latest.sh) gets a root directory on a filesystem of its own and a
# hard nodefs threshold, for the eviction scenario: 400 MiB written to one emptyDir leaves
# under 35 % of 512 MiB free. Other pods write nothing there.
if kube_at_least 29; then
  NODE_KUBELET_FS_MB=${NODE_KUBELET_FS_MB:-512}
  NODE_EVICTION_HARD=${NODE_EVICTION_HARD:-'{"nodefs.available": "35%"}'}
  NODE_EVICTION_FILL_MB=${NODE_EVICTION_FILL_MB:-400}
fi
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
# shellcheck source=lib/fifth_review.sh
source "$HERE/lib/fifth_review.sh"

# shellcheck source=lib/latest.sh
source "$HERE/lib/latest.sh"

# The scenarios written for 1.20 run on 1.20 (the oldest supported); on a newer Kubernetes
# the seed Job and what only it can show (lib/latest.sh), unless PRESTOP_E2E_NODE_ALL=1
# asks for every scenario (some assert 1.20's behaviour, e.g. FailedPreStopHook's text).
if [[ "$KUBE_VERSION" == "$KUBE_DEBIAN_VERSION" || "${PRESTOP_E2E_NODE_ALL:-}" == 1 ]]; then
  run_scenarios
  run_safety_scenarios
  run_third_review_scenarios
  run_deadline_scenarios
  run_fourth_review_scenarios
  run_fifth_review_scenarios
else
  scenario "[$KUBE_VERSION] seed Job with the webhook: its file appears; delete --cascade=background empties the host dir, keeps the dir" seed_with_webhook
fi
run_latest_scenarios

# --- teardown, checked -----------------------------------------------------------------
suite_teardown_checked
if [[ "${PRESTOP_E2E_NODE_STRACE:-}" == 1 ]]; then
  if node_strace_check; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
fi
log "suite took $(($(date +%s) - started)) s (setup $setup_seconds s; kube-apiserver $SERVER_VERSION)"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
