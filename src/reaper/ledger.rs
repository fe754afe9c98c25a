//! The reaper's bookkeeping (pure: no I/O, time passed in).
//!
//! Invariant, tested in `tests/reaper_ledger.rs`: [`Ledger::take_due`] returns a directory
//! only when
//! - the ledger is in sync with the API server (a complete list of the node's pods has
//!   been seen since the last watch failure),
//! - no pod that recorded it is still live (known and not ended),
//! - no live pod uses it, a directory above it or one below it,
//! - and it has been free for at least the delay: the clock starts when the last pod that
//!   recorded it is gone or has ended, and starts again whenever a pod that uses it
//!   appears.
//!
//! A pod that has ended ([`crate::node::ended`]: terminal, nothing running) counts as gone
//! although its object remains (issue 38, class 1): an evicted pod, one past its
//! `activeDeadlineSeconds`, a finished `Never` Job's pod. The kubelet starts nothing in it
//! again, and its object may stay for ever.
//!
//! Records survive restarts through [`Ledger::records`] (the state file); known pods do
//! not: they come from the next list.

use super::derive::PodFacts;
use crate::mutation::targets::HostPath;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

mod pods;
pub use pods::{KnownPod, PodRef};

/// A directory that is due: free, for long enough.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub directory: String,
    /// The gone pods that recorded it.
    pub pods: Vec<PodRef>,
}

#[derive(Debug, Default)]
pub struct Ledger {
    delay: Duration,
    /// Recorded directory → the pods that recorded it.
    records: BTreeMap<String, Vec<PodRef>>,
    /// The node's pods as last seen, by uid.
    pods: HashMap<String, KnownPod>,
    /// During a list: the pods listed so far; they replace `pods` when it completes.
    listing: Option<HashMap<String, KnownPod>>,
    synced: bool,
    /// Recorded directories whose pods are all gone → when they are due.
    pending: BTreeMap<String, Instant>,
    /// (uid, directory): dealt with while that pod had ended and was still listed, so
    /// its later updates (the kubelet's last status, every relist) record it no more.
    dealt_with: HashSet<(String, String)>,
}

impl Ledger {
    pub fn new(delay: Duration) -> Ledger {
        Ledger {
            delay,
            ..Ledger::default()
        }
    }

    /// Restores records from the state file. No pod is known yet, so nothing is due
    /// before the first complete list.
    pub fn restore(&mut self, records: BTreeMap<String, Vec<PodRef>>) {
        self.records = records;
    }

    pub fn records(&self) -> &BTreeMap<String, Vec<PodRef>> {
        &self.records
    }

    /// Restores what was dealt with (the state file's side file): a pod that ended and is
    /// still listed does not record its directory again after a restart. Pairs of pods
    /// the first complete list does not show are dropped then.
    pub fn restore_dealt_with(&mut self, pairs: Vec<(String, String)>) {
        self.dealt_with = pairs.into_iter().collect();
    }

