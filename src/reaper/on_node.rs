//! Resolving host paths on the node, confined to the node's root (`--node-root`, the
//! node's `/` mounted read-only in the reaper).
//!
//! A pod's use is resolved as the kubelet's mount resolves it: following symlinks, but
//! with `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)` from the node root's
//! descriptor, so an absolute symlink on the node (`/data/cache -> /mnt/scratch/job`) is
//! resolved against the node's `/`, never the reaper's, and `..` never leaves it. The
//! candidate itself is opened without following any symlink (the walk does the same).
//! Each directory's lineage ([`Lineage`]) is then collected by climbing `..` from its
//! descriptor to the node root's identity: the kernel's answer, not a spelling. And its
//! place in its filesystem ([`Place`]: its mount, by the mount id `statx` gives, and that
//! mount's root in the reaper's mountinfo), for a bind mount of a subdirectory, whose
//! `..` climbs the mount tree instead.

use super::in_use::{self, is_at_or_below, Mount};
use super::reach::{Identity, Lineage, Place, Reach};
use prestop_clean::resolve_prefix;
use rustix::fs::{
    fstat, openat, openat2, statx, AtFlags, FileType, Mode, OFlags, ResolveFlags, StatxFlags, CWD,
};
use rustix::io::Errno;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// More `..` steps than any real path has: a climb that never meets the node's root.
const MAX_DEPTH: usize = 4096;

/// `openat2` answers EAGAIN when a rename raced with a `..` in the path: try again.
const RETRIES: usize = 8;

/// The node's `/`, opened.
#[derive(Debug)]
pub struct NodeRoot {
    path: PathBuf,
    fd: OwnedFd,
    id: Identity,
    /// The reaper's mounts (the node's, below the node root), by mount id, read once a
    /// round.
    mounts: HashMap<u64, Mount>,
    /// Directory → its ancestors up to the node root, as climbed this round: the uses of
    /// one round share most of their parents (`/mnt/scratch` for every pod of a Job).
    climbed: RefCell<HashMap<Identity, Vec<Identity>>>,
}

/// Why a host path is not one directory of the node under its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exact {
    /// The directory, and its lineage.
    Directory(Lineage),
    /// Missing on the node: nothing there for the walk to empty, if the reaper's view
    /// agrees (the caller checks). A symlink or a file on its way is not absent: it is
    /// an error (`in_use_unknown`), never "not in use" (issue 32, finding 1).
    Absent,
}

