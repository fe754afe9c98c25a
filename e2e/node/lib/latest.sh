# What only a newer kubelet can show (issue 41), run by e2e/node/run.sh when
# PRESTOP_E2E_KUBE_VERSION is 1.29 or newer (1.37.2 in CI): a native cleanup sidecar for
# real, the ends the kubelet decides alone (a pod's activeDeadlineSeconds, a node-pressure
# eviction), with the phase as the kubelet reports it, and what FailedPreStopHook says.
# Sourced after lib/scenarios.sh (pods_of, dir_empty, events_for) and lib/fourth_review.sh
# (start_scenario_reaper). Its functions must not share a name with theirs: it is sourced
# after them and would replace them for the 1.20 scenarios (latest_deadline_pod once did).
#
# An assertion may describe what an open issue will make true (expect_issue N): while N
# is in LATEST_OPEN_ISSUES (PRESTOP_E2E_OPEN_ISSUES, default none) a failure is printed as
# a `pending:` line and does not fail the scenario; one that holds says so. The fix of an
# issue removes its number, and its assertions then bind like any other. Issues 38 and 39,
# the last to use it, are resolved: every assertion here binds.
#
# The eviction scenario needs the node started with a kubelet root directory on a small
# filesystem of its own and a hard nodefs threshold (run.sh sets NODE_KUBELET_FS_MB and
# NODE_EVICTION_HARD, lib/node.sh): one pod writing to an emptyDir then brings DiskPressure
# about, and nothing else on the machine can.

LATEST_OPEN_ISSUES=${PRESTOP_E2E_OPEN_ISSUES-}
LATEST_PENDING=()
expect_issue() { # issue description command...
  local issue=$1 what="[issue $1] $2"
  shift 2
  if "$@"; then
    [[ " $LATEST_OPEN_ISSUES " == *" $issue "* ]] &&
      echo "    holds already: $what (issue $issue is still listed open in lib/latest.sh)"
    return 0
  fi
  if [[ " $LATEST_OPEN_ISSUES " == *" $issue "* ]]; then
    LATEST_PENDING+=("$what")
    echo "    pending: $what: fails until issue $issue lands"
  else
    FAILS+=("$what")
  fi
}

pod_json() { k get pod "$1" -o json 2>/dev/null; }
pod_listed() { k get pod "$1" >/dev/null 2>&1; }
# "phase reason" as the kubelet reports them (the API server stores what it sends).
pod_phase_reason() { pod_json "$1" | jq -r '"\(.status.phase) \(.status.reason // "")"'; }

# --- a native sidecar empties a finished Job's directory (≥ 1.29) ---------------------------
sidecar_job() { # name host-dir
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto, prestop-injector.io/mode: sidecar}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      # The sidecar runs as the app's numeric user (docs/JOBS.md).
      securityContext: {runAsUser: 1000, runAsGroup: 1000}
      containers:
      - name: worker
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo done > /scratch/result; mkdir -p /scratch/d; echo x > /scratch/d/.hidden; sleep 3"]
        volumeMounts: [{name: scratch, mountPath: /scratch}]
      volumes:
      - name: scratch
        hostPath: {path: $2, type: Directory}
EOF
}

