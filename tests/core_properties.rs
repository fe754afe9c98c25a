//! Property tests of the core's invariants over generated pod templates: the patch always
//! applies, a second pass is empty, only the fields the feature needs change, unknown
//! fields survive, cleanup targets stay inside writable mounts, grace is never lowered,
//! and no input makes the core panic.

mod core_support;

use core_support::request;
use prestop_injector::admission::{self, Operation};
use prestop_injector::config::Config;
use prestop_injector::mutation::hook::{sidecar_targets, Action, Hook, IMAGE_PROGRAM, PROGRAM_DIR};
use prestop_injector::mutation::targets::{is_at_or_below, mounts};
use prestop_injector::mutation::{decide, Endpoint};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const MOUNT_PATHS: &[&str] = &["/scratch", "/data", "/data/sub", "/cache", "/", "/scratch/"];
const HOST_PATHS: &[&str] = &[
    "/mnt/a",
    "/etc",
    "/var/lib/x",
    "/",
    "/tmp/y",
    "/var/lib/kubelet/z",
];
const HOST_TYPES: &[&str] = &["", "Directory", "DirectoryOrCreate", "File"];
const IMAGES: &[&str] = &[
    "busybox:1.36",
    "alpine:3.20",
    "nginx:1.27",
    "gcr.io/distroless/static-debian12",
    "python:3.12-alpine",
];

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = &'static str> + Clone {
    proptest::sample::select(options)
}

/// The argv fields of a container: `command`, and sometimes `args`.
fn command() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(prop_oneof![
        Just(json!({"command": ["bash", "-c", "echo hi"]})),
        Just(json!({"command": ["/bin/bash", "-c", "a=(1 2); echo ${a[0]}"]})),
        Just(json!({"command": ["sh", "-c", "sleep 3"]})),
        Just(json!({"command": ["/usr/bin/env", "bash", "-c", "true"]})),
        Just(json!({"command": ["/usr/bin/env"], "args": ["bash", "-c", "true"]})),
        Just(json!({"command": ["bash"], "args": ["-c", "echo $'x'"]})),
        Just(json!({"args": ["bash", "-c", "the entrypoint's argv: never touched"]})),
        Just(json!({"command": ["bash"]})),
        Just(json!({"command": [1, "x"]})),
    ])
}

fn lifecycle() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(prop_oneof![
        Just(json!({"preStop": {"exec": {"command": ["bash", "-c", "sleep 5; rm -rf /data/*"]}}})),
        (0u64..100).prop_map(|seconds| json!({"preStop": {"sleep": {"seconds": seconds}}})),
        Just(json!({"preStop": {"httpGet": {"path": "/stop", "port": 80}}})),
        Just(json!({"preStop": {"tcpSocket": {"port": 80}}})),
        Just(json!({"preStop": {}})),
        Just(json!({"postStart": {"exec": {"command": ["bash", "-c", "true"]}}})),
        Just(json!({"preStop": {"futureHandler": {"x": 1}}})),
    ])
}

fn container(index: usize) -> impl Strategy<Value = Value> {
    (
        pick(IMAGES),
        command(),
        lifecycle(),
        proptest::collection::vec((0usize..4, pick(MOUNT_PATHS), any::<bool>()), 0..4),
        any::<i32>(),
    )
        .prop_map(move |(image, command, lifecycle, mounts, future)| {
            let mut container = Map::new();
            container.insert("name".into(), json!(format!("c{index}")));
            container.insert("image".into(), json!(image));
            if let Some(command) = command {
                container.extend(command.as_object().cloned().unwrap_or_default());
            }
            if let Some(lifecycle) = lifecycle {
                container.insert("lifecycle".into(), lifecycle);
            }
            let mounts: Vec<Value> = mounts
                .into_iter()
                .map(|(volume, path, read_only)| json!({"name": format!("v{volume}"), "mountPath": path, "readOnly": read_only}))
                .collect();
            container.insert("volumeMounts".into(), Value::Array(mounts));
            container.insert("xFuture".into(), json!(future));
            Value::Object(container)
        })
}

fn volume(index: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        (pick(HOST_PATHS), pick(HOST_TYPES))
            .prop_map(move |(path, kind)| json!({"name": format!("v{index}"), "hostPath": {"path": path, "type": kind}})),
        Just(json!({"name": format!("v{index}"), "emptyDir": {}})),
    ]
}

