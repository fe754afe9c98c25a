//! The descriptor window and the way back up: at most `WINDOW` directory descriptors
//! are open, and a frame that lost its descriptor is returned to by `..` from its child,
//! checked by device and inode (see the contract in `walk.rs`).

use super::*;

impl Walk<'_> {
    /// Closes the descriptor of the frame furthest up that still has one, except the
    /// target's and the working directory's; false when there is none to close.
    pub(super) fn close_oldest(&mut self) -> bool {
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
    pub(super) fn ascend(&mut self, child: &Frame) -> bool {
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
}
