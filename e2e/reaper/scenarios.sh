# The scenarios of the reaper's e2e suite, sourced by e2e/reaper/run.sh once the cluster,
# the webhook and the reaper (--delay 2s) run. Each creates its own host directories under
# $HOST/scratch/<name> (files, dot-files, a nested directory) and pods mounting
# /scratch/<name>. Outcomes are polled with a deadline (wait_for); where something must
# NOT happen, the scenario first waits for a positive sign that the reaper has decided
# (decided(): a later marker directory emptied, or pending_directories going back to 0).
# shellcheck shell=bash

now() { date +%s.%N; }
elapsed_at_least() { awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { exit !(b - a >= d) }'; } # t0 t1 seconds
# Holds `$2...` for $1 seconds, failing as soon as it does not hold.
holds_for() {
  local deadline
  deadline=$(($(date +%s) + $1))
  shift
  while (($(date +%s) < deadline)); do
    "$@" >/dev/null 2>&1 || return 1
    sleep 0.2
  done
}
quiet() { "$@" >/dev/null 2>&1; }
pod_exists() { k get pod -n e2e "$1" >/dev/null 2>&1; }
pod_gone() { ! pod_exists "$1"; }
not_recorded() { ! record_of "$1"; }
create_pod() { # name host-path [annotations]
  kc create -f - <<<"$(pod "$@")"
  expect "pod $1 created" test "$STATUS" -eq 0
}

# 1. The common case.
emptied() {
  local ev_ScratchDirectoryEmptied
  ev_ScratchDirectoryEmptied=$(node_event_count ScratchDirectoryEmptied)
  local name=s1-gone dir="$HOST/scratch/s1-gone"
  fill "$dir"
  local emptied_before removed_before t0 t1
  emptied_before=$(rmetric "${P}directories_emptied_total")
  removed_before=$(rmetric "${P}entries_removed_total")
  create_pod $name /scratch/$name
  expect "the webhook injected it (status annotation, prestop-clean hook)" is_injected $name
  expect "the reaper recorded its directory in the state file" wait_for 30 record_of $name
  t0=$(now)
  force_delete $name
  expect "the pod is gone" wait_for 30 pod_gone $name
  expect "its directory is emptied" wait_for 60 is_emptied "$dir"
  t1=$(now)
  expect "not before the 2 s delay (took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s)" \
    elapsed_at_least "$t0" "$t1" 2
  expect "the directory itself is kept" test -d "$dir"
  expect "a ScratchDirectoryEmptied Event on node-a in default (counts and reasons only)" \
    wait_for 30 more_node_events ScratchDirectoryEmptied "$ev_ScratchDirectoryEmptied"
  expect "no Node Event names $name" no_node_event_names $name
  expect "directories_emptied +1" test "$(rmetric "${P}directories_emptied_total")" -eq $((emptied_before + 1))
  expect "entries_removed +7 (3 files, 2 dot-files, 2 directories)" \
    test "$(rmetric "${P}entries_removed_total")" -eq $((removed_before + 7))
  expect "no longer recorded" wait_for 10 not_recorded $name
}

# 1b. A pod the kubelet ends without a deletion (issue 38, class 1): a node-pressure
# eviction, a node shutdown, activeDeadlineSeconds. The kubelet writes DisruptionTarget
# first and holds the phase at Running until the containers stopped, then Failed; the
# object stays (a Job keeps failed pods). Replayed here on the pod's status as the kubelet
# writes it; e2e/node shows the kubelet itself do it.
ended_in_place() {
  local name=s1-evicted dir="$HOST/scratch/s1-evicted"
  local app='"name": "app", "image": "busybox:1.37", "imageID": "", "restartCount": 0'
  fill "$dir"
  create_pod $name /scratch/$name
  expect "the webhook injected it" is_injected $name
  expect "the reaper recorded its directory" wait_for 30 record_of $name
  replay_status $name "{\"phase\": \"Running\", \"conditions\": [{\"type\": \"DisruptionTarget\", \"status\": \"True\", \"reason\": \"TerminationByKubelet\"}], \"containerStatuses\": [{$app, \"ready\": true, \"state\": {\"running\": {}}}]}"
  expect "kept while its container still runs (the eviction under way)" holds_for 5 untouched "$dir"
  replay_status $name "{\"phase\": \"Failed\", \"reason\": \"Evicted\", \"containerStatuses\": [{$app, \"ready\": false, \"state\": {\"terminated\": {\"exitCode\": 137}}}]}"
  expect "its directory is emptied while the ended pod is still listed" wait_for 60 is_emptied "$dir"
  expect "the pod object is still there" pod_exists $name
  expect "no longer recorded, and not again by the pod's later updates" wait_for 10 not_recorded $name
  k label pod -n e2e $name e2e.prestop-injector.io/touched=yes >/dev/null
  expect "a later update of the ended pod records nothing again" holds_for 4 not_recorded $name
  force_delete $name
}

# 2. Another pod using the directory, /scratch above it, or a directory below it.
still_used() {
  local ev_ScratchDirectoryEmptied
  ev_ScratchDirectoryEmptied=$(node_event_count ScratchDirectoryEmptied)
  local name=s2-shared dir="$HOST/scratch/s2-shared" off='"prestop-injector.io/inject": "false"'
  fill "$dir"
  create_pod $name /scratch/$name
  create_pod s2-same /scratch/$name "$off"
  expect "the webhook injected $name" is_injected $name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  expect "$name is gone" wait_for 30 pod_gone $name
  # The same directory, still mounted by s2-same.
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "untouched while s2-same mounts the same directory" untouched "$dir"
  expect "still recorded" record_of $name

  # A directory below it: s2-child comes, then s2-same goes (which schedules it again).
  create_pod s2-child /scratch/$name/nested "$off"
  expect "the reaper knows s2-child (pods gauge)" wait_for 30 rmetric_is "${P}pods" 2
  force_delete s2-same
  expect "s2-same is gone" wait_for 30 pod_gone s2-same
  expect "the reaper decided again (a later marker emptied)" decided
  expect "untouched while s2-child mounts a directory below it" untouched "$dir"

  # /scratch itself, above every directory: no marker can be emptied now, so the proof is
  # the pending gauge: the directory is pending once s2-child goes (its clock started),
  # and back to 0 only after take_due has decided on it, which it does at the delay.
  create_pod s2-parent /scratch "$off"
  expect "the reaper knows s2-parent" wait_for 30 rmetric_is "${P}pods" 2
  force_delete s2-child
  expect "pending once s2-child is gone" wait_for 30 rmetric_is "${P}pending_directories" 1
  expect "and decided on at the delay (pending 0)" wait_for 30 rmetric_is "${P}pending_directories" 0
  expect "untouched while s2-parent mounts /scratch" untouched "$dir"
  expect "still recorded" record_of $name

  # The last user goes: emptied.
  force_delete s2-parent
  expect "emptied once no pod uses it" wait_for 60 is_emptied "$dir"
  expect "ScratchDirectoryEmptied for $name" wait_for 30 more_node_events ScratchDirectoryEmptied "$ev_ScratchDirectoryEmptied"
  expect "no Node Event names $name" no_node_event_names $name
}

# 3. Reconcile from the state file.
reconcile() {
  local ev_ScratchDirectoryEmptied
  ev_ScratchDirectoryEmptied=$(node_event_count ScratchDirectoryEmptied)
  local name=s3-offline dir="$HOST/scratch/s3-offline"
  fill "$dir"
  create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  expect "reaper stopped" stop_reaper
  force_delete $name
  expect "the pod is gone while the reaper is down" wait_for 30 pod_gone $name
  expect "untouched while the reaper is down" untouched "$dir"
  expect "the state file still records it" record_of $name
  expect "reaper started again" start_reaper
  expect "emptied on reconcile" wait_for 60 is_emptied "$dir"
  expect "ScratchDirectoryEmptied for $name" wait_for 30 more_node_events ScratchDirectoryEmptied "$ev_ScratchDirectoryEmptied"
  expect "no Node Event names $name" no_node_event_names $name
  expect "the start logged its restored record" grep -q 'restored=[1-9]' "$REAPER_LOG"
}

# 4. No status annotation: nothing to record, nothing to empty.
not_injected() {
  local name=s4-plain dir="$HOST/scratch/s4-plain"
  fill "$dir"
  create_pod $name /scratch/$name '"prestop-injector.io/cleanup": auto, "prestop-injector.io/inject": "false"'
  expect "not injected (inject: \"false\")" test "$(k get pod -n e2e $name -o json | jq '.metadata.annotations | has("prestop-injector.io/status")')" = false
  expect "the reaper knows it" wait_for 30 rmetric_is "${P}pods" 1
  force_delete $name
  expect "the pod is gone" wait_for 30 pod_gone $name
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "untouched" untouched "$dir"
  expect "never recorded" not_recorded $name
}

# 5. --dry-run reports and touches nothing.
dry_run() {
  local ev_ScratchDirectoryWouldEmpty
  ev_ScratchDirectoryWouldEmpty=$(node_event_count ScratchDirectoryWouldEmpty)
  local emptied_events
  emptied_events=$(node_event_count ScratchDirectoryEmptied)
  local name=s5-dry dir="$HOST/scratch/s5-dry" before
  fill "$dir"
  expect "reaper restarted with --dry-run" restart_reaper --dry-run
  before=$(rmetric "${P}directories_would_empty_total")
  create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  expect "directories_would_empty +1" wait_for 60 rmetric_is "${P}directories_would_empty_total" $((before + 1))
  expect "a ScratchDirectoryWouldEmpty Event (counts and reasons only)" wait_for 30 more_node_events ScratchDirectoryWouldEmpty "$ev_ScratchDirectoryWouldEmpty"
  expect "no Node Event names $name" no_node_event_names $name
  expect "untouched" untouched "$dir"
  expect "nothing emptied in dry-run" rmetric_is "${P}directories_emptied_total" 0
  # The report closes the record: a reaper without --dry-run does not empty it later.
  expect "reaper restarted without --dry-run" restart_reaper
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "still untouched" untouched "$dir"
  # Node Events name no directory (class 11), so count them: the one Event since the
  # start is the marker's that `decided` emptied, none is s5-dry's.
  expect "the marker's Event arrives" wait_for 30 more_node_events ScratchDirectoryEmptied "$emptied_events"
  expect "and no other Event says a directory was emptied" \
    test "$(node_event_count ScratchDirectoryEmptied)" = "$((emptied_events + 1))"
}

# 6. The API server goes away and comes back.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
apiserver_down() {
  local stays=s6-stays down=s6-down after=s6-after restarts ticks t_del t_stop
  fill "$HOST/scratch/$stays"
  fill "$HOST/scratch/$down"
  fill "$HOST/scratch/$after"
  create_pod $stays /scratch/$stays
  create_pod $down /scratch/$down
  expect "both recorded" wait_for 30 record_of $down
  expect "both recorded" wait_for 30 record_of $stays
  # A longer delay, so the API server can be down across the moment s6-down is due.
  expect "reaper restarted with --delay 8s" restart_reaper --delay 8s
  restarts=$(rmetric "${P}watch_restarts_total")
  force_delete $down
  t_del=$(date +%s)
  expect "s6-down pending" wait_for 30 rmetric_is "${P}pending_directories" 1
  ticks=$(cpu_ticks "$REAPER_PID")
  expect "kube-apiserver stopped" stop_apiserver
  t_stop=$(date +%s)
  expect "watch_restarts increased" wait_for 60 rmetric_above "${P}watch_restarts_total" "$restarts"
  expect "synced 0" wait_for 10 rmetric_is "${P}synced" 0
  # The negative is about time by nature: s6-down is due 8 s after its deletion. Watched
  # until 3 s past that, it stays untouched and still pending: the reaper holds it.
  local hold=$((t_del + 11 - $(date +%s)))
  expect "the watch failed before s6-down was due (${hold} s of the hold left)" test "$hold" -gt 3
  expect "untouched past its due time while the API server is down" holds_for $((hold > 0 ? hold : 0)) untouched "$HOST/scratch/$down"
  expect "still pending at the end" rmetric_is "${P}pending_directories" 1
  expect "kube-apiserver started again (same etcd)" start_apiserver
  log "apiserver_down: the reaper used $(($(cpu_ticks "$REAPER_PID") - ticks)) CPU ticks (1/100 s) while the API server was down for $(($(date +%s) - t_stop)) s"
  expect "in sync again" wait_for 60 rmetric_is "${P}synced" 1
  expect "s6-down emptied once in sync" wait_for 30 is_emptied "$HOST/scratch/$down"
  expect "watch_restarts shows the failure" rmetric_above "${P}watch_restarts_total" "$restarts"
  expect "s6-stays still exists" pod_exists $stays
  create_pod $after /scratch/$after
  expect "s6-after recorded" wait_for 30 record_of $after
  force_delete $after
  expect "s6-after, deleted after the restart, emptied" wait_for 60 is_emptied "$HOST/scratch/$after"
  expect "s6-stays untouched (no spurious deletion)" untouched "$HOST/scratch/$stays"
  expect "s6-stays still recorded" record_of $stays
  expect "reaper back to --delay 2s" restart_reaper
}

# 7a. The target replaced by a symlink to a canary after the pod is gone.
symlink_swap() {
  local ev_ScratchDirectoryRefused
  ev_ScratchDirectoryRefused=$(node_event_count ScratchDirectoryRefused)
  local name=s7-link dir="$HOST/scratch/s7-link" canary="$WORK/canary" before
  fill "$dir"
  fill "$canary"
  # Refused before any walk since issue 32: a symlink where the directory was cannot be
  # placed on the node, so it is in_use_unknown, never "not in use".
  before=$(rmetric "${P}refusals_total{reason=\"in_use_unknown\"}")
  create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  # Within the 2 s delay: the directory moved aside, a symlink to the canary in its place.
  mv "$dir" "$dir.orig" && ln -s "$canary" "$dir"
  expect "refusals{in_use_unknown} +1" wait_for 60 rmetric_is "${P}refusals_total{reason=\"in_use_unknown\"}" $((before + 1))
  expect "a ScratchDirectoryRefused Event (counts and reasons only)" wait_for 30 more_node_events ScratchDirectoryRefused "$ev_ScratchDirectoryRefused"
  expect "no Node Event names $name" no_node_event_names $name
  expect "the canary is untouched" untouched "$canary"
  expect "the swap came before the reaper's walk (the moved directory is untouched)" untouched "$dir.orig"
  expect "the symlink is still there" test -L "$dir"
  expect "the reaper said why" grep -Eq 's7-link.*(cannot be resolved on the node|symlink)' "$REAPER_LOG"
}

# 7b. A forged pod: our status annotation and our program's exact hook (with --host)
# written by hand, on a directory below /scratch that the webhook's rule allows, created
# while no webhook sees it (as in a namespace the webhook does not serve). It carries no
# seal (docs/REAPER.md#the-seal): refused as unsealed, never recorded, never emptied.
forged() {
  local ev_ScratchDirectoryRefused
  ev_ScratchDirectoryRefused=$(node_event_count ScratchDirectoryRefused)
  local name=s7-forged dir="$HOST/scratch/s7-forged" before mwc
  fill "$dir"
  before=$(rmetric "${P}refusals_total{reason=\"unsealed\"}")
  mwc=$(k get mutatingwebhookconfigurations -o name)
  expect "the mutating webhook configuration deleted" quiet k delete $mwc
  kc create -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: e2e
  annotations: {prestop-injector.io/status: '{"version":1,"containers":["app"],"grace":40}'}
spec:
  nodeName: $NODE
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.37
    command: [sleep, "3600"]
    lifecycle: {preStop: {exec: {command: [/.prestop-injector/prestop-clean, hook, --target, /data, --host, /scratch/$name]}}}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    hostPath: {path: /scratch/$name}
EOF
  expect "the forged pod is stored as written" test "$STATUS" -eq 0
  expect "refusals{unsealed} +1" wait_for 30 rmetric_is "${P}refusals_total{reason=\"unsealed\"}" $((before + 1))
  expect "a ScratchDirectoryRefused Event (counts and reasons only)" wait_for 30 more_node_events ScratchDirectoryRefused "$ev_ScratchDirectoryRefused"
  expect "no Node Event names $name" no_node_event_names $name
  expect "the log names the pod and why" grep -q "of pod e2e/$name cannot be proven injected by the webhook" "$REAPER_LOG"
  expect "never recorded" not_recorded $name
  expect "the webhook configurations applied again" apply_webhook_configs cluster-wide
  force_delete $name
  expect "the pod is gone" wait_for 30 pod_gone $name
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "its directory is untouched" untouched "$dir"
  expect "never recorded" not_recorded $name
}

# The seal of a pod the webhook injected.
has_seal() { # namespace pod
  k get pod -n "$1" "$2" -o json |
    jq -e '.metadata.annotations["prestop-injector.io/seal"] // "" | startswith("v1:")' >/dev/null
}
# A stored pod as a new manifest: its annotations (status, seal) and spec, another name
# and namespace.
copy_of() { # name namespace < pod JSON
  jq --arg n "$1" --arg ns "$2" \
    '{apiVersion, kind, metadata: {name: $n, namespace: $ns, annotations: .metadata.annotations}, spec}'
}
# A pod the webhook injected and sealed, its JSON kept in $WORK/<name>.json, then deleted
# and its directory emptied by the reaper (the seal is good), and filled again.
sealed_then_gone() { # name
  local dir="$HOST/scratch/$1"
  fill "$dir"
  create_pod "$1" "/scratch/$1"
  expect "the webhook injected and sealed $1" has_seal e2e "$1"
  expect "recorded" wait_for 30 record_of "$1"
  k get pod -n e2e "$1" -o json >"$WORK/$1.json"
  force_delete "$1"
  expect "$1 is gone" wait_for 30 pod_gone "$1"
  expect "its directory emptied (the webhook's own pod, sealed)" wait_for 60 is_emptied "$dir"
  fill "$dir"
}

# 7c. A sealed pod copied, seal and all, into another namespace while no webhook sees it:
# the seal binds the namespace, so the copy is refused as seal_mismatch.
copied_elsewhere() {
  local ev_ScratchDirectoryRefused
  ev_ScratchDirectoryRefused=$(node_event_count ScratchDirectoryRefused)
  local src=s7-sealed name=s7-copy dir="$HOST/scratch/s7-sealed" before mwc
  sealed_then_gone $src
  before=$(rmetric "${P}refusals_total{reason=\"seal_mismatch\"}")
  k get namespace e2e-other >/dev/null 2>&1 || k create namespace e2e-other >/dev/null
  mwc=$(k get mutatingwebhookconfigurations -o name)
  expect "the mutating webhook configuration deleted" quiet k delete $mwc
  kc create -f - <<<"$(copy_of $name e2e-other <"$WORK/$src.json")"
  expect "the copy is stored" test "$STATUS" -eq 0
  expect "the copy carries the seal of $src" has_seal e2e-other $name
  expect "refusals{seal_mismatch} +1" wait_for 30 rmetric_is "${P}refusals_total{reason=\"seal_mismatch\"}" $((before + 1))
  expect "a ScratchDirectoryRefused Event (counts and reasons only)" wait_for 30 more_node_events ScratchDirectoryRefused "$ev_ScratchDirectoryRefused"
  expect "no Node Event names $name" no_node_event_names $name
  expect "the log names the pod and why" grep -q "of pod e2e-other/$name has a prestop-injector.io/seal that none" "$REAPER_LOG"
  expect "never recorded" not_recorded $name
  expect "the webhook configurations applied again" apply_webhook_configs cluster-wide
  k delete pod -n e2e-other $name --grace-period=0 --force --wait=false >/dev/null 2>&1
  copy_gone() { ! k get pod -n e2e-other s7-copy >/dev/null 2>&1; }
  expect "the copy is gone" wait_for 30 copy_gone
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "the directory is untouched" untouched "$dir"
  expect "never recorded" not_recorded $name
}

# 7d. A sealed pod copied in its own namespace with inject: "false" added: the webhook
# leaves an opted-out pod alone, seal included, and that seal verifies; the reaper honours
# the opt-out and never records or empties it.
copied_opted_out() {
  local src=s7-src name=s7-optout dir="$HOST/scratch/s7-src"
  sealed_then_gone $src
  kc create -f - <<<"$(copy_of $name e2e <"$WORK/$src.json" |
    jq '.metadata.annotations["prestop-injector.io/inject"] = "false"')"
  expect "the copy is stored" test "$STATUS" -eq 0
  expect "the webhook left it as written: the seal" has_seal e2e $name
  expect "and our hook" is_injected $name
  # The marker is created after the copy and the watch is ordered: once the marker's
  # directory is emptied, the reaper has seen the copy.
  expect "the reaper decided on everything created before a later marker" decided
  expect "never recorded" not_recorded $name
  force_delete $name
  expect "the pod is gone" wait_for 30 pod_gone $name
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "the directory is untouched" untouched "$dir"
  expect "never recorded" not_recorded $name
}

