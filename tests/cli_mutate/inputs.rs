//! Mechanics: what `mutate` reads and prints when nothing changes.

use super::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

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

#[test]
fn yaml_1_1_octals_are_read_as_kubectl_does_and_booleans_are_flagged() {
    let input = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    debug: on\nspec:\n  volumes:\n  - name: cfg\n    configMap:\n      name: cfg\n      defaultMode: 0644\n";
    let run = ok(mutate(&["-o", "json"], input));
    let pod = json_docs(&run.stdout).remove(0);
    assert_eq!(pod["spec"]["volumes"][0]["configMap"]["defaultMode"], 420);
    assert!(
        run.stderr
            .contains("Warning: stdin: line 6: `debug: on` is the boolean true for kubectl"),
        "{}",
        run.stderr
    );
}

/// The YAML we print is for `kubectl apply -f -`: kubectl (YAML 1.1) must read back
/// exactly the values we mean. Skipped where kubectl is not installed.
#[test]
fn kubectl_reads_our_yaml_as_we_do() {
    let fixture = "tests/fixtures/configmap-tricky-strings.json";
    let kubectl = |yaml: &str| {
        let mut child = Command::new("kubectl")
            .args([
                "annotate",
                "--local",
                "-f",
                "-",
                "-o",
                "json",
                "checked=yes",
            ])
            .env("KUBECONFIG", "/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        child.stdin.take()?.write_all(yaml.as_bytes()).ok()?;
        let output = child.wait_with_output().ok()?;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice::<Value>(&output.stdout).ok()
    };
    let yaml = ok(mutate_file(fixture, &[])).stdout;
    let Some(mut seen) = kubectl(&yaml) else {
        eprintln!("kubectl not found: skipping the kubectl round trip");
        return;
    };
    if let Some(metadata) = seen["metadata"].as_object_mut() {
        metadata.remove("annotations");
    }
    let meant = json_docs(&read(fixture)).remove(0);
    assert_eq!(seen, meant, "YAML was:\n{yaml}");
}

/// Issue 9 class 9c: kubectl sends `readOnly: yes` as `true`, so the preview must see a
/// read-only mount (nothing to clean), exactly as the webhook will.
#[test]
fn class9_yaml_1_1_booleans_are_booleans_as_for_kubectl() {
    let input = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations:\n    prestop-injector.io/cleanup: auto\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: app\n        image: busybox\n        volumeMounts:\n        - name: data\n          mountPath: /data\n          readOnly: yes\n      volumes:\n      - name: data\n        hostPath:\n          path: /mnt/data\n";
    let run = ok(mutate(&["-o", "json"], input));
    let job = json_docs(&run.stdout).remove(0);
    let mount = &job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0];
    assert_eq!(mount["readOnly"], true, "{}", run.stdout);
    assert!(
        job.pointer("/spec/template/spec/containers/0/lifecycle")
            .is_none(),
        "a read-only mount was cleaned: {}",
        run.stdout
    );
    assert!(run.stderr.contains("nothing to clean"), "{}", run.stderr);
}
