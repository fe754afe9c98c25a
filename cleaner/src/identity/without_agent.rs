//! The rule without the node's word (no agent, or none reachable): what a cleaner can
//! prove from its own mount table alone. The strict rule ([`match_host`]) says the
//! directory is the node's at the expected path *on some filesystem*; the pod's uid
//! ([`without_the_node`]) says that whatever filesystem it is, the directory is one the
//! kubelet created for this pod alone (issue 31, finding 4).

use super::AGENT_DOCS;
use crate::mountinfo::MountEntry;
use crate::report::escape;

/// Without the node's word, only what a planted link cannot redirect and no other pod can
/// use (issue 31, finding 4): a directory the kubelet created for this pod alone, named
/// by its uid (`subPathExpr: $(POD_UID)`), that passes the strict rule ([`match_host`]).
/// The uid is the kubelet's, read from the container's own mounts of the pod's kubelet
/// directory (`…/pods/<uid>/etc-hosts`, `…/pods/<uid>/containers/…`), never from the
/// environment that expanded the path. A fixed directory may be the one a link planted on
/// the node leads to — another container's root filesystem repeats any path — or one a
/// Job's replacement pod already works in: only the node agent can tell.
pub(super) fn without_the_node(
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
        ["pods", uid, "etc-hosts" | "containers"] if crate::is_pod_uid(uid) => Some(*uid),
        _ => None,
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
pub(super) fn whole_filesystem_allowed(
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