# 8. "In use" means any pod bound to the node, running or not (issue 26, item 3): a pod
# that no kubelet runs (pending here; crash-looping or finished alike: no process, no
# mountinfo) whose claim is bound to a hostPath PersistentVolume of the directory. No pod
# spec names the directory; the reaper reads claim and volume from the API server.
pv_pending() {
  local name=s8-pv dir="$HOST/scratch/s8-pv" off='"prestop-injector.io/inject": "false"' before
  fill "$dir"
  before=$(rmetric "${P}refusals_total{reason=\"in_use\"}")
  # volumeName pre-binds the claim (no PV controller runs here; the reaper counts a claim
  # with a volume name as bound, as the kubelet would mount it).
  kc create -f - <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: s8-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: /scratch/s8-pv, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: s8-claim, namespace: e2e}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: s8-pv
  resources: {requests: {storage: 1Gi}}
EOF
  expect "the PV and its claim created" test "$STATUS" -eq 0
  kc create -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: s8-user
  namespace: e2e
  annotations: {$off}
spec:
  nodeName: $NODE
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.37
    command: [sleep, "3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: s8-claim}
EOF
  expect "s8-user created (bound to node-a, never started)" test "$STATUS" -eq 0
  # Created after s8-user: once its record is written, the watch has delivered s8-user.
  create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  expect "$name is gone" wait_for 30 pod_gone $name
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "untouched while s8-user's claim is bound to a PV of that directory" untouched "$dir"
  expect "refusals{in_use} went up" rmetric_above "${P}refusals_total{reason=\"in_use\"}" "$before"
  expect "still recorded" record_of $name
  expect "the log names s8-user and its volume" grep -q 'pod e2e/s8-user .*PersistentVolume s8-pv' "$REAPER_LOG"
  force_delete s8-user
  expect "emptied once s8-user is gone" wait_for 60 is_emptied "$dir"
  quiet k delete pvc -n e2e s8-claim --wait=false
  quiet k delete pv s8-pv --wait=false
}