sidecar_empties_at_success() {
  local dir="$HOST/sidecar/done"
  mkdir -p "$dir" && chown 1000:1000 "$dir"
  kc create -o json -f - <<<"$(sidecar_job sidecar-done "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the webhook added a native sidecar from cleaner.image (restartPolicy: Always)" \
    jqt "$OUT" '[.spec.template.spec.initContainers[]? | select(.restartPolicy == "Always" and .image == "localhost/prestop-e2e/cleaner:dev")] | length == 1'
  expect "and no exec hook on the worker" \
    jqt "$OUT" '.spec.template.spec.containers[0].lifecycle.preStop == null'
  local uid
  uid=$(jq -r .metadata.uid <<<"$OUT")
  expect "the worker's files appear on the node" wait_for 60 has_file "$dir/d/.hidden"
  complete() { k get job sidecar-done -o json | jq -e '.status.succeeded == 1' >/dev/null; }
  expect "the Job succeeds within 90 s (the sidecar does not hold it)" wait_for 90 complete
  expect "the sidecar empties the directory at the Job's success (within 30 s)" \
    wait_for 30 dir_empty "$dir"
  expect "the directory itself stays" test -d "$dir"
  local pods="controller-uid=$uid"
  pods_of "$pods" >"$WORK/sidecar-pods.json"
  expect "the kubelet reports the pod Succeeded" \
    jq -e '[.items[].status.phase] == ["Succeeded"]' "$WORK/sidecar-pods.json" >/dev/null
  expect "the sidecar exited 0" jq -e '[.items[].status.initContainerStatuses[]? |
    select(.restartPolicy == "Always" or (.name | startswith("prestop-cleanup"))) |
    .state.terminated.exitCode] == [0]' "$WORK/sidecar-pods.json" >/dev/null
  local pod_uid
  pod_uid=$(jq -r '.items[0].metadata.uid' "$WORK/sidecar-pods.json")
  expect "the node agent answered the sidecar same for that pod ($pod_uid)" \
    grep -qF "pod $pod_uid: $dir: same" "$WORK/agent.log"
  expect "no FailedPreStopHook event" lacks "$(events_for sidecar-done)" 'FailedPreStopHook'
  kc delete job sidecar-done --cascade=background --wait=false
  expect "the pod goes away" wait_for 60 no_pods "$pods"
}

# --- activeDeadlineSeconds: the kubelet ends the pod, no deletion ---------------------------
latest_deadline_pod() { # name host-dir restartPolicy
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: $3
  activeDeadlineSeconds: 20
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo x > /scratch/file; mkdir -p /scratch/d; echo y > /scratch/d/.hidden; trap 'exit 0' TERM; sleep 100002 & wait"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $2, type: DirectoryOrCreate}}
EOF
}

# A `Never` pod gets the exec hook; the kubelet runs it when the deadline kills the pod.
deadline_runs_the_hook() {
  local dir="$HOST/deadline/hooked"
  kc create -o json -f - <<<"$(latest_deadline_pod deadline-hooked "$dir" Never)"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the exec hook was injected" jqt "$OUT" '.spec.containers[0].lifecycle.preStop.exec != null'
  expect "its files appear on the node" wait_for 60 has_file "$dir/d/.hidden"
  failed() { [[ "$(pod_phase_reason deadline-hooked)" == "Failed DeadlineExceeded" ]]; }
  expect "the kubelet reports Failed, DeadlineExceeded within 60 s" wait_for 60 failed
  expect "the hook emptied the directory" wait_for 30 dir_empty "$dir"
  expect "the pod object stays (nothing deletes a failed bare pod)" pod_listed deadline-hooked
  local uid
  uid=$(pod_json deadline-hooked | jq -r .metadata.uid)
  log "deadline (exec hook): $(pod_phase_reason deadline-hooked); the agent: $(grep -F "pod $uid:" "$WORK/agent.log" | sed 's/.*: //' | tr '\n' ';' | head -c 300)"
  kc delete pod deadline-hooked --wait=false
  expect "the pod goes away" wait_for 60 eval '! k get pod deadline-hooked'
}

# An `OnFailure` pod of two users: `app` (uid 1000) is taken by the cleanup sidecar, which
# runs as one user only, so `tool` (uid 2000) gets no in-pod cleanup at all (no sidecar for
# another user, no exec hook where the kubelet may restart the container). Issue 38, class
# 2: the webhook leaves tool's target to the reaper under the seal (prestop-injector.io/reap),
# and the reaper empties it as uid 2000 once the pod has ended, deleted or not. Each user
# needs a known uid: containerd 1.6 does not report a container's user to the kubelet
# (status.containerStatuses[].user), so without runAsUser the reaper keeps the directory
# (user_unknown, fail closed), which the pod without runAsUser shows first.
deadline_pod_of_two_users() { # name host-dir-of-app host-dir-of-tool
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: OnFailure
  activeDeadlineSeconds: 20
  terminationGracePeriodSeconds: 30
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo x > /scratch/file; trap 'exit 0' TERM; sleep 100004 & wait"]
    volumeMounts: [{name: app, mountPath: /scratch}]
  - name: tool
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    securityContext: {runAsUser: 2000, runAsGroup: 2000}
    command: [sh, -c, "echo x > /cache/file; mkdir -p /cache/d; echo y > /cache/d/.hidden; trap 'exit 0' TERM; sleep 100005 & wait"]
    volumeMounts: [{name: tool, mountPath: /cache}]
  volumes:
  - {name: app, hostPath: {path: $2, type: DirectoryOrCreate}}
  - {name: tool, hostPath: {path: $3, type: DirectoryOrCreate}}
EOF
}

