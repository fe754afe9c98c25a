//! Issue 9, class 5: the Pod-level pass reproduces the workload's decision
//! (docs/DESIGN.md#annotations, "The Pod-level pass").
//!
//! Each test builds the workload, decides it, applies the patch with json-patch, then
//! builds what the controller creates exactly as it would — the template's metadata and
//! spec plus an ownerReference — and decides that on both endpoints: it must get no
//! patch, and carry the workload's result.

mod core_support;
use core_support::test_config;

use core_support::*;
use prestop_injector::admission::Operation;
use prestop_injector::mutation::{decide, Decision, Endpoint};
use serde_json::{json, Value};

const ENDPOINTS: [Endpoint; 2] = [Endpoint::Mutate, Endpoint::MutateAuto];

/// What a controller creates from `template`: its metadata and spec, owned by `owner`.
fn created_from(template: &Value, api_version: &str, kind: &str, owner: (&str, &str)) -> Value {
    let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
    metadata["generateName"] = json!("made-");
    metadata["ownerReferences"] = json!([{"apiVersion": owner.0, "kind": owner.1, "name": "parent",
        "uid": "1b0e5b1e-0000-0000-0000-000000000001", "controller": true, "blockOwnerDeletion": true}]);
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    object["spec"] = template["spec"].clone();
    object
}

fn pod_of(template: &Value, owner: (&str, &str)) -> Value {
    created_from(template, "v1", "Pod", owner)
}

fn decide_create(object: &Value, endpoint: Endpoint) -> Decision {
    decide(
        &request(Operation::Create, object.clone()),
        endpoint,
        &test_config(),
    )
}

/// Asserts that `object` gets no patch (and no denial) on both endpoints.
fn assert_untouched(object: &Value, what: &str) {
    for endpoint in ENDPOINTS {
        let decision = decide_create(object, endpoint);
        assert_eq!(decision.denial, None, "{what} on {endpoint:?}");
        assert_eq!(
            decision.patch.as_ref().map(|p| json!(p)),
            None,
            "{what} on {endpoint:?} must get no patch"
        );
    }
}

fn hook_targets(pod_spec: &Value) -> Vec<String> {
    cleanup_targets(&pod_spec["containers"][0])
}

/// A Job of `scratch_job` whose container mounts `/scratch` with a `tmp` directory in it.
fn job_on(endpoint: Endpoint, annotations: Value) -> Value {
    mutate_with(endpoint, &test_config(), scratch_job(annotations)).patched
}

const JOB_OWNER: (&str, &str) = ("batch/v1", "Job");

#[test]
fn class_5_an_opted_out_job_leaves_its_pods_alone_on_auto() {
    let job = job_on(
        Endpoint::MutateAuto,
        json!({"prestop-injector.io/inject": "false"}),
    );
    let template = &job["spec"]["template"];
    assert!(template["spec"]["containers"][0].get("lifecycle").is_none());
    let pod = pod_of(template, JOB_OWNER);
    assert_untouched(&pod, "pod of an opted-out Job");
    // "Opts out everywhere": not even a record is written on the Job.
    assert_eq!(
        decide_create(
            &scratch_job(json!({"prestop-injector.io/inject": "false"})),
            Endpoint::MutateAuto
        ),
        Decision::default()
    );
}

#[test]
fn class_5_an_explicit_path_on_a_job_is_not_broadened_on_its_pods() {
    for endpoint in ENDPOINTS {
        let job = job_on(
            endpoint,
            json!({"prestop-injector.io/cleanup": "/scratch/tmp"}),
        );
        let template = &job["spec"]["template"];
        assert_eq!(hook_targets(&template["spec"]), ["/scratch/tmp"]);
        let pod = pod_of(template, JOB_OWNER);
        assert_untouched(&pod, "pod of a Job cleaning /scratch/tmp");
        assert_eq!(hook_targets(&pod["spec"]), ["/scratch/tmp"]);
    }
}

