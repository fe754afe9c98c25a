//! The guard in force over the walk now ([`crate::hold`]), as the walk reads it before
//! each entry: whether the node agent withdrew its answer, and until when its last
//! `same` holds. Process-wide, like the deadline: the concurrent walk's workers all read
//! it, and the program walks one target at a time.
//!
//! Each guarded walk has a generation; a guard's thread that outlives its walk (it is
//! never waited for) can then neither stop nor extend the next walk, guarded or not.
//!
//! A `same` that comes after its lease has run out (an agent slower than [`LEASE`] on a
//! node under load) still lets the walk remove [`LATE_GRANT`] entries ([`grant`]).
//! Without it such a walk removed nothing at all: each answer renewed a lease already
//! over, and the directory stayed full until the deadline cut the hook off (seen in CI:
//! 67 `same` answers in 38 s, 0 entries removed).
//!
//! [`LEASE`]: crate::hold::LEASE

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
/// Entries the walk may still remove on its last late answer: the generation in the high
/// bits, the count in the low [`UNTIL_BITS`].
static GRANTED: AtomicU64 = AtomicU64::new(0);

/// Entries one late `same` lets the walk remove (checks, precisely: an entry listed at
/// the target's top takes one to be read and one to be removed). A small part of what one
/// lease lets a walk remove at full speed (100,100 entries took 0.61 s on tmpfs,
/// docs/BENCHMARKS.md: some 16,000 in a lease), so the walk's pace follows the agent's:
/// about 2,000 entries per answer, however slow. A new user loses at most what one lease
/// covers and two grants (the one being used when it came, and that of the one answer on
/// its way).
pub(crate) const LATE_GRANT: u64 = 4096;
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

/// `generation`'s walk heard `same` after that answer's lease ran out: it may remove
/// `entries` more while it waits for the next one (in place of what is left of an
/// earlier grant, never added to it). A guard that outlived its walk cannot grant a
/// later walk anything.
pub(crate) fn grant(generation: u64, entries: u64) {
    let _ = GRANTED.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
        granted(word, generation, entries)
    });
}

/// `word` with `generation`'s grant of `entries`; `None` when a later walk's is there.
fn granted(word: u64, generation: u64, entries: u64) -> Option<u64> {
    (word >> UNTIL_BITS <= generation).then_some(generation << UNTIL_BITS | entries.min(UNTIL))
}

/// Takes one entry of `generation`'s grant; false when none is left.
fn take_granted(generation: u64) -> bool {
    GRANTED
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
            taken(word, generation)
        })
        .is_ok()
}

/// `word` with one entry of `generation`'s grant taken; `None` when it has none.
fn taken(word: u64, generation: u64) -> Option<u64> {
    (word >> UNTIL_BITS == generation && word & UNTIL > 0).then(|| word - 1)
}

/// `generation`'s lease holds until its walk ends (the walk asks itself, between two
/// entries, so its answer is never late).
pub(crate) fn for_the_whole_walk(generation: u64) {
    set(generation, UNTIL);
}

fn set(generation: u64, until: u64) {
    let _ = IN_FORCE.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
        renewed(word, generation, until)
    });
}

/// `word` with `generation`'s lease until `until`; `None` when another walk is guarded
/// by now, or when the lease holds for the whole walk: the walk that asks itself renews
/// only where it asks (between two progress reports), which no finite lease covers.
fn renewed(word: u64, generation: u64, until: u64) -> Option<u64> {
    (word >> UNTIL_BITS == generation && word & UNTIL != UNTIL)
        .then_some(generation << UNTIL_BITS | until)
}

/// `generation`'s walk is over: nothing it still hears changes another walk.
pub(crate) fn end(generation: u64) {
    let _ = IN_FORCE.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
        (word >> UNTIL_BITS == generation).then_some(0)
    });
}

/// The agent's answer to `generation`'s walk is no longer `same`: it stops.
pub(crate) fn withdraw(generation: u64) {
    // The newest generation wins: a stale guard's late answer never overwrites a later
    // walk's withdrawal.
    WITHDRAWN.fetch_max(generation, Ordering::SeqCst);
}

pub(crate) fn is_withdrawn(generation: u64) -> bool {
    WITHDRAWN.load(Ordering::SeqCst) == generation
}

