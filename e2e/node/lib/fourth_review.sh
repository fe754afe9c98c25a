# The fourth review's node scenarios (issues 31 and 32), sourced by e2e/node/run.sh after
# lib/deadline.sh: what the node, not the pod, knows about who uses a directory. Uses
# run.sh's node_agent_start/node_agent_stop, lib/scenarios.sh's helpers (pods_of,
# no_pods, has_file, dir_empty, events_for) and e2e/lib/cluster.sh's seal_key_file.
#
# Each scenario's long-running command sleeps a number of its own (1000021…1000025), so
# that `pgrep -fx` finds exactly its containers' processes.

# The one Running pod (not terminating) matching a selector, by name; empty if none.
running_pod_of() { # selector
  pods_of "$1" | jq -r '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)][0].metadata.name // empty'
}
# How many processes run exactly this command line on the node.
processes() { # command-line
  pgrep -fxc "$1" 2>/dev/null
}

# --- issue 31, finding 1: a Job's replacement pod --------------------------------------
# A Job of one pod at a time on the fixed directory $2, pinned to the node: the seed Job's
# shape. Each pod writes a file named after itself and runs until stopped; its own preStop
# first waits $3 seconds (the webhook runs the user's handler, then the cleanup), so that
# the replacement is running by the time the old pod's cleanup starts.
replaced_job() { # name host-dir wait
  cat <<EOF2
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  parallelism: 1
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
      containers:
      - name: worker
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo checkpoint > /work/\$HOSTNAME; trap 'exit 0' TERM; sleep 1000021 & wait"]
        lifecycle:
          preStop: {exec: {command: [sh, -c, "sleep $3"]}}
        volumeMounts: [{name: work, mountPath: /work}]
      volumes:
      - name: work
        hostPath: {path: $2, type: DirectoryOrCreate}
EOF2
}

# The Job's pod is deleted; the Job controller starts its replacement on the same node
# and directory at once (1.20 counts a terminating pod as gone), while the old pod's
# preStop still runs. The old pod's cleanup asks the node agent, which sees the
# replacement's container reach the directory (by identity, from every process's
# mountinfo) and answers in-use: nothing is removed. Before the agent's in-use check
# (main before 599e92c) the old pod's cleanup emptied the directory, the replacement's
# file with it.
replacement_keeps_its_files() {
  local dir="$HOST/replaced/work" name=replaced
  kc create -o json -f - <<<"$(replaced_job $name "$dir" 20)"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the webhook warns that a replacement pod may share the directory" \
    has "$ERR" "/work may be shared by a Job's replacement pod"
  expect "the hook runs the user's sleep, then the cleanup of /work" \
    jqt "$OUT" '.spec.template.spec.containers[0].lifecycle.preStop.exec.command | index("/work") != null'
  local first second first_uid
  first_running() { [[ -n "$(running_pod_of job-name=$name)" ]]; }
  expect "the first pod runs within 60 s" wait_for 60 first_running
  first=$(running_pod_of job-name=$name)
  first_uid=$(k get pod "$first" -o jsonpath='{.metadata.uid}')
  expect "it wrote its file" wait_for 30 has_file "$dir/$first"
  kc delete pod "$first" --wait=false
  expect "deleting the first pod succeeds" test "$STATUS" -eq 0
  another() { second=$(running_pod_of job-name=$name); [[ -n "$second" && "$second" != "$first" ]]; }
  expect "the replacement runs while the first still terminates" wait_for 60 another
  second=$(running_pod_of job-name=$name)
  expect "the replacement wrote its file" wait_for 30 has_file "$dir/$second"
  expect "the first pod still terminates then (its user's sleep 20 runs)" \
    eval "k get pod $first -o json | jq -e '.metadata.deletionTimestamp != null' >/dev/null"
  expect "the first pod goes away (its preStop and cleanup done)" wait_for 90 eval "! k get pod $first"
  expect "the replacement's file survives the first pod's cleanup" has_file "$dir/$second"
  expect "the first pod's cleanup removed nothing at all" has_file "$dir/$first"
  local answer
  answer=$(grep -F "pod $first_uid" "$WORK/agent.log" | grep -m1 'in-use: ')
  log "replacement: the agent to the first pod: ${answer:-(no in-use line)}"
  expect "the agent answered in-use to the first pod ($first_uid)" \
    has "$answer" "in-use: another container on the node uses"
  expect "naming no pod to it: who uses it is in the agent's log only" \
    grep -q "in-use: .*\[on the node: pid [0-9]* (" "$WORK/agent.log"
  local events
  events=$(events_for "$first")
  log "replacement: $(grep -m1 FailedPreStopHook <<<"$events" | head -c 900)"
  expect "the kubelet recorded the first pod's hook failing (FailedPreStopHook)" \
    has "$events" 'FailedPreStopHook'
  expect "with the agent's sentence: another container on the node uses it" \
    has "$events" 'another container on the node uses'
  kc delete job $name --cascade=background --wait=false
  expect "the Job deletes" test "$STATUS" -eq 0
  expect "the Job's last pod goes away" wait_for 90 no_pods job-name=$name
  expect "the Job is gone" wait_for 30 eval "! k get job $name"
  expect "none of its containers is left on the node" test "$(processes 'sleep 1000021')" -eq 0
  expect "with nobody else on it, the last pod's cleanup empties the directory" dir_empty "$dir"
  expect "and the agent said same to it" grep -q "$dir: same" "$WORK/agent.log"
}

