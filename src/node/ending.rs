//! Whether a pod is ending, from its object (issue 31): the one decision of the agent's
//! pod source, pure, so that the kubelet's order can be replayed in tests.
//!
//! A pod is ending when its deletion has begun (`deletionTimestamp`: the kubelet stops
//! it for good, whatever it restarted before), when it has finished (`phase` `Succeeded`
//! or `Failed`: the kubelet starts nothing again), or, with `restartPolicy: OnFailure`,
//! when every app container has exited 0 (the kubelet starts none of them again and now
//! stops the sidecars; the phase follows a moment later).
//!
//! It is also ending when the kubelet ends it without a deletion (issue 38, class 1),
//! which since 1.24 it does while the phase still says `Running` (`mergePodStatus` holds
//! the terminal phase back until every container has stopped, so the cleanup's SIGTERM
//! comes first):
//! - a `DisruptionTarget` condition that is `True` with the reason
//!   `TerminationByKubelet`: the kubelet writes it before it kills the pod for a
//!   node-pressure eviction or a graceful node shutdown. The API server's reasons (an
//!   eviction, a preemption, a taint) are not taken: a deletion follows those, which
//!   says it, and when it does not (a failed delete) the condition stays `True` until
//!   the disruption controller clears it minutes later, while the pod runs on and may be
//!   restarted in place;
//! - its `activeDeadlineSeconds` have run out since `status.startTime`, on the node's
//!   clock, which is the kubelet's (`pastActiveDeadline`).
//!
//! Anything else — `Running` with containers stopped, as during a sandbox recreation or a
//! restart in place — is not, and a pod the API server does not list on this node is not
//! either: that is a force-deleted pod (the node reaper's case) or a misconfigured node
//! name, and only the first is safe to clean, which nothing here can tell.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{DateTime, Utc};

/// `Ok` when `pod` (the pod of `uid` among node `node`'s, if listed) is ending at `now`
/// (the node's clock); else one sentence saying what the API server shows.
pub fn decide(pod: Option<&Pod>, uid: &str, node: &str, now: DateTime<Utc>) -> Result<(), String> {
    let Some(pod) = pod else {
        return Err(format!(
            "the API server lists no pod of uid {uid} on node {node} (deleted with --force, \
             or another node's name): left to the node reaper"
        ));
    };
    let name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    );
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Unknown");
    if matches!(phase, "Succeeded" | "Failed") {
        return Ok(());
    }
    if status.is_some_and(|status| {
        status.conditions.iter().flatten().any(|condition| {
            condition.type_ == "DisruptionTarget"
                && condition.status == "True"
                && condition.reason.as_deref() == Some("TerminationByKubelet")
        })
    }) {
        return Ok(());
    }
    let spec = pod.spec.as_ref();
    let deadline = spec.and_then(|spec| spec.active_deadline_seconds);
    let started = status.and_then(|status| status.start_time.as_ref());
    if let (Some(deadline), Some(started)) = (deadline, started) {
        if now.signed_duration_since(started.0).num_seconds() >= deadline {
            return Ok(());
        }
    }
    let policy = spec
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if policy == "OnFailure" && spec.is_some_and(|spec| every_app_container_succeeded(spec, status))
    {
        return Ok(());
    }
    Err(format!(
        "pod {name} is neither being deleted nor finished (phase {phase}, restartPolicy \
         {policy}): the kubelet stops and starts it again in place, as after a sandbox \
         recreation"
    ))
}

/// How long until the deletion's grace period of `pod` (the pod of `uid` among node
/// `node`'s, if listed) ends at `now`, for the cleanup sidecar's deadline (issue 39): the
/// API server sets `deletionTimestamp` to the deletion's time plus the grace period, and
/// the kubelet, which counts from when it sees the deletion, kills no earlier. Zero once
/// it has passed. A pod that is not being deleted has no such end in its object: the
/// kubelet ends it on its own (eviction, `activeDeadlineSeconds`, node shutdown) with a
/// grace period it does not publish, and the sidecar keeps its own deadline.
pub fn grace_left(
    pod: Option<&Pod>,
    uid: &str,
    node: &str,
    now: DateTime<Utc>,
) -> Result<std::time::Duration, String> {
    let Some(pod) = pod else {
        return Err(format!(
            "the API server lists no pod of uid {uid} on node {node}"
        ));
    };
    let Some(end) = &pod.metadata.deletion_timestamp else {
        return Err(
            "the pod is not being deleted: the kubelet ends it on its own, with a \
                    grace period its object does not show"
                .to_owned(),
        );
    };
    Ok(end
        .0
        .signed_duration_since(now)
        .to_std()
        .unwrap_or_default())
}

