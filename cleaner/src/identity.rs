//! The run-time identity check (docs/DESIGN.md#identity-is-checked-on-the-node): before
//! the program empties a target, it establishes that the directory it opened *is* the
//! node's directory at the expected host path — the whole path, resolved on the node
//! without following a symlink —, not merely one whose name ends the same way.
//!
//! Names on a node lie — a symlink in `hostPath.path` or `subPath`, a bind-mount alias, a
//! PV whose directory lies inside the target. For the target's opened descriptor:
//! 1. Its mount: the `/proc/self/mountinfo` entry whose mount point is the longest
//!    path-prefix of the target (the last, i.e. topmost, among equal mount points),
//!    confirmed by identity: its mount id is the descriptor's (`statx` `STATX_MNT_ID`,
//!    Linux 5.8+, else `/proc/self/fdinfo`), its `major:minor` is the descriptor's
//!    `st_dev`, and so is the mount point's. Any doubt refuses. The mount id is what
//!    makes a mount swapped at the target's path between the open and the reading of
//!    mountinfo harmless: the line read must be the opened descriptor's own mount.
//! 2. The expected host path `H` (`--host`, `$(VAR)` expanded from our environment as
//!    the kubelet expands a `subPathExpr`, normalized) is established by one of:
//!    - **the node's word**: with `--node-agent`, the agent ([`crate::agent`]) resolves
//!      the whole `H` from the node's root without following any symlink and answers
//!      `same` only when that directory's `(st_dev, st_ino)` is the descriptor's. Its
//!      `differs` or `refused` skips the target with its sentence, never falling back.
//!      The agent answers `same` only when, besides, no other container on the node uses
//!      the directory (issue 31); its `in-use` skips the target too.
//!    - **the strict rule**, when there is no agent or it cannot be reached: `H` must end
//!      with the target's suffix below the mount point, and what is left, `H_mount`, must
//!      *equal* the mount's `root` (component by component). That holds only for a host
//!      directory of the filesystem mounted at the node's `/`, which is all that a mount
//!      table read inside a container can vouch for: a `root` that is merely a tail of
//!      `H_mount` is what a symlink planted on the node, or a prefix that is its own
//!      filesystem, shows, and the two cannot be told apart without the node.
//!
//!    Either way a root of `/` is a whole filesystem (a disk, a tmpfs, COS's stateful
//!    partition): refused unless the target carries `--whole-filesystem` (the webhook
//!    sets it only for a host path that is exactly an allowed prefix), and, without the
//!    agent, unless `H_mount` is `/` itself.
//! 3. Other mounts of the container: the `(st_dev, st_ino)` of each one's root (its mount
//!    point, stat'ed without following a symlink, and confirmed to be that mount by its
//!    mount id). The target must not be one of them, and the walk never enters one. A
//!    mount whose root cannot be stat'ed that way (hidden under another mount, or not
//!    reachable) is compared by its `root` field instead: on our filesystem and inside the
//!    target refuses the target, as the walk could not recognise it.
//!
//! Every refusal is one sentence naming what was expected and what the node shows.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;

use rustix::fs::{fstat, major, minor, statx, AtFlags, StatxFlags, CWD};

use crate::agent::{self, Verdict};
use crate::argv::Target;
use crate::expand::expand;
use crate::mountinfo::{self, MountEntry};
use crate::report::escape;

mod without_agent;

use without_agent::{whole_filesystem_allowed, without_the_node};

/// Where the program reads the container's mounts.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// The roots of the container's other mounts, by `(st_dev, st_ino)`, with the mount
/// point each was seen at (for messages).
pub(crate) type OtherMounts = HashMap<(u64, u64), Vec<u8>>;

/// Where the operator reads what the node agent adds (named in refusals).
pub(crate) const AGENT_DOCS: &str = "docs/INSTALL.md, \"The node agent\"";

/// Why a restartable pod needs the node's word (`--restartable`, issue 31).
const RESTARTS_IN_PLACE: &str = "the kubelet can restart this pod in place (a sandbox \
    recreation stops every container as the pod's end does, then starts them again on the \
    same volumes), so it is emptied only on the node's word that the pod is ending";

