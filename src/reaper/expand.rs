//! The directory a `subPathExpr` names, for one pod, when it can be known for certain.
//!
//! The webhook sees a template and must treat `subPathExpr: $(POD_NAME)` as *some*
//! directory below the volume. The reaper sees the pod itself, so it can expand the
//! expression as the kubelet does (`$(VAR)` from the container's `env`, `$$` a literal
//! `$`) — but only from sources it can read exactly: a literal `value` without `$`, or a
//! `fieldRef` to the pod's name, namespace, uid, node or service account. Anything else
//! (`envFrom`, a `configMapKeyRef`, a value that itself expands, a duplicate or undefined
//! name, a malformed reference) is `None`: the directory stays unknown, and an unknown
//! directory is never emptied and counts as "in use" for every directory it might be.

use crate::json::Value;
use crate::mutation::targets::normalize;

/// The expanded, normalized sub path without leading `/` (`""` for the volume's own
/// directory), or `None` when it cannot be known for certain.
pub fn sub_path_expr(expr: &str, container: &Value, pod: &Value) -> Option<String> {
    let expanded = expand(expr, container, pod)?;
    // The kubelet refuses an absolute result or one with `..`; so do we.
    if expanded.starts_with('/') || expanded.split('/').any(|segment| segment == "..") {
        return None;
    }
    if expanded.chars().any(char::is_control) {
        return None;
    }
    let cleaned = normalize(&format!("/{expanded}"))?;
    Some(cleaned.trim_start_matches('/').to_owned())
}

/// The host directory a target's `--host` names (`$(VAR)` syntax: a `subPathExpr` kept
/// verbatim, every other `$` written `$$`), expanded as [`sub_path_expr`] expands, and
/// normalized; `None` when it cannot be known for certain.
pub fn host_text(text: &str, container: &Value, pod: &Value) -> Option<String> {
    normalize(&expand(text, container, pod)?)
}

/// `$(VAR)` from the container's `env`, `$$` a literal `$`.
fn expand(expr: &str, container: &Value, pod: &Value) -> Option<String> {
    let mut expanded = String::new();
    let mut rest = expr;
    while let Some(dollar) = rest.find('$') {
        expanded.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            expanded.push('$');
            rest = tail;
            continue;
        }
        let inner = after.strip_prefix('(')?;
        let end = inner.find(')')?;
        expanded.push_str(&variable(&inner[..end], container, pod)?);
        rest = &inner[end + 1..];
    }
    expanded.push_str(rest);
    Some(expanded)
}

/// The value of `$(name)` in `container`, from `env` alone.
fn variable(name: &str, container: &Value, pod: &Value) -> Option<String> {
    let env = container.get("env").and_then(Value::as_array)?;
    let mut entries = env
        .iter()
        .filter(|e| e.get("name").and_then(Value::as_str) == Some(name));
    let entry = entries.next()?;
    if entries.next().is_some() {
        return None;
    }
    if let Some(value) = entry.get("value").filter(|v| !v.is_null()) {
        let value = value.as_str()?;
        return (!value.contains('$')).then(|| value.to_owned());
    }
    let field = entry
        .get("valueFrom")?
        .get("fieldRef")?
        .get("fieldPath")?
        .as_str()?;
    let value = match field {
        "metadata.name" => pod.pointer("/metadata/name"),
        "metadata.namespace" => pod.pointer("/metadata/namespace"),
        "metadata.uid" => pod.pointer("/metadata/uid"),
        "spec.nodeName" => pod.pointer("/spec/nodeName"),
        "spec.serviceAccountName" => pod.pointer("/spec/serviceAccountName"),
        _ => None,
    }?;
    value.as_str().filter(|v| !v.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::sub_path_expr;
    use crate::json::json;

    fn pod() -> crate::json::Value {
        json!({"metadata": {"name": "job-x7k2p", "namespace": "batch", "uid": "1-2"},
               "spec": {"nodeName": "node-a"}})
    }

    fn container(env: crate::json::Value) -> crate::json::Value {
        json!({"name": "app", "env": env})
    }

    #[test]
    fn expands_what_the_pod_itself_says() {
        let c = container(json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
            {"name": "KIND", "value": "work"},
        ]));
        let expand = |e: &str| sub_path_expr(e, &c, &pod());
        assert_eq!(expand("$(POD_NAME)").as_deref(), Some("job-x7k2p"));
        assert_eq!(
            expand("$(NS)/$(KIND)/$(POD_NAME)").as_deref(),
            Some("batch/work/job-x7k2p")
        );
        assert_eq!(expand("a$$b/./c/").as_deref(), Some("a$b/c"));
        assert_eq!(expand("plain").as_deref(), Some("plain"));
    }

    #[test]
    fn anything_not_certain_is_unknown() {
        let c = container(json!([
            {"name": "DUP", "value": "a"}, {"name": "DUP", "value": "b"},
            {"name": "NESTED", "value": "$(POD_NAME)"},
            {"name": "UP", "value": ".."},
            {"name": "ABS", "value": "/etc"},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NUM", "value": 3},
        ]));
        for expr in [
            "$(DUP)",
            "$(NESTED)",
            "$(UP)",
            "x/$(UP)/y",
            "$(ABS)",
            "$(CM)",
            "$(IP)",
            "$(NUM)",
            "$(UNDEFINED)",
            "$(UNCLOSED",
            "$x",
            "..",
            "/abs",
            "a/\n",
        ] {
            assert_eq!(sub_path_expr(expr, &c, &pod()), None, "{expr:?}");
        }
        // No env at all: every reference is unknown (envFrom may define it).
        assert_eq!(
            sub_path_expr("$(POD_NAME)", &json!({"envFrom": []}), &pod()),
            None
        );
    }
}