/// Every app container has a status that says it exited 0, and none has a policy of its
/// own that could start it again (a container-level `restartPolicy`, restart rules).
fn every_app_container_succeeded(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    status: Option<&k8s_openapi::api::core::v1::PodStatus>,
) -> bool {
    let statuses = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    !spec.containers.is_empty()
        && spec.containers.iter().all(|container| {
            container.restart_policy.is_none()
                && container.restart_policy_rules.is_none()
                && statuses.iter().any(|s| {
                    s.name == container.name
                        && s.state
                            .as_ref()
                            .and_then(|state| state.terminated.as_ref())
                            .is_some_and(|t| t.exit_code == 0)
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const UID: &str = "7d1c2a4e-0000-4000-8000-000000000031";

    fn pod(policy: &str, extra: Value) -> Pod {
        let mut pod = json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": UID},
            "spec": {
                "nodeName": "node-a",
                "restartPolicy": policy,
                "initContainers": [{"name": "prestop-cleanup", "image": "c", "restartPolicy": "Always"}],
                "containers": [{"name": "app", "image": "a"}, {"name": "uploader", "image": "u"}],
            },
            "status": {"phase": "Running"},
        });
        json_patch::merge(&mut pod, &extra);
        serde_json::from_value(pod).expect("a pod")
    }

    fn terminated(name: &str, code: i32) -> Value {
        json!({"name": name, "image": "x", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"terminated": {"exitCode": code}}})
    }

    fn running(name: &str, restarts: i32) -> Value {
        json!({"name": name, "image": "x", "imageID": "", "ready": true, "restartCount": restarts,
               "state": {"running": {}}})
    }

    fn now() -> DateTime<Utc> {
        "2026-12-05T12:00:00Z".parse().expect("a time")
    }

    #[test]
    fn the_grace_left_is_the_deletions_end_and_only_that() {
        let ms = std::time::Duration::from_millis;
        let deleted = |at: &str| pod("Never", json!({"metadata": {"deletionTimestamp": at}}));
        assert_eq!(
            grace_left(Some(&deleted("2026-12-05T12:00:30Z")), UID, "node-a", now()),
            Ok(ms(30_000))
        );
        // Passed: the kubelet still gives its least 2 s, which the sidecar adds itself.
        assert_eq!(
            grace_left(Some(&deleted("2026-12-05T11:59:00Z")), UID, "node-a", now()),
            Ok(ms(0))
        );
        // Ended by the kubelet alone (here its deadline ran out): no end in the object.
        let evicted = pod(
            "Never",
            json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                              "reason": "TerminationByKubelet"}]}}),
        );
        assert!(decide(Some(&evicted), UID, "node-a", now()).is_ok());
        let why = grace_left(Some(&evicted), UID, "node-a", now()).unwrap_err();
        assert!(why.contains("not being deleted"), "{why}");
        let why = grace_left(None, UID, "node-a", now()).unwrap_err();
        assert!(why.contains("lists no pod of uid"), "{why}");
    }

    fn decided(pod: &Pod) -> Result<(), String> {
        decide(Some(pod), UID, "node-a", now())
    }

    /// The kubelet's order in a sandbox recreation (`computePodActions`: `KillPod` +
    /// `CreateSandbox`), as the API server shows it at each step: the pod stays `Running`
    /// and undeleted while every container is stopped, our sidecar last, and started
    /// again. At no step is it ending.
    #[test]
    fn a_sandbox_recreation_is_not_the_pods_end() {
        for policy in ["OnFailure", "Always"] {
            for statuses in [
                json!([running("app", 0), running("uploader", 0)]),
                // The app containers killed (exit 137), the sidecar now signalled.
                json!([terminated("app", 137), terminated("uploader", 137)]),
                // A container that ran to the end before: exit 0, but the other failed.
                json!([terminated("app", 0), terminated("uploader", 137)]),
                // Started again in the new sandbox.
                json!([running("app", 1), running("uploader", 1)]),
            ] {
                let pod = pod(policy, json!({"status": {"containerStatuses": statuses}}));
                let why = decided(&pod).expect_err("not ending");
                assert!(
                    why.contains("pod ml/train is neither being deleted nor finished"),
                    "{why}"
                );
                assert!(why.contains(&format!("restartPolicy {policy}")), "{why}");
            }
        }
    }

    /// Once the deletion has begun the kubelet stops the pod for good, whatever its
    /// policy and whatever it restarted before.
    #[test]
    fn a_pod_whose_deletion_began_is_ending() {
        for policy in ["OnFailure", "Always"] {
            let pod = pod(
                policy,
                json!({"metadata": {"deletionTimestamp": "2026-12-05T12:00:00Z"},
                       "status": {"containerStatuses": [running("app", 3), running("uploader", 0)]}}),
            );
            assert_eq!(decided(&pod), Ok(()));
        }
    }

    #[test]
    fn a_finished_pod_is_ending() {
        for phase in ["Succeeded", "Failed"] {
            let pod = pod("OnFailure", json!({"status": {"phase": phase}}));
            assert_eq!(decided(&pod), Ok(()));
        }
        for phase in ["Pending", "Running", "Unknown"] {
            let pod = pod("OnFailure", json!({"status": {"phase": phase}}));
            assert!(decided(&pod).is_err(), "{phase}");
        }
    }

    /// `OnFailure`: once every app container exited 0 the kubelet starts none again and
    /// stops the sidecars, before the phase says `Succeeded`. One container still to
    /// finish, a failure, an `Always` pod, or a container policy of its own: not yet.
    #[test]
    fn on_failure_with_every_app_container_done_is_ending() {
        let done = json!({"status": {"containerStatuses": [terminated("app", 0), terminated("uploader", 0)]}});
        assert_eq!(decided(&pod("OnFailure", done.clone())), Ok(()));
        assert!(decided(&pod("Always", done.clone())).is_err());
        let one_left = json!({"status": {"containerStatuses": [terminated("app", 0), running("uploader", 0)]}});
        assert!(decided(&pod("OnFailure", one_left)).is_err());
        let unreported = json!({"status": {"containerStatuses": [terminated("app", 0)]}});
        assert!(decided(&pod("OnFailure", unreported)).is_err());
        let mut own_policy = pod("OnFailure", done);
        own_policy.spec.as_mut().expect("spec").containers[1].restart_policy =
            Some("Always".into());
        assert!(decided(&own_policy).is_err());
    }

    /// A pod the API server does not list on this node: force-deleted, or the agent was
    /// given another node's name. Only the first is safe, so neither is cleaned here.
    #[test]
    fn a_pod_the_api_server_does_not_list_is_not_known_to_end() {
        let why = decide(None, UID, "node-a", now()).expect_err("unknown");
        assert!(
            why.contains(&format!("no pod of uid {UID} on node node-a")),
            "{why}"
        );
    }

    /// An unset policy is the API server's default, `Always`.
    #[test]
    fn an_unset_policy_restarts() {
        let mut pod = pod(
            "OnFailure",
            json!({"status": {"containerStatuses": [terminated("app", 0), terminated("uploader", 0)]}}),
        );
        pod.spec.as_mut().expect("spec").restart_policy = None;
        let why = decided(&pod).expect_err("Always");
        assert!(why.contains("restartPolicy Always"), "{why}");
    }

    /// Class 1 of issue 38: the kubelet evicts the pod (node pressure) or shuts the node
    /// down. It writes `DisruptionTarget` (`TerminationByKubelet`) and only then kills the
    /// containers, the sidecar last; the phase stays `Running` until all have stopped.
    #[test]
    fn a_pod_the_kubelet_evicts_is_ending_while_its_phase_still_says_running() {
        let disrupted = |reason: &str, extra: Value| {
            let mut status = json!({"status": {"phase": "Running",
                "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason}],
                "containerStatuses": [terminated("app", 137), running("uploader", 0)]}});
            json_patch::merge(&mut status, &extra);
            pod("OnFailure", status)
        };
        assert_eq!(
            decided(&disrupted("TerminationByKubelet", json!({}))),
            Ok(())
        );
        // The API server's reasons come with a deletion, which says the pod is ending.
        // Alone (a delete that failed), the condition stays `True` for minutes while the
        // pod runs on, and a sandbox recreation then must not empty its directory.
        for reason in [
            "EvictionByEvictionAPI",
            "PreemptionByScheduler",
            "DeletionByTaintManager",
        ] {
            let why = decided(&disrupted(reason, json!({}))).expect_err(reason);
            assert!(why.contains("restartPolicy OnFailure"), "{reason}: {why}");
            let deleted = json!({"metadata": {"deletionTimestamp": "2026-12-05T12:00:30Z"}});
            assert_eq!(decided(&disrupted(reason, deleted)), Ok(()), "{reason}");
        }
        let not_true = pod(
            "OnFailure",
            json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "False",
                                              "reason": "TerminationByKubelet"}]}}),
        );
        assert!(decided(&not_true).is_err());
    }

    /// Class 1 of issue 38: a pod's `activeDeadlineSeconds` run out. The kubelet kills it
    /// with no condition and the phase held at `Running`: the node's clock decides, as
    /// the kubelet's does.
    #[test]
    fn a_pod_past_its_active_deadline_is_ending() {
        let started = |seconds_ago: i64| {
            let at = now() - k8s_openapi::chrono::Duration::seconds(seconds_ago);
            let mut pod = pod("OnFailure", json!({"spec": {"activeDeadlineSeconds": 60}}));
            pod.status.as_mut().expect("status").start_time =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
            pod
        };
        assert_eq!(decided(&started(60)), Ok(()));
        assert_eq!(decided(&started(3600)), Ok(()));
        assert!(decided(&started(59)).is_err());
        // Not started yet: no deadline runs.
        let mut unstarted = started(3600);
        unstarted.status.as_mut().expect("status").start_time = None;
        assert!(decided(&unstarted).is_err());
    }
}
