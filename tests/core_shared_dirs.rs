//! Issue 9, class 6: shared host directories
//! (docs/DESIGN.md#only-provably-private-directories-without-an-annotation). On `/mutate/auto`
//! without a cleanup annotation only provably private directories are cleaned (issue 17 class 7,
//! see also core_private_dirs.rs); an explicit annotation proceeds with a warning naming the fix
//! when the object's own pods may share the directory.

mod core_support;
use core_support::test_config;

use core_support::*;
use prestop_injector::admission::Operation;
use prestop_injector::mutation::{decide, Endpoint};
use serde_json::{json, Value};

/// The scratch Job's pod template, wrapped as `kind` with `spec` fields added.
fn workload(kind: &str, annotations: Value, spec: Value) -> Value {
    let template = scratch_job(json!({}))["spec"]["template"].clone();
    let (api_version, template_pointer) = match kind {
        "Job" => ("batch/v1", "/spec/template"),
        "CronJob" => ("batch/v1", "/spec/jobTemplate/spec/template"),
        _ => ("apps/v1", "/spec/template"),
    };
    let mut object = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": "shared", "annotations": annotations}, "spec": spec});
    match template_pointer {
        "/spec/template" => object["spec"]["template"] = template,
        _ => object["spec"]["jobTemplate"]["spec"]["template"] = template,
    }
    object
}

fn template_of(object: &Value) -> &Value {
    object
        .pointer("/spec/template")
        .or_else(|| object.pointer("/spec/jobTemplate/spec/template"))
        .expect("a template")
}

/// Cleaned by the exec hook, or (where the kubelet restarts the container in its pod,
/// issue 17 class 3) by the cleanup sidecar.
fn cleaned(object: &Value) -> bool {
    let spec = &template_of(object)["spec"];
    let sidecar = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            serde_json::from_value::<Vec<String>>(c["command"].clone())
                .ok()
                .and_then(|argv| prestop_injector::mutation::hook::sidecar_targets(&argv))
                .is_some()
        });
    sidecar || !pre_stop_argv(&spec["containers"][0]).is_empty()
}

fn auto(object: Value) -> Outcome {
    mutate_with(Endpoint::MutateAuto, &test_config(), object)
}

