# The fifth review's cases on the real node (issue 38). Sourced after lib/fourth_review.sh
# (replaced_job) and lib/scenarios.sh; names of its own only (a later file replaces an
# earlier file's function of the same name for every scenario).

fifth_pod_runs() { # pod
  k get pod "$1" -o json | jq -e '.status.phase == "Running"' >/dev/null
}

# --- class 4a: a pod that has no process at the instant still uses its directory --------
# A cache pod of someone else's, not injected, crash-looping on a fixed host directory:
# between two restarts it has no process at all, so a scan of the node's mount tables
# finds nobody on the directory. A Job of the same directory is deleted while the cache
# pod waits in CrashLoopBackOff; its cleanup asks the node agent, which sees a pod bound
# to the node, not ended, whose spec reaches the directory, and answers in-use. Before
# issue 38 the agent looked at processes only, and the cache was emptied.
crashing_cache_pod() { # name host-dir
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {prestop-injector.io/inject: "false"}
spec:
  restartPolicy: Always
  nodeSelector: {kubernetes.io/hostname: $NODE_NAME}
  containers:
  - name: cache
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo warm >> /cache/state; sleep 1; exit 1"]
    volumeMounts: [{name: cache, mountPath: /cache}]
  volumes:
  - name: cache
    hostPath: {path: $2, type: DirectoryOrCreate}
EOF
}

crash_looping_pod_keeps_its_directory() {
  local dir="$HOST/crashing/cache" name=crash-neighbour cache=crashing-cache
  kc create -f - <<<"$(crashing_cache_pod $cache "$dir")"
  expect "the cache pod is created" test "$STATUS" -eq 0
  backing_off() {
    k get pod $cache -o json |
      jq -e '.status.containerStatuses[0].state.waiting.reason == "CrashLoopBackOff"' >/dev/null
  }
  expect "it crash-loops: CrashLoopBackOff within 90 s" wait_for 90 backing_off
  expect "it wrote its state" has_file "$dir/state"
  kc create -o json -f - <<<"$(replaced_job $name "$dir" 1)"
  expect "the Job is created" test "$STATUS" -eq 0
  expect "its hook cleans /work" \
    jqt "$OUT" '.spec.template.spec.containers[0].lifecycle.preStop.exec.command | index("/work") != null'
  local pod uid
  job_running() { [[ -n "$(running_pod_of job-name=$name)" ]]; }
  expect "the Job's pod runs within 60 s" wait_for 60 job_running
  pod=$(running_pod_of job-name=$name)
  uid=$(k get pod "$pod" -o jsonpath='{.metadata.uid}')
  expect "it wrote its file" wait_for 30 has_file "$dir/$pod"
  # Deleted while the cache pod has no process: in its back-off, between two runs.
  expect "the cache pod waits in CrashLoopBackOff again" wait_for 60 backing_off
  log "crash loop: the cache pod when the Job goes: $(k get pod $cache -o json | jq -c '{phase: .status.phase, restarts: .status.containerStatuses[0].restartCount, state: .status.containerStatuses[0].state | keys}')"
  kc delete job $name --cascade=background --wait=false
  expect "the Job deletes" test "$STATUS" -eq 0
  expect "its pod goes away (its preStop ran)" wait_for 90 no_pods job-name=$name
  expect "the cache pod's state survives the Job's cleanup" has_file "$dir/state"
  expect "the cleanup removed nothing at all" has_file "$dir/$pod"
  local answer
  answer=$(grep -F "pod $uid" "$WORK/agent.log" | grep -m1 'in-use: ')
  log "crash loop: the agent to the Job's pod: ${answer:-(no in-use line)}"
  expect "the agent answered in-use to the Job's pod ($uid)" \
    has "$answer" "in-use: another container on the node uses"
  kc delete pod $cache --wait=false
  expect "the cache pod goes away" wait_for 120 eval "! k get pod $cache"
  rm -rf "$HOST/crashing"
}