#[test]
fn class_5_hook_seconds_on_the_template_does_not_remove_the_jobs_cleanup() {
    for endpoint in ENDPOINTS {
        let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
        object["spec"]["template"]["metadata"] =
            json!({"annotations": {"prestop-injector.io/hook-seconds": "70"}});
        let job = mutate_with(endpoint, &test_config(), object).patched;
        let template = &job["spec"]["template"];
        assert_eq!(hook_targets(&template["spec"]), ["/scratch"]);
        assert_eq!(grace(&job), Some(70 + 10));
        let pod = pod_of(template, JOB_OWNER);
        assert_untouched(&pod, "pod of an auto Job with hook-seconds on its template");
    }
}

#[test]
fn class_5_a_pod_of_an_unrecorded_template_is_left_alone_on_auto() {
    // The workload predates the injector, or was never recorded: its decision is
    // unknown, so the pod's hostPath is not cleaned (fail closed).
    let template = scratch_job(json!({}))["spec"]["template"].clone();
    for owner in [
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
    ] {
        let pod = pod_of(&template, owner);
        assert_untouched(&pod, owner.1);
        // Even when its template carries annotations of ours: the object's are unknown.
        let mut annotated = pod.clone();
        annotated["metadata"]["annotations"] = json!({"prestop-injector.io/cleanup": "auto"});
        assert_untouched(&annotated, owner.1);
    }
    // A bare Pod is its own workload and is decided as before (annotated: its fixed
    // hostPath is not private, issue 17 class 7).
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
        "annotations": {"prestop-injector.io/cleanup": "auto"}}, "spec": template["spec"]});
    let outcome = mutate_with(Endpoint::MutateAuto, &test_config(), bare);
    assert_eq!(hook_targets(&outcome.patched["spec"]), ["/scratch"]);
}

#[test]
fn class_5_cronjob_to_job_to_pod_reproduces_the_cronjob() {
    for (annotations, targets) in [
        (
            json!({"prestop-injector.io/cleanup": "/scratch/tmp"}),
            &["/scratch/tmp"][..],
        ),
        (json!({"prestop-injector.io/inject": "false"}), &[]),
    ] {
        let job = scratch_job(json!({}));
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "annotations": annotations},
            "spec": {"schedule": "@daily", "jobTemplate": {"spec": job["spec"]}}});
        let cron = mutate_with(Endpoint::MutateAuto, &test_config(), cron).patched;
        // The CronJob controller copies jobTemplate (metadata and spec), not the CronJob's.
        let job = created_from(
            &cron["spec"]["jobTemplate"],
            "batch/v1",
            "Job",
            ("batch/v1", "CronJob"),
        );
        assert_untouched(&job, &format!("Job of a CronJob {annotations}"));
        let pod = pod_of(&job["spec"]["template"], JOB_OWNER);
        assert_untouched(&pod, &format!("pod of a CronJob {annotations}"));
        assert_eq!(hook_targets(&pod["spec"]), targets, "{annotations}");
    }
}

fn deployment(annotations: Value) -> Value {
    let job = scratch_job(json!({}));
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": annotations},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": job["spec"]["template"]["spec"]}}})
}

/// The ReplicaSet a Deployment controller creates: the Deployment's annotations, its
/// template plus the pod-template-hash label.
fn replica_set_of(deployment: &Value) -> Value {
    let mut template = deployment["spec"]["template"].clone();
    template["metadata"]["labels"]["pod-template-hash"] = json!("5d4f8c7b9");
    let mut replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-5d4f8c7b9", "annotations": deployment["metadata"]["annotations"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": true}]},
        "spec": {"replicas": 1, "selector": deployment["spec"]["selector"], "template": template}});
    replica_set["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
    replica_set
}

