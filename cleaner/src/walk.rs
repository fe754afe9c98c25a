//! Emptying a directory by file descriptor, without ever crossing a symlink or a mount.
//!
//! The contract (SPEC §3, last bullet):
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

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{fstat, openat2, statat, unlinkat, AtFlags, Dir, FileType, Mode, ResolveFlags};
use rustix::io::{fcntl_dupfd_cloexec, retry_on_intr, Errno};

use crate::report::{Reason, Survivor, MAX_NAMED};
use crate::target::DIR_FLAGS;

/// Directory descriptors the walk keeps open at most, besides the target's.
pub const WINDOW: usize = 32;
/// Attempts at one entry whose kind keeps changing (dir → symlink → dir …).
const MAX_TRIES: u8 = 8;

const BENEATH: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_XDEV)
    .union(ResolveFlags::NO_MAGICLINKS);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
    Unknown,
}

struct Entry {
    name: CString,
    kind: Kind,
}

struct Frame {
    /// The directory's stream, whose descriptor is also the one its entries are opened
    /// and removed through. `None` for frames whose descriptor was closed to stay within
    /// [`WINDOW`] (never the target's).
    dir: Option<Dir>,
    /// Its name in the parent (empty for the target).
    name: CString,
    dev: u64,
    ino: u64,
    /// The `d_off` of the last entry taken from the stream: where it resumes after its
    /// descriptor was closed and reopened.
    offset: i64,
    /// The child being walked when the stream was closed: should the resumed stream
    /// return it again, it is not walked twice.
    resumed_after: Option<CString>,
    /// The stream is exhausted (or failed): only the directory's removal is left.
    done: bool,
    /// Why the stream failed before its end: the directory survives, named once.
    failed: Option<Reason>,
    /// Entries of this directory that survived (so its own removal is expected to fail).
    left: u64,
}

impl Frame {
    fn new(dir: Dir, name: CString, dev: u64, ino: u64) -> Frame {
        Frame {
            dir: Some(dir),
            name,
            dev,
            ino,
            offset: 0,
            resumed_after: None,
            done: false,
            failed: None,
            left: 0,
        }
    }
}

