//! Property tests of the core's invariants over generated pod templates: the patch always
//! applies, a second pass is empty, only the fields the feature needs change, unknown
//! fields survive, cleanup targets stay inside writable mounts, no target has another
//! volume at or below it (container side or host side) or overlaps a protected host path
//! (checked by `support/safety_oracle.rs`, written apart from the core), grace is never
//! lowered, and no input makes the core panic.

mod core_support;
use core_support::test_config;
#[path = "support/safety_oracle.rs"]
mod safety_oracle;

use safety_oracle::SidecarMounts;

use core_support::request;
use prestop_injector::admission::{self, Operation};
use prestop_injector::config::{Config, Mode, NodeAgentConfig, DEFAULT_NODE_AGENT_DIRECTORY};
use prestop_injector::mutation::hook::{sidecar_targets, Action, Hook, IMAGE_PROGRAM, PROGRAM_DIR};
use prestop_injector::mutation::targets::{is_at_or_below, mounts};
use prestop_injector::mutation::{decide, Endpoint};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Mount paths in the forms the API server lets through: the kubelet reads `data`,
/// `/data/`, `/data/.` and `//data` all as `/data`; `..` is unreadable for us.
const MOUNT_PATHS: &[&str] = &[
    "/scratch",
    "/data",
    "/data/",
    "data",
    "/data/.",
    "//data",
    "/data/sub",
    "data/sub/",
    "/data/keep",
    "/cache",
    "/",
    "/scratch/",
    "/data/../data/sub",
    "/models",
];
const HOST_PATHS: &[&str] = &[
    "/mnt/a",
    "/mnt/a/",
    "/mnt/a/b",
    "/mnt",
    "/data",
    "/data/keep",
    "/etc",
    "/var/lib/x",
    "/var/lib/etcd",
    "/",
    "/tmp",
    "/tmp/y",
    "/opt",
    "/var/lib/kubelet/z",
    "relative",
];
/// `subPath` / `subPathExpr` of a mount, valid and not.
const SUB_PATHS: &[(&str, &str)] = &[
    ("", ""),
    ("", ""),
    ("", ""),
    ("subPath", "b"),
    ("subPath", "keep"),
    ("subPath", "b/c/"),
    ("subPath", "/abs"),
    ("subPath", "x/../.."),
    ("subPathExpr", "$(POD_NAME)"),
    ("subPathExpr", "$(EMPTY)"),
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
        proptest::collection::vec(
            (
                0usize..5,
                pick(MOUNT_PATHS),
                any::<bool>(),
                proptest::sample::select(SUB_PATHS),
            ),
            0..5,
        ),
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
                .map(|(volume, path, read_only, (key, sub))| {
                    let mut mount = json!({"name": format!("v{volume}"), "mountPath": path, "readOnly": read_only});
                    if !key.is_empty() {
                        mount[key] = json!(sub);
                    }
                    mount
                })
                .collect();
            container.insert(
                "env".into(),
                json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                       {"name": "EMPTY", "value": ""}]),
            );
            container.insert("volumeMounts".into(), Value::Array(mounts));
            container.insert("xFuture".into(), json!(future));
            Value::Object(container)
        })
}

fn volume(index: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (pick(HOST_PATHS), pick(HOST_TYPES))
            .prop_map(move |(path, kind)| json!({"name": format!("v{index}"), "hostPath": {"path": path, "type": kind}})),
        1 => Just(json!({"name": format!("v{index}"), "emptyDir": {}})),
        1 => Just(json!({"name": format!("v{index}"), "persistentVolumeClaim": {"claimName": "db"}})),
    ]
}

fn annotations() -> impl Strategy<Value = Value> {
    let valid: Vec<(&'static str, &'static [&'static str])> = vec![
        (
            "prestop-injector.io/cleanup",
            &[
                "auto",
                "auto",
                "off",
                "/scratch",
                "/data/x",
                "/data",
                "/data/sub",
                "/data/keep",
                "/models",
                "/cache",
                "/scratch,/data/sub",
            ],
        ),
        ("prestop-injector.io/mode", &["exec", "sidecar", "sidecar"]),
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
        (0..5).map(volume).collect::<Vec<_>>(),
        annotations(),
        proptest::option::of(0u64..5000),
        any::<bool>(),
        proptest::option::weighted(0.3, container(9)),
    )
        .prop_map(|(containers, volumes, annotations, grace, on_template, init)| {
            let mut spec = json!({"containers": containers, "volumes": volumes, "restartPolicy": "Never", "xFutureSpec": {"a": [1]}});
            if let Some(mut init) = init {
                init["name"] = json!("init");
                init.as_object_mut().map(|i| i.remove("lifecycle"));
                spec["initContainers"] = json!([init]);
            }
            if let Some(grace) = grace {
                spec["terminationGracePeriodSeconds"] = json!(grace);
            }
            let (object_annotations, template_annotations) =
                if on_template { (json!({}), annotations) } else { (annotations, json!({})) };
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "p", "annotations": object_annotations},
                   "spec": {"template": {"metadata": {"annotations": template_annotations}, "spec": spec}}, "xFutureTop": true})
        })
}