fn update(old: &Value, new: &Value) -> Value {
    let mut request = request(Operation::Update, new.clone());
    request.old_object = Some(old.clone().into());
    let decision = decide(&request, Endpoint::MutateAuto, &test_config());
    assert_eq!(decision.denial, None);
    let mut patched = new.clone();
    if let Some(patch) = &decision.patch {
        json_patch::patch(&mut patched, &patch.to_json_patch()).unwrap();
    }
    patched
}

#[test]
fn class_5_deployment_to_replica_set_to_pod_and_an_update_that_changes_annotations() {
    let first = mutate_with(
        Endpoint::MutateAuto,
        &test_config(),
        deployment(json!({"prestop-injector.io/cleanup": "/scratch/tmp"})),
    )
    .patched;
    let replica_set = replica_set_of(&first);
    assert_untouched(&replica_set, "ReplicaSet of the Deployment");
    let pod = pod_of(&replica_set["spec"]["template"], ("apps/v1", "ReplicaSet"));
    assert_untouched(&pod, "pod of the Deployment");
    assert_eq!(hook_targets(&pod["spec"]), ["/scratch/tmp"]);

    // The user turns the cleanup off: the template gives the hook back, records `off`,
    // and the next ReplicaSet's pods have no cleanup.
    let mut edited = first.clone();
    edited["metadata"]["annotations"]["prestop-injector.io/cleanup"] = json!("off");
    let second = update(&first, &edited);
    assert!(second["spec"]["template"]["spec"]["containers"][0]
        .get("lifecycle")
        .is_none());
    let replica_set = replica_set_of(&second);
    assert_untouched(&replica_set, "ReplicaSet after the update");
    let pod = pod_of(&replica_set["spec"]["template"], ("apps/v1", "ReplicaSet"));
    assert_untouched(&pod, "pod after the update");
    assert!(hook_targets(&pod["spec"]).is_empty());
    assert_eq!(update(&second, &second), second, "UPDATE is idempotent");
}