/// Checks the opened target `fd` (opened from `target.path`) against its expected
/// identity, asking the node agent (`question`) when it has a socket; returns the other
/// mounts' roots for the walk, or why the target is refused.
pub(crate) fn check(
    target: &Target,
    fd: BorrowedFd<'_>,
    lookup: &dyn Fn(&str) -> Option<String>,
    question: agent::Question<'_>,
) -> Result<Checked, String> {
    let host = expected_host(target, lookup)?;
    let text = std::fs::read(MOUNTINFO)
        .map_err(|err| format!("cannot read {MOUNTINFO} to check the target's identity: {err}"))?;
    let entries = mountinfo::parse(&text)?;
    let st = fstat(fd).map_err(|err| format!("cannot stat the opened target: {err}"))?;
    let dev = (major(st.st_dev), minor(st.st_dev));
    let path = target.path.as_bytes();
    let mount = find_mount(&entries, path)
        .ok_or_else(|| format!("no mount in {MOUNTINFO} holds the target"))?;
    let at = escape(&mount.mount_point);
    // The descriptor's own mount: what ties the line we read to what we opened (the
    // path may show another mount by now). statx (Linux 5.8+), else fdinfo (3.15+).
    let id = mount_id(statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID))
        .or_else(|| fdinfo_mount_id(fd))
        .ok_or("cannot learn the opened target's mount id (statx, /proc/self/fdinfo)")?;
    if id != mount.id {
        return Err(format!(
            "the opened target is on mount {id}, but {MOUNTINFO} shows mount {} at {at} \
             (it changed while the program ran)",
            mount.id
        ));
    }
    if (mount.major, mount.minor) != dev {
        return Err(format!(
            "the opened target is on device {}:{}, but the mount at {at} is {}:{}",
            dev.0, dev.1, mount.major, mount.minor
        ));
    }
    let point_dev = rustix::fs::statat(CWD, &mount.mount_point[..], AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|err| format!("cannot stat the mount point {at}: {err}"))?
        .st_dev;
    if point_dev != st.st_dev {
        return Err(format!(
            "the mount point {at} is not on the opened target's device"
        ));
    }
    let suffix = suffix_below(path, &mount.mount_point)
        .ok_or_else(|| format!("the mount point {at} is not a prefix of the target"))?;
    // Issue 31: a pod the kubelet can restart in place is emptied only on the node's word
    // that it is ending; without an agent there is nobody to say it.
    if question.pod_ending && question.socket.is_none() {
        return Err(format!(
            "{RESTARTS_IN_PLACE}, and no node agent is configured ({AGENT_DOCS})"
        ));
    }
    // A `same` holds from the instant it was asked for ([`crate::hold`]'s lease): the
    // first attempt's, so that waiting out a `busy` agent only shortens it.
    let asked = std::time::Instant::now();
    let verdict = question.ask(&host, fd);
    let cleared_by_agent = matches!(verdict, Some(Verdict::Same));
    match verdict {
        Some(Verdict::Same) => whole_filesystem_allowed(&host, mount, target.whole_filesystem)?,
        Some(Verdict::Differs(why)) => {
            // `why` holds no control character (agent::parse_answer): one line of ours.
            // The agent names only this pod's own directory; what this container's own
            // mount table shows is the pod's to say, and tells the operator where the
            // kubelet's mount really led.
            return Err(format!(
                "the node agent says the opened target is not the node's {}: {why}; this \
                 container's mount at {} shows {} of filesystem {}:{}",
                escape(host.as_bytes()),
                escape(&mount.mount_point),
                escape(&mount.root),
                mount.major,
                mount.minor
            ));
        }
        Some(Verdict::InUse(why)) => {
            return Err(format!("the node agent says: {why}"));
        }
        Some(Verdict::NotEnding(why)) => {
            return Err(format!("{RESTARTS_IN_PLACE}; the node agent says: {why}"));
        }
        Some(Verdict::Unreachable(why)) if question.pod_ending => {
            return Err(format!(
                "{RESTARTS_IN_PLACE}; the node agent was not reachable: {why}"
            ));
        }
        Some(Verdict::Refused(why)) => {
            return Err(format!(
                "the node agent says the opened target is not the node's {}: {why}",
                escape(host.as_bytes())
            ));
        }
        // `ask` turns a `busy` that outlasted its patience into a refusal; never clean on it.
        Some(Verdict::Busy) => {
            return Err(format!(
                "the node agent was busy and did not judge the node's {}",
                escape(host.as_bytes())
            ));
        }
        Some(Verdict::Unreachable(why)) => {
            without_the_node(&host, suffix, mount, &entries, target.whole_filesystem)
                .map_err(|refusal| format!("{refusal}; the node agent was not reachable: {why}"))?
        }
        None => without_the_node(&host, suffix, mount, &entries, target.whole_filesystem)?,
    }
    let mut tree = if mount.root == b"/" {
        Vec::new()
    } else {
        mount.root.clone()
    };
    tree.extend_from_slice(suffix);
    let others = other_mounts(&entries, mount, &tree)?;
    if let Some(other) = others.get(&(st.st_dev, st.st_ino)) {
        return Err(format!(
            "the target is also the root of another mount of the container, at {}",
            escape(other)
        ));
    }
    Ok(Checked {
        others,
        host,
        cleared_by_agent,
        asked,
    })
}

