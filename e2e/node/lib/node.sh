# A real node for the end-to-end suite (issue #13): containerd, kubelet,
# kube-controller-manager and kube-scheduler, each with its own config, root, state and
# socket under $NODE, started in the background and stopped by pid. Sourced by
# e2e/node/run.sh, which provides: NODE (an empty directory), PKI (ca.crt/ca.key of the
# API server), API_URL, CACHE, KUBE_VERSION, NODE_IMAGES, NODE_NAMESPACE (the only
# namespace the suite's pods run in), sign(), free_port(), wait_for(), log(), k().
#
# What this machine needs and why (issue #13's measurements):
# - no registry: images are imported from local docker-archive tars (images.sh);
# - traffic stays here: every daemon gets a dead proxy and AWS_EC2_METADATA_DISABLED (the
#   1.20 kubelet's AWS credential provider probes the metadata address), the kubelet gets
#   --node-ip (else it resolves its name through DNS), everything binds to 127.0.0.1, pods
#   sit on a private bridge with no gateway, masquerade or uplink;
# - no CAP_SYS_RESOURCE: containerd's CRI must not write a negative oom_score_adj
#   (restrict_oom_score_adj);
# - the kubelet writes a few sysctls at start: saved here, restored at stop;
# - cgroup v1 with the cgroupfs driver, under a cgroup root of our own, removed at stop.
#
# node_stop undoes all of it and node_teardown_check verifies that, failing otherwise.
#
# For pods that call the API server and Services (e2e/install, which sets these before
# node_start): NODE_POD_GATEWAY=1 gives the bridge an address, the pods' gateway
# ($NODE_GATEWAY: the host, nothing beyond it; IP forwarding stays as it was);
# NODE_SA_TOKENS=1 runs the controller-manager's service-account token controller (the
# API server needs APISERVER_SA_ADMISSION=1, e2e/lib/cluster.sh); NODE_PROXY=1 runs
# kube-proxy (iptables mode) so ClusterIPs work on this host and in the pods; its rules
# are removed with `kube-proxy --cleanup` at stop, and the check fails on any KUBE- rule
# left.

NODE_NAME=prestop-e2e-node
NODE_PIDS=()          # containerd, kubelet, controller-manager, scheduler (start order)
NODE_PID_NAMES=()
NODE_STRACE_PIDS=()    # the strace processes, with PRESTOP_E2E_NODE_STRACE=1
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
NODE_SYSCTLS_SAVED=()
NODE_STARTED=0
# Paths containerd, the shim, libcni and the 1.20 kubelet use whatever the config says
# (the shim socket and fifo directories, the CNI result cache, the pod log directories),
# deepest first. Those that did not exist before the run are removed when empty at stop
# and must be gone for the teardown check to pass.
NODE_FIXED_DIRS=(/run/containerd/fifo /run/containerd/s /run/containerd/runc/k8s.io
  /run/containerd/runc /run/containerd /var/lib/cni/results /var/lib/cni
  /var/log/containers /var/log/pods)
NODE_FIXED_NEW=()

node_init_names() {
  # Per-run names, so a leftover from another run is never ours to remove.
  NODE_ID="pe2e$$"
  NODE_BRIDGE="${NODE_ID:0:15}"
  NODE_CGROUP_ROOT="/prestop-e2e-$$"
  NODE_SUBNET="10.231.$(($$ % 250)).0/24"
  NODE_GATEWAY="10.231.$(($$ % 250)).1"
  NODE_IP=$(ip -o -4 addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }')
  [[ -n "$NODE_IP" ]] || { log "no global IPv4 address for --node-ip"; return 1; }
  CTR=(ctr --address "$NODE/containerd.sock" -n k8s.io)
  # An API server on another local address than 127.0.0.1 (API_HOST, e2e/install) must
  # not go through the dead proxy either.
  NODE_ENV=("${NODE_ENV[@]/#NO_PROXY=*/NO_PROXY=127.0.0.1,localhost${API_HOST:+,$API_HOST}}")
}

