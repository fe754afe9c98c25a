#!/usr/bin/env bash
# The install as users do it, on the real node (issue 18): the release image (built by
# scripts/build-image.sh from the Dockerfile, imported into the node's containerd), the
# webhook as its Deployment behind its Service, certificates from its Secret, the reaper as
# its DaemonSet, installed from deploy/ with `kubectl apply -k` as docs/INSTALL.md says.
# The node is e2e/node's (lib/node.sh), here with kube-proxy, a pod gateway and
# service-account tokens, because the pods call the API server and the API server calls
# the webhook's Service. Ends with `N passed, M failed`; non-zero on any failure,
# including a teardown that left anything behind (node_teardown_check).
#
#   bash e2e/install/run.sh
#
# PRESTOP_E2E_BINARIES=DIR: the image's binaries built before (DIR/prestop-injector,
# DIR/prestop-clean; scripts/build-binaries.sh). PRESTOP_E2E_KEEP=1 keeps the work directory.
# Install methods: one pass per method in PASSES, each the whole scenario list
# (lib/scenarios.sh): kustomize (lib/kustomize.sh), then Helm (lib/helm.sh; Helm from
# PRESTOP_HELM, which `eval "$(bash .ci/deploy-tools.sh)"` exports).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
HERE="$ROOT/e2e/install"

started=$(date +%s)
# PRESTOP_E2E_KUBE_VERSION: the Kubernetes of the control plane and node (default 1.20.2,
# from Debian's source package; 1.37.2 from the Go module proxy's modules, issue 41).
# shellcheck source=../lib/kube-version.sh
source "$ROOT/e2e/lib/kube-version.sh"
CACHE="${PRESTOP_E2E_CACHE:-/var/cache/prestop-e2e}"
log() { echo "e2e/install: $*" >&2; }
if [[ " ${PRESTOP_E2E_PASSES:-helm} " == *" helm "* ]] && ! "${PRESTOP_HELM:-helm}" version >/dev/null 2>&1; then
  log "no Helm: run eval \"\$(bash .ci/deploy-tools.sh)\" first (it exports PRESTOP_HELM)"
  exit 1
fi
APISERVER=$(bash e2e/setup.sh) || { log "e2e/setup.sh failed"; exit 1; }
bash e2e/node/setup.sh || { log "e2e/node/setup.sh failed"; exit 1; }

WORK=$(mktemp -d /tmp/prestop-e2e-install.XXXXXX)
# The image's binaries; certs/generate.sh and the suite use the same webhook binary.
BINARIES=${PRESTOP_E2E_BINARIES:-}
if [[ -z "$BINARIES" ]]; then
  BINARIES="$WORK/bin"
  bash scripts/build-binaries.sh "$BINARIES" || { log "building the binaries failed"; exit 1; }
fi
BIN="$BINARIES/prestop-injector"
t0=$(date +%s)
IMAGE_ARCHIVE=$(BINARIES="$BINARIES" bash scripts/build-image.sh) || { log "building the image failed"; exit 1; }
IMAGE=$(cat "$IMAGE_ARCHIVE.name")
image_seconds=$(($(date +%s) - t0))
setup_seconds=$(($(date +%s) - started))

NODE="$WORK/node"
NODE_IMAGES="$WORK/images"
HOST=$(mktemp -d /tmp/prestop-e2e-install-host.XXXXXX)
chmod 0755 "$HOST"
mkdir -p "$NODE" "$NODE_IMAGES" "$HOST/scratch" "$HOST/reaper-state"
NODE_EXTRA_MOUNT_ROOTS="$HOST"
WEBHOOK_HOST=prestop-injector.prestop-system.svc
HOSTS_MARK="# prestop-e2e-install $$"
PIDS=()
WEBHOOK_PID=
NS=e2e-install
NODE_NAMESPACE=$NS
NODE_NAMESPACES="prestop-system prestop-node e2e-optin"
# Pods reach the API server through the `kubernetes` Service (kube-proxy) at the pod
# bridge's gateway, where it listens instead of 127.0.0.1: on this host only, and no
# uplink (lib/node.sh). Its certificate names the Service's ClusterIP.
NODE_POD_GATEWAY=1 NODE_SA_TOKENS=1 NODE_PROXY=1 APISERVER_SA_ADMISSION=1
KUBERNETES_CLUSTER_IP=10.96.0.1

