//! Issue 17, class 3: preStop runs on container restarts (docs/DESIGN.md#where-the-cleanup-runs).
//! The kubelet runs the preStop before every kill — after a failed liveness or startup probe too —
//! and then starts the container again in the same pod, on the data directory the hook just
//! emptied. So an exec-hook cleanup goes only where the kubelet cannot start that
//! container again in its pod; elsewhere the sidecar cleans (it gets SIGTERM only when
//! the pod ends) where the cluster runs it, else nothing is injected (the reaper cleans
//! after the pod is gone), with a warning naming the restart policy.

mod core_support;

use core_support::*;
use prestop_injector::admission::Operation;
use prestop_injector::config::Config;
use prestop_injector::mutation::hook::sidecar_targets;
use prestop_injector::mutation::{decide, Endpoint, MAX_WARNING_CHARS};
use serde_json::{json, Value};

/// A cluster without native sidecars: the exec hook or nothing.
fn no_sidecar() -> Config {
    Config::from_yaml("allowedHostPathPrefixes: [/scratch]\nkubernetesVersion: \"1.28\"\n").unwrap()
}

/// A cluster that runs the cleanup sidecar.
fn with_sidecar() -> Config {
    Config::from_yaml("allowedHostPathPrefixes: [/scratch]\nkubernetesVersion: \"1.30\"\n").unwrap()
}

/// A container with a liveness probe that writes to hostPath `/scratch/run` at `/data`.
fn worker() -> Value {
    json!({"name": "worker", "image": "busybox:1.36", "command": ["sh", "-c", "work"],
        "securityContext": {"runAsUser": 1000},
        "livenessProbe": {"exec": {"command": ["test", "-f", "/data/alive"]}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]})
}

/// A Job asking for `cleanup: /data`, its pod spec with `restart_policy` and `worker`.
fn job_with(restart_policy: Option<&str>, worker: Value) -> Value {
    let mut object = job(
        json!({"prestop-injector.io/cleanup": "/data"}),
        worker,
        json!([{"name": "data", "hostPath": {"path": "/scratch/run", "type": "DirectoryOrCreate"}}]),
    );
    let spec = &mut object["spec"]["template"]["spec"];
    match restart_policy {
        Some(policy) => spec["restartPolicy"] = json!(policy),
        None => {
            spec.as_object_mut().unwrap().remove("restartPolicy");
        }
    }
    object
}

/// The same pod spec as a bare Pod.
fn bare_pod(restart_policy: Option<&str>) -> Value {
    let job = job_with(restart_policy, worker());
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "one", "annotations": {"prestop-injector.io/cleanup": "/data"}},
        "spec": job["spec"]["template"]["spec"]})
}

fn spec_of(object: &Value) -> &Value {
    object
        .pointer("/spec/template/spec")
        .unwrap_or_else(|| &object["spec"])
}

fn sidecar_cleans(object: &Value) -> Vec<String> {
    let init = spec_of(object)["initContainers"].as_array().cloned();
    init.unwrap_or_default()
        .iter()
        .find_map(|c| {
            let argv: Vec<String> = serde_json::from_value(c["command"].clone()).ok()?;
            sidecar_targets(&argv)
        })
        .unwrap_or_default()
}

/// No exec cleanup in the worker, no sidecar, and one short warning naming `policy`.
fn assert_not_cleaned(object: Value, config: &Config, policy: &str) {
    let outcome = mutate_with(Endpoint::Mutate, config, object);
    assert_eq!(outcome.decision.denial, None);
    let worker = &spec_of(&outcome.patched)["containers"][0];
    assert!(pre_stop_argv(worker).is_empty(), "{worker}");
    assert!(sidecar_cleans(&outcome.patched).is_empty());
    let named: Vec<&String> = outcome
        .decision
        .warnings
        .iter()
        .filter(|w| w.contains(policy))
        .collect();
    assert_eq!(named.len(), 1, "{policy}: {:?}", outcome.decision.warnings);
    assert!(
        named[0].chars().count() <= MAX_WARNING_CHARS,
        "{}",
        named[0]
    );
}

#[test]
fn liveness_restart_keeps_the_data_of_an_on_failure_job() {
    assert_not_cleaned(
        job_with(Some("OnFailure"), worker()),
        &no_sidecar(),
        "restartPolicy OnFailure",
    );
}

#[test]
fn liveness_restart_keeps_the_data_of_a_bare_pod() {
    // Always, and unset: the kubelet's default branch restarts.
    assert_not_cleaned(
        bare_pod(Some("Always")),
        &no_sidecar(),
        "restartPolicy Always",
    );
    assert_not_cleaned(bare_pod(None), &no_sidecar(), "restartPolicy Always");
}

