//! "In use" by identity, not by spelling (docs/DESIGN.md#the-node-reaper; issue 17, class 8;
//! issue 31). One implementation for the two that ask: the reaper before it empties a gone
//! pod's directory ([`check`]), and the node agent before it lets a pod's own cleanup
//! empty one ([`check_for_asker`]: "may I empty this now?").
//!
//! The ledger compares host paths as the pod specs spell them. A pod can reach the same
//! directory through a symlink on the node (`hostPath: /data/cache` → `/mnt/scratch/job`),
//! through a PersistentVolume (local, hostPath, local-path: the PV's path is not in the
//! pod spec at all) or through any bind mount of it. The kernel knows better: every
//! container's mounts are in `/proc/<pid>/mountinfo`, and each mount line names the
//! device (`major:minor`) and the directory *of that filesystem* it shows (`root`), after
//! every symlink and bind mount has been resolved.
//!
//! So, just before a walk, the check finds the candidate's own identity — its device and
//! its path within its filesystem, from the reaper's own mountinfo and a `stat` — and
//! refuses when any container on the node has a mount of the same device whose `root` is
//! the candidate, above it or below it. It also refuses when the node itself has a mount
//! at or below the candidate (the reaper's mounts do not propagate, so it would not see
//! that mount, and removing its mount point on the node would detach it).
//!
//! Which processes are containers: those whose root (`/` in their mountinfo) is not the
//! node's root. The node's own namespace, and copies of it (systemd services with
//! `PrivateTmp=` and the like, `unshare -m`), have the node's root and see every host
//! directory from above; they are not pods. The checking process's own mounts (the
//! reaper's prefixes, the agent's view of the node's `/`, above every candidate) are
//! known by their mount ids and skipped.
//!
//! Privilege: `hostPID: true`, so that `/proc` lists the node's processes. Nothing else:
//! `mountinfo` is readable by every user (mode 0444, no ptrace check), unlike
//! `/proc/<pid>/ns/*` or `/proc/<pid>/root`, which need ptrace access (`CAP_SYS_PTRACE`
//! for another user's or a more privileged process: even root without it cannot read
//! them for a node's pid 1). The check does not depend on them; it reads `ns/mnt` only
//! where it can, to tell a node daemon that chroots from a container (see `scan.rs`).
//!
//! Cost (issue 38, finding 5): each view of a mount namespace is read in full once per
//! check, however many processes share it; of every other process only a head is read
//! (`scan.rs`, `views.rs`). Nothing is kept from one check to the next: a mount made
//! before the question is always seen.
//!
//! Unseen users (issue 38, finding 4): a live process whose root is not a mount it shows
//! (an empty table: a container chrooted into its volume) is unknown, never free; a
//! process whose main thread exited is read through one of its live threads.
//!
//! The node agent (the reaper pod's `node-agent` container) sees the node's whole `/`, so
//! its mounts are above every directory; it uses none of them. Every container of the
//! reaper's pod mounts the same `emptyDir` at [`OWN_POD_MARKER`]: a process whose mounts
//! include that very directory (device and root, which only this pod's kubelet directory
//! has) is of the reaper's pod and is skipped. Skipping a process removes only that
//! process's own protection: every other container is still looked at.
//!
//! Fail closed: when the checking process cannot see the node's processes (no `hostPID`: the
//! kernel thread `kthreadd` is not pid 2 of its pid namespace), cannot read a living
//! process's mounts or cannot tell what a chrooted one uses, the answer is
//! [`Busy::Unknown`] and nothing is emptied.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

mod mounts;
mod scan;
mod views;

pub use mounts::{is_at_or_below, parse, Mount};
use mounts::{path_in_filesystem, read_mountinfo, root_mount, split_dev};
pub use scan::{last_scan, ScanCost};

/// Why a directory must not be emptied now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    /// A container (or the node) uses it: the sentence names the process and mount. For
    /// the reaper's log only: it names another pod's mounts.
    InUse(String),
    /// Whether it is used cannot be known.
    Unknown(String),
}