/// Issue 17 class 7 replaced the rule "sole users by kind": an implicit `auto` cleans
/// only provably private directories, whatever the kind — a fixed hostPath is shared
/// with whatever else mounts it (a DaemonSet's cache, the next CronJob run), so even a
/// bare Pod or a parallelism-1 Job no longer empties it without the annotation.
#[test]
fn class_6_implicit_auto_cleans_only_private_directories() {
    let cases = [
        ("Job", json!({})),
        ("Job", json!({"parallelism": 4})),
        ("CronJob", json!({"schedule": "@daily"})),
        (
            "Deployment",
            json!({"replicas": 1, "strategy": {"type": "Recreate"}}),
        ),
        ("ReplicaSet", json!({"replicas": 1})),
        ("StatefulSet", json!({"replicas": 1})),
        ("DaemonSet", json!({})),
    ];
    for (kind, spec) in cases {
        let outcome = auto(workload(kind, json!({}), spec.clone()));
        assert!(!cleaned(&outcome.patched), "{kind} {spec}");
        let fix: Vec<_> = outcome
            .decision
            .warnings
            .iter()
            .filter(|w| w.contains("use subPathExpr $(POD_UID) or annotate cleanup"))
            .collect();
        assert_eq!(
            fix.len(),
            1,
            "{kind} {spec}: {:?}",
            outcome.decision.warnings
        );
        assert!(fix
            .iter()
            .all(|w| w.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS));
        assert_eq!(
            outcome.decision.patch, None,
            "{kind}: nothing else to change"
        );

        // A directory named by the pod's UID is its own: cleaned, by the exec hook where
        // the kubelet never restarts the container in its pod, else by the sidecar.
        let mut private = workload(kind, json!({}), spec.clone());
        let container = template_of(&private)["spec"]["containers"][0].clone();
        let mut container = container;
        container["env"] =
            json!([{"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]);
        container["volumeMounts"][0]["subPathExpr"] = json!("$(UID)");
        let pointer = if kind == "CronJob" {
            "/spec/jobTemplate/spec/template/spec/containers/0"
        } else {
            "/spec/template/spec/containers/0"
        };
        *private.pointer_mut(pointer).unwrap() = container;
        let outcome = auto(private);
        assert!(
            cleaned(&outcome.patched),
            "{kind} {spec}: {:?}",
            outcome.decision.warnings
        );
    }
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": template_of(&workload("Job", json!({}), json!({})))["spec"]});
    let outcome = auto(bare);
    assert!(pre_stop_argv(&outcome.patched["spec"]["containers"][0]).is_empty());
}

#[test]
fn class_6_one_warning_per_shared_target() {
    let mut object = workload("Deployment", json!({}), json!({"replicas": 3}));
    let containers = object["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap();
    let mut second = containers[0].clone();
    second["name"] = json!("second");
    containers.push(second);
    let outcome = auto(object);
    assert_eq!(outcome.decision.warnings.len(), 2, "{}", outcome.warnings());
    assert!(outcome
        .warnings()
        .contains("container \"second\": /scratch not cleaned"));
}

#[test]
fn class_6_an_explicit_annotation_on_shared_pods_proceeds_and_names_the_fix() {
    for (kind, spec, why) in [
        (
            "Deployment",
            json!({"replicas": 3}),
            "a Deployment with 3 replicas",
        ),
        ("Deployment", json!({}), "a Deployment's rolling update"),
        (
            "ReplicaSet",
            json!({"replicas": 2}),
            "a ReplicaSet with 2 replicas",
        ),
        ("StatefulSet", json!({"replicas": 1}), "a StatefulSet"),
        ("DaemonSet", json!({}), "a DaemonSet"),
        ("Job", json!({"parallelism": 4}), "a Job with parallelism 4"),
    ] {
        for (annotation, endpoint) in [
            ("auto", Endpoint::MutateAuto),
            ("/scratch", Endpoint::Mutate),
        ] {
            let object = workload(
                kind,
                json!({"prestop-injector.io/cleanup": annotation}),
                spec.clone(),
            );
            let outcome = mutate_with(endpoint, &test_config(), object);
            assert!(cleaned(&outcome.patched), "{kind} {annotation}");
            // A StatefulSet's pod names come back: only the uid is per pod there
            // (statefulset_sharing_warning_recommends_what_is_enough).
            let fix = if kind == "StatefulSet" {
                "$(POD_UID)"
            } else {
                "$(POD_NAME)"
            };
            let warning = format!(
                "container \"app\": /scratch may be shared by pods of {why}; use subPathExpr: {fix}"
            );
            // And, as the config names no node agent, that it is not cleaned at all
            // without one (issue 31).
            assert_eq!(
                outcome.decision.warnings,
                [warning, fixed_without_agent("app", "/scratch")],
                "{kind} {annotation}"
            );
        }
    }
    let outcome = mutate(workload(
        "Job",
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        json!({"parallelism": 1}),
    ));
    assert!(cleaned(&outcome.patched));
    // One pod at a time still overlaps with its replacement (issue 31; core_overlap.rs).
    assert_eq!(
        outcome.decision.warnings,
        [
            replaced("app", "/scratch"),
            fixed_without_agent("app", "/scratch"),
        ]
    );
}

#[test]
fn class_6_a_per_pod_sub_path_expr_needs_no_warning() {
    let mut object = workload(
        "Deployment",
        json!({"prestop-injector.io/cleanup": "auto"}),
        json!({"replicas": 3}),
    );
    let container = &mut object["spec"]["template"]["spec"]["containers"][0];
    container["env"] =
        json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    container["volumeMounts"][0]["subPathExpr"] = json!("$(POD_NAME)");
    let outcome = mutate(object.clone());
    assert!(cleaned(&outcome.patched));
    // Not shared; but a pod's name is no uid, so without a node agent to ask, the
    // cleaner would not empty it (issue 31), and says so.
    assert_eq!(
        outcome.decision.warnings,
        [fixed_without_agent("app", "/scratch")]
    );
    let with_agent = mutate_with(
        Endpoint::Mutate,
        &test_config_with("nodeAgent: {}"),
        object.clone(),
    );
    assert_eq!(with_agent.decision.warnings, Vec::<String>::new());

    // A directory per node is still shared by every pod on that node.
    let container = &mut object["spec"]["template"]["spec"]["containers"][0];
    container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] = json!("spec.nodeName");
    let outcome = mutate(object);
    assert!(outcome.warnings().contains("use subPathExpr: $(POD_NAME)"));
}

#[test]
fn class_6_the_pod_pass_reproduces_the_skip() {
    // A skipped Deployment records nothing, so its pods (owned by its ReplicaSet) are
    // left alone instead of being cleaned as if they were bare Pods.
    let deployment = auto(workload("Deployment", json!({}), json!({"replicas": 3}))).patched;
    let template = &deployment["spec"]["template"];
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "shared-", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "shared-x", "controller": true}]},
        "spec": template["spec"]});
    let decision = decide(
        &request(Operation::Create, pod.clone()),
        Endpoint::MutateAuto,
        &test_config(),
    );
    assert_eq!(decision, Default::default());

    // A pod of a controller we do not know may be one of many replicas: not `auto`.
    let mut other = pod;
    other["metadata"]["ownerReferences"][0] = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "c", "controller": true});
    let outcome = auto(other);
    assert!(pre_stop_argv(&outcome.patched["spec"]["containers"][0]).is_empty());
    assert!(outcome
        .warnings()
        .contains("host directory may be shared; use subPathExpr $(POD_UID)"));
}
