# --- issue 39: no tenant can wedge the installed agent ---------------------------------
# What cleaner/tests/agent_fair.rs shows of a bare agent, here on the real node, against
# the agent the install runs, its probes the kubelet's:
# - a tenant's pod holds 8 connections trickling a byte a second and 56 idle ones on the
#   agent's metrics port (where its probes are), reconnecting whenever the agent drops
#   one;
# - 4 tenant pods ask on the agent's socket without pause, each with 16 loops of the
#   injected cleaner on its own directory: twice the places the agent gives one pod;
# - meanwhile the kubelet's probes stay green (Ready, no restart, no Unhealthy Event), our
#   own reads of /healthz and /readyz answer within a second, and another pod's cleanup
#   is answered `same` (never `busy`) and empties its directory, its report an Event.
# Sourced by run.sh after lib/scenarios.sh (NODE_NS, pod_log_tails) and lib/prometheus.sh
# (agent_unknown's port).

DOOR_GREEDY=4
DOOR_LOOPS=16
DOOR_SECONDS=70

# Bash for /dev/tcp (busybox's nc cannot hold a connection without a terminal).
trickler_pod() { # agent-ip
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: door-trickler
  labels: {e2e-doors: "1"}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: trickle
    image: localhost/prestop-e2e/bash:1
    imagePullPolicy: IfNotPresent
    command:
    - /bin/bash
    - -c
    - |
      trap '' PIPE
      slow() {
        while :; do
          exec 3<>/dev/tcp/$1/9103 2>/dev/null || { sleep 1; continue; }
          while printf G >&3 2>/dev/null; do sleep 1; done
          exec 3>&-
        done
      }
      idle() {
        while :; do
          exec 3<>/dev/tcp/$1/9103 2>/dev/null || { sleep 1; continue; }
          cat <&3 >/dev/null
          exec 3>&-
        done
      }
      for i in \$(seq 8); do slow & done
      for i in \$(seq 56); do idle & done
      echo trickling
      wait
YAML
}

# An injected pod whose app runs the hook's own program on its own directory, in loops:
# what a tenant can do with what the webhook gives every pod (the program and the
# socket's directory, read-only).
greedy_pod() { # n
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: door-greedy-$1
  labels: {e2e-doors: "1"}
  annotations: {prestop-injector.io/cleanup: /scratch}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    resources: {limits: {cpu: 250m, memory: 64Mi}}
    command:
    - sh
    - -c
    - |
      ask() {
        while :; do
          /.prestop-injector/prestop-clean hook --node-agent /.prestop-injector-node/agent.sock \
            --target /scratch --host $HOST/scratch/doors/greedy-$1 >/dev/null 2>&1
        done
      }
      i=0
      while [ \$i -lt $DOOR_LOOPS ]; do ask & i=\$((i + 1)); done
      echo asking
      wait
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $HOST/scratch/doors/greedy-$1, type: DirectoryOrCreate}}
YAML
}

# The other pod: a plain cleanup, asked while the tenants above hold the agent.
door_other_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: door-other
  labels: {e2e-doors: "1"}
  annotations: {prestop-injector.io/cleanup: /scratch}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:stable
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo x > /scratch/file; echo y > /scratch/.hidden; trap 'exit 0' TERM; sleep 100005 & wait"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, hostPath: {path: $HOST/scratch/doors/other, type: DirectoryOrCreate}}
YAML
}

agent_answers() { # agent-ip [verdict]: its answers of that verdict, or of every one
  curl -sf --noproxy '*' --max-time 5 "http://$1:9103/metrics" |
    awk -v v="${2:-}" 'index($1, "prestop_injector_node_agent_answers_total{verdict=") == 1 &&
      (v == "" || $1 == "prestop_injector_node_agent_answers_total{verdict=\"" v "\"}") { n += $NF }
      END { print n + 0 }'
}

# Connections established to the agent's metrics port, counted in the agent's own
# network namespace (the pods' connections are in no namespace of the host's).
agent_port_connections() { # agent-pid
  nsenter --net="/proc/$1/ns/net" ss -Htn state established '( sport = :9103 )' 2>/dev/null | wc -l
}

