//! Issue 17, class 5: protection was a list of names, and no list of names is complete.
//! The rule now (docs/DESIGN.md#targets): **an allow-list first**. Nothing outside
//! `allowedHostPathPrefixes` is deleted; with none configured (the shipped default)
//! nothing that deletes is injected, and every object that asked for a cleanup is told so.
//! The protected list stays as the second check, and knows the distribution layouts.

mod core_support;

use core_support::{cleanup_targets, container, job, mutate_with, template_spec, Outcome};
use prestop_injector::config::Config;
use prestop_injector::mutation::targets::{is_protected_host_path, REAPER_STATE_TREE};
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

/// The seed Job of the README, as shipped in examples/.
fn seed_job() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/job-worker.yaml"
    ))
    .expect("examples/job-worker.yaml");
    serde_yaml::from_str(&text).expect("YAML")
}

fn annotate(mut object: Value, key: &str, value: &str) -> Value {
    object["metadata"]["annotations"][key] = json!(value);
    object
}

fn without_annotations(mut object: Value) -> Value {
    object["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("annotations");
    object
}

fn prefixes(list: &str) -> Config {
    Config::from_yaml(&format!("allowedHostPathPrefixes: [{list}]\n")).expect("config")
}

/// No hook of ours, no installer, no sidecar: nothing that deletes.
fn assert_nothing_deletes(outcome: &Outcome) {
    let spec = template_spec(&outcome.patched);
    for index in 0..spec["containers"].as_array().map_or(0, Vec::len) {
        assert_eq!(
            cleanup_targets(container(&outcome.patched, index)),
            Vec::<String>::new()
        );
    }
    let text = spec.to_string();
    assert!(!text.contains("prestop-clean"), "{text}");
    assert!(!text.contains("prestop-install"), "{text}");
}

/// One short warning naming the key, whatever the length of the names around it.
fn assert_told(outcome: &Outcome) {
    let told: Vec<&String> = outcome
        .decision
        .warnings
        .iter()
        .filter(|w| w.contains("allowedHostPathPrefixes"))
        .collect();
    assert!(!told.is_empty(), "{:?}", outcome.decision.warnings);
    for warning in &outcome.decision.warnings {
        assert!(
            warning.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS,
            "{warning}"
        );
    }
}

#[test]
fn allow_list_first_nothing_deletes_without_prefixes() {
    let shipped = Config::default();
    assert!(shipped.allowed_host_path_prefixes.is_empty());
    let seed = seed_job();

    // `cleanup: auto`, the README's own example: told, not cleaned, and the rest is done.
    let outcome = mutate_with(Endpoint::Mutate, &shipped, seed.clone());
    assert_eq!(outcome.decision.denial, None);
    assert_nothing_deletes(&outcome);
    assert_told(&outcome);
    // The shell fix still runs: busybox has no bash, and the script is portable.
    assert_eq!(container(&outcome.patched, 0)["command"][0], "/bin/sh");

    // An explicit path the user could not make acceptable: a warning, not a denial.
    let explicit = annotate(seed.clone(), "prestop-injector.io/cleanup", "/test-package");
    let outcome = mutate_with(Endpoint::Mutate, &shipped, explicit);
    assert_eq!(
        outcome.decision.denial, None,
        "{:?}",
        outcome.decision.denial
    );
    assert_nothing_deletes(&outcome);
    assert_told(&outcome);

    // The ttl still applies: it deletes nothing on the node.
    let ttl = annotate(seed.clone(), "prestop-injector.io/ttl-after-finished", "1h");
    let outcome = mutate_with(Endpoint::Mutate, &shipped, ttl);
    assert_nothing_deletes(&outcome);
    assert_eq!(outcome.patched["spec"]["ttlSecondsAfterFinished"], 3600);

    // The grace period still covers the user's own hook.
    let mut sleeping = seed.clone();
    sleeping["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]
        ["command"] = json!(["sleep", "70"]);
    let outcome = mutate_with(Endpoint::Mutate, &shipped, sleeping);
    assert_nothing_deletes(&outcome);
    assert!(
        template_spec(&outcome.patched)["terminationGracePeriodSeconds"]
            .as_u64()
            .is_some_and(|grace| grace >= 70),
        "{}",
        outcome.patched
    );

    // `/mutate/auto` without any annotation, in sidecar mode too: nothing deletes.
    for mode in ["exec", "sidecar"] {
        let config = Config::from_yaml(&format!("defaultMode: {mode}\n")).expect("config");
        let outcome = mutate_with(
            Endpoint::MutateAuto,
            &config,
            without_annotations(seed.clone()),
        );
        assert_nothing_deletes(&outcome);
        assert_told(&outcome);
    }

    // The same Job with the one config line the README names is cleaned.
    let outcome = mutate_with(Endpoint::Mutate, &prefixes("/test-package"), seed);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 0)),
        ["/test-package"]
    );
}

