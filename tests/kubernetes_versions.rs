//! docs/KUBERNETES.md: never emit what the cluster cannot run. The Kubernetes version is data in
//! the config; below 1.29 sidecar mode is refused (explicit) or off (automatic), and below
//! 1.30 no preStop `sleep` action is written. `mutate --kubernetes-version` decides the same.

mod core_support;
use core_support::test_config;

use core_support::{container, job, mutate_with, scratch_container, scratch_job, template_spec};
use prestop_injector::config::{Config, Mode};
use prestop_injector::mutation::{Endpoint, SIDECAR_NAME};
use serde_json::{json, Value};

fn on(version: Option<&str>) -> Config {
    Config {
        kubernetes_version: version.map(|v| v.parse().unwrap()),
        ..test_config()
    }
}

/// A Job the sidecar can serve: its container runs as a numeric non-root user.
fn sidecar_job(annotations: Value) -> Value {
    let mut app = scratch_container();
    app["securityContext"] = json!({"runAsUser": 1000});
    job(
        annotations,
        app,
        json!([core_support::host_path_volume("scratch", "/mnt/scratch")]),
    )
}

fn has_sidecar(object: &Value) -> bool {
    template_spec(object)["initContainers"]
        .as_array()
        .is_some_and(|init| init.iter().any(|c| c["name"] == SIDECAR_NAME))
}

#[test]
fn explicit_sidecar_mode_is_denied_below_1_29_naming_the_version() {
    let object = sidecar_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
    );
    for version in ["1.20", "1.28"] {
        let outcome = mutate_with(Endpoint::Mutate, &on(Some(version)), object.clone());
        let denial = outcome.denial();
        assert!(denial.contains("prestop-injector.io/mode"), "{denial}");
        assert!(
            denial.contains(&format!(
                "sidecar mode needs Kubernetes ≥ 1.29 (native sidecars); this cluster runs {version}"
            )),
            "{denial}"
        );
        assert_eq!(outcome.decision.patch, None);
    }
    for version in [Some("1.29"), Some("1.33"), None] {
        let outcome = mutate_with(Endpoint::Mutate, &on(version), object.clone());
        assert!(outcome.decision.denial.is_none(), "{version:?}");
        assert!(has_sidecar(&outcome.patched), "{version:?}");
    }
}

#[test]
fn default_mode_sidecar_falls_back_to_exec_below_1_29_with_a_warning() {
    let config = Config {
        default_mode: Mode::Sidecar,
        ..on(Some("1.28"))
    };
    let outcome = mutate_with(
        Endpoint::Mutate,
        &config,
        scratch_job(json!({"prestop-injector.io/cleanup": "auto"})),
    );
    assert!(!has_sidecar(&outcome.patched));
    let argv = core_support::pre_stop_argv(container(&outcome.patched, 0));
    assert!(argv.contains(&"/scratch".to_owned()), "{argv:?}");
    let warnings = outcome.warnings();
    assert!(
        warnings.contains(
            "sidecar mode needs Kubernetes ≥ 1.29, cluster runs 1.28; using an exec preStop"
        ),
        "{warnings}"
    );
}

#[test]
fn the_automatic_fallback_for_an_http_hook_is_off_below_1_29() {
    let mut app = scratch_container();
    app["securityContext"] = json!({"runAsUser": 1000});
    app["lifecycle"] = json!({"preStop": {"httpGet": {"path": "/drain", "port": 8080}}});
    let object = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        app,
        json!([core_support::host_path_volume("scratch", "/mnt/scratch")]),
    );
    let old = mutate_with(Endpoint::Mutate, &on(Some("1.20")), object.clone());
    assert!(!has_sidecar(&old.patched));
    assert_eq!(
        container(&old.patched, 0)["lifecycle"],
        json!({"preStop": {"httpGet": {"path": "/drain", "port": 8080}}}),
        "the user's hook is left alone"
    );
    let warnings = old.warnings();
    assert!(
        warnings
            .contains("cleanup skipped (sidecar mode needs Kubernetes ≥ 1.29, cluster runs 1.20)"),
        "{warnings}"
    );
    let new = mutate_with(Endpoint::Mutate, &on(Some("1.29")), object);
    assert!(has_sidecar(&new.patched));
}