# 9. A pod with no process whose hostPath is a symlink on the node to the directory,
# absolute as on a real node: resolved in the node's root ($HOST), never the reaper's /.
node_symlink() {
  local name=s9-link dir="$HOST/scratch/s9-link" off='"prestop-injector.io/inject": "false"' before
  fill "$dir"
  mkdir -p "$HOST/links"
  ln -s /scratch/s9-link "$HOST/links/s9"
  before=$(rmetric "${P}refusals_total{reason=\"in_use\"}")
  # Created before the injected pod: once that one is recorded, the reaper knows s9-user.
  create_pod s9-user /links/s9 "$off"
  create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  expect "$name is gone" wait_for 30 pod_gone $name
  expect "the reaper decided on everything deleted before a later marker" decided
  expect "untouched while s9-user's /links/s9 leads there" untouched "$dir"
  expect "refusals{in_use} went up" rmetric_above "${P}refusals_total{reason=\"in_use\"}" "$before"
  expect "the log names s9-user and its hostPath" grep -q 'pod e2e/s9-user .*hostPath /links/s9' "$REAPER_LOG"
  force_delete s9-user
  expect "emptied once s9-user is gone" wait_for 60 is_emptied "$dir"
  expect "the symlink stays" test -L "$HOST/links/s9"
}

