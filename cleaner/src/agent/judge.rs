//! The agent's one decision: may the pod empty the directory it sent, now? That is two
//! questions, both answered from the node: is it the node's directory at the host path it
//! names (`same`, else `differs`), and does no other container on the node reach it, by
//! any name, above it or below it ([`crate::in_use`], the reaper's own check; else
//! `in-use`)?
//!
//! What the pod is told speaks only of what the pod already has: its own directory, the
//! path it asked about, the prefixes. What the node holds at that path when it is *not*
//! the pod's directory — nothing, a file, a symlink, which component, another inode — is
//! none of the pod's business: a tenant could map another uid's `0700` directory with it
//! (issue 32, the oracle). That sentence goes to the agent's log, for the operator.

use std::os::fd::BorrowedFd;
use std::path::Path;

use rustix::fs::{fstat, major, minor, openat2, statat, AtFlags, FileType, Mode, OFlags};
use rustix::fs::{ResolveFlags, Stat};
use rustix::io::{retry_on_intr, Errno};

use std::os::unix::ffi::OsStrExt as _;

use super::peer::{self, Peer};
use super::protocol::{at_or_below, is_normalized, shown};
use super::stats::could_not;
use crate::in_use;
use crate::report::escape;

/// Why the answer is not `same`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSame {
    /// The answer line the pod gets.
    pub answer: String,
    /// What the node holds there, for the agent's log only.
    pub on_the_node: Option<String>,
}

impl From<String> for NotSame {
    fn from(answer: String) -> NotSame {
        NotSame {
            answer,
            on_the_node: None,
        }
    }
}

/// The node as the agent sees it.
pub struct Node<'a> {
    /// `--host-root`, opened.
    pub root: BorrowedFd<'a>,
    /// `--host-root`, as a path in the agent's mount namespace (for its own mountinfo).
    pub root_path: &'a [u8],
    /// `--allow`.
    pub allow: &'a [Vec<u8>],
}

/// `Ok` when `pod` is the node's directory at `host` and no other container on the node
/// uses it; else what to answer and log.
///
/// It answers `same` only when the host path is absolute, normalized, at or below an
/// `--allow` prefix (when any is given), the descriptor lies on no network or FUSE
/// filesystem (known before it is touched: [`peer::filesystem_of`]), the path resolves
/// below the node's root by `openat2(O_PATH | O_DIRECTORY | O_NOFOLLOW, RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` (crossing mounts is allowed: a prefix may
/// be its own disk or tmpfs), and both are directories with equal `(st_dev, st_ino)`.
pub fn judge(
    host: &[u8],
    pod: BorrowedFd<'_>,
    asker: &Peer,
    node: &Node<'_>,
) -> Result<(), NotSame> {
    let (root, allow) = (node.root, node.allow);
    let shown = shown(host);
    if !is_normalized(host) {
        return Err(NotSame::from(format!(
            "refused: the host path {shown} is not absolute and normalized"
        )));
    }
    if !allow.is_empty() && !allow.iter().any(|prefix| at_or_below(host, prefix)) {
        let prefixes: Vec<String> = allow.iter().map(|p| escape(p)).collect();
        return Err(NotSame::from(format!(
            "refused: the host path {shown} is not at or below an allowed prefix ({})",
            prefixes.join(", ")
        )));
    }
    let asker_mounts = peer::mounts_of(asker).map_err(|why| {
        NotSame::from(format!(
            "refused: cannot tell the filesystem of the pod's descriptor for {shown}: {why}"
        ))
    })?;
    match peer::filesystem_of(pod, &asker_mounts) {
        Ok(fs) if peer::is_remote_or_userspace(&fs) => {
            return Err(NotSame::from(format!(
                "refused: the pod's descriptor for {shown} is on a {} filesystem, whose server \
                 may never answer: not judged",
                escape(fs.as_bytes())
            )))
        }
        Ok(_) => {}
        Err(why) => {
            return Err(NotSame::from(format!(
                "refused: cannot tell the filesystem of the pod's descriptor for {shown}: {why}"
            )))
        }
    }
    let pod_st = fstat(pod).map_err(|err| {
        NotSame::from(format!("refused: cannot stat the pod's descriptor: {err}"))
    })?;
    if FileType::from_raw_mode(pod_st.st_mode) != FileType::Directory {
        return Err(NotSame::from(format!(
            "refused: the pod's descriptor for {shown} is {}, not a directory",
            kind(&pod_st)
        )));
    }
    let pods = format!("the pod's directory is {}", identity(&pod_st));
    let differs = |detail: String| NotSame {
        answer: format!(
            "differs: the node's {shown} is not the pod's directory ({pods}); the node \
             agent's log on the node says why"
        ),
        on_the_node: Some(format!("{detail}; {pods}")),
    };
    let (real, prefix) = real_path(host, root, allow).map_err(differs)?;
    on_the_node(host, &real, &pod_st, root).map_err(differs)?;
    let asker = in_use::Asker {
        mount_ids: asker_mounts.iter().map(|m| m.id).collect(),
        sees: asker_mounts
            .iter()
            .map(|m| ((m.major, m.minor), m.root.clone()))
            .collect(),
    };
    let in_agent = |path: &[u8]| match (node.root_path, path) {
        (b"/", path) => path.to_vec(),
        (root, b"/") => root.to_vec(),
        (root, path) => [root, path].concat(),
    };
    let location = in_agent(&real);
    let prefix = prefix.map(|prefix| in_agent(&prefix));
    let candidate = in_use::Candidate {
        location: Path::new(std::ffi::OsStr::from_bytes(&location)),
        dev: (major(pod_st.st_dev), minor(pod_st.st_dev)),
        host_path: &real,
    };
    let prefix = prefix
        .as_deref()
        .map(|prefix| Path::new(std::ffi::OsStr::from_bytes(prefix)));
    let used = in_use::check_for_asker(&candidate, prefix, &asker);
    // The scan read paths, not the descriptor: the directory must still be the pod's after
    // it (a rename of it, or of a directory above it, during the scan would have had it
    // look at another path).
    on_the_node(host, &real, &pod_st, root).map_err(differs)?;
    used.map_err(|busy| busy_answer(&shown, busy))
}

