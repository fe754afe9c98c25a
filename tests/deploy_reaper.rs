//! The node reaper's packaging (deploy/components/reaper, docs/DESIGN.md#the-node-reaper): it
//! renders and validates with every install, joins the node agent's pod (DaemonSet
//! prestop-node in the `privileged` namespace prestop-node, deploy/base/node) and changes
//! nothing else of it, starts in --dry-run, mounts exactly the host directories it may
//! clean, has exactly the API access and the capabilities docs/INSTALL.md lists, and runs
//! the webhook's image. The node agent's own packaging: tests/deploy_node_agent.rs.

#[path = "support/deploy.rs"]
mod common;

use common::find;
use prestop_injector::config::Config;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const OVERLAY: &str = "cluster-wide-with-reaper";
const STATE_DIR: &str = "/var/lib/prestop-injector/reaper";
const HOST_ROOT: &str = "/host";
/// Where the node's `/` is mounted, read-only, for resolving pods' host paths.
const NODE_ROOT: &str = "/node";
/// The node's namespace and DaemonSet (deploy/base/node), whose pod the reaper joins; the
/// webhook's namespace stays prestop-system.
const NAMESPACE: &str = "prestop-node";
const DAEMONSET: &str = "prestop-node";
/// The node agent's container (it sees the node's `/` at NODE_ROOT too).
const NODE_AGENT: &str = "node-agent";
/// The volumes the reaper's patch adds (components/reaper/daemonset.yaml): the prefixes
/// (`scratch-…`), its state, its config and the seal key.
const REAPER_VOLUMES: [&str; 3] = ["state", "config", "seal"];

fn component_dir() -> PathBuf {
    common::deploy_dir().join("components/reaper")
}

/// reaper-config.yaml as shipped: a normal config file.
fn shipped_config() -> (String, Config) {
    let text = std::fs::read_to_string(component_dir().join("reaper-config.yaml")).unwrap();
    let config = Config::from_yaml(&text).expect("reaper-config.yaml is a valid config");
    (text, config)
}

fn daemonset(objects: &[Value]) -> &Value {
    find(objects, "DaemonSet", DAEMONSET)
}

/// The reaper pod's containers: the reaper, then the node agent.
fn containers(objects: &[Value]) -> &[Value] {
    let containers = daemonset(objects)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers is a list");
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reaper", NODE_AGENT], "the reaper pod's containers");
    containers
}

fn container(objects: &[Value]) -> &Value {
    &containers(objects)[0]
}

fn node_agent(objects: &[Value]) -> &Value {
    &containers(objects)[1]
}

fn args(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .expect("args is a list")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

/// The value of `--name=VALUE` in `args`.
fn flag<'a>(args: &[&'a str], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(prefix.as_str()))
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}/{}",
        object["kind"].as_str().unwrap(),
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap()
    )
}

/// What the Component adds, by kind/namespace/name (the ConfigMap's hash suffix cut): the
/// reaper's own objects in the node's namespace, the Events Role and RoleBinding in
/// `default`, and the cluster-wide RBAC. (No Namespace and no DaemonSet: those are the
/// node agent's, which every install has.)
fn reaper_keys() -> BTreeSet<String> {
    [
        "ServiceAccount/prestop-node/prestop-reaper",
        "ClusterRole//prestop-reaper",
        "ClusterRoleBinding//prestop-reaper",
        "Role/default/prestop-reaper-events",
        "RoleBinding/default/prestop-reaper-events",
        "ConfigMap/prestop-node/prestop-reaper-config",
    ]
    .map(String::from)
    .into()
}

/// What the Component removes: the node agent's own account and its RBAC, since the pod
/// runs as the reaper's, whose rules include the agent's (list Pods).
fn agent_keys() -> BTreeSet<String> {
    [
        "ServiceAccount/prestop-node/prestop-node",
        "ClusterRole//prestop-node",
        "ClusterRoleBinding//prestop-node",
    ]
    .map(String::from)
    .into()
}

fn without_hash(key: String) -> String {
    match key.strip_prefix("ConfigMap/prestop-node/prestop-reaper-config-") {
        Some(_) => "ConfigMap/prestop-node/prestop-reaper-config".to_owned(),
        None => key,
    }
}

