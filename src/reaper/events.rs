//! Kubernetes Events on the Node, one per directory emptied, reported or refused, so
//! `kubectl describe node` and `kubectl get events` show what the reaper did.
//!
//! Outside the tenant's namespace an Event carries counts and reasons only: no host
//! path (a `subPathExpr: $(POD_NAME)` directory names the pod), no file name from inside
//! a tenant's directory, no pod name or uid. The reaper's log line, read by the operator
//! of the node, names them. No Event goes to the pod's namespace: the pod is gone (its
//! Events are seldom read), and it would need `create events` in every namespace.
//!
//! Node events live in the `default` namespace with the node's name as uid, as the
//! kubelet writes them. They are core/v1 Events sent with `create` only (the RBAC allows
//! nothing else); a queue decouples them from the watch loop, so a slow or absent API
//! server never delays a decision, and a full queue drops an Event (the log line stays).

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, PostParams};
use tokio::sync::mpsc;

/// Whether an Event is routine or asks for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Warning,
}

impl Kind {
    /// The Event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Normal => "Normal",
            Kind::Warning => "Warning",
        }
    }
}

/// What happened, for the Event's `reason`.
pub const EMPTIED: &str = "ScratchDirectoryEmptied";
pub const WOULD_EMPTY: &str = "ScratchDirectoryWouldEmpty";
pub const REFUSED: &str = "ScratchDirectoryRefused";
pub const INCOMPLETE: &str = "ScratchDirectoryIncomplete";
pub const GAVE_UP: &str = "ScratchDirectoryGivenUp";

/// Longest Event message the API server keeps (it refuses longer ones).
const MAX_MESSAGE: usize = 1024;
const QUEUE: usize = 256;

#[derive(Clone)]
pub struct Events {
    queue: mpsc::Sender<Event>,
    node: String,
}

impl Events {
    /// The sender, and the task that creates the Events in `namespace`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        node: &str,
    ) -> (
        Events,
        impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let (queue, mut receiver) = mpsc::channel::<Event>(QUEUE);
        let api: Api<Event> = Api::namespaced(client, namespace);
        let task = async move {
            while let Some(event) = receiver.recv().await {
                if let Err(error) = api.create(&PostParams::default(), &event).await {
                    let reason = event.reason.as_deref().unwrap_or("");
                    tracing::warn!(%error, reason, "could not create an Event on the node");
                }
            }
        };
        let events = Events {
            queue,
            node: node.to_owned(),
        };
        (events, task)
    }

    pub fn send(&self, kind: Kind, reason: &'static str, message: &str) {
        let event = node_event(&self.node, kind, reason, message);
        if self.queue.try_send(event).is_err() {
            tracing::warn!(reason, "the Event queue is full; this Event is only logged");
        }
    }
}

fn node_event(node: &str, kind: Kind, reason: &str, message: &str) -> Event {
    let now = Time(k8s_openapi::chrono::Utc::now());
    let mut message = message.to_owned();
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("...");
    }
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{node}.prestop-reaper.")),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            uid: Some(node.to_owned()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_owned()),
        message: Some(message),
        type_: Some(kind.as_str().to_owned()),
        source: Some(EventSource {
            component: Some("prestop-reaper".to_owned()),
            host: Some(node.to_owned()),
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        reporting_component: Some("prestop-injector.io/reaper".to_owned()),
        reporting_instance: Some(node.to_owned()),
        ..Event::default()
    }
}
