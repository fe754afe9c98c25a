# --- issue 33: the cleanup reports before the grace period cuts it off -------------------
# A pod whose grace period (6 s) leaves its hook no time for a tree of 500,000 files: the
# user's own `sleep 3` runs first, inside the hook's deadline (6 - 2 = 4 s), and one
# worker (PRESTOP_CLEAN_JOBS=1) removes about 200,000 in the second left (measured on an
# idle machine). The
# program stops itself at the deadline, its line reaches the pod as an Event (the kubelet's
# FailedPreStopHook up to 1.25, the node agent's PrestopCleanupCutOff since), and the node reaper, seeing the marker it left, finishes the tree and counts it.
# Sourced by e2e/node/run.sh after lib/scenarios.sh (free_port, seal_key_file, events_for).

deadline_pod() { # host-dir
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata:
  name: deadline
  annotations:
    prestop-injector.io/cleanup: auto
    # Nothing to raise: the pod's own 6 s stay its grace period.
    prestop-injector.io/hook-seconds: "1"
    prestop-injector.io/shutdown-seconds: "0"
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 6
  # The reaper walks with the pod's own user, so it must know it (docs/REAPER.md).
  securityContext: {runAsUser: 0, runAsGroup: 0}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "trap 'exit 0' TERM; sleep 100002 & wait"]
    env: [{name: PRESTOP_CLEAN_JOBS, value: "1"}]
    lifecycle: {preStop: {exec: {command: [sleep, "3"]}}}
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $1, type: DirectoryOrCreate}}
EOF2
}

hook_cut_off_by_its_deadline() {
  local dir="$HOST/reaped/deadline" port pid config="$WORK/reaper-deadline-config.yaml"
  local log="$WORK/reaper-deadline.log"
  mkdir -p "$dir"
  # 500 directories of 1,000 empty files, written on the node (a shell loop in the pod
  # would take minutes).
  python3 - "$dir" <<'PY'
import os, sys
for i in range(500):
    d = os.path.join(sys.argv[1], "t", str(i))
    os.makedirs(d)
    for j in range(1000):
        os.close(os.open(os.path.join(d, str(j)), os.O_CREAT | os.O_WRONLY, 0o644))
PY
  echo "allowedHostPathPrefixes: [$HOST/reaped]" >"$config"
  port=$(free_port)
  seal_key_file
  "$BIN" reap --node-name "$NODE_NAME" --config "$config" --state-file "$WORK/reaper-deadline/state.json" \
    --seal-key-file "$SEAL_KEY_FILE" --node-root / --cleaner "$CLEANER_BIN" \
    --delay 5s --metrics-listen "127.0.0.1:$port" >"$log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  reaper_ready() { curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; }
  expect "the reaper is ready" wait_for 30 reaper_ready

  kc create -o json -f - <<<"$(deadline_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the grace period stays the pod's 6 s" jqt "$OUT" '.spec.terminationGracePeriodSeconds == 6'
  expect "the hook is told its deadline: 6 s minus the 2 s margin" \
    jqt "$OUT" '.spec.containers[0].lifecycle.preStop.exec.command[1:4] == ["hook", "--deadline", "4"]'
  running() { k get pod deadline -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  recorded() { grep -qF "$dir" "$WORK/reaper-deadline/state.json" 2>/dev/null; }
  expect "the reaper recorded its directory" wait_for 30 recorded

  kc delete pod deadline --wait=false
  # Up to 1.25 the kubelet's FailedPreStopHook carries the hook's output; since 1.26 it
  # says only "PreStopHook failed", and the node agent records the line (issue 39).
  local reason=FailedPreStopHook
  kube_at_least 26 && reason=PrestopCleanupCutOff
  cut_off_event() { events_for deadline | grep -q "^$reason: .*cut off by its deadline, 4 s after the start: removed "; }
  expect "the $reason Event carries the cut-off line" wait_for 60 cut_off_event
  log "deadline: $(events_for deadline | grep -m1 "^$reason:" | head -c 700)"
  expect "the line names what it left for the reaper" \
    has "$(events_for deadline)" "left for the node reaper: /scratch (not finished)"
  # Looked at as soon as the hook reported: the pod ends a moment later, and the reaper
  # empties an ended pod's directory after its 5 s delay, deleted or not (issue 38).
  # Which entries go first is the directory's order: only that some are left is known.
  expect "the hook left part of the tree (cut off)" test -n "$(ls -A "$dir/t" 2>/dev/null)"
  expect "and its marker for the reaper's count" has_file "$dir/.prestop-clean-cut-off"
  expect "the pod goes away" wait_for 60 eval '! k get pod deadline >/dev/null 2>&1'
  expect "the reaper empties the directory after its delay" wait_for 120 dir_empty "$dir"
  expect "it logged the walk" grep -q "emptied $dir: " "$log"
  counted() {
    curl -sf "http://127.0.0.1:$port/metrics" |
      grep -qx 'prestop_injector_reaper_cut_off_cleanups_finished_total 1'
  }
  expect "it counted a cut-off cleanup it finished" wait_for 10 counted
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

run_deadline_scenarios() {
  if [[ -n "$CLEANER_BIN" ]]; then
    scenario "a hook cut off by a 6 s grace period reports in FailedPreStopHook; the reaper finishes and counts it" hook_cut_off_by_its_deadline
  else
    skip "a hook cut off by its deadline reports" "needs the cleaner program"
  fi
}
