//! The node agent and its client: the node's word on whether the directory a cleaner
//! opened *is* the node's directory at the expected host path
//! (docs/DESIGN.md#identity-is-checked-on-the-node).
//!
//! The agent runs on every node with the node's `/` mounted (read-only) at `--host-root`
//! and the node's PID namespace. Inside a pod, the mount table only tells which directory
//! *of its filesystem* a volume shows; the agent resolves the whole host path from the
//! node's root without following any symlink and compares identities, which the same
//! kernel gives both sides.
//!
//! - [`protocol`]: the request and answer lines, one request per connection;
//! - [`ask`]: the cleaner's side (a `busy` agent is asked again, within a patience);
//! - [`reporting`]: the cleanup's final line, handed to the agent, which records it as
//!   an Event on the pod the kernel names ([`send_report`]);
//! - the server ([`serve`]): judging turns shared fairly between the asking pods, known
//!   from the kernel ([`peer`]), in a queue (`queue`), and a deadline on every judgement;
//! - the judgement itself (`judge`): it never touches a descriptor on a network or FUSE
//!   filesystem, and only `fstat`s the others (never reads, writes or changes through
//!   them);
//! - `http`: `/metrics`, `/healthz`, `/readyz` for Prometheus and the kubelet, on a
//!   loop no client can hold;
//! - [`ask_grace`]: how long the asking pod has until the kubelet's kill, for the cleanup
//!   sidecar's deadline (`grace`, issue 39);
//! - [`PodEnding`]: whether the asking pod is ending, for a pod the kubelet can restart in
//!   place (issue 31); the API server knows, this crate does not.

mod args;
mod client;
mod ending;
mod grace;
mod http;
mod judge;
mod limits;
pub mod peer;
pub mod protocol;
mod queue;
pub mod reporting;
mod server;
mod socket;
mod stats;

pub use args::AgentArgs;
pub use client::{ask, ask_ending, ask_with_patience, Question, BUSY_PATIENCE};
pub use ending::{PodEnding, Told};
pub use grace::{
    ask_grace, grace_answer, parse_grace_answer, sidecar_deadline, GraceLeft, DEADLINE_MARGIN,
    GRACE_PATIENCE, KUBELET_MINIMUM_GRACE,
};
pub use limits::{JUDGE_DEADLINE, MAX_HELD, MAX_IN_FLIGHT, MAX_STUCK, PLACES_PER_PEER};
pub use protocol::{
    encode_ending_request, encode_request, parse_answer, parse_request, Request, Verdict,
    MAX_REQUEST, TIMEOUT,
};
pub use queue::QUEUE_PATIENCE;
pub use reporting::{encode_report, parse_report, send_report, CleanupReport, Outcome};
pub use server::{serve, serve_with, NODE_AGENT};

#[cfg(test)]
mod tests;
