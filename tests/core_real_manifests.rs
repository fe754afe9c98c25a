//! Issue 27, "What real manifests showed": small defects found in 54 real manifests from
//! public repositories, each named after what it is.

mod core_support;

use core_support::*;
use serde_json::{json, Value};

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
        assert_eq!(outcome.decision.warnings, [warning], "{mount}");
        assert!(!outcome.warnings().contains("POD_NAME"));
    }
    let outcome = mutate(stateful_set(per_uid, by_uid));
    assert_eq!(outcome.decision.warnings, Vec::<String>::new());
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
    assert!(warnings.iter().all(|w| w.chars().count() <= 120));
}
