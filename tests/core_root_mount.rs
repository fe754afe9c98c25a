//! A hostPath volume mounted at `/`: a target `/b` below it is the volume's `b`, one level
//! down. The host path was made by cutting the mount's path off the target, which for a
//! mount at `/` cut the target's own `/`: `/mnt/scratch/a` and `/b` gave
//! `/mnt/scratch/ab`, a sibling the pod never mounted. The protected list and the overlap
//! rule were then applied to that name, and in shell mode with a seal the reaper was
//! pointed at it (its identity check checks the same wrong name).

mod core_support;

use core_support::{
    container, host_path_volume, job, mutate_with, pre_stop_argv, test_config_with,
};
use prestop_injector::mutation::Endpoint;
use prestop_injector::seal_keys::SealKeys;
use serde_json::{json, Value};

fn root_mount_job(target: &str, volume: &str) -> Value {
    job(
        json!({"prestop-injector.io/cleanup": target}),
        json!({"name": "app", "image": "busybox",
               "volumeMounts": [{"name": "root", "mountPath": "/"}]}),
        json!([host_path_volume("root", volume)]),
    )
}

/// The protected entry below a root mount is refused, named, as it is below any mount.
#[test]
fn a_protected_entry_below_a_root_mount_is_refused() {
    for extra in ["", "cleaner: {mode: shell}"] {
        let config = test_config_with(&format!(
            "{extra}\nallowedHostPathPrefixes: [/mnt/scratch]\nprotectedHostPaths: [/mnt/scratch/a/keep]"
        ));
        let outcome = mutate_with(
            Endpoint::Mutate,
            &config,
            root_mount_job("/keep", "/mnt/scratch/a"),
        );
        let denial = outcome
            .decision
            .denial
            .unwrap_or_else(|| panic!("[{extra}] not refused: {:?}", outcome.decision.warnings));
        assert!(
            denial.message.contains("/mnt/scratch/a/keep"),
            "[{extra}] {}",
            denial.message
        );
        assert!(pre_stop_argv(container(&outcome.patched, 0)).is_empty());
    }
}

/// What the reaper derives from the pod's seal is the directory the pod mounts: the
/// volume's `b`, never the sibling `/mnt/scratch/ab`.
#[test]
fn the_reaper_reaches_the_directory_below_the_root_mount_not_a_sibling() {
    let mut config =
        test_config_with("cleaner: {mode: shell}\nallowedHostPathPrefixes: [/mnt/scratch]");
    config.seal = SealKeys::parse(&"5e".repeat(32)).expect("a key");
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1",
                     "annotations": {"prestop-injector.io/cleanup": "/b"}},
        "spec": {"restartPolicy": "Never",
                 "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                 "containers": [{"name": "app", "image": "busybox",
                                 "volumeMounts": [{"name": "root", "mountPath": "/"}]}],
                 "volumes": [host_path_volume("root", "/mnt/scratch/a")]}
    });
    let outcome = mutate_with(Endpoint::Mutate, &config, pod);
    let facts =
        prestop_injector::reaper::derive::pod_facts(&outcome.patched.clone().into(), &config)
            .expect("a pod with a uid");
    assert_eq!(facts.cleanable, ["/mnt/scratch/a/b"]);
}
