//! The reaper's loop: the watch of the node's pods in, decisions from the [`Ledger`],
//! the cleaner's walk out. Every decision is made here, on one task, so a directory is
//! checked against the pods known at the moment it is emptied.

use super::derive::{pod_facts, PodFacts};
use super::events::{self, Events, Kind};
use super::ledger::{Due, Ledger};
use super::metrics::Metrics;
use super::state;
use crate::config::Config;
use crate::mutation::targets::{
    is_allowed, is_at_or_below, protected_entry, HostPath, PathRefusal,
};
use futures_util::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, watcher, Event};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Everything one node's reaper decides with.
pub struct Reaper {
    pub config: Config,
    pub node: String,
    /// The reaper's own pod (namespace, name): it mounts the allowed prefixes, which are
    /// above every directory, but is not a user of them.
    pub own_pod: Option<(String, String)>,
    pub host_root: PathBuf,
    pub state_file: PathBuf,
    pub dry_run: bool,
    pub ledger: Ledger,
    pub metrics: Arc<Metrics>,
    pub events: Events,
    pub ready: Arc<AtomicBool>,
    /// Pods whose refused targets have been logged (once per pod, not per update).
    reported: HashSet<String>,
    /// Refusals an Event has been sent for: one per container, target and reason, not
    /// one per pod of a 1,000-pod Job. Cleared when it reaches [`MAX_REFUSAL_EVENTS`].
    refusal_events: HashSet<String>,
    /// The records changed since the state file was last written.
    dirty: bool,
}

/// How many distinct refusals are remembered before an Event may repeat.
const MAX_REFUSAL_EVENTS: usize = 4096;

/// Changed records are written at most this often: a list of 1,000 new pods is one write,
/// not 1,000 (each a rewrite of the whole file and two fsyncs). A reaper killed within
/// this window forgets the newest records, which only means fewer directories emptied.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// The first and the longest wait before the watch is started again after a failure.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