#[test]
fn a_restored_sleep_action_becomes_exec_sleep_below_1_30() {
    let mut app = scratch_container();
    app["lifecycle"] = json!({"preStop": {"sleep": {"seconds": 5}}});
    let object = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        app,
        json!([core_support::host_path_volume("scratch", "/mnt/scratch")]),
    );
    // Injected where sleep exists: our hook wraps the sleep, no sleep action left.
    let injected = mutate_with(Endpoint::Mutate, &on(Some("1.30")), object).patched;
    assert!(container(&injected, 0)
        .pointer("/lifecycle/preStop/sleep")
        .is_none());
    // Cleanup turned off: the user's handler comes back, as this cluster can store it.
    let mut off = injected;
    off["metadata"]["annotations"]["prestop-injector.io/cleanup"] = json!("off");
    for (version, expected) in [
        (Some("1.30"), json!({"sleep": {"seconds": 5}})),
        (None, json!({"sleep": {"seconds": 5}})),
        (Some("1.29"), json!({"exec": {"command": ["sleep", "5"]}})),
        (Some("1.20"), json!({"exec": {"command": ["sleep", "5"]}})),
    ] {
        let outcome = mutate_with(Endpoint::Mutate, &on(version), off.clone());
        assert_eq!(
            container(&outcome.patched, 0)["lifecycle"]["preStop"],
            expected,
            "{version:?}"
        );
        assert_eq!(
            outcome
                .warnings()
                .contains("preStop sleep needs Kubernetes ≥ 1.30"),
            expected.get("exec").is_some(),
            "{version:?}: {}",
            outcome.warnings()
        );
    }
}

#[test]
fn mutate_takes_the_kubernetes_version() {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: w\n  annotations:\n    \
               prestop-injector.io/cleanup: auto\n    prestop-injector.io/mode: sidecar\nspec:\n  \
               template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: app\n        \
               image: busybox:1.37\n        securityContext: {runAsUser: 1000}\n        volumeMounts: [{name: s, mountPath: /scratch}]\n      \
               volumes: [{name: s, hostPath: {path: /mnt/scratch/s}}]\n";
    let run = |args: &[&str]| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
            .arg("mutate")
            // The fixtures' prefixes: without any, nothing is cleaned and no sidecar added.
            .args([
                "--config",
                concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config.yaml"),
            ])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(job.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let old = run(&["--kubernetes-version", "1.20"]);
    assert_eq!(old.status.code(), Some(1), "denied");
    let stderr = String::from_utf8_lossy(&old.stderr);
    assert!(stderr.contains("this cluster runs 1.20"), "{stderr}");
    let new = run(&["--kubernetes-version", "v1.29.4"]);
    assert_eq!(
        new.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&new.stderr)
    );
    assert!(String::from_utf8_lossy(&new.stdout).contains("restartPolicy: Always"));
    let bad = run(&["--kubernetes-version", "1.x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("major.minor"));
}

/// A record saying `mode: sidecar` (from `defaultMode: sidecar`) is not the user's
/// annotation: the pods a controller makes from that template are not refused on an old
/// cluster, they get the same exec fallback their workload got, so no patch.
#[test]
fn pods_from_a_template_recorded_as_sidecar_are_not_refused_below_1_29() {
    let config = Config {
        default_mode: Mode::Sidecar,
        ..on(Some("1.20"))
    };
    let job = mutate_with(
        Endpoint::Mutate,
        &config,
        scratch_job(json!({"prestop-injector.io/cleanup": "auto"})),
    )
    .patched;
    assert!(!has_sidecar(&job));
    let template = &job["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = json!("job-worker-abcde");
    metadata["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": "job-worker", "uid": "1", "controller": true}]);
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]});
    let outcome = mutate_with(Endpoint::Mutate, &config, pod);
    assert!(
        outcome.decision.denial.is_none(),
        "{:?}",
        outcome.decision.denial
    );
    assert_eq!(outcome.decision.patch, None);
}
