//! What the reaper may empty, read from pods the webhook really injected (the core's
//! patch applied with json-patch, the pod built from the template as a controller does)
//! and from pods an attacker wrote by hand: the status annotation and the hook's argv are
//! never enough; every target passes the webhook's rule with the reaper's config.

mod core_support;

use core_support::{
    host_path_volume, job, mutate_with, pod_facts, pod_facts_with, scratch_container, seal_spec,
};
use prestop_injector::config::Config;
use prestop_injector::mutation::seal::SEAL;
use prestop_injector::mutation::Endpoint;
use prestop_injector::reaper::derive::PodFacts;
use prestop_injector::seal_keys::SealKeys;
use serde_json::{json, Value};

/// The webhook's and the reaper's: the same seal key (tests/reaper_seal.rs tests the seal).
fn config() -> Config {
    let mut config =
        Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]\nkubernetesVersion: \"1.33\"\n")
            .unwrap();
    config.seal = SealKeys::parse(&"5e".repeat(32)).unwrap();
    config
}

/// The Pod a Job controller makes from the mutated template.
fn pod_of(job: &Value, name: &str) -> Value {
    let template = &job["spec"]["template"];
    let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
    metadata["name"] = json!(name);
    // The Job's own namespace (core_support's requests are in `default`): the seal binds it.
    metadata["namespace"] = json!("default");
    metadata["uid"] = json!(format!("uid-{name}"));
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!("node-a");
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

fn facts(pod: &Value) -> PodFacts {
    pod_facts(pod, &config()).expect("a pod with a uid")
}

fn injected_job(annotations: Value, container: Value, volumes: Value) -> Value {
    let outcome = mutate_with(
        Endpoint::Mutate,
        &config(),
        job(annotations, container, volumes),
    );
    assert!(
        outcome.decision.denial.is_none(),
        "{:?}",
        outcome.decision.denial
    );
    outcome.patched
}

#[test]
fn the_webhooks_own_hook_and_sidecar_are_cleanable() {
    let volumes = json!([host_path_volume("scratch", "/mnt/scratch/job")]);
    for mode in ["exec", "sidecar"] {
        let job = injected_job(
            json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": mode}),
            scratch_container(),
            volumes.clone(),
        );
        let facts = facts(&pod_of(&job, "job-worker-abcde"));
        assert_eq!(facts.cleanable, ["/mnt/scratch/job"], "{mode}");
        assert!(facts.refused.is_empty(), "{mode}: {:?}", facts.refused);
        assert!(facts
            .uses
            .iter()
            .any(|u| u.known == "/mnt/scratch/job" && u.open.is_none()));
    }
}

#[test]
fn a_per_pod_sub_path_expr_is_expanded_from_the_pod() {
    let mut container = scratch_container();
    container["volumeMounts"][0]["subPathExpr"] = json!("$(POD_NAME)");
    container["env"] =
        json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    let job = injected_job(
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        container,
        json!([host_path_volume("scratch", "/mnt/scratch/jobs")]),
    );
    let a = facts(&pod_of(&job, "job-worker-a"));
    let b = facts(&pod_of(&job, "job-worker-b"));
    assert_eq!(a.cleanable, ["/mnt/scratch/jobs/job-worker-a"]);
    assert_eq!(b.cleanable, ["/mnt/scratch/jobs/job-worker-b"]);
    // Each pod uses its own directory only (and the declared volume), so one pod going
    // does not wait for its siblings: the volume as declared is the parent of both.
    assert!(b.uses.iter().all(|u| u.open.is_none()));
    assert!(!b
        .uses
        .iter()
        .any(|u| u.known == "/mnt/scratch/jobs/job-worker-a"));
}

#[test]
fn a_sub_path_expr_from_env_from_is_never_emptied() {
    let mut container = scratch_container();
    container["volumeMounts"][0]["subPathExpr"] = json!("slot-$(SLOT)");
    container["envFrom"] = json!([{"configMapRef": {"name": "slots"}}]);
    let job = injected_job(
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        container,
        json!([host_path_volume("scratch", "/mnt/scratch/jobs")]),
    );
    let facts = facts(&pod_of(&job, "job-worker-a"));
    assert!(facts.cleanable.is_empty());
    assert_eq!(facts.refused.len(), 1);
    assert_eq!(facts.refused[0].reason, "host_path_unknown");
    assert!(
        facts.refused[0].message.contains("/mnt/scratch/jobs/*"),
        "{}",
        facts.refused[0].message
    );
    // And it counts as using every directory it might be.
    assert!(facts
        .uses
        .iter()
        .any(|u| u.known == "/mnt/scratch/jobs" && u.open.is_some()));
}

/// A hand-written pod: our status annotation, our program's argv, a hostPath of the
/// attacker's choosing; sealed with the install's key (as if the key had leaked), so that
/// what these tests see is the webhook's rule, which still decides.
fn forged(volumes: Value, mounts: Value, targets: &[&str]) -> Value {
    forged_with_hosts(
        volumes,
        mounts,
        &targets.iter().map(|t| (*t, None)).collect::<Vec<_>>(),
    )
}

fn forged_with_hosts(volumes: Value, mounts: Value, targets: &[(&str, Option<&str>)]) -> Value {
    let mut hook = vec![
        "/.prestop-injector/prestop-clean".to_owned(),
        "hook".to_owned(),
    ];
    for (target, host) in targets {
        hook.push("--target".to_owned());
        hook.push((*target).to_owned());
        if let Some(host) = host {
            hook.push("--host".to_owned());
            hook.push((*host).to_owned());
        }
    }
    let mut pod = unsealed(volumes, mounts, hook);
    let sealed = seal_spec(&config().seal, "evil", &pod["spec"]).unwrap();
    pod["metadata"]["annotations"][SEAL] = json!(sealed);
    pod
}

fn unsealed(volumes: Value, mounts: Value, hook: Vec<String>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "forged", "namespace": "evil", "uid": "uid-forged",
                     "annotations": {"prestop-injector.io/status": "{\"version\":1,\"containers\":[\"app\"],\"grace\":40}"}},
        "spec": {"nodeName": "node-a", "volumes": volumes,
                 "containers": [{"name": "app", "image": "busybox", "volumeMounts": mounts,
                                 "lifecycle": {"preStop": {"exec": {"command": hook}}}}]}
    })
}