/// The node DaemonSet of an install with the reaper, with all the reaper's patch adds taken
/// out again: its container, its volumes, its service account and token.
fn without_the_reaper(daemonset: &Value) -> Value {
    let mut daemonset = daemonset.clone();
    let pod = &mut daemonset["spec"]["template"]["spec"];
    let pod = pod.as_object_mut().unwrap();
    pod.insert("serviceAccountName".into(), json!("prestop-node"));
    pod["containers"]
        .as_array_mut()
        .unwrap()
        .retain(|c| c["name"] != "reaper");
    pod["volumes"].as_array_mut().unwrap().retain(|v| {
        let name = v["name"].as_str().unwrap();
        !REAPER_VOLUMES.contains(&name) && !name.starts_with("scratch-")
    });
    daemonset
}

/// Every install with the reaper, as docs/INSTALL.md shows them: its own overlay and the
/// Component on top of the other two installs; each with the same install without it.
fn installs_with_reaper(kubectl: &Path) -> [(&'static str, Vec<Value>, Vec<Value>); 3] {
    [
        (
            OVERLAY,
            common::render(kubectl, OVERLAY),
            common::render(kubectl, "cluster-wide"),
        ),
        (
            "namespace-opt-in + reaper",
            common::render_kustomization(
                kubectl,
                "resources: [{deploy}/overlays/namespace-opt-in]\n\
                 components: [{deploy}/components/reaper]\n",
            ),
            common::render(kubectl, "namespace-opt-in"),
        ),
        (
            "cert-manager + reaper",
            common::render_kustomization(
                kubectl,
                "resources: [{deploy}/overlays/cert-manager]\n\
                 components: [{deploy}/components/reaper]\n",
            ),
            common::render(kubectl, "cert-manager"),
        ),
    ]
}

/// The Component adds exactly its objects, changes no object of the install but the node
/// DaemonSet (the prestop-system and prestop-node Namespaces included: their Pod Security
/// labels stay as they are; the webhook's config too), adds to that DaemonSet only the
/// reaper's container, volumes and service account (the node agent's container stays as
/// it was), and the result validates strictly, on its own overlay and combined with the
/// other two installs as docs/INSTALL.md shows.
#[test]
fn the_reaper_renders_validates_and_adds_only_its_objects() {
    let (Some(kubectl), Some(validator)) = (common::kubectl(), common::kubernetes_validate())
    else {
        return;
    };
    for (label, with, without) in &installs_with_reaper(&kubectl) {
        let label = label.replace(' ', "");
        common::validate(&validator, &label, with);
        let before: BTreeSet<String> = without.iter().map(key).collect();
        let after: BTreeSet<String> = with.iter().map(key).map(without_hash).collect();
        let added: BTreeSet<String> = after.difference(&before).cloned().collect();
        assert_eq!(added, reaper_keys(), "{label}: objects the reaper adds");
        let removed: BTreeSet<String> = before.difference(&after).cloned().collect();
        assert_eq!(
            removed,
            agent_keys(),
            "{label}: the reaper removes only the agent's account, whose rules it has"
        );
        for object in without.iter().filter(|o| !agent_keys().contains(&key(o))) {
            let rendered = with.iter().find(|o| key(o) == key(object)).unwrap();
            if object["kind"] == "DaemonSet" {
                assert_ne!(
                    rendered,
                    object,
                    "{label}: the reaper joins {}",
                    key(object)
                );
                assert_eq!(
                    without_the_reaper(rendered),
                    *object,
                    "{label}: the reaper changed more of {} than its own",
                    key(object)
                );
                continue;
            }
            assert_eq!(
                rendered,
                object,
                "{label}: the reaper changed {}",
                key(object)
            );
        }
    }
}

/// The reaper's patch puts its container and volumes first, where docs/INSTALL.md's
/// patches (and e2e/install) find them: `containers/0/args/6` is `--dry-run`,
/// `volumes/0` the prefix, `volumes/1` the state directory.
#[test]
fn the_reaper_is_first_in_the_pod_where_the_documented_patches_look() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for (label, objects, _) in &installs_with_reaper(&kubectl) {
        let pod = &daemonset(objects)["spec"]["template"]["spec"];
        assert_eq!(pod["containers"][0]["name"], "reaper", "{label}");
        assert_eq!(pod["containers"][0]["args"][6], "--dry-run", "{label}");
        assert_eq!(
            pod["volumes"][0]["hostPath"],
            json!({"path": "/mnt/scratch", "type": "Directory"}),
            "{label}"
        );
        assert_eq!(
            pod["containers"][0]["volumeMounts"][0],
            json!({"name": pod["volumes"][0]["name"], "mountPath": "/host/mnt/scratch",
                   "mountPropagation": "None"}),
            "{label}"
        );
        assert_eq!(pod["volumes"][1]["hostPath"]["path"], STATE_DIR, "{label}");
    }
}