#[test]
fn allow_list_first_warning_names_the_key_even_with_long_names() {
    let long = "x".repeat(63);
    let path = format!("/{}", "deep/".repeat(40));
    let object = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        json!({"name": long, "image": "busybox:1.36",
               "volumeMounts": [{"name": "v", "mountPath": format!("/{long}")}]}),
        json!([{"name": "v", "hostPath": {"path": path.trim_end_matches('/')}}]),
    );
    let outcome = mutate_with(Endpoint::Mutate, &Config::default(), object);
    assert_nothing_deletes(&outcome);
    assert_told(&outcome);
    assert!(
        outcome.decision.warnings[0].starts_with("no allowedHostPathPrefixes set"),
        "{:?}",
        outcome.decision.warnings
    );
}

#[test]
fn allow_list_first_paths_outside_prefixes_are_refused() {
    let config = prefixes("/mnt/scratch, /srv/jobs");
    let volume_at = |path: &str| json!([{"name": "v", "hostPath": {"path": path}}]);
    let app = json!({"name": "app", "image": "busybox:1.36",
                     "volumeMounts": [{"name": "v", "mountPath": "/work"}]});
    let explicit = |volumes: Value| {
        let object = job(
            json!({"prestop-injector.io/cleanup": "/work"}),
            app.clone(),
            volumes,
        );
        mutate_with(Endpoint::Mutate, &config, object)
    };
    let auto = |volumes: Value| {
        let object = job(
            json!({"prestop-injector.io/cleanup": "auto"}),
            app.clone(),
            volumes,
        );
        mutate_with(Endpoint::Mutate, &config, object)
    };
    // Outside by a sibling's spelling, or elsewhere entirely: the denial names the
    // prefixes. (Above a prefix, or through `..`, the protected list names itself.)
    for outside in [
        "/mnt/scratchy",
        "/mnt/scratch/../data",
        "/mnt",
        "/srv",
        "/srv/job",
        "/var/lib/myjob",
        "/data",
    ] {
        let protected = is_protected_host_path(outside, &[]);
        let outcome = explicit(volume_at(outside));
        let denial = &outcome
            .decision
            .denial
            .as_ref()
            .unwrap_or_else(|| panic!("{outside}: not denied"))
            .message;
        if protected {
            assert!(
                denial.contains("protected host directory"),
                "{outside}: {denial}"
            );
        } else {
            for part in ["allowedHostPathPrefixes", "/mnt/scratch", "/srv/jobs"] {
                assert!(denial.contains(part), "{outside}: {denial}");
            }
        }
        let outcome = auto(volume_at(outside));
        assert_eq!(outcome.decision.denial, None, "{outside}");
        assert_nothing_deletes(&outcome);
        assert!(
            outcome.warnings().contains("allowedHostPathPrefixes")
                || outcome.warnings().contains("protected"),
            "{outside}: {}",
            outcome.warnings()
        );
    }
    // A subPath that leaves the prefix, and one that enters it from above.
    let object = job(
        json!({"prestop-injector.io/cleanup": "/work"}),
        json!({"name": "app", "image": "busybox:1.36",
               "volumeMounts": [{"name": "v", "mountPath": "/work", "subPath": "other"}]}),
        volume_at("/srv"),
    );
    assert!(mutate_with(Endpoint::Mutate, &config, object)
        .decision
        .denial
        .is_some());
    let object = job(
        json!({"prestop-injector.io/cleanup": "/work"}),
        json!({"name": "app", "image": "busybox:1.36",
               "volumeMounts": [{"name": "v", "mountPath": "/work", "subPath": "jobs/a"}]}),
        volume_at("/srv"),
    );
    let outcome = mutate_with(Endpoint::Mutate, &config, object);
    assert_eq!(cleanup_targets(container(&outcome.patched, 0)), ["/work"]);
    // Inside, exactly at or below a prefix, and a per-pod directory below one.
    for inside in ["/mnt/scratch", "/mnt/scratch/job-1", "/srv/jobs/a/b"] {
        let outcome = explicit(volume_at(inside));
        assert_eq!(
            cleanup_targets(container(&outcome.patched, 0)),
            ["/work"],
            "{inside}"
        );
        let outcome = auto(volume_at(inside));
        assert_eq!(
            cleanup_targets(container(&outcome.patched, 0)),
            ["/work"],
            "{inside}"
        );
    }
    // A volume that is no host directory is under no prefix: an explicit path on it is
    // denied (the kubelet removes an emptyDir itself; a PVC is not scratch space).
    for volume in [
        json!({"name": "v", "emptyDir": {}}),
        json!({"name": "v", "persistentVolumeClaim": {"claimName": "data"}}),
    ] {
        let outcome = explicit(json!([volume]));
        let denial = &outcome.decision.denial.as_ref().expect("denied").message;
        assert!(denial.contains("not a hostPath"), "{denial}");
        assert!(denial.contains("allowedHostPathPrefixes"), "{denial}");
    }
}

