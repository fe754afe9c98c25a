//! The node's pods, kept current by one watch (issue 38, finding 6): the node agent
//! answers from this picture, never with a LIST per question. A LIST of every pod bound
//! to the node, up to six times in a second and a half, for each cleanup's question,
//! multiplied by pods that ask in a loop, is a load on the API server that a tenant
//! controls; a watch costs one LIST when it (re)starts and then only the changes.
//!
//! The picture is shared between the watch's task, which writes it, and the agent's
//! judging threads, which read it and may wait for the next change (the kubelet writes a
//! container's exit a moment after the SIGTERM that asks): a mutex and a condition
//! variable, no runtime needed to wait.
//!
//! Freshness: until the watch's first list is complete, and from a watch failure until
//! the next complete list, the picture is not in sync and says so; a question then waits
//! for the sync within its patience and otherwise gets no `ending`. A pod known only from
//! before a failure stays known until a list completes without it (the pod existed a
//! moment ago), as the reaper's ledger does.

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, watcher, Event};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The node's pods as the watch last showed them.
#[derive(Debug, Default)]
pub struct Picture {
    /// Bound pods by uid.
    pods: HashMap<String, Arc<Pod>>,
    /// The pods of a list under way; they replace `pods` when it completes.
    listing: Option<HashMap<String, Arc<Pod>>>,
    synced: bool,
    /// Counts changes, so that a waiter knows one happened.
    generation: u64,
}

impl Picture {
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The pod of `uid` if the picture has it (a list under way included).
    pub fn pod(&self, uid: &str) -> Option<&Arc<Pod>> {
        self.listing
            .as_ref()
            .and_then(|listing| listing.get(uid))
            .or_else(|| self.pods.get(uid))
    }

    /// Every pod known now: those of a list under way and those not yet listed again.
    pub fn pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        let listing = self.listing.as_ref();
        listing.into_iter().flat_map(|l| l.values()).chain(
            self.pods
                .iter()
                .filter(move |(uid, _)| !listing.is_some_and(|l| l.contains_key(*uid)))
                .map(|(_, pod)| pod),
        )
    }

    pub fn len(&self) -> usize {
        self.pods().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One event of the watch.
    pub fn apply(&mut self, event: Event<Pod>) {
        match event {
            Event::Init => {
                self.listing = Some(HashMap::new());
                self.synced = false;
            }
            Event::InitApply(pod) => {
                if let Some(uid) = pod.metadata.uid.clone() {
                    let pod = Arc::new(pod);
                    match &mut self.listing {
                        Some(listing) => listing.insert(uid, pod),
                        None => self.pods.insert(uid, pod),
                    };
                }
            }
            Event::InitDone => {
                if let Some(listing) = self.listing.take() {
                    self.pods = listing;
                }
                self.synced = true;
            }
            Event::Apply(pod) => {
                if let Some(uid) = pod.metadata.uid.clone() {
                    self.pods.insert(uid, Arc::new(pod));
                }
            }
            Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    self.pods.remove(uid);
                    if let Some(listing) = &mut self.listing {
                        listing.remove(uid);
                    }
                }
            }
        }
        self.generation += 1;
    }

    /// The watch failed: out of sync until the next complete list. The pods of an
    /// unfinished list stay known beside the others.
    pub fn lost(&mut self) {
        self.synced = false;
        if let Some(listing) = self.listing.take() {
            self.pods.extend(listing);
        }
        self.generation += 1;
    }
}

/// The picture, shared by the watch that writes it and the questions that read it.
#[derive(Debug, Default, Clone)]
pub struct NodePods {
    shared: Arc<(Mutex<Picture>, Condvar)>,
}

impl NodePods {
    pub fn new() -> NodePods {
        NodePods::default()
    }

    /// The picture as it is now.
    pub fn now(&self) -> MutexGuard<'_, Picture> {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the picture and wakes every waiter.
    pub fn change(&self, change: impl FnOnce(&mut Picture)) {
        change(&mut self.now());
        self.shared.1.notify_all();
    }

    /// Asks `decide` of the picture now and after each change until it answers `Ok` or
    /// `patience` has passed; then its last answer. Out of sync, `decide` is not asked:
    /// the answer is that the picture is not in sync (unless it syncs in time).
    pub fn wait_for<T>(
        &self,
        patience: Duration,
        mut decide: impl FnMut(&Picture) -> Result<T, String>,
    ) -> Result<T, String> {
        let give_up = Instant::now() + patience;
        let mut picture = self.now();
        loop {
            let answer = if picture.synced {
                decide(&picture)
            } else {
                Err(
                    "the node agent's watch of the node's pods is not in sync with the API \
                     server (starting, or the API server is unreachable)"
                        .to_owned(),
                )
            };
            let left = give_up.saturating_duration_since(Instant::now());
            if answer.is_ok() || left.is_zero() {
                return answer;
            }
            let generation = picture.generation;
            let (next, _) = self
                .shared
                .1
                .wait_timeout_while(picture, left, |p| p.generation == generation)
                .unwrap_or_else(|e| e.into_inner());
            picture = next;
        }
    }

