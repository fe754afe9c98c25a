//! The core's JSON model: serde_json's `Value`, variant for variant and method for method,
//! with each object's members kept in a list ([`Map`]) instead of serde_json's `IndexMap`.
//!
//! An AdmissionReview is a few hundred small maps. `IndexMap` hashes every key it reads
//! with SipHash and allocates a table per map; with this model a Pod's review costs 16 %
//! fewer instructions, the seed Job's 12 % (docs/BENCHMARKS.md, "The core's own JSON
//! model"). Numbers stay serde_json's `Number`, and text is read and written by
//! serde_json, so what goes in and out is byte for byte what it was.
//!
//! The rest of the program (kube, json_patch, serde_yaml) speaks serde_json's `Value`;
//! `From` crosses in either direction.

mod convert;
mod macros;
mod map;
pub mod patch;
mod value;

pub use crate::json_value as json;
pub use convert::{from_value, to_value, ToJson};
pub(crate) use map::same_key;
pub use map::{Entry, Map};
pub use serde_json::Number;
pub use value::{Index, Value};

#[cfg(test)]
mod tests;
