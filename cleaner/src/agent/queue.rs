//! Fairness as a queue, not a refusal (issue 39): the agent's door and its judging turns.
//!
//! Before, each pod had 4 of 16 places, a place was held from the connection's accept to
//! its answer, and a further connection was told `busy`: 4 pods holding 4 idle
//! connections each took every place, and every other pod's cleaner was refused. Now:
//! - a connection only *enters* ([`Door::enter`]): a pod (a [`share`](super::peer::Peer::share))
//!   holds at most [`PLACES_PER_PEER`] connections at once, reading, waiting or judged,
//!   and the node at most [`MAX_HELD`]; `busy` only beyond those, the queue being full;
//! - reading a request costs a connection, not a judging turn: an idle connection
//!   delays nobody;
//! - a whole request waits for one of [`MAX_IN_FLIGHT`] judging turns
//!   ([`Entry::turn`]): each pod's requests in arrival order (FIFO), the pods in turn
//!   (round-robin), so a pod that sends many requests waits behind its own, never in front
//!   of another pod's. One that waited [`QUEUE_PATIENCE`] is answered `busy` (it could
//!   no longer be judged within the cleaner's [`TIMEOUT`](super::TIMEOUT)), and the
//!   cleaner asks again within its patience.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::limits::{MAX_HELD, MAX_IN_FLIGHT, PLACES_PER_PEER};

/// How long a whole request waits for a judging turn: the cleaner waits
/// [`TIMEOUT`](super::TIMEOUT) (5 s) for its answer, the judgement may take
/// [`JUDGE_DEADLINE`](super::JUDGE_DEADLINE) (3 s), and half a second is left for the rest.
pub const QUEUE_PATIENCE: Duration = Duration::from_millis(1500);

/// The door and the turns, shared by the accepting thread and every connection's.
pub(super) struct Door {
    state: Mutex<State>,
    granted: Condvar,
    /// Judging turns (tests use fewer).
    turns: usize,
}

#[derive(Default)]
struct State {
    /// Connections held, by share.
    held: HashMap<String, usize>,
    total: usize,
    /// Turns being used.
    judging: usize,
    /// Each share's requests waiting for a turn, oldest first.
    waiting: HashMap<String, VecDeque<u64>>,
    /// The shares with a request waiting, the next to be served first.
    rotation: VecDeque<String>,
    /// Tickets handed a turn whose waiter has not yet taken it.
    handed: HashSet<u64>,
    next_ticket: u64,
}

impl Door {
    pub(super) fn new() -> Arc<Door> {
        Door::with_turns(MAX_IN_FLIGHT)
    }