impl Busy {
    /// The metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Busy::InUse(_) => "in_use",
            Busy::Unknown(_) => "in_use_unknown",
        }
    }

    pub fn why(&self) -> &str {
        match self {
            Busy::InUse(why) | Busy::Unknown(why) => why,
        }
    }
}

/// Where every container of the reaper's pod mounts the pod's own `emptyDir` (read-only),
/// so that the reaper knows the node agent's processes by their mounts (see the module
/// docs). Absent from the reaper's mounts (an older DaemonSet), nothing is skipped.
pub const OWN_POD_MARKER: &str = "/run/prestop-reaper-pod";

/// Whether any container on the node, or a mount of the node, uses the directory at
/// `location` (a path in the reaper's mount namespace) whose host path is `host_path`.
/// A location that is not a directory is left to the walk, which refuses it or finds
/// nothing.
pub fn check(location: &Path, host_path: &str) -> Result<(), Busy> {
    check_marked(location, host_path, Path::new(OWN_POD_MARKER), None)
}

/// [`check`], except that a container's *read-only* mount of a directory strictly above
/// `prefix` (the candidate's allowed prefix, its path in the reaper) does not keep it:
/// node-exporter's `/`, a `kubectl debug node/…` pod (docs/REAPER.md#when: a read-only
/// view cannot write what the walk removes). Its mounts below, with their own lines and
/// options, still count.
pub fn check_beside_read_only_views(
    location: &Path,
    host_path: &str,
    prefix: &Path,
) -> Result<(), Busy> {
    check_marked(location, host_path, Path::new(OWN_POD_MARKER), Some(prefix))
}

/// [`check`] with the reaper pod's marker mounted at `marker` (tests mount their own).
pub fn check_marked(
    location: &Path,
    host_path: &str,
    marker: &Path,
    read_only_above: Option<&Path>,
) -> Result<(), Busy> {
    check_in(
        Path::new("/proc"),
        location,
        host_path,
        marker,
        read_only_above,
    )
}

fn check_in(
    proc: &Path,
    location: &Path,
    host_path: &str,
    marker: &Path,
    read_only_above: Option<&Path>,
) -> Result<(), Busy> {
    if !sees_the_node(proc) {
        return Err(not_visible());
    }
    let meta = match std::fs::symlink_metadata(location) {
        Ok(meta) if meta.is_dir() => meta,
        Ok(_) => return Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(Busy::Unknown(format!("cannot stat it: {error}"))),
    };
    let candidate = Candidate {
        location,
        dev: split_dev(meta.dev()),
        host_path: host_path.as_bytes(),
    };
    scan(proc, &candidate, marker, read_only_above, None)
}

/// A directory to look for users of.
pub struct Candidate<'a> {
    /// Its path in this process's mount namespace (read against this process's own
    /// mountinfo only, never resolved again).
    pub location: &'a Path,
    /// Its device, from the descriptor or the `stat` that established its identity.
    pub dev: (u32, u32),
    /// Its path on the node.
    pub host_path: &'a [u8],
}

/// The node agent's question for a directory it has just found to be the node's
/// (`same`): does any container on the node but the asker's own use it? The asker's
/// container is known by the kernel's mount ids: mount ids are unique on the node, so a
/// process whose mount of the directory has an id listed in the asker's own
/// `/proc/<pid>/mountinfo` (`asker_mounts`) is in the asker's mount namespace: the
/// container whose hook asks. Its sibling containers, a native sidecar, another pod (a
/// Job's replacement that already runs) each have their own namespace and count.
///
/// A filesystem the node mounts at or inside the directory keeps it too, unless the
/// asker's container has that very mount (its device and root): then the asker's walk
/// meets it, never enters it and never removes its mount point. One the container does
/// not see (mounted on the node after the container started) would look like a plain
/// directory to the walk, whose removal would detach the node's mount.
pub fn check_for_asker(
    candidate: &Candidate<'_>,
    read_only_above: Option<&Path>,
    asker: &Asker,
) -> Result<(), Busy> {
    scan(
        Path::new("/proc"),
        candidate,
        Path::new(OWN_POD_MARKER),
        read_only_above,
        Some(asker),
    )
}

