//! Removing a walked directory from its parent, and counting (and naming the first few
//! of) what survives (see the contract in `walk.rs`).

use super::*;

impl Walk<'_> {
    /// Removes the (walked) directory `name` from the top frame; `left` is how many of
    /// its entries are known to have survived.
    pub(super) fn remove_dir(&mut self, name: CString, left: u64) {
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
    pub(super) fn remove_unreadable(&mut self, name: CString) {
        match retry_on_intr(|| unlinkat(self.top_fd(), &name, AtFlags::REMOVEDIR)) {
            Ok(()) => self.removed += 1,
            Err(Errno::NOENT) => {}
            Err(Errno::NOTEMPTY | Errno::EXIST | Errno::ACCESS) => {
                self.survive(&name, Reason::PermissionDenied)
            }
            Err(err) => self.survive(&name, err.into()),
        }
    }

    pub(super) fn survive(&mut self, name: &CStr, reason: Reason) {
        if let Some(top) = self.stack.last_mut() {
            top.left += 1;
        }
        // Named only while there is room: a tree of a million survivors deep down would
        // otherwise spend its deadline copying paths that are thrown away.
        let path = if self.survivors.len() < MAX_NAMED {
            self.path_of(name)
        } else {
            Vec::new()
        };
        self.survive_path(path, reason);
    }

    pub(super) fn survive_path(&mut self, path: Vec<u8>, reason: Reason) {
        self.left += 1;
        if reason == Reason::ReadOnly {
            self.stopped = true;
        }
        if self.survivors.len() < MAX_NAMED {
            let path = shortened(path);
            self.survivors.push(Survivor { path, reason });
        } else {
            self.unnamed += 1;
        }
    }

    /// The full path of `name` in the top frame, for messages only.
    pub(super) fn path_of(&self, name: &CStr) -> Vec<u8> {
        let mut path = self.target.clone();
        for frame in self.stack.iter().skip(1) {
            path.push(b'/');
            path.extend_from_slice(frame.name.to_bytes());
        }
        path.push(b'/');
        path.extend_from_slice(name.to_bytes());
        path
    }
}

/// The longest survivor path named whole: a chain of 16,384 levels of 255-byte names is
/// 4 MB of path, 64 of them a report longer than the reaper reads.
const MAX_NAMED_PATH: usize = 4096;

/// `path`, or its first kilobyte and last three joined by `/…/` when it is longer than
/// [`MAX_NAMED_PATH`]: the target and the entry's own name stay readable.
fn shortened(path: Vec<u8>) -> Vec<u8> {
    const HEAD: usize = 1024;
    const TAIL: usize = 3 * 1024;
    if path.len() <= MAX_NAMED_PATH {
        return path;
    }
    let mut short = Vec::with_capacity(HEAD + TAIL + 5);
    short.extend_from_slice(&path[..HEAD]);
    short.extend_from_slice("/…/".as_bytes());
    short.extend_from_slice(&path[path.len() - TAIL..]);
    short
}