# --- class 3: a newcomer during the walk stops it -----------------------------------------
# The pod's cleanup asks the agent once, then walks a large tree. A pod bound to the node
# on the same directory while it walks (created with its nodeName, so bound at once) must
# stop the walk within its 100 ms re-ask: its files, and what the walk had not reached,
# stay. Before issue 38 the hook asked once and emptied the newcomer's files too.
midwalk_pod() { # name host-dir annotations
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: $3
spec:
  restartPolicy: Never
  nodeName: $NODE_NAME
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo mine > /data/\$HOSTNAME; trap 'exit 0' TERM; sleep 1000031 & wait"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    hostPath: {path: $2, type: DirectoryOrCreate}
EOF
}

newcomer_during_the_walk_stops_it() {
  local dir="$HOST/midwalk/data" old=midwalk-old new=midwalk-new
  mkdir -p "$dir/tree"
  # A tree the walk needs seconds for: 300,000 empty files in 300 directories.
  python3 - "$dir/tree" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(300):
    os.mkdir(f"{root}/{d}")
    for f in range(1000):
        os.close(os.open(f"{root}/{d}/{f}", os.O_CREAT | os.O_WRONLY, 0o644))
PY
  kc create -o json -f - <<<"$(midwalk_pod $old "$dir" '{prestop-injector.io/cleanup: auto}')"
  expect "the first pod is created" test "$STATUS" -eq 0
  expect "its hook cleans /data" \
    jqt "$OUT" '.spec.containers[0].lifecycle.preStop.exec.command | index("/data") != null'
  expect "it runs within 60 s" wait_for 60 fifth_pod_runs $old
  expect "it wrote its file" wait_for 30 has_file "$dir/$old"
  local uid
  uid=$(k get pod $old -o jsonpath='{.metadata.uid}')
  kc delete pod $old --wait=false
  expect "deleting it succeeds" test "$STATUS" -eq 0
  cleared() { grep -qF "pod $uid: $dir: same" "$WORK/agent.log"; }
  expect "its cleanup asked the agent and was answered same" wait_for 30 cleared
  # Now, while it walks: a pod of the same directory, bound at its creation.
  kc create -f - <<<"$(midwalk_pod $new "$dir" '{prestop-injector.io/inject: "false"}')"
  expect "a newcomer on the same directory is created, bound to the node" test "$STATUS" -eq 0
  expect "the first pod goes away" wait_for 90 eval "! k get pod $old"
  expect "the newcomer runs" wait_for 60 fifth_pod_runs $new
  expect "its file is there" wait_for 30 has_file "$dir/$new"
  local left
  left=$(find "$dir/tree" -type f | wc -l)
  local events
  events=$(events_for "$old")
  log "newcomer during the walk: $left of 300,000 files left; $(grep -o 'stopped during the walk[^;]*' <<<"$events" | head -n 1 | head -c 300)"
  expect "the walk stopped before the end: files of the tree are left" test "$left" -gt 0
  expect "the first pod's line says it stopped during the walk" has "$events" 'stopped during the walk'
  kc delete pod $new --wait=false
  expect "the newcomer goes away" wait_for 120 eval "! k get pod $new"
  rm -rf "$HOST/midwalk"
}

