//! What no cleanup in the pod runs: left to the node reaper (issue 38, class 2).

use crate::config::Config;
use crate::mutation::hook::Target;
use crate::mutation::seal::ReapTarget;

/// docs/REAPER.md#what-it-empties: the wanted targets (per app container) that no cleanup in the pod
/// runs, neither its exec hook nor the sidecar (`has_sidecar`): left to the node reaper,
/// which empties them once the pod has ended (issue 38, class 2). None without a seal
/// key: the reaper empties only what the webhook sealed. A target without a host
/// directory to check is never left to it.
pub(super) fn left_to_the_reaper(
    wanted: &[Vec<Target>],
    cleaned_in_pod: &[(String, Vec<String>, Vec<String>)],
    has_sidecar: bool,
    config: &Config,
) -> Vec<ReapTarget> {
    if config.seal.is_empty() {
        return Vec::new();
    }
    let mut left = Vec::new();
    for (targets, (name, by_hook, by_sidecar)) in wanted.iter().zip(cleaned_in_pod) {
        for target in targets {
            let cleaned = by_hook.contains(&target.path)
                || (has_sidecar && by_sidecar.contains(&target.path));
            if let (false, Some(host)) = (cleaned, &target.host) {
                left.push(ReapTarget {
                    container: name.clone(),
                    target: target.path.clone(),
                    host: host.clone(),
                });
            }
        }
    }
    left
}