# 10. Another tenant's 0700 directory inside the directory of a uid-1000 pod (issue 26):
# the pod's own hook could not enter it, and neither may the reaper, which walks as the
# pod's user. The pod's own files go; the other tenant's stay; the Event says survivors.
other_tenant() {
  local ev_ScratchDirectoryIncomplete
  ev_ScratchDirectoryIncomplete=$(node_event_count ScratchDirectoryIncomplete)
  local name=s8-tenant dir="$HOST/scratch/s8-tenant" before
  fill "$dir"
  chown -R 1000:1000 "$dir"
  mkdir "$dir/other-tenant"
  echo theirs >"$dir/other-tenant/secret"
  chown -R 2000:2000 "$dir/other-tenant"
  chmod 0700 "$dir/other-tenant"
  before=$(rmetric "${P}refusals_total{reason=\"survivors\"}")
  POD_USER=1000:1000 create_pod $name /scratch/$name
  expect "the webhook injected it" is_injected $name
  expect "recorded with its user, uid 1000" wait_for 30 jq -e --arg n $name \
    '[.directories[].pods[] | select(.name == $n) | .user.known.uid] == [1000]' "$REAPER_STATE"
  force_delete $name
  expect "the pod is gone" wait_for 30 pod_gone $name
  expect "refusals{survivors} +1" wait_for 60 rmetric_is "${P}refusals_total{reason=\"survivors\"}" $((before + 1))
  expect "the pod's own files are gone" test "$(ls -A "$dir")" = other-tenant
  expect "the other tenant's directory and file are untouched" test "$(cat "$dir/other-tenant/secret")" = theirs
  expect "a ScratchDirectoryIncomplete Event (counts and reasons only)" \
    wait_for 30 more_node_events ScratchDirectoryIncomplete "$ev_ScratchDirectoryIncomplete"
  expect "the Event says survivors" test "$(k get events -n default --field-selector \
    "involvedObject.kind=Node,involvedObject.name=$NODE,reason=ScratchDirectoryIncomplete" -o json |
    jq '[.items[] | select(.message | contains("(survivors)"))] | length')" -gt 0
  expect "no Node Event names $name" no_node_event_names $name
  expect "the reaper's log names the survivor" grep -q 's8-tenant/other-tenant permission denied' "$REAPER_LOG"
  expect "no longer recorded" wait_for 10 not_recorded $name
}

