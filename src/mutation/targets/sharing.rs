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
//! Pods that overlap in time share too (issue 31, finding 1). A Job's pod that is deleted
//! (`kubectl delete pod`, preemption, the descheduler) is replaced at once:
//! `podReplacementPolicy: TerminatingOrFailed` is the default without a
//! `podFailurePolicy`, and older controllers count a terminating pod as gone. The
//! replacement may land on the same node and directory while the old pod still stops, and
//! the old pod's cleanup, run as it stops, empties what the replacement wrote. A CronJob's
//! runs overlap the same way: `Allow` (the default) starts the next run beside a running
//! one, `Replace` starts it while the replaced run's pods still stop. So every Job and
//! CronJob with an explicit cleanup warns for each fixed directory, naming the overlap,
//! and recommends `$(POD_UID)`; a directory from the pod's name is accepted too, since a
//! replacement pod and the next run's pods get new names. Decided deliberately:
//! - `Forbid` keeps a CronJob's runs apart but not a run's pods: its Jobs' pods are
//!   replaced as any Job's are, so it warns of the replacement pod instead of the runs.
//!   `Allow` and `Replace` name the runs; their replacement pods need the same fix.
//! - A bare Pod is never replaced: no warning.
//! - `podReplacementPolicy: Failed` (replace only a pod that has finished) is not taken
//!   as proof: where its feature gate is off (1.28's default, an operator's choice until
//!   it is locked on) the API server drops the field only after admission, so the webhook
//!   would believe a field the controller never reads.
//!
//! Known limit: a Job's `parallelism` may be raised after it was created, and Job
//! UPDATEs are not reviewed (docs/DESIGN.md#scope); its pods keep the decision recorded at
//! creation.
//!
//! Inside one pod, too, a container's stop is not the end of a directory's use: another
//! app container, or a native sidecar that ships results from its SIGTERM handler, may
//! still use it after this container's preStop ran ([`still_used_by`]).

use crate::json::Value;
use crate::mutation::containers::app_containers;
use crate::mutation::hook::ours::is_our_sidecar;
use crate::mutation::scope::record::controller_of;
use crate::mutation::scope::settings::{Cleanup, Settings, SharedBy};
use crate::mutation::targets::{self, HostPath, Open};
use crate::mutation::warning::cited;
use std::borrow::Cow;

/// The fix where pod names come back (a StatefulSet), and where pods overlap in time.
const POD_UID: &str = "$(POD_UID)";
/// The fix where pods of one object run side by side under their own names.
const POD_NAME: &str = "$(POD_NAME)";

/// The overlaps of a Job's and a CronJob's pods at parallelism 1 (see the module doc).
const JOB_REPLACED: &str = "a Job's replacement pod, started while the deleted pod still stops";
const CRON_JOB_REPLACED: &str =
    "a CronJob's replacement pod, started while the deleted pod still stops";
const CRON_JOB_REPLACE: &str =
    "a CronJob's next run, started while the replaced run still stops (concurrencyPolicy: Replace)";
const CRON_JOB_ALLOW: &str = "pods of a CronJob's overlapping runs (concurrencyPolicy: Allow)";
const CRON_JOB_DEFAULT: &str =
    "pods of a CronJob's overlapping runs (concurrencyPolicy: Allow, the default)";

/// Pods of the object side by side: each needs a directory of its own name.
fn side_by_side(who: String) -> SharedBy {
    SharedBy {
        who: Cow::Owned(who),
        fix: POD_NAME,
        name_is_own: true,
    }
}

/// Pods of the object that overlap in time: a replacement pod, the next run. Both come
/// with new names, so a directory from the name is each pod's own; the uid is recommended,
/// as everywhere a directory must be provably private.
fn overlapping(who: &'static str) -> SharedBy {
    SharedBy {
        who: Cow::Borrowed(who),
        fix: POD_UID,
        name_is_own: true,
    }
}

