//! The seal (docs/REAPER.md#the-seal): the reaper empties only what the webhook itself
//! injected. Pods are made as the cluster makes them: the webhook's patch applied with
//! json-patch to a Job, the Pod built from the template as the job controller does and
//! defaulted as the API server does, read back through k8s-openapi's types as the
//! reaper's watch reads it. The forgeries are what a user who can create Pods can write.

mod core_support;

use core_support::{
    host_path_volume, job, mutate_with, pod_facts, request, scratch_container, seal_spec,
};
use prestop_injector::admission::Operation;
use prestop_injector::config::Config;
use prestop_injector::mutation::seal::SEAL;
use prestop_injector::mutation::{decide, Endpoint};
use prestop_injector::reaper::derive::PodFacts;
use prestop_injector::seal_keys::SealKeys;
use serde_json::{json, Value};

const KEY: &str = "6b6579206f6620746865207765626869f66b206f6620746869732074657374";
const OLD_KEY: &str = "b2xkIGtleSBvZiB0aGUgd2ViaG9vaywgYmVmb3JlIHJvdGF0aW9uISE=";
const STATUS: &str = "prestop-injector.io/status";

fn config_with_keys(keys: &str) -> Config {
    let mut config =
        Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]\nkubernetesVersion: \"1.33\"\n")
            .unwrap();
    if !keys.is_empty() {
        config.seal = SealKeys::parse(keys).unwrap();
    }
    config
}

/// The webhook and the reaper of one install: the same key file.
fn config() -> Config {
    config_with_keys(&format!("{KEY}00\n"))
}

/// A Job in namespace `default` (the request's) whose cleanup the webhook injects.
fn injected_job(config: &Config, annotations: Value, container: Value, volumes: Value) -> Value {
    let outcome = mutate_with(
        Endpoint::Mutate,
        config,
        job(annotations, container, volumes),
    );
    assert!(outcome.decision.denial.is_none(), "{:?}", outcome.decision);
    outcome.patched
}

fn scratch_job(mode: &str) -> Value {
    injected_job(
        &config(),
        json!({"prestop-injector.io/cleanup": "/scratch", "prestop-injector.io/mode": mode}),
        scratch_container(),
        json!([host_path_volume("scratch", "/mnt/scratch/job")]),
    )
}

/// The Pod the job controller makes from the template, as the API server stores it: its
/// own metadata, and every default the API server and its admission plugins add.
fn pod_of(job: &Value, name: &str) -> Value {
    let template = &job["spec"]["template"];
    let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
    metadata["name"] = json!(name);
    metadata["namespace"] = json!("default");
    metadata["uid"] = json!(format!("uid-{name}"));
    metadata["labels"] = json!({"batch.kubernetes.io/job-name": "job-worker",
                                "controller-uid": "c-1", "job-name": "job-worker"});
    metadata["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": "job-worker", "uid": "c-1", "controller": true, "blockOwnerDeletion": true}]);
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!("node-a");
    spec["serviceAccountName"] = json!("default");
    spec["dnsPolicy"] = json!("ClusterFirst");
    spec["schedulerName"] = json!("default-scheduler");
    spec["securityContext"] = json!({});
    spec["enableServiceLinks"] = json!(true);
    spec["preemptionPolicy"] = json!("PreemptLowerPriority");
    spec["priority"] = json!(0);
    spec["tolerations"] = json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]);
    let token = json!({"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}});
    spec["volumes"].as_array_mut().unwrap().push(token);
    for volume in spec["volumes"].as_array_mut().unwrap() {
        if let Some(host_path) = volume.get_mut("hostPath") {
            host_path
                .as_object_mut()
                .unwrap()
                .entry("type")
                .or_insert(json!(""));
        }
    }
    for list in ["initContainers", "containers"] {
        for container in spec[list].as_array_mut().into_iter().flatten() {
            let c = container.as_object_mut().unwrap();
            c.entry("terminationMessagePath")
                .or_insert(json!("/dev/termination-log"));
            c.entry("terminationMessagePolicy").or_insert(json!("File"));
            c.entry("imagePullPolicy").or_insert(json!("IfNotPresent"));
            c.entry("resources").or_insert(json!({}));
            let mounts = c.entry("volumeMounts").or_insert(json!([]));
            mounts
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "kube-api-access-x7k2p",
                "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}));
            for env in c
                .get_mut("env")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(field_ref) = env.pointer_mut("/valueFrom/fieldRef") {
                    field_ref["apiVersion"] = json!("v1");
                }
            }
        }
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                     "status": {"phase": "Running"}});
    // As the reaper's watch hands it over: through k8s-openapi's types and back.
    let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod).unwrap();
    serde_json::to_value(typed).unwrap()
}