/// Every namespaced object of the reaper is in prestop-node, the namespace of the pod it
/// joins, except the Events Role and RoleBinding (in `default`, where Node events are);
/// nothing but the node's DaemonSet and its Namespace, its NetworkPolicy and the
/// reaper's objects is in prestop-node, and nothing of the reaper in prestop-system. For every install with the
/// reaper.
#[test]
fn every_reaper_object_is_in_the_node_namespace() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let cluster_scoped = ["ClusterRole", "ClusterRoleBinding"];
    for (label, with, _) in &installs_with_reaper(&kubectl) {
        let reaper: Vec<&Value> = with
            .iter()
            .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/name"] == "prestop-reaper")
            .collect();
        let keys: BTreeSet<String> = reaper.iter().map(|o| without_hash(key(o))).collect();
        assert_eq!(keys, reaper_keys(), "{label}: the reaper's objects");
        for object in &reaper {
            let kind = object["kind"].as_str().unwrap();
            let namespace = &object["metadata"]["namespace"];
            if cluster_scoped.contains(&kind) {
                assert!(namespace.is_null(), "{label}: {}", key(object));
            } else if kind == "Role" || kind == "RoleBinding" {
                assert_eq!(namespace, "default", "{label}: {}", key(object));
            } else {
                assert_eq!(namespace, NAMESPACE, "{label}: {}", key(object));
            }
        }
        let daemonset = daemonset(with);
        assert_eq!(daemonset["metadata"]["namespace"], NAMESPACE, "{label}");
        for object in with {
            // The node pod's NetworkPolicy (issue 39) selects the DaemonSet's pods.
            if object["metadata"]["namespace"] == NAMESPACE && object["kind"] != "NetworkPolicy" {
                assert!(
                    reaper.contains(&object) || object == daemonset,
                    "{label}: {} is neither the node's DaemonSet nor a reaper object",
                    key(object)
                );
            }
        }
        // The pods follow their DaemonSet; nothing in the template points elsewhere.
        let template = &daemonset["spec"]["template"];
        assert!(template["metadata"]["namespace"].is_null(), "{label}");
    }
}