# Every daemon's environment: a dead proxy (Go never proxies 127.0.0.1, so local calls
# still work, and anything else fails fast at 127.0.0.1:9), no cloud metadata.
NODE_ENV=(env -u http_proxy -u https_proxy -u all_proxy -u ALL_PROXY -u no_proxy
  HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
  NO_PROXY=127.0.0.1,localhost AWS_EC2_METADATA_DISABLED=true)

# node_spawn NAME COMMAND...: background, log in $NODE/NAME.log; the pid recorded is the
# daemon's own (env execs it). Under strace (connect calls only, to $NODE/NAME.strace)
# when PRESTOP_E2E_NODE_STRACE=1: then the daemon is strace's child, and that child's pid
# is the one recorded, because strace detaches (and leaves it running) on SIGTERM.
node_spawn() {
  local name=$1 pid child i
  shift
  if [[ "${PRESTOP_E2E_NODE_STRACE:-}" == 1 ]]; then
    strace -f -qq -e trace=connect -o "$NODE/$name.strace" "${NODE_ENV[@]}" "$@" >"$NODE/$name.log" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do
      child=$(ps -o pid= --ppid "$pid" 2>/dev/null | awk 'NR == 1 { print $1 }')
      [[ -n "$child" ]] && break
      sleep 0.1
    done
    NODE_STRACE_PIDS+=("$pid")
    pid=${child:-$pid}
  else
    "${NODE_ENV[@]}" "$@" >"$NODE/$name.log" 2>&1 &
    pid=$!
  fi
  NODE_PIDS+=("$pid")
  NODE_PID_NAMES+=("$name")
}

node_kubeconfig() { # name cert-prefix
  cat >"$NODE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "$API_URL", certificate-authority: "$PKI/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$PKI/$2.crt", client-key: "$PKI/$2.key"}
contexts:
- name: e2e
  context: {cluster: e2e, user: $1}
current-context: e2e
EOF
}

node_write_configs() {
  mkdir -p "$NODE"/{containerd/root,containerd/state,opt,cni/net.d,cni/ipam,kubelet/pki,kubelet-plugins}
  cat >"$NODE/containerd.toml" <<EOF
version = 2
root = "$NODE/containerd/root"
state = "$NODE/containerd/state"
plugin_dir = ""
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]
[grpc]
  address = "$NODE/containerd.sock"
[ttrpc]
  address = "$NODE/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/prestop-e2e/pause:1"
  # No CAP_SYS_RESOURCE here: runc cannot lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  max_concurrent_downloads = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$NODE/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE/cni/net.d"
    max_conf_num = 1
EOF
  # A bridge with no address: no gateway, no masquerade, no route off the machine.
  cat >"$NODE/cni/net.d/10-prestop-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "prestop-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": $([[ "${NODE_POD_GATEWAY:-}" == 1 ]] && echo true || echo false),
      "isDefaultGateway": $([[ "${NODE_POD_GATEWAY:-}" == 1 ]] && echo true || echo false),
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$NODE_SUBNET"}]],
        "dataDir": "$NODE/cni/ipam"
      }
    }
  ]
}
EOF

  # Identities: the kubelet as a node (system:nodes, bound to the system:node role below);
  # controller-manager and scheduler as masters (no service-account credentials here:
  # the suite's API server runs without ServiceAccount admission).
  sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" 'extendedKeyUsage=clientAuth\n' &&
    sign controller-manager "/O=system:masters/CN=system:kube-controller-manager" 'extendedKeyUsage=clientAuth\n' &&
    sign scheduler "/O=system:masters/CN=system:kube-scheduler" 'extendedKeyUsage=clientAuth\n' &&
    sign kube-proxy "/CN=system:kube-proxy" 'extendedKeyUsage=clientAuth\n' ||
    return 1
  node_kubeconfig kube-proxy kube-proxy
  node_kubeconfig kubelet kubelet
  node_kubeconfig controller-manager controller-manager
  node_kubeconfig scheduler scheduler

  KUBELET_PORT=$(free_port)
  local eviction_hard='{}'
  [[ -n "${NODE_EVICTION_HARD:-}" ]] && eviction_hard=$NODE_EVICTION_HARD
  cat >"$NODE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: "$NODE_CGROUP_ROOT"