# --- issue 31, finding 4: without the agent, a link into a running container's rootfs ---
# A "model server" keeps its data in its own root filesystem, at a path that repeats the
# fixed host path of a Job that lands later (the run's temporary root makes that path
# $HOST/allowed/models; on a real node /data/models). A link planted on the node at that
# host path leads into the server's live overlay. The kubelet follows it when it mounts
# the Job's volume; the Job's container then shows, at /data, the overlay's directory
# $HOST/allowed/models: mountinfo's root equals the host path, which the strict rule alone
# (main before b5cfa3c) accepted, and the Job's cleanup, as root, emptied the server's data.
# Without the agent's word the cleaner now cleans only a directory named by its pod's uid.
model_server_pod() { # name data-dir
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
  containers:
  - name: server
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "mkdir -p $2/sub && echo weights > $2/model.bin && echo index > $2/sub/index; trap 'exit 0' TERM; sleep 1000023 & wait"]
EOF2
}

planted_job() { # name host-dir
  cat <<EOF2
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  parallelism: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
      containers:
      - name: worker
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "trap 'exit 0' TERM; sleep 1000024 & wait"]
        volumeMounts: [{name: data, mountPath: /data}]
      volumes:
      - name: data
        hostPath: {path: $2, type: Directory}
EOF2
}