deadline_unhooked_is_reaped() {
  local dir="$HOST/deadline/unhooked" app="$HOST/deadline/two-users-app" tool="$HOST/deadline/two-users-tool"
  expect "the reaper is ready" start_scenario_reaper deadline "$HOST/deadline"
  # Without runAsUser: left to the reaper, which will not guess the user.
  kc create -o json -f - <<<"$(latest_deadline_pod deadline-unhooked "$dir" OnFailure)"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "no exec hook (the kubelet may restart the container)" \
    jqt "$OUT" '.spec.containers[0].lifecycle.preStop == null'
  expect "its target is left to the reaper, sealed" \
    jqt "$OUT" '(.metadata.annotations["prestop-injector.io/reap"] | fromjson | .[0].target) == "/scratch" and (.metadata.annotations["prestop-injector.io/seal"] | startswith("v1:"))'
  expect "the warning says so" has "$ERR" 'left to the node reaper'
  # Two users: the sidecar takes app's directory, the reaper tool's.
  mkdir -p "$app" "$tool" && chown 1000:1000 "$app" && chown 2000:2000 "$tool"
  kc create -o json -f - <<<"$(deadline_pod_of_two_users deadline-two-users "$app" "$tool")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "tool's target is left to the reaper" \
    jqt "$OUT" '(.metadata.annotations["prestop-injector.io/reap"] | fromjson) == [{"container": "tool", "target": "/cache", "host": "'"$tool"'"}]'
  expect "their files appear on the node" \
    wait_for 60 eval 'has_file "$dir/d/.hidden" && has_file "$tool/d/.hidden" && has_file "$app/file"'
  failed() { [[ "$(pod_phase_reason "$1")" == "Failed DeadlineExceeded" ]]; }
  expect "the kubelet reports both Failed, DeadlineExceeded within 60 s" \
    wait_for 60 eval 'failed deadline-unhooked && failed deadline-two-users'
  local t0=$(date +%s)
  expect "the reaper empties tool's directory within 30 s (its delay is 5 s), as uid 2000, the pod still listed" \
    wait_for 30 dir_empty "$tool"
  expect "the sidecar emptied app's directory (the agent: ending, its deadline passed)" dir_empty "$app"
  expect "the pod object is still listed" pod_listed deadline-two-users
  expect "the directory of the pod without runAsUser is kept: the reaper will not guess whose rights" \
    eval '! dir_empty "$dir" && grep -q "has no runAsUser and runAsGroup for container" "$SCENARIO_REAPER_LOG"'
  log "deadline (no in-pod cleanup): tool's directory $(dir_empty "$tool" && echo emptied || echo "still full $(($(date +%s) - t0)) s after"); without runAsUser: $(dir_empty "$dir" && echo emptied || echo kept); the reaper: $(grep -E 'WARN|emptied' "$SCENARIO_REAPER_LOG" | tail -n 3 | cut -c1-300 | tr '\n' ';')"
  kc delete pod deadline-unhooked deadline-two-users --wait=false
  expect "the pods go away" wait_for 60 eval '! k get pod deadline-unhooked && ! k get pod deadline-two-users'
  kill "$SCENARIO_REAPER_PID" 2>/dev/null
  wait "$SCENARIO_REAPER_PID" 2>/dev/null
}

