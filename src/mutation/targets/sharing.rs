//! docs/DESIGN.md#only-provably-private-directories-without-an-annotation: a host directory another
//! pod may also use.
//!
//! A Job with `parallelism: 4`, a Deployment's replicas (and its rolling updates on one
//! node), a StatefulSet's state, a DaemonSet's cache that a namespace-opted-in Job also
//! mounts, the next run of a CronJob (`concurrencyPolicy: Allow`), a bare Pod's fixed
//! hostPath: the first pod to stop would empty what the others still use, and most of
//! them are invisible from one object. So on `/mutate/auto` without a `cleanup`
//! annotation only provably private, per-pod directories are cleaned ([`keep_private`]);
//! an explicit annotation proceeds, with a warning per target of an object whose own pods
//! may share it and that has no per-pod directory ([`warn_shared`]).
//!
//! Known limit: a Job's `parallelism` may be raised after it was created, and Job
//! UPDATEs are not reviewed (docs/DESIGN.md#scope); its pods keep the decision recorded at
//! creation.
//!
//! Inside one pod, too, a container's stop is not the end of a directory's use: another
//! app container, or a native sidecar that ships results from its SIGTERM handler, may
//! still use it after this container's preStop ran ([`still_used_by`]).

use crate::mutation::containers::app_containers;
use crate::mutation::field::{At, Field};
use crate::mutation::hook::ours::is_our_sidecar;
use crate::mutation::scope::record::controller_of;
use crate::mutation::scope::settings::{Cleanup, Settings};
use crate::mutation::targets::{self, HostPath, Open};
use crate::mutation::warning::cited;
use serde_json::Value;

/// What [`shared_by`] says of a StatefulSet, whose pods come back under the same names.
const STATEFUL_SET: &str = "a StatefulSet";

/// Why the pods of `object` may share a host directory (`"a Deployment"`), or `None`
/// when they are its sole users: bare Pods, Jobs and CronJobs with parallelism ≤ 1.
pub fn shared_by(kind: &str, object: &Value) -> Option<String> {
    let count = |pointer: &str| object.at(pointer).and_then(Value::as_u64).unwrap_or(1);
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
                && object.at("/spec/strategy/type").and_then(Value::as_str) != Some("Recreate");
            Some(match (replicas > 1, rolling) {
                (true, _) => format!("a {kind} with {replicas} replicas"),
                // maxSurge starts the new pod before the old one stops, maybe on one node.
                (false, true) => "a Deployment's rolling update".to_owned(),
                (false, false) => format!("a {kind}"),
            })
        }
        // Every StatefulSet keeps state; a DaemonSet's directory outlives each of its pods.
        "StatefulSet" => Some(STATEFUL_SET.to_owned()),
        other => Some(format!("a {other}")),
    }
}

/// Remembers, for an explicit cleanup, why the object's pods may share a host directory:
/// each of its targets without a per-pod directory then warns ([`warn_shared`]). An
/// implicit `auto` needs no such note: it keeps only private directories ([`keep_private`]).
pub fn apply(settings: &mut Settings, shared_by: Option<String>) {
    let implicit_auto = settings.cleanup == Cleanup::Auto && !settings.cleanup_requested;
    if !implicit_auto {
        settings.shared_by = shared_by;
    }
}

