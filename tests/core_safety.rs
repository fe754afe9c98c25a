//! Deletion safety, classes 1, 2, 3 and 9 of issue 9: the attacks and the careless
//! manifests that made the cleanup empty data it must not. Each test is named for its
//! class; every mutation is applied with json-patch and checked to be idempotent.

mod core_support;
use core_support::protected_list_only;
use core_support::{test_config, test_config_with};

use core_support::{container, job, mutate, mutate_with, pre_stop_argv, Outcome};
use prestop_injector::config::Config;
use prestop_injector::mutation::hook::{Action, Hook};
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

/// The targets the first container's hook cleans (empty when there is no hook of ours).
fn cleaned(outcome: &Outcome) -> Vec<String> {
    cleaned_by(outcome, 0)
}

fn cleaned_by(outcome: &Outcome, index: usize) -> Vec<String> {
    match Hook::from_argv(&pre_stop_argv(container(&outcome.patched, index))) {
        Some(Hook {
            action: Action::Cleanup(targets),
            ..
        }) => prestop_injector::mutation::hook::target_paths(&targets),
        _ => Vec::new(),
    }
}

fn app(mounts: Value) -> Value {
    json!({"name": "app", "image": "busybox:1.36", "volumeMounts": mounts})
}

fn host(name: &str, path: &str) -> Value {
    json!({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
}

fn keep_config() -> Config {
    test_config_with("protectedHostPaths: [/data/keep]\n")
}

fn auto(container: Value, volumes: Value, config: &Config) -> Outcome {
    mutate_with(
        Endpoint::Mutate,
        config,
        job(
            json!({"prestop-injector.io/cleanup": "auto"}),
            container,
            volumes,
        ),
    )
}

fn explicit(paths: &str, container: Value, volumes: Value, config: &Config) -> Outcome {
    mutate_with(
        Endpoint::Mutate,
        config,
        job(
            json!({"prestop-injector.io/cleanup": paths}),
            container,
            volumes,
        ),
    )
}

fn assert_denied(outcome: &Outcome, parts: &[&str]) {
    assert_eq!(outcome.decision.patch, None);
    let message = outcome.denial();
    assert!(message.contains("prestop-injector.io/cleanup"), "{message}");
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

// ---- class 1: protected paths protect what is above them too ----

#[test]
fn class1_protected_tree_below_target_auto() {
    let outcome = auto(
        app(json!([{"name": "d", "mountPath": "/data"}])),
        json!([host("d", "/data")]),
        &keep_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
    assert!(
        outcome.warnings().contains("/data/keep"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn class1_protected_tree_below_target_explicit() {
    for (path, mount) in [("/data", "/data"), ("/data/keep", "/data"), ("/d", "/d")] {
        let outcome = explicit(
            path,
            app(json!([{"name": "d", "mountPath": mount}])),
            json!([host("d", "/data")]),
            &keep_config(),
        );
        assert_denied(&outcome, &[path, "protected host directory /data/keep"]);
    }
}

#[test]
fn class1_protected_tree_reached_through_sub_path() {
    for sub_path in ["keep", "keep/", "./keep", "keep/x"] {
        let outcome = auto(
            app(json!([{"name": "d", "mountPath": "/work", "subPath": sub_path}])),
            json!([host("d", "/data")]),
            &keep_config(),
        );
        assert!(cleaned(&outcome).is_empty(), "{sub_path}: {outcome:?}");
    }
    // A sibling of the protected directory is fine.
    let outcome = auto(
        app(json!([{"name": "d", "mountPath": "/work", "subPath": "other"}])),
        json!([host("d", "/data")]),
        &keep_config(),
    );
    assert_eq!(cleaned(&outcome), ["/work"]);
}

#[test]
fn class1_sub_path_expr_may_be_the_protected_directory() {
    let container = json!({"name": "app", "image": "busybox:1.36",
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "d", "mountPath": "/work", "subPathExpr": "$(POD_NAME)"}]});
    let outcome = auto(
        container.clone(),
        json!([host("d", "/data")]),
        &keep_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
    let outcome = explicit(
        "/work/x",
        container.clone(),
        json!([host("d", "/data")]),
        &keep_config(),
    );
    assert_denied(&outcome, &["/data/keep"]);
    // The per-pod directory of a scratch volume is cleaned.
    let outcome = auto(
        container,
        json!([host("d", "/mnt/scratch")]),
        &test_config(),
    );
    assert_eq!(cleaned(&outcome), ["/work"]);
}

#[test]
fn class1_sub_path_expr_that_may_be_empty_is_the_volume_itself() {
    // `$(EMPTY)` expands to nothing: the kubelet mounts /tmp itself.
    let container = json!({"name": "app", "image": "busybox:1.36", "env": [{"name": "EMPTY", "value": ""}],
        "volumeMounts": [{"name": "d", "mountPath": "/work", "subPathExpr": "$(EMPTY)"}]});
    let outcome = auto(container, json!([host("d", "/tmp")]), &test_config());
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
}

#[test]
fn class1_builtin_entries_of_the_spec() {
    for path in [
        "/var/lib/containers",
        "/var/lib/etcd",
        "/var/lib/cni",
        "/opt/cni",
        "/var/lib/calico",
        "/var/lib/rancher/k3s",
        "/var/lib/k0s",
        "/var/snap",
        "/var/lib/kube-proxy",
        "/var/lib/longhorn",
        "/var/openebs/local",
        "/var/lib/dpkg",
        "/var/lib/apt",
        "/var/lib/rpm",
        "/var/lib/systemd",
        "/var/lock",
        "/var/roothome",
        "/var/home/core",
        "/home/kubernetes",
        "/tmp",
        "/var/tmp",
        "/mnt",
        "/opt",
        "/srv",
        "/home",
    ] {
        let outcome = auto(
            app(json!([{"name": "d", "mountPath": "/d"}])),
            json!([host("d", path)]),
            &protected_list_only(),
        );
        assert!(cleaned(&outcome).is_empty(), "{path}: {outcome:?}");
        let outcome = explicit(
            "/d",
            app(json!([{"name": "d", "mountPath": "/d"}])),
            json!([host("d", path)]),
            &protected_list_only(),
        );
        assert_denied(&outcome, &["protected host directory"]);
    }
    // Their subdirectories are scratch space.
    for path in [
        "/tmp/job",
        "/var/tmp/job",
        "/mnt/scratch",
        "/srv/x",
        "/opt/x",
    ] {
        let outcome = auto(
            app(json!([{"name": "d", "mountPath": "/d"}])),
            json!([host("d", path)]),
            &protected_list_only(),
        );
        assert_eq!(cleaned(&outcome), ["/d"], "{path}");
    }
}

#[test]
fn class1_explicit_suffix_below_the_mount_reaches_a_protected_tree() {
    // hostPath /var mounted at /host-var: the mount itself is the exact entry /var, and
    // /host-var/lib/etcd is inside a protected tree.
    for path in [
        "/host-var/lib/etcd/member",
        "/host-var/lib",
        "/host-var/log",
    ] {
        let outcome = explicit(
            path,
            app(json!([{"name": "v", "mountPath": "/host-var"}])),
            json!([host("v", "/var")]),
            &protected_list_only(),
        );
        assert_denied(&outcome, &["protected host directory"]);
    }
    let outcome = explicit(
        "/host-var/lib/myjob",
        app(json!([{"name": "v", "mountPath": "/host-var"}])),
        json!([host("v", "/var")]),
        &protected_list_only(),
    );
    assert_eq!(cleaned(&outcome), ["/host-var/lib/myjob"]);
}

#[test]
fn class1_bad_sub_path_fails_closed() {
    for sub_path in [json!("/etc"), json!("a/../../etc"), json!(7)] {
        let mounts = json!([{"name": "d", "mountPath": "/work", "subPath": sub_path}]);
        let outcome = auto(
            app(mounts.clone()),
            json!([host("d", "/mnt/x")]),
            &test_config(),
        );
        assert!(cleaned(&outcome).is_empty(), "{sub_path}");
        let outcome = explicit(
            "/work",
            app(mounts),
            json!([host("d", "/mnt/x")]),
            &test_config(),
        );
        assert_denied(&outcome, &["subPath"]);
    }
}

// ---- class 2: mount paths as the kubelet reads them ----

#[test]
fn class2_duplicate_mount_paths_after_normalization() {
    for other in ["/data/", "data", "/data/.", "//data", "./data"] {
        let mounts = json!([
            {"name": "scratch", "mountPath": "/data"},
            {"name": "db", "mountPath": other, "readOnly": true},
        ]);
        let volumes = json!([host("scratch", "/mnt/scratch"), {"name": "db", "persistentVolumeClaim": {"claimName": "db"}}]);
        let outcome = auto(app(mounts.clone()), volumes.clone(), &test_config());
        assert!(cleaned(&outcome).is_empty(), "{other}: {outcome:?}");
        assert!(
            outcome.warnings().contains("two volumes"),
            "{}",
            outcome.warnings()
        );
        let outcome = explicit(
            "/data",
            app(mounts.clone()),
            volumes.clone(),
            &test_config(),
        );
        assert_denied(&outcome, &["/data", "two volumes"]);
        let outcome = explicit("/data/x", app(mounts), volumes, &test_config());
        assert_denied(&outcome, &["two volumes"]);
    }
}

#[test]
fn class2_duplicate_in_sidecar_mode() {
    let mounts = json!([
        {"name": "scratch", "mountPath": "/data/"},
        {"name": "db", "mountPath": "/data", "readOnly": true},
    ]);
    let volumes = json!([host("scratch", "/mnt/scratch"), {"name": "db", "persistentVolumeClaim": {"claimName": "db"}}]);
    let outcome = mutate(job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
        app(mounts),
        volumes,
    ));
    let init = outcome
        .patched
        .pointer("/spec/template/spec/initContainers");
    assert!(init.is_none(), "{init:?}");
}

#[test]
fn class2_relative_mount_path_nested_inside_the_target() {
    // `data/db` is /data/db for the kubelet: a PVC inside the scratch directory.
    for nested in ["data/db", "/data//db", "/data/./db/", "data/db/."] {
        let mounts = json!([
            {"name": "scratch", "mountPath": "/data"},
            {"name": "db", "mountPath": nested},
        ]);
        let volumes = json!([host("scratch", "/mnt/scratch"), {"name": "db", "persistentVolumeClaim": {"claimName": "db"}}]);
        let outcome = auto(app(mounts.clone()), volumes.clone(), &test_config());
        assert!(cleaned(&outcome).is_empty(), "{nested}: {outcome:?}");
        assert!(
            outcome.warnings().contains("/data/db is mounted inside it"),
            "{}",
            outcome.warnings()
        );
        let outcome = explicit("/data", app(mounts), volumes, &test_config());
        assert_denied(&outcome, &["mounted inside it at /data/db"]);
    }
}

#[test]
fn class2_unreadable_mount_path_means_no_cleanup_in_that_container() {
    for bad in [
        json!("/data/../data/db"),
        json!(""),
        json!("/a\nb"),
        json!(5),
        json!(null),
    ] {
        let mounts = json!([
            {"name": "scratch", "mountPath": "/data"},
            {"name": "db", "mountPath": bad},
        ]);
        let volumes = json!([host("scratch", "/mnt/scratch"), {"name": "db", "persistentVolumeClaim": {"claimName": "db"}}]);
        let outcome = auto(app(mounts.clone()), volumes.clone(), &test_config());
        assert!(cleaned(&outcome).is_empty(), "{bad}: {outcome:?}");
        assert!(
            outcome.warnings().contains("cannot be normalized"),
            "{}",
            outcome.warnings()
        );
        let outcome = explicit("/data", app(mounts), volumes, &test_config());
        assert_denied(&outcome, &["cannot be normalized"]);
    }
}

#[test]
fn class2_relative_mount_path_is_still_a_target() {
    let outcome = auto(
        app(json!([{"name": "scratch", "mountPath": "scratch/"}])),
        json!([host("scratch", "/mnt/scratch")]),
        &test_config(),
    );
    assert_eq!(cleaned(&outcome), ["/scratch"]);
}

// ---- class 3: host-side overlap ----

#[test]
fn class3_other_host_path_volume_below_the_target() {
    let mounts = json!([
        {"name": "data", "mountPath": "/data"},
        {"name": "models", "mountPath": "/models", "readOnly": true},
    ]);
    let volumes = json!([
        host("data", "/mnt/data"),
        host("models", "/mnt/data/models")
    ]);
    let outcome = auto(app(mounts.clone()), volumes.clone(), &test_config());
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
    assert!(
        outcome.warnings().contains("/mnt/data/models"),
        "{}",
        outcome.warnings()
    );
    let outcome = explicit("/data", app(mounts), volumes, &test_config());
    assert_denied(&outcome, &["/mnt/data/models", "\"models\""]);
}

#[test]
fn class3_same_volume_deeper_sub_path_elsewhere() {
    let mounts = json!([
        {"name": "data", "mountPath": "/data"},
        {"name": "data", "mountPath": "/models", "subPath": "models", "readOnly": true},
    ]);
    let outcome = auto(
        app(mounts),
        json!([host("data", "/mnt/data")]),
        &test_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
}

#[test]
fn class3_overlap_from_another_container_or_just_declared() {
    let volumes = json!([
        host("data", "/mnt/data"),
        host("models", "/mnt/data/models/")
    ]);
    // Declared only, mounted by no container.
    let outcome = auto(
        app(json!([{"name": "data", "mountPath": "/data"}])),
        volumes.clone(),
        &test_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
    // Mounted by an init container, through a volume above the target with a subPath.
    let mut object = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        app(json!([{"name": "data", "mountPath": "/data"}])),
        json!([host("data", "/mnt/data"), host("mnt", "/mnt")]),
    );
    object["spec"]["template"]["spec"]["initContainers"] = json!([{"name": "fetch", "image": "busybox",
        "volumeMounts": [{"name": "mnt", "mountPath": "/m", "subPath": "data/models"}]}]);
    let outcome = mutate(object);
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
}

#[test]
fn class3_same_directory_from_another_volume_or_an_unknown_one() {
    let outcome = auto(
        app(json!([{"name": "a", "mountPath": "/a"}])),
        json!([host("a", "/mnt/data"), host("b", "/mnt/data")]),
        &test_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
    // Another volume whose path cannot be read may be anywhere.
    let outcome = auto(
        app(json!([{"name": "a", "mountPath": "/a"}])),
        json!([host("a", "/mnt/data"), {"name": "b", "hostPath": {"path": "relative"}}]),
        &test_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
}

#[test]
fn class3_shared_volumes_that_do_not_overlap_are_cleaned() {
    // The same volume in two containers, and a parent directory mounted read-only.
    let mut object = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        app(
            json!([{"name": "data", "mountPath": "/data"}, {"name": "mnt", "mountPath": "/all", "readOnly": true}]),
        ),
        json!([host("data", "/mnt/data"), host("mnt", "/mnt")]),
    );
    object["spec"]["template"]["spec"]["initContainers"] = json!([{"name": "fetch", "image": "busybox",
        "volumeMounts": [{"name": "data", "mountPath": "/prep/"}]}]);
    let outcome = mutate(object);
    assert_eq!(cleaned(&outcome), ["/data"]);
}

// ---- class 9 (b): allowedHostPathPrefixes applies to explicit paths ----

#[test]
fn class9_allowed_prefixes_apply_to_explicit_paths() {
    let config = test_config_with("allowedHostPathPrefixes: [/scratch-disks]\n");
    let outcome = explicit(
        "/data/x",
        app(json!([{"name": "d", "mountPath": "/data"}])),
        json!([host("d", "/mnt/data")]),
        &config,
    );
    assert_denied(&outcome, &["/mnt/data/x", "allowedHostPathPrefixes"]);
    let outcome = explicit(
        "/data/x",
        app(json!([{"name": "d", "mountPath": "/data"}])),
        json!([host("d", "/scratch-disks")]),
        &config,
    );
    assert_eq!(cleaned(&outcome), ["/data/x"]);
    // Not a hostPath: below no prefix, so denied (issue 17 class 5; it was cleaned).
    let outcome = explicit(
        "/cache",
        app(json!([{"name": "c", "mountPath": "/cache"}])),
        json!([{"name": "c", "emptyDir": {}}]),
        &config,
    );
    assert_denied(
        &outcome,
        &["/cache", "not a hostPath", "allowedHostPathPrefixes"],
    );
}

// ---- class 9 (a): an exec'd `/bin/sleep N` counts in the grace estimate ----

#[test]
fn class9_exec_bin_sleep_counts_in_the_grace_period() {
    for argv in [
        json!(["/bin/sleep", "60"]),
        json!(["sleep", "60"]),
        json!(["/usr/bin/sleep", "1m"]),
    ] {
        let mut container = app(json!([{"name": "d", "mountPath": "/data"}]));
        container["lifecycle"] = json!({"preStop": {"exec": {"command": argv}}});
        let outcome = auto(container, json!([host("d", "/mnt/data")]), &test_config());
        assert_eq!(cleaned(&outcome), ["/data"]);
        // 60 s of sleep + the 30 s cleanup budget + 10 s of shutdown.
        assert_eq!(core_support::grace(&outcome.patched), Some(100), "{argv}");
    }
}

// ---- class 9 (d): a failed cleanup after a successful user hook fails the hook ----

#[path = "support/shells.rs"]
mod shells;

#[test]
fn class9_failed_cleanup_after_a_successful_user_hook_fails_the_hook() {
    // busybox find is an applet: a fake `find` on PATH cannot replace it.
    for shell in shells::shells()
        .into_iter()
        .filter(|s| s.name != "busybox sh")
    {
        for (user_status, want) in [(0, 1), (3, 3)] {
            let tree = shells::Tree::new();
            tree.fill(&tree.target);
            let (_log, path) = shells::fake_find(&tree);
            let user = vec![
                shell.path.display().to_string(),
                "-c".to_owned(),
                format!("exit {user_status}"),
            ];
            let argv = Hook {
                shell: shell.path.display().to_string(),
                before: prestop_injector::mutation::hook::Before::Exec(user),
                action: Action::Cleanup(vec![tree.path(&tree.target).into()]),
            }
            .to_shell_argv();
            let output = shell
                .command(&argv, &tree.cwd)
                .env("PATH", path)
                .output()
                .expect("run the hook");
            assert_eq!(
                output.status.code(),
                Some(want),
                "{}: user exits {user_status}: {}",
                shell.name,
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

#[test]
fn class3_our_sidecars_copies_are_not_other_volumes() {
    // The sidecar copies the mount: on the second pass its copy must not count as another
    // view of the volume, or the cleanup would flip off and on (mutate_with asserts that
    // the second pass gives no patch). A numeric user, so the sidecar is used at all.
    let container = json!({"name": "app", "image": "busybox:1.36",
        "securityContext": {"runAsUser": 1000},
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "d", "mountPath": "/work", "subPathExpr": "$(POD_NAME)"}]});
    let outcome = mutate(job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
        container,
        json!([host("d", "/mnt/scratch")]),
    ));
    let init = &outcome.patched["spec"]["template"]["spec"]["initContainers"];
    assert_eq!(init.as_array().map(Vec::len), Some(1), "{outcome:?}");
    assert_eq!(init[0]["command"][1], "sidecar", "{outcome:?}");
}

#[test]
fn class1_a_volume_declared_twice_is_never_cleaned() {
    // Renamed attack: the mount names `d`, and `d` is also /etc further down the list.
    let volumes = json!([host("d", "/mnt/scratch"), host("d", "/etc")]);
    let outcome = auto(
        app(json!([{"name": "d", "mountPath": "/d"}])),
        volumes.clone(),
        &test_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
    let outcome = explicit(
        "/d",
        app(json!([{"name": "d", "mountPath": "/d"}])),
        volumes,
        &test_config(),
    );
    assert_denied(&outcome, &["more than once"]);
}

#[test]
fn class2_read_only_that_is_not_a_boolean_is_read_only() {
    let outcome = auto(
        app(json!([{"name": "d", "mountPath": "/d", "readOnly": "true"}])),
        json!([host("d", "/mnt/scratch")]),
        &test_config(),
    );
    assert!(cleaned(&outcome).is_empty(), "{outcome:?}");
}