#[test]
fn a_forged_pod_gets_only_what_the_rule_allows() {
    let cases = [
        // Outside the allowed prefixes.
        (
            json!([host_path_volume("db", "/srv/db")]),
            json!([{"name": "db", "mountPath": "/data"}]),
            "/data",
            "not_allowed",
        ),
        // Protected, even below an allowed prefix's parent.
        (
            json!([host_path_volume("etc", "/etc")]),
            json!([{"name": "etc", "mountPath": "/data"}]),
            "/data",
            "protected",
        ),
        (
            json!([host_path_volume("k", "/var/lib/kubelet")]),
            json!([{"name": "k", "mountPath": "/data"}]),
            "/data",
            "protected",
        ),
        // Another volume mounted inside the target.
        (
            json!([host_path_volume("s", "/mnt/scratch/x"), {"name": "pvc", "persistentVolumeClaim": {"claimName": "db"}}]),
            json!([{"name": "s", "mountPath": "/data"}, {"name": "pvc", "mountPath": "/data/db"}]),
            "/data",
            "rule",
        ),
        // A target the container does not mount, a read-only one, a relative one.
        (
            json!([host_path_volume("s", "/mnt/scratch/x")]),
            json!([{"name": "s", "mountPath": "/data"}]),
            "/elsewhere",
            "rule",
        ),
        (
            json!([host_path_volume("s", "/mnt/scratch/x")]),
            json!([{"name": "s", "mountPath": "/data", "readOnly": true}]),
            "/data",
            "rule",
        ),
        (
            json!([host_path_volume("s", "/mnt/scratch/x")]),
            json!([{"name": "s", "mountPath": "/data"}]),
            "/data/../..",
            "rule",
        ),
        // The host path reaches above the prefix through a subPath.
        (
            json!([host_path_volume("s", "/mnt/scratch")]),
            json!([{"name": "s", "mountPath": "/data", "subPath": "../../etc"}]),
            "/data",
            "rule",
        ),
    ];
    for (volumes, mounts, target, reason) in cases {
        let pod = forged(volumes.clone(), mounts.clone(), &[target]);
        let facts = facts(&pod);
        assert!(
            facts.cleanable.is_empty(),
            "{target} {mounts}: {:?}",
            facts.cleanable
        );
        assert_eq!(
            facts.refused.len(),
            1,
            "{target} {mounts}: {:?}",
            facts.refused
        );
        assert_eq!(
            facts.refused[0].reason, reason,
            "{target} {mounts}: {}",
            facts.refused[0].message
        );
    }
    // The same pod with a target the rule allows is cleanable: the annotation, argv and
    // seal are what *mark* a pod, the rule is what decides.
    let pod = forged_with_hosts(
        json!([host_path_volume("s", "/mnt/scratch/x")]),
        json!([{"name": "s", "mountPath": "/data"}]),
        &[("/data/sub", Some("/mnt/scratch/x/sub"))],
    );
    assert_eq!(facts(&pod).cleanable, ["/mnt/scratch/x/sub"]);
}

