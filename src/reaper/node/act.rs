//! Acting on due directories: the rules again with the config of the moment, whose
//! rights the walk runs with (the gone pods' user), who uses the directory by identity,
//! then the cleaner's walk as that user, guarded by the same in-use check while it runs
//! ([`super::guard`]) (or, with `--dry-run`, a report), and what the operator sees of
//! it. Events on the Node carry counts and reasons only; the log lines name the
//! directory, its pods and its survivors.

use super::arrivals;
use super::before_walk::{cut_off_marker, nothing_left_in, walk_user};
use super::guard::{self, Walked};
use super::Reaper;
use crate::reaper::events::{self, Kind};
use crate::reaper::in_use::Busy;
use crate::reaper::ledger::Due;
use crate::reaper::state::Walking;
use crate::reaper::user::PodUser;
use prestop_clean::{size, thousands, Outcome, Report};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Why a walk stops when the reaper itself is stopping.
const STOPPING: &str = "the reaper is stopping";

/// What becomes of a due directory's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Dealt with (emptied, reported or refused by a rule): forgotten.
    Forget,
    /// In use, or whether it is cannot be known: due again after the delay.
    Postpone,
}

impl Reaper {
    /// Empties (or, with --dry-run, reports) every directory that is due now.
    pub async fn act_on_due(&mut self) {
        for due in self.take_due() {
            self.act_if_free(&due).await;
        }
        self.report_kept();
    }

    /// Acts on a due directory unless, by now, the ledger is out of sync, a pod that
    /// recorded it is back, or a pod uses it (it then stays recorded, and the next pod to
    /// go or the next list schedules it again).
    pub(super) async fn act_if_free(&mut self, due: &Due) {
        if !self.ledger.is_free(&due.directory) {
            return;
        }
        match self.act(due).await {
            Next::Forget => {
                self.busy_events.remove(&due.directory);
                self.kept.forget(&due.directory);
                self.ledger.finished(&due.directory);
            }
            Next::Postpone => self.ledger.postpone(&due.directory, Instant::now()),
        }
        self.dirty = true;
    }

