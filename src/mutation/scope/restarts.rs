//! docs/DESIGN.md#where-the-cleanup-runs: preStop is a container-stop hook, not a pod-end hook.
//! Where may the kubelet kill a container and start it again *in the same pod*, on the same
//! volumes? There an exec-hook cleanup empties the directory the next run starts on.
//!
//! Checked against the kubelet's source (kubernetes/kubernetes):
//! - `killContainer` → `executePreStopHook` (pkg/kubelet/kuberuntime/kuberuntime_container.go)
//!   runs the preStop before every kill the kubelet makes, whatever the reason.
//! - `computePodActions` (pkg/kubelet/kuberuntime/kuberuntime_manager.go) kills a running
//!   container that fails its liveness or startup probe, and starts it again when
//!   `shouldRestartOnFailure(pod)`: pod `restartPolicy` other than `Never`.
//! - `ShouldContainerBeRestarted` (pkg/kubelet/container/helpers.go) starts an exited
//!   container again unless `Never`, or `OnFailure` after exit 0; an unset policy takes
//!   the default branch (`Always`).
//! - Container restart rules (KEP-5307, 1.34): `ContainerShouldRestart` and
//!   `IsContainerRestartable` (pkg/api/v1/pod/util.go) let a container-level
//!   `restartPolicy` override the pod's, and a `restartPolicyRules` rule with action
//!   `Restart` restart the container even in a `Never` pod.
//! - `RestartAllContainers` (KEP-5532, 1.35): a rule on *any* container of the pod (init,
//!   sidecar or app) kills every container — preStop best-effort, SIGTERM included — and
//!   starts them all again in place, volumes kept. So a rule anywhere rules out every
//!   injected cleanup, the sidecar's too: it cleans on that SIGTERM.
//! - In-place resize (`computePodResizeAction`): a container whose `resizePolicy` says
//!   `RestartContainer` for a resized resource is killed and started again. The API server
//!   refuses that with `restartPolicy: Never` (kubernetes#118768), but a container-level
//!   policy may change it, so any value other than `NotRequired` counts here.
//!
//! Whether the kubelet applies a container-level `Never` after a *probe* kill in an
//! `Always` pod is not something we could confirm, so only the pod's `Never` with no
//! container-level policy other than `Never` passes (fail closed).
//!
//! Known limits, not closable at admission (Pod UPDATEs are not reviewed, docs/DESIGN.md#scope): a
//! running container whose definition changed (`containerChanged`, e.g. a Pod UPDATE of
//! `image`) is restarted "regardless of the restart policy", and one the runtime reports
//! in state Unknown is killed before it is started again.

use crate::json::Value;

/// Why the kubelet may start `container` (an app container of `spec`) again in its pod
/// after killing it, as a phrase naming the policy (`restartPolicy OnFailure`); `None`
/// when it never does, so its preStop runs only when it stops for good.
pub fn restarts_in_pod(spec: &Value, container: &Value) -> Option<String> {
    if let Some(rules) = in_place_restarts(spec) {
        return Some(rules);
    }
    match container.get("restartPolicy") {
        None | Some(Value::Null) => {}
        Some(Value::String(policy)) if policy == "Never" => {}
        Some(other) => return Some(format!("container restartPolicy {}", text(other))),
    }
    // The kubelet's default branch: an unset policy restarts.
    if let Some(policy) = pod_restarts_in_place(spec) {
        return Some(policy);
    }
    let resize = container.get("resizePolicy").and_then(Value::as_array);
    resize
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.get("restartPolicy"))
        .find(|policy| policy.as_str() != Some("NotRequired"))
        .map(|policy| format!("resizePolicy {}", text(policy)))
}

