//! `prestop-injector reap` refuses to start when it could clean outside what the operator
//! allowed, and says why, before it talks to any API server.

use std::process::Command;

/// A good key file, as `openssl rand -hex 32` writes it.
const KEY_FILE: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n";

fn reap(config: &str, extra: &[&str]) -> (i32, String) {
    reap_with_keys(config, Some(KEY_FILE), extra)
}

fn reap_with_keys(config: &str, keys: Option<&str>, extra: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_prestop-injector"));
    command.arg("reap");
    if let Some(keys) = keys {
        let key_file = dir.path().join("seal.key");
        std::fs::write(&key_file, keys).unwrap();
        command.arg("--seal-key-file").arg(key_file);
    }
    let output = command
        .args(["--node-name", "node-a", "--config"])
        .arg(&path)
        .arg("--state-file")
        .arg(dir.path().join("state.json"))
        .args(extra)
        // No cluster: a start that got past the checks would fail on this instead.
        .env("KUBECONFIG", dir.path().join("none"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("PRESTOP_INJECTOR_SEAL_KEY_FILE")
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

#[test]
fn without_a_seal_key_it_does_not_start() {
    let (code, stderr) = reap_with_keys("allowedHostPathPrefixes: [/mnt/scratch]\n", None, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("needs --seal-key-file"), "{stderr}");
}

#[test]
fn a_bad_seal_key_file_is_named_by_line_without_its_key() {
    let short = "# rotated\n9f86d081884c7d659a2feaa0c55ad015\n";
    for (keys, problem) in [
        ("", "holds no key"),
        (short, "line 2 holds 16 bytes"),
        ("not a key!\n", "line 1 is neither hex nor base64"),
    ] {
        let (code, stderr) =
            reap_with_keys("allowedHostPathPrefixes: [/mnt/scratch]\n", Some(keys), &[]);
        assert_eq!(code, 2, "{keys:?}: {stderr}");
        assert!(stderr.contains("seal key file"), "{keys:?}: {stderr}");
        assert!(stderr.contains(problem), "{keys:?}: {stderr}");
        assert!(
            !stderr.contains("9f86d08"),
            "the key is never printed: {stderr}"
        );
    }
}