/// What [`check`] established for the walk.
pub(crate) struct Checked {
    /// The container's other mounts inside the target: never entered.
    pub others: OtherMounts,
    /// The host path the agent was asked about.
    pub host: String,
    /// The node agent answered `same`: the walk asks it again while it runs
    /// ([`crate::hold`]).
    pub cleared_by_agent: bool,
    /// When the agent was asked.
    pub asked: std::time::Instant,
}

/// `--host`, expanded and normalized as the kubelet joins a host path (empty and `.`
/// segments dropped); `..` or a relative result is refused.
pub(crate) fn expected_host(
    target: &Target,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let Some(host) = &target.host else {
        return Err(
            "no expected host path (--host): the hook was injected by an older \
                    prestop-injector, which the program no longer trusts; re-create the pod"
                .to_owned(),
        );
    };
    let expanded = expand(host, lookup).map_err(|why| format!("expected host path {why}"))?;
    if !expanded.starts_with('/') {
        return Err(format!(
            "expected host path {} is not absolute",
            escape(expanded.as_bytes())
        ));
    }
    let mut normalized = String::with_capacity(expanded.len());
    for segment in expanded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "expected host path {} has a .. segment",
                    escape(expanded.as_bytes())
                ))
            }
            segment => {
                normalized.push('/');
                normalized.push_str(segment);
            }
        }
    }
    if normalized.is_empty() {
        normalized.push('/');
    }
    Ok(normalized)
}

/// The mount `path` is in: the longest mount point that is a path-prefix of it, the last
/// listed (the top of the stack) among equal ones.
pub(crate) fn find_mount<'e>(entries: &'e [MountEntry], path: &[u8]) -> Option<&'e MountEntry> {
    let mut best: Option<&MountEntry> = None;
    for entry in entries {
        if suffix_below(path, &entry.mount_point).is_some()
            && best.is_none_or(|b| entry.mount_point.len() >= b.mount_point.len())
        {
            best = Some(entry);
        }
    }
    best
}

/// `path` minus `base`, component-wise: `""` when equal, `/x…` when below, `None` when
/// `path` is not at or below `base`.
pub(crate) fn suffix_below<'p>(path: &'p [u8], base: &[u8]) -> Option<&'p [u8]> {
    if base == b"/" {
        return path.starts_with(b"/").then_some(path);
    }
    let rest = path.strip_prefix(base)?;
    (rest.is_empty() || rest.starts_with(b"/")).then_some(rest)
}

/// Rule 3: the roots of every mount but `ours`; `tree` is the target's directory as a
/// path of its filesystem (`ours`'s root + the suffix).
fn other_mounts(
    entries: &[MountEntry],
    ours: &MountEntry,
    tree: &[u8],
) -> Result<OtherMounts, String> {
    let mut roots = OtherMounts::new();
    for entry in entries.iter().filter(|e| e.id != ours.id) {
        let seen = statx(
            CWD,
            &entry.mount_point[..],
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::BASIC_STATS | StatxFlags::MNT_ID,
        );
        let confirmed = seen.as_ref().ok().filter(|stx| match mount_id(Ok(**stx)) {
            Some(id) => id == entry.id,
            // No mount ids (Linux < 5.8): at least the device must be that mount's.
            None => (stx.stx_dev_major, stx.stx_dev_minor) == (entry.major, entry.minor),
        });
        if let Some(stx) = confirmed {
            let dev = rustix::fs::makedev(stx.stx_dev_major, stx.stx_dev_minor);
            roots.insert((dev, stx.stx_ino), entry.mount_point.clone());
            continue;
        }
        // Hidden or unreachable: the walk could not recognise its root, so it must not
        // lie inside the target (same filesystem, root at or below the target's).
        let same_fs = (entry.major, entry.minor) == (ours.major, ours.minor);
        let inside = tree.is_empty() || suffix_below(&entry.root, tree).is_some();
        if same_fs && inside {
            return Err(format!(
                "another mount of the container, at {}, shows {} inside the target, and its \
                 root cannot be identified ({})",
                escape(&entry.mount_point),
                escape(&entry.root),
                match seen {
                    Err(err) => err.to_string(),
                    Ok(_) => "another mount hides it".to_owned(),
                }
            ));
        }
    }
    Ok(roots)
}

/// `mnt_id:` of `/proc/self/fdinfo/FD`.
fn fdinfo_mount_id(fd: BorrowedFd<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|id| id.trim().parse().ok())
}

fn mount_id(stx: rustix::io::Result<rustix::fs::Statx>) -> Option<u64> {
    let stx = stx.ok()?;
    StatxFlags::from_bits_retain(stx.stx_mask)
        .contains(StatxFlags::MNT_ID)
        .then_some(stx.stx_mnt_id)
}

#[cfg(test)]
mod tests;
