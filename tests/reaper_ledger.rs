//! The reaper's bookkeeping against an independent model: a directory is never due while
//! the ledger is out of sync, while a known pod recorded or uses it (or a directory above
//! or below it), or before it has been free for the whole delay; and every recorded
//! directory does become due once its pods and users are gone.

use prestop_injector::mutation::targets::{HostPath, Open};
use prestop_injector::reaper::derive::PodFacts;
use prestop_injector::reaper::ledger::Ledger;
use prestop_injector::reaper::user::{PodUser, RecordedUser};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const DELAY: Duration = Duration::from_secs(60);

/// Directories on few lines, so that parents, children and siblings all occur.
const DIRS: [&str; 6] = ["/s", "/s/a", "/s/a/x", "/s/b", "/t", "/t/c"];

fn exact(path: &str) -> HostPath {
    HostPath {
        known: path.to_owned(),
        open: None,
    }
}

fn pod(uid: usize, uses: Vec<HostPath>, cleanable: Vec<String>) -> PodFacts {
    PodFacts {
        uid: format!("uid-{uid}"),
        namespace: "batch".into(),
        name: format!("p-{uid}"),
        uses,
        cleanable,
        users: Default::default(),
        refused: Vec::new(),
        claims: Vec::new(),
        ended: false,
    }
}

/// A pod that records `dir` and uses it, as an injected pod does.
fn injected(uid: usize, dir: &str) -> PodFacts {
    pod(uid, vec![exact(dir)], vec![dir.to_owned()])
}

fn due_dirs(ledger: &mut Ledger, now: Instant) -> Vec<String> {
    let mut dirs: Vec<String> = ledger
        .take_due(now)
        .into_iter()
        .map(|due| due.directory)
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn a_force_deleted_pods_directory_is_due_after_the_delay_once() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    assert!(ledger.apply(&injected(1, "/s/a"), t0));
    assert!(
        !ledger.apply(&injected(1, "/s/a"), t0),
        "an update records nothing new"
    );
    ledger.list_done(t0);
    ledger.delete("uid-1", t0);
    assert!(due_dirs(&mut ledger, t0 + DELAY - Duration::from_millis(1)).is_empty());
    let due = ledger.take_due(t0 + DELAY);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].directory, "/s/a");
    assert_eq!(due[0].pods[0].name, "p-1");
    ledger.finished("/s/a");
    assert!(due_dirs(&mut ledger, t0 + DELAY * 10).is_empty());
    assert!(ledger.records().is_empty());
}

#[test]
fn a_user_above_below_or_at_the_directory_keeps_it() {
    for user in [
        exact("/s"),
        exact("/s/a"),
        exact("/s/a/x"),
        HostPath {
            known: "/s".into(),
            open: Some(Open::Below),
        },
    ] {
        let t0 = Instant::now();
        let mut ledger = Ledger::new(DELAY);
        ledger.list_started();
        ledger.apply(&injected(1, "/s/a"), t0);
        ledger.apply(&pod(2, vec![user.clone()], vec![]), t0);
        ledger.list_done(t0);
        ledger.delete("uid-1", t0);
        assert!(due_dirs(&mut ledger, t0 + DELAY * 2).is_empty(), "{user:?}");
        // The user goes: a full delay from then.
        let t1 = t0 + DELAY * 3;
        ledger.delete("uid-2", t1);
        assert!(due_dirs(&mut ledger, t1 + DELAY / 2).is_empty(), "{user:?}");
        assert_eq!(due_dirs(&mut ledger, t1 + DELAY), ["/s/a"], "{user:?}");
    }
    // A sibling is no user.
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&injected(1, "/s/a"), t0);
    ledger.apply(&pod(2, vec![exact("/s/b")], vec![]), t0);
    ledger.list_done(t0);
    ledger.delete("uid-1", t0);
    assert_eq!(due_dirs(&mut ledger, t0 + DELAY), ["/s/a"]);
}