    async fn act(&mut self, due: &Due) -> Next {
        let directory = &due.directory;
        let pods = due
            .pods
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let gone = match due.pods.len() {
            1 => "a gone pod".to_owned(),
            n => format!("{n} gone pods"),
        };
        let location = match self.recheck(directory) {
            Ok(location) => location,
            Err((reason, why)) => {
                self.metrics.refused(reason);
                let message = format!("will not empty {directory}, left by {pods}: it {why}");
                tracing::warn!(directory, reason, "{message}");
                let event = format!("will not empty a directory of {gone} ({reason})");
                self.events.send(Kind::Warning, events::REFUSED, &event);
                return Next::Forget;
            }
        };
        let user = match walk_user(due) {
            Ok(user) => Some(user),
            // Its cleanup in the pod already emptied it (the common case): no walk, so no
            // user is needed, and a refusal would count a directory as kept that is not
            // (PrestopInjectorReaperKeepingDirectories paged for every pod without
            // runAsUser whose preStop did its work, seen by e2e/install's Prometheus).
            Err(_) if nothing_left_in(&location) => None,
            Err((reason, detail)) => {
                self.metrics.refused(reason);
                let message = format!(
                    "will not empty {directory}, left by {pods}: the walk runs with the rights \
                     of the pod's own user, and {detail}"
                );
                tracing::warn!(directory, reason, "{message}");
                let event = format!("will not empty a directory of {gone} ({reason})");
                self.events.send(Kind::Warning, events::REFUSED, &event);
                return Next::Forget;
            }
        };
        if let Some(busy) = self.who_uses(&location, directory).await {
            let reason = busy.reason();
            self.kept.checked(directory, reason);
            self.metrics.refused(reason);
            let message = format!(
                "not emptying {directory}, left by {pods}, for now: {}; it is due again after \
                 the delay",
                busy.why()
            );
            tracing::warn!(directory, reason, "{message}");
            if self.busy_events.insert(directory.clone()) {
                let event = format!(
                    "not emptying a directory of {gone} for now ({reason}): a pod or container \
                     on the node may use it; it is checked again after the delay"
                );
                self.events.send(Kind::Warning, events::REFUSED, &event);
            }
            return Next::Postpone;
        }
        if self.dry_run {
            self.metrics.would_empty.inc();
            let message = format!(
                "would empty {directory} (--dry-run): {pods} gone, no pod on the node uses it"
            );
            tracing::info!(directory, dry_run = true, "{message}");
            let event =
                format!("would empty a directory of {gone} (--dry-run): no container uses it");
            self.events.send(Kind::Normal, events::WOULD_EMPTY, &event);
            return Next::Forget;
        }
        let Some(user) = user else {
            self.metrics.already_empty.inc();
            tracing::info!(
                directory,
                location,
                "nothing left to empty (its preStop cleaned, or it is gone), left by {pods}; \
                 its pods' user was not needed"
            );
            self.remove_per_pod(due, &location).await;
            return Next::Forget;
        };
        // Looked at before the walk removes it, used only after the walk's outcome and only
        // for counting: a forged marker adds one to a counter and changes nothing else.
        let cut_off = cut_off_marker(&location);
        let report = match self.walk(directory, &location, &user).await {
            Some(Walked::Done(report)) => report,
            Some(Walked::Stopped {
                busy,
                removed,
                bytes,
                elapsed,
            }) if self.stopping.load(Ordering::SeqCst) => {
                // Not a refusal: the reaper stops (a rollout, a node drain). The directory
                // stays recorded and the state file names no walk, so the restarted reaper
                // walks it again without counting this one as a crash.
                tracing::info!(
                    directory,
                    removed,
                    bytes,
                    ?elapsed,
                    reason = busy.reason(),
                    "the reaper is stopping: this walk stopped, the directory stays recorded"
                );
                // The state file names no walk under way from now: a kill before the
                // loop's own save does not count as a crash.
                self.save_now();
                return Next::Postpone;
            }
            Some(Walked::Stopped {
                busy,
                removed,
                bytes,
                elapsed,
            }) => {
                let reason = busy.reason();
                self.kept.checked(directory, reason);
                self.metrics.refused(reason);
                self.metrics.entries_removed.inc_by(removed);
                self.metrics.bytes_freed.inc_by(bytes);
                let done = format!(
                    "{} entries, {} removed in {:.2} s",
                    thousands(removed),
                    size(bytes),
                    elapsed.as_secs_f64()
                );
                let message = format!(
                    "stopped emptying {directory}, left by {pods}, after {done}: {}; it stays \
                     recorded and is due again after the delay",
                    busy.why()
                );
                tracing::warn!(directory, reason, removed, bytes, "{message}");
                let event = format!(
                    "stopped emptying a directory of {gone} ({reason}): during the walk, the \
                     in-use check found a container using it or could not tell; {done}; it is \
                     checked again after the delay"
                );
                self.events.send(Kind::Warning, events::REFUSED, &event);
                return Next::Postpone;
            }
            Some(Walked::Failed(why)) => {
                self.metrics.refused("cleaner_failed");
                let message = format!(
                    "did not empty {directory}, left by {pods}, as {user}: {why}; it stays \
                     recorded and is tried again after the delay"
                );
                tracing::error!(directory, reason = "cleaner_failed", "{message}");
                let event = format!(
                    "did not empty a directory of {gone} (cleaner_failed): the cleaner program \
                     did not run as the pod's user; the reaper's log on this node says why"
                );
                self.events.send(Kind::Warning, events::REFUSED, &event);
                return Next::Postpone;
            }
            // The walk's thread panicked (its error is logged): nothing says the directory
            // is empty, so it stays recorded and is tried again after the delay.
            None => return Next::Postpone,
        };
        self.metrics.entries_removed.inc_by(report.removed);
        self.metrics.bytes_freed.inc_by(report.bytes);
        let summary = report.summary();
        let event = node_message(&report, &gone);
        match &report.outcome {
            Outcome::Emptied if report.removed > 0 => {
                self.metrics.emptied.inc();
                if cut_off {
                    self.metrics.cut_off_finished.inc();
                }
                let message = format!("{summary}; left by {pods}, gone from the API");
                tracing::info!(
                    directory,
                    location,
                    cut_off,
                    removed = report.removed,
                    bytes = report.bytes,
                    "{message}"
                );
                self.events.send(Kind::Normal, events::EMPTIED, &event);
            }
            Outcome::Emptied | Outcome::Missing => {
                self.metrics.already_empty.inc();
                tracing::info!(
                    directory,
                    location,
                    "nothing left to empty (its preStop cleaned, or it is gone): {summary}"
                );
            }
            Outcome::Skipped(_) => {
                self.metrics.refused("cleaner_refused");
                tracing::warn!(directory, location, "{summary}; left by {pods}");
                self.events.send(Kind::Warning, events::REFUSED, &event);
            }
            Outcome::Incomplete => {
                self.metrics.refused("survivors");
                tracing::warn!(directory, location, "{summary}; left by {pods}");
                self.events.send(Kind::Warning, events::INCOMPLETE, &event);
            }
        }
        if report.outcome == Outcome::Emptied {
            self.remove_per_pod(due, &location).await;
        }
        Next::Forget
    }