#[test]
fn the_reaper_starts_in_dry_run_with_the_documented_flags() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, OVERLAY);
    let container = container(&objects);
    let args = args(container);
    assert_eq!(args[0], "reap", "{args:?}");
    assert!(
        args.contains(&"--dry-run"),
        "the first install only reports: {args:?}"
    );
    assert_eq!(flag(&args, "host-root"), Some(HOST_ROOT));
    assert_eq!(flag(&args, "node-root"), Some(NODE_ROOT));
    assert_eq!(flag(&args, "log-format"), Some("json"));
    assert_eq!(flag(&args, "metrics-listen"), Some("0.0.0.0:9102"));
    // Events go to "default" (the flag's default), where rbac.yaml's Role is.
    assert_eq!(flag(&args, "event-namespace"), None);
    let state = flag(&args, "state-file").expect("--state-file");
    assert_eq!(state, format!("{STATE_DIR}/state.json"));
    // docs/INSTALL.md "Dry run first": the documented patch removes args/6.
    assert_eq!(args[6], "--dry-run", "{args:?}");

    let mounts = container["volumeMounts"].as_array().unwrap();
    let mount = |volume: &str| {
        mounts
            .iter()
            .find(|m| m["name"] == volume)
            .unwrap_or_else(|| panic!("no mount of {volume}"))
    };
    let config = mount("config");
    assert_eq!(config["readOnly"], true);
    assert_eq!(
        flag(&args, "config"),
        Some(format!("{}/config.yaml", config["mountPath"].as_str().unwrap()).as_str())
    );
    // The config mounted is reaper-config.yaml, byte for byte.
    let pod = &daemonset(&objects)["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .unwrap();
    let config_map = find(
        &objects,
        "ConfigMap",
        volume["configMap"]["name"].as_str().unwrap(),
    );
    assert_eq!(config_map["data"]["config.yaml"], shipped_config().0);

    // The seal key (docs/REAPER.md#the-seal): the webhook's, copied into this namespace
    // as prestop-reaper-seal, mounted read-only and readable by root alone.
    let seal = mount("seal");
    assert_eq!(seal["readOnly"], true);
    assert_eq!(
        flag(&args, "seal-key-file"),
        Some(format!("{}/seal.key", seal["mountPath"].as_str().unwrap()).as_str())
    );
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "seal")
        .unwrap();
    assert_eq!(
        volume["secret"],
        json!({"secretName": "prestop-reaper-seal", "defaultMode": 0o400})
    );

    let env: Vec<(&str, &str)> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        env,
        [
            ("PRESTOP_INJECTOR_NODE_NAME", "spec.nodeName"),
            ("PRESTOP_INJECTOR_POD_NAME", "metadata.name"),
            ("PRESTOP_INJECTOR_POD_NAMESPACE", "metadata.namespace"),
        ]
    );

    let ports = container["ports"].as_array().unwrap();
    assert_eq!(
        *ports,
        [json!({"name": "metrics", "containerPort": 9102, "protocol": "TCP"})]
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "metrics"})
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "metrics"})
    );
    assert_eq!(
        container["resources"],
        json!({"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}})
    );

    // One reaper on every node, tainted or not; never two on one node.
    let spec = &daemonset(&objects)["spec"];
    assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
    assert_eq!(spec["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(spec["updateStrategy"]["rollingUpdate"]["maxSurge"], 0);
    assert_eq!(pod["serviceAccountName"], "prestop-reaper");
    assert_eq!(pod["automountServiceAccountToken"], true);
    assert!(pod.get("priorityClassName").is_none());
    assert!(pod.get("initContainers").is_none());
}

/// The reaper can write on the host exactly the directories it may clean, plus its state
/// directory: one hostPath volume per allowedHostPathPrefixes entry, at /host + prefix.
/// The rest of the node it sees read-only, at /node: to resolve pods' host paths.
#[test]
fn every_allowed_prefix_is_mounted_writable_and_the_node_read_only() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let (_, config) = shipped_config();
    let prefixes = &config.allowed_host_path_prefixes;
    let objects = common::render(&kubectl, OVERLAY);
    let pod = &daemonset(&objects)["spec"]["template"]["spec"];
    let mounts = container(&objects)["volumeMounts"].as_array().unwrap();
    let volumes = pod["volumes"].as_array().unwrap();

    let agent_mounts = node_agent(&objects)["volumeMounts"].as_array().unwrap();
    let mut host_paths = BTreeSet::new();
    for volume in volumes {
        let name = volume["name"].as_str().unwrap();
        // The node's `/`: read-only wherever it is mounted.
        if name == "node-root" {
            assert_eq!(
                volume["hostPath"],
                json!({"path": "/", "type": "Directory"})
            );
            let used: Vec<&Value> = mounts
                .iter()
                .chain(agent_mounts)
                .filter(|m| m["name"] == name)
                .collect();
            assert!(!used.is_empty(), "node-root is mounted");
            // The reaper's own view, for "in use": seeing the node's later mounts.
            let reapers: Vec<&Value> = mounts.iter().filter(|m| m["name"] == name).collect();
            assert_eq!(reapers.len(), 1, "the reaper mounts the node's root once");
            assert_eq!(reapers[0]["mountPath"], NODE_ROOT);
            assert_eq!(reapers[0]["mountPropagation"], "HostToContainer");
            for mount in used {
                assert_eq!(mount["readOnly"], true, "{mount}");
                assert!(mount.get("subPath").is_none() && mount.get("subPathExpr").is_none());
                assert_ne!(mount["mountPropagation"], "Bidirectional", "{mount}");
            }
            continue;
        }
        // The node agent's socket directory: the agent's alone.
        if name == "node-agent-socket" {
            assert!(
                mounts.iter().all(|m| m["name"] != name),
                "the reaper does not mount the agent's socket directory"
            );
            let path = volume["hostPath"]["path"].as_str().unwrap();
            assert!(host_paths.insert(path.to_owned()), "{path} twice");
            assert_eq!(volume["hostPath"]["type"], "DirectoryOrCreate");
            continue;
        }
        let fields: BTreeSet<&str> = volume
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let Some(host) = volume.get("hostPath") else {
            if name == "reaper-pod" {
                // The pod's marker: the same empty directory, read-only, in both
                // containers, at the path the reaper looks for.
                assert_eq!(volume["emptyDir"], json!({"sizeLimit": "1Mi"}));
                let marker = json!({"name": "reaper-pod", "readOnly": true,
                    "mountPath": prestop_injector::reaper::in_use::OWN_POD_MARKER});
                assert!(mounts.contains(&marker), "{mounts:?}");
                assert!(agent_mounts.contains(&marker), "{agent_mounts:?}");
                continue;
            }
            let expected = match name {
                "seal" => BTreeSet::from(["name", "secret"]),
                _ => BTreeSet::from(["name", "configMap"]),
            };
            assert!(
                ["config", "seal"].contains(&name) && fields == expected,
                "a volume that is no hostPath is the config, the seal key or the pod's \
                 marker: {name} {fields:?}"
            );
            continue;
        };
        let path = host["path"].as_str().unwrap();
        assert!(host_paths.insert(path.to_owned()), "{path} twice");
        let used: Vec<&Value> = mounts.iter().filter(|m| m["name"] == name).collect();
        assert_eq!(used.len(), 1, "{name} is mounted once: {used:?}");
        let mount = used[0];
        assert!(mount.get("subPath").is_none() && mount.get("subPathExpr").is_none());
        assert_ne!(mount["readOnly"], true, "{name}: the reaper writes there");
        if path == STATE_DIR {
            assert_eq!(host["type"], "DirectoryOrCreate");
            assert_eq!(mount["mountPath"], STATE_DIR);
        } else {
            assert!(
                prefixes.iter().any(|p| p == path),
                "hostPath {path} is not in allowedHostPathPrefixes {prefixes:?}: \
                 the reaper must reach nothing it may not clean"
            );
            assert_eq!(host["type"], "Directory", "{path}: never created by us");
            assert_eq!(mount["mountPath"], format!("{HOST_ROOT}{path}"));
            assert_eq!(mount["mountPropagation"], "None", "{path}");
        }
    }
    let expected: BTreeSet<String> = prefixes
        .iter()
        .cloned()
        .chain([STATE_DIR.to_owned()])
        .chain([prestop_injector::config::DEFAULT_NODE_AGENT_DIRECTORY.to_owned()])
        .collect();
    assert_eq!(
        host_paths, expected,
        "every allowedHostPathPrefixes entry has its hostPath volume, and the node's root \
         is mounted"
    );
    // Every mount of the reaper is one of those volumes, the config, the seal key or the
    // pod's marker, or the node's `/` (read-only): nothing else reaches the host.
    let own = |m: &&Value| m["name"] != "node-root" && m["name"] != "node-agent-socket";
    assert_eq!(
        mounts.iter().filter(own).count(),
        volumes.iter().filter(own).count(),
        "{mounts:?}"
    );
    for key in ["hostNetwork", "hostIPC"] {
        assert_ne!(pod[key], true, "{key}");
    }
    // The node's processes, for "in use" by identity (their mountinfo); nothing else of
    // them: no capability to trace or enter them.
    assert_eq!(
        pod["hostPID"], true,
        "in use is decided from the node's mountinfo"
    );
}

/// A normal config file, with the prefixes the reaper needs to start, none of them a
/// protected path, and never wider than the webhook's own prefixes.
#[test]
fn the_reaper_config_loads_and_allows_only_cleanable_prefixes() {
    let (_, config) = shipped_config();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    assert!(
        !config.allowed_host_path_prefixes.is_empty(),
        "the reaper refuses to start without allowedHostPathPrefixes"
    );
    for prefix in &config.allowed_host_path_prefixes {
        assert!(
            !prestop_injector::mutation::targets::is_protected_host_path(
                prefix,
                &config.protected_host_paths
            ),
            "{prefix} is (or contains) a protected host path: mounting it would expose it"
        );
    }
    let webhook = std::fs::read_to_string(common::deploy_dir().join("base/config.yaml")).unwrap();
    let webhook = Config::from_yaml(&webhook).unwrap();
    // The webhook ships with no prefixes (nothing is deleted until the operator names
    // them); the reaper's then are a placeholder, and only while it reports and deletes
    // nothing (`--dry-run`).
    let daemonset =
        std::fs::read_to_string(common::deploy_dir().join("components/reaper/daemonset.yaml"))
            .unwrap();
    let placeholder = webhook.allowed_host_path_prefixes.is_empty()
        && daemonset.lines().any(|line| line.trim() == "- --dry-run");
    for prefix in &config.allowed_host_path_prefixes {
        let covered = placeholder
            || webhook
                .allowed_host_path_prefixes
                .iter()
                .any(|w| Path::new(prefix).starts_with(w));
        assert!(
            covered,
            "{prefix} is outside the webhook's {:?}",
            webhook.allowed_host_path_prefixes
        );
    }
    assert_eq!(
        config.protected_host_paths, webhook.protected_host_paths,
        "the reaper protects what the webhook protects"
    );
}

/// Exactly pods get/list/watch, claims and volumes get and events create cluster-wide
/// (the node agent's reports, issue 39), and events create in `default`; the full lists are compared so that any widening fails here.
#[test]
fn the_reaper_may_read_pods_and_claims_and_create_events_and_nothing_else() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for (label, objects, _) in &installs_with_reaper(&kubectl) {
        let cluster_role = find(objects, "ClusterRole", "prestop-reaper");
        assert_eq!(
            cluster_role["rules"],
            json!([
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"],
                 "verbs": ["get"]},
                // The node agent of the same pod: reports as Events on pods (issue 39).
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
            ]),
            "{label}"
        );
        assert!(cluster_role.get("aggregationRule").is_none());
        let role = find(objects, "Role", "prestop-reaper-events");
        assert_eq!(role["metadata"]["namespace"], "default");
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}])
        );
        let subject = json!([{
            "kind": "ServiceAccount",
            "name": "prestop-reaper",
            "namespace": NAMESPACE,
        }]);
        for (kind, name, role_kind, namespace) in [
            (
                "ClusterRoleBinding",
                "prestop-reaper",
                "ClusterRole",
                Value::Null,
            ),
            (
                "RoleBinding",
                "prestop-reaper-events",
                "Role",
                json!("default"),
            ),
        ] {
            let binding = find(objects, kind, name);
            assert_eq!(
                binding["metadata"]["namespace"], namespace,
                "{label}: {kind}"
            );
            assert_eq!(binding["subjects"], subject, "{label}: {kind}");
            assert_eq!(
                binding["roleRef"],
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name}),
                "{label}: {kind}"
            );
        }
        // No other RBAC object anywhere in the install (the webhook has none).
        let rbac: Vec<String> = objects
            .iter()
            .filter(|o| {
                o["apiVersion"]
                    .as_str()
                    .unwrap()
                    .starts_with("rbac.authorization.k8s.io/")
            })
            .map(key)
            .collect();
        assert_eq!(rbac.len(), 4, "{label}: {rbac:?}");
        let account = find(objects, "ServiceAccount", "prestop-reaper");
        assert_eq!(account["metadata"]["namespace"], NAMESPACE);
        assert_eq!(
            daemonset(objects)["spec"]["template"]["spec"]["serviceAccountName"],
            account["metadata"]["name"]
        );
        assert_eq!(
            daemonset(objects)["metadata"]["namespace"],
            account["metadata"]["namespace"]
        );
    }
}