fn facts_under(pod: &Value, config: &Config) -> PodFacts {
    pod_facts(pod, config).expect("a pod with a uid")
}

fn facts(pod: &Value) -> PodFacts {
    facts_under(pod, &config())
}

/// Refused with `reason` and nothing cleanable; the log line names the pod.
fn assert_refused(facts: &PodFacts, reason: &str, case: &str) {
    assert!(facts.cleanable.is_empty(), "{case}: {:?}", facts.cleanable);
    assert!(!facts.refused.is_empty(), "{case}: nothing reported");
    for refused in &facts.refused {
        assert_eq!(refused.reason, reason, "{case}: {}", refused.message);
        assert!(
            refused
                .message
                .contains(&format!("of pod {}/{}", facts.namespace, facts.name)),
            "{case}: {}",
            refused.message
        );
    }
}

fn set_seal(pod: &mut Value, seal: Option<String>) {
    let annotations = pod["metadata"]["annotations"].as_object_mut().unwrap();
    match seal {
        Some(seal) => annotations.insert(SEAL.to_owned(), json!(seal)),
        None => annotations.remove(SEAL),
    };
}

/// What the webhook injects, sealed, is cleanable: the baseline every refusal below is
/// measured against (so none of them passes for a reason of its own).
#[test]
fn the_webhooks_sealed_pods_are_cleanable() {
    for mode in ["exec", "sidecar"] {
        let pod = pod_of(&scratch_job(mode), "job-worker-abcde");
        let facts = facts(&pod);
        assert_eq!(facts.cleanable, ["/mnt/scratch/job"], "{mode}");
        assert!(facts.refused.is_empty(), "{mode}: {:?}", facts.refused);
    }
}

#[test]
fn forged_record_is_refused() {
    // A hand-written Pod: our status annotation, our program's exact argv with a correct
    // --host, a hostPath below the allowed prefix. On an unserved namespace, or on one
    // the webhook serves but with nothing to seal it, it carries no seal.
    let hook = json!([
        "/.prestop-injector/prestop-clean",
        "hook",
        "--target",
        "/data",
        "--host",
        "/mnt/scratch/victim"
    ]);
    let forged = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "forged", "namespace": "unserved", "uid": "uid-forged",
                     "annotations": {STATUS: "{\"version\":1,\"containers\":[\"app\"],\"grace\":40}"}},
        "spec": {"nodeName": "node-a",
                 "volumes": [host_path_volume("s", "/mnt/scratch/victim")],
                 "containers": [{"name": "app", "image": "busybox",
                                 "volumeMounts": [{"name": "s", "mountPath": "/data"}],
                                 "lifecycle": {"preStop": {"exec": {"command": hook}}}}]}
    });
    assert_refused(&facts(&forged), "unsealed", "no seal");
    let mut pod = forged.clone();
    set_seal(&mut pod, Some("sealed-by-me".into()));
    assert_refused(&facts(&pod), "unsealed", "not the v1 format");
    // A seal of the right shape that no key of ours made: a made-up tag, a tag from
    // another install's key, a tag copied from a real pod with other mounts.
    let other_install = config_with_keys(OLD_KEY);
    let spec = &forged["spec"];
    let real = pod_of(&scratch_job("exec"), "job-worker-abcde");
    for (case, tag) in [
        ("made up", format!("v1:{}", "A".repeat(44))),
        (
            "another install's key",
            seal_spec(&other_install.seal, "unserved", spec).unwrap(),
        ),
        (
            "copied from a real pod",
            real["metadata"]["annotations"][SEAL]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
    ] {
        let mut pod = forged.clone();
        set_seal(&mut pod, Some(tag));
        assert_refused(&facts(&pod), "seal_mismatch", case);
    }
    // The control: the same pod sealed with the install's key is cleanable.
    let mut pod = forged.clone();
    set_seal(&mut pod, seal_spec(&config().seal, "unserved", spec));
    assert_eq!(facts(&pod).cleanable, ["/mnt/scratch/victim"]);
    // A reaper without a key proves nothing: even the webhook's own pod is refused.
    assert_refused(
        &facts_under(&real, &config_with_keys("")),
        "unsealed",
        "no key",
    );
}

