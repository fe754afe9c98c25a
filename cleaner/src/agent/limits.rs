//! What the agent gives any client, at most.

use std::time::Duration;

/// Judgements at once on the node (judging turns, [`super::queue`]).
pub const MAX_IN_FLIGHT: usize = 16;
/// Connections one pod (or, outside pods, one user) holds at once, being read, waiting
/// for a turn or judged: a further one is answered `busy` (its pod's queue is full), and
/// the other pods are still served. Idle connections take no judging turn.
pub const PLACES_PER_PEER: usize = 8;
/// Connections held at once on the node: one thread each, with a small stack.
pub const MAX_HELD: usize = 256;
/// How long a judgement may take before the request is answered `refused` without it.
pub const JUDGE_DEADLINE: Duration = Duration::from_secs(3);
/// Stuck judgements at which the agent stops taking requests (each holds a thread):
/// as many as it has turns. Its probes do not count them (issue 39): a tenant can make
/// judgements slow, and a restart would only take the socket away from every pod.
pub const MAX_STUCK: usize = MAX_IN_FLIGHT;
