//! Helpers of tests/deploy_chart.rs: rendering charts/prestop-injector with real Helm, and
//! the security-relevant view of an install that the chart and the kustomize overlays
//! must share (`#[path = "support/chart.rs"] mod chart;`, beside support/deploy.rs).
#![allow(dead_code)]

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The release name and namespace that give the chart deploy/'s object names.
pub const RELEASE: &str = "prestop-injector";
pub const NAMESPACE: &str = "prestop-system";

pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/prestop-injector")
}

/// `helm SUBCOMMAND RELEASE CHART -n NAMESPACE ARGS`, e.g. ("template", ["--set", "mode=x"]).
pub fn helm_run(helm: &Path, subcommand: &str, args: &[&str]) -> Output {
    let mut command = Command::new(helm);
    command.arg(subcommand);
    if subcommand != "lint" {
        command.arg(RELEASE);
    }
    command
        .arg(chart_dir())
        .args(["--namespace", NAMESPACE])
        .args(args)
        // No cluster: `template` and `lint` must not need one (lookup returns nothing).
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("run helm")
}

/// `helm template` with ARGS (values and `--kube-version`), one JSON value per object.
pub fn render(helm: &Path, args: &[&str]) -> Vec<Value> {
    let output = helm_run(helm, "template", args);
    assert!(
        output.status.success(),
        "helm template {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    super::common::parse_documents(&String::from_utf8_lossy(&output.stdout))
}

/// `helm template RELEASE` into NAMESPACE with ARGS: what another release name (and
/// fullnameOverride, nameOverride) renders, one JSON value per object.
pub fn render_release(helm: &Path, release: &str, namespace: &str, args: &[&str]) -> Vec<Value> {
    let output = Command::new(helm)
        .args(["template", release])
        .arg(chart_dir())
        .args(["--namespace", namespace])
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("run helm");
    assert!(
        output.status.success(),
        "helm template {release} {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    super::common::parse_documents(&String::from_utf8_lossy(&output.stdout))
}

/// Objects of one kind (the chart and deploy/ name some objects differently).
pub fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

pub fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "exactly one {kind}");
    found[0]
}

/// A volume's source without names that differ by installer (hashed ConfigMap names,
/// `scratch-mnt-scratch` vs `scratch-0`): what it exposes is what matters.
fn volume_source(volume: &Value) -> Value {
    let mut source = volume.as_object().cloned().unwrap_or_default();
    source.remove("name");
    if let Some(config_map) = source.get_mut("configMap").and_then(Value::as_object_mut) {
        config_map.remove("name");
    }
    // The seal key's Secret is named after each install's reaper (prestop-reaper-seal,
    // prestop-injector-reaper-seal): what it is, not its name.
    if let Some(secret) = source.get_mut("secret").and_then(Value::as_object_mut) {
        if secret["secretName"]
            .as_str()
            .is_some_and(|n| n.ends_with("-seal"))
        {
            secret.insert("secretName".into(), Value::from("(the seal key)"));
        }
    }
    Value::Object(source)
}

/// A pod spec's security-relevant fields, each mount joined to its volume's source.
pub fn pod_view(pod: &Value) -> Value {
    let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
    let source_of = |name: &Value| {
        volumes
            .iter()
            .find(|v| &v["name"] == name)
            .map(volume_source)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let containers: Vec<Value> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut mounts: Vec<Value> = c["volumeMounts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut m| {
                    let source = source_of(&m["name"]);
                    let mount = m.as_object_mut().unwrap();
                    mount.remove("name");
                    mount.insert("source".into(), source);
                    m
                })
                .collect();
            mounts.sort_by_key(|m| m["mountPath"].to_string());
            json!({
                "name": c["name"], "args": c["args"], "command": c["command"],
                "securityContext": c["securityContext"], "ports": c["ports"],
                "env": c["env"], "lifecycle": c["lifecycle"],
                "readinessProbe": c["readinessProbe"], "livenessProbe": c["livenessProbe"],
                "volumeMounts": mounts,
            })
        })
        .collect();
    let mut unmounted: Vec<Value> = volumes.iter().map(volume_source).collect();
    unmounted.sort_by_key(Value::to_string);
    json!({
        "securityContext": pod["securityContext"],
        "automountServiceAccountToken": pod["automountServiceAccountToken"],
        "enableServiceLinks": pod["enableServiceLinks"],
        "hostNetwork": pod["hostNetwork"], "hostPID": pod["hostPID"], "hostIPC": pod["hostIPC"],
        "terminationGracePeriodSeconds": pod["terminationGracePeriodSeconds"],
        "tolerations": pod["tolerations"],
        "initContainers": pod["initContainers"],
        "containers": containers,
        "volumes": unmounted,
    })
}

/// RBAC without object names: each role's namespace and rules, each binding's role kind,
/// namespace and subjects (kind and namespace: every subject must be the reaper's).
fn rbac_view(objects: &[Value]) -> Value {
    let mut entries: Vec<Value> = objects
        .iter()
        .filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1")
        .map(|o| {
            let subjects: Vec<Value> = o["subjects"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .map(|s| json!({"kind": s["kind"], "namespace": s["namespace"]}))
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "kind": o["kind"], "namespace": o["metadata"]["namespace"], "rules": o["rules"],
                "roleRef": o["roleRef"]["kind"], "subjects": subjects,
            })
        })
        .collect();
    entries.sort_by_key(Value::to_string);
    Value::Array(entries)
}