# The agent's log lines since an instant, from the kubelet's file on the node (as
# `kubectl logs` serves it, without the request's timeout: the greedy pods make it
# megabytes).
agent_log_since() { # agent-pod rfc3339
  cat /var/log/pods/"${NODE_NS}_$1"_*/node-agent/*.log 2>/dev/null | awk -v t="$2" '$1 >= t' | cut -d' ' -f4-
}

# Every second until $WORK/doors.stop: /healthz and /readyz as the kubelet asks them, each
# within 1 s; a failure or a slow answer is a line in $WORK/doors.probes.
door_probe_loop() { # agent-ip
  local path code took slowest=0
  while [[ ! -e "$WORK/doors.stop" ]]; do
    for path in /healthz /readyz; do
      read -r code took < <(curl -s --noproxy '*' --max-time 2 -o /dev/null \
        -w '%{http_code} %{time_total}\n' "http://$1:9103$path")
      if [[ "$code" != 200 ]] || awk -v t="$took" 'BEGIN { exit !(t >= 1) }'; then
        echo "$(date +%T) $path: $code after ${took}s" >>"$WORK/doors.probes"
      fi
      slowest=$(awk -v a="$slowest" -v b="$took" 'BEGIN { print (b > a ? b : a) }')
    done
    echo "$slowest" >"$WORK/doors.slowest"
    sleep 1
  done
}

agent_not_wedged() {
  local agent_pod agent agent_pid all_before busy_before same_before t0 unhealthy i n probe_pid other_uid restarts
  [[ -n "$PROM_PID" ]] || prometheus_start
  k -n "$NODE_NS" get pods -o json >"$WORK/doors-agent.json"
  agent_pod=$(jq -r '.items[0].metadata.name' "$WORK/doors-agent.json")
  agent=$(jq -r '.items[0].status.podIP' "$WORK/doors-agent.json")
  restarts=$(jq '[.items[0].status.containerStatuses[] | select(.name == "node-agent") | .restartCount] | first' "$WORK/doors-agent.json")
  agent_pid=$(pgrep -f 'prestop-injector node-agent' | head -n 1)
  expect "the agent runs (pod $agent_pod, $agent)" test -n "$agent" -a -n "$agent_pid"
  t0=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  mkdir -p "$HOST/scratch/doors"
  rm -f "$WORK/doors.stop" "$WORK/doors.probes" "$WORK/doors.slowest"

  kc create -f - <<<"$(trickler_pod "$agent")"
  expect "the trickling pod is created" test "$STATUS" -eq 0
  trickling() { [[ "$(k logs door-trickler 2>/dev/null)" == *trickling* ]]; }
  expect "it trickles within 60 s" wait_for 60 trickling
  # The agent gives a connection 1 s to send its request, so each of the 64 loops is
  # connected about half the time: 31 to 48 at once were seen; twice the issue's 8 is
  # the line.
  holding() { (($(agent_port_connections "$agent_pid") >= 16)); }
  expect "it holds connections on the agent's metrics port (at least 16 at once)" wait_for 30 holding

  all_before=$(agent_answers "$agent")
  same_before=$(agent_answers "$agent" same)
  busy_before=$(agent_answers "$agent" busy)
  for ((i = 1; i <= DOOR_GREEDY; i++)); do
    kc create -f - <<<"$(greedy_pod "$i")"
    expect "greedy pod $i is created" test "$STATUS" -eq 0
  done
  served() { (($(agent_answers "$agent") >= all_before + 100)); }
  expect "the agent serves the greedy pods (100 answers within 90 s)" wait_for 90 served

  door_probe_loop "$agent" &
  probe_pid=$!
  PIDS+=("$probe_pid")
  kc create -o json -f - <<<"$(door_other_pod)"
  expect "the other pod is created" test "$STATUS" -eq 0
  other_uid=$(jq -r .metadata.uid <<<"$OUT")
  expect "its files appear on the node within 60 s" wait_for 60 has_file "$HOST/scratch/doors/other/.hidden"
  # Under the tenants' load for a while before it asks, so its question meets them.
  sleep 20
  kc delete pod door-other --wait=false
  expect "its preStop empties its directory within 30 s, the tenants asking meanwhile" \
    wait_for 30 dir_empty "$HOST/scratch/doors/other"
  cleaned_event() {
    k get events --field-selector "involvedObject.name=door-other,reason=PrestopCleanup" \
      -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}' 2>/dev/null | grep -q "^Normal emptied "
  }
  expect "its report is a Normal PrestopCleanup Event on the pod" wait_for 30 cleaned_event
  # How long its walk took under the tenants' load (a slow agent sets the walk's pace).
  log "doors: the other pod's report: $(k get events --field-selector "involvedObject.name=door-other,reason=PrestopCleanup" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null | head -n 1)"
  agent_log_since "$agent_pod" "$t0" >"$WORK/doors-agent.log"
  expect "the agent answered it 'same' (its log)" \
    grep -qE "pod $other_uid: [^ ]*/scratch/doors/other: same" "$WORK/doors-agent.log"
  expect "and never 'busy'" eval "! grep -qE 'pod $other_uid: .*: busy' '$WORK/doors-agent.log'"

  # The rest of the window: the kubelet probes every 10 s, three misses restart the agent.
  n=$((DOOR_SECONDS - 20))
  sleep "$n"
  touch "$WORK/doors.stop"
  wait "$probe_pid" 2>/dev/null
  k -n "$NODE_NS" get pod "$agent_pod" -o json >"$WORK/doors-agent-after.json"
  expect "the agent was not restarted (restartCount stays $restarts)" \
    jqt "$(cat "$WORK/doors-agent-after.json")" "[.status.containerStatuses[] | select(.name == \"node-agent\") | .restartCount] == [$restarts]"
  expect "and is Ready" \
    jqt "$(cat "$WORK/doors-agent-after.json")" '.status.conditions[] | select(.type == "Ready") | .status == "True"'
  unhealthy=$(k -n "$NODE_NS" get events --field-selector "involvedObject.name=$agent_pod,reason=Unhealthy" -o json |
    jq --arg t "$t0" '[.items[] | select((.lastTimestamp // .eventTime // "") >= $t)] | length')
  expect "the kubelet saw no failed probe of the agent ($unhealthy Unhealthy Events)" test "$unhealthy" -eq 0
  expect "our own /healthz and /readyz answered 200 within 1 s, every second ($(cat "$WORK/doors.probes" 2>/dev/null | head -n 3 | tr '\n' ';'))" \
    test ! -s "$WORK/doors.probes"
  local busy=$(($(agent_answers "$agent" busy) - busy_before)) same=$(($(agent_answers "$agent" same) - same_before))
  local all=$(($(agent_answers "$agent") - all_before))
  # The greedy pods were turned away beyond their share, and no one else.
  local greedy busy_lines greedy_busy
  greedy=$(k get pods -l e2e-doors=1 -o json | jq -r '.items[] | select(.metadata.name | startswith("door-greedy-")) | .metadata.uid' | paste -sd'|')
  agent_log_since "$agent_pod" "$t0" >"$WORK/doors-agent.log"
  busy_lines=$(grep -c ': busy$' "$WORK/doors-agent.log")
  greedy_busy=$(grep -cE "pod ($greedy): .*: busy$" "$WORK/doors-agent.log")
  expect "every 'busy' went to a greedy pod ($greedy_busy of $busy_lines)" test "$busy_lines" -eq "$greedy_busy"
  log "doors: $all answers, $same 'same', $busy 'busy' ($greedy_busy of the log's $busy_lines to the greedy pods); slowest probe $(cat "$WORK/doors.slowest" 2>/dev/null) s; $(agent_port_connections "$agent_pid") connections held on the metrics port at the end"

  k delete pods -l e2e-doors=1 --wait=false >/dev/null 2>&1
  doors_gone() { [[ -z "$(k get pods -l e2e-doors=1 -o name 2>/dev/null)" ]]; }
  expect "the tenants' pods are gone within 90 s" wait_for 90 doors_gone
  if ((${#FAILS[@]})); then pod_log_tails "$NODE_NS"_ 20; fi
}