#[test]
fn class_5_a_forged_record_is_validated_like_annotations() {
    let template = scratch_job(json!({}))["spec"]["template"].clone();
    let mut pod = pod_of(&template, JOB_OWNER);
    pod["metadata"]["annotations"] =
        json!({"prestop-injector.io/settings": r#"{"version":1,"cleanup":"/"}"#});
    for endpoint in ENDPOINTS {
        let denial = decide_create(&pod, endpoint).denial.expect("denied");
        assert!(
            denial.message.contains("prestop-injector.io/settings")
                && denial.message.contains("root directory"),
            "{}",
            denial.message
        );
    }
}

#[test]
fn class_5_a_workload_never_reads_its_own_record_back() {
    // A template copied from a live object carries a record: the workload re-decides
    // from its annotations and rewrites it.
    let job = job_on(
        Endpoint::Mutate,
        json!({"prestop-injector.io/cleanup": "/scratch/tmp"}),
    );
    let mut copy = scratch_job(json!({"prestop-injector.io/cleanup": "/scratch"}));
    copy["spec"]["template"]["metadata"] = job["spec"]["template"]["metadata"].clone();
    let outcome = mutate(copy);
    assert_eq!(hook_targets(template_spec(&outcome.patched)), ["/scratch"]);
    let pod = pod_of(&outcome.patched["spec"]["template"], JOB_OWNER);
    assert_untouched(&pod, "pod of the re-decided Job");
}

#[test]
fn class_5_a_forged_record_on_a_template_that_is_not_injected_is_removed() {
    // Otherwise the pods of a skipped Job (parallelism 4 on auto) would obey it.
    let mut object = scratch_job(json!({}));
    object["spec"]["parallelism"] = json!(4);
    object["spec"]["template"]["metadata"] = json!({"annotations": {
        "prestop-injector.io/settings": r#"{"version":1,"cleanup":"auto"}"#}});
    let job = mutate_with(Endpoint::MutateAuto, &test_config(), object).patched;
    let template = &job["spec"]["template"];
    assert_eq!(template["metadata"]["annotations"], json!({}));
    let pod = pod_of(template, JOB_OWNER);
    assert_untouched(&pod, "pod of a skipped Job");
    assert!(hook_targets(&pod["spec"]).is_empty());
}

#[test]
fn class_5_a_bare_pod_with_a_record_follows_the_record_not_the_endpoint() {
    let template = scratch_job(json!({}))["spec"]["template"].clone();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "copy", "annotations": {
        "prestop-injector.io/settings": r#"{"version":1,"cleanup":"/scratch/tmp"}"#}},
        "spec": template["spec"]});
    let outcome = mutate_with(Endpoint::MutateAuto, &test_config(), pod);
    assert_eq!(hook_targets(&outcome.patched["spec"]), ["/scratch/tmp"]);
}

#[test]
fn class_5_a_record_alone_puts_a_workload_in_scope_so_it_is_never_left_as_written() {
    // On /mutate a Job carrying nothing but a hand-written record would otherwise be
    // left alone, and its pods would obey a record no one validated against the Job.
    let mut object = scratch_job(json!({}));
    object["spec"]["template"]["metadata"] = json!({"annotations": {
        "prestop-injector.io/settings": r#"{"version":1,"cleanup":"auto","mode":"exec"}"#}});
    let job = mutate(object).patched;
    let template = &job["spec"]["template"];
    assert_eq!(template["metadata"]["annotations"], json!({}));
    assert_untouched(&pod_of(template, JOB_OWNER), "pod of the Job");
}

#[test]
fn class_5_warnings_given_for_the_workload_are_not_repeated_for_each_pod() {
    // The Job's container runs as root: the sidecar falls back to an exec hook, with a
    // warning for the Job; its pods get neither a patch nor the warning again.
    let mut object = scratch_job(json!({"prestop-injector.io/mode": "sidecar",
        "prestop-injector.io/cleanup": "auto"}));
    object["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 0});
    let job = mutate_with(Endpoint::MutateAuto, &test_config(), object);
    assert!(
        job.warnings().contains("no cleanup sidecar"),
        "{}",
        job.warnings()
    );
    let pod = pod_of(&job.patched["spec"]["template"], JOB_OWNER);
    for endpoint in ENDPOINTS {
        assert_eq!(
            decide_create(&pod, endpoint),
            Decision::default(),
            "{endpoint:?}"
        );
    }
}

/// The benchmark's second review (`examples/review-pod-from-job.json`, made by
/// `bench/pod-from-job.jq`): a Pod of the seed Job's injected template as kube-apiserver
/// sends it, ServiceAccount token mounts and defaults included. Through the server's own
/// entry it must be allowed with no patch, as every Pod of an injected workload is; when
/// the seed's mutation changes, this fails until the fixture is made again.
#[test]
fn the_benchmarks_pod_of_the_seed_job_gets_no_patch() {
    let config = prestop_injector::config::Config::load("examples/config.yaml".as_ref()).unwrap();
    let body = std::fs::read("examples/review-pod-from-job.json").unwrap();
    for endpoint in ENDPOINTS {
        let reviewed = prestop_injector::admission::review(&body, endpoint, &config).unwrap();
        assert_eq!(reviewed.decision.patch, None, "{endpoint:?}");
        assert_eq!(reviewed.decision.denial, None, "{endpoint:?}");
        let answer: Value = serde_json::from_slice(&reviewed.body).unwrap();
        assert_eq!(answer["response"]["allowed"], true, "{endpoint:?}");
        assert!(answer["response"].get("patch").is_none(), "{endpoint:?}");
    }
    // It is a Pod of the seed Job: the installer and the hook are what the seed gets.
    let review: Value = serde_json::from_slice(&body).unwrap();
    let pod = &review["request"]["object"];
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "Job");
    let hook = pre_stop_argv(&pod["spec"]["containers"][0]);
    assert_eq!(hook[..2], ["/.prestop-injector/prestop-clean", "hook"]);
    assert_eq!(pod["spec"]["initContainers"][0]["name"], "prestop-install");
}