/// NetworkPolicies without names or selectors' labels (which differ between the installs):
/// each policy's namespace, the workload whose pods it selects (a podSelector must match
/// that workload's pod labels), its types and its ingress rules in full (issue 39).
fn network_policy_view(objects: &[Value]) -> Value {
    let workloads: Vec<(&str, &Value)> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        .map(|o| {
            (
                o["kind"].as_str().unwrap(),
                &o["spec"]["template"]["metadata"]["labels"],
            )
        })
        .collect();
    let mut entries: Vec<Value> = of_kind(objects, "NetworkPolicy")
        .iter()
        .map(|p| {
            let selector = p["spec"]["podSelector"]["matchLabels"].as_object().unwrap();
            let selects: Vec<&str> = workloads
                .iter()
                .filter(|(_, labels)| selector.iter().all(|(k, v)| labels[k.as_str()] == *v))
                .map(|(kind, _)| *kind)
                .collect();
            json!({
                "namespace": p["metadata"]["namespace"], "selects": selects,
                "policyTypes": p["spec"]["policyTypes"], "ingress": p["spec"]["ingress"],
            })
        })
        .collect();
    entries.sort_by_key(Value::to_string);
    Value::Array(entries)
}

/// The webhook's config (the ConfigMap the Deployment mounts), parsed.
pub fn webhook_config(objects: &[Value]) -> Value {
    let deployment = one(objects, "Deployment");
    let name = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .expect("the Deployment's config volume")["configMap"]["name"]
        .clone();
    let config = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the ConfigMap {name}"));
    serde_yaml::from_str(config["data"]["config.yaml"].as_str().unwrap()).unwrap()
}

/// Everything security-relevant of an install, the same for the chart and deploy/:
/// both webhooks (without caBundle, which only the installs' certificates decide), the
/// webhook's pod and service account, where its config sends the cleaners (nodeAgent),
/// RBAC, and the node DaemonSet's pod (the node agent, and the reaper), namespace and
/// the reaper's config.
pub fn security_view(objects: &[Value]) -> Value {
    let mut view = Map::new();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let mut webhooks = one(objects, kind)["webhooks"].clone();
        for webhook in webhooks.as_array_mut().unwrap() {
            webhook["clientConfig"]
                .as_object_mut()
                .unwrap()
                .remove("caBundle");
        }
        view.insert(kind.into(), webhooks);
    }
    let deployment = one(objects, "Deployment");
    view.insert(
        "Deployment".into(),
        json!({
            "namespace": deployment["metadata"]["namespace"],
            "replicas": deployment["spec"]["replicas"],
            "strategy": deployment["spec"]["strategy"],
            "pod": pod_view(&deployment["spec"]["template"]["spec"]),
        }),
    );
    let mut accounts: Vec<Value> = of_kind(objects, "ServiceAccount")
        .iter()
        .map(|a| json!({"namespace": a["metadata"]["namespace"], "automount": a["automountServiceAccountToken"]}))
        .collect();
    accounts.sort_by_key(Value::to_string);
    view.insert("ServiceAccounts".into(), Value::Array(accounts));
    view.insert("RBAC".into(), rbac_view(objects));
    view.insert("NetworkPolicies".into(), network_policy_view(objects));
    view.insert(
        "WebhookConfigNodeAgent".into(),
        webhook_config(objects)["nodeAgent"].clone(),
    );
    let daemonsets = of_kind(objects, "DaemonSet");
    assert!(
        daemonsets.len() <= 1,
        "at most one DaemonSet: {daemonsets:?}"
    );
    if let Some(node) = daemonsets.first() {
        view.insert(
            "DaemonSet".into(),
            json!({
                "namespace": node["metadata"]["namespace"],
                "updateStrategy": node["spec"]["updateStrategy"],
                "pod": pod_view(&node["spec"]["template"]["spec"]),
            }),
        );
        let namespace = node["metadata"]["namespace"].as_str().unwrap();
        let labels = &objects
            .iter()
            .find(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == namespace)
            .expect("the node DaemonSet's namespace")["metadata"]["labels"];
        let pod_security: Map<String, Value> = labels
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with("pod-security.kubernetes.io/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        view.insert("NodeNamespace".into(), Value::Object(pod_security));
        // The reaper's config, when the reaper runs there.
        if let Some(config) = of_kind(objects, "ConfigMap")
            .into_iter()
            .find(|c| c["metadata"]["namespace"] == namespace)
        {
            let text = config["data"]["config.yaml"].as_str().unwrap();
            let config: Value = serde_yaml::from_str(text).unwrap();
            view.insert("ReaperConfig".into(), config);
        }
    }
    Value::Object(view)
}

/// Takes the node agent's `--allow PREFIX` pairs out of a [`security_view`].
pub fn drop_node_agent_allow(view: &mut Value) {
    let Some(containers) = view["DaemonSet"]["pod"]["containers"].as_array_mut() else {
        return;
    };
    for container in containers {
        if container["name"] != "node-agent" {
            continue;
        }
        let command: Vec<Value> = container["command"].as_array().unwrap().clone();
        let mut kept = Vec::new();
        let mut args = command.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--allow" {
                args.next();
            } else {
                kept.push(arg);
            }
        }
        container["command"] = Value::Array(kept);
    }
}

/// The first differing path between two views, for a readable failure.
pub fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).find_map(|k| {
            let (x, y) = (x.get(k), y.get(k));
            let null = Value::Null;
            first_difference(
                &format!("{path}.{k}"),
                x.unwrap_or(&null),
                y.unwrap_or(&null),
            )
        }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y)),
        _ if a == b => None,
        _ => Some(format!("{path}:\n  chart:     {a}\n  kustomize: {b}")),
    }
}