fn annotations() -> impl Strategy<Value = Value> {
    let valid: Vec<(&'static str, &'static [&'static str])> = vec![
        (
            "prestop-injector.io/cleanup",
            &["auto", "off", "/scratch", "/data/x", "/cache"],
        ),
        ("prestop-injector.io/mode", &["exec", "sidecar"]),
        ("prestop-injector.io/hook-seconds", &["5", "2m", "2h"]),
        ("prestop-injector.io/containers", &["c0", "c1"]),
        ("prestop-injector.io/command", &["sleep 2; echo bye"]),
        ("prestop-injector.io/ttl-after-finished", &["10m"]),
        ("prestop-injector.io/fix-shell", &["true", "false"]),
        ("prestop-injector.io/shell", &["/bin/bash", "/bin/ash"]),
    ];
    let entries: Vec<_> = valid
        .into_iter()
        .map(|(key, options)| {
            proptest::option::weighted(0.3, proptest::sample::select(options))
                .prop_map(move |v| (key, v))
        })
        .collect();
    // Now and then one malformed value, which must be denied without a patch.
    let malformed = proptest::option::weighted(
        0.1,
        proptest::sample::select(vec![
            ("prestop-injector.io/cleanup", "relative"),
            ("prestop-injector.io/cleanup", "/"),
            ("prestop-injector.io/mode", "bogus"),
            ("prestop-injector.io/hook-seconds", "x"),
            ("prestop-injector.io/containers", "c9"),
            ("prestop-injector.io/command", ""),
        ]),
    );
    (entries, malformed).prop_map(|(entries, malformed)| {
        let map: Map<String, Value> = entries
            .into_iter()
            .chain(malformed.map(|(key, value)| (key, Some(value))))
            .filter_map(|(key, value)| Some((key.to_owned(), json!(value?))))
            .collect();
        Value::Object(map)
    })
}

fn job() -> impl Strategy<Value = Value> {
    (
        (1usize..4).prop_flat_map(|n| (0..n).map(container).collect::<Vec<_>>()),
        (0..4).map(volume).collect::<Vec<_>>(),
        annotations(),
        proptest::option::of(0u64..5000),
        any::<bool>(),
    )
        .prop_map(|(containers, volumes, annotations, grace, on_template)| {
            let mut spec = json!({"containers": containers, "volumes": volumes, "restartPolicy": "Never", "xFutureSpec": {"a": [1]}});
            if let Some(grace) = grace {
                spec["terminationGracePeriodSeconds"] = json!(grace);
            }
            let (object_annotations, template_annotations) =
                if on_template { (json!({}), annotations) } else { (annotations, json!({})) };
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "p", "annotations": object_annotations},
                   "spec": {"template": {"metadata": {"annotations": template_annotations}, "spec": spec}}, "xFutureTop": true})
        })
}

/// Where the feature may write (SPEC §8: targeted operations only).
fn allowed(path: &str) -> bool {
    let container_fields = [
        "/command/0",
        "/command/1",
        "/args/0",
        "/lifecycle",
        "/livenessProbe/exec/command/",
        "/readinessProbe/exec/command/",
        "/startupProbe/exec/command/",
        // The program's read-only mount (checked below to be the only change there).
        "/volumeMounts",
    ];
    let Some(rest) = path.strip_prefix("/spec/template/") else {
        return path == "/spec/ttlSecondsAfterFinished";
    };
    rest == "spec/terminationGracePeriodSeconds"
        || rest.starts_with("metadata/annotations")
        || rest == "metadata"
        || rest.starts_with("spec/initContainers")
        || rest.starts_with("spec/volumes")
        || rest.strip_prefix("spec/containers/").is_some_and(|rest| {
            let field = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            container_fields
                .iter()
                .any(|allowed| field.starts_with(allowed) || field == allowed.trim_end_matches('/'))
        })
}

