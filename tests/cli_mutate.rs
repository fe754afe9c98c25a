//! `prestop-injector mutate`, driven through the real binary: input formats, output
//! formats, exit codes, and the mutation of the examples users copy.

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn mutate(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .arg("mutate")
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

// ---- mechanics: inputs ------------------------------------------------------------

#[test]
fn multi_document_yaml_on_stdin_gives_one_patch_line_per_document() {
    let input = format!(
        "---\n{CONFIGMAP}---\n# nothing here\n---\n{}",
        read("tests/fixtures/job-opted-out.yaml")
    );
    let run = ok(mutate(&["-o", "patch"], &input));
    assert_eq!(run.stdout, "[]\n[]\n");
    let run = ok(mutate(&["-o", "patch", "--auto", "-f", "-"], &input));
    assert_eq!(run.stdout, "[]\n[]\n");
}

#[test]
fn json_stream_from_a_file_round_trips_with_key_order() {
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "labels": {"z": "1", "a": "2"}}, "data": {"y": "off"}});
    let second = json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "a"}, "spec": {"zzFuture": {"b": 1, "a": [true, null, 1.5]}}});
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.json");
    std::fs::write(
        &file,
        format!(
            "{first}\n{}",
            serde_json::to_string_pretty(&second).unwrap()
        ),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();

    let run = ok(mutate(&["-f", &file, "-o", "json"], ""));
    let out = json_docs(&run.stdout);
    assert_eq!(out.len(), 2);
    assert_same_order(&out[0], &first);
    assert_same_order(&out[1], &second);

    let run = ok(mutate(&["--filename", &file], ""));
    let out = yaml_docs(&run.stdout);
    assert_same_order(&out[0], &first);
    assert_same_order(&out[1], &second);
    assert!(run.stdout.contains("\n---\n"), "{}", run.stdout);
}

#[test]
fn yaml_output_keeps_order_unknown_fields_and_kubectl_meaning() {
    let input = read("tests/fixtures/configmap.yaml");
    let run = ok(mutate(&[], &input));
    assert_same_order(&yaml_docs(&run.stdout)[0], &yaml_docs(&input)[0]);
    // kubectl reads YAML 1.1: an unquoted off/yes would become a boolean.
    assert!(run.stdout.contains("mode: 'off'\n"), "{}", run.stdout);
    assert!(run.stdout.contains("enabled: 'yes'\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("script.sh: |\n    #!/bin/sh\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn lists_are_expanded_into_their_items() {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        serde_yaml::from_str::<Value>(CONFIGMAP).unwrap(),
        serde_yaml::from_str::<Value>(&read("tests/fixtures/job-opted-out.yaml")).unwrap(),
    ]});
    let run = ok(mutate(&["-o", "patch"], &list.to_string()));
    assert_eq!(run.stdout, "[]\n[]\n");
    let yaml_list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        CONFIGMAP.replace('\n', "\n  ")
    );
    let run = ok(mutate(&["-o", "json"], &yaml_list));
    let out = json_docs(&run.stdout);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["kind"], "ConfigMap");
}

#[test]
fn admission_reviews_are_decided_as_given() {
    let run = ok(mutate_file(
        "examples/review-job-worker.json",
        &["-o", "json"],
    ));
    let out = json_docs(&run.stdout);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["kind"], "Job");
    assert_eq!(out[0]["metadata"]["name"], "job-worker");

    for fixture in [
        "review-job-status-subresource.json",
        "review-delete-job-orphan.json",
    ] {
        let run = ok(mutate_file(
            &format!("tests/fixtures/{fixture}"),
            &["-o", "patch"],
        ));
        assert_eq!(run.stdout, "[]\n", "{fixture}");
    }
    // A DELETE carries no object: nothing to print as a manifest.
    let run = ok(mutate_file(
        "tests/fixtures/review-delete-job-orphan.json",
        &[],
    ));
    assert_eq!(run.stdout, "");
}

#[test]
fn empty_input_prints_nothing() {
    assert_eq!(ok(mutate(&[], "")).stdout, "");
    assert_eq!(ok(mutate(&["-o", "patch"], "---\n# c\n---\n")).stdout, "");
}

