//! docs/DESIGN.md, Scope, Annotations, Targets and Responses: which requests are mutated, and every
//! denial message.

mod core_support;

use core_support::*;
use prestop_injector::admission::Operation;
use prestop_injector::config::Config;
use prestop_injector::mutation::{decide, Endpoint};
use serde_json::{json, Value};

#[test]
fn unannotated_objects_are_left_alone_on_mutate_and_injected_on_auto() {
    // Its directory is the pod's own (issue 17 class 7: `auto` without the annotation
    // cleans only those).
    let mut plain = scratch_job(json!({}));
    let worker = &mut plain["spec"]["template"]["spec"]["containers"][0];
    worker["env"] =
        json!([{"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]);
    worker["volumeMounts"][0]["subPathExpr"] = json!("$(UID)");
    assert_eq!(mutate(plain.clone()).decision.patch, None);
    let auto = mutate_with(Endpoint::MutateAuto, &test_config(), plain);
    assert_eq!(
        pre_stop_argv(container(&auto.patched, 0))[1..],
        [
            "hook",
            "--deadline",
            "38",
            "--target",
            "/scratch",
            "--host",
            "/mnt/scratch/$(UID)"
        ],
        "{:?}",
        auto.patched
    );
}

#[test]
fn the_status_annotation_alone_does_not_put_an_object_in_scope() {
    let object = scratch_job(json!({"prestop-injector.io/status": "{}"}));
    assert_eq!(mutate(object).decision.patch, None);
}

#[test]
fn opt_out_wins_everywhere() {
    for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
        let object = scratch_job(
            json!({"prestop-injector.io/inject": "false", "prestop-injector.io/cleanup": "auto"}),
        );
        assert_eq!(
            mutate_with(endpoint, &test_config(), object).decision,
            Default::default()
        );
    }
}

#[test]
fn template_annotations_override_the_object() {
    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "off"}));
    object["spec"]["template"]["metadata"] =
        json!({"annotations": {"prestop-injector.io/cleanup": "auto"}});
    let outcome = mutate(object);
    assert!(!pre_stop_argv(container(&outcome.patched, 0)).is_empty());

    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    object["spec"]["template"]["metadata"] =
        json!({"annotations": {"prestop-injector.io/inject": "false"}});
    assert_eq!(mutate(object).decision.patch, None);
}

#[test]
fn other_operations_kinds_and_subresources_are_never_patched() {
    let job = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    for operation in [
        Operation::Delete,
        Operation::Connect,
        Operation::Update,
        Operation::Unknown,
    ] {
        let decision = decide(
            &request(operation, job.clone()),
            Endpoint::MutateAuto,
            &test_config(),
        );
        assert_eq!(decision, Default::default(), "{operation:?}");
    }
    let mut status_update = request(Operation::Create, job.clone());
    status_update.sub_resource = Some("status".into());
    assert_eq!(
        decide(&status_update, Endpoint::MutateAuto, &test_config()),
        Default::default()
    );

    let mut config_map = job.clone();
    config_map["apiVersion"] = json!("v1");
    config_map["kind"] = json!("ConfigMap");
    assert_eq!(
        mutate_with(Endpoint::MutateAuto, &test_config(), config_map).decision,
        Default::default()
    );

    let mut no_object = request(Operation::Create, job);
    no_object.object = None;
    assert_eq!(
        decide(&no_object, Endpoint::MutateAuto, &test_config()),
        Default::default()
    );
}