#[test]
fn a_user_that_appears_after_the_due_time_is_seen_before_the_walk() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&injected(1, "/s/a"), t0);
    ledger.apply(&injected(2, "/s/b"), t0);
    ledger.list_done(t0);
    ledger.delete("uid-1", t0);
    ledger.delete("uid-2", t0);
    let due = due_dirs(&mut ledger, t0 + DELAY);
    assert_eq!(due, ["/s/a", "/s/b"]);
    // While /s/a is walked, a pod that uses /s/b arrives: the reaper asks again.
    ledger.apply(&pod(3, vec![exact("/s/b")], vec![]), t0 + DELAY);
    assert!(ledger.is_free("/s/a"));
    assert!(!ledger.is_free("/s/b"));
    ledger.finished("/s/a");
    // /s/b stays recorded and is scheduled again when its user goes.
    assert!(ledger.records().contains_key("/s/b"));
    ledger.delete("uid-3", t0 + DELAY * 2);
    assert_eq!(due_dirs(&mut ledger, t0 + DELAY * 3), ["/s/b"]);
}

#[test]
fn a_pod_recreated_with_the_same_name_keeps_the_directory() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.list_done(t0);
    ledger.apply(&injected(1, "/s/a"), t0);
    ledger.delete("uid-1", t0);
    // The StatefulSet's pod-0 again: same name, new uid, same directory.
    ledger.apply(&injected(2, "/s/a"), t0 + DELAY / 2);
    assert!(due_dirs(&mut ledger, t0 + DELAY * 5).is_empty());
    assert_eq!(ledger.records()["/s/a"].len(), 2);
}

#[test]
fn nothing_is_due_out_of_sync_and_a_relist_finds_what_went_meanwhile() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&injected(1, "/s/a"), t0);
    ledger.apply(&injected(2, "/s/b"), t0);
    ledger.list_done(t0);
    ledger.delete("uid-1", t0);
    ledger.watch_lost();
    assert!(
        due_dirs(&mut ledger, t0 + DELAY * 2).is_empty(),
        "out of sync"
    );
    // The new list: pod 2 went while the watch was down, pod 1's directory still waits.
    let t1 = t0 + DELAY * 3;
    ledger.list_started();
    assert!(due_dirs(&mut ledger, t1).is_empty(), "listing");
    ledger.list_done(t1);
    assert_eq!(due_dirs(&mut ledger, t1), ["/s/a"]);
    assert!(due_dirs(&mut ledger, t1 + DELAY - Duration::from_millis(1)).is_empty());
    assert_eq!(due_dirs(&mut ledger, t1 + DELAY), ["/s/b"]);
}

#[test]
fn restored_records_wait_for_the_first_list() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    let mut records = BTreeMap::new();
    let gone = injected(1, "/s/a");
    let alive = injected(2, "/s/b");
    for pod in [&gone, &alive] {
        let entry = prestop_injector::reaper::ledger::PodRef {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            user: Default::default(),
        };
        records.insert(pod.cleanable[0].clone(), vec![entry]);
    }
    ledger.restore(records);
    assert!(
        due_dirs(&mut ledger, t0 + DELAY * 2).is_empty(),
        "no list yet"
    );
    ledger.list_started();
    ledger.apply(&alive, t0);
    ledger.list_done(t0);
    assert_eq!(due_dirs(&mut ledger, t0 + DELAY), ["/s/a"]);
}

fn ended(mut facts: PodFacts) -> PodFacts {
    facts.ended = true;
    facts
}

