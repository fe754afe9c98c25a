//! `prestop-injector mutate`, driven through the real binary: input formats, output
//! formats, exit codes, and the mutation of the examples users copy.
//!
//! Shared helpers live here; the tests are in `cli_mutate/{inputs,errors,engine}.rs`.

// A test crate root resolves modules next to itself, hence the explicit paths.
#[path = "cli_mutate/engine.rs"]
mod engine;
#[path = "cli_mutate/errors.rs"]
mod errors;
#[path = "cli_mutate/inputs.rs"]
mod inputs;

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `mutate`; without a `--config` of the test's own, with the fixtures' config (the
/// default allows no host path, so nothing would be cleaned).
fn mutate(args: &[&str], stdin: &str) -> Run {
    let config = path("tests/fixtures/config.yaml");
    let default_config: &[&str] = if args.contains(&"--config") {
        &[]
    } else {
        &["--config", &config]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .arg("mutate")
        .args(default_config)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may exit before reading stdin (bad flags, bad config): not our failure.
    if let Err(error) = child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

fn path(relative: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(relative)
        .to_string_lossy()
        .into_owned()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(path(relative)).unwrap()
}

fn mutate_file(relative: &str, args: &[&str]) -> Run {
    let file = path(relative);
    let mut all = vec!["-f", file.as_str()];
    all.extend_from_slice(args);
    mutate(&all, "")
}

fn ok(run: Run) -> Run {
    assert_eq!(
        run.code, 0,
        "stderr: {}\nstdout: {}",
        run.stderr, run.stdout
    );
    run
}

fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|value: &Value| !value.is_null())
        .collect()
}

fn json_docs(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

/// Key order matters to us, so compare the serialized text, not just the values.
fn assert_same_order(left: &Value, right: &Value) {
    assert_eq!(left.to_string(), right.to_string());
}

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  zeta: '1'\n  alpha: 'off'\n";