/// A prefix list the file would refuse, built in code: the second check still holds.
fn unchecked_prefixes(list: &[&str]) -> Config {
    Config {
        allowed_host_path_prefixes: list.iter().map(|p| (*p).to_owned()).collect(),
        ..Config::default()
    }
}

/// The distribution layouts the review found accepted, and the reaper's own state.
const LAYOUTS: &[&str] = &[
    "/mnt/stateful_partition",
    "/mnt/stateful_partition/var/lib/kubelet",
    "/mnt/stateful_partition/var_overlay",
    "/local",
    "/local/var/lib/containerd",
    "/local/mnt/scratch",
    "/sysroot",
    "/sysroot/ostree/deploy/fedora-coreos/var",
    "/mnt/k8s-disks",
    "/mnt/k8s-disks/0",
    "/mnt/disks/ssd0",
    "/var/lib/rook",
    "/var/lib/rook/mon-a",
    "/opt/local-path-provisioner",
    "/opt/local-path-provisioner/pvc-1_default_data",
    "/var/opt",
    "/var/opt/mssql/data",
    "/var/lib/prestop-injector",
    "/var/lib/prestop-injector/reaper",
];

#[test]
fn distribution_layouts_are_protected() {
    for path in LAYOUTS {
        assert!(is_protected_host_path(path, &[]), "{path}");
    }
    // The reaper's default state file lies in the protected tree.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .args(["reap", "--help"])
        .output()
        .expect("reap --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains(&format!("{REAPER_STATE_TREE}/")), "{help}");
    // Even where an operator's prefix would reach them (a config built in code, past
    // the load-time check), an explicit path is denied and `auto` skips them.
    let config = unchecked_prefixes(&["/mnt", "/local", "/sysroot", "/var", "/opt"]);
    for path in LAYOUTS {
        let volumes = json!([{"name": "v", "hostPath": {"path": path}}]);
        let app = json!({"name": "app", "image": "busybox:1.36",
                         "volumeMounts": [{"name": "v", "mountPath": "/work"}]});
        let object = job(
            json!({"prestop-injector.io/cleanup": "/work"}),
            app.clone(),
            volumes.clone(),
        );
        let outcome = mutate_with(Endpoint::Mutate, &config, object);
        let denial = &outcome.decision.denial.as_ref().expect("denied").message;
        assert!(
            denial.contains("protected host directory"),
            "{path}: {denial}"
        );
        let object = job(json!({"prestop-injector.io/cleanup": "auto"}), app, volumes);
        let outcome = mutate_with(Endpoint::Mutate, &config, object);
        assert_nothing_deletes(&outcome);
    }
    // Their neighbours are scratch space as before.
    for path in [
        "/mnt/scratch",
        "/var/lib/myjob",
        "/opt/scratch",
        "/localdata",
    ] {
        assert!(!is_protected_host_path(path, &[]), "{path}");
    }
}

#[test]
fn allow_list_prefixes_that_are_root_or_protected_are_refused_at_load() {
    for (prefix, why) in [
        ("/", "protected"),
        ("//", "protected"),
        ("/var/lib", "/var/lib/kubelet"),
        ("/var", "protected"),
        ("/mnt", "protected host directory /mnt/"),
        ("/srv", "itself protected"),
        ("/opt", "/opt/cni"),
        ("/etc/scratch", "/etc"),
        ("/var/lib/kubelet/pods", "/var/lib/kubelet"),
        ("/mnt/stateful_partition/scratch", "/mnt/stateful_partition"),
        ("/local", "/local"),
        ("/lib64/x", "/lib64"),
        ("/mnt/scratch/../../etc", "without .."),
        ("scratch", "absolute"),
    ] {
        let yaml = format!("allowedHostPathPrefixes: [/mnt/scratch, {prefix:?}]\n");
        let error = match Config::from_yaml(&yaml) {
            Ok(_) => panic!("{prefix}: accepted"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("allowedHostPathPrefixes") || error.contains("must be absolute"),
            "{prefix}: {error}"
        );
        assert!(error.contains(why), "{prefix}: {error}");
    }
    // What an operator names: scratch directories, with their own exceptions inside.
    for yaml in [
        "allowedHostPathPrefixes: [/mnt/scratch, /var/lib/myjob, /tmp/jobs, /data/]\n",
        "allowedHostPathPrefixes: [/data]\nprotectedHostPaths: [/data/keep]\n",
    ] {
        Config::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
    }
}

/// The CLI and server tests' config file names the same prefixes as the core tests.
#[test]
fn the_test_config_file_matches_the_core_tests() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/config.yaml"
    ))
    .expect("tests/fixtures/config.yaml");
    let file = Config::from_yaml(&text).expect("valid");
    assert_eq!(file.allowed_host_path_prefixes, core_support::TEST_PREFIXES);
    assert_eq!(
        core_support::test_config().allowed_host_path_prefixes,
        core_support::TEST_PREFIXES
    );
}