#[test]
fn liveness_restart_keeps_the_data_with_a_container_restart_policy() {
    for policy in ["Always", "OnFailure"] {
        let mut restarting = worker();
        restarting["restartPolicy"] = json!(policy);
        assert_not_cleaned(
            job_with(Some("Never"), restarting),
            &no_sidecar(),
            &format!("container restartPolicy {policy}"),
        );
    }
    let mut rules = worker();
    rules["restartPolicy"] = json!("Never");
    rules["restartPolicyRules"] =
        json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
    assert_not_cleaned(
        job_with(Some("Never"), rules),
        &no_sidecar(),
        "restartPolicyRules of \"worker\"",
    );
}

#[test]
fn liveness_restart_keeps_the_data_with_resize_restart_container() {
    let mut resized = worker();
    resized["resizePolicy"] =
        json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    assert_not_cleaned(
        job_with(Some("Never"), resized),
        &no_sidecar(),
        "resizePolicy RestartContainer",
    );
}

/// KEP-5532: a rule on any container restarts every container in place, the sidecar
/// too, which would clean on that SIGTERM: no cleanup at all, even where sidecars run.
#[test]
fn liveness_restart_keeps_the_data_when_any_container_restarts_the_pod() {
    let mut object = job_with(Some("Never"), worker());
    object["spec"]["template"]["spec"]["initContainers"] = json!([{"name": "watcher",
        "image": "w", "restartPolicy": "Always", "restartPolicyRules": [{"action": "RestartAllContainers",
        "exitCodes": {"operator": "In", "values": [88]}}]}]);
    assert_not_cleaned(
        object.clone(),
        &no_sidecar(),
        "restartPolicyRules of \"watcher\"",
    );
    assert_not_cleaned(object, &with_sidecar(), "restartPolicyRules of \"watcher\"");
}

#[test]
fn liveness_restart_keeps_the_data_never_job_gets_the_hook() {
    let outcome = mutate_with(
        Endpoint::Mutate,
        &no_sidecar(),
        job_with(Some("Never"), worker()),
    );
    assert_eq!(outcome.decision.denial, None);
    assert_eq!(cleanup_targets(container(&outcome.patched, 0)), ["/data"]);
    assert!(
        !outcome.warnings().contains("restartPolicy"),
        "{}",
        outcome.warnings()
    );
}

/// Where the cluster runs native sidecars, the sidecar cleans the restarting container's
/// directories when the pod ends — and the container itself gets no exec cleanup.
#[test]
fn liveness_restart_keeps_the_data_the_sidecar_cleans_instead() {
    for object in [
        job_with(Some("OnFailure"), worker()),
        bare_pod(Some("Always")),
        bare_pod(None),
    ] {
        let outcome = mutate_with(Endpoint::Mutate, &with_sidecar(), object);
        assert_eq!(outcome.decision.denial, None);
        let worker = &spec_of(&outcome.patched)["containers"][0];
        assert!(pre_stop_argv(worker).is_empty(), "{worker}");
        assert_eq!(sidecar_cleans(&outcome.patched), ["/data"]);
    }
}

/// The Pod-level pass decides the same from the same spec: a Pod made from the injected
/// template of an OnFailure Job gets no patch, with or without sidecars.
#[test]
fn liveness_restart_keeps_the_data_in_the_pods_of_the_job() {
    for config in [no_sidecar(), with_sidecar()] {
        let job = mutate_with(
            Endpoint::Mutate,
            &config,
            job_with(Some("OnFailure"), worker()),
        )
        .patched;
        let template = &job["spec"]["template"];
        let mut metadata = template["metadata"].clone();
        metadata["generateName"] = json!("job-worker-");
        metadata["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
            "name": "job-worker", "uid": "u", "controller": true}]);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": template["spec"]});
        for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
            let decision = decide(&request(Operation::Create, pod.clone()), endpoint, &config);
            assert_eq!(decision.denial, None);
            assert_eq!(decision.patch, None, "{endpoint:?}");
        }
    }
}

/// On `/mutate/auto`, without any annotation, an OnFailure Job and a bare Pod with a
/// per-pod directory are no longer given an exec cleanup.
#[test]
fn liveness_restart_keeps_the_data_on_mutate_auto() {
    let mut private = worker();
    private["volumeMounts"][0]["subPathExpr"] = json!("$(POD_UID)");
    private["env"] =
        json!([{"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]);
    let mut on_failure = job_with(Some("OnFailure"), private.clone());
    on_failure["metadata"]["annotations"] = json!({});
    let mut pod = bare_pod(Some("Always"));
    pod["metadata"]["annotations"] = json!({});
    pod["spec"]["containers"][0] = private.clone();
    let mut never = job_with(Some("Never"), private);
    never["metadata"]["annotations"] = json!({});
    for (object, cleaned) in [(on_failure, false), (pod, false), (never, true)] {
        let outcome = mutate_with(Endpoint::MutateAuto, &no_sidecar(), object.clone());
        let worker = &spec_of(&outcome.patched)["containers"][0];
        assert_eq!(!pre_stop_argv(worker).is_empty(), cleaned, "{object}");
    }
}
