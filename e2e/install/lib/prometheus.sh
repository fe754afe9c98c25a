# Issue 33: Debian's real Prometheus (the `prometheus` package CI installs) scrapes the
# installed webhook, reaper and node agent, static scrape configs standing in for the
# operator's ServiceMonitors (the same job names, so the alerts' matchers hold), and loads
# the chart's rule file. Every dashboard query and alert expression must evaluate and
# every panel have series (lib/prometheus_check.py). Listens on 127.0.0.1 only; the pods'
# IPs are reachable from the host, the bridge's gateway. Sourced by run.sh; uses its
# WORK, NS and the scenario helpers.
PROM_PID=

prometheus_stop() {
  if [[ -n "$PROM_PID" ]]; then
    kill "$PROM_PID" 2>/dev/null
    wait "$PROM_PID" 2>/dev/null
    PROM_PID=
  fi
}

# "ip:port" lines of a namespace's pods matching a label selector.
pod_targets() { # namespace selector port
  k -n "$1" get pods -l "$2" -o json |
    jq -r --arg port "$3" '.items[] | select(.status.podIP != null) | "\(.status.podIP):\($port)"'
}

prometheus_live() {
  local dir="$WORK/prometheus" port webhook reaper agent= selector no_data_ok='node_agent|node-agent'
  rm -rf "$dir" && mkdir -p "$dir"
  # A denied create, so the denials panel has a series (the suite's Jobs are all valid).
  kc create -f "$ROOT/tests/fixtures/job-bad-cleanup.yaml" -n "$NS"
  expect "a malformed annotation is denied" test "$STATUS" -ne 0
  webhook=$(pod_targets "$SYSTEM_NS" app.kubernetes.io/name=prestop-injector 8080 | paste -sd,)
  # The reaper's pods by its DaemonSet's own selector (the installs label them apart).
  selector=$(k -n "$NODE_NS" get ds "$NODE_DS" -o json |
    jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")')
  reaper=$(pod_targets "$NODE_NS" "$selector" 9102 | paste -sd,)
  # The node agent serves /metrics on 9103 once its container declares that port.
  if k -n "$NODE_NS" get ds "$NODE_DS" -o json |
    jq -e '[.spec.template.spec.containers[] | select(.name == "node-agent") | .ports[]?.containerPort] | index(9103)' >/dev/null; then
    agent=$(pod_targets "$NODE_NS" "$selector" 9103 | paste -sd,)
    no_data_ok='^$'
  else
    echo "    the node agent declares no metrics port in this build: its panels are only evaluated" >&2
  fi
  expect "webhook and reaper pods to scrape" test -n "$webhook" -a -n "$reaper"
  prom_list() { sed "s/[^,][^,]*/'&'/g" <<<"$1"; }
  {
    echo "global: {scrape_interval: 2s, evaluation_interval: 2s}"
    echo "rule_files: ['$ROOT/charts/prestop-injector/files/prometheus-rules.yaml']"
    echo "scrape_configs:"
    echo "- {job_name: prestop-injector-metrics, static_configs: [{targets: [$(prom_list "$webhook")]}]}"
    echo "- {job_name: prestop-reaper, static_configs: [{targets: [$(prom_list "$reaper")]}]}"
    [[ -z "$agent" ]] || echo "- {job_name: prestop-node/prestop-node-agent, static_configs: [{targets: [$(prom_list "$agent")]}]}"
  } >"$dir/prometheus.yml"
  port=$(free_port)
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
  PROM_PID=$!
  prom_ready() { curl -sf --noproxy '*' "http://127.0.0.1:$port/-/ready" >/dev/null; }
  expect "Prometheus is ready within 60 s" wait_for 60 prom_ready
  if python3 "$HERE/lib/prometheus_check.py" "$port" \
    "$ROOT/charts/prestop-injector/files/grafana-dashboard.json" \
    "$ROOT/charts/prestop-injector/files/prometheus-rules.yaml" "$no_data_ok" >"$dir/check.log" 2>&1; then
    sed 's/^/    /' "$dir/check.log" >&2
  else
    sed 's/^/    /' "$dir/check.log" >&2
    FAILS+=("every dashboard query and alert evaluates, every panel has series ($(grep -c '^FINDING' "$dir/check.log") findings)")
    tail -n 5 "$dir/prometheus.log" | sed 's/^/    prometheus: /' >&2
  fi
  prometheus_stop
}
