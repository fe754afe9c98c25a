//! Emptying a directory by file descriptor, without ever crossing a symlink or a mount.
//!
//! The contract (docs/DESIGN.md#how-the-walk-deletes):
//! - Every subdirectory is opened relative to its parent's descriptor with
//!   `openat2(O_DIRECTORY | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//!   RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS)`: a directory swapped for a symlink between
//!   listing and opening is refused (`ELOOP`/`ENOTDIR`, then removed as the link it now
//!   is), and a mount point — another filesystem, a tmpfs, or a bind mount of the *same*
//!   filesystem, which a device-number check would miss — is refused (`EXDEV`), never
//!   entered, and named in the report.
//! - Entries are removed with `unlinkat(dirfd, name)`, so a swap can only change *what*
//!   the name is, never *where* it is: the worst a racing writer achieves is that its
//!   symlink is removed, or that an entry survives and is reported.
//! - The target directory itself is never removed.
//! - Bounded memory, whatever the size of a directory: each directory is *streamed*
//!   (`getdents64` into a buffer of at most ~24 KiB) while its entries are removed, never
//!   listed whole. POSIX `readdir` returns every entry that is neither added nor removed
//!   meanwhile exactly once, so removing the entries already returned skips nothing.
//!   A frame holds its stream, its name and a few numbers; survivors are counted, and
//!   only the first [`MAX_NAMED`] are named.
//! - Iterative: the walk keeps a stack of frames, so depth costs memory, not call stack.
//!   At most [`WINDOW`] directory descriptors are open (each stream owns one); when a
//!   frame further up lost its descriptor, the walk returns to it by `..` from the child,
//!   checks that it arrived in the directory it left (device and inode), and resumes its
//!   stream where it was (`seekdir` to the offset of the last entry taken). If `..` is
//!   not that directory, the tree was moved under it, and the walk starts again from the
//!   target (a bounded number of times); if the offset cannot be restored, the directory
//!   is left for the next pass.
//! - `ENOENT` anywhere means another process removed the entry first: fine. `EINTR` is
//!   retried. A read-only filesystem stops the walk at the first `EROFS`.
//! - Concurrent (`pool.rs`): several workers each run this walk on one directory; the
//!   directories it opens and checks directly below its root may be handed to the others
//!   ([`Walk::hand_off`]) instead of being walked here. Nothing else changes: a handed
//!   directory is removed through its parent's descriptor, after its contents.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{fstat, openat2, statat, unlinkat, AtFlags, Dir, FileType, Mode, ResolveFlags};
use rustix::io::{fcntl_dupfd_cloexec, retry_on_intr, Errno};

use crate::report::{Reason, Survivor, MAX_DEPTH, MAX_NAMED};

use crate::target::DIR_FLAGS;
pub(crate) use batches::{ShareFiles, FILES_PER_BATCH};
pub(crate) use frame::{entry_count, Entry};
use frame::{kind_of, stream, Frame, Kind};

/// Takes a directory opened and checked below a walk's root for another worker (`Ok`), or
/// gives it back (`Err`) when the shared queue is full.
pub(crate) type HandOff<'a> = dyn Fn(CString, OwnedFd) -> Result<(), (CString, OwnedFd)> + 'a;
/// Directory descriptors the walk keeps open at most, besides the target's.
pub const WINDOW: usize = 32;
/// Attempts at one entry whose kind keeps changing (dir → symlink → dir …).
const MAX_TRIES: u8 = 8;

/// Set once the program's deadline has passed (`--deadline`, [`crate::stop_walks`]): every
/// walk stops at its next entry as at a read-only filesystem, so each worker finishes the
/// removal it is in (no entry is ever half-removed) and what is left stays, for the node
/// reaper. Process-wide: a deadline is the program's, never one walk's.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

/// Removed entries between two progress reports ([`Walk::progress`]).
pub(crate) const PROGRESS_EVERY: u64 = 256;

