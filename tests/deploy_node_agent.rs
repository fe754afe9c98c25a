//! The node agent in every install (issue 31): deploy/base/node and the chart's
//! `nodeAgent.enabled` (on by default) run it on every node, in a DaemonSet of its own
//! namespace prestop-node (Pod Security `privileged`), and point the webhook's config at
//! its socket; the reaper joins that pod instead of bringing its own; turning the agent
//! off (deploy/components/without-node-agent, `nodeAgent.enabled: false`) also takes the
//! socket out of the webhook's config, so no cleaner is sent to a socket nobody serves.
//! Without kubectl or helm the tests skip, or fail under PRESTOP_REQUIRE_TOOLS=1.

#[path = "support/chart.rs"]
mod chart;
#[path = "support/deploy.rs"]
mod common;

use common::find;
use prestop_injector::reaper::in_use::OWN_POD_MARKER;
use serde_json::{json, Value};
use std::path::Path;

/// The node's namespace and DaemonSet: kustomize's names, and the chart's for its release.
const NAMESPACE: &str = "prestop-node";
const KUSTOMIZE_DAEMONSET: &str = "prestop-node";
const CHART_DAEMONSET: &str = "prestop-injector-node";
/// Where the agent's container sees its socket's directory, and the node's `/`.
const SOCKET_DIR: &str = "/run/prestop-injector";
const NODE_ROOT: &str = "/node";
/// What deploy/base/config.yaml ends with, and deploy/components/without-node-agent's
/// copy of it leaves out.
const NODE_AGENT_CONFIG: &str = "\
# The node agent (node/daemonset.yaml, on every node): every injected cleaner asks it
# whether the directory it opened is the node's directory at the expected host path.
# Must be that DaemonSet's node-agent-socket hostPath (docs/CONFIG.md#the-node-agent).
# ../components/without-node-agent drops it with the agent (docs/INSTALL.md \"The node
# agent\" says what that gives up).
nodeAgent:
  hostDirectory: /var/run/prestop-injector
";

/// The kustomize installs: the four overlays and the reaper on top of the other two.
fn kustomize_installs(kubectl: &Path) -> Vec<(String, Vec<Value>)> {
    let mut installs: Vec<(String, Vec<Value>)> = common::OVERLAYS
        .iter()
        .map(|overlay| (overlay.to_string(), common::render(kubectl, overlay)))
        .collect();
    for overlay in ["namespace-opt-in", "cert-manager"] {
        installs.push((
            format!("{overlay} + reaper"),
            common::render_kustomization(
                kubectl,
                &format!(
                    "resources: [{{deploy}}/overlays/{overlay}]\n\
                     components: [{{deploy}}/components/reaper]\n"
                ),
            ),
        ));
    }
    installs
}

/// The chart with its defaults, in the other mode, with the reaper, with prefixes.
fn chart_installs(helm: &Path) -> Vec<(String, Vec<Value>)> {
    let sets: [&[&str]; 4] = [
        &[],
        &["--set=mode=namespace-opt-in"],
        &[
            "--set=reaper.enabled=true",
            "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
        ],
        &[
            "--set=certificates.source=cert-manager",
            "--set=config.allowedHostPathPrefixes={/mnt/scratch,/data/tmp}",
        ],
    ];
    sets.iter()
        .map(|values| (format!("chart {values:?}"), chart::render(helm, values)))
        .collect()
}

/// The only DaemonSet of an install.
fn the_daemonset<'a>(label: &str, objects: &'a [Value]) -> &'a Value {
    let daemonsets = chart::of_kind(objects, "DaemonSet");
    assert_eq!(daemonsets.len(), 1, "{label}: one DaemonSet");
    daemonsets[0]
}

fn container<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
}

fn volume<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}: {}", pod["volumes"]))
}

