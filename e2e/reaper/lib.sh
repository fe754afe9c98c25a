# The node reaper's e2e machinery, shared by e2e/reaper/run.sh (the scenarios) and
# e2e/reaper/scale.sh (1,000 pods). Sourced after e2e/lib/cluster.sh's cluster_start and
# start_webhook; needs WORK, BIN, APISERVER, PIDS, log(). The reaper runs as node-a with
# its host root and its node root (where pods' host paths are resolved, symlinks followed
# inside it) both $WORK/host, allowedHostPathPrefixes [/scratch] and its metrics on
# REAPER_PORT; the webhook uses the same configuration.
# shellcheck shell=bash

NODE=node-a
HOST="$WORK/host"
REAPER_CONFIG="$WORK/reaper-config.yaml"
REAPER_STATE="$WORK/reaper/state.json"
REAPER_LOG="$WORK/reaper.log"
REAPER_PORT=$(free_port)
REAPER_PID=
mkdir -p "$HOST/scratch" "$WORK/reaper"
# The reaper walks as each pod's user (uid 1000 in other_tenant): they must reach $HOST
# (mktemp -d made $WORK 0700), as they reach a node's scratch prefix.
chmod 0755 "$WORK"
printf 'allowedHostPathPrefixes: [/scratch]\n' >"$REAPER_CONFIG"

