//! Issue 17, class 7: `auto` without an annotation on shared directories
//! (docs/DESIGN.md#only-provably-private-directories-without-an-annotation), and the admission half
//! of class 6: a PV inside the target.
//!
//! On `/mutate/auto` without a `cleanup` annotation only provably private, per-pod
//! directories are cleaned: a mount whose `subPathExpr` references an env var of the
//! container defined from `metadata.uid`. A DaemonSet's cache that a namespace-opted-in
//! Job also mounts, the overlapping runs of a CronJob, a bare Pod's fixed hostPath: each
//! needs the annotation, and gets a warning naming the fix. And a pod with a volume whose
//! host directory the webhook cannot see (PVC, ephemeral, CSI) gets no `auto` hostPath
//! target at all: that directory may lie inside it.

mod core_support;

use core_support::*;
use prestop_injector::admission::Operation;
use prestop_injector::config::Config;
use prestop_injector::mutation::{decide, Endpoint, MAX_WARNING_CHARS};
use serde_json::{json, Value};

fn config() -> Config {
    Config::from_yaml("allowedHostPathPrefixes: [/scratch, /test-package]\n").unwrap()
}

const POD_UID: &str = "$(POD_UID)";

/// A container writing to `/cache` (hostPath `/scratch/cache`), its mount given `extra`,
/// with `env`.
fn cacher(extra: Value, env: Value) -> Value {
    let mut mount = json!({"name": "cache", "mountPath": "/cache"});
    for (key, value) in extra.as_object().unwrap() {
        mount[key] = value.clone();
    }
    json!({"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", "work"],
        "securityContext": {"runAsUser": 1000}, "env": env, "volumeMounts": [mount]})
}

fn uid_env(name: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}})
}

fn private_cacher() -> Value {
    cacher(
        json!({"subPathExpr": format!("runs/{POD_UID}")}),
        json!([uid_env("POD_UID")]),
    )
}

fn cache_volume() -> Value {
    json!({"name": "cache", "hostPath": {"path": "/scratch/cache", "type": "DirectoryOrCreate"}})
}

/// A Job (restartPolicy Never) with `containers` and `volumes`, annotated `annotations`.
fn job_of(annotations: Value, containers: Value, volumes: Value) -> Value {
    let mut object = job(annotations, json!({}), volumes);
    object["spec"]["template"]["spec"]["containers"] = containers;
    object
}

fn auto(object: Value) -> (Value, Vec<String>) {
    let outcome = mutate_with(Endpoint::MutateAuto, &config(), object);
    assert_eq!(outcome.decision.denial, None);
    for warning in &outcome.decision.warnings {
        assert!(warning.chars().count() <= MAX_WARNING_CHARS, "{warning}");
    }
    (outcome.patched, outcome.decision.warnings)
}

fn cleaned(spec: &Value) -> Vec<String> {
    cleanup_targets(&spec["containers"][0])
}

#[test]
fn auto_cleans_only_private_directories_not_a_fixed_host_path() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fixed"},
        "spec": {"restartPolicy": "Never", "containers": [cacher(json!({}), json!([]))],
                 "volumes": [cache_volume()]}});
    let (patched, warnings) = auto(pod);
    assert!(cleaned(&patched["spec"]).is_empty());
    let fix: Vec<&String> = warnings.iter().filter(|w| w.contains(POD_UID)).collect();
    assert_eq!(fix.len(), 1, "{warnings:?}");
    assert!(
        fix[0].contains("/cache") && fix[0].contains("annotate cleanup"),
        "{}",
        fix[0]
    );
}

/// The Job of a namespace opted in to `/mutate/auto` mounts the cache a DaemonSet
/// fills: implicitly nothing; with the annotation, as asked.
#[test]
fn auto_cleans_only_private_directories_not_a_daemonsets_cache() {
    let containers = json!([cacher(json!({}), json!([]))]);
    let (patched, _) = auto(job_of(
        json!({}),
        containers.clone(),
        json!([cache_volume()]),
    ));
    assert!(cleaned(template_spec(&patched)).is_empty());
    let asked = json!({"prestop-injector.io/cleanup": "auto"});
    let (patched, _) = auto(job_of(asked, containers, json!([cache_volume()])));
    assert_eq!(cleaned(template_spec(&patched)), ["/cache"]);
}

/// Two runs of one CronJob (`concurrencyPolicy: Allow`, the default) share a fixed
/// directory: the first to stop would empty the second's.
#[test]
fn auto_cleans_only_private_directories_not_a_cronjobs_overlapping_runs() {
    let job = job_of(
        json!({}),
        json!([cacher(json!({}), json!([]))]),
        json!([cache_volume()]),
    );
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "@hourly", "jobTemplate": {"spec": job["spec"]}}});
    let (patched, warnings) = auto(cron);
    let spec = patched
        .pointer("/spec/jobTemplate/spec/template/spec")
        .unwrap();
    assert!(cleaned(spec).is_empty());
    assert!(warnings.iter().any(|w| w.contains(POD_UID)), "{warnings:?}");
}

