# The third review's node scenarios (issue 26), sourced by e2e/node/run.sh after
# lib/safety.sh. Round 2's symlink (lib/safety.sh, class 4) resolved to a path whose tail
# differed from the spelled one; these pick a tail that matches, which the identity check
# accepted as long as it compared only mountinfo's root with the end of the host path.
# Each plants a canary that the old check let the hook destroy.

# A Pod whose one container mounts the hostPath $1 (a symlink planted on the node) and
# writes a file of its own through it.
tail_symlink_pod() { # name host-path
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo mine > /cache/mine; trap 'exit 0' TERM; sleep 100005 & wait"]
    volumeMounts: [{name: cache, mountPath: /cache}]
  volumes:
  - {name: cache, hostPath: {path: $2, type: Directory}}
EOF
}

# Creates the pod on the symlink $2, lets it write, deletes it, and checks that the
# hook refused the directory the node resolved ($3), naming both paths.
tail_symlink_is_refused() { # name link real
  local name=$1 link=$2 real=$3
  kc create -o json -f - <<<"$(tail_symlink_pod "$name" "$link")"
  expect "create succeeds (the spelling is under the allowed prefix)" test "$STATUS" -eq 0
  expect "the hook carries the expected host path" \
    jqt "$OUT" ".spec.containers[0].lifecycle.preStop.exec.command | index(\"$link\") != null"
  running() { k get pod "$name" -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  expect "the container wrote through the symlink" wait_for 30 has_file "$real/mine"
  kc delete pod "$name" --wait=false
  expect "the pod goes away" wait_for 60 eval "! k get pod $name"
  expect "the canary in the directory the node resolved is untouched" has_file "$real/canary"
  expect "so is the container's own file there" has_file "$real/mine"
  local events
  events=$(events_for "$name")
  expect "the kubelet recorded the hook's refusal (FailedPreStopHook)" has "$events" 'FailedPreStopHook'
  expect "naming the expected host path" has "$events" "$link"
}

# Same filesystem: the spelled host path ends with the real directory's whole path
# (`…/allowed/ci-7/<real>`), so mountinfo's root is a tail of it.
tail_symlink_same_filesystem_is_refused() {
  local real="$HOST/protected/kubelet"
  local link="$HOST/allowed/ci-7$real"
  mkdir -p "$real" "$(dirname "$link")"
  echo keep >"$real/canary"
  ln -s "$real" "$link"
  tail_symlink_is_refused tail-same "$link" "$real"
  rm -f "$link"
}

# Another filesystem: a tmpfs at $HOST/run (as /run is on a node) holds `containerd`;
# mountinfo's root is `/containerd`, a tail of `…/allowed/containerd`.
tail_symlink_other_filesystem_is_refused() {
  local run="$HOST/run" link="$HOST/allowed/containerd"
  mkdir -p "$run" "$HOST/allowed"
  mount -t tmpfs -o size=1m,mode=0755 prestop-e2e-run "$run" || {
    FAILS+=("mounting a tmpfs at $run"); return; }
  mkdir -p "$run/containerd"
  echo keep >"$run/containerd/canary"
  ln -s "$run/containerd" "$link"
  tail_symlink_is_refused tail-other "$link" "$run/containerd"
  rm -f "$link"
  umount "$run" || umount -l "$run"
}

# --- the reaper deletes with the pod's rights (issue 26 item 2) ------------------------
# A uid-1000 pod mounts another tenant's 0700 directory (uid 2000) under the reaper's
# prefix. Its own hook could not touch it ("Permission denied"); force-deleted, the
# reaper (root, DAC_OVERRIDE) emptied it. The walk now runs as the pod's uid and gids,
# without capabilities: the tenant's files survive and the reaper says why.
other_tenant_pod() { # host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: other-tenant
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 90
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "trap 'exit 0' TERM; sleep 100006 & wait"]
    lifecycle: {preStop: {exec: {command: [sleep, "60"]}}}
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $1, type: Directory}}
EOF
}

other_tenants_directory_survives_the_reaper() {
  local dir="$HOST/reaped/tenant-b" port pid config="$WORK/reaper-tenant-config.yaml"
  mkdir -p "$dir/deep"
  echo secret >"$dir/secret"
  echo secret >"$dir/deep/secret"
  chown -R 2000:2000 "$dir"
  chmod 0700 "$dir" "$dir/deep"
  echo "allowedHostPathPrefixes: [$HOST/reaped]" >"$config"
  port=$(free_port)
  "$BIN" reap --node-name "$NODE_NAME" --config "$config" --state-file "$WORK/reaper-tenant/state.json" \
    --seal-key-file "$SEAL_KEY_FILE" --node-root / --cleaner "$CLEANER_BIN" \
    --delay 5s --metrics-listen "127.0.0.1:$port" >"$WORK/reaper-tenant.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  reaper_ready() { curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; }
  expect "the reaper is ready" wait_for 30 reaper_ready
  kc create -f - <<<"$(other_tenant_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  running() { k get pod other-tenant -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  recorded() { grep -qF "$dir" "$WORK/reaper-tenant/state.json" 2>/dev/null; }
  expect "the reaper recorded its directory" wait_for 30 recorded
  kc delete pod other-tenant --grace-period=0 --force --wait=false
  container_gone() { ! pgrep -f "sleep 100006" >/dev/null; }
  expect "the kubelet stops the container" wait_for 60 container_gone
  walked() { grep -F "$dir" "$WORK/reaper-tenant.log" | grep -qiE "permission denied|survivors|entries left"; }
  expect "the reaper walked it as the pod's user and the kernel refused it, within 60 s" wait_for 60 walked
  expect "the other tenant's file survives" has_file "$dir/secret"
  expect "and its nested file" has_file "$dir/deep/secret"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

run_third_review_scenarios() {
  if [[ -n "$CLEANER_BIN" ]]; then
    scenario "a symlink whose target is a tail of the spelled host path (same filesystem) is refused" tail_symlink_same_filesystem_is_refused
    scenario "a symlink into another filesystem whose root is a tail of the spelled host path is refused" tail_symlink_other_filesystem_is_refused
    scenario "force-deleted, a uid-1000 pod's mount of another tenant's 0700 directory is not emptied by the reaper" other_tenants_directory_survives_the_reaper
  else
    skip "tail symlinks are refused at run time" "needs the cleaner program"
  fi
}
