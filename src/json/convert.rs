//! Reading and writing [`Value`]s with serde, and crossing to serde_json's own `Value`
//! where a library speaks only that (json_patch, serde_yaml, kube).

use super::{Map, Value};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Number;
use std::fmt;

/// Room for the members of an object read from the wire, taken with its first member:
/// serde_json tells no size in advance, and a Kubernetes object's maps (a container, a
/// pod spec, metadata) mostly hold 5 to 12 members, which a `Vec` growing from 4 reached
/// in one or two steps, each a copy. An empty object allocates nothing.
const FIRST_CAPACITY: usize = 8;

/// One of 64 bits for a key, from its length and last byte: equal keys have the same
/// mark, so a key whose mark is missing from an object's keys so far is not among them.
/// Reading an object looked for each new key among those before it (~80 scans a seed
/// review, to find a duplicate that almost never comes); with marks, only a key that
/// shares one with an earlier key is looked for. A container's keys (`name`, `image`,
/// `command`, `volumeMounts`, `terminationMessagePath`…) have nine different marks.
pub(super) fn key_mark(key: &str) -> u64 {
    let last = key.as_bytes().last().copied().unwrap_or(0) as usize;
    1 << (key.len().wrapping_mul(7).wrapping_add(last) & 63)
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => n.serialize(serializer),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(elements) => elements.serialize(serializer),
            Value::Object(map) => map.serialize(serializer),
        }
    }
}

impl Serialize for Map<String, Value> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Map<String, Value> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(map) => Ok(map),
            other => Err(serde::de::Error::custom(format!(
                "invalid type: {}, expected an object",
                other.kind()
            ))),
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(element) = seq.next_element()? {
            elements.push(element);
        }
        Ok(Value::Array(elements))
    }

    /// A key given twice keeps its first place and its last value, as serde_json's map does.
    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Value, A::Error> {
        let Some(first) = members.next_key::<String>()? else {
            return Ok(Value::Object(Map::new()));
        };
        let mut map = Map::with_capacity(FIRST_CAPACITY);
        let mut marks = key_mark(&first);
        map.push_new(first, members.next_value()?);
        while let Some(key) = members.next_key::<String>()? {
            let value = members.next_value()?;
            let mark = key_mark(&key);
            // A key whose mark no key before it has is new: appended without a scan.
            if marks & mark == 0 {
                map.push_new(key, value);
            } else {
                map.insert(key, value);
            }
            marks |= mark;
        }
        Ok(Value::Object(map))
    }
}

/// Any serializable value as a [`Value`] (what `json!` does with an expression).
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, serde_json::Error> {
    serde_json::to_value(value).map(Value::from)
}

/// A [`Value`] read as `T`.
pub fn from_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(serde_json::Value::from(value))
}

impl From<serde_json::Value> for Value {
    fn from(value: serde_json::Value) -> Value {
        match value {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => Value::Number(n),
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(elements) => {
                Value::Array(elements.into_iter().map(Value::from).collect())
            }
            serde_json::Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(key, value)| (key, Value::from(value)))
                    .collect(),
            ),
        }
    }
}

impl From<Value> for serde_json::Value {
    fn from(value: Value) -> serde_json::Value {
        match value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(b),
            Value::Number(n) => serde_json::Value::Number(n),
            Value::String(s) => serde_json::Value::String(s),
            Value::Array(elements) => {
                serde_json::Value::Array(elements.into_iter().map(Into::into).collect())
            }
            Value::Object(map) => serde_json::Value::Object(
                map.into_iter()
                    .map(|(key, value)| (key, value.into()))
                    .collect(),
            ),
        }
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

macro_rules! from_integer {
    ($($t:ty)*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(n.into())
            }
        }
    )*};
}

from_integer!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(elements: Vec<T>) -> Value {
        Value::Array(elements.into_iter().map(Into::into).collect())
    }
}

impl From<Map<String, Value>> for Value {
    fn from(map: Map<String, Value>) -> Value {
        Value::Object(map)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Value {
        value.map_or(Value::Null, Into::into)
    }
}

impl FromIterator<Value> for Value {
    fn from_iter<I: IntoIterator<Item = Value>>(elements: I) -> Value {
        Value::Array(elements.into_iter().collect())
    }
}

/// A finite number, or `Null` as serde_json makes of NaN and the infinities.
impl From<f64> for Value {
    fn from(n: f64) -> Value {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// What `json!` makes of an expression: the value itself, built straight into the model.
/// `serde_json::to_value` built serde_json's own tree first (its maps hashed, every
/// string allocated twice over for an array) and converted it after: 11 of a seed
/// review's allocations, for the installer's argv alone.
pub trait ToJson {
    fn to_json(&self) -> Value;
}

impl ToJson for Value {
    fn to_json(&self) -> Value {
        self.clone()
    }
}

impl ToJson for serde_json::Value {
    fn to_json(&self) -> Value {
        Value::from(self.clone())
    }
}

impl ToJson for Map<String, Value> {
    fn to_json(&self) -> Value {
        Value::Object(self.clone())
    }
}

impl ToJson for str {
    fn to_json(&self) -> Value {
        Value::String(self.to_owned())
    }
}

impl ToJson for String {
    fn to_json(&self) -> Value {
        Value::String(self.clone())
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Value {
        Value::Bool(*self)
    }
}

impl ToJson for f64 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

macro_rules! to_json_integer {
    ($($t:ty)*) => {$(
        impl ToJson for $t {
            fn to_json(&self) -> Value {
                Value::from(*self)
            }
        }
    )*};
}

to_json_integer!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

impl<T: ToJson + ?Sized> ToJson for &T {
    fn to_json(&self) -> Value {
        (**self).to_json()
    }
}

impl<T: ToJson> ToJson for [T] {
    fn to_json(&self) -> Value {
        Value::Array(self.iter().map(ToJson::to_json).collect())
    }
}

impl<T: ToJson, const N: usize> ToJson for [T; N] {
    fn to_json(&self) -> Value {
        self.as_slice().to_json()
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Value {
        self.as_slice().to_json()
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToJson::to_json)
    }
}
