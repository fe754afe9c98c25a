//! SPEC §6: `bash` in images that only have `sh`.
//!
//! OWNER: shell helper.

use crate::config::Config;
use serde_json::Value;

/// Rewrites argv[0] `bash` (any path) to `/bin/sh` in every init and app container's
/// `command`, lifecycle and probe `exec.command` when the image lacks bash, unless the script
/// uses bash-only syntax (then only a warning). Returns one warning per correction or refusal.
pub fn fix_shells(pod_spec: &mut Value, config: &Config) -> Vec<String> {
    let _ = (pod_spec, config);
    todo!()
}

/// The shell our own hook uses in `image`: `requested`, or `/bin/sh` with a warning when
/// `requested` is bash and the image lacks bash.
pub fn hook_shell(
    requested: &str,
    image: &str,
    container: &str,
    config: &Config,
) -> (String, Option<String>) {
    let _ = (requested, image, container, config);
    todo!()
}
