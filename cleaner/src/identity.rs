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

/// Where the program reads the container's mounts.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// The roots of the container's other mounts, by `(st_dev, st_ino)`, with the mount
/// point each was seen at (for messages).
pub(crate) type OtherMounts = HashMap<(u64, u64), Vec<u8>>;

/// Where the operator reads what the node agent adds (named in refusals).
const AGENT_DOCS: &str = "docs/INSTALL.md, \"The node agent\"";

/// Checks the opened target `fd` (opened from `target.path`) against its expected
/// identity, asking the node agent at `node_agent` when given; returns the other mounts'
/// roots for the walk, or why the target is refused.
pub(crate) fn check(
    target: &Target,
    fd: BorrowedFd<'_>,
    lookup: &dyn Fn(&str) -> Option<String>,
    node_agent: Option<&str>,
) -> Result<OtherMounts, String> {
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
    match node_agent.map(|socket| agent::ask(socket, &host, fd)) {
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
    Ok(others)
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

/// Without the node's word, only what a planted link cannot redirect and no other pod can
/// use (issue 31, finding 4): a directory the kubelet created for this pod alone, named
/// by its uid (`subPathExpr: $(POD_UID)`), that passes the strict rule ([`match_host`]).
/// The uid is the kubelet's, read from the container's own mounts of the pod's kubelet
/// directory (`…/pods/<uid>/etc-hosts`, `…/pods/<uid>/containers/…`), never from the
/// environment that expanded the path. A fixed directory may be the one a link planted on
/// the node leads to — another container's root filesystem repeats any path — or one a
/// Job's replacement pod already works in: only the node agent can tell.
fn without_the_node(
    host: &str,
    suffix: &[u8],
    mount: &MountEntry,
    entries: &[MountEntry],
    whole_filesystem: bool,
) -> Result<(), String> {
    // The strict rule first: what it refuses, it refuses with its own sentence.
    match_host(host, suffix, mount, whole_filesystem)?;
    let uid = pod_uid(entries)?;
    let per_pod = host
        .split('/')
        .any(|component| component.contains(uid.as_str()));
    if !per_pod {
        return Err(format!(
            "expected host path {} is not this pod's own directory (no component names the \
             pod's uid {uid}): without the node agent only a per-pod directory \
             (subPathExpr: $(POD_UID)) is cleaned ({AGENT_DOCS})",
            escape(host.as_bytes())
        ));
    }
    Ok(())
}

/// The pod's uid, from the kubelet's own mounts of the pod's directory in the container
/// (`/etc/hosts`, `/dev/termination-log`, emptyDirs, …): exactly one uid, or why not.
fn pod_uid(entries: &[MountEntry]) -> Result<String, String> {
    let mut uids = entries
        .iter()
        .filter_map(|entry| uid_in_kubelet_path(&entry.root));
    let Some(uid) = uids.next() else {
        return Err(
            "cannot learn the pod's uid from the kubelet's mounts (no mount of \
             …/pods/<uid>/etc-hosts or …/pods/<uid>/containers/…): without the node agent \
             nothing is cleaned"
                .to_owned(),
        );
    };
    if let Some(other) = uids.find(|other| *other != uid) {
        return Err(format!(
            "the kubelet's mounts name two pods ({uid} and {other}): without the node agent \
             nothing is cleaned"
        ));
    }
    Ok(uid.to_owned())
}

/// `<uid>` of a mount root `…/pods/<uid>/etc-hosts` or `…/pods/<uid>/containers/…`.
fn uid_in_kubelet_path(root: &[u8]) -> Option<&str> {
    let components: Vec<&str> = std::str::from_utf8(root).ok()?.split('/').collect();
    components.windows(3).rev().find_map(|window| match window {
        ["pods", uid, "etc-hosts" | "containers"] if is_uid(uid) => Some(*uid),
        _ => None,
    })
}

/// A Kubernetes object uid as the API server makes them: 8-4-4-4-12 hex digits.
fn is_uid(text: &str) -> bool {
    text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        })
}

/// Rule 2 without the node's word (the strict rule): `host` ends with `suffix`, and what
/// is left equals the mount's root, component-wise.
pub(crate) fn match_host(
    host: &str,
    suffix: &[u8],
    mount: &MountEntry,
    whole_filesystem: bool,
) -> Result<(), String> {
    let shown = escape(&mount.root);
    let at = escape(&mount.mount_point);
    let host_bytes = host.as_bytes();
    let host_mount = match host_bytes.strip_suffix(suffix) {
        _ if suffix.is_empty() => host_bytes,
        Some(b"") => b"/",
        Some(rest) => rest,
        None => {
            return Err(format!(
                "expected host path {}, but the node mounted {shown} at {at}, \
                 whose path below the mount does not end the expected one",
                escape(host_bytes)
            ))
        }
    };
    if mount.root == b"/" && host_mount != b"/" {
        return Err(format!(
            "expected host path {}, but the node mounted the root of a whole filesystem \
             ({} {}:{}) at {at}: refused, as a prefix that is its own filesystem is \
             cleaned only with the node agent ({AGENT_DOCS})",
            escape(host_bytes),
            mount.fs_type,
            mount.major,
            mount.minor,
        ));
    }
    if mount.root == b"/" {
        // The node's `/` itself (hostPath `/`): whole, so only when allowed.
        return whole_filesystem_allowed(host, mount, whole_filesystem);
    }
    if mount.root == host_mount {
        return Ok(());
    }
    Err(format!(
        "expected host path {}, but the node mounted {shown} at {at}: refused, as {shown} is \
         not {} (a symlink or alias on the node resolved elsewhere, or a prefix that is its \
         own filesystem, which is cleaned only with the node agent: {AGENT_DOCS})",
        escape(host_bytes),
        escape(host_mount)
    ))
}

