//! Every alert selects its series whatever the install is called (issue 39: any release
//! name or fullnameOverride but the default made PrestopInjectorWebhookDown page for ever
//! and PrestopInjectorNodeAgentUnreachable never). For the kustomize install and for
//! `helm template` with the default release and three others (a plain release name,
//! fullnameOverride, nameOverride, each in another namespace), the series are derived
//! from the rendered objects as the Prometheus Operator (the ServiceMonitor's job) and
//! kube-state-metrics (the node DaemonSet's pods) would name them, and the install's own
//! PrometheusRule is run over them by `promtool test rules`: broken, exactly the webhook,
//! node agent and API-server alerts fire; healthy, none does. Without helm, kubectl or
//! promtool the tests skip, or fail under PRESTOP_REQUIRE_TOOLS=1.

#[path = "support/chart.rs"]
mod chart;
#[path = "support/deploy.rs"]
mod common;
#[path = "support/promtool.rs"]
mod promtool;

use serde_json::Value;
use std::collections::BTreeMap;

/// The values every Helm render sets: the monitoring objects, and the reaper (so the
/// node DaemonSet runs both of its containers).
const ON: [&str; 4] = [
    "--set=serviceMonitor.enabled=true",
    "--set=prometheusRule.enabled=true",
    "--set=reaper.enabled=true",
    "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
];

/// (release, namespace, extra values): the default, and three others.
const RELEASES: [(&str, &str, &[&str]); 4] = [
    ("prestop-injector", "prestop-system", &[]),
    (
        "acme",
        "tools",
        &["--set=nodeDaemonSet.namespace.name=acme-nodes"],
    ),
    ("ops", "platform", &["--set=fullnameOverride=stop-hooks"]),
    (
        "prestop-injector-canary",
        "canary",
        &[
            "--set=nameOverride=cleanup",
            "--set=nodeDaemonSet.namespace.name=canary-nodes",
        ],
    ),
];

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    selector.as_object().is_some_and(|want| {
        want.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
    })
}

/// A series selector from label pairs, in the order given.
fn series(name: &str, labels: &[(&str, String)]) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", inner.join(", "))
}

