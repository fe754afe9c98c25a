//! Member lookup by a linear scan, for the small objects a pod spec is made of.
//!
//! `serde_json::Map` (an `IndexMap` with std's SipHash under `preserve_order`) hashes the
//! key for every lookup in a map of two or more members. A container or a volume mount
//! has a handful of members, and comparing that many short keys costs a fraction of one
//! SipHash; the core looks up a few hundred members per review. Larger maps (annotations,
//! labels) still go through the hash.

use serde_json::{Map, Value};

/// Up to this many members a scan beats hashing the key.
const SCAN_UP_TO: usize = 12;

pub(crate) trait Field {
    /// The member `key` of an object; `None` for anything else or a missing member.
    fn field(&self, key: &str) -> Option<&Value>;
    fn field_mut(&mut self, key: &str) -> Option<&mut Value>;
}

impl Field for Map<String, Value> {
    fn field(&self, key: &str) -> Option<&Value> {
        if self.len() > SCAN_UP_TO {
            return self.get(key);
        }
        self.iter()
            .find_map(|(name, value)| (name == key).then_some(value))
    }

    fn field_mut(&mut self, key: &str) -> Option<&mut Value> {
        if self.len() > SCAN_UP_TO {
            return self.get_mut(key);
        }
        self.iter_mut()
            .find_map(|(name, value)| (name == key).then_some(value))
    }
}

impl Field for Value {
    fn field(&self, key: &str) -> Option<&Value> {
        self.as_object()?.field(key)
    }

    fn field_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.as_object_mut()?.field_mut(key)
    }
}

#[cfg(test)]
mod tests {
    use super::Field;
    use serde_json::{json, Value};

    /// The same answer as `get` on small and large objects and on non-objects.
    #[test]
    fn the_same_member_as_get() {
        let large: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("k{i}"), json!(i))).collect();
        for value in [
            json!({"name": "a", "image": "b", "": 1, "nam": 2}),
            Value::Object(large),
            json!(["name"]),
            json!("name"),
            json!(null),
        ] {
            for key in ["name", "image", "", "nam", "names", "k0", "k39", "k40"] {
                assert_eq!(value.field(key), value.get(key), "{key} in {value}");
                let mut copy = value.clone();
                let expected = copy.get(key).cloned();
                assert_eq!(copy.field_mut(key).map(|v| v.clone()), expected);
            }
        }
    }
}
