//! Named entries of a pod's lists (init containers, volumes, volume mounts): found by
//! name, merged key by key, added or taken out, without touching the user's entries.
//!
//! What the installer ([`super::delivery`]) and the node agent's socket
//! ([`super::node_agent`]) both need to make a pod spec match what they want: a second
//! pass over their own result changes nothing, and a key the API server added to one of
//! our entries after our patch (`imagePullPolicy`, a mount's `mountPropagation`) stays.

use crate::json::{Map, Value};

pub(super) fn name_of(value: &Value) -> Option<&str> {
    value.get("name").and_then(Value::as_str)
}

/// The entries of the list `spec[key]`; none when absent or not a list.
pub(super) fn list<'a>(spec: &'a Value, key: &str) -> &'a [Value] {
    spec.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `base`, else `base-2`, `base-3`, … : the first name `taken` does not hold.
pub(super) fn free_name(base: &str, taken: &[&str]) -> String {
    (1..)
        .map(|n| {
            if n == 1 {
                base.to_owned()
            } else {
                format!("{base}-{n}")
            }
        })
        .find(|name| !taken.contains(&name.as_str()))
        .unwrap_or_default()
}

/// The first of `base`, `base-2`, … that no container of the pod (init, app or
/// ephemeral) is named: the installer's and the sidecar's names when the pod has none of
/// ours yet.
pub(super) fn free_container_name(spec: &Value, base: &str) -> String {
    let taken: Vec<&str> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|key| list(spec, key))
        .filter_map(name_of)
        .collect();
    free_name(base, &taken)
}

/// Sets the entries of `wanted` on `existing` that differ, leaving every other key.
pub(super) fn merge(existing: &mut Map<String, Value>, wanted: Map<String, Value>) {
    for (key, value) in wanted {
        if existing.get(&key) != Some(&value) {
            existing.insert(key, value);
        }
    }
}

/// Gives each app container that `needs` it our `mount` of `volume`, and takes it from the
/// others; a container whose mount of that name is a user's (`is_ours` says no) is never
/// touched.
pub(super) fn update_our_mounts(
    spec: &mut Value,
    volume: &str,
    mount: &Value,
    needs: &[bool],
    is_ours: &dyn Fn(&Value) -> bool,
) {
    let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) else {
        return;
    };
    for (index, container) in containers.iter_mut().enumerate() {
        let need = needs.get(index).copied().unwrap_or(false);
        // A user's mount that only shares our volume's name is never touched.
        let ours = list(container, "volumeMounts")
            .iter()
            .all(|m| name_of(m) != Some(volume) || is_ours(m));
        if ours {
            update_named(
                container,
                "volumeMounts",
                volume,
                mount.as_object().filter(|_| need),
            );
        }
    }
}

/// In the array `owner[key]`, the element named `name`: merged with `wanted`, appended
/// when absent, or removed when `wanted` is `None` (the array too, once empty).
pub(super) fn update_named(
    owner: &mut Value,
    key: &str,
    name: &str,
    wanted: Option<&Map<String, Value>>,
) {
    let Some(owner) = owner.as_object_mut() else {
        return;
    };
    let position = owner
        .get(key)
        .and_then(Value::as_array)
        .and_then(|items| items.iter().position(|item| name_of(item) == Some(name)));
    match (wanted, position) {
        (None, None) => {}
        (None, Some(index)) => remove_at(owner, key, index),
        (Some(wanted), Some(index)) => {
            if let Some(existing) = owner[key][index].as_object_mut() {
                merge(existing, wanted.clone());
            }
        }
        (Some(wanted), None) => {
            let slot = owner.entry(key).or_insert(Value::Null);
            if slot.is_null() {
                *slot = Value::Array(Vec::new());
            }
            if let Some(items) = slot.as_array_mut() {
                items.push(Value::Object(wanted.clone()));
            }
        }
    }
}

/// Removes `owner[key][index]`, and the array when that leaves it empty.
pub(super) fn remove_at(owner: &mut Map<String, Value>, key: &str, index: usize) {
    let now_empty = owner
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .is_some_and(|items| {
            items.remove(index);
            items.is_empty()
        });
    if now_empty {
        owner.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    #[test]
    fn an_entry_is_merged_key_by_key_added_and_taken_out_with_its_empty_list() {
        let mut spec =
            json!({"volumes": [{"name": "user"}, {"name": "ours", "emptyDir": {}, "extra": 1}]});
        let wanted = json!({"name": "ours", "emptyDir": {"sizeLimit": "16Mi"}});
        update_named(&mut spec, "volumes", "ours", wanted.as_object());
        assert_eq!(
            spec,
            json!({"volumes": [{"name": "user"}, {"name": "ours", "emptyDir": {"sizeLimit": "16Mi"}, "extra": 1}]}),
            "merged: a key the API server added stays"
        );
        update_named(&mut spec, "volumes", "ours", None);
        assert_eq!(spec, json!({"volumes": [{"name": "user"}]}));
        update_named(&mut spec, "volumes", "user", None);
        assert_eq!(spec, json!({}), "the list goes once empty");
        update_named(&mut spec, "volumes", "ours", wanted.as_object());
        assert_eq!(spec, json!({"volumes": [wanted]}), "appended");
    }

    #[test]
    fn a_container_name_is_free_in_every_list_of_containers() {
        let spec = json!({
            "initContainers": [{"name": "x"}],
            "containers": [{"name": "x-2"}],
            "ephemeralContainers": [{"name": "x-3"}],
            "volumes": [{"name": "x-4"}],
        });
        assert_eq!(
            free_container_name(&spec, "x"),
            "x-4",
            "a volume's name is no container's"
        );
        assert_eq!(free_container_name(&spec, "y"), "y");
        assert_eq!(free_container_name(&json!({"containers": 5}), "x"), "x");
    }

    #[test]
    fn a_users_mount_of_our_volumes_name_is_never_touched() {
        let ours = json!({"name": "v", "mountPath": "/ours", "readOnly": true});
        let mut spec = json!({"containers": [
            {"name": "a"},
            {"name": "b", "volumeMounts": [{"name": "v", "mountPath": "/theirs"}]},
            {"name": "c", "volumeMounts": [ours.clone()]},
        ]});
        let is_ours = |m: &Value| m.get("mountPath").and_then(Value::as_str) == Some("/ours");
        update_our_mounts(&mut spec, "v", &ours, &[true, true, false], &is_ours);
        assert_eq!(
            spec,
            json!({"containers": [
                {"name": "a", "volumeMounts": [ours]},
                {"name": "b", "volumeMounts": [{"name": "v", "mountPath": "/theirs"}]},
                {"name": "c"},
            ]})
        );
    }
}
