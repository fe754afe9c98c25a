//! Shared pieces of the fuzz targets: the core's invariants (the same ones
//! `tests/core_properties.rs` checks with proptest, which the fuzz crate cannot import)
//! and the structure-aware pod-template generator.
//!
//! Every check panics with a message naming the broken invariant, so libFuzzer stores the
//! input as a crash artifact.

pub mod invariants;
pub mod template;

/// docs/DESIGN.md#targets checked by the same independent oracle as `tests/core_properties.rs` (it
/// is deliberately not `prestop_injector::mutation::targets`, so a bug there shows here).
#[path = "../../tests/support/safety_oracle.rs"]
pub mod safety_oracle;
