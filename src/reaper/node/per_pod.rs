//! A per-pod directory removed itself once emptied (issue 38, class 8): the directory a
//! `subPathExpr: $(POD_UID)` made for one pod alone is left behind by the kubelet, an
//! inode and a block for every pod that ever ran, unless someone removes it.
//!
//! Only an empty directory (`rmdir`: it cannot lose a byte), only after the walk emptied
//! it, only when its own name carries the uid of the one gone pod that recorded it (the
//! API server's uid, never a name the pod chose), never an allowed prefix itself, and only
//! if nothing on the node uses it at that instant (the same in-use check as the walk's).
//! Its parent is opened with no symlink on the way (`RESOLVE_NO_SYMLINKS`) and the name is
//! removed from that directory: a link put in its place is not followed, and whatever
//! else has that name by then is removed only if it is an empty directory. The rights
//! are the reaper's, not the pod's user's: the kubelet (root) made the directory for that
//! pod, in a parent the pod's user need not be able to write, as it makes an `emptyDir`,
//! which it also removes itself.

use super::Reaper;
use crate::reaper::ledger::{Due, PodRef};
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, CWD};
use std::path::Path;

impl Reaper {
    /// Removes the emptied directory of `due` (at `location` in the reaper's view) when
    /// it is its one gone pod's own; says why not in the log otherwise.
    pub(super) async fn remove_per_pod(&mut self, due: &Due, location: &str) {
        let directory = &due.directory;
        let Some(pod) = per_pod_owner(due) else {
            return;
        };
        if self
            .config
            .allowed_host_path_prefixes
            .iter()
            .any(|prefix| prefix.trim_end_matches('/') == directory.trim_end_matches('/'))
        {
            return;
        }
        if let Some(busy) = self.who_uses(location, directory).await {
            tracing::info!(
                directory,
                reason = busy.reason(),
                "emptied {directory}, the own directory of {pod}, but keep it: {}",
                busy.why()
            );
            return;
        }
        match rmdir_beneath(Path::new(location)) {
            Ok(()) => {
                self.metrics.per_pod_removed.inc();
                tracing::info!(directory, "removed {directory}, the own directory of {pod}");
            }
            Err(why) => tracing::info!(
                directory,
                "emptied {directory}, the own directory of {pod}, but did not remove it: {why}"
            ),
        }
    }
}

/// The one gone pod whose own directory `due` is: its last component names that pod's
/// uid, as the API server writes uids (8-4-4-4-12 hex digits).
fn per_pod_owner(due: &Due) -> Option<&PodRef> {
    let [pod] = due.pods.as_slice() else {
        return None;
    };
    let name = due.directory.trim_end_matches('/').rsplit('/').next()?;
    (prestop_clean::is_pod_uid(&pod.uid) && name.contains(pod.uid.as_str())).then_some(pod)
}

/// `rmdir` of `location`'s last component, from its parent opened with no symlink on
/// the way.
fn rmdir_beneath(location: &Path) -> Result<(), String> {
    let (Some(parent), Some(name)) = (location.parent(), location.file_name()) else {
        return Err("it has no parent".to_owned());
    };
    let parent = rustix::fs::openat2(
        CWD,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|error| format!("cannot open its parent without following a link: {error}"))?;
    rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reaper::user::RecordedUser;

    fn due(directory: &str, uids: &[&str]) -> Due {
        Due {
            directory: directory.to_owned(),
            pods: uids
                .iter()
                .map(|uid| PodRef {
                    uid: (*uid).to_owned(),
                    namespace: "batch".to_owned(),
                    name: "job-a".to_owned(),
                    user: RecordedUser::NotRecorded,
                })
                .collect(),
        }
    }

    const UID: &str = "0b6c1a2e-5f3d-4c8e-9a7b-1d2e3f4a5b6c";

    /// The attacks on the `rmdir` itself: a link in place of the directory, a link on
    /// the way to it, a directory that is not empty. Each is refused and removes nothing.
    #[test]
    fn rmdir_follows_no_link_and_removes_only_an_empty_directory() {
        let root = tempfile::tempdir().unwrap();
        let scratch = root.path().join("scratch");
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(elsewhere.join("empty")).unwrap();
        // A link named as the pod's directory, to an empty directory elsewhere.
        let swapped = scratch.join(UID);
        std::os::unix::fs::symlink(elsewhere.join("empty"), &swapped).unwrap();
        assert!(rmdir_beneath(&swapped).is_err());
        assert!(elsewhere.join("empty").is_dir() && swapped.is_symlink());
        // A link on the way: the parent reached through a link.
        std::fs::remove_file(&swapped).unwrap();
        std::fs::create_dir(elsewhere.join(UID)).unwrap();
        let linked = root.path().join("linked");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        assert!(rmdir_beneath(&linked.join(UID)).is_err());
        assert!(elsewhere.join(UID).is_dir());
        // Not empty: kept, and what is in it.
        let own = scratch.join(UID);
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("late"), b"x").unwrap();
        assert!(rmdir_beneath(&own).is_err());
        assert!(own.join("late").is_file());
        // Empty, reached without a link: removed.
        std::fs::remove_file(own.join("late")).unwrap();
        rmdir_beneath(&own).unwrap();
        assert!(!own.exists());
    }

    #[test]
    fn only_a_directory_named_by_its_one_pods_uid_is_its_own() {
        assert!(per_pod_owner(&due(&format!("/mnt/scratch/{UID}"), &[UID])).is_some());
        assert!(per_pod_owner(&due(&format!("/mnt/scratch/job-{UID}/"), &[UID])).is_some());
        // A parent named by the uid: the directory itself is not the one made for it.
        assert!(per_pod_owner(&due(&format!("/mnt/scratch/{UID}/work"), &[UID])).is_none());
        assert!(per_pod_owner(&due("/mnt/scratch/shared", &[UID])).is_none());
        // Two pods recorded it: shared, not one pod's own.
        assert!(per_pod_owner(&due(&format!("/mnt/scratch/{UID}"), &[UID, UID])).is_none());
        // Not a uid the API server makes: a short one would match many names.
        assert!(per_pod_owner(&due("/mnt/scratch/job-a", &["a"])).is_none());
    }
}