/// Issue 38, class 1: the kubelet ends a pod without a deletion (a node-pressure
/// eviction, a graceful node shutdown, `activeDeadlineSeconds`, a `Never` Job's end) and
/// its object stays `Failed` or `Succeeded` for ever. Its directory is emptied after the
/// delay all the same, counted from the update that first shows it ended; later updates of
/// the ended pod do not hold it back.
#[test]
fn a_pod_the_kubelet_ended_while_its_object_stays_has_its_directory_emptied() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&injected(1, "/s/a"), t0);
    ledger.list_done(t0);
    assert!(due_dirs(&mut ledger, t0 + DELAY * 10).is_empty(), "running");
    let t1 = t0 + DELAY * 10;
    ledger.apply(&ended(injected(1, "/s/a")), t1);
    assert_eq!(ledger.why_kept("/s/a"), "delay");
    // The kubelet's last status write, a label: no new clock.
    ledger.apply(&ended(injected(1, "/s/a")), t1 + DELAY / 2);
    assert!(due_dirs(&mut ledger, t1 + DELAY - Duration::from_millis(1)).is_empty());
    assert_eq!(due_dirs(&mut ledger, t1 + DELAY), ["/s/a"]);
    ledger.finished("/s/a");
    // Its object still listed (every update, every relist), it records nothing again.
    assert!(!ledger.apply(&ended(injected(1, "/s/a")), t1 + DELAY * 2));
    ledger.list_started();
    ledger.apply(&ended(injected(1, "/s/a")), t1 + DELAY * 3);
    ledger.list_done(t1 + DELAY * 3);
    assert!(ledger.records().is_empty());
    assert!(due_dirs(&mut ledger, t1 + DELAY * 10).is_empty());
}

/// The same across a restart: what was dealt with is kept beside the state file, so the
/// restarted reaper's first list, which still shows the ended pod, records its directory
/// no more. Before, the restart recorded it again and emptied it once more after the
/// delay, taking whatever had been written there since by anything but a live pod. A
/// pair whose pod the first list does not show is dropped.
#[test]
fn what_was_dealt_with_stays_dealt_with_across_a_restart() {
    use prestop_injector::reaper::state;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&ended(injected(1, "/s/a")), t0);
    ledger.apply(&ended(injected(2, "/s/b")), t0);
    ledger.list_done(t0);
    assert_eq!(due_dirs(&mut ledger, t0 + DELAY), ["/s/a", "/s/b"]);
    ledger.finished("/s/a");
    ledger.finished("/s/b");
    state::save(&file, "node-a", ledger.records(), None).unwrap();
    state::save_dealt_with(&file, "node-a", &ledger.dealt_with()).unwrap();

    let loaded = state::load(&file, "node-a");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let mut restarted = Ledger::new(DELAY);
    restarted.restore(loaded.records);
    restarted.restore_dealt_with(loaded.dealt_with);
    let t1 = t0 + DELAY * 5;
    restarted.list_started();
    // Pod 1 is still listed; pod 2 was deleted while the reaper was down.
    restarted.apply(&ended(injected(1, "/s/a")), t1);
    restarted.list_done(t1);
    assert!(restarted.records().is_empty());
    assert!(due_dirs(&mut restarted, t1 + DELAY * 10).is_empty());
    assert_eq!(
        restarted.dealt_with(),
        [("uid-1".to_owned(), "/s/a".to_owned())]
    );
}

/// While a live pod keeps a directory in use, pods that record it come and go (a
/// tenant's copies made and deleted in a loop, overlapping CronJob runs): of the gone
/// ones, two per user are kept, all the walk needs (whose rights, and that more than one
/// pod recorded it). Before, every one was kept: 1,001
/// entries after 1,000 cycles, the state file rewritten with all of them, every watch
/// event scanning them.
#[test]
fn gone_pods_of_a_directory_in_use_are_kept_two_per_user() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&injected(0, "/s/a"), t0);
    ledger.list_done(t0);
    for n in 1..=1_000 {
        ledger.apply(&injected(n, "/s/a"), t0);
        ledger.delete(&format!("uid-{n}"), t0);
    }
    let kept: Vec<&str> = ledger.records()["/s/a"]
        .iter()
        .map(|pod| pod.uid.as_str())
        .collect();
    assert_eq!(kept, ["uid-0", "uid-1", "uid-2"]);
    // A gone pod of another user is kept beside them: the walk must see that they differ.
    let mut other = injected(2_000, "/s/a");
    other.users.insert(
        "/s/a".to_owned(),
        RecordedUser::Known(PodUser {
            uid: 1000,
            gid: 1000,
            groups: Vec::new(),
        }),
    );
    ledger.apply(&other, t0);
    ledger.delete("uid-2000", t0);
    assert_eq!(ledger.records()["/s/a"].len(), 4);
    // Once the keeper goes (a third of the first user), the directory is due, with two
    // pods of each user.
    ledger.delete("uid-0", t0);
    let due = ledger.take_due(t0 + DELAY);
    assert_eq!(due.len(), 1);
    let users: Vec<&str> = due[0].pods.iter().map(|pod| pod.uid.as_str()).collect();
    assert_eq!(users, ["uid-0", "uid-1", "uid-2000"]);
}

