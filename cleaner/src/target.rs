//! Checking a target path and opening it without following any symlink.
//!
//! The target is resolved from `/` by `openat2` with `RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`: a symlink in **any** component (`/scratch/jobs` → `/db` in
//! `/scratch/jobs/tmp`) makes the kernel refuse the whole path, so the walk starts in the
//! directory the path names and nowhere else. Mounts on the way are fine (the target is
//! usually a volume's mount root); the walk below it never crosses one.
//!
//! **Old kernels.** Without `openat2` (Linux < 5.6, or a seccomp profile that answers
//! `ENOSYS`) the program refuses to clean and says so: fail closed. A fallback with
//! `O_NOFOLLOW` plus mount-id checks on every step would be a second walker to get right
//! and to test; every Kubernetes node OS still supported runs 5.6 or later.

use std::os::fd::OwnedFd;

use rustix::fs::{openat2, statat, AtFlags, FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::{retry_on_intr, Errno};

use crate::report::escape;

/// Flags for every directory the cleaner opens.
pub(crate) const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Why a target is not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotOpened {
    Missing,
    Skipped(String),
}

/// The defence in depth the webhook already applies (docs/DESIGN.md#targets): absolute, normalized
/// (no `.`, `..`, `//`, trailing `/`), not `/`, no NUL byte. `Err` is the reason.
pub fn check_target(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("not an absolute path");
    }
    if path == "/" {
        return Err("the root directory is never a target");
    }
    if path.ends_with('/') {
        return Err("not normalized (trailing /)");
    }
    if path.contains('\0') {
        return Err("contains a NUL byte");
    }
    for component in path[1..].split('/') {
        match component {
            "" => return Err("not normalized (//)"),
            "." | ".." => return Err("not normalized (. or .. component)"),
            _ => {}
        }
    }
    Ok(())
}

/// Opens the target directory, refusing any symlink on the way.
pub(crate) fn open_target(path: &str) -> Result<OwnedFd, NotOpened> {
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let mut err = Errno::AGAIN;
    // EAGAIN: the kernel saw a rename or mount race during the lookup; try again.
    for _ in 0..3 {
        match retry_on_intr(|| openat2(CWD, path, DIR_FLAGS, Mode::empty(), resolve)) {
            Ok(fd) => return Ok(fd),
            Err(Errno::AGAIN) => continue,
            Err(other) => {
                err = other;
                break;
            }
        }
    }
    Err(explain(err, path))
}

/// What an `openat2` error on the target means for it.
fn explain(err: Errno, path: &str) -> NotOpened {
    match err {
        Errno::NOENT => NotOpened::Missing,
        Errno::LOOP => NotOpened::Skipped(match first_of(path, FileType::Symlink) {
            Some(link) => format!("{} is a symlink", escape(link.as_bytes())),
            None => "a component of the path is a symlink".into(),
        }),
        // O_DIRECTORY | O_NOFOLLOW on a final symlink is ENOTDIR, too.
        Errno::NOTDIR => NotOpened::Skipped(match first_not_dir(path) {
            Some((link, FileType::Symlink)) => format!("{} is a symlink", escape(link.as_bytes())),
            Some((file, _)) => format!("{} is not a directory", escape(file.as_bytes())),
            None => "not a directory".into(),
        }),
        Errno::NOSYS => NotOpened::Skipped(
            "this kernel has no openat2 (Linux 5.6 or later is needed, or seccomp blocks it): \
             refusing to clean without it"
                .into(),
        ),
        err => NotOpened::Skipped(format!("cannot open it: {}", std::io::Error::from(err))),
    }
}

/// The first prefix of `path` that is of `kind` (for the message only: the refusal itself
/// is the kernel's).
fn first_of(path: &str, kind: FileType) -> Option<&str> {
    prefixes(path).find(|prefix| {
        statat(CWD, *prefix, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == kind)
    })
}

fn first_not_dir(path: &str) -> Option<(&str, FileType)> {
    prefixes(path).find_map(|prefix| {
        let st = statat(CWD, prefix, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        let kind = FileType::from_raw_mode(st.st_mode);
        (kind != FileType::Directory).then_some((prefix, kind))
    })
}

/// `/a/b/c` → `/a`, `/a/b`, `/a/b/c`.
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .skip(1)
        .map(|(i, _)| &path[..i])
        .chain(std::iter::once(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_normalized_absolute_paths_are_targets() {
        for good in ["/scratch", "/a b/-x", "/s/\n", "/s/...", "/s/.x"] {
            assert_eq!(check_target(good), Ok(()), "{good:?}");
        }
        for bad in [
            "", "/", "scratch", "./s", "/s/", "//s", "/s//t", "/s/.", "/s/./t", "/s/..", "/s/../t",
            "/s\0",
        ] {
            assert!(check_target(bad).is_err(), "{bad:?}");
        }
    }

    /// Without openat2 (Linux < 5.6, or seccomp answering ENOSYS) nothing is cleaned.
    #[test]
    fn old_kernels_are_refused_with_a_reason() {
        let NotOpened::Skipped(why) = explain(Errno::NOSYS, "/scratch") else {
            panic!("ENOSYS must skip the target");
        };
        assert!(
            why.contains("no openat2") && why.contains("refusing"),
            "{why}"
        );
        assert_eq!(explain(Errno::NOENT, "/scratch"), NotOpened::Missing);
        assert!(matches!(
            explain(Errno::ACCESS, "/scratch"),
            NotOpened::Skipped(_)
        ));
    }

    #[test]
    fn prefixes_of_a_path() {
        assert_eq!(
            prefixes("/a/b/c").collect::<Vec<_>>(),
            ["/a", "/a/b", "/a/b/c"]
        );
        assert_eq!(prefixes("/a").collect::<Vec<_>>(), ["/a"]);
    }
}