/// Whether the walk must stop at this entry because the agent withdrew its answer.
/// While the last `same` no longer holds and no newer answer has come, it waits here for
/// one (or for `stop`, the deadline): the walk removes nothing past its lease but what a
/// late answer granted.
pub(crate) fn stops_the_walk(stop: &AtomicBool) -> bool {
    let mut waited = false;
    loop {
        let word = IN_FORCE.load(Ordering::SeqCst);
        match verdict(
            word,
            WITHDRAWN.load(Ordering::SeqCst),
            millis(Instant::now()),
        ) {
            Verdict::Go => return false,
            Verdict::Stop => return true,
            Verdict::Wait if stop.load(Ordering::SeqCst) => return true,
            Verdict::Wait if take_granted(word >> UNTIL_BITS) => return false,
            Verdict::Wait if waited => std::thread::sleep(Duration::from_millis(1)),
            Verdict::Wait => {
                waited = true;
                std::thread::yield_now();
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Go,
    Stop,
    Wait,
}

/// What the walk does at `now` (milliseconds since [`epoch`]) under `word`, the
/// generation last withdrawn being `withdrawn`.
fn verdict(word: u64, withdrawn: u64, now: u64) -> Verdict {
    let generation = word >> UNTIL_BITS;
    let until = word & UNTIL;
    if generation == 0 {
        Verdict::Go
    } else if withdrawn == generation {
        Verdict::Stop
    } else if until == UNTIL || now < until {
        // Strictly before: both are whole milliseconds, rounded down, and an instant
        // before the epoch (a lease over before the first walk began) is 0, which then
        // holds for no millisecond at all.
        Verdict::Go
    } else {
        Verdict::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 7;

    fn word(generation: u64, until: u64) -> u64 {
        generation << UNTIL_BITS | until
    }

    #[test]
    fn a_lease_holds_until_its_time_then_the_walk_waits() {
        assert_eq!(verdict(word(G, 100), 0, 99), Verdict::Go);
        assert_eq!(verdict(word(G, 100), 0, 100), Verdict::Wait);
        // A lease that ran out before the epoch holds for no millisecond: the first walk
        // of a process went on for its first millisecond on an answer already late.
        assert_eq!(verdict(word(G, 0), 0, 0), Verdict::Wait);
        assert_eq!(verdict(word(G, 100), G, 50), Verdict::Stop);
        // No walk guarded, or another generation withdrawn: no effect.
        assert_eq!(verdict(0, G, 1_000), Verdict::Go);
        assert_eq!(verdict(word(G, 100), G - 1, 50), Verdict::Go);
    }

    /// A late answer's grant is used up one entry at a time, replaced (never added to)
    /// by the next, and is its own walk's only: a guard that outlived its walk grants the
    /// next walk nothing, nor takes its grant away.
    #[test]
    fn a_grant_is_counted_replaced_and_kept_to_its_walk() {
        let two = word(G, 2);
        let one = taken(two, G).unwrap();
        assert_eq!(one, word(G, 1));
        assert_eq!(taken(taken(one, G).unwrap(), G), None);
        assert_eq!(taken(two, G + 1), None);
        assert_eq!(granted(one, G, 256), Some(word(G, 256)));
        assert_eq!(granted(one, G, 0), Some(word(G, 0)));
        assert_eq!(granted(word(G + 1, 5), G, 256), None);
        assert_eq!(granted(two, G + 1, 256), Some(word(G + 1, 256)));
    }

    /// The walk that asks itself (no thread) holds its lease for the whole walk: an
    /// answer it hears must not turn it into a finite one, which nothing would renew
    /// while the walk waits (it froze until the deadline).
    #[test]
    fn a_lease_for_the_whole_walk_is_never_shortened() {
        let whole = word(G, UNTIL);
        assert_eq!(renewed(whole, G, 500), None);
        assert_eq!(verdict(whole, 0, UNTIL - 1), Verdict::Go);
        assert_eq!(renewed(word(G, 100), G, 500), Some(word(G, 500)));
        // A stale guard never renews another walk's lease.
        assert_eq!(renewed(word(G + 1, 100), G, 500), None);
    }
}