/// docs/DESIGN.md#the-sidecar: the pod's own `restartPolicy`, as a phrase, when it is not
/// `Never`. Then a sandbox recreation (`computePodActions`: `CreateSandbox` unless
/// `!shouldRestartOnFailure(pod)` once a container ran) stops every container, our sidecar
/// with SIGTERM included, and starts them all again on the same volumes: the sidecar
/// cannot tell that from the pod's end, so it asks the node (`--restartable`, issue 31).
pub fn pod_restarts_in_place(spec: &Value) -> Option<String> {
    match spec.get("restartPolicy") {
        Some(Value::String(policy)) if policy == "Never" => None,
        None | Some(Value::Null) => Some("restartPolicy Always".to_owned()),
        Some(other) => Some(format!("restartPolicy {}", text(other))),
    }
}

/// A `restartPolicyRules` anywhere in the pod: the kubelet may restart containers in
/// place, every one of them with `RestartAllContainers`. Names the first container.
pub fn in_place_restarts(spec: &Value) -> Option<String> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|key| spec.get(key).and_then(Value::as_array))
        .flatten()
        .find(|c| {
            c.get("restartPolicyRules").is_some_and(|rules| {
                !rules.is_null() && rules.as_array().is_none_or(|r| !r.is_empty())
            })
        })
        .map(|c| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            format!("restartPolicyRules of {name:?}")
        })
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    #[test]
    fn only_never_without_restarting_overrides_passes() {
        let app = json!({"name": "app"});
        let cases = [
            (json!({"restartPolicy": "Never"}), app.clone(), None),
            (json!({}), app.clone(), Some("restartPolicy Always")),
            (
                json!({"restartPolicy": "Always"}),
                app.clone(),
                Some("restartPolicy Always"),
            ),
            (
                json!({"restartPolicy": "OnFailure"}),
                app.clone(),
                Some("restartPolicy OnFailure"),
            ),
            (
                json!({"restartPolicy": 1}),
                app.clone(),
                Some("restartPolicy 1"),
            ),
            (
                json!({"restartPolicy": "Never"}),
                json!({"name": "app", "restartPolicy": "Never"}),
                None,
            ),
            (
                json!({"restartPolicy": "Never"}),
                json!({"name": "app", "restartPolicy": "OnFailure"}),
                Some("container restartPolicy OnFailure"),
            ),
            // A container-level Never in an Always pod: not proven for probe kills.
            (
                json!({"restartPolicy": "Always"}),
                json!({"name": "app", "restartPolicy": "Never"}),
                Some("restartPolicy Always"),
            ),
            (
                json!({"restartPolicy": "Never"}),
                json!({"name": "app", "resizePolicy": [
                    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                    {"resourceName": "memory", "restartPolicy": "RestartContainer"}]}),
                Some("resizePolicy RestartContainer"),
            ),
            (
                json!({"restartPolicy": "Never"}),
                json!({"name": "app", "resizePolicy": [{"resourceName": "cpu"}]}),
                None,
            ),
        ];
        for (spec, container, expected) in cases {
            assert_eq!(
                restarts_in_pod(&spec, &container).as_deref(),
                expected,
                "{spec} {container}"
            );
        }
    }

    #[test]
    fn restart_rules_on_any_container_restart_them_all() {
        let rules = json!([{"action": "RestartAllContainers",
            "exitCodes": {"operator": "In", "values": [88]}}]);
        for key in ["initContainers", "containers"] {
            let mut spec = json!({"restartPolicy": "Never",
                "containers": [{"name": "app"}], "initContainers": []});
            spec[key].as_array_mut().unwrap().push(
                json!({"name": "watcher", "restartPolicy": "Never", "restartPolicyRules": rules}),
            );
            assert_eq!(
                restarts_in_pod(&spec, &spec["containers"][0]).as_deref(),
                Some("restartPolicyRules of \"watcher\""),
                "{key}"
            );
        }
        let empty = json!({"restartPolicy": "Never",
            "containers": [{"name": "app", "restartPolicyRules": []}]});
        assert_eq!(restarts_in_pod(&empty, &empty["containers"][0]), None);
    }
}
