//! Issue 27, "When the exec hook runs": a container's stop is not the end of its
//! directory's use (docs/DESIGN.md#where-the-cleanup-runs). An exec preStop empties a
//! target only when no other container of the pod — app container, native sidecar — mounts
//! the same host directory (or one above it); otherwise the cleanup sidecar, which stops
//! after every user, takes it where the cluster runs it, else nothing is injected and a
//! warning names the other container.

mod core_support;

use core_support::*;
use prestop_injector::config::Config;
use prestop_injector::mutation::hook::sidecar_targets;
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

/// An app or sidecar container mounting `mounts`, with a numeric user (the sidecar can
/// run as it) unless the test removes it.
fn user(name: &str, mounts: Value) -> Value {
    json!({"name": name, "image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"],
           "securityContext": {"runAsUser": 1000, "runAsGroup": 3000}, "volumeMounts": mounts})
}

fn native_sidecar(name: &str, mounts: Value) -> Value {
    let mut container = user(name, mounts);
    container["restartPolicy"] = json!("Always");
    container
}

/// A `restartPolicy: Never` Job with `cleanup: auto`, these containers and volumes: the
/// restart rule lets an exec hook clean every one of them.
fn job_of(containers: Value, init: Value, volumes: Value) -> Value {
    let mut object = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        json!({}),
        volumes,
    );
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"] = containers;
    if init != json!([]) {
        spec["initContainers"] = init;
    }
    object
}

fn data() -> Value {
    json!([{"name": "scratch", "mountPath": "/data"}])
}

fn scratch() -> Value {
    json!([host_path_volume("scratch", "/mnt/scratch/job")])
}

/// The node the e2e suite runs on: Kubernetes 1.20, no native sidecars.
fn on_1_20() -> Config {
    test_config_with("kubernetesVersion: \"1.20\"")
}

fn no_sidecar_allowed() -> Config {
    test_config_with("sidecar:\n  allowed: false")
}

/// Init container names in order, ours as `OURS`.
fn init_names(object: &Value) -> Vec<String> {
    let list = template_spec(object)["initContainers"].as_array();
    list.into_iter()
        .flatten()
        .map(|c| match our_sidecar_targets(c) {
            Some(_) => "OURS".to_owned(),
            None => c["name"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

fn our_sidecar_targets(container: &Value) -> Option<Vec<String>> {
    let argv: Vec<String> = serde_json::from_value(container.get("command")?.clone()).ok()?;
    sidecar_targets(&argv)
}

fn sidecar_targets_of(object: &Value) -> Option<Vec<String>> {
    let list = template_spec(object)["initContainers"].as_array()?;
    list.iter().find_map(our_sidecar_targets)
}

#[test]
fn user_sidecar_sharing_the_directory_gets_the_cleanup_sidecar() {
    // The uploader ships /data/results from its SIGTERM handler, which the kubelet sends
    // after the app containers stopped: an exec hook would have emptied /data by then.
    let init = json!([user("fetch", json!([])), native_sidecar("uploader", data())]);
    for config in [
        test_config(),
        test_config_with("kubernetesVersion: \"1.29\""),
    ] {
        let object = job_of(json!([user("worker", data())]), init.clone(), scratch());
        let outcome = mutate_with(Endpoint::Mutate, &config, object);
        assert_eq!(outcome.decision.denial, None);
        let worker = container(&outcome.patched, 0);
        assert!(
            worker.pointer("/lifecycle/preStop").is_none(),
            "no exec cleanup: {worker}"
        );
        assert_eq!(
            sidecar_targets_of(&outcome.patched),
            Some(strings(&["/data"]))
        );
        // Sidecars stop in reverse order: ours, before the uploader, stops after it.
        assert_eq!(
            init_names(&outcome.patched),
            ["fetch", "OURS", "uploader"],
            "{}",
            outcome.warnings()
        );
        let status = status(&outcome.patched).unwrap();
        assert_eq!(status["containers"], json!(["worker"]));
        assert!(status["sidecar"].is_string(), "{status}");
        // The Job's one pod at a time still overlaps with its replacement (issue 31).
        assert_eq!(
            outcome.decision.warnings,
            [
                replaced("worker", "/data"),
                fixed_without_agent("worker", "/data"),
            ]
        );
        // The Job's pods reproduce the decision: the sidecar's copy of /data is not
        // another user of the directory, so nothing moves back to an exec hook.
        let template = &outcome.patched["spec"]["template"];
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "job-worker-x7k2p", "annotations": template["metadata"]["annotations"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                    "name": "job-worker", "controller": true}]},
            "spec": template["spec"]});
        assert_no_patch_on_either_endpoint(&pod);
    }
}