/// What an install's names give the series the alerts read.
struct Install {
    what: String,
    /// The install's own rule groups (its PrometheusRule's spec).
    groups: Value,
    /// `up`'s labels for the webhook's target, as the operator sets them from the
    /// ServiceMonitor and its Service.
    webhook_up: Vec<(&'static str, String)>,
    /// The node DaemonSet's namespace, name and containers.
    daemonset: (String, String, Vec<String>),
    /// The webhook names of the webhook configurations.
    webhooks: Vec<(String, &'static str)>,
}

impl Install {
    fn from_objects(what: String, objects: &[Value]) -> Install {
        let rules = of_kind(objects, "PrometheusRule");
        assert_eq!(rules.len(), 1, "{what}: one PrometheusRule");
        let monitors = of_kind(objects, "ServiceMonitor");
        assert_eq!(monitors.len(), 1, "{what}: one ServiceMonitor");
        let monitor = monitors[0];
        let namespaces = monitor["spec"]["namespaceSelector"]["matchNames"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let services: Vec<&Value> = of_kind(objects, "Service")
            .into_iter()
            .filter(|s| namespaces.contains(&s["metadata"]["namespace"]))
            .filter(|s| matches(&monitor["spec"]["selector"]["matchLabels"], &labels_of(s)))
            .collect();
        assert_eq!(
            services.len(),
            1,
            "{what}: the ServiceMonitor selects one Service"
        );
        let service = services[0];
        let service_name = service["metadata"]["name"].as_str().unwrap().to_owned();
        // The operator's job: the Service's name, or the value of its label jobLabel.
        let job = monitor["spec"]["jobLabel"]
            .as_str()
            .and_then(|key| labels_of(service).get(key).cloned())
            .unwrap_or_else(|| service_name.clone());
        let namespace = service["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .to_owned();
        let deployment = of_kind(objects, "Deployment")
            .into_iter()
            .find(|d| {
                matches(
                    &service["spec"]["selector"],
                    &labels_of(&d["spec"]["template"]),
                )
            })
            .unwrap_or_else(|| panic!("{what}: no Deployment behind {service_name}"));
        let pod = format!(
            "{}-7d9f8c6b5-x2x9q",
            deployment["metadata"]["name"].as_str().unwrap()
        );
        let webhook_up = vec![
            ("job", job),
            ("namespace", namespace),
            ("service", service_name),
            ("endpoint", "probes".to_owned()),
            ("pod", pod),
            ("instance", "10.0.0.1:8080".to_owned()),
        ];
        let daemonsets = of_kind(objects, "DaemonSet");
        assert_eq!(daemonsets.len(), 1, "{what}: one node DaemonSet");
        let ds = daemonsets[0];
        let containers = ds["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect();
        let daemonset = (
            ds["metadata"]["namespace"].as_str().unwrap().to_owned(),
            ds["metadata"]["name"].as_str().unwrap().to_owned(),
            containers,
        );
        let mut webhooks = Vec::new();
        for (kind, step) in [
            ("MutatingWebhookConfiguration", "admit"),
            ("ValidatingWebhookConfiguration", "validating"),
        ] {
            for config in of_kind(objects, kind) {
                for webhook in config["webhooks"].as_array().unwrap() {
                    webhooks.push((webhook["name"].as_str().unwrap().to_owned(), step));
                }
            }
        }
        assert_eq!(webhooks.len(), 2, "{what}: the two webhooks");
        Install {
            what,
            groups: rules[0]["spec"]["groups"].clone(),
            webhook_up,
            daemonset,
            webhooks,
        }
    }

    /// A promtool test file: the install broken (no webhook replica up, the node pod not
    /// ready and its agent's scrape failing, every call to both webhooks failing open),
    /// then healthy; which alerts fire at 20 minutes.
    fn test_file(&self, rules: &str) -> String {
        let (ds_namespace, ds_name, containers) = &self.daemonset;
        let pod = format!("{ds_name}-4hq9z");
        let ksm = |extra: &[(&'static str, String)]| {
            let mut labels: Vec<(&'static str, String)> = vec![
                ("job", "kube-state-metrics".to_owned()),
                ("namespace", ds_namespace.clone()),
                ("pod", pod.clone()),
                ("uid", "77aa".to_owned()),
            ];
            labels.extend(extra.iter().cloned());
            labels
        };
        // The agent's scrape, by the PodMonitor docs/RUNBOOKS.md asks for.
        let agent_up = vec![
            ("job", format!("{ds_namespace}/prestop-node-agent")),
            ("namespace", ds_namespace.clone()),
            ("pod", pod.clone()),
            ("container", "node-agent".to_owned()),
            ("endpoint", "metrics".to_owned()),
            ("instance", "10.1.0.7:9103".to_owned()),
        ];
        let group = |name: &str, broken: bool| {
            let (bad, good) = if broken { ("0", "1") } else { ("1", "0") };
            let mut input = vec![
                (series("up", &self.webhook_up), format!("{bad}x30")),
                (series("up", &agent_up), format!("{bad}x30")),
                (
                    series(
                        "kube_pod_owner",
                        &ksm(&[
                            ("owner_kind", "DaemonSet".to_owned()),
                            ("owner_name", ds_name.clone()),
                            ("owner_is_controller", "true".to_owned()),
                        ]),
                    ),
                    "1x30".to_owned(),
                ),
                (
                    series(
                        "kube_pod_status_ready",
                        &ksm(&[("condition", "true".to_owned())]),
                    ),
                    format!("{bad}x30"),
                ),
                (
                    series(
                        "kube_pod_status_ready",
                        &ksm(&[("condition", "false".to_owned())]),
                    ),
                    format!("{good}x30"),
                ),
            ];
            for container in containers {
                input.push((
                    series(
                        "kube_pod_container_info",
                        &ksm(&[("container", container.clone())]),
                    ),
                    "1x30".to_owned(),
                ));
            }
            let mut expected = Vec::new();
            for (webhook, step) in &self.webhooks {
                let labels = [
                    ("job", "apiserver".to_owned()),
                    ("instance", "10.0.0.10:6443".to_owned()),
                    ("name", webhook.clone()),
                    ("type", (*step).to_owned()),
                ];
                let per_minute = if broken { 2 } else { 0 };
                input.push((
                    series("apiserver_admission_webhook_fail_open_count", &labels),
                    format!("0+{per_minute}x30"),
                ));
                expected.push(series(
                    "ALERTS",
                    &[
                        ("alertname", "PrestopInjectorWebhookCallsFailing".to_owned()),
                        ("alertstate", "firing".to_owned()),
                        ("failure_policy", "Ignore".to_owned()),
                        ("name", webhook.clone()),
                        ("severity", "critical".to_owned()),
                    ],
                ));
            }
            expected.push(series(
                "ALERTS",
                &[
                    ("alertname", "PrestopInjectorWebhookDown".to_owned()),
                    ("alertstate", "firing".to_owned()),
                    ("severity", "critical".to_owned()),
                ],
            ));
            let mut agent = vec![
                (
                    "alertname",
                    "PrestopInjectorNodeAgentUnreachable".to_owned(),
                ),
                ("alertstate", "firing".to_owned()),
            ];
            agent.extend(agent_up.iter().cloned());
            agent.push(("severity", "warning".to_owned()));
            expected.push(series("ALERTS", &agent));
            expected.push(series(
                "ALERTS",
                &[
                    (
                        "alertname",
                        "PrestopInjectorNodeAgentUnreachable".to_owned(),
                    ),
                    ("alertstate", "firing".to_owned()),
                    ("namespace", ds_namespace.clone()),
                    ("pod", pod.clone()),
                    ("severity", "warning".to_owned()),
                ],
            ));
            let mut text = format!("  - name: {name}\n    interval: 1m\n    input_series:\n");
            for (selector, values) in input {
                text.push_str(&format!(
                    "      - series: '{selector}'\n        values: '{values}'\n"
                ));
            }
            text.push_str(
                "    promql_expr_test:\n      - expr: 'ALERTS{alertstate=\"firing\"}'\n        eval_time: 20m\n        exp_samples:",
            );
            if !broken {
                text.push_str(" []\n");
                return text;
            }
            for labels in expected {
                text.push_str(&format!(
                    "\n          - labels: '{labels}'\n            value: 1"
                ));
            }
            text.push('\n');
            text
        };
        format!(
            "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n{}{}",
            group(&format!("{} broken", self.what), true),
            group(&format!("{} healthy", self.what), false)
        )
    }

    fn check(&self, promtool: &std::path::Path) {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join("rules.yaml");
        let groups = serde_json::json!({ "groups": self.groups });
        std::fs::write(&rules, serde_json::to_string_pretty(&groups).unwrap()).unwrap();
        let test = dir.path().join("test.yaml");
        std::fs::write(&test, self.test_file("rules.yaml")).unwrap();
        let output = std::process::Command::new(promtool)
            .args(["test", "rules", "test.yaml"])
            .current_dir(dir.path())
            .output()
            .expect("run promtool");
        assert!(
            output.status.success(),
            "{}: the alerts miss its series:\n{}{}\n--- test file:\n{}",
            self.what,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(&test).unwrap()
        );
    }
}

#[test]
fn every_alert_selects_its_series_whatever_the_helm_release_is_called() {
    let (Some(helm), Some(promtool)) = (common::helm(), promtool::promtool()) else {
        return;
    };
    let mut fullnames = Vec::new();
    for (release, namespace, extra) in RELEASES {
        let args: Vec<&str> = ON.iter().chain(extra.iter()).copied().collect();
        let objects = chart::render_release(&helm, release, namespace, &args);
        let install = Install::from_objects(format!("helm {release} {extra:?}"), &objects);
        fullnames.push(install.daemonset.1.clone());
        install.check(&promtool);
    }
    // The releases do rename what the alerts look for.
    fullnames.dedup();
    assert_eq!(fullnames.len(), RELEASES.len(), "{fullnames:?}");
}

#[test]
fn every_alert_selects_its_series_in_the_kustomize_install() {
    let (Some(kubectl), Some(promtool)) = (common::kubectl(), promtool::promtool()) else {
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
             resources:\n  - {deploy}/overlays/cluster-wide-with-reaper\n\
             components:\n  - {deploy}/components/monitoring\n"
        ),
    )
    .unwrap();
    let objects = common::render_dir(&kubectl, dir.path());
    Install::from_objects("kustomize".to_owned(), &objects).check(&promtool);
}
