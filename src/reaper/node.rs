//! The reaper's loop: the watch of the node's pods in, decisions from the [`Ledger`],
//! the cleaner's walk out. Every decision is made here, on one task, so a directory is
//! checked against the pods known at the moment it is emptied.

mod act;
pub mod arrivals;
mod before_walk;
pub mod guard;
pub mod kept;
mod per_pod;
mod recheck;
mod state_file;

pub use act::node_message;

use super::derive::{pod_facts_with, PodFacts};
use super::events::{self, Events, Kind};
use super::in_use::Busy;
use super::ledger::Ledger;
use super::metrics::Metrics;
use super::state::Walking;
use super::users;
use crate::config::Config;
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
    /// The node's `/` (`--node-root`), where pods' host paths are resolved; `None`:
    /// whether a pod reaches a directory is unknown, and nothing is emptied.
    pub node_root: Option<PathBuf>,
    /// Reads pods' claims and their volumes; set by [`Reaper::run`] from its client.
    pub api: Option<kube::Client>,
    pub state_file: PathBuf,
    pub dry_run: bool,
    pub ledger: Ledger,
    pub metrics: Arc<Metrics>,
    pub events: Events,
    pub ready: Arc<AtomicBool>,
    /// The cleaner program, run as the gone pod's user for each walk (`--cleaner`).
    pub cleaner: PathBuf,
    /// `--keep-for-read-only-views`: a read-only view of a directory above every allowed
    /// prefix keeps what is below it (default: it does not; docs/REAPER.md#when).
    pub read_only_views_keep: bool,
    /// How often the in-use check runs again during a walk.
    pub guard_interval: Duration,
    /// Called in the reaper with the directory's location just before its walk starts,
    /// once the state file names it (tests crash the reaper there on purpose).
    pub walk_started: fn(&str),
    /// The reaper was asked to stop (SIGTERM): a walk under way stops at its next look
    /// and is taken up after the restart, not counted as one that crashed.
    pub stopping: Arc<AtomicBool>,
    /// The walk under way, as the state file names it.
    walking: Option<Walking>,
    /// A walk that was under way when the reaper last stopped: it did not finish.
    interrupted: Option<Walking>,
    /// Directories found in use by identity whose Event was sent (one per directory,
    /// not one per retry).
    busy_events: HashSet<String>,
    kept: kept::Kept,
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
            node_root: None,
            api: None,
            state_file,
            dry_run,
            ledger,
            metrics,
            events,
            ready: Arc::new(AtomicBool::new(false)),
            cleaner: default_cleaner(),
            read_only_views_keep: false,
            guard_interval: guard::GUARD_INTERVAL,
            walk_started: |_| {},
            stopping: Arc::new(AtomicBool::new(false)),
            walking: None,
            interrupted: None,
            busy_events: HashSet::new(),
            kept: kept::Kept::default(),
            reported: HashSet::new(),
            refusal_events: HashSet::new(),
            dirty: false,
        }
    }

    /// Watches until `shutdown`; every watch failure restarts it from a full list.
    pub async fn run(mut self, client: kube::Client, mut shutdown: watch::Receiver<bool>) {
        self.api.get_or_insert_with(|| client.clone());
        let pods: kube::Api<Pod> = kube::Api::all(client);
        let selector = format!("spec.nodeName={}", self.node);
        let mut retry = RETRY.0;
        // The loop awaits a walk: the stop reaches the walk through this flag, read at
        // each of its looks, and the loop once the walk has stopped.
        let (stopping, mut asked) = (self.stopping.clone(), shutdown.clone());
        tokio::spawn(async move {
            crate::server::shutdown::signalled(&mut asked).await;
            stopping.store(true, Ordering::SeqCst);
        });
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
                for due in self.take_due() {
                    if self.stopping.load(Ordering::SeqCst) {
                        // Stopping: the rest stay recorded, for after the restart.
                        break;
                    }
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

    /// Whether anything on the node uses `directory` now, which the walk would empty at
    /// `location`: one check round ([`users::check`]) over the pods known now. Cheap
    /// enough to call again during a walk.
    pub(super) async fn who_uses(&self, location: &str, directory: &str) -> Option<Busy> {
        let check = users::Check {
            node_root: self.node_root.clone(),
            client: self.api.clone(),
            pods: self.ledger.live_pods().cloned().collect(),
            prefixes: self.config.allowed_host_path_prefixes.clone(),
            read_only_views_keep: self.read_only_views_keep,
        };
        users::check(check, location.into(), directory.to_owned())
            .await
            .err()
    }

    /// The check that guards a walk: [`Reaper::who_uses`]'s, repeated on the walk's
    /// blocking thread with the claims read once now (the pods cannot change meanwhile:
    /// the loop waits for the walk).
    pub(super) async fn walk_guard(&self) -> users::Repeat {
        users::Check {
            node_root: self.node_root.clone(),
            client: self.api.clone(),
            pods: self.ledger.live_pods().cloned().collect(),
            prefixes: self.config.allowed_host_path_prefixes.clone(),
            read_only_views_keep: self.read_only_views_keep,
        }
        .for_walk()
        .await
    }

    fn facts(&self, pod: &Pod) -> Option<PodFacts> {
        facts_of(
            pod,
            &self.config,
            self.own_pod.as_ref(),
            self.read_only_views_keep,
        )
    }

    fn report_refusals(&mut self, facts: &PodFacts) {
        if facts.refused.is_empty() || !self.reported.insert(facts.uid.clone()) {
            return;
        }
        for refused in &facts.refused {
            self.metrics.refused(refused.reason);
            let message = format!("will not empty: {}", refused.message);
            tracing::warn!(reason = refused.reason, pod = %format_args!("{}/{}", facts.namespace, facts.name), "{message}");
            // Outside the tenant's namespace: the reason only (the log line names it).
            let event = format!(
                "will not empty a cleanup target of an injected pod ({}); the reaper's log on \
                 this node names it",
                refused.reason
            );
            let key = format!(
                "{}\0{}\0{}\0{}",
                refused.reason, refused.container, refused.target, refused.why
            );
            if self.refusal_events.len() >= MAX_REFUSAL_EVENTS {
                self.refusal_events.clear();
            }
            if self.refusal_events.insert(key) {
                self.events.send(Kind::Warning, events::REFUSED, &event);
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

    fn update_gauges(&mut self) {
        self.report_kept();
        let ledger = &self.ledger;
        self.metrics.recorded.set(ledger.records().len() as i64);
        self.metrics.pending.set(ledger.pending_count() as i64);
        self.metrics.pods.set(ledger.pod_count() as i64);
        self.metrics.synced.set(i64::from(ledger.is_synced()));
    }
}

/// `prestop-clean` beside the reaper's own executable (the image has both in
/// `/usr/local/bin`).
pub fn default_cleaner() -> PathBuf {
    let name = prestop_clean::argv::PROGRAM_NAME;
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(name)))
        .unwrap_or_else(|| PathBuf::from("/usr/local/bin").join(name))
}

/// What the reaper knows of `pod`, unless it is the reaper's own (which mounts the
/// prefixes but uses none of them); the main watch and each walk's own watch alike.
pub(super) fn facts_of(
    pod: &Pod,
    config: &Config,
    own_pod: Option<&(String, String)>,
    read_only_views_keep: bool,
) -> Option<PodFacts> {
    let meta = &pod.metadata;
    if let (Some((namespace, name)), Some(ns), Some(n)) = (own_pod, &meta.namespace, &meta.name) {
        if namespace == ns && name == n {
            return None;
        }
    }
    let value = crate::json::to_value(pod).ok()?;
    pod_facts_with(&value, config, read_only_views_keep)
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400)
}
