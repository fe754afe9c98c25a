//! Issue 31, finding 1: a workload's own pods can overlap on one node in time, not only
//! side by side. A Job's pod that is deleted (`kubectl delete pod`, preemption, the
//! descheduler) is replaced at once (`podReplacementPolicy: TerminatingOrFailed`, the
//! default without a `podFailurePolicy`); the replacement may land on the same node and
//! fixed directory while the old pod still stops, and the old pod's cleanup empties what
//! the replacement wrote. A CronJob's runs overlap the same way (`Allow`, the default, and
//! `Replace`). Parallelism 2 was warned; parallelism 1 and those CronJobs were not. Now an
//! explicit cleanup of a fixed directory warns, naming the overlap and `$(POD_UID)`, and
//! changes nothing else (docs/DESIGN.md#only-provably-private-directories-without-an-annotation).

mod core_support;

use core_support::*;
use prestop_injector::mutation::{Endpoint, MAX_WARNING_CHARS};
use serde_json::{json, Value};

/// The config these tests decide with: the default plus the node agent, so that only
/// the overlap warnings are in the answer (without an agent every fixed directory also
/// says it is not cleaned at all: core_node_agent.rs).
fn with_agent() -> prestop_injector::config::Config {
    test_config_with("nodeAgent: {}")
}

/// The scratch Job (one container `app`, hostPath `/mnt/scratch` at `/scratch`,
/// `restartPolicy: Never`) with `spec` fields added, wrapped as a Job or a CronJob.
fn workload(kind: &str, annotations: Value, spec: Value) -> Value {
    let mut job = scratch_job(annotations.clone());
    for (key, value) in spec.as_object().into_iter().flatten() {
        job["spec"][key] = value.clone();
    }
    match kind {
        "Job" => job,
        _ => json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "annotations": annotations},
            "spec": {"schedule": "@hourly", "jobTemplate": {"spec": job["spec"]}}}),
    }
}

/// A CronJob of the scratch Job, with `concurrencyPolicy` when given.
fn cron_job(annotations: Value, policy: Option<&str>) -> Value {
    let mut cron = workload("CronJob", annotations, json!({}));
    if let Some(policy) = policy {
        cron["spec"]["concurrencyPolicy"] = json!(policy);
    }
    cron
}

fn template_of(object: &Value) -> &Value {
    object
        .pointer("/spec/template")
        .or_else(|| object.pointer("/spec/jobTemplate/spec/template"))
        .expect("a template")
}

fn template_of_mut(object: &mut Value) -> &mut Value {
    let pointer = if object["kind"] == "CronJob" {
        "/spec/jobTemplate/spec/template"
    } else {
        "/spec/template"
    };
    object.pointer_mut(pointer).expect("a template")
}

/// The scratch directory cleaned by our exec hook, or by the cleanup sidecar.
fn cleans_scratch(object: &Value) -> bool {
    let spec = &template_of(object)["spec"];
    let by_sidecar = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| serde_json::from_value::<Vec<String>>(c["command"].clone()).ok())
        .filter_map(|argv| prestop_injector::mutation::hook::sidecar_targets(&argv))
        .any(|targets| !targets.is_empty());
    by_sidecar || cleanup_targets(&spec["containers"][0]) == ["/scratch"]
}

/// The patch of `object` with its parallelism raised to 2: the same pod template, whose
/// side-by-side pods were warned before. The overlap's warning changes nothing in it.
fn patch_at_parallelism_2(
    mut object: Value,
    endpoint: Endpoint,
) -> Option<prestop_injector::json::patch::Patch> {
    let job_spec = if object["kind"] == "CronJob" {
        &mut object["spec"]["jobTemplate"]["spec"]
    } else {
        &mut object["spec"]
    };
    job_spec["parallelism"] = json!(2);
    let outcome = mutate_with(endpoint, &with_agent(), object);
    assert!(
        outcome.warnings().contains("parallelism 2"),
        "{}",
        outcome.warnings()
    );
    outcome.decision.patch
}

