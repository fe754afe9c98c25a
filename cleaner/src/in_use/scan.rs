//! Every process on the node, each view of a mount namespace read in full once (issue 38,
//! finding 5): a pod with 1,000 mounts and 400 processes costs one table, not 400.
//!
//! Without `CAP_SYS_PTRACE` (the agent and the reaper have none) a process's mount
//! namespace cannot be asked of the kernel: `/proc/<pid>/ns/mnt` and `/proc/<pid>/root`
//! need ptrace access, even for root (a node's pid 1 holds capabilities the agent lacks).
//! Its mountinfo can be read, and names it. The scan reads the first line of every table
//! and keys the view by it:
//! - the mount id names the namespace: ids are unique among the node's live mounts and a
//!   mount is in one namespace;
//! - the mount point, which the kernel writes relative to the reader's root, names where
//!   the reader's root is in it: a process chrooted below or above another sees that
//!   mount at another path, or another first mount (one it can reach).
//!
//! Two processes with the same first line are therefore in one namespace with their roots
//! at one place, and see one table: it is read and parsed once. The one way two such
//! processes could differ is a mount stacked on one's root after it took it, hiding
//! mounts that only the other still reaches: a pod that mounts over its own `/` (no
//! runtime does) can hide its own use this way, as it can by detaching its volume while
//! it keeps a descriptor to it. Likewise an id reused while the scan runs: the mount and
//! its parent freed, and the line rebuilt byte for byte (device, root, options, source:
//! a container's first line names its own overlay directory) by another namespace.
//!
//! Only lines of the candidate's device, of the reaper pod's marker and mounts at `/`
//! are parsed; the others are skipped before anything is allocated for them.
//!
//! Fresh: nothing is kept from one judgement to the next. Every table is opened and read
//! during the judgement, so a mount made before the question is seen. A cache revalidated
//! by `poll(POLLPRI)` on an open mountinfo (which reports mounts and unmounts in its
//! namespace) would not be: a rename of a bind mount's source directory on the node
//! changes the `root` the kernel shows for that mount without any mount event, and the
//! check compares those paths.
//!
//! A live process whose root is not a mount it shows (an empty table: a container
//! chrooted into a directory of its volume, or whose mounts are detached) uses something
//! no table says: [`Busy::Unknown`] (issue 38, finding 4). Except kernel threads, and
//! processes of the node's own namespaces (a daemon that chroots, such as sshd's
//! pre-authentication child): they are the node's, as every process that shows the node's
//! root. That exception needs the process's namespace, which only `/proc/<pid>/ns/mnt`
//! tells, and reading it needs ptrace access the agent and the reaper do not have. Where
//! it cannot be read, the process's cgroup (mode 0444, the kernel's word) tells a pod's
//! process from the node's: one in no pod's cgroup is a daemon of the node (sshd's
//! pre-authentication child, postfix, ntpd), which uses no pod's volume; one in a pod's
//! cgroup stays unknown. Without that, any chrooting daemon of the node would refuse every
//! cleanup on it while it runs.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use super::mounts::{dev_and_point, on_one_line, root_mount, Mount};
use super::views::{self, Opened};
use super::{is_at_or_below, Busy};

/// PF_KTHREAD in `/proc/<pid>/stat`'s flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// What the last scan of this thread read: its cost, for tests and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanCost {
    /// Processes looked at.
    pub processes: usize,
    /// Distinct views parsed.
    pub views: usize,
    /// The processes whose tables were read past their first line (one per view).
    pub read_in_full: Vec<u32>,
    /// Bytes of mount tables read.
    pub bytes: u64,
}

thread_local! {
    static LAST: RefCell<ScanCost> = RefCell::new(ScanCost::default());
}

/// The cost of the last scan made on this thread (an empty one before any).
pub fn last_scan() -> ScanCost {
    LAST.with(|last| last.borrow().clone())
}

/// What the scan looks for.
pub(super) struct Looking<'a> {
    /// The candidate's device and path within its filesystem.
    pub dev: (u32, u32),
    pub fs_path: &'a [u8],
    /// The prefix's path in that filesystem: a read-only mount strictly above it is a
    /// view of the node, not a use.
    pub prefix_path: Option<&'a [u8]>,
    /// Mounts of the checking process and of the asker: theirs, never a use.
    pub own_ids: &'a HashSet<u64>,
    /// The reaper pod's marker (device and root).
    pub own_pod: Option<&'a ((u32, u32), Vec<u8>)>,
    /// The node's root mount (device and root).
    pub node_root: &'a ((u32, u32), Vec<u8>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Shows the node's root: the node, or a copy of its namespace.
    Node,
    /// A container of the reaper's own pod, or one that does not reach the candidate.
    Free,
    /// Its root is not a mount it shows.
    Rootless,
}

