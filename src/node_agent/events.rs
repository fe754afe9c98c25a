//! The cleanup's report as an Event on the pod (issue 39). Since kubelet 1.26 the
//! `FailedPreStopHook` Event says only "PreStopHook failed", and an exec hook's output is
//! in no container log: the cleaner hands its final line to this agent
//! (`prestop-report`, `prestop_clean::agent::reporting`), and the agent records it where
//! `kubectl describe pod` shows it.
//!
//! - The pod is the one the kernel names: the uid of the asking process's cgroup, looked
//!   up in the node's picture ([`NodePods`]) for its namespace and name. The line names
//!   no pod; a uid the picture does not have gets no Event, only the agent's log line.
//! - Reasons of our own, by outcome ([`reason`]); the message is the cleaner's line (it
//!   carries the pod's own volume paths, which are the pod's business, in the pod's own
//!   namespace), without control characters, cut to [`MAX_MESSAGE`] bytes.
//! - Rate-limited ([`Rate`]): a pod that loops on reports cannot flood the API server;
//!   what is over the rate is dropped and counted (`…_reports_total{result="dropped"}`).
//! - core/v1 Events sent with `create` only, as the reaper's (`crate::reaper::events`);
//!   a queue decouples them from the cleaner's connection, which never waits for the API
//!   server, and a full queue drops the Event (the log line stays).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::chrono::{DateTime, Utc};
use kube::api::{Api, PostParams};
use prestop_clean::agent::{Outcome, Told};
use tokio::sync::mpsc;

use crate::node::pods::NodePods;
use crate::reaper::events::Kind;

/// Every target emptied (or missing).
pub const CLEANED: &str = "PrestopCleanup";
/// A target skipped by the cleaner's own rules.
pub const SKIPPED: &str = "PrestopCleanupSkipped";
/// The node agent kept a target (refused, in use, not the node's, not ending).
pub const REFUSED: &str = "PrestopCleanupRefused";
/// Entries survived.
pub const INCOMPLETE: &str = "PrestopCleanupIncomplete";
/// `--deadline` stopped the cleanup.
pub const CUT_OFF: &str = "PrestopCleanupCutOff";

/// The longest message kept: the line's first kilobyte says what happened (the deadline's
/// line comes first).
pub const MAX_MESSAGE: usize = 1024;
/// Events one pod may cause in [`WINDOW`]: a hook and a sidecar, and restarts in place.
pub const PER_POD: usize = 5;
/// Pods' first Events the node may cause in [`WINDOW`]: a batch node's pods that end
/// together each get their report (the kubelet itself records up to 50 Events a second).
pub const FIRSTS_PER_NODE: usize = 600;
/// A pod's further Events (its second to [`PER_POD`]th) the node may cause in [`WINDOW`],
/// all pods together. Pods that loop on reports share these, so they cannot crowd out
/// another pod's first report (issue 39: no tenant can wedge the agent).
pub const REPEATS_PER_NODE: usize = 60;
pub const WINDOW: Duration = Duration::from_secs(60);
/// Events waiting for the API server: [`FIRSTS_PER_NODE`] and [`REPEATS_PER_NODE`] at
/// once fit, a few kilobytes each.
const QUEUE: usize = FIRSTS_PER_NODE + REPEATS_PER_NODE;

/// The Event's type and reason for an outcome.
pub fn reason(outcome: Outcome) -> (Kind, &'static str) {
    match outcome {
        Outcome::Emptied => (Kind::Normal, CLEANED),
        Outcome::Skipped => (Kind::Warning, SKIPPED),
        Outcome::Refused => (Kind::Warning, REFUSED),
        Outcome::Incomplete => (Kind::Warning, INCOMPLETE),
        Outcome::CutOff => (Kind::Warning, CUT_OFF),
    }
}