    /// (uid, directory) pairs dealt with while their pod is still listed, sorted.
    pub fn dealt_with(&self) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = self.dealt_with.iter().cloned().collect();
        pairs.sort();
        pairs
    }

    pub fn is_synced(&self) -> bool {
        self.synced
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// A pod was added or changed. Returns whether the records changed.
    pub fn apply(&mut self, pod: &PodFacts, now: Instant) -> bool {
        let changed = self.record(pod);
        let before = match &mut self.listing {
            Some(listing) => listing.insert(pod.uid.clone(), KnownPod::of(pod)),
            None => self.pods.insert(pod.uid.clone(), KnownPod::of(pod)),
        };
        // A live pod uses its directories now. An ended one used them until it ended,
        // which is now when this update is the first to show it; later updates of an
        // ended pod (the kubelet's last status, a label) restart nothing.
        let was_live = before.as_ref().is_none_or(|known| !known.ended);
        if !pod.ended || was_live {
            self.restart_clocks(&pod.uses, now);
            // Volumes of a pod do not change, but should a use ever vanish in an update,
            // it was a use until now.
            self.restart_clocks(&before.map(|known| known.uses).unwrap_or_default(), now);
        }
        if pod.ended {
            self.schedule_orphans(now);
        }
        changed
    }

    /// A pod is gone from the API.
    pub fn delete(&mut self, uid: &str, now: Instant) {
        let listed = self
            .listing
            .as_mut()
            .and_then(|listing| listing.remove(uid));
        // It used its directories until now (as last listed and as last watched): a
        // pending one gets its full delay from here.
        for known in [self.pods.remove(uid), listed].into_iter().flatten() {
            self.restart_clocks(&known.uses, now);
        }
        self.dealt_with.retain(|(pod, _)| pod != uid);
        self.fold_gone();
        self.schedule_orphans(now);
    }

    /// A new list of the node's pods starts (a watch (re)start).
    pub fn list_started(&mut self) {
        self.keep_unfinished_listing();
        self.listing = Some(HashMap::new());
        self.synced = false;
    }

    /// The list is complete: it is now the set of the node's pods, and every recorded
    /// directory whose pods are not in it is scheduled (a restart's reconcile).
    pub fn list_done(&mut self, now: Instant) {
        if let Some(listing) = self.listing.take() {
            // Pods that went while the watch was down went at some moment until now; so
            // did a use that the list no longer shows (volumes do not change, but the
            // rule must not depend on it).
            let gone: Vec<HostPath> = self
                .pods
                .iter()
                .filter(|(uid, known)| listing.get(*uid) != Some(*known))
                .flat_map(|(_, known)| known.uses.iter().cloned())
                .collect();
            self.pods = listing;
            self.restart_clocks(&gone, now);
            let pods = &self.pods;
            self.dealt_with.retain(|(uid, _)| pods.contains_key(uid));
            self.fold_gone();
        }
        self.synced = true;
        self.schedule_orphans(now);
    }

    /// The watch failed: nothing is due until the next complete list, since a pod may
    /// have appeared meanwhile.
    pub fn watch_lost(&mut self) {
        self.synced = false;
        self.keep_unfinished_listing();
    }

    /// The pods of a list that never completed stay known until a list completes
    /// without them: they existed a moment ago.
    /// A pod in both keeps the uses of both (conservative, and needs no clock).
    fn keep_unfinished_listing(&mut self) {
        for (uid, listed) in self.listing.take().unwrap_or_default() {
            let known = self.pods.entry(uid).or_insert_with(|| KnownPod {
                uses: Vec::new(),
                claims: Vec::new(),
                ..listed.clone()
            });
            // Ended only if both say so: an ended pod never lives again.
            known.ended &= listed.ended;
            for host in listed.uses {
                if !known.uses.contains(&host) {
                    known.uses.push(host);
                }
            }
            for claim in listed.claims {
                if !known.claims.contains(&claim) {
                    known.claims.push(claim);
                }
            }
        }
    }

    /// When the next directory is due, if any is pending and the ledger is in sync (out
    /// of sync nothing can be due, so there is nothing to wake up for).
    pub fn next_due(&self) -> Option<Instant> {
        if !self.synced {
            return None;
        }
        self.pending.values().min().copied()
    }

    /// The directories due at `now`, each checked again against every known pod. They
    /// leave the pending set; call [`Ledger::finished`] once each is dealt with. A
    /// directory found in use stays recorded and waits for the next pod to go.
    pub fn take_due(&mut self, now: Instant) -> Vec<Due> {
        if !self.synced {
            return Vec::new();
        }
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(dir, _)| dir.clone())
            .collect();
        let mut ready = Vec::new();
        for directory in due {
            self.pending.remove(&directory);
            if !self.is_free(&directory) {
                continue;
            }
            let pods = self.records.get(&directory).cloned().unwrap_or_default();
            ready.push(Due { directory, pods });
        }
        ready
    }

    /// The directory was found in use when it was due (by identity, which the ledger
    /// cannot see): it stays recorded and is due again after the delay.
    pub fn postpone(&mut self, directory: &str, now: Instant) {
        if self.records.contains_key(directory) {
            self.pending.insert(directory.to_owned(), now + self.delay);
        }
    }

    /// The directory was emptied (or reported, or refused): it is no longer recorded.
    pub fn finished(&mut self, directory: &str) {
        for pod in self.records.remove(directory).unwrap_or_default() {
            if self.is_known(&pod.uid) {
                self.dealt_with.insert((pod.uid, directory.to_owned()));
            }
        }
        self.pending.remove(directory);
    }

    /// Whether `directory` may be emptied now, on what is known now: in sync, none of its
    /// pods known, no known pod on its line. [`Ledger::take_due`] applies it at the due
    /// time; the reaper again just before each walk.
    pub fn is_free(&self, directory: &str) -> bool {
        self.synced && !self.is_recorded_by_known_pod(directory) && !self.is_in_use(directory)
    }

    /// Whether a live pod uses `directory`, a directory above it or one below it.
    pub fn is_in_use(&self, directory: &str) -> bool {
        self.live_pods()
            .any(|known| known.uses.iter().any(|host| host.may_overlap(directory)))
    }

    /// Every pod known now (those of a list under way included), in any phase.
    pub fn known_pods(&self) -> impl Iterator<Item = &KnownPod> {
        self.pods
            .values()
            .chain(self.listing.iter().flat_map(|l| l.values()))
    }

    /// Every known pod that has not ended (running, pending, between init containers,
    /// restarting, terminating): the check before a walk resolves what each reaches on
    /// the node.
    pub fn live_pods(&self) -> impl Iterator<Item = &KnownPod> {
        self.known_pods().filter(|known| !known.ended)
    }

    pub fn is_known(&self, uid: &str) -> bool {
        self.pods.contains_key(uid) || self.listing.as_ref().is_some_and(|l| l.contains_key(uid))
    }

    /// Known and not ended: as last listed, and in a list under way.
    pub fn is_live(&self, uid: &str) -> bool {
        let live = |pods: &HashMap<String, KnownPod>| pods.get(uid).is_some_and(|k| !k.ended);
        live(&self.pods) || self.listing.as_ref().is_some_and(live)
    }

    /// Why a recorded directory is not emptied now, as far as the ledger knows (the
    /// `kept_directories` reason): `delay` when only the clock holds it.
    pub fn why_kept(&self, directory: &str) -> &'static str {
        if !self.synced {
            "watch_not_synced"
        } else if self.is_recorded_by_known_pod(directory) {
            "pod_exists"
        } else if self.is_in_use(directory) {
            "pod_uses"
        } else {
            "delay"
        }
    }

    /// Of the gone pods that recorded a directory, keeps the first two per user: all the
    /// walk needs of them (whose rights, or that they differ; and that more than one pod
    /// recorded it, so it is nobody's own per-pod directory). So a directory a live pod
    /// keeps in use does not record every pod that came and went meanwhile (overlapping
    /// CronJob runs, a tenant's copies made and deleted in a loop).
    fn fold_gone(&mut self) {
        const PER_USER: usize = 2;
        let listing = self.listing.iter().flat_map(|listing| listing.keys());
        let known: HashSet<&String> = self.pods.keys().chain(listing).collect();
        for pods in self.records.values_mut() {
            let mut users = Vec::new();
            pods.retain(|pod| {
                if known.contains(&pod.uid) {
                    return true;
                }
                let kept = users.iter().filter(|user| **user == pod.user).count();
                users.push(pod.user.clone());
                kept < PER_USER
            });
        }
    }

    fn is_recorded_by_known_pod(&self, directory: &str) -> bool {
        self.records
            .get(directory)
            .is_some_and(|pods| pods.iter().any(|pod| self.is_live(&pod.uid)))
    }

    fn record(&mut self, pod: &PodFacts) -> bool {
        let mut changed = false;
        for directory in &pod.cleanable {
            if pod.ended
                && self
                    .dealt_with
                    .contains(&(pod.uid.clone(), directory.clone()))
            {
                continue;
            }
            let user = pod.users.get(directory).cloned().unwrap_or_default();
            let pods = self.records.entry(directory.clone()).or_default();
            match pods.iter_mut().find(|p| p.uid == pod.uid) {
                // The kubelet reports the user once the pod runs: the record follows.
                Some(known) if known.user != user => {
                    known.user = user;
                    changed = true;
                }
                Some(_) => {}
                None => {
                    pods.push(PodRef {
                        uid: pod.uid.clone(),
                        namespace: pod.namespace.clone(),
                        name: pod.name.clone(),
                        user,
                    });
                    changed = true;
                }
            }
        }
        changed
    }

    /// A pod that uses a pending directory (or one on its line) restarts its clock: it
    /// is not free, and when that pod goes it gets its own full delay.
    fn restart_clocks(&mut self, uses: &[HostPath], now: Instant) {
        let delay = self.delay;
        for (directory, at) in self.pending.iter_mut() {
            if uses.iter().any(|host| host.may_overlap(directory)) {
                *at = now + delay;
            }
        }
    }

    /// Schedules every recorded directory none of whose pods is known and that is not
    /// pending yet.
    fn schedule_orphans(&mut self, now: Instant) {
        let orphans: Vec<String> = self
            .records
            .keys()
            .filter(|dir| !self.pending.contains_key(*dir) && !self.is_recorded_by_known_pod(dir))
            .cloned()
            .collect();
        for directory in orphans {
            self.pending.insert(directory, now + self.delay);
        }
    }
}
