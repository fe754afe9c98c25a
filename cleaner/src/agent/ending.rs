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

use super::peer::Peer;
use super::reporting::Outcome;

/// What became of a cleanup's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// Queued as an Event on the pod.
    Recorded,
    /// Only in the agent's log, and why (no API server, no pod known for the uid).
    Logged(String),
    /// Over the rate a pod (or the node) may report at: not recorded, counted.
    Dropped(String),
}

/// What the agent learns of the node's pods from the API server: whether a pod is ending,
/// and which pods may use a directory that no process uses at the instant.
pub trait PodEnding: Send + Sync {
    /// `Ok` when the pod of uid `uid` (known from the kernel, never from the request) is
    /// being deleted or has finished for good; else one sentence saying what the source
    /// shows instead. It answers within about a second and a half: the cleaner waits
    /// [`TIMEOUT`](super::TIMEOUT) for the whole answer, the judgement included.
    fn ending(&self, uid: &str) -> Result<(), String>;

    /// Whether a pod bound to the node, other than the asking one (`asker`, from the
    /// kernel) and not ended, reaches the node's directory `host` by its spec: its
    /// hostPath volumes and mounts (`subPath`, `subPathExpr`), its claims' volumes,
    /// resolved on the node (issue 38, class 4). A pod with no process at the instant
    /// uses it all the same: bound but not started, between two init containers,
    /// crash-looping, a Job's replacement still pulling its image. `Err(InUse)` names the
    /// pod (the agent's log only); `Err(Unknown)` when it cannot be told, never free.
    /// Asked only once the directory is the node's and no process uses it. Without a
    /// source of pods (`prestop-clean node-agent`) only processes are seen.
    fn others_reach(&self, asker: Option<&str>, host: &[u8]) -> Result<(), crate::in_use::Busy> {
        let _ = (asker, host);
        Ok(())
    }

    /// How long until the deletion's grace period of the pod of uid `pod` (known from the
    /// kernel) ends, as its object says (`metadata.deletionTimestamp`), for the cleanup
    /// sidecar's deadline (issue 39, [`super::grace`]). It answers within half a second.
    fn grace_left(&self, pod: &str) -> super::grace::GraceLeft {
        let _ = pod;
        super::grace::GraceLeft::Unknown(
            "this node agent cannot say when a pod's grace period ends".to_owned(),
        )
    }

    /// A cleanup's report (`prestop-report`), about the pod of uid `pod` (known from the
    /// kernel, `None` outside pods): `prestop-injector node-agent` records it as an Event
    /// on that pod. It returns at once (the cleaner waits less than a second); the
    /// agent's log has the line either way.
    fn report(&self, pod: Option<&str>, outcome: Outcome, line: &str) -> Told {
        let _ = (pod, outcome, line);
        Told::Logged("this node agent records no Events".to_owned())
    }

    /// For the agent's first log line: where it learns it.
    fn describe(&self) -> String;
}

/// `same` when the node says the asking pod is ending, else `not-ending: …`, which also
/// says when the node cannot tell. Asked only once the directory is the pod's and nobody
/// else uses it.
pub(super) fn ending_answer(peer: &Peer, source: Option<&dyn PodEnding>) -> String {
    let Some(uid) = &peer.pod else {
        return "not-ending: the asking process is in no pod's cgroup, so the node cannot \
                say whether its pod is ending"
            .to_owned();
    };
    let Some(source) = source else {
        return "not-ending: this node agent cannot say whether a pod is ending (it has no \
                API server: prestop-injector node-agent has); a pod the kubelet can restart \
                in place is left to the node reaper"
            .to_owned();
    };
    match source.ending(uid) {
        Ok(()) => "same".to_owned(),
        // One line of the protocol, whatever the API server said.
        Err(why) => format!("not-ending: {}", why.replace(|c: char| c.is_control(), " ")),
    }
}
