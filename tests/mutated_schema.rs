//! What we patch in must still be a valid Kubernetes object: every mutated example —
//! exec hooks, the native cleanup sidecar (`restartPolicy: Always` on an init container),
//! TTL — validates against the Kubernetes schemas in strict mode, for the oldest version
//! we support and the newest the validator ships.

#[path = "support/deploy.rs"]
mod common;
mod core_support;

use core_support::{host_path_volume, job, mutate, scratch_container};
use serde_json::{json, Value};

fn mutated(object: Value) -> Value {
    let outcome = mutate(object);
    assert!(
        outcome.decision.patch.is_some(),
        "the example must be patched"
    );
    outcome.patched
}

fn sidecar_job() -> Value {
    let mut container = scratch_container();
    container["securityContext"] = json!({"runAsUser": 1000, "runAsGroup": 3000});
    job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar",
               "prestop-injector.io/ttl-after-finished": "10m"}),
        container,
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    )
}

fn example(name: &str) -> Value {
    let text = std::fs::read_to_string(common::repo_root().join("examples").join(name)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

#[test]
fn mutated_objects_validate_strictly() {
    let Some(validator) = common::kubernetes_validate() else {
        return;
    };
    let http_get = {
        let mut object = sidecar_job();
        object["metadata"]["annotations"] = json!({"prestop-injector.io/cleanup": "/scratch"});
        object["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
            json!({"preStop": {"httpGet": {"path": "/quit", "port": 8080}}});
        object
    };
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "annotations": {"prestop-injector.io/cleanup": "auto",
            "prestop-injector.io/mode": "sidecar", "prestop-injector.io/ttl-after-finished": "1h"}},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": sidecar_job()["spec"]["template"]}}}});
    let objects = vec![
        mutated(example("job-worker.yaml")),
        mutated(example("deployment-sleep70.yaml")),
        mutated(sidecar_job()),
        mutated(http_get),
        mutated(cron),
    ];
    let init = &objects[2]["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(init["restartPolicy"], "Always", "{init}");
    common::validate(&validator, "mutated", &objects);
}