    /// Follows the pods bound to `node` for ever: one watch, started again after each
    /// failure (with the watcher's back-off), the picture out of sync meanwhile.
    pub async fn follow(self, client: kube::Client, node: String) {
        let api: kube::Api<Pod> = kube::Api::all(client);
        let selector = format!("spec.nodeName={node}");
        let mut retry = RETRY.0;
        loop {
            let mut stream =
                watcher(api.clone(), watcher::Config::default().fields(&selector)).boxed();
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => {
                        if matches!(event, Event::InitDone) {
                            retry = RETRY.0;
                            let pods = self.now().len();
                            tracing_or_eprintln(&format!(
                                "the watch of node {node}'s pods is in sync ({pods} pods)"
                            ));
                        }
                        self.change(|picture| picture.apply(event));
                    }
                    Err(error) => {
                        self.change(Picture::lost);
                        tracing_or_eprintln(&format!(
                            "warning: the watch of node {node}'s pods failed ({error}); \
                             started again in {} s",
                            retry.as_secs()
                        ));
                        break;
                    }
                }
            }
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(RETRY.1);
        }
    }
}

/// The first and the longest wait before the watch is started again after a failure.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// The agent logs plain lines on stderr, as `prestop-clean node-agent` does.
fn tracing_or_eprintln(line: &str) {
    eprintln!("prestop-injector node-agent: {line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, phase: &str) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"uid": uid, "name": uid, "namespace": "n"},
            "status": {"phase": phase}}),
        )
        .expect("a pod")
    }

    fn phase(picture: &Picture, uid: &str) -> Option<String> {
        picture.pod(uid)?.status.as_ref()?.phase.clone()
    }

    #[test]
    fn a_list_replaces_the_pods_and_a_failure_keeps_what_was_known() {
        let mut picture = Picture::default();
        assert!(!picture.is_synced());
        picture.apply(Event::Init);
        picture.apply(Event::InitApply(pod("a", "Running")));
        picture.apply(Event::InitDone);
        assert!(picture.is_synced());
        picture.apply(Event::Apply(pod("b", "Pending")));
        picture.apply(Event::Apply(pod("a", "Failed")));
        assert_eq!(phase(&picture, "a").as_deref(), Some("Failed"));
        // A relist that never completes: b is not in it so far, and stays known.
        picture.apply(Event::Init);
        assert!(!picture.is_synced());
        picture.apply(Event::InitApply(pod("a", "Failed")));
        assert_eq!(picture.len(), 2);
        picture.lost();
        assert!(!picture.is_synced());
        assert!(picture.pod("b").is_some());
        // A complete list without b: b went while the watch was down.
        picture.apply(Event::Init);
        picture.apply(Event::InitApply(pod("a", "Failed")));
        picture.apply(Event::InitDone);
        assert!(picture.pod("b").is_none());
        picture.apply(Event::Delete(pod("a", "Failed")));
        assert!(picture.is_empty());
    }

    /// A question waits for the change it needs (the kubelet's status a moment after the
    /// SIGTERM), and gives up after its patience with the last answer.
    #[test]
    fn a_question_waits_for_the_change_it_needs_within_its_patience() {
        let pods = NodePods::new();
        let running = |picture: &Picture| match phase(picture, "a").as_deref() {
            Some("Failed") => Ok(()),
            other => Err(format!("phase {other:?}")),
        };
        let why = pods
            .wait_for(Duration::from_millis(50), running)
            .expect_err("not synced");
        assert!(why.contains("not in sync"), "{why}");
        pods.change(|p| {
            p.apply(Event::Init);
            p.apply(Event::InitApply(pod("a", "Running")));
            p.apply(Event::InitDone);
        });
        assert_eq!(
            pods.wait_for(Duration::from_millis(50), running),
            Err("phase Some(\"Running\")".to_owned())
        );
        let writer = pods.clone();
        let later = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            writer.change(|p| p.apply(Event::Apply(pod("a", "Failed"))));
        });
        assert_eq!(pods.wait_for(Duration::from_secs(30), running), Ok(()));
        later.join().expect("the writer");
    }
}