/// Where the feature may write (docs/DESIGN.md#responses: targeted operations only).
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
        mounts(&container.clone().into())
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
            for target in prestop_injector::mutation::hook::target_paths(&targets) {
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
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutation_invariants(
        object in job(),
        auto in any::<bool>(),
        sidecar_allowed in any::<bool>(),
        protected in pick(&["", "/data/keep", "/mnt/a/b"]),
        allowed_prefix in pick(&["", "/mnt", "/mnt/a", "/data", "/"]),
        sidecar_by_default in any::<bool>(),
        node_agent in any::<bool>(),
    ) {
        let endpoint = if auto { Endpoint::MutateAuto } else { Endpoint::Mutate };
        let mut config = test_config();
        // Issue 26: with the node agent configured, the same invariants hold; its volume
        // and mounts are ours like the program's.
        config.node_agent = node_agent.then(NodeAgentConfig::default);
        config.sidecar.allowed = sidecar_allowed || sidecar_by_default;
        if sidecar_by_default {
            config.default_mode = Mode::Sidecar;
        }
        config.protected_host_paths = [protected].into_iter().filter(|p| !p.is_empty()).map(str::to_owned).collect();
        config.allowed_host_path_prefixes = [allowed_prefix].into_iter().filter(|p| !p.is_empty()).map(str::to_owned).collect();
        let decision = decide(&request(Operation::Create, object.clone()), endpoint, &config);
        prop_assert!(decision.warnings.iter().all(|w| w.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS));
        let Some(patch) = decision.patch else { return Ok(()) };
        prop_assert!(decision.denial.is_none());
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch.to_json_patch()).map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
        for op in patch.0.iter() {
            prop_assert!(allowed(op.path()), "touched {}", op.path());
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
        let agent_volume = spec["volumes"].as_array().into_iter().flatten()
            .find(|v| v["hostPath"]["path"] == DEFAULT_NODE_AGENT_DIRECTORY)
            .map(|v| v["name"].clone());
        prop_assert_eq!(agent_volume.is_some(), patched.to_string().contains("--node-agent"));
        prop_assert!(node_agent || agent_volume.is_none());
        let without_ours = |list: &Value| -> Value {
            match list.as_array() {
                Some(items) => {
                    let ours = |item: &&Value| Some(&item["name"]) == program_volume.as_ref() || Some(&item["name"]) == agent_volume.as_ref();
                    let kept: Vec<Value> = items.iter().filter(|item| !ours(item)).cloned().collect();
                    if kept.is_empty() && (program_volume.is_some() || agent_volume.is_some()) { Value::Null } else { Value::Array(kept) }
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
        let lists = safety_oracle::Lists { protected: &config.protected_host_paths, allowed: &config.allowed_host_path_prefixes };
        let violations = safety_oracle::violations(&patched["spec"]["template"]["spec"], lists, SidecarMounts::SourceContainer);
        prop_assert!(violations.is_empty(), "docs/DESIGN.md#targets violated: {violations:?}\nin {patched}");
    }

    /// docs/DESIGN.md#the-sidecar: the sidecar's own merged mount list obeys the target rules too
    /// (issue 9 class 4). The pod runs as a numeric non-root user, or the sidecar (Pod Security
    /// `restricted`) is never used and this would only test exec hooks.
    #[test]
    fn sidecar_mount_list_obeys_the_target_rules(mut object in job(), protected in pick(&["", "/data/keep"])) {
        object["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 1000});
        let config = Config {
            default_mode: Mode::Sidecar,
            protected_host_paths: [protected].into_iter().filter(|p| !p.is_empty()).map(str::to_owned).collect(),
            ..test_config()
        };
        let decision = decide(&request(Operation::Create, object.clone()), Endpoint::Mutate, &config);
        let Some(patch) = decision.patch else { return Ok(()) };
        let mut patched = object;
        json_patch::patch(&mut patched, &patch.to_json_patch()).map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
        let lists = safety_oracle::Lists { protected: &config.protected_host_paths, allowed: &config.allowed_host_path_prefixes };
        let violations = safety_oracle::violations(&patched["spec"]["template"]["spec"], lists, SidecarMounts::Own);
        prop_assert!(violations.is_empty(), "docs/DESIGN.md#the-sidecar violated: {violations:?}\nin {patched}");
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
        let config = test_config();
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
        let reviewed = admission::review(review.to_string().as_bytes(), endpoint, &test_config())
            .map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_ne!(reviewed.outcome, admission::Outcome::Error);
    }

    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = admission::review(&body, Endpoint::Mutate, &test_config());
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
