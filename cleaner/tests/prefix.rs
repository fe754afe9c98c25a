//! Issue 32, finding 1: an allowed prefix behind a symlink (RHCOS `/mnt -> var/mnt`, a
//! data disk `/mnt/scratch -> /data/disk1`) is resolved once on the node, following only
//! links that root owns in directories only root can write ([`resolve_prefix`]).
//!
//! The node is a real tree on tmpfs (`/dev/shm`) opened as the node's root; links,
//! owners and modes are real, and the swap race is a real `renameat2(RENAME_EXCHANGE)`.

mod support;

use prestop_clean::resolve_prefix;
use rustix::fs::{openat, renameat_with, Mode, OFlags, RenameFlags, CWD};
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{lchown, symlink, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct NodeTree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    fd: OwnedFd,
}

impl NodeTree {
    fn new() -> Option<NodeTree> {
        if !support::is_root() {
            support::skip("root is needed: the rule is about who owns the links");
            return None;
        }
        let base = Path::new("/dev/shm");
        let dir = if base.is_dir() {
            tempfile::tempdir_in(base)
        } else {
            tempfile::tempdir()
        }
        .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().to_path_buf();
        let fd = openat(CWD, &root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        Some(NodeTree {
            _dir: dir,
            root,
            fd,
        })
    }

    fn dir(&self, path: &str) -> PathBuf {
        let at = self.at(path);
        fs::create_dir_all(&at).unwrap();
        at
    }

    fn link(&self, path: &str, target: &str) -> PathBuf {
        let at = self.at(path);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        symlink(target, &at).unwrap();
        at
    }

    fn at(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn resolve(&self, prefix: &str) -> Result<String, String> {
        resolve_prefix(self.fd.as_fd(), prefix.as_bytes())
            .map(|real| String::from_utf8(real).unwrap())
    }
}

#[test]
fn root_owned_links_in_root_only_directories_are_the_operators_layout() {
    let Some(node) = NodeTree::new() else { return };
    node.dir("/var/mnt/scratch");
    node.link("/mnt", "var/mnt");
    assert_eq!(
        node.resolve("/mnt/scratch").as_deref(),
        Ok("/var/mnt/scratch")
    );
    // A data disk, by an absolute link, which is the node's `/`, never the caller's.
    node.dir("/data/disk1");
    node.link("/srv/scratch", "/data/disk1");
    assert_eq!(node.resolve("/srv/scratch").as_deref(), Ok("/data/disk1"));
    assert_eq!(node.resolve("/srv/scratch/").as_deref(), Ok("/data/disk1"));
    // `..` above the node's root stays at it, as `/..` is `/`.
    node.link("/opt/up", "../../../../data/disk1");
    assert_eq!(node.resolve("/opt/up").as_deref(), Ok("/data/disk1"));
    // Without links, the prefix is itself.
    assert_eq!(node.resolve("/data/disk1").as_deref(), Ok("/data/disk1"));
}

#[test]
fn a_link_owned_by_a_user_is_refused() {
    let Some(node) = NodeTree::new() else { return };
    node.dir("/var/mnt/scratch");
    let link = node.link("/mnt", "var/mnt");
    lchown(&link, Some(1000), Some(1000)).unwrap();
    let why = node.resolve("/mnt/scratch").unwrap_err();
    assert!(why.contains("/mnt is a symlink owned by uid 1000"), "{why}");
}

#[test]
fn a_link_in_a_directory_a_user_can_write_is_refused() {
    let Some(node) = NodeTree::new() else { return };
    node.dir("/data/disk1");
    let shared = node.dir("/shared");
    node.link("/shared/scratch", "/data/disk1");
    for (mode, owner, said) in [
        (0o1777, 0, "others may write (mode 1777)"),
        (0o775, 0, "others may write (mode 0775)"),
        (0o755, 1000, "uid 1000 owns"),
    ] {
        fs::set_permissions(&shared, fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&shared, Some(owner), None).unwrap();
        let why = node.resolve("/shared/scratch").unwrap_err();
        assert!(why.contains(said) && why.contains("in /shared"), "{why}");
    }
    // The same link, once the directory is root's alone, is followed.
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&shared, Some(0), None).unwrap();
    assert_eq!(
        node.resolve("/shared/scratch").as_deref(),
        Ok("/data/disk1")
    );
}

#[test]
fn a_prefix_that_is_no_directory_is_refused() {
    let Some(node) = NodeTree::new() else { return };
    fs::write(node.at("/file"), b"x").unwrap();
    node.link("/loop", "/loop");
    node.link("/dangling", "/nowhere");
    for (prefix, said) in [
        ("/file", "is not a directory"),
        ("/loop/scratch", "a loop"),
        ("/dangling", "/nowhere"),
        ("/absent/scratch", "/absent"),
        ("relative", "not absolute"),
    ] {
        let why = node.resolve(prefix).unwrap_err();
        assert!(why.contains(said), "{prefix}: {why}");
    }
}

/// The attack on a link: a user swaps, as fast as it can, a component on the way between
/// the real disk and its own link to elsewhere (`RENAME_EXCHANGE`, atomic). Every answer
/// is the real disk or a refusal; never the user's directory.
#[test]
fn a_link_swapped_during_resolution_never_yields_another_directory() {
    let Some(node) = NodeTree::new() else { return };
    node.dir("/data/disk1");
    node.dir("/elsewhere");
    node.dir("/mnt");
    // /mnt is root's and 0755: its link is the operator's. /pool is the user's: whatever
    // is in it may be swapped by that user.
    node.link("/mnt/scratch", "/pool/disk");
    let pool = node.dir("/pool");
    fs::rename(node.at("/data/disk1"), pool.join("disk")).unwrap();
    let decoy = node.link("/pool/decoy", "/elsewhere");
    lchown(&decoy, Some(1000), Some(1000)).unwrap();
    std::os::unix::fs::chown(&pool, Some(1000), Some(1000)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let pool = pool.clone();
        std::thread::spawn(move || {
            let fd = openat(CWD, &pool, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                renameat_with(&fd, "disk", &fd, "decoy", RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut real, mut refused) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && (real < 50 || refused < 50) {
        match node.resolve("/mnt/scratch") {
            Ok(path) => {
                assert_eq!(path, "/pool/disk", "only the real disk");
                real += 1;
            }
            Err(why) => {
                assert!(
                    !why.contains("elsewhere") || why.contains("uid 1000"),
                    "{why}"
                );
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(
        swaps > 0 && real + refused > 0,
        "{swaps} swaps, {real} real, {refused} refused"
    );
}