# --- a node-pressure eviction: DiskPressure on the kubelet's own filesystem -----------------
evicted_pod() { # name host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: /scratch, prestop-injector.io/mode: sidecar}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 30
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    # Its files first, then an emptyDir filled past the node's threshold.
    command: [sh, -c, "echo x > /scratch/file; mkdir -p /scratch/d; echo y > /scratch/d/.hidden; sleep 5; dd if=/dev/zero of=/fill/zero bs=1M count=$NODE_EVICTION_FILL_MB 2>/dev/null; trap 'exit 0' TERM; sleep 100003 & wait"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: fill, mountPath: /fill}
  volumes:
  - {name: scratch, hostPath: {path: $2, type: Directory}}
  - {name: fill, emptyDir: {}}
EOF
}

eviction_empties_the_directory() {
  local dir="$HOST/evicted/data"
  mkdir -p "$dir" && chown 1000:1000 "$dir"
  expect "the reaper is ready" start_scenario_reaper evicted "$HOST/evicted"
  kc create -o json -f - <<<"$(evicted_pod evicted "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "a restartable native sidecar (restartPolicy OnFailure, runAsUser set)" \
    jqt "$OUT" '[.spec.initContainers[]? | select(.restartPolicy == "Always") | .command + (.args // []) | index("--restartable") != null] == [true]'
  expect "its files appear on the node" wait_for 60 has_file "$dir/d/.hidden"
  evicted() { [[ "$(pod_phase_reason evicted)" == "Failed Evicted" ]]; }
  expect "the kubelet evicts it: Failed, Evicted within 90 s" wait_for 90 evicted
  local t0=$(date +%s) msg uid
  pod_json evicted >"$WORK/evicted.json"
  msg=$(jq -r '.status.message // ""' "$WORK/evicted.json")
  uid=$(jq -r .metadata.uid "$WORK/evicted.json")
  expect "for the node's low ephemeral storage (its message: $msg)" has "$msg" 'ephemeral-storage'
  # Its node status update (every 4 s) records the condition, after the eviction.
  expect "the kubelet saw DiskPressure on its node" \
    wait_for 20 grep -q 'event="NodeHasDiskPressure"' "$NODE/kubelet.log"
  sidecar_stopped() { pod_json evicted | jq -e '[.status.initContainerStatuses[]? | select(.restartPolicy == "Always" or (.name | startswith("prestop-cleanup"))) | .state.terminated != null] == [true]' >/dev/null; }
  expect "the sidecar was stopped by the kubelet" wait_for 60 sidecar_stopped
  expect "the evicted pod's directory is emptied within 30 s (by its sidecar, or the reaper's 5 s delay), the pod still listed" \
    wait_for 30 dir_empty "$dir"
  expect "the pod object is still listed (nothing deletes an evicted bare pod)" pod_listed evicted
  log "eviction: $(pod_phase_reason evicted) ($msg); directory $(dir_empty "$dir" && echo emptied || echo "still full $(($(date +%s) - t0)) s after"); the agent on it: $(grep -F "pod $uid:" "$WORK/agent.log" | tail -n 2 | tr '\n' ';' | head -c 400)"
  kc delete pod evicted --wait=false
  expect "the pod goes away" wait_for 60 eval '! k get pod evicted'
  kill "$SCENARIO_REAPER_PID" 2>/dev/null
  wait "$SCENARIO_REAPER_PID" 2>/dev/null
  no_pressure() { k get node "$NODE_NAME" -o json | jq -e '([.status.conditions[] | select(.type == "DiskPressure") | .status] == ["False"]) and ((.spec.taints // []) | length == 0)' >/dev/null; }
  expect "the node's DiskPressure ends once the emptyDir is gone" wait_for 90 no_pressure
}

# --- FailedPreStopHook: what the kubelet says of a failed cleanup -----------------------------
# The cleaner as uid 1000 cannot remove a root-only file: it exits non-zero. The kubelet
# 1.20 put the hook's output in the Event; since 1.26 it says only "PreStopHook failed"
# (kuberuntime_container.go executePreStopHook), so the cleanup's line reaches no user.
# Issue 39: the node agent records that line as an Event on the pod.
hook_failure_pod() { # host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: hook-fails
  annotations: {prestop-injector.io/cleanup: /scratch}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo mine > /scratch/mine; trap 'exit 0' TERM; sleep 100004 & wait"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $1, type: Directory}}
EOF
}