/// The volume a container mounts at `path`, and the mount.
fn mounted_at<'a>(pod: &'a Value, container: &'a Value, path: &str) -> (&'a Value, &'a Value) {
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == path)
        .unwrap_or_else(|| panic!("{} mounts nothing at {path}", container["name"]));
    (volume(pod, mount["name"].as_str().unwrap()), mount)
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// The value after `flag` in a command, and every value of a repeated one.
fn values_of<'a>(command: &[&'a str], flag: &str) -> Vec<&'a str> {
    command
        .windows(2)
        .filter(|pair| pair[0] == flag)
        .map(|pair| pair[1])
        .collect()
}

/// Each of its containers mounts the pod's marker, read-only, at the path the reaper and
/// the agent look for, from an emptyDir of the pod's own.
fn every_container_mounts_the_marker(label: &str, pod: &Value) {
    for container in pod["containers"].as_array().unwrap() {
        let (volume, mount) = mounted_at(pod, container, OWN_POD_MARKER);
        assert_eq!(
            volume["name"], "reaper-pod",
            "{label}: {}: the marker's name",
            container["name"]
        );
        assert_eq!(
            volume["emptyDir"],
            json!({"sizeLimit": "1Mi"}),
            "{label}: {}: the marker is the pod's own emptyDir",
            container["name"]
        );
        assert_eq!(mount["readOnly"], true, "{label}: {}", container["name"]);
    }
}

