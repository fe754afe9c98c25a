//! The node's host directories that are never cleaned, whatever the allow-list says: the
//! webhook refuses a prefix or a target that meets one (`src/policy/mod.rs`,
//! with the operator's `protectedHostPaths` too), and the node agent refuses an allowed
//! prefix that a symlink on the node leads into one (issue 32: only root can make such a
//! link, but an operator's link from `/mnt/disk` to `/run` must still clean nothing there).

/// Trees nothing below may be cleaned: the node's system, its runtimes and storage
/// drivers, and host directories that are symlinks on common distros (`/var/lock` →
/// `/run/lock`, `/var/roothome` and `/var/home` on Fedora CoreOS / RHCOS): cleaning
/// through a symlink cleans its target.
///
/// Trees, not exact entries, for the distribution layouts at the end: everything below
/// them is node or storage state under another name (`/mnt/stateful_partition/var/lib/
/// kubelet` on COS, `/local/var/…` behind Bottlerocket's `/var`, the OSTree deployments
/// under `/sysroot`), a PV's data (`/opt/local-path-provisioner/pvc-…`, `/mnt/disks/ssd0`
/// on GKE, `/mnt/k8s-disks/0` on EKS, which also holds containerd and the kubelet when the
/// instance store is used for them), a storage daemon's own state (`/var/lib/rook`), a
/// package's variable data (`/var/opt/<package>`, FHS), or the reaper's state file. Found in
/// public manifests (issue 26): local-static-provisioner discovers its PVs under
/// `/mnt/disks` and `/mnt/fast-disks`, csi-driver-host-path keeps every volume under
/// `/var/lib/csi-hostpath-data`, and kind nodes keep their state under `/kind`.
pub const PROTECTED_TREES: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/log",
    "/var/run",
    "/var/lock",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/lib/etcd",
    "/var/lib/cni",
    "/opt/cni",
    "/var/lib/calico",
    "/var/lib/rancher",
    "/var/lib/k0s",
    "/var/snap",
    "/var/lib/kube-proxy",
    "/var/lib/longhorn",
    "/var/openebs",
    "/var/lib/dpkg",
    "/var/lib/apt",
    "/var/lib/rpm",
    "/var/lib/systemd",
    "/var/roothome",
    "/var/home",
    "/home/kubernetes",
    "/mnt/stateful_partition",
    "/local",
    "/sysroot",
    "/mnt/k8s-disks",
    "/mnt/disks",
    "/mnt/fast-disks",
    "/var/lib/csi-hostpath-data",
    "/kind",
    "/var/lib/rook",
    "/opt/local-path-provisioner",
    "/var/opt",
    REAPER_STATE_TREE,
];

/// Where the reaper keeps its state file (its `--state-file` default lies below): a
/// cleanup that emptied it would make the reaper forget what it owes.
pub const REAPER_STATE_TREE: &str = "/var/lib/prestop-injector";

/// Directories that protect only themselves: their subdirectories (`/var/lib/myjob`,
/// `/tmp/job`, `/mnt/scratch`) are where scratch space usually lives.
pub const PROTECTED_EXACT: &[&str] = &[
    "/", "/home", "/opt", "/srv", "/var", "/var/lib", "/tmp", "/var/tmp", "/mnt",
];

/// `/lib`, `/lib32`, `/lib64`, `/libx32`, …: the protected `/lib*` is a glob on the first
/// segment, conservative on purpose (it also protects `/library`).
pub fn is_lib_tree(path: &str) -> bool {
    path.split('/')
        .nth(1)
        .is_some_and(|first| first.starts_with("lib"))
}

/// The built-in protected entry that the normalized absolute `path` lies in or holds, if
/// any: a tree protects everything below it, an exact entry itself, and both what is
/// above them (emptying `/data` empties `/data/keep`).
pub fn protected_entry_of(path: &str) -> Option<String> {
    if path == "/" {
        return Some("/".to_owned());
    }
    if is_lib_tree(path) {
        let first = path.split('/').nth(1).unwrap_or_default();
        return Some(format!("/{first}"));
    }
    let at_or_below = |path: &str, base: &str| {
        path == base || (path.starts_with(base) && path.as_bytes().get(base.len()) == Some(&b'/'))
    };
    PROTECTED_TREES
        .iter()
        .find(|tree| at_or_below(path, tree) || at_or_below(tree, path))
        .or_else(|| {
            PROTECTED_EXACT
                .iter()
                .find(|entry| at_or_below(entry, path))
        })
        .map(|entry| (*entry).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_or_holding_a_protected_entry() {
        for (path, entry) in [
            ("/run", Some("/run")),
            ("/run/disk", Some("/run")),
            ("/var/lib/kubelet/pods", Some("/var/lib/kubelet")),
            ("/var/lib", Some("/var/lib/kubelet")),
            ("/lib64/x", Some("/lib64")),
            ("/", Some("/")),
            ("/var/mnt/scratch", None),
            ("/mnt/scratch", None),
            ("/tmp/job", None),
            ("/data/disk1", None),
        ] {
            assert_eq!(protected_entry_of(path).as_deref(), entry, "{path}");
        }
    }
}
