//! Inject: how the cleanup reaches the pod.
//!
//! Takes each container's plan (a preStop hook, or a place in the cleanup sidecar) and
//! builds what runs it: the installer init container and the read-only program volume
//! ([`delivery`]), or the one native cleanup sidecar with the mounts it copies and checks
//! ([`sidecar`]); and, with `nodeAgent` configured, the node agent's socket for each
//! ([`node_agent`]). The installer and the socket make their entries of the pod's lists
//! match through `named`, which never touches a user's entry. [`delivery::diff`] hands
//! the pod template's patch back to the core, with our init containers added and removed
//! by index (`init_diff`).

pub mod delivery;
mod init_diff;
mod named;
pub mod node_agent;
mod others;
pub(in crate::mutation) mod sidecar;
mod sidecar_plan;
