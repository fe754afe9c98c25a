//! The pod's containers as the stages see them. One owner, below every stage that walks
//! them (`pod`, `grace`, `sidecar`), so none of those imports another for it.

use crate::json::Value;

/// The app containers of a pod spec (`containers`); none when absent or malformed.
pub(super) fn app_containers(spec: &Value) -> &[Value] {
    spec.get("containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}