/// `object` decided with each explicit form of cleanup (`auto` on `/mutate/auto`, the
/// path on `/mutate`): its warnings, each checked to be cleaned with an unchanged patch.
fn explicit_warnings(object_with: impl Fn(Value) -> Value) -> Vec<Vec<String>> {
    [
        ("auto", Endpoint::MutateAuto),
        ("/scratch", Endpoint::Mutate),
    ]
    .into_iter()
    .map(|(annotation, endpoint)| {
        let object = object_with(json!({"prestop-injector.io/cleanup": annotation}));
        let outcome = mutate_with(endpoint, &with_agent(), object.clone());
        assert!(cleans_scratch(&outcome.patched), "{annotation}: {object}");
        assert_eq!(
            outcome.decision.patch,
            patch_at_parallelism_2(object, endpoint),
            "{annotation}: only the warning is new"
        );
        for warning in &outcome.decision.warnings {
            assert!(warning.chars().count() <= MAX_WARNING_CHARS, "{warning}");
        }
        outcome.decision.warnings
    })
    .collect()
}

#[test]
fn a_jobs_replacement_pod_on_a_fixed_directory_is_warned() {
    let warning = "container \"app\": /scratch may be shared by a Job's replacement pod, \
                   started while the deleted pod still stops; use subPathExpr: $(POD_UID)";
    assert_eq!(
        replaced("app", "/scratch"),
        warning,
        "the helper other tests use"
    );
    for spec in [
        json!({}),
        json!({"parallelism": 1}),
        json!({"parallelism": 1, "completions": 5}),
        json!({"podReplacementPolicy": "TerminatingOrFailed"}),
        // Not taken as proof: the API server drops the field after admission where its
        // feature gate is off.
        json!({"podReplacementPolicy": "Failed"}),
    ] {
        for warnings in explicit_warnings(|annotations| workload("Job", annotations, spec.clone()))
        {
            assert_eq!(warnings, [warning], "{spec}");
        }
    }

    // Cleaned by the sidecar (the kubelet restarts an OnFailure Job's container in its
    // pod): the same warning, once.
    let mut on_failure = workload(
        "Job",
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        json!({}),
    );
    let spec = &mut template_of_mut(&mut on_failure)["spec"];
    spec["restartPolicy"] = json!("OnFailure");
    spec["containers"][0]["securityContext"] = json!({"runAsUser": 1000, "runAsGroup": 1000});
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), on_failure);
    assert!(cleans_scratch(&outcome.patched), "{}", outcome.warnings());
    assert_eq!(outcome.decision.warnings, [warning]);
}

#[test]
fn the_seed_jobs_fixed_directory_is_warned() {
    // examples/job-worker.yaml, the shape: parallelism 1, a fixed hostPath.
    let review: Value =
        serde_json::from_str(include_str!("../examples/review-job-worker.json")).unwrap();
    let object = review["request"]["object"].clone();
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), object);
    // Its other warnings (the shell fix, its own preStop) are not this class's.
    let shared: Vec<_> = outcome
        .decision
        .warnings
        .iter()
        .filter(|w| w.contains("may be shared"))
        .collect();
    assert_eq!(shared, [&replaced("busybox", "/test-package")]);
}

#[test]
fn a_cronjob_that_allows_or_replaces_runs_is_warned() {
    for (policy, who) in [
        (
            None,
            "pods of a CronJob's overlapping runs (concurrencyPolicy: Allow, the default)",
        ),
        (
            Some("Allow"),
            "pods of a CronJob's overlapping runs (concurrencyPolicy: Allow)",
        ),
        (
            Some("Replace"),
            "a CronJob's next run, started while the replaced run still stops \
             (concurrencyPolicy: Replace)",
        ),
    ] {
        let warning = format!(
            "container \"app\": /scratch may be shared by {who}; use subPathExpr: $(POD_UID)"
        );
        for warnings in explicit_warnings(|annotations| cron_job(annotations, policy)) {
            assert_eq!(warnings, [warning.as_str()], "{policy:?}");
        }
    }
}

#[test]
fn forbid_keeps_runs_apart_but_its_jobs_pods_are_still_replaced() {
    let warning = "container \"app\": /scratch may be shared by a CronJob's replacement pod, \
                   started while the deleted pod still stops; use subPathExpr: $(POD_UID)";
    for warnings in explicit_warnings(|annotations| cron_job(annotations, Some("Forbid"))) {
        assert_eq!(warnings, [warning]);
        assert!(!warnings[0].contains("run"), "{warning}");
    }
}

