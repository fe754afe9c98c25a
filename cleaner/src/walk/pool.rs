//! The concurrent walk: several workers empty one tree, each running the sequential walk
//! of `walk.rs` on one directory at a time, so every check and every removal is the
//! sequential walk's own code (see the contract in `walk.rs`).
//!
//! - A *node* is a directory handed from one worker to the others: its descriptor was
//!   opened with `openat2(…, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
//!   RESOLVE_NO_MAGICLINKS)` relative to its parent's and passed every check of
//!   `descend` (device, other mounts' roots) before it was handed over. The node owns
//!   that descriptor until the directory is removed, so the parent's removal of it is
//!   `unlinkat(parent, name, AT_REMOVEDIR)` through a descriptor held all along: no path
//!   is ever resolved again.
//! - A worker walking a node offers every directory directly below it to the shared
//!   queue; a node is only made when a *slot* is free (slots bound the descriptors and
//!   the memory that nodes hold). Without one, the worker walks that directory itself,
//!   depth-first, with the sequential walk's descriptor window.
//! - `pending` counts a node's own walk plus its handed-over children not yet removed;
//!   whoever brings it to zero removes the node from its parent (the target itself is
//!   never removed), then does the same for the parent. So a directory is removed after
//!   everything in it, whichever worker finished last.
//! - A worker walking a node also gives the node's files (and other non-directories)
//!   to the others in batches of [`FILES_PER_BATCH`], while it reads on: a batch keeps
//!   its node pending, and is removed through the node's descriptor by the same code
//!   ([`Walk::remove_entries`]). At most two batches per worker wait or run at a time;
//!   beyond that the walker removes its files itself. So one large directory is emptied
//!   by every worker, which on a disk overlaps the inode frees that follow each removal
//!   (docs/BENCHMARKS.md: 100k files in one directory on ext4, 8.2 s before, 2.6 s now).
//!   Batches go only to idle workers: in a tree every worker has a directory of its own.
//! - Counts are kept per worker and added up at the end; survivors are named up to
//!   `MAX_NAMED` in all.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};

use super::*;

mod tally;
pub(crate) use tally::Tally;

/// A directory handed from one worker to another.
struct Node {
    /// Opened below the parent's descriptor (the target's own for the root node).
    dir: OwnedFd,
    /// Its name in the parent; `None` for the target.
    name: Option<CString>,
    parent: Option<Arc<Node>>,
    /// Its own walk plus its handed-over children not yet done with.
    pending: AtomicUsize,
    /// Entries directly inside it that survived: its removal is then expected to fail.
    left: AtomicU64,
    /// Its stream failed (named as a survivor already): it is not removed.
    failed: AtomicBool,
    /// Where the node's slot goes back when the node (and its descriptor) goes; `None`
    /// for the target's, which takes none.
    slots: Option<Arc<AtomicUsize>>,
}