impl Reaper {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Config,
        node: String,
        own_pod: Option<(String, String)>,
        host_root: PathBuf,
        state_file: PathBuf,
        dry_run: bool,
        ledger: Ledger,
        metrics: Arc<Metrics>,
        events: Events,
    ) -> Reaper {
        Reaper {
            config,
            node,
            own_pod,
            host_root,
            state_file,
            dry_run,
            ledger,
            metrics,
            events,
            ready: Arc::new(AtomicBool::new(false)),
            reported: HashSet::new(),
            refusal_events: HashSet::new(),
            dirty: false,
        }
    }

    /// Watches until `shutdown`; every watch failure restarts it from a full list.
    pub async fn run(mut self, client: kube::Client, mut shutdown: watch::Receiver<bool>) {
        let pods: kube::Api<Pod> = kube::Api::all(client);
        let selector = format!("spec.nodeName={}", self.node);
        let mut retry = RETRY.0;
        loop {
            let mut stream =
                watcher(pods.clone(), watcher::Config::default().fields(&selector)).boxed();
            let mut save_at: Option<tokio::time::Instant> = None;
            loop {
                let wake = self.ledger.next_due().map(tokio::time::Instant::from_std);
                tokio::select! {
                    item = stream.next() => if !self.on_item(item, &mut retry) {
                        break;
                    },
                    _ = tokio::time::sleep_until(wake.unwrap_or_else(far_future)), if wake.is_some() => {}
                    _ = tokio::time::sleep_until(save_at.unwrap_or_else(far_future)), if save_at.is_some() => {}
                    _ = crate::server::shutdown::signalled(&mut shutdown) => {
                        self.save();
                        return;
                    }
                }
                // One directory at a time, each after the events that came during the walk
                // before it: a pod that appeared meanwhile keeps its directory.
                let mut watching = true;
                for due in self.ledger.take_due(Instant::now()) {
                    while let Some(item) = stream.next().now_or_never() {
                        watching = self.on_item(item, &mut retry);
                        if !watching {
                            break;
                        }
                    }
                    if !watching {
                        // The rest stay recorded; the next complete list schedules them.
                        break;
                    }
                    self.act_if_free(&due).await;
                }
                if !watching {
                    break;
                }
                let now = tokio::time::Instant::now();
                match save_at {
                    Some(at) if at <= now => {
                        self.save();
                        save_at = None;
                    }
                    None if self.dirty => save_at = Some(now + SAVE_EVERY),
                    _ => {}
                }
                self.update_gauges();
            }
            self.save();
            self.update_gauges();
            tokio::select! {
                _ = tokio::time::sleep(retry) => {}
                _ = crate::server::shutdown::signalled(&mut shutdown) => {
                    self.save();
                    return;
                }
            }
            retry = (retry * 2).min(RETRY.1);
        }
    }

    pub fn on_event(&mut self, event: Event<Pod>) {
        let now = Instant::now();
        match event {
            Event::Init => self.ledger.list_started(),
            Event::InitApply(pod) | Event::Apply(pod) => {
                if let Some(facts) = self.facts(&pod) {
                    self.report_refusals(&facts);
                    self.dirty |= self.ledger.apply(&facts, now);
                }
            }
            Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    self.ledger.delete(uid, now);
                    self.reported.remove(uid);
                }
            }
            Event::InitDone => {
                self.ledger.list_done(now);
                let ledger = &self.ledger;
                self.reported.retain(|uid| ledger.is_known(uid));
                self.ready.store(true, Ordering::Relaxed);
                tracing::info!(
                    pods = ledger.pod_count(),
                    recorded = ledger.records().len(),
                    pending = ledger.pending_count(),
                    "listed the node's pods; in sync"
                );
            }
        }
    }

    fn facts(&self, pod: &Pod) -> Option<PodFacts> {
        let meta = &pod.metadata;
        if let (Some((namespace, name)), Some(ns), Some(n)) =
            (&self.own_pod, &meta.namespace, &meta.name)
        {
            if namespace == ns && name == n {
                return None;
            }
        }
        let value = serde_json::to_value(pod).ok()?;
        pod_facts(&value, &self.config)
    }

    fn report_refusals(&mut self, facts: &PodFacts) {
        if facts.refused.is_empty() || !self.reported.insert(facts.uid.clone()) {
            return;
        }
        for refused in &facts.refused {
            self.metrics.refused(refused.reason);
            let message = format!("will not empty: {}", refused.message);
            tracing::warn!(reason = refused.reason, pod = %format_args!("{}/{}", facts.namespace, facts.name), "{message}");
            let key = format!(
                "{}\0{}\0{}\0{}",
                refused.reason, refused.container, refused.target, refused.why
            );
            if self.refusal_events.len() >= MAX_REFUSAL_EVENTS {
                self.refusal_events.clear();
            }
            if self.refusal_events.insert(key) {
                self.events.send(Kind::Warning, events::REFUSED, &message);
            }
        }
    }

    /// One item of the watch; false when the watch failed or ended (start it again).
    fn on_item(
        &mut self,
        item: Option<Result<Event<Pod>, watcher::Error>>,
        retry: &mut Duration,
    ) -> bool {
        match item {
            Some(Ok(event)) => {
                if matches!(event, Event::InitDone) {
                    *retry = RETRY.0;
                }
                self.on_event(event);
                true
            }
            Some(Err(error)) => {
                self.ledger.watch_lost();
                self.metrics.watch_restarts.inc();
                tracing::warn!(%error, retry_in = ?retry, "the watch of the node's pods failed; nothing is emptied until a new list is complete");
                false
            }
            None => {
                self.ledger.watch_lost();
                false
            }
        }
    }

    /// Empties (or, with --dry-run, reports) every directory that is due now.
    pub async fn act_on_due(&mut self) {
        for due in self.ledger.take_due(Instant::now()) {
            self.act_if_free(&due).await;
        }
    }

    /// Acts on a due directory unless, by now, the ledger is out of sync, a pod that
    /// recorded it is back, or a pod uses it (it then stays recorded, and the next pod to
    /// go or the next list schedules it again).
    async fn act_if_free(&mut self, due: &Due) {
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

    /// Writes the state file when the records changed since the last write.
    pub fn save(&mut self) {
        if !self.dirty {
            return;
        }
        match state::save(&self.state_file, &self.node, self.ledger.records()) {
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

    fn update_gauges(&self) {
        let ledger = &self.ledger;
        self.metrics.recorded.set(ledger.records().len() as i64);
        self.metrics.pending.set(ledger.pending_count() as i64);
        self.metrics.pods.set(ledger.pod_count() as i64);
        self.metrics.synced.set(i64::from(ledger.is_synced()));
    }
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400)
}