// ---- mechanics: unreadable input exits 2 ------------------------------------------

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

// ---- behaviour with the mutation engine (SPEC §1–§6) ------------------------------

fn pointer<'a>(value: &'a Value, at: &str) -> &'a Value {
    value
        .pointer(at)
        .unwrap_or_else(|| panic!("{at} missing in {value:#}"))
}

fn argv(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn is_bash(arg: &str) -> bool {
    arg == "bash" || arg.ends_with("/bash")
}

/// Applies `-o patch` to the input and checks it equals `-o json`, then that a second
/// pass over the output changes nothing.
fn check_patch_and_idempotence(relative: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let mutated = json_docs(&ok(mutate_file(relative, &all)).stdout).remove(0);
    let mut all = args.to_vec();
    all.extend(["-o", "patch"]);
    let run = ok(mutate_file(relative, &all));
    let patch: json_patch::Patch = serde_json::from_str(run.stdout.trim_end()).unwrap();
    let mut patched = yaml_docs(&read(relative)).remove(0);
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_same_order(&patched, &mutated);

    let mut all = args.to_vec();
    all.extend(["-o", "patch"]);
    let again = ok(mutate(&all, &serde_json::to_string(&mutated).unwrap()));
    assert_eq!(
        again.stdout, "[]\n",
        "second pass must not patch: {}",
        again.stderr
    );
    mutated
}

#[test]
#[ignore = "needs the mutation engine"]
fn seed_job_gets_sh_a_composed_prestop_grace_and_status() {
    let job = check_patch_and_idempotence("examples/job-worker.yaml", &[]);
    let container = pointer(&job, "/spec/template/spec/containers/0");
    let command = argv(pointer(container, "/command"));
    assert_eq!(command[0], "/bin/sh", "busybox has no bash: {command:?}");
    assert!(command[2].contains("sleep 360000000"));

    let hook = argv(pointer(container, "/lifecycle/preStop/exec/command"));
    assert!(!is_bash(&hook[0]), "{hook:?}");
    assert!(
        !hook.iter().any(|arg| is_bash(arg)),
        "user's hook runs under /bin/sh: {hook:?}"
    );
    assert!(
        hook.iter().any(|arg| arg == "rm -rf /cadm-package/*"),
        "user's argv kept exactly: {hook:?}"
    );
    assert!(
        hook.iter().any(|arg| arg == "/test-package"),
        "cleanup target as its own argv entry: {hook:?}"
    );

    let grace = pointer(&job, "/spec/template/spec/terminationGracePeriodSeconds")
        .as_u64()
        .unwrap();
    assert!(grace >= 40, "grace {grace}");
    let status = pointer(
        &job,
        "/spec/template/metadata/annotations/prestop-injector.io~1status",
    );
    let status: Value = serde_json::from_str(status.as_str().unwrap()).unwrap();
    assert_eq!(status["containers"], json!(["busybox"]));
    assert_eq!(status["grace"], json!(grace));
}

#[test]
#[ignore = "needs the mutation engine"]
fn seed_job_warns_about_bash_and_diff_shows_the_additions() {
    let run = ok(mutate_file("examples/job-worker.yaml", &["-o", "diff"]));
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("Warning: Job/job-worker: ") && l.contains("busybox")),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout
            .starts_with("--- a/Job/job-worker\n+++ b/Job/job-worker\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with('+') && l.contains("prestop-injector.io/status")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with('+') && l.contains("terminationGracePeriodSeconds")),
        "{}",
        run.stdout
    );
}

#[test]
#[ignore = "needs the mutation engine"]
fn the_review_example_mutates_like_the_manifest() {
    let run = ok(mutate_file(
        "examples/review-job-worker.json",
        &["-o", "patch"],
    ));
    assert_ne!(run.stdout, "[]\n");
    let job = json_docs(
        &ok(mutate_file(
            "examples/review-job-worker.json",
            &["-o", "json"],
        ))
        .stdout,
    )
    .remove(0);
    assert!(job
        .pointer("/spec/template/metadata/annotations/prestop-injector.io~1status")
        .is_some());
}