/// An ended pod uses nothing, so another pod's directory on its line is not held by it;
/// one that is not ended (crash-looping, pending, between init containers, terminating)
/// still holds it.
#[test]
fn an_ended_pod_holds_no_directory_and_a_pod_that_may_run_again_does() {
    let t0 = Instant::now();
    let mut ledger = Ledger::new(DELAY);
    ledger.list_started();
    ledger.apply(&injected(1, "/s/a"), t0);
    ledger.apply(&pod(2, vec![exact("/s")], vec![]), t0);
    ledger.list_done(t0);
    ledger.delete("uid-1", t0);
    assert!(
        due_dirs(&mut ledger, t0 + DELAY * 3).is_empty(),
        "pod 2 may run"
    );
    assert_eq!(ledger.why_kept("/s/a"), "pod_uses");
    let t1 = t0 + DELAY * 3;
    ledger.apply(&ended(pod(2, vec![exact("/s")], vec![])), t1);
    assert!(ledger.is_free("/s/a"));
    assert_eq!(ledger.live_pods().count(), 0);
    assert_eq!(ledger.known_pods().count(), 1);
    ledger.postpone("/s/a", t1);
    assert_eq!(due_dirs(&mut ledger, t1 + DELAY), ["/s/a"]);
}

/// One step of a random history.
#[derive(Debug, Clone)]
enum Step {
    /// Apply a pod: its uid, the directories it uses (exact or open below), the ones it
    /// records (a subset of its exact uses).
    Apply {
        uid: usize,
        uses: Vec<(usize, bool)>,
        records: Vec<bool>,
    },
    Delete(usize),
    /// The pod ends for good while its object stays (terminal, nothing running).
    End(usize),
    ListStarted,
    ListDone,
    WatchLost,
    Wait(u64),
    TakeDue,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..6usize, prop::collection::vec((0..DIRS.len(), any::<bool>()), 0..3), prop::collection::vec(any::<bool>(), 3))
            .prop_map(|(uid, uses, records)| Step::Apply { uid, uses, records }),
        3 => (0..6usize).prop_map(Step::Delete),
        2 => (0..6usize).prop_map(Step::End),
        1 => Just(Step::ListStarted),
        1 => Just(Step::ListDone),
        1 => Just(Step::WatchLost),
        3 => (0..90u64).prop_map(Step::Wait),
        3 => Just(Step::TakeDue),
    ]
}

/// The model: what is known, and since when each directory has been free.
#[derive(Default)]
struct Model {
    pods: BTreeMap<usize, PodFacts>,
    listing: Option<BTreeMap<usize, PodFacts>>,
    synced: bool,
    recorded: BTreeSet<String>,
    /// The last moment each directory was busy (recorded or used by a known pod).
    busy_at: BTreeMap<String, u64>,
}

impl Model {
    /// The pods that may use a directory: known and not ended.
    fn known(&self) -> impl Iterator<Item = &PodFacts> {
        self.pods
            .values()
            .chain(self.listing.iter().flat_map(|l| l.values()))
            .filter(|pod| !pod.ended)
    }

