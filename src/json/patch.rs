//! RFC 6902 operations over [`Value`], shaped as json_patch's (`PatchOperation::Add(AddOperation
//! { path, value })`), so that the core emits the values it moves out of its own model
//! without converting them. The core emits three kinds: add, remove and replace.
//! [`Patch::to_json_patch`] crosses to json_patch, which applies them (the CLI, the tests).
//!
//! A path is the encoded JSON Pointer (RFC 6901) as the core builds it, token by escaped
//! token: it is written out as it is, not parsed again for every operation (json_patch's
//! `PointerBuf` checks its text when made). [`Patch::to_json_patch`] parses each path, so
//! every test and fuzz target that applies a patch checks them all.

use super::Value;
use json_patch::jsonptr::PointerBuf;
use serde::ser::{Serialize, SerializeStruct, Serializer};

/// Adds `value` at `path`.
#[derive(Clone, Debug, PartialEq)]
pub struct AddOperation {
    pub path: String,
    pub value: Value,
}

/// Removes what is at `path`.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoveOperation {
    pub path: String,
}

/// Replaces what is at `path` with `value`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaceOperation {
    pub path: String,
    pub value: Value,
}

/// One operation of a patch.
#[derive(Clone, Debug, PartialEq)]
pub enum PatchOperation {
    Add(AddOperation),
    Remove(RemoveOperation),
    Replace(ReplaceOperation),
}

impl PatchOperation {
    /// Where it applies.
    pub fn path(&self) -> &str {
        self.parts().1
    }

    /// Its name on the wire, its path, and the value it carries.
    pub fn parts(&self) -> (&'static str, &str, Option<&Value>) {
        match self {
            PatchOperation::Add(o) => ("add", &o.path, Some(&o.value)),
            PatchOperation::Remove(o) => ("remove", &o.path, None),
            PatchOperation::Replace(o) => ("replace", &o.path, Some(&o.value)),
        }
    }
}

/// A patch: its operations, in the order they apply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Patch(pub Vec<PatchOperation>);

impl Patch {
    /// The same operations as json_patch's, to apply them.
    ///
    /// # Panics
    /// On a path that is not a JSON Pointer, which the core never builds.
    pub fn to_json_patch(&self) -> json_patch::Patch {
        json_patch::Patch(self.0.iter().map(PatchOperation::to_json_patch).collect())
    }
}

impl Patch {
    /// `document` with the patch applied by json_patch (RFC 6902), or json_patch's error.
    pub fn apply_to(&self, document: &Value) -> Result<Value, json_patch::PatchError> {
        let mut patched: serde_json::Value = document.clone().into();
        json_patch::patch(&mut patched, &self.to_json_patch())?;
        Ok(patched.into())
    }
}

impl PatchOperation {
    /// The same operation as json_patch's.
    ///
    /// # Panics
    /// On a path that is not a JSON Pointer, which the core never builds.
    pub fn to_json_patch(&self) -> json_patch::PatchOperation {
        let pointer = |path: &str| {
            PointerBuf::parse(path)
                .unwrap_or_else(|e| panic!("the core built the pointer {path:?}: {e}"))
        };
        match self {
            PatchOperation::Add(o) => json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: pointer(&o.path),
                value: o.value.clone().into(),
            }),
            PatchOperation::Remove(o) => {
                json_patch::PatchOperation::Remove(json_patch::RemoveOperation {
                    path: pointer(&o.path),
                })
            }
            PatchOperation::Replace(o) => {
                json_patch::PatchOperation::Replace(json_patch::ReplaceOperation {
                    path: pointer(&o.path),
                    value: o.value.clone().into(),
                })
            }
        }
    }
}

/// `{"op":…,"path":…,"value":…}`, in json_patch's order.
impl Serialize for PatchOperation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (op, path, value) = self.parts();
        let mut out =
            serializer.serialize_struct("PatchOperation", 2 + value.is_some() as usize)?;
        out.serialize_field("op", op)?;
        out.serialize_field("path", path)?;
        if let Some(value) = value {
            out.serialize_field("value", value)?;
        }
        out.end()
    }
}

impl Serialize for Patch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}
