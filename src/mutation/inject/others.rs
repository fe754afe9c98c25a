//! Lists of ours inside our own containers (`env`, `volumeMounts`) that admission plugins
//! may add to before we see the Pod — the ServiceAccount token's mount, an Indexed Job's
//! `JOB_COMPLETION_INDEX` — shared by the sidecar and the installer, so that a Pod made
//! from a template we injected keeps what they added and needs no patch.

use crate::json::Value;

/// A list of ours (`env`, `volumeMounts`) after others may have added to it: kept as it
/// is when all our entries are there in order and no other entry has the key of one of
/// ours (same env name, same normalized mountPath); otherwise ours, then theirs minus
/// the clashing ones. `None` when there is nothing to hold.
pub(super) fn with_others(
    existing: Option<&Value>,
    ours: &[Value],
    key: impl Fn(&Value) -> Option<Value>,
) -> Option<Value> {
    let existing: &[Value] = existing
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let our_keys: Vec<Option<Value>> = ours.iter().map(&key).collect();
    let theirs: Vec<&Value> = existing.iter().filter(|e| !ours.contains(e)).collect();
    let clash = theirs.iter().any(|e| our_keys.contains(&key(e)));
    let mut remaining = ours.iter().peekable();
    for entry in existing {
        if remaining.peek() == Some(&entry) {
            remaining.next();
        }
    }
    if remaining.peek().is_none() && !clash {
        return (!existing.is_empty()).then(|| Value::Array(existing.to_vec()));
    }
    let mut list: Vec<Value> = ours.to_vec();
    list.extend(
        theirs
            .into_iter()
            .filter(|e| !our_keys.contains(&key(e)))
            .cloned(),
    );
    (!list.is_empty()).then_some(Value::Array(list))
}
