//! Property tests for issue 9, classes 4, 5 and 8, over generated workloads:
//! - class 5: whatever a controller creates from a mutated template (a CronJob's Job, a
//!   Deployment's ReplicaSet, any workload's Pod) gets no patch and no denial, on either
//!   endpoint — the Pod-level pass reproduces the workload's decision;
//! - class 4: our sidecar never has a mount at or below one of its targets other than
//!   the one the target lives on, and never two mounts at one normalized path;
//! - class 6: on `/mutate/auto` without a cleanup annotation, only sole users are cleaned;
//! - class 8: our sidecar always runs as a numeric non-root user with `runAsNonRoot`.

mod core_support;
use core_support::test_config;

use core_support::request;
use prestop_injector::admission::Operation;
use prestop_injector::mutation::hook::{sidecar_targets, Action, Hook};
use prestop_injector::mutation::targets::{is_at_or_below, normalize};
use prestop_injector::mutation::{decide, Endpoint};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const PATHS: &[&str] = &[
    "/data",
    "/data/",
    "/data/keep",
    "//data/keep",
    "/data/./keep/x",
    "/scratch",
    "/cache",
];
const KINDS: &[&str] = &[
    "Job",
    "CronJob",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Pod",
];

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = &'static str> + Clone {
    proptest::sample::select(options)
}

fn container(index: usize) -> impl Strategy<Value = Value> {
    let mount = (0usize..3, pick(PATHS), any::<bool>(), any::<bool>());
    (
        proptest::collection::vec(mount, 0..3),
        proptest::option::of(prop_oneof![Just(0u64), Just(1000u64), Just(2000u64)]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(mounts, user, env, http_get)| {
            let mounts: Vec<Value> = mounts
                .into_iter()
                .map(|(volume, path, read_only, per_pod)| {
                    let mut m = json!({"name": format!("v{volume}"), "mountPath": path, "readOnly": read_only});
                    if per_pod {
                        m["subPathExpr"] = json!("$(POD_NAME)");
                    }
                    m
                })
                .collect();
            let mut c = json!({"name": format!("c{index}"), "image": "busybox:1.36",
                "command": ["sh", "-c", "sleep 1"], "volumeMounts": mounts});
            if let Some(user) = user {
                c["securityContext"] = json!({"runAsUser": user});
            }
            if env {
                c["env"] = json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
            }
            if http_get {
                c["lifecycle"] = json!({"preStop": {"httpGet": {"path": "/q", "port": 80}}});
            }
            c
        })
}

fn volume(index: usize) -> impl Strategy<Value = Value> {
    let name = format!("v{index}");
    prop_oneof![
        Just(
            json!({"name": name, "hostPath": {"path": format!("/mnt/v{index}"), "type": "DirectoryOrCreate"}})
        ),
        Just(json!({"name": name, "persistentVolumeClaim": {"claimName": "db"}})),
        Just(json!({"name": name, "emptyDir": {}})),
    ]
}

fn annotations() -> impl Strategy<Value = Value> {
    let pool: &'static [(&'static str, &'static str)] = &[
        ("prestop-injector.io/cleanup", "auto"),
        ("prestop-injector.io/cleanup", "off"),
        ("prestop-injector.io/cleanup", "/data"),
        ("prestop-injector.io/cleanup", "/data/keep"),
        ("prestop-injector.io/cleanup", "/scratch,/cache"),
        ("prestop-injector.io/mode", "sidecar"),
        ("prestop-injector.io/mode", "exec"),
        ("prestop-injector.io/hook-seconds", "70"),
        ("prestop-injector.io/shutdown-seconds", "5"),
        ("prestop-injector.io/containers", "c0"),
        ("prestop-injector.io/inject", "false"),
        ("prestop-injector.io/fix-shell", "false"),
    ];
    proptest::collection::vec(proptest::sample::select(pool), 0..4).prop_map(|pairs| {
        let map: Map<String, Value> = pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect();
        Value::Object(map)
    })
}