# shellcheck source=../lib/cluster.sh
source "$ROOT/e2e/lib/cluster.sh"
# shellcheck source=../node/lib/node.sh
source "$ROOT/e2e/node/lib/node.sh"
# shellcheck source=../node/lib/images.sh
source "$ROOT/e2e/node/lib/images.sh"
# shellcheck source=../lib/assert.sh
source "$ROOT/e2e/lib/assert.sh"
# The node suite's helpers (seed_job, pods_of, dir_empty, cut_off_pod, …); its
# run_scenarios is not called here.
# shellcheck source=../node/lib/scenarios.sh
source "$ROOT/e2e/node/lib/scenarios.sh"
# shellcheck source=lib/kustomize.sh
source "$HERE/lib/kustomize.sh"
# shellcheck source=lib/helm.sh
source "$HERE/lib/helm.sh"
# shellcheck source=lib/scenarios.sh
source "$HERE/lib/scenarios.sh"
# shellcheck source=lib/prometheus.sh
source "$HERE/lib/prometheus.sh"
# shellcheck source=lib/runbooks.sh
source "$HERE/lib/runbooks.sh"
# shellcheck source=lib/doors.sh
source "$HERE/lib/doors.sh"

# shellcheck source=../node/lib/suite.sh
source "$ROOT/e2e/node/lib/suite.sh"
# Controllers first, so that node_stop's pod deletes are not answered with new pods.
suite_before_stop() {
  if ((NODE_STARTED)); then
    k delete mutatingwebhookconfiguration,validatingwebhookconfiguration prestop-injector \
      --ignore-not-found >/dev/null 2>&1
    k delete deploy,ds,job,rs --all --all-namespaces --wait=false >/dev/null 2>&1
  fi
}
suite_after_stop() {
  prometheus_stop
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then ip link del "$NODE_BRIDGE"; fi
  if ((ROOT_MADE_SHARED)); then mount --make-private /; fi
}
suite_traps

# The reaper DaemonSet mounts the node's / with mountPropagation: HostToContainer (its
# in-use check and the node agent see disks mounted later), which the runtime allows only
# from a shared or slave mount, as / is on every systemd node. A CI machine's / may be
# private: shared for this run, as systemd makes it, and private again at the end.
ROOT_MADE_SHARED=0
if [[ "$(findmnt -no PROPAGATION /)" == private ]]; then
  mount --make-shared / && ROOT_MADE_SHARED=1
fi

node_init_names || exit 1
node_bridge_up || { log "cannot create the bridge $NODE_BRIDGE"; exit 1; }
API_HOST=$NODE_GATEWAY
APISERVER_SANS="IP:$KUBERNETES_CLUSTER_IP,DNS:kubernetes.default.svc,DNS:kubernetes.default,DNS:kubernetes"
cluster_pki prestop-e2e-install-ca
cluster_start "$NS"
# The endpoint reconciler is off (e2e/lib/cluster.sh): the `kubernetes` Service's
# endpoint, by hand, at the address the pods can reach.
k apply -f - >/dev/null <<YAML || exit 1
apiVersion: v1
kind: Endpoints
metadata: {name: kubernetes, namespace: default}
subsets:
- addresses: [{ip: $NODE_GATEWAY}]
  ports: [{name: https, port: $API_PORT, protocol: TCP}]
YAML
# What 1.21+ labels every namespace with, and the webhooks' namespaceSelector excludes the
# system namespaces and the webhook's own by: without it the webhook's own pods would be
# sent to it (failurePolicy Fail) before it runs. The install methods label the
# namespaces they create (install_kustomize before, install_helm after the install).
k create namespace "$NS" >/dev/null || exit 1
for ns in $(k get ns -o name); do
  k label "$ns" "kubernetes.io/metadata.name=${ns#namespace/}" --overwrite >/dev/null || exit 1
done

node_build_images || { log "building the images failed"; exit 1; }
cp "$IMAGE_ARCHIVE" "$NODE_IMAGES/prestop-injector.tar"
node_start || exit 1
log "control plane and node up $(($(date +%s) - started)) s after start (setup $setup_seconds s, image $image_seconds s)"

# One pass per install method, on the same node, image and control plane: each pass
# installs, exercises and uninstalls, leaving the cluster as it found it.
# PRESTOP_E2E_PASSES="helm" runs only the named passes (while working on one).
read -ra PASSES <<<"${PRESTOP_E2E_PASSES:-kustomize helm}"
PASS_TIMES=()
for method in "${PASSES[@]}"; do
  t0=$(date +%s)
  run_install_pass "$method"
  PASS_TIMES+=("$method $(($(date +%s) - t0)) s")
  log "pass $method took $(($(date +%s) - t0)) s"
done

# --- teardown, checked -----------------------------------------------------------------
k delete deploy,ds,job,rs --all --all-namespaces --wait=false >/dev/null 2>&1
suite_teardown_checked
log "suite took $(($(date +%s) - started)) s (setup $setup_seconds s, of which the image $image_seconds s; passes: $(printf '%s, ' "${PASS_TIMES[@]}" | sed 's/, $//'); kube-apiserver $SERVER_VERSION)"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
