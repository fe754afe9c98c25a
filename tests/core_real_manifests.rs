//! Issue 27, "What real manifests showed": small defects found in 54 real manifests from
//! public repositories, each named after what it is.

mod core_support;

use core_support::*;
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

#[test]
fn explicit_zero_grace_is_kept_when_nothing_is_injected() {
    // Namespace opt-in (`/mutate/auto`): a Deployment with nothing to clean and no hook
    // of its own asked for nothing; its `0` is its owner's choice.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"terminationGracePeriodSeconds": 0,
                "containers": [{"name": "web", "image": "nginx:1.27"}]}}}});
    let outcome = mutate_with(Endpoint::MutateAuto, &test_config(), deployment.clone());
    assert_eq!(outcome.decision.patch, None, "{}", outcome.warnings());
    assert_eq!(grace(&outcome.patched), Some(0));

    // An annotated Job whose cleanup is refused (no allowed prefix): the same.
    let mut refused = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    refused["spec"]["template"]["spec"]["volumes"] =
        json!([host_path_volume("scratch", "/srv/elsewhere")]);
    refused["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(0);
    let outcome = mutate(refused);
    assert_eq!(outcome.decision.patch, None, "{}", outcome.warnings());

    // What we inject still gets its time, from an explicit 0 too.
    let mut injected = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    injected["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(0);
    let outcome = mutate(injected);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 0)),
        ["/scratch"]
    );
    assert_eq!(grace(&outcome.patched), Some(40));

    // And so does the user's own hook that sleeps.
    let mut sleeping = deployment;
    sleeping["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"exec": {"command": ["sh", "-c", "nginx -s quit; sleep 20"]}}});
    let outcome = mutate_with(Endpoint::MutateAuto, &test_config(), sleeping);
    assert_eq!(
        outcome.patched["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        json!(30)
    );
}

fn stateful_set(mount: Value, env: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "annotations": {"prestop-injector.io/cleanup": "/scratch"}},
        "spec": {"replicas": 1, "serviceName": "web", "template": {"spec": {
            "containers": [{"name": "app", "image": "busybox:1.36", "env": env,
                "securityContext": {"runAsUser": 1000}, "volumeMounts": [mount]}],
            "volumes": [host_path_volume("scratch", "/mnt/scratch")]}}}})
}

#[test]
fn statefulset_sharing_warning_recommends_what_is_enough() {
    // `web-0` comes back under the same name, expecting its directory: a name-based
    // subPathExpr is not a directory of one pod's own there (docs/CLEANUP.md).
    let by_name =
        json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    let by_uid =
        json!([{"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]);
    let fixed = json!({"name": "scratch", "mountPath": "/scratch"});
    let named = json!({"name": "scratch", "mountPath": "/scratch", "subPathExpr": "$(POD_NAME)"});
    let per_uid = json!({"name": "scratch", "mountPath": "/scratch", "subPathExpr": "$(POD_UID)"});
    let warning = "container \"app\": /scratch may be shared by pods of a StatefulSet; \
                   use subPathExpr: $(POD_UID)";
    for (mount, env) in [(fixed, json!([])), (named, by_name)] {
        let outcome = mutate(stateful_set(mount.clone(), env));
        // And, as the config names no node agent, that it is not cleaned at all
        // without one (issue 31): a StatefulSet's pod restarts in place.
        assert_eq!(
            outcome.decision.warnings,
            [
                warning.to_owned(),
                restartable_without_agent("app", "/scratch", "restartPolicy Always")
            ],
            "{mount}"
        );
        assert!(!outcome.warnings().contains("POD_NAME"));
    }
    // A per-pod directory is not shared, but a sandbox recreation keeps the pod's uid, so
    // its sidecar still needs the node's word (issue 31).
    let outcome = mutate(stateful_set(per_uid, by_uid));
    assert_eq!(
        outcome.decision.warnings,
        [restartable_without_agent(
            "app",
            "/scratch",
            "restartPolicy Always"
        )]
    );
}

#[test]
fn sidecar_mode_without_run_as_user_says_what_to_set() {
    // Real Always/OnFailure workloads with writable hostPaths have no runAsUser: sidecar
    // mode falls back to an exec hook, which a finished Job never runs. Say both.
    let object = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl",
        "annotations": {"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "etl", "image": "busybox:1.36",
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
            "volumes": [host_path_volume("scratch", "/mnt/scratch")]}}}});
    let outcome = mutate(object);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 0)),
        ["/scratch"]
    );
    let warnings = &outcome.decision.warnings;
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "container \"etl\": no cleanup sidecar: it has no runAsUser; set securityContext.runAsUser and runAsGroup"
        )),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.starts_with("container \"etl\":")
            && w.contains("exec preStop")
            && w.contains("does not run when it exits on its own (a finished Job)")),
        "{warnings:?}"
    );
    assert!(warnings
        .iter()
        .all(|w| w.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS));
}

fn windows_job(spec_extra: Value) -> Value {
    let mut object = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "win", "annotations": {"prestop-injector.io/cleanup": "auto"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "app", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
                "command": ["bash", "-c", "del C:\\data\\*"],
                "volumeMounts": [{"name": "data", "mountPath": "C:\\data"}]}],
            "volumes": [{"name": "data", "hostPath": {"path": "C:\\scratch", "type": "DirectoryOrCreate"}}]}}}});
    let spec = object["spec"]["template"]["spec"].as_object_mut().unwrap();
    spec.extend(spec_extra.as_object().unwrap().clone());
    object
}

#[test]
fn windows_pods_are_left_alone() {
    let required = |values: Value| {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": values}]}]}}}})
    };
    for spec in [
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        required(json!(["windows"])),
        json!({"os": {"name": "windows"}}),
    ] {
        for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
            let outcome = mutate_with(endpoint, &test_config(), windows_job(spec.clone()));
            assert_eq!(outcome.decision.patch, None, "{spec}");
            assert_eq!(outcome.decision.denial, None, "{spec}");
            assert_eq!(
                outcome.decision.warnings.len(),
                1,
                "{spec}: {}",
                outcome.warnings()
            );
            assert!(
                outcome.decision.warnings[0].starts_with("left unchanged: a Windows pod ("),
                "{}",
                outcome.warnings()
            );
        }
    }
    // A pod that may land on Linux is still decided (here: its bash is fixed).
    let mut either = windows_job(required(json!(["windows", "linux"])));
    either["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.36");
    let outcome = mutate(either);
    assert_eq!(
        container(&outcome.patched, 0)["command"][0],
        "/bin/sh",
        "{}",
        outcome.warnings()
    );
    assert!(!outcome.warnings().contains("Windows"));
}
