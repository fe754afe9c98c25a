# The node scenarios (issue #13), sourced by e2e/node/run.sh after the node is Ready.
# Each asserts on files on the node ($HOST, the hostPath directories) and on kubectl's
# output. Uses run.sh's machinery: kc/expect/has/jqt/scenario/skip, k, wait_for, $NS.

# The examples, adapted to a node without a registry: local images, IfNotPresent, and
# the hostPath under this run's temporary root.
seed_job() { # host directory
  sed -e 's|imagePullPolicy: Always|imagePullPolicy: IfNotPresent|' \
    -e "s|path: /test-package/.*|path: $1|" examples/job-worker.yaml
}

pods_of() { # selector -> the pods' JSON list
  k get pods -l "$1" -o json 2>/dev/null
}
pod_running() { # selector
  pods_of "$1" | jq -e '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length > 0' >/dev/null
}
no_pods() { # selector
  pods_of "$1" | jq -e '.items | length == 0' >/dev/null
}
has_file() { [[ -f "$1" ]]; }
dir_empty() { [[ -d "$1" && -z "$(ls -A "$1")" ]]; }
# The kubelet's events for pods matching a name prefix, as "reason: message" lines.
events_for() { # pod-name-prefix
  k get events -o json 2>/dev/null |
    jq -r --arg p "$1" '.items[] | select(.involvedObject.name | startswith($p)) | "\(.reason): \(.message)"'
}

# --- the seed Job ----------------------------------------------------------------------
seed_without_webhook() {
  local dir="$HOST/seed-plain/package"
  kc create -f - <<<"$(seed_job "$dir")"
  expect "create succeeds (no webhook yet)" test "$STATUS" -eq 0
  start_error() {
    pods_of job-name=job-worker | jq -e '[.items[].status.containerStatuses[]?.state.terminated.reason] | index("StartError") != null' >/dev/null
  }
  expect "the container fails to start (StartError) within 60 s" wait_for 60 start_error
  kc get pods -l job-name=job-worker -o json
  expect "the runtime says bash is not in the image" \
    jqt "$OUT" '[.items[].status.containerStatuses[]?.state.terminated.message // ""] | map(test("\"bash\": executable file not found")) | any'
  kc get job job-worker -o json
  expect "the stored Job has no injected hook" jqt "$OUT" '.spec.template.metadata.annotations == null'
  expect "the host directory was created by the kubelet" test -d "$dir"
  expect "and nothing was written to it" dir_empty "$dir"
  kc delete job job-worker --cascade=background --wait=false
  expect "the Job deletes" test "$STATUS" -eq 0
  # Not waited for: the 1.20 kubelet can take minutes to confirm the deletion of a pod
  # whose container never started. Later scenarios select pods by their Job's uid.
}

seed_with_webhook() {
  local dir="$HOST/seed/package"
  apply_webhook_configs cluster-wide || { FAILS+=("the webhook configurations apply"); return; }
  kc create -o json -f - <<<"$(seed_job "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "with the webhook's warnings" has "$ERR" 'has no bash; command and preStop hook now run /bin/sh'
  local pods="controller-uid=$(jq -r .metadata.uid <<<"$OUT")"
  expect "the pod runs within 60 s" wait_for 60 pod_running "$pods"
  expect "its file appears on the node within 30 s" wait_for 30 has_file "$dir/test.txt"
  expect "with the container's content" test "$(cat "$dir/test.txt" 2>/dev/null)" = "Hello job-worker"
  local pod_uid
  pod_uid=$(k get pods -l "$pods" -o json | jq -r '.items[0].metadata.uid')
  local t0=$(date +%s)
  kc delete job job-worker --cascade=background --wait=false
  expect "kubectl delete job --cascade=background succeeds" test "$STATUS" -eq 0
  expect "kubectl says so" has "$OUT" 'job.batch "job-worker" deleted'
  expect "the preStop empties the host directory within 30 s" wait_for 30 dir_empty "$dir"
  local emptied=$(($(date +%s) - t0))
  # The seed's shell is the container's pid 1 and ignores SIGTERM: killed at the grace.
  expect "the pod goes away within 90 s" wait_for 90 no_pods "$pods"
  expect "the host directory itself stays" test -d "$dir"
  expect "no FailedPreStopHook event" lacks "$(events_for job-worker)" 'FailedPreStopHook'
  if [[ -n "$CLEANER_BIN" ]]; then
    # The kernel's word on who asked (SO_PEERCRED, then the process's cgroup) is the very
    # pod the API server named; its directory is the node's.
    expect "the node agent answered the hook same, naming the pod the API knows ($pod_uid)" \
      grep -qF "pod $pod_uid: $dir: same" "$WORK/agent.log"
  fi
  log "seed Job: host directory emptied $emptied s after the delete"
}

