//! Acting on due directories: the rules again with the config of the moment, then the
//! cleaner's walk (or, with `--dry-run`, a report), and what the operator sees of it.

use super::Reaper;
use crate::mutation::targets::{
    is_allowed, is_at_or_below, protected_entry, HostPath, PathRefusal,
};
use crate::reaper::events::{self, Kind};
use crate::reaper::ledger::Due;
use std::time::Instant;

impl Reaper {
    /// Empties (or, with --dry-run, reports) every directory that is due now.
    pub async fn act_on_due(&mut self) {
        for due in self.ledger.take_due(Instant::now()) {
            self.act_if_free(&due).await;
        }
    }

    /// Acts on a due directory unless, by now, the ledger is out of sync, a pod that
    /// recorded it is back, or a pod uses it (it then stays recorded, and the next pod to
    /// go or the next list schedules it again).
    pub(super) async fn act_if_free(&mut self, due: &Due) {
        if !self.ledger.is_free(&due.directory) {
            return;
        }
        self.act(due).await;
        self.ledger.finished(&due.directory);
        self.dirty = true;
    }

    async fn act(&self, due: &Due) {
        let directory = &due.directory;
        let pods = due
            .pods
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let location = match self.recheck(directory) {
            Ok(location) => location,
            Err((reason, why)) => {
                self.metrics.refused(reason);
                let message = format!("will not empty {directory}, left by {pods}: it {why}");
                tracing::warn!(directory, reason, "{message}");
                self.events.send(Kind::Warning, events::REFUSED, &message);
                return;
            }
        };
        if self.dry_run {
            self.metrics.would_empty.inc();
            let message = format!(
                "would empty {directory} (--dry-run): {pods} gone, no pod on the node uses it"
            );
            tracing::info!(directory, dry_run = true, "{message}");
            self.events
                .send(Kind::Normal, events::WOULD_EMPTY, &message);
            return;
        }
        let path = location.clone();
        let report = match tokio::task::spawn_blocking(move || {
            prestop_clean::empty_directory(&path)
        })
        .await
        {
            Ok(report) => report,
            Err(error) => {
                tracing::error!(directory, %error, "the cleaner's walk did not finish");
                return;
            }
        };
        self.metrics.entries_removed.inc_by(report.removed);
        self.metrics.bytes_freed.inc_by(report.bytes);
        let summary = report.summary();
        match &report.outcome {
            prestop_clean::Outcome::Emptied if report.removed > 0 => {
                self.metrics.emptied.inc();
                let message = format!("{summary}; left by {pods}, gone from the API");
                tracing::info!(
                    directory,
                    location,
                    removed = report.removed,
                    bytes = report.bytes,
                    "{message}"
                );
                self.events.send(Kind::Normal, events::EMPTIED, &message);
            }
            prestop_clean::Outcome::Emptied | prestop_clean::Outcome::Missing => {
                self.metrics.already_empty.inc();
                tracing::info!(
                    directory,
                    location,
                    "nothing left to empty (its preStop cleaned, or it is gone): {summary}"
                );
            }
            prestop_clean::Outcome::Skipped(_) => {
                self.metrics.refused("cleaner_refused");
                let message = format!("{summary}; left by {pods}");
                tracing::warn!(directory, location, "{message}");
                self.events.send(Kind::Warning, events::REFUSED, &message);
            }
            prestop_clean::Outcome::Incomplete => {
                self.metrics.refused("survivors");
                let message = format!("{summary}; left by {pods}");
                tracing::warn!(directory, location, "{message}");
                self.events
                    .send(Kind::Warning, events::INCOMPLETE, &message);
            }
        }
    }

    /// The rules again, with the config of now, just before the walk; the path of the
    /// directory inside the reaper's container.
    fn recheck(&self, directory: &str) -> Result<String, (&'static str, String)> {
        let host = HostPath {
            known: directory.to_owned(),
            open: None,
        };
        if let Some(entry) = protected_entry(&host, &self.config) {
            let refusal = PathRefusal::Protected {
                host_path: directory.to_owned(),
                entry,
            };
            return Err(("protected", refusal.reason()));
        }
        if !is_allowed(&host, &self.config) {
            return Err((
                "not_allowed",
                "is outside allowedHostPathPrefixes".to_owned(),
            ));
        }
        let prefix = self
            .config
            .allowed_host_path_prefixes
            .iter()
            .filter(|prefix| is_at_or_below(directory, prefix))
            .max_by_key(|prefix| prefix.len())
            .ok_or((
                "not_allowed",
                "is outside allowedHostPathPrefixes".to_owned(),
            ))?;
        let inside = |path: &str| self.host_root.join(path.trim_start_matches('/'));
        if !inside(prefix).is_dir() {
            let why = format!(
                "is below {prefix}, which is not mounted in the reaper at {}",
                inside(prefix).display()
            );
            return Err(("not_mounted", why));
        }
        inside(directory)
            .to_str()
            .map(str::to_owned)
            .ok_or(("rule", "has a path that is not UTF-8".to_owned()))
    }
}
