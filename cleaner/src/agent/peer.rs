//! Who asks, from the kernel, never from the request: `SO_PEERCRED` gives the asking
//! process, its cgroup gives its pod (issue 32). And on which filesystem the descriptor it
//! sent lies, from that process's own mount table, before anything touches the
//! descriptor: a network or FUSE filesystem whose server stops answering would otherwise
//! park the agent's `fstat` for ever.
//!
//! The agent runs with the node's PID namespace (`hostPID`), so the pid `SO_PEERCRED`
//! gives is a pid of its `/proc`. A peer it cannot see (pid 0, or gone) has no mount
//! table to read, and its descriptor is refused: fail closed.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use crate::mountinfo;

/// The asking process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// In the agent's PID namespace; 0 when the kernel could not map it there.
    pub pid: u32,
    pub uid: u32,
    /// The pod's uid, from the process's cgroup path (`…pod<uid>…`), when it is a pod's.
    pub pod: Option<String>,
}

impl Peer {
    /// The kernel's word on the process at the other end of `stream`.
    pub fn of(stream: &UnixStream) -> Option<Peer> {
        let cred = rustix::net::sockopt::socket_peercred(stream).ok()?;
        let pid = cred.pid.as_raw_nonzero().get().unsigned_abs();
        let pod = std::fs::read(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|text| pod_of_cgroup(&text));
        Some(Peer {
            pid,
            uid: cred.uid.as_raw(),
            pod,
        })
    }

    /// Whose share of the agent's places a request takes: its pod's, or, outside pods,
    /// its user's (a node process, a test).
    pub fn share(&self) -> String {
        match &self.pod {
            Some(pod) => format!("pod {pod}"),
            None => format!("uid {}", self.uid),
        }
    }

    /// For the log line.
    pub fn describe(&self) -> String {
        match &self.pod {
            Some(pod) => format!("pid {} uid {} pod {pod}", self.pid, self.uid),
            None => format!("pid {} uid {}", self.pid, self.uid),
        }
    }
}

pub use crate::pod_cgroup::pod_of_cgroup;

/// Filesystems whose every access may wait on a server that need never answer. A
/// directory on one is not judged at all.
pub fn is_remote_or_userspace(fs_type: &str) -> bool {
    fs_type.starts_with("fuse")
        || fs_type.starts_with("nfs")
        || fs_type.starts_with("smb")
        || matches!(
            fs_type,
            "cifs"
                | "9p"
                | "ceph"
                | "glusterfs"
                | "lustre"
                | "gpfs"
                | "afs"
                | "coda"
                | "ncpfs"
                | "virtiofs"
                | "orangefs"
                | "pvfs2"
                | "beegfs"
                | "gfs2"
                | "ocfs2"
                | "davfs"
        )
}

/// The asking process's mounts, from its `/proc/PID/mountinfo` (mode 0444: no capability).
pub fn mounts_of(peer: &Peer) -> Result<Vec<mountinfo::MountEntry>, String> {
    if peer.pid == 0 {
        return Err("the asking process is not in the agent's PID namespace".to_owned());
    }
    let table = std::fs::read(format!("/proc/{}/mountinfo", peer.pid))
        .map_err(|err| format!("cannot read the asking process's mounts: {err}"))?;
    mountinfo::parse(&table)
}

/// The type of the filesystem `fd` (received from the peer whose mounts are `mounts`) lies
/// on, read without touching `fd`'s filesystem: the mount id from the agent's own
/// `/proc/self/fdinfo`, its type from the peer's mountinfo (mount ids are unique on the
/// node, so no other mount can answer for it). `Err` says why it cannot be known.
pub fn filesystem_of(
    fd: BorrowedFd<'_>,
    mounts: &[mountinfo::MountEntry],
) -> Result<String, String> {
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd()))
        .map_err(|err| format!("cannot read the descriptor's fdinfo: {err}"))?;
    let mount_id: u64 = fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|id| id.trim().parse().ok())
        .ok_or("the descriptor's fdinfo names no mount")?;
    mounts
        .iter()
        .find(|entry| entry.id == mount_id)
        .map(|entry| entry.fs_type.clone())
        .ok_or_else(|| "the descriptor is on no mount of the asking process".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_is_read_from_either_cgroup_driver() {
        let uid = "0b5e1c9e-3f1d-4c1e-9a43-6f0e2c5d7a11";
        for text in [
            format!("0::/kubepods/besteffort/pod{uid}/0123abcd\n"),
            format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-ab.scope\n",
                uid.replace('-', "_")
            ),
            format!("12:pids:/kubepods/pod{uid}/c\n11:memory:/kubepods/pod{uid}/c\n"),
        ] {
            assert_eq!(pod_of_cgroup(text.as_bytes()).as_deref(), Some(uid), "{text}");
        }
        for text in [
            "0::/\n",
            "0::/system.slice/containerd.service\n",
            "0::/kubepods/besteffort/podnot-a-uid/c\n",
            "0::/user.slice/pod0b5e1c9e\n",
        ] {
            assert_eq!(pod_of_cgroup(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn network_and_userspace_filesystems_are_known() {
        for remote in [
            "fuse",
            "fuse.sshfs",
            "fuseblk",
            "nfs",
            "nfs4",
            "cifs",
            "smb3",
            "9p",
            "ceph",
            "virtiofs",
        ] {
            assert!(is_remote_or_userspace(remote), "{remote}");
        }
        for local in ["ext4", "xfs", "btrfs", "tmpfs", "zfs", "overlay", "f2fs"] {
            assert!(!is_remote_or_userspace(local), "{local}");
        }
    }
}