#[test]
fn user_sidecar_sharing_the_directory_without_sidecar_support_is_warned() {
    let init = json!([native_sidecar("uploader", data())]);
    let mut no_user = user("worker", data());
    no_user["securityContext"] = json!({});
    for (config, worker, why) in [
        (
            no_sidecar_allowed(),
            user("worker", data()),
            "sidecar mode is not allowed",
        ),
        // The sidecar cannot run as a user the app does not name.
        (test_config(), no_user, "(exec), it has no runAsUser"),
    ] {
        let object = job_of(json!([worker]), init.clone(), scratch());
        let outcome = mutate_with(Endpoint::Mutate, &config, object.clone());
        assert_eq!(outcome.decision.denial, None);
        assert!(
            container(&outcome.patched, 0)
                .pointer("/lifecycle")
                .is_none(),
            "{}",
            outcome.warnings()
        );
        assert_eq!(init_names(&outcome.patched), ["uploader"]);
        let warnings = outcome.warnings();
        assert!(
            warnings.contains("\"uploader\" also mounts") && warnings.contains("/data"),
            "names the other container: {warnings}"
        );
        assert!(warnings.contains(why), "says why no sidecar: {warnings}");
        // Nothing injected: nothing else of the object is touched either.
        assert_eq!(outcome.decision.patch, None, "{warnings}");
    }
}

#[test]
fn two_app_containers_sharing_the_directory_do_not_get_an_exec_cleanup() {
    // The kubelet kills `worker` after a failed liveness probe and never restarts it
    // (restartPolicy Never); the pod goes on with `shipper` on the same directory.
    let mut worker = user("worker", data());
    worker["livenessProbe"] = json!({"exec": {"command": ["test", "-e", "/data/alive"]}});
    let shipper = user("shipper", json!([{"name": "scratch", "mountPath": "/out"}]));
    let object = job_of(json!([worker, shipper]), json!([]), scratch());

    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object.clone());
    for index in [0, 1] {
        assert_eq!(
            cleanup_targets(container(&outcome.patched, index)),
            Vec::<String>::new()
        );
    }
    let warnings = &outcome.decision.warnings;
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "container \"worker\": /data not cleaned: \"shipper\" also mounts it; use separate subPaths"
        )),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w
                .starts_with("container \"shipper\": /out not cleaned: \"worker\" also mounts it")),
        "{warnings:?}"
    );
    assert_eq!(outcome.decision.patch, None);

    // Where the cluster runs native sidecars, one cleanup sidecar cleans both, last.
    let outcome = mutate_with(Endpoint::Mutate, &test_config(), object);
    for index in [0, 1] {
        assert!(container(&outcome.patched, index)
            .pointer("/lifecycle")
            .is_none());
    }
    assert_eq!(
        sidecar_targets_of(&outcome.patched),
        Some(strings(&["/data", "/out"]))
    );
    assert_eq!(
        status(&outcome.patched).unwrap()["containers"],
        json!(["worker", "shipper"])
    );
}