/// The answer when something else may use the node's directory `shown`: a process, or a
/// pod bound to the node whose spec reaches it. It names neither; the log does.
pub(super) fn busy_answer(shown: &str, busy: in_use::Busy) -> NotSame {
    match busy {
        in_use::Busy::InUse(who) => NotSame {
            answer: format!(
                "in-use: another container on the node uses the node's {shown}, a directory \
                 inside it or one above it: nothing is removed, the node reaper empties it \
                 once nobody does"
            ),
            on_the_node: Some(who),
        },
        in_use::Busy::Unknown(why) => NotSame {
            answer: could_not(format_args!(
                "cannot tell whether another container uses the node's {shown}; its log on \
                 the node says why"
            )),
            on_the_node: Some(why),
        },
    }
}

/// Where `host` is on the node: the allowed prefix it lies below (the longest), resolved by
/// the one rule for a prefix behind a symlink ([`crate::prefix::resolve_prefix`]: only
/// root's links in directories only root can write, RHCOS's `/mnt -> var/mnt`), and the
/// rest exactly as spelled, where no symlink is ever followed. Without `--allow`, as
/// spelled.
/// With it, where that prefix is on the node (`None` without `--allow`, or for `/`).
fn real_path(
    host: &[u8],
    root: BorrowedFd<'_>,
    allow: &[Vec<u8>],
) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    let Some(prefix) = allow
        .iter()
        .filter(|prefix| at_or_below(host, prefix))
        .max_by_key(|prefix| prefix.len())
    else {
        return Ok((host.to_vec(), None));
    };
    if prefix.as_slice() == b"/" {
        return Ok((host.to_vec(), None));
    }
    let mut real = crate::prefix::resolve_prefix(root, prefix)?;
    // Only root can make the links followed, but no link may lead into the node's own
    // directories (an operator's `/mnt/disk -> /run`): the webhook's protected list,
    // applied to where the prefix really is.
    if let Some(entry) = std::str::from_utf8(&real)
        .ok()
        .and_then(crate::protected::protected_entry_of)
    {
        return Err(format!(
            "the allowed prefix {} is {} on the node, which meets the protected host \
             directory {entry}",
            escape(prefix),
            escape(&real)
        ));
    }
    let resolved = real.clone();
    let rest = &host[prefix.len()..];
    if real == b"/" && !rest.is_empty() {
        real.clear();
    }
    real.extend_from_slice(rest);
    Ok((real, Some(resolved)))
}

/// `Ok` when the node's directory at `real` (where `host` is on the node) is `pod_st`'s;
/// else what the node has there.
fn on_the_node(
    host: &[u8],
    real: &[u8],
    pod_st: &Stat,
    root: BorrowedFd<'_>,
) -> Result<(), String> {
    let shown = if real == host {
        shown(host)
    } else {
        format!("{} (on the node {})", shown(host), escape(real))
    };
    let host = real;
    let relative: &[u8] = if host == b"/" { b"." } else { &host[1..] };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let mut opened = Err(Errno::AGAIN);
    // EAGAIN: a rename or mount raced the lookup; try again.
    for _ in 0..3 {
        opened = retry_on_intr(|| openat2(root, relative, flags, Mode::empty(), resolve));
        if !matches!(opened, Err(Errno::AGAIN)) {
            break;
        }
    }
    let node = match opened {
        Ok(node) => node,
        // A symlink in the middle is ELOOP (RESOLVE_NO_SYMLINKS); the last one is
        // ENOTDIR (O_NOFOLLOW opens the link itself, which is no directory).
        Err(err @ (Errno::LOOP | Errno::NOTDIR)) => {
            return Err(match first_symlink(host, root) {
                Some(at) if at == host => {
                    format!("the node's {shown} is a symlink on the node")
                }
                Some(at) => format!(
                    "the node's {}, on the way to {shown}, is a symlink on the node",
                    escape(at)
                ),
                None if err == Errno::LOOP => {
                    format!("a component of the node's {shown} is a symlink on the node")
                }
                None => format!(
                    "the node's {shown} is not a directory (or a component of it is \
                     not)"
                ),
            })
        }
        Err(Errno::NOENT) => return Err(format!("the node has no {shown}")),
        Err(err) => return Err(format!("cannot resolve {shown} on the node: {err}")),
    };
    let node_st = fstat(&node).map_err(|err| format!("cannot stat the node's {shown}: {err}"))?;
    if (node_st.st_dev, node_st.st_ino) == (pod_st.st_dev, pod_st.st_ino) {
        Ok(())
    } else {
        Err(format!("the node's {shown} is {}", identity(&node_st)))
    }
}

fn identity(st: &Stat) -> String {
    format!(
        "{}:{} inode {}",
        major(st.st_dev),
        minor(st.st_dev),
        st.st_ino
    )
}

fn kind(st: &Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown type",
    }
}

/// The first prefix of `host` that is a symlink below `root` (for the message only).
fn first_symlink<'h>(host: &'h [u8], root: BorrowedFd<'_>) -> Option<&'h [u8]> {
    let ends = host
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, &b)| b == b'/')
        .map(|(i, _)| i)
        .chain([host.len()]);
    for end in ends {
        let st = statat(root, &host[1..end], AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Some(&host[..end]);
        }
    }
    None
}