cgroupsPerQOS: true
failSwapOn: false
makeIPTablesUtilChains: false
hairpinMode: none
protectKernelDefaults: false
# A shared CI disk is often fuller than the defaults allow, and an eviction mid-scenario
# (seen here: ephemeral-storage pressure while others compiled) taints the node: no hard
# eviction thresholds at all, no image GC.
evictionHard: $eviction_hard
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
volumePluginDir: "$NODE/kubelet-plugins"
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
resolvConf: /etc/resolv.conf
EOF
  # 1.27 removed --container-runtime (CRI only since 1.24's dockershim removal) and took
  # the endpoint and timeout as config fields; 1.31 added failCgroupV1, which 1.35 turned on
  # by default: this machine's cgroup v1 needs it off (the kubelet then warns, and still
  # supports v1 in 1.37, issue 41).
  if kube_at_least 27; then
    cat >>"$NODE/kubelet.yaml" <<EOF
containerRuntimeEndpoint: "unix://$NODE/containerd.sock"
runtimeRequestTimeout: 2m
EOF
  fi
  if kube_at_least 31; then
    echo "failCgroupV1: false" >>"$NODE/kubelet.yaml"
  fi
  # An eviction scenario's threshold (lib/latest.sh): the condition and its taint go 5 s
  # after the pressure does, not the default 5 minutes.
  if [[ -n "${NODE_EVICTION_HARD:-}" ]]; then
    echo "evictionPressureTransitionPeriod: 5s" >>"$NODE/kubelet.yaml"
  fi
  # conntrack all 0: leave the host's nf_conntrack sysctls alone; oomScoreAdj 0: no
  # CAP_SYS_RESOURCE here. It still sets net.ipv4.conf.all.route_localnet (saved, restored).
  cat >"$NODE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$NODE/kube-proxy.kubeconfig"}
hostnameOverride: $NODE_NAME
mode: iptables
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
oomScoreAdj: 0
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {minSyncPeriod: 0s, syncPeriod: 30s}
EOF
}

# The bridge with its gateway address, before the API server that listens there starts
# (NODE_POD_GATEWAY=1); the CNI plugin then finds it as configured. node_stop removes it.
# Its MAC address is set, not left to the kernel: a bridge with a random one takes the
# lowest of its ports' (`addr_assign_type` 1), so each pod's veth coming or going may
# change the gateway's MAC under the pods' ARP caches, and a pod's replies to the API
# server go to the old one until its neighbour entry is probed again: webhook calls
# stalled 0.7 s, and once 5 s (the API server's timeout), whenever a sandbox came or went.
node_bridge_up() {
  ip link add "$NODE_BRIDGE" address "02:e2:e0:$(printf '%02x:%02x:%02x' $(($$ >> 16 & 255)) $(($$ >> 8 & 255)) $(($$ & 255)))" type bridge &&
    ip addr add "$NODE_GATEWAY/${NODE_SUBNET#*/}" dev "$NODE_BRIDGE" &&
    ip link set "$NODE_BRIDGE" up
}

node_save_sysctls() {
  local s
  [[ "${NODE_PROXY:-}" == 1 ]] && NODE_SYSCTLS+=(net.ipv4.conf.all.route_localnet)
  NODE_IPTABLES_KUBE_BEFORE=$(node_iptables_kube)
  NODE_SYSCTLS_SAVED=()
  for s in "${NODE_SYSCTLS[@]}"; do
    NODE_SYSCTLS_SAVED+=("$(sysctl -n "$s")")
  done
}