/// Everything every install's node agent must have; `name` its DaemonSet's.
fn assert_runs_the_node_agent(label: &str, objects: &[Value], name: &str) {
    let daemonset = the_daemonset(label, objects);
    assert_eq!(daemonset["metadata"]["name"], name, "{label}");
    assert_eq!(daemonset["metadata"]["namespace"], NAMESPACE, "{label}");
    let namespace = find(objects, "Namespace", NAMESPACE);
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged",
        "{label}: hostPath and hostPID need `privileged`"
    );
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(
        pod["hostPID"], true,
        "{label}: the agent reads the node's /proc"
    );
    assert_eq!(
        pod["tolerations"],
        json!([{"operator": "Exists"}]),
        "{label}: every node"
    );
    let agent =
        container(pod, "node-agent").unwrap_or_else(|| panic!("{label}: no node-agent container"));
    let command = strings(&agent["command"]);
    // The agent that can also ask the API server whether a pod is ending (issue 31).
    assert_eq!(
        command[..2],
        ["/usr/local/bin/prestop-injector", "node-agent"],
        "{label}"
    );
    assert_eq!(
        agent["env"],
        json!([{"name": "PRESTOP_INJECTOR_NODE_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]),
        "{label}: the node's name from the downward API"
    );
    every_container_mounts_the_marker(label, pod);

    // The node's `/`, read-only, seeing the node's later mounts.
    assert_eq!(values_of(&command, "--host-root"), [NODE_ROOT], "{label}");
    let (root, mount) = mounted_at(pod, agent, NODE_ROOT);
    assert_eq!(
        root["hostPath"],
        json!({"path": "/", "type": "Directory"}),
        "{label}"
    );
    assert_eq!(mount["readOnly"], true, "{label}");
    assert_eq!(mount["mountPropagation"], "HostToContainer", "{label}");

    // Its socket, in the directory the webhook's config names.
    assert_eq!(
        values_of(&command, "--socket"),
        [format!("{SOCKET_DIR}/agent.sock").as_str()],
        "{label}"
    );
    let (socket, mount) = mounted_at(pod, agent, SOCKET_DIR);
    assert_ne!(
        mount["readOnly"], true,
        "{label}: it binds its socket there"
    );
    assert_eq!(socket["hostPath"]["type"], "DirectoryOrCreate", "{label}");
    let config = chart::webhook_config(objects);
    assert_eq!(
        config["nodeAgent"],
        json!({"hostDirectory": socket["hostPath"]["path"]}),
        "{label}: the webhook sends the cleaners to the socket's directory on the node"
    );
    let loaded =
        prestop_injector::config::Config::from_yaml(&serde_yaml::to_string(&config).unwrap())
            .unwrap_or_else(|e| panic!("{label}: the webhook's config loads: {e}"));
    assert_eq!(
        loaded.node_agent.map(|a| a.host_directory),
        Some(socket["hostPath"]["path"].as_str().unwrap().to_owned()),
        "{label}"
    );

    // It answers for the webhook's prefixes (none: for any host path).
    let prefixes: Vec<&str> = config["allowedHostPathPrefixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(values_of(&command, "--allow"), prefixes, "{label}");

    // Probes and metrics on one port of the pod network.
    assert_eq!(
        values_of(&command, "--metrics-listen"),
        ["0.0.0.0:9103"],
        "{label}"
    );
    assert_eq!(
        agent["ports"],
        json!([{"name": "agent-metrics", "containerPort": 9103, "protocol": "TCP"}]),
        "{label}"
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(
            agent[probe]["httpGet"],
            json!({"path": path, "port": "agent-metrics"}),
            "{label}: {probe}"
        );
    }

    // A token, for listing its node's Pods (issue 31): without the reaper, an account of
    // its own whose one rule is exactly that; with it, the reaper's (the_reaper_joins_…).
    assert_eq!(pod["automountServiceAccountToken"], true, "{label}");
    if container(pod, "reaper").is_none() {
        let account = pod["serviceAccountName"].as_str().expect("its own account");
        assert_eq!(
            find(objects, "ServiceAccount", account)["metadata"]["namespace"],
            daemonset["metadata"]["namespace"],
            "{label}"
        );
        let binding = objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding")
            .find(|o| {
                o["subjects"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s["name"] == account))
            })
            .unwrap_or_else(|| panic!("{label}: no ClusterRoleBinding for {account}"));
        let role = binding["roleRef"]["name"].as_str().expect("a role");
        assert_eq!(
            find(objects, "ClusterRole", role)["rules"],
            json!([
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"],
                 "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
            ]),
            "{label}: list and watch Pods, get claims and volumes, create Events (the \
             cleanups' reports, issue 39), nothing else"
        );
    }
}

/// Every overlay, the Component on the other installs, and the chart's defaults (and
/// other values) run the node agent on every node, with the node's PIDs, the pod's
/// marker, its socket's directory and its probes, and the webhook's config names that
/// very directory, so every injected cleaner asks it.
#[test]
fn every_install_runs_the_node_agent() {
    let (Some(kubectl), Some(helm)) = (common::kubectl(), common::helm()) else {
        return;
    };
    for (label, objects) in kustomize_installs(&kubectl) {
        assert_runs_the_node_agent(&label, &objects, KUSTOMIZE_DAEMONSET);
    }
    for (label, objects) in chart_installs(&helm) {
        assert_runs_the_node_agent(&label, &objects, CHART_DAEMONSET);
    }
    // The shipped config file itself ends with the key, as the test's copy says.
    let base = std::fs::read_to_string(common::deploy_dir().join("base/config.yaml")).unwrap();
    assert!(base.ends_with(NODE_AGENT_CONFIG), "{base}");
}

/// With the reaper there is still exactly one DaemonSet: the reaper is a container of
/// the node agent's pod, and every container of that pod mounts the pod's marker (by
/// which each tells its own pod's processes from the node's others). Its service account
/// is in that pod's namespace.
#[test]
fn the_reaper_joins_the_node_agents_pod() {
    let (Some(kubectl), Some(helm)) = (common::kubectl(), common::helm()) else {
        return;
    };
    let mut installs: Vec<(String, Vec<Value>)> = kustomize_installs(&kubectl)
        .into_iter()
        .filter(|(label, _)| label.contains("reaper"))
        .collect();
    assert_eq!(
        installs.len(),
        3,
        "the reaper's overlay and the Component twice"
    );
    for values in [
        &[][..],
        &["--set=nodeAgent.hostDirectory=/run/prestop-agent"][..],
    ] {
        let mut args = vec![
            "--set=reaper.enabled=true",
            "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
        ];
        args.extend(values);
        installs.push((format!("chart {args:?}"), chart::render(&helm, &args)));
    }
    for (label, objects) in &installs {
        let daemonset = the_daemonset(label, objects);
        let pod = &daemonset["spec"]["template"]["spec"];
        let names: Vec<&str> = pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["reaper", "node-agent"], "{label}: one pod, both");
        every_container_mounts_the_marker(label, pod);
        assert_eq!(pod["hostPID"], true, "{label}");
        let account = pod["serviceAccountName"].as_str().expect("the reaper's");
        let account = find(objects, "ServiceAccount", account);
        assert_eq!(
            account["metadata"]["namespace"], daemonset["metadata"]["namespace"],
            "{label}"
        );
        assert_eq!(pod["automountServiceAccountToken"], true, "{label}");
        // The agent's part is whole: its socket is the webhook's, as without the reaper.
        let name = daemonset["metadata"]["name"].as_str().unwrap().to_owned();
        assert_runs_the_node_agent(label, objects, &name);
    }
}

/// `nodeAgent.enabled: false` renders no DaemonSet and no node namespace (unless the
/// reaper still runs there, then without the agent's container and socket), and the
/// webhook's config has no `nodeAgent`: no cleaner is told to ask a socket nobody serves.
/// deploy/components/without-node-agent does the same for kustomize; its config is the
/// base's without the key, and it refuses to combine with the reaper, in either order.
#[test]
fn turning_the_agent_off_drops_the_cleaners_socket() {
    let (Some(kubectl), Some(helm), Some(validator)) = (
        common::kubectl(),
        common::helm(),
        common::kubernetes_validate(),
    ) else {
        return;
    };
    let no_agent = |label: &str, objects: &[Value]| {
        let config = chart::webhook_config(objects);
        assert!(
            config.get("nodeAgent").is_none(),
            "{label}: the webhook still sends cleaners to the agent: {config}"
        );
        assert!(
            !serde_json::to_string(objects)
                .unwrap()
                .contains("node-agent"),
            "{label}: something of the agent is left"
        );
    };
    // The chart, alone and with prefixes: nothing of the node at all.
    for values in [
        &["--set=nodeAgent.enabled=false"][..],
        &[
            "--set=nodeAgent.enabled=false",
            "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
        ][..],
    ] {
        let label = format!("chart {values:?}");
        let objects = chart::render(&helm, values);
        no_agent(&label, &objects);
        assert!(chart::of_kind(&objects, "DaemonSet").is_empty(), "{label}");
        assert!(
            !objects
                .iter()
                .any(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == NAMESPACE),
            "{label}: the node's namespace"
        );
    }
    // The chart with the reaper: its pod alone, still with the marker and hostPID.
    let values = [
        "--set=nodeAgent.enabled=false",
        "--set=reaper.enabled=true",
        "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
    ];
    let label = format!("chart {values:?}");
    let objects = chart::render(&helm, &values);
    common::validate(&validator, "chart-reaper-without-agent", &objects);
    let pod = &the_daemonset(&label, &objects)["spec"]["template"]["spec"];
    let names: Vec<&Value> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, [&json!("reaper")], "{label}");
    assert!(
        !pod["volumes"].to_string().contains("node-agent-socket"),
        "{label}"
    );
    every_container_mounts_the_marker(&label, pod);
    assert_eq!(pod["hostPID"], true, "{label}");
    let config = chart::webhook_config(&objects);
    assert!(config.get("nodeAgent").is_none(), "{label}: {config}");

    // kustomize: the Component, on each install without the reaper.
    let component = common::deploy_dir().join("components/without-node-agent/config.yaml");
    let base = std::fs::read_to_string(common::deploy_dir().join("base/config.yaml")).unwrap();
    assert_eq!(
        std::fs::read_to_string(component).unwrap(),
        base.strip_suffix(NODE_AGENT_CONFIG).unwrap(),
        "without-node-agent/config.yaml is base/config.yaml without nodeAgent"
    );
    for overlay in ["cluster-wide", "namespace-opt-in", "cert-manager"] {
        let label = format!("{overlay} without the node agent");
        let objects = common::render_kustomization(
            &kubectl,
            &format!(
                "resources: [{{deploy}}/overlays/{overlay}]\n\
                 components: [{{deploy}}/components/without-node-agent]\n"
            ),
        );
        common::validate(&validator, &label.replace(' ', "-"), &objects);
        no_agent(&label, &objects);
        let left: Vec<String> = objects
            .iter()
            .filter(|o| {
                o["kind"] == "DaemonSet"
                    || o["metadata"]["namespace"] == NAMESPACE
                    || o["metadata"]["name"] == NAMESPACE
            })
            .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
            .collect();
        assert!(left.is_empty(), "{label}: {left:?}");
        // The rest of the install is untouched.
        let with = common::render(&kubectl, overlay);
        let webhook = |objects: &[Value]| {
            let view = chart::security_view(objects);
            json!([view["MutatingWebhookConfiguration"], view["Deployment"]])
        };
        assert_eq!(webhook(&objects), webhook(&with), "{label}");
    }
    for components in [
        "[{deploy}/components/reaper, {deploy}/components/without-node-agent]",
        "[{deploy}/components/without-node-agent, {deploy}/components/reaper]",
    ] {
        let text =
            format!("resources: [{{deploy}}/overlays/cluster-wide]\ncomponents: {components}\n");
        let rendered = common::try_render_kustomization(&kubectl, &text);
        assert!(
            rendered.is_err(),
            "{components}: the reaper without its pod rendered"
        );
    }
}