#[test]
fn a_per_pod_directory_is_not_warned() {
    let per_pod = |object: &mut Value, field: &str| {
        let container = &mut template_of_mut(object)["spec"]["containers"][0];
        container["env"] =
            json!([{"name": "POD_DIR", "valueFrom": {"fieldRef": {"fieldPath": field}}}]);
        container["volumeMounts"][0]["subPathExpr"] = json!("runs/$(POD_DIR)");
    };
    let objects = [
        workload("Job", json!({}), json!({})),
        cron_job(json!({}), None),
        cron_job(json!({}), Some("Replace")),
        cron_job(json!({}), Some("Forbid")),
    ];
    for object in objects {
        for (annotation, endpoint) in [
            ("auto", Endpoint::MutateAuto),
            ("/scratch", Endpoint::Mutate),
        ] {
            let mut object = object.clone();
            object["metadata"]["annotations"] = json!({"prestop-injector.io/cleanup": annotation});
            // The uid, and the name too: a replacement pod and the next run's pods get
            // new names.
            for field in ["metadata.uid", "metadata.name"] {
                let mut own = object.clone();
                per_pod(&mut own, field);
                let outcome = mutate_with(endpoint, &with_agent(), own.clone());
                assert!(cleans_scratch(&outcome.patched), "{field}: {own}");
                assert_eq!(
                    outcome.decision.warnings,
                    Vec::<String>::new(),
                    "{field}: {own}"
                );
            }
            // A directory per node is every pod's on that node.
            let mut per_node = object.clone();
            per_pod(&mut per_node, "spec.nodeName");
            let outcome = mutate_with(endpoint, &with_agent(), per_node);
            assert_eq!(outcome.decision.warnings.len(), 1, "{}", outcome.warnings());
            assert!(outcome.warnings().ends_with("use subPathExpr: $(POD_UID)"));
        }
    }
}

#[test]
fn a_bare_pod_is_never_replaced_so_not_warned() {
    let job = scratch_job(json!({}));
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "once", "annotations": {"prestop-injector.io/cleanup": "/scratch"}},
        "spec": job["spec"]["template"]["spec"]});
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), pod);
    assert_eq!(
        cleanup_targets(&outcome.patched["spec"]["containers"][0]),
        ["/scratch"]
    );
    assert_eq!(outcome.decision.warnings, Vec::<String>::new());
}

#[test]
fn without_an_annotation_the_fixed_directory_is_skipped_as_before() {
    // An implicit `auto` cleans only per-pod directories: the fixed one is left alone with
    // its one warning, and no second about the overlap.
    for object in [
        workload("Job", json!({}), json!({})),
        cron_job(json!({}), Some("Replace")),
    ] {
        let outcome = mutate_with(Endpoint::MutateAuto, &with_agent(), object);
        assert!(!cleans_scratch(&outcome.patched));
        assert_eq!(
            outcome.decision.warnings,
            [
                "container \"app\": /scratch not cleaned: host directory may be shared; \
              use subPathExpr $(POD_UID) or annotate cleanup"
            ]
        );
    }
}

#[test]
fn the_overlap_warning_keeps_a_long_path_whole() {
    // A long container name and path still fit in 256: nothing is cut.
    let name = "feature-extractor-nightly-worker";
    let mount = "/var/cache/feature-extractor/nightly";
    let mut object = cron_job(
        json!({"prestop-injector.io/cleanup": mount}),
        Some("Replace"),
    );
    let spec = &mut template_of_mut(&mut object)["spec"];
    spec["containers"][0]["name"] = json!(name);
    spec["containers"][0]["volumeMounts"][0]["mountPath"] = json!(mount);
    spec["volumes"][0]["hostPath"]["path"] = json!("/mnt/scratch/feature-extractor");
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), object);
    let whole = format!(
        "container {name:?}: {mount} may be shared by a CronJob's next run, started while the \
         replaced run still stops (concurrencyPolicy: Replace); use subPathExpr: $(POD_UID)"
    );
    assert!(whole.chars().count() > 120, "a case that 120 would cut");
    assert_eq!(outcome.decision.warnings, [whole]);
}