    fn busy(&self, dir: &str) -> bool {
        self.known().any(|pod| {
            pod.cleanable.iter().any(|c| c == dir)
                || pod.uses.iter().any(|host| {
                    let (a, b) = (host.known.as_str(), dir);
                    let below = |p: &str, base: &str| {
                        base == "/" || p == base || p.starts_with(&format!("{base}/"))
                    };
                    below(a, b) || below(b, a)
                })
        })
    }

    fn mark(&mut self, now: u64) {
        for dir in DIRS {
            if self.busy(dir) {
                self.busy_at.insert(dir.to_owned(), now);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn due_only_when_in_sync_free_and_free_for_the_delay(steps in prop::collection::vec(step(), 1..60)) {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut ledger = Ledger::new(DELAY);
        let mut model = Model::default();
        let mut now = 0u64;
        for step in &steps {
            model.mark(now);
            match step {
                Step::Apply { uid, uses, records } => {
                    let uses: Vec<HostPath> = uses.iter().map(|(d, open)| HostPath {
                        known: DIRS[*d].to_owned(),
                        open: open.then_some(Open::Below),
                    }).collect();
                    let cleanable: Vec<String> = uses.iter().zip(records)
                        .filter(|(host, record)| host.open.is_none() && **record)
                        .map(|(host, _)| host.known.clone())
                        .collect::<BTreeSet<_>>().into_iter().collect();
                    let facts = pod(*uid, uses, cleanable.clone());
                    ledger.apply(&facts, at(now));
                    model.recorded.extend(cleanable);
                    match &mut model.listing {
                        Some(listing) => { listing.insert(*uid, facts); }
                        None => { model.pods.insert(*uid, facts); }
                    }
                }
                Step::End(uid) => {
                    let known = model.listing.as_ref().and_then(|l| l.get(uid)).or_else(|| model.pods.get(uid));
                    if let Some(facts) = known.cloned() {
                        let facts = ended(facts);
                        ledger.apply(&facts, at(now));
                        match &mut model.listing {
                            Some(listing) => { listing.insert(*uid, facts); }
                            None => { model.pods.insert(*uid, facts); }
                        }
                    }
                }
                Step::Delete(uid) => {
                    ledger.delete(&format!("uid-{uid}"), at(now));
                    model.pods.remove(uid);
                    if let Some(listing) = &mut model.listing { listing.remove(uid); }
                }
                Step::ListStarted => {
                    ledger.list_started();
                    // Known until a complete list says otherwise.
                    if let Some(listing) = model.listing.take() { model.pods.extend(listing); }
                    model.listing = Some(BTreeMap::new());
                    model.synced = false;
                }
                Step::ListDone => {
                    ledger.list_done(at(now));
                    if let Some(listing) = model.listing.take() { model.pods = listing; }
                    model.synced = true;
                }
                Step::WatchLost => {
                    ledger.watch_lost();
                    if let Some(listing) = model.listing.take() { model.pods.extend(listing); }
                    model.synced = false;
                }
                Step::Wait(seconds) => now += seconds,
                Step::TakeDue => {
                    for due in ledger.take_due(at(now)) {
                        let dir = due.directory.as_str();
                        prop_assert!(model.synced, "{dir} due out of sync");
                        prop_assert!(!model.busy(dir), "{dir} due while busy");
                        prop_assert!(model.recorded.contains(dir), "{dir} was never recorded");
                        if let Some(busy) = model.busy_at.get(dir) {
                            prop_assert!(now >= busy + DELAY.as_secs(), "{dir} free since {busy}, due at {now}");
                        }
                        ledger.finished(dir);
                        model.recorded.remove(dir);
                    }
                }
            }
            model.mark(now);
        }
        // Liveness: once every pod is gone and the delay has passed, every recorded
        // directory is due, exactly once.
        ledger.list_started();
        ledger.list_done(at(now));
        now += DELAY.as_secs();
        let mut due: Vec<String> = ledger.take_due(at(now)).into_iter().map(|d| d.directory).collect();
        due.sort();
        let expected: Vec<String> = model.recorded.iter().cloned().collect();
        prop_assert_eq!(due, expected);
    }
}
