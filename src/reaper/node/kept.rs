//! Why each recorded directory is kept now (issue 32, finding 2: "nothing says so"): one
//! reason per directory, a gauge by reason (`kept_directories{reason}`), and one log line
//! when a directory's reason changes (not one per tick).

use super::Reaper;
use std::collections::BTreeMap;

pub use crate::reaper::metrics::KEPT_REASONS;

/// The last check's verdict per directory, and the reason last logged.
#[derive(Debug, Default)]
pub struct Kept {
    checked: BTreeMap<String, &'static str>,
    said: BTreeMap<String, &'static str>,
}

impl Kept {
    /// The check found it in use (`in_use`) or could not tell (`in_use_unknown`).
    pub fn checked(&mut self, directory: &str, reason: &'static str) {
        self.checked.insert(directory.to_owned(), reason);
    }

    /// Dealt with: no longer kept.
    pub fn forget(&mut self, directory: &str) {
        self.checked.remove(directory);
        self.said.remove(directory);
    }
}

fn sentence(reason: &str) -> &'static str {
    match reason {
        "watch_not_synced" => {
            "the watch has not seen a complete list of the node's pods since it failed"
        }
        "pod_exists" => "a pod that recorded it still exists",
        "pod_uses" => "a pod bound to the node mounts it, a directory above it or one below it",
        "delay" => "its pods are gone; it waits for the delay (--delay)",
        "in_use" => "the last check found a pod or container that reaches it (logged then)",
        _ => "the last check could not tell who reaches it (logged then)",
    }
}

impl Reaper {
    /// Sets `kept_directories{reason}` and logs each directory whose reason changed.
    pub fn report_kept(&mut self) {
        let mut counts: BTreeMap<&'static str, i64> =
            KEPT_REASONS.iter().map(|r| (*r, 0)).collect();
        let directories: Vec<String> = self.ledger.records().keys().cloned().collect();
        let mut now = BTreeMap::new();
        for directory in directories {
            let reason = match self.ledger.why_kept(&directory) {
                "delay" => self
                    .kept
                    .checked
                    .get(&directory)
                    .copied()
                    .unwrap_or("delay"),
                other => {
                    // A pod came back: the check's verdict is stale.
                    self.kept.checked.remove(&directory);
                    other
                }
            };
            *counts.entry(reason).or_default() += 1;
            if self.kept.said.get(&directory) != Some(&reason) {
                tracing::info!(
                    directory,
                    reason,
                    "keeping {directory} for now: {}",
                    sentence(reason)
                );
            }
            now.insert(directory, reason);
        }
        self.kept.said = now;
        self.kept
            .checked
            .retain(|directory, _| self.kept.said.contains_key(directory));
        for (reason, count) in counts {
            self.metrics.kept(reason, count);
        }
    }
}
