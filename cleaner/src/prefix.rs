//! Where an allowed prefix really is on the node (issue 32, finding 1).
//!
//! On RHCOS and Fedora CoreOS `/mnt` is a symlink to `var/mnt`; elsewhere `/mnt/scratch`
//! is often a symlink to a data disk. That is the operator's layout, not an attack, and
//! the kubelet follows it when it mounts a hostPath. So the prefix itself is resolved
//! once, by one rule that every part of the project applies (the reaper now; the node
//! agent and the cleaners later), and nothing *below* the prefix is ever followed.
//!
//! The rule: a symlink on the prefix's way is followed only when root owns it **and** the
//! directory that holds it is owned by root and writable by no one else (no group or
//! other write bit, so not `/tmp`'s `1777` either). Anything else is a refusal naming
//! the component and why. Such a link can be changed only by root, who can change the
//! node anyway.
//!
//! Races: every step works on descriptors (`O_PATH | O_NOFOLLOW`): the link whose owner
//! was checked is the very link read (`readlinkat(fd, "")`), and the directory whose mode
//! was checked is the one the link is in. The answer is a path without symlinks; it is
//! opened again from the root with `RESOLVE_NO_SYMLINKS` and must be the directory the
//! resolution ended on (device and inode), so a component renamed or swapped meanwhile
//! is a refusal, never another directory.

use rustix::fs::{fstat, openat, openat2, readlinkat, FileType, Mode, OFlags, ResolveFlags, Stat};
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// As the kernel's own limit (`MAXSYMLINKS`): more is a loop.
const MAX_LINKS: usize = 40;

/// The real path, below the node's root `root`, of the allowed prefix `prefix` (an
/// absolute path as the configuration spells it), following only the links the module
/// docs allow. `Err` is a sentence: which component, and why it is not followed.
pub fn resolve_prefix(root: BorrowedFd<'_>, prefix: &[u8]) -> Result<Vec<u8>, String> {
    let shown = String::from_utf8_lossy(prefix).into_owned();
    let refuse = |why: String| format!("the allowed prefix {shown} cannot be resolved: {why}");
    if prefix.first() != Some(&b'/') {
        return Err(refuse("it is not absolute".into()));
    }
    let mut pending: VecDeque<Vec<u8>> = components(prefix).collect();
    // The resolved components and a descriptor of each (the root's is `root`).
    let mut names: Vec<Vec<u8>> = Vec::new();
    let mut dirs: Vec<OwnedFd> = Vec::new();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == b".." {
            names.pop();
            dirs.pop();
            continue;
        }
        let here = dirs.last().map_or(root, |fd| fd.as_fd());
        let at = || display(&names, &name);
        let fd = openat(
            here,
            name.as_slice(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|error| refuse(format!("{}: {error}", at())))?;
        let stat = fstat(&fd).map_err(|error| refuse(format!("{}: {error}", at())))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                names.push(name);
                dirs.push(fd);
            }
            FileType::Symlink => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(refuse(format!("more than {MAX_LINKS} symlinks (a loop)")));
                }
                if stat.st_uid != 0 {
                    return Err(refuse(format!(
                        "{} is a symlink owned by uid {}, not root",
                        at(),
                        stat.st_uid
                    )));
                }
                let holder = fstat(here).map_err(|error| refuse(format!("{}: {error}", at())))?;
                if let Some(why) = writable_by_others(&holder) {
                    return Err(refuse(format!(
                        "{} is a symlink in {}, which {why}",
                        at(),
                        display(&names, b"")
                    )));
                }
                let target = readlinkat(&fd, "", Vec::new())
                    .map_err(|error| refuse(format!("{}: {error}", at())))?
                    .into_bytes();
                if target.first() == Some(&b'/') {
                    names.clear();
                    dirs.clear();
                }
                for part in components(&target).rev() {
                    pending.push_front(part);
                }
            }
            _ => return Err(refuse(format!("{} is not a directory", at()))),
        }
    }
    let real = display(&names, b"").into_bytes();
    // Every step was a directory of the moment; the answer must still be that directory,
    // reached without any symlink (a swap or rename meanwhile refuses).
    let end = dirs.last().map_or(root, |fd| fd.as_fd());
    let relative: &[u8] = if names.is_empty() { b"." } else { &real[1..] };
    let again = openat2(
        root,
        relative,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|error| {
        refuse(format!(
            "{} changed while it was resolved ({error})",
            String::from_utf8_lossy(&real)
        ))
    })?;
    let same = |a: &Stat, b: &Stat| (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino);
    let (now, then) = (fstat(&again), fstat(end));
    match (now, then) {
        (Ok(now), Ok(then)) if same(&now, &then) => Ok(real),
        _ => Err(refuse(format!(
            "{} changed while it was resolved",
            String::from_utf8_lossy(&real)
        ))),
    }
}

/// Why a directory holding a symlink is not root's alone, if it is not.
fn writable_by_others(dir: &Stat) -> Option<String> {
    if dir.st_uid != 0 {
        Some(format!("uid {} owns", dir.st_uid))
    } else if dir.st_mode & 0o022 != 0 {
        Some(format!(
            "others may write (mode {:04o})",
            dir.st_mode & 0o7777
        ))
    } else {
        None
    }
}

/// The non-empty, non-`.` components of a path.
fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = Vec<u8>> + '_ {
    path.split(|&b| b == b'/')
        .filter(|part| !part.is_empty() && *part != b".")
        .map(<[u8]>::to_vec)
}

/// `/a/b` (+ `/name` when not empty), for the answer and the messages.
fn display(names: &[Vec<u8>], name: &[u8]) -> String {
    let mut path = Vec::new();
    for part in names
        .iter()
        .map(Vec::as_slice)
        .chain((!name.is_empty()).then_some(name))
    {
        path.push(b'/');
        path.extend_from_slice(part);
    }
    if path.is_empty() {
        path.push(b'/');
    }
    String::from_utf8_lossy(&path).into_owned()
}
