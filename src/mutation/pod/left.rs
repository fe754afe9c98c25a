//! What no cleanup in the pod runs: left to the node reaper (issue 38, class 2).

use crate::mutation::hook::Target;
use crate::mutation::seal::ReapTarget;

/// What cleans an app container's targets in the pod, as its plan turned out.
#[derive(Debug, Default)]
pub(super) struct CleanedInPod {
    pub container: String,
    /// The target paths its exec hook cleans.
    pub by_hook: Vec<String>,
    /// The target paths the cleanup sidecar takes, if there is one in the end.
    pub by_sidecar: Vec<String>,
}

/// docs/REAPER.md#what-it-empties: the wanted targets (per app container) that no cleanup in the pod
/// runs, neither its exec hook nor the sidecar (`has_sidecar`): left to the node reaper,
/// which empties them once the pod has ended (issue 38, class 2). The caller keeps the
/// books only with a seal key: the reaper empties only what the webhook sealed. A target
/// without a host directory to check is never left to it.
pub(super) fn left_to_the_reaper(
    wanted: &[Vec<Target>],
    cleaned_in_pod: &[CleanedInPod],
    has_sidecar: bool,
) -> Vec<ReapTarget> {
    let mut left = Vec::new();
    for (targets, cleaned) in wanted.iter().zip(cleaned_in_pod) {
        for target in targets {
            let done = cleaned.by_hook.contains(&target.path)
                || (has_sidecar && cleaned.by_sidecar.contains(&target.path));
            if let (false, Some(host)) = (done, &target.host) {
                left.push(ReapTarget {
                    container: cleaned.container.clone(),
                    target: target.path.clone(),
                    host: host.clone(),
                });
            }
        }
    }
    left
}