# --- class 5: one pod's mount table does not make every judgement on its node late -------
# A pod of someone else's with one emptyDir mounted 1,000 times at long paths (about 1 MB
# of mount table for each of its processes, which the API server and the kubelet accept)
# and 400 idle processes. Before issue 38 the agent read every process's table in full
# and every judgement on the node missed its 3 s deadline; now a mount namespace's table
# is read once per judgement. Another pod's cleanup is judged `same` and empties its
# directory, well within the deadline.
hostile_mounts_pod() { # name mounts processes
  local i long=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
  echo "apiVersion: v1"
  echo "kind: Pod"
  echo "metadata: {name: $1, annotations: {prestop-injector.io/inject: \"false\"}}"
  echo "spec:"
  echo "  restartPolicy: Never"
  echo "  nodeName: $NODE_NAME"
  echo "  terminationGracePeriodSeconds: 2"
  echo "  volumes: [{name: many, emptyDir: {}}]"
  echo "  containers:"
  echo "  - name: app"
  echo "    image: busybox:stable"
  echo "    imagePullPolicy: IfNotPresent"
  echo "    command: [sh, -c, \"for i in \$(seq $3); do sleep 1000041 & done; wait\"]"
  echo "    volumeMounts:"
  for i in $(seq "$2"); do
    echo "    - {name: many, mountPath: /m/$long/$long/$long/$i}"
  done
}

hostile_mount_table_leaves_judgements_in_time() {
  local dir="$HOST/seed/hostile" hostile=mount-hoarder
  kc create -f - <<<"$(hostile_mounts_pod $hostile 1000 400)"
  expect "the pod of 1,000 mounts is created" test "$STATUS" -eq 0
  four_hundred() { [[ "$(processes 'sleep 1000041')" -ge 400 ]]; }
  expect "it runs its 400 processes within 180 s" wait_for 180 four_hundred
  local table lines
  table=/proc/$(pgrep -xf 'sleep 1000041' | head -n 1)/mountinfo
  lines=$(wc -l <"$table")
  log "hostile mounts: each of its processes has a mount table of $lines lines, $(wc -c <"$table") bytes"
  expect "its mount table has over 1,000 lines" test "$lines" -gt 1000
  mkdir -p "$dir"
  kc create -o json -f - <<<"$(midwalk_pod hostile-neighbour "$dir" '{prestop-injector.io/cleanup: auto}')"
  expect "a neighbour with a cleanup is created" test "$STATUS" -eq 0
  expect "it runs" wait_for 60 fifth_pod_runs hostile-neighbour
  expect "it wrote its file" wait_for 30 has_file "$dir/hostile-neighbour"
  local uid t0
  uid=$(k get pod hostile-neighbour -o jsonpath='{.metadata.uid}')
  t0=$(date +%s%N)
  kc delete pod hostile-neighbour --wait=false
  expect "its cleanup empties its directory within 30 s" wait_for 30 dir_empty "$dir"
  log "hostile mounts: the neighbour's directory emptied $(( ($(date +%s%N) - t0) / 1000000 )) ms after its delete; the agent: $(grep -F "pod $uid" "$WORK/agent.log" | tail -n 1 | grep -o ': [a-z-]*\(: .\{0,120\}\)\?$')"
  expect "the agent judged it same, within its deadline" grep -qF "pod $uid: $dir: same" "$WORK/agent.log"
  expect "no judgement on the node missed the deadline" eval "! grep -q 'could not judge' '$WORK/agent.log'"
  expect "the neighbour goes away" wait_for 90 eval "! k get pod hostile-neighbour"
  kc delete pod $hostile --wait=false
  expect "the pod of 1,000 mounts goes away" wait_for 180 eval "! k get pod $hostile"
  rm -rf "$dir"
}

run_fifth_review_scenarios() {
  if [[ -z "$CLEANER_BIN" ]]; then
    skip "the fifth review's node scenarios" "need the cleaner program and the node agent"
    return
  fi
  scenario "a crash-looping pod keeps its directory: deleted between two runs, it has no process, and the node agent still answers in-use (issue 38, class 4a)" crash_looping_pod_keeps_its_directory
  scenario "a pod bound to the node during a cleanup's walk stops it: its files and the rest of the tree stay (issue 38, class 3)" newcomer_during_the_walk_stops_it
  scenario "a pod of 1,000 mounts x 400 processes on the node: another pod's cleanup is judged same in time and empties its directory (issue 38, class 5)" hostile_mount_table_leaves_judgements_in_time
}