fn workload() -> impl Strategy<Value = Value> {
    (
        pick(KINDS),
        proptest::collection::vec(container(0), 1..2),
        proptest::collection::vec(container(1), 0..2),
        (volume(0), volume(1), volume(2)),
        (annotations(), annotations()),
        proptest::option::of(0u64..4),
        proptest::option::of(prop_oneof![Just(1000u64), Just(0u64)]),
    )
        .prop_map(|(kind, first, second, volumes, (on_object, on_template), count, pod_user)| {
            let containers: Vec<Value> = first.into_iter().chain(second).collect();
            let mut spec = json!({"containers": containers, "volumes": [volumes.0, volumes.1, volumes.2],
                "restartPolicy": "Never"});
            if let Some(user) = pod_user {
                spec["securityContext"] = json!({"runAsUser": user});
            }
            let template = json!({"metadata": {"annotations": on_template}, "spec": spec});
            let metadata = json!({"name": "w", "annotations": on_object});
            let mut object = match kind {
                "Pod" => {
                    let mut metadata = metadata;
                    metadata["annotations"].as_object_mut().unwrap().extend(
                        on_template.as_object().cloned().unwrap_or_default());
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
                }
                "CronJob" => json!({"apiVersion": "batch/v1", "kind": kind, "metadata": metadata,
                    "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}}),
                "Job" => json!({"apiVersion": "batch/v1", "kind": kind, "metadata": metadata,
                    "spec": {"template": template}}),
                _ => json!({"apiVersion": "apps/v1", "kind": kind, "metadata": metadata,
                    "spec": {"template": template}}),
            };
            if let Some(count) = count {
                match kind {
                    "Job" => object["spec"]["parallelism"] = json!(count),
                    "CronJob" => object["spec"]["jobTemplate"]["spec"]["parallelism"] = json!(count),
                    "Pod" => {}
                    _ => object["spec"]["replicas"] = json!(count),
                }
            }
            object
        })
}

/// What a controller creates from `template`.
fn created(template: &Value, api_version: &str, kind: &str, owner: (&str, &str)) -> Value {
    let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
    metadata["generateName"] = json!("w-");
    metadata["ownerReferences"] =
        json!([{"apiVersion": owner.0, "kind": owner.1, "name": "w", "controller": true}]);
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    object["spec"] = template["spec"].clone();
    object
}

/// Everything the controllers make from the mutated `object`, down to the Pods.
fn children(object: &Value) -> Vec<Value> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let pod_of = |template: &Value, owner| created(template, "v1", "Pod", owner);
    match kind {
        "CronJob" => {
            let job = created(
                &object["spec"]["jobTemplate"],
                "batch/v1",
                "Job",
                ("batch/v1", "CronJob"),
            );
            let pod = pod_of(&job["spec"]["template"], ("batch/v1", "Job"));
            vec![job, pod]
        }
        "Deployment" => {
            let mut rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "w-1", "annotations": object["metadata"]["annotations"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "w", "controller": true}]},
                "spec": {"template": object["spec"]["template"]}});
            rs["spec"]["template"]["metadata"]["labels"] = json!({"pod-template-hash": "1"});
            let pod = pod_of(&rs["spec"]["template"], ("apps/v1", "ReplicaSet"));
            vec![rs, pod]
        }
        "Pod" => vec![],
        "Job" => vec![pod_of(&object["spec"]["template"], ("batch/v1", "Job"))],
        other => vec![pod_of(&object["spec"]["template"], ("apps/v1", other))],
    }
}

fn specs(object: &Value) -> Vec<&Value> {
    [
        "/spec",
        "/spec/template/spec",
        "/spec/jobTemplate/spec/template/spec",
    ]
    .iter()
    .filter_map(|p| object.pointer(p))
    .filter(|spec| spec.get("containers").is_some())
    .collect()
}

/// docs/DESIGN.md#targets: bare Pods, Jobs and CronJobs with parallelism ≤ 1.
fn sole_user(object: &Value) -> bool {
    let parallelism = |p: &str| object.pointer(p).and_then(Value::as_u64).unwrap_or(1);
    match object["kind"].as_str().unwrap_or_default() {
        "Pod" => true,
        "Job" => parallelism("/spec/parallelism") <= 1,
        "CronJob" => parallelism("/spec/jobTemplate/spec/parallelism") <= 1,
        _ => false,
    }
}

