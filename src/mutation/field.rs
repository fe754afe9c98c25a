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

/// `Value::pointer` and `pointer_mut` by [`Field`] lookups: serde_json's allocate two
/// strings per token to unescape it, even when it holds no `~`.
pub(crate) trait At {
    fn at(&self, pointer: &str) -> Option<&Value>;
    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        let mut node = self;
        for token in tokens(pointer)? {
            node = match node {
                Value::Object(members) => members.field(&unescape(token))?,
                Value::Array(items) => items.get(index(token)?)?,
                _ => return None,
            };
        }
        Some(node)
    }

    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        let mut node = self;
        for token in tokens(pointer)? {
            node = match node {
                Value::Object(members) => members.field_mut(&unescape(token))?,
                Value::Array(items) => items.get_mut(index(token)?)?,
                _ => return None,
            };
        }
        Some(node)
    }
}

/// The raw tokens of a JSON Pointer: none for `""`, `None` unless it starts with `/`.
fn tokens(pointer: &str) -> Option<std::iter::Skip<std::str::Split<'_, char>>> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return None;
    }
    // `"".split('/')` yields one empty token, skipped like the one before the first `/`.
    Some(pointer.split('/').skip(1))
}

fn unescape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains('~') {
        token.replace("~1", "/").replace("~0", "~").into()
    } else {
        token.into()
    }
}

/// An array index as serde_json reads one: digits, no `+`, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
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
    use super::{At, Field};
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

    /// The same node as `pointer` and `pointer_mut`, escapes and bad indices included.
    #[test]
    fn the_same_node_as_pointer() {
        let value = json!({
            "a": {"b": [10, {"c/d": 1, "e~f": 2, "": 3}]},
            "x": "s",
            "01": 4,
        });
        for pointer in [
            "",
            "/",
            "/a",
            "/a/b",
            "/a/b/0",
            "/a/b/1",
            "/a/b/1/c~1d",
            "/a/b/1/e~0f",
            "/a/b/1/",
            "/a/b/01",
            "/a/b/+1",
            "/a/b/2",
            "/a/b/-1",
            "/a/b/x",
            "/x/0",
            "/01",
            "a",
            "/a/b/1/c/d",
            "/a/b/1/c~01d",
            "/nope",
            "/a/b/18446744073709551616",
        ] {
            assert_eq!(value.at(pointer), value.pointer(pointer), "{pointer}");
            let mut copy = value.clone();
            let expected = copy.pointer(pointer).cloned();
            assert_eq!(
                copy.at_mut(pointer).map(|v| v.clone()),
                expected,
                "{pointer}"
            );
        }
    }
}