/// One pass over the tree below `root`.
pub(crate) struct Walk<'a> {
    /// The path of `root`, for messages only (a subdirectory's when a worker of the
    /// concurrent walk runs this walk on one, so it need not be UTF-8).
    target: Vec<u8>,
    root: BorrowedFd<'a>,
    root_dev: u64,
    stack: Vec<Frame>,
    pub removed: u64,
    pub bytes: u64,
    pub left: u64,
    pub survivors: Vec<Survivor>,
    pub unnamed: u64,
    /// The tree changed under the walk in a way another pass may fix.
    pub changed: bool,
    /// Set when the walk stopped early (a read-only filesystem).
    pub stopped: bool,
    /// `(st_dev, st_ino)` of the roots of the container's other mounts (identity check,
    /// docs/DESIGN.md#targets): a directory that is one of them is never entered nor emptied.
    pub other_mounts: &'a HashMap<(u64, u64), Vec<u8>>,
    /// The concurrent walk (`pool.rs`): offered each directory opened directly below
    /// `root`, after every check on it; it either takes it (another worker walks and
    /// removes it) or hands it back to be walked here, depth-first.
    pub hand_off: Option<&'a HandOff<'a>>,
    /// The concurrent walk: offered the root's files and other non-directories in
    /// batches, so that the removals in one large directory overlap (on a disk each
    /// removal's inode is freed after the directory's lock is released, and those frees
    /// are what a single remover waits for). Each entry is removed by
    /// [`Walk::remove_entries`], the same code as here.
    pub share_files: Option<&'a ShareFiles<'a>>,
    /// The root's entries gathered for `share_files`.
    batch: Vec<Entry>,
    /// The concurrent walk: set when any worker met a read-only filesystem.
    pub halt: Option<&'a AtomicBool>,
    /// Entries directly below `root` that survived (the concurrent walk's count for the
    /// removal of `root` itself).
    pub root_left: u64,
    /// The walk stopped before the end of `root`'s stream (the tree moved under it).
    pub interrupted: bool,
    /// `root` itself could not be read to its end: it survives, named.
    pub root_failed: bool,
    /// Told `(removed, bytes)` of this pass every [`PROGRESS_EVERY`] removed entries, so
    /// that a walk killed halfway (the node reaper's, when a user arrives) has said how
    /// far it got.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    next_progress: u64,
    /// Tests: runs before each climb by `..`, to move directories at the worst moment.
    #[cfg(test)]
    before_climb: Option<Box<dyn FnMut()>>,
    /// Tests: list every entry as `DT_UNKNOWN`, as some filesystems do.
    #[cfg(test)]
    unknown_types: bool,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(target: impl Into<Vec<u8>>, root: BorrowedFd<'a>) -> Walk<'a> {
        static NONE: std::sync::LazyLock<HashMap<(u64, u64), Vec<u8>>> =
            std::sync::LazyLock::new(HashMap::new);
        Walk {
            target: target.into(),
            root,
            root_dev: 0,
            stack: Vec::new(),
            removed: 0,
            bytes: 0,
            left: 0,
            survivors: Vec::new(),
            unnamed: 0,
            changed: false,
            stopped: false,
            other_mounts: &NONE,
            hand_off: None,
            share_files: None,
            batch: Vec::new(),
            halt: None,
            root_left: 0,
            interrupted: false,
            root_failed: false,
            progress: None,
            next_progress: PROGRESS_EVERY,
            #[cfg(test)]
            before_climb: None,
            #[cfg(test)]
            unknown_types: false,
        }
    }

    /// Empties the target. Never fails: what could not be done is in the counters.
    pub(crate) fn run(&mut self) {
        let (dev, ino) = match fstat(self.root) {
            Ok(st) => (st.st_dev, st.st_ino),
            Err(err) => {
                self.root_failed = true;
                return self.survive_path(self.target.clone(), err.into());
            }
        };
        self.root_dev = dev;
        let dir = match stream(self.root) {
            Ok(dir) => dir,
            Err(err) => {
                self.root_failed = true;
                return self.survive_path(self.target.clone(), err.into());
            }
        };
        self.stack
            .push(Frame::new(dir, CString::default(), dev, ino));
        while !self.stopped {
            if self.halted() {
                self.stopped = true;
                break;
            }
            match self.next_entry() {
                Some(entry) if self.stack.len() == 1 && self.shares(&entry) => {
                    self.batch.push(entry);
                    if self.batch.len() >= FILES_PER_BATCH {
                        self.offer_batch();
                    }
                    continue;
                }
                Some(entry) => {
                    self.entry(entry);
                    self.report_progress();
                    continue;
                }
                // The root's last files, here: nobody waits for a smaller batch. One
                // swapped for a directory since is entered like any other, so go on.
                None if self.stack.len() <= 1 && !self.batch.is_empty() => {
                    let rest = std::mem::take(&mut self.batch);
                    self.remove_entries(rest);
                    continue;
                }
                None if self.stack.len() <= 1 => {
                    if let Some(reason) = self.stack.last_mut().and_then(|f| f.failed.take()) {
                        self.root_failed = true;
                        self.survive_path(self.target.clone(), reason);
                    }
                    break;
                }
                None => {}
            }
            let Some(child) = self.stack.pop() else {
                break;
            };
            if !self.ascend(&child) {
                // The tree moved under us: start again from the target (the caller
                // does, a bounded number of times).
                self.changed = true;
                self.interrupted = true;
                let path = self.path_of(&child.name);
                self.survive_path(path, Reason::Changing);
                break;
            }
            drop(child.dir);
            match child.failed {
                Some(reason) => self.survive(&child.name, reason),
                None => self.remove_dir(child.name, child.left),
            }
        }
        if self.stopped && self.stack.first().is_some_and(|root| !root.done) {
            self.interrupted = true;
        }
        self.root_left = self.stack.first().map_or(0, |root| root.left);
    }

    /// Whether to stop now: a read-only filesystem met by any worker, the deadline, or the
    /// node agent's answer withdrawn ([`crate::hold`]).
    fn halted(&self) -> bool {
        self.halt.is_some_and(|halt| halt.load(Ordering::Relaxed))
            || STOP.load(Ordering::Relaxed)
            || crate::lease::stops_the_walk(&STOP)
    }

    /// Tells `progress` how far the walk got, every [`PROGRESS_EVERY`] removed entries.
    fn report_progress(&mut self) {
        if self.removed >= self.next_progress {
            self.next_progress = self.removed + PROGRESS_EVERY;
            if let Some(progress) = self.progress.as_mut() {
                progress(self.removed, self.bytes);
            }
        }
    }

    /// The next entry of the top frame's stream (`.` and `..` left out), or `None` once
    /// it is exhausted. A stream that fails leaves its directory as a survivor.
    fn next_entry(&mut self) -> Option<Entry> {
        loop {
            let top = self.stack.last_mut()?;
            if top.done {
                return None;
            }
            let read = match top.dir.as_mut() {
                Some(dir) => dir.read(),
                // Cannot happen: a frame is reopened (or the walk stops) before it is
                // read again. Treat it as a failed stream rather than loop.
                None => Some(Err(Errno::BADF)),
            };
            let entry = match read {
                None => {
                    top.done = true;
                    return None;
                }
                Some(Err(Errno::INTR)) => continue,
                Some(Err(err)) => {
                    // The directory could not be read to its end: it survives whole.
                    top.done = true;
                    top.failed = Some(err.into());
                    return None;
                }
                Some(Ok(entry)) => entry,
            };
            top.offset = entry.offset();
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            if top.resumed_after.as_deref() == Some(name) {
                // Walked already, just before this stream was closed and resumed.
                top.resumed_after = None;
                continue;
            }
            #[allow(unused_mut)]
            let mut kind = kind_of(entry.file_type());
            #[cfg(test)]
            if self.unknown_types {
                kind = Kind::Unknown;
            }
            return Some(Entry {
                name: name.to_owned(),
                kind,
            });
        }
    }

    /// The descriptor of the directory being worked on.
    fn top_fd(&self) -> BorrowedFd<'_> {
        match self.stack.last().and_then(|frame| frame.dir.as_ref()) {
            Some(dir) => dir.fd().unwrap_or(self.root),
            None => self.root,
        }
    }
}

mod batches;
mod climb;
mod descend;
mod frame;
pub(crate) mod pool;
mod remove;

#[cfg(test)]
mod tests;
