//! Behaviour with the mutation engine (docs/DESIGN.md, Scope to The shell fix) on the examples and
//! fixtures.

use super::*;
use serde_json::{json, Value};

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

/// docs/DESIGN.md#responses on every example and fixture, on both endpoints: the patch applies and
/// a second pass over the result patches nothing (reinvocationPolicy IfNeeded is safe).
#[test]
fn every_example_and_fixture_is_idempotent() {
    let mut files: Vec<String> = ["examples", "tests/fixtures"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(path(dir)).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|file| {
            matches!(
                file.extension().and_then(|e| e.to_str()),
                Some("yaml" | "json")
            )
        })
        // The config files of examples/ and tests/fixtures/ are no manifests.
        .filter(|file| file.file_name().is_some_and(|name| name != "config.yaml"))
        .map(|file| file.to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    for file in &files {
        for endpoint in [&[][..], &["--auto"][..]] {
            let mut args = vec!["-f", file.as_str(), "-o", "json"];
            args.extend_from_slice(endpoint);
            let run = mutate(&args, "");
            if file.ends_with("job-bad-cleanup.yaml") {
                assert_eq!(run.code, 1, "{file}: {}", run.stderr);
                continue;
            }
            let run = ok(run);
            // A review's object may not have been mutated (sub-resource, DELETE): create it
            // as a manifest first, then check that a further pass changes nothing.
            for document in json_docs(&run.stdout) {
                let mut create = vec!["-o", "json"];
                create.extend_from_slice(endpoint);
                let created = ok(mutate(&create, &document.to_string())).stdout;
                if !file.contains("/review-") {
                    assert_same_order(&json_docs(&created)[0], &document);
                }
                let mut again = vec!["-o", "patch"];
                again.extend_from_slice(endpoint);
                let second = ok(mutate(&again, &created));
                assert_eq!(
                    second.stdout, "[]\n",
                    "{file} {endpoint:?}: {}",
                    second.stderr
                );
            }
        }
    }
}

/// Issue 27: a `batch/v1beta1` CronJob used to pass through in silence.
#[test]
fn v1beta1_cronjob_is_explained() {
    let cron_job = "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: nightly\n  \
        annotations:\n    prestop-injector.io/cleanup: auto\nspec:\n  schedule: '0 3 * * *'\n  \
        jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          \
        containers:\n          - name: app\n            image: busybox:1.36\n";
    let run = ok(mutate(&["-o", "patch"], cron_job));
    assert_eq!(run.stdout, "[]\n");
    let warning = run
        .stderr
        .lines()
        .find(|line| {
            line.starts_with(
                "Warning: CronJob/nightly: batch/v1beta1 CronJob is left unchanged here",
            )
        })
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        warning.contains("converts it to batch/v1 before calling the webhook")
            && warning.contains("run mutate on the batch/v1 form"),
        "{warning}"
    );
    // The batch/v1 form is decided, without the note.
    let run = ok(mutate(&[], &cron_job.replace("batch/v1beta1", "batch/v1")));
    assert!(
        !run.stderr.contains("left unchanged here"),
        "{}",
        run.stderr
    );
}

/// Issue 27: `mutate` decides what the installed webhook never receives.
#[test]
fn mutate_warns_about_namespaces_the_webhook_never_sees() {
    let job = |namespace: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: {namespace}\n  \
             annotations:\n    prestop-injector.io/cleanup: auto\nspec:\n  template:\n    spec:\n      \
             restartPolicy: Never\n      containers:\n      - name: app\n        image: busybox:1.36\n"
        )
    };
    for namespace in [
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "prestop-system",
    ] {
        let run = ok(mutate(&[], &job(namespace)));
        let expected =
            format!("Warning: Job/j: namespace {namespace}: the installed webhook never sees it");
        assert!(
            run.stderr.contains(&expected),
            "{namespace}: {}",
            run.stderr
        );
        assert!(run
            .stderr
            .contains("the cluster admits this object unchanged"));
    }
    let run = ok(mutate(&[], &job("batch")));
    assert!(!run.stderr.contains("never sees it"), "{}", run.stderr);
    // Kinds the webhook has no rule for get no note at all.
    let run = ok(mutate(
        &[],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: kube-system\n",
    ));
    assert_eq!(run.stderr, "");
}