/// Issue 26, from 54 public manifests: the node directories that storage provisioners and
/// a distribution keep their data in. Every PV of local-static-provisioner lies under
/// `/mnt/disks` or `/mnt/fast-disks`, every csi-driver-host-path volume under
/// `/var/lib/csi-hostpath-data`, and a kind node's own state under `/kind`.
const PROVISIONER_AND_DISTRIBUTION_DIRECTORIES: &[&str] = &[
    "/mnt/disks",
    "/mnt/disks/vol1",
    "/mnt/fast-disks",
    "/mnt/fast-disks/nvme0n1",
    "/var/lib/csi-hostpath-data",
    "/var/lib/csi-hostpath-data/0f1c2d3e-pvc",
    "/kind",
    "/kind/data",
];

#[test]
fn provisioner_and_distribution_directories_are_protected() {
    for path in PROVISIONER_AND_DISTRIBUTION_DIRECTORIES {
        assert!(is_protected_host_path(path, &[]), "{path}");
    }
    // A prefix reaching them is refused when the file is loaded…
    for prefix in [
        "/mnt/fast-disks/scratch",
        "/var/lib/csi-hostpath-data",
        "/kind/tmp",
    ] {
        let yaml = format!("allowedHostPathPrefixes: [{prefix}]\n");
        let error = Config::from_yaml(&yaml).expect_err(prefix).to_string();
        assert!(error.contains("protected"), "{prefix}: {error}");
    }
    // …and where one reaches them anyway (built in code), through the volume's own path or
    // through a subPath of its parent, an explicit path is denied and `auto` cleans nothing.
    let config = unchecked_prefixes(&["/mnt", "/var", "/"]);
    for path in PROVISIONER_AND_DISTRIBUTION_DIRECTORIES {
        let (parent, leaf) = path.rsplit_once('/').expect("absolute");
        let parent = if parent.is_empty() { "/" } else { parent };
        for (host, sub_path) in [(*path, None), (parent, Some(leaf))] {
            let volumes = json!([{"name": "v", "hostPath": {"path": host}}]);
            let mut mount = json!({"name": "v", "mountPath": "/work"});
            if let Some(sub_path) = sub_path {
                mount["subPath"] = json!(sub_path);
            }
            let app = json!({"name": "app", "image": "busybox:1.36", "volumeMounts": [mount]});
            let object = job(
                json!({"prestop-injector.io/cleanup": "/work"}),
                app.clone(),
                volumes.clone(),
            );
            let outcome = mutate_with(Endpoint::Mutate, &config, object);
            let denial = &outcome.decision.denial.as_ref().expect("denied").message;
            assert!(
                denial.contains("protected host directory"),
                "{host} {sub_path:?}: {denial}"
            );
            let object = job(json!({"prestop-injector.io/cleanup": "auto"}), app, volumes);
            assert_nothing_deletes(&mutate_with(Endpoint::Mutate, &config, object));
        }
    }
    // Names that only start the same are scratch space as before.
    for path in [
        "/mnt/disks-scratch",
        "/mnt/fast-disks2",
        "/var/lib/csi-hostpath-data-old",
        "/kindling",
        "/var/lib/kind",
    ] {
        assert!(!is_protected_host_path(path, &[]), "{path}");
    }
}