# 11. No runAsUser/runAsGroup and no kubelet to report the user (the image's USER
# decides): refused, untouched.
unknown_user() {
  local ev_ScratchDirectoryRefused
  ev_ScratchDirectoryRefused=$(node_event_count ScratchDirectoryRefused)
  local name=s9-nouser dir="$HOST/scratch/s9-nouser" before
  fill "$dir"
  before=$(rmetric "${P}refusals_total{reason=\"user_unknown\"}")
  POD_USER=none create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  expect "refusals{user_unknown} +1" wait_for 60 rmetric_is "${P}refusals_total{reason=\"user_unknown\"}" $((before + 1))
  expect "a ScratchDirectoryRefused Event (counts and reasons only)" wait_for 30 more_node_events ScratchDirectoryRefused "$ev_ScratchDirectoryRefused"
  expect "no Node Event names $name" no_node_event_names $name
  expect "untouched" untouched "$dir"
  expect "the log says what to set" grep -q 'set both in its securityContext' "$REAPER_LOG"
  expect "no longer recorded" wait_for 10 not_recorded $name
}

# 12. Issue 32, finding 3: a pod bound to the node while the walk runs. Its container may
# live less than one look of the guard (or, here, never start: no kubelet), so only the
# API says it is there; the walk's own watch makes the guard see it from its binding on.
walk_meets_a_new_pod() {
  local name=s10-walk dir="$HOST/scratch/s10-walk" off='"prestop-injector.io/inject": "false"'
  local left
  fill "$dir"
  # Enough entries that the walk lasts seconds (about 1.3 s per 200,000 here).
  mkdir -p "$dir/many"
  (cd "$dir/many" && seq 1 600000 | xargs touch)
  create_pod $name /scratch/$name
  expect "recorded" wait_for 30 record_of $name
  force_delete $name
  expect "the walk started (the state file names it)" wait_for 60 jq -e '.walking' "$REAPER_STATE"
  create_pod s10-late /scratch/$name "$off"
  expect "the walk is stopped by the pod bound during it" \
    wait_for 30 grep -q "stopped emptying /scratch/$name.*s10-late" "$REAPER_LOG"
  left=$(find "$dir/many" -mindepth 1 -maxdepth 1 | head -1000 | wc -l)
  expect "the rest of the directory survives ($left of the first 1,000 entries left)" test "$left" -gt 0
  expect "still recorded" record_of $name
  force_delete s10-late
  expect "emptied once s10-late is gone" wait_for 120 is_emptied "$dir"
}