impl Node {
    /// The full path, for messages: the target, then the names down to this node.
    fn path(&self, target: &[u8]) -> Vec<u8> {
        let mut names = Vec::new();
        let mut node = Some(self);
        while let Some(n) = node {
            names.extend(n.name.as_deref());
            node = n.parent.as_deref();
        }
        let mut path = target.to_vec();
        for name in names.iter().rev() {
            path.push(b'/');
            path.extend_from_slice(name.to_bytes());
        }
        path
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(slots) = &self.slots {
            slots.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// What the workers share.
struct Shared<'a> {
    target: &'a [u8],
    other_mounts: &'a HashMap<(u64, u64), Vec<u8>>,
    /// Work waiting for a worker, taken newest first: depth-first, which finishes
    /// (and frees) nodes soonest.
    queue: Mutex<Queue>,
    /// Batches of files that may still be queued (each holds its names in memory).
    batches: AtomicUsize,
    wake: Condvar,
    /// Nodes that may still be made.
    slots: Arc<AtomicUsize>,
    halt: AtomicBool,
    /// Told the pass's `(removed, bytes)` so far, by whichever worker crossed the next
    /// [`crate::walk::PROGRESS_EVERY`] in its walk (the reaper's stop-and-report line).
    progress: &'a (dyn Fn(u64, u64) + Sync),
    removed: AtomicU64,
    bytes: AtomicU64,
}

/// What a worker takes from the queue.
enum Job {
    /// Walk the node (and remove it, if this is its last share).
    Walk(Arc<Node>),
    /// Remove these entries, listed directly in the node, through its descriptor.
    Files(Arc<Node>, Vec<Entry>),
}

struct Queue {
    jobs: VecDeque<Job>,
    /// Jobs queued or being worked on: the pass is over when it reaches zero.
    busy: usize,
    /// Workers waiting for a job.
    idle: usize,
}

/// One pass over the tree below `root` with `jobs` workers and at most `slots` nodes
/// (each holding one descriptor) at a time.
pub(crate) fn run(
    target: &str,
    root: BorrowedFd<'_>,
    other_mounts: &HashMap<(u64, u64), Vec<u8>>,
    jobs: usize,
    slots: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Tally {
    let mut tally = Tally::default();
    let root_dir = match fcntl_dupfd_cloexec(root, 0) {
        Ok(fd) => fd,
        Err(err) => {
            // As the sequential walk reports a target it cannot stream.
            let mut walk = Walk::new(target, root);
            walk.survive_path(target.as_bytes().to_vec(), err.into());
            tally.absorb(walk);
            return tally;
        }
    };
    let slots = Arc::new(AtomicUsize::new(slots));
    let root_node = Arc::new(Node {
        dir: root_dir,
        name: None,
        parent: None,
        pending: AtomicUsize::new(1),
        left: AtomicU64::new(0),
        failed: AtomicBool::new(false),
        slots: None,
    });
    let shared = Shared {
        target: target.as_bytes(),
        other_mounts,
        queue: Mutex::new(Queue {
            jobs: VecDeque::from([Job::Walk(root_node)]),
            busy: 1,
            idle: 0,
        }),
        batches: AtomicUsize::new(2 * jobs),
        wake: Condvar::new(),
        slots,
        halt: AtomicBool::new(false),
        progress,
        removed: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    };
    std::thread::scope(|scope| {
        // A thread that cannot be made (a pids limit on the container) is a worker less,
        // never a failure: the walk needs only this one.
        let helpers: Vec<_> = (1..jobs)
            .map_while(|_| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, || worker(&shared))
                    .ok()
            })
            .collect();
        tally.add(worker(&shared));
        for helper in helpers {
            match helper.join() {
                Ok(counts) => tally.add(counts),
                // A worker that panicked (a bug): its part is unknown, say so.
                Err(_) => {
                    tally.changed = true;
                    tally.left += 1;
                }
            }
        }
    });
    tally
}

/// Takes nodes until there are none left anywhere, walks each, and removes those it
/// finishes last.
fn worker(shared: &Shared<'_>) -> Tally {
    let mut tally = Tally::default();
    while let Some(job) = next_job(shared) {
        let _done = Done(shared);
        match job {
            Job::Walk(node) => {
                walk_node(shared, &node, &mut tally);
                finish(shared, node, &mut tally);
            }
            Job::Files(node, entries) => {
                remove_files(shared, &node, entries, &mut tally);
                shared.batches.fetch_add(1, Ordering::AcqRel);
                finish(shared, node, &mut tally);
            }
        }
    }
    tally
}

/// Removes a batch of `node`'s entries in a walk of this worker's own on the node's
/// descriptor: what survives counts against the node's removal, as in its own walk.
fn remove_files(shared: &Shared<'_>, node: &Node, entries: Vec<Entry>, tally: &mut Tally) {
    let mut walk = Walk::new(node.path(shared.target), node.dir.as_fd());
    walk.other_mounts = shared.other_mounts;
    walk.halt = Some(&shared.halt);
    walk.remove_entries(entries);
    if walk.stopped {
        shared.halt.store(true, Ordering::Relaxed);
    }
    node.left.fetch_add(walk.left, Ordering::AcqRel);
    let removed = shared.removed.fetch_add(walk.removed, Ordering::Relaxed) + walk.removed;
    let bytes = shared.bytes.fetch_add(walk.bytes, Ordering::Relaxed) + walk.bytes;
    if walk.removed > 0 {
        (shared.progress)(removed, bytes);
    }
    tally.absorb(walk);
}

/// Marks a node taken by a worker as done when the worker is through with it — even by
/// a panic (a bug; the reaper's build unwinds), so that the other workers are not left
/// waiting for it forever.
struct Done<'s, 'a>(&'s Shared<'a>);

impl Drop for Done<'_, '_> {
    fn drop(&mut self) {
        let mut queue = self.0.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.busy -= 1;
        if queue.busy == 0 {
            self.0.wake.notify_all();
        }
    }
}

fn next_job(shared: &Shared<'_>) -> Option<Job> {
    let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = queue.jobs.pop_back() {
            return Some(job);
        }
        if queue.busy == 0 {
            return None;
        }
        queue.idle += 1;
        queue = shared.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
        queue.idle -= 1;
    }
}