# Right after cluster_start: the kube-apiserver is the last pid it started.
remember_apiserver() {
  APISERVER_INDEX=$((${#PIDS[@]} - 1))
}

# --- the reaper ------------------------------------------------------------------------
reaper_ready() { curl -sf "http://127.0.0.1:$REAPER_PORT/readyz" >/dev/null 2>&1; }

start_reaper() { # extra flags (--dry-run, --delay 10s, ...); waits for /readyz
  local started delay=(--delay 2s)
  [[ " $* " == *" --delay "* ]] && delay=()
  started=$(date +%s.%N)
  seal_key_file
  "$BIN" reap --node-name "$NODE" --config "$REAPER_CONFIG" --host-root "$HOST" \
    --seal-key-file "$SEAL_KEY_FILE" --node-root "$HOST" \
    --state-file "$REAPER_STATE" "${delay[@]}" --metrics-listen "127.0.0.1:$REAPER_PORT" \
    --log-level info,prestop_injector=debug "$@" >>"$REAPER_LOG" 2>&1 &
  REAPER_PID=$!
  wait_for 60 reaper_ready_or_gone
  reaper_ready || {
    log "the reaper did not become ready"
    tail -20 "$REAPER_LOG" >&2
    wait "$REAPER_PID" 2>/dev/null
    REAPER_PID=
    return 1
  }
  REAPER_READY_SECONDS=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
}
reaper_ready_or_gone() { reaper_ready || ! kill -0 "$REAPER_PID" 2>/dev/null; }

stop_reaper() { # SIGTERM: it saves its state and exits
  [[ -n "$REAPER_PID" ]] || return 0
  kill "$REAPER_PID" 2>/dev/null
  wait "$REAPER_PID" 2>/dev/null
  REAPER_PID=
  # Its port is free again once it has exited; nobody answers there now.
  ! curl -sf "http://127.0.0.1:$REAPER_PORT/healthz" >/dev/null 2>&1
}

restart_reaper() { # flags for the new one
  stop_reaper && start_reaper "$@"
}

# A metric of the reaper (name with labels as printed, counters with _total), 0 if absent.
rmetric() {
  curl -sf "http://127.0.0.1:$REAPER_PORT/metrics" |
    awk -v name="$1" '$1 == name { print $2; found = 1 } END { if (!found) print 0 }'
}
# Succeeds once the metric is above (or equal to, with -ge) a value.
rmetric_above() { (($(rmetric "$1") > $2)); }
rmetric_is() { [[ "$(rmetric "$1")" == "$2" ]]; }

P=prestop_injector_reaper_

# --- the API server --------------------------------------------------------------------
# A crash: SIGKILL. On SIGTERM kube-apiserver 1.20 stops listening at once but keeps
# serving open watches for up to 60 s while it drains, so a watcher is rightly still in
# sync meanwhile (seen: the reaper emptied a directory then, correctly).
stop_apiserver() {
  local pid=${PIDS[APISERVER_INDEX]}
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ! curl -sk --max-time 2 "$API_URL/readyz" >/dev/null 2>&1
}

# cluster.sh's own start, the same etcd and port, so every object persists; its pid takes
# the old one's place in PIDS.
start_apiserver() {
  apiserver_start
  PIDS[APISERVER_INDEX]=$!
  wait_for 90 k get --raw /readyz || {
    log "kube-apiserver did not become ready again"
    tail -30 "$WORK/apiserver.log" >&2
    return 1
  }
}

# --- host directories and pods ---------------------------------------------------------
# A scratch directory with files, dot-files and a nested directory.
fill() { # host dir
  mkdir -p "$1/nested/deeper"
  echo data >"$1/file"
  echo hidden >"$1/.dot-file"
  echo nested >"$1/nested/inner"
  echo hidden >"$1/nested/.inner-dot"
  echo deep >"$1/nested/deeper/leaf"
}
entries() { find "$1" -mindepth 1 2>/dev/null | wc -l; } # host dir -> count below it
is_emptied() { [[ -d "$1" && ! -L "$1" && "$(entries "$1")" == 0 ]]; }
untouched() { [[ -f "$1/file" && -f "$1/.dot-file" && -f "$1/nested/.inner-dot" && -f "$1/nested/deeper/leaf" ]]; }

# A Pod on node-a mounting host path $2 at /scratch. $3: the annotations (flow mapping
# body); injected with `prestop-injector.io/cleanup: auto` by default. `restartPolicy:
# Never`: only there is a container's stop its pod's end, so only there does the webhook
# inject an exec-hook cleanup. POD_USER=uid:gid (default 0:0, the owner of what fill()
# writes) sets runAsUser and runAsGroup: the reaper empties only as the pod's own user,
# and no kubelet reports it here; POD_USER=none leaves them out (the image's USER).
# POD_RESTART_POLICY (default Never) and POD_FINALIZER (one finalizer) for a scenario that
# needs them.
pod() { # name host-path [annotations]
  local user=${POD_USER-0:0} context=""
  [[ "$user" != none ]] && context="securityContext: {runAsUser: ${user%:*}, runAsGroup: ${user#*:}}"
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: e2e
  annotations: {${3-"prestop-injector.io/cleanup": auto}}
  finalizers: [${POD_FINALIZER:-}]
spec:
  nodeName: $NODE
  restartPolicy: ${POD_RESTART_POLICY:-Never}
  $context
  containers:
  - name: app
    image: busybox:1.37
    command: [sleep, "3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - name: scratch
    hostPath: {path: $2, type: DirectoryOrCreate}
EOF
}

is_injected() { # pod name
  k get pod -n e2e "$1" -o json |
    jq -e '(.metadata.annotations | has("prestop-injector.io/status"))
           and (.spec.containers[0].lifecycle.preStop.exec.command[0] == "/.prestop-injector/prestop-clean")' >/dev/null
}

force_delete() { # pod names
  k delete pod -n e2e "$@" --grace-period=0 --force --wait=false >/dev/null 2>&1
}

# Node Events carry counts and reasons only (issue 17, class 11): a scenario counts the
# Events of a reason before it acts, waits for one more, and checks that none names
# its pod (nor its directory, which is named after the pod).
node_event_count() { # reason
  k get events -n default --field-selector "involvedObject.kind=Node,involvedObject.name=$NODE,reason=$1" -o json |
    jq '.items | length'
}
more_node_events() { [[ "$(node_event_count "$1")" -gt "$2" ]]; } # reason count-before
no_node_event_names() { # pod
  [[ "$(k get events -n default --field-selector "involvedObject.kind=Node,involvedObject.name=$NODE" -o json |
    jq --arg pod "$1" '[.items[] | select(.message | contains($pod))] | length')" = 0 ]]
}

# Proof that the reaper has decided on everything deleted before now: a marker pod,
# injected, deleted now, and its directory emptied. The ledger decides every directory due
# at one moment in one pass (take_due), a directory deleted earlier is due no later than
# the marker's, and the watch delivers the deletions in order: once the marker's
# directory is emptied, the decision on every earlier one is made.
MARKERS=0
decided() {
  MARKERS=$((MARKERS + 1))
  local name="marker-$MARKERS"
  fill "$HOST/scratch/$name"
  pod "$name" "/scratch/$name" | k create -f - >/dev/null || return 1
  # Recorded before it goes, or its deletion would schedule nothing.
  wait_for 30 record_of "$name" || return 1
  force_delete "$name"
  wait_for 60 is_emptied "$HOST/scratch/$name"
}

# The state file holds a record of pod e2e/$1 (the reaper writes it within a second of a
# change).
record_of() { jq -e --arg n "$1" '[.directories[].pods[] | select(.name == $n)] | length > 0' "$REAPER_STATE" >/dev/null; }