link_into_rootfs_is_refused_without_the_agent() {
  local path="$HOST/allowed/models" server=model-server name=lands-on-link
  kc create -f - <<<"$(model_server_pod $server "$path")"
  expect "the model server is created" test "$STATUS" -eq 0
  server_running() { k get pod $server -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "it runs within 60 s" wait_for 60 server_running
  local id rootfs
  id=$(k get pod $server -o json | jq -r '.status.containerStatuses[0].containerID // "" | sub("^containerd://"; "")')
  rootfs="$NODE/containerd/state/io.containerd.runtime.v2.task/k8s.io/$id/rootfs"
  expect "its root filesystem is an overlay mounted on the node ($rootfs)" \
    eval '[[ -n "$id" ]] && mountpoint -q "$rootfs"'
  expect "it wrote its data there, at $path in its own root" wait_for 30 has_file "$rootfs$path/sub/index"
  mkdir -p "$(dirname "$path")"
  ln -s "$rootfs$path" "$path"
  expect "a link at the fixed host path leads into it" test -f "$path/model.bin"

  # A node without the agent (not installed, not up yet): its socket stays, refusing.
  node_agent_stop
  expect "the node agent is stopped, its socket stale" test -S "$AGENT_DIR/agent.sock"
  kc create -o json -f - <<<"$(planted_job $name "$path")"
  expect "the Job is created (the spelling is below an allowed prefix)" test "$STATUS" -eq 0
  expect "its hook cleans /data, expecting host path $path" \
    jqt "$OUT" ".spec.template.spec.containers[0].lifecycle.preStop.exec.command | (index(\"/data\") != null and index(\"$path\") != null)"
  local pod uid
  job_running() { [[ -n "$(running_pod_of job-name=$name)" ]]; }
  expect "the Job's pod runs within 60 s (the kubelet followed the link)" wait_for 60 job_running
  pod=$(running_pod_of job-name=$name)
  uid=$(k get pod "$pod" -o jsonpath='{.metadata.uid}')
  kc delete job $name --cascade=background --wait=false
  expect "the Job deletes" test "$STATUS" -eq 0
  expect "its pod goes away (its cleanup ran)" wait_for 90 no_pods job-name=$name
  expect "none of its containers is left on the node" test "$(processes 'sleep 1000024')" -eq 0
  expect "the node agent serves again" node_agent_start

  expect "the model server's data is intact in its root filesystem" has_file "$rootfs$path/model.bin"
  expect "and its nested file" has_file "$rootfs$path/sub/index"
  expect "the model server still runs" server_running
  local events
  events=$(events_for "$pod")
  log "planted link: $(grep -m1 FailedPreStopHook <<<"$events" | head -c 900)"
  expect "the kubelet recorded the hook's refusal (FailedPreStopHook)" has "$events" 'FailedPreStopHook'
  expect "saying it is not this pod's own directory" has "$events" "is not this pod's own directory"
  expect "and that the node agent was not reachable" has "$events" 'the node agent was not reachable'
  expect "no request of that pod reached the agent" eval "! grep -qF 'pod $uid' '$WORK/agent.log'"

  kc delete pod $server --wait=false
  # Teardown, not the property under test: kubelet 1.20 removes the object some 9 s after
  # the containers died on a quiet node (its status loop, then the volumes' teardown), and
  # took over 60 s once with two rustc jobs at full priority beside the suite.
  expect "the model server goes away" wait_for 120 eval "! k get pod $server"
  expect "none of its containers is left on the node" test "$(processes 'sleep 1000023')" -eq 0
  rm -f "$path"
}

# --- issue 32, finding 1: a prefix behind a root-owned link ------------------------------
# RHCOS and Fedora CoreOS link /mnt -> var/mnt; an allowed prefix below such a root-owned
# link is the node's layout (run.sh: $HOST/os/mnt -> var/mnt, in the root-owned 0755
# $HOST/os; the prefix $HOST/os/mnt/scratch, spelled through the link, for the agent and
# the webhook alike). The kubelet follows the link; the agent resolves the prefix by the
# reaper's rule (root's links in directories only root can write) and answers same: the
# hook empties the directory. Before the agent resolved prefixes, it refused every hook
# below such a prefix, and nothing there was cleaned.
behind_link_job() { # name host-dir
  cat <<EOF2
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  parallelism: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
      containers:
      - name: app
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "mkdir -p /data/sub && echo mine > /data/sub/f && echo x > /data/.dot; trap 'exit 0' TERM; sleep 1000022 & wait"]
        volumeMounts: [{name: data, mountPath: /data}]
      volumes:
      - {name: data, hostPath: {path: $2, type: DirectoryOrCreate}}
EOF2
}

symlinked_prefix_is_emptied() {
  local os="$HOST/os" name=behind-link
  local dir="$os/mnt/scratch/job" real="$os/var/mnt/scratch/job"
  expect "the layout: $os/mnt -> var/mnt, root's, in a directory only root can write" \
    test -L "$os/mnt" -a "$(stat -c %U "$os/mnt")" = root -a "$(stat -c %U:%a "$os")" = root:755
  kc create -f - <<<"$(behind_link_job $name "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  local pod
  job_running() { [[ -n "$(running_pod_of job-name=$name)" ]]; }
  expect "the Job's pod runs within 60 s" wait_for 60 job_running
  pod=$(running_pod_of job-name=$name)
  expect "it wrote through the link, where the node keeps it" wait_for 30 has_file "$real/sub/f"
  kc delete job $name --cascade=background --wait=false
  expect "the Job deletes" test "$STATUS" -eq 0
  expect "its pod goes away" wait_for 90 no_pods job-name=$name
  expect "none of its containers is left on the node" test "$(processes 'sleep 1000022')" -eq 0
  expect "its directory, behind the operator's link, is emptied by its hook" dir_empty "$real"
  expect "the directory itself stays" test -d "$real"
  log "behind a link: the agent: $(grep -F "$dir" "$WORK/agent.log" | tail -n 1)"
  expect "the agent said same for it" grep -q "$dir: same" "$WORK/agent.log"
  expect "no FailedPreStopHook event" lacks "$(events_for "$pod")" 'FailedPreStopHook'
}