/// The node agent: the same image as the webhook, the node's `/` read-only (seeing disks
/// mounted later), its socket in the webhook's nodeAgent.hostDirectory, `--allow` exactly
/// the webhook's prefixes, and of root's powers only searching directories.
#[test]
fn the_node_agent_runs_with_only_what_resolving_host_paths_needs() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for overlay in common::OVERLAYS {
        let objects = common::render(&kubectl, overlay);
        let pod = &find(&objects, "DaemonSet", KUSTOMIZE_DAEMONSET)["spec"]["template"]["spec"];
        let agent = container(pod, "node-agent").expect("the node agent");
        let deployment = find(&objects, "Deployment", "prestop-injector");
        assert_eq!(
            agent["image"], deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "{overlay}"
        );
        // As shipped, the webhook allows no prefix, and the agent is given none.
        assert_eq!(
            agent["command"],
            json!([
                "/usr/local/bin/prestop-injector",
                "node-agent",
                "--host-root",
                NODE_ROOT,
                "--socket",
                format!("{SOCKET_DIR}/agent.sock"),
                "--metrics-listen",
                "0.0.0.0:9103",
            ]),
            "{overlay}"
        );
        assert!(agent.get("args").is_none());
        assert_eq!(
            pod["securityContext"],
            json!({
                "runAsUser": 0,
                "runAsGroup": 0,
                "runAsNonRoot": false,
                "seccompProfile": {"type": "RuntimeDefault"},
            }),
            "{overlay}"
        );
        assert_eq!(
            agent["securityContext"],
            json!({
                "privileged": false,
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"], "add": ["DAC_READ_SEARCH"]},
            }),
            "{overlay}"
        );
        assert_eq!(
            agent["volumeMounts"],
            json!([
                {"name": "node-root", "mountPath": NODE_ROOT, "readOnly": true,
                 "mountPropagation": "HostToContainer"},
                {"name": "node-agent-socket", "mountPath": SOCKET_DIR},
                {"name": "reaper-pod", "mountPath": OWN_POD_MARKER, "readOnly": true},
            ]),
            "{overlay}"
        );
        assert_eq!(
            agent["resources"],
            json!({"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}),
            "{overlay}"
        );
        assert!(agent.get("lifecycle").is_none(), "{overlay}: lifecycle");
        for key in ["hostNetwork", "hostIPC"] {
            assert_ne!(pod[key], true, "{overlay}: {key}");
        }
        // Never two agents on one node: both would bind the one socket.
        let strategy = &find(&objects, "DaemonSet", KUSTOMIZE_DAEMONSET)["spec"]["updateStrategy"];
        assert_eq!(strategy["rollingUpdate"]["maxSurge"], 0, "{overlay}");
        // The agent's own volumes: the node's `/`, its socket and the marker; nothing else
        // without the reaper.
        if container(pod, "reaper").is_none() {
            let names: Vec<&str> = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["name"].as_str().unwrap())
                .collect();
            assert_eq!(
                names,
                ["reaper-pod", "node-root", "node-agent-socket"],
                "{overlay}"
            );
        }
    }
    // docs/INSTALL.md "Your prefixes": the patch that gives it one `--allow` per prefix.
    let objects = common::render_kustomization(
        &kubectl,
        "resources: [{deploy}/overlays/cluster-wide]\n\
         patches:\n\
         - target: {kind: DaemonSet, name: prestop-node}\n  \
           patch: |-\n    \
             - {op: test, path: /spec/template/spec/containers/0/name, value: node-agent}\n    \
             - {op: add, path: /spec/template/spec/containers/0/command/-, value: --allow}\n    \
             - {op: add, path: /spec/template/spec/containers/0/command/-, value: /mnt/scratch}\n",
    );
    let pod = &find(&objects, "DaemonSet", KUSTOMIZE_DAEMONSET)["spec"]["template"]["spec"];
    let command = strings(&container(pod, "node-agent").unwrap()["command"]);
    assert_eq!(values_of(&command, "--allow"), ["/mnt/scratch"]);
}