# 11. Issue 31, class 3, against the real API server: a pod the kubelet can restart in
# place (restartPolicy OnFailure) is emptied by its cleanup sidecar only on the node
# agent's word that it is ending. `prestop-injector node-agent` runs as node-a's agent
# (--host-root $HOST); the sidecar (`prestop-clean sidecar --restartable`) runs in a
# cgroup named as the kubelet names that pod's (`…/pod<uid>`), so the agent knows the
# pod from the kernel. The kubelet's order is replayed on the pod's status (there is no
# kubelet here): a sandbox recreation (every container stopped, the pod Running and not
# deleted) and the restart in place after it remove nothing; the deletion, begun while a
# finalizer holds the object, lets the next SIGTERM empty the directory. Each life's
# report is an Event on the pod (issue 39): refused twice, then emptied.
RESTART_CGROUP=
restart_cgroup_remove() {
  [[ -n "$RESTART_CGROUP" ]] || return 0
  local top=${RESTART_CGROUP%%/kubepods/*}
  # Leaves first: a cgroup is removed only when empty, from the bottom up.
  find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null
  RESTART_CGROUP=
}
# One life of the sidecar: started in the pod's cgroup, SIGTERM once ready (as the kubelet
# stops it), its lines in $WORK/s11-sidecar.log. DEADLINE: its --deadline, if any.
restart_sidecar_life() { # dir host-path socket
  local cleaner pid deadline=()
  cleaner="$(dirname "$BIN")/prestop-clean"
  [[ -z "${DEADLINE:-}" ]] || deadline=(--deadline "$DEADLINE")
  : >"$WORK/s11-sidecar.log"
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$RESTART_CGROUP" \
    "$cleaner" sidecar "${deadline[@]}" --node-agent "$3" --restartable --target "$1" --host "$2" --whole-filesystem \
    2>"$WORK/s11-sidecar.log" &
  pid=$!
  wait_for 10 grep -q "sidecar ready" "$WORK/s11-sidecar.log" || {
    kill "$pid"
    wait "$pid"
    return 1
  }
  kill -TERM "$pid"
  wait "$pid"
}
# The API server's own count of LIST requests for pods, every client together.
pod_lists() {
  k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="pods"/ && /verb="LIST"/ &&
    !/subresource="[a-z]/ { n += $NF } END { print n + 0 }'
}
# Issue 39: the cleanup's lines as an Event on the pod the agent knows from the kernel
# (the sidecar's cgroup), written to the real API server.
pod_event_says() { # pod reason text
  k get events -n e2e --field-selector "involvedObject.name=$1,reason=$2" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}' | grep -qF -- "$3"
}
replay_status() { # pod json-status
  k patch pod -n e2e "$1" --subresource=status --type=merge -p "{\"status\": $2}" >/dev/null
}
restartable_pod_ends_on_the_nodes_word() {
  local name=s11-restart dir="$HOST/scratch/s11-restart" sock="$WORK/agent/agent.sock" uid base agent_pid
  local app='"name": "app", "image": "busybox:1.37", "imageID": ""'
  fill "$dir"
  kc create -f - <<<"$(POD_RESTART_POLICY=OnFailure POD_FINALIZER=e2e.prestop-injector.io/hold POD_USER=none \
    pod $name /scratch/$name '"prestop-injector.io/inject": "false"')"
  expect "pod $name created" test "$STATUS" -eq 0
  uid=$(k get pod -n e2e "$name" -o jsonpath='{.metadata.uid}')
  for base in /sys/fs/cgroup/unified /sys/fs/cgroup/pids /sys/fs/cgroup; do
    [[ -n "$uid" && -f "$base/cgroup.procs" ]] || continue
    if mkdir -p "$base/prestop-e2e-$$/kubepods/besteffort/pod$uid" 2>/dev/null; then
      RESTART_CGROUP="$base/prestop-e2e-$$/kubepods/besteffort/pod$uid"
      break
    fi
  done
  if [[ -z "$RESTART_CGROUP" ]]; then
    if [[ "${PRESTOP_REQUIRE_TOOLS:-}" == 1 ]]; then
      FAILS+=("a pod's cgroup can be created (root, a writable cgroup hierarchy)")
    else
      skip "a restartable pod's sidecar" "no writable cgroup hierarchy"
    fi
    k patch pod -n e2e "$name" --type=json -p '[{"op": "remove", "path": "/metadata/finalizers"}]' >/dev/null 2>&1
    force_delete "$name"
    return
  fi
  mkdir -p "$WORK/agent"
  "$BIN" node-agent --node-name "$NODE" --host-root "$HOST" --socket "$sock" --allow /scratch \
    >>"$WORK/agent.log" 2>&1 &
  agent_pid=$!
  PIDS+=("$agent_pid")
  expect "prestop-injector node-agent serves, asking the API server" \
    wait_for 20 grep -q "whether a pod is ending: the API server's pods of node $NODE" "$WORK/agent.log"
  expect "and says at start that the API server lists its node's pods" \
    wait_for 20 grep -q "the API server lists the pods of node $NODE" "$WORK/agent.log"

  # Issue 38, finding 6: the agent answers from its watch; no question LISTs the pods.
  local lists_before
  lists_before=$(pod_lists)
  # The sandbox recreation: the app stopped (exit 137), the pod Running, not deleted.
  replay_status "$name" "{\"phase\": \"Running\", \"containerStatuses\": [{$app, \"ready\": false, \"restartCount\": 0, \"state\": {\"terminated\": {\"exitCode\": 137}}}]}"
  expect "the sidecar's first life ends" restart_sidecar_life "$dir" "/scratch/$name" "$sock"
  expect "its SIGTERM in a sandbox recreation removes nothing: the agent says the pod is not ending ($(tail -1 "$WORK/s11-sidecar.log" | cut -c1-300))" \
    grep -q "the node agent says: pod e2e/$name is neither being deleted nor finished" "$WORK/s11-sidecar.log"
  expect "every file stays" untouched "$dir"
  # Issue 39: not being deleted, the pod's object says no end: the deadline stands.
  expect "the agent cannot say when a pod not being deleted is killed, and the sidecar says so" \
    grep -q "the node agent cannot say when the pod's grace period ends (the pod is not being deleted" "$WORK/s11-sidecar.log"
  expect "its report is a Warning PrestopCleanupRefused Event on the pod, with the agent's sentence" \
    wait_for 10 pod_event_says "$name" PrestopCleanupRefused "Warning skipped $dir: "
  # Started again in place (restartCount 1), and stopped again by another recreation.
  replay_status "$name" "{\"containerStatuses\": [{$app, \"ready\": true, \"restartCount\": 1, \"state\": {\"running\": {}}}]}"
  expect "the sidecar's second life ends" restart_sidecar_life "$dir" "/scratch/$name" "$sock"
  expect "a restart in place removes nothing either" untouched "$dir"
  expect "the agent answered not-ending twice" \
    test "$(grep -c "not-ending: pod e2e/$name is neither being deleted nor finished" "$WORK/agent.log")" -eq 2

  # The pod's deletion begins (the finalizer keeps the object, as a grace period does),
  # with 5 s of grace: the app containers used the rest of what the webhook planned, so
  # the kubelet would kill the sidecar 5 s on, well before its --deadline of 28 (issue 39).
  k delete pod -n e2e "$name" --grace-period=5 --wait=false >/dev/null
  DEADLINE=28 expect "the sidecar's last life ends" restart_sidecar_life "$dir" "/scratch/$name" "$sock"
  expect "once the deletion began, its SIGTERM empties the directory ($(tail -1 "$WORK/s11-sidecar.log" | cut -c1-300))" \
    is_emptied "$dir"
  expect "the sidecar's deadline is the kubelet's kill less 2 s, from the agent, not its 28 s ($(grep 'grace period ends' "$WORK/s11-sidecar.log" | cut -c1-300))" \
    grep -qE "the pod's grace period ends in [3-5]\.[0-9] s \(the node agent says\): stopping [1-3]\.[0-9] s after the signal, not 28 s" "$WORK/s11-sidecar.log"
  # Each question used to LIST the node's pods at least once (three or more here); the
  # watch lists once, when it starts. Only another client's LIST (a reaper walk's own
  # watch) can count now.
  expect "three questions, fewer than three LISTs of pods (the API server counted $lists_before, then $(pod_lists))" \
    test "$(($(pod_lists) - lists_before))" -lt 3
  expect "and its report is a Normal PrestopCleanup Event on the pod" \
    wait_for 10 pod_event_says "$name" PrestopCleanup "Normal emptied $dir: "
  expect "the agent counted three recorded reports" \
    test "$(grep -c '^.*: recorded \[on the node: report ' "$WORK/agent.log")" -eq 3

  kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  restart_cgroup_remove
  k patch pod -n e2e "$name" --type=json -p '[{"op": "remove", "path": "/metadata/finalizers"}]' >/dev/null 2>&1
  force_delete "$name"
}