/// Looks at every process under `proc`.
pub(super) fn processes(proc: &Path, looking: &Looking<'_>) -> Result<(), Busy> {
    let mut cost = ScanCost::default();
    let result = scan(proc, looking, &mut cost);
    LAST.with(|last| *last.borrow_mut() = cost);
    result
}

fn scan(proc: &Path, looking: &Looking<'_>, cost: &mut ScanCost) -> Result<(), Busy> {
    let unknown = |why: String| Busy::Unknown(why);
    let dev_field = |dev: (u32, u32)| format!("{}:{}", dev.0, dev.1).into_bytes();
    let candidate_dev = dev_field(looking.dev);
    let marker_dev = looking.own_pod.map(|(dev, _)| dev_field(*dev));
    let keep = |line: &[u8]| {
        dev_and_point(line).is_some_and(|(dev, point)| {
            point == b"/" || dev == candidate_dev || marker_dev.as_deref() == Some(dev)
        })
    };
    let mut seen: HashMap<Vec<u8>, Class> = HashMap::new();
    // Processes of the node's namespaces, and those that show no root (see the module).
    let (mut node, mut rootless): (Vec<PathBuf>, Vec<(String, PathBuf)>) = Default::default();
    let entries = std::fs::read_dir(proc)
        .map_err(|error| unknown(format!("cannot list {}: {error}", proc.display())))?;
    for entry in entries {
        let entry = entry.map_err(|error| unknown(format!("cannot list /proc: {error}")))?;
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        cost.processes += 1;
        let cannot_read = |error: std::io::Error| {
            unknown(format!("cannot read the mounts of pid {pid}: {error}"))
        };
        let (mut file, task) = match views::open(proc, pid) {
            Opened::Table(file, task) => (file, task),
            Opened::Gone => continue,
            Opened::Failed(_) if is_kernel_thread(&proc.join(pid)) => continue,
            Opened::Failed(error) => return Err(cannot_read(error)),
        };
        let head = views::read_head(&mut file).map_err(cannot_read)?;
        cost.bytes += head.bytes.len() as u64;
        let Some(first) = head.first_line() else {
            // No mount ids, so no namespace: each is looked at alone.
            rootless.push((pid.to_owned(), task));
            continue;
        };
        match seen.get(first) {
            Some(Class::Node) => node.push(task),
            Some(Class::Rootless) => rootless.push((pid.to_owned(), task)),
            Some(Class::Free) => {}
            None => {
                let key = first.to_vec();
                let mut mounts = Vec::new();
                if head.eof {
                    views::parse_lines_all(&head.bytes, &keep, &mut mounts);
                } else {
                    cost.bytes += views::read_rest(&mut file, &head.bytes, &keep, &mut mounts)
                        .map_err(cannot_read)?;
                }
                cost.read_in_full.push(pid.parse().unwrap_or(0));
                cost.views += 1;
                let class = match classify(&mounts, looking) {
                    Ok(class) => class,
                    Err(mount) => return Err(in_use(&proc.join(pid), pid, &mount, looking)),
                };
                match class {
                    Class::Node => node.push(task),
                    Class::Rootless => rootless.push((pid.to_owned(), task)),
                    Class::Free => {}
                }
                seen.insert(key, class);
            }
        }
    }
    rootless_are_the_nodes(proc, &rootless, &node)
}

/// The view's class, or the mount by which it uses the candidate.
fn classify(mounts: &[Mount], looking: &Looking<'_>) -> Result<Class, Mount> {
    let Some(root) = root_mount(mounts) else {
        return Ok(Class::Rootless);
    };
    if (root.dev, &root.root) == (looking.node_root.0, &looking.node_root.1) {
        return Ok(Class::Node);
    }
    // A container of the reaper's own pod (the node agent).
    if looking
        .own_pod
        .is_some_and(|(dev, root)| mounts.iter().any(|m| m.dev == *dev && &m.root == root))
    {
        return Ok(Class::Free);
    }
    let user = mounts
        .iter()
        .filter(|m| {
            !looking.own_ids.contains(&m.id)
                && m.dev == looking.dev
                && on_one_line(&m.root, looking.fs_path)
        })
        .find(|m| {
            !(m.read_only
                && looking
                    .prefix_path
                    .is_some_and(|prefix| m.root != prefix && is_at_or_below(prefix, &m.root)))
        });
    match user {
        Some(mount) => Err(mount.clone()),
        None => Ok(Class::Free),
    }
}

