//! The alerts and the dashboard as both installs ship them: the chart's
//! `prometheusRule.enabled` and `dashboards.enabled`, and deploy/components/monitoring.
//! Each renders objects that validate strictly (the PrometheusRule against the
//! Prometheus Operator's vendored CRD), and each carries exactly the rule file and the
//! dashboard that promtool and tests/monitoring_dashboard.rs check: one source of truth.

#[path = "support/chart.rs"]
mod chart;
#[path = "support/deploy.rs"]
mod common;

use serde_json::Value;

const SHIPPED_RUNBOOKS: &str =
    "https://github.com/prestop-injector/prestop-injector/blob/main/docs/RUNBOOKS.md#";

fn files(name: &str) -> std::path::PathBuf {
    common::repo_root()
        .join("charts/prestop-injector/files")
        .join(name)
}

fn rule_groups() -> Value {
    let text = std::fs::read_to_string(files("prometheus-rules.yaml")).unwrap();
    serde_yaml::from_str::<Value>(&text).unwrap()["groups"].clone()
}

fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(files("grafana-dashboard.json")).unwrap())
        .unwrap()
}

fn of_kind<'a>(objects: &'a [Value], api_version: &str, kind: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| o["apiVersion"] == api_version && o["kind"] == kind)
        .collect()
}

fn dashboard_config_map(objects: &[Value]) -> &Value {
    let maps: Vec<&Value> = of_kind(objects, "v1", "ConfigMap")
        .into_iter()
        .filter(|m| m["data"].get("prestop-injector.json").is_some())
        .collect();
    assert_eq!(maps.len(), 1, "one dashboard ConfigMap");
    maps[0]
}

fn dashboard_in(map: &Value) -> Value {
    serde_json::from_str(map["data"]["prestop-injector.json"].as_str().unwrap())
        .expect("the ConfigMap's dashboard is JSON")
}

#[test]
fn the_chart_ships_the_rule_file_and_the_dashboard_and_they_validate() {
    let (Some(helm), Some(validator)) = (common::helm(), common::kubernetes_validate()) else {
        return;
    };
    let on = [
        "--set=prometheusRule.enabled=true",
        "--set=dashboards.enabled=true",
    ];
    for kube in [common::OLDEST_KUBERNETES, "1.37.0"] {
        let objects = chart::render(&helm, &[&on[..], &["--kube-version", kube]].concat());
        common::validate(&validator, &format!("chart-monitoring-{kube}"), &objects);
        let rules = of_kind(&objects, "monitoring.coreos.com/v1", "PrometheusRule");
        assert_eq!(rules.len(), 1, "one PrometheusRule");
        assert_eq!(rules[0]["metadata"]["namespace"], chart::NAMESPACE);
        assert_eq!(
            rules[0]["spec"]["groups"],
            rule_groups(),
            "the rule file, unchanged"
        );
        let map = dashboard_config_map(&objects);
        assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
        assert_eq!(
            dashboard_in(map),
            dashboard(),
            "the dashboard file, unchanged"
        );
    }
    // Off by default, like the ServiceMonitor: a cluster without the operator's CRDs
    // installs the chart as it is.
    let objects = chart::render(&helm, &[]);
    assert!(of_kind(&objects, "monitoring.coreos.com/v1", "PrometheusRule").is_empty());
    assert!(objects
        .iter()
        .all(|o| o["data"].get("prestop-injector.json").is_none()));
}

/// The runbook links' base and the sidecar's label are the values'; nothing else moves.
#[test]
fn the_chart_sets_the_runbook_base_and_the_sidecar_label_from_values() {
    let Some(helm) = common::helm() else {
        return;
    };
    let objects = chart::render(
        &helm,
        &[
            "--set=prometheusRule.enabled=true",
            "--set=prometheusRule.runbookBaseUrl=https://wiki.example.com/ops/prestop/",
            "--set=prometheusRule.labels.release=kube-prometheus-stack",
            "--set=dashboards.enabled=true",
            "--set=dashboards.label=dashboards",
            "--set=dashboards.labelValue=platform",
            "--set=dashboards.namespace=monitoring",
            "--set=dashboards.annotations.grafana_folder=Platform",
        ],
    );
    let rule = of_kind(&objects, "monitoring.coreos.com/v1", "PrometheusRule")[0];
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let mut expected = rule_groups();
    let mut links = 0;
    for group in expected.as_array_mut().unwrap() {
        for alert in group["rules"].as_array_mut().unwrap() {
            let url = alert["annotations"]["runbook_url"].as_str().unwrap();
            let anchor = url.strip_prefix(SHIPPED_RUNBOOKS).expect("shipped base");
            alert["annotations"]["runbook_url"] =
                Value::from(format!("https://wiki.example.com/ops/prestop#{anchor}"));
            links += 1;
        }
    }
    assert!(links >= 13);
    assert_eq!(rule["spec"]["groups"], expected);
    let map = dashboard_config_map(&objects);
    assert_eq!(map["metadata"]["namespace"], "monitoring");
    assert_eq!(map["metadata"]["labels"]["dashboards"], "platform");
    assert!(map["metadata"]["labels"].get("grafana_dashboard").is_none());
    assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "Platform");
}