/// The asking container, as its own `/proc/<pid>/mountinfo` shows it.
#[derive(Debug, Default)]
pub struct Asker {
    /// Its mount ids: a process with a mount of one of them shares its mount namespace.
    pub mount_ids: HashSet<u64>,
    /// The filesystem directories it has mounted, by device and root.
    pub sees: HashSet<((u32, u32), Vec<u8>)>,
}

fn scan(
    proc: &Path,
    candidate: &Candidate<'_>,
    marker: &Path,
    read_only_above: Option<&Path>,
    asker: Option<&Asker>,
) -> Result<(), Busy> {
    let unknown = |why: String| Busy::Unknown(why);
    if !sees_the_node(proc) {
        return Err(not_visible());
    }
    let Candidate {
        location,
        dev,
        host_path,
    } = *candidate;
    let read = |pid: &str| read_mountinfo(&proc.join(pid).join("mountinfo"));
    let own = match read("self") {
        Ok(Some(own)) => own,
        Ok(None) => return Err(unknown("cannot read this process's own mounts".to_owned())),
        Err(error) => {
            return Err(unknown(format!(
                "cannot read this process's own mounts: {error}"
            )))
        }
    };
    let inside = location.as_os_str().as_encoded_bytes();
    let Some(fs_path) = path_in_filesystem(&own, inside, dev) else {
        return Err(unknown(format!(
            "cannot find the mount of {} (device {}:{}) in this process's mounts",
            location.display(),
            dev.0,
            dev.1
        )));
    };
    // The prefix's path in the candidate's filesystem: a read-only mount strictly above
    // it is a view of the node, not a use (None: every mount counts).
    let prefix_path = read_only_above
        .and_then(|prefix| path_in_filesystem(&own, prefix.as_os_str().as_encoded_bytes(), dev));
    let mut own_ids: HashSet<u64> = own.iter().map(|m| m.id).collect();
    if let Some(asker) = asker {
        own_ids.extend(&asker.mount_ids);
    }
    let own_pod = own
        .iter()
        .find(|m| m.point == marker.as_os_str().as_encoded_bytes())
        .map(|m| (m.dev, m.root.clone()));
    let node = match read("1") {
        Ok(Some(node)) => node,
        _ => return Err(unknown("cannot read the node's mounts (pid 1)".to_owned())),
    };
    let Some(node_root) = root_mount(&node) else {
        return Err(unknown("the node's mounts have no root".to_owned()));
    };
    let node_root = (node_root.dev, node_root.root.clone());
    // The asker's container has that mount too (a prefix that is its own disk, emptied
    // whole; a bind mount inside the directory that existed when the container started):
    // its walk meets it and leaves it (see check_for_asker).
    let asker_sees = |m: &Mount| asker.is_some_and(|a| a.sees.contains(&(m.dev, m.root.clone())));
    if let Some(mount) = node
        .iter()
        .find(|m| is_at_or_below(&m.point, host_path) && !asker_sees(m))
    {
        return Err(Busy::InUse(format!(
            "the node has a filesystem mounted at {} (device {}:{}), inside it",
            String::from_utf8_lossy(&mount.point),
            mount.dev.0,
            mount.dev.1
        )));
    }
    scan::processes(
        proc,
        &scan::Looking {
            dev,
            fs_path: &fs_path,
            prefix_path: prefix_path.as_deref(),
            own_ids: &own_ids,
            own_pod: own_pod.as_ref(),
            node_root: &node_root,
        },
    )
}

fn not_visible() -> Busy {
    Busy::Unknown(
        "the node's processes are not visible here (the pod needs hostPID: true), so which \
         containers use the directory cannot be told"
            .to_owned(),
    )
}

/// Whether `proc` is the node's: pid 2 is the kernel thread `kthreadd`, which exists
/// only in the node's pid namespace.
fn sees_the_node(proc: &Path) -> bool {
    scan::is_kernel_thread_named(proc, "2", "kthreadd")
}
