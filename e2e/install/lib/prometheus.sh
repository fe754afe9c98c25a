# Issue 33: Debian's real Prometheus (the `prometheus` package CI installs) scrapes the
# installed webhook, reaper and node agent and loads the chart's rule file. Every dashboard
# query and alert expression must evaluate and every panel have series
# (lib/prometheus_check.py). Listens on 127.0.0.1 only; the pods' IPs are reachable from
# the host, the bridge's gateway. Sourced by run.sh; uses its WORK, NS and the scenario
# helpers.
#
# Issue 39: it runs from the install to the end of the pass, so it watches the suite's own
# rollout and certificate rotation (no alert may be pending or firing then), and it finds
# the pods as the operator's PodMonitors do, from a watch of the API server, under the job
# names the alerts' matchers expect: a pod rolled out is dropped and its successor scraped
# without a restart. Debian's Prometheus is built without kubernetes_sd_configs, so
# lib/pod_sd.py keeps file_sd files from `kubectl get pods --watch` instead.
PROM_PID=
PROM_SD_PID=
PROM_PORT=
# From when every target was up and the rules had evaluated them (before it, `absent()`
# of a series not yet scraped is no finding): alerts are judged from then on.
PROM_SINCE=

prometheus_stop() {
  local pid
  for pid in "$PROM_PID" "$PROM_SD_PID"; do
    [[ -n "$pid" ]] || continue
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  PROM_PID= PROM_SD_PID=
}