/// The cleaner's line as an Event message: control characters escaped (the protocol
/// already refuses them; this holds whoever calls it), at most [`MAX_MESSAGE`] bytes, cut
/// at a character and marked `…`.
pub fn message(line: &str) -> String {
    let mut message = String::with_capacity(line.len().min(MAX_MESSAGE));
    for c in line.chars() {
        if c.is_control() {
            message.push_str(&c.escape_default().to_string());
        } else {
            message.push(c);
        }
    }
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE - '…'.len_utf8();
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// Sliding windows over any [`WINDOW`]: at most [`PER_POD`] Events per pod; of the node's,
/// at most [`FIRSTS_PER_NODE`] pods' first ones and [`REPEATS_PER_NODE`] further ones.
#[derive(Debug, Default)]
pub struct Rate {
    pods: HashMap<String, VecDeque<Instant>>,
    firsts: VecDeque<Instant>,
    repeats: VecDeque<Instant>,
}

impl Rate {
    /// Whether `pod` may have an Event at `now`; counted when it may.
    pub fn admit(&mut self, pod: &str, now: Instant) -> Result<(), String> {
        let old = |at: &Instant| now.saturating_duration_since(*at) >= WINDOW;
        for node in [&mut self.firsts, &mut self.repeats] {
            while node.front().is_some_and(old) {
                node.pop_front();
            }
        }
        // Pods seen only long ago are forgotten: the map holds at most the pods that
        // reported within the window.
        self.pods.retain(|_, times| {
            while times.front().is_some_and(old) {
                times.pop_front();
            }
            !times.is_empty()
        });
        let mine = self.pods.get(pod).map_or(0, VecDeque::len);
        if mine >= PER_POD {
            return Err(format!(
                "over the rate of {PER_POD} Events per pod in {} s",
                WINDOW.as_secs()
            ));
        }
        let (node, bound, what) = if mine == 0 {
            (&mut self.firsts, FIRSTS_PER_NODE, "pods' first Events")
        } else {
            (&mut self.repeats, REPEATS_PER_NODE, "repeated Events")
        };
        if node.len() >= bound {
            return Err(format!(
                "over the rate of {bound} {what} per node in {} s",
                WINDOW.as_secs()
            ));
        }
        node.push_back(now);
        self.pods.entry(pod.to_owned()).or_default().push_back(now);
        Ok(())
    }
}

/// The pod an Event is about, as the picture names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The Event on `pod`, in its namespace.
pub fn pod_event(
    pod: &PodRef,
    node: &str,
    outcome: Outcome,
    line: &str,
    now: DateTime<Utc>,
) -> Event {
    let (kind, reason) = reason(outcome);
    let now = Time(now);
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}.prestop-cleanup.", pod.name)),
            namespace: Some(pod.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: Some(pod.namespace.clone()),
            name: Some(pod.name.clone()),
            uid: Some(pod.uid.clone()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_owned()),
        message: Some(message(line)),
        type_: Some(kind.as_str().to_owned()),
        source: Some(EventSource {
            component: Some("prestop-node-agent".to_owned()),
            host: Some(node.to_owned()),
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        reporting_component: Some("prestop-injector.io/node-agent".to_owned()),
        reporting_instance: Some(node.to_owned()),
        ..Event::default()
    }
}

/// What the agent does with reports: look the pod up, rate-limit, queue the Event.
pub struct PodEvents {
    queue: mpsc::Sender<Event>,
    rate: Mutex<Rate>,
    pods: NodePods,
    node: String,
}

impl PodEvents {
    /// The recorder, and the task that creates the Events.
    pub fn new(
        client: kube::Client,
        pods: NodePods,
        node: &str,
    ) -> (
        PodEvents,
        impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let (queue, mut receiver) = mpsc::channel::<Event>(QUEUE);
        let task = async move {
            while let Some(event) = receiver.recv().await {
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
                if let Err(error) = api.create(&PostParams::default(), &event).await {
                    eprintln!(
                        "prestop-injector node-agent: could not record the Event {} on pod \
                         {namespace}/{}: {error}",
                        event.reason.as_deref().unwrap_or(""),
                        event.involved_object.name.as_deref().unwrap_or("")
                    );
                }
            }
        };
        let events = PodEvents {
            queue,
            rate: Mutex::new(Rate::default()),
            pods,
            node: node.to_owned(),
        };
        (events, task)
    }

    /// A report from the pod of uid `uid` (the kernel's word).
    pub fn report(&self, uid: Option<&str>, outcome: Outcome, line: &str) -> Told {
        let Some(uid) = uid else {
            return Told::Logged("the reporting process is in no pod's cgroup".to_owned());
        };
        let pod = {
            let picture = self.pods.now();
            picture.pod(uid).and_then(|pod| {
                Some(PodRef {
                    namespace: pod.metadata.namespace.clone()?,
                    name: pod.metadata.name.clone()?,
                    uid: uid.to_owned(),
                })
            })
        };
        let Some(pod) = pod else {
            return Told::Logged(format!(
                "no pod of uid {uid} on node {} in the agent's picture",
                self.node
            ));
        };
        let admitted = self
            .rate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(uid, Instant::now());
        if let Err(why) = admitted {
            return Told::Dropped(why);
        }
        let event = pod_event(&pod, &self.node, outcome, line, Utc::now());
        match self.queue.try_send(event) {
            Ok(()) => Told::Recorded,
            Err(_) => Told::Dropped("the Event queue is full".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests;