#[test]
fn without_our_annotation_or_our_exact_argv_nothing_is_cleanable() {
    let volumes = json!([host_path_volume("s", "/mnt/scratch/x")]);
    let mounts = json!([{"name": "s", "mountPath": "/data"}]);
    let mut pod = forged(volumes.clone(), mounts.clone(), &["/data"]);
    pod["metadata"]["annotations"] = json!({});
    let facts_without = facts(&pod);
    assert!(facts_without.cleanable.is_empty() && facts_without.refused.is_empty());
    assert_eq!(
        facts_without.uses.len(),
        1,
        "its mount (the volume as declared is what its mounts reach: issue 32)"
    );
    // A look-alike hook (another program path, or an extra argument) is the user's own.
    for command in [
        json!(["/bin/prestop-clean", "hook", "--target", "/data"]),
        json!([
            "/.prestop-injector/prestop-clean",
            "hook",
            "--target",
            "/data",
            "--bogus"
        ]),
        json!(["sh", "-c", "rm -rf /data/*"]),
    ] {
        let mut pod = forged(volumes.clone(), mounts.clone(), &["/data"]);
        pod["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] = command.clone();
        let facts = facts(&pod);
        assert!(
            facts.cleanable.is_empty() && facts.refused.is_empty(),
            "{command}"
        );
    }
    // No uid: not a pod the API server stored.
    let mut pod = forged(volumes, mounts, &["/data"]);
    pod["metadata"].as_object_mut().unwrap().remove("uid");
    assert_eq!(pod_facts(&pod, &config()), None);
}

#[test]
fn every_container_mount_and_unmounted_volume_is_a_use() {
    let pod = json!({
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {
            "volumes": [host_path_volume("a", "/mnt/scratch/a"), host_path_volume("b", "/mnt/scratch/b"),
                        host_path_volume("unmounted", "/mnt/scratch/c")],
            "initContainers": [{"name": "i", "volumeMounts": [{"name": "a", "mountPath": "/a", "subPath": "init"}]}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "b", "mountPath": "/b", "readOnly": true}]}],
            "ephemeralContainers": [{"name": "debug", "volumeMounts": [{"name": "a", "mountPath": "/x", "subPathExpr": "$(UNKNOWN)"}]}],
        }
    });
    let facts = facts(&pod);
    let known = uses(&facts);
    // A mounted volume is what its mounts reach (each subPath), not the whole volume
    // (issue 32, finding 2); an unmounted one is still set up by the kubelet.
    assert!(!known.contains(&("/mnt/scratch/a", false)), "{known:?}");
    for expected in [
        ("/mnt/scratch/b", false),
        ("/mnt/scratch/c", false),
        ("/mnt/scratch/a/init", false),
        ("/mnt/scratch/a", true),
    ] {
        assert!(known.contains(&expected), "{expected:?} in {known:?}");
    }
}

/// A read-only whole-node view is no use (docs/REAPER.md#when), but only where it shows a
/// directory above every prefix: the same volume mounted read-only with a `subPath` that
/// reaches the scratch directory reads it, and keeps it while its pod is pending or
/// crash-looping. Before, the volume's read-only mounts were all dropped by its own
/// path (`/mnt`), and the directory was emptied under its reader.
#[test]
fn a_read_only_mount_into_the_directory_is_a_use_whatever_its_volume() {
    let pod = json!({
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {
            "volumes": [host_path_volume("node", "/mnt")],
            "containers": [{"name": "c", "volumeMounts": [
                {"name": "node", "mountPath": "/host", "readOnly": true},
                {"name": "node", "mountPath": "/input", "readOnly": true, "subPath": "scratch/job"},
                {"name": "node", "mountPath": "/logs", "readOnly": true, "subPath": "logs"},
            ]}],
        }
    });
    // As the reaper and the agent run by default (`--read-only-views-keep` unset).
    let facts = pod_facts_with(&pod, &config(), false).expect("a pod with a uid");
    let known = uses(&facts);
    assert!(known.contains(&("/mnt/scratch/job", false)), "{known:?}");
    // The whole-node view itself is still no use; /mnt/logs is beside every prefix.
    assert!(!known.contains(&("/mnt", false)), "{known:?}");
}

/// A mount whose path the kubelet's rules cannot read (`/b/../c`) still shows its
/// volume's directory: it is a use like any mount. Before, it was taken for the volume
/// as declared, and dropped because another container mounts the volume.
#[test]
fn a_mount_with_an_odd_mount_path_is_a_use() {
    let pod = json!({
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {
            "volumes": [host_path_volume("s", "/mnt/scratch")],
            "containers": [
                {"name": "a", "volumeMounts": [{"name": "s", "mountPath": "/a", "subPath": "x"}]},
                {"name": "b", "volumeMounts": [{"name": "s", "mountPath": "/b/../c", "subPath": "job"}]},
            ],
        }
    });
    let facts = facts(&pod);
    let known = uses(&facts);
    assert!(known.contains(&("/mnt/scratch/job", false)), "{known:?}");
    assert!(known.contains(&("/mnt/scratch/x", false)), "{known:?}");
}

/// Each use as (its known part, whether it is open below).
fn uses(facts: &PodFacts) -> Vec<(&str, bool)> {
    facts
        .uses
        .iter()
        .map(|u| (u.known.as_str(), u.open.is_some()))
        .collect()
}