    pub(super) fn with_turns(turns: usize) -> Arc<Door> {
        Arc::new(Door {
            state: Mutex::new(State::default()),
            granted: Condvar::new(),
            turns,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection of `share` comes in; `Err(total)` when its pod's share or the node's
    /// bound is full (the answer is then `busy`).
    pub(super) fn enter(self: &Arc<Door>, share: &str) -> Result<Entry, usize> {
        let mut state = self.lock();
        let mine = state.held.get(share).copied().unwrap_or(0);
        if mine >= PLACES_PER_PEER || state.total >= MAX_HELD {
            return Err(state.total);
        }
        state.held.insert(share.to_owned(), mine + 1);
        state.total += 1;
        Ok(Entry {
            door: self.clone(),
            share: share.to_owned(),
        })
    }

    /// Connections held on the node now.
    pub(super) fn held(&self) -> usize {
        self.lock().total
    }

    /// Hands a freed turn to the next share in the rotation, or frees it.
    fn release(&self) {
        let mut state = self.lock();
        state.judging -= 1;
        hand_over(&mut state, self.turns);
        drop(state);
        self.granted.notify_all();
    }
}

/// While turns are free and requests wait: the first waiting request of the next share
/// in the rotation gets one, and its share goes to the back if it has more.
fn hand_over(state: &mut State, turns: usize) {
    while state.judging < turns {
        let Some(share) = state.rotation.pop_front() else {
            return;
        };
        let Some(queue) = state.waiting.get_mut(&share) else {
            continue;
        };
        let Some(ticket) = queue.pop_front() else {
            state.waiting.remove(&share);
            continue;
        };
        if queue.is_empty() {
            state.waiting.remove(&share);
        } else {
            state.rotation.push_back(share);
        }
        state.handed.insert(ticket);
        state.judging += 1;
    }
}

/// A connection inside; dropping it frees its pod's place.
pub(super) struct Entry {
    door: Arc<Door>,
    share: String,
}

impl Entry {
    /// Waits, in the pod's queue and the pods' rotation, for a judging turn; `None` after
    /// `patience` (the request is then answered `busy`).
    pub(super) fn turn(&self, patience: Duration) -> Option<Turn> {
        let door = &self.door;
        let give_up = Instant::now() + patience;
        let mut state = door.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        let queue = state.waiting.entry(self.share.clone()).or_default();
        queue.push_back(ticket);
        if queue.len() == 1 && !state.rotation.contains(&self.share) {
            state.rotation.push_back(self.share.clone());
        }
        hand_over(&mut state, door.turns);
        loop {
            if state.handed.remove(&ticket) {
                return Some(Turn { door: door.clone() });
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Out of the queue, and out of the rotation with its last request.
                if let Some(queue) = state.waiting.get_mut(&self.share) {
                    queue.retain(|t| *t != ticket);
                    if queue.is_empty() {
                        state.waiting.remove(&self.share);
                        state.rotation.retain(|s| *s != self.share);
                    }
                }
                return None;
            }
            state = door
                .granted
                .wait_timeout(state, left)
                .map(|(state, _)| state)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut state = self.door.lock();
        if let Some(count) = state.held.get_mut(&self.share) {
            *count -= 1;
            if *count == 0 {
                state.held.remove(&self.share);
            }
        }
        state.total -= 1;
    }
}

/// A judging turn; dropping it hands it to the next request in the rotation.
pub(super) struct Turn {
    door: Arc<Door>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.door.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// With one turn taken by pod A, A's three further requests and B's one wait: B is
    /// served second, not fourth (round-robin across pods, FIFO within one).
    #[test]
    fn pods_take_turns_and_each_pod_keeps_its_order() {
        let door = Door::with_turns(1);
        let first = door.enter("a").unwrap();
        let held = first.turn(Duration::ZERO).expect("a free turn");
        let (tell, told) = mpsc::channel();
        let mut waiters = Vec::new();
        for (share, name) in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")] {
            let entry = door.enter(share).unwrap();
            let tell = tell.clone();
            waiters.push(std::thread::spawn(move || {
                let turn = entry.turn(Duration::from_secs(10)).expect("a turn");
                tell.send(name).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                drop(turn);
            }));
            // Queued in this order.
            while door
                .lock()
                .waiting
                .values()
                .map(VecDeque::len)
                .sum::<usize>()
                < waiters.len()
            {
                std::thread::yield_now();
            }
        }
        drop(held);
        let order: Vec<&str> = (0..4).map(|_| told.recv().unwrap()).collect();
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(order, ["a1", "b1", "a2", "a3"]);
        assert_eq!(door.lock().judging, 0);
    }

    /// A pod's connections beyond its share are turned away; another pod still enters.
    #[test]
    fn a_full_share_turns_away_only_its_pod() {
        let door = Door::new();
        let mine: Vec<Entry> = (0..PLACES_PER_PEER)
            .map(|_| door.enter("greedy").unwrap())
            .collect();
        assert!(door.enter("greedy").is_err());
        assert!(door.enter("other").is_ok());
        drop(mine);
        assert_eq!(door.held(), 0);
    }

    /// A request that waited its patience leaves the queue, and the turn it never took
    /// goes to the next one.
    #[test]
    fn a_request_that_gave_up_leaves_no_trace() {
        let door = Door::with_turns(1);
        let entry = door.enter("a").unwrap();
        let turn = entry.turn(Duration::ZERO).unwrap();
        let late = door.enter("b").unwrap();
        assert!(late.turn(Duration::from_millis(50)).is_none());
        drop(turn);
        let state = door.lock();
        assert!(
            state.waiting.is_empty() && state.rotation.is_empty(),
            "{:?}",
            state.rotation
        );
        assert_eq!(state.judging, 0);
    }
}
