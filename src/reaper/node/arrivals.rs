//! The pods bound to the node *during* a walk (issue 32, finding 3).
//!
//! The reaper's loop decides on one task, and the walk is awaited there: while it runs, no
//! event of the main watch is read, so the guard ([`super::guard`]) knew only the pods of
//! the walk's start and the containers alive at each of its looks (every 100 ms). A pod
//! bound meanwhile whose container lived less than one look — staged its files and
//! exited — was seen by neither, and lost what it wrote.
//!
//! So each walk has a watch of its own, on the node's pods, started before the walk and
//! complete (its first list done) before the first entry is removed. Every pod it sees
//! joins the pods the guard resolves on the node at each look: a pod is bound (and seen
//! here) before the kubelet creates its container, so the guard keeps the directory from
//! the pod's binding on, whether its container is alive at that look or not. A pod that
//! leaves during the walk stays counted until the walk ends (the safe side). What is left
//! is stated in docs/REAPER.md#when: one look's interval after the watch delivers the pod.

use crate::config::Config;
use crate::reaper::ledger::KnownPod;
use crate::reaper::users;
use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a walk waits for its watch's first list before it gives up (and does not
/// walk: the directory stays recorded and is tried again).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The pods the walk's own watch has seen, for the guard; the watch stops when dropped.
pub struct Arrivals {
    pods: Arc<Mutex<Vec<KnownPod>>>,
    in_sync: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// What the pods are derived with: the reaper's own rules.
pub struct Rules {
    pub config: Config,
    pub own_pod: Option<(String, String)>,
    pub read_only_views_keep: bool,
}

impl Arrivals {
    /// Starts the watch of `node`'s pods and returns once its first list is complete;
    /// `Err` says why it could not be.
    pub async fn watch(client: kube::Client, node: &str, rules: Rules) -> Result<Arrivals, String> {
        let pods: Arc<Mutex<Vec<KnownPod>>> = Arc::default();
        let in_sync = Arc::new(AtomicBool::new(false));
        let synced = in_sync.clone();
        let api: kube::Api<Pod> = kube::Api::all(client);
        let selector = format!("spec.nodeName={node}");
        let (listed, on_listed) = oneshot::channel();
        let seen = pods.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            // Backing off between failed lists: an API server that is down is not asked
            // again in a tight loop for as long as the walk lasts.
            let mut stream = watcher(api, watcher::Config::default().fields(&selector))
                .default_backoff()
                .boxed();
            while let Some(item) = stream.next().await {
                match item {
                    Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                        if let Some(known) = known(&pod, &rules) {
                            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                            seen.retain(|other| other.pod.uid != known.pod.uid);
                            seen.push(known);
                        }
                    }
                    Ok(Event::InitDone) => {
                        synced.store(true, Ordering::SeqCst);
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    // Out of sync until a list completes again: a pod bound meanwhile would
                    // not be seen, so the walk's looks say "unknown" and stop it.
                    Ok(Event::Init) | Err(_) => synced.store(false, Ordering::SeqCst),
                    // A pod that leaves stays counted until the walk ends.
                    Ok(Event::Delete(_)) => {}
                }
            }
            // The watch ended (it does not, short of an abort): nothing is seen any more.
            synced.store(false, Ordering::SeqCst);
        });
        let arrivals = Arrivals {
            pods,
            in_sync,
            task,
        };
        match tokio::time::timeout(LIST_TIMEOUT, on_listed).await {
            Ok(Ok(())) => Ok(arrivals),
            _ => Err(format!(
                "cannot list the pods bound to the node within {} s, so pods that arrive during \
                 the walk would not be seen",
                LIST_TIMEOUT.as_secs()
            )),
        }
    }

    /// The pods seen so far, and whether the watch is in sync (every pod bound to the
    /// node since the walk began is among them), shared with the guard's thread.
    pub fn seen(&self) -> users::Arrived {
        users::Arrived {
            pods: self.pods.clone(),
            in_sync: self.in_sync.clone(),
        }
    }
}

impl Drop for Arrivals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The pod as the ledger knows pods, unless it is the reaper's own.
fn known(pod: &Pod, rules: &Rules) -> Option<KnownPod> {
    let facts = super::facts_of(
        pod,
        &rules.config,
        rules.own_pod.as_ref(),
        rules.read_only_views_keep,
    )?;
    Some(KnownPod::of(&facts))
}