#[test]
fn record_copied_to_another_namespace_is_refused() {
    for mode in ["exec", "sidecar"] {
        let real = pod_of(&scratch_job(mode), "job-worker-abcde");
        assert_eq!(facts(&real).cleanable, ["/mnt/scratch/job"], "{mode}");
        // The whole pod, seal and all, created in another namespace (one the webhook
        // does not serve, or where its owner could not have been injected so).
        let mut copy = real.clone();
        copy["metadata"]["namespace"] = json!("tenant-b");
        copy["metadata"]["uid"] = json!("uid-copy");
        assert_refused(&facts(&copy), "seal_mismatch", mode);
    }
}

#[test]
fn seal_survives_the_api_servers_defaults() {
    // pod_of adds the service-account token volume and its mount to every container, the
    // container defaults, `hostPath.type: ""`, labels, owner, tolerations; and reads the
    // pod back through k8s-openapi. A per-pod subPathExpr and its env come along.
    let mut container = scratch_container();
    container["volumeMounts"][0]["subPathExpr"] = json!("$(POD_NAME)");
    container["env"] =
        json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    for mode in ["exec", "sidecar"] {
        let mut volume = host_path_volume("scratch", "/mnt/scratch/jobs");
        volume["hostPath"].as_object_mut().unwrap().remove("type");
        let job = injected_job(
            &config(),
            json!({"prestop-injector.io/cleanup": "/scratch", "prestop-injector.io/mode": mode}),
            container.clone(),
            json!([volume]),
        );
        for name in ["job-worker-a", "job-worker-b"] {
            let pod = pod_of(&job, name);
            assert_eq!(
                pod["spec"]["volumes"][0]["hostPath"]["type"], "",
                "defaulted"
            );
            let facts = facts(&pod);
            assert!(facts.refused.is_empty(), "{mode}: {:?}", facts.refused);
            assert_eq!(
                facts.cleanable,
                [format!("/mnt/scratch/jobs/{name}")],
                "{mode}"
            );
        }
        // The Pod passes through the webhook too (decided from the template's record):
        // it is sealed again to the same value, so nothing of its metadata is patched.
        let pod = pod_of(&job, "job-worker-a");
        let decision = decide(
            &request(Operation::Create, pod.clone()),
            Endpoint::Mutate,
            &config(),
        );
        let touched: Vec<String> = decision
            .patch
            .iter()
            .flat_map(|p| p.0.iter())
            .map(|op| op.path().to_string())
            .collect();
        assert!(
            touched.iter().all(|p| !p.starts_with("/metadata")),
            "{mode}: {touched:?}"
        );
    }
}

/// One change an attacker makes to a sealed pod.
type Edit = Box<dyn Fn(&mut Value)>;

