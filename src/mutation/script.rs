//! Shell text of the generated hooks. Paths and user argv never appear in it: they are
//! passed as positional parameters.
//!
//! OWNER: shell helper.

/// Sum of the literal `sleep N` (N, Ns, Nm, Nh) commands found in a script or argv text.
pub fn literal_sleep_seconds(text: &str) -> u64 {
    let _ = text;
    todo!()
}