/// A mount that is the root of a whole filesystem is cleaned only with `--whole-filesystem`,
/// which the webhook sets only for a host path that is exactly an allowed prefix.
fn whole_filesystem_allowed(
    host: &str,
    mount: &MountEntry,
    whole_filesystem: bool,
) -> Result<(), String> {
    if mount.root != b"/" || whole_filesystem {
        return Ok(());
    }
    Err(format!(
        "expected host path {}, but the node mounted the root of a whole filesystem \
         ({} {}:{}) at {}: refused, as allowedHostPathPrefixes does not list exactly that path",
        escape(host.as_bytes()),
        mount.fs_type,
        mount.major,
        mount.minor,
        escape(&mount.mount_point)
    ))
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
mod tests {
    use super::*;

    fn mount(root: &str, point: &str) -> MountEntry {
        MountEntry {
            id: 1,
            parent: 0,
            major: 8,
            minor: 1,
            root: root.as_bytes().to_vec(),
            mount_point: point.as_bytes().to_vec(),
            fs_type: "ext4".into(),
        }
    }

    #[test]
    fn the_mount_is_the_longest_prefix_topmost() {
        let mut entries = vec![
            mount("/", "/"),
            mount("/a", "/data"),
            mount("/b", "/data"),
            mount("/c", "/data2"),
            mount("/d", "/data/x/y"),
        ];
        for (i, e) in entries.iter_mut().enumerate() {
            e.id = i as u64;
        }
        let found = |path: &str| find_mount(&entries, path.as_bytes()).map(|m| m.id);
        assert_eq!(found("/data"), Some(2));
        assert_eq!(found("/data/x"), Some(2));
        assert_eq!(found("/data/x/y/z"), Some(4));
        assert_eq!(found("/data2/q"), Some(3));
        assert_eq!(found("/datax"), Some(0));
        assert_eq!(suffix_below(b"/data/x", b"/data"), Some(&b"/x"[..]));
        assert_eq!(suffix_below(b"/data", b"/data"), Some(&b""[..]));
        assert_eq!(suffix_below(b"/datax", b"/data"), None);
        assert_eq!(suffix_below(b"/a", b"/"), Some(&b"/a"[..]));
    }

    #[test]
    fn host_paths_match_the_whole_root_component_wise() {
        let ok = |host: &str, suffix: &str, root: &str| {
            match_host(host, suffix.as_bytes(), &mount(root, "/data"), false)
        };
        assert_eq!(ok("/mnt/scratch/cache", "", "/mnt/scratch/cache"), Ok(()));
        assert_eq!(
            ok("/mnt/scratch/cache/x", "/x", "/mnt/scratch/cache"),
            Ok(())
        );
        // A pseudo filesystem's root is no directory of the node, whatever the host path.
        assert!(ok("/mnt/net:[4026532321]", "", "net:[4026532321]").is_err());
        // The suffix is all of the host path: the mount shows the node's `/`, not /x.
        assert!(ok("/x", "/x", "/x").is_err());
        for (host, suffix, root) in [
            ("/mnt/scratch/cache", "", "/var/lib/containerd"),
            ("/mnt/scratch/cache", "", "/che"),
            ("/mnt/scratch/cache", "", "/mnt/scratch/cache/sub"),
            ("/mnt/scratch/cache/x", "/y", "/mnt/scratch/cache"),
            ("/mnt/scratch/cachex", "/x", "/mnt/scratch/cache"),
            ("/mnt/scratch/cache", "", "/"),
            // Issue 26: a root that is only a tail of the host path. Accepted before
            // (/mnt/scratch may be its own disk, whose root is /cache), it is also what a
            // symlink on the node shows: without the node agent, refused.
            ("/mnt/scratch/cache", "", "/cache"),
            ("/mnt/scratch/ci-7/var/lib/kubelet", "", "/var/lib/kubelet"),
            ("/data/tmp/keep", "", "/keep"),
            ("/data/tmp/keep/x", "/x", "/keep"),
        ] {
            let err = ok(host, suffix, root).unwrap_err();
            assert!(err.contains(host), "{err}");
            if host.ends_with(suffix) {
                assert!(err.contains("node agent"), "{err}");
            }
        }
        // A whole filesystem is the node's `/` (hostPath `/`) or needs the node agent.
        let whole = mount("/", "/data");
        let err = match_host("/mnt/disk", b"", &whole, true).unwrap_err();
        assert!(err.contains("whole filesystem"), "{err}");
        assert!(err.contains("only with the node agent"), "{err}");
        assert_eq!(match_host("/x", b"/x", &whole, true), Ok(()));
        let err = match_host("/x", b"/x", &whole, false).unwrap_err();
        assert!(err.contains("allowedHostPathPrefixes"), "{err}");
    }

    #[test]
    fn expected_hosts_are_expanded_and_normalized() {
        let env = |name: &str| (name == "POD_NAME").then(|| "p-1".to_owned());
        let host = |text: Option<&str>| {
            let target = Target {
                path: "/data".into(),
                host: text.map(str::to_owned),
                whole_filesystem: false,
            };
            expected_host(&target, &env)
        };
        assert_eq!(host(Some("/mnt/$(POD_NAME)/x")), Ok("/mnt/p-1/x".into()));
        assert_eq!(host(Some("/mnt//a/./b/")), Ok("/mnt/a/b".into()));
        assert_eq!(host(Some("/mnt/$$x")), Ok("/mnt/$x".into()));
        assert!(host(None).unwrap_err().contains("older"));
        assert!(host(Some("/mnt/$(NOPE)")).is_err());
        assert!(host(Some("/mnt/../etc")).is_err());
        assert!(host(Some("mnt")).is_err());
    }
}
