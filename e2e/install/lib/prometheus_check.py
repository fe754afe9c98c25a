"""The live half of issue 33's monitoring check, run by lib/prometheus.sh against Debian's
real Prometheus scraping the installed webhook, reaper and node agent:

    python3 prometheus_check.py PORT DASHBOARD.json RULES.yaml SINCE

waits until every target is up, then queries every dashboard expr and every alert expr
through /api/v1/query: each must evaluate without error or warning, and each panel must
have series. Then every rule the rule manager loaded must be healthy, and no alert may have
been pending or firing since SINCE (unix seconds; issue 39: the suite's own rollout and
certificate rotation page no one). Prints one line per finding and exits 1 on any; polls
with a deadline, no fixed sleep.
"""
import json
import sys
import time
import urllib.parse
import urllib.request

import yaml

port, dashboard_file, rules_file, since = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
base = f"http://127.0.0.1:{port}/api/v1"
# Loopback: never through a proxy the environment may name.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def api(path):
    with opener.open(base + path, timeout=10) as response:
        return json.load(response)


def query(expr):
    answer = api("/query?" + urllib.parse.urlencode({"query": expr}))
    if answer.get("status") != "success" or answer.get("warnings"):
        raise ValueError(f"{answer.get('error') or answer.get('warnings')}")
    return answer["data"]["result"]


def until(seconds, check):
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def targets_up():
    targets = api("/targets")["data"]["activeTargets"]
    return targets and all(t["health"] == "up" for t in targets)


def scraped_four_times():
    series = query("up[10s]")
    return series and all(len(s["values"]) >= 4 for s in series)


findings = []
if not until(90, targets_up):
    targets = api("/targets")["data"]["activeTargets"]
    findings.append("targets not all up within 90 s: " + ", ".join(
        f"{t['labels']['job']} {t['scrapeUrl']} {t['health']} {t['lastError']}" for t in targets))
# Rates need two samples in their window: 4 scrapes of 2 s.
if not until(30, scraped_four_times):
    findings.append("fewer than 4 scrapes of every target in 30 s")

dashboard = json.load(open(dashboard_file))
for panel in dashboard["panels"]:
    if panel["type"] == "row":
        continue
    exprs = [t["expr"].replace("$__rate_interval", "30s") for t in panel["targets"]]
    series = 0
    for expr in exprs:
        try:
            series += len(query(expr))
        except ValueError as e:
            findings.append(f"panel {panel['title']!r}: {expr}: {e}")
    if not series:
        findings.append(f"panel {panel['title']!r} has no series: {exprs}")
    print(f"panel {panel['title']!r}: {series} series")

rules = yaml.safe_load(open(rules_file))
names = []
for group in rules["groups"]:
    for rule in group["rules"]:
        names.append(rule["alert"])
        try:
            print(f"alert {rule['alert']}: {len(query(rule['expr']))} series")
        except ValueError as e:
            findings.append(f"alert {rule['alert']}: {e}")


def rules_healthy():
    loaded = [r for g in api("/rules")["data"]["groups"] for r in g["rules"]]
    bad = [f"{r['name']}: {r.get('lastError')}" for r in loaded if r["health"] == "err"]
    if bad:
        findings.extend(f"rule {b}" for b in bad)
        return True
    return len(loaded) == len(names) and all(r["health"] == "ok" for r in loaded)


if not until(30, rules_healthy):
    findings.append(f"the rule manager did not evaluate all {len(names)} alerts healthy within 30 s")
firing = [a["labels"]["alertname"] for a in api("/alerts")["data"]["alerts"]]
print(f"alerts pending or firing now: {sorted(set(firing)) or 'none'}")
# Every state an alert was in since SINCE, from Prometheus' own ALERTS series.
now = int(time.time())
if since:
    answer = api("/query_range?" + urllib.parse.urlencode(
        {"query": "ALERTS", "start": since, "end": now, "step": 2}))
    for series in answer["data"]["result"]:
        labels = series["metric"]
        first = int(float(series["values"][0][0]))
        findings.append(f"alert {labels['alertname']} was {labels['alertstate']} "
                        f"{first - since} s after the install's targets were up "
                        f"({', '.join(f'{k}={v}' for k, v in sorted(labels.items()) if k not in ('__name__', 'alertname', 'alertstate'))})")
    print(f"alerts since the install ({now - since} s): "
          f"{len(answer['data']['result'])} series pending or firing")
for line in findings:
    print(f"FINDING {line}")
sys.exit(1 if findings else 0)