#[test]
fn changed_volume_breaks_the_seal() {
    let real = pod_of(&scratch_job("exec"), "job-worker-abcde");
    assert_eq!(facts(&real).cleanable, ["/mnt/scratch/job"]);
    let scratch_mount = "/spec/containers/0/volumeMounts/0";
    let edits: Vec<(&str, Edit)> = vec![
        (
            "another hostPath below the prefix",
            Box::new(|pod| {
                pod["spec"]["volumes"][0]["hostPath"]["path"] = json!("/mnt/scratch/victim");
            }),
        ),
        (
            "the hostPath's type",
            Box::new(|pod| {
                pod["spec"]["volumes"][0]["hostPath"]["type"] = json!("Directory");
            }),
        ),
        (
            "the volume renamed, the mount following it",
            Box::new(|pod| {
                pod["spec"]["volumes"][0]["name"] = json!("other");
                pod.pointer_mut(scratch_mount).unwrap()["name"] = json!("other");
            }),
        ),
        (
            "a subPath added",
            Box::new(|pod| {
                pod.pointer_mut(scratch_mount).unwrap()["subPath"] = json!("victim");
            }),
        ),
        (
            "a subPathExpr added",
            Box::new(|pod| {
                pod.pointer_mut(scratch_mount).unwrap()["subPathExpr"] = json!("$(VICTIM)");
                pod["spec"]["containers"][0]["env"] =
                    json!([{"name": "VICTIM", "value": "victim"}]);
            }),
        ),
        (
            "another volume mounted at the target's path, last",
            Box::new(|pod| {
                pod["spec"]["volumes"]
                    .as_array_mut()
                    .unwrap()
                    .push(host_path_volume("v", "/mnt/scratch/victim"));
                pod["spec"]["containers"][0]["volumeMounts"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "v", "mountPath": "/scratch"}));
            }),
        ),
        (
            "the mount made read-only",
            Box::new(|pod| {
                pod.pointer_mut(scratch_mount).unwrap()["readOnly"] = json!(true);
            }),
        ),
        (
            "the hook's argv",
            Box::new(|pod| {
                let argv = pod
                    .pointer_mut("/spec/containers/0/lifecycle/preStop/exec/command")
                    .unwrap();
                let argv = argv.as_array_mut().unwrap();
                let at = argv.iter().position(|a| a == "--host").unwrap() + 1;
                argv[at] = json!("/mnt/scratch/victim");
            }),
        ),
        (
            "the container renamed",
            Box::new(|pod| {
                pod["spec"]["containers"][0]["name"] = json!("other");
            }),
        ),
        (
            "a second cleanup container",
            Box::new(|pod| {
                let copy = pod["spec"]["containers"][0].clone();
                pod["spec"]["containers"].as_array_mut().unwrap().push(copy);
                pod["spec"]["containers"][1]["name"] = json!("second");
            }),
        ),
    ];
    for (case, edit) in edits {
        let mut pod = real.clone();
        edit(&mut pod);
        assert_refused(&facts(&pod), "seal_mismatch", case);
    }
    // Mounted first instead, the sealed mount stays the target's, and the rule refuses
    // the two volumes at one path.
    let mut pod = real.clone();
    pod["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(host_path_volume("v", "/mnt/scratch/victim"));
    pod["spec"]["containers"][0]["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"name": "v", "mountPath": "/scratch"}));
    assert_refused(
        &facts(&pod),
        "rule",
        "another volume at the target's path, first",
    );
    // A per-pod subPathExpr's env is sealed too: pointing POD_NAME at a neighbour's
    // directory breaks it.
    let mut container = scratch_container();
    container["volumeMounts"][0]["subPathExpr"] = json!("$(POD_NAME)");
    container["env"] =
        json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    let job = injected_job(
        &config(),
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        container,
        json!([host_path_volume("scratch", "/mnt/scratch/jobs")]),
    );
    let mut pod = pod_of(&job, "job-worker-a");
    pod["spec"]["containers"][0]["env"] = json!([{"name": "POD_NAME", "value": "job-worker-b"}]);
    assert_refused(&facts(&pod), "seal_mismatch", "env of the subPathExpr");
    // And whoever holds the key still gets only the directory the argv names: a pod
    // sealed over volumes that contradict its --host is refused.
    let mut pod = real.clone();
    pod["spec"]["volumes"][0]["hostPath"]["path"] = json!("/mnt/scratch/victim");
    let spec = pod["spec"].clone();
    set_seal(&mut pod, seal_spec(&config().seal, "default", &spec));
    let facts = facts(&pod);
    assert_refused(&facts, "host_mismatch", "--host against the volumes");
    assert!(
        facts.refused[0].message.contains("/mnt/scratch/victim")
            && facts.refused[0].message.contains("/mnt/scratch/job"),
        "names both paths: {}",
        facts.refused[0].message
    );
}

#[test]
fn inject_false_is_honoured_by_the_reaper() {
    let real = pod_of(&scratch_job("exec"), "job-worker-abcde");
    assert_eq!(facts(&real).cleanable, ["/mnt/scratch/job"]);
    for (key, value) in [
        ("prestop-injector.io/inject", "false"),
        ("prestop-injector.io/inject", " false "),
        // Unreadable: the webhook would refuse it; the reaper does not guess.
        ("prestop-injector.io/inject", "no"),
        (
            "prestop-injector.io/settings",
            r#"{"version":1,"inject":"false"}"#,
        ),
        ("prestop-injector.io/settings", "not a record"),
    ] {
        let mut pod = real.clone();
        pod["metadata"]["annotations"][key] = json!(value);
        let facts = facts(&pod);
        assert!(
            facts.cleanable.is_empty(),
            "{key}={value}: {:?}",
            facts.cleanable
        );
        assert!(
            facts.refused.is_empty(),
            "{key}={value}: ignored, not reported"
        );
        assert!(
            !facts.uses.is_empty(),
            "{key}={value}: its directories still count as used"
        );
    }
    let mut pod = real.clone();
    pod["metadata"]["annotations"]["prestop-injector.io/inject"] = json!("true");
    assert_eq!(facts(&pod).cleanable, ["/mnt/scratch/job"]);
}

#[test]
fn rotated_key_still_verifies() {
    // Step 1 of a rotation: the new key is added second; the webhook still seals with the
    // old one, and a reaper with either file verifies.
    let before = config_with_keys(OLD_KEY);
    let adding = config_with_keys(&format!("{OLD_KEY}\n{KEY}00\n"));
    // Step 2: the new key first; pods sealed before stay verifiable.
    let rotated = config_with_keys(&format!("{KEY}00\n{OLD_KEY}\n"));
    let after = config_with_keys(&format!("{KEY}00\n"));
    let sealed_under = |webhook: &Config| {
        let job = injected_job(
            webhook,
            json!({"prestop-injector.io/cleanup": "/scratch"}),
            scratch_container(),
            json!([host_path_volume("scratch", "/mnt/scratch/job")]),
        );
        pod_of(&job, "job-worker-abcde")
    };
    let old_pod = sealed_under(&before);
    let new_pod = sealed_under(&rotated);
    assert_eq!(
        sealed_under(&adding)["metadata"]["annotations"][SEAL],
        old_pod["metadata"]["annotations"][SEAL]
    );
    for (reaper, pod, case) in [
        (&before, &old_pod, "old key, old pod"),
        (&adding, &old_pod, "both keys, old pod"),
        (&rotated, &old_pod, "rotated, old pod"),
        (&rotated, &new_pod, "rotated, new pod"),
        (&after, &new_pod, "old key dropped, new pod"),
    ] {
        assert_eq!(
            facts_under(pod, reaper).cleanable,
            ["/mnt/scratch/job"],
            "{case}"
        );
    }
    // Once the old key is dropped, what it sealed is refused; a reaper not yet given the
    // new key refuses what it seals.
    assert_refused(
        &facts_under(&old_pod, &after),
        "seal_mismatch",
        "old key dropped",
    );
    assert_refused(
        &facts_under(&new_pod, &before),
        "seal_mismatch",
        "new key unknown",
    );
}

#[test]
fn the_webhook_seals_only_what_it_injects() {
    let job = scratch_job("exec");
    let template = &job["spec"]["template"];
    let seal = template["metadata"]["annotations"][SEAL].as_str().unwrap();
    assert!(seal.starts_with("v1:"), "{seal}");
    assert!(template["metadata"]["annotations"][STATUS].is_string());
    // The same template in another namespace is sealed differently.
    let spec = &template["spec"];
    assert_eq!(
        seal_spec(&config().seal, "default", spec).as_deref(),
        Some(seal)
    );
    assert_ne!(
        seal_spec(&config().seal, "other", spec).as_deref(),
        Some(seal)
    );
    // Nothing injected (no cleanup: the grace period and the status only), no key, or a
    // custom command instead of a cleanup: no seal.
    let cases = [
        (
            json!({"prestop-injector.io/shutdown-seconds": "20"}),
            config(),
        ),
        (
            json!({"prestop-injector.io/cleanup": "/scratch"}),
            config_with_keys(""),
        ),
        (json!({"prestop-injector.io/command": "echo bye"}), config()),
    ];
    for (annotations, config) in cases {
        let job = injected_job(
            &config,
            annotations.clone(),
            scratch_container(),
            json!([host_path_volume("scratch", "/mnt/scratch/job")]),
        );
        let annotations_after = &job["spec"]["template"]["metadata"]["annotations"];
        assert!(
            annotations_after.get(SEAL).is_none(),
            "{annotations}: {annotations_after}"
        );
    }
    // A seal someone wrote on a template we do not inject is removed, not kept.
    let mut forged = core_support::job(
        json!({"prestop-injector.io/shutdown-seconds": "20"}),
        scratch_container(),
        json!([host_path_volume("scratch", "/mnt/scratch/job")]),
    );
    forged["spec"]["template"]["metadata"] = json!({"annotations": {SEAL: seal}});
    let outcome = mutate_with(Endpoint::Mutate, &config(), forged);
    assert!(
        outcome.patched["spec"]["template"]["metadata"]["annotations"]
            .get(SEAL)
            .is_none()
    );
    // The seal is one added annotation: the patch of a sealed Job touches the template's
    // annotations, not the Job's own metadata. (mutate_with checked the second pass.)
    let outcome = mutate_with(
        Endpoint::Mutate,
        &config(),
        core_support::job(
            json!({"prestop-injector.io/cleanup": "/scratch"}),
            scratch_container(),
            json!([host_path_volume("scratch", "/mnt/scratch/job")]),
        ),
    );
    assert!(
        outcome
            .paths()
            .iter()
            .all(|p| p.starts_with("/spec/template/")),
        "{:?}",
        outcome.paths()
    );
    assert_eq!(
        outcome.patched["metadata"],
        json!({"name": "job-worker", "annotations": {"prestop-injector.io/cleanup": "/scratch"}})
    );
}

const REAP: &str = "prestop-injector.io/reap";

/// An `OnFailure` Job (the kubelet restarts its container in the pod, so no exec hook)
/// whose container has no `runAsUser` (so no cleanup sidecar): no cleanup in the pod.
fn restarting_job(config: &Config) -> core_support::Outcome {
    let mut job = core_support::job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        scratch_container(),
        json!([host_path_volume("scratch", "/mnt/scratch/job")]),
    );
    job["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let outcome = mutate_with(Endpoint::Mutate, config, job);
    assert!(outcome.decision.denial.is_none(), "{:?}", outcome.decision);
    outcome
}

/// The kubelet's report of the user container `app` runs as (Kubernetes ≥ 1.33).
fn reported_user(pod: &mut Value, uid: u32) {
    pod["status"]["containerStatuses"] = json!([{"name": "app", "ready": false,
        "restartCount": 0, "image": "busybox:1.36", "imageID": "", "started": false,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        "user": {"linux": {"uid": uid, "gid": uid, "supplementalGroups": [uid]}}}]);
}

/// Issue 38, class 2: a target that no cleanup in the pod runs (here: the restart policy
/// rules out the exec hook, no runAsUser rules out the sidecar) is left to the node
/// reaper, sealed, and said so at admission; the reaper then counts it cleanable, as the
/// user the kubelet reports. Before, nothing recorded it and nothing emptied it.
#[test]
fn class_2_a_target_without_cleanup_in_the_pod_is_left_to_the_reaper() {
    let outcome = restarting_job(&config());
    let template = &outcome.patched["spec"]["template"];
    let annotations = &template["metadata"]["annotations"];
    let left: Value = serde_json::from_str(annotations[REAP].as_str().unwrap()).unwrap();
    assert_eq!(
        left,
        json!([{"container": "app", "target": "/scratch", "host": "/mnt/scratch/job"}])
    );
    assert!(annotations[SEAL].as_str().unwrap().starts_with("v1:"));
    assert!(template["spec"]["containers"][0].get("lifecycle").is_none());
    let warnings = outcome.warnings();
    assert!(warnings.contains("left to the node reaper"), "{warnings}");
    assert!(!warnings.contains("not cleaned"), "{warnings}");

    let mut pod = pod_of(&outcome.patched, "job-worker-abcde");
    let facts = facts(&pod);
    assert_eq!(facts.cleanable, ["/mnt/scratch/job"]);
    assert!(facts.refused.is_empty(), "{:?}", facts.refused);
    // Without runAsUser the reaper knows the user only from the kubelet: unknown until
    // it reports one, then that one.
    let user = |facts: &PodFacts| format!("{:?}", facts.users["/mnt/scratch/job"]);
    assert!(user(&facts).starts_with("Unknown"), "{}", user(&facts));
    reported_user(&mut pod, 1000);
    let facts = facts_under(&pod, &config());
    assert!(user(&facts).contains("uid: 1000"), "{}", user(&facts));

    // Without a seal key nothing is left to a reaper that could not prove it: the
    // warning says the target is not cleaned.
    let unsealed = restarting_job(&config_with_keys(""));
    let annotations = &unsealed.patched["spec"]["template"]["metadata"]["annotations"];
    assert!(annotations.get(REAP).is_none(), "{annotations}");
    assert!(
        unsealed
            .warnings()
            .contains("container \"app\" not cleaned"),
        "{}",
        unsealed.warnings()
    );
}

/// Issue 38, class 2, the attacks: the reap annotation is under the seal. Removed, moved
/// to another directory or container, added to a pod the webhook sealed without one, or
/// unreadable, it is refused as a seal mismatch, and nothing is cleanable.
#[test]
fn class_2_a_forged_reap_annotation_is_refused() {
    let outcome = restarting_job(&config());
    let pod = pod_of(&outcome.patched, "job-worker-abcde");
    let with = |text: Option<&str>| {
        let mut pod = pod.clone();
        let annotations = pod["metadata"]["annotations"].as_object_mut().unwrap();
        match text {
            Some(text) => annotations.insert(REAP.to_owned(), json!(text)),
            None => annotations.remove(REAP),
        };
        pod
    };
    let victim = r#"[{"container":"app","target":"/scratch","host":"/mnt/scratch/other"}]"#;
    // Removed: no target left to empty, and none to report.
    let facts_removed = facts(&with(None));
    assert!(facts_removed.cleanable.is_empty() && facts_removed.refused.is_empty());
    let cases = [
        ("another host", Some(victim)),
        (
            "a container it does not have",
            Some(r#"[{"container":"ghost","target":"/scratch","host":"/mnt/scratch/job"}]"#),
        ),
        ("not JSON", Some("/mnt/scratch/job")),
        (
            "an extra field",
            Some(r#"[{"container":"app","target":"/scratch","host":"/mnt/scratch/job","as":0}]"#),
        ),
    ];
    for (case, text) in cases {
        let facts = facts(&with(text));
        assert!(facts.cleanable.is_empty(), "{case}: {:?}", facts.cleanable);
        assert!(
            facts.refused.iter().all(|r| r.reason == "seal_mismatch") && !facts.refused.is_empty(),
            "{case}: {:?}",
            facts.refused
        );
    }
    // Added to a pod whose exec hook the webhook sealed without one.
    let mut sealed = pod_of(&scratch_job("exec"), "job-worker-fghij");
    sealed["metadata"]["annotations"][REAP] = json!(victim);
    assert_refused(
        &facts(&sealed),
        "seal_mismatch",
        "reap added to a sealed pod",
    );
    // A forged one on an unsealed pod carries no seal at all.
    let mut unsealed = pod.clone();
    set_seal(&mut unsealed, None);
    let facts = facts(&unsealed);
    assert!(facts.cleanable.is_empty());
    assert!(facts.refused.iter().all(|r| r.reason == "unsealed"));
}
