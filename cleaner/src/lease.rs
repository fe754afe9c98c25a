//! The guard in force over the walk now ([`crate::hold`]), as the walk reads it before
//! each entry: whether the node agent withdrew its answer, and until when its last
//! `same` holds. Process-wide, like the deadline: the concurrent walk's workers all read
//! it, and the program walks one target at a time.
//!
//! Each guarded walk has a generation; a guard's thread that outlives its walk (it is
//! never waited for) can then neither stop nor extend the next walk, guarded or not.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One word, so that a stale guard can never write another's lease: the generation in
/// the high bits (0: no walk is guarded), and until when the lease holds in the low
/// [`UNTIL_BITS`] (milliseconds since [`epoch`]; all ones: for the whole walk).
static IN_FORCE: AtomicU64 = AtomicU64::new(0);
/// The generation of the last guard whose answer was withdrawn.
static WITHDRAWN: AtomicU64 = AtomicU64::new(0);
/// The last generation handed out.
static GENERATION: AtomicU64 = AtomicU64::new(0);
const UNTIL_BITS: u32 = 40;
const UNTIL: u64 = (1 << UNTIL_BITS) - 1;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn millis(at: Instant) -> u64 {
    let since = at.saturating_duration_since(epoch()).as_millis();
    u64::try_from(since).unwrap_or(u64::MAX).min(UNTIL - 1)
}

/// A new guarded walk whose lease holds until `until`; its generation.
pub(crate) fn begin(until: Instant) -> u64 {
    let generation = GENERATION.fetch_add(1, Ordering::SeqCst) + 1;
    IN_FORCE.store(generation << UNTIL_BITS | millis(until), Ordering::SeqCst);
    generation
}

/// Extends `generation`'s lease to `until`, unless another walk is guarded by now.
pub(crate) fn renew(generation: u64, until: Instant) {
    set(generation, millis(until));
}

/// `generation`'s lease holds until its walk ends (the walk asks itself, between two
/// entries, so its answer is never late).
pub(crate) fn for_the_whole_walk(generation: u64) {
    set(generation, UNTIL);
}

fn set(generation: u64, until: u64) {
    let _ = IN_FORCE.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
        (word >> UNTIL_BITS == generation).then_some(generation << UNTIL_BITS | until)
    });
}

/// `generation`'s walk is over: nothing it still hears changes another walk.
pub(crate) fn end(generation: u64) {
    let _ = IN_FORCE.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
        (word >> UNTIL_BITS == generation).then_some(0)
    });
}

/// The agent's answer to `generation`'s walk is no longer `same`: it stops.
pub(crate) fn withdraw(generation: u64) {
    WITHDRAWN.store(generation, Ordering::SeqCst);
}

pub(crate) fn is_withdrawn(generation: u64) -> bool {
    WITHDRAWN.load(Ordering::SeqCst) == generation
}

/// Whether the walk must stop at this entry because the agent withdrew its answer.
/// While the last `same` no longer holds and no newer answer has come, it waits here for
/// one (or for `stop`, the deadline): the walk removes nothing on an answer that is late.
pub(crate) fn stops_the_walk(stop: &AtomicBool) -> bool {
    let mut waited = false;
    loop {
        let word = IN_FORCE.load(Ordering::SeqCst);
        let generation = word >> UNTIL_BITS;
        if generation == 0 {
            return false;
        }
        if is_withdrawn(generation) {
            return true;
        }
        if word & UNTIL == UNTIL || millis(Instant::now()) <= word & UNTIL {
            return false;
        }
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        if waited {
            std::thread::sleep(Duration::from_millis(1));
        } else {
            waited = true;
            std::thread::yield_now();
        }
    }
}
