//! Which operating system a pod template runs on. The cleanup (the static Linux program,
//! `openat2`, `/proc/self/mountinfo`), the shell fix and the host path rules are Linux
//! only: a Windows pod is left alone, with one warning saying why, rather than given
//! hooks it cannot run and `host path /*` warnings about paths like `C:\data`.

use crate::json::Value;

/// The well-known node label of the operating system (and its pre-1.14 beta name).
const OS_LABELS: [&str; 2] = ["kubernetes.io/os", "beta.kubernetes.io/os"];

/// Where the pod `spec` says it runs on Windows only, as the field that says so; `None`
/// when it may run on Linux. `spec.os.name`, a `nodeSelector` label, or a required node
/// affinity every one of whose terms (they are ORed) admits Windows nodes only.
pub(in crate::mutation) fn windows_only(spec: &Value) -> Option<&'static str> {
    if spec.pointer("/os/name").and_then(Value::as_str) == Some("windows") {
        return Some("spec.os.name: windows");
    }
    let selector = spec.get("nodeSelector");
    if OS_LABELS.iter().any(|label| {
        selector.and_then(|s| s.get(*label)).and_then(Value::as_str) == Some("windows")
    }) {
        return Some("nodeSelector kubernetes.io/os: windows");
    }
    let terms = spec
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
        .filter(|terms| !terms.is_empty())?;
    terms
        .iter()
        .all(term_admits_windows_only)
        .then_some("a required node affinity on kubernetes.io/os: windows")
}

/// A node selector term (its expressions are ANDed) with an `In` on the OS label whose
/// only value is `windows`.
fn term_admits_windows_only(term: &Value) -> bool {
    let expressions = term.get("matchExpressions").and_then(Value::as_array);
    expressions.into_iter().flatten().any(|expression| {
        let key = expression.get("key").and_then(Value::as_str);
        let values = expression.get("values").and_then(Value::as_array);
        key.is_some_and(|key| OS_LABELS.contains(&key))
            && expression.get("operator").and_then(Value::as_str) == Some("In")
            && values.is_some_and(|values| {
                !values.is_empty() && values.iter().all(|v| v.as_str() == Some("windows"))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    fn affinity(terms: Value) -> Value {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": terms}}}})
    }

    fn os_in(values: Value) -> Value {
        json!({"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": values}]})
    }

    #[test]
    fn windows_only_where_every_way_to_schedule_is_windows() {
        for (spec, windows) in [
            (json!({}), false),
            (json!({"os": {"name": "windows"}}), true),
            (json!({"os": {"name": "linux"}}), false),
            (
                json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
                true,
            ),
            (
                json!({"nodeSelector": {"beta.kubernetes.io/os": "windows"}}),
                true,
            ),
            (
                json!({"nodeSelector": {"kubernetes.io/os": "linux"}}),
                false,
            ),
            (affinity(json!([os_in(json!(["windows"]))])), true),
            (affinity(json!([os_in(json!(["windows", "linux"]))])), false),
            // Terms are ORed: one that admits Linux nodes is enough to run there.
            (
                affinity(json!([os_in(json!(["windows"])), {"matchExpressions": []}])),
                false,
            ),
            (
                affinity(json!([os_in(json!(["windows"])), os_in(json!(["linux"]))])),
                false,
            ),
            (affinity(json!([])), false),
            (
                affinity(json!([{"matchExpressions": [{"key": "kubernetes.io/os",
                    "operator": "NotIn", "values": ["windows"]}]}])),
                false,
            ),
        ] {
            assert_eq!(windows_only(&spec).is_some(), windows, "{spec}");
        }
    }
}
