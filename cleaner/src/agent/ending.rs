//! Whether the asking pod is ending (issue 31, sandbox recreation).
//!
//! The kubelet stops every container of a pod, in termination order, both when the pod
//! ends and when it recreates the pod's sandbox (its pause process died, its network
//! failed): for every `restartPolicy` but `Never` it then starts them all again, on the
//! same volumes. Inside the pod the two look alike, SIGTERM and preStop included; only the
//! pod's object tells them apart. So a pod the kubelet can restart in place is cleaned
//! only when the node's source of pods says it is ending: its deletion has begun, or it
//! has finished for good. `prestop-injector node-agent` asks the API server
//! (`src/node_agent`); this crate has no API client, so `prestop-clean node-agent`
//! refuses every such question.

/// Where the agent learns whether a pod is ending.
pub trait PodEnding: Send + Sync {
    /// `Ok` when the pod of uid `uid` (known from the kernel, never from the request) is
    /// being deleted or has finished for good; else one sentence saying what the source
    /// shows instead. It answers within about a second and a half: the cleaner waits
    /// [`TIMEOUT`](super::TIMEOUT) for the whole answer, the judgement included.
    fn ending(&self, uid: &str) -> Result<(), String>;

    /// For the agent's first log line: where it learns it.
    fn describe(&self) -> String;
}
