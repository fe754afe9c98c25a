//! What each worker of the concurrent walk counts, apart from the pool that runs them:
//! removed entries and bytes, survivors (named up to `MAX_NAMED` in all), and whether
//! the tree changed or the walk stopped; added up at the end of the pass.

use crate::report::{Survivor, MAX_NAMED};
use crate::walk::Walk;

/// One worker's counts, added up at the end of the pass.
#[derive(Default)]
pub(crate) struct Tally {
    pub removed: u64,
    pub bytes: u64,
    pub left: u64,
    pub survivors: Vec<Survivor>,
    pub unnamed: u64,
    pub changed: bool,
    pub stopped: bool,
}

impl From<Walk<'_>> for Tally {
    fn from(walk: Walk<'_>) -> Tally {
        let mut tally = Tally::default();
        tally.absorb(walk);
        tally
    }
}

impl Tally {
    /// A walk's counts, added as one more worker's.
    pub(super) fn absorb(&mut self, walk: Walk<'_>) {
        self.add(Tally {
            removed: walk.removed,
            bytes: walk.bytes,
            left: walk.left,
            survivors: walk.survivors,
            unnamed: walk.unnamed,
            changed: walk.changed,
            stopped: walk.stopped,
        });
    }

    /// Another worker's counts; survivors past `MAX_NAMED` in all are counted, not named.
    pub(super) fn add(&mut self, other: Tally) {
        self.removed += other.removed;
        self.bytes += other.bytes;
        self.left += other.left;
        self.unnamed += other.unnamed;
        self.changed |= other.changed;
        self.stopped |= other.stopped;
        for survivor in other.survivors {
            if self.survivors.len() < MAX_NAMED {
                self.survivors.push(survivor);
            } else {
                self.unnamed += 1;
            }
        }
    }
}