/// docs/DESIGN.md#only-provably-private-directories-without-an-annotation: an implicit `auto` (no
/// `cleanup` annotation on `/mutate/auto`) cleans only provably private directories
/// ([`is_private`]); every other target is dropped with one warning naming the fix. Whoever else
/// mounts that host directory — a DaemonSet's cache, the next run of a CronJob (`concurrencyPolicy:
/// Allow`), a bare Pod's fixed hostPath — is invisible from here.
pub fn keep_private(container: &Value, targets: &mut Vec<String>, warnings: &mut Vec<String>) {
    let name = container
        .field("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mounts = targets::mounts(container);
    targets.retain(|path| {
        let private =
            targets::mount_of(&mounts, path).is_some_and(|m| is_private(container, m.raw));
        if !private {
            warnings.push(format!(
                "container {}: {} not cleaned: host directory may be shared; \
                 use subPathExpr $(POD_UID) or annotate cleanup",
                cited(format!("{name:?}")),
                cited(path)
            ));
        }
        private
    });
}

/// Whether a volumeMount's directory provably belongs to this pod alone, for its whole
/// life and no longer: its `subPathExpr` references an env var of the container defined
/// from `metadata.uid`. A pod's *name* does not prove it: a StatefulSet brings `web-0`
/// back under the same name and expects its directory, and two namespaces may each run a
/// pod `worker` on one node.
pub fn is_private(container: &Value, mount: &Value) -> bool {
    references_field(container, mount, &["metadata.uid"])
}

/// One warning per explicit target whose directory the object's pods may share, unless
/// its mount already gives each pod its own directory.
pub fn warn_shared(container: &Value, paths: &[String], why: &str, warnings: &mut Vec<String>) {
    let name = container
        .field("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mounts = targets::mounts(container);
    // A StatefulSet brings `web-0` back under the same name, expecting its directory: only
    // the pod's uid names a directory of one pod's own there.
    let (per_pod, fix): (fn(&Value, &Value) -> bool, &str) = if why == STATEFUL_SET {
        (is_private, "$(POD_UID)")
    } else {
        (is_per_pod, "$(POD_NAME)")
    };
    for path in paths {
        if !targets::mount_of(&mounts, path).is_some_and(|m| per_pod(container, m.raw)) {
            warnings.push(format!(
                "container {}: {} may be shared by pods of {why}; use subPathExpr: {fix}",
                cited(format!("{name:?}")),
                cited(path)
            ));
        }
    }
}

/// docs/DESIGN.md#where-the-cleanup-runs: the names of the other containers of the pod
/// that may still use the host directory of `target` (a path of `container`, one of
/// `spec`'s own app containers) after `container` stopped: app containers and native
/// sidecars (init containers with `restartPolicy: Always`, ours excepted) with a mount
/// whose host directory may be that one, inside it or above it. Plain init containers
/// finished before any app container started.
///
/// "The same directory" is decided as the target rule decides it ([`HostPath::may_hold`]
/// on every view of a hostPath volume): the same volume with the same `subPath`, or
/// another volume or `subPath` that reaches the same host path; a `subPathExpr` may be
/// any directory below its volume's, so it counts wherever it may reach (fail closed).
pub fn still_used_by(spec: &Value, container: &Value, target: &str) -> Vec<String> {
    let mounts = targets::mounts(container);
    let Some(mount) = targets::mount_of(&mounts, target) else {
        return Vec::new();
    };
    let Some(host) = targets::mount_host_path(spec, mount) else {
        return Vec::new();
    };
    // An unreadable subPath may show any directory of the node.
    let host = host
        .unwrap_or(HostPath {
            known: "/".to_owned(),
            open: Some(Open::AtOrBelow),
        })
        .join(&target[mount.path.len()..]);
    let native_sidecars = spec
        .field("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c.field("restartPolicy").and_then(Value::as_str) == Some("Always"))
        .filter(|c| !is_our_sidecar(c));
    app_containers(spec)
        .iter()
        .filter(|other| !std::ptr::eq(*other, container))
        .chain(native_sidecars)
        .filter(|other| {
            targets::container_views(spec, other)
                .iter()
                .any(|view| view.host.may_hold(&host) || host.may_hold(&view.host))
        })
        .map(|other| {
            other
                .field("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Whether a volumeMount's `subPathExpr` names a directory of its own for each pod: it
/// references an env var defined from `metadata.name` or `metadata.uid`.
pub fn is_per_pod(container: &Value, mount: &Value) -> bool {
    references_field(container, mount, &["metadata.name", "metadata.uid"])
}

/// Whether the mount's `subPathExpr` references an env var of the container defined by a
/// `fieldRef` to one of `fields`, as the kubelet resolves it: `env` entries in order, the
/// last definition of a name winning (`envFrom` never defines a fieldRef).
fn references_field(container: &Value, mount: &Value, fields: &[&str]) -> bool {
    let Some(expression) = mount.field("subPathExpr").and_then(Value::as_str) else {
        return false;
    };
    let env = container.field("env").and_then(Value::as_array);
    crate::mutation::targets::env_refs::references(expression)
        .iter()
        .any(|name| {
            env.and_then(|list| {
                list.iter()
                    .rev()
                    .find(|e| e.field("name").and_then(Value::as_str) == Some(name.as_str()))
            })
            .and_then(|e| e.at("/valueFrom/fieldRef/fieldPath"))
            .and_then(Value::as_str)
            .is_some_and(|field| fields.contains(&field))
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
