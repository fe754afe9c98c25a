//! What the agent gives any client, at most.

use std::time::Duration;

/// Requests answered at once on the node.
pub const MAX_IN_FLIGHT: usize = 16;
/// Requests answered at once for one pod (or, outside pods, one user): a further one is
/// answered `busy`, and the other pods are still served.
pub const PLACES_PER_PEER: usize = 4;
/// How long a judgement may take before the request is answered `refused` without it.
pub const JUDGE_DEADLINE: Duration = Duration::from_secs(3);
/// Stuck judgements at which the agent stops taking requests and its probes fail, so that
/// the kubelet restarts it: as many as it has places.
pub const MAX_STUCK: usize = MAX_IN_FLIGHT;