fn has_cleanup_annotation(object: &Value) -> bool {
    let key = "prestop-injector.io/cleanup";
    [
        "/metadata/annotations",
        "/spec/template/metadata/annotations",
        "/spec/jobTemplate/spec/template/metadata/annotations",
    ]
    .iter()
    .any(|p| object.pointer(p).and_then(|a| a.get(key)).is_some())
}

/// Whether any hook or sidecar of ours in `spec` deletes something.
fn cleans(spec: &Value) -> bool {
    let argv = |c: &Value, pointer: &str| -> Vec<String> {
        serde_json::from_value(c.pointer(pointer).cloned().unwrap_or(json!([]))).unwrap_or_default()
    };
    let hooks = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            matches!(
                Hook::from_argv(&argv(c, "/lifecycle/preStop/exec/command")),
                Some(Hook { action: Action::Cleanup(targets), .. }) if !targets.is_empty()
            )
        });
    let sidecars = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| sidecar_targets(&argv(c, "/command")).is_some_and(|targets| !targets.is_empty()));
    hooks || sidecars
}

fn check_sidecar(spec: &Value) -> Result<(), TestCaseError> {
    for init in spec["initContainers"].as_array().into_iter().flatten() {
        let Some(targets) = serde_json::from_value::<Vec<String>>(init["command"].clone())
            .ok()
            .and_then(|argv| sidecar_targets(&argv))
        else {
            continue;
        };
        let security = &init["securityContext"];
        prop_assert_eq!(&security["runAsNonRoot"], &json!(true));
        prop_assert!(
            security["runAsUser"].as_u64().is_some_and(|u| u > 0),
            "{}",
            security
        );
        let paths: Vec<String> = init["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| normalize(m["mountPath"].as_str().unwrap_or("")).unwrap_or_default())
            .collect();
        for (i, path) in paths.iter().enumerate() {
            prop_assert!(
                !paths[..i].contains(path),
                "two mounts at {}: {}",
                path,
                init
            );
        }
        for target in &targets {
            let own = paths
                .iter()
                .filter(|p| is_at_or_below(target, p))
                .max_by_key(|p| p.len());
            prop_assert!(own.is_some(), "{} on no mount: {}", target, init);
            for path in &paths {
                prop_assert!(
                    Some(path) == own || !is_at_or_below(path, target),
                    "{} inside the target {}: {}",
                    path,
                    target,
                    init
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn what_a_controller_creates_from_a_mutated_template_gets_no_patch(
        object in workload(), auto in any::<bool>()
    ) {
        let endpoint = if auto { Endpoint::MutateAuto } else { Endpoint::Mutate };
        let config = test_config();
        let decision = decide(&request(Operation::Create, object.clone()), endpoint, &config);
        if decision.denial.is_some() {
            return Ok(());
        }
        let mut patched = object.clone();
        if let Some(patch) = &decision.patch {
            json_patch::patch(&mut patched, &patch.to_json_patch()).expect("the patch applies");
        }
        let again = decide(&request(Operation::Create, patched.clone()), endpoint, &config);
        prop_assert_eq!(again.patch, None, "second pass");
        for spec in specs(&patched) {
            check_sidecar(spec)?;
            if auto && !sole_user(&object) && !has_cleanup_annotation(&object) {
                prop_assert!(!cleans(spec), "class 6: a shared {} was cleaned", object["kind"]);
            }
        }
        for child in children(&patched) {
            for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
                let decision = decide(&request(Operation::Create, child.clone()), endpoint, &config);
                prop_assert_eq!(&decision.denial, &None, "{} on {:?}", child["kind"], endpoint);
                prop_assert!(
                    decision.patch.is_none(),
                    "{} on {:?} got {}\nfrom {}",
                    child["kind"],
                    endpoint,
                    json!(decision.patch),
                    patched
                );
            }
        }
    }
}