/// Issue 26: warnings were cut at 120 characters from the end, so long names and paths
/// pushed out the part that matters (`…inside the protected host directory /va…`). Now
/// the names and paths are shortened in the middle, and the reason is whole.
#[test]
fn long_warnings_keep_their_reason() {
    use prestop_injector::mutation::MAX_WARNING_CHARS;
    // A container name at the API's limit, and a mountPath and a hostPath of 200 characters.
    let name = format!("worker-{}", "n".repeat(56));
    let deep = format!("{}/leaf", "d".repeat(190));
    let mount_path = format!("/{deep}");
    let app = |mount_path: &str| {
        json!({"name": name, "image": "busybox:1.36",
               "volumeMounts": [{"name": "v", "mountPath": mount_path}]})
    };
    let auto = json!({"prestop-injector.io/cleanup": "auto"});
    for (config, host, reasons) in [
        (
            unchecked_prefixes(&["/var"]),
            format!("/var/lib/kubelet/pods/{deep}"),
            vec![
                " not cleaned: it is host path ",
                ", inside the protected host directory /var/lib/kubelet",
            ],
        ),
        (
            prefixes("/mnt/scratch"),
            format!("/data/{deep}"),
            vec![
                " not cleaned: it is host path ",
                ", outside allowedHostPathPrefixes (/mnt/scratch)",
            ],
        ),
        (
            Config::default(),
            format!("/data/{deep}"),
            vec![
                "no allowedHostPathPrefixes set, nothing is deleted: container \"",
                " (host path /",
                ") not cleaned",
            ],
        ),
    ] {
        let volumes = json!([{"name": "v", "hostPath": {"path": host}}]);
        let outcome = mutate_with(
            Endpoint::Mutate,
            &config,
            job(auto.clone(), app(&mount_path), volumes),
        );
        assert_nothing_deletes(&outcome);
        let warnings = &outcome.decision.warnings;
        let warning = warnings
            .iter()
            .find(|w| w.contains("not cleaned"))
            .unwrap_or_else(|| panic!("{host}: no warning in {warnings:?}"));
        assert!(warning.chars().count() <= MAX_WARNING_CHARS, "{warning}");
        for reason in reasons {
            assert!(
                warning.contains(reason),
                "{host}: {reason:?} lost in {warning}"
            );
        }
        // Each long name and path keeps its start and its end around one `…`.
        assert!(warning.contains("\"wo"), "{warning}");
        assert!(warning.contains("n\""), "{warning}");
        assert!(warning.contains("leaf"), "{warning}");
        assert!(warning.matches('…').count() >= 2, "{warning}");
        assert!(!warning.ends_with('…'), "{warning}");
        assert!(!warning.contains(['\u{E000}', '\u{E001}']), "{warning}");
    }
}