/// Empties `node` with the sequential walk, offering the directories directly below it
/// to the other workers.
fn walk_node(shared: &Shared<'_>, node: &Arc<Node>, tally: &mut Tally) {
    if shared.halt.load(Ordering::Relaxed) {
        // A read-only filesystem was met: what is left stays, uncounted, as the
        // sequential walk leaves it when it stops.
        node.left.fetch_add(1, Ordering::AcqRel);
        return;
    }
    let hand_off = |name: CString, fd: OwnedFd| -> Result<(), (CString, OwnedFd)> {
        let taken = shared
            .slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                free.checked_sub(1)
            });
        if taken.is_err() {
            return Err((name, fd));
        }
        node.pending.fetch_add(1, Ordering::AcqRel);
        let child = Arc::new(Node {
            dir: fd,
            name: Some(name),
            parent: Some(node.clone()),
            pending: AtomicUsize::new(1),
            left: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            slots: Some(shared.slots.clone()),
        });
        let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.jobs.push_back(Job::Walk(child));
        queue.busy += 1;
        shared.wake.notify_one();
        Ok(())
    };
    let share_files = |entries: Vec<Entry>| -> Result<(), Vec<Entry>> {
        let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        // Only to a worker with nothing to do: in a tree of many directories every
        // worker has its own, and splitting a directory between two only makes them
        // wait for its lock (tmpfs, 100k files in 100 directories: 0.20 s → 0.27 s).
        if queue.jobs.len() >= queue.idle {
            return Err(entries);
        }
        let taken = shared
            .batches
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                free.checked_sub(1)
            });
        if taken.is_err() {
            return Err(entries);
        }
        node.pending.fetch_add(1, Ordering::AcqRel);
        queue.jobs.push_back(Job::Files(node.clone(), entries));
        queue.busy += 1;
        shared.wake.notify_one();
        Ok(())
    };
    // This walk's counts already added to the pass's: its progress reports are
    // cumulative, the pass's sums of every worker's.
    let added = std::cell::Cell::new((0u64, 0u64));
    let add = |removed: u64, bytes: u64| {
        let (r, b) = added.replace((removed, bytes));
        (
            shared.removed.fetch_add(removed - r, Ordering::Relaxed) + (removed - r),
            shared.bytes.fetch_add(bytes - b, Ordering::Relaxed) + (bytes - b),
        )
    };
    let mut report_to = |removed: u64, bytes: u64| {
        let (removed, bytes) = add(removed, bytes);
        (shared.progress)(removed, bytes);
    };
    let mut walk = Walk::new(node.path(shared.target), node.dir.as_fd());
    walk.other_mounts = shared.other_mounts;
    walk.hand_off = Some(&hand_off);
    walk.share_files = Some(&share_files);
    walk.halt = Some(&shared.halt);
    walk.progress = Some(&mut report_to);
    walk.run();
    walk.progress = None;
    add(walk.removed, walk.bytes);
    let mut left = walk.root_left;
    if walk.interrupted {
        // Entries of the node were never reached: it cannot be empty.
        left += 1;
    }
    if walk.root_failed {
        node.failed.store(true, Ordering::Release);
    }
    if walk.stopped {
        shared.halt.store(true, Ordering::Relaxed);
    }
    node.left.fetch_add(left, Ordering::AcqRel);
    tally.absorb(walk);
}

/// Ends this worker's share of `node`; whoever ends the last share removes it from its
/// parent, and so on up.
fn finish(shared: &Shared<'_>, node: Arc<Node>, tally: &mut Tally) {
    let mut node = node;
    while node.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        let Some(parent) = node.parent.clone() else {
            // The target: never removed.
            return;
        };
        let left_here = if node.failed.load(Ordering::Acquire) {
            // Named already, by the walk whose stream failed.
            1
        } else if shared.halt.load(Ordering::Relaxed) {
            // Stopped (read-only): nothing more is tried, as in the sequential walk.
            1
        } else {
            let name = node.name.clone().unwrap_or_default();
            let left = node.left.load(Ordering::Acquire);
            // Close it first, as the sequential walk does before the removal.
            drop(node);
            let mut walk = Walk::new(parent.path(shared.target), parent.dir.as_fd());
            walk.other_mounts = shared.other_mounts;
            walk.remove_dir(name, left);
            let left_here = walk.left;
            tally.absorb(walk);
            left_here
        };
        parent.left.fetch_add(left_here, Ordering::AcqRel);
        node = parent;
    }
}
