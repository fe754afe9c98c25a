//! `prestop-injector reap` refuses to start when it could clean outside what the operator
//! allowed, and says why, before it talks to any API server.

use std::process::Command;

fn reap(config: &str, extra: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .args(["reap", "--node-name", "node-a", "--config"])
        .arg(&path)
        .arg("--state-file")
        .arg(dir.path().join("state.json"))
        .args(extra)
        // No cluster: a start that got past the checks would fail on this instead.
        .env("KUBECONFIG", dir.path().join("none"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), stderr)
}

#[test]
fn without_allowed_prefixes_it_does_not_start() {
    let (code, stderr) = reap("protectedHostPaths: [/data]\n", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("only with allowedHostPathPrefixes"),
        "{stderr}"
    );
}

#[test]
fn a_config_typo_is_named() {
    let (code, stderr) = reap("allowedHostPathPrefix: [/mnt/scratch]\n", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("allowedHostPathPrefix"), "{stderr}");
}

#[test]
fn a_relative_host_root_is_refused() {
    let (code, stderr) = reap(
        "allowedHostPathPrefixes: [/mnt/scratch]\n",
        &["--host-root", "host"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--host-root"), "{stderr}");
}

#[test]
fn past_the_checks_it_needs_a_cluster() {
    let (code, stderr) = reap(
        "allowedHostPathPrefixes: [/mnt/scratch]\n",
        &["--metrics-listen", "127.0.0.1:0"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("connecting to the API server"), "{stderr}");
}