/// Why the pods of `object` may share a host directory (`pods of a Deployment`), or
/// `None` when they are its sole users: bare Pods, which nothing replaces.
pub fn shared_by(kind: &str, object: &Value) -> Option<SharedBy> {
    let count = |pointer: &str| object.pointer(pointer).and_then(Value::as_u64).unwrap_or(1);
    match kind {
        "Pod" => controller_of(object)
            .map(|(_, owner)| side_by_side(format!("pods of a {owner} controller"))),
        "Job" | "CronJob" => {
            let pointer = if kind == "Job" {
                "/spec/parallelism"
            } else {
                "/spec/jobTemplate/spec/parallelism"
            };
            let parallelism = count(pointer);
            if parallelism > 1 {
                return Some(side_by_side(format!(
                    "pods of a {kind} with parallelism {parallelism}"
                )));
            }
            if kind == "Job" {
                return Some(overlapping(JOB_REPLACED));
            }
            let policy = object
                .pointer("/spec/concurrencyPolicy")
                .and_then(Value::as_str);
            Some(overlapping(match policy {
                Some("Forbid") => CRON_JOB_REPLACED,
                Some("Replace") => CRON_JOB_REPLACE,
                Some("Allow") => CRON_JOB_ALLOW,
                // Unset; the API server refuses any other value (fail closed all the same).
                _ => CRON_JOB_DEFAULT,
            }))
        }
        "Deployment" | "ReplicaSet" => {
            let replicas = count("/spec/replicas");
            let rolling = kind == "Deployment"
                && object
                    .pointer("/spec/strategy/type")
                    .and_then(Value::as_str)
                    != Some("Recreate");
            Some(side_by_side(match (replicas > 1, rolling) {
                (true, _) => format!("pods of a {kind} with {replicas} replicas"),
                // maxSurge starts the new pod before the old one stops, maybe on one node.
                (false, true) => "pods of a Deployment's rolling update".to_owned(),
                (false, false) => format!("pods of a {kind}"),
            }))
        }
        // Every StatefulSet keeps state, and brings `web-0` back under the same name,
        // expecting its directory: only the pod's uid names a directory of its own there.
        "StatefulSet" => Some(SharedBy {
            who: Cow::Borrowed("pods of a StatefulSet"),
            fix: POD_UID,
            name_is_own: false,
        }),
        // A DaemonSet's directory outlives each of its pods.
        other => Some(side_by_side(format!("pods of a {other}"))),
    }
}

/// Remembers, for an explicit cleanup, why the object's pods may share a host directory:
/// each of its targets without a per-pod directory then warns ([`warn_shared`]). An
/// implicit `auto` needs no such note: it keeps only private directories ([`keep_private`]).
pub fn apply(settings: &mut Settings, shared_by: Option<SharedBy>) {
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
        .get("name")
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
                cited(format_args!("{name:?}")),
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
pub fn warn_shared(
    container: &Value,
    paths: &[String],
    shared: &SharedBy,
    warnings: &mut Vec<String>,
) {
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // Only a `subPathExpr` gives a pod a directory of its own: without one, every path
    // warns and no mount needs reading.
    let has_expression = container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|m| m.get("subPathExpr").is_some()));
    let mounts = if has_expression {
        targets::mounts(container)
    } else {
        Vec::new()
    };
    let per_pod: fn(&Value, &Value) -> bool = if shared.name_is_own {
        is_per_pod
    } else {
        is_private
    };
    for path in paths {
        if !targets::mount_of(&mounts, path).is_some_and(|m| per_pod(container, m.raw)) {
            warnings.push(format!(
                "container {}: {} may be shared by {}; use subPathExpr: {}",
                cited(format_args!("{name:?}")),
                cited(path),
                shared.who,
                shared.fix
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
        .join(mount.below(target));
    let native_sidecars = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"))
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
                .get("name")
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
    let Some(expression) = mount.get("subPathExpr").and_then(Value::as_str) else {
        return false;
    };
    let env = container.get("env").and_then(Value::as_array);
    crate::mutation::targets::env_refs::references(expression)
        .iter()
        .any(|name| {
            env.and_then(|list| {
                list.iter()
                    .rev()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(name.as_str()))
            })
            .and_then(|e| e.pointer("/valueFrom/fieldRef/fieldPath"))
            .and_then(Value::as_str)
            .is_some_and(|field| fields.contains(&field))
        })
}

#[cfg(test)]
mod tests;