/// Only a directory named by the pod's UID is private; the variable must be the
/// container's own, defined from `metadata.uid` by its last definition.
#[test]
fn auto_cleans_only_private_directories_named_by_the_pod_uid() {
    let name_env =
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}});
    let cases = [
        (
            json!({"subPathExpr": "runs/$(POD_UID)"}),
            json!([uid_env("POD_UID")]),
            true,
        ),
        (
            json!({"subPathExpr": "$(ID)/tmp"}),
            json!([uid_env("ID")]),
            true,
        ),
        // A StatefulSet's web-0 comes back under its name; two namespaces may share one.
        (
            json!({"subPathExpr": "$(POD_NAME)"}),
            json!([name_env]),
            false,
        ),
        (
            json!({"subPathExpr": "$(POD_UID)"}),
            json!([uid_env("POD_UID"), {"name": "POD_UID", "value": "same"}]),
            false,
        ),
        (
            json!({"subPathExpr": "$$(POD_UID)"}),
            json!([uid_env("POD_UID")]),
            false,
        ),
        (json!({"subPathExpr": "$(POD_UID)"}), json!([]), false),
        (
            json!({"subPath": "$(POD_UID)"}),
            json!([uid_env("POD_UID")]),
            false,
        ),
        (
            json!({"subPathExpr": "$(NS)"}),
            json!([{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]),
            false,
        ),
    ];
    for (mount, env, private) in cases {
        let containers = json!([cacher(mount.clone(), env.clone())]);
        let (patched, warnings) = auto(job_of(json!({}), containers, json!([cache_volume()])));
        let expected: &[&str] = if private { &["/cache"] } else { &[] };
        assert_eq!(cleaned(template_spec(&patched)), expected, "{mount} {env}");
        // Refused by this rule (the fix named) or an earlier one (a shadowed variable
        // leaves the directory unknown): either way with a warning.
        assert_eq!(
            warnings.iter().any(|w| w.contains("/cache not cleaned")),
            !private,
            "{mount} {env}: {warnings:?}"
        );
    }
}

/// Per-pod directories are private whatever the kind: a Deployment's pods each get their
/// own (and, restarted in place, the sidecar cleans them when the pod ends).
#[test]
fn auto_cleans_only_private_directories_of_any_kind() {
    let mut template = job_of(
        json!({}),
        json!([private_cacher()]),
        json!([cache_volume()]),
    );
    template["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "template": template["spec"]["template"]}});
    let (patched, warnings) = auto(deployment);
    let init = template_spec(&patched)["initContainers"].to_string();
    assert!(init.contains("/cache"), "{init} {warnings:?}");
}

/// The record tells the pods of a workload whether its `auto` was written: the Pod-level
/// pass of an implicit `auto` keeps only private directories too, and gets no patch.
#[test]
fn auto_cleans_only_private_directories_in_the_pods_too() {
    let containers = json!([{"name": "app", "image": "busybox:1.36", "env": [uid_env("POD_UID")],
        "volumeMounts": [{"name": "cache", "mountPath": "/cache", "subPathExpr": "$(POD_UID)"},
                         {"name": "shared", "mountPath": "/shared"}]}]);
    let volumes = json!([cache_volume(),
        {"name": "shared", "hostPath": {"path": "/scratch/shared", "type": "Directory"}}]);
    for (annotations, expected) in [
        (json!({}), vec!["/cache"]),
        (
            json!({"prestop-injector.io/cleanup": "auto"}),
            vec!["/cache", "/shared"],
        ),
    ] {
        let (job, _) = auto(job_of(
            annotations.clone(),
            containers.clone(),
            volumes.clone(),
        ));
        assert_eq!(cleaned(template_spec(&job)), expected, "{annotations}");
        let template = &job["spec"]["template"];
        let mut metadata = template["metadata"].clone();
        metadata["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
            "name": "job-worker", "uid": "u", "controller": true}]);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]});
        for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
            let decision = decide(
                &request(Operation::Create, pod.clone()),
                endpoint,
                &config(),
            );
            assert_eq!(decision.patch, None, "{annotations} {endpoint:?}");
        }
        // The same record with the marker dropped cleans less, never more.
        let mut stripped = pod.clone();
        let key = "prestop-injector.io/settings";
        let record = stripped["metadata"]["annotations"][key]
            .as_str()
            .unwrap()
            .to_owned();
        let mut record: Value = serde_json::from_str(&record).unwrap();
        record.as_object_mut().unwrap().remove("explicit");
        stripped["metadata"]["annotations"][key] = json!(record.to_string());
        let outcome = mutate_with(Endpoint::Mutate, &config(), stripped);
        assert_eq!(
            cleaned(&outcome.patched["spec"]),
            ["/cache"],
            "{annotations}"
        );
    }
}