#[test]
#[ignore = "needs the mutation engine"]
fn sleep70_deployment_gets_grace_80_and_keeps_bash() {
    let deployment = check_patch_and_idempotence("examples/deployment-sleep70.yaml", &[]);
    let spec = pointer(&deployment, "/spec/template/spec");
    assert!(
        pointer(spec, "/terminationGracePeriodSeconds")
            .as_u64()
            .unwrap()
            >= 80,
        "{spec:#}"
    );
    let hook = argv(pointer(
        spec,
        "/containers/0/lifecycle/preStop/exec/command",
    ));
    assert_eq!(hook[0], "/bin/bash", "nginx has bash: {hook:?}");
    assert!(hook.iter().any(|arg| arg.contains("sleep 70")), "{hook:?}");
}

#[test]
#[ignore = "needs the mutation engine"]
fn a_bad_annotation_is_denied_and_the_rest_still_printed() {
    let input = format!(
        "{}---\n{CONFIGMAP}",
        read("tests/fixtures/job-bad-cleanup.yaml")
    );
    let run = mutate(&[], &input);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("Error: Job/job-bad-cleanup denied: "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.contains("prestop-injector.io/cleanup") && line.contains("relative/path"),
        "{line}"
    );
    let out = yaml_docs(&run.stdout);
    assert_eq!(
        out.len(),
        1,
        "only the ConfigMap is printed: {}",
        run.stdout
    );
    assert_eq!(out[0]["kind"], "ConfigMap");
    let run = mutate(&["-o", "patch"], &input);
    assert_eq!((run.code, run.stdout.as_str()), (1, "[]\n[]\n"));
}

#[test]
#[ignore = "needs the mutation engine"]
fn auto_injects_into_an_unannotated_job_with_a_host_path() {
    let fixture = "tests/fixtures/job-unannotated-hostpath.yaml";
    assert_eq!(ok(mutate_file(fixture, &["-o", "patch"])).stdout, "[]\n");
    let job = check_patch_and_idempotence(fixture, &["--auto"]);
    let hook = argv(pointer(
        &job,
        "/spec/template/spec/containers/0/lifecycle/preStop/exec/command",
    ));
    assert!(hook.iter().any(|arg| arg == "/scratch"), "{hook:?}");
    assert_eq!(
        ok(mutate_file(
            "tests/fixtures/job-opted-out.yaml",
            &["--auto", "-o", "patch"]
        ))
        .stdout,
        "[]\n"
    );
}

#[test]
#[ignore = "needs the mutation engine"]
fn unknown_fields_survive_mutation() {
    let fixture = "tests/fixtures/job-unknown-fields.yaml";
    let job = check_patch_and_idempotence(fixture, &[]);
    let input = yaml_docs(&read(fixture)).remove(0);
    for at in [
        "/metadata/futureMetadataField",
        "/spec/futureJobField",
        "/spec/template/spec/someFutureField",
        "/spec/template/spec/containers/0/someFutureContainerField",
    ] {
        assert_same_order(pointer(&job, at), pointer(&input, at));
    }
    assert!(job
        .pointer("/spec/template/metadata/annotations/prestop-injector.io~1status")
        .is_some());
}

#[test]
#[ignore = "needs the mutation engine"]
fn other_kinds_carry_the_status_on_their_template() {
    let cronjob = check_patch_and_idempotence("tests/fixtures/cronjob-cleanup.yaml", &[]);
    assert!(cronjob
        .pointer("/spec/jobTemplate/spec/template/metadata/annotations/prestop-injector.io~1status")
        .is_some());
    let pod = check_patch_and_idempotence("tests/fixtures/pod-bare.yaml", &[]);
    assert!(pod
        .pointer("/metadata/annotations/prestop-injector.io~1status")
        .is_some());
    let hook = argv(pointer(
        &pod,
        "/spec/containers/0/lifecycle/preStop/exec/command",
    ));
    assert!(hook.iter().any(|arg| arg == "/work"), "{hook:?}");
}