fn in_use(dir: &Path, pid: &str, mount: &Mount, looking: &Looking<'_>) -> Busy {
    let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    Busy::InUse(format!(
        "pid {pid} ({}) sees it: {} of device {}:{} is mounted at {} in its container",
        comm.trim(),
        String::from_utf8_lossy(&mount.root),
        looking.dev.0,
        looking.dev.1,
        String::from_utf8_lossy(&mount.point)
    ))
}

/// `Ok` when every process that shows no root is a kernel thread, gone, or in a mount
/// namespace of one of `node` (tasks that show the node's root).
fn rootless_are_the_nodes(
    proc: &Path,
    rootless: &[(String, PathBuf)],
    node: &[PathBuf],
) -> Result<(), Busy> {
    if rootless.is_empty() {
        return Ok(());
    }
    let namespace =
        |task: &Path| std::fs::metadata(task.join("ns/mnt")).map(|meta| (meta.dev(), meta.ino()));
    let node_namespaces: HashSet<(u64, u64)> = std::iter::once(proc.join("1"))
        .chain(node.iter().cloned())
        .filter_map(|task| namespace(&task).ok())
        .collect();
    for (pid, task) in rootless {
        if is_kernel_thread(task) {
            continue;
        }
        match namespace(task) {
            Ok(ns) if node_namespaces.contains(&ns) => continue,
            Err(_) if matches!(views::open(proc, pid), Opened::Gone) => continue,
            Err(_) if is_the_nodes_own(task) => continue,
            _ => {}
        }
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        return Err(Busy::Unknown(format!(
            "pid {pid} ({}) shows no mount at its root (chrooted into a directory that is \
             not a mount, or its mounts are detached), so what it uses cannot be told",
            comm.trim()
        )));
    }
    Ok(())
}

/// Whether the process's cgroup names no pod: a process of the node itself (its cgroup
/// file read; a process that cannot be read is not the node's).
fn is_the_nodes_own(task: &Path) -> bool {
    std::fs::read(task.join("cgroup"))
        .is_ok_and(|text| !text.is_empty() && crate::pod_cgroup::pod_of_cgroup(&text).is_none())
}

/// The flags field of `<task>/stat`.
pub(super) fn stat_flags(task: &Path) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(task.join("stat")).ok()?;
    let (head, tail) = stat.rsplit_once(')')?;
    // pid (comm) state ppid pgrp session tty_nr tpgid flags …
    let flags = tail.split_whitespace().nth(6)?.parse::<u64>().ok()?;
    Some((head.to_owned(), flags))
}

fn is_kernel_thread(task: &Path) -> bool {
    stat_flags(task).is_some_and(|(_, flags)| flags & PF_KTHREAD != 0)
}

/// Whether `head` is `pid (comm` of a kernel thread: for `sees_the_node`.
pub(super) fn is_kernel_thread_named(proc: &Path, pid: &str, comm: &str) -> bool {
    stat_flags(&proc.join(pid))
        .is_some_and(|(head, flags)| head == format!("{pid} ({comm}") && flags & PF_KTHREAD != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a process's namespace cannot be read (the deployed agent has no ptrace
    /// access), a chrooted process in no pod's cgroup is the node's own daemon; one in a
    /// pod's cgroup (either driver), or one whose cgroup cannot be read, is not.
    #[test]
    fn a_process_in_no_pods_cgroup_is_the_nodes_own() {
        let proc = tempfile::tempdir().expect("a temp dir");
        let task = |name: &str, cgroup: Option<&str>| {
            let dir = proc.path().join(name);
            std::fs::create_dir(&dir).expect("a task");
            if let Some(cgroup) = cgroup {
                std::fs::write(dir.join("cgroup"), cgroup).expect("its cgroup");
            }
            dir
        };
        let sshd = task("1", Some("0::/system.slice/ssh.service\n"));
        let cgroupfs = task(
            "2",
            Some("4:pids:/kubepods/besteffort/pod7d1c2a4e-0000-4000-8000-000000000031/abc\n"),
        );
        let systemd = task(
            "3",
            Some("0::/kubepods.slice/kubepods-pod7d1c2a4e_0000_4000_8000_000000000031.slice/cri-containerd-abc.scope\n"),
        );
        let unreadable = task("4", None);
        assert!(is_the_nodes_own(&sshd));
        assert!(!is_the_nodes_own(&cgroupfs));
        assert!(!is_the_nodes_own(&systemd));
        assert!(!is_the_nodes_own(&unreadable));
    }
}
