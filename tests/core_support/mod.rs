//! Shared helpers for the core's tests: build requests, decide, apply the patch with a
//! real RFC 6902 implementation, and check that a second pass changes nothing.
#![allow(dead_code)]

use prestop_injector::admission::{GroupVersionKind, Operation, Request};
use prestop_injector::config::Config;
use prestop_injector::mutation::{decide, Decision, Endpoint};
use serde_json::{json, Value};

/// A request as the API server sends it for `object`, kind taken from its apiVersion/kind.
pub fn request(operation: Operation, object: Value) -> Request {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Request {
        uid: "00000000-0000-0000-0000-000000000001".into(),
        kind: GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: object["kind"].as_str().unwrap_or("").into(),
        },
        name: object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        namespace: Some("default".into()),
        operation,
        object: Some(object.into()),
        ..Request::default()
    }
}

/// The result of one decision, with the patch applied.
#[derive(Debug)]
pub struct Outcome {
    pub decision: Decision,
    pub patched: Value,
}

impl Outcome {
    pub fn warnings(&self) -> String {
        self.decision.warnings.join("\n")
    }
    pub fn denial(&self) -> &str {
        &self
            .decision
            .denial
            .as_ref()
            .expect("expected a denial")
            .message
    }
    pub fn paths(&self) -> Vec<String> {
        self.decision
            .patch
            .iter()
            .flat_map(|p| p.0.iter())
            .map(|op| op.path().to_string())
            .collect()
    }
}

/// Decides, applies the patch to the original with json-patch, and asserts that deciding
/// again on the result yields no patch (docs/DESIGN.md#responses, reinvocation safe).
pub fn mutate_with(endpoint: Endpoint, config: &Config, object: Value) -> Outcome {
    let decision = decide(
        &request(Operation::Create, object.clone()),
        endpoint,
        config,
    );
    let mut patched = object;
    if let Some(patch) = &decision.patch {
        json_patch::patch(&mut patched, &patch.to_json_patch())
            .expect("the patch applies to the original");
        let again = decide(
            &request(Operation::Create, patched.clone()),
            endpoint,
            config,
        );
        assert_eq!(
            again.patch,
            None,
            "second pass must be empty; first patch: {}",
            json!(patch)
        );
    }
    Outcome { decision, patched }
}

pub fn mutate(object: Value) -> Outcome {
    mutate_with(Endpoint::Mutate, &test_config(), object)
}

/// The scratch directories the fixtures' hostPath volumes live in (also in
/// tests/fixtures/config.yaml, for the CLI and the server). The shipped config
/// allows none (docs/DESIGN.md#targets: nothing is deleted until the operator names them), so a
/// test that expects a cleanup names them, as an operator would.
pub const TEST_PREFIXES: &[&str] = &[
    "/mnt/scratch",
    "/mnt/data",
    "/mnt/work",
    "/data",
    "/scratch",
    "/test-package",
];

/// The default configuration plus [`TEST_PREFIXES`]: what most tests decide with.
pub fn test_config() -> Config {
    test_config_with("")
}

/// Every host path allowed (built in code: the config file refuses `/`), so that the
/// protected list, the second check, decides alone.
pub fn protected_list_only() -> Config {
    Config {
        allowed_host_path_prefixes: vec!["/".to_owned()],
        ..test_config()
    }
}

/// `yaml` parsed (and validated) as the server would; [`TEST_PREFIXES`] are added when it
/// names no `allowedHostPathPrefixes` of its own.
pub fn test_config_with(yaml: &str) -> Config {
    let mut config = Config::from_yaml(yaml).expect("valid config");
    if config.allowed_host_path_prefixes.is_empty() {
        let prefixes = TEST_PREFIXES.join(", ");
        let with_prefixes = format!("{yaml}\nallowedHostPathPrefixes: [{prefixes}]\n");
        config = Config::from_yaml(&with_prefixes).expect("valid config with prefixes");
    }
    config
}

