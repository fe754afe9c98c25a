//! What the node knows of its pods, for the two that act on the node: the node agent,
//! before a pod's own cleanup empties a directory, and the node reaper, before it empties
//! one a pod left behind (issue 38: one picture of the node, one rule each).
//!
//! - [`ending`]: is the asking pod ending *now*, so that its cleanup may run (the agent's
//!   question, at the pod's SIGTERM)?
//! - [`ended`]: has a pod ended for good, as the kubelet means it, so that what it recorded
//!   may be emptied while its object remains (the reaper's question)?
//! - [`pods`]: the node's pods, kept current by one watch, never a LIST per question.

pub mod ended;
pub mod ending;
pub mod pods;
