//! Unreadable input and bad flags exit 2 with a message naming the document and line.

use super::*;
use serde_json::json;

fn fails(run: Run, expected: &[&str]) {
    assert_eq!(
        run.code, 2,
        "stderr: {}\nstdout: {}",
        run.stderr, run.stdout
    );
    assert_eq!(
        run.stdout, "",
        "nothing is printed when the input is unreadable"
    );
    for text in expected {
        assert!(run.stderr.contains(text), "{text:?} not in {}", run.stderr);
    }
    assert!(
        run.stderr.starts_with("prestop-injector: "),
        "{}",
        run.stderr
    );
}

#[test]
fn a_missing_file_is_named() {
    fails(
        mutate(&["-f", "/no/such/manifest.yaml"], ""),
        &["cannot read /no/such/manifest.yaml"],
    );
}

#[test]
fn invalid_yaml_names_the_document_and_line() {
    let input = format!(
        "{CONFIGMAP}---\nkind: Job\napiVersion: batch/v1\nmetadata:\n  name: x\n   bad: [\n"
    );
    fails(
        mutate(&[], &input),
        &[
            "stdin: document 2 (line 8)",
            "invalid YAML",
            "at line 13 column",
        ],
    );
}

#[test]
fn invalid_json_names_the_document() {
    fails(
        mutate(
            &[],
            "{\"kind\": \"Pod\", \"apiVersion\": \"v1\"}\n{\"kind\": ",
        ),
        &["document 2", "invalid JSON"],
    );
}

#[test]
fn a_document_that_is_not_an_object_is_named() {
    let input = format!("{CONFIGMAP}---\n- a\n- b\n");
    fails(
        mutate(&[], &input),
        &["document 2 (line 8)", "found a list"],
    );
    fails(
        mutate(&[], "just text\n"),
        &["document 1 (line 1)", "found a string"],
    );
}

#[test]
fn missing_kind_or_api_version_is_named() {
    fails(
        mutate(&[], "apiVersion: v1\nmetadata:\n  name: x\n"),
        &["document 1 (line 1)", "has no \"kind\""],
    );
    fails(mutate(&[], "kind: Pod\n"), &["has no \"apiVersion\""]);
    fails(
        mutate(&[], "kind: Pod\napiVersion: a/b/c\n"),
        &["apiVersion \"a/b/c\""],
    );
    let list = "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n";
    fails(
        mutate(&[], list),
        &["document 1 (line 1), item 1", "has no \"apiVersion\""],
    );
}

#[test]
fn a_broken_admission_review_is_named() {
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}});
    fails(
        mutate(&[], &review.to_string()),
        &["document 1 (line 1)", "no uid"],
    );
}

#[test]
fn config_with_an_unknown_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "cleanupBudget: 5\n").unwrap();
    let config = config.to_string_lossy().into_owned();
    fails(
        mutate(&["--config", &config], CONFIGMAP),
        &["cleanupBudget", &config],
    );
    std::fs::write(dir.path().join("config.yaml"), "cleanupBudgetSeconds: 5\n").unwrap();
    ok(mutate(&["--config", &config], CONFIGMAP));
}

#[test]
fn unknown_output_format_is_refused_by_the_parser() {
    let run = mutate(&["-o", "xml"], CONFIGMAP);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("yaml, json, patch, diff"),
        "{}",
        run.stderr
    );
}