# --- issue 32, finding 2: sibling pods of one Job are reaped one by one -----------------
# The recommended layout: hostPath $HOST/reaped/jobs + subPathExpr $(POD_UID). Every pod
# of the Job declares the parent; before the reaper read each mount's subPath (main
# before 0775e43) a running sibling was a user of the parent, so a force-deleted pod's
# directory waited for the last sibling. Now a pod uses what its containers reach. The
# pods' own preStop (`sleep 60` first) is cut off by the force delete's 2 s, so the files
# stay for the reaper. The Job is deleted first, orphaning its pods, so that no
# replacement pod joins in.
sibling_job() { # name prefix
  cat <<EOF2
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: /scratch}
spec:
  parallelism: 2
  backoffLimit: 6
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
      terminationGracePeriodSeconds: 90
      # The reaper walks with the pod's own user, so it must know it (docs/REAPER.md).
      securityContext: {runAsUser: 0, runAsGroup: 0}
      containers:
      - name: worker
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo \$POD_UID > /scratch/mine; mkdir -p /scratch/d; echo y > /scratch/d/.hidden; trap 'exit 0' TERM; sleep 1000025 & wait"]
        env: [{name: POD_UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}]
        lifecycle: {preStop: {exec: {command: [sleep, "60"]}}}
        volumeMounts: [{name: scratch, mountPath: /scratch, subPathExpr: "\$(POD_UID)"}]
      volumes:
      - {name: scratch, hostPath: {path: $2, type: DirectoryOrCreate}}
EOF2
}

# A node reaper of the scenario's own (a process on the node: --node-root /, --delay 5s),
# allowed below PREFIX, its log and state under $WORK/reaper-NAME; sets SCENARIO_REAPER_PID,
# SCENARIO_REAPER_LOG and SCENARIO_REAPER_STATE; true once it is ready.
start_scenario_reaper() { # name prefix
  local config="$WORK/reaper-$1-config.yaml" port
  SCENARIO_REAPER_LOG="$WORK/reaper-$1.log"
  SCENARIO_REAPER_STATE="$WORK/reaper-$1/state.json"
  echo "allowedHostPathPrefixes: [$2]" >"$config"
  port=$(free_port)
  seal_key_file
  "$BIN" reap --node-name "$NODE_NAME" --config "$config" --state-file "$SCENARIO_REAPER_STATE" \
    --seal-key-file "$SEAL_KEY_FILE" --node-root / --cleaner "$CLEANER_BIN" \
    --delay 5s --metrics-listen "127.0.0.1:$port" >"$SCENARIO_REAPER_LOG" 2>&1 &
  SCENARIO_REAPER_PID=$!
  PIDS+=("$SCENARIO_REAPER_PID")
  reaper_ready() { curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; }
  wait_for 30 reaper_ready
}

