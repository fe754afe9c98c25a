//! What the reaper keeps across a restart: the state file, written when the records
//! changed, and the walk a stop interrupted, taken up after the others (or given up
//! after [`state::MAX_WALK_ATTEMPTS`]). Called by the watch loop (`node.rs`) and around
//! each walk (`act.rs`).

use super::Reaper;
use crate::reaper::events::{self, Kind};
use crate::reaper::ledger::Due;
use crate::reaper::state::{self, Walking};
use std::time::Instant;

impl Reaper {
    /// Takes up a walk that did not finish before the last stop (the state file's
    /// [`Walking`]): its directory is walked after the others, or, after
    /// [`state::MAX_WALK_ATTEMPTS`] walks that never finished, given up and forgotten.
    pub fn restore_interrupted(&mut self, walking: Option<Walking>) {
        let Some(walking) = walking else {
            return;
        };
        if !self.ledger.records().contains_key(&walking.path) {
            return;
        }
        let (directory, attempts) = (&walking.path, walking.attempts);
        if attempts >= state::MAX_WALK_ATTEMPTS {
            self.ledger.finished(directory);
            self.dirty = true;
            self.metrics.refused("walk_crashed");
            tracing::error!(directory, attempts, "gave up on this directory: the reaper stopped during each of its last {attempts} walks (out of memory? killed?); it is forgotten and left as it is");
            let message = format!(
                "gave up on a directory of a gone pod: the reaper stopped during each of its \
                 last {attempts} walks (walk_crashed); the reaper's log on this node names it"
            );
            self.events.send(Kind::Warning, events::GAVE_UP, &message);
            return;
        }
        tracing::warn!(directory, attempts, "the reaper stopped during the last walk of this directory; it is walked after the others");
        self.interrupted = Some(walking);
    }

    /// The due directories, one that a walk did not finish last.
    pub(super) fn take_due(&mut self) -> Vec<Due> {
        let mut due = self.ledger.take_due(Instant::now());
        if let Some(walking) = &self.interrupted {
            due.sort_by_key(|d| d.directory == walking.path);
        }
        due
    }

    /// Writes the state file when the records changed since the last write.
    pub fn save(&mut self) {
        if self.dirty {
            self.save_now();
        }
    }

    /// Writes the state file, and beside it what was dealt with.
    pub(super) fn save_now(&mut self) {
        let walking = self.walking.as_ref();
        let saved = state::save(&self.state_file, &self.node, self.ledger.records(), walking)
            .and_then(|()| {
                state::save_dealt_with(&self.state_file, &self.node, &self.ledger.dealt_with())
            });
        match saved {
            Ok(()) => self.dirty = false,
            Err(error) => {
                self.metrics.state_write_failures.inc();
                tracing::error!(
                    error = format!("{error:#}"),
                    "cannot write the state file; will retry"
                );
            }
        }
    }
}
