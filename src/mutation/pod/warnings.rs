//! The warnings of a target that no cleanup in the pod runs.

use crate::config::Config;
use crate::mutation::warning::cited;

/// What a warning says of a target that no cleanup in the pod runs: with a seal key the
/// webhook leaves it to the node reaper, which empties it once the pod has ended
/// (`super::left_to_the_reaper`); without one nothing does.
pub(in crate::mutation::pod) fn not_cleaned(config: &Config) -> &'static str {
    if config.seal.is_empty() {
        "not cleaned"
    } else {
        "left to the node reaper"
    }
}

/// One warning per shared target that no cleanup sidecar takes: who else uses it, what
/// to do, and why the sidecar does not (`why`).
pub(super) fn shared_warnings(
    name: &str,
    shared: &[(String, Vec<String>)],
    why: &str,
    config: &Config,
) -> Vec<String> {
    shared
        .iter()
        .map(|(path, others)| {
            // Why no sidecar takes it is the detail: cited, so that it is shortened
            // before the container's name, the path or the fix.
            format!(
                "container {}: {} {}: {} it; use separate subPaths ({})",
                cited(format_args!("{name:?}")),
                cited(path),
                not_cleaned(config),
                also_mount(others),
                cited(why)
            )
        })
        .collect()
}

/// `"a" also mounts`, `"a", "b" also mount`.
pub(super) fn also_mount(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let verb = if names.len() == 1 { "mounts" } else { "mount" };
    format!("{} also {verb}", quoted.join(", "))
}