#[test]
fn containers_on_different_directories_keep_their_exec_hooks() {
    let object = job_of(
        json!([
            user("worker", data()),
            user("shipper", json!([{"name": "out", "mountPath": "/out"}])),
        ]),
        json!([native_sidecar(
            "metrics",
            json!([{"name": "tmp", "mountPath": "/tmp"}])
        )]),
        json!([
            host_path_volume("scratch", "/mnt/scratch/job"),
            host_path_volume("out", "/mnt/work/out"),
            {"name": "tmp", "emptyDir": {}},
        ]),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    assert_eq!(cleanup_targets(container(&outcome.patched, 0)), ["/data"]);
    assert_eq!(cleanup_targets(container(&outcome.patched, 1)), ["/out"]);
    // Each fixed directory may still be a replacement pod's (issue 31).
    assert_eq!(
        outcome.decision.warnings,
        [
            replaced("worker", "/data"),
            fixed_without_agent("worker", "/data"),
            replaced("shipper", "/out"),
            fixed_without_agent("shipper", "/out"),
        ]
    );
}

#[test]
fn same_volume_with_another_sub_path_is_another_directory() {
    let object = job_of(
        json!([
            user(
                "worker",
                json!([{"name": "scratch", "mountPath": "/data", "subPath": "w"}])
            ),
            user(
                "shipper",
                json!([{"name": "scratch", "mountPath": "/data", "subPath": "s"}])
            ),
        ]),
        json!([]),
        scratch(),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    assert_eq!(cleanup_targets(container(&outcome.patched, 0)), ["/data"]);
    assert_eq!(cleanup_targets(container(&outcome.patched, 1)), ["/data"]);
    assert_eq!(
        outcome.decision.warnings,
        [
            replaced("worker", "/data"),
            fixed_without_agent("worker", "/data"),
            replaced("shipper", "/data"),
            fixed_without_agent("shipper", "/data"),
        ]
    );
}

#[test]
fn same_volume_and_sub_path_spelled_another_way_is_the_same_directory() {
    let object = job_of(
        json!([
            user(
                "worker",
                json!([{"name": "scratch", "mountPath": "/data", "subPath": "w"}])
            ),
            user(
                "shipper",
                json!([{"name": "scratch", "mountPath": "/in", "subPath": "w/"}])
            ),
        ]),
        json!([]),
        scratch(),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 0)),
        Vec::<String>::new()
    );
    assert!(
        outcome.warnings().contains("\"shipper\" also mounts it"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn different_volumes_on_the_same_host_path_are_the_same_directory() {
    // `/mnt/scratch/job` twice, once as a volume of its own and once as a subPath of its
    // parent: the same directory on the node, whatever the spelling.
    for (volume, sub_path) in [
        (host_path_volume("alias", "/mnt/scratch/job/"), json!(null)),
        (host_path_volume("alias", "/mnt/scratch"), json!("job")),
    ] {
        let mut shipper_mount = json!({"name": "alias", "mountPath": "/out"});
        if !sub_path.is_null() {
            shipper_mount["subPath"] = sub_path;
        }
        let object = job_of(
            json!([
                user("worker", data()),
                user("shipper", json!([shipper_mount]))
            ]),
            json!([]),
            json!([host_path_volume("scratch", "/mnt/scratch/job"), volume]),
        );
        let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
        for index in [0, 1] {
            assert_eq!(
                cleanup_targets(container(&outcome.patched, index)),
                Vec::<String>::new(),
                "{}",
                outcome.warnings()
            );
        }
    }
}

#[test]
fn a_container_mounting_the_directory_above_shares_it() {
    // `shipper` sees worker's /mnt/scratch/job as /all/job.
    let object = job_of(
        json!([
            user(
                "worker",
                json!([{"name": "scratch", "mountPath": "/data", "subPath": "job"}])
            ),
            user(
                "shipper",
                json!([{"name": "scratch", "mountPath": "/all", "readOnly": true}])
            ),
        ]),
        json!([]),
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 0)),
        Vec::<String>::new()
    );
    assert!(
        outcome
            .warnings()
            .contains("container \"worker\": /data not cleaned: \"shipper\" also mounts it"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn a_sub_path_expr_that_may_name_the_directory_shares_it() {
    // `$(DIR)` is known to the kubelet only: it may be `job` (fail closed).
    let mut shipper = user(
        "shipper",
        json!([{"name": "scratch", "mountPath": "/out", "subPathExpr": "$(DIR)"}]),
    );
    shipper["env"] = json!([{"name": "DIR", "value": "job"}]);
    let object = job_of(
        json!([
            user(
                "worker",
                json!([{"name": "scratch", "mountPath": "/data", "subPath": "job"}])
            ),
            shipper,
        ]),
        json!([]),
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    // The target rule already refuses it (a view of the pod may lie inside the target).
    for index in [0, 1] {
        assert_eq!(
            cleanup_targets(container(&outcome.patched, index)),
            Vec::<String>::new(),
            "{}",
            outcome.warnings()
        );
    }
}

#[test]
fn only_the_shared_target_leaves_the_exec_hook() {
    let worker = user(
        "worker",
        json!([{"name": "scratch", "mountPath": "/data"}, {"name": "own", "mountPath": "/own"}]),
    );
    let object = job_of(
        json!([worker, user("shipper", data())]),
        json!([]),
        json!([
            host_path_volume("scratch", "/mnt/scratch/job"),
            host_path_volume("own", "/mnt/work/own"),
        ]),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    assert_eq!(cleanup_targets(container(&outcome.patched, 0)), ["/own"]);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 1)),
        Vec::<String>::new()
    );
    assert!(
        outcome
            .warnings()
            .contains("container \"worker\": /data not cleaned: \"shipper\" also mounts it"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn a_plain_init_container_has_finished_and_does_not_count() {
    let object = job_of(
        json!([user("worker", data())]),
        json!([user("prepare", data())]),
        scratch(),
    );
    let outcome = mutate_with(Endpoint::Mutate, &on_1_20(), object);
    assert_eq!(cleanup_targets(container(&outcome.patched, 0)), ["/data"]);
    assert_eq!(
        outcome.decision.warnings,
        [
            replaced("worker", "/data"),
            fixed_without_agent("worker", "/data"),
        ]
    );
}