/// hostPath volumes and hostPID need Pod Security `privileged`: the node's pods get their
/// own namespace that enforces it (audit and warn stay `restricted`), and the webhook's
/// prestop-system enforces `restricted` in every install, with the reaper or without it.
#[test]
fn the_node_namespace_is_privileged_and_prestop_system_stays_restricted() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for (label, objects) in kustomize_installs(&kubectl) {
        let labels = &find(&objects, "Namespace", "prestop-system")["metadata"]["labels"];
        assert_eq!(
            labels["pod-security.kubernetes.io/enforce"], "restricted",
            "{label}: prestop-system"
        );
        for mode in ["audit", "warn"] {
            let value = &labels[format!("pod-security.kubernetes.io/{mode}")];
            assert!(
                value.is_null() || value == "restricted",
                "{label}: prestop-system {mode} {value}"
            );
        }
        assert_eq!(
            find(&objects, "Namespace", NAMESPACE)["metadata"]["labels"],
            json!({
                "app.kubernetes.io/name": "prestop-node",
                "app.kubernetes.io/part-of": "prestop-injector",
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/audit": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
            }),
            "{label}: {NAMESPACE}"
        );
        // Only the node's pods in it: the webhook's stay in prestop-system.
        let deployment = find(&objects, "Deployment", "prestop-injector");
        assert_eq!(deployment["metadata"]["namespace"], "prestop-system");
    }
}

/// A `namespace:` over an install would rename both Namespaces to one name; kustomize
/// refuses that, so the node's privileged pods cannot be folded into the webhook's
/// namespace (or any other) without anyone noticing.
#[test]
fn a_namespace_over_an_install_fails_to_render() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for overlay in ["cluster-wide", "cluster-wide-with-reaper"] {
        for namespace in ["prestop-system", "elsewhere"] {
            let text =
                format!("resources: [{{deploy}}/overlays/{overlay}]\nnamespace: {namespace}\n");
            let stderr = common::try_render_kustomization(&kubectl, &text)
                .err()
                .unwrap_or_else(|| panic!("{overlay}: namespace: {namespace} rendered"));
            assert!(stderr.contains("ID conflict"), "{namespace}: {stderr}");
        }
    }
}