#[test]
fn every_kind_uses_its_template_path() {
    let template = json!({
        "metadata": {"annotations": {"prestop-injector.io/cleanup": "auto"}},
        "spec": {"containers": [scratch_container()], "volumes": [host_path_volume("scratch", "/mnt/scratch")],
            // The exec hook only where the kubelet never restarts the container in its pod
            // (issue 17 class 3).
            "restartPolicy": "Never"}
    });
    let cases: Vec<(Operation, Value, &str)> = vec![
        (
            Operation::Create,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": template}}),
            "/spec/template",
        ),
        (
            Operation::Update,
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}),
            "/spec/jobTemplate/spec/template",
        ),
        (
            Operation::Create,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}),
            "",
        ),
        (
            Operation::Update,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": template}}),
            "/spec/template",
        ),
        (
            Operation::Create,
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": template}}),
            "/spec/template",
        ),
        (
            Operation::Create,
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"template": template}}),
            "/spec/template",
        ),
        (
            Operation::Create,
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"template": template}}),
            "/spec/template",
        ),
    ];
    for (operation, object, pointer) in cases {
        let decision = decide(
            &request(operation, object.clone()),
            Endpoint::Mutate,
            &test_config(),
        );
        let patch = decision
            .patch
            .unwrap_or_else(|| panic!("{} must be patched", object["kind"]));
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch.to_json_patch()).unwrap();
        let template = patched.pointer(pointer).unwrap();
        assert!(
            template
                .pointer("/spec/containers/0/lifecycle/preStop/exec/command")
                .is_some(),
            "{}",
            object["kind"]
        );
        assert!(
            template
                .pointer("/metadata/annotations/prestop-injector.io~1status")
                .is_some(),
            "{}",
            object["kind"]
        );
        for op in patch.0.iter() {
            assert!(
                op.path().to_string().starts_with(pointer),
                "{} touched {}",
                object["kind"],
                op.path()
            );
        }
    }
}

/// Each malformed annotation is denied with the key, the bad value and the accepted forms.
#[test]
fn malformed_annotations_are_denied_with_a_usable_message() {
    let cases = [
        (
            "prestop-injector.io/cleanup",
            "scratch",
            &["not absolute", "auto, off"][..],
        ),
        ("prestop-injector.io/cleanup", "/", &["root directory"]),
        (
            "prestop-injector.io/cleanup",
            "/scratch/",
            &["not normalized"],
        ),
        (
            "prestop-injector.io/cleanup",
            "/scratch//x",
            &["not normalized"],
        ),
        (
            "prestop-injector.io/cleanup",
            "/scratch/../etc",
            &["not normalized"],
        ),
        ("prestop-injector.io/cleanup", "/scratch,", &["is empty"]),
        (
            "prestop-injector.io/cleanup",
            "/elsewhere",
            &["not at or below a writable volumeMount"],
        ),
        (
            "prestop-injector.io/hook-seconds",
            "soon",
            &["not a duration", "1m30s"],
        ),
        (
            "prestop-injector.io/shutdown-seconds",
            "-5",
            &["not a duration"],
        ),
        (
            "prestop-injector.io/ttl-after-finished",
            "1d",
            &["not a duration"],
        ),
        ("prestop-injector.io/mode", "daemon", &["exec or sidecar"]),
        (
            "prestop-injector.io/fix-shell",
            "yes",
            &["\"true\" or \"false\""],
        ),
        (
            "prestop-injector.io/inject",
            "maybe",
            &["\"true\" or \"false\""],
        ),
        ("prestop-injector.io/shell", "sh", &["absolute path"]),
        (
            "prestop-injector.io/shell",
            "/bin/sh -x",
            &["absolute path"],
        ),
        (
            "prestop-injector.io/containers",
            "nope",
            &["no app container named \"nope\"", "containers: app"],
        ),
        (
            "prestop-injector.io/containers",
            "app,,x",
            &["comma-separated container names"],
        ),
        ("prestop-injector.io/command", "  ", &["empty"]),
        (
            "prestop-injector.io/cleanupp",
            "auto",
            &["unknown annotation", "cleanup"],
        ),
    ];
    for (key, value, expected) in cases {
        let outcome = mutate(scratch_job(json!({ key: value })));
        let denial = outcome
            .decision
            .denial
            .clone()
            .unwrap_or_else(|| panic!("{key}={value:?} must be denied"));
        assert_eq!(outcome.decision.patch, None);
        assert_eq!(denial.code, 400);
        assert!(
            denial
                .message
                .starts_with("Job default/job-worker: annotation "),
            "{}",
            denial.message
        );
        assert!(denial.message.contains(key), "{}", denial.message);
        assert!(
            denial.message.contains(&format!("{value:?}")) || key.ends_with("containers"),
            "{}",
            denial.message
        );
        for part in expected {
            assert!(
                denial.message.contains(part),
                "{key}={value:?}: {:?} lacks {part:?}",
                denial.message
            );
        }
    }
}

