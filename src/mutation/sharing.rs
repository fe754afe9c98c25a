//! SPEC §3 "Shared host directories": `auto` assumes one pod per host directory.
//!
//! A Job with `parallelism: 4`, a Deployment's replicas (and its rolling updates on one
//! node), a StatefulSet's state, a DaemonSet's state directory: the first pod to stop
//! would empty what the others still use. So on `/mutate/auto` without a `cleanup`
//! annotation only objects whose pods are the sole users are cleaned; an explicit
//! annotation proceeds, with a warning per target that has no per-pod directory.
//!
//! Known limit: a Job's `parallelism` may be raised after it was created, and Job
//! UPDATEs are not reviewed (SPEC §1); its pods keep the decision recorded at creation.

use super::pod::app_containers;
use super::record::controller_of;
use super::settings::{Cleanup, Settings};
use super::targets;
use crate::config::Config;
use serde_json::Value;

/// Why the pods of `object` may share a host directory (`"a Deployment"`), or `None`
/// when they are its sole users: bare Pods, Jobs and CronJobs with parallelism ≤ 1.
pub fn shared_by(kind: &str, object: &Value) -> Option<String> {
    let count = |pointer: &str| object.pointer(pointer).and_then(Value::as_u64).unwrap_or(1);
    match kind {
        "Pod" => controller_of(object).map(|(_, owner)| format!("a {owner} controller")),
        "Job" | "CronJob" => {
            let pointer = if kind == "Job" {
                "/spec/parallelism"
            } else {
                "/spec/jobTemplate/spec/parallelism"
            };
            let parallelism = count(pointer);
            (parallelism > 1).then(|| format!("a {kind} with parallelism {parallelism}"))
        }
        "Deployment" | "ReplicaSet" => {
            let replicas = count("/spec/replicas");
            let rolling = kind == "Deployment"
                && object
                    .pointer("/spec/strategy/type")
                    .and_then(Value::as_str)
                    != Some("Recreate");
            Some(match (replicas > 1, rolling) {
                (true, _) => format!("a {kind} with {replicas} replicas"),
                // maxSurge starts the new pod before the old one stops, maybe on one node.
                (false, true) => "a Deployment's rolling update".to_owned(),
                (false, false) => format!("a {kind}"),
            })
        }
        // Every StatefulSet keeps state; a DaemonSet's directory outlives each of its pods.
        other => Some(format!("a {other}")),
    }
}

/// Applies the rule to `settings` before the template is mutated: an implicit `auto` of
/// an object whose pods may share becomes nothing (one warning when it would have
/// cleaned something); an explicit cleanup keeps going and remembers why it may share.
pub fn apply(
    settings: &mut Settings,
    shared_by: Option<String>,
    spec: Option<&Value>,
    config: &Config,
    warnings: &mut Vec<String>,
) {
    let Some(why) = shared_by else {
        return;
    };
    let implicit_auto = settings.cleanup == Cleanup::Auto && !settings.cleanup_requested;
    if !implicit_auto {
        settings.shared_by = Some(why);
        return;
    }
    let selected = |container: &Value| {
        let name = container.get("name").and_then(Value::as_str);
        settings
            .containers
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| Some(n.as_str()) == name))
    };
    let would_clean = spec.is_some_and(|spec| {
        app_containers(spec)
            .iter()
            .any(|c| selected(c) && !targets::auto_targets(spec, c, config).targets.is_empty())
    });
    settings.cleanup = Cleanup::Nothing;
    if would_clean {
        warnings.push(format!(
            "auto cleanup skipped: pods of {why} may share host directories; annotate cleanup to opt in"
        ));
    }
}

/// One warning per explicit target whose directory the object's pods may share, unless
/// its mount already gives each pod its own directory.
pub fn warn_shared(container: &Value, paths: &[String], why: &str, warnings: &mut Vec<String>) {
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mounts = targets::mounts(container);
    for path in paths {
        let per_pod =
            targets::mount_of(&mounts, path).is_some_and(|m| is_per_pod(container, m.raw));
        if !per_pod {
            warnings.push(format!(
                "container {name:?}: {path} may be shared by pods of {why}; use subPathExpr: $(POD_NAME)"
            ));
        }
    }
}

/// Whether a volumeMount's `subPathExpr` names a directory of its own for each pod: it
/// references an env var defined from `metadata.name` or `metadata.uid`.
pub fn is_per_pod(container: &Value, mount: &Value) -> bool {
    let Some(expression) = mount.get("subPathExpr").and_then(Value::as_str) else {
        return false;
    };
    let env = container.get("env").and_then(Value::as_array);
    super::env_refs::references(expression).iter().any(|name| {
        // The last definition of a name is the one the kubelet uses.
        env.and_then(|list| {
            list.iter()
                .rev()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(name.as_str()))
        })
        .and_then(|e| e.pointer("/valueFrom/fieldRef/fieldPath"))
        .and_then(Value::as_str)
        .is_some_and(|field| matches!(field, "metadata.name" | "metadata.uid"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn who_shares() {
        let cases = [
            ("Pod", json!({}), None),
            ("Job", json!({"spec": {}}), None),
            ("Job", json!({"spec": {"parallelism": 1}}), None),
            (
                "Job",
                json!({"spec": {"parallelism": 4}}),
                Some("a Job with parallelism 4"),
            ),
            (
                "CronJob",
                json!({"spec": {"jobTemplate": {"spec": {"parallelism": 2}}}}),
                Some("a CronJob with parallelism 2"),
            ),
            ("CronJob", json!({"spec": {}}), None),
            (
                "Deployment",
                json!({"spec": {"replicas": 3}}),
                Some("a Deployment with 3 replicas"),
            ),
            (
                "Deployment",
                json!({"spec": {}}),
                Some("a Deployment's rolling update"),
            ),
            (
                "Deployment",
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
                Some("a Deployment"),
            ),
            ("ReplicaSet", json!({"spec": {}}), Some("a ReplicaSet")),
            (
                "StatefulSet",
                json!({"spec": {"replicas": 1}}),
                Some("a StatefulSet"),
            ),
            ("DaemonSet", json!({}), Some("a DaemonSet")),
            (
                "Pod",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "CloneSet", "name": "c", "controller": true}]}}),
                Some("a CloneSet controller"),
            ),
        ];
        for (kind, object, expected) in cases {
            assert_eq!(
                shared_by(kind, &object).as_deref(),
                expected,
                "{kind} {object}"
            );
        }
    }

    #[test]
    fn per_pod_sub_path_expressions() {
        let container = json!({"env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "FIXED", "value": "x"},
            {"name": "SHADOWED", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SHADOWED", "value": "same-for-all"},
        ]});
        for (expression, per_pod) in [
            ("$(POD_NAME)", true),
            ("jobs/$(UID)/work", true),
            ("$(NODE)", false),
            ("$(FIXED)", false),
            ("$(SHADOWED)", false),
            ("$$(POD_NAME)", false),
            ("$(MISSING)", false),
        ] {
            let mount = json!({"name": "v", "mountPath": "/x", "subPathExpr": expression});
            assert_eq!(is_per_pod(&container, &mount), per_pod, "{expression}");
        }
        assert!(!is_per_pod(&container, &json!({"subPath": "$(POD_NAME)"})));
    }
}