siblings_are_reaped_one_by_one() {
  local jobs="$HOST/reaped/jobs" name=siblings
  mkdir -p "$HOST/reaped"
  expect "the reaper is ready" start_scenario_reaper siblings "$HOST/reaped"
  local pid=$SCENARIO_REAPER_PID log=$SCENARIO_REAPER_LOG state=$SCENARIO_REAPER_STATE

  kc create -o json -f - <<<"$(sibling_job $name "$jobs")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "no warning that its pods share the directory (each has its own)" lacks "$ERR" 'may be shared'
  expect "the hook expects each pod's own directory" \
    jqt "$OUT" ".spec.template.spec.containers[0].lifecycle.preStop.exec.command | index(\"$jobs/\$(POD_UID)\") != null"
  two_running() {
    pods_of job-name=$name | jq -e '[.items[] | select(.status.phase == "Running")] | length == 2' >/dev/null
  }
  expect "its two pods run within 60 s" wait_for 60 two_running
  local first second
  first=$(pods_of job-name=$name | jq -r '.items[0].metadata.uid')
  second=$(pods_of job-name=$name | jq -r '.items[1].metadata.uid')
  local one="$jobs/$first" two="$jobs/$second"
  expect "each wrote to its own directory" wait_for 30 eval 'has_file "$one/d/.hidden" && has_file "$two/d/.hidden"'
  recorded() { grep -qF "\"$one\"" "$state" 2>/dev/null && grep -qF "\"$two\"" "$state"; }
  expect "the reaper recorded both directories" wait_for 30 recorded
  kc delete job $name --cascade=orphan --wait=false
  expect "the Job is deleted, orphaning its pods (no replacement joins)" wait_for 30 eval "! k get job $name"

  local t0
  t0=$(date +%s)
  kc get pods -l job-name=$name -o json
  local first_name second_name
  first_name=$(jq -r --arg u "$first" '.items[] | select(.metadata.uid == $u) | .metadata.name' <<<"$OUT")
  second_name=$(jq -r --arg u "$second" '.items[] | select(.metadata.uid == $u) | .metadata.name' <<<"$OUT")
  kc delete pod "$first_name" --grace-period=0 --force --wait=false
  expect "the first pod is force-deleted" test "$STATUS" -eq 0
  one_left() { [[ "$(processes 'sleep 1000025')" == 1 ]]; }
  expect "the kubelet stops its container, the sibling's runs on" wait_for 60 one_left
  expect "its preStop did not clean (cut off in its sleep 60)" has_file "$one/mine"
  expect "the reaper empties its directory while the sibling runs, then removes it (named by its pod's uid: issue 38, class 8)" \
    wait_for 60 eval '! test -e "$one"'
  expect "it logged the removal" grep -q "removed $one, the own directory of" "$log"
  log "siblings: first directory emptied $(($(date +%s) - t0)) s after its force delete: $(grep -F "emptied $one" "$log" | tail -n 1)"
  expect "it logged the walk" grep -q "emptied $one: " "$log"
  expect "the sibling still runs" eval "k get pod $second_name -o json | jq -e '.status.phase == \"Running\" and .metadata.deletionTimestamp == null' >/dev/null"
  expect "and its directory keeps its files" has_file "$two/d/.hidden"

  t0=$(date +%s)
  kc delete pod "$second_name" --grace-period=0 --force --wait=false
  expect "then the sibling is force-deleted" test "$STATUS" -eq 0
  none_left() { [[ "$(processes 'sleep 1000025')" == 0 ]]; }
  expect "the kubelet stops its container" wait_for 60 none_left
  expect "its preStop did not clean either" has_file "$two/mine"
  expect "the reaper empties and removes its directory too" wait_for 60 eval '! test -e "$two"'
  log "siblings: second directory emptied $(($(date +%s) - t0)) s after its force delete"
  expect "it logged that walk" grep -q "emptied $two: " "$log"
  expect "both pods are gone" wait_for 60 no_pods job-name=$name
  expect "the parent directory stays" test -d "$jobs"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

# --- issue 32, finding 1, the reaper's half: kept while a pod reaches it -----------------
# The same layout ($HOST/os/mnt -> var/mnt, root's; the prefix $HOST/os/mnt/scratch). A
# Job's pod whose own preStop (`sleep 60` first) is cut off by a force delete leaves its
# files for the reaper; another pod reaches the same directory by its real path
# ($HOST/os/var/mnt/scratch/kept) and still runs. Before the reaper resolved prefixes,
# it opened the candidate without following the link, found it "absent", answered "not in
# use" without looking at any pod, and its walk emptied what that pod still used. Now it
# resolves the prefix by the rule the agent applies, keeps the directory (and says why)
# while the pod runs, and empties it once the pod is gone.
kept_job() { # name host-dir
  cat <<EOF2
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: /scratch}
spec:
  parallelism: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
      terminationGracePeriodSeconds: 90
      # The reaper walks with the pod's own user, so it must know it (docs/REAPER.md).
      securityContext: {runAsUser: 0, runAsGroup: 0}
      containers:
      - name: worker
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo mine > /scratch/mine; mkdir -p /scratch/d; echo y > /scratch/d/.hidden; trap 'exit 0' TERM; sleep 1000026 & wait"]
        lifecycle: {preStop: {exec: {command: [sleep, "60"]}}}
        volumeMounts: [{name: scratch, mountPath: /scratch}]
      volumes:
      - {name: scratch, hostPath: {path: $2, type: DirectoryOrCreate}}
EOF2
}
reaching_pod() { # name host-dir
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {prestop-injector.io/inject: "false"}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
  terminationGracePeriodSeconds: 2
  containers:
  - name: reader
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "trap 'exit 0' TERM; sleep 1000027 & wait"]
    volumeMounts: [{name: real, mountPath: /real}]
  volumes:
  - {name: real, hostPath: {path: $2, type: Directory}}
