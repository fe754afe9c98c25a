//! Whether a pod has ended for good, as the kubelet means it (issue 38, class 1): the
//! node reaper's rule for emptying what a pod recorded while its object remains.
//!
//! A pod whose object is gone has ended (the reaper sees the watch's deletion). So has a
//! pod whose phase is terminal (`Succeeded` or `Failed`) with none of its containers
//! running: the kubelet starts nothing in it again, and it is the kubelet's own rule for
//! tearing down a terminated pod's `emptyDir` while its object remains. That covers the
//! ends the kubelet decides alone, with no deletion: a node-pressure eviction (DiskPressure,
//! the very case this project exists for), a graceful node shutdown, a pod's
//! `activeDeadlineSeconds`, and a `restartPolicy: Never` Job that succeeded or failed.
//! The Job controller keeps failed pods, a ReplicaSet never deletes an evicted one, and
//! podgc only acts above 12,500 terminated pods: waiting for the object to go is waiting
//! for ever.
//!
//! "None running" matters before Kubernetes 1.24, whose kubelet wrote the terminal phase
//! while the containers were still being stopped (since then `mergePodStatus` holds the
//! phase back until every container has stopped). A container whose state is unknown (no
//! status yet, or a status with no state) is taken as running.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

/// Whether `pod` has ended: its phase is terminal and no container of it (init, app,
/// ephemeral) is running or in an unknown state.
pub fn has_ended(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(status_has_ended)
}

/// [`has_ended`] of a pod's status (for a pod read as JSON: `status` alone is decoded).
pub fn status_has_ended(status: &PodStatus) -> bool {
    if !matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return false;
    }
    let statuses = [
        &status.init_container_statuses,
        &status.container_statuses,
        &status.ephemeral_container_statuses,
    ];
    statuses.into_iter().flatten().flatten().all(is_stopped)
}

/// Terminated, or waiting (in a terminal pod the kubelet starts nothing again).
fn is_stopped(status: &ContainerStatus) -> bool {
    status.state.as_ref().is_some_and(|state| {
        state.running.is_none() && (state.terminated.is_some() || state.waiting.is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "n", "uid": "u"},
            "spec": {"containers": [{"name": "app", "image": "a"}]},
            "status": status,
        }))
        .expect("a pod")
    }

    fn container(name: &str, state: Value) -> Value {
        json!({"name": name, "image": "x", "imageID": "", "ready": false, "restartCount": 0,
               "state": state})
    }

    #[test]
    fn a_terminal_pod_with_every_container_stopped_has_ended() {
        for phase in ["Succeeded", "Failed"] {
            let evicted = pod(json!({"phase": phase, "reason": "Evicted",
                "containerStatuses": [container("app", json!({"terminated": {"exitCode": 137}}))],
                "initContainerStatuses": [container("init", json!({"terminated": {"exitCode": 0}}))]}));
            assert!(has_ended(&evicted), "{phase}");
        }
        // Evicted before any container started (Pending → Failed): nothing runs.
        let never_started = pod(json!({"phase": "Failed", "reason": "Evicted"}));
        assert!(has_ended(&never_started));
        let waiting = pod(json!({"phase": "Failed",
            "containerStatuses": [container("app", json!({"waiting": {"reason": "ContainerCreating"}}))]}));
        assert!(has_ended(&waiting));
    }

    /// A running or restartable pod, or a terminal phase written while a container still
    /// runs (a kubelet before 1.24), has not ended.
    #[test]
    fn a_pod_that_may_still_run_has_not_ended() {
        for phase in ["Pending", "Running", "Unknown"] {
            let stopped = pod(json!({"phase": phase,
                "containerStatuses": [container("app", json!({"terminated": {"exitCode": 1}}))]}));
            assert!(!has_ended(&stopped), "{phase}");
        }
        let still_running = pod(json!({"phase": "Failed",
            "containerStatuses": [container("app", json!({"running": {}}))]}));
        assert!(!has_ended(&still_running));
        let sidecar_running = pod(json!({"phase": "Succeeded",
            "containerStatuses": [container("app", json!({"terminated": {"exitCode": 0}}))],
            "initContainerStatuses": [container("prestop-cleanup", json!({"running": {}}))]}));
        assert!(!has_ended(&sidecar_running));
        let debug_running = pod(json!({"phase": "Failed",
            "ephemeralContainerStatuses": [container("debug", json!({"running": {}}))]}));
        assert!(!has_ended(&debug_running));
        let unknown_state = pod(json!({"phase": "Failed",
            "containerStatuses": [container("app", json!({}))]}));
        assert!(!has_ended(&unknown_state));
        let no_status: Pod = serde_json::from_value(json!({"metadata": {"uid": "u"}})).unwrap();
        assert!(!has_ended(&no_status));
    }
}