/// Issue 17 class 6, at admission: with a PVC, ephemeral or CSI volume in the pod — in
/// any container, read-only or not — `auto` (implicit or written) cleans no hostPath:
/// the PV's directory may lie inside it, and the cleaning container's own run-time
/// checks never see another container's mounts. An explicit path still works.
fn pv_inside_the_target_admission(source: &str, volume: Value) {
    let reader = json!({"name": "reader", "image": "busybox:1.36",
        "volumeMounts": [{"name": "pv", "mountPath": "/pv", "readOnly": true}]});
    let containers = json!([private_cacher(), reader]);
    let mut pv = volume;
    pv["name"] = json!("pv");
    let volumes = json!([cache_volume(), pv]);
    for annotations in [json!({}), json!({"prestop-injector.io/cleanup": "auto"})] {
        let (patched, warnings) = auto(job_of(
            annotations.clone(),
            containers.clone(),
            volumes.clone(),
        ));
        assert!(
            cleaned(template_spec(&patched)).is_empty(),
            "{source} {annotations}"
        );
        let named: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains("\"pv\"") && w.contains(source) && w.contains("cleanup"))
            .collect();
        assert_eq!(named.len(), 1, "{source} {annotations}: {warnings:?}");
    }
    let explicit = json!({"prestop-injector.io/cleanup": "/cache"});
    let (patched, _) = auto(job_of(explicit, containers, volumes));
    assert_eq!(cleaned(template_spec(&patched)), ["/cache"], "{source}");
}

#[test]
fn pv_inside_the_target_pvc_admission() {
    pv_inside_the_target_admission(
        "persistentVolumeClaim",
        json!({"persistentVolumeClaim": {"claimName": "local-data", "readOnly": true}}),
    );
}

#[test]
fn pv_inside_the_target_ephemeral_admission() {
    pv_inside_the_target_admission(
        "ephemeral",
        json!({"ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
            "storageClassName": "local-path", "resources": {"requests": {"storage": "1Gi"}}}}}}),
    );
}

#[test]
fn pv_inside_the_target_csi_admission() {
    pv_inside_the_target_admission(
        "csi",
        json!({"csi": {"driver": "hostpath.csi.k8s.io", "readOnly": true}}),
    );
}

/// Volumes whose place on the node is the kubelet's own (below `/var/lib/kubelet`, a
/// protected tree) change nothing.
#[test]
fn pv_inside_the_target_other_volumes_admission() {
    let containers = json!([private_cacher()]);
    let volumes = json!([cache_volume(), {"name": "tmp", "emptyDir": {}},
        {"name": "cfg", "configMap": {"name": "c"}}, {"name": "token", "projected": {"sources": []}}]);
    let (patched, _) = auto(job_of(json!({}), containers, volumes));
    assert_eq!(cleaned(template_spec(&patched)), ["/cache"]);
}

/// Issue 38, class 9: without the node agent a per-pod directory is still cleaned (it is
/// the pod's own by its name), and the warning says what that gives up: nobody asks the
/// node who else reads a directory above it. With the agent, no such warning.
#[test]
fn class_9_without_the_agent_a_per_pod_directory_is_cleaned_and_what_is_given_up_said() {
    let asked = json!({"prestop-injector.io/cleanup": "/cache"});
    let object = job_of(asked, json!([private_cacher()]), json!([cache_volume()]));
    let (patched, warnings) = auto(object.clone());
    assert_eq!(cleaned(template_spec(&patched)), ["/cache"]);
    let given_up = "container \"app\": /cache is cleaned without the node agent (config \
                    nodeAgent): a reader on the node of a directory above it is not looked for";
    assert!(warnings.iter().any(|w| w == given_up), "{warnings:?}");

    let with_agent = Config::from_yaml(
        "allowedHostPathPrefixes: [/scratch, /test-package]\n\
         nodeAgent: {hostDirectory: /var/run/prestop-injector}\n",
    )
    .unwrap();
    let outcome = mutate_with(Endpoint::MutateAuto, &with_agent, object);
    assert_eq!(cleaned(template_spec(&outcome.patched)), ["/cache"]);
    assert!(
        !outcome.warnings().contains("without the node agent"),
        "{}",
        outcome.warnings()
    );
}
