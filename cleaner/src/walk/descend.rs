//! The way down: each entry of a stream taken as what it is now — a file or other
//! non-directory removed with `unlinkat`, a directory opened beneath its parent with
//! `openat2` (no symlink, no mount crossed) and checked before anything inside it is
//! touched (see the contract in `walk.rs`). `climb.rs` is the way back up.

use super::*;

const BENEATH: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_XDEV)
    .union(ResolveFlags::NO_MAGICLINKS);

impl Walk<'_> {
    /// Takes one entry of the top frame's stream, again as what it has become when its
    /// kind changed meanwhile, up to [`MAX_TRIES`] times.
    pub(super) fn entry(&mut self, mut entry: Entry) {
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
        if self.stack.is_empty() {
            // Only when a directory reappears under a name the concurrent walk was
            // removing (`pool.rs`): no stream to walk it in, another pass will.
            self.changed = true;
            return self.survive(&name, Reason::Changing);
        }
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
        if self.stack.len() > MAX_DEPTH {
            // Every level keeps a frame (its name, where its stream stopped): a chain a
            // tenant made a million levels deep would cost the walk hundreds of MB, in
            // the pod's memory or the reaper's. What is deeper stays, named.
            return self.survive(&name, Reason::TooDeep);
        }
        // Directly below the root, another worker may take it: its descriptor is
        // opened and checked exactly as here, and its parent's removal waits for it.
        let (name, fd) = match self.hand_off {
            Some(hand_off) if self.stack.len() == 1 => match hand_off(name, fd) {
                Ok(()) => return,
                Err(back) => back,
            },
            _ => (name, fd),
        };
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
}