# --- seed 004: a 70 s hook of the user's own ---------------------------------------------
# The example Deployment's hook (nginx -s quit; sleep 70), in a Pod the kubelet never
# restarts (restartPolicy: Never): only there may a container stop run the cleanup (a
# Deployment's containers restart in place after a liveness kill, see lib/safety.sh).
sleep70_pod() { # host directory
  yq -y --arg dir "$1" '
    {apiVersion: "v1", kind: "Pod",
     metadata: {name: "web-sleep70", labels: .spec.template.metadata.labels,
                annotations: (.metadata.annotations + {"prestop-injector.io/cleanup": "auto"})},
     spec: (.spec.template.spec | .restartPolicy = "Never")}
    | .spec.containers[0] |= (
        .image = "localhost/prestop-e2e/bash:1" | .imagePullPolicy = "IfNotPresent"
        | .lifecycle.preStop.exec.command = ["/bin/bash", "-c", "sleep 70"]
        | .command = ["/bin/bash", "-c", "trap \"exit 0\" TERM; echo up > /test-package/alive; sleep 100000 & wait"]
        | .volumeMounts = [{name: "package", mountPath: "/test-package"}])
    | .spec.volumes = [{name: "package", hostPath: {path: $dir, type: "DirectoryOrCreate"}}]
  ' examples/deployment-sleep70.yaml
}

pod_hook_outlives_30s() {
  local dir="$HOST/sleep70"
  kc create -f - <<<"$(sleep70_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  kc get pod web-sleep70 -o json
  expect "grace raised to >= 80 s" jqt "$OUT" '.spec.terminationGracePeriodSeconds >= 80'
  expect "the pod runs within 60 s" wait_for 60 pod_running app=web-sleep70
  expect "its file appears on the node" wait_for 30 has_file "$dir/alive"
  local t0=$(date +%s)
  kc delete pod web-sleep70 --wait=false
  expect "delete succeeds" test "$STATUS" -eq 0
  # Past the 30 s default grace: the pod is still terminating, its container still runs
  # (the hook's sleep 70), and the cleanup has not run yet.
  sleep_until() { while (($(date +%s) < $1)); do sleep 1; done; }
  sleep_until $((t0 + 35))
  kc get pods -l app=web-sleep70 -o json
  expect "35 s after the delete the pod is still there, terminating" \
    jqt "$OUT" '[.items[] | select(.metadata.deletionTimestamp != null)] | length == 1'
  expect "and its container still runs" \
    jqt "$OUT" '[.items[].status.containerStatuses[]? | select(.state.running != null)] | length == 1'
  expect "the file is still on the node (the hook is in its sleep 70)" has_file "$dir/alive"
  expect "after the 70 s sleep the hook's cleanup empties the directory (by 100 s)" \
    wait_for $((t0 + 100 - $(date +%s))) dir_empty "$dir"
  local emptied=$(($(date +%s) - t0))
  expect "not before the user's 70 s (emptied after $emptied s)" test "$emptied" -ge 70
  # The container stops right after the hook (~72 s, kubelet log), but since the pod has
  # the program's emptyDir the 1.20 kubelet confirms the deletion only around the grace's
  # end (110 s) plus its status-sync delay: seen 126-127 s.
  expect "the pod goes away by the grace's end" wait_for $((t0 + 150 - $(date +%s))) no_pods app=web-sleep70
  log "sleep 70: host directory emptied $emptied s, pod gone $(($(date +%s) - t0)) s after the delete"
}