impl NodeRoot {
    /// Opens the node's root; the error is the sentence for the log.
    pub fn open(path: &Path) -> Result<NodeRoot, String> {
        let unusable = |error: Errno| {
            format!(
                "the node's root {} (--node-root) cannot be opened ({error}), so the reaper \
                 cannot see which pods reach the directory",
                path.display()
            )
        };
        let fd = openat(CWD, path, dir_flags(), Mode::empty()).map_err(unusable)?;
        let id = identity(&fd).map_err(unusable)?;
        let mountinfo = std::fs::read("/proc/self/mountinfo")
            .map_err(|error| format!("cannot read the reaper's mounts: {error}"))?;
        let mounts = in_use::parse(&mountinfo)
            .into_iter()
            .map(|mount| (mount.id, mount))
            .collect();
        Ok(NodeRoot {
            path: path.to_path_buf(),
            fd,
            id,
            mounts,
            climbed: RefCell::new(HashMap::new()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory at `host_path` on the node, no symlink followed at any component:
    /// the one the walk would empty.
    pub fn exact(&self, host_path: &str) -> Result<Exact, String> {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match self.open_in(host_path, dir_flags(), how) {
            Ok(fd) => self
                .lineage(fd)
                .map(Exact::Directory)
                .map_err(|error| self.failed(host_path, error)),
            Err(Errno::NOENT) => Ok(Exact::Absent),
            Err(error @ (Errno::LOOP | Errno::XDEV)) => Err(format!(
                "{}; the directory itself is opened without following any symlink below its \
                 allowed prefix",
                self.failed(host_path, error)
            )),
            Err(error) => Err(self.failed(host_path, error)),
        }
    }

    /// `host_path` with its allowed prefix (the longest of `prefixes` it is below)
    /// replaced by where that prefix really is on the node ([`resolve_prefix`]: root's
    /// links in root-only directories, nothing below the prefix). Outside every prefix,
    /// itself.
    pub fn real_path(&self, prefixes: &[String], host_path: &str) -> Result<String, String> {
        let prefix = prefixes
            .iter()
            .map(|prefix| match prefix.trim_end_matches('/') {
                "" => "/",
                trimmed => trimmed,
            })
            .filter(|prefix| is_at_or_below(host_path.as_bytes(), prefix.as_bytes()))
            .max_by_key(|prefix| prefix.len());
        let Some(prefix) = prefix else {
            return Ok(host_path.to_owned());
        };
        let real = resolve_prefix(self.fd.as_fd(), prefix.as_bytes())
            .map_err(|why| format!("{why} (in the node's root {})", self.path.display()))?;
        let real = String::from_utf8(real).map_err(|_| {
            format!("the allowed prefix {prefix} resolves to a name that is not UTF-8")
        })?;
        // Only root makes the links followed, but none may lead into the node's own
        // directories (an operator's `/mnt/disk -> /run`): the list the webhook and the
        // node agent apply, to where the prefix really is.
        if let Some(entry) = prestop_clean::protected::protected_entry_of(&real) {
            return Err(format!(
                "the allowed prefix {prefix} is {real} on the node, which meets the protected \
                 host directory {entry}"
            ));
        }
        let rest = if prefix == "/" {
            host_path
        } else {
            &host_path[prefix.len()..]
        };
        Ok(match (real.as_str(), rest) {
            ("/", _) => rest.to_owned(),
            (_, "" | "/") => real,
            _ => format!("{real}{rest}"),
        })
    }

    /// What a pod's use of `host_path` reaches now, symlinks followed inside the node's
    /// root.
    pub fn resolve(&self, host_path: &str) -> Reach {
        let how = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let fd = match self.open_in(host_path, flags, how) {
            Ok(fd) => fd,
            // The kubelet would create a new directory there (DirectoryOrCreate), or fail
            // to start the pod: a new directory is not the candidate, which exists.
            Err(Errno::NOENT) => {
                return Reach::Nothing(
                    "does not exist on the node: a directory made there later is a new one".into(),
                );
            }
            // A file where a directory is needed on the way: the kubelet cannot mount it.
            Err(Errno::NOTDIR) => {
                return Reach::Nothing("has a file where a directory must be".into())
            }
            Err(error) => return Reach::Unknown(self.failed(host_path, error)),
        };
        let lineage = match fstat(&fd).map(|stat| FileType::from_raw_mode(stat.st_mode)) {
            Ok(FileType::Directory) => self.lineage(fd),
            Ok(_) => self.file_lineage(host_path, &fd),
            Err(error) => Err(error),
        };
        match lineage {
            Ok(lineage) => Reach::Directory(lineage),
            Err(error) => Reach::Unknown(self.failed(host_path, error)),
        }
    }

    /// A use that is a file (a socket, a config file): its own identity, then its
    /// directory's lineage. Only when its last component is not a symlink; a symlink to
    /// a file elsewhere cannot be placed without a spelling, so it is unknown.
    fn file_lineage(&self, host_path: &str, file: &OwnedFd) -> Result<Lineage, Errno> {
        let (parent, name) = host_path.rsplit_once('/').unwrap_or(("", host_path));
        let how = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        let dir = self.open_in(parent, dir_flags(), how)?;
        let own = openat2(
            &dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
        )?;
        let id = identity(file)?;
        if identity(&own)? != id {
            return Err(Errno::LOOP);
        }
        let mut ids = vec![id];
        ids.extend_from_slice(self.lineage(dir)?.ids());
        Lineage::new(ids, self.place(file)?).ok_or(Errno::INVAL)
    }

    /// Where `fd` is in its filesystem: the root of its mount (by the mount id the kernel
    /// gives for it) joined with the rest of its path below that mount's point.
    fn place(&self, fd: &OwnedFd) -> Result<Place, Errno> {
        let mount_id = statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)?.stx_mnt_id;
        let mount = self.mounts.get(&mount_id).ok_or(Errno::NODEV)?;
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|error| Errno::from_io_error(&error).unwrap_or(Errno::IO))?;
        let path = link.as_os_str().as_bytes();
        if !is_at_or_below(path, &mount.point) {
            return Err(Errno::NODEV);
        }
        let rest = if mount.point == b"/" {
            path
        } else {
            &path[mount.point.len()..]
        };
        let mut place = mount.root.clone();
        if place.last() == Some(&b'/') {
            place.pop();
        }
        place.extend_from_slice(rest);
        if place.is_empty() {
            place.push(b'/');
        }
        Ok(Place {
            fs: mount.dev,
            path: place,
        })
    }

    fn open_in(&self, host_path: &str, flags: OFlags, how: ResolveFlags) -> Result<OwnedFd, Errno> {
        let relative = match host_path.trim_start_matches('/') {
            "" => ".",
            relative => relative,
        };
        let mut tries = 0;
        loop {
            match openat2(&self.fd, relative, flags, Mode::empty(), how) {
                Err(Errno::AGAIN) if tries < RETRIES => tries += 1,
                other => return other,
            }
        }
    }

    /// `fd`'s identity, then each parent's, up to the node's root.
    fn lineage(&self, fd: OwnedFd) -> Result<Lineage, Errno> {
        let place = self.place(&fd)?;
        let mut ids = vec![identity(&fd)?];
        let mut current = fd;
        while ids.last() != Some(&self.id) {
            let last = ids[ids.len() - 1];
            if let Some(above) = self.climbed.borrow().get(&last) {
                ids.extend_from_slice(above);
                break;
            }
            let parent = openat(&current, "..", dir_flags(), Mode::empty())?;
            let id = identity(&parent)?;
            // `..` of the reaper's own root is itself: the climb left the node's root
            // without meeting it.
            if id == last || ids.len() > MAX_DEPTH {
                return Err(Errno::XDEV);
            }
            ids.push(id);
            current = parent;
        }
        let mut climbed = self.climbed.borrow_mut();
        for (at, id) in ids.iter().enumerate() {
            climbed.entry(*id).or_insert_with(|| ids[at + 1..].to_vec());
        }
        drop(climbed);
        Lineage::new(ids, place).ok_or(Errno::INVAL)
    }

    fn failed(&self, host_path: &str, error: Errno) -> String {
        let why = match error {
            Errno::LOOP => "too many symlinks, or a symlink where none may be".to_owned(),
            Errno::XDEV => "the climb to the node's root did not reach it".to_owned(),
            Errno::NOSYS => "the kernel has no openat2 (Linux 5.6)".to_owned(),
            Errno::NODEV => "its mount is not in the reaper's mountinfo".to_owned(),
            error => error.to_string(),
        };
        format!(
            "cannot be resolved on the node at {}: {why}",
            self.path.join(host_path.trim_start_matches('/')).display()
        )
    }
}

fn dir_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// `(st_dev, st_ino)` of an open file.
pub fn identity(fd: impl AsFd) -> Result<Identity, Errno> {
    let stat = fstat(fd)?;
    #[allow(clippy::unnecessary_cast)] // u64 on 64-bit targets, not on every target
    Ok((stat.st_dev as u64, stat.st_ino as u64))
}