/// One pass over the tree below `root`.
pub(crate) struct Walk<'a> {
    target: &'a str,
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
    /// SPEC §3): a directory that is one of them is never entered nor emptied.
    pub other_mounts: HashMap<(u64, u64), Vec<u8>>,
    /// Tests: runs before each climb by `..`, to move directories at the worst moment.
    #[cfg(test)]
    before_climb: Option<Box<dyn FnMut()>>,
    /// Tests: list every entry as `DT_UNKNOWN`, as some filesystems do.
    #[cfg(test)]
    unknown_types: bool,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(target: &'a str, root: BorrowedFd<'a>) -> Walk<'a> {
        Walk {
            target,
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
            other_mounts: HashMap::new(),
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
            Err(err) => return self.survive_path(self.target.as_bytes().to_vec(), err.into()),
        };
        self.root_dev = dev;
        let dir = match stream(self.root) {
            Ok(dir) => dir,
            Err(err) => return self.survive_path(self.target.as_bytes().to_vec(), err.into()),
        };
        self.stack
            .push(Frame::new(dir, CString::default(), dev, ino));
        while !self.stopped {
            match self.next_entry() {
                Some(entry) => {
                    self.entry(entry);
                    continue;
                }
                None if self.stack.len() <= 1 => {
                    if let Some(reason) = self.stack.last_mut().and_then(|f| f.failed.take()) {
                        self.survive_path(self.target.as_bytes().to_vec(), reason);
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

    fn entry(&mut self, mut entry: Entry) {
        for _ in 0..MAX_TRIES {
            let dir = self.top_fd();
            match entry.kind {
                Kind::Unknown => match statat(dir, &entry.name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => entry.kind = kind_of(FileType::from_raw_mode(st.st_mode)),
                    Err(Errno::NOENT) => return,
                    Err(Errno::INTR) => {}
                    Err(err) => return self.survive(&entry.name, err.into()),
                },
                Kind::Dir => match openat2(dir, &entry.name, DIR_FLAGS, Mode::empty(), BENEATH) {
                    Ok(fd) => return self.descend(entry.name, fd),
                    Err(Errno::NOENT) => return,
                    // Swapped for a symlink or a file since it was listed: remove it as
                    // what it is now.
                    Err(Errno::LOOP | Errno::NOTDIR) => entry.kind = Kind::Unknown,
                    Err(Errno::XDEV) => return self.survive(&entry.name, Reason::MountPoint),
                    Err(Errno::ACCESS) => return self.remove_unreadable(entry.name),
                    Err(Errno::INTR | Errno::AGAIN) => {}
                    // Fewer descriptors than WINDOW allowed: hold fewer and try again.
                    Err(Errno::MFILE) if self.close_oldest() => {}
                    Err(err) => return self.survive(&entry.name, err.into()),
                },
                Kind::File | Kind::Other => {
                    let size = if entry.kind == Kind::File {
                        match statat(dir, &entry.name, AtFlags::SYMLINK_NOFOLLOW) {
                            Ok(st)
                                if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile =>
                            {
                                u64::try_from(st.st_size).unwrap_or(0)
                            }
                            Err(Errno::NOENT) => return,
                            _ => 0,
                        }
                    } else {
                        0
                    };
                    match unlinkat(dir, &entry.name, AtFlags::empty()) {
                        Ok(()) => {
                            self.removed += 1;
                            self.bytes += size;
                            return;
                        }
                        Err(Errno::NOENT) => return,
                        // Swapped for a directory since it was listed.
                        Err(Errno::ISDIR) => entry.kind = Kind::Dir,
                        Err(Errno::INTR) => {}
                        Err(err) => return self.survive(&entry.name, err.into()),
                    }
                }
            }
        }
        self.changed = true;
        self.survive(&entry.name, Reason::Changing);
    }

    /// Enters a directory just opened below the top frame: the place for every check
    /// on a directory before anything inside it is touched.
    fn descend(&mut self, name: CString, fd: OwnedFd) {
        let st = match fstat(&fd) {
            Ok(st) => st,
            Err(err) => return self.survive(&name, err.into()),
        };
        if st.st_dev != self.root_dev {
            // RESOLVE_NO_XDEV already refused every mount; a device change within one
            // mount (a btrfs subvolume) is not expected either. Never enter it.
            return self.survive(&name, Reason::OtherDevice);
        }
        if self.other_mounts.contains_key(&(st.st_dev, st.st_ino)) {
            // Another mount's root, aliased here (a PV inside a hostPath target).
            return self.survive(&name, Reason::OtherMount);
        }
        // The stream owns the descriptor: no second one per directory.
        let dir = match Dir::new(fd) {
            Ok(dir) => dir,
            Err(err) => return self.survive(&name, err.into()),
        };
        self.stack.push(Frame::new(dir, name, st.st_dev, st.st_ino));
        // Keep at most WINDOW descriptors: close the one furthest up (never the target's).
        if self.stack.len() > WINDOW + 1 {
            let oldest = self.stack.len() - 1 - WINDOW;
            self.stack[oldest].dir = None;
        }
    }

    /// Closes the descriptor of the frame furthest up that still has one, except the
    /// target's and the working directory's; false when there is none to close.
    fn close_oldest(&mut self) -> bool {
        let top = self.stack.len().saturating_sub(1);
        match self
            .stack
            .get_mut(1..top)
            .and_then(|frames| frames.iter_mut().find(|frame| frame.dir.is_some()))
        {
            Some(frame) => {
                frame.dir = None;
                true
            }
            None => false,
        }
    }

    /// Makes sure the parent of `child` (now the top frame) has a descriptor, reopening
    /// it by `..` and resuming its stream when it was closed. False when `..` is not the
    /// directory we came from.
    fn ascend(&mut self, child: &Frame) -> bool {
        let depth = self.stack.len();
        match self.stack.last() {
            Some(parent) if depth > 1 && parent.dir.is_none() => {}
            Some(_) => return true,
            None => return false,
        }
        let Some(child_fd) = child.dir.as_ref().and_then(|dir| dir.fd().ok()) else {
            return false;
        };
        #[cfg(test)]
        if let Some(hook) = self.before_climb.as_mut() {
            hook();
        }
        let Some(parent) = self.stack.last_mut() else {
            return false;
        };
        let resolve =
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV;
        let reopened = retry_on_intr(|| openat2(child_fd, "..", DIR_FLAGS, Mode::empty(), resolve));
        let fd = match reopened.and_then(|fd| fstat(&fd).map(|st| (fd, st))) {
            Ok((fd, st)) if st.st_dev == parent.dev && st.st_ino == parent.ino => fd,
            _ => return false,
        };
        match Dir::new(fd) {
            Ok(mut dir) => {
                // Where the stream was: the offset is the filesystem's cookie for "after
                // the last entry taken", valid for a new descriptor of the same directory
                // on every filesystem that can be exported over NFS. Should it not be,
                // entries are skipped (the directory's removal then fails and the next
                // pass takes them) or one is seen again (the child just walked is not
                // walked twice).
                if dir.seek(parent.offset).is_err() {
                    parent.done = true;
                    parent.failed = Some(Reason::Changing);
                    self.changed = true;
                }
                parent.resumed_after = Some(child.name.clone());
                parent.dir = Some(dir);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes the (walked) directory `name` from the top frame; `left` is how many of
    /// its entries are known to have survived.
    fn remove_dir(&mut self, name: CString, left: u64) {
        for _ in 0..MAX_TRIES {
            match unlinkat(self.top_fd(), &name, AtFlags::REMOVEDIR) {
                Ok(()) => {
                    self.removed += 1;
                    return;
                }
                Err(Errno::NOENT) => return,
                Err(Errno::INTR) => {}
                Err(Errno::NOTEMPTY | Errno::EXIST) if left > 0 => {
                    // Only holds survivors, which are named: count it, don't name it.
                    self.left += 1;
                    if let Some(top) = self.stack.last_mut() {
                        top.left += 1;
                    }
                    return;
                }
                Err(Errno::NOTEMPTY | Errno::EXIST) => {
                    // Empty when walked, not now: someone is writing into it.
                    self.changed = true;
                    return self.survive(&name, Reason::Changing);
                }
                // Swapped for a file or symlink after the walk: remove what it is now.
                Err(Errno::NOTDIR) => {
                    return self.entry(Entry {
                        name,
                        kind: Kind::Unknown,
                    })
                }
                Err(err) => return self.survive(&name, err.into()),
            }
        }
        self.survive(&name, Reason::Changing);
    }

    /// A directory we may not read (mode 000 and not root): it can still go if empty.
    fn remove_unreadable(&mut self, name: CString) {
        match retry_on_intr(|| unlinkat(self.top_fd(), &name, AtFlags::REMOVEDIR)) {
            Ok(()) => self.removed += 1,
            Err(Errno::NOENT) => {}
            Err(Errno::NOTEMPTY | Errno::EXIST | Errno::ACCESS) => {
                self.survive(&name, Reason::PermissionDenied)
            }
            Err(err) => self.survive(&name, err.into()),
        }
    }

    fn survive(&mut self, name: &CStr, reason: Reason) {
        if let Some(top) = self.stack.last_mut() {
            top.left += 1;
        }
        let path = self.path_of(name);
        self.survive_path(path, reason);
    }

    fn survive_path(&mut self, path: Vec<u8>, reason: Reason) {
        self.left += 1;
        if reason == Reason::ReadOnly {
            self.stopped = true;
        }
        if self.survivors.len() < MAX_NAMED {
            self.survivors.push(Survivor { path, reason });
        } else {
            self.unnamed += 1;
        }
    }

    /// The full path of `name` in the top frame, for messages only.
    fn path_of(&self, name: &CStr) -> Vec<u8> {
        let mut path = self.target.as_bytes().to_vec();
        for frame in self.stack.iter().skip(1) {
            path.push(b'/');
            path.extend_from_slice(frame.name.to_bytes());
        }
        path.push(b'/');
        path.extend_from_slice(name.to_bytes());
        path
    }
}

/// A stream of the directory `fd` from its start. A dup shares the file offset with `fd`:
/// rewind, or a second stream of the same descriptor (the next pass over the target)
/// would start at the end and see nothing.
fn stream(fd: impl AsFd) -> Result<Dir, Errno> {
    let mut dir = Dir::new(fcntl_dupfd_cloexec(fd, 0)?)?;
    dir.rewind();
    Ok(dir)
}

/// How many entries the directory holds (`.` and `..` left out), streamed.
pub(crate) fn entry_count(fd: impl AsFd) -> Result<u64, Errno> {
    let mut count = 0;
    for entry in stream(fd)? {
        let entry = entry?;
        if entry.file_name() != c"." && entry.file_name() != c".." {
            count += 1;
        }
    }
    Ok(count)
}

fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Unknown => Kind::Unknown,
        _ => Kind::Other,
    }
}

impl From<Errno> for Reason {
    fn from(err: Errno) -> Reason {
        match err {
            Errno::ACCESS => Reason::PermissionDenied,
            Errno::PERM => Reason::NotPermitted,
            Errno::ROFS => Reason::ReadOnly,
            Errno::BUSY | Errno::XDEV => Reason::MountPoint,
            err => Reason::Error(err.raw_os_error()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{openat, CWD};
    use std::cell::Cell;
    use std::fs;
    use std::path::PathBuf;
    use std::rc::Rc;

    /// `target/l0/…/l79` with files at the bottom; returns the path of `l10`.
    fn deep_tree(target: &std::path::Path) -> PathBuf {
        let mut dir = target.to_path_buf();
        let mut middle = PathBuf::new();
        for level in 0..80 {
            dir.push(format!("l{level}"));
            if level == 10 {
                middle = dir.clone();
            }
        }
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("f"), "junk").unwrap();
        middle
    }

    /// Filesystems that report `DT_UNKNOWN` (some FUSE, old XFS): every entry is
    /// looked at with `fstatat(AT_SYMLINK_NOFOLLOW)` first, links are still never
    /// followed and file sizes still counted.
    #[test]
    fn entries_of_unknown_type_are_looked_at_first() {
        let base = tempfile::tempdir().unwrap();
        let target = base.path().join("target");
        let canary = base.path().join("canary");
        fs::create_dir_all(target.join("d/e")).unwrap();
        fs::create_dir(&canary).unwrap();
        fs::write(canary.join("keep"), "canary").unwrap();
        fs::write(target.join("d/e/f"), "12345").unwrap();
        std::os::unix::fs::symlink(&canary, target.join("d/link")).unwrap();
        let root = openat(CWD, &target, DIR_FLAGS, Mode::empty()).unwrap();
        let mut walk = Walk::new(target.to_str().unwrap(), root.as_fd());
        walk.unknown_types = true;
        walk.run();
        assert_eq!((walk.removed, walk.bytes, walk.left), (4, 5, 0));
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
        assert_eq!(fs::read_to_string(canary.join("keep")).unwrap(), "canary");
    }

    /// The walk climbs back by `..` above the descriptor window. When a directory was
    /// moved out of the target meanwhile, `..` is not the directory it came from: the
    /// walk stops (the caller walks again) and never removes anything beside it.
    #[test]
    fn a_directory_moved_out_mid_walk_is_noticed_on_the_way_up() {
        let base = tempfile::tempdir().unwrap();
        let target = base.path().join("target");
        let outside = base.path().join("outside");
        fs::create_dir_all(outside.join("canary")).unwrap();
        fs::write(outside.join("canary/keep"), "canary").unwrap();
        let middle = deep_tree(&target);
        let root = openat(CWD, &target, DIR_FLAGS, Mode::empty()).unwrap();
        let target_str = target.to_str().unwrap();
        let mut walk = Walk::new(target_str, root.as_fd());
        let climbs = Rc::new(Cell::new(0));
        let (counter, from, to) = (climbs.clone(), middle.clone(), outside.join("moved"));
        walk.before_climb = Some(Box::new(move || {
            if counter.get() == 0 {
                fs::rename(&from, &to).unwrap();
            }
            counter.set(counter.get() + 1);
        }));
        walk.run();
        assert!(climbs.get() > 1, "the walk never climbed by ..");
        assert!(walk.changed);
        assert_eq!(walk.survivors.len(), 1);
        assert_eq!(walk.survivors[0].reason, Reason::Changing);
        assert!(walk.survivors[0].path.ends_with(b"/l9/l10"));
        // Beside the moved directory, in `outside`, nothing was touched.
        assert_eq!(
            fs::read_to_string(outside.join("canary/keep")).unwrap(),
            "canary"
        );
        assert!(outside.join("moved").is_dir());
        // A second pass (as empty_directory does) empties what is still in the target.
        let mut again = Walk::new(target_str, root.as_fd());
        again.run();
        assert!(!again.changed);
        assert_eq!(
            again.left,
            0,
            "{:?}",
            again
                .survivors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    }
}