# --- a Job that finishes: exec mode cannot clean it ------------------------------------
finished_job() { # name host-dir
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo done > /test-package/result"]
        volumeMounts: [{name: scratch, mountPath: /test-package}]
      volumes:
      - name: scratch
        hostPath: {path: $2, type: DirectoryOrCreate}
EOF
}

finished_job_keeps_files() {
  local dir="$HOST/finished"
  kc create -f - <<<"$(finished_job finishes "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  job_complete() { k get job finishes -o json | jq -e '.status.succeeded == 1' >/dev/null; }
  expect "the Job completes within 60 s" wait_for 60 job_complete
  kc get job finishes -o json
  expect "the hook was injected" jqt "$OUT" '.spec.template.spec.containers[0].lifecycle.preStop.exec != null'
  expect "its file is on the node" has_file "$dir/result"
  kc delete job finishes --cascade=background --wait=false
  expect "the completed pod goes away" wait_for 60 no_pods job-name=finishes
  # preStop runs only for a container that is stopped by the kubelet; this one exited.
  expect "the file stays: no preStop for a container that exited on its own" has_file "$dir/result"
}

# --- issue 10's cleaner program on the real runtime --------------------------------------
cleaner_pod() { # host-dir results-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: cleaner-user
  annotations: {prestop-injector.io/cleanup: /test-package}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      id -u > /results/uid
      if [ -x /.prestop-injector/prestop-clean ]; then echo yes > /results/found; fi
      if touch /.prestop-injector/probe 2>/dev/null; then echo writable > /results/ro; else echo read-only > /results/ro; fi
      echo mine > /test-package/mine
      mkdir -p /test-package/sub && echo nested > /test-package/sub/file
      trap "exit 0" TERM
      sleep 100000 & wait
    volumeMounts:
    - {name: scratch, mountPath: /test-package}
    - {name: results, mountPath: /results}
  volumes:
  - {name: scratch, hostPath: {path: $1, type: Directory}}
  - {name: results, hostPath: {path: $2, type: Directory}}
EOF
}