# How many iptables lines (every table) name a KUBE- chain: kube-proxy's, for the check.
node_iptables_kube() {
  command -v iptables-save >/dev/null || { echo 0; return 0; }
  iptables-save 2>/dev/null | grep -c -- 'KUBE-'
}

node_restore_sysctls() {
  local i
  ((${#NODE_SYSCTLS_SAVED[@]})) || return 0
  for i in "${!NODE_SYSCTLS[@]}"; do
    [[ "$(sysctl -n "${NODE_SYSCTLS[i]}")" == "${NODE_SYSCTLS_SAVED[i]}" ]] ||
      sysctl -qw "${NODE_SYSCTLS[i]}=${NODE_SYSCTLS_SAVED[i]}"
  done
}

# The cgroup v1 hierarchies, name=systemd and, on a hybrid layout, the unified (v2) one,
# where runc and the kubelet create our cgroup root's path as well.
node_cgroup_mounts() {
  awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts
}

node_make_cgroup_root() {
  local m
  for m in $(node_cgroup_mounts); do
    mkdir -p "$m$NODE_CGROUP_ROOT" || return 1
  done
}

node_remove_cgroup_root() {
  local m d
  for m in $(node_cgroup_mounts); do
    [[ -d "$m$NODE_CGROUP_ROOT" ]] || continue
    # Deepest first; a cgroup dir holds only kernel files, so rmdir is the way.
    find "$m$NODE_CGROUP_ROOT" -depth -type d 2>/dev/null | while read -r d; do
      rmdir "$d" 2>/dev/null || true
    done
  done
}

# NODE_KUBELET_FS_MB=N: the kubelet's root directory on a tmpfs of N MiB of its own, so
# that its nodefs, what node-pressure eviction measures, is the suite's alone: one pod's
# emptyDir can fill it, nothing else on the machine can (lib/latest.sh, with
# NODE_EVICTION_HARD). A tmpfs, not a loop device: a mount namespace another process
# makes meanwhile keeps a copy of the mount, and would keep a loop device after the run.
node_kubelet_fs() {
  [[ -n "${NODE_KUBELET_FS_MB:-}" ]] || return 0
  mount -t tmpfs -o "size=${NODE_KUBELET_FS_MB}m,mode=0755" "prestop-e2e-kubelet-$$" "$NODE/kubelet" &&
    mkdir -p "$NODE/kubelet/pki"
}

node_start() {
  node_init_names || return 1
  node_write_configs || return 1
  node_kubelet_fs || { log "cannot mount the kubelet's filesystem"; return 1; }
  k create clusterrolebinding prestop-e2e-node --clusterrole system:node \
    --group system:nodes >/dev/null || return 1
  node_save_sysctls
  local d
  NODE_FIXED_NEW=()
  for d in "${NODE_FIXED_DIRS[@]}"; do [[ -e "$d" ]] || NODE_FIXED_NEW+=("$d"); done
  node_make_cgroup_root || { log "cannot create cgroup $NODE_CGROUP_ROOT"; return 1; }
  NODE_STARTED=1

  node_spawn containerd containerd --config "$NODE/containerd.toml"
  wait_for 30 "${CTR[@]}" version || { log "containerd did not start"; tail -20 "$NODE/containerd.log" >&2; return 1; }
  local tar
  for tar in "$NODE_IMAGES"/*.tar; do
    "${CTR[@]}" images import "$tar" >/dev/null 2>>"$NODE/import.log" ||
      { log "importing $tar failed"; cat "$NODE/import.log" >&2; return 1; }
  done

  local runtime=()
  kube_at_least 27 ||
    runtime=(--container-runtime remote --container-runtime-endpoint "unix://$NODE/containerd.sock"
      --runtime-request-timeout 2m)
  node_spawn kubelet "$CACHE/kubelet-v$KUBE_VERSION" \
    --config "$NODE/kubelet.yaml" --kubeconfig "$NODE/kubelet.kubeconfig" \
    "${runtime[@]}" \
    --root-dir "$NODE/kubelet" --cert-dir "$NODE/kubelet/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 2

  # No ports at all (0 = off): nothing talks to them.
  local tokens=(--controllers '*,-serviceaccount-token')
  [[ "${NODE_SA_TOKENS:-}" == 1 ]] &&
    tokens=(--controllers '*' --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt")
  # --port (the insecure one) went in 1.24 (controller-manager) and 1.23 (scheduler).
  local insecure=(--port 0)
  kube_at_least 23 && insecure=()
  node_spawn controller-manager "$CACHE/kube-controller-manager-v$KUBE_VERSION" \
    --kubeconfig "$NODE/controller-manager.kubeconfig" \
    "${insecure[@]}" --secure-port 0 --bind-address 127.0.0.1 --leader-elect=false \
    "${tokens[@]}" --node-monitor-period 2s

  node_spawn scheduler "$CACHE/kube-scheduler-v$KUBE_VERSION" \
    --kubeconfig "$NODE/scheduler.kubeconfig" \
    "${insecure[@]}" --secure-port 0 --bind-address 127.0.0.1 --leader-elect=false

  if [[ "${NODE_PROXY:-}" == 1 ]]; then
    node_spawn kube-proxy "$CACHE/kube-proxy-v$KUBE_VERSION" --config "$NODE/kube-proxy.yaml" --v 2
  fi

  node_ready() {
    k get node "$NODE_NAME" -o json 2>/dev/null | jq -e '
      ([.status.conditions[] | select(.type == "Ready") | .status] == ["True"]) and
      ((.spec.taints // []) | length == 0)' >/dev/null
  }
  local t0=$(date +%s)
  wait_for 120 node_ready || {
    log "node $NODE_NAME did not become Ready without taints"
    k get node -o wide >&2
    local n
    for n in kubelet controller-manager scheduler; do
      echo "--- $n.log (tail)" >&2
      tail -15 "$NODE/$n.log" >&2
    done
    return 1
  }
  log "node $NODE_NAME Ready, untainted, $(($(date +%s) - t0)) s after the kubelet started"
}

node_pid_alive() { kill -0 "$1" 2>/dev/null; }

node_stop_pid() { # index
  local pid=${NODE_PIDS[$1]} i
  node_pid_alive "$pid" || return 0
  kill "$pid" 2>/dev/null
  for i in $(seq 1 100); do
    node_pid_alive "$pid" || break
    sleep 0.1
  done
  if node_pid_alive "$pid"; then
    log "teardown: ${NODE_PID_NAMES[$1]} (pid $pid) ignored SIGTERM for 10 s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  return 0
}

# Processes whose command line names our directory: the runc shims containerd started
# (they reparent away from containerd) and anything else of ours.
node_leftover_pids() {
  local p
  for p in /proc/[0-9]*; do
    [[ -r "$p/cmdline" ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$NODE/" && echo "${p#/proc/}"
  done
}

node_mounts_below() { # directory
  awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

node_stop() {
  ((NODE_STARTED)) || return 0
  NODE_STARTED=0
  local i pid m
  # 1. Pods first, through the kubelet, so it stops the sandboxes properly (CNI DEL,
  #    network namespace unmounted) while everything still runs.
  if ((${#NODE_PIDS[@]} >= 2)) && node_pid_alive "${NODE_PIDS[1]}"; then
    k delete pods --all --all-namespaces --grace-period 0 --force >/dev/null 2>&1
    node_no_tasks() { [[ -z "$("${CTR[@]}" tasks ls -q 2>/dev/null)" ]]; }
    wait_for 60 node_no_tasks || log "teardown: containers still running 60 s after the pods were deleted"
  fi
  # 2. The daemons, newest first (kube-proxy, scheduler, controller-manager, kubelet),
  #    containerd last; kube-proxy's iptables rules once it is stopped.
  for ((i = ${#NODE_PIDS[@]} - 1; i >= 1; i--)); do node_stop_pid "$i"; done
  if [[ "${NODE_PROXY:-}" == 1 ]]; then
    "${NODE_ENV[@]}" "$CACHE/kube-proxy-v$KUBE_VERSION" --cleanup >>"$NODE/kube-proxy-cleanup.log" 2>&1 ||
      log "teardown: kube-proxy --cleanup failed (see $NODE/kube-proxy-cleanup.log)"
    # 1.20's cleanup leaves the canary chains of its monitor and the mark chains it shares
    # with the kubelet (which here makes none: makeIPTablesUtilChains false), 1.37's its
    # KUBE-FIREWALL chain ("block incoming localnet connections") and the INPUT and OUTPUT
    # rules that jump to it; removed when the machine had no KUBE- rule before the run,
    # so they are ours.
    local t c
    if [[ "${NODE_IPTABLES_KUBE_BEFORE:-0}" == 0 ]]; then
      for c in INPUT OUTPUT; do
        while iptables -t filter -D "$c" -j KUBE-FIREWALL 2>/dev/null; do :; done
      done
      for t in mangle nat filter; do
        for c in KUBE-PROXY-CANARY KUBE-MARK-MASQ KUBE-MARK-DROP KUBE-FIREWALL; do
          iptables -t "$t" -F "$c" 2>/dev/null && iptables -t "$t" -X "$c" 2>/dev/null
        done
      done
    fi
  fi
  if ((${#NODE_PIDS[@]} >= 1)) && node_pid_alive "${NODE_PIDS[0]}"; then
    local c
    for c in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
      "${CTR[@]}" tasks kill -s SIGKILL "$c" >/dev/null 2>&1
    done
    sleep 0.5
    for c in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
      "${CTR[@]}" tasks delete -f "$c" >/dev/null 2>&1
    done
    for c in $("${CTR[@]}" containers ls -q 2>/dev/null); do
      "${CTR[@]}" containers rm "$c" >/dev/null 2>&1
    done
    node_stop_pid 0
  fi
  # 3. What the daemons leave by design: the kubelet's root mount, cgroups and sysctls,
  #    the bridge the CNI plugin created.
  # The kubelet bind-mounts its root directory onto itself (to make it rshared).
  # Its own filesystem below that (NODE_KUBELET_FS_MB), whose loop device goes with it.
  for i in 1 2 3; do mountpoint -q "$NODE/kubelet" && umount "$NODE/kubelet"; done
  node_remove_cgroup_root
  node_restore_sysctls
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && ip link del "$NODE_BRIDGE"
  # The 1.20 kubelet writes container logs to fixed paths; ours are the pods of the
  # suite's namespace ($NODE_NAMESPACE), named <ns>_<pod>_<uid> and <pod>_<ns>_<c>-<id>.log.
  # NODE_NAMESPACES: more namespaces the suite ran pods in (e2e/install).
  local ns
  for ns in ${NODE_NAMESPACE:-} ${NODE_NAMESPACES:-}; do
    rm -rf /var/log/pods/"${ns}"_* 2>/dev/null
    find /var/log/containers -maxdepth 1 -type l -name "*_${ns}_*.log" -delete 2>/dev/null
  done
  for m in "${NODE_FIXED_NEW[@]}"; do [[ -d "$m" ]] && rmdir "$m" 2>/dev/null; done
  # 4. What they should not leave, logged (the check below then passes or fails on the
  #    result, not on the log).
  for pid in $(node_leftover_pids); do
    log "teardown: leftover process $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | head -c 200); killing it"
    kill -KILL "$pid" 2>/dev/null
  done
  for m in $(node_mounts_below "$NODE"); do
    log "teardown: leftover mount $m; unmounting"
    umount -l "$m" 2>/dev/null
  done
  for pid in "${NODE_STRACE_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  k delete clusterrolebinding prestop-e2e-node >/dev/null 2>&1
  return 0
}

# Fails (non-zero, with a FAIL line per leftover) unless the machine is as we found it.
node_teardown_check() {
  local bad=0 i pid m leftovers
  for i in "${!NODE_PIDS[@]}"; do
    if node_pid_alive "${NODE_PIDS[i]}"; then
      echo "FAIL - teardown: ${NODE_PID_NAMES[i]} (pid ${NODE_PIDS[i]}) still running"
      bad=1
    fi
  done
  sleep 0.2
  leftovers=$(node_leftover_pids)
  [[ -z "$leftovers" ]] || { echo "FAIL - teardown: processes left: $leftovers"; bad=1; }
  for m in $(node_mounts_below "$NODE") ${NODE_EXTRA_MOUNT_ROOTS:+$(for r in $NODE_EXTRA_MOUNT_ROOTS; do node_mounts_below "$r"; done)}; do
    echo "FAIL - teardown: mount left at $m"
    bad=1
  done
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    echo "FAIL - teardown: bridge $NODE_BRIDGE left"
    bad=1
  fi
  if [[ "$(node_iptables_kube)" != "${NODE_IPTABLES_KUBE_BEFORE:-0}" ]]; then
    echo "FAIL - teardown: iptables KUBE- rules left: $(iptables-save 2>/dev/null | grep -- 'KUBE-' | head -c 300)"
    bad=1
  fi
  if ip -o link show type veth 2>/dev/null | grep -q "master $NODE_BRIDGE "; then
    echo "FAIL - teardown: veth on $NODE_BRIDGE left"
    bad=1
  fi
  for m in $(node_cgroup_mounts); do
    if [[ -e "$m$NODE_CGROUP_ROOT" ]]; then
      echo "FAIL - teardown: cgroup $m$NODE_CGROUP_ROOT left"
      bad=1
    fi
  done
  for i in "${!NODE_SYSCTLS[@]}"; do
    local now
    now=$(sysctl -n "${NODE_SYSCTLS[i]}")
    if [[ "$now" != "${NODE_SYSCTLS_SAVED[i]}" ]]; then
      echo "FAIL - teardown: ${NODE_SYSCTLS[i]} is $now, was ${NODE_SYSCTLS_SAVED[i]}"
      bad=1
    fi
  done
  local ns
  for ns in ${NODE_NAMESPACE:-} ${NODE_NAMESPACES:-}; do
    if compgen -G "/var/log/pods/${ns}_*" >/dev/null; then
      echo "FAIL - teardown: pod logs of $ns left in /var/log/pods"
      bad=1
    fi
  done
  for m in "${NODE_FIXED_NEW[@]}"; do
    if [[ -e "$m" ]]; then
      echo "FAIL - teardown: $m left (did not exist before): $(ls -A "$m" 2>/dev/null | head -c 200)"
      bad=1
    fi
  done
  if ((bad == 0)); then
    echo "ok - teardown: no process, mount, bridge, veth, iptables rule, cgroup, sysctl change or new directory left"
  fi
  return $bad
}

# With PRESTOP_E2E_NODE_STRACE=1: every connect() each daemon made, checked to stay on
# this machine (127.0.0.1, the pod subnet, unix sockets). Prints ok/FAIL per daemon.
node_strace_check() {
  [[ "${PRESTOP_E2E_NODE_STRACE:-}" == 1 ]] || return 0
  local bad=0 f name others prefix=${NODE_SUBNET%.0/24}.
  for f in "$NODE"/*.strace; do
    name=$(basename "$f" .strace)
    others=$(grep -oE 'sin6?_addr=inet_(addr|pton)\([^)]*\)' "$f" | grep -vE '"(127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)"' |
      grep -vF "\"$prefix" | sort | uniq -c)
    if [[ -z "$others" ]]; then
      echo "ok - strace: $name connected only to 127.0.0.1 and unix sockets ($(grep -c 'connect(' "$f") connect calls)"
    else
      echo "FAIL - strace: $name connected elsewhere: $others"
      bad=1
    fi
  done
  return $bad
}
