//! Reading a request's object in one pass, without the parts the core never reads.
//!
//! `metadata.managedFields` is often the larger half of a real object and `status` can be
//! large on UPDATE; the core reads neither (it reads metadata, the pod template and
//! scalars of the spec) and the patch is a diff of the pod template. Skipping them while
//! parsing saves building and dropping those trees. `tests/core_properties.rs` checks that
//! the server path decides exactly as the core does on the whole object.

use crate::json::{Map, Value};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// An object as the core needs it: everything but `status` and `metadata.managedFields`.
#[derive(Debug)]
pub struct CoreObject(pub Value);

impl<'de> Deserialize<'de> for CoreObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Pruned {
            skip: &["status"],
            nested: Some(("metadata", &["managedFields"])),
        }
        .deserialize(deserializer)
        .map(CoreObject)
    }
}

/// A JSON value whose top-level keys in `skip` are dropped unread, and whose `nested.0`
/// member is read the same way with `nested.1` as its skip list.
#[derive(Clone, Copy)]
struct Pruned {
    skip: &'static [&'static str],
    nested: Option<(&'static str, &'static [&'static str])>,
}

impl<'de> DeserializeSeed<'de> for Pruned {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pruned {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Value, M::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.skip.contains(&key.as_str()) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = match self.nested {
                Some((name, skip)) if name == key => {
                    map.next_value_seed(Pruned { skip, nested: None })?
                }
                _ => map.next_value::<Value>()?,
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }

    // Anything but an object is kept as it is; the core will find no template in it.
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    #[test]
    fn drops_status_and_managed_fields_only() {
        let text = json!({
            "kind": "Job",
            "metadata": {"name": "j", "managedFields": [{"manager": "kubectl"}], "annotations": {"a": "1"}},
            "spec": {"template": {"metadata": {"managedFields": "kept: not top-level"}, "spec": {}}},
            "status": {"active": 1}
        })
        .to_string();
        let CoreObject(object) = serde_json::from_str(&text).unwrap();
        assert_eq!(
            object,
            json!({"kind": "Job", "metadata": {"name": "j", "annotations": {"a": "1"}},
                   "spec": {"template": {"metadata": {"managedFields": "kept: not top-level"}, "spec": {}}}})
        );
        let keys: Vec<&String> = object.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["kind", "metadata", "spec"], "order kept");
    }

    #[test]
    fn odd_shapes_are_kept() {
        for odd in [
            json!(null),
            json!(1),
            json!("x"),
            json!([1, {"a": 2}]),
            json!({"metadata": 5}),
        ] {
            let CoreObject(object) = serde_json::from_str(&odd.to_string()).unwrap();
            assert_eq!(object, odd);
        }
    }
}