cleaner_on_runtime() {
  local dir="$HOST/cleaner/package" res="$HOST/cleaner/results" canary="$HOST/cleaner/canary"
  local bound="$HOST/cleaner/bound"
  mkdir -p "$dir" "$res" "$canary" "$bound"
  # What the container's user could delete if the cleaner followed it: owned by 1000.
  echo keep >"$canary/keep"
  echo keep >"$bound/keep"
  chown -R 1000:1000 "$dir" "$res" "$canary" "$bound"
  ln -s "$canary" "$dir/link"
  mkdir "$dir/mnt" && chown 1000:1000 "$dir/mnt"
  mount --bind "$bound" "$dir/mnt" || FAILS+=("the bind mount is planted")
  # What only root could delete: proves the hook runs as the container's user.
  mkdir "$dir/rootonly" && echo root >"$dir/rootonly/keep"

  kc create -o json -f - <<<"$(cleaner_pod "$dir" "$res")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "an init container from cleaner.image comes first" \
    jqt "$OUT" '.spec.initContainers[0].image == "localhost/prestop-e2e/cleaner:dev"'
  expect "the app mounts the program's volume read-only" \
    jqt "$OUT" '[.spec.containers[0].volumeMounts[] | select(.mountPath == "/.prestop-injector") | .readOnly] == [true]'
  expect "the hook is the program" \
    jqt "$OUT" '.spec.containers[0].lifecycle.preStop.exec.command[0] == "/.prestop-injector/prestop-clean"'
  cleaner_running() { k get pod cleaner-user -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s (the init container installed the program)" wait_for 60 cleaner_running
  expect "its files appear on the node" wait_for 30 has_file "$dir/sub/file"
  expect "the program is found in the container" test "$(cat "$res/found" 2>/dev/null)" = yes
  expect "and its volume is read-only there" test "$(cat "$res/ro" 2>/dev/null)" = read-only
  expect "the container runs as uid 1000" test "$(cat "$res/uid" 2>/dev/null)" = 1000

  kc delete pod cleaner-user --wait=false
  expect "the container's files go within 30 s" wait_for 30 eval '! test -e "$dir/mine" && ! test -e "$dir/sub"'
  expect "the pod goes away" wait_for 60 eval '! k get pod cleaner-user'
  expect "the canary behind the symlink is untouched" has_file "$canary/keep"
  expect "the bind-mounted directory's file is untouched" has_file "$bound/keep"
  expect "the mount is still there" mountpoint -q "$dir/mnt"
  expect "a root-only file survives (the hook ran as uid 1000, not root)" has_file "$dir/rootonly/keep"
  expect "the kubelet recorded the hook's non-zero exit (things survived)" \
    has "$(events_for cleaner-user)" 'FailedPreStopHook'
  umount "$dir/mnt" || umount -l "$dir/mnt"
}

shellless_pod() { # host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: no-shell
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: localhost/prestop-e2e/static-writer:1
    imagePullPolicy: IfNotPresent
    volumeMounts: [{name: scratch, mountPath: /test-package}]
  volumes:
  - {name: scratch, hostPath: {path: $1, type: DirectoryOrCreate}}
EOF
}

shellless_image() {
  local dir="$HOST/no-shell"
  kc create -o json -f - <<<"$(shellless_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the hook is the program, no shell" \
    jqt "$OUT" '.spec.containers[0].lifecycle.preStop.exec.command[0] == "/.prestop-injector/prestop-clean"'
  running() { k get pod no-shell -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  expect "its file appears on the node" wait_for 30 has_file "$dir/written"
  kc delete pod no-shell --wait=false
  expect "the hook empties the directory within 30 s" wait_for 30 dir_empty "$dir"
  expect "the pod goes away" wait_for 60 eval '! k get pod no-shell'
  expect "no FailedPreStopHook event" lacks "$(events_for no-shell)" 'FailedPreStopHook'
}

# --- the node reaper (issue 12): what no hook could clean ---------------------------------
# A force delete gives the kubelet's minimum grace (2 s): a preStop that first runs the
# user's `sleep 60` is killed before its cleanup. The reaper, a process on this node
# watching its pods, empties the directory once the pod is gone and the delay passed.
cut_off_pod() { # host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: cut-off
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 90
  # The reaper walks with the pod's own user, so it must know it (docs/REAPER.md).
  securityContext: {runAsUser: 0, runAsGroup: 0}
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo x > /scratch/file; mkdir -p /scratch/d; echo y > /scratch/d/.hidden; trap 'exit 0' TERM; sleep 100001 & wait"]
    lifecycle: {preStop: {exec: {command: [sleep, "60"]}}}
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $1, type: DirectoryOrCreate}}
EOF
}

