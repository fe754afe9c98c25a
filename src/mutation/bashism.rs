//! Bash-only syntax that busybox `sh` rejects.
//!
//! OWNER: shell helper.

/// The first bash-only construct found in `script` (e.g. "arrays", "<<<"), or `None`.
pub fn bash_only_syntax(script: &str) -> Option<&'static str> {
    let _ = script;
    todo!()
}