EOF2
}

behind_link_is_kept_while_a_pod_reaches_it() {
  local name=kept-behind-link dir="$HOST/os/mnt/scratch/kept" real="$HOST/os/var/mnt/scratch/kept"
  local pod t0
  expect "the reaper is ready" start_scenario_reaper link "$HOST/os/mnt/scratch"
  local pid=$SCENARIO_REAPER_PID log=$SCENARIO_REAPER_LOG state=$SCENARIO_REAPER_STATE

  kc create -f - <<<"$(kept_job $name "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  job_running() { [[ -n "$(running_pod_of job-name=$name)" ]]; }
  expect "the Job's pod runs within 60 s" wait_for 60 job_running
  pod=$(running_pod_of job-name=$name)
  expect "it wrote through the link, where the node keeps it" wait_for 30 has_file "$real/d/.hidden"
  recorded() { grep -qF "/kept\"" "$state" 2>/dev/null; }
  expect "the reaper recorded its directory" wait_for 30 recorded
  kc create -f - <<<"$(reaching_pod reader "$real")"
  expect "another pod, on the directory's real path, is created" test "$STATUS" -eq 0
  reader_running() { k get pod reader -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "and runs within 60 s" wait_for 60 reader_running

  kc delete job $name --cascade=orphan --wait=false
  expect "the Job is deleted, orphaning its pod (no replacement joins)" wait_for 30 eval "! k get job $name"
  kc delete pod "$pod" --grace-period=0 --force --wait=false
  expect "the Job's pod is force-deleted" test "$STATUS" -eq 0
  gone() { [[ "$(processes 'sleep 1000026')" == 0 ]]; }
  expect "the kubelet stops its container" wait_for 60 gone
  expect "its preStop did not clean (cut off in its sleep 60)" has_file "$real/mine"
  kept_says_why() { grep -q "keeping .*kept for now" "$log"; }
  expect "the reaper keeps it and says why" wait_for 30 kept_says_why
  log "behind a link, kept: $(grep "keeping .*kept for now" "$log" | tail -n 1 | cut -c1-300)"
  t0=$(date +%s)
  kept_for() { # seconds: the files stay that long
    local until=$(($(date +%s) + $1))
    while (($(date +%s) < until)); do has_file "$real/d/.hidden" || return 1; sleep 1; done
  }
  expect "its files stay while the other pod reaches the directory (20 s, four times the delay)" kept_for 20

  kc delete pod reader --grace-period=0 --force --wait=false
  expect "then the other pod is deleted" test "$STATUS" -eq 0
  reader_gone() { [[ "$(processes 'sleep 1000027')" == 0 ]]; }
  expect "the kubelet stops its container" wait_for 60 reader_gone
  if ! wait_for 90 dir_empty "$real"; then
    FAILS+=("the reaper empties the directory once no pod reaches it")
    echo "    the reaper's log:" >&2
    tail -n 25 "$log" | cut -c1-600 | sed 's/^/      /' >&2
  fi
  log "behind a link: emptied $(($(date +%s) - t0)) s after it was first kept: $(grep -F "emptied" "$log" | tail -n 1 | cut -c1-200)"
  expect "the directory itself stays" test -d "$real"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

run_fourth_review_scenarios() {
  if [[ -z "$CLEANER_BIN" ]]; then
    skip "the fourth review's node scenarios" "need the cleaner program and the node agent"
    return
  fi
  scenario "a Job's replacement pod keeps its files when the old pod's cleanup runs (the node agent: in-use)" replacement_keeps_its_files
  scenario "a symlink planted at a fixed hostPath into a running container's rootfs is refused without the agent (not this pod's own directory)" link_into_rootfs_is_refused_without_the_agent
  scenario "a prefix behind a root-owned link (RHCOS /mnt -> var/mnt) is emptied by the hook with the agent's same" symlinked_prefix_is_emptied
  scenario "sibling pods of one Job (subPathExpr \$(POD_UID)) are reaped one by one, each while the other runs" siblings_are_reaped_one_by_one
  scenario "a prefix behind a root-owned link: the reaper keeps a gone pod's directory while another pod reaches it by its real path, then empties it" behind_link_is_kept_while_a_pod_reaches_it
}