#[test]
fn the_chart_schema_rejects_bad_monitoring_values() {
    let Some(helm) = common::helm() else {
        return;
    };
    for (value, named) in [
        (
            "prometheusRule.runbookBaseUrl=docs/RUNBOOKS.md",
            "/prometheusRule/runbookBaseUrl",
        ),
        (
            "prometheusRule.runbookBaseUrl=https://x/r.md#a",
            "/prometheusRule/runbookBaseUrl",
        ),
        ("dashboards.label=grafana dashboard", "/dashboards/label"),
        ("dashboards.namespace=Monitoring", "/dashboards/namespace"),
        ("dashboards.enable=true", "enable"),
    ] {
        let output = chart::helm_run(&helm, "template", &["--set", value]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "--set {value} was accepted");
        assert!(stderr.contains(named), "--set {value}: {stderr}");
    }
}

/// The vendored CRD catches what the operator's API server would refuse or prune: the
/// check of the PrometheusRule above is not a formality.
#[test]
fn the_vendored_crd_refuses_a_malformed_rule() {
    let (Some(helm), Some(validator)) = (common::helm(), common::kubernetes_validate()) else {
        return;
    };
    let objects = chart::render(&helm, &["--set=prometheusRule.enabled=true"]);
    let mut rule = of_kind(&objects, "monitoring.coreos.com/v1", "PrometheusRule")[0].clone();
    rule["spec"]["groups"][0]["rules"][0]["for"] = Value::from("five minutes");
    let outcome = std::panic::catch_unwind(|| common::validate(&validator, "malformed", &[rule]));
    assert!(
        outcome.is_err(),
        "a `for` the operator refuses passed validation"
    );
}

/// deploy/components/monitoring over an overlay: it renders, validates, and carries the
/// chart's files (sync.sh writes its copies).
#[test]
fn the_kustomize_component_ships_the_same_rules_and_dashboard() {
    let (Some(kubectl), Some(validator)) = (common::kubectl(), common::kubernetes_validate())
    else {
        return;
    };
    // kustomize reads resources by relative path only: a kustomization in a temporary
    // directory that points back at the overlay and the component.
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().components().count() - 1;
    let deploy = format!(
        "{}{}",
        "../".repeat(up),
        common::deploy_dir()
            .display()
            .to_string()
            .trim_start_matches('/')
    );
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - {deploy}/overlays/cluster-wide\n\
             components:\n  - {deploy}/components/monitoring\n"
        ),
    )
    .unwrap();
    let objects = common::render_dir(&kubectl, dir.path());
    common::validate(&validator, "monitoring-component", &objects);
    let rules = of_kind(&objects, "monitoring.coreos.com/v1", "PrometheusRule");
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0]["spec"]["groups"],
        rule_groups(),
        "deploy/components/monitoring/prometheusrule.yaml differs from the chart's rule \
         file: run deploy/components/monitoring/sync.sh"
    );
    let map = dashboard_config_map(&objects);
    assert_eq!(map["metadata"]["name"], "prestop-injector-dashboard");
    assert_eq!(map["metadata"]["namespace"], "prestop-system");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        dashboard_in(map),
        dashboard(),
        "deploy/components/monitoring/grafana-dashboard.json differs from the chart's: run \
         deploy/components/monitoring/sync.sh"
    );
    // The ServiceMonitor's Service selects the webhook's pods on their probe port, the
    // job the alerts name (…prestop-injector-metrics).
    let service = common::find(&objects, "Service", "prestop-injector-metrics");
    let deployment = common::find(&objects, "Deployment", "prestop-injector");
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &deployment["spec"]["template"]["metadata"]["labels"][key],
            value
        );
    }
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "probes");
}

/// PrestopInjectorNodeAgentUnreachable knows the node DaemonSet's pods
/// (kube-state-metrics) by their owner, a DaemonSet whose name
/// ends in `-node` (`owner_name=~".+-node"`), and their `node-agent` container, never by
/// a name the release decides: every install's node DaemonSet must be both, and the
/// webhook's Deployment neither (tests/monitoring_release_names.rs runs the alerts
/// over such series).
#[test]
fn the_unreachable_alert_knows_every_installs_node_daemonset() {
    let (Some(helm), Some(kubectl)) = (common::helm(), common::kubectl()) else {
        return;
    };
    let expr = rule_groups()
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap())
        .find(|rule| rule["alert"] == "PrestopInjectorNodeAgentUnreachable")
        .expect("the alert")["expr"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(expr.contains(r#"owner_name=~".+-node""#), "{expr}");
    assert!(expr.contains(r#"container="node-agent""#), "{expr}");
    // PromQL's =~ is anchored: ".+-node" is a name of one character or more, then -node.
    let is_match = |name: &str| name.len() > "-node".len() && name.ends_with("-node");
    let mut daemonsets = Vec::new();
    for overlay in ["cluster-wide", "cluster-wide-with-reaper"] {
        let objects = common::render(&kubectl, overlay);
        daemonsets.extend(chart::of_kind(&objects, "DaemonSet").into_iter().cloned());
    }
    for values in [
        &[][..],
        &[
            "--set=reaper.enabled=true",
            "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
        ][..],
        &["--set=fullnameOverride=stop-hooks"][..],
        &["--set=nameOverride=cleanup"][..],
    ] {
        let objects = chart::render(&helm, values);
        daemonsets.extend(chart::of_kind(&objects, "DaemonSet").into_iter().cloned());
    }
    assert_eq!(daemonsets.len(), 6, "one DaemonSet per install");
    for daemonset in &daemonsets {
        let name = daemonset["metadata"]["name"].as_str().unwrap();
        assert!(is_match(name), ".+-node misses {name}");
        let containers: Vec<&str> = daemonset["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert!(containers.contains(&"node-agent"), "{name}: {containers:?}");
    }
    for other in ["prestop-injector", "prestop-reaper", "kube-proxy"] {
        assert!(!is_match(other), ".+-node matches {other}");
    }
}