/// Root with all capabilities dropped but the three that becoming a gone pod's user
/// (SETUID, SETGID) and reading below the prefixes (DAC_READ_SEARCH) need: no right to
/// delete others' files (issue 26: the walk has the pod's own rights), nothing
/// privileged.
#[test]
fn the_reaper_runs_as_root_with_only_the_capabilities_to_become_the_pods_user() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, OVERLAY);
    let pod = &daemonset(&objects)["spec"]["template"]["spec"];
    assert_eq!(
        pod["securityContext"],
        json!({
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": false,
            "seccompProfile": {"type": "RuntimeDefault"},
        })
    );
    assert_eq!(
        container(&objects)["securityContext"],
        json!({
            "privileged": false,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"], "add": ["DAC_READ_SEARCH", "SETGID", "SETUID"]},
        })
    );
}

/// The reaper runs the webhook's release: the base's `images:` (and a user's own
/// `images:` on top) reach the DaemonSet too.
#[test]
fn the_reaper_image_is_the_deployments_image() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let image = |objects: &[Value]| {
        let deployment = find(objects, "Deployment", "prestop-injector");
        let deployed = deployment["spec"]["template"]["spec"]["containers"][0]["image"].clone();
        assert_eq!(container(objects)["image"], deployed);
        assert_eq!(node_agent(objects)["image"], deployed);
        deployed
    };
    let shipped = image(&common::render(&kubectl, OVERLAY));
    assert_eq!(
        shipped,
        json!(prestop_injector::config::DEFAULT_CLEANER_IMAGE)
    );
    let mirrored = common::render_kustomization(
        &kubectl,
        "resources: [{deploy}/overlays/cluster-wide-with-reaper]\n\
         images:\n\
         - name: ghcr.io/prestop-injector/prestop-injector\n  \
           newName: registry.example.com/prestop-injector\n  \
           newTag: 9.9.9\n",
    );
    assert_eq!(
        image(&mirrored),
        json!("registry.example.com/prestop-injector:9.9.9")
    );
}