#[test]
fn explicit_paths_must_be_inside_a_writable_unprotected_mount() {
    let container = json!({"name": "app", "image": "busybox", "volumeMounts": [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "config", "mountPath": "/scratch/config", "readOnly": true},
        {"name": "etc", "mountPath": "/host-etc"},
        {"name": "cache", "mountPath": "/cache"},
        {"name": "ro", "mountPath": "/ro", "readOnly": true},
    ]});
    let volumes = json!([
        host_path_volume("scratch", "/mnt/scratch"),
        {"name": "config", "configMap": {"name": "x"}},
        host_path_volume("etc", "/etc"),
        {"name": "cache", "emptyDir": {}},
        {"name": "ro", "emptyDir": {}},
    ]);
    let cases = [
        ("/scratch/work", None),
        // An emptyDir is below no allowed prefix (issue 17 class 5; it was cleaned).
        (
            "/cache",
            Some("is on volume \"cache\", which is not a hostPath"),
        ),
        ("/cache/a/b", Some("which is not a hostPath")),
        ("/scratch/config", Some("read-only mount /scratch/config")),
        ("/scratch", Some("mounted inside it at /scratch/config")),
        ("/ro/x", Some("read-only mount /ro")),
        ("/host-etc/ssl", Some("protected host directory /etc")),
        ("/tmp", Some("not at or below a writable volumeMount")),
        ("/scratchy", Some("not at or below a writable volumeMount")),
    ];
    for (path, refusal) in cases {
        let object = job(
            json!({"prestop-injector.io/cleanup": path}),
            container.clone(),
            volumes.clone(),
        );
        let outcome = mutate(object);
        match refusal {
            None => {
                assert_eq!(outcome.decision.denial, None, "{path}");
                // The target (followed by --host H when it is on a hostPath volume).
                let argv = pre_stop_argv(container_of(&outcome));
                assert!(
                    argv.windows(2).any(|w| w == ["--target", path]),
                    "{path}: {argv:?}"
                );
            }
            Some(reason) => assert!(
                outcome.denial().contains(reason),
                "{path}: {}",
                outcome.denial()
            ),
        }
    }
}

fn container_of(outcome: &Outcome) -> &Value {
    container(&outcome.patched, 0)
}

#[test]
fn auto_cleans_writable_unprotected_host_path_directories_only() {
    let cases = [
        (
            json!({"path": "/mnt/scratch", "type": "DirectoryOrCreate"}),
            false,
            true,
        ),
        (json!({"path": "/mnt/scratch"}), false, true),
        (json!({"path": "/mnt/scratch", "type": ""}), false, true),
        (
            json!({"path": "/mnt/scratch", "type": "Directory"}),
            false,
            true,
        ),
        (
            json!({"path": "/mnt/scratch/", "type": "Directory"}),
            false,
            true,
        ),
        (
            json!({"path": "/mnt/scratch", "type": "Directory"}),
            true,
            false,
        ),
        (json!({"path": "/mnt/file", "type": "File"}), false, false),
        (
            json!({"path": "/run/containerd/containerd.sock", "type": "Socket"}),
            false,
            false,
        ),
        (json!({"path": "/var/lib/myjob"}), false, true),
        (json!({"path": "/opt/scratch"}), false, true),
        (json!({"path": "/tmp/job"}), false, true),
        (json!({"path": "/"}), false, false),
        (json!({"path": "/etc"}), false, false),
        (json!({"path": "/etc/app"}), false, false),
        (json!({"path": "/lib64"}), false, false),
        (json!({"path": "/var"}), false, false),
        (json!({"path": "/var/lib"}), false, false),
        (json!({"path": "/var/lib/kubelet/pods"}), false, false),
        (json!({"path": "/var/log/app"}), false, false),
        (json!({"path": "/home"}), false, false),
        (json!({"path": "/usr/local"}), false, false),
        (json!({"path": "/mnt/../etc"}), false, false),
    ];
    for (host_path, read_only, cleaned) in cases {
        let mut container = scratch_container();
        container["volumeMounts"][0]["readOnly"] = json!(read_only);
        let object = job(
            json!({"prestop-injector.io/cleanup": "auto"}),
            container,
            json!([{"name": "scratch", "hostPath": host_path}]),
        );
        // Every host path allowed: the types and the protected list decide.
        let outcome = mutate_with(Endpoint::Mutate, &protected_list_only(), object);
        let argv = pre_stop_argv(container_of(&outcome));
        assert_eq!(
            argv.iter().any(|a| a == "/scratch"),
            cleaned,
            "{host_path} ro={read_only}: {argv:?}"
        );
        if !cleaned {
            assert!(
                outcome.warnings().contains("nothing to clean"),
                "{host_path}: {}",
                outcome.warnings()
            );
        }
    }
}

