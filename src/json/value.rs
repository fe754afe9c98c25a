//! The value itself: serde_json's `Value`, variant for variant, with [`Map`] for objects.

use super::Map;
use serde_json::Number;
use std::fmt;

/// A JSON value. The variants and most methods are serde_json's, so code reads the same;
/// only the object's map differs (see [`Map`]).
#[derive(Clone, Default, PartialEq)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Map<String, Value>),
}

static NULL: Value = Value::Null;

/// What a value can be indexed by: a member's name or an element's position.
pub trait Index {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value>;
    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value>;
    /// The slot for `value[self] = …`, which serde_json creates where it can.
    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value;
}

impl Index for usize {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        value.as_array()?.get(*self)
    }

    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        value.as_array_mut()?.get_mut(*self)
    }

    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        match value {
            Value::Array(elements) => {
                let len = elements.len();
                elements.get_mut(*self).unwrap_or_else(|| {
                    panic!("cannot access index {self} of JSON array of length {len}")
                })
            }
            _ => panic!("cannot access index {self} of JSON {}", value.kind()),
        }
    }
}

impl Index for str {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        value.as_object()?.get(self)
    }

    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        value.as_object_mut()?.get_mut(self)
    }

    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        if value.is_null() {
            *value = Value::Object(Map::new());
        }
        match value {
            Value::Object(map) => map.entry(self).or_insert(Value::Null),
            _ => panic!("cannot access key {self:?} in JSON {}", value.kind()),
        }
    }
}

impl Index for String {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.as_str().index_into(value)
    }

    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        self.as_str().index_into_mut(value)
    }

    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        self.as_str().index_or_insert(value)
    }
}

impl<T: Index + ?Sized> Index for &T {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        (**self).index_into(value)
    }

    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        (**self).index_into_mut(value)
    }

    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        (**self).index_or_insert(value)
    }
}

impl<I: Index> std::ops::Index<I> for Value {
    type Output = Value;

    /// `Null` where there is nothing, as serde_json answers.
    fn index(&self, index: I) -> &Value {
        index.index_into(self).unwrap_or(&NULL)
    }
}

impl<I: Index> std::ops::IndexMut<I> for Value {
    fn index_mut(&mut self, index: I) -> &mut Value {
        index.index_or_insert(self)
    }
}

impl Value {
    pub fn get<I: Index>(&self, index: I) -> Option<&Value> {
        index.index_into(self)
    }

    pub fn get_mut<I: Index>(&mut self, index: I) -> Option<&mut Value> {
        index.index_into_mut(self)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(elements) => Some(elements),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(elements) => Some(elements),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        match self {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Map<String, Value>> {
        match self {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// The value at an RFC 6901 pointer, as serde_json's `pointer` finds it.
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        tokens(pointer)?.try_fold(self, |at, token| match at {
            Value::Object(map) => map.get(&token),
            Value::Array(elements) => elements.get(array_index(&token)?),
            _ => None,
        })
    }

    /// The value at an RFC 6901 pointer, changeable.
    pub fn pointer_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        tokens(pointer)?.try_fold(self, |at, token| match at {
            Value::Object(map) => map.get_mut(&token),
            Value::Array(elements) => elements.get_mut(array_index(&token)?),
            _ => None,
        })
    }

    /// Takes the value out, leaving `Null`.
    pub fn take(&mut self) -> Value {
        std::mem::take(self)
    }

    /// What the value is, for messages.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// A pointer's tokens, unescaped: none for `""`, `None` unless it starts with `/`.
fn tokens(pointer: &str) -> Option<Tokens<'_>> {
    match pointer.strip_prefix('/') {
        Some(rest) => Some(Tokens { rest: Some(rest) }),
        None if pointer.is_empty() => Some(Tokens { rest: None }),
        None => None,
    }
}

/// The tokens of a pointer after its first `/`, split byte by byte: the core looks up a
/// few dozen short pointers a review, where `str::split`'s searcher costs more than
/// the scan.
struct Tokens<'p> {
    rest: Option<&'p str>,
}

impl<'p> Iterator for Tokens<'p> {
    type Item = std::borrow::Cow<'p, str>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest?;
        let (token, tail) = match rest.bytes().position(|b| b == b'/') {
            Some(end) => (&rest[..end], Some(&rest[end + 1..])),
            None => (rest, None),
        };
        self.rest = tail;
        Some(unescape(token))
    }
}

fn unescape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.bytes().any(|b| b == b'~') {
        token.replace("~1", "/").replace("~0", "~").into()
    } else {
        token.into()
    }
}

/// An array index as RFC 6901 spells it: digits, without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("Null"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Number(n) => write!(f, "Number({n})"),
            Value::String(s) => write!(f, "String({s:?})"),
            Value::Array(elements) => {
                f.write_str("Array ")?;
                f.debug_list().entries(elements).finish()
            }
            Value::Object(map) => {
                f.write_str("Object ")?;
                fmt::Debug::fmt(map, f)
            }
        }
    }
}

/// The value as JSON text: compact, or indented with `{:#}`, as serde_json prints it.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = if f.alternate() {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string(self)
        };
        f.write_str(&text.map_err(|_| fmt::Error)?)
    }
}

impl PartialEq<str> for Value {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

impl PartialEq<&str> for Value {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl PartialEq<String> for Value {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == Some(other.as_str())
    }
}

impl PartialEq<bool> for Value {
    fn eq(&self, other: &bool) -> bool {
        self.as_bool() == Some(*other)
    }
}

macro_rules! eq_number {
    ($as:ident -> $wide:ty: $($t:ty)*) => {$(
        impl PartialEq<$t> for Value {
            fn eq(&self, other: &$t) -> bool {
                self.$as().is_some_and(|n| n == *other as $wide)
            }
        }
    )*};
}

// As serde_json compares a value with a number: in the number's kind.
eq_number!(as_i64 -> i64: i8 i16 i32 i64 isize);
eq_number!(as_u64 -> u64: u8 u16 u32 u64 usize);
eq_number!(as_f64 -> f64: f32 f64);