failed_prestop_hook_text() {
  local dir="$HOST/hookfail/data"
  mkdir -p "$dir" && chown 1000:1000 "$dir"
  mkdir "$dir/rootonly" && echo root >"$dir/rootonly/keep"
  kc create -o json -f - <<<"$(hook_failure_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the hook is the program" \
    jqt "$OUT" '.spec.containers[0].lifecycle.preStop.exec.command[0] == "/.prestop-injector/prestop-clean"'
  expect "its file appears on the node" wait_for 60 has_file "$dir/mine"
  kc delete pod hook-fails --wait=false
  expect "the pod goes away" wait_for 60 eval '! k get pod hook-fails'
  expect "the user's file is removed" test ! -e "$dir/mine"
  expect "the root-only file survives (the hook ran as uid 1000)" has_file "$dir/rootonly/keep"
  local events
  events=$(events_for hook-fails)
  log "hook failure: events: $(tr '\n' ';' <<<"$events" | head -c 700)"
  if kube_at_least 26; then
    expect "the kubelet's FailedPreStopHook says only \"PreStopHook failed\" (≥ 1.26)" \
      grep -qx 'FailedPreStopHook: PreStopHook failed' <<<"$events"
    expect "an Event on the pod carries the cleanup's line (it names /scratch)" \
      eval 'grep -v "^FailedPreStopHook:" <<<"$events" | grep -qF /scratch'
  else
    expect "the kubelet's FailedPreStopHook carries the cleanup's line (< 1.26)" \
      eval 'grep "^FailedPreStopHook:" <<<"$events" | grep -qF /scratch'
  fi
  rm -rf "$dir/rootonly"
}

run_latest_scenarios() {
  if ! kube_at_least 29 || [[ -z "$CLEANER_BIN" ]]; then
    skip "the scenarios of a newer kubelet (lib/latest.sh)" "need Kubernetes ≥ 1.29 and the cleaner program; this run has $KUBE_VERSION"
    return 0
  fi
  # The seed scenario applies them too; PRESTOP_E2E_ONLY may have skipped it.
  apply_webhook_configs cluster-wide || { log "the webhook configurations did not apply"; FAILED=$((FAILED + 1)); return 1; }
  scenario "[$KUBE_VERSION] a native cleanup sidecar empties a finished Job's directory at its success" sidecar_empties_at_success
  scenario "[$KUBE_VERSION] activeDeadlineSeconds: the kubelet reports Failed/DeadlineExceeded and the exec hook empties the directory" deadline_runs_the_hook
  scenario "[$KUBE_VERSION] activeDeadlineSeconds without an in-pod cleanup: the reaper empties the ended pod's directory as its user, and keeps one whose user it cannot know" deadline_unhooked_is_reaped
  scenario "[$KUBE_VERSION] FailedPreStopHook's text, and the cleanup's line as an Event" failed_prestop_hook_text
  scenario "[$KUBE_VERSION] a hook cut off by a 6 s grace period: its line as the agent's PrestopCleanupCutOff Event; the reaper finishes and counts it" hook_cut_off_by_its_deadline
  if [[ -n "${NODE_KUBELET_FS_MB:-}" ]]; then
    scenario "[$KUBE_VERSION] a node-pressure eviction (DiskPressure): Failed/Evicted, its directory emptied" eviction_empties_the_directory
  else
    skip "a node-pressure eviction" "the node was started without a kubelet filesystem of its own (NODE_KUBELET_FS_MB)"
  fi
  if ((${#LATEST_PENDING[@]})); then
    echo "pending (${#LATEST_PENDING[@]}, waiting for open issues $LATEST_OPEN_ISSUES):"
    printf '    %s\n' "${LATEST_PENDING[@]}"
  fi
}