    /// The cleaner's walk of `location` as `user`, guarded by the in-use check, with the
    /// state file naming it while it runs: a reaper that dies during it walks it last
    /// after the restart, and gives it up after
    /// [`crate::reaper::state::MAX_WALK_ATTEMPTS`] such walks.
    async fn walk(&mut self, directory: &str, location: &str, user: &PodUser) -> Option<Walked> {
        if self.stopping.load(Ordering::SeqCst) {
            // Not started: no list of the node, no state file naming a walk.
            return Some(guard::Walked::Stopped {
                busy: Busy::Unknown(STOPPING.to_owned()),
                removed: 0,
                bytes: 0,
                elapsed: Duration::ZERO,
            });
        }
        // The pods bound to the node during the walk: a watch of the walk's own, complete
        // before anything is removed (issue 32, finding 3). Without it, no walk.
        let arrivals = match self.api.clone() {
            None => None,
            Some(client) => {
                let rules = arrivals::Rules {
                    config: self.config.clone(),
                    own_pod: self.own_pod.clone(),
                    read_only_views_keep: self.read_only_views_keep,
                };
                match arrivals::Arrivals::watch(client, &self.node, rules).await {
                    Ok(arrivals) => Some(arrivals),
                    Err(why) => {
                        return Some(guard::Walked::Stopped {
                            busy: Busy::Unknown(why),
                            removed: 0,
                            bytes: 0,
                            elapsed: Duration::ZERO,
                        });
                    }
                }
            }
        };
        let attempts = match &self.interrupted {
            Some(walking) if walking.path == directory => walking.attempts + 1,
            _ => 1,
        };
        self.walking = Some(Walking {
            path: directory.to_owned(),
            attempts,
        });
        self.save_now();
        (self.walk_started)(location);
        let (cleaner, user, path, host) = (
            self.cleaner.clone(),
            user.clone(),
            location.to_owned(),
            directory.to_owned(),
        );
        let (interval, stopping) = (self.guard_interval, self.stopping.clone());
        // The claims' volumes are read from the API once, here; mountinfo and the node's
        // file system are read again on every look during the walk.
        let mut in_use = self.walk_guard().await;
        if let Some(arrivals) = &arrivals {
            in_use = in_use.with_arrivals(arrivals.seen());
        }
        let walked = tokio::task::spawn_blocking(move || {
            guard::walk_as(&cleaner, &user, &path, interval, &|| {
                if stopping.load(Ordering::SeqCst) {
                    return Err(Busy::Unknown(STOPPING.to_owned()));
                }
                in_use.check(Path::new(&path), &host)
            })
        })
        .await;
        drop(arrivals);
        self.walking = None;
        if self
            .interrupted
            .as_ref()
            .is_some_and(|walking| walking.path == directory)
        {
            self.interrupted = None;
        }
        self.dirty = true;
        match walked {
            Ok(walked) => Some(walked),
            Err(error) => {
                tracing::error!(
                    directory,
                    %error,
                    "the cleaner's walk did not finish; it stays recorded and is tried again \
                     after the delay"
                );
                None
            }
        }
    }
}

/// The Node Event's text for a walk: counts and reasons, never a path, a file name or
/// a pod (`gone` is "a gone pod" or "N gone pods").
pub fn node_message(report: &Report, gone: &str) -> String {
    let done = format!(
        "{} entries, {} removed in {:.2} s",
        thousands(report.removed),
        size(report.bytes),
        report.elapsed.as_secs_f64()
    );
    match &report.outcome {
        Outcome::Emptied => format!("emptied a directory of {gone}: {done}"),
        Outcome::Missing => format!("a directory of {gone} is missing: nothing to empty"),
        Outcome::Skipped(_) => format!(
            "did not empty a directory of {gone} (cleaner_refused): the cleaner refused it \
             (a symlink or not a directory on its path)"
        ),
        Outcome::Incomplete => {
            let mut reasons: Vec<String> = Vec::new();
            for survivor in &report.survivors {
                let reason = survivor.reason.to_string();
                if !reasons.contains(&reason) {
                    reasons.push(reason);
                }
            }
            format!(
                "emptied a directory of {gone} partly (survivors): {} entries left ({}); {done}",
                thousands(report.left),
                reasons.join(", ")
            )
        }
    }
}