#[test]
fn auto_respects_configured_prefixes_and_protections() {
    let config = Config::from_yaml(
        "allowedHostPathPrefixes: [/scratch-disks]\nprotectedHostPaths: [/scratch-disks/keep]\n",
    )
    .unwrap();
    for (host_path, cleaned) in [
        ("/scratch-disks/a", true),
        ("/mnt/scratch", false),
        ("/scratch-disks/keep/x", false),
    ] {
        let object = job(
            json!({"prestop-injector.io/cleanup": "auto"}),
            scratch_container(),
            json!([host_path_volume("scratch", host_path)]),
        );
        let outcome = mutate_with(Endpoint::Mutate, &config, object);
        assert_eq!(
            !pre_stop_argv(container_of(&outcome)).is_empty(),
            cleaned,
            "{host_path}"
        );
    }
}

#[test]
fn auto_skips_a_mount_with_another_mount_inside_it() {
    let mut container = scratch_container();
    container["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "secret", "mountPath": "/scratch/secret"}));
    let volumes = json!([host_path_volume("scratch", "/mnt/scratch"), {"name": "secret", "secret": {"secretName": "s"}}]);
    let outcome = mutate(job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        container,
        volumes,
    ));
    assert!(pre_stop_argv(container_of(&outcome)).is_empty());
    assert!(
        outcome
            .warnings()
            .contains("/scratch/secret is mounted inside it"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn implicit_auto_on_the_auto_endpoint_does_not_warn_when_there_is_nothing_to_clean() {
    let object = job(
        json!({}),
        json!({"name": "app", "image": "nginx"}),
        json!([]),
    );
    let outcome = mutate_with(Endpoint::MutateAuto, &test_config(), object);
    assert_eq!(outcome.decision, Default::default());
}

#[test]
fn containers_annotation_restricts_injection() {
    let mut object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/containers": "second"}),
    );
    // Each on a directory of its own: a directory both mount is cleaned by neither's
    // preStop (core_pod_end, containers sharing a directory).
    let mut second = scratch_container();
    second["name"] = json!("second");
    second["volumeMounts"][0]["name"] = json!("work");
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"].as_array_mut().unwrap().push(second);
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(host_path_volume("work", "/mnt/work"));
    let outcome = mutate(object);
    assert!(pre_stop_argv(container(&outcome.patched, 0)).is_empty());
    assert!(!pre_stop_argv(container(&outcome.patched, 1)).is_empty());
    assert_eq!(
        status(&outcome.patched).unwrap()["containers"],
        json!(["second"])
    );
}

/// A pod template whose `initContainers` (or `containers`, `volumes`) is not a list: the
/// API server refuses it, the offline CLI may be given it. It is left unchanged, said
/// once. Before, the hook named the program while its installer went nowhere, and a
/// second pass changed the object again.
#[test]
fn a_template_whose_lists_are_not_lists_is_left_unchanged() {
    for field in ["initContainers", "containers", "volumes"] {
        for odd in [json!({}), json!("x"), json!(1), json!(true)] {
            let mut object =
                core_support::scratch_job(json!({"prestop-injector.io/cleanup": "/scratch"}));
            object["spec"]["template"]["spec"][field] = odd.clone();
            let outcome = core_support::mutate(object);
            assert_eq!(outcome.decision.patch, None, "{field} = {odd}");
            assert_eq!(
                outcome.decision.warnings,
                [format!(
                    "left unchanged: spec.{field} of the pod template is not a list"
                )],
                "{field} = {odd}"
            );
        }
    }
}