prom_api() { curl -sf --noproxy '*' "http://127.0.0.1:$PROM_PORT/api/v1/$1"; }
# The number of Running pods' targets of a job that are up.
prom_up() { # job
  prom_api "query?query=$(jq -rn --arg j "$1" '"count(up{job=\"\($j)\"} == 1)" | @uri')" |
    jq -r '.data.result[0].value[1] // "0"'
}

# One scrape job: the targets lib/pod_sd.py keeps in file number INDEX.
prom_pod_job() { # job index
  echo "- {job_name: '$1', file_sd_configs: [{files: ['$WORK/prometheus/sd/$2.json']}]}"
}

prometheus_start() {
  local dir="$WORK/prometheus"
  prometheus_stop
  local selector
  rm -rf "$dir" && mkdir -p "$dir/sd"
  # The node pods by their DaemonSet's own selector (the installs label them apart).
  selector=$(k -n "$NODE_NS" get ds "$NODE_DS" -o json |
    jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")')
  python3 "$HERE/lib/pod_sd.py" "$dir/sd" "$SYSTEM_NS:app.kubernetes.io/name=prestop-injector:8080" \
    "$NODE_NS:$selector:9102" "$NODE_NS:$selector:9103" 2>"$dir/pod_sd.log" &
  PROM_SD_PID=$!
  {
    echo "global: {scrape_interval: 2s, evaluation_interval: 2s}"
    echo "rule_files: ['$ROOT/charts/prestop-injector/files/prometheus-rules.yaml']"
    echo "scrape_configs:"
    prom_pod_job prestop-injector-metrics 0
    prom_pod_job prestop-reaper 1
    prom_pod_job prestop-node/prestop-node-agent 2
  } >"$dir/prometheus.yml"
  PROM_PORT=$(free_port)
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$dir/prometheus.log" 2>&1 &
  PROM_PID=$!
  prom_ready() { curl -sf --noproxy '*' "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null; }
  expect "Prometheus is ready within 60 s" wait_for 60 prom_ready
  all_up() {
    (($(prom_up prestop-injector-metrics) == 2 && $(prom_up prestop-reaper) == 1 &&
      $(prom_up prestop-node/prestop-node-agent) == 1))
  }
  if wait_for 90 all_up; then
    # The rules' first evaluations may have seen no scrape yet (`absent()` pending): judged
    # from the first moment every rule group has evaluated since, and no alert is active.
    # An alert that stays past 20 s is a finding of prometheus_live's, not waited away.
    local up_at
    up_at=$(date +%s)
    settled() {
      prom_api rules | jq -e --argjson t "$((up_at + 1))" \
        '[.data.groups[].lastEvaluation | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601] | min > $t' >/dev/null &&
        [[ "$(prom_api alerts | jq '.data.alerts | length')" == 0 ]]
    }
    wait_for 20 settled
    # The next whole second: the evaluation that cleared the last alert wrote its stale
    # marker at a fraction of the second `date` rounds down to.
    PROM_SINCE=$(($(date +%s) + 1 > up_at + 20 ? up_at + 20 : $(date +%s) + 1))
  else
    FAILS+=("Prometheus finds and scrapes 2 webhook pods, the reaper and the agent within 90 s")
    prom_api targets | jq -r '.data.activeTargets[] | "    \(.labels.job) \(.scrapeUrl) \(.health) \(.lastError)"' >&2
    tail -n 5 "$dir/prometheus.log" | sed 's/^/    prometheus: /' >&2
  fi
}

prometheus_live() {
  local dir="$WORK/prometheus"
  [[ -n "$PROM_PID" ]] || prometheus_start
  # A denied create, so the denials panel has a series (the suite's Jobs are all valid).
  kc create -f "$ROOT/tests/fixtures/job-bad-cleanup.yaml" -n "$NS"
  expect "a malformed annotation is denied" test "$STATUS" -ne 0
  if python3 "$HERE/lib/prometheus_check.py" "$PROM_PORT" \
    "$ROOT/charts/prestop-injector/files/grafana-dashboard.json" \
    "$ROOT/charts/prestop-injector/files/prometheus-rules.yaml" "${PROM_SINCE:-0}" >"$dir/check.log" 2>&1; then
    sed 's/^/    /' "$dir/check.log" >&2
  else
    sed 's/^/    /' "$dir/check.log" >&2
    FAILS+=("every dashboard query and alert evaluates, every panel has series, no alert since the install ($(grep -c '^FINDING' "$dir/check.log") findings)")
    tail -n 5 "$dir/prometheus.log" | sed 's/^/    prometheus: /' >&2
  fi
}

# --- issue 39: the agent alert fires for real --------------------------------------------
# A tenant's process chrooted into a directory that is no mount shows no mount at its root,
# so what it uses cannot be told (issue 38, class 4): every judgement on its node is
# `unknown` and every cleanup there is refused, fail closed. Eight Jobs' cleanups are
# refused; the live Prometheus must see PrestopInjectorNodeAgentRefusing go pending and
# fire with the rule file's own `for: 5m`, nothing shortened. Then the tenant's pod goes,
# and the reaper empties the eight directories on its next look: refused is not lost.
REFUSED_JOBS=8

chroot_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: chrooted}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "mkdir -p /jail/bin && cp /bin/busybox /jail/bin/ && exec chroot /jail /bin/busybox sleep 100002"]
YAML
}

refused_job() { # index
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: refused-$1
  labels: {e2e-refused: "1"}
  annotations: {prestop-injector.io/cleanup: auto}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 30
      # The reaper empties a directory with its pod's user, which it must know.
      securityContext: {runAsUser: 0, runAsGroup: 0}
      containers:
      - name: app
        image: busybox:stable
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo x > /scratch/file; trap 'exit 0' TERM; sleep 100003 & wait"]
        volumeMounts: [{name: scratch, mountPath: /scratch}]
      volumes:
      - {name: scratch, hostPath: {path: $HOST/scratch/refused/$1, type: DirectoryOrCreate}}
YAML
}

# The API server's own count of LIST requests for pods, every client together.
pod_lists() {
  k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="pods"/ && /verb="LIST"/ &&
    !/subresource="[a-z]/ { n += $NF } END { print n + 0 }'
}

agent_unknown() { # agent-ip
  curl -sf --noproxy '*' "http://$1:9103/metrics" |
    awk '/^prestop_injector_node_agent_answers_total\{verdict="unknown"\}/ { print $NF; f = 1 } END { if (!f) print 0 }'
}

alert_state() { # alertname
  prom_api alerts | jq -r --arg a "$1" '[.data.alerts[] | select(.labels.alertname == $a) | .state] | first // "inactive"'
}

agent_refusing_fires() {
  local i agent lists_before unknown_before t0 state
  [[ -n "$PROM_PID" ]] || prometheus_start
  kc create -f - <<<"$(chroot_pod)"
  expect "the tenant's pod is created" test "$STATUS" -eq 0
  chrooted() { [[ -n "$(pgrep -f 'busybox sleep 100002')" ]]; }
  expect "its process runs chrooted on the node within 60 s" wait_for 60 chrooted
  for ((i = 1; i <= REFUSED_JOBS; i++)); do
    kc create -f - <<<"$(refused_job "$i")"
    expect "Job refused-$i is created" test "$STATUS" -eq 0
  done
  all_wrote() {
    for ((i = 1; i <= REFUSED_JOBS; i++)); do [[ -f "$HOST/scratch/refused/$i/file" ]] || return 1; done
  }
  expect "the $REFUSED_JOBS pods write their files within 120 s" wait_for 120 all_wrote
  agent=$(k -n "$NODE_NS" get pods -o json | jq -r '.items[0].status.podIP')
  unknown_before=$(agent_unknown "$agent")
  lists_before=$(pod_lists)
  k delete jobs -l e2e-refused=1 --wait=false >/dev/null 2>&1
  # Waited for on the node and the agent's port only: nothing here LISTs pods.
  refused() { (($(agent_unknown "$agent") >= unknown_before + REFUSED_JOBS)); }
  expect "the agent answers all $REFUSED_JOBS cleanups 'unknown' within 120 s" wait_for 120 refused
  local lists=$(($(pod_lists) - lists_before))
  echo "    $REFUSED_JOBS questions to the agent, $lists LISTs of pods (every client) meanwhile" >&2
  # Issue 38, finding 6: the agent answers from its watch, not a LIST per question.
  expect "fewer LISTs of pods than questions ($lists for $REFUSED_JOBS)" test "$lists" -lt "$REFUSED_JOBS"
  expect "fail closed: every file is still on the node" all_wrote
  # The cleaner's line reaches each pod as the agent's Event, where `kubectl describe pod`
  # shows it (the kubelet's FailedPreStopHook says only "PreStopHook failed" since 1.26).
  refused_events() {
    (($(k get events --field-selector reason=PrestopCleanupRefused -o json |
      jq '[.items[] | select(.type == "Warning" and (.involvedObject.name | startswith("refused-"))
        and (.message | contains("/scratch")))] | length') >= REFUSED_JOBS))
  }
  expect "each refusal is a Warning PrestopCleanupRefused Event on its pod, naming /scratch" \
    wait_for 30 refused_events
  t0=$(date +%s)
  firing() { state=$(alert_state PrestopInjectorNodeAgentRefusing); [[ "$state" == firing ]]; }
  if wait_for 480 firing; then
    echo "    PrestopInjectorNodeAgentRefusing firing $(($(date +%s) - t0)) s after the refusals" >&2
  else
    FAILS+=("PrestopInjectorNodeAgentRefusing fires within 8 minutes (its for: 5m) of $REFUSED_JOBS refusals (it is ${state:-inactive})")
    prom_api "query?query=$(jq -rn '"prestop_injector_node_agent_answers_total" | @uri')" |
      jq -r '.data.result[] | "    \(.metric.verdict) \(.value[1])"' >&2
  fi
  k delete pod chrooted --wait=false >/dev/null 2>&1
  unchrooted() { ! chrooted; }
  expect "the tenant's process is gone within 60 s" wait_for 60 unchrooted
  all_emptied() {
    for ((i = 1; i <= REFUSED_JOBS; i++)); do dir_empty "$HOST/scratch/refused/$i" || return 1; done
  }
  # The reaper kept them (in_use_unknown) and looks again every --delay (60 s).
  if ! wait_for 240 all_emptied; then
    FAILS+=("the reaper empties the $REFUSED_JOBS refused directories within 240 s of the tenant's pod going")
    pod_log_tails "$NODE_NS"_ 20
  fi
  prometheus_stop
}