/// A Job whose single container mounts hostPath volumes; `annotations` on the Job.
pub fn job(annotations: Value, container: Value, volumes: Value) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job-worker", "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [container], "volumes": volumes, "restartPolicy": "Never"}}}
    })
}

/// A busybox container mounting volume `scratch` at `/scratch`.
pub fn scratch_container() -> Value {
    json!({"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1"],
           "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]})
}

pub fn host_path_volume(name: &str, path: &str) -> Value {
    json!({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
}

/// A Job with one busybox container mounting hostPath `/mnt/scratch` at `/scratch`.
pub fn scratch_job(annotations: Value) -> Value {
    job(
        annotations,
        scratch_container(),
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    )
}

pub fn template_spec(object: &Value) -> &Value {
    object
        .pointer("/spec/template/spec")
        .expect("a pod template spec")
}

pub fn container(object: &Value, index: usize) -> &Value {
    &template_spec(object)["containers"][index]
}

pub fn pre_stop_argv(container: &Value) -> Vec<String> {
    serde_json::from_value(
        container
            .pointer("/lifecycle/preStop/exec/command")
            .cloned()
            .unwrap_or(json!([])),
    )
    .expect("argv of strings")
}

/// The paths our preStop hook in `container` empties (any hook form); empty when it has none.
pub fn cleanup_targets(container: &Value) -> Vec<String> {
    match prestop_injector::mutation::hook::Hook::from_argv(&pre_stop_argv(container)) {
        Some(prestop_injector::mutation::hook::Hook {
            action: prestop_injector::mutation::hook::Action::Cleanup(targets),
            ..
        }) => prestop_injector::mutation::hook::target_paths(&targets),
        _ => Vec::new(),
    }
}

/// A Pod created from a mutated template gets no patch on either mutating endpoint.
pub fn assert_no_patch_on_either_endpoint(pod: &Value) {
    for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
        let decision = decide(
            &request(Operation::Create, pod.clone()),
            endpoint,
            &test_config(),
        );
        assert_eq!(decision.patch, None, "{endpoint:?}");
    }
}

pub fn grace(object: &Value) -> Option<u64> {
    template_spec(object)
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_u64)
}

pub fn status(object: &Value) -> Option<Value> {
    let text = object
        .pointer("/spec/template/metadata/annotations")?
        .get("prestop-injector.io/status")?
        .as_str()?;
    Some(serde_json::from_str(text).expect("status is JSON"))
}

/// Issue 31: the warning for a Job's fixed directory `path` of `container` with an explicit
/// cleanup. The Job replaces a deleted pod at once, and the replacement may use the
/// directory while the old pod still stops (tests/core_overlap.rs).
pub fn replaced(container: &str, path: &str) -> String {
    format!(
        "container {container:?}: {path} may be shared by a Job's replacement pod, started \
         while the deleted pod still stops; use subPathExpr: $(POD_UID)"
    )
}

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `cleaner.mode: shell`: the v1 POSIX-sh hook and the busybox sidecar.
pub fn shell_mode() -> Config {
    test_config_with("cleaner: {mode: shell}\n")
}

/// The installer is first in `initContainers`, restricted, from `cleaner.image`; its
/// `emptyDir` exists; exactly the app containers `with_program` mount it read-only.
pub fn assert_delivered(object: &Value, with_program: &[usize]) {
    use prestop_injector::mutation::hook::{IMAGE_PROGRAM, PROGRAM_DIR};
    let spec = template_spec(object);
    let installer = &spec["initContainers"][0];
    assert_eq!(
        installer["command"],
        json!([IMAGE_PROGRAM, "install", PROGRAM_DIR]),
        "the installer comes first: {spec}"
    );
    assert_eq!(installer["image"], Config::default().cleaner.image);
    assert_eq!(installer.get("restartPolicy"), None);
    let security = &installer["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert!(security["runAsUser"].as_u64().is_some_and(|uid| uid > 0));
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(
        security["seccompProfile"],
        json!({"type": "RuntimeDefault"})
    );
    assert!(installer["resources"]["limits"]["memory"].is_string());
    let volume_name = installer["volumeMounts"][0]["name"].clone();
    assert_eq!(installer["volumeMounts"][0]["mountPath"], PROGRAM_DIR);
    let volumes = spec["volumes"].as_array().expect("volumes");
    let volume = volumes
        .iter()
        .find(|v| v["name"] == volume_name)
        .expect("the program's volume");
    assert!(volume["emptyDir"]["sizeLimit"].is_string(), "{volume}");
    for (index, container) in spec["containers"].as_array().unwrap().iter().enumerate() {
        let ours: Vec<&Value> = container["volumeMounts"]
            .as_array()
            .map(|mounts| mounts.iter().filter(|m| m["name"] == volume_name).collect())
            .unwrap_or_default();
        if with_program.contains(&index) {
            assert_eq!(
                ours,
                [&json!({"name": volume_name, "mountPath": PROGRAM_DIR, "readOnly": true})],
                "container {index}"
            );
        } else {
            assert!(ours.is_empty(), "container {index}: {ours:?}");
        }
    }
}

/// docs/DESIGN.md#responses: targeted operations only — no array or object replaced as a whole, no
/// container or volume renamed (which is what an index-shifted diff of a list does).
pub fn assert_targeted(outcome: &Outcome) {
    for operation in outcome.decision.patch.iter().flat_map(|p| p.0.iter()) {
        let path = operation.path().to_string();
        // The core's operations have no move or copy to emit (their type has none).
        if let prestop_injector::json::patch::PatchOperation::Replace(replace) = operation {
            assert!(
                !replace.value.is_object() && !replace.value.is_array(),
                "whole replace at {path}"
            );
        }
        assert!(!path.ends_with("/name"), "renamed: {path}");
    }
}

/// The warning a fixed directory of `container` gets when the config names no node agent
/// (issue 31: without the agent's word only a per-pod directory is cleaned).
/// The warning for a target of a pod the kubelet can restart in place (`policy`: its
/// `restartPolicy …`) when the config names no node agent (issue 31, class 3).
pub fn restartable_without_agent(container: &str, path: &str, policy: &str) -> String {
    format!(
        "container {container:?}: {path} is not cleaned without the node agent (config \
         nodeAgent): {policy} restarts the pod in place, and only the node can say it is ending"
    )
}

pub fn fixed_without_agent(container: &str, path: &str) -> String {
    format!(
        "container {container:?}: {path} is not cleaned without the node agent (config \
         nodeAgent): only a per-pod directory is; use subPathExpr: $(POD_UID)"
    )
}

// The reaper and the seal read the core's own JSON model (`prestop_injector::json`);
// these tests build their pods as serde_json's, as the API server's clients do.

/// `reaper::derive::pod_facts` on a serde_json pod.
pub fn pod_facts(
    pod: &Value,
    config: &Config,
) -> Option<prestop_injector::reaper::derive::PodFacts> {
    prestop_injector::reaper::derive::pod_facts(&pod.clone().into(), config)
}

/// `reaper::derive::pod_facts_with` on a serde_json pod.
pub fn pod_facts_with(
    pod: &Value,
    config: &Config,
    read_only_views_keep: bool,
) -> Option<prestop_injector::reaper::derive::PodFacts> {
    prestop_injector::reaper::derive::pod_facts_with(
        &pod.clone().into(),
        config,
        read_only_views_keep,
    )
}

/// `mutation::seal::seal` of a serde_json pod spec.
pub fn seal_spec(
    keys: &prestop_injector::seal_keys::SealKeys,
    namespace: &str,
    spec: &Value,
) -> Option<String> {
    prestop_injector::mutation::seal::seal(keys, namespace, &spec.clone().into())
}
