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

run_third_review_scenarios() {
  if [[ -n "$CLEANER_BIN" ]]; then
    scenario "a symlink whose target is a tail of the spelled host path (same filesystem) is refused" tail_symlink_same_filesystem_is_refused
    scenario "a symlink into another filesystem whose root is a tail of the spelled host path is refused" tail_symlink_other_filesystem_is_refused
  else
    skip "tail symlinks are refused at run time" "needs the cleaner program"
  fi
}