reaper_after_force_delete() {
  local dir="$HOST/reaped/cut-off" port pid config="$WORK/reaper-config.yaml"
  mkdir -p "$HOST/reaped"
  echo "allowedHostPathPrefixes: [$HOST/reaped]" >"$config"
  port=$(free_port)
  seal_key_file
  "$BIN" reap --node-name "$NODE_NAME" --config "$config" --state-file "$WORK/reaper/state.json" \
    --seal-key-file "$SEAL_KEY_FILE" --node-root / --cleaner "$CLEANER_BIN" \
    --delay 10s --metrics-listen "127.0.0.1:$port" >"$WORK/reaper.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  reaper_ready() { curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; }
  expect "the reaper is ready" wait_for 30 reaper_ready
  kc create -f - <<<"$(cut_off_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  running() { k get pod cut-off -o json | jq -e '.status.phase == "Running"' >/dev/null; }
  expect "the pod runs within 60 s" wait_for 60 running
  expect "its files appear on the node" wait_for 30 has_file "$dir/d/.hidden"
  recorded() { jq -e '.directories | length == 1' "$WORK/reaper/state.json" >/dev/null 2>&1; }
  expect "the reaper recorded its directory" wait_for 30 recorded
  kc delete pod cut-off --grace-period=0 --force --wait=false
  gone() { ! k get pod cut-off >/dev/null 2>&1; }
  expect "the pod is gone from the API at once" wait_for 10 gone
  # The kubelet kills the container after 2 s; the hook's `sleep 60` never reached the
  # cleanup, so the files are still there once the container is gone.
  container_gone() { ! pgrep -f "sleep 100001" >/dev/null; }
  expect "the kubelet stops the container" wait_for 60 container_gone
  expect "the preStop did not clean (cut off)" has_file "$dir/file"
  expect "the reaper empties the directory after its delay" wait_for 60 dir_empty "$dir"
  expect "it logged the walk" grep -q "emptied $dir: " "$WORK/reaper.log"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

# --- issue 27: busybox sh ignores set -e when a compound's redirection fails --------------
# `bash -ec '{ cp …; } > /archive/copy.log; rm -rf /data/*'` with a read-only /archive:
# bash stops at the failed redirection, busybox `sh` goes on to the `rm`. In busybox the
# webhook must keep bash (the pod cannot start: a visible failure) rather than rewrite it
# to /bin/sh, which wipes the results it never archived. The same script run by `sh`,
# what the rewrite would have run, shows the wipe on this node.
errexit_job() { # name shell data-dir archive-dir
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  annotations: {prestop-injector.io/fix-shell: "true"}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: archiver
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [$2, -ec, "{ cp -r /data/results /archive/ && sync; } > /archive/copy.log; rm -rf /data/*"]
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: archive, mountPath: /archive, readOnly: true}
      volumes:
      - {name: data, hostPath: {path: $3, type: Directory}}
      - {name: archive, hostPath: {path: $4, type: Directory}}
EOF
}

errexit_compound_redirection() {
  local base="$HOST/errexit" run
  for run in bash sh; do
    mkdir -p "$base/$run/data/results" "$base/$run/archive"
    echo "1,2" >"$base/$run/data/results/run-1.csv"
  done
  kc create -o json -f - <<<"$(errexit_job errexit-bash bash "$base/bash/data" "$base/bash/archive")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the webhook keeps bash and says why" \
    has "$ERR" 'command unchanged: busybox ignores set -e if { } >file fails'
  expect "the stored command still starts bash" \
    jqt "$OUT" '.spec.template.spec.containers[0].command[0] == "bash"'
  start_error() {
    pods_of job-name=errexit-bash | jq -e '[.items[].status.containerStatuses[]?.state.terminated.reason] | index("StartError") != null' >/dev/null
  }
  expect "the container fails to start (StartError) within 60 s" wait_for 60 start_error
  expect "the results survive on the node" has_file "$base/bash/data/results/run-1.csv"

  kc create -f - <<<"$(errexit_job errexit-sh sh "$base/sh/data" "$base/sh/archive")"
  expect "the same script under sh: create succeeds" test "$STATUS" -eq 0
  sh_job_done() { k get job errexit-sh -o json | jq -e '.status.succeeded == 1' >/dev/null; }
  expect "busybox sh goes on past the failed redirection: the Job succeeds within 60 s" \
    wait_for 60 sh_job_done
  expect "and the results are gone" dir_empty "$base/sh/data"
  expect "never archived (read-only)" dir_empty "$base/sh/archive"
  kc delete job errexit-bash errexit-sh --cascade=background --wait=false
  expect "the Jobs delete" test "$STATUS" -eq 0
  # Not waited for: see seed_without_webhook (a pod that never started).
}

# --- issue 27: a container's stop is not the end of its directory's use -----------------
# Two app containers share one scratch directory in a restartPolicy: Never pod. The
# liveness probe of `worker` fails once it wrote its part: the kubelet kills it (running
# its preStop) and, by the restart policy, never starts it again; the pod goes on with
# `shipper`. An exec-hook cleanup on `worker` would empty what `shipper` still reads.
shared_dir_pod() { # host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: shared-dir
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  restartPolicy: Never
  containers:
  - name: worker
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      mkdir -p /data/chunks
      for i in 1 2 3; do echo "chunk \$i" > /data/chunks/\$i; done
      touch /tmp/unhealthy
      trap "exit 0" TERM
      sleep 100005 & wait
    livenessProbe:
      exec: {command: [sh, -c, "test ! -f /tmp/unhealthy"]}
      initialDelaySeconds: 2
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: scratch, mountPath: /data}]
  - name: shipper
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      trap "exit 0" TERM
      while :; do ls /out/chunks 2>/dev/null | wc -l > /out/seen.tmp; mv /out/seen.tmp /out/seen; sleep 1; done &
      wait
    volumeMounts: [{name: scratch, mountPath: /out}]
  volumes:
  - {name: scratch, hostPath: {path: $1, type: DirectoryOrCreate}}
