//! Issue 9, class 6: shared host directories (SPEC §3). On `/mutate/auto` without a
//! cleanup annotation only objects whose pods are the sole users of their host
//! directories are cleaned; an explicit annotation proceeds with a warning naming the fix.

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

fn cleaned(object: &Value) -> bool {
    !pre_stop_argv(&template_of(object)["spec"]["containers"][0]).is_empty()
}

fn auto(object: Value) -> Outcome {
    mutate_with(Endpoint::MutateAuto, &test_config(), object)
}

#[test]
fn class_6_implicit_auto_cleans_only_sole_users() {
    let cases = [
        ("Job", json!({}), true),
        ("Job", json!({"parallelism": 1}), true),
        ("Job", json!({"parallelism": 4}), false),
        ("CronJob", json!({"schedule": "@daily"}), true),
        (
            "CronJob",
            json!({"schedule": "@daily", "jobTemplate": {"spec": {"parallelism": 2}}}),
            false,
        ),
        ("Deployment", json!({}), false),
        (
            "Deployment",
            json!({"replicas": 1, "strategy": {"type": "Recreate"}}),
            false,
        ),
        ("ReplicaSet", json!({"replicas": 1}), false),
        ("StatefulSet", json!({"replicas": 1}), false),
        ("DaemonSet", json!({}), false),
    ];
    for (kind, spec, sole) in cases {
        let outcome = auto(workload(kind, json!({}), spec.clone()));
        assert_eq!(cleaned(&outcome.patched), sole, "{kind} {spec}");
        let skipped: Vec<_> = outcome
            .decision
            .warnings
            .iter()
            .filter(|w| w.starts_with("auto cleanup skipped"))
            .collect();
        assert_eq!(
            skipped.len(),
            usize::from(!sole),
            "{kind} {spec}: {skipped:?}"
        );
        assert!(skipped.iter().all(|w| w.chars().count() <= 120));
        if !sole {
            assert_eq!(
                outcome.decision.patch, None,
                "{kind}: nothing else to change"
            );
        }
    }
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": template_of(&workload("Job", json!({}), json!({})))["spec"]});
    let outcome = auto(bare);
    assert!(!pre_stop_argv(&outcome.patched["spec"]["containers"][0]).is_empty());
}

#[test]
fn class_6_one_warning_however_many_containers_would_have_been_cleaned() {
    let mut object = workload("Deployment", json!({}), json!({"replicas": 3}));
    let containers = object["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap();
    let mut second = containers[0].clone();
    second["name"] = json!("second");
    containers.push(second);
    let outcome = auto(object);
    assert_eq!(outcome.decision.warnings.len(), 1, "{}", outcome.warnings());
    assert!(outcome.warnings().contains("a Deployment with 3 replicas"));
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
            let warning = format!(
                "container \"app\": /scratch may be shared by pods of {why}; use subPathExpr: $(POD_NAME)"
            );
            assert_eq!(outcome.decision.warnings, [warning], "{kind} {annotation}");
        }
    }
    let outcome = mutate(workload(
        "Job",
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        json!({"parallelism": 1}),
    ));
    assert!(cleaned(&outcome.patched));
    assert_eq!(outcome.decision.warnings, Vec::<String>::new());
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
    assert_eq!(outcome.decision.warnings, Vec::<String>::new());

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
        .contains("pods of a CloneSet controller may share"));
}