fn check_targets(patched: &Value) -> Result<(), TestCaseError> {
    let spec = &patched["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    let writable = |container: &Value, target: &str| {
        mounts(container)
            .iter()
            .any(|m| m.writable && is_at_or_below(target, &m.path))
    };
    for container in &containers {
        let argv: Option<Vec<String>> = container
            .pointer("/lifecycle/preStop/exec/command")
            .and_then(|argv| serde_json::from_value(argv.clone()).ok());
        if let Some(Hook {
            action: Action::Cleanup(targets),
            ..
        }) = argv.and_then(|argv| Hook::from_argv(&argv))
        {
            for target in targets {
                prop_assert!(
                    target != "/" && writable(container, &target),
                    "{target} in {container}"
                );
            }
        }
    }
    for init in spec["initContainers"].as_array().into_iter().flatten() {
        let argv: Vec<String> = serde_json::from_value(init["command"].clone()).unwrap_or_default();
        for target in sidecar_targets(&argv).unwrap_or_default() {
            prop_assert!(
                target != "/" && containers.iter().any(|c| writable(c, &target)),
                "sidecar target {target}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn mutation_invariants(object in job(), auto in any::<bool>(), sidecar_allowed in any::<bool>()) {
        let endpoint = if auto { Endpoint::MutateAuto } else { Endpoint::Mutate };
        let mut config = Config::default();
        config.sidecar.allowed = sidecar_allowed;
        let decision = decide(&request(Operation::Create, object.clone()), endpoint, &config);
        prop_assert!(decision.warnings.iter().all(|w| w.chars().count() <= 120));
        let Some(patch) = decision.patch else { return Ok(()) };
        prop_assert!(decision.denial.is_none());
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch).map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
        for op in patch.0.iter() {
            prop_assert!(allowed(op.path().as_ref()), "touched {}", op.path());
        }
        let again = decide(&request(Operation::Create, patched.clone()), endpoint, &config);
        prop_assert_eq!(again.patch, None, "second pass is not empty");
        prop_assert_eq!(&patched["xFutureTop"], &object["xFutureTop"]);
        prop_assert_eq!(&patched["spec"]["template"]["spec"]["xFutureSpec"], &object["spec"]["template"]["spec"]["xFutureSpec"]);
        // The user's volumes and mounts are kept exactly; ours is the installer's volume.
        let spec = &patched["spec"]["template"]["spec"];
        let program_volume = spec["initContainers"].as_array().into_iter().flatten()
            .find(|c| c["command"] == json!([IMAGE_PROGRAM, "install", PROGRAM_DIR]))
            .map(|installer| installer["volumeMounts"][0]["name"].clone());
        let without_ours = |list: &Value| -> Value {
            match list.as_array() {
                Some(items) => {
                    let kept: Vec<Value> = items.iter().filter(|item| Some(&item["name"]) != program_volume.as_ref()).cloned().collect();
                    if kept.is_empty() && program_volume.is_some() { Value::Null } else { Value::Array(kept) }
                }
                None => list.clone(),
            }
        };
        let spec_before = &object["spec"]["template"]["spec"];
        prop_assert_eq!(without_ours(&spec_before["volumes"]), without_ours(&spec["volumes"]));
        for (before, after) in spec_before["containers"].as_array().unwrap().iter()
            .zip(spec["containers"].as_array().unwrap()) {
            prop_assert_eq!(&before["xFuture"], &after["xFuture"]);
            prop_assert_eq!(without_ours(&before["volumeMounts"]), without_ours(&after["volumeMounts"]));
        }
        let grace_before = object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        let grace_after = patched["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        prop_assert!(grace_after >= grace_before);
        check_targets(&patched)?;
    }

    /// The server skips parsing objects it cannot act on (admission::review): it must
    /// decide exactly as the core does on the whole object, whatever the object carries.
    #[test]
    fn the_server_path_decides_like_the_core(mut object in job(), auto in any::<bool>(), ttl in any::<bool>()) {
        object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:template": {}}}}]);
        object["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
        object["spec"]["parallelism"] = json!(2);
        object["status"] = json!({"active": 1});
        if ttl {
            object["spec"]["ttlSecondsAfterFinished"] = json!(7);
        }
        let endpoint = if auto { Endpoint::MutateAuto } else { Endpoint::Mutate };
        let config = Config::default();
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "namespace": "default", "operation": "CREATE", "object": object}});
        let partial = admission::review(review.to_string().as_bytes(), endpoint, &config).map_err(|e| TestCaseError::fail(e.0))?;
        let whole = decide(&request(Operation::Create, object), endpoint, &config);
        prop_assert_eq!(partial.decision, whole);
    }

    #[test]
    fn arbitrary_objects_never_panic(object in arbitrary_json(), kind in pick(&["Job", "CronJob", "Pod", "Deployment"]), auto in any::<bool>()) {
        let group = match kind { "Pod" => "", "Deployment" => "apps", _ => "batch" };
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": group, "version": "v1", "kind": kind}, "operation": "CREATE", "object": object}});
        let endpoint = if auto { Endpoint::MutateAuto } else { Endpoint::Mutate };
        let reviewed = admission::review(review.to_string().as_bytes(), endpoint, &Config::default())
            .map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_ne!(reviewed.outcome, admission::Outcome::Error);
    }

    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = admission::review(&body, Endpoint::Mutate, &Config::default());
    }
}

/// JSON shaped loosely like a pod object, with the keys the core looks at.
fn arbitrary_json() -> impl Strategy<Value = Value> {
    let keys = pick(&[
        "metadata",
        "annotations",
        "spec",
        "template",
        "containers",
        "volumes",
        "volumeMounts",
        "name",
        "mountPath",
        "hostPath",
        "path",
        "lifecycle",
        "preStop",
        "exec",
        "command",
        "sleep",
        "seconds",
        "image",
        "prestop-injector.io/cleanup",
        "terminationGracePeriodSeconds",
        "initContainers",
        "readOnly",
        "jobTemplate",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        pick(&["auto", "/scratch", "bash", "-c", "busybox", "sidecar", "/", "x"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((keys.clone(), inner), 0..5).prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                )
            }),
        ]
    })
}