EOF
}

shared_dir_survives_a_liveness_kill() {
  local dir="$HOST/allowed/shared-dir"
  kc create -o json -f - <<<"$(shared_dir_pod "$dir")"
  expect "create succeeds" test "$STATUS" -eq 0
  expect "the webhook warns, naming the other container" has "$ERR" '"shipper" also mounts it'
  expect "no exec-hook cleanup in worker" \
    jqt "$OUT" '(.spec.containers[0].lifecycle.preStop.exec.command // []) | index("--target") == null'
  expect "nor in shipper" \
    jqt "$OUT" '(.spec.containers[1].lifecycle.preStop.exec.command // []) | index("--target") == null'
  expect "worker writes its chunks" wait_for 60 has_file "$dir/chunks/3"
  worker_terminated() {
    k get pod shared-dir -o json | jq -e '.status.containerStatuses[] | select(.name == "worker")
      | .state.terminated != null and .restartCount == 0' >/dev/null
  }
  expect "the liveness probe kills worker for good within 60 s (terminated, restartCount 0)" \
    wait_for 60 worker_terminated
  kc get pod shared-dir -o json
  expect "the pod keeps running" jqt "$OUT" '.status.phase == "Running"'
  expect "with shipper running" \
    jqt "$OUT" '.status.containerStatuses[] | select(.name == "shipper") | .state.running != null'
  expect "worker was not started again" \
    jqt "$OUT" '.status.containerStatuses[] | select(.name == "worker") | .restartCount == 0'
  # A count shipper wrote after worker's last chunk, read on the node.
  fresh_count() { [[ "$dir/seen" -nt "$dir/chunks/3" && "$(cat "$dir/seen" 2>/dev/null)" == 3 ]]; }
  expect "shipper still sees its 3 chunks after worker stopped" wait_for 30 fresh_count
  expect "and they are on the node" has_file "$dir/chunks/1"
  kc delete pod shared-dir --wait=false
  expect "the pod goes away" wait_for 90 eval '! k get pod shared-dir'
}

run_scenarios() {
  scenario "seed Job without the webhook: the container cannot start (no bash in busybox)" seed_without_webhook
  scenario "seed Job with the webhook: its file appears; delete --cascade=background empties the host dir, keeps the dir" seed_with_webhook
  scenario "the example's 70 s preStop (restartPolicy: Never): still running 35 s after the delete, cleaned after the 70 s" pod_hook_outlives_30s
  scenario "a Job that finishes keeps its files in exec mode (1.20 has no native sidecars to clean them)" finished_job_keeps_files
  scenario "bash -ec with a failed { } > redirection in busybox: bash kept with a warning, the pod cannot start, the data survives (sh would wipe it)" errexit_compound_redirection
  scenario "two containers sharing a directory: a liveness kill of one keeps the other's data (no exec cleanup, a warning naming it)" shared_dir_survives_a_liveness_kill
  if [[ -n "$CLEANER_BIN" ]]; then
    scenario "cleaner init container: program found, read-only mount, runs as the user, no symlink or mount crossed" cleaner_on_runtime
    scenario "an image without a shell gets its cleanup" shellless_image
    scenario "force delete cuts the preStop off after 2 s: the node reaper empties the directory" reaper_after_force_delete
  else
    skip "cleaner init container on the real runtime" "the webhook has no cleaner.image yet (issue 10)"
    skip "an image without a shell gets its cleanup" "needs the cleaner program (issue 10)"
  fi
}
