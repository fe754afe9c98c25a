//! Issue 31, class 3: a sandbox recreation restarts the whole pod in place
//! (`computePodActions`: `KillPod` + `CreateSandbox`, for every `restartPolicy` but
//! `Never`). The kubelet stops every container in termination order, our cleanup sidecar
//! with SIGTERM, and starts them all again on the same volumes: inside the pod that is
//! the pod's end. So the sidecar of such a pod carries `--restartable` and cleans only on
//! the node agent's word that the pod is ending (`cleaner/tests/sidecar.rs`,
//! `src/node_agent/ending.rs`, e2e/reaper `restartable_pod_ends_on_the_nodes_word`); the
//! admission says where it cannot get that word.

mod core_support;

use core_support::*;
use prestop_injector::config::Config;
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

/// A cluster that runs the cleanup sidecar, with or without the node agent, in `mode`.
fn config(agent: bool, mode: &str) -> Config {
    let mut yaml = format!("kubernetesVersion: \"1.30\"\ncleaner: {{mode: {mode}}}\n");
    if agent {
        yaml.push_str("nodeAgent: {}\n");
    }
    test_config_with(&yaml)
}

/// A Job (or with `pod`, a bare Pod) asking for `cleanup: /data`, hostPath
/// `/scratch/run`, its pod's `restartPolicy` set to `policy` (`None`: unset).
fn workload(policy: Option<&str>, pod: bool) -> Value {
    let mut object = job(
        json!({"prestop-injector.io/cleanup": "/data", "prestop-injector.io/mode": "sidecar"}),
        json!({"name": "worker", "image": "busybox:1.36", "command": ["sh", "-c", "work"],
            "securityContext": {"runAsUser": 1000},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}),
        json!([{"name": "data", "hostPath": {"path": "/scratch/run", "type": "DirectoryOrCreate"}}]),
    );
    let spec = &mut object["spec"]["template"]["spec"];
    match policy {
        Some(policy) => spec["restartPolicy"] = json!(policy),
        None => {
            spec.as_object_mut().expect("spec").remove("restartPolicy");
        }
    }
    if pod {
        let annotations = object["metadata"]["annotations"].clone();
        let spec = object["spec"]["template"]["spec"].take();
        object = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "one", "annotations": annotations}, "spec": spec});
    }
    object
}

/// The command of our sidecar, empty when the pod has none.
fn sidecar_argv(object: &Value) -> Vec<String> {
    let spec = object
        .pointer("/spec/template/spec")
        .unwrap_or_else(|| &object["spec"]);
    spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("prestop-cleanup"))
        })
        .and_then(|c| serde_json::from_value(c["command"].clone()).ok())
        .unwrap_or_default()
}

#[test]
fn a_restartable_pods_sidecar_asks_the_node_whether_the_pod_is_ending() {
    for (object, policy) in [
        (workload(Some("OnFailure"), false), "OnFailure"),
        (workload(Some("Always"), true), "Always"),
        (workload(None, true), "unset"),
    ] {
        let outcome = mutate_with(Endpoint::Mutate, &config(true, "binary"), object);
        assert_eq!(outcome.decision.denial, None, "{policy}");
        let argv = sidecar_argv(&outcome.patched);
        assert!(
            argv.contains(&"--restartable".to_owned()),
            "{policy}: {argv:?}"
        );
        assert!(
            argv.contains(&"--node-agent".to_owned()),
            "{policy}: {argv:?}"
        );
        assert!(
            !outcome.warnings().contains("restarts the pod in place"),
            "{policy}: {}",
            outcome.warnings()
        );
    }
}

/// `Never`: the kubelet recreates no sandbox once a container ran (`!shouldRestartOnFailure`),
/// so its SIGTERM is the pod's end, and the argv stays as it was.
#[test]
fn a_never_pods_sidecar_cleans_on_its_signal_as_before() {
    let outcome = mutate_with(
        Endpoint::Mutate,
        &config(true, "binary"),
        workload(Some("Never"), false),
    );
    let argv = sidecar_argv(&outcome.patched);
    assert!(argv.contains(&"--target".to_owned()), "{argv:?}");
    assert!(!argv.contains(&"--restartable".to_owned()), "{argv:?}");
}

/// Without the agent nobody can say that the pod is ending: the sidecar is still added
/// (it says why in its line), and the admission says so once per target.
#[test]
fn without_the_agent_a_restartable_pod_is_warned() {
    let outcome = mutate_with(
        Endpoint::Mutate,
        &config(false, "binary"),
        workload(Some("OnFailure"), false),
    );
    assert!(sidecar_argv(&outcome.patched).contains(&"--restartable".to_owned()));
    let warned: Vec<&String> = outcome
        .decision
        .warnings
        .iter()
        .filter(|w| w.contains("restarts the pod in place"))
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", outcome.decision.warnings);
    assert!(
        warned[0].contains("/data is not cleaned without the node agent")
            && warned[0].contains("restartPolicy OnFailure"),
        "{}",
        warned[0]
    );
}

/// The shell sidecar cannot ask the node anything: a restartable pod gets none, and a
/// warning; a `Never` pod keeps its shell sidecar.
#[test]
fn the_shell_sidecar_cannot_ask_so_a_restartable_pod_gets_none() {
    let outcome = mutate_with(
        Endpoint::Mutate,
        &config(true, "shell"),
        workload(Some("OnFailure"), false),
    );
    assert!(
        sidecar_argv(&outcome.patched).is_empty(),
        "{}",
        outcome.patched
    );
    assert!(
        outcome
            .warnings()
            .contains("the shell sidecar cannot ask the node whether the pod ends"),
        "{}",
        outcome.warnings()
    );
    let never = mutate_with(
        Endpoint::Mutate,
        &config(true, "shell"),
        workload(Some("Never"), false),
    );
    assert!(
        !sidecar_argv(&never.patched).is_empty(),
        "{}",
        never.patched
    );
}
