# The deletion-safety scenarios of issue 17 on the real node, sourced by e2e/node/run.sh
# after lib/scenarios.sh. Each is an attack or an accident that the node, not a string
# rule, decides: the kubelet's restarts, the node's symlinks, a shell the image lacks.
# Every scenario plants a canary that the old behaviour destroyed.

# --- class 3: preStop runs on container restarts ------------------------------------------
# A liveness probe that fails once the container has written its data: the kubelet kills
# the container (running its preStop) and starts it again in the same pod. An exec-hook
# cleanup there would empty the data the restarted container comes back to.
restarting_pod() { # host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: restarts
  annotations: {prestop-injector.io/cleanup: /data}
spec:
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      [ -f /data/first-start ] || date > /data/first-start
      echo run >> /data/starts
      touch /tmp/unhealthy
      trap "exit 0" TERM
      sleep 100002 & wait
    livenessProbe:
      exec: {command: [sh, -c, "test ! -f /tmp/unhealthy"]}
      initialDelaySeconds: 2
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - {name: data, hostPath: {path: $1, type: DirectoryOrCreate}}
EOF
}

liveness_restart_keeps_the_data() {
  local dir="$HOST/allowed/restarts"
  kc create -o json -f - <<<"$(restarting_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the webhook warns that it cannot clean on a container stop here (restartPolicy)" \
    has "$ERR" 'restartPolicy'
  expect "no exec-hook cleanup is injected for a container the kubelet restarts" \
    jqt "$OUT" '(.spec.containers[0].lifecycle.preStop.exec.command // []) | index("--target") == null'
  restarted() {
    k get pod restarts -o json | jq -e '.status.containerStatuses[0].restartCount >= 1' >/dev/null
  }
  expect "the liveness probe restarts the container within 60 s" wait_for 60 restarted
  two_starts() { [[ $(wc -l <"$dir/starts" 2>/dev/null) -ge 2 ]]; }
  expect "the restarted container ran again in the same pod" wait_for 30 two_starts
  expect "the data written before the restart is still there" has_file "$dir/first-start"
  kc delete pod restarts --wait=false
  expect "the pod goes away" wait_for 60 eval '! k get pod restarts'
}

# --- class 4: a symlink on the node -------------------------------------------------------
# hostPath.path spells a directory under the allowed prefix, but on the node it is a
# symlink into a tree the operator never allowed. The kubelet follows it when it mounts;
# only the program, reading /proc/self/mountinfo in the container, can see where it went.
symlinked_pod() { # host-path
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: symlinked
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo mine > /cache/mine; trap 'exit 0' TERM; sleep 100003 & wait"]
    volumeMounts: [{name: cache, mountPath: /cache}]
  volumes:
  - {name: cache, hostPath: {path: $1, type: Directory}}
EOF
}

symlinked_host_path_is_refused() {
  local link="$HOST/allowed/cache" real="$HOST/protected/containerd"
  mkdir -p "$HOST/allowed" "$real"
  echo keep >"$real/canary"
  ln -s "$real" "$link"
  kc create -o json -f - <<<"$(symlinked_pod "$link")"
  expect "create succeeds (the spelling is under the allowed prefix)" test "$STATUS" -eq 0
  expect "the hook carries the expected host path" \
    jqt "$OUT" ".spec.containers[0].lifecycle.preStop.exec.command | index(\"$link\") != null"
  running() { k get pod symlinked -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  expect "the container wrote through the symlink" wait_for 30 has_file "$real/mine"
  kc delete pod symlinked --wait=false
  expect "the pod goes away" wait_for 60 eval '! k get pod symlinked'
  expect "the canary in the symlink's target is untouched" has_file "$real/canary"
  expect "so is the container's own file there" has_file "$real/mine"
  local events
  events=$(events_for symlinked)
  expect "the kubelet recorded the hook's refusal (FailedPreStopHook)" has "$events" 'FailedPreStopHook'
  expect "naming the expected host path" has "$events" "$link"
  expect "and the directory the node resolved" has "$events" "$real"
  rm -f "$link"
}

# --- class 1: a shell change without the proof -------------------------------------------
# The README's own example of a script that means something else under sh: in busybox,
# `declare` does not exist, W stays empty and `rm -rf "$W"/*` is `rm -rf /*`. The custom
# command must keep bash (and fail visibly) rather than run under /bin/sh.
bash_script_pod() { # host-dir
  cat <<'EOF' | sed "s|@DIR@|$1|"
apiVersion: v1
kind: Pod
metadata:
  name: bash-script
  annotations:
    prestop-injector.io/shell: /bin/bash
    prestop-injector.io/command: |
      declare -r W=/scratch/tmp; rm -rf "$W"/*
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "mkdir -p /scratch/tmp; echo t > /scratch/tmp/t; trap 'exit 0' TERM; sleep 100004 & wait"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: @DIR@, type: DirectoryOrCreate}}
EOF
}

custom_bash_script_is_not_switched() {
  local dir="$HOST/allowed/bash-script"
  mkdir -p "$dir"
  echo keep >"$dir/canary"
  kc create -o json -f - <<<"$(bash_script_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the webhook warns that the script keeps bash" has "$ERR" 'bash'
  expect "no shell path in the hook was switched to /bin/sh" \
    jqt "$OUT" '[.spec.containers[0].lifecycle.preStop.exec.command[] | select(. == "/bin/sh" or . == "sh")] | length == 0'
  running() { k get pod bash-script -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  expect "its file appears" wait_for 30 has_file "$dir/tmp/t"
  kc delete pod bash-script --wait=false
  expect "the pod goes away" wait_for 60 eval '! k get pod bash-script'
  expect "the canary beside the script's directory survives (no rm -rf /*)" has_file "$dir/canary"
}

run_safety_scenarios() {
  scenario "a liveness restart keeps the data: no exec-hook cleanup where the kubelet restarts the container" liveness_restart_keeps_the_data
  if [[ -n "$CLEANER_BIN" ]]; then
    scenario "a symlinked hostPath is refused at run time, naming both paths" symlinked_host_path_is_refused
  else
    skip "a symlinked hostPath is refused at run time" "needs the cleaner program"
  fi
  scenario "a custom bash script in busybox is not switched to /bin/sh" custom_bash_script_is_not_switched
}
